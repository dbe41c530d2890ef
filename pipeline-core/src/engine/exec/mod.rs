//! A flow's plan over one micro-batch: [`CompiledPlan`].
//!
//! [`CompiledPlan::compile`] turns a resolved [`DataFrame`] into a tree of
//! **stages**, each one DataFusion plan optimized and planned physically
//! **once**. Leaves (sources, dataset reads) are placeholder scans; the
//! stateful operators of a stream sit between stages:
//!
//! - `with_watermark` passes rows on and reports the maximum event time it
//!   saw ([`watermark`] turns that into the next batch's watermark);
//! - a streaming aggregation (`aggregate`: tumbling, sliding and session
//!   windows), deduplication (`dedup`) and stream-stream join (`join`) keep
//!   state across batches in a versioned [`crate::engine::state::StateStore`].
//!
//! [`CompiledPlan::execute_batch`] runs the stages bottom-up over one batch:
//! each stage's cached physical plan is rebuilt with its placeholders
//! holding the batch's rows (split into `partitions` contiguous parts so
//! every core works, without copying), stateful operators merge the rows
//! into their state and emit what the output mode and the watermark allow
//! ([`BatchContext`]). Nothing is re-planned per batch, so a small batch
//! costs tens of microseconds, not the milliseconds of planning a query.
//!
//! Refused on streams by [`CompiledPlan::compile`] with a typed error:
//! limit/order_by without an aggregation below them, a stream-stream left
//! anti join, and sliding or session windows outside an aggregation (the
//! graph's query checks report these and the output-mode rules first).
//! Batch plans (materialized views, once flows) may use every operator.
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
//! let mut plan = CompiledPlan::compile("errors", &df, &resolved, 2).unwrap();
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

mod accumulator;
mod aggregate;
mod dedup;
pub(crate) mod dictionary_ids;
mod join;
mod leaf;
mod string_ids;
mod time_keyed;
pub mod watermark;

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use arrow::array::{Array, ArrayRef};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
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
use serde::Serialize;

use self::aggregate::{find_aggregate, AggregateOp};
use self::dedup::DedupOp;
use self::join::JoinOp;
use self::leaf::{PartitionedRows, SlotExec, SlotTable};
use crate::error::{Error, PlanError, Result};
use crate::formats::OutputMode;
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

/// What one micro-batch runs with.
#[derive(Clone, Debug)]
pub struct BatchContext {
    /// The batch id.
    pub batch_id: u64,
    /// The flow's output mode: what stateful operators emit.
    pub output_mode: OutputMode,
    /// The watermark rows are judged late against (the previous batch's
    /// watermark, as in Spark); None when the query has no watermark.
    pub watermark_for_late_ms: Option<i64>,
    /// The watermark that closes, emits and evicts state (this batch's).
    pub watermark_for_eviction_ms: Option<i64>,
    /// Keep the rows stateful operators drop as late, in
    /// [`BatchOutput::late_rows`] (for `pipelines.lateRowsTo`).
    pub capture_late_rows: bool,
}

impl Default for BatchContext {
    fn default() -> Self {
        BatchContext {
            batch_id: 0,
            output_mode: OutputMode::Append,
            watermark_for_late_ms: None,
            watermark_for_eviction_ms: None,
            capture_late_rows: false,
        }
    }
}

/// Progress of one stateful operator in one batch (Spark's `stateOperators`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StateOperatorProgress {
    /// `aggregate`, `dedupe` or `join`.
    pub operator: String,
    /// Keys (rows) held after the batch.
    pub num_rows_total: u64,
    /// Keys inserted or changed by the batch.
    pub num_rows_updated: u64,
    /// Keys evicted by the watermark.
    pub num_rows_removed: u64,
    /// Input rows (for aggregations: groups) dropped as late.
    pub num_rows_dropped_by_watermark: u64,
    /// Bytes of the Arrow arrays holding the state.
    pub memory_used_bytes: u64,
}

impl StateOperatorProgress {
    fn new(operator: &str) -> Self {
        StateOperatorProgress {
            operator: operator.to_string(),
            ..Default::default()
        }
    }
}

/// The result of [`CompiledPlan::execute_batch`].
#[derive(Clone, Debug, Default)]
pub struct BatchOutput {
    /// The rows for the sink, in [`CompiledPlan::schema`].
    pub rows: Vec<RecordBatch>,
    /// For each `with_watermark` operator that saw rows: (operator id, max
    /// event time in ms, delay in ms).
    pub event_times: Vec<(usize, i64, i64)>,
    /// Per stateful operator, in plan order.
    pub state_operators: Vec<StateOperatorProgress>,
    /// The input rows stateful operators dropped as late, in
    /// [`CompiledPlan::late_rows_schema`], when the batch asked for them.
    pub late_rows: Vec<RecordBatch>,
}

/// A stateful operator's failure, before it is given the flow's name.
#[derive(Debug)]
pub(crate) struct OpFailure(pub(crate) String);

impl std::fmt::Display for OpFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<ArrowError> for OpFailure {
    fn from(e: ArrowError) -> Self {
        OpFailure(e.to_string())
    }
}

impl From<DataFusionError> for OpFailure {
    fn from(e: DataFusionError) -> Self {
        OpFailure(e.strip_backtrace())
    }
}

/// A part of the plan DataFusion runs in one go: its inputs are leaves or
/// the outputs of stateful operators.
struct Stage {
    logical: LogicalPlan,
    physical: Arc<dyn ExecutionPlan>,
    inputs: Vec<StageInput>,
}

enum StageInput {
    Leaf(usize),
    Op(Box<OpNode>),
}

struct OpNode {
    id: usize,
    op: Op,
    /// The number of columns the operator outputs.
    width: usize,
    /// The operator's inputs: one stage, two for a join.
    children: Vec<Stage>,
}

