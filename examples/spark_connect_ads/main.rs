//! Ad impressions and clicks, one dataset per operator: the Rust twin of the
//! Spark Declarative Pipelines reference project
//! `tests/spark/connect/python_project/transformations/ads.py`, dataset for
//! dataset. Spark 4.3's rows for every table are in
//! `tests/spark/connect/expected/python_project/`, and
//! `tests/it/spark_connect_local.rs` checks that this engine gives exactly
//! those.
//!
//! The data: `tests/spark/connect/data/{impressions,clicks}/`, four JSON
//! files each, one minute of events per file (or the same layout under
//! `$CONNECT_TEST_DATA`). The file source takes the oldest file first: a
//! fresh git checkout has no meaningful modification times, so the test
//! copies the files with times in name order, as the Python project's
//! scripts do.
//!
//! ```text
//! cargo run --example spark_connect_ads -- dry-run
//! CONNECT_TEST_DATA=/tmp/ordered-data cargo run --example spark_connect_ads -- run
//! ```
use std::path::Path;

use dp::prelude::*;
use pipelines as dp;

const IMPRESSION_SCHEMA: &str =
    "impression_id STRING, ts TIMESTAMP, ad_id STRING, user_id STRING, country STRING";
const CLICK_SCHEMA: &str = "click_id STRING, ts TIMESTAMP, ad_id STRING, user_id STRING";

/// `$CONNECT_TEST_DATA/<sub>`, or the committed data in the repository.
fn data_dir(sub: &str) -> String {
    let base = std::env::var("CONNECT_TEST_DATA").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/spark/connect/data").to_string()
    });
    Path::new(&base).join(sub).to_string_lossy().into_owned()
}

// The file sources: explicit schema, one file per micro-batch (so that
// watermarks advance file by file). The raw tables are these; the
// watermarked flows read them too, as ads.py does (Spark Connect analyses
// `withWatermark` when the flow is defined, before the tables exist).

fn impression_files(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema(IMPRESSION_SCHEMA)
        .option("maxFilesPerTrigger", "1")
        .load(data_dir("impressions"))
}

fn click_files(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema(CLICK_SCHEMA)
        .option("maxFilesPerTrigger", "1")
        .load(data_dir("clicks"))
}

// 1. File sources read as streams.

/// The impression files as they are.
#[dp::table(comment = "ad impressions, one JSON file per micro-batch")]
fn impressions_raw(s: &Session) -> Result<DataFrame> {
    impression_files(s)
}

/// The click files as they are.
#[dp::table]
fn clicks_raw(s: &Session) -> Result<DataFrame> {
    click_files(s)
}

// Stateless downstream flows read the upstream tables, one committed file
// per micro-batch.

fn impressions(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .option("maxFilesPerTrigger", "1")
        .table("impressions_raw")
}

fn clicks(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .option("maxFilesPerTrigger", "1")
        .table("clicks_raw")
}

// 2. A filter.

/// Impressions from the US.
#[dp::table]
fn impressions_us(s: &Session) -> Result<DataFrame> {
    impressions(s)?.filter(col("country").eq(lit("US")))
}

// 3. A with_column.

/// Impressions with `ad_country` = `<ad_id>/<country>`.
#[dp::table]
fn impressions_tagged(s: &Session) -> Result<DataFrame> {
    use datafusion::functions::string::expr_fn::concat_ws;
    impressions(s)?.with_column(
        "ad_country",
        concat_ws(lit("/"), vec![col("ad_id"), col("country")]),
    )
}

// 4. with_watermark + a tumbling-window count, append mode.

/// Impressions per country and minute, written once the minute has closed.
#[dp::table]
fn impressions_per_minute(s: &Session) -> Result<DataFrame> {
    impression_files(s)?
        .with_watermark("ts", "30 seconds")?
        .group_by([tumbling_window(col("ts"), "1 minute"), col("country")])
        .count()?
        .select_expr([
            "window.start AS window_start",
            "window.end AS window_end",
            "country",
            "count",
        ])
}

// 5. drop_duplicates_within_watermark.

/// The first of each `impression_id` within the watermark's minute.
#[dp::table]
fn impressions_dedup(s: &Session) -> Result<DataFrame> {
    impression_files(s)?
        .with_watermark("ts", "1 minute")?
        .drop_duplicates_within_watermark(["impression_id"])
}

// 6. A stream-stream inner join, watermarks on both sides, an event-time range.

/// Clicks joined to the impression of the same ad and user they follow
/// within a minute.
#[dp::table]
fn attributed_clicks(s: &Session) -> Result<DataFrame> {
    let i = impression_files(s)?.with_watermark("ts", "1 minute")?;
    // A join's output may not have two columns of one name (Spark's
    // `.alias("i")` / `.alias("c")` have no equivalent here): the click
    // side's columns get names of their own first.
    let c = click_files(s)?
        .select_expr([
            "click_id",
            "ts AS click_ts",
            "ad_id AS click_ad_id",
            "user_id AS click_user_id",
        ])?
        .with_watermark("click_ts", "1 minute")?;
    // SQL text for the condition: it has an interval, as ads.py's
    // `F.expr("INTERVAL 1 MINUTE")`.
    i.join(
        &c,
        "ad_id = click_ad_id AND user_id = click_user_id \
         AND click_ts >= ts AND click_ts <= ts + INTERVAL 1 MINUTE",
        JoinType::Inner,
    )?
    .select_expr([
        "impression_id",
        "click_id",
        "ad_id",
        "user_id",
        "ts AS impression_ts",
        "click_ts",
    ])
}

// 7. A union of two streams.

/// Impressions and clicks in one stream, with their kind.
#[dp::table]
fn activity(s: &Session) -> Result<DataFrame> {
    let i = impressions(s)?.select([
        col("ts"),
        col("user_id"),
        col("ad_id"),
        lit("impression").alias("kind"),
    ])?;
    let c = clicks(s)?.select([
        col("ts"),
        col("user_id"),
        col("ad_id"),
        lit("click").alias("kind"),
    ])?;
    i.union(&c)
}

// 8. A materialized view: a batch aggregation over a streaming table.

/// Clicks per ad and the first click's time, recomputed from `clicks_raw`.
#[dp::materialized_view]
fn clicks_per_ad(s: &Session) -> Result<DataFrame> {
    s.read_table("clicks_raw")?.group_by([col("ad_id")]).agg([
        count_all().alias("clicks"),
        min(col("ts")).alias("first_click"),
    ])
}

fn main() -> std::process::ExitCode {
    dp::Pipeline::from_registry()
        .spec_dir(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/spark_connect_ads"
        ))
        .main()
}
