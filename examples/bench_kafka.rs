//! Kafka → windowed count → Kafka: messages per second through a broker.
//!
//! ```text
//! cargo run --release --example bench_kafka                  # 200 k messages, 4 partitions, in-process broker, 3 runs, medians
//! cargo run --release --example bench_kafka -- --quick       # 20 k messages, 1 run (used by the test script)
//! cargo run --release --example bench_kafka -- --brokers 127.0.0.1:9092   # a broker process (e.g. tansu)
//! cargo run --release --example bench_kafka -- --messages 200000 --runs 5
//! ```
//!
//! The input: the benchmark events (`examples/support/bench_data.rs`) as
//! ~90-byte JSON values keyed by service, with the event time as the
//! Kafka timestamp, produced to a topic of 4 partitions (the produce rate
//! is reported too). The flow, an update flow into a Kafka sink:
//! `with_watermark(timestamp, 10 minutes).group_by(window(timestamp,
//! 1 minute), service).count()`, sent as key `service@window start`,
//! value the count. Each run starts from a fresh checkpoint and reads the
//! topic from the earliest offset with `run` (available-now), in batches of
//! at most `maxOffsetsPerTrigger` (default 250 000) messages; its time
//! includes reading from the broker, aggregating, producing the results,
//! waiting for every acknowledgement and the checkpoint commits.
//!
//! Without `--brokers` the broker is librdkafka's mock cluster, in this
//! process (a real Kafka-protocol broker on a loopback port).

use pipelines_test_support::bench_data;

use std::time::{Duration, Instant};

use pipelines as dp;
use pipelines::engine::runtime::{run, RunOptions};
use pipelines::prelude::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

use bench_data::median;

fn arg<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

/// Produces `n` events to `topic`; returns the seconds it took (all acknowledged).
fn produce_events(brokers: &str, topic: &str, n: u64) -> Result<f64> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "20")
        .set("batch.size", "1000000")
        .set("compression.type", "lz4")
        .create()
        .map_err(|e| dp::Error::runtime(format!("producer: {e}")))?;
    let t = Instant::now();
    for i in 0..n {
        let (ts, user, service, level, value) = bench_data::event(i);
        let json = format!(
            "{{\"ts\":\"{}\",\"user_id\":\"{user}\",\"service\":\"{service}\",\"level\":\"{level}\",\"value\":{value}}}",
            bench_data::iso(ts)
        );
        let mut record = BaseRecord::to(topic)
            .key(service)
            .payload(json.as_str())
            .timestamp(ts);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(_), r)) => {
                    record = r;
                    producer.poll(Duration::from_millis(5));
                }
                Err((e, _)) => return Err(dp::Error::runtime(format!("produce: {e}"))),
            }
        }
    }
    producer
        .flush(Duration::from_secs(300))
        .map_err(|e| dp::Error::runtime(format!("flush: {e}")))?;
    Ok(t.elapsed().as_secs_f64())
}

