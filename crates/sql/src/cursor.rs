//! The token cursor the statement parser and the query reader share: the
//! file being parsed ([`Ctx`]), a position in a statement's tokens
//! ([`Cursor`]) with its expectations and messages, and the clause readers
//! both need (`TBLPROPERTIES (...)`, `WITH (...)` options).

use crate::error::SqlError;
use crate::lexer::{unquote_ident, unquote_string, Kind, Source, Token};
use crate::statement::*;

pub(crate) type PResult<T> = Result<T, Box<SqlError>>;

/// The file being parsed.
pub(crate) struct Ctx<'a> {
    pub file: &'a str,
    pub src: &'a Source<'a>,
}

impl Ctx<'_> {
    pub fn err(
        &self,
        offset: usize,
        message: impl Into<String>,
        help: Option<String>,
    ) -> Box<SqlError> {
        self.err_at(self.src.span(offset), message, help)
    }

    pub fn err_at(
        &self,
        span: Span,
        message: impl Into<String>,
        help: Option<String>,
    ) -> Box<SqlError> {
        Box::new(SqlError::new(self.file, self.src, span, message, help))
    }
}

/// A cursor over one statement's tokens.
pub(crate) struct Cursor<'a> {
    pub cx: &'a Ctx<'a>,
    pub toks: &'a [Token],
    pub i: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(cx: &'a Ctx<'a>, toks: &'a [Token]) -> Self {
        Cursor { cx, toks, i: 0 }
    }

    pub fn peek(&self) -> Option<&'a Token> {
        self.toks.get(self.i)
    }

    pub fn peek_at(&self, k: usize) -> Option<&'a Token> {
        self.toks.get(self.i + k)
    }

    pub fn text(&self, t: &Token) -> &'a str {
        self.cx.src.tok(t)
    }

    pub fn is_kw(&self, t: Option<&Token>, kw: &str) -> bool {
        t.is_some_and(|t| t.kind == Kind::Word && self.text(t).eq_ignore_ascii_case(kw))
    }

    pub fn is_punct(&self, t: Option<&Token>, p: &str) -> bool {
        t.is_some_and(|t| t.kind == Kind::Punct && self.text(t) == p)
    }

    pub fn at_kw(&self, kw: &str) -> bool {
        self.is_kw(self.peek(), kw)
    }

    /// The next tokens are these keywords.
    pub fn at_kws(&self, kws: &[&str]) -> bool {
        kws.iter()
            .enumerate()
            .all(|(k, kw)| self.is_kw(self.peek_at(k), kw))
    }

    pub fn eat_kw(&mut self, kw: &str) -> bool {
        let yes = self.at_kw(kw);
        if yes {
            self.i += 1;
        }
        yes
    }

    pub fn at_punct(&self, p: &str) -> bool {
        self.is_punct(self.peek(), p)
    }

    pub fn eat_punct(&mut self, p: &str) -> bool {
        let yes = self.at_punct(p);
        if yes {
            self.i += 1;
        }
        yes
    }

    pub fn at_end(&self) -> bool {
        self.i >= self.toks.len()
    }

    /// The offset of the current token, or just past the last one.
    pub fn here(&self) -> usize {
        match self.peek() {
            Some(t) => t.start,
            None => self.toks.last().map_or(0, |t| t.end),
        }
    }

    pub fn span_here(&self) -> Span {
        self.cx.src.span(self.here())
    }

    pub fn span_of(&self, t: &Token) -> Span {
        self.cx.src.span(t.start)
    }

    /// The current token for a message: `` `SELCT` `` or "the end of the statement".
    pub fn found(&self) -> String {
        match self.peek() {
            Some(t) => describe(self.text(t)),
            None => "the end of the statement".to_string(),
        }
    }

    pub fn expected(&self, what: &str, help: Option<String>) -> Box<SqlError> {
        self.cx.err(
            self.here(),
            format!("expected {what}, found {}", self.found()),
            help,
        )
    }

    pub fn expect_kw(&mut self, kw: &str, context: &str) -> PResult<()> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            Err(self.expected(&format!("{kw} {context}"), None))
        }
    }

    pub fn expect_punct(&mut self, p: &str, context: &str) -> PResult<()> {
        if self.eat_punct(p) {
            Ok(())
        } else {
            Err(self.expected(&format!("`{p}` {context}"), None))
        }
    }

    /// An identifier: a word or a backtick-quoted name.
    pub fn ident(&mut self, what: &str) -> PResult<Ident> {
        match self.peek() {
            Some(t) if t.kind == Kind::Word => {
                self.i += 1;
                Ok(Ident::new(self.text(t), self.span_of(t)))
            }
            Some(t) if t.kind == Kind::QuotedIdent => {
                self.i += 1;
                Ok(Ident::new(unquote_ident(self.text(t)), self.span_of(t)))
            }
            _ => Err(self.expected(what, None)),
        }
    }

    /// A possibly qualified name: `a`, `a.b`, `` `a`.`b c` ``.
    pub fn name(&mut self, what: &str) -> PResult<Name> {
        let first = self.ident(what)?;
        let mut name = Name::new([first.value], first.span);
        while self.at_punct(".") {
            self.i += 1;
            let part = self.ident(&format!("a name part after `{name}.`"))?;
            name.parts.push(part.value);
        }
        Ok(name)
    }

    /// A string literal (adjacent literals are concatenated, as in Spark).
    pub fn string(&mut self, what: &str) -> PResult<String> {
        let mut out = match self.peek() {
            Some(t) if t.kind == Kind::Str => unquote_string(self.text(t)),
            _ => return Err(self.expected(what, None)),
        };
        self.i += 1;
        while let Some(t) = self.peek().filter(|t| t.kind == Kind::Str) {
            out.push_str(&unquote_string(self.text(t)));
            self.i += 1;
        }
        Ok(out)
    }

    /// Skips a parenthesized group starting at the current `(`; returns the
    /// index of its `)`.
    pub fn skip_parens(&mut self) -> PResult<usize> {
        let open = self.here();
        let mut depth = 0usize;
        while let Some(t) = self.peek() {
            if t.kind == Kind::Punct {
                match self.text(t) {
                    "(" => depth += 1,
                    ")" => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            let close = self.i;
                            self.i += 1;
                            return Ok(close);
                        }
                    }
                    _ => {}
                }
            }
            self.i += 1;
        }
        Err(self.cx.err(
            open,
            "this `(` is never closed",
            Some("add the matching `)`".into()),
        ))
    }
}

