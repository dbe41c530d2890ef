//! The dataflow graph of a pipeline and its validation.
//!
//! Nodes are datasets (streaming tables, materialized views, temporary views,
//! sinks) and flows; edges run from each dataset a flow reads to the flow, and
//! from the flow to its target. [`build`] calls every flow's query function,
//! resolves the plans in topological order (so each flow sees the schemas of
//! the datasets it reads), and checks the whole pipeline, collecting **every**
//! problem before returning.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::AssertUnwindSafe;

use arrow::datatypes::SchemaRef;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;

use crate::cdc::CdcLayout;
use crate::checks;
use crate::conf::LATE_ROWS_TO;
use crate::definition::{DatasetDef, DatasetType, FlowDef};
use crate::error::{Diagnostic, Diagnostics, Origin, PlanError};
use crate::expectations::{quarantine_schema, Expectation, ExpectationAction};
use crate::fixes::Language;
use crate::formats::{describe_modes, did_you_mean, OutputMode, OUTPUT_MODE_CONF_KEY};
use crate::plan::{Catalog, DataFrame, ResolvedPlan};
use crate::real_time_checks;
use crate::registry::FlowKind;
use crate::session::Session;
use crate::spec::Trigger;

pub use crate::definition::{Declarations, FlowSettings};

/// A node of the dataflow graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GraphNode {
    /// A dataset or sink, by name.
    Dataset(String),
    /// A flow, by name.
    Flow(String),
}

/// A validated dataset with its resolved schema.
#[derive(Clone, Debug)]
pub struct DatasetNode {
    /// The declaration.
    pub def: DatasetDef,
    /// Output schema, from its declared schema or its first flow.
    pub schema: Option<SchemaRef>,
    /// Names of the flows writing into it.
    pub flows: Vec<String>,
}

impl DatasetNode {
    /// The storage or sink format (tables default to Delta).
    pub fn format(&self) -> String {
        match (&self.def.format, self.def.dataset_type()) {
            (Some(f), _) => crate::connector::normalize(f),
            (None, DatasetType::Sink) => String::new(),
            (None, _) => crate::connector::default_table_format().to_string(),
        }
    }
}

/// A validated flow with its plan.
#[derive(Clone, Debug)]
pub struct FlowNode {
    /// The declaration.
    pub def: FlowDef,
    /// The plan its query function returned.
    pub plan: DataFrame,
    /// The plan's output schema.
    pub schema: SchemaRef,
    /// Whether the query is streaming.
    pub streaming: bool,
    /// The output mode it writes with: the single source of truth for the
    /// runtime (see [`output_mode_of`]).
    pub output_mode: OutputMode,
    /// Its trigger (spec first, then the flow's `conf`, else the default).
    pub trigger: Trigger,
    /// Option overrides from the spec.
    pub options: BTreeMap<String, String>,
    /// Datasets it reads, with whether each read is streaming.
    pub reads: Vec<(String, bool)>,
    /// The expectations it applies to its rows: its target's, then its own.
    pub expectations: Vec<Expectation>,
    /// Where rows failing a drop-expectation go: its own quarantine, else
    /// its target's.
    pub quarantine: Option<String>,
    /// An AUTO CDC flow's target layout (its plan's rows are the change
    /// feed; the target's schema is [`CdcLayout::target_schema`]).
    pub cdc: Option<CdcLayout>,
}

/// A validated pipeline: datasets, flows, the graph and an execution order.
#[derive(Clone, Debug)]
pub struct PipelineGraph {
    /// Pipeline name.
    pub name: String,
    /// Pipeline-wide settings.
    pub configuration: BTreeMap<String, String>,
    /// Datasets and sinks by name.
    pub datasets: BTreeMap<String, DatasetNode>,
    /// Flows by name.
    pub flows: BTreeMap<String, FlowNode>,
    /// Flow names, upstream before downstream.
    pub flow_order: Vec<String>,
    /// The dataflow graph.
    pub graph: DiGraph<GraphNode, ()>,
    /// What the checks could not look at now and the run will (a database
    /// that did not answer): shown by `dry-run` and `run`, not fatal.
    pub warnings: Vec<Diagnostic>,
}

impl PipelineGraph {
    /// Flows in execution order.
    pub fn ordered_flows(&self) -> impl Iterator<Item = &FlowNode> {
        self.flow_order.iter().filter_map(|n| self.flows.get(n))
    }
}

struct SchemaCatalog<'a>(&'a BTreeMap<String, SchemaRef>);

impl Catalog for SchemaCatalog<'_> {
    fn dataset_schema(&self, name: &str) -> Option<SchemaRef> {
        self.0.get(name).cloned()
    }
}

/// `schema` without the watermark marks of its fields.
fn without_watermarks(schema: &SchemaRef) -> SchemaRef {
    let fields: Vec<arrow::datatypes::Field> = schema
        .fields()
        .iter()
        .map(|f| {
            let mut md = f.metadata().clone();
            md.remove(crate::plan::WATERMARK_METADATA_KEY);
            f.as_ref().clone().with_metadata(md)
        })
        .collect();
    std::sync::Arc::new(arrow::datatypes::Schema::new_with_metadata(
        fields,
        schema.metadata().clone(),
    ))
}

/// Builds and validates the pipeline graph, returning every problem found.
pub fn build(decls: Declarations) -> Result<PipelineGraph, Diagnostics> {
    let mut diags = Diagnostics::default();

    if decls.flows.is_empty() && decls.datasets.is_empty() {
        diags.push(
            Diagnostic::new(format!("pipeline `{}` declares no datasets and no flows", decls.name))
                .help(
                    "declare a flow with #[table], #[append_flow(target = \"...\")] or #[update_flow(target = \"...\")], \
                     and make sure the module declaring it is compiled into this binary",
                ),
        );
        return Err(diags);
    }
    let (datasets, flows) = unique_names(&decls, &mut diags);
    let mut b = Build {
        decls: &decls,
        diags,
        warnings: Vec::new(),
        datasets,
        flows,
        modes: BTreeMap::new(),
        flows_of: BTreeMap::new(),
        plans: BTreeMap::new(),
        triggers: BTreeMap::new(),
        reads_of: BTreeMap::new(),
        graph: DiGraph::new(),
        order: Vec::new(),
        schemas: BTreeMap::new(),
        resolved: BTreeMap::new(),
        cdc_layouts: BTreeMap::new(),
    };
    b.check_formats();
    b.check_locations();
    b.check_flow_settings();
    b.output_modes();
    b.sql_names_ignoring_case();
    b.check_targets();
    b.check_auto_cdc_targets();
    b.build_plans();
    b.sql_reads_ignoring_case();
    b.check_options();
    b.check_reads();
    b.dataflow_graph();
    b.inline_views();
    b.resolve_schemas();
    b.check_expectations();
    b.check_query_shapes();
    b.finish()
}

/// The state of one [`build`]: what each phase found, and every problem
/// found so far. Each phase reports into `diags` and leaves out what it
/// could not validate, so later phases don't report consequences of the
/// same mistake.
struct Build<'d> {
    decls: &'d Declarations,
    diags: Diagnostics,
    /// What could not be checked now (see [`PipelineGraph::warnings`]).
    warnings: Vec<Diagnostic>,
    datasets: BTreeMap<String, DatasetDef>,
    flows: BTreeMap<String, FlowDef>,
    /// Output mode per flow whose mode is valid.
    modes: BTreeMap<String, OutputMode>,
    /// The flows writing each dataset (late-row sinks included).
    flows_of: BTreeMap<String, Vec<String>>,
    plans: BTreeMap<String, DataFrame>,
    triggers: BTreeMap<String, Trigger>,
    /// The datasets each flow reads, and whether as a stream.
    reads_of: BTreeMap<String, Vec<(String, bool)>>,
    graph: DiGraph<GraphNode, ()>,
    /// Flows in topological order.
    order: Vec<String>,
    schemas: BTreeMap<String, SchemaRef>,
    resolved: BTreeMap<String, ResolvedPlan>,
    /// AUTO CDC flows' target layouts.
    cdc_layouts: BTreeMap<String, CdcLayout>,
}

