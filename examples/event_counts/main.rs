//! Seed 002's update flow: Kafka events → `CAST(key AS STRING) AS event_type`
//! → a running count per event type → a Kafka sink, in update output mode.
//!
//! ```text
//! KAFKA_BROKERS=127.0.0.1:9092 cargo run --example event_counts -- dry-run
//! ```
use dp::prelude::*;
use pipelines as dp;

/// Running totals per event type, pushed to Kafka as they change.
#[dp::update_flow(target = "event_counts_sink", name = "event_counts_flow")]
fn event_counts(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("kafka")
        .option("kafka.bootstrap.servers", "${KAFKA_BROKERS}")
        .option("subscribe", "events")
        .load_default()?
        .select_expr(["CAST(key AS STRING) AS event_type"])?
        .group_by([col("event_type")])
        .count()
}

fn main() -> std::process::ExitCode {
    dp::Pipeline::from_registry()
        .spec_dir(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/event_counts"
        ))
        .main()
}
