//! Spark DDL schema strings: `"ts TIMESTAMP, user_id STRING, n INT"`.
//!
//! [`parse_ddl_schema`] turns a DDL string into an Arrow [`Schema`];
//! [`schema_to_ddl`] and [`type_to_ddl`] go back the other way, for messages.
//!
//! | DDL type | Arrow type |
//! | --- | --- |
//! | `STRING`, `VARCHAR(n)`, `CHAR(n)` | `Utf8` |
//! | `BOOLEAN` / `BOOL` | `Boolean` |
//! | `TINYINT` / `BYTE` | `Int8` |
//! | `SMALLINT` / `SHORT` | `Int16` |
//! | `INT` / `INTEGER` | `Int32` |
//! | `BIGINT` / `LONG` | `Int64` |
//! | `FLOAT` / `REAL` | `Float32` |
//! | `DOUBLE` | `Float64` |
//! | `DECIMAL(p,s)` / `DEC` / `NUMERIC` (default `(10,0)`) | `Decimal128(p, s)` |
//! | `DATE` | `Date32` |
//! | `TIMESTAMP` / `TIMESTAMP_LTZ` | `Timestamp(Microsecond, Some("UTC"))` |
//! | `TIMESTAMP_NTZ` | `Timestamp(Microsecond, None)` |
//! | `BINARY` | `Binary` |
//! | `ARRAY<T>` | `List(item: T)` |
//! | `MAP<K,V>` | `Map(entries: Struct(key: K not null, value: V))` |
//! | `STRUCT<a: T, b T>` | `Struct(a: T, b: T)` |
//!
//! Every column may be followed by `NOT NULL` and `COMMENT '...'` (the comment
//! is kept in the field metadata under `comment`). Names may be backquoted:
//! `` `my col` STRING ``.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};

use crate::error::PlanError;

/// The time zone of `TIMESTAMP` columns (Spark's session time zone; we run in UTC).
pub const SESSION_TIME_ZONE: &str = "UTC";

/// Field metadata key holding a column's `COMMENT '...'`.
pub const COMMENT_KEY: &str = "comment";

/// The type names understood by [`parse_ddl_schema`], for suggestions.
const TYPE_NAMES: &[&str] = &[
    "STRING",
    "VARCHAR",
    "CHAR",
    "BOOLEAN",
    "BOOL",
    "TINYINT",
    "BYTE",
    "SMALLINT",
    "SHORT",
    "INT",
    "INTEGER",
    "BIGINT",
    "LONG",
    "FLOAT",
    "REAL",
    "DOUBLE",
    "DECIMAL",
    "DEC",
    "NUMERIC",
    "DATE",
    "TIMESTAMP",
    "TIMESTAMP_LTZ",
    "TIMESTAMP_NTZ",
    "BINARY",
    "ARRAY",
    "MAP",
    "STRUCT",
];

/// Parses a Spark DDL schema string into an Arrow schema.
///
/// ```
/// use arrow::datatypes::{DataType, TimeUnit};
/// use pipelines_core::plan::ddl::parse_ddl_schema;
/// let schema = parse_ddl_schema("ts TIMESTAMP, user_id STRING NOT NULL").unwrap();
/// assert_eq!(
///     schema.field(0).data_type(),
///     &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
/// );
/// assert!(!schema.field(1).is_nullable());
/// let err = parse_ddl_schema("ts TIMSTAMP").unwrap_err();
/// assert_eq!(err.message, "invalid schema \"ts TIMSTAMP\": unknown type `TIMSTAMP` for column `ts`");
/// assert_eq!(err.help.as_deref(), Some("did you mean `TIMESTAMP`?"));
/// ```
pub fn parse_ddl_schema(ddl: &str) -> Result<Schema, PlanError> {
    let mut p = DdlParser::new(ddl);
    let fields = p.parse_top_level()?;
    Ok(Schema::new(fields))
}

/// Like [`parse_ddl_schema`], returning a shared [`SchemaRef`].
pub fn parse_ddl(ddl: &str) -> Result<SchemaRef, PlanError> {
    parse_ddl_schema(ddl).map(Arc::new)
}

