//! Column functions: Spark-named aggregates and the streaming time windows.
//!
//! Expressions are DataFusion [`Expr`]s, so every DataFusion function works
//! too; the wrappers here give Spark's names and output column names
//! (`first(x)`, `collect_list(x)`, ...).
//!
//! # Time windows
//!
//! Rust has no overloading, so Spark's `window(...)` forms are separate functions:
//!
//! | Spark | here |
//! | --- | --- |
//! | `window(ts, "10 minutes")` | [`tumbling_window`]`(col("ts"), "10 minutes")` |
//! | `window(ts, "10 minutes", "5 minutes")` | [`window`]`(col("ts"), "10 minutes", "5 minutes")` |
//! | `window(ts, "1 hour", "1 hour", "15 minutes")` | [`window_with_start`]`(col("ts"), "1 hour", "1 hour", "15 minutes")` |
//! | `session_window(ts, "5 minutes")` | [`session_window`]`(col("ts"), "5 minutes")` |
//!
//! In SQL strings (`select_expr`, `filter`, `agg`) the Spark spellings work as
//! is: `window(ts, '10 minutes')`, `window(ts, '10 minutes', '5 minutes')`,
//! `session_window(ts, '5 minutes')`; `INTERVAL '10 minutes'` literals are
//! accepted too.
//!
//! Both are DataFusion scalar functions returning Spark's window struct
//! `STRUCT<start: TIMESTAMP, end: TIMESTAMP>` (microseconds, in the time zone of
//! the time column). Interval texts are checked when the DataFrame operation
//! using the expression is built, so a bad interval fails immediately; a time
//! column that is not a timestamp is reported by [`DataFrame::resolve`](super::DataFrame::resolve).
//! [`window_call`] and [`session_window_call`] recognise the calls for the engine.
//!
//! Evaluating the function computes the window of each row for tumbling
//! windows; sliding windows (one row in several windows) and session windows
//! (merged per key) are expanded by the streaming engine, so evaluating them
//! directly returns a "not implemented" error.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arrow::array::{Array, ArrayRef, Int64Array, StructArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, FieldRef, Fields, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::prelude::Expr;

use crate::duration::{format_interval, parse_interval};
use crate::error::PlanError;

pub use datafusion::prelude::lit;

/// A column by name, keeping its case (`col("userId")`), like Spark's
/// `col`. A dotted name (`"left.user_id"`) refers to a qualified column.
/// Resolution matches names case-insensitively when the match is unique, as
/// Spark does with `spark.sql.caseSensitive=false`.
pub fn col(name: impl Into<String>) -> Expr {
    Expr::Column(datafusion::common::Column::from_qualified_name_ignore_case(
        name,
    ))
}

/// Name of the window function and of the grouping column it produces.
pub const WINDOW_FN: &str = "window";
/// Name of the session window function and of the grouping column it produces.
pub const SESSION_WINDOW_FN: &str = "session_window";

// ---------------------------------------------------------------------------
// Aggregates
// ---------------------------------------------------------------------------

fn spark_alias(e: Expr, spark_fn: &str, arg: &Expr) -> Expr {
    let arg_name = arg.schema_name().to_string();
    e.alias(format!("{spark_fn}({arg_name})"))
}

/// `count(expr)`: the number of non-null values (`BIGINT`), named `count(x)`.
pub fn count(expr: Expr) -> Expr {
    datafusion::functions_aggregate::expr_fn::count(expr)
}

/// `count(*)`: the number of rows (`BIGINT`), named `count` like Spark's
/// `groupBy(...).count()`.
pub fn count_all() -> Expr {
    datafusion::functions_aggregate::expr_fn::count(lit(1i64)).alias("count")
}

/// `count(DISTINCT expr)`, named `count(DISTINCT x)`.
pub fn count_distinct(expr: Expr) -> Expr {
    datafusion::functions_aggregate::expr_fn::count_distinct(expr)
}

/// `sum(expr)`, named `sum(x)`.
pub fn sum(expr: Expr) -> Expr {
    datafusion::functions_aggregate::expr_fn::sum(expr)
}

/// `min(expr)`, named `min(x)`.
pub fn min(expr: Expr) -> Expr {
    datafusion::functions_aggregate::expr_fn::min(expr)
}

