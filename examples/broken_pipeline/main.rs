//! A deliberately broken pipeline: `dry-run` reports every mistake at once,
//! each with the line that declared it and a fix, and exits non-zero.
//!
//! ```text
//! cargo run --example broken_pipeline -- dry-run
//! ```
use dp::prelude::*;
use pipelines as dp;

#[dp::table]
fn logs(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("ts TIMESTAMP, service_name STRING, level STRING, msg STRING")
        .load("data/logs")
}

/// Mistake: a typo in a column name.
#[dp::append_flow(target = "error_counts")]
fn error_monitor(s: &Session) -> Result<DataFrame> {
    s.read_stream_table("logs")?
        .filter("levle = 'ERROR'")?
        .with_watermark("ts", "10 minutes")?
        .group_by([
            window(col("ts"), "5 minutes", "1 minute"),
            col("service_name"),
        ])
        .count()
}

/// Mistake: an update flow into a Delta table (update flows only target sinks).
#[dp::update_flow(target = "error_counts")]
fn totals(s: &Session) -> Result<DataFrame> {
    s.read_stream_table("logs")?
        .group_by([col("service_name")])
        .count()
}

/// Mistake: reads a dataset that does not exist (a typo of `logs`).
#[dp::append_flow(target = "archive")]
fn archive_logs(s: &Session) -> Result<DataFrame> {
    s.read_stream_table("log")
}

/// Mistakes in the query's shape: counts in append mode without a watermark,
/// then a sort of the stream (only possible after an aggregation in
/// complete mode).
#[dp::append_flow(target = "service_counts")]
fn service_counts(s: &Session) -> Result<DataFrame> {
    s.read_stream_table("logs")?
        .group_by([col("service_name")])
        .count()?
        .order_by(["count DESC"])
}

/// Mistakes: `a` and `b` read each other.
#[dp::table]
fn a(s: &Session) -> Result<DataFrame> {
    s.read_stream_table("b")
}

#[dp::table]
fn b(s: &Session) -> Result<DataFrame> {
    s.read_stream_table("a")
}

fn main() -> std::process::ExitCode {
    dp::Pipeline::from_registry()
        .spec_dir(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/broken_pipeline"
        ))
        .main()
}
