//! The file sink: parquet, JSON lines or CSV files in a table directory,
//! exactly once through Spark's manifest log (see [`super::manifest`]).
//!
//! Per batch: rows are grouped by partition (`partitionBy`: Hive-style
//! `col=value/` directories, the partition columns left out of the files, as
//! Spark does), ONE file is written per partition (split by
//! `maxRecordsPerFile`), named like Spark's
//! `part-00000-<uuid>-c000.snappy.parquet`, directly at its final name; then
//! one manifest entry lists them all. Until that entry exists the files are
//! invisible to readers, so a crash in between loses nothing and shows
//! nothing. Each manifest line records `(query id, batch id)`, so a batch
//! replayed after a crash is recognised and skipped. An empty batch writes
//! no file and no entry.
//!
//! The table may be in object storage (`s3://bucket/prefix`): each data
//! file is then written to a temporary local file and uploaded to its final
//! key (in parts when large) before the manifest entry is put, written once
//! like every entry.
//!
//! Options (case-insensitive): `compression` (parquet: `snappy` (default),
//! `zstd`, `none`/`uncompressed`; json/csv: `none`), `maxRecordsPerFile`
//! (0: no limit), and for csv `header` (default `true`) and `sep` /
//! `delimiter` (default `,`).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, UInt32Array};
use arrow::compute::take_record_batch;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use super::manifest::{self, PipelinesTag, SinkFileStatus, METADATA_DIR};
use super::parquet_writer::{encode_threads, ParallelParquetWriter};
use crate::engine::exec::dictionary_ids::is_string_dictionary;
use crate::engine::exec::with_types;
use crate::engine::sink::{Sink, SinkContext, SinkWrite};
use crate::engine::storage::Location;
use crate::error::{Error, Result};
use crate::formats::OutputMode;
use crate::options::Options;

/// Hive's name for the partition of null (and empty) values.
pub const DEFAULT_PARTITION_NAME: &str = "__HIVE_DEFAULT_PARTITION__";

/// Spark's `blockSize` for local files in `SinkFileStatus`.
const BLOCK_SIZE: i64 = 33_554_432;

/// Row groups are cut at this many bytes (Spark's `parquet.block.size`).
const ROW_GROUP_BYTES: usize = 128 * 1024 * 1024;

/// The format of a file sink's data files.
#[derive(Clone, Debug, PartialEq)]
enum FileFormat {
    Parquet(Compression),
    Json,
    Csv { header: bool, delimiter: u8 },
}

impl FileFormat {
    fn name(&self) -> &'static str {
        match self {
            FileFormat::Parquet(_) => "parquet",
            FileFormat::Json => "json",
            FileFormat::Csv { .. } => "csv",
        }
    }

    /// The file name extension, as Spark names it.
    fn extension(&self) -> &'static str {
        match self {
            FileFormat::Parquet(Compression::SNAPPY) => ".snappy.parquet",
            FileFormat::Parquet(Compression::ZSTD(_)) => ".zstd.parquet",
            FileFormat::Parquet(_) => ".parquet",
            FileFormat::Json => ".json",
            FileFormat::Csv { .. } => ".csv",
        }
    }
}

/// A sink writing parquet, JSON lines or CSV files to a table directory.
pub struct FileSink {
    name: String,
    /// The writing flow (for fault injection in crash tests).
    flow: String,
    format: FileFormat,
    dir: Location,
    meta: Location,
    query_id: String,
    /// Partition columns, as named in the schema.
    partition_cols: Vec<String>,
    max_records_per_file: u64,
    /// Batch ids of this query already in the manifest.
    committed: HashSet<u64>,
    /// The latest manifest entry this sink knows of (read at open, or its
    /// own last append): later ones were written by someone else.
    seen_entry: Option<u64>,
}

