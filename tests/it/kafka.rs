//! The Kafka source and sink against librdkafka's in-process mock cluster
//! (a real Kafka-protocol broker listening on loopback): an update flow
//! counting events per key, Kafka to Kafka, end to end; Spark's source
//! columns and options, offsets in the checkpoint across restarts and
//! failures, new partitions and topics, data loss, delivery failures and
//! the sink's dry-run checks.

use pipelines_test_support::kafka as kafka_support;

use std::collections::BTreeMap;
use std::path::Path;

use arrow::array::{
    Array, AsArray, BinaryArray, Int32Array, Int64Array, TimestampMicrosecondArray,
};
use arrow::record_batch::RecordBatch;
use kafka_support::{consume_all, latest_per_key, produce, In, Out};
use pipelines as dp;
use pipelines::engine::runtime::{run, RunOptions, RunSummary};
use pipelines::prelude::*;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;

fn spec(dir: &Path) -> dp::spec::PipelineSpec {
    dp::spec::parse_str(
        "name: kafka\nstorage: ./storage\n",
        &dir.join("pipeline.yml"),
    )
    .unwrap()
}

/// Builds (dry-run) and runs the pipeline. A dry-run problem comes back as
/// the error the run would have given: `flow `x`: message` and its help
/// (option values are checked at dry-run).
fn try_run(p: &dp::Pipeline, dir: &Path) -> dp::Result<RunSummary> {
    let graph = match p.build(&spec(dir)) {
        Ok(g) => g,
        Err(diags) => {
            let d = diags.iter().next().expect("a failed build has a problem");
            let message = match &d.subject {
                Some(s) => format!("{s}: {}", d.message),
                None => d.message.clone(),
            };
            return Err(match &d.help {
                Some(h) => dp::Error::runtime_with_help(message, h.clone()),
                None => dp::Error::runtime(message),
            });
        }
    };
    run(&graph, &RunOptions::new(dir, dir.join("storage")))
}

fn run_ok(p: &dp::Pipeline, dir: &Path) -> RunSummary {
    try_run(p, dir).unwrap()
}

fn cluster() -> (MockCluster<'static, DefaultProducerContext>, String) {
    let c = MockCluster::new(1).unwrap();
    let b = c.bootstrap_servers();
    (c, b)
}

/// The `event_counts` example's query: events → count per
/// `CAST(key AS STRING)` → key/value.
fn event_counts(brokers: &str, topic: &str, max_per_trigger: Option<u64>) -> dp::Pipeline {
    event_counts_named("event_counts_flow", brokers, topic, max_per_trigger)
}

/// [`event_counts`] with the flow named `flow`: injected failures are
/// process-wide per flow name, so a test that injects one names its own.
fn event_counts_named(
    flow: &str,
    brokers: &str,
    topic: &str,
    max_per_trigger: Option<u64>,
) -> dp::Pipeline {
    let b = brokers.to_string();
    let t = topic.to_string();
    dp::Pipeline::new()
        .update_flow(flow, "event_counts_sink", move |s| {
            let mut r = s
                .read_stream()
                .format("kafka")
                .option("kafka.bootstrap.servers", &b)
                .option("subscribe", &t)
                .option("startingOffsets", "earliest");
            if let Some(n) = max_per_trigger {
                r = r.option("maxOffsetsPerTrigger", n);
            }
            r.load_default()?
                .select_expr(["CAST(key AS STRING) AS event_type"])?
                .group_by([col("event_type")])
                .count()?
                .select_expr(["event_type AS key", "CAST(count AS STRING) AS value"])
        })
        .create_sink(
            "event_counts_sink",
            "kafka",
            [
                ("kafka.bootstrap.servers", brokers.to_string()),
                ("topic", "event-counts".to_string()),
            ],
        )
}

fn events(n: usize, offset: usize) -> Vec<Out> {
    const TYPES: [&str; 4] = ["click", "view", "buy", "click"];
    (offset..offset + n)
        .map(|i| Out::kv(TYPES[i % 4], &format!("{{\"n\":{i}}}")))
        .collect()
}

fn counts(messages: &[Out]) -> BTreeMap<String, String> {
    let mut c: BTreeMap<String, u64> = BTreeMap::new();
    for m in messages {
        *c.entry(m.key.clone().unwrap()).or_default() += 1;
    }
    c.into_iter().map(|(k, v)| (k, v.to_string())).collect()
}

