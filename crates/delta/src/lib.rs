//! The Delta Lake connector of the `pipelines` framework, through delta-rs.
//!
//! Linking this crate registers the `delta` format with the connector
//! registry (`pipelines_core::connector`): Delta tables become readable as
//! streams and batches ([`DeltaSource`]), writable by sinks and tables
//! ([`DeltaSink`]: append, complete, or MERGE on `merge_keys`, exactly once
//! through Delta application transactions), and the default storage of
//! pipeline tables. The facade crate `pipelines` links it with its `delta`
//! feature (on by default) and re-exports it as `pipelines::delta`.
//!
//! Modules: [`connector`] (the registration and the options), [`source`],
//! [`sink`], [`table`] (opening tables, reading the log and data files;
//! its helpers are re-exported here) and [`storage`] (tables in object
//! storage, `s3://`).
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! // No table there yet: nothing to read, no version.
//! assert!(pipelines_delta::read_table(dir.path()).unwrap().is_none());
//! assert_eq!(pipelines_delta::latest_version(dir.path()).unwrap(), None);
//! assert!(pipelines_core::connector::sink("delta").is_some());
//! ```
#![warn(missing_docs)]

pub mod connector;
pub mod sink;
pub mod source;
pub mod storage;
pub mod table;

pub use connector::DELTA;
pub use sink::DeltaSink;
pub use source::DeltaSource;
pub use table::*;