impl FileSink {
    /// Opens the sink at `ctx.path` (created), checks its options and
    /// partition columns, and reads which batches of `ctx.query_id` the
    /// manifest already lists.
    pub fn open(ctx: &SinkContext) -> Result<FileSink> {
        let options = Options::for_sink(&ctx.options, &ctx.name);
        let format = parse_format(&ctx.format, &options)?;
        let Some(path) = &ctx.path else {
            return Err(Error::runtime_with_help(
                format!("sink `{}`: a {} sink needs a path", ctx.name, format.name()),
                "set `path:` on the sink (a directory; it is created when missing)",
            ));
        };
        let dir = match path {
            Location::Local(path) => {
                fs::create_dir_all(path).map_err(|e| Error::io(path, e))?;
                Location::Local(fs::canonicalize(path).map_err(|e| Error::io(path, e))?)
            }
            Location::Object(_) => path.clone(),
        };
        let max_records_per_file = max_records_per_file(&options)?;
        let mut partition_cols = Vec::new();
        for c in &ctx.partition_cols {
            let found = ctx
                .schema
                .fields()
                .iter()
                .find(|f| f.name() == c)
                .or_else(|| {
                    ctx.schema
                        .fields()
                        .iter()
                        .find(|f| f.name().eq_ignore_ascii_case(c))
                });
            match found {
                Some(f) => partition_cols.push(f.name().clone()),
                None => {
                    let names: Vec<&str> = ctx
                        .schema
                        .fields()
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect();
                    let help = match crate::formats::did_you_mean(c, names.iter().copied()) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None => format!("partition by one of: {}", names.join(", ")),
                    };
                    return Err(Error::runtime_with_help(
                        format!(
                            "sink `{}`: partition column `{c}` is not a column of the output",
                            ctx.name
                        ),
                        help,
                    ));
                }
            }
        }
        if !partition_cols.is_empty() && partition_cols.len() >= ctx.schema.fields().len() {
            return Err(Error::runtime_with_help(
                format!(
                    "sink `{}`: every column is a partition column, so the files would have no columns",
                    ctx.name
                ),
                "partition by fewer columns",
            ));
        }
        // The manifest exists from the start, as in Spark: a reader listing
        // the directory before the first commit knows it is a sink's table
        // (and reads no uncommitted file), not a plain directory.
        let meta = dir.join(METADATA_DIR);
        manifest::create(&meta)?;
        let (committed, seen_entry) = manifest::committed_batches_and_latest(&meta, &ctx.query_id)?;
        Ok(FileSink {
            name: ctx.name.clone(),
            flow: ctx.flow.clone(),
            format,
            dir,
            meta,
            query_id: ctx.query_id.clone(),
            partition_cols,
            max_records_per_file,
            committed,
            seen_entry,
        })
    }

    /// The table directory (absolute).
    pub fn dir(&self) -> &Location {
        &self.dir
    }

    /// Groups the rows by partition directory (in order of first
    /// appearance), without the partition columns.
    fn partition(&self, batches: Vec<RecordBatch>) -> Result<Vec<(String, Vec<RecordBatch>)>> {
        if self.partition_cols.is_empty() {
            return Ok(vec![(String::new(), batches)]);
        }
        let mut groups: Vec<(String, Vec<RecordBatch>)> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let opts = FormatOptions::default()
            .with_null("")
            .with_timestamp_format(Some("%Y-%m-%d %H:%M:%S%.f"))
            .with_timestamp_tz_format(Some("%Y-%m-%d %H:%M:%S%.f"));
        for batch in batches {
            if batch.num_rows() == 0 {
                continue;
            }
            let schema = batch.schema();
            let mut part_idx = Vec::new();
            for c in &self.partition_cols {
                let i = schema.index_of(c).map_err(|_| {
                    Error::runtime(format!(
                        "sink `{}`: partition column `{c}` is missing from the batch",
                        self.name
                    ))
                })?;
                part_idx.push(i);
            }
            let keep: Vec<usize> = (0..schema.fields().len())
                .filter(|i| !part_idx.contains(i))
                .collect();
            let cols: Vec<&ArrayRef> = part_idx.iter().map(|&i| batch.column(i)).collect();
            let formatters = cols
                .iter()
                .map(|a| ArrayFormatter::try_new(a.as_ref(), &opts))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let mut rows_of: Vec<(String, Vec<u32>)> = Vec::new();
            let mut local: HashMap<String, usize> = HashMap::new();
            for row in 0..batch.num_rows() {
                let mut key = String::new();
                for (k, (name, f)) in self.partition_cols.iter().zip(&formatters).enumerate() {
                    if k > 0 {
                        key.push('/');
                    }
                    let value = if cols[k].is_null(row) {
                        String::new()
                    } else {
                        f.value(row).to_string()
                    };
                    key.push_str(&escape_path_name(name));
                    key.push('=');
                    if value.is_empty() {
                        key.push_str(DEFAULT_PARTITION_NAME);
                    } else {
                        key.push_str(&escape_path_name(&value));
                    }
                }
                match local.get(&key) {
                    Some(&i) => rows_of[i].1.push(row as u32),
                    None => {
                        local.insert(key.clone(), rows_of.len());
                        rows_of.push((key, vec![row as u32]));
                    }
                }
            }
            for (key, rows) in rows_of {
                let taken = take_record_batch(&batch, &UInt32Array::from(rows))?;
                let projected = taken.project(&keep)?;
                match index.get(&key) {
                    Some(&i) => groups[i].1.push(projected),
                    None => {
                        index.insert(key.clone(), groups.len());
                        groups.push((key, vec![projected]));
                    }
                }
            }
        }
        Ok(groups)
    }

    /// Writes one partition's rows to files (split by `maxRecordsPerFile`).
    fn write_partition(
        &self,
        rel: &str,
        batches: &[RecordBatch],
        job: &str,
        written: &mut Vec<Location>,
    ) -> Result<Vec<SinkFileStatus>> {
        let target_dir = if rel.is_empty() {
            self.dir.clone()
        } else {
            self.dir.join(rel)
        };
        if let Location::Local(d) = &target_dir {
            fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
        }
        let limit = if self.max_records_per_file == 0 {
            u64::MAX
        } else {
            self.max_records_per_file
        };
        let file_schema = file_schema(batches);
        let mut statuses = Vec::new();
        let mut current: Option<(DataFile, FormatWriter)> = None;
        let mut in_file = 0u64;
        let mut count = 0usize;
        for batch in batches {
            let mut offset = 0usize;
            while offset < batch.num_rows() {
                if current.is_none() {
                    let target = target_dir.join(&format!(
                        "part-00000-{job}-c{count:03}{}",
                        self.format.extension()
                    ));
                    count += 1;
                    written.push(target.clone());
                    let file = DataFile::new(target)?;
                    let w = FormatWriter::create(file.local(), &self.format, &file_schema)?;
                    current = Some((file, w));
                    in_file = 0;
                }
                let room = (limit - in_file).min((batch.num_rows() - offset) as u64) as usize;
                let slice = batch.slice(offset, room);
                if let Some((file, w)) = current.as_mut() {
                    let keep_dictionaries = matches!(self.format, FileFormat::Parquet(_));
                    let slice = conform(&slice, w.schema(), keep_dictionaries)
                        .map_err(|e| self.write_error(&file.target, e))?;
                    w.write(&slice)
                        .map_err(|e| self.write_error(&file.target, e))?;
                }
                offset += room;
                in_file += room as u64;
                if in_file >= limit {
                    if let Some((path, w)) = current.take() {
                        statuses.push(self.finish(path, w)?);
                    }
                }
            }
        }
        if let Some((path, w)) = current.take() {
            statuses.push(self.finish(path, w)?);
        }
        Ok(statuses)
    }

    fn write_error(&self, path: &Location, e: Error) -> Error {
        Error::runtime(format!("sink `{}`: writing {path} failed: {e}", self.name))
    }

    fn finish(&self, file: DataFile, w: FormatWriter) -> Result<SinkFileStatus> {
        w.finish().map_err(|e| self.write_error(&file.target, e))?;
        let (size, mtime) = file.finish()?;
        Ok(SinkFileStatus {
            path: manifest::location_to_uri(&file.target),
            size: size as i64,
            is_dir: false,
            modification_time: mtime,
            block_replication: 1,
            block_size: BLOCK_SIZE,
            action: "add".to_string(),
            pipelines: None,
        })
    }
}

