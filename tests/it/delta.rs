//! Delta Lake tables end to end: tables are Delta by default, the Delta
//! sink (append, complete, MERGE on `merge_keys`, exactly once through
//! application transactions, `mergeSchema`), Delta as a streaming source
//! (`maxFilesPerTrigger`, `startingVersion`, change commits), batch reads,
//! full refresh, and concurrent writers.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use pipelines as dp;
use pipelines::engine::runtime::{inject_failure, run, RunOptions, RunSummary};
use pipelines::engine::sink::SinkContext;
use pipelines::prelude::*;
use pipelines::OutputMode;

fn write(dir: &Path, name: &str, lines: &[&str]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), lines.join("\n") + "\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(15));
}

fn spec(dir: &Path) -> dp::spec::PipelineSpec {
    dp::spec::parse_str(
        "name: delta\nstorage: ./storage\n",
        &dir.join("pipeline.yml"),
    )
    .unwrap()
}

fn try_run(p: &dp::Pipeline, dir: &Path, opts: RunOptions) -> dp::Result<RunSummary> {
    let graph = p.build(&spec(dir)).map_err(|d| d.to_string()).unwrap();
    run(&graph, &opts)
}

fn run_pipeline(p: &dp::Pipeline, dir: &Path) -> RunSummary {
    try_run(p, dir, RunOptions::new(dir, dir.join("storage"))).unwrap()
}

/// Rows as `a|b|c`, sorted.
fn rows(batches: &[RecordBatch]) -> Vec<String> {
    let mut out = Vec::new();
    for b in batches {
        let fmts: Vec<ArrayFormatter> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &FormatOptions::default()).unwrap())
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

/// The rows of the Delta table at `path` (latest snapshot).
fn table_rows(path: &Path) -> Vec<String> {
    rows(&dp::delta::read_table(path).unwrap().expect("a Delta table"))
}

