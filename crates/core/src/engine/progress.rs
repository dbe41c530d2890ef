//! Progress of each micro-batch and the flows' states: emitted through
//! `tracing`, logged as events ([`crate::engine::event_log`]), and shown as
//! one compact line per batch on an interactive terminal.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::engine::event_log::{EventError, EventLog, EventObserver, Level, NewEvent};
use crate::error::{Error, Result};
use crate::graph::{FlowNode, PipelineGraph};
use crate::plan::ddl::type_to_ddl;

/// Time spent in each phase of a micro-batch, in milliseconds (Spark's `durationMs`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
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
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
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
    #[serde(default, skip_serializing_if = "is_zero")]
    pub num_data_lost: u64,
    /// Files skipped as undecodable (`ignoreCorruptFiles`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub num_corrupt_files_skipped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Progress of one micro-batch of one flow (like Spark's `StreamingQueryProgress`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<String>,
    /// The same per source, as numbers: left, total and unit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backlog_detail: Vec<crate::engine::source::Backlog>,
    /// The expectations' counts, when the flow has expectations (Lakeflow's
    /// `flow_progress.data_quality`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
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

/// A flow's state, as the event log and the UI show it (Lakeflow's
/// `flow_progress.status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowState {
    /// Selected for the run, not started yet.
    Queued,
    /// Opening its checkpoint, sources and sink.
    Starting,
    /// Running batches.
    Running,
    /// Done: an available-now run has read everything.
    Completed,
    /// Stopped by the user (a continuous run).
    Stopped,
    /// Stopped by an error.
    Failed,
}

impl FlowState {
    /// `QUEUED`, `STARTING`, `RUNNING`, `COMPLETED`, `STOPPED` or `FAILED`.
    pub fn as_str(self) -> &'static str {
        match self {
            FlowState::Queued => "QUEUED",
            FlowState::Starting => "STARTING",
            FlowState::Running => "RUNNING",
            FlowState::Completed => "COMPLETED",
            FlowState::Stopped => "STOPPED",
            FlowState::Failed => "FAILED",
        }
    }
}

/// What an update runs: the selection and how (its `create_update` event).
#[derive(Debug)]
pub struct UpdateSelection<'a> {
    /// `run --continuous`.
    pub continuous: bool,
    /// `--full-refresh-all`.
    pub full_refresh_all: bool,
    /// `--full-refresh a,b`.
    pub full_refresh: &'a [String],
    /// `--refresh a,b`.
    pub refresh: &'a [String],
    /// The flows that run.
    pub flows: &'a [&'a FlowNode],
}

/// Where progress goes: the event log, tracing, and the terminal.
#[derive(Debug)]
pub struct ProgressReporter {
    log: EventLog,
    /// On a terminal: a line per batch, and a bar per flow with a backlog.
    terminal: Option<Bars>,
}

/// The terminal's progress bars: one per flow working through an
/// available-now backlog (done / total, rows/s, ETA), with the batch lines
/// printed above them.
#[derive(Debug)]
struct Bars {
    multi: indicatif::MultiProgress,
    by_flow: Mutex<BTreeMap<String, indicatif::ProgressBar>>,
}

impl Bars {
    fn new() -> Self {
        Bars {
            multi: indicatif::MultiProgress::new(),
            by_flow: Mutex::new(BTreeMap::new()),
        }
    }

    fn batch(&self, p: &BatchProgress) {
        if let Some(first) = p.backlog_detail.first() {
            let left: u64 = p.backlog_detail.iter().map(|b| b.left).sum();
            let total: u64 = p.backlog_detail.iter().map(|b| b.total).sum();
            let unit = if p.backlog_detail.iter().all(|b| b.unit == first.unit) {
                format!("{}s", first.unit)
            } else {
                "units".to_string()
            };
            let mut bars = self.by_flow.lock().unwrap_or_else(|e| e.into_inner());
            let bar = bars.entry(p.flow.clone()).or_insert_with(|| {
                let style = indicatif::ProgressStyle::with_template(
                    "{prefix:<20} [{bar:30}] {pos}/{len} {msg} · ETA {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> ");
                self.multi.add(
                    indicatif::ProgressBar::new(total)
                        .with_style(style)
                        .with_prefix(p.flow.clone()),
                )
            });
            bar.set_length(total);
            bar.set_position(total.saturating_sub(left));
            bar.set_message(format!(
                "{unit} · {:.0} rows/s",
                p.processed_rows_per_second
            ));
        }
        if self.multi.println(p.compact_line()).is_err() {
            eprintln!("{}", p.compact_line());
        }
    }

    fn done(&self, flow: &str) {
        let mut bars = self.by_flow.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bar) = bars.remove(flow) {
            bar.finish_and_clear();
        }
    }
}

impl ProgressReporter {
    /// A reporter appending to the event log of `storage` for a new run of
    /// `pipeline`; compact lines go to stderr when it is a terminal.
    pub fn new(
        storage: impl Into<crate::engine::storage::Location>,
        pipeline: &str,
    ) -> Result<Self> {
        Ok(ProgressReporter {
            log: EventLog::open(storage, pipeline)?,
            terminal: std::io::stderr().is_terminal().then(Bars::new),
        })
    }

    /// Also tells `observer` of each event.
    pub fn with_observer(mut self, observer: EventObserver) -> Self {
        self.log = self.log.with_observer(observer);
        self
    }

    /// The event log.
    pub fn log(&self) -> &EventLog {
        &self.log
    }

