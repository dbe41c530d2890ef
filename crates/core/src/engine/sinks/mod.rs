//! Sink implementations and [`open_sink`], which picks one by format.
//!
//! - [`file`](mod@file): parquet / JSON lines / CSV files, exactly once through the
//!   `_spark_metadata` manifest ([`manifest`], whose [`committed_files`]
//!   readers use to list a table's files);
//! - [`console`]: prints batches like Spark's console sink;
//! - [`memory`]: named in-memory tables ([`memory_table`]);
//! - [`foreach_batch`]: a Rust closure per batch ([`register_foreach_batch`]).
//!
//! Delta tables and Kafka topics are written by the `pipelines-delta` and
//! `pipelines-kafka` crates.

pub mod console;
pub mod file;
pub mod foreach_batch;
pub mod manifest;
pub mod memory;
mod parquet_dictionary;
mod parquet_writer;

pub use console::ConsoleSink;
pub use file::FileSink;
pub use foreach_batch::{
    foreach_batch_fn, register_foreach_batch, ForeachBatchFn, ForeachBatchSink,
};
pub use manifest::{committed_files, CommittedFile};
pub use memory::{drop_memory_table, memory_table, MemorySink, MemoryTable};

use crate::engine::sink::{Sink, SinkContext};
use crate::error::{Error, Result};

/// Opens the sink for `ctx.format` through its connector (see
/// [`crate::connector`]). A `foreach_batch` sink calls `foreach` when
/// given, else the closure registered under the sink's name.
pub fn open_sink(ctx: SinkContext, foreach: Option<ForeachBatchFn>) -> Result<Box<dyn Sink>> {
    let format = crate::connector::normalize(&ctx.format);
    let ctx = SinkContext { format, ..ctx };
    if let Some(f) = foreach {
        if ctx.format == foreach_batch::FOREACH_BATCH_FORMAT {
            return Ok(Box::new(ForeachBatchSink::open(&ctx, Some(f))?));
        }
    }
    match crate::connector::sink(&ctx.format) {
        Some(connector) => connector.open(&ctx),
        None => {
            let known = crate::connector::sink_names();
            let help = match crate::suggest::closest(&ctx.format, known.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!("use one of {}", known.join(", ")),
            };
            Err(Error::runtime_with_help(
                format!(
                    "sink `{}`: format `{}` is not a known sink format",
                    ctx.name, ctx.format
                ),
                help,
            ))
        }
    }
}
