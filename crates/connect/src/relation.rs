//! A flow's plan ([`DataFrame`]) as an unresolved Spark Connect `Relation`.
//!
//! One relation per plan node, in the shapes PySpark sends for the same
//! DataFrame calls (`Read`, `Filter`, `Project`, `WithColumns`,
//! `WithWatermark`, `Aggregate`, `Deduplicate`, `Join`, `SetOperation`,
//! ...). The output columns of a projection or an aggregation are aliased to
//! the names this engine resolved, so a table has the same columns on Spark
//! as here.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use arrow::datatypes::SchemaRef;
use pipelines_core::plan::ddl::type_to_ddl;
use pipelines_core::plan::{ColumnExpr, DataFrame, JoinType, PlanNode, ResolvedPlan, SourceSpec};

use crate::expr::{self, Untranslatable};
use crate::proto::expression::{sort_order, SortOrder};
use crate::proto::relation::RelType;
use crate::proto::{
    aggregate, join, read, set_operation, with_columns_renamed, Aggregate, Deduplicate, Drop,
    Filter, Join, Limit, Project, Read, Relation, RelationCommon, SetOperation, Sort, Sql,
    SubqueryAlias, WithColumns, WithColumnsRenamed, WithWatermark,
};

/// The formats Spark reads with `spark.readStream.format(...)` / `spark.read`.
const SPARK_SOURCE_FORMATS: &[&str] = &[
    "json", "csv", "parquet", "text", "orc", "rate", "socket", "kafka", "delta",
];

/// Formats whose schema the user gives (others have a fixed one Spark refuses
/// to be told).
const SCHEMA_FORMATS: &[&str] = &["json", "csv", "parquet", "orc"];

/// Builds relations for one flow's plan.
pub struct RelationBuilder<'a> {
    /// Resolved schemas of the plan's nodes (for output names).
    resolved: Option<&'a ResolvedPlan>,
    /// Relative source paths are resolved against it.
    base_dir: &'a Path,
    /// Numbers the relations (`common.plan_id`), like PySpark's counter.
    next_plan_id: &'a mut i64,
}

impl<'a> RelationBuilder<'a> {
    /// A builder; `resolved` is the plan resolved by the graph's checks.
    pub fn new(
        resolved: Option<&'a ResolvedPlan>,
        base_dir: &'a Path,
        next_plan_id: &'a mut i64,
    ) -> Self {
        RelationBuilder {
            resolved,
            base_dir,
            next_plan_id,
        }
    }

    fn relation(&mut self, rel: RelType) -> Relation {
        let id = *self.next_plan_id;
        *self.next_plan_id += 1;
        Relation {
            common: Some(RelationCommon {
                plan_id: Some(id),
                ..Default::default()
            }),
            rel_type: Some(rel),
        }
    }

    fn schema_of(&self, df: &DataFrame) -> Option<SchemaRef> {
        self.resolved.and_then(|r| r.schema_of(df))
    }

    fn boxed(&mut self, df: &DataFrame) -> Result<Option<Box<Relation>>, Untranslatable> {
        Ok(Some(Box::new(self.build(df)?)))
    }

