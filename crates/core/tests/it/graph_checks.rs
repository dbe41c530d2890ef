//! The query-shape checks (Spark's UnsupportedOperationChecker rules) and
//! the output-mode setting, through `graph::build`: each rule with its exact
//! message and fix, the legal shapes that must pass, and several problems
//! reported at once.

use std::collections::BTreeMap;
use std::panic::Location;
use std::path::Path;

use pipelines_core::definition::{FlowDef, Query};
use pipelines_core::plan::functions::{session_window, tumbling_window, window};
use pipelines_core::prelude::*;
use pipelines_core::registry::FlowKind;
use pipelines_core::{
    graph, DatasetDef, DatasetType, Diagnostic, Origin, OutputMode, Pipeline, PipelineGraph,
};

const THIS_FILE: &str = "crates/core/tests/it/graph_checks.rs";

const SPEC: &str = "name: t\nstorage: ./s\n";

fn spec(yaml: &str) -> pipelines_core::spec::PipelineSpec {
    pipelines_core::spec::parse_str(yaml, Path::new("pipeline.yml")).expect("valid spec")
}

/// Validates `p` with the spec `yaml`, adding a console sink (which takes
/// every output mode) for each flow target named `<flow>_out`.
fn build(p: &Pipeline, yaml: &str) -> Result<PipelineGraph, Vec<Diagnostic>> {
    let mut decls = p.declarations(&spec(yaml));
    for f in &decls.flows {
        let exists = decls.datasets.iter().any(|d| d.name == f.target);
        if f.target.ends_with("_out") && !exists {
            decls.datasets.push(DatasetDef {
                name: f.target.clone(),
                kind: Some(DatasetType::Sink),
                format: Some("console".to_string()),
                ..DatasetDef::default()
            });
        }
    }
    graph::build(decls).map_err(|d| d.0)
}

fn errors(p: &Pipeline, yaml: &str) -> Vec<String> {
    match build(p, yaml) {
        Ok(_) => panic!("expected validation errors"),
        Err(d) => d.iter().map(|d| d.to_string()).collect(),
    }
}

fn passes(p: &Pipeline, yaml: &str) -> PipelineGraph {
    match build(p, yaml) {
        Ok(g) => g,
        Err(d) => panic!(
            "expected no problems, got:\n{}",
            d.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        ),
    }
}

/// The line of the builder call marked `// @name` in this file.
fn line(marker: &str) -> u32 {
    let tag = format!("// @{marker}");
    let lines: Vec<&str> = include_str!("graph_checks.rs").lines().collect();
    let mut index = lines
        .iter()
        .position(|l| l.trim_end().ends_with(&tag))
        .unwrap_or_else(|| panic!("no marker {tag}"));
    // rustfmt moves a marker after `{` onto a line of its own.
    if lines[index].trim_start().starts_with("//") {
        index -= 1;
    }
    index as u32 + 1
}

/// `error: flow `name` (this file:line of marker `name`): message\n  help: help`.
fn diag(flow: &str, message: &str, help: &str) -> String {
    format!(
        "error: flow `{flow}` ({THIS_FILE}:{}): {message}\n  help: {help}",
        line(flow)
    )
}

/// A flow declared with `conf(...)` settings, like
/// `#[append_flow(target = "...", conf("pipelines.outputMode" = "complete"))]`.
#[track_caller]
fn flow_with_conf(
    kind: FlowKind,
    name: &str,
    target: &str,
    conf: &[(&str, &str)],
    query: impl Fn(&Session) -> Result<DataFrame> + Send + Sync + 'static,
) -> FlowDef {
    let mut f = FlowDef::append(name, target, Query::new(query));
    f.kind = kind;
    f.conf = conf
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect::<BTreeMap<_, _>>();
    let loc = Location::caller();
    f.origin = Some(Origin::Code {
        file: loc.file().to_string(),
        line: loc.line(),
    });
    f
}

fn complete(name: &str) -> String {
    format!("{SPEC}flows:\n  {name}:\n    options: {{ pipelines.outputMode: complete }}\n")
}

/// Events: `ts TIMESTAMP, user_id STRING, service STRING, n BIGINT`.
fn events(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("ts TIMESTAMP, user_id STRING, service STRING, n BIGINT")
        .load("data/events")
}

fn events_wm(s: &Session) -> Result<DataFrame> {
    events(s)?.with_watermark("ts", "10 minutes")
}

/// Impressions: `imp_time TIMESTAMP, imp_ad STRING`.
fn impressions(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("imp_time TIMESTAMP, imp_ad STRING")
        .load("data/impressions")
}

