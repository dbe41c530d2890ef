//! The connector registry: every source and sink format is one
//! [`Connector`], registered with one line,
//! `inventory::submit! { ConnectorRegistration(&MY_CONNECTOR) }`.
//!
//! The planner, the graph validation and the runtime ask the registry what
//! a format can do: which options it takes ([`SourceConnector::options`],
//! [`SinkConnector::options`]), what schema a read has, which output modes
//! a sink accepts in micro-batches and in real time, how it opens, and what
//! a full refresh does to a table stored in it. Nothing outside a
//! connector's module matches on format names. `docs/connectors.md` walks
//! through adding one.
//!
//! ```
//! use pipelines_core::connector;
//! let parquet = connector::sink("Parquet").unwrap();
//! assert!(parquet.options().find("compression").is_some());
//! assert_eq!(connector::canonical_name("foreachBatch"), Some("foreach_batch"));
//! assert!(connector::source_names().contains(&"rate"));
//! ```

use std::collections::BTreeMap;

use arrow::datatypes::SchemaRef;

use crate::engine::sink::{Sink, SinkContext};
use crate::engine::source::{Source, SourceContext};
use crate::error::{PlanError, Result};
use crate::formats::OutputMode;
use crate::options::{OptionSet, Options};

/// A source or sink format (or both), registered once.
pub trait Connector: Sync {
    /// The format name users write in `.format(...)` / `format:`, lower-case.
    fn name(&self) -> &'static str;

    /// Other spellings of the name, lower-case (`foreachbatch`).
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }

    /// The name in prose, e.g. `Delta`, `Parquet`, `kafka`.
    fn title(&self) -> &'static str {
        self.name()
    }

    /// The connector's reading side, when it can be read.
    fn source(&self) -> Option<&dyn SourceConnector> {
        None
    }

    /// The connector's writing side, when it can be written.
    fn sink(&self) -> Option<&dyn SinkConnector> {
        None
    }
}

/// One registered connector; submit it with `inventory::submit!`.
pub struct ConnectorRegistration(pub &'static dyn Connector);

inventory::collect!(ConnectorRegistration);

/// A read as declared by `read_stream()` / `read()`: checked when it is
/// loaded, before any data is read.
#[derive(Clone, Debug)]
pub struct DeclaredRead<'a> {
    /// The connector's name.
    pub format: &'static str,
    /// The path given to `load(...)`, if any.
    pub path: Option<&'a str>,
    /// The schema given with `.schema(...)`, if any.
    pub schema: Option<SchemaRef>,
    /// The options as written in code.
    pub options: &'a BTreeMap<String, String>,
    /// True for `read_stream()`, false for `read()`.
    pub streaming: bool,
}

impl DeclaredRead<'_> {
    /// An option as written, by key in any case.
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    }

    /// "json source `data/logs`", for messages.
    pub fn describe(&self) -> String {
        match self.path {
            Some(p) => format!("{} source `{p}`", self.format),
            None => format!("{} source", self.format),
        }
    }
}

/// What a source connector is given to open a source.
#[derive(Debug)]
pub struct SourceRequest<'a> {
    /// The path (files, Delta), stream name (memory), or `None`.
    pub path: Option<&'a str>,
    /// The schema every batch must have (the plan's resolved leaf schema).
    pub schema: SchemaRef,
    /// The options, the spec's overrides merged in.
    pub options: Options,
    /// The flow's context: name, state directory, base directory.
    pub ctx: SourceContext,
    /// False for a batch read (`read()`, `read_table()`).
    pub streaming: bool,
    /// True when reading one of the pipeline's own tables at `path`.
    pub table: bool,
}

/// The reading side of a connector.
pub trait SourceConnector: Sync {
    /// Where the format appears in lists of source formats (ascending).
    fn rank(&self) -> u16;

    /// Every option the source reads.
    fn options(&self) -> &'static OptionSet;

