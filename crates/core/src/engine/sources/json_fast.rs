//! A fast JSON-lines decoder for flat schemas (strings, integers, doubles,
//! booleans, UTC timestamps): the common case of the JSON file source.
//!
//! It decodes one object per line straight into Arrow buffers. It accepts
//! only a strict subset of JSON on which it gives exactly the values arrow's
//! JSON decoder (the general path, see [`super::parse`]) would give: any
//! line outside that subset (escapes in strings, nested values, numbers of
//! another type than the column's, duplicate keys, an object spread over
//! several lines, invalid UTF-8, …) makes [`FastJson::decode`] return
//! `None`, and the caller decodes the chunk with the general path instead,
//! which also handles bad records by Spark's modes. So the fast path never
//! changes a result; it only skips the general decoder's tape for the lines
//! it understands.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, BooleanBufferBuilder, Float64Array, Int32Array, Int64Array,
    NullBufferBuilder, PrimitiveArray, StringArray,
};
use arrow::buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow::compute::kernels::cast_utils::string_to_datetime;
use arrow::datatypes::{
    DataType, SchemaRef, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use super::null_columns::null_column;
use super::string_dictionary::StringDictionary;
use crate::engine::exec::dictionary_ids::string_dictionary_type;

/// The column types the fast path decodes.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Utf8,
    Int64,
    Int32,
    Float64,
    Boolean,
    Timestamp(TimeUnit),
    /// A STRING column the query reads only as `CAST(s AS TIMESTAMP)`:
    /// read converted by Spark's rules (see [`FastJson::with_spark_timestamps`]).
    SparkTimestamp,
}

/// A decoder for one flat schema (see the module documentation).
#[derive(Debug)]
pub(crate) struct FastJson {
    schema: SchemaRef,
    names: Vec<Box<[u8]>>,
    /// Each name followed by the closing quote, to match a key in place.
    quoted: Vec<Box<[u8]>>,
    /// The same as two masked little-endian words (names up to 15 bytes).
    words: Vec<Option<[u64; 4]>>,
    kinds: Vec<Kind>,
    /// Per column, whether the query reads it; the others are checked
    /// but not stored, and come out as nulls (see [`FastJson::reading_only`]).
    read: Vec<bool>,
    /// Per column, whether a string column is built dictionary-encoded
    /// (see [`FastJson::with_dictionaries`]).
    dictionary: Vec<bool>,
    batch_rows: usize,
}

/// A dictionary-encoded column whose distinct values pass this share of a
/// batch's rows (one in four) is built plain instead, from then on in the
/// chunk: a dictionary of mostly distinct values saves nothing downstream.
const MAX_DISTINCT_SHARE: usize = 4;

/// After this many rows of a batch, a dictionary-encoded column whose
/// distinct values are more than half of those rows is built plain
/// instead (mostly distinct ids are found early, before a quarter of the
/// batch went through the dictionary).
const PROBE_ROWS: usize = 4096;

/// Columns past this index are never built dictionary-encoded (a bit of
/// [`Builder::plain`] each).
const MAX_DICTIONARY_COLUMNS: usize = 64;

/// The values of one column of the batch being built.
enum Column {
    Utf8 {
        offsets: Vec<i32>,
        values: Vec<u8>,
    },
    /// A string column built dictionary-encoded.
    Dict(StringDictionary),
    /// A column the query does not read: values are checked, not stored.
    Unread,
    I64(Vec<i64>),
    I32(Vec<i32>),
    F64(Vec<f64>),
    Bool(BooleanBufferBuilder),
}

struct Builder {
    cols: Vec<Column>,
    nulls: Vec<NullBufferBuilder>,
    rows: usize,
    /// Per column, the last string converted by Spark's rules and its
    /// answer: event times repeat row after row.
    last_cast: Vec<(Vec<u8>, Option<i64>)>,
    /// Bit `i` set: column `i` was to be dictionary-encoded but has too
    /// many distinct values, so it is built plain (carried to the next
    /// batches of the chunk).
    plain: u64,
}

