//! AUTO CDC applied micro-batch by micro-batch: the change feed's rows (the
//! flow's plan output, with the computed sequence, delete and truncate
//! columns of [`crate::cdc`]) and the flow's CDC state become the keyed
//! changes ([`ChangeSet`]) its target applies in one commit.
//!
//! - [`scd1`]: one row per key, the event with the highest sequence; the
//!   state is the latest sequence per key and a tombstone per deleted key
//!   (kept [`TOMBSTONE_GC_THRESHOLD`](crate::cdc::TOMBSTONE_GC_THRESHOLD)
//!   seconds of processing time), and the sequence of the latest truncate.
//! - [`scd2`]: every version of every key; the state is every event, so a
//!   late event is placed into history at its sequence position and the
//!   versions it changes are rewritten.
//!
//! Every batch is validated first (Spark's `AUTOCDC_MICROBATCH_VALIDATION`:
//! a NULL key or sequence is an error naming the flow, the batch and the
//! first key); nothing of a failed batch is written or committed. The state
//! lives in `<checkpoint>/state/cdc/` as a [`StateStore`] (one version per
//! committed batch, so a replayed batch recomputes the same changes and the
//! target skips them), with `metadata.json` recording the sequence type:
//! a changed type is `SEQUENCING_TYPE_DRIFT`.
//!
//! Sequences, keys and tracked columns are compared as Arrow row-format
//! bytes ([`arrow::row`]), whose byte order is the values' sort order
//! (NULLs first), for any orderable type including structs.

mod scd1;
mod scd2;

use crate::engine::storage::Location;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, Rows, SortField};
use arrow::util::display::{ArrayFormatter, FormatOptions};

use crate::cdc::{
    AutoCdc, CdcLayout, ScdType, DEFAULT_TOMBSTONE_GC_SECONDS, TOMBSTONE_GC_THRESHOLD,
};
use crate::engine::sink::{ChangeSet, CHANGE_DELETES};
use crate::engine::state::StateStore;
use crate::error::{Error, Result};

/// What one flow's AUTO CDC needs between batches, and how it turns a
/// batch of change events into a [`ChangeSet`].
pub struct CdcApplier {
    common: Common,
    store: StateStore,
    kind: Kind,
}

enum Kind {
    One(scd1::Scd1),
    Two(scd2::Scd2),
}

/// The AUTO CDC flow an applier serves.
#[derive(Clone, Copy)]
pub struct CdcFlow<'a> {
    /// The flow's name.
    pub flow: &'a str,
    /// The target table's name.
    pub target: &'a str,
    /// The declaration.
    pub decl: &'a AutoCdc,
    /// The declaration checked against the feed.
    pub layout: &'a CdcLayout,
    /// The schema of the flow's rows (the change feed and the computed columns).
    pub feed: &'a SchemaRef,
}

/// What both SCD types share: the layout, the converters, the names.
pub(crate) struct Common {
    flow: String,
    target: String,
    sequence_by: String,
    layout: CdcLayout,
    keys: RowConverter,
    sequence: RowConverter,
    /// The key's row bytes of a NULL key (SCD 1's truncate marker).
    null_key: Box<[u8]>,
    /// The sequence's row bytes of NULL (an open SCD 2 version's end).
    null_sequence: Box<[u8]>,
    /// The schema of the state's rows.
    state_schema: SchemaRef,
}

/// `metadata.json` of the CDC state.
#[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
#[serde(rename_all = "camelCase")]
struct Metadata {
    scd_type: u8,
    sequence_type: String,
    keys: Vec<String>,
    #[serde(default)]
    track_history: Vec<String>,
}

