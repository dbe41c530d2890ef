//! SQL library files as pipeline declarations: each statement becomes the
//! datasets and flows a Rust declaration would make, with the statement's
//! file:line:column as origin, and `SET` applying to the statements after it.
//! Registered with the engine's library loaders, for `.sql` files.

use std::collections::BTreeMap;
use std::sync::Arc;

use pipelines_core::conf::OUTPUT_MODE_CONF_KEY;
use pipelines_core::library::{
    LibraryDeclarations, LibraryFile, LibraryLoader, LibraryRegistration,
};
use pipelines_core::registry::FlowKind;
use pipelines_core::{
    DatasetDef, DatasetType, Diagnostic, Expectation, FlowDef, Origin, Query as FlowQuery,
};

use crate::statement::*;
use crate::SqlError;

/// The loader of `.sql` library files.
pub struct SqlLoader;

impl LibraryLoader for SqlLoader {
    fn extensions(&self) -> &'static [&'static str] {
        &["sql"]
    }

    fn load(&self, file: &LibraryFile<'_>) -> Result<LibraryDeclarations, Vec<Diagnostic>> {
        let parsed = crate::parse_file(file.display, file.text)
            .map_err(|errors| errors.iter().map(diagnostic).collect::<Vec<_>>())?;
        declarations(&parsed)
    }
}

inventory::submit! { LibraryRegistration(&SqlLoader) }

/// A parse error as a diagnostic that renders the same way (snippet and caret).
pub fn diagnostic(e: &SqlError) -> Diagnostic {
    let mut d =
        Diagnostic::new(format!("{}\n{}", e.message, e.snippet())).origin(Some(Origin::Library {
            file: e.file.clone(),
            line: e.line,
            column: e.column,
        }));
    d.help = e.help.clone();
    d
}

