//! Streaming source implementations: files (json, csv, parquet, text), Delta
//! tables, rate, socket, memory and kafka.
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
use std::fs;
use std::path::{Path, PathBuf};

use arrow::datatypes::SchemaRef;

use crate::engine::source::{Source, SourceContext};
use crate::error::{Error, Result};
use crate::plan::reader::{SourceFormat, SourceSpec};

pub mod delta;
pub mod file;
mod json_fast;
pub mod kafka;
pub mod memory;
pub(crate) mod null_columns;
mod parquet_chunks;
mod parse;
pub mod rate;
pub mod socket;

pub use delta::DeltaSource;
pub use file::{FileFormat, FileSource};
pub use kafka::KafkaSource;
pub use memory::{memory_stream, MemorySource, MemoryStream};
pub use rate::RateSource;
pub use socket::SocketSource;

/// Opens the streaming source `spec` declares. `schema` is the resolved
/// output schema of this leaf of the plan; every batch the source returns has
/// it.
pub fn open_source(
    spec: &SourceSpec,
    schema: SchemaRef,
    ctx: SourceContext,
) -> Result<Box<dyn Source>> {
    let options = Options::merged(&spec.options, &ctx.option_overrides, &ctx.flow);
    match spec.format {
        SourceFormat::Json | SourceFormat::Csv | SourceFormat::Parquet | SourceFormat::Text => {
            let format = FileFormat::from_source_format(spec.format)
                .ok_or_else(|| Error::runtime(format!("{} is not a file format", spec.format)))?;
            let path = spec
                .path
                .as_deref()
                .or_else(|| options.get("path"))
                .ok_or_else(|| {
                    Error::runtime_with_help(
                        format!("flow `{}`: {} source has no path", ctx.flow, spec.format),
                        format!("load it with .load(\"data/{}\")", spec.format),
                    )
                })?
                .to_string();
            Ok(Box::new(FileSource::open(
                &path, format, schema, options, ctx, false,
            )?))
        }
        SourceFormat::Rate => Ok(Box::new(RateSource::open(schema, options, ctx)?)),
        SourceFormat::Socket => Ok(Box::new(SocketSource::open(schema, options, ctx)?)),
        SourceFormat::Memory => {
            let name = spec
                .path
                .as_deref()
                .or_else(|| options.get("name"))
                .or_else(|| options.get("queryName"))
                .ok_or_else(|| {
                    Error::runtime_with_help(
                        format!("flow `{}`: memory source has no stream name", ctx.flow),
                        "load it with .load(\"stream_name\") or .option(\"name\", \"stream_name\")",
                    )
                })?
                .to_string();
            Ok(Box::new(MemorySource::open(&name, schema, ctx)?))
        }
        SourceFormat::Delta => {
            let path = spec
                .path
                .as_deref()
                .or_else(|| options.get("path"))
                .ok_or_else(|| {
                    Error::runtime_with_help(
                        format!("flow `{}`: delta source has no path", ctx.flow),
                        "load it with .load(\"path/to/table\")",
                    )
                })?
                .to_string();
            Ok(Box::new(DeltaSource::open(
                &path,
                schema,
                options,
                ctx,
                !spec.streaming,
            )?))
        }
        SourceFormat::Kafka => Ok(Box::new(KafkaSource::open(
            schema,
            options,
            ctx,
            spec.streaming,
        )?)),
    }
}

/// Opens a streaming read of one of the pipeline's own tables at `path`
/// ([`open_table_reader`] with `streaming` true).
pub fn open_table_source(
    path: &Path,
    format: &str,
    schema: SchemaRef,
    options: &BTreeMap<String, String>,
    ctx: SourceContext,
) -> Result<Box<dyn Source>> {
    open_table_reader(path, format, schema, options, ctx, true)
}

/// Opens a read of one of the pipeline's own tables at `path`: a Delta table
/// (`format` `delta`: streamed commit by commit, or its latest snapshot when
/// `streaming` is false, see [`DeltaSource`]), or a directory written by the
/// file sink in `parquet`, `json`, `csv` or `text`, of which only files
/// committed to its `_spark_metadata` manifest are read, in log order;
/// until the manifest exists the table has no data.
pub fn open_table_reader(
    path: &Path,
    format: &str,
    schema: SchemaRef,
    options: &BTreeMap<String, String>,
    ctx: SourceContext,
    streaming: bool,
) -> Result<Box<dyn Source>> {
    let options = Options::merged(options, &ctx.option_overrides, &ctx.flow);
    let format = match format.trim().to_ascii_lowercase().as_str() {
        "delta" => {
            let path = path.to_string_lossy().into_owned();
            return Ok(Box::new(DeltaSource::open(
                &path, schema, options, ctx, !streaming,
            )?));
        }
        "json" => FileFormat::Json,
        "csv" => FileFormat::Csv,
        "parquet" => FileFormat::Parquet,
        "text" => FileFormat::Text,
        other => {
            return Err(Error::runtime_with_help(
                format!(
                    "flow `{}`: streaming reads of `{other}` tables are not supported yet",
                    ctx.flow
                ),
                "store the table as delta, parquet, json, csv or text",
            ))
        }
    };
    let path = path.to_string_lossy().into_owned();
    Ok(Box::new(FileSource::open(
        &path, format, schema, options, ctx, true,
    )?))
}

