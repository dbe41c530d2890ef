//! The pipeline spec: a YAML file (`pipeline.yml` or `spark-pipeline.yml`)
//! naming the pipeline, its storage directory and per-table, per-sink and
//! per-flow settings, mirroring Spark Declarative Pipelines.
//!
//! ```yaml
//! name: monitoring
//! storage: ./pipeline-storage          # checkpoints, event log, tables without a path
//! configuration:
//!   spark.sql.shuffle.partitions: "4"
//! tables:
//!   error_counts: { format: delta }
//!   raw: { format: parquet, path: /data/raw, partition_cols: [day] }
//! sinks:
//!   event_counts_sink:
//!     format: kafka
//!     options:
//!       kafka.bootstrap.servers: ${KAFKA_BROKERS}
//!       topic: event-counts
//! flows:
//!   event_counts:
//!     trigger: { real_time: { checkpoint_interval: 5 minutes } }
//!   error_monitor:
//!     trigger: { processing_time: 1 minute }
//!   backfill:
//!     trigger: available_now     # also: once, default
//! ```
//!
//! [`find_spec`] locates the file, [`load`] reads and validates it, and
//! [`PipelineSpec::resolve_env`] substitutes `${ENV_VAR}` references. Every
//! [`SpecError`] names the file and line and, when useful, how to fix it.

pub mod env;
mod parse;
mod trigger;
mod yaml;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Diagnostic, Origin};

pub use trigger::{
    Trigger, MIN_REAL_TIME_CHECKPOINT_INTERVAL, TRIGGER_CONF_KEY, TRIGGER_INTERVAL_CONF_KEY,
};

/// The file names [`find_spec`] looks for, in this order.
pub const SPEC_FILE_NAMES: [&str; 4] = [
    "pipeline.yml",
    "pipeline.yaml",
    "spark-pipeline.yml",
    "spark-pipeline.yaml",
];

/// A parsed and validated pipeline spec.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PipelineSpec {
    /// The pipeline's name (non-empty).
    pub name: String,
    /// The storage directory as written (checkpoints, event log, tables
    /// without a path); see [`PipelineSpec::storage_dir`].
    pub storage: String,
    /// Spark-style configuration (`spark.sql.shuffle.partitions: "4"`).
    pub configuration: BTreeMap<String, String>,
    /// Per-table settings, by table name.
    pub tables: BTreeMap<String, TableSpec>,
    /// Sinks, by sink name.
    pub sinks: BTreeMap<String, SinkSpec>,
    /// Per-flow settings, by flow name.
    pub flows: BTreeMap<String, FlowSpec>,
    /// Library files (SDP `libraries:`): SQL files declaring datasets and
    /// flows, found relative to the spec's directory.
    pub libraries: Vec<LibrarySpec>,
    /// Spark's default catalog (`catalog:`); recorded, not used (the
    /// pipeline's datasets have one-part names).
    pub catalog: Option<String>,
    /// Spark's default database (`database:` or `schema:`); recorded, not used.
    pub database: Option<String>,
    /// The spec file this was read from.
    pub path: PathBuf,
    /// 1-based line of every key in the file, by dotted key path as rendered
    /// by [`key_path`] (e.g. `sinks.out.options."kafka.bootstrap.servers"`).
    /// Prefer [`PipelineSpec::line_of`].
    pub key_lines: BTreeMap<String, usize>,
}

/// Settings of one table (a materialized dataset).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableSpec {
    /// Storage format, e.g. `delta` or `parquet`; the framework's default when absent.
    pub format: Option<String>,
    /// Where the table lives; under the storage directory when absent.
    pub path: Option<String>,
    /// Format options (values written as strings, numbers or booleans).
    pub options: BTreeMap<String, String>,
    /// Partition columns.
    pub partition_cols: Vec<String>,
    /// A description of the table.
    pub comment: Option<String>,
    /// An explicit schema, as a DDL string (`"id BIGINT, name STRING"`).
    pub schema: Option<String>,
    /// Data-quality expectations (`expectations:`), in order.
    pub expectations: Vec<ExpectationSpec>,
    /// Where rows failing a drop-expectation go (`quarantine:`).
    pub quarantine: Option<String>,
    /// 1-based line of the table's key in the spec.
    pub line: Option<usize>,
}

/// One entry of a table's `expectations:` list:
/// `{ name: positive, condition: "amount > 0", action: drop }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectationSpec {
    /// The expectation's name.
    pub name: String,
    /// Its SQL boolean condition.
    pub condition: String,
    /// `warn` (the default), `drop` or `fail`.
    pub action: crate::expectations::ExpectationAction,
    /// 1-based line of the entry.
    pub line: usize,
}

