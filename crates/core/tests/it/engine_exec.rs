//! `CompiledPlan`: a flow's plan over micro-batches (exact rows).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, Int32Array, Int64Array, StringArray, StructArray, TimestampMicrosecondArray,
};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use pipelines_core::engine::exec::{max_event_time_ms, BatchContext, BatchOutput, CompiledPlan};
use pipelines_core::formats::OutputMode;
use pipelines_core::plan::functions::{col, lit, tumbling_window, window};
use pipelines_core::prelude::*;
use pipelines_core::Error;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn stream(name: &str, ddl: &str) -> DataFrame {
    Session::new()
        .read_stream()
        .format("memory")
        .schema(ddl)
        .load(name)
        .unwrap()
}

fn batch_source(name: &str, ddl: &str) -> DataFrame {
    Session::new()
        .read()
        .format("memory")
        .schema(ddl)
        .load(name)
        .unwrap()
}

fn compile_with(df: &DataFrame, catalog: &HashMap<String, SchemaRef>) -> CompiledPlan {
    let resolved = df.resolve(catalog).unwrap();
    CompiledPlan::compile("f", df, &resolved, 2).unwrap()
}

fn compile(df: &DataFrame) -> CompiledPlan {
    compile_with(df, &HashMap::new())
}

fn compile_err(df: &DataFrame) -> PlanError {
    let resolved = df.resolve(&HashMap::new()).unwrap();
    match CompiledPlan::compile("f", df, &resolved, 2) {
        Err(Error::Plan(e)) => e,
        Err(other) => panic!("expected a plan error, got {other}"),
        Ok(_) => panic!("expected an error"),
    }
}

fn run(plan: &mut CompiledPlan, inputs: Vec<Vec<RecordBatch>>) -> Vec<RecordBatch> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let out = rt.block_on(plan.execute(inputs)).unwrap();
    for b in &out {
        assert_eq!(b.schema(), plan.schema(), "output batch schema");
    }
    out
}

fn i64s(v: &[i64]) -> ArrayRef {
    Arc::new(Int64Array::from(v.to_vec()))
}

fn i32s(v: &[i32]) -> ArrayRef {
    Arc::new(Int32Array::from(v.to_vec()))
}

fn strs(v: &[&str]) -> ArrayRef {
    Arc::new(StringArray::from(v.to_vec()))
}

fn ts(v: &[i64]) -> ArrayRef {
    Arc::new(TimestampMicrosecondArray::from(v.to_vec()).with_timezone("UTC"))
}

fn batch(schema: &SchemaRef, cols: Vec<ArrayRef>) -> RecordBatch {
    RecordBatch::try_new(schema.clone(), cols).unwrap()
}

/// Rows as text, `a|b|c`, in output order.
fn rows(batches: &[RecordBatch]) -> Vec<String> {
    let opts = FormatOptions::default().with_null("null");
    let mut out = Vec::new();
    for b in batches {
        let fmts: Vec<ArrayFormatter> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts).unwrap())
            .collect();
        for r in 0..b.num_rows() {
            let cells: Vec<String> = fmts.iter().map(|f| f.value(r).to_string()).collect();
            out.push(cells.join("|"));
        }
    }
    out
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn names(schema: &SchemaRef) -> Vec<String> {
    schema.fields().iter().map(|f| f.name().clone()).collect()
}

const EVENTS: &str = "level STRING, n BIGINT, msg STRING";

fn events(plan: &CompiledPlan, leaf: usize) -> RecordBatch {
    batch(
        &plan.leaves()[leaf].schema,
        vec![
            strs(&["ERROR", "INFO", "ERROR", "WARN", "ERROR"]),
            i64s(&[1, 2, 3, 4, 5]),
            strs(&["a", "b", "c", "d", "e"]),
        ],
    )
}

// ---------------------------------------------------------------------------
// Stateless operators
// ---------------------------------------------------------------------------

#[test]
fn filter_with_sql_keeps_matching_rows_in_order() {
    let df = stream("events", EVENTS).filter("level = 'ERROR'").unwrap();
    let mut plan = compile(&df);
    assert_eq!(plan.leaves().len(), 1);
    assert!(plan.leaves()[0].streaming);
    let inputs = vec![vec![events(&plan, 0)]];
    let out = run(&mut plan, inputs);
    assert_eq!(rows(&out), ["ERROR|1|a", "ERROR|3|c", "ERROR|5|e"]);
    assert_eq!(plan.schema(), df.resolve(&HashMap::new()).unwrap().schema());
}

#[test]
fn filter_with_expr() {
    let df = stream("events", EVENTS)
        .filter(col("n").gt(lit(3i64)))
        .unwrap();
    let mut plan = compile(&df);
    let inputs = vec![vec![events(&plan, 0)]];
    let out = run(&mut plan, inputs);
    assert_eq!(rows(&out), ["WARN|4|d", "ERROR|5|e"]);
}

#[test]
fn select_and_select_expr_with_cast() {
    let df = stream("events", EVENTS)
        .select([col("msg"), (col("n") * lit(2i64)).alias("twice")])
        .unwrap()
        .select_expr(["CAST(twice AS INT) AS t", "upper(msg) AS m", "twice + 1"])
        .unwrap();
    let mut plan = compile(&df);
    let schema = plan.schema();
    assert_eq!(names(&schema), ["t", "m", "twice + 1"]);
    assert_eq!(
        schema.field(0).data_type(),
        &arrow::datatypes::DataType::Int32
    );
    let inputs = vec![vec![events(&plan, 0)]];
    let out = run(&mut plan, inputs);
    assert_eq!(rows(&out), ["2|A|3", "4|B|5", "6|C|7", "8|D|9", "10|E|11"]);
    assert_eq!(
        out[0].schema(),
        df.resolve(&HashMap::new()).unwrap().schema()
    );
}

#[test]
fn select_star_and_sql_cast_to_string() {
    let df = stream("events", EVENTS)
        .select_expr(["*", "CAST(n AS STRING) AS s"])
        .unwrap();
    let mut plan = compile(&df);
    assert_eq!(names(&plan.schema()), ["level", "n", "msg", "s"]);
    assert_eq!(
        plan.schema().field(3).data_type(),
        &arrow::datatypes::DataType::Utf8
    );
    let inputs = vec![vec![events(&plan, 0)]];
    let out = run(&mut plan, inputs);
    assert_eq!(rows(&out)[1], "INFO|2|b|2");
}

#[test]
fn with_column_adds_and_replaces_in_place() {
    let df = stream("events", EVENTS)
        .with_column("n", "n * 100")
        .unwrap()
        .with_column("tag", "concat(level, '-', msg)")
        .unwrap();
    let mut plan = compile(&df);
    assert_eq!(names(&plan.schema()), ["level", "n", "msg", "tag"]);
    let inputs = vec![vec![events(&plan, 0)]];
    let out = run(&mut plan, inputs);
    assert_eq!(
        rows(&out),
        [
            "ERROR|100|a|ERROR-a",
            "INFO|200|b|INFO-b",
            "ERROR|300|c|ERROR-c",
            "WARN|400|d|WARN-d",
            "ERROR|500|e|ERROR-e"
        ]
    );
}

#[test]
fn with_column_renamed_and_drop() {
    let df = stream("events", EVENTS)
        .with_column_renamed("msg", "message")
        .unwrap()
        .drop(["level"])
        .unwrap();
    let mut plan = compile(&df);
    assert_eq!(names(&plan.schema()), ["n", "message"]);
    let inputs = vec![vec![events(&plan, 0)]];
    let out = run(&mut plan, inputs);
    assert_eq!(rows(&out), ["1|a", "2|b", "3|c", "4|d", "5|e"]);
}

#[test]
fn union_of_two_streams_widens_types() {
    let a = stream("a", "id INT, name STRING");
    let b = stream("b", "id BIGINT, label STRING");
    let df = a.union(&b).unwrap().filter("id > 1").unwrap();
    let mut plan = compile(&df);
    assert_eq!(plan.leaves().len(), 2);
    assert_eq!(names(&plan.schema()), ["id", "name"]);
    assert_eq!(
        plan.schema().field(0).data_type(),
        &arrow::datatypes::DataType::Int64
    );
    let ba = batch(
        &plan.leaves()[0].schema,
        vec![i32s(&[1, 2]), strs(&["x", "y"])],
    );
    let bb = batch(
        &plan.leaves()[1].schema,
        vec![i64s(&[3, 1, 4]), strs(&["p", "q", "r"])],
    );
    let inputs = vec![vec![ba], vec![bb]];
    let out = run(&mut plan, inputs);
    assert_eq!(sorted(rows(&out)), ["2|y", "3|p", "4|r"]);
}

