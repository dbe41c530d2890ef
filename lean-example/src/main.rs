//! A pipeline built from `pipelines` without its default features: no
//! delta-rs, no librdkafka. ERROR lines of the sample application logs,
//! counted per service in 5-minute windows (5-minute watermark), appended
//! to a table once each window closes; the table is Parquet, this build's
//! default table format.
//!
//! ```text
//! cargo run -p pipelines-lean-example -- run
//! ```
use dp::prelude::*;
use pipelines as dp;

/// ERROR lines per service and 5-minute window.
#[dp::append_flow(target = "error_counts")]
fn error_counts(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("ts TIMESTAMP, service_name STRING, level STRING, msg STRING")
        .option("maxFilesPerTrigger", "1")
        .load("../examples/data/logs")?
        .filter("level = 'ERROR'")?
        .with_watermark("ts", "5 minutes")?
        .group_by([
            window(col("ts"), "5 minutes", "5 minutes"),
            col("service_name"),
        ])
        .count()
}

fn main() -> std::process::ExitCode {
    dp::Pipeline::from_registry()
        .create_streaming_table("error_counts", dp::TableOptions::default())
        .spec_dir(env!("CARGO_MANIFEST_DIR"))
        .main()
}
