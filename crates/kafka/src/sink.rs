//! The Kafka sink (`create_sink(name, "kafka", {kafka.bootstrap.servers, topic})`).
//!
//! Each row of a batch becomes one message. The query provides the columns
//! (as in Spark):
//!
//! | column | type | |
//! |---|---|---|
//! | `value` | STRING or BINARY | required; null writes a message without a value |
//! | `key` | STRING or BINARY | optional; null: no key |
//! | `topic` | STRING | required unless the sink's `topic` option is set (the option wins) |
//! | `headers` | ARRAY<STRUCT<key STRING, value BINARY>> | optional |
//! | `partition` | INT | optional; null or absent: librdkafka's partitioner (by key) |
//!
//! Other columns are an error at `dry-run` ([`check_schema`]); so is a
//! wrong type. Every output mode is accepted: append and update send the
//! batch's rows, complete the whole result each batch.
//!
//! At least once: the producer is idempotent (`enable.idempotence`, so the
//! client's own retries never duplicate or reorder), and every message of
//! a batch must be acknowledged before [`Sink::add_batch`] returns: the
//! producer is flushed and each delivery report checked. A message that
//! could not be delivered fails the batch, which is then not committed; the
//! next run replays it (so messages of a failed or crashed batch may be
//! written twice, never skipped). `kafka.*` options go to librdkafka
//! ([`crate::conf`]); `kafka.delivery.timeout.ms` bounds how
//! long a batch waits for acknowledgements.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray, BinaryArray, Int32Array, ListArray, StringArray, StructArray};
use arrow::datatypes::{DataType, Schema};
use arrow::record_batch::RecordBatch;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;

use crate::conf::{client_config, creation_error, ClientRole};
use pipelines_core::engine::sink::{Sink, SinkContext, SinkWrite};
use pipelines_core::error::{Error, Result};
use pipelines_core::formats::OutputMode;

/// One problem with the columns a query gives a Kafka sink: what is wrong
/// and how to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaProblem {
    /// What is wrong, naming the column.
    pub message: String,
    /// How to fix it.
    pub help: String,
}

/// The columns a Kafka sink takes.
pub const SINK_COLUMNS: &[&str] = &["key", "value", "topic", "headers", "partition"];

/// Checks the columns a query writes to a Kafka sink whose options are
/// `options`: `value` is required, `topic` unless the option is set, and
/// every column must be one the sink takes, with its type. Returns every problem.
pub fn check_schema(schema: &Schema, options: &BTreeMap<String, String>) -> Vec<SchemaProblem> {
    let mut problems = Vec::new();
    let has_topic_option = options.keys().any(|k| k.eq_ignore_ascii_case("topic"));
    let columns: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    if schema.field_with_name("value").is_err() {
        problems.push(SchemaProblem {
            message: format!(
                "the query has no `value` column (it has {})",
                columns.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
            ),
            help: "select the message body as `value`, e.g. `.select_expr([\"CAST(count AS STRING) AS value\", \"event_type AS key\"])` or `to_json(struct(*)) AS value`".to_string(),
        });
    }
    if schema.field_with_name("topic").is_err() && !has_topic_option {
        problems.push(SchemaProblem {
            message: "no topic: the sink has no `topic` option and the query no `topic` column"
                .to_string(),
            help:
                "add `topic: <name>` to the sink's options, or a `topic` STRING column to the query"
                    .to_string(),
        });
    }
    for field in schema.fields() {
        let name = field.name().as_str();
        let t = field.data_type();
        let ok = match name {
            "key" | "value" => matches!(
                t,
                DataType::Utf8
                    | DataType::LargeUtf8
                    | DataType::Utf8View
                    | DataType::Binary
                    | DataType::LargeBinary
                    | DataType::BinaryView
            ),
            "topic" => matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View),
            "partition" => matches!(t, DataType::Int32 | DataType::Int16 | DataType::Int8),
            "headers" => is_headers_type(t),
            other => {
                problems.push(SchemaProblem {
                    message: format!(
                        "the query has a column `{other}`, which the Kafka sink does not take (it takes {})",
                        SINK_COLUMNS.join(", ")
                    ),
                    help: format!(
                        "drop `{other}`, or put it into the message, e.g. `to_json(struct(...)) AS value`"
                    ),
                });
                continue;
            }
        };
        if !ok {
            let want = match name {
                "key" | "value" => "STRING or BINARY",
                "topic" => "STRING",
                "partition" => "INT",
                _ => "ARRAY<STRUCT<key: STRING, value: BINARY>>",
            };
            problems.push(SchemaProblem {
                message: format!(
                    "column `{name}` is {}, but the Kafka sink needs {want}",
                    pipelines_core::plan::ddl::type_to_ddl(t)
                ),
                help: match name {
                    "key" | "value" => format!("cast it: `CAST({name} AS STRING) AS {name}`"),
                    "partition" => "cast it: `CAST(partition AS INT) AS partition`".to_string(),
                    _ => format!("cast it to {want}"),
                },
            });
        }
    }
    problems
}

