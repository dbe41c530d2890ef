//! Streaming source implementations: files (json, csv, parquet, text),
//! rate, socket and memory (Delta tables and Kafka topics are read by the
//! `pipelines-delta` and `pipelines-kafka` crates), and the helpers every
//! source uses.
//!
//! [`open_source`] opens the source a plan's leaf declares;
//! [`open_table_reader`] opens a read of one of the pipeline's own
//! tables (a Delta table, or a directory written by the file sink, read
//! through its `_spark_metadata` manifest).
//!
//! Option names are Spark's and matched case-insensitively; the spec's
//! `flows.<name>.options` ([`SourceContext::option_overrides`]) win over the
//! options written in code. Relative paths resolve against
//! [`SourceContext::base_dir`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arrow::datatypes::SchemaRef;

use crate::connector::SourceRequest;
use crate::engine::source::{FlowSource, Source, SourceContext};
use crate::engine::storage::Location;
use crate::error::{Error, Result};
use crate::plan::reader::SourceSpec;

pub mod file;
mod json_fast;
mod kept_rows;
pub mod memory;
pub(crate) mod null_columns;
mod parquet_chunks;
mod parse;
pub mod rate;
pub mod socket;
mod string_dictionary;

pub use file::{FileFormat, FileSource};
pub use memory::{memory_stream, MemorySource, MemoryStream};
pub use rate::RateSource;
pub use socket::SocketSource;

/// Opens the streaming source `spec` declares, through its format's
/// connector. `schema` is the resolved output schema of this leaf of the
/// plan; every batch the source returns has it.
pub fn open_source(
    spec: &SourceSpec,
    schema: SchemaRef,
    ctx: SourceContext,
) -> Result<Box<dyn Source>> {
    let options = Options::merged(&spec.options, &ctx.option_overrides, &ctx.flow);
    let flow = ctx.flow.clone();
    let opened = match spec.format.connector() {
        Some(connector) => connector.open(SourceRequest {
            path: spec.path.as_deref(),
            schema,
            options,
            ctx,
            streaming: spec.streaming,
            table: false,
        }),
        None => Err(Error::runtime(format!(
            "no connector reads `{}`",
            spec.format
        ))),
    };
    in_flow(flow, opened)
}

/// `opened`, its errors and those of every later call naming `flow`.
fn in_flow(flow: String, opened: Result<Box<dyn Source>>) -> Result<Box<dyn Source>> {
    match opened {
        Ok(source) => Ok(Box::new(FlowSource::new(flow, source))),
        Err(e) => Err(e.in_flow(&flow)),
    }
}

/// Opens a streaming read of one of the pipeline's own tables at `path`
/// ([`open_table_reader`] with `streaming` true).
pub fn open_table_source(
    path: impl Into<Location>,
    format: &str,
    schema: SchemaRef,
    options: &BTreeMap<String, String>,
    ctx: SourceContext,
) -> Result<Box<dyn Source>> {
    open_table_reader(&path.into(), format, schema, options, ctx, true)
}

/// Opens a read of one of the pipeline's own tables at `path` through the
/// connector of its storage `format`: a Delta table (streamed commit by
/// commit, or its latest snapshot when `streaming` is false, see
/// `pipelines_delta::DeltaSource`), or a directory written by the file sink in `parquet`,
/// `json`, `csv` or `text`, of which only files committed to its
/// `_spark_metadata` manifest are read, in log order; until the manifest
/// exists the table has no data.
pub fn open_table_reader(
    path: &Location,
    format: &str,
    schema: SchemaRef,
    options: &BTreeMap<String, String>,
    ctx: SourceContext,
    streaming: bool,
) -> Result<Box<dyn Source>> {
    let options = Options::merged(options, &ctx.option_overrides, &ctx.flow);
    let Some(connector) = crate::connector::source(format).filter(|c| c.reads_tables()) else {
        let readable: Vec<&str> = crate::connector::source_names()
            .into_iter()
            .filter(|n| crate::connector::source(n).is_some_and(|c| c.reads_tables()))
            .collect();
        let (last, rest) = readable.split_last().unwrap_or((&"", &[]));
        return Err(Error::runtime_with_help(
            format!(
                "flow `{}`: streaming reads of `{}` tables are not supported yet",
                ctx.flow,
                format.trim().to_ascii_lowercase()
            ),
            format!("store the table as {} or {last}", rest.join(", ")),
        ));
    };
    let path = path.as_text();
    let flow = ctx.flow.clone();
    let opened = connector.open(SourceRequest {
        path: Some(&path),
        schema,
        options,
        ctx,
        streaming,
        table: true,
    });
    in_flow(flow, opened)
}

pub use crate::options::Options;

/// Runs a third-party decoder (Parquet, Arrow IPC) over one file: a panic
/// inside it — a damaged file it does not validate — becomes an error
/// saying so, instead of taking the process down (and, as the file is in
/// the batch's log, taking it down again on every restart).
pub(crate) fn without_panics<T>(decode: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(decode)) {
        Ok(result) => result,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_string());
            Err(Error::runtime(format!("the decoder failed on it: {what}")))
        }
    }
}

/// Replaces the file `path` of a source's checkpoint directory with
/// `contents` atomically (locally a temporary file renamed into place, in
/// object storage one put). Creates the parent directory.
pub fn write_atomic(path: &Location, contents: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        dir.create_dir()?;
    }
    path.replace(contents)
}

/// The text of the file `path` of a source's checkpoint directory; `None`
/// when it does not exist.
pub fn read_state_file(path: &Location) -> Result<Option<String>> {
    path.read_text("restore the checkpoint, or reset the flow with `--full-refresh`")
}

/// Resolves a user path against the base directory; strips a `file:` scheme.
pub fn resolve_path(base: &Path, path: &str) -> PathBuf {
    let p = path
        .strip_prefix("file://")
        .or_else(|| path.strip_prefix("file:"))
        .unwrap_or(path);
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// Current wall-clock time in milliseconds since the epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// One committed file of a file-sink manifest, as the source needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ManifestFile {
    pub path: Location,
    pub size: u64,
    pub modification_time_ms: i64,
}

/// The files committed to `dir/_spark_metadata`, in log order; `None` when
/// the directory has no manifest.
pub(crate) fn manifest_files(dir: &Location) -> Result<Option<Vec<ManifestFile>>> {
    Ok(crate::engine::sinks::committed_files(dir)?.map(|files| {
        files
            .into_iter()
            .map(|f| ManifestFile {
                path: f.path,
                size: f.size,
                modification_time_ms: f.modification_time_ms,
            })
            .collect()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decoder_panic_becomes_an_error() {
        let e =
            without_panics::<()>(|| panic!("index out of bounds: the len is 3 but the index is 7"))
                .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the decoder failed on it: index out of bounds: the len is 3 but the index is 7"
        );
        let n = 7;
        let e = without_panics::<()>(|| panic!("offset {n}")).unwrap_err();
        assert_eq!(e.to_string(), "the decoder failed on it: offset 7");
        assert_eq!(without_panics(|| Ok(5)).unwrap(), 5);
    }
}