/// Settings of one sink (an external target that flows write to).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SinkSpec {
    /// Sink format, e.g. `kafka`, `delta`, `console` (required).
    pub format: String,
    /// Format options (values written as strings, numbers or booleans).
    pub options: BTreeMap<String, String>,
    /// Key columns for sinks that upsert.
    pub merge_keys: Vec<String>,
    /// A description of the sink.
    pub comment: Option<String>,
    /// 1-based line of the sink's key in the spec.
    pub line: Option<usize>,
}

/// Settings of one flow (declared in code, configured here).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowSpec {
    /// The trigger; `None` when not set (the default trigger applies).
    /// Also filled from the `pipelines.trigger` / `pipelines.trigger.interval`
    /// options, see [`Trigger::from_conf`].
    pub trigger: Option<Trigger>,
    /// Streaming options, e.g. `maxOffsetsPerTrigger`.
    pub options: BTreeMap<String, String>,
    /// 1-based line of the flow's key in the spec.
    pub line: Option<usize>,
}

/// One entry of `libraries:` in the SDP shape `- glob: { include: "transformations/**" }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LibrarySpec {
    /// Source files matching a glob.
    Glob {
        /// The pattern, relative to the spec file: a file path, or a folder
        /// followed by `/**` for every file below it (Spark's two forms).
        include: String,
        /// 1-based line of the entry in the spec.
        line: Option<usize>,
    },
}

/// The local path of a `storage` value: a path as written, or the path of a
/// `file:` URI (`file:///data/p`, `file:/data/p`, `file://localhost/data/p`,
/// percent-escapes decoded), as Spark writes it. Another scheme is an error
/// saying why.
pub fn local_storage(storage: &str) -> Result<String, String> {
    let Some((scheme, rest)) = storage.split_once(':') else {
        return Ok(storage.to_string());
    };
    // `C:` or a path with a colon but no scheme syntax.
    let is_scheme = scheme.len() > 1
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && rest.starts_with('/');
    if !is_scheme {
        return Ok(storage.to_string());
    }
    if !scheme.eq_ignore_ascii_case("file") {
        return Err(format!(
            "`{scheme}://` storage is not supported: keep it on the local file system or in S3 (`s3://bucket/prefix`)"
        ));
    }
    let path = match rest.strip_prefix("//") {
        Some(after) => match after.find('/') {
            Some(0) => after.to_string(),
            Some(i) if &after[..i] == "localhost" => after[i..].to_string(),
            _ => {
                return Err(format!(
                    "`{storage}` names a host; a `file:` URI must be local (`file:///path`)"
                ))
            }
        },
        None => rest.to_string(),
    };
    String::from_utf8(crate::engine::uri::percent_decode(&path))
        .map_err(|_| format!("`{storage}` is not valid UTF-8 once its %-escapes are decoded"))
}

/// Checks a `libraries` glob the way Spark does: a path without wildcards,
/// or a folder without wildcards followed by `/**`. Returns why not.
pub fn check_library_glob(include: &str) -> Result<(), &'static str> {
    let magic = |s: &str| s.contains(['*', '?', '[']);
    if include.trim().is_empty() {
        return Err("is empty");
    }
    if !magic(include) {
        return Ok(());
    }
    match include.strip_suffix("/**") {
        Some(dir) if !magic(dir) => Ok(()),
        _ => Err("is not a file path or a `folder/**` pattern"),
    }
}

/// What kind of problem a [`SpecError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpecErrorKind {
    /// No spec file was found by [`find_spec`].
    NotFound,
    /// Several spec files were found in one directory.
    Ambiguous,
    /// The spec file could not be read.
    Read,
    /// The file is not valid YAML.
    Syntax,
    /// The YAML does not describe a valid spec (unknown or missing field,
    /// wrong type, bad value).
    Invalid,
    /// The spec uses a feature that is not supported yet.
    Unsupported,
    /// An `${ENV_VAR}` reference could not be resolved.
    Env,
}

/// An error finding, reading, parsing or resolving the pipeline spec.
///
/// Displays as a complete message: `pipeline.yml:7: <message>` followed by an
/// indented `help: <fix>` line when a fix is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    /// What kind of problem this is.
    pub kind: SpecErrorKind,
    /// The spec file concerned, when there is one.
    pub file: Option<PathBuf>,
    /// 1-based line in `file`, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub help: Option<String>,
}

impl SpecError {
    /// A new error without file, line or help.
    pub fn new(kind: SpecErrorKind, message: impl Into<String>) -> Self {
        SpecError {
            kind,
            file: None,
            line: None,
            message: message.into(),
            help: None,
        }
    }

