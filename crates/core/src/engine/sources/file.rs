//! The file source: json (JSON lines), csv, parquet and text files in a
//! directory or matching a glob, with Spark's `FileStreamSource` offsets.
//!
//! Each trigger lists the directory (recursively, skipping hidden files and
//! directories: names starting with `.` or `_`, except `_` names holding a
//! `=`) or the glob, takes the files not seen before in modification-time
//! order (ties by path; `latestFirst=true` reverses), caps them by
//! `maxFilesPerTrigger` / `maxBytesPerTrigger` (at least one file), and
//! records them as batch `N` of the source's private log,
//! `<state_dir>/<N>`, in Spark's format (a `v1` line, then one JSON line per
//! file: `{"path":"file:///…","timestamp":<mtime ms>,"batchId":N}`), before
//! the runtime writes its offsets. The offset is `{"logOffset": N}`;
//! reading `(start, end]` reads exactly the files logged for the batches in
//! that range, so a replay after a crash reads the same files, and on
//! restart the seen-set is rebuilt from the log: no file is read twice and
//! none is skipped.
//!
//! A directory written by a file sink (it has `_spark_metadata`) is read
//! through its manifest: only committed files, in log order.
//!
//! The path may be in object storage (`s3://bucket/prefix`, a key, or a
//! glob over keys): the prefix is listed (objects' last-modified times order
//! them), a batch's objects are fetched eight at a time into memory and
//! decoded from there, and the log names them `s3a://bucket/key` as
//! Spark's S3 file system does. A prefix without objects yet is an empty
//! directory, not an error (object storage has no directories to create).
//!
//! Options: `maxFilesPerTrigger`, `maxBytesPerTrigger`, `latestFirst`,
//! `fileNameOnly`, `pathGlobFilter`, `ignoreMissingFiles`,
//! `ignoreCorruptFiles`, `mode` (`PERMISSIVE`, `DROPMALFORMED`,
//! `FAILFAST`), `columnNameOfCorruptRecord`, json `multiLine`, csv
//! `header`, `sep`/`delimiter`, `quote`, `escape`, `comment`, `nullValue`.
//! Timestamps are read in ISO-8601 (`2026-11-01T10:00:05Z`,
//! `2026-11-01 10:00:05`, UTC when no zone is given); `timestampFormat` or
//! `dateFormat` with another pattern is refused with the way to convert.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use globset::{GlobBuilder, GlobMatcher};
use serde_json::json;

use super::parse::{self, CsvOptions, FileToRead, Mode, ParseConfig};
use super::{manifest_files, read_state_file, resolve_path, Options};
use crate::engine::leaf_filter::LeafFilter;
use crate::engine::source::{Backlog, Offset, ReadBatch, Source, SourceContext};
use crate::engine::storage::{object, Location, ObjectKey, WriteOnce};
use crate::error::{Error, Result};

pub use super::parse::FileFormat;

/// What is listed each trigger.
#[derive(Debug)]
enum Root {
    /// A directory, listed recursively.
    Dir(Location),
    /// A single file.
    File(Location),
    /// Files under `base` whose path relative to it matches the glob.
    Glob {
        base: Location,
        matcher: GlobMatcher,
        max_depth: Option<usize>,
    },
}

/// A listed file.
#[derive(Clone, Debug)]
struct Candidate {
    path: Location,
    mtime: i64,
    size: u64,
}

/// One line of the source log.
#[derive(Clone, Debug)]
struct LogEntry {
    path: Location,
}

/// The streaming file source (see the module documentation).
#[derive(Debug)]
pub struct FileSource {
    flow: String,
    declared_path: String,
    format: FileFormat,
    schema: SchemaRef,
    root: Root,
    /// A pipeline table: read only through the manifest.
    table: bool,
    state_dir: Location,
    max_files: Option<u64>,
    max_bytes: Option<u64>,
    latest_first: bool,
    file_name_only: bool,
    path_filter: Option<GlobMatcher>,
    ignore_missing: bool,
    parse: ParseConfig,
    /// The source log: files of each planned batch.
    log: BTreeMap<u64, Vec<LogEntry>>,
    seen: HashSet<String>,
    /// Whether the directory is read through its manifest (decided at the
    /// first listing that finds files, like Spark).
    manifest: Option<bool>,
    /// Available-now runs: the files listed when the run started, not read
    /// yet, in reading order (like Spark, the directory is listed once).
    available_now: Option<VecDeque<Candidate>>,
    /// How many of those were new when the run started.
    available_now_total: u64,
    threads: usize,
}

