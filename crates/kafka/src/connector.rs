//! The Kafka connector: the Kafka source ([`KafkaSource`], partitions
//! assigned by the source, offsets in the checkpoint) and the Kafka sink
//! ([`KafkaSink`], one message per row through the idempotent producer).
//! Options starting with `kafka.` go to librdkafka without the prefix.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};

use crate::sink::KafkaSink;
use crate::source::check_source_options;
use crate::source::KafkaSource;
use pipelines_core::connector::{
    ColumnCheck, Connector, ConnectorRegistration, DeclaredRead, RealTime, SinkConnector,
    SourceConnector, SourceRequest,
};
use pipelines_core::engine::connectors::{fixed_schema, forbid_path, ALL_MODES};
use pipelines_core::engine::sink::{Sink, SinkContext};
use pipelines_core::engine::source::Source;
use pipelines_core::error::{PlanError, Result};
use pipelines_core::formats::OutputMode;
use pipelines_core::options::{OptionDecl, OptionKind::*, OptionSet, Options, PassThrough};

const KAFKA_PASS_THROUGH: &[PassThrough] = &[PassThrough {
    prefix: "kafka.",
    doc: "passed to librdkafka without the prefix (`kafka.security.protocol` → `security.protocol`); the engine's own settings (offsets, commits, serialisers, idempotence) are refused",
}];

const BOOTSTRAP: OptionDecl = OptionDecl::new(
    "kafka.bootstrap.servers",
    Text,
    "the brokers, `host:port[,host:port...]`; `${ENV}` references are substituted",
)
.required();

static SOURCE_OPTIONS: OptionSet = OptionSet::new(&[
    BOOTSTRAP,
    OptionDecl::new("subscribe", Text, "topics to read, comma-separated (one of subscribe, subscribePattern, assign)"),
    OptionDecl::new("subscribePattern", Text, "a regular expression of topics to read"),
    OptionDecl::new("assign", Text, "partitions to read, as JSON: `{\"topic\":[0,1]}`"),
    OptionDecl::new(
        "startingOffsets",
        Text,
        "`earliest`, `latest` or per-partition JSON (`{\"t\":{\"0\":42}}`, -2 earliest, -1 latest); default: latest for streaming reads, earliest for batch reads",
    ),
    OptionDecl::new("endingOffsets", Text, "not supported for streaming reads"),
    OptionDecl::new(
        "maxOffsetsPerTrigger",
        Positive,
        "at most this many records per micro-batch, split over partitions by their backlog",
    ),
    OptionDecl::new(
        "failOnDataLoss",
        Bool,
        "fail when records were deleted before they were read; `false` counts them instead",
    )
    .default_value("true"),
    OptionDecl::new(
        "kafkaConsumer.pollTimeoutMs",
        Positive,
        "how long a fetch may wait for records, in milliseconds",
    )
    .default_value("120000"),
    OptionDecl::new(
        "includeHeaders",
        Bool,
        "add the `headers` column (ARRAY<STRUCT<key: STRING, value: BINARY>>)",
    )
    .default_value("false"),
])
.with_pass_through(KAFKA_PASS_THROUGH);

static SINK_OPTIONS: OptionSet = OptionSet::new(&[
    BOOTSTRAP,
    OptionDecl::new(
        "topic",
        Text,
        "the topic to write to; without it each row's `topic` column names one",
    ),
])
.with_pass_through(KAFKA_PASS_THROUGH);

/// The Kafka connector.
pub struct KafkaConnector;

/// The registered instance.
pub static KAFKA: KafkaConnector = KafkaConnector;

inventory::submit! { ConnectorRegistration(&KAFKA) }

impl Connector for KafkaConnector {
    fn name(&self) -> &'static str {
        "kafka"
    }

    fn source(&self) -> Option<&dyn SourceConnector> {
        Some(self)
    }

    fn sink(&self) -> Option<&dyn SinkConnector> {
        Some(self)
    }
}

