//! Query-shape checks made before any data moves: which streaming query may
//! run in which output mode, mirroring Spark 4's `UnsupportedOperationChecker`
//! for the operators this framework has.
//!
//! The graph builder resolves every flow's plan and calls [`check_query`]
//! with the resolved plan and the flow's output mode
//! ([`graph::output_mode_of`](crate::graph::output_mode_of)). Every problem
//! is returned as a [`Diagnostic`] naming the flow, its declaration and the
//! fix, so a pipeline's mistakes are all reported at once (Spark stops at the
//! first one). The rules, for streaming inputs:
//!
//! | rule | Spark's wording |
//! | --- | --- |
//! | append mode: every streaming aggregation groups by a watermarked column or a `window`/`session_window` over one | "Append output mode not supported when there are streaming aggregations … without watermark" |
//! | complete mode needs a streaming aggregation | "Complete output mode not supported when there are no streaming aggregations" |
//! | `order_by` only after an aggregation, in complete mode | "Sorting is not supported on streaming DataFrames/Datasets, unless it is on aggregated DataFrame/Dataset in Complete output mode" |
//! | no distinct aggregates (`count(DISTINCT x)`) | "Distinct aggregations are not supported … Consider using approx_count_distinct() instead." |
//! | no `limit` in update mode (append and complete are fine) | "Limits are not supported on streaming DataFrames/Datasets in Update output mode" |
//! | stream-stream joins: inner and left semi in append and update mode, outer joins in append mode only (Spark 4.3) | "… only in Append output mode", "… only in Append and Update output modes" |
//! | stream-stream outer and semi joins need an equality on a watermarked key, or a watermark on the nullable side and a time-range condition bounding the other side's event time by it; inner joins need nothing (their state just grows) | "… without a watermark in the join keys, or a watermark on the nullable side and an appropriate range condition" |
//! | stream-static joins: no full outer, no outer join preserving the static side, no left semi/anti with a streaming right side (so no stream-stream left anti either) | "FullOuter joins with streaming DataFrames/Datasets on the left and a static …" |
//! | no union of streaming and batch inputs | "Union between streaming and batch DataFrames/Datasets is not supported" |
//! | `drop_duplicates_within_watermark` needs a watermark on its input, and is refused in batch queries | "dropDuplicatesWithinWatermark is not supported … without watermark", "… not supported with batch DataFrames/DataSets" |
//! | no stateful operator (aggregation, stream-stream join, deduplication on an event-time key or within the watermark) after a streaming aggregation unless the output mode is append | "Detected pattern of possible 'correctness' issue due to global watermark" |
//! | update mode: no session windows | "Update output mode not supported for session window" |
//!
//! Watermarks are followed through the plan the way Spark follows its
//! watermark metadata: a column given to `with_watermark` is event time, and
//! so is a `window(..)`/`session_window(..)` over it, through selects,
//! renames, joins and aggregation keys; any other expression over it is not.
//! A dataset read starts without watermarks, as in Spark.
//!
//! Which sink or table takes which output mode is checked by the graph
//! itself, with the targets ([`formats::accepted_modes`](crate::formats::accepted_modes)).

use std::collections::BTreeSet;

use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::Column;
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};

use crate::definition::FlowDef;
use crate::error::Diagnostic;
use crate::fixes::Language;
use crate::formats::{OutputMode, OUTPUT_MODE_CONF_KEY};
use crate::plan::functions::{session_window_call, window_call};
use crate::plan::resolve::expr_text;
use crate::plan::{ColumnExpr, JoinType, PlanNode, ResolvedNode, ResolvedPlan};