/// Clicks: `click_time TIMESTAMP, click_ad STRING`.
fn clicks(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("click_time TIMESTAMP, click_ad STRING")
        .load("data/clicks")
}

/// A batch (static) table of users: `id STRING, name STRING`.
fn users(s: &Session) -> Result<DataFrame> {
    s.read()
        .format("json")
        .schema("id STRING, name STRING")
        .load("data/users")
}

const RANGE: &str = "click_ad = imp_ad AND click_time >= imp_time AND click_time <= imp_time + INTERVAL '5 minutes'";

// ---------------------------------------------------------------------------
// Legal shapes
// ---------------------------------------------------------------------------

#[test]
fn legal_shapes_pass() {
    let p = Pipeline::new()
        .append_flow("windowed", "windowed_out", |s| {
            events_wm(s)?
                .group_by([window(col("ts"), "5 minutes", "1 minute"), col("service")])
                .count()
        })
        .append_flow("by_event_time", "by_event_time_out", |s| {
            events_wm(s)?.group_by([col("ts")]).count()
        })
        .update_flow("running", "running_out", |s| {
            events(s)?.group_by([col("service")]).count()
        })
        .update_flow(
            "update_without_aggregation",
            "update_without_aggregation_out",
            |s| events(s)?.filter("n > 1"),
        )
        .update_flow("sorted", "sorted_out", |s| {
            events(s)?
                .group_by([col("service")])
                .count()?
                .order_by(["count DESC"])?
                .limit(3)
        })
        .append_flow("inner_join", "inner_join_out", |s| {
            let imp = impressions(s)?.with_watermark("imp_time", "1 hour")?;
            let clk = clicks(s)?.with_watermark("click_time", "2 hours")?;
            imp.join(&clk, RANGE, JoinType::Inner)
        })
        .update_flow(
            "inner_join_in_update_mode",
            "inner_join_in_update_mode_out",
            |s| {
                let imp = impressions(s)?.with_watermark("imp_time", "1 hour")?;
                let clk = clicks(s)?.with_watermark("click_time", "2 hours")?;
                imp.join(&clk, RANGE, JoinType::Inner)
            },
        )
        .update_flow(
            "left_semi_in_update_mode",
            "left_semi_in_update_mode_out",
            |s| {
                let clk = clicks(s)?.with_watermark("click_time", "2 hours")?;
                impressions(s)?.join(&clk, RANGE, JoinType::LeftSemi)
            },
        )
        .append_flow(
            "inner_join_without_watermark",
            "inner_join_without_watermark_out",
            |s| impressions(s)?.join(&clicks(s)?, "imp_ad = click_ad", JoinType::Inner),
        )
        .append_flow("left_outer_range", "left_outer_range_out", |s| {
            let imp = impressions(s)?.with_watermark("imp_time", "1 hour")?;
            let clk = clicks(s)?.with_watermark("click_time", "2 hours")?;
            imp.join(&clk, RANGE, JoinType::LeftOuter)
        })
        .append_flow(
            "left_outer_right_watermark_only",
            "left_outer_right_watermark_only_out",
            |s| {
                let clk = clicks(s)?.with_watermark("click_time", "2 hours")?;
                impressions(s)?.join(&clk, RANGE, JoinType::LeftOuter)
            },
        )
        .append_flow("right_outer_range", "right_outer_range_out", |s| {
            // The left (nullable) side's watermark bounds the right side's state.
            let clk = clicks(s)?.with_watermark("click_time", "2 hours")?;
            clk.join(
                &impressions(s)?,
                "click_ad = imp_ad AND imp_time + INTERVAL '5 minutes' >= click_time",
                JoinType::RightOuter,
            )
        })
        .append_flow("full_outer_on_window", "full_outer_on_window_out", |s| {
            let imp = impressions(s)?
                .with_watermark("imp_time", "1 hour")?
                .with_column("imp_window", tumbling_window(col("imp_time"), "5 minutes"))?;
            let clk = clicks(s)?
                .with_watermark("click_time", "2 hours")?
                .with_column(
                    "click_window",
                    tumbling_window(col("click_time"), "5 minutes"),
                )?;
            imp.join(
                &clk,
                "imp_ad = click_ad AND imp_window = click_window",
                JoinType::FullOuter,
            )
        })
        .append_flow("left_semi_range", "left_semi_range_out", |s| {
            let clk = clicks(s)?.with_watermark("click_time", "2 hours")?;
            impressions(s)?.join(&clk, RANGE, JoinType::LeftSemi)
        })
        .append_flow("stream_static", "stream_static_out", |s| {
            events(s)?.join(&users(s)?, "user_id = id", JoinType::LeftOuter)
        })
        .append_flow("static_stream", "static_stream_out", |s| {
            users(s)?.join(&events(s)?, "user_id = id", JoinType::RightOuter)
        })
        .append_flow("anti_static", "anti_static_out", |s| {
            events(s)?.join(&users(s)?, "user_id = id", JoinType::LeftAnti)
        })
        .append_flow("dedup", "dedup_out", |s| {
            events_wm(s)?.drop_duplicates_within_watermark(["user_id"])
        })
        .append_flow("dedup_on_static_side", "dedup_on_static_side_out", |s| {
            // Spark checks batch-only rules on whole batch queries only.
            let firsts = users(s)?.drop_duplicates_within_watermark(["id"])?;
            events(s)?.join(&firsts, "user_id = id", JoinType::Inner)
        })
        .append_flow("dedup_plain", "dedup_plain_out", |s| {
            events(s)?.drop_duplicates(Some(&["user_id"]))
        })
        .append_flow("limited", "limited_out", |s| events(s)?.limit(10))
        .append_flow("chained_in_append", "chained_in_append_out", |s| {
            events_wm(s)?
                .group_by([tumbling_window(col("ts"), "5 minutes"), col("service")])
                .count()?
                .group_by([col("window")])
                .agg([sum(col("count")).alias("total")])
        })
        .append_flow("renamed_watermark", "renamed_watermark_out", |s| {
            events_wm(s)?
                .with_column_renamed("ts", "event_time")?
                .select_expr(["event_time", "service"])?
                .group_by(["window(event_time, '10 minutes')", "service"])
                .count()
        })
        .append_flow("union_of_streams", "union_of_streams_out", |s| {
            events(s)?.union(&events(s)?)
        })
        .flow({
            // A batch query run once may sort and limit as it likes.
            let mut f = FlowDef::append(
                "batch_backfill",
                "batch_backfill_out",
                Query::new(|s| {
                    s.read()
                        .format("json")
                        .schema("ts TIMESTAMP, service STRING")
                        .load("data/old")?
                        .group_by([col("service")])
                        .count()?
                        .order_by(["count DESC"])
                }),
            );
            f.once = true;
            f
        })
        .flow(flow_with_conf(
            FlowKind::Append,
            "all_time",
            "all_time_out",
            &[("pipelines.outputMode", "complete")],
            |s| {
                events(s)?
                    .group_by([col("service")])
                    .agg([count(col("user_id")).alias("users")])?
                    .order_by(["users DESC"])
            },
        ));
    let mut yaml = SPEC.to_string();
    yaml.push_str("flows:\n  sorted:\n    options: { pipelines.outputMode: COMPLETE }\n");
    let g = passes(&p, &yaml);
    let mode = |f: &str| g.flows[f].output_mode;
    assert_eq!(mode("windowed"), OutputMode::Append);
    assert_eq!(mode("running"), OutputMode::Update);
    assert_eq!(mode("sorted"), OutputMode::Complete);
    assert_eq!(mode("all_time"), OutputMode::Complete);
}