impl FileSource {
    /// Opens a file source on `path` (a directory, a file or a glob,
    /// resolved against `ctx.base_dir`). `table`: a pipeline table, read
    /// only through its manifest and allowed not to exist yet.
    pub fn open(
        path: &str,
        format: FileFormat,
        schema: SchemaRef,
        options: Options,
        ctx: SourceContext,
        table: bool,
    ) -> Result<FileSource> {
        let flow = ctx.flow.clone();
        let root = make_root(&ctx, path, table)?;
        let settings = FileSourceOptions::parse(format, &options)?;
        let corrupt_idx = match format {
            FileFormat::Json | FileFormat::Csv => schema
                .fields()
                .iter()
                .position(|f| f.name() == &settings.corrupt_name)
                .filter(|&i| schema.field(i).data_type() == &DataType::Utf8),
            _ => None,
        };
        let data_schema: SchemaRef = Arc::new(Schema::new(
            schema
                .fields()
                .iter()
                .enumerate()
                .filter(|(i, _)| Some(*i) != corrupt_idx)
                .map(|(_, f)| Field::new(f.name(), f.data_type().clone(), true))
                .collect::<Vec<_>>(),
        ));
        if format == FileFormat::Text
            && (schema.fields().len() != 1
                || !matches!(
                    schema.field(0).data_type(),
                    DataType::Utf8 | DataType::LargeUtf8
                ))
        {
            return Err(Error::runtime_with_help(
                "text source schema must be a single STRING column".to_string(),
                "remove .schema(...) to get the column `value STRING`",
            ));
        }
        let parse = ParseConfig {
            flow: flow.clone(),
            format,
            schema: schema.clone(),
            data_schema,
            corrupt_idx,
            mode: settings.mode,
            csv: settings.csv,
            multi_line: settings.multi_line,
            ignore_corrupt_files: settings.ignore_corrupt_files,
            base_dir: ctx.base_dir.clone(),
            read_columns: None,
            dictionary_columns: None,
            timestamp_columns: None,
            row_filter: None,
        };
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .clamp(1, 8);
        let mut source = FileSource {
            flow,
            declared_path: path.to_string(),
            format,
            schema,
            root,
            table,
            state_dir: ctx.state_dir.clone(),
            max_files: settings.max_files,
            max_bytes: settings.max_bytes,
            latest_first: settings.latest_first,
            file_name_only: settings.file_name_only,
            path_filter: settings.path_filter,
            ignore_missing: settings.ignore_missing,
            parse,
            log: BTreeMap::new(),
            seen: HashSet::new(),
            manifest: if table { Some(true) } else { None },
            available_now: None,
            available_now_total: 0,
            threads,
        };
        source.load_log()?;
        Ok(source)
    }

    /// The seen-set key of a file.
    fn key(&self, path: &Location) -> String {
        if self.file_name_only {
            path.file_name().unwrap_or_default()
        } else {
            path.as_text()
        }
    }

    /// Reads the source log (`<N>` and Spark's `<N>.compact` files).
    fn load_log(&mut self) -> Result<()> {
        let dir = &self.state_dir;
        let mut files: Vec<(u64, bool, Location)> = Vec::new();
        for name in dir.list()? {
            let (num, compact) = match name.strip_suffix(".compact") {
                Some(n) => (n, true),
                None => (name.as_str(), false),
            };
            if let Ok(n) = num.parse::<u64>() {
                files.push((n, compact, dir.join(&name)));
            }
        }
        files.sort();
        for (n, compact, path) in files {
            let text = read_state_file(&path)?.ok_or_else(|| {
                Error::checkpoint(path.shown(), "disappeared while it was being read")
            })?;
            let mut lines = text.lines();
            match lines.next() {
                Some(v) if v.trim().starts_with('v') => {}
                _ => {
                    return Err(Error::checkpoint(
                        path.shown(),
                        "missing version line (expected `v1`)",
                    ))
                }
            }
            if !compact {
                self.log.entry(n).or_default();
            }
            for line in lines.filter(|l| !l.trim().is_empty()) {
                let v: serde_json::Value = serde_json::from_str(line).map_err(|e| {
                    Error::checkpoint(path.shown(), format!("bad source log entry: {e}"))
                })?;
                let p = v.get("path").and_then(|p| p.as_str()).ok_or_else(|| {
                    Error::checkpoint(path.shown(), "source log entry without `path`")
                })?;
                let batch = if compact {
                    v.get("batchId").and_then(|b| b.as_u64()).unwrap_or(n)
                } else {
                    n
                };
                let entry = LogEntry {
                    path: uri_to_location(p),
                };
                let list = self.log.entry(batch).or_default();
                if !(compact && list.iter().any(|e| e.path == entry.path)) {
                    list.push(entry);
                }
            }
        }
        let keys: Vec<String> = self
            .log
            .values()
            .flatten()
            .map(|e| self.key(&e.path))
            .collect();
        self.seen.extend(keys);
        Ok(())
    }

