//! A validated pipeline as Spark Declarative Pipelines' commands:
//! `CreateDataflowGraph`, a `DefineOutput` per dataset and sink, a
//! `DefineFlow` per flow (its plan as a relation, or an AUTO CDC flow's
//! details), a `DefineSqlGraphElements` per SQL library file sent as text,
//! and `StartRun`.
//!
//! What Spark cannot run is collected first, every item at once, each with
//! why and what to do: nothing is dropped silently.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use arrow::datatypes::SchemaRef;
use pipelines_core::conf::LATE_ROWS_TO;
use pipelines_core::definition::DatasetType;
use pipelines_core::error::{Diagnostic, Diagnostics, Origin};
use pipelines_core::graph::{DatasetNode, FlowNode};
use pipelines_core::registry::FlowKind;
use pipelines_core::remote::RemoteRequest;
use pipelines_core::spec::Trigger;
use pipelines_core::OutputMode;

use crate::expr::{self, Untranslatable};
use crate::proto::pipeline_command::{
    define_flow, define_output, CommandType, CreateDataflowGraph, DefineFlow, DefineOutput,
    DefineSqlGraphElements, StartRun,
};
use crate::proto::{OutputType, SourceCodeLocation};
use crate::relation::{remote_path, RelationBuilder};

/// The sink formats Spark writes to from a pipeline.
pub const SPARK_SINK_FORMATS: &[&str] = &[
    "kafka", "delta", "parquet", "json", "csv", "orc", "text", "console",
];

/// Functions and settings this engine adds to SQL that Spark's SQL lacks: a
/// SQL file using one is translated from its plan instead of sent as text.
const ENGINE_SQL_FUNCTIONS: &[&str] = &["read_files", "read_kafka", "delta.`"];

/// One command to send, with what it defines (for messages).
#[derive(Clone, Debug)]
pub struct Step {
    /// What it defines, e.g. "flow `totals`" or "SQL file `x.sql`".
    pub subject: String,
    /// Where that was declared.
    pub origin: Option<Origin>,
    /// The command (its `dataflow_graph_id` set when sent).
    pub command: CommandType,
}

/// Every command of a pipeline, in the order they are sent.
#[derive(Clone, Debug)]
pub struct Translation {
    /// Opens the graph.
    pub create: CreateDataflowGraph,
    /// Datasets, flows and SQL files.
    pub steps: Vec<Step>,
    /// Runs it (or checks it: `dry`).
    pub start: StartRun,
    /// What is sent differently than it runs here (shown, not fatal).
    pub warnings: Vec<String>,
    /// The SQL files sent as text, relative to the spec's directory.
    pub sql_files: Vec<String>,
}

/// The commands of `request`, or every reason Spark cannot run it.
pub fn translate(request: &RemoteRequest<'_>) -> Result<Translation, Diagnostics> {
    let graph = request.graph;
    let mut problems = Diagnostics::default();
    let mut warnings = Vec::new();

    // SQL files in Spark's SQL are sent as text; the others' datasets and
    // flows are translated like Rust ones.
    let sql_text_files = sql_files_sent_as_text(request);

    let from_text = |origin: &Option<Origin>| match origin {
        Some(Origin::Library { file, .. }) => sql_text_files.contains_key(file),
        _ => false,
    };

    let mut steps = Vec::new();
    for d in graph.datasets.values() {
        check_dataset(d, &mut problems, &mut warnings);
        if from_text(&d.def.origin) {
            continue;
        }
        steps.push(Step {
            subject: d.def.subject(),
            origin: d.def.origin.clone(),
            command: CommandType::DefineOutput(define_output(d)),
        });
    }

    let catalog: BTreeMap<String, SchemaRef> = graph
        .datasets
        .iter()
        .filter_map(|(n, d)| d.schema.clone().map(|s| (n.clone(), s)))
        .collect();
    let mut next_plan_id = 0i64;
    for f in graph.ordered_flows() {
        check_flow(f, graph.datasets.get(&f.def.target), &mut problems);
        flow_warnings(f, &mut warnings);
        if from_text(&f.def.origin) {
            continue;
        }
        match define_flow(f, &catalog, request.base_dir, &mut next_plan_id) {
            Ok(flow) => steps.push(Step {
                subject: format!("flow `{}`", f.def.name),
                origin: f.def.origin.clone(),
                command: CommandType::DefineFlow(flow),
            }),
            Err(u) => problems.push(refusal(
                format!("flow `{}`", f.def.name),
                f.def.origin.clone(),
                format!("it uses {}; {}", u.what, u.fix),
            )),
        }
    }

    let mut sql_files = Vec::new();
    for (shown, (relative, text)) in &sql_text_files {
        sql_files.push(relative.clone());
        steps.push(Step {
            subject: format!("SQL file `{shown}`"),
            origin: None,
            command: CommandType::DefineSqlGraphElements(DefineSqlGraphElements {
                dataflow_graph_id: None,
                sql_file_path: Some(relative.clone()),
                sql_text: Some(text.clone()),
            }),
        });
    }

    if !problems.is_empty() {
        return Err(problems);
    }
    let spec = request.spec;
    Ok(Translation {
        create: CreateDataflowGraph {
            default_catalog: spec.catalog.clone(),
            default_database: spec.database.clone(),
            // This engine's own settings (`pipelines.*`) stay here.
            sql_conf: graph
                .configuration
                .iter()
                .filter(|(k, _)| !k.starts_with("pipelines."))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        },
        steps,
        start: StartRun {
            dataflow_graph_id: None,
            full_refresh_selection: request.full_refresh.to_vec(),
            full_refresh_all: Some(request.full_refresh_all),
            refresh_selection: request.refresh.to_vec(),
            dry: Some(request.action == pipelines_core::remote::RemoteAction::DryRun),
            storage: Some(storage_uri(&spec.storage, request.base_dir)),
        },
        warnings,
        sql_files,
    })
}

