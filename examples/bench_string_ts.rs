//! Throughput when the event time arrives as a string and the query
//! converts it (`with_column("event_time", "to_timestamp(ts)")`), stateful
//! and stateless, from JSON and from Parquet (`ts` a STRING column).
//!
//! ```text
//! cargo run --release --example bench_string_ts             # 5 M events in 50 files, 3 runs, medians
//! cargo run --release --example bench_string_ts -- --quick  # 100 k events, 1 run (used by the test script)
//! cargo run --release --example bench_string_ts -- --only Parquet
//! cargo run --release --example bench_string_ts -- --spark  # then PySpark on the same files, ratios against it
//! cargo run --release --example bench_string_ts -- --users 20000  # another data shape: 20 000 users
//! ```
//!
//! Events: ~90-byte JSON lines such as
//! `{"ts":"2024-01-01T00:00:07","user_id":"u3","service_name":"api","level":"INFO","value":548}`
//! (10 per second, one in 20 up to 30 minutes late, 1000 users (`--users`),
//! 4 services), and the same rows as Parquet. Workloads (available-now, one
//! run = a fresh checkpoint and Parquet table), each over all events in one
//! micro-batch and one file per micro-batch:
//! - windowed count: `with_watermark(event_time, 10 minutes)
//!   .group_by(window(event_time, 10 minutes)).count()`, append mode;
//! - filter + project: `filter(level <> 'INFO')
//!   .select(event_time, user_id, service_name, value)`.
//!
//! With `--spark`, `tests/spark/bench_string_ts.py` runs the same
//! workloads in PySpark local[2] on the same files after ours, and the
//! ratios are against what it measured in this run.

use pipelines_test_support::{bench_data, string_ts_data};

use std::path::Path;

use bench_data::{median, timed_run};
use pipelines as dp;
use pipelines::prelude::*;

/// The workloads: (label, windowed count?, format, max files per batch).
const WORKLOADS: [(&str, bool, &str, Option<u64>); 8] = [
    ("windowed count, JSON, one batch", true, "json", None),
    (
        "windowed count, JSON, one file per batch",
        true,
        "json",
        Some(1),
    ),
    ("windowed count, Parquet, one batch", true, "parquet", None),
    (
        "windowed count, Parquet, one file per batch",
        true,
        "parquet",
        Some(1),
    ),
    ("filter + project, JSON, one batch", false, "json", None),
    (
        "filter + project, JSON, one file per batch",
        false,
        "json",
        Some(1),
    ),
    (
        "filter + project, Parquet, one batch",
        false,
        "parquet",
        None,
    ),
    (
        "filter + project, Parquet, one file per batch",
        false,
        "parquet",
        Some(1),
    ),
];

/// One run of a workload; returns (seconds, batches, rows read, rows written).
fn run_once(
    work: &Path,
    input: &Path,
    windowed: bool,
    format: &'static str,
    max_files: Option<u64>,
) -> Result<(f64, u64, u64, u64)> {
    let input = input.to_path_buf();
    let (secs, f) = timed_run(work, false, move |s: &Session| {
        let events = string_ts_data::read_events(s, &input, format, max_files)?;
        if windowed {
            events
                .with_watermark("event_time", "10 minutes")?
                .group_by([tumbling_window(col("event_time"), "10 minutes")])
                .count()
        } else {
            events.filter("level <> 'INFO'")?.select_expr([
                "event_time",
                "user_id",
                "service_name",
                "value",
            ])
        }
    })?;
    Ok((secs, f.batches, f.input_rows, f.output_rows))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let spark = args.iter().any(|a| a == "--spark");
    let only: Option<String> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1).cloned());
    let users: u64 = match args.iter().position(|a| a == "--users") {
        Some(i) => match args.get(i + 1).and_then(|n| n.parse().ok()) {
            Some(n) if n > 0 => n,
            _ => {
                return Err(dp::Error::runtime(
                    "--users takes a number of distinct users above 0, e.g. --users 20000",
                ))
            }
        },
        None => string_ts_data::USERS,
    };
    if spark && users != string_ts_data::USERS {
        return Err(dp::Error::runtime(format!(
            "--spark runs on the default data shape ({} users); leave out --users",
            string_ts_data::USERS
        )));
    }
    let (events, files, runs) = if quick {
        (100_000, 10, 1)
    } else {
        (5_000_000, 50, 3)
    };
    let root = bench_data::bench_root();
    let data = if users == string_ts_data::USERS {
        root.join(format!("strts-{events}"))
    } else {
        root.join(format!("strts-{events}-users{users}"))
    };
    string_ts_data::ensure_data_with_users(&data, events, files, users)?;
    let work = root.join("work-strts");
    std::fs::create_dir_all(&work).map_err(|e| dp::Error::io(&work, e))?;

    let selected: Vec<_> = WORKLOADS
        .iter()
        .filter(|w| only.as_ref().is_none_or(|o| w.0.contains(o.as_str())))
        .collect();
    println!("string timestamps                               median s   rows/s        batches  rows out");
    let mut ours = Vec::new();
    for &(label, windowed, format, max_files) in &selected {
        let input = data.join(format);
        let mut secs = Vec::new();
        let mut last = (0, 0, 0);
        for _ in 0..runs {
            let (s, b, r, w) = run_once(&work, &input, *windowed, format, *max_files)?;
            assert_eq!(r, events, "every event is read exactly once");
            secs.push(s);
            last = (b, r, w);
        }
        let m = median(secs);
        println!(
            "{label:<47} {m:>8.3}   {:>12.0}  {:>7}  {:>8}",
            last.1 as f64 / m,
            last.0,
            last.2
        );
        ours.push((*label, m));
    }

    if spark {
        bench_data::compare_with_spark(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/spark/bench_string_ts.py"),
            &root,
            (runs, events, only.as_deref()),
            "string timestamps",
            &ours,
        )?;
    }
    Ok(())
}
