//! Group ids of a dictionary-encoded string key column.
//!
//! A Parquet column chunk whose pages are all dictionary-encoded is read as
//! `Dictionary(Int32, Utf8)` when only a grouping key reads it (see
//! `CompiledPlan::leaf_dictionary_columns`): every batch of the chunk shares
//! one dictionary of distinct values, and each row is a small integer key
//! into it. Instead of interning every row's string, the dictionary's values
//! are interned once into DataFusion's group values, and each row's group id
//! is looked up by its key in that small table.

use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, DictionaryArray};
use arrow::datatypes::{DataType, Int32Type};
use datafusion::error::DataFusionError;
use datafusion::physical_plan::aggregates::group_values::GroupValues;

/// The group ids of the last dictionary seen, valid for one `GroupValues`.
#[derive(Default)]
pub(crate) struct DictionaryIds {
    /// The dictionary's values (kept so the pointer stays theirs) and each
    /// value's group id.
    last: Option<(ArrayRef, Vec<usize>)>,
    /// The group id of a null key.
    null_id: Option<usize>,
}

/// The dictionary type [`DictionaryIds`] reads: `Dictionary(Int32, Utf8)`.
pub(crate) fn string_dictionary_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// True for [`string_dictionary_type`].
pub(crate) fn is_string_dictionary(t: &DataType) -> bool {
    matches!(t, DataType::Dictionary(k, v) if **k == DataType::Int32 && **v == DataType::Utf8)
}

impl DictionaryIds {
    /// Sets `ids` to the group id of each row of `column` in `groups`
    /// (interning the values not seen before): the same grouping as
    /// interning the decoded strings. `groups` groups one `Utf8` column.
    pub(crate) fn intern(
        &mut self,
        column: &DictionaryArray<Int32Type>,
        groups: &mut dyn GroupValues,
        ids: &mut Vec<usize>,
    ) -> datafusion::error::Result<()> {
        ids.clear();
        let values = column.values();
        let same = self
            .last
            .as_ref()
            .is_some_and(|(v, _)| std::ptr::addr_eq(Arc::as_ptr(v), Arc::as_ptr(values)));
        if !same {
            let mut value_ids = Vec::with_capacity(values.len());
            groups.intern(std::slice::from_ref(values), &mut value_ids)?;
            self.last = Some((values.clone(), value_ids));
        }
        if column.keys().null_count() > 0 && self.null_id.is_none() {
            let mut one = Vec::with_capacity(1);
            groups.intern(&[new_null_array(&DataType::Utf8, 1)], &mut one)?;
            self.null_id = one.first().copied();
        }
        let value_ids: &[usize] = self.last.as_ref().map_or(&[], |(_, ids)| ids);
        let keys = column.keys();
        ids.reserve(keys.len());
        let mut bad = false;
        match keys.nulls() {
            None => ids.extend(keys.values().iter().map(|&k| {
                value_ids.get(k as usize).copied().unwrap_or_else(|| {
                    bad = true;
                    0
                })
            })),
            Some(valid) => {
                let null_id = self.null_id.unwrap_or(0);
                ids.extend(keys.values().iter().zip(valid.iter()).map(|(&k, v)| {
                    if !v {
                        return null_id;
                    }
                    value_ids.get(k as usize).copied().unwrap_or_else(|| {
                        bad = true;
                        0
                    })
                }))
            }
        }
        if bad {
            return Err(DataFusionError::Execution(format!(
                "a dictionary key is outside its dictionary of {} values",
                value_ids.len()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    use datafusion::physical_plan::aggregates::group_values::new_group_values;
    use datafusion::physical_plan::aggregates::order::GroupOrdering;

    fn groups() -> Box<dyn GroupValues> {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Utf8, true)]));
        new_group_values(schema, &GroupOrdering::None).unwrap()
    }

    /// The group ids of `rows` interned as plain strings.
    fn plain_ids(g: &mut dyn GroupValues, rows: &[Option<&str>]) -> Vec<usize> {
        let mut ids = Vec::new();
        let col: ArrayRef = Arc::new(StringArray::from(rows.to_vec()));
        g.intern(&[col], &mut ids).unwrap();
        ids
    }

    #[test]
    fn dictionary_rows_get_the_ids_of_their_strings() {
        let values: ArrayRef = Arc::new(StringArray::from(vec![
            Some("auth"),
            Some("search"),
            None,
            Some("unused"),
        ]));
        let a = DictionaryArray::new(
            Int32Array::from(vec![Some(1), Some(0), None, Some(1), Some(2)]),
            values.clone(),
        );
        // A second batch of the same chunk shares the dictionary.
        let b = DictionaryArray::new(Int32Array::from(vec![0, 0, 1]), values);
        // A new chunk: another dictionary, in another order.
        let c = DictionaryArray::new(
            Int32Array::from(vec![0, 1]),
            Arc::new(StringArray::from(vec!["search", "payments"])) as ArrayRef,
        );
        let mut g = groups();
        let mut d = DictionaryIds::default();
        let mut got = Vec::new();
        let mut ids = Vec::new();
        for col in [&a, &b, &c] {
            d.intern(col, g.as_mut(), &mut ids).unwrap();
            got.extend(ids.iter().copied());
        }
        // Interned as strings the same rows group the same way.
        let mut reference = groups();
        let rows = [
            Some("search"),
            Some("auth"),
            None,
            Some("search"),
            None,
            Some("auth"),
            Some("auth"),
            Some("search"),
            Some("search"),
            Some("payments"),
        ];
        let want = plain_ids(reference.as_mut(), &rows);
        for i in 0..rows.len() {
            for j in 0..rows.len() {
                assert_eq!(
                    got[i] == got[j],
                    want[i] == want[j],
                    "rows {i} and {j}: {got:?} vs {want:?}"
                );
            }
        }
        // The groups emitted hold exactly these values.
        let emitted = g.emit(datafusion::logical_expr::EmitTo::All).unwrap();
        let strings = emitted[0].as_any().downcast_ref::<StringArray>().unwrap();
        let mut seen: Vec<Option<&str>> = got
            .iter()
            .map(|&i| strings.is_valid(i).then(|| strings.value(i)))
            .collect();
        let mut rows = rows.to_vec();
        seen.sort();
        rows.sort();
        assert_eq!(seen, rows);
    }

    #[test]
    fn a_key_outside_the_dictionary_is_an_error() {
        let values: ArrayRef = Arc::new(StringArray::from(vec!["a"]));
        // Built unchecked the way a corrupt file could arrive.
        let keys = Int32Array::from(vec![0, 3]);
        let col = unsafe { DictionaryArray::new_unchecked(keys, values) };
        let mut g = groups();
        let err = DictionaryIds::default()
            .intern(&col, g.as_mut(), &mut Vec::new())
            .unwrap_err();
        assert_eq!(
            err.strip_backtrace(),
            "Execution error: a dictionary key is outside its dictionary of 1 values"
        );
    }
}
