//! `DataStreamReader`: the builder behind `session.read_stream()` and `session.read()`.
//!
//! ```
//! use pipeline_core::Session;
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
//! | `kafka` | `load_default()`, options `kafka.bootstrap.servers` and `subscribe`/`subscribePattern`/`assign` | fixed, see [`kafka_schema`] |
//! | `memory` | `load_default()` or `load(name)` | required |
//!
//! Option values are kept as written (`${KAFKA_BROKERS}` is substituted by
//! the engine, not here); option keys are matched case-insensitively.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};

use crate::error::{PlanError, Result};
use crate::plan::ddl::{closest, parse_ddl_schema, SESSION_TIME_ZONE};
use crate::plan::{DataFrame, PlanNode};

/// The source formats a reader knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SourceFormat {
    /// JSON lines files.
    Json,
    /// CSV files (with a header line unless `header=false`).
    Csv,
    /// Parquet files.
    Parquet,
    /// Text files, one row per line.
    Text,
    /// Generated rows: `timestamp`, `value` (`rowsPerSecond`).
    Rate,
    /// Lines read from a TCP socket (`host`, `port`).
    Socket,
    /// Rows pushed in memory by a test.
    Memory,
    /// A Kafka topic.
    Kafka,
    /// A Delta table.
    Delta,
}

impl SourceFormat {
    /// Every format, in documentation order.
    pub const ALL: [SourceFormat; 9] = [
        SourceFormat::Json,
        SourceFormat::Csv,
        SourceFormat::Parquet,
        SourceFormat::Text,
        SourceFormat::Rate,
        SourceFormat::Socket,
        SourceFormat::Memory,
        SourceFormat::Kafka,
        SourceFormat::Delta,
    ];

    /// The name used in `.format(...)`.
    pub fn name(&self) -> &'static str {
        match self {
            SourceFormat::Json => "json",
            SourceFormat::Csv => "csv",
            SourceFormat::Parquet => "parquet",
            SourceFormat::Text => "text",
            SourceFormat::Rate => "rate",
            SourceFormat::Socket => "socket",
            SourceFormat::Memory => "memory",
            SourceFormat::Kafka => "kafka",
            SourceFormat::Delta => "delta",
        }
    }

    /// Parses a format name (case-insensitive); the error lists the known
    /// formats and suggests a close one.
    pub fn parse(name: &str) -> Result<SourceFormat, PlanError> {
        let lower = name.trim().to_ascii_lowercase();
        if let Some(f) = SourceFormat::ALL.iter().find(|f| f.name() == lower) {
            return Ok(*f);
        }
        let known: Vec<&str> = SourceFormat::ALL.iter().map(|f| f.name()).collect();
        let help = match closest(&lower, known.iter().copied()) {
            Some(s) => format!("did you mean `{s}`? known formats: {}", known.join(", ")),
            None => format!("known formats: {}", known.join(", ")),
        };
        Err(PlanError::with_help(
            format!("unknown source format `{name}`"),
            help,
        ))
    }

    /// True for the formats read from a path.
    pub fn needs_path(&self) -> bool {
        matches!(
            self,
            SourceFormat::Json
                | SourceFormat::Csv
                | SourceFormat::Parquet
                | SourceFormat::Text
                | SourceFormat::Delta
        )
    }

    /// The fixed schema of formats that have one (`rate`, `socket`, `text`,
    /// `kafka` without headers).
    pub fn fixed_schema(&self) -> Option<SchemaRef> {
        match self {
            SourceFormat::Rate => Some(Arc::new(Schema::new(vec![
                Field::new("timestamp", timestamp(), true),
                Field::new("value", DataType::Int64, true),
            ]))),
            SourceFormat::Socket | SourceFormat::Text => {
                Some(Arc::new(Schema::new(vec![Field::new(
                    "value",
                    DataType::Utf8,
                    true,
                )])))
            }
            SourceFormat::Kafka => Some(kafka_schema(false)),
            _ => None,
        }
    }
}

impl fmt::Display for SourceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn timestamp() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some(SESSION_TIME_ZONE.into()))
}

