//! The typed statements of an SDP SQL file.

use std::fmt;

use pipelines_core::ExpectationAction;

/// A position in a file: 1-based line and 1-based column, counted in
/// characters (a tab is one column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

impl Span {
    /// A span at `line:column`.
    pub const fn new(line: usize, column: usize) -> Self {
        Span { line, column }
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// A single identifier (a column, a key, a flow name): its value without
/// quotes, as written (Spark resolves identifiers case-insensitively; the
/// caller decides), and where it starts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ident {
    /// The identifier, backticks removed.
    pub value: String,
    /// Where it starts (at the backtick when quoted).
    pub span: Span,
}

impl Ident {
    /// An identifier at a span.
    pub fn new(value: impl Into<String>, span: Span) -> Self {
        Ident {
            value: value.into(),
            span,
        }
    }
}

/// A possibly qualified name (`catalog.schema.table`): its parts without
/// quotes, and where the first part starts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Name {
    /// The parts, backticks removed.
    pub parts: Vec<String>,
    /// Where the name starts.
    pub span: Span,
}

impl Name {
    /// A name from its parts.
    pub fn new<S: Into<String>>(parts: impl IntoIterator<Item = S>, span: Span) -> Self {
        Name {
            parts: parts.into_iter().map(Into::into).collect(),
            span,
        }
    }
}

impl fmt::Display for Name {
    /// The parts joined with `.`, each part that is not a plain identifier
    /// quoted with backticks.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, part) in self.parts.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            let plain = !part.is_empty()
                && part.chars().all(|c| c.is_alphanumeric() || c == '_')
                && !part.starts_with(|c: char| c.is_ascii_digit());
            if plain {
                f.write_str(part)?;
            } else {
                write!(f, "`{}`", part.replace('`', "``"))?;
            }
        }
        Ok(())
    }
}

/// A parsed SQL library file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlFile {
    /// The path given to [`parse_file`](crate::parse_file), as given.
    pub path: String,
    /// The statements, in file order (empty statements skipped).
    pub statements: Vec<Statement>,
}

/// One statement of an SDP SQL file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Statement {
    /// `CREATE [OR REFRESH] STREAMING TABLE ...`
    StreamingTable(StreamingTable),
    /// `CREATE [OR REFRESH] MATERIALIZED VIEW ... AS query`
    MaterializedView(MaterializedView),
    /// `CREATE [TEMPORARY] VIEW ... AS query`
    View(View),
    /// `CREATE FLOW name AS INSERT INTO ... BY NAME query` or
    /// `CREATE FLOW name AS AUTO CDC INTO ...`
    Flow(Flow),
    /// `SET key = value`: applies to the statements that follow it (the caller
    /// applies it).
    Set(Set),
    /// `RESET [key]`: undoes `SET`s for the statements that follow it.
    Reset(Reset),
}

impl Statement {
    /// Where the statement starts (its first keyword).
    pub fn span(&self) -> Span {
        match self {
            Statement::StreamingTable(s) => s.table.span,
            Statement::MaterializedView(s) => s.table.span,
            Statement::View(s) => s.span,
            Statement::Flow(s) => s.span,
            Statement::Set(s) => s.span,
            Statement::Reset(s) => s.span,
        }
    }
}

/// What a streaming table and a materialized view declare about the table
/// itself: `name [(columns and expectations)] [USING format] [COMMENT '...']
/// [PARTITIONED BY (...)] [TBLPROPERTIES (...)]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDef {
    /// Where the statement starts (`CREATE`).
    pub span: Span,
    /// The table's name.
    pub name: Name,
    /// `IF NOT EXISTS` was written.
    pub if_not_exists: bool,
    /// The declared columns (empty when no column list was written).
    pub columns: Vec<ColumnDef>,
    /// The expectations of the column list (`CONSTRAINT name EXPECT (...)`),
    /// in file order.
    pub constraints: Vec<Constraint>,
    /// `USING format`.
    pub using: Option<Ident>,
    /// `COMMENT '...'`, unquoted.
    pub comment: Option<String>,
    /// `PARTITIONED BY (a, b)`: the partition columns.
    pub partitioned_by: Vec<Ident>,
    /// `TBLPROPERTIES ('k' = 'v', ...)`, in order.
    pub properties: Vec<Property>,
}

/// A column of a table's column list: `name type [NOT NULL] [COMMENT '...']`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDef {
    /// The column's name (its span is where the column definition starts).
    pub name: Ident,
    /// The data type as written (`BIGINT`, `DECIMAL(10, 2)`,
    /// `STRUCT<a: INT, b: STRING>`), for the caller's DDL parser.
    pub data_type: String,
    /// `NOT NULL` was written.
    pub not_null: bool,
    /// `COMMENT '...'`, unquoted.
    pub comment: Option<String>,
}

