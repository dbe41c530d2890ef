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
//!   ([`crate::conf`]); `kafka.bootstrap.servers` is required;
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
//! value BINARY>>` ([`crate::kafka_schema`]).

use std::collections::{BTreeMap, BTreeSet};
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

use crate::conf::{client_config, creation_error, ClientRole};
use pipelines_core::engine::source::{Backlog, Offset, ReadBatch, Source, SourceContext};
use pipelines_core::engine::sources::{read_state_file, write_atomic, Options};
use pipelines_core::engine::storage::Location;
use pipelines_core::error::{Error, Result};

mod live;
mod offsets;
mod options;
mod rows;

use self::offsets::*;
pub use self::offsets::{
    offsets_from_json, offsets_to_json, rate_limit, PartitionOffsets, TopicPartition,
};
pub(crate) use self::options::check_source_options;
use self::options::*;
pub use self::options::{parse_starting_offsets, StartingOffsets, Subscription};
pub use self::rows::KAFKA_COLUMNS;
use self::rows::*;

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
    state_dir: Location,
    /// Available-now runs: the end of every partition when the run started.
    cap: Option<PartitionOffsets>,
    /// Messages lost (deleted before they were read) since the last report.
    data_lost: u64,
    /// Messages between the last planned end and the cap (available-now).
    backlog: Option<u64>,
    /// The backlog when the available-now run started.
    backlog_total: Option<u64>,
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
        let what = "kafka source".to_string();
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
            backlog_total: None,
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
        Error::external_with_help(
            format!("{}: {doing}", self.what),
            "check that the brokers in `kafka.bootstrap.servers` are reachable; the batch is retried from the checkpoint on the next run",
            e.clone(),
        )
    }

    /// The offsets the query starts from, resolved once and kept in the
    /// source's checkpoint directory so a restart resolves `latest` the same way.
    fn initial_offsets(&mut self) -> Result<PartitionOffsets> {
        let file = self.state_dir.join("initial-offsets.json");
        if let Some(text) = read_state_file(&file)? {
            let value: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| Error::checkpoint(file.shown(), format!("not valid JSON: {e}")))?;
            return checkpoint_offsets_from_json(&value)
                .map_err(|m| Error::checkpoint(file.shown(), format!("not a Kafka offset: {m}")));
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
            Some(v) => checkpoint_offsets_from_json(v).map_err(|m| {
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

fn create_consumer(config: &ClientConfig, what: &str) -> Result<BaseConsumer> {
    config.create().map_err(|e| creation_error(what, e))
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
        if self.backlog_total.is_none() && self.cap.is_some() {
            // The first plan of the run: everything up to the cap.
            let all: i64 = until
                .iter()
                .map(|(tp, u)| u - from_all.get(tp).copied().unwrap_or(*u))
                .sum();
            self.backlog_total = Some(all.max(0) as u64);
        }
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
        let until = checkpoint_offsets_from_json(end).map_err(|m| {
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
            corrupt_files_skipped: 0,
            rows_filtered: 0,
        })
    }

    fn backlog(&self) -> Option<Backlog> {
        self.backlog
            .map(|n| Backlog::new(n, self.backlog_total.unwrap_or(n), "message"))
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
        // In a checkpoint, -2 and -1 (earliest, latest) are refused.
        assert_eq!(
            checkpoint_offsets_from_json(&serde_json::json!({"t": {"0": 4, "1": -2}})).unwrap_err(),
            "topic `t` partition 1: offset -2 is negative; a checkpoint holds positions, 0 or more"
        );
        assert_eq!(checkpoint_offsets_from_json(&json).unwrap(), o);
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
