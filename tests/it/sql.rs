//! SQL library files through the command line: a project of YAML and SQL
//! runs like a Rust one, SQL and Rust datasets share one graph, and each
//! mistake gets its exact message with the file, line and column.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use pipelines as dp;

/// Runs the command line of a binary declaring `pipeline` (plus whatever
/// the spec's libraries declare); returns the exit code, stdout and stderr
/// with `dir/` removed from paths, as a user in `dir` would see them.
pub(crate) fn cli(pipeline: dp::Pipeline, dir: &Path, args: &[&str]) -> (u8, String, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let spec = dir.join("pipeline.yml");
    let argv: Vec<OsString> = ["pipelines", "--spec", spec.to_str().unwrap()]
        .into_iter()
        .chain(args.iter().copied())
        .map(OsString::from)
        .collect();
    let code = dp::cli::execute(pipeline, argv, &mut out, &mut err);
    let strip = |b: Vec<u8>| {
        String::from_utf8(b)
            .unwrap()
            .replace(&format!("{}/", dir.display()), "")
    };
    (code, strip(out), strip(err))
}

/// A project in a temporary directory: `pipeline.yml` with `transformations/**`
/// as its library, plus the given files.
pub(crate) fn project(files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    std::fs::write(
        dir.join("pipeline.yml"),
        "name: sql_test\nstorage: ./storage\nlibraries:\n  - glob:\n      include: transformations/**\n",
    )
    .unwrap();
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    (tmp, dir)
}

const RAW: &str = "CREATE STREAMING TABLE raw_events AS SELECT * FROM STREAM read_files(\n  'data',\n  format => 'json',\n  schema => 'ts TIMESTAMP, level STRING, n BIGINT'\n);\n";

fn dry_run_errors(files: &[(&str, &str)]) -> String {
    let (_tmp, dir) = project(files);
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let (code, out, err) = cli(dp::Pipeline::new(), &dir, &["dry-run"]);
    assert_eq!(code, 1, "dry-run passed:\n{out}");
    err
}

#[test]
fn a_syntax_error_names_the_file_line_and_column_with_a_caret() {
    let err = dry_run_errors(&[
        ("transformations/raw.sql", RAW),
        (
            "transformations/views.sql",
            "-- the view\nCREATE MATERIALIZED VIEW totals\n  SELCT level, count(*) AS n FROM raw_events GROUP BY level;\n",
        ),
    ]);
    assert_eq!(
        err,
        "error: transformations/views.sql:3:3: expected AS after the table name, found `SELCT`
  |
3 |   SELCT level, count(*) AS n FROM raw_events GROUP BY level;
  |   ^
  help: the statement is `CREATE MATERIALIZED VIEW name [(columns)] [COMMENT '...'] [PARTITIONED BY (...)] [TBLPROPERTIES (...)] AS query`
1 error; nothing was read or written.
"
    );
}

#[test]
fn errors_of_several_files_are_reported_together() {
    let err = dry_run_errors(&[
        (
            "transformations/a.sql",
            "CREATE STREAMING TABLE x AS SELEC 1;\n",
        ),
        (
            "transformations/b.sql",
            "CREATE TEMPORARY VIEW v AS SELECT * FROM t WHERE;\n",
        ),
    ]);
    let firsts: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert!(
        err.ends_with("\n2 errors; nothing was read or written.\n"),
        "{err}"
    );
    assert_eq!(
        firsts,
        [
            "error: transformations/a.sql:1:29: expected SELECT, VALUES, or a subquery in the query body, found `SELEC`",
            "error: transformations/b.sql:1:49: expected an expression, found the end of the query",
        ],
        "{err}"
    );
}

#[test]
fn an_unknown_table_gets_a_did_you_mean() {
    let err = dry_run_errors(&[
        ("transformations/raw.sql", RAW),
        (
            "transformations/errors.sql",
            "CREATE STREAMING TABLE errors\nAS SELECT * FROM STREAM(raw_event) WHERE level = 'ERROR';\n",
        ),
    ]);
    assert_eq!(
        err,
        "error: flow `errors` (transformations/errors.sql:1:1): reads `raw_event`, which is not declared
  help: did you mean `raw_events`? or declare it with CREATE STREAMING TABLE / CREATE MATERIALIZED VIEW / CREATE TEMPORARY VIEW, or under `tables:` in the spec
1 error; nothing was read or written.
"
    );
}