impl CdcApplier {
    /// The CDC state of the flow `of` under `dir`, as of
    /// batch `last_commit` (empty before the first batch); `tombstone_gc`
    /// is the value of [`TOMBSTONE_GC_THRESHOLD`] when set.
    pub fn open(
        of: CdcFlow<'_>,
        dir: &Location,
        last_commit: Option<u64>,
        tombstone_gc: Option<&str>,
    ) -> Result<CdcApplier> {
        let CdcFlow {
            flow,
            target,
            decl: cdc,
            layout,
            feed,
        } = of;
        let key_fields: Vec<SortField> = layout
            .key_columns
            .iter()
            .map(|&i| SortField::new(feed.field(i).data_type().clone()))
            .collect();
        let keys = RowConverter::new(key_fields).map_err(|e| cdc_error(flow, e))?;
        let sequence = RowConverter::new(vec![SortField::new(layout.sequence_type.clone())])
            .map_err(|e| cdc_error(flow, e))?;
        let null_key = {
            let nulls: Vec<ArrayRef> = layout
                .key_columns
                .iter()
                .map(|&i| arrow::array::new_null_array(feed.field(i).data_type(), 1))
                .collect();
            keys.convert_columns(&nulls)
                .map_err(|e| cdc_error(flow, e))?
                .row(0)
                .data()
                .into()
        };
        let null_sequence = sequence
            .convert_columns(&[arrow::array::new_null_array(&layout.sequence_type, 1)])
            .map_err(|e| cdc_error(flow, e))?
            .row(0)
            .data()
            .into();
        let mut common = Common {
            flow: flow.to_string(),
            target: target.to_string(),
            sequence_by: cdc.sequence_by.clone(),
            layout: layout.clone(),
            keys,
            sequence,
            null_key,
            null_sequence,
            state_schema: Arc::new(Schema::empty()),
        };
        dir.create_dir()?;
        common.check_metadata(dir, last_commit)?;
        let gc_seconds = match tombstone_gc {
            None => DEFAULT_TOMBSTONE_GC_SECONDS,
            Some(v) => v.trim().parse::<u64>().map_err(|_| {
                Error::runtime_with_help(
                    format!("AUTO CDC flow `{flow}`: `{TOMBSTONE_GC_THRESHOLD}` is `{v}`, not a number of seconds"),
                    format!("set `{TOMBSTONE_GC_THRESHOLD}` to whole seconds, e.g. 172800 (2 days, the default)"),
                )
            })?,
        };
        let (store, kind) = match layout.scd {
            ScdType::One => {
                let schema = scd1::state_schema(&common, feed);
                common.state_schema = schema.clone();
                let store = StateStore::open(dir, schema, layout.key_columns.len())?;
                let loaded = store.load_or_empty(last_commit)?;
                let state = scd1::Scd1::load(&common, &loaded, gc_seconds)?;
                (store, Kind::One(state))
            }
            ScdType::Two => {
                let schema = scd2::state_schema(&common, feed);
                common.state_schema = schema.clone();
                let store = StateStore::open(dir, schema, layout.key_columns.len() + 1)?;
                let loaded = store.load_or_empty(last_commit)?;
                let state = scd2::Scd2::load(&common, feed, loaded)?;
                (store, Kind::Two(state))
            }
        };
        Ok(CdcApplier {
            common,
            store,
            kind,
        })
    }

    /// The changes batch `batch_id` makes to the target, from its change
    /// events `rows`; `batch_timestamp_ms` is the batch's processing time
    /// (tombstones are collected against it). The state changes too, and is
    /// made durable by [`commit`](Self::commit).
    pub fn apply(
        &mut self,
        batch_id: u64,
        rows: &[RecordBatch],
        batch_timestamp_ms: i64,
    ) -> Result<ChangeSet> {
        let feed = match rows.first() {
            Some(first) => {
                concat_batches(&first.schema(), rows).map_err(|e| self.common.error(e))?
            }
            None => {
                return Ok(ChangeSet {
                    rows: RecordBatch::new_empty(self.common.change_schema()),
                    match_on: self.common.match_on(),
                    inserts_only: true,
                })
            }
        };
        let events = self.common.events(batch_id, &feed)?;
        match &mut self.kind {
            Kind::One(s) => s.apply(&self.common, &feed, &events, batch_timestamp_ms),
            Kind::Two(s) => s.apply(&self.common, &feed, &events),
        }
    }

    /// Records the state after batch `batch_id` (call after the target
    /// applied its changes, before the batch's commit).
    pub fn commit(&mut self, batch_id: u64) -> Result<()> {
        let (upserts, removed, full) = match &mut self.kind {
            Kind::One(s) => s.take_changes(&self.common, batch_id)?,
            Kind::Two(s) => s.take_changes(&self.common, batch_id)?,
        };
        self.store
            .commit_changes(batch_id, Some((upserts, removed)), &full, false)
    }

    /// The state after the last [`apply`](Self::apply), as a state
    /// operator's progress (`autoCdc`): rows held (SCD 1: keys, tombstones
    /// included; SCD 2: events), rows the batch changed or removed, bytes.
    pub fn progress(&self) -> crate::engine::exec::StateOperatorProgress {
        let (updated, removed, bytes) = match &self.kind {
            Kind::One(s) => s.progress(),
            Kind::Two(s) => s.progress(),
        };
        crate::engine::exec::StateOperatorProgress {
            operator: "autoCdc".to_string(),
            num_rows_total: self.state_rows(),
            num_rows_updated: updated,
            num_rows_removed: removed,
            num_rows_dropped_by_watermark: 0,
            memory_used_bytes: bytes,
        }
    }

