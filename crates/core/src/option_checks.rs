//! Dry-run checks of every option against its declaration
//! ([`crate::options`]): the options of each sink and table, of each source
//! a flow reads (as written in code and as overridden under
//! `flows.<name>.options` in the spec), the keys of each flow's `conf(...)`
//! and of the spec's `configuration:`.
//!
//! An unknown key is an error naming it, where it was written (the spec
//! line, or the declaration in code) and the closest declared name; a bad
//! value is the connector's own parse error, reported before any data moves.

use std::collections::BTreeMap;

use crate::conf::{
    is_framework_key, is_spark_key, FLOW_SETTINGS, PIPELINE_SETTINGS, SINK_SETTINGS,
};
use crate::connector;
use crate::definition::{DatasetDef, DatasetType, Declarations, FlowDef};
use crate::error::{Diagnostic, Error, Origin};
use crate::options::{OptionSet, Options};
use crate::plan::{DataFrame, PlanNode};

/// Checks the options of every dataset, sink, flow and the pipeline's
/// configuration; returns every problem.
pub(crate) fn check_options(
    decls: &Declarations,
    datasets: &BTreeMap<String, DatasetDef>,
    flows: &BTreeMap<String, FlowDef>,
    plans: &BTreeMap<String, DataFrame>,
) -> Vec<Diagnostic> {
    let mut diags = Vec::new();
    for d in datasets.values() {
        check_dataset(d, &mut diags);
    }
    for (name, f) in flows {
        if let Some(plan) = plans.get(name) {
            check_flow(decls, datasets, f, plan, &mut diags);
        }
    }
    for key in decls.configuration.keys() {
        if is_framework_key(key) && !known_setting(key, &[&PIPELINE_SETTINGS, &FLOW_SETTINGS]) {
            let names: Vec<&str> = PIPELINE_SETTINGS
                .names()
                .chain(FLOW_SETTINGS.names())
                .collect();
            diags.push(
                Diagnostic::new(format!(
                    "`{key}` under `configuration:` is not a setting of the pipeline"
                ))
                .origin(decls.configuration_origins.get(key).cloned())
                .help(unknown_help(key, &names, "settings")),
            );
        }
    }
    diags
}

/// A sink's or table's options: names against the connector's sink options
/// (a table's also against its reading options), values by the connector.
fn check_dataset(d: &DatasetDef, diags: &mut Vec<Diagnostic>) {
    if d.dataset_type() == DatasetType::TemporaryView {
        return;
    }
    let format = match (&d.format, d.dataset_type()) {
        (Some(f), _) => f.clone(),
        (None, DatasetType::Sink) => return,
        (None, _) => crate::connector::default_table_format().to_string(),
    };
    let Some(sink) = connector::sink(&format) else {
        return; // an unknown format is reported by the graph
    };
    let mut sets: Vec<&OptionSet> = vec![sink.options(), &SINK_SETTINGS];
    let is_table = d.dataset_type() != DatasetType::Sink;
    if is_table {
        if let Some(source) = connector::source(&format) {
            sets.push(source.options());
        }
    }
    let what = format!(
        "{} {}",
        connector::normalize(&format),
        if is_table { "table" } else { "sink" }
    );
    let unknown = OptionSet::unknown_in(&sets, d.options.keys().map(String::as_str));
    for u in &unknown {
        let names: Vec<&str> = sets.iter().flat_map(|s| s.names()).collect();
        diags.push(
            Diagnostic::new(format!("`{}` is not an option of the {what}", u.key))
                .subject(d.subject())
                .origin(
                    d.option_origins
                        .get(u.key)
                        .cloned()
                        .or_else(|| d.origin.clone()),
                )
                .help(unknown_help(u.key, &names, "options")),
        );
    }
    if unknown.is_empty() {
        if let Err(e) = sink.check_options(&Options::for_sink(&d.options, &d.name)) {
            let origin = origin_of_error(
                &d.option_origins,
                d.options.keys(),
                d.origin.clone(),
                &e.to_string(),
            );
            diags.push(value_diagnostic(
                e,
                &format!("sink `{}`: ", d.name),
                d.subject(),
                origin,
            ));
        }
    }
}