#[test]
fn update_flow_counts_per_event_type_into_kafka() {
    let (c, brokers) = cluster();
    c.create_topic("events", 3, 1).unwrap();
    c.create_topic("event-counts", 1, 1).unwrap();
    let first = events(300, 0);
    produce(&brokers, "events", &first);
    let tmp = tempfile::tempdir().unwrap();
    let p = event_counts(&brokers, "events", Some(100));
    let s = run_ok(&p, tmp.path());
    assert_eq!(s.flows[0].batches, 3);
    assert_eq!(s.flows[0].input_rows, 300);
    let out = consume_all(&brokers, "event-counts");
    // Update mode: each batch sends the three counts it changed.
    assert_eq!(out.len(), 9);
    assert_eq!(latest_per_key(&out), counts(&first));
    assert_eq!(
        latest_per_key(&out),
        BTreeMap::from([
            ("buy".to_string(), "75".to_string()),
            ("click".to_string(), "150".to_string()),
            ("view".to_string(), "75".to_string()),
        ])
    );

    // More clicks only: the next run sends only the changed count.
    produce(
        &brokers,
        "events",
        &[Out::kv("click", "x"), Out::kv("click", "y")],
    );
    let s = run_ok(&p, tmp.path());
    assert_eq!((s.flows[0].batches, s.flows[0].input_rows), (1, 2));
    let out = consume_all(&brokers, "event-counts");
    assert_eq!(out.len(), 10);
    let last = out.iter().max_by_key(|m| m.offset).unwrap();
    assert_eq!(
        (last.key.as_deref(), last.value.as_deref()),
        (Some("click"), Some("152"))
    );
    // Nothing new: no batch.
    let s = run_ok(&p, tmp.path());
    assert_eq!(s.flows[0].batches, 0);
}

fn memory_copy(brokers: &str, table: &str, options: &[(&str, &str)]) -> dp::Pipeline {
    let b = brokers.to_string();
    let opts: Vec<(String, String)> = options
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    dp::Pipeline::new()
        .append_flow("copy", "mem", move |s| {
            s.read_stream()
                .format("kafka")
                .option("kafka.bootstrap.servers", &b)
                .options(opts.clone())
                .load_default()
        })
        .create_sink("mem", "memory", [("queryName", table)])
}

fn rows(table: &str) -> Vec<RecordBatch> {
    dp::engine::sinks::memory_table(table)
        .map(|t| t.rows())
        .unwrap_or_default()
}

