//! The sqlparser dialect the rewritten queries are checked with.

use std::any::TypeId;

use sqlparser::ast::Expr;
use sqlparser::dialect::{Dialect, SparkSqlDialect};
use sqlparser::parser::{Parser, ParserError};

/// sqlparser's [`SparkSqlDialect`] with two Spark behaviours it lacks:
/// backslash escapes in string literals (`'it\'s'`, Spark's default) and
/// `INTERVAL '10 minutes'` without a unit qualifier (Spark's typed interval
/// literal).
///
/// Like Spark, it takes `` `x` `` for a quoted identifier and `"x"` for a
/// string; it accepts `window(ts, '10 minutes')` in `GROUP BY`,
/// `window.start`, lambdas, `* EXCEPT (...)`, `LATERAL VIEW`, named table
/// function arguments (`format => 'json'`) and nested comments.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SparkDialect;

impl Dialect for SparkDialect {
    fn dialect(&self) -> TypeId {
        TypeId::of::<SparkSqlDialect>()
    }
    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        SparkSqlDialect.is_delimited_identifier_start(ch)
    }
    fn is_identifier_start(&self, ch: char) -> bool {
        SparkSqlDialect.is_identifier_start(ch)
    }
    fn is_identifier_part(&self, ch: char) -> bool {
        SparkSqlDialect.is_identifier_part(ch)
    }
    fn supports_string_literal_backslash_escape(&self) -> bool {
        true
    }
    fn require_interval_qualifier(&self) -> bool {
        false
    }
    fn supports_filter_during_aggregation(&self) -> bool {
        SparkSqlDialect.supports_filter_during_aggregation()
    }
    fn supports_group_by_expr(&self) -> bool {
        SparkSqlDialect.supports_group_by_expr()
    }
    fn supports_group_by_with_modifier(&self) -> bool {
        SparkSqlDialect.supports_group_by_with_modifier()
    }
    fn supports_lambda_functions(&self) -> bool {
        SparkSqlDialect.supports_lambda_functions()
    }
    fn supports_select_wildcard_except(&self) -> bool {
        SparkSqlDialect.supports_select_wildcard_except()
    }
    fn supports_struct_literal(&self) -> bool {
        SparkSqlDialect.supports_struct_literal()
    }
    fn supports_nested_comments(&self) -> bool {
        SparkSqlDialect.supports_nested_comments()
    }
    fn supports_create_table_using(&self) -> bool {
        SparkSqlDialect.supports_create_table_using()
    }
    fn supports_long_type_as_bigint(&self) -> bool {
        SparkSqlDialect.supports_long_type_as_bigint()
    }
    fn supports_values_as_table_factor(&self) -> bool {
        SparkSqlDialect.supports_values_as_table_factor()
    }
    fn supports_bang_not_operator(&self) -> bool {
        SparkSqlDialect.supports_bang_not_operator()
    }
    fn supports_select_item_multi_column_alias(&self) -> bool {
        SparkSqlDialect.supports_select_item_multi_column_alias()
    }
    fn supports_cte_without_as(&self) -> bool {
        SparkSqlDialect.supports_cte_without_as()
    }
    fn supports_map_literal_with_angle_brackets(&self) -> bool {
        SparkSqlDialect.supports_map_literal_with_angle_brackets()
    }
    fn parse_infix(
        &self,
        parser: &mut Parser,
        expr: &Expr,
        precedence: u8,
    ) -> Option<Result<Expr, ParserError>> {
        SparkSqlDialect.parse_infix(parser, expr, precedence)
    }
}
