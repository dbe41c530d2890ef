//! Expressions of a plan as Spark Connect `Expression`s.
//!
//! SQL text the user wrote is sent as text (`ExpressionString`, parsed by
//! Spark). DataFusion expressions are rebuilt structurally — columns as
//! `UnresolvedAttribute`, calls as `UnresolvedFunction` with Spark's names,
//! literals as `Literal` — since DataFusion has no Spark SQL unparser. What
//! has no Spark form (a Rust UDF, a subquery) is refused with the reason.

use datafusion::common::ScalarValue;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use pipelines_core::plan::ddl::type_to_ddl;
use pipelines_core::plan::{is_builtin_function, ColumnExpr};

use crate::proto::expression::{
    self as pe, cast, literal, Alias, ExprType, ExpressionString, Literal, UnresolvedAttribute,
    UnresolvedFunction, UnresolvedStar,
};
use crate::proto::Expression;

/// Why an expression cannot be sent to Spark.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Untranslatable {
    /// What it is, e.g. "the Rust UDF `score`".
    pub what: String,
    /// What to do instead.
    pub fix: String,
}

impl Untranslatable {
    /// What cannot be sent, and what to do instead.
    pub fn new(what: impl Into<String>, fix: impl Into<String>) -> Self {
        Untranslatable {
            what: what.into(),
            fix: fix.into(),
        }
    }
}

type Translated = Result<Expression, Untranslatable>;

fn wrap(e: ExprType) -> Expression {
    Expression {
        common: None,
        expr_type: Some(e),
    }
}

/// A column reference; each part of a qualified name is quoted when needed.
pub fn attribute(parts: &[&str]) -> Expression {
    let text: Vec<String> = parts.iter().map(|p| quote_identifier(p)).collect();
    wrap(ExprType::UnresolvedAttribute(UnresolvedAttribute {
        unparsed_identifier: text.join("."),
        plan_id: None,
        is_metadata_column: None,
    }))
}

/// `name` as Spark SQL writes an identifier: bare when it is a plain word,
/// else in backticks (a backtick doubled).
pub fn quote_identifier(name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        name.to_string()
    } else {
        format!("`{}`", name.replace('`', "``"))
    }
}

/// A call of a Spark function.
pub fn function(name: &str, arguments: Vec<Expression>, is_distinct: bool) -> Expression {
    wrap(ExprType::UnresolvedFunction(UnresolvedFunction {
        function_name: name.to_string(),
        arguments,
        is_distinct,
        is_user_defined_function: false,
        is_internal: None,
    }))
}

/// A string literal.
pub fn string_literal(s: &str) -> Expression {
    literal_of(literal::LiteralType::String(s.to_string()))
}

fn literal_of(t: literal::LiteralType) -> Expression {
    wrap(ExprType::Literal(Literal {
        data_type: None,
        literal_type: Some(t),
    }))
}

/// SQL text, parsed by the server: identifiers quoted `"x"` (this engine's
/// SQL, as DataFusion's) become Spark's `` `x` `` (to Spark, `"x"` is a
/// string).
pub fn sql_text(text: &str) -> Expression {
    wrap(ExprType::ExpressionString(ExpressionString {
        expression: spark_quoting(text),
    }))
}

/// `text` with double-quoted identifiers in backticks; string literals
/// (`'...'`, with `''` or `\'` inside) and backticked names unchanged.
pub fn spark_quoting(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '`' => {
                out.push(c);
                while let Some(d) = chars.next() {
                    out.push(d);
                    if d == '\\' && c == '\'' {
                        if let Some(e) = chars.next() {
                            out.push(e);
                        }
                    } else if d == c {
                        if chars.peek() == Some(&c) {
                            out.push(chars.next().unwrap_or(c));
                        } else {
                            break;
                        }
                    }
                }
            }
            '"' => {
                let mut name = String::new();
                while let Some(d) = chars.next() {
                    if d == '"' {
                        if chars.peek() == Some(&'"') {
                            chars.next();
                            name.push('"');
                        } else {
                            break;
                        }
                    } else {
                        name.push(d);
                    }
                }
                out.push('`');
                out.push_str(&name.replace('`', "``"));
                out.push('`');
            }
            other => out.push(other),
        }
    }
    out
}

/// `e AS name`.
pub fn alias(e: Expression, name: &str) -> Expression {
    wrap(ExprType::Alias(Box::new(Alias {
        expr: Some(Box::new(e)),
        name: vec![name.to_string()],
        metadata: None,
    })))
}

/// `*`.
pub fn star() -> Expression {
    wrap(ExprType::UnresolvedStar(UnresolvedStar {
        unparsed_target: None,
        plan_id: None,
    }))
}

