//! SQL text in plans: the DataFusion context with Spark's conventions and
//! the streaming functions, parsing an expression's syntax, and turning it
//! into an expression over a schema (identifiers matched in any case).

use std::sync::OnceLock;

use datafusion::common::DFSchema;
use datafusion::logical_expr::Expr;
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::DFParserBuilder;
use datafusion::sql::sqlparser::ast::ExprWithAlias;
use datafusion::sql::sqlparser::dialect::GenericDialect;

use crate::error::PlanError;

/// The shared DataFusion context used to turn SQL text into expressions; the
/// `window` and `session_window` functions are registered in it.
pub(crate) fn sql_context() -> &'static SessionContext {
    static CTX: OnceLock<SessionContext> = OnceLock::new();
    CTX.get_or_init(|| streaming_context(datafusion::prelude::SessionConfig::new()))
}

/// A DataFusion context with Spark's conventions and our streaming
/// functions: STRING is plain Utf8, identifiers keep their case (resolution
/// then matches names case-insensitively, like Spark), `window` /
/// `session_window` and Spark's `to_timestamp` are registered, and Spark's aggregate names `first`,
/// `last`, `approx_count_distinct` and `collect_list`. `config` carries the caller's own settings.
pub(crate) fn streaming_context(mut config: datafusion::prelude::SessionConfig) -> SessionContext {
    let opts = config.options_mut();
    opts.sql_parser.map_string_types_to_utf8view = false;
    opts.sql_parser.enable_ident_normalization = false;
    let ctx = SessionContext::new_with_config(config);
    ctx.register_udf(crate::plan::functions::window_udf().as_ref().clone());
    ctx.register_udf(
        crate::plan::functions::session_window_udf()
            .as_ref()
            .clone(),
    );
    // Spark's `to_timestamp` (NULL for a string that is not a timestamp,
    // Spark's datetime patterns) in place of DataFusion's.
    ctx.register_udf(
        crate::plan::timestamp::udf::to_timestamp_udf()
            .as_ref()
            .clone(),
    );
    // Spark's names for aggregates DataFusion calls otherwise, so SQL text
    // such as "first(x)" or "collect_list(x)" works as in Spark.
    use datafusion::functions_aggregate::{approx_distinct, array_agg, first_last};
    for (udaf, name) in [
        (first_last::first_value_udaf(), "first"),
        (first_last::last_value_udaf(), "last"),
        (
            approx_distinct::approx_distinct_udaf(),
            "approx_count_distinct",
        ),
        (array_agg::array_agg_udaf(), "collect_list"),
    ] {
        ctx.register_udaf(udaf.as_ref().clone().with_aliases([name]));
    }
    ctx
}

/// Parses SQL expression text (with an optional `AS alias`), checking syntax only.
pub(crate) fn parse_sql_syntax(sql: &str) -> Result<ExprWithAlias, PlanError> {
    let dialect = GenericDialect {};
    let parsed = DFParserBuilder::new(sql)
        .with_dialect(&dialect)
        .build()
        .and_then(|mut p| p.parse_into_expr());
    parsed.map_err(|e| {
        let why = match e {
            datafusion::error::DataFusionError::SQL(pe, _) => {
                let s = pe.to_string();
                s.strip_prefix("sql parser error: ").unwrap_or(&s).to_string()
            }
            other => other.to_string(),
        };
        PlanError::with_help(
            format!("invalid SQL expression `{sql}`: {why}"),
            "write a Spark SQL expression such as \"level = 'ERROR'\" or \"CAST(key AS STRING) AS k\"",
        )
    })
}

