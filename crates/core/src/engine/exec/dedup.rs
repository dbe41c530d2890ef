//! Streaming deduplication: `drop_duplicates(cols)` and
//! `drop_duplicates_within_watermark(cols)` over a stream.
//!
//! The state is the set of keys seen (the deduplication columns). A row is
//! emitted the first time its key is seen, in any batch. With a watermark,
//! rows at or behind the watermark for late rows are dropped and counted
//! first (Spark's rule), and keys are evicted once the watermark passes them:
//! for `drop_duplicates` when the key contains the watermarked column
//! (`key time <= watermark`); for `drop_duplicates_within_watermark` each
//! key expires at its first row's event time plus the watermark delay.

use crate::engine::storage::Location;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, UInt32Array};
use arrow::compute::{concat_batches, filter_record_batch, take_record_batch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::physical_plan::aggregates::group_values::new_group_values;
use datafusion::physical_plan::aggregates::order::GroupOrdering;

use super::watermark::timestamp_micros;
use super::{BatchContext, OpFailure, StateOperatorProgress};
use crate::engine::state::{StateChanges, StateStore};
use crate::error::{Error, Result};
use crate::plan::WATERMARK_METADATA_KEY;

const EXPIRES_AT: &str = "__expires_at_us";

/// A streaming deduplication with its state.
pub(crate) struct DedupOp {
    flow: String,
    input_schema: SchemaRef,
    description: String,
    key_indices: Vec<usize>,
    /// The watermarked column of the input, if any.
    event_index: Option<usize>,
    /// Position of the watermarked column among the keys (plain dedup).
    event_in_key: Option<usize>,
    /// `drop_duplicates_within_watermark`: the watermark delay in µs.
    within_delay_us: Option<i64>,
    state_schema: SchemaRef,
    n_keys: usize,
    state: RecordBatch,
    store: Option<StateStore>,
    pending: Option<StateChanges>,
    progress: StateOperatorProgress,
}

impl DedupOp {
    /// A deduplication of rows of `input` on `columns` (None: every column).
    pub(crate) fn new(
        flow: &str,
        input: &SchemaRef,
        columns: Option<&[String]>,
        within_watermark: bool,
    ) -> Result<DedupOp> {
        let key_indices: Vec<usize> = match columns {
            None => (0..input.fields().len()).collect(),
            Some(cols) => cols
                .iter()
                .map(|c| {
                    input
                        .index_of(c)
                        .or_else(|_| {
                            input
                                .fields()
                                .iter()
                                .position(|f| f.name().eq_ignore_ascii_case(c))
                                .ok_or(())
                        })
                        .map_err(|_| {
                            Error::from(crate::error::PlanError::new(format!(
                                "flow `{flow}`: drop_duplicates column `{c}` is not in the input"
                            )))
                        })
                })
                .collect::<Result<_>>()?,
        };
        let event_index = input.fields().iter().position(|f| {
            f.metadata().contains_key(WATERMARK_METADATA_KEY)
                && matches!(f.data_type(), DataType::Timestamp(..))
        });
        let delay_ms: Option<i64> = event_index.and_then(|i| {
            input
                .field(i)
                .metadata()
                .get(WATERMARK_METADATA_KEY)
                .and_then(|v| v.parse().ok())
        });
        let within_delay_us = if within_watermark {
            match delay_ms {
                Some(d) => Some(d.saturating_mul(1000)),
                None => {
                    return Err(crate::error::PlanError::with_help(
                        format!("flow `{flow}`: drop_duplicates_within_watermark needs a watermark on its input"),
                        "add .with_watermark(\"ts\", \"10 minutes\") before it",
                    )
                    .into())
                }
            }
        } else {
            None
        };
        let event_in_key = event_index.and_then(|e| key_indices.iter().position(|k| *k == e));
        let mut fields: Vec<Field> = key_indices
            .iter()
            .map(|i| input.field(*i).clone().with_metadata(Default::default()))
            .collect();
        if within_watermark {
            fields.push(Field::new(EXPIRES_AT, DataType::Int64, true));
        }
        let n_keys = key_indices.len();
        let names: Vec<String> = key_indices
            .iter()
            .map(|i| input.field(*i).name().clone())
            .collect();
        let state_schema = Arc::new(Schema::new(fields));
        Ok(DedupOp {
            flow: flow.to_string(),
            input_schema: input.clone(),
            description: format!(
                "{} [{}]",
                if within_watermark {
                    "drop_duplicates_within_watermark"
                } else {
                    "drop_duplicates"
                },
                names.join(", ")
            ),
            key_indices,
            event_index,
            event_in_key,
            within_delay_us,
            state: RecordBatch::new_empty(state_schema.clone()),
            state_schema,
            n_keys,
            store: None,
            pending: None,
            progress: StateOperatorProgress::new("dedupe"),
        })
    }

    /// What the shape check records for this operator.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{} state ({})",
            self.description,
            crate::plan::ddl::schema_to_ddl(&self.state_schema)
        )
    }

    /// The rows the operator receives.
    pub(crate) fn input_schema(&self) -> SchemaRef {
        self.input_schema.clone()
    }

    /// Opens the state at `dir` and loads batch `version`'s state.
    pub(crate) fn restore(&mut self, dir: &Location, version: Option<u64>) -> Result<()> {
        let store = StateStore::open(dir, self.state_schema.clone(), self.n_keys)?;
        self.state = store.load_or_empty(version)?;
        self.store = Some(store);
        Ok(())
    }

    /// Writes the state changes of batch `version`.
    pub(crate) fn commit(&mut self, version: u64, whole: bool) -> Result<()> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        store.commit_changes(
            version,
            self.pending.take(),
            std::slice::from_ref(&self.state),
            whole,
        )
    }

    /// The progress of the last batch.
    pub(crate) fn progress(&self) -> StateOperatorProgress {
        self.progress.clone()
    }

    /// Runs one batch; returns the rows to emit and (when the batch asks
    /// for them) the rows dropped as late.
    pub(crate) fn process(
        &mut self,
        input: Vec<RecordBatch>,
        ctx: &BatchContext,
    ) -> Result<(Vec<RecordBatch>, Vec<RecordBatch>)> {
        let mut late = Vec::new();
        let r = self.run(input, ctx, &mut late);
        r.map(|rows| (rows, late)).map_err(|e| {
            Error::runtime(format!(
                "flow `{}`: deduplication failed: {}",
                self.flow, e.0
            ))
        })
    }

    fn run(
        &mut self,
        input: Vec<RecordBatch>,
        ctx: &BatchContext,
        late_rows: &mut Vec<RecordBatch>,
    ) -> std::result::Result<Vec<RecordBatch>, OpFailure> {
        let schema = match input.first() {
            Some(b) => b.schema(),
            None => return self.finish(None, 0, ctx),
        };
        let batch = concat_batches(&schema, &input)?;
        // Late rows.
        let mut dropped = 0u64;
        let batch = match (self.event_index, ctx.watermark_for_late_ms) {
            (Some(e), Some(wm)) if batch.num_rows() > 0 => {
                let t = timestamp_micros(batch.column(e))
                    .ok_or_else(|| OpFailure("the watermarked column is not a timestamp".into()))?;
                let wm_us = wm.saturating_mul(1000);
                let keep: BooleanArray = t
                    .iter()
                    .map(|v| Some(v.is_none_or(|v| v > wm_us)))
                    .collect();
                dropped = (batch.num_rows() - keep.true_count()) as u64;
                if ctx.capture_late_rows && dropped > 0 {
                    let late = filter_record_batch(&batch, &arrow::compute::not(&keep)?)?;
                    let schema = super::strip_metadata(&self.input_schema);
                    late_rows.push(super::with_schema(&late, &schema)?);
                }
                filter_record_batch(&batch, &keep)?
            }
            _ => batch,
        };
        self.finish(Some(batch), dropped, ctx)
    }

    fn finish(
        &mut self,
        batch: Option<RecordBatch>,
        dropped: u64,
        ctx: &BatchContext,
    ) -> std::result::Result<Vec<RecordBatch>, OpFailure> {
        let mut output = Vec::new();
        let mut new_keys: Option<RecordBatch> = None;
        if let Some(batch) = batch.filter(|b| b.num_rows() > 0) {
            let keys: Vec<ArrayRef> = self
                .key_indices
                .iter()
                .map(|i| batch.column(*i).clone())
                .collect();
            let key_schema = Arc::new(Schema::new(
                self.state_schema.fields()[..self.n_keys].to_vec(),
            ));
            let mut groups = new_group_values(key_schema, &GroupOrdering::None)?;
            let mut ids = Vec::new();
            let old = self.state.num_rows();
            groups.intern(&self.state.columns()[..self.n_keys], &mut ids)?;
            ids.clear();
            groups.intern(&keys, &mut ids)?;
            let mut first: Vec<u32> = Vec::new();
            let mut seen = vec![false; groups.len()];
            for (row, g) in ids.iter().enumerate() {
                if *g >= old && !seen[*g] {
                    seen[*g] = true;
                    first.push(row as u32);
                }
            }
            let rows = UInt32Array::from(first);
            let emitted = take_record_batch(&batch, &rows)?;
            let mut cols: Vec<ArrayRef> = self
                .key_indices
                .iter()
                .map(|i| emitted.column(*i).clone())
                .collect();
            if let Some(delay) = self.within_delay_us {
                let e = self
                    .event_index
                    .ok_or_else(|| OpFailure("no watermarked column".into()))?;
                let t = timestamp_micros(emitted.column(e))
                    .ok_or_else(|| OpFailure("the watermarked column is not a timestamp".into()))?;
                let exp: Int64Array = t
                    .iter()
                    .map(|v| v.map(|v| v.saturating_add(delay)))
                    .collect();
                cols.push(Arc::new(exp));
            }
            let n = emitted.num_rows();
            new_keys = Some(super::batch_in_schema(&self.state_schema, cols, n)?);
            if emitted.num_rows() > 0 {
                output.push(emitted);
            }
        }
        let upserts = new_keys.unwrap_or_else(|| RecordBatch::new_empty(self.state_schema.clone()));
        let all = concat_batches(&self.state_schema, [&self.state, &upserts])?;
        // Eviction.
        let evict: Option<BooleanArray> = match ctx.watermark_for_eviction_ms {
            Some(wm) if all.num_rows() > 0 => {
                let wm_us = wm.saturating_mul(1000);
                if self.within_delay_us.is_some() {
                    let exp = all
                        .column(self.n_keys)
                        .as_any()
                        .downcast_ref::<Int64Array>()
                        .ok_or_else(|| OpFailure("bad expiry column".into()))?;
                    Some(
                        exp.iter()
                            .map(|v| Some(v.is_some_and(|v| v <= wm_us)))
                            .collect(),
                    )
                } else if let Some(k) = self.event_in_key {
                    let t = timestamp_micros(all.column(k)).ok_or_else(|| {
                        OpFailure("the watermarked key is not a timestamp".into())
                    })?;
                    Some(
                        t.iter()
                            .map(|v| Some(v.is_some_and(|v| v <= wm_us)))
                            .collect(),
                    )
                } else {
                    None
                }
            }
            _ => None,
        };
        let (state, removed, n_removed) = match evict {
            Some(mask) if mask.true_count() > 0 => {
                let gone = filter_record_batch(&all, &mask)?;
                let keep = arrow::compute::not(&mask)?;
                let n = gone.num_rows();
                (
                    filter_record_batch(&all, &keep)?,
                    gone.columns()[..self.n_keys].to_vec(),
                    n,
                )
            }
            _ => (all, Vec::new(), 0),
        };
        self.state = state;
        self.progress = StateOperatorProgress {
            operator: "dedupe".into(),
            num_rows_total: self.state.num_rows() as u64,
            num_rows_updated: upserts.num_rows() as u64,
            num_rows_removed: n_removed as u64,
            num_rows_dropped_by_watermark: dropped,
            memory_used_bytes: self.state.get_array_memory_size() as u64,
        };
        self.pending = Some((upserts, removed));
        Ok(output)
    }
}