// ---------------------------------------------------------------------------
// One test per rule
// ---------------------------------------------------------------------------

#[test]
fn append_aggregation_needs_a_watermarked_key() {
    let p = Pipeline::new()
        .append_flow("counts", "counts_out", |s| {
            // @counts
            events(s)?.group_by([col("service")]).count()
        })
        .append_flow("not_on_event_time", "not_on_event_time_out", |s| {
            // @not_on_event_time
            events_wm(s)?.group_by([col("service")]).count()
        })
        .append_flow("window_no_wm", "window_no_wm_out", |s| {
            // @window_no_wm
            events(s)?
                .group_by([tumbling_window(col("ts"), "10 minutes")])
                .count()
        })
        .append_flow("computed_key", "computed_key_out", |s| {
            // @computed_key
            events_wm(s)?
                .with_column("day", "date_trunc('day', ts)")?
                .group_by([col("day")])
                .count()
        });
    assert_eq!(
        errors(&p, SPEC),
        vec![
            diag(
                "computed_key",
                "append output mode needs the aggregation `group_by(day)` to group by its watermarked column `ts` or a window over it",
                "also group by `window(ts, …)` (or `ts`), or use update mode (declare the flow with #[update_flow] into a sink) or complete mode (set `pipelines.outputMode` to `complete`)",
            ),
            diag(
                "counts",
                "append output mode needs a watermark on the aggregation's event-time key, and `group_by(service)` has none",
                "add `.with_watermark(\"ts\", \"10 minutes\")` before group_by and group by `window(ts, …)`, or use update mode (declare the flow with #[update_flow] into a sink) or complete mode (set `pipelines.outputMode` to `complete`)",
            ),
            diag(
                "not_on_event_time",
                "append output mode needs the aggregation `group_by(service)` to group by its watermarked column `ts` or a window over it",
                "also group by `window(ts, …)` (or `ts`), or use update mode (declare the flow with #[update_flow] into a sink) or complete mode (set `pipelines.outputMode` to `complete`)",
            ),
            diag(
                "window_no_wm",
                "append output mode needs a watermark on the aggregation's event-time key, and `group_by(window(ts, '10 minutes'))` has none",
                "add `.with_watermark(\"ts\", \"10 minutes\")` before group_by and group by `window(ts, …)`, or use update mode (declare the flow with #[update_flow] into a sink) or complete mode (set `pipelines.outputMode` to `complete`)",
            ),
        ]
    );
}

