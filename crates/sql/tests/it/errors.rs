//! Exact error texts, rendered with the offending line and a caret.

use pipelines_sql::*;

const FILE: &str = "transformations/flows.sql";

fn errors(text: &str) -> Vec<String> {
    match parse_file(FILE, text) {
        Ok(f) => panic!("parsed: {:#?}", f.statements),
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    }
}

fn error(text: &str) -> String {
    let mut e = errors(text);
    assert_eq!(e.len(), 1, "{e:#?}");
    e.remove(0)
}

#[test]
fn syntax_error_inside_a_query_is_mapped_back_to_the_file() {
    let text = "\
-- silver
CREATE MATERIALIZED VIEW mv AS
SELECT a,
  FROM STREAM(raw)";
    assert_eq!(
        error(text),
        "\
error: transformations/flows.sql:4:3: expected an expression, found `FROM`
  |
4 |   FROM STREAM(raw)
  |   ^"
    );
    let e = &parse_file(FILE, text).unwrap_err()[0];
    assert_eq!((e.line, e.column), (4, 3));
    assert_eq!(e.message, "expected an expression, found `FROM`");
    assert_eq!(e.help, None);
    assert_eq!(e.file, FILE);
}

#[test]
fn syntax_error_on_the_first_line_of_a_query_after_blanked_syntax() {
    // The column counts from the start of the line, past `STREAM(` and the
    // blanked WATERMARK clause.
    let text = "CREATE STREAMING TABLE s AS SELECT * FROM STREAM(r) WATERMARK ts DELAY OF INTERVAL 1 MINUTE WHERE a = = 1";
    assert_eq!(
        error(text),
        "\
error: transformations/flows.sql:1:103: expected an expression, found `=`
  |
1 | CREATE STREAMING TABLE s AS SELECT * FROM STREAM(r) WATERMARK ts DELAY OF INTERVAL 1 MINUTE WHERE a = = 1
  |                                                                                                       ^"
    );
}

#[test]
fn syntax_error_at_the_end_of_a_query() {
    assert_eq!(
        error("CREATE MATERIALIZED VIEW mv AS\n  SELECT * FROM t WHERE\n;"),
        "\
error: transformations/flows.sql:2:24: expected an expression, found the end of the query
  |
2 |   SELECT * FROM t WHERE
  |                        ^"
    );
}

