//! A flow's plan over one micro-batch: [`CompiledPlan`].
//!
//! [`CompiledPlan::compile`] turns a resolved [`DataFrame`] into one
//! DataFusion plan, optimizes it and plans it physically **once**. Each leaf
//! (a source or a dataset read) is a placeholder scan; [`CompiledPlan::execute`]
//! rebuilds the cached physical plan with the placeholders holding this
//! batch's rows (split into `partitions` contiguous parts so every core
//! works, without copying), resets the state of stateful operators (join
//! build sides, sorts), runs every output partition and collects the rows.
//! Nothing is re-planned per batch, so a small batch costs tens of
//! microseconds, not the milliseconds of planning a query.
//!
//! Streams support the stateless operators: select, select_expr, filter,
//! with_column, with_column_renamed, drop, union, with_watermark (rows pass
//! unchanged; the column is reported by [`CompiledPlan::watermarks`]),
//! tumbling `window(...)` columns, and stream-static joins (the static side
//! is read whole for every batch). Stateful streaming operators (aggregation,
//! deduplication, stream-stream joins, order_by, limit) are refused by
//! [`CompiledPlan::compile`] with a typed error; batch plans (materialized
//! views, once flows) may use every operator.
//!
//! ```
//! use std::collections::HashMap;
//! use std::sync::Arc;
//! use arrow::array::{Int64Array, StringArray};
//! use arrow::record_batch::RecordBatch;
//! use pipeline_core::engine::exec::CompiledPlan;
//! use pipeline_core::Session;
//!
//! let df = Session::new()
//!     .read_stream()
//!     .format("memory")
//!     .schema("level STRING, n BIGINT")
//!     .load("events")
//!     .unwrap()
//!     .filter("level = 'ERROR'")
//!     .unwrap()
//!     .select_expr(["n * 10 AS m"])
//!     .unwrap();
//! let resolved = df.resolve(&HashMap::new()).unwrap();
//! let plan = CompiledPlan::compile("errors", &df, &resolved, 2).unwrap();
//! let input = RecordBatch::try_new(
//!     plan.leaves()[0].schema.clone(),
//!     vec![
//!         Arc::new(StringArray::from(vec!["ERROR", "INFO", "ERROR"])),
//!         Arc::new(Int64Array::from(vec![1, 2, 3])),
//!     ],
//! )
//! .unwrap();
//! let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! let out = rt.block_on(plan.execute(vec![vec![input]])).unwrap();
//! let m = out[0].column(0).as_any().downcast_ref::<Int64Array>().unwrap();
//! assert_eq!(m.values(), &[10, 30]);
//! assert_eq!(out[0].schema(), plan.schema());
//! ```

mod leaf;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use arrow::array::{Array, ArrayRef, Int64Array};
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, TableReference};
use datafusion::datasource::provider_as_source;
use datafusion::error::DataFusionError;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{cast, Expr, LogicalPlan, LogicalPlanBuilder, SubqueryAlias};
use datafusion::physical_plan::execution_plan::replace_children_if_necessary;
use datafusion::physical_plan::{collect_partitioned, ExecutionPlan};
use datafusion::prelude::{SessionConfig, SessionContext};
use tokio::sync::OnceCell;

use self::leaf::{PartitionedRows, SlotExec, SlotTable};
use crate::error::{Error, PlanError, Result};
use crate::plan::ddl::schema_to_ddl;
use crate::plan::functions::{session_window_call, window_call};
use crate::plan::resolve::expr_text;
use crate::plan::{DataFrame, JoinType, PlanNode, ResolvedNode, ResolvedPlan};

/// Inputs with fewer rows than this stay in one partition (splitting a tiny
/// batch only adds work); larger ones are split across every partition.
const MIN_ROWS_TO_SPLIT: usize = 16 * 1024;

/// Input batches are sliced (without copying) to at most this many rows, so
/// operators work on cache-sized pieces.
const MAX_SLICE_ROWS: usize = 64 * 1024;

