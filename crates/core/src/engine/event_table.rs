//! The event log as a table: every event of `<storage>/event_log/events.jsonl`
//! copied, in small appends, into a table of the pipeline's default table
//! format (Delta when linked) at `<storage>/system/event_log`, or where
//! `pipelines.eventLog.path` says. One row per [`Event`], the columns of
//! [`schema`].
//!
//! The copy runs on its own thread, which opens the table while the run
//! starts and copies every [`COPY_INTERVAL`] and once more when the run
//! ends, so it never holds up a batch (a run shorter than the interval
//! commits to the table once). It is a streaming query of its own: its
//! checkpoint (`<storage>/system/event_log_checkpoint`) logs the range of
//! the log each append covers (bytes of the file; with the storage in
//! object storage, sequences of its event objects) before writing it and
//! commits after, and the table's sink recognises a replayed append, so
//! after a crash the next run copies what the last one did not, once.
//!
//! [`Event`]: crate::engine::event_log::Event

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::engine::storage::Location;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use arrow::array::{
    ArrayRef, Int64Builder, ListBuilder, StringBuilder, StructArray, TimestampMicrosecondBuilder,
};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;

use crate::engine::checkpoint::{lock_checkpoint, Checkpoint, CommitEntry, OffsetEntry};
use crate::engine::event_log::{log_location, read_events_from, Event};
use crate::engine::sink::{Sink, SinkContext};
use crate::error::{Error, Result};
use crate::formats::OutputMode;

/// How often the running copy appends what was logged since the last one.
pub const COPY_INTERVAL: Duration = Duration::from_secs(2);

/// Where the table is, relative to the storage root, by default.
pub const DEFAULT_TABLE_DIR: &str = "system/event_log";

/// The table's columns: `id`, `sequence`, `timestamp`, `origin`
/// (`pipeline_name`, `update_id`, `flow_name`, `dataset_name`, `batch_id`),
/// `level`, `event_type`, `message`, `details` (JSON text), `error`
/// (`message`, `fix`, `chain`).
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("sequence", DataType::Int64, false),
        Field::new(
            "timestamp",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("origin", DataType::Struct(origin_fields()), false),
        Field::new("level", DataType::Utf8, false),
        Field::new("event_type", DataType::Utf8, false),
        Field::new("message", DataType::Utf8, false),
        Field::new("details", DataType::Utf8, true),
        Field::new("error", DataType::Struct(error_fields()), true),
    ]))
}

fn origin_fields() -> Fields {
    Fields::from(vec![
        Field::new("pipeline_name", DataType::Utf8, true),
        Field::new("update_id", DataType::Utf8, true),
        Field::new("flow_name", DataType::Utf8, true),
        Field::new("dataset_name", DataType::Utf8, true),
        Field::new("batch_id", DataType::Int64, true),
    ])
}

fn chain_item() -> Arc<Field> {
    Arc::new(Field::new("item", DataType::Utf8, true))
}

fn error_fields() -> Fields {
    Fields::from(vec![
        Field::new("message", DataType::Utf8, true),
        Field::new("fix", DataType::Utf8, true),
        Field::new("chain", DataType::List(chain_item()), true),
    ])
}