fn is_headers_type(t: &DataType) -> bool {
    let DataType::List(item) = t else {
        return false;
    };
    let DataType::Struct(fields) = item.data_type() else {
        return false;
    };
    fields.len() == 2
        && fields[0].name() == "key"
        && matches!(fields[0].data_type(), DataType::Utf8)
        && fields[1].name() == "value"
        && matches!(fields[1].data_type(), DataType::Binary | DataType::Utf8)
}

/// Delivery reports of the messages in flight.
#[derive(Default)]
struct Deliveries {
    ok: u64,
    failed: u64,
    first_error: Option<String>,
}

/// The producer's context: counts delivery reports.
struct DeliveryCounter(Arc<Mutex<Deliveries>>);

impl ClientContext for DeliveryCounter {}

impl ProducerContext for DeliveryCounter {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let mut d = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match result {
            Ok(_) => d.ok += 1,
            Err((e, _)) => {
                d.failed += 1;
                d.first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
}

/// The Kafka sink (see the module documentation).
pub struct KafkaSink {
    name: String,
    flow: String,
    topic: Option<String>,
    producer: BaseProducer<DeliveryCounter>,
    deliveries: Arc<Mutex<Deliveries>>,
    flush_timeout: Duration,
    /// The producer's configuration (real-time mode re-creates the
    /// producer without linger).
    config: ClientConfig,
    /// Real-time mode: messages sent in the current epoch.
    epoch_sent: u64,
    /// The sink's options set `kafka.linger.ms` (or its alias): real-time
    /// mode keeps it.
    user_linger: bool,
}

impl KafkaSink {
    /// Opens the sink: checks the query's columns and creates the producer
    /// (no broker is contacted yet).
    pub fn open(ctx: &SinkContext) -> Result<KafkaSink> {
        let what = format!("sink `{}` (flow `{}`)", ctx.name, ctx.flow);
        if let Some(p) = check_schema(&ctx.schema, &ctx.options).into_iter().next() {
            return Err(Error::runtime_with_help(
                format!("{what}: {}", p.message),
                p.help,
            ));
        }
        let topic = ctx
            .options
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("topic"))
            .map(|(_, v)| v.clone());
        if topic.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(Error::runtime_with_help(
                format!("{what}: option `topic` is empty"),
                "set it to the topic to write to, or remove it and give the query a `topic` column",
            ));
        }
        let config = client_config(
            &ctx.options,
            ClientRole::Producer,
            &what,
            &[
                ("enable.idempotence", "true"),
                ("acks", "all"),
                ("linger.ms", "5"),
                ("delivery.timeout.ms", "120000"),
            ],
        )?;
        let delivery_ms: u64 = config
            .get("delivery.timeout.ms")
            .and_then(|v| v.parse().ok())
            .unwrap_or(120_000);
        let mut config = config;
        config.set("enable.idempotence", "true");
        let deliveries = Arc::new(Mutex::new(Deliveries::default()));
        let producer = config
            .create_with_context(DeliveryCounter(deliveries.clone()))
            .map_err(|e| creation_error(&what, e))?;
        let config_kept = config.clone();
        Ok(KafkaSink {
            name: ctx.name.clone(),
            flow: ctx.flow.clone(),
            topic,
            producer,
            deliveries,
            // Every message is either delivered or failed by the delivery
            // timeout; a little more for the last reports to arrive.
            flush_timeout: Duration::from_millis(delivery_ms) + Duration::from_secs(5),
            config: config_kept,
            epoch_sent: 0,
            user_linger: ctx.options.keys().any(|k| {
                let k = k.to_ascii_lowercase();
                k == "kafka.linger.ms" || k == "kafka.queue.buffering.max.ms"
            }),
        })
    }

