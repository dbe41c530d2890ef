//! Seed 002's example (`examples/event_counts`) end to end against a
//! separate broker process (tansu), killed mid-stream and restarted.
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
mod kafka_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use kafka_support::{consume_all, latest_per_key, produce, tansu_binary, Out, Tansu};

const EVENTS: usize = 600;
const TYPES: [&str; 5] = ["click", "view", "buy", "click", "scroll"];

fn input() -> Vec<Out> {
    (0..EVENTS)
        .map(|i| Out::kv(TYPES[i % TYPES.len()], &format!("{{\"n\":{i}}}")))
        .collect()
}

fn expected() -> BTreeMap<String, String> {
    let mut c: BTreeMap<String, u64> = BTreeMap::new();
    for m in input() {
        *c.entry(m.key.unwrap()).or_default() += 1;
    }
    c.into_iter().map(|(k, v)| (k, v.to_string())).collect()
}

fn run_child(brokers: &str, storage: &Path, out_topic: &str, fault: Option<&str>) -> Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.env("PIPELINE_CHILD", "1")
        .env("KAFKA_BROKERS", brokers)
        .env("EVENTS_TOPIC", "events")
        .env("EVENT_COUNTS_TOPIC", out_topic)
        .env("EVENT_COUNTS_STORAGE", storage)
        .env("MAX_OFFSETS_PER_TRIGGER", "100")
        .args(["run"]);
    match fault {
        Some(f) => cmd.env("PIPELINES_FAULT", f),
        None => cmd.env_remove("PIPELINES_FAULT"),
    };
    cmd.output().unwrap()
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
        "seed 002 example: counts per event type in the output topic equal the input's",
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
