//! `DataStreamReader`: the builder behind `session.read_stream()` and `session.read()`.
//!
//! ```
//! use pipelines_core::Session;
//! let s = Session::new();
//! let logs = s.read_stream()
//!     .format("json")
//!     .schema("ts TIMESTAMP, level STRING")
//!     .option("maxFilesPerTrigger", "1")
//!     .load("data/logs")
//!     .unwrap();
//! assert!(logs.is_streaming());
//! let rate = s.read_stream().format("rate").load_default().unwrap();
//! assert_eq!(rate.sources()[0].schema.as_ref().unwrap().fields().len(), 2);
//! ```
//!
//! | format | path | schema |
//! | --- | --- | --- |
//! | `json`, `csv` | `load(dir)` | required for streaming reads; inferred from the files at resolve time for batch reads |
//! | `parquet`, `delta` | `load(dir)` | optional: inferred from the first Parquet file under the directory at resolve time |
//! | `text` | `load(dir)` | fixed `value STRING` |
//! | `rate` | `load_default()` | fixed `timestamp TIMESTAMP, value BIGINT` |
//! | `socket` | `load_default()`, options `host`, `port` | fixed `value STRING` |
//! | `kafka` | `load_default()`, options `kafka.bootstrap.servers` and `subscribe`/`subscribePattern`/`assign` | fixed (the `pipelines-kafka` crate's `kafka_schema`) |
//! | `memory` | `load_default()` or `load(name)` | required |
//!
//! Option values are kept as written (`${KAFKA_BROKERS}` is substituted by
//! the engine, not here); option keys are matched case-insensitively.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};

use crate::connector::DeclaredRead;
use crate::error::{PlanError, Result};
use crate::plan::ddl::{closest, parse_ddl_schema};
use crate::plan::{DataFrame, PlanNode};

/// A source format: the name of a registered source connector
/// ([`crate::connector`]). The built-in ones are associated constants
/// (`SourceFormat::Json`, ...); [`SourceFormat::parse`] finds any
/// registered one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceFormat(&'static str);

#[allow(non_upper_case_globals)]
impl SourceFormat {
    /// JSON lines files.
    pub const Json: SourceFormat = SourceFormat("json");
    /// CSV files (with a header line when `header=true`).
    pub const Csv: SourceFormat = SourceFormat("csv");
    /// Parquet files.
    pub const Parquet: SourceFormat = SourceFormat("parquet");
    /// Text files, one row per line.
    pub const Text: SourceFormat = SourceFormat("text");
    /// Generated rows: `timestamp`, `value` (`rowsPerSecond`).
    pub const Rate: SourceFormat = SourceFormat("rate");
    /// Lines read from a TCP socket (`host`, `port`).
    pub const Socket: SourceFormat = SourceFormat("socket");
    /// Rows pushed in memory by a test.
    pub const Memory: SourceFormat = SourceFormat("memory");
    /// A Kafka topic.
    pub const Kafka: SourceFormat = SourceFormat("kafka");
    /// A Delta table.
    pub const Delta: SourceFormat = SourceFormat("delta");

    /// The name used in `.format(...)`.
    pub fn name(&self) -> &'static str {
        self.0
    }

    /// Every registered source format, in documentation order.
    pub fn all() -> Vec<SourceFormat> {
        crate::connector::source_names()
            .into_iter()
            .map(SourceFormat)
            .collect()
    }

    /// Parses a format name (case-insensitive); the error lists the known
    /// formats and suggests a close one.
    pub fn parse(name: &str) -> Result<SourceFormat, PlanError> {
        if let Some(c) = crate::connector::find(name).filter(|c| c.source().is_some()) {
            return Ok(SourceFormat(c.name()));
        }
        let lower = name.trim().to_ascii_lowercase();
        let known = crate::connector::source_names();
        let help = match closest(&lower, known.iter().copied()) {
            Some(s) => format!("did you mean `{s}`? known formats: {}", known.join(", ")),
            None => format!("known formats: {}", known.join(", ")),
        };
        Err(PlanError::with_help(
            format!("unknown source format `{name}`"),
            help,
        ))
    }

    /// The connector reading this format.
    pub fn connector(&self) -> Option<&'static dyn crate::connector::SourceConnector> {
        crate::connector::source(self.0)
    }
}

impl fmt::Display for SourceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Something usable as a source schema: a DDL string, a [`Schema`] or a [`SchemaRef`].
pub trait IntoSchema {
    /// Converts into a schema; DDL text is parsed.
    fn into_schema(self) -> Result<SchemaRef, PlanError>;
}

impl IntoSchema for &str {
    fn into_schema(self) -> Result<SchemaRef, PlanError> {
        parse_ddl_schema(self).map(Arc::new)
    }
}

impl IntoSchema for String {
    fn into_schema(self) -> Result<SchemaRef, PlanError> {
        parse_ddl_schema(&self).map(Arc::new)
    }
}

impl IntoSchema for &String {
    fn into_schema(self) -> Result<SchemaRef, PlanError> {
        parse_ddl_schema(self).map(Arc::new)
    }
}

impl IntoSchema for Schema {
    fn into_schema(self) -> Result<SchemaRef, PlanError> {
        Ok(Arc::new(self))
    }
}

impl IntoSchema for SchemaRef {
    fn into_schema(self) -> Result<SchemaRef, PlanError> {
        Ok(self)
    }
}