/// Datasets and flows by name; a second declaration of a name, and a flow
/// named like a dataset it does not define, are problems.
fn unique_names(
    decls: &Declarations,
    diags: &mut Diagnostics,
) -> (BTreeMap<String, DatasetDef>, BTreeMap<String, FlowDef>) {
    let mut datasets: BTreeMap<String, DatasetDef> = BTreeMap::new();
    for d in &decls.datasets {
        if let Some(problem) = unsafe_name(&d.name) {
            diags.push(
                Diagnostic::new(format!("the name `{}` {problem}", d.name))
                    .subject(d.subject())
                    .origin(d.origin.clone())
                    .help(NAME_HELP),
            );
        }
        if let Some(first) = datasets.get(&d.name) {
            diags.push(
                Diagnostic::new(format!(
                    "`{}` is declared twice: as a {}{} and as a {}",
                    d.name,
                    first.dataset_type().describe(),
                    at(&first.origin),
                    d.dataset_type().describe()
                ))
                .subject(format!("dataset `{}`", d.name))
                .origin(d.origin.clone())
                .help("rename one of them or remove the duplicate declaration"),
            );
            continue;
        }
        datasets.insert(d.name.clone(), d.clone());
    }
    let mut flows: BTreeMap<String, FlowDef> = BTreeMap::new();
    for f in &decls.flows {
        if let Some(problem) = unsafe_name(&f.name) {
            diags.push(
                Diagnostic::new(format!("the name `{}` {problem}", f.name))
                    .subject(f.subject())
                    .origin(f.origin.clone())
                    .help(NAME_HELP),
            );
        }
        if let Some(first) = flows.get(&f.name) {
            diags.push(
                Diagnostic::new(format!("flow name `{}` is used twice (first{})", f.name, at(&first.origin)))
                    .subject(f.subject())
                    .origin(f.origin.clone())
                    .help("give one of them another name: #[append_flow(target = \"...\", name = \"other_name\")]"),
            );
            continue;
        }
        flows.insert(f.name.clone(), f.clone());
    }
    for f in flows.values() {
        if let Some(d) = datasets.get(&f.name) {
            if !f.defines_dataset && f.target != f.name {
                diags.push(
                    Diagnostic::new(format!(
                        "flow name `{}` is also the name of {}{}, but the flow writes to `{}`",
                        f.name,
                        d.subject(),
                        at(&d.origin),
                        f.target
                    ))
                    .subject(f.subject())
                    .origin(f.origin.clone())
                    .help(format!(
                        "rename the flow, e.g. name = \"{}_to_{}\"",
                        f.name, f.target
                    )),
                );
            }
        }
    }
    (datasets, flows)
}

