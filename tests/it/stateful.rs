//! Stateful streaming against real Spark: each case under `tests/stateful/`
//! holds input files (one per micro-batch) and what Spark 4.3's
//! `foreachBatch` received in every batch (`expected.json`, made by
//! `tests/stateful/make_fixtures.py`). The same query runs here with the
//! file source (`maxFilesPerTrigger` 1, available-now) into a foreach-batch
//! sink; every batch must hold exactly Spark's rows, and the watermark and
//! the late rows dropped per batch must match Spark's progress.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arrow::array::{Array, ArrayRef, AsArray, StructArray};
use arrow::datatypes::{DataType, Float64Type, Int64Type, TimeUnit, TimestampMicrosecondType};
use arrow::record_batch::RecordBatch;
use chrono::DateTime;
use pipelines as dp;
use pipelines::engine::runtime::{run, RunOptions};
use pipelines::formats::OutputMode;
use pipelines::prelude::*;
use serde_json::{json, Value};

/// What the foreach-batch sink received: (batch id, rows).
type Batches = Vec<(u64, Vec<RecordBatch>)>;

const SCHEMA: &str = "ts TIMESTAMP, user STRING, service STRING, level STRING, value BIGINT";

fn fixture(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/stateful")
        .join(case)
}

/// Copies a case's input files into `dst`, with increasing modification
/// times in name order (the file source reads files in that order).
fn copy_inputs(src: &Path, dst: &Path) {
    copy_input_range(src, dst, 0..usize::MAX);
}

/// Copies the files at positions `range` (in name order) of a case's inputs.
fn copy_input_range(src: &Path, dst: &Path, range: std::ops::Range<usize>) {
    std::fs::create_dir_all(dst).unwrap();
    for (i, n) in input_names(src).iter().enumerate() {
        if !range.contains(&i) {
            continue;
        }
        let to = dst.join(n);
        std::fs::copy(src.join(n), &to).unwrap();
        set_input_time(&to, i);
    }
}

/// The JSON input files of `src`, in name order.
fn input_names(src: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(src)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    names
}

/// Gives input file `i` (in name order) a modification time after file
/// `i - 1`'s: the file source reads files in that order.
fn set_input_time(path: &Path, i: usize) {
    let base = SystemTime::now() - Duration::from_secs(3600);
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(base + Duration::from_secs(i as u64 * 10))
        .unwrap();
}

fn ts_text(micros: i64) -> String {
    let t = DateTime::from_timestamp_micros(micros).unwrap().naive_utc();
    if micros % 1_000_000 == 0 {
        t.format("%Y-%m-%d %H:%M:%S").to_string()
    } else {
        t.format("%Y-%m-%d %H:%M:%S%.f").to_string()
    }
}

fn value(a: &ArrayRef, i: usize) -> Value {
    if a.is_null(i) {
        return Value::Null;
    }
    match a.data_type() {
        DataType::Utf8 => json!(a.as_string::<i32>().value(i)),
        DataType::Int64 => json!(a.as_primitive::<Int64Type>().value(i)),
        DataType::Float64 => json!(a.as_primitive::<Float64Type>().value(i)),
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            json!(ts_text(
                a.as_primitive::<TimestampMicrosecondType>().value(i)
            ))
        }
        DataType::Timestamp(..) => {
            let c =
                arrow::compute::cast(a, &DataType::Timestamp(TimeUnit::Microsecond, None)).unwrap();
            value(&c, i)
        }
        DataType::Struct(fields) => {
            let s = a.as_any().downcast_ref::<StructArray>().unwrap();
            let mut m = serde_json::Map::new();
            for (j, f) in fields.iter().enumerate() {
                m.insert(f.name().clone(), value(s.column(j), i));
            }
            Value::Object(m)
        }
        other => panic!("unexpected type {other}"),
    }
}

fn rows_json(batches: &[RecordBatch]) -> Vec<Value> {
    let mut out = Vec::new();
    for b in batches {
        for i in 0..b.num_rows() {
            let mut m = serde_json::Map::new();
            for (j, f) in b.schema().fields().iter().enumerate() {
                m.insert(f.name().clone(), value(b.column(j), i));
            }
            out.push(Value::Object(m));
        }
    }
    out.sort_by_key(|v| v.to_string());
    out
}

