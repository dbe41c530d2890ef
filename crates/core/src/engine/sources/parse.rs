//! Decoding the files of a batch: json lines, csv, text and parquet, with
//! Spark's bad-record modes, read in parallel.
//!
//! Fast path: a whole file (or a line-aligned chunk of a big JSON/text file)
//! goes to arrow's decoder at once. Only when that fails is the chunk split
//! into records and decoded by halves, down to the bad records, which are
//! then handled by `mode`.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arrow::array::{new_null_array, Array, ArrayRef, BooleanArray, StringArray};
use arrow::buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow::compute::{cast_with_options, concat_batches, filter_record_batch, CastOptions};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;
use parquet::basic::Encoding;

use super::json_fast::FastJson;
use super::kept_rows::{kept_positions, Gather, KeptRows};
use super::null_columns::null_column;
use super::parquet_chunks::ChunkPlan;
use crate::engine::exec::batches::retyped;
use crate::engine::exec::dictionary_ids::{is_string_dictionary, string_dictionary_type};
use crate::engine::leaf_filter::{DictionaryVerdicts, LeafFilter};
use crate::error::{Error, Result};
use crate::plan::timestamp::udf::{leaf_to_timestamp, timestamp_type, DictionaryTimestamps};

/// The file formats of the file source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileFormat {
    /// JSON lines (one object per line; `multiLine=true`: one document per file).
    Json,
    /// CSV.
    Csv,
    /// Parquet.
    Parquet,
    /// Text: one row per line, in a single string column.
    Text,
}

impl FileFormat {
    /// The format's name.
    pub fn name(&self) -> &'static str {
        match self {
            FileFormat::Json => "json",
            FileFormat::Csv => "csv",
            FileFormat::Parquet => "parquet",
            FileFormat::Text => "text",
        }
    }
}

/// Rows per decoded batch.
pub(crate) const BATCH_ROWS: usize = 64 * 1024;
/// Rows per batch decoded from a Parquet file whose rows are filtered as
/// it is read: small enough for the batch to be in cache when it is
/// filtered (see `kept_rows`); the kept rows are gathered into batches of
/// [`BATCH_ROWS`].
const FILTERED_DECODE_ROWS: usize = 8 * 1024;
/// Big JSON/text files are split into line-aligned chunks of about this size
/// (at least) so one file is decoded by several threads.
const MIN_CHUNK_BYTES: u64 = 4 << 20;
/// Below this many records a failing range is decoded record by record.
const BISECT_LEAF: usize = 32;

/// Spark's bad-record modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Permissive,
    DropMalformed,
    FailFast,
}

/// CSV options.
#[derive(Clone, Debug)]
pub(crate) struct CsvOptions {
    pub header: bool,
    pub delimiter: u8,
    pub quote: u8,
    pub escape: Option<u8>,
    pub comment: Option<u8>,
    /// Non-empty `nullValue` (the empty string is null by default).
    pub null_value: Option<String>,
}

/// Everything needed to decode files into the source's schema.
#[derive(Clone, Debug)]
pub(crate) struct ParseConfig {
    pub flow: String,
    pub format: FileFormat,
    /// The output schema.
    pub schema: SchemaRef,
    /// The schema decoded from the data: the output schema without the
    /// corrupt-record column, every field nullable.
    pub data_schema: SchemaRef,
    /// Index of the corrupt-record column in the output schema.
    pub corrupt_idx: Option<usize>,
    pub mode: Mode,
    pub csv: CsvOptions,
    pub multi_line: bool,
    pub ignore_corrupt_files: bool,
    /// For messages: paths are shown relative to this directory.
    pub base_dir: PathBuf,
    /// The columns the query reads (None: all). Parquet files skip the
    /// others' column chunks (but those [`row_filter`](Self::row_filter)
    /// reads) and return nulls for them.
    pub read_columns: Option<Vec<bool>>,
    /// The `Utf8` columns the query also takes as `Dictionary(Int32, Utf8)`
    /// (None: none). Parquet column chunks of them whose pages are all
    /// dictionary-encoded are read so.
    pub dictionary_columns: Option<Vec<bool>>,
    /// The `Utf8` columns the query converts with `CAST(... AS TIMESTAMP)`
    /// only (None: none). The JSON decoder reads them converted; Parquet
    /// files' columns are converted as each file is read.
    pub timestamp_columns: Option<Vec<bool>>,
    /// Rows the query drops (None: every row is returned). Every Parquet
    /// file's rows are filtered with it, as they are decoded (see
    /// `decode_filter`); the query then relies on it and does not filter
    /// them again.
    pub row_filter: Option<LeafFilter>,
}

impl ParseConfig {
    /// False when neither the query nor [`row_filter`](Self::row_filter)
    /// reads column `index` of the output schema and the column may hold
    /// nulls, so it need not be decoded.
    fn decodes(&self, index: usize) -> bool {
        self.passes_on(index)
            || self
                .row_filter
                .as_ref()
                .is_some_and(|f| f.columns().contains(&index))
    }

    /// False when the query never reads column `index` of the output schema
    /// and the column may hold nulls, so the rows may carry nulls there
    /// (a column only the reader's filter reads is decoded, then dropped).
    fn passes_on(&self, index: usize) -> bool {
        let nullable = self.schema.field(index).is_nullable();
        !nullable
            || self
                .read_columns
                .as_ref()
                .is_none_or(|r| r.get(index).copied().unwrap_or(true))
    }
}

/// A file to read, with its size.
#[derive(Clone, Debug)]
pub(crate) struct FileToRead {
    /// The local path; for an object fetched into `data`, its URL (shown in
    /// messages).
    pub path: PathBuf,
    pub size: u64,
    /// The bytes of an object in object storage, fetched before decoding
    /// (`None`: read the local file at `path`).
    pub data: Option<bytes::Bytes>,
    /// The partition values of its directories (`day=2024-01-01/` under
    /// the source's root: column, unescaped value; `None` for Hive's
    /// default partition, a null), which override the columns so named.
    pub partitions: Vec<(String, Option<String>)>,
}

/// Bytes a task reads from: a local file or an object's fetched bytes.
trait ReadSeek: Read + Seek {}
impl<T: Read + Seek> ReadSeek for T {}

impl FileToRead {
    fn open(&self) -> std::io::Result<Box<dyn ReadSeek>> {
        Ok(match &self.data {
            Some(data) => Box::new(std::io::Cursor::new(data.clone())),
            None => Box::new(File::open(&self.path)?),
        })
    }
}

/// The decoded rows of a batch's files.
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    pub batches: Vec<RecordBatch>,
    pub dropped: u64,
    /// The files skipped as undecodable (`ignoreCorruptFiles`), by index,
    /// each once.
    pub corrupt_files: std::collections::BTreeSet<usize>,
    /// Rows decoded but dropped by [`ParseConfig::row_filter`].
    pub filtered: u64,
}

enum Task {
    /// Bytes `[start, end)` of a file, extended to line boundaries (whole file: `0..u64::MAX`).
    Range { file: usize, start: u64, end: u64 },
    /// Some row groups (all: `None`) of a parquet file.
    Parquet {
        file: usize,
        row_groups: Option<Vec<usize>>,
    },
}

/// Reads `files` with up to `threads` threads; rows keep the files' order.
pub(crate) fn read_files(
    cfg: &ParseConfig,
    files: &[FileToRead],
    threads: usize,
) -> Result<Decoded> {
    let tasks = plan_tasks(cfg, files, threads)?;
    let results: Vec<Mutex<Option<Result<Decoded>>>> =
        tasks.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let workers = threads.clamp(1, tasks.len().max(1));
    let work = || {
        // One read buffer per thread, reused from task to task: a fresh
        // one per chunk costs a page fault per 4 KiB read.
        let mut buf = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= tasks.len() {
                break;
            }
            let r = run_task(cfg, files, &tasks[i], &mut buf);
            let failed = r.is_err();
            *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            if failed {
                // Stop handing out later tasks; earlier ones still finish so
                // the first error in file order is reported.
                next.fetch_max(tasks.len(), Ordering::Relaxed);
            }
        }
    };
    if workers <= 1 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 1..workers {
                s.spawn(work);
            }
            work();
        });
    }
    let mut out = Decoded::default();
    for slot in results {
        match slot.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(Ok(d)) => {
                out.batches.extend(d.batches);
                out.dropped += d.dropped;
                out.corrupt_files.extend(d.corrupt_files);
                out.filtered += d.filtered;
            }
            Some(Err(e)) => return Err(e),
            None => break,
        }
    }
    out.batches = coalesce(&cfg.schema, out.batches)?;
    Ok(out)
}

