//! No input panics: every prefix and every one-character deletion of a
//! realistic file, random token soup, deep nesting. Results keep their
//! invariants (positions inside the file, `sql` as long as `text`).

use pipelines_sql::*;

const REALISTIC: &str = "\
-- Bronze, silver, gold.
SET spark.sql.shuffle.partitions = 4;
SET pipelines.trigger.interval = '10 seconds';

/* Raw events /* nested */ from files. */
CREATE OR REFRESH STREAMING TABLE bronze (
  id BIGINT NOT NULL COMMENT 'the id',
  ts TIMESTAMP,
  CONSTRAINT valid_id EXPECT (id IS NOT NULL AND (id > 0)) ON VIOLATION DROP ROW,
  payload STRUCT<a: INT, b: ARRAY<STRING>>,
  CONSTRAINT `recent ts` EXPECT (ts > '2020-01-01') ON VIOLATION QUARANTINE TO bad_bronze
)
COMMENT 'raw; as read'
PARTITIONED BY (id)
TBLPROPERTIES ('quality' = 'bronze', retention = 7)
AS SELECT *, 'it''s' AS s, \"dq\\\"x\" AS d
FROM STREAM read_files('/data/in', format => 'json')
  WATERMARK ts DELAY OF INTERVAL '15' MINUTE AS b;

CREATE STREAMING TABLE kafka_raw AS
SELECT CAST(value AS STRING) AS v, timestamp FROM STREAM read_kafka(bootstrapServers => 'h:9092', subscribe => 't')
  WATERMARK timestamp DELAY OF INTERVAL 10 SECONDS;

CREATE TEMPORARY VIEW recent (id COMMENT 'key', n) AS
WITH w AS (SELECT id, count(*) AS n FROM STREAM(bronze) WATERMARK ts DELAY OF INTERVAL '10 minutes'
  GROUP BY id, window(ts, '10 minutes'))
SELECT id, n FROM w WHERE id IN (SELECT id FROM `allow list`);

CREATE MATERIALIZED VIEW gold AS
SELECT r.id, sum(r.n) AS total, window.start FROM recent r
JOIN delta.`/tables/dims` d ON r.id = d.id
GROUP BY r.id, window.start;

CREATE STREAMING TABLE target;
CREATE FLOW append_more COMMENT 'backfill' AS INSERT INTO target BY NAME
SELECT * FROM STREAM(archive) WITH ('maxFilesPerTrigger' = 1) a;

CREATE FLOW users_cdc AS AUTO CDC INTO users
FROM STREAM(cdc.users) KEYS (user_id)
APPLY AS DELETE WHEN operation = 'DELETE'
SEQUENCE BY seq
COLUMNS * EXCEPT (operation, seq)
STORED AS SCD TYPE 2
TRACK HISTORY ON * EXCEPT (city);
RESET;
";

/// Parses and checks the invariants of whatever comes back.
fn check(text: &str) {
    let lines: Vec<&str> = text.split('\n').collect();
    match parse_file("f.sql", text) {
        Ok(file) => {
            for s in &file.statements {
                let q = match s {
                    Statement::StreamingTable(StreamingTable {
                        source: Some(StreamingTableSource::Query(q)),
                        ..
                    })
                    | Statement::MaterializedView(MaterializedView { query: q, .. })
                    | Statement::View(View { query: q, .. })
                    | Statement::Flow(Flow {
                        kind: FlowKind::InsertInto(q),
                        ..
                    }) => q,
                    _ => continue,
                };
                assert_eq!(q.text.lines().count(), q.sql.lines().count(), "{text}");
                for (a, b) in q.text.lines().zip(q.sql.lines()) {
                    assert_eq!(a.chars().count(), b.chars().count(), "{text}");
                }
                assert!(q.parse_ast().is_ok(), "{}", q.sql);
            }
        }
        Err(errors) => {
            assert!(!errors.is_empty());
            for e in &errors {
                assert!(e.line >= 1 && e.line <= lines.len(), "{e}\n---\n{text}");
                assert!(e.column >= 1, "{e}");
                let line = lines[e.line - 1];
                assert_eq!(e.source_line, line.strip_suffix('\r').unwrap_or(line));
                assert!(
                    e.column <= e.source_line.chars().count() + 1,
                    "{e}\n---\n{text}"
                );
                let _ = e.to_string();
            }
        }
    }
}

#[test]
fn the_realistic_file_parses() {
    let file = parse_file("f.sql", REALISTIC).unwrap_or_else(|e| panic!("{}", e[0]));
    assert_eq!(file.statements.len(), 10);
}

#[test]
fn every_prefix() {
    for (i, _) in REALISTIC.char_indices() {
        check(&REALISTIC[..i]);
    }
}

#[test]
fn every_one_character_deletion() {
    let chars: Vec<char> = REALISTIC.chars().collect();
    for i in 0..chars.len() {
        let text: String = chars[..i].iter().chain(&chars[i + 1..]).collect();
        check(&text);
    }
}

#[test]
fn every_suffix() {
    for (i, _) in REALISTIC.char_indices() {
        check(&REALISTIC[i..]);
    }
}

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