#[test]
fn complete_mode_needs_an_aggregation() {
    let p = Pipeline::new().append_flow("copy", "copy_out", events); // @copy
    assert_eq!(
        errors(&p, &complete("copy")),
        vec![diag(
            "copy",
            "complete output mode needs a streaming aggregation: it rewrites the whole result every batch, and this query has none",
            "aggregate with group_by(...).agg(...), or use append mode (remove `pipelines.outputMode`)",
        )]
    );
}

#[test]
fn sorting_a_stream_needs_an_aggregation_in_complete_mode() {
    let p = Pipeline::new()
        .append_flow("sorted_rows", "sorted_rows_out", |s| {
            // @sorted_rows
            events(s)?.order_by(["n DESC"])
        })
        .update_flow("sorted_counts", "sorted_counts_out", |s| {
            // @sorted_counts
            events(s)?
                .group_by([col("service")])
                .count()?
                .order_by([col("count").sort(false, false)])
        });
    assert_eq!(
        errors(&p, SPEC),
        vec![
            diag(
                "sorted_counts",
                "`order_by(count DESC)` sorts a stream, which is only supported after an aggregation in complete output mode",
                "use complete mode (set `pipelines.outputMode` to `complete`), or sort when reading the results",
            ),
            diag(
                "sorted_rows",
                "`order_by(n DESC)` sorts a stream, which is only supported after an aggregation in complete output mode",
                "sort when reading the results (e.g. in a materialized view), or sort after group_by(...).agg(...) in complete mode",
            ),
        ]
    );
}

#[test]
fn distinct_aggregates_are_refused_on_streams() {
    let p = Pipeline::new()
        .update_flow("unique_users", "unique_users_out", |s| {
            // @unique_users
            events(s)?
                .group_by([col("service")])
                .agg([count_distinct(col("user_id")).alias("users")])
        })
        .update_flow("unique_sql", "unique_sql_out", |s| {
            // @unique_sql
            events(s)?
                .group_by(["service"])
                .agg(["sum(DISTINCT n) AS total"])
        });
    assert_eq!(
        errors(&p, SPEC),
        vec![
            diag(
                "unique_sql",
                "distinct aggregate `sum(DISTINCT n) AS total` in `group_by(service)` is not supported on a stream",
                "remove DISTINCT, or de-duplicate the rows first with drop_duplicates(...)",
            ),
            diag(
                "unique_users",
                "distinct aggregate `count(DISTINCT user_id) AS users` in `group_by(service)` is not supported on a stream",
                "count approximately with `approx_count_distinct(user_id)` instead, or remove DISTINCT",
            ),
        ]
    );
}

#[test]
fn limit_is_refused_in_update_mode() {
    let p = Pipeline::new().update_flow("top", "top_out", |s| {
        // @top
        events(s)?.group_by([col("service")]).count()?.limit(5)
    });
    assert_eq!(
        errors(&p, SPEC),
        vec![diag(
            "top",
            "`limit(5)` on a stream is not supported in update output mode",
            "use append mode (declare the flow with #[append_flow]) or complete mode (set `pipelines.outputMode` to `complete`), or apply the limit when reading the results",
        )]
    );
}

#[test]
fn stream_stream_joins_and_output_modes() {
    // Spark 4.3: outer joins only in append mode; inner and left semi joins
    // also in update mode, never in complete mode.
    let p = Pipeline::new()
        .update_flow("matched_or_not", "matched_or_not_out", |s| {
            // @matched_or_not
            let imp = impressions(s)?.with_watermark("imp_time", "1 hour")?;
            let clk = clicks(s)?.with_watermark("click_time", "2 hours")?;
            imp.join(&clk, RANGE, JoinType::LeftOuter)
        })
        .flow(flow_with_conf(
            // @matched_totals
            FlowKind::Append,
            "matched_totals",
            "matched_totals_out",
            &[("pipelines.outputMode", "complete")],
            |s| {
                impressions(s)?
                    .join(&clicks(s)?, RANGE, JoinType::Inner)?
                    .group_by([col("imp_ad")])
                    .count()
            },
        ));
    assert_eq!(
        errors(&p, SPEC),
        vec![
            diag(
                "matched_or_not",
                &format!("the stream-stream left_outer join on `{RANGE}` runs only in append output mode, not in update mode"),
                "use append mode (declare the flow with #[append_flow])",
            ),
            diag(
                "matched_totals",
                &format!("the stream-stream inner join on `{RANGE}` runs only in append or update output mode, not in complete mode"),
                "use append mode (remove `pipelines.outputMode`) or update mode (declare the flow with #[update_flow] into a sink without `pipelines.outputMode`)",
            ),
        ]
    );
}

