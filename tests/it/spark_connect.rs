//! `run --remote` / `dry-run --remote` on a real Spark Connect server (the
//! PyPI `pyspark` 4.3's, started by `tests/spark/connect/server.py` with the
//! venv's Python; scripts/test sets `PIPELINES_REQUIRE_SPARK_CONNECT=1`, so
//! there the server must start): a Rust-declared pipeline and a SQL project
//! give on Spark exactly the tables they give here. And what Spark cannot
//! run is refused before anything is sent.

use std::path::{Path, PathBuf};
use std::process::Command;

use pipelines as dp;

use crate::spark_connect_local::{
    copy_connect_data, diff, example_binary, fixture, Tsv, ADS_TABLES,
};
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
    let sink_line = line_of(".create_sink(");
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

/// Spark's table `name` in its warehouse: every Parquet file of the
/// directory (a completed run leaves no uncommitted ones), as fixture rows.
fn spark_table(warehouse: &Path, name: &str) -> Tsv {
    use arrow::record_batch::RecordBatchReader;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let dir = warehouse.join(name);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("Spark wrote no table `{name}` ({}): {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .collect();
    files.sort();
    let mut schema = None;
    let mut batches = Vec::new();
    for f in files {
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&f).unwrap())
            .unwrap()
            .build()
            .unwrap();
        schema.get_or_insert(reader.schema());
        batches.extend(reader.map(|b| b.unwrap()));
    }
    let schema = schema.unwrap_or_else(|| panic!("table `{name}` has no data file"));
    Tsv::from_batches(&schema, &batches)
}

/// Our table `name` (Delta, the default format) under `storage`.
fn our_table(storage: &Path, name: &str) -> Tsv {
    let path = storage.join("tables").join(name);
    let schema =
        dp::delta::table_schema(path.as_path()).unwrap_or_else(|e| panic!("table `{name}`: {e}"));
    let batches = dp::delta::read_table(path.as_path())
        .unwrap()
        .unwrap_or_else(|| panic!("table `{name}` was not written"));
    Tsv::from_batches(&schema, &batches)
}

/// Runs `bin` in `dir` with `args`; its stdout and stderr, or a panic with both.
fn run_in(bin: &Path, dir: &Path, args: &[&str]) -> (String, String) {
    let out = Command::new(bin)
        .current_dir(dir)
        .env("CONNECT_TEST_DATA", dir.join("data"))
        .env_remove("SPARK_REMOTE")
        .arg("--spec")
        .arg(dir.join("pipeline.yml"))
        .args(args)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success(),
        "{} {args:?} failed:\n{stdout}\n{stderr}",
        bin.display()
    );
    (stdout, stderr)
}

/// A copy of a project (its spec and SQL files) with the reference data in `data/`.
fn project_copy(spec: &Path, sql: Option<&Path>, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::copy(spec, dir.join("pipeline.yml")).unwrap();
    if let Some(sql) = sql {
        let to = dir.join("transformations");
        std::fs::create_dir_all(&to).unwrap();
        for f in std::fs::read_dir(sql).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
        }
    }
    copy_connect_data(&dir.join("data"));
}

/// One project run here and on Spark: every table equal to ours and to
/// Spark's fixture for the reference project; the run's report.
fn here_and_on_spark(
    python: &str,
    work: &Path,
    bin: &Path,
    spec: &Path,
    sql: Option<&Path>,
    tables: &[&str],
    fixtures: &str,
) -> String {
    let here = work.join("here");
    project_copy(spec, sql, &here);
    run_in(bin, &here, &["run"]);
    let remote = work.join("remote");
    project_copy(spec, sql, &remote);
    let server = SparkServer::start(python, &work.join("spark"));
    let (report, progress) = run_in(bin, &remote, &["run", "--remote", &server.url]);
    let mut problems = String::new();
    for t in tables {
        let spark = spark_table(&server.warehouse, t);
        problems += &diff(t, &our_table(&here.join("pipeline-storage"), t), &spark);
        problems += &diff(t, &fixture(fixtures, t), &spark);
    }
    drop(server);
    assert!(
        problems.is_empty(),
        "{problems}\nthe remote run:\n{report}\n{progress}"
    );
    // Every flow ran there, and the run is in our event log.
    assert!(report.contains(": COMPLETED in "), "{report}");
    let events =
        std::fs::read_to_string(remote.join("pipeline-storage/event_log/events.jsonl")).unwrap();
    assert!(events.contains("\"remote_run\""), "{events}");
    assert!(events.contains("Run is COMPLETED."), "{events}");
    report
}

/// The Rust-declared twin of Spark's reference project (file sources, a
/// filter, `with_column`, a watermark and windowed count, deduplication
/// within the watermark, a stream-stream join, a union, a materialized
/// view) and a SQL project (`read_files` sources translated from their
/// plans, Spark SQL sent as text: a temporary view, a `WATERMARK` clause, a
/// materialized view, `CREATE FLOW ... INSERT INTO`), each run here and
/// through `run --remote` on a local Spark Connect server: Spark's tables
/// equal ours and Spark's own answers for the reference projects.
#[test]
fn rust_and_sql_pipelines_give_on_spark_the_tables_they_give_here() {
    let Some(python) = pyspark_python() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));

    let started = std::time::Instant::now();
    let report = here_and_on_spark(
        &python,
        &tmp.path().join("rust"),
        &example_binary("spark_connect_ads"),
        &repo.join("examples/spark_connect_ads/pipeline.yml"),
        None,
        &ADS_TABLES,
        "python_project",
    );
    eprintln!(
        "Rust project ({:.1} s in all):\n{report}",
        started.elapsed().as_secs_f64()
    );

    let started = std::time::Instant::now();
    let sql = repo.join("tests/spark/connect/sql_remote");
    let report = here_and_on_spark(
        &python,
        &tmp.path().join("sql"),
        Path::new(env!("CARGO_BIN_EXE_pipelines")),
        &sql.join("pipeline.yml"),
        Some(&sql.join("transformations")),
        &[
            "impressions",
            "clicks",
            "us_impressions",
            "impressions_per_minute",
            "clicks_per_ad",
            "click_log",
        ],
        "sql_project",
    );
    eprintln!(
        "SQL project ({:.1} s in all):\n{report}",
        started.elapsed().as_secs_f64()
    );
}