/// A data-quality expectation of a table's column list, as Lakeflow writes
/// it: `CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW |
/// ON VIOLATION FAIL UPDATE | ON VIOLATION QUARANTINE TO table]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    /// Where `CONSTRAINT` starts.
    pub span: Span,
    /// The expectation's name, as written.
    pub name: Ident,
    /// The condition: the SQL text between the outer parentheses, as
    /// written, trimmed.
    pub condition: String,
    /// Where the condition starts (its first token).
    pub condition_span: Span,
    /// What a failing row does: [`ExpectationAction::Warn`] without
    /// `ON VIOLATION`, [`ExpectationAction::Drop`] for `DROP ROW` and
    /// `QUARANTINE TO`, [`ExpectationAction::Fail`] for `FAIL UPDATE`.
    pub action: ExpectationAction,
    /// The table or sink of `ON VIOLATION QUARANTINE TO table`, which
    /// receives the dropped rows.
    pub quarantine: Option<Name>,
}

/// A `key = value` pair of `TBLPROPERTIES` or of a read's `WITH (...)`
/// options. Quoted keys and values are unquoted; other values are as written
/// (`true`, `10`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    /// The key (a dotted key `a.b` is kept as one string).
    pub key: String,
    /// The value.
    pub value: String,
    /// Where the key starts.
    pub span: Span,
}

/// `CREATE [OR REFRESH] STREAMING TABLE name ... [AS query | FLOW AUTO CDC ...]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamingTable {
    /// The table's declaration.
    pub table: TableDef,
    /// What fills the table: its own query, its own AUTO CDC flow, or nothing
    /// (then flows declared with `CREATE FLOW` write into it).
    pub source: Option<StreamingTableSource>,
}

/// What a `CREATE STREAMING TABLE` statement fills its table with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamingTableSource {
    /// `AS query`
    Query(Query),
    /// `FLOW AUTO CDC FROM ...` (Spark 4.3): the table is the target.
    AutoCdc(Box<AutoCdc>),
}

/// `CREATE [OR REFRESH] MATERIALIZED VIEW name ... AS query`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaterializedView {
    /// The view's declaration (a materialized view is a table).
    pub table: TableDef,
    /// Its query.
    pub query: Query,
}

/// `CREATE [TEMPORARY] VIEW name [(columns)] [COMMENT '...']
/// [TBLPROPERTIES (...)] AS query`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// Where the statement starts (`CREATE`).
    pub span: Span,
    /// The view's name (a temporary view's is one part).
    pub name: Name,
    /// `TEMPORARY` was written: the view lives only in the pipeline; else it
    /// is a persisted view published to the catalog.
    pub temporary: bool,
    /// The column list: names with optional comments.
    pub columns: Vec<ViewColumn>,
    /// `COMMENT '...'`, unquoted.
    pub comment: Option<String>,
    /// `TBLPROPERTIES (...)`, in order.
    pub properties: Vec<Property>,
    /// The view's query.
    pub query: Query,
}

/// A column of a view's column list: `name [COMMENT '...']`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewColumn {
    /// The column's name.
    pub name: Ident,
    /// `COMMENT '...'`, unquoted.
    pub comment: Option<String>,
}

/// `CREATE FLOW name [COMMENT '...'] AS ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    /// Where the statement starts (`CREATE`).
    pub span: Span,
    /// The flow's name (one part, as Spark requires).
    pub name: Ident,
    /// `COMMENT '...'`, unquoted.
    pub comment: Option<String>,
    /// The dataset the flow writes into.
    pub target: Name,
    /// What the flow does.
    pub kind: FlowKind,
}

/// What a flow writes into its target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowKind {
    /// `INSERT INTO target BY NAME query`: appends the query's rows.
    InsertInto(Query),
    /// `AUTO CDC INTO target FROM ...`: applies a change feed.
    AutoCdc(Box<AutoCdc>),
}