/// Bytes of a line are read through this cursor; every method returns
/// `None` when the input leaves the supported subset.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl FastJson {
    /// A decoder for `schema`, or `None` when a column has a type the fast
    /// path does not handle.
    pub(crate) fn new(schema: &SchemaRef, batch_rows: usize) -> Option<FastJson> {
        if schema.fields().is_empty() || schema.fields().len() > 64 {
            return None;
        }
        let mut names = Vec::new();
        let mut kinds = Vec::new();
        for f in schema.fields() {
            let kind = match f.data_type() {
                DataType::Utf8 => Kind::Utf8,
                DataType::Int64 => Kind::Int64,
                DataType::Int32 => Kind::Int32,
                DataType::Float64 => Kind::Float64,
                DataType::Boolean => Kind::Boolean,
                DataType::Timestamp(unit, tz) => {
                    // Zone-less strings are read in the column's zone: only UTC here.
                    match tz.as_deref() {
                        None | Some("UTC") | Some("+00:00") => Kind::Timestamp(*unit),
                        Some(_) => return None,
                    }
                }
                _ => return None,
            };
            if f.name()
                .bytes()
                .any(|b| b == b'"' || b == b'\\' || b < 0x20)
            {
                return None;
            }
            names.push(f.name().as_bytes().to_vec().into_boxed_slice());
            kinds.push(kind);
        }
        // Duplicate names: arrow's decoder fills the first; not worth copying.
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                return None;
            }
        }
        let quoted: Vec<Box<[u8]>> = names
            .iter()
            .map(|n| {
                let mut q = n.to_vec();
                q.push(b'"');
                q.into_boxed_slice()
            })
            .collect();
        let words = quoted.iter().map(|q| key_words(q)).collect();
        let columns = kinds.len();
        Some(FastJson {
            schema: schema.clone(),
            names,
            quoted,
            words,
            kinds,
            read: vec![true; columns],
            dictionary: vec![false; columns],
            batch_rows: batch_rows.max(1),
        })
    }

    /// The decoder storing only the columns flagged in `columns` (one flag
    /// per column of the schema; missing flags are true): the others'
    /// values are checked as if they were read (so the same lines leave
    /// the fast path) but not stored, and the columns come out all null,
    /// as projection pushdown wants for columns the query never reads.
    pub(crate) fn reading_only(mut self, columns: &[bool]) -> FastJson {
        for (i, read) in self.read.iter_mut().enumerate() {
            *read = columns.get(i).copied().unwrap_or(true);
        }
        self
    }

    /// The decoder building the string columns flagged in `columns` (one
    /// flag per column of the schema; missing flags are false) as
    /// `Dictionary(Int32, Utf8)`, batch by batch, as long as a column's
    /// distinct values stay under a quarter of a batch's rows and, from
    /// [`PROBE_ROWS`] rows on, under half of them (then it is built plain
    /// for the rest of the input; the batches' schemas say which type each
    /// column has).
    pub(crate) fn with_dictionaries(mut self, columns: &[bool]) -> FastJson {
        for (i, dictionary) in self.dictionary.iter_mut().enumerate() {
            *dictionary = columns.get(i).copied().unwrap_or(false)
                && matches!(self.kinds[i], Kind::Utf8)
                && i < MAX_DICTIONARY_COLUMNS;
        }
        self
    }

    /// The decoder reading the STRING columns flagged in `columns` (one flag
    /// per column of the schema; missing flags are false) converted, as
    /// `CAST(s AS TIMESTAMP)` converts them (`TIMESTAMP` in UTC, NULL for a
    /// string that is not a timestamp): the query reads them only so.
    pub(crate) fn with_spark_timestamps(mut self, columns: &[bool]) -> FastJson {
        let mut changes = Vec::new();
        for (i, kind) in self.kinds.iter_mut().enumerate() {
            if matches!(kind, Kind::Utf8) && columns.get(i).copied().unwrap_or(false) {
                *kind = Kind::SparkTimestamp;
                changes.push((i, crate::plan::timestamp::udf::timestamp_type()));
            }
        }
        if !changes.is_empty() {
            self.schema = crate::engine::exec::retyped(&self.schema, changes);
        }
        self
    }

    fn builder(&self, capacity: usize, plain: u64) -> Builder {
        let cols = self
            .kinds
            .iter()
            .enumerate()
            .map(|(i, k)| match k {
                _ if !self.read[i] => Column::Unread,
                Kind::Utf8 if self.dictionary[i] && plain & (1 << i) == 0 => {
                    Column::Dict(StringDictionary::with_capacity(capacity))
                }
                Kind::Utf8 => {
                    let mut offsets = Vec::with_capacity(capacity + 1);
                    offsets.push(0);
                    Column::Utf8 {
                        offsets,
                        values: Vec::with_capacity(capacity * 16),
                    }
                }
                Kind::Int64 | Kind::Timestamp(_) | Kind::SparkTimestamp => {
                    Column::I64(Vec::with_capacity(capacity))
                }
                Kind::Int32 => Column::I32(Vec::with_capacity(capacity)),
                Kind::Float64 => Column::F64(Vec::with_capacity(capacity)),
                Kind::Boolean => Column::Bool(BooleanBufferBuilder::new(capacity)),
            })
            .collect();
        Builder {
            cols,
            nulls: self
                .kinds
                .iter()
                .map(|_| NullBufferBuilder::new(capacity))
                .collect(),
            rows: 0,
            last_cast: self.kinds.iter().map(|_| (Vec::new(), None)).collect(),
            plain,
        }
    }

    /// Decodes every line of `buf`; `None` when a line is outside the
    /// supported subset (the caller then uses the general decoder).
    pub(crate) fn decode(&self, buf: &[u8]) -> Option<Vec<RecordBatch>> {
        let mut out = Vec::new();
        let estimate = (buf.len() / 64).max(16).min(self.batch_rows);
        let mut b = self.builder(estimate, 0);
        let mut c = Cursor { buf, pos: 0 };
        loop {
            // Blank lines and whitespace between records.
            while c.pos < buf.len() && matches!(buf[c.pos], b' ' | b'\t' | b'\r' | b'\n') {
                c.pos += 1;
            }
            if c.pos >= buf.len() {
                break;
            }
            self.record(&mut c, &mut b)?;
            b.rows += 1;
            if b.rows >= self.batch_rows {
                let plain = b.plain;
                let full = std::mem::replace(&mut b, self.builder(self.batch_rows, plain));
                out.push(self.finish(full)?);
            }
        }
        if b.rows > 0 {
            out.push(self.finish(b)?);
        }
        Some(out)
    }

    /// One `{...}` object, alone on its line.
    fn record(&self, c: &mut Cursor, b: &mut Builder) -> Option<()> {
        c.expect(b'{')?;
        c.ws();
        let mut seen: u64 = 0;
        let mut next_guess = 0usize;
        if c.peek()? == b'}' {
            c.pos += 1;
        } else {
            loop {
                let field = match self.key_in_place(c, next_guess) {
                    Some(i) => Some(i),
                    None => self.field(c.string()?),
                };
                c.ws();
                c.expect(b':')?;
                c.ws();
                match field {
                    Some(i) => {
                        let bit = 1u64 << i;
                        if seen & bit != 0 {
                            return None;
                        }
                        seen |= bit;
                        next_guess = i + 1;
                        self.value(c, b, i)?;
                    }
                    None => c.skip_scalar()?,
                }
                c.ws();
                match c.next()? {
                    b',' => c.ws(),
                    b'}' => break,
                    _ => return None,
                }
            }
        }
        // The rest of the line must be blank.
        while c.pos < c.buf.len() {
            match c.buf[c.pos] {
                b' ' | b'\t' | b'\r' => c.pos += 1,
                b'\n' => break,
                _ => return None,
            }
        }
        // Columns the record does not have are null.
        let all = if self.kinds.len() == 64 {
            u64::MAX
        } else {
            (1u64 << self.kinds.len()) - 1
        };
        let mut missing = all & !seen;
        while missing != 0 {
            let i = missing.trailing_zeros() as usize;
            missing &= missing - 1;
            push_null(b, i);
        }
        Some(())
    }

    /// Column `guess` when the key at the cursor is its name (objects
    /// usually list their keys in the schema's order); moves past the key.
    fn key_in_place(&self, c: &mut Cursor, guess: usize) -> Option<usize> {
        let q = self.quoted.get(guess)?;
        if c.peek()? != b'"' {
            return None;
        }
        match (self.words[guess], c.buf.get(c.pos + 1..c.pos + 17)) {
            (Some([w0, m0, w1, m1]), Some(at)) => {
                let a = u64::from_le_bytes(at[..8].try_into().ok()?);
                let b = u64::from_le_bytes(at[8..].try_into().ok()?);
                if ((a ^ w0) & m0) | ((b ^ w1) & m1) != 0 {
                    return None;
                }
            }
            _ => {
                let at = c.buf.get(c.pos + 1..c.pos + 1 + q.len())?;
                if !same(at, q) {
                    return None;
                }
            }
        }
        c.pos += 1 + q.len();
        Some(guess)
    }

    /// The column named `key`.
    fn field(&self, key: &[u8]) -> Option<usize> {
        self.names.iter().position(|n| same(n, key))
    }

    fn value(&self, c: &mut Cursor, b: &mut Builder, i: usize) -> Option<()> {
        if c.peek()? == b'n' {
            c.literal(b"null")?;
            push_null(b, i);
            return Some(());
        }
        match (&self.kinds[i], &mut b.cols[i]) {
            (kind, Column::Unread) => return check_value(c, *kind),
            (Kind::Utf8, Column::Utf8 { offsets, values }) => {
                let s = c.string()?;
                values.extend_from_slice(s);
                offsets.push(i32::try_from(values.len()).ok()?);
            }
            (Kind::Utf8, Column::Dict(d)) => {
                d.push(c.string()?)?;
                let (distinct, rows) = (d.distinct(), b.rows + 1);
                if distinct * MAX_DISTINCT_SHARE > self.batch_rows
                    || (rows >= PROBE_ROWS && distinct * 2 > rows)
                {
                    let (offsets, values) = d.to_plain()?;
                    b.cols[i] = Column::Utf8 { offsets, values };
                    b.plain |= 1 << i;
                }
            }
            (Kind::Int64, Column::I64(v)) => v.push(c.integer()?),
            (Kind::Int32, Column::I32(v)) => v.push(i32::try_from(c.integer()?).ok()?),
            (Kind::Float64, Column::F64(v)) => v.push(c.float()?),
            (Kind::Boolean, Column::Bool(v)) => v.append(c.boolean()?),
            (Kind::SparkTimestamp, Column::I64(v)) => {
                let s = c.string()?;
                let (last, answer) = &mut b.last_cast[i];
                if s != last.as_slice() || s.is_empty() {
                    last.clear();
                    last.extend_from_slice(s);
                    *answer = crate::plan::timestamp::cast_timestamp_with_zones(s);
                }
                match *answer {
                    Some(t) => v.push(t),
                    None => {
                        v.push(0);
                        b.nulls[i].append_null();
                        return Some(());
                    }
                }
            }
            (Kind::Timestamp(unit), Column::I64(v)) => v.push(c.timestamp(*unit)?),
            _ => return None,
        }
        b.nulls[i].append_non_null();
        Some(())
    }

    fn finish(&self, b: Builder) -> Option<RecordBatch> {
        let rows = b.rows;
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(b.cols.len());
        let mut dictionaries = Vec::new();
        for ((col, mut nulls), kind) in b.cols.into_iter().zip(b.nulls).zip(&self.kinds) {
            let nulls = nulls.finish();
            let a: ArrayRef = match (col, kind) {
                (Column::Unread, _) => {
                    null_column(self.schema.field(arrays.len()).data_type(), rows)
                }
                (Column::Dict(d), _) => {
                    dictionaries.push((arrays.len(), string_dictionary_type()));
                    d.finish(nulls)?
                }
                (Column::Utf8 { offsets, values }, _) => {
                    // SAFETY-free: offsets are monotonic and the bytes were validated as UTF-8.
                    Arc::new(
                        StringArray::try_new(
                            OffsetBuffer::new(ScalarBuffer::from(offsets)),
                            Buffer::from_vec(values),
                            nulls,
                        )
                        .ok()?,
                    )
                }
                (Column::I64(v), Kind::Timestamp(unit)) => {
                    let values = ScalarBuffer::from(v);
                    let tz = match self.schema.field(arrays.len()).data_type() {
                        DataType::Timestamp(_, tz) => tz.clone(),
                        _ => None,
                    };
                    match unit {
                        TimeUnit::Second => Arc::new(
                            PrimitiveArray::<TimestampSecondType>::new(values, nulls)
                                .with_timezone_opt(tz),
                        ),
                        TimeUnit::Millisecond => Arc::new(
                            PrimitiveArray::<TimestampMillisecondType>::new(values, nulls)
                                .with_timezone_opt(tz),
                        ),
                        TimeUnit::Microsecond => Arc::new(
                            PrimitiveArray::<TimestampMicrosecondType>::new(values, nulls)
                                .with_timezone_opt(tz),
                        ),
                        TimeUnit::Nanosecond => Arc::new(
                            PrimitiveArray::<TimestampNanosecondType>::new(values, nulls)
                                .with_timezone_opt(tz),
                        ),
                    }
                }
                (Column::I64(v), Kind::SparkTimestamp) => Arc::new(
                    PrimitiveArray::<TimestampMicrosecondType>::new(ScalarBuffer::from(v), nulls)
                        .with_timezone(crate::plan::ddl::SESSION_TIME_ZONE),
                ),
                (Column::I64(v), _) => Arc::new(Int64Array::new(ScalarBuffer::from(v), nulls)),
                (Column::I32(v), _) => Arc::new(Int32Array::new(ScalarBuffer::from(v), nulls)),
                (Column::F64(v), _) => Arc::new(Float64Array::new(ScalarBuffer::from(v), nulls)),
                (Column::Bool(mut v), _) => Arc::new(BooleanArray::new(v.finish(), nulls)),
            };
            arrays.push(a);
        }
        let schema = match dictionaries.is_empty() {
            true => self.schema.clone(),
            false => crate::engine::exec::retyped(&self.schema, dictionaries),
        };
        RecordBatch::try_new_with_options(
            schema,
            arrays,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )
        .ok()
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each zero byte of `x` (bytes above the lowest zero byte
/// may be flagged falsely).
#[inline]
fn zero_bytes(x: u64) -> u64 {
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// A quoted key of at most 16 bytes as (word, mask, word, mask).
fn key_words(q: &[u8]) -> Option<[u64; 4]> {
    if q.len() > 16 {
        return None;
    }
    let mut bytes = [0u8; 16];
    let mut mask = [0u8; 16];
    bytes[..q.len()].copy_from_slice(q);
    mask[..q.len()].fill(0xff);
    let word = |b: &[u8; 16], i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[i..i + 8]);
        u64::from_le_bytes(w)
    };
    Some([
        word(&bytes, 0),
        word(&mask, 0),
        word(&bytes, 8),
        word(&mask, 8),
    ])
}

/// Byte equality of short slices, without a library call.
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    diff == 0
}

