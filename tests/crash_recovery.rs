//! Crash recovery, end to end, with real processes.
//!
//! This test binary is also the pipeline binary: with `PIPELINE_CHILD=1` it
//! runs `pipelines::main()`. The test kills the pipeline (SIGKILL, through
//! `PIPELINES_FAULT`) after the offsets write, after the sink's data files
//! are written but before its manifest entry, and after the sink write but
//! before the commit; restarts it; and checks the table holds every input
//! row exactly once. A second, stateful flow (a windowed count with a
//! watermark, in append mode) is killed the same ways, also between its
//! state write and its commit; after the restart its table holds exactly
//! the windows Spark emits for the same input (tests/stateful/tumbling_append),
//! each once. A third flow copies the input into a Delta table and is
//! killed just before its Delta commit (no row lost) and between the Delta
//! commit and the checkpoint commit (no row duplicated: the replay finds its
//! Delta transaction version). It also checks that a changed query on an
//! old checkpoint is refused with the diff and the full-refresh hint, and
//! that a second run started while one runs is refused by the lock. Last,
//! a kill -9 loop: 20 rounds of new input and a run killed at a random
//! moment, over JSON → Delta → a merge-keyed Delta sink, checked with the
//! independent `deltalake` reader. And two AUTO CDC flows (SCD 1 and 2
//! from one change feed) killed at five points of their batches give, after
//! a restart, the tables of a run that was not killed; a flow appending
//! into PostgreSQL, killed before and after its database commit, leaves
//! every row in the table once. The event log table, killed at three
//! points of its copy and once mid-batch, holds every logged event once and
//! the event of every committed batch. With the three copying flows'
//! checkpoints in object storage (a moto S3 server process), killed at four
//! points, the restarted run leaves the same tables; and a pipeline whose
//! whole storage root and Delta sink are in a bucket, killed at six points
//! of its batches and its event log copy, ends with the tables of a clean
//! run, read by the `deltalake` Python package from the same endpoint.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use arrow::array::{Array, Int64Array};
use pipelines as dp;
use pipelines::engine::storage::Location;
use pipelines::prelude::*;

const FILES: usize = 6;
const ROWS_PER_FILE: usize = 10;

fn input_dir() -> String {
    std::env::var("CRASH_INPUT").unwrap_or_else(|_| "input".to_string())
}

/// Every input row, one file per micro-batch, into a Parquet table.
#[dp::append_flow(target = "copied")]
fn copy_events(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("id BIGINT, name STRING")
        .option("maxFilesPerTrigger", "1")
        .load(input_dir())?
        .select_expr(["id", "upper(name) AS name"])
}

/// A windowed count with a watermark: stateful, append mode.
#[dp::append_flow(target = "counts")]
fn window_counts(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("ts TIMESTAMP, user STRING, service STRING, level STRING, value BIGINT")
        .option("maxFilesPerTrigger", "1")
        .load("events")?
        .with_watermark("ts", "15 minutes")?
        .group_by([tumbling_window(col("ts"), "10 minutes")])
        .count()
}

/// The same rows into a Delta table: exactly once through Delta's
/// application transactions (reads the fixed `input` directory, so the
/// changed-query check below concerns `copy_events` only).
#[dp::append_flow(target = "copied_delta")]
fn copy_to_delta(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("id BIGINT, name STRING")
        .option("maxFilesPerTrigger", "1")
        .load("input")?
        .select_expr(["id", "upper(name) AS name"])
}

/// A change feed, one file per micro-batch, out of order across files.
#[dp::temporary_view]
fn cdc_feed(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("id BIGINT, name STRING, op STRING, seq BIGINT")
        .option("maxFilesPerTrigger", "1")
        .load("cdc")
}

fn child_main() -> std::process::ExitCode {
    let parquet = || dp::TableOptions {
        format: Some("parquet".into()),
        ..Default::default()
    };
    let mut p = dp::Pipeline::from_registry();
    // The PostgreSQL test's flow: the input rows appended into its table.
    if let Ok(table) = std::env::var("CRASH_PG_TABLE") {
        p = p
            .create_sink(
                "pg_copy",
                "postgres",
                [("url", pg_url()), ("dbtable", table)],
            )
            .append_flow("copy_to_pg", "pg_copy", |s: &Session| {
                s.read_stream()
                    .format("json")
                    .schema("id BIGINT, name STRING")
                    .option("maxFilesPerTrigger", "1")
                    .load("input")
            });
    }
    p.create_streaming_table("copied", parquet())
        .create_streaming_table("counts", parquet())
        .create_streaming_table("copied_delta", dp::TableOptions::default())
        .create_streaming_table("customers", dp::TableOptions::default())
        .create_streaming_table("customers_history", dp::TableOptions::default())
        .create_auto_cdc_flow(cdc("customers", "apply_cdc", 1))
        .create_auto_cdc_flow(cdc("customers_history", "apply_cdc_history", 2))
        .main()
}

fn cdc(target: &str, name: &str, scd: u8) -> dp::cdc::AutoCdc {
    dp::cdc::AutoCdc::new(target, "cdc_feed")
        .name(name)
        .keys(["id"])
        .sequence_by("seq")
        .apply_as_deletes("op = 'DELETE'")
        .except_column_list(["op"])
        .stored_as_scd_type(scd)
}

/// The change feed: 8 events per file over 7 keys, sequences out of order
/// across files, every fifth a delete: (file, key, name, op, seq).
fn cdc_events() -> Vec<(usize, usize, String, &'static str, usize)> {
    let mut out = Vec::new();
    for f in 0..FILES {
        for r in 0..8 {
            let key = (f * 3 + r) % 7;
            let seq = ((f * 8 + r) * 37) % 101;
            let op = if (f + r) % 5 == 0 { "DELETE" } else { "UPSERT" };
            out.push((f, key, format!("n{f}_{r}"), op, seq));
        }
    }
    out
}

