//! Shared helpers for Delta Lake tables (delta-rs): opening a table by
//! path, running delta-rs' async operations from the synchronous sink and
//! source code, reading the transaction log commit by commit, and reading
//! data files into a dataset's schema.
//!
//! Writes go through delta-rs (`write`, `merge`, `delete`), so every commit
//! is a regular Delta commit any reader opens. Reads of committed data
//! follow the log's JSON commits (`_delta_log/<version>.json`): the
//! streaming source needs each commit's added files in order, which is what
//! Spark's Delta source reads too.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, StringArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use deltalake::DeltaTable;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use pipelines_core::engine::storage::Location;
use pipelines_core::error::{Error, Result};

/// The directory of a Delta table's transaction log.
pub const LOG_DIR: &str = "_delta_log";

/// Runs a delta-rs future to completion from synchronous code (on the
/// runtime object storage uses too).
pub use pipelines_core::engine::storage::object::block_on;

/// The URL delta-rs opens the table at: `file://` of a local directory
/// (which must exist), or the `s3://bucket/prefix/` of one in object storage.
pub fn table_url(path: &Location) -> Result<url::Url> {
    let path = match path {
        Location::Local(p) => p,
        Location::Object(k) => {
            crate::storage::register();
            return url::Url::parse(&format!("{}/", k.url())).map_err(|e| {
                Error::runtime(format!("Delta table {} is not a valid URL: {e}", k.url()))
            });
        }
    };
    let abs = fs::canonicalize(path).map_err(|e| Error::io(path, e))?;
    url::Url::from_directory_path(&abs).map_err(|()| {
        Error::runtime(format!(
            "Delta table path {} cannot be turned into a file URL",
            abs.display()
        ))
    })
}

/// True when `path` holds a Delta table (a `_delta_log` with a commit).
pub fn is_delta_table(path: impl Into<Location>) -> bool {
    latest_version(path).ok().flatten().is_some()
}

/// Opens the Delta table at `path` (created as a directory when missing);
/// the table may have no commit yet (`version()` is `None` then).
pub fn open_table(path: impl Into<Location>) -> Result<DeltaTable> {
    let path = &path.into();
    if let Location::Local(p) = path {
        fs::create_dir_all(p).map_err(|e| Error::io(p, e))?;
    }
    let url = table_url(path)?;
    block_on(async move { DeltaTable::try_from_url(url).await })
        .map_err(|e| delta_error(path, "could not open the Delta table", e))
}

/// A delta-rs error as ours, naming the table.
pub fn delta_error(path: &Location, what: &str, e: deltalake::DeltaTableError) -> Error {
    Error::external(format!("{what} at {}", path.as_text()), e)
}

/// True for the errors a concurrent commit causes, after which the write is
/// retried against the new table version.
pub fn is_commit_conflict(e: &deltalake::DeltaTableError) -> bool {
    use deltalake::kernel::transaction::TransactionError;
    match e {
        deltalake::DeltaTableError::Transaction { source } => matches!(
            source,
            TransactionError::CommitConflict(_)
                | TransactionError::VersionAlreadyExists(_)
                | TransactionError::MaxCommitAttempts(_)
        ),
        deltalake::DeltaTableError::VersionAlreadyExists(_) => true,
        other => {
            let text = other.to_string();
            text.contains("Concurrent") || text.contains("already exists")
        }
    }
}

/// Empties the Delta table at `path` in one new version (every data file
/// removed), keeping its history: a full refresh. With `schema`, the table
/// takes that schema (the flow's current output, which may have changed).
/// A directory that is not a Delta table is left alone; returns whether a
/// table was truncated.
pub fn truncate(
    path: &Location,
    schema: Option<SchemaRef>,
    partition_cols: &[String],
) -> Result<bool> {
    if !is_delta_table(path) {
        return Ok(false);
    }
    let table = open_table(path)?;
    let result = match schema {
        None => block_on(async move { table.delete().await.map(|(t, _)| t) }),
        Some(schema) => {
            let schema = nullable_schema(&schema);
            let mut write = table
                .write(vec![RecordBatch::new_empty(schema)])
                .with_save_mode(deltalake::protocol::SaveMode::Overwrite)
                .with_schema_mode(deltalake::operations::write::SchemaMode::Overwrite);
            if !partition_cols.is_empty() {
                write = write.with_partition_columns(partition_cols.to_vec());
            }
            block_on(async move { write.await })
        }
    };
    result.map_err(|e| delta_error(path, "could not truncate the Delta table", e))?;
    Ok(true)
}