impl Build<'_> {
    /// Every option of every sink, table, source and flow against its
    /// declaration ([`crate::option_checks`]).
    fn check_options(&mut self) {
        let problems = crate::option_checks::check_options(
            self.decls,
            &self.datasets,
            &self.flows,
            &self.plans,
        );
        for d in problems {
            self.diags.push(d);
        }
    }

    /// Each dataset's and sink's format is known; required options and `merge_keys` fit it.
    fn check_formats(&mut self) {
        let Build {
            datasets, diags, ..
        } = self;
        for d in datasets.values() {
            let Some(format) = &d.format else {
                if d.dataset_type() == DatasetType::Sink {
                    diags.push(
                        Diagnostic::new("has no format")
                            .subject(d.subject())
                            .origin(d.origin.clone())
                            .help(format!(
                                "set one of: {}",
                                crate::connector::sink_names().join(", ")
                            )),
                    );
                }
                continue;
            };
            let known: Vec<&str> = match d.dataset_type() {
                DatasetType::Sink => crate::connector::sink_names(),
                DatasetType::TemporaryView => continue,
                _ => crate::connector::table_names(),
            };
            let norm = crate::connector::normalize(format);
            if !known.contains(&norm.as_str()) {
                let mut help = format!("known formats: {}", known.join(", "));
                if let Some(s) = did_you_mean(&norm, known.iter().copied()) {
                    help = format!("did you mean `{s}`? {help}");
                }
                diags.push(
                    Diagnostic::new(format!("unknown format `{format}`"))
                        .subject(d.subject())
                        .origin(d.origin.clone())
                        .help(help),
                );
                continue;
            }
            let Some(sink) = crate::connector::sink(&norm) else {
                continue;
            };
            if d.dataset_type() == DatasetType::Sink {
                for required in sink.options().missing(&d.options) {
                    diags.push(
                        Diagnostic::new(format!("{norm} sink needs the option `{required}`"))
                            .subject(d.subject())
                            .origin(d.origin.clone())
                            .help(format!("add `{required}: ...` under the sink's `options:`")),
                    );
                }
            }
            let upsert_target = d.dataset_type() == DatasetType::Sink && sink.takes_merge_keys();
            if !d.merge_keys.is_empty() && !upsert_target {
                diags.push(
                    misplaced_merge_keys()
                        .subject(d.subject())
                        .origin(d.origin.clone()),
                );
            }
        }
    }

    /// Each table's and sink's `path` is a location, and one in object
    /// storage is written by a format that can write there.
    fn check_locations(&mut self) {
        let Build {
            datasets, diags, ..
        } = self;
        for d in datasets.values() {
            let path = match d.dataset_type() {
                DatasetType::TemporaryView => continue,
                DatasetType::Sink => d.options.get("path").or(d.path.as_ref()),
                _ => d.path.as_ref(),
            };
            let Some(path) = path else { continue };
            let norm = match &d.format {
                Some(f) => crate::connector::normalize(f),
                None if d.dataset_type() == DatasetType::Sink => continue,
                None => crate::connector::default_table_format().to_string(),
            };
            let Some(sink) = crate::connector::sink(&norm) else {
                continue;
            };
            match crate::engine::storage::object_key(path) {
                Err(why) => diags.push(
                    Diagnostic::new(format!("`path`: {why}"))
                        .subject(d.subject())
                        .origin(d.origin.clone())
                        .help("give a local path or an `s3://bucket/prefix` URL"),
                ),
                Ok(Some(key)) if !sink.writes_object_storage() => {
                    let capable: Vec<&str> = crate::connector::sink_names()
                        .into_iter()
                        .filter(|n| {
                            crate::connector::sink(n).is_some_and(|c| c.writes_object_storage())
                        })
                        .collect();
                    diags.push(
                        Diagnostic::new(format!(
                            "{norm} {} in object storage ({}) are not supported yet",
                            if d.dataset_type() == DatasetType::Sink { "sinks" } else { "tables" },
                            key.url()
                        ))
                        .subject(d.subject())
                        .origin(d.origin.clone())
                        .help(if capable.is_empty() {
                            "keep it on the local file system (this build links no format that writes to object storage)".to_string()
                        } else {
                            format!("store it as {} there, or keep it on the local file system", capable.join(" or "))
                        }),
                    );
                }
                _ => {}
            }
        }
    }

    /// Every `flows.<name>` entry of the spec names a flow.
    fn check_flow_settings(&mut self) {
        let Build {
            decls,
            flows,
            diags,
            ..
        } = self;
        for (name, settings) in &decls.flow_settings {
            if !flows.contains_key(name) {
                let mut help = "the names under `flows:` must be flow names (function names unless `name = ...` is set)".to_string();
                if let Some(s) = did_you_mean(name, flows.keys().map(String::as_str)) {
                    help = format!("did you mean `{s}`? {help}");
                }
                diags.push(
                    Diagnostic::new(format!("`flows.{name}` in the spec names no declared flow"))
                        .subject(format!("flow `{name}`"))
                        .origin(settings.origin.clone())
                        .help(help),
                );
            }
        }
    }

    /// The output mode of each flow ([`output_mode_of`]).
    fn output_modes(&mut self) {
        let Build {
            decls,
            flows,
            modes,
            diags,
            ..
        } = self;
        // A flow whose mode is invalid is left out, so the mode-dependent checks
        // below don't report consequences of the same mistake.
        for f in flows.values() {
            match output_mode_of(f, decls.flow_settings.get(&f.name)) {
                Ok(mode) => {
                    modes.insert(f.name.clone(), mode);
                }
                Err(errors) => {
                    for d in errors {
                        diags.push(d);
                    }
                }
            }
        }
    }

    /// SQL names datasets case-insensitively, as Spark does: a SQL flow's
    /// target written in another case is the one dataset of that name.
    fn sql_names_ignoring_case(&mut self) {
        let Build {
            datasets, flows, ..
        } = self;
        for f in flows
            .values_mut()
            .filter(|f| Language::of(f) == Language::Sql)
        {
            if let Some(name) = only_case_match(&f.target, datasets) {
                f.target = name;
            }
        }
    }

    /// A SQL flow's reads of a dataset written in another case read the one
    /// dataset of that name.
    fn sql_reads_ignoring_case(&mut self) {
        let Build {
            datasets,
            flows,
            plans,
            ..
        } = self;
        for (name, plan) in plans.iter_mut() {
            if !flows
                .get(name)
                .is_some_and(|f| Language::of(f) == Language::Sql)
            {
                continue;
            }
            *plan = plan.with_dataset_reads_replaced(&mut |ds, streaming, options| {
                let exact = only_case_match(ds, datasets)?;
                Some(DataFrame::from_node(crate::plan::PlanNode::DatasetRead {
                    name: exact,
                    streaming,
                    options: options.clone(),
                }))
            });
        }
    }

    /// Each flow's target (and late-rows sink) exists and takes its mode; each dataset has the writers its type allows.
    fn check_targets(&mut self) {
        let Build {
            decls,
            datasets,
            flows,
            modes,
            flows_of,
            diags,
            ..
        } = self;
        for f in flows.values() {
            match datasets.get(&f.target) {
                None => {
                    let mut help = Language::of(f).declare_target().to_string();
                    if let Some(s) = did_you_mean(&f.target, datasets.keys().map(String::as_str)) {
                        help = format!("did you mean `{s}`? or {help}");
                    }
                    diags.push(
                        Diagnostic::new(format!("targets `{}`, which is not declared", f.target))
                            .subject(f.subject())
                            .origin(f.origin.clone())
                            .help(help),
                    );
                }
                Some(d) => {
                    flows_of
                        .entry(d.name.clone())
                        .or_default()
                        .push(f.name.clone());
                    if f.kind == FlowKind::Update && d.dataset_type() != DatasetType::Sink {
                        let fmt = d
                            .format
                            .as_deref()
                            .map(crate::connector::normalize)
                            .unwrap_or_else(|| {
                                crate::connector::default_table_format().to_string()
                            });
                        let modes = crate::connector::accepted_modes(&fmt, false)
                            .map(describe_modes)
                            .unwrap_or_default();
                        diags.push(
                            Diagnostic::new(format!(
                                "update flows can only target sinks; `{}` is a {} {} (accepts {})",
                                d.name,
                                crate::connector::title(&fmt),
                                d.dataset_type().describe(),
                                modes
                            ))
                            .subject(f.subject())
                            .origin(f.origin.clone())
                            .help(Language::of(f).update_flow_into_table()),
                        );
                    } else if let Some(&mode) = modes.get(&f.name) {
                        if let Some(d) = mode_not_accepted(f, d, mode) {
                            diags.push(d);
                        }
                    }
                }
            }
        }
        // `pipelines.lateRowsTo`: rows dropped as late go to a sink, which then
        // has a writer.
        for f in flows.values() {
            let settings = decls.flow_settings.get(&f.name);
            let Some(late) = settings
                .and_then(|s| s.options.get(LATE_ROWS_TO))
                .or_else(|| f.conf.get(LATE_ROWS_TO))
            else {
                continue;
            };
            let origin = settings
                .and_then(|s| s.option_origins.get(LATE_ROWS_TO).cloned())
                .or_else(|| f.origin.clone());
            match datasets.get(late) {
                Some(d) if d.dataset_type() == DatasetType::Sink => {
                    flows_of
                        .entry(d.name.clone())
                        .or_default()
                        .push(f.name.clone());
                }
                Some(d) => diags.push(
                    Diagnostic::new(format!(
                        "`{LATE_ROWS_TO}` names {} `{late}`, but late rows go to a sink",
                        d.dataset_type().describe()
                    ))
                    .subject(f.subject())
                    .origin(origin)
                    .help("declare a sink with create_sink(...) or under `sinks:` and name it instead"),
                ),
                None => {
                    let mut help = format!(
                        "declare a sink for them, e.g. create_sink(\"{late}\", \"parquet\", [(\"path\", \"late/{late}\")]) or under `sinks:` in the spec"
                    );
                    if let Some(s) = did_you_mean(late, datasets.keys().map(String::as_str)) {
                        help = format!("did you mean `{s}`? or {help}");
                    }
                    diags.push(
                        Diagnostic::new(format!(
                            "`{LATE_ROWS_TO}` names `{late}`, which is not declared"
                        ))
                        .subject(f.subject())
                        .origin(origin)
                        .help(help),
                    );
                }
            }
        }
        check_quarantines(datasets, flows, flows_of, diags);
        for d in datasets.values() {
            let writers = flows_of.get(&d.name).map(Vec::len).unwrap_or(0);
            if writers == 0 {
                let help = match d.dataset_type() {
                    DatasetType::Sink => format!(
                        "write to it with #[append_flow(target = \"{0}\")] or #[update_flow(target = \"{0}\")], or remove it",
                        d.name
                    ),
                    _ => format!("write to it with #[append_flow(target = \"{}\")], or remove it", d.name),
                };
                diags.push(
                    Diagnostic::new("has no flow writing to it")
                        .subject(d.subject())
                        .origin(d.origin.clone())
                        .help(help),
                );
            } else if writers > 1
                && matches!(
                    d.dataset_type(),
                    DatasetType::MaterializedView | DatasetType::TemporaryView
                )
            {
                let names = flows_of[&d.name]
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ");
                diags.push(
                    Diagnostic::new(format!(
                        "has {writers} flows ({names}), but a {} is defined by exactly one query",
                        d.dataset_type().describe()
                    ))
                    .subject(d.subject())
                    .origin(d.origin.clone())
                    .help("make it a streaming table to take several flows, or union the queries into one"),
                );
            }
        }
    }

    /// AUTO CDC flows: the declaration itself, and a target that is a
    /// streaming table stored in a format that applies changes (MERGE),
    /// written by this flow alone.
    fn check_auto_cdc_targets(&mut self) {
        let Build {
            datasets,
            flows,
            flows_of,
            diags,
            ..
        } = self;
        for f in flows.values() {
            let Some(cdc) = &f.auto_cdc else { continue };
            for (what, help) in cdc.problems() {
                diags.push(cdc_diagnostic(f, what, help));
            }
            let Some(target) = datasets.get(&f.target) else {
                continue; // reported by check_targets
            };
            if target.dataset_type() != DatasetType::StreamingTable {
                diags.push(cdc_diagnostic(
                    f,
                    format!("targets {}, but changes are applied to a streaming table", target.subject()),
                    format!(
                        "declare `{0}` with create_streaming_table(\"{0}\", ...) or `CREATE STREAMING TABLE {0}`",
                        target.name
                    ),
                ));
                continue;
            }
            let format = target
                .format
                .as_deref()
                .map(crate::connector::normalize)
                .unwrap_or_else(|| crate::connector::default_table_format().to_string());
            if !crate::connector::sink(&format).is_some_and(|c| c.applies_changes()) {
                let able: Vec<String> = crate::connector::table_names()
                    .into_iter()
                    .filter(|n| crate::connector::sink(n).is_some_and(|c| c.applies_changes()))
                    .map(String::from)
                    .collect();
                diags.push(cdc_diagnostic(
                    f,
                    format!(
                        "targets {}, stored as {}, which cannot apply changes (no MERGE)",
                        target.subject(),
                        crate::connector::title(&format)
                    ),
                    if able.is_empty() {
                        "build with the `delta` feature: AUTO CDC writes Delta tables with MERGE"
                            .to_string()
                    } else {
                        format!(
                            "store the table as {} (`format: {}`)",
                            able.join(" or "),
                            able[0]
                        )
                    },
                ));
            }
            let others: Vec<String> = flows_of
                .get(&target.name)
                .into_iter()
                .flatten()
                .filter(|n| **n != f.name)
                .map(|n| format!("`{n}`"))
                .collect();
            if !others.is_empty() {
                diags.push(cdc_diagnostic(
                    f,
                    format!(
                        "targets {}, which flow{} {} also write{}",
                        target.subject(),
                        if others.len() == 1 { "" } else { "s" },
                        others.join(", "),
                        if others.len() == 1 { "s" } else { "" }
                    ),
                    "an AUTO CDC target is written by its AUTO CDC flow alone: union the change feeds into one view and apply that, or write the other flow to another table".to_string(),
                ));
            }
        }
    }

    /// Calls every flow's query function (a panic is a problem, not a crash) and reads its trigger.
    fn build_plans(&mut self) {
        let Build {
            decls,
            flows,
            plans,
            triggers,
            diags,
            ..
        } = self;
        for f in flows.values() {
            let mut conf = decls.configuration.clone();
            conf.extend(f.conf.clone());
            match Trigger::from_conf(&f.conf) {
                Ok(t) => {
                    let spec_trigger = decls
                        .flow_settings
                        .get(&f.name)
                        .and_then(|s| s.trigger.clone());
                    triggers.insert(
                        f.name.clone(),
                        spec_trigger.or(t).unwrap_or(Trigger::Default),
                    );
                }
                Err(e) => diags.push(
                    Diagnostic::new(e.to_string())
                        .subject(f.subject())
                        .origin(f.origin.clone()),
                ),
            }
            let session = Session::new()
                .with_conf(conf)
                .with_flow_name(f.name.clone());
            let built = std::panic::catch_unwind(AssertUnwindSafe(|| f.query.build(&session)));
            match built {
                Ok(Ok(df)) => {
                    plans.insert(f.name.clone(), df);
                }
                Ok(Err(e)) => diags.push(error_diagnostic(f, "could not build its query", e)),
                Err(panic) => {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".to_string());
                    diags.push(
                        Diagnostic::new(format!("its query function panicked: {what}"))
                            .subject(f.subject())
                            .origin(f.origin.clone())
                            .help("return an error with `?` instead of panicking"),
                    );
                }
            }
        }
    }

    /// What each plan reads exists and may be read that way; streaming and batch queries fit their targets.
    fn check_reads(&mut self) {
        let Build {
            datasets,
            flows,
            plans,
            reads_of,
            diags,
            ..
        } = self;
        for (name, plan) in plans.iter() {
            let f = &flows[name];
            let reads = plan.datasets_read();
            for (ds, streaming) in &reads {
                match datasets.get(ds) {
                    None => {
                        let mut help = Language::of(f).declare_dataset().to_string();
                        if let Some(s) = did_you_mean(ds, datasets.keys().map(String::as_str)) {
                            help = format!("did you mean `{s}`? or {help}");
                        }
                        diags.push(
                            Diagnostic::new(format!("reads `{ds}`, which is not declared"))
                                .subject(f.subject())
                                .origin(f.origin.clone())
                                .help(help),
                        );
                    }
                    Some(d) if d.dataset_type() == DatasetType::Sink => diags.push(
                        Diagnostic::new(format!("reads sink `{ds}`, but sinks are write-only"))
                            .subject(f.subject())
                            .origin(f.origin.clone())
                            .help("write into a streaming table instead and read that, or read the sink's storage as a source"),
                    ),
                    Some(d) if *streaming && d.dataset_type() == DatasetType::MaterializedView => diags.push(
                        Diagnostic::new(format!(
                            "reads materialized view `{ds}` as a stream, but materialized views are recomputed, not appended to"
                        ))
                        .subject(f.subject())
                        .origin(f.origin.clone())
                        .help(Language::of(f).read_view_as_batch(ds)),
                    ),
                    Some(_) => {}
                }
            }
            let streaming = plan.is_streaming();
            if let Some(target) = datasets.get(&f.target) {
                match target.dataset_type() {
                    DatasetType::MaterializedView if streaming => diags.push(
                        Diagnostic::new(format!(
                            "returns a streaming query, but its target `{}` is a materialized view, which takes batch queries",
                            f.target
                        ))
                        .subject(f.subject())
                        .origin(f.origin.clone())
                        .help(Language::of(f).batch_query_for(&f.target)),
                    ),
                    DatasetType::StreamingTable | DatasetType::Sink if !streaming && !f.once => diags.push(
                        Diagnostic::new(format!(
                            "returns a batch query, but its target `{}` is a {}, which takes streaming queries",
                            f.target,
                            target.dataset_type().describe()
                        ))
                        .subject(f.subject())
                        .origin(f.origin.clone())
                        .help(Language::of(f).streaming_query()),
                    ),
                    _ => {}
                }
            }
            if f.once && streaming {
                diags.push(
                    Diagnostic::new("is declared `once = true` but returns a streaming query")
                        .subject(f.subject())
                        .origin(f.origin.clone())
                        .help("read with read() / read_table(...) for a one-time backfill, or remove `once = true`"),
                );
            }
            reads_of.insert(name.clone(), reads);
        }
    }

    /// The graph of datasets and flows, its cycles, and the flows' topological order.
    fn dataflow_graph(&mut self) {
        let Build {
            datasets,
            flows,
            reads_of,
            graph,
            order,
            diags,
            ..
        } = self;
        let mut dataset_idx: BTreeMap<String, NodeIndex> = BTreeMap::new();
        let mut flow_idx: BTreeMap<String, NodeIndex> = BTreeMap::new();
        for name in datasets.keys() {
            dataset_idx.insert(
                name.clone(),
                graph.add_node(GraphNode::Dataset(name.clone())),
            );
        }
        for name in flows.keys() {
            flow_idx.insert(name.clone(), graph.add_node(GraphNode::Flow(name.clone())));
        }
        for f in flows.values() {
            let fi = flow_idx[&f.name];
            if let Some(&ti) = dataset_idx.get(&f.target) {
                graph.add_edge(fi, ti, ());
            }
            // The quarantine is written by the flow too.
            if let Some(qi) = quarantine_of(f, datasets).and_then(|q| dataset_idx.get(&q).copied())
            {
                if !graph.contains_edge(fi, qi) {
                    graph.add_edge(fi, qi, ());
                }
            }
            for (ds, _) in reads_of.get(&f.name).into_iter().flatten() {
                if let Some(&di) = dataset_idx.get(ds) {
                    if !graph.contains_edge(di, fi) {
                        graph.add_edge(di, fi, ());
                    }
                }
            }
        }
        for scc in petgraph::algo::tarjan_scc(&*graph) {
            let cyclic = scc.len() > 1 || graph.contains_edge(scc[0], scc[0]);
            if !cyclic {
                continue;
            }
            let path = cycle_path(graph, &scc);
            let first_flow = path.iter().find_map(|&i| match &graph[i] {
                GraphNode::Flow(n) => Some(n.clone()),
                GraphNode::Dataset(_) => None,
            });
            let shown = path
                .iter()
                .chain(path.first())
                .map(|&i| match &graph[i] {
                    GraphNode::Dataset(n) => format!("`{n}`"),
                    GraphNode::Flow(n) => format!("(flow `{n}`)"),
                })
                .collect::<Vec<_>>()
                .join(" → ");
            let origin = first_flow.as_ref().and_then(|n| flows[n].origin.clone());
            diags.push(
                Diagnostic::new(format!("datasets depend on each other in a cycle: {shown}"))
                    .subject(format!("flow `{}`", first_flow.unwrap_or_default()))
                    .origin(origin)
                    .help("a flow cannot read, directly or through other flows, the dataset it writes; read a source or an upstream dataset instead"),
            );
        }

        // Topological order of the acyclic part (Kahn's algorithm; ties by name,
        // so the order is stable and predictable).
        *order = topological_flows(graph);
    }

    /// Temporary views are named queries: every read of one becomes the
    /// view's own plan, as Spark inlines views, so the reader gets the
    /// view's sources, watermarks and operators (and its own offsets). Views
    /// of views are inlined in dependency order.
    fn inline_views(&mut self) {
        let Build {
            datasets,
            flows,
            plans,
            order,
            ..
        } = self;
        let mut views: BTreeMap<String, DataFrame> = BTreeMap::new();
        for name in order.iter() {
            let Some(plan) = plans.get(name).cloned() else {
                continue;
            };
            let inlined =
                plan.with_dataset_reads_replaced(&mut |ds, _, _| match datasets.get(ds) {
                    Some(d) if d.dataset_type() == DatasetType::TemporaryView => {
                        views.get(ds).cloned()
                    }
                    _ => None,
                });
            let target = &flows[name].target;
            if datasets
                .get(target)
                .is_some_and(|d| d.dataset_type() == DatasetType::TemporaryView)
            {
                views.insert(target.clone(), inlined.clone());
            }
            plans.insert(name.clone(), inlined);
        }
    }

    /// Resolves each plan in order against the schemas of what it reads; checks merge keys, sink columns and declared schemas.
    fn resolve_schemas(&mut self) {
        let Build {
            datasets,
            flows,
            plans,
            reads_of,
            order,
            schemas,
            resolved,
            cdc_layouts,
            diags,
            warnings,
            ..
        } = self;
        let mut declared: BTreeMap<String, SchemaRef> = BTreeMap::new();
        for d in datasets.values() {
            if let Some(ddl) = &d.schema {
                match crate::plan::ddl::parse_ddl(ddl) {
                    Ok(s) => {
                        declared.insert(d.name.clone(), s.clone());
                        schemas.insert(d.name.clone(), s);
                    }
                    Err(e) => diags.push(plan_diagnostic(
                        &d.subject(),
                        &d.origin,
                        "has an invalid schema",
                        e,
                    )),
                }
            }
        }
        let mut schema_source: BTreeMap<String, String> = BTreeMap::new();
        for name in order.iter() {
            let Some(plan) = plans.get(name) else {
                continue;
            };
            let f = &flows[name];
            let reads = &reads_of[name];
            // Upstream failed or is unknown: already reported, don't cascade.
            if reads.iter().any(|(ds, _)| !schemas.contains_key(ds)) {
                continue;
            }
            let plan = plan.clone();
            match plan.resolve(&SchemaCatalog(schemas)) {
                Ok(r) if f.auto_cdc.is_some() => {
                    let cdc = f.auto_cdc.as_ref().expect("checked");
                    match cdc.layout(&r.schema()) {
                        Ok(layout) => {
                            if let Some(target) = datasets.get(&f.target) {
                                let schema = layout.target_schema.clone();
                                match declared.get(&target.name) {
                                    Some(expected) => {
                                        if let Some(problem) = schema_difference(expected, &schema)
                                        {
                                            diags.push(cdc_diagnostic(
                                                f,
                                                format!("writes columns that do not match the declared schema of {}: {problem}", target.subject()),
                                                "change the table's `schema`, or the flow's column_list / except_column_list".to_string(),
                                            ));
                                        }
                                    }
                                    None => {
                                        schemas.insert(target.name.clone(), schema);
                                        schema_source.insert(target.name.clone(), f.name.clone());
                                    }
                                }
                            }
                            cdc_layouts.insert(name.clone(), layout);
                        }
                        Err(problems) => {
                            for (what, help) in problems {
                                diags.push(cdc_diagnostic(f, what, help));
                            }
                        }
                    }
                    quarantine_columns(
                        f,
                        datasets,
                        &r.schema(),
                        &declared,
                        schemas,
                        &mut schema_source,
                        diags,
                    );
                    resolved.insert(name.clone(), r);
                }
                Ok(mut r) => {
                    // Columns are matched by name (SQL's `INSERT INTO ... BY
                    // NAME`): the same columns in another order are put in
                    // the table's order.
                    let expected = datasets.get(&f.target).and_then(|t| {
                        declared.get(&t.name).cloned().or_else(|| {
                            schema_source
                                .contains_key(&t.name)
                                .then(|| schemas[&t.name].clone())
                        })
                    });
                    if let Some(reordered) = expected
                        .as_ref()
                        .and_then(|e| in_order_of(&plan, &r.schema(), e))
                    {
                        if let Ok(again) = reordered.resolve(&SchemaCatalog(schemas)) {
                            r = again;
                            plans.insert(name.clone(), reordered);
                        }
                    }
                    let schema = r.schema();
                    if let Some(target) = datasets.get(&f.target) {
                        for key in &target.merge_keys {
                            if schema.fields().iter().all(|c| c.name() != key) {
                                let names: Vec<&str> =
                                    schema.fields().iter().map(|c| c.name().as_str()).collect();
                                let help = match did_you_mean(key, names.iter().copied()) {
                                    Some(s) => format!("did you mean `{s}`? merge keys must be columns of the flow's output"),
                                    None => format!("merge keys must be columns of the flow's output: {}", names.join(", ")),
                                };
                                diags.push(
                                    Diagnostic::new(format!(
                                        "merge key `{key}` of {} is not a column of its output",
                                        target.subject()
                                    ))
                                    .subject(f.subject())
                                    .origin(f.origin.clone())
                                    .help(help),
                                );
                            }
                        }
                        sink_columns(f, target, &schema, diags, warnings);
                        if let Some(expected) = declared.get(&target.name) {
                            if let Some(problem) = schema_difference(expected, &schema) {
                                diags.push(
                                    Diagnostic::new(format!(
                                        "its query does not match the declared schema of {}: {problem}",
                                        target.subject()
                                    ))
                                    .subject(f.subject())
                                    .origin(f.origin.clone())
                                    .help("change the query's columns, or the table's `schema`"),
                                );
                            }
                        } else if let Some(first) = schema_source.get(&target.name) {
                            if let Some(problem) =
                                schema_difference(&schemas[&target.name], &schema)
                            {
                                diags.push(
                                    Diagnostic::new(format!(
                                        "writes different columns into {} than flow `{first}`: {problem}",
                                        target.subject()
                                    ))
                                    .subject(f.subject())
                                    .origin(f.origin.clone())
                                    .help("flows into one table must produce the same columns; add, cast or drop columns so both match"),
                                );
                            }
                        } else {
                            // A dataset's rows carry no watermark: a flow reading
                            // it declares its own (as in Spark).
                            schemas.insert(target.name.clone(), without_watermarks(&schema));
                            schema_source.insert(target.name.clone(), f.name.clone());
                        }
                    }
                    quarantine_columns(
                        f,
                        datasets,
                        &schema,
                        &declared,
                        schemas,
                        &mut schema_source,
                        diags,
                    );
                    resolved.insert(name.clone(), r);
                }
                Err(errors) => {
                    for mut e in errors {
                        if let Some(cdc) = &f.auto_cdc {
                            e.message = cdc.explain(&e.message);
                        }
                        diags.push(plan_diagnostic(&f.subject(), &f.origin, "", e));
                    }
                }
            }
        }
    }

    /// Every expectation: a unique name per dataset, not on a temporary
    /// view, a boolean condition over the columns it sees.
    fn check_expectations(&mut self) {
        let Build {
            datasets,
            flows,
            schemas,
            resolved,
            diags,
            ..
        } = self;
        for d in datasets.values() {
            if d.expectations.is_empty() {
                continue;
            }
            if d.dataset_type() == DatasetType::TemporaryView {
                diags.push(
                    Diagnostic::new("expectations on temporary views are not supported")
                        .subject(d.subject())
                        .origin(d.expectations[0].origin.clone().or_else(|| d.origin.clone()))
                        .help("declare them on the streaming table or materialized view that reads the view"),
                );
                continue;
            }
            duplicate_expectations(&d.subject(), &d.expectations, &[], diags);
            // Against the dataset's columns, or those of the first flow
            // writing it (a sink has no schema of its own).
            let schema = schemas.get(&d.name).cloned().or_else(|| {
                flows
                    .values()
                    .filter(|f| f.target == d.name)
                    .find_map(|f| resolved.get(&f.name).map(|r| r.schema()))
            });
            if let Some(schema) = schema {
                for e in &d.expectations {
                    condition_problem(&d.subject(), e, &d.origin, &schema, diags);
                }
            }
        }
        for f in flows.values() {
            if f.expectations.is_empty() {
                continue;
            }
            let target = datasets.get(&f.target);
            let inherited = target.map(|t| t.expectations.as_slice()).unwrap_or(&[]);
            duplicate_expectations(&f.subject(), &f.expectations, inherited, diags);
            if let Some(r) = resolved.get(&f.name) {
                for e in &f.expectations {
                    condition_problem(&f.subject(), e, &f.origin, &r.schema(), diags);
                }
            }
        }
    }

    /// Spark's query-shape rules per flow and output mode, and the real-time rules.
    fn check_query_shapes(&mut self) {
        let Build {
            decls,
            datasets,
            flows,
            plans,
            triggers,
            order,
            resolved,
            modes,
            diags,
            ..
        } = self;
        for name in order.iter() {
            let (Some(plan), Some(mode)) = (resolved.get(name), modes.get(name)) else {
                continue;
            };
            // A view's query is checked where it is read (inlined).
            if datasets
                .get(&flows[name].target)
                .is_some_and(|d| d.dataset_type() == DatasetType::TemporaryView)
            {
                continue;
            }
            for d in checks::check_query(&flows[name], plan, *mode) {
                diags.push(d);
            }
            let f = &flows[name];
            if let (Some(Trigger::RealTime { .. }), Some(df), Some(target)) =
                (triggers.get(name), plans.get(name), datasets.get(&f.target))
            {
                let late = decls
                    .flow_settings
                    .get(name)
                    .and_then(|s| s.options.get(LATE_ROWS_TO))
                    .or_else(|| f.conf.get(LATE_ROWS_TO))
                    .and_then(|late| datasets.get(late));
                let quarantine = quarantine_of(f, datasets).and_then(|q| datasets.get(&q));
                for d in real_time_checks::check_real_time(f, df, *mode, target, late, quarantine) {
                    diags.push(d);
                }
            }
        }
    }

    /// The validated graph, or every problem found.
    fn finish(self) -> Result<PipelineGraph, Diagnostics> {
        let Build {
            decls,
            diags,
            warnings,
            datasets,
            flows,
            mut modes,
            mut flows_of,
            mut plans,
            mut triggers,
            mut reads_of,
            graph,
            order,
            schemas,
            mut resolved,
            mut cdc_layouts,
            ..
        } = self;
        if !diags.is_empty() {
            return Err(diags);
        }

        let mut flow_nodes = BTreeMap::new();
        for (name, f) in flows {
            let plan = plans.remove(&name).expect("validated flows have plans");
            let schema = resolved
                .remove(&name)
                .expect("validated flows are resolved")
                .schema();
            let output_mode = modes
                .remove(&name)
                .expect("validated flows have an output mode");
            let settings = decls.flow_settings.get(&name).cloned().unwrap_or_default();
            let (expectations, quarantine) = quality_of(&f, &datasets);
            flow_nodes.insert(
                name.clone(),
                FlowNode {
                    streaming: plan.is_streaming(),
                    output_mode,
                    trigger: triggers.remove(&name).unwrap_or(Trigger::Default),
                    options: settings.options,
                    reads: reads_of.remove(&name).unwrap_or_default(),
                    expectations,
                    quarantine,
                    cdc: cdc_layouts.remove(&name),
                    def: f,
                    plan,
                    schema,
                },
            );
        }
        let dataset_nodes = datasets
            .into_iter()
            .map(|(name, def)| {
                let node = DatasetNode {
                    schema: schemas.get(&name).cloned(),
                    flows: flows_of.remove(&name).unwrap_or_default(),
                    def,
                };
                (name, node)
            })
            .collect();
        Ok(PipelineGraph {
            name: decls.name.clone(),
            configuration: decls.configuration.clone(),
            datasets: dataset_nodes,
            flows: flow_nodes,
            flow_order: order,
            graph,
            warnings,
        })
    }
}

