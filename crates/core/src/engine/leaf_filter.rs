//! The condition a source may apply to the rows it reads: a
//! [`LeafFilter`], found in a flow's plan by `exec::leaf_filters` and given
//! to the source by `Source::filter_rows`.

use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, AsArray, BooleanArray, DictionaryArray};
use arrow::buffer::BooleanBuffer;
use arrow::datatypes::{Field, Int32Type, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;

use crate::plan::timestamp::udf::same_dictionary_values;

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
        self.evaluate_with(batch, &mut DictionaryVerdicts::default())
    }

    /// [`evaluate`](Self::evaluate), remembering in `verdicts` the result
    /// for each value of the last dictionary it evaluated: the batches of
    /// one Parquet column chunk share a dictionary, whose values are then
    /// evaluated once for all of them.
    pub fn evaluate_with(
        &self,
        batch: &RecordBatch,
        verdicts: &mut DictionaryVerdicts,
    ) -> datafusion::error::Result<BooleanArray> {
        if let ([column], [leaf_column]) = (batch.columns(), self.columns.as_slice()) {
            if let Some(dictionary) = column.as_dictionary_opt::<Int32Type>() {
                let leaf_type = self.schema.field(*leaf_column).data_type();
                if dictionary.values().data_type() == leaf_type {
                    return self.evaluate_dictionary(dictionary, verdicts);
                }
            }
        }
        let rows = batch.num_rows();
        as_mask(self.predicate.evaluate(batch)?.into_array(rows)?)
    }

    /// [`evaluate`](Self::evaluate) of a condition on one column given
    /// dictionary-encoded: the condition is evaluated once per distinct
    /// value (and once for NULL), and each row takes its key's result.
    fn evaluate_dictionary(
        &self,
        dictionary: &DictionaryArray<Int32Type>,
        verdicts: &mut DictionaryVerdicts,
    ) -> datafusion::error::Result<BooleanArray> {
        let values = dictionary.values();
        let null = values.len();
        let kept = match &mut verdicts.last {
            Some((seen, kept)) if same_dictionary_values(seen, values) => kept,
            slot => {
                let kept = self.verdicts(values)?;
                &mut slot.insert((values.clone(), kept)).1
            }
        };
        let keys = dictionary.keys();
        let bits = match keys.nulls().filter(|n| n.null_count() > 0) {
            None => BooleanBuffer::collect_bool(keys.len(), |i| {
                kept.get(keys.value(i) as usize).copied().unwrap_or(false)
            }),
            Some(nulls) => BooleanBuffer::collect_bool(keys.len(), |i| {
                let k = if nulls.is_null(i) {
                    null
                } else {
                    keys.value(i) as usize
                };
                kept.get(k).copied().unwrap_or(false)
            }),
        };
        Ok(BooleanArray::new(bits, None))
    }

    /// Whether each of a dictionary's `values` meets the condition, then
    /// whether NULL does (the entry after them).
    fn verdicts(&self, values: &ArrayRef) -> datafusion::error::Result<Vec<bool>> {
        let null = values.len();
        // The distinct values, then a NULL for the rows with a null key.
        let with_null = arrow::compute::concat(&[
            values.as_ref(),
            new_null_array(values.data_type(), 1).as_ref(),
        ])?;
        let field = self
            .schema
            .field(self.columns[0])
            .clone()
            .with_nullable(true);
        let distinct = RecordBatch::try_new(Arc::new(Schema::new(vec![field])), vec![with_null])?;
        let per_value = as_mask(self.predicate.evaluate(&distinct)?.into_array(null + 1)?)?;
        // A row is kept where its value's result is true (not false or null).
        Ok((0..=null)
            .map(|i| per_value.is_valid(i) && per_value.value(i))
            .collect())
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

/// The result of a [`LeafFilter`] on each value of the last dictionary it
/// evaluated (see [`LeafFilter::evaluate_with`]).
#[derive(Default)]
pub struct DictionaryVerdicts {
    /// The dictionary's values, and per value (then for NULL) whether a
    /// row holding it is kept.
    last: Option<(ArrayRef, Vec<bool>)>,
}

/// `mask` as booleans (an error naming its type otherwise).
fn as_mask(mask: ArrayRef) -> datafusion::error::Result<BooleanArray> {
    mask.as_any()
        .downcast_ref::<BooleanArray>()
        .cloned()
        .ok_or_else(|| {
            datafusion::error::DataFusionError::Internal(format!(
                "a leaf filter gave {} instead of booleans",
                mask.data_type()
            ))
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::StringArray;
    use arrow::datatypes::DataType;
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{
        BinaryExpr, IsNotNullExpr, IsNullExpr, Literal, NotExpr,
    };
    use datafusion::scalar::ScalarValue;
    use proptest::prelude::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("v", DataType::Int64, false),
            Field::new("level", DataType::Utf8, true),
        ]))
    }

    fn level() -> Arc<dyn PhysicalExpr> {
        Arc::new(Column::new("level", 1))
    }

    fn text(s: &str) -> Arc<dyn PhysicalExpr> {
        Arc::new(Literal::new(ScalarValue::Utf8(Some(s.into()))))
    }

    fn compare(op: Operator, s: &str) -> Arc<dyn PhysicalExpr> {
        Arc::new(BinaryExpr::new(level(), op, text(s)))
    }

    /// Conditions on `level`, each with a name for failure messages.
    fn conditions() -> Vec<(&'static str, Arc<dyn PhysicalExpr>)> {
        vec![
            ("level <> 'INFO'", compare(Operator::NotEq, "INFO")),
            ("level = 'WARN'", compare(Operator::Eq, "WARN")),
            ("level < 'INFO'", compare(Operator::Lt, "INFO")),
            ("level IS NULL", Arc::new(IsNullExpr::new(level()))),
            ("level IS NOT NULL", Arc::new(IsNotNullExpr::new(level()))),
            (
                "NOT (level = 'INFO')",
                Arc::new(NotExpr::new(compare(Operator::Eq, "INFO"))),
            ),
            (
                "level = 'INFO' OR level IS NULL",
                Arc::new(BinaryExpr::new(
                    compare(Operator::Eq, "INFO"),
                    Operator::Or,
                    Arc::new(IsNullExpr::new(level())),
                )),
            ),
            (
                "level IS DISTINCT FROM 'INFO'",
                compare(Operator::IsDistinctFrom, "INFO"),
            ),
        ]
    }

    /// The kept rows of `mask` (true; a null counts as not kept).
    fn kept(mask: &BooleanArray) -> Vec<bool> {
        (0..mask.len())
            .map(|i| mask.is_valid(i) && mask.value(i))
            .collect()
    }

    #[test]
    fn a_dictionary_column_is_filtered_through_its_distinct_values() {
        // Values with a null among them, keys with a null: every row's
        // result is its value's, a null key's that of NULL.
        let values = StringArray::from(vec![Some("INFO"), Some("WARN"), None, Some("ERROR")]);
        let keys =
            arrow::array::Int32Array::from(vec![Some(0), Some(1), None, Some(2), Some(3), Some(0)]);
        let column = DictionaryArray::new(keys, Arc::new(values));
        let filter = LeafFilter::new(compare(Operator::NotEq, "INFO"), &schema()).unwrap();
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new(
                "level",
                column.data_type().clone(),
                true,
            )])),
            vec![Arc::new(column)],
        )
        .unwrap();
        let mask = filter.evaluate(&batch).unwrap();
        assert_eq!(kept(&mask), [false, true, false, false, true, false]);
        let filter = LeafFilter::new(Arc::new(IsNullExpr::new(level())), &schema()).unwrap();
        let mask = filter.evaluate(&batch).unwrap();
        assert_eq!(kept(&mask), [false, false, true, true, false, false]);
    }

    #[test]
    fn a_dictionarys_results_are_reused_only_for_the_same_values() {
        let filter = LeafFilter::new(compare(Operator::NotEq, "INFO"), &schema()).unwrap();
        let batch_of = |values: &ArrayRef, keys: Vec<i32>| {
            let column = DictionaryArray::new(arrow::array::Int32Array::from(keys), values.clone());
            RecordBatch::try_new(
                Arc::new(Schema::new(vec![Field::new(
                    "level",
                    column.data_type().clone(),
                    true,
                )])),
                vec![Arc::new(column)],
            )
            .unwrap()
        };
        let first: ArrayRef = Arc::new(StringArray::from(vec!["INFO", "WARN"]));
        // The same strings in another array, then other strings.
        let copy: ArrayRef = Arc::new(StringArray::from(vec!["INFO", "WARN"]));
        let swapped: ArrayRef = Arc::new(StringArray::from(vec!["WARN", "INFO"]));
        let mut verdicts = DictionaryVerdicts::default();
        let mut results = Vec::new();
        for values in [&first, &first, &swapped, &copy, &swapped] {
            let mask = filter
                .evaluate_with(&batch_of(values, vec![0, 1, 1, 0]), &mut verdicts)
                .unwrap();
            results.push(kept(&mask));
        }
        let info_warn = vec![false, true, true, false];
        let warn_info = vec![true, false, false, true];
        assert_eq!(
            results,
            [&info_warn, &info_warn, &warn_info, &info_warn, &warn_info].map(Vec::clone)
        );
    }

    proptest! {
        /// Through the distinct values or row by row over the strings, a
        /// condition keeps the same rows.
        #[test]
        fn a_dictionary_is_filtered_as_its_strings_are(
            values in proptest::collection::vec(
                proptest::option::weighted(0.9, prop_oneof!["INFO", "WARN", "ERROR", "[A-Z]{0,3}"]),
                1..6,
            ),
            keys in proptest::collection::vec(proptest::option::weighted(0.9, 0usize..6), 0..200),
        ) {
            let keys: Vec<Option<i32>> = keys
                .into_iter()
                .map(|k| k.map(|k| (k % values.len()) as i32))
                .collect();
            let dictionary = DictionaryArray::new(
                arrow::array::Int32Array::from(keys),
                Arc::new(StringArray::from(values.clone())),
            );
            let strings = arrow::compute::cast(&dictionary, &DataType::Utf8).unwrap();
            let batch_of = |column: ArrayRef| {
                RecordBatch::try_new(
                    Arc::new(Schema::new(vec![Field::new("level", column.data_type().clone(), true)])),
                    vec![column],
                )
                .unwrap()
            };
            let encoded = batch_of(Arc::new(dictionary));
            let plain = batch_of(strings);
            for (name, condition) in conditions() {
                let filter = LeafFilter::new(condition, &schema()).unwrap();
                let fast = filter.evaluate(&encoded).unwrap();
                let slow = filter.evaluate(&plain).unwrap();
                prop_assert_eq!(kept(&fast), kept(&slow), "{}", name);
            }
        }
    }
}
