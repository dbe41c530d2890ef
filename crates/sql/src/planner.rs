//! Queries into plans: an SDP query's sqlparser AST, with its reads and
//! watermarks, becomes the same [`DataFrame`] a Rust flow would build with
//! `select`, `filter`, `group_by(...).agg(...)`, `join`, `union`,
//! `with_watermark`, ... so a SQL flow is checked, planned and run exactly
//! like a Rust one. Expressions go over as SQL text (the engine parses and
//! resolves them against the input's schema, case-insensitively, as Spark).

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use pipelines_core::plan::{DataFrame, JoinType};
use pipelines_core::{PlanError, Session};
use sqlparser::ast::{
    self, Expr, FunctionArguments, GroupByExpr, Ident, JoinConstraint, JoinOperator,
    ObjectNamePart, SelectItem, SetExpr, SetOperator, SetQuantifier, TableFactor,
};

use crate::query::name_span;
use crate::statement::{Query, ReadSource, TableFunction};

type R<T> = Result<T, PlanError>;

/// The engine's results as plan errors, for `?` in the planner.
trait IntoPlan<T> {
    fn p(self) -> R<T>;
}

impl<T> IntoPlan<T> for pipelines_core::Result<T> {
    fn p(self) -> R<T> {
        self.map_err(plan_error)
    }
}

/// Builds the plan of `query` (whose AST is `ast`) for a flow.
pub(crate) fn plan(query: &Query, ast: &ast::Query, session: &Session) -> R<DataFrame> {
    if let Some(w) = query.watermarks.iter().find(|w| w.relation.is_none()) {
        return Err(PlanError::with_help(
            format!(
                "the WATERMARK clause at {} follows a subquery; it must follow a table",
                w.span
            ),
            "move the clause inside the subquery, after the table it reads (`FROM STREAM(t) WATERMARK ts DELAY OF INTERVAL 10 MINUTES`)",
        ));
    }
    let mut p = Planner {
        query,
        session,
        ctes: BTreeMap::new(),
    };
    p.query(&spark_literals(ast))
}

/// The query with Spark's `"text"` string literals written `'text'`: the
/// engine's SQL reads double quotes as identifiers.
fn spark_literals(ast: &ast::Query) -> ast::Query {
    let mut q = ast.clone();
    let _ = ast::visit_expressions_mut(&mut q, |e| {
        if let Expr::Value(v) = e {
            if let ast::Value::DoubleQuotedString(s) = &v.value {
                v.value = ast::Value::SingleQuotedString(s.clone());
            }
        }
        ControlFlow::<()>::Continue(())
    });
    q
}

struct Planner<'a> {
    query: &'a Query,
    session: &'a Session,
    /// Plans of the `WITH` names in scope, by lower-case name.
    ctes: BTreeMap<String, DataFrame>,
}

/// A planned relation and the names its columns may be qualified with
/// (its alias, or its table's name), lower-case.
struct Relation {
    df: DataFrame,
    qualifiers: Vec<String>,
}

fn unsupported(what: &str, help: &str) -> PlanError {
    PlanError::with_help(format!("{what} is not supported in pipeline queries"), help)
}

/// Spark's output name of an unnamed select item, as an alias clause; `None`
/// when the engine names it the same way (a plain column).
fn implicit_alias(e: &Expr) -> Option<String> {
    match e {
        Expr::Identifier(_) => None,
        // `window.start` is named `start`, as in Spark.
        Expr::CompoundIdentifier(parts) => parts.last().map(|p| quote(&p.value)),
        other => Some(quote(&other.to_string())),
    }
}

