//! The small built-in connectors: the `console`, `memory` and
//! `foreach_batch` sinks and the `rate`, `socket` and `memory` sources.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

use super::{fixed_schema, forbid_path, ALL_MODES};
use crate::connector::{
    Connector, ConnectorRegistration, DeclaredRead, RealTime, SinkConnector, SourceConnector,
    SourceRequest,
};
use crate::engine::sink::{Sink, SinkContext};
use crate::engine::sinks::{ConsoleSink, ForeachBatchSink, MemorySink};
use crate::engine::source::Source;
use crate::engine::sources::{MemorySource, RateSource, SocketSource};
use crate::error::{Error, PlanError, Result};
use crate::formats::OutputMode;
use crate::options::{OptionDecl, OptionKind::*, OptionSet, Options};
use crate::plan::ddl::SESSION_TIME_ZONE;

/// The console sink's help for a bad `numRows`.
pub(crate) const NUM_ROWS_HELP: &str =
    "set `numRows` to how many rows to print per batch (default 20)";

static CONSOLE_OPTIONS: OptionSet = OptionSet::new(&[
    OptionDecl::new("numRows", Count, "rows printed per batch").default_value("20"),
    OptionDecl::new("truncate", Bool, "cut values longer than 20 characters").default_value("true"),
]);

static MEMORY_SINK_OPTIONS: OptionSet = OptionSet::new(&[OptionDecl::new(
    "queryName",
    Text,
    "the in-memory table's name; default: the sink's name",
)]);

static NO_OPTIONS: OptionSet = OptionSet::new(&[]);

static RATE_OPTIONS: OptionSet = OptionSet::new(&[
    OptionDecl::new("rowsPerSecond", Positive, "rows generated per second").default_value("1"),
    OptionDecl::new(
        "rampUpTime",
        Duration,
        "time to ramp up to `rowsPerSecond` (`5s`)",
    )
    .default_value("0s"),
    OptionDecl::new(
        "numPartitions",
        Positive,
        "partitions of the generated rows",
    )
    .default_value("1"),
]);

static SOCKET_OPTIONS: OptionSet = OptionSet::new(&[
    OptionDecl::new("host", Text, "the host to connect to").required(),
    OptionDecl::new("port", Positive, "the port to connect to").required(),
]);

static MEMORY_SOURCE_OPTIONS: OptionSet = OptionSet::new(&[OptionDecl::new(
    "name",
    Text,
    "the in-memory stream's name (or `load(name)`)",
)
.aliases(&["queryName"])]);

/// The console sink: prints each batch like Spark's.
pub struct ConsoleConnector;
/// The memory source and sink: named in-memory streams and tables.
pub struct MemoryConnector;
/// The foreach-batch sink: a Rust closure per batch.
pub struct ForeachBatchConnector;
/// The rate source: generated rows.
pub struct RateConnector;
/// The socket source: lines read from a TCP connection.
pub struct SocketConnector;

/// The registered console connector.
pub static CONSOLE: ConsoleConnector = ConsoleConnector;
/// The registered memory connector.
pub static MEMORY: MemoryConnector = MemoryConnector;
/// The registered foreach-batch connector.
pub static FOREACH_BATCH: ForeachBatchConnector = ForeachBatchConnector;
/// The registered rate connector.
pub static RATE: RateConnector = RateConnector;
/// The registered socket connector.
pub static SOCKET: SocketConnector = SocketConnector;

inventory::submit! { ConnectorRegistration(&CONSOLE) }
inventory::submit! { ConnectorRegistration(&MEMORY) }
inventory::submit! { ConnectorRegistration(&FOREACH_BATCH) }
inventory::submit! { ConnectorRegistration(&RATE) }
inventory::submit! { ConnectorRegistration(&SOCKET) }

impl Connector for ConsoleConnector {
    fn name(&self) -> &'static str {
        "console"
    }
    fn sink(&self) -> Option<&dyn SinkConnector> {
        Some(self)
    }
}

impl SinkConnector for ConsoleConnector {
    fn rank(&self) -> u16 {
        5
    }
    fn options(&self) -> &'static OptionSet {
        &CONSOLE_OPTIONS
    }
    fn accepted_modes(&self, _merge_keys: bool) -> &'static [OutputMode] {
        ALL_MODES
    }
    fn real_time(&self) -> RealTime {
        RealTime::Supported { rank: 2 }
    }
    fn check_options(&self, options: &Options) -> Result<()> {
        options.count_with_help("numRows", Some(NUM_ROWS_HELP))?;
        options.bool("truncate", true)?;
        Ok(())
    }
    fn open(&self, ctx: &SinkContext) -> Result<Box<dyn Sink>> {
        Ok(Box::new(ConsoleSink::open(ctx)?))
    }
}

impl Connector for MemoryConnector {
    fn name(&self) -> &'static str {
        "memory"
    }
    fn source(&self) -> Option<&dyn SourceConnector> {
        Some(self)
    }
    fn sink(&self) -> Option<&dyn SinkConnector> {
        Some(self)
    }
}

impl SourceConnector for MemoryConnector {
    fn rank(&self) -> u16 {
        6
    }
    fn options(&self) -> &'static OptionSet {
        &MEMORY_SOURCE_OPTIONS
    }
    fn declare(
        &self,
        read: &DeclaredRead<'_>,
    ) -> std::result::Result<Option<SchemaRef>, PlanError> {
        if read.schema.is_none() {
            return Err(PlanError::with_help(
                "memory source needs a schema",
                "declare it with .schema(\"ts TIMESTAMP, value BIGINT\") before loading",
            ));
        }
        Ok(read.schema.clone())
    }
    fn open(&self, request: SourceRequest<'_>) -> Result<Box<dyn Source>> {
        let Some(name) = request.path.map(str::to_string).or_else(|| {
            request
                .options
                .get_any(&["name", "queryName"])
                .map(str::to_string)
        }) else {
            return Err(Error::runtime_with_help(
                format!(
                    "flow `{}`: memory source has no stream name",
                    request.ctx.flow
                ),
                "load it with .load(\"stream_name\") or .option(\"name\", \"stream_name\")",
            ));
        };
        Ok(Box::new(MemorySource::open(
            &name,
            request.schema,
            request.ctx,
        )?))
    }
}

