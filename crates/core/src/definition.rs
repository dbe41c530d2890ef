//! Owned declarations of a pipeline's datasets, sinks and flows, whichever
//! way they were declared: attribute macros, builder calls in `main`, or the
//! YAML spec. The graph builder works only on these.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::cdc::{AutoCdc, DELETE_COLUMN, SEQUENCE_COLUMN, TRUNCATE_COLUMN};
use crate::error::{Origin, Result};
use crate::expectations::{Expectation, ExpectationDecl};
use crate::plan::DataFrame;
use crate::registry::{DatasetDecl, DatasetKind, FlowDecl, FlowKind};
use crate::session::Session;
use crate::spec::Trigger;

/// The boxed form of a query function.
type QueryClosure = dyn Fn(&Session) -> Result<DataFrame> + Send + Sync;

/// A flow's query function, however it was declared.
#[derive(Clone)]
pub struct Query(Arc<QueryClosure>);

impl Query {
    /// Wraps a closure or function.
    pub fn new(f: impl Fn(&Session) -> Result<DataFrame> + Send + Sync + 'static) -> Self {
        Query(Arc::new(f))
    }

    /// Calls the query function to build the flow's plan.
    pub fn build(&self, session: &Session) -> Result<DataFrame> {
        (self.0)(session)
    }
}

impl fmt::Debug for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Query(..)")
    }
}

/// What a dataset of the graph is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DatasetType {
    /// A streaming table.
    StreamingTable,
    /// A materialized view.
    MaterializedView,
    /// A temporary view.
    TemporaryView,
    /// An external sink (write-only).
    Sink,
}

impl DatasetType {
    /// Human name, e.g. "streaming table".
    pub fn describe(&self) -> &'static str {
        match self {
            DatasetType::StreamingTable => "streaming table",
            DatasetType::MaterializedView => "materialized view",
            DatasetType::TemporaryView => "temporary view",
            DatasetType::Sink => "sink",
        }
    }
}

impl From<DatasetKind> for DatasetType {
    fn from(k: DatasetKind) -> Self {
        match k {
            DatasetKind::StreamingTable => DatasetType::StreamingTable,
            DatasetKind::MaterializedView => DatasetType::MaterializedView,
            DatasetKind::TemporaryView => DatasetType::TemporaryView,
        }
    }
}

/// A dataset or sink of the pipeline.
#[derive(Clone, Debug, Default)]
pub struct DatasetDef {
    /// Name, unique among datasets and sinks.
    pub name: String,
    /// Table, view or sink.
    pub kind: Option<DatasetType>,
    /// Storage or sink format (`delta`, `parquet`, `kafka`, ...).
    pub format: Option<String>,
    /// Explicit storage path.
    pub path: Option<String>,
    /// Format options (Spark option names).
    pub options: BTreeMap<String, String>,
    /// Partition columns.
    pub partition_cols: Vec<String>,
    /// Declared schema (DDL).
    pub schema: Option<String>,
    /// Merge keys that make a Delta sink an upsert target.
    pub merge_keys: Vec<String>,
    /// Free text description.
    pub comment: Option<String>,
    /// Where it was declared.
    pub origin: Option<Origin>,
    /// Where each of `options` was written in the spec, by option name.
    pub option_origins: BTreeMap<String, Origin>,
    /// Data-quality expectations every flow into it applies to its rows.
    pub expectations: Vec<Expectation>,
    /// The table or sink that receives the rows its drop-expectations
    /// remove (with the names of the expectations they failed).
    pub quarantine: Option<String>,
}

impl DatasetDef {
    /// The dataset's type (streaming table when unset).
    pub fn dataset_type(&self) -> DatasetType {
        self.kind.unwrap_or(DatasetType::StreamingTable)
    }

    /// "streaming table `x`", "sink `y`".
    pub fn subject(&self) -> String {
        format!("{} `{}`", self.dataset_type().describe(), self.name)
    }
}

/// A flow of the pipeline: a query writing into one target.
#[derive(Clone, Debug)]
pub struct FlowDef {
    /// Name, unique among flows.
    pub name: String,
    /// Append (default) or update.
    pub kind: FlowKind,
    /// The dataset or sink written to.
    pub target: String,
    /// Run a batch query a single time.
    pub once: bool,
    /// Free text description.
    pub comment: Option<String>,
    /// Per-flow settings (Spark's `spark_conf`).
    pub conf: BTreeMap<String, String>,
    /// External checkpoint imported once (update flows).
    pub import_checkpoint: Option<String>,
    /// The query function.
    pub query: Query,
    /// Where it was declared.
    pub origin: Option<Origin>,
    /// True for the implicit flow of a `#[table]`/`#[materialized_view]`/`#[temporary_view]`.
    pub defines_dataset: bool,
    /// Expectations of this flow alone, checked after its target's.
    pub expectations: Vec<Expectation>,
    /// Where this flow's dropped rows go, instead of its target's quarantine.
    pub quarantine: Option<String>,
    /// Set for an AUTO CDC flow: the change feed it applies to its target
    /// (its query is [`auto_cdc_query`]).
    pub auto_cdc: Option<AutoCdc>,
}

impl FlowDef {
    /// A new append flow into `target`.
    pub fn append(name: impl Into<String>, target: impl Into<String>, query: Query) -> Self {
        FlowDef {
            name: name.into(),
            kind: FlowKind::Append,
            target: target.into(),
            once: false,
            comment: None,
            conf: BTreeMap::new(),
            import_checkpoint: None,
            query,
            origin: None,
            defines_dataset: false,
            expectations: Vec::new(),
            quarantine: None,
            auto_cdc: None,
        }
    }

