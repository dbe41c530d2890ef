//! `to_timestamp` with Spark's semantics, registered in the SQL context in
//! place of DataFusion's; `CAST(string AS TIMESTAMP)` is rewritten to it.
//!
//! - `to_timestamp(s)`: Spark's string-to-timestamp cast rules (the fast
//!   path of [`super::cast_timestamp`] over every row, no allocation);
//! - `to_timestamp(s, pattern)`: Spark's datetime pattern
//!   (`yyyy-MM-dd HH:mm:ss`), compiled once per batch ([`SparkPattern`]);
//! - a string that is not a timestamp is NULL (ANSI mode off, Spark's
//!   default), never an error;
//! - `TIMESTAMP` and `DATE` arguments are converted; integers are seconds
//!   since the epoch, as in Spark.
//!
//! The result is `TIMESTAMP` (microseconds, UTC session time zone).

use std::sync::{Arc, OnceLock};

use arrow::array::{Array, ArrayRef, AsArray, StringViewArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, FieldRef, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

use super::SparkPattern;
use crate::plan::ddl::SESSION_TIME_ZONE;

/// The name of the function.
pub const TO_TIMESTAMP_FN: &str = "to_timestamp";

/// Spark's `TIMESTAMP`: microseconds in the session time zone (UTC).
pub fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some(SESSION_TIME_ZONE.into()))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct SparkToTimestamp {
    signature: Signature,
}

/// The `to_timestamp` scalar function with Spark's semantics.
pub fn to_timestamp_udf() -> Arc<ScalarUDF> {
    static UDF: OnceLock<Arc<ScalarUDF>> = OnceLock::new();
    UDF.get_or_init(|| {
        Arc::new(ScalarUDF::new_from_impl(SparkToTimestamp {
            signature: Signature::user_defined(Volatility::Immutable),
        }))
    })
    .clone()
}

