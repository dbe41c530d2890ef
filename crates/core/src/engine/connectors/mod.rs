//! The built-in connectors, one module per family, each registered with
//! one `inventory::submit!` line (see [`crate::connector`]):
//!
//! - [`files`]: `json`, `csv`, `parquet` (source and sink) and `text`
//!   (source), exactly once through the `_spark_metadata` manifest;
//! - [`builtin`]: `console`, `memory`, `foreach_batch`, `rate`, `socket`.
//!
//! Delta and Kafka live in their own crates (`pipelines-delta`,
//! `pipelines-kafka`), registered the same way; the helpers below are
//! public so that a connector outside this crate reads like one inside.

pub mod builtin;
pub mod files;

use arrow::datatypes::SchemaRef;

use crate::connector::DeclaredRead;
use crate::error::PlanError;
use crate::formats::OutputMode;

/// Every output mode.
pub const ALL_MODES: &[OutputMode] =
    &[OutputMode::Append, OutputMode::Update, OutputMode::Complete];
/// Append only (files).
pub const APPEND_ONLY: &[OutputMode] = &[OutputMode::Append];
/// Append and complete (tables without upsert keys).
pub const APPEND_COMPLETE: &[OutputMode] = &[OutputMode::Append, OutputMode::Complete];

/// A read from a path: the path must be given and not empty.
pub fn require_path(read: &DeclaredRead<'_>) -> Result<(), PlanError> {
    let format = read.format;
    match read.path {
        None => Err(PlanError::with_help(
            format!("{format} source needs a path"),
            format!("load it with .load(\"data/{format}\")"),
        )),
        Some(p) if p.trim().is_empty() => Err(PlanError::with_help(
            format!("{format} source has an empty path"),
            format!("load it with .load(\"data/{format}\")"),
        )),
        Some(_) => Ok(()),
    }
}

/// The path a source opens: `load(path)`, else the `path` option; an error
/// with `help` when neither is given.
pub fn request_path(
    request: &crate::connector::SourceRequest<'_>,
    format: &str,
    help: &str,
) -> crate::error::Result<String> {
    request
        .path
        .or_else(|| request.options.get("path"))
        .map(str::to_string)
        .ok_or_else(|| {
            crate::error::Error::runtime_with_help(
                format!("flow `{}`: {format} source has no path", request.ctx.flow),
                help.to_string(),
            )
        })
}

/// A read without a path (`load_default()`).
pub fn forbid_path(read: &DeclaredRead<'_>) -> Result<(), PlanError> {
    match read.path {
        Some(p) => Err(PlanError::with_help(
            format!("{} source takes no path, got `{p}`", read.format),
            "load it with .load_default() and configure it with .option(...)",
        )),
        None => Ok(()),
    }
}

/// A source with a fixed schema: a user schema is an error.
pub fn fixed_schema(
    read: &DeclaredRead<'_>,
    fixed: SchemaRef,
) -> Result<Option<SchemaRef>, PlanError> {
    if read.schema.is_some() {
        return Err(PlanError::with_help(
            format!("{} source does not take a schema", read.format),
            format!(
                "remove .schema(...): the {} source always has the schema {}",
                read.format,
                crate::plan::ddl::schema_to_ddl(&fixed)
            ),
        ));
    }
    Ok(Some(fixed))
}
