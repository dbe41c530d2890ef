//! `run --remote sc://...` and `dry-run --remote sc://...`: the pipeline's
//! commands sent in order, the run's events shown as they come and kept in
//! the event log, Spark's errors tied to the flow, SQL file or dataset they
//! belong to.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Instant;

use pipelines_core::engine::event_log::{Level, NewEvent};
use pipelines_core::engine::progress::{FlowState, ProgressReporter, UpdateSelection};
use pipelines_core::error::{Error, Result};
use pipelines_core::remote::{RemoteAction, RemoteBackend, RemoteRegistration, RemoteRequest};

use crate::client::{ConnectError, Session};
use crate::events::{self, SparkEvent};
use crate::proto::execute_plan_response::ResponseType;
use crate::proto::pipeline_command::CommandType;
use crate::proto::pipeline_command_result::ResultType;
use crate::proto::ExecutePlanResponse;
use crate::translate::{translate, Step, Translation};
use crate::url::RemoteUrl;

/// The Spark Connect backend of `--remote`.
pub struct SparkConnect;

/// Registered with the engine's command line.
pub static SPARK_CONNECT: SparkConnect = SparkConnect;

inventory::submit! { RemoteRegistration(&SPARK_CONNECT) }

impl RemoteBackend for SparkConnect {
    fn schemes(&self) -> &'static [&'static str] {
        &["sc://"]
    }

    fn execute(
        &self,
        request: &RemoteRequest<'_>,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Result<()> {
        let url = RemoteUrl::parse(request.url).map_err(|e| Error::Usage(e.to_string()))?;
        let translation = translate(request).map_err(Error::Invalid)?;
        let io = |e: std::io::Error| Error::io("<stderr>", e);
        for w in &translation.warnings {
            writeln!(err, "warning: {w}").map_err(io)?;
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| Error::external("starting the Spark Connect client", e))?;
        runtime.block_on(remote_run(&url, request, &translation, out, err))
    }
}

/// A flow's last state on the server.
#[derive(Clone, Debug)]
struct FlowOutcome {
    state: FlowState,
    spark_state: String,
    error: Option<String>,
}

/// What the run's event stream told.
#[derive(Debug, Default)]
struct RunOutcome {
    flows: BTreeMap<String, FlowOutcome>,
    run_state: Option<String>,
    first_running_ms: Option<u128>,
    events: usize,
}

fn spark_error(subject: &str, origin: Option<String>, e: ConnectError, url: &RemoteUrl) -> Error {
    let place = origin.map(|o| format!(" ({o})")).unwrap_or_default();
    match e {
        ConnectError::Unreachable { reason, .. } => Error::runtime_with_help(
            format!("cannot reach Spark Connect at {url}: {reason}"),
            "start a Spark Connect server (Spark's sbin/start-connect-server.sh) or check the host, port and token in --remote / SPARK_REMOTE",
        ),
        ConnectError::Spark { .. } => Error::runtime(format!(
            "{subject}{place}: Spark refused it: {}",
            e.to_string().trim_end()
        )),
        ConnectError::Protocol(_) => Error::runtime(format!("{subject}{place}: {e}")),
    }
}

fn with_graph_id(command: &CommandType, id: &str) -> CommandType {
    let mut c = command.clone();
    let id = Some(id.to_string());
    match &mut c {
        CommandType::DefineOutput(d) => d.dataflow_graph_id = id,
        CommandType::DefineFlow(d) => d.dataflow_graph_id = id,
        CommandType::DefineSqlGraphElements(d) => d.dataflow_graph_id = id,
        CommandType::StartRun(d) => d.dataflow_graph_id = id,
        _ => {}
    }
    c
}