/// Turns SQL text into a DataFusion expression against `schema`.
/// Rewrites identifiers that name a column only with another case (`userid`
/// for `userId`) to the schema's spelling, when exactly one column matches:
/// Spark resolves names case-insensitively by default.
fn match_identifiers_ignoring_case(
    expr: &mut datafusion::sql::sqlparser::ast::Expr,
    schema: &DFSchema,
) {
    use datafusion::sql::sqlparser::ast::{visit_expressions_mut, Expr as SqlExpr, Ident};
    use std::ops::ControlFlow;
    let fix = |ident: &mut Ident| {
        if ident.quote_style.is_some() || schema.fields().iter().any(|f| f.name() == &ident.value) {
            return;
        }
        let matches: Vec<&String> = schema
            .fields()
            .iter()
            .map(|f| f.name())
            .filter(|n| n.eq_ignore_ascii_case(&ident.value))
            .collect();
        if let [only] = matches.as_slice() {
            ident.value = (*only).clone();
        }
    };
    let _ = visit_expressions_mut(expr, |e| {
        match e {
            SqlExpr::Identifier(ident) => fix(ident),
            SqlExpr::CompoundIdentifier(parts) => {
                if let Some(last) = parts.last_mut() {
                    fix(last);
                }
            }
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
}

pub(crate) fn sql_to_expr(
    sql: &str,
    schema: &DFSchema,
) -> Result<Expr, datafusion::error::DataFusionError> {
    let mut parsed =
        parse_sql_syntax(sql).map_err(|e| datafusion::error::DataFusionError::Plan(e.message))?;
    match_identifiers_ignoring_case(&mut parsed.expr, schema);
    static STATE: OnceLock<datafusion::execution::SessionState> = OnceLock::new();
    let expr = STATE
        .get_or_init(|| sql_context().state())
        .create_logical_expr_from_sql_expr(parsed, schema)?;
    spark_string_casts(spark_struct_names(expr)?, schema)
}

/// `struct(a, b + 1)` with Spark's field names: a column's name, else
/// `col<n>` (1-based), where DataFusion would name them `c0`, `c1`.
fn spark_struct_names(expr: Expr) -> Result<Expr, datafusion::error::DataFusionError> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    use datafusion::logical_expr::lit;
    expr.transform_up(|e| {
        let Expr::ScalarFunction(f) = &e else {
            return Ok(Transformed::no(e));
        };
        if f.func.name() != "struct" || f.args.is_empty() {
            return Ok(Transformed::no(e));
        }
        let mut args = Vec::with_capacity(f.args.len() * 2);
        for (i, a) in f.args.iter().enumerate() {
            let name = match a {
                Expr::Column(c) => c.name.clone(),
                Expr::Alias(al) => al.name.clone(),
                _ => format!("col{}", i + 1),
            };
            args.push(lit(name));
            args.push(a.clone());
        }
        Ok(Transformed::yes(
            datafusion::functions::core::expr_fn::named_struct(args),
        ))
    })
    .map(|t| t.data)
}

/// `CAST(s AS TIMESTAMP)` of a string as Spark casts it: through
/// `to_timestamp`, so a string that is not a timestamp is NULL (not an
/// error) and every form Spark accepts parses, on the fast path.
fn spark_string_casts(
    expr: Expr,
    schema: &DFSchema,
) -> Result<Expr, datafusion::error::DataFusionError> {
    use crate::plan::timestamp::udf::{is_text, timestamp_type, to_timestamp_udf};
    use arrow::datatypes::DataType;
    use datafusion::common::tree_node::{Transformed, TreeNode};
    use datafusion::logical_expr::{Cast, ExprSchemable, TryCast};
    expr.transform_up(|e| {
        let (inner, to) = match &e {
            Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field }) => {
                (expr, field.data_type().clone())
            }
            _ => return Ok(Transformed::no(e)),
        };
        if !matches!(to, DataType::Timestamp(..)) {
            return Ok(Transformed::no(e));
        }
        if !is_text(&inner.get_type(schema)?) {
            return Ok(Transformed::no(e));
        }
        let call = to_timestamp_udf().call(vec![inner.as_ref().clone()]);
        // SQL's `TIMESTAMP` (no zone) is Spark's TIMESTAMP, in the session
        // time zone, in microseconds.
        Ok(Transformed::yes(match to {
            DataType::Timestamp(_, None) => call,
            t if t == timestamp_type() => call,
            t => Expr::Cast(Cast::new(Box::new(call), t)),
        }))
    })
    .map(|t| t.data)
}