fn iso_ms(text: &str) -> i64 {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .timestamp_millis()
}

/// A case's `expected.json`.
fn load_expected(case: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(case).join("expected.json")).unwrap())
        .unwrap()
}

/// Spark's rows per batch, each batch's rows sorted.
fn expected_batches(expected: &Value) -> Vec<(u64, Vec<Value>)> {
    expected["batches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let mut rows = b["rows"].as_array().unwrap().clone();
            rows.sort_by_key(|v| v.to_string());
            (b["batch_id"].as_u64().unwrap(), rows)
        })
        .collect()
}

/// Copies every input directory of a case into `dir`; `input` also as
/// Parquet files in `input_parquet` (strings dictionary-encoded in every
/// file but the first).
fn prepare_inputs(case: &str, dir: &Path) {
    for sub in ["input", "input_left", "input_right"] {
        if fixture(case).join(sub).exists() {
            copy_inputs(&fixture(case).join(sub), &dir.join(sub));
        }
    }
    if fixture(case).join("input").exists() {
        parquet_inputs(
            &fixture(case).join("input"),
            &dir.join("input_parquet"),
            |i| i != 0,
        );
    }
}

/// The graph of one flow `name` into the foreach-batch sink `sink`,
/// declaring its output mode as a user would: an update flow for update
/// mode, `pipelines.outputMode` for complete mode.
fn case_graph(
    dir: &Path,
    name: &str,
    sink: &str,
    mode: OutputMode,
    query: dp::Query,
) -> dp::graph::PipelineGraph {
    case_graph_with(dir, name, sink, mode, &[], query)
}

/// [`case_graph`] with extra flow settings (`conf`).
fn case_graph_with(
    dir: &Path,
    name: &str,
    sink: &str,
    mode: OutputMode,
    conf: &[(&str, &str)],
    query: dp::Query,
) -> dp::graph::PipelineGraph {
    let mut flow = dp::FlowDef::append(name, sink, query);
    for (k, v) in conf {
        flow.conf.insert(k.to_string(), v.to_string());
    }
    match mode {
        OutputMode::Append => {}
        OutputMode::Update => flow.kind = dp::registry::FlowKind::Update,
        OutputMode::Complete => {
            flow.conf
                .insert("pipelines.outputMode".into(), "complete".into());
        }
    }
    let p = dp::Pipeline::new().flow(flow).create_sink(
        sink,
        "foreach_batch",
        Vec::<(String, String)>::new(),
    );
    let spec = dp::spec::parse_str(
        "name: stateful\nstorage: ./storage\n",
        &dir.join("pipeline.yml"),
    )
    .unwrap();
    let graph = p.build(&spec).map_err(|d| d.to_string()).unwrap();
    assert_eq!(graph.flows[name].output_mode, mode);
    graph
}

/// Runs `build` as flow `case` in `mode` over the case's inputs and compares
/// every batch with Spark's.
fn check_case(
    case: &str,
    mode: OutputMode,
    build: impl Fn(&Session) -> dp::Result<DataFrame> + Send + Sync + 'static,
) {
    check_case_with(case, mode, &[], build);
}