/// Checks one flow's resolved query against its output mode; returns every
/// problem, in plan order (inputs first), each naming the flow and its
/// declaration.
pub fn check_query(flow: &FlowDef, plan: &ResolvedPlan, mode: OutputMode) -> Vec<Diagnostic> {
    let mut checker = Checker {
        flow,
        mode,
        problems: Vec::new(),
        batch_problems: Vec::new(),
    };
    let root = checker.visit(plan.root());
    if !root.streaming {
        // Spark's checkForBatch: only for queries that are batch as a whole.
        let batch = std::mem::take(&mut checker.batch_problems);
        checker.problems.extend(batch);
    }
    if !root.streaming && mode == OutputMode::Complete {
        checker.problem(
            "complete output mode applies to streaming queries, and this flow's query is a batch query (its whole result is written every time it runs)",
            format!("remove `{OUTPUT_MODE_CONF_KEY}`"),
        );
    } else if root.streaming && mode == OutputMode::Complete && root.aggregation.is_none() {
        let help = format!(
            "aggregate with group_by(...).agg(...), or use {}",
            checker.use_mode(OutputMode::Append)
        );
        checker.problem(
            "complete output mode needs a streaming aggregation: it rewrites the whole result every batch, and this query has none",
            help,
        );
    }
    checker
        .problems
        .into_iter()
        .map(|(message, help)| {
            Diagnostic::new(message)
                .subject(flow.subject())
                .origin(flow.origin.clone())
                .help(help)
        })
        .collect()
}

/// What the checks know about the output of a plan node.
#[derive(Clone, Debug, Default)]
struct Facts {
    /// Some leaf below is a stream.
    streaming: bool,
    /// Output columns carrying a watermark: the column of a `with_watermark`,
    /// or a window over it.
    event_time: BTreeSet<String>,
    /// The nearest streaming aggregation at or below the node, described.
    aggregation: Option<String>,
}

struct Checker<'a> {
    flow: &'a FlowDef,
    mode: OutputMode,
    problems: Vec<(String, String)>,
    /// Problems only when the whole query is a batch query.
    batch_problems: Vec<(String, String)>,
}

