//! The SDP statement headers, read from the lexer's tokens; queries and
//! expressions are handed to [`crate::query`].

use pipelines_core::ExpectationAction;

use crate::cursor::{describe, properties, Ctx, Cursor, PResult};
use crate::error::SqlError;
use crate::lexer::{unquote_ident, unquote_string, Kind, Token};
use crate::query;
use crate::statement::*;

/// The statements SDP SQL files may hold, for messages.
pub(crate) const SUPPORTED: &str = "CREATE [OR REFRESH] STREAMING TABLE, \
CREATE [OR REFRESH] MATERIALIZED VIEW, CREATE [TEMPORARY] VIEW, \
CREATE FLOW ... AS INSERT INTO ... BY NAME, CREATE FLOW ... AS AUTO CDC INTO, SET, RESET";

/// Parses one statement (a non-empty run of tokens between `;`s).
pub(crate) fn statement(cx: &Ctx<'_>, toks: &[Token]) -> PResult<Statement> {
    let mut c = Cursor::new(cx, toks);
    let start = c.span_here();
    if c.at_kw("SET") {
        return set(&mut c, start).map(Statement::Set);
    }
    if c.at_kw("RESET") {
        return reset(&mut c, start).map(Statement::Reset);
    }
    if !c.eat_kw("CREATE") {
        return Err(unsupported(&c));
    }
    let mut or_refresh = false;
    let mut or_replace = false;
    if c.at_kw("OR") {
        if c.is_kw(c.peek_at(1), "REFRESH") {
            or_refresh = true;
        } else if c.is_kw(c.peek_at(1), "REPLACE") {
            or_replace = true;
        } else {
            c.i += 1;
            return Err(c.expected("REFRESH or REPLACE after CREATE OR", None));
        }
        c.i += 2;
    }
    let kind_offset = c.here();
    for (first, second) in [
        ("STREAMING", "TABLE"),
        ("MATERIALIZED", "VIEW"),
        ("TEMPORARY", "VIEW"),
        ("TEMP", "VIEW"),
    ] {
        if c.at_kw(first) && !c.is_kw(c.peek_at(1), second) {
            c.i += 1;
            let help = c
                .peek()
                .filter(|t| t.kind == Kind::Word && close_to(c.text(t), second))
                .map(|_| format!("did you mean `{second}`?"));
            return Err(c.expected(&format!("{second} after {first}"), help));
        }
    }
    if c.at_kws(&["STREAMING", "TABLE"]) || c.at_kws(&["MATERIALIZED", "VIEW"]) {
        let streaming = c.at_kw("STREAMING");
        if or_replace {
            let what = if streaming {
                "STREAMING TABLE"
            } else {
                "MATERIALIZED VIEW"
            };
            return Err(cx.err(
                kind_offset,
                format!("`CREATE OR REPLACE {what}` is not supported"),
                Some(format!(
                    "write `CREATE {what}` or `CREATE OR REFRESH {what}`"
                )),
            ));
        }
        c.i += 2;
        return dataset(&mut c, start, streaming);
    }
    if c.at_kw("VIEW") || c.at_kws(&["TEMPORARY", "VIEW"]) || c.at_kws(&["TEMP", "VIEW"]) {
        let temporary = !c.at_kw("VIEW");
        if or_refresh {
            return Err(cx.err(
                kind_offset,
                "`CREATE OR REFRESH` applies to streaming tables and materialized views, not views",
                Some("write `CREATE VIEW` or `CREATE TEMPORARY VIEW`".into()),
            ));
        }
        c.i += if temporary { 2 } else { 1 };
        return view(&mut c, start, temporary).map(Statement::View);
    }
    if c.at_kws(&["GLOBAL", "TEMPORARY", "VIEW"]) {
        return Err(cx.err(
            kind_offset,
            "global temporary views are not supported in a pipeline",
            Some("write `CREATE TEMPORARY VIEW` (visible to the pipeline) or `CREATE VIEW` (published)".into()),
        ));
    }
    if c.at_kw("FLOW") {
        if or_refresh || or_replace {
            return Err(cx.err(
                kind_offset,
                "a flow is declared with `CREATE FLOW`, without OR REFRESH or OR REPLACE",
                None,
            ));
        }
        c.i += 1;
        return flow(&mut c, start).map(Statement::Flow);
    }
    Err(unsupported(&c))
}

