//! The rate source: generated rows (`timestamp`, `value`) at a fixed rate,
//! even values only, printed per micro-batch every 2 seconds.
//!
//! ```text
//! cargo run --example rate_demo -- run --continuous     # Ctrl-C stops at a batch boundary
//! ```
use dp::prelude::*;
use pipelines as dp;

/// Ten rows a second; keeps the even ones and labels them.
#[dp::append_flow(target = "console")]
fn even_values(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("rate")
        .option("rowsPerSecond", "10")
        .load_default()?
        .filter("value % 2 = 0")?
        .with_column("label", "concat('even-', CAST(value AS STRING))")
}

fn main() -> std::process::ExitCode {
    dp::Pipeline::from_registry()
        .spec_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/rate_demo"))
        .main()
}
