//! `to_timestamp(column)` computed by the leaf that reads the column.
//!
//! Event times often arrive as strings that the query converts first
//! (`with_column("event_time", "to_timestamp(ts)")`, `CAST(ts AS
//! TIMESTAMP)`). When a stage reads a leaf's string column only as the
//! argument of `to_timestamp` (with one pattern, or none), the stage's
//! [`SlotExec`] gives that column already converted and the calls become
//! plain column references. Then the operators between the leaf and the
//! conversion (a filter, a repartition) move 8-byte timestamps instead of
//! strings, and a leaf whose rows arrive dictionary-encoded (Parquet column
//! chunks, see [`CompiledPlan::leaf_dictionary_columns`]) parses each
//! distinct string once per dictionary.
//!
//! The rewrite follows the column up from the slot through projections,
//! filters, repartitions and partition merging; any other use of the raw
//! string (compared, hashed, given to another function, passed on to an
//! output of the stage that is read above it) leaves the plan as it was,
//! and so does a rewritten plan whose output schema would differ. The
//! runtime applies it only where projection pushdown applies (not when late
//! rows, which carry every column, go to a sink).

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Result as DFResult, ScalarValue};
use datafusion::physical_expr::expressions::{Column, Literal};
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning};

use super::leaf::{LeafTimestamp, SlotExec};
use crate::plan::timestamp::udf::{is_text, timestamp_type, TO_TIMESTAMP_FN};

/// `plan` (a stage's physical plan, whose output columns flagged in
/// `needed` are read above it) with every slot column the plan reads only
/// through `to_timestamp` converted by its slot (see the module
/// documentation); `plan` itself when there is none or the rewrite does not
/// apply. A raw column passed on to an output nobody reads becomes NULLs
/// there, as projection pushdown leaves unread columns.
pub(super) fn push_into_slots(
    plan: Arc<dyn ExecutionPlan>,
    needed: &[bool],
) -> Arc<dyn ExecutionPlan> {
    let mut dead = Vec::new();
    let rewritten = match rewrite(&plan, &mut Vec::new(), needed, &mut dead) {
        Ok(Some(new)) => new,
        _ => return plan,
    };
    let rewritten = match null_outputs(rewritten, &dead, &plan.schema()) {
        Ok(p) => p,
        Err(_) => return plan,
    };
    if same_fields(&rewritten.schema(), &plan.schema()) {
        rewritten
    } else {
        plan
    }
}

/// `plan` with its output columns `dead` replaced by NULLs of the types
/// they have in `original`.
fn null_outputs(
    plan: Arc<dyn ExecutionPlan>,
    dead: &[usize],
    original: &arrow::datatypes::Schema,
) -> DFResult<Arc<dyn ExecutionPlan>> {
    if dead.is_empty() {
        return Ok(plan);
    }
    let schema = plan.schema();
    let exprs = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let expr: Arc<dyn PhysicalExpr> = if dead.contains(&i) {
                let t = original.field(i).data_type();
                Arc::new(Literal::new(ScalarValue::try_from(t)?))
            } else {
                Arc::new(Column::new(f.name(), i))
            };
            Ok(ProjectionExpr {
                expr,
                alias: f.name().clone(),
            })
        })
        .collect::<DFResult<Vec<_>>>()?;
    Ok(Arc::new(ProjectionExec::try_new(exprs, plan)?))
}

fn same_fields(a: &arrow::datatypes::Schema, b: &arrow::datatypes::Schema) -> bool {
    a.fields().len() == b.fields().len()
        && a.fields().iter().zip(b.fields()).all(|(x, y)| {
            x.data_type() == y.data_type()
                && x.name() == y.name()
                && x.is_nullable() == y.is_nullable()
        })
}

