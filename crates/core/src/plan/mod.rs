//! Lazy query plans: the [`DataFrame`] a flow function returns.
//!
//! Building a DataFrame never looks at data or at dataset schemas:
//! `read_stream_table("logs")` only records a dataset read. Syntax errors (bad
//! SQL text, bad interval, unknown format, bad DDL) fail when the operation is
//! built; column and type errors are found by [`DataFrame::resolve`], which
//! the graph builder calls with the schemas of upstream datasets.
//!
//! ```
//! use std::collections::HashMap;
//! use std::sync::Arc;
//! use pipelines_core::plan::ddl::parse_ddl_schema;
//! use pipelines_core::plan::functions::{col, window};
//! use pipelines_core::plan::DataFrame;
//! use pipelines_core::{Result, Session};
//!
//! fn errors_per_service(s: &Session) -> Result<DataFrame> {
//!     s.read_stream_table("logs")?
//!         .filter("level = 'ERROR'")?
//!         .with_watermark("ts", "10 minutes")?
//!         .group_by([window(col("ts"), "5 minutes", "1 minute"), col("service_name")])
//!         .count()
//! }
//!
//! let df = errors_per_service(&Session::new()).unwrap();
//! assert!(df.is_streaming());
//! assert_eq!(df.datasets_read(), vec![("logs".to_string(), true)]);
//!
//! let mut catalog = HashMap::new();
//! catalog.insert(
//!     "logs".to_string(),
//!     Arc::new(parse_ddl_schema("ts TIMESTAMP, service_name STRING, level STRING, msg STRING").unwrap()),
//! );
//! let resolved = df.resolve(&catalog).unwrap();
//! let schema = resolved.schema();
//! let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
//! assert_eq!(names, ["window", "service_name", "count"]);
//!
//! // Column errors are found at resolve time, with a suggestion.
//! let bad = Session::new().read_stream_table("logs").unwrap().filter("levle = 'ERROR'").unwrap();
//! let errors = bad.resolve(&catalog).unwrap_err();
//! assert_eq!(errors[0].message, "unknown column `levle` in filter `levle = 'ERROR'`");
//! assert_eq!(
//!     errors[0].help.as_deref(),
//!     Some("did you mean `level`? available columns: ts, service_name, level, msg")
//! );
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use arrow::datatypes::SchemaRef;
use datafusion::logical_expr::{Expr, SortExpr};

use crate::error::{PlanError, Result};

pub mod ddl;
pub mod functions;
pub mod reader;
pub mod resolve;
pub(crate) mod sql;
pub mod timestamp;

pub use reader::{DataStreamReader, IntoSchema, SourceFormat, SourceSpec};
pub use resolve::{resolve_condition, ResolvedNode, ResolvedPlan};

/// True when `name` (any case) is an aggregate function of SQL text, e.g.
/// `count`, `sum`, `first`, `collect_list`, `approx_count_distinct`: what
/// the SQL planner lifts into `group_by(...).agg(...)`.
pub fn is_aggregate_function(name: &str) -> bool {
    use datafusion::execution::FunctionRegistry;
    sql::sql_context().udaf(&name.to_ascii_lowercase()).is_ok()
}

/// True when `name` (any case) is a function SQL text can call: DataFusion's
/// and Spark's scalar and aggregate functions and the streaming ones
/// (`window`, `session_window`, `to_timestamp`). A function an expression
/// calls that is not one of these is the user's own (a Rust UDF).
pub fn is_builtin_function(name: &str) -> bool {
    use datafusion::execution::FunctionRegistry;
    let ctx = sql::sql_context();
    let lower = name.to_ascii_lowercase();
    ctx.udf(&lower).is_ok() || ctx.udaf(&lower).is_ok() || ctx.udwf(&lower).is_ok()
}

/// What [`DataFrame::with_dataset_reads_replaced`] calls for each dataset
/// read: the dataset's name, whether it is read as a stream, the read's
/// options; the plan to put in its place, if any.
pub type ReplaceRead<'a> =
    dyn FnMut(&str, bool, &BTreeMap<String, String>) -> Option<DataFrame> + 'a;

/// Field metadata key marking an event-time column with a watermark (as
/// Spark does); the value is the delay in milliseconds.
pub const WATERMARK_METADATA_KEY: &str = "spark.watermarkDelayMs";

