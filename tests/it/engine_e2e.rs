//! End-to-end runs of small pipelines through the runtime: exact rows per
//! micro-batch, fan-in into one table, batch flows, restarts.

use std::collections::BTreeMap;
use std::path::Path;

use arrow::array::{Array, Int64Array, StringArray};
use arrow::record_batch::RecordBatch;
use pipelines as dp;
use pipelines::engine::runtime::{run, RunOptions, RunSummary};
use pipelines::prelude::*;

fn write(dir: &Path, name: &str, lines: &[&str]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), lines.join("\n") + "\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(15));
}

fn spec(dir: &Path) -> dp::spec::PipelineSpec {
    dp::spec::parse_str("name: e2e\nstorage: ./storage\n", &dir.join("pipeline.yml")).unwrap()
}

fn run_pipeline(p: &dp::Pipeline, dir: &Path) -> RunSummary {
    let graph = p.build(&spec(dir)).map_err(|d| d.to_string()).unwrap();
    run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap()
}

/// `column` of every committed row of a table (Delta, the default, or a
/// file-sink table), as strings.
fn table_column(table: &Path, column: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(batches) = dp::delta::read_table(table).unwrap() {
        for b in &batches {
            out.extend(strings(b, column));
        }
        out.sort();
        return out;
    }
    for f in dp::engine::sinks::committed_files(table)
        .unwrap()
        .unwrap_or_default()
    {
        let file = std::fs::File::open(f.path.as_local().unwrap()).unwrap();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap();
        for b in reader {
            let b = b.unwrap();
            out.extend(strings(&b, column));
        }
    }
    out.sort();
    out
}

fn strings(b: &RecordBatch, column: &str) -> Vec<String> {
    let col = b.column_by_name(column).unwrap();
    if let Some(s) = col.as_any().downcast_ref::<StringArray>() {
        (0..s.len()).map(|i| s.value(i).to_string()).collect()
    } else if let Some(n) = col.as_any().downcast_ref::<Int64Array>() {
        (0..n.len()).map(|i| n.value(i).to_string()).collect()
    } else {
        panic!("unexpected type {}", col.data_type())
    }
}

