//! Arrow columns as PostgreSQL values: the column type a created table
//! gets (`createTable`), which Arrow types a table's column takes, and
//! each value in the binary format of `COPY ... FROM STDIN BINARY`, in the
//! table column's own type (a `BIGINT` column of the flow into an
//! `INTEGER` column is written as 4-byte integers, each checked).

use std::error::Error as StdError;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BooleanArray, LargeBinaryArray, LargeStringArray,
    StringArray, StringViewArray,
};
use arrow::datatypes::{
    DataType, Date32Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    TimeUnit, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use bytes::BytesMut;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use tokio_postgres::types::{to_sql_checked, IsNull, ToSql, Type};

/// The column type `createTable` gives an Arrow type, or None when the
/// type has no PostgreSQL column here.
pub(crate) fn ddl_type(t: &DataType) -> Option<&'static str> {
    Some(match t {
        DataType::Boolean => "BOOLEAN",
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => "SMALLINT",
        DataType::Int32 | DataType::UInt16 => "INTEGER",
        DataType::Int64 | DataType::UInt32 | DataType::UInt64 => "BIGINT",
        DataType::Float32 => "REAL",
        DataType::Float64 => "DOUBLE PRECISION",
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "TEXT",
        DataType::Dictionary(_, v) if matches!(v.as_ref(), DataType::Utf8) => "TEXT",
        DataType::Binary | DataType::LargeBinary => "BYTEA",
        DataType::Date32 => "DATE",
        DataType::Timestamp(_, Some(_)) => "TIMESTAMPTZ",
        DataType::Timestamp(_, None) => "TIMESTAMP",
        _ => return None,
    })
}

/// How a column of the flow is written into a column of PostgreSQL type
/// `pg`; None when it cannot be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Encoding {
    Bool,
    Int2,
    Int4,
    Int8,
    Float4,
    Float8,
    Text,
    Bytea,
    Date,
    Timestamp,
    Timestamptz,
}

fn is_int(t: &DataType) -> bool {
    t.is_integer()
}

/// The encoding of Arrow type `t` into PostgreSQL type `pg`.
pub(crate) fn encoding(t: &DataType, pg: &Type) -> Option<Encoding> {
    let text = matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
        || matches!(t, DataType::Dictionary(_, v) if matches!(v.as_ref(), DataType::Utf8));
    Some(match *pg {
        Type::BOOL if *t == DataType::Boolean => Encoding::Bool,
        Type::INT2 if is_int(t) => Encoding::Int2,
        Type::INT4 if is_int(t) => Encoding::Int4,
        Type::INT8 if is_int(t) => Encoding::Int8,
        Type::FLOAT4 if t.is_floating() => Encoding::Float4,
        Type::FLOAT8 if t.is_floating() || is_int(t) => Encoding::Float8,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME if text => Encoding::Text,
        Type::BYTEA if matches!(t, DataType::Binary | DataType::LargeBinary) => Encoding::Bytea,
        Type::DATE if *t == DataType::Date32 => Encoding::Date,
        Type::TIMESTAMP if matches!(t, DataType::Timestamp(..)) => Encoding::Timestamp,
        Type::TIMESTAMPTZ if matches!(t, DataType::Timestamp(..)) => Encoding::Timestamptz,
        _ => return None,
    })
}

