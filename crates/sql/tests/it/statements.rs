//! Every statement form, compared whole (spans included). Expected spans are
//! computed from the fixture text by `at`, independently of the crate.

use pipelines_sql::*;

/// The line:column of the `n`th occurrence of `needle` in `text`.
fn nth(text: &str, needle: &str, n: usize) -> Span {
    let (off, _) = text
        .match_indices(needle)
        .nth(n)
        .unwrap_or_else(|| panic!("`{needle}` #{n} not in the text"));
    let before = &text[..off];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    Span::new(line, column)
}

fn at(text: &str, needle: &str) -> Span {
    nth(text, needle, 0)
}

fn parse(text: &str) -> Vec<Statement> {
    match parse_file("t.sql", text) {
        Ok(f) => f.statements,
        Err(errors) => panic!(
            "{}",
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n\n")
        ),
    }
}

fn one(text: &str) -> Statement {
    let mut s = parse(text);
    assert_eq!(s.len(), 1, "{s:#?}");
    s.remove(0)
}

fn ident(text: &str, value: &str) -> Ident {
    Ident::new(value, at(text, value))
}

fn table_read(name: Name, streaming: bool) -> Read {
    Read {
        span: name.span,
        source: ReadSource::Table(name),
        streaming,
        options: vec![],
    }
}

/// The query after `AS ` at its first occurrence, with `sql` and reads given.
fn query(
    text: &str,
    query_text: &str,
    sql: &str,
    reads: Vec<Read>,
    watermarks: Vec<Watermark>,
) -> Query {
    Query {
        text: query_text.to_string(),
        span: at(text, query_text),
        sql: sql.to_string(),
        reads,
        watermarks,
    }
}

#[test]
fn streaming_table_with_every_clause() {
    let text = "\
CREATE OR REFRESH STREAMING TABLE IF NOT EXISTS cat.db.events (
  id BIGINT NOT NULL COMMENT 'the id',
  payload STRUCT<a: INT, b: ARRAY<STRING>>,
  amount DECIMAL(10, 2)
)
USING delta
COMMENT 'raw events'
PARTITIONED BY (day, `hour`)
TBLPROPERTIES ('pipelines.reset.allowed' = 'false', quality.tier = 'bronze', retention = 7)
AS SELECT * FROM STREAM(raw)";
    let expected = Statement::StreamingTable(StreamingTable {
        table: TableDef {
            span: Span::new(1, 1),
            name: Name::new(["cat", "db", "events"], at(text, "cat.db")),
            if_not_exists: true,
            columns: vec![
                ColumnDef {
                    name: ident(text, "id"),
                    data_type: "BIGINT".into(),
                    not_null: true,
                    comment: Some("the id".into()),
                },
                ColumnDef {
                    name: ident(text, "payload"),
                    data_type: "STRUCT<a: INT, b: ARRAY<STRING>>".into(),
                    not_null: false,
                    comment: None,
                },
                ColumnDef {
                    name: ident(text, "amount"),
                    data_type: "DECIMAL(10, 2)".into(),
                    not_null: false,
                    comment: None,
                },
            ],
            constraints: vec![],
            using: Some(ident(text, "delta")),
            comment: Some("raw events".into()),
            partitioned_by: vec![ident(text, "day"), Ident::new("hour", at(text, "`hour`"))],
            properties: vec![
                Property {
                    key: "pipelines.reset.allowed".into(),
                    value: "false".into(),
                    span: at(text, "'pipelines"),
                },
                Property {
                    key: "quality.tier".into(),
                    value: "bronze".into(),
                    span: at(text, "quality"),
                },
                Property {
                    key: "retention".into(),
                    value: "7".into(),
                    span: at(text, "retention"),
                },
            ],
        },
        source: Some(StreamingTableSource::Query(query(
            text,
            "SELECT * FROM STREAM(raw)",
            "SELECT * FROM        raw ",
            vec![table_read(Name::new(["raw"], at(text, "raw)")), true)],
            vec![],
        ))),
    });
    assert_eq!(one(text), expected);
}