/// Prefix of the message of the error [`DataFrame::resolve`] returns for a
/// dataset the catalog does not know: `unknown dataset `x``.
pub const UNKNOWN_DATASET: &str = "unknown dataset";

/// An expression given either as a DataFusion [`Expr`] or as Spark SQL text.
///
/// SQL text is syntax-checked when the DataFrame operation is built and turned
/// into an [`Expr`] at resolve time, against the input's schema.
#[derive(Clone, Debug, PartialEq)]
pub enum ColumnExpr {
    /// A DataFusion expression, e.g. `col("a") + lit(1)`.
    Expr(Expr),
    /// SQL text, e.g. `"CAST(key AS STRING) AS event_type"`.
    Sql(String),
}

impl ColumnExpr {
    /// SQL text checked for syntax now.
    pub fn sql(text: impl Into<String>) -> Result<ColumnExpr, PlanError> {
        let text = text.into();
        crate::plan::sql::parse_sql_syntax(&text)?;
        Ok(ColumnExpr::Sql(text))
    }

    /// Checks SQL syntax and window intervals.
    pub(crate) fn validate(&self) -> Result<(), PlanError> {
        match self {
            ColumnExpr::Expr(e) => functions::validate_window_args(e),
            ColumnExpr::Sql(s) if s.trim() == "*" => Ok(()),
            ColumnExpr::Sql(s) => crate::plan::sql::parse_sql_syntax(s).map(|_| ()),
        }
    }
}

impl fmt::Display for ColumnExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnExpr::Expr(e) => f.write_str(&resolve::expr_text(e)),
            ColumnExpr::Sql(s) => f.write_str(s),
        }
    }
}

impl From<Expr> for ColumnExpr {
    fn from(e: Expr) -> Self {
        ColumnExpr::Expr(e)
    }
}

impl From<&str> for ColumnExpr {
    fn from(s: &str) -> Self {
        ColumnExpr::Sql(s.to_string())
    }
}

impl From<String> for ColumnExpr {
    fn from(s: String) -> Self {
        ColumnExpr::Sql(s)
    }
}

impl From<&String> for ColumnExpr {
    fn from(s: &String) -> Self {
        ColumnExpr::Sql(s.clone())
    }
}

/// A sort key: an expression, its direction and where nulls go.
#[derive(Clone, Debug, PartialEq)]
pub struct SortKey {
    /// What to sort by.
    pub expr: ColumnExpr,
    /// Ascending when true.
    pub asc: bool,
    /// Nulls before non-null values when true.
    pub nulls_first: bool,
}

impl From<SortExpr> for SortKey {
    fn from(s: SortExpr) -> Self {
        SortKey {
            expr: ColumnExpr::Expr(s.expr),
            asc: s.asc,
            nulls_first: s.nulls_first,
        }
    }
}

impl From<Expr> for SortKey {
    /// Ascending, nulls first (Spark's default).
    fn from(e: Expr) -> Self {
        SortKey {
            expr: ColumnExpr::Expr(e),
            asc: true,
            nulls_first: true,
        }
    }
}

impl From<&str> for SortKey {
    /// SQL text with an optional `ASC`/`DESC` and `NULLS FIRST`/`NULLS LAST`
    /// suffix, e.g. `"count DESC"`. Spark's defaults: ascending sorts put
    /// nulls first, descending sorts put them last.
    fn from(s: &str) -> Self {
        let mut words: Vec<&str> = s.split_whitespace().collect();
        let mut nulls_first = None;
        if words.len() >= 3 && words[words.len() - 2].eq_ignore_ascii_case("nulls") {
            let last = words[words.len() - 1];
            if last.eq_ignore_ascii_case("first") {
                nulls_first = Some(true);
                words.truncate(words.len() - 2);
            } else if last.eq_ignore_ascii_case("last") {
                nulls_first = Some(false);
                words.truncate(words.len() - 2);
            }
        }
        let mut asc = true;
        if words.len() >= 2 {
            let last = words[words.len() - 1];
            if last.eq_ignore_ascii_case("desc") {
                asc = false;
                words.pop();
            } else if last.eq_ignore_ascii_case("asc") {
                words.pop();
            }
        }
        SortKey {
            expr: ColumnExpr::Sql(words.join(" ")),
            asc,
            nulls_first: nulls_first.unwrap_or(asc),
        }
    }
}

