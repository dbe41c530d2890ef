//! The streaming engine: runs a validated [`crate::graph::PipelineGraph`]
//! with Structured Streaming's micro-batch model.
//!
//! Per micro-batch N of a flow: (1) ask each source for its end offset;
//! (2) write `offsets/N` to the checkpoint; (3) read that range and run the
//! plan over Arrow `RecordBatch`es; (4) hand the result to the sink,
//! idempotently for batch N; (5) write `commits/N`. On restart a batch with
//! offsets but no commit is replayed over exactly the same offsets.
//!
//! Modules: [`source`] and [`sink`] (the contracts), [`sources`] and
//! [`sinks`] (implementations), [`checkpoint`] (offset/commit logs and the
//! query shape), [`exec`] (a flow's plan over one batch, with its stateful operators),
//! [`state`] (the versioned state store of a stateful operator), [`runtime`] (the
//! query loop, triggers, the pipeline run), [`quality`] (expectations applied
//! to each batch's rows), [`progress`] (per-batch progress and the event log)
//! and [`release`] (a finished batch's memory freed off the query loop).

pub mod cdc;
pub mod checkpoint;
pub mod connectors;
pub mod event_log;
pub mod event_table;
pub mod exec;
pub mod fault;
pub mod leaf_filter;
pub mod metrics;
pub mod progress;
pub mod quality;
pub mod release;
pub mod run_view;
pub mod runtime;
pub mod sink;
pub mod sinks;
pub mod source;
pub mod sources;
pub mod state;
pub mod storage;
pub mod uri;
pub mod web;