impl Checker<'_> {
    fn problem(&mut self, message: impl Into<String>, help: impl Into<String>) {
        self.problems.push((message.into(), help.into()));
    }

    /// "update mode (declare the flow with #[update_flow] into a sink)".
    fn use_mode(&self, wanted: OutputMode) -> String {
        Language::of(self.flow).use_mode(self.flow.kind, self.mode, wanted)
    }

    /// Checks a node after its inputs and returns the facts about its output.
    fn visit(&mut self, n: &ResolvedNode) -> Facts {
        let kids: Vec<Facts> = n.children.iter().map(|c| self.visit(c)).collect();
        let mut input = kids.first().cloned().unwrap_or_default();
        match n.node.as_ref() {
            PlanNode::Source(spec) => Facts {
                streaming: spec.streaming,
                ..Facts::default()
            },
            PlanNode::DatasetRead { streaming, .. } => Facts {
                streaming: *streaming,
                ..Facts::default()
            },
            PlanNode::Select { .. } => {
                let event_time = n
                    .exprs
                    .iter()
                    .zip(n.schema.fields())
                    .filter(|(e, _)| event_time_column(e, &input.event_time).is_some())
                    .map(|(_, f)| f.name().clone())
                    .collect();
                Facts {
                    event_time,
                    ..input
                }
            }
            PlanNode::WithColumn { name, .. } => {
                let derived = n
                    .exprs
                    .first()
                    .is_some_and(|e| event_time_column(e, &input.event_time).is_some());
                input.event_time.remove(name);
                if derived {
                    input.event_time.insert(name.clone());
                }
                input
            }
            PlanNode::WithColumnRenamed { existing, new, .. } => {
                if input.event_time.remove(existing) {
                    input.event_time.insert(new.clone());
                }
                input
            }
            PlanNode::Drop { columns, .. } => {
                for c in columns {
                    input.event_time.remove(c);
                }
                input
            }
            PlanNode::WithWatermark { column, .. } => {
                input.event_time.insert(column.clone());
                input
            }
            PlanNode::Filter { .. } => input,
            PlanNode::Union { .. } => {
                let streaming = kids.iter().filter(|k| k.streaming).count();
                if streaming > 0 && streaming < kids.len() {
                    self.problem(
                        "union of streaming and batch inputs is not supported",
                        "read every input of the union as a stream (read_stream, read_stream_table) or every one as a batch (read, read_table)",
                    );
                }
                // Like Spark, the union's columns are those of its first input.
                Facts {
                    streaming: streaming > 0,
                    event_time: input.event_time,
                    aggregation: kids.iter().find_map(|k| k.aggregation.clone()),
                }
            }
            PlanNode::Aggregate {
                keys, aggregates, ..
            } => self.aggregate(n, input, keys, aggregates),
            PlanNode::DropDuplicates {
                columns,
                within_watermark,
                ..
            } => {
                self.drop_duplicates(n, &input, columns.as_deref(), *within_watermark);
                input
            }
            PlanNode::Join {
                on,
                using,
                join_type,
                ..
            } => {
                let right = kids.get(1).cloned().unwrap_or_default();
                self.join(n, input, right, on.as_ref(), using, *join_type)
            }
            PlanNode::OrderBy { sort, .. } => {
                if input.streaming
                    && !(self.mode == OutputMode::Complete && input.aggregation.is_some())
                {
                    let keys = sort
                        .iter()
                        .map(|k| {
                            let dir = if k.asc { "" } else { " DESC" };
                            format!("{}{dir}", show(&k.expr))
                        })
                        .collect::<Vec<_>>()
                        .join(", ");
                    let help = if input.aggregation.is_some() {
                        format!(
                            "use {}, or sort when reading the results",
                            self.use_mode(OutputMode::Complete)
                        )
                    } else {
                        "sort when reading the results (e.g. in a materialized view), or sort after group_by(...).agg(...) in complete mode".to_string()
                    };
                    self.problem(
                        format!(
                            "`order_by({keys})` sorts a stream, which is only supported after an aggregation in complete output mode"
                        ),
                        help,
                    );
                }
                input
            }
            PlanNode::Limit { n: rows, .. } => {
                if input.streaming && self.mode == OutputMode::Update {
                    let help = format!(
                        "use {} or {}, or apply the limit when reading the results",
                        self.use_mode(OutputMode::Append),
                        self.use_mode(OutputMode::Complete)
                    );
                    self.problem(
                        format!(
                            "`limit({rows})` on a stream is not supported in update output mode"
                        ),
                        help,
                    );
                }
                input
            }
        }
    }

    fn aggregate(
        &mut self,
        n: &ResolvedNode,
        input: Facts,
        keys: &[ColumnExpr],
        aggregates: &[ColumnExpr],
    ) -> Facts {
        let split = keys.len().min(n.exprs.len());
        let (key_exprs, agg_exprs) = n.exprs.split_at(split);
        let desc = format!(
            "group_by({})",
            keys.iter().map(show).collect::<Vec<_>>().join(", ")
        );
        if input.streaming {
            for (e, text) in agg_exprs.iter().zip(aggregates) {
                if let Some(arg) = distinct_aggregate(e) {
                    let help = match arg {
                        Some(arg) => format!(
                            "count approximately with `approx_count_distinct({arg})` instead, or remove DISTINCT"
                        ),
                        None => "remove DISTINCT, or de-duplicate the rows first with drop_duplicates(...)".to_string(),
                    };
                    self.problem(
                        format!(
                            "distinct aggregate `{}` in `{desc}` is not supported on a stream",
                            show(text)
                        ),
                        help,
                    );
                }
            }
            let watermarked = key_exprs
                .iter()
                .any(|k| event_time_column(k, &input.event_time).is_some());
            if self.mode == OutputMode::Append && !watermarked {
                let input_schema = n.children.first().map(|c| c.schema.clone());
                let (message, fix) = match input.event_time.iter().next() {
                    Some(ts) => (
                        format!(
                            "append output mode needs the aggregation `{desc}` to group by its watermarked column `{ts}` or a window over it"
                        ),
                        format!("also group by `window({ts}, …)` (or `{ts}`)"),
                    ),
                    None => {
                        let ts = time_column(input_schema.as_ref(), &input.event_time, keys_time(key_exprs));
                        (
                            format!(
                                "append output mode needs a watermark on the aggregation's event-time key, and `{desc}` has none"
                            ),
                            Language::of(self.flow).add_watermark(&ts),
                        )
                    }
                };
                let help = format!(
                    "{fix}, or use {} or {}",
                    self.use_mode(OutputMode::Update),
                    self.use_mode(OutputMode::Complete)
                );
                self.problem(message, help);
            }
            if self.mode == OutputMode::Update
                && key_exprs.iter().any(|k| session_window_call(k).is_some())
            {
                let help = format!(
                    "use {} (each session is emitted once, when the watermark closes it) or {}",
                    self.use_mode(OutputMode::Append),
                    self.use_mode(OutputMode::Complete)
                );
                self.problem(
                    format!("update output mode does not support session windows: `{desc}`"),
                    help,
                );
            }
            self.after_aggregation(&format!("the aggregation `{desc}`"), &input);
        }
        let event_time = key_exprs
            .iter()
            .zip(n.schema.fields())
            .filter(|(e, _)| event_time_column(e, &input.event_time).is_some())
            .map(|(_, f)| f.name().clone())
            .collect();
        Facts {
            streaming: input.streaming,
            event_time,
            aggregation: if input.streaming {
                Some(desc)
            } else {
                input.aggregation
            },
        }
    }

    fn drop_duplicates(
        &mut self,
        n: &ResolvedNode,
        input: &Facts,
        columns: Option<&[String]>,
        within_watermark: bool,
    ) {
        let name = if within_watermark {
            "drop_duplicates_within_watermark"
        } else {
            "drop_duplicates"
        };
        let desc = format!(
            "{name}({})",
            columns.map(|c| c.join(", ")).unwrap_or_default()
        );
        if !input.streaming {
            if within_watermark {
                self.batch_problems.push((
                    format!("`{desc}` needs a streaming input; its input is a batch query"),
                    "use drop_duplicates(...) on batch inputs".to_string(),
                ));
            }
            return;
        }
        if within_watermark && input.event_time.is_empty() {
            let schema = n.children.first().map(|c| c.schema.clone());
            let ts = time_column(schema.as_ref(), &input.event_time, None);
            self.problem(
                format!("`{desc}` needs a watermark on its input, and there is none"),
                format!(
                    "add `.with_watermark(\"{ts}\", \"10 minutes\")` before it, or use drop_duplicates(...)"
                ),
            );
        }
        let keys: Vec<&String> = match columns {
            Some(c) => c.iter().collect(),
            None => n.schema.fields().iter().map(|f| f.name()).collect(),
        };
        // Spark counts deduplication as stateful (for the global watermark)
        // when it is within the watermark or keyed by an event-time column.
        if within_watermark || keys.iter().any(|k| input.event_time.contains(*k)) {
            self.after_aggregation(&format!("`{desc}`"), input);
        }
    }

    /// Spark's global-watermark check: a stateful operator after a streaming
    /// aggregation that can emit rows older than the watermark.
    fn after_aggregation(&mut self, op: &str, input: &Facts) {
        let Some(agg) = &input.aggregation else {
            return;
        };
        if self.mode == OutputMode::Append {
            return;
        }
        let help = format!(
            "use {} and group `{agg}` by a window over a watermarked column, so each group is emitted once, when final",
            self.use_mode(OutputMode::Append)
        );
        self.problem(
            format!(
                "{op} after the aggregation `{agg}` in {} output mode is a possible correctness issue due to the global watermark: the aggregation emits rows older than the watermark, which the later operator drops as late",
                self.mode
            ),
            help,
        );
    }

    fn join(
        &mut self,
        n: &ResolvedNode,
        left: Facts,
        right: Facts,
        on: Option<&ColumnExpr>,
        using: &[String],
        join_type: JoinType,
    ) -> Facts {
        let desc = match on {
            Some(c) => format!("{join_type} join on `{}`", show(c)),
            None => format!("{join_type} join using ({})", using.join(", ")),
        };
        match (left.streaming, right.streaming) {
            (true, true) => {
                let mut refused = false;
                // Spark 4.3: inner and left semi joins run in append and
                // update mode, outer joins in append mode only.
                let modes: &[OutputMode] = match join_type {
                    JoinType::Inner | JoinType::LeftSemi => {
                        &[OutputMode::Append, OutputMode::Update]
                    }
                    _ => &[OutputMode::Append],
                };
                if !modes.contains(&self.mode) && join_type != JoinType::LeftAnti {
                    refused = true;
                    let help = format!(
                        "use {}",
                        modes
                            .iter()
                            .map(|m| self.use_mode(*m))
                            .collect::<Vec<_>>()
                            .join(" or ")
                    );
                    self.problem(
                        format!(
                            "the stream-stream {desc} runs only in {} output mode, not in {} mode",
                            modes
                                .iter()
                                .map(|m| m.to_string())
                                .collect::<Vec<_>>()
                                .join(" or "),
                            self.mode
                        ),
                        help,
                    );
                }
                match join_type {
                    JoinType::Inner => {}
                    JoinType::LeftAnti => {
                        refused = true;
                        self.problem(
                            format!("the {desc} has a streaming right side, which left_anti joins do not support"),
                            "read the right side as a batch (read(), read_table(...)), or use a left_outer join with a time range and keep the rows whose right columns are null",
                        );
                    }
                    _ => {
                        if !self.join_bounded(n, &left, &right, on, using, join_type) {
                            refused = true;
                        }
                    }
                }
                if !refused {
                    let first = if left.aggregation.is_some() {
                        &left
                    } else {
                        &right
                    };
                    self.after_aggregation(&format!("the stream-stream {desc}"), first);
                }
            }
            (true, false) | (false, true) => {
                let streaming_left = left.streaming;
                let refused_side = match join_type {
                    JoinType::FullOuter => Some(if streaming_left { "right" } else { "left" }),
                    JoinType::RightOuter if streaming_left => Some("right"),
                    JoinType::LeftOuter | JoinType::LeftSemi | JoinType::LeftAnti
                        if !streaming_left =>
                    {
                        Some("left")
                    }
                    _ => None,
                };
                if let Some(static_side) = refused_side {
                    let stream_side = if streaming_left { "left" } else { "right" };
                    let help = match join_type {
                        JoinType::FullOuter => format!(
                            "keep the stream's rows with a {} join, or read both sides as streams with watermarks",
                            if streaming_left { "left_outer" } else { "right_outer" }
                        ),
                        JoinType::RightOuter => "swap the sides and use a left_outer join (stream on the left), or use an inner join".to_string(),
                        JoinType::LeftAnti => "put the stream on the left of the left_anti join, or read both sides as batches".to_string(),
                        _ => format!(
                            "swap the sides and use a {} join (stream on the left), or use an inner join",
                            if join_type == JoinType::LeftSemi { "left_semi" } else { "left_outer" }
                        ),
                    };
                    self.problem(
                        format!(
                            "the {desc} between a stream ({stream_side}) and a batch query ({static_side}) is not supported: it would have to emit the unmatched rows of the batch side, which is never finished"
                        ),
                        help,
                    );
                }
            }
            (false, false) => {}
        }
        let keep_right = !matches!(join_type, JoinType::LeftSemi | JoinType::LeftAnti);
        let event_time = n
            .schema
            .fields()
            .iter()
            .map(|f| f.name())
            .filter(|name| {
                left.event_time.contains(*name) || (keep_right && right.event_time.contains(*name))
            })
            .cloned()
            .collect();
        Facts {
            streaming: left.streaming || right.streaming,
            event_time,
            aggregation: left.aggregation.or(right.aggregation),
        }
    }

    /// Spark's condition for stream-stream outer and semi joins; reports
    /// and returns false when it does not hold.
    fn join_bounded(
        &mut self,
        n: &ResolvedNode,
        left: &Facts,
        right: &Facts,
        on: Option<&ColumnExpr>,
        using: &[String],
        join_type: JoinType,
    ) -> bool {
        let (Some(left_node), Some(right_node)) = (n.children.first(), n.children.get(1)) else {
            return true;
        };
        let sides = Sides {
            left: &left_node.schema,
            right: &right_node.schema,
            left_time: &left.event_time,
            right_time: &right.event_time,
        };
        let condition = on.and(n.exprs.first());
        let keyed = match condition {
            Some(c) => watermark_in_join_keys(c, &sides),
            None => using
                .iter()
                .any(|k| left.event_time.contains(k) || right.event_time.contains(k)),
        };
        // (side whose state needs bounding, side whose watermark bounds it)
        let directions: &[(Side, Side)] = match join_type {
            JoinType::LeftOuter | JoinType::LeftSemi => &[(Side::Left, Side::Right)],
            JoinType::RightOuter => &[(Side::Right, Side::Left)],
            _ => &[(Side::Left, Side::Right), (Side::Right, Side::Left)],
        };
        let ranged = condition.is_some_and(|c| {
            directions
                .iter()
                .any(|&(state, bound)| has_range_condition(c, &sides, state, bound))
        });
        if keyed || ranged {
            return true;
        }
        let lt = time_column(Some(&left_node.schema), &left.event_time, None);
        let rt = time_column(Some(&right_node.schema), &right.event_time, None);
        let desc = match on {
            Some(c) => format!("{join_type} join on `{}`", show(c)),
            None => format!("{join_type} join using ({})", using.join(", ")),
        };
        let (message, help) = if join_type == JoinType::FullOuter {
            (
                format!(
                    "the stream-stream {desc} needs an equality on a watermarked key, or a watermark on one side and a time-range condition bounding the other side's event time by it; without them unmatched rows are never emitted and its state grows forever"
                ),
                format!(
                    "add watermarks to both inputs (e.g. `.with_watermark(\"{lt}\", \"10 minutes\")` and `.with_watermark(\"{rt}\", \"10 minutes\")`) and a condition such as `{rt} >= {lt} AND {rt} <= {lt} + INTERVAL 5 MINUTES`"
                ),
            )
        } else {
            let (state, bound, st, bt, bound_time) = if join_type == JoinType::RightOuter {
                ("right", "left", &rt, &lt, &left.event_time)
            } else {
                ("left", "right", &lt, &rt, &right.event_time)
            };
            let watermark = if bound_time.is_empty() {
                format!("add `.with_watermark(\"{bt}\", \"10 minutes\")` to the {bound} input and ")
            } else {
                "add ".to_string()
            };
            (
                format!(
                    "the stream-stream {desc} needs a watermark on the {bound} side and a time-range condition bounding the {state} side's event time by it, or an equality on a watermarked key; without them unmatched {state} rows are never emitted and its state grows forever"
                ),
                format!(
                    "{watermark}a condition such as `{bt} >= {st} AND {bt} <= {st} + INTERVAL 5 MINUTES`"
                ),
            )
        };
        self.problem(message, help);
        false
    }
}