/// The body of `AUTO CDC INTO target` (or of a streaming table's
/// `FLOW AUTO CDC`): `FROM source KEYS (...) [IGNORE NULL UPDATES]
/// [APPLY AS DELETE WHEN cond] [APPLY AS TRUNCATE WHEN cond] SEQUENCE BY expr
/// [COLUMNS ...] [STORED AS SCD TYPE 1|2] [TRACK HISTORY ON ...]`.
///
/// Spark 4.3 itself accepts only the SCD type 1 subset (no `APPLY AS
/// TRUNCATE`, `IGNORE NULL UPDATES`, `STORED AS SCD TYPE 2` or `TRACK
/// HISTORY`); the Databricks clauses are parsed here so that the engine can
/// decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoCdc {
    /// Where `AUTO` (or `FLOW` in a streaming table) starts.
    pub span: Span,
    /// The change feed read (`FROM src`, `FROM STREAM src`, `FROM STREAM(src)`).
    pub source: Read,
    /// `KEYS (k1, k2)`.
    pub keys: Vec<Ident>,
    /// `IGNORE NULL UPDATES` was written.
    pub ignore_null_updates: bool,
    /// `APPLY AS DELETE WHEN cond`.
    pub apply_as_delete_when: Option<SqlExpr>,
    /// `APPLY AS TRUNCATE WHEN cond`.
    pub apply_as_truncate_when: Option<SqlExpr>,
    /// `SEQUENCE BY expr`.
    pub sequence_by: SqlExpr,
    /// `COLUMNS ...` (all columns when absent).
    pub columns: Option<ColumnSelection>,
    /// `STORED AS SCD TYPE n` (type 1 when absent).
    pub stored_as_scd_type: Option<u8>,
    /// `TRACK HISTORY ON ...` (SCD type 2 only).
    pub track_history: Option<ColumnSelection>,
}

/// Which columns a CDC clause names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnSelection {
    /// `*`
    All,
    /// `* EXCEPT (a, b)`
    AllExcept(Vec<Ident>),
    /// `(a, b)` or `a, b`
    Only(Vec<Ident>),
}

/// A SQL expression kept as text (validated with sqlparser).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlExpr {
    /// The expression as written.
    pub text: String,
    /// Where it starts.
    pub span: Span,
}

/// `SET key = value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Set {
    /// Where the statement starts (`SET`).
    pub span: Span,
    /// The key (`spark.sql.shuffle.partitions`), unquoted when quoted.
    /// `SET TIME ZONE 'x'` sets `spark.sql.session.timeZone`, as in Spark.
    pub key: String,
    /// The rest of the statement after `=`, trimmed, unquoted when it is one
    /// quoted token.
    pub value: String,
}

/// `RESET` (every key) or `RESET key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reset {
    /// Where the statement starts (`RESET`).
    pub span: Span,
    /// The key, or `None` for all keys.
    pub key: Option<String>,
}

/// A query: its text as written, the same text rewritten into plain SQL, and
/// what it reads.
///
/// `sql` is `text` with the SDP-only syntax blanked out character for
/// character (`STREAM`, the parentheses of `STREAM(...)`, a `WITH (...)`
/// options clause after a streaming read, `WATERMARK ... DELAY OF ...`), so
/// every line and column of `sql` is the line and column of `text`. It parses
/// with [`SparkDialect`](crate::SparkDialect) (checked by
/// [`parse_file`](crate::parse_file)); [`Query::parse_ast`] gives its AST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The query as written in the file.
    pub text: String,
    /// Where it starts.
    pub span: Span,
    /// The plain SQL (see above).
    pub sql: String,
    /// Every dataset or table function read, in text order (CTE names are not
    /// reads).
    pub reads: Vec<Read>,
    /// Every `WATERMARK` clause, in text order.
    pub watermarks: Vec<Watermark>,
}

/// One relation a query reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    /// What is read.
    pub source: ReadSource,
    /// Read as a stream (`STREAM x`, `STREAM(x)`, `STREAM read_files(...)`).
    pub streaming: bool,
    /// A streaming read's `WITH ('k' = 'v')` options, in order.
    pub options: Vec<Property>,
    /// Where the relation's name starts.
    pub span: Span,
}

/// What a read reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadSource {
    /// A dataset or table by name.
    Table(Name),
    /// A table-valued function such as `read_files('path', format => 'json')`
    /// or `read_kafka(...)`, or a path table such as `` delta.`/data/t` ``
    /// (name `delta`, one positional argument: the path).
    TableFunction(TableFunction),
}

/// A table-valued function call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableFunction {
    /// The function's name (`read_files`, `read_kafka`, `delta`).
    pub name: String,
    /// The positional arguments, in order: string literals unquoted, other
    /// expressions as SQL text.
    pub positional_args: Vec<String>,
    /// The named arguments (`format => 'json'`), in order, values as for
    /// positional ones.
    pub named_args: Vec<(String, String)>,
}

/// `WATERMARK column DELAY OF interval` after a relation (Spark 4.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watermark {
    /// Where `WATERMARK` starts.
    pub span: Span,
    /// The relation it follows: a table's name or a table function's name;
    /// `None` after a parenthesized subquery.
    pub relation: Option<Name>,
    /// The event-time column (an expression, as written).
    pub column: String,
    /// The delay as a Spark interval string: `'15' MINUTE` → `15 minute`,
    /// `15 MINUTES` → `15 minutes`, `'10 seconds'` → `10 seconds`.
    pub delay: String,
    /// The interval as written (`INTERVAL 15 MINUTES`).
    pub delay_text: String,
    /// The relation's alias written after the clause (`... AS e`).
    pub alias: Option<String>,
}
