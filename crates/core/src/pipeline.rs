//! The pipeline builder: gathers declarations from the attribute macros,
//! builder calls and the YAML spec, and hands them to the graph builder.
//!
//! Most binaries only call [`main`], which uses every macro declaration
//! linked into the binary. Builder calls (`create_sink`,
//! `create_streaming_table`, `append_flow`, ...) declare more in code, the way
//! `dp.create_sink(...)` does in Python.

use std::collections::BTreeMap;
use std::panic::Location;
use std::path::{Path, PathBuf};

use crate::definition::{from_dataset_decl, DatasetDef, DatasetType, FlowDef, Query};
use crate::error::{Diagnostics, Error, Origin, Result};
use crate::expectations::Expectation;
use crate::graph::{self, Declarations, FlowSettings, PipelineGraph};
use crate::plan::DataFrame;
use crate::registry::{self, FlowKind};
use crate::session::Session;
use crate::spec::PipelineSpec;

/// Options of a streaming table declared in code with
/// [`Pipeline::create_streaming_table`].
#[derive(Clone, Debug, Default)]
pub struct TableOptions {
    /// Storage format (`delta` by default).
    pub format: Option<String>,
    /// Explicit storage path (default: `<storage>/tables/<name>`).
    pub path: Option<String>,
    /// Partition columns.
    pub partition_cols: Vec<String>,
    /// Declared schema as DDL.
    pub schema: Option<String>,
    /// Format options.
    pub options: BTreeMap<String, String>,
    /// Free text description.
    pub comment: Option<String>,
    /// Data-quality expectations every flow into the table applies, like
    /// `create_streaming_table(expect_all=...)`.
    pub expectations: Vec<Expectation>,
    /// Where rows failing a drop-expectation go.
    pub quarantine: Option<String>,
}

/// A pipeline being declared: datasets, sinks and flows, before validation.
#[derive(Clone, Debug, Default)]
pub struct Pipeline {
    datasets: Vec<DatasetDef>,
    flows: Vec<FlowDef>,
    spec_dir: Option<PathBuf>,
    /// `expect(...)` / `quarantine(...)` calls, applied by name when the
    /// declarations are gathered.
    quality: Vec<(String, QualityCall)>,
}

/// A builder call adding to a dataset's or flow's data quality.
#[derive(Clone, Debug)]
enum QualityCall {
    Expect(Expectation),
    Quarantine(String),
}

fn caller_origin(loc: &Location<'_>) -> Option<Origin> {
    Some(Origin::Code {
        file: loc.file().to_string(),
        line: loc.line(),
    })
}

impl Pipeline {
    /// An empty pipeline (no macro declarations).
    pub fn new() -> Self {
        Pipeline::default()
    }

    /// A pipeline with every dataset and flow declared by the attribute
    /// macros in this binary.
    pub fn from_registry() -> Self {
        let mut p = Pipeline::new();
        for d in registry::datasets() {
            let (dataset, flow) = from_dataset_decl(d);
            p.datasets.push(dataset);
            p.flows.push(flow);
        }
        for f in registry::flows() {
            p.flows.push(FlowDef::from(f));
        }
        for c in registry::auto_cdc_flows() {
            let origin = Some(c.location.origin());
            p.flows
                .push(FlowDef::auto_cdc(crate::cdc::AutoCdc::from(c), origin));
        }
        p
    }

