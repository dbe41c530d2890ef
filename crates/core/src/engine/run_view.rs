//! What the UI shows of one run, folded from its events
//! ([`crate::engine::event_log`]): the graph from the definitions, each
//! flow's state and figures from its progress, the errors with their fixes.
//! The same fold serves a running pipeline (`run --ui`, told of each event
//! as it is logged) and a finished one (`pipelines ui`, reading the log).
//!
//! ```
//! use pipelines_core::engine::event_log::{EventLog, NewEvent};
//! use pipelines_core::engine::run_view::RunView;
//! let dir = tempfile::tempdir().unwrap();
//! let log = EventLog::open(dir.path(), "shop").unwrap();
//! let mut view = RunView::new("shop");
//! view.add(&log.emit(NewEvent::info("create_update", "started")).unwrap());
//! assert_eq!(view.update_id.as_deref(), Some(log.update_id()));
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::engine::event_log::{Event, EventError, Level};
use crate::engine::metrics::FlowMetrics;
use crate::engine::progress::BatchProgress;

/// How many batches of each flow the history keeps.
pub const HISTORY: usize = 30;

/// A dataset as drawn.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DatasetView {
    /// "streaming table", "materialized view", "sink", ...
    pub kind: String,
    /// Its format (`delta`, `parquet`, `kafka`, ...).
    pub format: String,
    /// Rows its flows wrote in this run (for a complete-mode flow, the
    /// rows of its last batch: the whole result).
    pub rows: u64,
}

/// An input of a flow: a pipeline dataset, or an external source.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InputView {
    /// The dataset's name, or the source's description.
    pub name: String,
    /// True for a pipeline dataset, false for an external source.
    pub dataset: bool,
    /// Whether it is read as a stream.
    pub streaming: bool,
}

/// One expectation's counts in this run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ExpectationView {
    /// Its name.
    pub name: String,
    /// Rows that passed.
    pub passed: u64,
    /// Rows that failed.
    pub failed: u64,
}

/// One batch in a flow's history.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatchRow {
    /// Batch id.
    pub batch_id: u64,
    /// When it started.
    pub timestamp: String,
    /// Rows read.
    pub input_rows: u64,
    /// Rows written.
    pub output_rows: u64,
    /// Input rows per second of processing.
    pub rows_per_second: f64,
    /// How long it took, ms.
    pub duration_ms: f64,
    /// Its watermark (RFC 3339), when the flow has one.
    pub watermark: Option<String>,
    /// Rows in state after it.
    pub state_rows: u64,
    /// Rows it dropped as late.
    pub late_rows: u64,
    /// A replay of a batch begun before a restart.
    pub replayed: bool,
}

/// A flow as drawn and tabulated.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FlowView {
    /// The dataset it writes.
    pub target: String,
    /// What it reads.
    pub inputs: Vec<InputView>,
    /// `append`, `update` or `complete`.
    pub output_mode: String,
    /// Its trigger.
    pub trigger: String,
    /// QUEUED, STARTING, RUNNING, COMPLETED, STOPPED, FAILED (empty
    /// when the run does not include it).
    pub state: String,
    /// Counters and gauges since the run started.
    pub figures: FlowMetrics,
    /// Input rows per second of the last batch.
    pub input_rows_per_second: f64,
    /// Output rows per second of the last batch.
    pub output_rows_per_second: f64,
    /// The last batch's watermark (RFC 3339).
    pub watermark: Option<String>,
    /// What is left of an available-now backlog.
    pub backlog: Option<String>,
    /// The expectations' counts.
    pub expectations: Vec<ExpectationView>,
    /// The last [`HISTORY`] batches, newest last.
    pub history: VecDeque<BatchRow>,
    /// Why it failed.
    pub error: Option<EventError>,
}

/// A warning or error of the run, for the list under the graph.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Notice {
    /// `WARN` or `ERROR`.
    pub level: String,
    /// The flow, when it is about one.
    pub flow: Option<String>,
    /// What happened.
    pub message: String,
    /// How to fix it.
    pub fix: Option<String>,
}