#[test]
fn union_with_one_empty_side() {
    let a = stream("a", "id BIGINT");
    let b = stream("b", "id BIGINT");
    let mut plan = compile(&a.union(&b).unwrap());
    let ba = batch(&plan.leaves()[0].schema, vec![i64s(&[7, 8])]);
    let inputs = vec![vec![ba], vec![]];
    let out = run(&mut plan, inputs);
    assert_eq!(rows(&out), ["7", "8"]);
}

#[test]
fn with_watermark_passes_rows_and_reports_the_column() {
    let df = stream("clicks", "ts TIMESTAMP, user STRING")
        .with_watermark("ts", "10 minutes")
        .unwrap()
        .filter("user <> 'bot'")
        .unwrap();
    let mut plan = compile(&df);
    assert_eq!(plan.watermarks(), [("ts".to_string(), 600_000)]);
    // The watermark metadata is on the output column, as resolved.
    assert_eq!(plan.schema(), df.resolve(&HashMap::new()).unwrap().schema());
    let input = batch(
        &plan.leaves()[0].schema,
        vec![
            ts(&[1_000_000, 5_000_500, 3_000_000]),
            strs(&["u1", "bot", "u2"]),
        ],
    );
    let inputs = vec![vec![input.clone()]];
    let out = run(&mut plan, inputs);
    assert_eq!(
        rows(&out),
        ["1970-01-01T00:00:01Z|u1", "1970-01-01T00:00:03Z|u2"]
    );
    assert_eq!(max_event_time_ms(&out, "ts"), Some(3_000));
    assert_eq!(max_event_time_ms(&[input], "TS"), Some(5_000));
    assert_eq!(max_event_time_ms(&out, "user"), None);
    assert_eq!(max_event_time_ms(&[], "ts"), None);
}

#[test]
fn tumbling_window_column_values() {
    let df = stream("clicks", "ts TIMESTAMP, user STRING")
        .select([tumbling_window(col("ts"), "10 minutes"), col("user")])
        .unwrap()
        .select_expr(["window.start AS ws", "window.end AS we", "user"])
        .unwrap();
    let mut plan = compile(&df);
    let min = 60_000_000i64;
    let input = batch(
        &plan.leaves()[0].schema,
        vec![
            ts(&[0, 9 * min + 59_999_999, 10 * min, 25 * min]),
            strs(&["a", "b", "c", "d"]),
        ],
    );
    let inputs = vec![vec![input]];
    let out = run(&mut plan, inputs);
    assert_eq!(
        rows(&out),
        [
            "1970-01-01T00:00:00Z|1970-01-01T00:10:00Z|a",
            "1970-01-01T00:00:00Z|1970-01-01T00:10:00Z|b",
            "1970-01-01T00:10:00Z|1970-01-01T00:20:00Z|c",
            "1970-01-01T00:20:00Z|1970-01-01T00:30:00Z|d"
        ]
    );
}

#[test]
fn window_struct_in_select_and_sql_window() {
    let df = stream("clicks", "ts TIMESTAMP, user STRING")
        .select_expr(["window(ts, '1 hour') AS w", "user"])
        .unwrap();
    let mut plan = compile(&df);
    assert_eq!(names(&plan.schema()), ["w", "user"]);
    let input = batch(
        &plan.leaves()[0].schema,
        vec![ts(&[3_600_000_000 + 5]), strs(&["a"])],
    );
    let inputs = vec![vec![input]];
    let out = run(&mut plan, inputs);
    let w = out[0]
        .column(0)
        .as_any()
        .downcast_ref::<StructArray>()
        .unwrap();
    let start = w
        .column(0)
        .as_any()
        .downcast_ref::<TimestampMicrosecondArray>()
        .unwrap();
    let end = w
        .column(1)
        .as_any()
        .downcast_ref::<TimestampMicrosecondArray>()
        .unwrap();
    assert_eq!(start.value(0), 3_600_000_000);
    assert_eq!(end.value(0), 7_200_000_000);
}

// ---------------------------------------------------------------------------
// Stream-static joins
// ---------------------------------------------------------------------------

fn dim_catalog() -> HashMap<String, SchemaRef> {
    let mut c = HashMap::new();
    c.insert(
        "users".to_string(),
        Arc::new(
            pipelines_core::plan::ddl::parse_ddl_schema("user_id BIGINT, country STRING").unwrap(),
        ),
    );
    c
}

fn users(plan: &CompiledPlan) -> RecordBatch {
    batch(
        &plan.leaves()[1].schema,
        vec![i64s(&[1, 2, 3]), strs(&["FR", "DE", "US"])],
    )
}

fn clicks(plan: &CompiledPlan, ids: &[i64]) -> RecordBatch {
    let pages: Vec<String> = ids.iter().map(|i| format!("p{i}")).collect();
    let pages: Vec<&str> = pages.iter().map(String::as_str).collect();
    batch(&plan.leaves()[0].schema, vec![i64s(ids), strs(&pages)])
}

#[test]
fn stream_static_inner_join_using() {
    let s = Session::new();
    let df = stream("clicks", "user_id BIGINT, page STRING")
        .join_using(
            &s.read_table("users").unwrap(),
            ["user_id"],
            JoinType::Inner,
        )
        .unwrap();
    let mut plan = compile_with(&df, &dim_catalog());
    assert_eq!(plan.leaves().len(), 2);
    assert!(plan.leaves()[0].streaming);
    assert!(!plan.leaves()[1].streaming);
    assert_eq!(names(&plan.schema()), ["user_id", "page", "country"]);
    let inputs = vec![vec![clicks(&plan, &[1, 3, 9, 1])], vec![users(&plan)]];
    let out = run(&mut plan, inputs);
    assert_eq!(sorted(rows(&out)), ["1|p1|FR", "1|p1|FR", "3|p3|US"]);
}

#[test]
fn stream_static_left_outer_join_on_condition() {
    let s = Session::new();
    let df = stream("clicks", "uid BIGINT, page STRING")
        .join(
            &s.read_table("users").unwrap(),
            "left.uid = right.user_id",
            JoinType::LeftOuter,
        )
        .unwrap();
    let mut plan = compile_with(&df, &dim_catalog());
    assert_eq!(names(&plan.schema()), ["uid", "page", "user_id", "country"]);
    let inputs = vec![vec![clicks(&plan, &[2, 9])], vec![users(&plan)]];
    let out = run(&mut plan, inputs);
    assert_eq!(sorted(rows(&out)), ["2|p2|2|DE", "9|p9|null|null"]);
    assert_eq!(plan.schema(), df.resolve(&dim_catalog()).unwrap().schema());
}

#[test]
fn join_runs_again_with_new_rows_on_both_sides() {
    let s = Session::new();
    let df = stream("clicks", "user_id BIGINT, page STRING")
        .join_using(
            &s.read_table("users").unwrap(),
            ["user_id"],
            JoinType::LeftOuter,
        )
        .unwrap();
    let mut plan = compile_with(&df, &dim_catalog());
    let inputs = vec![vec![clicks(&plan, &[1])], vec![users(&plan)]];
    let out = run(&mut plan, inputs);
    assert_eq!(rows(&out), ["1|p1|FR"]);
    // The static side changed: the join must see the new version.
    let users2 = batch(&plan.leaves()[1].schema, vec![i64s(&[1]), strs(&["IT"])]);
    let inputs = vec![vec![clicks(&plan, &[1, 2])], vec![users2]];
    let out = run(&mut plan, inputs);
    assert_eq!(sorted(rows(&out)), ["1|p1|IT", "2|p2|null"]);
}

// ---------------------------------------------------------------------------
// Batch plans use every operator
// ---------------------------------------------------------------------------

#[test]
fn batch_group_by_count_and_order_by() {
    let df = batch_source("events", EVENTS)
        .group_by([col("level")])
        .count()
        .unwrap()
        .order_by(["count DESC", "level"])
        .unwrap();
    let mut plan = compile(&df);
    assert!(!plan.leaves()[0].streaming);
    assert_eq!(names(&plan.schema()), ["level", "count"]);
    let inputs = vec![vec![events(&plan, 0)]];
    let out = run(&mut plan, inputs);
    assert_eq!(rows(&out), ["ERROR|3", "INFO|1", "WARN|1"]);
    assert_eq!(plan.schema(), df.resolve(&HashMap::new()).unwrap().schema());
}

