//! How a fix is written in the language a flow was declared in: the help
//! texts of the graph and query checks name Rust calls for a flow written in
//! Rust, and SQL clauses for a flow of a SQL library file. Every phrase that
//! differs between the two lives here.

use crate::conf::OUTPUT_MODE_CONF_KEY;
use crate::definition::FlowDef;
use crate::error::Origin;
use crate::formats::OutputMode;
use crate::registry::FlowKind;

/// The language a flow was declared in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    /// Attribute macros or builder calls.
    Rust,
    /// A SQL library file.
    Sql,
}

impl Language {
    /// The language of `f`'s declaration (SQL when it comes from a library file).
    pub fn of(f: &FlowDef) -> Language {
        if f.origin.as_ref().is_some_and(Origin::is_library) {
            Language::Sql
        } else {
            Language::Rust
        }
    }

    /// How to declare a missing quarantine `q`.
    pub fn declare_quarantine(self, q: &str) -> String {
        match self {
            Language::Rust => format!("declare a sink or streaming table for the rows, e.g. create_streaming_table(\"{q}\", ...) or under `sinks:` in the spec"),
            Language::Sql => format!("declare a table for the rows, `CREATE STREAMING TABLE {q};`, or a sink under `sinks:` in the spec"),
        }
    }

    /// How to declare a flow's missing target.
    pub fn declare_target(self) -> &'static str {
        match self {
            Language::Rust => "declare it under `tables:` or `sinks:` in the spec, with #[table], or with create_sink(...)",
            Language::Sql => "declare it with CREATE STREAMING TABLE, or under `sinks:` in the spec",
        }
    }

    /// How to declare a dataset a flow reads.
    pub fn declare_dataset(self) -> &'static str {
        match self {
            Language::Rust => "declare it with #[table] / #[materialized_view] / #[temporary_view] or under `tables:` in the spec",
            Language::Sql => "declare it with CREATE STREAMING TABLE / CREATE MATERIALIZED VIEW / CREATE TEMPORARY VIEW, or under `tables:` in the spec",
        }
    }

    /// What to do with an update flow that targets a table.
    pub fn update_flow_into_table(self) -> &'static str {
        match self {
            Language::Rust => "point `target` at a sink declared under `sinks:` or with create_sink(...), or use #[append_flow]",
            Language::Sql => "write into a sink declared under `sinks:` in the spec, or remove `SET pipelines.outputMode = update`",
        }
    }

    /// How to read materialized view `ds`, read as a stream by mistake.
    pub fn read_view_as_batch(self, ds: &str) -> String {
        match self {
            Language::Rust => format!("use read_table(\"{ds}\"), or make `{ds}` a streaming table"),
            Language::Sql => {
                format!("read it without STREAM(...), or make `{ds}` a streaming table")
            }
        }
    }

    /// How to fix a streaming query into materialized view `target`.
    pub fn batch_query_for(self, target: &str) -> String {
        match self {
            Language::Rust => format!(
                "read with read() / read_table(...), or declare `{target}` as a streaming table with #[table]"
            ),
            Language::Sql => format!(
                "read without STREAM(...), or declare `{target}` with CREATE STREAMING TABLE"
            ),
        }
    }

    /// How to fix a batch query into a streaming table or sink.
    pub fn streaming_query(self) -> &'static str {
        match self {
            Language::Rust => "read with read_stream() / read_stream_table(...), or set `once = true` to run the batch query a single time",
            Language::Sql => "read its input as a stream: FROM STREAM(name), or STREAM read_files(...)",
        }
    }

    /// How to put a watermark on `ts` before an aggregation windowed over it.
    pub fn add_watermark(self, ts: &str) -> String {
        match self {
            Language::Rust => format!(
                "add `.with_watermark(\"{ts}\", \"10 minutes\")` before group_by and group by `window({ts}, …)`"
            ),
            Language::Sql => format!(
                "add `WATERMARK {ts} DELAY OF INTERVAL 10 MINUTES` after the streaming read and group by `window({ts}, …)`"
            ),
        }
    }

    /// "update mode (declare the flow with #[update_flow] into a sink)": how
    /// a flow of `kind`, now writing in `current` mode, gets `wanted` mode.
    pub fn use_mode(self, kind: FlowKind, current: OutputMode, wanted: OutputMode) -> String {
        let default = match kind {
            FlowKind::Update => OutputMode::Update,
            FlowKind::Append => OutputMode::Append,
        };
        // The mode is set explicitly when it is not the flow kind's default.
        let without = if current == default {
            String::new()
        } else {
            format!(" without `{OUTPUT_MODE_CONF_KEY}`")
        };
        let how = match (self, wanted, kind) {
            (_, m, _) if m == default => format!("remove `{OUTPUT_MODE_CONF_KEY}`"),
            (Language::Sql, OutputMode::Append, FlowKind::Update) => {
                format!("remove `SET {OUTPUT_MODE_CONF_KEY} = update`")
            }
            (Language::Sql, OutputMode::Update, FlowKind::Append) => format!(
                "`SET {OUTPUT_MODE_CONF_KEY} = update;` before a CREATE FLOW into a sink{without}"
            ),
            (Language::Sql, m, _) => {
                format!("`SET {OUTPUT_MODE_CONF_KEY} = {m};` before the statement")
            }
            (Language::Rust, OutputMode::Append, FlowKind::Update) => {
                format!("declare the flow with #[append_flow]{without}")
            }
            (Language::Rust, OutputMode::Update, FlowKind::Append) => {
                format!("declare the flow with #[update_flow] into a sink{without}")
            }
            (Language::Rust, m, _) => format!("set `{OUTPUT_MODE_CONF_KEY}` to `{m}`"),
        };
        format!("{wanted} mode ({how})")
    }
}
