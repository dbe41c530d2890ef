//! A small lexer over a whole SQL file: just enough to split it into
//! statements and to read SDP's statement headers, with byte offsets that map
//! back to line and column.
//!
//! Strings follow Spark: `'...'` and `"..."` are string literals in which a
//! backslash escapes the next character and a doubled quote is a quote;
//! `` `...` `` is a quoted identifier in which a doubled backtick is a
//! backtick. `--` starts a line comment; `/* */` comments nest, as in Spark.

use crate::Span;

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An unquoted word: a keyword or an identifier.
    Word,
    /// A backtick-quoted identifier.
    QuotedIdent,
    /// A single- or double-quoted string literal.
    Str,
    /// A numeric literal (with any suffix such as `L` or `BD`).
    Number,
    /// Punctuation or an operator; `=>` is one token, every other one is a
    /// single character.
    Punct,
}

/// A token: its kind and its byte range in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
}

/// A lexing error that stops the lexer: an unterminated string, quoted
/// identifier or block comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LexError {
    /// Byte offset where the unterminated construct starts.
    pub offset: usize,
    pub message: String,
    pub help: String,
}

/// The text of a file with its line starts, for offset → line:column.
pub(crate) struct Source<'a> {
    pub text: &'a str,
    line_starts: Vec<usize>,
}

impl<'a> Source<'a> {
    pub fn new(text: &'a str) -> Self {
        let mut line_starts = vec![0];
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' {
                line_starts.push(i + 1);
            }
        }
        Source { text, line_starts }
    }

    /// The largest char boundary at or before `offset`.
    fn floor(&self, offset: usize) -> usize {
        let mut o = offset.min(self.text.len());
        while o > 0 && !self.text.is_char_boundary(o) {
            o -= 1;
        }
        o
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn span(&self, offset: usize) -> Span {
        let offset = self.floor(offset);
        let line_index = self
            .line_starts
            .partition_point(|&s| s <= offset)
            .saturating_sub(1);
        let start = self.line_starts.get(line_index).copied().unwrap_or(0);
        let column = self
            .text
            .get(start..offset)
            .map_or(0, |s| s.chars().count())
            + 1;
        Span {
            line: line_index + 1,
            column,
        }
    }

    /// The text of a 1-based line, without its line break.
    pub fn line_text(&self, line: usize) -> &'a str {
        let Some(&start) = self.line_starts.get(line.wrapping_sub(1)) else {
            return "";
        };
        let end = self
            .line_starts
            .get(line)
            .map_or(self.text.len(), |&next| next.saturating_sub(1));
        let s = self.text.get(start..end.max(start)).unwrap_or("");
        s.strip_suffix('\r').unwrap_or(s)
    }

    /// The text of a token.
    pub fn tok(&self, t: &Token) -> &'a str {
        self.text.get(t.start..t.end).unwrap_or("")
    }

    /// The text between two byte offsets (empty when out of range).
    pub fn slice(&self, start: usize, end: usize) -> &'a str {
        self.text.get(start..end).unwrap_or("")
    }
}