/// `word` is a likely misspelling of `keyword` (edit distance 1 or 2).
pub(crate) fn close_to(word: &str, keyword: &str) -> bool {
    let a: Vec<char> = word.to_ascii_uppercase().chars().collect();
    let b: Vec<char> = keyword.chars().collect();
    if a == b || a.len() < 2 {
        return false;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    let distance = prev[b.len()];
    distance <= if b.len() <= 4 { 1 } else { 2 }
}

/// The error for a statement SDP does not support, naming its kind.
fn unsupported(c: &Cursor<'_>) -> Box<SqlError> {
    let Some(first_tok) = c.toks.first() else {
        return c.cx.err(0, "expected a statement", None);
    };
    if first_tok.kind != Kind::Word {
        return c.cx.err(
            first_tok.start,
            format!(
                "expected a statement, found {}",
                describe(c.text(first_tok))
            ),
            Some(format!("supported statements: {SUPPORTED}")),
        );
    }
    const OBJECTS: &[&str] = &[
        "TABLE",
        "VIEW",
        "FUNCTION",
        "SCHEMA",
        "DATABASE",
        "NAMESPACE",
        "CATALOG",
        "INDEX",
        "FLOW",
        "VARIABLE",
        "ROLE",
        "MACRO",
        "TABLES",
        "VIEWS",
        "FUNCTIONS",
        "COLUMNS",
        "PARTITIONS",
        "DATABASES",
        "SCHEMAS",
        "CATALOGS",
        "STREAMING",
        "MATERIALIZED",
    ];
    let words: Vec<String> = c
        .toks
        .iter()
        .take(6)
        .take_while(|t| t.kind == Kind::Word)
        .map(|t| c.text(t).to_ascii_uppercase())
        .collect();
    let kind = match words.first().map(String::as_str) {
        None => c.text(first_tok).to_string(),
        Some(
            "CREATE" | "DROP" | "ALTER" | "SHOW" | "DESCRIBE" | "DESC" | "REFRESH" | "TRUNCATE"
            | "ANALYZE" | "CACHE" | "UNCACHE" | "MSCK" | "REPAIR",
        ) => match words.iter().position(|w| OBJECTS.contains(&w.as_str())) {
            Some(p) => {
                let mut end = p + 1;
                if matches!(words[p].as_str(), "STREAMING" | "MATERIALIZED") && end < words.len() {
                    end += 1;
                }
                words[..end].join(" ")
            }
            None => words[..words.len().min(2)].join(" "),
        },
        Some(first) => first.to_string(),
    };
    let first = words.first().map_or("", String::as_str);
    let hint = match first {
        "INSERT" => Some("a flow appends to a table: `CREATE FLOW name AS INSERT INTO target BY NAME SELECT ...`"),
        "SELECT" | "WITH" | "VALUES" | "FROM" | "TABLE" => Some(
            "a query must define a dataset: `CREATE MATERIALIZED VIEW name AS SELECT ...` or \
             `CREATE STREAMING TABLE name AS SELECT ...`",
        ),
        "CREATE" if kind.ends_with(" TABLE") => {
            Some("pipeline tables are `CREATE STREAMING TABLE` or `CREATE MATERIALIZED VIEW`")
        }
        "APPLY" | "AUTO" => Some(
            "a change feed is applied by a flow: `CREATE FLOW name AS AUTO CDC INTO target FROM ...`",
        ),
        _ => None,
    };
    // A misspelt keyword: the first word, or the one after CREATE [OR ...].
    let typo = if first == "CREATE" {
        let after = words
            .iter()
            .skip(1)
            .find(|w| !matches!(w.as_str(), "OR" | "REFRESH" | "REPLACE"));
        after.and_then(|w| {
            ["STREAMING", "MATERIALIZED", "TEMPORARY", "VIEW", "FLOW"]
                .into_iter()
                .find(|k| close_to(w, k))
                .map(|k| format!("did you mean `{k}`?"))
        })
    } else {
        ["CREATE", "SET", "RESET"]
            .into_iter()
            .find(|k| close_to(first, k))
            .map(|k| format!("did you mean `{k}`?"))
    };
    let hint = typo.or(hint.map(str::to_string));
    c.cx.err(
        first_tok.start,
        format!(
            "`{kind}` is not supported in a pipeline SQL file; supported statements: {SUPPORTED}"
        ),
        hint,
    )
}

/// `SET key = value`, `SET TIME ZONE 'zone'`.
fn set(c: &mut Cursor<'_>, span: Span) -> PResult<Set> {
    let set_tok = c.toks[c.i];
    c.i += 1;
    let help =
        Some("write `SET key = value`, e.g. `SET spark.sql.shuffle.partitions = 4`".to_string());
    if c.at_end() {
        return Err(c
            .cx
            .err(set_tok.start, "`SET` needs a key and a value", help));
    }
    if c.at_kws(&["TIME", "ZONE"]) {
        c.i += 2;
        if let Some(t) = c.peek().filter(|t| t.kind == Kind::Str) {
            if c.i + 1 == c.toks.len() {
                return Ok(Set {
                    span,
                    key: "spark.sql.session.timeZone".into(),
                    value: unquote_string(c.text(t)),
                });
            }
        }
        return Err(c.expected(
            "a time zone string after SET TIME ZONE",
            Some("write `SET TIME ZONE 'UTC'`".into()),
        ));
    }
    if c.at_kw("VAR") || c.at_kw("VARIABLE") || c.at_kw("CATALOG") || c.at_kw("ROLE") {
        let what = c.text(&c.toks[c.i]).to_ascii_uppercase();
        return Err(c.cx.err(
            set_tok.start,
            format!("`SET {what}` is not supported in a pipeline SQL file; supported statements: {SUPPORTED}"),
            None,
        ));
    }
    let key_start = c.i;
    let Some(eq) = c.toks[key_start..]
        .iter()
        .position(|t| t.kind == Kind::Punct && c.text(t) == "=")
        .map(|p| key_start + p)
    else {
        return Err(c.cx.err(
            c.toks.last().map_or(set_tok.end, |t| t.end),
            format!(
                "`SET {}` has no value: a pipeline SET must assign one",
                c.cx.src
                    .slice(c.toks[key_start].start, c.toks[c.toks.len() - 1].end)
                    .trim()
            ),
            help,
        ));
    };
    if eq == key_start {
        return Err(c
            .cx
            .err(c.toks[eq].start, "expected a key before `=`", help));
    }
    let key = single_unquoted(c, &c.toks[key_start..eq]);
    let value = single_unquoted(c, &c.toks[eq + 1..]);
    Ok(Set { span, key, value })
}

/// The text of a run of tokens, trimmed; one quoted token is unquoted.
fn single_unquoted(c: &Cursor<'_>, toks: &[Token]) -> String {
    match toks {
        [] => String::new(),
        [t] if t.kind == Kind::Str => unquote_string(c.text(t)),
        [t] if t.kind == Kind::QuotedIdent => unquote_ident(c.text(t)),
        [first, .., last] | [first @ last] => {
            c.cx.src.slice(first.start, last.end).trim().to_string()
        }
    }
}

/// `RESET` or `RESET key`.
fn reset(c: &mut Cursor<'_>, span: Span) -> PResult<Reset> {
    c.i += 1;
    let rest = &c.toks[c.i..];
    let key = (!rest.is_empty()).then(|| single_unquoted(c, rest));
    Ok(Reset { span, key })
}

/// The clauses that follow a dataset's name, in any order, each once.
#[derive(Default)]
struct Clauses {
    using: Option<Ident>,
    comment: Option<String>,
    partitioned_by: Option<Vec<Ident>>,
    properties: Option<Vec<Property>>,
}

/// Reads `USING`, `COMMENT`, `PARTITIONED BY`, `TBLPROPERTIES` (those allowed)
/// until something else; `after` tracks what was read last, for messages.
fn clauses(
    c: &mut Cursor<'_>,
    out: &mut Clauses,
    allowed: &[&str],
    after: &mut &'static str,
) -> PResult<()> {
    const NOT_SUPPORTED: &[&str] = &[
        "LOCATION",
        "OPTIONS",
        "CLUSTER",
        "CLUSTERED",
        "ROW",
        "STORED",
        "SKEWED",
        "DEFAULT",
        "WITH",
        "SCHEDULE",
        "TRIGGER",
        "MASK",
        "CONSTRAINT",
    ];
    loop {
        let at = c.here();
        let dup = |what: &str| {
            c.cx.err(
                at,
                format!("duplicate {what} clause"),
                Some(format!("write {what} once")),
            )
        };
        if c.at_kw("USING") && allowed.contains(&"USING") {
            if out.using.is_some() {
                return Err(dup("USING"));
            }
            c.i += 1;
            out.using = Some(c.ident("a format name after USING")?);
            *after = "the USING clause";
        } else if c.at_kw("COMMENT") && allowed.contains(&"COMMENT") {
            if out.comment.is_some() {
                return Err(dup("COMMENT"));
            }
            c.i += 1;
            out.comment = Some(c.string("a string after COMMENT")?);
            *after = "the COMMENT clause";
        } else if c.at_kws(&["PARTITIONED", "BY"]) && allowed.contains(&"PARTITIONED BY") {
            if out.partitioned_by.is_some() {
                return Err(dup("PARTITIONED BY"));
            }
            c.i += 2;
            out.partitioned_by = Some(partition_columns(c)?);
            *after = "the PARTITIONED BY clause";
        } else if c.at_kw("TBLPROPERTIES") && allowed.contains(&"TBLPROPERTIES") {
            if out.properties.is_some() {
                return Err(dup("TBLPROPERTIES"));
            }
            c.i += 1;
            out.properties = Some(properties(c, "TBLPROPERTIES")?);
            *after = "the TBLPROPERTIES clause";
        } else if let Some(t) = c.peek().filter(|t| {
            t.kind == Kind::Word
                && (NOT_SUPPORTED
                    .iter()
                    .any(|k| c.text(t).eq_ignore_ascii_case(k))
                    || ["USING", "PARTITIONED", "TBLPROPERTIES"]
                        .iter()
                        .any(|k| c.text(t).eq_ignore_ascii_case(k) && !allowed.contains(k)))
        }) {
            if c.text(t).eq_ignore_ascii_case("WITH")
                && !c.is_punct(c.peek_at(1), "(")
                && !c.is_kw(c.peek_at(1), "SCHEMA")
            {
                return Ok(());
            }
            return Err(c.cx.err(
                t.start,
                format!(
                    "the `{}` clause is not supported here",
                    c.text(t).to_ascii_uppercase()
                ),
                Some(format!("supported clauses: {}", allowed.join(", "))),
            ));
        } else {
            return Ok(());
        }
    }
}

/// `(a, b)` after `PARTITIONED BY`.
fn partition_columns(c: &mut Cursor<'_>) -> PResult<Vec<Ident>> {
    c.expect_punct("(", "after PARTITIONED BY")?;
    let mut cols = Vec::new();
    loop {
        let col = c.ident("a column name")?;
        if c.at_punct(".") {
            return Err(c.cx.err_at(
                col.span,
                "a partition column must be a single identifier",
                Some("name a top-level column of the table".into()),
            ));
        }
        if c.at_punct("(") {
            return Err(c.cx.err_at(
                col.span,
                format!(
                    "partition transforms such as `{}(...)` are not supported",
                    col.value
                ),
                Some("list column names: `PARTITIONED BY (a, b)`".into()),
            ));
        }
        cols.push(col);
        if c.eat_punct(",") {
            continue;
        }
        c.expect_punct(")", "or `,` in the partition column list")?;
        return Ok(cols);
    }
}

/// The shape of an expectation, for messages.
const EXPECTATION_SHAPE: &str =
    "`CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | FAIL UPDATE | QUARANTINE TO table]`";

/// `(col type [NOT NULL] [COMMENT '...'], CONSTRAINT name EXPECT (...), ...)`
/// of a dataset: its columns and its expectations, in any order.
fn table_columns(c: &mut Cursor<'_>) -> PResult<(Vec<ColumnDef>, Vec<Constraint>)> {
    c.i += 1; // (
    let mut cols = Vec::new();
    let mut constraints = Vec::new();
    if c.eat_punct(")") {
        return Ok((cols, constraints));
    }
    const STOP: &[&str] = &[
        "NOT",
        "NULL",
        "COMMENT",
        "DEFAULT",
        "GENERATED",
        "CONSTRAINT",
        "PRIMARY",
        "REFERENCES",
        "CHECK",
        "UNIQUE",
        "MASK",
    ];
    loop {
        if let Some(t) = refused_constraint_at(c) {
            return Err(refused_constraint(c, t));
        }
        if c.at_kw("CONSTRAINT") {
            let constraint = expectation(c)?;
            let name = constraint.name.value.clone();
            constraints.push(constraint);
            if c.eat_punct(",") {
                continue;
            }
            if c.eat_punct(")") {
                return Ok((cols, constraints));
            }
            return Err(c.expected(
                &format!("`)` or `,` after expectation `{name}`"),
                Some(format!("an expectation is {EXPECTATION_SHAPE}")),
            ));
        }
        let name = c.ident("a column name")?;
        // The type: everything up to a column option, `,` or `)` outside
        // parentheses and angle brackets.
        let type_start = c.i;
        let mut depth = 0usize;
        while let Some(t) = c.peek() {
            let s = c.text(t);
            if t.kind == Kind::Punct {
                match s {
                    "(" | "<" => depth += 1,
                    ")" | ">" if depth > 0 => depth -= 1,
                    ")" | "," if depth == 0 => break,
                    _ => {}
                }
            } else if depth == 0
                && t.kind == Kind::Word
                && STOP.iter().any(|k| s.eq_ignore_ascii_case(k))
            {
                break;
            }
            c.i += 1;
        }
        if c.i == type_start {
            return Err(c.expected(&format!("a data type for column `{}`", name.value), None));
        }
        let data_type =
            c.cx.src
                .slice(c.toks[type_start].start, c.toks[c.i - 1].end)
                .to_string();
        let mut col = ColumnDef {
            name,
            data_type,
            not_null: false,
            comment: None,
        };
        loop {
            if c.at_kws(&["NOT", "NULL"]) {
                c.i += 2;
                col.not_null = true;
            } else if c.at_kw("NULL") {
                c.i += 1;
            } else if c.at_kw("COMMENT") {
                c.i += 1;
                col.comment = Some(c.string("a string after COMMENT")?);
            } else if let Some(t) = c.peek().filter(|t| t.kind == Kind::Word) {
                let help = if c.is_kw(Some(t), "CONSTRAINT") {
                    "an expectation is its own entry of the column list: put a `,` before `CONSTRAINT`"
                        .to_string()
                } else {
                    "a column is `name type [NOT NULL] [COMMENT '...']`".to_string()
                };
                return Err(c.cx.err(
                    t.start,
                    format!(
                        "`{}` is not supported in a column definition",
                        c.text(t).to_ascii_uppercase()
                    ),
                    Some(help),
                ));
            } else {
                break;
            }
        }
        cols.push(col);
        if c.eat_punct(",") {
            continue;
        }
        c.expect_punct(")", "or `,` after a column definition")?;
        return Ok((cols, constraints));
    }
}

/// The current token when it starts a SQL table constraint a pipeline does
/// not support: `PRIMARY KEY`, `FOREIGN KEY`, `CHECK (...)`, `UNIQUE (...)`.
fn refused_constraint_at<'a>(c: &Cursor<'a>) -> Option<&'a Token> {
    let t = c.peek()?;
    let next = c.peek_at(1);
    let refused = ((c.is_kw(Some(t), "PRIMARY") || c.is_kw(Some(t), "FOREIGN"))
        && c.is_kw(next, "KEY"))
        || ((c.is_kw(Some(t), "CHECK") || c.is_kw(Some(t), "UNIQUE")) && c.is_punct(next, "("));
    refused.then_some(t)
}