/// A flow's sources (their code options and the spec's overrides) and its
/// `conf(...)` keys.
fn check_flow(
    decls: &Declarations,
    datasets: &BTreeMap<String, DatasetDef>,
    f: &FlowDef,
    plan: &DataFrame,
    diags: &mut Vec<Diagnostic>,
) {
    let settings = decls.flow_settings.get(&f.name);
    let overrides: BTreeMap<String, String> =
        settings.map(|s| s.options.clone()).unwrap_or_default();
    let override_origins: BTreeMap<String, Origin> = settings
        .map(|s| s.option_origins.clone())
        .unwrap_or_default();
    let spec_origin = settings.and_then(|s| s.origin.clone());

    // The option sets of every source the flow reads.
    let mut source_sets: Vec<&'static OptionSet> = Vec::new();
    let reads: Vec<(
        &crate::plan::SourceSpec,
        &'static dyn connector::SourceConnector,
    )> = plan
        .sources()
        .into_iter()
        .filter_map(|spec| Some((spec, spec.format.connector()?)))
        .collect();
    source_sets.extend(reads.iter().map(|(_, c)| c.options()));
    // Options written in code on each source.
    let mut code_unknown = false;
    plan.walk(&mut |node| {
        if let PlanNode::DatasetRead { name, options, .. } = node {
            let format = datasets
                .get(name)
                .filter(|d| d.dataset_type() != DatasetType::Sink)
                .map(|d| {
                    d.format
                        .clone()
                        .unwrap_or_else(|| crate::connector::default_table_format().to_string())
                });
            if let Some(c) = format.as_deref().and_then(connector::source) {
                source_sets.push(c.options());
                // Options of the read itself (`WITH (...)`, `.option(..).table(..)`).
                for u in c.options().unknown(options.keys().map(String::as_str)) {
                    code_unknown = true;
                    let names: Vec<&str> = c.options().names().collect();
                    diags.push(
                        Diagnostic::new(format!(
                            "`{}` is not an option of a read of dataset `{name}` ({})",
                            u.key,
                            format.as_deref().unwrap_or_default()
                        ))
                        .subject(f.subject())
                        .origin(f.origin.clone())
                        .help(unknown_help(u.key, &names, "options")),
                    );
                }
            }
        }
    });

    for (spec, c) in &reads {
        for u in c.options().unknown(spec.options.keys().map(String::as_str)) {
            code_unknown = true;
            let names: Vec<&str> = c.options().names().collect();
            diags.push(
                Diagnostic::new(format!(
                    "`{}` is not an option of the {}",
                    u.key,
                    spec.describe()
                ))
                .subject(f.subject())
                .origin(f.origin.clone())
                .help(unknown_help(u.key, &names, "options")),
            );
        }
    }

    // The spec's `flows.<name>.options`: flow settings or source options.
    let mut sets: Vec<&OptionSet> = vec![&FLOW_SETTINGS];
    sets.extend(source_sets.iter().copied());
    let mut override_unknown = false;
    for key in overrides.keys() {
        if is_trigger_key(key) || is_spark_key(key) || known_setting(key, &sets) {
            continue;
        }
        override_unknown = true;
        let names: Vec<&str> = sets.iter().flat_map(|s| s.names()).collect();
        diags.push(
            Diagnostic::new(format!(
                "`{key}` under `flows.{}.options` is neither a setting of the flow nor an option of its sources",
                f.name
            ))
            .subject(f.subject())
            .origin(override_origins.get(key).cloned().or_else(|| spec_origin.clone()))
            .help(unknown_help(key, &names, "settings and options")),
        );
    }

    // The flow's `conf(...)`: the framework's own keys must be declared.
    for key in f.conf.keys() {
        if is_framework_key(key) && !is_trigger_key(key) && !known_setting(key, &[&FLOW_SETTINGS]) {
            let names: Vec<&str> = FLOW_SETTINGS.names().collect();
            diags.push(
                Diagnostic::new(format!("`{key}` in its conf is not a setting of a flow"))
                    .subject(f.subject())
                    .origin(f.origin.clone())
                    .help(unknown_help(key, &names, "settings")),
            );
        }
    }

    // Values, parsed by each connector with the overrides merged in.
    if code_unknown || override_unknown {
        return;
    }
    for (spec, c) in &reads {
        let merged = Options::merged(&spec.options, &overrides, &f.name);
        if let Err(e) = c.check_options(&merged) {
            let origin = origin_of_error(
                &override_origins,
                overrides.keys(),
                f.origin.clone(),
                &e.to_string(),
            );
            diags.push(value_diagnostic(
                e,
                &format!("flow `{}`: ", f.name),
                f.subject(),
                origin,
            ));
            break;
        }
    }
}

/// True for the trigger keys, which the trigger parser checks itself.
fn is_trigger_key(key: &str) -> bool {
    key == crate::conf::TRIGGER_CONF_KEY || key.starts_with("pipelines.trigger.")
}

fn known_setting(key: &str, sets: &[&OptionSet]) -> bool {
    sets.iter().any(|s| s.knows(key))
}

/// `did you mean `x`? known options: a, b, c` (or the list alone).
fn unknown_help(key: &str, names: &[&str], what: &str) -> String {
    let mut seen = std::collections::BTreeSet::new();
    let names: Vec<&str> = names.iter().copied().filter(|n| seen.insert(*n)).collect();
    let list = if names.is_empty() {
        format!("it takes no {what}")
    } else {
        format!("known {what}: {}", names.join(", "))
    };
    match crate::suggest::closest(key, names.iter().copied()) {
        Some(s) => format!("did you mean `{s}`? {list}"),
        None => list,
    }
}

/// Where a bad value was written: the spec line of the override whose key
/// the error names, else `fallback`.
fn origin_of_error<'k>(
    origins: &BTreeMap<String, Origin>,
    keys: impl Iterator<Item = &'k String>,
    fallback: Option<Origin>,
    text: &str,
) -> Option<Origin> {
    for k in keys {
        if text.contains(&format!("`{k}`")) {
            if let Some(o) = origins.get(k) {
                return Some(o.clone());
            }
        }
    }
    fallback
}

/// A connector's parse error as a diagnostic about `subject`, without the
/// `prefix` the subject already says.
fn value_diagnostic(e: Error, prefix: &str, subject: String, origin: Option<Origin>) -> Diagnostic {
    let (message, help) = match e {
        Error::Runtime { message, help } => (message, help),
        other => (other.to_string(), None),
    };
    let message = message
        .strip_prefix(prefix)
        .map(str::to_string)
        .unwrap_or(message);
    let mut d = Diagnostic::new(message).subject(subject).origin(origin);
    if let Some(h) = help {
        d = d.help(h);
    }
    d
}
