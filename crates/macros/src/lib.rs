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
//!
//! Data-quality expectations are attributes stacked on the same function,
//! above or below the dataset/flow attribute, in any order: [`expect`],
//! [`expect_or_drop`], [`expect_or_fail`] (one expectation each) and
//! [`expect_all`], [`expect_all_or_drop`], [`expect_all_or_fail`] (several).
//! The dataset/flow macro removes them from the function and lists them,
//! in source order, in its declaration's `expectations`. Their conditions
//! are SQL, checked against the dataset's schema at dry-run. Write them
//! with a path (`#[dp::expect(..)]`): a bare `#[expect]` is also Rust's
//! lint attribute.
#![warn(missing_docs)]

use proc_macro::TokenStream;

mod args;
mod auto_cdc;
mod expand;
mod expectations;
mod func;
mod kind;

use expectations::ExpectMacro;
use kind::MacroKind;

fn run(kind: MacroKind, attr: TokenStream, item: TokenStream) -> TokenStream {
    let line = u32::try_from(proc_macro::Span::call_site().line()).unwrap_or(u32::MAX);
    expand::expand(kind, attr.into(), item.into(), line).into()
}

/// Declares an AUTO CDC flow, like Python's
/// `dp.create_auto_cdc_flow(target=..., source=..., keys=..., sequence_by=...)`:
/// the change feed `source` (a dataset, read as a stream) applied to the
/// streaming table `target`, which holds the latest row per key (SCD type
/// 1) or every version (`stored_as_scd_type = 2`).
///
/// Keys: `target`, `source`, `keys = ["id"]`, `sequence_by = "seq"`
/// (required); `apply_as_deletes = "op = 'DELETE'"`, `apply_as_truncates`
/// (SCD type 1), `column_list = [...]` or `except_column_list = [...]`,
/// `stored_as_scd_type = 1 | 2`, `track_history_column_list = [...]` or
/// `track_history_except_column_list = [...]` (SCD type 2), `name`,
/// `comment`, `conf("k" = "v")`.
///
/// ```ignore
/// pipelines::create_auto_cdc_flow!(
///     target = "customers",
///     source = "customers_cdc",
///     keys = ["id"],
///     sequence_by = "seq",
///     apply_as_deletes = "operation = 'DELETE'",
///     except_column_list = ["operation", "seq"],
///     stored_as_scd_type = 2,
/// );
/// ```
#[proc_macro]
pub fn create_auto_cdc_flow(input: TokenStream) -> TokenStream {
    let line = u32::try_from(proc_macro::Span::call_site().line()).unwrap_or(u32::MAX);
    auto_cdc::expand(input.into(), line).into()
}