/// One leaf of a compiled plan: a source or a dataset read.
#[derive(Clone, Debug)]
pub struct Leaf {
    /// Position in [`CompiledPlan::leaves`] and in the inputs of
    /// [`CompiledPlan::execute`].
    pub index: usize,
    /// The plan node: [`PlanNode::Source`] or [`PlanNode::DatasetRead`]. A
    /// node used twice in the plan (the same `DataFrame` read twice) is one
    /// leaf.
    pub node: Arc<PlanNode>,
    /// True for a streaming read (this batch's new rows); false for a static
    /// one (the whole dataset, every batch).
    pub streaming: bool,
    /// The schema the leaf's rows must have.
    pub schema: SchemaRef,
}

/// A flow's plan compiled for repeated execution over micro-batches.
pub struct CompiledPlan {
    flow: String,
    leaves: Vec<Leaf>,
    schema: SchemaRef,
    watermarks: Vec<(String, i64)>,
    partitions: usize,
    ctx: SessionContext,
    task_ctx: Arc<TaskContext>,
    logical: LogicalPlan,
    physical: OnceCell<Arc<dyn ExecutionPlan>>,
}

impl std::fmt::Debug for CompiledPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledPlan")
            .field("flow", &self.flow)
            .field("leaves", &self.leaves)
            .field("schema", &self.schema)
            .field("watermarks", &self.watermarks)
            .field("partitions", &self.partitions)
            .finish_non_exhaustive()
    }
}

impl CompiledPlan {
    /// Compiles `plan` (resolved as `resolved`) of flow `flow` for repeated
    /// execution with `partitions` parallel partitions (DataFusion's
    /// `target_partitions`; 2 on a 2-core machine).
    ///
    /// Fails with a [`PlanError`] naming the flow for what this engine
    /// cannot run on a stream yet: aggregation, deduplication, stream-stream
    /// joins, order_by and limit (they arrive with stateful streaming), outer
    /// joins whose outer side is static, and sliding or session windows
    /// outside an aggregation. Batch plans may use every other operator.
    pub fn compile(
        flow: &str,
        plan: &DataFrame,
        resolved: &ResolvedPlan,
        partitions: usize,
    ) -> Result<CompiledPlan> {
        let partitions = partitions.max(1);
        check_streaming_ops(flow, plan)?;
        check_windows(flow, resolved.root())?;

        let mut builder = Builder {
            flow,
            partitions,
            leaves: Vec::new(),
            by_node: HashMap::new(),
            watermarks: Vec::new(),
        };
        let built = builder.build(resolved.root())?;
        let schema = resolved.schema();
        let built = conform(built, &schema).map_err(|e| plan_failure(flow, e))?;

        let ctx = new_context(partitions);
        let state = ctx.state();
        let logical = state.optimize(&built).map_err(|e| plan_failure(flow, e))?;
        // Physical planning of these plans never waits (the leaves are
        // placeholders); plan now so errors surface here. Should it ever
        // wait, planning happens at the first execution instead.
        let physical = OnceCell::new();
        if let Some(p) = poll_once(state.create_physical_plan(&logical)) {
            let p = p.map_err(|e| plan_failure(flow, e))?;
            let _ = physical.set(p);
        }
        let task_ctx = ctx.task_ctx();
        Ok(CompiledPlan {
            flow: flow.to_string(),
            leaves: builder.leaves,
            schema,
            watermarks: builder.watermarks,
            partitions,
            ctx,
            task_ctx,
            logical,
            physical,
        })
    }

    /// The leaves (sources and dataset reads), left to right;
    /// [`execute`](Self::execute) takes one input per leaf, in this order.
    pub fn leaves(&self) -> &[Leaf] {
        &self.leaves
    }

    /// The output schema: the resolved schema of the plan, exactly.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The event-time columns declared with `with_watermark`, with their
    /// delays in milliseconds, in plan order (outermost first). The column
    /// name is the one given to `with_watermark`.
    pub fn watermarks(&self) -> &[(String, i64)] {
        &self.watermarks
    }

    /// The flow name given to [`compile`](Self::compile).
    pub fn flow(&self) -> &str {
        &self.flow
    }

    /// The number of parallel partitions.
    pub fn partitions(&self) -> usize {
        self.partitions
    }

