//! The rows a filter keeps, gathered from many small decoded batches into
//! batches of a target size, each kept value copied once.
//!
//! A Parquet file whose rows the query filters is decoded in small batches
//! (see `parse::ParquetRead`): a small batch's buffers come from the
//! allocator's free lists and are still in cache when the filter and the
//! copy read them, where a full-size batch is fresh memory (a page fault
//! per 4 KiB written) read back from main memory. [`KeptRows`] copies each
//! small batch's kept rows into the columns of the batch being filled:
//! fixed-width values and dictionary keys by a loop over the kept
//! positions, other types through arrow's `take` and `concat`. A string
//! column the query converts to timestamps is converted as it is gathered
//! (a dictionary's values parsed once, each kept row taking its key's
//! timestamp), so its keys are never copied.

use std::sync::Arc;

use arrow::array::{
    downcast_primitive, new_empty_array, Array, ArrayRef, ArrowPrimitiveType, AsArray,
    BooleanArray, BooleanBufferBuilder, DictionaryArray, PrimitiveArray, UInt32Array,
};
use arrow::buffer::{NullBuffer, ScalarBuffer};
use arrow::compute::{concat, take};
use arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef, TimestampMicrosecondType};
use arrow::error::ArrowError;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use super::null_columns::null_column;
use crate::plan::timestamp::udf::{
    dictionary_timestamps, leaf_to_timestamp, same_dictionary_values, timestamp_type,
    DictionaryTimestamps,
};

/// How a column's kept rows are gathered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gather {
    /// As they are.
    Copy,
    /// Not at all: the column is all nulls (read from nowhere), whatever
    /// the pushed batches hold there.
    Absent,
    /// Strings (or a dictionary of strings) converted to timestamps as
    /// `CAST(column AS TIMESTAMP)` converts them; the output column is a
    /// nullable `TIMESTAMP`.
    Timestamps,
}

/// Kept rows of batches of one schema, gathered into batches of `target`
/// rows (fewer in the last one, and where a dictionary changes).
pub(crate) struct KeptRows {
    schema: SchemaRef,
    target: usize,
    columns: Vec<Box<dyn KeptColumn>>,
    /// Rows pending in `columns`.
    rows: usize,
    done: Vec<RecordBatch>,
}

impl KeptRows {
    /// Gathers rows of `schema` (the pushed batches') into batches of
    /// `target` rows, each column as `how` says (unsaid: [`Gather::Copy`]);
    /// an absent column is all nulls of its type in `declared` (the same
    /// columns, as the rows' consumer declares them).
    pub(crate) fn new(
        schema: &SchemaRef,
        declared: &SchemaRef,
        target: usize,
        how: &[Gather],
    ) -> KeptRows {
        let target = target.max(1);
        let how = |i: usize| how.get(i).copied().unwrap_or(Gather::Copy);
        let declared_type = |i: usize| declared.fields().get(i).map(|f| f.data_type().clone());
        let columns = schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| -> Box<dyn KeptColumn> {
                match how(i) {
                    Gather::Copy => kept_column(f.data_type(), target),
                    Gather::Absent => Box::new(KeptNulls {
                        data_type: declared_type(i).unwrap_or_else(|| f.data_type().clone()),
                    }),
                    Gather::Timestamps => Box::new(KeptTimestamps {
                        gathered: KeptPrimitive {
                            data_type: timestamp_type(),
                            target,
                            values: Vec::new(),
                            validity: Validity::default(),
                        },
                        cache: DictionaryTimestamps::default(),
                    }),
                }
            })
            .collect();
        let fields: Vec<Field> = schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| match how(i) {
                Gather::Timestamps => f
                    .as_ref()
                    .clone()
                    .with_data_type(timestamp_type())
                    .with_nullable(true),
                Gather::Absent => {
                    let data_type = declared_type(i).unwrap_or_else(|| f.data_type().clone());
                    f.as_ref()
                        .clone()
                        .with_data_type(data_type)
                        .with_nullable(true)
                }
                Gather::Copy => f.as_ref().clone(),
            })
            .collect();
        KeptRows {
            schema: Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone())),
            target,
            columns,
            rows: 0,
            done: Vec::new(),
        }
    }

    /// Appends the rows of `batch` (of this schema) at `rows`, ascending
    /// positions.
    pub(crate) fn push(&mut self, batch: &RecordBatch, rows: &[u32]) -> Result<(), ArrowError> {
        if rows.is_empty() {
            return Ok(());
        }
        if batch.num_columns() != self.columns.len()
            || rows.last().is_some_and(|&r| r as usize >= batch.num_rows())
        {
            return Err(ArrowError::InvalidArgumentError(format!(
                "kept rows: a batch of {} columns and {} rows, rows up to {:?} asked",
                batch.num_columns(),
                batch.num_rows(),
                rows.last()
            )));
        }
        // A dictionary with other values than the pending rows' (the next
        // row group's) starts a new batch.
        if self
            .columns
            .iter()
            .zip(batch.columns())
            .any(|(c, a)| c.must_finish_before(a))
        {
            self.finish_batch()?;
        }
        let mut rest = rows;
        while !rest.is_empty() {
            let (now, later) = rest.split_at((self.target - self.rows).min(rest.len()));
            for (c, a) in self.columns.iter_mut().zip(batch.columns()) {
                c.push(a, now)?;
            }
            self.rows += now.len();
            if self.rows >= self.target {
                self.finish_batch()?;
            }
            rest = later;
        }
        Ok(())
    }

    /// The batches of every row pushed, in order.
    pub(crate) fn finish(mut self) -> Result<Vec<RecordBatch>, ArrowError> {
        self.finish_batch()?;
        Ok(self.done)
    }

    fn finish_batch(&mut self) -> Result<(), ArrowError> {
        if self.rows == 0 {
            return Ok(());
        }
        let rows = self.rows;
        let arrays = self
            .columns
            .iter_mut()
            .map(|c| c.finish(rows))
            .collect::<Result<Vec<_>, _>>()?;
        self.done.push(RecordBatch::try_new_with_options(
            self.schema.clone(),
            arrays,
            &RecordBatchOptions::new().with_row_count(Some(self.rows)),
        )?);
        self.rows = 0;
        Ok(())
    }
}

