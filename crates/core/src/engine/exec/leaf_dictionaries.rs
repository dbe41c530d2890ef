//! String columns that stay dictionary-encoded from the source to the sink.
//!
//! A Parquet source can give a string column as `Dictionary(Int32, Utf8)`
//! (its column chunks are dictionary-encoded: each distinct string is
//! stored once, the rows are keys). When a flow's plan is one stage over
//! one leaf, and that stage only compares such a column with string
//! literals (`level != 'INFO'`), tests it for NULL or passes it on
//! unchanged, no operator needs the rows' strings: a comparison with a
//! literal compares each distinct value once and maps the result through
//! the keys, a filter moves 4-byte keys, and a sink that writes
//! dictionaries as they are (a Parquet file sink, see
//! `Sink::takes_dictionary_strings`) encodes each distinct string once.
//!
//! [`dictionary_output`] finds those columns in a stage's physical plan — a
//! chain of projections, filters, repartitions and partition merges over
//! one [`SlotExec`] — and builds the plan's variant whose slot gives them as
//! dictionaries. Any other use of a column (a function, a cast, a join or
//! hash key, a comparison with another column) keeps it a string, and a
//! variant whose output differs from the plan's in more than those columns'
//! types is dropped (safety net).

use std::sync::Arc;

use arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{
    BinaryExpr, Column, IsNotNullExpr, IsNullExpr, Literal,
};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning};

use super::dictionary_ids::is_string_dictionary;
use super::leaf::SlotExec;
use super::leaf_timestamps::rebuild;

/// The string columns of a stage's leaf that may stay dictionaries, and
/// the stage's plans reading some of them so (built when first asked for).
#[derive(Debug, Clone)]
pub(super) struct DictionaryOutput {
    /// The leaf the stage reads.
    pub(super) leaf: usize,
    /// (slot output column, leaf column) of each column that may arrive as
    /// `Dictionary(Int32, Utf8)`.
    columns: Vec<(usize, usize)>,
    slot: SlotExec,
    /// The slot's ancestors, nearest first.
    chain: Vec<Arc<dyn ExecutionPlan>>,
    /// The stage's output schema.
    schema: SchemaRef,
    /// Built variants: (leaf columns read as dictionaries, plan, output schema).
    variants: Vec<(Vec<usize>, Arc<dyn ExecutionPlan>, SchemaRef)>,
}

impl DictionaryOutput {
    /// The leaf columns that may arrive as `Dictionary(Int32, Utf8)`.
    pub(super) fn leaf_columns(&self) -> impl Iterator<Item = usize> + '_ {
        self.columns.iter().map(|&(_, c)| c)
    }

    /// The stage's plan reading the leaf's `leaf_columns` (some of
    /// [`leaf_columns`](Self::leaf_columns), in that order) as
    /// dictionaries, and its output schema (the stage's, with the columns
    /// they reach typed `Dictionary(Int32, Utf8)`); None when it cannot be
    /// built.
    pub(super) fn variant(
        &mut self,
        leaf_columns: &[usize],
    ) -> Option<(Arc<dyn ExecutionPlan>, SchemaRef)> {
        if let Some((_, plan, schema)) = self.variants.iter().find(|v| v.0 == leaf_columns) {
            return Some((plan.clone(), schema.clone()));
        }
        let slot_columns: Vec<usize> = self
            .columns
            .iter()
            .filter(|(_, c)| leaf_columns.contains(c))
            .map(|&(s, _)| s)
            .collect();
        let mut plan: Arc<dyn ExecutionPlan> = Arc::new(self.slot.with_dictionaries(&slot_columns));
        for node in &self.chain {
            plan = rebuild(node, vec![plan]).ok()?;
        }
        let schema = plan.schema();
        if !same_but_dictionaries(&self.schema, &schema) {
            return None;
        }
        self.variants
            .push((leaf_columns.to_vec(), plan.clone(), schema.clone()));
        Some((plan, schema))
    }
}