/// The JSON actions of commit `version`.
fn log_actions(table: &Path, version: u64) -> Vec<serde_json::Value> {
    let text =
        std::fs::read_to_string(table.join(format!("_delta_log/{version:020}.json"))).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `(kind, detail)` of each data action of a commit: `add`, `remove`, `txn appId version`.
fn summary(table: &Path, version: u64) -> Vec<String> {
    let mut out = Vec::new();
    for a in log_actions(table, version) {
        if a.get("add").is_some() {
            out.push("add".to_string());
        } else if a.get("remove").is_some() {
            out.push("remove".to_string());
        } else if let Some(t) = a.get("txn") {
            out.push(format!("txn {}", t["version"]));
        }
    }
    out.sort();
    out
}

fn query_id(dir: &Path, flow: &str) -> String {
    let text = std::fs::read_to_string(dir.join("storage/checkpoints").join(flow).join("metadata"))
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["id"].as_str().unwrap().to_string()
}

fn events_table(p: dp::Pipeline) -> dp::Pipeline {
    p.table("events", |s| {
        s.read_stream()
            .format("json")
            .schema("id BIGINT, level STRING")
            .option("maxFilesPerTrigger", "1")
            .load("in")
    })
}

fn write_events(dir: &Path) {
    write(
        &dir.join("in"),
        "0.json",
        &[r#"{"id":1,"level":"ERROR"}"#, r#"{"id":2,"level":"INFO"}"#],
    );
    write(&dir.join("in"), "1.json", &[r#"{"id":3,"level":"ERROR"}"#]);
}

#[test]
fn tables_are_delta_by_default_with_one_transaction_per_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_events(dir);
    let p = events_table(dp::Pipeline::new());
    let s = run_pipeline(&p, dir);
    assert_eq!(s.flows[0].batches, 2);
    let table = dir.join("storage/tables/events");
    assert!(table.join("_delta_log/00000000000000000000.json").exists());
    assert_eq!(table_rows(&table), ["1|ERROR", "2|INFO", "3|ERROR"]);
    // Version 0 creates the table; each batch is one commit carrying the
    // flow's query id and its batch id.
    assert_eq!(summary(&table, 1), ["add", "txn 0"]);
    assert_eq!(summary(&table, 2), ["add", "txn 1"]);
    let txn = log_actions(&table, 2)
        .into_iter()
        .find_map(|a| a.get("txn").cloned())
        .unwrap();
    assert_eq!(txn["appId"], query_id(dir, "events").as_str());
    assert_eq!(dp::delta::latest_version(&table).unwrap(), Some(2));
}

#[test]
fn parquet_stays_available_for_tables() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_events(dir);
    let p = dp::Pipeline::new()
        .append_flow("copy", "copied", |s| {
            s.read_stream()
                .format("json")
                .schema("id BIGINT, level STRING")
                .load("in")
        })
        .create_streaming_table(
            "copied",
            dp::TableOptions {
                format: Some("parquet".into()),
                ..Default::default()
            },
        );
    run_pipeline(&p, dir);
    let table = dir.join("storage/tables/copied");
    assert!(table.join("_spark_metadata/0").exists());
    assert!(!table.join("_delta_log").exists());
}

#[test]
fn complete_mode_replaces_the_table_in_one_commit_per_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_events(dir);
    let p = dp::Pipeline::new()
        .flow({
            let mut f = dp::FlowDef::append(
                "level_counts",
                "counts",
                dp::Query::new(|s| {
                    s.read_stream()
                        .format("json")
                        .schema("id BIGINT, level STRING")
                        .option("maxFilesPerTrigger", "1")
                        .load("in")?
                        .group_by([col("level")])
                        .count()
                }),
            );
            f.conf
                .insert("pipelines.outputMode".into(), "complete".into());
            f
        })
        .create_sink("counts", "delta", [("path", "out/counts")]);
    run_pipeline(&p, dir);
    let table = dir.join("out/counts");
    assert_eq!(table_rows(&table), ["ERROR|2", "INFO|1"]);
    // Batch 0 adds its result; batch 1 removes it and adds the new one, in one commit.
    assert_eq!(summary(&table, 1), ["add", "txn 0"]);
    assert_eq!(summary(&table, 2), ["add", "remove", "txn 1"]);
    assert_eq!(dp::delta::latest_version(&table).unwrap(), Some(2));
}

#[test]
fn update_mode_into_a_delta_sink_is_refused_at_dry_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let p = dp::Pipeline::new()
        .update_flow("level_counts", "counts", |s| {
            s.read_stream()
                .format("json")
                .schema("id BIGINT, level STRING")
                .load("in")?
                .group_by([col("level")])
                .count()
        })
        .create_sink("counts", "delta", [("path", "out/counts")]);
    let err = p.build(&spec(dir)).unwrap_err().to_string();
    assert!(
        err.contains(
            "sink `counts` (delta) does not accept update output mode; it accepts append, complete"
        ),
        "{err}"
    );
    assert!(
        err.contains("help: Delta tables take append and complete; declare `merge_keys` on the sink, or use foreach_batch with a MERGE"),
        "{err}"
    );
}

/// An update flow named `flow` counting per level into a merge-keyed
/// Delta sink. Injected failures are process-wide per flow name.
fn merge_pipeline(flow: &'static str) -> dp::Pipeline {
    dp::Pipeline::new()
        .update_flow(flow, "counts", |s| {
            s.read_stream()
                .format("json")
                .schema("id BIGINT, level STRING")
                .option("maxFilesPerTrigger", "1")
                .load("in")?
                .group_by([col("level")])
                .count()
        })
        .create_sink(
            "counts",
            "delta",
            [("path", "out/counts"), ("merge_keys", "level")],
        )
}