    /// The optimized DataFusion logical plan and the physical plan, as text
    /// (for debugging and `EXPLAIN`-like output).
    pub async fn explain(&self) -> Result<String> {
        let physical = self.physical().await?;
        Ok(format!(
            "{}\n{}",
            self.logical.display_indent(),
            datafusion::physical_plan::displayable(physical.as_ref()).indent(false)
        ))
    }

    /// Runs the plan over one batch's inputs: one `Vec<RecordBatch>` per
    /// leaf, in [`leaves`](Self::leaves) order (a static leaf gets the whole
    /// dataset). Returns the output rows in [`schema`](Self::schema); no
    /// state is kept between calls.
    ///
    /// Rows keep their input order for plans without joins (partitions are
    /// contiguous ranges of the input and are returned in order).
    pub async fn execute(&self, inputs: Vec<Vec<RecordBatch>>) -> Result<Vec<RecordBatch>> {
        if inputs.len() != self.leaves.len() {
            return Err(Error::runtime(format!(
                "flow `{}`: the plan reads {} input(s) but was given {}",
                self.flow,
                self.leaves.len(),
                inputs.len()
            )));
        }
        let physical = self.physical().await?;
        let mut data: Vec<PartitionedRows> = Vec::with_capacity(inputs.len());
        for (leaf, batches) in self.leaves.iter().zip(inputs) {
            data.push(Arc::new(self.split(leaf, batches)?));
        }
        let plan = rebind(&physical, &data).map_err(|e| self.run_failure(e))?;
        let parts = collect_partitioned(plan, self.task_ctx.clone())
            .await
            .map_err(|e| self.run_failure(e))?;
        let mut out = Vec::new();
        for batch in parts.into_iter().flatten() {
            if batch.num_rows() == 0 {
                continue;
            }
            let n = batch.num_rows();
            let b = RecordBatch::try_new_with_options(
                self.schema.clone(),
                batch.columns().to_vec(),
                &RecordBatchOptions::new().with_row_count(Some(n)),
            )
            .map_err(|e| {
                Error::runtime(format!(
                    "flow `{}`: the plan produced rows that do not match its schema ({}): {e}",
                    self.flow,
                    schema_to_ddl(&self.schema)
                ))
            })?;
            out.push(b);
        }
        Ok(out)
    }

    async fn physical(&self) -> Result<Arc<dyn ExecutionPlan>> {
        self.physical
            .get_or_try_init(|| async {
                self.ctx
                    .state()
                    .create_physical_plan(&self.logical)
                    .await
                    .map_err(|e| plan_failure(&self.flow, e))
            })
            .await
            .cloned()
    }

    /// Checks a leaf's batches against its schema and splits them into
    /// contiguous partitions (slices, no copies).
    fn split(&self, leaf: &Leaf, batches: Vec<RecordBatch>) -> Result<Vec<Vec<RecordBatch>>> {
        let mut checked = Vec::with_capacity(batches.len());
        let mut total = 0usize;
        for b in batches {
            if b.num_rows() == 0 {
                continue;
            }
            total += b.num_rows();
            checked.push(self.conform_input(leaf, b)?);
        }
        let n = self.partitions;
        let mut parts: Vec<Vec<RecordBatch>> = vec![Vec::new(); n];
        if n == 1 || total < MIN_ROWS_TO_SPLIT {
            for b in checked {
                push_sliced(&mut parts[0], b, MAX_SLICE_ROWS);
            }
            return Ok(parts);
        }
        let per = total.div_ceil(n);
        let mut p = 0usize;
        let mut room = per;
        for b in checked {
            let mut offset = 0;
            while offset < b.num_rows() {
                if room == 0 && p + 1 < n {
                    p += 1;
                    room = per;
                }
                let take = (b.num_rows() - offset).min(room.max(1)).min(MAX_SLICE_ROWS);
                parts[p].push(b.slice(offset, take));
                offset += take;
                room = room.saturating_sub(take);
            }
        }
        Ok(parts)
    }