    /// Sets the file and line.
    pub fn at(mut self, file: impl Into<PathBuf>, line: Option<usize>) -> Self {
        self.file = Some(file.into());
        self.line = line;
        self
    }

    /// Sets the fix.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Where the problem is, as a diagnostic origin.
    pub fn origin(&self) -> Option<Origin> {
        self.file.as_ref().map(|f| Origin::Spec {
            file: f.display().to_string(),
            line: self.line,
        })
    }

    /// The same problem as a [`Diagnostic`], e.g. to report it with others.
    pub fn to_diagnostic(&self) -> Diagnostic {
        let d = Diagnostic::new(self.message.clone()).origin(self.origin());
        match &self.help {
            Some(help) => d.help(help.clone()),
            None => d,
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, "{}:{line}: ", file.display())?,
            (Some(file), None) => write!(f, "{}: ", file.display())?,
            (None, _) => {}
        }
        f.write_str(&self.message)?;
        if let Some(help) = &self.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SpecError {}

/// Renders a dotted key path as used in messages and [`PipelineSpec::key_lines`]:
/// segments made of letters, digits, `_` and `-` are written bare, others are
/// double-quoted, e.g. `sinks.out.options."kafka.bootstrap.servers"`.
pub fn key_path<S: AsRef<str>>(segments: &[S]) -> String {
    let mut out = String::new();
    for segment in segments {
        append_key(&mut out, segment.as_ref());
    }
    out
}

pub(crate) fn append_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        path.push_str(key);
    } else {
        path.push('"');
        for c in key.chars() {
            if c == '"' || c == '\\' {
                path.push('\\');
            }
            path.push(c);
        }
        path.push('"');
    }
}

pub(crate) fn join_key(path: &str, key: &str) -> String {
    let mut out = path.to_string();
    append_key(&mut out, key);
    out
}

impl PipelineSpec {
    /// Where the pipeline keeps its checkpoints, event log and tables: an
    /// `s3://bucket/prefix`, or [`storage_dir`](Self::storage_dir).
    pub fn storage_location(&self) -> crate::engine::storage::Location {
        match crate::engine::storage::object_key(&self.storage) {
            Ok(Some(key)) => crate::engine::storage::Location::Object(key),
            _ => crate::engine::storage::Location::Local(self.storage_dir()),
        }
    }

    /// The storage directory, resolved against the spec file's directory when
    /// written as a relative path.
    pub fn storage_dir(&self) -> PathBuf {
        let local = local_storage(&self.storage).unwrap_or_else(|_| self.storage.clone());
        let storage = Path::new(&local);
        if storage.is_absolute() {
            return storage.to_path_buf();
        }
        match self.path.parent() {
            Some(dir) => dir.join(storage),
            None => storage.to_path_buf(),
        }
    }

    /// The 1-based line of a key, e.g. `line_of(&["sinks", "out", "format"])`.
    pub fn line_of<S: AsRef<str>>(&self, segments: &[S]) -> Option<usize> {
        self.key_lines.get(&key_path(segments)).copied()
    }

    /// Where a key was written, for diagnostics (the line is `None` for keys
    /// not in the file).
    pub fn origin_of<S: AsRef<str>>(&self, segments: &[S]) -> Origin {
        Origin::Spec {
            file: self.path.display().to_string(),
            line: self.line_of(segments),
        }
    }