/// One run of a pipeline as the UI shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunView {
    /// The pipeline's name.
    pub pipeline: String,
    /// The run's id, once its `create_update` is seen.
    pub update_id: Option<String>,
    /// When the run started.
    pub started: Option<String>,
    /// RUNNING, COMPLETED, FAILED or CANCELED.
    pub state: String,
    /// Datasets by name.
    pub datasets: BTreeMap<String, DatasetView>,
    /// Flows by name.
    pub flows: BTreeMap<String, FlowView>,
    /// Flow names in the order they were defined (upstream first).
    pub flow_order: Vec<String>,
    /// Warnings and errors, oldest first.
    pub notices: Vec<Notice>,
    /// The last event folded in.
    pub last_sequence: u64,
}

fn text(v: &serde_json::Value, key: &str) -> String {
    v.get(key)
        .and_then(|s| s.as_str())
        .unwrap_or_default()
        .to_string()
}

impl RunView {
    /// Nothing seen yet.
    pub fn new(pipeline: &str) -> Self {
        RunView {
            pipeline: pipeline.to_string(),
            ..Default::default()
        }
    }

    /// Folds in one event. A `create_update` starts the view over (the log
    /// holds run after run); events of other runs are ignored.
    pub fn add(&mut self, e: &Event) {
        if e.event_type == "create_update" {
            *self = RunView::new(&e.origin.pipeline_name);
            self.update_id = Some(e.origin.update_id.clone());
            self.started = Some(e.timestamp.clone());
            self.state = "RUNNING".to_string();
        } else if self.update_id.as_deref() != Some(e.origin.update_id.as_str()) {
            return;
        }
        self.last_sequence = e.sequence;
        let flow = e.origin.flow_name.clone().unwrap_or_default();
        match e.event_type.as_str() {
            "dataset_definition" => {
                let d = &e.details["dataset_definition"];
                self.datasets.insert(
                    e.origin.dataset_name.clone().unwrap_or_default(),
                    DatasetView {
                        kind: text(d, "dataset_type"),
                        format: text(d, "format"),
                        rows: 0,
                    },
                );
            }
            "flow_definition" => {
                let d = &e.details["flow_definition"];
                let mut inputs: Vec<InputView> = d["sources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s.as_str())
                    .map(|s| InputView {
                        name: s.to_string(),
                        dataset: false,
                        streaming: true,
                    })
                    .collect();
                inputs.extend(
                    d["input_datasets"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|i| InputView {
                            name: text(i, "name"),
                            dataset: true,
                            streaming: i["streaming"].as_bool().unwrap_or(true),
                        }),
                );
                let expectations = d["expectations"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s.as_str())
                    .map(|name| ExpectationView {
                        name: name.to_string(),
                        ..Default::default()
                    })
                    .collect();
                self.flow_order.push(flow.clone());
                self.flows.insert(
                    flow,
                    FlowView {
                        target: text(d, "output_dataset"),
                        inputs,
                        output_mode: text(d, "output_mode"),
                        trigger: text(d, "trigger"),
                        expectations,
                        ..Default::default()
                    },
                );
            }
            "update_progress" => {
                if let Some(state) = e.state() {
                    self.state = state.to_string();
                }
            }
            "flow_progress" => match e.batch_progress() {
                Some(p) => self.add_batch(&flow, p),
                None => {
                    if let (Some(state), Some(f)) = (e.state(), self.flows.get_mut(&flow)) {
                        f.state = state.to_string();
                        f.error = e.error.clone();
                    }
                }
            },
            _ => {}
        }
        if matches!(e.level, Level::Warn | Level::Error) {
            self.notices.push(Notice {
                level: e.level.as_str().to_string(),
                flow: e.origin.flow_name.clone(),
                message: e
                    .error
                    .as_ref()
                    .map(|err| err.message.clone())
                    .unwrap_or_else(|| e.message.clone()),
                fix: e.error.as_ref().and_then(|err| err.fix.clone()),
            });
        }
    }

    fn add_batch(&mut self, flow: &str, p: &serde_json::Value) {
        let Ok(p) = serde_json::from_value::<BatchProgress>(p.clone()) else {
            return;
        };
        let Some(f) = self.flows.get_mut(flow) else {
            return;
        };
        f.state = "RUNNING".to_string();
        f.figures.add(&p);
        let secs = p.duration_ms.trigger_execution / 1000.0;
        f.input_rows_per_second = p.processed_rows_per_second;
        f.output_rows_per_second = if secs > 0.0 {
            p.num_output_rows as f64 / secs
        } else {
            0.0
        };
        let watermark = p.watermark_ms.map(crate::engine::progress::format_ms);
        f.watermark = watermark.clone();
        f.backlog = p.backlog.clone();
        if let Some(q) = &p.data_quality {
            for m in &q.expectations {
                match f.expectations.iter_mut().find(|x| x.name == m.name) {
                    Some(x) => {
                        x.passed += m.passed_records;
                        x.failed += m.failed_records;
                    }
                    None => f.expectations.push(ExpectationView {
                        name: m.name.clone(),
                        passed: m.passed_records,
                        failed: m.failed_records,
                    }),
                }
            }
        }
        f.history.push_back(BatchRow {
            batch_id: p.batch_id,
            timestamp: p.timestamp.clone(),
            input_rows: p.num_input_rows,
            output_rows: p.num_output_rows,
            rows_per_second: p.processed_rows_per_second,
            duration_ms: p.duration_ms.trigger_execution,
            watermark,
            state_rows: p.state_operators.iter().map(|o| o.num_rows_total).sum(),
            late_rows: p
                .state_operators
                .iter()
                .map(|o| o.num_rows_dropped_by_watermark)
                .sum(),
            replayed: p.replayed,
        });
        while f.history.len() > HISTORY {
            f.history.pop_front();
        }
        let complete = f.output_mode == "complete";
        let target = f.target.clone();
        if let Some(d) = self.datasets.get_mut(&target) {
            if complete {
                d.rows = p.num_output_rows;
            } else {
                d.rows += p.num_output_rows;
            }
        }
    }

    /// Each flow's figures, for the flows that committed a batch.
    pub fn figures(&self) -> BTreeMap<String, FlowMetrics> {
        self.flows
            .iter()
            .filter(|(_, f)| f.figures.batches > 0)
            .map(|(n, f)| (n.clone(), f.figures.clone()))
            .collect()
    }
}

/// A [`RunView`] shared between the run (or the log reader) adding events
/// and the web server reading it; each change bumps a version the live
/// page waits on.
#[derive(Clone, Debug)]
pub struct SharedView {
    view: Arc<Mutex<RunView>>,
    version: Arc<tokio::sync::watch::Sender<u64>>,
}

impl SharedView {
    /// An empty view of `pipeline`.
    pub fn new(pipeline: &str) -> Self {
        SharedView {
            view: Arc::new(Mutex::new(RunView::new(pipeline))),
            version: Arc::new(tokio::sync::watch::channel(0).0),
        }
    }