#[test]
fn merge_keys_make_a_delta_sink_an_idempotent_upsert_target() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_events(dir);
    let p = merge_pipeline("merge_counts_replayed");
    run_pipeline(&p, dir);
    let table = dir.join("out/counts");
    assert_eq!(table_rows(&table), ["ERROR|2", "INFO|1"]);
    // A crash after batch 2's MERGE committed, before the checkpoint commit:
    // the replay finds the transaction and skips the MERGE.
    write(
        &dir.join("in"),
        "2.json",
        &[r#"{"id":4,"level":"WARN"}"#, r#"{"id":5,"level":"INFO"}"#],
    );
    inject_failure("merge_counts_replayed", "before_commit", 2);
    let err = try_run(&p, dir, RunOptions::new(dir, dir.join("storage"))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "flow `merge_counts_replayed`: injected failure at before_commit of batch 2"
    );
    let version = dp::delta::latest_version(&table).unwrap();
    let s = run_pipeline(&p, dir);
    assert_eq!(s.flows[0].replayed, 1);
    assert_eq!(dp::delta::latest_version(&table).unwrap(), version);
    assert_eq!(table_rows(&table), ["ERROR|2", "INFO|2", "WARN|1"]);
    let merges = (0..=version.unwrap())
        .filter(|v| {
            log_actions(&table, *v).iter().any(|a| {
                a.get("commitInfo")
                    .is_some_and(|c| c["operation"] == "MERGE")
            })
        })
        .count();
    assert_eq!(merges, 3, "one MERGE per batch");
}

/// A flow named `flow` copying the events into table `copied`. Injected
/// failures are process-wide per flow name: each crash test names its own.
fn copy_pipeline(flow: &'static str) -> dp::Pipeline {
    dp::Pipeline::new()
        .append_flow(flow, "copied", |s| {
            s.read_stream()
                .format("json")
                .schema("id BIGINT, level STRING")
                .option("maxFilesPerTrigger", "1")
                .load("in")
        })
        .create_streaming_table("copied", dp::TableOptions::default())
}

#[test]
fn crash_between_delta_commit_and_checkpoint_commit_does_not_duplicate() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_events(dir);
    let p = copy_pipeline("copy_dies_before_commit");
    inject_failure("copy_dies_before_commit", "before_commit", 1);
    assert!(try_run(&p, dir, RunOptions::new(dir, dir.join("storage"))).is_err());
    let table = dir.join("storage/tables/copied");
    assert_eq!(table_rows(&table), ["1|ERROR", "2|INFO", "3|ERROR"]);
    assert!(!dir
        .join("storage/checkpoints/copy_dies_before_commit/commits/1")
        .exists());
    let s = run_pipeline(&p, dir);
    assert_eq!((s.flows[0].batches, s.flows[0].replayed), (1, 1));
    assert_eq!(table_rows(&table), ["1|ERROR", "2|INFO", "3|ERROR"]);
    assert_eq!(dp::delta::latest_version(&table).unwrap(), Some(2));
}

#[test]
fn crash_before_the_delta_commit_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_events(dir);
    let p = copy_pipeline("copy_dies_after_offsets");
    inject_failure("copy_dies_after_offsets", "after_offsets", 1);
    assert!(try_run(&p, dir, RunOptions::new(dir, dir.join("storage"))).is_err());
    let table = dir.join("storage/tables/copied");
    assert_eq!(table_rows(&table), ["1|ERROR", "2|INFO"]);
    let s = run_pipeline(&p, dir);
    assert_eq!((s.flows[0].batches, s.flows[0].replayed), (1, 1));
    assert_eq!(table_rows(&table), ["1|ERROR", "2|INFO", "3|ERROR"]);
}

fn sink_ctx(
    path: &Path,
    schema: SchemaRef,
    query_id: &str,
    options: &[(&str, &str)],
) -> SinkContext {
    SinkContext {
        name: "t".into(),
        format: "delta".into(),
        options: options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        path: Some(path.into()),
        partition_cols: vec![],
        merge_keys: vec![],
        schema,
        flow: "f".into(),
        query_id: query_id.into(),
    }
}

fn id_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]))
}