#[test]
fn stream_stream_outer_joins_need_watermarks_and_a_time_range() {
    let p = Pipeline::new()
        .append_flow("no_watermark", "no_watermark_out", |s| {
            // @no_watermark
            impressions(s)?.join(&clicks(s)?, RANGE, JoinType::LeftOuter)
        })
        .append_flow("no_range", "no_range_out", |s| {
            // @no_range
            let imp = impressions(s)?.with_watermark("imp_time", "1 hour")?;
            let clk = clicks(s)?.with_watermark("click_time", "2 hours")?;
            imp.join(&clk, "imp_ad = click_ad", JoinType::LeftOuter)
        })
        .append_flow("wrong_side", "wrong_side_out", |s| {
            // @wrong_side
            // The watermark must be on the nullable (right) side.
            let imp = impressions(s)?.with_watermark("imp_time", "1 hour")?;
            imp.join(&clicks(s)?, RANGE, JoinType::LeftOuter)
        })
        .append_flow("lower_bound_only", "lower_bound_only_out", |s| {
            // @lower_bound_only
            let imp = impressions(s)?.with_watermark("imp_time", "1 hour")?;
            let clk = clicks(s)?.with_watermark("click_time", "2 hours")?;
            imp.join(
                &clk,
                "imp_ad = click_ad AND click_time >= imp_time",
                JoinType::LeftSemi,
            )
        })
        .append_flow("full", "full_out", |s| {
            // @full
            impressions(s)?.join_using(
                &clicks(s)?.with_column_renamed("click_ad", "imp_ad")?,
                ["imp_ad"],
                JoinType::FullOuter,
            )
        })
        .append_flow("right", "right_out", |s| {
            // @right
            let imp = impressions(s)?.with_watermark("imp_time", "1 hour")?;
            clicks(s)?.join(&imp, RANGE, JoinType::RightOuter)
        });
    let no_range = "imp_ad = click_ad";
    let lower = "imp_ad = click_ad AND click_time >= imp_time";
    assert_eq!(
        errors(&p, SPEC),
        vec![
            diag(
                "full",
                "the stream-stream full_outer join using (imp_ad) needs an equality on a watermarked key, or a watermark on one side and a time-range condition bounding the other side's event time by it; without them unmatched rows are never emitted and its state grows forever",
                "add watermarks to both inputs (e.g. `.with_watermark(\"imp_time\", \"10 minutes\")` and `.with_watermark(\"click_time\", \"10 minutes\")`) and a condition such as `click_time >= imp_time AND click_time <= imp_time + INTERVAL 5 MINUTES`",
            ),
            diag(
                "lower_bound_only",
                &format!("the stream-stream left_semi join on `{lower}` needs a watermark on the right side and a time-range condition bounding the left side's event time by it, or an equality on a watermarked key; without them unmatched left rows are never emitted and its state grows forever"),
                "add a condition such as `click_time >= imp_time AND click_time <= imp_time + INTERVAL 5 MINUTES`",
            ),
            diag(
                "no_range",
                &format!("the stream-stream left_outer join on `{no_range}` needs a watermark on the right side and a time-range condition bounding the left side's event time by it, or an equality on a watermarked key; without them unmatched left rows are never emitted and its state grows forever"),
                "add a condition such as `click_time >= imp_time AND click_time <= imp_time + INTERVAL 5 MINUTES`",
            ),
            diag(
                "no_watermark",
                &format!("the stream-stream left_outer join on `{RANGE}` needs a watermark on the right side and a time-range condition bounding the left side's event time by it, or an equality on a watermarked key; without them unmatched left rows are never emitted and its state grows forever"),
                "add `.with_watermark(\"click_time\", \"10 minutes\")` to the right input and a condition such as `click_time >= imp_time AND click_time <= imp_time + INTERVAL 5 MINUTES`",
            ),
            diag(
                "right",
                &format!("the stream-stream right_outer join on `{RANGE}` needs a watermark on the left side and a time-range condition bounding the right side's event time by it, or an equality on a watermarked key; without them unmatched right rows are never emitted and its state grows forever"),
                "add `.with_watermark(\"click_time\", \"10 minutes\")` to the left input and a condition such as `click_time >= imp_time AND click_time <= imp_time + INTERVAL 5 MINUTES`",
            ),
            diag(
                "wrong_side",
                &format!("the stream-stream left_outer join on `{RANGE}` needs a watermark on the right side and a time-range condition bounding the left side's event time by it, or an equality on a watermarked key; without them unmatched left rows are never emitted and its state grows forever"),
                "add `.with_watermark(\"click_time\", \"10 minutes\")` to the right input and a condition such as `click_time >= imp_time AND click_time <= imp_time + INTERVAL 5 MINUTES`",
            ),
        ]
    );
}