    fn what(&self) -> String {
        format!("sink `{}` (flow `{}`)", self.name, self.flow)
    }

    /// Waits (up to the flush timeout) until every message sent is
    /// acknowledged and its delivery report counted. Unlike rdkafka's
    /// `flush`, whose every wait lasts 100 ms (its `poll` runs to the end of
    /// its timeout), this returns within a millisecond of the last report:
    /// an epoch or batch commit then costs the broker's round trip, not
    /// 100 ms.
    fn flush(&self) -> rdkafka::error::KafkaResult<()> {
        let deadline = Instant::now() + self.flush_timeout;
        loop {
            // With a zero timeout: sends what lingers, and succeeds once
            // nothing is outstanding (delivery reports included).
            match self.producer.flush(Duration::ZERO) {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => self.producer.poll(Duration::from_millis(1)),
            }
        }
    }

    /// Sends one record, waiting while librdkafka's queue is full.
    fn send(&self, record: BaseRecord<'_, [u8], [u8]>, batch_id: u64) -> Result<()> {
        let mut record = record;
        let started = Instant::now();
        loop {
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    if started.elapsed() > self.flush_timeout {
                        return Err(Error::runtime_with_help(
                            format!("{}: batch {batch_id}: the producer's queue stayed full for {} s", self.what(), self.flush_timeout.as_secs()),
                            "check that the brokers are reachable; the batch is not committed and is replayed on the next run",
                        ));
                    }
                    record = r;
                    self.producer.poll(Duration::from_millis(10));
                }
                Err((e, r)) => {
                    return Err(Error::external_with_help(
                        format!(
                            "{}: batch {batch_id}: could not send a message to topic `{}`",
                            self.what(),
                            r.topic
                        ),
                        "check the topic name and the `kafka.*` options; the batch is not committed and is replayed on the next run",
                        e,
                    ))
                }
            }
        }
    }

    fn write_rows(&self, batch: &RecordBatch, batch_id: u64) -> Result<u64> {
        let value = bytes_column(batch, "value")?;
        let key = bytes_column(batch, "key")?;
        let topic_col: Option<StringArray> = match batch.column_by_name("topic") {
            Some(c) => Some(
                arrow::compute::cast(c, &DataType::Utf8)?
                    .as_string::<i32>()
                    .clone(),
            ),
            None => None,
        };
        let partition: Option<Int32Array> = match batch.column_by_name("partition") {
            Some(c) => Some(
                arrow::compute::cast(c, &DataType::Int32)?
                    .as_primitive::<arrow::datatypes::Int32Type>()
                    .clone(),
            ),
            None => None,
        };
        let headers: Option<&ListArray> =
            batch.column_by_name("headers").map(|c| c.as_list::<i32>());
        let header_values: Option<(StringArray, BinaryArray)> = match headers {
            Some(list) => {
                let s: &StructArray = list.values().as_struct();
                let k = arrow::compute::cast(s.column(0), &DataType::Utf8)?
                    .as_string::<i32>()
                    .clone();
                let v = arrow::compute::cast(s.column(1), &DataType::Binary)?
                    .as_binary::<i32>()
                    .clone();
                Some((k, v))
            }
            None => None,
        };
        let value = value.ok_or_else(|| {
            Error::runtime(format!("{}: the batch has no `value` column", self.what()))
        })?;
        for row in 0..batch.num_rows() {
            let topic = match (&self.topic, &topic_col) {
                (Some(t), _) => t.as_str(),
                (None, Some(col)) if col.is_valid(row) => col.value(row),
                _ => {
                    return Err(Error::runtime_with_help(
                        format!("{}: batch {batch_id}: a row has a null `topic`", self.what()),
                        "give every row a topic, e.g. `coalesce(topic, 'fallback') AS topic`, or set the sink's `topic` option",
                    ))
                }
            };
            let mut record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(topic);
            if value.is_valid(row) {
                record = record.payload(value.value(row));
            }
            if let Some(k) = &key {
                if k.is_valid(row) {
                    record = record.key(k.value(row));
                }
            }
            if let Some(p) = &partition {
                if p.is_valid(row) {
                    record = record.partition(p.value(row));
                }
            }
            if let (Some(list), Some((hk, hv))) = (headers, &header_values) {
                if list.is_valid(row) {
                    let offsets = list.value_offsets();
                    let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
                    let mut owned = OwnedHeaders::new_with_capacity(end - start);
                    for i in start..end {
                        if hk.is_null(i) {
                            continue;
                        }
                        owned = owned.insert(Header {
                            key: hk.value(i),
                            value: hv.is_valid(i).then(|| hv.value(i)),
                        });
                    }
                    record = record.headers(owned);
                }
            }
            self.send(record, batch_id)?;
        }
        Ok(batch.num_rows() as u64)
    }
}