/// `events` as rows of [`schema`].
pub fn to_batch(events: &[Event]) -> Result<RecordBatch> {
    let n = events.len();
    let mut id = StringBuilder::with_capacity(n, n * 36);
    let mut sequence = Int64Builder::with_capacity(n);
    let mut ts = TimestampMicrosecondBuilder::with_capacity(n).with_timezone("UTC");
    let (mut pipeline, mut update, mut flow, mut dataset) = (
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
    );
    let mut batch_id = Int64Builder::with_capacity(n);
    let (mut level, mut kind, mut message, mut details) = (
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
    );
    let (mut err_message, mut err_fix) = (StringBuilder::new(), StringBuilder::new());
    let mut err_chain = ListBuilder::new(StringBuilder::new()).with_field(chain_item());
    let mut err_valid = Vec::with_capacity(n);
    for e in events {
        id.append_value(&e.id);
        sequence.append_value(e.sequence as i64);
        let micros = chrono::DateTime::parse_from_rfc3339(&e.timestamp)
            .map_err(|err| {
                Error::runtime(format!(
                    "event log: event {} has the timestamp `{}`: {err}",
                    e.sequence, e.timestamp
                ))
            })?
            .timestamp_micros();
        ts.append_value(micros);
        pipeline.append_value(&e.origin.pipeline_name);
        update.append_value(&e.origin.update_id);
        flow.append_option(e.origin.flow_name.as_deref());
        dataset.append_option(e.origin.dataset_name.as_deref());
        batch_id.append_option(e.origin.batch_id.map(|b| b as i64));
        level.append_value(e.level.as_str());
        kind.append_value(&e.event_type);
        message.append_value(&e.message);
        details.append_value(e.details.to_string());
        match &e.error {
            Some(err) => {
                err_message.append_value(&err.message);
                err_fix.append_option(err.fix.as_deref());
                for c in &err.chain {
                    err_chain.values().append_value(c);
                }
                err_chain.append(true);
                err_valid.push(true);
            }
            None => {
                err_message.append_null();
                err_fix.append_null();
                err_chain.append(false);
                err_valid.push(false);
            }
        }
    }
    let origin = StructArray::new(
        origin_fields(),
        vec![
            Arc::new(pipeline.finish()) as ArrayRef,
            Arc::new(update.finish()),
            Arc::new(flow.finish()),
            Arc::new(dataset.finish()),
            Arc::new(batch_id.finish()),
        ],
        None,
    );
    let error = StructArray::new(
        error_fields(),
        vec![
            Arc::new(err_message.finish()) as ArrayRef,
            Arc::new(err_fix.finish()),
            Arc::new(err_chain.finish()),
        ],
        Some(err_valid.into()),
    );
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(id.finish()),
            Arc::new(sequence.finish()),
            Arc::new(ts.finish()),
            Arc::new(origin),
            Arc::new(level.finish()),
            Arc::new(kind.finish()),
            Arc::new(message.finish()),
            Arc::new(details.finish()),
            Arc::new(error),
        ],
    )
    .map_err(|e| Error::runtime(format!("event log table: {e}")))
}

/// Where the event log table of `storage` is: `pipelines.eventLog.path`
/// from the pipeline's configuration (relative to `base_dir`), else
/// `<storage>/system/event_log`.
pub fn table_path(
    storage: &Location,
    base_dir: &Path,
    configuration: &BTreeMap<String, String>,
) -> Result<Location> {
    match configuration.get(crate::conf::EVENT_LOG_PATH) {
        Some(p) => Location::parse(p, base_dir).map_err(|e| {
            Error::runtime_with_help(
                format!("configuration `{}`: {e}", crate::conf::EVENT_LOG_PATH),
                "give a local path or an `s3://bucket/prefix` URL",
            )
        }),
        None => Ok(DEFAULT_TABLE_DIR
            .split('/')
            .fold(storage.clone(), |l, part| l.join(part))),
    }
}

/// The SQL `pipelines events` runs without `--sql`.
pub const DEFAULT_QUERY: &str = "SELECT sequence, timestamp, level, event_type, \
     origin['flow_name'] AS flow, message FROM event_log ORDER BY sequence";

/// Runs `sql` (DataFusion's dialect) over the event log table at `table`,
/// registered as `event_log`.
pub fn query(table: &Location, sql: &str) -> Result<Vec<RecordBatch>> {
    let format = crate::connector::default_table_format();
    let readable = crate::connector::source(format).is_some_and(|c| c.reads_tables());
    if table.is_empty_dir()? || !readable {
        return Err(Error::runtime_with_help(
            format!("no event log table at {table}"),
            "run the pipeline first (the table is written by `run`), or pass its storage with `--storage DIR`",
        ));
    }
    let scratch = std::env::temp_dir().join(format!("pipelines-events-{}", uuid::Uuid::new_v4()));
    crate::engine::storage::local::create_private_dir(&scratch)?;
    let read = crate::engine::sources::open_table_reader(
        table,
        format,
        schema(),
        &BTreeMap::new(),
        crate::engine::source::SourceContext {
            flow: "event_log".into(),
            state_dir: scratch.clone().into(),
            base_dir: PathBuf::from("."),
            option_overrides: BTreeMap::new(),
        },
        false,
    )
    .and_then(|mut source| crate::engine::source::read_all(source.as_mut()));
    let _ = std::fs::remove_dir_all(&scratch);
    let batches = read?;
    let sql_error = |e: datafusion::error::DataFusionError| {
        Error::runtime_with_help(
            format!("--sql: {e}"),
            format!(
                "the table is `event_log`, with the columns {}",
                column_list()
            ),
        )
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| Error::runtime(format!("events: cannot start the runtime: {e}")))?;
    rt.block_on(async {
        let ctx = datafusion::prelude::SessionContext::new();
        let mem = datafusion::datasource::MemTable::try_new(schema(), vec![batches])
            .map_err(sql_error)?;
        ctx.register_table("event_log", Arc::new(mem))
            .map_err(sql_error)?;
        ctx.sql(sql)
            .await
            .map_err(sql_error)?
            .collect()
            .await
            .map_err(sql_error)
    })
}

