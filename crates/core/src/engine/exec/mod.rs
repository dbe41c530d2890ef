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
//! use pipelines_core::engine::exec::CompiledPlan;
//! use pipelines_core::Session;
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
pub(crate) mod batches;
mod clock;
mod columns;
mod compile;
mod dedup;
pub(crate) mod dictionary_ids;
mod guards;
mod join;
mod leaf;
mod leaf_dictionaries;
mod leaf_filters;
mod leaf_timestamps;
mod string_ids;
mod time_keyed;
pub mod watermark;

use std::collections::HashMap;
use std::future::Future;
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
pub use self::batches::max_event_time_ms;
use self::batches::*;
pub(crate) use self::batches::{retyped, strip_metadata, with_types};
use self::columns::*;
use self::compile::*;
use self::dedup::DedupOp;
use self::guards::*;
use self::join::JoinOp;
use self::leaf::{PartitionedRows, SlotExec, SlotTable};
pub use crate::engine::leaf_filter::LeafFilter;
use crate::error::{Error, PlanError, Result};
use crate::formats::OutputMode;
use crate::plan::ddl::schema_to_ddl;
use crate::plan::functions::{session_window_call, window_call};
use crate::plan::resolve::expr_text;
use crate::plan::{DataFrame, JoinType, PlanNode, ResolvedNode, ResolvedPlan};

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
    /// The batch's timestamp (`batchTimestampMs` of `offsets/N`), what
    /// `current_timestamp()` and `current_date()` give; None: the time the
    /// batch runs.
    pub batch_timestamp_ms: Option<i64>,
}

impl Default for BatchContext {
    fn default() -> Self {
        BatchContext {
            batch_id: 0,
            output_mode: OutputMode::Append,
            watermark_for_late_ms: None,
            watermark_for_eviction_ms: None,
            capture_late_rows: false,
            batch_timestamp_ms: None,
        }
    }
}

