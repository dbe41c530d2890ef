//! Structured Streaming's output modes (`pipelines.outputMode`). Which
//! sink accepts which is its connector's answer
//! ([`SinkConnector::accepted_modes`](crate::connector::SinkConnector::accepted_modes)).

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

    #[test]
    fn output_modes_parse_like_spark() {
        assert_eq!(OutputMode::parse("append"), Some(OutputMode::Append));
        assert_eq!(OutputMode::parse(" Update "), Some(OutputMode::Update));
        assert_eq!(OutputMode::parse("COMPLETE"), Some(OutputMode::Complete));
        assert_eq!(OutputMode::parse("upsert"), None);
        assert_eq!(OutputMode::parse(""), None);
    }
}
