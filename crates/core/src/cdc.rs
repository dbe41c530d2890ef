//! AUTO CDC flows as declared: a change feed applied to a streaming table,
//! like `pyspark.pipelines.create_auto_cdc_flow` and SQL's
//! `CREATE FLOW f AS AUTO CDC INTO t FROM STREAM(s) KEYS (...) SEQUENCE BY ...`.
//!
//! [`AutoCdc`] holds what the user wrote (builder methods named after the
//! Python keywords); its flow (`FlowDef::auto_cdc`) reads the source as a
//! stream with three computed columns ([`SEQUENCE_COLUMN`],
//! [`DELETE_COLUMN`], [`TRUNCATE_COLUMN`]); [`AutoCdc::layout`] checks the
//! declaration against that query's schema and gives the target's schema and
//! where each of its columns comes from ([`CdcLayout`]), which the engine's
//! `engine::cdc` applies batch by batch.
//!
//! ```
//! use pipelines_core::cdc::AutoCdc;
//! let cdc = AutoCdc::new("customers", "customers_cdc")
//!     .keys(["id"])
//!     .sequence_by("seq")
//!     .apply_as_deletes("operation = 'DELETE'")
//!     .except_column_list(["operation", "seq"])
//!     .stored_as_scd_type(2);
//! assert_eq!(cdc.flow_name(), "customers");
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::formats::did_you_mean;
use crate::registry::AutoCdcDecl;

/// The change feed's computed sequence value (`sequence_by`).
pub const SEQUENCE_COLUMN: &str = "__cdc_sequence";
/// The change feed's computed delete flag (`apply_as_deletes`, false when absent or NULL).
pub const DELETE_COLUMN: &str = "__cdc_delete";
/// The change feed's computed truncate flag (`apply_as_truncates`).
pub const TRUNCATE_COLUMN: &str = "__cdc_truncate";
/// SCD type 2: where a version starts (the sequence of the event that opened it).
pub const START_AT: &str = "__START_AT";
/// SCD type 2: where a version ends (the next version's or the delete's sequence; NULL while open).
pub const END_AT: &str = "__END_AT";
pub use crate::conf::{DEFAULT_TOMBSTONE_GC_SECONDS, TOMBSTONE_GC_THRESHOLD};

/// How the target keeps the changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ScdType {
    /// SCD type 1: one row per key, its latest value; deletes remove it.
    #[default]
    One,
    /// SCD type 2: every version of a key with `__START_AT` / `__END_AT`.
    Two,
}

impl ScdType {
    /// "SCD type 1".
    pub fn describe(&self) -> &'static str {
        match self {
            ScdType::One => "SCD type 1",
            ScdType::Two => "SCD type 2",
        }
    }
}

/// An AUTO CDC flow's declaration: `create_auto_cdc_flow(target, source,
/// keys, sequence_by, ...)`. Problems (both column lists, history options on
/// SCD type 1, a type other than 1 or 2) are reported when the graph is
/// built, all at once.
#[derive(Clone, Debug, Default)]
pub struct AutoCdc {
    /// The streaming table the changes go to.
    pub target: String,
    /// The change feed: a dataset of the pipeline.
    pub source: String,
    /// False when the feed is read as a batch (SQL `FROM src` without
    /// `STREAM`), which the graph refuses: a change feed is read as a stream.
    pub source_streaming: bool,
    /// The flow's name (the target's name when not given, as in Spark).
    pub name: Option<String>,
    /// Columns identifying a row of the target.
    pub keys: Vec<String>,
    /// The order of the events of a key: a column or SQL expression.
    pub sequence_by: String,
    /// A SQL condition that makes an event a delete.
    pub apply_as_deletes: Option<String>,
    /// A SQL condition that makes an event a truncate of the whole target
    /// (SCD type 1 only).
    pub apply_as_truncates: Option<String>,
    /// The feed's columns the target keeps (all when neither list is given).
    pub column_list: Option<Vec<String>>,
    /// The feed's columns the target does not keep.
    pub except_column_list: Option<Vec<String>>,
    /// 1 (default) or 2.
    pub stored_as_scd_type: Option<u8>,
    /// SCD type 2: the columns whose changes open a new version (all when
    /// neither list is given); the others are updated in place.
    pub track_history_column_list: Option<Vec<String>>,
    /// SCD type 2: the columns whose changes do not open a new version.
    pub track_history_except_column_list: Option<Vec<String>>,
    /// Per-flow settings (Spark's `spark_conf`).
    pub conf: BTreeMap<String, String>,
    /// Free text description.
    pub comment: Option<String>,
}

fn strings<S: Into<String>>(items: impl IntoIterator<Item = S>) -> Vec<String> {
    items.into_iter().map(Into::into).collect()
}

