//! An update flow: Kafka events → `CAST(key AS STRING) AS event_type`
//! → a running count per event type → a Kafka sink, in update output mode.
//! Each batch sends the counts it changed: key = event type, value = the
//! count as text, so the output topic's latest message per key is the
//! current total.
//!
//! ```text
//! KAFKA_BROKERS=127.0.0.1:9092 cargo run --example event_counts -- dry-run
//! KAFKA_BROKERS=127.0.0.1:9092 cargo run --example event_counts -- run
//! ```
//!
//! `EVENTS_TOPIC` and `EVENT_COUNTS_TOPIC` name the topics (default `events`
//! and `event-counts`); `MAX_OFFSETS_PER_TRIGGER` caps a batch (default: no cap).
use dp::prelude::*;
use pipelines as dp;

/// Running totals per event type, pushed to Kafka as they change.
#[dp::update_flow(target = "event_counts_sink", name = "event_counts_flow")]
fn event_counts(s: &Session) -> Result<DataFrame> {
    let mut reader = s
        .read_stream()
        .format("kafka")
        .option("kafka.bootstrap.servers", "${KAFKA_BROKERS}")
        .option("subscribe", "${EVENTS_TOPIC:-events}")
        .option("startingOffsets", "earliest");
    if let Ok(n) = std::env::var("MAX_OFFSETS_PER_TRIGGER") {
        reader = reader.option("maxOffsetsPerTrigger", n);
    }
    reader
        .load_default()?
        .select_expr(["CAST(key AS STRING) AS event_type"])?
        .group_by([col("event_type")])
        .count()?
        // The Kafka sink sends `key` and `value`.
        .select_expr(["event_type AS key", "CAST(count AS STRING) AS value"])
}

/// The pipeline binary's CLI (`tests/kafka_crash.rs` runs it too).
pub fn main() -> std::process::ExitCode {
    dp::Pipeline::from_registry()
        .spec_dir(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/event_counts"
        ))
        .main()
}