/// The kinds of join.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JoinType {
    /// Rows matching on both sides.
    Inner,
    /// Every left row, with right columns null when unmatched.
    LeftOuter,
    /// Every right row, with left columns null when unmatched.
    RightOuter,
    /// Every row of both sides.
    FullOuter,
    /// Left rows that have a match (left columns only).
    LeftSemi,
    /// Left rows without a match (left columns only).
    LeftAnti,
}

impl JoinType {
    /// Spark's name, e.g. `left_outer`.
    pub fn name(&self) -> &'static str {
        match self {
            JoinType::Inner => "inner",
            JoinType::LeftOuter => "left_outer",
            JoinType::RightOuter => "right_outer",
            JoinType::FullOuter => "full_outer",
            JoinType::LeftSemi => "left_semi",
            JoinType::LeftAnti => "left_anti",
        }
    }
}

impl fmt::Display for JoinType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One operation of a plan. The tree is public so the engine and the
/// validation passes can walk it.
#[derive(Clone, Debug)]
pub enum PlanNode {
    /// A source read (`read_stream().format(..)...load(..)`).
    Source(SourceSpec),
    /// A read of a dataset of the pipeline.
    DatasetRead {
        /// Dataset name.
        name: String,
        /// True for `read_stream_table`, false for `read_table`.
        streaming: bool,
        /// Reader options (`read_stream().option(..).table(name)`), over the
        /// table's own; e.g. `maxFilesPerTrigger`.
        options: BTreeMap<String, String>,
    },
    /// `select` / `select_expr`: a projection.
    Select {
        /// Input plan.
        input: DataFrame,
        /// Output expressions, in order.
        exprs: Vec<ColumnExpr>,
    },
    /// `filter`: rows for which the predicate is true.
    Filter {
        /// Input plan.
        input: DataFrame,
        /// Boolean predicate.
        predicate: ColumnExpr,
    },
    /// `with_column`: adds a column, or replaces the one of the same name in place.
    WithColumn {
        /// Input plan.
        input: DataFrame,
        /// Column name.
        name: String,
        /// Its value.
        expr: ColumnExpr,
    },
    /// `with_column_renamed`.
    WithColumnRenamed {
        /// Input plan.
        input: DataFrame,
        /// Current name.
        existing: String,
        /// New name.
        new: String,
    },
    /// `drop`: removes columns.
    Drop {
        /// Input plan.
        input: DataFrame,
        /// Columns to remove.
        columns: Vec<String>,
    },
    /// `union`: rows of every input, matched by column position (like Spark).
    Union {
        /// Two or more inputs.
        inputs: Vec<DataFrame>,
    },
    /// `with_watermark`: declares an event-time column and how late rows may be.
    WithWatermark {
        /// Input plan.
        input: DataFrame,
        /// The event-time column.
        column: String,
        /// The delay.
        delay: Duration,
        /// The delay as written, e.g. "10 minutes".
        delay_text: String,
    },
    /// `group_by(keys).agg(aggregates)` / `.count()`: output is keys then aggregates.
    Aggregate {
        /// Input plan.
        input: DataFrame,
        /// Grouping keys (window keys are named `window` / `session_window`).
        keys: Vec<ColumnExpr>,
        /// Aggregate expressions.
        aggregates: Vec<ColumnExpr>,
    },
    /// `drop_duplicates` / `drop_duplicates_within_watermark`.
    DropDuplicates {
        /// Input plan.
        input: DataFrame,
        /// Columns compared; None compares whole rows.
        columns: Option<Vec<String>>,
        /// True for `drop_duplicates_within_watermark`.
        within_watermark: bool,
    },
    /// `join` / `join_using`.
    Join {
        /// Left input.
        left: DataFrame,
        /// Right input.
        right: DataFrame,
        /// Join condition (left columns may be qualified `left.x`, right ones `right.x`).
        on: Option<ColumnExpr>,
        /// Columns equal on both sides (`join_using`), output once.
        using: Vec<String>,
        /// Kind of join.
        join_type: JoinType,
    },
    /// `order_by`.
    OrderBy {
        /// Input plan.
        input: DataFrame,
        /// Sort keys, most significant first.
        sort: Vec<SortKey>,
    },
    /// `limit`.
    Limit {
        /// Input plan.
        input: DataFrame,
        /// Maximum number of rows.
        n: usize,
    },
}

