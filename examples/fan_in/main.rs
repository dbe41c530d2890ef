//! Fan-in: two append flows write into one table. Each keeps its own
//! checkpoint and commits on its own, and no row of either is lost (Spark
//! 4.3 keeps only one flow's rows in this case with a Parquet table).
//!
//! ```text
//! cargo run --example fan_in -- run
//! ```
use dp::prelude::*;
use pipelines as dp;

const ORDER: &str = "order_id BIGINT, amount DOUBLE, ts TIMESTAMP";

/// Orders from the EU shop, tagged with their region.
#[dp::append_flow(target = "orders")]
fn orders_eu(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema(ORDER)
        .load("data/orders_eu")?
        .with_column("region", "'eu'")
}

/// Orders from the US shop, tagged with their region.
#[dp::append_flow(target = "orders")]
fn orders_us(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema(ORDER)
        .load("data/orders_us")?
        .with_column("region", "'us'")
}

fn main() -> std::process::ExitCode {
    dp::Pipeline::from_registry()
        .create_streaming_table(
            "orders",
            dp::TableOptions {
                comment: Some("orders of both regions".into()),
                ..Default::default()
            },
        )
        .spec_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/fan_in"))
        .main()
}