#[test]
fn batch_aggregates_limit_and_distinct() {
    let df = batch_source("events", EVENTS)
        .group_by([col("level")])
        .agg(["sum(n) AS total", "max(msg) AS last_msg"])
        .unwrap()
        .order_by(["total DESC"])
        .unwrap()
        .limit(2)
        .unwrap();
    let mut plan = compile(&df);
    let inputs = vec![vec![events(&plan, 0)]];
    let out = run(&mut plan, inputs);
    assert_eq!(rows(&out), ["ERROR|9|e", "WARN|4|d"]);
    // Again, with other rows: the sort's top-k state must not leak.
    let again = batch(
        &plan.leaves()[0].schema,
        vec![strs(&["A", "B"]), i64s(&[1, 2]), strs(&["x", "y"])],
    );
    let inputs = vec![vec![again]];
    let out = run(&mut plan, inputs);
    assert_eq!(rows(&out), ["B|2|y", "A|1|x"]);

    let dedup = batch_source("events", EVENTS)
        .select(["level"])
        .unwrap()
        .drop_duplicates::<&str>(None)
        .unwrap()
        .order_by(["level"])
        .unwrap();
    let mut plan = compile(&dedup);
    let inputs = vec![vec![events(&plan, 0)]];
    let out = run(&mut plan, inputs);
    assert_eq!(rows(&out), ["ERROR", "INFO", "WARN"]);
}

#[test]
fn batch_tumbling_window_aggregation() {
    let df = batch_source("clicks", "ts TIMESTAMP, user STRING")
        .group_by([tumbling_window(col("ts"), "10 minutes")])
        .count()
        .unwrap()
        .select_expr(["window.start AS start", "count"])
        .unwrap()
        .order_by(["start"])
        .unwrap();
    let mut plan = compile(&df);
    let min = 60_000_000i64;
    let input = batch(
        &plan.leaves()[0].schema,
        vec![ts(&[min, 2 * min, 11 * min]), strs(&["a", "b", "c"])],
    );
    let inputs = vec![vec![input]];
    let out = run(&mut plan, inputs);
    assert_eq!(
        rows(&out),
        ["1970-01-01T00:00:00Z|2", "1970-01-01T00:10:00Z|1"]
    );
}

// ---------------------------------------------------------------------------
// Stateful streaming operators
// ---------------------------------------------------------------------------

fn batch_ctx(id: u64, mode: OutputMode, late: Option<i64>, evict: Option<i64>) -> BatchContext {
    BatchContext {
        batch_id: id,
        output_mode: mode,
        watermark_for_late_ms: late,
        watermark_for_eviction_ms: evict,
        capture_late_rows: false,
        ..BatchContext::default()
    }
}

fn run_batch(
    plan: &mut CompiledPlan,
    inputs: Vec<Vec<RecordBatch>>,
    ctx: &BatchContext,
) -> BatchOutput {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(plan.execute_batch(inputs, ctx)).unwrap()
}

fn logs(plan: &CompiledPlan, minutes: &[i64], services: &[&str]) -> RecordBatch {
    RecordBatch::try_new(
        plan.leaves()[0].schema.clone(),
        vec![
            Arc::new(
                TimestampMicrosecondArray::from(
                    minutes.iter().map(|m| m * 60_000_000).collect::<Vec<_>>(),
                )
                .with_data_type(plan.leaves()[0].schema.field(0).data_type().clone()),
            ),
            Arc::new(StringArray::from(services.to_vec())),
        ],
    )
    .unwrap()
}

#[test]
fn streaming_aggregation_keeps_state_and_emits_per_output_mode() {
    let df = stream("logs", "ts TIMESTAMP, service STRING")
        .with_watermark("ts", "10 minutes")
        .unwrap()
        .group_by([tumbling_window(col("ts"), "5 minutes"), col("service")])
        .count()
        .unwrap();
    // Update mode: each batch emits the groups it changed.
    let mut plan = compile(&df);
    let ctx0 = batch_ctx(0, OutputMode::Update, Some(0), Some(0));
    let b = logs(&plan, &[1, 2, 6], &["a", "a", "b"]);
    let out = run_batch(&mut plan, vec![vec![b]], &ctx0);
    assert_eq!(
        sorted(rows(&out.rows)),
        [
            "{start: 1970-01-01T00:00:00Z, end: 1970-01-01T00:05:00Z}|a|2",
            "{start: 1970-01-01T00:05:00Z, end: 1970-01-01T00:10:00Z}|b|1"
        ]
    );
    assert_eq!(out.event_times, vec![(0, 6 * 60_000, 600_000)]);
    assert_eq!(out.state_operators[0].num_rows_total, 2);
    // Batch 1 runs with watermark 6 - 10 < 0 → nothing closes; a row for a
    // known group updates it.
    let ctx1 = batch_ctx(1, OutputMode::Update, Some(0), Some(0));
    let b = logs(&plan, &[3, 20], &["a", "c"]);
    let out = run_batch(&mut plan, vec![vec![b]], &ctx1);
    assert_eq!(
        sorted(rows(&out.rows)),
        [
            "{start: 1970-01-01T00:00:00Z, end: 1970-01-01T00:05:00Z}|a|3",
            "{start: 1970-01-01T00:20:00Z, end: 1970-01-01T00:25:00Z}|c|1"
        ]
    );
    // Batch 2 with watermark 10 min: windows ending at or before it are
    // evicted; a row for [0, 5) judged against the late watermark (10 min) is dropped.
    let ctx2 = batch_ctx(2, OutputMode::Update, Some(10 * 60_000), Some(10 * 60_000));
    let b = logs(&plan, &[4, 21], &["a", "c"]);
    let out = run_batch(&mut plan, vec![vec![b]], &ctx2);
    assert_eq!(
        sorted(rows(&out.rows)),
        ["{start: 1970-01-01T00:20:00Z, end: 1970-01-01T00:25:00Z}|c|2"]
    );
    let p = &out.state_operators[0];
    assert_eq!(
        (
            p.num_rows_total,
            p.num_rows_dropped_by_watermark,
            p.num_rows_removed
        ),
        (1, 1, 2)
    );
}

/// Grouped by its window alone, rows are counted (and summed) the same
/// whatever their order and batching: rows in time order by runs of one
/// window, late ones through the map of every window, a big batch on
/// several threads.
#[test]
fn a_grouping_by_the_window_alone_aggregates_rows_in_any_order() {
    // Mostly one event every 7 s from 2024-01-01; one in 20 up to 30 min late.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut events: Vec<(i64, i64)> = Vec::new();
    for i in 0..301_005i64 {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let late = if (seed >> 33).is_multiple_of(20) {
            ((seed >> 40) % 1_800) as i64
        } else {
            0
        };
        events.push((1_704_067_200 + i * 7 - late, (seed >> 50) as i64 % 1_000));
    }
    let window = |secs: i64| secs - secs.rem_euclid(600);
    let mut want: std::collections::BTreeMap<i64, (i64, i64)> = Default::default();
    for &(t, n) in &events {
        let e = want.entry(window(t)).or_default();
        e.0 += 1;
        e.1 += n;
    }
    let at = |secs: i64| {
        chrono::DateTime::from_timestamp(secs, 0)
            .unwrap()
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    };
    let window_text = |start: i64| format!("{{start: {}, end: {}}}", at(start), at(start + 600));
    for (aggregates, with_sum) in [
        (vec!["count(*) AS c"], false),
        (vec!["count(*) AS c", "sum(n) AS s"], true),
    ] {
        let df = stream("events", "ts TIMESTAMP, n BIGINT")
            .group_by([tumbling_window(col("ts"), "10 minutes")])
            .agg(aggregates)
            .unwrap();
        let mut plan = compile(&df);
        let schema = plan.leaves()[0].schema.clone();
        let mk = |rows: &[(i64, i64)]| {
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(
                        TimestampMicrosecondArray::from(
                            rows.iter().map(|r| r.0 * 1_000_000).collect::<Vec<_>>(),
                        )
                        .with_data_type(schema.field(0).data_type().clone()),
                    ),
                    Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
                ],
            )
            .unwrap()
        };
        let mut last = Vec::new();
        for (id, range) in [0..1_000, 1_000..301_000, 301_000..301_005]
            .into_iter()
            .enumerate()
        {
            let ctx = batch_ctx(id as u64, OutputMode::Complete, None, None);
            let out = run_batch(&mut plan, vec![vec![mk(&events[range])]], &ctx);
            last = sorted(rows(&out.rows));
        }
        let expected: Vec<String> = want
            .iter()
            .map(|(&start, &(c, s))| match with_sum {
                true => format!("{}|{c}|{s}", window_text(start)),
                false => format!("{}|{c}", window_text(start)),
            })
            .collect();
        assert_eq!(last, sorted(expected), "aggregates with sum: {with_sum}");
    }
}

