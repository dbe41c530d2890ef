//! Output modes and the questions the graph asks about a format's output
//! modes, answered by the format's connector ([`crate::connector`]).
//!
//! Mirrors Spark's sink capabilities: files take append only; Delta tables
//! take append and complete (and update when `merge_keys` make them an
//! upsert target); Kafka, console, memory and foreach-batch take all three.

use std::fmt;

pub use crate::conf::OUTPUT_MODE_CONF_KEY;

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

/// The default storage format of streaming tables and materialized views:
/// Delta Lake, as in Spark Declarative Pipelines (`format: parquet` keeps
/// the file sink's `_spark_metadata` layout).
pub const DEFAULT_TABLE_FORMAT: &str = "delta";

/// Normalises a format name as users may write it (`foreachBatch`, `Delta`):
/// the connector's canonical name.
pub fn normalize_format(format: &str) -> String {
    crate::connector::normalize(format)
}

/// The output modes a sink (or table) of this format accepts, or `None` for
/// an unknown format. `merge_keys` turns a Delta target into an upsert target
/// that also accepts update mode.
pub fn accepted_modes(format: &str, has_merge_keys: bool) -> Option<&'static [OutputMode]> {
    crate::connector::sink(format).map(|s| s.accepted_modes(has_merge_keys))
}

/// Why a sink (or table) of `format` cannot take a real-time flow's rows,
/// or `None` when it can.
pub fn real_time_sink_problem(format: &str) -> Option<&'static str> {
    match crate::connector::sink(format).map(|s| s.real_time()) {
        Some(crate::connector::RealTime::Supported { .. }) => None,
        Some(crate::connector::RealTime::Refused(why)) => Some(why),
        None => Some("this format cannot take rows as they arrive"),
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

/// The closest known name to `name`, if it is close enough to be a typo
/// ([`crate::suggest::closest`]).
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    crate::suggest::closest(name, candidates)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::connectors::{ALL_MODES as ALL, APPEND_COMPLETE, APPEND_ONLY as APPEND};

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
        let sinks = crate::connector::sink_names();
        assert_eq!(did_you_mean("kafak", sinks.iter().copied()), Some("kafka"));
        assert_eq!(did_you_mean("zzz", sinks.iter().copied()), None);
        assert_eq!(
            sinks,
            [
                "parquet",
                "json",
                "csv",
                "delta",
                "kafka",
                "console",
                "memory",
                "foreach_batch"
            ]
        );
        assert_eq!(
            crate::connector::table_names(),
            ["delta", "parquet", "json", "csv"]
        );
        assert_eq!(
            crate::connector::real_time_sink_names(),
            ["kafka", "memory", "console"]
        );
        assert_eq!(
            crate::connector::complete_mode_sink_names(),
            ["kafka", "console", "memory", "foreach_batch", "delta"]
        );
    }
}