impl SourceConnector for KafkaConnector {
    fn rank(&self) -> u16 {
        7
    }

    fn options(&self) -> &'static OptionSet {
        &SOURCE_OPTIONS
    }

    fn declare(
        &self,
        read: &DeclaredRead<'_>,
    ) -> std::result::Result<Option<SchemaRef>, PlanError> {
        forbid_path(read)?;
        let headers = read
            .option("includeHeaders")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let schema = fixed_schema(read, kafka_schema(headers))?;
        if read.option("kafka.bootstrap.servers").is_none() {
            return Err(PlanError::with_help(
                "kafka source needs the option `kafka.bootstrap.servers`",
                ".option(\"kafka.bootstrap.servers\", \"host:9092\")",
            ));
        }
        let subs: Vec<&str> = ["subscribe", "subscribePattern", "assign"]
            .into_iter()
            .filter(|k| read.option(k).is_some())
            .collect();
        if subs.len() != 1 {
            return Err(PlanError::with_help(
                if subs.is_empty() {
                    "kafka source needs one of the options `subscribe`, `subscribePattern` or `assign`".to_string()
                } else {
                    format!(
                        "kafka source takes only one of the options `subscribe`, `subscribePattern` or `assign`, got {}",
                        subs.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(" and ")
                    )
                },
                ".option(\"subscribe\", \"events\")",
            ));
        }
        Ok(schema)
    }

    fn check_options(&self, options: &Options) -> Result<()> {
        check_source_options(options)
    }

    fn open(&self, request: SourceRequest<'_>) -> Result<Box<dyn Source>> {
        Ok(Box::new(KafkaSource::open(
            request.schema,
            request.options,
            request.ctx,
            request.streaming,
        )?))
    }
}

impl SinkConnector for KafkaConnector {
    fn rank(&self) -> u16 {
        4
    }

    fn options(&self) -> &'static OptionSet {
        &SINK_OPTIONS
    }

    fn accepted_modes(&self, _merge_keys: bool) -> &'static [OutputMode] {
        ALL_MODES
    }

    fn real_time(&self) -> RealTime {
        RealTime::Supported { rank: 0 }
    }

    fn check_schema(&self, schema: &SchemaRef, options: &BTreeMap<String, String>) -> ColumnCheck {
        crate::sink::check_schema(schema, options)
            .into_iter()
            .map(|p| (p.message, p.help))
            .collect::<Vec<_>>()
            .into()
    }

    fn open(&self, ctx: &SinkContext) -> Result<Box<dyn Sink>> {
        Ok(Box::new(KafkaSink::open(ctx)?))
    }
}

fn timestamp() -> DataType {
    DataType::Timestamp(
        TimeUnit::Microsecond,
        Some(pipelines_core::plan::ddl::SESSION_TIME_ZONE.into()),
    )
}

/// The schema of the Kafka source: `key BINARY, value BINARY, topic STRING,
/// partition INT, offset BIGINT, timestamp TIMESTAMP, timestampType INT`,
/// plus `headers ARRAY<STRUCT<key: STRING, value: BINARY>>` when
/// `includeHeaders` is true.
pub fn kafka_schema(include_headers: bool) -> SchemaRef {
    let mut fields = vec![
        Field::new("key", DataType::Binary, true),
        Field::new("value", DataType::Binary, true),
        Field::new("topic", DataType::Utf8, true),
        Field::new("partition", DataType::Int32, true),
        Field::new("offset", DataType::Int64, true),
        Field::new("timestamp", timestamp(), true),
        Field::new("timestampType", DataType::Int32, true),
    ];
    if include_headers {
        let header = DataType::Struct(Fields::from(vec![
            Field::new("key", DataType::Utf8, true),
            Field::new("value", DataType::Binary, true),
        ]));
        fields.push(Field::new(
            "headers",
            DataType::List(Arc::new(Field::new_list_field(header, true))),
            true,
        ));
    }
    Arc::new(Schema::new(fields))
}
