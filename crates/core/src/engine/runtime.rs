//! The runtime: runs each flow of a validated pipeline as a streaming query
//! with Structured Streaming's micro-batch model and exactly-once recovery.
//!
//! Per micro-batch N: (1) each streaming source is asked for its end offset;
//! (2) `offsets/N` is written to the flow's checkpoint; (3) the range is read
//! and the plan runs over it; (4) the sink writes batch N idempotently; (5)
//! `commits/N` is written. On restart a batch with offsets but no commit is
//! replayed over exactly the logged offsets.
//!
//! `run` is a triggered update: every flow runs available-now, in
//! topological order, so downstream flows read what upstream committed.
//! `run --continuous` keeps every flow on its own trigger until stopped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;

use crate::connector::Reset;
use crate::definition::DatasetType;
use crate::engine::cdc::{CdcApplier, CdcFlow};
use crate::engine::checkpoint::{
    lock_checkpoint, shape_diff, shape_options, Checkpoint, CheckpointLock, CommitEntry,
    OffsetEntry, QueryShape, SourceShape,
};
use crate::engine::event_log::{EventError, Level, NewEvent};
use crate::engine::exec::watermark::{WatermarkPolicy, WatermarkTracker};
use crate::engine::exec::{BatchContext, CompiledPlan};
use crate::engine::progress::{
    BatchProgress, FlowState, PhaseDurations, ProgressReporter, SourceProgress, UpdateSelection,
};
use crate::engine::quality::QualityChecks;
use crate::engine::sink::{Sink, SinkContext};
use crate::engine::source::{read_all, Offset, Source, SourceContext};
use crate::engine::storage::Location;
use crate::error::{Error, Result};
use crate::formats::OutputMode;
use crate::graph::{DatasetNode, FlowNode, PipelineGraph};
use crate::plan::ddl::type_to_ddl;
use crate::plan::PlanNode;
use crate::spec::Trigger;

mod real_time;

/// How `run` was asked to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Keep every flow running on its trigger until `stop` is set.
    pub continuous: bool,
    /// Datasets to reset before running.
    pub full_refresh: Vec<String>,
    /// Reset every dataset.
    pub full_refresh_all: bool,
    /// Only run flows writing these datasets (empty: all).
    pub refresh: Vec<String>,
    /// Directory relative paths resolve against (the spec file's directory).
    pub base_dir: PathBuf,
    /// Root of checkpoints, the event log and tables without a path: a
    /// local directory or an `s3://bucket/prefix`.
    pub storage: Location,
    /// Set to stop continuous flows at the next batch boundary.
    pub stop: Arc<AtomicBool>,
    /// Polling interval of idle flows with the default trigger (continuous mode).
    pub idle_poll: Duration,
    /// `--ui`: serve the run's metrics at this address while it runs.
    pub ui: Option<std::net::SocketAddr>,
}

impl RunOptions {
    /// Options for a triggered run rooted at `base_dir` with `storage`.
    pub fn new(base_dir: impl Into<PathBuf>, storage: impl Into<Location>) -> Self {
        let storage = match storage.into() {
            Location::Local(p) => Location::Local(clean(&p)),
            object => object,
        };
        RunOptions {
            continuous: false,
            full_refresh: Vec::new(),
            full_refresh_all: false,
            refresh: Vec::new(),
            base_dir: clean(&base_dir.into()),
            storage,
            stop: Arc::new(AtomicBool::new(false)),
            idle_poll: Duration::from_millis(50),
            ui: None,
        }
    }
}

/// What one flow did during a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowSummary {
    /// Flow name.
    pub flow: String,
    /// Micro-batches committed (including replays).
    pub batches: u64,
    /// Rows read.
    pub input_rows: u64,
    /// Rows written.
    pub output_rows: u64,
    /// Batches replayed from offsets logged before a restart.
    pub replayed: u64,
    /// True when the flow was not selected by `--refresh` or had nothing to do.
    pub skipped: bool,
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Per flow, in run order.
    pub flows: Vec<FlowSummary>,
}

/// The directory of a table: its `path` (a local path resolved against
/// `base_dir`, or `s3://bucket/prefix`) or `<storage>/tables/<name>`.
pub fn table_path(dataset: &DatasetNode, opts: &RunOptions) -> Result<Location> {
    match &dataset.def.path {
        Some(p) => location_of(p, opts, &format!("table `{}`", dataset.def.name)),
        None => Ok(opts.storage.join("tables").join(&dataset.def.name)),
    }
}

/// The location `text` names for `what` (an error saying so otherwise).
fn location_of(text: &str, opts: &RunOptions, what: &str) -> Result<Location> {
    Location::parse(text, &opts.base_dir).map_err(|e| {
        Error::runtime_with_help(
            format!("{what}: `path`: {e}"),
            "give a local path or an `s3://bucket/prefix` URL",
        )
    })
}

fn resolve(base: &Path, p: &str) -> PathBuf {
    let path = Path::new(p);
    if path.is_absolute() {
        clean(path)
    } else {
        clean(&base.join(path))
    }
}

/// Drops `.` components, so messages show `/a/storage`, not `/a/./storage`.
fn clean(p: &Path) -> PathBuf {
    p.components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

/// The checkpoint directory of a flow: `checkpointLocation` (a path, or
/// `s3://bucket/prefix`) or `<storage>/checkpoints/<flow>`.
pub fn checkpoint_path(flow: &FlowNode, opts: &RunOptions) -> Result<Location> {
    let explicit = flow
        .options
        .get("checkpointLocation")
        .or_else(|| flow.def.conf.get("checkpointLocation"));
    match explicit {
        Some(p) => Location::parse(p, &opts.base_dir).map_err(|e| {
            Error::runtime_with_help(
                format!("flow `{}`: `checkpointLocation`: {e}", flow.def.name),
                "give a local path or an `s3://bucket/prefix` URL",
            )
        }),
        None => Ok(opts.storage.join("checkpoints").join(&flow.def.name)),
    }
}

/// Runs the pipeline: every selected flow, triggered (available-now, in
/// order) or continuously (each on its trigger until `opts.stop`).
pub fn run(graph: &PipelineGraph, opts: &RunOptions) -> Result<RunSummary> {
    crate::engine::storage::local::configure_fsync(&graph.configuration)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::external("could not start the runtime", e))?;
    rt.block_on(run_async(graph, opts))
}

/// The selected flows, in run order.
fn selected_flows<'a>(graph: &'a PipelineGraph, opts: &RunOptions) -> Vec<&'a FlowNode> {
    let selection: Vec<&String> = opts
        .refresh
        .iter()
        .chain(opts.full_refresh.iter())
        .collect();
    graph
        .ordered_flows()
        // A temporary view's query runs inside the flows that read it.
        .filter(|f| {
            graph
                .datasets
                .get(&f.def.target)
                .is_none_or(|d| d.def.dataset_type() != DatasetType::TemporaryView)
        })
        .filter(|f| selection.is_empty() || selection.contains(&&f.def.target))
        .collect()
}

