//! All-null columns that share one zeroed buffer.
//!
//! A column the query never reads (projection pushdown) is still part of
//! the source's schema, so a reader returns it as nulls. `new_null_array`
//! allocates and zero-fills fresh buffers for every batch (offsets for
//! strings, values for numbers), and on big batches the page faults of
//! that memory cost more than decoding the columns that are read. Here
//! every null column of up to [`SHARED_ROWS`] rows is a slice of one
//! process-wide zeroed buffer instead.

use std::sync::OnceLock;

use arrow::array::{make_array, new_null_array, ArrayData, ArrayRef};
use arrow::buffer::{BooleanBuffer, Buffer, MutableBuffer, NullBuffer};
use arrow::datatypes::DataType;

/// Null columns of up to this many rows share the zeroed buffer.
pub(crate) const SHARED_ROWS: usize = 64 * 1024;

/// The widest buffer a shared null column needs: 16 bytes per row
/// (decimal128, views), plus one offset.
const ZERO_BYTES: usize = (SHARED_ROWS + 1) * 16;

fn zeros() -> &'static Buffer {
    static ZEROS: OnceLock<Buffer> = OnceLock::new();
    ZEROS.get_or_init(|| Buffer::from(MutableBuffer::from_len_zeroed(ZERO_BYTES)))
}

/// A column of `rows` nulls of type `dt`: slices of the shared zeroed
/// buffer for flat types (numbers, timestamps, booleans, strings, binary),
/// else a freshly allocated one.
pub(crate) fn null_column(dt: &DataType, rows: usize) -> ArrayRef {
    shared_null_column(dt, rows).unwrap_or_else(|| new_null_array(dt, rows))
}

fn shared_null_column(dt: &DataType, rows: usize) -> Option<ArrayRef> {
    if rows > SHARED_ROWS {
        return None;
    }
    let zeros = zeros();
    let slice = |bytes: usize| zeros.slice_with_length(0, bytes);
    let nulls = NullBuffer::new(BooleanBuffer::new(slice(rows.div_ceil(8)), 0, rows));
    let builder = ArrayData::builder(dt.clone()).len(rows).nulls(Some(nulls));
    let builder = match dt {
        DataType::Boolean => builder.add_buffer(slice(rows.div_ceil(8))),
        DataType::Utf8 | DataType::Binary => builder
            .add_buffer(slice((rows + 1) * 4))
            .add_buffer(Buffer::from(MutableBuffer::new(0))),
        DataType::LargeUtf8 | DataType::LargeBinary => builder
            .add_buffer(slice((rows + 1) * 8))
            .add_buffer(Buffer::from(MutableBuffer::new(0))),
        DataType::Utf8View | DataType::BinaryView => builder.add_buffer(slice(rows * 16)),
        d if d.is_primitive() => builder.add_buffer(slice(rows * d.primitive_width()?)),
        _ => return None,
    };
    // SAFETY: every buffer is zeroed and long enough for `rows` rows of
    // `dt`: all-zero offsets into empty values, all-zero values, views of
    // length 0, and a validity bitmap with every row null, which is valid
    // data for each type above. (The checked `build` walks every offset of
    // a string column, which cost more than decoding the columns read.)
    Some(make_array(unsafe { builder.build_unchecked() }))
}

/// Whether `a` and `b` share memory (used by tests).
#[cfg(test)]
fn same_memory(a: &ArrayRef, b: &ArrayRef) -> bool {
    let first = |x: &ArrayRef| x.to_data().buffers().first().map(|b| b.as_ptr());
    first(a).is_some() && first(a) == first(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Int64Type, TimeUnit};

    #[test]
    fn null_columns_are_all_null_and_share_one_buffer() {
        let types = [
            DataType::Int64,
            DataType::Int32,
            DataType::Float64,
            DataType::Boolean,
            DataType::Utf8,
            DataType::LargeUtf8,
            DataType::Binary,
            DataType::Utf8View,
            DataType::Decimal128(10, 2),
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            DataType::Date32,
        ];
        for dt in &types {
            for rows in [0, 1, 7, 1000, SHARED_ROWS] {
                let a = null_column(dt, rows);
                assert_eq!(a.data_type(), dt);
                assert_eq!(a.len(), rows);
                assert_eq!(a.null_count(), rows, "{dt} x {rows}");
                a.to_data().validate_full().expect("valid array");
            }
        }
        let a = null_column(&DataType::Int64, 100);
        let b = null_column(&DataType::Utf8, 200);
        assert!(same_memory(&a, &b), "both are slices of the shared zeros");
        assert_eq!(a.as_primitive::<Int64Type>().values()[99], 0);
    }

    #[test]
    fn big_and_nested_null_columns_are_allocated() {
        let a = null_column(&DataType::Int64, SHARED_ROWS + 1);
        assert_eq!(a.null_count(), SHARED_ROWS + 1);
        assert!(!same_memory(&a, &null_column(&DataType::Int64, 10)));
        let list = DataType::List(std::sync::Arc::new(arrow::datatypes::Field::new(
            "x",
            DataType::Int64,
            true,
        )));
        let l = null_column(&list, 5);
        assert_eq!((l.len(), l.null_count()), (5, 5));
        assert!(l.as_list_opt::<i32>().is_some());
    }
}
