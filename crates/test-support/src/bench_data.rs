//! Shared by the benchmark examples: deterministic events (~90-byte JSON
//! lines: ISO timestamp, user id, service, level, integer value, and the
//! same events as Parquet), a reader of them, and a timed run of one flow
//! into a fresh Parquet table.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{Int64Array, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use arrow::record_batch::RecordBatch;
use pipelines_core as dp;
use pipelines_core::engine::runtime::{run, FlowSummary, RunOptions};
use pipelines_core::prelude::*;

/// The events' schema as Spark DDL.
pub const DDL: &str = "ts TIMESTAMP, user_id STRING, service STRING, level STRING, value BIGINT";

/// Service names.
pub const SERVICES: [&str; 5] = ["checkout", "search", "auth", "payments", "catalog"];
/// Log levels (INFO twice as often).
pub const LEVELS: [&str; 4] = ["INFO", "INFO", "WARN", "ERROR"];

/// Event `i`: 10 ms after event `i - 1`.
pub fn event(i: u64) -> (i64, String, &'static str, &'static str, i64) {
    // 2026-11-01T00:00:00Z plus 10 ms per event.
    let ts_ms = 1_793_491_200_000i64 + (i as i64) * 10;
    let user = format!("user-{:06}", (i * 7919) % 100_000);
    let service = SERVICES[(i % 5) as usize];
    let level = LEVELS[((i / 3) % 4) as usize];
    let value = ((i * 31) % 1000) as i64;
    (ts_ms, user, service, level, value)
}

/// Milliseconds since the epoch as an ISO timestamp.
pub fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_default()
}