/// The output mode a flow writes with, and the single source of truth for
/// it ([`FlowNode::output_mode`]): the `pipelines.outputMode` option of the
/// flow in the spec (`flows: { f: { options: { pipelines.outputMode: complete } } }`),
/// else the flow's `conf("pipelines.outputMode" = "...")`, else update for
/// `#[update_flow]` and append for every other flow.
///
/// Values are `append`, `update` or `complete` (any case). Complete is
/// allowed for both kinds of flow; `update` on an append flow and `append` on
/// an update flow are errors, as is an unknown value. Every problem is
/// returned, pointing at the spec line or the declaration that set it.
pub fn output_mode_of(
    f: &FlowDef,
    settings: Option<&FlowSettings>,
) -> Result<OutputMode, Vec<Diagnostic>> {
    let default = match f.kind {
        FlowKind::Update => OutputMode::Update,
        FlowKind::Append => OutputMode::Append,
    };
    let from_spec = settings.and_then(|s| {
        s.options.get(OUTPUT_MODE_CONF_KEY).map(|v| {
            let origin = s
                .option_origins
                .get(OUTPUT_MODE_CONF_KEY)
                .cloned()
                .or_else(|| s.origin.clone());
            (v, origin)
        })
    });
    let from_conf = f
        .conf
        .get(OUTPUT_MODE_CONF_KEY)
        .map(|v| (v, f.origin.clone()));
    let mut chosen = None;
    let mut errors = Vec::new();
    for (value, origin) in from_spec.into_iter().chain(from_conf) {
        let problem = match (OutputMode::parse(value), f.kind) {
            (None, _) => Diagnostic::new(format!(
                "invalid `{OUTPUT_MODE_CONF_KEY}` value `{value}`"
            ))
            .help("use one of: append, update, complete"),
            (Some(OutputMode::Update), FlowKind::Append) => Diagnostic::new(format!(
                "`{OUTPUT_MODE_CONF_KEY}` is `update`, but this is an append flow"
            ))
            .help(format!(
                "declare it with #[update_flow(target = \"...\")] to write updates to a sink, or set `{OUTPUT_MODE_CONF_KEY}` to `append` or `complete`"
            )),
            (Some(OutputMode::Append), FlowKind::Update) => Diagnostic::new(format!(
                "`{OUTPUT_MODE_CONF_KEY}` is `append`, but this is an update flow"
            ))
            .help(format!(
                "declare it with #[append_flow(target = \"{}\")], or set `{OUTPUT_MODE_CONF_KEY}` to `update` or `complete`",
                f.target
            )),
            (Some(mode), _) => {
                chosen = chosen.or(Some(mode));
                continue;
            }
        };
        errors.push(problem.subject(f.subject()).origin(origin));
    }
    if errors.is_empty() {
        Ok(chosen.unwrap_or(default))
    } else {
        Err(errors)
    }
}