/// Source options with case-insensitive keys (Spark's option names), the
/// spec's overrides already applied.
#[derive(Clone, Debug, Default)]
pub struct Options {
    map: BTreeMap<String, String>,
    flow: String,
}

impl Options {
    /// `base` overridden by `overrides`, keys compared case-insensitively.
    pub fn merged(
        base: &BTreeMap<String, String>,
        overrides: &BTreeMap<String, String>,
        flow: &str,
    ) -> Self {
        let mut map = BTreeMap::new();
        for (k, v) in base.iter().chain(overrides.iter()) {
            map.insert(k.to_ascii_lowercase(), v.clone());
        }
        Options {
            map,
            flow: flow.to_string(),
        }
    }

    /// Every option, keys lower-cased.
    pub fn entries(&self) -> &BTreeMap<String, String> {
        &self.map
    }

    /// An option by key (case-insensitive).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.map.get(&key.to_ascii_lowercase()).map(String::as_str)
    }

    fn invalid(&self, key: &str, value: &str, expected: &str, example: &str) -> Error {
        Error::runtime_with_help(
            format!(
                "flow `{}`: option `{key}` must be {expected}, got `{value}`",
                self.flow
            ),
            format!(".option(\"{key}\", \"{example}\")"),
        )
    }

    /// A boolean option (`true`/`false`, case-insensitive).
    pub fn bool(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(self.invalid(key, v, "true or false", "true")),
            },
        }
    }

    /// A positive whole-number option.
    pub fn positive(&self, key: &str) -> Result<Option<u64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.trim().parse::<u64>() {
                Ok(n) if n > 0 => Ok(Some(n)),
                _ => Err(self.invalid(key, v, "a positive whole number", "10")),
            },
        }
    }

    /// A byte-size option: a number of bytes, or with a suffix `k`, `m`, `g`
    /// (`kb`, `mb`, `gb`).
    pub fn bytes(&self, key: &str) -> Result<Option<u64>> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let t = v.trim().to_ascii_lowercase();
        let t = t.strip_suffix('b').unwrap_or(&t);
        let (num, mult) = match t.chars().last() {
            Some('k') => (&t[..t.len() - 1], 1u64 << 10),
            Some('m') => (&t[..t.len() - 1], 1 << 20),
            Some('g') => (&t[..t.len() - 1], 1 << 30),
            Some('t') => (&t[..t.len() - 1], 1 << 40),
            _ => (t, 1),
        };
        match num.trim().parse::<u64>() {
            Ok(n) if n > 0 => Ok(Some(n.saturating_mul(mult))),
            _ => Err(self.invalid(key, v, "a positive size in bytes (e.g. 10m)", "10m")),
        }
    }

    /// A single-character option (`sep`, `quote`, `escape`); `\t` is a tab.
    pub fn byte_char(&self, key: &str) -> Result<Option<u8>> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let c = match v {
            "\\t" => "\t",
            "\\\\" => "\\",
            other => other,
        };
        if c.len() == 1 && c.is_ascii() {
            Ok(Some(c.as_bytes()[0]))
        } else {
            Err(self.invalid(key, v, "a single ASCII character", ","))
        }
    }
}

/// Writes `contents` to `path` atomically (temporary file in the same
/// directory, fsync, rename). Creates the parent directory.
pub(crate) fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    crate::engine::checkpoint::write_atomic(path, contents)
}

/// Resolves a user path against the base directory; strips a `file:` scheme.
pub(crate) fn resolve_path(base: &Path, path: &str) -> PathBuf {
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
    pub path: PathBuf,
    pub size: u64,
    pub modification_time_ms: i64,
}

/// The files committed to `dir/_spark_metadata`, in log order; `None` when
/// the directory has no manifest.
pub(crate) fn manifest_files(dir: &Path) -> Result<Option<Vec<ManifestFile>>> {
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
