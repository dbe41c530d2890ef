//! Data-quality expectations end to end: exact rows per micro-batch in the
//! table and its quarantine, exact counts in each batch's progress, a
//! failing expectation that commits nothing and is replayed after the fix,
//! and the dry-run's word-for-word errors; in Rust, in the spec and in SQL.

use std::path::Path;

use pipelines as dp;
use pipelines::engine::runtime::{run, RunOptions};
use pipelines::{Expectation, Pipeline};
use serde_json::Value;

use crate::sql::{cli, project, table_lines};

fn write(dir: &Path, name: &str, lines: &[&str]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), lines.join("\n") + "\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(15));
}

fn spec(dir: &Path, text: &str) -> dp::spec::PipelineSpec {
    std::fs::write(dir.join("pipeline.yml"), text).unwrap();
    dp::spec::parse_str(text, &dir.join("pipeline.yml")).unwrap()
}

const SPEC: &str = "name: quality\nstorage: ./storage\n";

/// Three files of orders, one per micro-batch: NULL ids, a NULL amount,
/// amounts that are not positive.
fn orders(dir: &Path) {
    let d = dir.join("orders");
    write(
        &d,
        "0.json",
        &[
            r#"{"id":1,"amount":10}"#,
            r#"{"id":2,"amount":-5}"#,
            r#"{"id":null,"amount":3}"#,
        ],
    );
    write(
        &d,
        "1.json",
        &[r#"{"id":4,"amount":null}"#, r#"{"id":5,"amount":7}"#],
    );
    write(
        &d,
        "2.json",
        &[r#"{"id":6,"amount":0}"#, r#"{"id":null,"amount":-1}"#],
    );
}

fn read_orders(s: &dp::Session) -> dp::Result<dp::DataFrame> {
    s.read_stream()
        .format("json")
        .schema("id BIGINT, amount BIGINT")
        .option("maxFilesPerTrigger", "1")
        .load("orders")
}

/// An expectation's counts in a batch: (name, passed, failed).
type Counts = Vec<(String, u64, u64)>;

/// The `dataQuality` of each committed batch of `flow`, as
/// `(batch, dropped, counts)`.
fn quality_log(dir: &Path, flow: &str) -> Vec<(u64, u64, Counts)> {
    pipelines::engine::event_log::read_batch_progress(dir.join("storage"))
        .unwrap()
        .into_iter()
        .filter(|v| v["flow"] == flow)
        .map(|v| {
            let q = &v["dataQuality"];
            let per = q["expectations"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    assert_eq!(e["dataset"], "orders_clean");
                    (
                        e["name"].as_str().unwrap().to_string(),
                        e["passed_records"].as_u64().unwrap(),
                        e["failed_records"].as_u64().unwrap(),
                    )
                })
                .collect();
            (
                v["batchId"].as_u64().unwrap(),
                q["dropped_records"].as_u64().unwrap(),
                per,
            )
        })
        .collect()
}

fn counts(list: &[(&str, u64, u64)]) -> Counts {
    list.iter()
        .map(|(n, p, f)| (n.to_string(), *p, *f))
        .collect()
}

/// Per batch: the rows a memory sink received, rendered as JSON lines.
fn memory_batches(query_name: &str) -> Vec<(u64, Vec<String>)> {
    dp::engine::sinks::memory_table(query_name)
        .unwrap()
        .batches_by_id()
        .into_iter()
        .map(|(id, batches)| (id, table_lines(&batches)))
        .collect()
}

#[test]
fn warn_keeps_drop_quarantines_and_every_batch_counts_both() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    orders(dir);
    let p = Pipeline::new()
        .append_flow("clean", "orders_clean", read_orders)
        .create_sink("orders_clean", "memory", [("queryName", "quality_clean")])
        .create_sink("bad_orders", "memory", [("queryName", "quality_bad")])
        .expect(
            "orders_clean",
            Expectation::warn("valid_id", "id IS NOT NULL"),
        )
        .expect("orders_clean", Expectation::drop("positive", "amount > 0"))
        .quarantine("orders_clean", "bad_orders");
    let graph = p
        .build(&spec(dir, SPEC))
        .map_err(|d| d.to_string())
        .unwrap();
    run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();

    // The warn expectation keeps its failures; the drop one removes them,
    // and a NULL amount is not a failure (NULL is not FALSE).
    assert_eq!(
        memory_batches("quality_clean"),
        [
            (
                0,
                vec![
                    r#"{"id":1,"amount":10}"#.to_string(),
                    r#"{"id":null,"amount":3}"#.to_string()
                ]
            ),
            (
                1,
                vec![
                    r#"{"id":4,"amount":null}"#.to_string(),
                    r#"{"id":5,"amount":7}"#.to_string()
                ]
            ),
            (2, vec![]),
        ]
    );
    // Every dropped row is in the quarantine, with what it failed.
    assert_eq!(
        memory_batches("quality_bad"),
        [
            (
                0,
                vec![r#"{"id":2,"amount":-5,"_failed_expectations":["positive"]}"#.to_string()]
            ),
            (
                2,
                vec![
                    r#"{"id":6,"amount":0,"_failed_expectations":["positive"]}"#.to_string(),
                    r#"{"id":null,"amount":-1,"_failed_expectations":["valid_id","positive"]}"#
                        .to_string(),
                ]
            ),
        ]
    );
    assert_eq!(
        quality_log(dir, "clean"),
        [
            (0, 1, counts(&[("valid_id", 2, 1), ("positive", 2, 1)])),
            (1, 0, counts(&[("valid_id", 2, 0), ("positive", 2, 0)])),
            (2, 2, counts(&[("valid_id", 1, 1), ("positive", 0, 2)])),
        ]
    );
}

/// The table's rows, from its Delta log.
fn delta_rows(table: &Path) -> Vec<String> {
    table_lines(&dp::delta::read_table(table).unwrap().unwrap_or_default())
}

#[test]
fn a_failing_expectation_commits_nothing_and_its_batch_is_replayed_after_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let d = dir.join("orders");
    write(&d, "0.json", &[r#"{"id":1,"amount":10}"#]);
    write(
        &d,
        "1.json",
        &[
            r#"{"id":2,"amount":20}"#,
            r#"{"id":3,"amount":-30,"note":"refund"}"#,
        ],
    );
    let pipeline = || {
        Pipeline::new().table("orders_clean", read_orders).expect(
            "orders_clean",
            Expectation::fail("non_negative", "amount >= 0"),
        )
    };
    let spec = spec(dir, SPEC);
    let graph = pipeline().build(&spec).map_err(|d| d.to_string()).unwrap();
    let err = run(&graph, &RunOptions::new(dir, dir.join("storage")))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "flow `orders_clean`: expectation `non_negative` of streaming table `orders_clean` failed in batch 1: \
         1 row not meeting `amount >= 0`, e.g. {id: 3, amount: -30}\n  \
         help: nothing of batch 1 was written or committed; fix the data or the expectation and run again: \
         the batch is replayed from its logged offsets"
    );
    let ckpt = dir.join("storage/checkpoints/orders_clean");
    assert!(ckpt.join("commits/0").exists());
    assert!(ckpt.join("offsets/1").exists());
    assert!(!ckpt.join("commits/1").exists());
    let table = dir.join("storage/tables/orders_clean");
    assert_eq!(delta_rows(&table), [r#"{"id":1,"amount":10}"#]);

    // The data is fixed where it lies; the restart replays batch 1 over
    // the same logged offsets.
    std::fs::write(
        d.join("1.json"),
        "{\"id\":2,\"amount\":20}\n{\"id\":3,\"amount\":30}\n",
    )
    .unwrap();
    run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();
    assert!(ckpt.join("commits/1").exists());
    assert_eq!(
        delta_rows(&table),
        [
            r#"{"id":1,"amount":10}"#,
            r#"{"id":2,"amount":20}"#,
            r#"{"id":3,"amount":30}"#
        ]
    );
    let replayed: Vec<(u64, bool, u64)> =
        pipelines::engine::event_log::read_batch_progress(dir.join("storage"))
            .unwrap()
            .into_iter()
            .map(|v| {
                (
                    v["batchId"].as_u64().unwrap(),
                    v["replayed"].as_bool().unwrap(),
                    v["dataQuality"]["expectations"][0]["passed_records"]
                        .as_u64()
                        .unwrap(),
                )
            })
            .collect();
    assert_eq!(replayed, [(0, false, 1), (1, true, 2)]);
}

#[test]
fn expectations_and_a_quarantine_table_in_the_spec() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    orders(dir);
    let spec = spec(
        dir,
        "name: quality\nstorage: ./storage\ntables:\n  orders_clean:\n    quarantine: bad_orders\n    expectations:\n      - { name: valid_id, condition: id IS NOT NULL, action: drop }\n      - name: positive\n        condition: amount > 0\n  bad_orders: {}\n",
    );
    let p = Pipeline::new().append_flow("clean", "orders_clean", read_orders);
    let graph = p.build(&spec).map_err(|d| d.to_string()).unwrap();
    // The quarantine table takes the rows' columns and the failed names.
    assert_eq!(
        graph.datasets["bad_orders"]
            .schema
            .as_ref()
            .unwrap()
            .fields()
            .iter()
            .map(|f| format!("{} {}", f.name(), f.data_type()))
            .collect::<Vec<_>>(),
        [
            "id Int64",
            "amount Int64",
            "_failed_expectations List(Utf8)"
        ]
    );
    run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();
    assert_eq!(
        delta_rows(&dir.join("storage/tables/orders_clean")),
        [
            r#"{"id":1,"amount":10}"#,
            r#"{"id":2,"amount":-5}"#,
            r#"{"id":4,"amount":null}"#,
            r#"{"id":5,"amount":7}"#,
            r#"{"id":6,"amount":0}"#,
        ]
    );
    assert_eq!(
        delta_rows(&dir.join("storage/tables/bad_orders")),
        [
            r#"{"id":null,"amount":-1,"_failed_expectations":["valid_id","positive"]}"#,
            r#"{"id":null,"amount":3,"_failed_expectations":["valid_id"]}"#,
        ]
    );
    assert_eq!(
        quality_log(dir, "clean"),
        [
            (0, 1, counts(&[("valid_id", 2, 1), ("positive", 2, 1)])),
            (1, 0, counts(&[("valid_id", 2, 0), ("positive", 2, 0)])),
            (2, 1, counts(&[("valid_id", 1, 1), ("positive", 0, 2)])),
        ]
    );
}

#[test]
fn sql_constraints_warn_drop_and_quarantine() {
    let (_tmp, dir) = project(&[(
        "transformations/orders.sql",
        "CREATE STREAMING TABLE orders_clean (\n  CONSTRAINT valid_id EXPECT (id IS NOT NULL),\n  CONSTRAINT positive EXPECT (amount > 0) ON VIOLATION QUARANTINE TO bad_orders\n) AS SELECT * FROM STREAM read_files('orders', format => 'json', schema => 'id BIGINT, amount BIGINT', maxFilesPerTrigger => '1');\n\nCREATE STREAMING TABLE bad_orders;\n",
    )]);
    orders(&dir);
    let (code, out, err) = cli(Pipeline::new(), &dir, &["run"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(
        delta_rows(&dir.join("storage/tables/orders_clean")),
        [
            r#"{"id":1,"amount":10}"#,
            r#"{"id":4,"amount":null}"#,
            r#"{"id":5,"amount":7}"#,
            r#"{"id":null,"amount":3}"#,
        ]
    );
    assert_eq!(
        delta_rows(&dir.join("storage/tables/bad_orders")),
        [
            r#"{"id":2,"amount":-5,"_failed_expectations":["positive"]}"#,
            r#"{"id":6,"amount":0,"_failed_expectations":["positive"]}"#,
            r#"{"id":null,"amount":-1,"_failed_expectations":["valid_id","positive"]}"#,
        ]
    );
    assert_eq!(
        quality_log(&dir, "orders_clean"),
        [
            (0, 1, counts(&[("valid_id", 2, 1), ("positive", 2, 1)])),
            (1, 0, counts(&[("valid_id", 2, 0), ("positive", 2, 0)])),
            (2, 2, counts(&[("valid_id", 1, 1), ("positive", 0, 2)])),
        ]
    );
}

/// The dry-run's report for a pipeline with bad expectations.
fn dry_run(p: Pipeline, dir: &Path) -> String {
    let (code, out, err) = cli(p, dir, &["dry-run"]);
    assert_eq!(code, 1, "dry-run passed:\n{out}");
    err
}

#[test]
fn bad_expectations_are_reported_word_for_word_at_dry_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("pipeline.yml"), SPEC).unwrap();
    std::fs::create_dir_all(dir.join("orders")).unwrap();
    let base = line!();
    let p = Pipeline::new()
        .table("orders_clean", read_orders)
        .expect("orders_clean", Expectation::drop("positive", "amout > 0"))
        .expect("orders_clean", Expectation::warn("sized", "amount + 1"))
        .expect("orders_clean", Expectation::warn("positive", "amount > 0"))
        .quarantine("orders_clean", "bad_order");
    let err = dry_run(p, dir);
    let at = |offset: u32| format!("{}:{}", file!(), base + offset);
    assert_eq!(
        err,
        format!(
            "error: streaming table `orders_clean` ({table}): its quarantine `bad_order` is not declared
  help: declare a sink or streaming table for the rows, e.g. create_streaming_table(\"bad_order\", ...) or under `sinks:` in the spec
error: streaming table `orders_clean` ({second}): expectation `positive` is declared twice (first at {first})
  help: give each expectation of a dataset its own name
error: streaming table `orders_clean` ({first}): unknown column `amout` in the condition `amout > 0` of expectation `positive`
  help: did you mean `amount`? available columns: id, amount
error: streaming table `orders_clean` ({sized}): the condition `amount + 1` of expectation `sized` is BIGINT, not a boolean
  help: an expectation is a SQL condition that is true for good rows, e.g. `amount + 1 IS NOT NULL`
4 errors; nothing was read or written.
",
            table = at(2),
            first = at(3),
            sized = at(4),
            second = at(5),
        )
    );
}

#[test]
fn a_sql_expectation_names_its_file_line_and_column() {
    let (_tmp, dir) = project(&[(
        "transformations/orders.sql",
        "CREATE STREAMING TABLE orders_clean (\n  CONSTRAINT positive EXPECT (amout > 0) ON VIOLATION DROP ROW\n) AS SELECT * FROM STREAM read_files('orders', format => 'json', schema => 'id BIGINT, amount BIGINT');\n",
    )]);
    std::fs::create_dir_all(dir.join("orders")).unwrap();
    let (code, out, err) = cli(Pipeline::new(), &dir, &["dry-run"]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        err,
        "error: streaming table `orders_clean` (transformations/orders.sql:2:3): unknown column `amout` in the condition `amout > 0` of expectation `positive`
  help: did you mean `amount`? available columns: id, amount
1 error; nothing was read or written.
"
    );
}

#[test]
fn a_materialized_view_counts_per_refresh() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    orders(dir);
    let p = Pipeline::new()
        .materialized_view("order_totals", |s| {
            s.read()
                .format("json")
                .schema("id BIGINT, amount BIGINT")
                .load("orders")?
                .group_by(["id"])
                .agg([dp::prelude::sum(dp::prelude::col("amount")).alias("total")])
        })
        .expect(
            "order_totals",
            Expectation::drop("has_id", "id IS NOT NULL"),
        )
        .expect("order_totals", Expectation::warn("positive", "total > 0"));
    let spec = spec(dir, SPEC);
    let graph = p.build(&spec).map_err(|d| d.to_string()).unwrap();
    for _refresh in 0..2 {
        run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();
        // Each refresh recomputes the view and counts its rows again.
        assert_eq!(
            delta_rows(&dir.join("storage/tables/order_totals")),
            [
                r#"{"id":1,"total":10}"#,
                r#"{"id":2,"total":-5}"#,
                r#"{"id":4,"total":null}"#,
                r#"{"id":5,"total":7}"#,
                r#"{"id":6,"total":0}"#,
            ]
        );
    }
    let per_refresh: Vec<Value> =
        pipelines::engine::event_log::read_batch_progress(dir.join("storage"))
            .unwrap()
            .into_iter()
            .map(|v| v["dataQuality"].clone())
            .collect();
    let one = serde_json::json!({
        "dropped_records": 1,
        "expectations": [
            {"name": "has_id", "dataset": "order_totals", "passed_records": 5, "failed_records": 1},
            {"name": "positive", "dataset": "order_totals", "passed_records": 4, "failed_records": 2},
        ]
    });
    assert_eq!(per_refresh, [one.clone(), one]);
}

#[test]
fn a_replayed_batch_writes_its_quarantined_rows_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    orders(dir);
    let spec = spec(
        dir,
        "name: quality\nstorage: ./storage\ntables:\n  orders_clean:\n    quarantine: bad_orders\n    expectations:\n      - { name: positive, condition: amount > 0, action: drop }\n  bad_orders: {}\n",
    );
    let p = Pipeline::new().append_flow("replayed_clean", "orders_clean", read_orders);
    let graph = p.build(&spec).map_err(|d| d.to_string()).unwrap();
    // Both tables are written for batch 0, then the run dies before its commit.
    dp::engine::runtime::inject_failure("replayed_clean", "before_commit", 0);
    let err = run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "flow `replayed_clean`: injected failure at before_commit of batch 0"
    );
    assert_eq!(
        delta_rows(&dir.join("storage/tables/bad_orders")),
        [r#"{"id":2,"amount":-5,"_failed_expectations":["positive"]}"#]
    );
    // The restart replays batch 0: neither table gets its rows twice.
    run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();
    assert_eq!(
        delta_rows(&dir.join("storage/tables/bad_orders")),
        [
            r#"{"id":2,"amount":-5,"_failed_expectations":["positive"]}"#,
            r#"{"id":6,"amount":0,"_failed_expectations":["positive"]}"#,
            r#"{"id":null,"amount":-1,"_failed_expectations":["positive"]}"#,
        ]
    );
    assert_eq!(
        delta_rows(&dir.join("storage/tables/orders_clean")),
        [
            r#"{"id":1,"amount":10}"#,
            r#"{"id":4,"amount":null}"#,
            r#"{"id":5,"amount":7}"#,
            r#"{"id":null,"amount":3}"#,
        ]
    );
}

#[test]
fn sql_fail_update_stops_the_run_with_the_offending_row() {
    let (_tmp, dir) = project(&[(
        "transformations/orders.sql",
        "CREATE STREAMING TABLE orders_clean (\n  CONSTRAINT has_id EXPECT (id IS NOT NULL) ON VIOLATION FAIL UPDATE\n) AS SELECT * FROM STREAM read_files('orders', format => 'json', schema => 'id BIGINT, amount BIGINT', maxFilesPerTrigger => '1');\n",
    )]);
    orders(&dir);
    let (code, out, err) = cli(Pipeline::new(), &dir, &["run"]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        err,
        "error: flow `orders_clean`: expectation `has_id` of streaming table `orders_clean` failed in batch 0: \
         1 row not meeting `id IS NOT NULL`, e.g. {id: NULL, amount: 3}\n  \
         help: nothing of batch 0 was written or committed; fix the data or the expectation and run again: \
         the batch is replayed from its logged offsets\n"
    );
    assert!(!dir
        .join("storage/checkpoints/orders_clean/commits/0")
        .exists());
}
