//! Queries: SDP-only syntax blanked out (same characters, so every position
//! is kept), the result checked with sqlparser, and the reads listed.

use std::ops::ControlFlow;

use sqlparser::ast::{
    self, FunctionArg, FunctionArgExpr, ObjectName, ObjectNamePart, TableFactor, Visit, Visitor,
};
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Location, Token as SqlToken, Tokenizer};

use crate::cursor::{describe, properties, Ctx, Cursor, PResult};
use crate::lexer::{unquote_string, Kind, Token};
use crate::statement::*;
use crate::SparkDialect;

/// The formats whose `` format.`path` `` names a path rather than a table.
pub(crate) const PATH_FORMATS: &[&str] = &[
    "delta",
    "parquet",
    "json",
    "csv",
    "text",
    "orc",
    "avro",
    "binaryfile",
];

/// Words that end a relation rather than alias it.
const STOP: &[&str] = &[
    "WHERE",
    "GROUP",
    "HAVING",
    "ORDER",
    "LIMIT",
    "JOIN",
    "INNER",
    "LEFT",
    "RIGHT",
    "FULL",
    "CROSS",
    "NATURAL",
    "SEMI",
    "ANTI",
    "ON",
    "USING",
    "UNION",
    "INTERSECT",
    "EXCEPT",
    "MINUS",
    "WINDOW",
    "LATERAL",
    "PIVOT",
    "UNPIVOT",
    "TABLESAMPLE",
    "SORT",
    "CLUSTER",
    "DISTRIBUTE",
    "QUALIFY",
    "OFFSET",
    "WATERMARK",
    "WITH",
    "SELECT",
    "FROM",
    "AS",
    "OUTER",
];

/// Interval units of Spark's `INTERVAL value unit` syntax.
const UNITS: &[&str] = &[
    "YEAR",
    "YEARS",
    "MONTH",
    "MONTHS",
    "WEEK",
    "WEEKS",
    "DAY",
    "DAYS",
    "HOUR",
    "HOURS",
    "MINUTE",
    "MINUTES",
    "SECOND",
    "SECONDS",
    "MILLISECOND",
    "MILLISECONDS",
    "MICROSECOND",
    "MICROSECONDS",
    "NANOSECOND",
    "NANOSECONDS",
];

/// A relation the scan recognised, to match with sqlparser's.
struct Mark {
    name: Name,
    streaming: bool,
    options: Vec<Property>,
    matched: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Clause {
    None,
    Select,
    From,
    Other,
}

/// One level of parentheses.
struct Frame {
    /// A `SELECT` was seen at this level (the top level is a query).
    in_query: bool,
    clause: Clause,
    /// The `(` stood where a relation goes: a subquery or nested join.
    relation_paren: bool,
}

struct Scan<'a> {
    c: Cursor<'a>,
    blanks: Vec<(usize, usize)>,
    marks: Vec<Mark>,
    watermarks: Vec<Watermark>,
    frames: Vec<Frame>,
    expect_relation: bool,
}

/// Parses a query (the non-empty tokens that follow `AS`, up to the end of
/// the statement).
pub(crate) fn parse(cx: &Ctx<'_>, toks: &[Token]) -> PResult<Query> {
    let (Some(first), Some(last)) = (toks.first(), toks.last()) else {
        return Err(cx.err(0, "expected a query", None));
    };
    let text = cx.src.slice(first.start, last.end);
    let span = cx.src.span(first.start);
    let mut scan = Scan {
        c: Cursor::new(cx, toks),
        blanks: Vec::new(),
        marks: Vec::new(),
        watermarks: Vec::new(),
        frames: vec![Frame {
            in_query: true,
            clause: Clause::None,
            relation_paren: false,
        }],
        expect_relation: false,
    };
    scan.run()?;
    let sql: String = text
        .char_indices()
        .map(|(i, ch)| {
            let o = first.start + i;
            let blank =
                ch != '\n' && ch != '\r' && scan.blanks.iter().any(|&(s, e)| s <= o && o < e);
            if blank {
                ' '
            } else {
                ch
            }
        })
        .collect();
    let ast = parse_sql(cx, &sql, span)?;
    let reads = reads(&ast, span, &mut scan.marks);
    Ok(Query {
        text: text.to_string(),
        span,
        sql,
        reads,
        watermarks: scan.watermarks,
    })
}