fn ids(schema: &SchemaRef, ids: &[i64]) -> RecordBatch {
    RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(Int64Array::from(ids.to_vec()))],
    )
    .unwrap()
}

/// Writes one append batch per entry of `batches` to the Delta table at `path`.
fn append(path: &Path, query_id: &str, batches: &[&[i64]]) {
    let schema = id_schema();
    let mut sink =
        dp::engine::sinks::open_sink(sink_ctx(path, schema.clone(), query_id, &[]), None).unwrap();
    for (n, b) in batches.iter().enumerate() {
        sink.add_batch(n as u64, vec![ids(&schema, b)], OutputMode::Append)
            .unwrap();
    }
}

#[test]
fn merge_schema_adds_new_columns_and_a_type_change_names_the_column() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t");
    append(&path, "q1", &[&[1]]);
    let wider = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("note", DataType::Utf8, true),
    ]));
    // Without mergeSchema a new column is refused.
    let err = dp::engine::sinks::open_sink(sink_ctx(&path, wider.clone(), "q2", &[]), None)
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        format!(
            "sink `t`: column `note` of flow `f`'s output is not in the Delta table at {}\n  help: set the option `mergeSchema: \"true\"` on `t` to add new columns to the table",
            path.display()
        )
    );
    let mut sink = dp::engine::sinks::open_sink(
        sink_ctx(&path, wider.clone(), "q2", &[("mergeSchema", "true")]),
        None,
    )
    .unwrap();
    let batch = RecordBatch::try_new(
        wider.clone(),
        vec![
            Arc::new(Int64Array::from(vec![2])),
            Arc::new(StringArray::from(vec!["new"])),
        ],
    )
    .unwrap();
    sink.add_batch(0, vec![batch], OutputMode::Append).unwrap();
    assert_eq!(table_rows(&path), ["1|", "2|new"]);
    // A type change is an error naming the column, with or without mergeSchema.
    let changed = Arc::new(Schema::new(vec![Field::new("id", DataType::Utf8, true)]));
    let err = dp::engine::sinks::open_sink(
        sink_ctx(&path, changed, "q3", &[("mergeSchema", "true")]),
        None,
    )
    .err()
    .unwrap();
    assert_eq!(
        err.to_string(),
        format!(
            "sink `t`: column `id` is string in the output of flow `f` but long in the Delta table at {}; Delta cannot change a column's type\n  help: cast `id` to long in the flow's query, or write to a new table (`--full-refresh t` keeps the old type)",
            path.display()
        )
    );
}