fn is_string(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// A string type or a dictionary of strings: what `to_timestamp` parses.
pub(crate) fn is_text(t: &DataType) -> bool {
    match t {
        DataType::Dictionary(_, v) => is_string(v),
        t => is_string(t),
    }
}

impl ScalarUDFImpl for SparkToTimestamp {
    fn name(&self) -> &str {
        TO_TIMESTAMP_FN
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DFResult<Vec<DataType>> {
        let first = match arg_types.first() {
            Some(DataType::Dictionary(_, v)) if is_string(v) => DataType::Utf8,
            Some(t) if is_string(t) => t.clone(),
            Some(DataType::Timestamp(..)) | Some(DataType::Date32) | Some(DataType::Date64) => {
                arg_types[0].clone()
            }
            Some(t) if t.is_integer() => DataType::Int64,
            Some(DataType::Null) => DataType::Utf8,
            Some(t) => {
                return Err(DataFusionError::Plan(format!(
                    "to_timestamp takes a STRING, DATE, TIMESTAMP or integer, not {t}"
                )))
            }
            None => {
                return Err(DataFusionError::Plan(
                    "to_timestamp takes 1 or 2 arguments, got 0".into(),
                ))
            }
        };
        match arg_types.len() {
            1 => Ok(vec![first]),
            2 if is_string(&first) => Ok(vec![first, DataType::Utf8]),
            2 => Err(DataFusionError::Plan(format!(
                "to_timestamp with a pattern takes a STRING, not {}",
                arg_types[0]
            ))),
            n => Err(DataFusionError::Plan(format!(
                "to_timestamp takes 1 or 2 arguments, got {n}"
            ))),
        }
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DFResult<DataType> {
        Ok(timestamp_type())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DFResult<FieldRef> {
        // A constant pattern is checked when the plan is built (dry-run).
        if let Some(Some(p)) = args.scalar_arguments.get(1) {
            if let Some(p) = scalar_text(p) {
                compile(&p)?;
            }
        }
        Ok(Arc::new(Field::new(
            TO_TIMESTAMP_FN,
            timestamp_type(),
            true,
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DFResult<ColumnarValue> {
        let rows = args.number_rows;
        let pattern = match args.args.get(1) {
            None => None,
            Some(ColumnarValue::Scalar(s)) => match scalar_text(s) {
                Some(p) => Some(compile(&p)?),
                // A NULL pattern gives NULL, as in Spark.
                None => {
                    return Ok(ColumnarValue::Scalar(ScalarValue::TimestampMicrosecond(
                        None,
                        Some(SESSION_TIME_ZONE.into()),
                    )))
                }
            },
            Some(ColumnarValue::Array(_)) => {
                return Err(DataFusionError::Plan(
                    "to_timestamp's pattern must be a constant string".into(),
                ))
            }
        };
        let (array, scalar) = match &args.args[0] {
            ColumnarValue::Array(a) => (a.clone(), false),
            ColumnarValue::Scalar(s) => (s.to_array_of_size(1)?, true),
        };
        let out: ArrayRef = Arc::new(convert(&array, pattern.as_ref())?);
        if scalar {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
        } else {
            debug_assert_eq!(out.len(), rows);
            Ok(ColumnarValue::Array(out))
        }
    }
}

fn compile(pattern: &str) -> DFResult<SparkPattern> {
    SparkPattern::compile(pattern)
        .map_err(|e| DataFusionError::Plan(format!("to_timestamp pattern `{pattern}`: {e}")))
}

fn scalar_text(s: &ScalarValue) -> Option<String> {
    match s {
        ScalarValue::Utf8(v) | ScalarValue::LargeUtf8(v) | ScalarValue::Utf8View(v) => v.clone(),
        _ => None,
    }
}

/// `to_timestamp` of the strings in `array` as a plan leaf computes it
/// for its consumers (`engine::exec` moves `to_timestamp(column)` into the
/// leaf reading the column): a string array, or a dictionary of strings
/// whose values are parsed once per dictionary and kept in `cache` for the
/// next batches sharing that dictionary (the batches of one Parquet column
/// chunk).
pub(crate) fn leaf_to_timestamp(
    array: &ArrayRef,
    pattern: Option<&SparkPattern>,
    cache: &mut DictionaryTimestamps,
) -> DFResult<ArrayRef> {
    // Converted already by the source (a JSON decoder reading the strings
    // as `CAST(... AS TIMESTAMP)`; see `CompiledPlan::leaf_timestamp_columns`).
    if array.data_type() == &timestamp_type() {
        return Ok(array.clone());
    }
    let out = match array.as_any_dictionary_opt() {
        Some(dictionary) => {
            let parsed = dictionary_timestamps(dictionary.values(), pattern, cache)?;
            arrow::compute::take(parsed.as_ref(), dictionary.keys(), None)?
        }
        None => Arc::new(convert(array, pattern)?),
    };
    Ok(out)
}

/// The timestamps of a dictionary's string `values` (as
/// [`leaf_to_timestamp`] converts them), parsed once per dictionary and
/// kept in `cache` for the next batches sharing it.
pub(crate) fn dictionary_timestamps(
    values: &ArrayRef,
    pattern: Option<&SparkPattern>,
    cache: &mut DictionaryTimestamps,
) -> DFResult<ArrayRef> {
    Ok(match &cache.last {
        Some((v, parsed)) if same_dictionary_values(v, values) => parsed.clone(),
        _ => {
            let parsed: ArrayRef = Arc::new(convert(values, pattern)?);
            cache.last = Some((values.clone(), parsed.clone()));
            parsed
        }
    })
}

/// Whether two dictionaries' values are the same values in the same
/// memory: the same array, or arrays over the same buffers. A Parquet
/// reader gives each batch of a column chunk the chunk's dictionary as a
/// new array over the same buffers, so the caches keyed by a dictionary's
/// values (here, the reader's filter, its kept rows) compare them so.
pub(crate) fn same_dictionary_values(a: &ArrayRef, b: &ArrayRef) -> bool {
    Arc::ptr_eq(a, b) || a.to_data().ptr_eq(&b.to_data())
}

/// The timestamps of the last dictionary [`leaf_to_timestamp`] parsed (the
/// dictionary's values are held, so the pointer cannot be reused).
#[derive(Default)]
pub(crate) struct DictionaryTimestamps {
    last: Option<(ArrayRef, ArrayRef)>,
}

/// `to_timestamp` over one array.
fn convert(
    array: &ArrayRef,
    pattern: Option<&SparkPattern>,
) -> DFResult<TimestampMicrosecondArray> {
    let mut run = super::cast::CanonicalRun::default();
    let mut parse = |s: &[u8]| match pattern {
        Some(p) => p.parse(s),
        None => super::cast_timestamp_in_run(s, &mut run),
    };
    let out = match array.data_type() {
        DataType::Utf8 => strings(array.as_string::<i32>(), &mut parse),
        DataType::LargeUtf8 => strings(array.as_string::<i64>(), &mut parse),
        DataType::Utf8View => string_views(array.as_string_view(), &mut parse),
        DataType::Null => TimestampMicrosecondArray::new_null(array.len()),
        DataType::Int64 => {
            let secs = array.as_primitive::<arrow::datatypes::Int64Type>();
            secs.iter()
                .map(|v| v.and_then(|s| s.checked_mul(1_000_000)))
                .collect()
        }
        DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 => {
            let t = arrow::compute::cast(array, &timestamp_type())?;
            t.as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
                .clone()
        }
        other => {
            return Err(DataFusionError::Plan(format!(
                "to_timestamp takes a STRING, DATE, TIMESTAMP or integer, not {other}"
            )))
        }
    };
    Ok(out.with_timezone(SESSION_TIME_ZONE))
}

/// `parse` over every string of `a`: one pass over the offsets and the
/// value bytes, no per-row allocation; a NULL input or a string `parse`
/// refuses is NULL. Without a NULL, the result has no validity buffer
/// (gathers from it, as by a dictionary's keys, then copy no bits).
fn strings<O: arrow::array::OffsetSizeTrait>(
    a: &arrow::array::GenericStringArray<O>,
    mut parse: impl FnMut(&[u8]) -> Option<i64>,
) -> TimestampMicrosecondArray {
    let n = a.len();
    let offsets = a.value_offsets();
    let data = a.value_data();
    let nulls = a.nulls();
    let mut values = Vec::with_capacity(n);
    let mut valid = arrow::array::BooleanBufferBuilder::new(n);
    // Event times often repeat row after row (several events per second):
    // the previous string's answer is reused when the bytes are the same.
    let mut last: (&[u8], Option<i64>) = (&[], None);
    for i in 0..n {
        let v = if nulls.is_none_or(|b| b.is_valid(i)) {
            let bytes = &data[offsets[i].as_usize()..offsets[i + 1].as_usize()];
            if bytes != last.0 || bytes.is_empty() {
                last = (bytes, parse(bytes));
            }
            last.1
        } else {
            None
        };
        values.push(v.unwrap_or(0));
        valid.append(v.is_some());
    }
    let nulls = arrow::buffer::NullBuffer::new(valid.finish());
    let nulls = (nulls.null_count() > 0).then_some(nulls);
    TimestampMicrosecondArray::new(values.into(), nulls)
}

/// `parse` over a string view array.
fn string_views(
    a: &StringViewArray,
    mut parse: impl FnMut(&[u8]) -> Option<i64>,
) -> TimestampMicrosecondArray {
    a.iter()
        .map(|v| v.and_then(|s| parse(s.as_bytes())))
        .collect()
}