/// Rewrites the subtree `plan`, whose ancestors (nearest last) are
/// `ancestors`; `None` when nothing under it changed.
/// `needed` flags the plan's outputs read above it; `dead` collects the
/// outputs a converted column reaches unread.
fn rewrite(
    plan: &Arc<dyn ExecutionPlan>,
    ancestors: &mut Vec<Arc<dyn ExecutionPlan>>,
    needed: &[bool],
    dead: &mut Vec<usize>,
) -> DFResult<Option<Arc<dyn ExecutionPlan>>> {
    if let Some(slot) = plan.downcast_ref::<SlotExec>() {
        let timestamps = slot_timestamps(slot, ancestors, needed, dead);
        if timestamps.is_empty() {
            return Ok(None);
        }
        return Ok(Some(Arc::new(slot.with_timestamps(timestamps))));
    }
    ancestors.push(plan.clone());
    let mut changed = Vec::new();
    for child in plan.children() {
        changed.push(rewrite(child, ancestors, needed, dead)?);
    }
    ancestors.pop();
    if changed.iter().all(Option::is_none) {
        return Ok(None);
    }
    let children: Vec<Arc<dyn ExecutionPlan>> = plan
        .children()
        .into_iter()
        .zip(changed)
        .map(|(old, new)| new.unwrap_or_else(|| old.clone()))
        .collect();
    Ok(Some(rebuild(plan, children)?))
}

/// `plan` over its new `children`, with `to_timestamp` of a column that
/// is now a timestamp replaced by the column.
pub(super) fn rebuild(
    plan: &Arc<dyn ExecutionPlan>,
    children: Vec<Arc<dyn ExecutionPlan>>,
) -> DFResult<Arc<dyn ExecutionPlan>> {
    let [child] = children.as_slice() else {
        return recompute(plan, children);
    };
    let input = child.schema();
    let unwrap = |e: &Arc<dyn PhysicalExpr>| -> DFResult<Arc<dyn PhysicalExpr>> {
        Ok(e.clone()
            .transform_up(|e| {
                Ok(match converted_argument(&e, &input) {
                    Some(column) => Transformed::yes(column),
                    None => Transformed::no(e),
                })
            })?
            .data)
    };
    if let Some(p) = plan.downcast_ref::<ProjectionExec>() {
        let exprs = p
            .expr()
            .iter()
            .map(|e| {
                Ok(ProjectionExpr {
                    expr: unwrap(&e.expr)?,
                    alias: e.alias.clone(),
                })
            })
            .collect::<DFResult<Vec<_>>>()?;
        return Ok(Arc::new(ProjectionExec::try_new(exprs, child.clone())?));
    }
    if let Some(f) = plan.downcast_ref::<FilterExec>() {
        let filter = FilterExecBuilder::from(f)
            .with_input(child.clone())
            .with_predicate(unwrap(f.predicate())?)
            .build()?;
        return Ok(Arc::new(filter));
    }
    if let Some(r) = plan.downcast_ref::<RepartitionExec>() {
        let partitioning = match r.partitioning() {
            Partitioning::Hash(exprs, n) => {
                Partitioning::Hash(exprs.iter().map(unwrap).collect::<DFResult<Vec<_>>>()?, *n)
            }
            other => other.clone(),
        };
        let mut new = RepartitionExec::try_new(child.clone(), partitioning)?;
        if r.preserve_order() {
            new = new.with_preserve_order();
        }
        return Ok(Arc::new(new));
    }
    recompute(plan, children)
}

/// `plan` over new `children` whose properties (schema) may differ.
pub(super) fn recompute(
    plan: &Arc<dyn ExecutionPlan>,
    children: Vec<Arc<dyn ExecutionPlan>>,
) -> DFResult<Arc<dyn ExecutionPlan>> {
    plan.clone().replace_children(
        children,
        ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
    )
}

/// The column `e` converts when `e` is `to_timestamp(column[, pattern])`
/// and that column of `input` is already a timestamp.
fn converted_argument(
    e: &Arc<dyn PhysicalExpr>,
    input: &arrow::datatypes::Schema,
) -> Option<Arc<dyn PhysicalExpr>> {
    let (column, _) = to_timestamp_call(e)?;
    let field = input.fields().get(column.index())?;
    // `to_timestamp` of a value already in this type is that value.
    (field.data_type() == &timestamp_type())
        .then(|| Arc::new(column.clone()) as Arc<dyn PhysicalExpr>)
}

/// `(column, pattern)` when `e` is `to_timestamp(column)` or
/// `to_timestamp(column, 'literal pattern')`.
fn to_timestamp_call(e: &Arc<dyn PhysicalExpr>) -> Option<(&Column, Option<String>)> {
    let f = e.downcast_ref::<ScalarFunctionExpr>()?;
    if f.name() != TO_TIMESTAMP_FN {
        return None;
    }
    let column = f.args().first()?.downcast_ref::<Column>()?;
    let pattern = match f.args() {
        [_] => None,
        [_, p] => {
            let literal = p.downcast_ref::<Literal>()?;
            match literal.value() {
                ScalarValue::Utf8(Some(s))
                | ScalarValue::LargeUtf8(Some(s))
                | ScalarValue::Utf8View(Some(s)) => Some(s.clone()),
                _ => return None,
            }
        }
        _ => return None,
    };
    Some((column, pattern))
}

