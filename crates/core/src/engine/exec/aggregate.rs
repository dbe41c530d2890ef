//! Streaming aggregation: `group_by(keys).agg(...)` over a stream, with
//! state kept across micro-batches.
//!
//! Per batch: window keys are assigned (a sliding window puts a row into
//! every window that contains it, as Spark's `Expand` does); DataFusion's
//! partial aggregation reduces the batch's rows to one state row per key
//! (in parallel over the partitions); keys behind the watermark for late
//! rows are dropped and counted; the rest are merged into the operator's
//! state with DataFusion's accumulators (`merge_batch`). Then the output
//! mode decides what is emitted — append: the groups the watermark closed
//! (`window.end <= watermark`), once; update: the groups this batch changed;
//! complete: every group — and in append and update modes the closed groups
//! are evicted. The state is Arrow rows (keys, then each aggregate's partial
//! state), stored per batch in the [`StateStore`] as a delta of the changed
//! and removed keys.

use crate::engine::storage::Location;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, StructArray, UInt32Array};
use arrow::compute::{concat_batches, filter_record_batch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::common::hash_utils::{create_hashes, RandomState};
use datafusion::common::Column;
use datafusion::datasource::provider_as_source;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{Aggregate, EmitTo, Expr, LogicalPlan, LogicalPlanBuilder};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_plan::aggregates::group_values::new_group_values;
use datafusion::physical_plan::aggregates::order::GroupOrdering;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;

use super::accumulator::accumulator;
use super::leaf::SlotTable;
use super::time_keyed::{InlineWindow, TimeKeyed};
use super::watermark::timestamp_micros;
use super::{
    map_batches, on_threads, poll_once, run_partitioned, split_rows, BatchContext, OpFailure,
    StateOperatorProgress, MIN_ROWS_FOR_THREADS,
};
use crate::engine::sources::null_columns::null_column;
use crate::engine::state::{StateChanges, StateStore};
use crate::error::{Error, Result};
use crate::formats::OutputMode;
use crate::plan::functions::{session_window_call, window_call, window_struct_type};
use crate::plan::WATERMARK_METADATA_KEY;

/// A window grouping key, computed by the operator before aggregating.
#[derive(Clone, Debug)]
struct WindowKey {
    /// Index of the event-time column in the input.
    time_index: usize,
    size_us: i64,
    slide_us: i64,
    start_us: i64,
    /// The window struct `{start, end}` the output carries.
    struct_type: DataType,
    /// The type of the window start column the state is grouped by.
    start_type: DataType,
    /// Position among the grouping keys.
    position: usize,
}

/// A `session_window(ts, gap)` grouping key: each row opens a session
/// `[ts, ts + gap)`; sessions of one key that touch are merged.
#[derive(Clone, Debug)]
struct SessionKey {
    /// Index of the event-time column in the input.
    time_index: usize,
    gap_us: i64,
    struct_type: DataType,
    start_type: DataType,
    /// Position among the grouping keys.
    position: usize,
}

/// Which grouping key carries event time (for late rows and eviction).
#[derive(Clone, Copy, Debug)]
enum EventKey {
    /// A window struct key (its position, and its window in `windows`):
    /// its `end` decides.
    Window(usize, usize),
    /// The watermarked timestamp column itself (its position among the
    /// keys, and its index in the input).
    Column(usize, usize),
    /// A session window: the session's end decides.
    Session,
}

/// A streaming aggregation with its state.
pub(crate) struct AggregateOp {
    flow: String,
    input_schema: SchemaRef,
    description: String,
    windows: Vec<WindowKey>,
    session: Option<SessionKey>,
    prepared_schema: SchemaRef,
    partial_schema: SchemaRef,
    partial: Arc<dyn ExecutionPlan>,
    /// The faster partial aggregation by a time key, when it applies.
    time_keyed: Option<TimeKeyed>,
    partitions: usize,
    aggs: Vec<Arc<AggregateFunctionExpr>>,
    /// Each aggregate's number of partial-state columns.
    state_widths: Vec<usize>,
    n_keys: usize,
    state_schema: SchemaRef,
    output_schema: SchemaRef,
    event_key: Option<EventKey>,
    /// The state, one batch per hash partition of the keys.
    state: Vec<RecordBatch>,
    store: Option<StateStore>,
    pending: Option<StateChanges>,
    progress: StateOperatorProgress,
}

/// Below this many rows (state and new) a batch merges on one thread.
const PARALLEL_MERGE_ROWS: usize = 64 * 1024;

/// The hash that places keys in state partitions (fixed: placement only
/// matters within a process; the stored state is one set of rows).
const HASH_STATE: RandomState = RandomState::with_seed(0x5eed);

/// What merging one state partition produced.
struct PartOut {
    state: RecordBatch,
    output: RecordBatch,
    upserts: RecordBatch,
    removed: Vec<ArrayRef>,
    n_evicted: u64,
}

/// Finds the `Aggregate` in a resolved aggregate node's plan.
pub(crate) fn find_aggregate(plan: &LogicalPlan) -> Option<&Aggregate> {
    match plan {
        LogicalPlan::Aggregate(a) => Some(a),
        other => other.inputs().into_iter().find_map(find_aggregate),
    }
}

impl AggregateOp {
    /// Plans the aggregation `agg` (from a resolved plan, over a scan named
    /// `input` of `child_schema`): the batch's partial aggregation runs on
    /// `partitions` partitions, the state is kept in `state_partitions`.
    pub(crate) fn new(
        flow: &str,
        agg: &Aggregate,
        child_schema: &SchemaRef,
        partitions: usize,
        state_partitions: usize,
        ctx: &SessionContext,
    ) -> Result<AggregateOp> {
        let fail = |msg: String| -> Error {
            crate::error::PlanError::new(format!("flow `{flow}`: {msg}")).into()
        };
        let mut windows = Vec::new();
        let mut session: Option<SessionKey> = None;
        let mut prepared: Vec<Field> = child_schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        let mut keys = Vec::new();
        let mut event_key = None;
        for (pos, e) in agg.group_expr.iter().enumerate() {
            let name = e.schema_name().to_string();
            let name = match e {
                Expr::Alias(a) => a.name.clone(),
                _ => name,
            };
            if let Some(sw) = session_window_call(e) {
                if session.is_some() {
                    return Err(fail(format!(
                        "`{name}` is a second session window in one group_by; group by one session window"
                    )));
                }
                let t = event_time_column(child_schema, &sw.time_column, &name).map_err(&fail)?;
                let (time_index, struct_type, start_type) = (t.index, t.struct_type, t.start_type);
                if t.watermarked && event_key.is_none() {
                    event_key = Some(EventKey::Session);
                }
                prepared.push(Field::new("__session", start_type.clone(), true));
                session = Some(SessionKey {
                    time_index,
                    gap_us: sw.gap.as_micros() as i64,
                    struct_type,
                    start_type,
                    position: pos,
                });
                keys.push(Expr::Column(Column::new(Some("input"), "__session")).alias(name));
                continue;
            }
            if let Some(w) = window_call(e) {
                let t = event_time_column(child_schema, &w.time_column, &name).map_err(&fail)?;
                let (time_index, struct_type, start_type) = (t.index, t.struct_type, t.start_type);
                if t.watermarked && event_key.is_none() {
                    event_key = Some(EventKey::Window(pos, windows.len()));
                }
                // Groups are keyed by the window's start (a primitive key
                // groups much faster than a struct); the struct is built
                // for the output.
                let col_name = format!("__window{}", windows.len());
                prepared.push(Field::new(&col_name, start_type.clone(), true));
                windows.push(WindowKey {
                    time_index,
                    size_us: w.size.as_micros() as i64,
                    slide_us: w.slide.as_micros() as i64,
                    start_us: w.start.as_micros() as i64,
                    struct_type,
                    start_type,
                    position: pos,
                });
                keys.push(Expr::Column(Column::new(Some("input"), col_name)).alias(name));
            } else {
                if let Expr::Column(c) = strip_alias(e) {
                    if let Ok(i) = child_schema.index_of(&c.name) {
                        let f = child_schema.field(i);
                        if f.metadata().contains_key(WATERMARK_METADATA_KEY)
                            && matches!(f.data_type(), DataType::Timestamp(..))
                            && event_key.is_none()
                        {
                            event_key = Some(EventKey::Column(pos, i));
                        }
                    }
                }
                keys.push(e.clone());
            }
        }
        let prepared_schema = Arc::new(Schema::new_with_metadata(
            prepared,
            child_schema.metadata().clone(),
        ));
        let slot = SlotTable {
            index: 0,
            schema: prepared_schema.clone(),
            partitions,
        };
        let logical = LogicalPlanBuilder::scan("input", provider_as_source(Arc::new(slot)), None)
            .and_then(|b| b.aggregate(keys, agg.aggr_expr.clone()))
            .and_then(|b| b.build())
            .map_err(|e| {
                fail(format!(
                    "the aggregation could not be planned: {}",
                    e.strip_backtrace()
                ))
            })?;
        let names: Vec<String> = logical
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let state = ctx.state();
        let optimized = state.optimize(&logical).map_err(|e| {
            fail(format!(
                "the aggregation could not be planned: {}",
                e.strip_backtrace()
            ))
        })?;
        let physical = poll_once(state.create_physical_plan(&optimized))
            .ok_or_else(|| fail("planning the aggregation did not finish".into()))?
            .map_err(|e| {
                fail(format!(
                    "the aggregation could not be planned: {}",
                    e.strip_backtrace()
                ))
            })?;
        let first = deepest_aggregate(&physical)
            .ok_or_else(|| fail("the aggregation has no aggregate step".into()))?;
        let partial = AggregateExec::try_new(
            AggregateMode::Partial,
            first.group_expr().clone(),
            first.aggr_expr().to_vec(),
            first.filter_expr().to_vec(),
            first.input().clone(),
            first.input_schema(),
        )
        .map_err(|e| {
            fail(format!(
                "the aggregation could not be planned: {}",
                e.strip_backtrace()
            ))
        })?;
        let time_keyed = if session.is_none() {
            TimeKeyed::new(&partial).map(|tk| match windows.as_slice() {
                // One tumbling window: its start is computed while grouping
                // instead of into a column first.
                [w] if w.size_us == w.slide_us => tk.with_inline_window(
                    child_schema.fields().len(),
                    InlineWindow {
                        time_index: w.time_index,
                        start_us: w.start_us,
                        slide_us: w.slide_us,
                    },
                ),
                _ => tk,
            })
        } else {
            None
        };
        let aggs = first.aggr_expr().to_vec();
        let state_widths = aggs
            .iter()
            .map(|a| a.state_fields().map(|f| f.len()))
            .collect::<datafusion::error::Result<Vec<_>>>()
            .map_err(|e| {
                fail(format!(
                    "the aggregation could not be planned: {}",
                    e.strip_backtrace()
                ))
            })?;
        let n_keys = first.group_expr().expr().len();
        let partial_schema = partial.schema();
        // Sessions also keep their end (the last event's time plus the gap).
        let state_schema = match &session {
            Some(sk) => {
                let mut f: Vec<Field> = partial_schema
                    .fields()
                    .iter()
                    .map(|f| f.as_ref().clone())
                    .collect();
                f.push(Field::new("__session_end", sk.start_type.clone(), true));
                Arc::new(Schema::new(f))
            }
            None => partial_schema.clone(),
        };
        let mut out_fields = Vec::new();
        for (i, f) in state_schema.fields()[..n_keys].iter().enumerate() {
            let t = windows
                .iter()
                .find(|w| w.position == i)
                .map(|w| w.struct_type.clone())
                .or_else(|| {
                    session
                        .as_ref()
                        .filter(|sk| sk.position == i)
                        .map(|sk| sk.struct_type.clone())
                })
                .unwrap_or_else(|| f.data_type().clone());
            out_fields.push(Field::new(&names[i], t, true));
        }
        for (i, a) in aggs.iter().enumerate() {
            let f = a.field();
            out_fields.push(Field::new(&names[n_keys + i], f.data_type().clone(), true));
        }
        let output_schema = Arc::new(Schema::new(out_fields));
        let description = format!(
            "aggregate [{}] -> [{}]",
            names[..n_keys].join(", "),
            names[n_keys..].join(", ")
        );
        Ok(AggregateOp {
            flow: flow.to_string(),
            input_schema: child_schema.clone(),
            description,
            windows,
            session,
            prepared_schema,
            partial_schema,
            partial: Arc::new(partial),
            time_keyed,
            partitions,
            aggs,
            state_widths,
            n_keys,
            state: vec![RecordBatch::new_empty(state_schema.clone()); state_partitions.max(1)],
            state_schema,
            output_schema,
            event_key,
            store: None,
            pending: None,
            progress: StateOperatorProgress::new("aggregate"),
        })
    }

    /// What the shape check records for this operator.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{} state ({})",
            self.description,
            crate::plan::ddl::schema_to_ddl(&self.state_schema)
        )
    }

    /// The rows the operator receives.
    pub(crate) fn input_schema(&self) -> SchemaRef {
        self.input_schema.clone()
    }

    /// Which columns of the operator's input the aggregation reads: its
    /// keys, the arguments of its aggregates and the windows' time columns.
    pub(crate) fn input_columns_used(&self) -> Vec<bool> {
        let mut prepared = vec![vec![false; self.prepared_schema.fields().len()]];
        match self.partial.downcast_ref::<AggregateExec>() {
            Some(agg) => {
                let input = agg.input();
                let mut needed = vec![false; input.schema().fields().len()];
                let exprs = agg
                    .group_expr()
                    .expr()
                    .iter()
                    .map(|(e, _)| e.clone())
                    .chain(agg.aggr_expr().iter().flat_map(|a| a.expressions()))
                    .chain(agg.filter_expr().iter().flatten().cloned());
                for e in exprs {
                    super::mark_expr_columns(&e, &mut needed);
                }
                super::plan_columns_used(input, &needed, &mut prepared);
            }
            None => prepared[0].iter_mut().for_each(|u| *u = true),
        }
        let prepared = prepared.pop().unwrap_or_default();
        let mut used: Vec<bool> = prepared
            .into_iter()
            .take(self.input_schema.fields().len())
            .collect();
        let times = self
            .windows
            .iter()
            .map(|w| w.time_index)
            .chain(self.session.as_ref().map(|s| s.time_index));
        for t in times {
            if let Some(u) = used.get_mut(t) {
                *u = true;
            }
        }
        used
    }

    /// The input column that may arrive as `Dictionary(Int32, Utf8)`
    /// instead of `Utf8`: the only key beside a window when the partial
    /// aggregation is time-keyed and no aggregate reads the column.
    pub(crate) fn dictionary_input_column(&self) -> Option<usize> {
        let c = self.time_keyed.as_ref()?.dictionary_key()?;
        let field = self.input_schema.fields().get(c)?;
        (field.data_type() == &DataType::Utf8).then_some(c)
    }

    /// The rows the operator emits.
    pub(crate) fn output_schema(&self) -> SchemaRef {
        self.output_schema.clone()
    }

    /// Opens the state at `dir` and loads the state of batch `version`
    /// (None: no batch committed yet, empty state).
    pub(crate) fn restore(&mut self, dir: &Location, version: Option<u64>) -> Result<()> {
        let store = StateStore::open(dir, self.state_schema.clone(), self.n_keys)?;
        let loaded = store.load_or_empty(version)?;
        self.state = self.split_by_key(&loaded).map_err(|e| {
            Error::checkpoint(
                dir.shown(),
                format!("cannot partition the loaded state: {e}"),
            )
        })?;
        self.store = Some(store);
        Ok(())
    }

    /// Writes the state changes of batch `version`.
    pub(crate) fn commit(&mut self, version: u64, whole: bool) -> Result<()> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        store.commit_changes(version, self.pending.take(), &self.state, whole)
    }

    /// The progress of the last batch.
    pub(crate) fn progress(&self) -> StateOperatorProgress {
        self.progress.clone()
    }

    /// Runs one batch: `input` are the rows reaching the aggregation.
    /// Returns the rows to emit, and (when the batch asks for them) the
    /// input rows that fell into at least one group dropped as late.
    pub(crate) async fn process(
        &mut self,
        input: Vec<RecordBatch>,
        ctx: &BatchContext,
        task_ctx: &Arc<TaskContext>,
    ) -> Result<(Vec<RecordBatch>, Vec<RecordBatch>)> {
        let fail = |e: &dyn std::fmt::Display| {
            Error::runtime(format!("flow `{}`: aggregation failed: {e}", self.flow))
        };
        let mut late_rows = Vec::new();
        if ctx.capture_late_rows && self.drops_late_rows(ctx.output_mode) {
            if let (Some(k), Some(wm)) = (self.event_key, ctx.watermark_for_late_ms) {
                for b in &input {
                    let mask = self.late_input_rows(b, k, wm).map_err(|e| fail(&e))?;
                    if mask.true_count() > 0 {
                        let rows = filter_record_batch(b, &mask).map_err(|e| fail(&e))?;
                        let schema = super::strip_metadata(&self.input_schema);
                        // In the declared types (a key may arrive dictionary-encoded).
                        late_rows.push(
                            super::batch_in_schema(
                                &schema,
                                rows.columns().to_vec(),
                                rows.num_rows(),
                            )
                            .map_err(|e| fail(&e))?,
                        );
                    }
                }
            }
        }
        // 1. Window keys, then the partial aggregation of this batch.
        let input: Vec<RecordBatch> = input.into_iter().filter(|b| b.num_rows() > 0).collect();
        let prepare_all = |input: &[RecordBatch]| {
            map_batches(input, self.partitions, |b| self.prepare(b.clone()))
                .into_iter()
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| fail(&e))
        };
        let new = if input.is_empty() {
            RecordBatch::new_empty(self.state_schema.clone())
        } else {
            let (fast, prepared) = match &self.time_keyed {
                Some(tk) if tk.has_inline_window() => {
                    // The window column is left empty: the grouping computes it.
                    let rows = input
                        .iter()
                        .map(|b| {
                            self.with_prepared_column(
                                b,
                                null_column(&self.windows[0].start_type, b.num_rows()),
                            )
                        })
                        .collect::<std::result::Result<Vec<_>, _>>()
                        .map_err(|e| fail(&e))?;
                    (self.run_time_keyed(tk, &rows).map_err(|e| fail(&e))?, None)
                }
                Some(tk) => {
                    let prepared = prepare_all(&input)?;
                    (
                        self.run_time_keyed(tk, &prepared).map_err(|e| fail(&e))?,
                        Some(prepared),
                    )
                }
                None => (None, None),
            };
            let parts = match fast {
                Some(parts) => parts,
                None => {
                    let prepared = match prepared {
                        Some(p) => p,
                        None => prepare_all(&input)?,
                    };
                    // In the declared types (a key may arrive dictionary-encoded).
                    let prepared = prepared
                        .into_iter()
                        .map(|b| {
                            let n = b.num_rows();
                            super::batch_in_schema(&self.prepared_schema, b.columns().to_vec(), n)
                        })
                        .collect::<std::result::Result<Vec<_>, _>>()
                        .map_err(|e| fail(&e))?;
                    run_partitioned(&self.partial, prepared, self.partitions, task_ctx)
                        .await
                        .map_err(|e| fail(&e.strip_backtrace()))?
                }
            };
            let partial = concat_batches(&self.partial_schema, &parts).map_err(|e| fail(&e))?;
            self.with_session_end(partial).map_err(|e| fail(&e))?
        };

        // 2. Keys behind the watermark for late rows are dropped.
        let mut dropped = 0u64;
        let new = match (self.event_key, ctx.watermark_for_late_ms) {
            (Some(k), Some(wm)) if new.num_rows() > 0 && self.drops_late_rows(ctx.output_mode) => {
                let late = self.closed_mask(&new, k, wm).map_err(|e| fail(&e))?;
                if late.true_count() > 0 {
                    let late_rows = filter_record_batch(&new, &late).map_err(|e| fail(&e))?;
                    dropped =
                        distinct_keys(&late_rows.columns()[..self.n_keys]).map_err(|e| fail(&e))?;
                    let keep = arrow::compute::not(&late).map_err(|e| fail(&e))?;
                    filter_record_batch(&new, &keep).map_err(|e| fail(&e))?
                } else {
                    new
                }
            }
            _ => new,
        };

        // 3.-4. Merge into the state, emit, evict: per hash partition of the
        // keys, in parallel when there is enough to do.
        let parts_new = self.split_by_key(&new).map_err(|e| fail(&e))?;
        let work: usize = parts_new.iter().map(|b| b.num_rows()).sum::<usize>()
            + self.state.iter().map(|b| b.num_rows()).sum::<usize>();
        let this = &*self;
        let results: Vec<std::result::Result<PartOut, OpFailure>> =
            if work < PARALLEL_MERGE_ROWS || parts_new.len() == 1 {
                this.state
                    .iter()
                    .zip(&parts_new)
                    .map(|(st, nw)| this.merge_part(st, nw, ctx))
                    .collect()
            } else {
                let pairs: Vec<_> = this.state.iter().zip(&parts_new).collect();
                on_threads(&pairs, |(st, nw)| this.merge_part(st, nw, ctx))
                    .into_iter()
                    .map(|r| {
                        r.unwrap_or_else(|_| {
                            Err(OpFailure("a state partition failed unexpectedly".into()))
                        })
                    })
                    .collect()
            };
        let mut outputs = Vec::new();
        let mut states = Vec::new();
        let mut upserts = Vec::new();
        let mut removed_parts: Vec<Vec<ArrayRef>> = Vec::new();
        let mut n_evicted = 0u64;
        for r in results {
            let r = r.map_err(|e| fail(&e))?;
            if r.output.num_rows() > 0 {
                outputs.push(r.output);
            }
            states.push(r.state);
            upserts.push(r.upserts);
            removed_parts.push(r.removed);
            n_evicted += r.n_evicted;
        }
        self.state = states;
        let upserts = concat_batches(&self.state_schema, &upserts).map_err(|e| fail(&e))?;
        let removed: Vec<ArrayRef> = (0..self.n_keys)
            .map(|k| {
                let cols: Vec<&dyn Array> = removed_parts
                    .iter()
                    .filter(|p| !p.is_empty())
                    .map(|p| p[k].as_ref())
                    .collect();
                if cols.is_empty() {
                    Ok(arrow::array::new_empty_array(
                        self.state_schema.field(k).data_type(),
                    ))
                } else {
                    arrow::compute::concat(&cols)
                }
            })
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| fail(&e))?;

        self.progress = StateOperatorProgress {
            operator: "aggregate".into(),
            num_rows_total: self.state.iter().map(|b| b.num_rows() as u64).sum(),
            num_rows_updated: upserts.num_rows() as u64,
            num_rows_removed: n_evicted,
            num_rows_dropped_by_watermark: dropped,
            memory_used_bytes: self
                .state
                .iter()
                .map(|b| b.get_array_memory_size() as u64)
                .sum(),
        };
        self.pending = Some((upserts, removed));
        Ok((outputs, late_rows))
    }

    /// The partial aggregation by a time key (`TimeKeyed`) of `rows`, split
    /// across the partitions' threads when there are enough; None when it
    /// does not apply to these rows.
    fn run_time_keyed(
        &self,
        tk: &TimeKeyed,
        rows: &[RecordBatch],
    ) -> std::result::Result<Option<Vec<RecordBatch>>, OpFailure> {
        let total: usize = rows.iter().map(|b| b.num_rows()).sum();
        let threads = if total >= MIN_ROWS_FOR_THREADS {
            self.partitions
        } else {
            1
        };
        let parts = split_rows(rows.to_vec(), threads);
        let results: Vec<std::result::Result<Option<RecordBatch>, OpFailure>> = if threads == 1 {
            parts.iter().map(|p| tk.run(p)).collect()
        } else {
            on_threads(&parts, |p| tk.run(p))
                .into_iter()
                .map(|r| {
                    r.unwrap_or_else(|_| {
                        Err(OpFailure(
                            "a partial aggregation failed unexpectedly".into(),
                        ))
                    })
                })
                .collect()
        };
        results.into_iter().collect()
    }

    /// Splits state-schema rows by the hash of their partition keys (every
    /// key but a session window), one batch per state partition.
    fn split_by_key(&self, rows: &RecordBatch) -> std::result::Result<Vec<RecordBatch>, OpFailure> {
        let n = self.state.len().max(1);
        let keys: Vec<ArrayRef> = (0..self.n_keys)
            .filter(|i| self.session.as_ref().is_none_or(|sk| sk.position != *i))
            .map(|i| rows.column(i).clone())
            .collect();
        if n == 1 || keys.is_empty() {
            let mut v = vec![RecordBatch::new_empty(self.state_schema.clone()); n];
            v[0] = rows.clone();
            return Ok(v);
        }
        let mut hashes = vec![0u64; rows.num_rows()];
        create_hashes(&keys, &HASH_STATE, &mut hashes)?;
        let mut idx: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (i, h) in hashes.iter().enumerate() {
            idx[(*h % n as u64) as usize].push(i as u32);
        }
        idx.into_iter()
            .map(|ix| {
                Ok(arrow::compute::take_record_batch(
                    rows,
                    &UInt32Array::from(ix),
                )?)
            })
            .collect()
    }

    /// Merges one partition's new rows into its state; emits and evicts.
    fn merge_part(
        &self,
        state: &RecordBatch,
        new: &RecordBatch,
        ctx: &BatchContext,
    ) -> std::result::Result<PartOut, OpFailure> {
        let old_rows = state.num_rows();
        let all = concat_batches(&self.state_schema, [state, new])?;
        if all.num_rows() == 0 {
            // Nothing in this partition (some accumulators return no state
            // columns for zero groups).
            return Ok(PartOut {
                state: all.clone(),
                output: RecordBatch::new_empty(self.output_schema.clone()),
                upserts: all,
                removed: Vec::new(),
                n_evicted: 0,
            });
        }
        let (merged, touched, replaced) = if self.session.is_some() {
            self.merge_sessions(&all, old_rows)?
        } else {
            let (m, t) = self.merge_groups(&all, old_rows)?;
            (m, t, None)
        };
        let n_groups = merged.num_rows();
        let evict = match (
            self.event_key,
            ctx.watermark_for_eviction_ms,
            ctx.output_mode,
        ) {
            (Some(k), Some(wm), OutputMode::Append | OutputMode::Update) => {
                self.closed_mask(&merged, k, wm)?
            }
            _ => BooleanArray::from(vec![false; n_groups]),
        };
        let touched = BooleanArray::from(touched);
        let emit = match ctx.output_mode {
            OutputMode::Complete => BooleanArray::from(vec![true; n_groups]),
            OutputMode::Update => touched.clone(),
            OutputMode::Append => evict.clone(),
        };
        let emitted = filter_record_batch(&merged, &emit)?;
        let output = self.finalize(&emitted)?;
        let keep = arrow::compute::not(&evict)?;
        let evicted = filter_record_batch(&merged, &evict)?;
        let upsert_mask = arrow::compute::and(&touched, &keep)?;
        let upserts = filter_record_batch(&merged, &upsert_mask)?;
        let state = filter_record_batch(&merged, &keep)?;
        let mut removed: Vec<ArrayRef> = evicted.columns()[..self.n_keys].to_vec();
        if let Some(old) = replaced.filter(|r| r.num_rows() > 0) {
            // Sessions merged into another one: their old keys go.
            removed = removed
                .iter()
                .zip(old.columns())
                .map(|(a, b)| arrow::compute::concat(&[a.as_ref(), b.as_ref()]))
                .collect::<std::result::Result<_, _>>()?;
        }
        Ok(PartOut {
            state,
            output,
            upserts,
            removed,
            n_evicted: evicted.num_rows() as u64,
        })
    }

    /// Input rows with at least one window (or event time) at or behind `wm_ms`.
    fn late_input_rows(
        &self,
        rows: &RecordBatch,
        key: EventKey,
        wm_ms: i64,
    ) -> std::result::Result<BooleanArray, OpFailure> {
        let wm_us = wm_ms.saturating_mul(1000);
        match key {
            EventKey::Column(_, i) => {
                let t = timestamp_micros(rows.column(i))
                    .ok_or_else(|| OpFailure("the event-time key is not a timestamp".into()))?;
                Ok(t.iter()
                    .map(|v| Some(v.is_some_and(|v| v <= wm_us)))
                    .collect())
            }
            EventKey::Session => {
                let sk = self
                    .session
                    .as_ref()
                    .ok_or_else(|| OpFailure("no session key".into()))?;
                let t = timestamp_micros(rows.column(sk.time_index)).ok_or_else(|| {
                    OpFailure("the session's time column is not a timestamp".into())
                })?;
                Ok(t.iter()
                    .map(|v| Some(v.is_some_and(|v| v + sk.gap_us <= wm_us)))
                    .collect())
            }
            EventKey::Window(_, w) => {
                let w = &self.windows[w];
                let t = timestamp_micros(rows.column(w.time_index)).ok_or_else(|| {
                    OpFailure("the window's time column is not a timestamp".into())
                })?;
                let slide = w.slide_us.max(1);
                Ok(t.iter()
                    .map(|v| {
                        Some(v.is_some_and(|t| {
                            // The earliest window holding t ends first.
                            let last_start = t - (t - w.start_us).rem_euclid(slide);
                            let mut s = last_start;
                            while s - slide + w.size_us > t {
                                s -= slide;
                            }
                            s + w.size_us <= wm_us
                        }))
                    })
                    .collect())
            }
        }
    }

    /// Partial rows in the state schema: sessions get their end column.
    fn with_session_end(
        &self,
        partial: RecordBatch,
    ) -> std::result::Result<RecordBatch, OpFailure> {
        let Some(sk) = &self.session else {
            return Ok(partial);
        };
        let starts = timestamp_micros(partial.column(sk.position))
            .ok_or_else(|| OpFailure("the session start is not a timestamp".into()))?;
        let ends: arrow::array::TimestampMicrosecondArray =
            starts.iter().map(|s| s.map(|s| s + sk.gap_us)).collect();
        let mut cols = partial.columns().to_vec();
        cols.push(Arc::new(ends.with_data_type(sk.start_type.clone())));
        Ok(RecordBatch::try_new_with_options(
            self.state_schema.clone(),
            cols,
            &RecordBatchOptions::new().with_row_count(Some(partial.num_rows())),
        )?)
    }

    /// Merges rows with equal keys: (merged state, touched by the new rows).
    fn merge_groups(
        &self,
        all: &RecordBatch,
        old_rows: usize,
    ) -> std::result::Result<(RecordBatch, Vec<bool>), OpFailure> {
        let key_schema = Arc::new(Schema::new(
            self.state_schema.fields()[..self.n_keys].to_vec(),
        ));
        let mut groups = new_group_values(key_schema, &GroupOrdering::None)?;
        let mut ids = Vec::with_capacity(all.num_rows());
        groups.intern(&all.columns()[..self.n_keys], &mut ids)?;
        let n_groups = groups.len();
        let mut touched = vec![false; n_groups];
        for g in &ids[old_rows..] {
            touched[*g] = true;
        }
        let mut columns = groups.emit(EmitTo::All)?;
        columns.extend(self.merge_states(all, &ids, n_groups)?);
        let merged = RecordBatch::try_new_with_options(
            self.state_schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(n_groups)),
        )?;
        Ok((merged, touched))
    }

    /// The aggregates' states of `all` merged into `n` groups.
    fn merge_states(
        &self,
        all: &RecordBatch,
        ids: &[usize],
        n: usize,
    ) -> std::result::Result<Vec<ArrayRef>, OpFailure> {
        let mut out = Vec::new();
        let mut col = self.n_keys;
        for (a, &n_state) in self.aggs.iter().zip(&self.state_widths) {
            let mut acc = accumulator(a)?;
            acc.merge_batch(&all.columns()[col..col + n_state], ids, n)?;
            out.extend(acc.state(EmitTo::All)?);
            col += n_state;
        }
        Ok(out)
    }

    /// Merges sessions of equal keys that touch (`next.start <= end`):
    /// (merged state, touched by the new rows, keys of old sessions merged
    /// into an earlier one).
    #[allow(clippy::type_complexity)]
    fn merge_sessions(
        &self,
        all: &RecordBatch,
        old_rows: usize,
    ) -> std::result::Result<(RecordBatch, Vec<bool>, Option<RecordBatch>), OpFailure> {
        let sk = self
            .session
            .as_ref()
            .ok_or_else(|| OpFailure("no session key".into()))?;
        let n = all.num_rows();
        let pos = sk.position;
        let end_col = all.num_columns() - 1;
        let others: Vec<usize> = (0..self.n_keys).filter(|i| *i != pos).collect();
        let mut kid = vec![0usize; n];
        if !others.is_empty() {
            let schema = Arc::new(Schema::new(
                others
                    .iter()
                    .map(|i| self.state_schema.field(*i).clone())
                    .collect::<Vec<_>>(),
            ));
            let mut g = new_group_values(schema, &GroupOrdering::None)?;
            let cols: Vec<ArrayRef> = others.iter().map(|i| all.column(*i).clone()).collect();
            kid.clear();
            g.intern(&cols, &mut kid)?;
        }
        let starts = timestamp_micros(all.column(pos))
            .ok_or_else(|| OpFailure("the session start is not a timestamp".into()))?;
        let ends = timestamp_micros(all.column(end_col))
            .ok_or_else(|| OpFailure("the session end is not a timestamp".into()))?;
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|i| (kid[*i], starts.value(*i)));
        let mut sid = vec![0usize; n];
        let mut first: Vec<u32> = Vec::new();
        let mut s_start: Vec<i64> = Vec::new();
        let mut s_end: Vec<i64> = Vec::new();
        let mut touched: Vec<bool> = Vec::new();
        let mut prev: Option<usize> = None;
        for &i in &order {
            let (s, e) = (starts.value(i), ends.value(i));
            let same =
                prev.is_some_and(|p| kid[p] == kid[i] && s <= *s_end.last().unwrap_or(&i64::MIN));
            if !same {
                first.push(i as u32);
                s_start.push(s);
                s_end.push(e);
                touched.push(false);
            } else if let Some(last) = s_end.last_mut() {
                *last = (*last).max(e);
            }
            let id = first.len() - 1;
            sid[i] = id;
            if i >= old_rows {
                touched[id] = true;
            }
            prev = Some(i);
        }
        let n_sessions = first.len();
        let firsts = UInt32Array::from(first);
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(all.num_columns());
        for i in 0..self.n_keys {
            if i == pos {
                let a = arrow::array::TimestampMicrosecondArray::from(s_start.clone())
                    .with_data_type(sk.start_type.clone());
                columns.push(Arc::new(a));
            } else {
                columns.push(arrow::compute::take(all.column(i), &firsts, None)?);
            }
        }
        columns.extend(self.merge_states(all, &sid, n_sessions)?);
        let e = arrow::array::TimestampMicrosecondArray::from(s_end)
            .with_data_type(sk.start_type.clone());
        columns.push(Arc::new(e));
        let merged = RecordBatch::try_new_with_options(
            self.state_schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(n_sessions)),
        )?;
        // Old sessions whose start is no longer their session's start.
        let replaced: Vec<u32> = (0..old_rows)
            .filter(|i| starts.value(*i) != s_start[sid[*i]])
            .map(|i| i as u32)
            .collect();
        let replaced = if replaced.is_empty() {
            None
        } else {
            Some(arrow::compute::take_record_batch(
                all,
                &UInt32Array::from(replaced),
            )?)
        };
        Ok((merged, touched, replaced))
    }

    /// `rows` with `column` appended, in the prepared schema's next field.
    fn with_prepared_column(
        &self,
        rows: &RecordBatch,
        column: ArrayRef,
    ) -> std::result::Result<RecordBatch, OpFailure> {
        let mut cols = rows.columns().to_vec();
        cols.push(column);
        self.prepared_rows(cols, rows.num_rows())
    }

    /// `cols` as prepared rows: the prepared schema's first fields, each
    /// with its column's type (a key may arrive dictionary-encoded).
    fn prepared_rows(
        &self,
        cols: Vec<ArrayRef>,
        n: usize,
    ) -> std::result::Result<RecordBatch, OpFailure> {
        let schema = super::schema_with_types(&self.prepared_schema, &cols);
        Ok(RecordBatch::try_new_with_options(
            schema,
            cols,
            &RecordBatchOptions::new().with_row_count(Some(n)),
        )?)
    }

    /// Adds the window columns (one row per window it falls in).
    fn prepare(&self, batch: RecordBatch) -> std::result::Result<RecordBatch, OpFailure> {
        let mut b = batch;
        for w in &self.windows {
            let micros = timestamp_micros(b.column(w.time_index))
                .ok_or_else(|| OpFailure("the window's time column is not a timestamp".into()))?;
            let overlapping = (w.size_us + w.slide_us - 1) / w.slide_us.max(1);
            let slide = w.slide_us.max(1);
            let (taken, starts): (RecordBatch, Vec<i64>) =
                if overlapping == 1 && micros.null_count() == 0 {
                    // Tumbling windows over non-null times: one window per row,
                    // computed in one pass without moving rows.
                    // Event times come mostly in order: the last window
                    // is reused while it holds, saving a division per row.
                    let (mut lo, mut hi) = (0i64, i64::MIN);
                    let starts = micros
                        .values()
                        .iter()
                        .map(|&t| {
                            if t < lo || t >= hi {
                                lo = t - (t - w.start_us).rem_euclid(slide);
                                hi = lo.saturating_add(slide);
                            }
                            lo
                        })
                        .collect();
                    (b.clone(), starts)
                } else {
                    let mut rows: Vec<u32> = Vec::with_capacity(b.num_rows());
                    let mut starts: Vec<i64> = Vec::with_capacity(b.num_rows());
                    for (i, t) in micros.iter().enumerate() {
                        let Some(t) = t else { continue };
                        let last_start = t - (t - w.start_us).rem_euclid(slide);
                        for j in 0..overlapping {
                            let s = last_start - j * w.slide_us;
                            if s <= t && t < s + w.size_us {
                                rows.push(i as u32);
                                starts.push(s);
                            }
                        }
                    }
                    (
                        arrow::compute::take_record_batch(&b, &UInt32Array::from(rows))?,
                        starts,
                    )
                };
            let window: ArrayRef = Arc::new(
                arrow::array::TimestampMicrosecondArray::from(starts)
                    .with_data_type(w.start_type.clone()),
            );
            b = self.with_prepared_column(&taken, window)?;
        }
        if let Some(sk) = &self.session {
            let micros = timestamp_micros(b.column(sk.time_index))
                .ok_or_else(|| OpFailure("the session's time column is not a timestamp".into()))?;
            // Rows without event time have no session.
            if micros.null_count() > 0 {
                let keep = arrow::compute::is_not_null(&micros)?;
                b = filter_record_batch(&b, &keep)?;
            }
            let micros = timestamp_micros(b.column(sk.time_index))
                .ok_or_else(|| OpFailure("the session's time column is not a timestamp".into()))?;
            let start: ArrayRef = Arc::new(
                arrow::array::TimestampMicrosecondArray::new(
                    micros.values().clone(),
                    micros.nulls().cloned(),
                )
                .with_data_type(sk.start_type.clone()),
            );
            b = self.with_prepared_column(&b, start)?;
        }
        if b.schema_ref() != &self.prepared_schema {
            let n = b.num_rows();
            b = self.prepared_rows(b.columns().to_vec(), n)?;
        }
        Ok(b)
    }

    /// Whether rows behind the watermark are dropped in `mode`: in append
    /// and update mode; in complete mode only for session windows, as Spark
    /// filters a session window's input rows (`ts + gap` at or behind the
    /// previous batch's watermark) whatever the mode, while a complete-mode
    /// aggregation over other keys keeps every row.
    fn drops_late_rows(&self, mode: OutputMode) -> bool {
        match mode {
            OutputMode::Append | OutputMode::Update => true,
            OutputMode::Complete => self.session.is_some(),
        }
    }

    /// True for the rows whose event-time key is at or behind `wm_ms`.
    fn closed_mask(
        &self,
        rows: &RecordBatch,
        key: EventKey,
        wm_ms: i64,
    ) -> std::result::Result<BooleanArray, OpFailure> {
        let times = match key {
            EventKey::Window(pos, w) => {
                // The window's end: its start plus its size.
                let size = self.windows[w].size_us;
                timestamp_micros(rows.column(pos))
                    .map(|starts| starts.iter().map(|s| s.map(|s| s + size)).collect())
            }
            EventKey::Column(pos, _) => timestamp_micros(rows.column(pos)),
            EventKey::Session => timestamp_micros(rows.column(rows.num_columns() - 1)),
        }
        .ok_or_else(|| OpFailure("the event-time key is not a timestamp".into()))?;
        let wm_us = wm_ms.saturating_mul(1000);
        Ok(times
            .iter()
            .map(|t| Some(t.is_some_and(|t| t <= wm_us)))
            .collect())
    }

    /// Final values of the aggregates for state rows with distinct keys.
    fn finalize(&self, rows: &RecordBatch) -> std::result::Result<RecordBatch, OpFailure> {
        let n = rows.num_rows();
        if n == 0 {
            return Ok(RecordBatch::new_empty(self.output_schema.clone()));
        }
        let mut columns: Vec<ArrayRef> = rows.columns()[..self.n_keys].to_vec();
        for w in &self.windows {
            columns[w.position] = window_struct(&columns[w.position], w)?;
        }
        if let Some(sk) = &self.session {
            let DataType::Struct(fields) = &sk.struct_type else {
                return Err(OpFailure("session window type is not a struct".into()));
            };
            let start = arrow::compute::cast(&columns[sk.position], fields[0].data_type())?;
            let end =
                arrow::compute::cast(rows.column(rows.num_columns() - 1), fields[1].data_type())?;
            columns[sk.position] = Arc::new(StructArray::try_new(
                fields.clone(),
                vec![start, end],
                None,
            )?);
        }
        let ids: Vec<usize> = (0..n).collect();
        let mut col = self.n_keys;
        for (a, &n_state) in self.aggs.iter().zip(&self.state_widths) {
            let mut acc = accumulator(a)?;
            acc.merge_batch(&rows.columns()[col..col + n_state], &ids, n)?;
            columns.push(acc.evaluate(EmitTo::All)?);
            col += n_state;
        }
        super::batch_in_schema(&self.output_schema, columns, n)
    }
}