/// (topic, partition, offset, key, value) of every row, sorted.
fn records(batches: &[RecordBatch]) -> Vec<(String, i32, i64, String, String)> {
    let mut out = Vec::new();
    for b in batches {
        let topic = b.column_by_name("topic").unwrap().as_string::<i32>();
        let part = b
            .column_by_name("partition")
            .unwrap()
            .as_any()
            .downcast_ref::<Int32Array>()
            .unwrap();
        let off = b
            .column_by_name("offset")
            .unwrap()
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        let key = b
            .column_by_name("key")
            .unwrap()
            .as_any()
            .downcast_ref::<BinaryArray>()
            .unwrap();
        let value = b
            .column_by_name("value")
            .unwrap()
            .as_any()
            .downcast_ref::<BinaryArray>()
            .unwrap();
        for i in 0..b.num_rows() {
            out.push((
                topic.value(i).to_string(),
                part.value(i),
                off.value(i),
                String::from_utf8_lossy(key.value(i)).into_owned(),
                String::from_utf8_lossy(value.value(i)).into_owned(),
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn source_columns_are_sparks_with_headers() {
    let (c, brokers) = cluster();
    c.create_topic("cols", 1, 1).unwrap();
    produce(
        &brokers,
        "cols",
        &[
            Out {
                key: Some("k1".into()),
                value: Some("v1".into()),
                timestamp_ms: Some(1_700_000_000_123),
                headers: vec![("h".into(), Some("x".into())), ("empty".into(), None)],
                ..Out::default()
            },
            Out {
                key: None,
                value: Some("v2".into()),
                timestamp_ms: Some(1_700_000_001_000),
                ..Out::default()
            },
        ],
    );
    let tmp = tempfile::tempdir().unwrap();
    let p = memory_copy(
        &brokers,
        "kafka_cols",
        &[
            ("subscribe", "cols"),
            ("startingOffsets", "earliest"),
            ("includeHeaders", "true"),
        ],
    );
    run_ok(&p, tmp.path());
    let b = rows("kafka_cols");
    assert_eq!(b.len(), 1);
    let b = &b[0];
    assert_eq!(
        dp::plan::ddl::schema_to_ddl(&b.schema()),
        "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, timestampType INT, headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
    );
    let key = b.column(0).as_any().downcast_ref::<BinaryArray>().unwrap();
    assert_eq!(key.value(0), b"k1");
    assert!(key.is_null(1));
    let ts = b
        .column(5)
        .as_any()
        .downcast_ref::<TimestampMicrosecondArray>()
        .unwrap();
    assert_eq!(ts.value(0), 1_700_000_000_123_000);
    assert_eq!(ts.value(1), 1_700_000_001_000_000);
    let tst = b.column(6).as_any().downcast_ref::<Int32Array>().unwrap();
    assert_eq!((tst.value(0), tst.value(1)), (0, 0));
    let headers = b.column(7).as_list::<i32>();
    let first = headers.value(0);
    let first = first.as_struct();
    let hk = first.column(0).as_string::<i32>();
    let hv = first
        .column(1)
        .as_any()
        .downcast_ref::<BinaryArray>()
        .unwrap();
    assert_eq!((hk.value(0), hv.value(0)), ("h", &b"x"[..]));
    assert_eq!(hk.value(1), "empty");
    assert!(hv.is_null(1));
    assert_eq!(headers.value(1).len(), 0);
    assert_eq!(
        records(std::slice::from_ref(b)),
        vec![
            ("cols".into(), 0, 0, "k1".into(), "v1".into()),
            ("cols".into(), 0, 1, "".into(), "v2".into()),
        ]
    );
}

#[test]
fn starting_offsets_latest_earliest_and_per_partition() {
    let (c, brokers) = cluster();
    c.create_topic("so", 2, 1).unwrap();
    let msgs = |tag: &str| -> Vec<Out> {
        (0..4)
            .map(|i| Out {
                key: Some(format!("{tag}{i}")),
                value: Some(format!("{tag}{i}")),
                partition: Some(i % 2),
                ..Out::default()
            })
            .collect()
    };
    produce(&brokers, "so", &msgs("a"));
    // latest (the default): only what arrives after the first start.
    let tmp = tempfile::tempdir().unwrap();
    let p = memory_copy(&brokers, "so_latest", &[("subscribe", "so")]);
    let s = run_ok(&p, tmp.path());
    assert_eq!(s.flows[0].batches, 0);
    produce(&brokers, "so", &msgs("b"));
    run_ok(&p, tmp.path());
    let got: Vec<String> = records(&rows("so_latest"))
        .into_iter()
        .map(|r| r.3)
        .collect();
    assert_eq!(got, ["b0", "b2", "b1", "b3"]);
    // JSON: partition 0 from offset 1, partition 1 from the earliest (-2).
    let tmp = tempfile::tempdir().unwrap();
    let p = memory_copy(
        &brokers,
        "so_json",
        &[
            ("subscribe", "so"),
            ("startingOffsets", r#"{"so": {"0": 1, "1": -2}}"#),
        ],
    );
    run_ok(&p, tmp.path());
    let got: Vec<(i32, i64, String)> = records(&rows("so_json"))
        .into_iter()
        .map(|r| (r.1, r.2, r.3))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, 1, "a2".into()),
            (0, 2, "b0".into()),
            (0, 3, "b2".into()),
            (1, 0, "a1".into()),
            (1, 1, "a3".into()),
            (1, 2, "b1".into()),
            (1, 3, "b3".into()),
        ]
    );
    // assign: only partition 1.
    let tmp = tempfile::tempdir().unwrap();
    let p = memory_copy(
        &brokers,
        "so_assign",
        &[
            ("assign", r#"{"so": [1]}"#),
            ("startingOffsets", "earliest"),
        ],
    );
    run_ok(&p, tmp.path());
    let parts: Vec<i32> = records(&rows("so_assign"))
        .into_iter()
        .map(|r| r.1)
        .collect();
    assert_eq!(parts, [1, 1, 1, 1]);
}

#[test]
fn max_offsets_per_trigger_splits_batches_and_offsets_are_in_the_checkpoint() {
    let (c, brokers) = cluster();
    c.create_topic("mo", 2, 1).unwrap();
    let msgs: Vec<Out> = (0..10)
        .map(|i| Out {
            key: Some(i.to_string()),
            value: Some(i.to_string()),
            partition: Some(if i < 8 { 0 } else { 1 }),
            ..Out::default()
        })
        .collect();
    produce(&brokers, "mo", &msgs);
    let tmp = tempfile::tempdir().unwrap();
    let p = memory_copy(
        &brokers,
        "mo_out",
        &[
            ("subscribe", "mo"),
            ("startingOffsets", "earliest"),
            ("maxOffsetsPerTrigger", "4"),
        ],
    );
    let s = run_ok(&p, tmp.path());
    assert_eq!((s.flows[0].batches, s.flows[0].input_rows), (3, 10));
    let ckpt = tmp.path().join("storage/checkpoints/copy/offsets");
    let offsets: Vec<String> = (0..3)
        .map(|n| {
            let text = std::fs::read_to_string(ckpt.join(n.to_string())).unwrap();
            text.lines().last().unwrap().to_string()
        })
        .collect();
    // Backlog 8 + 2, four per batch in proportion: 3 + 1 (a share below one rounds up).
    assert_eq!(
        offsets,
        [
            r#"{"mo":{"0":3,"1":1}}"#,
            r#"{"mo":{"0":6,"1":2}}"#,
            r#"{"mo":{"0":8,"1":2}}"#,
        ]
    );
    let sizes: Vec<usize> = dp::engine::sinks::memory_table("mo_out")
        .unwrap()
        .batches_by_id()
        .iter()
        .map(|(_, b)| b.iter().map(|b| b.num_rows()).sum())
        .collect();
    assert_eq!(sizes, [4, 4, 2]);
}

#[test]
fn a_failed_batch_is_replayed_over_the_same_offsets() {
    let (c, brokers) = cluster();
    c.create_topic("events_r", 2, 1).unwrap();
    c.create_topic("event-counts", 1, 1).unwrap();
    let input = events(40, 0);
    produce(&brokers, "events_r", &input);
    let tmp = tempfile::tempdir().unwrap();
    let p = event_counts_named("event_counts_replayed", &brokers, "events_r", Some(10));
    dp::engine::runtime::inject_failure("event_counts_replayed", "before_commit", 2);
    let err = try_run(&p, tmp.path()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "flow `event_counts_replayed`: injected failure at before_commit of batch 2"
    );
    let logged = std::fs::read_to_string(
        tmp.path()
            .join("storage/checkpoints/event_counts_replayed/offsets/2"),
    )
    .unwrap();
    // More data arrives before the restart: the replay still reads exactly batch 2's range.
    produce(&brokers, "events_r", &events(8, 40));
    let s = run_ok(&p, tmp.path());
    assert_eq!(s.flows[0].replayed, 1);
    let again = std::fs::read_to_string(
        tmp.path()
            .join("storage/checkpoints/event_counts_replayed/offsets/2"),
    )
    .unwrap();
    assert_eq!(logged, again);
    let out = consume_all(&brokers, "event-counts");
    let mut all = input.clone();
    all.extend(events(8, 40));
    assert_eq!(latest_per_key(&out), counts(&all));
}

#[test]
fn partitions_and_topics_added_later_are_picked_up() {
    let (c, brokers) = cluster();
    c.create_topic("orders-eu", 1, 1).unwrap();
    produce(&brokers, "orders-eu", &[Out::kv("a", "eu1")]);
    let tmp = tempfile::tempdir().unwrap();
    let p = memory_copy(
        &brokers,
        "pattern_out",
        &[
            ("subscribePattern", "orders-.*"),
            ("startingOffsets", "earliest"),
        ],
    );
    run_ok(&p, tmp.path());
    c.create_topic("orders-us", 2, 1).unwrap();
    c.create_topic("other", 1, 1).unwrap();
    produce(
        &brokers,
        "orders-us",
        &[
            Out {
                partition: Some(1),
                ..Out::kv("b", "us1")
            },
            Out {
                partition: Some(0),
                ..Out::kv("c", "us0")
            },
        ],
    );
    produce(&brokers, "other", &[Out::kv("x", "no")]);
    produce(&brokers, "orders-eu", &[Out::kv("d", "eu2")]);
    run_ok(&p, tmp.path());
    let got: Vec<(String, i32, String)> = records(&rows("pattern_out"))
        .into_iter()
        .map(|r| (r.0, r.1, r.4))
        .collect();
    assert_eq!(
        got,
        vec![
            ("orders-eu".into(), 0, "eu1".into()),
            ("orders-eu".into(), 0, "eu2".into()),
            ("orders-us".into(), 0, "us0".into()),
            ("orders-us".into(), 1, "us1".into()),
        ]
    );
    let last =
        std::fs::read_to_string(tmp.path().join("storage/checkpoints/copy/offsets/1")).unwrap();
    assert_eq!(
        last.lines().last().unwrap(),
        r#"{"orders-eu":{"0":2},"orders-us":{"0":1,"1":1}}"#
    );
}

#[test]
fn a_partition_shorter_than_the_checkpoint_is_data_loss() {
    let (c, brokers) = cluster();
    c.create_topic("lost", 1, 1).unwrap();
    produce(&brokers, "lost", &[Out::kv("a", "1"), Out::kv("b", "2")]);
    // The checkpoint claims offsets up to 5, as if the topic had been recreated since.
    let run_with = |fail: &str| {
        let tmp = tempfile::tempdir().unwrap();
        let p = memory_copy(
            &brokers,
            &format!("lost_{fail}"),
            &[
                ("subscribe", "lost"),
                ("startingOffsets", r#"{"lost": {"0": 5}}"#),
                ("failOnDataLoss", fail),
            ],
        );
        (try_run(&p, tmp.path()), tmp)
    };
    let (err, _tmp) = run_with("true");
    assert_eq!(
        err.unwrap_err().to_string(),
        "flow `copy`: kafka source: partition lost-0's end moved back from offset 5 to 2; messages may have been missed\n  help: data was deleted (retention, a deleted partition or topic) before the query read it; set `.option(\"failOnDataLoss\", \"false\")` to count the loss and go on, or reset the query with `--full-refresh`"
    );
    let (ok, tmp) = run_with("false");
    ok.unwrap();
    // Going on from the partition's end: new messages are read.
    produce(&brokers, "lost", &[Out::kv("c", "3")]);
    let p = memory_copy(
        &brokers,
        "lost_false",
        &[
            ("subscribe", "lost"),
            ("startingOffsets", r#"{"lost": {"0": 5}}"#),
            ("failOnDataLoss", "false"),
        ],
    );
    run_ok(&p, tmp.path());
    let got: Vec<String> = records(&rows("lost_false"))
        .into_iter()
        .map(|r| r.4)
        .collect();
    assert_eq!(got, ["3"]);
}

#[test]
fn a_delivery_failure_fails_the_batch_and_the_retry_replays_it() {
    let (c, brokers) = cluster();
    c.create_topic("events_d", 1, 1).unwrap();
    c.create_topic("event-counts", 1, 1).unwrap();
    let input = events(20, 0);
    produce(&brokers, "events_d", &input);
    let tmp = tempfile::tempdir().unwrap();
    let p = event_counts(&brokers, "events_d", None);
    // The broker refuses the next produce requests with a non-retriable error.
    c.request_errors(
        rdkafka::types::RDKafkaApiKey::Produce,
        &[rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED; 20],
    );
    let err = try_run(&p, tmp.path()).unwrap_err().to_string();
    assert!(
        err.starts_with("sink `event_counts_sink` (flow `event_counts_flow`): batch 0: "),
        "{err}"
    );
    assert!(err.contains("messages were not delivered"), "{err}");
    assert!(!tmp
        .path()
        .join("storage/checkpoints/event_counts_flow/commits/0")
        .exists());
    c.clear_request_errors(rdkafka::types::RDKafkaApiKey::Produce);
    let s = run_ok(&p, tmp.path());
    assert_eq!(s.flows[0].replayed, 1);
    let out = consume_all(&brokers, "event-counts");
    assert_eq!(latest_per_key(&out), counts(&input));
}

fn dry_run_errors(p: &dp::Pipeline) -> String {
    let tmp = tempfile::tempdir().unwrap();
    match p.build(&spec(tmp.path())) {
        Ok(_) => String::new(),
        Err(d) => d.to_string(),
    }
}

#[test]
fn the_sink_needs_a_value_of_the_right_type_at_dry_run() {
    let reader = |s: &Session| {
        s.read_stream()
            .format("kafka")
            .option("kafka.bootstrap.servers", "127.0.0.1:1")
            .option("subscribe", "events")
            .load_default()
    };
    let sink = [("kafka.bootstrap.servers", "127.0.0.1:1"), ("topic", "out")];
    let p = dp::Pipeline::new()
        .update_flow("counts", "out", move |s| {
            reader(s)?
                .select_expr(["CAST(key AS STRING) AS event_type"])?
                .group_by([col("event_type")])
                .count()
        })
        .create_sink("out", "kafka", sink);
    let errors = dry_run_errors(&p);
    assert!(errors.contains("flow `counts`"), "{errors}");
    assert!(
        errors.contains(
            "writes to sink `out`: the query has no `value` column (it has `event_type`, `count`)"
        ),
        "{errors}"
    );
    assert!(errors.contains("writes to sink `out`: the query has a column `event_type`, which the Kafka sink does not take (it takes key, value, topic, headers, partition)"), "{errors}");
    let p = dp::Pipeline::new()
        .append_flow("wrong", "out2", move |s| {
            reader(s)?.select_expr(["offset AS value", "key"])
        })
        .create_sink(
            "out2",
            "kafka",
            [("kafka.bootstrap.servers", "127.0.0.1:1")],
        );
    let errors = dry_run_errors(&p);
    assert!(
        errors.contains("writes to sink `out2`: column `value` is BIGINT, but the Kafka sink needs STRING or BINARY"),
        "{errors}"
    );
    assert!(
        errors.contains("help: cast it: `CAST(value AS STRING) AS value`"),
        "{errors}"
    );
    assert!(
        errors.contains("writes to sink `out2`: no topic: the sink has no `topic` option and the query no `topic` column"),
        "{errors}"
    );
    // The right columns pass.
    let p = dp::Pipeline::new()
        .append_flow("fine", "out3", move |s| {
            reader(s)?.select_expr(["key", "value", "'t' AS topic", "headers_none() AS x"])
        })
        .create_sink("out3", "kafka", sink);
    let _ = p;
    let p = dp::Pipeline::new()
        .append_flow("fine", "out3", move |s| {
            reader(s)?.select_expr([
                "key",
                "CAST(value AS STRING) AS value",
                "topic",
                "partition",
            ])
        })
        .create_sink(
            "out3",
            "kafka",
            [("kafka.bootstrap.servers", "127.0.0.1:1")],
        );
    assert_eq!(dry_run_errors(&p), "");
}

#[test]
fn sink_writes_keys_values_topics_partitions_and_headers() {
    let (c, brokers) = cluster();
    c.create_topic("src_h", 1, 1).unwrap();
    c.create_topic("dst_a", 2, 1).unwrap();
    c.create_topic("dst_b", 1, 1).unwrap();
    produce(
        &brokers,
        "src_h",
        &[
            Out {
                headers: vec![("h".into(), Some("1".into()))],
                ..Out::kv("a", "to-a")
            },
            Out::kv("b", "to-b"),
        ],
    );
    let tmp = tempfile::tempdir().unwrap();
    let b = brokers.clone();
    let p = dp::Pipeline::new()
        .append_flow("route", "routed", move |s| {
            s.read_stream()
                .format("kafka")
                .option("kafka.bootstrap.servers", &b)
                .option("subscribe", "src_h")
                .option("startingOffsets", "earliest")
                .option("includeHeaders", "true")
                .load_default()?
                .select_expr([
                    "key",
                    "upper(CAST(value AS STRING)) AS value",
                    "concat('dst_', CAST(key AS STRING)) AS topic",
                    "CAST(1 - offset AS INT) AS partition",
                    "headers",
                ])
        })
        .create_sink(
            "routed",
            "kafka",
            [("kafka.bootstrap.servers", brokers.clone())],
        );
    run_ok(&p, tmp.path());
    assert_eq!(
        consume_all(&brokers, "dst_a"),
        vec![In {
            partition: 1,
            offset: 0,
            key: Some("a".into()),
            value: Some("TO-A".into()),
            headers: vec![("h".into(), Some("1".into()))],
        }]
    );
    assert_eq!(
        consume_all(&brokers, "dst_b"),
        vec![In {
            partition: 0,
            offset: 0,
            key: Some("b".into()),
            value: Some("TO-B".into()),
            headers: vec![],
        }]
    );
}

#[test]
fn bad_options_are_refused_with_the_fix() {
    let (c, brokers) = cluster();
    c.create_topic("opt", 1, 1).unwrap();
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("subscribe", "opt"), ("startingOffsets", "first")],
            "flow `copy`: kafka source: option `startingOffsets` must be earliest, latest or JSON, got `first`\n  help: use `earliest`, `latest` or JSON such as {\"topicA\": {\"0\": 23, \"1\": -2}} (-2 earliest, -1 latest)",
        ),
        (
            &[("assign", "[0]")],
            "flow `copy`: kafka source: option `assign` must map topics to lists of partition numbers, got `[0]`\n  help: .option(\"assign\", r#\"{\"topicA\": [0, 1], \"topicB\": [0]}\"#)",
        ),
        (
            &[("subscribe", "opt"), ("maxOffsetsPerTrigger", "0")],
            "flow `copy`: option `maxOffsetsPerTrigger` must be a positive whole number, got `0`\n  help: .option(\"maxOffsetsPerTrigger\", \"10\")",
        ),
        (
            &[("subscribe", "opt"), ("kafka.enable.auto.commit", "true")],
            "flow `copy`: kafka source: option `kafka.enable.auto.commit` is not supported\n  help: remove it: offsets are kept in the flow's checkpoint, never committed to Kafka",
        ),
        (
            &[("subscribePattern", "(")],
            "flow `copy`: kafka source: option `subscribePattern` is not a valid regular expression",
        ),
    ];
    for (opts, want) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let p = memory_copy(&brokers, "opt_out", opts);
        let err = try_run(&p, tmp.path()).unwrap_err().to_string();
        assert!(err.starts_with(want), "{err}\n  wanted: {want}");
    }
}

#[test]
fn messages_deleted_by_retention_fail_the_batch_or_are_counted() {
    let (c, brokers) = cluster();
    c.create_topic("ret", 1, 1).unwrap();
    produce(
        &brokers,
        "ret",
        &[Out::kv("a", "small-0"), Out::kv("b", "small-1")],
    );
    // The mock broker keeps 5 MB per partition: six 1 MB messages push the
    // first ones out of the log, as retention would.
    let big = "x".repeat(900_000);
    for _ in 0..7 {
        produce(&brokers, "ret", &[Out::kv("big", &big)]);
    }
    let reader: rdkafka::consumer::BaseConsumer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .create()
        .unwrap();
    let (low, high) = rdkafka::consumer::Consumer::fetch_watermarks(
        &reader,
        "ret",
        0,
        std::time::Duration::from_secs(5),
    )
    .unwrap();
    assert!(low >= 2 && high == 9, "{low}..{high}");
    let copy = |fail: &str, table: &str| {
        dp::Pipeline::new()
            .append_flow("copy", "mem", {
                let b = brokers.clone();
                let fail = fail.to_string();
                move |s| {
                    s.read_stream()
                        .format("kafka")
                        .option("kafka.bootstrap.servers", &b)
                        .option("subscribe", "ret")
                        .option("startingOffsets", r#"{"ret": {"0": 0}}"#)
                        .option("failOnDataLoss", &fail)
                        .load_default()?
                        .select_expr(["offset"])
                }
            })
            .create_sink("mem", "memory", [("queryName", table)])
    };
    let tmp = tempfile::tempdir().unwrap();
    let err = try_run(&copy("true", "ret_fail"), tmp.path())
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!("flow `copy`: kafka source: messages 0..{low} of partition ret-0 were deleted before they were read\n  help: data was deleted (retention, a deleted partition or topic) before the query read it; set `.option(\"failOnDataLoss\", \"false\")` to count the loss and go on, or reset the query with `--full-refresh`")
    );
    let tmp = tempfile::tempdir().unwrap();
    run_ok(&copy("false", "ret_count"), tmp.path());
    let offsets: Vec<i64> = rows("ret_count")
        .iter()
        .flat_map(|b| {
            let a = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            a.values().to_vec()
        })
        .collect();
    assert_eq!(offsets, (low..high).collect::<Vec<_>>());
    let lost: Vec<u64> =
        pipelines::engine::event_log::read_batch_progress(tmp.path().join("storage"))
            .unwrap()
            .iter()
            .map(|p| p["sources"][0]["numDataLost"].as_u64().unwrap_or(0))
            .filter(|n| *n > 0)
            .collect();
    assert_eq!(lost, [low as u64]);
}

#[test]
fn complete_mode_sends_the_whole_result_every_batch() {
    let (c, brokers) = cluster();
    c.create_topic("events_c", 1, 1).unwrap();
    c.create_topic("totals", 1, 1).unwrap();
    produce(&brokers, "events_c", &events(4, 0));
    let tmp = tempfile::tempdir().unwrap();
    let b = brokers.clone();
    let mut flow = dp::FlowDef::append(
        "totals_flow",
        "totals_sink",
        dp::Query::new(move |s| {
            s.read_stream()
                .format("kafka")
                .option("kafka.bootstrap.servers", &b)
                .option("subscribe", "events_c")
                .option("startingOffsets", "earliest")
                .load_default()?
                .select_expr(["CAST(key AS STRING) AS event_type"])?
                .group_by([col("event_type")])
                .count()?
                .select_expr(["event_type AS key", "CAST(count AS STRING) AS value"])
        }),
    );
    flow.conf
        .insert("pipelines.outputMode".into(), "complete".into());
    let p = dp::Pipeline::new().flow(flow).create_sink(
        "totals_sink",
        "kafka",
        [
            ("kafka.bootstrap.servers", brokers.clone()),
            ("topic", "totals".to_string()),
        ],
    );
    run_ok(&p, tmp.path());
    produce(&brokers, "events_c", &[Out::kv("buy", "z")]);
    run_ok(&p, tmp.path());
    let got: Vec<(String, String)> = consume_all(&brokers, "totals")
        .into_iter()
        .map(|m| (m.key.unwrap(), m.value.unwrap()))
        .collect::<Vec<_>>();
    let mut first: Vec<(String, String)> = got[..3].to_vec();
    first.sort();
    let mut second: Vec<(String, String)> = got[3..].to_vec();
    second.sort();
    let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(first, pairs(&[("buy", "1"), ("click", "2"), ("view", "1")]));
    assert_eq!(
        second,
        pairs(&[("buy", "2"), ("click", "2"), ("view", "1")])
    );
}

#[test]
fn secret_options_are_not_stored_and_rotating_them_is_not_a_query_change() {
    let (c, brokers) = cluster();
    c.create_topic("sec", 1, 1).unwrap();
    produce(&brokers, "sec", &[Out::kv("a", "1")]);
    let tmp = tempfile::tempdir().unwrap();
    let with_password = |password: &str| {
        memory_copy(
            &brokers,
            "sec_out",
            &[
                ("subscribe", "sec"),
                ("startingOffsets", "earliest"),
                ("kafka.sasl.password", password),
                ("kafka.client.id", "visible-client-id"),
            ],
        )
    };
    run_ok(&with_password("hunter2"), tmp.path());
    let shape =
        std::fs::read_to_string(tmp.path().join("storage/checkpoints/copy/shape.json")).unwrap();
    assert!(!shape.contains("hunter2"), "{shape}");
    assert!(
        shape.contains("\"kafka.sasl.password\": \"<secret: not stored>\""),
        "{shape}"
    );
    assert!(shape.contains("visible-client-id"), "{shape}");
    // A new password: the same query, run on from its checkpoint.
    produce(&brokers, "sec", &[Out::kv("b", "2")]);
    let second = run_ok(&with_password("hunter3"), tmp.path());
    assert_eq!(second.flows[0].input_rows, 1);
    let shape =
        std::fs::read_to_string(tmp.path().join("storage/checkpoints/copy/shape.json")).unwrap();
    assert!(!shape.contains("hunter"), "{shape}");
    // Another option's change is still a query change, and the message
    // names no secret.
    let changed = memory_copy(
        &brokers,
        "sec_out",
        &[
            ("subscribe", "sec"),
            ("startingOffsets", "earliest"),
            ("kafka.sasl.password", "hunter4"),
            ("kafka.client.id", "other-client-id"),
        ],
    );
    let err = try_run(&changed, tmp.path()).unwrap_err().to_string();
    assert!(
        err.contains(
            "option `kafka.client.id` of source 1 changed: visible-client-id → other-client-id"
        ),
        "{err}"
    );
    assert!(!err.contains("hunter"), "{err}");
}
