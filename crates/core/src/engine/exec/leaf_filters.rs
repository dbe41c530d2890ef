//! Rows a leaf's source may drop while decoding: the plan's filters on the
//! leaf's own columns.
//!
//! A stage that reads a leaf through projections, filters, repartitions and
//! partition merging only (one operator over the next, nothing
//! that looks at two rows at once) outputs no row its filters reject. Those
//! filters' conditions, moved down to the leaf's columns, form a
//! [`LeafFilter`] that the source may apply as it decodes (a Parquet source
//! filters each batch of a file as soon as it is decoded), so the rows the
//! plan drops are never gathered into the micro-batch. A source that may
//! skip some rows leaves the plan's filters in place (they then keep every
//! row the source did filter); one that drops every failing row lets the
//! plan drop those filters ([`drop_leaf_filter`]), so their conditions are
//! evaluated once, by the source.
//!
//! Only conditions a reader can evaluate exactly as the plan would are
//! moved: comparisons of a column (or a cast of one) with a literal or
//! another column, `IS [NOT] NULL`, `NOT`, `AND`, `OR`, over columns the
//! leaf gives as they are (not converted by the slot). A comparison of
//! dictionary-encoded strings compares their values, as the plan's does.

use std::sync::Arc;

use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{
    BinaryExpr, CastExpr, Column, IsNotNullExpr, IsNullExpr, Literal, NotExpr,
};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::ExecutionPlan;

use super::columns::{count_leaf_reads, visit_stages, visit_stages_mut};
use super::leaf::SlotExec;
use super::leaf_dictionaries::is_comparison;
use super::leaf_timestamps::recompute;
use super::{Leaf, Stage, StageInput};
use crate::engine::leaf_filter::{remap, LeafFilter};

/// Per leaf, the filter its source may apply: for a leaf read by one stage
/// through one slot, the conjunction of the filters between the stage's
/// output and the slot, where they can be moved (see the module
/// documentation).
pub(super) fn leaf_filters(root: &Stage, leaves: &[Leaf]) -> Vec<Option<LeafFilter>> {
    let mut out: Vec<Option<LeafFilter>> = vec![None; leaves.len()];
    let mut reads = vec![0usize; leaves.len()];
    count_leaf_reads(root, &mut reads);
    visit_stages(root, &mut |stage| {
        let mut conditions = Vec::new();
        let Some(slot) = chain_to_slot(&stage.physical, &mut conditions) else {
            return;
        };
        let Some(StageInput::Leaf(l)) = stage.inputs.get(slot.index) else {
            return;
        };
        let Some(leaf) = leaves.get(*l) else { return };
        if reads.get(*l) != Some(&1) {
            return;
        }
        let Some(predicate) = conditions
            .iter()
            .filter_map(|c| to_leaf_columns(c, slot))
            .reduce(|a, b| Arc::new(BinaryExpr::new(a, Operator::And, b)) as Arc<dyn PhysicalExpr>)
        else {
            return;
        };
        if let Some(f) = LeafFilter::new(predicate, &leaf.schema) {
            out[*l] = Some(f);
        }
    });
    out
}

/// Removes from `root` the filters that make up leaf `leaf`'s
/// [`LeafFilter`] (as [`leaf_filters`] builds it), for a source that drops
/// every row failing it: their conditions then hold for every row the slot
/// gives. A filter's own projection stays. Returns false, changing
/// nothing, when the leaf has no such filter.
pub(super) fn drop_leaf_filter(root: &mut Stage, leaves: &[Leaf], leaf: usize) -> bool {
    let mut reads = vec![0usize; leaves.len()];
    count_leaf_reads(root, &mut reads);
    if reads.get(leaf) != Some(&1) {
        return false;
    }
    let mut dropped = false;
    visit_stages_mut(root, &mut |stage| {
        let mut conditions = Vec::new();
        let Some(slot) = chain_to_slot(&stage.physical, &mut conditions) else {
            return;
        };
        if !matches!(stage.inputs.get(slot.index), Some(StageInput::Leaf(l)) if *l == leaf) {
            return;
        }
        // The filters on the way down, top first, as `chain_to_slot`
        // found them: those whose conditions moved into the leaf go.
        let moved: Vec<bool> = conditions
            .iter()
            .map(|c| to_leaf_columns(c, slot).is_some())
            .collect();
        if !moved.contains(&true) {
            return;
        }
        let mut next = 0;
        if let Some(plan) = without_filters(&stage.physical, &moved, &mut next) {
            stage.physical = plan;
            dropped = true;
        }
    });
    dropped
}