/// The positions of the rows `mask` keeps (true; false and null drop a
/// row), written to `rows`.
pub(crate) fn kept_positions(mask: &BooleanArray, rows: &mut Vec<u32>) {
    rows.clear();
    let set = mask.values().set_indices();
    match mask.nulls().filter(|n| n.null_count() > 0) {
        None => rows.extend(set.map(|i| i as u32)),
        Some(nulls) => rows.extend(set.filter(|&i| nulls.is_valid(i)).map(|i| i as u32)),
    }
}

/// One column's pending rows.
trait KeptColumn: Send {
    /// Whether the pending rows must become an array before `array`'s
    /// rows are added (a dictionary with other values).
    fn must_finish_before(&self, _array: &ArrayRef) -> bool {
        false
    }

    /// Appends `array`'s rows at `rows` (in bounds, ascending).
    fn push(&mut self, array: &ArrayRef, rows: &[u32]) -> Result<(), ArrowError>;

    /// The pending rows (`rows` of them) as one array; none are pending
    /// afterwards.
    fn finish(&mut self, rows: usize) -> Result<ArrayRef, ArrowError>;
}

/// The gatherer of a column of `data_type`.
fn kept_column(data_type: &DataType, target: usize) -> Box<dyn KeptColumn> {
    macro_rules! primitive {
        ($t:ty) => {
            Box::new(KeptPrimitive::<$t> {
                data_type: data_type.clone(),
                target,
                values: Vec::new(),
                validity: Validity::default(),
            })
        };
    }
    downcast_primitive! {
        data_type => (primitive),
        DataType::Dictionary(key, _) if **key == DataType::Int32 => Box::new(KeptDictionary {
            data_type: data_type.clone(),
            target,
            keys: Vec::new(),
            validity: Validity::default(),
            values: None,
        }),
        _ => Box::new(KeptAny {
            data_type: data_type.clone(),
            pieces: Vec::new(),
        }),
    }
}

/// An array of another type than its column's.
fn mismatch(expected: &DataType, array: &ArrayRef) -> ArrowError {
    ArrowError::InvalidArgumentError(format!(
        "kept rows: a column of {expected} was given {}",
        array.data_type()
    ))
}

/// Room for `target` values in `values` when it has none (a batch being
/// filled holds `target` rows but the last).
fn reserve_once<T>(values: &mut Vec<T>, target: usize) {
    if values.capacity() == 0 {
        values.reserve(target);
    }
}

/// The validity of a column's pending rows: none while every row is valid.
#[derive(Default)]
struct Validity {
    bits: Option<BooleanBufferBuilder>,
    len: usize,
}