    /// Lists the files the source could read now, in reading order.
    fn list(&mut self) -> Result<Vec<Candidate>> {
        let mut files = Vec::new();
        match &self.root {
            Root::Dir(dir) => {
                if self.manifest != Some(false) {
                    match manifest_files(dir)? {
                        Some(m) => {
                            self.manifest = Some(true);
                            let mut out: Vec<Candidate> = m
                                .into_iter()
                                .map(|f| Candidate {
                                    path: f.path,
                                    mtime: f.modification_time_ms,
                                    size: f.size,
                                })
                                .collect();
                            if self.latest_first {
                                out.reverse();
                            }
                            return Ok(out);
                        }
                        None if self.manifest == Some(true) => return Ok(Vec::new()),
                        None => {}
                    }
                }
                list_under(dir, None, None, &mut files)?;
                if !files.is_empty() {
                    self.manifest = Some(false);
                }
            }
            Root::File(p) => {
                if let Some(c) = stat(p)? {
                    files.push(c);
                }
            }
            Root::Glob {
                base,
                matcher,
                max_depth,
            } => list_under(base, *max_depth, Some(matcher), &mut files)?,
        }
        if let Some(filter) = &self.path_filter {
            files.retain(|f| f.path.file_name().is_some_and(|n| filter.is_match(&n)));
        }
        files.sort_by(|a, b| a.mtime.cmp(&b.mtime).then_with(|| a.path.cmp(&b.path)));
        if self.latest_first {
            files.reverse();
        }
        Ok(files)
    }

    /// The partition values of `file`'s directories under the source's
    /// root (`col=value` segments, values unescaped; Hive's default
    /// partition is a null), like Spark's partition discovery. None for a
    /// single-file source.
    fn partition_values(&self, file: &Location) -> Vec<(String, Option<String>)> {
        let root = match &self.root {
            Root::Dir(d) => d,
            Root::Glob { base, .. } => base,
            Root::File(_) => return Vec::new(),
        };
        let Some(relative) = file.relative_to(root) else {
            return Vec::new();
        };
        let mut dirs: Vec<&str> = relative.split('/').collect();
        dirs.pop();
        let unescape =
            |s: &str| String::from_utf8_lossy(&crate::engine::uri::percent_decode(s)).into_owned();
        dirs.into_iter()
            .filter_map(|d| d.split_once('='))
            .filter(|(name, _)| !name.is_empty())
            .map(|(name, value)| {
                let value = (value != crate::engine::sinks::file::DEFAULT_PARTITION_NAME)
                    .then(|| unescape(value));
                (unescape(name), value)
            })
            .collect()
    }

    fn parse_offset(&self, o: &Offset) -> Result<u64> {
        let n = o
            .get("logOffset")
            .and_then(|v| v.as_i64())
            .or_else(|| o.as_i64());
        match n {
            Some(n) if n >= 0 => Ok(n as u64),
            _ => Err(Error::runtime_with_help(
                format!("offset `{o}` is not a file source offset (expected {{\"logOffset\": N}})"),
                "the checkpoint belongs to a different query: use a new checkpoint location",
            )),
        }
    }

    fn write_log(&self, batch: u64, files: &[Candidate]) -> Result<()> {
        let mut text = String::from("v1");
        for f in files {
            text.push('\n');
            text.push_str(
                &json!({
                    "path": location_to_uri(&f.path),
                    "timestamp": f.mtime,
                    "batchId": batch,
                })
                .to_string(),
            );
        }
        write_log_entry(&self.state_dir, batch, &text)
    }
}

/// Writes the source log's entry for `batch` once: like `offsets/N`, a
/// second writer never replaces it, and an entry already there with other
/// files is an error (the same files again is a replay, and fine).
fn write_log_entry(state_dir: &Location, batch: u64, text: &str) -> Result<()> {
    let path = state_dir.join(&batch.to_string());
    state_dir.create_dir()?;
    match path.write_once(text.as_bytes())? {
        WriteOnce::Written | WriteOnce::Identical => Ok(()),
        WriteOnce::Differs => Err(Error::checkpoint(
            path.shown(),
            "source log entry already exists with other files (another query may be using this checkpoint)",
        )),
    }
}

