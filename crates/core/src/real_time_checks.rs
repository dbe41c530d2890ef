//! Dry-run checks for flows with the real-time trigger
//! (`trigger: { real_time: { checkpoint_interval: 5 minutes } }`).
//!
//! Real-time mode runs every query the micro-batch engine runs (stateless
//! operators, stream-static and stream-stream joins, aggregations,
//! deduplication) from Kafka, rate, socket, memory, file and Delta sources.
//! It refuses only what cannot work when rows flow through as they arrive:
//!
//! | rule | why |
//! | --- | --- |
//! | the target (and the `pipelines.lateRowsTo` sink) is a kafka, memory or console sink | file and Delta sinks commit once per micro-batch; a foreach_batch callback is called once per batch id |
//! | no append mode over a streaming aggregation or an outer stream-stream join | append mode holds those rows back until the watermark passes, for a later batch: use update mode |
//!
//! The checkpoint interval's minimum (5 seconds, as in Spark) is checked
//! where the trigger is parsed.

use crate::definition::{DatasetDef, DatasetType, FlowDef};
use crate::error::Diagnostic;
use crate::formats::OutputMode;
use crate::plan::{DataFrame, JoinType, PlanNode};

/// The micro-batch trigger suggested instead of real-time mode.
const MICRO_BATCH_FIX: &str = "trigger: { processing_time: 1 second }";

/// Checks one real-time flow: its plan, output mode, target, late-rows
/// sink and quarantine. Returns every problem, each naming the flow and its declaration.
pub fn check_real_time(
    flow: &FlowDef,
    plan: &DataFrame,
    mode: OutputMode,
    target: &DatasetDef,
    late_rows_to: Option<&DatasetDef>,
    quarantine: Option<&DatasetDef>,
) -> Vec<Diagnostic> {
    let mut problems = Vec::new();
    let mut problem = |message: String, help: String| {
        problems.push(
            Diagnostic::new(message)
                .subject(flow.subject())
                .origin(flow.origin.clone())
                .help(help),
        );
    };
    for (what, dataset) in std::iter::once(("writes to", target))
        .chain(late_rows_to.map(|d| ("sends late rows to", d)))
        .chain(quarantine.map(|d| ("quarantines rows into", d)))
    {
        let format = dataset
            .format
            .as_deref()
            .map(crate::connector::normalize)
            .unwrap_or_else(|| match dataset.dataset_type() {
                DatasetType::Sink => "unknown".to_string(),
                _ => crate::connector::default_table_format().to_string(),
            });
        if let Some(why) = crate::connector::real_time_problem(&format) {
            problem(
                format!(
                    "real-time mode {what} {} ({format}), and {why}",
                    dataset.subject()
                ),
                format!(
                    "write to a sink that takes rows as they arrive ({}), or run the flow in micro-batches (`{MICRO_BATCH_FIX}`)",
                    crate::connector::real_time_sink_names().join(", ")
                ),
            );
        }
    }
    if mode == OutputMode::Append {
        if let Some(held_back) = held_back_by_watermark(plan) {
            problem(
                format!(
                    "real-time mode emits rows as they arrive, but in append mode {held_back} reaches the sink only once the watermark has passed, in a later batch"
                ),
                format!(
                    "use update mode (#[update_flow] into a sink) to see rows at once, or run the flow in micro-batches (`{MICRO_BATCH_FIX}`)"
                ),
            );
        }
    }
    problems
}

/// The first operator whose append-mode output waits for the watermark: a
/// streaming aggregation, or an outer stream-stream join's unmatched rows.
fn held_back_by_watermark(plan: &DataFrame) -> Option<String> {
    for child in plan.children() {
        if let Some(found) = held_back_by_watermark(child) {
            return Some(found);
        }
    }
    match plan.node() {
        PlanNode::Aggregate { input, .. } if input.is_streaming() => {
            Some("an aggregation's result".to_string())
        }
        PlanNode::Join {
            left,
            right,
            join_type,
            ..
        } if left.is_streaming()
            && right.is_streaming()
            && matches!(
                join_type,
                JoinType::LeftOuter | JoinType::RightOuter | JoinType::FullOuter
            ) =>
        {
            Some("an outer stream-stream join's unmatched rows".to_string())
        }
        _ => None,
    }
}