/// `max(expr)`, named `max(x)`.
pub fn max(expr: Expr) -> Expr {
    datafusion::functions_aggregate::expr_fn::max(expr)
}

/// `avg(expr)` (`DOUBLE` for numbers), named `avg(x)`.
pub fn avg(expr: Expr) -> Expr {
    datafusion::functions_aggregate::expr_fn::avg(expr)
}

/// `first(expr)`: the first value seen in the group, named `first(x)`.
pub fn first(expr: Expr) -> Expr {
    let f = datafusion::functions_aggregate::expr_fn::first_value(expr.clone(), vec![]);
    spark_alias(f, "first", &expr)
}

/// `last(expr)`: the last value seen in the group, named `last(x)`.
pub fn last(expr: Expr) -> Expr {
    let f = datafusion::functions_aggregate::expr_fn::last_value(expr.clone(), vec![]);
    spark_alias(f, "last", &expr)
}

/// `approx_count_distinct(expr)` (HyperLogLog), named `approx_count_distinct(x)`.
pub fn approx_count_distinct(expr: Expr) -> Expr {
    let f = datafusion::functions_aggregate::expr_fn::approx_distinct(expr.clone());
    spark_alias(f, "approx_count_distinct", &expr)
}

/// `to_timestamp(expr)`: a string as Spark's `CAST(s AS TIMESTAMP)` reads
/// it (NULL when it is not a timestamp), named `to_timestamp(x)`; see
/// [`crate::plan::timestamp`].
pub fn to_timestamp(expr: Expr) -> Expr {
    let name = format!("to_timestamp({})", expr.schema_name());
    crate::plan::timestamp::udf::to_timestamp_udf()
        .call(vec![expr])
        .alias(name)
}

/// `to_timestamp(expr, pattern)` with a Spark datetime pattern such as
/// `"yyyy-MM-dd HH:mm:ss"`, named `to_timestamp(x, pattern)`.
pub fn to_timestamp_with(expr: Expr, pattern: &str) -> Expr {
    let name = format!("to_timestamp({}, {pattern})", expr.schema_name());
    crate::plan::timestamp::udf::to_timestamp_udf()
        .call(vec![expr, lit(pattern)])
        .alias(name)
}

/// `collect_list(expr)`: the group's values as an array, named `collect_list(x)`.
pub fn collect_list(expr: Expr) -> Expr {
    let f = datafusion::functions_aggregate::expr_fn::array_agg(expr.clone());
    spark_alias(f, "collect_list", &expr)
}

// ---------------------------------------------------------------------------
// Windows
// ---------------------------------------------------------------------------

/// A sliding window: rows fall into every `size` long window starting each
/// `slide` (Spark's `window(ts, size, slide)`). The column it produces in a
/// `group_by` is named `window`.
///
/// ```
/// use pipelines_core::plan::functions::{col, window, window_call};
/// let w = window(col("ts"), "10 minutes", "5 minutes");
/// let spec = window_call(&w).unwrap();
/// assert_eq!(spec.size.as_secs(), 600);
/// assert_eq!(spec.slide.as_secs(), 300);
/// ```
pub fn window(time_col: Expr, size: &str, slide: &str) -> Expr {
    window_udf().call(vec![time_col, lit(size), lit(slide)])
}

/// A tumbling window of `size` (Spark's `window(ts, size)`): every row is in
/// exactly one window.
pub fn tumbling_window(time_col: Expr, size: &str) -> Expr {
    window_udf().call(vec![time_col, lit(size)])
}

/// A sliding window whose windows start `start` after each multiple of `slide`
/// (Spark's `window(ts, size, slide, startTime)`).
pub fn window_with_start(time_col: Expr, size: &str, slide: &str, start: &str) -> Expr {
    window_udf().call(vec![time_col, lit(size), lit(slide), lit(start)])
}

/// A session window: a window per key that closes after `gap` without rows
/// (Spark's `session_window(ts, gap)`). The column it produces in a
/// `group_by` is named `session_window`.
pub fn session_window(time_col: Expr, gap: &str) -> Expr {
    session_window_udf().call(vec![time_col, lit(gap)])
}