    fn conform_input(&self, leaf: &Leaf, b: RecordBatch) -> Result<RecordBatch> {
        if Arc::ptr_eq(b.schema_ref(), &leaf.schema) || b.schema_ref() == &leaf.schema {
            return Ok(b);
        }
        let same_types = b.num_columns() == leaf.schema.fields().len()
            && b.schema_ref()
                .fields()
                .iter()
                .zip(leaf.schema.fields())
                .all(|(a, e)| a.data_type() == e.data_type());
        let mismatch = || {
            Error::runtime_with_help(
                format!(
                    "flow `{}`: input {} ({}) has columns ({}) but the plan expects ({})",
                    self.flow,
                    leaf.index,
                    leaf_name(&leaf.node),
                    schema_to_ddl(b.schema_ref()),
                    schema_to_ddl(&leaf.schema)
                ),
                "give each leaf rows in the schema of CompiledPlan::leaves()",
            )
        };
        if !same_types {
            return Err(mismatch());
        }
        let n = b.num_rows();
        RecordBatch::try_new_with_options(
            leaf.schema.clone(),
            b.columns().to_vec(),
            &RecordBatchOptions::new().with_row_count(Some(n)),
        )
        .map_err(|_| mismatch())
    }

    fn run_failure(&self, e: DataFusionError) -> Error {
        Error::runtime(format!(
            "flow `{}`: running the query failed: {}",
            self.flow,
            e.strip_backtrace()
        ))
    }
}

/// The maximum of a timestamp column over `batches`, in milliseconds since
/// the epoch (microseconds and nanoseconds are floored); None when the
/// column is missing everywhere, not a timestamp, or only null. The column
/// is matched by name, then case-insensitively.
pub fn max_event_time_ms(batches: &[RecordBatch], column: &str) -> Option<i64> {
    let mut best: Option<i64> = None;
    for b in batches {
        let schema = b.schema_ref();
        let idx = schema.index_of(column).ok().or_else(|| {
            schema
                .fields()
                .iter()
                .position(|f| f.name().eq_ignore_ascii_case(column))
        });
        let Some(idx) = idx else { continue };
        let a = b.column(idx);
        let DataType::Timestamp(unit, _) = a.data_type() else {
            continue;
        };
        let Some(v) = max_i64(a) else { continue };
        let ms = match unit {
            TimeUnit::Second => v.saturating_mul(1000),
            TimeUnit::Millisecond => v,
            TimeUnit::Microsecond => v.div_euclid(1000),
            TimeUnit::Nanosecond => v.div_euclid(1_000_000),
        };
        best = Some(best.map_or(ms, |b| b.max(ms)));
    }
    best
}

fn max_i64(a: &ArrayRef) -> Option<i64> {
    let ints = arrow::compute::cast(a, &DataType::Int64).ok()?;
    let ints = ints.as_any().downcast_ref::<Int64Array>()?;
    if ints.null_count() == ints.len() {
        return None;
    }
    arrow::compute::max(ints)
}

// ---------------------------------------------------------------------------
// Compilation
// ---------------------------------------------------------------------------

/// A DataFusion context like the plan layer's SQL context (plain Utf8
/// strings, identifiers as written, our window functions), in UTC, with
/// `partitions` target partitions. Dynamic filters are off: they are
/// execution state that a re-executed plan must not carry over.
fn new_context(partitions: usize) -> SessionContext {
    let mut config = SessionConfig::new().with_target_partitions(partitions);
    let opts = config.options_mut();
    opts.execution.time_zone = Some(crate::plan::ddl::SESSION_TIME_ZONE.to_string());
    opts.optimizer.enable_dynamic_filter_pushdown = false;
    opts.optimizer.enable_join_dynamic_filter_pushdown = false;
    opts.optimizer.enable_topk_dynamic_filter_pushdown = false;
    opts.optimizer.enable_aggregate_dynamic_filter_pushdown = false;
    crate::session::streaming_context(config)
}

/// Polls a future a few times without a runtime; None if it is still pending.
fn poll_once<F: Future>(f: F) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..16 {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return Some(v);
        }
    }
    None
}