/// The error for a SQL table constraint at `t` (see [`refused_constraint_at`]).
fn refused_constraint(c: &Cursor<'_>, t: &Token) -> Box<SqlError> {
    let word = c.text(t).to_ascii_uppercase();
    let kind = if word == "PRIMARY" || word == "FOREIGN" {
        format!("{word} KEY")
    } else {
        word
    };
    let help = if kind == "CHECK" {
        format!("write the check as an expectation: {EXPECTATION_SHAPE}")
    } else {
        format!(
            "a pipeline dataset's column list declares columns and expectations only; \
             an expectation is {EXPECTATION_SHAPE}"
        )
    };
    c.cx.err(
        t.start,
        format!("`{kind}` constraints are not supported in a pipeline dataset's column list"),
        Some(help),
    )
}

/// `CONSTRAINT name EXPECT (condition) [ON VIOLATION ...]`, at `CONSTRAINT`.
fn expectation(c: &mut Cursor<'_>) -> PResult<Constraint> {
    let span = c.span_here();
    let shape_help = || Some(format!("an expectation is {EXPECTATION_SHAPE}"));
    c.i += 1; // CONSTRAINT
    if let Some(t) = refused_constraint_at(c) {
        return Err(refused_constraint(c, t));
    }
    let named = c
        .peek()
        .is_some_and(|t| matches!(t.kind, Kind::Word | Kind::QuotedIdent))
        && !(c.at_kw("EXPECT") && c.is_punct(c.peek_at(1), "("));
    if !named {
        return Err(c.expected("a name after CONSTRAINT", shape_help()));
    }
    let name = c.ident("a name after CONSTRAINT")?;
    // `CONSTRAINT name PRIMARY KEY (...)`, `CONSTRAINT name CHECK (...)`, ...
    if let Some(t) = c.peek().filter(|t| {
        ["PRIMARY", "FOREIGN", "CHECK", "UNIQUE"]
            .iter()
            .any(|k| c.is_kw(Some(t), k))
    }) {
        return Err(refused_constraint(c, t));
    }
    if !c.eat_kw("EXPECT") {
        return Err(c.expected(
            &format!("EXPECT after the constraint name `{}`", name.value),
            shape_help(),
        ));
    }
    if !c.at_punct("(") {
        return Err(c.expected(
            "`(` after EXPECT",
            Some(format!(
                "the condition is written in parentheses: `CONSTRAINT {} EXPECT (id IS NOT NULL)`",
                name.value
            )),
        ));
    }
    let open = c.i;
    let close = c.skip_parens()?;
    if close == open + 1 {
        return Err(c.cx.err(
            c.toks[open].start,
            format!("the condition of expectation `{}` is empty", name.value),
            Some(format!(
                "write the condition good rows meet: `CONSTRAINT {} EXPECT (id IS NOT NULL)`",
                name.value
            )),
        ));
    }
    let (first, last) = (c.toks[open + 1], c.toks[close - 1]);
    let condition = c.cx.src.slice(first.start, last.end).trim().to_string();
    let condition_span = c.span_of(&first);
    query::check_expr(c.cx, &condition, condition_span)?;
    let mut action = ExpectationAction::Warn;
    let mut quarantine = None;
    if c.at_kw("ON") {
        c.i += 1;
        let actions_help = || {
            Some(
                "write `ON VIOLATION DROP ROW` (drop the row), `ON VIOLATION FAIL UPDATE` (stop \
                 the update) or `ON VIOLATION QUARANTINE TO table` (drop the row into a table); \
                 without ON VIOLATION a failing row is kept and counted"
                    .to_string(),
            )
        };
        if !c.eat_kw("VIOLATION") {
            return Err(c.expected("VIOLATION after ON", actions_help()));
        }
        if c.at_kws(&["DROP", "ROW"]) {
            c.i += 2;
            action = ExpectationAction::Drop;
        } else if c.at_kws(&["FAIL", "UPDATE"]) {
            c.i += 2;
            action = ExpectationAction::Fail;
        } else if c.at_kws(&["QUARANTINE", "TO"]) {
            c.i += 2;
            if !c
                .peek()
                .is_some_and(|t| matches!(t.kind, Kind::Word | Kind::QuotedIdent))
            {
                return Err(c.expected(
                    "a table name after QUARANTINE TO",
                    Some(format!(
                        "name the table or sink that receives the rows: \
                         `ON VIOLATION QUARANTINE TO {}_quarantine`",
                        name.value
                    )),
                ));
            }
            action = ExpectationAction::Drop;
            quarantine = Some(c.name("a table name after QUARANTINE TO")?);
        } else {
            return Err(c.expected(
                "DROP ROW, FAIL UPDATE or QUARANTINE TO table after ON VIOLATION",
                actions_help(),
            ));
        }
    }
    Ok(Constraint {
        span,
        name,
        condition,
        condition_span,
        action,
        quarantine,
    })
}