/// A recognised `window(...)` call.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowSpec {
    /// The event-time column expression.
    pub time_column: Expr,
    /// Window length.
    pub size: Duration,
    /// Distance between window starts (equals `size` for tumbling windows).
    pub slide: Duration,
    /// Offset of window starts from the epoch.
    pub start: Duration,
}

impl WindowSpec {
    /// True when each row falls into exactly one window.
    pub fn is_tumbling(&self) -> bool {
        self.size == self.slide
    }
}

/// A recognised `session_window(...)` call.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionWindowSpec {
    /// The event-time column expression.
    pub time_column: Expr,
    /// Inactivity gap closing a session.
    pub gap: Duration,
}

fn strip_alias(expr: &Expr) -> &Expr {
    match expr {
        Expr::Alias(a) => strip_alias(&a.expr),
        e => e,
    }
}

/// Recognises a `window(...)` call (through aliases) and returns its
/// parameters; None for other expressions or malformed intervals.
pub fn window_call(expr: &Expr) -> Option<WindowSpec> {
    match strip_alias(expr) {
        Expr::ScalarFunction(ScalarFunction { func, args }) if func.name() == WINDOW_FN => {
            let params = window_params(args).ok()?;
            Some(WindowSpec {
                time_column: args[0].clone(),
                size: params[0],
                slide: params[1],
                start: params[2],
            })
        }
        _ => None,
    }
}

/// Recognises a `session_window(...)` call (through aliases).
pub fn session_window_call(expr: &Expr) -> Option<SessionWindowSpec> {
    match strip_alias(expr) {
        Expr::ScalarFunction(ScalarFunction { func, args }) if func.name() == SESSION_WINDOW_FN => {
            let gap = session_params(args).ok()?;
            Some(SessionWindowSpec {
                time_column: args[0].clone(),
                gap,
            })
        }
        _ => None,
    }
}

/// An interval argument given as a literal string or interval literal.
fn interval_arg(e: &Expr, what: &str, func: &str) -> Result<Duration, PlanError> {
    let e = strip_alias(e);
    let scalar = match e {
        Expr::Literal(v, _) => v,
        other => {
            return Err(PlanError::with_help(
                format!("the {what} of `{func}` must be a literal interval, not `{other}`"),
                "write an interval string such as \"10 minutes\"",
            ))
        }
    };
    scalar_interval(scalar, what, func)
}

fn scalar_interval(scalar: &ScalarValue, what: &str, func: &str) -> Result<Duration, PlanError> {
    let bad_kind = || {
        PlanError::with_help(
            format!("the {what} of `{func}` must be an interval string, not `{scalar}`"),
            "write an interval string such as \"10 minutes\"",
        )
    };
    let months_err = || {
        PlanError::with_help(
            format!("the {what} of `{func}` uses months or years, which have no fixed length"),
            "use days, hours, minutes or seconds",
        )
    };
    match scalar {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => parse_interval(s),
        ScalarValue::IntervalMonthDayNano(Some(v)) => {
            if v.months != 0 || v.days < 0 || v.nanoseconds < 0 {
                return Err(months_err());
            }
            Ok(Duration::from_secs(v.days as u64 * 86_400)
                + Duration::from_nanos(v.nanoseconds as u64))
        }
        ScalarValue::IntervalDayTime(Some(v)) => {
            if v.days < 0 || v.milliseconds < 0 {
                return Err(bad_kind());
            }
            Ok(Duration::from_secs(v.days as u64 * 86_400)
                + Duration::from_millis(v.milliseconds as u64))
        }
        ScalarValue::IntervalYearMonth(_) => Err(months_err()),
        _ => Err(bad_kind()),
    }
}

/// `[size, slide, start]` of a window call's arguments.
fn window_params(args: &[Expr]) -> Result<[Duration; 3], PlanError> {
    if !(2..=4).contains(&args.len()) {
        return Err(PlanError::with_help(
            format!("`window` takes 2 to 4 arguments, got {}", args.len()),
            "write window(ts, '10 minutes') or window(ts, '10 minutes', '5 minutes')",
        ));
    }
    let size = interval_arg(&args[1], "window duration", WINDOW_FN)?;
    let slide = match args.get(2) {
        Some(e) => interval_arg(e, "slide duration", WINDOW_FN)?,
        None => size,
    };
    let start = match args.get(3) {
        Some(e) => interval_arg(e, "start time", WINDOW_FN)?,
        None => Duration::ZERO,
    };
    check_window(size, slide, start)?;
    Ok([size, slide, start])
}

