//! What expectations cost: each workload run without and with three
//! expectations (one of them a drop), alternating, medians and the ratio.
//!
//! ```text
//! cargo run --release --example bench_expectations            # 5 M events in 50 files, 3 runs each
//! cargo run --release --example bench_expectations -- --quick # 100 k events, 1 run each (the test script)
//! ```
//!
//! Workloads (available-now, one fresh checkpoint and Parquet table a run),
//! on the events of the stateful benchmark:
//! - the stateful benchmark's windowed count from Parquet, one batch:
//!   `with_watermark(ts, 10 minutes).group_by(window(ts, 1 minute), service).count()`,
//!   the expectations checking its output rows (`count >= 1` drop,
//!   `service IS NOT NULL`, `length(service) < 20`);
//! - a stateless filter from JSON, one file per batch,
//!   `filter(level != 'INFO')`, where every one of the ~2.5 M rows it
//!   writes is checked (`value >= 0` drop, `user_id IS NOT NULL`,
//!   `level IN ('WARN', 'ERROR')`): the per-row cost.

use std::path::Path;

use pipelines as dp;
use pipelines::prelude::*;
use pipelines::Expectation;
use pipelines_test_support::bench_data::{self, median, read_events, timed_run_checked};

/// One run of `workload` into a fresh table; returns (seconds, rows written).
fn run_once(
    work: &Path,
    input: &Path,
    workload: &str,
    expectations: &[Expectation],
) -> Result<(f64, u64)> {
    let input = input.to_path_buf();
    let windowed = workload.starts_with("windowed");
    let (secs, f) = timed_run_checked(work, false, expectations, move |s: &Session| {
        if windowed {
            read_events(s, &input, "parquet", None)?
                .with_watermark("ts", "10 minutes")?
                .group_by([tumbling_window(col("ts"), "1 minute"), col("service")])
                .count()
        } else {
            read_events(s, &input, "json", Some(1))?.filter("level != 'INFO'")
        }
    })?;
    Ok((secs, f.output_rows))
}

fn main() -> Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let (events, files, runs) = if quick {
        (100_000, 10, 1)
    } else {
        (5_000_000, 50, 3)
    };
    let root = bench_data::bench_root();
    let data = root.join(format!("data-{events}"));
    bench_data::ensure_data(&data, events, files)?;
    let work = root.join("work-expectations");
    std::fs::create_dir_all(&work).map_err(|e| dp::Error::io(&work, e))?;
    let workloads: [(&str, &str, Vec<Expectation>); 2] = [
        (
            "windowed count, Parquet, one batch",
            "parquet",
            vec![
                Expectation::drop("counted", "count >= 1"),
                Expectation::warn("has_service", "service IS NOT NULL"),
                Expectation::warn("short_service", "length(service) < 20"),
            ],
        ),
        (
            "filter, JSON, one file per batch",
            "json",
            vec![
                Expectation::drop("non_negative", "value >= 0"),
                Expectation::warn("has_user", "user_id IS NOT NULL"),
                Expectation::warn("kept_levels", "level IN ('WARN', 'ERROR')"),
            ],
        ),
    ];
    println!("{events} events, {runs} run(s) each, alternating without/with expectations");
    println!(
        "{:<38} {:>10} {:>10} {:>8} {:>11}",
        "workload", "none s", "3 exp. s", "ratio", "rows out"
    );
    for (label, format, expectations) in &workloads {
        let input = data.join(format);
        let (mut plain, mut checked) = (Vec::new(), Vec::new());
        let mut rows = (0, 0);
        for _ in 0..runs {
            let (s, r) = run_once(&work, &input, label, &[])?;
            plain.push(s);
            rows.0 = r;
            let (s, r) = run_once(&work, &input, label, expectations)?;
            checked.push(s);
            rows.1 = r;
        }
        // The drop expectations hold for every row of these workloads.
        if rows.0 != rows.1 {
            return Err(dp::Error::runtime(format!(
                "{label}: {} rows without expectations but {} with them",
                rows.0, rows.1
            )));
        }
        let (p, c) = (median(plain), median(checked));
        println!(
            "{label:<38} {p:>10.3} {c:>10.3} {:>7.3}x {:>11}",
            c / p,
            rows.1
        );
    }
    Ok(())
}