/// Text of an expression as the user wrote it (SQL text) or as SQL.
fn show(e: &ColumnExpr) -> String {
    match e {
        ColumnExpr::Sql(s) => s.trim().to_string(),
        ColumnExpr::Expr(e) => show_expr(e),
    }
}

fn show_expr(e: &Expr) -> String {
    let window = |name: &str, args: &[Expr]| {
        let args: Vec<String> = args.iter().map(show_expr).collect();
        format!("{name}({})", args.join(", "))
    };
    match e {
        Expr::Alias(a) => match a.expr.as_ref() {
            inner @ Expr::ScalarFunction(_)
                if window_call(inner).is_some() || session_window_call(inner).is_some() =>
            {
                show_expr(inner)
            }
            _ => expr_text(e),
        },
        Expr::ScalarFunction(f) if window_call(e).is_some() || session_window_call(e).is_some() => {
            window(f.func.name(), &f.args)
        }
        _ => expr_text(e),
    }
}

fn strip_alias(e: &Expr) -> &Expr {
    match e {
        Expr::Alias(a) => strip_alias(&a.expr),
        other => other,
    }
}

/// The watermarked column behind `e`, when `e` is that column or a window
/// over it.
fn event_time_column(e: &Expr, event_time: &BTreeSet<String>) -> Option<String> {
    let e = strip_alias(e);
    let time = match (window_call(e), session_window_call(e)) {
        (Some(w), _) => w.time_column,
        (None, Some(s)) => s.time_column,
        (None, None) => e.clone(),
    };
    match strip_alias(&time) {
        Expr::Column(c) if event_time.contains(&c.name) => Some(c.name.clone()),
        _ => None,
    }
}