/// One value, borrowed from its column, ready for binary `COPY`.
#[derive(Debug)]
pub(crate) enum Cell<'a> {
    Null,
    Bool(bool),
    I16(i16),
    I32(i32),
    I64(i64),
    F32(f32),
    F64(f64),
    Str(&'a str),
    Bytes(&'a [u8]),
    Date(NaiveDate),
    Timestamp(NaiveDateTime),
    Timestamptz(DateTime<Utc>),
}

impl ToSql for Cell<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match self {
            Cell::Null => Ok(IsNull::Yes),
            Cell::Bool(v) => v.to_sql(ty, out),
            Cell::I16(v) => v.to_sql(ty, out),
            Cell::I32(v) => v.to_sql(ty, out),
            Cell::I64(v) => v.to_sql(ty, out),
            Cell::F32(v) => v.to_sql(ty, out),
            Cell::F64(v) => v.to_sql(ty, out),
            Cell::Str(v) => v.to_sql(ty, out),
            Cell::Bytes(v) => v.to_sql(ty, out),
            Cell::Date(v) => v.to_sql(ty, out),
            Cell::Timestamp(v) => v.to_sql(ty, out),
            Cell::Timestamptz(v) => v.to_sql(ty, out),
        }
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// Integer `row` of `a` as i64 (or the u64 that does not fit).
fn int_at(a: &ArrayRef, row: usize) -> Result<i64, String> {
    let v: i128 = match a.data_type() {
        DataType::Int8 => a.as_primitive::<Int8Type>().value(row).into(),
        DataType::Int16 => a.as_primitive::<Int16Type>().value(row).into(),
        DataType::Int32 => a.as_primitive::<Int32Type>().value(row).into(),
        DataType::Int64 => a.as_primitive::<Int64Type>().value(row).into(),
        DataType::UInt8 => a.as_primitive::<UInt8Type>().value(row).into(),
        DataType::UInt16 => a.as_primitive::<UInt16Type>().value(row).into(),
        DataType::UInt32 => a.as_primitive::<UInt32Type>().value(row).into(),
        DataType::UInt64 => a.as_primitive::<UInt64Type>().value(row).into(),
        t => return Err(format!("{t} is not an integer type")),
    };
    i64::try_from(v).map_err(|_| format!("{v} does not fit a BIGINT"))
}

fn float_at(a: &ArrayRef, row: usize) -> Result<f64, String> {
    match a.data_type() {
        DataType::Float32 => Ok(a.as_primitive::<Float32Type>().value(row).into()),
        DataType::Float64 => Ok(a.as_primitive::<Float64Type>().value(row)),
        _ => int_at(a, row).map(|v| v as f64),
    }
}

fn micros_at(a: &ArrayRef, row: usize) -> Result<i64, String> {
    use arrow::datatypes::{
        TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
        TimestampSecondType,
    };
    match a.data_type() {
        DataType::Timestamp(TimeUnit::Second, _) => a
            .as_primitive::<TimestampSecondType>()
            .value(row)
            .checked_mul(1_000_000)
            .ok_or_else(|| "timestamp out of range".to_string()),
        DataType::Timestamp(TimeUnit::Millisecond, _) => a
            .as_primitive::<TimestampMillisecondType>()
            .value(row)
            .checked_mul(1_000)
            .ok_or_else(|| "timestamp out of range".to_string()),
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            Ok(a.as_primitive::<TimestampMicrosecondType>().value(row))
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            Ok(a.as_primitive::<TimestampNanosecondType>().value(row) / 1_000)
        }
        t => Err(format!("{t} is not a timestamp")),
    }
}

fn str_at(a: &ArrayRef, row: usize) -> Result<&str, String> {
    if let Some(s) = a.as_any().downcast_ref::<StringArray>() {
        return Ok(s.value(row));
    }
    if let Some(s) = a.as_any().downcast_ref::<LargeStringArray>() {
        return Ok(s.value(row));
    }
    if let Some(s) = a.as_any().downcast_ref::<StringViewArray>() {
        return Ok(s.value(row));
    }
    Err(format!("{} is not a string type", a.data_type()))
}

/// Value `row` of column `a` in `encoding`; an error says why it does not fit.
pub(crate) fn cell(a: &ArrayRef, row: usize, encoding: Encoding) -> Result<Cell<'_>, String> {
    if a.is_null(row) {
        return Ok(Cell::Null);
    }
    Ok(match encoding {
        Encoding::Bool => Cell::Bool(
            a.as_any()
                .downcast_ref::<BooleanArray>()
                .ok_or("not a boolean")?
                .value(row),
        ),
        Encoding::Int2 => {
            let v = int_at(a, row)?;
            Cell::I16(i16::try_from(v).map_err(|_| format!("{v} does not fit a SMALLINT"))?)
        }
        Encoding::Int4 => {
            let v = int_at(a, row)?;
            Cell::I32(i32::try_from(v).map_err(|_| format!("{v} does not fit an INTEGER"))?)
        }
        Encoding::Int8 => Cell::I64(int_at(a, row)?),
        Encoding::Float4 => Cell::F32(float_at(a, row)? as f32),
        Encoding::Float8 => Cell::F64(float_at(a, row)?),
        Encoding::Text => Cell::Str(str_at(a, row)?),
        Encoding::Bytea => {
            if let Some(b) = a.as_any().downcast_ref::<BinaryArray>() {
                Cell::Bytes(b.value(row))
            } else if let Some(b) = a.as_any().downcast_ref::<LargeBinaryArray>() {
                Cell::Bytes(b.value(row))
            } else {
                return Err("not a binary column".into());
            }
        }
        Encoding::Date => {
            let days = a.as_primitive::<Date32Type>().value(row);
            let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).ok_or("no epoch")?;
            Cell::Date(
                epoch
                    .checked_add_signed(chrono::Duration::days(days.into()))
                    .ok_or_else(|| format!("date {days} days from 1970 is out of range"))?,
            )
        }
        Encoding::Timestamp | Encoding::Timestamptz => {
            let us = micros_at(a, row)?;
            let t = DateTime::<Utc>::from_timestamp_micros(us)
                .ok_or_else(|| format!("timestamp {us} µs is out of range"))?;
            if encoding == Encoding::Timestamp {
                Cell::Timestamp(t.naive_utc())
            } else {
                Cell::Timestamptz(t)
            }
        }
    })
}

/// A column with its dictionary (if any) decoded, so [`cell`] sees plain values.
pub(crate) fn plain(a: &ArrayRef) -> Result<ArrayRef, arrow::error::ArrowError> {
    match a.data_type() {
        DataType::Dictionary(_, v) => arrow::compute::cast(a, v),
        _ => Ok(a.clone()),
    }
}
