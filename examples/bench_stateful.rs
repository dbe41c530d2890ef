//! Throughput of stateful streaming, and the state's size per key.
//!
//! ```text
//! cargo run --release --example bench_stateful             # 5 M events in 50 files, 3 runs, medians
//! cargo run --release --example bench_stateful -- --quick  # 100 k events, 1 run (used by the test script)
//! cargo run --release --example bench_stateful -- --only Parquet  # the workloads whose label contains "Parquet"
//! cargo run --release --example bench_stateful -- --spark  # then Spark on the same workloads, ratios against it
//! ```
//!
//! Workloads (available-now, one run = one fresh checkpoint and table):
//! - windowed count with a watermark, append mode:
//!   `with_watermark(ts, 10 minutes).group_by(window(ts, 1 minute), service).count()`
//!   from JSON and from Parquet, all events in one micro-batch and one file
//!   per micro-batch, into a Parquet table;
//! - the state of a count per key with 10 M distinct keys (BIGINT and
//!   STRING keys): Arrow bytes of the state per key, and the time to build it.
//!
//! Spark 4.3 local[2] on this kind of machine (5 M JSON-lines events in 50
//! files, warm): windowed count 1.2 M rows/s from JSON, 3.3 M rows/s from
//! Parquet, in one micro-batch. The ratios printed are against Spark on the same
//! workload, as `tests/spark/bench_stateful.py` measured it here on
//! 2026-11-30; with `--spark` that script runs after ours (same workloads,
//! same data, PySpark from `$PIPELINES_PYTHON`, else
//! `~/.cache/pipelines-venv/bin/python`) and the ratios are against what it
//! measured now, on this machine.

use pipelines_test_support::bench_data;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Int64Array, StringArray};
use arrow::record_batch::RecordBatch;
use pipelines as dp;
use pipelines::engine::exec::{BatchContext, CompiledPlan};
use pipelines::formats::OutputMode;
use pipelines::prelude::*;

use bench_data::{median, read_events, timed_run};

/// Runs the windowed count from `input`; returns (seconds, batches, rows read, rows written).
fn run_windowed_count(
    work: &Path,
    input: &Path,
    format: &'static str,
    max_files: Option<u64>,
) -> Result<(f64, u64, u64, u64)> {
    let input = input.to_path_buf();
    let (secs, f) = timed_run(work, false, move |s: &Session| {
        read_events(s, &input, format, max_files)?
            .with_watermark("ts", "10 minutes")?
            .group_by([tumbling_window(col("ts"), "1 minute"), col("service")])
            .count()
    })?;
    Ok((secs, f.batches, f.input_rows, f.output_rows))
}