fn plan_tasks(cfg: &ParseConfig, files: &[FileToRead], threads: usize) -> Result<Vec<Task>> {
    let mut tasks = Vec::new();
    match cfg.format {
        FileFormat::Json | FileFormat::Text if !cfg.multi_line => {
            let total: u64 = files.iter().map(|f| f.size).sum();
            let chunk = (total / (threads.max(1) as u64 * 4)).max(MIN_CHUNK_BYTES);
            for (i, f) in files.iter().enumerate() {
                if threads > 1 && f.size > 2 * chunk {
                    let n = f.size.div_ceil(chunk);
                    let step = f.size.div_ceil(n);
                    let mut s = 0;
                    while s < f.size {
                        let e = (s + step).min(f.size);
                        let end = if e >= f.size { u64::MAX } else { e };
                        tasks.push(Task::Range {
                            file: i,
                            start: s,
                            end,
                        });
                        s = e;
                    }
                } else {
                    tasks.push(Task::Range {
                        file: i,
                        start: 0,
                        end: u64::MAX,
                    });
                }
            }
        }
        FileFormat::Json | FileFormat::Text | FileFormat::Csv => {
            for i in 0..files.len() {
                tasks.push(Task::Range {
                    file: i,
                    start: 0,
                    end: u64::MAX,
                });
            }
        }
        FileFormat::Parquet => {
            for (i, f) in files.iter().enumerate() {
                // Few files: split them by row group so every thread has work.
                let groups = if threads > 1 && files.len() < threads {
                    let count = || {
                        super::without_panics(|| {
                            Ok(match &f.data {
                                Some(data) => {
                                    ParquetRecordBatchReaderBuilder::try_new(data.clone())?
                                        .metadata()
                                        .num_row_groups()
                                }
                                None => ParquetRecordBatchReaderBuilder::try_new(
                                    File::open(&f.path).map_err(|e| Error::io(&f.path, e))?,
                                )?
                                .metadata()
                                .num_row_groups(),
                            })
                        })
                        .ok()
                    };
                    count().unwrap_or(1)
                } else {
                    1
                };
                if groups > 1 {
                    for g in 0..groups {
                        tasks.push(Task::Parquet {
                            file: i,
                            row_groups: Some(vec![g]),
                        });
                    }
                } else {
                    tasks.push(Task::Parquet {
                        file: i,
                        row_groups: None,
                    });
                }
            }
        }
    }
    Ok(tasks)
}

/// A path for messages: relative to the base directory when under it.
pub(crate) fn display_path(base: &Path, path: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// Decodes one task, reading bytes into `read_buf` (kept for the next task).
fn run_task(
    cfg: &ParseConfig,
    files: &[FileToRead],
    task: &Task,
    read_buf: &mut Vec<u8>,
) -> Result<Decoded> {
    let mut decoded = decode_task(cfg, files, task, read_buf)?;
    let file = match task {
        Task::Range { file, .. } | Task::Parquet { file, .. } => &files[*file],
    };
    if !file.partitions.is_empty() {
        decoded.batches = decoded
            .batches
            .into_iter()
            .map(|b| with_partition_values(cfg, file, b))
            .collect::<Result<_>>()?;
        // A Parquet file's rows meet the query's filter with their
        // partition values (see `decode_filter`).
        if let (Task::Parquet { .. }, Some(filter)) = (task, &cfg.row_filter) {
            let mut kept = Vec::with_capacity(decoded.batches.len());
            for batch in decoded.batches {
                let (batch, dropped) = filter_rows(cfg, &file.path, filter, batch)?;
                decoded.filtered += dropped;
                kept.extend(batch);
            }
            decoded.batches = kept;
        }
    }
    if let Task::Parquet { .. } = task {
        decoded.batches = read_timestamps(cfg, &file.path, decoded.batches)?;
    }
    Ok(decoded)
}

/// `batches` (one Parquet file's, filtered and with their partition values)
/// with the columns flagged in [`ParseConfig::timestamp_columns`] converted
/// as `CAST(column AS TIMESTAMP)` converts them: here, on the thread that
/// decoded the file while its rows are still in cache, rather than once
/// every file is read. A dictionary-encoded chunk has each distinct string
/// parsed once for all its batches.
fn read_timestamps(
    cfg: &ParseConfig,
    path: &Path,
    batches: Vec<RecordBatch>,
) -> Result<Vec<RecordBatch>> {
    let columns: Vec<usize> = match &cfg.timestamp_columns {
        Some(flags) => (0..cfg.schema.fields().len())
            .filter(|&i| flags.get(i).copied().unwrap_or(false))
            .collect(),
        None => return Ok(batches),
    };
    if columns.is_empty() {
        return Ok(batches);
    }
    let mut caches: Vec<DictionaryTimestamps> = columns
        .iter()
        .map(|_| DictionaryTimestamps::default())
        .collect();
    batches
        .into_iter()
        .map(|batch| {
            let mut arrays = batch.columns().to_vec();
            for (&c, cache) in columns.iter().zip(&mut caches) {
                let Some(array) = arrays.get_mut(c) else {
                    continue;
                };
                *array = leaf_to_timestamp(array, None, cache).map_err(|e| {
                    Error::runtime(format!(
                        "converting column `{}` of {} to a timestamp: {e}",
                        cfg.schema.field(c).name(),
                        display_path(&cfg.base_dir, path)
                    ))
                })?;
            }
            let schema = retyped(
                batch.schema_ref(),
                columns.iter().map(|&c| (c, timestamp_type())),
            );
            Ok(RecordBatch::try_new_with_options(
                schema,
                arrays,
                &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
            )?)
        })
        .collect()
}

/// `batch` with the columns named by the file's partition directories set
/// to their values, cast to the columns' types (like Spark's partition
/// discovery; a value that does not cast is an error naming the file).
fn with_partition_values(
    cfg: &ParseConfig,
    file: &FileToRead,
    batch: RecordBatch,
) -> Result<RecordBatch> {
    let schema = batch.schema();
    let rows = batch.num_rows();
    let mut columns = batch.columns().to_vec();
    for (name, value) in &file.partitions {
        let Some(i) = schema
            .fields()
            .iter()
            .position(|f| f.name() == name)
            .or_else(|| {
                schema
                    .fields()
                    .iter()
                    .position(|f| f.name().eq_ignore_ascii_case(name))
            })
        else {
            continue;
        };
        let field = schema.field(i);
        columns[i] = match value {
            None => null_column(field.data_type(), rows),
            Some(v) => {
                let text: ArrayRef = Arc::new(StringArray::from(vec![v.as_str(); rows]));
                let safe = CastOptions {
                    safe: false,
                    ..CastOptions::default()
                };
                cast_with_options(&text, field.data_type(), &safe).map_err(|_| {
                    Error::runtime_with_help(
                        format!(
                            "the partition value `{name}={v}` of {} cannot be read as {}, the type of `{}`",
                            display_path(&cfg.base_dir, &file.path),
                            crate::plan::ddl::type_to_ddl(field.data_type()),
                            field.name()
                        ),
                        format!(
                            "declare `{name}` with a type its directories' values have, or rename the directory"
                        ),
                    )
                })?
            }
        };
    }
    Ok(RecordBatch::try_new_with_options(
        schema,
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )?)
}

fn decode_task(
    cfg: &ParseConfig,
    files: &[FileToRead],
    task: &Task,
    read_buf: &mut Vec<u8>,
) -> Result<Decoded> {
    match task {
        Task::Range { file, start, end } => {
            let f = &files[*file];
            let (skip, real_start) = read_range(f, *start, *end, read_buf).map_err(|e| {
                Error::runtime(format!(
                    "cannot read {}: {e}",
                    display_path(&cfg.base_dir, &f.path)
                ))
            })?;
            let loc = Loc {
                path: &f.path,
                file: f,
                start: real_start,
            };
            let buf = &read_buf[skip..];
            match cfg.format {
                FileFormat::Json if cfg.multi_line => json_multi_line(cfg, buf, &loc),
                FileFormat::Json => json_chunk(cfg, buf, &loc),
                FileFormat::Csv => csv_chunk(cfg, buf, &loc),
                FileFormat::Text => {
                    // The text column takes the bytes over.
                    let mut owned = std::mem::take(read_buf);
                    owned.drain(..skip);
                    text_chunk(cfg, owned)
                }
                FileFormat::Parquet => unreachable_format(cfg),
            }
        }
        Task::Parquet { file, row_groups } => {
            let f = &files[*file];
            match super::without_panics(|| parquet_read(cfg, f, row_groups.clone())) {
                Ok((batches, filtered)) => Ok(Decoded {
                    batches,
                    filtered,
                    ..Decoded::default()
                }),
                Err(e) if cfg.ignore_corrupt_files => {
                    tracing::warn!(
                        flow = %cfg.flow,
                        "skipping corrupt file {}: {e}",
                        display_path(&cfg.base_dir, &f.path)
                    );
                    Ok(Decoded {
                        corrupt_files: [*file].into(),
                        ..Decoded::default()
                    })
                }
                Err(e) => Err(Error::external_with_help(
                    format!(
                        "cannot read parquet file {}",
                        display_path(&cfg.base_dir, &f.path)
                    ),
                    "replace or remove the file, or set ignoreCorruptFiles to true",
                    e,
                )),
            }
        }
    }
}

fn unreachable_format(cfg: &ParseConfig) -> Result<Decoded> {
    Err(Error::runtime(format!(
        "internal error: {:?} files read as bytes",
        cfg.format
    )))
}

/// Reads bytes `[start, end)` of a file extended to line boundaries into
/// `buf` (replacing its contents): a chunk starts after the first newline
/// at or after `start - 1` and ends after the first newline at or after
/// `end - 1`. Returns how many leading bytes of `buf` precede the chunk,
/// and the chunk's real start offset in the file.
fn read_range(
    file: &FileToRead,
    start: u64,
    end: u64,
    buf: &mut Vec<u8>,
) -> std::io::Result<(usize, u64)> {
    buf.clear();
    if start == 0 && end == u64::MAX {
        match &file.data {
            Some(data) => buf.extend_from_slice(data),
            None => {
                let mut f = File::open(&file.path)?;
                let size = f.metadata().map(|m| m.len()).unwrap_or(0);
                buf.reserve(size.min(1 << 30) as usize + 1);
                f.read_to_end(buf)?;
            }
        }
        return Ok((0, 0));
    }
    let mut f = file.open()?;
    let from = start.saturating_sub(1);
    f.seek(SeekFrom::Start(from))?;
    let want = end.saturating_sub(from);
    buf.reserve(want.min(1 << 30) as usize + 1024);
    (&mut f).take(want).read_to_end(buf)?;
    // Extend to the end of the line containing byte end-1.
    if end != u64::MAX && buf.len() as u64 == want && buf.last() != Some(&b'\n') {
        let mut block = [0u8; 64 * 1024];
        loop {
            let n = f.read(&mut block)?;
            if n == 0 {
                break;
            }
            if let Some(p) = block[..n].iter().position(|&b| b == b'\n') {
                buf.extend_from_slice(&block[..=p]);
                break;
            }
            buf.extend_from_slice(&block[..n]);
        }
    }
    if start == 0 {
        return Ok((0, 0));
    }
    match buf.iter().position(|&b| b == b'\n') {
        Some(p) => Ok((p + 1, from + p as u64 + 1)),
        None => Ok((buf.len(), from + buf.len() as u64)),
    }
}

/// Where a chunk comes from, for line numbers in messages.
struct Loc<'a> {
    path: &'a Path,
    /// The file the chunk is of.
    file: &'a FileToRead,
    /// Byte offset of the chunk in the file.
    start: u64,
}