#[test]
fn a_cycle_between_sql_datasets_is_an_error() {
    let err = dry_run_errors(&[(
        "transformations/cycle.sql",
        "CREATE STREAMING TABLE a AS SELECT * FROM STREAM(b);\nCREATE STREAMING TABLE b AS SELECT * FROM STREAM(a);\n",
    )]);
    assert_eq!(
        err,
        "error: flow `b` (transformations/cycle.sql:2:1): datasets depend on each other in a cycle: `a` → (flow `b`) → `b` → (flow `a`) → `a`
  help: a flow cannot read, directly or through other flows, the dataset it writes; read a source or an upstream dataset instead
1 error; nothing was read or written.
"
    );
}

#[test]
fn an_update_flow_into_a_delta_table_is_refused() {
    let err = dry_run_errors(&[
        ("transformations/raw.sql", RAW),
        (
            "transformations/counts.sql",
            "CREATE STREAMING TABLE counts;\nSET pipelines.outputMode = update;\nCREATE FLOW count_levels AS INSERT INTO counts BY NAME\nSELECT level, count(*) AS n FROM STREAM(raw_events) GROUP BY level;\n",
        ),
    ]);
    assert_eq!(
        err,
        "error: flow `count_levels` (transformations/counts.sql:3:1): update flows can only target sinks; `counts` is a Delta streaming table (accepts append, complete)
  help: write into a sink declared under `sinks:` in the spec, or remove `SET pipelines.outputMode = update`
1 error; nothing was read or written.
"
    );
}

#[test]
fn a_python_library_file_is_refused_by_name() {
    let err = dry_run_errors(&[
        ("transformations/raw.sql", RAW),
        (
            "transformations/x.py",
            "from pyspark import pipelines as dp\n",
        ),
    ]);
    assert_eq!(
        err,
        "error: pipeline.yml:4: `transformations/x.py`: Python library files are not supported; port it to SQL or Rust\n1 error; nothing was read or written.\n"
    );
}

/// The SQL project of `tests/sql_pipeline/` (its `transformations/` as Spark
/// ran them, and our `raw_events` over `read_files`), in a temporary
/// directory with a spec like the one Spark ran.
fn fixture_project() -> (tempfile::TempDir, PathBuf) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sql_pipeline");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    // Files are read oldest first (then by name), as in Spark: the copies
    // get modification times in name order, a second apart, as Spark's had.
    let start = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for sub in ["transformations", "ours", "data/events"] {
        let to = dir.join(sub);
        std::fs::create_dir_all(&to).unwrap();
        let mut names: Vec<_> = std::fs::read_dir(src.join(sub))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        for (i, name) in names.iter().enumerate() {
            std::fs::copy(src.join(sub).join(name), to.join(name)).unwrap();
            std::fs::File::options()
                .write(true)
                .open(to.join(name))
                .unwrap()
                .set_modified(start + std::time::Duration::from_secs(i as u64))
                .unwrap();
        }
    }
    std::fs::write(
        dir.join("pipeline.yml"),
        "name: sql_fixture\nstorage: ./storage\nconfiguration:\n  spark.sql.session.timeZone: UTC\n  spark.sql.shuffle.partitions: \"2\"\nlibraries:\n  - glob:\n      include: transformations/**\n  - glob:\n      include: ours/**\n",
    )
    .unwrap();
    (tmp, dir)
}

/// A table's rows as the fixtures write them: one JSON object a line, keys
/// in column order, timestamps `YYYY-MM-DD HH:MM:SS[.ffffff]` (UTC), lists
/// of strings as JSON arrays; sorted.
pub(crate) fn table_lines(batches: &[arrow::record_batch::RecordBatch]) -> Vec<String> {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{DataType, Int64Type, TimeUnit, TimestampMicrosecondType};
    let mut lines = Vec::new();
    for b in batches {
        for row in 0..b.num_rows() {
            let mut parts = Vec::new();
            for (i, field) in b.schema().fields().iter().enumerate() {
                let col = b.column(i);
                let value = if col.is_null(row) {
                    "null".to_string()
                } else {
                    match field.data_type() {
                        DataType::Int64 => col.as_primitive::<Int64Type>().value(row).to_string(),
                        DataType::Utf8 => {
                            serde_json::to_string(col.as_string::<i32>().value(row)).unwrap()
                        }
                        DataType::Timestamp(TimeUnit::Microsecond, _) => {
                            let us = col.as_primitive::<TimestampMicrosecondType>().value(row);
                            let t = chrono::DateTime::from_timestamp_micros(us)
                                .unwrap()
                                .naive_utc();
                            let text = if us % 1_000_000 == 0 {
                                t.format("%Y-%m-%d %H:%M:%S").to_string()
                            } else {
                                t.format("%Y-%m-%d %H:%M:%S%.6f").to_string()
                            };
                            serde_json::to_string(&text).unwrap()
                        }
                        DataType::List(_) => {
                            let items = col.as_list::<i32>().value(row);
                            let items = items.as_string::<i32>();
                            let texts: Vec<&str> =
                                (0..items.len()).map(|i| items.value(i)).collect();
                            serde_json::to_string(&texts).unwrap()
                        }
                        other => panic!("column `{}`: no rendering for {other}", field.name()),
                    }
                };
                parts.push(format!(
                    "{}:{value}",
                    serde_json::to_string(field.name()).unwrap()
                ));
            }
            lines.push(format!("{{{}}}", parts.join(",")));
        }
    }
    lines.sort();
    lines
}

