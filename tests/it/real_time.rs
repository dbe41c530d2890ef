//! The real-time trigger: rows reach the sink as they arrive, epochs are
//! committed at the checkpoint interval (and on stop), a crash in the middle
//! of an epoch loses nothing, one checkpoint switches between micro-batch and
//! real-time runs, and what cannot run in real time is refused at dry-run.

use pipelines_test_support::kafka as kafka_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arrow::array::{AsArray, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use kafka_support::{consume_all, latest_per_key, produce, Out};
use pipelines as dp;
use pipelines::engine::runtime::{inject_failure, run, RunOptions, RunSummary};
use pipelines::engine::sources::MemoryStream;
use pipelines::prelude::*;

/// A spec giving `flow` the real-time trigger (checkpoint every 5 seconds,
/// Spark's minimum), or no trigger (`None`: micro-batches).
fn spec(dir: &Path, flow: &str, real_time: bool) -> dp::spec::PipelineSpec {
    let mut text = "name: rt\nstorage: ./storage\n".to_string();
    if real_time {
        text.push_str(&format!(
            "flows:\n  {flow}:\n    trigger: {{ real_time: {{ checkpoint_interval: 5 seconds }} }}\n"
        ));
    }
    dp::spec::parse_str(&text, &dir.join("pipeline.yml")).unwrap()
}

/// A continuous run on its own thread, stopped by [`Running::stop`].
struct Running {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<dp::Result<RunSummary>>,
}

impl Running {
    fn start(p: &dp::Pipeline, dir: &Path, flow: &str) -> Running {
        let graph = p
            .build(&spec(dir, flow, true))
            .map_err(|d| d.to_string())
            .unwrap();
        let mut opts = RunOptions::new(dir, dir.join("storage"));
        opts.continuous = true;
        let stop = opts.stop.clone();
        let handle = std::thread::spawn(move || run(&graph, &opts));
        Running { stop, handle }
    }

    fn stop(self) -> dp::Result<RunSummary> {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.join().unwrap()
    }
}

/// A micro-batch (available-now) run.
fn run_micro_batch(p: &dp::Pipeline, dir: &Path, flow: &str) -> RunSummary {
    let graph = p
        .build(&spec(dir, flow, false))
        .map_err(|d| d.to_string())
        .unwrap();
    run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap()
}

fn events_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("kind", DataType::Utf8, true),
        Field::new("n", DataType::Int64, true),
    ]))
}

