//! Direct dictionary encoding of string and 64-bit integer column chunks
//! for the parquet sink.
//!
//! String columns reach the parquet sink as `Dictionary(Int32, Utf8)` arrays,
//! each input batch with its own dictionary. parquet's `ArrowColumnWriter`
//! re-interns every row's string into its page dictionary (one hash per row),
//! which dominates the cost of writing such columns. This module encodes one
//! column chunk directly instead: it merges the distinct values of the input
//! dictionaries once (one hash per used dictionary entry per batch), remaps
//! the keys with integer work only, and writes a PLAIN dictionary page
//! followed by v1 `RLE_DICTIONARY` data pages. `Int64` and timestamp
//! columns are interned here too (see `Int64Interner`: a row equal to the
//! one before it costs no lookup, a value above all before it none either,
//! small integers are found by offset), and written the same way.
//! Statistics, the page index (column index and offset index), level
//! histograms, encodings and encoding stats are built exactly as
//! `ArrowWriter` builds them, so the resulting file is indistinguishable
//! from one written by parquet except for page boundaries and dictionary
//! order.
//!
//! Anything outside the supported envelope (see [`encode`]) is declined with
//! `Ok(None)` and must be written with parquet's own column writer.

use std::collections::HashMap;

use arrow::array::{Array, ArrayRef, DictionaryArray, StringArray};
use arrow::datatypes::{DataType, Int32Type};
use bytes::Bytes;
use parquet::basic::{
    BoundaryOrder, Compression, Encoding, EncodingMask, PageType, SortOrder, Type as PhysicalType,
};
use parquet::column::page::{CompressedPage, Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::data_type::ByteArray;
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{
    ColumnChunkMetaData, ColumnIndexBuilder, LevelHistogram, OffsetIndexBuilder, PageEncodingStats,
};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
use parquet::file::statistics::{Statistics, ValueStatistics};
use parquet::file::writer::{SerializedPageWriter, TrackedWrite};
use parquet::schema::types::ColumnDescPtr;

/// Width of the range of 64-bit values an [`Int64Interner`] looks up by
/// offset (its table: 256 KiB).
const DIRECT_RANGE: usize = 1 << 16;

/// Values of a chunk's first batch whose range decides whether an
/// [`Int64Interner`] looks values up by offset.
const SAMPLE_ROWS: usize = 1 << 16;

/// Row marker for a null (no dictionary index).
const NULL_ID: u32 = u32::MAX;

/// Values per bit-packed group of the RLE / bit-packing hybrid encoding.
const GROUP: usize = 8;

/// Most groups in one bit-packed run (keeps the run header to one byte, as
/// parquet's own encoder does).
const MAX_GROUPS_PER_RUN: usize = 63;

/// A page's smallest and largest values are found by marking the ids it
/// holds when the dictionary has at most this many times fewer entries
/// than a page may have rows.
const PRESENT_SCAN_RATIO: usize = 4;

/// Shortest repetition written as an RLE run rather than bit-packed.
const MIN_RLE_RUN: usize = 8;

/// True when every array is `Dictionary(Int32, Utf8)`.
pub(crate) fn is_dictionary_strings(columns: &[ArrayRef]) -> bool {
    columns.iter().all(|c| {
        matches!(
            c.data_type(),
            DataType::Dictionary(k, v) if **k == DataType::Int32 && **v == DataType::Utf8
        )
    })
}

/// True when every array holds 64-bit integers that parquet writes as they
/// are to an INT64 column: `Int64` and timestamps of any unit.
pub(crate) fn is_int64_values(columns: &[ArrayRef]) -> bool {
    columns
        .iter()
        .all(|c| matches!(c.data_type(), DataType::Int64 | DataType::Timestamp(_, _)))
}

/// Encodes one column chunk of a row group from `columns` (the chunk's rows, in order,
/// each `Dictionary(Int32, Utf8)` for a BYTE_ARRAY column, or `Int64` / timestamps for an
/// INT64 one, see [`is_int64_values`]), for leaf column `descr` of a file written with `props`.
/// Returns the chunk's bytes (offsets in the returned metadata relative to 0, i.e. the bytes
/// start at the chunk's first page) and the `ColumnCloseResult` to hand to
/// `SerializedRowGroupWriter::append_column(&bytes, close)`;
/// `Ok(None)` when this path does not apply and the caller must use parquet's own writer.
/// `scratch` holds the chunk's row ids while it is encoded: one buffer reused for the chunks a
/// thread encodes saves touching fresh memory for each.
pub(crate) fn encode(
    descr: &ColumnDescPtr,
    props: &WriterProperties,
    columns: &[ArrayRef],
    scratch: &mut Vec<u32>,
) -> Result<Option<(Bytes, ColumnCloseResult)>> {
    let Some(config) = Config::new(descr, props, columns) else {
        return Ok(None);
    };
    let merged = if descr.physical_type() == PhysicalType::INT64 {
        merge_int64(descr, &config, columns, std::mem::take(scratch))?
    } else {
        merge(descr, &config, columns, std::mem::take(scratch))?
    };
    let Some(merged) = merged else {
        return Ok(None);
    };
    let r = write_chunk(descr, props, &config, &merged).map(Some);
    *scratch = merged.rows;
    r
}

/// What the properties ask of this column, once the path is known to apply.
struct Config {
    /// Whether the column is optional (has definition levels).
    nullable: bool,
    /// Compression of every page (UNCOMPRESSED or SNAPPY).
    codec: Compression,
    /// Which statistics are collected.
    statistics: EnabledStatistics,
    /// Whether data page headers carry statistics.
    page_header_statistics: bool,
    /// Whether the offset index is written.
    offset_index: bool,
    /// The dictionary page must stay below this many (PLAIN) bytes.
    dictionary_limit: usize,
    /// Longest value accepted (longer ones would need truncated statistics).
    max_value_len: usize,
    /// Most rows per data page.
    page_rows: usize,
    /// A data page is closed once its estimated size reaches this.
    page_bytes: usize,
}

impl Config {
    /// The configuration for `descr`, or `None` when this path does not apply.
    fn new(descr: &ColumnDescPtr, props: &WriterProperties, columns: &[ArrayRef]) -> Option<Self> {
        let kind_fits = match descr.physical_type() {
            PhysicalType::BYTE_ARRAY => {
                is_dictionary_strings(columns) && descr.sort_order() == SortOrder::UNSIGNED
            }
            PhysicalType::INT64 => {
                is_int64_values(columns) && descr.sort_order() == SortOrder::SIGNED
            }
            _ => false,
        };
        if columns.is_empty() || !kind_fits {
            return None;
        }
        let path = descr.path();
        let flat = path.parts().len() == 1
            && descr.max_rep_level() == 0
            && (0..=1).contains(&descr.max_def_level());
        if !flat
            || !props.dictionary_enabled(path)
            || props.bloom_filter_properties(path).is_some()
            || props.writer_version() != WriterVersion::PARQUET_1_0
            || props.content_defined_chunking().is_some()
        {
            return None;
        }
        let codec = props.compression(path);
        if !matches!(codec, Compression::UNCOMPRESSED | Compression::SNAPPY) {
            return None;
        }
        let statistics = props.statistics_enabled(path);
        let mut max_value_len = usize::MAX;
        if statistics != EnabledStatistics::None {
            if let Some(l) = props.statistics_truncate_length() {
                max_value_len = max_value_len.min(l);
            }
        }
        if statistics == EnabledStatistics::Page {
            if let Some(l) = props.column_index_truncate_length() {
                max_value_len = max_value_len.min(l);
            }
        }
        Some(Config {
            nullable: descr.max_def_level() == 1,
            codec,
            statistics,
            page_header_statistics: statistics == EnabledStatistics::Page
                && props.write_page_header_statistics(path),
            offset_index: !props.offset_index_disabled(),
            dictionary_limit: props.column_dictionary_page_size_limit(path),
            max_value_len,
            page_rows: props
                .data_page_row_count_limit()
                .clamp(1, i32::MAX as usize),
            page_bytes: props.column_data_page_size_limit(path),
        })
    }
}

/// The distinct values of a chunk's dictionary; the index is the dictionary id.
enum DictValues<'a> {
    /// BYTE_ARRAY values (strings), ordered as unsigned bytes.
    Bytes(Vec<&'a [u8]>),
    /// INT64 values (integers, timestamps), ordered as signed integers.
    Int64(Vec<i64>),
}

impl DictValues<'_> {
    fn len(&self) -> usize {
        match self {
            DictValues::Bytes(v) => v.len(),
            DictValues::Int64(v) => v.len(),
        }
    }

    /// The dictionary page's PLAIN encoding of the first `len` values.
    fn plain(&self, len: usize) -> Vec<u8> {
        match self {
            DictValues::Bytes(values) => {
                let values = &values[..len.min(values.len())];
                let len: usize = values.iter().map(|v| 4 + v.len()).sum();
                let mut plain = Vec::with_capacity(len);
                for v in values {
                    plain.extend_from_slice(&(v.len() as u32).to_le_bytes());
                    plain.extend_from_slice(v);
                }
                plain
            }
            DictValues::Int64(values) => values[..len.min(values.len())]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        }
    }

    /// Statistics with the values of ids `min` and `max` (exact), as
    /// parquet's column writer makes them for a page header or (`chunk`) a
    /// column chunk.
    fn statistics(&self, min: u32, max: u32, nulls: u64, chunk: bool) -> Result<Statistics> {
        let out_of_range = || ParquetError::General("internal error: id out of range".into());
        Ok(match self {
            DictValues::Bytes(values) => {
                let get = |id: u32| -> Result<ByteArray> {
                    let v = values.get(id as usize).ok_or_else(out_of_range)?;
                    Ok(ByteArray::from(v.to_vec()))
                };
                Statistics::ByteArray(
                    ValueStatistics::new(
                        Some(get(min)?),
                        Some(get(max)?),
                        None,
                        Some(nulls),
                        false,
                    )
                    .with_min_is_exact(true)
                    .with_max_is_exact(true),
                )
            }
            DictValues::Int64(values) => {
                let get = |id: u32| values.get(id as usize).copied().ok_or_else(out_of_range);
                Statistics::Int64(
                    ValueStatistics::new(
                        Some(get(min)?),
                        Some(get(max)?),
                        None,
                        Some(nulls),
                        false,
                    )
                    .with_backwards_compatible_min_max(chunk),
                )
            }
        })
    }

    /// The column index's bytes of the value of `id` (parquet's `as_bytes`).
    fn index_bytes(&self, id: u32) -> Vec<u8> {
        match self {
            DictValues::Bytes(values) => values.get(id as usize).map(|v| v.to_vec()),
            DictValues::Int64(values) => values.get(id as usize).map(|v| v.to_le_bytes().to_vec()),
        }
        .unwrap_or_default()
    }
}

/// The chunk's dictionary and its rows as indices into it.
struct Merged<'a> {
    /// Distinct values in first-appearance order; the index is the dictionary
    /// id. Past `dict_len`, the values of the rows from `plain_from` on, one
    /// entry per non-null row.
    values: DictValues<'a>,
    /// Entries of `values` that form the dictionary page.
    dict_len: usize,
    /// Dictionary id (or, from `plain_from` on, entry) of every row,
    /// `NULL_ID` for nulls.
    rows: Vec<u32>,
    /// Rows from here on are written in PLAIN pages: the dictionary was full
    /// (parquet's writer falls back the same way); `rows.len()` otherwise.
    plain_from: usize,
    /// Number of null rows.
    nulls: usize,
}

