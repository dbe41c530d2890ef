//! The Kafka update-flow example (`examples/event_counts`: a running count
//! per event type, Kafka to Kafka) end to end against a separate broker
//! process (tansu), killed mid-stream and restarted.
//!
//! This test binary is also the pipeline binary: with `PIPELINE_CHILD=1` it
//! runs the example's `main()` (the example's flow and `pipeline.yml`). The
//! test starts a tansu broker on a free loopback port, produces the input
//! events, runs the pipeline once without a crash, then once per kill point
//! (SIGKILL through `PIPELINES_FAULT`: after the offsets write, in the
//! middle of the Kafka sink's batch, after the sink's flush before the
//! commit), each time restarting it. Every run must end with the latest
//! count per event type in the output topic equal to the input's counts
//! (every input message reflected, at least once) and to the uncrashed run.
//!
//! The broker binary comes from `PIPELINES_TANSU` or
//! `~/.cache/pipelines-tansu` (installed by `scripts/test`). Without it the
//! test fails under CI (`CI` set) and is skipped, saying so, otherwise.

#[path = "../examples/event_counts/main.rs"]
mod event_counts_example;
use pipelines_test_support::kafka as kafka_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use kafka_support::{consume_all, latest_per_key, produce, tansu_binary, Out, Tansu};

const EVENTS: usize = 600;
const TYPES: [&str; 5] = ["click", "view", "buy", "click", "scroll"];

fn input() -> Vec<Out> {
    more_input(0, EVENTS)
}

/// Events `from..to` of the same cycle of event types.
fn more_input(from: usize, to: usize) -> Vec<Out> {
    (from..to)
        .map(|i| Out::kv(TYPES[i % TYPES.len()], &format!("{{\"n\":{i}}}")))
        .collect()
}

fn expected() -> BTreeMap<String, String> {
    expected_for(EVENTS)
}

/// The count per event type of the first `n` events.
fn expected_for(n: usize) -> BTreeMap<String, String> {
    let mut c: BTreeMap<String, u64> = BTreeMap::new();
    for m in more_input(0, n) {
        *c.entry(m.key.unwrap()).or_default() += 1;
    }
    c.into_iter().map(|(k, v)| (k, v.to_string())).collect()
}