impl Loc<'_> {
    /// 1-based line number of the chunk's first line (reads the file's
    /// prefix: only used for error messages).
    fn first_line(&self) -> usize {
        if self.start == 0 {
            return 1;
        }
        let Ok(f) = self.file.open() else {
            return 1;
        };
        let mut r = std::io::BufReader::new(f.take(self.start));
        let mut buf = [0u8; 64 * 1024];
        let mut lines = 1;
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 {
                break;
            }
            lines += buf[..n].iter().filter(|&&b| b == b'\n').count();
        }
        lines
    }
}

/// One record of a chunk: its bytes and its 1-based line within the chunk.
#[derive(Clone, Copy, Debug)]
struct Unit {
    start: usize,
    end: usize,
    line: usize,
}

/// Decodes the bytes of whole records.
type DecodeFn = dyn Fn(&[u8]) -> std::result::Result<Vec<RecordBatch>, ArrowError>;

enum Piece {
    Good(RecordBatch),
    Bad(usize),
}

/// Decodes `units` of `buf` by halves: ranges that decode are kept whole,
/// failing ranges are split down to the bad records.
fn bisect(
    buf: &[u8],
    units: &[Unit],
    lo: usize,
    hi: usize,
    decode: &DecodeFn,
    out: &mut Vec<Piece>,
) {
    if lo >= hi {
        return;
    }
    if hi - lo > BISECT_LEAF || hi - lo == 1 {
        let bytes = &buf[units[lo].start..units[hi - 1].end];
        if let Ok(batches) = decode(bytes) {
            out.extend(batches.into_iter().map(Piece::Good));
            return;
        }
        if hi - lo == 1 {
            out.push(Piece::Bad(lo));
            return;
        }
        let mid = lo + (hi - lo) / 2;
        bisect(buf, units, lo, mid, decode, out);
        bisect(buf, units, mid, hi, decode, out);
    } else {
        for i in lo..hi {
            bisect(buf, units, i, i + 1, decode, out);
        }
    }
}

/// Turns the pieces of a chunk into output batches, applying the mode.
fn assemble(
    cfg: &ParseConfig,
    buf: &[u8],
    units: &[Unit],
    pieces: Vec<Piece>,
    loc: &Loc,
    decode_one: &DecodeFn,
    salvage: &dyn Fn(&[u8]) -> Option<RecordBatch>,
) -> Result<Decoded> {
    let mut out = Decoded::default();
    for piece in pieces {
        match piece {
            Piece::Good(b) => out.batches.push(with_corrupt(cfg, b, None)?),
            Piece::Bad(i) => {
                let u = units[i];
                let raw = &buf[u.start..u.end];
                match cfg.mode {
                    Mode::DropMalformed => out.dropped += 1,
                    Mode::FailFast => {
                        let reason = match decode_one(raw) {
                            Err(e) => clean_reason(&e),
                            Ok(_) => "the record could not be parsed".to_string(),
                        };
                        let line = loc.first_line() + u.line - 1;
                        return Err(malformed(cfg, loc.path, line, &reason));
                    }
                    Mode::Permissive => {
                        let row = salvage(raw).unwrap_or_else(|| null_row(&cfg.data_schema));
                        let text = String::from_utf8_lossy(trim_line(raw)).into_owned();
                        out.batches.push(with_corrupt(cfg, row, Some(text))?);
                    }
                }
            }
        }
    }
    Ok(out)
}

fn malformed(cfg: &ParseConfig, path: &Path, line: usize, reason: &str) -> Error {
    Error::runtime_with_help(
        format!(
            "malformed record in {} line {line}: {reason}",
            display_path(&cfg.base_dir, path)
        ),
        "fix the record, or set mode to PERMISSIVE or DROPMALFORMED",
    )
}

fn clean_reason(e: &ArrowError) -> String {
    let s = e.to_string();
    for p in [
        "Json error: ",
        "Csv error: ",
        "Parser error: ",
        "Invalid argument error: ",
    ] {
        if let Some(r) = s.strip_prefix(p) {
            return r.to_string();
        }
    }
    s
}