/// After `CREATE [OR REFRESH] STREAMING TABLE` / `MATERIALIZED VIEW`.
fn dataset(c: &mut Cursor<'_>, span: Span, streaming: bool) -> PResult<Statement> {
    let what = if streaming {
        "STREAMING TABLE"
    } else {
        "MATERIALIZED VIEW"
    };
    let if_not_exists = if c.at_kws(&["IF", "NOT", "EXISTS"]) {
        c.i += 3;
        true
    } else {
        false
    };
    let name = c.name(&format!("a table name after {what}"))?;
    let mut after = "the table name";
    let (columns, constraints) = if c.at_punct("(") {
        after = "the column list";
        table_columns(c)?
    } else {
        (Vec::new(), Vec::new())
    };
    let mut cl = Clauses::default();
    clauses(
        c,
        &mut cl,
        &["USING", "COMMENT", "PARTITIONED BY", "TBLPROPERTIES"],
        &mut after,
    )?;
    let table = TableDef {
        span,
        name,
        if_not_exists,
        columns,
        constraints,
        using: cl.using,
        comment: cl.comment,
        partitioned_by: cl.partitioned_by.unwrap_or_default(),
        properties: cl.properties.unwrap_or_default(),
    };
    let shape = if streaming {
        "CREATE STREAMING TABLE name [(columns)] [COMMENT '...'] [PARTITIONED BY (...)] \
         [TBLPROPERTIES (...)] [AS query]"
    } else {
        "CREATE MATERIALIZED VIEW name [(columns)] [COMMENT '...'] [PARTITIONED BY (...)] \
         [TBLPROPERTIES (...)] AS query"
    };
    if c.at_end() && streaming {
        return Ok(Statement::StreamingTable(StreamingTable {
            table,
            source: None,
        }));
    }
    if c.eat_kw("AS") {
        let q = query_rest(c)?;
        return Ok(if streaming {
            Statement::StreamingTable(StreamingTable {
                table,
                source: Some(StreamingTableSource::Query(q)),
            })
        } else {
            Statement::MaterializedView(MaterializedView { table, query: q })
        });
    }
    if streaming && c.at_kws(&["FLOW", "AUTO", "CDC"]) {
        let cdc_span = c.span_here();
        c.i += 3;
        let cdc = auto_cdc(c, cdc_span)?;
        return Ok(Statement::StreamingTable(StreamingTable {
            table,
            source: Some(StreamingTableSource::AutoCdc(Box::new(cdc))),
        }));
    }
    Err(missing_as(c, after, shape))
}

