//! `pipelines`: declarative streaming pipelines in Rust.
#![warn(missing_docs)]

// Lets the macros' `::pipelines::...` paths work inside this crate too (doctests).
extern crate self as pipelines;

pub use pipeline_core::*;
pub use pipeline_macros::{append_flow, materialized_view, table, temporary_view, update_flow};

/// Items the macros expand to. Not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use inventory;
    pub use pipeline_core::registry::{
        DatasetDecl, DatasetKind, FlowDecl, FlowKind, QueryFn, SourceLocation,
    };
    pub use pipeline_core::{DataFrame, Result, Session};
}
