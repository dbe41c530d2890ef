//! The Kafka source (`format("kafka")`), with Spark's options and columns.
//!
//! Like Spark's Kafka source, it assigns partitions itself (no consumer
//! group joins) and keeps its offsets in the flow's checkpoint, never in
//! Kafka: an offset is `{"topic": {"0": 42, "1": 17}}`, per partition the
//! next offset to read, and the rows of `(start, end]` are, per partition,
//! the messages from the start's offset up to (not including) the end's.
//! A replay after a restart reads exactly the same range.
//!
//! Options (case-insensitive):
//! - `kafka.*`: passed to librdkafka without the prefix
//!   ([`crate::engine::kafka_conf`]); `kafka.bootstrap.servers` is required;
//! - one of `subscribe` (comma-separated topics), `subscribePattern` (a
//!   regular expression matched against whole topic names) or `assign`
//!   (JSON `{"topicA": [0, 1]}`); the partitions of subscribed topics are
//!   listed from the cluster's metadata before each batch, so partitions
//!   and (with a pattern) topics added later are picked up, from their
//!   earliest offset;
//! - `startingOffsets`: `latest` (default; `earliest` for batch reads), `earliest`, or JSON
//!   `{"topicA": {"0": 23, "1": -2}}` (-2 earliest, -1 latest); resolved
//!   once, when the query first starts, and kept in the source's checkpoint
//!   directory;
//! - `maxOffsetsPerTrigger`: at most that many messages per batch, split
//!   over partitions in proportion to their backlog;
//! - `failOnDataLoss` (default true): data deleted before it was read
//!   (retention, a deleted partition, a recreated topic) fails the batch;
//!   with `false` the lost messages are counted (`numDataLost` in the
//!   progress) and reading goes on with what is left;
//! - `includeHeaders`: adds the `headers` column;
//! - `kafkaConsumer.pollTimeoutMs` (default 120000): how long a read or a
//!   metadata request may wait for the brokers before failing the batch.
//!
//! Columns: `key BINARY, value BINARY, topic STRING, partition INT,
//! offset BIGINT, timestamp TIMESTAMP, timestampType INT` (0 create time,
//! 1 log-append time) and, with headers, `headers ARRAY<STRUCT<key STRING,
//! value BINARY>>` ([`crate::plan::reader::kafka_schema`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{
    ArrayRef, BinaryBuilder, Int32Builder, Int64Builder, ListBuilder, StringBuilder, StructBuilder,
    TimestampMicrosecondBuilder,
};
use arrow::datatypes::{DataType, Field, Fields, SchemaRef};
use arrow::record_batch::RecordBatch;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message, Timestamp};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset as KafkaOffset, TopicPartitionList};

use super::{write_atomic, Options};
use crate::engine::kafka_conf::{client_config, creation_error, ClientRole};
use crate::engine::source::{Offset, ReadBatch, Source, SourceContext};
use crate::error::{Error, Result};

/// A topic partition.
pub type TopicPartition = (String, i32);

/// Per partition, the next offset to read.
pub type PartitionOffsets = BTreeMap<TopicPartition, i64>;

/// Which partitions the source reads.
#[derive(Clone, Debug)]
pub enum Subscription {
    /// `subscribe`: every partition of these topics.
    Topics(Vec<String>),
    /// `subscribePattern`: every partition of the topics whose whole name matches.
    Pattern(regex::Regex),
    /// `assign`: exactly these partitions.
    Assign(BTreeSet<TopicPartition>),
}

/// Where a query starts reading (`startingOffsets`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartingOffsets {
    /// Each partition's earliest offset.
    Earliest,
    /// Each partition's end (only messages produced after the start).
    Latest,
    /// Per partition: an offset, -2 for earliest, -1 for latest; partitions
    /// not listed start at latest.
    Specific(PartitionOffsets),
}

const EARLIEST: i64 = -2;
const LATEST: i64 = -1;
const ROWS_PER_BATCH: usize = 65_536;

/// The Kafka source (see the module documentation).
pub struct KafkaSource {
    what: String,
    subscription: Subscription,
    starting: StartingOffsets,
    max_offsets_per_trigger: Option<u64>,
    fail_on_data_loss: bool,
    schema: SchemaRef,
    consumer: BaseConsumer,
    timeout: Duration,
    state_dir: PathBuf,
    /// Available-now runs: the end of every partition when the run started.
    cap: Option<PartitionOffsets>,
    /// Messages lost (deleted before they were read) since the last report.
    data_lost: u64,
    /// Messages between the last planned end and the cap (available-now).
    backlog: Option<u64>,
    /// Real-time mode: the consumer stays assigned between reads.
    live: Option<LiveAssignment>,
    /// The consumer's configuration.
    config: ClientConfig,
    /// True once the consumer is configured for real-time reads (or the
    /// options set `kafka.fetch.wait.max.ms` themselves).
    live_config: bool,
}

/// Real-time mode: where the assigned consumer stands.
struct LiveAssignment {
    /// The next offset of every assigned partition (the last end returned).
    positions: PartitionOffsets,
    /// When the partitions were last listed (new ones are picked up every
    /// [`RELIST_EVERY`]).
    listed: Instant,
}

/// Real-time mode lists the subscription's partitions again this often.
const RELIST_EVERY: Duration = Duration::from_secs(5);

impl std::fmt::Debug for KafkaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSource")
            .field("what", &self.what)
            .field("subscription", &self.subscription)
            .finish_non_exhaustive()
    }
}