/// The problem when `target` cannot take `mode` (Spark's sink capabilities,
/// [`accepted_modes`]): sinks are checked for every mode, streaming tables for
/// complete (update into a table is refused as "update flows can only target
/// sinks").
fn mode_not_accepted(f: &FlowDef, target: &DatasetDef, mode: OutputMode) -> Option<Diagnostic> {
    let is_sink = match target.dataset_type() {
        DatasetType::Sink => true,
        DatasetType::StreamingTable if mode != OutputMode::Append => false,
        _ => return None,
    };
    let format = match &target.format {
        Some(fmt) => crate::connector::normalize(fmt),
        None if is_sink => return None,
        None => crate::connector::default_table_format().to_string(),
    };
    let modes =
        crate::connector::accepted_modes(&format, is_sink && !target.merge_keys.is_empty())?;
    if modes.contains(&mode) {
        return None;
    }
    let what = if is_sink {
        format!("sink `{}` ({format})", target.name)
    } else {
        format!("streaming table `{}` ({format})", target.name)
    };
    let special = crate::connector::sink(&format).and_then(|s| s.mode_help(mode));
    let help = match (mode, special) {
        (_, Some(help)) => help.to_string(),
        (OutputMode::Update, None) => format!(
            "{format} sinks take {} only: use #[append_flow], or write to a sink that takes updates (kafka, foreach_batch, delta with merge_keys)",
            describe_modes(modes)
        ),
        _ => format!(
            "{format} {} take {} only: use append mode, or write complete results to a sink that takes them ({})",
            if is_sink { "sinks" } else { "tables" },
            describe_modes(modes),
            crate::connector::complete_mode_sink_names().join(", ")
        ),
    };
    Some(
        Diagnostic::new(format!(
            "{what} does not accept {mode} output mode; it accepts {}",
            describe_modes(modes)
        ))
        .subject(f.subject())
        .origin(f.origin.clone())
        .help(help),
    )
}

