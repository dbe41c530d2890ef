//! Stream-stream joins (Spark's symmetric hash join).
//!
//! Both sides keep the rows they have seen. Per batch: rows at or behind
//! the watermark for late rows are dropped and counted (per side, on its
//! watermarked column); the left side's new rows are joined with the right
//! side's state, then the right side's new rows with the whole left side
//! (state and new rows), so every matching pair is emitted exactly once. The
//! new rows join their side's state, and the watermark evicts what can no
//! longer match: with a time-range condition such as
//! `r_time >= l_time AND r_time <= l_time + INTERVAL 5 MINUTES`, a future
//! right row has `r_time >= watermark`, so left rows with
//! `l_time < watermark - 5 minutes` can never match again (and symmetrically
//! for the right side). Evicted rows that never matched are emitted with
//! nulls for the other side by outer joins; a left semi join emits each left
//! row once, when it first matches.
//!
//! Each side's state is Arrow rows with a sequence number (the state key)
//! and a `matched` flag, stored per batch in a [`StateStore`].

use crate::engine::storage::Location;
use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, BooleanArray, UInt64Array};
use arrow::compute::{concat_batches, filter_record_batch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::common::{Column, ScalarValue};
use datafusion::datasource::provider_as_source;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{BinaryExpr, Expr, LogicalPlanBuilder, Operator};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;

use super::leaf::{PartitionedRows, SlotTable};
use super::watermark::timestamp_micros;
use super::{poll_once, rebind, BatchContext, OpFailure, StateOperatorProgress};
use crate::engine::state::{StateChanges, StateStore};
use crate::error::{Error, PlanError, Result};
use crate::plan::{JoinType, WATERMARK_METADATA_KEY};

const SEQ: &str = "__seq";
const MATCHED: &str = "__matched";
const LID: &str = "__lid";
const RID: &str = "__rid";

/// Where an output column comes from.
#[derive(Clone, Copy, Debug)]
enum OutCol {
    Left(usize),
    Right(usize),
    /// A `join_using` key of a full outer join: the left value, else the right.
    Either(usize, usize),
}

/// "The other side's time is at most this side's time + offset" (µs).
#[derive(Clone, Copy, Debug)]
struct Bound {
    offset_us: i64,
    strict: bool,
}

/// One side of the join and its state.
struct Side {
    name: &'static str,
    schema: SchemaRef,
    state_schema: SchemaRef,
    time_index: Option<usize>,
    /// Upper bound of the other side's future times relative to this side's.
    bound: Option<Bound>,
    rows: RecordBatch,
    store: Option<StateStore>,
    pending: Option<StateChanges>,
    /// The batch whose rows were numbered last, and the next number in it
    /// (a real-time epoch numbers rows across its steps).
    numbered: Option<(u64, u64)>,
}

impl Side {
    fn new(name: &'static str, schema: &SchemaRef) -> Side {
        let mut fields = vec![Field::new(SEQ, DataType::UInt64, false)];
        fields.extend(schema.fields().iter().map(|f| {
            f.as_ref()
                .clone()
                .with_metadata(Default::default())
                .with_nullable(true)
        }));
        fields.push(Field::new(MATCHED, DataType::Boolean, false));
        let state_schema = Arc::new(Schema::new(fields));
        let time_index = schema.fields().iter().position(|f| {
            f.metadata().contains_key(WATERMARK_METADATA_KEY)
                && matches!(f.data_type(), DataType::Timestamp(..))
        });
        Side {
            name,
            schema: schema.clone(),
            rows: RecordBatch::new_empty(state_schema.clone()),
            state_schema,
            time_index,
            bound: None,
            store: None,
            pending: None,
            numbered: None,
        }
    }

    /// The data columns of state rows.
    fn data(&self, rows: &RecordBatch) -> Vec<ArrayRef> {
        rows.columns()[1..rows.num_columns() - 1].to_vec()
    }

    fn matched(rows: &RecordBatch) -> BooleanArray {
        rows.column(rows.num_columns() - 1)
            .as_any()
            .downcast_ref::<BooleanArray>()
            .cloned()
            .unwrap_or_else(|| BooleanArray::from(vec![false; rows.num_rows()]))
    }
}

/// A stream-stream join with its state.
pub(crate) struct JoinOp {
    flow: String,
    join_type: JoinType,
    left: Side,
    right: Side,
    pairs: Arc<dyn ExecutionPlan>,
    output: Vec<OutCol>,
    output_schema: SchemaRef,
    progress: StateOperatorProgress,
}

impl JoinOp {
    /// The watermark of the join's output when its input's is `w` (ms):
    /// the oldest event time a pair it may still emit can carry. That is
    /// each side's state watermark (`w` minus its range bound, 1 ms less for
    /// an inclusive bound), or `w` itself when lower (Spark's
    /// `produceOutputWatermark`).
    pub(super) fn output_watermark(&self, w: i64) -> i64 {
        let mut out = w;
        for side in [&self.left, &self.right] {
            if let (Some(_), Some(b)) = (side.time_index, side.bound) {
                let state_us = w.saturating_mul(1000).saturating_sub(b.offset_us);
                let inclusive = if b.strict { 0 } else { 1 };
                out = out.min(state_us.div_euclid(1000) - inclusive);
            }
        }
        out
    }

    /// Plans the join of `left` and `right` rows on `condition` (over scans
    /// named `left` and `right`) or on the `using` columns.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        flow: &str,
        join_type: JoinType,
        left_schema: &SchemaRef,
        right_schema: &SchemaRef,
        condition: Option<&Expr>,
        using: &[String],
        output_schema: &SchemaRef,
        ctx: &SessionContext,
    ) -> Result<JoinOp> {
        let fail =
            |msg: String| -> Error { PlanError::new(format!("flow `{flow}`: {msg}")).into() };
        let with_id = |s: &SchemaRef, id: &str| {
            let mut f: Vec<Field> = s.fields().iter().map(|f| f.as_ref().clone()).collect();
            f.push(Field::new(id, DataType::UInt64, false));
            Arc::new(Schema::new_with_metadata(f, s.metadata().clone()))
        };
        let l = LogicalPlanBuilder::scan(
            "left",
            provider_as_source(Arc::new(SlotTable {
                index: 0,
                schema: with_id(left_schema, LID),
                partitions: 1,
            })),
            None,
        );
        let r = LogicalPlanBuilder::scan(
            "right",
            provider_as_source(Arc::new(SlotTable {
                index: 1,
                schema: with_id(right_schema, RID),
                partitions: 1,
            })),
            None,
        );
        let planned = l.and_then(|l| {
            let r = r?.build()?;
            match condition {
                Some(c) => l.join_on(r, datafusion::logical_expr::JoinType::Inner, [c.clone()]),
                None => {
                    let on: Vec<Expr> = using
                        .iter()
                        .map(|c| {
                            Expr::Column(Column::new(Some("left"), c.clone()))
                                .eq(Expr::Column(Column::new(Some("right"), c.clone())))
                        })
                        .collect();
                    l.join_on(r, datafusion::logical_expr::JoinType::Inner, on)
                }
            }?
            .build()
        });
        let logical = planned.map_err(|e| {
            fail(format!(
                "the join could not be planned: {}",
                e.strip_backtrace()
            ))
        })?;
        let state = ctx.state();
        let optimized = state.optimize(&logical).map_err(|e| {
            fail(format!(
                "the join could not be planned: {}",
                e.strip_backtrace()
            ))
        })?;
        let pairs = poll_once(state.create_physical_plan(&optimized))
            .ok_or_else(|| fail("planning the join did not finish".into()))?
            .map_err(|e| {
                fail(format!(
                    "the join could not be planned: {}",
                    e.strip_backtrace()
                ))
            })?;

        // Output columns.
        let nl = left_schema.fields().len();
        let output: Vec<OutCol> = if join_type == JoinType::LeftSemi {
            (0..nl).map(OutCol::Left).collect()
        } else if condition.is_some() {
            (0..nl)
                .map(OutCol::Left)
                .chain((0..right_schema.fields().len()).map(OutCol::Right))
                .collect()
        } else {
            let mut out = Vec::new();
            for c in using {
                let li = left_schema
                    .index_of(c)
                    .map_err(|_| fail(format!("unknown join column `{c}`")))?;
                let ri = right_schema
                    .index_of(c)
                    .map_err(|_| fail(format!("unknown join column `{c}`")))?;
                out.push(match join_type {
                    JoinType::RightOuter => OutCol::Right(ri),
                    JoinType::FullOuter => OutCol::Either(li, ri),
                    _ => OutCol::Left(li),
                });
            }
            for (i, f) in left_schema.fields().iter().enumerate() {
                if !using.contains(f.name()) {
                    out.push(OutCol::Left(i));
                }
            }
            for (i, f) in right_schema.fields().iter().enumerate() {
                if !using.contains(f.name()) {
                    out.push(OutCol::Right(i));
                }
            }
            out
        };
        if output.len() != output_schema.fields().len() {
            return Err(fail(format!(
                "the join produces {} columns but its schema has {}",
                output.len(),
                output_schema.fields().len()
            )));
        }

        let mut left = Side::new("left", left_schema);
        let mut right = Side::new("right", right_schema);
        if let Some(c) = condition {
            let (lt, rt) = (
                left.time_index.map(|i| left_schema.field(i).name().clone()),
                right
                    .time_index
                    .map(|i| right_schema.field(i).name().clone()),
            );
            if let (Some(lt), Some(rt)) = (lt, rt) {
                for (x, y, bound) in range_constraints(c, &lt, &rt) {
                    // x <= y + offset
                    let side = match (x, y) {
                        (Term::Right, Term::Left) => &mut left,
                        (Term::Left, Term::Right) => &mut right,
                        _ => continue,
                    };
                    side.bound = Some(match side.bound {
                        // Keep the bound that evicts more (the smaller offset).
                        Some(b) if b.offset_us < bound.offset_us => b,
                        _ => bound,
                    });
                }
            }
        }
        Ok(JoinOp {
            flow: flow.to_string(),
            join_type,
            left,
            right,
            pairs,
            output,
            output_schema: output_schema.clone(),
            progress: StateOperatorProgress::new("join"),
        })
    }

    /// What the shape check records for this operator.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{} stream-stream join state ({}) ({})",
            self.join_type,
            crate::plan::ddl::schema_to_ddl(&self.left.schema),
            crate::plan::ddl::schema_to_ddl(&self.right.schema)
        )
    }

    /// Opens both sides' state under `dir` at batch `version`.
    pub(crate) fn restore(&mut self, dir: &Location, version: Option<u64>) -> Result<()> {
        for side in [&mut self.left, &mut self.right] {
            let store = StateStore::open(&dir.join(side.name), side.state_schema.clone(), 1)?;
            side.rows = store.load_or_empty(version)?;
            side.numbered = None;
            side.store = Some(store);
        }
        Ok(())
    }

    /// Writes both sides' state changes of batch `version`.
    pub(crate) fn commit(&mut self, version: u64, whole: bool) -> Result<()> {
        for side in [&mut self.left, &mut self.right] {
            let Some(store) = &side.store else { continue };
            store.commit_changes(
                version,
                side.pending.take(),
                std::slice::from_ref(&side.rows),
                whole,
            )?;
        }
        Ok(())
    }

    /// The progress of the last batch.
    pub(crate) fn progress(&self) -> StateOperatorProgress {
        self.progress.clone()
    }

    /// Runs one batch over the new rows of both sides.
    pub(crate) async fn process(
        &mut self,
        left_in: Vec<RecordBatch>,
        right_in: Vec<RecordBatch>,
        ctx: &BatchContext,
        task_ctx: &Arc<TaskContext>,
    ) -> Result<Vec<RecordBatch>> {
        self.run(left_in, right_in, ctx, task_ctx)
            .await
            .map_err(|e| {
                Error::runtime(format!(
                    "flow `{}`: stream-stream join failed: {e}",
                    self.flow
                ))
            })
    }

    async fn run(
        &mut self,
        left_in: Vec<RecordBatch>,
        right_in: Vec<RecordBatch>,
        ctx: &BatchContext,
        task_ctx: &Arc<TaskContext>,
    ) -> std::result::Result<Vec<RecordBatch>, OpFailure> {
        let mut dropped = 0u64;
        let l_new = new_rows(&self.left, left_in, ctx, &mut dropped)?;
        let r_new = new_rows(&self.right, right_in, ctx, &mut dropped)?;
        let l_old = self.left.rows.num_rows();
        let r_old = self.right.rows.num_rows();
        let l_state = to_state(&mut self.left, &l_new, ctx.batch_id, 0)?;
        let r_state = to_state(&mut self.right, &r_new, ctx.batch_id, 1)?;
        let l_all = concat_batches(&self.left.state_schema, [&self.left.rows, &l_state])?;
        let r_all = concat_batches(&self.right.state_schema, [&self.right.rows, &r_state])?;

        // New left rows with the right state, then new right rows with all left rows.
        let mut pairs = Vec::new();
        if l_new.num_rows() > 0 && r_old > 0 {
            pairs.extend(
                self.join_pairs(
                    &l_all.slice(l_old, l_new.num_rows()),
                    l_old,
                    &self.right.rows,
                    0,
                    task_ctx,
                )
                .await?,
            );
        }
        if r_new.num_rows() > 0 && l_all.num_rows() > 0 {
            pairs.extend(
                self.join_pairs(
                    &l_all,
                    0,
                    &r_all.slice(r_old, r_new.num_rows()),
                    r_old,
                    task_ctx,
                )
                .await?,
            );
        }
        let nl = self.left.schema.fields().len();
        let nr = self.right.schema.fields().len();
        // The right rows this batch's watermark evicts (the matched flags
        // set below do not change which).
        let wm = ctx.watermark_for_eviction_ms;
        let r_evict = evict_mask(&self.right, &r_all, wm)?;
        if self.join_type == JoinType::LeftSemi {
            // A new right row this batch's watermark evicts matches nothing
            // in a left semi join (as Spark 4.3 does: the right row is
            // behind the right side's state watermark already).
            let evicted = &r_evict;
            let mut kept = Vec::with_capacity(pairs.len());
            for p in pairs {
                let rid = p
                    .column(nl + 1 + nr)
                    .as_any()
                    .downcast_ref::<UInt64Array>()
                    .ok_or_else(|| OpFailure("bad right ids".into()))?;
                let keep: BooleanArray = rid
                    .values()
                    .iter()
                    .map(|&r| Some(!((r as usize) >= r_old && evicted.value(r as usize))))
                    .collect();
                kept.push(filter_record_batch(&p, &keep)?);
            }
            pairs = kept;
        }
        let mut l_mark = vec![false; l_all.num_rows()];
        let mut r_mark = vec![false; r_all.num_rows()];
        let mut out: Vec<RecordBatch> = Vec::new();
        for p in &pairs {
            let lid = p
                .column(nl)
                .as_any()
                .downcast_ref::<UInt64Array>()
                .ok_or_else(|| OpFailure("bad left ids".into()))?;
            let rid = p
                .column(nl + 1 + nr)
                .as_any()
                .downcast_ref::<UInt64Array>()
                .ok_or_else(|| OpFailure("bad right ids".into()))?;
            for v in lid.values() {
                l_mark[*v as usize] = true;
            }
            for v in rid.values() {
                r_mark[*v as usize] = true;
            }
            if self.join_type != JoinType::LeftSemi {
                let left: Vec<ArrayRef> = p.columns()[..nl].to_vec();
                let right: Vec<ArrayRef> = p.columns()[nl + 1..nl + 1 + nr].to_vec();
                out.push(self.project(&left, &right, p.num_rows())?);
            }
        }
        let l_was = Side::matched(&l_all);
        let r_was = Side::matched(&r_all);
        let l_now: BooleanArray = l_was
            .iter()
            .zip(&l_mark)
            .map(|(a, b)| Some(a.unwrap_or(false) || *b))
            .collect();
        let r_now: BooleanArray = r_was
            .iter()
            .zip(&r_mark)
            .map(|(a, b)| Some(a.unwrap_or(false) || *b))
            .collect();
        if self.join_type == JoinType::LeftSemi {
            let first: BooleanArray = l_was
                .iter()
                .zip(&l_mark)
                .map(|(a, b)| Some(!a.unwrap_or(false) && *b))
                .collect();
            let rows = filter_record_batch(&l_all, &first)?;
            if rows.num_rows() > 0 {
                let data = self.left.data(&rows);
                out.push(self.project(&data, &[], rows.num_rows())?);
            }
        }
        let l_all = with_matched(&l_all, l_now)?;
        let r_all = with_matched(&r_all, r_now)?;

        // Eviction, and the outer rows that never matched.
        let l_evict = evict_mask(&self.left, &l_all, wm)?;
        if matches!(self.join_type, JoinType::LeftOuter | JoinType::FullOuter) {
            let unmatched = and_not_matched(&l_evict, &l_all)?;
            let rows = filter_record_batch(&l_all, &unmatched)?;
            if rows.num_rows() > 0 {
                let nulls: Vec<ArrayRef> = self
                    .right
                    .schema
                    .fields()
                    .iter()
                    .map(|f| new_null_array(f.data_type(), rows.num_rows()))
                    .collect();
                out.push(self.project(&self.left.data(&rows), &nulls, rows.num_rows())?);
            }
        }
        if matches!(self.join_type, JoinType::RightOuter | JoinType::FullOuter) {
            let unmatched = and_not_matched(&r_evict, &r_all)?;
            let rows = filter_record_batch(&r_all, &unmatched)?;
            if rows.num_rows() > 0 {
                let nulls: Vec<ArrayRef> = self
                    .left
                    .schema
                    .fields()
                    .iter()
                    .map(|f| new_null_array(f.data_type(), rows.num_rows()))
                    .collect();
                out.push(self.project(&nulls, &self.right.data(&rows), rows.num_rows())?);
            }
        }
        let mut removed_total = 0u64;
        for (side, all, evict, old, was) in [
            (&mut self.left, l_all, l_evict, l_old, l_was),
            (&mut self.right, r_all, r_evict, r_old, r_was),
        ] {
            let now = Side::matched(&all);
            // Upserts: new rows, and old rows whose matched flag changed.
            let changed: BooleanArray = (0..all.num_rows())
                .map(|i| Some(i >= old || was.value(i) != now.value(i)))
                .collect();
            let keep = arrow::compute::not(&evict)?;
            let upsert = arrow::compute::and(&changed, &keep)?;
            let upserts = filter_record_batch(&all, &upsert)?;
            let gone = filter_record_batch(&all, &evict)?;
            removed_total += gone.num_rows() as u64;
            side.rows = filter_record_batch(&all, &keep)?;
            side.pending = Some((upserts, vec![gone.column(0).clone()]));
        }
        self.progress = StateOperatorProgress {
            operator: "join".into(),
            num_rows_total: (self.left.rows.num_rows() + self.right.rows.num_rows()) as u64,
            num_rows_updated: (l_new.num_rows() + r_new.num_rows()) as u64,
            num_rows_removed: removed_total,
            num_rows_dropped_by_watermark: dropped,
            memory_used_bytes: (self.left.rows.get_array_memory_size()
                + self.right.rows.get_array_memory_size()) as u64,
        };
        Ok(out.into_iter().filter(|b| b.num_rows() > 0).collect())
    }

    /// The matching pairs of `left` (state rows, ids from `l_base`) and
    /// `right` (ids from `r_base`): left columns, left id, right columns, right id.
    async fn join_pairs(
        &self,
        left: &RecordBatch,
        l_base: usize,
        right: &RecordBatch,
        r_base: usize,
        task_ctx: &Arc<TaskContext>,
    ) -> std::result::Result<Vec<RecordBatch>, OpFailure> {
        let l = with_ids(&self.left, left, l_base)?;
        let r = with_ids(&self.right, right, r_base)?;
        let data: Vec<PartitionedRows> = vec![Arc::new(vec![vec![l]]), Arc::new(vec![vec![r]])];
        let plan = rebind(&self.pairs, &data)?;
        let parts = datafusion::physical_plan::collect_partitioned(plan, task_ctx.clone()).await?;
        Ok(parts.into_iter().flatten().collect())
    }

    fn project(
        &self,
        left: &[ArrayRef],
        right: &[ArrayRef],
        n: usize,
    ) -> std::result::Result<RecordBatch, OpFailure> {
        let mut cols = Vec::with_capacity(self.output.len());
        for c in &self.output {
            cols.push(match c {
                OutCol::Left(i) => left[*i].clone(),
                OutCol::Right(i) => right[*i].clone(),
                OutCol::Either(li, ri) => {
                    let mask = arrow::compute::is_not_null(&left[*li])?;
                    arrow::compute::kernels::zip::zip(&mask, &left[*li], &right[*ri])?
                }
            });
        }
        super::batch_in_schema(&self.output_schema, cols, n)
    }
}