enum Op {
    /// `with_watermark` on a stream: rows pass; the column's maximum is
    /// reported.
    Watermark {
        column: usize,
        delay_ms: i64,
    },
    Aggregate(Box<AggregateOp>),
    Dedup(Box<DedupOp>),
    Join(Box<JoinOp>),
}

/// A flow's plan compiled for repeated execution over micro-batches.
pub struct CompiledPlan {
    flow: String,
    leaves: Vec<Leaf>,
    schema: SchemaRef,
    watermarks: Vec<(String, i64)>,
    partitions: usize,
    task_ctx: Arc<TaskContext>,
    root: Stage,
    /// Per leaf, the `Utf8` columns that may arrive as
    /// `Dictionary(Int32, Utf8)` (see [`CompiledPlan::leaf_dictionary_columns`]).
    dictionary_columns: Vec<Vec<bool>>,
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
    /// Watermarks, streaming aggregations, deduplications and stream-stream
    /// joins become stateful operators between DataFusion stages. Fails with
    /// a [`PlanError`] naming the flow for what cannot run on a stream:
    /// limit or order_by without an aggregation, a stream-stream left anti
    /// join, outer joins whose outer side is static. Batch plans may use
    /// every operator.
    pub fn compile(
        flow: &str,
        plan: &DataFrame,
        resolved: &ResolvedPlan,
        partitions: usize,
    ) -> Result<CompiledPlan> {
        Self::compile_with_state_partitions(flow, plan, resolved, partitions, partitions)
    }

