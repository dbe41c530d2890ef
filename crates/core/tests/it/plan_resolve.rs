//! Resolution: output schemas of every operator and column/type errors.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use pipelines_core::plan::ddl::{parse_ddl, schema_to_ddl};
use pipelines_core::plan::functions::*;
use pipelines_core::plan::{DataFrame, JoinType, PlanNode, WATERMARK_METADATA_KEY};
use pipelines_core::{PlanError, Result, Session};

fn catalog() -> HashMap<String, SchemaRef> {
    HashMap::from([
        (
            "logs".to_string(),
            parse_ddl("ts TIMESTAMP, service_name STRING, level STRING, msg STRING, n INT")
                .unwrap(),
        ),
        (
            "users".to_string(),
            parse_ddl("id BIGINT, name STRING, level STRING").unwrap(),
        ),
    ])
}

fn logs() -> DataFrame {
    Session::new().read_stream_table("logs").unwrap()
}

fn users() -> DataFrame {
    Session::new().read_table("users").unwrap()
}

/// The resolved schema as DDL.
fn schema(df: Result<DataFrame>) -> String {
    let df = df.unwrap();
    match df.resolve(&catalog()) {
        Ok(r) => schema_to_ddl(&r.schema()),
        Err(e) => panic!("resolve failed: {e:?}"),
    }
}

fn errors(df: Result<DataFrame>) -> Vec<(String, Option<String>)> {
    df.unwrap()
        .resolve(&catalog())
        .unwrap_err()
        .into_iter()
        .map(|e: PlanError| (e.message, e.help))
        .collect()
}

fn build_error(df: Result<DataFrame>) -> String {
    match df {
        Err(pipelines_core::Error::Plan(e)) => e.message,
        other => panic!("expected a plan error, got {other:?}"),
    }
}

const LOGS: &str = "ts TIMESTAMP, service_name STRING, level STRING, msg STRING, n INT";

#[test]
fn look_and_feel_flow() {
    let df = logs()
        .filter("level = 'ERROR'")
        .and_then(|d| d.with_watermark("ts", "10 minutes"))
        .and_then(|d| {
            d.group_by([
                window(col("ts"), "5 minutes", "1 minute"),
                col("service_name"),
            ])
            .count()
        });
    assert_eq!(
        schema(df),
        "window STRUCT<start: TIMESTAMP, end: TIMESTAMP>, service_name STRING, count BIGINT NOT NULL"
    );
    let kafka = Session::new()
        .read_stream()
        .format("kafka")
        .option("kafka.bootstrap.servers", "${KAFKA_BROKERS}")
        .option("subscribe", "events")
        .load_default()
        .and_then(|d| d.select_expr(["CAST(key AS STRING) AS event_type"]))
        .and_then(|d| d.group_by([col("event_type")]).count());
    assert_eq!(schema(kafka), "event_type STRING, count BIGINT NOT NULL");
}

#[test]
fn projections() {
    assert_eq!(
        schema(logs().select([col("level"), col("n")])),
        "level STRING, n INT"
    );
    assert_eq!(
        schema(logs().select_expr(["CAST(n AS BIGINT) AS big", "n + 1", "upper(level)"])),
        "big BIGINT, `n + 1` BIGINT, `upper(level)` STRING"
    );
    assert_eq!(schema(logs().select_expr(["*"])), LOGS);
    assert_eq!(
        schema(logs().select([(col("n") * lit(2)).alias("double")])),
        "double INT"
    );
    assert_eq!(
        schema(logs().with_column("n", "n * 2")),
        "ts TIMESTAMP, service_name STRING, level STRING, msg STRING, n BIGINT"
    );
    assert_eq!(
        schema(logs().with_column("one", lit(1i64))),
        format!("{LOGS}, one BIGINT NOT NULL")
    );
    assert_eq!(
        schema(logs().with_column_renamed("msg", "message")),
        "ts TIMESTAMP, service_name STRING, level STRING, message STRING, n INT"
    );
    assert_eq!(
        schema(logs().drop(["msg", "n"])),
        "ts TIMESTAMP, service_name STRING, level STRING"
    );
    assert_eq!(schema(logs().filter(col("n").gt(lit(3)))), LOGS);
    assert_eq!(schema(logs().order_by(["n DESC", "level"])), LOGS);
    assert_eq!(schema(logs().order_by([col("n").sort(false, false)])), LOGS);
    assert_eq!(schema(logs().limit(10)), LOGS);
    assert_eq!(schema(logs().drop_duplicates(Some(&["msg"]))), LOGS);
    assert_eq!(schema(logs().drop_duplicates::<&str>(None)), LOGS);
    assert_eq!(
        schema(
            logs()
                .with_watermark("ts", "1 minute")
                .and_then(|d| d.drop_duplicates_within_watermark(["msg"]))
        ),
        LOGS
    );
}

