//! Resolution: the schema of every node of a plan, and every column or type
//! error in it.
//!
//! Each node is resolved by building a DataFusion [`LogicalPlan`] of its
//! operation over table scans of its inputs' schemas (named `input`, or
//! `left`/`right` for joins, `input0`, `input1`... for unions), running
//! DataFusion's analyzer (type coercion) on it and reading its schema. Nodes
//! whose inputs failed are skipped, but independent branches are all resolved,
//! so every problem is reported at once.
//!
//! Source schemas: the user's or the format's fixed one. `parquet`/`delta`
//! sources without a schema read it from the first Parquet file (in path
//! order) under their directory; batch `json`/`csv` sources without a schema
//! infer it from their first file. Either fails with a clear error when no
//! file is there yet.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, SchemaError, TableReference};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::expr::{Alias, ScalarFunction};
use datafusion::logical_expr::logical_plan::builder::LogicalTableSource;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, LogicalPlanBuilder, SortExpr};
use datafusion::optimizer::Analyzer;

use super::ddl::{closest, schema_to_ddl};
use super::functions::{SESSION_WINDOW_FN, WINDOW_FN};
use super::{
    Catalog, ColumnExpr, DataFrame, JoinType, PlanNode, SourceSpec, UNKNOWN_DATASET,
    WATERMARK_METADATA_KEY,
};
use crate::error::PlanError;

/// A resolved plan: the output schema and the resolved tree.
#[derive(Clone, Debug)]
pub struct ResolvedPlan {
    root: ResolvedNode,
}

/// One resolved node: its output schema, its resolved expressions and a
/// DataFusion plan of its operation.
#[derive(Clone, Debug)]
pub struct ResolvedNode {
    /// The plan node (pointer-identical to the one in the [`DataFrame`]).
    pub node: Arc<PlanNode>,
    /// Output schema.
    pub schema: SchemaRef,
    /// The node's expressions as DataFusion expressions over its input scans:
    /// the select list (with `*` expanded), the filter predicate, the new
    /// column, the grouping keys then the aggregates, the join condition, or
    /// the sort keys. Empty for other nodes.
    pub exprs: Vec<Expr>,
    /// The node's operation as a DataFusion plan over table scans of its
    /// inputs' schemas (named `input`; `left`/`right` for joins;
    /// `input0`, `input1`... for unions); a scan for leaves. Watermarks and
    /// streaming deduplication are shown with their batch equivalents.
    pub plan: LogicalPlan,
    /// Resolved inputs.
    pub children: Vec<ResolvedNode>,
}

impl ResolvedPlan {
    /// The output schema of the plan.
    pub fn schema(&self) -> SchemaRef {
        self.root.schema.clone()
    }

    /// The resolved root node.
    pub fn root(&self) -> &ResolvedNode {
        &self.root
    }

    /// The resolved node of a sub-plan of the resolved DataFrame (matched by identity).
    pub fn find(&self, df: &DataFrame) -> Option<&ResolvedNode> {
        self.root.find(df.node_arc())
    }

    /// The output schema of a sub-plan of the resolved DataFrame.
    pub fn schema_of(&self, df: &DataFrame) -> Option<SchemaRef> {
        self.find(df).map(|n| n.schema.clone())
    }
}

impl ResolvedNode {
    fn find(&self, node: &Arc<PlanNode>) -> Option<&ResolvedNode> {
        if Arc::ptr_eq(&self.node, node) {
            return Some(self);
        }
        self.children.iter().find_map(|c| c.find(node))
    }

    /// Visits this node and its inputs, parents first.
    pub fn walk(&self, f: &mut dyn FnMut(&ResolvedNode)) {
        f(self);
        for c in &self.children {
            c.walk(f);
        }
    }
}

/// Resolves `df` against `catalog`; see [`DataFrame::resolve`].
pub fn resolve(df: &DataFrame, catalog: &dyn Catalog) -> Result<ResolvedPlan, Vec<PlanError>> {
    let mut errors = Vec::new();
    let mut cache: HashMap<*const PlanNode, Option<ResolvedNode>> = HashMap::new();
    let root = resolve_node(df, catalog, &mut errors, &mut cache);
    match root {
        Some(root) if errors.is_empty() => Ok(ResolvedPlan { root }),
        _ => {
            let mut unique: Vec<PlanError> = Vec::new();
            for e in errors {
                if !unique.contains(&e) {
                    unique.push(e);
                }
            }
            if unique.is_empty() {
                unique.push(PlanError::new("the plan could not be resolved"));
            }
            Err(unique)
        }
    }
}