    /// Substitutes `${NAME}` references in the storage directory, every
    /// configuration value, table path and option value (tables, sinks and
    /// flows), looking variables up with `lookup`. `${NAME:-default}` uses
    /// `default` when `NAME` is unset or empty; `$${` writes a literal `${`.
    ///
    /// On error nothing is changed and every problem is returned: each unset
    /// variable names the key and line using it, e.g.
    /// ``pipeline.yml:9: environment variable `KAFKA_BROKERS` is not set (used by sinks.out.options."kafka.bootstrap.servers")``.
    pub fn resolve_env(
        &mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(), Vec<SpecError>> {
        env::resolve(self, &lookup)
    }

    /// [`PipelineSpec::resolve_env`] with the process environment.
    pub fn resolve_env_from_process(&mut self) -> Result<(), Vec<SpecError>> {
        self.resolve_env(|name| std::env::var(name).ok())
    }
}

/// Looks for a spec file in `start`, then in each parent directory, and
/// returns the first found. Names tried: [`SPEC_FILE_NAMES`]. Two or more of
/// them in one directory is an error, as is finding none.
///
/// When `start` is relative the result is relative to the current directory
/// where possible, so messages stay short.
pub fn find_spec(start: &Path) -> Result<PathBuf, SpecError> {
    let start_dir: PathBuf = if start.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        start.to_path_buf()
    };
    let absolute = std::path::absolute(&start_dir).map_err(|e| {
        SpecError::new(
            SpecErrorKind::NotFound,
            format!(
                "cannot look for a pipeline spec from {}: {e}",
                start_dir.display()
            ),
        )
    })?;
    let mut dir: Option<&Path> = Some(&absolute);
    while let Some(d) = dir {
        let found: Vec<PathBuf> = SPEC_FILE_NAMES
            .iter()
            .map(|name| d.join(name))
            .filter(|p| p.is_file())
            .collect();
        match found.len() {
            0 => dir = d.parent(),
            1 => {
                let path = found.into_iter().next().unwrap_or_default();
                return Ok(shorten_path(path, start.is_relative()));
            }
            _ => {
                let names: Vec<String> = found
                    .iter()
                    .filter_map(|p| p.file_name())
                    .map(|n| n.to_string_lossy().into_owned())
                    .collect();
                return Err(SpecError::new(
                    SpecErrorKind::Ambiguous,
                    format!(
                        "found {} pipeline specs in {}: {}",
                        found.len(),
                        d.display(),
                        names.join(", ")
                    ),
                )
                .with_help("keep only one of them, or pass `--spec PATH` to choose"));
            }
        }
    }
    Err(SpecError::new(
        SpecErrorKind::NotFound,
        format!(
            "no pipeline spec found in {} or any parent directory (looked for {})",
            absolute.display(),
            SPEC_FILE_NAMES.join(", ")
        ),
    )
    .with_help("create one with `init --name <name>`, or pass `--spec PATH`"))
}

/// Makes `path` relative to the current directory when `relative` asks for it
/// and it lies below that directory.
fn shorten_path(path: PathBuf, relative: bool) -> PathBuf {
    if !relative {
        return path;
    }
    let Ok(cwd) = std::env::current_dir() else {
        return path;
    };
    match path.strip_prefix(&cwd) {
        Ok(rest) if rest.as_os_str().is_empty() => PathBuf::from("."),
        Ok(rest) => rest.to_path_buf(),
        Err(_) => path,
    }
}

/// Reads and validates the spec file at `path` (see [`parse_str`]).
pub fn load(path: &Path) -> Result<PipelineSpec, SpecError> {
    if path.is_dir() {
        return Err(SpecError::new(
            SpecErrorKind::Read,
            "cannot read the pipeline spec: this is a directory",
        )
        .at(path, None)
        .with_help(format!(
            "pass the spec file itself, e.g. {}",
            path.join(SPEC_FILE_NAMES[0]).display()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| {
        let err = SpecError::new(
            SpecErrorKind::Read,
            format!("cannot read the pipeline spec: {e}"),
        )
        .at(path, None);
        if e.kind() == std::io::ErrorKind::NotFound {
            err.with_help("check the path, or create a spec with `init --name <name>`")
        } else {
            err
        }
    })?;
    parse_str(&text, path)
}

/// Parses and validates spec text; `file` is used in error messages, as
/// [`PipelineSpec::path`], and to resolve a relative storage directory.
///
/// Unknown fields, wrong types and missing required fields (`name`,
/// `storage`, a sink's `format`) are errors naming the field and its line.
/// Option and configuration values may be strings, numbers or booleans.
pub fn parse_str(text: &str, file: &Path) -> Result<PipelineSpec, SpecError> {
    parse::parse_document(text, file)
}

/// A starter spec for a new pipeline, as written by `init --name <name>`.
/// It parses with [`parse_str`].
pub fn init_template(name: &str) -> String {
    let quoted = serde_json::to_string(name).unwrap_or_else(|_| "\"pipeline\"".to_string());
    format!(
        "# Pipeline spec: the flows themselves are declared in Rust.\n\
         name: {quoted}\n\
         # Checkpoints, the event log and tables without a `path` (relative to this file).\n\
         storage: ./pipeline-storage\n\
         # Spark configuration, e.g. spark.sql.shuffle.partitions: \"4\"\n\
         configuration: {{}}\n\
         # Per-table settings: format, path, partition_cols, comment, schema, options.\n\
         tables: {{}}\n\
         # Sinks flows write to: format, options (${{ENV_VAR}} is substituted).\n\
         sinks: {{}}\n\
         # Per-flow settings: trigger (available_now, once, {{ processing_time: 1 minute }},\n\
         # {{ real_time: {{ checkpoint_interval: 5 minutes }} }}) and options.\n\
         flows: {{}}\n"
    )
}

/// A path as the user would like to read it: relative to the current
/// directory when it lies below it.
pub fn display_path(path: &Path) -> String {
    if let Ok(cwd) = std::env::current_dir() {
        if let Ok(rel) = path.strip_prefix(&cwd) {
            return rel.display().to_string();
        }
    }
    path.display().to_string()
}