/// The cached physical plan with every leaf holding this execution's rows,
/// and the state of stateful operators (hash join build sides, sorts) reset.
fn rebind(
    plan: &Arc<dyn ExecutionPlan>,
    data: &[PartitionedRows],
) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
    if let Some(slot) = plan.downcast_ref::<SlotExec>() {
        let rows = data.get(slot.index).cloned().unwrap_or_default();
        return Ok(Arc::new(slot.with_data(rows)));
    }
    let children = plan
        .children()
        .into_iter()
        .map(|c| rebind(c, data))
        .collect::<datafusion::error::Result<Vec<_>>>()?;
    replace_children_if_necessary(plan.clone(), children)?.reset_state()
}

fn plan_failure(flow: &str, e: DataFusionError) -> Error {
    PlanError::new(format!(
        "flow `{flow}`: the query could not be compiled: {}",
        e.strip_backtrace()
    ))
    .into()
}

fn leaf_name(node: &PlanNode) -> String {
    match node {
        PlanNode::Source(s) => s.describe(),
        PlanNode::DatasetRead { name, .. } => format!("dataset `{name}`"),
        other => other.name().to_string(),
    }
}

/// Builds one DataFusion logical plan from the resolved tree: each node's
/// resolved plan with its input scans replaced by its inputs' plans.
struct Builder<'a> {
    flow: &'a str,
    partitions: usize,
    leaves: Vec<Leaf>,
    by_node: HashMap<*const PlanNode, usize>,
    watermarks: Vec<(String, i64)>,
}

impl Builder<'_> {
    fn build(&mut self, r: &ResolvedNode) -> Result<LogicalPlan> {
        let fail = |e: DataFusionError| plan_failure(self.flow, e);
        match r.node.as_ref() {
            PlanNode::Source(spec) => return self.leaf(r, spec.streaming),
            PlanNode::DatasetRead { streaming, .. } => return self.leaf(r, *streaming),
            _ => {}
        }
        if let PlanNode::WithWatermark { column, delay, .. } = r.node.as_ref() {
            self.watermarks
                .push((column.clone(), delay.as_millis() as i64));
        }
        let mut children = Vec::with_capacity(r.children.len());
        for c in &r.children {
            children.push(self.build(c)?);
        }
        match r.node.as_ref() {
            PlanNode::Union { .. } => union(children, &r.schema).map_err(fail),
            PlanNode::DropDuplicates { columns, .. } => {
                let input = children.remove(0);
                let all: Vec<Expr> = input
                    .schema()
                    .iter()
                    .map(|(q, f)| Expr::from((q, f)))
                    .collect();
                let b = LogicalPlanBuilder::from(input.clone());
                match columns {
                    None => b.distinct(),
                    Some(cols) => {
                        let on = cols
                            .iter()
                            .map(|c| {
                                let (q, f) = input
                                    .schema()
                                    .iter()
                                    .find(|(_, f)| f.name() == c)
                                    .ok_or_else(|| {
                                        DataFusionError::Plan(format!("unknown column `{c}`"))
                                    })?;
                                Ok(Expr::from((q, f)))
                            })
                            .collect::<datafusion::error::Result<Vec<_>>>()?;
                        b.distinct_on(on, all, None)
                    }
                }
                .and_then(|b| b.build())
                .map_err(fail)
            }
            _ => substitute_inputs(&r.plan, &children).map_err(fail),
        }
    }

    fn leaf(&mut self, r: &ResolvedNode, streaming: bool) -> Result<LogicalPlan> {
        let key = Arc::as_ptr(&r.node);
        let index = match self.by_node.get(&key) {
            Some(i) => *i,
            None => {
                let i = self.leaves.len();
                self.leaves.push(Leaf {
                    index: i,
                    node: r.node.clone(),
                    streaming,
                    schema: r.schema.clone(),
                });
                self.by_node.insert(key, i);
                i
            }
        };
        let table = SlotTable {
            index,
            schema: r.schema.clone(),
            partitions: self.partitions,
        };
        LogicalPlanBuilder::scan(
            TableReference::bare(format!("leaf{index}")),
            provider_as_source(Arc::new(table)),
            None,
        )
        .and_then(|b| b.build())
        .map_err(|e| plan_failure(self.flow, e))
    }
}