#[test]
fn two_writers_append_concurrently_and_no_row_is_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t");
    append(&path, "setup", &[]);
    let handles: Vec<_> = (0..2i64)
        .map(|w| {
            let path = path.clone();
            std::thread::spawn(move || {
                let batches: Vec<Vec<i64>> = (0..8).map(|n| vec![w * 100 + n]).collect();
                let refs: Vec<&[i64]> = batches.iter().map(|b| b.as_slice()).collect();
                append(&path, &format!("writer{w}"), &refs);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut expected: Vec<String> = (0..2i64)
        .flat_map(|w| (0..8).map(move |n| (w * 100 + n).to_string()))
        .collect();
    expected.sort();
    assert_eq!(table_rows(&path), expected);
    // Table created by one commit, then 16 appends, each its own version.
    assert_eq!(dp::delta::latest_version(&path).unwrap(), Some(16));
}

/// Streams the Delta table `<dir>/src` into the Delta table `copy` (an
/// absolute path: the reader's schema is read from the table's log when the
/// plan is resolved).
fn stream_copy(dir: &Path, options: &'static [(&'static str, &'static str)]) -> dp::Pipeline {
    let src = dir.join("src").to_string_lossy().into_owned();
    dp::Pipeline::new()
        .append_flow("read_delta", "copy", move |s| {
            let mut r = s.read_stream().format("delta");
            for (k, v) in options {
                r = r.option(*k, v);
            }
            r.load(src.clone())
        })
        .create_streaming_table("copy", dp::TableOptions::default())
}

fn offsets(dir: &Path, flow: &str, n: u64) -> serde_json::Value {
    let text = std::fs::read_to_string(
        dir.join("storage/checkpoints")
            .join(flow)
            .join("offsets")
            .join(n.to_string()),
    )
    .unwrap();
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

#[test]
fn delta_source_streams_commits_in_order_with_max_files_per_trigger() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    append(&dir.join("src"), "w", &[&[1, 2], &[3], &[4]]);
    let p = stream_copy(dir, &[("maxFilesPerTrigger", "2")]);
    let s = run_pipeline(&p, dir);
    assert_eq!((s.flows[0].batches, s.flows[0].input_rows), (2, 4));
    let copy = dir.join("storage/tables/copy");
    assert_eq!(table_rows(&copy), ["1", "2", "3", "4"]);
    // The first batches read the snapshot at version 3, two files at a time.
    assert_eq!(
        offsets(dir, "read_delta", 0),
        serde_json::json!({"reservoirVersion": 3, "index": 1, "isStartingVersion": true})
    );
    assert_eq!(
        offsets(dir, "read_delta", 1),
        serde_json::json!({"reservoirVersion": 4, "index": -1, "isStartingVersion": false})
    );
    // New commits are read as they come, commit by commit.
    let schema = id_schema();
    let mut sink =
        dp::engine::sinks::open_sink(sink_ctx(&dir.join("src"), schema.clone(), "w2", &[]), None)
            .unwrap();
    sink.add_batch(0, vec![ids(&schema, &[5, 6])], OutputMode::Append)
        .unwrap();
    let s = run_pipeline(&p, dir);
    assert_eq!((s.flows[0].batches, s.flows[0].input_rows), (1, 2));
    assert_eq!(table_rows(&copy), ["1", "2", "3", "4", "5", "6"]);
    assert_eq!(
        offsets(dir, "read_delta", 2),
        serde_json::json!({"reservoirVersion": 5, "index": -1, "isStartingVersion": false})
    );
}

#[test]
fn delta_source_starting_version_skips_earlier_commits() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    append(&dir.join("src"), "w", &[&[1], &[2], &[3]]);
    let p = stream_copy(dir, &[("startingVersion", "2")]);
    run_pipeline(&p, dir);
    assert_eq!(table_rows(&dir.join("storage/tables/copy")), ["2", "3"]);
}

#[test]
fn delta_source_refuses_change_commits_unless_skip_change_commits() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let src = dir.join("src");
    append(&src, "w", &[&[1]]);
    // A complete-mode write rewrites the table (version 2).
    let schema = id_schema();
    let mut sink =
        dp::engine::sinks::open_sink(sink_ctx(&src, schema.clone(), "c", &[]), None).unwrap();
    sink.add_batch(0, vec![ids(&schema, &[7])], OutputMode::Complete)
        .unwrap();
    append(&src, "w3", &[&[8]]);
    let p = stream_copy(dir, &[("startingVersion", "0")]);
    let err = try_run(&p, dir, RunOptions::new(dir, dir.join("storage")))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "flow `read_delta`: version 2 of the Delta table at {} rewrites rows (WRITE), which a streaming read cannot pass on as appends\n  help: set the option `skipChangeCommits: \"true\"` on the reader to skip such commits (or `ignoreDeletes: \"true\"` when they only delete), or run a full refresh of this flow's target",
            src.display()
        )
    );
    let tmp2 = tempfile::tempdir().unwrap();
    let dir2 = tmp2.path();
    std::fs::rename(&src, dir2.join("src")).unwrap();
    let p = stream_copy(
        dir2,
        &[("startingVersion", "0"), ("skipChangeCommits", "true")],
    );
    run_pipeline(&p, dir2);
    assert_eq!(table_rows(&dir2.join("storage/tables/copy")), ["1", "8"]);
}