/// Checks the Kafka source's options as opening the source parses them
/// (subscription, starting offsets, limits), without creating a consumer:
/// what dry-run runs. `${ENV}` references are left as written.
pub(crate) fn check_source_options(options: &Options) -> Result<()> {
    let what = format!("flow `{}`: kafka source", options.reader_name());
    let subscription = parse_subscription(options, &what)?;
    if let Some(v) = options.get("startingOffsets") {
        if let (StartingOffsets::Specific(map), Subscription::Assign(parts)) =
            (parse_starting_offsets(v, &what)?, &subscription)
        {
            if let Some(tp) = map.keys().find(|tp| !parts.contains(tp)) {
                return Err(Error::runtime_with_help(
                    format!(
                        "{what}: `startingOffsets` names {}-{}, which `assign` does not list",
                        tp.0, tp.1
                    ),
                    "give starting offsets only for assigned partitions",
                ));
            }
        }
    }
    if options.get("endingOffsets").is_some() {
        return Err(Error::runtime_with_help(
            format!("{what}: option `endingOffsets` is not supported for streaming reads"),
            "remove it: a streaming query reads until it is stopped (or, with `run`, what is there when it starts)",
        ));
    }
    options.positive("maxOffsetsPerTrigger")?;
    options.bool("failOnDataLoss", true)?;
    options.positive("kafkaConsumer.pollTimeoutMs")?;
    Ok(())
}

impl KafkaSource {
    /// Opens the source: parses and checks the options and creates the
    /// Kafka consumer (no broker is contacted yet). `streaming` is false for
    /// batch reads (`read()`), which start at the earliest offsets by default, as in Spark.
    pub fn open(
        schema: SchemaRef,
        options: Options,
        ctx: SourceContext,
        streaming: bool,
    ) -> Result<KafkaSource> {
        let what = format!("flow `{}`: kafka source", ctx.flow);
        let options = substitute_options(&options, &ctx.flow, &what)?;
        // The checks dry-run makes (subscription, offsets, limits), then the parse.
        check_source_options(&options)?;
        let subscription = parse_subscription(&options, &what)?;
        let starting = match options.get("startingOffsets") {
            None if !streaming => StartingOffsets::Earliest,
            None => StartingOffsets::Latest,
            Some(v) => parse_starting_offsets(v, &what)?,
        };
        let max_offsets_per_trigger = options.positive("maxOffsetsPerTrigger")?;
        let fail_on_data_loss = options.bool("failOnDataLoss", true)?;
        let timeout = Duration::from_millis(
            options
                .positive("kafkaConsumer.pollTimeoutMs")?
                .unwrap_or(120_000),
        );
        for field in schema.fields() {
            if !KAFKA_COLUMNS.contains(&field.name().as_str()) {
                return Err(Error::runtime(format!(
                    "{what}: the schema asks for column `{}`, which Kafka records do not have (columns: {})",
                    field.name(),
                    KAFKA_COLUMNS.join(", ")
                )));
            }
        }
        let group = format!("pipelines-kafka-source-{}", ctx.flow);
        let config = client_config(
            options.entries(),
            ClientRole::Consumer,
            &what,
            &[
                ("group.id", group.as_str()),
                ("enable.auto.commit", "false"),
                ("enable.auto.offset.store", "false"),
                ("enable.partition.eof", "true"),
                ("auto.offset.reset", "error"),
                ("allow.auto.create.topics", "false"),
                ("fetch.wait.max.ms", "10"),
            ],
        )?;
        let consumer = create_consumer(&config, &what)?;
        let user_fetch_wait = options
            .entries()
            .keys()
            .any(|k| k.eq_ignore_ascii_case("kafka.fetch.wait.max.ms"));
        Ok(KafkaSource {
            config,
            live_config: user_fetch_wait,
            what,
            subscription,
            starting,
            max_offsets_per_trigger,
            fail_on_data_loss,
            schema,
            consumer,
            timeout,
            state_dir: ctx.state_dir,
            cap: None,
            data_lost: 0,
            backlog: None,
            live: None,
        })
    }

    /// The partitions read now: listed from the cluster's metadata.
    fn partitions(&self) -> Result<BTreeSet<TopicPartition>> {
        let mut out = BTreeSet::new();
        match &self.subscription {
            Subscription::Assign(parts) => {
                // Only the assigned partitions that exist.
                let topics: BTreeSet<&String> = parts.iter().map(|(t, _)| t).collect();
                for t in topics {
                    for tp in self.topic_partitions(Some(t))? {
                        if parts.contains(&tp) {
                            out.insert(tp);
                        }
                    }
                }
            }
            Subscription::Topics(topics) => {
                for t in topics {
                    out.extend(self.topic_partitions(Some(t))?);
                }
            }
            Subscription::Pattern(re) => {
                for tp in self.topic_partitions(None)? {
                    if !tp.0.starts_with("__") && re.is_match(&tp.0) {
                        out.insert(tp);
                    }
                }
            }
        }
        Ok(out)
    }

    /// The partitions of `topic` (or of every topic); a topic that does not
    /// exist (yet) has none.
    fn topic_partitions(&self, topic: Option<&str>) -> Result<Vec<TopicPartition>> {
        let md = self
            .consumer
            .fetch_metadata(topic, self.timeout)
            .map_err(|e| self.broker_error("could not list the topics' partitions", &e))?;
        let mut out = Vec::new();
        for t in md.topics() {
            if t.error().is_some() {
                continue;
            }
            for p in t.partitions() {
                out.push((t.name().to_string(), p.id()));
            }
        }
        Ok(out)
    }

    /// (earliest, end) of a partition.
    fn watermarks(&self, tp: &TopicPartition) -> Result<(i64, i64)> {
        self.consumer
            .fetch_watermarks(&tp.0, tp.1, self.timeout)
            .map_err(|e| {
                self.broker_error(
                    &format!("could not read the offsets of partition {}-{}", tp.0, tp.1),
                    &e,
                )
            })
    }

