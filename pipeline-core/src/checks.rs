//! Query-shape checks made before any data moves: which query may use which
//! output mode (Spark's UnsupportedOperationChecker rules).
//!
//! The graph builder calls [`check_query`] for every resolved flow. The
//! sink-capability rule (update into a file or Delta sink) is checked by the
//! graph itself; the watermark and stateful-operator rules are added here by
//! the stateful-streaming work.

use arrow::datatypes::SchemaRef;

use crate::definition::FlowDef;
use crate::error::Diagnostic;
use crate::formats::OutputMode;
use crate::graph::DatasetNodeRef;
use crate::plan::DataFrame;

/// Checks one flow's query against its output mode and target; returns every problem.
pub fn check_query(
    _flow: &FlowDef,
    _plan: &DataFrame,
    _schema: &SchemaRef,
    _target: DatasetNodeRef<'_>,
    _mode: OutputMode,
) -> Vec<Diagnostic> {
    Vec::new()
}