/// The SCD 1 table by its rule: each key's event with the highest
/// sequence, absent when it is a delete (`id|name|seq`).
fn expected_scd1() -> Vec<String> {
    let mut latest: BTreeMap<usize, (usize, String, &str)> = BTreeMap::new();
    for (_, key, name, op, seq) in cdc_events() {
        if latest.get(&key).is_none_or(|(s, _, _)| seq > *s) {
            latest.insert(key, (seq, name, op));
        }
    }
    let mut out: Vec<String> = latest
        .into_iter()
        .filter(|(_, (_, _, op))| *op != "DELETE")
        .map(|(k, (seq, name, _))| format!("{k}|{name}|{seq}"))
        .collect();
    out.sort();
    out
}

fn write_cdc(dir: &Path) {
    let cdc = dir.join("cdc");
    std::fs::create_dir_all(&cdc).unwrap();
    let events = cdc_events();
    for f in 0..FILES {
        let mut text = String::new();
        for (_, key, name, op, seq) in events.iter().filter(|e| e.0 == f) {
            text.push_str(&format!(
                "{{\"id\":{key},\"name\":\"{name}\",\"op\":\"{op}\",\"seq\":{seq}}}\n"
            ));
        }
        std::fs::write(cdc.join(format!("part-{f:04}.json")), text).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(15));
    }
}

/// The rows of a Delta table, rendered and sorted.
fn delta_lines(dir: &Path, name: &str) -> Vec<String> {
    let table = dir.join("storage/tables").join(name);
    let options = arrow::util::display::FormatOptions::default().with_null("null");
    let mut out = Vec::new();
    for b in dp::delta::read_table(&table).unwrap().unwrap_or_default() {
        for i in 0..b.num_rows() {
            let row: Vec<String> = b
                .columns()
                .iter()
                .map(|c| {
                    arrow::util::display::ArrayFormatter::try_new(c.as_ref(), &options)
                        .unwrap()
                        .value(i)
                        .to_string()
                })
                .collect();
            out.push(row.join("|"));
        }
    }
    out.sort();
    out
}