    /// As [`compile`](Self::compile), with the state of aggregations kept in
    /// `state_partitions` hash partitions of the keys, merged in parallel
    /// (Spark's `spark.sql.shuffle.partitions`).
    pub fn compile_with_state_partitions(
        flow: &str,
        plan: &DataFrame,
        resolved: &ResolvedPlan,
        partitions: usize,
        state_partitions: usize,
    ) -> Result<CompiledPlan> {
        let partitions = partitions.max(1);
        check_streaming_ops(flow, plan)?;
        check_windows(flow, resolved.root())?;

        let ctx = new_context(partitions);
        let mut builder = Builder {
            flow,
            partitions,
            state_partitions: state_partitions.max(1),
            ctx: &ctx,
            leaves: Vec::new(),
            by_node: HashMap::new(),
            watermarks: Vec::new(),
            stage: StageBuilder::default(),
            next_op: 0,
        };
        let built = builder.build(resolved.root())?;
        let schema = resolved.schema();
        let built = conform(built, &schema).map_err(|e| plan_failure(flow, e))?;
        let inputs = std::mem::take(&mut builder.stage.inputs);
        let root = plan_stage(flow, &ctx, built, inputs)?;
        let task_ctx = ctx.task_ctx();
        let dictionary_columns = dictionary_columns(&root, &builder.leaves);
        Ok(CompiledPlan {
            flow: flow.to_string(),
            leaves: builder.leaves,
            schema,
            watermarks: builder.watermarks,
            partitions,
            task_ctx,
            root,
            dictionary_columns,
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

    /// The event-time columns declared with `with_watermark` on a stream,
    /// with their delays in milliseconds, in plan order (innermost first).
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

    /// The stateful operators (aggregations, deduplications), described
    /// with their keys and state columns, in operator-id order. The
    /// checkpoint's query shape records them.
    pub fn stateful_operators(&self) -> Vec<String> {
        let mut out = Vec::new();
        visit_ops(&self.root, &mut |n| match &n.op {
            Op::Aggregate(a) => out.push((n.id, a.describe())),
            Op::Dedup(d) => out.push((n.id, d.describe())),
            Op::Join(j) => out.push((n.id, j.describe())),
            Op::Watermark { .. } => {}
        });
        out.sort();
        out.into_iter()
            .map(|(id, d)| format!("{id}: {d}"))
            .collect()
    }

    /// The schema of the rows dropped as late: the input of the plan's one
    /// aggregation or deduplication (without watermark metadata). None when
    /// the plan has no such operator, several, or a stream-stream join (its
    /// two sides' late rows have different columns).
    pub fn late_rows_schema(&self) -> Option<SchemaRef> {
        let mut found = Vec::new();
        visit_ops(&self.root, &mut |n| match &n.op {
            Op::Aggregate(a) => found.push(Some(a.input_schema())),
            Op::Dedup(d) => found.push(Some(d.input_schema())),
            Op::Join(_) => found.push(None),
            Op::Watermark { .. } => {}
        });
        match found.as_slice() {
            [Some(s)] => Some(strip_metadata(s)),
            _ => None,
        }
    }

    /// True when a batch without new data may still emit or evict: the
    /// query has a stateful operator that the watermark drives in `mode`
    /// (Spark runs such a no-data batch whenever the watermark moves).
    pub fn runs_no_data_batches(&self, mode: OutputMode) -> bool {
        let mut any = false;
        visit_ops(&self.root, &mut |n| match &n.op {
            Op::Aggregate(_) => any |= mode != OutputMode::Complete,
            Op::Dedup(_) | Op::Join(_) => any = true,
            Op::Watermark { .. } => {}
        });
        any && !self.watermarks.is_empty()
    }

    /// Opens the state of every stateful operator under `dir`
    /// (`<dir>/<operator id>/`) at batch `version` (None: empty state).
    pub fn restore_state(&mut self, dir: &Path, version: Option<u64>) -> Result<()> {
        let mut result = Ok(());
        visit_ops_mut(&mut self.root, &mut |n| {
            if result.is_err() {
                return;
            }
            let d = dir.join(n.id.to_string());
            result = match &mut n.op {
                Op::Aggregate(a) => a.restore(&d, version),
                Op::Dedup(o) => o.restore(&d, version),
                Op::Join(j) => j.restore(&d, version),
                Op::Watermark { .. } => Ok(()),
            };
        });
        result
    }

    /// Writes every stateful operator's changes of batch `version`.
    pub fn commit_state(&mut self, version: u64) -> Result<()> {
        self.commit_state_as(version, false)
    }

    /// Writes every stateful operator's whole state as version `version`:
    /// the end of a real-time epoch, whose changes came in many steps.
    pub fn commit_state_snapshot(&mut self, version: u64) -> Result<()> {
        self.commit_state_as(version, true)
    }

    fn commit_state_as(&mut self, version: u64, whole: bool) -> Result<()> {
        let mut result = Ok(());
        visit_ops_mut(&mut self.root, &mut |n| {
            if result.is_err() {
                return;
            }
            result = match &mut n.op {
                Op::Aggregate(a) => a.commit(version, whole),
                Op::Dedup(o) => o.commit(version, whole),
                Op::Join(j) => j.commit(version, whole),
                Op::Watermark { .. } => Ok(()),
            };
        });
        result
    }

    /// Which columns of each leaf (in [`leaves`](Self::leaves) order, one
    /// flag per column of the leaf's schema) the plan reads. A source may
    /// return nulls in the others (projection pushdown): no operator looks
    /// at them. Stateful operators that keep whole rows (deduplication,
    /// joins) count as reading every column. Late rows captured for
    /// `pipelines.lateRowsTo` carry every column, so a flow that sends them
    /// somewhere must not project its sources.
    pub fn leaf_columns_used(&self) -> Vec<Vec<bool>> {
        let mut used: Vec<Vec<bool>> = self
            .leaves
            .iter()
            .map(|l| vec![false; l.schema.fields().len()])
            .collect();
        let all = vec![true; self.schema.fields().len()];
        stage_columns_used(&self.root, &all, &self.leaves, &mut used);
        used
    }

    /// Which `Utf8` columns of each leaf (in [`leaves`](Self::leaves)
    /// order, one flag per column of the leaf's schema) a source may give as
    /// `Dictionary(Int32, Utf8)` instead: columns that reach, unchanged,
    /// only the key of a windowed aggregation that groups them through the
    /// dictionary (the leaf's rows pass nothing but a watermark on the
    /// way). A Parquet source reads dictionary-encoded column chunks of
    /// such columns without decoding every row's string.
    pub fn leaf_dictionary_columns(&self) -> Vec<Vec<bool>> {
        self.dictionary_columns.clone()
    }

    /// The optimized DataFusion logical plan and the physical plan of the
    /// final stage, as text (for debugging and `EXPLAIN`-like output).
    pub async fn explain(&self) -> Result<String> {
        Ok(format!(
            "{}\n{}",
            self.root.logical.display_indent(),
            datafusion::physical_plan::displayable(self.root.physical.as_ref()).indent(false)
        ))
    }

    /// Runs a stateless plan over one batch's inputs: one `Vec<RecordBatch>`
    /// per leaf, in [`leaves`](Self::leaves) order (a static leaf gets the
    /// whole dataset). Returns the output rows in [`schema`](Self::schema).
    ///
    /// Rows keep their input order for plans without joins (partitions are
    /// contiguous ranges of the input and are returned in order).
    pub async fn execute(&mut self, inputs: Vec<Vec<RecordBatch>>) -> Result<Vec<RecordBatch>> {
        Ok(self
            .execute_batch(inputs, &BatchContext::default())
            .await?
            .rows)
    }

    /// Runs batch `ctx.batch_id` over its inputs (as [`execute`](Self::execute)),
    /// updating the state of stateful operators; returns the rows, the event
    /// times the watermark operators saw and the state operators' progress.
    pub async fn execute_batch(
        &mut self,
        inputs: Vec<Vec<RecordBatch>>,
        ctx: &BatchContext,
    ) -> Result<BatchOutput> {
        if inputs.len() != self.leaves.len() {
            return Err(Error::runtime(format!(
                "flow `{}`: the plan reads {} input(s) but was given {}",
                self.flow,
                self.leaves.len(),
                inputs.len()
            )));
        }
        let mut checked = Vec::with_capacity(inputs.len());
        for (leaf, batches) in self.leaves.iter().zip(inputs) {
            let mut v = Vec::with_capacity(batches.len());
            for b in batches {
                if b.num_rows() > 0 {
                    v.push(conform_input(
                        &self.flow,
                        leaf,
                        self.dictionary_columns.get(leaf.index).map(Vec::as_slice),
                        b,
                    )?);
                }
            }
            checked.push(v);
        }
        let mut out = BatchOutput::default();
        let env = Env {
            flow: &self.flow,
            inputs: &checked,
            ctx,
            partitions: self.partitions,
            task_ctx: &self.task_ctx,
        };
        let rows = run_stage(&mut self.root, &env, &mut out).await?;
        let mut result = Vec::with_capacity(rows.len());
        for batch in rows {
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
            result.push(b);
        }
        out.rows = result;
        let mut progress = Vec::new();
        visit_ops(&self.root, &mut |n| match &n.op {
            Op::Aggregate(a) => progress.push((n.id, a.progress())),
            Op::Dedup(d) => progress.push((n.id, d.progress())),
            Op::Join(j) => progress.push((n.id, j.progress())),
            Op::Watermark { .. } => {}
        });
        progress.sort_by_key(|(id, _)| *id);
        out.state_operators = progress.into_iter().map(|(_, p)| p).collect();
        Ok(out)
    }
}

/// What a stage needs while it runs.
struct Env<'a> {
    flow: &'a str,
    inputs: &'a [Vec<RecordBatch>],
    ctx: &'a BatchContext,
    partitions: usize,
    task_ctx: &'a Arc<TaskContext>,
}

type StageFuture<'a> = Pin<Box<dyn Future<Output = Result<Vec<RecordBatch>>> + Send + 'a>>;

fn run_stage<'a>(
    stage: &'a mut Stage,
    env: &'a Env<'a>,
    out: &'a mut BatchOutput,
) -> StageFuture<'a> {
    Box::pin(async move {
        let mut data: Vec<PartitionedRows> = Vec::with_capacity(stage.inputs.len());
        for input in stage.inputs.iter_mut() {
            let rows = match input {
                StageInput::Leaf(i) => env.inputs.get(*i).cloned().unwrap_or_default(),
                StageInput::Op(node) => run_op(node, env, out).await?,
            };
            data.push(Arc::new(split_rows(rows, env.partitions)));
        }
        // A stage that only passes an operator's rows on needs no DataFusion run.
        if let Some(slot) = stage.physical.downcast_ref::<SlotExec>() {
            if slot.is_identity() {
                let d = data.get(slot.index).cloned().unwrap_or_default();
                return Ok(d.iter().flatten().cloned().collect());
            }
        }
        let plan = rebind(&stage.physical, &data).map_err(|e| run_failure(env.flow, e))?;
        let parts = collect_partitioned(plan, env.task_ctx.clone())
            .await
            .map_err(|e| run_failure(env.flow, e))?;
        Ok(parts.into_iter().flatten().collect())
    })
}

