//! Declarations registered by the attribute macros through `inventory`.
//!
//! `#[append_flow]`, `#[update_flow]`, `#[table]`, `#[materialized_view]` and
//! `#[temporary_view]` each submit one static declaration; [`flows`] and
//! [`datasets`] collect every declaration linked into the binary.

use crate::error::{Origin, Result};
pub use crate::expectations::{ExpectationAction, ExpectationDecl};
use crate::plan::DataFrame;
use crate::session::Session;

/// The signature of every flow or dataset query function.
pub type QueryFn = fn(&Session) -> Result<DataFrame>;

/// Where a macro was applied in Rust source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceLocation {
    /// File as given by `file!()`.
    pub file: &'static str,
    /// 1-based line.
    pub line: u32,
}

impl SourceLocation {
    /// As an [`Origin`] for diagnostics.
    pub fn origin(&self) -> Origin {
        Origin::Code {
            file: self.file.to_string(),
            line: self.line,
        }
    }
}

/// The output mode a flow writes with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FlowKind {
    /// `#[append_flow]` and the flows of `#[table]`: new rows only (append
    /// output mode), or complete mode for batch flows of materialized views.
    Append,
    /// `#[update_flow]`: update output mode, only into sinks.
    Update,
}

/// A flow declared with `#[append_flow]` or `#[update_flow]`.
#[derive(Debug)]
pub struct FlowDecl {
    /// Append or update.
    pub kind: FlowKind,
    /// Flow name (defaults to the function name).
    pub name: &'static str,
    /// Dataset or sink the flow writes to.
    pub target: &'static str,
    /// `once = true`: a batch query run a single time (append flows only).
    pub once: bool,
    /// Free text description.
    pub comment: Option<&'static str>,
    /// `conf(...)`: per-flow settings overriding the pipeline's (Spark's `spark_conf`).
    pub conf: &'static [(&'static str, &'static str)],
    /// `import_checkpoint = "..."` (update flows): a checkpoint copied in once.
    pub import_checkpoint: Option<&'static str>,
    /// `#[expect(..)]` and its siblings stacked on the function.
    pub expectations: &'static [ExpectationDecl],
    /// `quarantine = "..."`: where rows failing a drop-expectation go.
    pub quarantine: Option<&'static str>,
    /// The query function.
    pub query: QueryFn,
    /// Where the macro was applied.
    pub location: SourceLocation,
}

inventory::collect!(FlowDecl);

/// The kind of a dataset declared in code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DatasetKind {
    /// A streaming table: appended to by streaming flows.
    StreamingTable,
    /// A materialized view: recomputed by exactly one batch flow.
    MaterializedView,
    /// A temporary view: a named query, not persisted.
    TemporaryView,
}

impl DatasetKind {
    /// Human name, e.g. "streaming table".
    pub fn describe(&self) -> &'static str {
        match self {
            DatasetKind::StreamingTable => "streaming table",
            DatasetKind::MaterializedView => "materialized view",
            DatasetKind::TemporaryView => "temporary view",
        }
    }
}

/// A dataset declared with `#[table]`, `#[materialized_view]` or
/// `#[temporary_view]`: the dataset plus a flow of the same name.
#[derive(Debug)]
pub struct DatasetDecl {
    /// Streaming table, materialized view or temporary view.
    pub kind: DatasetKind,
    /// Dataset name (defaults to the function name).
    pub name: &'static str,
    /// Free text description.
    pub comment: Option<&'static str>,
    /// Storage format (e.g. "delta", "parquet").
    pub format: Option<&'static str>,
    /// Explicit storage path.
    pub path: Option<&'static str>,
    /// Partition columns.
    pub partition_cols: &'static [&'static str],
    /// Declared schema as a DDL string (`"ts TIMESTAMP, id STRING"`).
    pub schema: Option<&'static str>,
    /// `#[expect(..)]` and its siblings stacked on the function.
    pub expectations: &'static [ExpectationDecl],
    /// `quarantine = "..."`: where rows failing a drop-expectation go.
    pub quarantine: Option<&'static str>,
    /// The query defining the dataset (its flow has the dataset's name).
    pub query: QueryFn,
    /// Where the macro was applied.
    pub location: SourceLocation,
}

inventory::collect!(DatasetDecl);

/// Every flow declared with a macro in this binary, sorted by name.
pub fn flows() -> Vec<&'static FlowDecl> {
    let mut v: Vec<_> = inventory::iter::<FlowDecl>.into_iter().collect();
    v.sort_by_key(|f| (f.name, f.location.file, f.location.line));
    v
}

/// An AUTO CDC flow declared with `create_auto_cdc_flow!`: the keywords of
/// `pyspark.pipelines.create_auto_cdc_flow`, as written.
#[derive(Debug)]
pub struct AutoCdcDecl {
    /// The streaming table the changes go to.
    pub target: &'static str,
    /// The change feed (a dataset, read as a stream).
    pub source: &'static str,
    /// The flow's name (the target's when not given).
    pub name: Option<&'static str>,
    /// Key columns.
    pub keys: &'static [&'static str],
    /// Sequencing column or expression.
    pub sequence_by: &'static str,
    /// Delete condition.
    pub apply_as_deletes: Option<&'static str>,
    /// Truncate condition (SCD type 1).
    pub apply_as_truncates: Option<&'static str>,
    /// Columns kept.
    pub column_list: Option<&'static [&'static str]>,
    /// Columns left out.
    pub except_column_list: Option<&'static [&'static str]>,
    /// 1 or 2.
    pub stored_as_scd_type: Option<u8>,
    /// SCD type 2: columns whose changes are history.
    pub track_history_column_list: Option<&'static [&'static str]>,
    /// SCD type 2: columns whose changes are not history.
    pub track_history_except_column_list: Option<&'static [&'static str]>,
    /// Per-flow settings.
    pub conf: &'static [(&'static str, &'static str)],
    /// Free text description.
    pub comment: Option<&'static str>,
    /// Where the macro was called.
    pub location: SourceLocation,
}

inventory::collect!(AutoCdcDecl);

/// Every AUTO CDC flow declared with a macro in this binary, sorted by target.
pub fn auto_cdc_flows() -> Vec<&'static AutoCdcDecl> {
    let mut v: Vec<_> = inventory::iter::<AutoCdcDecl>.into_iter().collect();
    v.sort_by_key(|f| (f.target, f.location.file, f.location.line));
    v
}

/// Every dataset declared with a macro in this binary, sorted by name.
pub fn datasets() -> Vec<&'static DatasetDecl> {
    let mut v: Vec<_> = inventory::iter::<DatasetDecl>.into_iter().collect();
    v.sort_by_key(|d| (d.name, d.location.file, d.location.line));
    v
}
