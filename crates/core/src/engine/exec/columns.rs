//! Which columns of each leaf the operators read (projection pushdown,
//! [`CompiledPlan::leaf_columns_used`]) and which string columns may stay
//! dictionary-encoded ([`CompiledPlan::leaf_dictionary_columns`]).

use super::*;

/// Marks in `used` the leaf columns `stage` reads to produce the output
/// columns flagged in `needed`.
pub(super) fn stage_columns_used(
    stage: &Stage,
    needed: &[bool],
    leaves: &[Leaf],
    used: &mut [Vec<bool>],
) {
    for (input, read) in stage.inputs.iter().zip(input_reads(stage, needed, leaves)) {
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

/// Per input of `stage`, the columns its plan reads to produce the output
/// columns flagged in `needed`.
fn input_reads(stage: &Stage, needed: &[bool], leaves: &[Leaf]) -> Vec<Vec<bool>> {
    let width = |input: &StageInput| match input {
        StageInput::Leaf(l) => leaves.get(*l).map_or(0, |l| l.schema.fields().len()),
        StageInput::Op(n) => n.width,
    };
    let mut reads: Vec<Vec<bool>> = stage.inputs.iter().map(|i| vec![false; width(i)]).collect();
    plan_columns_used(&stage.physical, needed, &mut reads);
    reads
}

/// Rewrites `stage` and the stages under it so their slots convert the
/// string columns read only through `to_timestamp` (`leaf_timestamps`);
/// `needed` flags the stage's outputs read above it.
pub(super) fn push_timestamps(stage: &mut Stage, needed: &[bool], leaves: &[Leaf]) {
    stage.physical = super::leaf_timestamps::push_into_slots(stage.physical.clone(), needed);
    let reads = input_reads(stage, needed, leaves);
    for (input, read) in stage.inputs.iter_mut().zip(reads) {
        if let StageInput::Op(node) = input {
            let child_needs = op_columns_used(node, read);
            for (child, child_needed) in node.children.iter_mut().zip(child_needs) {
                push_timestamps(child, &child_needed, leaves);
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
pub(super) fn op_columns_used(node: &OpNode, needed: Vec<bool>) -> Vec<Vec<bool>> {
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

pub(super) fn visit_ops(stage: &Stage, f: &mut dyn FnMut(&OpNode)) {
    for i in &stage.inputs {
        if let StageInput::Op(n) = i {
            for c in &n.children {
                visit_ops(c, f);
            }
            f(n);
        }
    }
}

pub(super) fn visit_ops_mut(stage: &mut Stage, f: &mut dyn FnMut(&mut OpNode)) {
    for i in &mut stage.inputs {
        if let StageInput::Op(n) = i {
            for c in &mut n.children {
                visit_ops_mut(c, f);
            }
            f(n);
        }
    }
}

/// Per leaf, the columns that may arrive dictionary-encoded: the
/// dictionary key column of every aggregation whose input is a leaf's rows
/// passed on unchanged (identity stages, watermarks), where that leaf is
/// read nowhere else.
pub(super) fn dictionary_columns(root: &Stage, leaves: &[Leaf]) -> Vec<Vec<bool>> {
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

/// Per leaf and column, the `to_timestamp` pattern (`Some(None)`: none)
/// with which the only slot reading the leaf converts the column, where
/// the leaf is read by one stage.
pub(super) fn leaf_conversions(root: &Stage, leaves: &[Leaf]) -> Vec<Vec<Option<Option<String>>>> {
    let mut out: Vec<Vec<Option<Option<String>>>> = leaves
        .iter()
        .map(|l| vec![None; l.schema.fields().len()])
        .collect();
    let mut reads = vec![0usize; leaves.len()];
    count_leaf_reads(root, &mut reads);
    visit_stages(root, &mut |stage| {
        let mut slots = Vec::new();
        collect_slots(&stage.physical, &mut slots);
        for slot in &slots {
            let Some(StageInput::Leaf(l)) = stage.inputs.get(slot.index) else {
                continue;
            };
            let alone = slots.iter().filter(|s| s.index == slot.index).count() == 1;
            if !alone || reads.get(*l) != Some(&1) {
                continue;
            }
            for (column, pattern) in slot.converted_table_columns() {
                if let Some(c) = out.get_mut(*l).and_then(|c| c.get_mut(column)) {
                    *c = Some(pattern);
                }
            }
        }
    });
    out
}

/// Calls `f` on `stage` and every stage under it.
pub(super) fn visit_stages(stage: &Stage, f: &mut dyn FnMut(&Stage)) {
    f(stage);
    for i in &stage.inputs {
        if let StageInput::Op(n) = i {
            for c in &n.children {
                visit_stages(c, f);
            }
        }
    }
}

/// `f` on every stage of `stage`'s tree, which it may change.
pub(super) fn visit_stages_mut(stage: &mut Stage, f: &mut dyn FnMut(&mut Stage)) {
    f(stage);
    for i in &mut stage.inputs {
        if let StageInput::Op(n) = i {
            for c in &mut n.children {
                visit_stages_mut(c, f);
            }
        }
    }
}

/// The slots of a stage's physical plan.
fn collect_slots<'a>(plan: &'a Arc<dyn ExecutionPlan>, slots: &mut Vec<&'a SlotExec>) {
    if let Some(slot) = plan.downcast_ref::<SlotExec>() {
        slots.push(slot);
    }
    for c in plan.children() {
        collect_slots(c, slots);
    }
}

/// How many times each leaf is an input of a stage.
pub(super) fn count_leaf_reads(stage: &Stage, reads: &mut [usize]) {
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
pub(super) fn passed_leaf(stage: &Stage) -> Option<usize> {
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