#[test]
fn fan_in_keeps_every_row_of_both_flows() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(&dir.join("eu"), "a.json", &[r#"{"id":1}"#, r#"{"id":2}"#]);
    write(&dir.join("us"), "a.json", &[r#"{"id":10}"#]);
    let p = dp::Pipeline::new()
        .append_flow("eu", "orders", |s| {
            s.read_stream()
                .format("json")
                .schema("id BIGINT")
                .load("eu")?
                .with_column("region", "'eu'")
        })
        .append_flow("us", "orders", |s| {
            s.read_stream()
                .format("json")
                .schema("id BIGINT")
                .load("us")?
                .with_column("region", "'us'")
        })
        .create_streaming_table("orders", dp::TableOptions::default());
    let first = run_pipeline(&p, dir);
    assert_eq!(first.flows.len(), 2);
    // More data for both, then a second run: each flow commits on its own checkpoint.
    write(&dir.join("eu"), "b.json", &[r#"{"id":3}"#]);
    write(&dir.join("us"), "b.json", &[r#"{"id":11}"#, r#"{"id":12}"#]);
    let second = run_pipeline(&p, dir);
    let rows: Vec<u64> = second.flows.iter().map(|f| f.input_rows).collect();
    assert_eq!(rows, vec![1, 2]);
    let table = dir.join("storage/tables/orders");
    assert_eq!(
        table_column(&table, "id"),
        ["1", "10", "11", "12", "2", "3"]
    );
    assert_eq!(
        table_column(&table, "region"),
        ["eu", "eu", "eu", "us", "us", "us"]
    );
    assert!(dir.join("storage/checkpoints/eu/commits/1").exists());
    assert!(dir.join("storage/checkpoints/us/commits/1").exists());
}

#[test]
fn memory_sink_gets_exact_rows_per_micro_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(
        &dir.join("logs"),
        "0.json",
        &[
            r#"{"level":"ERROR","msg":"a"}"#,
            r#"{"level":"INFO","msg":"b"}"#,
        ],
    );
    write(
        &dir.join("logs"),
        "1.json",
        &[r#"{"level":"INFO","msg":"c"}"#],
    );
    write(
        &dir.join("logs"),
        "2.json",
        &[
            r#"{"level":"ERROR","msg":"d"}"#,
            r#"{"level":"ERROR","msg":"e"}"#,
        ],
    );
    let p = dp::Pipeline::new()
        .table("logs", |s| {
            s.read_stream()
                .format("json")
                .schema("level STRING, msg STRING")
                .option("maxFilesPerTrigger", "1")
                .load("logs")
        })
        .append_flow("errors", "errors_mem", |s| {
            s.read_stream_table("logs")?
                .filter("level = 'ERROR'")?
                .select_expr(["upper(msg) AS msg"])
        })
        .create_sink("errors_mem", "memory", [("queryName", "e2e_errors")])
        .flow({
            // Same data through a per-batch memory sink fed straight from the files.
            let mut f = dp::FlowDef::append(
                "per_file",
                "per_file_mem",
                dp::Query::new(|s| {
                    s.read_stream()
                        .format("json")
                        .schema("level STRING, msg STRING")
                        .option("maxFilesPerTrigger", "1")
                        .load("logs")?
                        .filter("level = 'ERROR'")
                }),
            );
            f.comment = Some("one file per batch".into());
            f
        })
        .create_sink("per_file_mem", "memory", [("queryName", "e2e_per_file")]);
    let summary = run_pipeline(&p, dir);
    let batches: BTreeMap<String, u64> = summary
        .flows
        .iter()
        .map(|f| (f.flow.clone(), f.batches))
        .collect();
    assert_eq!(batches["logs"], 3);
    assert_eq!(batches["per_file"], 3);
    let per_file = dp::engine::sinks::memory_table("e2e_per_file").unwrap();
    let by_batch: Vec<(u64, Vec<String>)> = per_file
        .batches_by_id()
        .into_iter()
        .map(|(id, bs)| (id, bs.iter().flat_map(|b| strings(b, "msg")).collect()))
        .collect();
    assert_eq!(
        by_batch,
        vec![
            (0, vec!["a".to_string()]),
            (1, vec![]),
            (2, vec!["d".to_string(), "e".to_string()])
        ]
    );
    let errors = dp::engine::sinks::memory_table("e2e_errors").unwrap();
    let mut msgs: Vec<String> = errors
        .rows()
        .iter()
        .flat_map(|b| strings(b, "msg"))
        .collect();
    msgs.sort();
    assert_eq!(msgs, ["A", "D", "E"]);
}

#[test]
fn materialized_view_is_recomputed_and_once_flow_runs_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(
        &dir.join("in"),
        "0.json",
        &[
            r#"{"k":"x","v":1}"#,
            r#"{"k":"y","v":2}"#,
            r#"{"k":"x","v":3}"#,
        ],
    );
    let p = dp::Pipeline::new()
        .materialized_view("totals", |s| {
            s.read()
                .format("json")
                .schema("k STRING, v BIGINT")
                .load("in")?
                .group_by([col("k")])
                .agg([sum(col("v")).alias("total")])
        })
        .flow({
            let mut f = dp::FlowDef::append(
                "backfill",
                "events",
                dp::Query::new(|s| {
                    s.read()
                        .format("json")
                        .schema("k STRING, v BIGINT")
                        .load("in")
                }),
            );
            f.once = true;
            f
        })
        .create_streaming_table("events", dp::TableOptions::default());
    run_pipeline(&p, dir);
    write(&dir.join("in"), "1.json", &[r#"{"k":"y","v":10}"#]);
    let second = run_pipeline(&p, dir);
    let backfill = second.flows.iter().find(|f| f.flow == "backfill").unwrap();
    assert!(backfill.skipped, "a once flow runs a single time");
    // The view reflects all input after the second run; the once flow kept its first result.
    let totals = dir.join("storage/tables/totals");
    assert_eq!(table_column(&totals, "total"), ["12", "4"]);
    assert_eq!(
        table_column(&dir.join("storage/tables/events"), "v"),
        ["1", "2", "3"]
    );
}

#[test]
fn foreach_batch_gets_batch_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(&dir.join("in"), "0.json", &[r#"{"n":1}"#]);
    write(&dir.join("in"), "1.json", &[r#"{"n":2}"#, r#"{"n":3}"#]);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    dp::engine::sinks::register_foreach_batch(
        "e2e_each",
        move |batches: &[RecordBatch], id: u64| {
            let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
            s2.lock().unwrap().push((id, rows));
            Ok(())
        },
    );
    let p = dp::Pipeline::new()
        .append_flow("each", "e2e_each", |s| {
            s.read_stream()
                .format("json")
                .schema("n BIGINT")
                .option("maxFilesPerTrigger", "1")
                .load("in")
        })
        .create_sink("e2e_each", "foreach_batch", Vec::<(String, String)>::new());
    run_pipeline(&p, dir);
    assert_eq!(*seen.lock().unwrap(), vec![(0, 1), (1, 2)]);
}

/// `import_checkpoint`: an update flow starts from another query's
/// checkpoint (copied in once), so it reads only what that query had not.
#[test]
fn import_checkpoint_continues_where_the_old_query_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(&dir.join("in"), "0.json", &[r#"{"n":1}"#, r#"{"n":2}"#]);
    let old = dp::Pipeline::new()
        .update_flow("old_flow", "old_out", |s| {
            s.read_stream().format("json").schema("n BIGINT").load("in")
        })
        .create_sink("old_out", "memory", [("queryName", "import_old")]);
    run_pipeline(&old, dir);
    assert_eq!(
        dp::engine::sinks::memory_table("import_old")
            .unwrap()
            .num_rows(),
        2
    );

    write(&dir.join("in"), "1.json", &[r#"{"n":3}"#]);
    let mut f = dp::FlowDef::append(
        "new_flow",
        "new_out",
        dp::Query::new(|s| s.read_stream().format("json").schema("n BIGINT").load("in")),
    );
    f.kind = dp::registry::FlowKind::Update;
    f.import_checkpoint = Some("storage/checkpoints/old_flow".into());
    let new =
        dp::Pipeline::new()
            .flow(f)
            .create_sink("new_out", "memory", [("queryName", "import_new")]);
    let summary = run_pipeline(&new, dir);
    let rows: Vec<String> = dp::engine::sinks::memory_table("import_new")
        .unwrap()
        .rows()
        .iter()
        .flat_map(|b| strings(b, "n"))
        .collect();
    assert_eq!(rows, ["3"], "only the file the old query had not read");
    assert_eq!(summary.flows[0].input_rows, 1);
    // Imported once: a later run neither re-imports nor re-reads.
    let again = run_pipeline(&new, dir);
    assert_eq!(again.flows[0].input_rows, 0);
}

/// `run --continuous`: flows keep running and pick up new files until
/// stopped, then stop at a batch boundary with everything committed.
#[test]
fn continuous_run_picks_up_new_files_until_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    write(&dir.join("in"), "0.json", &[r#"{"n":1}"#]);
    let p = dp::Pipeline::new()
        .append_flow("cont", "cont_out", |s| {
            s.read_stream().format("json").schema("n BIGINT").load("in")
        })
        .create_sink("cont_out", "memory", [("queryName", "continuous_out")]);
    let graph = p.build(&spec(&dir)).map_err(|d| d.to_string()).unwrap();
    let mut opts = RunOptions::new(&dir, dir.join("storage"));
    opts.continuous = true;
    let stop = opts.stop.clone();
    let handle = std::thread::spawn(move || run(&graph, &opts));
    let table = || dp::engine::sinks::memory_table("continuous_out");
    let wait_for = |n: usize| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while table().map(|t| t.num_rows()).unwrap_or(0) < n {
            assert!(
                std::time::Instant::now() < deadline,
                "rows never reached {n}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    wait_for(1);
    write(&dir.join("in"), "1.json", &[r#"{"n":2}"#, r#"{"n":3}"#]);
    wait_for(3);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let summary = handle.join().unwrap().unwrap();
    assert_eq!(summary.flows[0].input_rows, 3);
    let commits = std::fs::read_dir(dir.join("storage/checkpoints/cont/commits"))
        .unwrap()
        .count();
    let offsets = std::fs::read_dir(dir.join("storage/checkpoints/cont/offsets"))
        .unwrap()
        .count();
    assert_eq!(commits, offsets, "stopped at a batch boundary");
}

/// An available-now run reports the backlog left after each batch (the
/// terminal line shows it as a progress indicator).
#[test]
fn available_now_progress_shows_the_backlog() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for i in 0..3 {
        write(&dir.join("in"), &format!("{i}.json"), &[r#"{"n":1}"#]);
    }
    let p = dp::Pipeline::new()
        .append_flow("drain", "drain_out", |s| {
            s.read_stream()
                .format("json")
                .schema("n BIGINT")
                .option("maxFilesPerTrigger", "1")
                .load("in")
        })
        .create_sink("drain_out", "memory", [("queryName", "backlog_out")]);
    run_pipeline(&p, dir);
    let backlog: Vec<String> =
        pipelines::engine::event_log::read_batch_progress(dir.join("storage"))
            .unwrap()
            .into_iter()
            .filter(|v| v["flow"] == "drain")
            .map(|v| v["backlog"].as_str().unwrap_or("-").to_string())
            .collect();
    assert_eq!(backlog, ["2 files left", "1 file left", "0 files left"]);
}

#[test]
fn an_offsets_file_missing_a_source_is_refused_not_restarted_from_scratch() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(&dir.join("a"), "1.json", &[r#"{"id":1}"#]);
    write(&dir.join("b"), "1.json", &[r#"{"id":2}"#]);
    let p = dp::Pipeline::new()
        .append_flow("both", "ids", |s| {
            let a = s
                .read_stream()
                .format("json")
                .schema("id BIGINT")
                .load("a")?;
            let b = s
                .read_stream()
                .format("json")
                .schema("id BIGINT")
                .load("b")?;
            a.union(&b)
        })
        .create_streaming_table(
            "ids",
            dp::TableOptions {
                format: Some("parquet".into()),
                ..Default::default()
            },
        );
    assert_eq!(run_pipeline(&p, dir).flows[0].input_rows, 2);
    // Drop the second source's line from the committed batch's offsets.
    let offsets = dir.join("storage/checkpoints/both/offsets/0");
    let text = std::fs::read_to_string(&offsets).unwrap();
    let kept: Vec<&str> = text.lines().take(3).collect();
    std::fs::write(&offsets, kept.join("\n") + "\n").unwrap();
    let graph = p.build(&spec(dir)).unwrap();
    let err = run(&graph, &RunOptions::new(dir, dir.join("storage")))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "checkpoint file {}: holds the offsets of 1 source, but the query reads 2 streaming sources; restore the file from a backup, or reset the flow with `--full-refresh`",
            offsets.display()
        )
    );
    // Nothing was read again.
    assert_eq!(
        table_column(&dir.join("storage/tables/ids"), "id"),
        ["1", "2"]
    );
}

#[test]
fn a_source_that_cannot_be_replayed_is_reported_when_the_flow_starts() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        conn.write_all(b"hello\n").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
    });
    let p = dp::Pipeline::new()
        .append_flow("lines", "lines_out", move |s| {
            s.read_stream()
                .format("socket")
                .option("host", "127.0.0.1")
                .option("port", port)
                .load_default()
        })
        .create_sink("lines_out", "memory", [("queryName", "socket_lines_out")]);
    run_pipeline(&p, dir);
    server.join().unwrap();
    let events =
        pipelines::engine::event_log::read_events(dir.join("storage/event_log/events.jsonl"))
            .unwrap();
    let warnings: Vec<String> = events
        .iter()
        .filter(|e| e.event_type == "source_not_replayable")
        .map(|e| {
            format!(
                "{} {}: {}",
                e.level.as_str(),
                e.origin.flow_name.as_deref().unwrap(),
                e.message
            )
        })
        .collect();
    assert_eq!(
        warnings,
        [format!("WARN lines: socket source 127.0.0.1:{port} cannot be replayed: if a batch fails after reading it, that batch's rows are lost (use it for tests and demos)")]
    );
}

#[test]
fn a_checkpoint_in_use_by_another_run_is_refused_naming_the_holder() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(&dir.join("in"), "1.json", &[r#"{"id":1}"#]);
    let p = dp::Pipeline::new()
        .append_flow("copy", "copy_out", |s| {
            s.read_stream()
                .format("json")
                .schema("id BIGINT")
                .load("in")
        })
        .create_sink("copy_out", "memory", [("queryName", "locked_copy_out")]);
    let graph = p.build(&spec(dir)).unwrap();
    let checkpoint = dir.join("storage/checkpoints/copy");
    // Another run holds the flow's checkpoint (and has written to it).
    let held = dp::engine::checkpoint::lock_checkpoint(&checkpoint).unwrap();
    std::fs::create_dir_all(&checkpoint).unwrap();
    std::fs::write(checkpoint.join("offsets-of-the-other-run"), "x").unwrap();
    let err = run(&graph, &RunOptions::new(dir, dir.join("storage")))
        .unwrap_err()
        .to_string();
    let prefix = format!(
        "the checkpoint {} is in use by another run (pid {} on ",
        checkpoint.display(),
        std::process::id()
    );
    assert!(err.starts_with(&prefix), "{err}");
    assert!(err.ends_with("\n  help: wait for that run to finish or stop it; two runs of one flow would write the same batches twice"), "{err}");
    // --full-refresh does not clear it from under the run either.
    let mut refresh = RunOptions::new(dir, dir.join("storage"));
    refresh.full_refresh_all = true;
    assert!(dp::engine::runtime::full_refresh(&graph, &refresh)
        .unwrap_err()
        .to_string()
        .starts_with(&prefix));
    assert!(checkpoint.join("offsets-of-the-other-run").exists());
    // Once the other run is gone, the flow runs.
    drop(held);
    let summary = run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();
    assert_eq!(summary.flows[0].input_rows, 1);
}

#[test]
fn a_full_refresh_never_deletes_a_directory_the_pipeline_did_not_write() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(&dir.join("in"), "1.json", &[r#"{"id":1}"#]);
    // The table's path points, by mistake, at a directory of other data.
    write(&dir.join("precious"), "notes.txt", &["keep me"]);
    let p = dp::Pipeline::new()
        .append_flow("copy", "copies", |s| {
            s.read_stream()
                .format("json")
                .schema("id BIGINT")
                .load("in")
        })
        .create_streaming_table(
            "copies",
            dp::TableOptions {
                format: Some("parquet".into()),
                path: Some("precious".into()),
                ..Default::default()
            },
        );
    let graph = p.build(&spec(dir)).unwrap();
    let mut refresh = RunOptions::new(dir, dir.join("storage"));
    refresh.full_refresh_all = true;
    let err = dp::engine::runtime::full_refresh(&graph, &refresh)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "refusing to delete {}: it is not a table this pipeline wrote (it has no `_spark_metadata` or `_delta_log`)\n  help: point the `path` at a directory of its own, or empty this one yourself",
            dir.join("precious").display()
        )
    );
    assert!(dir.join("precious/notes.txt").exists());
    // A table the pipeline wrote is cleared.
    let p = dp::Pipeline::new()
        .append_flow("copy", "copies", |s| {
            s.read_stream()
                .format("json")
                .schema("id BIGINT")
                .load("in")
        })
        .create_streaming_table(
            "copies",
            dp::TableOptions {
                format: Some("parquet".into()),
                ..Default::default()
            },
        );
    run_pipeline(&p, dir);
    let graph = p.build(&spec(dir)).unwrap();
    assert_eq!(
        dp::engine::runtime::full_refresh(&graph, &refresh).unwrap(),
        ["copies"]
    );
    assert!(!dir.join("storage/tables/copies").exists());
    assert!(!dir.join("storage/checkpoints/copy").exists());
}

/// `current_timestamp()` is the batch's `batchTimestampMs` from
/// `offsets/N`, as in Spark: one value per batch, and the same value when
/// the batch is replayed after a crash (here: after its offsets were
/// written, before it ran).
#[test]
fn current_timestamp_is_the_logged_batch_timestamp_even_on_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(&dir.join("in"), "0.json", &[r#"{"n":1}"#]);
    write(&dir.join("in"), "1.json", &[r#"{"n":2}"#]);
    let flow = "clock_replayed";
    let p = dp::Pipeline::new()
        .append_flow(flow, "clock_mem", |s| {
            s.read_stream()
                .format("json")
                .schema("n BIGINT")
                .option("maxFilesPerTrigger", "1")
                .load("in")?
                .select_expr(["n", "current_timestamp() AS t"])
        })
        .create_sink("clock_mem", "memory", [("queryName", "e2e_clock")]);
    dp::engine::runtime::inject_failure(flow, "after_offsets", 1);
    let graph = p.build(&spec(dir)).map_err(|d| d.to_string()).unwrap();
    assert!(run(&graph, &RunOptions::new(dir, dir.join("storage"))).is_err());
    std::thread::sleep(std::time::Duration::from_millis(30));
    let s = run_pipeline(&p, dir);
    assert_eq!(s.flows[0].replayed, 1);
    let logged = |n: u64| -> i64 {
        let text =
            std::fs::read_to_string(dir.join(format!("storage/checkpoints/{flow}/offsets/{n}")))
                .unwrap();
        let meta: serde_json::Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
        meta["batchTimestampMs"].as_i64().unwrap()
    };
    let table = dp::engine::sinks::memory_table("e2e_clock").unwrap();
    let seen: Vec<(u64, i64)> = table
        .batches_by_id()
        .into_iter()
        .map(|(id, bs)| {
            let t = bs[0]
                .column_by_name("t")
                .unwrap()
                .as_any()
                .downcast_ref::<arrow::array::TimestampNanosecondArray>()
                .unwrap()
                .value(0);
            (id, t / 1_000_000)
        })
        .collect();
    // The replay ran 30 ms after offsets/1 was written: it saw the logged time.
    assert_eq!(seen, vec![(0, logged(0)), (1, logged(1))]);
}

/// Checkpoint files (the log, the query shape with its options, source
/// logs, the lock) are the owner's only; table files stay as readable as
/// the umask makes them, for other readers such as Spark.
#[test]
fn checkpoint_files_are_the_owners_only() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(&dir.join("in"), "0.json", &[r#"{"n":1}"#]);
    let p = dp::Pipeline::new()
        .append_flow("private_ckpt", "private_out", |s| {
            s.read_stream().format("json").schema("n BIGINT").load("in")
        })
        .create_streaming_table(
            "private_out",
            dp::TableOptions {
                format: Some("parquet".into()),
                ..Default::default()
            },
        );
    run_pipeline(&p, dir);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let ckpt = dir.join("storage/checkpoints/private_ckpt");
    for d in ["", "offsets", "commits", "sources", "sources/0"] {
        assert_eq!(mode(&ckpt.join(d)), 0o700, "{d}");
    }
    for f in [
        "metadata",
        "offsets/0",
        "commits/0",
        "shape.json",
        "sources/0/0",
    ] {
        assert_eq!(mode(&ckpt.join(f)), 0o600, "{f}");
    }
    assert_eq!(
        mode(&dir.join("storage/checkpoints/private_ckpt.lock")),
        0o600
    );
    // The table's manifest is not the owner's only.
    let manifest = dir.join("storage/tables/private_out/_spark_metadata/0");
    assert_ne!(mode(&manifest) & 0o044, 0, "{:o}", mode(&manifest));
}

/// A power loss without `pipelines.checkpoint.fsync` can leave the newest
/// files of the checkpoint and the table's manifest missing or empty. Each
/// such state, restarted, ends with every row exactly once or with an error
/// naming the damaged file: never a silent loss or a duplicate.
#[test]
fn after_a_simulated_power_loss_a_restart_recovers_exactly_or_names_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    // A fresh project per scenario, run to the end before the damage
    // (copies would keep the original's absolute paths in the logs).
    let project = |dir: &Path| {
        for i in 0..3 {
            write(
                &dir.join("in"),
                &format!("{i}.json"),
                &[
                    &format!(r#"{{"id":{}}}"#, i * 10),
                    &format!(r#"{{"id":{}}}"#, i * 10 + 1),
                ],
            );
        }
    };
    let p = dp::Pipeline::new()
        .append_flow("copy", "copied", |s| {
            s.read_stream()
                .format("json")
                .schema("id BIGINT")
                .option("maxFilesPerTrigger", "1")
                .load("in")
        })
        .create_streaming_table(
            "copied",
            dp::TableOptions {
                format: Some("parquet".into()),
                ..Default::default()
            },
        );
    let all = ["0", "1", "10", "11", "20", "21"];
    let ckpt = "storage/checkpoints/copy";
    let manifest = "storage/tables/copied/_spark_metadata";
    // (what, files removed, files emptied, the error's words; None: recovers).
    type Scenario<'a> = (&'a str, &'a [&'a str], &'a [&'a str], Option<&'a str>);
    let scenarios: [Scenario; 6] = [
        (
            "the last manifest entry lost",
            &["MANIFEST/2"],
            &[],
            Some("has no record of batch 2, which the checkpoint committed with 2 rows for it"),
        ),
        ("the last commit lost", &["commits/2"], &[], None),
        (
            "the last commit empty",
            &[],
            &["commits/2"],
            Some("commits/2: is empty (truncated by a crash or a full disk?)"),
        ),
        (
            "the last offsets and commit lost",
            &["offsets/2", "commits/2"],
            &[],
            None,
        ),
        (
            "the last offsets, commit and source log entry lost",
            &["offsets/2", "commits/2", "sources/0/2"],
            &[],
            None,
        ),
        (
            "the last manifest entry empty",
            &[],
            &["MANIFEST/2"],
            Some("_spark_metadata/2: is empty (truncated by a crash or a full disk?)"),
        ),
    ];
    for (what, removed, emptied, expected) in scenarios {
        let dir = tmp.path().join(what.replace(' ', "_"));
        project(&dir);
        run_pipeline(&p, &dir);
        let path = |f: &str| match f.strip_prefix("MANIFEST/") {
            Some(n) => dir.join(manifest).join(n),
            None => dir.join(ckpt).join(f),
        };
        for f in removed {
            std::fs::remove_file(path(f)).unwrap();
        }
        for f in emptied {
            std::fs::write(path(f), b"").unwrap();
        }
        let graph = p.build(&spec(&dir)).map_err(|d| d.to_string()).unwrap();
        match (
            run(&graph, &RunOptions::new(&dir, dir.join("storage"))),
            expected,
        ) {
            (Ok(_), None) => assert_eq!(
                table_column(&dir.join("storage/tables/copied"), "id"),
                all,
                "{what}: every row exactly once"
            ),
            (Err(e), Some(words)) => {
                let text = e.to_string();
                assert!(text.contains(words), "{what}: `{text}` says `{words}`");
            }
            (Ok(_), Some(words)) => {
                panic!("{what}: the restart ran; expected an error saying `{words}`")
            }
            (Err(e), None) => panic!("{what}: expected an exact recovery, got: {e}"),
        }
    }
}

/// The same power loss for a Delta table: its newest commit lost while the
/// checkpoint's `commits/N` survives is an error at restart, not a loss.
#[test]
fn a_delta_table_that_lost_its_last_commit_is_an_error_at_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for i in 0..3 {
        write(
            &dir.join("in"),
            &format!("{i}.json"),
            &[&format!(r#"{{"id":{i}}}"#)],
        );
    }
    let p = dp::Pipeline::new().table("copied", |s| {
        s.read_stream()
            .format("json")
            .schema("id BIGINT")
            .option("maxFilesPerTrigger", "1")
            .load("in")
    });
    run_pipeline(&p, dir);
    let log = dir.join("storage/tables/copied/_delta_log");
    let newest = std::fs::read_dir(&log)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .max()
        .unwrap();
    std::fs::remove_file(&newest).unwrap();
    let graph = p.build(&spec(dir)).map_err(|d| d.to_string()).unwrap();
    let err = run(&graph, &RunOptions::new(dir, dir.join("storage")))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("flow `copied`: delta")
            && err.contains(
                "has no record of batch 2, which the checkpoint committed with 1 row for it"
            ),
        "{err}"
    );
}

/// Rows of every batch as `a|b|…` strings (arrow's display of each value).
fn display_rows(batches: &[RecordBatch]) -> Vec<String> {
    use arrow::util::display::{ArrayFormatter, FormatOptions};
    let opts = FormatOptions::default().with_null("null");
    let mut out = Vec::new();
    for b in batches {
        let fmts: Vec<ArrayFormatter> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts).unwrap())
            .collect();
        for r in 0..b.num_rows() {
            let cells: Vec<String> = fmts.iter().map(|f| f.value(r).to_string()).collect();
            out.push(cells.join("|"));
        }
    }
    out
}

/// Event times that arrive as strings and are converted by the query
/// (`to_timestamp`): from JSON (read converted by the decoder, or as
/// strings where a line has an escape) and from Parquet (dictionary-encoded
/// strings), the rows per micro-batch are the query's, NULL for what is not
/// a timestamp.
#[test]
fn string_event_times_converted_by_the_query_give_exact_rows() {
    use std::sync::Arc;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(
        &dir.join("json"),
        "0.json",
        &[
            r#"{"ts":"2024-01-01T00:00:07","level":"WARN","n":1}"#,
            r#"{"ts":"bad","level":"ERROR","n":2}"#,
            r#"{"ts":"2024-01-01T00:00:07","level":"INFO","n":3}"#,
        ],
    );
    write(
        &dir.join("json"),
        "1.json",
        &[
            r#"{"ts":"2024-01-01 00:10:00.25","level":"ERROR","n":4}"#,
            r#"{"ts":"2024-01-01T00:00:0\u0038","level":"WARN","n":5}"#,
        ],
    );
    std::fs::create_dir_all(dir.join("parquet")).unwrap();
    let schema = Arc::new(arrow::datatypes::Schema::new(vec![
        arrow::datatypes::Field::new("ts", arrow::datatypes::DataType::Utf8, true),
        arrow::datatypes::Field::new("n", arrow::datatypes::DataType::Int64, true),
    ]));
    let ts = [
        Some("2024-01-01T00:00:07"),
        Some("2024-01-01T00:00:07"),
        Some("2024-01-01T00:09:59.999"),
        Some("2024-01-01T00:10:00"),
        Some("x"),
        None,
        Some("2024-01-01T00:31:00Z"),
    ];
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(ts.to_vec())),
            Arc::new(Int64Array::from_iter_values(0..ts.len() as i64)),
        ],
    )
    .unwrap();
    let file = std::fs::File::create(dir.join("parquet/0.parquet")).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();

    let p = dp::Pipeline::new()
        .append_flow("json_flow", "json_mem", |s| {
            s.read_stream()
                .format("json")
                .schema("ts STRING, level STRING, n BIGINT")
                .option("maxFilesPerTrigger", "1")
                .load("json")?
                .with_column("event_time", "to_timestamp(ts)")?
                .filter("level <> 'INFO'")?
                .select(["event_time", "n"])
        })
        .create_sink("json_mem", "memory", [("queryName", "e2e_string_ts_json")])
        .append_flow("parquet_flow", "parquet_mem", |s| {
            s.read_stream()
                .format("parquet")
                .schema("ts STRING, n BIGINT")
                .load("parquet")?
                .with_column("event_time", "CAST(ts AS TIMESTAMP)")?
                .with_watermark("event_time", "10 minutes")?
                .group_by([dp::plan::functions::tumbling_window(
                    dp::plan::functions::col("event_time"),
                    "10 minutes",
                )])
                .count()
        })
        .create_sink(
            "parquet_mem",
            "memory",
            [("queryName", "e2e_string_ts_parquet")],
        );
    run_pipeline(&p, dir);
    let json: Vec<(u64, Vec<String>)> = dp::engine::sinks::memory_table("e2e_string_ts_json")
        .unwrap()
        .batches_by_id()
        .into_iter()
        .map(|(id, bs)| (id, display_rows(&bs)))
        .collect();
    assert_eq!(
        json,
        vec![
            (
                0,
                vec!["2024-01-01T00:00:07Z|1".to_string(), "null|2".to_string()]
            ),
            (
                1,
                vec![
                    "2024-01-01T00:10:00.250Z|4".to_string(),
                    "2024-01-01T00:00:08Z|5".to_string()
                ]
            ),
        ]
    );
    let mut windows = display_rows(
        &dp::engine::sinks::memory_table("e2e_string_ts_parquet")
            .unwrap()
            .rows(),
    );
    windows.sort();
    assert_eq!(
        windows,
        [
            "{start: 2024-01-01T00:00:00Z, end: 2024-01-01T00:10:00Z}|3",
            "{start: 2024-01-01T00:10:00Z, end: 2024-01-01T00:20:00Z}|1"
        ]
    );
}

/// Strings read from Parquet, filtered and passed on to a Parquet table:
/// the columns stay dictionary-encoded on the way where every batch has
/// them so (batch 0) and are decoded where a file holds them plain (batch
/// 1); either way the table holds the same strings, typed STRING.
#[test]
fn parquet_strings_filtered_into_a_parquet_table_stay_strings() {
    use arrow::datatypes::{DataType, Field, Schema};
    use parquet::file::properties::WriterProperties;
    use std::sync::Arc;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("in")).unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("user_id", DataType::Utf8, true),
        Field::new("level", DataType::Utf8, true),
        Field::new("n", DataType::Int64, true),
    ]));
    let file = |name: &str,
                users: &[Option<&str>],
                levels: &[&str],
                first: i64,
                props: WriterProperties| {
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(users.to_vec())),
                Arc::new(StringArray::from(levels.to_vec())),
                Arc::new(Int64Array::from_iter_values(
                    first..first + users.len() as i64,
                )),
            ],
        )
        .unwrap();
        let f = std::fs::File::create(dir.join("in").join(name)).unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(f, schema.clone(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(15));
    };
    // Dictionary-encoded column chunks (parquet's default).
    file(
        "0.parquet",
        &[Some("u1"), Some("u2"), None, Some("u1"), Some("u3")],
        &["INFO", "ERROR", "WARN", "WARN", "INFO"],
        0,
        WriterProperties::builder().build(),
    );
    // Plain strings: the reader gives them as `Utf8`.
    file(
        "1.parquet",
        &[Some("u2"), Some("u4")],
        &["ERROR", "INFO"],
        5,
        WriterProperties::builder()
            .set_dictionary_enabled(false)
            .build(),
    );
    // Only rows the filter drops: the reader drops them all while decoding
    // (the filter moves into it), and they still count as input rows.
    file(
        "2.parquet",
        &[Some("u5"), Some("u6")],
        &["INFO", "INFO"],
        7,
        WriterProperties::builder().build(),
    );
    let p = dp::Pipeline::new()
        .append_flow("levels", "not_info", |s| {
            s.read_stream()
                .format("parquet")
                .schema("user_id STRING, level STRING, n BIGINT")
                .option("maxFilesPerTrigger", "1")
                .load("in")?
                .filter("level <> 'INFO'")?
                .select(["user_id", "level", "n"])
        })
        .create_streaming_table(
            "not_info",
            dp::TableOptions {
                format: Some("parquet".into()),
                ..Default::default()
            },
        );
    let summary = run_pipeline(&p, dir);
    assert_eq!(summary.flows[0].batches, 3);
    assert_eq!(summary.flows[0].input_rows, 9);
    assert_eq!(summary.flows[0].output_rows, 4);
    let mut per_file = Vec::new();
    for f in dp::engine::sinks::committed_files(dir.join("storage/tables/not_info"))
        .unwrap()
        .unwrap()
    {
        let file = std::fs::File::open(f.path.as_local().unwrap()).unwrap();
        let reader =
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        assert_eq!(
            reader.schema().as_ref(),
            &Schema::new(vec![
                Field::new("user_id", DataType::Utf8, true),
                Field::new("level", DataType::Utf8, true),
                Field::new("n", DataType::Int64, true),
            ])
        );
        let batches: Vec<RecordBatch> = reader.build().unwrap().map(|b| b.unwrap()).collect();
        per_file.push(display_rows(&batches));
    }
    assert_eq!(
        per_file,
        vec![
            vec!["u2|ERROR|1", "null|WARN|2", "u1|WARN|3"],
            vec!["u2|ERROR|5"],
        ]
    );
}