/// "expected AS after ..., found ..." with a help that fits what was found.
fn missing_as(c: &Cursor<'_>, after: &str, shape: &str) -> Box<SqlError> {
    let starts_query = ["SELECT", "WITH", "FROM", "VALUES", "TABLE"]
        .iter()
        .any(|k| c.at_kw(k))
        || c.at_punct("(");
    let help = if starts_query {
        format!("add `AS` before the query: `{shape}`")
    } else if c.at_end() {
        format!("a materialized view needs its query: `{shape}`")
    } else {
        format!("the statement is `{shape}`")
    };
    c.expected(&format!("AS after {after}"), Some(help))
}

/// The rest of the statement as a query.
fn query_rest(c: &mut Cursor<'_>) -> PResult<Query> {
    if c.at_end() {
        return Err(c.expected("a query after AS", None));
    }
    let q = query::parse(c.cx, &c.toks[c.i..])?;
    c.i = c.toks.len();
    Ok(q)
}

/// After `CREATE [OR REPLACE] [TEMPORARY] VIEW`.
fn view(c: &mut Cursor<'_>, span: Span, temporary: bool) -> PResult<View> {
    if c.at_kws(&["IF", "NOT", "EXISTS"]) {
        c.i += 3;
    }
    let name = c.name("a view name after VIEW")?;
    if temporary && name.parts.len() > 1 {
        return Err(c.cx.err_at(
            name.span,
            format!("a temporary view's name cannot be qualified: `{name}`"),
            Some("temporary views live in the pipeline; use a one-part name".into()),
        ));
    }
    let mut after = "the view name";
    let mut columns = Vec::new();
    if c.eat_punct("(") {
        after = "the column list";
        loop {
            if c.at_kw("CONSTRAINT") {
                let views = if temporary {
                    "temporary views"
                } else {
                    "views"
                };
                return Err(c.cx.err(
                    c.here(),
                    format!(
                        "expectations on {views} are not supported; declare them on the streaming \
                         table or materialized view that reads the view"
                    ),
                    Some(format!(
                        "move the CONSTRAINT into the column list of `CREATE STREAMING TABLE` or \
                         `CREATE MATERIALIZED VIEW`; an expectation is {EXPECTATION_SHAPE}"
                    )),
                ));
            }
            let col = c.ident("a column name")?;
            let comment = if c.eat_kw("COMMENT") {
                Some(c.string("a string after COMMENT")?)
            } else {
                None
            };
            columns.push(ViewColumn { name: col, comment });
            if c.eat_punct(",") {
                continue;
            }
            c.expect_punct(")", "or `,` in the view's column list")?;
            break;
        }
    }
    let mut cl = Clauses::default();
    clauses(c, &mut cl, &["COMMENT", "TBLPROPERTIES"], &mut after)?;
    if !c.eat_kw("AS") {
        let shape = if temporary {
            "CREATE TEMPORARY VIEW name [(columns)] [COMMENT '...'] AS query"
        } else {
            "CREATE VIEW name [(columns)] [COMMENT '...'] [TBLPROPERTIES (...)] AS query"
        };
        return Err(missing_as(c, after, shape));
    }
    let query = query_rest(c)?;
    Ok(View {
        span,
        name,
        temporary,
        columns,
        comment: cl.comment,
        properties: cl.properties.unwrap_or_default(),
        query,
    })
}