/// A lazy query plan, built by a flow function and resolved by the graph.
///
/// Cheap to clone (the plan tree is shared).
#[derive(Clone, Debug)]
pub struct DataFrame {
    node: Arc<PlanNode>,
}

/// What a dataset's schema is looked up in during [`DataFrame::resolve`].
pub trait Catalog {
    /// The schema of a dataset of the pipeline, or None when unknown.
    fn dataset_schema(&self, name: &str) -> Option<SchemaRef>;
}

impl Catalog for HashMap<String, SchemaRef> {
    fn dataset_schema(&self, name: &str) -> Option<SchemaRef> {
        self.get(name).cloned()
    }
}

impl Catalog for BTreeMap<String, SchemaRef> {
    fn dataset_schema(&self, name: &str) -> Option<SchemaRef> {
        self.get(name).cloned()
    }
}

impl<F> Catalog for F
where
    F: Fn(&str) -> Option<SchemaRef>,
{
    fn dataset_schema(&self, name: &str) -> Option<SchemaRef> {
        self(name)
    }
}

/// A filter predicate: SQL text or an [`Expr`].
pub trait IntoPredicate {
    /// Converts into a [`ColumnExpr`].
    fn into_predicate(self) -> ColumnExpr;
}

impl<T: Into<ColumnExpr>> IntoPredicate for T {
    fn into_predicate(self) -> ColumnExpr {
        self.into()
    }
}

fn validate_all(exprs: &[ColumnExpr]) -> Result<(), PlanError> {
    exprs.iter().try_for_each(ColumnExpr::validate)
}

fn check_name(name: &str, what: &str) -> Result<(), PlanError> {
    if name.trim().is_empty() {
        return Err(PlanError::new(format!(
            "{what} needs a column name, got an empty one"
        )));
    }
    Ok(())
}

impl DataFrame {
    /// Wraps a plan node.
    pub fn from_node(node: PlanNode) -> DataFrame {
        DataFrame {
            node: Arc::new(node),
        }
    }

    /// The root operation.
    pub fn node(&self) -> &PlanNode {
        &self.node
    }

    /// The shared root node (pointer identity identifies a node).
    pub fn node_arc(&self) -> &Arc<PlanNode> {
        &self.node
    }

    /// The inputs of the root operation (none for sources and dataset reads).
    pub fn children(&self) -> Vec<&DataFrame> {
        self.node.children()
    }

    /// True when any leaf is a streaming source or a `read_stream_table`.
    pub fn is_streaming(&self) -> bool {
        match self.node() {
            PlanNode::Source(s) => s.streaming,
            PlanNode::DatasetRead { streaming, .. } => *streaming,
            _ => self.children().iter().any(|c| c.is_streaming()),
        }
    }

    /// The datasets read, as `(name, streaming)`, without duplicates, in the
    /// order they are first read (left to right).
    pub fn datasets_read(&self) -> Vec<(String, bool)> {
        let mut out = Vec::new();
        self.walk(&mut |n| {
            if let PlanNode::DatasetRead {
                name, streaming, ..
            } = n
            {
                let item = (name.clone(), *streaming);
                if !out.contains(&item) {
                    out.push(item);
                }
            }
        });
        out
    }

    /// The plan with each dataset read that `replace` returns a plan for
    /// swapped for that plan (how temporary views are inlined into the
    /// flows that read them). `replace` gets the dataset's name, whether it
    /// is read as a stream, and the read's options.
    pub fn with_dataset_reads_replaced(&self, replace: &mut ReplaceRead<'_>) -> DataFrame {
        let mut node = self.node().clone();
        match &mut node {
            PlanNode::DatasetRead {
                name,
                streaming,
                options,
            } => {
                return replace(name, *streaming, options).unwrap_or_else(|| self.clone());
            }
            PlanNode::Source(_) => return self.clone(),
            other => {
                for child in other.children_mut() {
                    *child = child.with_dataset_reads_replaced(replace);
                }
            }
        }
        DataFrame::from_node(node)
    }