#[test]
fn streaming_table_without_a_query() {
    let text = "  CREATE STREAMING TABLE target";
    assert_eq!(
        one(text),
        Statement::StreamingTable(StreamingTable {
            table: TableDef {
                span: Span::new(1, 3),
                name: Name::new(["target"], at(text, "target")),
                if_not_exists: false,
                columns: vec![],
                constraints: vec![],
                using: None,
                comment: None,
                partitioned_by: vec![],
                properties: vec![],
            },
            source: None,
        })
    );
}

#[test]
fn streaming_table_with_its_own_auto_cdc_flow() {
    let text = "CREATE STREAMING TABLE target (id INT)\nFLOW AUTO CDC FROM source KEYS (k1, k2) SEQUENCE BY ts";
    let Statement::StreamingTable(st) = one(text) else {
        panic!()
    };
    assert_eq!(st.table.columns.len(), 1);
    assert_eq!(
        st.source,
        Some(StreamingTableSource::AutoCdc(Box::new(AutoCdc {
            span: at(text, "FLOW"),
            source: table_read(Name::new(["source"], at(text, "source")), false),
            keys: vec![ident(text, "k1"), ident(text, "k2")],
            ignore_null_updates: false,
            apply_as_delete_when: None,
            apply_as_truncate_when: None,
            sequence_by: SqlExpr {
                text: "ts".into(),
                span: at(text, "ts"),
            },
            columns: None,
            stored_as_scd_type: None,
            track_history: None,
        })))
    );
}

#[test]
fn materialized_view_with_columns_cte_join_and_subquery() {
    let text = "\
create or refresh materialized view daily (day DATE, n BIGINT COMMENT 'rows')
  comment 'per day'
as
with recent as (select * from events where ts > now() - interval 1 day)
select date(ts) as day, count(*) as n
from recent r join dims.days d on r.day = d.day
where r.k in (select k from allowed)
group by date(ts)";
    let q = "with recent as (select * from events where ts > now() - interval 1 day)
select date(ts) as day, count(*) as n
from recent r join dims.days d on r.day = d.day
where r.k in (select k from allowed)
group by date(ts)";
    let expected = Statement::MaterializedView(MaterializedView {
        table: TableDef {
            span: Span::new(1, 1),
            name: Name::new(["daily"], at(text, "daily")),
            if_not_exists: false,
            columns: vec![
                ColumnDef {
                    name: Ident::new("day", at(text, "day DATE")),
                    data_type: "DATE".into(),
                    not_null: false,
                    comment: None,
                },
                ColumnDef {
                    name: Ident::new("n", at(text, "n BIGINT")),
                    data_type: "BIGINT".into(),
                    not_null: false,
                    comment: Some("rows".into()),
                },
            ],
            constraints: vec![],
            using: None,
            comment: Some("per day".into()),
            partitioned_by: vec![],
            properties: vec![],
        },
        query: query(
            text,
            q,
            q,
            vec![
                table_read(Name::new(["events"], at(text, "events")), false),
                table_read(Name::new(["dims", "days"], at(text, "dims.days")), false),
                table_read(Name::new(["allowed"], at(text, "allowed")), false),
            ],
            vec![],
        ),
    });
    assert_eq!(one(text), expected);
}

#[test]
fn temporary_and_persisted_views() {
    let text = "\
CREATE TEMPORARY VIEW recent (id COMMENT 'key', v) COMMENT 'last hour' AS SELECT id, v FROM STREAM events;
CREATE VIEW published TBLPROPERTIES ('owner' = 'data') AS SELECT * FROM recent";
    let statements = parse(text);
    assert_eq!(
        statements,
        vec![
            Statement::View(View {
                span: Span::new(1, 1),
                name: Name::new(["recent"], at(text, "recent")),
                temporary: true,
                columns: vec![
                    ViewColumn {
                        name: Ident::new("id", at(text, "id COMMENT")),
                        comment: Some("key".into()),
                    },
                    ViewColumn {
                        name: Ident::new("v", at(text, "v)")),
                        comment: None,
                    },
                ],
                comment: Some("last hour".into()),
                properties: vec![],
                query: query(
                    text,
                    "SELECT id, v FROM STREAM events",
                    "SELECT id, v FROM        events",
                    vec![table_read(Name::new(["events"], at(text, "events")), true)],
                    vec![],
                ),
            }),
            Statement::View(View {
                span: Span::new(2, 1),
                name: Name::new(["published"], at(text, "published")),
                temporary: false,
                columns: vec![],
                comment: None,
                properties: vec![Property {
                    key: "owner".into(),
                    value: "data".into(),
                    span: at(text, "'owner'"),
                }],
                query: query(
                    text,
                    "SELECT * FROM recent",
                    "SELECT * FROM recent",
                    vec![table_read(
                        Name::new(["recent"], nth(text, "recent", 1)),
                        false
                    )],
                    vec![],
                ),
            }),
        ]
    );
    assert_eq!(statements[1].span(), Span::new(2, 1));
}

