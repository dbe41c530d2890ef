//! Every graph validation rule, with its exact message, subject, origin and fix.

use std::path::Path;

use pipelines_core::plan::functions::window;
use pipelines_core::prelude::*;
use pipelines_core::{Diagnostic, Origin, Pipeline, TableOptions};

const THIS_FILE: &str = "crates/core/tests/it/graph_validation.rs";

fn spec(yaml: &str) -> pipelines_core::spec::PipelineSpec {
    pipelines_core::spec::parse_str(yaml, Path::new("pipeline.yml")).expect("valid spec")
}

const BASIC_SPEC: &str = "name: test\nstorage: ./storage\n";

fn errors(p: &Pipeline, yaml: &str) -> Vec<Diagnostic> {
    match p.build(&spec(yaml)) {
        Ok(_) => panic!("expected validation errors"),
        Err(d) => d.0,
    }
}

/// The origin of the builder call marked `// @name` in this file.
fn at(marker: &str) -> Option<Origin> {
    let tag = format!("// @{marker}");
    let lines: Vec<&str> = include_str!("graph_validation.rs").lines().collect();
    let mut index = lines
        .iter()
        .position(|l| l.trim_end().ends_with(&tag))
        .unwrap_or_else(|| panic!("no marker {tag}"));
    // rustfmt moves a marker after `{` onto a line of its own.
    if lines[index].trim_start().starts_with("//") {
        index -= 1;
    }
    code(index as u32 + 1)
}

fn line_at(marker: &str) -> u32 {
    match at(marker) {
        Some(Origin::Code { line, .. }) => line,
        _ => unreachable!(),
    }
}

fn code(line: u32) -> Option<Origin> {
    Some(Origin::Code {
        file: THIS_FILE.to_string(),
        line,
    })
}

fn spec_line(line: usize) -> Option<Origin> {
    Some(Origin::Spec {
        file: "pipeline.yml".to_string(),
        line: Some(line),
    })
}

fn logs(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("ts TIMESTAMP, service_name STRING, level STRING, msg STRING")
        .load("data/logs")
}

fn logs_batch(s: &Session) -> Result<DataFrame> {
    s.read()
        .format("json")
        .schema("ts TIMESTAMP, service_name STRING, level STRING, msg STRING")
        .load("data/logs")
}

fn read_logs(s: &Session) -> Result<DataFrame> {
    s.read_stream_table("logs")
}

fn assert_one(
    diags: &[Diagnostic],
    subject: &str,
    origin: Option<Origin>,
    message: &str,
    help: Option<&str>,
) {
    let found = diags
        .iter()
        .find(|d| d.message == message && d.subject.as_deref() == Some(subject));
    let Some(d) = found else {
        panic!("no diagnostic `{message}` in:\n{}", render(diags));
    };
    assert_eq!(
        d.subject.as_deref(),
        Some(subject),
        "subject of `{message}`"
    );
    assert_eq!(d.origin, origin, "origin of `{message}`");
    assert_eq!(d.help.as_deref(), help, "help of `{message}`");
}

fn render(diags: &[Diagnostic]) -> String {
    diags
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn valid_pipeline_builds_in_topological_order() {
    let p = Pipeline::new()
        .table("logs", logs)
        .table("errors", |s| {
            s.read_stream_table("logs")?.filter("level = 'ERROR'")
        })
        .append_flow("error_monitor", "error_counts", |s| {
            s.read_stream_table("errors")?
                .with_watermark("ts", "10 minutes")?
                .group_by([
                    window(col("ts"), "5 minutes", "1 minute"),
                    col("service_name"),
                ])
                .count()
        });
    let g = p
        .build(&spec(
            "name: t\nstorage: ./s\ntables:\n  error_counts: { format: delta }\n",
        ))
        .map_err(|d| d.to_string())
        .unwrap();
    assert_eq!(g.flow_order, vec!["logs", "errors", "error_monitor"]);
    let counts = g.datasets["error_counts"].schema.as_ref().unwrap();
    let names: Vec<_> = counts.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, vec!["window", "service_name", "count"]);
    assert_eq!(g.flows["errors"].reads, vec![("logs".to_string(), true)]);
}