    /// Where to look for the spec when `--spec` is not given (default: the
    /// current directory, then its parents).
    pub fn spec_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.spec_dir = Some(dir.into());
        self
    }

    /// Declares a sink, like `dp.create_sink(name, format, options)`. For a
    /// Delta sink the option `merge_keys` (comma-separated columns) makes it
    /// an upsert target, like `merge_keys:` in the spec.
    #[track_caller]
    pub fn create_sink<K: Into<String>, V: Into<String>>(
        mut self,
        name: &str,
        format: &str,
        options: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let mut options: BTreeMap<String, String> = options
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        let merge_keys = options
            .keys()
            .find(|k| k.eq_ignore_ascii_case("merge_keys") || k.eq_ignore_ascii_case("mergeKeys"))
            .cloned()
            .and_then(|k| options.remove(&k))
            .map(|v| {
                v.split(',')
                    .map(|c| c.trim().to_string())
                    .filter(|c| !c.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        self.datasets.push(DatasetDef {
            name: name.to_string(),
            kind: Some(DatasetType::Sink),
            format: Some(format.to_string()),
            options,
            merge_keys,
            origin: caller_origin(Location::caller()),
            ..DatasetDef::default()
        });
        self
    }

    /// Declares a streaming table without a query, like
    /// `dp.create_streaming_table(name, ...)`; flows target it by name.
    #[track_caller]
    pub fn create_streaming_table(mut self, name: &str, options: TableOptions) -> Self {
        self.datasets.push(DatasetDef {
            name: name.to_string(),
            kind: Some(DatasetType::StreamingTable),
            format: options.format,
            path: options.path,
            options: options.options,
            partition_cols: options.partition_cols,
            schema: options.schema,
            comment: options.comment,
            expectations: options.expectations,
            quarantine: options.quarantine,
            origin: caller_origin(Location::caller()),
            ..DatasetDef::default()
        });
        self
    }

    /// Adds an expectation to the dataset (or, when no dataset has the name,
    /// the flow) named `name`, like stacking `@dp.expect*` on its function:
    /// `.expect("orders", Expectation::drop("positive", "amount > 0"))`.
    #[track_caller]
    pub fn expect(mut self, name: &str, expectation: Expectation) -> Self {
        let e = if expectation.origin.is_none() {
            expectation.at(caller_origin(Location::caller()))
        } else {
            expectation
        };
        self.quality
            .push((name.to_string(), QualityCall::Expect(e)));
        self
    }

    /// Sends the rows that the drop-expectations of the dataset (or flow)
    /// `name` remove to the streaming table or sink `target`, with the
    /// names of the expectations each failed.
    pub fn quarantine(mut self, name: &str, target: &str) -> Self {
        self.quality.push((
            name.to_string(),
            QualityCall::Quarantine(target.to_string()),
        ));
        self
    }

    /// Declares a dataset (table, view or sink) in full.
    pub fn dataset(mut self, def: DatasetDef) -> Self {
        self.datasets.push(def);
        self
    }

    /// Declares a flow in full.
    pub fn flow(mut self, def: FlowDef) -> Self {
        self.flows.push(def);
        self
    }

    /// Declares an append flow from a closure, like `#[append_flow]`.
    #[track_caller]
    pub fn append_flow(
        self,
        name: &str,
        target: &str,
        query: impl Fn(&Session) -> Result<DataFrame> + Send + Sync + 'static,
    ) -> Self {
        let mut f = FlowDef::append(name, target, Query::new(query));
        f.origin = caller_origin(Location::caller());
        self.flow(f)
    }

    /// Declares an AUTO CDC flow, like `dp.create_auto_cdc_flow(...)`: the
    /// change feed `cdc.source` applied to the streaming table `cdc.target`
    /// (SCD type 1 or 2).
    #[track_caller]
    pub fn create_auto_cdc_flow(self, cdc: crate::cdc::AutoCdc) -> Self {
        let f = FlowDef::auto_cdc(cdc, caller_origin(Location::caller()));
        self.flow(f)
    }

    /// Declares an update flow from a closure, like `#[update_flow]`.
    #[track_caller]
    pub fn update_flow(
        self,
        name: &str,
        target: &str,
        query: impl Fn(&Session) -> Result<DataFrame> + Send + Sync + 'static,
    ) -> Self {
        let mut f = FlowDef::append(name, target, Query::new(query));
        f.kind = FlowKind::Update;
        f.origin = caller_origin(Location::caller());
        self.flow(f)
    }

    #[track_caller]
    fn defined_dataset(
        mut self,
        kind: DatasetType,
        name: &str,
        query: impl Fn(&Session) -> Result<DataFrame> + Send + Sync + 'static,
    ) -> Self {
        let origin = caller_origin(Location::caller());
        self.datasets.push(DatasetDef {
            name: name.to_string(),
            kind: Some(kind),
            origin: origin.clone(),
            ..DatasetDef::default()
        });
        let mut f = FlowDef::append(name, name, Query::new(query));
        f.origin = origin;
        f.defines_dataset = true;
        self.flows.push(f);
        self
    }

    /// Declares a streaming table and its flow from a closure, like `#[table]`.
    #[track_caller]
    pub fn table(
        self,
        name: &str,
        query: impl Fn(&Session) -> Result<DataFrame> + Send + Sync + 'static,
    ) -> Self {
        self.defined_dataset(DatasetType::StreamingTable, name, query)
    }

    /// Declares a materialized view and its flow, like `#[materialized_view]`.
    #[track_caller]
    pub fn materialized_view(
        self,
        name: &str,
        query: impl Fn(&Session) -> Result<DataFrame> + Send + Sync + 'static,
    ) -> Self {
        self.defined_dataset(DatasetType::MaterializedView, name, query)
    }

    /// Declares a temporary view and its flow, like `#[temporary_view]`.
    #[track_caller]
    pub fn temporary_view(
        self,
        name: &str,
        query: impl Fn(&Session) -> Result<DataFrame> + Send + Sync + 'static,
    ) -> Self {
        self.defined_dataset(DatasetType::TemporaryView, name, query)
    }

    /// Merges the spec's sinks, tables, flow settings and configuration with
    /// the declarations made in code.
    pub fn declarations(&self, spec: &PipelineSpec) -> Declarations {
        let file = display_path(&spec.path);
        let spec_origin = |line: Option<usize>| {
            Some(Origin::Spec {
                file: file.clone(),
                line,
            })
        };
        let mut datasets = self.datasets.clone();
        let mut flows = self.flows.clone();
        for (name, call) in &self.quality {
            if let Some(d) = datasets.iter_mut().find(|d| &d.name == name) {
                match call {
                    QualityCall::Expect(e) => d.expectations.push(e.clone()),
                    QualityCall::Quarantine(q) => d.quarantine = Some(q.clone()),
                }
            } else if let Some(f) = flows.iter_mut().find(|f| &f.name == name) {
                match call {
                    QualityCall::Expect(e) => f.expectations.push(e.clone()),
                    QualityCall::Quarantine(q) => f.quarantine = Some(q.clone()),
                }
            }
        }
        let spec_expectations = |t: &crate::spec::TableSpec| -> Vec<Expectation> {
            t.expectations
                .iter()
                .map(|e| {
                    Expectation::new(&e.name, &e.condition, e.action).at(spec_origin(Some(e.line)))
                })
                .collect()
        };
        for (name, t) in &spec.tables {
            let existing = datasets.iter_mut().find(|d| {
                &d.name == name
                    && matches!(
                        d.dataset_type(),
                        DatasetType::StreamingTable | DatasetType::MaterializedView
                    )
            });
            match existing {
                Some(d) => {
                    // The spec configures a table declared in code.
                    if t.format.is_some() {
                        d.format = t.format.clone();
                    }
                    if t.path.is_some() {
                        d.path = t.path.clone();
                    }
                    if !t.partition_cols.is_empty() {
                        d.partition_cols = t.partition_cols.clone();
                    }
                    if t.schema.is_some() {
                        d.schema = t.schema.clone();
                    }
                    if t.comment.is_some() {
                        d.comment = t.comment.clone();
                    }
                    d.expectations.extend(spec_expectations(t));
                    if t.quarantine.is_some() {
                        d.quarantine = t.quarantine.clone();
                    }
                    d.options.extend(t.options.clone());
                    d.option_origins
                        .extend(option_origins(spec, "tables", name, &t.options));
                }
                None => datasets.push(DatasetDef {
                    name: name.clone(),
                    kind: Some(DatasetType::StreamingTable),
                    format: t.format.clone(),
                    path: t.path.clone(),
                    options: t.options.clone(),
                    partition_cols: t.partition_cols.clone(),
                    schema: t.schema.clone(),
                    comment: t.comment.clone(),
                    origin: spec_origin(t.line),
                    option_origins: option_origins(spec, "tables", name, &t.options),
                    expectations: spec_expectations(t),
                    quarantine: t.quarantine.clone(),
                    ..DatasetDef::default()
                }),
            }
        }
        for (name, s) in &spec.sinks {
            datasets.push(DatasetDef {
                name: name.clone(),
                kind: Some(DatasetType::Sink),
                format: Some(s.format.clone()),
                options: s.options.clone(),
                merge_keys: s.merge_keys.clone(),
                comment: s.comment.clone(),
                origin: spec_origin(s.line),
                option_origins: option_origins(spec, "sinks", name, &s.options),
                ..DatasetDef::default()
            });
        }
        let flow_settings = spec
            .flows
            .iter()
            .map(|(name, f)| {
                (
                    name.clone(),
                    FlowSettings {
                        trigger: f.trigger.clone(),
                        options: f.options.clone(),
                        origin: spec_origin(f.line),
                        option_origins: f
                            .options
                            .keys()
                            .filter_map(|key| {
                                let line = spec.line_of(&["flows", name, "options", key])?;
                                Some((key.clone(), spec_origin(Some(line))?))
                            })
                            .collect(),
                    },
                )
            })
            .collect();
        Declarations {
            name: spec.name.clone(),
            configuration: spec.configuration.clone(),
            configuration_origins: spec
                .configuration
                .keys()
                .filter_map(|k| {
                    let line = spec.line_of(&["configuration", k.as_str()])?;
                    Some((k.clone(), spec_origin(Some(line))?))
                })
                .collect(),
            datasets,
            flows,
            flow_settings,
        }
    }

    /// Validates the pipeline against a spec: every problem at once. The
    /// spec's library files (SQL) are loaded first; their datasets and flows
    /// join the ones declared in code.
    pub fn build(&self, spec: &PipelineSpec) -> std::result::Result<PipelineGraph, Diagnostics> {
        let libraries = crate::library::load_libraries(spec).map_err(Diagnostics)?;
        let mut all = self.clone();
        all.datasets.extend(libraries.datasets);
        all.flows.extend(libraries.flows);
        graph::build(all.declarations(spec))
    }

    /// Finds the spec: `explicit` when given, else discovery from the spec
    /// directory (or the current directory) upwards.
    pub fn locate_spec(&self, explicit: Option<&Path>) -> Result<PathBuf> {
        if let Some(p) = explicit {
            return Ok(p.to_path_buf());
        }
        let start = match &self.spec_dir {
            Some(d) => d.clone(),
            None => std::env::current_dir().map_err(|e| Error::io(".", e))?,
        };
        Ok(crate::spec::find_spec(&start)?)
    }
}

pub use crate::spec::display_path;

/// Where each of `options` of the spec's `<section>.<name>.options` was
/// written, by option name.
fn option_origins(
    spec: &PipelineSpec,
    section: &str,
    name: &str,
    options: &BTreeMap<String, String>,
) -> BTreeMap<String, Origin> {
    options
        .keys()
        .filter_map(|k| {
            let line = spec.line_of(&[section, name, "options", k.as_str()])?;
            let file = display_path(&spec.path);
            Some((
                k.clone(),
                Origin::Spec {
                    file,
                    line: Some(line),
                },
            ))
        })
        .collect()
}
