//! Column names resolve case-insensitively when the match is unique, like
//! Spark with `spark.sql.caseSensitive=false`, and keep the schema's spelling.

use std::collections::BTreeMap;

use arrow::datatypes::SchemaRef;
use pipelines_core::prelude::*;

fn events(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("timestamp TIMESTAMP, userId STRING, action STRING")
        .load("data/events")
}

fn names(schema: &SchemaRef) -> Vec<String> {
    schema.fields().iter().map(|f| f.name().clone()).collect()
}

#[test]
fn camel_case_columns_resolve_from_col_and_sql() {
    let s = Session::new();
    let catalog: BTreeMap<String, SchemaRef> = BTreeMap::new();
    let by_col = events(&s)
        .unwrap()
        .group_by([col("userId")])
        .count()
        .unwrap();
    assert_eq!(
        names(&by_col.resolve(&catalog).unwrap().schema()),
        ["userId", "count"]
    );

    let by_sql = events(&s)
        .unwrap()
        .select_expr(["userid", "ACTION"])
        .unwrap();
    assert_eq!(
        names(&by_sql.resolve(&catalog).unwrap().schema()),
        ["userId", "action"]
    );
}

#[test]
fn a_misspelled_column_is_still_an_error() {
    let s = Session::new();
    let catalog: BTreeMap<String, SchemaRef> = BTreeMap::new();
    let df = events(&s).unwrap().filter("usr_id = 'a'").unwrap();
    let errs = df.resolve(&catalog).unwrap_err();
    assert_eq!(errs.len(), 1);
    assert_eq!(
        errs[0].message,
        "unknown column `usr_id` in filter `usr_id = 'a'`"
    );
    assert_eq!(
        errs[0].help.as_deref(),
        Some("did you mean `userId`? available columns: timestamp, userId, action")
    );
}