#[test]
fn insert_into_flow() {
    let text = "CREATE FLOW backfill COMMENT 'from the archive'\nAS INSERT INTO TABLE main.events BY NAME\nSELECT * FROM STREAM(archive)";
    assert_eq!(
        one(text),
        Statement::Flow(Flow {
            span: Span::new(1, 1),
            name: ident(text, "backfill"),
            comment: Some("from the archive".into()),
            target: Name::new(["main", "events"], at(text, "main.events")),
            kind: FlowKind::InsertInto(query(
                text,
                "SELECT * FROM STREAM(archive)",
                "SELECT * FROM        archive ",
                vec![table_read(
                    Name::new(["archive"], at(text, "archive)")),
                    true
                )],
                vec![],
            )),
        })
    );
}

#[test]
fn auto_cdc_flow_with_every_clause() {
    let text = "\
CREATE FLOW users_cdc AS AUTO CDC INTO users
FROM STREAM(cdc.users)
KEYS (user_id, `region`)
IGNORE NULL UPDATES
APPLY AS DELETE WHEN operation = 'DELETE'
APPLY AS TRUNCATE WHEN operation = \"TRUNCATE\"
SEQUENCE BY STRUCT(seq_a, seq_b)
COLUMNS * EXCEPT (operation, seq_a)
STORED AS SCD TYPE 2
TRACK HISTORY ON * EXCEPT (city)";
    assert_eq!(
        one(text),
        Statement::Flow(Flow {
            span: Span::new(1, 1),
            name: ident(text, "users_cdc"),
            comment: None,
            target: Name::new(["users"], at(text, "users\n")),
            kind: FlowKind::AutoCdc(Box::new(AutoCdc {
                span: at(text, "AUTO"),
                source: table_read(Name::new(["cdc", "users"], at(text, "cdc.users")), true),
                keys: vec![
                    ident(text, "user_id"),
                    Ident::new("region", at(text, "`region`"))
                ],
                ignore_null_updates: true,
                apply_as_delete_when: Some(SqlExpr {
                    text: "operation = 'DELETE'".into(),
                    span: at(text, "operation = 'DELETE'"),
                }),
                apply_as_truncate_when: Some(SqlExpr {
                    text: "operation = \"TRUNCATE\"".into(),
                    span: at(text, "operation = \"TRUNCATE\""),
                }),
                sequence_by: SqlExpr {
                    text: "STRUCT(seq_a, seq_b)".into(),
                    span: at(text, "STRUCT"),
                },
                columns: Some(ColumnSelection::AllExcept(vec![
                    Ident::new("operation", at(text, "operation, seq_a")),
                    Ident::new("seq_a", at(text, "seq_a)")),
                ])),
                stored_as_scd_type: Some(2),
                track_history: Some(ColumnSelection::AllExcept(vec![ident(text, "city")])),
            })),
        })
    );
}

