//! The Delta Lake connector: the Delta source ([`DeltaSource`], a table read
//! version by version) and the Delta sink ([`DeltaSink`]: append, complete,
//! or MERGE on `merge_keys`, exactly once through application
//! transactions). The default storage of pipeline tables.

use std::path::Path;

use arrow::datatypes::SchemaRef;

use crate::sink::DeltaSink;
use crate::sink::OVERWRITE_OPTION;
use crate::source::DeltaSource;
use crate::source::DeltaSourceOptions;
use pipelines_core::connector::{
    Connector, ConnectorRegistration, DeclaredRead, RealTime, Reset, SinkConnector,
    SourceConnector, SourceRequest,
};
use pipelines_core::engine::connectors::files::infer_file_schema;
use pipelines_core::engine::connectors::{request_path, require_path, ALL_MODES, APPEND_COMPLETE};
use pipelines_core::engine::sink::{Sink, SinkContext};
use pipelines_core::engine::source::Source;
use pipelines_core::engine::sources::FileFormat;
use pipelines_core::engine::storage::Location;
use pipelines_core::error::{PlanError, Result};
use pipelines_core::formats::OutputMode;
use pipelines_core::options::{OptionDecl, OptionKind::*, OptionSet, Options};

static SOURCE_OPTIONS: OptionSet = OptionSet::new(&[
    OptionDecl::new("path", Text, "the table's directory"),
    OptionDecl::new(
        "startingVersion",
        Text,
        "start at this table version (`0`, `1`, ...) or `latest`; default: the current snapshot, then every later commit",
    ),
    OptionDecl::new(
        "startingTimestamp",
        Text,
        "not supported: use `startingVersion`",
    ),
    OptionDecl::new(
        "maxFilesPerTrigger",
        Positive,
        "at most this many data files per micro-batch",
    )
    .default_value("1000"),
    OptionDecl::new(
        "maxBytesPerTrigger",
        Bytes,
        "at most this many bytes of data files per micro-batch (at least one file)",
    ),
    OptionDecl::new(
        "ignoreDeletes",
        Bool,
        "skip commits that only remove files (whole partitions deleted)",
    )
    .default_value("false"),
    OptionDecl::new(
        "ignoreChanges",
        Bool,
        "re-read the rewritten files of commits that change rows (may repeat rows)",
    )
    .default_value("false"),
    OptionDecl::new(
        "skipChangeCommits",
        Bool,
        "skip commits that change or delete rows",
    )
    .default_value("false"),
]);

static SINK_OPTIONS: OptionSet = OptionSet::new(&[
    OptionDecl::new("path", Text, "the table's directory (created when missing)").required(),
    OptionDecl::new(
        "mergeSchema",
        Bool,
        "add the flow's new columns to the table's schema",
    )
    .default_value("false"),
    OptionDecl::new(
        OVERWRITE_OPTION,
        Bool,
        "replace the table's contents with each batch (set for materialized views)",
    )
    .default_value("false"),
]);

/// The Delta connector.
pub struct DeltaConnector;

/// The registered instance.
pub static DELTA: DeltaConnector = DeltaConnector;

inventory::submit! { ConnectorRegistration(&DELTA) }

impl Connector for DeltaConnector {
    fn name(&self) -> &'static str {
        "delta"
    }

    fn title(&self) -> &'static str {
        "Delta"
    }

    fn source(&self) -> Option<&dyn SourceConnector> {
        Some(self)
    }

    fn sink(&self) -> Option<&dyn SinkConnector> {
        Some(self)
    }
}

impl SourceConnector for DeltaConnector {
    fn rank(&self) -> u16 {
        8
    }

    fn options(&self) -> &'static OptionSet {
        &SOURCE_OPTIONS
    }

    fn declare(
        &self,
        read: &DeclaredRead<'_>,
    ) -> std::result::Result<Option<SchemaRef>, PlanError> {
        require_path(read)?;
        Ok(read.schema.clone())
    }

    fn infer_schema(&self, read: &DeclaredRead<'_>) -> std::result::Result<SchemaRef, PlanError> {
        let path = Location::parse(read.path.unwrap_or_default(), Path::new(""));
        if let Some(path) = path.ok().filter(|p| crate::table::is_delta_table(p)) {
            // The table's schema from its log (with partition columns and
            // columns added later), not from one of its files.
            return crate::table::table_schema(&path).map_err(|e| {
                PlanError::with_help(
                    format!("cannot read the schema of the {}: {e}", read.describe()),
                    "check the path points at a Delta table (a directory with `_delta_log`)",
                )
            });
        }
        infer_file_schema(FileFormat::Parquet, read)
    }

    fn check_options(&self, options: &Options) -> Result<()> {
        DeltaSourceOptions::parse(options).map(|_| ())
    }

    fn reads_tables(&self) -> bool {
        true
    }

    fn open(&self, request: SourceRequest<'_>) -> Result<Box<dyn Source>> {
        let path = request_path(&request, "delta", "load it with .load(\"path/to/table\")")?;
        Ok(Box::new(DeltaSource::open(
            &path,
            request.schema,
            request.options,
            request.ctx,
            !request.streaming,
        )?))
    }
}

impl SinkConnector for DeltaConnector {
    fn rank(&self) -> u16 {
        3
    }

    fn options(&self) -> &'static OptionSet {
        &SINK_OPTIONS
    }

    fn accepted_modes(&self, merge_keys: bool) -> &'static [OutputMode] {
        if merge_keys {
            ALL_MODES
        } else {
            APPEND_COMPLETE
        }
    }

    fn mode_help(&self, mode: OutputMode) -> Option<&'static str> {
        (mode == OutputMode::Update).then_some(
            "Delta tables take append and complete; declare `merge_keys` on the sink, or use foreach_batch with a MERGE",
        )
    }

    fn real_time(&self) -> RealTime {
        RealTime::Refused(
            "a Delta table commits a version once per micro-batch, so rows could not reach it as they arrive",
        )
    }

    fn takes_merge_keys(&self) -> bool {
        true
    }

    fn applies_changes(&self) -> bool {
        true
    }

    fn stores_tables(&self) -> bool {
        true
    }

    fn default_table_preference(&self) -> u8 {
        // The default table format, as in Spark Declarative Pipelines.
        2
    }

    fn reset(&self) -> Reset {
        Reset::Truncate
    }

    fn replace_option(&self) -> Option<&'static str> {
        Some(OVERWRITE_OPTION)
    }

    fn truncate(
        &self,
        path: &Location,
        schema: Option<SchemaRef>,
        partition_cols: &[String],
    ) -> Result<bool> {
        crate::table::truncate(path, schema, partition_cols)
    }

    fn check_options(&self, options: &Options) -> Result<()> {
        options.bool("mergeSchema", false)?;
        options.bool(OVERWRITE_OPTION, false)?;
        Ok(())
    }

    fn writes_object_storage(&self) -> bool {
        true
    }

    fn open(&self, ctx: &SinkContext) -> Result<Box<dyn Sink>> {
        Ok(Box::new(DeltaSink::open(ctx)?))
    }
}
