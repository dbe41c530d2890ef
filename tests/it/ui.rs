//! The web UI: `run --ui` rendered by a real browser (Debian's headless
//! Chromium) while the run runs, and `pipelines ui` over a finished run's
//! event log. The page's DOM must show every dataset and flow of the
//! pipeline and a flow's row count growing; the screenshot is saved under
//! the target directory (`ui.png`), and into `docs/ui.png` with
//! `PIPELINES_BLESS=1`.

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pipelines as dp;
use pipelines::engine::runtime::{run, RunOptions};
use pipelines::prelude::*;

use crate::metrics::free_port;

/// GET `path` from `addr`: the body of a 200 response.
fn get(addr: SocketAddr, path: &str) -> Option<String> {
    crate::metrics::get(addr, path)
        .and_then(|(status, body)| status.starts_with("HTTP/1.1 200").then_some(body))
}

/// Debian's Chromium: `PIPELINES_CHROMIUM` (scripts/test sets it: then it
/// must be there), else `/usr/bin/chromium` when installed.
fn chromium() -> Option<PathBuf> {
    match std::env::var_os("PIPELINES_CHROMIUM") {
        Some(p) => {
            let path = PathBuf::from(p);
            assert!(
                path.exists(),
                "PIPELINES_CHROMIUM={} does not exist",
                path.display()
            );
            Some(path)
        }
        None => Some(PathBuf::from("/usr/bin/chromium")).filter(|p| p.exists()),
    }
}