#[test]
fn auto_cdc_column_lists_and_sources() {
    let cdc = |text: &str| match one(text) {
        Statement::Flow(Flow {
            kind: FlowKind::AutoCdc(c),
            ..
        }) => *c,
        other => panic!("{other:#?}"),
    };
    // Spark's own form: no STREAM, COLUMNS without parentheses.
    let text =
        "CREATE FLOW f AS AUTO CDC INTO t FROM src KEYS (id) SEQUENCE BY ts COLUMNS id, name";
    let c = cdc(text);
    assert_eq!(
        c.source,
        table_read(Name::new(["src"], at(text, "src")), false)
    );
    assert_eq!(
        c.columns,
        Some(ColumnSelection::Only(vec![
            Ident::new("id", at(text, "id, name")),
            ident(text, "name")
        ]))
    );
    let text = "CREATE FLOW f AS AUTO CDC INTO t FROM STREAM src KEYS (id) SEQUENCE BY ts COLUMNS (a, b) STORED AS SCD TYPE 1 TRACK HISTORY ON (a)";
    let c = cdc(text);
    assert_eq!(
        c.source,
        table_read(Name::new(["src"], at(text, "src")), true)
    );
    assert_eq!(
        c.columns,
        Some(ColumnSelection::Only(vec![
            ident(text, "a"),
            ident(text, "b")
        ]))
    );
    assert_eq!(c.stored_as_scd_type, Some(1));
    assert_eq!(
        c.track_history,
        Some(ColumnSelection::Only(vec![Ident::new("a", at(text, "a)"))]))
    );
    let text = "CREATE FLOW f AS AUTO CDC INTO t FROM STREAM(src) SEQUENCE BY ts KEYS (id) COLUMNS * TRACK HISTORY ON *";
    let c = cdc(text);
    assert_eq!(c.columns, Some(ColumnSelection::All));
    assert_eq!(c.track_history, Some(ColumnSelection::All));
}

#[test]
fn set_and_reset() {
    let text = "\
SET spark.sql.shuffle.partitions = 4;
SET pipelines.trigger.interval = '10 seconds' ;
SET `my.key` = \"a value\";
SET a.b=c d;
SET TIME ZONE 'UTC';
RESET spark.sql.shuffle.partitions;
RESET";
    let set = |line, key: &str, value: &str| {
        Statement::Set(Set {
            span: Span::new(line, 1),
            key: key.into(),
            value: value.into(),
        })
    };
    assert_eq!(
        parse(text),
        vec![
            set(1, "spark.sql.shuffle.partitions", "4"),
            set(2, "pipelines.trigger.interval", "10 seconds"),
            set(3, "my.key", "a value"),
            set(4, "a.b", "c d"),
            set(5, "spark.sql.session.timeZone", "UTC"),
            Statement::Reset(Reset {
                span: Span::new(6, 1),
                key: Some("spark.sql.shuffle.partitions".into()),
            }),
            Statement::Reset(Reset {
                span: Span::new(7, 1),
                key: None,
            }),
        ]
    );
}

fn the_query(text: &str) -> Query {
    match one(text) {
        Statement::StreamingTable(StreamingTable {
            source: Some(StreamingTableSource::Query(q)),
            ..
        })
        | Statement::MaterializedView(MaterializedView { query: q, .. })
        | Statement::View(View { query: q, .. }) => q,
        Statement::Flow(Flow {
            kind: FlowKind::InsertInto(q),
            ..
        }) => q,
        other => panic!("{other:#?}"),
    }
}