/// The columns a flow writes must suit its sink (a Kafka sink needs a
/// `value`, and the other columns it takes with their types): asked of the
/// sink's connector.
fn sink_columns(
    f: &FlowDef,
    target: &DatasetDef,
    schema: &SchemaRef,
    diags: &mut Diagnostics,
    warnings: &mut Vec<Diagnostic>,
) {
    if target.dataset_type() != DatasetType::Sink {
        return;
    }
    let Some(sink) = target.format.as_deref().and_then(crate::connector::sink) else {
        return;
    };
    let check = sink.check_schema(schema, &target.options);
    for (message, help) in check.problems {
        diags.push(
            Diagnostic::new(format!("writes to {}: {message}", target.subject()))
                .subject(f.subject())
                .origin(f.origin.clone())
                .help(help),
        );
    }
    for message in check.warnings {
        warnings.push(
            Diagnostic::new(format!("writes to {}: {message}", target.subject()))
                .subject(f.subject())
                .origin(f.origin.clone()),
        );
    }
}

/// How to name a dataset or flow.
const NAME_HELP: &str =
    "use letters, digits, `_`, `-` and `.`; names are directories under the storage path";

/// Why `name` cannot be a directory under the storage path (tables and
/// checkpoints live at `<storage>/tables/<name>` and
/// `<storage>/checkpoints/<flow>`), or `None` when it can.
fn unsafe_name(name: &str) -> Option<&'static str> {
    if name == "." || name == ".." {
        Some("would point outside its directory under the storage path")
    } else if name.contains(['/', '\\']) {
        Some("contains a path separator, so its table or checkpoint would not stay under the storage path")
    } else if name.contains('\0') || name.chars().any(char::is_control) {
        Some("contains a control character")
    } else {
        None
    }
}