    /// The external sources read, left to right.
    pub fn sources(&self) -> Vec<&SourceSpec> {
        fn go<'a>(df: &'a DataFrame, out: &mut Vec<&'a SourceSpec>) {
            if let PlanNode::Source(s) = df.node() {
                out.push(s);
            }
            for c in df.children() {
                go(c, out);
            }
        }
        let mut out = Vec::new();
        go(self, &mut out);
        out
    }

    /// Visits every node, parents before children, left to right.
    pub fn walk(&self, f: &mut dyn FnMut(&PlanNode)) {
        f(self.node());
        for c in self.children() {
            c.walk(f);
        }
    }

    /// Resolves the plan: the schema of every node, against the dataset
    /// schemas of `catalog`. Returns every problem found; an unknown dataset
    /// gives an error whose message starts with [`UNKNOWN_DATASET`].
    pub fn resolve(&self, catalog: &dyn Catalog) -> Result<ResolvedPlan, Vec<PlanError>> {
        resolve::resolve(self, catalog)
    }

    fn wrap(node: PlanNode) -> Result<DataFrame> {
        Ok(DataFrame::from_node(node))
    }

    /// Projects expressions (`Expr`s or SQL text): Spark's `select`.
    pub fn select<E: Into<ColumnExpr>>(
        &self,
        exprs: impl IntoIterator<Item = E>,
    ) -> Result<DataFrame> {
        let exprs: Vec<ColumnExpr> = exprs.into_iter().map(Into::into).collect();
        validate_all(&exprs)?;
        if exprs.is_empty() {
            return Err(PlanError::with_help(
                "select needs at least one column",
                "list the columns to keep",
            )
            .into());
        }
        Self::wrap(PlanNode::Select {
            input: self.clone(),
            exprs,
        })
    }

    /// Projects SQL expressions: Spark's `selectExpr`, e.g.
    /// `["CAST(key AS STRING) AS event_type", "value"]`.
    pub fn select_expr<S: AsRef<str>>(
        &self,
        sqls: impl IntoIterator<Item = S>,
    ) -> Result<DataFrame> {
        let exprs: Vec<ColumnExpr> = sqls
            .into_iter()
            .map(|s| ColumnExpr::Sql(s.as_ref().to_string()))
            .collect();
        self.select(exprs)
    }

    /// Keeps the rows for which `predicate` (SQL text or an `Expr`) is true.
    pub fn filter(&self, predicate: impl IntoPredicate) -> Result<DataFrame> {
        let predicate = predicate.into_predicate();
        predicate.validate()?;
        Self::wrap(PlanNode::Filter {
            input: self.clone(),
            predicate,
        })
    }

    /// Alias of [`filter`](Self::filter).
    pub fn where_(&self, predicate: impl IntoPredicate) -> Result<DataFrame> {
        self.filter(predicate)
    }

    /// Adds column `name` computed by `expr` (SQL text or an `Expr`), replacing
    /// an existing column of that name in place.
    pub fn with_column(&self, name: &str, expr: impl Into<ColumnExpr>) -> Result<DataFrame> {
        check_name(name, "with_column")?;
        let expr = expr.into();
        expr.validate()?;
        Self::wrap(PlanNode::WithColumn {
            input: self.clone(),
            name: name.to_string(),
            expr,
        })
    }

    /// Renames a column. Unlike Spark, renaming a column that does not exist
    /// is an error (found at resolve time).
    pub fn with_column_renamed(&self, existing: &str, new: &str) -> Result<DataFrame> {
        check_name(existing, "with_column_renamed")?;
        check_name(new, "with_column_renamed")?;
        Self::wrap(PlanNode::WithColumnRenamed {
            input: self.clone(),
            existing: existing.to_string(),
            new: new.to_string(),
        })
    }

    /// Removes columns. Unlike Spark, dropping a column that does not exist is
    /// an error (found at resolve time).
    pub fn drop<S: AsRef<str>>(&self, columns: impl IntoIterator<Item = S>) -> Result<DataFrame> {
        let columns: Vec<String> = columns
            .into_iter()
            .map(|s| s.as_ref().to_string())
            .collect();
        for c in &columns {
            check_name(c, "drop")?;
        }
        Self::wrap(PlanNode::Drop {
            input: self.clone(),
            columns,
        })
    }

    /// The rows of both plans, columns matched by position (Spark's `union`;
    /// duplicates are kept). Streaming and batch inputs cannot be mixed.
    pub fn union(&self, other: &DataFrame) -> Result<DataFrame> {
        let mut inputs = Vec::new();
        for df in [self, other] {
            match df.node() {
                PlanNode::Union { inputs: inner } => inputs.extend(inner.iter().cloned()),
                _ => inputs.push(df.clone()),
            }
        }
        Self::wrap(PlanNode::Union { inputs })
    }

    /// Declares `column` as event time, accepting rows up to `delay` late
    /// (Spark's `withWatermark("ts", "10 minutes")`).
    pub fn with_watermark(&self, column: &str, delay: &str) -> Result<DataFrame> {
        check_name(column, "with_watermark")?;
        let d = crate::duration::parse_interval(delay)?;
        Self::wrap(PlanNode::WithWatermark {
            input: self.clone(),
            column: column.to_string(),
            delay: d,
            delay_text: delay.trim().to_string(),
        })
    }

    /// Groups by keys (`Expr`s such as `window(col("ts"), ..)`, or SQL text);
    /// finish with [`GroupedData::agg`] or [`GroupedData::count`].
    pub fn group_by<E: Into<ColumnExpr>>(&self, keys: impl IntoIterator<Item = E>) -> GroupedData {
        GroupedData {
            input: self.clone(),
            keys: keys.into_iter().map(Into::into).collect(),
        }
    }

    /// Removes duplicate rows, comparing `columns` (all columns when None).
    /// On a stream, keeps state for every key seen unless a watermark bounds it.
    pub fn drop_duplicates<S: AsRef<str>>(&self, columns: Option<&[S]>) -> Result<DataFrame> {
        let columns: Option<Vec<String>> =
            columns.map(|c| c.iter().map(|s| s.as_ref().to_string()).collect());
        Self::wrap(PlanNode::DropDuplicates {
            input: self.clone(),
            columns,
            within_watermark: false,
        })
    }

    /// Removes duplicate rows (by `columns`) arriving within the watermark
    /// delay of each other (Spark's `dropDuplicatesWithinWatermark`).
    pub fn drop_duplicates_within_watermark<S: AsRef<str>>(
        &self,
        columns: impl IntoIterator<Item = S>,
    ) -> Result<DataFrame> {
        let columns: Vec<String> = columns
            .into_iter()
            .map(|s| s.as_ref().to_string())
            .collect();
        Self::wrap(PlanNode::DropDuplicates {
            input: self.clone(),
            columns: if columns.is_empty() {
                None
            } else {
                Some(columns)
            },
            within_watermark: true,
        })
    }

    /// Joins with `other` on a condition (SQL text or an `Expr`). Columns
    /// present on both sides are written `left.x` / `right.x`. The output is
    /// the left columns then the right ones (left ones only for semi and anti
    /// joins); two output columns with the same name are an error.
    pub fn join(
        &self,
        other: &DataFrame,
        on: impl Into<ColumnExpr>,
        join_type: JoinType,
    ) -> Result<DataFrame> {
        let on = on.into();
        on.validate()?;
        Self::wrap(PlanNode::Join {
            left: self.clone(),
            right: other.clone(),
            on: Some(on),
            using: Vec::new(),
            join_type,
        })
    }

    /// Joins with `other` where the `using` columns are equal (Spark's
    /// `join(other, Seq("id"), type)`). Output like Spark: the key columns
    /// once, then the other left columns, then the other right columns.
    pub fn join_using<S: AsRef<str>>(
        &self,
        other: &DataFrame,
        using: impl IntoIterator<Item = S>,
        join_type: JoinType,
    ) -> Result<DataFrame> {
        let using: Vec<String> = using.into_iter().map(|s| s.as_ref().to_string()).collect();
        if using.is_empty() {
            return Err(PlanError::with_help(
                "join_using needs at least one column",
                "name the columns equal on both sides, e.g. join_using(&other, [\"id\"], JoinType::Inner)",
            )
            .into());
        }
        Self::wrap(PlanNode::Join {
            left: self.clone(),
            right: other.clone(),
            on: None,
            using,
            join_type,
        })
    }

    /// Sorts rows: `SortExpr`s (`col("n").sort(false, false)`), `Expr`s
    /// (ascending) or SQL text (`"n DESC"`).
    pub fn order_by<K: Into<SortKey>>(
        &self,
        sort: impl IntoIterator<Item = K>,
    ) -> Result<DataFrame> {
        let sort: Vec<SortKey> = sort.into_iter().map(Into::into).collect();
        for k in &sort {
            k.expr.validate()?;
        }
        if sort.is_empty() {
            return Err(PlanError::new("order_by needs at least one sort key").into());
        }
        Self::wrap(PlanNode::OrderBy {
            input: self.clone(),
            sort,
        })
    }

    /// Keeps at most `n` rows.
    pub fn limit(&self, n: usize) -> Result<DataFrame> {
        Self::wrap(PlanNode::Limit {
            input: self.clone(),
            n,
        })
    }
}