async fn run_op(
    node: &mut OpNode,
    env: &Env<'_>,
    out: &mut BatchOutput,
) -> Result<Vec<RecordBatch>> {
    let mut inputs = Vec::with_capacity(node.children.len());
    for child in node.children.iter_mut() {
        inputs.push(run_stage(child, env, out).await?);
    }
    let mut inputs = inputs.into_iter();
    let rows = inputs.next().unwrap_or_default();
    match &mut node.op {
        Op::Watermark { column, delay_ms } => {
            let max = map_batches(&rows, env.partitions, |b| {
                watermark::max_millis(b.column(*column))
            })
            .into_iter()
            .flatten()
            .max();
            if let Some(m) = max {
                out.event_times.push((node.id, m, *delay_ms));
            }
            Ok(rows)
        }
        Op::Aggregate(a) => {
            let (rows, late) = a.process(rows, env.ctx, env.task_ctx).await?;
            out.late_rows.extend(late);
            Ok(rows)
        }
        Op::Dedup(d) => {
            let (rows, late) = d.process(rows, env.ctx)?;
            out.late_rows.extend(late);
            Ok(rows)
        }
        Op::Join(j) => {
            let right = inputs.next().unwrap_or_default();
            j.process(rows, right, env.ctx, env.task_ctx).await
        }
    }
}

/// Runs `plan` (whose only slot is slot 0) over `rows` split into
/// `partitions` parts; returns every partition's output.
pub(crate) async fn run_partitioned(
    plan: &Arc<dyn ExecutionPlan>,
    rows: Vec<RecordBatch>,
    partitions: usize,
    task_ctx: &Arc<TaskContext>,
) -> datafusion::error::Result<Vec<RecordBatch>> {
    let data = vec![Arc::new(split_rows(rows, partitions))];
    let plan = rebind(plan, &data)?;
    let parts = collect_partitioned(plan, task_ctx.clone()).await?;
    Ok(parts.into_iter().flatten().collect())
}

/// Marks in `used` the leaf columns `stage` reads to produce the output
/// columns flagged in `needed`.
fn stage_columns_used(stage: &Stage, needed: &[bool], leaves: &[Leaf], used: &mut [Vec<bool>]) {
    let width = |input: &StageInput| match input {
        StageInput::Leaf(l) => leaves.get(*l).map_or(0, |l| l.schema.fields().len()),
        StageInput::Op(n) => n.width,
    };
    let mut reads: Vec<Vec<bool>> = stage.inputs.iter().map(|i| vec![false; width(i)]).collect();
    plan_columns_used(&stage.physical, needed, &mut reads);
    for (input, read) in stage.inputs.iter().zip(reads) {
        match input {
            StageInput::Leaf(l) => {
                if let Some(u) = used.get_mut(*l) {
                    for (u, r) in u.iter_mut().zip(read) {
                        *u |= r;
                    }
                }
            }
            StageInput::Op(node) => {
                for (child, child_needs) in node.children.iter().zip(op_columns_used(node, read)) {
                    stage_columns_used(child, &child_needs, leaves, used);
                }
            }
        }
    }
}

/// Marks in `reads` (per slot) the slot columns `plan` reads to produce the
/// output columns flagged in `needed`. Projections, filters and
/// repartitions are followed column by column; any other operator counts
/// as reading every column of its inputs.
pub(crate) fn plan_columns_used(
    plan: &Arc<dyn ExecutionPlan>,
    needed: &[bool],
    reads: &mut [Vec<bool>],
) {
    use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
    use datafusion::physical_plan::filter::FilterExec;
    use datafusion::physical_plan::projection::ProjectionExec;
    use datafusion::physical_plan::repartition::RepartitionExec;

    if let Some(slot) = plan.downcast_ref::<SlotExec>() {
        if let Some(r) = reads.get_mut(slot.index) {
            slot.mark_needed(needed, r);
        }
        return;
    }
    let child_width = |c: &Arc<dyn ExecutionPlan>| c.schema().fields().len();
    if let Some(p) = plan.downcast_ref::<ProjectionExec>() {
        let mut child_needed = vec![false; child_width(p.input())];
        for (e, n) in p.expr().iter().zip(needed) {
            if *n {
                mark_expr_columns(&e.expr, &mut child_needed);
            }
        }
        return plan_columns_used(p.input(), &child_needed, reads);
    }
    if let Some(f) = plan.downcast_ref::<FilterExec>() {
        if f.projection().is_none() {
            let mut child_needed = needed.to_vec();
            mark_expr_columns(f.predicate(), &mut child_needed);
            return plan_columns_used(f.input(), &child_needed, reads);
        }
    }
    let passes_rows_on = plan.downcast_ref::<RepartitionExec>().is_some()
        || plan.downcast_ref::<CoalescePartitionsExec>().is_some();
    for c in plan.children() {
        let all;
        let child_needed = if passes_rows_on {
            needed
        } else {
            all = vec![true; child_width(c)];
            &all
        };
        plan_columns_used(c, child_needed, reads);
    }
}