    /// The flow of an AUTO CDC declaration, declared at `origin`.
    pub fn auto_cdc(cdc: AutoCdc, origin: Option<Origin>) -> FlowDef {
        let mut f = FlowDef::append(cdc.flow_name(), cdc.target.clone(), auto_cdc_query(&cdc));
        f.conf = cdc.conf.clone();
        f.comment = cdc.comment.clone();
        f.origin = origin;
        f.auto_cdc = Some(cdc);
        f
    }

    /// "flow `x`".
    pub fn subject(&self) -> String {
        format!("flow `{}`", self.name)
    }
}

impl From<&'static FlowDecl> for FlowDef {
    fn from(d: &'static FlowDecl) -> Self {
        FlowDef {
            name: d.name.to_string(),
            kind: d.kind,
            target: d.target.to_string(),
            once: d.once,
            comment: d.comment.map(str::to_string),
            conf: d
                .conf
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            import_checkpoint: d.import_checkpoint.map(str::to_string),
            query: Query::new(d.query),
            origin: Some(d.location.origin()),
            defines_dataset: false,
            expectations: owned_expectations(d.expectations, d.location.file),
            quarantine: d.quarantine.map(str::to_string),
            auto_cdc: None,
        }
    }
}

/// An AUTO CDC flow's query: the feed with its sequence, delete and
/// truncate values as the columns [`SEQUENCE_COLUMN`],
/// [`DELETE_COLUMN`] and
/// [`TRUNCATE_COLUMN`] (a NULL condition is false).
pub fn auto_cdc_query(cdc: &AutoCdc) -> Query {
    let cdc = cdc.clone();
    Query::new(move |s| {
        let feed = if cdc.source_streaming {
            s.read_stream_table(&cdc.source)?
        } else {
            s.read_table(&cdc.source)?
        };
        let sequence = if cdc.sequence_by.trim().is_empty() {
            // Reported by `problems`; a placeholder keeps the plan whole.
            "CAST(NULL AS BIGINT)".to_string()
        } else {
            cdc.sequence_by.clone()
        };
        let flag = |c: &Option<String>| match c {
            Some(c) => format!("coalesce(({c}), false)"),
            None => "false".to_string(),
        };
        feed.with_column(SEQUENCE_COLUMN, crate::plan::ColumnExpr::sql(sequence)?)?
            .with_column(
                DELETE_COLUMN,
                crate::plan::ColumnExpr::sql(flag(&cdc.apply_as_deletes))?,
            )?
            .with_column(
                TRUNCATE_COLUMN,
                crate::plan::ColumnExpr::sql(flag(&cdc.apply_as_truncates))?,
            )
    })
}

/// A macro's expectations, declared in `file`.
fn owned_expectations(decls: &[ExpectationDecl], file: &str) -> Vec<Expectation> {
    decls.iter().map(|e| e.to_expectation(file)).collect()
}

/// Splits a macro-declared dataset into its dataset and its flow.
pub fn from_dataset_decl(d: &'static DatasetDecl) -> (DatasetDef, FlowDef) {
    let origin = Some(d.location.origin());
    let dataset = DatasetDef {
        name: d.name.to_string(),
        kind: Some(d.kind.into()),
        format: d.format.map(str::to_string),
        path: d.path.map(str::to_string),
        options: BTreeMap::new(),
        partition_cols: d.partition_cols.iter().map(|s| s.to_string()).collect(),
        schema: d.schema.map(str::to_string),
        merge_keys: Vec::new(),
        comment: d.comment.map(str::to_string),
        origin: origin.clone(),
        option_origins: BTreeMap::new(),
        expectations: owned_expectations(d.expectations, d.location.file),
        quarantine: d.quarantine.map(str::to_string),
    };
    let mut flow = FlowDef::append(d.name, d.name, Query::new(d.query));
    flow.comment = d.comment.map(str::to_string);
    flow.origin = origin;
    flow.defines_dataset = true;
    (dataset, flow)
}

/// Per-flow settings from the spec's `flows:` section.
#[derive(Clone, Debug, Default)]
pub struct FlowSettings {
    /// The trigger, when set in the spec.
    pub trigger: Option<Trigger>,
    /// Option overrides for the flow's sources and sink.
    pub options: BTreeMap<String, String>,
    /// Where the entry is in the spec.
    pub origin: Option<Origin>,
    /// Where each of `options` is in the spec, by option name.
    pub option_origins: BTreeMap<String, Origin>,
}

/// Everything declared for a pipeline, merged from code and spec: the input of [`build`].
#[derive(Clone, Debug, Default)]
pub struct Declarations {
    /// Pipeline name.
    pub name: String,
    /// Pipeline-wide settings (`configuration:` in the spec).
    pub configuration: BTreeMap<String, String>,
    /// Datasets and sinks, in declaration order.
    pub datasets: Vec<DatasetDef>,
    /// Flows, in declaration order.
    pub flows: Vec<FlowDef>,
    /// Spec settings per flow name.
    pub flow_settings: BTreeMap<String, FlowSettings>,
    /// Where each key of `configuration` is in the spec.
    pub configuration_origins: BTreeMap<String, Origin>,
}
