//! Spark's rate source: generated rows `timestamp TIMESTAMP, value BIGINT`.
//!
//! Options: `rowsPerSecond` (default 1), `rampUpTime` (e.g. `5s`: the rate
//! grows linearly to `rowsPerSecond` over that time, with Spark's formula),
//! `numPartitions` (each batch is split into that many record batches).
//!
//! Deterministic: value `i` is due at `start + t(i)` where, without ramp-up,
//! `t(i) = i * 1000 / rowsPerSecond` ms (with ramp-up the values of each
//! second are spread evenly over it), and its `timestamp` is that instant.
//! The offset `{"value": N, "time_ms": T}` says the first `N` values were
//! due at `T` (informational); the rows of `(start, end]` are the values
//! `start.value .. end.value`, derived from the offsets alone, so a replay
//! returns the same rows. The start time is kept in `<state_dir>/rate-start.json`,
//! so a restarted query continues where it stopped.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, TimestampMicrosecondArray};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use serde_json::json;

use super::{now_ms, read_state_file, write_atomic, Options};
use crate::engine::source::{Offset, ReadBatch, Source, SourceContext};
use crate::error::{Error, Result};

/// The rate source (see the module documentation).
#[derive(Debug)]
pub struct RateSource {
    schema: SchemaRef,
    rows_per_second: u64,
    ramp_up_secs: u64,
    num_partitions: usize,
    start_ms: i64,
    /// Available-now runs: the value due when the run started.
    cap: Option<u64>,
    /// Clock, replaceable in tests.
    clock: fn() -> i64,
}

impl RateSource {
    /// Opens a rate source; the start time is read from (or written to)
    /// `ctx.state_dir`.
    pub fn open(schema: SchemaRef, options: Options, ctx: SourceContext) -> Result<RateSource> {
        let rows_per_second = options.positive("rowsPerSecond")?.unwrap_or(1);
        let num_partitions = options.positive("numPartitions")?.unwrap_or(1) as usize;
        let ramp_up_secs = match options.get("rampUpTime") {
            None => 0,
            Some(v) => {
                let t = v.trim();
                match t.trim_end_matches('s').trim().parse::<u64>() {
                    Ok(n) => n,
                    Err(_) => crate::duration::parse_interval(t)
                        .map_err(|e| {
                            Error::runtime_with_help(
                                format!(
                                    "rate source option `rampUpTime` has an invalid value `{v}`: {}",
                                    e.message
                                ),
                                "use a duration such as \"5s\"",
                            )
                        })?
                        .as_secs(),
                }
            }
        };
        let start_ms = start_time(&ctx)?;
        Ok(RateSource {
            schema,
            rows_per_second,
            ramp_up_secs,
            num_partitions,
            start_ms,
            cap: None,
            clock: now_ms,
        })
    }

    /// The start time of the stream (ms since the epoch).
    pub fn start_time_ms(&self) -> i64 {
        self.start_ms
    }

    /// Replaces the clock (ms since the epoch); for tests.
    pub fn with_clock(mut self, clock: fn() -> i64) -> Self {
        self.clock = clock;
        self
    }

    /// Values emitted by the end of second `s` (Spark's `valueAtSecond`).
    fn value_at_second(&self, s: u64) -> u64 {
        let rps = self.rows_per_second as u128;
        let ramp = self.ramp_up_secs as u128;
        let s = s as u128;
        let v = if ramp == 0 {
            s * rps
        } else {
            let delta = rps / (ramp + 1);
            if s <= ramp {
                s * (s + 1) / 2 * delta
            } else {
                let ramp_part = ramp * (ramp + 1) / 2 * delta;
                ramp_part + (s - ramp) * rps
            }
        };
        v.min(u64::MAX as u128) as u64
    }