/// A side's new rows with late rows dropped (counted into `dropped`).
fn new_rows(
    side: &Side,
    input: Vec<RecordBatch>,
    ctx: &BatchContext,
    dropped: &mut u64,
) -> std::result::Result<RecordBatch, OpFailure> {
    // Inputs may differ from the declared schema in metadata only.
    let conformed: Vec<RecordBatch> = input
        .iter()
        .map(|b| {
            RecordBatch::try_new_with_options(
                side.schema.clone(),
                b.columns().to_vec(),
                &RecordBatchOptions::new().with_row_count(Some(b.num_rows())),
            )
        })
        .collect::<std::result::Result<_, _>>()?;
    let batch = concat_batches(&side.schema, &conformed)?;
    match (side.time_index, ctx.watermark_for_late_ms) {
        (Some(t), Some(wm)) if batch.num_rows() > 0 => {
            let times = timestamp_micros(batch.column(t))
                .ok_or_else(|| OpFailure("the event-time column is not a timestamp".into()))?;
            let wm_us = wm.saturating_mul(1000);
            let keep: BooleanArray = times
                .iter()
                .map(|v| Some(v.is_none_or(|v| v > wm_us)))
                .collect();
            *dropped += (batch.num_rows() - keep.true_count()) as u64;
            Ok(filter_record_batch(&batch, &keep)?)
        }
        _ => Ok(batch),
    }
}