/// Progress of one stateful operator in one batch (Spark's `stateOperators`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
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
    /// The rows for the sink, in [`CompiledPlan::schema`] (where
    /// [`CompiledPlan::pass_dictionaries_to_output`] applies, some `Utf8`
    /// columns as `Dictionary(Int32, Utf8)` of the same values).
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
    /// Per leaf, the `Utf8` columns that may arrive already converted as by
    /// `CAST(column AS TIMESTAMP)` (see [`CompiledPlan::leaf_timestamp_columns`]).
    timestamp_columns: Vec<Vec<bool>>,
    /// The root stage reading some string columns as dictionaries and
    /// passing them on so (see [`CompiledPlan::pass_dictionaries_to_output`]).
    dictionary_output: Option<leaf_dictionaries::DictionaryOutput>,
    /// What `current_timestamp()` reads: set before each batch.
    clock: clock::Clock,
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
        let clock = clock::Clock::default();
        let mut builder = Builder {
            flow,
            partitions,
            state_partitions: state_partitions.max(1),
            ctx: &ctx,
            clock: &clock,
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
        let root = plan_stage(flow, &ctx, &clock, built, inputs)?;
        let task_ctx = ctx.task_ctx();
        let dictionary_columns = dictionary_columns(&root, &builder.leaves);
        let timestamp_columns = builder
            .leaves
            .iter()
            .map(|l| vec![false; l.schema.fields().len()])
            .collect();
        Ok(CompiledPlan {
            flow: flow.to_string(),
            leaves: builder.leaves,
            schema,
            watermarks: builder.watermarks,
            partitions,
            task_ctx,
            root,
            clock: clock.clone(),
            timestamp_columns,
            dictionary_columns,
            dictionary_output: None,
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
    pub fn restore_state(
        &mut self,
        dir: &crate::engine::storage::Location,
        version: Option<u64>,
    ) -> Result<()> {
        let mut result = Ok(());
        visit_ops_mut(&mut self.root, &mut |n| {
            if result.is_err() {
                return;
            }
            let d = dir.join(&n.id.to_string());
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

    /// Per leaf (in [`leaves`](Self::leaves) order), the condition on its
    /// columns that every output row meets, which its source may apply
    /// while decoding (see [`LeafFilter`]); None where the plan's filters
    /// cannot be moved to the leaf. Call it after
    /// [`push_timestamps_into_leaves`](Self::push_timestamps_into_leaves),
    /// under the same condition as projection pushdown (the runtime moves
    /// work into sources only when no late-rows sink is configured).
    pub fn leaf_filters(&self) -> Vec<Option<LeafFilter>> {
        leaf_filters::leaf_filters(&self.root, &self.leaves)
    }

    /// Removes the filters that make up leaf `leaf`'s
    /// [`LeafFilter`](Self::leaf_filters) from the plan: call it when the
    /// leaf's source drops every row failing that filter
    /// ([`Source::filter_rows`](crate::engine::source::Source::filter_rows)
    /// returned true), before
    /// [`pass_dictionaries_to_output`](Self::pass_dictionaries_to_output).
    /// The plan then no longer reads the filter's columns; the source still
    /// must (see [`LeafFilter::columns`]). Returns true when some filter
    /// went.
    pub fn drop_leaf_filter(&mut self, leaf: usize) -> bool {
        leaf_filters::drop_leaf_filter(&mut self.root, &self.leaves, leaf)
    }

    /// Moves `to_timestamp(column)` of string columns the plan reads only
    /// so into the leaves reading them (see `leaf_timestamps`): the leaf
    /// gives the column converted, then its rows may arrive
    /// dictionary-encoded ([`leaf_dictionary_columns`](Self::leaf_dictionary_columns)).
    /// A raw column passed on but read by no operator becomes NULLs, as
    /// with projection pushdown, so the caller applies both under the same
    /// condition (not when late rows, carrying every column, go to a sink).
    pub fn push_timestamps_into_leaves(&mut self) {
        let all = vec![true; self.schema.fields().len()];
        push_timestamps(&mut self.root, &all, &self.leaves);
        // A converted column may arrive dictionary-encoded (its slot parses
        // each dictionary value once); one without a pattern also converted.
        let conversions = leaf_conversions(&self.root, &self.leaves);
        for (flags, columns) in self.dictionary_columns.iter_mut().zip(&conversions) {
            for (flag, conversion) in flags.iter_mut().zip(columns) {
                *flag |= conversion.is_some();
            }
        }
        self.timestamp_columns = conversions
            .iter()
            .map(|l| l.iter().map(|c| matches!(c, Some(None))).collect())
            .collect();
    }

    /// Which `Utf8` columns of each leaf (in [`leaves`](Self::leaves)
    /// order, one flag per column of the leaf's schema) a source may give
    /// already converted, as `CAST(column AS TIMESTAMP)` converts them
    /// (`TIMESTAMP`, NULL for a string that is not one): columns whose
    /// leaf computes `to_timestamp(column)` without a pattern
    /// ([`push_timestamps_into_leaves`](Self::push_timestamps_into_leaves)).
    /// A JSON decoder then reads the value without building the string.
    pub fn leaf_timestamp_columns(&self) -> Vec<Vec<bool>> {
        self.timestamp_columns.clone()
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

    /// Lets string columns stay dictionary-encoded from the source to the
    /// output where nothing needs their text (see `leaf_dictionaries`):
    /// when the plan is one stage over one leaf that only compares `Utf8`
    /// columns with string literals, tests them for NULL or passes them on,
    /// those columns of the leaf may arrive as `Dictionary(Int32, Utf8)`
    /// ([`leaf_dictionary_columns`](Self::leaf_dictionary_columns)), and
    /// those that every input batch of a micro-batch has so (the others
    /// are decoded) reach the output so: the
    /// rows of [`BatchOutput::rows`] may then carry `Dictionary(Int32, Utf8)`
    /// where [`schema`](Self::schema) says `Utf8` (the same values). Call it
    /// after [`push_timestamps_into_leaves`](Self::push_timestamps_into_leaves),
    /// and only when whoever takes the output rows accepts dictionaries (a
    /// Parquet file sink). Returns true when some column does.
    pub fn pass_dictionaries_to_output(&mut self) -> bool {
        let one_leaf =
            self.leaves.len() == 1 && matches!(self.root.inputs.as_slice(), [StageInput::Leaf(0)]);
        if !one_leaf {
            return false;
        }
        let Some(output) = leaf_dictionaries::dictionary_output(&self.root.physical, &self.schema)
        else {
            return false;
        };
        if let Some(flags) = self.dictionary_columns.get_mut(output.leaf) {
            for c in output.leaf_columns() {
                if let Some(flag) = flags.get_mut(c) {
                    *flag = true;
                }
            }
        }
        self.dictionary_output = Some(output);
        true
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
                        self.timestamp_columns.get(leaf.index).map(Vec::as_slice),
                        b,
                    )?);
                }
            }
            checked.push(v);
        }
        // Dictionary-encoded string columns pass through where every batch
        // of the leaf has them so; the others are decoded for the plan.
        let mut output_schema = self.schema.clone();
        let mut swapped = None;
        if let Some(d) = self.dictionary_output.as_mut() {
            if let Some(batches) = checked.get_mut(d.leaf) {
                let is_dictionary = |b: &RecordBatch, c: usize| {
                    b.columns()
                        .get(c)
                        .is_some_and(|a| dictionary_ids::is_string_dictionary(a.data_type()))
                };
                let (mut keep, mut decode): (Vec<usize>, Vec<usize>) =
                    d.leaf_columns().partition(|&c| {
                        !batches.is_empty() && batches.iter().all(|b| is_dictionary(b, c))
                    });
                let variant = if keep.is_empty() {
                    None
                } else {
                    d.variant(&keep)
                };
                match variant {
                    Some((physical, schema)) => {
                        output_schema = schema;
                        swapped = Some(std::mem::replace(&mut self.root.physical, physical));
                    }
                    None => decode.append(&mut keep),
                }
                if !decode.is_empty() {
                    for b in batches.iter_mut() {
                        *b = decode_dictionaries(&self.flow, b, &decode)?;
                    }
                }
            }
        }
        self.clock.set(
            ctx.batch_timestamp_ms
                .unwrap_or_else(|| chrono::Utc::now().timestamp_millis()),
        );
        let mut out = BatchOutput::default();
        let env = Env {
            flow: &self.flow,
            inputs: &checked,
            ctx,
            partitions: self.partitions,
            task_ctx: &self.task_ctx,
        };
        let rows = run_stage(&mut self.root, &env, &mut out).await;
        if let Some(physical) = swapped {
            self.root.physical = physical;
        }
        let rows = rows?;
        let mut result = Vec::with_capacity(rows.len());
        for batch in rows {
            if batch.num_rows() == 0 {
                continue;
            }
            let n = batch.num_rows();
            let b = RecordBatch::try_new_with_options(
                output_schema.clone(),
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
    let own = operator_context(node, env.ctx);
    let ctx = own.as_ref().unwrap_or(env.ctx);
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
            let (rows, late) = a.process(rows, ctx, env.task_ctx).await?;
            out.late_rows.extend(late);
            Ok(rows)
        }
        Op::Dedup(d) => {
            let (rows, late) = d.process(rows, ctx)?;
            out.late_rows.extend(late);
            Ok(rows)
        }
        Op::Join(j) => {
            let right = inputs.next().unwrap_or_default();
            j.process(rows, right, ctx, env.task_ctx).await
        }
    }
}

/// The context `node` runs with when its input watermarks differ from the
/// batch's (Spark 4's per-operator watermarks): each is the minimum of its
/// inputs' output watermarks, and only a join lowers one, to the oldest
/// event time a pair it may still emit can carry. None: the batch's own.
/// A watermark of 0 (none yet) stays 0 everywhere, as in Spark.
fn operator_context(node: &OpNode, ctx: &BatchContext) -> Option<BatchContext> {
    let adjust = |w: Option<i64>| {
        w.map(|w| {
            if w <= 0 {
                w
            } else {
                input_watermark(node, w).max(0)
            }
        })
    };
    let late = adjust(ctx.watermark_for_late_ms);
    let eviction = adjust(ctx.watermark_for_eviction_ms);
    if late == ctx.watermark_for_late_ms && eviction == ctx.watermark_for_eviction_ms {
        return None;
    }
    Some(BatchContext {
        watermark_for_late_ms: late,
        watermark_for_eviction_ms: eviction,
        ..ctx.clone()
    })
}

/// The input watermark of `node` when the batch's is `w`: the minimum of
/// its inputs' output watermarks (`w` when none carries one).
fn input_watermark(node: &OpNode, w: i64) -> i64 {
    node.children
        .iter()
        .filter_map(|stage| stage_watermark(stage, w))
        .min()
        .unwrap_or(w)
}

/// The output watermark of the operators feeding `stage` (None when only
/// leaves do).
fn stage_watermark(stage: &Stage, w: i64) -> Option<i64> {
    stage
        .inputs
        .iter()
        .filter_map(|input| match input {
            StageInput::Op(n) => {
                let input = input_watermark(n, w);
                Some(match &n.op {
                    Op::Join(j) => j.output_watermark(input),
                    _ => input,
                })
            }
            StageInput::Leaf(_) => None,
        })
        .min()
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

/// `b` in the leaf's schema; the columns flagged in `dictionary` may stay
/// `Dictionary(Int32, Utf8)` in place of `Utf8`.
fn conform_input(
    flow: &str,
    leaf: &Leaf,
    dictionary: Option<&[bool]>,
    timestamps: Option<&[bool]>,
    b: RecordBatch,
) -> Result<RecordBatch> {
    if Arc::ptr_eq(b.schema_ref(), &leaf.schema) || b.schema_ref() == &leaf.schema {
        return Ok(b);
    }
    let flagged = |flags: Option<&[bool]>, i: usize| {
        flags.is_some_and(|d| d.get(i).copied().unwrap_or(false))
    };
    // A column the leaf converts may arrive dictionary-encoded or converted.
    let may_be_dictionary = |i: usize, t: &DataType| {
        (flagged(dictionary, i) && dictionary_ids::is_string_dictionary(t))
            || (flagged(timestamps, i) && *t == crate::plan::timestamp::udf::timestamp_type())
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

/// `b` with its `columns` that are `Dictionary(Int32, Utf8)` decoded to
/// `Utf8` (the plan reads them as strings).
fn decode_dictionaries(flow: &str, b: &RecordBatch, columns: &[usize]) -> Result<RecordBatch> {
    let mut arrays = b.columns().to_vec();
    let mut changes = Vec::new();
    for &c in columns {
        if let Some(a) = arrays.get_mut(c) {
            if dictionary_ids::is_string_dictionary(a.data_type()) {
                *a = arrow::compute::cast(a, &DataType::Utf8).map_err(|e| {
                    Error::runtime(format!(
                        "flow `{flow}`: decoding dictionary-encoded column {c} failed: {e}"
                    ))
                })?;
                changes.push((c, DataType::Utf8));
            }
        }
    }
    if changes.is_empty() {
        return Ok(b.clone());
    }
    let schema = batches::with_types(b.schema_ref(), changes, false);
    Ok(RecordBatch::try_new_with_options(
        schema,
        arrays,
        &RecordBatchOptions::new().with_row_count(Some(b.num_rows())),
    )?)
}

fn run_failure(flow: &str, e: DataFusionError) -> Error {
    Error::runtime(format!(
        "flow `{}`: running the query failed: {}",
        flow,
        e.strip_backtrace()
    ))
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
