//! Expectations applied to the rows a flow writes, batch by batch: every
//! condition evaluated once per row (DataFusion physical expressions), rows
//! failing a drop-expectation removed (or sent to the quarantine with the
//! names of what they failed), a failing fail-expectation turned into an
//! error before anything of the batch reaches a sink, and the counts of
//! each expectation for the batch's progress.
//!
//! A row fails an expectation only when its condition is FALSE; TRUE and
//! NULL pass ([`crate::expectations`]).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, ListBuilder, StringBuilder};
use arrow::compute::{filter_record_batch, not};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::DFSchema;
use datafusion::physical_expr::PhysicalExpr;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::expectations::{quarantine_schema, Expectation, ExpectationAction};

/// One expectation's counts in one batch (Lakeflow's
/// `flow_progress.data_quality.expectations[]`).
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct ExpectationMetrics {
    /// The expectation's name.
    pub name: String,
    /// The dataset it belongs to (the flow's target).
    pub dataset: String,
    /// Rows for which its condition was TRUE or NULL.
    pub passed_records: u64,
    /// Rows for which it was FALSE.
    pub failed_records: u64,
}

/// The data-quality part of a batch's progress (Lakeflow's
/// `flow_progress.data_quality`).
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct DataQuality {
    /// Rows removed by drop-expectations (quarantined rows included).
    pub dropped_records: u64,
    /// Of those, rows written to the quarantine.
    #[serde(skip_serializing_if = "is_zero")]
    pub quarantined_records: u64,
    /// Per expectation, in declaration order.
    pub expectations: Vec<ExpectationMetrics>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl DataQuality {
    /// Adds another step's counts (real-time epochs run several).
    pub fn add(&mut self, other: &DataQuality) {
        self.dropped_records += other.dropped_records;
        self.quarantined_records += other.quarantined_records;
        if self.expectations.is_empty() {
            self.expectations = other.expectations.clone();
            return;
        }
        for (mine, theirs) in self.expectations.iter_mut().zip(&other.expectations) {
            mine.passed_records += theirs.passed_records;
            mine.failed_records += theirs.failed_records;
        }
    }

    /// For the terminal line: "3 expectations, 14 rows dropped".
    pub fn summary(&self) -> String {
        let n = self.expectations.len();
        let failed: u64 = self.expectations.iter().map(|e| e.failed_records).sum();
        let mut s = format!("{n} expectation{}", if n == 1 { "" } else { "s" });
        if self.dropped_records > 0 {
            s.push_str(&format!(", {} rows dropped", self.dropped_records));
            if self.quarantined_records > 0 {
                s.push_str(&format!(" ({} quarantined)", self.quarantined_records));
            }
        } else if failed > 0 {
            s.push_str(&format!(", {failed} failures kept"));
        }
        s
    }
}

/// One compiled expectation.
struct Check {
    expectation: Expectation,
    expr: Arc<dyn PhysicalExpr>,
}

/// A flow's expectations, compiled against its output schema.
pub struct QualityChecks {
    flow: String,
    dataset: String,
    dataset_subject: String,
    checks: Vec<Check>,
    quarantine: Option<SchemaRef>,
    /// Under the real-time trigger a batch is an epoch whose earlier steps
    /// already reached the sink: the fail message says so.
    real_time: bool,
}

/// A batch's rows after the expectations.
#[derive(Debug, Default)]
pub struct Checked {
    /// The rows to write to the target.
    pub rows: Vec<RecordBatch>,
    /// The rows for the quarantine (with the failed expectations' names).
    pub quarantined: Vec<RecordBatch>,
    /// The counts.
    pub quality: DataQuality,
}

impl QualityChecks {
    /// Compiles `expectations` of `dataset` (a subject such as "streaming
    /// table `orders`") for rows of `schema`; with `quarantine`, dropped rows
    /// are kept for it.
    pub fn compile(
        flow: &str,
        dataset: &str,
        dataset_subject: &str,
        expectations: &[Expectation],
        schema: &SchemaRef,
        quarantine: bool,
    ) -> Result<Option<Self>> {
        if expectations.is_empty() {
            return Ok(None);
        }
        let plain = crate::engine::exec::strip_metadata(schema);
        let df_schema = DFSchema::try_from(plain.as_ref().clone())
            .map_err(|e| Error::runtime(format!("flow `{flow}`: {e}")))?;
        let state = crate::plan::sql::sql_context().state();
        let mut checks = Vec::new();
        for e in expectations {
            let logical = crate::expectations::check_condition(&e.name, &e.condition, &plain)
                .map_err(|p| {
                    Error::runtime_with_help(
                        format!("flow `{flow}`: {}", p.message),
                        p.help.unwrap_or_default(),
                    )
                })?;
            let expr = state
                .create_physical_expr(logical, &df_schema)
                .map_err(|err| {
                    Error::runtime(format!(
                        "flow `{flow}`: expectation `{}` could not be compiled: {}",
                        e.name,
                        err.strip_backtrace()
                    ))
                })?;
            checks.push(Check {
                expectation: e.clone(),
                expr,
            });
        }
        Ok(Some(QualityChecks {
            flow: flow.to_string(),
            dataset: dataset.to_string(),
            dataset_subject: dataset_subject.to_string(),
            checks,
            quarantine: quarantine.then(|| Arc::new(quarantine_schema(&plain))),
            real_time: false,
        }))
    }

    /// The schema of the rows for the quarantine, when there is one.
    pub fn quarantine_schema(&self) -> Option<&SchemaRef> {
        self.quarantine.as_ref()
    }

    /// The same checks for a flow under the real-time trigger.
    pub fn in_real_time(mut self) -> Self {
        self.real_time = true;
        self
    }

    /// Applies the expectations to batch `batch_id`'s rows. A failing
    /// fail-expectation is an error naming it, the dataset, the batch and
    /// one offending row; nothing is returned to write.
    pub fn apply(&self, batch_id: u64, batches: Vec<RecordBatch>) -> Result<Checked> {
        let mut out = Checked {
            quality: DataQuality {
                expectations: self
                    .checks
                    .iter()
                    .map(|c| ExpectationMetrics {
                        name: c.expectation.name.clone(),
                        dataset: self.dataset.clone(),
                        passed_records: 0,
                        failed_records: 0,
                    })
                    .collect(),
                ..DataQuality::default()
            },
            ..Checked::default()
        };
        for batch in batches {
            if batch.num_rows() == 0 {
                continue;
            }
            let rows = batch.num_rows();
            // Per expectation: which rows pass (only FALSE fails).
            let mut passes: Vec<BooleanArray> = Vec::with_capacity(self.checks.len());
            for (i, check) in self.checks.iter().enumerate() {
                let pass = self.evaluate(check, &batch)?;
                let passed = pass.true_count() as u64;
                let m = &mut out.quality.expectations[i];
                m.passed_records += passed;
                m.failed_records += rows as u64 - passed;
                passes.push(pass);
            }
            // A failed fail-expectation stops the batch.
            for (check, pass) in self.checks.iter().zip(&passes) {
                if check.expectation.action == ExpectationAction::Fail && pass.true_count() < rows {
                    return Err(self.failure(batch_id, check, pass, &batch, &out.quality));
                }
            }
            let drops: Vec<&BooleanArray> = self
                .checks
                .iter()
                .zip(&passes)
                .filter(|(c, _)| c.expectation.action == ExpectationAction::Drop)
                .map(|(_, p)| p)
                .collect();
            if drops.is_empty() {
                out.rows.push(batch);
                continue;
            }
            let mut keep = drops[0].clone();
            for p in &drops[1..] {
                keep = arrow::compute::and(&keep, p).map_err(arrow_error)?;
            }
            let kept = keep.true_count();
            if kept == rows {
                out.rows.push(batch);
                continue;
            }
            out.quality.dropped_records += (rows - kept) as u64;
            let removed = not(&keep).map_err(arrow_error)?;
            if let Some(schema) = &self.quarantine {
                let failed = self.failed_names(&passes, &removed);
                let bad = filter_record_batch(&batch, &removed).map_err(arrow_error)?;
                let mut columns: Vec<ArrayRef> = bad.columns().to_vec();
                columns.push(failed);
                let q = RecordBatch::try_new(schema.clone(), columns).map_err(arrow_error)?;
                out.quality.quarantined_records += q.num_rows() as u64;
                out.quarantined.push(q);
            }
            if kept > 0 {
                out.rows
                    .push(filter_record_batch(&batch, &keep).map_err(arrow_error)?);
            }
        }
        Ok(out)
    }

    /// Which rows pass `check`: TRUE or NULL (only FALSE fails).
    fn evaluate(&self, check: &Check, batch: &RecordBatch) -> Result<BooleanArray> {
        let value = check
            .expr
            .evaluate(batch)
            .and_then(|v| v.into_array(batch.num_rows()))
            .map_err(|e| {
                Error::runtime(format!(
                    "flow `{}`: expectation `{}` could not be evaluated: {}",
                    self.flow,
                    check.expectation.name,
                    e.strip_backtrace()
                ))
            })?;
        let Some(b) = value.as_any().downcast_ref::<BooleanArray>() else {
            // A NULL-typed condition (`NULL`) is not FALSE: every row passes.
            return Ok(BooleanArray::from(vec![true; batch.num_rows()]));
        };
        if b.null_count() == 0 {
            return Ok(b.clone());
        }
        // NULL is not a violation: NULL OR TRUE is TRUE.
        let nulls = arrow::compute::is_null(b).map_err(arrow_error)?;
        arrow::compute::or_kleene(b, &nulls).map_err(arrow_error)
    }

    /// For each removed row, the names of every expectation it failed.
    fn failed_names(&self, passes: &[BooleanArray], removed: &BooleanArray) -> ArrayRef {
        let mut builder = ListBuilder::new(StringBuilder::new());
        for row in 0..removed.len() {
            if !removed.value(row) {
                continue;
            }
            for (check, pass) in self.checks.iter().zip(passes) {
                if !pass.value(row) {
                    builder.values().append_value(&check.expectation.name);
                }
            }
            builder.append(true);
        }
        Arc::new(builder.finish())
    }

    fn failure(
        &self,
        batch_id: u64,
        check: &Check,
        pass: &BooleanArray,
        batch: &RecordBatch,
        quality: &DataQuality,
    ) -> Error {
        let e = &check.expectation;
        let row = (0..pass.len()).find(|&i| !pass.value(i)).unwrap_or(0);
        let failed = quality
            .expectations
            .iter()
            .find(|m| m.name == e.name)
            .map(|m| m.failed_records)
            .unwrap_or(1);
        Error::runtime_with_help(
            format!(
                "flow `{}`: expectation `{}` of {} failed in batch {batch_id}: {failed} row{} not meeting `{}`, e.g. {}",
                self.flow,
                e.name,
                self.dataset_subject,
                if failed == 1 { "" } else { "s" },
                e.condition.trim(),
                describe_row(batch, row),
            ),
            if self.real_time {
                format!(
                    "epoch {batch_id} was not committed; the rows of its earlier steps already reached the sink (real-time mode delivers at least once); fix the data or the expectation and run again: the epoch runs again from the last committed one"
                )
            } else {
                format!(
                    "nothing of batch {batch_id} was written or committed; fix the data or the expectation and run again: the batch is replayed from its logged offsets"
                )
            },
        )
    }
}

/// `{id: 7, amount: -3}`: a row's values, each cut to 40 characters, at
/// most 12 columns.
fn describe_row(batch: &RecordBatch, row: usize) -> String {
    const MAX_VALUE: usize = 40;
    const MAX_COLUMNS: usize = 12;
    let options = FormatOptions::default().with_null("NULL");
    let schema = batch.schema();
    let mut parts = Vec::new();
    for (field, column) in schema
        .fields()
        .iter()
        .zip(batch.columns())
        .take(MAX_COLUMNS)
    {
        let value = ArrayFormatter::try_new(column.as_ref(), &options)
            .map(|f| f.value(row).to_string())
            .unwrap_or_else(|_| "?".to_string());
        let value = if value.chars().count() > MAX_VALUE {
            format!("{}...", value.chars().take(MAX_VALUE).collect::<String>())
        } else {
            value
        };
        parts.push(format!("{}: {value}", field.name()));
    }
    if schema.fields().len() > MAX_COLUMNS {
        parts.push("...".to_string());
    }
    format!("{{{}}}", parts.join(", "))
}

fn arrow_error(e: arrow::error::ArrowError) -> Error {
    Error::runtime(format!("expectations: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};

    fn batch(values: &[Option<i64>]) -> (SchemaRef, RecordBatch) {
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, true)]));
        let b = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from(values.to_vec()))],
        )
        .unwrap();
        (schema, b)
    }

    #[test]
    fn null_passes_false_fails_and_the_summary_says_so() {
        let (schema, b) = batch(&[Some(1), None, Some(-1), Some(0)]);
        let checks = QualityChecks::compile(
            "f",
            "t",
            "streaming table `t`",
            &[
                Expectation::drop("positive", "n > 0"),
                Expectation::warn("always_null", "NULL"),
            ],
            &schema,
            true,
        )
        .unwrap()
        .unwrap();
        let out = checks.apply(0, vec![b]).unwrap();
        assert_eq!(out.rows[0].num_rows(), 2);
        assert_eq!(out.quarantined[0].num_rows(), 2);
        let counts: Vec<(&str, u64, u64)> = out
            .quality
            .expectations
            .iter()
            .map(|e| (e.name.as_str(), e.passed_records, e.failed_records))
            .collect();
        assert_eq!(counts, [("positive", 2, 2), ("always_null", 4, 0)]);
        assert_eq!(
            out.quality.summary(),
            "2 expectations, 2 rows dropped (2 quarantined)"
        );
        let mut sum = DataQuality::default();
        sum.add(&out.quality);
        sum.add(&out.quality);
        assert_eq!(sum.dropped_records, 4);
        assert_eq!(sum.expectations[0].failed_records, 4);
    }

    #[test]
    fn a_failed_row_is_shown_cut_to_forty_characters() {
        let schema = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, true)]));
        let long = "x".repeat(50);
        let b = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(arrow::array::StringArray::from(vec![
                Some("ok"),
                Some(long.as_str()),
            ]))],
        )
        .unwrap();
        let checks = QualityChecks::compile(
            "f",
            "t",
            "sink `t`",
            &[Expectation::fail("short", "length(s) < 10")],
            &schema,
            false,
        )
        .unwrap()
        .unwrap();
        let err = checks.apply(7, vec![b]).unwrap_err().to_string();
        assert_eq!(
            err.lines().next().unwrap(),
            format!(
                "flow `f`: expectation `short` of sink `t` failed in batch 7: 1 row not meeting `length(s) < 10`, e.g. {{s: {}...}}",
                "x".repeat(40)
            )
        );
    }
}