#[test]
fn the_sql_project_gives_the_tables_spark_gives() {
    let (_tmp, dir) = fixture_project();
    let (code, out, err) = cli(dp::Pipeline::new(), &dir, &["run"]);
    assert_eq!(code, 0, "{out}\n{err}");
    // A materialized view counts the rows it read.
    assert!(
        out.contains("  errors_by_service        1 batch, 51 rows in, 3 rows out\n"),
        "{out}"
    );
    let expected_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sql_pipeline/expected");
    for table in [
        "raw_events",
        "errors",
        "errors_by_service",
        "api_events",
        "counts_10m",
        "big_values",
    ] {
        let batches = dp::delta::read_table(dir.join("storage/tables").join(table))
            .unwrap()
            .unwrap_or_else(|| panic!("table `{table}` was not written"));
        let mut expected: Vec<String> =
            std::fs::read_to_string(expected_dir.join(format!("{table}.jsonl")))
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect();
        expected.sort();
        assert_eq!(table_lines(&batches), expected, "table `{table}`\n{out}");
    }
}

#[test]
fn init_sql_writes_a_project_the_binary_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("clicks");
    let (code, out, err) = cli(
        dp::Pipeline::new(),
        tmp.path(),
        &[
            "init",
            "--name",
            "clicks",
            "--sql",
            "--dir",
            dir.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.ends_with("Next: cd clicks && pipelines dry-run\n"),
        "{out}"
    );
    for f in [
        "pipeline.yml",
        "transformations/events.sql",
        "data/events/part-0000.json",
        ".gitignore",
    ] {
        assert!(dir.join(f).exists(), "{f} missing");
    }
    assert!(!dir.join("Cargo.toml").exists());
    let (code, out, err) = cli(dp::Pipeline::new(), &dir, &["run"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let events = include_str!("../../crates/core/src/init/events.json");
    let clicks = events.lines().filter(|l| l.contains("\"click\"")).count();
    let all = events.lines().count();
    assert!(
        out.contains(&format!(
            "  clicks                   1 batch, {all} rows in, {clicks} rows out\n"
        )),
        "{out}"
    );
}

#[test]
fn sql_and_rust_datasets_share_one_graph() {
    // Rust declares the raw table and reads the SQL table; SQL reads the Rust
    // one, naming it in another case (SQL names are case-insensitive).
    let (_tmp, dir) = project(&[(
        "transformations/errors.sql",
        "CREATE STREAMING TABLE errors AS\nSELECT level, n * 10 AS n10 FROM STREAM(Raw_Events) WHERE level = 'ERROR';\n",
    )]);
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(
        dir.join("data/part-0.json"),
        "{\"ts\":\"2026-11-01T10:00:00Z\",\"level\":\"ERROR\",\"n\":1}\n{\"ts\":\"2026-11-01T10:00:01Z\",\"level\":\"INFO\",\"n\":2}\n{\"ts\":\"2026-11-01T10:00:02Z\",\"level\":\"ERROR\",\"n\":3}\n",
    )
    .unwrap();
    let pipeline = dp::Pipeline::new()
        .table("raw_events", |s: &dp::Session| {
            s.read_stream()
                .format("json")
                .schema("ts TIMESTAMP, level STRING, n BIGINT")
                .load("data")
        })
        .create_sink(
            "sql_rust_errors",
            "memory",
            [("queryName", "sql_rust_errors")],
        )
        .append_flow("to_memory", "sql_rust_errors", |s: &dp::Session| {
            s.read_stream_table("errors")?.select_expr(["n10"])
        });
    let (code, out, err) = cli(pipeline, &dir, &["run"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let rows: Vec<i64> = dp::engine::sinks::memory_table("sql_rust_errors")
        .unwrap()
        .rows()
        .iter()
        .flat_map(|b| {
            use arrow::array::AsArray;
            b.column(0)
                .as_primitive::<arrow::datatypes::Int64Type>()
                .values()
                .to_vec()
        })
        .collect();
    assert_eq!(rows, [10, 30]);
}

/// Runs a project and returns each named table's rows, rendered and sorted.
fn run_tables(dir: &Path, tables: &[&str]) -> Vec<Vec<String>> {
    let (code, out, err) = cli(dp::Pipeline::new(), dir, &["run"]);
    assert_eq!(code, 0, "{out}\n{err}");
    tables
        .iter()
        .map(|t| {
            let batches = dp::delta::read_table(dir.join("storage/tables").join(t))
                .unwrap()
                .unwrap_or_else(|| panic!("table `{t}` was not written"));
            table_lines(&batches)
        })
        .collect()
}

#[test]
fn batch_queries_join_union_group_and_sort_like_spark_sql() {
    let (_tmp, dir) = project(&[
        (
            "transformations/raw.sql",
            "CREATE MATERIALIZED VIEW events AS SELECT * FROM read_files('data/events', format => 'json', schema => 'user_id STRING, level STRING, n BIGINT');\n\
             CREATE MATERIALIZED VIEW users AS SELECT * FROM read_files('data/users', format => 'json', schema => 'id STRING, country STRING');\n",
        ),
        (
            "transformations/queries.sql",
            "-- A join ON, qualified names\n\
             CREATE MATERIALIZED VIEW joined AS\n\
             SELECT e.user_id, u.country, e.n FROM events AS e JOIN users u ON e.user_id = u.id WHERE e.n > 1;\n\
             -- LEFT JOIN USING after a subquery renames the key\n\
             CREATE MATERIALIZED VIEW left_joined AS\n\
             SELECT * FROM events LEFT JOIN (SELECT id AS user_id, country FROM users) USING (user_id);\n\
             -- UNION (distinct) and UNION ALL\n\
             CREATE MATERIALIZED VIEW ids AS SELECT user_id FROM events UNION SELECT id AS user_id FROM users;\n\
             CREATE MATERIALIZED VIEW ids_all AS SELECT user_id FROM events UNION ALL SELECT id FROM users;\n\
             -- GROUP BY with expressions over aggregates, HAVING, ORDER BY, LIMIT, a CTE\n\
             CREATE MATERIALIZED VIEW levels AS\n\
             WITH e AS (SELECT * FROM events WHERE user_id <> 'u9')\n\
             SELECT lower(level) AS level, count(*) AS rows, sum(n) * 10 AS n10 FROM e\n\
             GROUP BY lower(level) HAVING rows > 1 ORDER BY n10 DESC LIMIT 2;\n\
             -- DISTINCT, and an unaliased aggregate named by its text\n\
             CREATE MATERIALIZED VIEW distinct_levels AS SELECT DISTINCT level FROM events WHERE level <> \"DEBUG\";\n\
             CREATE MATERIALIZED VIEW total AS SELECT max(n) FROM events;\n\
             -- `*` with more columns; a Spark string in double quotes\n\
             CREATE MATERIALIZED VIEW starred AS SELECT *, n * 2 AS n2 FROM events WHERE user_id = \"u3\";\n",
        ),
        (
            "data/events/part-0.json",
            "{\"user_id\":\"u1\",\"level\":\"ERROR\",\"n\":1}\n{\"user_id\":\"u1\",\"level\":\"INFO\",\"n\":2}\n{\"user_id\":\"u2\",\"level\":\"ERROR\",\"n\":3}\n{\"user_id\":\"u3\",\"level\":\"WARN\",\"n\":4}\n{\"user_id\":\"u9\",\"level\":\"WARN\",\"n\":5}\n{\"user_id\":\"u2\",\"level\":\"info\",\"n\":6}\n",
        ),
        (
            "data/users/part-0.json",
            "{\"id\":\"u1\",\"country\":\"FR\"}\n{\"id\":\"u2\",\"country\":\"DE\"}\n{\"id\":\"u4\",\"country\":\"IT\"}\n",
        ),
    ]);
    let got = run_tables(
        &dir,
        &[
            "joined",
            "left_joined",
            "ids",
            "ids_all",
            "levels",
            "distinct_levels",
            "total",
            "starred",
        ],
    );
    let lines = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        got[0],
        lines(&[
            r#"{"user_id":"u1","country":"FR","n":2}"#,
            r#"{"user_id":"u2","country":"DE","n":3}"#,
            r#"{"user_id":"u2","country":"DE","n":6}"#,
        ])
    );
    assert_eq!(
        got[1],
        lines(&[
            r#"{"user_id":"u1","level":"ERROR","n":1,"country":"FR"}"#,
            r#"{"user_id":"u1","level":"INFO","n":2,"country":"FR"}"#,
            r#"{"user_id":"u2","level":"ERROR","n":3,"country":"DE"}"#,
            r#"{"user_id":"u2","level":"info","n":6,"country":"DE"}"#,
            r#"{"user_id":"u3","level":"WARN","n":4,"country":null}"#,
            r#"{"user_id":"u9","level":"WARN","n":5,"country":null}"#,
        ])
    );
    assert_eq!(
        got[2],
        lines(&[
            r#"{"user_id":"u1"}"#,
            r#"{"user_id":"u2"}"#,
            r#"{"user_id":"u3"}"#,
            r#"{"user_id":"u4"}"#,
            r#"{"user_id":"u9"}"#,
        ])
    );
    assert_eq!(got[3].len(), 9);
    // info: u1 2 + u2 6 → 2 rows, 80; error: 1 + 3 → 2 rows, 40; warn has one row once u9 is left out.
    assert_eq!(
        got[4],
        lines(&[
            r#"{"level":"error","rows":2,"n10":40}"#,
            r#"{"level":"info","rows":2,"n10":80}"#,
        ])
    );
    assert_eq!(
        got[5],
        lines(&[
            r#"{"level":"ERROR"}"#,
            r#"{"level":"INFO"}"#,
            r#"{"level":"WARN"}"#,
            r#"{"level":"info"}"#,
        ])
    );
    assert_eq!(got[6], lines(&[r#"{"max(n)":6}"#]));
    assert_eq!(
        got[7],
        lines(&[r#"{"user_id":"u3","level":"WARN","n":4,"n2":8}"#])
    );
}

#[test]
fn spark_s_watermark_rule_applies_to_sql_flows_with_a_sql_fix() {
    let err = dry_run_errors(&[
        ("transformations/raw.sql", RAW),
        (
            "transformations/counts.sql",
            "CREATE STREAMING TABLE counts AS\nSELECT level, count(*) AS n FROM STREAM(raw_events) GROUP BY level;\n",
        ),
    ]);
    assert_eq!(
        err,
        "error: flow `counts` (transformations/counts.sql:1:1): append output mode needs a watermark on the aggregation's event-time key, and `group_by(level)` has none
  help: add `WATERMARK ts DELAY OF INTERVAL 10 MINUTES` after the streaming read and group by `window(ts, …)`, or use update mode (`SET pipelines.outputMode = update;` before a CREATE FLOW into a sink) or complete mode (`SET pipelines.outputMode = complete;` before the statement)
1 error; nothing was read or written.
"
    );
}

#[test]
fn library_entries_name_files_and_folders_as_spark_does() {
    // A file entry and a folder entry; a README in the folder is refused by name.
    let (_tmp, dir) = project(&[
        ("transformations/raw.sql", RAW),
        ("transformations/README.md", "notes\n"),
        ("extra/errors.sql", "CREATE STREAMING TABLE errors AS SELECT * FROM STREAM(raw_events) WHERE level = 'ERROR';\n"),
    ]);
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(
        dir.join("pipeline.yml"),
        "name: sql_test\nstorage: ./storage\nlibraries:\n  - glob:\n      include: transformations/**\n  - glob:\n      include: extra/errors.sql\n  - glob:\n      include: missing/**\n",
    )
    .unwrap();
    let (code, _, err) = cli(dp::Pipeline::new(), &dir, &["dry-run"]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "error: pipeline.yml:8: library folder `missing` does not exist
  help: point the entry at a file or a folder below the spec's directory, e.g. `transformations/**`
error: pipeline.yml:4: `transformations/README.md` is not a library file: only .sql files are read
  help: move it out of the library folder, or list the library files one by one
2 errors; nothing was read or written.
"
    );
    std::fs::remove_file(dir.join("transformations/README.md")).unwrap();
    std::fs::write(
        dir.join("pipeline.yml"),
        "name: sql_test\nstorage: ./storage\nlibraries:\n  - glob:\n      include: transformations/**\n  - glob:\n      include: extra/errors.sql\n",
    )
    .unwrap();
    let (code, out, err) = cli(dp::Pipeline::new(), &dir, &["dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("Pipeline `sql_test` (pipeline.yml) is valid: 2 datasets, 2 flows."),
        "{out}"
    );
}