/// [`check_case`] with extra flow settings (`conf`).
fn check_case_with(
    case: &str,
    mode: OutputMode,
    conf: &[(&str, &str)],
    build: impl Fn(&Session) -> dp::Result<DataFrame> + Send + Sync + 'static,
) {
    let expected = load_expected(case);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    prepare_inputs(case, dir);
    // Sinks are registered by name, process-wide: a name per run keeps
    // tests running in parallel apart.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run_id = RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let sink = format!("stateful_{case}_{run_id}");
    let seen: Arc<Mutex<Batches>> = Arc::default();
    let s2 = seen.clone();
    dp::engine::sinks::register_foreach_batch(&sink, move |batches: &[RecordBatch], id: u64| {
        s2.lock().unwrap().push((id, batches.to_vec()));
        Ok(())
    });
    let graph = case_graph_with(dir, case, &sink, mode, conf, dp::Query::new(build));
    run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();

    // Rows per batch.
    let got: Vec<(u64, Vec<Value>)> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(id, b)| (*id, rows_json(b)))
        .collect();
    let want = expected_batches(&expected);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "{case}: batch {} differs from Spark", w.0);
    }
    assert_eq!(got.len(), want.len(), "{case}: number of batches: {got:?}");

    // Watermark and late rows per batch, from the event log.
    let progress: BTreeMap<u64, Value> =
        pipelines::engine::event_log::read_batch_progress(dir.join("storage"))
            .unwrap()
            .into_iter()
            .filter(|v| v["flow"] == case)
            .map(|v| (v["batchId"].as_u64().unwrap(), v))
            .collect();
    for b in expected["batches"].as_array().unwrap() {
        let id = b["batch_id"].as_u64().unwrap();
        let p = &progress[&id];
        let sp = &b["progress"];
        if let Some(wm) = sp["watermark"].as_str() {
            assert_eq!(
                p["watermarkMs"].as_i64(),
                Some(iso_ms(wm)),
                "{case}: watermark of batch {id}"
            );
        }
        let want_dropped: u64 = sp["stateOperators"]
            .as_array()
            .map(|ops| {
                ops.iter()
                    .map(|o| o["numRowsDroppedByWatermark"].as_u64().unwrap_or(0))
                    .sum()
            })
            .unwrap_or(0);
        let got_dropped: u64 = p["stateOperators"]
            .as_array()
            .map(|ops| {
                ops.iter()
                    .map(|o| o["numRowsDroppedByWatermark"].as_u64().unwrap())
                    .sum()
            })
            .unwrap_or(0);
        assert_eq!(
            got_dropped, want_dropped,
            "{case}: late rows dropped in batch {id}"
        );
        let want_total: Option<u64> = sp["stateOperators"].as_array().map(|ops| {
            ops.iter()
                .map(|o| o["numRowsTotal"].as_u64().unwrap_or(0))
                .sum()
        });
        let got_total: Option<u64> = p["stateOperators"].as_array().map(|ops| {
            ops.iter()
                .map(|o| o["numRowsTotal"].as_u64().unwrap())
                .sum()
        });
        if !case.starts_with("join") {
            assert_eq!(got_total, want_total, "{case}: state rows after batch {id}");
        }
    }
}

fn events(s: &Session) -> dp::Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema(SCHEMA)
        .option("maxFilesPerTrigger", "1")
        .load("input")
}

#[test]
fn tumbling_window_count_in_append_mode() {
    check_case("tumbling_append", OutputMode::Append, tumbling_count);
}

#[test]
fn tumbling_window_count_in_update_mode() {
    check_case("tumbling_update", OutputMode::Update, tumbling_count);
}

#[test]
fn count_per_key_in_complete_mode() {
    check_case("complete_count", OutputMode::Complete, |s| {
        events(s)?.group_by(["service"]).count()
    });
}

#[test]
fn error_monitor_sliding_windows_in_append_mode() {
    check_case("error_monitor", OutputMode::Append, error_monitor);
}

#[test]
fn running_count_without_watermark_in_update_mode() {
    check_case("running_count_update", OutputMode::Update, |s| {
        events(s)?
            .group_by(["user"])
            .agg(["count(*) AS n", "sum(value) AS total"])
    });
}

#[test]
fn several_aggregates_per_window_in_update_mode() {
    check_case("aggs_update", OutputMode::Update, window_aggregates);
}

/// The events of JSON-lines file `src` (in [`SCHEMA`]) as one Arrow batch.
fn json_events(src: &Path) -> RecordBatch {
    use arrow::array::{Int64Array, StringArray, TimestampMicrosecondArray};
    let text = std::fs::read_to_string(src).unwrap();
    let rows: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ts = TimestampMicrosecondArray::from_iter(rows.iter().map(|r| {
        r["ts"].as_str().map(|t| {
            chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%d %H:%M:%S")
                .unwrap()
                .and_utc()
                .timestamp_micros()
        })
    }))
    .with_timezone("UTC");
    let text_col = |name: &str| -> ArrayRef {
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r[name].as_str().map(str::to_string)),
        ))
    };
    let value = Int64Array::from_iter(rows.iter().map(|r| r["value"].as_i64()));
    RecordBatch::try_from_iter([
        ("ts", Arc::new(ts) as ArrayRef),
        ("user", text_col("user")),
        ("service", text_col("service")),
        ("level", text_col("level")),
        ("value", Arc::new(value) as ArrayRef),
    ])
    .unwrap()
}