/// Builds the chunk dictionary from the input dictionaries (hashing each
/// used entry once per batch) and remaps every row's key; `None` when the
/// dictionary would be too large, holds too long a value, or is empty.
fn merge<'a>(
    descr: &ColumnDescPtr,
    config: &Config,
    columns: &'a [ArrayRef],
    mut rows: Vec<u32>,
) -> Result<Option<Merged<'a>>> {
    let mut values: Vec<&'a [u8]> = Vec::new();
    let mut lookup: HashMap<&'a [u8], u32> = HashMap::new();
    let mut plain_size = 0usize;
    let rows_len: usize = columns.iter().map(|c| c.len()).sum();
    if rows_len == 0 {
        return Ok(None);
    }
    rows.clear();
    rows.reserve(rows_len);
    let mut nulls = 0usize;
    // The last batch's dictionary (its buffers' addresses and length) and
    // the chunk id of each of its entries: batches read from one Parquet
    // column chunk share their dictionary, whose entries are then hashed
    // once for all of them.
    let mut last: Option<((usize, usize, usize), Vec<u32>)> = None;
    for column in columns {
        let Some(dict) = column.as_any().downcast_ref::<DictionaryArray<Int32Type>>() else {
            return Ok(None);
        };
        let Some(dict_values) = dict.values().as_any().downcast_ref::<StringArray>() else {
            return Ok(None);
        };
        if dict_values.null_count() > 0 {
            return Ok(None);
        }
        let keys = dict.keys();
        let batch_nulls = keys.null_count();
        if batch_nulls > 0 && !config.nullable {
            return Err(ParquetError::General(format!(
                "column {} is required but holds {} null value(s)",
                descr.path().string(),
                batch_nulls
            )));
        }
        nulls += batch_nulls;
        // Which entries of this batch's dictionary the non-null rows use
        // (one pass over the keys; a key out of range is an error).
        let key_values = keys.values();
        let mut used = vec![false; dict_values.len()];
        let mut out_of_range = None;
        match keys.nulls() {
            None => {
                for &k in key_values.iter() {
                    match used.get_mut(k as usize) {
                        Some(u) => *u = true,
                        None => out_of_range = Some(k),
                    }
                }
            }
            Some(valid) => {
                for (&k, v) in key_values.iter().zip(valid.iter()) {
                    if v {
                        match used.get_mut(k as usize) {
                            Some(u) => *u = true,
                            None => out_of_range = Some(k),
                        }
                    }
                }
            }
        }
        if let Some(key) = out_of_range {
            return Err(ParquetError::General(format!(
                "column {}: dictionary key {} out of range for {} values",
                descr.path().string(),
                key,
                dict_values.len()
            )));
        }
        // Chunk dictionary id of each used entry: each used string hashed
        // once per dictionary.
        let identity = (
            dict_values.values().as_ptr() as usize,
            dict_values.offsets().as_ptr() as usize,
            dict_values.len(),
        );
        let mut remap = match last.take() {
            Some((id, remap)) if id == identity => remap,
            _ => vec![NULL_ID; dict_values.len()],
        };
        for (k, slot) in remap.iter_mut().enumerate() {
            if !used[k] || *slot != NULL_ID {
                continue;
            }
            let value = dict_values.value(k).as_bytes();
            *slot = match lookup.get(value) {
                Some(&id) => id,
                None => {
                    plain_size += 4 + value.len();
                    if value.len() > config.max_value_len
                        || plain_size >= config.dictionary_limit
                        || values.len() >= i32::MAX as usize
                    {
                        return Ok(None);
                    }
                    let id = values.len() as u32;
                    values.push(value);
                    lookup.insert(value, id);
                    id
                }
            };
        }
        // Every row's id: a gather; null rows get `NULL_ID`.
        let start = rows.len();
        rows.extend(
            key_values
                .iter()
                .map(|&k| remap.get(k as usize).copied().unwrap_or(NULL_ID)),
        );
        if let Some(valid) = keys.nulls() {
            for i in valid.iter().enumerate().filter(|(_, v)| !v).map(|(i, _)| i) {
                rows[start + i] = NULL_ID;
            }
        }
        last = Some((identity, remap));
    }
    if values.is_empty() {
        return Ok(None);
    }
    Ok(Some(Merged {
        dict_len: values.len(),
        values: DictValues::Bytes(values),
        plain_from: rows.len(),
        rows,
        nulls,
    }))
}

/// The raw 64-bit values of an `Int64` or timestamp array.
fn int64_values(column: &ArrayRef) -> Option<&[i64]> {
    use arrow::array::AsArray;
    use arrow::datatypes::{
        Int64Type, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
        TimestampNanosecondType, TimestampSecondType,
    };
    Some(match column.data_type() {
        DataType::Int64 => column.as_primitive::<Int64Type>().values(),
        DataType::Timestamp(TimeUnit::Second, _) => {
            column.as_primitive::<TimestampSecondType>().values()
        }
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            column.as_primitive::<TimestampMillisecondType>().values()
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            column.as_primitive::<TimestampMicrosecondType>().values()
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            column.as_primitive::<TimestampNanosecondType>().values()
        }
        _ => return None,
    })
}

/// The distinct `i64` values of a chunk and their dictionary ids (ids in
/// first-appearance order, indices into `values`).
///
/// A value above every value before it (event times, mostly) is added
/// without a lookup and kept in `ascending`, sorted. A value below the
/// highest is looked up in an open-addressing table of the values that
/// arrived out of order (values in random order are all there), then in
/// `ascending` from the newest end (a late event time is near it, in
/// memory still in cache); a new one joins the table. Values within a
/// narrow range (small integers) are looked up by their offset in it
/// instead, without hashing.
struct Int64Interner {
    /// Every distinct value, by id.
    values: Vec<i64>,
    /// The range `base..base + by_offset.len()` and the id of each value
    /// in it (`NULL_ID`: not seen); values in it are nowhere else.
    base: i64,
    by_offset: Vec<u32>,
    /// The values that were above all before them, ascending.
    ascending: Vec<i64>,
    /// The id of each of `ascending`.
    ascending_ids: Vec<u32>,
    /// Dictionary id per slot of the table, `NULL_ID` when empty; a power
    /// of two long.
    slots: Vec<u32>,
    /// `64 - log2(slots.len())`: a value's slot is its hash shifted by it.
    shift: u32,
    /// Values in the table.
    in_table: usize,
}

impl Int64Interner {
    /// An interner whose values mostly lie within `sample_range` (the
    /// smallest and largest of the first values, see [`value_range`]): when
    /// that range is narrow, values in a range around it are looked up by
    /// offset. `capacity`: values expected (the dictionary and the PLAIN
    /// rows after it), reserved at once.
    fn new(sample_range: Option<(i64, i64)>, capacity: usize) -> Self {
        let (base, by_offset) = match sample_range {
            Some((min, max)) if (max as i128 - min as i128) < DIRECT_RANGE as i128 => {
                // Centred on the sample's range, within `i64`.
                let spare = (DIRECT_RANGE as i128 - (max as i128 - min as i128)) / 2;
                let base = (min as i128 - spare)
                    .clamp(i64::MIN as i128, i64::MAX as i128 - DIRECT_RANGE as i128)
                    as i64;
                (base, vec![NULL_ID; DIRECT_RANGE])
            }
            _ => (0, Vec::new()),
        };
        Int64Interner {
            values: Vec::with_capacity(capacity),
            base,
            by_offset,
            ascending: Vec::new(),
            ascending_ids: Vec::new(),
            slots: vec![NULL_ID; 1024],
            shift: 64 - 10,
            in_table: 0,
        }
    }