fn resolve_node(
    df: &DataFrame,
    catalog: &dyn Catalog,
    errors: &mut Vec<PlanError>,
    cache: &mut HashMap<*const PlanNode, Option<ResolvedNode>>,
) -> Option<ResolvedNode> {
    let key = Arc::as_ptr(df.node_arc());
    if let Some(done) = cache.get(&key) {
        return done.clone();
    }
    let mut children = Vec::new();
    let mut ok = true;
    for c in df.children() {
        match resolve_node(c, catalog, errors, cache) {
            Some(r) => children.push(r),
            None => ok = false,
        }
    }
    let out = if ok {
        match resolve_op(df, &children, catalog) {
            Ok((schema, exprs, plan)) => Some(ResolvedNode {
                node: df.node_arc().clone(),
                schema,
                exprs,
                plan,
                children,
            }),
            Err(mut errs) => {
                errors.append(&mut errs);
                None
            }
        }
    } else {
        None
    };
    cache.insert(key, out.clone());
    out
}

type OpResult = Result<(SchemaRef, Vec<Expr>, LogicalPlan), Vec<PlanError>>;

fn one(e: PlanError) -> Vec<PlanError> {
    vec![e]
}

fn resolve_op(df: &DataFrame, children: &[ResolvedNode], catalog: &dyn Catalog) -> OpResult {
    match df.node() {
        PlanNode::Source(spec) => {
            let schema = source_schema(spec).map_err(one)?;
            let plan = scan(&spec.describe(), &schema).map_err(one)?;
            Ok((schema, vec![], plan))
        }
        PlanNode::DatasetRead { name, .. } => {
            let schema = catalog.dataset_schema(name).ok_or_else(|| {
                one(PlanError::with_help(
                    format!("{UNKNOWN_DATASET} `{name}`"),
                    "declare the dataset in the pipeline, or check the name",
                ))
            })?;
            let plan = scan(name, &schema).map_err(one)?;
            Ok((schema, vec![], plan))
        }
        PlanNode::Select { exprs, .. } => resolve_select(&children[0], exprs),
        PlanNode::Filter { predicate, .. } => resolve_filter(&children[0], predicate),
        PlanNode::WithColumn { name, expr, .. } => resolve_with_column(&children[0], name, expr),
        PlanNode::WithColumnRenamed { existing, new, .. } => {
            resolve_rename(&children[0], existing, new)
        }
        PlanNode::Drop { columns, .. } => resolve_drop(&children[0], columns),
        PlanNode::WithWatermark { column, delay, .. } => {
            resolve_watermark(&children[0], column, delay)
        }
        PlanNode::Aggregate {
            keys, aggregates, ..
        } => resolve_aggregate(&children[0], keys, aggregates),
        PlanNode::DropDuplicates { columns, .. } => resolve_drop_duplicates(&children[0], columns),
        PlanNode::Join {
            on,
            using,
            join_type,
            ..
        } => resolve_join(&children[0], &children[1], on.as_ref(), using, *join_type),
        PlanNode::Union { .. } => resolve_union(children),
        PlanNode::OrderBy { sort, .. } => resolve_order_by(&children[0], sort),
        PlanNode::Limit { n, .. } => {
            let input = input_scan(&children[0])?;
            let plan = build(LogicalPlanBuilder::from(input).limit(0, Some(*n)), "limit")?;
            finish(plan, vec![])
        }
    }
}