/// After `CREATE FLOW`.
fn flow(c: &mut Cursor<'_>, span: Span) -> PResult<Flow> {
    let name = c.name("a flow name after CREATE FLOW")?;
    if name.parts.len() > 1 {
        return Err(c.cx.err_at(
            name.span,
            format!("a flow's name must be one identifier, not `{name}`"),
            Some("flows belong to the pipeline: drop the catalog and schema".into()),
        ));
    }
    let name = Ident::new(name.parts.concat(), name.span);
    let comment = if c.eat_kw("COMMENT") {
        Some(c.string("a string after COMMENT")?)
    } else {
        None
    };
    let shape = "CREATE FLOW name [COMMENT '...'] AS INSERT INTO target BY NAME query";
    if !c.eat_kw("AS") {
        let after = if comment.is_some() {
            "the COMMENT clause"
        } else {
            "the flow name"
        };
        return Err(c.expected(
            &format!("AS after {after}"),
            Some(format!("the statement is `{shape}`")),
        ));
    }
    if c.at_kw("INSERT") {
        let insert = c.here();
        c.i += 1;
        if c.at_kw("OVERWRITE") {
            return Err(c.cx.err(
                insert,
                "`INSERT OVERWRITE` flows are not supported: a flow appends",
                Some(format!("write `{shape}`")),
            ));
        }
        if c.at_kw("ONCE") {
            return Err(c
                .cx
                .err(c.here(), "`INSERT ONCE` flows are not supported", None));
        }
        c.expect_kw("INTO", "after INSERT")?;
        c.eat_kw("TABLE");
        let target = c.name("a target table after INSERT INTO")?;
        if c.at_punct("(") {
            return Err(c.cx.err(
                c.here(),
                "a flow's target cannot have a column list",
                Some(format!(
                    "a flow inserts by column name: `INSERT INTO {target} BY NAME SELECT ...`"
                )),
            ));
        }
        if c.at_kw("PARTITION") {
            return Err(c.cx.err(
                c.here(),
                "a flow's target cannot have a PARTITION spec",
                None,
            ));
        }
        if c.at_kw("IF") {
            return Err(c
                .cx
                .err(c.here(), "IF NOT EXISTS is not supported for flows", None));
        }
        if !c.at_kws(&["BY", "NAME"]) {
            return Err(c.expected(
                &format!("BY NAME after the flow's target `{target}`"),
                Some(format!(
                    "a flow inserts by column name, as Spark requires: `INSERT INTO {target} BY NAME SELECT ...`"
                )),
            ));
        }
        c.i += 2;
        let query = query_rest(c)?;
        return Ok(Flow {
            span,
            name,
            comment,
            target,
            kind: FlowKind::InsertInto(query),
        });
    }
    if c.at_kws(&["AUTO", "CDC"]) {
        let cdc_span = c.span_here();
        c.i += 2;
        if c.at_kw("ONCE") {
            return Err(c
                .cx
                .err(c.here(), "`AUTO CDC ONCE` flows are not supported", None));
        }
        c.expect_kw("INTO", "after AUTO CDC")?;
        let target = c.name("a target table after AUTO CDC INTO")?;
        let cdc = auto_cdc(c, cdc_span)?;
        return Ok(Flow {
            span,
            name,
            comment,
            target,
            kind: FlowKind::AutoCdc(Box::new(cdc)),
        });
    }
    Err(c.expected(
        "INSERT INTO or AUTO CDC INTO after AS",
        Some(format!("a flow writes its query into a target: `{shape}`")),
    ))
}