/// A STRING or BINARY column as binary (`None` when the batch has none).
fn bytes_column(batch: &RecordBatch, name: &str) -> Result<Option<BinaryArray>> {
    Ok(match batch.column_by_name(name) {
        Some(c) => Some(
            arrow::compute::cast(c, &DataType::Binary)?
                .as_binary::<i32>()
                .clone(),
        ),
        None => None,
    })
}

impl Sink for KafkaSink {
    fn describe(&self) -> String {
        match &self.topic {
            Some(t) => format!("kafka sink `{}` topic `{t}`", self.name),
            None => format!("kafka sink `{}`", self.name),
        }
    }

    fn add_batch(
        &mut self,
        batch_id: u64,
        batches: Vec<RecordBatch>,
        _mode: OutputMode,
    ) -> Result<SinkWrite> {
        *self.deliveries.lock().unwrap_or_else(|p| p.into_inner()) = Deliveries::default();
        let mut sent = 0u64;
        let mut bytes = 0u64;
        // Crash tests (`PIPELINES_FAULT=kafka_sink_partial:<batch>`) kill the
        // process once half of the batch's first rows are acknowledged.
        let fault_test = std::env::var_os("PIPELINES_FAULT").is_some();
        for (i, b) in batches.iter().enumerate() {
            if fault_test && i == 0 && b.num_rows() >= 2 {
                let half = b.num_rows() / 2;
                sent += self.write_rows(&b.slice(0, half), batch_id)?;
                let _ = self.flush();
                pipelines_core::engine::fault::fault_point(
                    &self.flow,
                    "kafka_sink_partial",
                    batch_id,
                );
                sent += self.write_rows(&b.slice(half, b.num_rows() - half), batch_id)?;
            } else {
                sent += self.write_rows(b, batch_id)?;
            }
            bytes += b.get_array_memory_size() as u64;
            self.producer.poll(Duration::ZERO);
        }
        self.settle(&format!("batch {batch_id}"), sent)?;
        Ok(SinkWrite {
            rows: sent,
            files: 0,
            bytes,
            skipped_replay: false,
        })
    }

    fn supports_real_time(&self) -> bool {
        true
    }

    /// Re-creates the producer without linger (`linger.ms` 0), unless the
    /// sink's options set it: each message leaves as soon as it is sent.
    fn start_real_time(&mut self) -> Result<()> {
        if self.user_linger {
            return Ok(());
        }
        let mut config = self.config.clone();
        config.set("linger.ms", "0");
        self.settle("before real-time mode", self.epoch_sent)?;
        self.producer = config
            .create_with_context(DeliveryCounter(self.deliveries.clone()))
            .map_err(|e| creation_error(&self.what(), e))?;
        self.config = config;
        Ok(())
    }