#[test]
fn append_mode_emits_each_closed_window_once() {
    let df = stream("logs", "ts TIMESTAMP, service STRING")
        .with_watermark("ts", "10 minutes")
        .unwrap()
        .group_by([window(col("ts"), "10 minutes", "5 minutes")])
        .count()
        .unwrap();
    let mut plan = compile(&df);
    let b = logs(&plan, &[1, 7], &["a", "a"]);
    let out = run_batch(
        &mut plan,
        vec![vec![b]],
        &batch_ctx(0, OutputMode::Append, Some(0), Some(0)),
    );
    assert!(out.rows.is_empty());
    // Sliding windows: 1 min is in [-5, 5) and [0, 10); 7 min in [0, 10) and [5, 15).
    assert_eq!(out.state_operators[0].num_rows_total, 3);
    let out = run_batch(
        &mut plan,
        vec![vec![]],
        &batch_ctx(1, OutputMode::Append, Some(0), Some(10 * 60_000)),
    );
    assert_eq!(
        sorted(rows(&out.rows)),
        [
            "{start: 1969-12-31T23:55:00Z, end: 1970-01-01T00:05:00Z}|1",
            "{start: 1970-01-01T00:00:00Z, end: 1970-01-01T00:10:00Z}|2"
        ]
    );
    let out = run_batch(
        &mut plan,
        vec![vec![]],
        &batch_ctx(2, OutputMode::Append, Some(10 * 60_000), Some(10 * 60_000)),
    );
    assert!(out.rows.is_empty(), "each window is emitted once");
}

#[test]
fn every_streaming_aggregate_merges_across_batches() {
    let df = stream("logs", "k STRING, n BIGINT")
        .group_by(["k"])
        .agg([
            "count(*) AS c",
            "sum(n) AS s",
            "min(n) AS lo",
            "max(n) AS hi",
            "avg(n) AS a",
            "first(n) AS f",
            "last(n) AS l",
            "approx_count_distinct(n) AS d",
            "collect_list(n) AS all_n",
        ])
        .unwrap();
    let mut plan = compile(&df);
    let mk = |plan: &CompiledPlan, ks: &[&str], ns: &[i64]| {
        RecordBatch::try_new(
            plan.leaves()[0].schema.clone(),
            vec![
                Arc::new(StringArray::from(ks.to_vec())),
                Arc::new(Int64Array::from(ns.to_vec())),
            ],
        )
        .unwrap()
    };
    let update = batch_ctx(0, OutputMode::Update, None, None);
    let b = mk(&plan, &["a", "a", "b"], &[5, 1, 7]);
    let out = run_batch(&mut plan, vec![vec![b]], &update);
    assert_eq!(
        sorted(rows(&out.rows)),
        ["a|2|6|1|5|3.0|5|1|2|[5, 1]", "b|1|7|7|7|7.0|7|7|1|[7]"]
    );
    let b = mk(&plan, &["a", "a"], &[9, 5]);
    let out = run_batch(&mut plan, vec![vec![b]], &update);
    assert_eq!(rows(&out.rows), ["a|4|20|1|9|5.0|5|5|3|[5, 1, 9, 5]"]);
}

#[test]
fn streaming_drop_duplicates_emits_first_rows_only() {
    let df = stream("logs", "id STRING, n BIGINT")
        .drop_duplicates(Some(&["id"]))
        .unwrap();
    let mut plan = compile(&df);
    let mk = |plan: &CompiledPlan, ids: &[&str], ns: &[i64]| {
        RecordBatch::try_new(
            plan.leaves()[0].schema.clone(),
            vec![
                Arc::new(StringArray::from(ids.to_vec())),
                Arc::new(Int64Array::from(ns.to_vec())),
            ],
        )
        .unwrap()
    };
    let b = mk(&plan, &["x", "y", "x"], &[1, 2, 3]);
    let out = run_batch(&mut plan, vec![vec![b]], &BatchContext::default());
    assert_eq!(rows(&out.rows), ["x|1", "y|2"]);
    let b = mk(&plan, &["y", "z"], &[4, 5]);
    let out = run_batch(&mut plan, vec![vec![b]], &BatchContext::default());
    assert_eq!(rows(&out.rows), ["z|5"]);
    assert_eq!(
        plan.stateful_operators(),
        ["0: drop_duplicates [id] state (id STRING)"]
    );
}

#[test]
fn stream_stream_join_matches_rows_across_batches() {
    let a = stream("a", "id BIGINT, x STRING");
    let b = stream("b", "id BIGINT, y STRING");
    let df = a.join_using(&b, ["id"], JoinType::Inner).unwrap();
    let mut plan = compile(&df);
    let mk = |plan: &CompiledPlan, leaf: usize, ids: &[i64], v: &[&str]| {
        RecordBatch::try_new(
            plan.leaves()[leaf].schema.clone(),
            vec![
                Arc::new(Int64Array::from(ids.to_vec())),
                Arc::new(StringArray::from(v.to_vec())),
            ],
        )
        .unwrap()
    };
    let inputs = vec![
        vec![mk(&plan, 0, &[1], &["x1"])],
        vec![mk(&plan, 1, &[2], &["y2"])],
    ];
    let out = run_batch(&mut plan, inputs, &BatchContext::default());
    assert!(out.rows.is_empty());
    // Each new row meets the other side's earlier rows, and the new rows of
    // both sides meet each other once.
    let inputs = vec![
        vec![mk(&plan, 0, &[2, 3], &["x2", "x3"])],
        vec![mk(&plan, 1, &[1, 3], &["y1", "y3"])],
    ];
    let out = run_batch(&mut plan, inputs, &BatchContext::default());
    assert_eq!(sorted(rows(&out.rows)), ["1|x1|y1", "2|x2|y2", "3|x3|y3"]);
    assert_eq!(out.state_operators[0].num_rows_total, 6);
    let df = stream("a", "id BIGINT, x STRING")
        .join_using(
            &stream("b", "id BIGINT, y STRING"),
            ["id"],
            JoinType::LeftAnti,
        )
        .unwrap();
    assert_eq!(
        compile_err(&df).message,
        "flow `f`: a left_anti join of two streams cannot run: a left row can only be emitted once no right row can ever match it"
    );
}

#[test]
fn outer_join_with_static_outer_side_is_refused() {
    let st = batch_source("dim", "id BIGINT, y STRING");
    let df = st
        .join_using(
            &stream("a", "id BIGINT, x STRING"),
            ["id"],
            JoinType::LeftOuter,
        )
        .unwrap();
    assert_eq!(
        compile_err(&df).message,
        "flow `f`: a left_outer join of a static table (left) with a stream (right) cannot run on a stream: the static side's unmatched rows would be emitted again with every batch"
    );
}

#[test]
fn order_by_and_limit_on_a_stream_are_not_supported_yet() {
    let df = stream("a", "id BIGINT").order_by(["id"]).unwrap();
    assert_eq!(
        compile_err(&df).message,
        "flow `f`: order_by on a stream is not supported by this build yet"
    );
    let df = stream("a", "id BIGINT").limit(3).unwrap();
    assert_eq!(
        compile_err(&df).message,
        "flow `f`: limit on a stream is not supported by this build yet"
    );
}

#[test]
fn sliding_window_in_select_is_not_supported_yet() {
    let df = stream("a", "ts TIMESTAMP")
        .select([window(col("ts"), "10 minutes", "5 minutes")])
        .unwrap();
    assert_eq!(
        compile_err(&df).message,
        "flow `f`: a sliding window `window(ts, '10 minutes', '5 minutes')` outside a streaming aggregation is not supported by this build yet"
    );
}

// ---------------------------------------------------------------------------
// Repeated execution, partitions, inputs
// ---------------------------------------------------------------------------

#[test]
fn execute_twice_keeps_no_state() {
    let df = stream("events", EVENTS)
        .filter("level = 'ERROR'")
        .unwrap()
        .select(["msg"])
        .unwrap();
    let mut plan = compile(&df);
    let inputs = vec![vec![events(&plan, 0)]];
    let out1 = run(&mut plan, inputs);
    assert_eq!(rows(&out1), ["a", "c", "e"]);
    let second = batch(
        &plan.leaves()[0].schema,
        vec![strs(&["ERROR"]), i64s(&[9]), strs(&["z"])],
    );
    let inputs = vec![vec![second]];
    let out2 = run(&mut plan, inputs);
    assert_eq!(rows(&out2), ["z"]);
    let inputs = vec![vec![]];
    let out3 = run(&mut plan, inputs);
    assert!(out3.is_empty());
}

