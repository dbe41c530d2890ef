//! The integration tests of the `pipelines` facade, one module per concept,
//! in one binary. `crash_recovery` and `kafka_crash` are separate binaries:
//! they re-run themselves as child processes that are killed mid-batch.

mod cdc;
mod connectors;
mod delta;
mod engine_e2e;
mod event_log;
mod expectations;
mod init;
mod kafka;
mod macros_compile;
mod macros_registry;
mod metrics;
mod object_storage;
mod postgres;
mod real_time;
mod spark_connect;
mod spark_connect_local;
mod sql;
mod stateful;
mod ui;