/// Rows in the state schema: a sequence number (batch id and side in the
/// high bits, then the row's number within the batch, which continues over
/// the steps of a real-time epoch), the data, and `matched = false`.
fn to_state(
    side: &mut Side,
    rows: &RecordBatch,
    batch_id: u64,
    side_bit: u64,
) -> std::result::Result<RecordBatch, OpFailure> {
    let n = rows.num_rows();
    let first = match side.numbered {
        Some((b, next)) if b == batch_id => next,
        _ => 0,
    };
    side.numbered = Some((batch_id, first + n as u64));
    let base = (batch_id << 33) | (side_bit << 32);
    let seq: ArrayRef = Arc::new(UInt64Array::from_iter_values(
        (0..n as u64).map(|i| base | (first + i)),
    ));
    let mut cols = vec![seq];
    cols.extend(rows.columns().iter().cloned());
    cols.push(Arc::new(BooleanArray::from(vec![false; n])));
    Ok(RecordBatch::try_new_with_options(
        side.state_schema.clone(),
        cols,
        &RecordBatchOptions::new().with_row_count(Some(n)),
    )?)
}

/// State rows as join input: the data columns and an id per row.
fn with_ids(
    side: &Side,
    rows: &RecordBatch,
    base: usize,
) -> std::result::Result<RecordBatch, OpFailure> {
    let n = rows.num_rows();
    let mut cols = side.data(rows);
    cols.push(Arc::new(UInt64Array::from_iter_values(
        (0..n as u64).map(|i| base as u64 + i),
    )));
    let mut fields: Vec<Field> = side
        .schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new(
        if side.name == "left" { LID } else { RID },
        DataType::UInt64,
        false,
    ));
    let schema = Arc::new(Schema::new_with_metadata(
        fields,
        side.schema.metadata().clone(),
    ));
    Ok(RecordBatch::try_new_with_options(
        schema,
        cols,
        &RecordBatchOptions::new().with_row_count(Some(n)),
    )?)
}