/// The time column of the first window key, if any.
fn keys_time(keys: &[Expr]) -> Option<String> {
    keys.iter().find_map(|k| {
        let k = strip_alias(k);
        let time = window_call(k)
            .map(|w| w.time_column)
            .or_else(|| session_window_call(k).map(|s| s.time_column))?;
        match strip_alias(&time) {
            Expr::Column(c) => Some(c.name.clone()),
            _ => None,
        }
    })
}

/// A column to name in a suggested fix: an event-time column, else the
/// given one, else the first timestamp column, else a placeholder.
fn time_column(
    schema: Option<&SchemaRef>,
    event_time: &BTreeSet<String>,
    preferred: Option<String>,
) -> String {
    if let Some(c) = event_time.iter().next() {
        return c.clone();
    }
    if let Some(c) = preferred {
        return c;
    }
    schema
        .and_then(|s| {
            s.fields()
                .iter()
                .find(|f| matches!(f.data_type(), DataType::Timestamp(_, _)))
                .map(|f| f.name().clone())
        })
        .unwrap_or_else(|| "<event-time column>".to_string())
}

/// For a distinct aggregate: `Some(Some(arg))` for `count(DISTINCT arg)`,
/// `Some(None)` for other distinct aggregates, `None` when not distinct.
fn distinct_aggregate(e: &Expr) -> Option<Option<String>> {
    let mut found = None;
    let _ = e.apply(|sub| {
        if let Expr::AggregateFunction(AggregateFunction { func, params }) = sub {
            if params.distinct {
                found = Some(
                    (func.name().eq_ignore_ascii_case("count") && params.args.len() == 1)
                        .then(|| expr_text(&params.args[0])),
                );
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    found
}

/// A side of a join.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Left,
    Right,
}

/// The two inputs of a join: their schemas and their event-time columns.
struct Sides<'a> {
    left: &'a SchemaRef,
    right: &'a SchemaRef,
    left_time: &'a BTreeSet<String>,
    right_time: &'a BTreeSet<String>,
}

impl Sides<'_> {
    /// The side a column of the join condition belongs to: by its
    /// qualifier (`left.x`, `right.x`), else by the input that has it.
    fn side_of(&self, c: &Column) -> Option<Side> {
        match c.relation.as_ref().map(|r| r.table()) {
            Some("left") => Some(Side::Left),
            Some("right") => Some(Side::Right),
            _ if self.left.field_with_name(&c.name).is_ok() => Some(Side::Left),
            _ if self.right.field_with_name(&c.name).is_ok() => Some(Side::Right),
            _ => None,
        }
    }

    fn event_time(&self, side: Side) -> &BTreeSet<String> {
        match side {
            Side::Left => self.left_time,
            Side::Right => self.right_time,
        }
    }

    /// The one side all columns of `e` come from (None if mixed or none).
    fn only_side(&self, e: &Expr) -> Option<Side> {
        let mut side = None;
        for c in e.column_refs() {
            let s = self.side_of(c)?;
            if side.is_some_and(|x| x != s) {
                return None;
            }
            side = Some(s);
        }
        side
    }
}

fn conjuncts(e: &Expr) -> Vec<&Expr> {
    match strip_alias(e) {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::And,
            right,
        }) => {
            let mut v = conjuncts(left);
            v.extend(conjuncts(right));
            v
        }
        other => vec![other],
    }
}

