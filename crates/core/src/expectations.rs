//! Data-quality expectations, as Lakeflow declares them: a name, a SQL
//! boolean condition every row of a dataset should meet, and what to do
//! with a row that does not ([`ExpectationAction`]: keep and count it, drop
//! it, or fail the flow's batch). A dataset may also name a quarantine
//! table or sink that receives the rows its drop-expectations removed.
//!
//! Declared with `#[dp::expect(...)]` and its siblings, with
//! [`crate::Pipeline::expect`], under a table's `expectations:` in the spec,
//! or with `CONSTRAINT name EXPECT (cond) ON VIOLATION ...` in SQL. The
//! graph checks each condition against the dataset's schema at dry-run
//! ([`check_condition`]); the engine applies them to every batch a flow
//! writes (`engine::quality`).
//!
//! A row *fails* an expectation only when its condition is FALSE; TRUE and
//! NULL pass, as Lakeflow defines a violation ("the boolean returns false")
//! and as SQL's CHECK constraints treat an unknown result: `age > 0` passes
//! a row whose `age` is NULL. Write `age IS NOT NULL AND age > 0` to catch
//! NULLs too.

use std::fmt;

use arrow::datatypes::{DataType, Schema};
use datafusion::logical_expr::Expr;

use crate::error::{Origin, PlanError};

/// What happens to a row that fails an expectation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ExpectationAction {
    /// Keep the row and count it (`expect`, SQL without `ON VIOLATION`).
    Warn,
    /// Remove the row before the sink and count it (`expect_or_drop`,
    /// `ON VIOLATION DROP ROW`); with a quarantine it goes there instead.
    Drop,
    /// Stop the flow at this batch, committing nothing of it
    /// (`expect_or_fail`, `ON VIOLATION FAIL UPDATE`).
    Fail,
}

impl ExpectationAction {
    /// Every action, in the order the docs list them.
    pub const ALL: [ExpectationAction; 3] = [
        ExpectationAction::Warn,
        ExpectationAction::Drop,
        ExpectationAction::Fail,
    ];

    /// The name used in the spec and in messages: `warn`, `drop`, `fail`.
    pub fn name(self) -> &'static str {
        match self {
            ExpectationAction::Warn => "warn",
            ExpectationAction::Drop => "drop",
            ExpectationAction::Fail => "fail",
        }
    }

    /// The action named `s` (any case), if any.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s.trim()))
    }
}

impl fmt::Display for ExpectationAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One expectation of a dataset or flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectation {
    /// Its name, unique per dataset; metrics and errors use it.
    pub name: String,
    /// A SQL boolean expression over the dataset's columns.
    pub condition: String,
    /// What a failing row does.
    pub action: ExpectationAction,
    /// Where it was declared.
    pub origin: Option<Origin>,
}

impl Expectation {
    /// An expectation with the given action.
    pub fn new(
        name: impl Into<String>,
        condition: impl Into<String>,
        action: ExpectationAction,
    ) -> Self {
        Expectation {
            name: name.into(),
            condition: condition.into(),
            action,
            origin: None,
        }
    }

    /// `expect`: failing rows are kept and counted.
    pub fn warn(name: impl Into<String>, condition: impl Into<String>) -> Self {
        Self::new(name, condition, ExpectationAction::Warn)
    }

    /// `expect_or_drop`: failing rows are removed (or quarantined) and counted.
    pub fn drop(name: impl Into<String>, condition: impl Into<String>) -> Self {
        Self::new(name, condition, ExpectationAction::Drop)
    }

    /// `expect_or_fail`: a failing row stops the flow at its batch.
    pub fn fail(name: impl Into<String>, condition: impl Into<String>) -> Self {
        Self::new(name, condition, ExpectationAction::Fail)
    }

    /// The same expectation, declared at `origin`.
    pub fn at(mut self, origin: Option<Origin>) -> Self {
        self.origin = origin;
        self
    }
}

/// An expectation written with an attribute macro (`#[dp::expect(..)]`),
/// stored in the macro's static declaration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExpectationDecl {
    /// Its name.
    pub name: &'static str,
    /// Its SQL condition.
    pub condition: &'static str,
    /// What a failing row does.
    pub action: ExpectationAction,
    /// The line of the attribute.
    pub line: u32,
}

impl ExpectationDecl {
    /// As an owned [`Expectation`] declared in `file`.
    pub fn to_expectation(&self, file: &str) -> Expectation {
        Expectation::new(self.name, self.condition, self.action).at(Some(Origin::Code {
            file: file.to_string(),
            line: self.line,
        }))
    }
}

/// The column a quarantined row carries beside the dataset's columns: the
/// names of the drop-expectations it failed, in declaration order.
pub const FAILED_EXPECTATIONS_COLUMN: &str = "_failed_expectations";

/// The data type of [`FAILED_EXPECTATIONS_COLUMN`]: an array of strings.
pub fn failed_expectations_type() -> DataType {
    DataType::List(std::sync::Arc::new(arrow::datatypes::Field::new(
        "item",
        DataType::Utf8,
        true,
    )))
}

/// The schema of a quarantine for rows of `schema`: its columns plus
/// [`FAILED_EXPECTATIONS_COLUMN`].
pub fn quarantine_schema(schema: &Schema) -> Schema {
    let mut fields: Vec<_> = schema.fields().iter().cloned().collect();
    fields.push(std::sync::Arc::new(arrow::datatypes::Field::new(
        FAILED_EXPECTATIONS_COLUMN,
        failed_expectations_type(),
        false,
    )));
    Schema::new(fields)
}

/// The condition of expectation `name` as an expression over `schema`:
/// a SQL boolean expression (an unknown column gets a "did you mean", an
/// aggregate or another type is refused with the fix).
pub fn check_condition(name: &str, condition: &str, schema: &Schema) -> Result<Expr, PlanError> {
    let what = format!(
        "the condition `{}` of expectation `{name}`",
        condition.trim()
    );
    let (expr, data_type) = crate::plan::resolve_condition(condition, schema, &what)?;
    match data_type {
        DataType::Boolean | DataType::Null => Ok(expr),
        other => Err(PlanError::with_help(
            format!(
                "{what} is {}, not a boolean",
                crate::plan::ddl::type_to_ddl(&other)
            ),
            format!(
                "an expectation is a SQL condition that is true for good rows, e.g. `{} IS NOT NULL`",
                condition.trim()
            ),
        )),
    }
}