fn trim_line(raw: &[u8]) -> &[u8] {
    let mut r = raw;
    while let Some((&last, rest)) = r.split_last() {
        if last == b'\n' || last == b'\r' {
            r = rest;
        } else {
            break;
        }
    }
    r
}

fn null_row(schema: &SchemaRef) -> RecordBatch {
    let cols = schema
        .fields()
        .iter()
        .map(|f| new_null_array(f.data_type(), 1))
        .collect();
    RecordBatch::try_new_with_options(
        schema.clone(),
        cols,
        &RecordBatchOptions::new().with_row_count(Some(1)),
    )
    .unwrap_or_else(|_| RecordBatch::new_empty(schema.clone()))
}

/// A data-schema batch in the output schema: the corrupt-record column
/// inserted (null, or `raw` for a one-row batch).
fn with_corrupt(cfg: &ParseConfig, batch: RecordBatch, raw: Option<String>) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    let mut cols: Vec<ArrayRef> = batch.columns().to_vec();
    if let Some(idx) = cfg.corrupt_idx {
        let dt = cfg.schema.field(idx).data_type().clone();
        let col: ArrayRef = match raw {
            Some(text) => {
                let a: ArrayRef = Arc::new(StringArray::from(vec![Some(text); rows]));
                if dt == DataType::Utf8 {
                    a
                } else {
                    cast_with_options(&a, &dt, &CastOptions::default())?
                }
            }
            None => null_column(&dt, rows),
        };
        cols.insert(idx, col);
    }
    // Columns a decoder gave in another type (read converted) keep it.
    let changes: Vec<(usize, DataType)> = cols
        .iter()
        .zip(cfg.schema.fields())
        .enumerate()
        .filter(|(_, (c, f))| c.data_type() != f.data_type())
        .map(|(i, (c, _))| (i, c.data_type().clone()))
        .collect();
    let schema = match changes.is_empty() {
        true => cfg.schema.clone(),
        false => crate::engine::exec::retyped(&cfg.schema, changes),
    };
    Ok(RecordBatch::try_new_with_options(
        schema,
        cols,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )?)
}

// ---------------------------------------------------------------- json

fn json_decoder(
    schema: &SchemaRef,
    lenient: bool,
) -> std::result::Result<arrow::json::reader::Decoder, ArrowError> {
    arrow::json::ReaderBuilder::new(schema.clone())
        .with_batch_size(BATCH_ROWS)
        .with_coerce_primitive(true)
        .with_ignore_type_conflicts(lenient)
        .build_decoder()
}

fn json_decode(
    schema: &SchemaRef,
    buf: &[u8],
    lenient: bool,
) -> std::result::Result<Vec<RecordBatch>, ArrowError> {
    let mut dec = json_decoder(schema, lenient)?;
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let n = dec.decode(&buf[pos..])?;
        pos += n;
        if dec.len() >= BATCH_ROWS || n == 0 {
            if let Some(b) = dec.flush()? {
                out.push(b);
            }
        }
    }
    if dec.has_partial_record() {
        return Err(ArrowError::JsonError(
            "unexpected end of the record (incomplete JSON)".to_string(),
        ));
    }
    if let Some(b) = dec.flush()? {
        out.push(b);
    }
    Ok(out)
}

fn json_chunk(cfg: &ParseConfig, buf: &[u8], loc: &Loc) -> Result<Decoded> {
    // Per data column (the corrupt-record column left out): whether it is
    // read converted, read at all, and taken dictionary-encoded.
    let data_columns = || (0..cfg.schema.fields().len()).filter(|&i| Some(i) != cfg.corrupt_idx);
    let flags = |columns: &Option<Vec<bool>>| -> Vec<bool> {
        match columns {
            Some(c) => data_columns()
                .map(|i| c.get(i).copied().unwrap_or(false))
                .collect(),
            None => Vec::new(),
        }
    };
    let timestamps = flags(&cfg.timestamp_columns);
    let read: Vec<bool> = data_columns().map(|i| cfg.decodes(i)).collect();
    let dictionaries = flags(&cfg.dictionary_columns);
    let fast = FastJson::new(&cfg.data_schema, BATCH_ROWS)
        .map(|f| {
            f.with_spark_timestamps(&timestamps)
                .reading_only(&read)
                .with_dictionaries(&dictionaries)
        })
        .and_then(|f| f.decode(buf));
    if let Some(batches) = fast.map_or_else(|| json_decode(&cfg.data_schema, buf, false).ok(), Some)
    {
        let batches = batches
            .into_iter()
            .map(|b| with_corrupt(cfg, b, None))
            .collect::<Result<Vec<_>>>()?;
        return Ok(Decoded {
            batches,
            ..Decoded::default()
        });
    }
    // Slow path: one unit per non-blank line.
    let mut units = Vec::new();
    let mut line = 1;
    let mut s = 0;
    for (i, &b) in buf.iter().enumerate() {
        if b == b'\n' {
            push_line(buf, &mut units, s, i + 1, line);
            line += 1;
            s = i + 1;
        }
    }
    if s < buf.len() {
        push_line(buf, &mut units, s, buf.len(), line);
    }
    let schema = cfg.data_schema.clone();
    let decode = move |b: &[u8]| json_decode(&schema, b, false);
    let mut pieces = Vec::new();
    bisect(buf, &units, 0, units.len(), &decode, &mut pieces);
    let lenient_schema = cfg.data_schema.clone();
    let salvage = move |raw: &[u8]| -> Option<RecordBatch> {
        // Keep what parses (Spark's PERMISSIVE): a well-formed object with
        // a bad value keeps its other fields.
        let v: serde_json::Value = serde_json::from_slice(trim_line(raw)).ok()?;
        if !v.is_object() {
            return None;
        }
        let batches = json_decode(&lenient_schema, raw, true).ok()?;
        (batches.len() == 1 && batches[0].num_rows() == 1).then(|| batches[0].clone())
    };
    assemble(cfg, buf, &units, pieces, loc, &decode, &salvage)
}

fn push_line(buf: &[u8], units: &mut Vec<Unit>, start: usize, end: usize, line: usize) {
    if buf[start..end].iter().all(|b| b.is_ascii_whitespace()) {
        return;
    }
    units.push(Unit { start, end, line });
}

/// `multiLine=true`: each file is one JSON document, an object or an array of objects.
fn json_multi_line(cfg: &ParseConfig, buf: &[u8], loc: &Loc) -> Result<Decoded> {
    let lines = match serde_json::from_slice::<serde_json::Value>(buf) {
        Ok(serde_json::Value::Array(items)) => {
            let mut s = String::new();
            for item in items {
                s.push_str(&item.to_string());
                s.push('\n');
            }
            s.into_bytes()
        }
        Ok(v @ serde_json::Value::Object(_)) => {
            let mut s = v.to_string();
            s.push('\n');
            s.into_bytes()
        }
        Ok(_) | Err(_) => {
            // The whole file is one bad record.
            let units = [Unit {
                start: 0,
                end: buf.len(),
                line: 1,
            }];
            let schema = cfg.data_schema.clone();
            let decode = move |b: &[u8]| -> std::result::Result<Vec<RecordBatch>, ArrowError> {
                match serde_json::from_slice::<serde_json::Value>(b) {
                    Err(e) => Err(ArrowError::JsonError(e.to_string())),
                    Ok(_) => json_decode(&schema, b, false),
                }
            };
            return assemble(cfg, buf, &units, vec![Piece::Bad(0)], loc, &decode, &|_| {
                None
            });
        }
    };
    let inner = Loc {
        path: loc.path,
        file: loc.file,
        start: 0,
    };
    json_chunk(cfg, &lines, &inner)
}

// ---------------------------------------------------------------- csv

