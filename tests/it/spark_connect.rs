//! `run --remote` / `dry-run --remote` on a real Spark Connect server (the
//! PyPI `pyspark` 4.3's, started by `tests/spark/connect/server.py` with the
//! venv's Python; scripts/test sets `PIPELINES_REQUIRE_SPARK_CONNECT=1`, so
//! there the server must start): a Rust-declared pipeline and a SQL project
//! give on Spark exactly the tables they give here. And what Spark cannot
//! run is refused before anything is sent.

use std::path::{Path, PathBuf};
use std::process::Command;

use pipelines as dp;

use crate::sql::cli;

/// The refusals, word for word: nothing is sent (the port is closed).
#[test]
fn dry_run_remote_refuses_a_foreach_batch_sink_and_a_rust_udf() {
    use datafusion::logical_expr::{create_udf, ColumnarValue, Volatility};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(
        dir.join("pipeline.yml"),
        "name: refusals\nstorage: ./storage\n",
    )
    .unwrap();
    dp::engine::sinks::register_foreach_batch("remote_alerts", |_, _| Ok(()));
    let score = create_udf(
        "score",
        vec![arrow::datatypes::DataType::Int64],
        arrow::datatypes::DataType::Int64,
        Volatility::Immutable,
        std::sync::Arc::new(|args: &[ColumnarValue]| Ok(args[0].clone())),
    );
    let pipeline = dp::Pipeline::new()
        .create_sink(
            "remote_alerts",
            "foreach_batch",
            std::iter::empty::<(&str, &str)>(),
        )
        .table("events", |s| {
            s.read_stream()
                .format("json")
                .schema("n BIGINT")
                .load("data")
        })
        .append_flow("scored", "remote_alerts", move |s| {
            s.read_stream_table("events")?
                .with_column("score", score.call(vec![dp::prelude::col("n")]))
        });
    let (code, out, err) = cli(pipeline, dir, &["dry-run", "--remote", "sc://127.0.0.1:9"]);
    assert_eq!(code, 1, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.starts_with("Pipeline `refusals` ("), "{out}");
    let file = "tests/it/spark_connect.rs";
    let source = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap();
    let line_of = |needle: &str| source.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let sink_line = line_of(".create_sink(\"remote_alerts\"");
    let flow_line = line_of(".append_flow(\"scored\"");
    assert_eq!(
        err,
        format!(
            "error: sink `remote_alerts` ({file}:{sink_line}): cannot run on Spark: a foreach-batch sink calls a Rust function, which Spark cannot run; write to a sink Spark has (kafka, delta, parquet, json, csv, orc, text, console) or run this pipeline on this engine\n\
             error: flow `scored` ({file}:{flow_line}): cannot run on Spark: it uses the Rust UDF `score`; Spark cannot run Rust code: express it with Spark SQL functions (as SQL text), or run this pipeline on this engine\n\
             2 errors; nothing was read or written.\n"
        )
    );
}

/// A bad URL is a usage error (exit 2) that shows how to write one, and a
/// closed port says the server cannot be reached.
#[test]
fn remote_urls_are_checked_and_an_absent_server_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(dir.join("pipeline.yml"), "name: urls\nstorage: ./storage\n").unwrap();
    let pipeline = || {
        dp::Pipeline::new().table("events", |s| {
            s.read_stream()
                .format("json")
                .schema("n BIGINT")
                .load("data")
        })
    };
    let (code, _, err) = cli(
        pipeline(),
        dir,
        &["run", "--remote", "http://127.0.0.1:15002"],
    );
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err,
        "error: --remote http://127.0.0.1:15002: not a remote URL this binary knows; write sc://, e.g. `--remote sc://localhost:15002`\n"
    );
    let (code, _, err) = cli(
        pipeline(),
        dir,
        &["run", "--remote", "sc://127.0.0.1:1/;token=s3cret"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.starts_with("error: cannot reach Spark Connect at sc://127.0.0.1:1: "),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "the token was shown: {err}");
    assert!(
        err.ends_with("  help: start a Spark Connect server (Spark's sbin/start-connect-server.sh) or check the host, port and token in --remote / SPARK_REMOTE\n"),
        "{err}"
    );
}

/// The venv's Python with PySpark, or None (the test is skipped unless
/// `PIPELINES_REQUIRE_SPARK_CONNECT` says it must run).
fn pyspark_python() -> Option<String> {
    let python = std::env::var("PIPELINES_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&python)
        .args(["-c", "import pyspark"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(python);
    }
    assert!(
        std::env::var_os("PIPELINES_REQUIRE_SPARK_CONNECT").is_none(),
        "PIPELINES_REQUIRE_SPARK_CONNECT is set but {python} has no pyspark (scripts/test installs it)"
    );
    eprintln!("skipped: no Python with pyspark (set PIPELINES_PYTHON)");
    None
}

/// A local Spark Connect server, stopped when dropped.
pub(crate) struct SparkServer {
    python: String,
    state: PathBuf,
    /// `sc://127.0.0.1:PORT`.
    pub url: String,
    /// The server's warehouse: its tables are `<warehouse>/<name>`.
    pub warehouse: PathBuf,
}

impl SparkServer {
    pub(crate) fn start(python: &str, dir: &Path) -> SparkServer {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/spark/connect/server.py");
        let warehouse = dir.join("warehouse");
        let state = dir.join("server.json");
        let out = Command::new(python)
            .arg(&script)
            .args(["start", "--warehouse"])
            .arg(&warehouse)
            .arg("--state")
            .arg(&state)
            .env("SPARK_LOCAL_IP", "127.0.0.1")
            .env("TZ", "UTC")
            .output()
            .expect("running server.py");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "the Spark Connect server did not start:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = stdout
            .lines()
            .find(|l| l.starts_with("sc://"))
            .expect("server.py prints the sc:// URL")
            .trim()
            .to_string();
        SparkServer {
            python: python.to_string(),
            state,
            url,
            warehouse,
        }
    }
}

impl Drop for SparkServer {
    fn drop(&mut self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/spark/connect/server.py");
        let _ = Command::new(&self.python)
            .arg(&script)
            .arg("stop")
            .arg("--state")
            .arg(&self.state)
            .output();
    }
}