impl Validity {
    /// Appends the validity of the rows at `rows` of an array with `nulls`.
    fn push(&mut self, nulls: Option<&NullBuffer>, rows: &[u32]) {
        let len = self.len;
        match (nulls.filter(|n| n.null_count() > 0), &mut self.bits) {
            (None, None) => {}
            (None, Some(bits)) => bits.append_n(rows.len(), true),
            (Some(nulls), bits) => {
                let bits = bits.get_or_insert_with(|| {
                    let mut b = BooleanBufferBuilder::new(len + rows.len());
                    b.append_n(len, true);
                    b
                });
                for &r in rows {
                    bits.append(nulls.is_valid(r as usize));
                }
            }
        }
        self.len += rows.len();
    }

    /// Appends one validity per row, in order.
    fn push_bits(&mut self, valid: &[bool]) {
        let len = self.len;
        match &mut self.bits {
            Some(bits) => valid.iter().for_each(|&v| bits.append(v)),
            None if valid.iter().all(|&v| v) => {}
            bits => {
                let mut b = BooleanBufferBuilder::new(len + valid.len());
                b.append_n(len, true);
                valid.iter().for_each(|&v| b.append(v));
                *bits = Some(b);
            }
        }
        self.len += valid.len();
    }

    /// The pending rows' nulls; none are pending afterwards.
    fn finish(&mut self) -> Option<NullBuffer> {
        self.len = 0;
        self.bits
            .take()
            .map(|mut b| NullBuffer::new(b.finish()))
            .filter(|n| n.null_count() > 0)
    }
}

/// Fixed-width values (integers, floats, dates, times, timestamps, ...).
struct KeptPrimitive<T: ArrowPrimitiveType> {
    data_type: DataType,
    target: usize,
    values: Vec<T::Native>,
    validity: Validity,
}

impl<T: ArrowPrimitiveType> KeptColumn for KeptPrimitive<T> {
    fn push(&mut self, array: &ArrayRef, rows: &[u32]) -> Result<(), ArrowError> {
        let array = array
            .as_primitive_opt::<T>()
            .ok_or_else(|| mismatch(&self.data_type, array))?;
        reserve_once(&mut self.values, self.target);
        let values = array.values();
        self.values.extend(rows.iter().map(|&r| values[r as usize]));
        self.validity.push(array.nulls(), rows);
        Ok(())
    }

    fn finish(&mut self, _rows: usize) -> Result<ArrayRef, ArrowError> {
        let values = ScalarBuffer::from(std::mem::take(&mut self.values));
        let array = PrimitiveArray::<T>::try_new(values, self.validity.finish())?
            .with_data_type(self.data_type.clone());
        Ok(Arc::new(array))
    }
}

/// A dictionary with `Int32` keys: the keys are gathered while the rows
/// share one dictionary (the same values array).
struct KeptDictionary {
    data_type: DataType,
    target: usize,
    keys: Vec<i32>,
    validity: Validity,
    /// The pending rows' dictionary.
    values: Option<ArrayRef>,
}

impl KeptColumn for KeptDictionary {
    fn must_finish_before(&self, array: &ArrayRef) -> bool {
        match (&self.values, array.as_dictionary_opt::<Int32Type>()) {
            (Some(values), Some(dictionary)) => {
                !same_dictionary_values(values, dictionary.values())
            }
            _ => false,
        }
    }

    fn push(&mut self, array: &ArrayRef, rows: &[u32]) -> Result<(), ArrowError> {
        let dictionary = array
            .as_dictionary_opt::<Int32Type>()
            .ok_or_else(|| mismatch(&self.data_type, array))?;
        match &self.values {
            Some(values) if !same_dictionary_values(values, dictionary.values()) => {
                return Err(ArrowError::InvalidArgumentError(
                    "kept rows: a dictionary's rows pushed before the rows of the one before became an array".into(),
                ))
            }
            Some(_) => {}
            None => self.values = Some(dictionary.values().clone()),
        }
        reserve_once(&mut self.keys, self.target);
        let keys = dictionary.keys().values();
        self.keys.extend(rows.iter().map(|&r| keys[r as usize]));
        self.validity.push(dictionary.nulls(), rows);
        Ok(())
    }