    /// Expressions aliased to the output names of `df`'s resolved schema
    /// (kept as written when a `*` makes the count differ).
    fn named_outputs(
        &self,
        df: &DataFrame,
        exprs: &[&ColumnExpr],
    ) -> Result<Vec<crate::proto::Expression>, Untranslatable> {
        let schema = self.schema_of(df);
        let names: Option<Vec<String>> = schema
            .filter(|s| s.fields().len() == exprs.len() && !exprs.iter().any(|e| expr::is_star(e)))
            .map(|s| s.fields().iter().map(|f| f.name().clone()).collect());
        exprs
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let translated = expr::column_expr(e)?;
                Ok(match &names {
                    Some(n) => expr::alias(strip_alias(translated), &n[i]),
                    None => translated,
                })
            })
            .collect()
    }

    /// The relation of `df`.
    pub fn build(&mut self, df: &DataFrame) -> Result<Relation, Untranslatable> {
        let rel = match df.node() {
            PlanNode::Source(spec) => RelType::Read(self.source(spec)?),
            PlanNode::DatasetRead {
                name,
                streaming,
                options,
            } => RelType::Read(Read {
                is_streaming: *streaming,
                read_type: Some(read::ReadType::NamedTable(read::NamedTable {
                    unparsed_identifier: expr::quote_identifier(name),
                    options: to_map(options),
                })),
            }),
            PlanNode::Select { input, exprs } => {
                let refs: Vec<&ColumnExpr> = exprs.iter().collect();
                let expressions = self.named_outputs(df, &refs)?;
                RelType::Project(Box::new(Project {
                    input: self.boxed(input)?,
                    expressions,
                }))
            }
            PlanNode::Filter { input, predicate } => RelType::Filter(Box::new(Filter {
                input: self.boxed(input)?,
                condition: Some(expr::column_expr(predicate)?),
            })),
            PlanNode::WithColumn { input, name, expr } => {
                let aliased = crate::proto::expression::Alias {
                    expr: Some(Box::new(strip_alias(expr::column_expr(expr)?))),
                    name: vec![name.clone()],
                    metadata: None,
                };
                RelType::WithColumns(Box::new(WithColumns {
                    input: self.boxed(input)?,
                    aliases: vec![aliased],
                }))
            }
            PlanNode::WithColumnRenamed {
                input,
                existing,
                new,
            } => RelType::WithColumnsRenamed(Box::new(WithColumnsRenamed {
                input: self.boxed(input)?,
                rename_columns_map: HashMap::new(),
                renames: vec![with_columns_renamed::Rename {
                    col_name: existing.clone(),
                    new_col_name: new.clone(),
                }],
            })),
            PlanNode::Drop { input, columns } => RelType::Drop(Box::new(Drop {
                input: self.boxed(input)?,
                columns: Vec::new(),
                column_names: columns.clone(),
            })),
            PlanNode::Union { inputs } => {
                let mut iter = inputs.iter();
                let Some(first) = iter.next() else {
                    return Err(Untranslatable::new(
                        "a union without inputs",
                        "union at least two DataFrames",
                    ));
                };
                let mut acc = self.build(first)?;
                for next in iter {
                    let right = self.build(next)?;
                    acc = self.relation(RelType::SetOp(Box::new(SetOperation {
                        left_input: Some(Box::new(acc)),
                        right_input: Some(Box::new(right)),
                        set_op_type: set_operation::SetOpType::Union as i32,
                        is_all: Some(true),
                        by_name: Some(false),
                        allow_missing_columns: Some(false),
                    })));
                }
                return Ok(acc);
            }
            PlanNode::WithWatermark {
                input,
                column,
                delay_text,
                ..
            } => {
                if let PlanNode::DatasetRead {
                    name,
                    streaming: true,
                    options,
                } = input.node()
                {
                    // Spark 4.3 analyses `WithWatermark` when the flow is
                    // defined, and a pipeline table does not exist before its
                    // first run: the SQL watermark clause is analysed with the
                    // flow instead.
                    RelType::Sql(Sql {
                        query: watermark_sql(name, options, column, delay_text),
                        ..Default::default()
                    })
                } else {
                    RelType::WithWatermark(Box::new(WithWatermark {
                        input: self.boxed(input)?,
                        event_time: column.clone(),
                        delay_threshold: delay_text.clone(),
                    }))
                }
            }
            PlanNode::Aggregate {
                input,
                keys,
                aggregates,
            } => {
                let all: Vec<&ColumnExpr> = keys.iter().chain(aggregates.iter()).collect();
                let mut named = self.named_outputs(df, &all)?;
                let aggregate_expressions = named.split_off(keys.len());
                RelType::Aggregate(Box::new(Aggregate {
                    input: self.boxed(input)?,
                    group_type: aggregate::GroupType::Groupby as i32,
                    grouping_expressions: named,
                    aggregate_expressions,
                    pivot: None,
                    grouping_sets: Vec::new(),
                }))
            }
            PlanNode::DropDuplicates {
                input,
                columns,
                within_watermark,
            } => RelType::Deduplicate(Box::new(Deduplicate {
                input: self.boxed(input)?,
                column_names: columns.clone().unwrap_or_default(),
                all_columns_as_keys: Some(columns.is_none()),
                within_watermark: Some(*within_watermark),
            })),
            PlanNode::Join {
                left,
                right,
                on,
                using,
                join_type,
            } => {
                // The sides are named as this engine's conditions qualify
                // them: `left.x`, `right.y`.
                let left = self.aliased(left, "left")?;
                let right = self.aliased(right, "right")?;
                RelType::Join(Box::new(Join {
                    left: Some(Box::new(left)),
                    right: Some(Box::new(right)),
                    join_condition: on.as_ref().map(expr::column_expr).transpose()?,
                    join_type: spark_join_type(*join_type) as i32,
                    using_columns: using.clone(),
                    join_data_type: None,
                }))
            }
            PlanNode::OrderBy { input, sort } => {
                let mut order = Vec::new();
                for key in sort {
                    order.push(SortOrder {
                        child: Some(Box::new(strip_alias(expr::column_expr(&key.expr)?))),
                        direction: if key.asc {
                            sort_order::SortDirection::Ascending
                        } else {
                            sort_order::SortDirection::Descending
                        } as i32,
                        null_ordering: if key.nulls_first {
                            sort_order::NullOrdering::SortNullsFirst
                        } else {
                            sort_order::NullOrdering::SortNullsLast
                        } as i32,
                    });
                }
                RelType::Sort(Box::new(Sort {
                    input: self.boxed(input)?,
                    order,
                    is_global: Some(true),
                }))
            }
            PlanNode::Limit { input, n } => RelType::Limit(Box::new(Limit {
                input: self.boxed(input)?,
                limit: i32::try_from(*n).unwrap_or(i32::MAX),
            })),
        };
        Ok(self.relation(rel))
    }

    fn aliased(&mut self, df: &DataFrame, name: &str) -> Result<Relation, Untranslatable> {
        let input = self.build(df)?;
        Ok(
            self.relation(RelType::SubqueryAlias(Box::new(SubqueryAlias {
                input: Some(Box::new(input)),
                alias: name.to_string(),
                qualifier: Vec::new(),
            }))),
        )
    }

    fn source(&mut self, spec: &SourceSpec) -> Result<Read, Untranslatable> {
        let format = spec.format.name();
        if !SPARK_SOURCE_FORMATS.contains(&format) {
            return Err(Untranslatable::new(
                format!("the {} source", format),
                format!(
                    "Spark has no `{format}` source; read one of {} instead, or run this pipeline on this engine",
                    SPARK_SOURCE_FORMATS.join(", ")
                ),
            ));
        }
        let schema = match (&spec.schema, SCHEMA_FORMATS.contains(&format)) {
            (Some(s), true) => Some(schema_ddl(s)),
            _ => None,
        };
        let paths = spec
            .path
            .iter()
            .map(|p| remote_path(p, self.base_dir))
            .collect();
        Ok(Read {
            is_streaming: spec.streaming,
            read_type: Some(read::ReadType::DataSource(read::DataSource {
                format: Some(format.to_string()),
                schema,
                options: to_map(&spec.options),
                paths,
                predicates: Vec::new(),
                source_name: None,
            })),
        })
    }
}