#[test]
fn large_input_is_split_across_partitions_in_order() {
    let df = stream("nums", "n BIGINT")
        .filter("n % 3 = 0")
        .unwrap()
        .select_expr(["n + 1 AS m"])
        .unwrap();
    let mut plan = compile(&df);
    let schema = plan.leaves()[0].schema.clone();
    let b1 = batch(&schema, vec![i64s(&(0..150_000).collect::<Vec<_>>())]);
    let b2 = batch(&schema, vec![i64s(&(150_000..200_001).collect::<Vec<_>>())]);
    let inputs = vec![vec![b1, b2]];
    let out = run(&mut plan, inputs);
    let got: Vec<i64> = out
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect();
    let want: Vec<i64> = (0..200_001).filter(|n| n % 3 == 0).map(|n| n + 1).collect();
    assert_eq!(got, want);
}

#[test]
fn wrong_number_of_inputs_is_an_error() {
    let mut plan = compile(&stream("a", "id BIGINT"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let err = rt.block_on(plan.execute(vec![])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "flow `f`: the plan reads 1 input(s) but was given 0"
    );
}

#[test]
fn input_with_wrong_types_is_an_error() {
    let mut plan = compile(&stream("a", "id BIGINT"));
    let bad = RecordBatch::try_from_iter_with_nullable([("id", strs(&["x"]), true)]).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let err = rt.block_on(plan.execute(vec![vec![bad]])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "flow `f`: input 0 (memory source `a`) has columns (id STRING) but the plan expects (id BIGINT)\n  help: give each leaf rows in the schema of CompiledPlan::leaves()"
    );
}

#[test]
fn same_dataframe_read_twice_is_one_leaf() {
    let a = stream("a", "id BIGINT");
    let df = a.union(&a).unwrap();
    let mut plan = compile(&df);
    assert_eq!(plan.leaves().len(), 1);
    let b = batch(&plan.leaves()[0].schema, vec![i64s(&[1, 2])]);
    let inputs = vec![vec![b]];
    let out = run(&mut plan, inputs);
    assert_eq!(sorted(rows(&out)), ["1", "1", "2", "2"]);
}

#[test]
fn dataset_reads_are_leaves_with_catalog_schemas() {
    let s = Session::new();
    let df = s
        .read_stream_table("users")
        .unwrap()
        .filter("country = 'FR'")
        .unwrap();
    let mut plan = compile_with(&df, &dim_catalog());
    let leaf = &plan.leaves()[0];
    assert!(matches!(
        leaf.node.as_ref(),
        pipelines_core::plan::PlanNode::DatasetRead { name, streaming: true, .. } if name == "users"
    ));
    let input = batch(&leaf.schema, vec![i64s(&[1, 2]), strs(&["FR", "DE"])]);
    let inputs = vec![vec![input]];
    let out = run(&mut plan, inputs);
    assert_eq!(rows(&out), ["1|FR"]);
}

/// The names of the columns of leaf `leaf` the plan reads.
fn columns_read(plan: &CompiledPlan, leaf: usize) -> Vec<String> {
    let used = plan.leaf_columns_used();
    plan.leaves()[leaf]
        .schema
        .fields()
        .iter()
        .zip(&used[leaf])
        .filter(|(_, u)| **u)
        .map(|(f, _)| f.name().clone())
        .collect()
}

const WIDE: &str = "ts TIMESTAMP, user_id STRING, service STRING, level STRING, value BIGINT";

#[test]
fn leaf_columns_used_follows_the_plan_through_stateful_operators() {
    // Stateless: what the projection and the filter read.
    let df = stream("wide", WIDE)
        .filter("level = 'ERROR'")
        .unwrap()
        .select(["service", "value"])
        .unwrap();
    assert_eq!(
        columns_read(&compile(&df), 0),
        ["service", "level", "value"]
    );

    // A watermark passes every column on; the aggregation above it reads
    // its keys, its aggregates' arguments and the window's time column.
    let df = stream("wide", WIDE)
        .with_watermark("ts", "10 minutes")
        .unwrap()
        .group_by([tumbling_window(col("ts"), "1 minute"), col("service")])
        .count()
        .unwrap();
    assert_eq!(columns_read(&compile(&df), 0), ["ts", "service"]);

    let df = stream("wide", WIDE)
        .with_watermark("ts", "10 minutes")
        .unwrap()
        .filter("level <> 'INFO'")
        .unwrap()
        .group_by([col("service")])
        .agg([pipelines_core::plan::functions::sum(col("value"))])
        .unwrap();
    assert_eq!(
        columns_read(&compile(&df), 0),
        ["ts", "service", "level", "value"]
    );

    // Deduplication keeps whole rows: every column is read.
    let df = stream("wide", WIDE)
        .drop_duplicates(Some(&["user_id"]))
        .unwrap()
        .select(["service"])
        .unwrap();
    assert_eq!(
        columns_read(&compile(&df), 0),
        ["ts", "user_id", "service", "level", "value"]
    );
}

/// Leaf 0's filter: the names of the columns it reads, and which of
/// `rows` (one column per name, as strings or numbers) it keeps (`None`:
/// the condition is null).
fn leaf_filter(
    plan: &CompiledPlan,
    rows: Vec<ArrayRef>,
) -> Option<(Vec<String>, Vec<Option<bool>>)> {
    let f = plan.leaf_filters().into_iter().next().flatten()?;
    let schema = f.input_schema();
    let names = schema.fields().iter().map(|f| f.name().clone()).collect();
    let input = RecordBatch::try_new(schema, rows).unwrap();
    let kept = f.evaluate(&input).unwrap().iter().collect();
    Some((names, kept))
}

#[test]
fn filters_on_leaf_columns_move_to_the_leaf() {
    // A filter under a projection: its condition, on the leaf's column.
    let df = stream("wide", WIDE)
        .filter("level <> 'INFO'")
        .unwrap()
        .select(["service", "value"])
        .unwrap();
    assert_eq!(
        leaf_filter(
            &compile(&df),
            vec![Arc::new(StringArray::from(vec![
                Some("INFO"),
                Some("WARN"),
                None
            ]))]
        ),
        Some((
            vec!["level".to_string()],
            vec![Some(false), Some(true), None]
        ))
    );

    // Two filters, the upper one above a renaming projection: both, joined
    // by AND, on the leaf's columns.
    let df = stream("wide", WIDE)
        .filter("level <> 'INFO'")
        .unwrap()
        .select_expr(["value AS v", "level"])
        .unwrap()
        .filter("v > 10")
        .unwrap();
    assert_eq!(
        leaf_filter(
            &compile(&df),
            vec![strs(&["WARN", "INFO", "WARN"]), i64s(&[11, 11, 10]),]
        ),
        Some((
            vec!["level".to_string(), "value".to_string()],
            vec![Some(true), Some(false), Some(false)]
        ))
    );

    // Under an aggregation, the filter of the stage reading the leaf moves.
    let df = stream("wide", WIDE)
        .filter("value IS NOT NULL AND NOT (service = 'db')")
        .unwrap()
        .group_by([col("service")])
        .count()
        .unwrap();
    assert_eq!(
        leaf_filter(
            &compile(&df),
            vec![
                strs(&["db", "api", "api"]),
                Arc::new(Int64Array::from(vec![Some(1), Some(2), None]))
            ]
        ),
        Some((
            vec!["service".to_string(), "value".to_string()],
            vec![Some(false), Some(true), Some(false)]
        ))
    );
}

/// One leaf read twice, each time through a filter.
fn leaf_read_twice() -> DataFrame {
    let a = stream("wide", WIDE);
    a.filter("level = 'INFO'")
        .unwrap()
        .union(&a.filter("level = 'WARN'").unwrap())
        .unwrap()
}

#[test]
fn filters_that_a_reader_cannot_apply_stay_in_the_plan() {
    let none = |df: &DataFrame| {
        let mut plan = compile(df);
        plan.push_timestamps_into_leaves();
        plan.leaf_filters()
    };
    // A function call.
    let df = stream("wide", WIDE)
        .filter("upper(level) = 'INFO'")
        .unwrap();
    assert!(none(&df)[0].is_none());
    // A column the leaf gives converted by `to_timestamp`.
    let df = stream("raw", "ts STRING, level STRING")
        .with_column("event_time", "to_timestamp(ts)")
        .unwrap()
        .filter("event_time > TIMESTAMP '2024-01-01 00:00:00'")
        .unwrap()
        .select(["event_time", "level"])
        .unwrap();
    assert!(none(&df)[0].is_none());
    // Above an aggregation: the filter sees the aggregation's rows.
    let df = stream("wide", WIDE)
        .group_by([col("service")])
        .count()
        .unwrap()
        .filter("service <> 'db'")
        .unwrap();
    assert!(none(&df)[0].is_none());
    // A leaf read twice.
    assert!(none(&leaf_read_twice())[0].is_none());
}

#[test]
fn a_filter_its_source_applies_leaves_the_plan() {
    // A filter on the leaf's columns, a renaming projection above it.
    let df = stream("wide", WIDE)
        .filter("value > 10")
        .unwrap()
        .select_expr(["user_id AS u", "service"])
        .unwrap();
    let mut plan = compile(&df);
    plan.push_timestamps_into_leaves();
    let schema = plan.leaves()[0].schema.clone();
    let input = || {
        vec![vec![batch(
            &schema,
            vec![
                ts(&[0, 0, 0, 0]),
                strs(&["a", "b", "c", "d"]),
                strs(&["api", "db", "web", "api"]),
                strs(&["INFO", "INFO", "INFO", "INFO"]),
                i64s(&[11, 12, 5, 10]),
            ],
        )]]
    };
    assert_eq!(rows(&run(&mut plan, input())), ["a|api", "b|db"]);
    let before = plan.schema();
    assert!(plan.drop_leaf_filter(0));
    // `value > 10` is the source's now: rows failing it pass the plan,
    // whose output columns are the same.
    assert_eq!(plan.schema(), before);
    assert_eq!(
        rows(&run(&mut plan, input())),
        ["a|api", "b|db", "c|web", "d|api"]
    );
    // Nothing left to drop.
    assert!(!plan.drop_leaf_filter(0));

    // A condition the source cannot evaluate stays, and so does the
    // filter holding it.
    let df = stream("wide", WIDE)
        .filter("upper(service) <> 'DB' AND value > 10")
        .unwrap();
    let mut plan = compile(&df);
    plan.push_timestamps_into_leaves();
    assert!(!plan.drop_leaf_filter(0));
    assert_eq!(
        rows(&run(&mut plan, input())),
        ["1970-01-01T00:00:00Z|a|api|INFO|11"]
    );

    // A leaf read twice keeps its filters.
    let mut plan = compile(&leaf_read_twice());
    plan.push_timestamps_into_leaves();
    assert!(!plan.drop_leaf_filter(0));
}

/// The names of the columns of leaf 0 a source may give dictionary-encoded.
fn dictionary_columns(plan: &CompiledPlan) -> Vec<String> {
    plan.leaves()[0]
        .schema
        .fields()
        .iter()
        .zip(&plan.leaf_dictionary_columns()[0])
        .filter(|(_, d)| **d)
        .map(|(f, _)| f.name().clone())
        .collect()
}

#[test]
fn leaf_dictionary_columns_are_keys_the_rows_reach_unchanged() {
    let windowed = |df: DataFrame| {
        df.with_watermark("ts", "10 minutes")
            .unwrap()
            .group_by([tumbling_window(col("ts"), "1 minute"), col("service")])
    };
    // The only key beside a window, rows passed on unchanged: yes.
    let df = windowed(stream("wide", WIDE)).count().unwrap();
    assert_eq!(dictionary_columns(&compile(&df)), ["service"]);
    let df = windowed(stream("wide", WIDE))
        .agg([pipelines_core::plan::functions::sum(col("value"))])
        .unwrap();
    assert_eq!(dictionary_columns(&compile(&df)), ["service"]);

    // An aggregate reads the key too; a filter on the way; two keys
    // beside the window; no window: no.
    let none: [&str; 0] = [];
    let df = windowed(stream("wide", WIDE))
        .agg(["max(service) AS m"])
        .unwrap();
    assert_eq!(dictionary_columns(&compile(&df)), none);
    let df = windowed(stream("wide", WIDE).filter("level = 'ERROR'").unwrap())
        .count()
        .unwrap();
    assert_eq!(dictionary_columns(&compile(&df)), none);
    let df = stream("wide", WIDE)
        .with_watermark("ts", "10 minutes")
        .unwrap()
        .group_by([
            tumbling_window(col("ts"), "1 minute"),
            col("service"),
            col("level"),
        ])
        .count()
        .unwrap();
    assert_eq!(dictionary_columns(&compile(&df)), none);
    let df = stream("wide", WIDE)
        .group_by([col("service")])
        .count()
        .unwrap();
    assert_eq!(dictionary_columns(&compile(&df)), none);
}

/// Rows whose key arrives dictionary-encoded aggregate like the same rows
/// with plain strings, late rows included.
#[test]
fn dictionary_encoded_keys_aggregate_like_plain_strings() {
    use arrow::array::{DictionaryArray, Int32Array, StringArray};
    let df = stream("wide", WIDE)
        .with_watermark("ts", "10 minutes")
        .unwrap()
        .group_by([tumbling_window(col("ts"), "1 minute"), col("service")])
        .count()
        .unwrap();
    let minute = 60_000_000i64;
    // Minutes; the last row has no event time (no window: dropped, and the
    // batch takes the general path).
    let times = [
        Some(0),
        Some(1),
        Some(2),
        Some(3),
        Some(90),
        Some(91),
        Some(5),
        None,
    ];
    let services = [
        Some("a"),
        None,
        Some("b"),
        Some("a"),
        Some("b"),
        Some("a"),
        None,
        Some("a"),
    ];
    let make = |plan: &CompiledPlan, range: std::ops::Range<usize>, encoded: bool| {
        let schema = &plan.leaves()[0].schema;
        let n = range.len();
        let service: ArrayRef = if encoded {
            // Keys into a dictionary holding an unused value.
            let values = Arc::new(StringArray::from(vec!["unused", "a", "b"])) as ArrayRef;
            let keys = Int32Array::from_iter(services[range.clone()].iter().map(|s| match s {
                Some("a") => Some(1),
                Some(_) => Some(2),
                None => None,
            }));
            Arc::new(DictionaryArray::new(keys, values))
        } else {
            Arc::new(StringArray::from(services[range.clone()].to_vec()))
        };
        let cols = vec![
            Arc::new(
                TimestampMicrosecondArray::from(
                    times[range.clone()]
                        .iter()
                        .map(|t| t.map(|t| t * minute))
                        .collect::<Vec<_>>(),
                )
                .with_timezone("UTC"),
            ) as ArrayRef,
            strs(&vec!["u"; n]),
            service,
            strs(&vec!["INFO"; n]),
            i64s(&vec![1; n]),
        ];
        let fields: Vec<arrow::datatypes::Field> = schema
            .fields()
            .iter()
            .zip(&cols)
            .map(|(f, c)| f.as_ref().clone().with_data_type(c.data_type().clone()))
            .collect();
        RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), cols).unwrap()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let run_both = |encoded: bool| {
        let mut plan = compile(&df);
        let mut out = Vec::new();
        // Batch 0 sets the watermark to 81 minutes; batch 1's row at minute
        // 5 is late.
        for (id, range) in [(0u64, 0..5), (1, 5..8)] {
            let ctx = BatchContext {
                batch_id: id,
                output_mode: OutputMode::Update,
                watermark_for_late_ms: Some(if id == 0 { 0 } else { 81 * 60_000 }),
                watermark_for_eviction_ms: Some(if id == 0 { 0 } else { 81 * 60_000 }),
                capture_late_rows: true,
                ..BatchContext::default()
            };
            let inputs = vec![vec![make(&plan, range, encoded)]];
            let o = rt.block_on(plan.execute_batch(inputs, &ctx)).unwrap();
            out.push((sorted(rows(&o.rows)), rows(&o.late_rows)));
            // Late rows come back in the declared types.
            for b in &o.late_rows {
                assert_eq!(
                    b.schema().field(2).data_type(),
                    &arrow::datatypes::DataType::Utf8
                );
            }
        }
        out
    };
    let plain = run_both(false);
    // Batch 0: five groups; batch 1: the group at minute 91 (the row at
    // minute 5 is late, the one without time has no window).
    assert_eq!(plain[0].0.len(), 5, "{plain:?}");
    assert_eq!(plain[1].0.len(), 1, "{plain:?}");
    assert_eq!(plain[1].1.len(), 1, "{plain:?}");
    assert_eq!(run_both(true), plain);
}

const STRING_TS: &str = "ts STRING, user_id STRING, level STRING, value BIGINT";

/// Rows of [`STRING_TS`] in `plan`'s leaf 0 schema, `ts` plain or
/// dictionary-encoded (a dictionary shared by both batches, with a value
/// no row uses).
fn string_ts_batches(plan: &CompiledPlan, encoded: bool) -> Vec<RecordBatch> {
    use arrow::array::DictionaryArray;
    let ts = [
        Some("2024-01-01T00:00:07"),
        Some("2024-01-01T00:00:07"),
        Some("2024-02-29 23:59:59.123456789"),
        None,
        Some("not a time"),
        Some("2024-01-01T00:11:00Z"),
    ];
    let values = [
        "unused",
        "2024-01-01T00:00:07",
        "2024-02-29 23:59:59.123456789",
        "not a time",
        "2024-01-01T00:11:00Z",
    ];
    let dictionary = Arc::new(StringArray::from(values.to_vec())) as ArrayRef;
    let level = ["INFO", "WARN", "ERROR", "WARN", "WARN", "ERROR"];
    let schema = &plan.leaves()[0].schema;
    [0..4, 4..6]
        .into_iter()
        .map(|range| {
            let n = range.len();
            let ts_col: ArrayRef = if encoded {
                let keys = Int32Array::from_iter(
                    ts[range.clone()]
                        .iter()
                        .map(|t| t.map(|t| values.iter().position(|v| *v == t).unwrap() as i32)),
                );
                Arc::new(DictionaryArray::new(keys, dictionary.clone()))
            } else {
                Arc::new(StringArray::from(ts[range.clone()].to_vec()))
            };
            let cols = vec![
                ts_col,
                strs(&vec!["u"; n]),
                strs(&level[range.clone()]),
                i64s(&(range.start as i64..range.end as i64).collect::<Vec<_>>()),
            ];
            let fields: Vec<arrow::datatypes::Field> = schema
                .fields()
                .iter()
                .zip(&cols)
                .map(|(f, c)| f.as_ref().clone().with_data_type(c.data_type().clone()))
                .collect();
            RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), cols).unwrap()
        })
        .collect()
}

