//! The settings the engine reads, declared once: per flow (a flow's
//! `conf(...)` and the spec's `flows.<name>.options`) and per pipeline (the
//! spec's `configuration:`).
//!
//! Keys under `pipelines.` are the framework's own: an undeclared one is a
//! dry-run error with a did-you-mean. Keys under `spark.` that the engine
//! does not read are accepted and ignored, as Spark ignores settings it
//! does not know; other keys in `configuration:` are the pipeline's own
//! parameters, read by flows with `Session::conf`.

use crate::options::{OptionDecl, OptionKind, OptionSet};

/// The per-flow key choosing the output mode (`append`, `update` or `complete`).
pub const OUTPUT_MODE_CONF_KEY: &str = "pipelines.outputMode";
/// The per-flow key choosing the trigger (`ProcessingTime`, `AvailableNow`, `Once`, `RealTime`).
pub const TRIGGER_CONF_KEY: &str = "pipelines.trigger";
/// The per-flow key giving the trigger's interval (`5 minutes`).
pub const TRIGGER_INTERVAL_CONF_KEY: &str = "pipelines.trigger.interval";
/// The per-flow key naming the sink or table that receives the rows
/// stateful operators drop as late.
pub const LATE_ROWS_TO: &str = "pipelines.lateRowsTo";
/// The per-flow key placing the flow's checkpoint somewhere else than
/// `<storage>/checkpoints/<flow>`.
pub const CHECKPOINT_LOCATION: &str = "checkpointLocation";
/// The setting choosing how many hash partitions hold aggregation state.
pub const SHUFFLE_PARTITIONS: &str = "spark.sql.shuffle.partitions";
/// The setting choosing how several watermarks combine.
pub const MULTIPLE_WATERMARK_POLICY: &str = "spark.sql.streaming.multipleWatermarkPolicy";
/// The setting that makes file sources skip files they cannot decode
/// (Spark's SQL conf; a source's own `ignoreCorruptFiles` option wins).
pub const IGNORE_CORRUPT_FILES: &str = "spark.sql.files.ignoreCorruptFiles";
/// The pipeline setting that makes every checkpoint, log and output file
/// durable against power loss (fsync before the next protocol step).
pub const FSYNC_CONF_KEY: &str = "pipelines.checkpoint.fsync";

/// How long (seconds of processing time) an AUTO CDC flow of SCD type 1
/// remembers a deleted key, so that a late, older upsert does not bring it
/// back (Lakeflow's name and default).
pub const TOMBSTONE_GC_THRESHOLD: &str = "pipelines.cdc.tombstoneGCThresholdInSeconds";
/// The default of [`TOMBSTONE_GC_THRESHOLD`]: 2 days.
pub const DEFAULT_TOMBSTONE_GC_SECONDS: u64 = 172_800;

/// Where the event log table goes (default `<storage>/system/event_log`;
/// a relative path is relative to the spec's directory).
pub const EVENT_LOG_PATH: &str = "pipelines.eventLog.path";

/// The framework's own key prefix.
pub const PIPELINES_PREFIX: &str = "pipelines.";
/// Spark's key prefix.
pub const SPARK_PREFIX: &str = "spark.";

const OUTPUT_MODE: OptionDecl = OptionDecl::new(
    OUTPUT_MODE_CONF_KEY,
    OptionKind::Choice(&["append", "update", "complete"]),
    "the flow's output mode; default: update for update flows, append for the others",
);
const TRIGGER: OptionDecl = OptionDecl::new(
    TRIGGER_CONF_KEY,
    OptionKind::Choice(&["ProcessingTime", "AvailableNow", "Once", "RealTime"]),
    "the flow's trigger, as the spec's `trigger:` sets it",
);
const TRIGGER_INTERVAL: OptionDecl = OptionDecl::new(
    TRIGGER_INTERVAL_CONF_KEY,
    OptionKind::Duration,
    "the interval of a `ProcessingTime` trigger, the checkpoint interval of a `RealTime` one",
);
const LATE_ROWS: OptionDecl = OptionDecl::new(
    LATE_ROWS_TO,
    OptionKind::Text,
    "a sink or table receiving the rows a stateful operator drops as late",
);
const CHECKPOINT: OptionDecl = OptionDecl::new(
    CHECKPOINT_LOCATION,
    OptionKind::Text,
    "the flow's checkpoint directory: a path or `s3://bucket/prefix`",
)
.default_value("<storage>/checkpoints/<flow>");
const PARTITIONS: OptionDecl = OptionDecl::new(
    SHUFFLE_PARTITIONS,
    OptionKind::Positive,
    "hash partitions of aggregation state, 1 to 1024; default: twice the cores, at most 16",
);
const WATERMARK_POLICY: OptionDecl = OptionDecl::new(
    MULTIPLE_WATERMARK_POLICY,
    OptionKind::Choice(&["min", "max"]),
    "how the watermarks of several inputs combine",
)
.default_value("min");
const FSYNC: OptionDecl = OptionDecl::new(
    FSYNC_CONF_KEY,
    OptionKind::Bool,
    "fsync checkpoint files, source logs and file-sink output before each protocol step (not Delta commits)",
)
.default_value("false");

const EVENT_LOG: OptionDecl = OptionDecl::new(
    EVENT_LOG_PATH,
    OptionKind::Text,
    "where the event log table is written (default `<storage>/system/event_log`)",
);

const CORRUPT_FILES: OptionDecl = OptionDecl::new(
    IGNORE_CORRUPT_FILES,
    OptionKind::Bool,
    "file sources skip files they cannot decode and count them in the progress, unless a source sets `ignoreCorruptFiles` itself",
)
.default_value("false");

const TOMBSTONE_GC: OptionDecl = OptionDecl::new(
    TOMBSTONE_GC_THRESHOLD,
    OptionKind::Count,
    "AUTO CDC, SCD type 1: seconds a deleted key is remembered, so that a late older upsert does not bring it back",
)
.default_value("172800");

/// What a flow's `conf(...)` and the spec's `flows.<name>.options` may set,
/// besides its sources' options.
pub static FLOW_SETTINGS: OptionSet = OptionSet::new(&[
    OUTPUT_MODE,
    TRIGGER,
    TRIGGER_INTERVAL,
    LATE_ROWS,
    CHECKPOINT,
    PARTITIONS,
    WATERMARK_POLICY,
    CORRUPT_FILES,
    TOMBSTONE_GC,
]);

/// What every sink takes besides its connector's options.
pub static SINK_SETTINGS: OptionSet = OptionSet::new(&[OptionDecl::new(
    "queryName",
    OptionKind::Text,
    "the query's name (the memory sink's table name); default: the sink's name",
)]);

/// What the spec's `configuration:` may set for the whole pipeline (besides
/// the pipeline's own parameters).
pub static PIPELINE_SETTINGS: OptionSet = OptionSet::new(&[
    FSYNC,
    PARTITIONS,
    WATERMARK_POLICY,
    CORRUPT_FILES,
    TOMBSTONE_GC,
    EVENT_LOG,
]);

/// True for a key in the framework's own namespace (`pipelines.`, any case).
pub fn is_framework_key(key: &str) -> bool {
    key.len() >= PIPELINES_PREFIX.len()
        && key[..PIPELINES_PREFIX.len()].eq_ignore_ascii_case(PIPELINES_PREFIX)
}

/// True for a key in Spark's namespace (`spark.`, any case).
pub fn is_spark_key(key: &str) -> bool {
    key.len() >= SPARK_PREFIX.len() && key[..SPARK_PREFIX.len()].eq_ignore_ascii_case(SPARK_PREFIX)
}