/// The output columns of `slot` that its `ancestors` (nearest last) read
/// only as `to_timestamp`'s argument, each with the one pattern used; the
/// plan outputs (not `needed`) such a column reaches raw go to `dead`.
fn slot_timestamps(
    slot: &SlotExec,
    ancestors: &[Arc<dyn ExecutionPlan>],
    needed: &[bool],
    dead: &mut Vec<usize>,
) -> Vec<LeafTimestamp> {
    let schema = slot.schema();
    let mut timestamps = Vec::new();
    for c in 0..schema.fields().len() {
        if !is_text(schema.field(c).data_type()) {
            continue;
        }
        let Some((pattern, reaches)) = only_converted(c, ancestors) else {
            continue;
        };
        if let Some(output) = reaches {
            if needed.get(output).copied().unwrap_or(true) || dead.contains(&output) {
                continue;
            }
            dead.push(output);
        }
        timestamps.push(LeafTimestamp { column: c, pattern });
    }
    timestamps
}

/// What one node does with the column followed up the plan.
enum Uses {
    /// Only `to_timestamp` with this pattern, or nothing (`None`).
    Converted(Option<Option<String>>),
    /// Something else reads the raw value.
    Raw,
}

/// The uses of column `c` of the node's input in `e`.
fn uses_in(e: &Arc<dyn PhysicalExpr>, c: usize, found: &mut Uses) {
    let _ = e.apply(|e| {
        if let Some((column, pattern)) = to_timestamp_call(e) {
            if column.index() == c {
                match found {
                    Uses::Converted(None) => *found = Uses::Converted(Some(pattern)),
                    Uses::Converted(Some(p)) if *p == pattern => {}
                    _ => *found = Uses::Raw,
                }
                return Ok(TreeNodeRecursion::Jump);
            }
        }
        if e.downcast_ref::<Column>()
            .is_some_and(|col| col.index() == c)
        {
            *found = Uses::Raw;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
}

/// The pattern when column `c` of the slot's output is read only as
/// `to_timestamp(c[, pattern])` by `ancestors` (nearest last), and the plan
/// output it reaches raw, if any.
fn only_converted(
    c: usize,
    ancestors: &[Arc<dyn ExecutionPlan>],
) -> Option<(Option<String>, Option<usize>)> {
    let mut position = c;
    let mut found = Uses::Converted(None);
    for node in ancestors.iter().rev() {
        if let Some(p) = node.downcast_ref::<ProjectionExec>() {
            let mut passed = None;
            for (i, e) in p.expr().iter().enumerate() {
                if e.expr
                    .downcast_ref::<Column>()
                    .is_some_and(|col| col.index() == position)
                {
                    if passed.is_some() {
                        return None;
                    }
                    passed = Some(i);
                } else {
                    uses_in(&e.expr, position, &mut found);
                }
            }
            match passed {
                Some(i) => position = i,
                None => return converted(found).map(|p| (p, None)),
            }
        } else if let Some(f) = node.downcast_ref::<FilterExec>() {
            uses_in(f.predicate(), position, &mut found);
            if let Some(p) = f.projection() {
                match p.iter().position(|&i| i == position) {
                    Some(i) => position = i,
                    None => return converted(found).map(|p| (p, None)),
                }
            }
        } else if let Some(r) = node.downcast_ref::<RepartitionExec>() {
            if let Partitioning::Hash(exprs, _) = r.partitioning() {
                for e in exprs {
                    uses_in(e, position, &mut found);
                }
            }
        } else if node.downcast_ref::<CoalescePartitionsExec>().is_none() {
            return None;
        }
        if matches!(found, Uses::Raw) {
            return None;
        }
    }
    // The raw column is an output of the plan.
    converted(found).map(|p| (p, Some(position)))
}

/// The one pattern when the column was only converted (at least once).
fn converted(found: Uses) -> Option<Option<String>> {
    match found {
        Uses::Converted(Some(pattern)) => Some(pattern),
        _ => None,
    }
}