#[test]
fn empty_pipeline() {
    let d = errors(&Pipeline::new(), BASIC_SPEC);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].to_string(), "error: pipeline `test` declares no datasets and no flows\n  help: declare a flow with #[table], #[append_flow(target = \"...\")] or #[update_flow(target = \"...\")], and make sure the module declaring it is compiled into this binary");
}

#[test]
fn unknown_target_with_suggestion() {
    let p = Pipeline::new()
        .table("logs", logs)
        .append_flow("copy", "logz", read_logs); // @copy
    let d = errors(&p, BASIC_SPEC);
    assert_one(
        &d,
        "flow `copy`",
        at("copy"),
        "targets `logz`, which is not declared",
        Some("did you mean `logs`? or declare it under `tables:` or `sinks:` in the spec, with #[table], or with create_sink(...)"),
    );
}

#[test]
fn unknown_dataset_read() {
    let p = Pipeline::new()
        .table("logs", logs)
        .table("copy", |s| s.read_stream_table("lgos")); // @lgos
    let d = errors(&p, BASIC_SPEC);
    assert_eq!(d.len(), 1, "{}", render(&d));
    assert_one(
        &d,
        "flow `copy`",
        at("lgos"),
        "reads `lgos`, which is not declared",
        Some("did you mean `logs`? or declare it with #[table] / #[materialized_view] / #[temporary_view] or under `tables:` in the spec"),
    );
}

#[test]
fn duplicate_dataset_and_flow_names() {
    let p = Pipeline::new()
        .table("logs", logs) // @dup1
        .create_sink("logs", "console", [("numRows", "5")]) // @dup2
        .append_flow("f", "out", read_logs) // @dup3
        .append_flow("f", "out", read_logs) // @dup4
        .create_streaming_table("out", TableOptions::default());
    let l1 = line_at("dup1");
    let d = errors(&p, BASIC_SPEC);
    assert_one(
        &d,
        "dataset `logs`",
        at("dup2"),
        &format!(
            "`logs` is declared twice: as a streaming table at {THIS_FILE}:{l1} and as a sink"
        ),
        Some("rename one of them or remove the duplicate declaration"),
    );
    assert_one(
        &d,
        "flow `f`",
        at("dup4"),
        &format!("flow name `f` is used twice (first at {THIS_FILE}:{})", line_at("dup3")),
        Some("give one of them another name: #[append_flow(target = \"...\", name = \"other_name\")]"),
    );
}

#[test]
fn flow_name_equal_to_another_table() {
    let p = Pipeline::new()
        .table("logs", logs) // @conflict1
        .create_streaming_table("out", TableOptions::default())
        .append_flow("logs", "out", read_logs); // @conflict2
    let d = errors(&p, BASIC_SPEC);
    // The duplicate flow name `logs` (the table's own flow) is reported too.
    assert_one(
        &d,
        "flow `logs`",
        at("conflict2"),
        &format!("flow name `logs` is used twice (first at {THIS_FILE}:{})", line_at("conflict1")),
        Some("give one of them another name: #[append_flow(target = \"...\", name = \"other_name\")]"),
    );
    let p = Pipeline::new()
        .create_streaming_table("logs", TableOptions::default()) // @conflict3
        .create_streaming_table("out", TableOptions::default())
        .append_flow("logs", "out", logs); // @conflict4
    let d = errors(&p, BASIC_SPEC);
    assert_one(
        &d,
        "flow `logs`",
        at("conflict4"),
        &format!(
            "flow name `logs` is also the name of streaming table `logs` at {THIS_FILE}:{}, but the flow writes to `out`",
            line_at("conflict3")
        ),
        Some("rename the flow, e.g. name = \"logs_to_out\""),
    );
}

#[test]
fn cycle_is_printed() {
    let p = Pipeline::new()
        .table("src", logs)
        .table("a", |s| s.read_stream_table("b"))
        .table("b", |s| s.read_stream_table("a")); // @cycle
    let d = errors(&p, BASIC_SPEC);
    assert_eq!(d.len(), 1, "{}", render(&d));
    assert_one(
        &d,
        "flow `b`",
        at("cycle"),
        "datasets depend on each other in a cycle: `a` → (flow `b`) → `b` → (flow `a`) → `a`",
        Some("a flow cannot read, directly or through other flows, the dataset it writes; read a source or an upstream dataset instead"),
    );
}

