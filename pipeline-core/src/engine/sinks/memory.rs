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
//! batch wrote before, so replays are idempotent. Entries are kept per
//! writing query, so several flows may write one memory table. Opening a
//! sink keeps an existing table of that name (so a restarted query adds to
//! it); call [`drop_memory_table`] for a fresh one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use super::file::option;
use crate::engine::sink::{Sink, SinkContext, SinkWrite};
use crate::error::Result;
use crate::formats::OutputMode;

#[derive(Debug)]
struct Entry {
    query_id: String,
    batch_id: u64,
    rows: Vec<RecordBatch>,
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
    pub fn batches_by_id(&self) -> Vec<(u64, Vec<RecordBatch>)> {
        self.lock()
            .entries
            .iter()
            .map(|e| (e.batch_id, e.rows.clone()))
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
}

impl MemorySink {
    /// Opens the sink, creating its table (named by option `queryName`, else
    /// the sink's name) when it does not exist yet.
    pub fn open(ctx: &SinkContext) -> Result<MemorySink> {
        let name = option(&ctx.options, "queryName")
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
        let batches: Vec<RecordBatch> = batches.into_iter().filter(|b| b.num_rows() > 0).collect();
        let mut inner = self.table.lock();
        if let Some(b) = batches.first() {
            inner.schema = b.schema();
        }
        let entry = Entry {
            query_id: self.query_id.clone(),
            batch_id,
            rows: batches,
        };
        match mode {
            OutputMode::Complete => {
                inner.entries.clear();
                inner.entries.push(entry);
            }
            OutputMode::Append | OutputMode::Update => {
                let existing = inner
                    .entries
                    .iter_mut()
                    .find(|e| e.query_id == self.query_id && e.batch_id == batch_id);
                match existing {
                    Some(e) => *e = entry,
                    None => inner.entries.push(entry),
                }
            }
        }
        Ok(SinkWrite {
            rows: rows as u64,
            ..SinkWrite::default()
        })
    }
}