#[test]
fn union_of_stream_and_batch_is_refused() {
    let p = Pipeline::new().append_flow("mixed", "mixed_out", |s| {
        // @mixed
        let live = events(s)?.select_expr(["user_id"])?;
        live.union(&users(s)?.select_expr(["id"])?)
    });
    assert_eq!(
        errors(&p, SPEC),
        vec![diag(
            "mixed",
            "union of streaming and batch inputs is not supported",
            "read every input of the union as a stream (read_stream, read_stream_table) or every one as a batch (read, read_table)",
        )]
    );
}

#[test]
fn drop_duplicates_within_watermark_needs_a_watermark() {
    let p = Pipeline::new()
        .append_flow("dedup", "dedup_out", |s| {
            // @dedup
            events(s)?.drop_duplicates_within_watermark(["user_id"])
        })
        .flow({
            let mut f = FlowDef::append(
                "dedup_batch",
                "dedup_batch_out",
                Query::new(|s| users(s)?.drop_duplicates_within_watermark(["id"])),
            );
            f.once = true;
            f.origin = Some(Origin::Code {
                file: THIS_FILE.to_string(),
                line: line("dedup_batch"),
            });
            f // @dedup_batch
        });
    assert_eq!(
        errors(&p, SPEC),
        vec![
            diag(
                "dedup",
                "`drop_duplicates_within_watermark(user_id)` needs a watermark on its input, and there is none",
                "add `.with_watermark(\"ts\", \"10 minutes\")` before it, or use drop_duplicates(...)",
            ),
            diag(
                "dedup_batch",
                "`drop_duplicates_within_watermark(id)` needs a streaming input; its input is a batch query",
                "use drop_duplicates(...) on batch inputs",
            ),
        ]
    );
}

#[test]
fn stateful_operators_after_a_non_append_aggregation_are_refused() {
    let p = Pipeline::new()
        .update_flow("twice", "twice_out", |s| {
            // @twice
            events(s)?
                .group_by([col("service"), col("user_id")])
                .count()?
                .group_by([col("service")])
                .agg([sum(col("count")).alias("total")])
        })
        .flow(flow_with_conf(
            // @dedup_after
            FlowKind::Update,
            "dedup_after",
            "dedup_after_out",
            &[("pipelines.outputMode", "complete")],
            |s| {
                events_wm(s)?
                    .group_by([tumbling_window(col("ts"), "5 minutes"), col("service")])
                    .count()?
                    .drop_duplicates_within_watermark(["service"])
            },
        ));
    let agg = "group_by(service, user_id)";
    assert_eq!(
        errors(&p, SPEC),
        vec![
            diag(
                "dedup_after",
                "`drop_duplicates_within_watermark(service)` after the aggregation `group_by(window(ts, '5 minutes'), service)` in complete output mode is a possible correctness issue due to the global watermark: the aggregation emits rows older than the watermark, which the later operator drops as late",
                "use append mode (declare the flow with #[append_flow] without `pipelines.outputMode`) and group `group_by(window(ts, '5 minutes'), service)` by a window over a watermarked column, so each group is emitted once, when final",
            ),
            diag(
                "twice",
                &format!("the aggregation `group_by(service)` after the aggregation `{agg}` in update output mode is a possible correctness issue due to the global watermark: the aggregation emits rows older than the watermark, which the later operator drops as late"),
                &format!("use append mode (declare the flow with #[append_flow]) and group `{agg}` by a window over a watermarked column, so each group is emitted once, when final"),
            ),
        ]
    );
}

#[test]
fn session_windows_are_refused_in_update_mode() {
    let p = Pipeline::new().update_flow("sessions", "sessions_out", |s| {
        // @sessions
        events_wm(s)?
            .group_by([session_window(col("ts"), "5 minutes"), col("user_id")])
            .count()
    });
    assert_eq!(
        errors(&p, SPEC),
        vec![diag(
            "sessions",
            "update output mode does not support session windows: `group_by(session_window(ts, '5 minutes'), user_id)`",
            "use append mode (declare the flow with #[append_flow]) (each session is emitted once, when the watermark closes it) or complete mode (set `pipelines.outputMode` to `complete`)",
        )]
    );
}