/// `to_timestamp` of a string column the plan reads only so is computed by
/// the leaf (the physical plan shows it on the slot), whose column may then
/// arrive dictionary-encoded; the rows are those of the plain plan.
#[test]
fn to_timestamp_of_a_leaf_column_is_computed_by_the_leaf() {
    let want = [
        "2024-01-01T00:00:07Z|u|1",
        "2024-02-29T23:59:59.123456Z|u|2",
        "null|u|3",
        "null|u|4",
        "2024-01-01T00:11:00Z|u|5",
    ];
    for conversion in ["to_timestamp(ts)", "CAST(ts AS TIMESTAMP)"] {
        let df = stream("strts", STRING_TS)
            .with_column("event_time", conversion)
            .unwrap()
            .filter("level <> 'INFO'")
            .unwrap()
            .select(["event_time", "user_id", "value"])
            .unwrap();
        let mut plan = compile(&df);
        plan.push_timestamps_into_leaves();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let explain = rt.block_on(plan.explain()).unwrap();
        assert!(
            explain.contains("SlotExec: leaf=0, to_timestamp(0)"),
            "{conversion}: {explain}"
        );
        assert_eq!(dictionary_columns(&plan), ["ts"], "{conversion}");
        for encoded in [false, true] {
            let inputs = vec![string_ts_batches(&plan, encoded)];
            assert_eq!(
                rows(&run(&mut plan, inputs)),
                want,
                "{conversion}, dictionary {encoded}"
            );
        }
    }

    // A pattern is applied by the leaf too.
    let df = stream("strts", STRING_TS)
        .select_expr(["to_timestamp(ts, 'yyyy-MM-dd''T''HH:mm:ss') AS t", "value"])
        .unwrap();
    let mut plan = compile(&df);
    plan.push_timestamps_into_leaves();
    assert_eq!(dictionary_columns(&plan), ["ts"]);
    let inputs = vec![string_ts_batches(&plan, true)];
    assert_eq!(
        rows(&run(&mut plan, inputs)),
        [
            "2024-01-01T00:00:07Z|0",
            "2024-01-01T00:00:07Z|1",
            "null|2",
            "null|3",
            "null|4",
            "null|5"
        ]
    );
}