impl Sink for FileSink {
    fn describe(&self) -> String {
        format!(
            "{} sink `{}` at {}",
            self.format.name(),
            self.name,
            self.dir
        )
    }

    fn has_batch(&self, batch_id: u64) -> Option<bool> {
        Some(self.committed.contains(&batch_id))
    }

    fn takes_dictionary_strings(&self) -> bool {
        matches!(self.format, FileFormat::Parquet(_))
    }

    fn add_batch(
        &mut self,
        batch_id: u64,
        batches: Vec<RecordBatch>,
        mode: OutputMode,
    ) -> Result<SinkWrite> {
        if mode != OutputMode::Append {
            return Err(Error::runtime_with_help(
                format!(
                    "sink `{}`: {} sinks only support the `append` output mode, not `{mode}`",
                    self.name,
                    self.format.name()
                ),
                "use `append` output mode, or write to a memory, console or foreach_batch sink",
            ));
        }
        if self.committed.contains(&batch_id) {
            return Ok(SinkWrite {
                skipped_replay: true,
                ..SinkWrite::default()
            });
        }
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        if rows == 0 {
            return Ok(SinkWrite::default());
        }
        let batches: Vec<RecordBatch> = batches.into_iter().filter(|b| b.num_rows() > 0).collect();
        let job = uuid::Uuid::new_v4().to_string();
        let mut written = Vec::new();
        let result = (|| {
            let mut statuses = Vec::new();
            for (rel, part) in self.partition(batches)? {
                statuses.extend(self.write_partition(&rel, &part, &job, &mut written)?);
                // The rows are written: their memory is freed while the
                // batch commits.
                crate::engine::release::release_later(part);
            }
            for s in &mut statuses {
                s.pipelines = Some(PipelinesTag {
                    query_id: self.query_id.clone(),
                    batch_id,
                });
            }
            crate::engine::fault::fault_point(&self.flow, "sink_files_written", batch_id);
            self.seen_entry = Some(manifest::append_entry(
                &self.meta,
                &statuses,
                self.seen_entry,
            )?);
            Ok(statuses)
        })();
        match result {
            Ok(statuses) => {
                self.committed.insert(batch_id);
                Ok(SinkWrite {
                    rows: rows as u64,
                    files: statuses.len() as u64,
                    bytes: statuses.iter().map(|s| s.size as u64).sum(),
                    skipped_replay: false,
                })
            }
            Err(e) => {
                // Uncommitted files are invisible anyway; tidy up.
                for p in written {
                    let _ = p.remove();
                }
                Err(e)
            }
        }
    }
}