#[test]
fn caret_lines_up_under_tabs() {
    assert_eq!(
        error("CREATE MATERIALIZED VIEW mv AS\n\tSELECT count(* FROM t"),
        "\
error: transformations/flows.sql:2:17: expected `)`, found `FROM`
  |
2 | \tSELECT count(* FROM t
  | \t               ^"
    );
}

#[test]
fn unknown_statement_kinds_list_what_is_supported() {
    let supported = "supported statements: CREATE [OR REFRESH] STREAMING TABLE, \
CREATE [OR REFRESH] MATERIALIZED VIEW, CREATE [TEMPORARY] VIEW, \
CREATE FLOW ... AS INSERT INTO ... BY NAME, CREATE FLOW ... AS AUTO CDC INTO, SET, RESET";
    let text = "\
CREATE TABLE t (a INT);
  DROP TABLE IF EXISTS x;
SELECT 1;
INSERT INTO t SELECT 1";
    assert_eq!(
        errors(text),
        vec![
            format!(
                "\
error: transformations/flows.sql:1:1: `CREATE TABLE` is not supported in a pipeline SQL file; {supported}
  |
1 | CREATE TABLE t (a INT);
  | ^
  help: pipeline tables are `CREATE STREAMING TABLE` or `CREATE MATERIALIZED VIEW`"
            ),
            format!(
                "\
error: transformations/flows.sql:2:3: `DROP TABLE` is not supported in a pipeline SQL file; {supported}
  |
2 |   DROP TABLE IF EXISTS x;
  |   ^"
            ),
            format!(
                "\
error: transformations/flows.sql:3:1: `SELECT` is not supported in a pipeline SQL file; {supported}
  |
3 | SELECT 1;
  | ^
  help: a query must define a dataset: `CREATE MATERIALIZED VIEW name AS SELECT ...` or `CREATE STREAMING TABLE name AS SELECT ...`"
            ),
            format!(
                "\
error: transformations/flows.sql:4:1: `INSERT` is not supported in a pipeline SQL file; {supported}
  |
4 | INSERT INTO t SELECT 1
  | ^
  help: a flow appends to a table: `CREATE FLOW name AS INSERT INTO target BY NAME SELECT ...`"
            ),
        ]
    );
}

#[test]
fn unterminated_string() {
    assert_eq!(
        error(
            "CREATE VIEW v AS SELECT 1;\nCREATE VIEW w AS SELECT 'abc;\nCREATE VIEW x AS SELECT 2;"
        ),
        "\
error: transformations/flows.sql:2:25: unterminated string literal
  |
2 | CREATE VIEW w AS SELECT 'abc;
  |                         ^
  help: close the string with `'`; a `'` inside it is written `\\'` or `''`"
    );
}

#[test]
fn unterminated_comment_and_quoted_identifier() {
    assert_eq!(
        error("CREATE VIEW v AS SELECT 1; /* a /* nested */ comment\nSELECT 2;"),
        "\
error: transformations/flows.sql:1:28: unterminated block comment
  |
1 | CREATE VIEW v AS SELECT 1; /* a /* nested */ comment
  |                            ^
  help: close the comment with `*/` (block comments nest)"
    );
    assert_eq!(
        error("CREATE VIEW v AS SELECT `a FROM t"),
        "\
error: transformations/flows.sql:1:25: unterminated quoted identifier
  |
1 | CREATE VIEW v AS SELECT `a FROM t
  |                         ^
  help: close the identifier with a backtick; a backtick inside it is written ``"
    );
}

#[test]
fn create_flow_without_insert_into() {
    assert_eq!(
        error("CREATE FLOW f AS SELECT * FROM STREAM(raw)"),
        "\
error: transformations/flows.sql:1:18: expected INSERT INTO or AUTO CDC INTO after AS, found `SELECT`
  |
1 | CREATE FLOW f AS SELECT * FROM STREAM(raw)
  |                  ^
  help: a flow writes its query into a target: `CREATE FLOW name [COMMENT '...'] AS INSERT INTO target BY NAME query`"
    );
    assert_eq!(
        error("CREATE FLOW f AS INSERT t BY NAME SELECT 1"),
        "\
error: transformations/flows.sql:1:25: expected INTO after INSERT, found `t`
  |
1 | CREATE FLOW f AS INSERT t BY NAME SELECT 1
  |                         ^"
    );
}

#[test]
fn create_flow_without_by_name() {
    assert_eq!(
        error("CREATE FLOW f AS INSERT INTO events\nSELECT * FROM STREAM(raw)"),
        "\
error: transformations/flows.sql:2:1: expected BY NAME after the flow's target `events`, found `SELECT`
  |
2 | SELECT * FROM STREAM(raw)
  | ^
  help: a flow inserts by column name, as Spark requires: `INSERT INTO events BY NAME SELECT ...`"
    );
}

#[test]
fn missing_as_before_the_query() {
    assert_eq!(
        error("CREATE STREAMING TABLE st\n    SELCT * FROM STREAM(raw)"),
        "\
error: transformations/flows.sql:2:5: expected AS after the table name, found `SELCT`
  |
2 |     SELCT * FROM STREAM(raw)
  |     ^
  help: the statement is `CREATE STREAMING TABLE name [(columns)] [COMMENT '...'] [PARTITIONED BY (...)] [TBLPROPERTIES (...)] [AS query]`"
    );
    assert_eq!(
        error("CREATE MATERIALIZED VIEW mv COMMENT 'x' SELECT 1"),
        "\
error: transformations/flows.sql:1:41: expected AS after the COMMENT clause, found `SELECT`
  |
1 | CREATE MATERIALIZED VIEW mv COMMENT 'x' SELECT 1
  |                                         ^
  help: add `AS` before the query: `CREATE MATERIALIZED VIEW name [(columns)] [COMMENT '...'] [PARTITIONED BY (...)] [TBLPROPERTIES (...)] AS query`"
    );
    assert_eq!(
        error("CREATE MATERIALIZED VIEW mv"),
        "\
error: transformations/flows.sql:1:28: expected AS after the table name, found the end of the statement
  |
1 | CREATE MATERIALIZED VIEW mv
  |                            ^
  help: a materialized view needs its query: `CREATE MATERIALIZED VIEW name [(columns)] [COMMENT '...'] [PARTITIONED BY (...)] [TBLPROPERTIES (...)] AS query`"
    );
    assert_eq!(
        error("CREATE TEMPORARY VIEW v (a, b) SELECT 1, 2"),
        "\
error: transformations/flows.sql:1:32: expected AS after the column list, found `SELECT`
  |
1 | CREATE TEMPORARY VIEW v (a, b) SELECT 1, 2
  |                                ^
  help: add `AS` before the query: `CREATE TEMPORARY VIEW name [(columns)] [COMMENT '...'] AS query`"
    );
}

#[test]
fn every_bad_statement_is_reported() {
    let text = "\
CREATE STREAMING TABLE ok1;
CREATE STREAMING TABLE bad1 AS SELECT * FROM;
CREATE MATERIALIZED VIEW ok2 AS SELECT 1;
CREATE FLOW bad2 AS INSERT INTO ok1 SELECT 1;
SET bad3;
CREATE VIEW ok3 AS SELECT 2";
    let found: Vec<(usize, usize, String)> = parse_file(FILE, text)
        .unwrap_err()
        .into_iter()
        .map(|e| (e.line, e.column, e.message))
        .collect();
    assert_eq!(
        found,
        vec![
            (
                2,
                45,
                "expected identifier, found the end of the query".to_string()
            ),
            (
                4,
                37,
                "expected BY NAME after the flow's target `ok1`, found `SELECT`".to_string()
            ),
            (
                5,
                9,
                "`SET bad3` has no value: a pipeline SET must assign one".to_string()
            ),
        ]
    );
}

#[test]
fn auto_cdc_errors() {
    assert_eq!(
        error("CREATE FLOW f AS AUTO CDC INTO t FROM s KEYS (id)"),
        "\
error: transformations/flows.sql:1:50: AUTO CDC needs a SEQUENCE BY clause
  |
1 | CREATE FLOW f AS AUTO CDC INTO t FROM s KEYS (id)
  |                                                  ^
  help: add `SEQUENCE BY sequence_column`"
    );
    assert_eq!(
        error("CREATE FLOW f AS AUTO CDC INTO t FROM s KEYS (id) SEQUENCE BY a SEQUENCE BY b"),
        "\
error: transformations/flows.sql:1:65: duplicate SEQUENCE BY clause in AUTO CDC
  |
1 | CREATE FLOW f AS AUTO CDC INTO t FROM s KEYS (id) SEQUENCE BY a SEQUENCE BY b
  |                                                                 ^
  help: write SEQUENCE BY once"
    );
    assert_eq!(
        error("CREATE FLOW f AS AUTO CDC INTO t FROM s KEYS (id) APPLY AS DELETE WHEN op == SEQUENCE BY ts"),
        "\
error: transformations/flows.sql:1:77: expected an expression, found the end of the expression
  |
1 | CREATE FLOW f AS AUTO CDC INTO t FROM s KEYS (id) APPLY AS DELETE WHEN op == SEQUENCE BY ts
  |                                                                             ^"
    );
}

#[test]
fn watermark_errors() {
    assert_eq!(
        error("CREATE STREAMING TABLE s AS SELECT * FROM STREAM(r) WATERMARK ts INTERVAL 10 MINUTES"),
        "\
error: transformations/flows.sql:1:66: expected DELAY OF after the watermark column `ts`, found `INTERVAL`
  |
1 | CREATE STREAMING TABLE s AS SELECT * FROM STREAM(r) WATERMARK ts INTERVAL 10 MINUTES
  |                                                                  ^
  help: write `WATERMARK column DELAY OF INTERVAL 10 MINUTES`"
    );
    assert_eq!(
        error("CREATE STREAMING TABLE s AS SELECT * FROM STREAM(r) WATERMARK ts DELAY OF INTERVAL soon"),
        "\
error: transformations/flows.sql:1:84: expected an interval after DELAY OF INTERVAL, found `soon`
  |
1 | CREATE STREAMING TABLE s AS SELECT * FROM STREAM(r) WATERMARK ts DELAY OF INTERVAL soon
  |                                                                                    ^
  help: write e.g. `INTERVAL 10 MINUTES`, `INTERVAL '10' MINUTE` or `INTERVAL '10 minutes'`"
    );
    assert_eq!(
        error("CREATE STREAMING TABLE s AS SELECT * FROM STREAM(r"),
        "\
error: transformations/flows.sql:1:51: expected `)` after `STREAM(r`, found the end of the statement
  |
1 | CREATE STREAMING TABLE s AS SELECT * FROM STREAM(r
  |                                                   ^
  help: write `STREAM(r)` or `STREAM r`"
    );
}

#[test]
fn dataset_clause_errors() {
    assert_eq!(
        error("CREATE MATERIALIZED VIEW mv LOCATION '/x' AS SELECT 1"),
        "\
error: transformations/flows.sql:1:29: the `LOCATION` clause is not supported here
  |
1 | CREATE MATERIALIZED VIEW mv LOCATION '/x' AS SELECT 1
  |                             ^
  help: supported clauses: USING, COMMENT, PARTITIONED BY, TBLPROPERTIES"
    );
    assert_eq!(
        error("CREATE STREAMING TABLE t COMMENT 'a' COMMENT 'b'"),
        "\
error: transformations/flows.sql:1:38: duplicate COMMENT clause
  |
1 | CREATE STREAMING TABLE t COMMENT 'a' COMMENT 'b'
  |                                      ^
  help: write COMMENT once"
    );
    assert_eq!(
        error("CREATE STREAMING TABLE t (a INT DEFAULT 1)"),
        "\
error: transformations/flows.sql:1:33: `DEFAULT` is not supported in a column definition
  |
1 | CREATE STREAMING TABLE t (a INT DEFAULT 1)
  |                                 ^
  help: a column is `name type [NOT NULL] [COMMENT '...']`"
    );
    assert_eq!(
        error("CREATE STREAMING TABLE t PARTITIONED BY (years(ts))"),
        "\
error: transformations/flows.sql:1:42: partition transforms such as `years(...)` are not supported
  |
1 | CREATE STREAMING TABLE t PARTITIONED BY (years(ts))
  |                                          ^
  help: list column names: `PARTITIONED BY (a, b)`"
    );
    assert_eq!(
        error("CREATE FLOW cat.db.f AS INSERT INTO t BY NAME SELECT 1"),
        "\
error: transformations/flows.sql:1:13: a flow's name must be one identifier, not `cat.db.f`
  |
1 | CREATE FLOW cat.db.f AS INSERT INTO t BY NAME SELECT 1
  |             ^
  help: flows belong to the pipeline: drop the catalog and schema"
    );
    assert_eq!(
        error("CREATE TEMPORARY VIEW db.v AS SELECT 1"),
        "\
error: transformations/flows.sql:1:23: a temporary view's name cannot be qualified: `db.v`
  |
1 | CREATE TEMPORARY VIEW db.v AS SELECT 1
  |                       ^
  help: temporary views live in the pipeline; use a one-part name"
    );
}

#[test]
fn set_errors() {
    assert_eq!(
        error("SET spark.sql.shuffle.partitions"),
        "\
error: transformations/flows.sql:1:33: `SET spark.sql.shuffle.partitions` has no value: a pipeline SET must assign one
  |
1 | SET spark.sql.shuffle.partitions
  |                                 ^
  help: write `SET key = value`, e.g. `SET spark.sql.shuffle.partitions = 4`"
    );
    assert_eq!(
        error("SET = 3"),
        "\
error: transformations/flows.sql:1:5: expected a key before `=`
  |
1 | SET = 3
  |     ^
  help: write `SET key = value`, e.g. `SET spark.sql.shuffle.partitions = 4`"
    );
}

#[test]
fn error_fields_and_span() {
    let e = &parse_file("x.sql", "\n\n   CREATE INDEX i ON t (a)").unwrap_err()[0];
    assert_eq!(e.span(), Span::new(3, 4));
    assert_eq!(e.source_line, "   CREATE INDEX i ON t (a)");
    assert!(e.message.starts_with("`CREATE INDEX` is not supported"));
    // A multi-digit line number widens the gutter.
    let text = format!("{}CREATE FLOW f AS SELECT 1", "\n".repeat(99));
    let rendered = error(&text);
    assert!(
        rendered.contains("\n    |\n100 | CREATE FLOW f AS SELECT 1\n    |                  ^\n"),
        "{rendered}"
    );
}

#[test]
fn misspelt_keywords_get_a_suggestion() {
    let supported = "supported statements: CREATE [OR REFRESH] STREAMING TABLE, \
CREATE [OR REFRESH] MATERIALIZED VIEW, CREATE [TEMPORARY] VIEW, \
CREATE FLOW ... AS INSERT INTO ... BY NAME, CREATE FLOW ... AS AUTO CDC INTO, SET, RESET";
    assert_eq!(
        error("CREATE MATERIALZED VIEW mv AS SELECT 1"),
        format!(
            "\
error: transformations/flows.sql:1:1: `CREATE MATERIALZED VIEW` is not supported in a pipeline SQL file; {supported}
  |
1 | CREATE MATERIALZED VIEW mv AS SELECT 1
  | ^
  help: did you mean `MATERIALIZED`?"
        )
    );
    assert_eq!(
        error("CREATE STREAMING TBLE t"),
        "\
error: transformations/flows.sql:1:18: expected TABLE after STREAMING, found `TBLE`
  |
1 | CREATE STREAMING TBLE t
  |                  ^
  help: did you mean `TABLE`?"
    );
    assert_eq!(
        error("ST x = 1"),
        format!(
            "\
error: transformations/flows.sql:1:1: `ST` is not supported in a pipeline SQL file; {supported}
  |
1 | ST x = 1
  | ^
  help: did you mean `SET`?"
        )
    );
    assert_eq!(
        error("- comment\nCREATE STREAMING TABLE t"),
        format!(
            "\
error: transformations/flows.sql:1:1: expected a statement, found `-`
  |
1 | - comment
  | ^
  help: {supported}"
        )
    );
}
