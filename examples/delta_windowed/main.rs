//! Events counted per user in 10-minute tumbling windows (10-minute
//! watermark) into a Delta table, and a second flow that reads that Delta
//! table as a stream into another one.
//!
//! `user_counts` is a Delta table (the default table format): each
//! micro-batch's closed windows are one Delta commit carrying the flow's
//! query id and batch id. `user_counts_flat` streams `user_counts` commit by
//! commit (Spark's Delta source) and flattens the window. Any Delta reader
//! opens both under `pipeline-storage/tables/`:
//!
//! ```text
//! cargo run --example delta_windowed -- run
//! python -c "import deltalake; print(deltalake.DeltaTable('examples/delta_windowed/pipeline-storage/tables/user_counts').to_pyarrow_table())"
//! ```
use dp::prelude::*;
use pipelines as dp;

/// Events per user and 10-minute window, appended once the watermark passes the window's end.
#[dp::table(comment = "events per user and 10-minute window")]
fn user_counts(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("timestamp TIMESTAMP, userId STRING, action STRING")
        .option("maxFilesPerTrigger", "1")
        .load("../windowed_counts/data/events")?
        .with_watermark("timestamp", "10 minutes")?
        .group_by([
            window(col("timestamp"), "10 minutes", "10 minutes"),
            col("userId"),
        ])
        .count()
}

/// `user_counts` read as a Delta stream: each new commit's rows, once.
#[dp::table(comment = "user_counts streamed from its Delta log, window flattened")]
fn user_counts_flat(s: &Session) -> Result<DataFrame> {
    s.read_stream_table("user_counts")?.select_expr([
        "window.start AS window_start",
        "window.end AS window_end",
        "userId",
        "count",
    ])
}

fn main() -> std::process::ExitCode {
    dp::Pipeline::from_registry()
        .spec_dir(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/delta_windowed"
        ))
        .main()
}