/// The string columns of the one leaf of `physical` (a stage's plan,
/// output schema `schema`) that it only compares with string literals,
/// tests for NULL or passes on (see the module documentation), with the
/// plan reading all of them as dictionaries built and checked; None when
/// there is no such column or the plan is not a chain of projections,
/// filters, repartitions and partition merges over one leaf.
pub(super) fn dictionary_output(
    physical: &Arc<dyn ExecutionPlan>,
    schema: &SchemaRef,
) -> Option<DictionaryOutput> {
    // The chain from the stage's root down to its slot.
    let mut chain: Vec<Arc<dyn ExecutionPlan>> = Vec::new();
    let mut node = physical.clone();
    let slot = loop {
        if let Some(slot) = node.downcast_ref::<SlotExec>() {
            break slot.clone();
        }
        let passes = node.downcast_ref::<ProjectionExec>().is_some()
            || node.downcast_ref::<FilterExec>().is_some()
            || node.downcast_ref::<RepartitionExec>().is_some()
            || node.downcast_ref::<CoalescePartitionsExec>().is_some();
        let children = node.children();
        if !passes || children.len() != 1 {
            return None;
        }
        let child = children[0].clone();
        chain.push(node);
        node = child;
    };
    // Ancestors of the slot, nearest first.
    chain.reverse();
    let slot_schema = slot.schema();
    let columns = (0..slot_schema.fields().len())
        .filter(|&c| slot_schema.field(c).data_type() == &DataType::Utf8)
        .filter(|&c| only_compared_or_passed(c, &chain))
        .map(|c| slot.table_column(c).map(|t| (c, t)))
        .collect::<Option<Vec<(usize, usize)>>>()?;
    if columns.is_empty() {
        return None;
    }
    let mut output = DictionaryOutput {
        leaf: slot.index,
        columns,
        slot,
        chain,
        schema: schema.clone(),
        variants: Vec::new(),
    };
    let all: Vec<usize> = output.leaf_columns().collect();
    output.variant(&all)?;
    Some(output)
}

/// True when `variant` has `original`'s fields, names and nullability,
/// with some `Utf8` fields (at least one) typed `Dictionary(Int32, Utf8)`.
fn same_but_dictionaries(original: &Schema, variant: &Schema) -> bool {
    original.fields().len() == variant.fields().len()
        && original
            .fields()
            .iter()
            .zip(variant.fields())
            .all(|(o, v)| {
                o.name() == v.name()
                    && o.is_nullable() == v.is_nullable()
                    && (o.data_type() == v.data_type()
                        || (o.data_type() == &DataType::Utf8
                            && is_string_dictionary(v.data_type())))
            })
}

/// True when `ancestors` (the slot's, nearest first) read column `c` of the
/// slot's output only as allowed (see [`only_compared`]) or pass it on
/// unchanged, to the stage's output or to nothing.
fn only_compared_or_passed(c: usize, ancestors: &[Arc<dyn ExecutionPlan>]) -> bool {
    let mut position = c;
    for node in ancestors {
        if let Some(p) = node.downcast_ref::<ProjectionExec>() {
            let mut passed = None;
            for (i, e) in p.expr().iter().enumerate() {
                if is_column(&e.expr, position) {
                    if passed.is_some() {
                        return false;
                    }
                    passed = Some(i);
                } else if !only_compared(&e.expr, position) {
                    return false;
                }
            }
            match passed {
                Some(i) => position = i,
                None => return true,
            }
        } else if let Some(f) = node.downcast_ref::<FilterExec>() {
            if !only_compared(f.predicate(), position) {
                return false;
            }
            if let Some(p) = f.projection() {
                match p.iter().position(|&i| i == position) {
                    Some(i) => position = i,
                    None => return true,
                }
            }
        } else if let Some(r) = node.downcast_ref::<RepartitionExec>() {
            if let Partitioning::Hash(exprs, _) = r.partitioning() {
                if exprs.iter().any(|e| !only_compared(e, position)) {
                    return false;
                }
            }
        } else if node.downcast_ref::<CoalescePartitionsExec>().is_none() {
            return false;
        }
    }
    true
}

/// True for `=`, `<>`, `<`, `<=`, `>` and `>=`.
pub(super) fn is_comparison(op: &Operator) -> bool {
    matches!(
        op,
        Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq
    )
}

fn is_column(e: &Arc<dyn PhysicalExpr>, c: usize) -> bool {
    e.downcast_ref::<Column>()
        .is_some_and(|col| col.index() == c)
}

/// True when `e` reads column `c` only as an operand of a comparison
/// (`=`, `<>`, `<`, `<=`, `>`, `>=`) with a string literal or of
/// `IS [NOT] NULL` (or not at all): what a dictionary gives as a string
/// does.
fn only_compared(e: &Arc<dyn PhysicalExpr>, c: usize) -> bool {
    if is_column(e, c) {
        return false;
    }
    if let Some(b) = e.downcast_ref::<BinaryExpr>() {
        if is_comparison(b.op())
            && ((is_column(b.left(), c) && is_string_literal(b.right()))
                || (is_column(b.right(), c) && is_string_literal(b.left())))
        {
            return true;
        }
    }
    if let Some(n) = e.downcast_ref::<IsNullExpr>() {
        if is_column(n.arg(), c) {
            return true;
        }
    }
    if let Some(n) = e.downcast_ref::<IsNotNullExpr>() {
        if is_column(n.arg(), c) {
            return true;
        }
    }
    e.children()
        .into_iter()
        .all(|child| only_compared(child, c))
}

fn is_string_literal(e: &Arc<dyn PhysicalExpr>) -> bool {
    e.downcast_ref::<Literal>()
        .is_some_and(|l| matches!(l.value(), ScalarValue::Utf8(_)))
}