fn check_window(size: Duration, slide: Duration, start: Duration) -> Result<(), PlanError> {
    if size.is_zero() {
        return Err(PlanError::with_help(
            "the window duration must be positive",
            "write a duration such as \"10 minutes\"",
        ));
    }
    if slide.is_zero() {
        return Err(PlanError::with_help(
            "the slide duration of `window` must be positive",
            "write a duration such as \"5 minutes\"",
        ));
    }
    if slide > size {
        return Err(PlanError::with_help(
            format!(
                "the slide duration ({}) of `window` is longer than the window duration ({})",
                format_interval(slide),
                format_interval(size)
            ),
            "use a slide no longer than the window; equal values give tumbling windows",
        ));
    }
    if start >= slide {
        return Err(PlanError::with_help(
            format!(
                "the start time ({}) of `window` must be shorter than the slide duration ({})",
                format_interval(start),
                format_interval(slide)
            ),
            "use a start offset smaller than the slide",
        ));
    }
    Ok(())
}

fn session_params(args: &[Expr]) -> Result<Duration, PlanError> {
    if args.len() != 2 {
        return Err(PlanError::with_help(
            format!("`session_window` takes 2 arguments, got {}", args.len()),
            "write session_window(ts, '5 minutes')",
        ));
    }
    let gap = interval_arg(&args[1], "gap duration", SESSION_WINDOW_FN)?;
    if gap.is_zero() {
        return Err(PlanError::with_help(
            "the gap duration of `session_window` must be positive",
            "write a gap such as \"5 minutes\"",
        ));
    }
    Ok(gap)
}