/// One refusal: what, where, why and what to do, on one line.
fn refusal(subject: String, origin: Option<Origin>, why: String) -> Diagnostic {
    Diagnostic::new(format!("cannot run on Spark: {why}"))
        .subject(subject)
        .origin(origin)
}

/// Why expectations cannot go to Spark, when there are any.
fn expectations_refusal(expectations: &[pipelines_core::Expectation]) -> Option<String> {
    if expectations.is_empty() {
        return None;
    }
    let names: Vec<&str> = expectations.iter().map(|e| e.name.as_str()).collect();
    Some(format!(
        "its expectations ({}) are not part of open-source Spark's pipelines; remove them for the remote run or run this pipeline on this engine",
        names.join(", ")
    ))
}

fn check_dataset(d: &DatasetNode, problems: &mut Diagnostics, warnings: &mut Vec<String>) {
    let subject = d.def.subject();
    let origin = d.def.origin.clone();
    if d.def.dataset_type() == DatasetType::Sink {
        let format = d.format();
        let why = match format.as_str() {
            "foreach_batch" => Some(format!(
                "a foreach-batch sink calls a Rust function, which Spark cannot run; \
                 write to a sink Spark has ({}) or run this pipeline on this engine",
                SPARK_SINK_FORMATS.join(", ")
            )),
            f if !SPARK_SINK_FORMATS.contains(&f) => Some(format!(
                "Spark has no `{f}` sink for pipelines; write to one of {} or run this pipeline on this engine",
                SPARK_SINK_FORMATS.join(", ")
            )),
            _ => None,
        };
        if let Some(why) = why {
            problems.push(refusal(subject.clone(), origin.clone(), why));
        }
    }
    if let Some(why) = expectations_refusal(&d.def.expectations) {
        problems.push(refusal(subject.clone(), origin.clone(), why));
    }
    if let Some(q) = &d.def.quarantine {
        problems.push(refusal(
            subject.clone(),
            origin.clone(),
            format!("its quarantine `{q}` is this engine's; remove it for the remote run or run this pipeline on this engine"),
        ));
    }
    if d.def.dataset_type() != DatasetType::Sink {
        if let Some(p) = &d.def.path {
            warnings.push(format!(
                "{subject}: `path: {p}` is not sent; on Spark the table lives in the cluster's catalog"
            ));
        }
        if !d.def.options.is_empty() {
            let keys: Vec<&str> = d.def.options.keys().map(String::as_str).collect();
            warnings.push(format!(
                "{subject}: its options ({}) are not sent; on Spark the cluster's table settings apply",
                keys.join(", ")
            ));
        }
    }
}

