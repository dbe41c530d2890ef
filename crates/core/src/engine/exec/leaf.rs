//! The leaves of a compiled plan: a table provider planned once, and an
//! execution plan that is re-bound to each micro-batch's rows.
//!
//! [`SlotTable`] stands for one leaf (a source or a dataset read) in the
//! logical plan. Planning turns it into a [`SlotExec`] without data; before
//! each execution the compiled physical plan is rebuilt with every
//! [`SlotExec`] carrying that batch's rows (already split into partitions),
//! which costs a few allocations per plan node and no re-planning.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::catalog::{Session as DfSession, TableProvider};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType, SchedulingType};
use datafusion::physical_plan::memory::MemoryStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    ReplaceChildrenOptions, SendableRecordBatchStream,
};

use super::batches::{retyped, with_types};
use super::dictionary_ids::string_dictionary_type;
use crate::plan::timestamp::udf::{leaf_to_timestamp, timestamp_type, DictionaryTimestamps};
use crate::plan::timestamp::SparkPattern;

/// The rows of one leaf for one execution, per partition.
pub(crate) type PartitionedRows = Arc<Vec<Vec<RecordBatch>>>;

/// A leaf of the logical plan: leaf `index`, `partitions` partitions.
#[derive(Debug)]
pub(crate) struct SlotTable {
    pub(crate) index: usize,
    pub(crate) schema: SchemaRef,
    pub(crate) partitions: usize,
}

impl TableProvider for SlotTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    // `TableProvider::scan` is an `async_trait` method; this is its expanded
    // form (planning a slot needs no waiting).
    fn scan<'life0, 'life1, 'life2, 'life3, 'async_trait>(
        &'life0 self,
        _state: &'life1 dyn DfSession,
        projection: Option<&'life2 Vec<usize>>,
        _filters: &'life3 [Expr],
        _limit: Option<usize>,
    ) -> Pin<Box<dyn Future<Output = DFResult<Arc<dyn ExecutionPlan>>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        'life3: 'async_trait,
        Self: 'async_trait,
    {
        let plan = SlotExec::new(
            self.index,
            self.schema.clone(),
            projection.cloned(),
            self.partitions,
        )
        .map(|p| Arc::new(p) as Arc<dyn ExecutionPlan>);
        Box::pin(std::future::ready(plan))
    }
}

/// Reads leaf `index`'s rows of the current execution, one partition each.
#[derive(Clone)]
pub(crate) struct SlotExec {
    pub(crate) index: usize,
    projection: Option<Vec<usize>>,
    /// Schema after the projection (and the conversions).
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
    data: Option<PartitionedRows>,
    /// Output columns (after the projection) the slot gives as
    /// `to_timestamp(column[, pattern])` instead of the strings: the plan
    /// read them only so (see [`super::leaf_timestamps`]).
    timestamps: Vec<LeafTimestamp>,
}

/// An output column of a [`SlotExec`] converted by `to_timestamp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeafTimestamp {
    /// The column's index in the slot's output.
    pub(crate) column: usize,
    /// `to_timestamp`'s pattern (None: Spark's cast rules).
    pub(crate) pattern: Option<String>,
}

impl fmt::Debug for SlotExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlotExec")
            .field("index", &self.index)
            .field("projection", &self.projection)
            .finish()
    }
}

impl SlotExec {
    fn new(
        index: usize,
        table_schema: SchemaRef,
        projection: Option<Vec<usize>>,
        partitions: usize,
    ) -> DFResult<SlotExec> {
        // A projection of every column in order is none: the slot then
        // passes its rows on without a DataFusion run (`is_identity`).
        let n = table_schema.fields().len();
        let projection =
            projection.filter(|p| p.len() != n || p.iter().enumerate().any(|(i, &c)| i != c));
        let schema = match &projection {
            Some(p) => Arc::new(table_schema.project(p)?),
            None => table_schema,
        };
        let properties = PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(partitions.max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        )
        .with_scheduling_type(SchedulingType::Cooperative);
        Ok(SlotExec {
            index,
            projection,
            schema,
            properties: Arc::new(properties),
            data: None,
            timestamps: Vec::new(),
        })
    }