#[test]
fn self_cycle() {
    let p = Pipeline::new().table("loop", |s| s.read_stream_table("loop")); // @loop
    let d = errors(&p, BASIC_SPEC);
    assert_one(
        &d,
        "flow `loop`",
        at("loop"),
        "datasets depend on each other in a cycle: `loop` → (flow `loop`) → `loop`",
        Some("a flow cannot read, directly or through other flows, the dataset it writes; read a source or an upstream dataset instead"),
    );
}

#[test]
fn dataset_and_sink_without_flow() {
    let p = Pipeline::new()
        .table("logs", logs)
        .create_streaming_table("lonely", TableOptions::default()); // @lonely
    let d = errors(
        &p,
        "name: test\nstorage: ./s\nsinks:\n  out:\n    format: console\n",
    );
    assert_one(
        &d,
        "streaming table `lonely`",
        at("lonely"),
        "has no flow writing to it",
        Some("write to it with #[append_flow(target = \"lonely\")], or remove it"),
    );
    assert_one(
        &d,
        "sink `out`",
        spec_line(4),
        "has no flow writing to it",
        Some("write to it with #[append_flow(target = \"out\")] or #[update_flow(target = \"out\")], or remove it"),
    );
}

#[test]
fn streaming_query_into_materialized_view() {
    let p = Pipeline::new().materialized_view("mv", logs); // @mv
    let d = errors(&p, BASIC_SPEC);
    assert_one(
        &d,
        "flow `mv`",
        at("mv"),
        "returns a streaming query, but its target `mv` is a materialized view, which takes batch queries",
        Some("read with read() / read_table(...), or declare `mv` as a streaming table with #[table]"),
    );
}

#[test]
fn batch_query_into_streaming_table_and_sink() {
    let p = Pipeline::new()
        .materialized_view("mv", logs_batch)
        .table("st", logs_batch) // @st
        .append_flow("to_sink", "out", |s| s.read_table("mv")); // @to_sink
    let d = errors(
        &p,
        "name: test\nstorage: ./s\nsinks:\n  out: { format: console }\n",
    );
    assert_one(
        &d,
        "flow `st`",
        at("st"),
        "returns a batch query, but its target `st` is a streaming table, which takes streaming queries",
        Some("read with read_stream() / read_stream_table(...), or set `once = true` to run the batch query a single time"),
    );
    assert_one(
        &d,
        "flow `to_sink`",
        at("to_sink"),
        "returns a batch query, but its target `out` is a sink, which takes streaming queries",
        Some("read with read_stream() / read_stream_table(...), or set `once = true` to run the batch query a single time"),
    );
}

#[test]
fn once_flow_must_be_batch() {
    let mut f =
        pipelines_core::FlowDef::append("backfill", "logs", pipelines_core::Query::new(logs));
    f.once = true;
    let mut ok = pipelines_core::FlowDef::append(
        "backfill_ok",
        "logs",
        pipelines_core::Query::new(logs_batch),
    );
    ok.once = true;
    let p = Pipeline::new().table("logs", logs).flow(f).flow(ok);
    let d = errors(&p, BASIC_SPEC);
    assert_eq!(d.len(), 1, "{}", render(&d));
    assert_one(
        &d,
        "flow `backfill`",
        None,
        "is declared `once = true` but returns a streaming query",
        Some("read with read() / read_table(...) for a one-time backfill, or remove `once = true`"),
    );
}

#[test]
fn update_flow_into_a_table() {
    let p = Pipeline::new()
        .table("logs", logs)
        .update_flow("totals", "error_counts", |s| {
            // @totals
            s.read_stream_table("logs")?
                .group_by([col("service_name")])
                .count()
        });
    let d = errors(
        &p,
        "name: test\nstorage: ./s\ntables:\n  error_counts: { format: delta }\n",
    );
    assert_eq!(d.len(), 1, "{}", render(&d));
    assert_eq!(
        d[0].to_string(),
        format!("error: flow `totals` ({THIS_FILE}:{}): update flows can only target sinks; `error_counts` is a Delta streaming table (accepts append, complete)\n  help: point `target` at a sink declared under `sinks:` or with create_sink(...), or use #[append_flow]", line_at("totals"))
    );
}