impl SinkConnector for MemoryConnector {
    fn rank(&self) -> u16 {
        6
    }
    fn options(&self) -> &'static OptionSet {
        &MEMORY_SINK_OPTIONS
    }
    fn accepted_modes(&self, _merge_keys: bool) -> &'static [OutputMode] {
        ALL_MODES
    }
    fn real_time(&self) -> RealTime {
        RealTime::Supported { rank: 1 }
    }
    fn open(&self, ctx: &SinkContext) -> Result<Box<dyn Sink>> {
        Ok(Box::new(MemorySink::open(ctx)?))
    }
}

impl Connector for ForeachBatchConnector {
    fn name(&self) -> &'static str {
        crate::engine::sinks::foreach_batch::FOREACH_BATCH_FORMAT
    }
    fn aliases(&self) -> &'static [&'static str] {
        &["foreachbatch", "foreach-batch"]
    }
    fn sink(&self) -> Option<&dyn SinkConnector> {
        Some(self)
    }
}

impl SinkConnector for ForeachBatchConnector {
    fn rank(&self) -> u16 {
        7
    }
    fn options(&self) -> &'static OptionSet {
        &NO_OPTIONS
    }
    fn accepted_modes(&self, _merge_keys: bool) -> &'static [OutputMode] {
        ALL_MODES
    }
    fn real_time(&self) -> RealTime {
        RealTime::Refused(
            "a foreach_batch callback is called once per micro-batch with its batch id, which a real-time epoch does not have",
        )
    }
    fn open(&self, ctx: &SinkContext) -> Result<Box<dyn Sink>> {
        Ok(Box::new(ForeachBatchSink::open(ctx, None)?))
    }
}

/// The rate source's fixed schema: `timestamp TIMESTAMP, value BIGINT`.
pub(crate) fn rate_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(
            "timestamp",
            DataType::Timestamp(TimeUnit::Microsecond, Some(SESSION_TIME_ZONE.into())),
            true,
        ),
        Field::new("value", DataType::Int64, true),
    ]))
}

impl Connector for RateConnector {
    fn name(&self) -> &'static str {
        "rate"
    }
    fn source(&self) -> Option<&dyn SourceConnector> {
        Some(self)
    }
}

impl SourceConnector for RateConnector {
    fn rank(&self) -> u16 {
        4
    }
    fn options(&self) -> &'static OptionSet {
        &RATE_OPTIONS
    }
    fn declare(
        &self,
        read: &DeclaredRead<'_>,
    ) -> std::result::Result<Option<SchemaRef>, PlanError> {
        forbid_path(read)?;
        let schema = fixed_schema(read, rate_schema())?;
        for k in ["rowsPerSecond", "rampUpTime", "numPartitions"] {
            if let Some(v) = read.option(k) {
                let ok = if k == "rampUpTime" {
                    crate::duration::parse_interval(v).is_ok()
                        || v.trim().trim_end_matches('s').parse::<u64>().is_ok()
                } else {
                    v.trim().parse::<u64>().is_ok_and(|n| n > 0)
                };
                if !ok {
                    return Err(PlanError::with_help(
                        format!("rate source option `{k}` has an invalid value `{v}`"),
                        if k == "rampUpTime" {
                            "use a duration such as \"5s\""
                        } else {
                            "use a positive whole number"
                        },
                    ));
                }
            }
        }
        Ok(schema)
    }
    fn check_options(&self, options: &Options) -> Result<()> {
        options.positive("rowsPerSecond")?;
        options.positive("numPartitions")?;
        Ok(())
    }
    fn open(&self, request: SourceRequest<'_>) -> Result<Box<dyn Source>> {
        Ok(Box::new(RateSource::open(
            request.schema,
            request.options,
            request.ctx,
        )?))
    }
}

impl Connector for SocketConnector {
    fn name(&self) -> &'static str {
        "socket"
    }
    fn source(&self) -> Option<&dyn SourceConnector> {
        Some(self)
    }
}

impl SourceConnector for SocketConnector {
    fn rank(&self) -> u16 {
        5
    }
    fn options(&self) -> &'static OptionSet {
        &SOCKET_OPTIONS
    }
    fn declare(
        &self,
        read: &DeclaredRead<'_>,
    ) -> std::result::Result<Option<SchemaRef>, PlanError> {
        forbid_path(read)?;
        let schema = fixed_schema(read, crate::engine::connectors::files::text_schema())?;
        for k in ["host", "port"] {
            if read.option(k).is_none() {
                return Err(PlanError::with_help(
                    format!("socket source needs the option `{k}`"),
                    ".option(\"host\", \"localhost\").option(\"port\", 9999)",
                ));
            }
        }
        if let Some(p) = read.option("port") {
            if p.trim().parse::<u16>().is_err() {
                return Err(PlanError::with_help(
                    format!("socket source option `port` must be a port number, got `{p}`"),
                    ".option(\"port\", 9999)",
                ));
            }
        }
        Ok(schema)
    }
    fn open(&self, request: SourceRequest<'_>) -> Result<Box<dyn Source>> {
        Ok(Box::new(SocketSource::open(
            request.schema,
            request.options,
            request.ctx,
        )?))
    }
}