#[test]
fn output_modes_the_target_cannot_take() {
    let p = Pipeline::new()
        .append_flow("to_files", "archive", |s| {
            // @to_files
            events(s)?.group_by([col("service")]).count()
        })
        .append_flow("to_table", "totals", |s| {
            // @to_table
            events(s)?.group_by([col("service")]).count()
        })
        .append_flow("to_delta", "delta_totals", |s| {
            events(s)?.group_by([col("service")]).count()
        });
    let yaml = "name: t\nstorage: ./s\nsinks:\n  archive: { format: parquet, options: { path: ./a } }\ntables:\n  totals: { format: parquet }\n  delta_totals: { format: delta }\nflows:\n  to_files: { options: { pipelines.outputMode: complete } }\n  to_table: { options: { pipelines.outputMode: complete } }\n  to_delta: { options: { pipelines.outputMode: complete } }\n";
    assert_eq!(
        errors(&p, yaml),
        vec![
            diag(
                "to_files",
                "sink `archive` (parquet) does not accept complete output mode; it accepts append",
                "parquet sinks take append only: use append mode, or write complete results to a sink that takes them (kafka, console, memory, foreach_batch, delta)",
            ),
            diag(
                "to_table",
                "streaming table `totals` (parquet) does not accept complete output mode; it accepts append",
                "parquet tables take append only: use append mode, or write complete results to a sink that takes them (kafka, console, memory, foreach_batch, delta)",
            ),
        ]
    );
}

#[test]
fn stream_static_joins_that_cannot_work() {
    let p = Pipeline::new()
        .append_flow("full_static", "full_static_out", |s| {
            // @full_static
            events(s)?.join(&users(s)?, "user_id = id", JoinType::FullOuter)
        })
        .append_flow("right_outer_static", "right_outer_static_out", |s| {
            // @right_outer_static
            events(s)?.join(&users(s)?, "user_id = id", JoinType::RightOuter)
        })
        .append_flow("left_outer_static", "left_outer_static_out", |s| {
            // @left_outer_static
            users(s)?.join(&events(s)?, "user_id = id", JoinType::LeftOuter)
        })
        .append_flow("semi_static", "semi_static_out", |s| {
            // @semi_static
            users(s)?.join(&events(s)?, "user_id = id", JoinType::LeftSemi)
        })
        .append_flow("anti_static_left", "anti_static_left_out", |s| {
            // @anti_static_left
            users(s)?.join(&events(s)?, "user_id = id", JoinType::LeftAnti)
        })
        .append_flow("anti_streams", "anti_streams_out", |s| {
            // @anti_streams
            impressions(s)?.join(&clicks(s)?, RANGE, JoinType::LeftAnti)
        });
    let on = "user_id = id";
    assert_eq!(
        errors(&p, SPEC),
        vec![
            diag(
                "anti_static_left",
                &format!("the left_anti join on `{on}` between a stream (right) and a batch query (left) is not supported: it would have to emit the unmatched rows of the batch side, which is never finished"),
                "put the stream on the left of the left_anti join, or read both sides as batches",
            ),
            diag(
                "anti_streams",
                &format!("the left_anti join on `{RANGE}` has a streaming right side, which left_anti joins do not support"),
                "read the right side as a batch (read(), read_table(...)), or use a left_outer join with a time range and keep the rows whose right columns are null",
            ),
            diag(
                "full_static",
                &format!("the full_outer join on `{on}` between a stream (left) and a batch query (right) is not supported: it would have to emit the unmatched rows of the batch side, which is never finished"),
                "keep the stream's rows with a left_outer join, or read both sides as streams with watermarks",
            ),
            diag(
                "left_outer_static",
                &format!("the left_outer join on `{on}` between a stream (right) and a batch query (left) is not supported: it would have to emit the unmatched rows of the batch side, which is never finished"),
                "swap the sides and use a left_outer join (stream on the left), or use an inner join",
            ),
            diag(
                "right_outer_static",
                &format!("the right_outer join on `{on}` between a stream (left) and a batch query (right) is not supported: it would have to emit the unmatched rows of the batch side, which is never finished"),
                "swap the sides and use a left_outer join (stream on the left), or use an inner join",
            ),
            diag(
                "semi_static",
                &format!("the left_semi join on `{on}` between a stream (right) and a batch query (left) is not supported: it would have to emit the unmatched rows of the batch side, which is never finished"),
                "swap the sides and use a left_semi join (stream on the left), or use an inner join",
            ),
        ]
    );
}