/// Writes `batch` as Parquet file `to`; `dictionary` says whether string
/// columns are dictionary-encoded.
fn write_parquet(batch: &RecordBatch, to: &Path, dictionary: bool) {
    let props = parquet::file::properties::WriterProperties::builder()
        .set_dictionary_enabled(dictionary)
        .build();
    let file = std::fs::File::create(to).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
}

/// Writes each JSON input file of `src` as a Parquet file in `dst`, with
/// increasing modification times in name order; `dictionary(i)` says
/// whether file `i` dictionary-encodes its strings.
fn parquet_inputs(src: &Path, dst: &Path, dictionary: impl Fn(usize) -> bool) {
    std::fs::create_dir_all(dst).unwrap();
    for (i, n) in input_names(src).iter().enumerate() {
        let to = dst.join(n.replace(".json", ".parquet"));
        write_parquet(&json_events(&src.join(n)), &to, dictionary(i));
        set_input_time(&to, i);
    }
}

/// The events as Parquet (`input_parquet`, one file per batch).
fn parquet_events(s: &Session, max_files: Option<&str>) -> dp::Result<DataFrame> {
    let mut r = s.read_stream().format("parquet").schema(SCHEMA);
    if let Some(n) = max_files {
        r = r.option("maxFilesPerTrigger", n);
    }
    r.load("input_parquet")
}

/// aggs_update over the same rows stored as Parquet, `service`
/// dictionary-encoded in every file but the first: the aggregation then
/// groups `service` through the files' dictionaries, and each batch still
/// holds exactly Spark's rows.
#[test]
fn several_aggregates_per_window_from_dictionary_encoded_parquet() {
    check_case("aggs_update", OutputMode::Update, |s| {
        aggregates_per_window(parquet_events(s, Some("1"))?)
    });
}

/// Runs `query` as flow `name` over `dir` into a foreach-batch sink in
/// update mode, late rows to another; returns the rows of every batch and
/// the late rows, each sorted.
fn run_rows(
    dir: &Path,
    name: &str,
    query: impl Fn(&Session) -> dp::Result<DataFrame> + Send + Sync + 'static,
) -> (Vec<(u64, Vec<String>)>, Vec<String>) {
    let seen: Arc<Mutex<Batches>> = Arc::default();
    let late: Arc<Mutex<Batches>> = Arc::default();
    let (s2, l2) = (seen.clone(), late.clone());
    let sink = format!("{name}_out");
    let late_sink = format!("{name}_late");
    dp::engine::sinks::register_foreach_batch(&sink, move |b: &[RecordBatch], id: u64| {
        s2.lock().unwrap().push((id, b.to_vec()));
        Ok(())
    });
    dp::engine::sinks::register_foreach_batch(&late_sink, move |b: &[RecordBatch], id: u64| {
        l2.lock().unwrap().push((id, b.to_vec()));
        Ok(())
    });
    let mut flow = dp::FlowDef::append(name, &sink, dp::Query::new(query));
    flow.kind = dp::registry::FlowKind::Update;
    flow.conf
        .insert("pipelines.lateRowsTo".into(), late_sink.clone());
    let p = dp::Pipeline::new()
        .flow(flow)
        .create_sink(&sink, "foreach_batch", Vec::<(String, String)>::new())
        .create_sink(&late_sink, "foreach_batch", Vec::<(String, String)>::new());
    let spec = dp::spec::parse_str(
        &format!("name: {name}\nstorage: ./storage_{name}\n"),
        &dir.join("pipeline.yml"),
    )
    .unwrap();
    let graph = p.build(&spec).map_err(|d| d.to_string()).unwrap();
    run(
        &graph,
        &RunOptions::new(dir, dir.join(format!("storage_{name}"))),
    )
    .unwrap();
    let sorted = |b: &[RecordBatch]| {
        let mut rows: Vec<String> = rows_json(b).iter().map(Value::to_string).collect();
        rows.sort();
        rows
    };
    let batches = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(id, b)| (*id, sorted(b)))
        .collect();
    let late_rows = sorted(
        &late
            .lock()
            .unwrap()
            .iter()
            .flat_map(|(_, b)| b.clone())
            .collect::<Vec<_>>(),
    );
    (batches, late_rows)
}

