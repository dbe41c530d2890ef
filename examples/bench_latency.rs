//! End-to-end latency of the real-time trigger: from the moment an event
//! exists to the moment its result reaches the sink.
//!
//! ```text
//! cargo run --release --example bench_latency                 # in process 10 k and 100 k events/s, through the broker 1 k and 10 k, 10 s each
//! cargo run --release --example bench_latency -- --quick      # 1 k events/s for 2 s, mock cluster (used by the test script)
//! cargo run --release --example bench_latency -- --rates 10000,50000 --seconds 20
//! cargo run --release --example bench_latency -- --broker-rates 1000,10000  # other rates through the broker
//! cargo run --release --example bench_latency -- --linger-ms 1   # the events' producer batches for 1 ms
//! cargo run --release --example bench_latency -- --brokers 127.0.0.1:9092   # an already running broker
//! ```
//!
//! Two pipelines, each an update or append flow with
//! `trigger: { real_time: { checkpoint_interval: 5 seconds } }`:
//!
//! - **in-process**: memory stream → `filter(kind != 'drop')` → memory sink.
//!   A feeder thread appends the events due every millisecond (10 per push
//!   at 10 k/s), each stamped with the time it was appended; the latency of
//!   an event is the time the sink wrote it minus that stamp.
//! - **broker**: Kafka topic → count per key (100 keys) → Kafka topic,
//!   through a broker on loopback: a tansu process (`PIPELINES_TANSU`, as
//!   `scripts/test` installs it; not with `--quick`) or `--brokers`, else
//!   librdkafka's mock cluster in this process. A producer sends the events due every
//!   millisecond (linger 0) and records when it sent each; a consumer of the
//!   output topic reads `(key, count)`: the count-th event of a key is
//!   delivered when the first count ≥ its number arrives.
//! - **the broker alone**, after each broker run: the same producer and a
//!   consumer configured like the measuring one, one trip through the
//!   broker and no pipeline. The pipeline's events make two trips, so this
//!   is the floor its figures stand on.
//!
//! The first second of every run is warm-up and is not counted. Reported:
//! p50 / p99 / p99.9 / max latency, and the process's CPU time (user +
//! system, all threads, the feeder and the measuring consumer included)
//! over the measured seconds.

use pipelines_test_support::kafka as kafka_support;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{AsArray, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use pipelines as dp;
use pipelines::engine::runtime::{run, RunOptions, RunSummary};
use pipelines::engine::sources::MemoryStream;
use pipelines::prelude::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

/// Creates a topic of one partition.
type CreateTopic<'a> = Box<dyn Fn(&str) + 'a>;

const WARM_UP: Duration = Duration::from_secs(1);
const KEYS: u64 = 100;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// User + system CPU seconds of this process so far (`/proc/self/stat`).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 here.
    (ticks(11) + ticks(12)) / 100.0
}

/// What the Kafka producer of the events sends: `rate` events per second
/// for `seconds`, batched for up to `linger_ms` (its `linger.ms`).
#[derive(Clone, Copy)]
struct Feed {
    rate: u64,
    seconds: u64,
    linger_ms: u64,
}

/// Latency figures of one run.
struct Figures {
    events: usize,
    p50: Duration,
    p99: Duration,
    p999: Duration,
    max: Duration,
    cpu: f64,
}

fn figures(mut latencies: Vec<Duration>, cpu: f64) -> Figures {
    latencies.sort();
    let at = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    Figures {
        events: latencies.len(),
        p50: at(0.5),
        p99: at(0.99),
        p999: at(0.999),
        max: latencies.last().copied().unwrap_or_default(),
        cpu,
    }
}

fn print(name: &str, rate: u64, f: &Figures) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name:<28} {rate:>7} ev/s  {:>8} events  p50 {:>6.3} ms  p99 {:>6.3} ms  p99.9 {:>6.3} ms  max {:>7.3} ms  CPU {:>4.0} %",
        f.events,
        ms(f.p50),
        ms(f.p99),
        ms(f.p999),
        ms(f.max),
        f.cpu * 100.0
    );
}