#[test]
fn output_mode_the_sink_cannot_take() {
    let p = Pipeline::new()
        .table("logs", logs)
        .update_flow("to_files", "archive", read_logs) // @to_files
        .update_flow("to_delta", "delta_sink", read_logs) // @to_delta
        .update_flow("to_merge", "merge_sink", |s| {
            s.read_stream_table("logs")?
                .group_by([col("level")])
                .count()
        })
        .update_flow("to_kafka", "kafka_sink", |s| {
            s.read_stream_table("logs")?.select_expr(["msg AS value"])
        });
    let yaml = "name: test\nstorage: ./s\nsinks:\n  archive: { format: parquet, options: { path: ./a } }\n  delta_sink: { format: delta, options: { path: ./d } }\n  merge_sink: { format: delta, options: { path: ./m }, merge_keys: [level] }\n  kafka_sink: { format: kafka, options: { kafka.bootstrap.servers: \"localhost:9092\", topic: t } }\n";
    let d = errors(&p, yaml);
    assert_eq!(d.len(), 2, "{}", render(&d));
    assert_one(
        &d,
        "flow `to_files`",
        at("to_files"),
        "sink `archive` (parquet) does not accept update output mode; it accepts append",
        Some("parquet sinks take append only: use #[append_flow], or write to a sink that takes updates (kafka, foreach_batch, delta with merge_keys)"),
    );
    assert_one(
        &d,
        "flow `to_delta`",
        at("to_delta"),
        "sink `delta_sink` (delta) does not accept update output mode; it accepts append, complete",
        Some("Delta tables take append and complete; declare `merge_keys` on the sink, or use foreach_batch with a MERGE"),
    );
}

#[test]
fn unknown_formats_and_missing_sink_options() {
    let p = Pipeline::new()
        .table("logs", logs)
        .append_flow("a", "k", read_logs)
        .append_flow("b", "files", read_logs)
        .append_flow("c", "t", read_logs);
    let yaml = "name: test\nstorage: ./s\ntables:\n  t: { format: deltaa }\nsinks:\n  k:\n    format: kafak\n  files:\n    format: parquet\n";
    let d = errors(&p, yaml);
    assert_eq!(d.len(), 3, "{}", render(&d));
    assert_one(
        &d,
        "sink `k`",
        spec_line(6),
        "unknown format `kafak`",
        Some("did you mean `kafka`? known formats: parquet, json, csv, delta, kafka, console, memory, foreach_batch"),
    );
    assert_one(
        &d,
        "sink `files`",
        spec_line(8),
        "parquet sink needs the option `path`",
        Some("add `path: ...` under the sink's `options:`"),
    );
    assert_one(
        &d,
        "streaming table `t`",
        spec_line(4),
        "unknown format `deltaa`",
        Some("did you mean `delta`? known formats: delta, parquet, json, csv"),
    );
}

#[test]
fn materialized_view_with_two_flows() {
    let p = Pipeline::new().materialized_view("mv", logs_batch).flow({
        let mut f =
            pipelines_core::FlowDef::append("more", "mv", pipelines_core::Query::new(logs_batch));
        f.once = true;
        f
    });
    let d = errors(&p, BASIC_SPEC);
    assert_eq!(d.len(), 1, "{}", render(&d));
    assert_eq!(
        d[0].message,
        "has 2 flows (`more`, `mv`), but a materialized view is defined by exactly one query"
    );
    assert_eq!(
        d[0].help.as_deref(),
        Some("make it a streaming table to take several flows, or union the queries into one")
    );
}

