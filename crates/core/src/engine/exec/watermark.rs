//! Event-time watermarks: what each `with_watermark` saw, and the global
//! watermark the next batch uses.
//!
//! As in Spark, the watermark used by batch N is computed from the event
//! times seen in batches before N: each `with_watermark(col, delay)`
//! operator reports the maximum of `col` in its rows, its watermark is
//! that maximum minus `delay`, and the global watermark combines the
//! operators' watermarks by min (default) or max
//! (`spark.sql.streaming.multipleWatermarkPolicy`). An operator that has not
//! seen a row yet does not hold the watermark back. The watermark never
//! moves backwards.

use std::collections::BTreeMap;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use arrow::datatypes::{DataType, TimeUnit, TimestampMicrosecondType};

use crate::error::{Error, Result};

pub use crate::conf::MULTIPLE_WATERMARK_POLICY;

/// How the watermarks of several `with_watermark` operators combine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WatermarkPolicy {
    /// The slowest input decides (Spark's default): no input's rows are
    /// judged late before that input has caught up.
    #[default]
    Min,
    /// The fastest input decides: results come sooner, the slower inputs'
    /// rows may be dropped as late.
    Max,
}

impl WatermarkPolicy {
    /// Reads the policy from a flow's configuration; an unknown value is an
    /// error naming the key and the accepted values.
    pub fn from_conf(flow: &str, conf: &BTreeMap<String, String>) -> Result<WatermarkPolicy> {
        match conf
            .get(MULTIPLE_WATERMARK_POLICY)
            .map(|s| s.trim().to_ascii_lowercase())
        {
            None => Ok(WatermarkPolicy::Min),
            Some(v) if v == "min" => Ok(WatermarkPolicy::Min),
            Some(v) if v == "max" => Ok(WatermarkPolicy::Max),
            Some(v) => Err(Error::runtime_with_help(
                format!("flow `{flow}`: `{MULTIPLE_WATERMARK_POLICY}` is `{v}`"),
                "set it to `min` (default) or `max`",
            )),
        }
    }
}

/// The global watermark of one query.
#[derive(Clone, Debug, Default)]
pub struct WatermarkTracker {
    policy: WatermarkPolicy,
    /// Per `with_watermark` operator: max event time seen minus delay (ms).
    operators: BTreeMap<usize, i64>,
    current_ms: i64,
}

impl WatermarkTracker {
    /// A tracker starting at `current_ms` (0, or the watermark recorded in
    /// the checkpoint).
    pub fn new(policy: WatermarkPolicy, current_ms: i64) -> Self {
        WatermarkTracker {
            policy,
            operators: BTreeMap::new(),
            current_ms,
        }
    }

    /// The watermark now (ms since the epoch).
    pub fn current_ms(&self) -> i64 {
        self.current_ms
    }

    /// Records that operator `op` (with delay `delay_ms`) saw event times up
    /// to `max_event_ms` in a batch.
    pub fn observe(&mut self, op: usize, max_event_ms: i64, delay_ms: i64) {
        let wm = max_event_ms.saturating_sub(delay_ms);
        let e = self.operators.entry(op).or_insert(wm);
        *e = (*e).max(wm);
    }

    /// Moves the watermark forward from what the operators reported (never
    /// backwards); returns the new watermark.
    pub fn advance(&mut self) -> i64 {
        let combined = match self.policy {
            WatermarkPolicy::Min => self.operators.values().copied().min(),
            WatermarkPolicy::Max => self.operators.values().copied().max(),
        };
        if let Some(w) = combined {
            self.current_ms = self.current_ms.max(w);
        }
        self.current_ms
    }
}

/// A timestamp column as microseconds since the epoch (Spark's precision),
/// or None when the column is not a timestamp.
pub(crate) fn timestamp_micros(a: &ArrayRef) -> Option<Int64Array> {
    let DataType::Timestamp(unit, _) = a.data_type() else {
        return None;
    };
    let ints = arrow::compute::cast(a, &DataType::Int64).ok()?;
    let ints = ints.as_any().downcast_ref::<Int64Array>()?.clone();
    let scale = |f: &dyn Fn(i64) -> i64| -> Int64Array { ints.iter().map(|v| v.map(f)).collect() };
    Some(match unit {
        TimeUnit::Second => scale(&|v| v.saturating_mul(1_000_000)),
        TimeUnit::Millisecond => scale(&|v| v.saturating_mul(1000)),
        TimeUnit::Microsecond => ints,
        TimeUnit::Nanosecond => scale(&|v| v.div_euclid(1000)),
    })
}

/// The maximum of a timestamp column in milliseconds (floored), None when
/// it is empty or all null.
pub(crate) fn max_millis(a: &ArrayRef) -> Option<i64> {
    if let Some(us) = a.as_primitive_opt::<TimestampMicrosecondType>() {
        if us.null_count() == 0 {
            // No nulls (most event-time columns): a plain loop the compiler
            // vectorizes, whatever the null buffer says.
            // Eight running maxima: independent compares, no chain.
            let values = us.values();
            let chunks = values.chunks_exact(8);
            let mut lanes = [i64::MIN; 8];
            let rest = chunks.remainder().iter().copied().max();
            for c in chunks {
                for (m, &v) in lanes.iter_mut().zip(c) {
                    *m = (*m).max(v);
                }
            }
            let whole = if values.len() >= 8 {
                lanes.iter().copied().max()
            } else {
                None
            };
            // `None` orders below every value: the larger of the two.
            return whole.max(rest).map(|m| m.div_euclid(1000));
        }
    }
    let micros = timestamp_micros(a)?;
    if micros.null_count() == micros.len() {
        return None;
    }
    arrow::compute::max(&micros).map(|m| m.div_euclid(1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_millis_finds_the_maximum_wherever_it_is() {
        use arrow::array::TimestampMicrosecondArray;
        use std::sync::Arc;
        let max =
            |v: Vec<i64>| max_millis(&(Arc::new(TimestampMicrosecondArray::from(v)) as ArrayRef));
        assert_eq!(max(vec![]), None);
        assert_eq!(max(vec![-5_000, -7_000, -1_500]), Some(-2));
        for len in [7, 8, 9, 16, 23] {
            for at in 0..len {
                let mut v: Vec<i64> = (0..len as i64).map(|i| -1_000_000 - i).collect();
                v[at] = 4_999;
                assert_eq!(max(v), Some(4), "len {len}, maximum at {at}");
            }
        }
    }

    #[test]
    fn min_policy_waits_for_the_slowest_input_that_has_data() {
        let mut t = WatermarkTracker::new(WatermarkPolicy::Min, 0);
        assert_eq!(t.advance(), 0);
        t.observe(0, 100_000, 10_000);
        assert_eq!(t.advance(), 90_000);
        t.observe(1, 50_000, 20_000);
        assert_eq!(t.advance(), 90_000, "never backwards");
        t.observe(0, 200_000, 10_000);
        t.observe(1, 150_000, 20_000);
        assert_eq!(t.advance(), 130_000);
        let mut m = WatermarkTracker::new(WatermarkPolicy::Max, 0);
        m.observe(0, 200_000, 10_000);
        m.observe(1, 150_000, 20_000);
        assert_eq!(m.advance(), 190_000);
    }
}