/// A data file being written: directly at its final path, or for an
/// object at a temporary local file uploaded when it is finished.
struct DataFile {
    target: Location,
    /// Where the bytes are written: the target's path, or the spool's.
    local: PathBuf,
    /// The local file an object is written to first (removed on drop).
    spool: Option<tempfile::TempPath>,
}

impl DataFile {
    fn new(target: Location) -> Result<DataFile> {
        let (local, spool) = match &target {
            Location::Local(p) => (p.clone(), None),
            Location::Object(_) => {
                let spool = tempfile::Builder::new()
                    .prefix("pipelines-upload-")
                    .tempfile()
                    .map_err(|e| Error::io(std::env::temp_dir(), e))?
                    .into_temp_path();
                (spool.to_path_buf(), Some(spool))
            }
        };
        Ok(DataFile {
            target,
            local,
            spool,
        })
    }

    /// Where the bytes are written.
    fn local(&self) -> &Path {
        &self.local
    }

    /// Uploads a spooled file; the file's size and modification time (ms).
    fn finish(&self) -> Result<(u64, i64)> {
        if self.spool.is_some() {
            let size = self.target.upload_from(&self.local)?;
            return Ok((size, crate::engine::sources::now_ms()));
        }
        let path = &self.local;
        let md = fs::metadata(path).map_err(|e| Error::io(path, e))?;
        let mtime = md
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64);
        Ok((md.len(), mtime))
    }
}