#[test]
fn reading_a_sink_or_streaming_a_materialized_view() {
    let p = Pipeline::new()
        .table("logs", logs)
        .materialized_view("mv", logs_batch)
        .append_flow("from_sink", "out", |s| s.read_stream_table("console_out")) // @from_sink
        .append_flow("from_mv", "out", |s| s.read_stream_table("mv")) // @from_mv
        .append_flow("to_console", "console_out", read_logs)
        .create_streaming_table("out", TableOptions::default());
    let d = errors(
        &p,
        "name: test\nstorage: ./s\nsinks:\n  console_out: { format: console }\n",
    );
    assert_one(
        &d,
        "flow `from_sink`",
        at("from_sink"),
        "reads sink `console_out`, but sinks are write-only",
        Some("write into a streaming table instead and read that, or read the sink's storage as a source"),
    );
    assert_one(
        &d,
        "flow `from_mv`",
        at("from_mv"),
        "reads materialized view `mv` as a stream, but materialized views are recomputed, not appended to",
        Some("use read_table(\"mv\"), or make `mv` a streaming table"),
    );
}

#[test]
fn query_errors_name_the_flow_and_suggest_columns() {
    let p = Pipeline::new()
        .table("logs", logs)
        .table("errors", |s| {
            // @errors
            s.read_stream_table("logs")?.filter("levle = 'ERROR'")
        })
        .table("downstream", |s| s.read_stream_table("errors"));
    let d = errors(&p, BASIC_SPEC);
    // `downstream` depends on the broken flow: no cascade of errors.
    assert_eq!(d.len(), 1, "{}", render(&d));
    assert_eq!(d[0].subject.as_deref(), Some("flow `errors`"));
    assert_eq!(d[0].origin, at("errors"));
    assert!(d[0].message.contains("levle"), "{}", d[0].message);
    assert!(
        d[0].help
            .as_deref()
            .unwrap_or("")
            .contains("did you mean `level`?"),
        "{:?}",
        d[0].help
    );
}

#[test]
fn query_construction_errors_and_panics_are_reported() {
    let p = Pipeline::new()
        .table("bad_interval", |s| {
            // @bad_interval
            logs(s)?.with_watermark("ts", "10 parsecs")
        })
        .table("panics", |_s| panic!("boom")); // @panics
    let d = errors(&p, BASIC_SPEC);
    assert_eq!(d.len(), 2, "{}", render(&d));
    assert_one(
        &d,
        "flow `bad_interval`",
        at("bad_interval"),
        "could not build its query: invalid interval `10 parsecs`: unknown unit `parsecs`",
        Some("write an interval such as \"10 minutes\", \"5 seconds\" or \"1 hour 30 minutes\""),
    );
    assert_one(
        &d,
        "flow `panics`",
        at("panics"),
        "its query function panicked: boom",
        Some("return an error with `?` instead of panicking"),
    );
}

#[test]
fn flows_into_one_table_must_agree_and_match_declared_schema() {
    let p = Pipeline::new()
        .table("logs", logs)
        .append_flow("a", "merged", |s| {
            s.read_stream_table("logs")?.select_expr(["ts", "msg"])
        })
        .append_flow("b", "merged", |s| {
            // @fan_b
            s.read_stream_table("logs")?.select_expr(["ts"])
        })
        .append_flow("c", "typed", |s| {
            // @fan_c
            s.read_stream_table("logs")?.select_expr(["msg"])
        })
        .create_streaming_table("merged", TableOptions::default())
        .create_streaming_table(
            "typed",
            TableOptions {
                schema: Some("msg BIGINT".into()),
                ..TableOptions::default()
            },
        );
    let d = errors(&p, BASIC_SPEC);
    assert_eq!(d.len(), 2, "{}", render(&d));
    assert_one(
        &d,
        "flow `b`",
        at("fan_b"),
        "writes different columns into streaming table `merged` than flow `a`: expected (ts TIMESTAMP, msg STRING), got (ts TIMESTAMP)",
        Some("flows into one table must produce the same columns; add, cast or drop columns so both match"),
    );
    assert_one(
        &d,
        "flow `c`",
        at("fan_c"),
        "its query does not match the declared schema of streaming table `typed`: expected (msg BIGINT), got (msg STRING)",
        Some("change the query's columns, or the table's `schema`"),
    );
}