fn csv_decode(
    cfg: &ParseConfig,
    buf: &[u8],
    header: bool,
) -> std::result::Result<Vec<RecordBatch>, ArrowError> {
    let typed = cfg.csv.null_value.is_none();
    let schema = if typed {
        cfg.data_schema.clone()
    } else {
        all_utf8(&cfg.data_schema)
    };
    let mut b = arrow::csv::ReaderBuilder::new(schema)
        .with_header(header)
        .with_batch_size(BATCH_ROWS)
        .with_delimiter(cfg.csv.delimiter)
        .with_quote(cfg.csv.quote)
        .with_truncated_rows(true);
    if let Some(e) = cfg.csv.escape {
        b = b.with_escape(e);
    }
    if let Some(c) = cfg.csv.comment {
        b = b.with_comment(c);
    }
    let mut dec = b.build_decoder();
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        let n = dec.decode(&buf[pos..])?;
        pos += n;
        if n == 0 || dec.capacity() == 0 {
            match dec.flush()? {
                Some(batch) => out.push(batch),
                None if n == 0 => break,
                None => {}
            }
        }
    }
    if typed {
        return Ok(out);
    }
    let opts = CastOptions {
        safe: false,
        ..Default::default()
    };
    out.into_iter()
        .map(|b| typed_from_strings(cfg, &b, &opts))
        .collect()
}

fn all_utf8(schema: &SchemaRef) -> SchemaRef {
    Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| Field::new(f.name(), DataType::Utf8, true))
            .collect::<Vec<_>>(),
    ))
}

/// Applies `nullValue` to an all-strings batch and casts it to the data schema.
fn typed_from_strings(
    cfg: &ParseConfig,
    batch: &RecordBatch,
    opts: &CastOptions,
) -> std::result::Result<RecordBatch, ArrowError> {
    let null_value = cfg.csv.null_value.as_deref().unwrap_or("");
    let mut cols = Vec::with_capacity(batch.num_columns());
    for (i, f) in cfg.data_schema.fields().iter().enumerate() {
        let col = batch.column(i);
        let strings = col
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| ArrowError::CastError("expected strings".into()))?;
        let replaced: StringArray = strings
            .iter()
            .map(|v| v.filter(|s| *s != null_value))
            .collect();
        let a: ArrayRef = Arc::new(replaced);
        cols.push(if f.data_type() == &DataType::Utf8 {
            a
        } else {
            cast_with_options(&a, f.data_type(), opts)?
        });
    }
    RecordBatch::try_new_with_options(
        cfg.data_schema.clone(),
        cols,
        &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )
}

fn csv_chunk(cfg: &ParseConfig, buf: &[u8], loc: &Loc) -> Result<Decoded> {
    if let Ok(batches) = csv_decode(cfg, buf, cfg.csv.header) {
        let batches = batches
            .into_iter()
            .map(|b| with_corrupt(cfg, b, None))
            .collect::<Result<Vec<_>>>()?;
        return Ok(Decoded {
            batches,
            ..Decoded::default()
        });
    }
    let mut units = csv_records(buf, &cfg.csv);
    if cfg.csv.header && !units.is_empty() {
        units.remove(0);
    }
    let c1 = cfg.clone();
    let decode = move |b: &[u8]| csv_decode(&c1, b, false);
    let mut pieces = Vec::new();
    bisect(buf, &units, 0, units.len(), &decode, &mut pieces);
    let c2 = cfg.clone();
    let salvage = move |raw: &[u8]| -> Option<RecordBatch> {
        // Keep the fields that parse; the others are null.
        let mut strings = c2.clone();
        strings.csv.null_value = None;
        strings.data_schema = all_utf8(&c2.data_schema);
        let batches = csv_decode(&strings, raw, false).ok()?;
        let b = batches.into_iter().next()?;
        if b.num_rows() != 1 {
            return None;
        }
        let mut with_nulls = c2.clone();
        with_nulls.csv.null_value = Some(c2.csv.null_value.clone().unwrap_or_default());
        typed_from_strings(&with_nulls, &b, &CastOptions::default()).ok()
    };
    assemble(cfg, buf, &units, pieces, loc, &decode, &salvage)
}

/// Splits CSV bytes into records (quote-aware), skipping blank and comment lines.
fn csv_records(buf: &[u8], o: &CsvOptions) -> Vec<Unit> {
    let mut units = Vec::new();
    let mut line = 1;
    let mut rec_line = 1;
    let mut start = 0;
    let mut in_quotes = false;
    let mut i = 0;
    while i < buf.len() {
        let b = buf[i];
        if in_quotes {
            if Some(b) == o.escape && o.escape != Some(o.quote) && i + 1 < buf.len() {
                if buf[i + 1] == b'\n' {
                    line += 1;
                }
                i += 2;
                continue;
            }
            if b == o.quote {
                in_quotes = false;
            } else if b == b'\n' {
                line += 1;
            }
        } else if b == o.quote {
            in_quotes = true;
        } else if b == b'\n' {
            push_record(buf, &mut units, start, i + 1, rec_line, o);
            line += 1;
            start = i + 1;
            rec_line = line;
        }
        i += 1;
    }
    if start < buf.len() {
        push_record(buf, &mut units, start, buf.len(), rec_line, o);
    }
    units
}

fn push_record(
    buf: &[u8],
    units: &mut Vec<Unit>,
    start: usize,
    end: usize,
    line: usize,
    o: &CsvOptions,
) {
    let rec = trim_line(&buf[start..end]);
    if rec.is_empty() || o.comment.is_some_and(|c| rec[0] == c) {
        return;
    }
    units.push(Unit { start, end, line });
}

// ---------------------------------------------------------------- text

fn text_chunk(cfg: &ParseConfig, mut buf: Vec<u8>) -> Result<Decoded> {
    if std::str::from_utf8(&buf).is_err() {
        buf = String::from_utf8_lossy(&buf).into_owned().into_bytes();
    }
    if buf.len() > i32::MAX as usize {
        return Err(Error::runtime(
            "a text file chunk is larger than 2 GiB".to_string(),
        ));
    }
    // Line boundaries: [start, end) without the terminator.
    let mut bounds: Vec<(i32, i32)> = Vec::new();
    let mut s = 0usize;
    for (i, &b) in buf.iter().enumerate() {
        if b == b'\n' {
            let e = if i > s && buf[i - 1] == b'\r' {
                i - 1
            } else {
                i
            };
            bounds.push((s as i32, e as i32));
            s = i + 1;
        }
    }
    if s < buf.len() {
        let e = if buf[buf.len() - 1] == b'\r' {
            buf.len() - 1
        } else {
            buf.len()
        };
        bounds.push((s as i32, e as i32));
    }
    let values = Buffer::from_vec(buf);
    let field = cfg.schema.field(0).clone();
    let mut out = Decoded::default();
    for rows in bounds.chunks(BATCH_ROWS) {
        // Values are the chunk's bytes; each row's range skips its terminator.
        // Rows are contiguous except for terminators, so build offsets over a
        // compacted copy only when there are terminators to drop.
        let first = rows[0].0 as usize;
        let last = rows[rows.len() - 1].1 as usize;
        let mut compact = Vec::with_capacity(last - first);
        let mut offsets = Vec::with_capacity(rows.len() + 1);
        offsets.push(0i32);
        for &(a, b) in rows {
            compact.extend_from_slice(&values.as_slice()[a as usize..b as usize]);
            offsets.push(compact.len() as i32);
        }
        let array = StringArray::try_new(
            OffsetBuffer::new(ScalarBuffer::from(offsets)),
            Buffer::from_vec(compact),
            None,
        )?;
        let col: ArrayRef = if field.data_type() == &DataType::Utf8 {
            Arc::new(array)
        } else {
            cast_with_options(&array, field.data_type(), &CastOptions::default())?
        };
        out.batches
            .push(RecordBatch::try_new(cfg.schema.clone(), vec![col])?);
    }
    Ok(out)
}

// ---------------------------------------------------------------- parquet

/// Where a Parquet file's bytes are read from.
enum ParquetInput {
    /// An object's bytes, fetched.
    Memory(bytes::Bytes),
    /// A local file.
    Disk(File),
}