fn pg_url() -> String {
    std::env::var("PIPELINES_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

fn psql(sql: &str) -> Vec<String> {
    let out = Command::new("psql")
        .args([pg_url().as_str(), "-v", "ON_ERROR_STOP=1", "-At", "-c", sql])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "psql `{sql}`: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Killed at `point` while appending into PostgreSQL (before the database
/// commit, or between it and the checkpoint's commit), restarted: every
/// input row is in the table exactly once.
fn pg_crash_then_recover(point: &str) -> bool {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_inputs(dir);
    let table = format!("crash_{}", point.replace(['/', ':'], "_"));
    psql(&format!("DROP TABLE IF EXISTS {table}"));
    let env = [("CRASH_PG_TABLE", table.as_str())];
    let crashed = run_child(dir, Some(point), &env, &["run"]);
    let killed = String::from_utf8_lossy(&crashed.stderr).contains("PIPELINES_FAULT: killing");
    let recovered = run_child(dir, None, &env, &["run"]);
    let counts = psql(&format!(
        "SELECT count(*), count(DISTINCT id), min(id), max(id) FROM {table}"
    ));
    let want = format!(
        "{}|{}|0|{}",
        FILES * ROWS_PER_FILE,
        FILES * ROWS_PER_FILE,
        (FILES - 1) * 100 + ROWS_PER_FILE - 1
    );
    check(
        &format!("PostgreSQL killed at {point}, restart: every row exactly once"),
        killed && recovered.status.success() && counts == [want.clone()],
        || {
            format!(
                "killed: {killed}\nrecovery stderr:\n{}\ncounts: {counts:?}, want {want}",
                String::from_utf8_lossy(&recovered.stderr)
            )
        },
    )
}

/// The AUTO CDC tables of a run with no crash.
fn clean_cdc_tables() -> (Vec<String>, Vec<String>) {
    let tmp = tempfile::tempdir().unwrap();
    write_inputs(tmp.path());
    let out = run_child(tmp.path(), None, &[], &["run"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        delta_lines(tmp.path(), "customers"),
        delta_lines(tmp.path(), "customers_history"),
    )
}

/// Killed at `point` in an AUTO CDC flow and restarted: both CDC tables
/// equal a clean run's.
fn cdc_crash_then_recover(point: &str, clean: &(Vec<String>, Vec<String>)) -> bool {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_inputs(dir);
    let crashed = run_child(dir, Some(point), &[], &["run"]);
    let killed = String::from_utf8_lossy(&crashed.stderr).contains("PIPELINES_FAULT: killing");
    let recovered = run_child(dir, None, &[], &["run"]);
    let scd1 = delta_lines(dir, "customers");
    let scd2 = delta_lines(dir, "customers_history");
    check(
        &format!("AUTO CDC killed at {point}, restart: the tables of a clean run"),
        killed && recovered.status.success() && scd1 == clean.0 && scd2 == clean.1,
        || {
            format!(
                "killed: {killed}\nrecovery stderr:\n{}\nSCD 1: {scd1:?}\nclean: {:?}\nSCD 2: {scd2:?}\nclean: {:?}",
                String::from_utf8_lossy(&recovered.stderr),
                clean.0,
                clean.1
            )
        },
    )
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stateful/tumbling_append")
}

/// Copies the stateful fixture's input files, in order of modification time.
fn write_events(dir: &Path) {
    let src = fixture_dir().join("input");
    let dst = dir.join("events");
    std::fs::create_dir_all(&dst).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    let base = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for (i, n) in names.iter().enumerate() {
        std::fs::copy(src.join(n), dst.join(n)).unwrap();
        let f = std::fs::File::options()
            .write(true)
            .open(dst.join(n))
            .unwrap();
        f.set_modified(base + std::time::Duration::from_secs(i as u64 * 10))
            .unwrap();
    }
}

/// The windows Spark emitted for the fixture, as `start|end|count`.
fn expected_windows() -> Vec<String> {
    let text = std::fs::read_to_string(fixture_dir().join("expected.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut out = Vec::new();
    for b in v["batches"].as_array().unwrap() {
        for r in b["rows"].as_array().unwrap() {
            out.push(format!(
                "{}|{}|{}",
                r["window"]["start"].as_str().unwrap(),
                r["window"]["end"].as_str().unwrap(),
                r["count"]
            ));
        }
    }
    out.sort();
    out
}

/// The tables directory of the pipeline run in `dir` (storage `./storage`).
fn local_tables(dir: &Path) -> Location {
    Location::from(dir.join("storage/tables"))
}

/// The rows of table `name` in `tables` (a local directory or a prefix in
/// object storage), read through its manifest (committed files only).
fn table_batches(tables: &Location, name: &str) -> Vec<arrow::record_batch::RecordBatch> {
    let files = pipelines::engine::sinks::committed_files(tables.join(name))
        .unwrap()
        .unwrap_or_default();
    let mut out = Vec::new();
    for f in files {
        let bytes = bytes::Bytes::from(f.path.read().unwrap().unwrap());
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .build()
            .unwrap();
        out.extend(reader.map(|b| b.unwrap()));
    }
    out
}

/// The committed rows of the `counts` table, as `start|end|count`.
fn table_windows(dir: &Path) -> Vec<String> {
    windows_in(&local_tables(dir))
}

/// The committed rows of the `counts` table in `tables`, as `start|end|count`.
fn windows_in(tables: &Location) -> Vec<String> {
    use arrow::array::{AsArray, StructArray};
    use arrow::datatypes::TimestampMicrosecondType;
    let fmt = |us: i64| {
        chrono::DateTime::from_timestamp_micros(us)
            .unwrap()
            .naive_utc()
            .format("%Y-%m-%d %H:%M:%S")
            .to_string()
    };
    let mut out = Vec::new();
    for batch in table_batches(tables, "counts") {
        let w = batch.column_by_name("window").unwrap();
        let w = w.as_any().downcast_ref::<StructArray>().unwrap();
        let start = w.column(0).as_primitive::<TimestampMicrosecondType>();
        let end = w.column(1).as_primitive::<TimestampMicrosecondType>();
        let n = batch.column_by_name("count").unwrap();
        let n = n.as_any().downcast_ref::<Int64Array>().unwrap();
        for i in 0..batch.num_rows() {
            out.push(format!(
                "{}|{}|{}",
                fmt(start.value(i)),
                fmt(end.value(i)),
                n.value(i)
            ));
        }
    }
    out.sort();
    out
}

fn write_inputs(dir: &Path) {
    let input = dir.join("input");
    std::fs::create_dir_all(&input).unwrap();
    for f in 0..FILES {
        let mut text = String::new();
        for r in 0..ROWS_PER_FILE {
            let id = f * 100 + r;
            text.push_str(&format!("{{\"id\":{id},\"name\":\"n{id}\"}}\n"));
        }
        std::fs::write(input.join(format!("part-{f:04}.json")), text).unwrap();
        // Distinct modification times keep the file order stable.
        std::thread::sleep(std::time::Duration::from_millis(15));
    }
    std::fs::write(
        dir.join("pipeline.yml"),
        "name: crash\nstorage: ./storage\n",
    )
    .unwrap();
    write_events(dir);
    write_cdc(dir);
}

fn run_child(dir: &Path, fault: Option<&str>, extra_env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.current_dir(dir).env("PIPELINE_CHILD", "1").args(args);
    match fault {
        Some(f) => cmd.env("PIPELINES_FAULT", f),
        None => cmd.env_remove("PIPELINES_FAULT"),
    };
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// Ids in the table, read through its manifest (committed files only).
fn table_ids(dir: &Path) -> BTreeMap<i64, usize> {
    ids_in(&local_tables(dir))
}

/// Ids in the parquet table `copied` in `tables`, with their counts.
fn ids_in(tables: &Location) -> BTreeMap<i64, usize> {
    let mut ids = BTreeMap::new();
    for batch in table_batches(tables, "copied") {
        let col = batch.column_by_name("id").unwrap();
        let col = col.as_any().downcast_ref::<Int64Array>().unwrap();
        for i in 0..col.len() {
            *ids.entry(col.value(i)).or_insert(0) += 1;
        }
    }
    ids
}

/// Ids in the Delta table `copied_delta` (its latest snapshot).
fn delta_ids(dir: &Path) -> BTreeMap<i64, usize> {
    delta_ids_in(&local_tables(dir))
}

/// Ids in the Delta table `copied_delta` in `tables` (its latest snapshot).
fn delta_ids_in(tables: &Location) -> BTreeMap<i64, usize> {
    let mut ids = BTreeMap::new();
    let table = tables.join("copied_delta");
    for batch in dp::delta::read_table(&table).unwrap().unwrap_or_default() {
        let col = batch.column_by_name("id").unwrap();
        let col = col.as_any().downcast_ref::<Int64Array>().unwrap();
        for i in 0..col.len() {
            *ids.entry(col.value(i)).or_insert(0) += 1;
        }
    }
    ids
}

fn expected_ids() -> BTreeMap<i64, usize> {
    (0..FILES)
        .flat_map(|f| (0..ROWS_PER_FILE).map(move |r| ((f * 100 + r) as i64, 1)))
        .collect()
}

fn check(name: &str, ok: bool, detail: impl FnOnce() -> String) -> bool {
    if ok {
        println!("test {name} ... ok");
    } else {
        println!("test {name} ... FAILED\n{}", detail());
    }
    ok
}

fn crash_then_recover(point: &str) -> bool {
    let tmp = tempfile::tempdir().unwrap();
    let dir: PathBuf = tmp.path().to_path_buf();
    write_inputs(&dir);
    let crashed = run_child(&dir, Some(point), &[], &["run"]);
    let killed = !crashed.status.success();
    let recovered = run_child(&dir, None, &[], &["run"]);
    let ids = table_ids(&dir);
    let windows = table_windows(&dir);
    let delta = delta_ids(&dir);
    let stdout = String::from_utf8_lossy(&recovered.stdout).to_string();
    check(
        &format!("crash at {point}, restart: every row exactly once, every window once"),
        killed
            && recovered.status.success()
            && ids == expected_ids()
            && windows == expected_windows()
            && delta == expected_ids()
            && stdout.contains("replayed"),
        || {
            format!(
                "crash run status {:?}, stderr:\n{}\nrecovery status {:?}, stdout:\n{}\nstderr:\n{}\nids: {ids:?}\ndelta ids: {delta:?}\nwindows: {windows:?}\nexpected windows: {:?}",
                crashed.status,
                String::from_utf8_lossy(&crashed.stderr),
                recovered.status,
                stdout,
                String::from_utf8_lossy(&recovered.stderr),
                expected_windows()
            )
        },
    )
}

/// The object-storage server of the S3 crash tests (moto, a process on a
/// loopback port); `None` when moto is not installed and
/// `PIPELINES_REQUIRE_S3` is not set.
fn s3_server() -> Option<&'static pipelines_test_support::s3::S3Server> {
    let server = pipelines_test_support::s3::S3Server::shared();
    assert!(
        server.is_some() || std::env::var_os("PIPELINES_REQUIRE_S3").is_none(),
        "PIPELINES_REQUIRE_S3 is set but no Python with moto.server was found (PIPELINES_PYTHON)"
    );
    // This process reads the results (our reader, the Python one) from the
    // same server; it is single-threaded here.
    for (k, v) in server.iter().flat_map(|s| s.env()) {
        std::env::set_var(k, v);
    }
    server
}

/// The kill-loop pipeline (JSON files → Delta `raw` → a running count per
/// key MERGEd into a Delta sink) with its storage root and its sink in a
/// bucket: killed at `point`, restarted, both tables hold what a clean run
/// writes (every input row once, the exact counts), read by the `deltalake`
/// Python package from the same endpoint, and the event log table in the
/// bucket holds each logged event once.
fn s3_root_crash_then_recover(
    server: &pipelines_test_support::s3::S3Server,
    n: usize,
    point: &str,
) -> bool {
    let tmp = tempfile::tempdir().unwrap();
    let dir: PathBuf = tmp.path().to_path_buf();
    let bucket = format!("root-{n}");
    server.create_bucket(&bucket);
    std::fs::write(
        dir.join("pipeline.yml"),
        format!("name: s3_root\nstorage: s3://{bucket}/storage\n"),
    )
    .unwrap();
    let input = dir.join("loop_input");
    std::fs::create_dir_all(&input).unwrap();
    let mut counts: BTreeMap<String, i64> = BTreeMap::new();
    for f in 0..4 {
        let mut text = String::new();
        for r in 0..10 {
            let id = f * 10 + r;
            let k = format!("k{}", (id * 7 + f) % 5);
            *counts.entry(k.clone()).or_default() += 1;
            text.push_str(&format!("{{\"id\":{id},\"k\":\"{k}\"}}\n"));
        }
        std::fs::write(input.join(format!("part-{f}.json")), text).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(15));
    }
    let sink = format!("s3://{bucket}/out/key_counts");
    let mut env: Vec<(&str, String)> = server.env();
    env.push(("LOOP_SINK", sink.clone()));
    // The kill-loop pipeline (over `run_child`'s default child).
    env.push(("PIPELINE_CHILD", "kill_loop".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let run = |fault: Option<&str>| run_child(&dir, fault, &env, &["run"]);
    let crashed = run(Some(point));
    let killed = String::from_utf8_lossy(&crashed.stderr).contains("PIPELINES_FAULT: killing");
    let recovered = run(None);
    let raw = PathBuf::from(format!("s3://{bucket}/storage/tables/raw"));
    let events = PathBuf::from(format!("s3://{bucket}/storage/system/event_log"));
    let sink_path = PathBuf::from(&sink);
    let read = python_read(&[raw.clone(), sink_path.clone(), events.clone()]);
    let rows = |p: &Path| -> Vec<serde_json::Value> {
        read.as_ref()
            .and_then(|v| v[p.to_string_lossy().as_ref()]["rows"].as_array().cloned())
            .unwrap_or_default()
    };
    let mut raw_ids = BTreeMap::new();
    for r in rows(&raw) {
        *raw_ids.entry(r[0].as_i64().unwrap()).or_insert(0usize) += 1;
    }
    let sink_counts: BTreeMap<String, i64> = rows(&sink_path)
        .iter()
        .map(|r| (r[0].as_str().unwrap().to_string(), r[1].as_i64().unwrap()))
        .collect();
    let expected_ids: BTreeMap<i64, usize> = (0..40).map(|i| (i, 1)).collect();
    let storage =
        dp::engine::storage::Location::parse(&format!("s3://{bucket}/storage"), &dir).unwrap();
    let logged = dp::engine::event_log::read_events(dp::engine::event_log::log_location(&storage))
        .map(|e| e.len())
        .unwrap_or(0);
    let mut in_table: Vec<u64> = rows(&events)
        .iter()
        .map(|r| r[1].as_u64().unwrap())
        .collect();
    in_table.sort_unstable();
    let once = in_table.windows(2).all(|w| w[0] < w[1]);
    let local = dir.join("storage").exists();
    check(
        &format!("storage root on s3://, killed at {point}, restart: both Delta tables as a clean run's, read by deltalake (Python) from the same endpoint; the event log table holds each event once"),
        killed
            && recovered.status.success()
            && read.is_some()
            && raw_ids == expected_ids
            && sink_counts == counts
            && logged > 0
            && in_table.len() == logged
            && once
            && !local,
        || {
            format!(
                "crash run: {:?}\n{}\nrecovery: {:?}\n{}\n{}\nraw ids: {raw_ids:?}\nsink: {sink_counts:?}\nexpected: {counts:?}\nevents logged {logged}, in the table {}, once {once}; local storage {local}",
                crashed.status,
                String::from_utf8_lossy(&crashed.stderr),
                recovered.status,
                String::from_utf8_lossy(&recovered.stdout),
                String::from_utf8_lossy(&recovered.stderr),
                in_table.len(),
            )
        },
    )
}

/// The crash test with the whole storage root in a bucket
/// (`storage: s3://…`): the Parquet tables `copied` and `counts` (file
/// sinks whose data files are uploaded, then listed in a manifest entry put
/// once), the Delta table and every checkpoint are objects. Killed at
/// `point`, restarted: every table as a clean run's, nothing on local disk.
fn s3_parquet_crash_then_recover(
    server: &pipelines_test_support::s3::S3Server,
    n: usize,
    point: &str,
) -> bool {
    let tmp = tempfile::tempdir().unwrap();
    let dir: PathBuf = tmp.path().to_path_buf();
    write_inputs(&dir);
    let bucket = format!("parquet-{n}");
    server.create_bucket(&bucket);
    std::fs::write(
        dir.join("pipeline.yml"),
        format!("name: crash\nstorage: s3://{bucket}/storage\n"),
    )
    .unwrap();
    let env: Vec<(&str, String)> = server.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let crashed = run_child(&dir, Some(point), &env, &["run"]);
    let killed = String::from_utf8_lossy(&crashed.stderr).contains("PIPELINES_FAULT: killing");
    let recovered = run_child(&dir, None, &env, &["run"]);
    let tables = Location::parse(&format!("s3://{bucket}/storage/tables"), &dir).unwrap();
    let ids = ids_in(&tables);
    let windows = windows_in(&tables);
    let delta = delta_ids_in(&tables);
    let stdout = String::from_utf8_lossy(&recovered.stdout).to_string();
    let local = dir.join("storage").exists();
    check(
        &format!(
            "storage root on s3://, Parquet tables there, crash at {point}, restart: every row once, every window once"
        ),
        killed
            && recovered.status.success()
            && ids == expected_ids()
            && windows == expected_windows()
            && delta == expected_ids()
            && stdout.contains("replayed")
            && !local,
        || {
            format!(
                "crash run status {:?}, stderr:\n{}\nrecovery status {:?}, stdout:\n{}\nstderr:\n{}\nids: {ids:?}\ndelta ids: {delta:?}\nwindows: {windows:?}\nlocal storage: {local}",
                crashed.status,
                String::from_utf8_lossy(&crashed.stderr),
                recovered.status,
                stdout,
                String::from_utf8_lossy(&recovered.stderr),
            )
        },
    )
}

/// The crash test with the checkpoints of the three copied flows in a
/// bucket (`flows.<f>.options.checkpointLocation: s3://...`): killed at
/// `point`, restarted, every table as a clean run's; the restart takes the
/// dead run's lease at once.
fn s3_crash_then_recover(
    server: &pipelines_test_support::s3::S3Server,
    n: usize,
    point: &str,
) -> bool {
    let tmp = tempfile::tempdir().unwrap();
    let dir: PathBuf = tmp.path().to_path_buf();
    write_inputs(&dir);
    let bucket = format!("crash-{n}");
    server.create_bucket(&bucket);
    let mut yml = String::from("name: crash\nstorage: ./storage\nflows:\n");
    for flow in ["copy_events", "window_counts", "copy_to_delta"] {
        yml.push_str(&format!(
            "  {flow}:\n    options:\n      checkpointLocation: s3://{bucket}/checkpoints/{flow}\n"
        ));
    }
    std::fs::write(dir.join("pipeline.yml"), yml).unwrap();
    let env: Vec<(&str, String)> = server.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let crashed = run_child(&dir, Some(point), &env, &["run"]);
    let killed = String::from_utf8_lossy(&crashed.stderr).contains("PIPELINES_FAULT: killing");
    let recovered = run_child(&dir, None, &env, &["run"]);
    let ids = table_ids(&dir);
    let windows = table_windows(&dir);
    let delta = delta_ids(&dir);
    let stdout = String::from_utf8_lossy(&recovered.stdout).to_string();
    let local = ["copy_events", "window_counts", "copy_to_delta"]
        .iter()
        .filter(|f| dir.join("storage/checkpoints").join(f).exists())
        .count();
    check(
        &format!(
            "checkpoints on s3://, crash at {point}, restart: every row once, every window once"
        ),
        killed
            && recovered.status.success()
            && ids == expected_ids()
            && windows == expected_windows()
            && delta == expected_ids()
            && stdout.contains("replayed")
            && local == 0,
        || {
            format!(
                "crash run status {:?}, stderr:\n{}\nrecovery status {:?}, stdout:\n{}\nstderr:\n{}\nids: {ids:?}\ndelta ids: {delta:?}\nwindows: {windows:?}\nlocal checkpoints: {local}",
                crashed.status,
                String::from_utf8_lossy(&crashed.stderr),
                recovered.status,
                stdout,
                String::from_utf8_lossy(&recovered.stderr),
            )
        },
    )
}

fn changed_query_is_refused() -> bool {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    write_inputs(&dir);
    let first = run_child(&dir, None, &[], &["run"]);
    std::fs::create_dir_all(dir.join("input2")).unwrap();
    let second = run_child(&dir, None, &[("CRASH_INPUT", "input2")], &["run"]);
    let stderr = String::from_utf8_lossy(&second.stderr).to_string();
    let ok_refused = first.status.success()
        && second.status.code() == Some(1)
        && stderr.contains("error: flow `copy_events` (tests/crash_recovery.rs:")
        && stderr.contains("its query changed since the checkpoint at")
        && stderr.contains("json source `input` → json source `input2`")
        && stderr.contains("help: run with `--full-refresh copied` to reset the checkpoint and the data of `copied`");
    let a = check(
        "a changed query is refused with the diff and the hint",
        ok_refused,
        || {
            format!(
                "first: {:?}\nsecond: {:?}\nstderr:\n{stderr}",
                first.status, second.status
            )
        },
    );
    // The hint works: a full refresh starts over from the new input (empty).
    let third = run_child(
        &dir,
        None,
        &[("CRASH_INPUT", "input2")],
        &["run", "--full-refresh", "copied"],
    );
    let b = check(
        "--full-refresh resets the flow",
        third.status.success() && table_ids(&dir).is_empty(),
        || {
            format!(
                "status {:?}\nstdout:\n{}\nstderr:\n{}",
                third.status,
                String::from_utf8_lossy(&third.stdout),
                String::from_utf8_lossy(&third.stderr)
            )
        },
    );
    a && b
}

fn rerun_reads_nothing_twice() -> bool {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    write_inputs(&dir);
    let first = run_child(&dir, None, &[], &["run"]);
    let second = run_child(&dir, None, &[], &["run"]);
    let out1 = String::from_utf8_lossy(&first.stdout).to_string();
    let out2 = String::from_utf8_lossy(&second.stdout).to_string();
    check(
        "a second run reads nothing again",
        first.status.success()
            && second.status.success()
            && out1.contains("copy_events")
            && out1.contains("6 batches, 60 rows in, 60 rows out")
            && out2.contains("0 batches, 0 rows in, 0 rows out")
            && table_ids(&dir) == expected_ids()
            && delta_ids(&dir) == expected_ids(),
        || {
            format!(
                "first:\n{out1}\n{}\nsecond:\n{out2}",
                String::from_utf8_lossy(&first.stderr)
            )
        },
    )
}

/// Two runs at once on one storage directory: the second stops at once with
/// the lock error naming the first; the first goes on; every row is in the
/// table exactly once.
fn two_runs_at_once_are_refused() -> bool {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    write_inputs(&dir);
    let mut first = Command::new(std::env::current_exe().unwrap())
        .current_dir(&dir)
        .env("PIPELINE_CHILD", "1")
        .env_remove("PIPELINES_FAULT")
        .args(["run", "--continuous"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the first run holds its flows' locks.
    let lock = dir.join("storage/checkpoints/copy_events.lock");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::read_to_string(&lock).map_or(true, |t| t.is_empty())
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let second = run_child(&dir, None, &[], &["run"]);
    let err2 = String::from_utf8_lossy(&second.stderr).to_string();
    let holder = format!("is in use by another run (pid {} on ", first.id());
    // Stop the first run (SIGTERM: it stops at a batch boundary).
    let _ = Command::new("kill")
        .args(["-TERM", &first.id().to_string()])
        .status();
    let stopped = first.wait().unwrap();
    // A third run finishes what is left; nothing is written twice.
    let third = run_child(&dir, None, &[], &["run"]);
    check(
        "a second run at once is refused; every row once",
        !second.status.success()
            && err2.contains(&holder)
            && stopped.success()
            && third.status.success()
            && table_ids(&dir) == expected_ids()
            && delta_ids(&dir) == expected_ids(),
        || {
            format!(
                "second run: {:?}\n{err2}\nfirst run: {stopped:?}\nthird run:\n{}{}",
                second.status,
                String::from_utf8_lossy(&third.stdout),
                String::from_utf8_lossy(&third.stderr)
            )
        },
    )
}

/// The kill loop's pipeline: JSON files → Delta table `raw` (one file per
/// batch) → a running count per key, upserted into a Delta sink by
/// `merge_keys` in update mode.
fn loop_child_main() -> std::process::ExitCode {
    dp::Pipeline::new()
        .table("raw", |s| {
            s.read_stream()
                .format("json")
                .schema("id BIGINT, k STRING")
                .option("maxFilesPerTrigger", "1")
                .load("loop_input")
        })
        .update_flow("key_counts", "key_counts_sink", |s| {
            s.read_stream_table("raw")?.group_by([col("k")]).count()
        })
        .create_sink(
            "key_counts_sink",
            "delta",
            [
                (
                    "path",
                    std::env::var("LOOP_SINK").unwrap_or_else(|_| "out/key_counts".into()),
                ),
                ("merge_keys", "k".into()),
            ],
        )
        .main()
}

/// `{"<table>": {"columns": [...], "rows": [[...], ...]}}` read by the
/// `deltalake` Python package (tests/delta/read_delta.py); None without it.
fn python_read(tables: &[PathBuf]) -> Option<serde_json::Value> {
    let python = std::env::var("PIPELINES_PYTHON").ok()?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/delta/read_delta.py");
    let out = Command::new(python)
        .arg(script)
        .args(tables)
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "read_delta.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).ok()
}

/// Checks the event log table against the event log file under `dir`:
/// each logged event in the table exactly once, and a `flow_progress`
/// event for every batch each of `flows` committed. Ok(the reader used).
fn event_log_complete(dir: &Path, flows: &[&str]) -> Result<String, String> {
    let events = dp::engine::event_log::read_events(dir.join("storage/event_log/events.jsonl"))
        .map_err(|e| e.to_string())?;
    let table = dir.join("storage/system/event_log");
    // (sequence, event_type, flow, batch) per row of the table.
    type Row = (u64, String, Option<String>, Option<u64>);
    let (rows, reader): (Vec<Row>, &str) = match python_read(std::slice::from_ref(&table)) {
        Some(v) => (
            v[table.to_string_lossy().as_ref()]["rows"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|r| {
                    (
                        r[1].as_u64().unwrap(),
                        r[5].as_str().unwrap().to_string(),
                        r[3][2].as_str().map(str::to_string),
                        r[3][4].as_u64(),
                    )
                })
                .collect(),
            "deltalake (Python)",
        ),
        None => {
            let mut rows = Vec::new();
            for b in dp::delta::read_table(&table)
                .map_err(|e| e.to_string())?
                .unwrap_or_default()
            {
                let seq = b
                    .column(1)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .clone();
                let kind = b
                    .column(5)
                    .as_any()
                    .downcast_ref::<arrow::array::StringArray>()
                    .unwrap()
                    .clone();
                let origin = b
                    .column(3)
                    .as_any()
                    .downcast_ref::<arrow::array::StructArray>()
                    .unwrap()
                    .clone();
                let flow = origin
                    .column(2)
                    .as_any()
                    .downcast_ref::<arrow::array::StringArray>()
                    .unwrap()
                    .clone();
                let batch = origin
                    .column(4)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .clone();
                for i in 0..b.num_rows() {
                    rows.push((
                        seq.value(i) as u64,
                        kind.value(i).to_string(),
                        flow.is_valid(i).then(|| flow.value(i).to_string()),
                        batch.is_valid(i).then(|| batch.value(i) as u64),
                    ));
                }
            }
            (rows, "our Delta reader (no Python deltalake)")
        }
    };
    let mut in_table: Vec<u64> = rows.iter().map(|r| r.0).collect();
    in_table.sort_unstable();
    let logged: Vec<u64> = events.iter().map(|e| e.sequence).collect();
    if in_table != logged {
        return Err(format!(
            "the table's sequences {in_table:?}\ndiffer from the log's {logged:?}"
        ));
    }
    for flow in flows {
        let commits = dir.join("storage/checkpoints").join(flow).join("commits");
        for entry in
            std::fs::read_dir(&commits).map_err(|e| format!("{}: {e}", commits.display()))?
        {
            let name = entry.unwrap().file_name().to_string_lossy().to_string();
            let Ok(n) = name.parse::<u64>() else { continue };
            let found = rows
                .iter()
                .any(|r| r.1 == "flow_progress" && r.2.as_deref() == Some(*flow) && r.3 == Some(n));
            if !found {
                return Err(format!(
                    "no flow_progress event of committed batch {n} of `{flow}`"
                ));
            }
        }
    }
    Ok(reader.to_string())
}

/// Killed while copying the event log into its table (before the append,
/// before the table's commit, between it and the copy's checkpoint commit)
/// and restarted: the table holds every logged event once.
fn event_log_crash_then_recover(point: &str) -> bool {
    let tmp = tempfile::tempdir().unwrap();
    let dir: PathBuf = tmp.path().to_path_buf();
    write_inputs(&dir);
    let crashed = run_child(&dir, Some(point), &[], &["run"]);
    let killed = !crashed.status.success();
    let recovered = run_child(&dir, None, &[], &["run"]);
    let result = event_log_complete(&dir, &["copy_events", "window_counts", "copy_to_delta"]);
    check(
        &format!(
            "event log table killed at {point}, restart: every event once, every committed batch's event ({})",
            result.as_deref().unwrap_or("-")
        ),
        killed && recovered.status.success() && result.is_ok(),
        || {
            format!(
                "killed {killed} ({})\nrecovery {:?}: {}\n{result:?}",
                String::from_utf8_lossy(&crashed.stderr),
                recovered.status,
                String::from_utf8_lossy(&recovered.stderr)
            )
        },
    )
}

/// 20 rounds of: new input files, a run killed with SIGKILL at a random
/// moment; then a run to the end. The Delta table holds every input row
/// exactly once and the merge-keyed sink the exact count per key, as read
/// by the independent `deltalake` reader (our own reader without it).
fn kill_loop_over_delta_and_a_merge_sink() -> bool {
    const ROUNDS: u64 = 20;
    let tmp = tempfile::tempdir().unwrap();
    let dir: PathBuf = tmp.path().to_path_buf();
    std::fs::write(
        dir.join("pipeline.yml"),
        "name: kill_loop\nstorage: ./storage\n",
    )
    .unwrap();
    let input = dir.join("loop_input");
    std::fs::create_dir_all(&input).unwrap();
    let mut rng: u64 = 0x853C_49E6_748F_EA9B;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut ids = BTreeMap::new();
    let mut counts: BTreeMap<String, i64> = BTreeMap::new();
    let mut killed = 0;
    for round in 0..ROUNDS {
        for f in 0..2 + next() % 3 {
            let mut text = String::new();
            for r in 0..10 {
                let id = (round * 100 + f * 10 + r) as i64;
                let k = format!("k{}", next() % 7);
                *counts.entry(k.clone()).or_default() += 1;
                ids.insert(id, 1usize);
                text.push_str(&format!("{{\"id\":{id},\"k\":\"{k}\"}}\n"));
            }
            std::fs::write(input.join(format!("part-{round:03}-{f}.json")), text).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(15));
        }
        let mut child = Command::new(std::env::current_exe().unwrap())
            .current_dir(&dir)
            .env("PIPELINE_CHILD", "kill_loop")
            .env_remove("PIPELINES_FAULT")
            .arg("run")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20 + next() % 1200));
        if child.try_wait().unwrap().is_none() {
            killed += 1;
        }
        // SIGKILL: no destructor or flush runs in the child.
        let _ = child.kill();
        let _ = child.wait();
    }
    // What the killed runs committed between them (the last run does the rest).
    let committed = |flow: &str| {
        std::fs::read_dir(dir.join("storage/checkpoints").join(flow).join("commits"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    let (raw_done, counts_done) = (committed("raw"), committed("key_counts"));
    let last = Command::new(std::env::current_exe().unwrap())
        .current_dir(&dir)
        .env("PIPELINE_CHILD", "kill_loop")
        .env_remove("PIPELINES_FAULT")
        .arg("run")
        .output()
        .unwrap();
    let raw = dir.join("storage/tables/raw");
    let sink = dir.join("out/key_counts");
    let (raw_ids, sink_counts, reader) = match python_read(&[raw.clone(), sink.clone()]) {
        Some(v) => {
            let rows = |p: &Path| {
                v[p.to_string_lossy().as_ref()]["rows"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            };
            let mut raw_ids = BTreeMap::new();
            for r in rows(&raw) {
                *raw_ids.entry(r[0].as_i64().unwrap()).or_insert(0usize) += 1;
            }
            let sink_counts: BTreeMap<String, i64> = rows(&sink)
                .iter()
                .map(|r| (r[0].as_str().unwrap().to_string(), r[1].as_i64().unwrap()))
                .collect();
            (raw_ids, sink_counts, "deltalake (Python)")
        }
        None => {
            let mut raw_ids = BTreeMap::new();
            for b in dp::delta::read_table(&raw).unwrap().unwrap_or_default() {
                let c = b
                    .column_by_name("id")
                    .unwrap()
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .clone();
                for i in 0..c.len() {
                    *raw_ids.entry(c.value(i)).or_insert(0usize) += 1;
                }
            }
            let mut sink_counts = BTreeMap::new();
            for b in dp::delta::read_table(&sink).unwrap().unwrap_or_default() {
                let k = b
                    .column_by_name("k")
                    .unwrap()
                    .as_any()
                    .downcast_ref::<arrow::array::StringArray>()
                    .unwrap()
                    .clone();
                let n = b
                    .column_by_name("count")
                    .unwrap()
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .clone();
                for i in 0..k.len() {
                    sink_counts.insert(k.value(i).to_string(), n.value(i));
                }
            }
            (
                raw_ids,
                sink_counts,
                "our Delta reader (no Python deltalake)",
            )
        }
    };
    let events = event_log_complete(&dir, &["raw", "key_counts"]);
    check(
        &format!(
            "kill -9 loop: the event log table holds every logged event once and every committed batch's event ({})",
            events.as_deref().unwrap_or("-")
        ),
        events.is_ok(),
        || format!("{events:?}"),
    ) && check(
        &format!(
            "kill -9 loop: {ROUNDS} rounds ({killed} killed mid-run, {raw_done} + {counts_done} batches committed by them), file → Delta → merge-keyed Delta sink, read by {reader}: every row once, exact counts"
        ),
        last.status.success()
            && killed >= 3
            && raw_done > 0
            && counts_done > 0
            && raw_ids == ids
            && sink_counts == counts,
        || {
            format!(
                "last run {:?}: {}\nkilled {killed}\nraw ids {raw_ids:?}\nexpected {ids:?}\nsink {sink_counts:?}\nexpected {counts:?}",
                last.status,
                String::from_utf8_lossy(&last.stderr)
            )
        },
    )
}

fn main() -> std::process::ExitCode {
    match std::env::var("PIPELINE_CHILD").as_deref() {
        Ok("kill_loop") => return loop_child_main(),
        Ok(_) => return child_main(),
        Err(_) => {}
    }
    // `cargo test -- --list` and filters: run everything, it is quick.
    let mut ok = true;
    ok &= rerun_reads_nothing_twice();
    for point in [
        "after_offsets:2",
        "sink_files_written:3",
        "before_commit:4",
        "before_commit:0",
        "window_counts/after_offsets:2",
        "window_counts/sink_files_written:3",
        "window_counts/before_commit:3",
        "window_counts/before_commit:5",
        // Delta: killed just before the Delta commit (nothing written: the
        // replay writes it), and between the Delta commit and the checkpoint
        // commit (the replay finds its transaction version and skips it).
        "copy_to_delta/delta_before_commit:2",
        "copy_to_delta/before_commit:3",
    ] {
        ok &= crash_then_recover(point);
    }
    let clean = clean_cdc_tables();
    // The clean run's SCD 1 table follows the rule; its SCD 2 history has
    // one open version per key whose last event is an upsert.
    ok &= check(
        "AUTO CDC clean run: SCD 1 is the latest event per key",
        clean.0 == expected_scd1()
            && clean.1.iter().filter(|l| l.ends_with("|null")).count() == clean.0.len(),
        || format!("{clean:?}\nexpected SCD 1: {:?}", expected_scd1()),
    );
    for point in [
        "apply_cdc/after_offsets:2",
        "apply_cdc/delta_before_commit:3",
        "apply_cdc/before_commit:1",
        "apply_cdc_history/delta_before_commit:2",
        "apply_cdc_history/before_commit:4",
    ] {
        ok &= cdc_crash_then_recover(point, &clean);
    }
    for point in [
        "copy_to_pg/postgres_before_commit:2",
        "copy_to_pg/before_commit:3",
        "copy_to_pg/after_offsets:4",
    ] {
        ok &= pg_crash_then_recover(point);
    }
    for point in [
        "event_log/event_log_offsets:0",
        "event_log/delta_before_commit:0",
        "event_log/event_log_before_commit:0",
        "before_commit:2",
    ] {
        ok &= event_log_crash_then_recover(point);
    }
    if let Some(server) = s3_server() {
        for (n, point) in [
            "after_offsets:2",
            "window_counts/before_commit:3",
            "copy_to_delta/delta_before_commit:2",
            "copy_to_delta/before_commit:3",
        ]
        .into_iter()
        .enumerate()
        {
            ok &= s3_crash_then_recover(server, n, point);
        }
        for (n, point) in [
            "raw/after_offsets:1",
            "raw/delta_before_commit:2",
            "raw/before_commit:3",
            "key_counts/delta_before_commit:0",
            "key_counts/before_commit:0",
            "event_log/event_log_before_commit:0",
        ]
        .into_iter()
        .enumerate()
        {
            ok &= s3_root_crash_then_recover(server, n, point);
        }
        for (n, point) in [
            "sink_files_written:3",
            "window_counts/sink_files_written:3",
            "before_commit:4",
            "window_counts/after_offsets:2",
        ]
        .into_iter()
        .enumerate()
        {
            ok &= s3_parquet_crash_then_recover(server, n, point);
        }
    } else {
        println!("skipped: the S3 crash tests (no moto.server; set PIPELINES_PYTHON)");
    }
    ok &= changed_query_is_refused();
    ok &= two_runs_at_once_are_refused();
    ok &= kill_loop_over_delta_and_a_merge_sink();
    if ok {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