/// A windowed aggregation by service over dictionary-encoded Parquet files
/// (with null services, and one plainly encoded file among them) emits
/// exactly what it emits over the same rows encoded plainly, whose strings
/// take the general path: in one batch and in one batch per file, late
/// rows included (they reach their sink as plain strings).
#[test]
fn dictionary_encoded_keys_group_like_plain_strings() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // aggs_update's events, plus rows with a null service in every file.
    let src = dir.join("json");
    copy_inputs(&fixture("aggs_update").join("input"), &src);
    let mut names: Vec<_> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    for (i, path) in names.iter().enumerate() {
        let mut text = std::fs::read_to_string(path).unwrap();
        text.push_str(&format!(
            "{{\"ts\": \"2024-05-01 10:{:02}:30\", \"user\": \"u9\", \"service\": null, \"level\": \"INFO\", \"value\": {i}}}\n",
            10 + 5 * i
        ));
        std::fs::write(path, text).unwrap();
    }
    let plain = dir.join("plain");
    let encoded = dir.join("encoded");
    parquet_inputs(&src, &plain.join("input_parquet"), |_| false);
    parquet_inputs(&src, &encoded.join("input_parquet"), |i| i != 2);
    for max_files in [None, Some("1")] {
        let tag = if max_files.is_some() {
            "per_file"
        } else {
            "one"
        };
        let query = move |s: &Session| aggregates_per_window(parquet_events(s, max_files)?);
        let want = run_rows(&plain, &format!("dict_plain_{tag}"), query);
        let got = run_rows(&encoded, &format!("dict_encoded_{tag}"), query);
        assert!(want
            .0
            .iter()
            .any(|(_, rows)| rows.iter().any(|r| r.contains("\"service\":null"))));
        assert!(
            !want.1.is_empty() || max_files.is_none(),
            "late rows: {want:?}"
        );
        assert_eq!(got, want, "{tag}");
    }
}

#[test]
fn drop_duplicates_with_watermark() {
    check_case("dedup", OutputMode::Append, dedup_user_ts);
}

#[test]
fn drop_duplicates_within_watermark() {
    check_case(
        "dedup_within_watermark",
        OutputMode::Append,
        dedup_user_within_watermark,
    );
}

#[test]
fn drop_duplicates_without_watermark() {
    check_case("dedup_no_watermark", OutputMode::Append, |s| {
        events(s)?.drop_duplicates(Some(&["user"]))
    });
}

fn impressions_and_clicks(s: &Session) -> dp::Result<(DataFrame, DataFrame)> {
    let impressions = s
        .read_stream()
        .format("json")
        .schema("imp_ts TIMESTAMP, imp_ad STRING")
        .option("maxFilesPerTrigger", "1")
        .load("input_left")?
        .with_watermark("imp_ts", "10 minutes")?;
    let clicks = s
        .read_stream()
        .format("json")
        .schema("click_ts TIMESTAMP, click_ad STRING")
        .option("maxFilesPerTrigger", "1")
        .load("input_right")?
        .with_watermark("click_ts", "20 minutes")?;
    Ok((impressions, clicks))
}

const CLICK_CONDITION: &str =
    "click_ad = imp_ad AND click_ts >= imp_ts AND click_ts <= imp_ts + interval 5 minutes";

/// Count per 10-minute window, 15-minute watermark (tumbling_append/update).
fn tumbling_count(s: &Session) -> dp::Result<DataFrame> {
    events(s)?
        .with_watermark("ts", "15 minutes")?
        .group_by([tumbling_window(col("ts"), "10 minutes")])
        .count()
}

/// The `error_monitor` example's query: ERROR rows per service in 5-minute
/// windows sliding every minute, 10-minute watermark.
fn error_monitor(s: &Session) -> dp::Result<DataFrame> {
    events(s)?
        .filter("level = 'ERROR'")?
        .with_watermark("ts", "10 minutes")?
        .group_by([window(col("ts"), "5 minutes", "1 minute"), col("service")])
        .count()
}

