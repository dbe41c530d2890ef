//! Output modes and which sink and table formats accept which of them.
//!
//! Mirrors Spark's sink capabilities: files take append only; Delta tables
//! take append and complete (and update when `merge_keys` make them an
//! upsert target); Kafka, console, memory and foreach-batch take all three.

use std::fmt;

/// Structured Streaming's output modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OutputMode {
    /// Only rows added since the last trigger, each exactly once.
    Append,
    /// Rows inserted or changed in this trigger.
    Update,
    /// The whole result table every trigger.
    Complete,
}

impl fmt::Display for OutputMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OutputMode::Append => "append",
            OutputMode::Update => "update",
            OutputMode::Complete => "complete",
        })
    }
}

impl OutputMode {
    /// Every output mode, in Spark's order of documentation.
    pub const ALL: [OutputMode; 3] = [OutputMode::Append, OutputMode::Update, OutputMode::Complete];

    /// Parses a mode name as Spark does (`append`, `Update`, `COMPLETE`):
    /// case-insensitive, surrounding spaces ignored.
    pub fn parse(text: &str) -> Option<OutputMode> {
        let text = text.trim();
        OutputMode::ALL
            .into_iter()
            .find(|m| m.to_string().eq_ignore_ascii_case(text))
    }
}

/// The per-flow configuration key choosing the output mode (`append`,
/// `update` or `complete`), set in a flow's `conf(...)` or in the spec under
/// `flows: { name: { options: { pipelines.outputMode: complete } } }`.
pub const OUTPUT_MODE_CONF_KEY: &str = "pipelines.outputMode";

const ALL: &[OutputMode] = &[OutputMode::Append, OutputMode::Update, OutputMode::Complete];
const APPEND: &[OutputMode] = &[OutputMode::Append];
const APPEND_COMPLETE: &[OutputMode] = &[OutputMode::Append, OutputMode::Complete];

/// Every sink format the framework knows.
pub const SINK_FORMATS: &[&str] = &[
    "parquet",
    "json",
    "csv",
    "delta",
    "kafka",
    "console",
    "memory",
    "foreach_batch",
];

/// Every storage format a table may use.
pub const TABLE_FORMATS: &[&str] = &["delta", "parquet", "json", "csv"];

/// The default storage format of streaming tables and materialized views:
/// Delta Lake, as in Spark Declarative Pipelines (`format: parquet` keeps
/// the file sink's `_spark_metadata` layout).
pub const DEFAULT_TABLE_FORMAT: &str = "delta";

/// Normalises a format name as users may write it (`foreachBatch`, `Delta`).
pub fn normalize_format(format: &str) -> String {
    let lower = format.trim().to_ascii_lowercase();
    match lower.as_str() {
        "foreachbatch" | "foreach-batch" => "foreach_batch".to_string(),
        _ => lower,
    }
}

/// The output modes a sink (or table) of this format accepts, or `None` for
/// an unknown format. `merge_keys` turns a Delta target into an upsert target
/// that also accepts update mode.
pub fn accepted_modes(format: &str, has_merge_keys: bool) -> Option<&'static [OutputMode]> {
    match normalize_format(format).as_str() {
        "parquet" | "json" | "csv" => Some(APPEND),
        "delta" if has_merge_keys => Some(ALL),
        "delta" => Some(APPEND_COMPLETE),
        "kafka" | "console" | "memory" | "foreach_batch" => Some(ALL),
        _ => None,
    }
}

/// The sink formats a real-time flow can write: they take rows as they are
/// produced and make them durable once per epoch. File and Delta sinks
/// commit once per micro-batch, and a foreach_batch callback is called once
/// per batch id, so they are refused for real-time flows at dry-run.
pub const REAL_TIME_SINK_FORMATS: &[&str] = &["kafka", "memory", "console"];

/// Why a sink (or table) of `format` cannot take a real-time flow's rows,
/// or `None` when it can.
pub fn real_time_sink_problem(format: &str) -> Option<&'static str> {
    match normalize_format(format).as_str() {
        "kafka" | "memory" | "console" => None,
        "parquet" | "json" | "csv" => Some("a file sink commits its files once per micro-batch, so rows could not reach it as they arrive"),
        "delta" => Some("a Delta table commits a version once per micro-batch, so rows could not reach it as they arrive"),
        "foreach_batch" => Some("a foreach_batch callback is called once per micro-batch with its batch id, which a real-time epoch does not have"),
        _ => Some("this format cannot take rows as they arrive"),
    }
}

/// Lists modes as `append, complete`.
pub fn describe_modes(modes: &[OutputMode]) -> String {
    modes
        .iter()
        .map(|m| m.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The closest known name to `name`, if it is close enough to be a typo.
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let mut best: Option<(&str, f64)> = None;
    for c in candidates {
        let score = strsim::jaro_winkler(&name.to_ascii_lowercase(), &c.to_ascii_lowercase());
        if score >= 0.8 && best.is_none_or(|(_, s)| score > s) {
            best = Some((c, score));
        }
    }
    best.map(|(c, _)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sink_capabilities_follow_spark() {
        assert_eq!(accepted_modes("parquet", false), Some(APPEND));
        assert_eq!(accepted_modes("Delta", false), Some(APPEND_COMPLETE));
        assert_eq!(accepted_modes("delta", true), Some(ALL));
        assert_eq!(accepted_modes("foreachBatch", false), Some(ALL));
        assert_eq!(accepted_modes("kafka", false), Some(ALL));
        assert_eq!(accepted_modes("orc2", false), None);
    }

    #[test]
    fn output_modes_parse_like_spark() {
        assert_eq!(OutputMode::parse("append"), Some(OutputMode::Append));
        assert_eq!(OutputMode::parse(" Update "), Some(OutputMode::Update));
        assert_eq!(OutputMode::parse("COMPLETE"), Some(OutputMode::Complete));
        assert_eq!(OutputMode::parse("upsert"), None);
        assert_eq!(OutputMode::parse(""), None);
    }

    #[test]
    fn suggestions() {
        assert_eq!(
            did_you_mean("kafak", SINK_FORMATS.iter().copied()),
            Some("kafka")
        );
        assert_eq!(did_you_mean("zzz", SINK_FORMATS.iter().copied()), None);
    }
}