/// The `{start, end}` window struct for a column of window starts.
fn window_struct(starts: &ArrayRef, w: &WindowKey) -> std::result::Result<ArrayRef, OpFailure> {
    let DataType::Struct(fields) = &w.struct_type else {
        return Err(OpFailure("window type is not a struct".into()));
    };
    let micros = timestamp_micros(starts)
        .ok_or_else(|| OpFailure("the window start is not a timestamp".into()))?;
    let ends: arrow::array::TimestampMicrosecondArray =
        micros.iter().map(|s| s.map(|s| s + w.size_us)).collect();
    let start_arr = arrow::compute::cast(starts, fields[0].data_type())?;
    let end_arr: ArrayRef = Arc::new(ends.with_data_type(fields[1].data_type().clone()));
    Ok(Arc::new(StructArray::try_new(
        fields.clone(),
        vec![start_arr, end_arr],
        starts.nulls().cloned(),
    )?))
}

/// The event-time column of a window or session window key.
struct EventTimeColumn {
    index: usize,
    struct_type: DataType,
    start_type: DataType,
    watermarked: bool,
}

/// Finds the time column `time` of window key `name` in the input.
fn event_time_column(
    input: &SchemaRef,
    time: &Expr,
    name: &str,
) -> std::result::Result<EventTimeColumn, String> {
    let Expr::Column(c) = time else {
        return Err(format!(
            "the time column of window key `{name}` must be a column; add it with with_column first"
        ));
    };
    let index = input
        .index_of(&c.name)
        .map_err(|_| format!("unknown time column `{}`", c.name))?;
    let field = input.field(index);
    let struct_type = window_struct_type(field.data_type()).ok_or_else(|| {
        format!(
            "the time column `{}` of `{name}` is not a timestamp",
            c.name
        )
    })?;
    let start_type = match &struct_type {
        DataType::Struct(f) => f[0].data_type().clone(),
        other => other.clone(),
    };
    Ok(EventTimeColumn {
        index,
        struct_type,
        start_type,
        watermarked: field.metadata().contains_key(WATERMARK_METADATA_KEY),
    })
}

fn strip_alias(e: &Expr) -> &Expr {
    match e {
        Expr::Alias(a) => strip_alias(&a.expr),
        e => e,
    }
}

fn deepest_aggregate(plan: &Arc<dyn ExecutionPlan>) -> Option<&AggregateExec> {
    for c in plan.children() {
        if let Some(a) = deepest_aggregate(c) {
            return Some(a);
        }
    }
    plan.downcast_ref::<AggregateExec>()
}

/// The number of distinct keys among `keys`' rows.
fn distinct_keys(keys: &[ArrayRef]) -> std::result::Result<u64, OpFailure> {
    let schema = Arc::new(Schema::new(
        keys.iter()
            .enumerate()
            .map(|(i, a)| Field::new(format!("k{i}"), a.data_type().clone(), true))
            .collect::<Vec<_>>(),
    ));
    let mut g = new_group_values(schema, &GroupOrdering::None)?;
    let mut ids = Vec::new();
    g.intern(keys, &mut ids)?;
    Ok(g.len() as u64)
}
