//! The project `init --name X` writes, compiled here so the template stays
//! valid. Run it on a generated project: `cargo run -- dry-run` inside it.
include!("../crates/core/src/init/main.rs");