/// A string column also read otherwise (passed on, compared, converted
/// two ways) stays a string at the leaf.
#[test]
fn a_string_column_read_otherwise_is_not_converted_by_the_leaf() {
    let none: [&str; 0] = [];
    // (plan, rows out: the filter drops the NULL string)
    for (df, want_rows) in [
        (
            stream("strts", STRING_TS)
                .select_expr(["ts", "to_timestamp(ts) AS t"])
                .unwrap(),
            6,
        ),
        (
            stream("strts", STRING_TS)
                .filter("ts <> 'x'")
                .unwrap()
                .select_expr(["to_timestamp(ts) AS t"])
                .unwrap(),
            5,
        ),
        (
            stream("strts", STRING_TS)
                .select_expr(["to_timestamp(ts) AS t", "to_timestamp(ts, 'yyyy') AS y"])
                .unwrap(),
            6,
        ),
    ] {
        let mut plan = compile(&df);
        plan.push_timestamps_into_leaves();
        assert_eq!(dictionary_columns(&plan), none);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let explain = rt.block_on(plan.explain()).unwrap();
        assert!(!explain.contains("to_timestamp(0"), "{explain}");
        let inputs = vec![string_ts_batches(&plan, false)];
        let rows_out: usize = run(&mut plan, inputs).iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows_out, want_rows);
    }
    // The rows of the first: the string and its timestamp side by side.
    let df = stream("strts", STRING_TS)
        .select_expr(["ts", "to_timestamp(ts) AS t"])
        .unwrap();
    let mut plan = compile(&df);
    plan.push_timestamps_into_leaves();
    let inputs = vec![string_ts_batches(&plan, false)];
    assert_eq!(
        rows(&run(&mut plan, inputs))[..3],
        [
            "2024-01-01T00:00:07|2024-01-01T00:00:07Z",
            "2024-01-01T00:00:07|2024-01-01T00:00:07Z",
            "2024-02-29 23:59:59.123456789|2024-02-29T23:59:59.123456Z"
        ]
    );
}

/// A windowed count over an event time converted from a string: the leaf
/// converts it, and dictionary-encoded rows count like plain ones.
#[test]
fn a_windowed_count_over_a_string_event_time_counts_dictionary_rows_alike() {
    let df = stream("strts", STRING_TS)
        .with_column("event_time", "to_timestamp(ts)")
        .unwrap()
        .with_watermark("event_time", "10 minutes")
        .unwrap()
        .group_by([tumbling_window(col("event_time"), "10 minutes")])
        .count()
        .unwrap();
    let counts = |encoded: bool| {
        let mut plan = compile(&df);
        plan.push_timestamps_into_leaves();
        assert_eq!(dictionary_columns(&plan), ["ts"]);
        let ctx = BatchContext {
            output_mode: OutputMode::Update,
            ..BatchContext::default()
        };
        let inputs = vec![string_ts_batches(&plan, encoded)];
        sorted(rows(&run_batch(&mut plan, inputs, &ctx).rows))
    };
    let plain = counts(false);
    assert_eq!(
        plain,
        [
            "{start: 2024-01-01T00:00:00Z, end: 2024-01-01T00:10:00Z}|2",
            "{start: 2024-01-01T00:10:00Z, end: 2024-01-01T00:20:00Z}|1",
            "{start: 2024-02-29T23:50:00Z, end: 2024-03-01T00:00:00Z}|1"
        ]
    );
    assert_eq!(counts(true), plain);
}

/// `batch` with its `columns` given as `Dictionary(Int32, Utf8)`: the values
/// in reverse order of first use after one no row uses, NULL as a NULL key.
fn dictionary_encoded(batch: &RecordBatch, columns: &[&str]) -> RecordBatch {
    use arrow::array::{AsArray, DictionaryArray};
    let schema = batch.schema();
    let mut fields: Vec<arrow::datatypes::Field> =
        schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut arrays = batch.columns().to_vec();
    for name in columns {
        let i = schema.index_of(name).unwrap();
        let strings = arrays[i].as_string::<i32>().clone();
        let mut values: Vec<&str> = Vec::new();
        for s in strings.iter().flatten() {
            if !values.contains(&s) {
                values.push(s);
            }
        }
        values.push("unused");
        values.reverse();
        let keys = Int32Array::from_iter(
            strings
                .iter()
                .map(|s| s.map(|s| values.iter().position(|v| *v == s).unwrap() as i32)),
        );
        let dictionary = Arc::new(StringArray::from(values)) as ArrayRef;
        arrays[i] = Arc::new(DictionaryArray::new(keys, dictionary));
        fields[i] = fields[i]
            .clone()
            .with_data_type(arrays[i].data_type().clone());
    }
    RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), arrays).unwrap()
}