#[test]
fn read_stream_table_of_a_delta_table_and_batch_reads_for_views_and_joins() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_events(dir);
    write(
        &dir.join("dim"),
        "0.json",
        &[
            r#"{"level":"ERROR","sev":3}"#,
            r#"{"level":"INFO","sev":1}"#,
        ],
    );
    let p = events_table(dp::Pipeline::new())
        .table("levels", |s| {
            s.read_stream()
                .format("json")
                .schema("level STRING, sev BIGINT")
                .load("dim")
        })
        // Streams the Delta table `events` (commit by commit) joined with the
        // latest snapshot of the Delta table `levels`.
        .append_flow("enrich", "enriched", |s| {
            s.read_stream_table("events")?
                .join_using(&s.read_table("levels")?, ["level"], JoinType::Inner)?
                .select_expr(["id", "level", "sev"])
        })
        .create_streaming_table("enriched", dp::TableOptions::default())
        .materialized_view("level_totals", |s| {
            s.read_table("events")?.group_by([col("level")]).count()
        });
    run_pipeline(&p, dir);
    assert_eq!(
        table_rows(&dir.join("storage/tables/enriched")),
        ["1|ERROR|3", "2|INFO|1", "3|ERROR|3"]
    );
    let totals = dir.join("storage/tables/level_totals");
    assert_eq!(table_rows(&totals), ["ERROR|2", "INFO|1"]);
    // The view is recomputed on each run into a new version of its table.
    write(&dir.join("in"), "2.json", &[r#"{"id":4,"level":"INFO"}"#]);
    run_pipeline(&p, dir);
    assert_eq!(table_rows(&totals), ["ERROR|2", "INFO|2"]);
    assert_eq!(
        table_rows(&dir.join("storage/tables/enriched")),
        ["1|ERROR|3", "2|INFO|1", "3|ERROR|3", "4|INFO|1"]
    );
}

#[test]
fn full_refresh_truncates_in_a_new_version_and_resets_checkpoints() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_events(dir);
    let p = copy_pipeline("copy");
    run_pipeline(&p, dir);
    let table = dir.join("storage/tables/copied");
    let before = dp::delta::latest_version(&table).unwrap().unwrap();
    let old_query = query_id(dir, "copy");
    let mut opts = RunOptions::new(dir, dir.join("storage"));
    opts.full_refresh = vec!["copied".into()];
    let s = try_run(&p, dir, opts).unwrap();
    assert_eq!(s.flows[0].batches, 2);
    // Truncated in version before+1, then the inputs read again from the start.
    assert_eq!(summary(&table, before + 1), ["remove", "remove"]);
    assert_eq!(table_rows(&table), ["1|ERROR", "2|INFO", "3|ERROR"]);
    assert_ne!(query_id(dir, "copy"), old_query);
    // The history before the refresh stays readable.
    assert!(table.join("_delta_log/00000000000000000001.json").exists());
}

#[test]
fn the_spec_declares_merge_keys_on_a_delta_sink() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let text = "name: delta\nstorage: ./storage\nsinks:\n  counts:\n    format: delta\n    options: { path: out/counts }\n    merge_keys: [level]\n";
    let spec = dp::spec::parse_str(text, &dir.join("pipeline.yml")).unwrap();
    let p = dp::Pipeline::new().update_flow("level_counts", "counts", |s| {
        s.read_stream()
            .format("json")
            .schema("id BIGINT, level STRING")
            .load("in")?
            .group_by([col("level")])
            .count()
    });
    let graph = p.build(&spec).map_err(|d| d.to_string()).unwrap();
    assert_eq!(graph.datasets["counts"].def.merge_keys, ["level"]);
}

