//! Typed errors and diagnostics.
//!
//! Every problem the framework reports says *what* is wrong, *where* (flow,
//! dataset, file:line, option, column) and *how* to fix it. Validation collects
//! all problems into [`Diagnostics`] before returning, so a user sees every
//! mistake of a pipeline at once.

use std::fmt;
use std::path::PathBuf;

/// The result type used throughout the framework.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where a declaration was made: a Rust source line (macro or builder call),
/// a line of the YAML spec, or a position in a library file (SQL).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Origin {
    /// Declared in Rust code, e.g. by `#[append_flow]` at `src/main.rs:17`.
    Code {
        /// Source file as reported by the compiler.
        file: String,
        /// 1-based line.
        line: u32,
    },
    /// Declared in the pipeline spec, e.g. `pipeline.yml:12`.
    Spec {
        /// Spec file path as given.
        file: String,
        /// 1-based line, when known.
        line: Option<usize>,
    },
    /// Declared in a library file, e.g. `transformations/flows.sql:12:5`.
    Library {
        /// The file's path as displayed (relative to the working directory
        /// when below it).
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
    },
}

impl Origin {
    /// True for a declaration made in a library file (SQL), whose fixes are
    /// written in SQL rather than Rust.
    pub fn is_library(&self) -> bool {
        matches!(self, Origin::Library { .. })
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Code { file, line } => write!(f, "{file}:{line}"),
            Origin::Spec {
                file,
                line: Some(line),
            } => write!(f, "{file}:{line}"),
            Origin::Spec { file, line: None } => write!(f, "{file}"),
            Origin::Library { file, line, column } => write!(f, "{file}:{line}:{column}"),
        }
    }
}

/// One problem found in a pipeline, with its subject, origin and a fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// What the problem is about, e.g. "flow `totals`" or "dataset `logs`".
    pub subject: Option<String>,
    /// Where the subject was declared.
    pub origin: Option<Origin>,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub help: Option<String>,
}

impl Diagnostic {
    /// A diagnostic with a message only.
    pub fn new(message: impl Into<String>) -> Self {
        Diagnostic {
            subject: None,
            origin: None,
            message: message.into(),
            help: None,
        }
    }

    /// Sets the subject (e.g. "flow `x`").
    pub fn subject(mut self, subject: impl Into<String>) -> Self {
        self.subject = Some(subject.into());
        self
    }

    /// Sets the origin.
    pub fn origin(mut self, origin: Option<Origin>) -> Self {
        self.origin = origin;
        self
    }

    /// Sets the one-line fix.
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

impl Diagnostic {
    /// The diagnostic as a warning: `warning: flow `x` (src/main.rs:17): message`.
    pub fn as_warning(&self) -> String {
        let text = self.to_string();
        match text.strip_prefix("error: ") {
            Some(rest) => format!("warning: {rest}"),
            None => text,
        }
    }
}

impl fmt::Display for Diagnostic {
    /// `error: flow `x` (src/main.rs:17): message` and an indented `help:` line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: ")?;
        match (&self.subject, &self.origin) {
            (Some(s), Some(o)) => write!(f, "{s} ({o}): ")?,
            (Some(s), None) => write!(f, "{s}: ")?,
            (None, Some(o)) => write!(f, "{o}: ")?,
            (None, None) => {}
        }
        write!(f, "{}", self.message)?;
        if let Some(help) = &self.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

/// Every problem found by a validation pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// Number of problems.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when no problem was found.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds a problem.
    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d)
    }

    /// Iterates over the problems.
    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.0.iter()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.0 {
            writeln!(f, "{d}")?;
        }
        let n = self.0.len();
        write!(
            f,
            "{n} error{}; nothing was read or written.",
            if n == 1 { "" } else { "s" }
        )
    }
}

/// An error building a query plan: a bad SQL expression, an unknown column, a
/// malformed duration or schema. Carries an optional fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PlanError {
    /// What is wrong (names the column, option or expression).
    pub message: String,
    /// How to fix it, e.g. "did you mean `user_id`?".
    pub help: Option<String>,
}

impl PlanError {
    /// A plan error without a fix.
    pub fn new(message: impl Into<String>) -> Self {
        PlanError {
            message: message.into(),
            help: None,
        }
    }

    /// A plan error with a fix.
    pub fn with_help(message: impl Into<String>, help: impl Into<String>) -> Self {
        PlanError {
            message: message.into(),
            help: Some(help.into()),
        }
    }
}