/// True for `*` (SQL text or a DataFusion wildcard).
pub fn is_star(e: &ColumnExpr) -> bool {
    match e {
        ColumnExpr::Sql(s) => s.trim() == "*",
        #[allow(deprecated)]
        ColumnExpr::Expr(Expr::Wildcard {
            qualifier: None, ..
        }) => true,
        ColumnExpr::Expr(_) => false,
    }
}

/// An expression of a plan: SQL text as text, a DataFusion expression rebuilt.
pub fn column_expr(e: &ColumnExpr) -> Translated {
    match e {
        ColumnExpr::Sql(s) if s.trim() == "*" => Ok(star()),
        ColumnExpr::Sql(s) => Ok(sql_text(s)),
        ColumnExpr::Expr(e) => expression(e),
    }
}

/// Spark's name of a DataFusion function, where they differ.
fn spark_function_name(name: &str) -> &str {
    match name {
        "approx_distinct" => "approx_count_distinct",
        "character_length" => "char_length",
        "first_value" => "first",
        "last_value" => "last",
        "array_agg" => "collect_list",
        "strpos" => "instr",
        other => other,
    }
}

fn operator_name(op: &Operator) -> Option<&'static str> {
    Some(match op {
        Operator::Eq => "==",
        Operator::NotEq => "!=",
        Operator::Lt => "<",
        Operator::LtEq => "<=",
        Operator::Gt => ">",
        Operator::GtEq => ">=",
        Operator::And => "and",
        Operator::Or => "or",
        Operator::Plus => "+",
        Operator::Minus => "-",
        Operator::Multiply => "*",
        Operator::Divide => "/",
        Operator::Modulo => "%",
        Operator::IsNotDistinctFrom => "<=>",
        Operator::RegexMatch => "rlike",
        Operator::StringConcat => "concat",
        Operator::BitwiseAnd => "&",
        Operator::BitwiseOr => "|",
        Operator::BitwiseXor => "^",
        _ => return None,
    })
}

/// A DataFusion expression as a Spark Connect expression.
pub fn expression(e: &Expr) -> Translated {
    match e {
        Expr::Alias(a) => Ok(alias(expression(&a.expr)?, &a.name)),
        Expr::Column(c) => {
            let mut parts: Vec<&str> = Vec::new();
            let relation = c.relation.as_ref().map(|r| r.to_string());
            if let Some(r) = relation.as_deref() {
                parts.extend(r.split('.'));
            }
            parts.push(&c.name);
            Ok(attribute(&parts))
        }
        Expr::Literal(v, _) => literal(v),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let args = vec![expression(left)?, expression(right)?];
            match (op, operator_name(op)) {
                (Operator::IsDistinctFrom, _) => {
                    Ok(function("not", vec![function("<=>", args, false)], false))
                }
                (_, Some(name)) => Ok(function(name, args, false)),
                (_, None) => Err(Untranslatable::new(
                    format!("the operator `{op}` in `{e}`"),
                    "write the condition as SQL text, which Spark parses itself",
                )),
            }
        }
        Expr::Not(inner) => Ok(function("not", vec![expression(inner)?], false)),
        Expr::IsNull(inner) => Ok(function("isnull", vec![expression(inner)?], false)),
        Expr::IsNotNull(inner) => Ok(function("isnotnull", vec![expression(inner)?], false)),
        Expr::Negative(inner) => Ok(function("negative", vec![expression(inner)?], false)),
        Expr::Between(b) => {
            let value = expression(&b.expr)?;
            let inside = function(
                "and",
                vec![
                    function(">=", vec![value.clone(), expression(&b.low)?], false),
                    function("<=", vec![value, expression(&b.high)?], false),
                ],
                false,
            );
            Ok(if b.negated {
                function("not", vec![inside], false)
            } else {
                inside
            })
        }
        Expr::Like(l) if l.escape_char.is_none() => {
            let name = if l.case_insensitive { "ilike" } else { "like" };
            let call = function(
                name,
                vec![expression(&l.expr)?, expression(&l.pattern)?],
                false,
            );
            Ok(if l.negated {
                function("not", vec![call], false)
            } else {
                call
            })
        }
        Expr::InList(list) => {
            let mut args = vec![expression(&list.expr)?];
            for item in &list.list {
                args.push(expression(item)?);
            }
            let call = function("in", args, false);
            Ok(if list.negated {
                function("not", vec![call], false)
            } else {
                call
            })
        }
        Expr::Case(case) => {
            // Spark's `when(cond, value, cond, value, ..., else)`.
            let mut args = Vec::new();
            for (when, then) in &case.when_then_expr {
                let cond = match &case.expr {
                    Some(base) => function("==", vec![expression(base)?, expression(when)?], false),
                    None => expression(when)?,
                };
                args.push(cond);
                args.push(expression(then)?);
            }
            if let Some(other) = &case.else_expr {
                args.push(expression(other)?);
            }
            Ok(function("when", args, false))
        }
        Expr::Cast(c) => Ok(cast_to(expression(&c.expr)?, c.field.data_type())),
        Expr::TryCast(c) => Ok(function(
            "try_cast",
            vec![
                expression(&c.expr)?,
                sql_text(&type_to_ddl(c.field.data_type())),
            ],
            false,
        )),
        Expr::ScalarFunction(f) => {
            let name = f.func.name();
            if !is_builtin_function(name) {
                return Err(rust_udf(name));
            }
            let args = f
                .args
                .iter()
                .map(expression)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(function(spark_function_name(name), args, false))
        }
        Expr::AggregateFunction(agg) => {
            let name = agg.func.name();
            if !is_builtin_function(name) {
                return Err(rust_udf(name));
            }
            let p = &agg.params;
            if p.filter.is_some() || !p.order_by.is_empty() {
                return Err(Untranslatable::new(
                    format!("the aggregate `{e}` with FILTER or ORDER BY"),
                    "write the aggregate as SQL text",
                ));
            }
            let args = p
                .args
                .iter()
                .map(expression)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(function(spark_function_name(name), args, p.distinct))
        }
        #[allow(deprecated)]
        Expr::Wildcard { qualifier, .. } => Ok(wrap(ExprType::UnresolvedStar(UnresolvedStar {
            unparsed_target: qualifier
                .as_ref()
                .map(|q| format!("{}.*", quote_identifier(&q.to_string()))),
            plan_id: None,
        }))),
        other => Err(Untranslatable::new(
            format!("the expression `{other}`"),
            "write it as SQL text, which Spark parses itself",
        )),
    }
}

