//! Rate, socket and memory sources.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpListener;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, TimestampMicrosecondType};
use pipelines_core::engine::source::{Source, SourceContext};
use pipelines_core::engine::sources::{open_source, MemoryStream, Options, RateSource};
use pipelines_core::plan::reader::SourceSpec;
use pipelines_core::Session;
use serde_json::json;

fn ctx(state: &std::path::Path) -> SourceContext {
    SourceContext {
        flow: "f".into(),
        state_dir: state.to_path_buf().into(),
        base_dir: state.to_path_buf(),
        option_overrides: BTreeMap::new(),
    }
}

fn rate_spec(opts: &[(&str, &str)]) -> SourceSpec {
    let mut r = Session::new().read_stream().format("rate");
    for (k, v) in opts {
        r = r.option(*k, *v);
    }
    r.load_default().unwrap().sources()[0].clone()
}

const START: i64 = 1_700_000_000_000;

fn rate(state: &std::path::Path, opts: &[(&str, &str)], clock: fn() -> i64) -> RateSource {
    std::fs::create_dir_all(state).unwrap();
    std::fs::write(
        state.join("rate-start.json"),
        json!({"startTimeMs": START}).to_string(),
    )
    .unwrap();
    let spec = rate_spec(opts);
    let options = Options::merged(&spec.options, &BTreeMap::new(), "f");
    RateSource::open(spec.schema.clone().unwrap(), options, ctx(state))
        .unwrap()
        .with_clock(clock)
}

fn rows(batches: &[RecordBatch]) -> Vec<(i64, i64)> {
    batches
        .iter()
        .flat_map(|b| {
            let ts = b
                .column(0)
                .as_primitive::<TimestampMicrosecondType>()
                .clone();
            let v = b.column(1).as_primitive::<Int64Type>().clone();
            (0..b.num_rows())
                .map(move |i| ((ts.value(i) / 1000 - START), v.value(i)))
                .collect::<Vec<_>>()
        })
        .collect()
}

static CLOCK_A: AtomicI64 = AtomicI64::new(0);

#[test]
fn rate_rows_are_deterministic_and_replayable() {
    let tmp = tempfile::tempdir().unwrap();
    CLOCK_A.store(START + 2_500, Ordering::SeqCst);
    let mut src = rate(tmp.path(), &[("rowsPerSecond", "10")], || {
        CLOCK_A.load(Ordering::SeqCst)
    });
    let o1 = src.latest_offset(None).unwrap().unwrap();
    assert_eq!(o1["value"], json!(25));
    let r = src.read(None, &o1).unwrap();
    let expected: Vec<(i64, i64)> = (0..25).map(|i| (i * 100, i)).collect();
    assert_eq!(rows(&r.batches), expected);
    // The schema is the rate source's.
    assert_eq!(r.batches[0].schema(), src.schema());
    // Nothing new at the same instant.
    assert!(src.latest_offset(Some(&o1)).unwrap().is_none());
    CLOCK_A.store(START + 3_001, Ordering::SeqCst);
    let o2 = src.latest_offset(Some(&o1)).unwrap().unwrap();
    assert_eq!(o2["value"], json!(31));
    let r2 = src.read(Some(&o1), &o2).unwrap();
    assert_eq!(
        rows(&r2.batches),
        (25..31).map(|i| (i * 100, i)).collect::<Vec<_>>()
    );
    // A reopened source (restart) replays the same rows from the offsets alone.
    let mut again = rate(tmp.path(), &[("rowsPerSecond", "10")], || 0);
    assert_eq!(
        rows(&again.read(Some(&o1), &o2).unwrap().batches),
        rows(&r2.batches)
    );
}

static CLOCK_B: AtomicI64 = AtomicI64::new(0);

#[test]
fn rate_ramp_up_and_available_now() {
    let tmp = tempfile::tempdir().unwrap();
    // rampUpTime 4s at 10 rows/s: 2, 4, 6, 8 rows in seconds 0-3, then 10/s.
    CLOCK_B.store(START + 5_000, Ordering::SeqCst);
    let mut src = rate(
        tmp.path(),
        &[("rowsPerSecond", "10"), ("rampUpTime", "4s")],
        || CLOCK_B.load(Ordering::SeqCst),
    );
    src.prepare_available_now().unwrap();
    let o = src.latest_offset(None).unwrap().unwrap();
    assert_eq!(o["value"], json!(30));
    let r = rows(&src.read(None, &o).unwrap().batches);
    assert_eq!(&r[..4], &[(0, 0), (500, 1), (1000, 2), (1250, 3)]);
    assert_eq!(r[29], (4900, 29));
    // Available-now: capped at what was due when the run started.
    CLOCK_B.store(START + 60_000, Ordering::SeqCst);
    assert!(src.latest_offset(Some(&o)).unwrap().is_none());
}

#[test]
fn rate_via_open_source_persists_its_start_time() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = rate_spec(&[("rowsPerSecond", "1000")]);
    let src = open_source(&spec, spec.schema.clone().unwrap(), ctx(tmp.path())).unwrap();
    assert_eq!(src.describe(), "rate source (1000 rows/s)");
    let text = std::fs::read_to_string(tmp.path().join("rate-start.json")).unwrap();
    let start = serde_json::from_str::<serde_json::Value>(&text).unwrap()["startTimeMs"].clone();
    drop(src);
    let _src = open_source(&spec, spec.schema.clone().unwrap(), ctx(tmp.path())).unwrap();
    let text = std::fs::read_to_string(tmp.path().join("rate-start.json")).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text).unwrap()["startTimeMs"],
        start
    );
}

fn socket_spec(port: u16) -> SourceSpec {
    Session::new()
        .read_stream()
        .format("socket")
        .option("host", "127.0.0.1")
        .option("port", port)
        .load_default()
        .unwrap()
        .sources()[0]
        .clone()
}