fn parquet_read(
    cfg: &ParseConfig,
    f: &FileToRead,
    row_groups: Option<Vec<usize>>,
) -> Result<(Vec<RecordBatch>, u64)> {
    let path = f.path.as_path();
    let input = match &f.data {
        Some(data) => ParquetInput::Memory(data.clone()),
        None => ParquetInput::Disk(File::open(path).map_err(|e| Error::io(path, e))?),
    };
    let meta = match &input {
        ParquetInput::Memory(data) => ArrowReaderMetadata::load(data, ArrowReaderOptions::new())?,
        ParquetInput::Disk(file) => ArrowReaderMetadata::load(file, ArrowReaderOptions::new())?,
    };
    let (mapping, roots) = parquet_projection(cfg, meta.schema());
    let row_filter = decode_filter(cfg, f);
    // A column only the decoder's filter reads is read as a dictionary
    // where it can be: the filter then compares each distinct value once.
    let as_dictionary: Vec<bool> = (0..cfg.schema.fields().len())
        .map(|i| {
            cfg.dictionary_columns
                .as_ref()
                .is_some_and(|d| d.get(i).copied().unwrap_or(false))
                || (row_filter.is_some() && !cfg.passes_on(i) && cfg.decodes(i))
        })
        .collect();
    let (meta, schema) =
        with_dictionary_columns(cfg, meta, &mapping, &as_dictionary, row_groups.as_deref());
    let read = ParquetRead {
        cfg,
        path,
        schema: &schema,
        mapping: &mapping,
        roots: &roots,
        row_filter,
    };
    let file = match input {
        // An object's bytes are in memory already: no chunk plan.
        ParquetInput::Memory(data) => {
            let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(data, meta);
            return read.decode(builder, row_groups);
        }
        ParquetInput::Disk(file) => file,
    };
    let size = file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
    let plan = ChunkPlan::new(meta.metadata(), &roots, row_groups.as_deref(), size)?;
    if plan.bytes() <= CHUNKS_IN_MEMORY_BYTES {
        // Only the projected column chunks are read, each run of them at
        // once: pages are then slices of one buffer instead of a read and
        // an allocation each.
        let chunks = plan.read(&file).map_err(|e| Error::io(path, e))?;
        let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(chunks, meta);
        return read.decode(builder, row_groups);
    }
    let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(file, meta);
    read.decode(builder, row_groups)
}

/// The reader's metadata asking for `Dictionary(Int32, Utf8)` in the
/// columns flagged in `allowed` (those the query takes so, see
/// `cfg.dictionary_columns`, and those only the decoder's filter reads)
/// whose chunks in `row_groups` have only dictionary-encoded data pages,
/// and the schema of the file's decoded batches (`cfg.schema` with those
/// columns' types). Otherwise (or when the reader refuses the hint) `meta`
/// and `cfg.schema`.
fn with_dictionary_columns(
    cfg: &ParseConfig,
    meta: ArrowReaderMetadata,
    mapping: &[Option<usize>],
    allowed: &[bool],
    row_groups: Option<&[usize]>,
) -> (ArrowReaderMetadata, SchemaRef) {
    if !allowed.contains(&true) {
        return (meta, cfg.schema.clone());
    }
    let dictionary = string_dictionary_type();
    let file_schema = meta.schema().clone();
    let parquet = meta.metadata();
    let descr = parquet.file_metadata().schema_descr();
    let all: Vec<usize> = (0..parquet.num_row_groups()).collect();
    let groups = row_groups.unwrap_or(&all);
    // Every chunk of the file column `root` (a plain string) is dictionary-encoded.
    let all_dictionary = |root: usize| {
        let leaves: Vec<usize> = (0..descr.num_columns())
            .filter(|&l| descr.get_column_root_idx(l) == root)
            .collect();
        let [leaf] = leaves[..] else { return false };
        groups.iter().all(|&g| {
            parquet
                .row_groups()
                .get(g)
                .map(|rg| rg.column(leaf))
                .is_some_and(|c| {
                    c.dictionary_page_offset().is_some()
                        && c.page_encoding_stats_mask().is_some_and(|m| {
                            m.is_only(Encoding::PLAIN_DICTIONARY)
                                || m.is_only(Encoding::RLE_DICTIONARY)
                        })
                })
        })
    };
    let mut file_fields: Vec<Field> = file_schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let mut out_fields: Vec<Field> = cfg
        .schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let mut any = false;
    for (i, m) in mapping.iter().enumerate() {
        let Some(root) = *m else { continue };
        let wanted = allowed.get(i).copied().unwrap_or(false)
            && cfg.schema.field(i).data_type() == &DataType::Utf8
            && matches!(
                file_schema.field(root).data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            );
        if wanted && all_dictionary(root) {
            file_fields[root] = file_fields[root].clone().with_data_type(dictionary.clone());
            out_fields[i] = out_fields[i].clone().with_data_type(dictionary.clone());
            any = true;
        }
    }
    if !any {
        return (meta, cfg.schema.clone());
    }
    let hint = Arc::new(Schema::new_with_metadata(
        file_fields,
        file_schema.metadata().clone(),
    ));
    match ArrowReaderMetadata::try_new(parquet.clone(), ArrowReaderOptions::new().with_schema(hint))
    {
        Ok(m) => (
            m,
            Arc::new(Schema::new_with_metadata(
                out_fields,
                cfg.schema.metadata().clone(),
            )),
        ),
        Err(_) => (meta, cfg.schema.clone()),
    }
}

/// Column chunks up to this many bytes (in all) are read into memory at once.
const CHUNKS_IN_MEMORY_BYTES: u64 = 64 << 20;

/// Which file column each target column reads (exact name, else
/// case-insensitive; none for the columns the query never reads, which are
/// returned as nulls), and the sorted distinct file columns read.
fn parquet_projection(
    cfg: &ParseConfig,
    file_schema: &SchemaRef,
) -> (Vec<Option<usize>>, Vec<usize>) {
    let mapping: Vec<Option<usize>> = cfg
        .schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if !cfg.decodes(i) {
                return None;
            }
            file_schema.index_of(f.name()).ok().or_else(|| {
                file_schema
                    .fields()
                    .iter()
                    .position(|ff| ff.name().eq_ignore_ascii_case(f.name()))
            })
        })
        .collect();
    let mut roots: Vec<usize> = mapping.iter().flatten().copied().collect();
    roots.sort_unstable();
    roots.dedup();
    (mapping, roots)
}

/// The query's filter (see [`ParseConfig::row_filter`]) where a Parquet
/// file's decoder applies it: every file but one in partition directories,
/// whose rows take their partition columns' values after decoding (then
/// [`run_task`] applies it).
fn decode_filter<'a>(cfg: &'a ParseConfig, file: &FileToRead) -> Option<&'a LeafFilter> {
    cfg.row_filter
        .as_ref()
        .filter(|_| file.partitions.is_empty())
}

/// The rows of `batch` (read from `path`) that meet `filter` (None when
/// none does), and how many it dropped.
fn filter_rows(
    cfg: &ParseConfig,
    path: &Path,
    filter: &LeafFilter,
    batch: RecordBatch,
) -> Result<(Option<RecordBatch>, u64)> {
    let rows = batch.num_rows();
    let keep = filter_mask(
        cfg,
        path,
        filter,
        &batch,
        &mut DictionaryVerdicts::default(),
    )?;
    let kept = keep.true_count();
    let dropped = (rows - kept) as u64;
    Ok(if kept == rows {
        (Some(batch), 0)
    } else if kept > 0 {
        (Some(filter_record_batch(&batch, &keep)?), dropped)
    } else {
        (None, dropped)
    })
}

/// The rows of `batch` (read from `path`) that meet `filter` (true; null
/// and false drop a row).
fn filter_mask(
    cfg: &ParseConfig,
    path: &Path,
    filter: &LeafFilter,
    batch: &RecordBatch,
    verdicts: &mut DictionaryVerdicts,
) -> Result<BooleanArray> {
    filter
        .evaluate_with(&batch.project(filter.columns())?, verdicts)
        .map_err(|e| {
            Error::runtime(format!(
                "filtering the rows of {}: {e}",
                display_path(&cfg.base_dir, path)
            ))
        })
}

/// Whether a column of `data_type` holds strings (plain, or a dictionary
/// of them as the Parquet reader gives).
fn is_strings(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    ) || is_string_dictionary(data_type)
}

/// The filter of one Parquet file's read, and the rows it keeps so far.
struct FilteredRead<'a> {
    filter: &'a LeafFilter,
    kept: KeptRows,
    /// The kept positions of the last batch.
    positions: Vec<u32>,
    verdicts: DictionaryVerdicts,
}

