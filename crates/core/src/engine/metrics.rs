//! A run's metrics per flow, kept up to date from each batch's progress,
//! and their Prometheus text format (served at `/metrics` by `run --ui`,
//! [`crate::engine::web`]).
//!
//! Counters: batches, input rows, output rows, late rows (dropped by the
//! watermark), rows that failed an expectation. Gauges: the watermark, the
//! state's rows and bytes, the last batch's duration. Every series is
//! labelled with the pipeline and the flow.
//!
//! ```
//! use std::collections::BTreeMap;
//! use pipelines_core::engine::metrics::{prometheus, FlowMetrics};
//! let flows = BTreeMap::from([("load".to_string(), FlowMetrics { batches: 2, ..Default::default() })]);
//! let text = prometheus("shop", &flows);
//! assert!(text.contains("# TYPE pipelines_batches_total counter"));
//! assert!(text.contains("pipelines_batches_total{pipeline=\"shop\",flow=\"load\"} 2"));
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::engine::progress::BatchProgress;

/// One flow's figures since the run started.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlowMetrics {
    /// Micro-batches committed.
    pub batches: u64,
    /// Rows read.
    pub input_rows: u64,
    /// Rows written.
    pub output_rows: u64,
    /// Rows dropped as late by a watermark.
    pub late_rows: u64,
    /// Rows that failed an expectation (each failure counted once per expectation).
    pub failed_expectations: u64,
    /// The last batch's watermark, in ms since the epoch.
    pub watermark_ms: Option<i64>,
    /// Rows held by the flow's stateful operators.
    pub state_rows: u64,
    /// Bytes held by them.
    pub state_bytes: u64,
    /// How long the last batch took, in seconds.
    pub last_batch_seconds: f64,
}

impl FlowMetrics {
    /// Adds a committed batch.
    pub fn add(&mut self, p: &BatchProgress) {
        self.batches += 1;
        self.input_rows += p.num_input_rows;
        self.output_rows += p.num_output_rows;
        self.late_rows += p
            .state_operators
            .iter()
            .map(|o| o.num_rows_dropped_by_watermark)
            .sum::<u64>();
        if let Some(q) = &p.data_quality {
            self.failed_expectations +=
                q.expectations.iter().map(|e| e.failed_records).sum::<u64>();
        }
        self.watermark_ms = p.watermark_ms;
        self.state_rows = p.state_operators.iter().map(|o| o.num_rows_total).sum();
        self.state_bytes = p.state_operators.iter().map(|o| o.memory_used_bytes).sum();
        self.last_batch_seconds = p.duration_ms.trigger_execution / 1000.0;
    }
}

/// The Prometheus text exposition format (version 0.0.4) of `flows`, each
/// series labelled with `pipeline` and the flow.
pub fn prometheus(pipeline: &str, flows: &BTreeMap<String, FlowMetrics>) -> String {
    let mut out = String::new();
    type Get = fn(&FlowMetrics) -> Option<f64>;
    let series: [(&str, &str, &str, Get); 9] = [
        (
            "pipelines_batches_total",
            "counter",
            "micro-batches committed",
            |f| Some(f.batches as f64),
        ),
        ("pipelines_input_rows_total", "counter", "rows read", |f| {
            Some(f.input_rows as f64)
        }),
        (
            "pipelines_output_rows_total",
            "counter",
            "rows written",
            |f| Some(f.output_rows as f64),
        ),
        (
            "pipelines_late_rows_total",
            "counter",
            "rows dropped as late by a watermark",
            |f| Some(f.late_rows as f64),
        ),
        (
            "pipelines_expectation_failed_rows_total",
            "counter",
            "rows that failed an expectation, once per expectation",
            |f| Some(f.failed_expectations as f64),
        ),
        (
            "pipelines_watermark_seconds",
            "gauge",
            "the last batch's watermark, seconds since the epoch",
            |f| f.watermark_ms.map(|w| w as f64 / 1000.0),
        ),
        (
            "pipelines_state_rows",
            "gauge",
            "rows held by the flow's stateful operators",
            |f| Some(f.state_rows as f64),
        ),
        (
            "pipelines_state_bytes",
            "gauge",
            "bytes held by the flow's stateful operators",
            |f| Some(f.state_bytes as f64),
        ),
        (
            "pipelines_last_batch_seconds",
            "gauge",
            "how long the last micro-batch took",
            |f| Some(f.last_batch_seconds),
        ),
    ];
    for (name, kind, help, get) in series {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (flow, f) in flows {
            if let Some(v) = get(f) {
                let _ = writeln!(
                    out,
                    "{name}{{pipeline=\"{}\",flow=\"{}\"}} {v}",
                    label(pipeline),
                    label(flow)
                );
            }
        }
    }
    out
}

/// A label value escaped for the text format.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