#[test]
fn socket_reads_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        conn.write_all(b"hello\nworld\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(300));
        conn.write_all(b"third\n").unwrap();
        std::thread::sleep(Duration::from_millis(300));
    });
    let spec = socket_spec(port);
    let mut src = open_source(&spec, spec.schema.clone().unwrap(), ctx(tmp.path())).unwrap();
    assert!(!src.replayable());
    let wait = |src: &mut Box<dyn Source>, start: Option<&serde_json::Value>, n: u64| {
        let t = Instant::now();
        loop {
            if let Some(o) = src.latest_offset(start).unwrap() {
                if o["lines"] == json!(n) {
                    return o;
                }
            }
            assert!(t.elapsed() < Duration::from_secs(10), "timed out");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let o1 = wait(&mut src, None, 2);
    let values = |b: &[RecordBatch]| -> Vec<String> {
        b.iter()
            .flat_map(|b| {
                b.column(0)
                    .as_string::<i32>()
                    .iter()
                    .map(|s| s.unwrap().to_string())
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    assert_eq!(
        values(&src.read(None, &o1).unwrap().batches),
        vec!["hello", "world"]
    );
    src.commit(&o1).unwrap();
    let o2 = wait(&mut src, Some(&o1), 3);
    assert_eq!(
        values(&src.read(Some(&o1), &o2).unwrap().batches),
        vec!["third"]
    );
    server.join().unwrap();
}

#[test]
fn socket_connection_errors_name_host_and_port() {
    let tmp = tempfile::tempdir().unwrap();
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let spec = socket_spec(port);
    let err = open_source(&spec, spec.schema.clone().unwrap(), ctx(tmp.path()))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.starts_with(&format!(
            "flow `f`: cannot connect to socket source 127.0.0.1:{port}: "
        )),
        "{err}"
    );
    // The operating system's error is kept as the cause, not only as text.
    let err = open_source(&spec, spec.schema.clone().unwrap(), ctx(tmp.path()))
        .err()
        .unwrap();
    let cause = std::error::Error::source(&err).expect("the connection error is the source");
    assert_eq!(
        cause.downcast_ref::<std::io::Error>().map(|e| e.kind()),
        Some(std::io::ErrorKind::ConnectionRefused)
    );
    assert_eq!(err.to_string(), format!("flow `f`: cannot connect to socket source 127.0.0.1:{port}: {cause}\n  help: start the server first (e.g. `nc -lk {port}`) or fix `host`/`port`"));
}

fn memory_spec(name: &str, schema: &str) -> SourceSpec {
    Session::new()
        .read_stream()
        .format("memory")
        .schema(schema)
        .load(name)
        .unwrap()
        .sources()[0]
        .clone()
}

#[test]
fn memory_push_read_replay_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, true)]));
    let stream = MemoryStream::new("engine_source_memory_test", schema.clone());
    let batch = |v: Vec<i64>| {
        RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(v))]).unwrap()
    };
    let spec = memory_spec("engine_source_memory_test", "v BIGINT");
    let mut src = open_source(&spec, spec.schema.clone().unwrap(), ctx(tmp.path())).unwrap();
    assert!(src.latest_offset(None).unwrap().is_none());
    assert_eq!(stream.push(batch(vec![1, 2])).unwrap(), 1);
    assert_eq!(stream.push(batch(vec![3])).unwrap(), 2);
    let o = src.latest_offset(None).unwrap().unwrap();
    assert_eq!(o, json!({"index": 2}));
    let vals = |src: &mut Box<dyn Source>,
                s: Option<&serde_json::Value>,
                e: &serde_json::Value|
     -> Vec<i64> {
        src.read(s, e)
            .unwrap()
            .batches
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect()
    };
    assert_eq!(vals(&mut src, None, &o), vec![1, 2, 3]);
    assert_eq!(vals(&mut src, Some(&json!({"index": 1})), &o), vec![3]);
    // Replay before commit: same rows.
    assert_eq!(vals(&mut src, None, &o), vec![1, 2, 3]);
    src.commit(&o).unwrap();
    stream
        .push_batches(vec![batch(vec![4]), batch(vec![5])])
        .unwrap();
    let o2 = src.latest_offset(Some(&o)).unwrap().unwrap();
    assert_eq!(o2, json!({"index": 3}));
    assert_eq!(vals(&mut src, Some(&o), &o2), vec![4, 5]);
    // Committed pushes are released.
    assert!(src.read(None, &o2).is_err());
    // A batch of another shape is refused.
    let other = Arc::new(Schema::new(vec![
        Field::new("x", DataType::Utf8, true),
        Field::new("y", DataType::Utf8, true),
    ]));
    let bad = RecordBatch::try_new(
        other,
        vec![
            Arc::new(arrow::array::StringArray::from(vec!["a"])),
            Arc::new(arrow::array::StringArray::from(vec!["b"])),
        ],
    )
    .unwrap();
    assert!(stream.push(bad).is_err());
    assert_eq!(stream.len(), 3);
    let _ = stream.schema().field(0).data_type().clone();
    assert!(src.read(Some(&o), &o2).unwrap().batches[0]
        .column(0)
        .is_valid(0));
}

#[test]
fn memory_unknown_stream_is_a_runtime_error() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = memory_spec("engine_source_no_such_stream", "v BIGINT");
    let err = open_source(&spec, spec.schema.clone().unwrap(), ctx(tmp.path()))
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        err,
        "flow `f`: no memory stream named `engine_source_no_such_stream`\n  help: create it with MemoryStream::new(\"engine_source_no_such_stream\", schema) before running the pipeline"
    );
}
