//! The integration tests of `pipelines-sql`, one module per concern, in one binary.

mod errors;
mod loader;
mod robustness;
mod statements;