fn check_flow(f: &FlowNode, target: Option<&DatasetNode>, problems: &mut Diagnostics) {
    let subject = format!("flow `{}`", f.def.name);
    let origin = f.def.origin.clone();
    let is_view = target.is_some_and(|t| t.def.dataset_type() == DatasetType::TemporaryView);
    if f.def.kind == FlowKind::Update
        || (f.streaming
            && !is_view
            && f.output_mode != OutputMode::Append
            && f.def.auto_cdc.is_none())
    {
        problems.push(refusal(
            subject.clone(),
            origin.clone(),
            format!(
                "it writes in {} mode, and Spark's pipeline protocol sends no output mode (its flows append); \
                 make it an append flow or run this pipeline on this engine",
                f.output_mode
            ),
        ));
    }
    if f.def.conf.contains_key(LATE_ROWS_TO) || f.options.contains_key(LATE_ROWS_TO) {
        problems.push(refusal(
            subject.clone(),
            origin.clone(),
            format!("`{LATE_ROWS_TO}` is this engine's (Spark drops late rows); remove it for the remote run"),
        ));
    }
    if let Some(why) = expectations_refusal(&f.def.expectations) {
        problems.push(refusal(subject.clone(), origin.clone(), why));
    }
    if let Some(q) = &f.def.quarantine {
        problems.push(refusal(
            subject.clone(),
            origin.clone(),
            format!("its quarantine `{q}` is this engine's; remove it for the remote run"),
        ));
    }
    if f.def.import_checkpoint.is_some() {
        problems.push(refusal(
            subject,
            origin,
            "`import_checkpoint` has no Spark Connect form; import the checkpoint on the cluster or drop the setting".into(),
        ));
    }
}

/// What a flow has that a remote run does not use: shown, not fatal.
fn flow_warnings(f: &FlowNode, warnings: &mut Vec<String>) {
    let subject = format!("flow `{}`", f.def.name);
    if !matches!(f.trigger, Trigger::Default | Trigger::AvailableNow) {
        warnings.push(format!(
            "{subject}: its trigger ({}) does not apply; Spark runs every flow once over the available input (a triggered run)",
            f.trigger.describe()
        ));
    }
    if !f.options.is_empty() {
        let keys: Vec<&str> = f.options.keys().map(String::as_str).collect();
        warnings.push(format!(
            "{subject}: the spec's options for it ({}) are not sent; set them on the read or the sink in the flow's code",
            keys.join(", ")
        ));
    }
    let ours: Vec<&str> = f
        .def
        .conf
        .keys()
        .filter(|k| k.starts_with("pipelines.") && k.as_str() != LATE_ROWS_TO)
        .map(String::as_str)
        .collect();
    if !ours.is_empty() {
        warnings.push(format!(
            "{subject}: this engine's settings ({}) are not sent to Spark",
            ours.join(", ")
        ));
    }
}

fn location(origin: &Option<Origin>) -> Option<SourceCodeLocation> {
    let (file, line) = match origin.as_ref()? {
        Origin::Code { file, line } => (file.clone(), i32::try_from(*line).ok()),
        Origin::Spec { file, line } => (file.clone(), line.and_then(|l| i32::try_from(l).ok())),
        Origin::Library { file, line, .. } => (file.clone(), i32::try_from(*line).ok()),
    };
    Some(SourceCodeLocation {
        file_name: Some(file),
        line_number: line,
        ..Default::default()
    })
}

fn define_output(d: &DatasetNode) -> DefineOutput {
    let def = &d.def;
    let (output_type, details) = match def.dataset_type() {
        DatasetType::Sink => {
            let mut options: std::collections::HashMap<String, String> = def
                .options
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if let Some(p) = &def.path {
                options.insert("path".into(), p.clone());
            }
            (
                OutputType::Sink,
                Some(define_output::Details::SinkDetails(
                    define_output::SinkDetails {
                        options,
                        format: Some(d.format()),
                    },
                )),
            )
        }
        kind => {
            let output_type = match kind {
                DatasetType::MaterializedView => OutputType::MaterializedView,
                DatasetType::TemporaryView => OutputType::TemporaryView,
                _ => OutputType::Table,
            };
            let details = (kind != DatasetType::TemporaryView).then(|| {
                define_output::Details::TableDetails(define_output::TableDetails {
                    table_properties: Default::default(),
                    partition_cols: def.partition_cols.clone(),
                    format: def
                        .format
                        .as_ref()
                        .map(|f| pipelines_core::connector::normalize(f)),
                    schema: def
                        .schema
                        .clone()
                        .map(define_output::table_details::Schema::SchemaString),
                    clustering_columns: Vec::new(),
                })
            });
            (output_type, details)
        }
    };
    DefineOutput {
        dataflow_graph_id: None,
        output_name: Some(def.name.clone()),
        output_type: Some(output_type as i32),
        comment: def.comment.clone(),
        source_code_location: location(&def.origin),
        details,
    }
}