    /// Records one batch's progress (a `flow_progress` event with
    /// `details.batch_progress`). Called before the batch's commit, so a
    /// committed batch always has its event.
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
        let progress =
            serde_json::to_value(p).map_err(|e| Error::runtime(format!("progress: {e}")))?;
        let mut flow_progress = serde_json::json!({
            "status": FlowState::Running.as_str(),
            "metrics": {
                "num_input_rows": p.num_input_rows,
                "num_output_rows": p.num_output_rows,
            },
        });
        if let Some(q) = &p.data_quality {
            flow_progress["data_quality"] =
                serde_json::to_value(q).map_err(|e| Error::runtime(format!("progress: {e}")))?;
        }
        self.log.emit(
            NewEvent::new(
                Level::Metrics,
                "flow_progress",
                format!(
                    "Flow `{}` batch {}: {} rows in, {} rows out{}.",
                    p.flow,
                    p.batch_id,
                    p.num_input_rows,
                    p.num_output_rows,
                    if p.replayed { " (replayed)" } else { "" }
                ),
            )
            .flow(&p.flow)
            .batch(p.batch_id)
            .details(serde_json::json!({
                "flow_progress": flow_progress,
                "batch_progress": progress,
            })),
        )?;
        if let Some(bars) = &self.terminal {
            bars.batch(p);
        }
        Ok(())
    }

    /// A flow's new state; `error` for [`FlowState::Failed`].
    pub fn flow_state(
        &self,
        flow: &str,
        target: &str,
        state: FlowState,
        message: String,
        error: Option<&Error>,
    ) -> Result<()> {
        let mut event = NewEvent::info("flow_progress", message)
            .flow(flow)
            .dataset(target)
            .details(serde_json::json!({"flow_progress": {"status": state.as_str()}}));
        if let Some(e) = error {
            event = event.error(EventError::from_error(e));
        }
        if let (Some(bars), FlowState::Completed | FlowState::Stopped | FlowState::Failed) =
            (&self.terminal, state)
        {
            bars.done(flow);
        }
        self.log.emit(event).map(|_| ())
    }

    /// A warning or notice about `flow` (`source_not_replayable`,
    /// `checkpoint_imported`, ...).
    pub fn flow_notice(&self, flow: &str, level: Level, kind: &str, message: &str) -> Result<()> {
        self.log
            .emit(NewEvent::new(level, kind, message).flow(flow))
            .map(|_| ())
    }

    /// Any other event.
    pub fn emit(&self, event: NewEvent) -> Result<()> {
        self.log.emit(event).map(|_| ())
    }

    /// The events that open an update: `create_update`, a definition per
    /// dataset and flow (what the UI draws), `update_progress` RUNNING, and
    /// each selected flow QUEUED.
    pub fn update_started(&self, graph: &PipelineGraph, run: &UpdateSelection) -> Result<()> {
        let names: Vec<&str> = run.flows.iter().map(|f| f.def.name.as_str()).collect();
        let trigger = if run.continuous {
            "continuous"
        } else {
            "available-now"
        };
        self.emit(
            NewEvent::info(
                "create_update",
                format!(
                    "Update {} started ({trigger}, {} of {} flows).",
                    self.log().update_id(),
                    names.len(),
                    graph.flows.len()
                ),
            )
            .details(serde_json::json!({"create_update": {
                "continuous": run.continuous,
                "full_refresh_all": run.full_refresh_all,
                "full_refresh_selection": run.full_refresh,
                "refresh_selection": run.refresh,
                "flows": names,
            }})),
        )?;
        for d in graph.datasets.values() {
            self.emit(
                NewEvent::info(
                    "dataset_definition",
                    format!(
                        "Dataset `{}`: {} ({}).",
                        d.def.name,
                        d.def.dataset_type().describe(),
                        d.format()
                    ),
                )
                .dataset(&d.def.name)
                .details(serde_json::json!({"dataset_definition": {
                    "dataset_type": d.def.dataset_type().describe(),
                    "format": d.format(),
                    "flows": d.flows,
                    "schema": d.schema.as_ref().map(|s| s
                        .fields()
                        .iter()
                        .map(|f| serde_json::json!({"name": f.name(), "type": type_to_ddl(f.data_type())}))
                        .collect::<Vec<_>>()),
                }})),
            )?;
        }
        for f in graph.ordered_flows() {
            let sources: Vec<String> = f.plan.sources().iter().map(|s| s.describe()).collect();
            let inputs: Vec<serde_json::Value> = f
                .reads
                .iter()
                .map(|(name, streaming)| serde_json::json!({"name": name, "streaming": streaming}))
                .collect();
            self.emit(
                NewEvent::info(
                    "flow_definition",
                    format!(
                        "Flow `{}` writes `{}` ({} mode).",
                        f.def.name, f.def.target, f.output_mode
                    ),
                )
                .flow(&f.def.name)
                .dataset(&f.def.target)
                .details(serde_json::json!({"flow_definition": {
                    "output_dataset": f.def.target,
                    "input_datasets": inputs,
                    "sources": sources,
                    "output_mode": f.output_mode.to_string(),
                    "trigger": f.trigger.to_string(),
                    "streaming": f.streaming,
                    "auto_cdc": f.def.auto_cdc.is_some(),
                    "expectations": f.expectations.iter().map(|e| e.name.clone()).collect::<Vec<_>>(),
                    "origin": f.def.origin.as_ref().map(|o| o.to_string()),
                }})),
            )?;
        }
        self.emit(
            NewEvent::info("update_progress", "Update is RUNNING.")
                .details(serde_json::json!({"update_progress": {"state": "RUNNING"}})),
        )?;
        for f in run.flows {
            self.flow_state(
                &f.def.name,
                &f.def.target,
                FlowState::Queued,
                format!("Flow `{}` is QUEUED.", f.def.name),
                None,
            )?;
        }
        Ok(())
    }
}