/// Starts the example with `run --continuous` (the spec gives its flow the
/// real-time trigger).
fn spawn_real_time(
    brokers: &str,
    storage: &Path,
    out_topic: &str,
    fault: Option<&str>,
) -> std::process::Child {
    child(brokers, storage, out_topic, fault)
        .args(["run", "--continuous"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until the latest count per key in `topic` is `want` (60 s at most).
fn wait_for_counts(brokers: &str, topic: &str, want: &BTreeMap<String, String>) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        if &latest_per_key(&consume_all(brokers, topic)) == want {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    false
}

/// Ctrl-C: the run stops after committing its epoch.
fn interrupt(child: std::process::Child) -> Output {
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    child.wait_with_output().unwrap()
}

fn commits(storage: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(storage.join("checkpoints/event_counts_flow/commits"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().to_string())
                    .filter(|n| !n.starts_with('.'))
                    .collect()
            })
            .unwrap_or_default();
    names.sort();
    names
}

/// The example as a child process: `PIPELINE_CHILD`, the brokers, the
/// topics, the storage and `PIPELINES_FAULT` (set or cleared).
fn child(brokers: &str, storage: &Path, out_topic: &str, fault: Option<&str>) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.env("PIPELINE_CHILD", "1")
        .env("KAFKA_BROKERS", brokers)
        .env("EVENTS_TOPIC", "events")
        .env("EVENT_COUNTS_TOPIC", out_topic)
        .env("EVENT_COUNTS_STORAGE", storage);
    match fault {
        Some(f) => cmd.env("PIPELINES_FAULT", f),
        None => cmd.env_remove("PIPELINES_FAULT"),
    };
    cmd
}

fn run_child(brokers: &str, storage: &Path, out_topic: &str, fault: Option<&str>) -> Output {
    child(brokers, storage, out_topic, fault)
        .env("MAX_OFFSETS_PER_TRIGGER", "100")
        .args(["run"])
        .output()
        .unwrap()
}

fn check(name: &str, ok: bool, detail: impl FnOnce() -> String) -> bool {
    if ok {
        println!("test {name} ... ok");
    } else {
        println!("test {name} ... FAILED\n{}", detail());
    }
    ok
}

fn show(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn main() -> std::process::ExitCode {
    if std::env::var("PIPELINE_CHILD").is_ok() {
        return event_counts_example::main();
    }
    let Some(binary) = tansu_binary() else {
        if std::env::var_os("CI").is_some() {
            println!("test kafka crash recovery against tansu ... FAILED\nthe tansu broker is missing: scripts/test installs it under ~/.cache/pipelines-tansu (or set PIPELINES_TANSU)");
            return std::process::ExitCode::FAILURE;
        }
        println!("test kafka crash recovery against tansu ... skipped: no tansu binary (run scripts/test once, or set PIPELINES_TANSU)");
        return std::process::ExitCode::SUCCESS;
    };
    let broker = Tansu::start(binary);
    let brokers = broker.brokers.clone();
    broker.create_topic("events", 3);
    let tmp = tempfile::tempdir().unwrap();
    let mut results = Vec::new();
    produce(&brokers, "events", &input());

    // The reference: a run without a crash.
    broker.create_topic("counts-ref", 1);
    let reference = run_child(&brokers, &tmp.path().join("ref"), "counts-ref", None);
    let ref_out = latest_per_key(&consume_all(&brokers, "counts-ref"));
    let ref_stdout = String::from_utf8_lossy(&reference.stdout).to_string();
    results.push(check(
        "event_counts example: counts per event type in the output topic equal the input's",
        reference.status.success()
            && ref_out == expected()
            && ref_stdout.contains(&format!("{EVENTS} rows in")),
        || {
            format!(
                "{}\nout: {ref_out:?}\nexpected: {:?}",
                show(&reference),
                expected()
            )
        },
    ));

    for (i, point) in [
        "after_offsets:2",
        "kafka_sink_partial:3",
        "before_commit:1",
        "before_commit:5",
    ]
    .iter()
    .enumerate()
    {
        let topic = format!("counts-{i}");
        broker.create_topic(&topic, 1);
        let storage = tmp.path().join(format!("crash-{i}"));
        let crashed = run_child(&brokers, &storage, &topic, Some(point));
        let restarted = run_child(&brokers, &storage, &topic, None);
        let all = consume_all(&brokers, &topic);
        let out = latest_per_key(&all);
        let total: u64 = out.values().map(|v| v.parse::<u64>().unwrap_or(0)).sum();
        let stdout = String::from_utf8_lossy(&restarted.stdout).to_string();
        results.push(check(
            &format!("killed at {point}, restarted: every input message counted, the same counts as without the crash"),
            !crashed.status.success()
                && restarted.status.success()
                && stdout.contains("replayed")
                && out == ref_out
                && total == EVENTS as u64,
            || {
                format!(
                    "crashed: {}\nrestarted: {}\nout: {out:?}\nreference: {ref_out:?}\nmessages: {}",
                    show(&crashed),
                    show(&restarted),
                    all.len()
                )
            },
        ));
    }
    // Real time (`run --continuous`; the example's spec sets the trigger):
    // epoch 0 committed on Ctrl-C, then a SIGKILL in the middle of epoch 1
    // after its first step's counts were sent, then a restart.
    broker.create_topic("counts-rt", 1);
    let storage = tmp.path().join("real-time");
    let first = spawn_real_time(&brokers, &storage, "counts-rt", None);
    let reached = wait_for_counts(&brokers, "counts-rt", &expected());
    let stopped = interrupt(first);
    results.push(check(
        "real time: counts arrive without a batch boundary; Ctrl-C commits the epoch",
        reached && stopped.status.success() && commits(&storage) == ["0"],
        || {
            format!(
                "reached: {reached}
{}
commits: {:?}",
                show(&stopped),
                commits(&storage)
            )
        },
    ));
    produce(&brokers, "events", &more_input(EVENTS, EVENTS + 300));
    let crashed = spawn_real_time(
        &brokers,
        &storage,
        "counts-rt",
        Some("real_time_delivered:0"),
    )
    .wait_with_output()
    .unwrap();
    let after_crash = commits(&storage);
    let restarted = spawn_real_time(&brokers, &storage, "counts-rt", None);
    let want = expected_for(EVENTS + 300);
    let reached = wait_for_counts(&brokers, "counts-rt", &want);
    let stopped = interrupt(restarted);
    let out = latest_per_key(&consume_all(&brokers, "counts-rt"));
    results.push(check(
        "real time: killed mid-epoch after sending counts, restarted: every message counted once, the epoch committed",
        !crashed.status.success()
            && after_crash == ["0"]
            && reached
            && stopped.status.success()
            && out == want
            && commits(&storage) == ["0", "1"],
        || {
            format!(
                "crashed: {}
commits after the crash: {after_crash:?}
restarted: {}
out: {out:?}
want: {want:?}
commits: {:?}",
                show(&crashed),
                show(&stopped),
                commits(&storage)
            )
        },
    ));

    let passed = results.iter().filter(|ok| **ok).count();
    let failed = results.len() - passed;
    println!(
        "\ntest result: {}. {passed} passed; {failed} failed; 0 ignored; 0 measured; 0 filtered out",
        if failed == 0 { "ok" } else { "FAILED" }
    );
    if failed == 0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
