//! DDL schema strings.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Fields, TimeUnit};
use pipelines_core::plan::ddl::{parse_ddl, parse_ddl_schema, schema_to_ddl};

fn ts() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

#[test]
fn parses_every_type() {
    let s = parse_ddl_schema(
        "ts TIMESTAMP, user_id STRING, n INT, amount DOUBLE, ok BOOLEAN, d DATE, \
         price DECIMAL(10,2), tags ARRAY<STRING>, m MAP<STRING,INT>, s STRUCT<a: INT, b: STRING>, \
         b BINARY, l BIGINT, f FLOAT, sm SMALLINT, t TINYINT, tz TIMESTAMP_NTZ, lo LONG, v VARCHAR(10)",
    )
    .unwrap();
    let types: Vec<(&str, DataType)> = s
        .fields()
        .iter()
        .map(|f| (f.name().as_str(), f.data_type().clone()))
        .collect();
    assert_eq!(
        types,
        vec![
            ("ts", ts()),
            ("user_id", DataType::Utf8),
            ("n", DataType::Int32),
            ("amount", DataType::Float64),
            ("ok", DataType::Boolean),
            ("d", DataType::Date32),
            ("price", DataType::Decimal128(10, 2)),
            (
                "tags",
                DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)))
            ),
            (
                "m",
                DataType::Map(
                    Arc::new(Field::new(
                        "entries",
                        DataType::Struct(Fields::from(vec![
                            Field::new("key", DataType::Utf8, false),
                            Field::new("value", DataType::Int32, true),
                        ])),
                        false
                    )),
                    false
                )
            ),
            (
                "s",
                DataType::Struct(Fields::from(vec![
                    Field::new("a", DataType::Int32, true),
                    Field::new("b", DataType::Utf8, true),
                ]))
            ),
            ("b", DataType::Binary),
            ("l", DataType::Int64),
            ("f", DataType::Float32),
            ("sm", DataType::Int16),
            ("t", DataType::Int8),
            ("tz", DataType::Timestamp(TimeUnit::Microsecond, None)),
            ("lo", DataType::Int64),
            ("v", DataType::Utf8),
        ]
    );
    assert!(s.fields().iter().all(|f| f.is_nullable()));
}

#[test]
fn not_null_comment_backquotes_and_case() {
    let s = parse_ddl_schema(
        "`event id` string NOT NULL COMMENT 'the id', `a``b` int, x struct<y bigint not null>",
    )
    .unwrap();
    assert_eq!(s.field(0).name(), "event id");
    assert!(!s.field(0).is_nullable());
    assert_eq!(
        s.field(0).metadata(),
        &HashMap::from([("comment".to_string(), "the id".to_string())])
    );
    assert_eq!(s.field(1).name(), "a`b");
    assert_eq!(
        s.field(2).data_type(),
        &DataType::Struct(Fields::from(vec![Field::new("y", DataType::Int64, false)]))
    );
    assert_eq!(
        schema_to_ddl(&s),
        "`event id` STRING NOT NULL, `a``b` INT, x STRUCT<y: BIGINT>"
    );
    assert_eq!(parse_ddl("n INT").unwrap().fields().len(), 1);
    assert_eq!(
        parse_ddl_schema("d DECIMAL").unwrap().field(0).data_type(),
        &DataType::Decimal128(10, 0)
    );
}

fn err(ddl: &str) -> (String, Option<String>) {
    let e = parse_ddl_schema(ddl).unwrap_err();
    (e.message, e.help)
}

#[test]
fn errors_name_column_type_and_position() {
    assert_eq!(
        err("ts TIMSTAMP"),
        (
            "invalid schema \"ts TIMSTAMP\": unknown type `TIMSTAMP` for column `ts`".into(),
            Some("did you mean `TIMESTAMP`?".into())
        )
    );
    let (m, h) = err("a INT, b BLOB");
    assert_eq!(
        m,
        "invalid schema \"a INT, b BLOB\": unknown type `BLOB` for column `b`"
    );
    assert!(h.unwrap().starts_with("supported types: STRING, VARCHAR"));
    assert_eq!(err("").0, "invalid schema \"\": it is empty");
    assert_eq!(
        err("a INT b STRING").0,
        "invalid schema \"a INT b STRING\": expected `,` or the end after column `a`, found `b` at position 7"
    );
    assert_eq!(
        err("a").0,
        "invalid schema \"a\": expected a type for column `a`, found the end"
    );
    assert_eq!(
        err("a ARRAY<INT").0,
        "invalid schema \"a ARRAY<INT\": expected `>` in the type of column `a`, found the end"
    );
    assert_eq!(
        err("a INT, a STRING"),
        (
            "invalid schema \"a INT, a STRING\": column `a` is declared twice".into(),
            Some("give every column a distinct name".into())
        )
    );
    assert_eq!(
        err("p DECIMAL(40,2)").0,
        "invalid schema \"p DECIMAL(40,2)\": decimal precision 40 of column `p` is out of range"
    );
    assert_eq!(
        err("a INT NOT").0,
        "invalid schema \"a INT NOT\": expected NULL after NOT for column `a`, found the end"
    );
    assert_eq!(
        err("`a INT").0,
        "invalid schema \"`a INT\": unterminated backquoted name starting at position 1"
    );
    assert_eq!(
        err("a INT,").0,
        "invalid schema \"a INT,\": expected a column name, found the end"
    );
}

#[test]
fn deeply_nested_types_are_an_error_not_a_stack_overflow() {
    let nested = |n: usize| format!("a {}INT{}", "ARRAY<".repeat(n), ">".repeat(n));
    assert!(parse_ddl(&nested(60)).is_ok());
    let e = parse_ddl(&nested(100_000)).unwrap_err();
    assert!(
        e.message
            .ends_with("the type of column `a` nests more than 64 ARRAY, MAP or STRUCT levels"),
        "{}",
        &e.message[e.message.len().saturating_sub(200)..]
    );
}
