//! The contract every sink implements.

use std::collections::{BTreeMap, HashMap};

use arrow::array::UInt32Array;
use arrow::compute::take_record_batch;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};

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
    /// Where data goes, resolved against the spec's directory (file sinks
    /// and tables): a local directory or an `s3://` prefix.
    pub path: Option<crate::engine::storage::Location>,
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

/// Keyed changes to apply to a table in one commit: an AUTO CDC flow's
/// micro-batch, computed by `engine::cdc`.
#[derive(Clone, Debug)]
pub struct ChangeSet {
    /// One row per changed target row: the target's columns, then
    /// [`CHANGE_DELETES`] (true: remove the row matching it; false: update
    /// the row matching it, or insert it when none does).
    pub rows: RecordBatch,
    /// The columns that identify a target row (the keys; for SCD type 2 the
    /// keys and `__START_AT`). No two rows of [`rows`](Self::rows) share them.
    pub match_on: Vec<String>,
    /// True when every row inserts a row the table does not hold: an
    /// append does the same as a MERGE.
    pub inserts_only: bool,
}

/// The last column of [`ChangeSet::rows`]: whether the row is a delete.
pub const CHANGE_DELETES: &str = "__cdc_delete";

impl ChangeSet {
    /// The number of changed rows.
    pub fn len(&self) -> usize {
        self.rows.num_rows()
    }

    /// True when nothing changes.
    pub fn is_empty(&self) -> bool {
        self.rows.num_rows() == 0
    }
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

    /// Applies the keyed changes of micro-batch `batch_id` in one commit,
    /// exactly once per `(query id, batch_id)` like
    /// [`add_batch`](Self::add_batch). Only sinks whose connector says
    /// [`applies_changes`](crate::connector::SinkConnector::applies_changes) do.
    fn apply_changes(&mut self, batch_id: u64, changes: ChangeSet) -> Result<SinkWrite> {
        let _ = changes;
        Err(crate::error::Error::runtime(format!(
            "{}: cannot apply keyed changes (batch {batch_id}); AUTO CDC targets a Delta table",
            self.describe()
        )))
    }

    /// Whether the sink holds batch `batch_id` of this query, for sinks
    /// that record their batches (a file sink's manifest); None when it
    /// cannot tell.
    fn has_batch(&self, batch_id: u64) -> Option<bool> {
        let _ = batch_id;
        None
    }

    /// True when [`add_batch`](Self::add_batch) takes a `Utf8` column of
    /// the schema as `Dictionary(Int32, Utf8)` of the same values (some
    /// batches so, some not) and writes the same data: a Parquet file sink
    /// encodes each distinct string once. The runtime then lets string
    /// columns stay dictionary-encoded from the source (see
    /// `CompiledPlan::pass_dictionaries_to_output`).
    fn takes_dictionary_strings(&self) -> bool {
        false
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

/// The batch's rows with one row per key, the last one: an upsert of a
/// batch (a MERGE, `INSERT ... ON CONFLICT`) refuses several rows for one
/// target row, and in update mode the last row of a key is its newest
/// value.
pub fn last_row_per_key(
    batches: &[RecordBatch],
    schema: &SchemaRef,
    keys: &[String],
) -> Result<Vec<RecordBatch>> {
    if batches.is_empty() {
        return Ok(Vec::new());
    }
    let all = arrow::compute::concat_batches(schema, batches)?;
    let options = FormatOptions::default().with_null("\u{0}null");
    let mut last: HashMap<String, u32> = HashMap::new();
    {
        let formatters = keys
            .iter()
            .map(|k| {
                let i = schema.index_of(k)?;
                ArrayFormatter::try_new(all.column(i).as_ref(), &options)
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        for row in 0..all.num_rows() {
            let key = formatters
                .iter()
                .map(|f| f.value(row).to_string())
                .collect::<Vec<_>>()
                .join("\u{1}");
            last.insert(key, row as u32);
        }
    }
    if last.len() == all.num_rows() {
        return Ok(vec![all]);
    }
    let mut rows: Vec<u32> = last.into_values().collect();
    rows.sort_unstable();
    Ok(vec![take_record_batch(&all, &UInt32Array::from(rows))?])
}
