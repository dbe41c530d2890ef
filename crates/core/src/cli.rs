//! The command line every pipeline binary gets from `pipelines::main()`:
//! `dry-run`, `run`, `graph` and `init`, like `spark-pipelines`, and `ui`
//! (the web UI of the last run, from the event log).

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::engine::runtime::{self, RunOptions, RunSummary};
use crate::error::{Error, Result};
use crate::formats::did_you_mean;
use crate::graph::PipelineGraph;
use crate::pipeline::Pipeline;
use crate::plan::ddl::type_to_ddl;
use crate::render;
use crate::spec::display_path;

/// Command-line arguments of a pipeline binary.
#[derive(Debug, Parser)]
#[command(
    about = "Run, check and inspect this streaming pipeline",
    long_about = None,
    disable_version_flag = true
)]
pub struct Cli {
    /// Path of the pipeline spec (default: pipeline.yml or spark-pipeline.yml
    /// in the current directory or a parent).
    #[arg(long, global = true, value_name = "PATH")]
    pub spec: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load the spec and every flow, build the plans and validate the whole
    /// pipeline without reading or writing any data.
    DryRun(DryRunArgs),
    /// Validate, then run every flow (available-now, in dependency order).
    Run(RunArgs),
    /// Print the dataflow graph (Mermaid or Graphviz DOT).
    Graph {
        /// Output format.
        #[arg(long, value_enum, default_value_t = GraphFormat::Mermaid)]
        format: GraphFormat,
    },
    /// Serve the web UI of the pipeline's last run from its event log: a
    /// finished run, or one running in another process (followed live).
    Ui {
        /// The pipeline's storage: a directory or `s3://bucket/prefix`
        /// (default: the spec's `storage`).
        #[arg(long, value_name = "DIR")]
        storage: Option<String>,
        /// Where to listen; another address than loopback is reachable from
        /// other machines.
        #[arg(long, value_name = "ADDR", default_value = crate::engine::web::DEFAULT_ADDR)]
        addr: String,
    },
    /// Query the event log table with SQL (the table is `event_log`).
    Events {
        /// The pipeline's storage: a directory or `s3://bucket/prefix`
        /// (default: the spec's `storage`).
        #[arg(long, value_name = "DIR")]
        storage: Option<String>,
        /// The query (default: every event's sequence, time, level, type,
        /// flow and message, in order).
        #[arg(long, value_name = "SQL")]
        sql: Option<String>,
    },
    /// Write a starter project: a spec, a flow file and sample data.
    Init {
        /// Pipeline name; also the directory created.
        #[arg(long)]
        name: String,
        /// Directory to create (default: ./<name>).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Write a project of YAML and SQL only (run it with the `pipelines`
        /// binary) instead of a Cargo project.
        #[arg(long)]
        sql: bool,
    },
}

/// Options of `dry-run`.
#[derive(Debug, Args, Default, Clone)]
pub struct DryRunArgs {
    /// After the local checks, also register the pipeline with a Spark
    /// Connect server (`sc://host:port[/;token=...]`) and let Spark analyse
    /// it; nothing runs. Default: the `SPARK_REMOTE` environment variable.
    #[arg(long, value_name = "URL")]
    pub remote: Option<String>,
}

/// Options of `run`.
#[derive(Debug, Args, Default, Clone)]
pub struct RunArgs {
    /// Run on a Spark cluster through Spark Connect
    /// (`sc://host:port[/;token=...]`) instead of this engine; the pipeline
    /// is checked here first. Default: the `SPARK_REMOTE` environment variable.
    #[arg(long, value_name = "URL", conflicts_with_all = ["continuous", "ui"])]
    pub remote: Option<String>,
    /// Datasets to reset and recompute from scratch (comma separated).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "DATASETS",
        conflicts_with = "full_refresh_all"
    )]
    pub full_refresh: Vec<String>,
    /// Reset and recompute every dataset.
    #[arg(long)]
    pub full_refresh_all: bool,
    /// Only update these datasets (comma separated).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "DATASETS",
        conflicts_with = "full_refresh_all"
    )]
    pub refresh: Vec<String>,
    /// Keep every flow running on its trigger until Ctrl-C.
    #[arg(long)]
    pub continuous: bool,
    /// Serve the web UI (the graph, each flow's state and figures, live) and
    /// Prometheus `/metrics` while it runs, on 127.0.0.1:4040 or the address
    /// given; another address than loopback is reachable from other machines.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = crate::engine::web::DEFAULT_ADDR)]
    pub ui: Option<String>,
}