/// Renders an Arrow type in DDL syntax, e.g. `TIMESTAMP`, `ARRAY<STRING>`.
/// Types without a DDL spelling are shown with Arrow's name.
pub fn type_to_ddl(t: &DataType) -> String {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "STRING".into(),
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Int8 => "TINYINT".into(),
        DataType::Int16 => "SMALLINT".into(),
        DataType::Int32 => "INT".into(),
        DataType::Int64 => "BIGINT".into(),
        DataType::Float32 => "FLOAT".into(),
        DataType::Float64 => "DOUBLE".into(),
        DataType::Decimal128(p, s) => format!("DECIMAL({p},{s})"),
        DataType::Date32 => "DATE".into(),
        DataType::Timestamp(_, Some(_)) => "TIMESTAMP".into(),
        DataType::Timestamp(_, None) => "TIMESTAMP_NTZ".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "BINARY".into(),
        DataType::List(f) | DataType::LargeList(f) => {
            format!("ARRAY<{}>", type_to_ddl(f.data_type()))
        }
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => format!(
                "MAP<{}, {}>",
                type_to_ddl(kv[0].data_type()),
                type_to_ddl(kv[1].data_type())
            ),
            other => format!("{other}"),
        },
        DataType::Struct(fields) => {
            let inner: Vec<String> = fields
                .iter()
                .map(|f| format!("{}: {}", quote_name(f.name()), type_to_ddl(f.data_type())))
                .collect();
            format!("STRUCT<{}>", inner.join(", "))
        }
        other => format!("{other}"),
    }
}