fn define_flow(
    f: &FlowNode,
    catalog: &BTreeMap<String, SchemaRef>,
    base_dir: &Path,
    next_plan_id: &mut i64,
) -> Result<DefineFlow, Untranslatable> {
    let details = match &f.def.auto_cdc {
        Some(cdc) => {
            let attrs = |cols: &Option<Vec<String>>| -> Vec<crate::proto::Expression> {
                cols.iter()
                    .flatten()
                    .map(|c| expr::attribute(&[c.as_str()]))
                    .collect()
            };
            define_flow::Details::AutoCdcFlowDetails(define_flow::AutoCdcFlowDetails {
                source: Some(cdc.source.clone()),
                keys: cdc
                    .keys
                    .iter()
                    .map(|k| expr::attribute(&[k.as_str()]))
                    .collect(),
                sequence_by: Some(expr::sql_text(&cdc.sequence_by)),
                apply_as_deletes: cdc.apply_as_deletes.as_deref().map(expr::sql_text),
                apply_as_truncates: cdc.apply_as_truncates.as_deref().map(expr::sql_text),
                column_list: attrs(&cdc.column_list),
                except_column_list: attrs(&cdc.except_column_list),
                stored_as_scd_type: match cdc.stored_as_scd_type {
                    Some(2) => define_flow::ScdType::ScdType2,
                    _ => define_flow::ScdType::ScdType1,
                } as i32,
                track_history_column_list: attrs(&cdc.track_history_column_list),
                track_history_except_column_list: attrs(&cdc.track_history_except_column_list),
                ignore_null_updates_column_list: Vec::new(),
                ignore_null_updates_except_column_list: Vec::new(),
            })
        }
        None => {
            let resolved = f.plan.resolve(catalog).ok();
            let relation =
                RelationBuilder::new(resolved.as_ref(), base_dir, next_plan_id).build(&f.plan)?;
            define_flow::Details::RelationFlowDetails(define_flow::WriteRelationFlowDetails {
                relation: Some(relation),
            })
        }
    };
    let sql_conf = f
        .def
        .conf
        .iter()
        .filter(|(k, _)| !k.starts_with("pipelines."))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Ok(DefineFlow {
        dataflow_graph_id: None,
        flow_name: Some(f.def.name.clone()),
        target_dataset_name: Some(f.def.target.clone()),
        sql_conf,
        client_id: None,
        source_code_location: location(&f.def.origin),
        details: Some(details),
        once: f.def.once.then_some(true),
    })
}

/// The SQL library files sent as text, by their displayed path: (path
/// relative to the spec's directory, text). A file using this engine's own
/// SQL functions (`read_files`, ...) is not among them.
fn sql_files_sent_as_text(request: &RemoteRequest<'_>) -> BTreeMap<String, (String, String)> {
    let graph = request.graph;
    let mut shown: BTreeSet<String> = BTreeSet::new();
    let origins = graph
        .datasets
        .values()
        .map(|d| &d.def.origin)
        .chain(graph.flows.values().map(|f| &f.def.origin));
    for o in origins {
        if let Some(Origin::Library { file, .. }) = o {
            shown.insert(file.clone());
        }
    }
    let mut out = BTreeMap::new();
    for file in shown {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let lower = text.to_ascii_lowercase();
        if ENGINE_SQL_FUNCTIONS.iter().any(|f| lower.contains(f)) {
            continue;
        }
        out.insert(
            file.clone(),
            (relative_to(Path::new(&file), request.base_dir), text),
        );
    }
    out
}

/// `path` relative to `base` when below it (both made absolute), else as given.
fn relative_to(path: &Path, base: &Path) -> String {
    let abs =
        |p: &Path| -> PathBuf { std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()) };
    let (p, b) = (abs(path), abs(base));
    p.strip_prefix(&b)
        .map(|r| r.display().to_string())
        .unwrap_or_else(|_| path.display().to_string())
}

/// The spec's storage as the URI Spark takes: URLs as written, local paths
/// as `file://` + the absolute path.
pub fn storage_uri(storage: &str, base_dir: &Path) -> String {
    if storage.contains("://") {
        return storage.to_string();
    }
    format!("file://{}", remote_path(storage, base_dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_is_a_uri() {
        let base = Path::new("/p");
        assert_eq!(
            storage_uri("./pipeline-storage", base),
            "file:///p/pipeline-storage"
        );
        assert_eq!(storage_uri("s3://b/x", base), "s3://b/x");
        assert_eq!(storage_uri("file:///tmp/s", base), "file:///tmp/s");
    }
}
