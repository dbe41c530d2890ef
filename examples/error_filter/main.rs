//! The stateless part of the log pipeline in `examples/error_monitor`: JSON
//! application logs → ERROR lines only → a Parquet table and the console.
//!
//! ```text
//! cargo run --example error_filter -- run
//! ```
//! reads the sample logs in `examples/data/logs` one file per micro-batch,
//! writes `examples/error_filter/pipeline-storage/tables/errors` (Parquet with
//! a `_spark_metadata` manifest, readable by Spark) and prints each batch's
//! errors. Run it again: nothing is read twice. Add a file to the logs
//! directory and run again: only the new file is processed.
use dp::prelude::*;
use pipelines as dp;

/// Raw application logs, picked up one file per micro-batch.
#[dp::table(comment = "raw application logs")]
fn logs(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("ts TIMESTAMP, service_name STRING, level STRING, msg STRING")
        .option("maxFilesPerTrigger", "1")
        .load("../data/logs")
}

/// ERROR lines only.
#[dp::table(comment = "error lines only")]
fn errors(s: &Session) -> Result<DataFrame> {
    s.read_stream_table("logs")?.filter("level = 'ERROR'")
}

/// Every error line on the console.
#[dp::append_flow(target = "errors_console")]
fn print_errors(s: &Session) -> Result<DataFrame> {
    s.read_stream_table("errors")?
        .select_expr(["ts", "service_name", "msg"])
}

fn main() -> std::process::ExitCode {
    dp::Pipeline::from_registry()
        .spec_dir(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/error_filter"
        ))
        .main()
}