/// Clears checkpoints and data of the datasets named by `--full-refresh` (or all).
pub fn full_refresh(graph: &PipelineGraph, opts: &RunOptions) -> Result<Vec<String>> {
    let names: Vec<String> = if opts.full_refresh_all {
        graph.datasets.keys().cloned().collect()
    } else {
        opts.full_refresh.clone()
    };
    let mut done = Vec::new();
    for name in names {
        let Some(ds) = graph.datasets.get(&name) else {
            continue;
        };
        let mut locks = Vec::new();
        for flow in ds.flows.iter().filter_map(|f| graph.flows.get(f)) {
            let dir = checkpoint_path(flow, opts)?;
            // A running flow keeps its checkpoint and table.
            locks.push(lock_checkpoint(&dir)?);
            remove_pipeline_dir(&dir, Owned::Checkpoint)?;
        }
        if ds.def.dataset_type() != DatasetType::Sink {
            let path = table_path(ds, opts)?;
            // A table whose format keeps history (Delta) is truncated in a
            // new version; other tables are removed.
            let truncated = match crate::connector::sink(&ds.format()) {
                Some(c) if c.reset() == Reset::Truncate => {
                    c.truncate(&path, ds.schema.clone(), &ds.def.partition_cols)?
                }
                _ => false,
            };
            if !truncated {
                remove_pipeline_dir(&path, Owned::Table)?;
            }
        }
        done.push(name);
    }
    Ok(done)
}

/// What a directory the runtime deletes must be.
#[derive(Clone, Copy)]
enum Owned {
    /// A flow's checkpoint: it holds `metadata` or `offsets/`.
    Checkpoint,
    /// A table: it holds `_spark_metadata` (file sink) or `_delta_log`.
    Table,
}

/// Removes `p` (a full refresh, a materialized view's recompute) only when
/// it is empty, missing, or recognisably what `owned` says: a table's or
/// checkpoint's `path` set by mistake to a directory of other data is never
/// deleted.
fn remove_pipeline_dir(p: impl Into<Location>, owned: Owned) -> Result<()> {
    let p: Location = p.into();
    let (what, markers): (&str, &[&str]) = match owned {
        Owned::Checkpoint => ("a flow's checkpoint", &["metadata", "offsets"]),
        Owned::Table => ("a table", &["_spark_metadata", "_delta_log"]),
    };
    if p.is_empty_dir()? {
        return p.remove_all();
    }
    for m in markers {
        if p.contains(m)? {
            return p.remove_all();
        }
    }
    Err(Error::runtime_with_help(
        format!(
            "refusing to delete {p}: it is not {what} this pipeline wrote (it has no {})",
            markers
                .iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(" or ")
        ),
        "point the `path` at a directory of its own, or empty this one yourself",
    ))
}

/// Compiles every selected flow before any data moves, so a flow this build
/// cannot run stops the whole run up front, with every such problem listed.
fn precheck(graph: &PipelineGraph, flows: &[&FlowNode]) -> Result<()> {
    let mut problems = crate::error::Diagnostics::default();
    for flow in flows {
        let resolved = match flow.plan.resolve(&GraphCatalog(graph)) {
            Ok(r) => r,
            Err(errs) => {
                for e in errs {
                    let mut d = crate::error::Diagnostic::new(e.message)
                        .subject(flow.def.subject())
                        .origin(flow.def.origin.clone());
                    d.help = e.help;
                    problems.push(d);
                }
                continue;
            }
        };
        let compiled = state_partitions(graph, flow).and_then(|parts| {
            CompiledPlan::compile_with_state_partitions(
                &flow.def.name,
                &flow.plan,
                &resolved,
                2,
                parts,
            )
        });
        if let Err(e) = compiled {
            let (message, help) = match e {
                Error::Runtime { message, help } => (message, help),
                Error::Plan(p) => (p.message, p.help),
                other => (other.to_string(), None),
            };
            let message = message
                .strip_prefix(&format!("flow `{}`: ", flow.def.name))
                .map(str::to_string)
                .unwrap_or(message);
            let mut d = crate::error::Diagnostic::new(message)
                .subject(flow.def.subject())
                .origin(flow.def.origin.clone());
            d.help = help;
            problems.push(d);
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::Invalid(problems))
    }
}

async fn run_async(graph: &PipelineGraph, opts: &RunOptions) -> Result<RunSummary> {
    precheck(graph, &selected_flows(graph, opts))?;
    full_refresh(graph, opts)?;
    let mut reporter = ProgressReporter::new(&opts.storage, &graph.name)?;
    let _server = match opts.ui {
        Some(addr) => {
            let view = crate::engine::run_view::SharedView::new(&graph.name);
            let observed = view.clone();
            reporter = reporter.with_observer(Arc::new(move |e| observed.add(e)));
            let server = crate::engine::web::start(addr, view).await?;
            eprintln!("{}", crate::engine::web::announcement(server.addr()));
            Some(server)
        }
        None => None,
    };
    let reporter = Arc::new(reporter);
    let table = crate::engine::event_table::table_path(
        &opts.storage,
        &opts.base_dir,
        &graph.configuration,
    )?;
    let copy = crate::engine::event_table::EventTableCopy::start(&opts.storage, &table)?;
    let flows = selected_flows(graph, opts);
    reporter.update_started(
        graph,
        &UpdateSelection {
            continuous: opts.continuous,
            full_refresh_all: opts.full_refresh_all,
            full_refresh: &opts.full_refresh,
            refresh: &opts.refresh,
            flows: &flows,
        },
    )?;
    let result = run_flows(graph, opts, flows, &reporter).await;
    let (state, message) = match &result {
        Ok(_) if opts.continuous => ("CANCELED", "Update stopped by the user.".to_string()),
        Ok(s) => (
            "COMPLETED",
            format!("Update completed: {} flows.", s.flows.len()),
        ),
        Err(e) => ("FAILED", format!("Update failed: {}", first_line(e))),
    };
    let mut event = NewEvent::info("update_progress", message)
        .details(serde_json::json!({"update_progress": {"state": state}}));
    if let Err(e) = &result {
        event = event.error(EventError::from_error(e));
    }
    reporter.emit(event)?;
    if let Some(Err(e)) = copy.map(|c| c.finish()) {
        // The events stay in the file; the next run copies them.
        let message = format!(
            "event log table {table}: {e}; its events are kept in {} and copied by the next run",
            reporter.log().location()
        );
        tracing::warn!("{message}");
        eprintln!("warning: {message}");
    }
    result
}

/// The first line of an error's text.
fn first_line(e: &Error) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}