/// The file source's settings, parsed from its options: what opening the
/// source reads, and what dry-run checks.
pub(crate) struct FileSourceOptions {
    mode: Mode,
    corrupt_name: String,
    csv: CsvOptions,
    path_filter: Option<GlobMatcher>,
    multi_line: bool,
    ignore_corrupt_files: bool,
    max_files: Option<u64>,
    max_bytes: Option<u64>,
    latest_first: bool,
    file_name_only: bool,
    ignore_missing: bool,
}

impl FileSourceOptions {
    /// Parses the options of a `format` source of flow `flow`; the first bad
    /// value is an error naming the option and how to write it.
    pub(crate) fn parse(format: FileFormat, options: &Options) -> Result<Self> {
        let mode = match options.get("mode").map(|m| m.trim().to_ascii_uppercase()) {
            None => Mode::Permissive,
            Some(m) if m == "PERMISSIVE" => Mode::Permissive,
            Some(m) if m == "DROPMALFORMED" => Mode::DropMalformed,
            Some(m) if m == "FAILFAST" => Mode::FailFast,
            Some(m) => {
                return Err(Error::runtime_with_help(
                    format!("unknown mode `{m}`"),
                    "use PERMISSIVE, DROPMALFORMED or FAILFAST",
                ))
            }
        };
        let corrupt_name = options
            .get("columnNameOfCorruptRecord")
            .unwrap_or("_corrupt_record")
            .to_string();
        let csv = CsvOptions {
            header: options.bool("header", false)?,
            delimiter: match options.byte_char("sep")? {
                Some(c) => c,
                None => options.byte_char("delimiter")?.unwrap_or(b','),
            },
            quote: options.byte_char("quote")?.unwrap_or(b'"'),
            escape: Some(options.byte_char("escape")?.unwrap_or(b'\\')),
            comment: options.byte_char("comment")?,
            null_value: options
                .get("nullValue")
                .filter(|v| !v.is_empty())
                .map(str::to_string),
        };
        if let Some(enc) = options.get("encoding").or_else(|| options.get("charset")) {
            let e = enc.trim().to_ascii_lowercase().replace('-', "");
            if e != "utf8" {
                return Err(Error::runtime_with_help(
                    format!("encoding `{enc}` is not supported"),
                    "convert the files to UTF-8 and remove the option",
                ));
            }
        }
        let path_filter = match options.get("pathGlobFilter") {
            None => None,
            Some(g) => Some(
                GlobBuilder::new(g)
                    .literal_separator(true)
                    .build()
                    .map_err(|e| {
                        Error::runtime_with_help(
                            format!("option `pathGlobFilter` is not a valid glob: {e}"),
                            ".option(\"pathGlobFilter\", \"*.json\")",
                        )
                    })?
                    .compile_matcher(),
            ),
        };
        // Spark's pattern options would change how timestamps parse; reading
        // ISO-8601 instead would silently turn other forms into nulls.
        for key in ["timestampFormat", "timestampNTZFormat", "dateFormat"] {
            if let Some(v) = options.get(key) {
                let iso = matches!(
                    v.trim(),
                    "yyyy-MM-dd'T'HH:mm:ss[.SSS][XXX]"
                        | "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"
                        | "yyyy-MM-dd"
                );
                if !iso {
                    return Err(Error::runtime_with_help(
                        format!(
                            "option `{key}` (`{v}`) is not supported: this source reads timestamps and dates in ISO-8601 only (`2026-11-01T10:00:05Z`, `2026-11-01 10:00:05`, `2026-11-01`)"
                        ),
                        format!(
                            "remove `{key}`, declare the column as STRING and convert it with the same Spark pattern: .with_column(\"ts\", \"to_timestamp(ts, '{v}')\")"
                        ),
                    ));
                }
            }
        }
        Ok(FileSourceOptions {
            mode,
            corrupt_name,
            csv,
            path_filter,
            multi_line: format == FileFormat::Json && options.bool("multiLine", false)?,
            ignore_corrupt_files: options.bool("ignoreCorruptFiles", false)?,
            max_files: options.positive("maxFilesPerTrigger")?,
            max_bytes: options.bytes("maxBytesPerTrigger")?,
            latest_first: options.bool("latestFirst", false)?,
            file_name_only: options.bool("fileNameOnly", false)?,
            ignore_missing: options.bool("ignoreMissingFiles", false)?,
        })
    }
}