/// The newest committed version of the table at `path` (the highest
/// `_delta_log/<version>.json`), `None` when it has no commit.
pub fn latest_version(path: impl Into<Location>) -> Result<Option<u64>> {
    let log = path.into().join(LOG_DIR);
    let mut best = None;
    for name in log.list()? {
        if let Some(stem) = name.strip_suffix(".json") {
            if stem.len() == 20 {
                if let Ok(v) = stem.parse::<u64>() {
                    best = Some(best.map_or(v, |b: u64| b.max(v)));
                }
            }
        }
    }
    Ok(best)
}

/// A data file added by a commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddFile {
    /// Where the parquet file is (an absolute path, or an object).
    pub path: Location,
    /// The path as written in the log (relative to the table, URL-encoded).
    pub log_path: String,
    /// Partition values by column name (`None`: null).
    pub partition_values: BTreeMap<String, Option<String>>,
    /// Size in bytes.
    pub size: u64,
    /// False for files that only reorganise data (`OPTIMIZE`).
    pub data_change: bool,
}

/// The actions of one commit that matter to readers.
#[derive(Clone, Debug, Default)]
pub struct Commit {
    /// The commit's version.
    pub version: u64,
    /// Files added, in log order.
    pub adds: Vec<AddFile>,
    /// Paths removed (as in the log) and whether each removal changes data.
    pub removes: Vec<(String, bool)>,
    /// The operation, from `commitInfo` (e.g. `WRITE`, `MERGE`, `DELETE`).
    pub operation: Option<String>,
}

impl Commit {
    /// True when the commit deletes or rewrites rows (a data-changing remove).
    pub fn changes_data(&self) -> bool {
        self.removes.iter().any(|(_, data_change)| *data_change)
    }

    /// The added files that carry new data.
    pub fn data_adds(&self) -> impl Iterator<Item = &AddFile> {
        self.adds.iter().filter(|a| a.data_change)
    }
}

/// Reads commit `version` of the table at `dir`; `None` when that version
/// is not committed yet.
pub fn read_commit(dir: &Location, version: u64) -> Result<Option<Commit>> {
    let file = dir.join(LOG_DIR).join(&format!("{version:020}.json"));
    let Some(text) = file.read_text("the Delta table's log is damaged")? else {
        return Ok(None);
    };
    let mut commit = Commit {
        version,
        ..Commit::default()
    };
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let action: serde_json::Value = serde_json::from_str(line).map_err(|e| {
            Error::checkpoint(
                file.shown(),
                format!("line {} is not a JSON action: {e}", i + 1),
            )
        })?;
        if let Some(add) = action.get("add") {
            if !add
                .get("deletionVector")
                .map(serde_json::Value::is_null)
                .unwrap_or(true)
            {
                return Err(Error::runtime_with_help(
                    format!(
                        "Delta table at {}: version {version} has a file with a deletion vector, which this reader does not apply",
                        dir.as_text()
                    ),
                    "disable deletion vectors on the table (`delta.enableDeletionVectors = false`) and rewrite it with OPTIMIZE",
                ));
            }
            let log_path = add
                .get("path")
                .and_then(|p| p.as_str())
                .unwrap_or_default()
                .to_string();
            let partition_values = add
                .get("partitionValues")
                .and_then(|p| p.as_object())
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().map(str::to_string)))
                        .collect()
                })
                .unwrap_or_default();
            commit.adds.push(AddFile {
                path: resolve_log_path(dir, &log_path),
                log_path,
                partition_values,
                size: add.get("size").and_then(|s| s.as_u64()).unwrap_or(0),
                data_change: add
                    .get("dataChange")
                    .and_then(|d| d.as_bool())
                    .unwrap_or(true),
            });
        } else if let Some(remove) = action.get("remove") {
            let path = remove
                .get("path")
                .and_then(|p| p.as_str())
                .unwrap_or_default()
                .to_string();
            let data_change = remove
                .get("dataChange")
                .and_then(|d| d.as_bool())
                .unwrap_or(true);
            commit.removes.push((path, data_change));
        } else if let Some(info) = action.get("commitInfo") {
            commit.operation = info
                .get("operation")
                .and_then(|o| o.as_str())
                .map(str::to_string);
        }
    }
    Ok(Some(commit))
}