/// Graph output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    /// Mermaid flowchart.
    Mermaid,
    /// Graphviz DOT.
    Dot,
}

/// Parses `args` and runs the command; the process entry point.
pub fn run_cli(pipeline: Pipeline, args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr().lock();
    let code = execute(pipeline, args, &mut out, &mut err);
    ExitCode::from(code)
}

/// Runs a command line, writing to `out` and `err`; returns the exit code
/// (0 success, 1 invalid pipeline or failed run, 2 bad usage).
pub fn execute(
    pipeline: Pipeline,
    args: impl IntoIterator<Item = OsString>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let text = e.render().to_string();
            let _ = if code == 0 {
                write!(out, "{text}")
            } else {
                write!(err, "{text}")
            };
            return code;
        }
    };
    match dispatch(pipeline, cli, out, err) {
        Ok(()) => 0,
        Err(Error::Invalid(diags)) => {
            let _ = writeln!(err, "{diags}");
            1
        }
        Err(e @ Error::Usage(_)) => {
            let _ = writeln!(err, "error: {e}");
            2
        }
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            1
        }
    }
}

fn dispatch(pipeline: Pipeline, cli: Cli, out: &mut dyn Write, err: &mut dyn Write) -> Result<()> {
    let io = |e: std::io::Error| Error::io("<stdout>", e);
    match cli.command {
        Command::Init { name, dir, sql } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            let kind = if sql {
                crate::init::ProjectKind::Sql
            } else {
                crate::init::ProjectKind::Rust
            };
            let written = crate::init::write_project(&name, &dir, kind)?;
            writeln!(out, "Created pipeline `{name}` in {}:", display_path(&dir)).map_err(io)?;
            for f in written {
                writeln!(out, "  {}", display_path(&f)).map_err(io)?;
            }
            let next = if sql {
                "pipelines dry-run"
            } else {
                "cargo run -- dry-run"
            };
            writeln!(out, "Next: cd {} && {next}", display_path(&dir)).map_err(io)?;
            Ok(())
        }
        Command::Ui { storage, addr } => {
            let storage = match storage {
                Some(s) => storage_argument(&s)?,
                None => {
                    let path = pipeline.locate_spec(cli.spec.as_deref())?;
                    crate::spec::load(&path)?.storage_location()
                }
            };
            let addr = parse_addr("--addr", &addr)?;
            crate::engine::web::serve_event_log(&storage, addr, out)
        }
        Command::Events { storage, sql } => {
            let table = match storage {
                Some(s) => crate::engine::event_table::table_path(
                    &storage_argument(&s)?,
                    Path::new("."),
                    &std::collections::BTreeMap::new(),
                )?,
                None => {
                    let path = pipeline.locate_spec(cli.spec.as_deref())?;
                    let spec = crate::spec::load(&path)?;
                    let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
                    crate::engine::event_table::table_path(
                        &spec.storage_location(),
                        &base,
                        &spec.configuration,
                    )?
                }
            };
            let sql = sql
                .as_deref()
                .unwrap_or(crate::engine::event_table::DEFAULT_QUERY);
            let batches = crate::engine::event_table::query(&table, sql)?;
            let text = arrow::util::pretty::pretty_format_batches(&batches)
                .map_err(|e| Error::runtime(format!("events: {e}")))?;
            writeln!(out, "{text}").map_err(io)?;
            Ok(())
        }
        Command::DryRun(args) => {
            let (graph, spec_path, spec) = load(&pipeline, cli.spec.as_deref())?;
            show_warnings(&graph, err)?;
            write!(out, "{}", summary(&graph, &spec_path)).map_err(io)?;
            if let Some(url) = crate::remote::remote_from(args.remote.as_deref()) {
                let base_dir = spec_dir(&spec_path);
                let request = crate::remote::RemoteRequest {
                    url: &url,
                    action: crate::remote::RemoteAction::DryRun,
                    graph: &graph,
                    spec: &spec,
                    base_dir: &base_dir,
                    full_refresh: &[],
                    full_refresh_all: false,
                    refresh: &[],
                };
                crate::remote::backend_for(&url)?.execute(&request, out, err)?;
            }
            Ok(())
        }
        Command::Graph { format } => {
            let (graph, _, _) = load(&pipeline, cli.spec.as_deref())?;
            let text = match format {
                GraphFormat::Mermaid => render::mermaid(&graph),
                GraphFormat::Dot => render::dot(&graph),
            };
            write!(out, "{text}").map_err(io)?;
            Ok(())
        }
        Command::Run(args) => {
            let (graph, spec_path, spec) = load(&pipeline, cli.spec.as_deref())?;
            show_warnings(&graph, err)?;
            check_refresh_selection(&graph, &args)?;
            let base_dir = spec_dir(&spec_path);
            let remote = if args.continuous || args.ui.is_some() {
                args.remote.clone()
            } else {
                crate::remote::remote_from(args.remote.as_deref())
            };
            if let Some(url) = remote {
                let request = crate::remote::RemoteRequest {
                    url: &url,
                    action: crate::remote::RemoteAction::Run,
                    graph: &graph,
                    spec: &spec,
                    base_dir: &base_dir,
                    full_refresh: &args.full_refresh,
                    full_refresh_all: args.full_refresh_all,
                    refresh: &args.refresh,
                };
                return crate::remote::backend_for(&url)?.execute(&request, out, err);
            }
            let mut opts = RunOptions::new(base_dir, spec.storage_location());
            opts.continuous = args.continuous;
            opts.full_refresh = args.full_refresh.clone();
            opts.full_refresh_all = args.full_refresh_all;
            opts.refresh = args.refresh.clone();
            opts.ui = match &args.ui {
                Some(a) => Some(parse_addr("--ui", a)?),
                None => None,
            };
            let summary = runtime::run(&graph, &opts)?;
            write!(out, "{}", run_report(&graph, &summary)).map_err(io)?;
            Ok(())
        }
    }
}