/// `d` two-digit or four-digit ASCII numbers.
fn num(s: &[u8]) -> Option<u32> {
    let mut v = 0u32;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (b - b'0') as u32;
    }
    Some(v)
}

/// Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

thread_local! {
    /// The last date converted: consecutive timestamps mostly share it.
    static LAST_DATE: std::cell::Cell<(u32, u32, u32, i64)> = const { std::cell::Cell::new((0, 0, 0, 0)) };
}

fn days_from_civil_cached(y: u32, m: u32, d: u32) -> i64 {
    LAST_DATE.with(|c| {
        let (ly, lm, ld, days) = c.get();
        if (ly, lm, ld) == (y, m, d) {
            return days;
        }
        let days = days_from_civil(y as i64, m, d);
        c.set((y, m, d, days));
        days
    })
}

/// The common ISO form `YYYY-MM-DD[T ]HH:MM:SS[.f{1,9}][Z]` (UTC), in
/// `unit`; `None` for anything else (leap seconds, offsets, other forms),
/// which the general parser then handles.
fn iso_timestamp(s: &[u8], unit: TimeUnit) -> Option<i64> {
    if s.len() < 19
        || s[4] != b'-'
        || s[7] != b'-'
        || !matches!(s[10], b'T' | b't' | b' ')
        || s[13] != b':'
        || s[16] != b':'
    {
        return None;
    }
    let year = num(&s[0..4])?;
    let month = num(&s[5..7])?;
    let day = num(&s[8..10])?;
    let hour = num(&s[11..13])?;
    let minute = num(&s[14..16])?;
    let second = num(&s[17..19])?;
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let month_days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if year == 0 || day == 0 || day > month_days || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut rest = &s[19..];
    let mut nanos = 0u32;
    if let [b'.', tail @ ..] = rest {
        let digits = tail.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || digits > 9 {
            return None;
        }
        nanos = num(&tail[..digits])? * 10u32.pow(9 - digits as u32);
        rest = &tail[digits..];
    }
    if !(rest.is_empty() || rest == b"Z" || rest == b"z") {
        return None;
    }
    let secs = days_from_civil_cached(year, month, day) * 86_400
        + (hour * 3600 + minute * 60 + second) as i64;
    let nanos = nanos as i64;
    match unit {
        TimeUnit::Second => Some(secs),
        TimeUnit::Millisecond => Some(secs * 1_000 + nanos / 1_000_000),
        TimeUnit::Microsecond => Some(secs * 1_000_000 + nanos / 1_000),
        TimeUnit::Nanosecond => secs.checked_mul(1_000_000_000)?.checked_add(nanos),
    }
}

