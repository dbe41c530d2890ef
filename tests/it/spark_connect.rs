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
    server: &SparkServer,
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
    let (report, progress) = run_in(bin, &remote, &["run", "--remote", &server.url]);
    let mut problems = String::new();
    for t in tables {
        let spark = spark_table(&server.warehouse, t);
        problems += &diff(t, &our_table(&here.join("pipeline-storage"), t), &spark);
        problems += &diff(t, &fixture(fixtures, t), &spark);
    }
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

    let server = SparkServer::start(&python, &tmp.path().join("spark-rust"));
    let started = std::time::Instant::now();
    let report = here_and_on_spark(
        &server,
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

    drop(server);

    // A new server: the SQL project's tables have the Rust project's names.
    let server = SparkServer::start(&python, &tmp.path().join("spark-sql"));
    let started = std::time::Instant::now();
    let sql = repo.join("tests/spark/connect/sql_remote");
    let report = here_and_on_spark(
        &server,
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

    // Spark's errors, tied to what they are about: a definition it refuses
    // (a database that does not exist), a flow failing at run time (ANSI
    // casts are Spark 4's default; here the cast gives NULL).
    let failing = tmp.path().join("failing");
    std::fs::create_dir_all(failing.join("transformations")).unwrap();
    copy_connect_data(&failing.join("data"));
    std::fs::write(
        failing.join("transformations/bad.sql"),
        "CREATE STREAMING TABLE bad_numbers AS SELECT CAST(click_id AS INT) AS n\n\
         FROM STREAM read_files('data/clicks', format => 'json', schema => 'click_id STRING, ts TIMESTAMP, ad_id STRING, user_id STRING');\n",
    )
    .unwrap();
    let spec = |database: &str| {
        std::fs::write(
            failing.join("pipeline.yml"),
            format!("name: failing\nstorage: ./storage\n{database}libraries:\n  - glob:\n      include: transformations/**\n"),
        )
        .unwrap();
    };
    let pipelines = Path::new(env!("CARGO_BIN_EXE_pipelines"));
    let remote = |dir: &Path| {
        let out = Command::new(pipelines)
            .arg("--spec")
            .arg(dir.join("pipeline.yml"))
            .args(["run", "--remote", &server.url])
            .current_dir(dir)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    spec("database: no_such_db\n");
    let (code, err) = remote(&failing);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.starts_with("error: pipeline `failing`: Spark refused it: [SCHEMA_NOT_FOUND] The schema `spark_catalog`.`no_such_db` cannot be found."),
        "{err}"
    );
    spec("");
    let (code, err) = remote(&failing);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("\nerror: flow `bad_numbers` (transformations/bad.sql:1:1) failed on Spark: [STREAM_FAILED] Query [id = ")
            && err.contains("terminated with exception: [CAST_INVALID_INPUT] The value 'c0")
            && !err.contains("=== Streaming Query ==="),
        "{err}"
    );
    drop(server);
}