impl AutoCdc {
    /// A flow applying the change feed `source` to the streaming table `target`.
    pub fn new(target: impl Into<String>, source: impl Into<String>) -> Self {
        AutoCdc {
            target: target.into(),
            source: source.into(),
            source_streaming: true,
            ..AutoCdc::default()
        }
    }

    /// The key columns.
    pub fn keys<S: Into<String>>(mut self, keys: impl IntoIterator<Item = S>) -> Self {
        self.keys = strings(keys);
        self
    }

    /// The sequencing column or expression.
    pub fn sequence_by(mut self, expr: impl Into<String>) -> Self {
        self.sequence_by = expr.into();
        self
    }

    /// The condition that makes an event a delete.
    pub fn apply_as_deletes(mut self, condition: impl Into<String>) -> Self {
        self.apply_as_deletes = Some(condition.into());
        self
    }

    /// The condition that makes an event a truncate (SCD type 1).
    pub fn apply_as_truncates(mut self, condition: impl Into<String>) -> Self {
        self.apply_as_truncates = Some(condition.into());
        self
    }

    /// Keeps only these columns of the feed.
    pub fn column_list<S: Into<String>>(mut self, columns: impl IntoIterator<Item = S>) -> Self {
        self.column_list = Some(strings(columns));
        self
    }

    /// Keeps every column of the feed but these.
    pub fn except_column_list<S: Into<String>>(
        mut self,
        columns: impl IntoIterator<Item = S>,
    ) -> Self {
        self.except_column_list = Some(strings(columns));
        self
    }

    /// 1 (the default) or 2.
    pub fn stored_as_scd_type(mut self, scd_type: u8) -> Self {
        self.stored_as_scd_type = Some(scd_type);
        self
    }

    /// SCD type 2: only changes of these columns open a new version.
    pub fn track_history_column_list<S: Into<String>>(
        mut self,
        columns: impl IntoIterator<Item = S>,
    ) -> Self {
        self.track_history_column_list = Some(strings(columns));
        self
    }

    /// SCD type 2: changes of these columns never open a new version.
    pub fn track_history_except_column_list<S: Into<String>>(
        mut self,
        columns: impl IntoIterator<Item = S>,
    ) -> Self {
        self.track_history_except_column_list = Some(strings(columns));
        self
    }

    /// The flow's name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// A per-flow setting, e.g. [`TOMBSTONE_GC_THRESHOLD`].
    pub fn conf(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.conf.insert(key.into(), value.into());
        self
    }