/// One Parquet file's read: where its columns go, in which types.
struct ParquetRead<'a> {
    cfg: &'a ParseConfig,
    path: &'a Path,
    /// The batches' schema: the source's, some strings dictionary-encoded.
    schema: &'a SchemaRef,
    /// The file column of each output column (None: nulls).
    mapping: &'a [Option<usize>],
    /// The file columns read, sorted.
    roots: &'a [usize],
    /// The query's filter where it applies as the file is decoded (see
    /// [`decode_filter`]).
    row_filter: Option<&'a LeafFilter>,
}

impl ParquetRead<'_> {
    /// How each column's kept rows are gathered when the file is filtered:
    /// the columns read from nowhere or by the filter only not at all (they
    /// are nulls), those the query converts to timestamps converted as they
    /// are gathered (see [`read_timestamps`], which then finds them
    /// converted).
    fn gather(&self) -> Vec<Gather> {
        let converts = |i: usize| {
            self.cfg
                .timestamp_columns
                .as_ref()
                .is_some_and(|flags| flags.get(i).copied().unwrap_or(false))
        };
        self.mapping
            .iter()
            .enumerate()
            .map(|(i, m)| match m {
                None => Gather::Absent,
                Some(_) if !self.cfg.passes_on(i) => Gather::Absent,
                Some(_) if converts(i) && is_strings(self.schema.field(i).data_type()) => {
                    Gather::Timestamps
                }
                Some(_) => Gather::Copy,
            })
            .collect()
    }

    /// The file's batches and the rows [`ParseConfig::row_filter`] dropped.
    fn decode<R: parquet::file::reader::ChunkReader + 'static>(
        &self,
        builder: ParquetRecordBatchReaderBuilder<R>,
        row_groups: Option<Vec<usize>>,
    ) -> Result<(Vec<RecordBatch>, u64)> {
        let cfg = self.cfg;
        let mask = ProjectionMask::roots(builder.parquet_schema(), self.roots.iter().copied());
        // A filtered file is decoded in small batches, each filtered while
        // it is in cache, its kept rows gathered into full-size batches.
        let mut filter = self.row_filter.map(|filter| FilteredRead {
            filter,
            kept: KeptRows::new(self.schema, &self.cfg.schema, BATCH_ROWS, &self.gather()),
            positions: Vec::new(),
            verdicts: DictionaryVerdicts::default(),
        });
        let batch_rows = match filter {
            Some(_) => FILTERED_DECODE_ROWS,
            None => BATCH_ROWS,
        };
        let mut builder = builder.with_projection(mask).with_batch_size(batch_rows);
        if let Some(rg) = row_groups {
            builder = builder.with_row_groups(rg);
        }
        let reader = builder.build()?;
        let mut filtered = 0u64;
        let mut out = Vec::new();
        for batch in reader {
            let batch = batch?;
            let rows = batch.num_rows();
            let mut cols = Vec::with_capacity(self.schema.fields().len());
            for (f, m) in self.schema.fields().iter().zip(self.mapping) {
                let col = match m {
                    Some(idx) => {
                        let pos = self.roots.binary_search(idx).map_err(|_| {
                            Error::runtime("internal error: projected column missing")
                        })?;
                        let c = batch.column(pos);
                        if c.data_type() == f.data_type() {
                            c.clone()
                        } else {
                            cast_with_options(c, f.data_type(), &CastOptions::default()).map_err(
                                |e| {
                                    Error::runtime_with_help(
                                        format!(
                                            "column `{}` of {} is {} and cannot be read as {}: {e}",
                                            f.name(),
                                            display_path(&cfg.base_dir, self.path),
                                            c.data_type(),
                                            f.data_type()
                                        ),
                                        "declare the column with the file's type in the source schema",
                                    )
                                },
                            )?
                        }
                    }
                    None => null_column(f.data_type(), rows),
                };
                cols.push(col);
            }
            let batch = RecordBatch::try_new_with_options(
                self.schema.clone(),
                cols,
                &RecordBatchOptions::new().with_row_count(Some(rows)),
            )?;
            let Some(f) = filter.as_mut() else {
                out.push(batch);
                continue;
            };
            // Each decoded batch is filtered at once: the rows the query
            // drops are never gathered into the micro-batch.
            let mask = filter_mask(cfg, self.path, f.filter, &batch, &mut f.verdicts)?;
            kept_positions(&mask, &mut f.positions);
            filtered += (rows - f.positions.len()) as u64;
            f.kept.push(&batch, &f.positions)?;
        }
        if let Some(f) = filter {
            out = f.kept.finish()?;
        }
        Ok((out, filtered))
    }
}

// ---------------------------------------------------------------- batches