/// A quoted identifier for the engine's SQL (double quotes, doubled inside).
fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Drops qualifiers that name a relation of the scope (`e.ts` → `ts`), or,
/// in a join condition, turns them into the engine's `left.` / `right.`.
fn requalify(expr: &Expr, scope: &Scope<'_>) -> Expr {
    let mut e = expr.clone();
    let _ = ast::visit_expressions_mut(&mut e, |e| {
        if let Expr::CompoundIdentifier(parts) = e {
            if parts.len() >= 2 {
                let q = parts[0].value.to_ascii_lowercase();
                if let Some(side) = scope.side_of(&q) {
                    match side {
                        Some(name) => parts[0] = Ident::new(name),
                        None => {
                            parts.remove(0);
                            if parts.len() == 1 {
                                *e = Expr::Identifier(parts.remove(0));
                            }
                        }
                    }
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
    e
}

/// The relations an expression may name, and in a join condition which side
/// each is on.
struct Scope<'a> {
    plain: &'a [String],
    left: &'a [String],
    right: &'a [String],
}

impl<'a> Scope<'a> {
    fn plain(qualifiers: &'a [String]) -> Self {
        Scope {
            plain: qualifiers,
            left: &[],
            right: &[],
        }
    }

    /// `Some(None)`: drop the qualifier; `Some(Some(side))`: replace it.
    fn side_of(&self, q: &str) -> Option<Option<&'static str>> {
        if self.left.iter().any(|l| l == q) {
            Some(Some("left"))
        } else if self.right.iter().any(|r| r == q) {
            Some(Some("right"))
        } else if self.plain.iter().any(|p| p == q) {
            Some(None)
        } else {
            None
        }
    }
}

/// The lower-case name of an aggregate function call (no `OVER`), if `e` is one.
fn aggregate_name(e: &Expr) -> Option<String> {
    let Expr::Function(f) = e else { return None };
    if f.over.is_some() {
        return None;
    }
    let name = match f.name.0.last()? {
        ObjectNamePart::Identifier(i) => i.value.to_ascii_lowercase(),
        _ => return None,
    };
    pipelines_core::plan::is_aggregate_function(&name).then_some(name)
}

fn has_window_function(e: &Expr) -> bool {
    let mut found = false;
    let _ = ast::visit_expressions(e, |e| {
        if matches!(e, Expr::Function(f) if f.over.is_some()) {
            found = true;
        }
        ControlFlow::<()>::Continue(())
    });
    found
}

fn has_subquery(e: &Expr) -> bool {
    let mut found = false;
    let _ = ast::visit_expressions(e, |e| {
        if matches!(
            e,
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. }
        ) {
            found = true;
        }
        ControlFlow::<()>::Continue(())
    });
    found
}

fn check_expr(e: &Expr) -> R<()> {
    if has_window_function(e) {
        return Err(unsupported(
            "a window function (`... OVER (...)`)",
            "streaming queries have no row order; aggregate with GROUP BY window(ts, '10 minutes') instead",
        ));
    }
    if has_subquery(e) {
        return Err(unsupported(
            "a subquery inside an expression (`IN (SELECT ...)`, `EXISTS`, scalar subqueries)",
            "join with the other dataset instead (`LEFT SEMI JOIN`, `LEFT ANTI JOIN`)",
        ));
    }
    Ok(())
}

/// Replaces aggregate calls with the names of their results (`__agg0`, ...),
/// collecting `call AS __aggN` once per distinct call text, and grouping
/// expressions with the names of their key columns.
struct AggRewrite {
    aggregates: Vec<(String, String)>,
    keys: Vec<(String, String)>,
}

impl AggRewrite {
    fn rewrite(&mut self, expr: &Expr) -> Expr {
        let mut e = expr.clone();
        let _ = ast::visit_expressions_mut(&mut e, |e| {
            let text = e.to_string();
            if let Some((_, name)) = self.keys.iter().find(|(k, _)| *k == text) {
                *e = Expr::Identifier(Ident::new(name.clone()));
            } else if aggregate_name(e).is_some() {
                let name = match self.aggregates.iter().find(|(t, _)| *t == text) {
                    Some((_, n)) => n.clone(),
                    None => {
                        let n = format!("__agg{}", self.aggregates.len());
                        self.aggregates.push((text, n.clone()));
                        n
                    }
                };
                *e = Expr::Identifier(Ident::new(name));
            }
            ControlFlow::<()>::Continue(())
        });
        e
    }
}

fn contains_aggregate(e: &Expr) -> bool {
    let mut found = false;
    let _ = ast::visit_expressions(e, |e| {
        if aggregate_name(e).is_some() {
            found = true;
        }
        ControlFlow::<()>::Continue(())
    });
    found
}

impl Planner<'_> {
    fn query(&mut self, q: &ast::Query) -> R<DataFrame> {
        let saved = self.ctes.clone();
        if let Some(with) = &q.with {
            if with.recursive {
                return Err(unsupported(
                    "WITH RECURSIVE",
                    "write the query without recursion",
                ));
            }
            for cte in &with.cte_tables {
                let df = self.query(&cte.query)?;
                self.ctes
                    .insert(cte.alias.name.value.to_ascii_lowercase(), df);
            }
        }
        let (mut df, outputs) = self.set_expr(&q.body)?;
        if let Some(order) = &q.order_by {
            let ast::OrderByKind::Expressions(keys) = &order.kind else {
                return Err(unsupported("ORDER BY ALL", "list the sort keys"));
            };
            let mut sort = Vec::new();
            for k in keys {
                check_expr(&k.expr)?;
                let text = k.expr.to_string();
                // A key written like a select item sorts by that item's column.
                let e = match outputs.iter().find(|(t, _)| *t == text) {
                    Some((_, name)) => name.clone(),
                    None => k.expr.to_string(),
                };
                let asc = k.options.asc.unwrap_or(true);
                let nulls_first = k.options.nulls_first.unwrap_or(asc);
                sort.push(format!(
                    "{e} {} NULLS {}",
                    if asc { "ASC" } else { "DESC" },
                    if nulls_first { "FIRST" } else { "LAST" }
                ));
            }
            df = df.order_by(sort.iter().map(String::as_str)).p()?;
        }
        if let Some(limit) = &q.limit_clause {
            let ast::LimitClause::LimitOffset {
                limit,
                offset: None,
                limit_by,
            } = limit
            else {
                return Err(unsupported("OFFSET", "filter the rows instead"));
            };
            if !limit_by.is_empty() {
                return Err(unsupported("LIMIT BY", "use LIMIT n"));
            }
            if let Some(limit) = limit {
                let n = match limit {
                    Expr::Value(v) => v.value.to_string().parse::<usize>().ok(),
                    _ => None,
                };
                let Some(n) = n else {
                    return Err(PlanError::with_help(
                        format!("LIMIT `{limit}` is not a number of rows"),
                        "write LIMIT with a whole number, e.g. LIMIT 10",
                    ));
                };
                df = df.limit(n).p()?;
            }
        }
        if q.fetch.is_some() {
            return Err(unsupported("FETCH", "use LIMIT n"));
        }
        self.ctes = saved;
        Ok(df)
    }

    /// The plan of a query body, and its select items' texts with their
    /// output column names (for ORDER BY).
    fn set_expr(&mut self, body: &SetExpr) -> R<(DataFrame, Vec<(String, String)>)> {
        match body {
            SetExpr::Select(s) => self.select(s),
            SetExpr::Query(q) => Ok((self.query(q)?, Vec::new())),
            SetExpr::SetOperation {
                left,
                op,
                set_quantifier,
                right,
            } => {
                if *op != SetOperator::Union {
                    return Err(unsupported(
                        &format!("`{op}`"),
                        "use UNION ALL, or a LEFT ANTI / LEFT SEMI JOIN",
                    ));
                }
                let (l, outputs) = self.set_expr(left)?;
                let (r, _) = self.set_expr(right)?;
                let u = l.union(&r).p()?;
                match set_quantifier {
                    SetQuantifier::All => Ok((u, outputs)),
                    SetQuantifier::Distinct | SetQuantifier::None => {
                        Ok((u.drop_duplicates::<&str>(None).p()?, outputs))
                    }
                    other => Err(unsupported(
                        &format!("`UNION {other}`"),
                        "select the same columns in the same order on both sides and use UNION ALL",
                    )),
                }
            }
            SetExpr::Values(_) => Err(unsupported(
                "VALUES",
                "put the rows in a file and read it with read_files(...)",
            )),
            SetExpr::Table(t) => {
                let name = t.table_name.clone().unwrap_or_default();
                Ok((self.session.read_table(&name).p()?, Vec::new()))
            }
            other => Err(unsupported(
                &format!("`{}`", first_word(&other.to_string())),
                "write a SELECT query",
            )),
        }
    }

    fn select(&mut self, s: &ast::Select) -> R<(DataFrame, Vec<(String, String)>)> {
        if !s.lateral_views.is_empty() {
            return Err(unsupported(
                "LATERAL VIEW",
                "use explode(...) in the select list",
            ));
        }
        if s.qualify.is_some() {
            return Err(unsupported("QUALIFY", "filter in an outer query"));
        }
        if !s.named_window.is_empty() {
            return Err(unsupported(
                "a WINDOW clause",
                "aggregate with GROUP BY window(ts, '10 minutes') instead",
            ));
        }
        if !s.cluster_by.is_empty() || !s.distribute_by.is_empty() || !s.sort_by.is_empty() {
            return Err(unsupported(
                "CLUSTER BY / DISTRIBUTE BY / SORT BY",
                "remove it: partitioning is the engine's job; use ORDER BY to sort a batch result",
            ));
        }
        let rel = self.from(&s.from)?;
        let scope = Scope::plain(&rel.qualifiers);
        let mut df = rel.df;
        if let Some(w) = &s.selection {
            check_expr(w)?;
            if contains_aggregate(w) {
                return Err(PlanError::with_help(
                    format!("WHERE `{w}` uses an aggregate"),
                    "filter aggregated rows with HAVING",
                ));
            }
            df = df.filter(requalify(w, &scope).to_string()).p()?;
        }
        let keys = match &s.group_by {
            GroupByExpr::Expressions(keys, modifiers) => {
                if !modifiers.is_empty() {
                    return Err(unsupported(
                        "GROUP BY with ROLLUP / CUBE / GROUPING SETS",
                        "group by the columns, and union queries for the subtotals",
                    ));
                }
                keys.clone()
            }
            GroupByExpr::All(_) => {
                return Err(unsupported("GROUP BY ALL", "list the grouping columns"))
            }
        };
        for item in &s.projection {
            if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
                check_expr(e)?;
            }
        }
        let aggregating = !keys.is_empty()
            || s.having.is_some()
            || s.projection.iter().any(|item| match item {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                    contains_aggregate(e)
                }
                _ => false,
            });
        let mut outputs = Vec::new();
        let mut items = Vec::new();
        if aggregating {
            let mut rw = AggRewrite {
                aggregates: Vec::new(),
                keys: Vec::new(),
            };
            let mut key_texts = Vec::new();
            for (i, k) in keys.iter().enumerate() {
                check_expr(k)?;
                if let Expr::Value(_) = k {
                    return Err(PlanError::with_help(
                        format!("GROUP BY `{k}`: grouping by a position is not supported"),
                        "repeat the expression in GROUP BY",
                    ));
                }
                let k = requalify(k, &scope);
                let text = k.to_string();
                match &k {
                    Expr::Identifier(_) => key_texts.push(text),
                    Expr::Function(f) if is_window_call(f) => {
                        // Named `window` / `session_window`, like Spark.
                        let name = window_call_name(f);
                        rw.keys.push((text.clone(), name));
                        key_texts.push(text);
                    }
                    _ => {
                        let name = format!("__key{i}");
                        key_texts.push(format!("{text} AS {name}"));
                        rw.keys.push((text, name));
                    }
                }
            }
            let mut aliased: Vec<(String, Expr)> = Vec::new();
            for item in &s.projection {
                let (expr, alias) = match item {
                    SelectItem::UnnamedExpr(e) => (e, None),
                    SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias)),
                    SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                        return Err(PlanError::with_help(
                            "`*` in an aggregating query",
                            "list the grouping columns and the aggregates",
                        ))
                    }
                    SelectItem::ExprWithAliases { .. } => {
                        return Err(unsupported("`AS (a, b)`", "alias each column on its own"))
                    }
                };
                let e = requalify(expr, &scope);
                let rewritten = rw.rewrite(&e);
                let name = match alias {
                    Some(a) => {
                        aliased.push((a.value.to_ascii_lowercase(), rewritten.clone()));
                        quote(&a.value)
                    }
                    None => implicit_alias(&e).unwrap_or_else(|| e.to_string()),
                };
                outputs.push((expr.to_string(), name.clone()));
                items.push(format!("{rewritten} AS {name}"));
            }
            // HAVING sees the select list's aliases too, as in Spark
            // (`HAVING n > 1` for `count(*) AS n`), unless a grouping column
            // has that name.
            let having = s
                .having
                .as_ref()
                .map(|h| {
                    check_expr(h)?;
                    let mut h = rw.rewrite(&requalify(h, &scope));
                    let _ = ast::visit_expressions_mut(&mut h, |e| {
                        if let Expr::Identifier(i) = e {
                            let lower = i.value.to_ascii_lowercase();
                            let is_key = key_texts.iter().any(|k| k.eq_ignore_ascii_case(&i.value));
                            if let Some((_, x)) = aliased.iter().find(|(a, _)| *a == lower) {
                                if !is_key {
                                    *e = Expr::Nested(Box::new(x.clone()));
                                }
                            }
                        }
                        ControlFlow::<()>::Continue(())
                    });
                    Ok::<_, PlanError>(h)
                })
                .transpose()?;
            let aggregates: Vec<String> = rw
                .aggregates
                .iter()
                .map(|(text, name)| format!("{text} AS {name}"))
                .collect();
            df = df
                .group_by(key_texts.iter().map(String::as_str))
                .agg(aggregates.iter().map(String::as_str))
                .p()?;
            if let Some(h) = having {
                df = df.filter(h.to_string()).p()?;
            }
            df = df.select(items.iter().map(String::as_str)).p()?;
        } else {
            let mut star_only = true;
            for item in &s.projection {
                match item {
                    SelectItem::UnnamedExpr(e) => {
                        star_only = false;
                        let e = requalify(e, &scope);
                        let (text, name) = match implicit_alias(&e) {
                            Some(a) => (format!("{e} AS {a}"), a),
                            None => (e.to_string(), e.to_string()),
                        };
                        outputs.push((e.to_string(), name));
                        items.push(text);
                    }
                    SelectItem::ExprWithAlias { expr, alias } => {
                        star_only = false;
                        let e = requalify(expr, &scope);
                        outputs.push((expr.to_string(), quote(&alias.value)));
                        items.push(format!("{e} AS {}", quote(&alias.value)));
                    }
                    SelectItem::Wildcard(opts) => {
                        if opts.opt_exclude.is_some()
                            || opts.opt_except.is_some()
                            || opts.opt_replace.is_some()
                            || opts.opt_rename.is_some()
                        {
                            return Err(unsupported(
                                "`* EXCEPT (...)` and other `*` options",
                                "list the columns to keep",
                            ));
                        }
                        items.push("*".to_string());
                    }
                    SelectItem::QualifiedWildcard(kind, _) => {
                        let only_one = rel.qualifiers.len() <= 1;
                        let named = match kind {
                            ast::SelectItemQualifiedWildcardKind::ObjectName(n) => {
                                n.to_string().to_ascii_lowercase()
                            }
                            ast::SelectItemQualifiedWildcardKind::Expr(e) => e.to_string(),
                        };
                        if !only_one || !rel.qualifiers.contains(&named) {
                            return Err(unsupported(
                                &format!("`{named}.*` in a join"),
                                "list the columns of each side",
                            ));
                        }
                        items.push("*".to_string());
                    }
                    SelectItem::ExprWithAliases { .. } => {
                        return Err(unsupported("`AS (a, b)`", "alias each column on its own"))
                    }
                }
            }
            if !(star_only && items.len() == 1) {
                df = df.select(items.iter().map(String::as_str)).p()?;
            }
        }
        match &s.distinct {
            None | Some(ast::Distinct::All) => {}
            Some(ast::Distinct::Distinct) => df = df.drop_duplicates::<&str>(None).p()?,
            Some(ast::Distinct::On(_)) => {
                return Err(unsupported(
                    "DISTINCT ON",
                    "use GROUP BY with first(...) for the other columns",
                ))
            }
        }
        Ok((df, outputs))
    }

    fn from(&mut self, from: &[ast::TableWithJoins]) -> R<Relation> {
        let [twj] = from else {
            return Err(if from.is_empty() {
                unsupported(
                    "a query without FROM",
                    "read a dataset: SELECT ... FROM STREAM(raw)",
                )
            } else {
                unsupported("a comma-separated FROM list", "write `a JOIN b ON ...`")
            });
        };
        let mut rel = self.factor(&twj.relation)?;
        for j in &twj.joins {
            let right = self.factor(&j.relation)?;
            let (join_type, constraint) = match &j.join_operator {
                JoinOperator::Join(c) | JoinOperator::Inner(c) => (JoinType::Inner, c),
                JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (JoinType::LeftOuter, c),
                JoinOperator::Right(c) | JoinOperator::RightOuter(c) => {
                    (JoinType::RightOuter, c)
                }
                JoinOperator::FullOuter(c) => (JoinType::FullOuter, c),
                JoinOperator::Semi(c) | JoinOperator::LeftSemi(c) => (JoinType::LeftSemi, c),
                JoinOperator::Anti(c) | JoinOperator::LeftAnti(c) => (JoinType::LeftAnti, c),
                other => {
                    return Err(unsupported(
                        &format!("`{}`", join_keyword(other)),
                        "use [INNER] JOIN, LEFT/RIGHT/FULL [OUTER] JOIN, LEFT SEMI JOIN or LEFT ANTI JOIN with ON or USING",
                    ))
                }
            };
            let df = match constraint {
                JoinConstraint::On(on) => {
                    check_expr(on)?;
                    let scope = Scope {
                        plain: &[],
                        left: &rel.qualifiers,
                        right: &right.qualifiers,
                    };
                    rel.df
                        .join(&right.df, requalify(on, &scope).to_string(), join_type)
                        .p()?
                }
                JoinConstraint::Using(cols) => {
                    let cols: Vec<String> = cols
                        .iter()
                        .map(|c| match c.0.last() {
                            Some(ObjectNamePart::Identifier(i)) => i.value.clone(),
                            _ => c.to_string(),
                        })
                        .collect();
                    rel.df.join_using(&right.df, cols, join_type).p()?
                }
                JoinConstraint::Natural | JoinConstraint::None => {
                    return Err(unsupported(
                        "a join without ON or USING (CROSS or NATURAL JOIN)",
                        "write the join condition: `a JOIN b ON a.id = b.id` or `USING (id)`",
                    ))
                }
            };
            let mut qualifiers = rel.qualifiers;
            if !matches!(join_type, JoinType::LeftSemi | JoinType::LeftAnti) {
                qualifiers.extend(right.qualifiers);
            }
            rel = Relation { df, qualifiers };
        }
        Ok(rel)
    }

    fn factor(&mut self, f: &TableFactor) -> R<Relation> {
        match f {
            TableFactor::Table {
                name, alias, args, ..
            } => {
                let span = name_span(name, self.query.span);
                let read = self.query.reads.iter().find(|r| r.span == span);
                let last = match name.0.last() {
                    Some(ObjectNamePart::Identifier(i)) => i.value.clone(),
                    _ => name.to_string(),
                };
                let cte = match args {
                    None if name.0.len() == 1 => self.cte(&last).cloned(),
                    _ => None,
                };
                let mut df = match (cte, read) {
                    (Some(df), _) => df,
                    (None, Some(r)) => match &r.source {
                        ReadSource::Table(n) => self.dataset(&n.parts, r.streaming, &r.options)?,
                        ReadSource::TableFunction(tf) => {
                            self.table_function(tf, r.streaming, &r.options)?
                        }
                    },
                    (None, None) => {
                        let parts: Vec<String> = name
                            .0
                            .iter()
                            .map(|p| match p {
                                ObjectNamePart::Identifier(i) => i.value.clone(),
                                other => other.to_string(),
                            })
                            .collect();
                        self.dataset(&parts, false, &[])?
                    }
                };
                if let Some(w) = self
                    .query
                    .watermarks
                    .iter()
                    .find(|w| w.relation.as_ref().is_some_and(|n| n.span == span))
                {
                    let column = watermark_column(&w.column).ok_or_else(|| {
                        PlanError::with_help(
                            format!(
                                "WATERMARK `{}` at {}: the event time must be a column",
                                w.column, w.span
                            ),
                            "compute the column in a view first (`CAST(ts AS TIMESTAMP) AS event_time`), then write WATERMARK event_time",
                        )
                    })?;
                    df = df.with_watermark(&column, &w.delay).p()?;
                }
                let mut qualifiers = vec![last.to_ascii_lowercase()];
                if let Some(a) = alias {
                    check_alias(a)?;
                    qualifiers = vec![a.name.value.to_ascii_lowercase()];
                }
                Ok(Relation { df, qualifiers })
            }
            TableFactor::Function { name, .. } => {
                let span = name_span(name, self.query.span);
                let read = self.query.reads.iter().find(|r| r.span == span);
                let Some(r) = read else {
                    return Err(unsupported(&format!("`{name}(...)`"), TABLE_FUNCTIONS));
                };
                let ReadSource::TableFunction(tf) = &r.source else {
                    return Err(unsupported(&format!("`{name}(...)`"), TABLE_FUNCTIONS));
                };
                let df = self.table_function(tf, r.streaming, &r.options)?;
                Ok(Relation {
                    df,
                    qualifiers: vec![tf.name.to_ascii_lowercase()],
                })
            }
            TableFactor::Derived {
                lateral,
                subquery,
                alias,
                ..
            } => {
                if *lateral {
                    return Err(unsupported("LATERAL subqueries", "join instead"));
                }
                let df = self.query(subquery)?;
                let mut qualifiers = Vec::new();
                if let Some(a) = alias {
                    check_alias(a)?;
                    qualifiers.push(a.name.value.to_ascii_lowercase());
                }
                Ok(Relation { df, qualifiers })
            }
            TableFactor::NestedJoin { .. } => Err(unsupported(
                "a parenthesized join",
                "write the joins one after the other, or join in a subquery with a SELECT",
            )),
            TableFactor::Pivot { .. } => Err(unsupported(
                "`PIVOT`",
                "aggregate with GROUP BY and one `sum(CASE WHEN ... END)` per output column",
            )),
            TableFactor::Unpivot { .. } => {
                Err(unsupported("`UNPIVOT`", "union one SELECT per column"))
            }
            TableFactor::UNNEST { .. } => Err(unsupported(
                "`UNNEST`",
                "use explode(...) in the select list",
            )),
            other => Err(unsupported(
                &format!("`{}`", first_word(&other.to_string())),
                "read a dataset by name or with read_files(...)",
            )),
        }
    }

    fn cte(&self, name: &str) -> Option<&DataFrame> {
        self.ctes.get(&name.to_ascii_lowercase())
    }

    fn dataset(
        &self,
        parts: &[String],
        streaming: bool,
        with: &[crate::statement::Property],
    ) -> R<DataFrame> {
        let [name] = parts else {
            return Err(PlanError::with_help(
                format!(
                    "`{}`: datasets of a pipeline have one-part names",
                    parts.join(".")
                ),
                format!(
                    "write `{}`; the spec's `catalog` and `database` are recorded only",
                    parts.last().map(String::as_str).unwrap_or_default()
                ),
            ));
        };
        let reader = if streaming {
            self.session.read_stream()
        } else {
            self.session.read()
        };
        reader
            .options(with.iter().map(|p| (p.key.clone(), p.value.clone())))
            .table(name)
            .map_err(plan_error)
    }

    fn table_function(
        &self,
        tf: &TableFunction,
        streaming: bool,
        with: &[crate::statement::Property],
    ) -> R<DataFrame> {
        let reader = if streaming {
            self.session.read_stream()
        } else {
            self.session.read()
        };
        let name = tf.name.to_ascii_lowercase();
        let named = |key: &str| {
            tf.named_args
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v.clone())
        };
        let extra = with.iter().map(|p| (p.key.clone(), p.value.clone()));
        let df = match name.as_str() {
            "read_files" => {
                let path = tf
                    .positional_args
                    .first()
                    .cloned()
                    .or_else(|| named("path"));
                let Some(path) = path else {
                    return Err(PlanError::with_help(
                        "read_files needs a path",
                        "write read_files('data/events', format => 'json', schema => 'ts STRING, ...')",
                    ));
                };
                if tf.positional_args.len() > 1 {
                    return Err(PlanError::with_help(
                        "read_files takes one positional argument, the path",
                        "pass the options by name: format => 'json', schema => '...'",
                    ));
                }
                let format = named("format").or_else(|| format_from_extension(&path));
                let Some(format) = format else {
                    return Err(PlanError::with_help(
                        format!("read_files('{path}'): the files' format is not given"),
                        "add format => 'json' (or 'csv', 'parquet', 'text')",
                    ));
                };
                let mut r = reader.format(format);
                if let Some(schema) = named("schema") {
                    r = r.schema(schema.as_str());
                }
                for (k, v) in &tf.named_args {
                    if !["path", "format", "schema"]
                        .iter()
                        .any(|n| k.eq_ignore_ascii_case(n))
                    {
                        r = r.option(k.clone(), v);
                    }
                }
                r.options(extra).load(path)
            }
            "read_kafka" => {
                if !tf.positional_args.is_empty() {
                    return Err(PlanError::with_help(
                        "read_kafka takes named arguments only",
                        "write read_kafka(bootstrapServers => 'host:9092', subscribe => 'topic')",
                    ));
                }
                let mut r = reader.format("kafka");
                for (k, v) in &tf.named_args {
                    let key = if k.eq_ignore_ascii_case("bootstrapServers") {
                        "kafka.bootstrap.servers".to_string()
                    } else {
                        k.clone()
                    };
                    r = r.option(key, v);
                }
                r.options(extra).load_default()
            }
            _ if crate::query::PATH_FORMATS.contains(&name.as_str()) => {
                let [path] = tf.positional_args.as_slice() else {
                    return Err(unsupported(&format!("`{}`", tf.name), TABLE_FUNCTIONS));
                };
                reader
                    .format(name.as_str())
                    .options(extra)
                    .load(path.clone())
            }
            _ => {
                return Err(PlanError::with_help(
                    format!("unknown table function `{}`", tf.name),
                    TABLE_FUNCTIONS,
                ))
            }
        };
        df.map_err(plan_error)
    }
}

