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
//! Spark local[2] on this kind of machine (../shared/reference/SEMANTICS.md
//! §8): 1.2 M rows/s JSON → Parquet, 3.3 M rows/s Parquet → Parquet, about
//! 350 ms per small micro-batch.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Int64Array, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use arrow::record_batch::RecordBatch;
use pipelines as dp;
use pipelines::engine::runtime::{run, RunOptions};
use pipelines::prelude::*;

const SERVICES: [&str; 5] = ["checkout", "search", "auth", "payments", "catalog"];
const LEVELS: [&str; 4] = ["INFO", "INFO", "WARN", "ERROR"];

fn event(i: u64) -> (i64, String, &'static str, &'static str, i64) {
    // 2026-11-01T00:00:00Z plus 10 ms per event.
    let ts_ms = 1_793_491_200_000i64 + (i as i64) * 10;
    let user = format!("user-{:06}", (i * 7919) % 100_000);
    let service = SERVICES[(i % 5) as usize];
    let level = LEVELS[((i / 3) % 4) as usize];
    let value = ((i * 31) % 1000) as i64;
    (ts_ms, user, service, level, value)
}

fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_default()
}

fn generate_json(dir: &Path, events: u64, files: u64) -> std::io::Result<u64> {
    std::fs::create_dir_all(dir)?;
    let per_file = events / files;
    let mut bytes = 0u64;
    for f in 0..files {
        let path = dir.join(format!("events-{f:04}.json"));
        let mut w = std::io::BufWriter::new(std::fs::File::create(&path)?);
        for i in f * per_file..(f + 1) * per_file {
            let (ts, user, service, level, value) = event(i);
            let line = format!(
                "{{\"ts\":\"{}\",\"user_id\":\"{user}\",\"service\":\"{service}\",\"level\":\"{level}\",\"value\":{value}}}\n",
                iso(ts)
            );
            bytes += line.len() as u64;
            w.write_all(line.as_bytes())?;
        }
        w.flush()?;
    }
    Ok(bytes)
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("user_id", DataType::Utf8, true),
        Field::new("service", DataType::Utf8, true),
        Field::new("level", DataType::Utf8, true),
        Field::new("value", DataType::Int64, true),
    ]))
}

fn generate_parquet(dir: &Path, events: u64, files: u64) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| dp::Error::io(dir, e))?;
    let per_file = events / files;
    for f in 0..files {
        let path = dir.join(format!("events-{f:04}.parquet"));
        let file = std::fs::File::create(&path).map_err(|e| dp::Error::io(&path, e))?;
        let mut writer = parquet::arrow::ArrowWriter::try_new(file, schema(), None)?;
        let range = f * per_file..(f + 1) * per_file;
        let mut ts = Vec::new();
        let mut users = Vec::new();
        let mut services = Vec::new();
        let mut levels = Vec::new();
        let mut values = Vec::new();
        for i in range {
            let (t, u, s, l, v) = event(i);
            ts.push(t * 1000);
            users.push(u);
            services.push(s);
            levels.push(l);
            values.push(v);
        }
        let batch = RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(TimestampMicrosecondArray::from(ts).with_timezone("UTC")),
                Arc::new(StringArray::from(users)),
                Arc::new(StringArray::from(services)),
                Arc::new(StringArray::from(levels)),
                Arc::new(Int64Array::from(values)),
            ],
        )?;
        writer.write(&batch)?;
        writer.close()?;
    }
    Ok(())
}

const DDL: &str = "ts TIMESTAMP, user_id STRING, service STRING, level STRING, value BIGINT";

/// Runs one filter + project flow from `input` (format `format`) into a
/// fresh Parquet table; returns (seconds, batches, rows read).
fn run_flow(
    work: &Path,
    input: &Path,
    format: &'static str,
    max_files: Option<u64>,
) -> Result<(f64, u64, u64)> {
    let storage = work.join("storage");
    let _ = std::fs::remove_dir_all(&storage);
    let input = input.to_path_buf();
    let p = dp::Pipeline::new()
        .append_flow("filter_project", "out", move |s: &Session| {
            let mut r = s.read_stream().format(format);
            if format != "parquet" {
                r = r.schema(DDL);
            }
            if let Some(n) = max_files {
                r = r.option("maxFilesPerTrigger", n.to_string());
            }
            r.load(input.to_string_lossy().to_string())?
                .filter("level <> 'INFO'")?
                .select_expr(["ts", "user_id", "service", "value * 2 AS value2"])
        })
        .create_streaming_table(
            "out",
            dp::TableOptions {
                format: Some("parquet".into()),
                ..Default::default()
            },
        );
    let mut spec_text = format!("name: bench\nstorage: {}\n", storage.display());
    if std::env::args().any(|a| a == "--fsync") {
        spec_text.push_str("configuration:\n  pipelines.checkpoint.fsync: \"true\"\n");
    }
    let spec = dp::spec::parse_str(&spec_text, &work.join("pipeline.yml"))?;
    let graph = p.build(&spec).map_err(dp::Error::Invalid)?;
    let opts = RunOptions::new(work, &storage);
    let t = Instant::now();
    let summary = run(&graph, &opts)?;
    let secs = t.elapsed().as_secs_f64();
    let f = &summary.flows[0];
    Ok((secs, f.batches, f.input_rows))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
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
    let root = PathBuf::from(std::env::var("BENCH_DIR").unwrap_or_else(|_| {
        std::env::temp_dir()
            .join("pipelines-bench")
            .to_string_lossy()
            .to_string()
    }));
    let data = root.join(format!("data-{events}"));
    let json_dir = data.join("json");
    let parquet_dir = data.join("parquet");
    if !data.join("done-marker").exists() {
        let _ = std::fs::remove_dir_all(&data);
        let t = Instant::now();
        let bytes =
            generate_json(&json_dir, events, files).map_err(|e| dp::Error::io(&json_dir, e))?;
        generate_parquet(&parquet_dir, events, files)?;
        std::fs::write(data.join("done-marker"), bytes.to_string()).ok();
        println!(
            "generated {events} events ({:.1} bytes/line) in {files} files in {:.1}s",
            bytes as f64 / events as f64,
            t.elapsed().as_secs_f64()
        );
    }
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
        generate_json(&small, n_small, n_small).map_err(|e| dp::Error::io(&small, e))?;
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
