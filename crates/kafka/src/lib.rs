//! The Kafka connector of the `pipelines` framework, through librdkafka.
//!
//! Linking this crate registers the `kafka` format with the connector
//! registry (`pipelines_core::connector`): topics read as streams with
//! Spark's options and columns ([`KafkaSource`], offsets kept in the flow's
//! checkpoint) and written one message per row ([`KafkaSink`], idempotent
//! producer), in micro-batches and in real time. The facade crate
//! `pipelines` links it with its `kafka` feature (on by default) and
//! re-exports it as `pipelines::kafka`.
//!
//! Modules: [`connector`] (the registration, the options, [`kafka_schema`]),
//! [`conf`] (the librdkafka client settings from `kafka.*` options),
//! [`source`] and [`sink`].
//!
//! ```
//! let schema = pipelines_kafka::kafka_schema(false);
//! let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
//! assert_eq!(names, ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]);
//! assert!(pipelines_core::connector::source("kafka").is_some());
//! ```
#![warn(missing_docs)]

pub mod conf;
pub mod connector;
pub mod sink;
pub mod source;

pub use connector::{kafka_schema, KAFKA};
pub use sink::KafkaSink;
pub use source::KafkaSource;
