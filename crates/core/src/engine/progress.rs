//! Progress of each micro-batch: emitted through `tracing`, appended as JSON
//! lines to `<storage>/event_log/events.jsonl`, and shown as one compact
//! line per batch on an interactive terminal.

use std::fs::OpenOptions;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

use crate::error::{Error, Result};

/// Time spent in each phase of a micro-batch, in milliseconds (Spark's `durationMs`).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PhaseDurations {
    /// Asking the sources for their end offsets.
    pub latest_offset: f64,
    /// Writing `offsets/N`.
    pub wal_commit: f64,
    /// Reading the offset range from the sources.
    pub get_batch: f64,
    /// Running the plan.
    pub execute: f64,
    /// Writing to the sink.
    pub add_batch: f64,
    /// Writing `commits/N`.
    pub commit: f64,
    /// The whole batch.
    pub trigger_execution: f64,
}

/// One source's part of a batch.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SourceProgress {
    /// The source, e.g. "json source `data/logs`".
    pub description: String,
    /// Offset the batch started after.
    pub start_offset: Option<serde_json::Value>,
    /// Offset the batch ended at.
    pub end_offset: Option<serde_json::Value>,
    /// Rows read.
    pub num_input_rows: u64,
    /// Records dropped as malformed (`mode=DROPMALFORMED`).
    pub num_malformed_dropped: u64,
    /// Records deleted before they were read, counted instead of failing
    /// (Kafka's `failOnDataLoss=false`).
    #[serde(skip_serializing_if = "is_zero")]
    pub num_data_lost: u64,
    /// Files skipped as undecodable (`ignoreCorruptFiles`).
    #[serde(skip_serializing_if = "is_zero")]
    pub num_corrupt_files_skipped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Progress of one micro-batch of one flow (like Spark's `StreamingQueryProgress`).
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BatchProgress {
    /// Pipeline name.
    pub pipeline: String,
    /// Flow name.
    pub flow: String,
    /// The flow's query id (from its checkpoint).
    pub query_id: String,
    /// Micro-batch id.
    pub batch_id: u64,
    /// When the batch started (RFC 3339, UTC).
    pub timestamp: String,
    /// True when this batch replays offsets logged before a restart.
    pub replayed: bool,
    /// Rows read from all sources.
    pub num_input_rows: u64,
    /// Input rows per second of wall time since the previous batch started.
    pub input_rows_per_second: f64,
    /// Input rows per second of this batch's processing time.
    pub processed_rows_per_second: f64,
    /// Rows handed to the sink.
    pub num_output_rows: u64,
    /// Time per phase.
    pub duration_ms: PhaseDurations,
    /// Event-time watermark used by this batch (epoch ms), when the query has one.
    pub watermark_ms: Option<i64>,
    /// Per-source detail.
    pub sources: Vec<SourceProgress>,
    /// The sink, e.g. "parquet sink `errors` at ...".
    pub sink: String,
    /// True when the sink recognised a replayed batch and skipped it.
    pub sink_skipped_replay: bool,
    /// Per stateful operator: state rows, updates, evictions, late rows
    /// dropped, state bytes.
    pub state_operators: Vec<crate::engine::exec::StateOperatorProgress>,
    /// During an available-now run, what is left of the sources' backlog
    /// (e.g. "38 files left").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backlog: Option<String>,
    /// The expectations' counts, when the flow has expectations (Lakeflow's
    /// `flow_progress.data_quality`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_quality: Option<crate::engine::quality::DataQuality>,
}

impl BatchProgress {
    /// The compact one-line form shown on a terminal.
    pub fn compact_line(&self) -> String {
        format!(
            "{:<20} batch {:>5}  {:>9} rows  {:>12} rows/s  {:>8.1} ms{}{}{}{}",
            self.flow,
            self.batch_id,
            self.num_input_rows,
            format!("{:.0}", self.processed_rows_per_second),
            self.duration_ms.trigger_execution,
            self.watermark_ms
                .map(|w| format!("  watermark {}", format_ms(w)))
                .unwrap_or_default(),
            {
                let state: u64 = self.state_operators.iter().map(|o| o.num_rows_total).sum();
                let late: u64 = self
                    .state_operators
                    .iter()
                    .map(|o| o.num_rows_dropped_by_watermark)
                    .sum();
                match (self.state_operators.is_empty(), late) {
                    (true, _) => String::new(),
                    (false, 0) => format!("  state {state}"),
                    (false, l) => format!("  state {state}  late {l}"),
                }
            },
            self.data_quality
                .as_ref()
                .map(|q| format!("  {}", q.summary()))
                .unwrap_or_default(),
            match &self.backlog {
                Some(b) => format!("  {b}{}", if self.replayed { "  (replayed)" } else { "" }),
                None if self.replayed => "  (replayed)".to_string(),
                None => String::new(),
            }
        )
    }
}

/// Formats epoch milliseconds as RFC 3339 UTC.
pub fn format_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_else(|| ms.to_string())
}