    /// A description.
    pub fn comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }

    /// The flow's name: `name`, else the target's.
    pub fn flow_name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.target)
    }

    /// The type of table the target is (type 1 for anything but 2; other
    /// values are reported by [`problems`](Self::problems)).
    pub fn scd_type(&self) -> ScdType {
        match self.stored_as_scd_type {
            Some(2) => ScdType::Two,
            _ => ScdType::One,
        }
    }

    /// A problem found while resolving the flow's query, in the words of
    /// the declaration: `with_column `__cdc_sequence` `x`` becomes
    /// `sequence_by `x``.
    pub fn explain(&self, message: &str) -> String {
        let mut out = message.to_string();
        let flag = |c: &Option<String>| {
            c.as_ref()
                .map(|c| (format!("coalesce(({c}), false)"), c.clone()))
        };
        for (column, keyword, written) in [
            (
                SEQUENCE_COLUMN,
                "sequence_by",
                Some((self.sequence_by.clone(), self.sequence_by.clone())),
            ),
            (
                DELETE_COLUMN,
                "apply_as_deletes",
                flag(&self.apply_as_deletes),
            ),
            (
                TRUNCATE_COLUMN,
                "apply_as_truncates",
                flag(&self.apply_as_truncates),
            ),
        ] {
            if let Some((expr, written)) = written {
                out = out.replace(
                    &format!("with_column `{column}` `{expr}`"),
                    &format!("AUTO CDC {keyword} `{written}`"),
                );
            }
        }
        out
    }

    /// What is wrong with the declaration itself, before any schema is
    /// known: each a message and its fix.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.keys.is_empty() {
            out.push((
                "has no keys".to_string(),
                "name the columns that identify a row: `.keys([\"id\"])` or `KEYS (id)`"
                    .to_string(),
            ));
        }
        if self.sequence_by.trim().is_empty() {
            out.push((
                "has no sequence_by".to_string(),
                "name the column (or expression) that orders the events of a key: `.sequence_by(\"seq\")` or `SEQUENCE BY seq`".to_string(),
            ));
        }
        if self.column_list.is_some() && self.except_column_list.is_some() {
            out.push((
                "sets both column_list and except_column_list".to_string(),
                "keep one: the columns to keep, or the columns to leave out".to_string(),
            ));
        }
        if self.track_history_column_list.is_some()
            && self.track_history_except_column_list.is_some()
        {
            out.push((
                "sets both track_history_column_list and track_history_except_column_list".to_string(),
                "keep one: the columns whose changes are history, or the ones whose changes are not".to_string(),
            ));
        }
        match self.stored_as_scd_type {
            None | Some(1) | Some(2) => {}
            Some(n) => out.push((
                format!("has stored_as_scd_type {n}"),
                "use 1 (latest value per key) or 2 (every version, with __START_AT and __END_AT)"
                    .to_string(),
            )),
        }
        if self.scd_type() == ScdType::One
            && (self.track_history_column_list.is_some()
                || self.track_history_except_column_list.is_some())
        {
            out.push((
                "tracks history, but stores SCD type 1".to_string(),
                "set stored_as_scd_type 2 (`STORED AS SCD TYPE 2`), or remove the track-history columns".to_string(),
            ));
        }
        if self.scd_type() == ScdType::Two && self.apply_as_truncates.is_some() {
            out.push((
                "sets apply_as_truncates, which SCD type 2 does not support".to_string(),
                "remove it, or store SCD type 1".to_string(),
            ));
        }
        out
    }

    /// Checks the declaration against the schema of its query (the feed's
    /// columns and the three computed ones) and lays out the target.
    pub fn layout(&self, feed: &SchemaRef) -> Result<CdcLayout, Vec<(String, String)>> {
        let mut problems = Vec::new();
        let feed_columns: Vec<&str> = feed
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .filter(|n| ![SEQUENCE_COLUMN, DELETE_COLUMN, TRUNCATE_COLUMN].contains(n))
            .collect();
        let lookup =
            |what: &str, c: &str, problems: &mut Vec<(String, String)>| -> Option<String> {
                if let Some(n) = feed_columns.iter().find(|n| **n == c) {
                    return Some(n.to_string());
                }
                if let Some(n) = feed_columns.iter().find(|n| n.eq_ignore_ascii_case(c)) {
                    return Some(n.to_string());
                }
                let help = match did_you_mean(c, feed_columns.iter().copied()) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => format!(
                        "the change feed `{}` has: {}",
                        self.source,
                        feed_columns.join(", ")
                    ),
                };
                problems.push((
                    format!(
                        "{what} `{c}` is not a column of the change feed `{}`",
                        self.source
                    ),
                    help,
                ));
                None
            };
        let keys: Vec<String> = self
            .keys
            .iter()
            .filter_map(|k| lookup("key", k, &mut problems))
            .collect();
        let kept: Vec<String> = match (&self.column_list, &self.except_column_list) {
            (Some(only), _) => {
                let listed: Vec<String> = only
                    .iter()
                    .filter_map(|c| lookup("column_list column", c, &mut problems))
                    .collect();
                for k in &keys {
                    if !listed.contains(k) {
                        problems.push((
                            format!("column_list leaves out the key `{k}`"),
                            format!("add `{k}` to column_list: the target keeps its keys"),
                        ));
                    }
                }
                // In the feed's order, as Spark selects them.
                feed_columns
                    .iter()
                    .filter(|c| listed.iter().any(|l| l == *c))
                    .map(|c| c.to_string())
                    .collect()
            }
            (None, Some(except)) => {
                let left_out: Vec<String> = except
                    .iter()
                    .filter_map(|c| lookup("except_column_list column", c, &mut problems))
                    .collect();
                for k in &keys {
                    if left_out.contains(k) {
                        problems.push((
                            format!("except_column_list leaves out the key `{k}`"),
                            format!(
                                "remove `{k}` from except_column_list: the target keeps its keys"
                            ),
                        ));
                    }
                }
                feed_columns
                    .iter()
                    .filter(|c| !left_out.iter().any(|l| l == *c))
                    .map(|c| c.to_string())
                    .collect()
            }
            (None, None) => feed_columns.iter().map(|c| c.to_string()).collect(),
        };
        let scd = self.scd_type();
        let tracked: Vec<String> = match (
            &self.track_history_column_list,
            &self.track_history_except_column_list,
        ) {
            (Some(only), _) => {
                let listed: Vec<String> = only
                    .iter()
                    .filter_map(|c| lookup("track_history_column_list column", c, &mut problems))
                    .collect();
                kept.iter()
                    .filter(|c| listed.contains(c))
                    .cloned()
                    .collect()
            }
            (None, Some(except)) => {
                let left_out: Vec<String> = except
                    .iter()
                    .filter_map(|c| {
                        lookup("track_history_except_column_list column", c, &mut problems)
                    })
                    .collect();
                kept.iter()
                    .filter(|c| !left_out.contains(c))
                    .cloned()
                    .collect()
            }
            (None, None) => kept.clone(),
        };
        let Ok(sequence) = feed.field_with_name(SEQUENCE_COLUMN) else {
            problems.push((
                "its query lost the sequence column".to_string(),
                "report this: the AUTO CDC query is built by the engine".to_string(),
            ));
            return Err(problems);
        };
        let sequence_type = sequence.data_type().clone();
        if !orderable(&sequence_type) {
            problems.push((
                format!(
                    "sequence_by `{}` is of type {}, which has no order",
                    self.sequence_by,
                    crate::plan::ddl::type_to_ddl(&sequence_type)
                ),
                "sequence by a number, a timestamp, a date, a string, or a struct of those"
                    .to_string(),
            ));
        }
        for c in kept.iter().filter(|_| scd == ScdType::Two) {
            if c == START_AT || c == END_AT {
                problems.push((
                    format!("the change feed has a column `{c}`, which SCD type 2 adds itself"),
                    format!("rename `{c}` in a view, or leave it out with except_column_list"),
                ));
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        let index = |c: &str| feed.index_of(c).expect("looked up above");
        let mut fields: Vec<Field> = kept
            .iter()
            .map(|c| {
                let f = feed.field(index(c));
                Field::new(f.name(), f.data_type().clone(), true)
            })
            .collect();
        if scd == ScdType::Two {
            fields.push(Field::new(START_AT, sequence_type.clone(), true));
            fields.push(Field::new(END_AT, sequence_type.clone(), true));
        }
        Ok(CdcLayout {
            scd,
            key_columns: keys.iter().map(|k| index(k)).collect(),
            key_names: keys.clone(),
            value_columns: kept.iter().map(|c| index(c)).collect(),
            tracked_columns: tracked.iter().map(|c| index(c)).collect(),
            sequence_column: index(SEQUENCE_COLUMN),
            delete_column: index(DELETE_COLUMN),
            truncate_column: index(TRUNCATE_COLUMN),
            sequence_type,
            target_schema: Arc::new(Schema::new(fields)),
        })
    }
}

