//! Helpers shared by the integration tests and the benchmark examples of
//! `pipelines` (not published):
//!
//! - [`kafka`]: producing and consuming test messages, and a Kafka-protocol
//!   broker process (tansu) on a free loopback port;
//! - [`bench_data`]: the benchmarks' generated events (JSON lines and
//!   Parquet), timed runs, medians, and PySpark's figures on the same data;
//! - [`string_ts_data`]: events whose event time is an ISO-8601 string;
//! - [`s3`]: an S3-compatible server process (moto) for the object-storage
//!   tests.

pub mod bench_data;
pub mod kafka;
pub mod s3;
pub mod string_ts_data;