/// `id, sequence, ...`: the table's column names.
fn column_list() -> String {
    schema()
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// One copy step's bookkeeping: the checkpoint and the table's sink.
struct Copier {
    log: Location,
    checkpoint: Checkpoint,
    sink: Box<dyn Sink>,
    /// The next append's batch id.
    next: u64,
    /// Where the log's uncopied part starts (a byte of the file, or the
    /// next sequence among event objects).
    uncopied: u64,
}

fn offset_of(entry: &OffsetEntry) -> Option<(u64, u64)> {
    let v = entry.sources.first()?.as_ref()?;
    Some((v.get("from")?.as_u64()?, v.get("to")?.as_u64()?))
}

impl Copier {
    fn open(storage: &Location, table: &Location) -> Result<Self> {
        let checkpoint = Checkpoint::open(storage.join("system").join("event_log_checkpoint"))?;
        let format = crate::connector::default_table_format().to_string();
        let sink = crate::engine::sinks::open_sink(
            SinkContext {
                name: "event_log".into(),
                format,
                options: BTreeMap::new(),
                path: Some(table.clone()),
                partition_cols: Vec::new(),
                merge_keys: Vec::new(),
                schema: schema(),
                flow: "event_log".into(),
                query_id: checkpoint.query_id().to_string(),
            },
            None,
        )?;
        let mut copier = Copier {
            log: log_location(storage),
            checkpoint,
            sink,
            next: 0,
            uncopied: 0,
        };
        copier.recover()?;
        Ok(copier)
    }

    /// Finishes an append logged but not committed (the sink skips it if
    /// it was written), and finds where the file's uncopied part starts.
    fn recover(&mut self) -> Result<()> {
        let committed = self.checkpoint.latest_commit()?.map(|(n, _)| n);
        if let Some((n, entry)) = self.checkpoint.latest_offsets()? {
            let (from, to) = offset_of(&entry).ok_or_else(|| {
                Error::checkpoint(
                    self.checkpoint.offsets_file(n).shown(),
                    "not an event log offset (expected {\"from\": byte, \"to\": byte})",
                )
            })?;
            if committed != Some(n) {
                let (events, _) = read_events_from(&self.log, from, Some(to))?;
                self.append(n, events)?;
            }
            self.next = n + 1;
            self.uncopied = to;
        }
        Ok(())
    }

    /// Appends batch `n` and commits it.
    fn append(&mut self, n: u64, events: Vec<Event>) -> Result<()> {
        if !events.is_empty() {
            self.sink
                .add_batch(n, vec![to_batch(&events)?], OutputMode::Append)?;
        }
        crate::engine::fault::fault_point("event_log", "event_log_before_commit", n);
        self.checkpoint.write_commit(
            n,
            &CommitEntry {
                next_batch_watermark_ms: 0,
                sink_rows: Some(events.len() as u64),
            },
        )
    }

    /// Copies the complete lines logged since the last copy, if any.
    fn copy_new(&mut self) -> Result<usize> {
        let from = self.uncopied;
        let (events, to) = read_events_from(&self.log, from, None)?;
        if to == from {
            return Ok(0);
        }
        let n = self.next;
        self.checkpoint.write_offsets(
            n,
            &OffsetEntry {
                sources: vec![Some(serde_json::json!({"from": from, "to": to}))],
                ..OffsetEntry::default()
            },
        )?;
        let count = events.len();
        crate::engine::fault::fault_point("event_log", "event_log_offsets", n);
        self.append(n, events)?;
        self.next = n + 1;
        self.uncopied = to;
        if n % 100 == 99 {
            self.checkpoint.purge(100)?;
        }
        Ok(count)
    }
}

/// The running copy: a thread appending new events every
/// [`COPY_INTERVAL`]; [`EventTableCopy::finish`] copies the rest.
pub struct EventTableCopy {
    stop: Arc<AtomicBool>,
    wake: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<Result<()>>>,
}

impl EventTableCopy {
    /// Starts the copy: takes the table's lock here; the copy thread opens
    /// the table (finishing an append a crash interrupted) while the run
    /// starts, and copies every [`COPY_INTERVAL`] (first what an earlier run
    /// left) and when the run ends, so no batch waits for the table.
    /// Another run of the same storage already copying is not an error:
    /// this one copies nothing. A table that cannot be opened is reported
    /// by [`finish`](Self::finish); the events stay in the file.
    pub fn start(storage: &Location, table: &Location) -> Result<Option<Self>> {
        let lock_dir = storage.join("system").join("event_log_checkpoint");
        let lock = match lock_checkpoint(&lock_dir) {
            Ok(l) => l,
            Err(Error::Runtime { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let (storage, table) = (storage.clone(), table.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let wake = Arc::new((Mutex::new(false), Condvar::new()));
        let (stop2, wake2) = (stop.clone(), wake.clone());
        let thread = std::thread::Builder::new()
            .name("event-log-copy".into())
            .spawn(move || {
                let _lock = lock;
                let mut copier = Copier::open(&storage, &table)?;
                loop {
                    let (m, cv) = &*wake2;
                    let guard = m.lock().unwrap_or_else(|e| e.into_inner());
                    let (mut woken, _) = cv
                        .wait_timeout_while(guard, COPY_INTERVAL, |woken| !*woken)
                        .unwrap_or_else(|e| e.into_inner());
                    *woken = false;
                    drop(woken);
                    let last = stop2.load(Ordering::SeqCst);
                    if let Err(e) = copier.copy_new() {
                        if last {
                            return Err(e);
                        }
                        tracing::warn!("event log table: {e}; retried at the next copy");
                    }
                    if last {
                        return Ok(());
                    }
                }
            })
            .map_err(|e| {
                Error::runtime(format!("event log table: cannot start its thread: {e}"))
            })?;
        Ok(Some(EventTableCopy {
            stop,
            wake,
            thread: Some(thread),
        }))
    }

    /// Copies what is left and stops the thread.
    pub fn finish(mut self) -> Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        let (m, cv) = &*self.wake;
        *m.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(Error::runtime("event log table: its copy thread panicked")),
            None => Ok(()),
        }
    }
}

impl Drop for EventTableCopy {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop.store(true, Ordering::SeqCst);
            let (m, cv) = &*self.wake;
            *m.lock().unwrap_or_else(|e| e.into_inner()) = true;
            cv.notify_all();
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::event_log::{EventError, EventLog, NewEvent};

    #[test]
    fn events_become_rows_of_the_schema() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::open(dir.path(), "p").unwrap();
        let a = log
            .emit(NewEvent::info("flow_progress", "one").flow("f").batch(3))
            .unwrap();
        let b = log
            .emit(NewEvent::info("update_progress", "two").error(EventError {
                message: "boom".into(),
                fix: Some("do this".into()),
                chain: vec!["under".into()],
            }))
            .unwrap();
        let batch = to_batch(&[a, b]).unwrap();
        assert_eq!(batch.schema(), schema());
        let text =
            arrow::util::pretty::pretty_format_batches(&[batch.project(&[1, 3, 4, 8]).unwrap()])
                .unwrap()
                .to_string();
        assert!(text.contains("flow_name: f"), "{text}");
        assert!(text.contains("batch_id: 3"), "{text}");
        assert!(text.contains("ERROR"), "{text}");
        assert!(
            text.contains("{message: boom, fix: do this, chain: [under]}"),
            "{text}"
        );
    }
}