/// `select`: every expression resolved against the input (`*` expands to its columns).
fn resolve_select(child: &ResolvedNode, exprs: &[ColumnExpr]) -> OpResult {
    let input = input_scan(child)?;
    let mut resolved = Vec::new();
    let mut errors = Vec::new();
    for ce in exprs {
        if matches!(ce, ColumnExpr::Sql(s) if s.trim() == "*") {
            resolved.extend(all_columns(input.schema()));
            continue;
        }
        match to_expr(ce, input.schema(), "select") {
            Ok(e) => {
                if let Err(e) = check_expr_type(&input, &e, "select", ce) {
                    errors.push(e);
                }
                resolved.push(auto_name(e));
            }
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let plan = build(
        LogicalPlanBuilder::from(input).project(resolved.clone()),
        "select",
    )?;
    finish(plan, resolved)
}

/// `filter`: a boolean predicate over the input.
fn resolve_filter(child: &ResolvedNode, predicate: &ColumnExpr) -> OpResult {
    let input = input_scan(child)?;
    let e = to_expr(predicate, input.schema(), "filter").map_err(one)?;
    check_expr_type(&input, &e, "filter", predicate).map_err(one)?;
    let t = e.get_type(input.schema()).map_err(|err| {
        one(df_error(
            err,
            &format!("filter `{predicate}`"),
            input.schema(),
        ))
    })?;
    if !matches!(t, DataType::Boolean | DataType::Null) {
        return Err(one(PlanError::with_help(
            format!("filter predicate `{predicate}` is {t}, not a boolean"),
            "write a condition such as \"level = 'ERROR'\"",
        )));
    }
    let plan = build(LogicalPlanBuilder::from(input).filter(e.clone()), "filter")?;
    finish(plan, vec![e])
}

/// `with_column`: the column replaced in place, or added last.
fn resolve_with_column(child: &ResolvedNode, name: &String, expr: &ColumnExpr) -> OpResult {
    let input = input_scan(child)?;
    let op = format!("with_column `{name}`");
    let e = to_expr(expr, input.schema(), &op).map_err(one)?;
    check_expr_type(&input, &e, &op, expr).map_err(one)?;
    let new_col = flatten_alias(e.clone().alias(name.clone()));
    let mut replaced = false;
    let mut list = Vec::new();
    for (q, f) in input.schema().iter() {
        if f.name() == name {
            if !replaced {
                list.push(new_col.clone());
                replaced = true;
            }
        } else {
            list.push(Expr::from((q, f)));
        }
    }
    if !replaced {
        list.push(new_col);
    }
    let plan = build(LogicalPlanBuilder::from(input).project(list), &op)?;
    finish(plan, vec![e])
}

/// `with_column_renamed`: the column renamed, unless the new name is taken.
fn resolve_rename(child: &ResolvedNode, existing: &String, new: &String) -> OpResult {
    let input = input_scan(child)?;
    check_columns(
        input.schema(),
        std::slice::from_ref(existing),
        "with_column_renamed",
    )
    .map_err(one)?;
    if existing != new && input.schema().fields().iter().any(|f| f.name() == new) {
        return Err(one(PlanError::with_help(
            format!("cannot rename column `{existing}` to `{new}`: column `{new}` already exists"),
            format!("drop `{new}` first, or choose another name"),
        )));
    }
    let list: Vec<Expr> = input
        .schema()
        .iter()
        .map(|(q, f)| {
            let c = Expr::from((q, f));
            if f.name() == existing {
                c.alias(new.clone())
            } else {
                c
            }
        })
        .collect();
    let plan = build(
        LogicalPlanBuilder::from(input).project(list),
        "with_column_renamed",
    )?;
    finish(plan, vec![])
}

/// `drop`: the input without the named columns.
fn resolve_drop(child: &ResolvedNode, columns: &[String]) -> OpResult {
    let input = input_scan(child)?;
    check_columns(input.schema(), columns, "drop").map_err(one)?;
    let list: Vec<Expr> = input
        .schema()
        .iter()
        .filter(|(_, f)| !columns.contains(f.name()))
        .map(|(q, f)| Expr::from((q, f)))
        .collect();
    let plan = build(LogicalPlanBuilder::from(input).project(list), "drop")?;
    finish(plan, vec![])
}

/// `with_watermark`: the event-time column marked with its delay (a timestamp column only).
fn resolve_watermark(
    child: &ResolvedNode,
    column: &String,
    delay: &std::time::Duration,
) -> OpResult {
    let input = input_scan(child)?;
    check_columns(
        input.schema(),
        std::slice::from_ref(column),
        "with_watermark",
    )
    .map_err(one)?;
    let child = &child.schema;
    let idx = child
        .fields()
        .iter()
        .position(|f| f.name() == column)
        .ok_or_else(|| {
            one(PlanError::new(format!(
                "unknown column `{column}` in with_watermark"
            )))
        })?;
    let field = child.field(idx);
    if !matches!(field.data_type(), DataType::Timestamp(_, _)) {
        return Err(one(PlanError::with_help(
            format!(
                "watermark column `{column}` is {}, not a timestamp",
                field.data_type()
            ),
            format!(
                "use a TIMESTAMP column, or convert it first, e.g. with_column(\"{column}\", \"to_timestamp({column})\")"
            ),
        )));
    }
    let mut md = field.metadata().clone();
    md.insert(
        WATERMARK_METADATA_KEY.to_string(),
        delay.as_millis().to_string(),
    );
    let mut fields: Vec<Field> = child.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields[idx] = field.clone().with_metadata(md.clone());
    let schema = Arc::new(Schema::new_with_metadata(fields, child.metadata().clone()));
    let list: Vec<Expr> = input
        .schema()
        .iter()
        .map(|(q, f)| {
            let c = Expr::from((q, f));
            if f.name() == column {
                c.alias_with_metadata(column.clone(), Some(md.clone().into()))
            } else {
                c
            }
        })
        .collect();
    let plan = LogicalPlanBuilder::from(input.clone())
        .project(list)
        .and_then(|b| b.build())
        .unwrap_or(input);
    Ok((schema, vec![], plan))
}

/// `drop_duplicates`: distinct rows, or distinct on the named columns.
fn resolve_drop_duplicates(child: &ResolvedNode, columns: &Option<Vec<String>>) -> OpResult {
    let input = input_scan(child)?;
    if let Some(cols) = columns {
        check_columns(input.schema(), cols, "drop_duplicates").map_err(one)?;
    }
    let builder = LogicalPlanBuilder::from(input.clone());
    let plan = match columns {
        None => builder.distinct(),
        Some(cols) => builder.distinct_on(
            cols.iter()
                .map(|c| Expr::Column(Column::from_name(c.clone())))
                .collect(),
            all_columns(input.schema()),
            None,
        ),
    }
    .and_then(|b| b.build())
    .unwrap_or(input);
    Ok((child.schema.clone(), vec![], plan))
}

/// `order_by`: the sort keys resolved against the input.
fn resolve_order_by(child: &ResolvedNode, sort: &[crate::plan::SortKey]) -> OpResult {
    let input = input_scan(child)?;
    let mut errors = Vec::new();
    let mut sorted = Vec::new();
    for k in sort {
        match to_expr(&k.expr, input.schema(), "order_by") {
            Ok(e) => {
                if let Err(err) = check_expr_type(&input, &e, "order_by", &k.expr) {
                    errors.push(err);
                }
                sorted.push(SortExpr::new(e, k.asc, k.nulls_first));
            }
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let exprs = sorted.iter().map(|s| s.expr.clone()).collect();
    let plan = build(LogicalPlanBuilder::from(input).sort(sorted), "order_by")?;
    finish(plan, exprs)
}

fn resolve_aggregate(
    child: &ResolvedNode,
    keys: &[ColumnExpr],
    aggregates: &[ColumnExpr],
) -> OpResult {
    use datafusion::logical_expr::utils::find_aggregate_exprs;
    let input = input_scan(child)?;
    let schema = input.schema().clone();
    let mut errors = Vec::new();
    let mut key_exprs = Vec::new();
    for k in keys {
        match to_expr(k, &schema, "group_by") {
            Ok(e) => {
                if !find_aggregate_exprs([&e]).is_empty() {
                    errors.push(PlanError::with_help(
                        format!("group_by key `{k}` contains an aggregate function"),
                        "group by plain columns or expressions, and put aggregates in agg(...)",
                    ));
                    continue;
                }
                if let Err(err) = check_expr_type(&input, &e, "group_by", k) {
                    errors.push(err);
                }
                key_exprs.push(auto_name(e));
            }
            Err(e) => errors.push(e),
        }
    }
    let mut agg_exprs = Vec::new();
    for a in aggregates {
        match to_expr(a, &schema, "agg") {
            Ok(e) => {
                if find_aggregate_exprs([&e]).is_empty() {
                    errors.push(PlanError::with_help(
                        format!("`{a}` in agg is not an aggregate"),
                        "wrap it in an aggregate function such as sum(...), count(...) or max(...), or add it to group_by(...)",
                    ));
                    continue;
                }
                agg_exprs.push(auto_name(flatten_alias(e)));
            }
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    // Check each aggregate alone first, to name the culprit of a type error.
    for (e, text) in agg_exprs.iter().zip(aggregates) {
        let fns = find_aggregate_exprs([e]);
        let r = LogicalPlanBuilder::from(input.clone())
            .aggregate(key_exprs.clone(), fns)
            .and_then(|b| b.build())
            .and_then(analyze);
        if let Err(err) = r {
            errors.push(df_error(err, &format!("agg `{text}`"), &schema));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let simple = agg_exprs.iter().all(|e| {
        matches!(e, Expr::AggregateFunction(_))
            || matches!(e, Expr::Alias(a) if matches!(*a.expr, Expr::AggregateFunction(_)))
    });
    let mut all = key_exprs.clone();
    all.extend(agg_exprs.iter().cloned());
    let plan = if simple {
        build(
            LogicalPlanBuilder::from(input).aggregate(key_exprs.clone(), agg_exprs.clone()),
            "group_by",
        )?
    } else {
        // Expressions over aggregates: aggregate, then compute on top.
        let fns = find_aggregate_exprs(agg_exprs.iter());
        let agg_plan = build(
            LogicalPlanBuilder::from(input).aggregate(key_exprs.clone(), fns.clone()),
            "group_by",
        )?;
        let mut list: Vec<Expr> = agg_plan
            .schema()
            .iter()
            .take(key_exprs.len())
            .map(|(q, f)| Expr::from((q, f)))
            .collect();
        for e in &agg_exprs {
            let name = e.schema_name().to_string();
            let rebased = e
                .clone()
                .transform_down(|sub| {
                    if let Some(i) = fns.iter().position(|f| f == &sub) {
                        let col_name = fns[i].schema_name().to_string();
                        Ok(Transformed::new(
                            Expr::Column(Column::from_name(col_name)),
                            true,
                            TreeNodeRecursion::Jump,
                        ))
                    } else {
                        Ok(Transformed::no(sub))
                    }
                })
                .map(|t| t.data)
                .map_err(|err| one(df_error(err, "agg", &schema)))?;
            list.push(match rebased {
                Expr::Alias(_) => rebased,
                other => other.alias(name),
            });
        }
        build(LogicalPlanBuilder::from(agg_plan).project(list), "agg")?
    };
    finish(plan, all)
}

fn resolve_join(
    left: &ResolvedNode,
    right: &ResolvedNode,
    on: Option<&ColumnExpr>,
    using: &[String],
    join_type: JoinType,
) -> OpResult {
    let l = scan("left", &left.schema).map_err(one)?;
    let r = scan("right", &right.schema).map_err(one)?;
    let df_type = match join_type {
        JoinType::Inner => datafusion::logical_expr::JoinType::Inner,
        JoinType::LeftOuter => datafusion::logical_expr::JoinType::Left,
        JoinType::RightOuter => datafusion::logical_expr::JoinType::Right,
        JoinType::FullOuter => datafusion::logical_expr::JoinType::Full,
        JoinType::LeftSemi => datafusion::logical_expr::JoinType::LeftSemi,
        JoinType::LeftAnti => datafusion::logical_expr::JoinType::LeftAnti,
    };
    let (plan, exprs) = if let Some(on) = on {
        let joined_schema = l
            .schema()
            .join(r.schema())
            .map_err(|e| one(df_error(e, "join", l.schema())))?;
        let e = to_expr(on, &joined_schema, "join condition").map_err(one)?;
        let t = e.get_type(&joined_schema).map_err(|err| {
            one(df_error(
                err,
                &format!("join condition `{on}`"),
                &joined_schema,
            ))
        })?;
        if !matches!(t, DataType::Boolean | DataType::Null) {
            return Err(one(PlanError::with_help(
                format!("join condition `{on}` is {t}, not a boolean"),
                "write a condition such as \"left.id = right.id\"",
            )));
        }
        let plan = build(
            LogicalPlanBuilder::from(l).join_on(r, df_type, [e.clone()]),
            &format!("join condition `{on}`"),
        )?;
        (plan, vec![e])
    } else {
        let mut errors = Vec::new();
        for (side, s) in [("left", l.schema()), ("right", r.schema())] {
            for c in using {
                if !s.fields().iter().any(|f| f.name() == c) {
                    errors.push(unknown_column(
                        c,
                        &format!("the {side} side of join_using"),
                        s,
                    ));
                }
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let keys: Vec<Column> = using.iter().map(|c| Column::from_name(c.clone())).collect();
        let joined = build(
            LogicalPlanBuilder::from(l).join_using(r, df_type, keys),
            "join_using",
        )?;
        // Spark's output: keys once, then the other left columns, then the other right ones.
        let mut list = Vec::new();
        for c in using {
            let lc = Expr::Column(Column::new(Some(TableReference::bare("left")), c.clone()));
            let rc = Expr::Column(Column::new(Some(TableReference::bare("right")), c.clone()));
            list.push(match join_type {
                JoinType::RightOuter => rc.alias(c.clone()),
                JoinType::FullOuter => {
                    datafusion::functions::expr_fn::coalesce(vec![lc, rc]).alias(c.clone())
                }
                _ => lc.alias(c.clone()),
            });
        }
        for (q, f) in joined.schema().iter() {
            if using.contains(f.name()) {
                continue;
            }
            list.push(Expr::from((q, f)));
        }
        let exprs = list.clone();
        let plan = build(LogicalPlanBuilder::from(joined).project(list), "join_using")?;
        (plan, exprs)
    };
    let plan = analyze(plan).map_err(|e| one(df_error(e, "join", &DFSchema::empty())))?;
    let schema: SchemaRef = Arc::new(plan.schema().as_arrow().clone());
    let mut seen: Vec<&str> = Vec::new();
    for f in schema.fields() {
        if seen.contains(&f.name().as_str()) {
            return Err(one(PlanError::with_help(
                format!("join output has two columns named `{}`", f.name()),
                format!(
                    "rename one side's column with with_column_renamed(\"{0}\", ...) before joining, or join with join_using([\"{0}\"]) when it is a join key",
                    f.name()
                ),
            )));
        }
        seen.push(f.name());
    }
    Ok((schema, exprs, plan))
}

/// The union's schema. Mixing streaming and batch inputs is a query-shape
/// problem reported by [`crate::checks`], with the flow's other problems.
fn resolve_union(children: &[ResolvedNode]) -> OpResult {
    let first = &children[0].schema;
    let mut errors = Vec::new();
    let mut fields: Vec<Field> = first.fields().iter().map(|f| f.as_ref().clone()).collect();
    for other in &children[1..] {
        let s = &other.schema;
        let both = format!("({}) and ({})", schema_to_ddl(first), schema_to_ddl(s));
        if s.fields().len() != first.fields().len() {
            errors.push(PlanError::with_help(
                format!(
                    "cannot union inputs with {} and {} columns: {both}",
                    first.fields().len(),
                    s.fields().len()
                ),
                "select the same columns, in the same order, on every input of the union",
            ));
            continue;
        }
        for (i, (a, b)) in fields.iter_mut().zip(s.fields().iter()).enumerate() {
            match union_type(a.data_type(), b.data_type()) {
                Some(t) => {
                    let nullable = a.is_nullable() || b.is_nullable();
                    *a = a.clone().with_data_type(t).with_nullable(nullable);
                }
                None => errors.push(PlanError::with_help(
                    format!(
                        "cannot union column {} (`{}` {} and `{}` {}): {both}",
                        i + 1,
                        a.name(),
                        a.data_type(),
                        b.name(),
                        b.data_type()
                    ),
                    "union matches columns by position: select them in the same order with compatible types, or CAST one side",
                )),
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let schema = Arc::new(Schema::new_with_metadata(fields, first.metadata().clone()));
    let mut plan_builder = scan("input0", &children[0].schema).map(LogicalPlanBuilder::from);
    for (i, c) in children.iter().enumerate().skip(1) {
        plan_builder = plan_builder.and_then(|b| {
            let p = scan(&format!("input{i}"), &c.schema)?;
            b.union(p)
                .map_err(|e| df_error(e, "union", &DFSchema::empty()))
        });
    }
    let plan = match plan_builder.and_then(|b| {
        b.build()
            .map_err(|e| df_error(e, "union", &DFSchema::empty()))
    }) {
        Ok(p) => p,
        Err(_) => scan("union", &schema).map_err(one)?,
    };
    Ok((schema, vec![], plan))
}

/// The common type of two union columns: equal types, numbers widened, nulls.
fn union_type(a: &DataType, b: &DataType) -> Option<DataType> {
    if a == b {
        return Some(a.clone());
    }
    if matches!(a, DataType::Null) {
        return Some(b.clone());
    }
    if matches!(b, DataType::Null) {
        return Some(a.clone());
    }
    if a.is_numeric() && b.is_numeric() {
        return datafusion::logical_expr::type_coercion::binary::comparison_coercion(a, b);
    }
    match (a, b) {
        (DataType::Timestamp(u1, _), DataType::Timestamp(u2, _)) if u1 == u2 => Some(a.clone()),
        (
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View,
        ) => Some(DataType::Utf8),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A table scan of `schema` named `name`.
fn scan(name: &str, schema: &SchemaRef) -> Result<LogicalPlan, PlanError> {
    let mut seen: Vec<&str> = Vec::new();
    for f in schema.fields() {
        if seen.contains(&f.name().as_str()) {
            return Err(PlanError::with_help(
                format!(
                    "column `{}` appears twice in ({})",
                    f.name(),
                    schema_to_ddl(schema)
                ),
                "give every column a distinct name",
            ));
        }
        seen.push(f.name());
    }
    LogicalPlanBuilder::scan(
        TableReference::bare(name),
        Arc::new(LogicalTableSource::new(schema.clone())),
        None,
    )
    .and_then(|b| b.build())
    .map_err(|e| df_error(e, &format!("reading `{name}`"), &DFSchema::empty()))
}

fn input_scan(child: &ResolvedNode) -> Result<LogicalPlan, Vec<PlanError>> {
    scan("input", &child.schema).map_err(one)
}

fn all_columns(schema: &DFSchema) -> Vec<Expr> {
    schema.iter().map(|(q, f)| Expr::from((q, f))).collect()
}

fn analyze(plan: LogicalPlan) -> datafusion::error::Result<LogicalPlan> {
    static ANALYZER: std::sync::OnceLock<Analyzer> = std::sync::OnceLock::new();
    static CONFIG: std::sync::OnceLock<ConfigOptions> = std::sync::OnceLock::new();
    ANALYZER.get_or_init(Analyzer::new).execute_and_check(
        plan,
        CONFIG.get_or_init(ConfigOptions::default),
        |_, _| {},
    )
}

fn build(
    b: datafusion::error::Result<LogicalPlanBuilder>,
    op: &str,
) -> Result<LogicalPlan, Vec<PlanError>> {
    b.and_then(|b| b.build())
        .and_then(analyze)
        .map_err(|e| one(df_error(e, op, &DFSchema::empty())))
}

fn finish(plan: LogicalPlan, exprs: Vec<Expr>) -> OpResult {
    let schema: SchemaRef = Arc::new(plan.schema().as_arrow().clone());
    Ok((schema, exprs, plan))
}

/// Type-checks one expression alone (projection + analyzer), naming it on error.
fn check_expr_type(
    input: &LogicalPlan,
    e: &Expr,
    op: &str,
    text: &ColumnExpr,
) -> Result<(), PlanError> {
    // Aggregates cannot be projected; they are checked by the aggregate node.
    if !datafusion::logical_expr::utils::find_aggregate_exprs([e]).is_empty() {
        return Err(PlanError::with_help(
            format!("aggregate `{text}` is not allowed in {op}"),
            "compute aggregates with group_by(...).agg(...)",
        ));
    }
    LogicalPlanBuilder::from(input.clone())
        .project(vec![flatten_alias(e.clone())])
        .and_then(|b| b.build())
        .and_then(analyze)
        .map(|_| ())
        .map_err(|err| df_error(err, &format!("{op} `{text}`"), input.schema()))
}

/// A SQL condition over `schema` (an expectation's), type-checked alone:
/// the expression without its alias, and its type. `what` names it in
/// errors ("the condition `x > 0` of expectation `positive`").
pub fn resolve_condition(
    sql: &str,
    schema: &arrow::datatypes::Schema,
    what: &str,
) -> Result<(Expr, DataType), PlanError> {
    let df = DFSchema::try_from(schema.clone())
        .map_err(|e| PlanError::new(format!("{what}: {}", clean_message(&e))))?;
    let text = ColumnExpr::Sql(sql.trim().to_string());
    let e = to_expr_in(&text, &df, what)?.unalias();
    let input = LogicalPlan::EmptyRelation(datafusion::logical_expr::EmptyRelation {
        produce_one_row: false,
        schema: Arc::new(df.clone()),
    });
    check_expr_type(&input, &e, what, &text)?;
    let t = e.get_type(&df).map_err(|err| df_error(err, what, &df))?;
    Ok((e, t))
}

/// Turns a [`ColumnExpr`] into an [`Expr`] over `schema`, checking column
/// references and window time columns.
fn to_expr(ce: &ColumnExpr, schema: &DFSchema, op: &str) -> Result<Expr, PlanError> {
    to_expr_in(ce, schema, &format!("{op} `{ce}`"))
}

/// [`to_expr`], with `ctx` naming the expression in errors.
fn to_expr_in(ce: &ColumnExpr, schema: &DFSchema, ctx: &str) -> Result<Expr, PlanError> {
    let ctx = ctx.to_string();
    let e = match ce {
        ColumnExpr::Expr(e) => e.clone(),
        ColumnExpr::Sql(sql) => {
            let e = crate::plan::sql::sql_to_expr(sql, schema)
                .map_err(|err| df_error(err, &ctx, schema))?;
            // A computed SQL expression is named by its text (`n + 1`).
            match e {
                Expr::Column(_) | Expr::Alias(_) => e,
                Expr::ScalarFunction(ScalarFunction { ref func, .. })
                    if func.name() == WINDOW_FN || func.name() == SESSION_WINDOW_FN =>
                {
                    e
                }
                other => other.alias(sql.trim()),
            }
        }
    };

    let e = match_columns_ignoring_case(e, schema);
    for c in e.column_refs() {
        if !schema.has_column(c) {
            return Err(unknown_column(&c.flat_name(), &ctx, schema));
        }
        if c.relation.is_none() {
            let n = schema.iter().filter(|(_, f)| f.name() == &c.name).count();
            if n > 1 {
                return Err(PlanError::with_help(
                    format!(
                        "column `{}` in {ctx} is ambiguous: both sides of the join have it",
                        c.name
                    ),
                    format!("qualify it: left.{0} or right.{0}", c.name),
                ));
            }
        }
    }
    // Window time columns must be timestamps.
    let mut bad: Option<PlanError> = None;
    let _ = e.apply(|sub| {
        if let Expr::ScalarFunction(ScalarFunction { func, args }) = sub {
            if (func.name() == WINDOW_FN || func.name() == SESSION_WINDOW_FN) && !args.is_empty() {
                if let Ok(t) = args[0].get_type(schema) {
                    if !matches!(t, DataType::Timestamp(_, _)) {
                        bad = Some(PlanError::with_help(
                            format!(
                                "the time column `{}` of `{}` is {t}, not a timestamp",
                                expr_text(&args[0]),
                                func.name()
                            ),
                            "use a TIMESTAMP column, or convert it with to_timestamp(...) first",
                        ));
                        return Ok(TreeNodeRecursion::Stop);
                    }
                }
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    if let Some(b) = bad {
        return Err(b);
    }
    Ok(e)
}

/// Rewrites column references that exist only with another case (`userid`
/// for `userId`) to the schema's spelling, when exactly one column matches:
/// Spark resolves names case-insensitively by default.
fn match_columns_ignoring_case(e: Expr, schema: &DFSchema) -> Expr {
    let rewritten = e.clone().transform_up(|sub| {
        if let Expr::Column(c) = &sub {
            if !schema.has_column(c) {
                let matches: Vec<_> = schema
                    .iter()
                    .filter(|(q, f)| {
                        f.name().eq_ignore_ascii_case(&c.name)
                            && match (&c.relation, q) {
                                (None, _) => true,
                                (Some(r), Some(q)) => r.table().eq_ignore_ascii_case(q.table()),
                                (Some(_), None) => false,
                            }
                    })
                    .collect();
                if let [(q, f)] = matches.as_slice() {
                    let column = datafusion::common::Column::new(q.cloned(), f.name());
                    return Ok(Transformed::yes(Expr::Column(column)));
                }
            }
        }
        Ok(Transformed::no(sub))
    });
    rewritten.map(|t| t.data).unwrap_or(e)
}

/// Names a computed expression before the plan builder qualifies its
/// columns with the scan name (`n + 1`, not `input.n + 1`).
/// Window calls are named `window` / `session_window`, like Spark.
fn auto_name(e: Expr) -> Expr {
    match e {
        Expr::Column(_) | Expr::Alias(_) => e,
        Expr::ScalarFunction(ScalarFunction { ref func, .. })
            if func.name() == WINDOW_FN || func.name() == SESSION_WINDOW_FN =>
        {
            let n = func.name().to_string();
            e.alias(n)
        }
        other => {
            let name = other.schema_name().to_string();
            other.alias(name)
        }
    }
}

/// Checks that plain column names exist.
fn check_columns(schema: &DFSchema, columns: &[String], op: &str) -> Result<(), PlanError> {
    for c in columns {
        if !schema.fields().iter().any(|f| f.name() == c) {
            return Err(unknown_column(c, op, schema));
        }
    }
    Ok(())
}

fn unknown_column(name: &str, ctx: &str, schema: &DFSchema) -> PlanError {
    let mut names: Vec<&str> = Vec::new();
    for f in schema.fields() {
        if !names.contains(&f.name().as_str()) {
            names.push(f.name());
        }
    }
    let bare = name.rsplit('.').next().unwrap_or(name);
    let available = if names.is_empty() {
        "the input has no columns".to_string()
    } else {
        format!("available columns: {}", names.join(", "))
    };
    let help = match closest(bare, names.iter().copied()) {
        Some(s) => format!("did you mean `{s}`? {available}"),
        None => available,
    };
    PlanError::with_help(format!("unknown column `{name}` in {ctx}"), help)
}

/// Collapses `Alias(Alias(e, a), b)` into `Alias(e, b)`.
fn flatten_alias(e: Expr) -> Expr {
    match e {
        Expr::Alias(outer) => match *outer.expr {
            Expr::Alias(inner) => {
                let merged = Alias {
                    expr: inner.expr,
                    relation: outer.relation,
                    name: outer.name,
                    metadata: outer.metadata,
                };
                flatten_alias(Expr::Alias(merged))
            }
            other => Expr::Alias(Alias {
                expr: Box::new(other),
                relation: outer.relation,
                name: outer.name,
                metadata: outer.metadata,
            }),
        },
        other => other,
    }
}

/// SQL-like text of an expression, for messages.
pub(crate) fn expr_text(e: &Expr) -> String {
    match e {
        Expr::Column(c) => c.flat_name(),
        Expr::Alias(a) => format!("{} AS {}", expr_text(&a.expr), a.name),
        _ => match datafusion::sql::unparser::expr_to_sql(e) {
            Ok(sql) => strip_outer_parens(&sql.to_string()).to_string(),
            Err(_) => e.schema_name().to_string(),
        },
    }
}

/// `(a = 1)` → `a = 1`, only when the outer parentheses match each other.
fn strip_outer_parens(s: &str) -> &str {
    let Some(inner) = s.strip_prefix('(').and_then(|r| r.strip_suffix(')')) else {
        return s;
    };
    let mut depth = 0i32;
    for c in inner.chars() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return s;
                }
            }
            _ => {}
        }
    }
    if depth == 0 {
        inner
    } else {
        s
    }
}

/// Turns a DataFusion error into a [`PlanError`] about `ctx`.
fn df_error(e: DataFusionError, ctx: &str, schema: &DFSchema) -> PlanError {
    let root = innermost(&e);
    if let DataFusionError::SchemaError(se, _) = root {
        match se.as_ref() {
            SchemaError::FieldNotFound { field, .. } => {
                return unknown_column(&field.flat_name(), ctx, schema);
            }
            SchemaError::AmbiguousReference { field } => {
                return PlanError::with_help(
                    format!(
                        "column `{}` in {ctx} is ambiguous: both sides of the join have it",
                        field.name
                    ),
                    format!("qualify it: left.{0} or right.{0}", field.name),
                );
            }
            _ => {}
        }
    }
    PlanError::new(format!("invalid {ctx}: {}", clean_message(root)))
}

fn innermost(e: &DataFusionError) -> &DataFusionError {
    match e {
        DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => {
            innermost(inner)
        }
        DataFusionError::Shared(inner) => innermost(inner),
        DataFusionError::Collection(v) if !v.is_empty() => innermost(&v[0]),
        other => other,
    }
}

fn clean_message(e: &DataFusionError) -> String {
    let mut s = match e {
        DataFusionError::SQL(pe, _) => pe.to_string(),
        other => other.strip_backtrace(),
    };
    if let Some(i) = s.find(". No function matches") {
        s.truncate(i);
    }
    if let Some(i) = s.find('\n') {
        s.truncate(i);
    }
    for prefix in [
        "Error during planning: ",
        "Schema error: ",
        "Optimizer rule 'type_coercion' failed\ncaused by\n",
        "This feature is not implemented: ",
        "Arrow error: ",
        "sql parser error: ",
    ] {
        s = s.replace(prefix, "");
    }
    s.trim().to_string()
}

// ---------------------------------------------------------------------------
// Source schemas
// ---------------------------------------------------------------------------

fn source_schema(spec: &SourceSpec) -> Result<SchemaRef, PlanError> {
    if let Some(s) = &spec.schema {
        return Ok(s.clone());
    }
    let connector = spec.format.connector().ok_or_else(|| {
        PlanError::new(format!("the schema of the {} is unknown", spec.describe()))
    })?;
    connector.infer_schema(&crate::connector::DeclaredRead {
        format: spec.format.name(),
        path: spec.path.as_deref(),
        schema: None,
        options: &spec.options,
        streaming: spec.streaming,
    })
}
