//! Parses Spark Declarative Pipelines (SDP) SQL library files into typed
//! statements, with exact error positions.
//!
//! A file is split into statements at `;` (outside strings, quoted
//! identifiers and comments); each statement becomes a [`Statement`]:
//! streaming tables and materialized views (with their expectations,
//! [`Constraint`]), temporary and persisted views,
//! flows (`INSERT INTO ... BY NAME` and `AUTO CDC INTO`), `SET` and `RESET`.
//! Every bad statement yields one [`SqlError`]; all of them are returned.
//!
//! Queries are kept as written ([`Query::text`]) and rewritten into plain
//! SQL ([`Query::sql`]) by blanking out the SDP-only syntax (`STREAM`,
//! `WATERMARK ... DELAY OF ...`) with spaces, so a position in the rewritten
//! text is the same line and column in the file. The rewritten text is
//! checked with sqlparser ([`SparkDialect`]); its reads are listed
//! ([`Query::reads`]), each marked streaming or not, and its watermarks
//! recorded ([`Query::watermarks`]); [`Query::parse_ast`] gives the AST.
//!
//! [`loader`] turns a file's statements into the engine's datasets and
//! flows, and registers itself as the loader of `.sql` library files: a
//! binary that links this crate runs a spec's `libraries:`. Each query
//! becomes the plan a Rust flow would build (`select`, `filter`,
//! `group_by(...).agg(...)`, `join`, `union`, `with_watermark`, reads of
//! datasets and of `read_files(...)` / `read_kafka(...)` / `` delta.`path` ``),
//! so every check of the pipeline graph applies to SQL flows as to Rust ones.
//!
//! ```
//! use pipelines_sql::{parse_file, ReadSource, Statement, StreamingTableSource};
//!
//! let text = "\
//! SET spark.sql.shuffle.partitions = 4;
//! -- Raw events, read as a stream.
//! CREATE STREAMING TABLE events
//! AS SELECT * FROM STREAM(raw_events)
//!      WATERMARK ts DELAY OF INTERVAL 10 MINUTES AS e;
//! ";
//! let file = parse_file("transformations/events.sql", text).unwrap();
//! assert_eq!(file.statements.len(), 2);
//! let Statement::StreamingTable(table) = &file.statements[1] else { panic!() };
//! assert_eq!(table.table.name.to_string(), "events");
//! let Some(StreamingTableSource::Query(query)) = &table.source else { panic!() };
//! // `STREAM(` and `)` and the WATERMARK clause became spaces:
//! assert_eq!(query.sql.lines().next(), Some("SELECT * FROM        raw_events "));
//! assert_eq!(query.sql.lines().nth(1).map(str::trim), Some("AS e"));
//! assert!(query.reads[0].streaming);
//! assert_eq!(query.reads[0].source, ReadSource::Table(pipelines_sql::Name::new(["raw_events"], pipelines_sql::Span::new(4, 25))));
//! assert_eq!(query.watermarks[0].delay, "10 minutes");
//!
//! let errors = parse_file("t.sql", "CREATE MATERIALIZED VIEW mv SELCT 1").unwrap_err();
//! assert_eq!(
//!     errors[0].to_string(),
//!     "error: t.sql:1:29: expected AS after the table name, found `SELCT`
//!   |
//! 1 | CREATE MATERIALIZED VIEW mv SELCT 1
//!   |                             ^
//!   help: the statement is `CREATE MATERIALIZED VIEW name [(columns)] [COMMENT '...'] \
//! [PARTITIONED BY (...)] [TBLPROPERTIES (...)] AS query`"
//! );
//! ```
#![warn(missing_docs)]

mod cursor;
mod dialect;
mod error;
mod lexer;
pub mod loader;
mod parser;
mod planner;
mod query;
mod statement;

pub use dialect::SparkDialect;
pub use error::SqlError;
pub use statement::*;

use cursor::Ctx;
use lexer::{Kind, Source};

/// Parses an SDP SQL library file. `path` is used in messages only.
///
/// Returns every statement, or every error: one per statement that does not
/// parse (an unterminated string or comment ends the file, so it is the
/// last).
pub fn parse_file(path: &str, text: &str) -> Result<SqlFile, Vec<SqlError>> {
    let src = Source::new(text);
    let cx = Ctx {
        file: path,
        src: &src,
    };
    let (tokens, lex_error) = lexer::lex(text);
    let mut statements = Vec::new();
    let mut errors = Vec::new();
    let mut pieces: Vec<&[lexer::Token]> = tokens
        .split(|t| t.kind == Kind::Punct && src.tok(t) == ";")
        .collect();
    // The piece after the last `;` is cut short by a lexing error, if any.
    let last = pieces.pop().unwrap_or(&[]);
    if lex_error.is_none() {
        pieces.push(last);
    }
    for piece in pieces.into_iter().filter(|p| !p.is_empty()) {
        match parser::statement(&cx, piece) {
            Ok(s) => statements.push(s),
            Err(e) => errors.push(*e),
        }
    }
    if let Some(e) = lex_error {
        errors.push(*cx.err(e.offset, e.message, Some(e.help)));
    }
    if errors.is_empty() {
        Ok(SqlFile {
            path: path.to_string(),
            statements,
        })
    } else {
        Err(errors)
    }
}