    /// Keys (SCD 1, tombstones included) or events (SCD 2) held in the state.
    pub fn state_rows(&self) -> u64 {
        match &self.kind {
            Kind::One(s) => s.len() as u64,
            Kind::Two(s) => s.len() as u64,
        }
    }
}

/// A batch's change events as row bytes and flags.
pub(crate) struct Events {
    pub(crate) keys: Rows,
    pub(crate) sequences: Rows,
    pub(crate) deletes: BooleanArray,
    pub(crate) truncates: BooleanArray,
}

impl Common {
    /// The target's schema plus [`CHANGE_DELETES`].
    pub(crate) fn change_schema(&self) -> SchemaRef {
        let mut fields: Vec<Field> = self
            .layout
            .target_schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new(CHANGE_DELETES, DataType::Boolean, false));
        Arc::new(Schema::new(fields))
    }

    /// The state's key columns (`__cdc_key<i>`, the keys' types).
    pub(crate) fn key_fields(&self, feed: &SchemaRef) -> Vec<Field> {
        self.layout
            .key_columns
            .iter()
            .enumerate()
            .map(|(j, &k)| {
                Field::new(
                    format!("__cdc_key{j}"),
                    feed.field(k).data_type().clone(),
                    true,
                )
            })
            .collect()
    }

    /// The columns identifying a target row.
    pub(crate) fn match_on(&self) -> Vec<String> {
        let mut on = self.layout.key_names.clone();
        if self.layout.scd == ScdType::Two {
            on.push(crate::cdc::START_AT.to_string());
        }
        on
    }

    fn error(&self, e: impl std::fmt::Display) -> Error {
        cdc_error(&self.flow, e)
    }

    /// The batch's keys, sequences and flags, after Spark's micro-batch
    /// validation (in its order): no NULL sequence, no NULL key (truncates
    /// have none).
    fn events(&self, batch_id: u64, feed: &RecordBatch) -> Result<Events> {
        let l = &self.layout;
        let flag = |i: usize| -> Result<BooleanArray> {
            let a = feed.column(i);
            let b = a.as_any().downcast_ref::<BooleanArray>().ok_or_else(|| {
                self.error(format!(
                    "column {i} is {} instead of BOOLEAN",
                    a.data_type()
                ))
            })?;
            // NULL conditions were coalesced to false by the query.
            Ok(BooleanArray::from(b.values().clone()))
        };
        let deletes = flag(l.delete_column)?;
        let truncates = flag(l.truncate_column)?;
        let seq = feed.column(l.sequence_column);
        if seq.null_count() > 0 {
            let first = (0..feed.num_rows()).find(|&r| seq.is_null(r)).unwrap_or(0);
            let n = seq.null_count();
            return Err(Error::runtime_with_help(
                format!(
                    "AUTO CDC flow `{}` into `{}`, batch {batch_id}: {n} row{} with a NULL sequence value (sequence_by `{}`), the first with key {} [AUTOCDC_MICROBATCH_VALIDATION.NULL_SEQUENCE]",
                    self.flow,
                    self.target,
                    if n == 1 { "" } else { "s" },
                    self.sequence_by,
                    self.describe_key(feed, first)
                ),
                format!("every event needs a sequence value: fill or filter the NULLs in a view before the flow; nothing of batch {batch_id} was written, and it runs again on the next start"),
            ));
        }
        let mut null_keys: Vec<(String, usize)> = Vec::new();
        let mut first_null_key = None;
        for (j, &c) in l.key_columns.iter().enumerate() {
            let col = feed.column(c);
            let n = (0..feed.num_rows())
                .filter(|&r| col.is_null(r) && !truncates.value(r))
                .inspect(|&r| {
                    first_null_key.get_or_insert(r);
                })
                .count();
            if n > 0 {
                null_keys.push((l.key_names[j].clone(), n));
            }
        }
        if !null_keys.is_empty() {
            let counts = null_keys
                .iter()
                .map(|(k, n)| format!("`{k}`: {n}"))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(Error::runtime_with_help(
                format!(
                    "AUTO CDC flow `{}` into `{}`, batch {batch_id}: rows with a NULL key ({counts}), the first with key {} [AUTOCDC_MICROBATCH_VALIDATION.NULL_KEY]",
                    self.flow,
                    self.target,
                    self.describe_key(feed, first_null_key.unwrap_or(0))
                ),
                format!("every event needs its keys: filter the NULL keys out of the change feed in a view; nothing of batch {batch_id} was written, and it runs again on the next start"),
            ));
        }
        let key_columns: Vec<ArrayRef> = l
            .key_columns
            .iter()
            .map(|&c| feed.column(c).clone())
            .collect();
        let keys = self
            .keys
            .convert_columns(&key_columns)
            .map_err(|e| self.error(e))?;
        let sequences = self
            .sequence
            .convert_columns(std::slice::from_ref(seq))
            .map_err(|e| self.error(e))?;
        Ok(Events {
            keys,
            sequences,
            deletes,
            truncates,
        })
    }

    /// "id=7, region=eu".
    fn describe_key(&self, feed: &RecordBatch, row: usize) -> String {
        let options = FormatOptions::default().with_null("NULL");
        self.layout
            .key_columns
            .iter()
            .zip(&self.layout.key_names)
            .map(|(&c, name)| {
                let v = ArrayFormatter::try_new(feed.column(c).as_ref(), &options)
                    .map(|f| f.value(row).to_string())
                    .unwrap_or_default();
                format!("{name}={v}")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// SCD 2: the tracked columns' names (empty for SCD 1).
    fn tracked_names(&self) -> Vec<String> {
        if self.layout.scd == ScdType::One {
            return Vec::new();
        }
        let names: Vec<String> = self
            .layout
            .value_columns
            .iter()
            .zip(self.layout.target_schema.fields())
            .filter(|(c, _)| self.layout.tracked_columns.contains(c))
            .map(|(_, f)| f.name().clone())
            .collect();
        names
    }

    /// Key arrays of `keys` (row bytes).
    pub(crate) fn key_arrays(&self, keys: &[&[u8]]) -> Result<Vec<ArrayRef>> {
        let parser = self.keys.parser();
        self.keys
            .convert_rows(keys.iter().map(|k| parser.parse(k)))
            .map_err(|e| self.error(e))
    }

    /// The sequence array of `sequences` (row bytes).
    pub(crate) fn sequence_array(&self, sequences: &[&[u8]]) -> Result<ArrayRef> {
        let parser = self.sequence.parser();
        let mut out = self
            .sequence
            .convert_rows(sequences.iter().map(|s| parser.parse(s)))
            .map_err(|e| self.error(e))?;
        Ok(out.remove(0))
    }

    /// Where each target column (without `__START_AT` / `__END_AT`) is
    /// among the keys, if it is one.
    pub(crate) fn key_position_of_values(&self) -> Vec<Option<usize>> {
        self.layout
            .value_columns
            .iter()
            .map(|c| self.layout.key_columns.iter().position(|k| k == c))
            .collect()
    }

    /// The delete rows of a change set: keys (and `extra` columns, SCD 2's
    /// `__START_AT`), every other column NULL.
    pub(crate) fn delete_rows(
        &self,
        keys: &[&[u8]],
        extra: Vec<ArrayRef>,
    ) -> Result<Vec<ArrayRef>> {
        let n = keys.len();
        let key_arrays = self.key_arrays(keys)?;
        let schema = &self.layout.target_schema;
        let mut columns: Vec<ArrayRef> = self
            .key_position_of_values()
            .into_iter()
            .enumerate()
            .map(|(i, k)| match k {
                Some(k) => key_arrays[k].clone(),
                None => arrow::array::new_null_array(schema.field(i).data_type(), n),
            })
            .collect();
        columns.extend(extra);
        while columns.len() < schema.fields().len() {
            let f = schema.field(columns.len());
            columns.push(arrow::array::new_null_array(f.data_type(), n));
        }
        Ok(columns)
    }

    /// A change set from the upserts' and the deletes' columns (target
    /// order), the upserts first.
    pub(crate) fn change_set(
        &self,
        upserts: Vec<ArrayRef>,
        upsert_rows: usize,
        deletes: Vec<ArrayRef>,
        delete_rows: usize,
        inserts_only: bool,
    ) -> Result<ChangeSet> {
        let schema = self.change_schema();
        let mut parts = Vec::new();
        let mut flagged = |mut columns: Vec<ArrayRef>, n: usize, delete: bool| -> Result<()> {
            if n == 0 {
                return Ok(());
            }
            columns.push(Arc::new(BooleanArray::from(vec![delete; n])));
            parts.push(RecordBatch::try_new(schema.clone(), columns).map_err(|e| self.error(e))?);
            Ok(())
        };
        flagged(upserts, upsert_rows, false)?;
        flagged(deletes, delete_rows, true)?;
        let rows = concat_batches(&schema, &parts).map_err(|e| self.error(e))?;
        Ok(ChangeSet {
            rows,
            match_on: self.match_on(),
            inserts_only: inserts_only && delete_rows == 0,
        })
    }

    /// The recorded SCD type, sequence type and keys against this run's.
    fn check_metadata(&self, dir: &Location, last_commit: Option<u64>) -> Result<()> {
        let path = dir.join("metadata.json");
        let now = Metadata {
            scd_type: match self.layout.scd {
                ScdType::One => 1,
                ScdType::Two => 2,
            },
            sequence_type: crate::plan::ddl::type_to_ddl(&self.layout.sequence_type),
            keys: self.layout.key_names.clone(),
            track_history: self.tracked_names(),
        };
        let existing = match last_commit {
            Some(_) => path.read_text("restore it, or reset the flow with --full-refresh")?,
            None => None,
        };
        if let Some(text) = existing {
            let was: Metadata = serde_json::from_str(&text).map_err(|e| {
                Error::checkpoint(
                    path.shown(),
                    format!("the AUTO CDC state's metadata is damaged: {e}"),
                )
            })?;
            let refresh = format!(
                "or rebuild the table from the whole feed with `--full-refresh {}`",
                self.target
            );
            if was.sequence_type != now.sequence_type {
                return Err(Error::runtime_with_help(
                    format!(
                        "AUTO CDC flow `{}` into `{}`, batch {}: the sequence (sequence_by `{}`) is {} now but was {} when the table was written [AUTOCDC_INVALID_STATE.SEQUENCING_TYPE_DRIFT]",
                        self.flow,
                        self.target,
                        last_commit.map(|n| n + 1).unwrap_or(0),
                        self.sequence_by,
                        now.sequence_type,
                        was.sequence_type
                    ),
                    format!("cast sequence_by back to {} in the flow, {refresh}", was.sequence_type),
                ));
            }
            let drift = |code: &str, what: String, help: &str| {
                Error::runtime_with_help(
                    format!(
                        "AUTO CDC flow `{}` into `{}`: {what} [AUTOCDC_INVALID_STATE.{code}]",
                        self.flow, self.target
                    ),
                    format!("{help}, {refresh}"),
                )
            };
            if was.scd_type != now.scd_type {
                return Err(drift(
                    "SCD_TYPE_DRIFT",
                    format!(
                        "the table was written as SCD type {}, but the flow now stores SCD type {}",
                        was.scd_type, now.scd_type
                    ),
                    "store the type the table was written with",
                ));
            }
            if was.keys != now.keys {
                return Err(drift(
                    "KEY_SCHEMA_DRIFT",
                    format!(
                        "the table was written with keys ({}), but the flow now has keys ({})",
                        was.keys.join(", "),
                        now.keys.join(", ")
                    ),
                    "declare the keys the table was written with",
                ));
            }
            if was.track_history != now.track_history {
                return Err(drift(
                    "TRACK_HISTORY_DRIFT",
                    format!(
                        "the table's history was tracked on ({}), but the flow now tracks ({})",
                        was.track_history.join(", "),
                        now.track_history.join(", ")
                    ),
                    "track history on the columns the table was written with",
                ));
            }
            return Ok(());
        }
        let json = serde_json::to_vec_pretty(&now).map_err(|e| self.error(e))?;
        path.replace(&json)
    }
}

fn cdc_error(flow: &str, e: impl std::fmt::Display) -> Error {
    Error::runtime(format!("AUTO CDC flow `{flow}`: {e}"))
}

/// `take` of `columns` of `batch` at `rows`.
pub(crate) fn take_columns(
    batch: &RecordBatch,
    columns: &[usize],
    rows: &[u32],
) -> Result<Vec<ArrayRef>> {
    let idx = arrow::array::UInt32Array::from(rows.to_vec());
    columns
        .iter()
        .map(|&c| arrow::compute::take(batch.column(c).as_ref(), &idx, None).map_err(Error::from))
        .collect()
}

#[cfg(test)]
mod tests;