    fn finish(&mut self, _rows: usize) -> Result<ArrayRef, ArrowError> {
        let keys = PrimitiveArray::<Int32Type>::try_new(
            ScalarBuffer::from(std::mem::take(&mut self.keys)),
            self.validity.finish(),
        )?;
        let values = match self.values.take() {
            Some(values) => values,
            None => {
                let DataType::Dictionary(_, value_type) = &self.data_type else {
                    return Err(ArrowError::InvalidArgumentError(format!(
                        "kept rows: {} is no dictionary",
                        self.data_type
                    )));
                };
                new_empty_array(value_type)
            }
        };
        // SAFETY: every key was copied from a dictionary array over these
        // same values (see `push`), so each is in bounds.
        let array = unsafe { DictionaryArray::<Int32Type>::new_unchecked(keys, values) };
        Ok(Arc::new(array))
    }
}

/// Strings converted to timestamps as they are gathered.
struct KeptTimestamps {
    gathered: KeptPrimitive<TimestampMicrosecondType>,
    /// The last dictionary's values, parsed.
    cache: DictionaryTimestamps,
}

impl KeptColumn for KeptTimestamps {
    fn push(&mut self, array: &ArrayRef, rows: &[u32]) -> Result<(), ArrowError> {
        let Some(dictionary) = array.as_dictionary_opt::<Int32Type>() else {
            let converted = leaf_to_timestamp(array, None, &mut self.cache)
                .map_err(|e| ArrowError::ComputeError(e.to_string()))?;
            return self.gathered.push(&converted, rows);
        };
        // Each kept row takes its key's timestamp: null where its key is
        // null or its string is no timestamp.
        let parsed = dictionary_timestamps(dictionary.values(), None, &mut self.cache)
            .map_err(|e| ArrowError::ComputeError(e.to_string()))?;
        let parsed = parsed.as_primitive::<TimestampMicrosecondType>();
        let (keys, values) = (dictionary.keys(), parsed.values());
        // A valid dictionary array's keys are in bounds.
        let key = |r: u32| keys.values()[r as usize] as usize;
        let out = &mut self.gathered;
        reserve_once(&mut out.values, out.target);
        if keys.null_count() == 0 && parsed.null_count() == 0 {
            out.values.extend(rows.iter().map(|&r| values[key(r)]));
            out.validity.push(None, rows);
        } else {
            let mut valid = Vec::with_capacity(rows.len());
            for &r in rows {
                let ok = keys.is_valid(r as usize) && parsed.is_valid(key(r));
                valid.push(ok);
                out.values.push(if ok { values[key(r)] } else { 0 });
            }
            out.validity.push_bits(&valid);
        }
        Ok(())
    }

    fn finish(&mut self, rows: usize) -> Result<ArrayRef, ArrowError> {
        self.gathered.finish(rows)
    }
}

/// A column of nulls only, whatever is pushed.
struct KeptNulls {
    data_type: DataType,
}

impl KeptColumn for KeptNulls {
    fn push(&mut self, _array: &ArrayRef, _rows: &[u32]) -> Result<(), ArrowError> {
        Ok(())
    }

    fn finish(&mut self, rows: usize) -> Result<ArrayRef, ArrowError> {
        Ok(null_column(&self.data_type, rows))
    }
}

/// Any other type: each batch's kept rows taken, then concatenated.
struct KeptAny {
    data_type: DataType,
    pieces: Vec<ArrayRef>,
}

impl KeptColumn for KeptAny {
    fn push(&mut self, array: &ArrayRef, rows: &[u32]) -> Result<(), ArrowError> {
        if array.data_type() != &self.data_type {
            return Err(mismatch(&self.data_type, array));
        }
        let indices = UInt32Array::from(rows.to_vec());
        self.pieces.push(take(array.as_ref(), &indices, None)?);
        Ok(())
    }

