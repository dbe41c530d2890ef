//! Engine library of the `pipelines` framework. Users depend on the facade
//! crate `pipelines`, which re-exports this crate and the attribute macros.
//!
//! Concepts, one module each: [`plan`] (the lazy query a flow returns),
//! [`session`] (what a flow function receives), [`registry`] (macro
//! declarations), [`definition`] (owned declarations), [`spec`] (the YAML
//! spec), [`graph`] (the dataflow graph and its validation), [`checks`]
//! (query-shape rules), [`fixes`] (help texts in the flow's language, Rust or
//! SQL), [`formats`] (sink capabilities), [`library`] (the
//! spec's library files and their loaders), [`pipeline`] (the builder),
//! [`cli`], [`render`] and [`init`].
#![warn(missing_docs)]

pub mod cdc;
pub mod checks;
pub mod cli;
pub mod conf;
pub mod connector;
pub mod definition;
pub mod duration;
pub mod engine;
pub mod error;
pub mod expectations;
pub mod fixes;
pub mod formats;
pub mod graph;
pub mod init;
pub mod library;
mod option_checks;
pub mod options;
pub mod pipeline;
pub mod plan;
pub mod real_time_checks;
pub mod registry;
pub mod remote;
pub mod render;
pub mod session;
pub mod spec;
pub mod suggest;

pub use cli::main;
pub use definition::{DatasetDef, DatasetType, FlowDef, Query};
pub use error::{Diagnostic, Diagnostics, Error, Origin, PlanError, Result};
pub use expectations::{Expectation, ExpectationAction};
pub use formats::OutputMode;
pub use graph::PipelineGraph;
pub use pipeline::{Pipeline, TableOptions};
pub use plan::DataFrame;
pub use session::Session;

/// Everything a flow file needs: `use pipelines::prelude::*;`.
pub mod prelude {
    pub use crate::plan::functions::{
        approx_count_distinct, avg, col, collect_list, count, count_all, count_distinct, first,
        last, lit, max, min, session_window, sum, to_timestamp, to_timestamp_with, tumbling_window,
        window, window_with_start,
    };
    pub use crate::plan::{Catalog, ColumnExpr, GroupedData, JoinType, SortKey, SourceFormat};
    pub use crate::{DataFrame, Error, PlanError, Result, Session};
    pub use datafusion::logical_expr::{Expr, SortExpr};
}