/// The data files of the table's snapshot at `version`, in the order they
/// were added (replaying the log from version 0).
pub fn snapshot_files(dir: &Location, version: u64) -> Result<Vec<AddFile>> {
    let mut files: Vec<AddFile> = Vec::new();
    for v in 0..=version {
        let Some(commit) = read_commit(dir, v)? else {
            return Err(Error::runtime_with_help(
                format!(
                    "Delta table at {}: the log has no JSON commit for version {v} (cleaned up or not written yet)",
                    dir.as_text()
                ),
                "read the table from a later version with the `startingVersion` option",
            ));
        };
        if !commit.removes.is_empty() {
            let removed: HashSet<&str> = commit.removes.iter().map(|(p, _)| p.as_str()).collect();
            files.retain(|f| !removed.contains(f.log_path.as_str()));
        }
        files.extend(commit.adds);
    }
    Ok(files)
}

/// Where a file named in the log is: relative to the table and
/// percent-encoded, or an absolute `file://` or `s3://` URI.
fn resolve_log_path(dir: &Location, log_path: &str) -> Location {
    if let Ok(url) = url::Url::parse(log_path) {
        if url.scheme() == "file" {
            if let Ok(p) = url.to_file_path() {
                return Location::Local(p);
            }
        }
        if let Ok(Some(key)) =
            pipelines_core::engine::storage::object_key(&percent_decode(log_path))
        {
            return Location::Object(key);
        }
    }
    dir.join(&percent_decode(log_path))
}

fn percent_decode(s: &str) -> String {
    String::from_utf8_lossy(&pipelines_core::engine::uri::percent_decode(s)).into_owned()
}

/// Reads data files into `schema`: columns are matched by name (exactly,
/// then ignoring case), cast to the schema's types; columns the file lacks
/// (added later by `mergeSchema`) are null; partition columns come from the
/// log's partition values.
pub fn read_files(files: &[AddFile], schema: &SchemaRef) -> Result<(Vec<RecordBatch>, u64)> {
    let mut out = Vec::new();
    let mut bytes = 0;
    for f in files {
        bytes += f.size;
        let batches = match &f.path {
            Location::Local(p) => {
                let file = fs::File::open(p).map_err(|e| Error::io(p, e))?;
                read_parquet(file)?
            }
            Location::Object(_) => {
                let data = f.path.read()?.ok_or_else(|| {
                    Error::runtime_with_help(
                        format!("Delta data file {} is missing", f.path),
                        "the table's log names a file that is gone (vacuumed?); run a full refresh of the reading flow's target",
                    )
                })?;
                read_parquet(bytes::Bytes::from(data))?
            }
        };
        for batch in batches {
            out.push(conform(&batch, &f.partition_values, schema, &f.path)?);
        }
    }
    Ok((out, bytes))
}

/// Every batch of one Parquet file.
fn read_parquet<R: parquet::file::reader::ChunkReader + 'static>(
    reader: R,
) -> Result<Vec<RecordBatch>> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(reader)?
        .with_batch_size(64 * 1024)
        .build()?;
    Ok(reader.collect::<std::result::Result<Vec<_>, _>>()?)
}