fn with_matched(
    rows: &RecordBatch,
    matched: BooleanArray,
) -> std::result::Result<RecordBatch, OpFailure> {
    let mut cols = rows.columns().to_vec();
    let last = cols.len() - 1;
    cols[last] = Arc::new(matched);
    Ok(RecordBatch::try_new(rows.schema(), cols)?)
}

fn and_not_matched(
    evict: &BooleanArray,
    rows: &RecordBatch,
) -> std::result::Result<BooleanArray, OpFailure> {
    let not_matched = arrow::compute::not(&Side::matched(rows))?;
    Ok(arrow::compute::and(evict, &not_matched)?)
}

/// The state rows the watermark evicts: none without a range bound.
fn evict_mask(
    side: &Side,
    rows: &RecordBatch,
    wm_ms: Option<i64>,
) -> std::result::Result<BooleanArray, OpFailure> {
    let n = rows.num_rows();
    let (Some(t), Some(bound), Some(wm)) = (side.time_index, side.bound, wm_ms) else {
        return Ok(BooleanArray::from(vec![false; n]));
    };
    // Future rows of the other side have time >= wm; this side's row at time
    // x matches only while x + offset >= wm (> wm for a strict bound).
    let threshold = wm.saturating_mul(1000).saturating_sub(bound.offset_us);
    let times = timestamp_micros(rows.column(t + 1))
        .ok_or_else(|| OpFailure("the event-time column is not a timestamp".into()))?;
    Ok(times
        .iter()
        .map(|v| {
            Some(v.is_some_and(|v| {
                if bound.strict {
                    v <= threshold
                } else {
                    v < threshold
                }
            }))
        })
        .collect())
}

