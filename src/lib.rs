//! `pipelines`: declarative streaming pipelines in Rust, with Spark
//! Structured Streaming's semantics and Spark Declarative Pipelines' model.
//!
//! A pipeline is a set of datasets (streaming tables, materialized views,
//! temporary views, sinks) and the flows that fill them. Flows are Rust
//! functions marked with an attribute ([`table`], [`append_flow`],
//! [`update_flow`], [`materialized_view`], [`temporary_view`]) that return a
//! lazy [`DataFrame`], with data-quality expectations stacked on the same
//! function ([`expect`], [`expect_or_drop`], [`expect_or_fail`] and their
//! `expect_all*` forms); a YAML spec (`pipeline.yml`) names the pipeline, its
//! storage, sinks and per-flow settings; [`main`] gives the binary the
//! `dry-run` / `run` / `graph` command line. The whole graph is checked
//! before any data moves, then each flow runs micro-batch by micro-batch,
//! with checkpoints that survive a crash.
//!
//! Crates behind this facade (see ARCHITECTURE.md): `pipelines-core` (plans,
//! spec, graph, engine, the files/console/memory/rate/socket/foreach-batch
//! connectors and the connector registry), `pipelines-macros`, and one crate
//! per heavy connector family, linked by a cargo feature (both on by
//! default): [`delta`] (`delta`, delta-rs) and [`kafka`] (`kafka`,
//! librdkafka). With `default-features = false` neither is built and tables
//! default to Parquet. [`sql`] (`sql`, on by default) reads the spec's SQL
//! library files; the `pipelines` binary runs a project made of YAML and SQL
//! only.
//!
//! The same pipeline built in code, run once over an in-memory stream:
//!
//! ```
//! use pipelines as dp;
//! use dp::prelude::*;
//! use arrow::array::{Int64Array, StringArray};
//! use arrow::record_batch::RecordBatch;
//! use std::sync::Arc;
//!
//! let schema = Arc::new(arrow::datatypes::Schema::new(vec![
//!     arrow::datatypes::Field::new("level", arrow::datatypes::DataType::Utf8, true),
//!     arrow::datatypes::Field::new("n", arrow::datatypes::DataType::Int64, true),
//! ]));
//! let input = dp::engine::sources::MemoryStream::new("doc_logs", schema.clone());
//! input.push(RecordBatch::try_new(schema, vec![
//!     Arc::new(StringArray::from(vec!["ERROR", "INFO", "ERROR"])),
//!     Arc::new(Int64Array::from(vec![1, 2, 3])),
//! ]).unwrap()).unwrap();
//!
//! let pipeline = dp::Pipeline::new()
//!     .create_sink("doc_errors", "memory", [("queryName", "doc_errors")])
//!     .append_flow("only_errors", "doc_errors", |s: &Session| {
//!         s.read_stream().format("memory").schema("level STRING, n BIGINT")
//!             .load("doc_logs")?
//!             .filter("level = 'ERROR'")
//!     });
//! let dir = tempfile::tempdir().unwrap();
//! let spec = dp::spec::parse_str("name: doc\nstorage: ./storage\n", &dir.path().join("pipeline.yml")).unwrap();
//! let graph = pipeline.build(&spec).map_err(|d| d.to_string()).unwrap();
//! let opts = dp::engine::runtime::RunOptions::new(dir.path(), dir.path().join("storage"));
//! dp::engine::runtime::run(&graph, &opts).unwrap();
//! let rows: usize = dp::engine::sinks::memory_table("doc_errors").unwrap()
//!     .rows().iter().map(|b| b.num_rows()).sum();
//! assert_eq!(rows, 2);
//! ```
#![warn(missing_docs)]

// Lets the macros' `::pipelines::...` paths work inside this crate too (doctests).
extern crate self as pipelines;

pub use pipelines_core::*;
pub use pipelines_macros::{
    append_flow, create_auto_cdc_flow, materialized_view, table, temporary_view, update_flow,
};
// Data-quality expectations stacked on the macros above. Use them with a
// path (`#[dp::expect(..)]`): a bare `#[expect]` is Rust's lint attribute.
pub use pipelines_macros::{
    expect, expect_all, expect_all_or_drop, expect_all_or_fail, expect_or_drop, expect_or_fail,
};

/// Delta Lake tables, sources and sinks (the `delta` feature): the
/// `pipelines-delta` crate, e.g. [`delta::read_table`].
#[cfg(feature = "delta")]
pub use pipelines_delta as delta;

/// Kafka sources and sinks (the `kafka` feature): the `pipelines-kafka` crate.
#[cfg(feature = "kafka")]
pub use pipelines_kafka as kafka;

/// The PostgreSQL sink (the `postgres` feature): the `pipelines-postgres` crate.
#[cfg(feature = "postgres")]
pub use pipelines_postgres as postgres;

/// SQL library files (the `sql` feature): the `pipelines-sql` crate. Linking
/// it makes a spec's `libraries:` (`.sql` files) part of the pipeline.
#[cfg(feature = "sql")]
pub use pipelines_sql as sql;

/// Running a pipeline on a Spark cluster through Spark Connect (the
/// `spark-connect` feature): the `pipelines-connect` crate. Linking it gives
/// the command line `run --remote sc://...`.
#[cfg(feature = "spark-connect")]
pub use pipelines_connect as connect;

/// The streaming engine ([`pipelines_core::engine`]), with the connector
/// crates' items at their former paths.
pub mod engine {
    pub use pipelines_core::engine::*;

    /// Delta table helpers; moved to [`crate::delta`].
    #[cfg(feature = "delta")]
    #[deprecated(note = "use `pipelines::delta` (the `pipelines-delta` crate)")]
    pub use pipelines_delta::table as delta;
}

/// Items the macros expand to. Not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use inventory;
    pub use pipelines_core::registry::{
        AutoCdcDecl, DatasetDecl, DatasetKind, ExpectationAction, ExpectationDecl, FlowDecl,
        FlowKind, QueryFn, SourceLocation,
    };
    pub use pipelines_core::{DataFrame, Result, Session};
}