/// `FROM source KEYS (...) ... SEQUENCE BY ...` after `AUTO CDC INTO target`
/// or a streaming table's `FLOW AUTO CDC`.
fn auto_cdc(c: &mut Cursor<'_>, span: Span) -> PResult<AutoCdc> {
    c.expect_kw("FROM", "and the change feed after AUTO CDC")?;
    let source = cdc_source(c)?;
    let mut keys: Option<Vec<Ident>> = None;
    let mut ignore_null_updates = false;
    let mut delete: Option<SqlExpr> = None;
    let mut truncate: Option<SqlExpr> = None;
    let mut sequence_by: Option<SqlExpr> = None;
    let mut columns: Option<ColumnSelection> = None;
    let mut scd: Option<u8> = None;
    let mut track: Option<ColumnSelection> = None;
    while !c.at_end() {
        let at = c.here();
        let dup = |what: &str| {
            c.cx.err(
                at,
                format!("duplicate {what} clause in AUTO CDC"),
                Some(format!("write {what} once")),
            )
        };
        if c.at_kw("KEYS") {
            if keys.is_some() {
                return Err(dup("KEYS"));
            }
            c.i += 1;
            c.expect_punct("(", "after KEYS")?;
            keys = Some(ident_list(c, "a key column")?);
        } else if c.at_kws(&["IGNORE", "NULL", "UPDATES"]) {
            if ignore_null_updates {
                return Err(dup("IGNORE NULL UPDATES"));
            }
            c.i += 3;
            ignore_null_updates = true;
        } else if c.at_kws(&["APPLY", "AS", "DELETE", "WHEN"]) {
            if delete.is_some() {
                return Err(dup("APPLY AS DELETE WHEN"));
            }
            c.i += 4;
            delete = Some(cdc_expr(c, "a condition after APPLY AS DELETE WHEN")?);
        } else if c.at_kws(&["APPLY", "AS", "TRUNCATE", "WHEN"]) {
            if truncate.is_some() {
                return Err(dup("APPLY AS TRUNCATE WHEN"));
            }
            c.i += 4;
            truncate = Some(cdc_expr(c, "a condition after APPLY AS TRUNCATE WHEN")?);
        } else if c.at_kws(&["SEQUENCE", "BY"]) {
            if sequence_by.is_some() {
                return Err(dup("SEQUENCE BY"));
            }
            c.i += 2;
            sequence_by = Some(cdc_expr(c, "an expression after SEQUENCE BY")?);
        } else if c.at_kw("COLUMNS") {
            if columns.is_some() {
                return Err(dup("COLUMNS"));
            }
            c.i += 1;
            columns = Some(selection(c, "COLUMNS")?);
        } else if c.at_kws(&["STORED", "AS"]) {
            if scd.is_some() {
                return Err(dup("STORED AS"));
            }
            c.i += 2;
            c.expect_kw("SCD", "after STORED AS")?;
            c.expect_kw("TYPE", "after STORED AS SCD")?;
            scd = match c.peek() {
                Some(t) if t.kind == Kind::Number && matches!(c.text(t), "1" | "2") => {
                    c.i += 1;
                    c.text(t).parse().ok()
                }
                _ => return Err(c.expected("1 or 2 after STORED AS SCD TYPE", None)),
            };
        } else if c.at_kws(&["TRACK", "HISTORY", "ON"]) {
            if track.is_some() {
                return Err(dup("TRACK HISTORY ON"));
            }
            c.i += 3;
            track = Some(selection(c, "TRACK HISTORY ON")?);
        } else {
            return Err(c.expected(
                "an AUTO CDC clause",
                Some(
                    "the clauses are KEYS (...), IGNORE NULL UPDATES, APPLY AS DELETE WHEN ..., \
                     APPLY AS TRUNCATE WHEN ..., SEQUENCE BY ..., COLUMNS ..., STORED AS SCD TYPE 1|2, \
                     TRACK HISTORY ON ..."
                        .into(),
                ),
            ));
        }
    }
    let missing = |what: &str, example: &str| {
        c.cx.err(
            c.here(),
            format!("AUTO CDC needs a {what} clause"),
            Some(format!("add `{example}`")),
        )
    };
    let keys = keys.ok_or_else(|| missing("KEYS", "KEYS (id)"))?;
    let sequence_by =
        sequence_by.ok_or_else(|| missing("SEQUENCE BY", "SEQUENCE BY sequence_column"))?;
    Ok(AutoCdc {
        span,
        source,
        keys,
        ignore_null_updates,
        apply_as_delete_when: delete,
        apply_as_truncate_when: truncate,
        sequence_by,
        columns,
        stored_as_scd_type: scd,
        track_history: track,
    })
}