/// Renders a schema as a DDL string, e.g. `ts TIMESTAMP, level STRING`.
pub fn schema_to_ddl(schema: &Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| {
            format!(
                "{} {}{}",
                quote_name(f.name()),
                type_to_ddl(f.data_type()),
                if f.is_nullable() { "" } else { " NOT NULL" }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn quote_name(name: &str) -> String {
    let plain = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if plain {
        name.to_string()
    } else {
        format!("`{}`", name.replace('`', "``"))
    }
}

/// The closest of `candidates` to `word` (case-insensitive), when it is a
/// likely typo ([`crate::suggest::closest`]).
pub(crate) fn closest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    crate::suggest::closest(word, candidates)
}

struct DdlParser<'a> {
    text: &'a str,
    chars: Vec<(usize, char)>,
    pos: usize,
    /// How many ARRAY / MAP / STRUCT types enclose the cursor.
    depth: usize,
}

/// The deepest nesting of ARRAY, MAP and STRUCT types a schema may have
/// (deeper text would exhaust the stack of the recursive parser).
const MAX_TYPE_DEPTH: usize = 64;

impl<'a> DdlParser<'a> {
    fn new(text: &'a str) -> Self {
        DdlParser {
            text,
            chars: text.char_indices().collect(),
            pos: 0,
            depth: 0,
        }
    }

    /// 1-based character position of the cursor, for messages.
    fn position(&self) -> usize {
        self.pos + 1
    }

    fn err(&self, what: impl std::fmt::Display) -> PlanError {
        PlanError::with_help(
            format!("invalid schema \"{}\": {what}", self.text),
            "write a schema such as \"ts TIMESTAMP, user_id STRING, amount DOUBLE\"",
        )
    }

    fn err_help(&self, what: impl std::fmt::Display, help: impl Into<String>) -> PlanError {
        PlanError::with_help(format!("invalid schema \"{}\": {what}", self.text), help)
    }

    fn skip_ws(&mut self) {
        while self.pos < self.chars.len() && self.chars[self.pos].1.is_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_ws();
        self.chars.get(self.pos).map(|(_, c)| *c)
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// A bare word (letters, digits, `_`), or None.
    fn word(&mut self) -> Option<String> {
        self.skip_ws();
        let start = self.pos;
        while self.pos < self.chars.len()
            && (self.chars[self.pos].1.is_alphanumeric() || self.chars[self.pos].1 == '_')
        {
            self.pos += 1;
        }
        if self.pos == start {
            None
        } else {
            Some(self.chars[start..self.pos].iter().map(|(_, c)| c).collect())
        }
    }

    /// Peeks whether the next word is `kw` (case-insensitive) without consuming.
    fn next_is_keyword(&mut self, kw: &str) -> bool {
        let save = self.pos;
        let w = self.word();
        self.pos = save;
        w.is_some_and(|w| w.eq_ignore_ascii_case(kw))
    }

    fn describe_next(&mut self) -> String {
        self.skip_ws();
        match self.chars.get(self.pos) {
            None => "the end".to_string(),
            Some((_, c)) => format!("`{c}` at position {}", self.position()),
        }
    }

    /// A column name: a bare word or a backquoted name.
    fn name(&mut self) -> Result<String, PlanError> {
        match self.peek() {
            Some('`') => {
                let start_pos = self.position();
                self.pos += 1;
                let mut out = String::new();
                loop {
                    match self.chars.get(self.pos).map(|(_, c)| *c) {
                        None => {
                            return Err(self.err(format!(
                                "unterminated backquoted name starting at position {start_pos}"
                            )))
                        }
                        Some('`') => {
                            if self.chars.get(self.pos + 1).map(|(_, c)| *c) == Some('`') {
                                out.push('`');
                                self.pos += 2;
                            } else {
                                self.pos += 1;
                                break;
                            }
                        }
                        Some(c) => {
                            out.push(c);
                            self.pos += 1;
                        }
                    }
                }
                if out.is_empty() {
                    return Err(self.err(format!("empty column name at position {start_pos}")));
                }
                Ok(out)
            }
            _ => match self.word() {
                Some(w) => Ok(w),
                None => {
                    let next = self.describe_next();
                    Err(self.err(format!("expected a column name, found {next}")))
                }
            },
        }
    }

    fn string_literal(&mut self) -> Result<String, PlanError> {
        let quote = match self.peek() {
            Some(q @ ('\'' | '"')) => q,
            _ => {
                let next = self.describe_next();
                return Err(self.err(format!("expected a quoted comment, found {next}")));
            }
        };
        let start_pos = self.position();
        self.pos += 1;
        let mut out = String::new();
        loop {
            match self.chars.get(self.pos).map(|(_, c)| *c) {
                None => {
                    return Err(self.err(format!(
                        "unterminated string starting at position {start_pos}"
                    )))
                }
                Some('\\') => {
                    if let Some((_, c)) = self.chars.get(self.pos + 1) {
                        out.push(*c);
                    }
                    self.pos += 2;
                }
                Some(c) if c == quote => {
                    if self.chars.get(self.pos + 1).map(|(_, c)| *c) == Some(quote) {
                        out.push(quote);
                        self.pos += 2;
                    } else {
                        self.pos += 1;
                        break;
                    }
                }
                Some(c) => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
        Ok(out)
    }

    fn parse_top_level(&mut self) -> Result<Vec<Field>, PlanError> {
        if self.peek().is_none() {
            return Err(self.err("it is empty"));
        }
        let mut fields: Vec<Field> = Vec::new();
        loop {
            let field = self.column(false)?;
            if fields.iter().any(|f| f.name() == field.name()) {
                return Err(self.err_help(
                    format!("column `{}` is declared twice", field.name()),
                    "give every column a distinct name",
                ));
            }
            fields.push(field);
            if self.eat(',') {
                continue;
            }
            if self.peek().is_none() {
                break;
            }
            let next = self.describe_next();
            let last = fields.last().map(|f| f.name().clone()).unwrap_or_default();
            return Err(self.err(format!(
                "expected `,` or the end after column `{last}`, found {next}"
            )));
        }
        Ok(fields)
    }

    /// `name [:] type [NOT NULL] [COMMENT '...']`; `in_struct` allows the colon.
    fn column(&mut self, in_struct: bool) -> Result<Field, PlanError> {
        let name = self.name()?;
        if in_struct {
            self.eat(':');
        }
        let data_type = self.data_type(&name)?;
        let mut nullable = true;
        let mut metadata = HashMap::new();
        loop {
            if self.next_is_keyword("NOT") {
                self.word();
                if !self.next_is_keyword("NULL") {
                    let next = self.describe_next();
                    return Err(self.err(format!(
                        "expected NULL after NOT for column `{name}`, found {next}"
                    )));
                }
                self.word();
                nullable = false;
            } else if self.next_is_keyword("NULL") {
                self.word();
            } else if self.next_is_keyword("COMMENT") {
                self.word();
                let comment = self.string_literal()?;
                metadata.insert(COMMENT_KEY.to_string(), comment);
            } else {
                break;
            }
        }
        Ok(Field::new(name, data_type, nullable).with_metadata(metadata))
    }

    fn data_type(&mut self, column: &str) -> Result<DataType, PlanError> {
        if self.depth >= MAX_TYPE_DEPTH {
            return Err(self.err(format!(
                "the type of column `{column}` nests more than {MAX_TYPE_DEPTH} ARRAY, MAP or STRUCT levels"
            )));
        }
        self.depth += 1;
        let t = self.data_type_here(column);
        self.depth -= 1;
        t
    }

    fn data_type_here(&mut self, column: &str) -> Result<DataType, PlanError> {
        let Some(word) = self.word() else {
            let next = self.describe_next();
            return Err(self.err(format!(
                "expected a type for column `{column}`, found {next}"
            )));
        };
        let upper = word.to_ascii_uppercase();
        let t = match upper.as_str() {
            "STRING" | "TEXT" => DataType::Utf8,
            "VARCHAR" | "CHAR" | "CHARACTER" => {
                if self.eat('(') {
                    self.number(column)?;
                    self.expect(')', column)?;
                }
                DataType::Utf8
            }
            "BOOLEAN" | "BOOL" => DataType::Boolean,
            "TINYINT" | "BYTE" => DataType::Int8,
            "SMALLINT" | "SHORT" => DataType::Int16,
            "INT" | "INTEGER" => DataType::Int32,
            "BIGINT" | "LONG" => DataType::Int64,
            "FLOAT" | "REAL" => DataType::Float32,
            "DOUBLE" => DataType::Float64,
            "DATE" => DataType::Date32,
            "TIMESTAMP" | "TIMESTAMP_LTZ" => {
                DataType::Timestamp(TimeUnit::Microsecond, Some(SESSION_TIME_ZONE.into()))
            }
            "TIMESTAMP_NTZ" => DataType::Timestamp(TimeUnit::Microsecond, None),
            "BINARY" => DataType::Binary,
            "DECIMAL" | "DEC" | "NUMERIC" => {
                let (mut p, mut s) = (10u64, 0u64);
                if self.eat('(') {
                    p = self.number(column)?;
                    if self.eat(',') {
                        s = self.number(column)?;
                    }
                    self.expect(')', column)?;
                }
                if p == 0 || p > 38 {
                    return Err(self.err_help(
                        format!("decimal precision {p} of column `{column}` is out of range"),
                        "use a precision between 1 and 38, e.g. DECIMAL(10,2)",
                    ));
                }
                if s > p {
                    return Err(self.err_help(
                        format!(
                            "decimal scale {s} of column `{column}` is larger than its precision {p}"
                        ),
                        "the scale must not exceed the precision, e.g. DECIMAL(10,2)",
                    ));
                }
                DataType::Decimal128(p as u8, s as i8)
            }
            "ARRAY" => {
                self.expect('<', column)?;
                let inner = self.data_type(column)?;
                self.expect('>', column)?;
                DataType::List(Arc::new(Field::new_list_field(inner, true)))
            }
            "MAP" => {
                self.expect('<', column)?;
                let k = self.data_type(column)?;
                self.expect(',', column)?;
                let v = self.data_type(column)?;
                self.expect('>', column)?;
                let entries = Field::new(
                    "entries",
                    DataType::Struct(Fields::from(vec![
                        Field::new("key", k, false),
                        Field::new("value", v, true),
                    ])),
                    false,
                );
                DataType::Map(Arc::new(entries), false)
            }
            "STRUCT" => {
                self.expect('<', column)?;
                let mut fields: Vec<Field> = Vec::new();
                if !self.eat('>') {
                    loop {
                        let f = self.column(true)?;
                        if fields.iter().any(|g| g.name() == f.name()) {
                            return Err(self.err_help(
                                format!(
                                    "struct field `{}` of column `{column}` is declared twice",
                                    f.name()
                                ),
                                "give every struct field a distinct name",
                            ));
                        }
                        fields.push(f);
                        if self.eat(',') {
                            continue;
                        }
                        self.expect('>', column)?;
                        break;
                    }
                }
                DataType::Struct(Fields::from(fields))
            }
            _ => {
                let help = match closest(&word, TYPE_NAMES.iter().copied()) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => format!("supported types: {}", TYPE_NAMES.join(", ")),
                };
                return Err(
                    self.err_help(format!("unknown type `{word}` for column `{column}`"), help)
                );
            }
        };
        Ok(t)
    }

    fn number(&mut self, column: &str) -> Result<u64, PlanError> {
        match self.word() {
            Some(w) => w.parse().map_err(|_| {
                self.err(format!(
                    "expected a number in the type of column `{column}`, found `{w}`"
                ))
            }),
            None => {
                let next = self.describe_next();
                Err(self.err(format!(
                    "expected a number in the type of column `{column}`, found {next}"
                )))
            }
        }
    }

    fn expect(&mut self, c: char, column: &str) -> Result<(), PlanError> {
        if self.eat(c) {
            Ok(())
        } else {
            let next = self.describe_next();
            Err(self.err(format!(
                "expected `{c}` in the type of column `{column}`, found {next}"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let ddl = "ts TIMESTAMP, `a b` STRING NOT NULL, m MAP<STRING, INT>, s STRUCT<a: INT, b: ARRAY<DOUBLE>>";
        let schema = parse_ddl_schema(ddl).unwrap();
        assert_eq!(schema_to_ddl(&schema), ddl);
    }
}