#[test]
fn spec_flow_settings_must_name_flows_and_triggers_must_parse() {
    let p = Pipeline::new().table("logs", logs).flow({
        let mut f =
            pipelines_core::FlowDef::append("rt", "logs2", pipelines_core::Query::new(read_logs));
        f.origin = code(1);
        f.conf
            .insert("pipelines.trigger".into(), "Sometimes".into());
        f
    });
    let d = errors(
        &p,
        "name: test\nstorage: ./s\ntables:\n  logs2: {}\nflows:\n  lgos:\n    trigger: once\n",
    );
    assert_eq!(d.len(), 2, "{}", render(&d));
    assert_one(
        &d,
        "flow `lgos`",
        spec_line(6),
        "`flows.lgos` in the spec names no declared flow",
        Some("did you mean `logs`? the names under `flows:` must be flow names (function names unless `name = ...` is set)"),
    );
    let trig = d
        .iter()
        .find(|x| x.subject.as_deref() == Some("flow `rt`"))
        .expect("trigger error");
    assert!(trig.message.contains("Sometimes"), "{}", trig.message);
}

#[test]
fn several_problems_are_reported_at_once() {
    let p = Pipeline::new()
        .table("logs", logs)
        .update_flow("totals", "error_counts", |s| {
            s.read_stream_table("logs")?
                .group_by([col("level")])
                .count()
        })
        .append_flow("archive_logs", "archive", |s| s.read_stream_table("log"))
        .table("a", |s| s.read_stream_table("b"))
        .table("b", |s| s.read_stream_table("a"));
    let d = errors(
        &p,
        "name: t\nstorage: ./s\ntables:\n  error_counts: { format: delta }\nsinks:\n  archive: { format: parquet, options: { path: ./a } }\n  alerts: { format: kafka, options: { kafka.bootstrap.servers: x } }\n",
    );
    assert_eq!(d.len(), 4, "{}", render(&d));
    let text = pipelines_core::Diagnostics(d).to_string();
    assert!(
        text.ends_with("4 errors; nothing was read or written."),
        "{text}"
    );
}

fn json_logs(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("ts TIMESTAMP, level STRING")
        .load("data/logs")
}

#[test]
fn an_unknown_sink_option_names_its_line_and_the_option_meant() {
    let p = Pipeline::new().append_flow("to_console", "out", json_logs);
    let yaml = "name: test\nstorage: ./storage\nsinks:\n  out:\n    format: console\n    options:\n      numRowz: 20\n";
    let errs = errors(&p, yaml);
    assert_eq!(
        errs,
        vec![
            Diagnostic::new("`numRowz` is not an option of the console sink")
                .subject("sink `out`")
                .origin(spec_line(7))
                .help("did you mean `numRows`? known options: numRows, truncate, queryName")
        ]
    );
    assert_eq!(
        errs[0].to_string(),
        "error: sink `out` (pipeline.yml:7): `numRowz` is not an option of the console sink\n  help: did you mean `numRows`? known options: numRows, truncate, queryName"
    );
}

#[test]
fn an_unknown_flow_option_in_the_spec_names_its_line_and_the_option_meant() {
    let p = Pipeline::new()
        .append_flow("copy", "out", json_logs)
        .create_sink("out", "console", [("numRows", "5")]);
    let yaml = "name: test\nstorage: ./storage\nflows:\n  copy:\n    options:\n      maxFilesPerTriger: \"1\"\n";
    let errs = errors(&p, yaml);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].origin, spec_line(6));
    assert_eq!(
        errs[0].to_string(),
        "error: flow `copy` (pipeline.yml:6): `maxFilesPerTriger` under `flows.copy.options` is neither a setting of the flow nor an option of its sources\n  help: did you mean `maxFilesPerTrigger`? known settings and options: pipelines.outputMode, pipelines.trigger, pipelines.trigger.interval, pipelines.lateRowsTo, checkpointLocation, spark.sql.shuffle.partitions, spark.sql.streaming.multipleWatermarkPolicy, spark.sql.files.ignoreCorruptFiles, pipelines.cdc.tombstoneGCThresholdInSeconds, path, maxFilesPerTrigger, maxBytesPerTrigger, latestFirst, fileNameOnly, pathGlobFilter, ignoreMissingFiles, ignoreCorruptFiles, mode, columnNameOfCorruptRecord, multiLine, encoding, timestampFormat, timestampNTZFormat, dateFormat"
    );
}

