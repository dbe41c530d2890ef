//! Runs a pipeline of the `pipelines` framework on a Spark 4.3 cluster
//! through Spark Connect, as Spark's own `spark-pipelines` client does.
//!
//! Linking this crate (the facade's `spark-connect` feature, on by default)
//! gives every pipeline binary `run --remote sc://host:port` and
//! `dry-run --remote sc://host:port` (or `SPARK_REMOTE`). The pipeline is
//! validated here first, exactly as for a local run; then
//! [`translate`](translate::translate) turns the graph into Spark
//! Declarative Pipelines' commands — a `DefineOutput` per dataset and sink,
//! a `DefineFlow` per flow whose plan becomes an unresolved Spark Connect
//! relation ([`relation`], [`expr`]), the SQL library files as text — and
//! [`backend`] sends them, starts the run and follows its events
//! ([`events`]) into the terminal and the event log. What Spark cannot run
//! (a foreach-batch sink, a Rust UDF, expectations, ...) is refused before
//! anything is sent, every item at once.
//!
//! The client is generated at build time from Spark 4.3's `.proto` files
//! (in `proto/`) with protox and tonic: no `protoc` is needed.
//!
//! ```
//! use pipelines_connect::RemoteUrl;
//!
//! let url = RemoteUrl::parse("sc://spark.example:443/;token=secret").unwrap();
//! assert_eq!(url.endpoint(), "https://spark.example:443");
//! // The token is never shown.
//! assert_eq!(url.to_string(), "sc://spark.example:443");
//! ```

#![warn(missing_docs)]

/// Spark Connect's messages and service client, generated from Spark 4.3's
/// protos (`spark.connect` package).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    tonic::include_proto!("spark.connect");
}

pub mod backend;
pub mod client;
pub mod events;
pub mod expr;
pub mod relation;
pub mod translate;
pub mod url;

pub use backend::SparkConnect;
pub use url::RemoteUrl;