/// The datasets and flows of a parsed file, or every problem.
pub fn declarations(file: &SqlFile) -> Result<LibraryDeclarations, Vec<Diagnostic>> {
    let mut out = LibraryDeclarations::default();
    let mut problems = Vec::new();
    let mut conf: BTreeMap<String, String> = BTreeMap::new();
    let origin = |span: Span| {
        Some(Origin::Library {
            file: file.path.clone(),
            line: span.line,
            column: span.column,
        })
    };
    for statement in &file.statements {
        let at = origin(statement.span());
        match statement {
            Statement::Set(s) => {
                conf.insert(s.key.clone(), s.value.clone());
            }
            Statement::Reset(r) => match &r.key {
                Some(k) => {
                    conf.remove(k);
                }
                None => conf.clear(),
            },
            Statement::StreamingTable(t) => {
                let Some(name) = one_part(&t.table.name, &at, &mut problems) else {
                    continue;
                };
                let mut table = table_def(&name, DatasetType::StreamingTable, &t.table, at.clone());
                add_expectations(&mut table, &t.table, origin, &mut problems);
                match &t.source {
                    None => out.datasets.push(table),
                    Some(StreamingTableSource::Query(q)) => {
                        defined(&mut out, &mut problems, table, q, &conf)
                    }
                    Some(StreamingTableSource::AutoCdc(cdc)) => {
                        out.datasets.push(table);
                        if let Some(mut f) = auto_cdc_flow(
                            &name,
                            &name,
                            cdc,
                            &conf,
                            t.table.comment.clone(),
                            at,
                            &mut problems,
                        ) {
                            f.defines_dataset = true;
                            out.flows.push(f);
                        }
                    }
                }
            }
            Statement::MaterializedView(mv) => {
                let Some(name) = one_part(&mv.table.name, &at, &mut problems) else {
                    continue;
                };
                let mut view = table_def(&name, DatasetType::MaterializedView, &mv.table, at);
                add_expectations(&mut view, &mv.table, origin, &mut problems);
                defined(&mut out, &mut problems, view, &mv.query, &conf);
            }
            Statement::View(v) => {
                let Some(name) = one_part(&v.name, &at, &mut problems) else {
                    continue;
                };
                if !v.columns.is_empty() {
                    problems.push(
                        Diagnostic::new(format!(
                            "view `{name}` has a column list, which is not supported"
                        ))
                        .origin(at.clone())
                        .help("name the columns with AS in the view's SELECT"),
                    );
                    continue;
                }
                let view = DatasetDef {
                    name,
                    kind: Some(DatasetType::TemporaryView),
                    comment: v.comment.clone(),
                    origin: at,
                    ..DatasetDef::default()
                };
                defined(&mut out, &mut problems, view, &v.query, &conf);
            }
            Statement::Flow(f) => {
                let Some(target) = one_part(&f.target, &at, &mut problems) else {
                    continue;
                };
                match &f.kind {
                    FlowKind_::InsertInto(q) => {
                        let fl = flow(&f.name.value, &target, q, &conf, f.comment.clone(), at);
                        push_flow(&mut out, &mut problems, fl);
                    }
                    FlowKind_::AutoCdc(cdc) => {
                        if let Some(f) = auto_cdc_flow(
                            &f.name.value,
                            &target,
                            cdc,
                            &conf,
                            f.comment.clone(),
                            at,
                            &mut problems,
                        ) {
                            out.flows.push(f);
                        }
                    }
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

use crate::statement::FlowKind as FlowKind_;

/// A dataset and the flow of its own query (named like it, as Spark names
/// the flow of `CREATE ... AS query`).
fn defined(
    out: &mut LibraryDeclarations,
    problems: &mut Vec<Diagnostic>,
    dataset: DatasetDef,
    query: &Query,
    conf: &BTreeMap<String, String>,
) {
    let f = flow(
        &dataset.name,
        &dataset.name,
        query,
        conf,
        dataset.comment.clone(),
        dataset.origin.clone(),
    )
    .map(|mut f| {
        f.defines_dataset = true;
        f
    });
    out.datasets.push(dataset);
    push_flow(out, problems, f);
}

fn push_flow(
    out: &mut LibraryDeclarations,
    problems: &mut Vec<Diagnostic>,
    f: Result<FlowDef, Diagnostic>,
) {
    match f {
        Ok(f) => out.flows.push(f),
        Err(d) => problems.push(d),
    }
}

/// An AUTO CDC clause as the flow `create_auto_cdc_flow` would declare.
fn auto_cdc_flow(
    name: &str,
    target: &str,
    cdc: &AutoCdc,
    conf: &BTreeMap<String, String>,
    comment: Option<String>,
    at: Option<Origin>,
    problems: &mut Vec<Diagnostic>,
) -> Option<FlowDef> {
    let source = match &cdc.source.source {
        ReadSource::Table(n) => match n.parts.as_slice() {
            [one] => one.clone(),
            parts => {
                problems.push(
                    Diagnostic::new(format!(
                        "AUTO CDC reads `{n}`: datasets of a pipeline have one-part names"
                    ))
                    .origin(at)
                    .help(format!(
                        "write `FROM STREAM({})`",
                        parts.last().map(String::as_str).unwrap_or_default()
                    )),
                );
                return None;
            }
        },
        ReadSource::TableFunction(t) => {
            problems.push(
                Diagnostic::new(format!(
                    "AUTO CDC reads the change feed from `{}(...)`, but it applies a dataset of the pipeline",
                    t.name
                ))
                .origin(at)
                .help("read the feed in a streaming table or view (`CREATE STREAMING TABLE feed AS SELECT * FROM STREAM read_files(...)`) and write `FROM STREAM(feed)`"),
            );
            return None;
        }
    };
    if cdc.ignore_null_updates {
        problems.push(
            Diagnostic::new("AUTO CDC's IGNORE NULL UPDATES is not supported")
                .origin(at)
                .help("remove it: every column of an upsert is written, NULLs included (as in Spark 4.3)"),
        );
        return None;
    }
    let names = |v: &[Ident]| v.iter().map(|i| i.value.clone()).collect::<Vec<_>>();
    let mut decl = pipelines_core::cdc::AutoCdc::new(target, source)
        .keys(names(&cdc.keys))
        .sequence_by(cdc.sequence_by.text.clone())
        .name(name);
    decl.source_streaming = cdc.source.streaming;
    decl.apply_as_deletes = cdc.apply_as_delete_when.as_ref().map(|e| e.text.clone());
    decl.apply_as_truncates = cdc.apply_as_truncate_when.as_ref().map(|e| e.text.clone());
    match &cdc.columns {
        None | Some(ColumnSelection::All) => {}
        Some(ColumnSelection::AllExcept(c)) => decl.except_column_list = Some(names(c)),
        Some(ColumnSelection::Only(c)) => decl.column_list = Some(names(c)),
    }
    decl.stored_as_scd_type = cdc.stored_as_scd_type;
    match &cdc.track_history {
        None | Some(ColumnSelection::All) => {}
        Some(ColumnSelection::AllExcept(c)) => {
            decl.track_history_except_column_list = Some(names(c))
        }
        Some(ColumnSelection::Only(c)) => decl.track_history_column_list = Some(names(c)),
    }
    decl.conf = conf.clone();
    decl.comment = comment;
    Some(FlowDef::auto_cdc(decl, at))
}

/// A dataset's one-part name; a qualified one is a problem.
fn one_part(name: &Name, at: &Option<Origin>, problems: &mut Vec<Diagnostic>) -> Option<String> {
    match name.parts.as_slice() {
        [one] => Some(one.clone()),
        parts => {
            problems.push(
                Diagnostic::new(format!(
                    "`{name}`: datasets of a pipeline have one-part names"
                ))
                .origin(at.clone())
                .help(format!(
                    "write `{}`; the spec's `catalog` and `database` are recorded only",
                    parts.last().map(String::as_str).unwrap_or_default()
                )),
            );
            None
        }
    }
}

fn table_def(name: &str, kind: DatasetType, t: &TableDef, origin: Option<Origin>) -> DatasetDef {
    let schema = (!t.columns.is_empty()).then(|| {
        t.columns
            .iter()
            .map(|c| {
                format!(
                    "`{}` {}{}",
                    c.name.value.replace('`', "``"),
                    c.data_type,
                    if c.not_null { " NOT NULL" } else { "" }
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    });
    DatasetDef {
        name: name.to_string(),
        kind: Some(kind),
        format: t.using.as_ref().map(|u| u.value.clone()),
        options: t
            .properties
            .iter()
            .map(|p| (p.key.clone(), p.value.clone()))
            .collect(),
        partition_cols: t.partitioned_by.iter().map(|c| c.value.clone()).collect(),
        schema,
        comment: t.comment.clone(),
        origin,
        ..DatasetDef::default()
    }
}

/// The expectations of a table's column list (`CONSTRAINT name EXPECT
/// (...)`), each declared at its `CONSTRAINT`, and its quarantine (`ON
/// VIOLATION QUARANTINE TO q`, which drops the row into `q`): a dataset has
/// one, so two different ones are a problem.
fn add_expectations(
    dataset: &mut DatasetDef,
    t: &TableDef,
    origin: impl Fn(Span) -> Option<Origin>,
    problems: &mut Vec<Diagnostic>,
) {
    for c in &t.constraints {
        let at = origin(c.span);
        dataset.expectations.push(
            Expectation::new(c.name.value.clone(), c.condition.clone(), c.action).at(at.clone()),
        );
        let Some(target) = &c.quarantine else {
            continue;
        };
        let Some(target) = one_part(target, &at, problems) else {
            continue;
        };
        if let Some(first) = &dataset.quarantine {
            if *first != target {
                problems.push(
                    Diagnostic::new(format!(
                        "`{}` quarantines rows to both `{first}` and `{target}`; a dataset has \
                         one quarantine",
                        dataset.name
                    ))
                    .origin(at)
                    .help(format!(
                        "send every quarantined row of `{}` to one table: \
                         `ON VIOLATION QUARANTINE TO {first}`",
                        dataset.name
                    )),
                );
            }
        } else {
            dataset.quarantine = Some(target);
        }
    }
}

/// A flow running `query` into `target`, with the file's `SET`s so far as
/// its conf; `pipelines.outputMode = update` makes it an update flow.
fn flow(
    name: &str,
    target: &str,
    query: &Query,
    conf: &BTreeMap<String, String>,
    comment: Option<String>,
    origin: Option<Origin>,
) -> Result<FlowDef, Diagnostic> {
    let ast = query.parse_ast().map_err(|e| {
        Diagnostic::new(format!("the query does not parse: {e}")).origin(origin.clone())
    })?;
    let ast = Arc::new(ast);
    let query = Arc::new(query.clone());
    let mut f = FlowDef::append(
        name,
        target,
        FlowQuery::new(move |session| {
            crate::planner::plan(&query, &ast, session).map_err(Into::into)
        }),
    );
    if conf
        .get(OUTPUT_MODE_CONF_KEY)
        .is_some_and(|m| m.eq_ignore_ascii_case("update"))
    {
        f.kind = FlowKind::Update;
    }
    f.conf = conf.clone();
    f.comment = comment;
    f.origin = origin;
    Ok(f)
}