    /// (earliest, end) of every partition in `partitions`. The end the
    /// brokers report (ListOffsets) is checked by fetching from it until
    /// the partition's end-of-log: a broker that reports too small an end
    /// (tansu reports the last record batch's first offset + 1) is
    /// corrected, and on Kafka this costs one empty fetch per topic.
    fn log_ends(
        &mut self,
        partitions: &BTreeSet<TopicPartition>,
    ) -> Result<BTreeMap<TopicPartition, (i64, i64)>> {
        self.live = None;
        let mut out = BTreeMap::new();
        for tp in partitions {
            out.insert(tp.clone(), self.watermarks(tp)?);
        }
        // One topic at a time: an end-of-log event names only the partition.
        let topics: BTreeSet<String> = partitions.iter().map(|(t, _)| t.clone()).collect();
        for topic in topics {
            let mut open: BTreeMap<i32, i64> = out
                .iter()
                .filter(|((t, _), _)| *t == topic)
                .map(|((_, p), (_, high))| (*p, *high))
                .collect();
            let mut tpl = TopicPartitionList::new();
            for (p, high) in &open {
                tpl.add_partition_offset(&topic, *p, KafkaOffset::Offset(*high))
                    .map_err(|e| self.broker_error("could not assign partitions", &e))?;
            }
            self.consumer
                .assign(&tpl)
                .map_err(|e| self.broker_error("could not assign partitions", &e))?;
            let started = Instant::now();
            while !open.is_empty() {
                if started.elapsed() > self.timeout {
                    let _ = self.consumer.unassign();
                    return Err(Error::runtime_with_help(
                        format!(
                            "{}: timed out after {} ms finding the end of topic `{topic}`",
                            self.what,
                            self.timeout.as_millis()
                        ),
                        "check that the brokers are reachable, or raise `kafkaConsumer.pollTimeoutMs`",
                    ));
                }
                match self.consumer.poll(Duration::from_millis(100)) {
                    None => {}
                    Some(Ok(m)) => {
                        let tp = (m.topic().to_string(), m.partition());
                        if let Some(e) = out.get_mut(&tp) {
                            e.1 = e.1.max(m.offset() + 1);
                        }
                    }
                    Some(Err(KafkaError::PartitionEOF(p))) => {
                        open.remove(&p);
                    }
                    Some(Err(e)) if is_transient(&e) => {}
                    Some(Err(KafkaError::MessageConsumption(
                        RDKafkaErrorCode::OffsetOutOfRange | RDKafkaErrorCode::AutoOffsetReset,
                    ))) => {
                        // Deleted under us; the end from ListOffsets stands.
                        open.clear();
                    }
                    Some(Err(e)) => {
                        let _ = self.consumer.unassign();
                        return Err(self.broker_error("could not find the end of the log", &e));
                    }
                }
            }
        }
        let _ = self.consumer.unassign();
        Ok(out)
    }

    fn broker_error(&self, doing: &str, e: &KafkaError) -> Error {
        Error::runtime_with_help(
            format!("{}: {doing}: {e}", self.what),
            "check that the brokers in `kafka.bootstrap.servers` are reachable; the batch is retried from the checkpoint on the next run",
        )
    }

    /// The offsets the query starts from, resolved once and kept in the
    /// source's checkpoint directory so a restart resolves `latest` the same way.
    fn initial_offsets(&mut self) -> Result<PartitionOffsets> {
        let file = self.state_dir.join("initial-offsets.json");
        if let Ok(text) = std::fs::read_to_string(&file) {
            let value: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| Error::checkpoint(&file, format!("not valid JSON: {e}")))?;
            return offsets_from_json(&value)
                .map_err(|m| Error::checkpoint(&file, format!("not a Kafka offset: {m}")));
        }
        let mut out = PartitionOffsets::new();
        let partitions = self.partitions()?;
        let ends = self.log_ends(&partitions)?;
        for tp in partitions {
            let wanted = match &self.starting {
                StartingOffsets::Earliest => EARLIEST,
                StartingOffsets::Latest => LATEST,
                StartingOffsets::Specific(map) => *map.get(&tp).unwrap_or(&LATEST),
            };
            let offset = if wanted >= 0 {
                wanted
            } else {
                let (low, high) = ends.get(&tp).copied().unwrap_or((0, 0));
                if wanted == EARLIEST {
                    low
                } else {
                    high
                }
            };
            out.insert(tp, offset);
        }
        if let StartingOffsets::Specific(map) = &self.starting {
            if let Some(tp) = map.keys().find(|tp| !out.contains_key(*tp)) {
                return Err(Error::runtime_with_help(
                    format!(
                        "{}: `startingOffsets` names partition {}-{}, which does not exist",
                        self.what, tp.0, tp.1
                    ),
                    "list only existing partitions, or create the topic with enough partitions first",
                ));
            }
        }
        write_atomic(&file, offsets_to_json(&out).to_string().as_bytes())?;
        Ok(out)
    }

    fn start_offsets(&mut self, start: Option<&Offset>) -> Result<PartitionOffsets> {
        match start {
            None => self.initial_offsets(),
            Some(v) => offsets_from_json(v).map_err(|m| {
                Error::runtime(format!(
                    "{}: the checkpoint's offset `{v}` is not a Kafka offset: {m}",
                    self.what
                ))
            }),
        }
    }

    fn data_loss(&mut self, message: String, lost: u64) -> Result<()> {
        report_data_loss(
            &self.what,
            self.fail_on_data_loss,
            &mut self.data_lost,
            message,
            lost,
        )
    }
}

/// Data deleted before it was read: an error, or (`failOnDataLoss=false`)
/// a warning and `lost` added to `counter`.
fn report_data_loss(
    what: &str,
    fail: bool,
    counter: &mut u64,
    message: String,
    lost: u64,
) -> Result<()> {
    if fail {
        return Err(Error::runtime_with_help(
            format!("{what}: {message}"),
            "data was deleted (retention, a deleted partition or topic) before the query read it; \
             set `.option(\"failOnDataLoss\", \"false\")` to count the loss and go on, or reset the query with `--full-refresh`",
        ));
    }
    tracing::warn!("{what}: {message} (failOnDataLoss=false: going on)");
    *counter += lost;
    Ok(())
}

/// The column names of Kafka records.
pub const KAFKA_COLUMNS: &[&str] = &[
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestampType",
    "headers",
];

/// The options with `${ENV}` references substituted (`kafka.*` ones are
/// substituted when the client configuration is built).
fn substitute_options(options: &Options, flow: &str, what: &str) -> Result<Options> {
    let mut map = BTreeMap::new();
    for (k, v) in options.entries() {
        let v = if k.starts_with(crate::engine::kafka_conf::KAFKA_PREFIX) {
            v.clone()
        } else {
            crate::engine::kafka_conf::substitute_env(v, what, k)?
        };
        map.insert(k.clone(), v);
    }
    Ok(Options::merged(&map, &BTreeMap::new(), flow))
}

