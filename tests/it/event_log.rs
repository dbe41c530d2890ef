//! The event log: the events of a run in order (definitions, states,
//! each batch's progress), a failed flow's error with its fix, and the
//! event log table holding the same events as the file.

use std::path::Path;
use std::time::Duration;

use arrow::array::{Array, Int64Array, StringArray, StructArray};
use pipelines as dp;
use pipelines::engine::event_log::{read_events, Event};
use pipelines::engine::runtime::{run, RunOptions};
use pipelines::prelude::*;

fn write(dir: &Path, name: &str, lines: &[&str]) {
    std::fs::create_dir_all(dir.join("in")).unwrap();
    std::fs::write(dir.join("in").join(name), lines.join("\n") + "\n").unwrap();
    std::thread::sleep(Duration::from_millis(15));
}

fn parquet() -> dp::TableOptions {
    dp::TableOptions {
        format: Some("parquet".into()),
        ..Default::default()
    }
}

/// A copy of the input and a filter of the copy.
fn two_flows() -> dp::Pipeline {
    dp::Pipeline::new()
        .create_streaming_table("copied", parquet())
        .append_flow("copy", "copied", |s: &Session| {
            s.read_stream()
                .format("json")
                .schema("n BIGINT")
                .option("maxFilesPerTrigger", "1")
                .load("in")
        })
        .create_streaming_table("big", dp::TableOptions::default())
        .append_flow("keep_big", "big", |s: &Session| {
            s.read_stream_table("copied")?.filter("n > 1")
        })
}

/// `event_type flow state-or-batch` per event.
fn outline(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let what = match (e.batch_progress(), e.state()) {
                (Some(p), _) => format!("batch {}", p["batchId"]),
                (None, Some(s)) => s.to_string(),
                (None, None) => e.origin.dataset_name.clone().unwrap_or_default(),
            };
            format!(
                "{} {} {} {}",
                e.level.as_str(),
                e.event_type,
                e.origin.flow_name.as_deref().unwrap_or("-"),
                what
            )
        })
        .collect()
}