/// A spec giving `flow` the real-time trigger.
fn real_time_spec(dir: &Path, flow: &str) -> dp::spec::PipelineSpec {
    let text = format!(
        "name: latency\nstorage: ./storage\nflows:\n  {flow}:\n    trigger: {{ real_time: {{ checkpoint_interval: 5 seconds }} }}\n"
    );
    dp::spec::parse_str(&text, &dir.join("pipeline.yml")).expect("spec")
}

/// Starts a continuous run on a thread; returns its stop flag and handle.
fn start(
    p: &dp::Pipeline,
    dir: &Path,
    flow: &str,
) -> (
    Arc<AtomicBool>,
    std::thread::JoinHandle<dp::Result<RunSummary>>,
) {
    let graph = p
        .build(&real_time_spec(dir, flow))
        .unwrap_or_else(|d| panic!("{d}"));
    let mut opts = RunOptions::new(dir, dir.join("storage"));
    opts.continuous = true;
    let stop = opts.stop.clone();
    (stop, std::thread::spawn(move || run(&graph, &opts)))
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("kind", DataType::Utf8, false),
        Field::new("created_us", DataType::Int64, false),
    ]))
}

/// memory → filter → memory at `rate` events/s for `seconds`.
fn in_process(rate: u64, seconds: u64) -> Figures {
    let tmp = tempfile::tempdir().expect("temp dir");
    let stream_name = format!("latency_in_{rate}");
    let table_name = format!("latency_out_{rate}");
    let stream = MemoryStream::new(&stream_name, schema());
    let input = stream_name.clone();
    let p = dp::Pipeline::new()
        .append_flow("latency_filter", "latency_sink", move |s| {
            s.read_stream()
                .format("memory")
                .schema("kind STRING, created_us BIGINT")
                .load(&input)?
                .filter("kind != 'drop'")
        })
        .create_sink(
            "latency_sink",
            "memory",
            [("queryName", table_name.as_str())],
        );
    let (stop, handle) = start(&p, tmp.path(), "latency_filter");
    let t0 = Instant::now();
    let total = rate * seconds;
    let mut sent = 0u64;
    let mut tick = 0u64;
    let mut measure_from: Option<(Instant, f64)> = None;
    while sent < total {
        tick += 1;
        let due = Instant::now();
        let target = (rate * tick / 1000).min(total);
        let n = (target - sent) as usize;
        if n > 0 {
            let created = due.duration_since(t0).as_micros() as i64;
            let kinds: Vec<&str> = (sent..sent + n as u64)
                .map(|i| if i % 10 == 9 { "drop" } else { "keep" })
                .collect();
            let batch = RecordBatch::try_new(
                schema(),
                vec![
                    Arc::new(StringArray::from(kinds)),
                    Arc::new(Int64Array::from(vec![created; n])),
                ],
            )
            .expect("batch");
            stream.push(batch).expect("push");
            sent += n as u64;
        }
        if measure_from.is_none() && t0.elapsed() >= WARM_UP {
            measure_from = Some((Instant::now(), cpu_seconds()));
        }
        let next = t0 + Duration::from_millis(tick);
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    let expected = (total - total / 10) as usize;
    let table = dp::engine::sinks::memory_table(&format!("latency_out_{rate}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    while table.as_ref().map(|t| t.num_rows()).unwrap_or(0) < expected {
        assert!(Instant::now() < deadline, "not every event arrived");
        std::thread::sleep(Duration::from_millis(1));
    }
    let (measured_at, cpu_at) = measure_from.unwrap_or((t0, 0.0));
    let cpu = (cpu_seconds() - cpu_at) / measured_at.elapsed().as_secs_f64();
    stop.store(true, Ordering::SeqCst);
    handle.join().expect("run thread").expect("run");
    let warm_us = WARM_UP.as_micros() as i64;
    let mut latencies = Vec::with_capacity(expected);
    for (_, written_at, batches) in table.expect("sink table").writes() {
        for b in &batches {
            let created = b.column(1).as_primitive::<Int64Type>();
            for c in created.values() {
                if *c >= warm_us {
                    let at = t0 + Duration::from_micros(*c as u64);
                    latencies.push(written_at.saturating_duration_since(at));
                }
            }
        }
    }
    figures(latencies, cpu)
}

/// Kafka → count per key → Kafka at `rate` events/s for `seconds`.
fn through_broker(brokers: &str, create_topic: &dyn Fn(&str), feed: Feed) -> Figures {
    let rate = feed.rate;
    let tmp = tempfile::tempdir().expect("temp dir");
    let input = format!("latency-events-{rate}");
    let output = format!("latency-counts-{rate}");
    create_topic(&input);
    create_topic(&output);
    let b = brokers.to_string();
    let topic = input.clone();
    let p = dp::Pipeline::new()
        .update_flow("latency_counts", "latency_counts_sink", move |s| {
            s.read_stream()
                .format("kafka")
                .option("kafka.bootstrap.servers", &b)
                .option("subscribe", &topic)
                .option("startingOffsets", "earliest")
                .load_default()?
                .select_expr(["CAST(key AS STRING) AS k"])?
                .group_by([col("k")])
                .count()?
                .select_expr(["k AS key", "CAST(count AS STRING) AS value"])
        })
        .create_sink(
            "latency_counts_sink",
            "kafka",
            [
                ("kafka.bootstrap.servers", brokers.to_string()),
                ("topic", output.clone()),
            ],
        );
    let (stop, handle) = start(&p, tmp.path(), "latency_counts");

    // The measuring consumer: (key, count) → when it arrived.
    let consumer = measuring_consumer(brokers, &format!("latency-{rate}"), &output);
    let done = Arc::new(AtomicBool::new(false));
    let counted = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (done_reading, counted_by_reader) = (done.clone(), counted.clone());
    let reader = std::thread::spawn(move || {
        let mut arrivals: Vec<(u64, u64, Instant)> = Vec::new();
        let mut seen: HashMap<u64, u64> = HashMap::new();
        while !done_reading.load(Ordering::SeqCst) {
            if let Some(Ok(m)) = consumer.poll(Duration::from_millis(50)) {
                let now = Instant::now();
                let key = m
                    .key()
                    .and_then(|k| std::str::from_utf8(k).ok())
                    .and_then(|k| k.trim_start_matches('k').parse::<u64>().ok());
                let count = m
                    .payload()
                    .and_then(|v| std::str::from_utf8(v).ok())
                    .and_then(|v| v.parse::<u64>().ok());
                if let (Some(k), Some(c)) = (key, count) {
                    let prev = seen.entry(k).or_insert(0);
                    if c > *prev {
                        counted_by_reader.fetch_add(c - *prev, Ordering::SeqCst);
                        arrivals.push((k, c, now));
                        *prev = c;
                    }
                }
            }
        }
        arrivals
    });

    let (sent_at, measured_at, cpu_at) =
        produce_paced(brokers, &input, feed, |n| Some(format!("k{}", n % KEYS)));
    let total = sent_at.len() as u64;
    // Until every event is counted (or 30 s pass).
    wait_for(&counted, total);
    let cpu = (cpu_seconds() - cpu_at) / measured_at.elapsed().as_secs_f64();
    done.store(true, Ordering::SeqCst);
    let arrivals = reader.join().expect("reader");
    stop.store(true, Ordering::SeqCst);
    handle.join().expect("run thread").expect("run");
    let missing = total.saturating_sub(counted.load(Ordering::SeqCst));
    if missing > 0 {
        eprintln!("warning: {missing} events had no count by the end of the run");
    }

    let mut latencies = Vec::with_capacity(total as usize);
    let mut delivered: Vec<u64> = vec![0; KEYS as usize];
    for (k, c, at) in arrivals {
        if k >= KEYS {
            continue;
        }
        // The n-th event of key k (from 0) is event n * KEYS + k.
        for n in delivered[k as usize]..c {
            let Some(&sent) = sent_at.get((n * KEYS + k) as usize) else {
                break;
            };
            if sent >= measured_at {
                latencies.push(at.saturating_duration_since(sent));
            }
        }
        delivered[k as usize] = delivered[k as usize].max(c);
    }
    figures(latencies, cpu)
}

/// A consumer of partition 0 of `topic` from its start, fetching with a
/// 1 ms wait: what measures a delivery.
fn measuring_consumer(brokers: &str, group: &str, topic: &str) -> BaseConsumer {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", "1")
        .create()
        .expect("consumer");
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, rdkafka::Offset::Beginning)
        .expect("partition");
    consumer.assign(&tpl).expect("assign");
    consumer
}

/// Waits until `counter` reaches `total`, at most 30 s.
fn wait_for(counter: &std::sync::atomic::AtomicU64, total: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while counter.load(Ordering::SeqCst) < total && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Sends events 0.. to `topic` at `rate` per second for `seconds` (those
/// due every millisecond, with the feed's linger; the value is the event's number, the
/// key `key(n)`), then flushes. Returns when each event was sent, when the
/// measured seconds began and the process's CPU seconds then.
fn produce_paced(
    brokers: &str,
    topic: &str,
    feed: Feed,
    key: impl Fn(u64) -> Option<String>,
) -> (Vec<Instant>, Instant, f64) {
    let Feed {
        rate,
        seconds,
        linger_ms,
    } = feed;
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", linger_ms.to_string())
        .create()
        .expect("producer");
    let t0 = Instant::now();
    let total = rate * seconds;
    let mut sent_at = Vec::with_capacity(total as usize);
    let mut sent = 0u64;
    let mut tick = 0u64;
    let mut measure_from: Option<(Instant, f64)> = None;
    while sent < total {
        tick += 1;
        let target = (rate * tick / 1000).min(total);
        while sent < target {
            let key_text = key(sent);
            let value = sent.to_string();
            let mut record = BaseRecord::<String, String>::to(topic).payload(&value);
            if let Some(k) = &key_text {
                record = record.key(k);
            }
            loop {
                match producer.send(record) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(_), r)) => {
                        record = r;
                        producer.poll(Duration::from_millis(1));
                    }
                    Err((e, _)) => panic!("produce: {e}"),
                }
            }
            sent_at.push(Instant::now());
            sent += 1;
        }
        producer.poll(Duration::ZERO);
        if measure_from.is_none() && t0.elapsed() >= WARM_UP {
            measure_from = Some((Instant::now(), cpu_seconds()));
        }
        let next = t0 + Duration::from_millis(tick);
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
    let (measured_at, cpu_at) = measure_from.unwrap_or((t0, 0.0));
    (sent_at, measured_at, cpu_at)
}

/// The broker alone, as a floor for the pipeline's figures: events sent
/// at `rate` per second for `seconds` exactly as `through_broker` sends
/// them, received by a consumer configured like its measuring consumer
/// (fetch wait 1 ms). One trip through the broker; the pipeline makes two.
fn broker_floor(brokers: &str, create_topic: &dyn Fn(&str), feed: Feed) -> Figures {
    let (rate, seconds) = (feed.rate, feed.seconds);
    let topic = format!("latency-floor-{rate}");
    create_topic(&topic);
    let consumer = measuring_consumer(brokers, &format!("latency-floor-{rate}"), &topic);
    let total = rate * seconds;
    let done = Arc::new(AtomicBool::new(false));
    let received = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (done_reading, received_by_reader) = (done.clone(), received.clone());
    let reader = std::thread::spawn(move || {
        let mut arrived: Vec<Option<Instant>> = vec![None; total as usize];
        while !done_reading.load(Ordering::SeqCst) {
            if let Some(Ok(m)) = consumer.poll(Duration::from_millis(50)) {
                let now = Instant::now();
                let n = m
                    .payload()
                    .and_then(|v| std::str::from_utf8(v).ok())
                    .and_then(|v| v.parse::<usize>().ok());
                if let Some(slot) = n.and_then(|n| arrived.get_mut(n)) {
                    if slot.is_none() {
                        *slot = Some(now);
                        received_by_reader.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        }
        arrived
    });
    let (sent_at, measured_at, cpu_at) = produce_paced(brokers, &topic, feed, |_| None);
    wait_for(&received, total);
    let cpu = (cpu_seconds() - cpu_at) / measured_at.elapsed().as_secs_f64();
    done.store(true, Ordering::SeqCst);
    let arrived = reader.join().expect("reader");
    let missing = arrived.iter().filter(|a| a.is_none()).count();
    if missing > 0 {
        eprintln!("warning: {missing} events were not received by the end of the run");
    }
    let latencies = sent_at
        .iter()
        .zip(&arrived)
        .filter(|(sent, _)| **sent >= measured_at)
        .filter_map(|(sent, at)| at.map(|at| at.saturating_duration_since(*sent)))
        .collect();
    figures(latencies, cpu)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let list = |name: &str| -> Option<Vec<u64>> {
        arg(&args, name).map(|l| l.split(',').filter_map(|r| r.trim().parse().ok()).collect())
    };
    let rates: Vec<u64> = match list("--rates") {
        Some(rates) => rates,
        None if quick => vec![1_000],
        None => vec![10_000, 100_000],
    };
    // `--broker-rates`: other rates for the pipeline through the broker. By
    // default 1 k and 10 k: the mock cluster falls behind from a few
    // thousand record batches per second, and deletes unread messages at
    // 100 k events/s.
    let broker_rates = match list("--broker-rates") {
        Some(rates) => rates,
        None if quick || arg(&args, "--rates").is_some() => rates.clone(),
        None => vec![1_000, 10_000],
    };
    let seconds: u64 = arg(&args, "--seconds")
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick { 2 } else { 10 });
    println!(
        "real-time trigger, end-to-end latency ({} s per run, the first {} s not counted)",
        seconds,
        WARM_UP.as_secs()
    );
    for &rate in &rates {
        let f = in_process(rate, seconds);
        print("memory → filter → memory", rate, &f);
    }
    // The broker: --brokers, else a tansu process, else the mock cluster.
    let mock;
    let tansu;
    let (brokers, label, create): (String, &str, CreateTopic<'_>) =
        if let Some(b) = arg(&args, "--brokers") {
            (b, "kafka → count → kafka", Box::new(|_: &str| {}))
        } else if let Some(bin) = kafka_support::tansu_binary().filter(|_| !quick) {
            tansu = kafka_support::Tansu::start(bin);
            let t = &tansu;
            (
                tansu.brokers.clone(),
                "kafka → count → kafka (tansu)",
                Box::new(move |name: &str| t.create_topic(name, 1)),
            )
        } else {
            mock = rdkafka::mocking::MockCluster::new(1).expect("mock cluster");
            let m = &mock;
            (
                mock.bootstrap_servers(),
                "kafka → count → kafka (mock)",
                Box::new(move |name: &str| m.create_topic(name, 1, 1).expect("topic")),
            )
        };
    // `--linger-ms N`: the events' producer batches for up to N ms (0: each
    // event is sent at once, in its own request).
    let linger_ms: u64 = arg(&args, "--linger-ms")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    if linger_ms > 0 {
        println!("(the events' producer: linger.ms = {linger_ms}, counted in the latency)");
    }
    for &rate in &broker_rates {
        let feed = Feed {
            rate,
            seconds,
            linger_ms,
        };
        let f = through_broker(&brokers, create.as_ref(), feed);
        print(label, rate, &f);
        let floor = broker_floor(&brokers, create.as_ref(), feed);
        print("  the broker alone, one hop", rate, &floor);
    }
}