impl Scan<'_> {
    fn top(&mut self) -> &mut Frame {
        if self.frames.is_empty() {
            self.frames.push(Frame {
                in_query: true,
                clause: Clause::None,
                relation_paren: false,
            });
        }
        let last = self.frames.len() - 1;
        &mut self.frames[last]
    }

    fn kw(&self, t: Option<&Token>) -> Option<String> {
        t.filter(|t| t.kind == Kind::Word)
            .map(|t| self.c.text(t).to_ascii_uppercase())
    }

    fn run(&mut self) -> PResult<()> {
        while let Some(t) = self.c.peek() {
            if self.expect_relation {
                self.expect_relation = false;
                if self.relation()? {
                    continue;
                }
            }
            let text = self.c.text(t);
            match t.kind {
                Kind::Punct if text == "(" => {
                    self.frames.push(Frame {
                        in_query: false,
                        clause: Clause::None,
                        relation_paren: false,
                    });
                }
                Kind::Punct if text == ")" => {
                    let popped = if self.frames.len() > 1 {
                        self.frames.pop()
                    } else {
                        None
                    };
                    if popped.is_some_and(|f| f.relation_paren) {
                        self.c.i += 1;
                        self.after_relation(None, false, false)?;
                        continue;
                    }
                }
                Kind::Punct if text == "," && self.top().clause == Clause::From => {
                    self.expect_relation = true;
                }
                Kind::Word => {
                    let word = text.to_ascii_uppercase();
                    match word.as_str() {
                        "SELECT" => {
                            let top = self.top();
                            top.in_query = true;
                            top.clause = Clause::Select;
                        }
                        "FROM" => {
                            let prev = self
                                .c
                                .i
                                .checked_sub(1)
                                .and_then(|p| self.kw(self.c.toks.get(p)));
                            if self.top().in_query && prev.as_deref() != Some("DISTINCT") {
                                self.top().clause = Clause::From;
                                self.expect_relation = true;
                            }
                        }
                        "JOIN" if self.top().in_query => {
                            self.top().clause = Clause::From;
                            self.expect_relation = true;
                        }
                        "LATERAL" if self.c.is_kw(self.c.peek_at(1), "VIEW") => {
                            self.top().clause = Clause::Other;
                        }
                        "WHERE" | "GROUP" | "HAVING" | "ORDER" | "LIMIT" | "WINDOW" | "QUALIFY"
                        | "UNION" | "INTERSECT" | "EXCEPT" | "MINUS" | "SORT" | "CLUSTER"
                        | "DISTRIBUTE" | "OFFSET" => {
                            self.top().clause = Clause::Other;
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
            self.c.i += 1;
        }
        Ok(())
    }

    fn is_name_start(&self, t: Option<&Token>) -> bool {
        match t {
            Some(t) if t.kind == Kind::QuotedIdent => true,
            Some(t) if t.kind == Kind::Word => {
                let w = self.c.text(t).to_ascii_uppercase();
                !STOP.contains(&w.as_str()) && !matches!(w.as_str(), "VALUES" | "TABLE" | "UNNEST")
            }
            _ => false,
        }
    }

    /// A relation where one goes; false when the token is something else.
    fn relation(&mut self) -> PResult<bool> {
        let t = self.c.peek();
        if self.c.is_punct(t, "(") {
            self.frames.push(Frame {
                in_query: false,
                clause: Clause::None,
                relation_paren: true,
            });
            self.c.i += 1;
            let next = self.kw(self.c.peek());
            let subquery = matches!(
                next.as_deref(),
                Some("SELECT" | "WITH" | "VALUES" | "FROM" | "TABLE")
            );
            if !subquery {
                self.expect_relation = true;
            }
            return Ok(true);
        }
        if self.c.is_kw(t, "LATERAL") {
            self.c.i += 1;
            self.expect_relation = true;
            return Ok(true);
        }
        let next = self.c.peek_at(1);
        if self.c.is_kw(t, "STREAM") && (self.c.is_punct(next, "(") || self.is_name_start(next)) {
            self.stream_relation()?;
            return Ok(true);
        }
        if self.is_name_start(t) {
            let name = self.c.name("a table name")?;
            let function = self.c.at_punct("(");
            if function {
                self.c.skip_parens()?;
            }
            self.after_relation(Some(name), false, function)?;
            return Ok(true);
        }
        Ok(false)
    }

    fn blank(&mut self, t: &Token) {
        self.blanks.push((t.start, t.end));
    }

    /// `STREAM x`, `STREAM(x)`, `STREAM f(...)`, `STREAM(f(...))`.
    fn stream_relation(&mut self) -> PResult<()> {
        let stream = self.c.toks[self.c.i];
        self.blank(&stream);
        self.c.i += 1;
        let (name, function) = if self.c.at_punct("(") {
            let open = self.c.toks[self.c.i];
            self.blank(&open);
            self.c.i += 1;
            let name = self.c.name("a table name after `STREAM(`")?;
            let function = self.c.at_punct("(");
            if function {
                self.c.skip_parens()?;
            }
            match self.c.peek() {
                Some(close) if self.c.is_punct(Some(close), ")") => {
                    self.blank(close);
                    self.c.i += 1;
                }
                _ => {
                    return Err(self.c.expected(
                        &format!("`)` after `STREAM({name}`"),
                        Some(format!("write `STREAM({name})` or `STREAM {name}`")),
                    ))
                }
            }
            (name, function)
        } else {
            let name = self.c.name("a table name after STREAM")?;
            let function = self.c.at_punct("(");
            if function {
                self.c.skip_parens()?;
            }
            (name, function)
        };
        self.after_relation(Some(name), true, function)
    }

    /// What may follow a relation: `WITH (options)` (tables), `WATERMARK ...`.
    fn after_relation(
        &mut self,
        name: Option<Name>,
        streaming: bool,
        function: bool,
    ) -> PResult<()> {
        let mut options = Vec::new();
        if name.is_some()
            && !function
            && self.c.at_kw("WITH")
            && self.c.is_punct(self.c.peek_at(1), "(")
        {
            let start = self.c.here();
            self.c.i += 1;
            options = properties(&mut self.c, "the read's WITH options")?;
            let end = self.c.toks[self.c.i - 1].end;
            self.blanks.push((start, end));
        }
        if self.c.at_kw("WATERMARK") {
            self.watermark(name.clone())?;
        }
        if let Some(name) = name {
            self.marks.push(Mark {
                name,
                streaming,
                options,
                matched: false,
            });
        }
        Ok(())
    }

    /// `WATERMARK column DELAY OF INTERVAL ...` (the current token is `WATERMARK`).
    fn watermark(&mut self, relation: Option<Name>) -> PResult<()> {
        let cx = self.c.cx;
        let wm = self.c.toks[self.c.i];
        let help = Some("write `WATERMARK column DELAY OF INTERVAL 10 MINUTES`".to_string());
        self.c.i += 1;
        let col_start = self.c.i;
        // The column runs to `DELAY OF`; without one, to an `INTERVAL` (a
        // forgotten `DELAY OF`) or the end of the relation.
        let mut stop_at_interval = false;
        for pass in 0..2 {
            self.c.i = col_start;
            let mut depth = 0usize;
            while let Some(t) = self.c.peek() {
                if self.c.is_punct(Some(t), "(") {
                    depth += 1;
                } else if self.c.is_punct(Some(t), ")") {
                    if depth == 0 {
                        break;
                    }
                    depth -= 1;
                } else if depth == 0
                    && (self.c.at_kws(&["DELAY", "OF"])
                        || self.c.is_punct(Some(t), ",")
                        || (stop_at_interval && self.c.at_kw("INTERVAL")))
                {
                    break;
                }
                self.c.i += 1;
            }
            if pass == 0 && !self.c.at_kws(&["DELAY", "OF"]) {
                stop_at_interval = true;
            } else {
                break;
            }
        }
        if self.c.i == col_start {
            return Err(self
                .c
                .expected("an event-time column after WATERMARK", help));
        }
        let (first, last) = (self.c.toks[col_start], self.c.toks[self.c.i - 1]);
        let column = cx.src.slice(first.start, last.end).to_string();
        if !self.c.at_kws(&["DELAY", "OF"]) {
            return Err(self.c.expected(
                &format!("DELAY OF after the watermark column `{column}`"),
                help,
            ));
        }
        check_named_expr(cx, &column, cx.src.span(first.start))?;
        self.c.i += 2;
        let interval = self.c.here();
        if !self.c.eat_kw("INTERVAL") {
            return Err(self.c.expected("INTERVAL after DELAY OF", help));
        }
        let mut parts: Vec<String> = Vec::new();
        loop {
            let save = self.c.i;
            let sign = if self.c.eat_punct("-") {
                "-"
            } else {
                self.c.eat_punct("+");
                ""
            };
            let value = match self.c.peek() {
                Some(t) if t.kind == Kind::Number => self.c.text(t).to_string(),
                Some(t) if t.kind == Kind::Str => unquote_string(self.c.text(t)).trim().to_string(),
                _ => {
                    self.c.i = save;
                    break;
                }
            };
            let is_str = self.c.peek().is_some_and(|t| t.kind == Kind::Str);
            self.c.i += 1;
            match self.kw(self.c.peek()) {
                Some(unit) if UNITS.contains(&unit.as_str()) => {
                    self.c.i += 1;
                    let mut part = format!("{sign}{value} {}", unit.to_ascii_lowercase());
                    if self.c.at_kw("TO")
                        && self
                            .kw(self.c.peek_at(1))
                            .is_some_and(|u| UNITS.contains(&u.as_str()))
                    {
                        let to = self
                            .kw(self.c.peek_at(1))
                            .unwrap_or_default()
                            .to_ascii_lowercase();
                        part = format!("{part} to {to}");
                        self.c.i += 2;
                    }
                    parts.push(part);
                }
                _ if is_str && parts.is_empty() => {
                    parts.push(format!("{sign}{value}"));
                    break;
                }
                _ => {
                    self.c.i = save;
                    break;
                }
            }
        }
        if parts.is_empty() {
            return Err(self.c.expected(
                "an interval after DELAY OF INTERVAL",
                Some("write e.g. `INTERVAL 10 MINUTES`, `INTERVAL '10' MINUTE` or `INTERVAL '10 minutes'`".into()),
            ));
        }
        let end = self.c.toks[self.c.i - 1].end;
        let delay_text = cx.src.slice(interval, end).to_string();
        self.blanks.push((wm.start, end));
        let alias = if self.c.at_kw("AS") {
            self.c
                .peek_at(1)
                .filter(|t| matches!(t.kind, Kind::Word | Kind::QuotedIdent))
        } else {
            self.c.peek().filter(|t| self.is_name_start(Some(t)))
        }
        .map(|t| {
            let s = self.c.text(t);
            if t.kind == Kind::QuotedIdent {
                crate::lexer::unquote_ident(s)
            } else {
                s.to_string()
            }
        });
        self.watermarks.push(Watermark {
            span: cx.src.span(wm.start),
            relation,
            column,
            delay: parts.join(" "),
            delay_text,
            alias,
        });
        Ok(())
    }
}

/// Maps a sqlparser location in a text that starts at `base` back to the file.
fn map_location(base: Span, loc: Location) -> Span {
    let line = usize::try_from(loc.line).unwrap_or(usize::MAX);
    let column = usize::try_from(loc.column).unwrap_or(usize::MAX).max(1);
    if line <= 1 {
        Span::new(base.line, base.column.saturating_add(column - 1))
    } else {
        Span::new(base.line.saturating_add(line - 1), column)
    }
}

/// Where a text handed to sqlparser sits in the file, and what it is.
#[derive(Clone, Copy)]
struct Origin<'t> {
    /// The text.
    text: &'t str,
    /// Where it starts.
    base: Span,
    /// Just past its last token.
    end: Span,
    /// "query" or "expression", for messages.
    what: &'static str,
}

/// A sqlparser error as our error, at its position in the file.
///
/// sqlparser reports some errors at the token after the one it names
/// (`Expected an expression, found: FROM` points past `FROM`), and errors at
/// the end of the input without a position; both are corrected here.
fn parser_error(cx: &Ctx<'_>, e: ParserError, o: Origin<'_>) -> Box<SqlError> {
    let raw = match e {
        ParserError::TokenizerError(s) | ParserError::ParserError(s) => s,
        ParserError::RecursionLimitExceeded => {
            return cx.err_at(o.base, format!("the {} is nested too deeply", o.what), None);
        }
    };
    let (message, location) = match raw.rfind(" at Line: ") {
        Some(at) => {
            let loc = &raw[at + " at Line: ".len()..];
            let mut nums = loc
                .split(", Column: ")
                .map(|n| n.trim().parse::<u64>().ok());
            match (nums.next().flatten(), nums.next().flatten()) {
                (Some(line), Some(column)) => {
                    (raw[..at].to_string(), Some(Location { line, column }))
                }
                _ => (raw.clone(), None),
            }
        }
        None => (raw.clone(), None),
    };
    let expected = message
        .strip_prefix("Expected: ")
        .or_else(|| message.strip_prefix("Expected "))
        .and_then(|m| m.split_once(", found: "));
    let Some((want, found)) = expected else {
        let span = location.map_or(o.base, |l| map_location(o.base, l));
        return cx.err_at(span, message, None);
    };
    // A lone punctuation token (`)`) is quoted like the found one.
    let want = if !want.is_empty()
        && want
            .chars()
            .all(|c| !c.is_alphanumeric() && !c.is_whitespace())
    {
        format!("`{want}`")
    } else {
        want.to_string()
    };
    if found == "EOF" {
        return cx.err_at(
            o.end,
            format!("expected {want}, found the end of the {}", o.what),
            None,
        );
    }
    let span = match location {
        Some(loc) => map_location(o.base, named_token(o.text, loc, found).unwrap_or(loc)),
        None => o.base,
    };
    cx.err_at(
        span,
        format!("expected {want}, found {}", describe(found)),
        None,
    )
}

/// The start of the last token at or before `loc` that displays as `found`.
fn named_token(text: &str, loc: Location, found: &str) -> Option<Location> {
    let dialect = SparkDialect;
    let tokens = Tokenizer::new(&dialect, text)
        .tokenize_with_location()
        .ok()?;
    tokens
        .iter()
        .filter(|t| {
            let s = t.span.start;
            (s.line, s.column) <= (loc.line, loc.column) && t.token.to_string() == found
        })
        .map(|t| t.span.start)
        .next_back()
}

use crate::error::SqlError;

/// The position just past the end of a text that starts at `base`.
fn end_of(base: Span, text: &str) -> Span {
    match text.rsplit_once('\n') {
        None => Span::new(base.line, base.column + text.chars().count()),
        Some((before, after)) => Span::new(
            base.line + before.matches('\n').count() + 1,
            after.chars().count() + 1,
        ),
    }
}

/// Parses the rewritten query with sqlparser.
fn parse_sql(cx: &Ctx<'_>, sql: &str, base: Span) -> PResult<Box<ast::Query>> {
    let o = Origin {
        text: sql,
        base,
        end: end_of(base, sql),
        what: "query",
    };
    let dialect = SparkDialect;
    let mut p = Parser::new(&dialect)
        .try_with_sql(sql)
        .map_err(|e| parser_error(cx, e, o))?;
    let q = p.parse_query().map_err(|e| parser_error(cx, e, o))?;
    let next = p.peek_token();
    if next.token != SqlToken::EOF {
        return Err(cx.err_at(
            map_location(base, next.span.start),
            format!(
                "expected the end of the query, found {}",
                describe(&next.token.to_string())
            ),
            None,
        ));
    }
    Ok(q)
}

/// Checks an expression's syntax (`AUTO CDC` clauses).
pub(crate) fn check_expr(cx: &Ctx<'_>, text: &str, base: Span) -> PResult<()> {
    check(cx, text, base, false)
}

/// Checks `expr [[AS] alias]` (a watermark column).
fn check_named_expr(cx: &Ctx<'_>, text: &str, base: Span) -> PResult<()> {
    check(cx, text, base, true)
}

fn check(cx: &Ctx<'_>, text: &str, base: Span, named: bool) -> PResult<()> {
    let o = Origin {
        text,
        base,
        end: end_of(base, text),
        what: "expression",
    };
    let dialect = SparkDialect;
    let mut p = Parser::new(&dialect)
        .try_with_sql(text)
        .map_err(|e| parser_error(cx, e, o))?;
    p.parse_expr().map_err(|e| parser_error(cx, e, o))?;
    if named && p.peek_token().token != SqlToken::EOF {
        let _ = p.parse_keyword(sqlparser::keywords::Keyword::AS);
        p.parse_identifier().map_err(|e| parser_error(cx, e, o))?;
    }
    let next = p.peek_token();
    if next.token != SqlToken::EOF {
        return Err(cx.err_at(
            map_location(base, next.span.start),
            format!(
                "expected the end of the expression, found {}",
                describe(&next.token.to_string())
            ),
            None,
        ));
    }
    Ok(())
}

/// What sqlparser's AST reads.
#[derive(Default)]
struct Collect {
    ctes: Vec<String>,
    tables: Vec<ObjectName>,
    functions: Vec<(ObjectName, Vec<FunctionArg>)>,
}

impl Visitor for Collect {
    type Break = ();

    fn pre_visit_query(&mut self, query: &ast::Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            self.ctes
                .extend(with.cte_tables.iter().map(|c| c.alias.name.value.clone()));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        match factor {
            TableFactor::Table {
                name, args: None, ..
            } => self.tables.push(name.clone()),
            TableFactor::Table {
                name,
                args: Some(args),
                ..
            } => {
                self.functions.push((name.clone(), args.args.clone()));
            }
            TableFactor::Function { name, args, .. } => {
                self.functions.push((name.clone(), args.clone()));
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

fn part_value(p: &ObjectNamePart) -> String {
    match p {
        ObjectNamePart::Identifier(i) => i.value.clone(),
        other => other.to_string(),
    }
}

pub(crate) fn name_span(name: &ObjectName, base: Span) -> Span {
    match name.0.first() {
        Some(ObjectNamePart::Identifier(i)) if i.span.start.line > 0 => {
            map_location(base, i.span.start)
        }
        _ => base,
    }
}

fn arg_value(arg: &FunctionArgExpr) -> String {
    match arg {
        FunctionArgExpr::Expr(ast::Expr::Value(v)) => match &v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s.clone(),
            other => other.to_string(),
        },
        other => other.to_string(),
    }
}

/// The reads of a query: sqlparser's relations less CTE names, with the
/// scan's streaming flags and options matched by position.
fn reads(q: &ast::Query, base: Span, marks: &mut [Mark]) -> Vec<Read> {
    let mut found = Collect::default();
    let _ = q.visit(&mut found);
    let mut take = |span: Span| match marks.iter_mut().find(|m| m.name.span == span && !m.matched) {
        Some(m) => {
            m.matched = true;
            (m.streaming, std::mem::take(&mut m.options))
        }
        None => (false, Vec::new()),
    };
    let mut out = Vec::new();
    for name in &found.tables {
        let span = name_span(name, base);
        let parts: Vec<String> = name.0.iter().map(part_value).collect();
        let (streaming, options) = take(span);
        if parts.len() == 1 && found.ctes.iter().any(|c| c.eq_ignore_ascii_case(&parts[0])) {
            continue;
        }
        let path = match name.0.as_slice() {
            [ObjectNamePart::Identifier(f), ObjectNamePart::Identifier(p)]
                if f.quote_style.is_none()
                    && p.quote_style == Some('`')
                    && PATH_FORMATS.iter().any(|k| f.value.eq_ignore_ascii_case(k)) =>
            {
                Some(TableFunction {
                    name: f.value.clone(),
                    positional_args: vec![p.value.clone()],
                    named_args: Vec::new(),
                })
            }
            _ => None,
        };
        let source = match path {
            Some(f) => ReadSource::TableFunction(f),
            None => ReadSource::Table(Name { parts, span }),
        };
        out.push(Read {
            source,
            streaming,
            options,
            span,
        });
    }
    for (name, args) in &found.functions {
        let span = name_span(name, base);
        let (streaming, options) = take(span);
        let mut f = TableFunction {
            name: name.0.iter().map(part_value).collect::<Vec<_>>().join("."),
            positional_args: Vec::new(),
            named_args: Vec::new(),
        };
        for arg in args {
            match arg {
                FunctionArg::Named { name, arg, .. } => {
                    f.named_args.push((name.value.clone(), arg_value(arg)))
                }
                FunctionArg::ExprNamed { name, arg, .. } => {
                    f.named_args.push((name.to_string(), arg_value(arg)))
                }
                FunctionArg::Unnamed(arg) => f.positional_args.push(arg_value(arg)),
            }
        }
        out.push(Read {
            source: ReadSource::TableFunction(f),
            streaming,
            options,
            span,
        });
    }
    // A relation the scan saw that sqlparser did not report is still read.
    for m in marks.iter_mut().filter(|m| !m.matched && m.streaming) {
        out.push(Read {
            span: m.name.span,
            source: ReadSource::Table(m.name.clone()),
            streaming: true,
            options: std::mem::take(&mut m.options),
        });
    }
    out.sort_by_key(|r| r.span);
    out
}

impl Query {
    /// The sqlparser AST of [`Query::sql`], parsed with
    /// [`SparkDialect`]; `parse_file` has already checked that it parses.
    pub fn parse_ast(&self) -> Result<Box<ast::Query>, ParserError> {
        let dialect = SparkDialect;
        Parser::new(&dialect).try_with_sql(&self.sql)?.parse_query()
    }
}
