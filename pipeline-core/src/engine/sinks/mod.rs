//! Sink implementations and [`open_sink`], which picks one by format.
//!
//! - [`file`](mod@file): parquet / JSON lines / CSV files, exactly once through the
//!   `_spark_metadata` manifest ([`manifest`], whose [`committed_files`]
//!   readers use to list a table's files);
//! - [`console`]: prints batches like Spark's console sink;
//! - [`memory`]: named in-memory tables ([`memory_table`]);
//! - [`foreach_batch`]: a Rust closure per batch ([`register_foreach_batch`]);
//! - [`delta`](mod@delta): Delta tables (append, complete, MERGE on `merge_keys`), exactly
//!   once through Delta application transactions;
//! - [`kafka`]: one message per row, at least once (idempotent producer).

pub mod console;
pub mod delta;
pub mod file;
pub mod foreach_batch;
pub mod kafka;
pub mod manifest;
pub mod memory;
mod parquet_writer;

pub use console::ConsoleSink;
pub use delta::DeltaSink;
pub use file::FileSink;
pub use foreach_batch::{
    foreach_batch_fn, register_foreach_batch, ForeachBatchFn, ForeachBatchSink,
};
pub use kafka::KafkaSink;
pub use manifest::{committed_files, CommittedFile};
pub use memory::{drop_memory_table, memory_table, MemorySink, MemoryTable};

use crate::engine::sink::{Sink, SinkContext};
use crate::error::{Error, Result};

/// The sink formats this build can write.
pub const SUPPORTED_SINK_FORMATS: &[&str] = &[
    "parquet",
    "json",
    "csv",
    "delta",
    "console",
    "memory",
    "foreach_batch",
    "kafka",
];

/// Opens the sink for `ctx.format`: `parquet`/`json`/`csv` → [`FileSink`],
/// `console` → [`ConsoleSink`] (standard output), `memory` → [`MemorySink`],
/// `foreach_batch` → [`ForeachBatchSink`] with `foreach` or else the closure
/// registered under the sink's name, `delta` → [`DeltaSink`], `kafka` → [`KafkaSink`].
pub fn open_sink(ctx: SinkContext, foreach: Option<ForeachBatchFn>) -> Result<Box<dyn Sink>> {
    let format = crate::formats::normalize_format(&ctx.format);
    let ctx = SinkContext { format, ..ctx };
    Ok(match ctx.format.as_str() {
        "parquet" | "json" | "csv" => Box::new(FileSink::open(&ctx)?),
        "console" => Box::new(ConsoleSink::open(&ctx)?),
        "memory" => Box::new(MemorySink::open(&ctx)?),
        "foreach_batch" => Box::new(ForeachBatchSink::open(&ctx, foreach)?),
        "delta" => Box::new(DeltaSink::open(&ctx)?),
        "kafka" => Box::new(KafkaSink::open(&ctx)?),
        other => {
            let help =
                match crate::formats::did_you_mean(other, SUPPORTED_SINK_FORMATS.iter().copied()) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => format!("use one of {}", SUPPORTED_SINK_FORMATS.join(", ")),
                };
            return Err(Error::runtime_with_help(
                format!(
                    "sink `{}`: format `{other}` is not a known sink format",
                    ctx.name
                ),
                help,
            ));
        }
    })
}
