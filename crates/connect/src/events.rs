//! Spark's pipeline events, which are text only, read back into flow states.
//!
//! Spark 4.3 sends `Flow spark_catalog.default.x is RUNNING.`, `... has
//! COMPLETED.`, `Flow 'spark_catalog.default.x' has FAILED.\nError: ...`,
//! `Failed to resolve flow: 'spark_catalog.default.x'.\nError: ...` and
//! `Run is COMPLETED.`; anything else is kept as a notice.

use pipelines_core::engine::progress::FlowState;

/// What one event says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SparkEvent {
    /// A flow's new state.
    Flow {
        /// The flow's last name part (`x` of `spark_catalog.default.x`).
        flow: String,
        /// Its state here.
        state: FlowState,
        /// Spark's word for it (`PLANNING`, `RUNNING`, ...).
        spark_state: String,
        /// The error text after `Error: `, for a failure.
        error: Option<String>,
    },
    /// The run's end: `COMPLETED`, `FAILED`, `CANCELED`.
    Run {
        /// Spark's word.
        state: String,
    },
    /// Any other message.
    Other,
}

/// The last part of a multi-part name, without quotes or backticks.
fn last_part(name: &str) -> String {
    let trimmed = name.trim().trim_matches(|c| c == '\'' || c == '"');
    let last = trimmed.rsplit('.').next().unwrap_or(trimmed);
    last.trim_matches('`').to_string()
}

fn state_of(word: &str) -> Option<FlowState> {
    Some(match word {
        "QUEUED" => FlowState::Queued,
        "PLANNING" | "STARTING" => FlowState::Starting,
        "RUNNING" => FlowState::Running,
        "COMPLETED" | "IDLE" | "SKIPPED" | "EXCLUDED" => FlowState::Completed,
        "STOPPED" => FlowState::Stopped,
        "FAILED" => FlowState::Failed,
        _ => return None,
    })
}

/// An error text without the plan dump Spark appends to a streaming
/// query's failure (`=== Streaming Query ===` ...): the event log keeps it.
pub fn concise(error: &str) -> &str {
    let cut = error
        .find("\n=== Streaming Query ===")
        .unwrap_or(error.len());
    error[..cut].trim_end()
}

/// Reads one event's message.
pub fn parse(message: &str) -> SparkEvent {
    let (first, rest) = match message.split_once('\n') {
        Some((f, r)) => (f, Some(r)),
        None => (message, None),
    };
    let error = rest.map(|r| r.strip_prefix("Error: ").unwrap_or(r).trim().to_string());
    if let Some(word) = first
        .strip_prefix("Run is ")
        .and_then(|r| r.strip_suffix('.'))
    {
        return SparkEvent::Run {
            state: word.to_string(),
        };
    }
    if let Some(name) = first
        .strip_prefix("Failed to resolve flow: ")
        .map(|r| r.trim_end_matches('.'))
    {
        return SparkEvent::Flow {
            flow: last_part(name),
            state: FlowState::Failed,
            spark_state: "FAILED".into(),
            error,
        };
    }
    if let Some(body) = first
        .strip_prefix("Flow ")
        .and_then(|b| b.strip_suffix('.'))
    {
        for verb in [" is ", " has "] {
            if let Some((name, rest)) = body.rsplit_once(verb) {
                // `has FAILED more than 2 times and will not be restarted`
                let word = rest.split_whitespace().next().unwrap_or_default();
                if let Some(state) = state_of(word) {
                    return SparkEvent::Flow {
                        flow: last_part(name),
                        state,
                        spark_state: word.to_string(),
                        error,
                    };
                }
            }
        }
    }
    SparkEvent::Other
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_messages_spark_sends() {
        assert_eq!(
            parse("Flow spark_catalog.default.clicks_raw is RUNNING."),
            SparkEvent::Flow {
                flow: "clicks_raw".into(),
                state: FlowState::Running,
                spark_state: "RUNNING".into(),
                error: None
            }
        );
        assert_eq!(
            parse("Flow spark_catalog.sql_project.clicks has COMPLETED."),
            SparkEvent::Flow {
                flow: "clicks".into(),
                state: FlowState::Completed,
                spark_state: "COMPLETED".into(),
                error: None
            }
        );
        assert_eq!(
            parse("Flow 'spark_catalog.default.fails_at_runtime' has FAILED.\nError: [CAST_INVALID_INPUT] The value 'x' cannot be cast."),
            SparkEvent::Flow {
                flow: "fails_at_runtime".into(),
                state: FlowState::Failed,
                spark_state: "FAILED".into(),
                error: Some("[CAST_INVALID_INPUT] The value 'x' cannot be cast.".into())
            }
        );
        assert_eq!(
            parse("Failed to resolve flow: 'spark_catalog.default.reads_missing'.\nError: [TABLE_OR_VIEW_NOT_FOUND] gone"),
            SparkEvent::Flow {
                flow: "reads_missing".into(),
                state: FlowState::Failed,
                spark_state: "FAILED".into(),
                error: Some("[TABLE_OR_VIEW_NOT_FOUND] gone".into())
            }
        );
        assert_eq!(
            parse("Flow 'spark_catalog.default.x' has FAILED more than 2 times and will not be restarted.\nError: [STREAM_FAILED] boom"),
            SparkEvent::Flow {
                flow: "x".into(),
                state: FlowState::Failed,
                spark_state: "FAILED".into(),
                error: Some("[STREAM_FAILED] boom".into())
            }
        );
        assert_eq!(
            parse("Run is COMPLETED."),
            SparkEvent::Run {
                state: "COMPLETED".into()
            }
        );
        assert_eq!(
            parse("Failed to resolve flows in the pipeline."),
            SparkEvent::Other
        );
    }
}