    fn finish(&mut self, _rows: usize) -> Result<ArrayRef, ArrowError> {
        let pieces = std::mem::take(&mut self.pieces);
        match pieces.len() {
            0 => Ok(new_empty_array(&self.data_type)),
            1 => Ok(pieces.into_iter().next().expect("one piece")),
            _ => concat(&pieces.iter().map(|p| p.as_ref()).collect::<Vec<_>>()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray, TimestampMicrosecondArray};
    use arrow::compute::{cast, concat_batches, filter_record_batch, prep_null_mask_filter};
    use arrow::datatypes::{Field, Schema, TimeUnit};
    use proptest::prelude::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("v", DataType::Int64, true),
            Field::new(
                "d",
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                true,
            ),
            Field::new("s", DataType::Utf8, true),
            Field::new(
                "t",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                false,
            ),
        ]))
    }

    /// One generated batch: per row (value, key, string, kept?).
    type Rows = Vec<(Option<i64>, Option<i32>, Option<String>, Option<bool>)>;

    fn batch(rows: &Rows, values: &ArrayRef) -> (RecordBatch, BooleanArray) {
        let v = Int64Array::from(rows.iter().map(|r| r.0).collect::<Vec<_>>());
        let keys = PrimitiveArray::<Int32Type>::from(rows.iter().map(|r| r.1).collect::<Vec<_>>());
        let d = DictionaryArray::<Int32Type>::try_new(keys, values.clone()).expect("keys");
        let s = StringArray::from(rows.iter().map(|r| r.2.clone()).collect::<Vec<_>>());
        let t = TimestampMicrosecondArray::from(
            rows.iter()
                .map(|r| r.0.unwrap_or(-1).wrapping_mul(1000))
                .collect::<Vec<_>>(),
        )
        .with_timezone("UTC");
        let mask = BooleanArray::from(rows.iter().map(|r| r.3).collect::<Vec<_>>());
        let batch = RecordBatch::try_new(
            schema(),
            vec![Arc::new(v), Arc::new(d), Arc::new(s), Arc::new(t)],
        )
        .expect("batch");
        (batch, mask)
    }

    /// `batches` with the dictionary column decoded to its strings, as one.
    fn plain(batches: &[RecordBatch]) -> RecordBatch {
        let fields: Vec<Field> = schema()
            .fields()
            .iter()
            .map(|f| match f.data_type() {
                DataType::Dictionary(_, v) => f.as_ref().clone().with_data_type(*v.clone()),
                _ => f.as_ref().clone(),
            })
            .collect();
        let plain_schema = Arc::new(Schema::new(fields));
        let decoded: Vec<RecordBatch> = batches
            .iter()
            .map(|b| {
                let columns = b
                    .columns()
                    .iter()
                    .zip(plain_schema.fields())
                    .map(|(c, f)| cast(c, f.data_type()).expect("cast"))
                    .collect();
                RecordBatch::try_new(plain_schema.clone(), columns).expect("batch")
            })
            .collect();
        concat_batches(&plain_schema, &decoded).expect("concat")
    }

    fn row() -> impl Strategy<Value = (Option<i64>, Option<i32>, Option<String>, Option<bool>)> {
        (
            proptest::option::weighted(0.9, any::<i64>()),
            proptest::option::weighted(0.9, 0..3i32),
            proptest::option::weighted(0.8, "[a-c]{0,3}"),
            proptest::option::weighted(0.9, any::<bool>()),
        )
    }

    proptest! {
        /// Whatever the masks (nulls drop a row), the kept rows are the
        /// rows arrow's filter keeps, in order; batches are cut where the
        /// dictionary changes and once `target` rows are pending.
        #[test]
        fn kept_rows_are_the_rows_the_filter_keeps(
            input in proptest::collection::vec(
                (proptest::collection::vec(row(), 0..40), 0..3usize),
                0..12,
            ),
            target in 1usize..60,
        ) {
            let first: ArrayRef = Arc::new(StringArray::from(vec!["x", "y", "z"]));
            let second: ArrayRef = Arc::new(StringArray::from(vec!["p", "q", "r"]));
            // The first dictionary again in a new array over its buffers, as
            // a Parquet reader gives each batch of a column chunk.
            let first_again = arrow::array::make_array(first.to_data());
            let dictionaries = [&first, &second, &first_again];
            let mut kept = KeptRows::new(&schema(), &schema(), target, &[]);
            let mut expected = Vec::new();
            let mut positions = Vec::new();
            for (rows, which) in &input {
                let values = dictionaries[*which];
                let (b, mask) = batch(rows, values);
                kept_positions(&mask, &mut positions);
                kept.push(&b, &positions).expect("push");
                let keep = if mask.null_count() > 0 {
                    prep_null_mask_filter(&mask)
                } else {
                    mask.clone()
                };
                let filtered = filter_record_batch(&b, &keep).expect("filter");
                expected.push(filtered);
            }
            let out = kept.finish().expect("finish");
            prop_assert_eq!(plain(&out), plain(&expected));
            for (i, b) in out.iter().enumerate() {
                prop_assert!(b.num_rows() > 0);
                prop_assert!(b.num_rows() <= target);
                // Each batch keeps one dictionary's values as they were.
                let d = b.column(1).as_dictionary::<Int32Type>();
                prop_assert!(dictionaries.iter().any(|v| Arc::ptr_eq(d.values(), v)));
                if i + 1 < out.len() {
                    let next = out[i + 1].column(1).as_dictionary::<Int32Type>();
                    prop_assert!(
                        b.num_rows() == target
                            || !same_dictionary_values(d.values(), next.values()),
                        "a batch of {} rows cut before the dictionary changed", b.num_rows()
                    );
                }
            }
        }
    }

    #[test]
    fn a_null_in_a_column_after_valid_rows_keeps_them_valid() {
        let values: ArrayRef = Arc::new(StringArray::from(vec!["x"]));
        let mut kept = KeptRows::new(&schema(), &schema(), 100, &[]);
        let valid = vec![(Some(1), Some(0), Some("a".to_string()), Some(true)); 3];
        let with_null = vec![
            (None, None, None, Some(true)),
            (Some(5), Some(0), Some("b".into()), Some(false)),
        ];
        for rows in [&valid, &with_null] {
            let (b, mask) = batch(rows, &values);
            let mut positions = Vec::new();
            kept_positions(&mask, &mut positions);
            kept.push(&b, &positions).expect("push");
        }
        let out = kept.finish().expect("finish");
        assert_eq!(out.len(), 1);
        let v = out[0]
            .column(0)
            .as_primitive::<arrow::datatypes::Int64Type>();
        assert_eq!(
            v.iter().collect::<Vec<_>>(),
            vec![Some(1), Some(1), Some(1), None]
        );
        assert_eq!(out[0].column(1).null_count(), 1);
        assert_eq!(out[0].column(2).null_count(), 1);
    }

    #[test]
    fn an_absent_column_is_nulls_of_its_declared_type_whatever_is_pushed() {
        let values: ArrayRef = Arc::new(StringArray::from(vec!["x"]));
        // The rows' consumer declares the dictionary column a string.
        let declared = Arc::new(Schema::new(
            schema()
                .fields()
                .iter()
                .map(|f| match f.data_type() {
                    DataType::Dictionary(_, v) => f.as_ref().clone().with_data_type(*v.clone()),
                    _ => f.as_ref().clone(),
                })
                .collect::<Vec<_>>(),
        ));
        let mut kept = KeptRows::new(
            &schema(),
            &declared,
            4,
            &[Gather::Copy, Gather::Absent, Gather::Absent],
        );
        let rows = vec![(Some(1), Some(0), Some("a".to_string()), Some(true)); 6];
        let (b, mask) = batch(&rows, &values);
        let mut positions = Vec::new();
        kept_positions(&mask, &mut positions);
        kept.push(&b, &positions).expect("push");
        let out = kept.finish().expect("finish");
        let sizes: Vec<(usize, usize, usize)> = out
            .iter()
            .map(|b| {
                (
                    b.num_rows(),
                    b.column(1).null_count(),
                    b.column(2).null_count(),
                )
            })
            .collect();
        assert_eq!(sizes, vec![(4, 4, 4), (2, 2, 2)]);
        assert_eq!(out[0].schema().field(1).data_type(), &DataType::Utf8);
        assert_eq!(out[0].column(1).data_type(), &DataType::Utf8);
        assert_eq!(out[1].column(3).null_count(), 0);
    }

    #[test]
    fn a_column_of_another_type_is_an_error() {
        let mut kept = KeptRows::new(&schema(), &schema(), 10, &[]);
        let wrong = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("v", DataType::Utf8, true),
                Field::new("d", DataType::Utf8, true),
                Field::new("s", DataType::Utf8, true),
                Field::new("t", DataType::Utf8, true),
            ])),
            (0..4)
                .map(|_| Arc::new(StringArray::from(vec!["1"])) as ArrayRef)
                .collect(),
        )
        .expect("batch");
        let err = kept.push(&wrong, &[0]).expect_err("mismatch");
        assert_eq!(
            err.to_string(),
            "Invalid argument error: kept rows: a column of Int64 was given Utf8"
        );
        let err = kept.push(&wrong, &[1]).expect_err("out of bounds");
        assert_eq!(
            err.to_string(),
            "Invalid argument error: kept rows: a batch of 4 columns and 1 rows, rows up to Some(1) asked"
        );
    }
}