#[test]
fn streaming_reads_table_functions_and_path_tables() {
    let text = "\
CREATE STREAMING TABLE t AS
SELECT * FROM STREAM read_files('/data/in', format => 'json', header => true) AS f
JOIN STREAM(read_kafka(bootstrapServers => 'localhost:9092', subscribe => 'topic')) k ON f.id = k.id
LEFT JOIN read_files('/dims', 'csv') d ON f.d = d.d
CROSS JOIN delta.`/tables/x` x, STREAM parquet.`/p` WITH ('maxFilesPerTrigger' = 1) p";
    let q = the_query(text);
    let function = |name: &str, positional: &[&str], named: &[(&str, &str)]| {
        ReadSource::TableFunction(TableFunction {
            name: name.into(),
            positional_args: positional.iter().map(|s| s.to_string()).collect(),
            named_args: named
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        })
    };
    assert_eq!(
        q.reads,
        vec![
            Read {
                source: function(
                    "read_files",
                    &["/data/in"],
                    &[("format", "json"), ("header", "true")]
                ),
                streaming: true,
                options: vec![],
                span: at(text, "read_files('/data"),
            },
            Read {
                source: function(
                    "read_kafka",
                    &[],
                    &[
                        ("bootstrapServers", "localhost:9092"),
                        ("subscribe", "topic")
                    ]
                ),
                streaming: true,
                options: vec![],
                span: at(text, "read_kafka"),
            },
            Read {
                source: function("read_files", &["/dims", "csv"], &[]),
                streaming: false,
                options: vec![],
                span: at(text, "read_files('/dims"),
            },
            Read {
                source: function("delta", &["/tables/x"], &[]),
                streaming: false,
                options: vec![],
                span: at(text, "delta"),
            },
            Read {
                source: function("parquet", &["/p"], &[]),
                streaming: true,
                options: vec![Property {
                    key: "maxFilesPerTrigger".into(),
                    value: "1".into(),
                    span: at(text, "'maxFiles"),
                }],
                span: at(text, "parquet"),
            },
        ]
    );
    // `STREAM`, `STREAM(` / `)` and `WITH (...)` (31 characters) are blanked.
    let last = format!(
        "CROSS JOIN delta.`/tables/x` x,        parquet.`/p`{}p",
        " ".repeat(1 + 31 + 1)
    );
    assert_eq!(
        q.sql,
        format!(
            "\
SELECT * FROM        read_files('/data/in', format => 'json', header => true) AS f
JOIN        read_kafka(bootstrapServers => 'localhost:9092', subscribe => 'topic')  k ON f.id = k.id
LEFT JOIN read_files('/dims', 'csv') d ON f.d = d.d
{last}"
        )
    );
    assert!(q.parse_ast().is_ok());
}

#[test]
fn watermarks() {
    let text = "\
CREATE STREAMING TABLE t AS
SELECT * FROM STREAM(clicks) WATERMARK click_time DELAY OF INTERVAL 15 MINUTES AS c
JOIN STREAM impressions WATERMARK impression_time DELAY OF INTERVAL '2' HOUR i
  ON c.ad = i.ad
JOIN (SELECT * FROM STREAM views) WATERMARK cast(ts AS TIMESTAMP) DELAY OF INTERVAL '10 seconds' v
  ON v.ad = c.ad
JOIN plain WATERMARK t DELAY OF INTERVAL 1 HOUR 30 MINUTES ON plain.ad = c.ad";
    let q = the_query(text);
    let name = |needle: &str, value: &str| Some(Name::new([value], at(text, needle)));
    assert_eq!(
        q.watermarks,
        vec![
            Watermark {
                span: at(text, "WATERMARK click_time"),
                relation: name("clicks", "clicks"),
                column: "click_time".into(),
                delay: "15 minutes".into(),
                delay_text: "INTERVAL 15 MINUTES".into(),
                alias: Some("c".into()),
            },
            Watermark {
                span: at(text, "WATERMARK impression_time"),
                relation: name("impressions", "impressions"),
                column: "impression_time".into(),
                delay: "2 hour".into(),
                delay_text: "INTERVAL '2' HOUR".into(),
                alias: Some("i".into()),
            },
            Watermark {
                span: at(text, "WATERMARK cast"),
                relation: None,
                column: "cast(ts AS TIMESTAMP)".into(),
                delay: "10 seconds".into(),
                delay_text: "INTERVAL '10 seconds'".into(),
                alias: Some("v".into()),
            },
            Watermark {
                span: at(text, "WATERMARK t "),
                relation: name("plain WATERMARK", "plain"),
                column: "t".into(),
                delay: "1 hour 30 minutes".into(),
                delay_text: "INTERVAL 1 HOUR 30 MINUTES".into(),
                alias: None,
            },
        ]
    );
    assert_eq!(
        q.reads,
        vec![
            table_read(Name::new(["clicks"], at(text, "clicks")), true),
            table_read(Name::new(["impressions"], at(text, "impressions")), true),
            table_read(Name::new(["views"], at(text, "views")), true),
            table_read(Name::new(["plain"], at(text, "plain WATERMARK")), false),
        ]
    );
    // Every line keeps its length: positions in `sql` are positions in `text`.
    for (a, b) in q.text.lines().zip(q.sql.lines()) {
        assert_eq!(a.chars().count(), b.chars().count(), "{b}");
    }
    assert!(!q.sql.contains("WATERMARK") && !q.sql.contains("STREAM"));
    assert!(q.parse_ast().is_ok());
}

