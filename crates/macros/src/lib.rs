//! Attribute macros of the `pipelines` framework.
//!
//! Use them through the facade crate (`pipelines::append_flow`, ...): the
//! expansions refer to `::pipelines::__private`.
//!
//! Every macro is applied to a free function with the signature
//!
//! ```text
//! fn name(s: &Session) -> Result<DataFrame>
//! ```
//!
//! keeps that function exactly as written (it can still be called and
//! tested directly), and registers one static declaration with
//! `inventory`: a `FlowDecl` for [`append_flow`] and [`update_flow`], a
//! `DatasetDecl` for [`table`], [`materialized_view`] and
//! [`temporary_view`]. `pipelines::registry::flows()` and `datasets()` list
//! them, with the file and line of the attribute.
//!
//! All values are literals: strings (`name = "events"`), booleans
//! (`once = true`), lists of strings (`partition_cols = ["day"]`) and
//! `conf("key" = "value", ...)`. Names default to the function's name.
//! Mistakes (unknown or duplicate keys, values of the wrong type, async or
//! generic functions, a wrong parameter) are compile errors pointing at the
//! mistake.
#![warn(missing_docs)]

use proc_macro::TokenStream;

mod args;
mod expand;
mod func;
mod kind;

use kind::MacroKind;

fn run(kind: MacroKind, attr: TokenStream, item: TokenStream) -> TokenStream {
    let line = u32::try_from(proc_macro::Span::call_site().line()).unwrap_or(u32::MAX);
    expand::expand(kind, attr.into(), item.into(), line).into()
}

/// Declares an append flow: a query whose new rows are appended to an
/// existing dataset or sink (Spark's `@dp.append_flow(target=...)`).
///
/// Keys:
/// - `target = "..."` (required): the dataset or sink written to.
/// - `name = "..."`: the flow's name; defaults to the function's name.
/// - `once = true`: a batch query run a single time (backfills) instead of
///   a streaming query; defaults to `false`.
/// - `comment = "..."`: free text description.
/// - `conf("key" = "value", ...)`: settings overriding the pipeline's for
///   this flow, e.g. `conf("pipelines.trigger" = "RealTime")`.
///
/// ```ignore
/// use pipelines::{append_flow, DataFrame, Result, Session};
///
/// #[append_flow(target = "events", conf("pipelines.trigger" = "RealTime"))]
/// fn events_from_kafka(s: &Session) -> Result<DataFrame> {
///     s.read_stream_table("kafka_raw")
/// }
///
/// #[append_flow(target = "events", name = "backfill_2024", once = true)]
/// fn backfill(s: &Session) -> Result<DataFrame> {
///     s.read_table("archive_2024")
/// }
/// ```
#[proc_macro_attribute]
pub fn append_flow(attr: TokenStream, item: TokenStream) -> TokenStream {
    run(MacroKind::AppendFlow, attr, item)
}

/// Declares an update flow: a streaming query written to a sink in update
/// output mode (Databricks' `@dp.update_flow`).
///
/// Keys:
/// - `target = "..."` (required): the sink written to.
/// - `name = "..."`: the flow's name; defaults to the function's name.
/// - `comment = "..."`: free text description.
/// - `conf("key" = "value", ...)`: settings overriding the pipeline's.
/// - `import_checkpoint = "..."`: an existing checkpoint to start from,
///   copied in the first time the flow runs.
///
/// `once` is rejected: update flows are always streaming.
///
/// ```ignore
/// use pipelines::{update_flow, DataFrame, Result, Session};
///
/// #[update_flow(target = "counts_sink", comment = "running counts per user")]
/// fn counts(s: &Session) -> Result<DataFrame> {
///     s.read_stream_table("clicks")?.group_by(&["user"])?.count()
/// }
/// ```
#[proc_macro_attribute]
pub fn update_flow(attr: TokenStream, item: TokenStream) -> TokenStream {
    run(MacroKind::UpdateFlow, attr, item)
}

/// Declares a streaming table and the flow of the same name that appends
/// the function's query to it (Spark's `@dp.table`).
///
/// All keys are optional; `#[table]` alone declares a table named after
/// the function:
/// - `name = "..."`: the table's name.
/// - `comment = "..."`: free text description.
/// - `format = "..."`: storage format, e.g. `"delta"` or `"parquet"`.
/// - `path = "..."`: explicit storage location.
/// - `partition_cols = ["a", "b"]`: partition columns.
/// - `schema = "..."`: the declared schema as DDL, e.g.
///   `"ts TIMESTAMP, id STRING"`.
///
/// ```ignore
/// use pipelines::{table, DataFrame, Result, Session};
///
/// #[table(comment = "raw events", partition_cols = ["day"])]
/// fn events(s: &Session) -> Result<DataFrame> {
///     s.read_stream_table("kafka_raw")
/// }
///
/// // A table filled only by #[append_flow]s: the query is its first flow.
/// #[table]
/// fn all_events(s: &Session) -> Result<DataFrame> {
///     s.read_stream_table("events")
/// }
/// ```
#[proc_macro_attribute]
pub fn table(attr: TokenStream, item: TokenStream) -> TokenStream {
    run(MacroKind::Table, attr, item)
}

/// Declares a materialized view: a dataset recomputed by one batch query
/// (Spark's `@dp.materialized_view`).
///
/// Same keys as [`table`]: `name`, `comment`, `format`, `path`,
/// `partition_cols`, `schema`, all optional.
///
/// ```ignore
/// use pipelines::{materialized_view, DataFrame, Result, Session};
///
/// #[materialized_view(name = "daily_totals", format = "parquet")]
/// fn totals(s: &Session) -> Result<DataFrame> {
///     s.read_table("events")?.group_by(&["day"])?.count()
/// }
/// ```
#[proc_macro_attribute]
pub fn materialized_view(attr: TokenStream, item: TokenStream) -> TokenStream {
    run(MacroKind::MaterializedView, attr, item)
}

/// Declares a temporary view: a named query other queries can read, not
/// stored anywhere (Spark's `@dp.temporary_view`).
///
/// Keys: `name`, `comment`, `schema`, all optional. `format`, `path` and
/// `partition_cols` are rejected since nothing is stored.
///
/// ```ignore
/// use pipelines::{temporary_view, DataFrame, Result, Session};
///
/// #[temporary_view(comment = "events without test traffic")]
/// fn real_events(s: &Session) -> Result<DataFrame> {
///     s.read_stream_table("events")?.filter("NOT is_test")
/// }
/// ```
#[proc_macro_attribute]
pub fn temporary_view(attr: TokenStream, item: TokenStream) -> TokenStream {
    run(MacroKind::TemporaryView, attr, item)
}
