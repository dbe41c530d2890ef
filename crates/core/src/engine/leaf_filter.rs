//! The condition a source may apply to the rows it reads: a
//! [`LeafFilter`], found in a flow's plan by `exec::leaf_filters` and given
//! to the source by `Source::filter_rows`.

use std::sync::Arc;

use arrow::array::{Array, BooleanArray};
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;

/// A condition on a leaf's columns that every row the plan outputs meets:
/// a source may drop the rows that do not meet it (see the module
/// documentation).
#[derive(Debug, Clone)]
pub struct LeafFilter {
    /// The condition; its columns are indices into [`columns`](Self::columns).
    predicate: Arc<dyn PhysicalExpr>,
    /// The leaf's columns the condition reads, in its column order.
    columns: Vec<usize>,
    /// The leaf's schema.
    schema: SchemaRef,
}

impl LeafFilter {
    /// The filter of `predicate`, a condition over the columns of a leaf
    /// whose schema is `schema` (its columns are renumbered in the order of
    /// the columns it reads); None when it reads no column or one outside
    /// the schema.
    pub(crate) fn new(predicate: Arc<dyn PhysicalExpr>, schema: &SchemaRef) -> Option<LeafFilter> {
        let mut columns: Vec<usize> = datafusion::physical_expr::utils::collect_columns(&predicate)
            .iter()
            .map(|c| c.index())
            .collect();
        columns.sort_unstable();
        columns.dedup();
        if columns.is_empty() || columns.iter().any(|&c| c >= schema.fields().len()) {
            return None;
        }
        let predicate = remap(&predicate, |i| {
            let local = columns.binary_search(&i).ok()?;
            Some(Arc::new(Column::new(schema.field(i).name(), local)) as Arc<dyn PhysicalExpr>)
        })?;
        Some(LeafFilter {
            predicate,
            columns,
            schema: schema.clone(),
        })
    }

    /// The leaf's columns (indices into its schema) the condition reads.
    pub fn columns(&self) -> &[usize] {
        &self.columns
    }

    /// The rows of `batch` that meet the condition (null counts as not);
    /// `batch` holds the leaf's [`columns`](Self::columns) in that order,
    /// each in the leaf's type or, for a string, dictionary-encoded.
    pub fn evaluate(&self, batch: &RecordBatch) -> datafusion::error::Result<BooleanArray> {
        let rows = batch.num_rows();
        let mask = self.predicate.evaluate(batch)?.into_array(rows)?;
        let mask = mask
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(|| {
                datafusion::error::DataFusionError::Internal(format!(
                    "a leaf filter gave {} instead of booleans",
                    mask.data_type()
                ))
            })?
            .clone();
        Ok(mask)
    }

    /// The schema of the batches [`evaluate`](Self::evaluate) takes (the
    /// leaf's types; a reader may give strings dictionary-encoded instead).
    pub fn input_schema(&self) -> SchemaRef {
        let fields: Vec<Field> = self
            .columns
            .iter()
            .map(|&c| self.schema.field(c).clone())
            .collect();
        Arc::new(Schema::new(fields))
    }
}

/// `expr` with every column `i` replaced by `to(i)` (bottom-up, so a
/// replacement's own columns stay as given); None when some column has no
/// replacement.
pub(crate) fn remap(
    expr: &Arc<dyn PhysicalExpr>,
    to: impl Fn(usize) -> Option<Arc<dyn PhysicalExpr>>,
) -> Option<Arc<dyn PhysicalExpr>> {
    let mut missing = false;
    let out = expr
        .clone()
        .transform_up(|e| {
            if let Some(c) = e.downcast_ref::<Column>() {
                return Ok(match to(c.index()) {
                    Some(r) => Transformed::yes(r),
                    None => {
                        missing = true;
                        Transformed::no(e)
                    }
                });
            }
            Ok(Transformed::no(e))
        })
        .ok()?
        .data;
    (!missing).then_some(out)
}
