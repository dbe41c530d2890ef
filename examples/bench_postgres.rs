//! Rows per second into PostgreSQL: append (binary `COPY`) and update
//! (upsert on a key through a staging table), through the `postgres` sink.
//!
//! ```text
//! cargo run --release --example bench_postgres            # 1 M rows over 100 k keys, 10 batches
//! cargo run --release --example bench_postgres -- --quick # 100 k rows over 10 k keys (the test script)
//! ```
//!
//! The server: `PIPELINES_PG_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`). The input: Parquet files,
//! one per micro-batch, `id BIGINT, name STRING, value DOUBLE, ts TIMESTAMP`.
//! Each mode runs over TLS (`sslmode: require`) and without
//! (`sslmode: disable`), so the encryption's cost shows beside it.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use pipelines as dp;
use pipelines::engine::runtime::{run, RunOptions};
use pipelines::prelude::*;
use pipelines_test_support::bench_data;

fn url() -> String {
    std::env::var("PIPELINES_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

fn psql(sql: &str) -> Result<String> {
    let out = std::process::Command::new("psql")
        .args([url().as_str(), "-v", "ON_ERROR_STOP=1", "-At", "-c", sql])
        .output()
        .map_err(|e| dp::Error::runtime(format!("psql: {e}")))?;
    if !out.status.success() {
        return Err(dp::Error::runtime(format!(
            "psql `{sql}`: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn generate(dir: &Path, rows: u64, keys: u64, files: u64) -> Result<()> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("value", DataType::Float64, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
    ]));
    let per = rows / files;
    bench_data::generate_parquet_files(dir, files, |f| {
        let range = f * per..(f + 1) * per;
        let id: Vec<i64> = range.clone().map(|i| ((i * 7919) % keys) as i64).collect();
        let name: Vec<String> = range
            .clone()
            .map(|i| format!("user-{}", i % 1000))
            .collect();
        let value: Vec<f64> = range.clone().map(|i| (i % 997) as f64 * 0.5).collect();
        let ts: Vec<i64> = range
            .map(|i| 1_767_225_600_000_000 + i as i64 * 1_000)
            .collect();
        Ok(RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(id)),
                Arc::new(StringArray::from(name)),
                Arc::new(Float64Array::from(value)),
                Arc::new(TimestampMicrosecondArray::from(ts).with_timezone("UTC")),
            ],
        )?)
    })
}

fn run_once(work: &Path, input: &Path, update: bool, rows: u64, sslmode: &str) -> Result<()> {
    let table = if update {
        "bench_upserts"
    } else {
        "bench_appends"
    };
    psql(&format!("DROP TABLE IF EXISTS {table}"))?;
    let storage = work.join(format!("storage-{table}"));
    let _ = std::fs::remove_dir_all(&storage);
    let feed = input.to_string_lossy().to_string();
    let query = move |s: &Session| {
        s.read_stream()
            .format("parquet")
            .schema("id BIGINT, name STRING, value DOUBLE, ts TIMESTAMP")
            .option("maxFilesPerTrigger", "1")
            .load(feed.clone())
    };
    let mut options = vec![
        ("url".to_string(), url()),
        ("dbtable".to_string(), table.to_string()),
        ("sslmode".to_string(), sslmode.to_string()),
    ];
    if update {
        options.push(("merge_keys".into(), "id".into()));
    }
    let p = dp::Pipeline::new().create_sink("db", "postgres", options);
    let p = if update {
        p.update_flow("to_db", "db", query)
    } else {
        p.append_flow("to_db", "db", query)
    };
    let spec = dp::spec::parse_str(
        &format!("name: bench_postgres\nstorage: {}\n", storage.display()),
        &work.join("pipeline.yml"),
    )?;
    let graph = p.build(&spec).map_err(dp::Error::Invalid)?;
    let t = std::time::Instant::now();
    let summary = run(&graph, &RunOptions::new(work, &storage))?;
    let secs = t.elapsed().as_secs_f64();
    let write: f64 = dp::engine::event_log::read_batch_progress(&storage)?
        .iter()
        .filter_map(|v| v["durationMs"]["addBatch"].as_f64())
        .sum::<f64>()
        / 1000.0;
    let held = psql(&format!("SELECT count(*) FROM {table}"))?;
    println!(
        "{}, sslmode {sslmode}: {rows} rows in {} batches: {secs:.2} s, {:.0} rows/s; the sink {write:.2} s ({:.0} rows/s); the table holds {held} rows",
        if update { "update (upsert on id)" } else { "append (COPY)" },
        summary.flows[0].batches,
        rows as f64 / secs,
        rows as f64 / write.max(1e-9),
    );
    Ok(())
}

fn main() -> Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let (rows, keys) = if quick {
        (100_000, 10_000)
    } else {
        (1_000_000, 100_000)
    };
    let root = bench_data::bench_root();
    let input = root.join(format!("pg-{rows}-{keys}"));
    generate(&input, rows, keys, 10)?;
    let work = root.join("work-postgres");
    std::fs::create_dir_all(&work).map_err(|e| dp::Error::io(&work, e))?;
    for sslmode in ["require", "disable"] {
        run_once(&work, &input, false, rows, sslmode)?;
        run_once(&work, &input, true, rows, sslmode)?;
    }
    Ok(())
}