fn conform(
    batch: &RecordBatch,
    partition_values: &BTreeMap<String, Option<String>>,
    schema: &SchemaRef,
    file: &Location,
) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    let file_schema = batch.schema();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let found = file_schema
            .index_of(field.name())
            .ok()
            .or_else(|| {
                file_schema
                    .fields()
                    .iter()
                    .position(|f| f.name().eq_ignore_ascii_case(field.name()))
            })
            .map(|i| batch.column(i).clone());
        let column = match found {
            Some(c) => c,
            None => match partition_values
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(field.name()))
            {
                Some((_, value)) => {
                    Arc::new(StringArray::from(vec![value.as_deref(); rows])) as ArrayRef
                }
                None => new_null_array(field.data_type(), rows),
            },
        };
        let column = if column.data_type() == field.data_type() {
            column
        } else {
            cast(&column, field.data_type()).map_err(|e| {
                Error::runtime_with_help(
                    format!(
                        "Delta file {}: column `{}` is {} and cannot be read as {}: {e}",
                        file.as_text(),
                        field.name(),
                        column.data_type(),
                        field.data_type()
                    ),
                    "the table's column type changed; run a full refresh of the reading flow's target",
                )
            })?
        };
        columns.push(column);
    }
    let loose = Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Fields>(),
    ));
    let opts = RecordBatchOptions::new().with_row_count(Some(rows));
    let strict = RecordBatch::try_new_with_options(schema.clone(), columns.clone(), &opts);
    Ok(match strict {
        Ok(b) => b,
        // A column the file lacks is null where the schema says non-null.
        Err(_) => RecordBatch::try_new_with_options(loose, columns, &opts)?,
    })
}

/// The schema with every field (also nested) nullable, as the Delta tables
/// of a pipeline declare their columns: a later batch may have nulls.
pub fn nullable_schema(schema: &Schema) -> SchemaRef {
    Arc::new(Schema::new_with_metadata(
        schema
            .fields()
            .iter()
            .map(|f| Arc::new(nullable_field(f)))
            .collect::<Fields>(),
        schema.metadata().clone(),
    ))
}

fn nullable_field(f: &Field) -> Field {
    f.clone()
        .with_data_type(nullable_type(f.data_type()))
        .with_nullable(true)
}

fn nullable_type(t: &DataType) -> DataType {
    match t {
        DataType::Struct(fields) => {
            DataType::Struct(fields.iter().map(|f| Arc::new(nullable_field(f))).collect())
        }
        DataType::List(f) => DataType::List(Arc::new(nullable_field(f))),
        DataType::LargeList(f) => DataType::LargeList(Arc::new(nullable_field(f))),
        other => other.clone(),
    }
}

/// `batch` with the nullable version of its schema (see [`nullable_schema`]).
pub fn to_nullable(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(c.clone())
            } else {
                cast(c, f.data_type())
            }
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )?)
}

/// Reads the current contents of the Delta table at `path` (its latest
/// snapshot) in the table's own schema. `None` when it is not a Delta table.
pub fn read_table(path: impl Into<Location>) -> Result<Option<Vec<RecordBatch>>> {
    let path: Location = path.into();
    let Some(version) = latest_version(&path)? else {
        return Ok(None);
    };
    let schema = table_schema(&path)?;
    let files = snapshot_files(&path, version)?;
    Ok(Some(read_files(&files, &schema)?.0))
}

/// The Arrow schema of the Delta table at `path`, as delta-rs reads it.
pub fn table_schema(path: impl Into<Location>) -> Result<SchemaRef> {
    let path = &path.into();
    let table = open_table(path)?;
    let state = table
        .snapshot()
        .map_err(|e| delta_error(path, "could not read the Delta table's schema", e))?;
    Ok(state.snapshot().arrow_schema())
}

/// The application transaction version recorded for `app_id` (the batch
/// id of the last batch a query committed), if any.
pub fn transaction_version(table: &DeltaTable, app_id: &str) -> Result<Option<i64>> {
    let Ok(state) = table.snapshot() else {
        return Ok(None);
    };
    let log_store = table.log_store();
    let app = app_id.to_string();
    block_on(async move { state.transaction_version(log_store.as_ref(), app).await }).map_err(|e| {
        Error::runtime(format!(
            "could not read the Delta table's transactions: {e}"
        ))
    })
}

/// The number of rows in `batches`.
pub fn num_rows(batches: &[RecordBatch]) -> u64 {
    batches.iter().map(|b| b.num_rows() as u64).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_paths_are_percent_decoded() {
        assert_eq!(percent_decode("a%20b/c%3D1.parquet"), "a b/c=1.parquet");
        assert_eq!(percent_decode("plain.parquet"), "plain.parquet");
        assert_eq!(percent_decode("bad%zz"), "bad%zz");
    }
}