/// Runs the selected flows: in order (available-now), or each on its own
/// task until stopped (continuous).
async fn run_flows(
    graph: &PipelineGraph,
    opts: &RunOptions,
    flows: Vec<&FlowNode>,
    reporter: &Arc<ProgressReporter>,
) -> Result<RunSummary> {
    let mut summary = RunSummary::default();
    if !opts.continuous {
        for flow in flows {
            let s = run_flow(graph, flow, opts, reporter, false).await?;
            summary.flows.push(s);
        }
        return Ok(summary);
    }
    // Continuous: every flow on its own task; Ctrl-C (or SIGTERM) stops
    // them at a batch (or epoch) boundary.
    let _stop_on_signal = StopOnSignal::register(&opts.stop);
    let mut handles = Vec::new();
    for flow in flows {
        let graph = graph.clone();
        let name = flow.def.name.clone();
        let opts = opts.clone();
        let reporter = reporter.clone();
        handles.push(tokio::spawn(async move {
            let flow = &graph.flows[&name];
            run_flow(&graph, flow, &opts, &reporter, true).await
        }));
    }
    let mut first_error = None;
    for h in handles {
        match h.await {
            Ok(Ok(s)) => summary.flows.push(s),
            Ok(Err(e)) => {
                opts.stop.store(true, Ordering::SeqCst);
                first_error.get_or_insert(e);
            }
            Err(e) => {
                opts.stop.store(true, Ordering::SeqCst);
                first_error.get_or_insert(Error::runtime(format!("a flow task failed: {e}")));
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(summary),
    }
}

/// While alive, SIGINT and SIGTERM set a run's stop flag. The handler only
/// stores to atomics (async-signal-safe); a thread says so on the terminal.
struct StopOnSignal {
    ids: Vec<signal_hook_registry::SigId>,
    done: Arc<AtomicBool>,
}

impl StopOnSignal {
    fn register(stop: &Arc<AtomicBool>) -> StopOnSignal {
        let signalled = Arc::new(AtomicBool::new(false));
        let mut ids = Vec::new();
        for signal in [libc::SIGINT, libc::SIGTERM] {
            let (stop, signalled) = (stop.clone(), signalled.clone());
            // SAFETY: the action only stores to two atomics, which is
            // async-signal-safe; it allocates, locks and prints nothing.
            let id = unsafe {
                signal_hook_registry::register(signal, move || {
                    signalled.store(true, Ordering::SeqCst);
                    stop.store(true, Ordering::SeqCst);
                })
            };
            match id {
                Ok(id) => ids.push(id),
                Err(e) => tracing::warn!("could not handle signal {signal}: {e}"),
            }
        }
        let done = Arc::new(AtomicBool::new(false));
        let finished = done.clone();
        std::thread::spawn(move || {
            while !finished.load(Ordering::SeqCst) {
                if signalled.load(Ordering::SeqCst) {
                    eprintln!("stopping at the next batch boundary…");
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        StopOnSignal { ids, done }
    }
}

impl Drop for StopOnSignal {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook_registry::unregister(id);
        }
        self.done.store(true, Ordering::SeqCst);
    }
}

async fn run_flow(
    graph: &PipelineGraph,
    flow: &FlowNode,
    opts: &RunOptions,
    reporter: &Arc<ProgressReporter>,
    continuous: bool,
) -> Result<FlowSummary> {
    let (name, target) = (&flow.def.name, &flow.def.target);
    reporter.flow_state(
        name,
        target,
        FlowState::Starting,
        format!("Flow `{name}` is STARTING."),
        None,
    )?;
    let result = match StreamingQuery::start(graph, flow, opts, reporter.clone()) {
        Ok(mut query) => {
            reporter.flow_state(
                name,
                target,
                FlowState::Running,
                format!("Flow `{name}` is RUNNING."),
                None,
            )?;
            let trigger = if continuous {
                flow.trigger.clone()
            } else {
                Trigger::AvailableNow
            };
            query.run(&trigger, opts).await
        }
        Err(e) => Err(e),
    };
    match &result {
        Ok(s) => {
            let state = if continuous {
                FlowState::Stopped
            } else {
                FlowState::Completed
            };
            reporter.flow_state(
                name,
                target,
                state,
                format!(
                    "Flow `{name}` has {}: {} batches, {} rows in.",
                    state.as_str(),
                    s.batches,
                    s.input_rows
                ),
                None,
            )?
        }
        Err(e) => reporter.flow_state(
            name,
            target,
            FlowState::Failed,
            format!("Flow `{name}` has FAILED: {}", first_line(e)),
            Some(e),
        )?,
    }
    result
}

/// Opens a source whose private state lives in the given directory.
type OpenSource = Box<dyn Fn(&Location) -> Result<Box<dyn Source>> + Send>;

/// One leaf input of a flow's plan.
enum LeafInput {
    /// A streaming source with its slot in the offset log.
    Streaming {
        slot: usize,
        source: Box<dyn Source>,
    },
    /// A batch input, read whole for each micro-batch.
    Static { open: OpenSource },
}

/// A flow running as a streaming query.
struct StreamingQuery {
    /// Held while the query runs: no other run uses its checkpoint.
    _lock: CheckpointLock,
    pipeline: String,
    flow: FlowNode,
    checkpoint: Checkpoint,
    compiled: CompiledPlan,
    leaves: Vec<LeafInput>,
    sink: Box<dyn Sink>,
    sink_description: String,
    reporter: Arc<ProgressReporter>,
    /// Offsets of the last committed batch, one per streaming slot.
    committed: Vec<Option<Offset>>,
    next_batch: u64,
    /// The watermark of the next batch, from what the batches saw.
    tracker: WatermarkTracker,
    /// The watermark the last batch ran with: the next batch judges late
    /// rows against it.
    last_batch_watermark_ms: i64,
    /// The output mode of the flow.
    mode: OutputMode,
    /// Where rows dropped as late go (`pipelines.lateRowsTo`).
    late_sink: Option<Box<dyn Sink>>,
    /// The flow's expectations, compiled for its output rows.
    quality: Option<QualityChecks>,
    /// Where rows failing a drop-expectation go (the quarantine).
    quarantine_sink: Option<Box<dyn Sink>>,
    /// An AUTO CDC flow's state: its batches become keyed changes.
    cdc: Option<CdcApplier>,
    last_batch_start: Option<Instant>,
    /// `batchTimestampMs` of the batch about to run (written to, or read
    /// back from, its `offsets/N`): what `current_timestamp()` gives.
    batch_timestamp_ms: i64,
    summary: FlowSummary,
    once_done: bool,
}

/// The flow's checkpoint, opened: an imported checkpoint copied in first
/// (once), and a materialized view's checkpoint (and, unless its format
/// keeps history, its data) removed, as it is recomputed on every run.
fn prepare_checkpoint(
    flow: &FlowNode,
    target: &DatasetNode,
    opts: &RunOptions,
    reporter: &ProgressReporter,
) -> Result<(Checkpoint, CheckpointLock)> {
    let name = &flow.def.name;
    let ckpt_dir = checkpoint_path(flow, opts)?;
    let lock = lock_checkpoint(&ckpt_dir)?;
    if let Some(import) = &flow.def.import_checkpoint {
        let src = resolve(&opts.base_dir, import);
        if crate::engine::checkpoint::import_from(&src, &ckpt_dir)? {
            reporter.flow_notice(
                name,
                Level::Info,
                "checkpoint_imported",
                &format!("checkpoint imported from {}", src.display()),
            )?;
        }
    }
    // A materialized view is recomputed on every run.
    let recompute = target.def.dataset_type() == DatasetType::MaterializedView;
    if recompute {
        remove_pipeline_dir(&ckpt_dir, Owned::Checkpoint)?;
        // A view whose format keeps history (Delta) is overwritten in a
        // new version by its batch; other views are removed first.
        if !keeps_history(&target.format()) {
            remove_pipeline_dir(table_path(target, opts)?, Owned::Table)?;
        }
    }
    Ok((Checkpoint::open(&ckpt_dir)?, lock))
}

/// Opens the leaves of the flow's plan: streaming sources get the next slot
/// of the offset log and open now; batch inputs are opened per batch.
/// Returns the leaves, the streaming sources' shapes and the slot count.
fn open_leaves(
    graph: &PipelineGraph,
    flow: &FlowNode,
    compiled: &CompiledPlan,
    checkpoint: &Checkpoint,
    opts: &RunOptions,
) -> Result<(Vec<LeafInput>, Vec<SourceShape>, usize)> {
    let name = &flow.def.name;
    // Leaves: streaming ones get a slot in the offset log.
    let mut leaves = Vec::new();
    let mut shapes = Vec::new();
    let mut slot = 0usize;
    for leaf in compiled.leaves() {
        let ctx = SourceContext {
            flow: name.clone(),
            state_dir: checkpoint.source_dir(slot),
            base_dir: opts.base_dir.clone(),
            option_overrides: flow.options.clone(),
        };
        let make: OpenSource = match leaf.node.as_ref() {
            PlanNode::Source(spec) => {
                let spec = spec.clone();
                let schema = leaf.schema.clone();
                let mut ctx = ctx.clone();
                session_source_settings(graph, flow, &spec, &mut ctx.option_overrides);
                shapes.push(SourceShape {
                    description: spec.describe(),
                    format: spec.format.name().to_string(),
                    options: shape_options(&spec.options),
                });
                Box::new(move |state: &Location| {
                    let mut c = ctx.clone();
                    c.state_dir = state.clone();
                    crate::engine::sources::open_source(&spec, schema.clone(), c)
                })
            }
            PlanNode::DatasetRead {
                name: ds,
                options: read_options,
                ..
            } => {
                let dataset = graph.datasets.get(ds).ok_or_else(|| {
                    Error::runtime(format!(
                        "flow `{name}`: reads `{ds}`, which is not declared"
                    ))
                })?;
                if dataset.def.dataset_type() == DatasetType::TemporaryView {
                    return Err(Error::runtime_with_help(
                        format!("flow `{name}`: reading temporary view `{ds}` is not supported by this build yet"),
                        "declare it as a streaming table (#[table]) instead",
                    ));
                }
                let path = table_path(dataset, opts)?;
                let format = dataset.format();
                let mut options = dataset.def.options.clone();
                options.extend(read_options.clone());
                let schema = leaf.schema.clone();
                let ctx = ctx.clone();
                let streaming = leaf.streaming;
                shapes.push(SourceShape {
                    description: format!("dataset `{ds}`"),
                    format: format.clone(),
                    options: shape_options(&options),
                });
                Box::new(move |state: &Location| {
                    let mut c = ctx.clone();
                    c.state_dir = state.clone();
                    crate::engine::sources::open_table_reader(
                        &path,
                        &format,
                        schema.clone(),
                        &options,
                        c,
                        streaming,
                    )
                })
            }
            other => {
                return Err(Error::runtime(format!(
                    "flow `{name}`: unexpected leaf `{}` in the plan",
                    other.name()
                )))
            }
        };
        if leaf.streaming {
            let state = checkpoint.source_dir(slot);
            let source = make(&state)?;
            leaves.push(LeafInput::Streaming { slot, source });
            slot += 1;
        } else {
            shapes.pop();
            leaves.push(LeafInput::Static { open: make });
        }
    }

    Ok((leaves, shapes, slot))
}

/// Says, on the terminal and in the event log, which of the flow's sources
/// cannot be read again (the socket source): a batch that fails after
/// reading them loses its rows.
fn warn_not_replayable(
    flow: &FlowNode,
    leaves: &[LeafInput],
    reporter: &ProgressReporter,
) -> Result<()> {
    for leaf in leaves {
        if let LeafInput::Streaming { source, .. } = leaf {
            if !source.replayable() {
                let message = format!(
                    "{} cannot be replayed: if a batch fails after reading it, that batch's rows are lost (use it for tests and demos)",
                    source.describe()
                );
                tracing::warn!(flow = %flow.def.name, "{message}");
                eprintln!("warning: flow `{}`: {message}", flow.def.name);
                reporter.flow_notice(
                    &flow.def.name,
                    Level::Warn,
                    "source_not_replayable",
                    &message,
                )?;
            }
        }
    }
    Ok(())
}

/// Compares the query's shape with the checkpoint's (writing it the first
/// time): a changed query on an old checkpoint is refused with the diff and
/// the `--full-refresh` hint.
fn check_shape(
    flow: &FlowNode,
    compiled: &CompiledPlan,
    checkpoint: &Checkpoint,
    shapes: Vec<SourceShape>,
) -> Result<()> {
    let name = &flow.def.name;
    // The query's shape: refuse a changed query on an old checkpoint.
    let shape = QueryShape {
        sources: shapes,
        stateful_operators: compiled.stateful_operators(),
        output_schema: flow
            .schema
            .fields()
            .iter()
            .map(|f| (f.name().clone(), type_to_ddl(f.data_type())))
            .collect(),
    };
    match checkpoint.read_shape()? {
        Some(old) => {
            let diff = shape_diff(&old, &shape);
            if !diff.is_empty() {
                return Err(Error::ShapeChanged(format!(
                    "flow `{name}`{}: its query changed since the checkpoint at {} was written:\n{}\n  help: run with `--full-refresh {}` to reset the checkpoint and the data of `{}`",
                    flow.def.origin.as_ref().map(|o| format!(" ({o})")).unwrap_or_default(),
                    checkpoint.dir(),
                    diff.iter().map(|l| format!("  - {l}")).collect::<Vec<_>>().join("\n"),
                    flow.def.target,
                    flow.def.target,
                )));
            }
        }
        None => checkpoint.write_shape(&shape)?,
    }

    Ok(())
}

/// Tells each streaming source which columns the operators read (projection
/// pushdown; not when late rows go to a sink, which keeps every column) and
/// which string columns may stay dictionary-encoded.
fn push_down(
    leaves: &mut [LeafInput],
    compiled: &mut CompiledPlan,
    late_sink: bool,
    dictionary_output: bool,
) {
    // Projection pushdown: sources skip the columns no operator reads
    // (late rows sent to a sink keep every column); `to_timestamp` of a
    // string column and the plan's filters move into the leaf under the
    // same condition.
    if !late_sink {
        compiled.push_timestamps_into_leaves();
        // Filter pushdown: sources may drop the rows the plan's filters
        // drop while decoding (they still count as input rows); where a
        // source drops every such row, the plan no longer filters them,
        // and the source reads the filter's columns for itself (and need
        // not give those only the filter reads).
        let filters = compiled.leaf_filters();
        for (i, (leaf, filter)) in leaves.iter_mut().zip(filters).enumerate() {
            if let (LeafInput::Streaming { source, .. }, Some(filter)) = (leaf, filter) {
                if source.filter_rows(&filter) {
                    compiled.drop_leaf_filter(i);
                }
            }
        }
        if dictionary_output {
            compiled.pass_dictionaries_to_output();
        }
        for (leaf, columns) in leaves.iter_mut().zip(compiled.leaf_timestamp_columns()) {
            if let LeafInput::Streaming { source, .. } = leaf {
                source.read_timestamp_columns(&columns);
            }
        }
        let used = compiled.leaf_columns_used();
        for (leaf, used) in leaves.iter_mut().zip(used) {
            if let LeafInput::Streaming { source, .. } = leaf {
                source.read_only_columns(&used);
            }
        }
    }
    for (leaf, allowed) in leaves.iter_mut().zip(compiled.leaf_dictionary_columns()) {
        if let LeafInput::Streaming { source, .. } = leaf {
            source.read_dictionary_columns(&allowed);
        }
    }
}

impl StreamingQuery {
    fn start(
        graph: &PipelineGraph,
        flow: &FlowNode,
        opts: &RunOptions,
        reporter: Arc<ProgressReporter>,
    ) -> Result<Self> {
        let name = &flow.def.name;
        let resolved = flow.plan.resolve(&GraphCatalog(graph)).map_err(|errs| {
            Error::runtime(format!(
                "flow `{name}`: its plan no longer resolves: {}",
                errs.iter()
                    .map(|e| e.message.clone())
                    .collect::<Vec<_>>()
                    .join("; ")
            ))
        })?;
        let state_partitions = state_partitions(graph, flow)?;
        let mut compiled = CompiledPlan::compile_with_state_partitions(
            name,
            &flow.plan,
            &resolved,
            2,
            state_partitions,
        )?;
        let policy = WatermarkPolicy::from_conf(name, &flow_settings(flow))?;

        let target = graph.datasets.get(&flow.def.target).ok_or_else(|| {
            Error::runtime(format!(
                "flow `{name}`: target `{}` is not declared",
                flow.def.target
            ))
        })?;
        let (checkpoint, lock) = prepare_checkpoint(flow, target, opts, &reporter)?;
        let (mut leaves, shapes, slot) = open_leaves(graph, flow, &compiled, &checkpoint, opts)?;
        warn_not_replayable(flow, &leaves, &reporter)?;
        check_shape(flow, &compiled, &checkpoint, shapes)?;
        // The sink.
        let sink_ctx = sink_context(graph, flow, target, opts, checkpoint.query_id())?;
        let foreach = crate::engine::sinks::foreach_batch_fn(&target.def.name);
        let sink = crate::engine::sinks::open_sink(sink_ctx, foreach)?;
        check_sink_has_last_commit(flow, &checkpoint, sink.as_ref())?;
        let sink_description = sink.describe();
        let late_sink = open_late_sink(graph, flow, &compiled, opts, checkpoint.query_id())?;
        let quality = QualityChecks::compile(
            name,
            &target.def.name,
            &target.def.subject(),
            &flow.expectations,
            &flow.schema,
            flow.quarantine.is_some(),
        )?
        .map(|q| match flow.trigger {
            Trigger::RealTime { .. } => q.in_real_time(),
            _ => q,
        });
        let quarantine_schema = quality.as_ref().and_then(|q| q.quarantine_schema());
        let quarantine_sink =
            open_quarantine_sink(graph, flow, quarantine_schema, opts, checkpoint.query_id())?;
        // String columns may stay dictionaries up to the sink when only
        // the sink sees the output rows (no expectations, no AUTO CDC
        // changes) and it writes dictionaries as they are.
        let dictionary_output = sink.takes_dictionary_strings()
            && quality.is_none()
            && flow.def.auto_cdc.is_none()
            && !matches!(flow.trigger, Trigger::RealTime { .. });
        push_down(
            &mut leaves,
            &mut compiled,
            late_sink.is_some(),
            dictionary_output,
        );
        let slots = slot;
        let last_commit = checkpoint.latest_commit()?.map(|(n, _)| n);
        compiled.restore_state(&checkpoint.dir().join("state"), last_commit)?;
        let cdc = match (&flow.def.auto_cdc, &flow.cdc) {
            (Some(decl), Some(layout)) => Some(CdcApplier::open(
                CdcFlow {
                    flow: name,
                    target: &target.def.name,
                    decl,
                    layout,
                    feed: &flow.schema,
                },
                &checkpoint.dir().join("state").join("cdc"),
                last_commit,
                tombstone_gc_setting(graph, flow),
            )?),
            _ => None,
        };
        let mut q = StreamingQuery {
            _lock: lock,
            pipeline: graph.name.clone(),
            flow: flow.clone(),
            checkpoint,
            compiled,
            leaves,
            sink,
            sink_description,
            reporter,
            committed: vec![None; slots],
            next_batch: 0,
            tracker: WatermarkTracker::new(policy, 0),
            last_batch_watermark_ms: 0,
            mode: flow.output_mode,
            late_sink,
            quality,
            quarantine_sink,
            cdc,
            last_batch_start: None,
            batch_timestamp_ms: 0,
            summary: FlowSummary {
                flow: name.clone(),
                ..FlowSummary::default()
            },
            once_done: false,
        };
        q.recover_positions()?;
        Ok(q)
    }

    fn policy(&self) -> WatermarkPolicy {
        WatermarkPolicy::from_conf(&self.flow.def.name, &flow_settings(&self.flow))
            .unwrap_or_default()
    }

    /// Reads the commit log: where the next batch starts.
    fn recover_positions(&mut self) -> Result<()> {
        if let Some((n, commit)) = self.checkpoint.latest_commit()? {
            let entry = self.checkpoint.offsets(n)?;
            self.committed =
                source_offsets(&self.checkpoint, n, entry.sources, self.committed.len())?;
            self.next_batch = n + 1;
            self.tracker = WatermarkTracker::new(self.policy(), commit.next_batch_watermark_ms);
            self.last_batch_watermark_ms = entry.batch_watermark_ms;
            self.once_done = true;
        }
        Ok(())
    }

    async fn run(&mut self, trigger: &Trigger, opts: &RunOptions) -> Result<FlowSummary> {
        // A batch logged but not committed before a crash: replay it first,
        // over exactly the logged offsets.
        if let Some((n, entry)) = self.checkpoint.latest_offsets()? {
            if n >= self.next_batch {
                if n != self.next_batch {
                    return Err(Error::checkpoint(
                        self.checkpoint.offsets_file(n).shown(),
                        format!(
                            "offsets for batch {n} but the last commit is batch {}; the log has a gap",
                            self.next_batch as i64 - 1
                        ),
                    ));
                }
                let ends = source_offsets(
                    &self.checkpoint,
                    n,
                    entry.sources.clone(),
                    self.committed.len(),
                )?;
                self.tracker = WatermarkTracker::new(self.policy(), entry.batch_watermark_ms);
                // The replay sees the time the batch first had.
                self.batch_timestamp_ms = entry.batch_timestamp_ms;
                self.run_batch(n, ends, true, Instant::now(), 0.0).await?;
            }
        }

        let streaming = self.flow.streaming;
        if !streaming {
            // Batch flows (materialized views, once flows) run a single batch.
            // A materialized view's checkpoint was cleared at start, so it always runs;
            // a once flow runs until its single batch is committed.
            if self.once_done {
                self.summary.skipped = true;
            } else {
                let n = self.next_batch;
                self.log_offsets(n, &[])?;
                self.run_batch(n, Vec::new(), false, Instant::now(), 0.0)
                    .await?;
            }
            return Ok(self.summary.clone());
        }

        if let Trigger::RealTime {
            checkpoint_interval,
        } = trigger
        {
            return self.run_real_time(*checkpoint_interval, opts).await;
        }
        if matches!(trigger, Trigger::AvailableNow) {
            for leaf in &mut self.leaves {
                if let LeafInput::Streaming { source, .. } = leaf {
                    source.prepare_available_now()?;
                }
            }
        }
        loop {
            if opts.stop.load(Ordering::SeqCst) {
                break;
            }
            let started = Instant::now();
            let ran = self.step().await?;
            match trigger {
                Trigger::AvailableNow => {
                    if !ran {
                        break;
                    }
                }
                Trigger::Once => break,
                Trigger::ProcessingTime(interval) => {
                    let elapsed = started.elapsed();
                    if elapsed < *interval {
                        sleep_unless_stopped(*interval - elapsed, &opts.stop).await;
                    }
                }
                Trigger::Default | Trigger::RealTime { .. } => {
                    // (RealTime runs in `run_real_time`.)
                    if !ran {
                        sleep_unless_stopped(opts.idle_poll, &opts.stop).await;
                    }
                }
            }
        }
        Ok(self.summary.clone())
    }

    /// Plans and runs the next batch; false when no source has new data.
    async fn step(&mut self) -> Result<bool> {
        let started = Instant::now();
        let mut ends = self.committed.clone();
        let mut new_data = false;
        for leaf in &mut self.leaves {
            if let LeafInput::Streaming { slot, source } = leaf {
                let start = self.committed[*slot].as_ref();
                if let Some(end) = source.latest_offset(start)? {
                    if Some(&end) != start {
                        new_data = true;
                        ends[*slot] = Some(end);
                    }
                }
            }
        }
        if !new_data {
            // Spark runs a batch without new data when the watermark moved
            // and state may emit or evict.
            let moved = self.tracker.current_ms() > self.last_batch_watermark_ms;
            if !(moved && self.next_batch > 0 && self.compiled.runs_no_data_batches(self.mode)) {
                return Ok(false);
            }
        }
        let latest_offset_ms = ms(started.elapsed());
        let n = self.next_batch;
        self.log_offsets(n, &ends)?;
        checkpoint_step(&self.flow.def.name, "after_offsets", n)?;
        self.run_batch(n, ends, false, started, latest_offset_ms)
            .await?;
        Ok(true)
    }

    fn log_offsets(&mut self, n: u64, ends: &[Option<Offset>]) -> Result<()> {
        self.write_offsets(n, ends, self.tracker.current_ms())
    }

    /// Writes `offsets/N`: the sources' ends and the watermark batch `n`
    /// runs (or a replay of it would run) with.
    fn write_offsets(
        &mut self,
        n: u64,
        ends: &[Option<Offset>],
        batch_watermark_ms: i64,
    ) -> Result<()> {
        self.batch_timestamp_ms = chrono::Utc::now().timestamp_millis();
        let entry = OffsetEntry {
            batch_watermark_ms,
            batch_timestamp_ms: self.batch_timestamp_ms,
            conf: self.flow.def.conf.clone(),
            sources: ends.to_vec(),
        };
        self.checkpoint.write_offsets(n, &entry)
    }

    async fn run_batch(
        &mut self,
        n: u64,
        ends: Vec<Option<Offset>>,
        replayed: bool,
        started: Instant,
        latest_offset_ms: f64,
    ) -> Result<()> {
        let mut durations = PhaseDurations {
            latest_offset: latest_offset_ms,
            ..PhaseDurations::default()
        };
        let wal_done = Instant::now();
        durations.wal_commit = ms(wal_done - started) - latest_offset_ms;

        // Read, once the last batch's rows are freed (see `release`).
        crate::engine::release::settle();
        let (inputs, sources, input_rows) = self.read_inputs(&ends)?;
        let read_done = Instant::now();
        durations.get_batch = ms(read_done - wal_done);

        // Execute: the batch's watermark closes state; rows are late
        // against the previous batch's watermark.
        let has_watermark = !self.compiled.watermarks().is_empty();
        let batch_watermark_ms = self.tracker.current_ms();
        let ctx = BatchContext {
            batch_id: n,
            output_mode: self.mode,
            watermark_for_late_ms: has_watermark.then_some(self.last_batch_watermark_ms),
            watermark_for_eviction_ms: has_watermark.then_some(batch_watermark_ms),
            capture_late_rows: self.late_sink.is_some(),
            batch_timestamp_ms: Some(self.batch_timestamp_ms),
        };
        let mut result = self.compiled.execute_batch(inputs, &ctx).await?;
        for (op, max, delay) in &result.event_times {
            self.tracker.observe(*op, *max, *delay);
        }
        let next_watermark_ms = self.tracker.advance();
        // Expectations: a failed fail-expectation stops here, before any
        // sink sees the batch.
        let (output, quarantined, data_quality) = match &self.quality {
            Some(q) => {
                let checked = q.apply(n, std::mem::take(&mut result.rows))?;
                (checked.rows, checked.quarantined, Some(checked.quality))
            }
            None => (std::mem::take(&mut result.rows), Vec::new(), None),
        };
        // An AUTO CDC flow's events become the keyed changes of its target.
        let changes = match self.cdc.as_mut() {
            Some(cdc) => {
                let changes = cdc.apply(n, &output, self.batch_timestamp_ms)?;
                result.state_operators.push(cdc.progress());
                Some(changes)
            }
            None => None,
        };
        let exec_done = Instant::now();
        durations.execute = ms(exec_done - read_done);
        let output_rows: u64 = match &changes {
            Some(c) => c.len() as u64,
            None => output.iter().map(|b| b.num_rows() as u64).sum(),
        };

        // Sink.
        let write = match changes {
            Some(changes) => self.sink.apply_changes(n, changes)?,
            None => self.sink.add_batch(n, output, self.mode)?,
        };
        if let Some(late) = self.late_sink.as_mut() {
            let late_rows = std::mem::take(&mut result.late_rows);
            if !late_rows.is_empty() {
                late.add_batch(n, late_rows, OutputMode::Append)?;
            }
        }
        if let Some(quarantine) = self.quarantine_sink.as_mut() {
            if !quarantined.is_empty() {
                quarantine.add_batch(n, quarantined, OutputMode::Append)?;
            }
        }
        let sink_done = Instant::now();
        durations.add_batch = ms(sink_done - exec_done);
        self.compiled.commit_state(n)?;
        if let Some(cdc) = self.cdc.as_mut() {
            cdc.commit(n)?;
        }
        // The progress is logged before the commit, so a committed batch
        // always has its event; `commit` is the state's commit.
        durations.commit = ms(sink_done.elapsed());
        durations.trigger_execution = ms(started.elapsed());
        let wall = self
            .last_batch_start
            .map(|t| started.duration_since(t).as_secs_f64())
            .unwrap_or(0.0);
        self.last_batch_start = Some(started);
        let secs = durations.trigger_execution / 1000.0;
        let progress = BatchProgress {
            pipeline: self.pipeline.clone(),
            flow: self.flow.def.name.clone(),
            query_id: self.checkpoint.query_id().to_string(),
            batch_id: n,
            timestamp: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            replayed,
            num_input_rows: input_rows,
            input_rows_per_second: if wall > 0.0 {
                input_rows as f64 / wall
            } else {
                0.0
            },
            processed_rows_per_second: if secs > 0.0 {
                input_rows as f64 / secs
            } else {
                0.0
            },
            num_output_rows: output_rows,
            duration_ms: durations,
            watermark_ms: has_watermark.then_some(batch_watermark_ms),
            sources,
            sink: self.sink_description.clone(),
            sink_skipped_replay: write.skipped_replay,
            backlog: {
                let parts: Vec<String> = self.backlog().iter().map(|b| b.to_string()).collect();
                (!parts.is_empty()).then(|| parts.join(", "))
            },
            backlog_detail: self.backlog(),
            state_operators: result.state_operators,
            data_quality,
        };
        self.reporter.report(&progress)?;
        checkpoint_step(&self.flow.def.name, "before_commit", n)?;

        // Commit.
        self.checkpoint.write_commit(
            n,
            &CommitEntry {
                next_batch_watermark_ms: next_watermark_ms,
                sink_rows: Some(output_rows),
            },
        )?;
        self.last_batch_watermark_ms = batch_watermark_ms;
        for leaf in &mut self.leaves {
            if let LeafInput::Streaming { slot, source } = leaf {
                if let Some(Some(end)) = ends.get(*slot) {
                    source.commit(end)?;
                }
            }
        }
        self.committed = ends;
        self.next_batch = n + 1;
        self.once_done = true;
        if n % 100 == 99 {
            self.checkpoint.purge(100)?;
        }

        self.summary.batches += 1;
        self.summary.input_rows += input_rows;
        self.summary.output_rows += output_rows;
        if replayed {
            self.summary.replayed += 1;
        }
        Ok(())
    }
}

impl StreamingQuery {
    /// Reads every leaf for a batch ending at `ends`: each streaming source
    /// its `(committed, end]` range, each static input whole. Returns the
    /// inputs per leaf, the sources' progress and the streaming rows read.
    fn read_inputs(
        &mut self,
        ends: &[Option<Offset>],
    ) -> Result<(Vec<Vec<RecordBatch>>, Vec<SourceProgress>, u64)> {
        let mut inputs: Vec<Vec<RecordBatch>> = vec![Vec::new(); self.leaves.len()];
        let mut sources = Vec::new();
        let mut input_rows = 0u64;
        let mut statics = Vec::new();
        for (i, leaf) in self.leaves.iter_mut().enumerate() {
            match leaf {
                LeafInput::Streaming { slot, source } => {
                    let start = self.committed.get(*slot).cloned().flatten();
                    let end = ends.get(*slot).cloned().flatten();
                    let read = match &end {
                        Some(e) if Some(e) != start.as_ref() => source.read(start.as_ref(), e)?,
                        _ => Default::default(),
                    };
                    let rows = read.rows_read();
                    input_rows += rows;
                    sources.push(SourceProgress {
                        description: source.describe(),
                        start_offset: start,
                        end_offset: end,
                        num_input_rows: rows,
                        num_malformed_dropped: read.malformed_dropped,
                        num_corrupt_files_skipped: read.corrupt_files_skipped,
                        num_data_lost: source.data_lost(),
                    });
                    inputs[i] = read.batches;
                }
                LeafInput::Static { .. } => statics.push(i),
            }
        }
        // A batch query (no streaming leaf, e.g. a materialized view) counts
        // the rows it reads; a stream-static join counts only the stream's,
        // as Spark does.
        let batch_query = sources.is_empty();
        for i in statics {
            inputs[i] = self.read_static(i)?;
            if batch_query {
                input_rows += inputs[i].iter().map(|b| b.num_rows() as u64).sum::<u64>();
            }
        }
        Ok((inputs, sources, input_rows))
    }

    /// What the streaming sources have not put in a batch yet, e.g. "38 files".
    /// What is left of each source's available-now backlog.
    fn backlog(&self) -> Vec<crate::engine::source::Backlog> {
        self.leaves
            .iter()
            .filter_map(|l| match l {
                LeafInput::Streaming { source, .. } => source.backlog(),
                LeafInput::Static { .. } => None,
            })
            .collect()
    }

    /// Reads static leaf `i` whole (a batch input of a stream-static join).
    fn read_static(&mut self, i: usize) -> Result<Vec<RecordBatch>> {
        let LeafInput::Static { open } = &self.leaves[i] else {
            return Ok(Vec::new());
        };
        let dir = self.checkpoint.dir().join("static").join(&i.to_string());
        dir.remove_all()?;
        dir.create_dir()?;
        let mut source = open(&dir)?;
        let batches = read_all(source.as_mut())?;
        dir.remove_all()?;
        Ok(batches)
    }
}

/// Reads everything a source has now (for batch inputs).
/// The offsets of `offsets/<batch>`, one per streaming source of the query.
/// A file holding another number of sources is refused, as in Spark: a
/// missing source would otherwise silently start again from its beginning.
fn source_offsets(
    checkpoint: &Checkpoint,
    batch: u64,
    sources: Vec<Option<Offset>>,
    expected: usize,
) -> Result<Vec<Option<Offset>>> {
    if sources.len() == expected {
        return Ok(sources);
    }
    Err(Error::checkpoint(
        checkpoint.offsets_file(batch).shown(),
        format!(
            "holds the offsets of {} source{}, but the query reads {expected} streaming source{}; \
             restore the file from a backup, or reset the flow with `--full-refresh`",
            sources.len(),
            if sources.len() == 1 { "" } else { "s" },
            if expected == 1 { "" } else { "s" },
        ),
    ))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn sleep_unless_stopped(d: Duration, stop: &AtomicBool) {
    let deadline = Instant::now() + d;
    while Instant::now() < deadline {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(left.min(Duration::from_millis(50))).await;
    }
}

use crate::conf::IGNORE_CORRUPT_FILES;
pub use crate::conf::SHUFFLE_PARTITIONS;
use crate::engine::fault::checkpoint_step;
pub use crate::engine::fault::{fault_point, inject_failure};

/// Spark's session settings that stand for a source option, applied where
/// the source does not set the option itself: the flow's settings, then the
/// pipeline's `configuration:` (`spark.sql.files.ignoreCorruptFiles` →
/// `ignoreCorruptFiles` of a file source).
fn session_source_settings(
    graph: &PipelineGraph,
    flow: &FlowNode,
    spec: &crate::plan::SourceSpec,
    overrides: &mut BTreeMap<String, String>,
) {
    const OPTION: &str = "ignoreCorruptFiles";
    let settings = flow_settings(flow);
    let Some(value) = settings
        .get(IGNORE_CORRUPT_FILES)
        .or_else(|| graph.configuration.get(IGNORE_CORRUPT_FILES))
    else {
        return;
    };
    let takes_it = spec
        .format
        .connector()
        .is_some_and(|c| c.options().knows(OPTION));
    let set = |m: &BTreeMap<String, String>| m.keys().any(|k| k.eq_ignore_ascii_case(OPTION));
    if takes_it && !set(&spec.options) && !set(overrides) {
        overrides.insert(OPTION.to_string(), value.clone());
    }
}

/// The flow's state partitions: its settings, then the pipeline's
/// `configuration:`, else twice the cores (at most 16).
fn state_partitions(graph: &PipelineGraph, flow: &FlowNode) -> Result<usize> {
    let settings = flow_settings(flow);
    let value = settings
        .get(SHUFFLE_PARTITIONS)
        .or_else(|| graph.configuration.get(SHUFFLE_PARTITIONS));
    match value {
        None => Ok(std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .saturating_mul(2)
            .clamp(1, 16)),
        Some(v) => match v.trim().parse::<usize>() {
            Ok(n) if (1..=1024).contains(&n) => Ok(n),
            _ => Err(Error::runtime_with_help(
                format!(
                    "flow `{}`: `{SHUFFLE_PARTITIONS}` is `{v}`, not a whole number from 1 to 1024",
                    flow.def.name
                ),
                format!(
                    "set `{SHUFFLE_PARTITIONS}: 4` in the flow's options or under `configuration:`"
                ),
            )),
        },
    }
}

/// True when tables of `format` are cleared by truncation in a new version
/// rather than by removing their directory (Delta).
fn keeps_history(format: &str) -> bool {
    crate::connector::sink(format).is_some_and(|c| c.reset() == Reset::Truncate)
}

/// A flow's settings: its `conf(...)`, overridden by the spec's options.
fn flow_settings(flow: &FlowNode) -> BTreeMap<String, String> {
    let mut all = flow.def.conf.clone();
    all.extend(flow.options.clone());
    all
}

pub use crate::conf::LATE_ROWS_TO;

/// Opens the sink of `pipelines.lateRowsTo`, when the flow sets it.
fn open_late_sink(
    graph: &PipelineGraph,
    flow: &FlowNode,
    compiled: &CompiledPlan,
    opts: &RunOptions,
    query_id: &str,
) -> Result<Option<Box<dyn Sink>>> {
    let name = &flow.def.name;
    let Some(target) = flow
        .options
        .get(LATE_ROWS_TO)
        .or_else(|| flow.def.conf.get(LATE_ROWS_TO))
    else {
        return Ok(None);
    };
    let Some(dataset) = graph.datasets.get(target) else {
        return Err(Error::runtime_with_help(
            format!("flow `{name}`: `{LATE_ROWS_TO}` names `{target}`, which is not declared"),
            format!("declare a sink for the late rows, e.g. create_sink(\"{target}\", \"parquet\", [(\"path\", \"late/{target}\")])"),
        ));
    };
    if compiled.late_rows_schema().is_none() {
        return Err(Error::runtime_with_help(
            format!("flow `{name}`: `{LATE_ROWS_TO}` needs a query with one aggregation or deduplication after a watermark; this query has none, several, or a stream-stream join"),
            format!("remove `{LATE_ROWS_TO}` from flow `{name}`"),
        ));
    }
    let ctx = sink_context(graph, flow, dataset, opts, query_id)?;
    let foreach = crate::engine::sinks::foreach_batch_fn(&dataset.def.name);
    Ok(Some(crate::engine::sinks::open_sink(ctx, foreach)?))
}

/// A sink that records its batches (a file sink's manifest, a Delta
/// table's application transaction) must hold the last committed batch
/// that handed it rows: a power loss can keep `commits/N` and lose the
/// sink's unsynced record of batch N, whose rows would be lost silently.
fn check_sink_has_last_commit(
    flow: &FlowNode,
    checkpoint: &Checkpoint,
    sink: &dyn Sink,
) -> Result<()> {
    let Some((n, commit)) = checkpoint.latest_commit()? else {
        return Ok(());
    };
    if commit.sink_rows.unwrap_or(0) == 0 || sink.has_batch(n) != Some(false) {
        return Ok(());
    }
    Err(Error::runtime_with_help(
        format!(
            "flow `{}`: {} has no record of batch {n}, which the checkpoint committed with {} row{} for it (the sink's own commit was lost, e.g. by a power loss before it reached the disk)",
            flow.def.name,
            sink.describe(),
            commit.sink_rows.unwrap_or(0),
            if commit.sink_rows == Some(1) { "" } else { "s" },
        ),
        format!(
            "restore the sink's last commit from a backup (a file table's `_spark_metadata/{n}`, a Delta table's newest `_delta_log` entry), or rebuild it with `run --full-refresh`; set `pipelines.checkpoint.fsync: \"true\"` to make file sinks durable"
        ),
    ))
}

/// Opens the flow's quarantine (its rows failing a drop-expectation, plus
/// their failed expectations' names, in `schema`), when it has one.
fn open_quarantine_sink(
    graph: &PipelineGraph,
    flow: &FlowNode,
    schema: Option<&arrow::datatypes::SchemaRef>,
    opts: &RunOptions,
    query_id: &str,
) -> Result<Option<Box<dyn Sink>>> {
    let (Some(name), Some(schema)) = (&flow.quarantine, schema) else {
        return Ok(None);
    };
    let Some(dataset) = graph.datasets.get(name) else {
        return Err(Error::runtime(format!(
            "flow `{}`: its quarantine `{name}` is not declared",
            flow.def.name
        )));
    };
    let mut ctx = sink_context(graph, flow, dataset, opts, query_id)?;
    ctx.schema = schema.clone();
    let foreach = crate::engine::sinks::foreach_batch_fn(&dataset.def.name);
    Ok(Some(crate::engine::sinks::open_sink(ctx, foreach)?))
}

/// The sink a flow writes to: a declared sink, or the storage of a table.
/// `pipelines.cdc.tombstoneGCThresholdInSeconds` for an AUTO CDC flow: the
/// spec's `flows.<name>.options`, else the flow's conf, else the pipeline's
/// configuration.
fn tombstone_gc_setting<'a>(graph: &'a PipelineGraph, flow: &'a FlowNode) -> Option<&'a str> {
    let key = crate::conf::TOMBSTONE_GC_THRESHOLD;
    flow.options
        .get(key)
        .or_else(|| flow.def.conf.get(key))
        .or_else(|| graph.configuration.get(key))
        .map(String::as_str)
}

fn sink_context(
    graph: &PipelineGraph,
    flow: &FlowNode,
    target: &DatasetNode,
    opts: &RunOptions,
    query_id: &str,
) -> Result<SinkContext> {
    let _ = graph;
    let format = target.format();
    let path = match target.def.dataset_type() {
        DatasetType::Sink => match target.def.options.get("path") {
            Some(p) => Some(location_of(
                p,
                opts,
                &format!("sink `{}`", target.def.name),
            )?),
            None => None,
        },
        _ => Some(table_path(target, opts)?),
    };
    let mut options: BTreeMap<String, String> = target.def.options.clone();
    // A materialized view is recomputed on every run: in a format that keeps
    // history, its one batch replaces the table's contents in a new version.
    let replace = crate::connector::sink(&format).and_then(|c| c.replace_option());
    if let (DatasetType::MaterializedView, Some(key)) = (target.def.dataset_type(), replace) {
        options.insert(key.to_string(), "true".to_string());
    }
    options
        .entry("queryName".to_string())
        .or_insert_with(|| target.def.name.clone());
    Ok(SinkContext {
        name: target.def.name.clone(),
        format,
        options,
        path,
        partition_cols: target.def.partition_cols.clone(),
        merge_keys: target.def.merge_keys.clone(),
        schema: flow
            .cdc
            .as_ref()
            .map(|c| c.target_schema.clone())
            .unwrap_or_else(|| flow.schema.clone()),
        flow: flow.def.name.clone(),
        query_id: query_id.to_string(),
    })
}

struct GraphCatalog<'a>(&'a PipelineGraph);

impl crate::plan::Catalog for GraphCatalog<'_> {
    fn dataset_schema(&self, name: &str) -> Option<arrow::datatypes::SchemaRef> {
        self.0.datasets.get(name).and_then(|d| d.schema.clone())
    }
}
