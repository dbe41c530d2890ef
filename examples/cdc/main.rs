//! A change feed applied twice: SQL keeps the latest row of each customer
//! (`customers`, SCD type 1, in `transformations/customers.sql`) and Rust
//! keeps every version (`customers_history`, SCD type 2, below), both from
//! the same out-of-order events.
//!
//! ```text
//! cargo run --example cdc -- run
//! ```
//!
//! The tables are Delta tables under `pipeline-storage/tables/`. Add a file
//! under `data/changes` (say `{"id":126,"name":"Lily","city":"Tulum","operation":"UPDATE","seq":7}`)
//! and run again: `customers` updates Lily's row, `customers_history`
//! closes her Cancun version at 7 and opens a Tulum one.
use pipelines as dp;

dp::create_auto_cdc_flow!(
    target = "customers_history",
    source = "customers_cdc",
    keys = ["id"],
    sequence_by = "seq",
    apply_as_deletes = "operation = 'DELETE'",
    except_column_list = ["operation", "seq"],
    stored_as_scd_type = 2,
);

fn main() -> std::process::ExitCode {
    dp::Pipeline::from_registry()
        .create_streaming_table(
            "customers_history",
            dp::TableOptions {
                comment: Some(
                    "every version of every customer, with __START_AT and __END_AT".into(),
                ),
                ..Default::default()
            },
        )
        .spec_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/cdc"))
        .main()
}