/// A relation in short: `Op(inputs; details)`.
fn show(rel: &dp::connect::proto::Relation) -> String {
    use dp::connect::proto::read::ReadType;
    use dp::connect::proto::relation::RelType;
    let input = |r: &Option<Box<dp::connect::proto::Relation>>| show(r.as_deref().unwrap());
    match rel.rel_type.as_ref().unwrap() {
        RelType::Read(r) => match r.read_type.as_ref().unwrap() {
            ReadType::NamedTable(t) => format!(
                "Table({}{}{:?})",
                t.unparsed_identifier,
                if r.is_streaming { ", stream" } else { "" },
                t.options
                    .iter()
                    .collect::<std::collections::BTreeMap<_, _>>()
            ),
            ReadType::DataSource(d) => format!(
                "Files({}, {}, {:?}, {:?}{})",
                d.format.as_deref().unwrap(),
                d.schema.as_deref().unwrap_or("-"),
                d.paths,
                d.options
                    .iter()
                    .collect::<std::collections::BTreeMap<_, _>>(),
                if r.is_streaming { ", stream" } else { "" },
            ),
        },
        RelType::Filter(f) => format!(
            "Filter({}; {})",
            input(&f.input),
            expr_text(f.condition.as_ref().unwrap())
        ),
        RelType::Project(p) => format!(
            "Project({}; {})",
            input(&p.input),
            p.expressions
                .iter()
                .map(expr_text)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        RelType::Aggregate(a) => format!(
            "Aggregate({}; {}; {})",
            input(&a.input),
            a.grouping_expressions
                .iter()
                .map(expr_text)
                .collect::<Vec<_>>()
                .join(", "),
            a.aggregate_expressions
                .iter()
                .map(expr_text)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        RelType::Sql(s) => format!("Sql({})", s.query),
        RelType::WithWatermark(w) => format!(
            "Watermark({}; {}, {})",
            input(&w.input),
            w.event_time,
            w.delay_threshold
        ),
        RelType::Join(j) => format!(
            "Join({}, {}; {}; {})",
            input(&j.left),
            input(&j.right),
            j.join_condition.as_ref().map(expr_text).unwrap_or_default(),
            j.join_type
        ),
        RelType::SubqueryAlias(s) => format!("{} AS {}", input(&s.input), s.alias),
        RelType::SetOp(s) => format!("Union({}, {})", input(&s.left_input), input(&s.right_input)),
        RelType::Deduplicate(d) => format!(
            "Dedup({}; {:?}, within watermark {})",
            input(&d.input),
            d.column_names,
            d.within_watermark.unwrap_or_default()
        ),
        RelType::WithColumns(w) => format!(
            "WithColumns({}; {})",
            input(&w.input),
            w.aliases
                .iter()
                .map(|a| format!("{} AS {}", expr_text(a.expr.as_deref().unwrap()), a.name[0]))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => format!("{other:?}"),
    }
}

/// An expression in short: `f(args)`, `col`, `'text'`, `sql[...]`, `e AS n`.
fn expr_text(e: &dp::connect::proto::Expression) -> String {
    use dp::connect::proto::expression::literal::LiteralType;
    use dp::connect::proto::expression::ExprType;
    match e.expr_type.as_ref().unwrap() {
        ExprType::UnresolvedAttribute(a) => a.unparsed_identifier.clone(),
        ExprType::UnresolvedFunction(f) => format!(
            "{}({})",
            f.function_name,
            f.arguments
                .iter()
                .map(expr_text)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        ExprType::Literal(l) => match l.literal_type.as_ref().unwrap() {
            LiteralType::String(s) => format!("'{s}'"),
            LiteralType::Long(n) => n.to_string(),
            LiteralType::Integer(n) => n.to_string(),
            other => format!("{other:?}"),
        },
        ExprType::ExpressionString(s) => format!("sql[{}]", s.expression),
        ExprType::Alias(a) => format!("{} AS {}", expr_text(a.expr.as_deref().unwrap()), a.name[0]),
        ExprType::UnresolvedStar(_) => "*".into(),
        other => format!("{other:?}"),
    }
}

/// What `run --remote` sends for a pipeline, command by command: each
/// operation as the relation PySpark would build, the outputs' types, the
/// run's selections and storage; an AUTO CDC flow as its details.
#[test]
fn a_pipeline_becomes_spark_s_commands() {
    use dp::connect::proto::pipeline_command::{define_flow, define_output, CommandType};
    use dp::prelude::*;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(
        dir.join("pipeline.yml"),
        "name: commands\nstorage: ./storage\ndatabase: sales\nconfiguration:\n  spark.sql.shuffle.partitions: \"2\"\n  pipelines.checkpoint.fsync: \"true\"\nsinks:\n  out:\n    format: kafka\n    options:\n      kafka.bootstrap.servers: broker:9092\n      topic: counts\n",
    )
    .unwrap();
    let pipeline = dp::Pipeline::new()
        .table("raw", |s| {
            s.read_stream()
                .format("json")
                .schema("ts TIMESTAMP, country STRING, id STRING, op STRING, seq BIGINT")
                .option("maxFilesPerTrigger", "1")
                .load("data")
        })
        .table("us", |s| {
            s.read_stream()
                .option("maxFilesPerTrigger", "1")
                .table("raw")?
                .filter("country = 'US'")
        })
        .table("per_minute", |s| {
            s.read_stream_table("raw")?
                .with_watermark("ts", "30 seconds")?
                .group_by([window(col("ts"), "1 minute", "1 minute"), col("country")])
                .count()
        })
        .table("deduped", |s| {
            s.read_stream_table("raw")?
                .with_watermark("ts", "1 minute")?
                .drop_duplicates_within_watermark(["id"])
        })
        .materialized_view("by_country", |s| {
            s.read_table("raw")?
                .group_by([col("country")])
                .agg([count_all()])
        })
        .append_flow("to_out", "out", |s| {
            s.read_stream_table("us")?
                .select(["CAST(id AS STRING) AS key", "country AS value"])
        })
        .create_auto_cdc_flow(
            dp::cdc::AutoCdc::new("latest", "raw")
                .keys(["id"])
                .sequence_by("seq")
                .apply_as_deletes("op = 'DELETE'")
                .except_column_list(["op", "seq"])
                .stored_as_scd_type(2),
        )
        .create_streaming_table("latest", Default::default());
    let spec = dp::spec::load(&dir.join("pipeline.yml")).unwrap();
    let graph = pipeline.build(&spec).unwrap_or_else(|d| panic!("{d}"));
    let full_refresh = vec!["us".to_string()];
    let request = dp::remote::RemoteRequest {
        url: "sc://localhost",
        action: dp::remote::RemoteAction::Run,
        graph: &graph,
        spec: &spec,
        base_dir: dir,
        full_refresh: &full_refresh,
        full_refresh_all: false,
        refresh: &[],
    };
    let t = dp::connect::translate::translate(&request).unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(t.create.default_database.as_deref(), Some("sales"));
    assert_eq!(
        t.create.sql_conf.iter().collect::<Vec<_>>(),
        [(
            &"spark.sql.shuffle.partitions".to_string(),
            &"2".to_string()
        )],
        "this engine's settings stay here"
    );
    let data = std::fs::canonicalize(dir).unwrap().join("data");
    let mut outputs = Vec::new();
    let mut flows = std::collections::BTreeMap::new();
    for step in &t.steps {
        match &step.command {
            CommandType::DefineOutput(o) => outputs.push(format!(
                "{} {:?}{}",
                o.output_name.as_deref().unwrap(),
                dp::connect::proto::OutputType::try_from(o.output_type.unwrap()).unwrap(),
                match &o.details {
                    Some(define_output::Details::SinkDetails(s)) => format!(
                        " {} {:?}",
                        s.format.as_deref().unwrap(),
                        s.options
                            .iter()
                            .collect::<std::collections::BTreeMap<_, _>>()
                    ),
                    _ => String::new(),
                }
            )),
            CommandType::DefineFlow(f) => {
                let text = match f.details.as_ref().unwrap() {
                    define_flow::Details::RelationFlowDetails(r) => {
                        show(r.relation.as_ref().unwrap())
                    }
                    define_flow::Details::AutoCdcFlowDetails(c) => format!(
                        "AUTO CDC from {} keys {} sequence {} deletes {} except {} SCD {}",
                        c.source.as_deref().unwrap(),
                        c.keys.iter().map(expr_text).collect::<Vec<_>>().join(","),
                        expr_text(c.sequence_by.as_ref().unwrap()),
                        expr_text(c.apply_as_deletes.as_ref().unwrap()),
                        c.except_column_list
                            .iter()
                            .map(expr_text)
                            .collect::<Vec<_>>()
                            .join(","),
                        c.stored_as_scd_type
                    ),
                    other => format!("{other:?}"),
                };
                flows.insert(
                    f.flow_name.clone().unwrap(),
                    format!("→ {}: {text}", f.target_dataset_name.as_deref().unwrap()),
                );
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        outputs,
        [
            "by_country MaterializedView",
            "deduped Table",
            "latest Table",
            "out Sink kafka {\"kafka.bootstrap.servers\": \"broker:9092\", \"topic\": \"counts\"}",
            "per_minute Table",
            "raw Table",
            "us Table",
        ]
    );
    let raw = format!(
        "Files(json, ts TIMESTAMP, country STRING, id STRING, op STRING, seq BIGINT, [{:?}], {{\"maxFilesPerTrigger\": \"1\"}}, stream)",
        data.display().to_string()
    );
    let expected = [
        ("by_country", "→ by_country: Aggregate(Table(raw{}); country AS country; count(1) AS count)".to_string()),
        ("deduped", "→ deduped: Dedup(Sql(SELECT * FROM STREAM(raw) WATERMARK ts DELAY OF INTERVAL 1 minute); [\"id\"], within watermark true)".to_string()),
        ("latest", "→ latest: AUTO CDC from raw keys id sequence sql[seq] deletes sql[op = 'DELETE'] except op,seq SCD 2".to_string()),
        ("per_minute", "→ per_minute: Aggregate(Sql(SELECT * FROM STREAM(raw) WATERMARK ts DELAY OF INTERVAL 30 seconds); window(ts, '1 minute', '1 minute') AS window, country AS country; count(1) AS count)".to_string()),
        ("raw", format!("→ raw: {raw}")),
        ("to_out", "→ out: Project(Table(us, stream{}); sql[CAST(id AS STRING) AS key] AS key, sql[country AS value] AS value)".to_string()),
        ("us", "→ us: Filter(Table(raw, stream{\"maxFilesPerTrigger\": \"1\"}); sql[country = 'US'])".to_string()),
    ];
    for (flow, want) in expected {
        assert_eq!(flows.get(flow), Some(&want), "flow `{flow}`");
    }
    assert_eq!(flows.len(), 7, "{flows:#?}");
    assert_eq!(t.start.full_refresh_selection, ["us"]);
    assert_eq!(t.start.dry, Some(false));
    assert_eq!(
        t.start.storage.as_deref(),
        Some(
            format!(
                "file://{}",
                std::fs::canonicalize(dir)
                    .unwrap()
                    .join("storage")
                    .display()
            )
            .as_str()
        )
    );
}
