//! A windowed append flow: JSON events with a 10-minute watermark,
//! counted per user in 10-minute tumbling windows, appended to a table once
//! each window closes.
//!
//! ```text
//! cargo run --example windowed_counts -- run
//! cargo run --example windowed_counts -- dry-run
//! ```
use dp::prelude::*;
use pipelines as dp;

/// Events per user and 10-minute window, emitted when the watermark passes the window's end.
#[dp::append_flow(target = "user_counts")]
fn windowed_counts(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("timestamp TIMESTAMP, userId STRING, action STRING")
        .option("maxFilesPerTrigger", "1")
        .load("data/events")?
        .with_watermark("timestamp", "10 minutes")?
        .group_by([
            window(col("timestamp"), "10 minutes", "10 minutes"),
            col("userId"),
        ])
        .count()
}

fn main() -> std::process::ExitCode {
    dp::Pipeline::from_registry()
        .create_streaming_table("user_counts", dp::TableOptions::default())
        .spec_dir(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/windowed_counts"
        ))
        .main()
}