    /// This slot giving `timestamps` converted (their fields become
    /// nullable `TIMESTAMP`s).
    pub(crate) fn with_timestamps(&self, timestamps: Vec<LeafTimestamp>) -> SlotExec {
        let schema = retyped(
            &self.schema,
            timestamps.iter().map(|t| (t.column, timestamp_type())),
        );
        let properties = PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            self.properties.output_partitioning().clone(),
            EmissionType::Incremental,
            Boundedness::Bounded,
        )
        .with_scheduling_type(SchedulingType::Cooperative);
        SlotExec {
            schema,
            properties: Arc::new(properties),
            timestamps,
            ..self.clone()
        }
    }

    /// This slot giving its `Utf8` output `columns` as they arrive from a
    /// source that keeps them dictionary-encoded: `Dictionary(Int32, Utf8)`
    /// (see [`super::leaf_dictionaries`]). Nullability is kept.
    pub(crate) fn with_dictionaries(&self, columns: &[usize]) -> SlotExec {
        let schema = with_types(
            &self.schema,
            columns.iter().map(|&c| (c, string_dictionary_type())),
            false,
        );
        let properties = PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            self.properties.output_partitioning().clone(),
            EmissionType::Incremental,
            Boundedness::Bounded,
        )
        .with_scheduling_type(SchedulingType::Cooperative);
        SlotExec {
            schema,
            properties: Arc::new(properties),
            ..self.clone()
        }
    }

    /// The column of the slot's table behind output column `c`.
    pub(crate) fn table_column(&self, c: usize) -> Option<usize> {
        match &self.projection {
            Some(p) => p.get(c).copied(),
            None => Some(c),
        }
    }

    /// The columns of the slot's table this scan converts with
    /// `to_timestamp`, each with its pattern (see
    /// [`with_timestamps`](Self::with_timestamps)).
    pub(crate) fn converted_table_columns(&self) -> Vec<(usize, Option<String>)> {
        self.timestamps
            .iter()
            .filter_map(|t| {
                let column = match &self.projection {
                    Some(p) => p.get(t.column).copied(),
                    None => Some(t.column),
                }?;
                Some((column, t.pattern.clone()))
            })
            .collect()
    }

    /// True when output column `c` is given converted by `to_timestamp`
    /// rather than as the table's value.
    pub(crate) fn is_converted(&self, c: usize) -> bool {
        self.timestamps.iter().any(|t| t.column == c)
    }

    /// The slot table's columns this scan returns (None: all, in order).
    pub(crate) fn projection(&self) -> Option<&[usize]> {
        self.projection.as_deref()
    }

    /// True when the slot passes its rows on unchanged (no projection).
    pub(crate) fn is_identity(&self) -> bool {
        self.projection.is_none() && self.timestamps.is_empty()
    }

    /// Marks in `used` (one entry per column of the slot's table) the
    /// columns behind this scan's output columns flagged in `needed`.
    pub(crate) fn mark_needed(&self, needed: &[bool], used: &mut [bool]) {
        for (i, n) in needed.iter().enumerate() {
            let column = match &self.projection {
                Some(p) => p.get(i).copied(),
                None => Some(i),
            };
            if let (true, Some(u)) = (*n, column.and_then(|c| used.get_mut(c))) {
                *u = true;
            }
        }
    }

    /// The same leaf reading `data` (one entry per partition). Shares the
    /// plan properties, so parents keep theirs.
    pub(crate) fn with_data(&self, data: PartitionedRows) -> SlotExec {
        SlotExec {
            data: Some(data),
            ..self.clone()
        }
    }
}

impl DisplayAs for SlotExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "SlotExec: leaf={}", self.index)?;
        if let Some(p) = &self.projection {
            write!(f, ", projection={p:?}")?;
        }
        for t in &self.timestamps {
            match &t.pattern {
                Some(p) => write!(f, ", to_timestamp({}, {p:?})", t.column)?,
                None => write!(f, ", to_timestamp({})", t.column)?,
            }
        }
        Ok(())
    }
}

impl ExecutionPlan for SlotExec {
    fn name(&self) -> &str {
        "SlotExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DFResult<TreeNodeRecursion>,
    ) -> DFResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let rows = self
            .data
            .as_ref()
            .and_then(|d| d.get(partition))
            .cloned()
            .unwrap_or_default();
        if self.timestamps.is_empty() {
            return Ok(Box::pin(MemoryStream::try_new(
                rows,
                self.schema.clone(),
                self.projection.clone(),
            )?));
        }
        let converter = TimestampConverter::new(&self.timestamps, self.projection.clone())?;
        let stream =
            futures::stream::iter(rows.into_iter().scan(converter, |c, b| Some(c.apply(b))));
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            stream,
        )))
    }
}

/// Projects a slot's batches and converts its [`LeafTimestamp`] columns;
/// keeps the last dictionary's parsed values per column.
struct TimestampConverter {
    projection: Option<Vec<usize>>,
    columns: Vec<(usize, Option<SparkPattern>, DictionaryTimestamps)>,
}

impl TimestampConverter {
    fn new(timestamps: &[LeafTimestamp], projection: Option<Vec<usize>>) -> DFResult<Self> {
        let columns = timestamps
            .iter()
            .map(|t| {
                let pattern = t
                    .pattern
                    .as_deref()
                    .map(SparkPattern::compile)
                    .transpose()
                    .map_err(|e| DataFusionError::Plan(format!("to_timestamp pattern: {e}")))?;
                Ok((t.column, pattern, DictionaryTimestamps::default()))
            })
            .collect::<DFResult<Vec<_>>>()?;
        Ok(TimestampConverter {
            projection,
            columns,
        })
    }

    fn apply(&mut self, batch: RecordBatch) -> DFResult<RecordBatch> {
        let batch = match &self.projection {
            Some(p) => batch.project(p)?,
            None => batch,
        };
        let mut columns = batch.columns().to_vec();
        for (c, pattern, cache) in &mut self.columns {
            if let Some(column) = columns.get_mut(*c) {
                *column = leaf_to_timestamp(column, pattern.as_ref(), cache)?;
            }
        }
        let schema = retyped(
            batch.schema_ref(),
            self.columns.iter().map(|(c, ..)| (*c, timestamp_type())),
        );
        let options =
            arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        Ok(RecordBatch::try_new_with_options(
            schema, columns, &options,
        )?)
    }
}