/// count/sum/min/max/avg per 10-minute window and service (aggs_update).
fn window_aggregates(s: &Session) -> dp::Result<DataFrame> {
    aggregates_per_window(events(s)?)
}

/// [`window_aggregates`] over `events`.
fn aggregates_per_window(events: DataFrame) -> dp::Result<DataFrame> {
    events
        .with_watermark("ts", "10 minutes")?
        .group_by([tumbling_window(col("ts"), "10 minutes"), col("service")])
        .agg([
            "count(*) AS n",
            "sum(value) AS sum",
            "min(value) AS min",
            "max(value) AS max",
            "avg(value) AS avg",
        ])
}

/// drop_duplicates on (user, ts) with a watermark (dedup).
fn dedup_user_ts(s: &Session) -> dp::Result<DataFrame> {
    events(s)?
        .with_watermark("ts", "10 minutes")?
        .drop_duplicates(Some(&["user", "ts"]))
}

/// drop_duplicates_within_watermark on user (dedup_within_watermark).
fn dedup_user_within_watermark(s: &Session) -> dp::Result<DataFrame> {
    events(s)?
        .with_watermark("ts", "10 minutes")?
        .drop_duplicates_within_watermark(["user"])
}

/// Count per user in 5-minute-gap sessions (session_append).
fn user_sessions(s: &Session) -> dp::Result<DataFrame> {
    events(s)?
        .with_watermark("ts", "10 minutes")?
        .group_by([session_window(col("ts"), "5 minutes"), col("user")])
        .count()
}

/// Impressions left outer joined with their clicks (join_left_outer).
fn clicks_left_outer(s: &Session) -> dp::Result<DataFrame> {
    let (impressions, clicks) = impressions_and_clicks(s)?;
    impressions.join(&clicks, CLICK_CONDITION, JoinType::LeftOuter)
}

#[test]
fn stream_stream_inner_join_with_a_time_range() {
    check_case("join_inner", OutputMode::Append, |s| {
        let (impressions, clicks) = impressions_and_clicks(s)?;
        impressions.join(&clicks, CLICK_CONDITION, JoinType::Inner)
    });
}

/// A windowed count after the join: the aggregation closes a window by the
/// join's output watermark (5 minutes and 1 ms behind the global one, the
/// oldest pair the join may still emit), as Spark 4 propagates it.
#[test]
fn a_window_after_a_join_closes_by_the_joins_output_watermark() {
    check_case("join_then_window", OutputMode::Append, |s| {
        let (impressions, clicks) = impressions_and_clicks(s)?;
        impressions
            .join(&clicks, CLICK_CONDITION, JoinType::Inner)?
            .group_by([tumbling_window(col("imp_ts"), "10 minutes")])
            .count()
    });
}

#[test]
fn stream_stream_left_semi_join_emits_each_matched_row_once() {
    check_case("join_left_semi", OutputMode::Append, |s| {
        let (impressions, clicks) = impressions_and_clicks(s)?;
        impressions.join(&clicks, CLICK_CONDITION, JoinType::LeftSemi)
    });
}

/// A new right row behind the right side's state watermark matches
/// nothing in a left semi join (10:20 matches, 10:19:59.999 does not).
#[test]
fn a_left_semi_join_ignores_right_rows_its_watermark_evicts() {
    check_case("join_left_semi_boundary", OutputMode::Append, |s| {
        let (impressions, clicks) = impressions_and_clicks(s)?;
        impressions.join(&clicks, CLICK_CONDITION, JoinType::LeftSemi)
    });
}

#[test]
fn stream_stream_left_outer_join_emits_unmatched_rows_when_evicted() {
    check_case("join_left_outer", OutputMode::Append, clicks_left_outer);
}

