//! The memory sink: a process-wide registry of named in-memory tables, for
//! tests and notebooks (Spark's `format("memory")`).
//!
//! The table is named by the sink's `queryName` option, else the sink's
//! name; [`memory_table`] returns a handle to it. Per output mode:
//! - `append`: the batch's rows are added;
//! - `update`: the batch's changed rows are added as they come (the table is
//!   a log of updates, as in Spark's memory sink; it is not merged by key);
//! - `complete`: the batch's rows replace the whole table.
//!
//! Writing a batch id again (a replay after a failure) replaces the rows that
//! batch wrote before, so replays are idempotent. A real-time flow writes
//! an entry per step, each with its epoch's id; an epoch run again after a
//! crash first removes what the failed attempt wrote. Entries are kept per
//! writing query, so several flows may write one memory table. Opening a
//! sink keeps an existing table of that name (so a restarted query adds to
//! it); call [`drop_memory_table`] for a fresh one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use crate::engine::sink::{Sink, SinkContext, SinkWrite};
use crate::error::Result;
use crate::formats::OutputMode;
use crate::options::Options;

#[derive(Debug)]
struct Entry {
    query_id: String,
    batch_id: u64,
    rows: Vec<RecordBatch>,
    written_at: Instant,
}

#[derive(Debug)]
struct Inner {
    schema: SchemaRef,
    entries: Vec<Entry>,
}

/// A handle to a named in-memory table (cheap to clone; sees later writes).
#[derive(Clone, Debug)]
pub struct MemoryTable {
    name: String,
    inner: Arc<Mutex<Inner>>,
}

impl MemoryTable {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent data (every
        // change is a single push/replace), so recover from poisoning.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The schema of the rows written to it.
    pub fn schema(&self) -> SchemaRef {
        self.lock().schema.clone()
    }

    /// All rows, in the order batches were written.
    pub fn rows(&self) -> Vec<RecordBatch> {
        self.lock()
            .entries
            .iter()
            .flat_map(|e| e.rows.iter().cloned())
            .collect()
    }

    /// Total number of rows.
    pub fn num_rows(&self) -> usize {
        self.lock()
            .entries
            .iter()
            .flat_map(|e| e.rows.iter())
            .map(|b| b.num_rows())
            .sum()
    }

    /// The rows of each batch as `(batch id, rows)`, in the order written.
    /// A real-time flow writes many entries per epoch, each with the epoch's id.
    pub fn batches_by_id(&self) -> Vec<(u64, Vec<RecordBatch>)> {
        self.lock()
            .entries
            .iter()
            .map(|e| (e.batch_id, e.rows.clone()))
            .collect()
    }

    /// Every write as `(batch id, when it was written, rows)`, in the order
    /// written: the latency benchmark measures delivery with it.
    pub fn writes(&self) -> Vec<(u64, Instant, Vec<RecordBatch>)> {
        self.lock()
            .entries
            .iter()
            .map(|e| (e.batch_id, e.written_at, e.rows.clone()))
            .collect()
    }
}

fn registry() -> MutexGuard<'static, HashMap<String, MemoryTable>> {
    static TABLES: OnceLock<Mutex<HashMap<String, MemoryTable>>> = OnceLock::new();
    TABLES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// The in-memory table `name`, if a memory sink has created it.
pub fn memory_table(name: &str) -> Option<MemoryTable> {
    registry().get(name).cloned()
}

/// Removes the in-memory table `name`; returns whether it existed. Handles
/// already taken keep their rows.
pub fn drop_memory_table(name: &str) -> bool {
    registry().remove(name).is_some()
}

/// A sink writing to a named in-memory table.
pub struct MemorySink {
    sink_name: String,
    query_id: String,
    table: MemoryTable,
    /// Real-time mode: the epoch this sink has started writing.
    epoch: Option<u64>,
}

impl MemorySink {
    /// Opens the sink, creating its table (named by option `queryName`, else
    /// the sink's name) when it does not exist yet.
    pub fn open(ctx: &SinkContext) -> Result<MemorySink> {
        let name = Options::for_sink(&ctx.options, &ctx.name)
            .get("queryName")
            .map(str::to_string)
            .unwrap_or_else(|| ctx.name.clone());
        let table = registry()
            .entry(name.clone())
            .or_insert_with(|| MemoryTable {
                name,
                inner: Arc::new(Mutex::new(Inner {
                    schema: ctx.schema.clone(),
                    entries: Vec::new(),
                })),
            })
            .clone();
        Ok(MemorySink {
            sink_name: ctx.name.clone(),
            query_id: ctx.query_id.clone(),
            table,
            epoch: None,
        })
    }

    /// The table this sink writes.
    pub fn table(&self) -> &MemoryTable {
        &self.table
    }
}

impl Sink for MemorySink {
    fn describe(&self) -> String {
        format!(
            "memory sink `{}` (table `{}`)",
            self.sink_name, self.table.name
        )
    }

    fn add_batch(
        &mut self,
        batch_id: u64,
        batches: Vec<RecordBatch>,
        mode: OutputMode,
    ) -> Result<SinkWrite> {
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        let mut inner = self.table.lock();
        // A replayed batch replaces what it wrote before (a real-time epoch
        // may have written several entries with its id).
        let at = self.remove_batch(&mut inner, batch_id);
        self.push(&mut inner, batch_id, batches, mode, at);
        Ok(SinkWrite {
            rows: rows as u64,
            ..SinkWrite::default()
        })
    }

    fn supports_real_time(&self) -> bool {
        true
    }

    fn add_rows(&mut self, epoch: u64, batches: Vec<RecordBatch>, mode: OutputMode) -> Result<u64> {
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        let mut inner = self.table.lock();
        if self.epoch != Some(epoch) {
            // An epoch run again after a crash starts over.
            self.epoch = Some(epoch);
            self.remove_batch(&mut inner, epoch);
        }
        if rows > 0 || mode == OutputMode::Complete {
            self.push(&mut inner, epoch, batches, mode, None);
        }
        Ok(rows as u64)
    }
}

impl MemorySink {
    /// Removes what this query wrote for `batch_id`; returns where its
    /// first entry was.
    fn remove_batch(&self, inner: &mut Inner, batch_id: u64) -> Option<usize> {
        let mine = |e: &Entry| e.query_id == self.query_id && e.batch_id == batch_id;
        let at = inner.entries.iter().position(mine);
        inner.entries.retain(|e| !mine(e));
        at
    }

    /// Adds one entry (at index `at`, else at the end); complete mode
    /// replaces the whole table.
    fn push(
        &self,
        inner: &mut Inner,
        batch_id: u64,
        batches: Vec<RecordBatch>,
        mode: OutputMode,
        at: Option<usize>,
    ) {
        let batches: Vec<RecordBatch> = batches.into_iter().filter(|b| b.num_rows() > 0).collect();
        if let Some(b) = batches.first() {
            inner.schema = b.schema();
        }
        let entry = Entry {
            query_id: self.query_id.clone(),
            batch_id,
            rows: batches,
            written_at: Instant::now(),
        };
        match mode {
            OutputMode::Complete => {
                inner.entries.clear();
                inner.entries.push(entry);
            }
            OutputMode::Append | OutputMode::Update => match at {
                Some(i) if i <= inner.entries.len() => inner.entries.insert(i, entry),
                _ => inner.entries.push(entry),
            },
        }
    }
}