    /// Sends the rows at once; deliveries are checked when the epoch commits.
    fn add_rows(
        &mut self,
        epoch: u64,
        batches: Vec<RecordBatch>,
        _mode: OutputMode,
    ) -> Result<u64> {
        let mut sent = 0;
        for b in &batches {
            sent += self.write_rows(b, epoch)?;
        }
        self.producer.poll(Duration::ZERO);
        self.epoch_sent += sent;
        Ok(sent)
    }

    fn commit_epoch(&mut self, epoch: u64) -> Result<()> {
        let sent = std::mem::take(&mut self.epoch_sent);
        self.settle(&format!("epoch {epoch}"), sent)
    }
}

impl KafkaSink {
    /// Waits until every message sent since the last call is acknowledged;
    /// fails when one was not (`what` names the batch or epoch).
    fn settle(&mut self, what: &str, sent: u64) -> Result<()> {
        let flushed = self.flush();
        let d = std::mem::take(&mut *self.deliveries.lock().unwrap_or_else(|p| p.into_inner()));
        if let Err(e) = flushed {
            return Err(Error::runtime_with_help(
                format!(
                    "{}: {what}: {} of {sent} messages were not acknowledged within {} s: {e}",
                    self.what(),
                    sent.saturating_sub(d.ok),
                    self.flush_timeout.as_secs()
                ),
                "check that the brokers are reachable; the batch is not committed and is replayed on the next run (messages already delivered are written again)",
            ));
        }
        if d.failed > 0 || d.ok != sent {
            return Err(Error::runtime_with_help(
                format!(
                    "{}: {what}: {} of {sent} messages were not delivered: {}",
                    self.what(),
                    sent.saturating_sub(d.ok),
                    d.first_error.unwrap_or_else(|| "no delivery report".to_string())
                ),
                "check the topic and the brokers; the batch is not committed and is replayed on the next run (messages already delivered are written again)",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{Field, Fields};
    use std::sync::Arc;

    fn schema(fields: Vec<Field>) -> Schema {
        Schema::new(fields)
    }

    fn topic_option() -> BTreeMap<String, String> {
        BTreeMap::from([("topic".to_string(), "out".to_string())])
    }

    #[test]
    fn value_is_required_and_types_are_checked() {
        let ok = schema(vec![
            Field::new("key", DataType::Utf8, true),
            Field::new("value", DataType::Binary, true),
            Field::new("partition", DataType::Int32, true),
            Field::new(
                "headers",
                DataType::List(Arc::new(Field::new_list_field(
                    DataType::Struct(Fields::from(vec![
                        Field::new("key", DataType::Utf8, true),
                        Field::new("value", DataType::Binary, true),
                    ])),
                    true,
                ))),
                true,
            ),
        ]);
        assert_eq!(check_schema(&ok, &topic_option()), vec![]);
        let bad = schema(vec![
            Field::new("key", DataType::Int64, true),
            Field::new("n", DataType::Int64, true),
        ]);
        let messages: Vec<String> = check_schema(&bad, &BTreeMap::new())
            .into_iter()
            .map(|p| format!("{} / {}", p.message, p.help))
            .collect();
        assert_eq!(
            messages,
            vec![
                "the query has no `value` column (it has `key`, `n`) / select the message body as `value`, e.g. `.select_expr([\"CAST(count AS STRING) AS value\", \"event_type AS key\"])` or `to_json(struct(*)) AS value`".to_string(),
                "no topic: the sink has no `topic` option and the query no `topic` column / add `topic: <name>` to the sink's options, or a `topic` STRING column to the query".to_string(),
                "column `key` is BIGINT, but the Kafka sink needs STRING or BINARY / cast it: `CAST(key AS STRING) AS key`".to_string(),
                "the query has a column `n`, which the Kafka sink does not take (it takes key, value, topic, headers, partition) / drop `n`, or put it into the message, e.g. `to_json(struct(...)) AS value`".to_string(),
            ]
        );
    }
}
