//! AUTO CDC end to end into Delta tables: the documented worked example in
//! SQL (SCD 1 and 2) and through the Rust builder, table by table after
//! each micro-batch; a batch replayed after a failure before its commit;
//! the dry-run checks with their exact messages.

use std::path::Path;

use arrow::array::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use pipelines as dp;
use pipelines::cdc::AutoCdc;
use pipelines::engine::runtime::{inject_failure, run, RunOptions};

use crate::sql::{cli, project};

/// Rows as `a|b|c` (NULL as `null`), sorted.
fn lines(batches: &[RecordBatch]) -> Vec<String> {
    let options = FormatOptions::default().with_null("null");
    let mut out = Vec::new();
    for b in batches {
        let fmts: Vec<ArrayFormatter> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).unwrap())
            .collect();
        for i in 0..b.num_rows() {
            out.push(
                fmts.iter()
                    .map(|f| f.value(i).to_string())
                    .collect::<Vec<_>>()
                    .join("|"),
            );
        }
    }
    out.sort();
    out
}

fn table(dir: &Path, name: &str) -> Vec<String> {
    let batches = dp::delta::read_table(dir.join("storage/tables").join(name))
        .unwrap()
        .unwrap_or_else(|| panic!("table `{name}` was not written"));
    lines(&batches)
}