    /// Checks a declared read (path, schema, required options) and returns
    /// its schema: the user's, the format's fixed one, or `None` when it is
    /// to be inferred at resolve time ([`infer_schema`](Self::infer_schema)).
    fn declare(&self, read: &DeclaredRead<'_>)
        -> std::result::Result<Option<SchemaRef>, PlanError>;

    /// The schema of a read declared without one, from the data it reads.
    fn infer_schema(&self, read: &DeclaredRead<'_>) -> std::result::Result<SchemaRef, PlanError> {
        Err(PlanError::new(format!(
            "the schema of the {} is unknown",
            read.describe()
        )))
    }

    /// Parses the options into the source's typed settings, as opening it
    /// would, and reports the first bad value (dry-run calls this with the
    /// spec's overrides merged). Default: nothing to check beyond the names.
    fn check_options(&self, options: &Options) -> Result<()> {
        let _ = options;
        Ok(())
    }

    /// True when a pipeline table stored in this format can be read back
    /// (`read_table` / `read_stream_table`).
    fn reads_tables(&self) -> bool {
        false
    }

    /// Opens the source.
    fn open(&self, request: SourceRequest<'_>) -> Result<Box<dyn Source>>;
}

/// What a sink does with its target when a full refresh or a materialized
/// view's recomputation clears it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reset {
    /// The directory is removed.
    RemoveDirectory,
    /// The table keeps its history: the connector empties it in a new
    /// version ([`SinkConnector::truncate`]), and a recomputed view
    /// replaces its contents in one write.
    Truncate,
}

/// Whether a sink can take a real-time flow's rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RealTime {
    /// It takes rows as they are produced and makes them durable once per
    /// epoch; `rank` orders such sinks in messages.
    Supported {
        /// Position in the list of real-time sinks (ascending).
        rank: u16,
    },
    /// It cannot, for this reason.
    Refused(&'static str),
}

/// What a sink's connector finds about the columns a flow writes to it
/// ([`SinkConnector::check_schema`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ColumnCheck {
    /// Problems, each (message, help): the pipeline does not run.
    pub problems: Vec<(String, String)>,
    /// What could not be checked now and is when the sink opens (a
    /// database that did not answer), each a message: shown, not fatal.
    pub warnings: Vec<String>,
}

impl From<Vec<(String, String)>> for ColumnCheck {
    fn from(problems: Vec<(String, String)>) -> Self {
        ColumnCheck {
            problems,
            warnings: Vec::new(),
        }
    }
}

/// The writing side of a connector.
pub trait SinkConnector: Sync {
    /// Where the format appears in lists of sink formats (ascending).
    fn rank(&self) -> u16;

    /// Every option the sink reads.
    fn options(&self) -> &'static OptionSet;

    /// The output modes the sink accepts in micro-batches; `merge_keys`
    /// tells whether the sink was declared with upsert keys.
    fn accepted_modes(&self, merge_keys: bool) -> &'static [OutputMode];

    /// A help text for a flow whose output mode the sink refuses, when the
    /// connector has a better one than the generic advice.
    fn mode_help(&self, mode: OutputMode) -> Option<&'static str> {
        let _ = mode;
        None
    }

    /// Whether the sink takes rows as they arrive (real-time mode).
    fn real_time(&self) -> RealTime {
        RealTime::Refused("this format cannot take rows as they arrive")
    }

    /// True when the sink can be declared with `merge_keys`.
    fn takes_merge_keys(&self) -> bool {
        false
    }

    /// True when the sink applies keyed changes in one commit per batch
    /// ([`Sink::apply_changes`](crate::engine::sink::Sink::apply_changes)):
    /// the formats an AUTO CDC flow may target.
    fn applies_changes(&self) -> bool {
        false
    }

    /// True when pipeline tables may be stored in this format.
    fn stores_tables(&self) -> bool {
        false
    }

    /// True when the sink writes to object storage (`s3://` paths) as well
    /// as to local directories.
    fn writes_object_storage(&self) -> bool {
        false
    }

    /// How strongly this format claims to be the default storage of
    /// tables declared without `format:`: of the table formats linked in,
    /// the one with the highest preference is the default (Delta over
    /// Parquet). 0: never the default.
    fn default_table_preference(&self) -> u8 {
        0
    }

    /// What clearing a table stored in this format means.
    fn reset(&self) -> Reset {
        Reset::RemoveDirectory
    }

    /// The option that makes the sink replace its table's contents with
    /// each batch, set by the runtime when it recomputes a materialized
    /// view stored in this format ([`Reset::Truncate`] formats only).
    fn replace_option(&self) -> Option<&'static str> {
        None
    }

    /// Empties the table at `path` in a new version, returning false when
    /// there is no table there yet (then the directory is removed).
    fn truncate(
        &self,
        path: &crate::engine::storage::Location,
        schema: Option<SchemaRef>,
        partition_cols: &[String],
    ) -> Result<bool> {
        let _ = (path, schema, partition_cols);
        Ok(false)
    }

    /// What the columns a flow writes (`schema`) are for this sink:
    /// problems, and what could not be checked now. Default: any columns
    /// are fine.
    fn check_schema(&self, schema: &SchemaRef, options: &BTreeMap<String, String>) -> ColumnCheck {
        let _ = (schema, options);
        ColumnCheck::default()
    }

    /// Parses the options into the sink's typed settings, as opening it
    /// would, and reports the first bad value. Default: nothing to check.
    fn check_options(&self, options: &Options) -> Result<()> {
        let _ = options;
        Ok(())
    }

    /// Opens the sink.
    fn open(&self, ctx: &SinkContext) -> Result<Box<dyn Sink>>;
}