/// A term of a time comparison.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Term {
    Left,
    Right,
}

/// The constraints `x <= y + offset` (strict or not) between the two sides'
/// event-time columns found in a conjunction of comparisons.
fn range_constraints(cond: &Expr, left_time: &str, right_time: &str) -> Vec<(Term, Term, Bound)> {
    let mut out = Vec::new();
    let mut conjuncts = Vec::new();
    split_and(cond, &mut conjuncts);
    for c in conjuncts {
        let Expr::BinaryExpr(BinaryExpr { left, op, right }) = c else {
            continue;
        };
        let (Some((a, oa)), Some((b, ob))) = (
            linear(left, left_time, right_time),
            linear(right, left_time, right_time),
        ) else {
            continue;
        };
        if a == b {
            continue;
        }
        // a + oa OP b + ob
        let le = |x: Term, ox: i64, y: Term, oy: i64, strict: bool| {
            (
                x,
                y,
                Bound {
                    offset_us: oy - ox,
                    strict,
                },
            )
        };
        match op {
            Operator::LtEq => out.push(le(a, oa, b, ob, false)),
            Operator::Lt => out.push(le(a, oa, b, ob, true)),
            Operator::GtEq => out.push(le(b, ob, a, oa, false)),
            Operator::Gt => out.push(le(b, ob, a, oa, true)),
            Operator::Eq => {
                out.push(le(a, oa, b, ob, false));
                out.push(le(b, ob, a, oa, false));
            }
            _ => {}
        }
    }
    out
}

