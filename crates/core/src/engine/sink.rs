//! The contract every sink implements.

use std::collections::BTreeMap;
use std::path::PathBuf;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use crate::error::Result;
use crate::formats::OutputMode;

/// What a sink is given when it is opened.
#[derive(Clone, Debug)]
pub struct SinkContext {
    /// The sink's or table's name.
    pub name: String,
    /// Normalised format (`parquet`, `console`, ...).
    pub format: String,
    /// Options (Spark option names), with `${ENV}` already resolved.
    pub options: BTreeMap<String, String>,
    /// Where data goes, resolved against the spec's directory (file sinks and tables).
    pub path: Option<PathBuf>,
    /// Partition columns (file sinks: `partitionBy`).
    pub partition_cols: Vec<String>,
    /// Key columns that make a Delta sink an upsert target (one MERGE per
    /// batch); empty for every other sink.
    pub merge_keys: Vec<String>,
    /// The schema of the rows the flow writes.
    pub schema: SchemaRef,
    /// The writing flow's name, for messages.
    pub flow: String,
    /// The writing flow's query id (stable for its checkpoint): with the
    /// batch id it identifies a write, so a replay can be recognised.
    pub query_id: String,
}

/// What a sink reports after writing a batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SinkWrite {
    /// Rows written (0 when the batch was already written and skipped).
    pub rows: u64,
    /// Files written.
    pub files: u64,
    /// Bytes written.
    pub bytes: u64,
    /// True when the batch had been written before and was skipped (replay).
    pub skipped_replay: bool,
}

/// A sink.
pub trait Sink: Send {
    /// A short description, e.g. "parquet sink `out` at /data/out".
    fn describe(&self) -> String;

    /// Writes the result of micro-batch `batch_id` in `mode`. Exactly-once
    /// sinks recognise a replayed `(query id, batch_id)` and skip it;
    /// at-least-once sinks document it.
    fn add_batch(
        &mut self,
        batch_id: u64,
        batches: Vec<RecordBatch>,
        mode: OutputMode,
    ) -> Result<SinkWrite>;

    /// Whether the sink holds batch `batch_id` of this query, for sinks
    /// that record their batches (a file sink's manifest); None when it
    /// cannot tell.
    fn has_batch(&self, batch_id: u64) -> Option<bool> {
        let _ = batch_id;
        None
    }

    /// Real-time mode: true when the sink takes rows as they are produced
    /// ([`add_rows`](Self::add_rows)) and makes them durable once per epoch
    /// ([`commit_epoch`](Self::commit_epoch)). The formats that do are
    /// those whose connector says [`RealTime::Supported`](crate::connector::RealTime::Supported).
    fn supports_real_time(&self) -> bool {
        false
    }

    /// Real-time mode starts: tune for latency (the Kafka sink sends each
    /// message at once instead of lingering). Called before the first
    /// [`add_rows`](Self::add_rows).
    fn start_real_time(&mut self) -> Result<()> {
        Ok(())
    }

    /// Real-time mode: writes rows produced during epoch `epoch` at once;
    /// called many times per epoch. Returns the rows written. An epoch run
    /// again after a crash starts over: a sink that can, replaces what the
    /// failed attempt wrote for it.
    fn add_rows(&mut self, epoch: u64, batches: Vec<RecordBatch>, mode: OutputMode) -> Result<u64> {
        let _ = (batches, mode);
        Err(crate::error::Error::runtime(format!(
            "{}: cannot take rows in real-time mode (epoch {epoch})",
            self.describe()
        )))
    }

    /// Real-time mode: epoch `epoch` ends. Every row given to
    /// [`add_rows`](Self::add_rows) since the last epoch must be durable
    /// (delivered) before this returns; an error fails the epoch, which is
    /// then run again from the previous one.
    fn commit_epoch(&mut self, epoch: u64) -> Result<()> {
        let _ = epoch;
        Ok(())
    }
}