/// `pipelines.lateRowsTo`: the rows Spark drops silently (tumbling_append
/// counts one late group in each of batches 2, 3 and 4) reach a sink.
#[test]
fn late_rows_go_to_the_named_sink() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    copy_inputs(
        &fixture("tumbling_append").join("input"),
        &dir.join("input"),
    );
    let late: Arc<Mutex<Batches>> = Arc::default();
    let l2 = late.clone();
    dp::engine::sinks::register_foreach_batch("late_events", move |b: &[RecordBatch], id: u64| {
        l2.lock().unwrap().push((id, b.to_vec()));
        Ok(())
    });
    let mut flow = dp::FlowDef::append(
        "windowed",
        "windowed_out",
        dp::Query::new(|s| {
            events(s)?
                .with_watermark("ts", "15 minutes")?
                .group_by([tumbling_window(col("ts"), "10 minutes")])
                .count()
        }),
    );
    flow.conf
        .insert("pipelines.lateRowsTo".into(), "late_events".into());
    let p = dp::Pipeline::new()
        .flow(flow)
        .create_sink("windowed_out", "memory", [("queryName", "late_test_out")])
        .create_sink(
            "late_events",
            "foreach_batch",
            Vec::<(String, String)>::new(),
        );
    let spec = dp::spec::parse_str(
        "name: late\nstorage: ./storage\n",
        &dir.join("pipeline.yml"),
    )
    .unwrap();
    let graph = p.build(&spec).map_err(|d| d.to_string()).unwrap();
    run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();
    let got: Vec<(u64, Vec<String>)> = late
        .lock()
        .unwrap()
        .iter()
        .map(|(id, b)| {
            let ts = rows_json(b)
                .iter()
                .map(|r| r["ts"].as_str().unwrap().to_string())
                .collect();
            (*id, ts)
        })
        .collect();
    let ts: Vec<(u64, Vec<&str>)> = got
        .iter()
        .map(|(id, t)| (*id, t.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(
        ts,
        vec![
            (2, vec!["2024-05-01 09:41:00"]),
            (3, vec!["2024-05-01 10:04:00"]),
            (4, vec!["2024-05-01 10:15:00"])
        ]
    );
}

/// Sorting and limiting after an aggregation in complete mode: each batch
/// holds the top services of Spark's complete result for that batch.
#[test]
fn complete_mode_sorts_and_limits_after_the_aggregation() {
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("complete_count").join("expected.json")).unwrap(),
    )
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    copy_inputs(&fixture("complete_count").join("input"), &dir.join("input"));
    let seen: Arc<Mutex<Batches>> = Arc::default();
    let s2 = seen.clone();
    dp::engine::sinks::register_foreach_batch("top_services", move |b: &[RecordBatch], id: u64| {
        s2.lock().unwrap().push((id, b.to_vec()));
        Ok(())
    });
    let mut flow = dp::FlowDef::append(
        "top",
        "top_services",
        dp::Query::new(|s| {
            events(s)?
                .group_by(["service"])
                .count()?
                .order_by(["count DESC", "service"])?
                .limit(2)
        }),
    );
    flow.conf
        .insert("pipelines.outputMode".into(), "complete".into());
    let p = dp::Pipeline::new().flow(flow).create_sink(
        "top_services",
        "foreach_batch",
        Vec::<(String, String)>::new(),
    );
    let spec =
        dp::spec::parse_str("name: top\nstorage: ./storage\n", &dir.join("pipeline.yml")).unwrap();
    let graph = p.build(&spec).map_err(|d| d.to_string()).unwrap();
    run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();
    let got: Vec<(u64, Vec<Value>)> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(id, b)| {
            let mut rows = Vec::new();
            for batch in b {
                // Keep the order the sink received.
                for i in 0..batch.num_rows() {
                    rows.push(rows_json(&[batch.slice(i, 1)])[0].clone());
                }
            }
            (*id, rows)
        })
        .collect();
    let want: Vec<(u64, Vec<Value>)> = expected["batches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let mut rows = b["rows"].as_array().unwrap().clone();
            rows.sort_by_key(|r| {
                (
                    -r["count"].as_i64().unwrap(),
                    r["service"].as_str().unwrap().to_string(),
                )
            });
            rows.truncate(2);
            (b["batch_id"].as_u64().unwrap(), rows)
        })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn session_windows_in_append_mode() {
    check_case("session_append", OutputMode::Append, user_sessions);
}