/// Lexes the whole file. On an unterminated construct, returns the tokens
/// before it and the error.
pub(crate) fn lex(text: &str) -> (Vec<Token>, Option<LexError>) {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let at = |i: usize| chars.get(i).map(|&(_, c)| c);
    let offset = |i: usize| chars.get(i).map_or(text.len(), |&(o, _)| o);
    let mut tokens = Vec::new();
    let mut i = 0;
    while let Some(c) = at(i) {
        let start = offset(i);
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == '-' && at(i + 1) == Some('-') {
            while let Some(c) = at(i) {
                if c == '\n' {
                    break;
                }
                i += 1;
            }
            continue;
        }
        if c == '/' && at(i + 1) == Some('*') {
            let mut depth = 0usize;
            loop {
                match (at(i), at(i + 1)) {
                    (Some('/'), Some('*')) => {
                        depth += 1;
                        i += 2;
                    }
                    (Some('*'), Some('/')) => {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    }
                    (Some(_), _) => i += 1,
                    (None, _) => {
                        return (
                            tokens,
                            Some(LexError {
                                offset: start,
                                message: "unterminated block comment".into(),
                                help: "close the comment with `*/` (block comments nest)".into(),
                            }),
                        );
                    }
                }
            }
            continue;
        }
        if c == '\'' || c == '"' || c == '`' {
            i += 1;
            loop {
                match at(i) {
                    None => {
                        let (what, help) = if c == '`' {
                            (
                                "unterminated quoted identifier",
                                "close the identifier with a backtick; a backtick inside it is written ``".to_string(),
                            )
                        } else {
                            (
                                "unterminated string literal",
                                format!("close the string with `{c}`; a `{c}` inside it is written `\\{c}` or `{c}{c}`"),
                            )
                        };
                        return (
                            tokens,
                            Some(LexError {
                                offset: start,
                                message: what.into(),
                                help,
                            }),
                        );
                    }
                    Some('\\') if c != '`' => i += 2,
                    Some(q) if q == c => {
                        if at(i + 1) == Some(c) {
                            i += 2;
                        } else {
                            i += 1;
                            break;
                        }
                    }
                    Some(_) => i += 1,
                }
            }
            let kind = if c == '`' {
                Kind::QuotedIdent
            } else {
                Kind::Str
            };
            tokens.push(Token {
                kind,
                start,
                end: offset(i.min(chars.len())),
            });
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && at(i + 1).is_some_and(|d| d.is_ascii_digit())) {
            while at(i).is_some_and(|d| d.is_ascii_digit()) {
                i += 1;
            }
            if at(i) == Some('.')
                && at(i + 1).is_none_or(|d| !d.is_alphabetic() || d == 'e' || d == 'E')
            {
                i += 1;
                while at(i).is_some_and(|d| d.is_ascii_digit()) {
                    i += 1;
                }
            }
            if matches!(at(i), Some('e' | 'E'))
                && (at(i + 1).is_some_and(|d| d.is_ascii_digit())
                    || (matches!(at(i + 1), Some('+' | '-'))
                        && at(i + 2).is_some_and(|d| d.is_ascii_digit())))
            {
                i += 2;
                while at(i).is_some_and(|d| d.is_ascii_digit()) {
                    i += 1;
                }
            }
            while at(i).is_some_and(is_word_char) {
                i += 1;
            }
            tokens.push(Token {
                kind: Kind::Number,
                start,
                end: offset(i),
            });
            continue;
        }
        if is_word_char(c) {
            while at(i).is_some_and(is_word_char) {
                i += 1;
            }
            tokens.push(Token {
                kind: Kind::Word,
                start,
                end: offset(i),
            });
            continue;
        }
        if c == '=' && at(i + 1) == Some('>') {
            i += 2;
        } else {
            i += 1;
        }
        tokens.push(Token {
            kind: Kind::Punct,
            start,
            end: offset(i),
        });
    }
    (tokens, None)
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The value of a string literal token: quotes removed, `''` and backslash
/// escapes resolved as Spark does.
pub(crate) fn unquote_string(text: &str) -> String {
    let mut chars = text.chars();
    let Some(q) = chars.next() else {
        return String::new();
    };
    let body: Vec<char> = chars.collect();
    let body = match body.split_last() {
        Some((&last, rest)) if last == q => rest,
        _ => &body[..],
    };
    let mut out = String::new();
    let mut i = 0;
    while i < body.len() {
        let c = body[i];
        if c == '\\' {
            if let Some(&n) = body.get(i + 1) {
                out.push(match n {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '0' => '\0',
                    'b' => '\u{8}',
                    'Z' => '\u{1a}',
                    other => other,
                });
                i += 2;
                continue;
            }
        }
        if c == q && body.get(i + 1) == Some(&q) {
            out.push(q);
            i += 2;
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

/// The name in a backtick-quoted identifier token.
pub(crate) fn unquote_ident(text: &str) -> String {
    let inner = text.strip_prefix('`').unwrap_or(text);
    let inner = inner.strip_suffix('`').unwrap_or(inner);
    inner.replace("``", "`")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(Kind, &str)> {
        let (toks, err) = lex(text);
        assert!(err.is_none(), "{err:?}");
        toks.iter()
            .map(|t| (t.kind, &text[t.start..t.end]))
            .collect()
    }

    #[test]
    fn tokens() {
        assert_eq!(
            kinds("SELECT a.b, 'x''y', \"q\\\"\", `w``v` FROM t -- c\n /* a /* b */ */ =>1.5e3L;"),
            vec![
                (Kind::Word, "SELECT"),
                (Kind::Word, "a"),
                (Kind::Punct, "."),
                (Kind::Word, "b"),
                (Kind::Punct, ","),
                (Kind::Str, "'x''y'"),
                (Kind::Punct, ","),
                (Kind::Str, "\"q\\\"\""),
                (Kind::Punct, ","),
                (Kind::QuotedIdent, "`w``v`"),
                (Kind::Word, "FROM"),
                (Kind::Word, "t"),
                (Kind::Punct, "=>"),
                (Kind::Number, "1.5e3L"),
                (Kind::Punct, ";"),
            ]
        );
    }

    #[test]
    fn unterminated() {
        let (toks, err) = lex("a 'b");
        assert_eq!(toks.len(), 1);
        assert_eq!(err.unwrap().offset, 2);
        let (_, err) = lex("a /* /* */");
        assert_eq!(err.unwrap().message, "unterminated block comment");
    }

    #[test]
    fn unquoting() {
        assert_eq!(unquote_string("'it''s'"), "it's");
        assert_eq!(unquote_string("'a\\'b\\n'"), "a'b\n");
        assert_eq!(unquote_string("\"x\""), "x");
        assert_eq!(unquote_ident("`a``b`"), "a`b");
    }

    #[test]
    fn spans() {
        let s = Source::new("ab\nc\u{e9}d\r\ne");
        assert_eq!(s.span(0), Span { line: 1, column: 1 });
        assert_eq!(s.span(3), Span { line: 2, column: 1 });
        assert_eq!(s.span(6), Span { line: 2, column: 3 });
        assert_eq!(s.line_text(2), "c\u{e9}d");
        assert_eq!(s.line_text(3), "e");
        assert_eq!(s.line_text(9), "");
    }
}