/// A source read by a plan: what `read_stream()...load(...)` produced.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceSpec {
    /// The format.
    pub format: SourceFormat,
    /// The schema: given by the user or fixed by the format. None for
    /// `parquet`/`delta` (and batch `json`/`csv`) without a user schema: it is
    /// inferred from the files when the plan is resolved.
    pub schema: Option<SchemaRef>,
    /// Options, as written.
    pub options: BTreeMap<String, String>,
    /// The path (file formats) or name (`memory`).
    pub path: Option<String>,
    /// True for `read_stream()`, false for `read()`.
    pub streaming: bool,
}

impl SourceSpec {
    /// An option by key, case-insensitively (like Spark).
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    }

    /// A short description for messages, e.g. "json source `data/logs`".
    pub fn describe(&self) -> String {
        match &self.path {
            Some(p) => format!("{} source `{p}`", self.format),
            None => format!("{} source", self.format),
        }
    }
}

/// Builds a source read: `format`, `schema`, `option`s, then `load`.
///
/// Builder methods never fail; every problem (unknown format, bad schema,
/// missing option) is reported by [`load`](Self::load) / [`load_default`](Self::load_default).
#[derive(Clone, Debug)]
pub struct DataStreamReader {
    streaming: bool,
    format: Option<String>,
    schema: Option<Result<SchemaRef, PlanError>>,
    options: BTreeMap<String, String>,
}

impl DataStreamReader {
    /// A reader; `streaming` chooses `read_stream()` or `read()` semantics.
    pub fn new(streaming: bool) -> Self {
        DataStreamReader {
            streaming,
            format: None,
            schema: None,
            options: BTreeMap::new(),
        }
    }

    /// The source format: json, csv, parquet, text, rate, socket, memory, kafka or delta.
    pub fn format(mut self, format: impl Into<String>) -> Self {
        self.format = Some(format.into());
        self
    }

    /// The schema: a DDL string (`"ts TIMESTAMP, level STRING"`), a [`Schema`] or a [`SchemaRef`].
    pub fn schema(mut self, schema: impl IntoSchema) -> Self {
        self.schema = Some(schema.into_schema());
        self
    }

    /// Sets an option.
    pub fn option(mut self, key: impl Into<String>, value: impl ToString) -> Self {
        self.options.insert(key.into(), value.to_string());
        self
    }

    /// Sets several options.
    pub fn options<K, V>(mut self, options: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: ToString,
    {
        for (k, v) in options {
            self.options.insert(k.into(), v.to_string());
        }
        self
    }

    /// Reads the files under `path` (json, csv, parquet, text, delta), or the
    /// named in-memory stream (`memory`).
    pub fn load(self, path: impl Into<String>) -> Result<DataFrame> {
        let path = path.into();
        self.build(Some(path))
    }

    /// Reads a dataset of the pipeline with this reader's options (Spark's
    /// `spark.readStream.option("maxFilesPerTrigger", 1).table("raw")`); a
    /// format or schema set on the reader is an error, as the dataset has its own.
    pub fn table(self, name: &str) -> Result<DataFrame> {
        if self.format.is_some() || self.schema.is_some() {
            return Err(PlanError::with_help(
                format!("reading dataset `{name}`: the reader has a format or a schema, but a dataset has its own"),
                "keep only the options: read_stream().option(\"maxFilesPerTrigger\", \"1\").table(\"raw\")",
            )
            .into());
        }
        let df = dataset_read(name, self.streaming)?;
        let PlanNode::DatasetRead {
            name, streaming, ..
        } = df.node()
        else {
            return Ok(df);
        };
        Ok(DataFrame::from_node(PlanNode::DatasetRead {
            name: name.clone(),
            streaming: *streaming,
            options: self.options,
        }))
    }

    /// Reads a source without a path: rate, socket, kafka, memory.
    pub fn load_default(self) -> Result<DataFrame> {
        self.build(None)
    }

    fn build(self, path: Option<String>) -> Result<DataFrame> {
        let Some(format_name) = self.format.as_deref() else {
            let known = crate::connector::source_names();
            return Err(PlanError::with_help(
                "the source has no format",
                format!(
                    "call .format(\"json\") before loading; known formats: {}",
                    known.join(", ")
                ),
            )
            .into());
        };
        let format = SourceFormat::parse(format_name)?;
        let user_schema = match self.schema {
            Some(Ok(s)) => Some(s),
            Some(Err(e)) => return Err(e.into()),
            None => None,
        };
        let connector = format
            .connector()
            .ok_or_else(|| PlanError::new(format!("unknown source format `{format_name}`")))?;
        // The connector checks the path, the schema and its required options.
        let schema = connector.declare(&DeclaredRead {
            format: format.name(),
            path: path.as_deref(),
            schema: user_schema,
            options: &self.options,
            streaming: self.streaming,
        })?;

        Ok(DataFrame::from_node(PlanNode::Source(SourceSpec {
            format,
            schema,
            options: self.options,
            path,
            streaming: self.streaming,
        })))
    }
}

/// A read of dataset `name` of the pipeline, checked to be a plain name.
pub(crate) fn dataset_read(name: &str, streaming: bool) -> Result<DataFrame> {
    let trimmed = name.trim();
    if trimmed.is_empty() || trimmed.chars().any(|c| c.is_whitespace() || c == '`') {
        return Err(PlanError::with_help(
            format!("invalid dataset name `{name}`"),
            "name a dataset of the pipeline, e.g. read_stream_table(\"logs\")",
        )
        .into());
    }
    Ok(DataFrame::from_node(PlanNode::DatasetRead {
        name: trimmed.to_string(),
        streaming,
        options: Default::default(),
    }))
}