/// Messages in `topic` (the sum of its partitions' offsets, from a fresh read).
fn count_messages(brokers: &str, topic: &str) -> Result<i64> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .map_err(|e| dp::Error::runtime(format!("consumer: {e}")))?;
    let md = c
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .map_err(|e| dp::Error::runtime(format!("metadata: {e}")))?;
    let mut n = 0;
    for t in md.topics() {
        for p in t.partitions() {
            let (lo, hi) = c
                .fetch_watermarks(topic, p.id(), Duration::from_secs(10))
                .map_err(|e| dp::Error::runtime(format!("watermarks: {e}")))?;
            n += hi - lo;
        }
    }
    Ok(n)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    // 200 k by default: at 1 M the in-process mock cluster returned fewer
    // messages than it acknowledged (554 346 of 1 M); use `--brokers` for more.
    let messages: u64 = arg(&args, "--messages").unwrap_or(if quick { 20_000 } else { 200_000 });
    let runs: usize = arg(&args, "--runs").unwrap_or(if quick { 1 } else { 3 });
    let per_trigger: u64 = arg(&args, "--max-offsets-per-trigger").unwrap_or(250_000);
    let partitions: i32 = arg(&args, "--partitions").unwrap_or(4);
    let external: Option<String> = arg(&args, "--brokers");
    let mock = match &external {
        Some(_) => None,
        None => Some(
            MockCluster::new(1).map_err(|e| dp::Error::runtime(format!("mock cluster: {e}")))?,
        ),
    };
    let brokers = match (&external, &mock) {
        (Some(b), _) => b.clone(),
        (None, Some(m)) => m.bootstrap_servers(),
        _ => unreachable!(),
    };
    let input = "bench-events";
    if let Some(m) = &mock {
        m.create_topic(input, partitions, 1)
            .map_err(|e| dp::Error::runtime(format!("create topic: {e}")))?;
        for r in 0..runs {
            m.create_topic(&format!("bench-counts-{r}"), 1, 1)
                .map_err(|e| dp::Error::runtime(format!("create topic: {e}")))?;
        }
    }
    let produce_secs = produce_events(&brokers, input, messages)?;
    println!(
        "broker: {}; produced {messages} messages ({partitions} partitions) in {produce_secs:.2} s: {:.0} messages/s",
        if mock.is_some() { "in-process mock cluster" } else { brokers.as_str() },
        messages as f64 / produce_secs
    );

    let root = bench_data::bench_root().join("work-kafka");
    let mut secs = Vec::new();
    let mut last = (0, 0, 0);
    for r in 0..runs {
        let storage = root.join(format!("storage-{r}"));
        let _ = std::fs::remove_dir_all(&storage);
        let b = brokers.clone();
        let out_topic = format!("bench-counts-{r}");
        let p = dp::Pipeline::new()
            .update_flow("windowed_counts", "counts_out", move |s| {
                s.read_stream()
                    .format("kafka")
                    .option("kafka.bootstrap.servers", &b)
                    .option("subscribe", input)
                    .option("startingOffsets", "earliest")
                    .option("maxOffsetsPerTrigger", per_trigger)
                    .load_default()?
                    .select_expr(["timestamp", "CAST(key AS STRING) AS service"])?
                    .with_watermark("timestamp", "10 minutes")?
                    .group_by([
                        tumbling_window(col("timestamp"), "1 minute"),
                        col("service"),
                    ])
                    .count()?
                    .select_expr([
                        "concat(service, '@', CAST(window.start AS STRING)) AS key",
                        "CAST(count AS STRING) AS value",
                    ])
            })
            .create_sink(
                "counts_out",
                "kafka",
                [
                    ("kafka.bootstrap.servers", brokers.clone()),
                    ("topic", out_topic.clone()),
                ],
            );
        let spec = dp::spec::parse_str(
            &format!("name: bench_kafka\nstorage: {}\n", storage.display()),
            &root.join("pipeline.yml"),
        )?;
        let graph = p.build(&spec).map_err(dp::Error::Invalid)?;
        let t = Instant::now();
        let summary = run(&graph, &RunOptions::new(&root, &storage))?;
        let s = t.elapsed().as_secs_f64();
        let f = &summary.flows[0];
        assert_eq!(f.input_rows, messages, "every message is read exactly once");
        let written = count_messages(&brokers, &out_topic)?;
        if mock.is_some() {
            assert_eq!(
                written as u64, f.output_rows,
                "every result is in the output topic"
            );
        }
        secs.push(s);
        last = (f.batches, f.input_rows, f.output_rows);
    }
    let m = median(secs);
    println!(
        "Kafka → windowed count → Kafka         median s   messages/s    batches  results sent"
    );
    println!(
        "{:<38} {m:>8.3}   {:>10.0}  {:>7}  {:>12}",
        format!("{messages} messages, {runs} run(s)"),
        last.1 as f64 / m,
        last.0,
        last.2
    );
    Ok(())
}