fn make_root(ctx: &SourceContext, path: &str, table: bool) -> Result<Root> {
    let is_glob = path.contains(['*', '?', '[', '{']);
    let object = crate::engine::storage::object_key(path)
        .map_err(|why| Error::runtime_with_help(format!("source path: {why}"), "fix the path"))?;
    if let Some(key) = object {
        return object_root(path, key, is_glob);
    }
    if !is_glob {
        let p = resolve_path(&ctx.base_dir, path);
        let p = fs::canonicalize(&p).unwrap_or(p);
        if p.is_file() {
            return Ok(Root::File(p.into()));
        }
        if !p.exists() && !table {
            return Err(Error::runtime_with_help(
                format!("source path {} does not exist", p.display()),
                format!(
                    "create the directory, or fix the path (relative paths resolve against {})",
                    ctx.base_dir.display()
                ),
            ));
        }
        return Ok(Root::Dir(p.into()));
    }
    let p = path
        .strip_prefix("file://")
        .or_else(|| path.strip_prefix("file:"))
        .unwrap_or(path);
    let comps: Vec<&str> = p.split('/').collect();
    let first_glob = comps
        .iter()
        .position(|c| c.contains(['*', '?', '[', '{']))
        .unwrap_or(0);
    let base_str = comps[..first_glob].join("/");
    let rest = comps[first_glob..].join("/");
    let base = if base_str.is_empty() && p.starts_with('/') {
        PathBuf::from("/")
    } else if base_str.is_empty() {
        ctx.base_dir.clone()
    } else {
        resolve_path(&ctx.base_dir, &base_str)
    };
    let base = fs::canonicalize(&base).unwrap_or(base);
    let matcher = glob_matcher(path, &rest)?;
    let max_depth = if rest.contains("**") {
        None
    } else {
        Some(comps.len() - first_glob)
    };
    if !base.is_dir() && !table {
        return Err(Error::runtime_with_help(
            format!(
                "source directory {} (of the glob `{path}`) does not exist",
                base.display()
            ),
            format!(
                "create the directory, or fix the path (relative paths resolve against {})",
                ctx.base_dir.display()
            ),
        ));
    }
    Ok(Root::Glob {
        base: base.into(),
        matcher,
        max_depth,
    })
}

/// The root of a path in object storage: a key (an object there is a file,
/// otherwise a prefix), or a glob over the keys under its literal prefix.
fn object_root(path: &str, key: ObjectKey, is_glob: bool) -> Result<Root> {
    let store = key.store.clone();
    let at = |key: String| {
        Location::Object(ObjectKey {
            store: store.clone(),
            key,
        })
    };
    if !is_glob {
        let file = object::head(&key)?.is_some();
        let location = Location::Object(key);
        return Ok(if file {
            Root::File(location)
        } else {
            Root::Dir(location)
        });
    }
    let comps: Vec<&str> = key.key.split('/').collect();
    let first_glob = comps
        .iter()
        .position(|c| c.contains(['*', '?', '[', '{']))
        .unwrap_or(0);
    let rest = comps[first_glob..].join("/");
    let matcher = glob_matcher(path, &rest)?;
    let max_depth = if rest.contains("**") {
        None
    } else {
        Some(comps.len() - first_glob)
    };
    Ok(Root::Glob {
        base: at(comps[..first_glob].join("/")),
        matcher,
        max_depth,
    })
}

/// The matcher of the glob part `rest` of the source path `path`.
fn glob_matcher(path: &str, rest: &str) -> Result<GlobMatcher> {
    Ok(GlobBuilder::new(rest)
        .literal_separator(true)
        .build()
        .map_err(|e| {
            Error::runtime_with_help(
                format!("source path `{path}` is not a valid glob: {e}"),
                "use `*` within a directory, `**` across directories, e.g. data/**/part-*.json",
            )
        })?
        .compile_matcher())
}

/// The file at `path` now (`None`: missing, or not a file).
fn stat(path: &Location) -> Result<Option<Candidate>> {
    match path {
        Location::Local(p) => {
            Ok(fs::metadata(p)
                .ok()
                .filter(|md| md.is_file())
                .map(|md| Candidate {
                    path: path.clone(),
                    mtime: mtime_ms(&md),
                    size: md.len(),
                }))
        }
        Location::Object(k) => Ok(object::head(k)?.map(|o| Candidate {
            path: path.clone(),
            mtime: o.modified_ms,
            size: o.size,
        })),
    }
}

/// Lists the files under `base`, a local directory ([`walk`], nothing
/// when it does not exist) or a prefix in object storage ([`list_objects`]).
fn list_under(
    base: &Location,
    max_depth: Option<usize>,
    matcher: Option<&GlobMatcher>,
    out: &mut Vec<Candidate>,
) -> Result<()> {
    match base {
        Location::Local(d) if d.is_dir() => walk(d, "", 0, max_depth, matcher, out),
        Location::Local(_) => Ok(()),
        Location::Object(k) => list_objects(k, max_depth, matcher, out),
    }
}