/// Checks the value at the cursor as column type `kind` reads it (the
/// same lines leave the fast path as when it is stored), without storing it.
fn check_value(c: &mut Cursor, kind: Kind) -> Option<()> {
    match kind {
        Kind::Utf8 | Kind::SparkTimestamp => c.string().map(|_| ()),
        Kind::Int64 => c.integer().map(|_| ()),
        Kind::Int32 => i32::try_from(c.integer()?).ok().map(|_| ()),
        Kind::Float64 => c.float().map(|_| ()),
        Kind::Boolean => c.boolean().map(|_| ()),
        Kind::Timestamp(unit) => c.timestamp(unit).map(|_| ()),
    }
}

/// Appends a null to column `i`.
fn push_null(b: &mut Builder, i: usize) {
    match &mut b.cols[i] {
        Column::Unread => return,
        Column::Dict(d) => d.push_null(),
        Column::Utf8 { offsets, values } => offsets.push(values.len() as i32),
        Column::I64(v) => v.push(0),
        Column::I32(v) => v.push(0),
        Column::F64(v) => v.push(0.0),
        Column::Bool(v) => v.append(false),
    }
    b.nulls[i].append_null();
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.pos += 1;
        Some(b)
    }

    fn expect(&mut self, want: u8) -> Option<()> {
        (self.next()? == want).then_some(())
    }

    /// Spaces and tabs (a record stays on its line).
    fn ws(&mut self) {
        while self.pos < self.buf.len() && matches!(self.buf[self.pos], b' ' | b'\t') {
            self.pos += 1;
        }
    }

    fn literal(&mut self, lit: &[u8]) -> Option<()> {
        let end = self.pos + lit.len();
        if self.buf.get(self.pos..end)? != lit {
            return None;
        }
        self.pos = end;
        // `nullx`, `true1`: not a literal.
        if self.peek().is_some_and(|b| b.is_ascii_alphanumeric()) {
            return None;
        }
        Some(())
    }

    /// A string without escapes or control characters, valid UTF-8: its bytes.
    fn string(&mut self) -> Option<&'a [u8]> {
        self.expect(b'"')?;
        let start = self.pos;
        let buf = self.buf;
        let mut i = start;
        let mut high = false;
        loop {
            // Eight bytes at a time: flag quotes, backslashes, control
            // characters and non-ASCII bytes; the lowest flag is exact.
            if let Some(chunk) = buf.get(i..i + 8) {
                let mut w = [0u8; 8];
                w.copy_from_slice(chunk);
                let x = u64::from_le_bytes(w);
                let flags = zero_bytes(x ^ (ONES * b'"' as u64))
                    | zero_bytes(x ^ (ONES * b'\\' as u64))
                    | (x.wrapping_sub(ONES * 0x20) & !x & HIGHS)
                    | (x & HIGHS);
                if flags == 0 {
                    i += 8;
                    continue;
                }
                i += (flags.trailing_zeros() / 8) as usize;
            }
            let b = *buf.get(i)?;
            if b == b'"' {
                break;
            }
            if b == b'\\' || b < 0x20 {
                return None;
            }
            high |= b >= 0x80;
            i += 1;
        }
        let s = &buf[start..i];
        if high {
            std::str::from_utf8(s).ok()?;
        }
        self.pos = i + 1;
        Some(s)
    }

    /// `-?(0|[1-9][0-9]*)` without fraction or exponent, at most 18 digits.
    fn integer(&mut self) -> Option<i64> {
        let neg = self.peek()? == b'-';
        if neg {
            self.pos += 1;
        }
        let start = self.pos;
        let mut v: i64 = 0;
        while let Some(d) = self.peek().filter(u8::is_ascii_digit) {
            // Wrapping: a value of more than 18 digits is refused below (and
            // read by the general decoder), so its wrapped value is unused.
            v = v.wrapping_mul(10).wrapping_add((d - b'0') as i64);
            self.pos += 1;
        }
        let digits = self.pos - start;
        if digits == 0 || digits > 18 || (digits > 1 && self.buf[start] == b'0') {
            return None;
        }
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(if neg { -v } else { v })
    }

    /// A finite JSON number as a double.
    fn float(&mut self) -> Option<f64> {
        let t = self.number()?;
        // Valid JSON numbers are valid Rust floats; both parsers round correctly.
        let x: f64 = std::str::from_utf8(t).ok()?.parse().ok()?;
        x.is_finite().then_some(x)
    }

    /// `true` or `false`.
    fn boolean(&mut self) -> Option<bool> {
        match self.peek()? {
            b't' => self.literal(b"true").map(|_| true),
            _ => self.literal(b"false").map(|_| false),
        }
    }

    /// A string holding a timestamp, in `unit` since the epoch (UTC).
    fn timestamp(&mut self, unit: TimeUnit) -> Option<i64> {
        let s = self.string()?;
        if let Some(t) = iso_timestamp(s, unit) {
            return Some(t);
        }
        let t = string_to_datetime(&chrono::Utc, std::str::from_utf8(s).ok()?).ok()?;
        match unit {
            TimeUnit::Second => Some(t.timestamp()),
            TimeUnit::Millisecond => Some(t.timestamp_millis()),
            TimeUnit::Microsecond => Some(t.timestamp_micros()),
            TimeUnit::Nanosecond => t.timestamp_nanos_opt(),
        }
    }

    /// A JSON number (strict grammar): its text.
    fn number(&mut self) -> Option<&'a [u8]> {
        let start = self.pos;
        if self.peek()? == b'-' {
            self.pos += 1;
        }
        let int_start = self.pos;
        self.digits();
        let n = self.pos - int_start;
        if n == 0 || (n > 1 && self.buf[int_start] == b'0') {
            return None;
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return None;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        Some(&self.buf[start..self.pos])
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while self.peek().is_some_and(|d| d.is_ascii_digit()) {
            self.pos += 1;
        }
        self.pos - start
    }

    /// The value of a key that is not a column: a string, number or
    /// literal (nested values leave the fast path).
    fn skip_scalar(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number().map(|_| ()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{Field, Schema};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
            Field::new("s", DataType::Utf8, true),
            Field::new("i", DataType::Int64, true),
            Field::new("n", DataType::Int32, true),
            Field::new("d", DataType::Float64, true),
            Field::new("b", DataType::Boolean, true),
        ]))
    }

    fn arrow_decode(schema: &SchemaRef, buf: &[u8]) -> Option<Vec<RecordBatch>> {
        let mut dec = arrow::json::ReaderBuilder::new(schema.clone())
            .with_batch_size(3)
            .with_coerce_primitive(true)
            .build_decoder()
            .ok()?;
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < buf.len() {
            let n = dec.decode(&buf[pos..]).ok()?;
            pos += n;
            if let Some(b) = dec.flush().ok()? {
                out.push(b);
            }
            if n == 0 {
                break;
            }
        }
        if dec.has_partial_record() {
            return None;
        }
        if let Some(b) = dec.flush().ok()? {
            out.push(b);
        }
        Some(out)
    }

    fn concat(schema: &SchemaRef, b: &[RecordBatch]) -> RecordBatch {
        arrow::compute::concat_batches(schema, b).expect("concat")
    }

    /// Lines the fast path accepts decode exactly as arrow decodes them.
    #[test]
    fn agrees_with_arrow() {
        let s = schema();
        let fast = FastJson::new(&s, 3).expect("supported");
        let cases: &[&str] = &[
            "{\"ts\":\"2026-11-01T00:00:00.123Z\",\"s\":\"a\",\"i\":1,\"n\":-2,\"d\":1.5,\"b\":true}\n",
            "{\"ts\":\"2026-11-01 00:00:05\",\"s\":\"é ü\",\"i\":-9000000000,\"d\":-0.0,\"b\":false}\r\n",
            "\n\n{}\n  {\"x\":{\"y\":1}}\n",
            "{\"s\":null,\"i\":null,\"extra\":\"z\",\"ts\":null}\n{\"d\":1e5,\"z\":-1.25E-3,\"q\":true}",
            "{ \"i\" : 0 , \"s\" : \"\" }\n{\"n\":2147483647}\n{\"b\":null}\n{\"ts\":\"2026-11-01T10:00:05+02:00\"}\n",
            "{\"ts\":\"2026-11-01\"}\n{\"ts\":\"2026-11-01T00:00:00.123456789Z\"}\n",
            "{\"tsx\":\"a\",\"i\":1,\"s2\":\"b\",\"n\":3,\"d\":2}\n{\"t\":1,\"s\":\"c\"}\n",
            "{\"s\":\"a longer string: ünïcödé, €uro and 🎉 past eight bytes\",\"x\":\"0123456789abcdef\"}\n",
        ];
        for text in cases {
            let got = fast.decode(text.as_bytes());
            let want = arrow_decode(&s, text.as_bytes());
            match (got, want) {
                (Some(g), Some(w)) => {
                    assert_eq!(concat(&s, &g), concat(&s, &w), "{text}");
                }
                (None, _) => {
                    // Leaving the fast path is always allowed; the cases
                    // above without nested values are expected to stay on it.
                    assert!(text.contains("{\"y\""), "fast path refused {text:?}");
                }
                (Some(_), None) => panic!("fast path accepted what arrow rejects: {text:?}"),
            }
        }
    }

    /// Anything unusual leaves the fast path.
    #[test]
    fn refuses_outside_the_subset() {
        let s = schema();
        let fast = FastJson::new(&s, 1024).expect("supported");
        for text in [
            "{\"s\":\"a\\nb\"}",
            "{\"s\":\"0123456789\\\"x\"}",
            "{\"s\":\"012345678\tx\"}",
            "{\"s\":\"0123456789abcdefgh",
            "{\"s\":1}",
            "{\"i\":\"1\"}",
            "{\"i\":1.0}",
            "{\"i\":01}",
            "{\"i\":1,\"i\":2}",
            "{\"s\":\"a\"}{\"s\":\"b\"}",
            "{\"s\":\"a\",\n\"i\":1}",
            "[1]",
            "{\"s\":\"a\"",
            "{\"s\":\"a\",}",
            "{\"x\":[1]}",
            "{\"n\":3000000000}",
            "{\"ts\":\"yesterday\"}",
            "{\"ts\":1}",
            "{\"b\":tru}",
            "{\"b\":nullx}",
            "{\"d\":1e999}",
            "{\"d\":.5}",
            "nul",
        ] {
            assert!(fast.decode(text.as_bytes()).is_none(), "{text}");
        }
        assert!(fast.decode(b"{\"s\":\"\xff\"}").is_none());
    }

    /// The ISO shortcut gives what arrow's general parser gives.
    #[test]
    fn iso_timestamps_match_arrow() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut checked = 0;
        for _ in 0..20_000 {
            let frac = match rnd(4) {
                0 => String::new(),
                1 => format!(".{}", rnd(1000)),
                2 => format!(".{:06}", rnd(1_000_000)),
                _ => format!(".{:09}", rnd(1_000_000_000)),
            };
            let zone = ["", "Z", "z"][rnd(3) as usize];
            let sep = ["T", " ", "t"][rnd(3) as usize];
            let text = format!(
                "{:04}-{:02}-{:02}{sep}{:02}:{:02}:{:02}{frac}{zone}",
                1 + rnd(2400),
                1 + rnd(12),
                1 + rnd(31),
                rnd(24),
                rnd(60),
                rnd(60)
            );
            for unit in [
                TimeUnit::Second,
                TimeUnit::Millisecond,
                TimeUnit::Microsecond,
                TimeUnit::Nanosecond,
            ] {
                let fast = iso_timestamp(text.as_bytes(), unit);
                let want = string_to_datetime(&chrono::Utc, &text)
                    .ok()
                    .and_then(|t| match unit {
                        TimeUnit::Second => Some(t.timestamp()),
                        TimeUnit::Millisecond => Some(t.timestamp_millis()),
                        TimeUnit::Microsecond => Some(t.timestamp_micros()),
                        TimeUnit::Nanosecond => t.timestamp_nanos_opt(),
                    });
                if let Some(f) = fast {
                    assert_eq!(Some(f), want, "{text} {unit:?}");
                    checked += 1;
                } else {
                    // Only invalid dates (day 31 of a short month, …) or nanosecond overflow fall back.
                    assert!(
                        want.is_none() || unit == TimeUnit::Nanosecond,
                        "{text} {unit:?} fell back"
                    );
                }
            }
        }
        assert!(checked > 50_000);
        for odd in [
            "2026-11-01T10:00:60Z",
            "2026-11-01T10:00:00+01:00",
            "2026-11-01",
        ] {
            assert_eq!(iso_timestamp(odd.as_bytes(), TimeUnit::Microsecond), None);
        }
    }

    #[test]
    fn unsupported_types_have_no_fast_path() {
        let s: SchemaRef = Arc::new(Schema::new(vec![Field::new(
            "l",
            DataType::List(Arc::new(Field::new("item", DataType::Int64, true))),
            true,
        )]));
        assert!(FastJson::new(&s, 10).is_none());
    }

    #[test]
    fn splits_into_batches() {
        let s = schema();
        let fast = FastJson::new(&s, 2).expect("supported");
        let text = "{\"i\":1}\n{\"i\":2}\n{\"i\":3}\n";
        let out = fast.decode(text.as_bytes()).expect("decodes");
        assert_eq!(
            out.iter().map(|b| b.num_rows()).collect::<Vec<_>>(),
            vec![2, 1]
        );
    }

    /// `batch` with every column decoded to its plain type (dictionaries
    /// cast back to strings) in `schema`.
    fn normalized(schema: &SchemaRef, batch: &RecordBatch) -> RecordBatch {
        let columns = batch
            .columns()
            .iter()
            .zip(schema.fields())
            .map(|(c, f)| arrow::compute::cast(c, f.data_type()).expect("cast"))
            .collect();
        RecordBatch::try_new(schema.clone(), columns).expect("batch")
    }

    #[test]
    fn unread_columns_are_checked_not_stored() {
        let s = schema();
        // `ts`, `s` and `d` unread; `i`, `n`, `b` read.
        let read = [false, false, true, true, false, true];
        let fast = FastJson::new(&s, 4).expect("supported").reading_only(&read);
        let text = "{\"ts\":\"2026-11-01T00:00:00Z\",\"s\":\"a\",\"i\":1,\"d\":1.5,\"b\":true}\n\
                    {\"s\":null,\"i\":2,\"n\":7,\"d\":null}\n{\"ts\":null,\"b\":false}\n";
        let got = fast.decode(text.as_bytes()).expect("decodes");
        let want = arrow_decode(&s, text.as_bytes()).expect("arrow decodes");
        let want = concat(&s, &want);
        let got = concat(&s, &got);
        for (i, r) in read.iter().enumerate() {
            if *r {
                assert_eq!(got.column(i), want.column(i), "column {i}");
            } else {
                assert_eq!(got.column(i).null_count(), 3, "column {i}");
                assert_eq!(got.column(i).data_type(), s.field(i).data_type());
            }
        }
        // Values an unread column could not hold still leave the fast path.
        for bad in [
            "{\"d\":\"x\"}\n",
            "{\"s\":1}\n",
            "{\"ts\":\"yesterday\"}\n",
            "{\"ts\":5}\n",
            "{\"s\":\"a\\nb\"}\n",
        ] {
            assert!(fast.decode(bad.as_bytes()).is_none(), "{bad}");
        }
    }

    #[test]
    fn dictionary_columns() {
        let s: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("level", DataType::Utf8, true),
            Field::new("user", DataType::Utf8, true),
            Field::new("v", DataType::Int64, true),
        ]));
        let fast = FastJson::new(&s, 16)
            .expect("supported")
            .with_dictionaries(&[true, true]);
        let mut text = String::new();
        // 48 rows with 3 users, then 32 rows with 20 distinct users.
        for i in 0..80 {
            let level = ["INFO", "WARN", "ERROR"][i % 3];
            let user = if i < 48 {
                format!("u{}", i % 3)
            } else {
                format!("v{}", i % 20)
            };
            if i % 11 == 5 {
                text.push_str(&format!(
                    "{{\"level\":null,\"user\":\"{user}\",\"v\":{i}}}\n"
                ));
            } else {
                text.push_str(&format!(
                    "{{\"level\":\"{level}\",\"user\":\"{user}\",\"v\":{i}}}\n"
                ));
            }
        }
        let got = fast.decode(text.as_bytes()).expect("decodes");
        assert_eq!(got.len(), 5);
        let dictionary = string_dictionary_type();
        let types: Vec<(DataType, DataType)> = got
            .iter()
            .map(|b| {
                (
                    b.schema().field(0).data_type().clone(),
                    b.schema().field(1).data_type().clone(),
                )
            })
            .collect();
        assert_eq!(
            types,
            vec![
                (dictionary.clone(), dictionary.clone()),
                (dictionary.clone(), dictionary.clone()),
                (dictionary.clone(), dictionary.clone()),
                (dictionary.clone(), DataType::Utf8),
                (dictionary.clone(), DataType::Utf8),
            ]
        );
        for b in &got {
            assert_eq!(b.column(0).data_type(), &dictionary);
        }
        let want = concat(&s, &arrow_decode(&s, text.as_bytes()).expect("arrow"));
        let got: Vec<RecordBatch> = got.iter().map(|b| normalized(&s, b)).collect();
        assert_eq!(concat(&s, &got), want);
    }

    #[test]
    fn mostly_distinct_columns_leave_the_dictionary_early() {
        let s: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("level", DataType::Utf8, true),
        ]));
        let fast = FastJson::new(&s, 64 * 1024)
            .expect("supported")
            .with_dictionaries(&[true, true]);
        // One distinct id per row for 6000 rows, then 2 ids repeated.
        let text: String = (0..10_000)
            .map(|i| {
                let id = if i < 6000 { i } else { i % 2 };
                format!("{{\"id\":\"id-{id}\",\"level\":\"L{}\"}}\n", i % 3)
            })
            .collect();
        let got = fast.decode(text.as_bytes()).expect("decodes");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].schema().field(0).data_type(), &DataType::Utf8);
        assert_eq!(
            got[0].schema().field(1).data_type(),
            &string_dictionary_type()
        );
        let want = concat(&s, &arrow_decode(&s, text.as_bytes()).expect("arrow"));
        assert_eq!(normalized(&s, &got[0]), want);
    }
}