fn columns(dir: &Path, name: &str) -> Vec<String> {
    let batches = dp::delta::read_table(dir.join("storage/tables").join(name))
        .unwrap()
        .unwrap();
    batches[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect()
}

/// Databricks' worked example, as two files of change events.
const FIRST: &[&str] = &[
    r#"{"id":124,"name":"Raul","city":"Oaxaca","operation":"INSERT","seq":1}"#,
    r#"{"id":123,"name":"Isabel","city":"Monterrey","operation":"INSERT","seq":1}"#,
    r#"{"id":125,"name":"Mercedes","city":"Tijuana","operation":"INSERT","seq":2}"#,
    r#"{"id":126,"name":"Lily","city":"Cancun","operation":"INSERT","seq":2}"#,
];
const SECOND: &[&str] = &[
    r#"{"id":123,"name":null,"city":null,"operation":"DELETE","seq":6}"#,
    r#"{"id":125,"name":"Mercedes","city":"Guadalajara","operation":"UPDATE","seq":6}"#,
    r#"{"id":125,"name":"Mercedes","city":"Mexicali","operation":"UPDATE","seq":5}"#,
    r#"{"id":123,"name":"Isabel","city":"Chihuahua","operation":"UPDATE","seq":5}"#,
];

fn write(dir: &Path, name: &str, lines: &[&str]) {
    std::fs::create_dir_all(dir.join("cdc")).unwrap();
    std::fs::write(dir.join("cdc").join(name), lines.join("\n") + "\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(15));
}

const FEED_SQL: &str = "CREATE STREAMING TABLE customers_cdc AS SELECT * FROM STREAM read_files(
  'cdc',
  format => 'json',
  schema => 'id BIGINT, name STRING, city STRING, operation STRING, seq BIGINT'
);
";

const CDC_SQL: &str = "SET pipelines.cdc.tombstoneGCThresholdInSeconds = 86400;

CREATE STREAMING TABLE customers
FLOW AUTO CDC FROM STREAM(customers_cdc)
KEYS (id)
APPLY AS DELETE WHEN operation = 'DELETE'
SEQUENCE BY seq
COLUMNS * EXCEPT (operation, seq);

CREATE STREAMING TABLE customers_history;

CREATE FLOW customers_history_flow AS AUTO CDC INTO customers_history
FROM STREAM(customers_cdc)
KEYS (id)
SEQUENCE BY seq
STORED AS SCD TYPE 2
APPLY AS DELETE WHEN operation = 'DELETE'
COLUMNS * EXCEPT (operation, seq);
";

#[test]
fn sql_auto_cdc_gives_the_documented_scd1_and_scd2_tables_after_each_batch() {
    let (_tmp, dir) = project(&[
        ("transformations/feed.sql", FEED_SQL),
        ("transformations/customers.sql", CDC_SQL),
    ]);
    write(&dir, "1.json", FIRST);
    let (code, out, err) = cli(dp::Pipeline::new(), &dir, &["run"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(columns(&dir, "customers"), ["id", "name", "city"]);
    assert_eq!(
        table(&dir, "customers"),
        [
            "123|Isabel|Monterrey",
            "124|Raul|Oaxaca",
            "125|Mercedes|Tijuana",
            "126|Lily|Cancun"
        ]
    );
    assert_eq!(
        columns(&dir, "customers_history"),
        ["id", "name", "city", "__START_AT", "__END_AT"]
    );
    assert_eq!(
        table(&dir, "customers_history"),
        [
            "123|Isabel|Monterrey|1|null",
            "124|Raul|Oaxaca|1|null",
            "125|Mercedes|Tijuana|2|null",
            "126|Lily|Cancun|2|null"
        ]
    );

    write(&dir, "2.json", SECOND);
    let (code, out, err) = cli(dp::Pipeline::new(), &dir, &["run"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(
        table(&dir, "customers"),
        [
            "124|Raul|Oaxaca",
            "125|Mercedes|Guadalajara",
            "126|Lily|Cancun"
        ]
    );
    assert_eq!(
        table(&dir, "customers_history"),
        [
            "123|Isabel|Chihuahua|5|6",
            "123|Isabel|Monterrey|1|5",
            "124|Raul|Oaxaca|1|null",
            "125|Mercedes|Guadalajara|6|null",
            "125|Mercedes|Mexicali|5|6",
            "125|Mercedes|Tijuana|2|5",
            "126|Lily|Cancun|2|null"
        ]
    );
}

fn builder_pipeline(flow: &str, scd: u8) -> dp::Pipeline {
    dp::Pipeline::new()
        .table("customers_cdc", |s: &dp::Session| {
            s.read_stream()
                .format("json")
                .schema("id BIGINT, name STRING, city STRING, operation STRING, seq BIGINT")
                .load("cdc")
        })
        .create_streaming_table("customers", dp::TableOptions::default())
        .create_auto_cdc_flow(
            AutoCdc::new("customers", "customers_cdc")
                .name(flow)
                .keys(["id"])
                .sequence_by("seq")
                .apply_as_deletes("operation = 'DELETE'")
                .except_column_list(["operation", "seq"])
                .stored_as_scd_type(scd)
                .conf("pipelines.cdc.tombstoneGCThresholdInSeconds", "3600"),
        )
}

fn spec(dir: &Path) -> dp::spec::PipelineSpec {
    dp::spec::parse_str("name: cdc\nstorage: ./storage\n", &dir.join("pipeline.yml")).unwrap()
}

/// The `operation` of each commit of the Delta table at `path`.
fn operations(path: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for v in 0.. {
        let p = path.join(format!("_delta_log/{v:020}.json"));
        let Ok(text) = std::fs::read_to_string(&p) else {
            break;
        };
        for l in text.lines() {
            let j: serde_json::Value = serde_json::from_str(l).unwrap();
            if let Some(op) = j.pointer("/commitInfo/operation").and_then(|o| o.as_str()) {
                out.push(op.to_string());
            }
        }
    }
    out
}

#[test]
fn a_builder_flow_appends_new_keys_merges_changes_and_skips_a_replayed_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let p = builder_pipeline("customers_cdc_replayed", 1);
    let graph = p.build(&spec(dir)).map_err(|d| d.to_string()).unwrap();
    write(dir, "1.json", FIRST);
    run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();
    let path = dir.join("storage/tables/customers");
    // Only new keys: an append, not a MERGE.
    assert_eq!(operations(&path), ["CREATE TABLE", "WRITE"]);
    write(dir, "2.json", SECOND);
    inject_failure("customers_cdc_replayed", "before_commit", 1);
    let err = run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "flow `customers_cdc_replayed`: injected failure at before_commit of batch 1"
    );
    assert_eq!(operations(&path), ["CREATE TABLE", "WRITE", "MERGE"]);
    let s = run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();
    let f = s
        .flows
        .iter()
        .find(|f| f.flow == "customers_cdc_replayed")
        .unwrap();
    assert_eq!((f.batches, f.replayed), (1, 1));
    assert_eq!(operations(&path), ["CREATE TABLE", "WRITE", "MERGE"]);
    assert_eq!(
        table(dir, "customers"),
        [
            "124|Raul|Oaxaca",
            "125|Mercedes|Guadalajara",
            "126|Lily|Cancun"
        ]
    );
}

fn dry_run(pipeline: dp::Pipeline, files: &[(&str, &str)]) -> String {
    let (_tmp, dir) = project(files);
    std::fs::create_dir_all(dir.join("cdc")).unwrap();
    let (code, out, err) = cli(pipeline, &dir, &["dry-run"]);
    assert_eq!(code, 1, "dry-run passed:\n{out}");
    err
}

#[test]
fn dry_run_names_every_mistake_of_an_auto_cdc_flow() {
    let err = dry_run(
        dp::Pipeline::new(),
        &[
            ("transformations/feed.sql", FEED_SQL),
            (
                "transformations/mistakes.sql",
                "CREATE STREAMING TABLE a
FLOW AUTO CDC FROM STREAM(customers_cdc) KEYS (idd) SEQUENCE BY seq TRACK HISTORY ON (city);

CREATE MATERIALIZED VIEW b AS SELECT 1 AS id;
CREATE FLOW into_view AS AUTO CDC INTO b FROM STREAM(customers_cdc) KEYS (id) SEQUENCE BY seq;

CREATE STREAMING TABLE c USING parquet;
CREATE FLOW into_parquet AS AUTO CDC INTO c FROM customers_cdc KEYS (id) SEQUENCE BY sequence;

CREATE STREAMING TABLE d;
CREATE FLOW d_cdc AS AUTO CDC INTO d FROM STREAM(customers_cdc) KEYS (id) SEQUENCE BY seq COLUMNS (name, city);
CREATE FLOW d_append AS INSERT INTO d BY NAME SELECT * FROM STREAM(customers_cdc);
",
            ),
        ],
    );
    for expected in [
        "AUTO CDC flow tracks history, but stores SCD type 1",
        "AUTO CDC flow key `idd` is not a column of the change feed `customers_cdc`",
        "did you mean `id`?",
        "AUTO CDC flow targets materialized view `b`, but changes are applied to a streaming table",
        "AUTO CDC flow targets streaming table `c`, stored as Parquet, which cannot apply changes (no MERGE)",
        "returns a batch query, but its target `c` is a streaming table, which takes streaming queries",
        "unknown column `sequence` in AUTO CDC sequence_by `sequence`",
        "AUTO CDC flow targets streaming table `d`, which flow `d_append` also writes",
        "AUTO CDC flow column_list leaves out the key `id`",
    ] {
        assert!(err.contains(expected), "missing `{expected}` in:\n{err}");
    }
}

#[test]
fn dry_run_checks_builder_declarations_against_the_feed() {
    let table = |p: dp::Pipeline, name: &str, schema: Option<&str>| {
        p.create_streaming_table(
            name,
            dp::TableOptions {
                schema: schema.map(str::to_string),
                ..Default::default()
            },
        )
    };
    let mut pipeline = dp::Pipeline::new();
    for t in ["customers", "no_keys", "arrays", "truncates"] {
        pipeline = table(pipeline, t, None);
    }
    let pipeline = table(pipeline, "declared", Some("id BIGINT, name STRING"))
        .create_auto_cdc_flow(
            AutoCdc::new("customers", "customers_cdc")
                .keys(["id"])
                .sequence_by("sequence_number")
                .column_list(["id", "name"])
                .except_column_list(["seq"]),
        )
        .create_auto_cdc_flow(AutoCdc::new("no_keys", "customers_cdc"))
        .create_auto_cdc_flow(
            AutoCdc::new("arrays", "customers_cdc")
                .keys(["id"])
                .sequence_by("make_array(seq)"),
        )
        .create_auto_cdc_flow(
            AutoCdc::new("truncates", "customers_cdc")
                .keys(["id"])
                .sequence_by("seq")
                .apply_as_truncates("operation = 'TRUNCATE'")
                .stored_as_scd_type(2),
        )
        .create_auto_cdc_flow(
            AutoCdc::new("declared", "customers_cdc")
                .keys(["id"])
                .sequence_by("seq")
                .except_column_list(["operation"]),
        );
    let err = dry_run(pipeline, &[("transformations/feed.sql", FEED_SQL)]);
    for expected in [
        "AUTO CDC flow sets both column_list and except_column_list",
        "keep one: the columns to keep, or the columns to leave out",
        "unknown column `sequence_number` in AUTO CDC sequence_by `sequence_number`",
        "error: flow `no_keys` (tests/it/cdc.rs:",
        "AUTO CDC flow has no keys",
        "AUTO CDC flow has no sequence_by",
        "AUTO CDC flow sequence_by `make_array(seq)` is of type ARRAY<BIGINT>, which has no order",
        "AUTO CDC flow sets apply_as_truncates, which SCD type 2 does not support",
        "AUTO CDC flow writes columns that do not match the declared schema of streaming table `declared`",
    ] {
        assert!(err.contains(expected), "missing `{expected}` in:\n{err}");
    }
}

#[test]
fn two_keys_and_a_struct_sequence_then_a_full_refresh_rebuilds_the_history() {
    let (_tmp, dir) = project(&[(
        "transformations/feed.sql",
        "CREATE STREAMING TABLE orders_cdc AS SELECT * FROM STREAM read_files(
  'cdc',
  format => 'json',
  schema => 'shop STRING, id BIGINT, status STRING, day INT, n INT'
);
CREATE STREAMING TABLE orders;
CREATE FLOW orders_flow AS AUTO CDC INTO orders FROM STREAM(orders_cdc)
KEYS (shop, id) SEQUENCE BY struct(day, n) STORED AS SCD TYPE 2;
",
    )]);
    write(
        &dir,
        "1.json",
        &[
            r#"{"shop":"a","id":1,"status":"new","day":1,"n":0}"#,
            r#"{"shop":"b","id":1,"status":"new","day":1,"n":0}"#,
            r#"{"shop":"a","id":1,"status":"paid","day":1,"n":2}"#,
        ],
    );
    let (code, out, err) = cli(dp::Pipeline::new(), &dir, &["run"]);
    assert_eq!(code, 0, "{out}\n{err}");
    // Same day, later n: a new version; the other shop's order 1 is its own key.
    write(
        &dir,
        "2.json",
        &[
            r#"{"shop":"a","id":1,"status":"sent","day":2,"n":0}"#,
            r#"{"shop":"a","id":1,"status":"packed","day":1,"n":5}"#,
        ],
    );
    let (code, out, err) = cli(dp::Pipeline::new(), &dir, &["run"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let want = [
        "a|1|new|1|0|{day: 1, n: 0}|{day: 1, n: 2}",
        "a|1|packed|1|5|{day: 1, n: 5}|{day: 2, n: 0}",
        "a|1|paid|1|2|{day: 1, n: 2}|{day: 1, n: 5}",
        "a|1|sent|2|0|{day: 2, n: 0}|null",
        "b|1|new|1|0|{day: 1, n: 0}|null",
    ];
    assert_eq!(table(&dir, "orders"), want);
    let (code, out, err) = cli(
        dp::Pipeline::new(),
        &dir,
        &["run", "--full-refresh", "orders"],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(table(&dir, "orders"), want);
}