/// Marks in `used` (one flag per input column) the columns `expr` reads.
pub(crate) fn mark_expr_columns(
    expr: &Arc<dyn datafusion::physical_expr::PhysicalExpr>,
    used: &mut [bool],
) {
    for c in datafusion::physical_expr::utils::collect_columns(expr) {
        if let Some(u) = used.get_mut(c.index()) {
            *u = true;
        }
    }
}

/// The columns of each of `node`'s inputs the operator reads when its
/// output columns flagged in `needed` are read.
fn op_columns_used(node: &OpNode, needed: Vec<bool>) -> Vec<Vec<bool>> {
    let child_width = |i: usize| {
        node.children
            .get(i)
            .map_or(0, |c| c.physical.schema().fields().len())
    };
    match &node.op {
        Op::Watermark { column, .. } => {
            let mut n = needed;
            if let Some(c) = n.get_mut(*column) {
                *c = true;
            }
            vec![n]
        }
        Op::Aggregate(a) => vec![a.input_columns_used()],
        Op::Dedup(_) | Op::Join(_) => (0..node.children.len())
            .map(|i| vec![true; child_width(i)])
            .collect(),
    }
}

fn visit_ops(stage: &Stage, f: &mut dyn FnMut(&OpNode)) {
    for i in &stage.inputs {
        if let StageInput::Op(n) = i {
            for c in &n.children {
                visit_ops(c, f);
            }
            f(n);
        }
    }
}

fn visit_ops_mut(stage: &mut Stage, f: &mut dyn FnMut(&mut OpNode)) {
    for i in &mut stage.inputs {
        if let StageInput::Op(n) = i {
            for c in &mut n.children {
                visit_ops_mut(c, f);
            }
            f(n);
        }
    }
}

/// `schema` without field or schema metadata (the watermark marks).
pub(crate) fn strip_metadata(schema: &SchemaRef) -> SchemaRef {
    Arc::new(arrow::datatypes::Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_metadata(Default::default()))
            .collect::<Vec<_>>(),
    ))
}

/// Rows in `schema` (same columns, other metadata).
pub(crate) fn with_schema(
    rows: &RecordBatch,
    schema: &SchemaRef,
) -> std::result::Result<RecordBatch, OpFailure> {
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        rows.columns().to_vec(),
        &RecordBatchOptions::new().with_row_count(Some(rows.num_rows())),
    )?)
}

/// The first `columns.len()` fields of `schema` (names, nullability,
/// metadata) with the columns' own types: `schema` itself when it already
/// matches them (a key may arrive dictionary-encoded, see
/// [`CompiledPlan::leaf_dictionary_columns`]).
pub(crate) fn schema_with_types(schema: &SchemaRef, columns: &[ArrayRef]) -> SchemaRef {
    let fields = &schema.fields()[..columns.len().min(schema.fields().len())];
    let same = fields.len() == schema.fields().len()
        && fields
            .iter()
            .zip(columns)
            .all(|(f, c)| f.data_type() == c.data_type());
    if same {
        return schema.clone();
    }
    let fields: Vec<Field> = fields
        .iter()
        .zip(columns)
        .map(|(f, c)| f.as_ref().clone().with_data_type(c.data_type().clone()))
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// `columns` as a batch of `n` rows in `schema`, each column cast to its
/// field's type where it differs (e.g. a dictionary or timezone variant).
pub(crate) fn batch_in_schema(
    schema: &SchemaRef,
    columns: Vec<ArrayRef>,
    n: usize,
) -> std::result::Result<RecordBatch, OpFailure> {
    let columns = columns
        .into_iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(c)
            } else {
                arrow::compute::cast(&c, f.data_type())
            }
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(n)),
    )?)
}

/// Below this many rows [`map_batches`] stays on the calling thread:
/// starting threads costs more than it saves on one file's rows.
pub(crate) const MIN_ROWS_FOR_THREADS: usize = 256 * 1024;

/// `f` applied to every batch, in order: on up to `threads` threads, each
/// taking a contiguous run of about the same number of rows, when there are
/// at least [`MIN_ROWS_FOR_THREADS`] rows; else on the calling thread.
pub(crate) fn map_batches<T: Send>(
    batches: &[RecordBatch],
    threads: usize,
    f: impl Fn(&RecordBatch) -> T + Sync,
) -> Vec<T> {
    let total: usize = batches.iter().map(|b| b.num_rows()).sum();
    if threads <= 1 || batches.len() < 2 || total < MIN_ROWS_FOR_THREADS {
        return batches.iter().map(f).collect();
    }
    let per = total.div_ceil(threads);
    let mut runs: Vec<&[RecordBatch]> = Vec::with_capacity(threads);
    let (mut start, mut rows) = (0, 0);
    for (i, b) in batches.iter().enumerate() {
        rows += b.num_rows();
        if rows >= per && runs.len() + 1 < threads {
            runs.push(&batches[start..=i]);
            (start, rows) = (i + 1, 0);
        }
    }
    if start < batches.len() {
        runs.push(&batches[start..]);
    }
    on_threads(&runs, |run| run.iter().map(&f).collect::<Vec<T>>())
        .into_iter()
        .flat_map(|r| r.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
        .collect()
}

/// `f` applied to every item, each on its own scoped thread; the results
/// in order (`Err` for an item whose thread panicked).
pub(crate) fn on_threads<I: Sync, T: Send>(
    items: &[I],
    f: impl Fn(&I) -> T + Sync,
) -> Vec<std::thread::Result<T>> {
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = items.iter().map(|i| s.spawn(move || f(i))).collect();
        handles.into_iter().map(|h| h.join()).collect()
    })
}