fn rust_udf(name: &str) -> Untranslatable {
    Untranslatable::new(
        format!("the Rust UDF `{name}`"),
        "Spark cannot run Rust code: express it with Spark SQL functions (as SQL text), \
         or run this pipeline on this engine",
    )
}

/// `CAST(e AS type)`, the type as Spark's DDL names it.
pub fn cast_to(e: Expression, to: &arrow::datatypes::DataType) -> Expression {
    wrap(ExprType::Cast(Box::new(pe::Cast {
        expr: Some(Box::new(e)),
        eval_mode: 0,
        cast_to_type: Some(cast::CastToType::TypeStr(type_to_ddl(to))),
    })))
}

fn literal(v: &ScalarValue) -> Translated {
    use literal::LiteralType as L;
    if v.is_null() {
        return Ok(cast_to(sql_text("NULL"), &v.data_type()));
    }
    let t = match v {
        ScalarValue::Boolean(Some(b)) => L::Boolean(*b),
        ScalarValue::Int8(Some(n)) => L::Byte(i32::from(*n)),
        ScalarValue::Int16(Some(n)) => L::Short(i32::from(*n)),
        ScalarValue::Int32(Some(n)) => L::Integer(*n),
        ScalarValue::Int64(Some(n)) => L::Long(*n),
        ScalarValue::UInt8(Some(n)) => L::Integer(i32::from(*n)),
        ScalarValue::UInt16(Some(n)) => L::Integer(i32::from(*n)),
        ScalarValue::UInt32(Some(n)) => L::Long(i64::from(*n)),
        ScalarValue::Float32(Some(f)) => L::Float(*f),
        ScalarValue::Float64(Some(f)) => L::Double(*f),
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => L::String(s.clone()),
        ScalarValue::Date32(Some(d)) => L::Date(*d),
        ScalarValue::TimestampMicrosecond(Some(us), tz) => timestamp(*us, tz.is_some()),
        ScalarValue::TimestampMillisecond(Some(ms), tz) => timestamp(ms * 1000, tz.is_some()),
        ScalarValue::TimestampSecond(Some(s), tz) => timestamp(s * 1_000_000, tz.is_some()),
        ScalarValue::TimestampNanosecond(Some(ns), tz) => timestamp(ns / 1000, tz.is_some()),
        ScalarValue::IntervalMonthDayNano(Some(i)) => {
            L::CalendarInterval(literal::CalendarInterval {
                months: i.months,
                days: i.days,
                microseconds: i.nanoseconds / 1000,
            })
        }
        ScalarValue::IntervalDayTime(Some(i)) => L::CalendarInterval(literal::CalendarInterval {
            months: 0,
            days: i.days,
            microseconds: i64::from(i.milliseconds) * 1000,
        }),
        ScalarValue::IntervalYearMonth(Some(m)) => L::CalendarInterval(literal::CalendarInterval {
            months: *m,
            days: 0,
            microseconds: 0,
        }),
        ScalarValue::Decimal128(Some(n), precision, scale) => L::Decimal(literal::Decimal {
            value: decimal_text(*n, *scale),
            precision: Some(i32::from(*precision)),
            scale: Some(i32::from(*scale)),
        }),
        other => {
            return Err(Untranslatable::new(
                format!("the literal `{other}` of type {}", other.data_type()),
                "write it as SQL text",
            ))
        }
    };
    Ok(literal_of(t))
}