/// Replaces the input scans of a node's resolved plan (`input`, `left`,
/// `right`, `input0`...) by its inputs' plans, under the same names.
fn substitute_inputs(
    plan: &LogicalPlan,
    children: &[LogicalPlan],
) -> datafusion::error::Result<LogicalPlan> {
    plan.clone()
        .transform_up(|p| {
            let LogicalPlan::TableScan(scan) = &p else {
                return Ok(Transformed::no(p));
            };
            let name = scan.table_name.table().to_string();
            let idx = match name.as_str() {
                "input" | "left" => Some(0),
                "right" => Some(1),
                n => n
                    .strip_prefix("input")
                    .and_then(|i| i.parse::<usize>().ok()),
            };
            let Some(child) = idx.and_then(|i| children.get(i)) else {
                return Err(DataFusionError::Internal(format!(
                    "unexpected scan `{name}` in a resolved plan"
                )));
            };
            let alias = SubqueryAlias::try_new(Arc::new(child.clone()), name)?;
            Ok(Transformed::yes(LogicalPlan::SubqueryAlias(alias)))
        })
        .map(|t| t.data)
}

/// A union by position: every input cast to the resolved column types and
/// named like the first.
fn union(children: Vec<LogicalPlan>, schema: &SchemaRef) -> datafusion::error::Result<LogicalPlan> {
    let mut builder: Option<LogicalPlanBuilder> = None;
    for child in children {
        let list: Vec<Expr> = child
            .schema()
            .iter()
            .zip(schema.fields())
            .map(|((q, f), target)| {
                let c = Expr::from((q, f));
                let c = if f.data_type() == target.data_type() {
                    c
                } else {
                    cast(c, target.data_type().clone())
                };
                c.alias(target.name())
            })
            .collect();
        let p = LogicalPlanBuilder::from(child).project(list)?.build()?;
        builder = Some(match builder {
            None => LogicalPlanBuilder::from(p),
            Some(b) => b.union(p)?,
        });
    }
    builder
        .ok_or_else(|| DataFusionError::Plan("union without inputs".into()))?
        .build()
}

/// Adds a final projection when the plan's column names or types differ
/// from the resolved schema.
fn conform(plan: LogicalPlan, schema: &SchemaRef) -> datafusion::error::Result<LogicalPlan> {
    let fields = plan.schema().fields();
    let same = fields.len() == schema.fields().len()
        && fields
            .iter()
            .zip(schema.fields())
            .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
    if same {
        return Ok(plan);
    }
    if fields.len() != schema.fields().len() {
        return Err(DataFusionError::Internal(format!(
            "the plan has {} columns, its resolved schema {}",
            fields.len(),
            schema.fields().len()
        )));
    }
    let list: Vec<Expr> = plan
        .schema()
        .iter()
        .zip(schema.fields())
        .map(|((q, f), target)| {
            let c = Expr::Column(Column::new(q.cloned(), f.name()));
            let c = if f.data_type() == target.data_type() {
                c
            } else {
                cast(c, target.data_type().clone())
            };
            c.alias(target.name())
        })
        .collect();
    LogicalPlanBuilder::from(plan).project(list)?.build()
}

// ---------------------------------------------------------------------------
// What a stream cannot do yet
// ---------------------------------------------------------------------------

const STATEFUL_LATER: &str =
    "is not supported by this build yet; it arrives with stateful streaming";

fn not_yet(flow: &str, what: String, help: &str) -> Error {
    PlanError::with_help(format!("flow `{flow}`: {what} {STATEFUL_LATER}"), help).into()
}