/// `src`, `STREAM src` or `STREAM(src)` after AUTO CDC's `FROM`.
fn cdc_source(c: &mut Cursor<'_>) -> PResult<Read> {
    let what = "the change feed's table after FROM";
    let streaming = c.at_kw("STREAM")
        && (c.is_punct(c.peek_at(1), "(")
            || c.peek_at(1).is_some_and(|t| {
                t.kind == Kind::QuotedIdent || (t.kind == Kind::Word && !c.is_kw(Some(t), "KEYS"))
            }));
    let name = if streaming {
        c.i += 1;
        if c.eat_punct("(") {
            let n = c.name(what)?;
            c.expect_punct(")", &format!("after STREAM({n}"))?;
            n
        } else {
            c.name(what)?
        }
    } else {
        c.name(what)?
    };
    Ok(Read {
        span: name.span,
        source: ReadSource::Table(name),
        streaming,
        options: Vec::new(),
    })
}

/// `a, b)` after an opening parenthesis.
fn ident_list(c: &mut Cursor<'_>, what: &str) -> PResult<Vec<Ident>> {
    let mut out = Vec::new();
    loop {
        out.push(c.ident(what)?);
        if c.eat_punct(",") {
            continue;
        }
        c.expect_punct(")", "or `,` in the column list")?;
        return Ok(out);
    }
}

/// `*`, `* EXCEPT (a, b)`, `(a, b)` or `a, b`.
fn selection(c: &mut Cursor<'_>, clause: &str) -> PResult<ColumnSelection> {
    if c.eat_punct("*") {
        if c.eat_kw("EXCEPT") {
            c.expect_punct("(", &format!("after {clause} * EXCEPT"))?;
            return Ok(ColumnSelection::AllExcept(ident_list(c, "a column name")?));
        }
        return Ok(ColumnSelection::All);
    }
    if c.eat_punct("(") {
        return Ok(ColumnSelection::Only(ident_list(c, "a column name")?));
    }
    let mut out = vec![c.ident(&format!("`*`, `* EXCEPT (...)` or columns after {clause}"))?];
    while c.eat_punct(",") {
        out.push(c.ident("a column name")?);
    }
    Ok(ColumnSelection::Only(out))
}

/// An expression of an AUTO CDC clause: the tokens up to the next clause.
fn cdc_expr(c: &mut Cursor<'_>, what: &str) -> PResult<SqlExpr> {
    let start = c.i;
    let mut depth = 0usize;
    while let Some(t) = c.peek() {
        if c.is_punct(Some(t), "(") {
            depth += 1;
        } else if c.is_punct(Some(t), ")") {
            depth = depth.saturating_sub(1);
        } else if depth == 0
            && (c.at_kws(&["APPLY", "AS"])
                || c.at_kws(&["SEQUENCE", "BY"])
                || c.at_kws(&["STORED", "AS"])
                || c.at_kws(&["TRACK", "HISTORY"])
                || c.at_kws(&["IGNORE", "NULL", "UPDATES"])
                || (c.at_kw("KEYS") && c.is_punct(c.peek_at(1), "("))
                || (c.at_kw("COLUMNS")
                    && c.peek_at(1).is_some_and(|n| {
                        c.is_punct(Some(n), "*")
                            || c.is_punct(Some(n), "(")
                            || matches!(n.kind, Kind::Word | Kind::QuotedIdent)
                    })))
        {
            break;
        }
        c.i += 1;
    }
    if c.i == start {
        return Err(c.expected(what, None));
    }
    let (first, last) = (c.toks[start], c.toks[c.i - 1]);
    let text = c.cx.src.slice(first.start, last.end).to_string();
    let span = c.cx.src.span(first.start);
    query::check_expr(c.cx, &text, span)?;
    Ok(SqlExpr { text, span })
}