/// Lists the objects under `prefix` as [`walk`] lists a directory: hidden
/// names skipped at every level, at most `max_depth` levels deep, matching
/// `matcher` when given.
fn list_objects(
    prefix: &ObjectKey,
    max_depth: Option<usize>,
    matcher: Option<&GlobMatcher>,
    out: &mut Vec<Candidate>,
) -> Result<()> {
    let root = Location::Object(prefix.clone());
    for o in object::list_recursive(prefix)? {
        let segments: Vec<&str> = o.relative.split('/').collect();
        if segments.iter().any(|s| hidden(s)) {
            continue;
        }
        if max_depth.is_some_and(|m| segments.len() > m) {
            continue;
        }
        if matcher.is_some_and(|m| !m.is_match(&o.relative)) {
            continue;
        }
        out.push(Candidate {
            path: root.join(&o.relative),
            mtime: o.modified_ms,
            size: o.size,
        });
    }
    Ok(())
}

/// Hidden files and directories, like Spark: `.`/`_` prefixed (except
/// partition directories such as `_x=1`), or being copied.
fn hidden(name: &str) -> bool {
    (name.starts_with('_') && !name.contains('='))
        || name.starts_with('.')
        || name.ends_with("._COPYING_")
}

fn mtime_ms(md: &fs::Metadata) -> i64 {
    md.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn walk(
    dir: &Path,
    rel: &str,
    depth: usize,
    max_depth: Option<usize>,
    matcher: Option<&GlobMatcher>,
    out: &mut Vec<Candidate>,
) -> Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if hidden(&name) {
            continue;
        }
        let path = entry.path();
        // Follows symbolic links; a file deleted meanwhile is skipped.
        let Ok(md) = fs::metadata(&path) else {
            continue;
        };
        let rel_path = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        if md.is_dir() {
            if max_depth.is_none_or(|m| depth + 1 < m) {
                walk(&path, &rel_path, depth + 1, max_depth, matcher, out)?;
            }
        } else if md.is_file() && matcher.is_none_or(|m| m.is_match(&rel_path)) {
            out.push(Candidate {
                path: path.into(),
                mtime: mtime_ms(&md),
                size: md.len(),
            });
        }
    }
    Ok(())
}