fn create_consumer(config: &ClientConfig, what: &str) -> Result<BaseConsumer> {
    config.create().map_err(|e| creation_error(what, e))
}

fn parse_subscription(options: &Options, what: &str) -> Result<Subscription> {
    let given: Vec<&str> = ["subscribe", "subscribePattern", "assign"]
        .into_iter()
        .filter(|k| options.get(k).is_some())
        .collect();
    if given.len() != 1 {
        return Err(Error::runtime_with_help(
            format!(
                "{what}: needs exactly one of the options `subscribe`, `subscribePattern` or `assign`, got {}",
                if given.is_empty() {
                    "none".to_string()
                } else {
                    given.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(" and ")
                }
            ),
            ".option(\"subscribe\", \"events\")",
        ));
    }
    let value = options.get(given[0]).unwrap_or_default();
    match given[0] {
        "subscribe" => {
            let topics: Vec<String> = value
                .split(',')
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .collect();
            if topics.is_empty() {
                return Err(Error::runtime_with_help(
                    format!("{what}: option `subscribe` names no topic"),
                    ".option(\"subscribe\", \"topicA,topicB\")",
                ));
            }
            Ok(Subscription::Topics(topics))
        }
        "subscribePattern" => regex::Regex::new(&format!("^(?:{value})$"))
            .map(Subscription::Pattern)
            .map_err(|e| {
                Error::runtime_with_help(
                    format!(
                        "{what}: option `subscribePattern` is not a valid regular expression: {e}"
                    ),
                    ".option(\"subscribePattern\", \"events-.*\")",
                )
            }),
        _ => {
            let help = ".option(\"assign\", r#\"{\"topicA\": [0, 1], \"topicB\": [0]}\"#)";
            let parsed: serde_json::Value = serde_json::from_str(value).map_err(|e| {
                Error::runtime_with_help(
                    format!("{what}: option `assign` is not valid JSON: {e}"),
                    help,
                )
            })?;
            let mut parts = BTreeSet::new();
            let bad = || {
                Error::runtime_with_help(
                    format!("{what}: option `assign` must map topics to lists of partition numbers, got `{value}`"),
                    help,
                )
            };
            for (topic, list) in parsed.as_object().ok_or_else(bad)? {
                for p in list.as_array().ok_or_else(bad)? {
                    let p = p
                        .as_i64()
                        .and_then(|p| i32::try_from(p).ok())
                        .filter(|p| *p >= 0);
                    parts.insert((topic.clone(), p.ok_or_else(bad)?));
                }
            }
            if parts.is_empty() {
                return Err(bad());
            }
            Ok(Subscription::Assign(parts))
        }
    }
}

/// Parses `startingOffsets`: `earliest`, `latest` or per-partition JSON.
pub fn parse_starting_offsets(value: &str, what: &str) -> Result<StartingOffsets> {
    match value.trim().to_ascii_lowercase().as_str() {
        "earliest" => return Ok(StartingOffsets::Earliest),
        "latest" => return Ok(StartingOffsets::Latest),
        _ => {}
    }
    let help = "use `earliest`, `latest` or JSON such as {\"topicA\": {\"0\": 23, \"1\": -2}} (-2 earliest, -1 latest)";
    let parsed: serde_json::Value = serde_json::from_str(value).map_err(|_| {
        Error::runtime_with_help(
            format!(
                "{what}: option `startingOffsets` must be earliest, latest or JSON, got `{value}`"
            ),
            help,
        )
    })?;
    let map = offsets_from_json(&parsed).map_err(|m| {
        Error::runtime_with_help(format!("{what}: option `startingOffsets`: {m}"), help)
    })?;
    if let Some(((t, p), o)) = map.iter().find(|(_, o)| **o < EARLIEST) {
        return Err(Error::runtime_with_help(
            format!("{what}: option `startingOffsets` gives partition {t}-{p} the offset {o}; offsets are 0 or more, -2 (earliest) or -1 (latest)"),
            help,
        ));
    }
    Ok(StartingOffsets::Specific(map))
}

/// Reads `{"topic": {"0": 42}}`.
pub fn offsets_from_json(
    value: &serde_json::Value,
) -> std::result::Result<PartitionOffsets, String> {
    let mut out = PartitionOffsets::new();
    let topics = value
        .as_object()
        .ok_or_else(|| format!("expected an object of topics, got `{value}`"))?;
    for (topic, parts) in topics {
        let parts = parts.as_object().ok_or_else(|| {
            format!("topic `{topic}`: expected an object of partitions, got `{parts}`")
        })?;
        for (p, o) in parts {
            let p: i32 = p
                .parse()
                .ok()
                .filter(|p| *p >= 0)
                .ok_or_else(|| format!("topic `{topic}`: `{p}` is not a partition number"))?;
            let o = o
                .as_i64()
                .ok_or_else(|| format!("topic `{topic}` partition {p}: `{o}` is not an offset"))?;
            out.insert((topic.clone(), p), o);
        }
    }
    Ok(out)
}

/// Writes `{"topic": {"0": 42}}`.
pub fn offsets_to_json(offsets: &PartitionOffsets) -> serde_json::Value {
    let mut topics = serde_json::Map::new();
    for ((t, p), o) in offsets {
        let entry = topics
            .entry(t.clone())
            .or_insert_with(|| serde_json::Value::Object(Default::default()));
        if let Some(m) = entry.as_object_mut() {
            m.insert(p.to_string(), serde_json::Value::from(*o));
        }
    }
    serde_json::Value::Object(topics)
}

/// The end offsets of the next batch: every partition's `from` moved
/// towards its `until`, at most `limit` messages in all, split over the
/// partitions in proportion to their backlog (Spark's rule: a share below
/// one message is rounded up, others down).
pub fn rate_limit(
    from: &PartitionOffsets,
    until: &PartitionOffsets,
    limit: Option<u64>,
) -> PartitionOffsets {
    let sizes: BTreeMap<&TopicPartition, i64> = until
        .iter()
        .map(|(tp, u)| (tp, (u - from.get(tp).copied().unwrap_or(*u)).max(0)))
        .collect();
    let total: i64 = sizes.values().sum();
    let mut out = PartitionOffsets::new();
    for (tp, u) in until {
        let begin = from.get(tp).copied().unwrap_or(*u);
        let end = match limit {
            Some(limit) if total as u64 > limit && total > 0 => {
                let size = sizes[tp];
                let share = limit as f64 * size as f64 / total as f64;
                let take = if share < 1.0 {
                    share.ceil()
                } else {
                    share.floor()
                } as i64;
                (begin + take).min(*u).max(begin)
            }
            _ => (*u).max(begin),
        };
        out.insert(tp.clone(), end);
    }
    out
}