/// An expectation attribute written above its dataset/flow attribute (one
/// written below never runs: the dataset/flow macro removes it).
fn stack(which: ExpectMacro, attr: TokenStream, item: TokenStream) -> TokenStream {
    expectations::restack(which, attr.into(), item.into()).into()
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
/// - `quarantine = "..."`: the table or sink that receives the rows the
///   flow's drop-expectations ([`expect_or_drop`]) remove.
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
/// - `quarantine = "..."`: where rows removed by drop-expectations go.
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
/// - `quarantine = "..."`: the table or sink that receives the rows the
///   drop-expectations ([`expect_or_drop`]) remove, instead of discarding
///   them.
///
/// ```ignore
/// use pipelines as dp;
/// use pipelines::{table, DataFrame, Result, Session};
///
/// #[table(comment = "raw events", partition_cols = ["day"])]
/// fn events(s: &Session) -> Result<DataFrame> {
///     s.read_stream_table("kafka_raw")
/// }
///
/// #[table(quarantine = "bad_orders")]
/// #[dp::expect_or_drop("positive", "amount > 0")]
/// fn orders(s: &Session) -> Result<DataFrame> {
///     s.read_stream_table("raw_orders")
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
/// `partition_cols`, `schema`, `quarantine`, all optional.
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
/// Keys: `name`, `comment`, `schema`, all optional. `format`, `path`,
/// `partition_cols` and `quarantine` are rejected since nothing is stored.
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

/// Declares a data-quality expectation of the dataset or flow declared on
/// the same function: a name and a SQL condition every row should meet. A
/// row that does not is kept, and counted in the flow's metrics
/// (Lakeflow's `@dp.expect`).
///
/// Takes exactly two string literals, the name (unique on the function)
/// and the condition. Stack it above or below #[table],
/// #[materialized_view], #[temporary_view], #[append_flow] or
/// #[update_flow]; alone it is an error. Write it with a path
/// (`dp::expect`): a bare `#[expect]` is Rust's lint attribute.
///
/// A row fails only when the condition is FALSE (NULL passes); write
/// `"age IS NOT NULL AND age > 0"` to catch NULLs too.
///
/// ```ignore
/// use pipelines as dp;
/// use pipelines::{DataFrame, Result, Session};
///
/// #[dp::table]
/// #[dp::expect("valid_id", "id IS NOT NULL")]
/// fn orders(s: &Session) -> Result<DataFrame> {
///     s.read_stream_table("raw_orders")
/// }
/// ```
#[proc_macro_attribute]
pub fn expect(attr: TokenStream, item: TokenStream) -> TokenStream {
    stack(ExpectMacro::Expect, attr, item)
}

/// Like [`expect`], but a row that fails the condition is removed before it
/// reaches the dataset (Lakeflow's `@dp.expect_or_drop`), and counted. With
/// `quarantine = "..."` on the dataset/flow attribute, it goes there
/// instead, with the names of the expectations it failed.
///
/// ```ignore
/// use pipelines as dp;
/// use pipelines::{DataFrame, Result, Session};
///
/// #[dp::expect_or_drop("positive", "amount > 0")]
/// #[dp::table(quarantine = "bad_orders")]
/// fn orders(s: &Session) -> Result<DataFrame> {
///     s.read_stream_table("raw_orders")
/// }
/// ```
#[proc_macro_attribute]
pub fn expect_or_drop(attr: TokenStream, item: TokenStream) -> TokenStream {
    stack(ExpectMacro::ExpectOrDrop, attr, item)
}

/// Like [`expect`], but a row that fails the condition stops the flow at
/// that batch, committing nothing of it (Lakeflow's `@dp.expect_or_fail`).
///
/// ```ignore
/// use pipelines as dp;
/// use pipelines::{DataFrame, Result, Session};
///
/// #[dp::append_flow(target = "orders")]
/// #[dp::expect_or_fail("has_ts", "ts IS NOT NULL")]
/// fn orders_from_kafka(s: &Session) -> Result<DataFrame> {
///     s.read_stream_table("kafka_orders")
/// }
/// ```
#[proc_macro_attribute]
pub fn expect_or_fail(attr: TokenStream, item: TokenStream) -> TokenStream {
    stack(ExpectMacro::ExpectOrFail, attr, item)
}

/// Several [`expect`]s at once (Lakeflow's `@dp.expect_all`): one or more
/// `"name" = "condition"` pairs; a name may also be written as an
/// identifier (`positive = "amount > 0"`).
///
/// ```ignore
/// use pipelines as dp;
/// use pipelines::{DataFrame, Result, Session};
///
/// #[dp::table]
/// #[dp::expect_all("valid_id" = "id IS NOT NULL", positive = "amount > 0")]
/// fn orders(s: &Session) -> Result<DataFrame> {
///     s.read_stream_table("raw_orders")
/// }
/// ```
#[proc_macro_attribute]
pub fn expect_all(attr: TokenStream, item: TokenStream) -> TokenStream {
    stack(ExpectMacro::ExpectAll, attr, item)
}

/// Several [`expect_or_drop`]s at once (Lakeflow's
/// `@dp.expect_all_or_drop`): one or more `"name" = "condition"` or
/// `name = "condition"` pairs. A row failing any of them is dropped (or
/// quarantined).
///
/// ```ignore
/// use pipelines as dp;
/// use pipelines::{DataFrame, Result, Session};
///
/// #[dp::materialized_view(quarantine = "bad_totals")]
/// #[dp::expect_all_or_drop(positive = "total > 0", "known_day" = "day IS NOT NULL")]
/// fn totals(s: &Session) -> Result<DataFrame> {
///     s.read_table("orders")?.group_by(&["day"])?.count()
/// }
/// ```
#[proc_macro_attribute]
pub fn expect_all_or_drop(attr: TokenStream, item: TokenStream) -> TokenStream {
    stack(ExpectMacro::ExpectAllOrDrop, attr, item)
}

/// Several [`expect_or_fail`]s at once (Lakeflow's
/// `@dp.expect_all_or_fail`): one or more `"name" = "condition"` or
/// `name = "condition"` pairs. A row failing any of them stops the flow.
///
/// ```ignore
/// use pipelines as dp;
/// use pipelines::{DataFrame, Result, Session};
///
/// #[dp::update_flow(target = "counts_sink")]
/// #[dp::expect_all_or_fail(has_user = "user IS NOT NULL", "positive" = "n > 0")]
/// fn counts(s: &Session) -> Result<DataFrame> {
///     s.read_stream_table("clicks")?.group_by(&["user"])?.count()
/// }
/// ```
#[proc_macro_attribute]
pub fn expect_all_or_fail(attr: TokenStream, item: TokenStream) -> TokenStream {
    stack(ExpectMacro::ExpectAllOrFail, attr, item)
}