/// Writes `events` events as JSON lines in `files` files; returns the bytes written.
pub fn generate_json(dir: &Path, events: u64, files: u64) -> std::io::Result<u64> {
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

/// The events' Arrow schema.
pub fn schema() -> Arc<Schema> {
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

/// Writes the same events as Parquet files.
pub fn generate_parquet(dir: &Path, events: u64, files: u64) -> Result<()> {
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

/// Writes (once: a `<dir>.done` marker says it is there) `files` Parquet
/// files `part-NNNN.parquet` under `dir`, file `f` holding `make(f)`.
pub fn generate_parquet_files(
    dir: &Path,
    files: u64,
    make: impl Fn(u64) -> Result<RecordBatch>,
) -> Result<()> {
    let done = dir.with_extension("done");
    if done.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(|e| dp::Error::io(dir, e))?;
    for f in 0..files {
        let batch = make(f)?;
        let path = dir.join(format!("part-{f:04}.parquet"));
        let file = std::fs::File::create(&path).map_err(|e| dp::Error::io(&path, e))?;
        let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None)?;
        writer.write(&batch)?;
        writer.close()?;
    }
    std::fs::write(&done, b"").map_err(|e| dp::Error::io(&done, e))
}

/// Where benchmarks keep their data and work directories: `$BENCH_DIR`,
/// else `<temp>/pipelines-bench`.
pub fn bench_root() -> std::path::PathBuf {
    std::env::var_os("BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("pipelines-bench"))
}

/// Generates (once) `events` events in `files` files under `data`:
/// `data/json` and `data/parquet`.
pub fn ensure_data(data: &Path, events: u64, files: u64) -> Result<()> {
    ensure_generated(
        data,
        "events",
        events,
        files,
        generate_json,
        generate_parquet,
    )
}

/// Generates (once) `events` `what` in `files` files under `data`, JSON
/// lines with `json` into `data/json` (returning the bytes written) and
/// Parquet with `parquet` into `data/parquet`; a `done-marker` file says
/// the data is complete.
pub fn ensure_generated(
    data: &Path,
    what: &str,
    events: u64,
    files: u64,
    json: impl Fn(&Path, u64, u64) -> std::io::Result<u64>,
    parquet: impl Fn(&Path, u64, u64) -> Result<()>,
) -> Result<()> {
    if data.join("done-marker").exists() {
        return Ok(());
    }
    let _ = std::fs::remove_dir_all(data);
    let json_dir = data.join("json");
    let t = std::time::Instant::now();
    let bytes = json(&json_dir, events, files).map_err(|e| dp::Error::io(&json_dir, e))?;
    parquet(&data.join("parquet"), events, files)?;
    std::fs::write(data.join("done-marker"), bytes.to_string()).ok();
    println!(
        "generated {events} {what} ({:.1} bytes/line) in {files} files in {:.1}s",
        bytes as f64 / events as f64,
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A streaming read of the events in `input` (`json` or `parquet`), at most
/// `max_files` files per micro-batch.
pub fn read_events(
    s: &Session,
    input: &Path,
    format: &str,
    max_files: Option<u64>,
) -> Result<DataFrame> {
    read_files(s, input, format, DDL, max_files)
}

/// A streaming read of `input` in `format`, with schema `ddl` (Parquet
/// keeps the files' own), at most `max_files` files per micro-batch.
pub fn read_files(
    s: &Session,
    input: &Path,
    format: &str,
    ddl: &str,
    max_files: Option<u64>,
) -> Result<DataFrame> {
    let mut r = s.read_stream().format(format);
    if format != "parquet" {
        r = r.schema(ddl);
    }
    if let Some(n) = max_files {
        r = r.option("maxFilesPerTrigger", n.to_string());
    }
    r.load(input.to_string_lossy().to_string())
}

/// Runs `query` as the only flow, into a fresh Parquet table under `work`
/// (with `pipelines.checkpoint.fsync` when `fsync`); returns the wall time
/// in seconds and what the flow did.
pub fn timed_run(
    work: &Path,
    fsync: bool,
    query: impl Fn(&Session) -> Result<DataFrame> + Send + Sync + 'static,
) -> Result<(f64, FlowSummary)> {
    timed_run_checked(work, fsync, &[], query)
}

/// [`timed_run`] with `expectations` on the output table.
pub fn timed_run_checked(
    work: &Path,
    fsync: bool,
    expectations: &[dp::Expectation],
    query: impl Fn(&Session) -> Result<DataFrame> + Send + Sync + 'static,
) -> Result<(f64, FlowSummary)> {
    let spec_extra = if fsync {
        "configuration:\n  pipelines.checkpoint.fsync: \"true\"\n"
    } else {
        ""
    };
    timed_run_with(work, spec_extra, expectations, query)
}

/// [`timed_run_checked`] with `spec_extra` appended to the spec (YAML
/// after `name:` and `storage:`; the flow is `bench_flow`).
pub fn timed_run_with(
    work: &Path,
    spec_extra: &str,
    expectations: &[dp::Expectation],
    query: impl Fn(&Session) -> Result<DataFrame> + Send + Sync + 'static,
) -> Result<(f64, FlowSummary)> {
    let storage = work.join("storage");
    let _ = std::fs::remove_dir_all(&storage);
    let p = dp::Pipeline::new()
        .append_flow("bench_flow", "out", query)
        .create_streaming_table(
            "out",
            dp::TableOptions {
                format: Some("parquet".into()),
                expectations: expectations.to_vec(),
                ..Default::default()
            },
        );
    let spec_text = format!("name: bench\nstorage: {}\n{spec_extra}", storage.display());
    let spec = dp::spec::parse_str(&spec_text, &work.join("pipeline.yml"))?;
    let graph = p.build(&spec).map_err(dp::Error::Invalid)?;
    let opts = RunOptions::new(work, &storage);
    let t = std::time::Instant::now();
    let summary = run(&graph, &opts)?;
    let secs = t.elapsed().as_secs_f64();
    Ok((secs, summary.flows[0].clone()))
}

/// The median of `v` (which must not be empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Runs the PySpark twin of a benchmark (`script`, in `tests/spark/`) on
/// the data under `root` with the same `runs`, `events` and `--only`
/// filter, then prints, under `title`, our median seconds per workload
/// (`ours`, label and seconds) beside Spark local[2]'s and the ratio.
pub fn compare_with_spark(
    script: &Path,
    root: &Path,
    (runs, events, only): (usize, u64, Option<&str>),
    title: &str,
    ours: &[(&str, f64)],
) -> Result<()> {
    let mut args = vec![
        "--runs".to_string(),
        runs.to_string(),
        "--events".to_string(),
        events.to_string(),
    ];
    if let Some(o) = only {
        args.extend(["--only".to_string(), o.to_string()]);
    }
    let labels: Vec<&str> = ours.iter().map(|(l, _)| *l).collect();
    let measured = spark_medians(script, root, &args, &labels)?;
    let width = labels.iter().map(|l| l.len()).max().unwrap_or(0) + 1;
    println!("{title:<width$} ours s    Spark s   ours vs Spark local[2], measured now");
    for (label, m) in ours {
        match measured.get(*label) {
            Some(s) => println!("{label:<width$} {m:>7.3}  {s:>8.2}   {:.1}x", s / m),
            None => println!("{label:<width$} {m:>7.3}  (Spark gave no figure)"),
        }
    }
    Ok(())
}

/// Runs a PySpark benchmark script (`script` is its path) with `args`, on
/// the data under `root`, and returns Spark local[2]'s median seconds per
/// workload, read from the lines of its output that start with one of
/// `labels` (its output is printed too). PySpark comes from
/// `$PIPELINES_PYTHON`, else `~/.cache/pipelines-venv/bin/python`.
fn spark_medians(
    script: &Path,
    root: &Path,
    args: &[String],
    labels: &[&str],
) -> Result<std::collections::HashMap<String, f64>> {
    let python = std::env::var_os("PIPELINES_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(&std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/pipelines-venv/bin/python")
        });
    let out = std::process::Command::new(&python)
        .arg(script)
        .args(args)
        .env("SPARK_LOCAL_IP", "127.0.0.1")
        .env("TZ", "UTC")
        .env("BENCH_DIR", root)
        .output()
        .map_err(|e| {
            dp::Error::runtime(format!(
                "cannot run {} (set PIPELINES_PYTHON to a Python with PySpark): {e}",
                python.display()
            ))
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(dp::Error::runtime(format!(
            "{} failed: {}{}",
            script.display(),
            text,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    print!("{text}");
    let mut secs = std::collections::HashMap::new();
    for line in text.lines() {
        for label in labels {
            if let Some(rest) = line.strip_prefix(label) {
                if let Some(s) = rest.split_whitespace().next().and_then(|t| t.parse().ok()) {
                    secs.insert(label.to_string(), s);
                }
            }
        }
    }
    Ok(secs)
}