/// Where progress goes: the event log file, tracing, and the terminal.
#[derive(Debug)]
pub struct ProgressReporter {
    event_log: PathBuf,
    file: Mutex<Option<std::fs::File>>,
    terminal: bool,
    observer: Option<Observer>,
}

/// The observer, shown by name only.
struct Observer(BatchObserver);

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BatchObserver")
    }
}

/// Something told of every committed batch (the `--ui` server's metrics).
pub type BatchObserver = std::sync::Arc<dyn Fn(&BatchProgress) + Send + Sync>;

impl ProgressReporter {
    /// A reporter appending to `<storage>/event_log/events.jsonl`; compact
    /// lines go to stderr when it is a terminal.
    pub fn new(storage: &Path) -> Result<Self> {
        let dir = storage.join("event_log");
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let event_log = dir.join("events.jsonl");
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&event_log)
            .map_err(|e| Error::io(&event_log, e))?;
        Ok(ProgressReporter {
            event_log,
            file: Mutex::new(Some(file)),
            terminal: std::io::stderr().is_terminal(),
            observer: None,
        })
    }

    /// Also tells `observer` of each batch.
    pub fn with_observer(mut self, observer: BatchObserver) -> Self {
        self.observer = Some(Observer(observer));
        self
    }

    /// The event log file.
    pub fn event_log(&self) -> &Path {
        &self.event_log
    }

    /// Records one batch's progress.
    pub fn report(&self, p: &BatchProgress) -> Result<()> {
        tracing::info!(
            pipeline = %p.pipeline,
            flow = %p.flow,
            batch_id = p.batch_id,
            input_rows = p.num_input_rows,
            output_rows = p.num_output_rows,
            processed_rows_per_second = p.processed_rows_per_second,
            duration_ms = p.duration_ms.trigger_execution,
            replayed = p.replayed,
            "micro-batch committed"
        );
        let line =
            serde_json::to_string(p).map_err(|e| Error::runtime(format!("progress: {e}")))?;
        if let Ok(mut guard) = self.file.lock() {
            if let Some(f) = guard.as_mut() {
                writeln!(f, "{line}").map_err(|e| Error::io(&self.event_log, e))?;
            }
        }
        if let Some(Observer(observe)) = &self.observer {
            observe(p);
        }
        if self.terminal {
            eprintln!("{}", p.compact_line());
        }
        Ok(())
    }

    /// A free-form event (flow started, stopped, failed) as a JSON line.
    pub fn event(&self, pipeline: &str, flow: &str, kind: &str, message: &str) -> Result<()> {
        let v = serde_json::json!({
            "pipeline": pipeline,
            "flow": flow,
            "event": kind,
            "message": message,
            "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        });
        if let Ok(mut guard) = self.file.lock() {
            if let Some(f) = guard.as_mut() {
                writeln!(f, "{v}").map_err(|e| Error::io(&self.event_log, e))?;
            }
        }
        Ok(())
    }
}
