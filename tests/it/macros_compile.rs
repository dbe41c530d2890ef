//! Compile errors of the attribute macros: each `tests/ui/*.rs` must fail
//! with exactly the message and span of its `.stderr` file.
//!
//! Regenerate with `TRYBUILD=overwrite cargo test --test macros_compile`
//! and review the diff: spans must point at the mistake.

#[test]
fn ui() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
