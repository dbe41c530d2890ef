//! The integration tests of `pipelines-core`, one module per concept, in one
//! binary (one link of DataFusion and delta-rs instead of one per file).
//! The Delta and Kafka connector crates are linked in, as in the default
//! `pipelines` build, so the graph checks see every format.

extern crate pipelines_delta;
extern crate pipelines_kafka;

mod damage;
mod engine_checkpoint;
mod engine_exec;
mod engine_sink_console;
mod engine_sink_file;
mod engine_sink_memory;
mod engine_source_file;
mod engine_source_streams;
mod graph_checks;
mod graph_validation;
mod json_fuzz;
mod plan_case;
mod plan_ddl;
mod plan_functions;
mod plan_reader;
mod plan_resolve;
mod spec_discovery;
mod spec_env;
mod spec_errors;
mod spec_parse;
mod spec_trigger;
mod text_fuzz;
mod timestamp_golden;
mod timestamp_props;
mod timestamp_reference;
mod timestamp_sql;
mod timestamp_unit;