/// `merge_keys` on a target that does not take them, naming the sinks that do.
fn misplaced_merge_keys() -> Diagnostic {
    let upsert: Vec<&str> = crate::connector::sink_names()
        .into_iter()
        .filter(|n| crate::connector::sink(n).is_some_and(|c| c.takes_merge_keys()))
        .collect();
    let titles: Vec<String> = upsert.iter().map(|n| crate::connector::title(n)).collect();
    let formats: Vec<String> = upsert.iter().map(|n| format!("`format: {n}`")).collect();
    Diagnostic::new(format!(
        "`merge_keys` only applies to {} sinks",
        titles.join(" and ")
    ))
    .help(format!(
        "remove `merge_keys`, or declare the sink with {}",
        formats.join(" or ")
    ))
}

fn at(origin: &Option<Origin>) -> String {
    origin
        .as_ref()
        .map(|o| format!(" at {o}"))
        .unwrap_or_default()
}

fn error_diagnostic(f: &FlowDef, context: &str, e: crate::error::Error) -> Diagnostic {
    match e {
        crate::error::Error::Plan(p) => plan_diagnostic(&f.subject(), &f.origin, context, p),
        other => Diagnostic::new(format!("{context}: {other}"))
            .subject(f.subject())
            .origin(f.origin.clone()),
    }
}

/// A flow's expectations (its target's, then its own) and its quarantine
/// ([`quarantine_of`]).
pub(crate) fn quality_of(
    f: &FlowDef,
    datasets: &BTreeMap<String, DatasetDef>,
) -> (Vec<Expectation>, Option<String>) {
    let mut all: Vec<Expectation> = datasets
        .get(&f.target)
        .map(|t| t.expectations.clone())
        .unwrap_or_default();
    all.extend(f.expectations.iter().cloned());
    (all, quarantine_of(f, datasets))
}

/// Where a flow's dropped rows go: its own quarantine, else its target's.
fn quarantine_of(f: &FlowDef, datasets: &BTreeMap<String, DatasetDef>) -> Option<String> {
    f.quarantine
        .clone()
        .or_else(|| datasets.get(&f.target).and_then(|t| t.quarantine.clone()))
}

/// Each declared quarantine names a streaming table or sink other than
/// the target, for expectations that drop rows; every flow with one is a
/// writer of it.
fn check_quarantines(
    datasets: &BTreeMap<String, DatasetDef>,
    flows: &BTreeMap<String, FlowDef>,
    flows_of: &mut BTreeMap<String, Vec<String>>,
    diags: &mut Diagnostics,
) {
    let drops = |list: &[Expectation]| list.iter().any(|e| e.action == ExpectationAction::Drop);
    // Where each quarantine was declared (a dataset, or a flow whose target's
    // expectations it applies too): (subject, target, quarantine, drops, origin).
    let mut declared = Vec::new();
    for d in datasets.values() {
        if let Some(q) = &d.quarantine {
            declared.push((
                d.subject(),
                d.name.clone(),
                q.clone(),
                drops(&d.expectations),
                d.origin.clone(),
            ));
        }
    }
    for f in flows.values() {
        if let Some(q) = &f.quarantine {
            let target_drops = datasets
                .get(&f.target)
                .is_some_and(|t| drops(&t.expectations));
            declared.push((
                f.subject(),
                f.target.clone(),
                q.clone(),
                drops(&f.expectations) || target_drops,
                f.origin.clone(),
            ));
        }
    }
    for (subject, target, q, drops, origin) in declared {
        match datasets.get(&q) {
            None => {
                let language = if origin.as_ref().is_some_and(Origin::is_library) {
                    Language::Sql
                } else {
                    Language::Rust
                };
                let mut help = language.declare_quarantine(&q);
                if let Some(s) = did_you_mean(&q, datasets.keys().map(String::as_str)) {
                    help = format!("did you mean `{s}`? or {help}");
                }
                diags.push(
                    Diagnostic::new(format!("its quarantine `{q}` is not declared"))
                        .subject(subject)
                        .origin(origin)
                        .help(help),
                );
            }
            Some(d) if q == target => diags.push(
                Diagnostic::new(format!("quarantines rows into `{q}`, the dataset they were dropped from"))
                    .subject(subject)
                    .origin(origin)
                    .help(format!("name another streaming table or sink, e.g. `{}_quarantine`", d.name)),
            ),
            Some(d)
                if !matches!(
                    d.dataset_type(),
                    DatasetType::StreamingTable | DatasetType::Sink
                ) =>
            {
                diags.push(
                    Diagnostic::new(format!(
                        "its quarantine `{q}` is a {}, but quarantined rows are appended to a streaming table or a sink",
                        d.dataset_type().describe()
                    ))
                    .subject(subject)
                    .origin(origin)
                    .help(format!("declare `{q}` as a streaming table (without a query) or a sink")),
                )
            }
            Some(_) if !drops => diags.push(
                Diagnostic::new(format!(
                    "names the quarantine `{q}`, but none of its expectations drops rows, so no row would go there"
                ))
                .subject(subject)
                .origin(origin)
                .help("make an expectation a drop one (expect_or_drop, ON VIOLATION DROP ROW, `action: drop`), or remove the quarantine"),
            ),
            Some(_) => {}
        }
    }
    for f in flows.values() {
        if let Some(q) = quarantine_of(f, datasets) {
            if datasets.contains_key(&q) && q != f.target {
                let writers = flows_of.entry(q).or_default();
                if !writers.contains(&f.name) {
                    writers.push(f.name.clone());
                }
            }
        }
    }
}