/// `plan`, a chain down to a slot as [`chain_to_slot`] walks it, without
/// its filters flagged in `drop` (one flag per filter, top first; `next`
/// counts those passed). None when the chain is not one.
fn without_filters(
    plan: &Arc<dyn ExecutionPlan>,
    drop: &[bool],
    next: &mut usize,
) -> Option<Arc<dyn ExecutionPlan>> {
    if plan.downcast_ref::<SlotExec>().is_some() {
        return Some(plan.clone());
    }
    if let Some(f) = plan.downcast_ref::<FilterExec>() {
        let goes = *drop.get(*next)?;
        *next += 1;
        let input = without_filters(f.input(), drop, next)?;
        if !goes {
            return recompute(plan, vec![input]).ok();
        }
        let Some(columns) = f.projection() else {
            return Some(input);
        };
        let schema = input.schema();
        let exprs = columns
            .iter()
            .map(|&i| {
                let field = schema.fields().get(i)?;
                Some(ProjectionExpr {
                    expr: Arc::new(Column::new(field.name(), i)) as Arc<dyn PhysicalExpr>,
                    alias: field.name().clone(),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        return ProjectionExec::try_new(exprs, input)
            .ok()
            .map(|p| Arc::new(p) as Arc<dyn ExecutionPlan>);
    }
    let children = plan.children();
    let [child] = children.as_slice() else {
        return None;
    };
    let input = without_filters(child, drop, next)?;
    recompute(plan, vec![input]).ok()
}

/// The slot at the bottom of `plan` when every operator on the way passes
/// rows on one at a time; `conditions` gets each filter's condition,
/// rewritten to the slot's output columns.
fn chain_to_slot<'a>(
    plan: &'a Arc<dyn ExecutionPlan>,
    conditions: &mut Vec<Arc<dyn PhysicalExpr>>,
) -> Option<&'a SlotExec> {
    if let Some(slot) = plan.downcast_ref::<SlotExec>() {
        return Some(slot);
    }
    if let Some(f) = plan.downcast_ref::<FilterExec>() {
        // Conditions found above are over this filter's output columns.
        if let Some(p) = f.projection() {
            for c in conditions.iter_mut() {
                *c = remap(c, |i| p.get(i).map(|&j| col_expr(f.input(), j)))?;
            }
        }
        conditions.push(f.predicate().clone());
        return chain_to_slot(f.input(), conditions);
    }
    if let Some(p) = plan.downcast_ref::<ProjectionExec>() {
        for c in conditions.iter_mut() {
            *c = remap(c, |i| p.expr().get(i).map(|e| e.expr.clone()))?;
        }
        return chain_to_slot(p.input(), conditions);
    }
    let passes_rows_on = plan.downcast_ref::<RepartitionExec>().is_some()
        || plan.downcast_ref::<CoalescePartitionsExec>().is_some();
    match (passes_rows_on, plan.children().as_slice()) {
        (true, [child]) => chain_to_slot(child, conditions),
        _ => None,
    }
}

/// A column reference to `plan`'s output column `i`.
fn col_expr(plan: &Arc<dyn ExecutionPlan>, i: usize) -> Arc<dyn PhysicalExpr> {
    let schema = plan.schema();
    let name = schema.fields().get(i).map_or("?", |f| f.name().as_str());
    Arc::new(Column::new(name, i))
}

/// `condition` (over `slot`'s output columns) over the slot's table
/// columns, when it is one a reader can evaluate as the plan does and reads
/// only columns the slot gives unconverted.
fn to_leaf_columns(
    condition: &Arc<dyn PhysicalExpr>,
    slot: &SlotExec,
) -> Option<Arc<dyn PhysicalExpr>> {
    if !movable(condition) {
        return None;
    }
    remap(condition, |i| {
        if slot.is_converted(i) {
            return None;
        }
        let t = slot.table_column(i)?;
        Some(Arc::new(Column::new("", t)) as Arc<dyn PhysicalExpr>)
    })
}

/// True for the conditions the module documentation lists.
fn movable(e: &Arc<dyn PhysicalExpr>) -> bool {
    let operand = |e: &Arc<dyn PhysicalExpr>| {
        e.downcast_ref::<Column>().is_some()
            || e.downcast_ref::<Literal>().is_some()
            || e.downcast_ref::<CastExpr>()
                .is_some_and(|c| c.expr().downcast_ref::<Column>().is_some())
    };
    if let Some(b) = e.downcast_ref::<BinaryExpr>() {
        return match b.op() {
            Operator::And | Operator::Or => movable(b.left()) && movable(b.right()),
            Operator::IsDistinctFrom | Operator::IsNotDistinctFrom => {
                operand(b.left()) && operand(b.right())
            }
            op if is_comparison(op) => operand(b.left()) && operand(b.right()),
            _ => false,
        };
    }
    if let Some(n) = e.downcast_ref::<NotExpr>() {
        return movable(n.arg());
    }
    if let Some(n) = e.downcast_ref::<IsNullExpr>() {
        return operand(n.arg());
    }
    if let Some(n) = e.downcast_ref::<IsNotNullExpr>() {
        return operand(n.arg());
    }
    false
}