#[test]
fn random_token_soup() {
    const PIECES: &[&str] = &[
        "CREATE",
        "OR",
        "REFRESH",
        "STREAMING",
        "TABLE",
        "MATERIALIZED",
        "VIEW",
        "TEMPORARY",
        "FLOW",
        "AS",
        "INSERT",
        "INTO",
        "BY",
        "NAME",
        "AUTO",
        "CDC",
        "FROM",
        "STREAM",
        "KEYS",
        "SEQUENCE",
        "APPLY",
        "DELETE",
        "WHEN",
        "COLUMNS",
        "EXCEPT",
        "STORED",
        "SCD",
        "TYPE",
        "TRACK",
        "HISTORY",
        "ON",
        "SET",
        "RESET",
        "SELECT",
        "WHERE",
        "GROUP",
        "JOIN",
        "WITH",
        "WATERMARK",
        "DELAY",
        "OF",
        "INTERVAL",
        "MINUTES",
        "COMMENT",
        "PARTITIONED",
        "TBLPROPERTIES",
        "USING",
        "NOT",
        "NULL",
        "read_files",
        "t",
        "x.y",
        "`q`",
        "'s'",
        "\"d\"",
        "1",
        "2",
        "1.5",
        "(",
        ")",
        ",",
        ";",
        "=",
        "=>",
        "*",
        ".",
        "<",
        ">",
        "-",
        "+",
        "--",
        "\n",
        "/*",
        "*/",
        "'",
        "`",
        "\"",
        "\\",
        " ",
        "\t",
        "é",
        "🙂",
        "\r\n",
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..3000 {
        let n = 1 + (rng.next() % 40) as usize;
        let text: String = (0..n)
            .map(|_| {
                let p = rng.pick(PIECES);
                if rng.next().is_multiple_of(3) {
                    p.to_string()
                } else {
                    format!("{p} ")
                }
            })
            .collect();
        check(&text);
    }
}

#[test]
fn random_mutations_of_the_realistic_file() {
    let chars: Vec<char> = REALISTIC.chars().collect();
    let alphabet: Vec<char> = "();,'\"`*=<>.-/ \nSTREAMWATERMARK0é".chars().collect();
    let mut rng = Rng(42);
    for _ in 0..1500 {
        let mut text = chars.clone();
        for _ in 0..1 + rng.next() % 4 {
            let at = (rng.next() % text.len() as u64) as usize;
            let c = alphabet[(rng.next() % alphabet.len() as u64) as usize];
            match rng.next() % 3 {
                0 => text[at] = c,
                1 => text.insert(at, c),
                _ => {
                    text.remove(at);
                }
            }
        }
        check(&text.into_iter().collect::<String>());
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    for n in [60, 1000, 100_000] {
        let text = format!(
            "CREATE MATERIALIZED VIEW m AS SELECT {}1{} FROM t",
            "(".repeat(n),
            ")".repeat(n)
        );
        check(&text);
        let text = format!(
            "CREATE MATERIALIZED VIEW m AS SELECT * FROM {}t{}",
            "(".repeat(n),
            ")".repeat(n)
        );
        check(&text);
        let text = format!(
            "CREATE FLOW f AS AUTO CDC INTO t FROM s KEYS (k) SEQUENCE BY {}1",
            "(".repeat(n)
        );
        check(&text);
        let text = format!("CREATE STREAMING TABLE s AS SELECT * FROM STREAM(a) WATERMARK {}ts DELAY OF INTERVAL 1 MINUTE", "-".repeat(n));
        check(&text);
    }
    let e = parse_file(
        "f.sql",
        &format!("CREATE MATERIALIZED VIEW m AS SELECT {}1", "(".repeat(1000)),
    )
    .unwrap_err();
    assert_eq!(e[0].message, "the query is nested too deeply");
}

#[test]
fn odd_inputs() {
    for text in [
        "", ";", ";;;", "--", "/**/", "\n\n", "\u{feff}CREATE STREAMING TABLE t", "STREAM", "CREATE",
        "CREATE OR", "SET", "SET =", "RESET", "CREATE FLOW", "CREATE FLOW f AS", "CREATE FLOW f AS AUTO CDC INTO t FROM",
        "CREATE STREAMING TABLE t AS", "CREATE STREAMING TABLE t (", "CREATE STREAMING TABLE t (a",
        "CREATE STREAMING TABLE t AS SELECT * FROM STREAM", "CREATE STREAMING TABLE t AS SELECT * FROM STREAM(",
        "CREATE STREAMING TABLE t AS SELECT * FROM STREAM(x) WITH (", "CREATE STREAMING TABLE t AS SELECT * FROM x WATERMARK",
        "CREATE STREAMING TABLE t AS SELECT * FROM (SELECT 1) WATERMARK a DELAY OF INTERVAL '1' MINUTE TO SECOND",
        "\r\nCREATE MATERIALIZED VIEW m AS\r\nSELECT a,\r\nFROM t\r\n",
        "CREATE MATERIALIZED VIEW m AS SELECT 'é', `🙂` FROM t WHERE x = 'ü' AND y = = 1",
    ] {
        check(text);
    }
    assert_eq!(
        parse_file("f.sql", " ; -- nothing\n;").unwrap().statements,
        vec![]
    );
}