impl From<&'static AutoCdcDecl> for AutoCdc {
    fn from(d: &'static AutoCdcDecl) -> Self {
        let list = |l: Option<&'static [&'static str]>| l.map(|l| strings(l.iter().copied()));
        AutoCdc {
            target: d.target.to_string(),
            source: d.source.to_string(),
            source_streaming: true,
            name: d.name.map(str::to_string),
            keys: strings(d.keys.iter().copied()),
            sequence_by: d.sequence_by.to_string(),
            apply_as_deletes: d.apply_as_deletes.map(str::to_string),
            apply_as_truncates: d.apply_as_truncates.map(str::to_string),
            column_list: list(d.column_list),
            except_column_list: list(d.except_column_list),
            stored_as_scd_type: d.stored_as_scd_type,
            track_history_column_list: list(d.track_history_column_list),
            track_history_except_column_list: list(d.track_history_except_column_list),
            conf: d
                .conf
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            comment: d.comment.map(str::to_string),
        }
    }
}

/// Whether values of `t` can order events.
fn orderable(t: &DataType) -> bool {
    match t {
        DataType::Struct(fields) => fields.iter().all(|f| orderable(f.data_type())),
        DataType::List(_)
        | DataType::LargeList(_)
        | DataType::Map(..)
        | DataType::Binary
        | DataType::Null => false,
        _ => true,
    }
}

/// An AUTO CDC flow checked against its query's schema: the target's
/// schema and where its columns are in the query's rows.
#[derive(Clone, Debug, PartialEq)]
pub struct CdcLayout {
    /// Type 1 or 2.
    pub scd: ScdType,
    /// The keys' positions in the feed's rows.
    pub key_columns: Vec<usize>,
    /// The keys' names (as in the target).
    pub key_names: Vec<String>,
    /// The target's columns (without `__START_AT`/`__END_AT`): positions in the feed's rows.
    pub value_columns: Vec<usize>,
    /// SCD type 2: the tracked columns' positions in the feed's rows.
    pub tracked_columns: Vec<usize>,
    /// Where [`SEQUENCE_COLUMN`] is.
    pub sequence_column: usize,
    /// Where [`DELETE_COLUMN`] is.
    pub delete_column: usize,
    /// Where [`TRUNCATE_COLUMN`] is.
    pub truncate_column: usize,
    /// The sequence's type (also `__START_AT`'s and `__END_AT`'s).
    pub sequence_type: DataType,
    /// The target table's schema, every column nullable.
    pub target_schema: SchemaRef,
}