/// The help for a bad `maxRecordsPerFile`.
const MAX_RECORDS_HELP: &str = "set `maxRecordsPerFile` to a number of rows (0: no limit)";

fn max_records_per_file(options: &Options) -> Result<u64> {
    Ok(options
        .count_with_help("maxRecordsPerFile", Some(MAX_RECORDS_HELP))?
        .unwrap_or(0))
}

/// Checks a file sink's options as opening it parses them (format,
/// compression, CSV settings, `maxRecordsPerFile`): what dry-run runs.
pub(crate) fn check_sink_options(format: &str, options: &Options) -> Result<()> {
    parse_format(format, options)?;
    max_records_per_file(options)?;
    Ok(())
}

fn parse_format(format: &str, options: &Options) -> Result<FileFormat> {
    let name = options.reader_name();
    let compression = options
        .get("compression")
        .map(|c| c.trim().to_ascii_lowercase());
    let no_compression = |format: &str| -> Result<()> {
        match compression.as_deref() {
            None | Some("none") | Some("uncompressed") => Ok(()),
            Some(c) => Err(Error::runtime_with_help(
                format!(
                    "sink `{name}`: compression `{c}` is not supported for {format} files by this build"
                ),
                "remove the `compression` option (files are written uncompressed)",
            )),
        }
    };
    match format {
        "parquet" => {
            let c = match compression.as_deref() {
                None | Some("snappy") => Compression::SNAPPY,
                Some("zstd") => Compression::ZSTD(ZstdLevel::default()),
                Some("none") | Some("uncompressed") => Compression::UNCOMPRESSED,
                Some(c) => {
                    return Err(Error::runtime_with_help(
                        format!("sink `{name}`: parquet compression `{c}` is not supported"),
                        "use `snappy` (the default), `zstd` or `none`",
                    ))
                }
            };
            Ok(FileFormat::Parquet(c))
        }
        "json" => {
            no_compression("json")?;
            Ok(FileFormat::Json)
        }
        "csv" => {
            no_compression("csv")?;
            let header = options.bool("header", true)?;
            let delimiter = match options.get_any(&["sep", "delimiter"]) {
                None => b',',
                Some(s) => crate::options::parse_char(s).ok_or_else(|| {
                    Error::runtime_with_help(
                        format!("sink `{name}`: separator `{s}` must be a single ASCII character"),
                        "set `sep` to one character, e.g. `,`, `;`, `|` or `\\t`",
                    )
                })?,
            };
            Ok(FileFormat::Csv { header, delimiter })
        }
        other => Err(Error::runtime(format!(
            "sink `{name}`: `{other}` is not a file format (parquet, json, csv)"
        ))),
    }
}

/// Escapes a partition column name or value like Spark's
/// `ExternalCatalogUtils.escapePathName`.
pub fn escape_path_name(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let escape = matches!(
            c,
            '\u{01}'
                ..='\u{1F}'
                    | '"'
                    | '#'
                    | '%'
                    | '\''
                    | '*'
                    | '/'
                    | ':'
                    | '='
                    | '?'
                    | '\\'
                    | '\u{7F}'
                    | '{'
                    | '['
                    | ']'
                    | '^'
        );
        if escape {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// `batch` with the file's schema when they differ only in field metadata or
/// nullability (batches of one write may come from different plan parts).
/// A `Utf8` column of the file given as `Dictionary(Int32, Utf8)` stays so
/// when `keep_dictionaries` (the Parquet writer encodes the dictionary) and
/// is decoded otherwise.
fn conform(
    batch: &RecordBatch,
    schema: &SchemaRef,
    keep_dictionaries: bool,
) -> Result<RecordBatch> {
    if batch.schema_ref() == schema {
        return Ok(batch.clone());
    }
    let mut columns = batch.columns().to_vec();
    let mut kept = Vec::new();
    for (i, (column, field)) in columns.iter_mut().zip(schema.fields()).enumerate() {
        if field.data_type() == &DataType::Utf8 && is_string_dictionary(column.data_type()) {
            if keep_dictionaries {
                kept.push((i, column.data_type().clone()));
            } else {
                *column = arrow::compute::cast(column, &DataType::Utf8)?;
            }
        }
    }
    let schema = if kept.is_empty() {
        schema.clone()
    } else {
        with_types(schema, kept, false)
    };
    Ok(RecordBatch::try_new(schema, columns)?)
}

/// The schema of one partition's files: the first batch's, with a column
/// nullable when it is nullable in any batch, and a string column given as
/// `Dictionary(Int32, Utf8)` a string.
fn file_schema(batches: &[RecordBatch]) -> SchemaRef {
    let Some(first) = batches.first() else {
        return Arc::new(arrow::datatypes::Schema::empty());
    };
    let schema = first.schema();
    let fields: Vec<arrow::datatypes::Field> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let nullable = batches
                .iter()
                .any(|b| b.schema().fields().get(i).is_some_and(|g| g.is_nullable()));
            let f = f.as_ref().clone().with_nullable(nullable);
            if is_string_dictionary(f.data_type()) {
                f.with_data_type(DataType::Utf8)
            } else {
                f
            }
        })
        .collect();
    Arc::new(arrow::datatypes::Schema::new_with_metadata(
        fields,
        schema.metadata().clone(),
    ))
}