/// Spark's `isWatermarkInJoinKeys`: an equality between the two sides where
/// one side's key is event time (a watermarked column or a window over one).
fn watermark_in_join_keys(condition: &Expr, sides: &Sides<'_>) -> bool {
    conjuncts(condition).into_iter().any(|c| match c {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) => match (sides.only_side(left), sides.only_side(right)) {
            (Some(a), Some(b)) if a != b => {
                event_time_column(left, sides.event_time(a)).is_some()
                    || event_time_column(right, sides.event_time(b)).is_some()
            }
            _ => false,
        },
        _ => false,
    })
}

/// Spark's `getStateValueWatermark`: a conjunct `state_time > bound_time + c`
/// (in any arrangement of `<`, `<=`, `>`, `>=`, `+`, `-` and constants) where
/// `bound_time` is an event-time column of the `bound` side and `state_time`
/// a column of the `state` side, so that the bound side's watermark tells
/// when a state-side row can no longer match.
fn has_range_condition(condition: &Expr, sides: &Sides<'_>, state: Side, bound: Side) -> bool {
    conjuncts(condition).into_iter().any(|c| {
        let Expr::BinaryExpr(BinaryExpr { left, op, right }) = c else {
            return false;
        };
        let (small, big) = match op {
            Operator::Lt | Operator::LtEq => (left, right),
            Operator::Gt | Operator::GtEq => (right, left),
            _ => return false,
        };
        // The terms of `big - small`.
        let mut terms = Vec::new();
        if !linear_terms(big, 1, &mut terms) || !linear_terms(small, -1, &mut terms) {
            return false;
        }
        let [first, second] = terms.as_slice() else {
            return false;
        };
        let fits = |(s_col, s_sign): &(&Column, i8), (b_col, b_sign): &(&Column, i8)| {
            *s_sign == 1
                && *b_sign == -1
                && sides.side_of(s_col) == Some(state)
                && sides.side_of(b_col) == Some(bound)
                && sides.event_time(bound).contains(&b_col.name)
        };
        fits(first, second) || fits(second, first)
    })
}

/// Collects the column terms of a linear expression (columns, constants,
/// `+`, `-`, negation, casts) with their signs; false when it is not linear.
fn linear_terms<'a>(e: &'a Expr, sign: i8, out: &mut Vec<(&'a Column, i8)>) -> bool {
    match e {
        Expr::Column(c) => {
            out.push((c, sign));
            true
        }
        Expr::Alias(a) => linear_terms(&a.expr, sign, out),
        Expr::Cast(c) => linear_terms(&c.expr, sign, out),
        Expr::TryCast(c) => linear_terms(&c.expr, sign, out),
        Expr::Negative(inner) => linear_terms(inner, -sign, out),
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Plus,
            right,
        }) => linear_terms(left, sign, out) && linear_terms(right, sign, out),
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Minus,
            right,
        }) => linear_terms(left, sign, out) && linear_terms(right, -sign, out),
        other => other.column_refs().is_empty(),
    }
}