/// The schema of the Kafka source: `key BINARY, value BINARY, topic STRING,
/// partition INT, offset BIGINT, timestamp TIMESTAMP, timestampType INT`,
/// plus `headers ARRAY<STRUCT<key: STRING, value: BINARY>>` when
/// `includeHeaders` is true.
pub fn kafka_schema(include_headers: bool) -> SchemaRef {
    let mut fields = vec![
        Field::new("key", DataType::Binary, true),
        Field::new("value", DataType::Binary, true),
        Field::new("topic", DataType::Utf8, true),
        Field::new("partition", DataType::Int32, true),
        Field::new("offset", DataType::Int64, true),
        Field::new("timestamp", timestamp(), true),
        Field::new("timestampType", DataType::Int32, true),
    ];
    if include_headers {
        let header = DataType::Struct(Fields::from(vec![
            Field::new("key", DataType::Utf8, true),
            Field::new("value", DataType::Binary, true),
        ]));
        fields.push(Field::new(
            "headers",
            DataType::List(Arc::new(Field::new_list_field(header, true))),
            true,
        ));
    }
    Arc::new(Schema::new(fields))
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

    /// Reads a source without a path: rate, socket, kafka, memory.
    pub fn load_default(self) -> Result<DataFrame> {
        self.build(None)
    }

    fn build(self, path: Option<String>) -> Result<DataFrame> {
        let kind = if self.streaming { "streaming" } else { "batch" };
        let Some(format_name) = self.format.as_deref() else {
            let known: Vec<&str> = SourceFormat::ALL.iter().map(|f| f.name()).collect();
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
        let spec_for_option = SourceSpec {
            format,
            schema: None,
            options: self.options.clone(),
            path: None,
            streaming: self.streaming,
        };
        let opt = |k: &str| spec_for_option.option(k).map(str::to_string);

        // Path rules.
        match (&path, format.needs_path()) {
            (None, true) => {
                return Err(PlanError::with_help(
                    format!("{format} source needs a path"),
                    format!("load it with .load(\"data/{format}\")"),
                )
                .into())
            }
            (Some(p), true) if p.trim().is_empty() => {
                return Err(PlanError::with_help(
                    format!("{format} source has an empty path"),
                    format!("load it with .load(\"data/{format}\")"),
                )
                .into())
            }
            (Some(p), false) if format != SourceFormat::Memory => {
                return Err(PlanError::with_help(
                    format!("{format} source takes no path, got `{p}`"),
                    "load it with .load_default() and configure it with .option(...)",
                )
                .into())
            }
            _ => {}
        }

        // Schema rules.
        let schema = match format {
            SourceFormat::Rate | SourceFormat::Socket | SourceFormat::Kafka => {
                if user_schema.is_some() {
                    return Err(PlanError::with_help(
                        format!("{format} source does not take a schema"),
                        format!(
                            "remove .schema(...): the {format} source always has the schema {}",
                            crate::plan::ddl::schema_to_ddl(
                                &format
                                    .fixed_schema()
                                    .unwrap_or_else(|| Arc::new(Schema::empty()))
                            )
                        ),
                    )
                    .into());
                }
                if format == SourceFormat::Kafka {
                    let headers = opt("includeHeaders")
                        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
                    Some(kafka_schema(headers))
                } else {
                    format.fixed_schema()
                }
            }
            SourceFormat::Text => {
                if let Some(s) = &user_schema {
                    let ok = s.fields().len() == 1
                        && matches!(s.field(0).data_type(), DataType::Utf8 | DataType::LargeUtf8);
                    if !ok {
                        return Err(PlanError::with_help(
                            "text source schema must be a single STRING column",
                            "remove .schema(...) to get the column `value STRING`",
                        )
                        .into());
                    }
                    user_schema
                } else {
                    format.fixed_schema()
                }
            }
            SourceFormat::Json | SourceFormat::Csv => {
                if user_schema.is_none() && self.streaming {
                    return Err(PlanError::with_help(
                        format!("{kind} {format} source needs a schema"),
                        "declare it with .schema(\"ts TIMESTAMP, user_id STRING, ...\") before .load(...)",
                    )
                    .into());
                }
                user_schema
            }
            SourceFormat::Memory => {
                if user_schema.is_none() {
                    return Err(PlanError::with_help(
                        "memory source needs a schema",
                        "declare it with .schema(\"ts TIMESTAMP, value BIGINT\") before loading",
                    )
                    .into());
                }
                user_schema
            }
            SourceFormat::Parquet | SourceFormat::Delta => user_schema,
        };

        // Required options.
        match format {
            SourceFormat::Kafka => {
                if opt("kafka.bootstrap.servers").is_none() {
                    return Err(PlanError::with_help(
                        "kafka source needs the option `kafka.bootstrap.servers`",
                        ".option(\"kafka.bootstrap.servers\", \"host:9092\")",
                    )
                    .into());
                }
                let subs: Vec<&str> = ["subscribe", "subscribePattern", "assign"]
                    .into_iter()
                    .filter(|k| opt(k).is_some())
                    .collect();
                if subs.len() != 1 {
                    return Err(PlanError::with_help(
                        if subs.is_empty() {
                            "kafka source needs one of the options `subscribe`, `subscribePattern` or `assign`".to_string()
                        } else {
                            format!(
                                "kafka source takes only one of the options `subscribe`, `subscribePattern` or `assign`, got {}",
                                subs.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(" and ")
                            )
                        },
                        ".option(\"subscribe\", \"events\")",
                    )
                    .into());
                }
            }
            SourceFormat::Socket => {
                for k in ["host", "port"] {
                    if opt(k).is_none() {
                        return Err(PlanError::with_help(
                            format!("socket source needs the option `{k}`"),
                            ".option(\"host\", \"localhost\").option(\"port\", 9999)",
                        )
                        .into());
                    }
                }
                if let Some(p) = opt("port") {
                    if p.trim().parse::<u16>().is_err() {
                        return Err(PlanError::with_help(
                            format!("socket source option `port` must be a port number, got `{p}`"),
                            ".option(\"port\", 9999)",
                        )
                        .into());
                    }
                }
            }
            SourceFormat::Rate => {
                for k in ["rowsPerSecond", "rampUpTime", "numPartitions"] {
                    if let Some(v) = opt(k) {
                        let ok = if k == "rampUpTime" {
                            crate::duration::parse_interval(&v).is_ok()
                                || v.trim().trim_end_matches('s').parse::<u64>().is_ok()
                        } else {
                            v.trim().parse::<u64>().is_ok_and(|n| n > 0)
                        };
                        if !ok {
                            return Err(PlanError::with_help(
                                format!("rate source option `{k}` has an invalid value `{v}`"),
                                if k == "rampUpTime" {
                                    "use a duration such as \"5s\""
                                } else {
                                    "use a positive whole number"
                                },
                            )
                            .into());
                        }
                    }
                }
            }
            _ => {}
        }

        Ok(DataFrame::from_node(PlanNode::Source(SourceSpec {
            format,
            schema,
            options: self.options,
            path,
            streaming: self.streaming,
        })))
    }
}