    /// Folds in `e` and tells the waiting pages.
    pub fn add(&self, e: &Event) {
        self.view.lock().unwrap_or_else(|p| p.into_inner()).add(e);
        self.version.send_modify(|v| *v += 1);
    }

    /// A copy of the view as it is now.
    pub fn snapshot(&self) -> RunView {
        self.view.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Wakes when the view changes.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.version.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::event_log::{EventLog, NewEvent};
    use crate::engine::progress::{BatchProgress, PhaseDurations};

    fn batch(flow: &str, id: u64, rows_in: u64, rows_out: u64) -> serde_json::Value {
        serde_json::to_value(BatchProgress {
            pipeline: "p".into(),
            flow: flow.into(),
            query_id: "q".into(),
            batch_id: id,
            timestamp: "2026-12-01T00:00:00.000Z".into(),
            replayed: false,
            num_input_rows: rows_in,
            input_rows_per_second: 0.0,
            processed_rows_per_second: 100.0,
            num_output_rows: rows_out,
            duration_ms: PhaseDurations {
                trigger_execution: 500.0,
                ..Default::default()
            },
            watermark_ms: Some(0),
            sources: Vec::new(),
            sink: "s".into(),
            sink_skipped_replay: false,
            state_operators: Vec::new(),
            backlog: Some("1 file left".into()),
            backlog_detail: Vec::new(),
            data_quality: None,
        })
        .unwrap()
    }

    #[test]
    fn the_view_of_a_run_with_a_complete_mode_flow_and_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let old = EventLog::open(dir.path(), "p").unwrap();
        let mut view = RunView::new("p");
        view.add(
            &old.emit(NewEvent::info("create_update", "old run"))
                .unwrap(),
        );
        let log = EventLog::open(dir.path(), "p").unwrap();
        let emit = |e: NewEvent| log.emit(e).unwrap();
        let events = vec![
            emit(NewEvent::info("create_update", "new run")),
            emit(NewEvent::info("dataset_definition", "").dataset("totals").details(
                serde_json::json!({"dataset_definition": {"dataset_type": "materialized view", "format": "delta"}}),
            )),
            emit(NewEvent::info("flow_definition", "").flow("sum").details(serde_json::json!({
                "flow_definition": {
                    "output_dataset": "totals",
                    "input_datasets": [{"name": "orders", "streaming": false}],
                    "sources": ["json source `in`"],
                    "output_mode": "complete",
                    "trigger": "available-now",
                    "expectations": ["positive"],
                }
            }))),
            emit(NewEvent::info("flow_progress", "").flow("sum").details(serde_json::json!({
                "flow_progress": {"status": "RUNNING"},
                "batch_progress": batch("sum", 0, 10, 3),
            }))),
            emit(NewEvent::info("flow_progress", "").flow("sum").details(serde_json::json!({
                "flow_progress": {"status": "RUNNING"},
                "batch_progress": batch("sum", 1, 5, 4),
            }))),
            emit(
                NewEvent::info("flow_progress", "failed")
                    .flow("sum")
                    .details(serde_json::json!({"flow_progress": {"status": "FAILED"}}))
                    .error(EventError {
                        message: "boom".into(),
                        fix: Some("fix it".into()),
                        chain: Vec::new(),
                    }),
            ),
        ];
        for e in &events {
            view.add(e);
        }
        // An event of the old run arriving late changes nothing.
        let before = view.clone();
        view.add(&old.emit(NewEvent::info("update_progress", "late")).unwrap());
        assert_eq!(view, before);

        assert_eq!(view.update_id.as_deref(), Some(log.update_id()));
        assert_eq!(view.flow_order, ["sum"]);
        let f = &view.flows["sum"];
        assert_eq!(f.state, "FAILED");
        assert_eq!(f.error.as_ref().unwrap().fix.as_deref(), Some("fix it"));
        assert_eq!(
            (
                f.figures.batches,
                f.figures.input_rows,
                f.figures.output_rows
            ),
            (2, 15, 7)
        );
        assert_eq!(f.output_rows_per_second, 8.0);
        assert_eq!(f.watermark.as_deref(), Some("1970-01-01T00:00:00.000Z"));
        assert_eq!(
            f.inputs,
            [
                InputView {
                    name: "json source `in`".into(),
                    dataset: false,
                    streaming: true
                },
                InputView {
                    name: "orders".into(),
                    dataset: true,
                    streaming: false
                },
            ]
        );
        assert_eq!(f.expectations[0].name, "positive");
        let batches: Vec<(u64, u64)> = f
            .history
            .iter()
            .map(|b| (b.batch_id, b.input_rows))
            .collect();
        assert_eq!(batches, [(0, 10), (1, 5)]);
        // Complete mode: the table is the last batch's result.
        assert_eq!(view.datasets["totals"].rows, 4);
        assert_eq!(
            view.notices,
            [Notice {
                level: "ERROR".into(),
                flow: Some("sum".into()),
                message: "boom".into(),
                fix: Some("fix it".into()),
            }]
        );
        assert_eq!(view.last_sequence, events.last().unwrap().sequence);
    }
}
