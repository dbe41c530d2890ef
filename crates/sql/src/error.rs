//! `SqlError`: a problem at a line and column of a file, rendered like rustc.

use std::fmt;

use crate::lexer::Source;
use crate::Span;

/// A problem in a SQL file: where, what, and how to fix it.
///
/// `Display` renders it with the offending line and a caret under the
/// column:
///
/// ```text
/// error: transformations/flows.sql:12:5: expected AS after the table name, found `SELCT`
///    |
/// 12 |     SELCT * FROM STREAM(raw)
///    |     ^
///   help: ...
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", Render(self))]
pub struct SqlError {
    /// The file's path, as given to [`parse_file`](crate::parse_file).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What is wrong.
    pub message: String,
    /// How to fix it, when there is something to say.
    pub help: Option<String>,
    /// The text of the line, for the rendering.
    pub source_line: String,
}

impl SqlError {
    pub(crate) fn new(
        file: &str,
        source: &Source<'_>,
        span: Span,
        message: impl Into<String>,
        help: Option<String>,
    ) -> Self {
        SqlError {
            file: file.to_string(),
            line: span.line,
            column: span.column,
            message: message.into(),
            help,
            source_line: source.line_text(span.line).to_string(),
        }
    }

    /// Where the problem is.
    pub fn span(&self) -> Span {
        Span::new(self.line, self.column)
    }
}

impl SqlError {
    /// The offending line with a caret under the column, without the
    /// `error:` line and the help:
    ///
    /// ```text
    ///    |
    /// 12 |     SELCT * FROM STREAM(raw)
    ///    |     ^
    /// ```
    pub fn snippet(&self) -> String {
        let number = self.line.to_string();
        let gutter = " ".repeat(number.len());
        // The caret's indentation copies the line's tabs so that it lines up.
        let indent: String = self
            .source_line
            .chars()
            .chain(std::iter::repeat(' '))
            .take(self.column.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        format!(
            "{gutter} |\n{number} | {}\n{gutter} | {indent}^",
            self.source_line
        )
    }
}

struct Render<'a>(&'a SqlError);

impl fmt::Display for Render<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.0;
        writeln!(
            f,
            "error: {}:{}:{}: {}",
            e.file, e.line, e.column, e.message
        )?;
        write!(f, "{}", e.snippet())?;
        if let Some(help) = &e.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}
