//! `run --ui`: the run's metrics in Prometheus' text format at `/metrics`,
//! fetched over HTTP while a continuous run runs, equal to its summary.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pipelines as dp;
use pipelines::engine::runtime::{run, RunOptions};
use pipelines::prelude::*;
use pipelines::Expectation;

/// A free loopback port.
pub(crate) fn free_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// GET `path` from `addr`: (status line, body).
pub(crate) fn get(addr: SocketAddr, path: &str) -> Option<(String, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_string(), body.to_string()))
}

fn write(dir: &Path, name: &str, lines: &[&str]) {
    std::fs::create_dir_all(dir.join("in")).unwrap();
    std::fs::write(dir.join("in").join(name), lines.join("\n") + "\n").unwrap();
    std::thread::sleep(Duration::from_millis(15));
}

/// The value of `name{pipeline="metrics",flow="copy"}` in `text`.
fn value(text: &str, name: &str) -> Option<f64> {
    let prefix = format!("{name}{{pipeline=\"metrics\",flow=\"copy\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.parse().ok())
}

#[test]
fn metrics_served_while_running_equal_the_run_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(dir, "1.json", &[r#"{"n":1}"#, r#"{"n":-1}"#, r#"{"n":2}"#]);
    write(dir, "2.json", &[r#"{"n":3}"#, r#"{"n":0}"#]);
    write(
        dir,
        "3.json",
        &[r#"{"n":4}"#, r#"{"n":5}"#, r#"{"n":6}"#, r#"{"n":7}"#],
    );
    let p = dp::Pipeline::new()
        .create_streaming_table(
            "copied",
            dp::TableOptions {
                format: Some("parquet".into()),
                expectations: vec![Expectation::warn("positive", "n > 0")],
                ..Default::default()
            },
        )
        .append_flow("copy", "copied", |s: &Session| {
            s.read_stream()
                .format("json")
                .schema("n BIGINT")
                .option("maxFilesPerTrigger", "1")
                .load("in")
        });
    let spec = dp::spec::parse_str(
        "name: metrics\nstorage: ./storage\n",
        &dir.join("pipeline.yml"),
    )
    .unwrap();
    let graph = p.build(&spec).map_err(|d| d.to_string()).unwrap();
    let addr = free_port();
    let mut opts = RunOptions::new(dir, dir.join("storage"));
    opts.continuous = true;
    opts.ui = Some(addr);
    let stop = opts.stop.clone();
    let running = std::thread::spawn(move || run(&graph, &opts));
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        if let Some((status, body)) = get(addr, "/metrics") {
            assert_eq!(status, "HTTP/1.1 200 OK");
            if value(&body, "pipelines_input_rows_total") == Some(9.0) {
                break body;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the metrics never showed 9 input rows"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let (_, flows) = get(addr, "/api/flows").unwrap();
    stop.store(true, Ordering::SeqCst);
    let summary = running.join().unwrap().unwrap();
    let f = &summary.flows[0];
    assert_eq!(
        value(&text, "pipelines_batches_total"),
        Some(f.batches as f64)
    );
    assert_eq!(f.batches, 3);
    assert_eq!(
        value(&text, "pipelines_input_rows_total"),
        Some(f.input_rows as f64)
    );
    assert_eq!(
        value(&text, "pipelines_output_rows_total"),
        Some(f.output_rows as f64)
    );
    assert_eq!(f.output_rows, 9);
    assert_eq!(
        value(&text, "pipelines_expectation_failed_rows_total"),
        Some(2.0)
    );
    assert_eq!(value(&text, "pipelines_late_rows_total"), Some(0.0));
    assert!(text.contains("# TYPE pipelines_state_rows gauge"), "{text}");
    assert!(
        flows.starts_with("{\"copy\":{\"batches\":3,\"inputRows\":9,\"outputRows\":9,"),
        "{flows}"
    );
    // The server stopped with the run.
    assert!(get(addr, "/metrics").is_none());
}

#[test]
fn a_ui_address_that_is_not_one_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("pipeline.yml"),
        "name: metrics\nstorage: ./storage\n",
    )
    .unwrap();
    let p = dp::Pipeline::new()
        .create_sink("m", "memory", [("queryName", "ui_refused")])
        .append_flow("f", "m", |s: &Session| {
            s.read_stream()
                .format("memory")
                .schema("n BIGINT")
                .load("ui_refused_in")
        });
    let (code, _out, err) = crate::sql::cli(p, tmp.path(), &["run", "--ui", "localhost"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err.trim(),
        "error: --ui localhost: not an address; write host:port, e.g. `--ui 127.0.0.1:4040` (or `--ui 0.0.0.0:4040` to be reachable from other machines)"
    );
}