fn timestamp(micros: i64, with_zone: bool) -> literal::LiteralType {
    if with_zone {
        literal::LiteralType::Timestamp(micros)
    } else {
        literal::LiteralType::TimestampNtz(micros)
    }
}

fn decimal_text(n: i128, scale: i8) -> String {
    if scale <= 0 {
        return format!("{n}{}", "0".repeat(scale.unsigned_abs() as usize));
    }
    let negative = n < 0;
    let digits = n.unsigned_abs().to_string();
    let scale = scale as usize;
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (whole, fraction) = padded.split_at(padded.len() - scale);
    format!("{}{whole}.{fraction}", if negative { "-" } else { "" })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipelines_core::plan::functions::{col, count_all, lit, window};

    fn text(e: &Expression) -> String {
        match &e.expr_type {
            Some(ExprType::UnresolvedAttribute(a)) => a.unparsed_identifier.clone(),
            Some(ExprType::UnresolvedFunction(f)) => format!(
                "{}({}{})",
                f.function_name,
                if f.is_distinct { "DISTINCT " } else { "" },
                f.arguments.iter().map(text).collect::<Vec<_>>().join(", ")
            ),
            Some(ExprType::Literal(l)) => format!("{:?}", l.literal_type.as_ref().unwrap()),
            Some(ExprType::Alias(a)) => {
                format!("{} AS {}", text(a.expr.as_ref().unwrap()), a.name[0])
            }
            Some(ExprType::ExpressionString(s)) => format!("sql[{}]", s.expression),
            Some(ExprType::Cast(c)) => format!(
                "cast({} AS {:?})",
                text(c.expr.as_ref().unwrap()),
                c.cast_to_type
            ),
            Some(ExprType::UnresolvedStar(_)) => "*".into(),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn columns_operators_and_functions_take_spark_names() {
        let e = col("left.ad_id")
            .eq(col("right.ad_id"))
            .and(col("ts").gt_eq(col("i.ts") + lit(5i64)));
        assert_eq!(
            text(&expression(&e).unwrap()),
            "and(==(left.ad_id, right.ad_id), >=(ts, +(i.ts, Long(5))))"
        );
        assert_eq!(
            text(&expression(&window(col("ts"), "5 minutes", "1 minute")).unwrap()),
            "window(ts, String(\"5 minutes\"), String(\"1 minute\"))"
        );
        assert_eq!(
            text(&expression(&count_all()).unwrap()),
            "count(Long(1)) AS count"
        );
        assert_eq!(text(&expression(&col("user id")).unwrap()), "`user id`");
    }

    #[test]
    fn sql_text_stays_text_and_a_rust_udf_is_refused() {
        assert_eq!(
            text(&column_expr(&ColumnExpr::Sql("level = 'ERROR'".into())).unwrap()),
            "sql[level = 'ERROR']"
        );
        let udf = datafusion::logical_expr::create_udf(
            "score",
            vec![arrow::datatypes::DataType::Int64],
            arrow::datatypes::DataType::Int64,
            datafusion::logical_expr::Volatility::Immutable,
            std::sync::Arc::new(|args: &[datafusion::logical_expr::ColumnarValue]| {
                Ok(args[0].clone())
            }),
        );
        let err = expression(&udf.call(vec![col("n")])).unwrap_err();
        assert_eq!(err.what, "the Rust UDF `score`");
    }

    #[test]
    fn double_quoted_identifiers_take_backticks() {
        assert_eq!(
            spark_quoting(r#"CAST(click_id AS INT) AS "n""#),
            "CAST(click_id AS INT) AS `n`"
        );
        assert_eq!(
            spark_quoting(r#""a""b" = 'it''s "x"' AND `c"d` = 'e\'"'"#),
            r#"`a"b` = 'it''s "x"' AND `c"d` = 'e\'"'"#
        );
    }

    #[test]
    fn decimals_keep_their_scale() {
        assert_eq!(decimal_text(12345, 2), "123.45");
        assert_eq!(decimal_text(-5, 3), "-0.005");
        assert_eq!(decimal_text(7, 0), "7");
        assert_eq!(decimal_text(7, -2), "700");
    }
}