    /// The second during which value `i` is due.
    fn second_of(&self, i: u64) -> u64 {
        let ramp_end = self.value_at_second(self.ramp_up_secs);
        if i >= ramp_end {
            return self.ramp_up_secs + (i - ramp_end) / self.rows_per_second;
        }
        // Binary search in the ramp-up: the last s with v(s) <= i.
        let (mut lo, mut hi) = (0u64, self.ramp_up_secs);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if self.value_at_second(mid) <= i {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }

    /// Number of values due `elapsed_ms` after the start.
    fn due(&self, elapsed_ms: i64) -> u64 {
        if elapsed_ms <= 0 {
            return 0;
        }
        let s = (elapsed_ms / 1000) as u64;
        let r = (elapsed_ms % 1000) as u128;
        let v0 = self.value_at_second(s);
        let n = (self.value_at_second(s + 1) - v0) as u128;
        v0 + (r * n).div_ceil(1000) as u64
    }

    fn parse_offset(&self, o: &Offset) -> Result<u64> {
        o.get("value")
            .and_then(|v| v.as_u64())
            .or_else(|| o.as_u64())
            .ok_or_else(|| {
                Error::runtime_with_help(
                    format!("offset `{o}` is not a rate source offset (expected {{\"value\": N}})"),
                    "the checkpoint belongs to a different query: use a new checkpoint location",
                )
            })
    }

    fn build(&self, from: u64, to: u64) -> Result<Vec<RecordBatch>> {
        let total = (to - from) as usize;
        let per = total
            .div_ceil(self.num_partitions.max(1))
            .clamp(1, super::parse::BATCH_ROWS);
        let mut out = Vec::new();
        let mut s = self.second_of(from);
        let mut v0 = self.value_at_second(s);
        let mut v1 = self.value_at_second(s + 1);
        let mut i = from;
        while i < to {
            let end = (i + per as u64).min(to);
            let mut ts = Vec::with_capacity((end - i) as usize);
            for v in i..end {
                while v >= v1 {
                    s += 1;
                    v0 = v1;
                    v1 = self.value_at_second(s + 1);
                }
                let rel = s as i64 * 1000 + ((v - v0) as u128 * 1000 / (v1 - v0) as u128) as i64;
                ts.push((self.start_ms + rel) * 1000);
            }
            let values: ArrayRef = Arc::new(Int64Array::from_iter_values(i as i64..end as i64));
            let mut cols = Vec::with_capacity(self.schema.fields().len());
            for (idx, f) in self.schema.fields().iter().enumerate() {
                let is_ts = f.name().eq_ignore_ascii_case("timestamp")
                    || (idx == 0 && !f.name().eq_ignore_ascii_case("value"));
                let col: ArrayRef = if is_ts {
                    let tz = match f.data_type() {
                        DataType::Timestamp(_, tz) => tz.clone(),
                        _ => None,
                    };
                    let a: ArrayRef =
                        Arc::new(TimestampMicrosecondArray::from(ts.clone()).with_timezone_opt(tz));
                    conform(a, f.data_type())?
                } else {
                    conform(values.clone(), f.data_type())?
                };
                cols.push(col);
            }
            out.push(RecordBatch::try_new(self.schema.clone(), cols)?);
            i = end;
        }
        Ok(out)
    }
}

fn conform(a: ArrayRef, dt: &DataType) -> Result<ArrayRef> {
    if a.data_type() == dt {
        return Ok(a);
    }
    Ok(cast_with_options(&a, dt, &CastOptions::default())?)
}

fn start_time(ctx: &SourceContext) -> Result<i64> {
    let path = ctx.state_dir.join("rate-start.json");
    if let Some(text) = read_state_file(&path)? {
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::checkpoint(path.shown(), format!("not JSON: {e}")))?;
        return v
            .get("startTimeMs")
            .and_then(|t| t.as_i64())
            .ok_or_else(|| Error::checkpoint(path.shown(), "no `startTimeMs`"));
    }
    let now = now_ms();
    write_atomic(&path, json!({ "startTimeMs": now }).to_string().as_bytes())?;
    Ok(now)
}

impl Source for RateSource {
    fn describe(&self) -> String {
        format!("rate source ({} rows/s)", self.rows_per_second)
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn prepare_available_now(&mut self) -> Result<()> {
        self.cap = Some(self.due((self.clock)() - self.start_ms));
        Ok(())
    }

    fn latest_offset(&mut self, start: Option<&Offset>) -> Result<Option<Offset>> {
        let from = match start {
            None => 0,
            Some(o) => self.parse_offset(o)?,
        };
        let now = (self.clock)();
        let mut due = self.due(now - self.start_ms);
        if let Some(cap) = self.cap {
            due = due.min(cap);
        }
        if due <= from {
            return Ok(None);
        }
        Ok(Some(json!({ "value": due, "time_ms": now })))
    }

    fn read(&mut self, start: Option<&Offset>, end: &Offset) -> Result<ReadBatch> {
        let from = match start {
            None => 0,
            Some(o) => self.parse_offset(o)?,
        };
        let to = self.parse_offset(end)?;
        if to <= from {
            return Ok(ReadBatch::default());
        }
        Ok(ReadBatch {
            batches: self.build(from, to)?,
            bytes: 0,
            malformed_dropped: 0,
            corrupt_files_skipped: 0,
            rows_filtered: 0,
        })
    }
}
