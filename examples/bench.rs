//! Throughput and per-batch overhead of the micro-batch engine.
//!
//! ```text
//! cargo run --release --example bench             # 5 M events in 50 files, 3 runs each, medians
//! cargo run --release --example bench -- --quick  # 100 k events, 1 run (used by the test script)
//! cargo run --release --example bench -- --runs 5 --only "JSON -> Parquet, one batch"
//! cargo run --release --example bench -- --fsync  # with `pipelines.checkpoint.fsync: true`
//! ```
//!
//! Workloads (stateless filter + project, available-now, one run = one
//! fresh checkpoint and output table):
//! - JSON → Parquet over ~90-byte JSON lines (ISO timestamp, user id,
//!   service, level, integer value) in 50 files, all in one micro-batch and
//!   one file per micro-batch;
//! - Parquet → Parquet over the same events;
//! - per-micro-batch overhead: 200 one-line files, one file per batch.
//!
//! Spark 4.3 local[2] on this kind of machine (5 M JSON-lines events in 50
//! files, warm): 1.2 M rows/s JSON → Parquet, 3.3 M rows/s Parquet →
//! Parquet, about 350 ms per small micro-batch.

use pipelines_test_support::bench_data;

use std::path::Path;

use bench_data::{median, read_events, timed_run};
use pipelines as dp;
use pipelines::prelude::*;

/// Runs one filter + project flow from `input` (format `format`) into a
/// fresh Parquet table; returns (seconds, batches, rows read).
fn run_flow(
    work: &Path,
    input: &Path,
    format: &'static str,
    max_files: Option<u64>,
) -> Result<(f64, u64, u64)> {
    let input = input.to_path_buf();
    let fsync = std::env::args().any(|a| a == "--fsync");
    let (secs, f) = timed_run(work, fsync, move |s: &Session| {
        read_events(s, &input, format, max_files)?
            .filter("level <> 'INFO'")?
            .select_expr(["ts", "user_id", "service", "value * 2 AS value2"])
    })?;
    Ok((secs, f.batches, f.input_rows))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let (events, files, mut runs) = if quick {
        (100_000, 10, 1)
    } else {
        (5_000_000, 50, 3)
    };
    if let Some(n) = arg("--runs").and_then(|n| n.parse().ok()) {
        runs = n;
    }
    // Only the workloads whose label contains this text ("per-micro-batch" for the overhead).
    let only = arg("--only").unwrap_or_default();
    let root = bench_data::bench_root();
    let data = root.join(format!("data-{events}"));
    let json_dir = data.join("json");
    let parquet_dir = data.join("parquet");
    bench_data::ensure_data(&data, events, files)?;
    let work = root.join("work");
    std::fs::create_dir_all(&work).map_err(|e| dp::Error::io(&work, e))?;

    println!("workload                               median s   rows/s        batches  vs Spark local[2]");
    let report = |label: &str,
                  input: &Path,
                  format: &'static str,
                  max_files: Option<u64>,
                  spark: f64|
     -> Result<()> {
        if !label.contains(only.as_str()) {
            return Ok(());
        }
        let mut secs = Vec::new();
        let mut last = (0, 0);
        for _ in 0..runs {
            let (s, b, r) = run_flow(&work, input, format, max_files)?;
            assert_eq!(r, events, "every event is read exactly once");
            secs.push(s);
            last = (b, r);
        }
        let m = median(secs);
        let rate = last.1 as f64 / m;
        println!(
            "{label:<38} {m:>8.3}   {rate:>12.0}  {:>7}  {:.1}x",
            last.0,
            rate / spark
        );
        Ok(())
    };
    report("JSON -> Parquet, one batch", &json_dir, "json", None, 1.2e6)?;
    report(
        "JSON -> Parquet, one file per batch",
        &json_dir,
        "json",
        Some(1),
        1.2e6,
    )?;
    report(
        "Parquet -> Parquet, one batch",
        &parquet_dir,
        "parquet",
        None,
        3.3e6,
    )?;
    report(
        "Parquet -> Parquet, one file per batch",
        &parquet_dir,
        "parquet",
        Some(1),
        3.3e6,
    )?;

    // Per-micro-batch overhead: one one-line file per batch.
    if !"per-micro-batch overhead".contains(only.as_str()) {
        return Ok(());
    }
    let small = root.join("small");
    let n_small = if quick { 20 } else { 200 };
    if !small
        .join(format!("events-{:04}.json", n_small - 1))
        .exists()
    {
        let _ = std::fs::remove_dir_all(&small);
        bench_data::generate_json(&small, n_small, n_small)
            .map_err(|e| dp::Error::io(&small, e))?;
    }
    let mut per_batch = Vec::new();
    for _ in 0..runs {
        let (s, b, _) = run_flow(&work, &small, "json", Some(1))?;
        per_batch.push(s * 1000.0 / b as f64);
    }
    let m = median(per_batch);
    println!(
        "per-micro-batch overhead (1 row/batch, {n_small} batches): median {m:.2} ms per batch (Spark: ~350 ms, {:.0}x less)",
        350.0 / m
    );
    Ok(())
}
