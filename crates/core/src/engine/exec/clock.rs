//! `current_timestamp()` / `now()` and `current_date()` in a stream, as
//! Spark evaluates them: the batch's timestamp (`batchTimestampMs` of
//! `offsets/N`), the same for every row of the batch and again when the
//! batch is replayed after a crash. DataFusion would fold them to one
//! constant when the flow's plan is optimized, once per run; each stage's
//! plan has them replaced by [`BatchClock`] functions reading the time the
//! runtime sets before each batch.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::ScalarValue;
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    ColumnarValue, Expr, LogicalPlan, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};

/// The batch time of one compiled plan, in milliseconds since the epoch.
#[derive(Clone, Debug, Default)]
pub(crate) struct Clock(Arc<AtomicI64>);

impl Clock {
    /// Sets the time the next batch's rows see.
    pub(crate) fn set(&self, ms: i64) {
        self.0.store(ms, Ordering::SeqCst);
    }

    /// `plan` with every `now()` / `current_timestamp()` / `current_date()`
    /// reading this clock.
    pub(crate) fn rewrite(&self, plan: LogicalPlan) -> DFResult<LogicalPlan> {
        plan.transform_up_with_subqueries(|p| {
            p.map_expressions(|e| e.transform_up(|e| self.replace(e)))
        })
        .map(|t| t.data)
    }

    fn replace(&self, e: Expr) -> DFResult<Transformed<Expr>> {
        let Expr::ScalarFunction(ScalarFunction { func, args }) = &e else {
            return Ok(Transformed::no(e));
        };
        if !args.is_empty() || !matches!(func.name(), "now" | "current_date") {
            return Ok(Transformed::no(e));
        }
        let out = func
            .return_field_from_args(ReturnFieldArgs {
                arg_fields: &[],
                scalar_arguments: &[],
            })?
            .data_type()
            .clone();
        if !matches!(
            out,
            DataType::Timestamp(TimeUnit::Nanosecond, _) | DataType::Date32
        ) {
            return Ok(Transformed::no(e));
        }
        let udf = ScalarUDF::new_from_impl(BatchClock {
            name: func.name().to_string(),
            out,
            clock: self.clone(),
            signature: Signature::nullary(Volatility::Volatile),
        });
        Ok(Transformed::yes(
            Expr::ScalarFunction(ScalarFunction::new_udf(Arc::new(udf), vec![]))
                .alias(e.schema_name().to_string()),
        ))
    }
}

/// `now()` or `current_date()` reading a [`Clock`].
#[derive(Debug)]
struct BatchClock {
    name: String,
    out: DataType,
    clock: Clock,
    signature: Signature,
}

impl PartialEq for BatchClock {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && Arc::ptr_eq(&self.clock.0, &other.clock.0)
    }
}

impl Eq for BatchClock {}

impl Hash for BatchClock {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
        (Arc::as_ptr(&self.clock.0) as usize).hash(state);
    }
}

impl ScalarUDFImpl for BatchClock {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DFResult<DataType> {
        Ok(self.out.clone())
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DFResult<ColumnarValue> {
        let ms = self.clock.0.load(Ordering::SeqCst);
        Ok(ColumnarValue::Scalar(match &self.out {
            DataType::Timestamp(_, tz) => {
                ScalarValue::TimestampNanosecond(ms.checked_mul(1_000_000), tz.clone())
            }
            _ => ScalarValue::Date32(Some(ms.div_euclid(86_400_000) as i32)),
        }))
    }
}
