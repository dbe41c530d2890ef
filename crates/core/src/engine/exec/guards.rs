//! What a stream cannot do yet: the streaming operators and windows the
//! compiler refuses, with a typed error naming the flow and the fix.

use super::*;

pub(super) const STATEFUL_LATER: &str = "is not supported by this build yet";

pub(super) fn not_yet(flow: &str, what: String, help: &str) -> Error {
    PlanError::with_help(format!("flow `{flow}`: {what} {STATEFUL_LATER}"), help).into()
}

/// True when `df` aggregates a stream somewhere below (or at) it.
pub(super) fn aggregates_stream(df: &DataFrame) -> bool {
    match df.node() {
        PlanNode::Aggregate { input, .. } if input.is_streaming() => true,
        _ => df.children().into_iter().any(aggregates_stream),
    }
}

/// Refuses what the engine cannot run on a stream, innermost first. (The
/// output-mode rules are the graph's query checks; this is the last guard.)
pub(super) fn check_streaming_ops(flow: &str, df: &DataFrame) -> Result<()> {
    for c in df.children() {
        check_streaming_ops(flow, c)?;
    }
    match df.node() {
        PlanNode::Join {
            left,
            right,
            join_type,
            ..
        } => match (left.is_streaming(), right.is_streaming()) {
            (true, true) => match join_type {
                JoinType::LeftAnti => Err(PlanError::with_help(
                    format!("flow `{flow}`: a left_anti join of two streams cannot run: a left row can only be emitted once no right row can ever match it"),
                    "join the right side as a static table (read / read_table), or use a left_outer join and keep the rows whose right columns are null",
                )
                .into()),
                _ => Ok(()),
            },
            (true, false) => match join_type {
                JoinType::Inner | JoinType::LeftOuter | JoinType::LeftSemi | JoinType::LeftAnti => {
                    Ok(())
                }
                _ => Err(PlanError::with_help(
                    format!(
                        "flow `{flow}`: a {join_type} join of a stream (left) with a static table (right) cannot run on a stream: the static side's unmatched rows would be emitted again with every batch"
                    ),
                    "use an inner or left_outer join, or put the stream on the right side of a right_outer join",
                )
                .into()),
            },
            (false, true) => match join_type {
                JoinType::Inner | JoinType::RightOuter => Ok(()),
                _ => Err(PlanError::with_help(
                    format!(
                        "flow `{flow}`: a {join_type} join of a static table (left) with a stream (right) cannot run on a stream: the static side's unmatched rows would be emitted again with every batch"
                    ),
                    "put the stream on the left side (stream.join(static, ..., left_outer)), or use an inner join",
                )
                .into()),
            },
            (false, false) => Ok(()),
        },
        PlanNode::OrderBy { input, .. } if input.is_streaming() && !aggregates_stream(input) => Err(not_yet(
            flow,
            "order_by on a stream".to_string(),
            "sort a batch read instead (read / read_table, e.g. in a materialized view); sorting a stream needs an aggregation in complete mode",
        )),
        PlanNode::Limit { input, .. } if input.is_streaming() && !aggregates_stream(input) => Err(not_yet(
            flow,
            "limit on a stream".to_string(),
            "limit a batch read instead (read / read_table, e.g. in a materialized view)",
        )),
        _ => Ok(()),
    }
}

/// Sliding and session windows assign a row to several windows or merge
/// windows per key; evaluating them row by row is not possible: sliding
/// windows are expanded by the streaming aggregation, elsewhere they are
/// refused, as are session windows for now.
pub(super) fn check_windows(flow: &str, root: &ResolvedNode) -> Result<()> {
    let mut found: Option<(String, &'static str)> = None;
    root.walk(&mut |n| {
        if found.is_some() {
            return;
        }
        let streaming_aggregate =
            matches!(n.node.as_ref(), PlanNode::Aggregate { input, .. } if input.is_streaming());
        for e in &n.exprs {
            let _ = e.apply(|sub| {
                if matches!(sub, Expr::Alias(_)) {
                    return Ok(TreeNodeRecursion::Continue);
                }
                if let Some(w) = window_call(sub) {
                    if !w.is_tumbling() && !streaming_aggregate {
                        found = Some((expr_text(sub), "sliding window"));
                        return Ok(TreeNodeRecursion::Stop);
                    }
                } else if session_window_call(sub).is_some() && !streaming_aggregate {
                    found = Some((expr_text(sub), "session window"));
                    return Ok(TreeNodeRecursion::Stop);
                }
                Ok(TreeNodeRecursion::Continue)
            });
            if found.is_some() {
                return;
            }
        }
    });
    match found {
        Some((text, kind)) => Err(not_yet(
            flow,
            format!("a {kind} `{text}` outside a streaming aggregation"),
            "group a stream by the window (group_by([window(ts, ...), ...])), or use a tumbling window such as window(ts, '10 minutes')",
        )),
        None => Ok(()),
    }
}