    /// Fibonacci hashing: the high bits of the product depend on every bit
    /// of the value (timestamps' low bits are often zero).
    fn slot(&self, v: i64) -> usize {
        ((v as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// The id of `v`, added when new and the dictionary holds fewer than
    /// `max` values; `None` when it is new and the dictionary is full.
    fn intern_within(&mut self, v: i64, max: usize) -> Option<u32> {
        let offset = (v as u64).wrapping_sub(self.base as u64);
        if let Some(slot) = self.by_offset.get_mut(offset as usize) {
            if *slot == NULL_ID {
                if self.values.len() >= max {
                    return None;
                }
                *slot = self.values.len() as u32;
                self.values.push(v);
            }
            return Some(*slot);
        }
        match self.ascending.last() {
            Some(&top) if v < top => {}
            Some(&top) if v == top => return self.ascending_ids.last().copied(),
            _ => {
                // Above every value so far: new.
                if self.values.len() >= max {
                    return None;
                }
                let id = self.values.len() as u32;
                self.values.push(v);
                self.ascending.push(v);
                self.ascending_ids.push(id);
                return Some(id);
            }
        }
        // The table first: values in random order are all there, and when
        // they are not, the table is small and in cache.
        let mask = self.slots.len() - 1;
        let mut s = self.slot(v);
        loop {
            let id = self.slots[s];
            if id == NULL_ID {
                break;
            }
            if self.values[id as usize] == v {
                return Some(id);
            }
            s = (s + 1) & mask;
        }
        if let Some(id) = self.find_ascending(v) {
            return Some(id);
        }
        if self.values.len() >= max {
            return None;
        }
        let id = self.values.len() as u32;
        self.values.push(v);
        self.slots[s] = id;
        self.in_table += 1;
        if self.in_table * 2 > self.slots.len() {
            self.grow();
        }
        Some(id)
    }

    /// The id of `v` among the ascending values, which end above it:
    /// galloping from where `v` would be if the values were evenly spread
    /// (event times nearly are), then a binary search.
    fn find_ascending(&self, v: i64) -> Option<u32> {
        let a = &self.ascending;
        let (&first, &top) = (a.first()?, a.last()?);
        let last = a.len() - 1;
        let guess = if v <= first || last < 2 {
            0
        } else {
            // `first < v < top`: a position in `1..last`.
            let back = (top as i128 - v as i128) * last as i128 / (top as i128 - first as i128);
            last - (back as usize).clamp(1, last - 1)
        };
        // `v`, if there, is in `a[lo..hi]`.
        let (lo, hi) = if a[guess] <= v {
            let (mut lo, mut step) = (guess, 1usize);
            loop {
                let i = lo + step;
                if i > last {
                    break (lo, last + 1);
                }
                if a[i] > v {
                    break (lo, i);
                }
                lo = i;
                step *= 2;
            }
        } else {
            let (mut hi, mut step) = (guess, 1usize);
            loop {
                if step > hi {
                    break (0, hi);
                }
                let i = hi - step;
                if a[i] <= v {
                    break (i, hi);
                }
                hi = i;
                step *= 2;
            }
        };
        let k = a[lo..hi].binary_search(&v).ok()?;
        self.ascending_ids.get(lo + k).copied()
    }

    /// Doubles the table and places its values again.
    fn grow(&mut self) {
        let len = self.slots.len() * 2;
        let old = std::mem::replace(&mut self.slots, vec![NULL_ID; len]);
        self.shift -= 1;
        let mask = len - 1;
        for id in old.into_iter().filter(|&id| id != NULL_ID) {
            let mut s = self.slot(self.values[id as usize]);
            while self.slots[s] != NULL_ID {
                s = (s + 1) & mask;
            }
            self.slots[s] = id;
        }
    }
}

/// Interns the rows of `Int64` / timestamp `columns` into the chunk
/// dictionary. Once the dictionary page is full, the remaining rows are
/// kept for PLAIN pages (as parquet's writer falls back). `None` when not
/// even the first value fits the dictionary page or every row is null.
fn merge_int64<'a>(
    descr: &ColumnDescPtr,
    config: &Config,
    columns: &'a [ArrayRef],
    mut rows: Vec<u32>,
) -> Result<Option<Merged<'a>>> {
    let rows_len: usize = columns.iter().map(|c| c.len()).sum();
    if rows_len == 0 {
        return Ok(None);
    }
    // The most values whose PLAIN dictionary stays within the page limit.
    let max_entries = (config.dictionary_limit / 8).min(i32::MAX as usize);
    // The range of the first batch's first valid values chooses how values
    // are looked up.
    let sample_range = columns.first().and_then(|first| {
        let values = int64_values(first).unwrap_or(&[]);
        match first.nulls().filter(|n| n.null_count() > 0) {
            None => value_range(values.iter().copied().take(SAMPLE_ROWS)),
            Some(valid) => value_range(
                valid
                    .valid_indices()
                    .take(SAMPLE_ROWS)
                    .filter_map(|i| values.get(i).copied()),
            ),
        }
    });
    let mut interner = Int64Interner::new(sample_range, rows_len);
    rows.clear();
    rows.reserve(rows_len);
    let mut nulls = 0usize;
    // The row from which on values are not interned but kept for PLAIN
    // pages, and the dictionary's size then.
    let mut plain_from: Option<(usize, usize)> = None;
    // The previous row's value and id: equal neighbours cost no lookup.
    let mut last: Option<(i64, u32)> = None;
    for column in columns {
        let Some(values) = int64_values(column) else {
            return Ok(None);
        };
        let batch_nulls = column.null_count();
        if batch_nulls > 0 && !config.nullable {
            return Err(ParquetError::General(format!(
                "column {} is required but holds {} null value(s)",
                descr.path().string(),
                batch_nulls
            )));
        }
        nulls += batch_nulls;
        let valid = column.nulls().filter(|n| n.null_count() > 0);
        for (i, &v) in values.iter().enumerate() {
            if valid.is_some_and(|n| n.is_null(i)) {
                rows.push(NULL_ID);
                continue;
            }
            let id = match (plain_from, last) {
                (None, Some((lv, id))) if lv == v => id,
                (None, _) => match interner.intern_within(v, max_entries) {
                    Some(id) => {
                        last = Some((v, id));
                        id
                    }
                    None => {
                        plain_from = Some((rows.len(), interner.values.len()));
                        interner.values.push(v);
                        (interner.values.len() - 1) as u32
                    }
                },
                (Some(_), _) => {
                    interner.values.push(v);
                    (interner.values.len() - 1) as u32
                }
            };
            rows.push(id);
        }
        if interner.values.len() >= u32::MAX as usize - 1 {
            return Ok(None);
        }
    }
    let (plain_from, dict_len) = plain_from.unwrap_or((rows.len(), interner.values.len()));
    if nulls == rows_len || dict_len == 0 {
        return Ok(None);
    }
    Ok(Some(Merged {
        values: DictValues::Int64(interner.values),
        dict_len,
        plain_from,
        rows,
        nulls,
    }))
}

/// The smallest and the largest of `values`; `None` when there are none.
fn value_range(values: impl Iterator<Item = i64>) -> Option<(i64, i64)> {
    values.fold(None, |range, v| match range {
        None => Some((v, v)),
        Some((min, max)) => Some((min.min(v), max.max(v))),
    })
}

/// Number of bits needed to store `max`.
fn bit_width(max: u64) -> u8 {
    (64 - max.leading_zeros()) as u8
}

/// parquet's upper bound of the RLE-encoded size of `n` values of `width` bits
/// (`RleEncoder::max_buffer_size`), which its writer compares with the data
/// page size limit.
fn max_rle_size(width: u8, n: usize) -> usize {
    let runs = n.div_ceil(GROUP);
    let width = width as usize;
    (runs + runs * width).max(runs * (1 + width.div_ceil(8)))
}

/// The fewest rows `n` (at least 1) whose `size(n)` reaches `bytes`;
/// `usize::MAX` when not even `max_rows` do (`size` grows with `n`).
fn rows_to_fill(bytes: usize, max_rows: usize, size: impl Fn(usize) -> usize) -> usize {
    if size(max_rows.max(1)) < bytes {
        return usize::MAX;
    }
    // The answer lies in `lo..=hi`.
    let (mut lo, mut hi) = (1usize, max_rows.max(1));
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if size(mid) >= bytes {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// The ids of the smallest and the largest key among `ids` (the first of
/// equal keys); `(NULL_ID, NULL_ID)` when `ids` is empty.
fn min_max_by_key<'k, K: Ord + Copy + 'k>(
    ids: &[u32],
    key: impl Fn(usize) -> Option<&'k K>,
) -> Result<(u32, u32)> {
    let out_of_range = || ParquetError::General("internal error: id out of range".into());
    let Some((&first, rest)) = ids.split_first() else {
        return Ok((NULL_ID, NULL_ID));
    };
    let k = *key(first as usize).ok_or_else(out_of_range)?;
    let (mut min, mut max) = ((k, first), (k, first));
    // Runs of one value (sorted or repeated columns) are looked up once.
    let mut last = first;
    for &id in rest {
        if id == last {
            continue;
        }
        last = id;
        let k = *key(id as usize).ok_or_else(out_of_range)?;
        if k < min.0 {
            min = (k, id);
        } else if k > max.0 {
            max = (k, id);
        }
    }
    Ok((min.1, max.1))
}

/// The ids of page `page`'s smallest and largest key among `ids`: by
/// [`min_max_present`] when `seen` was allocated for it (a small
/// dictionary), else by [`min_max_by_key`].
fn page_min_max<'k, K: Ord + Copy + 'k>(
    ids: &[u32],
    page: u32,
    seen: &mut [u32],
    key: impl Fn(usize) -> Option<&'k K>,
) -> Result<(u32, u32)> {
    if seen.is_empty() {
        min_max_by_key(ids, key)
    } else {
        min_max_present(ids, page, seen, key)
    }
}

/// The ids of the smallest and the largest key among `ids` (`(NULL_ID,
/// NULL_ID)` when empty), for a dictionary whose entries have distinct keys:
/// each row marks its id in `seen` with `page` (a store per row, no
/// comparison), then the marked ids are compared once each. Cheaper than
/// [`min_max_by_key`] when the dictionary (`seen.len()`) is much smaller than
/// `ids`.
fn min_max_present<'k, K: Ord + Copy + 'k>(
    ids: &[u32],
    page: u32,
    seen: &mut [u32],
    key: impl Fn(usize) -> Option<&'k K>,
) -> Result<(u32, u32)> {
    let out_of_range = || ParquetError::General("internal error: id out of range".into());
    for &id in ids {
        *seen.get_mut(id as usize).ok_or_else(out_of_range)? = page;
    }
    let mut min_max: Option<((K, u32), (K, u32))> = None;
    for (id, _) in seen.iter().enumerate().filter(|(_, &p)| p == page) {
        let k = *key(id).ok_or_else(out_of_range)?;
        let id = id as u32;
        min_max = Some(match min_max {
            None => ((k, id), (k, id)),
            Some((min, max)) => (
                if k < min.0 { (k, id) } else { min },
                if k > max.0 { (k, id) } else { max },
            ),
        });
    }
    Ok(min_max.map_or((NULL_ID, NULL_ID), |(min, max)| (min.1, max.1)))
}

/// `ids` as the range of ids they are when consecutive, first to last.
fn consecutive(ids: &[u32]) -> Option<std::ops::Range<usize>> {
    let (&first, &last) = (ids.first()?, ids.last()?);
    let (first, last) = (first as usize, last as usize);
    (last.checked_sub(first)? + 1 == ids.len()).then_some(first..last + 1)
}

/// The ids of the smallest and the largest of `values`, the values of ids
/// `first..` (the first of equal ones); `(NULL_ID, NULL_ID)` when empty.
fn min_max_ids(first: usize, values: &[i64]) -> (u32, u32) {
    let (Some(&min), Some(&max)) = (values.iter().min(), values.iter().max()) else {
        return (NULL_ID, NULL_ID);
    };
    let at = |x: i64| values.iter().position(|&v| v == x).unwrap_or(0) + first;
    (at(min) as u32, at(max) as u32)
}

/// Per-page statistics of the rows being collected.
struct PageStats {
    /// Dictionary id of the smallest non-null value.
    min_id: u32,
    /// Dictionary id of the largest non-null value.
    max_id: u32,
    /// Null rows.
    nulls: u64,
    /// Bytes of the non-null values (unencoded).
    value_bytes: i64,
}

/// Writes the dictionary page and the data pages of `merged`; returns the
/// chunk and its metadata.
fn write_chunk(
    descr: &ColumnDescPtr,
    props: &WriterProperties,
    config: &Config,
    merged: &Merged<'_>,
) -> Result<(Bytes, ColumnCloseResult)> {
    // Ids index every entry of `values` (past the dictionary: PLAIN rows).
    let dict_len = merged.values.len();
    // Strings are ordered (unsigned byte-wise) by their sort rank when
    // sorting the dictionary costs less than comparing each page's
    // distinct values (at most two comparisons per row), else directly.
    let sort_cost = dict_len.saturating_mul(dict_len.max(2).ilog2() as usize);
    let rank: Option<Vec<u32>> = match &merged.values {
        DictValues::Bytes(values) if sort_cost < 2 * merged.rows.len() => {
            let mut order: Vec<u32> = (0..dict_len as u32).collect();
            order.sort_unstable_by(|&a, &b| values[a as usize].cmp(values[b as usize]));
            let mut rank = vec![0u32; dict_len];
            for (r, &id) in order.iter().enumerate() {
                rank[id as usize] = r as u32;
            }
            Some(rank)
        }
        _ => None,
    };
    let less = |a: u32, b: u32| -> bool {
        match (&merged.values, &rank) {
            (DictValues::Int64(values), _) => values[a as usize] < values[b as usize],
            (DictValues::Bytes(_), Some(rank)) => rank[a as usize] < rank[b as usize],
            (DictValues::Bytes(values), None) => values[a as usize] < values[b as usize],
        }
    };
    // Unencoded bytes of each value (recorded for BYTE_ARRAY columns only).
    let value_len: Vec<i64> = match &merged.values {
        DictValues::Bytes(values) => values.iter().map(|v| v.len() as i64).collect(),
        DictValues::Int64(_) => Vec::new(),
    };
    let byte_array = !value_len.is_empty();
    // The page each id was last seen in: unranked strings compare each
    // distinct value once per page; with a dictionary much smaller than a
    // page, the page's smallest and largest are found among the ids it
    // marked (see `min_max_present`).
    let mut seen_in_page = match (&merged.values, &rank) {
        (DictValues::Bytes(_), None) => vec![u32::MAX; dict_len],
        _ if dict_len.saturating_mul(PRESENT_SCAN_RATIO) <= config.page_rows => {
            vec![u32::MAX; dict_len]
        }
        _ => Vec::new(),
    };
    let out_of_range = || ParquetError::General("internal error: id out of range".into());
    let mut chunk_min_max: Option<(u32, u32)> = None;
    let width = bit_width(merged.dict_len.max(1) as u64 - 1);
    let int64_values: &[i64] = match &merged.values {
        DictValues::Int64(values) => values,
        DictValues::Bytes(_) => &[],
    };
    let mut plain_pages = 0i32;

    let mut sink = TrackedWrite::new(Vec::new());
    let mut writer = SerializedPageWriter::new(&mut sink);
    let mut total_compressed = 0u64;
    let mut total_uncompressed = 0u64;
    let mut bytes_written = 0u64;

    // Dictionary page: PLAIN (a string as a 4-byte length and its bytes).
    let plain = merged.values.plain(merged.dict_len);
    let uncompressed = plain.len();
    let dict_page = Page::DictionaryPage {
        buf: compress(config.codec, plain)?,
        num_values: merged.dict_len as u32,
        encoding: props.dictionary_page_encoding(),
        is_sorted: false,
    };
    let spec = writer.write_page(CompressedPage::new(dict_page, uncompressed))?;
    let dictionary_offset = spec.offset as i64;
    total_compressed += spec.compressed_size as u64;
    total_uncompressed += spec.uncompressed_size as u64;
    bytes_written += spec.bytes_written;

    let collect_stats = config.statistics != EnabledStatistics::None;
    let max_def = descr.max_def_level();
    let mut chunk_def_hist = if collect_stats {
        LevelHistogram::try_new(max_def)
    } else {
        None
    };
    let mut column_index = ColumnIndexBuilder::new(descr.physical_type());
    if config.statistics != EnabledStatistics::Page {
        column_index.to_invalid();
    }
    let mut offset_index = config.offset_index.then(OffsetIndexBuilder::new);
    let (mut ascending, mut descending) = (true, true);
    let mut last_min_max: Option<(u32, u32)> = None;
    let mut page_number = 0u32;
    let mut data_page_offset: Option<i64> = None;
    let mut pages = 0i32;
    let mut total_value_bytes = 0i64;

    // Non-null rows that close a page: its estimated size then reaches
    // `page_bytes` (PLAIN: 8 bytes a value; else parquet's RLE bound).
    let plain_cap = config.page_bytes.div_ceil(8).max(1);
    let dict_cap = rows_to_fill(config.page_bytes, config.page_rows, |n| {
        1 + max_rle_size(width, n)
    });
    let mut non_null: Vec<u32> = Vec::new();
    let mut levels: Vec<u32> = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut start = 0usize;
    let rows = &merged.rows;
    while start < rows.len() {
        page_number += 1;
        // A page holds dictionary ids or (from `plain_from` on) PLAIN values.
        let plain_page = start >= merged.plain_from;
        let page_end = if plain_page {
            rows.len()
        } else {
            merged.plain_from
        };
        // Collect one page: at most `page_rows` rows, closed at the
        // non-null row that fills it.
        let limit = (page_end - start).min(config.page_rows.max(1));
        let cap = if plain_page { plain_cap } else { dict_cap };
        let end = if merged.nulls == 0 {
            start + limit.min(cap)
        } else {
            let mut filled = 0usize;
            let mut end = start;
            while end < start + limit {
                end += 1;
                if rows[end - 1] != NULL_ID {
                    filled += 1;
                    if filled == cap {
                        break;
                    }
                }
            }
            end
        };
        let page = &rows[start..end];
        let page_rows = page.len();
        start = end;
        let nulls = if merged.nulls == 0 {
            0
        } else {
            page.iter().filter(|&&id| id == NULL_ID).count()
        };
        let indices: &[u32] = if nulls == 0 {
            page
        } else {
            non_null.clear();
            non_null.extend(page.iter().copied().filter(|&id| id != NULL_ID));
            &non_null
        };
        // A PLAIN page's values are consecutive entries of `values`.
        let plain_values = if plain_page {
            consecutive(indices).and_then(|r| int64_values.get(r.clone()).map(|v| (r.start, v)))
        } else {
            None
        };
        let (min_id, max_id) = match (&merged.values, &rank, plain_values) {
            (_, _, Some((first, values))) => min_max_ids(first, values),
            (DictValues::Int64(values), _, None) => {
                page_min_max(indices, page_number, &mut seen_in_page, |id| values.get(id))?
            }
            (DictValues::Bytes(_), Some(rank), None) => {
                page_min_max(indices, page_number, &mut seen_in_page, |id| rank.get(id))?
            }
            (DictValues::Bytes(_), None, None) => {
                // Each distinct id's value compared once per page.
                let mut min_max = (NULL_ID, NULL_ID);
                for &id in indices {
                    let seen = seen_in_page.get_mut(id as usize).ok_or_else(out_of_range)?;
                    if *seen != page_number {
                        *seen = page_number;
                        if min_max.0 == NULL_ID {
                            min_max = (id, id);
                        } else if less(id, min_max.0) {
                            min_max.0 = id;
                        } else if less(min_max.1, id) {
                            min_max.1 = id;
                        }
                    }
                }
                min_max
            }
        };
        let value_bytes: i64 = if byte_array {
            indices
                .iter()
                .map(|&id| value_len.get(id as usize).copied().unwrap_or(0))
                .sum()
        } else {
            0
        };
        let stats = PageStats {
            min_id,
            max_id,
            nulls: nulls as u64,
            value_bytes,
        };

        // Encode it: definition levels (length-prefixed), bit width, indices.
        buf.clear();
        if config.nullable {
            buf.extend_from_slice(&[0; 4]);
            if nulls == 0 && page_rows >= MIN_RLE_RUN {
                // What `encode_hybrid` makes of `page_rows` ones.
                write_rle_run(1, page_rows, 1, &mut buf);
            } else {
                levels.clear();
                levels.extend(page.iter().map(|&id| u32::from(id != NULL_ID)));
                encode_hybrid(&levels, 1, &mut buf);
            }
            let len = (buf.len() - 4) as u32;
            buf[..4].copy_from_slice(&len.to_le_bytes());
        }
        if let Some((_, values)) = plain_values {
            let at = buf.len();
            buf.resize(at + 8 * values.len(), 0);
            for (out, v) in buf[at..].chunks_exact_mut(8).zip(values) {
                out.copy_from_slice(&v.to_le_bytes());
            }
        } else if plain_page {
            for &id in indices {
                let v = int64_values.get(id as usize).ok_or_else(out_of_range)?;
                buf.extend_from_slice(&v.to_le_bytes());
            }
        } else {
            buf.push(width);
            encode_hybrid(indices, width, &mut buf);
        }
        let uncompressed = buf.len();

        let null_page = indices.is_empty();
        let min_max = if null_page {
            None
        } else {
            chunk_min_max = Some(match chunk_min_max {
                None => (stats.min_id, stats.max_id),
                Some((min, max)) => (
                    if less(stats.min_id, min) {
                        stats.min_id
                    } else {
                        min
                    },
                    if less(max, stats.max_id) {
                        stats.max_id
                    } else {
                        max
                    },
                ),
            });
            Some((stats.min_id, stats.max_id))
        };
        let header_statistics = match min_max {
            Some((min, max)) if config.page_header_statistics => {
                Some(merged.values.statistics(min, max, stats.nulls, false)?)
            }
            _ => None,
        };
        let page = Page::DataPage {
            buf: compress(config.codec, std::mem::take(&mut buf))?,
            num_values: page_rows as u32,
            encoding: if plain_page {
                Encoding::PLAIN
            } else {
                props.dictionary_data_page_encoding()
            },
            def_level_encoding: Encoding::RLE,
            rep_level_encoding: Encoding::RLE,
            statistics: header_statistics,
        };
        let spec = writer.write_page(CompressedPage::new(page, uncompressed))?;
        data_page_offset.get_or_insert(spec.offset as i64);
        total_compressed += spec.compressed_size as u64;
        total_uncompressed += spec.uncompressed_size as u64;
        bytes_written += spec.bytes_written;
        pages += 1;
        if plain_page {
            plain_pages += 1;
        }
        total_value_bytes += stats.value_bytes;

        let page_def_hist = if collect_stats && config.nullable {
            Some(LevelHistogram::from(vec![
                stats.nulls as i64,
                (page_rows as u64 - stats.nulls) as i64,
            ]))
        } else {
            None
        };
        if let (Some(chunk), Some(page)) = (chunk_def_hist.as_mut(), page_def_hist.as_ref()) {
            chunk.add(page);
        }
        if column_index.valid() {
            match min_max {
                None => column_index.append(true, vec![], vec![], stats.nulls as i64),
                Some((min, max)) => {
                    if let Some((last_min, last_max)) = last_min_max {
                        if less(stats.min_id, last_min) || less(stats.max_id, last_max) {
                            ascending = false;
                        }
                        if less(last_min, stats.min_id) || less(last_max, stats.max_id) {
                            descending = false;
                        }
                    }
                    last_min_max = Some((stats.min_id, stats.max_id));
                    column_index.append(
                        false,
                        merged.values.index_bytes(min),
                        merged.values.index_bytes(max),
                        stats.nulls as i64,
                    );
                }
            }
            column_index.append_histograms(&None, &page_def_hist);
        }
        if let Some(builder) = offset_index.as_mut() {
            builder.append_offset_and_size(spec.offset as i64, spec.compressed_size as i32);
            builder.append_row_count(page_rows as i64);
            builder.append_unencoded_byte_array_data_bytes(byte_array.then_some(stats.value_bytes));
        }
    }
    writer.close()?;
    let bytes = Bytes::from(sink.into_inner()?);

    let mut encodings = vec![
        Encoding::RLE,
        props.dictionary_data_page_encoding(),
        props.dictionary_page_encoding(),
    ];
    let mut encoding_stats = vec![
        PageEncodingStats {
            page_type: PageType::DICTIONARY_PAGE,
            encoding: props.dictionary_page_encoding(),
            count: 1,
        },
        PageEncodingStats {
            page_type: PageType::DATA_PAGE,
            encoding: props.dictionary_data_page_encoding(),
            count: pages - plain_pages,
        },
    ];
    if plain_pages > 0 {
        encodings.push(Encoding::PLAIN);
        encoding_stats.push(PageEncodingStats {
            page_type: PageType::DATA_PAGE,
            encoding: Encoding::PLAIN,
            count: plain_pages,
        });
    }
    let mut builder = ColumnChunkMetaData::builder(descr.clone())
        .set_compression(config.codec)
        .set_encodings_mask(EncodingMask::new_from_encodings(encodings.iter()))
        .set_page_encoding_stats(encoding_stats)
        .set_total_compressed_size(total_compressed as i64)
        .set_total_uncompressed_size(total_uncompressed as i64)
        .set_num_values(rows.len() as i64)
        .set_data_page_offset(data_page_offset.unwrap_or(0))
        .set_dictionary_page_offset(Some(dictionary_offset));
    if let (true, Some((first, last))) = (collect_stats, chunk_min_max) {
        let statistics = merged
            .values
            .statistics(first, last, merged.nulls as u64, true)?;
        builder = builder
            .set_statistics(statistics)
            .set_unencoded_byte_array_data_bytes(byte_array.then_some(total_value_bytes))
            .set_repetition_level_histogram(None)
            .set_definition_level_histogram(chunk_def_hist);
    }
    let metadata = builder.build()?;
    column_index.set_boundary_order(match (ascending, descending) {
        (true, _) => BoundaryOrder::ASCENDING,
        (false, true) => BoundaryOrder::DESCENDING,
        (false, false) => BoundaryOrder::UNORDERED,
    });
    let column_index = if column_index.valid() {
        Some(column_index.build()?)
    } else {
        None
    };
    let close = ColumnCloseResult {
        bytes_written,
        rows_written: rows.len() as u64,
        metadata,
        bloom_filter: None,
        column_index,
        offset_index: offset_index.map(|b| b.build()),
    };
    Ok((bytes, close))
}

/// Compresses one page's bytes with `codec` (UNCOMPRESSED or SNAPPY).
fn compress(codec: Compression, data: Vec<u8>) -> Result<Bytes> {
    match codec {
        Compression::UNCOMPRESSED => Ok(Bytes::from(data)),
        Compression::SNAPPY => snap::raw::Encoder::new()
            .compress_vec(&data)
            .map(Bytes::from)
            .map_err(|e| ParquetError::General(format!("snappy compression failed: {e}"))),
        other => Err(ParquetError::General(format!(
            "internal error: unsupported compression {other:?}"
        ))),
    }
}

/// Appends `values` (each below `2^width`) to `out` in parquet's RLE /
/// bit-packing hybrid encoding, without a length prefix: repetitions of at
/// least [`MIN_RLE_RUN`] values become RLE runs, everything else is
/// bit-packed in groups of [`GROUP`] (the last group zero-padded).
fn encode_hybrid(values: &[u32], width: u8, out: &mut Vec<u8>) {
    if values.is_empty() {
        return;
    }
    if width == 0 {
        // Every value is 0: one RLE run without value bytes.
        write_rle_run(0, values.len(), width, out);
        return;
    }
    // Values from `literal` on are not written yet.
    let mut literal = 0usize;
    let mut i = 0usize;
    while i < values.len() {
        i = skip_short_runs(values, i);
        if i >= values.len() {
            break;
        }
        let v = values[i];
        let mut j = i + 1;
        while j < values.len() && values[j] == v {
            j += 1;
        }
        // A bit-packed run before an RLE run must hold whole groups, so
        // the repetition lends it values up to a group boundary.
        let pad = (GROUP - (i - literal) % GROUP) % GROUP;
        if j - i >= pad + MIN_RLE_RUN {
            let run_start = i + pad;
            write_bit_packed(&values[literal..run_start], width, out);
            write_rle_run(v, j - run_start, width, out);
            literal = j;
        }
        i = j;
    }
    write_bit_packed(&values[literal..], width, out);
}

/// The first position from `from` on where a repetition of at least
/// [`MIN_RLE_RUN`] values may start: positions are skipped eight at a time
/// while none of them equals the value seven places on (a run that starts
/// at a skipped position is shorter than [`MIN_RLE_RUN`], and so is what is
/// left of it at the position returned). Values change often in most
/// columns; this compares them with no branch per value.
fn skip_short_runs(values: &[u32], from: usize) -> usize {
    const SPAN: usize = MIN_RLE_RUN - 1;
    let mut i = from;
    while let Some(window) = values.get(i..i + GROUP + SPAN) {
        let repeats = window[..GROUP]
            .iter()
            .zip(&window[SPAN..])
            .fold(false, |any, (a, b)| any | (a == b));
        if repeats {
            break;
        }
        i += GROUP;
    }
    i
}

/// Writes an unsigned LEB128 varint.
fn write_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes one RLE run: `count` times `value`.
fn write_rle_run(value: u32, count: usize, width: u8, out: &mut Vec<u8>) {
    write_varint((count as u64) << 1, out);
    let bytes = value.to_le_bytes();
    out.extend_from_slice(&bytes[..(width as usize).div_ceil(8)]);
}

/// Writes `values` as bit-packed runs of `width` bits (at most
/// [`MAX_GROUPS_PER_RUN`] groups of [`GROUP`] values each, the last group
/// padded with zeros), as parquet's RLE / bit-packing hybrid encoding
/// packs them: least significant bit first.
fn write_bit_packed(values: &[u32], width: u8, out: &mut Vec<u8>) {
    macro_rules! packed_with {
        ($($w:literal)*) => {
            match width {
                $($w => write_bit_packed_as::<$w>(values, out),)*
                _ => {}
            }
        };
    }
    packed_with!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29
        30 31 32);
}

/// [`write_bit_packed`] for a width known at compile time: each group of
/// eight values becomes `W` bytes with constant shifts.
fn write_bit_packed_as<const W: u32>(values: &[u32], out: &mut Vec<u8>) {
    for run in values.chunks(MAX_GROUPS_PER_RUN * GROUP) {
        let groups = run.len().div_ceil(GROUP);
        write_varint(((groups as u64) << 1) | 1, out);
        let at = out.len();
        out.resize(at + groups * W as usize, 0);
        let packed = &mut out[at..];
        let mut chunks = run.chunks_exact(GROUP);
        for (g, group) in chunks.by_ref().enumerate() {
            let group: &[u32; GROUP] = group.try_into().unwrap_or(&[0; GROUP]);
            pack_group::<W>(group, &mut packed[g * W as usize..(g + 1) * W as usize]);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut group = [0u32; GROUP];
            group[..rest.len()].copy_from_slice(rest);
            let g = groups - 1;
            pack_group::<W>(&group, &mut packed[g * W as usize..(g + 1) * W as usize]);
        }
    }
}

/// Packs eight values of `W` bits into `out` (`W` bytes).
#[inline(always)]
fn pack_group<const W: u32>(group: &[u32; GROUP], out: &mut [u8]) {
    let mask: u128 = (1u128 << W) - 1;
    if W <= 16 {
        // All eight fit in 128 bits.
        let mut acc: u128 = 0;
        for (k, &v) in group.iter().enumerate() {
            acc |= (u128::from(v) & mask) << (k as u32 * W);
        }
        out.copy_from_slice(&acc.to_le_bytes()[..W as usize]);
    } else {
        // Two halves of four, joined into the group's 8 * W bits.
        let (mut lo, mut hi) = (0u128, 0u128);
        for k in 0..GROUP / 2 {
            lo |= (u128::from(group[k]) & mask) << (k as u32 * W);
            hi |= (u128::from(group[k + GROUP / 2]) & mask) << (k as u32 * W);
        }
        let half = 4 * W;
        let (low, high) = if half >= 128 {
            (lo, hi)
        } else {
            (lo | (hi << half), hi >> (128 - half))
        };
        out[..16].copy_from_slice(&low.to_le_bytes());
        out[16..].copy_from_slice(&high.to_le_bytes()[..W as usize - 16]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow::array::{Int32Array, Int64Array, RecordBatch};
    use arrow::compute::{cast, concat};
    use arrow::datatypes::{Field, Schema, SchemaRef};
    use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
    use parquet::arrow::arrow_writer::compute_leaves;
    use parquet::arrow::{ArrowSchemaConverter, ArrowWriter};
    use parquet::basic::ZstdLevel;
    use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData};
    use parquet::file::page_index::column_index::ColumnIndexMetaData;
    use parquet::file::properties::ReaderProperties;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::file::serialized_reader::ReadOptionsBuilder;

    /// A `Dictionary(Int32, Utf8)` array.
    fn dict(values: &[&str], keys: Vec<Option<i32>>) -> ArrayRef {
        let keys = Int32Array::from(keys);
        let values: ArrayRef = Arc::new(StringArray::from(values.to_vec()));
        Arc::new(DictionaryArray::<Int32Type>::try_new(keys, values).expect("dictionary"))
    }

    /// Schema of the test files: an int column and the string column `s`.
    fn schema(nullable: bool, string_type: DataType) -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("i", DataType::Int64, false),
            Field::new("s", string_type, nullable),
        ]))
    }

    fn dict_type() -> DataType {
        DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
    }

    /// Writes `columns` as one row group with `encode` for the strings (and
    /// parquet's own writer for an int column); also returns the close result
    /// of `encode` and the one of parquet's `ArrowColumnWriter` for the same
    /// string leaves.
    fn write_encoded(
        nullable: bool,
        props: &WriterProperties,
        columns: &[ArrayRef],
    ) -> (Bytes, ColumnCloseResult, ColumnCloseResult) {
        let schema = schema(nullable, dict_type());
        let (mut file, factory) =
            ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props.clone()))
                .expect("writer")
                .into_serialized_writer()
                .expect("serialized writer");
        let mut writers = factory.create_column_writers(0).expect("column writers");
        assert_eq!(writers.len(), 2);
        let mut string_writer = writers.pop().expect("string writer");
        let mut int_writer = writers.pop().expect("int writer");
        let mut row = 0i64;
        for c in columns {
            let ints: ArrayRef = Arc::new(Int64Array::from_iter_values(row..row + c.len() as i64));
            row += c.len() as i64;
            for leaf in compute_leaves(schema.field(0), &ints).expect("leaves") {
                int_writer.write(&leaf).expect("write int");
            }
            for leaf in compute_leaves(schema.field(1), c).expect("leaves") {
                string_writer.write(&leaf).expect("write string");
            }
        }
        let reference = string_writer.close().expect("close").close().clone();
        let descr = file.schema_descr().column(1);
        let props = file.properties().clone();
        let (bytes, close) = encode(&descr, &props, columns, &mut Vec::new())
            .expect("encode")
            .expect("encode applies");
        let mut rg = file.next_row_group().expect("row group");
        int_writer
            .close()
            .expect("close int")
            .append_to_row_group(&mut rg)
            .expect("append int");
        rg.append_column(&bytes, close.clone())
            .expect("append strings");
        rg.close().expect("close row group");
        let out = file.into_inner().expect("finish");
        (Bytes::from(out), close, reference)
    }

    /// Writes the same rows (strings cast to Utf8) with plain `ArrowWriter`.
    fn write_reference(nullable: bool, props: &WriterProperties, columns: &[ArrayRef]) -> Bytes {
        let schema = schema(nullable, DataType::Utf8);
        let refs: Vec<&dyn Array> = columns.iter().map(|c| c.as_ref()).collect();
        let strings = cast(&concat(&refs).expect("concat"), &DataType::Utf8).expect("cast");
        let ints: ArrayRef = Arc::new(Int64Array::from_iter_values(0..strings.len() as i64));
        let batch = RecordBatch::try_new(schema.clone(), vec![ints, strings]).expect("batch");
        let mut w = ArrowWriter::try_new(Vec::new(), schema, Some(props.clone())).expect("writer");
        w.write(&batch).expect("write");
        Bytes::from(w.into_inner().expect("finish"))
    }

    /// Reads a file's rows, the string column as Utf8.
    fn read(file: &Bytes) -> (Vec<i64>, StringArray, Arc<ParquetMetaData>) {
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
        let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(file.clone(), options)
            .expect("reader");
        let metadata = builder.metadata().clone();
        let mut ints = Vec::new();
        let mut strings: Vec<ArrayRef> = Vec::new();
        for batch in builder.build().expect("build") {
            let batch = batch.expect("batch");
            let i = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("ints");
            ints.extend(i.values().iter().copied());
            strings.push(cast(batch.column(1), &DataType::Utf8).expect("cast"));
        }
        let refs: Vec<&dyn Array> = strings.iter().map(|c| c.as_ref()).collect();
        let strings = concat(&refs).expect("concat");
        let strings = strings
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("utf8")
            .clone();
        (ints, strings, metadata)
    }

    /// Writes `columns` both ways and checks rows, chunk metadata and page index.
    /// Returns the number of data pages written by `encode`.
    fn check(nullable: bool, props: &WriterProperties, columns: &[ArrayRef]) -> usize {
        let (ours, close, arrow_close) = write_encoded(nullable, props, columns);
        let reference = write_reference(nullable, props, columns);
        let (our_ints, our_strings, our_meta) = read(&ours);
        let (ref_ints, ref_strings, ref_meta) = read(&reference);
        assert_eq!(our_ints, ref_ints);
        assert_eq!(our_strings, ref_strings);
        let rows = ref_strings.len();
        assert_eq!(
            our_strings.len(),
            columns.iter().map(|c| c.len()).sum::<usize>()
        );

        // Chunk metadata, as read back from both files.
        assert_eq!(our_meta.num_row_groups(), 1);
        let ours_rg = our_meta.row_group(0);
        let ref_rg = ref_meta.row_group(0);
        assert_eq!(ours_rg.num_rows(), ref_rg.num_rows());
        let (o, r) = (ours_rg.column(1), ref_rg.column(1));
        assert_eq!(o.statistics(), r.statistics());
        if let (Some(os), Some(rs)) = (o.statistics(), r.statistics()) {
            assert_eq!(os.min_is_exact(), rs.min_is_exact());
            assert_eq!(os.max_is_exact(), rs.max_is_exact());
            assert_eq!(os.distinct_count_opt(), rs.distinct_count_opt());
            assert_eq!(os.null_count_opt(), rs.null_count_opt());
        }
        assert_eq!(o.num_values(), r.num_values());
        assert_eq!(o.encodings_mask(), r.encodings_mask());
        assert_eq!(o.page_encoding_stats_mask(), r.page_encoding_stats_mask());
        assert_eq!(o.compression(), r.compression());
        assert!(o.dictionary_page_offset().is_some());
        assert!(r.dictionary_page_offset().is_some());
        assert_eq!(
            o.unencoded_byte_array_data_bytes(),
            r.unencoded_byte_array_data_bytes()
        );
        assert_eq!(
            o.definition_level_histogram(),
            r.definition_level_histogram()
        );
        assert_eq!(
            o.repetition_level_histogram(),
            r.repetition_level_histogram()
        );
        assert_eq!(
            o.column_index_offset().is_some(),
            r.column_index_offset().is_some()
        );
        assert_eq!(
            o.offset_index_offset().is_some(),
            r.offset_index_offset().is_some()
        );
        // The int column is untouched and well placed.
        assert_eq!(
            ours_rg.column(0).statistics(),
            ref_rg.column(0).statistics()
        );

        // In-memory close results against parquet's own column writer.
        let (m, a) = (&close.metadata, &arrow_close.metadata);
        assert_eq!(m.statistics(), a.statistics());
        assert_eq!(m.num_values(), a.num_values());
        assert_eq!(m.encodings_mask(), a.encodings_mask());
        assert_eq!(m.compression(), a.compression());
        assert_eq!(
            m.unencoded_byte_array_data_bytes(),
            a.unencoded_byte_array_data_bytes()
        );
        assert_eq!(
            m.definition_level_histogram(),
            a.definition_level_histogram()
        );
        assert_eq!(
            m.repetition_level_histogram(),
            a.repetition_level_histogram()
        );
        assert_eq!(close.rows_written, arrow_close.rows_written);
        assert_eq!(close.bytes_written as i64, m.compressed_size());
        assert_eq!(
            close.column_index.is_some(),
            arrow_close.column_index.is_some()
        );
        assert_eq!(
            close.offset_index.is_some(),
            arrow_close.offset_index.is_some()
        );
        assert!(arrow_close.bloom_filter.is_none());
        let stats = m.page_encoding_stats().expect("encoding stats");
        let ref_stats = a.page_encoding_stats().expect("encoding stats");
        let kinds = |s: &Vec<PageEncodingStats>| -> Vec<(PageType, Encoding)> {
            s.iter().map(|e| (e.page_type, e.encoding)).collect()
        };
        assert_eq!(kinds(stats), kinds(ref_stats));
        let pages = stats[1].count as usize;

        // Page index, against the rows of every page.
        let Some(offsets) = close.offset_index.as_ref() else {
            return pages;
        };
        assert_eq!(offsets.page_locations().len(), pages);
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required);
        let meta = ParquetRecordBatchReaderBuilder::try_new_with_options(ours.clone(), options)
            .expect("reader with page index")
            .metadata()
            .clone();
        let locations = meta.offset_index().expect("offset index")[0][1].page_locations();
        let unencoded = meta.offset_index().expect("offset index")[0][1]
            .unencoded_byte_array_data_bytes()
            .expect("unencoded bytes")
            .clone();
        assert_eq!(locations.len(), pages);
        assert_eq!(locations[0].first_row_index, 0);
        let index = meta
            .column_index()
            .map(|c| &c[0][1])
            .filter(|c| !matches!(c, ColumnIndexMetaData::NONE));
        let mut mins: Vec<Option<String>> = Vec::new();
        let mut maxs: Vec<Option<String>> = Vec::new();
        for (p, location) in locations.iter().enumerate() {
            let first = location.first_row_index as usize;
            let end = locations
                .get(p + 1)
                .map(|l| l.first_row_index as usize)
                .unwrap_or(rows);
            assert!(first < end, "empty page {p}");
            assert!(end - first <= props.data_page_row_count_limit());
            let page = ref_strings.slice(first, end - first);
            let non_null: Vec<&str> = page.iter().flatten().collect();
            let min = non_null.iter().min().map(|s| s.to_string());
            let max = non_null.iter().max().map(|s| s.to_string());
            let bytes: usize = non_null.iter().map(|s| s.len()).sum();
            assert_eq!(unencoded[p], bytes as i64);
            mins.push(min.clone());
            maxs.push(max.clone());
            if let Some(index) = index {
                let ColumnIndexMetaData::BYTE_ARRAY(ci) = index else {
                    panic!("not a byte array column index: {index:?}");
                };
                assert_eq!(ci.null_count(p), Some(page.null_count() as i64), "page {p}");
                assert_eq!(ci.is_null_page(p), non_null.is_empty(), "page {p}");
                assert_eq!(
                    ci.min_value(p),
                    min.as_deref().map(str::as_bytes),
                    "page {p}"
                );
                assert_eq!(
                    ci.max_value(p),
                    max.as_deref().map(str::as_bytes),
                    "page {p}"
                );
                if nullable {
                    let hist = ci.definition_level_histogram(p).expect("histogram");
                    assert_eq!(hist, &[page.null_count() as i64, non_null.len() as i64][..]);
                } else {
                    assert!(ci.definition_level_histogram(p).is_none());
                }
            }
        }
        if let Some(index) = index {
            let present: Vec<(&String, &String)> = mins
                .iter()
                .zip(&maxs)
                .filter_map(|(a, b)| Some((a.as_ref()?, b.as_ref()?)))
                .collect();
            let asc = present
                .windows(2)
                .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1);
            let desc = present
                .windows(2)
                .all(|w| w[0].0 >= w[1].0 && w[0].1 >= w[1].1);
            let expected = match (asc, desc) {
                (true, _) => BoundaryOrder::ASCENDING,
                (false, true) => BoundaryOrder::DESCENDING,
                _ => BoundaryOrder::UNORDERED,
            };
            assert_eq!(index.get_boundary_order(), Some(expected));
        } else {
            assert_ne!(
                props.statistics_enabled(&"s".into()),
                EnabledStatistics::Page
            );
        }

        // Data page headers: statistics only when asked for (as ArrowWriter
        // does), and then right.
        let want = props.write_page_header_statistics(&"s".into())
            && props.statistics_enabled(&"s".into()) == EnabledStatistics::Page;
        let reference_headers = header_statistics(&reference);
        // (all-null pages have no statistics)
        let with_stats = reference_headers.iter().filter(|h| h.is_some()).count();
        assert_eq!(with_stats > 0, want);
        let headers = header_statistics(&ours);
        assert_eq!(headers.len(), pages);
        for (p, h) in headers.iter().enumerate() {
            match h {
                Some((min, max)) => {
                    assert!(want);
                    assert_eq!(Some(min.as_slice()), mins[p].as_deref().map(str::as_bytes));
                    assert_eq!(Some(max.as_slice()), maxs[p].as_deref().map(str::as_bytes));
                }
                None => assert!(!want || mins[p].is_none()),
            }
        }
        pages
    }

    /// The statistics of every data page header of column `column` of the
    /// first row group, checking that a dictionary page comes first.
    fn page_header_statistics(file: &Bytes, column: usize) -> Vec<Option<Statistics>> {
        let options = ReadOptionsBuilder::new()
            .with_reader_properties(
                ReaderProperties::builder()
                    .set_read_page_statistics(true)
                    .build(),
            )
            .build();
        let reader = SerializedFileReader::new_with_options(file.clone(), options).expect("reader");
        let mut page_reader = reader
            .get_row_group(0)
            .expect("row group")
            .get_column_page_reader(column)
            .expect("page reader");
        let mut out = Vec::new();
        let mut first = true;
        while let Some(page) = page_reader.get_next_page().expect("page") {
            if page.is_dictionary_page() {
                assert!(first, "dictionary page first");
                first = false;
                continue;
            }
            out.push(page.statistics().cloned());
        }
        assert!(!first, "no dictionary page");
        out
    }

    /// The min/max of every data page header of column `s` (`None` without statistics).
    fn header_statistics(file: &Bytes) -> Vec<Option<(Vec<u8>, Vec<u8>)>> {
        page_header_statistics(file, 1)
            .into_iter()
            .map(|h| match h {
                Some(Statistics::ByteArray(s)) => Some((
                    s.min_bytes_opt().expect("min").to_vec(),
                    s.max_bytes_opt().expect("max").to_vec(),
                )),
                Some(other) => panic!("unexpected statistics {other:?}"),
                None => None,
            })
            .collect()
    }

    /// Simple deterministic pseudo-random numbers.
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 33
        }
    }

    /// Batches with different, overlapping dictionaries, unused entries and a
    /// sliced dictionary array; with nulls when `nulls`.
    fn mixed_batches(nulls: bool) -> Vec<ArrayRef> {
        let n = |k: i32, i: usize| if nulls && i % 5 == 2 { None } else { Some(k) };
        let a = dict(
            &["pear", "apple", "unused-a", "fig"],
            (0..50).map(|i| n([0, 1, 3][i % 3], i)).collect(),
        );
        let b = dict(
            &["zebra", "apple", "", "kiwi", "pear", "unused-b"],
            (0..70).map(|i| n([4, 0, 2, 3, 1][i % 5], i)).collect(),
        );
        let c = dict(
            &["fig", "mango", "é", "apple"],
            (0..40).map(|i| n((i % 4) as i32, i)).collect(),
        )
        .slice(7, 25);
        let d = dict(&["only"], vec![Some(0); 3]);
        vec![a, b, c, d]
    }

    #[test]
    fn nullable_with_nulls_uncompressed() {
        let props = WriterProperties::builder()
            .set_data_page_row_count_limit(16)
            .set_write_batch_size(16)
            .build();
        let pages = check(true, &props, &mixed_batches(true));
        assert!(pages > 5, "{pages} pages");
    }

    #[test]
    fn nullable_without_nulls_snappy() {
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build();
        assert_eq!(check(true, &props, &mixed_batches(false)), 1);
    }

    #[test]
    fn required_snappy_page_header_statistics() {
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_write_page_header_statistics(true)
            .set_data_page_row_count_limit(30)
            .build();
        assert!(check(false, &props, &mixed_batches(false)) > 3);
    }

    #[test]
    fn single_value_bit_width_zero() {
        let props = WriterProperties::builder().build();
        check(
            true,
            &props,
            &[dict(&["x", "y"], vec![Some(0), None, Some(0)])],
        );
        check(false, &props, &[dict(&["x"], vec![Some(0); 5])]);
        check(false, &props, &[dict(&["x"], vec![Some(0); 5000])]);
    }

    #[test]
    fn chunk_and_no_statistics() {
        for stats in [EnabledStatistics::Chunk, EnabledStatistics::None] {
            let props = WriterProperties::builder()
                .set_statistics_enabled(stats)
                .set_data_page_row_count_limit(20)
                .build();
            check(true, &props, &mixed_batches(true));
            let props = WriterProperties::builder()
                .set_statistics_enabled(stats)
                .set_offset_index_disabled(true)
                .build();
            check(false, &props, &mixed_batches(false));
        }
    }

    /// 100_000 rows in 1000-row pages, `distinct` values, runs of nulls
    /// (whole null pages) and random keys.
    fn many_rows(distinct: usize, seed: u64) -> Vec<ArrayRef> {
        let mut rng = Lcg(seed);
        let mut out = Vec::new();
        let mut row = 0usize;
        while row < 100_000 {
            let len = (5_000 + rng.next() as usize % 20_000).min(100_000 - row);
            let dict_size = 1 + rng.next() as usize % distinct;
            let offset = rng.next() as usize % distinct;
            let values: Vec<String> = (0..dict_size)
                .map(|i| format!("value-{:06}", (offset + i * 7) % distinct))
                .collect();
            let refs: Vec<&str> = values.iter().map(|s| s.as_str()).collect();
            let keys = (0..len)
                .map(|i| {
                    let r = row + i;
                    if (20_000..23_500).contains(&r) || rng.next().is_multiple_of(10) {
                        None
                    } else if (50_000..60_000).contains(&r) {
                        Some(((r / 100) % dict_size) as i32)
                    } else {
                        Some((rng.next() as usize % dict_size) as i32)
                    }
                })
                .collect();
            out.push(dict(&refs, keys));
            row += len;
        }
        out
    }

    #[test]
    fn many_pages_few_distinct() {
        let props = WriterProperties::builder()
            .set_data_page_row_count_limit(1000)
            .set_compression(Compression::SNAPPY)
            .build();
        assert_eq!(check(true, &props, &many_rows(5, 1)), 100);
    }

    #[test]
    fn many_pages_many_distinct() {
        let props = WriterProperties::builder()
            .set_data_page_row_count_limit(1000)
            .set_write_page_header_statistics(true)
            .build();
        assert_eq!(check(true, &props, &many_rows(20_000, 2)), 100);
    }

    #[test]
    fn page_size_limit_splits_pages() {
        let props = WriterProperties::builder()
            .set_data_page_size_limit(64)
            .build();
        let columns = many_rows(300, 3);
        let pages = check(true, &props, &columns[..1]);
        assert!(pages > 10, "{pages} pages");
    }

    #[test]
    fn sorted_values_ascending_boundary() {
        let values: Vec<String> = (0..1000).map(|i| format!("k{i:04}")).collect();
        let refs: Vec<&str> = values.iter().map(|s| s.as_str()).collect();
        let keys = (0..10_000).map(|i| Some(i / 10)).collect();
        let props = WriterProperties::builder()
            .set_data_page_row_count_limit(500)
            .build();
        assert_eq!(check(false, &props, &[dict(&refs, keys)]), 20);
        let keys = (0..10_000).map(|i| Some(999 - i / 10)).collect();
        assert_eq!(check(false, &props, &[dict(&refs, keys)]), 20);
    }

    /// The descriptor of column `s` of a one-column file.
    fn descr(nullable: bool) -> ColumnDescPtr {
        let schema = Schema::new(vec![Field::new("s", dict_type(), nullable)]);
        ArrowSchemaConverter::new()
            .convert(&schema)
            .expect("schema")
            .column(0)
    }

    #[test]
    fn declines() {
        let cols = mixed_batches(true);
        let base = || WriterProperties::builder();
        let declined = |props: WriterProperties, cols: &[ArrayRef]| {
            encode(&descr(true), &props, cols, &mut Vec::new())
                .expect("no error")
                .is_none()
        };
        assert!(!declined(base().build(), &cols), "the base case applies");
        assert!(declined(
            base().set_bloom_filter_enabled(true).build(),
            &cols
        ));
        assert!(declined(
            base()
                .set_compression(Compression::ZSTD(ZstdLevel::default()))
                .build(),
            &cols
        ));
        assert!(declined(
            base().set_dictionary_enabled(false).build(),
            &cols
        ));
        assert!(declined(
            base()
                .set_writer_version(WriterVersion::PARQUET_2_0)
                .build(),
            &cols
        ));
        assert!(declined(
            base().set_dictionary_page_size_limit(40).build(),
            &cols
        ));
        let long = "x".repeat(65);
        let long_col = [dict(&["a", &long], vec![Some(0), Some(1)])];
        assert!(declined(base().build(), &long_col));
        // Unused long values do not matter, nor does truncation when off.
        assert!(!declined(
            base().build(),
            &[dict(&["a", &long], vec![Some(0)])]
        ));
        assert!(declined(
            base().set_column_index_truncate_length(None).build(),
            &long_col
        ));
        assert!(!declined(
            base()
                .set_column_index_truncate_length(None)
                .set_statistics_truncate_length(None)
                .build(),
            &long_col
        ));
        let utf8: ArrayRef = Arc::new(StringArray::from(vec!["a", "b"]));
        assert!(!is_dictionary_strings(&[cols[0].clone(), utf8.clone()]));
        assert!(declined(base().build(), &[utf8]));
        assert!(declined(base().build(), &[]));
        assert!(declined(base().build(), &[dict(&["a"], vec![None, None])]));
        assert!(declined(base().build(), &[dict(&["a"], vec![])]));
        let null_value: ArrayRef = Arc::new(
            DictionaryArray::<Int32Type>::try_new(
                Int32Array::from(vec![0, 1]),
                Arc::new(StringArray::from(vec![Some("a"), None])),
            )
            .expect("dictionary"),
        );
        assert!(declined(base().build(), &[null_value]));
        let int_descr = ArrowSchemaConverter::new()
            .convert(&Schema::new(vec![Field::new("n", DataType::Int64, true)]))
            .expect("schema")
            .column(0);
        assert!(encode(&int_descr, &base().build(), &cols, &mut Vec::new())
            .expect("ok")
            .is_none());
    }

    #[test]
    fn required_null_is_an_error() {
        let props = WriterProperties::builder().build();
        let cols = [dict(&["a", "b"], vec![Some(0), None, Some(1)])];
        let err = encode(&descr(false), &props, &cols, &mut Vec::new())
            .expect_err("null in required column");
        let message = err.to_string();
        assert!(message.contains("column s "), "{message}");
        assert!(encode(&descr(true), &props, &cols, &mut Vec::new())
            .expect("ok")
            .is_some());
    }

    /// Writes `columns` (of type `data_type`) as the only column `t` of a
    /// file, once through `encode` and once through `ArrowWriter`, and
    /// checks that both read back the same and carry the same chunk
    /// statistics, encodings and histograms, and that our page index and
    /// page header statistics match each page's rows. Returns the number of
    /// data pages `encode` wrote.
    fn check_int64(
        data_type: DataType,
        nullable: bool,
        props: &WriterProperties,
        columns: &[ArrayRef],
    ) -> usize {
        let schema: SchemaRef = Arc::new(Schema::new(vec![Field::new("t", data_type, nullable)]));
        let (mut file, _factory) =
            ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props.clone()))
                .expect("writer")
                .into_serialized_writer()
                .expect("serialized writer");
        let descr = file.schema_descr().column(0);
        let file_props = file.properties().clone();
        let (bytes, close) = encode(&descr, &file_props, columns, &mut Vec::new())
            .expect("encode")
            .expect("encode applies");
        let mut rg = file.next_row_group().expect("row group");
        rg.append_column(&bytes, close.clone()).expect("append");
        rg.close().expect("close row group");
        let ours = Bytes::from(file.into_inner().expect("finish"));

        let refs: Vec<&dyn Array> = columns.iter().map(|c| c.as_ref()).collect();
        let all = concat(&refs).expect("concat");
        let mut w =
            ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props.clone())).expect("writer");
        w.write(&RecordBatch::try_new(schema.clone(), vec![all.clone()]).expect("batch"))
            .expect("write");
        let reference = Bytes::from(w.into_inner().expect("finish"));

        let read = |file: &Bytes| -> (ArrayRef, Arc<ParquetMetaData>) {
            let options =
                ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
            let builder =
                ParquetRecordBatchReaderBuilder::try_new_with_options(file.clone(), options)
                    .expect("reader");
            assert_eq!(builder.schema().as_ref(), schema.as_ref());
            let metadata = builder.metadata().clone();
            let batches: Vec<RecordBatch> = builder
                .build()
                .expect("build")
                .collect::<std::result::Result<_, _>>()
                .expect("read");
            let parts: Vec<&dyn Array> = batches.iter().map(|b| b.column(0).as_ref()).collect();
            (concat(&parts).expect("concat"), metadata)
        };
        let (our_rows, our_meta) = read(&ours);
        let (ref_rows, ref_meta) = read(&reference);
        assert_eq!(&our_rows, &all);
        assert_eq!(&ref_rows, &all);
        let (o, r) = (
            our_meta.row_group(0).column(0),
            ref_meta.row_group(0).column(0),
        );
        assert_eq!(o.statistics(), r.statistics());
        assert_eq!(o.num_values(), r.num_values());
        assert_eq!(o.encodings_mask(), r.encodings_mask());
        assert_eq!(o.page_encoding_stats_mask(), r.page_encoding_stats_mask());
        assert_eq!(o.compression(), r.compression());
        assert_eq!(o.unencoded_byte_array_data_bytes(), None);
        assert_eq!(r.unencoded_byte_array_data_bytes(), None);
        assert_eq!(
            o.definition_level_histogram(),
            r.definition_level_histogram()
        );
        assert_eq!(
            o.column_index_offset().is_some(),
            r.column_index_offset().is_some()
        );
        assert_eq!(
            o.offset_index_offset().is_some(),
            r.offset_index_offset().is_some()
        );
        assert!(o.dictionary_page_offset().is_some());
        assert_eq!(close.bytes_written as i64, close.metadata.compressed_size());

        // Every page's rows against its column index entry and header.
        let values: Vec<Option<i64>> = match all.data_type() {
            DataType::Int64 => all
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("ints")
                .iter()
                .collect(),
            _ => cast(&all, &DataType::Int64)
                .expect("cast")
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("ints")
                .iter()
                .collect(),
        };
        let pages: usize = close
            .metadata
            .page_encoding_stats()
            .expect("encoding stats")
            .iter()
            .filter(|e| e.page_type == PageType::DATA_PAGE)
            .map(|e| e.count as usize)
            .sum();
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required);
        let meta = ParquetRecordBatchReaderBuilder::try_new_with_options(ours.clone(), options)
            .expect("reader with page index")
            .metadata()
            .clone();
        let locations = meta.offset_index().expect("offset index")[0][0].page_locations();
        assert!(meta.offset_index().expect("offset index")[0][0]
            .unencoded_byte_array_data_bytes()
            .is_none());
        assert_eq!(locations.len(), pages);
        let ColumnIndexMetaData::INT64(index) = &meta.column_index().expect("column index")[0][0]
        else {
            panic!("not an INT64 column index");
        };
        let headers = int64_header_statistics(&ours);
        let header_statistics = props.write_page_header_statistics(&"t".into())
            && props.statistics_enabled(&"t".into()) == EnabledStatistics::Page;
        assert_eq!(headers.len(), pages);
        let mut min_max: Vec<(i64, i64)> = Vec::new();
        for (p, location) in locations.iter().enumerate() {
            let first = location.first_row_index as usize;
            let end = locations
                .get(p + 1)
                .map(|l| l.first_row_index as usize)
                .unwrap_or(values.len());
            assert!(first < end && end - first <= props.data_page_row_count_limit());
            let page: Vec<i64> = values[first..end].iter().flatten().copied().collect();
            let nulls = (end - first - page.len()) as i64;
            assert_eq!(index.null_count(p), Some(nulls), "page {p}");
            assert_eq!(index.is_null_page(p), page.is_empty(), "page {p}");
            let expected = page.iter().min().zip(page.iter().max());
            assert_eq!(
                index.min_value(p).zip(index.max_value(p)),
                expected,
                "page {p}"
            );
            let header = expected
                .filter(|_| header_statistics)
                .map(|(a, b)| (*a, *b));
            assert_eq!(headers[p], header, "page {p}");
            if let Some((a, b)) = expected {
                min_max.push((*a, *b));
            }
            if nullable {
                let hist = index.definition_level_histogram(p).expect("histogram");
                assert_eq!(hist, &[nulls, page.len() as i64][..]);
            }
        }
        let asc = min_max
            .windows(2)
            .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1);
        let desc = min_max
            .windows(2)
            .all(|w| w[0].0 >= w[1].0 && w[0].1 >= w[1].1);
        let expected = match (asc, desc) {
            (true, _) => BoundaryOrder::ASCENDING,
            (false, true) => BoundaryOrder::DESCENDING,
            _ => BoundaryOrder::UNORDERED,
        };
        assert_eq!(
            meta.column_index().expect("column index")[0][0].get_boundary_order(),
            Some(expected)
        );
        pages
    }

    /// The min/max of every data page header of the INT64 column 0.
    fn int64_header_statistics(file: &Bytes) -> Vec<Option<(i64, i64)>> {
        page_header_statistics(file, 0)
            .into_iter()
            .map(|h| match h {
                Some(Statistics::Int64(s)) => {
                    Some((*s.min_opt().expect("min"), *s.max_opt().expect("max")))
                }
                Some(other) => panic!("unexpected statistics {other:?}"),
                None => None,
            })
            .collect()
    }

    /// Event times in microseconds: runs of equal seconds with late ones
    /// among them, some null, in batches of different sizes.
    fn event_times(rows: usize, nulls: bool) -> Vec<ArrayRef> {
        use arrow::array::TimestampMicrosecondArray;
        let mut rng = Lcg(11);
        let all: Vec<Option<i64>> = (0..rows)
            .map(|i| {
                if nulls && rng.next().is_multiple_of(13) {
                    return None;
                }
                let mut secs = 1_704_067_200 + (i / 10) as i64;
                if i % 20 == 7 {
                    secs -= (rng.next() % 1800) as i64;
                }
                Some(secs * 1_000_000)
            })
            .collect();
        let mut out: Vec<ArrayRef> = Vec::new();
        let mut start = 0;
        for size in [1usize, 999, 4000, 17, 12_000].iter().cycle() {
            if start >= rows {
                break;
            }
            let end = (start + size).min(rows);
            out.push(Arc::new(
                TimestampMicrosecondArray::from(all[start..end].to_vec()).with_timezone("UTC"),
            ));
            start = end;
        }
        out
    }

    #[test]
    fn event_times_nullable_snappy_many_pages() {
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_data_page_row_count_limit(1000)
            .set_write_batch_size(1000)
            .set_write_page_header_statistics(true)
            .build();
        let ts = DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, Some("UTC".into()));
        let pages = check_int64(ts, true, &props, &event_times(30_000, true));
        assert!(pages >= 30, "{pages} pages");
    }

    #[test]
    fn event_times_fall_back_to_plain_pages_when_the_dictionary_is_full() {
        // 1000 values fill the dictionary page; ~3000 distinct event times.
        let props = WriterProperties::builder()
            .set_dictionary_page_size_limit(8000)
            .set_data_page_row_count_limit(1000)
            .set_write_batch_size(1000)
            .set_write_page_header_statistics(true)
            .build();
        let ts = DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, Some("UTC".into()));
        for nulls in [false, true] {
            let columns = event_times(30_000, nulls);
            check_int64(ts.clone(), true, &props, &columns);
            let descr = ArrowSchemaConverter::new()
                .convert(&Schema::new(vec![Field::new("t", ts.clone(), true)]))
                .expect("schema")
                .column(0);
            let (_, close) = encode(&descr, &props, &columns, &mut Vec::new())
                .expect("encode")
                .expect("applies");
            let stats = close.metadata.page_encoding_stats().expect("stats");
            let plain = stats
                .iter()
                .find(|e| e.page_type == PageType::DATA_PAGE && e.encoding == Encoding::PLAIN)
                .expect("PLAIN data pages");
            let dictionary = stats
                .iter()
                .find(|e| e.page_type == PageType::DATA_PAGE && e.encoding != Encoding::PLAIN)
                .expect("dictionary data pages");
            assert!(plain.count >= 15 && dictionary.count >= 5, "{stats:?}");
        }
    }

    #[test]
    fn event_times_required_default_properties() {
        let props = WriterProperties::builder().build();
        let ts = DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, Some("UTC".into()));
        check_int64(ts, false, &props, &event_times(50_000, false));
    }

    #[test]
    fn integers_with_extremes_and_descending_pages() {
        let props = WriterProperties::builder()
            .set_data_page_row_count_limit(100)
            .set_write_batch_size(100)
            .build();
        // Descending runs, the extremes, negative values, nulls.
        let a: ArrayRef = Arc::new(Int64Array::from_iter(
            (0..1000i64).map(|i| (i % 9 != 4).then_some(5000 - i / 3)),
        ));
        let b: ArrayRef = Arc::new(Int64Array::from(vec![
            Some(i64::MIN),
            None,
            Some(i64::MAX),
            Some(-1),
            Some(0),
            Some(i64::MIN),
        ]));
        let c: ArrayRef = Arc::new(Int64Array::from(vec![None, None, None]));
        check_int64(DataType::Int64, true, &props, &[a, b.clone(), c.clone()]);
        // A page of nulls only, between others.
        let d: ArrayRef = Arc::new(Int64Array::from(vec![None; 250]));
        let e: ArrayRef = Arc::new(Int64Array::from_iter_values(0..250));
        check_int64(DataType::Int64, true, &props, &[e.clone(), d, e]);
        // Without nulls: the extremes and repeated values across arrays,
        // slices.
        let g: ArrayRef = Arc::new(Int64Array::from_iter_values(
            (0..400i64).map(|i| (i * 7919) % 1000 - 500),
        ));
        let h: ArrayRef = Arc::new(Int64Array::from(vec![i64::MAX, 3, i64::MIN, 3, i64::MAX]));
        check_int64(
            DataType::Int64,
            false,
            &props,
            &[g.slice(0, 150), h.clone(), g.slice(150, 250), h.slice(1, 3)],
        );
        // Every value distinct (the table grows many times), random order.
        let mut rng = Lcg(3);
        let f: ArrayRef = Arc::new(Int64Array::from_iter_values(
            (0..20_000).map(|_| rng.next() as i64 - (1 << 30)),
        ));
        check_int64(
            DataType::Int64,
            false,
            &WriterProperties::builder().build(),
            &[f],
        );
    }

    #[test]
    fn int64_declines() {
        let int_descr = |nullable: bool| {
            ArrowSchemaConverter::new()
                .convert(&Schema::new(vec![Field::new(
                    "n",
                    DataType::Int64,
                    nullable,
                )]))
                .expect("schema")
                .column(0)
        };
        let base = || WriterProperties::builder();
        let declined = |props: WriterProperties, cols: &[ArrayRef]| {
            encode(&int_descr(true), &props, cols, &mut Vec::new())
                .expect("no error")
                .is_none()
        };
        let ints: ArrayRef = Arc::new(Int64Array::from_iter_values(0..1000));
        assert!(!declined(base().build(), std::slice::from_ref(&ints)));
        // A dictionary page too small for one value: parquet's writer.
        assert!(declined(
            base().set_dictionary_page_size_limit(7).build(),
            std::slice::from_ref(&ints)
        ));
        // A full dictionary page: the rest in PLAIN pages, still ours.
        assert!(!declined(
            base().set_dictionary_page_size_limit(800).build(),
            std::slice::from_ref(&ints)
        ));
        assert!(declined(
            base().set_dictionary_enabled(false).build(),
            std::slice::from_ref(&ints)
        ));
        assert!(declined(
            base().set_bloom_filter_enabled(true).build(),
            std::slice::from_ref(&ints)
        ));
        assert!(declined(
            base().build(),
            &[Arc::new(Int64Array::from(vec![None, None])) as ArrayRef]
        ));
        assert!(declined(base().build(), &[]));
        let strings: ArrayRef = Arc::new(StringArray::from(vec!["a"]));
        assert!(declined(base().build(), &[strings]));
        // A u64 column is INT64 with an unsigned order: parquet's writer.
        let unsigned = ArrowSchemaConverter::new()
            .convert(&Schema::new(vec![Field::new("u", DataType::UInt64, true)]))
            .expect("schema")
            .column(0);
        assert!(encode(
            &unsigned,
            &base().build(),
            std::slice::from_ref(&ints),
            &mut Vec::new()
        )
        .expect("ok")
        .is_none());
        // A null in a required column is an error that names the column.
        let with_null: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None]));
        let err = encode(
            &int_descr(false),
            &base().build(),
            &[with_null],
            &mut Vec::new(),
        )
        .expect_err("null in a required column");
        assert!(err.to_string().contains("column n "), "{err}");
    }

    /// Decodes `n` values of the RLE / bit-packing hybrid encoding.
    fn decode_hybrid(mut data: &[u8], width: u8, n: usize) -> Vec<u32> {
        let mut out = Vec::new();
        let varint = |data: &mut &[u8]| {
            let mut v = 0u64;
            let mut shift = 0;
            loop {
                let b = data[0];
                *data = &data[1..];
                v |= u64::from(b & 0x7f) << shift;
                shift += 7;
                if b & 0x80 == 0 {
                    return v;
                }
            }
        };
        while out.len() < n {
            let header = varint(&mut data);
            if header & 1 == 0 {
                let count = (header >> 1) as usize;
                let bytes = (width as usize).div_ceil(8);
                let mut v = [0u8; 4];
                v[..bytes].copy_from_slice(&data[..bytes]);
                data = &data[bytes..];
                out.extend(std::iter::repeat_n(u32::from_le_bytes(v), count));
            } else {
                let values = (header >> 1) as usize * 8;
                let bytes = values * width as usize / 8;
                let (packed, rest) = data.split_at(bytes);
                data = rest;
                for i in 0..values {
                    let mut v = 0u32;
                    for b in 0..width as usize {
                        let bit = i * width as usize + b;
                        v |= u32::from((packed[bit / 8] >> (bit % 8)) & 1) << b;
                    }
                    out.push(v);
                }
            }
        }
        assert!(data.is_empty(), "{} trailing bytes", data.len());
        out.truncate(n);
        out
    }

    #[test]
    fn bit_packing_matches_the_bit_by_bit_packer() {
        // The packer before the per-width one: one value at a time through
        // a 64-bit accumulator.
        fn reference(values: &[u32], width: u8, out: &mut Vec<u8>) {
            let mask: u64 = (1u64 << width) - 1;
            for run in values.chunks(MAX_GROUPS_PER_RUN * GROUP) {
                let groups = run.len().div_ceil(GROUP);
                write_varint(((groups as u64) << 1) | 1, out);
                let at = out.len();
                out.resize(at + groups * width as usize, 0);
                let packed = &mut out[at..];
                let mut pos = 0usize;
                let mut acc = 0u64;
                let mut bits = 0u32;
                for &v in run {
                    acc |= (u64::from(v) & mask) << bits;
                    bits += u32::from(width);
                    if bits >= 32 {
                        packed[pos..pos + 4].copy_from_slice(&(acc as u32).to_le_bytes());
                        pos += 4;
                        acc >>= 32;
                        bits -= 32;
                    }
                }
                let rest = bits.div_ceil(8) as usize;
                packed[pos..pos + rest].copy_from_slice(&acc.to_le_bytes()[..rest]);
            }
        }
        let mut rng = Lcg(5);
        for width in 1..=32u8 {
            let max = (1u64 << width) - 1;
            for n in [1usize, 7, 8, 9, 63, 64, 503, 504, 505, 1001] {
                let values: Vec<u32> = (0..n).map(|_| (rng.next() & max) as u32).collect();
                let (mut ours, mut theirs) = (vec![9u8], vec![9u8]);
                write_bit_packed(&values, width, &mut ours);
                reference(&values, width, &mut theirs);
                assert_eq!(ours, theirs, "width {width}, {n} values");
            }
        }
    }

    /// The hybrid encoder before runs were skipped eight values at a time:
    /// every maximal repetition looked at in turn.
    fn reference_hybrid(values: &[u32], width: u8, out: &mut Vec<u8>) {
        if values.is_empty() {
            return;
        }
        if width == 0 {
            write_rle_run(0, values.len(), width, out);
            return;
        }
        let mut literal = 0usize;
        let mut i = 0usize;
        while i < values.len() {
            let v = values[i];
            let mut j = i + 1;
            while j < values.len() && values[j] == v {
                j += 1;
            }
            let pad = (GROUP - (i - literal) % GROUP) % GROUP;
            if j - i >= pad + MIN_RLE_RUN {
                let run_start = i + pad;
                write_bit_packed(&values[literal..run_start], width, out);
                write_rle_run(v, j - run_start, width, out);
                literal = j;
            }
            i = j;
        }
        write_bit_packed(&values[literal..], width, out);
    }

    proptest::proptest! {
        /// Skipping short runs changes no byte: runs of 1 to 24 equal
        /// values (around the RLE threshold of 8 and the group of 8), of
        /// few or many distinct values.
        #[test]
        fn skipping_short_runs_encodes_as_every_run_looked_at(
            runs in proptest::collection::vec((0u32..6, 1usize..25), 0..300),
            spread in proptest::prop_oneof![proptest::strategy::Just(1u32), proptest::strategy::Just(1000u32)],
        ) {
            let values: Vec<u32> = runs
                .iter()
                .flat_map(|&(v, n)| std::iter::repeat_n(v * spread, n))
                .collect();
            let width = bit_width(u64::from(values.iter().copied().max().unwrap_or(0)));
            let (mut ours, mut theirs) = (vec![1u8], vec![1u8]);
            encode_hybrid(&values, width, &mut ours);
            reference_hybrid(&values, width, &mut theirs);
            proptest::prop_assert_eq!(ours, theirs);
        }
    }

    #[test]
    fn skipping_short_runs_stops_where_a_long_run_may_start() {
        // No value equals the one seven places on: all skipped but the
        // last 14 (too few to compare a group of eight).
        let alternating: Vec<u32> = (0..40).map(|i| i % 2).collect();
        assert_eq!(skip_short_runs(&alternating, 0), 32);
        // A run of eight starting at 13: the group holding it is not skipped.
        let mut values: Vec<u32> = (0..40).collect();
        values[13..21].fill(99);
        assert_eq!(skip_short_runs(&values, 0), 8);
        assert_eq!(skip_short_runs(&values, 16), 32);
        assert_eq!(skip_short_runs(&[], 0), 0);
    }

    #[test]
    fn hybrid_round_trip() {
        let mut rng = Lcg(7);
        for width in 0..=20u8 {
            let max = (1u64 << width) - 1;
            let top = max as u32;
            let mut patterns: Vec<Vec<u32>> = Vec::new();
            for n in [1usize, 7, 8, 9, 15, 16, 17, 503, 504, 505, 1000, 5000] {
                patterns.push(vec![top; n]);
                patterns.push((0..n).map(|i| if i % 2 == 0 { 0 } else { top }).collect());
                patterns.push((0..n).map(|_| (rng.next() & max) as u32).collect());
                // Runs of random lengths, some long enough for RLE.
                let mut v = Vec::new();
                while v.len() < n {
                    let run = 1 + rng.next() as usize % 20;
                    let x = (rng.next() & max) as u32;
                    v.extend(std::iter::repeat_n(x, run.min(n - v.len())));
                }
                patterns.push(v);
            }
            for values in patterns {
                let mut buf = Vec::new();
                encode_hybrid(&values, width, &mut buf);
                let decoded = decode_hybrid(&buf, width, values.len());
                assert_eq!(decoded, values, "width {width}");
                assert!(buf.len() <= 1 + max_rle_size(width, values.len()) * 2);
            }
        }
        // Long runs are RLE-encoded: a few bytes for a million values.
        let mut buf = Vec::new();
        encode_hybrid(&vec![3; 1_000_000], 2, &mut buf);
        assert!(buf.len() < 8, "{} bytes", buf.len());
        let mut buf = Vec::new();
        encode_hybrid(&[], 5, &mut buf);
        assert!(buf.is_empty());
    }

    /// A value sequence: ascending (steps of 0 to 2, in units of 1 or of a
    /// million) with one in about 20 values late by up to 700 units, or
    /// values in random order, from a small range, any `i64`, or the
    /// extremes.
    fn value_sequence() -> impl proptest::strategy::Strategy<Value = Vec<i64>> {
        use proptest::prelude::*;
        prop_oneof![
            (
                proptest::collection::vec((0i64..3, 0u8..20, 0i64..700), 0..3000),
                prop_oneof![Just(1i64), Just(1_000_000i64)],
            )
                .prop_map(|(steps, unit)| {
                    let mut t = -40i64;
                    steps
                        .into_iter()
                        .map(|(step, late, back)| {
                            t += step;
                            unit * if late == 0 { t - back } else { t }
                        })
                        .collect()
                }),
            proptest::collection::vec(-50i64..50, 0..3000),
            proptest::collection::vec(any::<i64>(), 0..3000),
            proptest::collection::vec(
                prop_oneof![Just(i64::MIN), Just(i64::MAX), -2i64..2],
                0..300
            ),
        ]
    }

    proptest::proptest! {
        /// The interner gives every value the id of its first appearance
        /// and refuses exactly the new values past `max`.
        #[test]
        fn the_int64_interner_numbers_values_by_first_appearance(
            values in value_sequence(),
            max in 1usize..4000,
            sample in 0usize..100,
        ) {
            let mut interner = Int64Interner::new(value_range(values.iter().copied().take(sample)), 0);
            let mut expected: HashMap<i64, u32> = HashMap::new();
            for &v in &values {
                let want = match expected.get(&v) {
                    Some(&id) => Some(id),
                    None if expected.len() < max => {
                        let id = expected.len() as u32;
                        expected.insert(v, id);
                        Some(id)
                    }
                    None => None,
                };
                proptest::prop_assert_eq!(interner.intern_within(v, max), want, "value {}", v);
            }
            let mut by_id: Vec<(u32, i64)> = expected.iter().map(|(&v, &id)| (id, v)).collect();
            by_id.sort_unstable();
            let dictionary: Vec<i64> = by_id.into_iter().map(|(_, v)| v).collect();
            proptest::prop_assert_eq!(interner.values, dictionary);
        }
    }
}