#[test]
fn session_windows_merge_in_complete_mode() {
    check_case("session_complete", OutputMode::Complete, |s| {
        events(s)?
            .group_by([session_window(col("ts"), "5 minutes"), col("user")])
            .agg(["count(*) AS n", "sum(value) AS total"])
    });
}

#[test]
fn session_windows_in_complete_mode_drop_late_rows() {
    // Spark drops a session window's input rows whose `ts + gap` is at or
    // behind the previous batch's watermark, in complete mode too.
    check_case("session_complete_late", OutputMode::Complete, |s| {
        events(s)?
            .with_watermark("ts", "10 minutes")?
            .group_by([session_window(col("ts"), "7 minutes"), col("user")])
            .agg(["count(*) AS n", "max(value) AS max_value"])
    });
}

/// Runs a case with a failure injected after batch 3's state and sink
/// writes but before its commit, then runs it again: the second run reloads
/// the state of batch 2 and replays batch 3. The foreach-batch sink is
/// at-least-once (it saw batch 3 twice); keeping the last delivery of each
/// batch id, every batch must equal Spark's.
fn check_case_with_restart(
    case: &str,
    mode: OutputMode,
    build: impl Fn(&Session) -> dp::Result<DataFrame> + Clone + Send + Sync + 'static,
) {
    let expected = load_expected(case);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    prepare_inputs(case, dir);
    let flow_name = format!("restart_{case}");
    let sink = format!("restart_{case}_sink");
    let seen: Arc<Mutex<BTreeMap<u64, Vec<RecordBatch>>>> = Arc::default();
    let s2 = seen.clone();
    dp::engine::sinks::register_foreach_batch(&sink, move |batches: &[RecordBatch], id: u64| {
        s2.lock().unwrap().insert(id, batches.to_vec());
        Ok(())
    });
    dp::engine::runtime::inject_failure(&flow_name, "before_commit", 3);
    dp::engine::runtime::inject_failure(&flow_name, "after_offsets", 1);
    let mut failures = 0;
    for _ in 0..3 {
        let graph = case_graph(dir, &flow_name, &sink, mode, dp::Query::new(build.clone()));
        match run(&graph, &RunOptions::new(dir, dir.join("storage"))) {
            Ok(_) => break,
            Err(e) => {
                assert!(e.to_string().contains("injected failure"), "{e}");
                failures += 1;
            }
        }
    }
    assert_eq!(failures, 2, "{case}: both injected failures happened");
    let got: Vec<(u64, Vec<Value>)> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(id, b)| (*id, rows_json(b)))
        .collect();
    assert_eq!(
        got,
        expected_batches(&expected),
        "{case}: batches after two failures differ from Spark's"
    );
}

#[test]
fn state_survives_a_restart_for_every_stateful_operator() {
    check_case_with_restart("tumbling_append", OutputMode::Append, tumbling_count);
    check_case_with_restart("aggs_update", OutputMode::Update, window_aggregates);
    check_case_with_restart("error_monitor", OutputMode::Append, error_monitor);
    check_case_with_restart("session_append", OutputMode::Append, user_sessions);
    check_case_with_restart("dedup", OutputMode::Append, dedup_user_ts);
    check_case_with_restart(
        "dedup_within_watermark",
        OutputMode::Append,
        dedup_user_within_watermark,
    );
    check_case_with_restart("join_left_outer", OutputMode::Append, clicks_left_outer);
}

/// `spark.sql.shuffle.partitions` spreads aggregation state over that many
/// hash partitions; the results do not change.
#[test]
fn state_partitions_do_not_change_results() {
    for parts in ["1", "7"] {
        check_case_with(
            "aggs_update",
            OutputMode::Update,
            &[("spark.sql.shuffle.partitions", parts)],
            window_aggregates,
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let graph = case_graph_with(
        tmp.path(),
        "bad_parts",
        "bad_parts_sink",
        OutputMode::Update,
        &[("spark.sql.shuffle.partitions", "zero")],
        dp::Query::new(|s| events(s)?.group_by(["user"]).count()),
    );
    let err = run(
        &graph,
        &RunOptions::new(tmp.path(), tmp.path().join("storage")),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("`spark.sql.shuffle.partitions` is `zero`, not a whole number from 1 to 1024"),
        "{err}"
    );
}