const TABLE_FUNCTIONS: &str = "read with read_files('path', format => 'json', ...), \
read_kafka(bootstrapServers => '...', subscribe => '...') or a path table such as delta.`/data/t`";

/// The engine's error as a plan error (messages kept).
fn plan_error(e: pipelines_core::Error) -> PlanError {
    match e {
        pipelines_core::Error::Plan(p) => p,
        other => PlanError::new(other.to_string()),
    }
}

fn check_alias(a: &ast::TableAlias) -> R<()> {
    if a.columns.is_empty() {
        Ok(())
    } else {
        Err(unsupported(
            &format!("column aliases (`AS {}(...)`)", a.name),
            "rename the columns in the SELECT list",
        ))
    }
}

/// `ts` or `` `event time` `` as a column name; `None` for an expression.
fn watermark_column(text: &str) -> Option<String> {
    let t = text.trim();
    if let Some(inner) = t.strip_prefix('`').and_then(|s| s.strip_suffix('`')) {
        return Some(inner.replace("``", "`"));
    }
    let plain = !t.is_empty()
        && t.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !t.starts_with(|c: char| c.is_ascii_digit());
    plain.then(|| t.to_string())
}

fn format_from_extension(path: &str) -> Option<String> {
    let ext = std::path::Path::new(path)
        .extension()?
        .to_str()?
        .to_ascii_lowercase();
    match ext.as_str() {
        "json" | "jsonl" | "ndjson" => Some("json".into()),
        "csv" => Some("csv".into()),
        "parquet" => Some("parquet".into()),
        "txt" => Some("text".into()),
        _ => None,
    }
}

fn is_window_call(f: &ast::Function) -> bool {
    matches!(window_call_name(f).as_str(), "window" | "session_window")
        && matches!(f.args, FunctionArguments::List(_))
}

fn window_call_name(f: &ast::Function) -> String {
    match f.name.0.last() {
        Some(ObjectNamePart::Identifier(i)) => i.value.to_ascii_lowercase(),
        _ => String::new(),
    }
}

fn first_word(s: &str) -> String {
    s.split_whitespace().next().unwrap_or_default().to_string()
}

fn join_keyword(op: &JoinOperator) -> &'static str {
    match op {
        JoinOperator::CrossJoin(_) => "CROSS JOIN",
        JoinOperator::RightSemi(_) => "RIGHT SEMI JOIN",
        JoinOperator::RightAnti(_) => "RIGHT ANTI JOIN",
        JoinOperator::CrossApply => "CROSS APPLY",
        JoinOperator::OuterApply => "OUTER APPLY",
        JoinOperator::AsOf { .. } => "ASOF JOIN",
        _ => "this join",
    }
}