// ---------------------------------------------------------------------------
// The output-mode setting
// ---------------------------------------------------------------------------

#[test]
fn output_mode_setting_mistakes() {
    let p = Pipeline::new()
        .flow(flow_with_conf(
            // @upsert
            FlowKind::Append,
            "upsert",
            "upsert_out",
            &[("pipelines.outputMode", "upsert")],
            events,
        ))
        .flow(flow_with_conf(
            // @appender
            FlowKind::Append,
            "appender",
            "appender_out",
            &[("pipelines.outputMode", "update")],
            events,
        ))
        .update_flow("updater", "updater_out", |s| {
            // @updater
            events(s)?.group_by([col("service")]).count()
        })
        .append_flow("from_spec", "from_spec_out", events)
        .materialized_view("snapshot", users); // @snapshot
    let yaml = format!(
        "{SPEC}flows:\n  updater:\n    options: {{ pipelines.outputMode: append }}\n  from_spec:\n    options:\n      pipelines.outputMode: sometimes\n  snapshot: {{ options: {{ pipelines.outputMode: complete }} }}\n"
    );
    assert_eq!(
        errors(&p, &yaml),
        vec![
            diag(
                "appender",
                "`pipelines.outputMode` is `update`, but this is an append flow",
                "declare it with #[update_flow(target = \"...\")] to write updates to a sink, or set `pipelines.outputMode` to `append` or `complete`",
            ),
            "error: flow `from_spec` (pipeline.yml:8): invalid `pipelines.outputMode` value `sometimes`\n  help: use one of: append, update, complete".to_string(),
            "error: flow `updater` (pipeline.yml:5): `pipelines.outputMode` is `append`, but this is an update flow\n  help: declare it with #[append_flow(target = \"updater_out\")], or set `pipelines.outputMode` to `update` or `complete`".to_string(),
            diag(
                "upsert",
                "invalid `pipelines.outputMode` value `upsert`",
                "use one of: append, update, complete",
            ),
            diag(
                "snapshot",
                "complete output mode applies to streaming queries, and this flow's query is a batch query (its whole result is written every time it runs)",
                "remove `pipelines.outputMode`",
            ),
        ]
    );
}

// ---------------------------------------------------------------------------
// Every problem at once
// ---------------------------------------------------------------------------

#[test]
fn several_problems_are_reported_at_once() {
    let p = Pipeline::new()
        .append_flow("everything_wrong", "everything_wrong_out", |s| {
            // @everything_wrong
            events(s)?
                .group_by([col("service")])
                .agg([count_distinct(col("user_id")).alias("users")])?
                .order_by(["users DESC"])
        })
        .update_flow("top_n", "top_n_out", |s| {
            // @top_n
            events(s)?.group_by([col("service")]).count()?.limit(3)
        })
        .append_flow("mixed_union", "mixed_union_out", |s| {
            // @mixed_union
            events(s)?
                .select_expr(["user_id"])?
                .union(&users(s)?.select_expr(["id"])?)
        });
    let d = errors(&p, SPEC);
    assert_eq!(
        d,
        vec![
            diag(
                "everything_wrong",
                "distinct aggregate `count(DISTINCT user_id) AS users` in `group_by(service)` is not supported on a stream",
                "count approximately with `approx_count_distinct(user_id)` instead, or remove DISTINCT",
            ),
            diag(
                "everything_wrong",
                "append output mode needs a watermark on the aggregation's event-time key, and `group_by(service)` has none",
                "add `.with_watermark(\"ts\", \"10 minutes\")` before group_by and group by `window(ts, …)`, or use update mode (declare the flow with #[update_flow] into a sink) or complete mode (set `pipelines.outputMode` to `complete`)",
            ),
            diag(
                "everything_wrong",
                "`order_by(users DESC)` sorts a stream, which is only supported after an aggregation in complete output mode",
                "use complete mode (set `pipelines.outputMode` to `complete`), or sort when reading the results",
            ),
            diag(
                "mixed_union",
                "union of streaming and batch inputs is not supported",
                "read every input of the union as a stream (read_stream, read_stream_table) or every one as a batch (read, read_table)",
            ),
            diag(
                "top_n",
                "`limit(3)` on a stream is not supported in update output mode",
                "use append mode (declare the flow with #[append_flow]) or complete mode (set `pipelines.outputMode` to `complete`), or apply the limit when reading the results",
            ),
        ]
    );
    let text = pipelines_core::Diagnostics(build(&p, SPEC).unwrap_err()).to_string();
    assert!(
        text.ends_with("5 errors; nothing was read or written."),
        "{text}"
    );
}
