//! The HTTP server of `run --ui [ADDR]`, on the run's own runtime:
//! `/metrics` (the [`Metrics`] in Prometheus' text format) and
//! `/api/flows` (the same figures as JSON). It binds loopback
//! (`127.0.0.1:4040`, Spark's UI port) unless another address is given,
//! and stops with the run.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::engine::metrics::Metrics;
use crate::error::{Error, Result};

/// Where `--ui` binds without an address.
pub const DEFAULT_ADDR: &str = "127.0.0.1:4040";

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

async fn metrics(State(m): State<Arc<Metrics>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        m.prometheus(),
    )
}

async fn flows(State(m): State<Arc<Metrics>>) -> impl IntoResponse {
    let body = serde_json::to_string(&m.flows()).unwrap_or_else(|_| "{}".into());
    ([(header::CONTENT_TYPE, "application/json")], body)
}

/// Binds `addr` and serves `metrics` until the returned [`Server`] drops.
pub async fn start(addr: SocketAddr, metrics_of_run: Arc<Metrics>) -> Result<Server> {
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
        .route("/metrics", get(metrics))
        .route("/api/flows", get(flows))
        .with_state(metrics_of_run);
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!("--ui server stopped: {e}");
        }
    });
    Ok(Server { addr, task })
}

/// What `run` prints when the server starts: where, and whether other
/// machines can reach it.
pub fn announcement(addr: SocketAddr) -> String {
    if addr.ip().is_loopback() {
        format!("metrics at http://{addr}/metrics (this machine only)")
    } else {
        format!(
            "metrics at http://{addr}/metrics — listening on {}, reachable from other machines",
            addr.ip()
        )
    }
}