#[test]
fn aggregates() {
    let df = logs().group_by(["service_name"]).agg(vec![
        sum(col("n")).alias("total"),
        first(col("msg")),
        last(col("msg")),
        avg(col("n")),
        min(col("n")),
        max(col("ts")),
        collect_list(col("msg")),
        approx_count_distinct(col("msg")),
        count_distinct(col("msg")),
        count(col("n")),
    ]);
    assert_eq!(
        schema(df),
        "service_name STRING, total BIGINT, `first(msg)` STRING, `last(msg)` STRING, `avg(n)` DOUBLE, \
         `min(n)` INT, `max(ts)` TIMESTAMP, `collect_list(msg)` ARRAY<STRING>, \
         `approx_count_distinct(msg)` UInt64 NOT NULL, `count(DISTINCT msg)` BIGINT NOT NULL, `count(n)` BIGINT NOT NULL"
    );
    assert_eq!(
        schema(
            logs()
                .group_by(["service_name"])
                .agg(["sum(n) AS total", "max(n) - min(n) AS spread"])
        ),
        "service_name STRING, total BIGINT, spread INT"
    );
    assert_eq!(
        schema(logs().group_by(Vec::<&str>::new()).count()),
        "count BIGINT NOT NULL"
    );
    assert_eq!(
        schema(
            logs()
                .group_by([session_window(col("ts"), "5 minutes")])
                .count()
        ),
        "session_window STRUCT<start: TIMESTAMP, end: TIMESTAMP>, count BIGINT NOT NULL"
    );
    assert_eq!(
        schema(logs().group_by(["window(ts, '10 minutes')"]).count()),
        "window STRUCT<start: TIMESTAMP, end: TIMESTAMP>, count BIGINT NOT NULL"
    );
    assert_eq!(
        errors(logs().group_by(["service_name"]).agg(["n"])),
        vec![(
            "`n` in agg is not an aggregate".to_string(),
            Some("wrap it in an aggregate function such as sum(...), count(...) or max(...), or add it to group_by(...)".to_string())
        )]
    );
}

#[test]
fn joins() {
    let l = logs().drop(["level"]).unwrap();
    assert_eq!(
        schema(l.join(&users(), "n = id", JoinType::LeftOuter)),
        "ts TIMESTAMP, service_name STRING, msg STRING, n INT, id BIGINT, name STRING, level STRING"
    );
    assert_eq!(
        schema(l.join(&users(), col("n").eq(col("id")), JoinType::LeftSemi)),
        "ts TIMESTAMP, service_name STRING, msg STRING, n INT"
    );
    let keyed = logs().with_column_renamed("n", "id").unwrap();
    assert_eq!(
        schema(keyed.join_using(&users().drop(["level"]).unwrap(), ["id"], JoinType::Inner)),
        "id INT, ts TIMESTAMP, service_name STRING, level STRING, msg STRING, name STRING"
    );
    assert_eq!(
        schema(keyed.join_using(&users(), ["id", "level"], JoinType::FullOuter)),
        "id BIGINT, level STRING, ts TIMESTAMP, service_name STRING, msg STRING, name STRING"
    );
    assert_eq!(
        schema(logs().join(
            &users().select_expr(["id", "level AS user_level"]).unwrap(),
            "left.n = right.id AND left.level = user_level",
            JoinType::Inner
        )),
        format!("{LOGS}, id BIGINT, user_level STRING")
    );
    assert_eq!(
        errors(logs().join(&users(), "n = id", JoinType::Inner)),
        vec![(
            "join output has two columns named `level`".to_string(),
            Some("rename one side's column with with_column_renamed(\"level\", ...) before joining, or join with join_using([\"level\"]) when it is a join key".to_string())
        )]
    );
    assert_eq!(
        errors(logs().join(&users(), "level = 'x'", JoinType::Inner)),
        vec![(
            "column `level` in join condition `level = 'x'` is ambiguous: both sides of the join have it".to_string(),
            Some("qualify it: left.level or right.level".to_string())
        )]
    );
    assert_eq!(
        errors(logs().join_using(&users(), ["idd"], JoinType::Inner))[1],
        (
            "unknown column `idd` in the right side of join_using".to_string(),
            Some("did you mean `id`? available columns: id, name, level".to_string())
        )
    );
}

