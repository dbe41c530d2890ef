//! Window functions and Spark-named aggregates.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, StructArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Fields, TimeUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs};
use pipelines_core::plan::functions::*;

fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

#[test]
fn window_struct_type_follows_time_zone() {
    assert_eq!(
        window_struct_type(&ts_type()),
        Some(DataType::Struct(Fields::from(vec![
            Field::new("start", ts_type(), true),
            Field::new("end", ts_type(), true),
        ])))
    );
    assert_eq!(
        window_struct_type(&DataType::Timestamp(TimeUnit::Millisecond, None)),
        Some(DataType::Struct(Fields::from(vec![
            Field::new(
                "start",
                DataType::Timestamp(TimeUnit::Microsecond, None),
                true
            ),
            Field::new(
                "end",
                DataType::Timestamp(TimeUnit::Microsecond, None),
                true
            ),
        ])))
    );
    assert_eq!(window_struct_type(&DataType::Utf8), None);
}

#[test]
fn recognises_window_calls() {
    let w = window(col("ts"), "10 minutes", "5 minutes");
    let spec = window_call(&w.clone().alias("w")).unwrap();
    assert_eq!(spec.time_column, col("ts"));
    assert_eq!(spec.size, Duration::from_secs(600));
    assert_eq!(spec.slide, Duration::from_secs(300));
    assert_eq!(spec.start, Duration::ZERO);
    assert!(!spec.is_tumbling());
    let t = window_call(&tumbling_window(col("ts"), "1 hour")).unwrap();
    assert!(t.is_tumbling());
    let s = window_call(&window_with_start(
        col("ts"),
        "1 hour",
        "1 hour",
        "15 minutes",
    ))
    .unwrap();
    assert_eq!(s.start, Duration::from_secs(900));
    let sw = session_window_call(&session_window(col("ts"), "5 minutes")).unwrap();
    assert_eq!(sw.gap, Duration::from_secs(300));
    assert_eq!(session_window_call(&w), None);
    assert_eq!(window_call(&col("ts")), None);
    assert_eq!(window_call(&tumbling_window(col("ts"), "bad")), None);
}

#[test]
fn tumbling_window_computes_bounds() {
    let minute = 60_000_000i64;
    let input =
        TimestampMicrosecondArray::from(vec![Some(7 * minute + 5), None, Some(12 * minute)])
            .with_timezone("UTC");
    let ret = window_struct_type(&ts_type()).unwrap();
    let args = ScalarFunctionArgs {
        args: vec![
            ColumnarValue::Array(Arc::new(input)),
            ColumnarValue::Scalar("5 minutes".into()),
        ],
        arg_fields: vec![
            Arc::new(Field::new("ts", ts_type(), true)),
            Arc::new(Field::new("size", DataType::Utf8, false)),
        ],
        number_rows: 3,
        return_field: Arc::new(Field::new("window", ret, true)),
        config_options: Arc::new(ConfigOptions::default()),
    };
    let out = window_udf().invoke_with_args(args).unwrap();
    let ColumnarValue::Array(arr) = out else {
        panic!("expected an array")
    };
    let s = arr.as_any().downcast_ref::<StructArray>().unwrap();
    let start = s
        .column(0)
        .as_any()
        .downcast_ref::<TimestampMicrosecondArray>()
        .unwrap();
    let end = s
        .column(1)
        .as_any()
        .downcast_ref::<TimestampMicrosecondArray>()
        .unwrap();
    assert_eq!(start.value(0), 5 * minute);
    assert_eq!(end.value(0), 10 * minute);
    assert!(s.is_null(1));
    assert_eq!(start.value(2), 10 * minute);
    assert_eq!(end.value(2), 15 * minute);
}

#[test]
fn spark_names() {
    assert_eq!(first(col("x")).schema_name().to_string(), "first(x)");
    assert_eq!(last(col("x")).schema_name().to_string(), "last(x)");
    assert_eq!(
        collect_list(col("x")).schema_name().to_string(),
        "collect_list(x)"
    );
    assert_eq!(
        approx_count_distinct(col("x")).schema_name().to_string(),
        "approx_count_distinct(x)"
    );
    assert_eq!(count_all().schema_name().to_string(), "count");
    assert_eq!(sum(col("x")).schema_name().to_string(), "sum(x)");
}
