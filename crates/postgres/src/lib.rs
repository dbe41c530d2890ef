//! The PostgreSQL connector of the `pipelines` framework: the `postgres`
//! sink ([`sink::PostgresSink`]) writes each micro-batch into a table in one
//! database transaction that also records the batch in a progress table,
//! so a batch replayed after a crash is recognised and skipped (exactly
//! once). Append mode uses binary `COPY`, update mode `INSERT ... ON
//! CONFLICT (keys) DO UPDATE` (through a temporary table filled by
//! `COPY`), complete mode replaces the table's rows.
//!
//! Linking the crate registers the connector (`connector`); the facade
//! `pipelines` does so with its `postgres` feature.
//!
//! ```no_run
//! # use pipelines_core as dp;
//! let pipeline = dp::Pipeline::new().create_sink(
//!     "counts_db",
//!     "postgres",
//!     [
//!         ("url", "postgres://pipelines@127.0.0.1:5432/analytics"),
//!         ("dbtable", "user_counts"),
//!         ("merge_keys", "user_id"),
//!     ],
//! );
//! ```
#![warn(missing_docs)]

pub mod connector;
pub mod sink;
mod tls;
mod types;

pub use connector::POSTGRES;