impl Source for KafkaSource {
    fn describe(&self) -> String {
        match &self.subscription {
            Subscription::Topics(t) => format!("kafka source `{}`", t.join(",")),
            Subscription::Pattern(p) => {
                let s = p.as_str();
                let s = s
                    .strip_prefix("^(?:")
                    .and_then(|s| s.strip_suffix(")$"))
                    .unwrap_or(s);
                format!("kafka source pattern `{s}`")
            }
            Subscription::Assign(parts) => format!(
                "kafka source `{}`",
                parts
                    .iter()
                    .map(|(t, p)| format!("{t}-{p}"))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        }
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn prepare_available_now(&mut self) -> Result<()> {
        let partitions = self.partitions()?;
        let cap = self
            .log_ends(&partitions)?
            .into_iter()
            .map(|(tp, (_, high))| (tp, high))
            .collect();
        self.cap = Some(cap);
        Ok(())
    }

    fn latest_offset(&mut self, start: Option<&Offset>) -> Result<Option<Offset>> {
        let from = self.start_offsets(start)?;
        let partitions = self.partitions()?;
        let mut from_all = PartitionOffsets::new();
        let mut until = PartitionOffsets::new();
        // Partitions that disappeared (a deleted topic or partition).
        let gone: Vec<TopicPartition> = from
            .keys()
            .filter(|tp| !partitions.contains(*tp))
            .cloned()
            .collect();
        if !gone.is_empty() {
            let names = gone
                .iter()
                .map(|(t, p)| format!("{t}-{p}"))
                .collect::<Vec<_>>()
                .join(", ");
            self.data_loss(
                format!("partitions {names} are gone; messages not yet read from them may have been missed"),
                0,
            )?;
        }
        let ends = self.log_ends(&partitions)?;
        for tp in &partitions {
            // A partition the checkpoint does not know was added later: read it from the start.
            let begin = from.get(tp).copied().unwrap_or(0);
            let (low, high) = ends.get(tp).copied().unwrap_or((0, 0));
            let mut end = high;
            if let Some(cap) = &self.cap {
                match cap.get(tp) {
                    Some(c) => end = end.min(*c),
                    None => end = begin, // appeared after the available-now run started
                }
            }
            if begin > high {
                // The partition is shorter than what was read: recreated or truncated.
                self.data_loss(
                    format!(
                        "partition {}-{}'s end moved back from offset {begin} to {high}; messages may have been missed",
                        tp.0, tp.1
                    ),
                    0,
                )?;
                from_all.insert(tp.clone(), high);
                until.insert(tp.clone(), high);
                continue;
            }
            let _ = low;
            from_all.insert(tp.clone(), begin);
            until.insert(tp.clone(), end.max(begin));
        }
        let end = rate_limit(&from_all, &until, self.max_offsets_per_trigger);
        let backlog: i64 = until
            .iter()
            .map(|(tp, u)| u - end.get(tp).copied().unwrap_or(*u))
            .sum();
        self.backlog = self.cap.as_ref().map(|_| backlog.max(0) as u64);
        // Nothing new (a partition added without messages, too): no batch.
        let unchanged = gone.is_empty()
            && end
                .iter()
                .all(|(tp, e)| from.get(tp).copied().unwrap_or(0) == *e);
        if unchanged {
            return Ok(None);
        }
        Ok(Some(offsets_to_json(&end)))
    }

    fn read(&mut self, start: Option<&Offset>, end: &Offset) -> Result<ReadBatch> {
        self.live = None;
        let from = self.start_offsets(start)?;
        let until = offsets_from_json(end).map_err(|m| {
            Error::runtime(format!(
                "{}: the checkpoint's offset `{end}` is not a Kafka offset: {m}",
                self.what
            ))
        })?;
        // Per partition: [next offset wanted, end).
        let mut ranges: BTreeMap<TopicPartition, (i64, i64)> = BTreeMap::new();
        for (tp, u) in &until {
            let f = from.get(tp).copied().unwrap_or(0);
            if f < *u {
                ranges.insert(tp.clone(), (f, *u));
            }
        }
        let mut out = RowBuilder::new(self.schema.clone());
        let mut batches = Vec::new();
        let mut bytes = 0u64;
        if ranges.is_empty() {
            return Ok(ReadBatch::default());
        }
        let mut tpl = TopicPartitionList::new();
        for (tp, (f, _)) in &ranges {
            tpl.add_partition_offset(&tp.0, tp.1, KafkaOffset::Offset(*f))
                .map_err(|e| self.broker_error("could not assign partitions", &e))?;
        }
        self.consumer
            .assign(&tpl)
            .map_err(|e| self.broker_error("could not assign partitions", &e))?;
        let mut last_progress = Instant::now();
        while !ranges.is_empty() {
            if last_progress.elapsed() > self.timeout {
                let left = ranges
                    .iter()
                    .map(|((t, p), (f, u))| format!("{t}-{p} offsets {f}..{u}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let _ = self.consumer.unassign();
                return Err(Error::runtime_with_help(
                    format!(
                        "{}: timed out after {} ms waiting for messages ({left})",
                        self.what,
                        self.timeout.as_millis()
                    ),
                    "check that the brokers are reachable, or raise `kafkaConsumer.pollTimeoutMs`; the batch is replayed on the next run",
                ));
            }
            let Some(polled) = self.consumer.poll(Duration::from_millis(100)) else {
                // Nothing arrived: a range may end in a gap (transaction markers).
                self.finish_ranges_at_position(&mut ranges)?;
                continue;
            };
            match polled {
                Ok(msg) => {
                    let tp = (msg.topic().to_string(), msg.partition());
                    let offset = msg.offset();
                    let Some((next, u)) = ranges.get(&tp).copied() else {
                        continue;
                    };
                    if offset < next {
                        continue; // a duplicate from a re-assignment
                    }
                    last_progress = Instant::now();
                    if offset > next {
                        // A gap: compaction and transaction markers leave
                        // them; deleted data (retention) is a loss.
                        let (low, _) = self.watermarks(&tp)?;
                        if low > next {
                            let lost = (low.min(u) - next).max(0) as u64;
                            report_data_loss(
                                &self.what,
                                self.fail_on_data_loss,
                                &mut self.data_lost,
                                format!(
                                    "messages {next}..{} of partition {}-{} were deleted before they were read",
                                    low.min(u), tp.0, tp.1
                                ),
                                lost,
                            )?;
                        }
                    }
                    if offset >= u {
                        ranges.remove(&tp);
                        continue;
                    }
                    bytes += out.push(&msg);
                    if offset + 1 >= u {
                        ranges.remove(&tp);
                    } else if let Some(r) = ranges.get_mut(&tp) {
                        r.0 = offset + 1;
                    }
                    if out.len() >= ROWS_PER_BATCH {
                        batches.push(out.finish()?);
                    }
                }
                Err(KafkaError::PartitionEOF(p)) => {
                    // The log ends before the planned end: it was truncated or recreated.
                    let done: Vec<TopicPartition> =
                        ranges.keys().filter(|(_, q)| *q == p).cloned().collect();
                    for tp in done {
                        let (low, high) = self.watermarks(&tp)?;
                        let (next, u) = ranges[&tp];
                        if high >= u {
                            continue; // an EOF from before new messages arrived
                        }
                        let _ = low;
                        self.data_loss(
                            format!(
                                "partition {}-{} ends at offset {high}, before the batch's end {u}; messages may have been missed",
                                tp.0, tp.1
                            ),
                            (u - next.max(high)).max(0) as u64,
                        )?;
                        ranges.remove(&tp);
                    }
                }
                Err(KafkaError::MessageConsumption(
                    RDKafkaErrorCode::OffsetOutOfRange | RDKafkaErrorCode::AutoOffsetReset,
                )) => {
                    self.recover_out_of_range(&mut ranges)?;
                    last_progress = Instant::now();
                }
                Err(e) => {
                    if is_transient(&e) {
                        continue;
                    }
                    let _ = self.consumer.unassign();
                    return Err(self.broker_error("could not read messages", &e));
                }
            }
        }
        let _ = self.consumer.unassign();
        if out.len() > 0 {
            batches.push(out.finish()?);
        }
        Ok(ReadBatch {
            batches,
            bytes,
            malformed_dropped: 0,
        })
    }

    fn backlog(&self) -> Option<String> {
        self.backlog.map(|n| format!("{n} messages"))
    }

    /// Keeps the consumer assigned between reads: a message is returned as
    /// soon as the consumer has fetched it.
    fn read_arrived(
        &mut self,
        start: Option<&Offset>,
        timeout: Duration,
    ) -> Result<Option<(Offset, ReadBatch)>> {
        self.read_live(start, timeout)
    }

    fn data_lost(&mut self) -> u64 {
        std::mem::take(&mut self.data_lost)
    }
}

impl KafkaSource {
    /// Ranges whose consumer position already passed their end (the last
    /// offsets were transaction markers or compacted away) are done.
    fn finish_ranges_at_position(
        &mut self,
        ranges: &mut BTreeMap<TopicPartition, (i64, i64)>,
    ) -> Result<()> {
        let Ok(pos) = self.consumer.position() else {
            return Ok(());
        };
        for e in pos.elements() {
            let tp = (e.topic().to_string(), e.partition());
            if let (Some((_, u)), KafkaOffset::Offset(o)) = (ranges.get(&tp).copied(), e.offset()) {
                if o >= u {
                    ranges.remove(&tp);
                }
            }
        }
        Ok(())
    }

    /// The broker says a wanted offset is out of range: the data was
    /// deleted. Count (or fail) and go on from the earliest offset left.
    fn recover_out_of_range(
        &mut self,
        ranges: &mut BTreeMap<TopicPartition, (i64, i64)>,
    ) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        let keys: Vec<TopicPartition> = ranges.keys().cloned().collect();
        for tp in keys {
            let (next, u) = ranges[&tp];
            let (low, _) = self.watermarks(&tp)?;
            if low > next {
                self.data_loss(
                    format!(
                        "messages {next}..{} of partition {}-{} were deleted before they were read",
                        low.min(u),
                        tp.0,
                        tp.1
                    ),
                    (low.min(u) - next).max(0) as u64,
                )?;
                if low >= u {
                    ranges.remove(&tp);
                    continue;
                }
                ranges.insert(tp.clone(), (low, u));
            }
            let (next, _) = ranges[&tp];
            tpl.add_partition_offset(&tp.0, tp.1, KafkaOffset::Offset(next))
                .map_err(|e| self.broker_error("could not assign partitions", &e))?;
        }
        self.consumer
            .assign(&tpl)
            .map_err(|e| self.broker_error("could not assign partitions", &e))
    }
}

impl KafkaSource {
    /// Assigns the consumer to `partitions`, each from its offset in `from`
    /// (a partition `from` does not know was added later: from its start).
    fn assign_live(
        &mut self,
        partitions: &BTreeSet<TopicPartition>,
        from: &PartitionOffsets,
    ) -> Result<()> {
        let positions: PartitionOffsets = partitions
            .iter()
            .map(|tp| (tp.clone(), from.get(tp).copied().unwrap_or(0)))
            .collect();
        self.assign_at(&positions)?;
        self.live = Some(LiveAssignment {
            positions,
            listed: Instant::now(),
        });
        Ok(())
    }

    /// Real-time reads: (re)assigns the consumer when it does not stand at
    /// `start` or the partitions are due to be listed again, then returns
    /// what arrives within `timeout` (everything already fetched, without
    /// waiting, once one message is there).
    fn read_live(
        &mut self,
        start: Option<&Offset>,
        timeout: Duration,
    ) -> Result<Option<(Offset, ReadBatch)>> {
        if !self.live_config {
            // A fetch that finds nothing new waits at most 1 ms at the
            // broker, so a message is fetched soon after it is written.
            self.config.set("fetch.wait.max.ms", "1");
            self.consumer = create_consumer(&self.config, &self.what)?;
            self.live_config = true;
            self.live = None;
        }
        let from = self.start_offsets(start)?;
        let stands = self.live.as_ref().is_some_and(|l| {
            l.listed.elapsed() < RELIST_EVERY
                && from.iter().all(|(tp, o)| l.positions.get(tp) == Some(o))
        });
        if !stands {
            let partitions = self.partitions()?;
            // Listed again and nothing changed: the assignment stands (assigning
            // again would restart every fetch, a latency spike).
            if let Some(live) = self.live.as_mut().filter(|l| {
                l.positions.len() == partitions.len()
                    && partitions.iter().all(|tp| l.positions.contains_key(tp))
                    && from.iter().all(|(tp, o)| l.positions.get(tp) == Some(o))
            }) {
                live.listed = Instant::now();
            } else {
                self.assign_live(&partitions, &from)?;
            }
        }
        let deadline = Instant::now() + timeout;
        let mut out = RowBuilder::new(self.schema.clone());
        let mut bytes = 0u64;
        loop {
            let wait = if out.len() > 0 {
                Duration::ZERO
            } else {
                deadline.saturating_duration_since(Instant::now())
            };
            let polled = self.consumer.poll(wait);
            let Some(live) = self.live.as_mut() else {
                break;
            };
            match polled {
                None => break,
                Some(Ok(msg)) => {
                    let tp = (msg.topic().to_string(), msg.partition());
                    let Some(pos) = live.positions.get_mut(&tp) else {
                        continue;
                    };
                    if msg.offset() < *pos {
                        continue; // fetched before a re-assignment
                    }
                    *pos = msg.offset() + 1;
                    bytes += out.push(&msg);
                    if out.len() >= ROWS_PER_BATCH {
                        break;
                    }
                }
                Some(Err(KafkaError::PartitionEOF(_))) => {
                    if out.len() > 0 || Instant::now() >= deadline {
                        break;
                    }
                }
                Some(Err(KafkaError::MessageConsumption(
                    RDKafkaErrorCode::OffsetOutOfRange | RDKafkaErrorCode::AutoOffsetReset,
                ))) => {
                    // Deleted before it was read: count (or fail) and go on
                    // from the earliest offset left.
                    let mut positions = live.positions.clone();
                    for (tp, pos) in positions.iter_mut() {
                        let (low, _) = self.watermarks(tp)?;
                        if low > *pos {
                            self.data_loss(
                                format!(
                                    "messages {pos}..{low} of partition {}-{} were deleted before they were read",
                                    tp.0, tp.1
                                ),
                                (low - *pos) as u64,
                            )?;
                            *pos = low;
                        }
                    }
                    self.assign_at(&positions)?;
                    if let Some(live) = self.live.as_mut() {
                        live.positions = positions;
                    }
                }
                Some(Err(e)) if is_transient(&e) => {
                    if Instant::now() >= deadline {
                        break;
                    }
                }
                Some(Err(e)) => {
                    self.live = None;
                    let _ = self.consumer.unassign();
                    return Err(self.broker_error("could not read messages", &e));
                }
            }
        }
        let Some(live) = self.live.as_ref() else {
            return Ok(None);
        };
        if out.len() == 0 {
            return Ok(None);
        }
        let end = offsets_to_json(&live.positions);
        Ok(Some((
            end,
            ReadBatch {
                batches: vec![out.finish()?],
                bytes,
                malformed_dropped: 0,
            },
        )))
    }

    /// Assigns the consumer to `positions` (each partition at its offset).
    fn assign_at(&mut self, positions: &PartitionOffsets) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        for (tp, o) in positions {
            tpl.add_partition_offset(&tp.0, tp.1, KafkaOffset::Offset(*o))
                .map_err(|e| self.broker_error("could not assign partitions", &e))?;
        }
        self.consumer
            .assign(&tpl)
            .map_err(|e| self.broker_error("could not assign partitions", &e))
    }
}

fn is_transient(e: &KafkaError) -> bool {
    match e {
        KafkaError::MessageConsumption(code) => matches!(
            code,
            RDKafkaErrorCode::BrokerTransportFailure
                | RDKafkaErrorCode::AllBrokersDown
                | RDKafkaErrorCode::NotLeaderForPartition
                | RDKafkaErrorCode::LeaderNotAvailable
                | RDKafkaErrorCode::UnknownTopicOrPartition
                | RDKafkaErrorCode::RequestTimedOut
        ),
        _ => false,
    }
}

/// Builds the source's columns from messages.
struct RowBuilder {
    schema: SchemaRef,
    key: BinaryBuilder,
    value: BinaryBuilder,
    topic: StringBuilder,
    partition: Int32Builder,
    offset: Int64Builder,
    timestamp: TimestampMicrosecondBuilder,
    timestamp_type: Int32Builder,
    headers: ListBuilder<StructBuilder>,
    with_headers: bool,
    rows: usize,
}

fn header_fields() -> Fields {
    Fields::from(vec![
        Field::new("key", DataType::Utf8, true),
        Field::new("value", DataType::Binary, true),
    ])
}

impl RowBuilder {
    fn new(schema: SchemaRef) -> Self {
        let header = StructBuilder::from_fields(header_fields(), 0);
        let list_field = schema
            .field_with_name("headers")
            .ok()
            .and_then(|f| match f.data_type() {
                DataType::List(inner) => Some(inner.clone()),
                _ => None,
            });
        let list_field_present = list_field.is_some();
        let mut headers = ListBuilder::new(header);
        if let Some(f) = list_field {
            headers = headers.with_field(f);
        }
        RowBuilder {
            schema,
            key: BinaryBuilder::new(),
            value: BinaryBuilder::new(),
            topic: StringBuilder::new(),
            partition: Int32Builder::new(),
            offset: Int64Builder::new(),
            timestamp: TimestampMicrosecondBuilder::new(),
            timestamp_type: Int32Builder::new(),
            headers,
            with_headers: list_field_present,
            rows: 0,
        }
    }

    fn len(&self) -> usize {
        self.rows
    }

    /// Appends one message; returns its key and value bytes.
    fn push<M: Message>(&mut self, m: &M) -> u64 {
        let key = m.key();
        let value = m.payload();
        self.key.append_option(key);
        self.value.append_option(value);
        self.topic.append_value(m.topic());
        self.partition.append_value(m.partition());
        self.offset.append_value(m.offset());
        match m.timestamp() {
            Timestamp::CreateTime(t) => {
                self.timestamp.append_value(t * 1000);
                self.timestamp_type.append_value(0);
            }
            Timestamp::LogAppendTime(t) => {
                self.timestamp.append_value(t * 1000);
                self.timestamp_type.append_value(1);
            }
            Timestamp::NotAvailable => {
                self.timestamp.append_null();
                self.timestamp_type.append_null();
            }
        }
        if !self.with_headers {
            self.rows += 1;
            return (key.map_or(0, |k| k.len()) + value.map_or(0, |v| v.len())) as u64;
        }
        if let Some(h) = m.headers() {
            for header in h.iter() {
                let s = self.headers.values();
                s.field_builder::<StringBuilder>(0)
                    .expect("header key builder")
                    .append_value(header.key);
                s.field_builder::<BinaryBuilder>(1)
                    .expect("header value builder")
                    .append_option(header.value);
                s.append(true);
            }
        }
        self.headers.append(true);
        self.rows += 1;
        (key.map_or(0, |k| k.len()) + value.map_or(0, |v| v.len())) as u64
    }

    fn finish(&mut self) -> Result<RecordBatch> {
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        let key: ArrayRef = Arc::new(self.key.finish());
        let value: ArrayRef = Arc::new(self.value.finish());
        let topic: ArrayRef = Arc::new(self.topic.finish());
        let partition: ArrayRef = Arc::new(self.partition.finish());
        let offset: ArrayRef = Arc::new(self.offset.finish());
        let ts = self.timestamp.finish();
        let timestamp_type: ArrayRef = Arc::new(self.timestamp_type.finish());
        let headers: ArrayRef = Arc::new(self.headers.finish());
        for field in self.schema.fields() {
            let col = match field.name().as_str() {
                "key" => key.clone(),
                "value" => value.clone(),
                "topic" => topic.clone(),
                "partition" => partition.clone(),
                "offset" => offset.clone(),
                "timestamp" => match field.data_type() {
                    DataType::Timestamp(_, tz) => {
                        Arc::new(ts.clone().with_timezone_opt(tz.clone()))
                    }
                    _ => Arc::new(ts.clone()),
                },
                "timestampType" => timestamp_type.clone(),
                "headers" => headers.clone(),
                other => {
                    return Err(Error::runtime(format!(
                        "kafka source: no column `{other}` in Kafka records"
                    )))
                }
            };
            let col = if col.data_type() != field.data_type() {
                arrow::compute::cast(&col, field.data_type())?
            } else {
                col
            };
            columns.push(col);
        }
        self.rows = 0;
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(pairs: &[(&str, i32, i64)]) -> PartitionOffsets {
        pairs
            .iter()
            .map(|(t, p, o)| ((t.to_string(), *p), *o))
            .collect()
    }

    #[test]
    fn rate_limit_splits_in_proportion_to_backlog() {
        let from = offsets(&[("t", 0, 0), ("t", 1, 0), ("t", 2, 5)]);
        let until = offsets(&[("t", 0, 80), ("t", 1, 19), ("t", 2, 6)]);
        // 100 messages waiting, 10 allowed: 8, 1.9 → 1, 0.1 → 1.
        assert_eq!(
            rate_limit(&from, &until, Some(10)),
            offsets(&[("t", 0, 8), ("t", 1, 1), ("t", 2, 6)])
        );
        assert_eq!(rate_limit(&from, &until, Some(1000)), until);
        assert_eq!(rate_limit(&from, &until, None), until);
        // A partition not in `from` (added later) starts at its `until`'s
        // own from, given by the caller; here it is taken whole.
        let until2 = offsets(&[("t", 0, 80), ("u", 0, 3)]);
        assert_eq!(
            rate_limit(&from, &until2, None),
            offsets(&[("t", 0, 80), ("u", 0, 3)])
        );
    }

    #[test]
    fn offsets_round_trip_as_sparks_json() {
        let o = offsets(&[("a", 0, 1), ("a", 1, 2), ("b", 0, 3)]);
        let json = offsets_to_json(&o);
        assert_eq!(json.to_string(), r#"{"a":{"0":1,"1":2},"b":{"0":3}}"#);
        assert_eq!(offsets_from_json(&json).unwrap(), o);
        assert_eq!(
            offsets_from_json(&serde_json::json!({"a": {"x": 1}})).unwrap_err(),
            "topic `a`: `x` is not a partition number"
        );
        assert_eq!(
            offsets_from_json(&serde_json::json!([1])).unwrap_err(),
            "expected an object of topics, got `[1]`"
        );
    }

    #[test]
    fn starting_offsets_parse_like_spark() {
        assert_eq!(
            parse_starting_offsets("Earliest", "x").unwrap(),
            StartingOffsets::Earliest
        );
        assert_eq!(
            parse_starting_offsets(" latest", "x").unwrap(),
            StartingOffsets::Latest
        );
        assert_eq!(
            parse_starting_offsets(r#"{"t": {"0": 5, "1": -2}}"#, "x").unwrap(),
            StartingOffsets::Specific(offsets(&[("t", 0, 5), ("t", 1, -2)]))
        );
        assert_eq!(
            parse_starting_offsets(r#"{"t": {"0": -3}}"#, "flow `f`: kafka source")
                .unwrap_err()
                .to_string(),
            "flow `f`: kafka source: option `startingOffsets` gives partition t-0 the offset -3; offsets are 0 or more, -2 (earliest) or -1 (latest)\n  help: use `earliest`, `latest` or JSON such as {\"topicA\": {\"0\": 23, \"1\": -2}} (-2 earliest, -1 latest)"
        );
    }
}