/// Counts `keys` distinct keys in one batch; returns (seconds, state rows,
/// state bytes).
fn count_state(keys: usize, strings: bool) -> Result<(f64, u64, u64)> {
    let ddl = if strings { "k STRING" } else { "k BIGINT" };
    let df = Session::new()
        .read_stream()
        .format("memory")
        .schema(ddl)
        .load("keys")?
        .group_by(["k"])
        .count()?;
    let resolved = df
        .resolve(&std::collections::HashMap::new())
        .map_err(|e| dp::Error::runtime(format!("{e:?}")))?;
    let mut plan = CompiledPlan::compile("keys", &df, &resolved, 2)?;
    let schema = plan.leaves()[0].schema.clone();
    let mut batches = Vec::new();
    let chunk = 1 << 20;
    let mut start = 0usize;
    while start < keys {
        let end = (start + chunk).min(keys);
        // Keys in a scrambled order, each once.
        let ids =
            (start..end).map(|i| ((i as u64).wrapping_mul(2_654_435_761) % keys as u64) as i64);
        let col: Arc<dyn arrow::array::Array> = if strings {
            Arc::new(StringArray::from_iter_values(
                ids.map(|i| format!("user-{i:08}")),
            ))
        } else {
            Arc::new(Int64Array::from_iter_values(ids))
        };
        batches.push(RecordBatch::try_new(schema.clone(), vec![col])?);
        start = end;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .map_err(|e| dp::Error::runtime(e.to_string()))?;
    let ctx = BatchContext {
        batch_id: 0,
        output_mode: OutputMode::Update,
        watermark_for_late_ms: None,
        watermark_for_eviction_ms: None,
        capture_late_rows: false,
        ..BatchContext::default()
    };
    let t = Instant::now();
    let out = rt.block_on(plan.execute_batch(vec![batches], &ctx))?;
    let secs = t.elapsed().as_secs_f64();
    let p = &out.state_operators[0];
    Ok((secs, p.num_rows_total, p.memory_used_bytes))
}

/// The windowed-count workloads, as both benchmarks label them.
const LABELS: [&str; 4] = [
    "JSON, one batch",
    "JSON, one file per batch",
    "Parquet, one batch",
    "Parquet, one file per batch",
];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `--only TEXT`: run the workloads whose label contains TEXT.
    let only: Option<String> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1).cloned());
    let (events, files, runs, keys) = if quick {
        (100_000, 10, 1, 100_000)
    } else {
        (5_000_000, 50, 3, 10_000_000)
    };
    let root = bench_data::bench_root();
    let data = root.join(format!("data-{events}"));
    bench_data::ensure_data(&data, events, files)?;
    let work = root.join("work-stateful");
    std::fs::create_dir_all(&work).map_err(|e| dp::Error::io(&work, e))?;

    let spark = args.iter().any(|a| a == "--spark");

    println!("windowed count with watermark          median s   rows/s        batches  windows  vs Spark local[2] (2026-11-30)");
    let ours = std::cell::RefCell::new(Vec::<(&str, f64)>::new());
    let report = |label: &'static str,
                  input: &Path,
                  format: &'static str,
                  max_files: Option<u64>,
                  spark: f64|
     -> Result<()> {
        if only.as_ref().is_some_and(|o| !label.contains(o.as_str())) {
            return Ok(());
        }
        let mut secs = Vec::new();
        let mut last = (0, 0, 0);
        for _ in 0..runs {
            let (s, b, r, w) = run_windowed_count(&work, input, format, max_files)?;
            assert_eq!(r, events, "every event is read exactly once");
            secs.push(s);
            last = (b, r, w);
        }
        let m = median(secs);
        let rate = last.1 as f64 / m;
        println!(
            "{label:<38} {m:>8.3}   {rate:>12.0}  {:>7}  {:>7}  {:.1}x",
            last.0,
            last.2,
            rate / spark
        );
        ours.borrow_mut().push((label, m));
        Ok(())
    };
    let json = data.join("json");
    let parquet = data.join("parquet");
    // Spark local[2] on the same workloads, measured here on 2026-11-30 by
    // tests/spark/bench_stateful.py (medians of 3 warm runs, quiet machine):
    // one micro-batch ~ 1.2 M rows/s (JSON) and 3.3 M rows/s (Parquet); one
    // file per batch pays Spark's ~0.3 s per micro-batch 50 times.
    report(LABELS[0], &json, "json", None, 1.26e6)?;
    report(LABELS[1], &json, "json", Some(1), 0.272e6)?;
    report(LABELS[2], &parquet, "parquet", None, 3.45e6)?;
    report(LABELS[3], &parquet, "parquet", Some(1), 0.340e6)?;

    if spark {
        bench_data::compare_with_spark(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/spark/bench_stateful.py"),
            &root,
            (runs, events, only.as_deref()),
            "windowed count with watermark",
            &ours.borrow(),
        )?;
    }

    if only
        .as_ref()
        .is_some_and(|o| !"count per key".contains(o.as_str()))
    {
        return Ok(());
    }
    for strings in [false, true] {
        let (secs, rows, bytes) = count_state(keys, strings)?;
        println!(
            "count per key, {keys} {} keys: {rows} state rows, {:.1} bytes per key (Arrow state), built in {secs:.2}s ({:.1} M keys/s)",
            if strings { "STRING" } else { "BIGINT" },
            bytes as f64 / rows.max(1) as f64,
            keys as f64 / secs / 1e6
        );
    }
    Ok(())
}