/// Splits rows into `n` contiguous partitions (slices, no copies).
fn split_rows(batches: Vec<RecordBatch>, n: usize) -> Vec<Vec<RecordBatch>> {
    let total: usize = batches.iter().map(|b| b.num_rows()).sum();
    let n = n.max(1);
    let mut parts: Vec<Vec<RecordBatch>> = vec![Vec::new(); n];
    if n == 1 || total < MIN_ROWS_TO_SPLIT {
        for b in batches {
            if b.num_rows() > 0 {
                push_sliced(&mut parts[0], b, MAX_SLICE_ROWS);
            }
        }
        return parts;
    }
    let per = total.div_ceil(n);
    let mut p = 0usize;
    let mut room = per;
    for b in batches {
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
    parts
}

/// `b` in the leaf's schema; the columns flagged in `dictionary` may stay
/// `Dictionary(Int32, Utf8)` in place of `Utf8`.
fn conform_input(
    flow: &str,
    leaf: &Leaf,
    dictionary: Option<&[bool]>,
    b: RecordBatch,
) -> Result<RecordBatch> {
    if Arc::ptr_eq(b.schema_ref(), &leaf.schema) || b.schema_ref() == &leaf.schema {
        return Ok(b);
    }
    let may_be_dictionary = |i: usize, t: &DataType| {
        dictionary.is_some_and(|d| d.get(i).copied().unwrap_or(false))
            && dictionary_ids::is_string_dictionary(t)
    };
    let same_types = b.num_columns() == leaf.schema.fields().len()
        && b.schema_ref()
            .fields()
            .iter()
            .zip(leaf.schema.fields())
            .enumerate()
            .all(|(i, (a, e))| {
                a.data_type() == e.data_type() || may_be_dictionary(i, a.data_type())
            });
    let mismatch = || {
        Error::runtime_with_help(
            format!(
                "flow `{}`: input {} ({}) has columns ({}) but the plan expects ({})",
                flow,
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
    let schema = schema_with_types(&leaf.schema, b.columns());
    RecordBatch::try_new_with_options(
        schema,
        b.columns().to_vec(),
        &RecordBatchOptions::new().with_row_count(Some(n)),
    )
    .map_err(|_| mismatch())
}

/// Per leaf, the columns that may arrive dictionary-encoded: the
/// dictionary key column of every aggregation whose input is a leaf's rows
/// passed on unchanged (identity stages, watermarks), where that leaf is
/// read nowhere else.
fn dictionary_columns(root: &Stage, leaves: &[Leaf]) -> Vec<Vec<bool>> {
    let mut flags: Vec<Vec<bool>> = leaves
        .iter()
        .map(|l| vec![false; l.schema.fields().len()])
        .collect();
    let mut reads = vec![0usize; leaves.len()];
    count_leaf_reads(root, &mut reads);
    visit_ops(root, &mut |n| {
        let Op::Aggregate(a) = &n.op else { return };
        let (Some(column), Some(child)) = (a.dictionary_input_column(), n.children.first()) else {
            return;
        };
        if let Some(l) = passed_leaf(child) {
            if reads.get(l) == Some(&1) {
                if let Some(f) = flags.get_mut(l).and_then(|f| f.get_mut(column)) {
                    *f = true;
                }
            }
        }
    });
    flags
}

/// How many times each leaf is an input of a stage.
fn count_leaf_reads(stage: &Stage, reads: &mut [usize]) {
    for i in &stage.inputs {
        match i {
            StageInput::Leaf(l) => {
                if let Some(r) = reads.get_mut(*l) {
                    *r += 1;
                }
            }
            StageInput::Op(n) => n.children.iter().for_each(|c| count_leaf_reads(c, reads)),
        }
    }
}

/// The leaf whose rows `stage` outputs unchanged (through identity stages
/// and watermarks), if any.
fn passed_leaf(stage: &Stage) -> Option<usize> {
    let slot = stage.physical.downcast_ref::<SlotExec>()?;
    if !slot.is_identity() {
        return None;
    }
    match stage.inputs.get(slot.index)? {
        StageInput::Leaf(l) => Some(*l),
        StageInput::Op(n) => match n.op {
            Op::Watermark { .. } => passed_leaf(n.children.first()?),
            _ => None,
        },
    }
}

fn run_failure(flow: &str, e: DataFusionError) -> Error {
    Error::runtime(format!(
        "flow `{}`: running the query failed: {}",
        flow,
        e.strip_backtrace()
    ))
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
        if let Some(ms) = watermark::max_millis(b.column(idx)) {
            best = Some(best.map_or(ms, |b| b.max(ms)));
        }
    }
    best
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
    crate::plan::sql::streaming_context(config)
}

/// Polls a future a few times without a runtime; None if it is still pending.
pub(crate) fn poll_once<F: Future>(f: F) -> Option<F::Output> {
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

/// Plans a stage: optimizes its logical plan and plans it physically once.
fn plan_stage(
    flow: &str,
    ctx: &SessionContext,
    logical: LogicalPlan,
    inputs: Vec<StageInput>,
) -> Result<Stage> {
    let state = ctx.state();
    let logical = state
        .optimize(&logical)
        .map_err(|e| plan_failure(flow, e))?;
    // Physical planning of these plans never waits (the leaves are
    // placeholders).
    let physical = poll_once(state.create_physical_plan(&logical))
        .ok_or_else(|| {
            Error::from(PlanError::new(format!(
                "flow `{flow}`: planning the query did not finish"
            )))
        })?
        .map_err(|e| plan_failure(flow, e))?;
    Ok(Stage {
        logical,
        physical,
        inputs,
    })
}

/// The inputs of the stage being built, with leaves used twice read once.
#[derive(Default)]
struct StageBuilder {
    inputs: Vec<StageInput>,
    leaf_slots: HashMap<usize, usize>,
}

/// Builds the stage tree from the resolved tree: each node's resolved plan
/// with its input scans replaced by its inputs' plans; stateful operators
/// on streams end a stage and start a new one above them.
struct Builder<'a> {
    flow: &'a str,
    partitions: usize,
    state_partitions: usize,
    ctx: &'a SessionContext,
    leaves: Vec<Leaf>,
    by_node: HashMap<*const PlanNode, usize>,
    watermarks: Vec<(String, i64)>,
    stage: StageBuilder,
    next_op: usize,
}

impl Builder<'_> {
    fn build(&mut self, r: &ResolvedNode) -> Result<LogicalPlan> {
        let fail = |e: DataFusionError| plan_failure(self.flow, e);
        match r.node.as_ref() {
            PlanNode::Source(spec) => return self.leaf(r, spec.streaming),
            PlanNode::DatasetRead { streaming, .. } => return self.leaf(r, *streaming),
            PlanNode::WithWatermark {
                input,
                column,
                delay,
                ..
            } if input.is_streaming() => {
                let delay_ms = delay.as_millis() as i64;
                self.watermarks.push((column.clone(), delay_ms));
                let col_index = r.schema.index_of(column).map_err(|_| {
                    PlanError::new(format!(
                        "flow `{}`: unknown watermark column `{column}`",
                        self.flow
                    ))
                })?;
                let child = self.sub_stage(&r.children[0])?;
                return self.op_slot(
                    Op::Watermark {
                        column: col_index,
                        delay_ms,
                    },
                    vec![child],
                    r.schema.clone(),
                );
            }
            PlanNode::Aggregate { input, .. } if input.is_streaming() => {
                let agg = find_aggregate(&r.plan).ok_or_else(|| {
                    PlanError::new(format!(
                        "flow `{}`: the aggregation has no aggregate step",
                        self.flow
                    ))
                })?;
                let child_schema = r.children[0].schema.clone();
                let op = AggregateOp::new(
                    self.flow,
                    agg,
                    &child_schema,
                    self.partitions,
                    self.state_partitions,
                    self.ctx,
                )?;
                let out_schema = op.output_schema();
                let child = self.sub_stage(&r.children[0])?;
                let scan = self.op_slot(Op::Aggregate(Box::new(op)), vec![child], out_schema)?;
                // Expressions over the aggregates are computed above the operator.
                return match &r.plan {
                    LogicalPlan::Projection(p) => {
                        let list: Vec<Expr> = p.expr.iter().map(|e| unqualify(e.clone())).collect();
                        LogicalPlanBuilder::from(scan)
                            .project(list)
                            .and_then(|b| b.build())
                            .map_err(fail)
                    }
                    _ => Ok(scan),
                };
            }
            PlanNode::DropDuplicates {
                input,
                columns,
                within_watermark,
            } if input.is_streaming() => {
                let child_schema = r.children[0].schema.clone();
                let op = DedupOp::new(
                    self.flow,
                    &child_schema,
                    columns.as_deref(),
                    *within_watermark,
                )?;
                let child = self.sub_stage(&r.children[0])?;
                return self.op_slot(Op::Dedup(Box::new(op)), vec![child], r.schema.clone());
            }
            PlanNode::Join {
                left,
                right,
                join_type,
                using,
                on,
            } if left.is_streaming() && right.is_streaming() => {
                let condition = if on.is_some() { r.exprs.first() } else { None };
                let op = JoinOp::new(
                    self.flow,
                    *join_type,
                    &r.children[0].schema,
                    &r.children[1].schema,
                    condition,
                    using,
                    &r.schema,
                    self.ctx,
                )?;
                let l = self.sub_stage(&r.children[0])?;
                let rr = self.sub_stage(&r.children[1])?;
                return self.op_slot(Op::Join(Box::new(op)), vec![l, rr], r.schema.clone());
            }
            _ => {}
        }
        let mut children = Vec::with_capacity(r.children.len());
        for c in &r.children {
            children.push(self.build(c)?);
        }
        match r.node.as_ref() {
            PlanNode::Union { .. } => union(children, &r.schema).map_err(fail),
            PlanNode::WithWatermark { .. } => Ok(children.remove(0)),
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

    /// Builds `r` as a stage of its own (the input of a stateful operator).
    fn sub_stage(&mut self, r: &ResolvedNode) -> Result<Stage> {
        let outer = std::mem::take(&mut self.stage);
        let built = self.build(r);
        let inner = std::mem::replace(&mut self.stage, outer);
        let built = conform(built?, &r.schema).map_err(|e| plan_failure(self.flow, e))?;
        plan_stage(self.flow, self.ctx, built, inner.inputs)
    }

    /// A scan of a stateful operator's output in the current stage.
    fn op_slot(&mut self, op: Op, children: Vec<Stage>, schema: SchemaRef) -> Result<LogicalPlan> {
        let id = self.next_op;
        self.next_op += 1;
        let slot = self.stage.inputs.len();
        self.stage.inputs.push(StageInput::Op(Box::new(OpNode {
            id,
            op,
            width: schema.fields().len(),
            children,
        })));
        self.slot_scan(slot, schema, &format!("op{id}"))
    }

    fn slot_scan(&self, index: usize, schema: SchemaRef, name: &str) -> Result<LogicalPlan> {
        let table = SlotTable {
            index,
            schema,
            partitions: self.partitions,
        };
        LogicalPlanBuilder::scan(
            TableReference::bare(name.to_string()),
            provider_as_source(Arc::new(table)),
            None,
        )
        .and_then(|b| b.build())
        .map_err(|e| plan_failure(self.flow, e))
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
        let slot = match self.stage.leaf_slots.get(&index) {
            Some(s) => *s,
            None => {
                let s = self.stage.inputs.len();
                self.stage.inputs.push(StageInput::Leaf(index));
                self.stage.leaf_slots.insert(index, s);
                s
            }
        };
        self.slot_scan(slot, r.schema.clone(), &format!("leaf{index}"))
    }
}

/// Drops the qualifiers of column references (they referred to the
/// aggregation's input scan; the operator's output scan has its own).
fn unqualify(e: Expr) -> Expr {
    e.transform_up(|sub| match sub {
        Expr::Column(c) => Ok(Transformed::yes(Expr::Column(Column::new_unqualified(
            c.name,
        )))),
        other => Ok(Transformed::no(other)),
    })
    .map(|t| t.data)
    .unwrap_or_else(|e| {
        Expr::Literal(
            datafusion::scalar::ScalarValue::Utf8(Some(e.to_string())),
            None,
        )
    })
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

const STATEFUL_LATER: &str = "is not supported by this build yet";

fn not_yet(flow: &str, what: String, help: &str) -> Error {
    PlanError::with_help(format!("flow `{flow}`: {what} {STATEFUL_LATER}"), help).into()
}

/// True when `df` aggregates a stream somewhere below (or at) it.
fn aggregates_stream(df: &DataFrame) -> bool {
    match df.node() {
        PlanNode::Aggregate { input, .. } if input.is_streaming() => true,
        _ => df.children().into_iter().any(aggregates_stream),
    }
}

/// Refuses what the engine cannot run on a stream, innermost first. (The
/// output-mode rules are the graph's query checks; this is the last guard.)
fn check_streaming_ops(flow: &str, df: &DataFrame) -> Result<()> {
    for c in df.children() {
        check_streaming_ops(flow, c)?;
    }
    match df.node() {
        PlanNode::Join {
            left,
            right,
            join_type,
            ..
        } => match (left.is_streaming(), right.is_streaming()) {
            (true, true) => match join_type {
                JoinType::LeftAnti => Err(PlanError::with_help(
                    format!("flow `{flow}`: a left_anti join of two streams cannot run: a left row can only be emitted once no right row can ever match it"),
                    "join the right side as a static table (read / read_table), or use a left_outer join and keep the rows whose right columns are null",
                )
                .into()),
                _ => Ok(()),
            },
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
        PlanNode::OrderBy { input, .. } if input.is_streaming() && !aggregates_stream(input) => Err(not_yet(
            flow,
            "order_by on a stream".to_string(),
            "sort a batch read instead (read / read_table, e.g. in a materialized view); sorting a stream needs an aggregation in complete mode",
        )),
        PlanNode::Limit { input, .. } if input.is_streaming() && !aggregates_stream(input) => Err(not_yet(
            flow,
            "limit on a stream".to_string(),
            "limit a batch read instead (read / read_table, e.g. in a materialized view)",
        )),
        _ => Ok(()),
    }
}

/// Sliding and session windows assign a row to several windows or merge
/// windows per key; evaluating them row by row is not possible: sliding
/// windows are expanded by the streaming aggregation, elsewhere they are
/// refused, as are session windows for now.
fn check_windows(flow: &str, root: &ResolvedNode) -> Result<()> {
    let mut found: Option<(String, &'static str)> = None;
    root.walk(&mut |n| {
        if found.is_some() {
            return;
        }
        let streaming_aggregate =
            matches!(n.node.as_ref(), PlanNode::Aggregate { input, .. } if input.is_streaming());
        for e in &n.exprs {
            let _ = e.apply(|sub| {
                if matches!(sub, Expr::Alias(_)) {
                    return Ok(TreeNodeRecursion::Continue);
                }
                if let Some(w) = window_call(sub) {
                    if !w.is_tumbling() && !streaming_aggregate {
                        found = Some((expr_text(sub), "sliding window"));
                        return Ok(TreeNodeRecursion::Stop);
                    }
                } else if session_window_call(sub).is_some() && !streaming_aggregate {
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
            format!("a {kind} `{text}` outside a streaming aggregation"),
            "group a stream by the window (group_by([window(ts, ...), ...])), or use a tumbling window such as window(ts, '10 minutes')",
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

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};

    fn batches(sizes: &[usize]) -> Vec<RecordBatch> {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let mut next = 0i64;
        sizes
            .iter()
            .map(|&n| {
                let values = Int64Array::from_iter_values(next..next + n as i64);
                next += n as i64;
                RecordBatch::try_new(schema.clone(), vec![Arc::new(values)]).unwrap()
            })
            .collect()
    }

    #[test]
    fn map_batches_keeps_the_order_on_threads_and_on_the_caller() {
        let first = |b: &RecordBatch| {
            (
                b.column(0).as_primitive::<Int64Type>().value(0),
                std::thread::current().id(),
            )
        };
        let me = std::thread::current().id();
        // Big enough for threads: 8 batches of 64 k rows, on 3 threads.
        let big = batches(&[65_536; 8]);
        let out = map_batches(&big, 3, first);
        let starts: Vec<i64> = out.iter().map(|(v, _)| *v).collect();
        assert_eq!(starts, (0..8).map(|i| i * 65_536).collect::<Vec<i64>>());
        let mut threads: Vec<_> = out.iter().map(|(_, t)| *t).collect();
        threads.dedup();
        assert_eq!(threads.len(), 3, "three contiguous runs");
        assert!(!threads.contains(&me));
        // Too few rows: the calling thread.
        let small = batches(&[1000, 2000, 3000]);
        let out = map_batches(&small, 2, first);
        assert_eq!(
            out.iter().map(|(v, _)| *v).collect::<Vec<_>>(),
            vec![0, 1000, 3000]
        );
        assert!(out.iter().all(|(_, t)| *t == me));
        assert!(map_batches(&[], 2, first).is_empty());
    }
}
