//! What a checkpoint in object storage costs per micro-batch, against the
//! same flow with its checkpoint on the local disk.
//!
//! ```text
//! PIPELINES_PYTHON=<python with moto[server]> cargo run --release --example bench_object_storage
//! ... -- --quick    # 20 batches, 3 runs (used by the test script)
//! ... -- --runs 7   # runs per side (alternating local / S3), medians
//! ```
//!
//! The S3 endpoint is a moto server (PyPI `moto[server]`) started as a
//! process on a loopback port, so the figure is the engine's own cost of
//! object storage (requests per batch, conditional puts, listings) plus a
//! local server's latency, not a network's. Workloads: one one-line JSON
//! file per batch into a Parquet table, stateless (offsets, source log,
//! commit per batch) and a windowed count with a watermark (plus a state
//! file per batch).

use std::path::Path;

use pipelines as dp;
use pipelines::prelude::*;
use pipelines_test_support::bench_data::{self, median};
use pipelines_test_support::s3::S3Server;

/// Runs `query` over one file per batch into a fresh Parquet table, its
/// checkpoint at `checkpoint` (`None`: under the local storage); returns
/// milliseconds per batch and the batches.
fn per_batch_ms(
    work: &Path,
    checkpoint: Option<&str>,
    query: fn(&Session) -> Result<DataFrame>,
) -> Result<(f64, u64)> {
    let spec_extra = checkpoint.map_or_else(String::new, |c| {
        format!("flows:\n  bench_flow:\n    options:\n      checkpointLocation: {c}\n")
    });
    let (secs, flow) = bench_data::timed_run_with(work, &spec_extra, &[], query)?;
    let batches = flow.batches.max(1);
    Ok((secs * 1000.0 / batches as f64, batches))
}

fn input() -> String {
    std::env::var("BENCH_INPUT").unwrap_or_default()
}

fn stateless(s: &Session) -> Result<DataFrame> {
    bench_data::read_events(s, Path::new(&input()), "json", Some(1))?
        .select_expr(["ts", "user_id", "value"])
}

fn windowed(s: &Session) -> Result<DataFrame> {
    bench_data::read_events(s, Path::new(&input()), "json", Some(1))?
        .with_watermark("ts", "10 minutes")?
        .group_by([tumbling_window(col("ts"), "10 minutes")])
        .count()
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let runs: usize = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(if quick { 3 } else { 5 });
    let Some(server) = S3Server::shared() else {
        println!("skipped: no Python with moto[server] (set PIPELINES_PYTHON)");
        return Ok(());
    };
    for (k, v) in server.env() {
        std::env::set_var(k, v);
    }
    server.create_bucket("bench");
    let root = bench_data::bench_root();
    let n_files: u64 = if quick { 20 } else { 200 };
    let small = root.join(format!("small-{n_files}"));
    if !small
        .join(format!("events-{:04}.json", n_files - 1))
        .exists()
    {
        let _ = std::fs::remove_dir_all(&small);
        bench_data::generate_json(&small, n_files, n_files)
            .map_err(|e| dp::Error::io(&small, e))?;
    }
    std::env::set_var("BENCH_INPUT", &small);
    let work = root.join("work-object-storage");
    std::fs::create_dir_all(&work).map_err(|e| dp::Error::io(&work, e))?;

    println!("checkpoint per micro-batch ({n_files} batches of 1 row, {runs} runs each side, alternating; medians)");
    println!(
        "workload             local disk ms   S3 (moto, loopback) ms   ratio   requests/batch"
    );
    for (label, query) in [
        (
            "stateless copy",
            stateless as fn(&Session) -> Result<DataFrame>,
        ),
        ("windowed count", windowed),
    ] {
        let (mut local, mut remote) = (Vec::new(), Vec::new());
        let before = pipelines::engine::storage::object::requests();
        let mut remote_batches = 0;
        for run_no in 0..runs {
            local.push(per_batch_ms(&work, None, query)?);
            let ckpt = format!("s3://bench/{}/{run_no}", label.replace(' ', "-"));
            let (ms, batches) = per_batch_ms(&work, Some(&ckpt), query)?;
            remote.push(ms);
            remote_batches += batches;
        }
        let requests = (pipelines::engine::storage::object::requests() - before) as f64
            / remote_batches as f64;
        let local: Vec<f64> = local.into_iter().map(|(ms, _)| ms).collect();
        let (l, r) = (median(local), median(remote));
        println!(
            "{label:<20} {l:>13.2} {r:>24.2} {:>7.1}x {requests:>16.1}",
            r / l
        );
    }
    Ok(())
}