#[test]
fn unions() {
    let a = logs().select_expr(["level", "n"]).unwrap();
    let b = Session::new()
        .read_stream_table("users")
        .unwrap()
        .select_expr(["name", "id"])
        .unwrap();
    assert_eq!(schema(a.union(&b)), "level STRING, n BIGINT");
    assert_eq!(
        errors(a.union(&Session::new().read_stream_table("users").unwrap())),
        vec![(
            "cannot union inputs with 2 and 3 columns: (level STRING, n INT) and (id BIGINT, name STRING, level STRING)".to_string(),
            Some("select the same columns, in the same order, on every input of the union".to_string())
        )]
    );
    let swapped = logs().select_expr(["n", "level"]).unwrap();
    let errs = errors(swapped.union(&b));
    assert_eq!(errs.len(), 2);
    assert_eq!(
        errs[0].0,
        "cannot union column 1 (`n` Int32 and `name` Utf8): (n INT, level STRING) and (name STRING, id BIGINT)"
    );
    // Mixing a stream and a batch resolves; the query-shape checks refuse
    // it (tests/it/graph_checks.rs).
    assert_eq!(
        schema(a.union(&users().select_expr(["name", "id"]).unwrap())),
        "level STRING, n BIGINT"
    );
    let u = a.union(&b).unwrap().union(&a).unwrap();
    assert!(matches!(u.node(), PlanNode::Union { inputs } if inputs.len() == 3));
}

#[test]
fn column_errors_with_suggestions() {
    assert_eq!(
        errors(logs().filter("levle = 'ERROR'")),
        vec![(
            "unknown column `levle` in filter `levle = 'ERROR'`".to_string(),
            Some(
                "did you mean `level`? available columns: ts, service_name, level, msg, n"
                    .to_string()
            )
        )]
    );
    assert_eq!(
        errors(logs().filter(col("levle").eq(lit("ERROR")))),
        vec![(
            "unknown column `levle` in filter `levle = 'ERROR'`".to_string(),
            Some(
                "did you mean `level`? available columns: ts, service_name, level, msg, n"
                    .to_string()
            )
        )]
    );
    assert_eq!(
        errors(logs().select([col("zzz")])),
        vec![(
            "unknown column `zzz` in select `zzz`".to_string(),
            Some("available columns: ts, service_name, level, msg, n".to_string())
        )]
    );
    // Several errors in one node are all reported.
    assert_eq!(errors(logs().select_expr(["a1", "b2", "level"])).len(), 2);
    assert_eq!(
        errors(logs().drop(["mgs"]))[0].0,
        "unknown column `mgs` in drop"
    );
    assert_eq!(
        errors(logs().with_column_renamed("nn", "m"))[0],
        (
            "unknown column `nn` in with_column_renamed".to_string(),
            Some(
                "did you mean `n`? available columns: ts, service_name, level, msg, n".to_string()
            )
        )
    );
    assert_eq!(
        errors(logs().with_column_renamed("n", "msg"))[0].0,
        "cannot rename column `n` to `msg`: column `msg` already exists"
    );
    assert_eq!(
        errors(logs().drop_duplicates(Some(&["lvl"])))[0].0,
        "unknown column `lvl` in drop_duplicates"
    );
    assert_eq!(
        errors(logs().order_by(["nn DESC"]))[0].0,
        "unknown column `nn` in order_by `nn`"
    );
}

#[test]
fn type_errors() {
    assert_eq!(
        errors(logs().filter("level")),
        vec![(
            "filter predicate `level` is Utf8, not a boolean".to_string(),
            Some("write a condition such as \"level = 'ERROR'\"".to_string())
        )]
    );
    assert_eq!(
        errors(logs().select_expr(["level + 1"]))[0].0,
        "invalid select `level + 1`: Cannot coerce arithmetic expression Utf8 + Int64 to valid types"
    );
    assert_eq!(
        errors(logs().with_watermark("level", "10 minutes")),
        vec![(
            "watermark column `level` is Utf8, not a timestamp".to_string(),
            Some("use a TIMESTAMP column, or convert it first, e.g. with_column(\"level\", \"to_timestamp(level)\")".to_string())
        )]
    );
    assert_eq!(
        errors(logs().with_watermark("tss", "10 minutes"))[0],
        (
            "unknown column `tss` in with_watermark".to_string(),
            Some(
                "did you mean `ts`? available columns: ts, service_name, level, msg, n".to_string()
            )
        )
    );
    assert_eq!(
        errors(
            logs()
                .group_by([tumbling_window(col("level"), "5 minutes")])
                .count()
        ),
        vec![(
            "the time column `level` of `window` is Utf8, not a timestamp".to_string(),
            Some("use a TIMESTAMP column, or convert it with to_timestamp(...) first".to_string())
        )]
    );
    assert_eq!(
        errors(logs().select([sum(col("n"))]))[0].0,
        "aggregate `sum(n)` is not allowed in select"
    );
}