/// An expression without its outer alias (the name is given again).
fn strip_alias(e: crate::proto::Expression) -> crate::proto::Expression {
    match e.expr_type {
        Some(crate::proto::expression::ExprType::Alias(a)) => match a.expr {
            Some(inner) => *inner,
            None => crate::proto::Expression::default(),
        },
        _ => e,
    }
}

fn to_map(options: &BTreeMap<String, String>) -> HashMap<String, String> {
    options
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A schema as Spark DDL: `name TYPE, ...`.
pub fn schema_ddl(schema: &SchemaRef) -> String {
    schema
        .fields()
        .iter()
        .map(|f| {
            format!(
                "{} {}",
                expr::quote_identifier(f.name()),
                type_to_ddl(f.data_type())
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A path as the server must read it: URLs as written, local paths made
/// absolute against the project's directory.
pub fn remote_path(path: &str, base_dir: &Path) -> String {
    if path.contains("://") {
        return path.to_string();
    }
    let p = Path::new(path);
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        base_dir.join(p)
    };
    let absolute = std::path::absolute(&joined).unwrap_or(joined);
    // `a/./b` and `a/x/../b` as the server's file system would see them.
    let mut clean = std::path::PathBuf::new();
    for part in absolute.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                clean.pop();
            }
            other => clean.push(other),
        }
    }
    clean.display().to_string()
}

/// `SELECT * FROM STREAM(name) [WITH (...)] WATERMARK column DELAY OF INTERVAL ...`.
fn watermark_sql(
    name: &str,
    options: &BTreeMap<String, String>,
    column: &str,
    delay: &str,
) -> String {
    let with = if options.is_empty() {
        String::new()
    } else {
        let pairs: Vec<String> = options
            .iter()
            .map(|(k, v)| {
                format!(
                    "'{}' = '{}'",
                    k.replace('\'', "\\'"),
                    v.replace('\'', "\\'")
                )
            })
            .collect();
        format!(" WITH ({})", pairs.join(", "))
    };
    format!(
        "SELECT * FROM STREAM({}){with} WATERMARK {} DELAY OF INTERVAL {}",
        expr::quote_identifier(name),
        expr::quote_identifier(column),
        delay
    )
}

fn spark_join_type(t: JoinType) -> join::JoinType {
    match t {
        JoinType::Inner => join::JoinType::Inner,
        JoinType::LeftOuter => join::JoinType::LeftOuter,
        JoinType::RightOuter => join::JoinType::RightOuter,
        JoinType::FullOuter => join::JoinType::FullOuter,
        JoinType::LeftSemi => join::JoinType::LeftSemi,
        JoinType::LeftAnti => join::JoinType::LeftAnti,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_absolute_for_the_server() {
        let base = Path::new("/work/project");
        assert_eq!(remote_path("data/logs", base), "/work/project/data/logs");
        assert_eq!(remote_path("./data/../in", base), "/work/project/in");
        assert_eq!(remote_path("/abs/dir", base), "/abs/dir");
        assert_eq!(remote_path("s3a://bucket/in", base), "s3a://bucket/in");
    }

    #[test]
    fn a_watermark_over_a_pipeline_table_is_sql() {
        let mut options = BTreeMap::new();
        options.insert("maxFilesPerTrigger".to_string(), "1".to_string());
        assert_eq!(
            watermark_sql("clicks_raw", &options, "ts", "30 seconds"),
            "SELECT * FROM STREAM(clicks_raw) WITH ('maxFilesPerTrigger' = '1') WATERMARK ts DELAY OF INTERVAL 30 seconds"
        );
    }
}