/// Refuses the operators that need state on a stream, innermost first.
fn check_streaming_ops(flow: &str, df: &DataFrame) -> Result<()> {
    for c in df.children() {
        check_streaming_ops(flow, c)?;
    }
    match df.node() {
        PlanNode::Aggregate { input, keys, .. } if input.is_streaming() => {
            let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
            Err(not_yet(
                flow,
                format!("streaming aggregation (group_by({}))", keys.join(", ")),
                "aggregate a batch read instead (read / read_table, e.g. in a materialized view), or write the rows unaggregated for now",
            ))
        }
        PlanNode::DropDuplicates {
            input,
            columns,
            within_watermark,
        } if input.is_streaming() => {
            let op = if *within_watermark {
                "drop_duplicates_within_watermark"
            } else {
                "drop_duplicates"
            };
            let cols = columns
                .as_ref()
                .map(|c| c.join(", "))
                .unwrap_or_else(|| "*".to_string());
            Err(not_yet(
                flow,
                format!("streaming deduplication ({op}({cols}))"),
                "deduplicate a batch read instead (read / read_table, e.g. in a materialized view), or write the rows as they are for now",
            ))
        }
        PlanNode::Join {
            left,
            right,
            join_type,
            ..
        } => match (left.is_streaming(), right.is_streaming()) {
            (true, true) => Err(not_yet(
                flow,
                format!("stream-stream join ({join_type} join of two streams)"),
                "read one side as a static table (read / read_table) for a stream-static join",
            )),
            (true, false) => match join_type {
                JoinType::Inner | JoinType::LeftOuter | JoinType::LeftSemi | JoinType::LeftAnti => {
                    Ok(())
                }
                _ => Err(PlanError::with_help(
                    format!(
                        "flow `{flow}`: a {join_type} join of a stream (left) with a static table (right) cannot run on a stream: the static side's unmatched rows would be emitted again with every batch"
                    ),
                    "use an inner or left_outer join, or put the stream on the right side of a right_outer join",
                )
                .into()),
            },
            (false, true) => match join_type {
                JoinType::Inner | JoinType::RightOuter => Ok(()),
                _ => Err(PlanError::with_help(
                    format!(
                        "flow `{flow}`: a {join_type} join of a static table (left) with a stream (right) cannot run on a stream: the static side's unmatched rows would be emitted again with every batch"
                    ),
                    "put the stream on the left side (stream.join(static, ..., left_outer)), or use an inner join",
                )
                .into()),
            },
            (false, false) => Ok(()),
        },
        PlanNode::OrderBy { input, .. } if input.is_streaming() => Err(not_yet(
            flow,
            "order_by on a stream".to_string(),
            "sort a batch read instead (read / read_table, e.g. in a materialized view); sorting a stream needs an aggregation in complete mode",
        )),
        PlanNode::Limit { input, .. } if input.is_streaming() => Err(not_yet(
            flow,
            "limit on a stream".to_string(),
            "limit a batch read instead (read / read_table, e.g. in a materialized view)",
        )),
        _ => Ok(()),
    }
}

/// Sliding and session windows assign a row to several windows or merge
/// windows per key; evaluating them row by row is not possible, so they are
/// refused until the stateful engine expands them.
fn check_windows(flow: &str, root: &ResolvedNode) -> Result<()> {
    let mut found: Option<(String, &'static str)> = None;
    root.walk(&mut |n| {
        if found.is_some() {
            return;
        }
        for e in &n.exprs {
            let _ = e.apply(|sub| {
                if matches!(sub, Expr::Alias(_)) {
                    return Ok(TreeNodeRecursion::Continue);
                }
                if let Some(w) = window_call(sub) {
                    if !w.is_tumbling() {
                        found = Some((expr_text(sub), "sliding window"));
                        return Ok(TreeNodeRecursion::Stop);
                    }
                } else if session_window_call(sub).is_some() {
                    found = Some((expr_text(sub), "session window"));
                    return Ok(TreeNodeRecursion::Stop);
                }
                Ok(TreeNodeRecursion::Continue)
            });
            if found.is_some() {
                return;
            }
        }
    });
    match found {
        Some((text, kind)) => Err(not_yet(
            flow,
            format!("{kind} `{text}`"),
            "use a tumbling window such as window(ts, '10 minutes') for now",
        )),
        None => Ok(()),
    }
}

fn push_sliced(out: &mut Vec<RecordBatch>, b: RecordBatch, max: usize) {
    if b.num_rows() <= max {
        out.push(b);
        return;
    }
    let mut offset = 0;
    while offset < b.num_rows() {
        let take = (b.num_rows() - offset).min(max);
        out.push(b.slice(offset, take));
        offset += take;
    }
}
