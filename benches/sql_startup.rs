//! Start-up of a SQL project: `pipelines run` of `examples/sql_pipeline`
//! from process start to its first committed batch, and to its exit, over
//! fresh storage each time; prints the medians of 10 runs.
//!
//! ```text
//! cargo bench --bench sql_startup            # release build of the binary
//! cargo bench --bench sql_startup -- --runs 3
//! ```
//!
//! Under `cargo test` it runs once, as a check that it works.
//!
//! The first committed batch is read from the run's event log: the first
//! event's `timestamp` (when the batch started) plus its
//! `durationMs.triggerExecution`, against the wall clock just before the
//! process was spawned.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let mut names: Vec<_> = std::fs::read_dir(from)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    for name in names {
        let (f, t) = (from.join(&name), to.join(&name));
        if name == "pipeline-storage" {
            continue;
        }
        if f.is_dir() {
            copy_dir(&f, &t);
        } else {
            std::fs::copy(&f, &t).unwrap();
        }
    }
}

/// Milliseconds since the epoch of an RFC 3339 UTC timestamp
/// (`2026-12-01T15:22:11.474Z`).
fn epoch_ms(ts: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(ts)
        .ok()
        .map(|t| t.timestamp_millis())
}

fn first_commit_ms(storage: &Path) -> Option<f64> {
    let batches = pipelines::engine::event_log::read_batch_progress(storage).ok()?;
    let first = batches.first()?;
    let start = epoch_ms(first.get("timestamp")?.as_str()?)? as f64;
    let took = first.get("durationMs")?.get("triggerExecution")?.as_f64()?;
    Some(start + took)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        // `cargo test --all-targets` runs this once as a smoke test;
        // `cargo bench` passes `--bench`.
        .unwrap_or(if args.iter().any(|a| a == "--bench") {
            10
        } else {
            1
        });
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_pipelines"));
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let tmp = tempfile::tempdir().unwrap();
    // The project reads ../data/logs: copy both, side by side.
    copy_dir(&example.join("data"), &tmp.path().join("data"));
    let project = tmp.path().join("sql_pipeline");
    copy_dir(&example.join("sql_pipeline"), &project);
    let (mut first, mut total) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let _ = std::fs::remove_dir_all(project.join("pipeline-storage"));
        let wall = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
            * 1000.0;
        let started = Instant::now();
        let out = Command::new(&bin)
            .arg("run")
            .current_dir(&project)
            .output()
            .expect("the pipelines binary runs");
        let took = started.elapsed();
        assert!(
            out.status.success(),
            "run {i} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let commit = first_commit_ms(&project.join("pipeline-storage"))
            .expect("the event log has a first batch");
        first.push(commit - wall);
        total.push(took.as_secs_f64() * 1000.0);
        std::thread::sleep(Duration::from_millis(50));
    }
    println!(
        "sql_startup: `pipelines run` of examples/sql_pipeline, {runs} runs: first committed batch {:.1} ms after process start (median; min {:.1}, max {:.1}), whole run {:.1} ms (median)",
        median(first.clone()),
        first.iter().cloned().fold(f64::INFINITY, f64::min),
        first.iter().cloned().fold(0.0, f64::max),
        median(total),
    );
}