/// The directory of the spec file (`.` for a bare file name).
fn spec_dir(spec_path: &Path) -> PathBuf {
    spec_path
        .parent()
        .map(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            }
        })
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

/// Writes the graph's warnings to `err`, one `warning:` block each.
fn show_warnings(graph: &PipelineGraph, err: &mut dyn Write) -> Result<()> {
    for w in &graph.warnings {
        writeln!(err, "{}", w.as_warning()).map_err(|e| Error::io("<stderr>", e))?;
    }
    Ok(())
}

/// `host:port` of a flag, or a usage error saying how to write it.
/// The location `--storage` names (a path relative to the working
/// directory, or `s3://bucket/prefix`).
fn storage_argument(text: &str) -> Result<crate::engine::storage::Location> {
    crate::engine::storage::Location::parse(text, Path::new("")).map_err(|e| {
        Error::Usage(format!(
            "--storage: {e}; give a directory or `s3://bucket/prefix`"
        ))
    })
}

fn parse_addr(flag: &str, a: &str) -> Result<std::net::SocketAddr> {
    a.parse().map_err(|_| {
        Error::Usage(format!(
            "{flag} {a}: not an address; write host:port, e.g. `{flag} {}` (or `{flag} 0.0.0.0:4040` to be reachable from other machines)",
            crate::engine::web::DEFAULT_ADDR
        ))
    })
}

/// Loads the spec (resolving `${ENV}` values) and validates the pipeline.
fn load(
    pipeline: &Pipeline,
    explicit: Option<&Path>,
) -> Result<(PipelineGraph, PathBuf, crate::spec::PipelineSpec)> {
    let path = pipeline.locate_spec(explicit)?;
    let mut spec = crate::spec::load(&path)?;
    if let Err(errors) = spec.resolve_env_from_process() {
        let diags =
            crate::error::Diagnostics(errors.into_iter().map(|e| e.to_diagnostic()).collect());
        return Err(Error::Invalid(diags));
    }
    let graph = pipeline.build(&spec).map_err(Error::Invalid)?;
    Ok((graph, path, spec))
}

