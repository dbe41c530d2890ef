//! `to_timestamp` and `CAST(... AS TIMESTAMP)` in flows' SQL: Spark's
//! answers (exact microseconds, NULL for what is not a timestamp, never an
//! error), patterns checked when the plan is resolved.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray};
use arrow::datatypes::{DataType, TimeUnit, TimestampMicrosecondType};
use arrow::record_batch::RecordBatch;
use pipelines_core::engine::exec::CompiledPlan;
use pipelines_core::prelude::*;

/// The value of `expr` (SQL) for each string of `input`, as microseconds.
fn eval(expr: &str, input: &[Option<&str>]) -> Vec<Option<i64>> {
    let df = Session::new()
        .read()
        .format("memory")
        .schema("s STRING")
        .load("timestamp_sql_input")
        .unwrap()
        .select_expr([format!("{expr} AS t")])
        .unwrap();
    let resolved = df.resolve(&HashMap::new()).unwrap();
    let mut plan = CompiledPlan::compile("f", &df, &resolved, 1).unwrap();
    let schema = plan.leaves()[0].schema.clone();
    let strings: ArrayRef = Arc::new(StringArray::from(input.to_vec()));
    let batch = RecordBatch::try_new(schema, vec![strings]).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let out = rt.block_on(plan.execute(vec![vec![batch]])).unwrap();
    assert_eq!(
        out[0].schema().field(0).data_type(),
        &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
    );
    let t = out[0].column(0).as_primitive::<TimestampMicrosecondType>();
    (0..t.len())
        .map(|i| t.is_valid(i).then(|| t.value(i)))
        .collect()
}

const SEC: i64 = 1_000_000;
/// 2024-01-01T00:00:00Z.
const JAN1: i64 = 1_704_067_200 * SEC;

#[test]
fn to_timestamp_reads_what_spark_reads_and_nulls_the_rest() {
    let input = [
        Some("2024-01-01T00:00:07"),
        Some("2024-01-01 00:00:07.123456789"),
        Some("2024-01-01T01:00:07+01:00"),
        Some(" 2024-1-1 0:0:7Z "),
        Some("2024-02-30 00:00:00"),
        Some("not a time"),
        Some(""),
        None,
        Some("2024-01-01T00:00:07 Europe/Paris"),
    ];
    let want = vec![
        Some(JAN1 + 7 * SEC),
        Some(JAN1 + 7 * SEC + 123_456),
        Some(JAN1 + 7 * SEC),
        Some(JAN1 + 7 * SEC),
        None,
        None,
        None,
        None,
        Some(JAN1 + 7 * SEC - 3600 * SEC),
    ];
    assert_eq!(eval("to_timestamp(s)", &input), want);
    // CAST of a string follows the same rules (no error on "not a time").
    assert_eq!(eval("CAST(s AS TIMESTAMP)", &input), want);
}

#[test]
fn to_timestamp_with_a_spark_pattern() {
    let input = [
        Some("01/01/2024 00:00:07"),
        Some("1/1/2024 00:00:07"),
        Some("01/01/2024 00:00:07 trailing"),
        Some("31/02/2024 00:00:00"),
    ];
    assert_eq!(
        eval("to_timestamp(s, 'dd/MM/yyyy HH:mm:ss')", &input),
        vec![Some(JAN1 + 7 * SEC), None, None, None]
    );
}

#[test]
fn a_bad_pattern_is_a_plan_error() {
    let df = Session::new()
        .read()
        .format("memory")
        .schema("s STRING")
        .load("timestamp_sql_input")
        .unwrap()
        .select_expr(["to_timestamp(s, 'HH:mm D') AS t"])
        .unwrap();
    let errs = df.resolve(&HashMap::new()).unwrap_err();
    assert_eq!(
        errs[0].message,
        "invalid select `to_timestamp(s, 'HH:mm D') AS t`: to_timestamp pattern `HH:mm D`: the pattern letter `D` (1 in a row) is not supported yet; dates and times are read with y, M, d, H, h, k, K, a, m, s, S and the offsets X, x, Z"
    );
}