impl PlanNode {
    /// The inputs of this operation, to replace them.
    fn children_mut(&mut self) -> Vec<&mut DataFrame> {
        match self {
            PlanNode::Source(_) | PlanNode::DatasetRead { .. } => vec![],
            PlanNode::Select { input, .. }
            | PlanNode::Filter { input, .. }
            | PlanNode::WithColumn { input, .. }
            | PlanNode::WithColumnRenamed { input, .. }
            | PlanNode::Drop { input, .. }
            | PlanNode::WithWatermark { input, .. }
            | PlanNode::Aggregate { input, .. }
            | PlanNode::DropDuplicates { input, .. }
            | PlanNode::OrderBy { input, .. }
            | PlanNode::Limit { input, .. } => vec![input],
            PlanNode::Union { inputs } => inputs.iter_mut().collect(),
            PlanNode::Join { left, right, .. } => vec![left, right],
        }
    }

    /// The inputs of this operation.
    pub fn children(&self) -> Vec<&DataFrame> {
        match self {
            PlanNode::Source(_) | PlanNode::DatasetRead { .. } => vec![],
            PlanNode::Select { input, .. }
            | PlanNode::Filter { input, .. }
            | PlanNode::WithColumn { input, .. }
            | PlanNode::WithColumnRenamed { input, .. }
            | PlanNode::Drop { input, .. }
            | PlanNode::WithWatermark { input, .. }
            | PlanNode::Aggregate { input, .. }
            | PlanNode::DropDuplicates { input, .. }
            | PlanNode::OrderBy { input, .. }
            | PlanNode::Limit { input, .. } => vec![input],
            PlanNode::Union { inputs } => inputs.iter().collect(),
            PlanNode::Join { left, right, .. } => vec![left, right],
        }
    }