async fn remote_run(
    url: &RemoteUrl,
    request: &RemoteRequest<'_>,
    translation: &Translation,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<()> {
    let io = |e: std::io::Error| Error::io("<output>", e);
    let graph = request.graph;
    let started = Instant::now();
    let mut session = Session::connect(url)
        .await
        .map_err(|e| spark_error("pipeline", None, e, url))?;

    // The graph, then each dataset, flow and SQL file.
    let mut graph_id = None;
    session
        .pipeline_command(
            CommandType::CreateDataflowGraph(translation.create.clone()),
            &mut |r: &ExecutePlanResponse| {
                if let Some(ResponseType::PipelineCommandResult(p)) = &r.response_type {
                    if let Some(ResultType::CreateDataflowGraphResult(g)) = &p.result_type {
                        graph_id = g.dataflow_graph_id.clone();
                    }
                }
            },
        )
        .await
        .map_err(|e| spark_error(&format!("pipeline `{}`", graph.name), None, e, url))?;
    let graph_id = graph_id.ok_or_else(|| {
        Error::runtime("Spark Connect created no dataflow graph (no id in its answer)")
    })?;
    for Step {
        subject,
        origin,
        command,
    } in &translation.steps
    {
        session
            .pipeline_command(with_graph_id(command, &graph_id), &mut |_| {})
            .await
            .map_err(|e| spark_error(subject, origin.as_ref().map(|o| o.to_string()), e, url))?;
    }
    let registered_ms = started.elapsed().as_millis();

    let dry = request.action == RemoteAction::DryRun;
    let reporter = if dry {
        None
    } else {
        Some(ProgressReporter::new(
            request.spec.storage_location(),
            &graph.name,
        )?)
    };
    // The event log gets what a local run writes (the update, each
    // dataset's and flow's definition, the flows queued, the end), with
    // Spark's events in between; its table is copied at the end as after a
    // local run.
    let copy = match &reporter {
        Some(r) => {
            let flows: Vec<&pipelines_core::graph::FlowNode> = graph.ordered_flows().collect();
            r.update_started(
                graph,
                &UpdateSelection {
                    continuous: false,
                    full_refresh_all: request.full_refresh_all,
                    full_refresh: request.full_refresh,
                    refresh: request.refresh,
                    flows: &flows,
                },
            )?;
            r.emit(
                NewEvent::info("remote_run", format!("The update runs on Spark at {url}."))
                    .details(serde_json::json!({"remote_run": {
                        "url": url.to_string(),
                        "sql_files": translation.sql_files,
                    }})),
            )?;
            let storage = request.spec.storage_location();
            let table = pipelines_core::engine::event_table::table_path(
                &storage,
                request.base_dir,
                &graph.configuration,
            )?;
            pipelines_core::engine::event_table::EventTableCopy::start(&storage, &table)?
        }
        None => None,
    };
    writeln!(
        err,
        "{} pipeline `{}` on Spark at {url} ({} commands sent in {:.1} s)",
        if dry { "Checking" } else { "Running" },
        graph.name,
        translation.steps.len() + 1,
        registered_ms as f64 / 1000.0
    )
    .map_err(io)?;

    let mut outcome = RunOutcome::default();
    let mut log_error: Option<Error> = None;
    let run = session
        .pipeline_command(
            with_graph_id(&CommandType::StartRun(translation.start.clone()), &graph_id),
            &mut |r: &ExecutePlanResponse| {
                let Some(ResponseType::PipelineEventResult(e)) = &r.response_type else {
                    return;
                };
                let Some(event) = &e.event else { return };
                let message = event.message.clone().unwrap_or_default();
                outcome.events += 1;
                // The first line, and a failure's error without the plan
                // dump; the event log keeps the whole text.
                let shown = match message.split_once('\n') {
                    Some((first, rest)) => format!(
                        "{first}\n       {}",
                        events::concise(rest).replace('\n', "\n       ")
                    ),
                    None => message.clone(),
                };
                let _ = writeln!(err, "spark: {shown}");
                let parsed = events::parse(&message);
                let logged = match &parsed {
                    SparkEvent::Flow {
                        flow,
                        state,
                        spark_state,
                        error,
                    } => {
                        if *state == FlowState::Running && outcome.first_running_ms.is_none() {
                            outcome.first_running_ms = Some(started.elapsed().as_millis());
                        }
                        outcome.flows.insert(
                            flow.clone(),
                            FlowOutcome {
                                state: *state,
                                spark_state: spark_state.clone(),
                                error: error.clone(),
                            },
                        );
                        let target = graph
                            .flows
                            .get(flow)
                            .map(|f| f.def.target.clone())
                            .unwrap_or_else(|| flow.clone());
                        let failure = error.as_ref().map(|t| Error::runtime(t.clone()));
                        reporter.as_ref().map(|r| {
                            r.flow_state(flow, &target, *state, message.clone(), failure.as_ref())
                        })
                    }
                    SparkEvent::Run { state } => {
                        outcome.run_state = Some(state.clone());
                        reporter.as_ref().map(|r| {
                            r.emit(NewEvent::new(Level::Info, "spark_event", message.clone()))
                        })
                    }
                    SparkEvent::Other => reporter.as_ref().map(|r| {
                        r.emit(NewEvent::new(Level::Info, "spark_event", message.clone()))
                    }),
                };
                if let Some(Err(e)) = logged {
                    log_error.get_or_insert(e);
                }
            },
        )
        .await;
    session.release().await;
    let elapsed = started.elapsed();

    let failed: Vec<(&String, &FlowOutcome)> = outcome
        .flows
        .iter()
        .filter(|(_, o)| o.state == FlowState::Failed)
        .collect();
    let result = match (&run, failed.first()) {
        (Ok(()), None) => Ok(()),
        (_, Some((flow, o))) => {
            let origin = graph
                .flows
                .get(*flow)
                .and_then(|f| f.def.origin.as_ref())
                .map(|o| format!(" ({o})"))
                .unwrap_or_default();
            Err(Error::runtime(format!(
                "flow `{flow}`{origin} failed on Spark: {}",
                o.error
                    .as_deref()
                    .map(events::concise)
                    .unwrap_or("(no error text)")
            )))
        }
        (Err(e), None) => Err(Error::runtime(format!(
            "pipeline `{}`: the run failed on Spark: {}",
            graph.name,
            events::concise(&e.to_string())
        ))),
    };
    if let Some(r) = &reporter {
        let (state, message) = match &result {
            Ok(()) => ("COMPLETED", "Update completed on Spark.".to_string()),
            Err(e) => ("FAILED", format!("Update failed on Spark: {e}")),
        };
        r.emit(
            NewEvent::info("update_progress", message)
                .details(serde_json::json!({"update_progress": {"state": state}})),
        )?;
    }
    if let Some(Err(e)) = copy.map(|c| c.finish()) {
        writeln!(
            err,
            "warning: the event log table was not updated: {e}; the events are in the log and the next run copies them"
        )
        .map_err(io)?;
    }
    if let Some(e) = log_error {
        return Err(e);
    }
    result?;

    if dry {
        writeln!(
            out,
            "Spark at {url} accepted pipeline `{}`: {} datasets, {} flows{}. Nothing ran.",
            graph.name,
            graph.datasets.len(),
            graph.flows.len(),
            if translation.sql_files.is_empty() {
                String::new()
            } else {
                format!(", SQL files {}", translation.sql_files.join(", "))
            }
        )
        .map_err(io)?;
        return Ok(());
    }
    writeln!(
        out,
        "Pipeline `{}` run on Spark at {url}: {} in {:.1} s{}:",
        graph.name,
        outcome.run_state.as_deref().unwrap_or("ended"),
        elapsed.as_secs_f64(),
        outcome
            .first_running_ms
            .map(|ms| format!(" (first flow running after {:.1} s)", ms as f64 / 1000.0))
            .unwrap_or_default()
    )
    .map_err(io)?;
    for (flow, o) in &outcome.flows {
        writeln!(out, "  {flow:<24} {}", o.spark_state).map_err(io)?;
    }
    Ok(())
}