/// Every registered connector.
pub fn all() -> impl Iterator<Item = &'static dyn Connector> {
    inventory::iter::<ConnectorRegistration>
        .into_iter()
        .map(|r| r.0)
}

/// The connector of `format` (any case, or an alias).
pub fn find(format: &str) -> Option<&'static dyn Connector> {
    let lower = format.trim().to_ascii_lowercase();
    all().find(|c| c.name() == lower || c.aliases().contains(&lower.as_str()))
}

/// The canonical name of `format`, when a connector has it.
pub fn canonical_name(format: &str) -> Option<&'static str> {
    find(format).map(|c| c.name())
}

/// `format` as written, normalised: the connector's canonical name when
/// one has it, else trimmed and lower-cased.
pub fn normalize(format: &str) -> String {
    canonical_name(format)
        .map(str::to_string)
        .unwrap_or_else(|| format.trim().to_ascii_lowercase())
}

/// The reading side of `format`.
pub fn source(format: &str) -> Option<&'static dyn SourceConnector> {
    find(format).and_then(|c| c.source())
}

/// The writing side of `format`.
pub fn sink(format: &str) -> Option<&'static dyn SinkConnector> {
    find(format).and_then(|c| c.sink())
}

/// The output modes a sink (or table) of `format` accepts, or `None` for
/// an unknown format; `merge_keys` tells whether it has upsert keys.
pub fn accepted_modes(format: &str, merge_keys: bool) -> Option<&'static [OutputMode]> {
    sink(format).map(|s| s.accepted_modes(merge_keys))
}

/// Why a sink (or table) of `format` cannot take a real-time flow's rows,
/// or `None` when it can.
pub fn real_time_problem(format: &str) -> Option<&'static str> {
    match sink(format).map(|s| s.real_time()) {
        Some(RealTime::Supported { .. }) => None,
        Some(RealTime::Refused(why)) => Some(why),
        None => Some("this format cannot take rows as they arrive"),
    }
}

/// The title of `format` in prose (`Delta`), or the name as written.
pub fn title(format: &str) -> String {
    find(format)
        .map(|c| c.title().to_string())
        .unwrap_or_else(|| format.to_string())
}

/// The readable formats, in documentation order.
pub fn source_names() -> Vec<&'static str> {
    let mut v: Vec<(u16, &'static str)> = all()
        .filter_map(|c| c.source().map(|s| (s.rank(), c.name())))
        .collect();
    v.sort();
    v.into_iter().map(|(_, n)| n).collect()
}

/// The writable formats, in documentation order.
pub fn sink_names() -> Vec<&'static str> {
    let mut v: Vec<(u16, &'static str)> = all()
        .filter_map(|c| c.sink().map(|s| (s.rank(), c.name())))
        .collect();
    v.sort();
    v.into_iter().map(|(_, n)| n).collect()
}

/// The formats a table may be stored in: the default table format first,
/// then the others in sink order.
pub fn table_names() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = sink_names()
        .into_iter()
        .filter(|n| sink(n).is_some_and(|s| s.stores_tables()))
        .collect();
    let default = default_table_format();
    if let Some(i) = v.iter().position(|n| *n == default) {
        let d = v.remove(i);
        v.insert(0, d);
    }
    v
}