/// The framework's error type.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A query plan could not be built or resolved.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The pipeline spec could not be found, read or parsed.
    #[error(transparent)]
    Spec(#[from] crate::spec::SpecError),
    /// The pipeline failed validation; every problem is listed.
    #[error("{0}")]
    Invalid(Diagnostics),
    /// Bad command-line usage.
    #[error("{0}")]
    Usage(String),
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A problem while running a flow: reading a source, writing a sink.
    /// The message names the flow, file, line or option involved.
    #[error("{message}{}", help.as_ref().map(|h| format!("\n  help: {h}")).unwrap_or_default())]
    Runtime {
        /// What went wrong, and where.
        message: String,
        /// How to fix it.
        help: Option<String>,
    },
    /// A library the engine calls failed (delta-rs, librdkafka, Parquet,
    /// the operating system, a user's foreach-batch function): what the
    /// engine was doing, then the library's own message. The library's
    /// error is kept as the [`source`](std::error::Error::source).
    #[error("{context}: {source}{}", help.as_ref().map(|h| format!("\n  help: {h}")).unwrap_or_default())]
    External {
        /// What the engine was doing, and where (flow, sink, file).
        context: String,
        /// How to fix it.
        help: Option<String>,
        /// The library's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A checkpoint or log file is missing, corrupt or unwritable.
    #[error("checkpoint file {}: {message}", path.display())]
    Checkpoint {
        /// The file involved.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A changed query on an existing checkpoint (what changed, and the fix).
    #[error("{0}")]
    ShapeChanged(String),
    /// An error from Parquet.
    #[error(transparent)]
    Parquet(#[from] parquet::errors::ParquetError),
    /// An error from DataFusion.
    #[error(transparent)]
    DataFusion(#[from] datafusion::error::DataFusionError),
    /// An error from Arrow.
    #[error(transparent)]
    Arrow(#[from] arrow::error::ArrowError),
}

impl Error {
    /// A runtime error without a fix.
    pub fn runtime(message: impl Into<String>) -> Self {
        Error::Runtime {
            message: message.into(),
            help: None,
        }
    }

    /// A runtime error with a fix.
    pub fn runtime_with_help(message: impl Into<String>, help: impl Into<String>) -> Self {
        Error::Runtime {
            message: message.into(),
            help: Some(help.into()),
        }
    }

    /// A library's error `source`, with what the engine was doing.
    pub fn external(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Error::External {
            context: context.into(),
            help: None,
            source: source.into(),
        }
    }

    /// A library's error `source`, with what the engine was doing and a fix.
    pub fn external_with_help(
        context: impl Into<String>,
        help: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Error::External {
            context: context.into(),
            help: Some(help.into()),
            source: source.into(),
        }
    }

    /// A checkpoint error naming the file.
    pub fn checkpoint(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Error::Checkpoint {
            path: path.into(),
            message: message.into(),
        }
    }

    /// The error with the flow it happened in: "flow `x`: " before the
    /// message of a runtime or library error, unless the message starts
    /// with a flow already. The one place sources' errors get their flow
    /// ([`crate::engine::source::FlowSource`]); other kinds (I/O, checkpoint
    /// files, DataFusion) are returned as they are.
    pub fn in_flow(self, flow: &str) -> Self {
        let named = |text: String| {
            if text.starts_with("flow `") {
                text
            } else {
                format!("flow `{flow}`: {text}")
            }
        };
        match self {
            Error::Runtime { message, help } => Error::Runtime {
                message: named(message),
                help,
            },
            Error::External {
                context,
                help,
                source,
            } => Error::External {
                context: named(context),
                help,
                source,
            },
            other => other,
        }
    }

    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_external_error_keeps_its_cause_and_reads_as_before() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = Error::external_with_help(
            "flow `f`: cannot read parquet file a.parquet",
            "replace it",
            io,
        );
        assert_eq!(
            e.to_string(),
            "flow `f`: cannot read parquet file a.parquet: no such file\n  help: replace it"
        );
        let cause = std::error::Error::source(&e).unwrap();
        assert_eq!(
            cause.downcast_ref::<std::io::Error>().map(|e| e.kind()),
            Some(std::io::ErrorKind::NotFound)
        );
        assert_eq!(Error::external("doing", "why").to_string(), "doing: why");
    }

    #[test]
    fn the_flow_is_named_once() {
        let e = Error::runtime_with_help("no memory stream named `s`", "create it").in_flow("f");
        assert_eq!(
            e.to_string(),
            "flow `f`: no memory stream named `s`\n  help: create it"
        );
        assert_eq!(e.in_flow("f").to_string().matches("flow `f`").count(), 1);
        let io = std::io::Error::other("disk full");
        let e = Error::external("cannot read a.parquet", io).in_flow("g");
        assert_eq!(e.to_string(), "flow `g`: cannot read a.parquet: disk full");
        assert!(std::error::Error::source(&e).is_some());
        let e = Error::checkpoint("offsets/3", "truncated").in_flow("f");
        assert_eq!(e.to_string(), "checkpoint file offsets/3: truncated");
    }
}
