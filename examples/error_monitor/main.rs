//! A windowed error monitor: JSON application logs → ERROR lines only →
//! errors per service in 5-minute windows sliding every minute, with a
//! 10-minute watermark, appended to the `error_counts` table.
//!
//! ```text
//! cargo run --example error_monitor -- run       # on examples/data/logs
//! cargo run --example error_monitor -- dry-run
//! cargo run --example error_monitor -- graph --format mermaid
//! ```
use dp::prelude::*;
use pipelines as dp;

/// Raw application logs, picked up file by file.
#[dp::table(comment = "raw application logs")]
fn logs(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("ts TIMESTAMP, service_name STRING, level STRING, msg STRING")
        .option("maxFilesPerTrigger", "1")
        .load("../data/logs")
}

/// ERROR lines only, kept as they are.
#[dp::table(comment = "error lines only", format = "parquet")]
fn errors(s: &Session) -> Result<DataFrame> {
    s.read_stream_table("logs")?.filter("level = 'ERROR'")
}

/// Errors per service in 5-minute windows sliding every minute.
#[dp::append_flow(target = "error_counts", comment = "windowed error counts")]
fn error_monitor(s: &Session) -> Result<DataFrame> {
    s.read_stream_table("errors")?
        .with_watermark("ts", "10 minutes")?
        .group_by([
            window(col("ts"), "5 minutes", "1 minute"),
            col("service_name"),
        ])
        .count()
}

/// Every error line on the console while developing.
#[dp::append_flow(target = "errors_console")]
fn print_errors(s: &Session) -> Result<DataFrame> {
    s.read_stream_table("errors")?
        .select_expr(["ts", "service_name", "msg"])
}

fn main() -> std::process::ExitCode {
    dp::Pipeline::from_registry()
        .spec_dir(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/error_monitor"
        ))
        .main()
}
