//! The foreach-batch sink: hands each micro-batch to a Rust closure
//! (Spark's `foreachBatch`).
//!
//! Delivery is at least once: when the closure returns an error the batch
//! fails and the runtime replays it with the same batch id and rows; a
//! crash after the closure succeeded but before the batch was committed also
//! replays it. Closures that must not apply a batch twice should record the
//! batch ids they have applied (or write idempotently, keyed by batch id).
//!
//! A sink declared in the spec with `format: foreach_batch` gets its closure
//! from a process-wide registry; register it in `main` before running:
//!
//! ```no_run
//! use pipelines_core::engine::sinks::register_foreach_batch;
//! register_foreach_batch("alerts", |rows, batch_id| {
//!     println!("batch {batch_id}: {} record batches", rows.len());
//!     Ok(())
//! });
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use arrow::record_batch::RecordBatch;

use crate::engine::sink::{Sink, SinkContext, SinkWrite};
use crate::error::{Error, Result};
use crate::formats::OutputMode;

/// The closure of a foreach-batch sink: called with the batch's rows and
/// its batch id; an error fails the batch.
pub type ForeachBatchFn = Arc<dyn Fn(&[RecordBatch], u64) -> Result<()> + Send + Sync>;

fn registry() -> MutexGuard<'static, HashMap<String, ForeachBatchFn>> {
    static FNS: OnceLock<Mutex<HashMap<String, ForeachBatchFn>>> = OnceLock::new();
    FNS.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Registers the closure of the foreach-batch sink `sink_name` (replacing
/// any earlier one).
pub fn register_foreach_batch<F>(sink_name: &str, f: F)
where
    F: Fn(&[RecordBatch], u64) -> Result<()> + Send + Sync + 'static,
{
    registry().insert(sink_name.to_string(), Arc::new(f));
}

/// The closure registered for the foreach-batch sink `sink_name`.
pub fn foreach_batch_fn(sink_name: &str) -> Option<ForeachBatchFn> {
    registry().get(sink_name).cloned()
}

/// The format name of the foreach-batch sink.
pub const FOREACH_BATCH_FORMAT: &str = "foreach_batch";

/// A sink calling a closure with each batch.
pub struct ForeachBatchSink {
    name: String,
    f: ForeachBatchFn,
}

impl ForeachBatchSink {
    /// Opens the sink with `f`, or else the closure registered under the
    /// sink's name; an error when there is neither.
    pub fn open(ctx: &SinkContext, f: Option<ForeachBatchFn>) -> Result<ForeachBatchSink> {
        let f = match f.or_else(|| foreach_batch_fn(&ctx.name)) {
            Some(f) => f,
            None => {
                return Err(Error::runtime_with_help(
                    format!(
                        "sink `{}` has format `foreach_batch` but no function is registered for it",
                        ctx.name
                    ),
                    format!(
                        "in main, before running the pipeline, call \
                         `pipelines_core::engine::sinks::register_foreach_batch(\"{}\", |rows, batch_id| {{ ...; Ok(()) }})`",
                        ctx.name
                    ),
                ))
            }
        };
        Ok(ForeachBatchSink {
            name: ctx.name.clone(),
            f,
        })
    }
}

impl Sink for ForeachBatchSink {
    fn describe(&self) -> String {
        format!("foreach_batch sink `{}`", self.name)
    }

    fn add_batch(
        &mut self,
        batch_id: u64,
        batches: Vec<RecordBatch>,
        _mode: OutputMode,
    ) -> Result<SinkWrite> {
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        (self.f)(&batches, batch_id).map_err(|e| {
            Error::runtime_with_help(
                format!(
                    "sink `{}`: the foreach_batch function failed on batch {batch_id}: {e}",
                    self.name
                ),
                "the batch will be retried with the same rows; fix the function's error",
            )
        })?;
        Ok(SinkWrite {
            rows: rows as u64,
            ..SinkWrite::default()
        })
    }
}