    /// The operation's name, e.g. "filter", "group_by".
    pub fn name(&self) -> &'static str {
        match self {
            PlanNode::Source(_) => "source",
            PlanNode::DatasetRead { .. } => "dataset read",
            PlanNode::Select { .. } => "select",
            PlanNode::Filter { .. } => "filter",
            PlanNode::WithColumn { .. } => "with_column",
            PlanNode::WithColumnRenamed { .. } => "with_column_renamed",
            PlanNode::Drop { .. } => "drop",
            PlanNode::Union { .. } => "union",
            PlanNode::WithWatermark { .. } => "with_watermark",
            PlanNode::Aggregate { .. } => "group_by",
            PlanNode::DropDuplicates { .. } => "drop_duplicates",
            PlanNode::Join { .. } => "join",
            PlanNode::OrderBy { .. } => "order_by",
            PlanNode::Limit { .. } => "limit",
        }
    }
}

/// A grouped plan waiting for its aggregates: `group_by(keys).agg(..)` or `.count()`.
#[derive(Clone, Debug)]
pub struct GroupedData {
    input: DataFrame,
    keys: Vec<ColumnExpr>,
}

impl GroupedData {
    /// Aggregates per group (`Expr`s such as `sum(col("n")).alias("total")`,
    /// or SQL text such as `"sum(n) AS total"`). Output: keys then aggregates.
    pub fn agg<E: Into<ColumnExpr>>(
        self,
        aggregates: impl IntoIterator<Item = E>,
    ) -> Result<DataFrame> {
        let aggregates: Vec<ColumnExpr> = aggregates.into_iter().map(Into::into).collect();
        validate_all(&self.keys)?;
        validate_all(&aggregates)?;
        if aggregates.is_empty() && self.keys.is_empty() {
            return Err(PlanError::with_help(
                "group_by without keys needs at least one aggregate",
                "pass aggregates to agg(...), e.g. agg([count_all()])",
            )
            .into());
        }
        DataFrame::wrap(PlanNode::Aggregate {
            input: self.input,
            keys: self.keys,
            aggregates,
        })
    }

    /// The number of rows per group, in a `BIGINT` column named `count`.
    pub fn count(self) -> Result<DataFrame> {
        self.agg([functions::count_all()])
    }

    /// The grouping keys.
    pub fn keys(&self) -> &[ColumnExpr] {
        &self.keys
    }
}