/// Checks `--full-refresh` / `--refresh` names against the graph.
pub fn check_refresh_selection(graph: &PipelineGraph, args: &RunArgs) -> Result<()> {
    let mut problems = Vec::new();
    for (flag, names) in [
        ("--full-refresh", &args.full_refresh),
        ("--refresh", &args.refresh),
    ] {
        for n in names {
            if !graph.datasets.contains_key(n) {
                let mut msg = format!(
                    "{flag} names `{n}`, which is not a dataset of pipeline `{}`",
                    graph.name
                );
                if let Some(s) = did_you_mean(n, graph.datasets.keys().map(String::as_str)) {
                    msg.push_str(&format!("; did you mean `{s}`?"));
                }
                problems.push(msg);
            }
        }
    }
    for n in &args.full_refresh {
        if args.refresh.contains(n) {
            problems.push(format!(
                "`{n}` is in both --full-refresh and --refresh; a full refresh already updates it, keep one"
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::Usage(problems.join("\nerror: ")))
    }
}

/// What `run` prints when it ends: one line per flow.
pub fn run_report(graph: &PipelineGraph, summary: &RunSummary) -> String {
    let mut s = format!("Pipeline `{}` run complete:\n", graph.name);
    for f in &summary.flows {
        if f.skipped {
            s.push_str(&format!("  {:<24} skipped (already done)\n", f.flow));
            continue;
        }
        s.push_str(&format!(
            "  {:<24} {} batch{}{}, {} rows in, {} rows out\n",
            f.flow,
            f.batches,
            if f.batches == 1 { "" } else { "es" },
            if f.replayed > 0 {
                format!(" ({} replayed after a restart)", f.replayed)
            } else {
                String::new()
            },
            f.input_rows,
            f.output_rows
        ));
    }
    s
}

/// The dry-run report: what was declared, how flows connect, in what order they run.
pub fn summary(graph: &PipelineGraph, spec_path: &Path) -> String {
    let mut s = String::new();
    let n_datasets = graph.datasets.len();
    let n_flows = graph.flows.len();
    s.push_str(&format!(
        "Pipeline `{}` ({}) is valid: {} dataset{}, {} flow{}. Nothing was read or written.\n",
        graph.name,
        display_path(spec_path),
        n_datasets,
        if n_datasets == 1 { "" } else { "s" },
        n_flows,
        if n_flows == 1 { "" } else { "s" },
    ));
    s.push_str("\nDatasets:\n");
    for d in graph.datasets.values() {
        let format = d.format();
        let columns = d
            .schema
            .as_ref()
            .map(|sch| {
                sch.fields()
                    .iter()
                    .map(|f| format!("{} {}", f.name(), type_to_ddl(f.data_type())))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        // A view is not stored: no format.
        let kind = match d.def.dataset_type() {
            crate::definition::DatasetType::TemporaryView => "temporary view".to_string(),
            other => format!("{} ({format})", other.describe()),
        };
        s.push_str(&format!(
            "  {:<24} {}{}\n",
            d.def.name,
            kind,
            if columns.is_empty() {
                String::new()
            } else {
                format!(": {columns}")
            }
        ));
    }
    s.push_str("\nFlows, in run order:\n");
    for f in graph.ordered_flows() {
        let reads: Vec<String> = f
            .reads
            .iter()
            .map(|(n, streaming)| {
                if *streaming {
                    format!("{n} (stream)")
                } else {
                    n.clone()
                }
            })
            .chain(f.plan.sources().iter().map(|src| src.describe()))
            .collect();
        let is_view = graph
            .datasets
            .get(&f.def.target)
            .is_some_and(|d| d.def.dataset_type() == crate::definition::DatasetType::TemporaryView);
        if is_view {
            s.push_str(&format!(
                "  {:<24} view query, run inside the flows that read `{}`  reads {}\n",
                f.def.name,
                f.def.target,
                if reads.is_empty() {
                    "nothing".to_string()
                } else {
                    reads.join(", ")
                },
            ));
            continue;
        }
        let kind = match &f.def.auto_cdc {
            Some(cdc) => format!(
                "AUTO CDC ({}, keys {}, sequence by {})",
                cdc.scd_type().describe(),
                cdc.keys.join(", "),
                cdc.sequence_by.trim()
            ),
            None => format!(
                "{} {}",
                f.output_mode,
                if f.streaming { "streaming" } else { "batch" }
            ),
        };
        s.push_str(&format!(
            "  {:<24} {} → {}  reads {}  trigger: {}\n",
            f.def.name,
            kind,
            f.def.target,
            if reads.is_empty() {
                "nothing".to_string()
            } else {
                reads.join(", ")
            },
            f.trigger.describe(),
        ));
        if !f.expectations.is_empty() {
            let list: Vec<String> = f
                .expectations
                .iter()
                .map(|e| format!("{} ({}): {}", e.name, e.action, e.condition.trim()))
                .collect();
            s.push_str(&format!(
                "  {:<24} expects {}{}\n",
                "",
                list.join("; "),
                f.quarantine
                    .as_ref()
                    .map(|q| format!("; dropped rows → {q}"))
                    .unwrap_or_default()
            ));
        }
    }
    s
}

impl Pipeline {
    /// Runs the command line (`dry-run`, `run`, `graph`, `init`) and returns
    /// the process exit code.
    pub fn main(self) -> std::process::ExitCode {
        run_cli(self, std::env::args_os())
    }
}

/// The whole command line of a pipeline binary, with every macro declaration:
/// `fn main() -> std::process::ExitCode { pipelines::main() }`.
pub fn main() -> std::process::ExitCode {
    Pipeline::from_registry().main()
}