#[test]
fn a_run_logs_its_definitions_states_and_batches_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(dir, "1.json", &[r#"{"n":1}"#, r#"{"n":2}"#]);
    write(dir, "2.json", &[r#"{"n":3}"#]);
    let spec = dp::spec::parse_str(
        "name: logged\nstorage: ./storage\n",
        &dir.join("pipeline.yml"),
    )
    .unwrap();
    let graph = two_flows().build(&spec).map_err(|d| d.to_string()).unwrap();
    run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();
    let events = read_events(dir.join("storage/event_log/events.jsonl")).unwrap();
    assert_eq!(
        outline(&events),
        [
            "INFO create_update - ",
            "INFO dataset_definition - big",
            "INFO dataset_definition - copied",
            "INFO flow_definition copy copied",
            "INFO flow_definition keep_big big",
            "INFO update_progress - RUNNING",
            "INFO flow_progress copy QUEUED",
            "INFO flow_progress keep_big QUEUED",
            "INFO flow_progress copy STARTING",
            "INFO flow_progress copy RUNNING",
            "METRICS flow_progress copy batch 0",
            "METRICS flow_progress copy batch 1",
            "INFO flow_progress copy COMPLETED",
            "INFO flow_progress keep_big STARTING",
            "INFO flow_progress keep_big RUNNING",
            "METRICS flow_progress keep_big batch 0",
            "INFO flow_progress keep_big COMPLETED",
            "INFO update_progress - COMPLETED",
        ]
    );
    let update = &events[0].origin.update_id;
    assert!(events.iter().all(|e| &e.origin.update_id == update));
    assert!(events.iter().all(|e| e.origin.pipeline_name == "logged"));
    let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
    assert_eq!(sequences, (1..=events.len() as u64).collect::<Vec<_>>());
    let batch = &events[11];
    assert_eq!(batch.origin.batch_id, Some(1));
    assert_eq!(batch.message, "Flow `copy` batch 1: 1 rows in, 1 rows out.");
    assert_eq!(
        batch.details["flow_progress"],
        serde_json::json!({"status": "RUNNING", "metrics": {"num_input_rows": 1, "num_output_rows": 1}})
    );
    let def = &events[3].details["flow_definition"];
    assert_eq!(def["output_dataset"], "copied");
    assert_eq!(def["sources"][0], "json source `in`");
    assert_eq!(
        events[4].details["flow_definition"]["input_datasets"],
        serde_json::json!([{"name": "copied", "streaming": true}])
    );
    assert_eq!(
        events[1].details["dataset_definition"]["format"],
        dp::connector::default_table_format()
    );

    // A second run continues the numbering under a new update id.
    write(dir, "3.json", &[r#"{"n":4}"#]);
    run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();
    let all = read_events(dir.join("storage/event_log/events.jsonl")).unwrap();
    let second = &all[events.len()];
    assert_eq!(second.event_type, "create_update");
    assert_eq!(second.sequence, events.len() as u64 + 1);
    assert_ne!(&second.origin.update_id, update);

    // The event log table holds the same events, one row each.
    let table = dp::delta::read_table(dir.join("storage/system/event_log"))
        .unwrap()
        .unwrap();
    let mut rows: Vec<(i64, String, Option<String>, Option<i64>)> = Vec::new();
    for b in &table {
        let seq = b.column_by_name("sequence").unwrap();
        let seq = seq.as_any().downcast_ref::<Int64Array>().unwrap();
        let kind = b.column_by_name("event_type").unwrap();
        let kind = kind.as_any().downcast_ref::<StringArray>().unwrap();
        let origin = b.column_by_name("origin").unwrap();
        let origin = origin.as_any().downcast_ref::<StructArray>().unwrap();
        let flow = origin.column_by_name("flow_name").unwrap();
        let flow = flow.as_any().downcast_ref::<StringArray>().unwrap();
        let batch = origin.column_by_name("batch_id").unwrap();
        let batch = batch.as_any().downcast_ref::<Int64Array>().unwrap();
        for i in 0..b.num_rows() {
            rows.push((
                seq.value(i),
                kind.value(i).to_string(),
                flow.is_valid(i).then(|| flow.value(i).to_string()),
                batch.is_valid(i).then(|| batch.value(i)),
            ));
        }
    }
    rows.sort();
    let want: Vec<(i64, String, Option<String>, Option<i64>)> = all
        .iter()
        .map(|e| {
            (
                e.sequence as i64,
                e.event_type.clone(),
                e.origin.flow_name.clone(),
                e.origin.batch_id.map(|b| b as i64),
            )
        })
        .collect();
    assert_eq!(rows, want);
}

#[test]
fn a_failed_flow_logs_its_error_and_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(dir, "1.json", &[r#"{"n":1}"#]);
    let p = dp::Pipeline::new()
        .create_streaming_table("copied", parquet())
        .append_flow("copy_failing", "copied", |s: &Session| {
            s.read_stream().format("json").schema("n BIGINT").load("in")
        });
    let spec = dp::spec::parse_str(
        "name: failing\nstorage: ./storage\n",
        &dir.join("pipeline.yml"),
    )
    .unwrap();
    let graph = p.build(&spec).map_err(|d| d.to_string()).unwrap();
    dp::engine::fault::inject_failure("copy_failing", "before_commit", 0);
    let err = run(&graph, &RunOptions::new(dir, dir.join("storage")))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "flow `copy_failing`: injected failure at before_commit of batch 0"
    );
    let events = read_events(dir.join("storage/event_log/events.jsonl")).unwrap();
    let tail: Vec<String> = outline(&events).into_iter().skip(4).collect();
    assert_eq!(
        tail,
        [
            "INFO flow_progress copy_failing QUEUED",
            "INFO flow_progress copy_failing STARTING",
            "INFO flow_progress copy_failing RUNNING",
            "METRICS flow_progress copy_failing batch 0",
            "ERROR flow_progress copy_failing FAILED",
            "ERROR update_progress - FAILED",
        ]
    );
    let failed = &events[events.len() - 2];
    assert_eq!(
        failed.message,
        "Flow `copy_failing` has FAILED: flow `copy_failing`: injected failure at before_commit of batch 0"
    );
    assert_eq!(
        failed.error.as_ref().unwrap().message,
        "flow `copy_failing`: injected failure at before_commit of batch 0"
    );
}

#[test]
fn pipelines_events_queries_the_table_with_sql() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(dir, "1.json", &[r#"{"n":1}"#, r#"{"n":2}"#]);
    std::fs::write(
        dir.join("pipeline.yml"),
        "name: queried\nstorage: ./storage\n",
    )
    .unwrap();
    let (code, _, err) = crate::sql::cli(two_flows(), dir, &["events"]);
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        "error: no event log table at ./storage/system/event_log\n  help: run the pipeline first (the table is written by `run`), or pass its storage with `--storage DIR`"
    );
    let (code, _, err) = crate::sql::cli(two_flows(), dir, &["run"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = crate::sql::cli(
        two_flows(),
        dir,
        &[
            "events",
            "--sql",
            "SELECT origin['flow_name'] AS flow, count(*) AS batches, max(origin['batch_id']) AS last_batch FROM event_log WHERE level = 'METRICS' GROUP BY 1 ORDER BY 1",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        "+----------+---------+------------+
| flow     | batches | last_batch |
+----------+---------+------------+
| copy     | 1       | 0          |
| keep_big | 1       | 0          |
+----------+---------+------------+"
    );
    let (code, _, err) = crate::sql::cli(
        two_flows(),
        dir,
        &["events", "--sql", "SELECT nope FROM event_log"],
    );
    assert_eq!(code, 1);
    assert!(
        err.starts_with("error: --sql: Schema error: No field named nope."),
        "{err}"
    );
    assert!(
        err.trim_end().ends_with("help: the table is `event_log`, with the columns id, sequence, timestamp, origin, level, event_type, message, details, error"),
        "{err}"
    );
}
