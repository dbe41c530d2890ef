//! Data quality on a stream of orders, with all four actions: a warning
//! (orders without a customer are kept and counted), a drop (orders whose
//! amount is not positive), a quarantine (the dropped orders go to
//! `bad_orders` with the names of what they failed) and a fail (an unknown
//! currency stops the flow at its batch, committing nothing).
//!
//! ```text
//! cargo run --example order_quality -- run
//! ```
//!
//! Each batch's counts are in `pipeline-storage/event_log/events.jsonl`
//! (`dataQuality`). Add `{"order_id":9,"customer":"gus","amount":5.0,"currency":"GBP"}`
//! to a new file under `data/orders` and run again to see the fail: the
//! error names the expectation, the batch and the order; remove the line
//! (or the file) and the next run replays the batch.
use dp::prelude::*;
use pipelines as dp;

/// Orders that pass the checks.
#[dp::table(quarantine = "bad_orders", comment = "orders that pass the checks")]
#[dp::expect("has_customer", "customer IS NOT NULL")]
#[dp::expect_or_drop("positive_amount", "amount > 0")]
#[dp::expect_or_fail("known_currency", "currency IN ('EUR', 'USD')")]
fn orders(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("order_id BIGINT, customer STRING, amount DOUBLE, currency STRING")
        .option("maxFilesPerTrigger", "1")
        .load("data/orders")
}

fn main() -> std::process::ExitCode {
    dp::Pipeline::from_registry()
        .create_streaming_table(
            "bad_orders",
            dp::TableOptions {
                comment: Some("orders dropped by an expectation, with the names it failed".into()),
                ..Default::default()
            },
        )
        .spec_dir(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/order_quality"
        ))
        .main()
}
