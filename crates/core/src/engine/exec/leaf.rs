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
use datafusion::common::Result as DFResult;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType, SchedulingType};
use datafusion::physical_plan::memory::MemoryStream;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    ReplaceChildrenOptions, SendableRecordBatchStream,
};

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
    /// Schema after the projection.
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
    data: Option<PartitionedRows>,
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
        })
    }

    /// The slot table's columns this scan returns (None: all, in order).
    pub(crate) fn projection(&self) -> Option<&[usize]> {
        self.projection.as_deref()
    }

    /// True when the slot passes its rows on unchanged (no projection).
    pub(crate) fn is_identity(&self) -> bool {
        self.projection.is_none()
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
        Ok(Box::pin(MemoryStream::try_new(
            rows,
            self.schema.clone(),
            self.projection.clone(),
        )?))
    }
}