/// Chromium, headless, on `url` with `args` (its own profile directory);
/// killed after a minute.
fn browse(chromium: &Path, profile: &Path, url: &str, args: &[&str]) -> String {
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1400,900",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within 60 s on {url}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The number in the element carrying `attr="name"` (`1,234` → 1234).
fn number_in(dom: &str, attr: &str, name: &str) -> Option<u64> {
    let at = dom.find(&format!("{attr}=\"{name}\""))?;
    let text = &dom[at..];
    let start = text.find('>')? + 1;
    let end = start + text[start..].find('<')?;
    text[start..end].replace(',', "").trim().parse().ok()
}

fn pipeline() -> dp::Pipeline {
    dp::Pipeline::new()
        .create_streaming_table(
            "ticks",
            dp::TableOptions {
                format: Some("parquet".into()),
                expectations: vec![dp::Expectation::warn("even", "value % 2 = 0")],
                ..Default::default()
            },
        )
        .append_flow("tick", "ticks", |s: &Session| {
            s.read_stream()
                .format("rate")
                .option("rowsPerSecond", "400")
                .load_default()
        })
        .create_sink("evens_out", "memory", [("queryName", "ui_evens")])
        .append_flow("evens", "evens_out", |s: &Session| {
            s.read_stream_table("ticks")?.filter("value % 2 = 0")
        })
        .create_streaming_table(
            "per_second",
            dp::TableOptions {
                format: Some("parquet".into()),
                ..Default::default()
            },
        )
        .append_flow("count_per_second", "per_second", |s: &Session| {
            s.read_stream_table("ticks")?
                .with_watermark("timestamp", "1 second")?
                .group_by([window(col("timestamp"), "1 second", "1 second")])
                .count()
        })
}

#[test]
fn the_page_draws_every_dataset_and_flow_and_follows_the_run() {
    let Some(chromium) = chromium() else {
        eprintln!("skipped: no Chromium (install Debian's chromium or set PIPELINES_CHROMIUM)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = dp::spec::parse_str(
        "name: ui_demo\nstorage: ./storage\nflows:\n  tick:\n    trigger: { processing_time: 200 milliseconds }\n  evens:\n    trigger: { processing_time: 200 milliseconds }\n  count_per_second:\n    trigger: { processing_time: 500 milliseconds }\n",
        &dir.join("pipeline.yml"),
    )
    .unwrap();
    let graph = pipeline().build(&spec).map_err(|d| d.to_string()).unwrap();
    let addr = free_port();
    let mut opts = RunOptions::new(dir, dir.join("storage"));
    opts.continuous = true;
    opts.ui = Some(addr);
    let stop = opts.stop.clone();
    let running = std::thread::spawn(move || run(&graph, &opts));
    let deadline = Instant::now() + Duration::from_secs(60);
    let batches = |v: String| {
        serde_json::from_str::<serde_json::Value>(&v).unwrap()["flows"]["tick"]["figures"]
            ["batches"]
            .as_u64()
            .unwrap_or(0)
    };
    while get(addr, "/api/run").map(batches).unwrap_or(0) < 2 {
        assert!(Instant::now() < deadline, "no batch within 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Two live updates (server-sent events), then the page stops listening
    // so that the headless browser's clock can run out.
    let url = format!("http://{addr}/?updates=2");
    let profile = dir.join("chromium-profile");
    let first = browse(
        &chromium,
        &profile,
        &url,
        &["--virtual-time-budget=3000", "--dump-dom"],
    );
    std::thread::sleep(Duration::from_millis(1500));
    let second = browse(
        &chromium,
        &profile,
        &url,
        &["--virtual-time-budget=3000", "--dump-dom"],
    );
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ui.png");
    browse(
        &chromium,
        &profile,
        &url,
        &[
            "--virtual-time-budget=3000",
            &format!("--screenshot={}", shot.display()),
        ],
    );
    stop.store(true, Ordering::SeqCst);
    let summary = running.join().unwrap().unwrap();

    for (attr, name) in [
        ("data-dataset", "ticks"),
        ("data-dataset", "evens_out"),
        ("data-dataset", "per_second"),
        ("data-flow", "count_per_second"),
        ("data-flow", "tick"),
        ("data-flow", "evens"),
        ("data-flow-row", "tick"),
        ("data-flow-row", "evens"),
        ("data-history", "tick"),
        ("data-expectation", "even"),
    ] {
        assert!(
            first.contains(&format!("{attr}=\"{name}\"")),
            "{attr}={name} missing from the page:\n{first}"
        );
    }
    assert!(first.contains("data-node=\"src:rate source"), "{first}");
    assert!(first.contains(">RUNNING<"), "{first}");
    let rows = |dom: &str| number_in(dom, "data-flow-rows-in", "tick").unwrap();
    assert!(
        rows(&second) > rows(&first),
        "the row count did not grow: {} then {}",
        rows(&first),
        rows(&second)
    );
    // The page was updated live, not only drawn from its first view.
    let at = first.find("data-updates=\"").unwrap() + "data-updates=\"".len();
    let updates: u64 = first[at..].split('"').next().unwrap().parse().unwrap();
    assert_eq!(updates, 2, "the live updates did not reach the page");
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    if std::env::var_os("PIPELINES_BLESS").is_some() {
        std::fs::copy(
            &shot,
            Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ui.png"),
        )
        .unwrap();
    }
    let tick = summary.flows.iter().find(|f| f.flow == "tick").unwrap();
    assert!(tick.input_rows >= rows(&second));
}

#[test]
fn pipelines_ui_serves_a_finished_run_from_its_event_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("in")).unwrap();
    for (i, lines) in [["{\"n\":1}", "{\"n\":2}"], ["{\"n\":3}", "{\"n\":4}"]]
        .iter()
        .enumerate()
    {
        std::fs::write(dir.join(format!("in/{i}.json")), lines.join("\n") + "\n").unwrap();
        std::thread::sleep(Duration::from_millis(15));
    }
    let p = dp::Pipeline::new()
        .create_streaming_table(
            "copied",
            dp::TableOptions {
                format: Some("parquet".into()),
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
        "name: yesterday\nstorage: ./storage\n",
        &dir.join("pipeline.yml"),
    )
    .unwrap();
    let graph = p.build(&spec).map_err(|d| d.to_string()).unwrap();
    let summary = run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();
    assert_eq!(summary.flows[0].batches, 2);

    let addr = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pipelines"))
        .args(["ui", "--storage"])
        .arg(dir.join("storage"))
        .args(["--addr", &addr.to_string()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let view = loop {
        if let Some(v) = get(addr, "/api/run") {
            break v;
        }
        assert!(Instant::now() < deadline, "`pipelines ui` never answered");
        std::thread::sleep(Duration::from_millis(50));
    };
    let metrics = get(addr, "/metrics").unwrap();
    let page = get(addr, "/").unwrap();
    let _ = child.kill();
    let mut announced = String::new();
    let _ = child.stdout.take().unwrap().read_to_string(&mut announced);
    let _ = child.wait();
    assert_eq!(
        announced.trim(),
        format!("UI at http://{addr}/ and metrics at http://{addr}/metrics (this machine only)")
    );
    let v: serde_json::Value = serde_json::from_str(&view).unwrap();
    assert_eq!(v["pipeline"], "yesterday");
    assert_eq!(v["state"], "COMPLETED");
    assert_eq!(v["flow_order"], serde_json::json!(["copy"]));
    let copy = &v["flows"]["copy"];
    assert_eq!(copy["state"], "COMPLETED");
    assert_eq!(copy["target"], "copied");
    assert_eq!(copy["figures"]["batches"], 2);
    assert_eq!(copy["figures"]["inputRows"], 4);
    let history: Vec<(u64, u64)> = copy["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["batch_id"].as_u64().unwrap(),
                b["input_rows"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(history, [(0, 2), (1, 2)]);
    assert_eq!(
        v["datasets"]["copied"],
        serde_json::json!({"kind": "streaming table", "format": "parquet", "rows": 4})
    );
    assert!(
        metrics.contains("pipelines_input_rows_total{pipeline=\"yesterday\",flow=\"copy\"} 4"),
        "{metrics}"
    );
    // The page carries the view it starts from.
    assert!(page.contains("\"pipeline\":\"yesterday\""), "{page}");
}

#[test]
fn a_terminal_shows_a_progress_bar_of_the_backlog_and_a_log_does_not() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("pipeline.yml"),
        "name: bar\nstorage: ./storage\nlibraries:\n  - glob:\n      include: transformations/**\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("transformations")).unwrap();
    std::fs::write(
        dir.join("transformations/copy.sql"),
        "CREATE STREAMING TABLE copied AS SELECT * FROM STREAM read_files('in', format => 'json', schema => 'n BIGINT', maxFilesPerTrigger => 1);\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("in")).unwrap();
    for i in 0..3 {
        std::fs::write(dir.join(format!("in/{i}.json")), format!("{{\"n\":{i}}}\n")).unwrap();
        std::thread::sleep(Duration::from_millis(15));
    }
    // On a terminal (a pseudo-terminal made by `script`).
    let on_tty = Command::new("script")
        .args([
            "-qec",
            &format!("{} run", env!("CARGO_BIN_EXE_pipelines")),
            "/dev/null",
        ])
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let screen = String::from_utf8_lossy(&on_tty.stdout).to_string();
    assert!(on_tty.status.success(), "{screen}");
    for drawn in ["copied", "1/3 files", "3/3 files", "rows/s · ETA"] {
        assert!(screen.contains(drawn), "`{drawn}` not drawn:\n{screen}");
    }
    assert!(screen.contains("batch     2"), "{screen}");
    // Into a log: the run's report only, no bar, no batch lines.
    std::fs::write(dir.join("in/3.json"), "{\"n\":3}\n").unwrap();
    let logged = Command::new(env!("CARGO_BIN_EXE_pipelines"))
        .arg("run")
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(logged.status.success());
    let err = String::from_utf8_lossy(&logged.stderr);
    assert_eq!(err, "", "nothing but the report when not on a terminal");
    let out = String::from_utf8_lossy(&logged.stdout);
    assert!(!out.contains("ETA") && !out.contains('\x1b'), "{out}");
}
