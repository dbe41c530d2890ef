//! Benchmark events whose event time arrives as a string, as many real
//! feeds carry it: ~90-byte JSON lines such as
//! `{"ts":"2024-01-01T00:00:07","user_id":"u3","service_name":"api","level":"INFO","value":548}`
//! and the same rows as Parquet with `ts` a STRING column. Ten events per
//! second from 2024-01-01T00:00:00; one event in 20 is late by up to 30
//! minutes; 1000 users (another number for other data shapes, see
//! [`ensure_data_with_users`]), 4 services.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use pipelines_core as dp;
use pipelines_core::prelude::*;

/// The events' schema as Spark DDL: `ts` is a string.
pub const DDL: &str = "ts STRING, user_id STRING, service_name STRING, level STRING, value BIGINT";

/// Service names.
pub const SERVICES: [&str; 4] = ["api", "web", "auth", "billing"];
/// Log levels (INFO twice as often).
pub const LEVELS: [&str; 4] = ["INFO", "INFO", "WARN", "ERROR"];

/// 2024-01-01T00:00:00Z in seconds since the epoch.
const BASE_SECS: i64 = 1_704_067_200;

/// The number of distinct users of the default shape.
pub const USERS: u64 = 1000;

/// Event `i`: (seconds since the epoch, user, service, level, value).
pub fn event(i: u64) -> (i64, String, &'static str, &'static str, i64) {
    event_with_users(i, USERS)
}

/// Event `i` of a stream with `users` distinct users (at least 1).
pub fn event_with_users(i: u64, users: u64) -> (i64, String, &'static str, &'static str, i64) {
    let mut secs = BASE_SECS + (i / 10) as i64;
    // One event in 20 arrives up to 30 minutes late.
    if i % 20 == 7 {
        secs -= ((i * 7919) % 1800) as i64;
    }
    let user = format!("u{}", (i * 7919) % users.max(1));
    let service = SERVICES[(i % 4) as usize];
    let level = LEVELS[((i / 3) % 4) as usize];
    let value = ((i * 31) % 1000) as i64;
    (secs, user, service, level, value)
}

/// Seconds since the epoch as `2024-01-01T00:00:07` (no zone, no fraction).
pub fn iso_seconds(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S").to_string())
        .unwrap_or_default()
}

/// The rows of file `f` of `files` holding `events` events in all.
fn rows(f: u64, files: u64, events: u64) -> std::ops::Range<u64> {
    let per_file = events / files;
    f * per_file..(f + 1) * per_file
}

/// Writes `events` events as JSON lines in `files` files; returns the bytes written.
pub fn generate_json(dir: &Path, events: u64, files: u64) -> std::io::Result<u64> {
    generate_json_with_users(dir, events, files, USERS)
}

/// As [`generate_json`], with `users` distinct users.
pub fn generate_json_with_users(
    dir: &Path,
    events: u64,
    files: u64,
    users: u64,
) -> std::io::Result<u64> {
    std::fs::create_dir_all(dir)?;
    let mut bytes = 0u64;
    for f in 0..files {
        let path = dir.join(format!("events-{f:04}.json"));
        let mut w = std::io::BufWriter::new(std::fs::File::create(&path)?);
        for i in rows(f, files, events) {
            let (ts, user, service, level, value) = event_with_users(i, users);
            let line = format!(
                "{{\"ts\":\"{}\",\"user_id\":\"{user}\",\"service_name\":\"{service}\",\"level\":\"{level}\",\"value\":{value}}}\n",
                iso_seconds(ts)
            );
            bytes += line.len() as u64;
            w.write_all(line.as_bytes())?;
        }
        w.flush()?;
    }
    Ok(bytes)
}

/// The events' Arrow schema (`ts` a string).
pub fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Utf8, true),
        Field::new("user_id", DataType::Utf8, true),
        Field::new("service_name", DataType::Utf8, true),
        Field::new("level", DataType::Utf8, true),
        Field::new("value", DataType::Int64, true),
    ]))
}

/// Writes the same events as Parquet files, `ts` kept as a string.
pub fn generate_parquet(dir: &Path, events: u64, files: u64) -> Result<()> {
    generate_parquet_with_users(dir, events, files, USERS)
}

/// As [`generate_parquet`], with `users` distinct users.
pub fn generate_parquet_with_users(
    dir: &Path,
    events: u64,
    files: u64,
    distinct_users: u64,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| dp::Error::io(dir, e))?;
    for f in 0..files {
        let path = dir.join(format!("events-{f:04}.parquet"));
        let file = std::fs::File::create(&path).map_err(|e| dp::Error::io(&path, e))?;
        let mut writer = parquet::arrow::ArrowWriter::try_new(file, schema(), None)?;
        let (mut ts, mut users, mut services, mut levels, mut values) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for i in rows(f, files, events) {
            let (t, u, s, l, v) = event_with_users(i, distinct_users);
            ts.push(iso_seconds(t));
            users.push(u);
            services.push(s);
            levels.push(l);
            values.push(v);
        }
        let batch = RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(StringArray::from(ts)),
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

/// Generates (once) `events` events in `files` files under `data`:
/// `data/json` and `data/parquet`.
pub fn ensure_data(data: &Path, events: u64, files: u64) -> Result<()> {
    ensure_data_with_users(data, events, files, USERS)
}

/// As [`ensure_data`], with `users` distinct users: more users make bigger
/// dictionaries in the Parquet files' `user_id` column chunks (past about
/// 90 000 users per file, parquet's writer falls back to plain strings).
pub fn ensure_data_with_users(data: &Path, events: u64, files: u64, users: u64) -> Result<()> {
    crate::bench_data::ensure_generated(
        data,
        "string-timestamp events",
        events,
        files,
        |dir, events, files| generate_json_with_users(dir, events, files, users),
        |dir, events, files| generate_parquet_with_users(dir, events, files, users),
    )
}

/// A streaming read of the events in `input` (`json` or `parquet`), at most
/// `max_files` files per micro-batch, with `event_time` =
/// `to_timestamp(ts)` added.
pub fn read_events(
    s: &Session,
    input: &Path,
    format: &str,
    max_files: Option<u64>,
) -> Result<DataFrame> {
    crate::bench_data::read_files(s, input, format, DDL, max_files)?
        .with_column("event_time", "to_timestamp(ts)")
}