/// Checks the interval arguments of every window call inside `expr`, so a
/// bad interval fails when the DataFrame operation is built.
pub(crate) fn validate_window_args(expr: &Expr) -> Result<(), PlanError> {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    let mut result = Ok(());
    let _ = expr.apply(|e| {
        if let Expr::ScalarFunction(ScalarFunction { func, args }) = e {
            let r = match func.name() {
                WINDOW_FN => window_params(args).map(|_| ()),
                SESSION_WINDOW_FN => session_params(args).map(|_| ()),
                _ => Ok(()),
            };
            if let Err(err) = r {
                result = Err(err);
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    result
}

/// The window struct type for a time column of type `time_type`, or an error
/// when it is not a timestamp.
pub fn window_struct_type(time_type: &DataType) -> Option<DataType> {
    match time_type {
        DataType::Timestamp(_, tz) => {
            let ts = DataType::Timestamp(TimeUnit::Microsecond, tz.clone());
            Some(DataType::Struct(Fields::from(vec![
                Field::new("start", ts.clone(), true),
                Field::new("end", ts, true),
            ])))
        }
        _ => None,
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct WindowUdf {
    name: &'static str,
    signature: Signature,
}

/// The `window` scalar function (registered in the SQL context).
pub fn window_udf() -> Arc<ScalarUDF> {
    static UDF: OnceLock<Arc<ScalarUDF>> = OnceLock::new();
    UDF.get_or_init(|| {
        Arc::new(ScalarUDF::new_from_impl(WindowUdf {
            name: WINDOW_FN,
            signature: Signature::variadic_any(Volatility::Immutable),
        }))
    })
    .clone()
}

/// The `session_window` scalar function (registered in the SQL context).
pub fn session_window_udf() -> Arc<ScalarUDF> {
    static UDF: OnceLock<Arc<ScalarUDF>> = OnceLock::new();
    UDF.get_or_init(|| {
        Arc::new(ScalarUDF::new_from_impl(WindowUdf {
            name: SESSION_WINDOW_FN,
            signature: Signature::variadic_any(Volatility::Immutable),
        }))
    })
    .clone()
}

fn to_df(e: PlanError) -> DataFusionError {
    DataFusionError::Plan(e.message)
}

impl WindowUdf {
    fn durations(&self, scalars: &[Option<&ScalarValue>]) -> DFResult<Option<[Duration; 3]>> {
        let mut ds = Vec::new();
        let names = if self.name == WINDOW_FN {
            ["window duration", "slide duration", "start time"]
        } else {
            ["gap duration", "", ""]
        };
        for (i, s) in scalars.iter().enumerate().skip(1) {
            match s {
                Some(v) => {
                    ds.push(scalar_interval(v, names[(i - 1).min(2)], self.name).map_err(to_df)?)
                }
                None => return Ok(None),
            }
        }
        if self.name == WINDOW_FN {
            let size = ds.first().copied().unwrap_or_default();
            let slide = ds.get(1).copied().unwrap_or(size);
            let start = ds.get(2).copied().unwrap_or_default();
            check_window(size, slide, start).map_err(to_df)?;
            Ok(Some([size, slide, start]))
        } else {
            let gap = ds.first().copied().unwrap_or_default();
            Ok(Some([gap, gap, Duration::ZERO]))
        }
    }

    fn check_arity(&self, n: usize) -> DFResult<()> {
        let ok = if self.name == WINDOW_FN {
            (2..=4).contains(&n)
        } else {
            n == 2
        };
        if ok {
            Ok(())
        } else {
            Err(DataFusionError::Plan(format!(
                "`{}` takes {} arguments, got {n}",
                self.name,
                if self.name == WINDOW_FN {
                    "2 to 4"
                } else {
                    "2"
                }
            )))
        }
    }
}

impl ScalarUDFImpl for WindowUdf {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DFResult<DataType> {
        self.check_arity(arg_types.len())?;
        window_struct_type(&arg_types[0]).ok_or_else(|| {
            DataFusionError::Plan(format!(
                "the time column of `{}` is {}, not a timestamp",
                self.name, arg_types[0]
            ))
        })
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DFResult<FieldRef> {
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let t = self.return_type(&types)?;
        self.durations(args.scalar_arguments)?;
        Ok(Arc::new(Field::new(self.name, t, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DFResult<ColumnarValue> {
        self.check_arity(args.args.len())?;
        if self.name == SESSION_WINDOW_FN {
            return Err(DataFusionError::NotImplemented(
                "session windows are computed by the streaming engine, not row by row".into(),
            ));
        }
        let scalars: Vec<Option<ScalarValue>> = args
            .args
            .iter()
            .map(|a| match a {
                ColumnarValue::Scalar(s) => Some(s.clone()),
                ColumnarValue::Array(_) => None,
            })
            .collect();
        let refs: Vec<Option<&ScalarValue>> = scalars.iter().map(|s| s.as_ref()).collect();
        let Some([size, slide, start]) = self.durations(&refs)? else {
            return Err(DataFusionError::Plan(
                "the durations of `window` must be literals".into(),
            ));
        };
        if size != slide {
            return Err(DataFusionError::NotImplemented(
                "sliding windows are expanded by the streaming engine, not row by row".into(),
            ));
        }
        let ts = args.args[0].to_array(args.number_rows)?;
        let tz = match ts.data_type() {
            DataType::Timestamp(_, tz) => tz.clone(),
            other => {
                return Err(DataFusionError::Plan(format!(
                    "the time column of `window` is {other}, not a timestamp"
                )))
            }
        };
        let micros = arrow::compute::cast(&ts, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
        let micros = arrow::compute::cast(&micros, &DataType::Int64)?;
        let micros = micros
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| DataFusionError::Internal("timestamp cast failed".into()))?;
        let size_us = (size.as_micros() as i64).max(1);
        let start_us = start.as_micros() as i64;
        let starts: Vec<Option<i64>> = micros
            .iter()
            .map(|v| v.map(|t| t.saturating_sub(t.saturating_sub(start_us).rem_euclid(size_us))))
            .collect();
        let ends: Vec<Option<i64>> = starts
            .iter()
            .map(|s| s.map(|s| s.saturating_add(size_us)))
            .collect();
        let start_arr: ArrayRef =
            Arc::new(TimestampMicrosecondArray::from(starts).with_timezone_opt(tz.clone()));
        let end_arr: ArrayRef =
            Arc::new(TimestampMicrosecondArray::from(ends).with_timezone_opt(tz));
        let DataType::Struct(fields) = args.return_type().clone() else {
            return Err(DataFusionError::Internal("window returns a struct".into()));
        };
        let nulls = micros.nulls().cloned();
        let out = StructArray::try_new(fields, vec![start_arr, end_arr], nulls)?;
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}