fn split_and<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::And,
            right,
        }) => {
            split_and(left, out);
            split_and(right, out);
        }
        Expr::Alias(a) => split_and(&a.expr, out),
        other => out.push(other),
    }
}

/// `time column ± constant interval`, as (side, offset in µs).
fn linear(e: &Expr, left_time: &str, right_time: &str) -> Option<(Term, i64)> {
    match e {
        Expr::Alias(a) => linear(&a.expr, left_time, right_time),
        Expr::Cast(c) => linear(&c.expr, left_time, right_time),
        Expr::TryCast(c) => linear(&c.expr, left_time, right_time),
        Expr::Column(c) => {
            let rel = c.relation.as_ref().map(|r| r.table().to_string());
            match rel.as_deref() {
                Some("left") if c.name == left_time => Some((Term::Left, 0)),
                Some("right") if c.name == right_time => Some((Term::Right, 0)),
                None if c.name == left_time && c.name != right_time => Some((Term::Left, 0)),
                None if c.name == right_time && c.name != left_time => Some((Term::Right, 0)),
                _ => None,
            }
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let sign = match op {
                Operator::Plus => 1,
                Operator::Minus => -1,
                _ => return None,
            };
            if let (Some((t, o)), Some(c)) =
                (linear(left, left_time, right_time), interval_us(right))
            {
                return Some((t, o + sign * c));
            }
            if *op == Operator::Plus {
                if let (Some(c), Some((t, o))) =
                    (interval_us(left), linear(right, left_time, right_time))
                {
                    return Some((t, o + c));
                }
            }
            None
        }
        _ => None,
    }
}

/// A constant interval or duration in microseconds (months refused).
fn interval_us(e: &Expr) -> Option<i64> {
    match e {
        Expr::Cast(c) => interval_us(&c.expr),
        Expr::Literal(v, _) => match v {
            ScalarValue::IntervalMonthDayNano(Some(i)) if i.months == 0 => {
                Some(i.days as i64 * 86_400_000_000 + i.nanoseconds / 1000)
            }
            ScalarValue::IntervalDayTime(Some(i)) => {
                Some(i.days as i64 * 86_400_000_000 + i.milliseconds as i64 * 1000)
            }
            ScalarValue::DurationSecond(Some(s)) => Some(s * 1_000_000),
            ScalarValue::DurationMillisecond(Some(s)) => Some(s * 1000),
            ScalarValue::DurationMicrosecond(Some(s)) => Some(*s),
            ScalarValue::DurationNanosecond(Some(s)) => Some(s / 1000),
            _ => None,
        },
        _ => None,
    }
}
