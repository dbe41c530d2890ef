//! The web UI's HTTP server (axum), for `run --ui [ADDR]` on the run's own
//! runtime and for `pipelines ui` over a stored event log:
//!
//! - `/`: one page (HTML, CSS and script embedded in the binary; nothing
//!   fetched from elsewhere) drawing the pipeline graph left to right, each
//!   flow's state and figures, a batch history per flow, and the errors
//!   with their fixes. It starts from the [`RunView`] inlined in the page
//!   and follows `/api/stream`.
//! - `/api/stream`: server-sent events, one `view` event with the whole
//!   [`RunView`] as JSON whenever it changes (at most every 200 ms).
//! - `/api/run`: the [`RunView`] as JSON.
//! - `/api/flows`: each flow's [`FlowMetrics`](crate::engine::metrics::FlowMetrics) as JSON.
//! - `/metrics`: the same figures in Prometheus' text format.
//!
//! It binds loopback (`127.0.0.1:4040`, Spark's UI port) unless another
//! address is given, and stops when the [`Server`] drops.
//!
//! [`RunView`]: crate::engine::run_view::RunView

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::State;
use axum::http::header;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::Router;

use crate::engine::run_view::SharedView;
use crate::error::{Error, Result};

/// Where `--ui` binds without an address.
pub const DEFAULT_ADDR: &str = "127.0.0.1:4040";

/// The page, with `/*VIEW*/null` where the current view is inlined.
const PAGE: &str = include_str!("web/page.html");

/// A running server; dropping it stops it.
pub struct Server {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    /// The address it listens on (the port chosen when 0 was asked).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The view as JSON safe inside a `<script>` element.
fn inline_json(view: &SharedView) -> String {
    serde_json::to_string(&view.snapshot())
        .unwrap_or_else(|_| "null".into())
        .replace("</", "<\\/")
}

async fn page(State(view): State<SharedView>) -> impl IntoResponse {
    Html(PAGE.replace("/*VIEW*/null", &inline_json(&view)))
}

async fn run_json(State(view): State<SharedView>) -> impl IntoResponse {
    let body = serde_json::to_string(&view.snapshot()).unwrap_or_else(|_| "{}".into());
    ([(header::CONTENT_TYPE, "application/json")], body)
}

async fn metrics(State(view): State<SharedView>) -> impl IntoResponse {
    let v = view.snapshot();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        crate::engine::metrics::prometheus(&v.pipeline, &v.figures()),
    )
}

async fn flows(State(view): State<SharedView>) -> impl IntoResponse {
    let body = serde_json::to_string(&view.snapshot().figures()).unwrap_or_else(|_| "{}".into());
    ([(header::CONTENT_TYPE, "application/json")], body)
}

/// The view now, then again after each change (no more often than every
/// 200 ms, so a fast flow does not flood the page).
async fn stream(State(view): State<SharedView>) -> impl IntoResponse {
    let changes = view.subscribe();
    let events = futures::stream::unfold(
        (view, changes, true),
        |(view, mut changes, first)| async move {
            if !first {
                tokio::time::sleep(Duration::from_millis(200)).await;
                changes.changed().await.ok()?;
            }
            changes.borrow_and_update();
            let json = serde_json::to_string(&view.snapshot()).ok()?;
            let event = SseEvent::default().event("view").data(json);
            Some((Ok::<_, Infallible>(event), (view, changes, false)))
        },
    );
    Sse::new(events).keep_alive(KeepAlive::default())
}

/// Binds `addr` and serves `view` until the returned [`Server`] drops.
pub async fn start(addr: SocketAddr, view: SharedView) -> Result<Server> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        Error::runtime_with_help(
            format!("--ui: cannot listen on {addr}: {e}"),
            format!(
                "pass another address, e.g. `--ui 127.0.0.1:{}`",
                addr.port().wrapping_add(1).max(1024)
            ),
        )
    })?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::runtime(format!("--ui: {e}")))?;
    let app = Router::new()
        .route("/", get(page))
        .route("/api/run", get(run_json))
        .route("/api/stream", get(stream))
        .route("/api/flows", get(flows))
        .route("/metrics", get(metrics))
        .with_state(view);
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!("--ui server stopped: {e}");
        }
    });
    Ok(Server { addr, task })
}

/// Serves the UI of the last run logged under `storage` until the process
/// is stopped, following the log as it grows (a run in another process).
pub fn serve_event_log(
    storage: &crate::engine::storage::Location,
    addr: SocketAddr,
    out: &mut dyn std::io::Write,
) -> Result<()> {
    let path = crate::engine::event_log::log_location(storage);
    let exists = match &path {
        crate::engine::storage::Location::Local(p) => p.exists(),
        objects => !objects.is_empty_dir()?,
    };
    if !exists {
        return Err(Error::runtime_with_help(
            format!("no event log at {path}: the pipeline has not run with this storage"),
            "run the pipeline first, or pass its storage with `--storage DIR`",
        ));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::runtime(format!("ui: cannot start the runtime: {e}")))?;
    rt.block_on(async {
        let view = SharedView::new("");
        let mut follow = Follow::new(path);
        follow.read_new(&view)?;
        let server = start(addr, view.clone()).await?;
        let _ = writeln!(out, "{}", announcement(server.addr()));
        let _ = out.flush();
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => return Ok(()),
                _ = tokio::time::sleep(Duration::from_millis(500)) => {
                    if let Err(e) = follow.read_new(&view) {
                        tracing::warn!("ui: {e}");
                    }
                }
            }
        }
    })
}

/// Reads an event log as it grows.
struct Follow {
    path: crate::engine::storage::Location,
    at: u64,
}

impl Follow {
    fn new(path: crate::engine::storage::Location) -> Self {
        Follow { path, at: 0 }
    }

    /// Folds the events added since the last call into `view`.
    fn read_new(&mut self, view: &SharedView) -> Result<()> {
        if let crate::engine::storage::Location::Local(p) = &self.path {
            let len = std::fs::metadata(p).map_err(|e| Error::io(p, e))?.len();
            if len < self.at {
                self.at = 0; // replaced by a new log
            }
        }
        let (events, end) = crate::engine::event_log::read_events_from(&self.path, self.at, None)?;
        for e in &events {
            view.add(e);
        }
        self.at = end;
        Ok(())
    }
}

/// What is printed when the server starts: where, and whether other
/// machines can reach it.
pub fn announcement(addr: SocketAddr) -> String {
    if addr.ip().is_loopback() {
        format!("UI at http://{addr}/ and metrics at http://{addr}/metrics (this machine only)")
    } else {
        format!(
            "UI at http://{addr}/ and metrics at http://{addr}/metrics — listening on {}, reachable from other machines",
            addr.ip()
        )
    }
}