#[test]
fn construction_errors() {
    assert_eq!(
        build_error(logs().filter("level = = 'x'")),
        "invalid SQL expression `level = = 'x'`: Expected: an expression, found: = at Line: 1, Column: 9"
    );
    assert_eq!(
        build_error(logs().with_watermark("ts", "10 minuts")),
        "invalid interval `10 minuts`: unknown unit `minuts`"
    );
    assert_eq!(
        build_error(
            logs()
                .group_by([window(col("ts"), "5 minuts", "1 minute")])
                .count()
        ),
        "invalid interval `5 minuts`: unknown unit `minuts`"
    );
    assert_eq!(
        build_error(
            logs()
                .group_by([window(col("ts"), "1 minute", "5 minutes")])
                .count()
        ),
        "the slide duration (5 minutes) of `window` is longer than the window duration (1 minute)"
    );
    assert_eq!(
        build_error(logs().select_expr(["CAST(n AS"]))
            .split(':')
            .next(),
        Some("invalid SQL expression `CAST(n AS`")
    );
}

#[test]
fn watermark_metadata() {
    let r = logs()
        .with_watermark("ts", "10 minutes")
        .unwrap()
        .resolve(&catalog())
        .unwrap();
    let f = r.schema().field(0).clone();
    assert_eq!(
        f.metadata().get(WATERMARK_METADATA_KEY).map(String::as_str),
        Some("600000")
    );
    // It survives a projection.
    let r = logs()
        .with_watermark("ts", "10 minutes")
        .and_then(|d| d.select_expr(["ts", "level"]))
        .unwrap()
        .resolve(&catalog())
        .unwrap();
    assert_eq!(
        r.schema()
            .field(0)
            .metadata()
            .get(WATERMARK_METADATA_KEY)
            .map(String::as_str),
        Some("600000")
    );
}

#[test]
fn introspection_and_unknown_datasets() {
    let s = Session::new();
    let df = s
        .read_stream_table("logs")
        .unwrap()
        .join(&s.read_table("users").unwrap(), "n = id", JoinType::Inner)
        .unwrap()
        .union(&s.read_stream_table("logs").unwrap())
        .unwrap();
    assert_eq!(
        df.datasets_read(),
        vec![("logs".to_string(), true), ("users".to_string(), false)]
    );
    assert!(df.is_streaming());
    assert!(!users().is_streaming());
    assert_eq!(df.children().len(), 2);
    assert!(df.sources().is_empty());

    let missing = s
        .read_table("nope")
        .unwrap()
        .union(&s.read_table("gone").unwrap())
        .unwrap();
    let errs = missing.resolve(&catalog()).unwrap_err();
    let msgs: Vec<&str> = errs.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(msgs, ["unknown dataset `nope`", "unknown dataset `gone`"]);
    assert!(errs
        .iter()
        .all(|e| e.message.starts_with(pipelines_core::plan::UNKNOWN_DATASET)));

    // Independent branches both report their errors.
    let both = logs()
        .filter("levle = 'x'")
        .unwrap()
        .union(&logs().filter("mgs = 'y'").unwrap())
        .unwrap();
    assert_eq!(both.resolve(&catalog()).unwrap_err().len(), 2);
}

#[test]
fn per_node_schemas() {
    let filtered = logs().filter("level = 'ERROR'").unwrap();
    let df = filtered.select_expr(["msg"]).unwrap();
    let r = df.resolve(&catalog()).unwrap();
    assert_eq!(schema_to_ddl(&r.schema_of(&filtered).unwrap()), LOGS);
    assert_eq!(r.root().children.len(), 1);
    assert_eq!(r.root().exprs.len(), 1);
    let mut count = 0;
    r.root().walk(&mut |_| count += 1);
    assert_eq!(count, 3);
    // Resolving again with a closure catalog.
    let cat =
        |name: &str| -> Option<SchemaRef> { (name == "logs").then(|| parse_ddl(LOGS).unwrap()) };
    assert!(df.resolve(&cat).is_ok());
    let _ = Arc::new(0);
}

#[test]
fn inferred_parquet_schema() {
    let dir = tempfile::tempdir().unwrap();
    let s = Session::new();
    let df = s
        .read_stream()
        .format("parquet")
        .load(dir.path().to_str().unwrap())
        .unwrap();
    let errs = df.resolve(&catalog()).unwrap_err();
    assert!(
        errs[0]
            .message
            .starts_with("cannot infer the schema of the parquet source `"),
        "{}",
        errs[0].message
    );
    assert!(errs[0].message.ends_with("`: no .parquet file under it"));

    let json = dir.path().join("a.json");
    std::fs::write(&json, "{\"a\": 1, \"b\": \"x\"}\n").unwrap();
    let df = s
        .read()
        .format("json")
        .load(dir.path().to_str().unwrap())
        .unwrap();
    assert_eq!(
        schema_to_ddl(&df.resolve(&catalog()).unwrap().schema()),
        "a BIGINT, b STRING"
    );
}