#[test]
fn unknown_source_options_in_code_and_bad_values_from_the_spec_fail_dry_run() {
    // A typo in code points at the flow's declaration.
    let typo = Pipeline::new()
        .append_flow("copy", "out", |s: &Session| {
            // @typo
            s.read_stream()
                .format("json")
                .schema("ts TIMESTAMP")
                .option("maxFilesPerTriger", "1")
                .load("data/logs")
        })
        .create_sink("out", "console", [("numRows", "5")]);
    let errs = errors(&typo, BASIC_SPEC);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].subject.as_deref(), Some("flow `copy`"));
    assert_eq!(errs[0].origin, at("typo"));
    assert_eq!(
        errs[0].message,
        "`maxFilesPerTriger` is not an option of the json source `data/logs`"
    );
    assert!(
        errs[0].help.as_deref().is_some_and(|h| h.starts_with(
            "did you mean `maxFilesPerTrigger`? known options: path, maxFilesPerTrigger,"
        )),
        "{:?}",
        errs[0].help
    );
    // A bad value set in the spec is the source's own parse error, at its line.
    let p = Pipeline::new()
        .append_flow("copy", "out", json_logs)
        .create_sink("out", "console", [("numRows", "5")]);
    let yaml = "name: test\nstorage: ./storage\nflows:\n  copy:\n    options:\n      maxFilesPerTrigger: zero\n";
    assert_eq!(
        errors(&p, yaml),
        vec![Diagnostic::new(
            "option `maxFilesPerTrigger` must be a positive whole number, got `zero`"
        )
        .subject("flow `copy`")
        .origin(spec_line(6))
        .help(".option(\"maxFilesPerTrigger\", \"10\")")]
    );
    // A bad sink value, and an unknown key of the framework's namespace.
    let bad = Pipeline::new()
        .append_flow("copy", "out", json_logs)
        .create_sink("out", "console", [("numRows", "lots")]);
    let yaml =
        "name: test\nstorage: ./storage\nconfiguration:\n  pipelines.checkpoint.fsnyc: \"true\"\n";
    let errs: Vec<String> = errors(&bad, yaml).iter().map(|d| d.to_string()).collect();
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(
        errs[0].ends_with(": option `numRows` is `lots`, not a whole number\n  help: set `numRows` to how many rows to print per batch (default 20)"),
        "{}",
        errs[0]
    );
    assert!(
        errs[0].starts_with("error: sink `out` (crates/core/tests/it/graph_validation.rs:"),
        "{}",
        errs[0]
    );
    assert_eq!(
        errs[1],
        "error: pipeline.yml:4: `pipelines.checkpoint.fsnyc` under `configuration:` is not a setting of the pipeline\n  help: did you mean `pipelines.checkpoint.fsync`? known settings: pipelines.checkpoint.fsync, spark.sql.shuffle.partitions, spark.sql.streaming.multipleWatermarkPolicy, spark.sql.files.ignoreCorruptFiles, pipelines.cdc.tombstoneGCThresholdInSeconds, pipelines.eventLog.path, pipelines.outputMode, pipelines.trigger, pipelines.trigger.interval, pipelines.lateRowsTo, checkpointLocation"
    );
}

#[test]
fn names_that_would_leave_the_storage_path_are_refused() {
    let p = Pipeline::new()
        .table("../escape", logs)
        .append_flow("a/b", "../escape", read_logs);
    let errs: Vec<String> = errors(&p, BASIC_SPEC)
        .iter()
        .filter(|d| d.message.starts_with("the name "))
        .map(|d| format!("{} / {}", d.message, d.help.as_deref().unwrap_or("")))
        .collect();
    let help =
        "use letters, digits, `_`, `-` and `.`; names are directories under the storage path";
    assert_eq!(
        errs,
        [
            format!("the name `../escape` contains a path separator, so its table or checkpoint would not stay under the storage path / {help}"),
            format!("the name `../escape` contains a path separator, so its table or checkpoint would not stay under the storage path / {help}"),
            format!("the name `a/b` contains a path separator, so its table or checkpoint would not stay under the storage path / {help}"),
        ]
    );
    let dots = Pipeline::new().table("..", logs);
    assert!(errors(&dots, BASIC_SPEC)
        .iter()
        .any(|d| d.message
            == "the name `..` would point outside its directory under the storage path"));
}