/// The output's types and rows, the plan's schema not checked (dictionaries
/// may pass on where it says `Utf8`).
fn types_and_rows(
    plan: &mut CompiledPlan,
    inputs: Vec<Vec<RecordBatch>>,
) -> (Vec<String>, Vec<String>) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let out = rt.block_on(plan.execute(inputs)).unwrap();
    let types = out
        .first()
        .map(|b| {
            b.schema()
                .fields()
                .iter()
                .map(|f| f.data_type().to_string())
                .collect()
        })
        .unwrap_or_default();
    let schema = plan.schema();
    let want: Vec<&String> = schema.fields().iter().map(|f| f.name()).collect();
    for b in &out {
        let names: Vec<&String> = b.schema_ref().fields().iter().map(|f| f.name()).collect();
        assert_eq!(names, want);
    }
    (types, rows(&out))
}

/// A plan that only compares string columns with literals or passes them
/// on keeps them dictionary-encoded from its leaf to its output, where
/// every input batch has them so; rows are those of plain strings.
#[test]
fn strings_a_stage_only_compares_with_literals_or_passes_on_stay_dictionaries() {
    let df = stream("strts", STRING_TS)
        .with_column("event_time", "to_timestamp(ts)")
        .unwrap()
        .filter("level <> 'INFO'")
        .unwrap()
        .select(["event_time", "user_id", "value"])
        .unwrap();
    let mut plan = compile(&df);
    plan.push_timestamps_into_leaves();
    assert!(plan.pass_dictionaries_to_output());
    assert_eq!(dictionary_columns(&plan), ["ts", "user_id", "level"]);
    let want = [
        "2024-01-01T00:00:07Z|u|1",
        "2024-02-29T23:59:59.123456Z|u|2",
        "null|u|3",
        "null|u|4",
        "2024-01-01T00:11:00Z|u|5",
    ];
    let plain = string_ts_batches(&plan, true);
    let encoded: Vec<RecordBatch> = plain
        .iter()
        .map(|b| dictionary_encoded(b, &["user_id", "level"]))
        .collect();
    let dictionary = "Dictionary(Int32, Utf8)";
    let timestamp = "Timestamp(µs, \"UTC\")";
    assert_eq!(
        types_and_rows(&mut plan, vec![encoded.clone()]),
        (
            vec![
                timestamp.to_string(),
                dictionary.to_string(),
                "Int64".to_string()
            ],
            want.iter().map(|s| s.to_string()).collect()
        )
    );
    // One batch with a plain `level`: the plan decodes the other batch's
    // `level`; `user_id`, a dictionary in both, stays one.
    let mixed = vec![
        encoded[0].clone(),
        dictionary_encoded(&plain[1], &["user_id"]),
    ];
    assert_eq!(
        types_and_rows(&mut plan, vec![mixed]),
        (
            vec![
                timestamp.to_string(),
                dictionary.to_string(),
                "Int64".to_string()
            ],
            want.iter().map(|s| s.to_string()).collect()
        )
    );
    // A plain `user_id` in one batch: decoded everywhere.
    let mixed = vec![
        encoded[0].clone(),
        dictionary_encoded(&plain[1], &["level"]),
    ];
    assert_eq!(
        types_and_rows(&mut plan, vec![mixed]),
        (
            vec![
                timestamp.to_string(),
                "Utf8".to_string(),
                "Int64".to_string()
            ],
            want.iter().map(|s| s.to_string()).collect()
        )
    );
    // And all plain.
    assert_eq!(
        types_and_rows(&mut plan, vec![plain]).1,
        want.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    );

    // A string read otherwise stays a string.
    let none: [&str; 0] = [];
    for (df, dictionaries) in [
        (
            stream("strts", STRING_TS)
                .select_expr(["upper(user_id) AS u", "level"])
                .unwrap(),
            vec!["level"],
        ),
        (
            stream("strts", STRING_TS)
                .filter("user_id = level")
                .unwrap()
                .select(["value"])
                .unwrap(),
            vec![],
        ),
        (
            stream("strts", STRING_TS)
                .filter("user_id LIKE 'u%'")
                .unwrap()
                .select(["user_id", "level"])
                .unwrap(),
            vec!["level"],
        ),
        (
            stream("strts", STRING_TS)
                .group_by([col("level")])
                .count()
                .unwrap(),
            vec![],
        ),
    ] {
        let mut plan = compile(&df);
        plan.push_timestamps_into_leaves();
        assert_eq!(plan.pass_dictionaries_to_output(), !dictionaries.is_empty());
        if dictionaries.is_empty() {
            assert_eq!(dictionary_columns(&plan), none);
        } else {
            assert_eq!(dictionary_columns(&plan), dictionaries);
        }
    }
}

/// Comparisons with literals, NULL tests, AND, OR and NOT give the same
/// rows over dictionary-encoded strings (NULL keys included) as over plain
/// ones.
#[test]
fn dictionary_encoded_strings_filter_and_project_like_plain_strings() {
    let df = stream("tags", "name STRING, tag STRING, n BIGINT")
        .filter("(name >= 'b' OR name IS NULL) AND NOT (tag = 'z') AND tag IS NOT NULL")
        .unwrap()
        .select_expr(["name", "tag", "n", "name = 'a' OR name < 'c' AS early"])
        .unwrap();
    let mut plan = compile(&df);
    plan.push_timestamps_into_leaves();
    assert!(plan.pass_dictionaries_to_output());
    assert_eq!(dictionary_columns(&plan), ["name", "tag"]);
    let names = [
        Some("b"),
        None,
        Some("a"),
        Some("c"),
        Some("b"),
        Some("a"),
        Some("d"),
    ];
    let tags = [
        Some("x"),
        Some("y"),
        None,
        Some("x"),
        Some("z"),
        Some("y"),
        None,
    ];
    let batch = RecordBatch::try_new(
        plan.leaves()[0].schema.clone(),
        vec![
            Arc::new(StringArray::from(names.to_vec())) as ArrayRef,
            Arc::new(StringArray::from(tags.to_vec())),
            i64s(&[1, 2, 3, 4, 5, 6, 7]),
        ],
    )
    .unwrap();
    let want = ["b|x|1|true", "null|y|2|null", "c|x|4|false"];
    let (types, got) = types_and_rows(
        &mut plan,
        vec![vec![dictionary_encoded(&batch, &["name", "tag"])]],
    );
    assert_eq!(got, want);
    assert_eq!(
        types,
        [
            "Dictionary(Int32, Utf8)",
            "Dictionary(Int32, Utf8)",
            "Int64",
            "Boolean"
        ]
    );
    let (types, got) = types_and_rows(&mut plan, vec![vec![batch]]);
    assert_eq!(got, want);
    assert_eq!(types, ["Utf8", "Utf8", "Int64", "Boolean"]);
}

/// `current_timestamp()`, `now()` and `current_date()` give the batch's
/// timestamp, as Spark's `batchTimestampMs`: a new value each batch, the
/// same one again when a batch is replayed with its logged timestamp.
#[test]
fn current_timestamp_is_the_batch_timestamp() {
    let df = stream("clock_in", "id BIGINT")
        .select_expr([
            "id",
            "current_timestamp() AS t",
            "now() AS n",
            "current_date() AS d",
        ])
        .unwrap();
    let mut plan = compile(&df);
    let schema = plan.leaves()[0].schema.clone();
    let day = 86_400_000i64;
    let mut at = |ms: i64| {
        let ctx = BatchContext {
            batch_timestamp_ms: Some(ms),
            ..BatchContext::default()
        };
        let out = run_batch(
            &mut plan,
            vec![vec![batch(&schema, vec![i64s(&[1, 2])])]],
            &ctx,
        );
        rows(&out.rows)
    };
    assert_eq!(
        at(20_000 * day + 5_000),
        [
            "1|2024-10-04T00:00:05|2024-10-04T00:00:05|2024-10-04",
            "2|2024-10-04T00:00:05|2024-10-04T00:00:05|2024-10-04"
        ]
    );
    assert_eq!(
        at(20_001 * day),
        [
            "1|2024-10-05T00:00:00|2024-10-05T00:00:00|2024-10-05",
            "2|2024-10-05T00:00:00|2024-10-05T00:00:00|2024-10-05"
        ]
    );
    assert_eq!(
        at(20_000 * day + 5_000),
        [
            "1|2024-10-04T00:00:05|2024-10-04T00:00:05|2024-10-04",
            "2|2024-10-04T00:00:05|2024-10-04T00:00:05|2024-10-04"
        ]
    );
}