/// `file:///abs/path` with percent-encoding, like Hadoop paths in Spark's logs.
pub(crate) fn path_to_uri(path: &Path) -> String {
    let s = path.to_string_lossy();
    let mut out = String::from("file://");
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~:@+,=".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A source log's path of a file: `file:///…` locally, `s3a://bucket/key`
/// for an object.
fn location_to_uri(path: &Location) -> String {
    match path {
        Location::Local(p) => path_to_uri(p),
        Location::Object(_) => crate::engine::sinks::manifest::location_to_uri(path),
    }
}

/// The file a source log's path names: an object for `s3a://` / `s3://`
/// (percent-decoded), otherwise a local path ([`uri_to_path`]).
fn uri_to_location(uri: &str) -> Location {
    match crate::engine::storage::object_key(uri) {
        Ok(Some(mut key)) => {
            key.key =
                String::from_utf8_lossy(&crate::engine::uri::percent_decode(&key.key)).into_owned();
            Location::Object(key)
        }
        _ => Location::Local(uri_to_path(uri)),
    }
}

/// The path of a `file:` URI (percent-decoded), or a plain path.
pub(crate) fn uri_to_path(uri: &str) -> PathBuf {
    let rest = if let Some(r) = uri.strip_prefix("file://") {
        r
    } else if let Some(r) = uri.strip_prefix("file:") {
        r
    } else {
        return PathBuf::from(uri);
    };
    PathBuf::from(String::from_utf8_lossy(&crate::engine::uri::percent_decode(rest)).into_owned())
}

impl Source for FileSource {
    fn describe(&self) -> String {
        if self.table {
            format!(
                "{} table source `{}`",
                self.format.name(),
                self.declared_path
            )
        } else {
            format!("{} source `{}`", self.format.name(), self.declared_path)
        }
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn backlog(&self) -> Option<Backlog> {
        let left = self
            .available_now
            .as_ref()?
            .iter()
            .filter(|c| !self.seen.contains(&self.key(&c.path)))
            .count() as u64;
        Some(Backlog::new(left, self.available_now_total, "file"))
    }

    fn read_only_columns(&mut self, used: &[bool]) {
        if used.len() == self.parse.schema.fields().len() {
            self.parse.read_columns = Some(used.to_vec());
        }
    }

    fn read_dictionary_columns(&mut self, allowed: &[bool]) {
        if allowed.len() == self.parse.schema.fields().len() {
            self.parse.dictionary_columns = Some(allowed.to_vec());
        }
    }

    fn filter_rows(&mut self, filter: &LeafFilter) -> bool {
        // The filter's columns are this source's, by position and name.
        let fields = self.parse.schema.fields();
        let same = filter
            .columns()
            .iter()
            .zip(filter.input_schema().fields())
            .all(|(&c, f)| fields.get(c).is_some_and(|g| g.name() == f.name()));
        if same {
            self.parse.row_filter = Some(filter.clone());
        }
        // Parquet files are filtered as they are decoded, every row (see
        // `parse::decode_filter`); the other formats are not.
        same && self.parse.format == FileFormat::Parquet
    }

    fn read_timestamp_columns(&mut self, columns: &[bool]) {
        if columns.len() == self.parse.schema.fields().len() {
            self.parse.timestamp_columns = Some(columns.to_vec());
        }
    }

    /// A check lists the directory: real-time mode looks every 20 ms.
    fn arrival_poll_interval(&self) -> std::time::Duration {
        std::time::Duration::from_millis(20)
    }

    fn prepare_available_now(&mut self) -> Result<()> {
        let files = self.list()?;
        self.available_now_total = files
            .iter()
            .filter(|c| !self.seen.contains(&self.key(&c.path)))
            .count() as u64;
        self.available_now = Some(files.into());
        Ok(())
    }

    fn latest_offset(&mut self, start: Option<&Offset>) -> Result<Option<Offset>> {
        let next = match start {
            None => 0,
            Some(o) => self.parse_offset(o)? + 1,
        };
        // Planned before a crash but never committed: the same files again.
        if self.log.contains_key(&next) {
            return Ok(Some(json!({ "logOffset": next })));
        }
        if let Some(last) = self.log.keys().next_back() {
            if *last > next {
                return Err(Error::runtime_with_help(
                    format!(
                        "the source log in {} is ahead of the checkpoint's offsets (log batch {last}, next batch {next})",
                        self.state_dir
                    ),
                    "the checkpoint was modified by hand: restore it or use a new checkpoint location",
                ));
            }
        }
        let mut picked: Vec<Candidate> = Vec::new();
        let mut bytes = 0u64;
        let mut keys = HashSet::new();
        // Available-now: the files listed at the start, each checked again
        // when picked (a file deleted meanwhile is skipped, as a new listing
        // would); otherwise a fresh listing.
        let (candidates, cached) = match self.available_now.take() {
            Some(queue) => (queue, true),
            None => (VecDeque::from(self.list()?), false),
        };
        let mut examined = 0usize;
        for c in &candidates {
            let key = self.key(&c.path);
            if self.seen.contains(&key) || keys.contains(&key) {
                examined += 1;
                continue;
            }
            // Files of a manifest are read as committed (a missing one is an
            // error); objects are not looked up again (a request each): one
            // gone since the listing is missing when the batch reads it.
            let c = if cached && self.manifest != Some(true) && !c.path.is_object() {
                match stat(&c.path)? {
                    Some(now) => now,
                    None => {
                        examined += 1;
                        continue;
                    }
                }
            } else {
                c.clone()
            };
            if let Some(max) = self.max_files {
                if picked.len() as u64 >= max {
                    break;
                }
            }
            if let Some(max) = self.max_bytes {
                if !picked.is_empty() && bytes + c.size > max {
                    break;
                }
            }
            bytes += c.size;
            keys.insert(key);
            picked.push(c);
            examined += 1;
        }
        if cached {
            // Every examined file is now read, seen or gone.
            let mut rest = candidates;
            rest.drain(..examined.min(rest.len()));
            self.available_now = Some(rest);
        }
        if picked.is_empty() {
            return Ok(None);
        }
        self.write_log(next, &picked)?;
        self.seen.extend(keys);
        self.log.insert(
            next,
            picked
                .into_iter()
                .map(|c| LogEntry { path: c.path })
                .collect(),
        );
        Ok(Some(json!({ "logOffset": next })))
    }

    fn read(&mut self, start: Option<&Offset>, end: &Offset) -> Result<ReadBatch> {
        let from = match start {
            None => 0,
            Some(o) => self.parse_offset(o)? + 1,
        };
        let to = self.parse_offset(end)?;
        let mut entries_read: Vec<(u64, &LogEntry)> = Vec::new();
        for batch in from..=to {
            let entries = self.log.get(&batch).ok_or_else(|| {
                Error::checkpoint(
                    self.state_dir.join(&batch.to_string()).shown(),
                    format!(
                        "the source log has no batch {batch} (offsets ({}, {to}])",
                        from as i64 - 1
                    ),
                )
            })?;
            entries_read.extend(entries.iter().map(|e| (batch, e)));
        }
        // Objects are fetched together, before decoding.
        let keys: Vec<ObjectKey> = entries_read
            .iter()
            .filter_map(|(_, e)| match &e.path {
                Location::Object(k) => Some(k.clone()),
                Location::Local(_) => None,
            })
            .collect();
        let mut fetched = object::read_many(&keys)?.into_iter();
        let mut files = Vec::new();
        for (batch, e) in entries_read {
            let partitions = self.partition_values(&e.path);
            let found = match &e.path {
                Location::Local(p) => fs::metadata(p).map(|md| FileToRead {
                    path: p.clone(),
                    size: md.len(),
                    data: None,
                    partitions,
                }),
                Location::Object(k) => match fetched.next().flatten() {
                    Some(data) => Ok(FileToRead {
                        path: e.path.shown(),
                        size: data.len() as u64,
                        data: Some(data),
                        partitions,
                    }),
                    None => Err(std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!("no object at {}", k.url()),
                    )),
                },
            };
            match found {
                Ok(f) => files.push(f),
                Err(_) if self.ignore_missing => {
                    tracing::warn!(flow = %self.flow, "skipping missing file {}", e.path);
                }
                Err(err) => {
                    return Err(Error::runtime_with_help(
                        format!(
                            "file {} of source batch {batch} cannot be read: {err}",
                            parse::display_path(&self.parse.base_dir, &e.path.shown())
                        ),
                        "restore the file, or set ignoreMissingFiles to true to skip it",
                    ))
                }
            }
        }
        if files.is_empty() {
            return Ok(ReadBatch::default());
        }
        let bytes = files.iter().map(|f| f.size).sum();
        let decoded = parse::read_files(&self.parse, &files, self.threads)?;
        Ok(ReadBatch {
            batches: decoded.batches,
            bytes,
            malformed_dropped: decoded.dropped,
            corrupt_files_skipped: decoded.corrupt_files.len() as u64,
            rows_filtered: decoded.filtered,
        })
    }
}

#[cfg(test)]
mod log_tests {
    use super::*;

    /// Two writers of one batch's entry: at most one succeeds, and the entry
    /// is the winner's (an exists-check before a rename lets both win).
    #[test]
    fn a_log_entry_is_written_once_by_racing_writers() {
        let dir = tempfile::tempdir().unwrap();
        for batch in 0..300u64 {
            let d = dir.path().to_path_buf();
            let barrier = Arc::new(std::sync::Barrier::new(2));
            let writers: Vec<_> = ["a", "b"]
                .into_iter()
                .map(|who| {
                    let (d, barrier) = (d.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        write_log_entry(&d.clone().into(), batch, &format!("v1\n{who}"))
                            .is_ok()
                            .then_some(who)
                    })
                })
                .collect();
            let won: Vec<&str> = writers
                .into_iter()
                .filter_map(|w| w.join().unwrap())
                .collect();
            assert_eq!(
                won.len(),
                1,
                "batch {batch}: writers {won:?} both succeeded"
            );
            let text = fs::read_to_string(d.join(batch.to_string())).unwrap();
            assert_eq!(text, format!("v1\n{}", won[0]), "batch {batch}");
        }
    }
}

#[cfg(test)]
mod uri_tests {
    use super::uri_to_path;
    use std::path::PathBuf;

    #[test]
    fn file_uris_decode_percent_escapes_and_keep_anything_else() {
        assert_eq!(
            uri_to_path("file:///data/a%20b.json"),
            PathBuf::from("/data/a b.json")
        );
        assert_eq!(
            uri_to_path("file:/data/%C3%A9.json"),
            PathBuf::from("/data/é.json")
        );
        // A hand-edited entry: `%` before a multi-byte character, a short
        // or non-hex escape, a `%` at the end.
        assert_eq!(
            uri_to_path("file:///data/%é1.json"),
            PathBuf::from("/data/%é1.json")
        );
        assert_eq!(
            uri_to_path("file:///data/%1é.json"),
            PathBuf::from("/data/%1é.json")
        );
        assert_eq!(
            uri_to_path("file:///data/%zz%4"),
            PathBuf::from("/data/%zz%4")
        );
        assert_eq!(uri_to_path("file:///data/x%"), PathBuf::from("/data/x%"));
        assert_eq!(uri_to_path("/plain/path"), PathBuf::from("/plain/path"));
    }
}