/// The storage format of tables and materialized views declared without
/// `format:`: the linked table format with the highest
/// [`SinkConnector::default_table_preference`] — Delta Lake, as in Spark
/// Declarative Pipelines, when the `pipelines-delta` crate is linked, else
/// Parquet (the file sink's `_spark_metadata` layout).
pub fn default_table_format() -> &'static str {
    all()
        .filter_map(|c| {
            let s = c.sink()?;
            (s.stores_tables() && s.default_table_preference() > 0).then(|| {
                (
                    s.default_table_preference(),
                    std::cmp::Reverse(c.name()),
                    c.name(),
                )
            })
        })
        .max()
        .map(|(_, _, name)| name)
        .unwrap_or("parquet")
}

/// The sink formats that take rows as they arrive.
pub fn real_time_sink_names() -> Vec<&'static str> {
    let mut v: Vec<(u16, &'static str)> = all()
        .filter_map(|c| match c.sink()?.real_time() {
            RealTime::Supported { rank } => Some((rank, c.name())),
            RealTime::Refused(_) => None,
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, n)| n).collect()
}

/// The sink formats that accept complete output mode: sinks first, then
/// the formats that also store tables, each group in sink order.
pub fn complete_mode_sink_names() -> Vec<&'static str> {
    let mut v: Vec<(bool, u16, &'static str)> = all()
        .filter_map(|c| {
            let s = c.sink()?;
            s.accepted_modes(false)
                .contains(&OutputMode::Complete)
                .then(|| (s.stores_tables(), s.rank(), c.name()))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, _, n)| n).collect()
}

/// The option tables of every connector, the flow settings and the
/// pipeline settings, as Markdown: the generated part of
/// `docs/connectors.md` (a test fails when that file is stale).
pub fn options_reference() -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "### Settings of a flow\n");
    let _ = writeln!(
        out,
        "In a flow's `conf(...)` or the spec's `flows.<name>.options`, beside its sources' options.\n"
    );
    out.push_str(&crate::conf::FLOW_SETTINGS.markdown());
    let _ = writeln!(out, "\n### Settings of the pipeline\n");
    let _ = writeln!(out, "Under the spec's `configuration:`.\n");
    out.push_str(&crate::conf::PIPELINE_SETTINGS.markdown());
    let _ = writeln!(out, "\n### Every sink\n");
    out.push_str(&crate::conf::SINK_SETTINGS.markdown());
    for name in source_names() {
        if let Some(s) = source(name) {
            let _ = writeln!(out, "\n### `{name}` source\n");
            out.push_str(&s.options().markdown());
        }
    }
    for name in sink_names() {
        if let Some(s) = sink(name) {
            let modes = crate::formats::describe_modes(s.accepted_modes(false));
            let upsert = if s.takes_merge_keys() {
                format!(
                    "; with `merge_keys`: {}",
                    crate::formats::describe_modes(s.accepted_modes(true))
                )
            } else {
                String::new()
            };
            let real_time = match s.real_time() {
                RealTime::Supported { .. } => "yes".to_string(),
                RealTime::Refused(_) => "no".to_string(),
            };
            let _ = writeln!(out, "\n### `{name}` sink\n");
            let _ = writeln!(
                out,
                "Output modes: {modes}{upsert}. Real time: {real_time}. Table storage: {}.{}\n",
                if s.stores_tables() { "yes" } else { "no" },
                if s.applies_changes() {
                    " AUTO CDC target: yes (keyed changes in one commit)."
                } else {
                    ""
                }
            );
            out.push_str(&s.options().markdown());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without the Delta and Kafka crates linked (this crate's unit tests),
    /// the registry holds the built-in formats and tables default to Parquet.
    #[test]
    fn built_in_formats_without_connector_crates() {
        assert_eq!(
            source_names(),
            ["json", "csv", "parquet", "text", "rate", "socket", "memory"]
        );
        assert_eq!(
            sink_names(),
            [
                "parquet",
                "json",
                "csv",
                "console",
                "memory",
                "foreach_batch"
            ]
        );
        assert_eq!(default_table_format(), "parquet");
        assert_eq!(table_names(), ["parquet", "json", "csv"]);
        assert!(find("delta").is_none());
    }
}
