//! Running a validated pipeline somewhere else: `run --remote URL` and
//! `dry-run --remote URL` (or `SPARK_REMOTE`).
//!
//! The engine does not know any remote protocol. A crate that does (the
//! `pipelines-connect` crate speaks Spark Connect) implements
//! [`RemoteBackend`] and registers it with
//! `inventory::submit! { RemoteRegistration(&MINE) }`, as connectors do. The
//! command line finds the backend whose [`RemoteBackend::accepts`] takes the
//! URL; without one linked into the binary, `--remote` is an error saying
//! which feature brings it.
//!
//! Everything the local checks know is checked first: the CLI builds and
//! validates the graph exactly as for a local run, then hands it here.

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};
use crate::graph::PipelineGraph;
use crate::spec::PipelineSpec;

/// The environment variable naming a remote when `--remote` is not given
/// (as Spark's clients read it).
pub const REMOTE_ENV: &str = "SPARK_REMOTE";

/// What to do on the remote: check only (`dry-run`) or run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteAction {
    /// Register the graph and let the remote analyse it; nothing runs.
    DryRun,
    /// Register the graph and run every flow (available-now).
    Run,
}

/// One `run --remote` / `dry-run --remote`: the validated pipeline and the
/// command line's choices.
#[derive(Debug)]
pub struct RemoteRequest<'a> {
    /// The remote's URL as given (`sc://host:port/;token=...`).
    pub url: &'a str,
    /// Check or run.
    pub action: RemoteAction,
    /// The validated pipeline.
    pub graph: &'a PipelineGraph,
    /// Its spec (name, storage, catalog, database, configuration, libraries).
    pub spec: &'a PipelineSpec,
    /// The directory relative paths are resolved against (the spec's).
    pub base_dir: &'a Path,
    /// `--full-refresh a,b`.
    pub full_refresh: &'a [String],
    /// `--full-refresh-all`.
    pub full_refresh_all: bool,
    /// `--refresh a,b`.
    pub refresh: &'a [String],
}

/// A way of running a pipeline on another engine.
pub trait RemoteBackend: Sync {
    /// The URL schemes it takes, for messages (e.g. `sc://`).
    fn schemes(&self) -> &'static [&'static str];

    /// True when `url` is one of its URLs.
    fn accepts(&self, url: &str) -> bool {
        self.schemes().iter().any(|s| url.starts_with(s))
    }

    /// Refuses what the remote cannot run (one line per item, saying why
    /// and what to do), then checks or runs the pipeline there, writing its
    /// progress to `err` and its report to `out`.
    fn execute(
        &self,
        request: &RemoteRequest<'_>,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Result<()>;
}

/// Registers a [`RemoteBackend`]: `inventory::submit! { RemoteRegistration(&MINE) }`.
pub struct RemoteRegistration(pub &'static dyn RemoteBackend);

inventory::collect!(RemoteRegistration);

/// The backend for `url`, or a usage error naming what is linked.
pub fn backend_for(url: &str) -> Result<&'static dyn RemoteBackend> {
    let backends: Vec<&'static dyn RemoteBackend> = inventory::iter::<RemoteRegistration>
        .into_iter()
        .map(|r| r.0)
        .collect();
    if let Some(b) = backends.iter().find(|b| b.accepts(url)) {
        return Ok(*b);
    }
    if backends.is_empty() {
        return Err(Error::Usage(format!(
            "--remote {url}: this binary was built without a remote client; \
             build it with the `spark-connect` feature of `pipelines` (on by default) to run on Spark"
        )));
    }
    let schemes: Vec<&str> = backends.iter().flat_map(|b| b.schemes()).copied().collect();
    Err(Error::Usage(format!(
        "--remote {url}: not a remote URL this binary knows; write {}, e.g. `--remote sc://localhost:15002`",
        schemes.join(" or ")
    )))
}

/// The remote named by `--remote`, else by `SPARK_REMOTE`. An empty value,
/// or Spark's `local` / `local[N]` (a Spark started on this machine), means
/// this engine.
pub fn remote_from(flag: Option<&str>) -> Option<String> {
    let url = match flag {
        Some(url) => url.to_string(),
        None => std::env::var(REMOTE_ENV).ok()?,
    };
    let trimmed = url.trim();
    if trimmed.is_empty() || trimmed == "local" || trimmed.starts_with("local[") {
        return None;
    }
    Some(trimmed.to_string())
}