/// A token's text for a message, shortened when long.
pub(crate) fn describe(text: &str) -> String {
    let short: String = text.chars().take(40).collect();
    if short.len() < text.len() {
        format!("`{short}...`")
    } else {
        format!("`{short}`")
    }
}

/// `('k' = 'v', k.x = 1, ...)`.
pub(crate) fn properties(c: &mut Cursor<'_>, what: &str) -> PResult<Vec<Property>> {
    c.expect_punct("(", &format!("after {what}"))?;
    let mut props: Vec<Property> = Vec::new();
    loop {
        let span = c.span_here();
        let key = match c.peek() {
            Some(t) if t.kind == Kind::Str => {
                c.i += 1;
                unquote_string(c.text(t))
            }
            Some(t) if matches!(t.kind, Kind::Word | Kind::QuotedIdent) => {
                c.name("a property key")?.parts.join(".")
            }
            _ => return Err(c.expected("a property key", None)),
        };
        c.eat_punct("=");
        let value = match c.peek() {
            Some(t) if t.kind == Kind::Str => {
                c.i += 1;
                unquote_string(c.text(t))
            }
            Some(t) if matches!(t.kind, Kind::Number | Kind::Word) => {
                c.i += 1;
                c.text(t).to_string()
            }
            Some(t)
                if c.is_punct(Some(t), "-")
                    && c.peek_at(1).is_some_and(|n| n.kind == Kind::Number) =>
            {
                let n = c.toks[c.i + 1];
                c.i += 2;
                format!("-{}", c.text(&n))
            }
            _ => return Err(c.expected(&format!("a value for property `{key}`"), None)),
        };
        if props.iter().any(|p| p.key == key) {
            return Err(c
                .cx
                .err_at(span, format!("duplicate property key `{key}`"), None));
        }
        props.push(Property { key, value, span });
        if c.eat_punct(",") {
            continue;
        }
        c.expect_punct(")", &format!("or `,` in {what}"))?;
        return Ok(props);
    }
}