/// A value as the independent reader prints it (see tests/delta/read_delta.py):
/// timestamps as microseconds, structs as lists of their fields.
fn canon(col: &dyn arrow::array::Array, i: usize) -> serde_json::Value {
    use arrow::array::{AsArray, StructArray};
    use arrow::datatypes::{Int32Type, Int64Type, TimestampMicrosecondType};
    use serde_json::Value;
    if col.is_null(i) {
        return Value::Null;
    }
    match col.data_type() {
        DataType::Int64 => col.as_primitive::<Int64Type>().value(i).into(),
        DataType::Int32 => col.as_primitive::<Int32Type>().value(i).into(),
        DataType::Utf8 => col.as_string::<i32>().value(i).into(),
        DataType::Timestamp(_, _) => col
            .as_primitive::<TimestampMicrosecondType>()
            .value(i)
            .into(),
        DataType::Struct(_) => {
            let s = col.as_any().downcast_ref::<StructArray>().unwrap();
            Value::Array(s.columns().iter().map(|c| canon(c.as_ref(), i)).collect())
        }
        other => panic!("no canonical form for {other}"),
    }
}

/// Columns and sorted rows of a Delta table as our reader sees it.
fn canonical_table(path: &Path) -> serde_json::Value {
    let batches = dp::delta::read_table(path).unwrap().unwrap();
    let schema = dp::delta::table_schema(path).unwrap();
    let mut rows: Vec<serde_json::Value> = Vec::new();
    for b in &batches {
        for i in 0..b.num_rows() {
            rows.push(b.columns().iter().map(|c| canon(c.as_ref(), i)).collect());
        }
    }
    rows.sort_by_key(|r| r.to_string());
    serde_json::json!({
        "columns": schema.fields().iter().map(|f| f.name().clone()).collect::<Vec<_>>(),
        "rows": rows,
    })
}