/// Merges runs of small batches (bad records, small files) into batches of
/// up to [`BATCH_ROWS`] rows; big batches are passed through without a copy.
pub(crate) fn coalesce(schema: &SchemaRef, batches: Vec<RecordBatch>) -> Result<Vec<RecordBatch>> {
    const SMALL: usize = BATCH_ROWS / 8;
    if batches.iter().filter(|b| b.num_rows() < SMALL).count() < 2 {
        return Ok(batches.into_iter().filter(|b| b.num_rows() > 0).collect());
    }
    let mut out = Vec::new();
    let mut run: Vec<RecordBatch> = Vec::new();
    let mut run_rows = 0;
    let flush = |run: &mut Vec<RecordBatch>, out: &mut Vec<RecordBatch>| -> Result<()> {
        match run.len() {
            0 => {}
            1 => out.push(run.pop().expect("one batch")),
            _ => {
                // A run shares one schema: `schema`, or it with some strings
                // dictionary-encoded.
                let schema = run.first().map_or(schema, |r| r.schema_ref());
                out.push(concat_batches(schema, run.iter())?);
                run.clear();
            }
        }
        Ok(())
    };
    for b in batches {
        if b.num_rows() == 0 {
            continue;
        }
        if b.num_rows() >= SMALL {
            flush(&mut run, &mut out)?;
            run_rows = 0;
            out.push(b);
            continue;
        }
        let other_schema = run
            .first()
            .is_some_and(|r| r.schema_ref() != b.schema_ref());
        if run_rows + b.num_rows() > BATCH_ROWS || other_schema {
            flush(&mut run, &mut out)?;
            run_rows = 0;
        }
        run_rows += b.num_rows();
        run.push(b);
    }
    flush(&mut run, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::Int32Type;
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, true),
            Field::new("v", DataType::Int64, true),
        ]))
    }

    fn config(dir: &Path, dictionary_columns: Option<Vec<bool>>) -> ParseConfig {
        ParseConfig {
            flow: "f".into(),
            format: FileFormat::Parquet,
            schema: schema(),
            data_schema: schema(),
            corrupt_idx: None,
            mode: Mode::Permissive,
            csv: CsvOptions {
                header: false,
                delimiter: b',',
                quote: b'"',
                escape: None,
                comment: None,
                null_value: None,
            },
            multi_line: false,
            ignore_corrupt_files: false,
            base_dir: dir.to_path_buf(),
            read_columns: None,
            dictionary_columns,
            timestamp_columns: None,
            row_filter: None,
        }
    }

    /// Writes rows (k, v) as a Parquet file; returns it to read.
    fn write(dir: &Path, name: &str, keys: &[Option<&str>], dictionary: bool) -> FileToRead {
        let path = dir.join(name);
        let batch = RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(StringArray::from(keys.to_vec())),
                Arc::new(Int64Array::from_iter_values(0..keys.len() as i64)),
            ],
        )
        .unwrap();
        let props = WriterProperties::builder()
            .set_dictionary_enabled(dictionary)
            .build();
        let mut w =
            ArrowWriter::try_new(File::create(&path).unwrap(), schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let size = std::fs::metadata(&path).unwrap().len();
        FileToRead {
            path,
            size,
            data: None,
            partitions: Vec::new(),
        }
    }

    /// Each batch's `k` type and its values as strings.
    fn keys(batches: &[RecordBatch]) -> Vec<(DataType, Vec<Option<String>>)> {
        batches
            .iter()
            .map(|b| {
                let k = b.column(0);
                let plain = arrow::compute::cast(k, &DataType::Utf8).unwrap();
                let values = plain
                    .as_string::<i32>()
                    .iter()
                    .map(|v| v.map(str::to_string))
                    .collect();
                (k.data_type().clone(), values)
            })
            .collect()
    }

    /// `k <> 'INFO'` over [`schema`]'s `k`.
    fn not_info() -> LeafFilter {
        use datafusion::logical_expr::Operator;
        use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};
        use datafusion::scalar::ScalarValue;
        let predicate = Arc::new(BinaryExpr::new(
            Arc::new(Column::new("k", 0)),
            Operator::NotEq,
            Arc::new(Literal::new(ScalarValue::Utf8(Some("INFO".into())))),
        ));
        LeafFilter::new(predicate, &schema()).unwrap()
    }

    #[test]
    fn a_row_filter_drops_rows_while_decoding_and_counts_them() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let keys = [
            Some("a"),
            Some("INFO"),
            None,
            Some("b"),
            Some("INFO"),
            Some("c"),
        ];
        // Plain and dictionary-encoded pages, read as strings and as
        // dictionaries: the same rows kept, the others counted.
        for (dictionary, as_dictionary) in [(false, false), (true, false), (true, true)] {
            let file = write(dir, "f.parquet", &keys, dictionary);
            let mut cfg = config(dir, as_dictionary.then(|| vec![true, false]));
            cfg.row_filter = Some(not_info());
            let d = read_files(&cfg, &[file], 1).unwrap();
            let got: Vec<(Option<String>, i64)> = d
                .batches
                .iter()
                .flat_map(|b| {
                    let k = arrow::compute::cast(b.column(0), &DataType::Utf8).unwrap();
                    let v = b
                        .column(1)
                        .as_primitive::<arrow::datatypes::Int64Type>()
                        .clone();
                    (0..b.num_rows())
                        .map(|i| {
                            let k = k.as_string::<i32>();
                            (k.is_valid(i).then(|| k.value(i).to_string()), v.value(i))
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            assert_eq!(
                got,
                [
                    (Some("a".to_string()), 0),
                    (Some("b".to_string()), 3),
                    (Some("c".to_string()), 5)
                ],
                "dictionary pages {dictionary}, read as dictionaries {as_dictionary}"
            );
            assert_eq!(d.filtered, 3, "the null key fails `k <> 'INFO'` too");
            let is_dictionary =
                matches!(d.batches[0].column(0).data_type(), DataType::Dictionary(..));
            assert_eq!(is_dictionary, as_dictionary);
        }
    }

    #[test]
    fn timestamp_columns_are_converted_as_each_file_is_read() {
        use arrow::datatypes::TimestampMicrosecondType;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let keys = [
            Some("2024-01-01T00:00:07"),
            Some("INFO"),
            None,
            Some("2024-02-29 23:59:59.5"),
            Some("2024-01-01T00:00:07"),
            Some("2024-03-01T01:00:00+01:00"),
        ];
        // `k` converted as CAST(k AS TIMESTAMP): a string that is no
        // timestamp and a NULL become NULL; the filter (`k <> 'INFO'` on the
        // string) runs first, then the kept rows are converted.
        for (dictionary, as_dictionary, filtered) in [
            (false, false, false),
            (true, false, false),
            (true, true, false),
            (true, true, true),
            (false, false, true),
        ] {
            let file = write(dir, "f.parquet", &keys, dictionary);
            let mut cfg = config(dir, as_dictionary.then(|| vec![true, false]));
            cfg.timestamp_columns = Some(vec![true, false]);
            if filtered {
                cfg.row_filter = Some(not_info());
            }
            let d = read_files(&cfg, &[file], 1).unwrap();
            let case = format!(
                "dictionary pages {dictionary}, read as dictionaries {as_dictionary}, filtered {filtered}"
            );
            let mut got: Vec<(Option<i64>, i64)> = Vec::new();
            for b in &d.batches {
                assert_eq!(b.schema().field(0).data_type(), &timestamp_type(), "{case}");
                assert_eq!(b.column(0).data_type(), &timestamp_type(), "{case}");
                let k = b.column(0).as_primitive::<TimestampMicrosecondType>();
                let v = b.column(1).as_primitive::<arrow::datatypes::Int64Type>();
                for i in 0..b.num_rows() {
                    got.push((k.is_valid(i).then(|| k.value(i)), v.value(i)));
                }
            }
            let all = vec![
                (Some(1_704_067_207_000_000), 0),
                (None, 1),
                (None, 2),
                (Some(1_709_251_199_500_000), 3),
                (Some(1_704_067_207_000_000), 4),
                (Some(1_709_251_200_000_000), 5),
            ];
            let want: Vec<_> = if filtered {
                all.into_iter()
                    .filter(|(_, v)| ![1, 2].contains(v))
                    .collect()
            } else {
                all
            };
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn a_row_filter_on_a_column_missing_from_the_file_meets_its_nulls() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let file = write(dir, "f.parquet", &[Some("INFO"), Some("a")], false);
        let mut cfg = config(dir, None);
        let renamed = Arc::new(Schema::new(vec![
            Field::new("other", DataType::Utf8, true),
            Field::new("v", DataType::Int64, true),
        ]));
        cfg.schema = renamed.clone();
        cfg.data_schema = renamed;
        cfg.row_filter = Some(not_info());
        // `k` is missing from the file: NULL in every row, which fails
        // `k <> 'INFO'` as it would in the query.
        let d = read_files(&cfg, &[file], 1).unwrap();
        assert_eq!(d.batches.iter().map(|b| b.num_rows()).sum::<usize>(), 0);
        assert_eq!(d.filtered, 2);
    }

    #[test]
    fn a_row_filter_meets_the_partition_values() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        // The files' own `k` says INFO in every row; their directories'
        // `k` is what the query sees, and what the filter tests.
        let file = |sub: &str, value: Option<&str>| {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
            let mut f = write(
                dir,
                &format!("{sub}/f.parquet"),
                &[Some("INFO"), Some("INFO"), Some("INFO")],
                true,
            );
            f.partitions = vec![("k".to_string(), value.map(str::to_string))];
            f
        };
        let files = [
            file("k=INFO", Some("INFO")),
            file("k=WARN", Some("WARN")),
            file("k=__HIVE_DEFAULT_PARTITION__", None),
        ];
        for as_dictionary in [false, true] {
            let mut cfg = config(dir, as_dictionary.then(|| vec![true, false]));
            cfg.row_filter = Some(not_info());
            let d = read_files(&cfg, &files, 2).unwrap();
            assert_eq!(
                keys(&d.batches)
                    .into_iter()
                    .flat_map(|(_, v)| v)
                    .collect::<Vec<_>>(),
                vec![Some("WARN".to_string()); 3],
                "read as dictionaries {as_dictionary}"
            );
            assert_eq!(d.filtered, 6);
        }
    }

    #[test]
    fn dictionary_encoded_chunks_of_allowed_columns_stay_dictionaries() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let files = vec![
            write(dir, "a.parquet", &[Some("x"), None, Some("y")], true),
            write(dir, "b.parquet", &[Some("z"), Some("x")], true),
            write(dir, "c.parquet", &[Some("x"), Some("w")], false),
        ];
        let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        let s = |v: &str| Some(v.to_string());
        // Allowed: the two dictionary-encoded files are one batch (their
        // dictionaries merged); the plain file stays Utf8, in its own batch.
        let got = read_files(&config(dir, Some(vec![true, false])), &files, 1).unwrap();
        assert_eq!(
            keys(&got.batches),
            vec![
                (dict.clone(), vec![s("x"), None, s("y"), s("z"), s("x")]),
                (DataType::Utf8, vec![s("x"), s("w")]),
            ]
        );
        let first = got.batches[0].column(0).as_dictionary::<Int32Type>();
        assert_eq!(first.keys().null_count(), 1);
        assert_eq!(got.batches[0].schema().field(0).data_type(), &dict);
        // Not allowed: every batch in the declared types, one batch.
        let got = read_files(&config(dir, None), &files, 1).unwrap();
        assert_eq!(
            keys(&got.batches),
            vec![(
                DataType::Utf8,
                vec![s("x"), None, s("y"), s("z"), s("x"), s("x"), s("w")]
            )]
        );
        assert_eq!(got.batches[0].schema(), schema());
    }
}