#[test]
fn cte_names_are_not_reads_and_stream_as_a_word_is_a_table() {
    let text = "CREATE MATERIALIZED VIEW m AS WITH stream AS (SELECT * FROM STREAM(src)) SELECT * FROM stream WHERE stream.x > 0";
    let q = the_query(text);
    assert_eq!(
        q.reads,
        vec![table_read(Name::new(["src"], at(text, "src")), true)]
    );
    let text = "CREATE MATERIALIZED VIEW m AS SELECT * FROM STREAM(`raw events`) JOIN STREAM `cat`.db.t USING (k)";
    let q = the_query(text);
    assert_eq!(
        q.reads,
        vec![
            table_read(Name::new(["raw events"], at(text, "`raw events`")), true),
            table_read(Name::new(["cat", "db", "t"], at(text, "`cat`")), true),
        ]
    );
    let text = "CREATE MATERIALIZED VIEW m AS SELECT stream FROM stream WHERE x IN (SELECT x FROM STREAM(s2))";
    let q = the_query(text);
    assert_eq!(
        q.reads,
        vec![
            table_read(Name::new(["stream"], nth(text, "stream", 1)), false),
            table_read(Name::new(["s2"], at(text, "s2")), true),
        ]
    );
}

#[test]
fn spark_sql_in_queries() {
    let text = "\
CREATE MATERIALIZED VIEW w AS
SELECT window.start, window.end, `user id`, count(*) AS n, transform(xs, x -> x + 1) AS ys,
       extract(year FROM ts) AS y, a IS DISTINCT FROM b AS d, 'it\\'s' AS s, \"a string\" AS q
FROM STREAM(clicks) LATERAL VIEW explode(tags) t AS tag
GROUP BY window(ts, '10 minutes'), `user id`";
    let q = the_query(text);
    assert_eq!(
        q.reads,
        vec![table_read(Name::new(["clicks"], at(text, "clicks")), true)]
    );
}

#[test]
fn a_file_of_many_statements() {
    let text = "\
-- Bronze: raw events.
/* settings apply to what follows */
SET spark.sql.shuffle.partitions = 8;

CREATE STREAMING TABLE bronze AS SELECT *, 'a;b' AS semi FROM STREAM(raw); -- trailing; comment
;;
SET pipelines.trigger.interval = '1 minute';
/* a ; in a comment */ CREATE MATERIALIZED VIEW silver AS SELECT `x;y` FROM bronze;
-- the end
";
    let statements = parse(text);
    let kinds: Vec<(&str, Span)> = statements
        .iter()
        .map(|s| {
            let kind = match s {
                Statement::Set(_) => "set",
                Statement::StreamingTable(_) => "st",
                Statement::MaterializedView(_) => "mv",
                _ => "other",
            };
            (kind, s.span())
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("set", Span::new(3, 1)),
            ("st", Span::new(5, 1)),
            ("set", Span::new(7, 1)),
            ("mv", at(text, "CREATE MATERIALIZED")),
        ]
    );
    let Statement::StreamingTable(st) = &statements[1] else {
        panic!()
    };
    let Some(StreamingTableSource::Query(q)) = &st.source else {
        panic!()
    };
    assert_eq!(q.text, "SELECT *, 'a;b' AS semi FROM STREAM(raw)");
}

#[test]
fn names_display_with_quotes_where_needed() {
    assert_eq!(
        Name::new(["a", "b c", "x`y"], Span::default()).to_string(),
        "a.`b c`.`x``y`"
    );
    assert_eq!(Span::new(3, 7).to_string(), "3:7");
}