/// The Python interpreter with the `deltalake` package: `PIPELINES_PYTHON`,
/// else the test venv. `None` (the test is skipped) unless it can import
/// deltalake; scripts/test sets `PIPELINES_REQUIRE_DELTA_READER=1`, which
/// makes a missing reader a failure.
fn delta_python() -> Option<String> {
    let python = std::env::var("PIPELINES_PYTHON").unwrap_or_else(|_| {
        format!(
            "{}/.cache/pipelines-venv/bin/python",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    let ok = std::process::Command::new(&python)
        .args(["-c", "import deltalake, pyarrow"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok && std::env::var("PIPELINES_REQUIRE_DELTA_READER").is_ok() {
        panic!("{python} cannot import deltalake and pyarrow: pip install deltalake pyarrow");
    }
    ok.then_some(python)
}

#[test]
fn python_deltalake_reads_the_same_rows() {
    let Some(python) = delta_python() else {
        eprintln!("skipped: no Python with the deltalake package (set PIPELINES_PYTHON)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(
        &dir.join("ev"),
        "0.json",
        &[
            r#"{"ts":"2026-11-01T09:00:00Z","user":"alice","n":1}"#,
            r#"{"ts":"2026-11-01T09:03:00Z","user":"bob","n":2}"#,
            r#"{"ts":"2026-11-01T09:14:00Z","user":"alice","n":3}"#,
        ],
    );
    write(
        &dir.join("ev"),
        "1.json",
        &[
            r#"{"ts":"2026-11-01T09:31:00Z","user":"carol","n":4}"#,
            r#"{"ts":"2026-11-01T09:45:00Z","user":"alice","n":null}"#,
        ],
    );
    let read = |s: &Session| {
        s.read_stream()
            .format("json")
            .schema("ts TIMESTAMP, user STRING, n BIGINT")
            .option("maxFilesPerTrigger", "1")
            .load("ev")
    };
    let p = dp::Pipeline::new()
        .table("raw", read)
        .create_streaming_table(
            "by_user",
            dp::TableOptions {
                partition_cols: vec!["user".into()],
                ..Default::default()
            },
        )
        .append_flow("partitioned", "by_user", read)
        .append_flow("windows", "windowed", move |s| {
            read(s)?
                .with_watermark("ts", "10 minutes")?
                .group_by([window(col("ts"), "10 minutes", "10 minutes"), col("user")])
                .count()
        })
        .create_streaming_table("windowed", dp::TableOptions::default())
        .append_flow("copy_windows", "windowed_copy", |s| {
            s.read_stream_table("windowed")
        })
        .create_streaming_table("windowed_copy", dp::TableOptions::default())
        .update_flow("totals", "totals_merged", move |s| {
            read(s)?.group_by([col("user")]).count()
        })
        .create_sink(
            "totals_merged",
            "delta",
            [("path", "out/totals_merged"), ("merge_keys", "user")],
        )
        .flow({
            let mut f = dp::FlowDef::append(
                "complete_totals",
                "totals_complete",
                dp::Query::new(move |s| read(s)?.group_by([col("user")]).count()),
            );
            f.conf
                .insert("pipelines.outputMode".into(), "complete".into());
            f
        })
        .create_sink(
            "totals_complete",
            "delta",
            [("path", "out/totals_complete")],
        );
    run_pipeline(&p, dir);
    let tables = [
        dir.join("storage/tables/raw"),
        dir.join("storage/tables/by_user"),
        dir.join("storage/tables/windowed"),
        dir.join("storage/tables/windowed_copy"),
        dir.join("out/totals_merged"),
        dir.join("out/totals_complete"),
    ];
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/delta/read_delta.py");
    let out = std::process::Command::new(&python)
        .arg(&script)
        .args(tables.iter())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for t in &tables {
        let key = t.to_string_lossy().to_string();
        let mut got = theirs[&key].clone();
        got.as_object_mut().unwrap().remove("version");
        assert_eq!(got, canonical_table(t), "{key}");
    }
    // And the rows are the ones the pipeline should write.
    assert_eq!(
        table_rows(&dir.join("out/totals_merged")),
        ["alice|3", "bob|1", "carol|1"]
    );
    assert_eq!(
        canonical_table(&dir.join("storage/tables/windowed"))["rows"],
        canonical_table(&dir.join("storage/tables/windowed_copy"))["rows"]
    );
}

#[test]
fn a_merge_key_that_is_not_an_output_column_is_refused_at_dry_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let p = dp::Pipeline::new()
        .update_flow("level_counts", "counts", |s| {
            s.read_stream()
                .format("json")
                .schema("id BIGINT, level STRING")
                .load("in")?
                .group_by([col("level")])
                .count()
        })
        .create_sink(
            "counts",
            "delta",
            [("path", "out/counts"), ("merge_keys", "levl")],
        );
    let err = p.build(&spec(dir)).unwrap_err().to_string();
    assert!(
        err.contains("merge key `levl` of sink `counts` is not a column of its output\n  help: did you mean `level`? merge keys must be columns of the flow's output"),
        "{err}"
    );
}

#[test]
fn a_merge_batch_with_a_key_twice_keeps_its_last_row() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t");
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Utf8, true),
        Field::new("v", DataType::Int64, true),
    ]));
    let mut ctx = sink_ctx(&path, schema.clone(), "q", &[]);
    ctx.merge_keys = vec!["k".into()];
    let mut sink = dp::engine::sinks::open_sink(ctx, None).unwrap();
    let batch = |k: Vec<&str>, v: Vec<i64>| {
        RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(k)),
                Arc::new(Int64Array::from(v)),
            ],
        )
        .unwrap()
    };
    sink.add_batch(
        0,
        vec![batch(vec!["a", "b", "a"], vec![1, 2, 3])],
        OutputMode::Append,
    )
    .unwrap();
    sink.add_batch(
        1,
        vec![batch(vec!["b", "c"], vec![20, 30])],
        OutputMode::Update,
    )
    .unwrap();
    // A replay of batch 1 with other rows is skipped: the MERGE ran once.
    let again = sink
        .add_batch(1, vec![batch(vec!["b"], vec![99])], OutputMode::Update)
        .unwrap();
    assert!(again.skipped_replay);
    assert_eq!(table_rows(&path), ["a|3", "b|20", "c|30"]);
}