fn events(rows: &[(&str, i64)]) -> RecordBatch {
    RecordBatch::try_new(
        events_schema(),
        vec![
            Arc::new(StringArray::from(
                rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.1).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap()
}

/// memory stream `stream` → count per kind (update mode) → memory table `table`.
fn counts_pipeline(flow: &str, stream: &str, table: &str) -> dp::Pipeline {
    let stream = stream.to_string();
    dp::Pipeline::new()
        .update_flow(flow, "counts_sink", move |s| {
            s.read_stream()
                .format("memory")
                .schema("kind STRING, n BIGINT")
                .load(&stream)?
                .group_by([col("kind")])
                .count()
        })
        .create_sink("counts_sink", "memory", [("queryName", table)])
}

/// Every write of a memory table as (batch id, rows as "kind=count").
fn writes(table: &str) -> Vec<(u64, Vec<String>)> {
    let t = dp::engine::sinks::memory_table(table).unwrap();
    t.batches_by_id()
        .into_iter()
        .map(|(id, batches)| {
            let mut rows = Vec::new();
            for b in &batches {
                let kind = b.column(0).as_string::<i32>();
                let count = b.column(1).as_primitive::<arrow::datatypes::Int64Type>();
                for i in 0..b.num_rows() {
                    rows.push(format!("{}={}", kind.value(i), count.value(i)));
                }
            }
            rows.sort();
            (id, rows)
        })
        .collect()
}

/// The latest count per kind in an update-mode memory table.
fn latest(table: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (_, rows) in writes(table) {
        for r in rows {
            let (k, v) = r.split_once('=').unwrap();
            out.insert(k.to_string(), v.to_string());
        }
    }
    out
}

fn wait_rows(table: &str, rows: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while dp::engine::sinks::memory_table(table)
        .map(|t| t.num_rows())
        .unwrap_or(0)
        < rows
    {
        assert!(
            Instant::now() < deadline,
            "`{table}` never reached {rows} rows"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn checkpoint_files(dir: &Path, flow: &str, log: &str) -> Vec<String> {
    let path: PathBuf = dir.join("storage/checkpoints").join(flow).join(log);
    let mut names: Vec<String> = std::fs::read_dir(&path)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Rows reach the sink while the epoch is still open; the epoch is
/// committed at the checkpoint interval, and again on stop.
#[test]
fn rows_reach_the_sink_at_once_and_epochs_commit_at_the_interval() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let stream = MemoryStream::new("rt_filter_in", events_schema());
    let p = dp::Pipeline::new()
        .append_flow("rt_filter", "rt_filter_sink", |s| {
            s.read_stream()
                .format("memory")
                .schema("kind STRING, n BIGINT")
                .load("rt_filter_in")?
                .filter("kind = 'error'")?
                .select_expr(["n"])
        })
        .create_sink("rt_filter_sink", "memory", [("queryName", "rt_filter_out")]);
    let running = Running::start(&p, dir, "rt_filter");
    let started = Instant::now();
    stream
        .push(events(&[("error", 1), ("info", 2), ("error", 3)]))
        .unwrap();
    wait_rows("rt_filter_out", 2);
    // Delivered long before the first checkpoint (5 s): nothing committed yet.
    assert!(started.elapsed() < Duration::from_secs(4));
    assert_eq!(
        checkpoint_files(dir, "rt_filter", "commits"),
        Vec::<String>::new()
    );
    stream.push(events(&[("error", 4)])).unwrap();
    wait_rows("rt_filter_out", 3);
    // The interval passes: epoch 0 is committed with both pushes.
    let deadline = Instant::now() + Duration::from_secs(20);
    while checkpoint_files(dir, "rt_filter", "commits").is_empty() {
        assert!(Instant::now() < deadline, "epoch 0 was never committed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(started.elapsed() >= Duration::from_secs(5));
    stream.push(events(&[("info", 5), ("error", 6)])).unwrap();
    wait_rows("rt_filter_out", 4);
    let summary = running.stop().unwrap();
    assert_eq!(summary.flows[0].batches, 2);
    assert_eq!(summary.flows[0].input_rows, 6);
    assert_eq!(summary.flows[0].output_rows, 4);
    assert_eq!(checkpoint_files(dir, "rt_filter", "commits"), ["0", "1"]);
    assert_eq!(checkpoint_files(dir, "rt_filter", "offsets"), ["0", "1"]);
    // Each step is written as it happens, tagged with its epoch.
    let table = dp::engine::sinks::memory_table("rt_filter_out").unwrap();
    let per_write: Vec<(u64, Vec<i64>)> = table
        .batches_by_id()
        .into_iter()
        .map(|(id, bs)| {
            (
                id,
                bs.iter()
                    .flat_map(|b| {
                        b.column(0)
                            .as_primitive::<arrow::datatypes::Int64Type>()
                            .values()
                            .to_vec()
                    })
                    .collect(),
            )
        })
        .collect();
    assert_eq!(per_write, vec![(0, vec![1, 3]), (0, vec![4]), (1, vec![6])]);
    let offsets =
        std::fs::read_to_string(dir.join("storage/checkpoints/rt_filter/offsets/1")).unwrap();
    assert!(offsets.contains(r#"{"index":3}"#), "{offsets}");
}

/// A running count per key in update mode with a crash in the middle
/// of an epoch: the restart runs the epoch again from the last committed
/// one, and the counts equal a run without the crash.
#[test]
fn a_crash_mid_epoch_loses_nothing_and_the_counts_match_a_run_without_it() {
    let pushes = [
        vec![("a", 1), ("b", 2), ("a", 3)],
        vec![("b", 4), ("c", 5)],
        vec![("a", 6), ("c", 7), ("c", 8)],
    ];
    // Without a crash.
    let tmp = tempfile::tempdir().unwrap();
    let stream = MemoryStream::new("rt_counts_ok_in", events_schema());
    let p = counts_pipeline("rt_counts_ok", "rt_counts_ok_in", "rt_counts_ok_out");
    let running = Running::start(&p, tmp.path(), "rt_counts_ok");
    let mut rows = 0;
    for (push, new_keys) in pushes.iter().zip([2, 2, 2]) {
        stream.push(events(push)).unwrap();
        rows += new_keys;
        wait_rows("rt_counts_ok_out", rows);
    }
    running.stop().unwrap();
    let expected = BTreeMap::from([
        ("a".to_string(), "3".to_string()),
        ("b".to_string(), "2".to_string()),
        ("c".to_string(), "3".to_string()),
    ]);
    assert_eq!(latest("rt_counts_ok_out"), expected);

    // With a crash in the second step of epoch 1.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let stream = MemoryStream::new("rt_counts_crash_in", events_schema());
    let p = counts_pipeline(
        "rt_counts_crash",
        "rt_counts_crash_in",
        "rt_counts_crash_out",
    );
    let running = Running::start(&p, dir, "rt_counts_crash");
    stream.push(events(&pushes[0])).unwrap();
    wait_rows("rt_counts_crash_out", 2);
    running.stop().unwrap(); // epoch 0 committed
    inject_failure("rt_counts_crash", "real_time_step", 1);
    let running = Running::start(&p, dir, "rt_counts_crash");
    stream.push(events(&pushes[1])).unwrap();
    wait_rows("rt_counts_crash_out", 4); // step 0 of epoch 1 delivered b=2, c=1
    stream.push(events(&pushes[2])).unwrap();
    let err = running.handle.join().unwrap().unwrap_err().to_string();
    assert_eq!(
        err,
        "flow `rt_counts_crash`: injected failure at real_time_step of batch 1"
    );
    assert_eq!(checkpoint_files(dir, "rt_counts_crash", "commits"), ["0"]);
    assert_eq!(
        writes("rt_counts_crash_out"),
        vec![
            (0, vec!["a=2".to_string(), "b=1".to_string()]),
            (1, vec!["b=2".to_string(), "c=1".to_string()]),
        ]
    );
    // The restart runs epoch 1 again from epoch 0's state: the failed
    // attempt's rows are replaced, nothing is counted twice.
    let running = Running::start(&p, dir, "rt_counts_crash");
    let deadline = Instant::now() + Duration::from_secs(20);
    while latest("rt_counts_crash_out") != expected {
        assert!(
            Instant::now() < deadline,
            "{:?}",
            writes("rt_counts_crash_out")
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    running.stop().unwrap();
    assert_eq!(latest("rt_counts_crash_out"), expected);
    assert_eq!(
        writes("rt_counts_crash_out"),
        vec![
            (0, vec!["a=2".to_string(), "b=1".to_string()]),
            (
                1,
                vec!["a=3".to_string(), "b=2".to_string(), "c=3".to_string()]
            ),
        ]
    );
    assert_eq!(
        checkpoint_files(dir, "rt_counts_crash", "commits"),
        ["0", "1"]
    );
}

/// One checkpoint, three runs: micro-batch, real-time, micro-batch. Batch
/// ids continue, and the counts carry over.
#[test]
fn the_trigger_switches_between_micro_batch_and_real_time_on_one_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let stream = MemoryStream::new("rt_switch_in", events_schema());
    let p = counts_pipeline("rt_switch", "rt_switch_in", "rt_switch_out");
    stream.push(events(&[("a", 1), ("b", 2)])).unwrap();
    let s = run_micro_batch(&p, dir, "rt_switch");
    assert_eq!((s.flows[0].batches, s.flows[0].input_rows), (1, 2));

    // Two steps in one epoch: the epoch's state holds both.
    let running = Running::start(&p, dir, "rt_switch");
    stream.push(events(&[("a", 3), ("c", 4)])).unwrap();
    wait_rows("rt_switch_out", 4);
    stream.push(events(&[("c", 7)])).unwrap();
    wait_rows("rt_switch_out", 5);
    let s = running.stop().unwrap();
    assert_eq!((s.flows[0].batches, s.flows[0].input_rows), (1, 3));

    stream
        .push(events(&[("a", 5), ("b", 6), ("c", 8)]))
        .unwrap();
    let s = run_micro_batch(&p, dir, "rt_switch");
    assert_eq!((s.flows[0].batches, s.flows[0].input_rows), (1, 3));
    assert_eq!(
        writes("rt_switch_out"),
        vec![
            (0, vec!["a=1".to_string(), "b=1".to_string()]),
            (1, vec!["a=2".to_string(), "c=1".to_string()]),
            (1, vec!["c=2".to_string()]),
            (
                2,
                vec!["a=3".to_string(), "b=2".to_string(), "c=3".to_string()]
            ),
        ]
    );
    assert_eq!(
        checkpoint_files(dir, "rt_switch", "commits"),
        ["0", "1", "2"]
    );
}

/// A crash after an epoch's offsets were logged and before its commit: the
/// next run (here a micro-batch run) replays the epoch as one batch over
/// exactly the logged offsets, and the memory sink replaces what the epoch
/// wrote.
#[test]
fn a_crash_before_the_epoch_commit_replays_the_epoch_over_its_offsets() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let stream = MemoryStream::new("rt_replay_in", events_schema());
    let p = counts_pipeline("rt_replay", "rt_replay_in", "rt_replay_out");
    inject_failure("rt_replay", "before_commit", 0);
    let running = Running::start(&p, dir, "rt_replay");
    stream.push(events(&[("a", 1), ("b", 2)])).unwrap();
    wait_rows("rt_replay_out", 2);
    stream.push(events(&[("a", 3)])).unwrap();
    wait_rows("rt_replay_out", 3);
    let err = running.stop().unwrap_err().to_string();
    assert_eq!(
        err,
        "flow `rt_replay`: injected failure at before_commit of batch 0"
    );
    assert_eq!(checkpoint_files(dir, "rt_replay", "offsets"), ["0"]);
    assert_eq!(
        checkpoint_files(dir, "rt_replay", "commits"),
        Vec::<String>::new()
    );
    stream.push(events(&[("c", 4)])).unwrap();
    let s = run_micro_batch(&p, dir, "rt_replay");
    assert_eq!(
        (
            s.flows[0].batches,
            s.flows[0].replayed,
            s.flows[0].input_rows
        ),
        (2, 1, 4)
    );
    assert_eq!(
        writes("rt_replay_out"),
        vec![
            (0, vec!["a=2".to_string(), "b=1".to_string()]),
            (1, vec!["c=1".to_string()]),
        ]
    );
}

/// A stream-stream join and a file source in real-time mode.
#[test]
fn stream_stream_joins_and_file_sources_run_in_real_time() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    std::fs::create_dir_all(dir.join("names")).unwrap();
    let left = MemoryStream::new("rt_join_left", events_schema());
    let p = dp::Pipeline::new()
        .append_flow("rt_join", "rt_join_sink", |s| {
            let l = s
                .read_stream()
                .format("memory")
                .schema("kind STRING, n BIGINT")
                .load("rt_join_left")?;
            let r = s
                .read_stream()
                .format("json")
                .schema("n BIGINT, name STRING")
                .load("names")?;
            l.join_using(&r, ["n"], JoinType::Inner)?
                .select_expr(["n", "kind", "name"])
        })
        .create_sink("rt_join_sink", "memory", [("queryName", "rt_join_out")]);
    let running = Running::start(&p, &dir, "rt_join");
    left.push(events(&[("x", 1), ("y", 2)])).unwrap();
    // Files appear whole (written aside, then renamed in), as a running
    // source must never see one half written.
    let put = |name: &str, text: &str| {
        let aside = dir.join(format!(".{name}"));
        std::fs::write(&aside, text).unwrap();
        std::fs::rename(&aside, dir.join("names").join(name)).unwrap();
    };
    put("0.json", "{\"n\":1,\"name\":\"one\"}\n");
    wait_rows("rt_join_out", 1);
    // Rows of one step join rows the state kept from earlier steps.
    put("1.json", "{\"n\":2,\"name\":\"two\"}\n");
    wait_rows("rt_join_out", 2);
    left.push(events(&[("z", 1)])).unwrap();
    wait_rows("rt_join_out", 3);
    running.stop().unwrap();
    let table = dp::engine::sinks::memory_table("rt_join_out").unwrap();
    let mut rows: Vec<String> = table
        .rows()
        .iter()
        .flat_map(|b| {
            let n = b.column(0).as_primitive::<arrow::datatypes::Int64Type>();
            let kind = b.column(1).as_string::<i32>();
            let name = b.column(2).as_string::<i32>();
            (0..b.num_rows())
                .map(|i| format!("{} {} {}", n.value(i), kind.value(i), name.value(i)))
                .collect::<Vec<_>>()
        })
        .collect();
    rows.sort();
    assert_eq!(rows, ["1 x one", "1 z one", "2 y two"]);
}

/// Each dry-run problem as "subject: message / help".
fn dry_run_errors(p: &dp::Pipeline, flow: &str) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    match p.build(&spec(tmp.path(), flow, true)) {
        Ok(_) => Vec::new(),
        Err(d) => d
            .iter()
            .map(|d| {
                format!(
                    "{}: {} / {}",
                    d.subject.clone().unwrap_or_default(),
                    d.message,
                    d.help.clone().unwrap_or_default()
                )
            })
            .collect(),
    }
}

/// What cannot run in real time is refused before any data moves, with the
/// reason and the fix.
#[test]
fn what_cannot_run_in_real_time_is_refused_at_dry_run() {
    let q = |s: &Session| {
        s.read_stream()
            .format("memory")
            .schema("kind STRING, n BIGINT")
            .load("rt_dry_in")
    };
    let file_sink = dp::Pipeline::new()
        .append_flow("rt_to_files", "files", q)
        .create_sink("files", "parquet", [("path", "out/files")]);
    assert_eq!(
        dry_run_errors(&file_sink, "rt_to_files"),
        ["flow `rt_to_files`: real-time mode writes to sink `files` (parquet), and a file sink commits its files once per micro-batch, so rows could not reach it as they arrive / write to a sink that takes rows as they arrive (kafka, memory, console), or run the flow in micro-batches (`trigger: { processing_time: 1 second }`)"]
    );
    let delta_table = dp::Pipeline::new()
        .append_flow("rt_to_table", "events_table", q)
        .create_streaming_table("events_table", Default::default());
    assert_eq!(
        dry_run_errors(&delta_table, "rt_to_table"),
        ["flow `rt_to_table`: real-time mode writes to streaming table `events_table` (delta), and a Delta table commits a version once per micro-batch, so rows could not reach it as they arrive / write to a sink that takes rows as they arrive (kafka, memory, console), or run the flow in micro-batches (`trigger: { processing_time: 1 second }`)"]
    );
    let append_agg = dp::Pipeline::new()
        .append_flow("rt_append_counts", "mem", |s| {
            s.read_stream()
                .format("memory")
                .schema("kind STRING, ts TIMESTAMP")
                .load("rt_dry_in")?
                .with_watermark("ts", "10 minutes")?
                .group_by([window(col("ts"), "5 minutes", "5 minutes"), col("kind")])
                .count()
        })
        .create_sink("mem", "memory", [("queryName", "rt_dry_out")]);
    assert_eq!(
        dry_run_errors(&append_agg, "rt_append_counts"),
        ["flow `rt_append_counts`: real-time mode emits rows as they arrive, but in append mode an aggregation's result reaches the sink only once the watermark has passed, in a later batch / use update mode (#[update_flow] into a sink) to see rows at once, or run the flow in micro-batches (`trigger: { processing_time: 1 second }`)"]
    );
    // A foreach_batch sink, and a checkpoint interval below the minimum.
    let foreach = dp::Pipeline::new()
        .append_flow("rt_to_foreach", "each", q)
        .create_sink("each", "foreach_batch", [("queryName", "each")]);
    assert_eq!(
        dry_run_errors(&foreach, "rt_to_foreach"),
        ["flow `rt_to_foreach`: real-time mode writes to sink `each` (foreach_batch), and a foreach_batch callback is called once per micro-batch with its batch id, which a real-time epoch does not have / write to a sink that takes rows as they arrive (kafka, memory, console), or run the flow in micro-batches (`trigger: { processing_time: 1 second }`)"]
    );
}

/// The `event_counts` example's query in real time: topic `rt-events` →
/// count per key → a Kafka sink (`<flow>_sink`) writing topic `rt-counts`.
fn kafka_counts_pipeline(flow: &str, brokers: &str) -> dp::Pipeline {
    let b = brokers.to_string();
    let sink = format!("{flow}_sink");
    dp::Pipeline::new()
        .update_flow(flow, &sink, move |s| {
            s.read_stream()
                .format("kafka")
                .option("kafka.bootstrap.servers", &b)
                .option("subscribe", "rt-events")
                .option("startingOffsets", "earliest")
                .load_default()?
                .select_expr(["CAST(key AS STRING) AS event_type"])?
                .group_by([col("event_type")])
                .count()?
                .select_expr(["event_type AS key", "CAST(count AS STRING) AS value"])
        })
        .create_sink(
            &sink,
            "kafka",
            [
                ("kafka.bootstrap.servers", brokers.to_string()),
                ("topic", "rt-counts".to_string()),
            ],
        )
}

/// Waits (30 s at most) until the latest count per key in `rt-counts` is `want`.
fn wait_for_counts(brokers: &str, want: &BTreeMap<String, String>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = latest_per_key(&consume_all(brokers, "rt-counts"));
        if &got == want {
            return;
        }
        assert!(Instant::now() < deadline, "got {got:?}, want {want:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A running count per key in real time: Kafka → count per key → Kafka
/// (librdkafka's mock cluster). Counts arrive while the epoch is open.
#[test]
fn kafka_counts_flow_in_real_time() {
    let c = rdkafka::mocking::MockCluster::new(1).unwrap();
    let brokers = c.bootstrap_servers();
    c.create_topic("rt-events", 2, 1).unwrap();
    c.create_topic("rt-counts", 1, 1).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let p = kafka_counts_pipeline("rt_kafka", &brokers);
    let running = Running::start(&p, tmp.path(), "rt_kafka");
    let wait_for = |want: &BTreeMap<String, String>| wait_for_counts(&brokers, want);
    produce(
        &brokers,
        "rt-events",
        &[
            Out::kv("click", "1"),
            Out::kv("view", "2"),
            Out::kv("click", "3"),
        ],
    );
    wait_for(&BTreeMap::from([
        ("click".to_string(), "2".to_string()),
        ("view".to_string(), "1".to_string()),
    ]));
    assert!(checkpoint_files(tmp.path(), "rt_kafka", "commits").is_empty());
    produce(
        &brokers,
        "rt-events",
        &[Out::kv("buy", "4"), Out::kv("click", "5")],
    );
    wait_for(&BTreeMap::from([
        ("buy".to_string(), "1".to_string()),
        ("click".to_string(), "3".to_string()),
        ("view".to_string(), "1".to_string()),
    ]));
    let s = running.stop().unwrap();
    assert_eq!((s.flows[0].batches, s.flows[0].input_rows), (1, 5));
    // A restart goes on from the committed epoch's offsets.
    produce(&brokers, "rt-events", &[Out::kv("view", "6")]);
    let running = Running::start(&p, tmp.path(), "rt_kafka");
    wait_for(&BTreeMap::from([
        ("buy".to_string(), "1".to_string()),
        ("click".to_string(), "3".to_string()),
        ("view".to_string(), "2".to_string()),
    ]));
    let s = running.stop().unwrap();
    assert_eq!((s.flows[0].batches, s.flows[0].input_rows), (1, 1));
    let offsets =
        std::fs::read_to_string(tmp.path().join("storage/checkpoints/rt_kafka/offsets/1")).unwrap();
    let last = offsets.lines().last().unwrap();
    let v: serde_json::Value = serde_json::from_str(last).unwrap();
    let total: i64 = v["rt-events"]
        .as_object()
        .unwrap()
        .values()
        .map(|o| o.as_i64().unwrap())
        .sum();
    assert_eq!(total, 6, "{offsets}");
}

/// The same against a tansu broker process (when one is installed): a
/// restart goes on from the committed epoch's offsets.
#[test]
fn kafka_real_time_resumes_from_the_committed_epoch_on_a_broker_process() {
    let Some(binary) = kafka_support::tansu_binary() else {
        eprintln!("skipped: no tansu binary (scripts/test installs it)");
        return;
    };
    let broker = kafka_support::Tansu::start(binary);
    let brokers = broker.brokers.clone();
    broker.create_topic("rt-events", 3);
    broker.create_topic("rt-counts", 1);
    let tmp = tempfile::tempdir().unwrap();
    let p = kafka_counts_pipeline("rt_tansu", &brokers);
    let wait_for = |want: &BTreeMap<String, String>| wait_for_counts(&brokers, want);
    let kinds = ["a", "b", "c", "a"];
    let batch = |from: usize, to: usize| -> Vec<Out> {
        (from..to)
            .map(|i| Out::kv(kinds[i % 4], &i.to_string()))
            .collect()
    };
    let counts = |n: usize| -> BTreeMap<String, String> {
        let mut c: BTreeMap<String, usize> = BTreeMap::new();
        for i in 0..n {
            *c.entry(kinds[i % 4].to_string()).or_default() += 1;
        }
        c.into_iter().map(|(k, v)| (k, v.to_string())).collect()
    };
    produce(&brokers, "rt-events", &batch(0, 40));
    let running = Running::start(&p, tmp.path(), "rt_tansu");
    wait_for(&counts(40));
    produce(&brokers, "rt-events", &batch(40, 60));
    wait_for(&counts(60));
    let s = running.stop().unwrap();
    assert_eq!((s.flows[0].batches, s.flows[0].input_rows), (1, 60));
    produce(&brokers, "rt-events", &batch(60, 100));
    let running = Running::start(&p, tmp.path(), "rt_tansu");
    wait_for(&counts(100));
    let s = running.stop().unwrap();
    assert_eq!((s.flows[0].batches, s.flows[0].input_rows), (1, 40));
}

/// Expectations in real time: each step's rows are checked as they
/// arrive, dropped rows go to the quarantine at once, the epoch's progress
/// sums the steps' counts, and a fail stops the flow.
#[test]
fn expectations_check_every_step_in_real_time() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let stream = MemoryStream::new("rt_quality_in", events_schema());
    let p = dp::Pipeline::new()
        .append_flow("rt_quality", "rt_quality_sink", |s| {
            s.read_stream()
                .format("memory")
                .schema("kind STRING, n BIGINT")
                .load("rt_quality_in")
        })
        .create_sink(
            "rt_quality_sink",
            "memory",
            [("queryName", "rt_quality_out")],
        )
        .create_sink("rt_quality_bad", "memory", [("queryName", "rt_quality_q")])
        .expect(
            "rt_quality_sink",
            dp::Expectation::warn("known", "kind IN ('error', 'info')"),
        )
        .expect(
            "rt_quality_sink",
            dp::Expectation::drop("positive", "n > 0"),
        )
        .expect(
            "rt_quality_sink",
            dp::Expectation::fail("small", "n < 1000"),
        )
        .quarantine("rt_quality_sink", "rt_quality_bad");
    let running = Running::start(&p, dir, "rt_quality");
    stream
        .push(events(&[("error", 1), ("debug", -2), ("info", 3)]))
        .unwrap();
    wait_rows("rt_quality_out", 2);
    wait_rows("rt_quality_q", 1);
    stream.push(events(&[("debug", 4), ("info", 0)])).unwrap();
    wait_rows("rt_quality_out", 3);
    wait_rows("rt_quality_q", 2);
    let summary = running.stop().unwrap();
    assert_eq!(summary.flows[0].input_rows, 5);
    assert_eq!(summary.flows[0].output_rows, 3);
    let kinds = |table: &str| -> Vec<String> {
        let t = dp::engine::sinks::memory_table(table).unwrap();
        t.rows()
            .iter()
            .flat_map(|b| {
                let k = b.column(0).as_string::<i32>();
                let n = b.column(1).as_primitive::<arrow::datatypes::Int64Type>();
                (0..b.num_rows())
                    .map(|i| format!("{}={}", k.value(i), n.value(i)))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    assert_eq!(kinds("rt_quality_out"), ["error=1", "info=3", "debug=4"]);
    assert_eq!(kinds("rt_quality_q"), ["debug=-2", "info=0"]);
    // One epoch (stopped before the interval): the counts of both steps.
    let quality: Vec<serde_json::Value> =
        pipelines::engine::event_log::read_batch_progress(dir.join("storage"))
            .unwrap()
            .into_iter()
            .map(|v| v["dataQuality"].clone())
            .collect();
    assert_eq!(
        quality,
        [serde_json::json!({
            "dropped_records": 2,
            "quarantined_records": 2,
            "expectations": [
                {"name": "known", "dataset": "rt_quality_sink", "passed_records": 3, "failed_records": 2},
                {"name": "positive", "dataset": "rt_quality_sink", "passed_records": 3, "failed_records": 2},
                {"name": "small", "dataset": "rt_quality_sink", "passed_records": 5, "failed_records": 0},
            ]
        })]
    );

    // A row failing the fail-expectation stops the flow.
    let running = Running::start(&p, dir, "rt_quality");
    stream.push(events(&[("info", 5000)])).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !running.handle.is_finished() {
        assert!(Instant::now() < deadline, "the fail never stopped the flow");
        std::thread::sleep(Duration::from_millis(5));
    }
    let err = running.stop().unwrap_err().to_string();
    assert_eq!(
        err,
        "flow `rt_quality`: expectation `small` of sink `rt_quality_sink` failed in batch 1: 1 row not meeting `n < 1000`, e.g. {kind: info, n: 5000}\n  \
         help: epoch 1 was not committed; the rows of its earlier steps already reached the sink (real-time mode delivers at least once); \
         fix the data or the expectation and run again: the epoch runs again from the last committed one"
    );
    assert_eq!(kinds("rt_quality_out"), ["error=1", "info=3", "debug=4"]);
}