#[test]
fn expectations_in_a_streaming_table_column_list() {
    let text = "\
CREATE OR REFRESH STREAMING TABLE orders (
  id BIGINT,
  CONSTRAINT valid_id EXPECT (id IS NOT NULL),
  CONSTRAINT positive EXPECT ( amount > 0 ) ON VIOLATION DROP ROW,
  amount DECIMAL(10, 2) NOT NULL,
  CONSTRAINT has_ts EXPECT (ts IS NOT NULL) on violation fail update,
  CONSTRAINT `known kind` EXPECT (kind IN ('a', 'b') AND (n > 1)) ON VIOLATION QUARANTINE TO bad_orders
) AS SELECT * FROM STREAM(raw_orders)";
    let Statement::StreamingTable(st) = one(text) else {
        panic!()
    };
    assert_eq!(
        st.table.columns,
        vec![
            ColumnDef {
                name: Ident::new("id", at(text, "id BIGINT")),
                data_type: "BIGINT".into(),
                not_null: false,
                comment: None,
            },
            ColumnDef {
                name: Ident::new("amount", at(text, "amount DECIMAL")),
                data_type: "DECIMAL(10, 2)".into(),
                not_null: true,
                comment: None,
            },
        ]
    );
    assert_eq!(
        st.table.constraints,
        vec![
            Constraint {
                span: at(text, "CONSTRAINT valid_id"),
                name: ident(text, "valid_id"),
                condition: "id IS NOT NULL".into(),
                condition_span: at(text, "id IS NOT NULL"),
                action: pipelines_core::ExpectationAction::Warn,
                quarantine: None,
            },
            Constraint {
                span: at(text, "CONSTRAINT positive"),
                name: ident(text, "positive"),
                condition: "amount > 0".into(),
                condition_span: at(text, "amount > 0"),
                action: pipelines_core::ExpectationAction::Drop,
                quarantine: None,
            },
            Constraint {
                span: at(text, "CONSTRAINT has_ts"),
                name: ident(text, "has_ts"),
                condition: "ts IS NOT NULL".into(),
                condition_span: at(text, "ts IS NOT NULL"),
                action: pipelines_core::ExpectationAction::Fail,
                quarantine: None,
            },
            Constraint {
                span: at(text, "CONSTRAINT `known kind`"),
                name: Ident::new("known kind", at(text, "`known kind`")),
                condition: "kind IN ('a', 'b') AND (n > 1)".into(),
                condition_span: at(text, "kind IN"),
                action: pipelines_core::ExpectationAction::Drop,
                quarantine: Some(Name::new(["bad_orders"], at(text, "bad_orders"))),
            },
        ]
    );
    assert!(matches!(st.source, Some(StreamingTableSource::Query(_))));
}

#[test]
fn a_column_list_of_expectations_only() {
    let text = "\
CREATE MATERIALIZED VIEW totals (
  CONSTRAINT non_negative EXPECT (
    total >= 0 -- refunds are separate
    OR total IS NULL
  ) ON VIOLATION FAIL UPDATE
)
COMMENT 'per customer'
AS SELECT customer, sum(amount) AS total FROM orders GROUP BY customer";
    let Statement::MaterializedView(mv) = one(text) else {
        panic!()
    };
    assert_eq!(mv.table.columns, vec![]);
    assert_eq!(
        mv.table.constraints,
        vec![Constraint {
            span: at(text, "CONSTRAINT"),
            name: ident(text, "non_negative"),
            condition: "total >= 0 -- refunds are separate\n    OR total IS NULL".into(),
            condition_span: at(text, "total >="),
            action: pipelines_core::ExpectationAction::Fail,
            quarantine: None,
        }]
    );
    assert_eq!(mv.table.comment.as_deref(), Some("per customer"));
    // A streaming table without a query may declare expectations too, and a
    // column named like a constraint keyword is a column.
    let text = "CREATE STREAMING TABLE target (unique INT, CONSTRAINT c EXPECT (n > 0))";
    let Statement::StreamingTable(st) = one(text) else {
        panic!()
    };
    assert_eq!(st.source, None);
    assert_eq!(st.table.columns.len(), 1);
    assert_eq!(st.table.columns[0].name.value, "unique");
    assert_eq!(st.table.constraints.len(), 1);
    assert_eq!(st.table.constraints[0].condition, "n > 0");
}
