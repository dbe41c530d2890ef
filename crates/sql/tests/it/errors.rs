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

/// The rendering of an error on the first line of `text`, at `column`.
fn on_line_one(text: &str, column: usize, message: &str, help: &str) -> String {
    format!(
        "error: {FILE}:1:{column}: {message}\n  |\n1 | {text}\n  | {}^\n  help: {help}",
        " ".repeat(column - 1)
    )
}

const EXPECTATION_SHAPE: &str =
    "`CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | FAIL UPDATE | QUARANTINE TO table]`";

#[test]
fn sql_table_constraints_are_refused() {
    assert_eq!(
        error("CREATE STREAMING TABLE t (id INT, CONSTRAINT c CHECK (id > 0))"),
        "\
error: transformations/flows.sql:1:48: `CHECK` constraints are not supported in a pipeline dataset's column list
  |
1 | CREATE STREAMING TABLE t (id INT, CONSTRAINT c CHECK (id > 0))
  |                                                ^
  help: write the check as an expectation: `CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | FAIL UPDATE | QUARANTINE TO table]`"
    );
    let not_supported = |kind: &str| {
        format!("`{kind}` constraints are not supported in a pipeline dataset's column list")
    };
    let columns_only = format!(
        "a pipeline dataset's column list declares columns and expectations only; \
         an expectation is {EXPECTATION_SHAPE}"
    );
    let text = "CREATE STREAMING TABLE t (PRIMARY KEY (id), id INT)";
    assert_eq!(
        error(text),
        on_line_one(text, 27, &not_supported("PRIMARY KEY"), &columns_only)
    );
    let text = "CREATE STREAMING TABLE t (id INT, CONSTRAINT pk PRIMARY KEY (id))";
    assert_eq!(
        error(text),
        on_line_one(text, 49, &not_supported("PRIMARY KEY"), &columns_only)
    );
    let text = "CREATE MATERIALIZED VIEW t (id INT, UNIQUE (id)) AS SELECT 1 AS id";
    assert_eq!(
        error(text),
        on_line_one(text, 37, &not_supported("UNIQUE"), &columns_only)
    );
    // A constraint written inside a column definition.
    let text = "CREATE STREAMING TABLE t (id INT CONSTRAINT c EXPECT (id > 0))";
    assert_eq!(
        error(text),
        on_line_one(
            text,
            34,
            "`CONSTRAINT` is not supported in a column definition",
            "an expectation is its own entry of the column list: put a `,` before `CONSTRAINT`"
        )
    );
}

#[test]
fn expectation_syntax_errors() {
    let shape = format!("an expectation is {EXPECTATION_SHAPE}");
    let text = "CREATE STREAMING TABLE t (CONSTRAINT c EXPECT (id > 0) ON VIOLATION IGNORE)";
    assert_eq!(
        error(text),
        "\
error: transformations/flows.sql:1:69: expected DROP ROW, FAIL UPDATE or QUARANTINE TO table after ON VIOLATION, found `IGNORE`
  |
1 | CREATE STREAMING TABLE t (CONSTRAINT c EXPECT (id > 0) ON VIOLATION IGNORE)
  |                                                                     ^
  help: write `ON VIOLATION DROP ROW` (drop the row), `ON VIOLATION FAIL UPDATE` (stop the update) or `ON VIOLATION QUARANTINE TO table` (drop the row into a table); without ON VIOLATION a failing row is kept and counted"
    );
    let text = "CREATE STREAMING TABLE t (CONSTRAINT c EXPECT id > 0)";
    assert_eq!(
        error(text),
        on_line_one(
            text,
            47,
            "expected `(` after EXPECT, found `id`",
            "the condition is written in parentheses: `CONSTRAINT c EXPECT (id IS NOT NULL)`"
        )
    );
    let text = "CREATE STREAMING TABLE t (CONSTRAINT c EXPECT ( ))";
    assert_eq!(
        error(text),
        on_line_one(
            text,
            47,
            "the condition of expectation `c` is empty",
            "write the condition good rows meet: `CONSTRAINT c EXPECT (id IS NOT NULL)`"
        )
    );
    let text = "CREATE STREAMING TABLE t (CONSTRAINT c EXPECT (id > 0";
    assert_eq!(
        error(text),
        on_line_one(text, 47, "this `(` is never closed", "add the matching `)`")
    );
    let text = "CREATE STREAMING TABLE t (CONSTRAINT c (id > 0))";
    assert_eq!(
        error(text),
        on_line_one(
            text,
            40,
            "expected EXPECT after the constraint name `c`, found `(`",
            &shape
        )
    );
    let text = "CREATE STREAMING TABLE t (CONSTRAINT EXPECT (id > 0))";
    assert_eq!(
        error(text),
        on_line_one(
            text,
            38,
            "expected a name after CONSTRAINT, found `EXPECT`",
            &shape
        )
    );
    let text = "CREATE STREAMING TABLE t (CONSTRAINT c EXPECT (id > 0) DROP ROW)";
    assert_eq!(
        error(text),
        on_line_one(
            text,
            56,
            "expected `)` or `,` after expectation `c`, found `DROP`",
            &shape
        )
    );
    // A condition that is not an expression is reported inside it.
    let text = "CREATE STREAMING TABLE t (CONSTRAINT c EXPECT (id > ))";
    let e = &parse_file(FILE, text).unwrap_err()[0];
    assert_eq!(e.line, 1);
    assert!(e.message.starts_with("expected an expression"), "{e}");
}

#[test]
fn expectations_on_views_are_refused() {
    let help = format!(
        "move the CONSTRAINT into the column list of `CREATE STREAMING TABLE` or \
         `CREATE MATERIALIZED VIEW`; an expectation is {EXPECTATION_SHAPE}"
    );
    let text = "CREATE TEMPORARY VIEW v (id, CONSTRAINT c EXPECT (id > 0)) AS SELECT 1 AS id";
    assert_eq!(
        error(text),
        on_line_one(
            text,
            30,
            "expectations on temporary views are not supported; declare them on the streaming \
             table or materialized view that reads the view",
            &help
        )
    );
    let text = "CREATE VIEW v (CONSTRAINT c EXPECT (id > 0)) AS SELECT 1 AS id";
    assert_eq!(
        error(text),
        on_line_one(
            text,
            16,
            "expectations on views are not supported; declare them on the streaming table or \
             materialized view that reads the view",
            &help
        )
    );
}