/// The quarantine of flow `f` takes its rows plus the failed expectations'
/// names: the table's schema when it has none yet, else it must match.
fn quarantine_columns(
    f: &FlowDef,
    datasets: &BTreeMap<String, DatasetDef>,
    schema: &SchemaRef,
    declared: &BTreeMap<String, SchemaRef>,
    schemas: &mut BTreeMap<String, SchemaRef>,
    schema_source: &mut BTreeMap<String, String>,
    diags: &mut Diagnostics,
) {
    let Some(q) = quarantine_of(f, datasets) else {
        return;
    };
    let Some(d) = datasets.get(&q) else {
        return;
    };
    if d.dataset_type() != DatasetType::StreamingTable || q == f.target {
        return;
    }
    let wanted: SchemaRef = std::sync::Arc::new(quarantine_schema(&without_watermarks(schema)));
    let existing = declared
        .get(&q)
        .cloned()
        .or_else(|| schema_source.contains_key(&q).then(|| schemas[&q].clone()));
    match existing {
        Some(existing) => {
            if let Some(problem) = schema_difference(&existing, &wanted) {
                diags.push(
                    Diagnostic::new(format!(
                        "its quarantined rows do not fit the columns of {}: {problem}",
                        d.subject()
                    ))
                    .subject(f.subject())
                    .origin(f.origin.clone())
                    .help("a quarantine takes the flow's columns plus `_failed_expectations ARRAY<STRING>`; give each dataset its own quarantine, or declare none of its schema"),
                );
            }
        }
        None => {
            schemas.insert(q.clone(), wanted);
            schema_source.insert(q, f.name.clone());
        }
    }
}

/// The second declaration of an expectation name (among `own`, or of
/// `inherited` from the target) is a problem.
fn duplicate_expectations(
    subject: &str,
    own: &[Expectation],
    inherited: &[Expectation],
    diags: &mut Diagnostics,
) {
    let mut seen: Vec<&Expectation> = inherited.iter().collect();
    for e in own {
        if let Some(first) = seen.iter().find(|s| s.name == e.name) {
            diags.push(
                Diagnostic::new(format!(
                    "expectation `{}` is declared twice (first{})",
                    e.name,
                    at(&first.origin)
                ))
                .subject(subject)
                .origin(e.origin.clone())
                .help("give each expectation of a dataset its own name"),
            );
        } else {
            seen.push(e);
        }
    }
}

/// An expectation's condition that is not a boolean over `schema`.
fn condition_problem(
    subject: &str,
    e: &Expectation,
    fallback: &Option<Origin>,
    schema: &SchemaRef,
    diags: &mut Diagnostics,
) {
    if let Err(p) = crate::expectations::check_condition(&e.name, &e.condition, schema) {
        let origin = e.origin.clone().or_else(|| fallback.clone());
        diags.push(plan_diagnostic(subject, &origin, "", p));
    }
}

fn plan_diagnostic(
    subject: &str,
    origin: &Option<Origin>,
    context: &str,
    e: PlanError,
) -> Diagnostic {
    let message = if context.is_empty() {
        e.message
    } else {
        format!("{context}: {}", e.message)
    };
    let mut d = Diagnostic::new(message)
        .subject(subject)
        .origin(origin.clone());
    d.help = e.help;
    d
}

/// Describes how `actual` differs from `expected` (names and types, by position), if it does.
/// `plan` with its columns put in `expected`'s order, when it has the same
/// columns (names and types) in another order.
fn in_order_of(plan: &DataFrame, actual: &SchemaRef, expected: &SchemaRef) -> Option<DataFrame> {
    if schema_difference(expected, actual).is_none()
        || expected.fields().len() != actual.fields().len()
    {
        return None;
    }
    let same_columns = expected.fields().iter().all(|e| {
        actual
            .fields()
            .iter()
            .any(|a| a.name() == e.name() && a.data_type() == e.data_type())
    });
    if !same_columns {
        return None;
    }
    let columns: Vec<String> = expected
        .fields()
        .iter()
        .map(|f| format!("\"{}\"", f.name().replace('"', "\"\"")))
        .collect();
    plan.select(columns).ok()
}

fn schema_difference(expected: &SchemaRef, actual: &SchemaRef) -> Option<String> {
    let show = |s: &SchemaRef| {
        s.fields()
            .iter()
            .map(|f| {
                format!(
                    "{} {}",
                    f.name(),
                    crate::plan::ddl::type_to_ddl(f.data_type())
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let same = expected.fields().len() == actual.fields().len()
        && expected
            .fields()
            .iter()
            .zip(actual.fields().iter())
            .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
    if same {
        None
    } else {
        Some(format!(
            "expected ({}), got ({})",
            show(expected),
            show(actual)
        ))
    }
}

/// Flow names in dependency order; flows on or behind a cycle are left out.
fn topological_flows(graph: &DiGraph<GraphNode, ()>) -> Vec<String> {
    let key = |i: NodeIndex| match &graph[i] {
        GraphNode::Dataset(n) => (n.clone(), 0u8, i),
        GraphNode::Flow(n) => (n.clone(), 1u8, i),
    };
    let mut indegree: BTreeMap<NodeIndex, usize> = BTreeMap::new();
    for i in graph.node_indices() {
        indegree.insert(
            i,
            graph
                .neighbors_directed(i, petgraph::Direction::Incoming)
                .count(),
        );
    }
    let mut ready: BTreeSet<(String, u8, NodeIndex)> = indegree
        .iter()
        .filter(|(_, &d)| d == 0)
        .map(|(&i, _)| key(i))
        .collect();
    let mut order = Vec::new();
    while let Some(next) = ready.pop_first() {
        let i = next.2;
        if let GraphNode::Flow(n) = &graph[i] {
            order.push(n.clone());
        }
        for t in graph.neighbors_directed(i, petgraph::Direction::Outgoing) {
            if let Some(d) = indegree.get_mut(&t) {
                *d -= 1;
                if *d == 0 {
                    ready.insert(key(t));
                }
            }
        }
    }
    order
}

/// One cycle through the nodes of a strongly connected component, in edge order.
fn cycle_path(graph: &DiGraph<GraphNode, ()>, scc: &[NodeIndex]) -> Vec<NodeIndex> {
    let members: BTreeSet<NodeIndex> = scc.iter().copied().collect();
    // Start from the dataset with the smallest name for a stable message.
    let start = scc
        .iter()
        .copied()
        .filter(|&i| matches!(graph[i], GraphNode::Dataset(_)))
        .min_by_key(|&i| match &graph[i] {
            GraphNode::Dataset(n) | GraphNode::Flow(n) => n.clone(),
        })
        .unwrap_or(scc[0]);
    // Breadth-first search for the shortest way back to `start`.
    let name = |i: NodeIndex| match &graph[i] {
        GraphNode::Dataset(n) | GraphNode::Flow(n) => n.clone(),
    };
    let mut parent: BTreeMap<NodeIndex, NodeIndex> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(current) = queue.pop_front() {
        let mut next: Vec<NodeIndex> = graph
            .edges(current)
            .map(|e| e.target())
            .filter(|t| members.contains(t))
            .collect();
        next.sort_by_key(|&i| name(i));
        for n in next {
            if n == start {
                let mut path = vec![current];
                let mut at = current;
                while let Some(&p) = parent.get(&at) {
                    path.push(p);
                    at = p;
                }
                if *path.last().unwrap_or(&start) != start {
                    path.push(start);
                }
                path.reverse();
                path.dedup();
                return path;
            }
            if n != start && !parent.contains_key(&n) {
                parent.insert(n, current);
                queue.push_back(n);
            }
        }
    }
    vec![start]
}

/// The one dataset whose name is `name` in another case, when `name` itself
/// is not a dataset.
fn only_case_match(name: &str, datasets: &BTreeMap<String, DatasetDef>) -> Option<String> {
    if datasets.contains_key(name) {
        return None;
    }
    let mut matches = datasets.keys().filter(|d| d.eq_ignore_ascii_case(name));
    match (matches.next(), matches.next()) {
        (Some(only), None) => Some(only.clone()),
        _ => None,
    }
}

/// A problem of an AUTO CDC flow as a diagnostic.
fn cdc_diagnostic(f: &FlowDef, what: String, help: String) -> Diagnostic {
    Diagnostic::new(format!("AUTO CDC flow {what}"))
        .subject(f.subject())
        .origin(f.origin.clone())
        .help(help)
}