/// An open data file.
enum FormatWriter {
    Parquet(Box<ParallelParquetWriter>, SchemaRef),
    Json(
        arrow::json::LineDelimitedWriter<BufWriter<fs::File>>,
        SchemaRef,
    ),
    Csv(Box<arrow::csv::Writer<BufWriter<fs::File>>>, SchemaRef),
}

impl FormatWriter {
    fn create(path: &Path, format: &FileFormat, schema: &SchemaRef) -> Result<FormatWriter> {
        let file = fs::File::create(path).map_err(|e| Error::io(path, e))?;
        Ok(match format {
            FileFormat::Parquet(c) => {
                let props = WriterProperties::builder()
                    .set_compression(*c)
                    .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
                    .build();
                FormatWriter::Parquet(
                    Box::new(ParallelParquetWriter::try_new(
                        file,
                        Arc::clone(schema),
                        props,
                        encode_threads(),
                    )?),
                    Arc::clone(schema),
                )
            }
            FileFormat::Json => FormatWriter::Json(
                arrow::json::LineDelimitedWriter::new(BufWriter::new(file)),
                Arc::clone(schema),
            ),
            FileFormat::Csv { header, delimiter } => FormatWriter::Csv(
                Box::new(
                    arrow::csv::WriterBuilder::new()
                        .with_header(*header)
                        .with_delimiter(*delimiter)
                        .build(BufWriter::new(file)),
                ),
                Arc::clone(schema),
            ),
        })
    }

    fn schema(&self) -> &SchemaRef {
        match self {
            FormatWriter::Parquet(_, s) | FormatWriter::Json(_, s) | FormatWriter::Csv(_, s) => s,
        }
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match self {
            FormatWriter::Parquet(w, _) => w.write(batch)?,
            FormatWriter::Json(w, _) => w.write(batch)?,
            FormatWriter::Csv(w, _) => w.write(batch)?,
        }
        Ok(())
    }

    fn finish(self) -> Result<()> {
        use std::io::Write;
        let file = match self {
            FormatWriter::Parquet(w, _) => w.into_inner()?,
            FormatWriter::Json(mut w, _) => {
                w.finish()?;
                w.into_inner()
                    .into_inner()
                    .map_err(|e| Error::runtime(e.to_string()))?
            }
            FormatWriter::Csv(w, _) => {
                let mut b = w.into_inner();
                b.flush().map_err(|e| Error::runtime(e.to_string()))?;
                b.into_inner().map_err(|e| Error::runtime(e.to_string()))?
            }
        };
        if crate::engine::storage::local::fsync_enabled() {
            file.sync_all().map_err(|e| Error::runtime(e.to_string()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_spark() {
        assert_eq!(escape_path_name("a b"), "a b");
        assert_eq!(
            escape_path_name("2024-01-01 10:00:00"),
            "2024-01-01 10%3A00%3A00"
        );
        assert_eq!(escape_path_name("a/b=c%"), "a%2Fb%3Dc%25");
    }
}
