//! SCD type 1: the target holds one row per key, the value of its event
//! with the highest sequence; a delete removes the row.
//!
//! Per batch: the batch's events of a key reduce to the one with the
//! highest sequence (at equal sequences an upsert wins over a delete, and
//! of two upserts the later one, as in Spark). Against the state:
//! an upsert applies when its sequence is at least the key's recorded one
//! (row or tombstone); a delete applies when it is newer than the recorded
//! one, and leaves a tombstone — so a late, older upsert does not bring the
//! row back — until the tombstone is older than the GC threshold
//! (processing time). A truncate at sequence T removes every row whose
//! sequence is below T, and later events below T are ignored.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Int64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

use super::{take_columns, Common, Events};
use crate::engine::sink::ChangeSet;
use crate::engine::state::SNAPSHOT_EVERY;
use crate::error::{Error, Result};

/// A key's latest applied event.
#[derive(Clone, Debug)]
struct Entry {
    sequence: Box<[u8]>,
    deleted: bool,
    deleted_at_ms: i64,
}

/// The SCD 1 state: per key its latest sequence (a row or a tombstone),
/// and the latest truncate.
pub(super) struct Scd1 {
    entries: HashMap<Box<[u8]>, Entry>,
    truncated_below: Option<Box<[u8]>>,
    truncate_changed: bool,
    touched: HashSet<Box<[u8]>>,
    removed: HashSet<Box<[u8]>>,
    gc_ms: i64,
    /// At or before the oldest tombstone's time: no scan is needed while
    /// the GC horizon is not past it.
    oldest_tombstone_ms: Option<i64>,
}

/// The state's rows: the keys, the sequence, whether it is a tombstone and
/// since when. The truncate marker is the row whose keys are all NULL
/// (real keys are never NULL).
pub(super) fn state_schema(c: &Common, feed: &SchemaRef) -> SchemaRef {
    let mut fields = c.key_fields(feed);
    fields.push(Field::new(
        "__cdc_seq",
        c.layout.sequence_type.clone(),
        true,
    ));
    fields.push(Field::new("__cdc_tombstone", DataType::Boolean, false));
    fields.push(Field::new("__cdc_tombstone_at_ms", DataType::Int64, false));
    Arc::new(Schema::new(fields))
}

impl Scd1 {
    /// The state as loaded from the store.
    pub(super) fn load(c: &Common, batch: &RecordBatch, gc_seconds: u64) -> Result<Scd1> {
        let nk = c.layout.key_columns.len();
        let mut s = Scd1 {
            entries: HashMap::with_capacity(batch.num_rows()),
            truncated_below: None,
            truncate_changed: false,
            touched: HashSet::new(),
            removed: HashSet::new(),
            gc_ms: i64::try_from(gc_seconds.saturating_mul(1000)).unwrap_or(i64::MAX),
            oldest_tombstone_ms: None,
        };
        if batch.num_rows() == 0 {
            return Ok(s);
        }
        let keys = c
            .keys
            .convert_columns(&batch.columns()[..nk])
            .map_err(|e| c.error(e))?;
        let seqs = c
            .sequence
            .convert_columns(&[batch.column(nk).clone()])
            .map_err(|e| c.error(e))?;
        let bad = || c.error("the CDC state's columns have unexpected types");
        let deleted = batch
            .column(nk + 1)
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(bad)?;
        let at = batch
            .column(nk + 2)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(bad)?;
        for i in 0..batch.num_rows() {
            let key = keys.row(i).data();
            let sequence: Box<[u8]> = seqs.row(i).data().into();
            if key == c.null_key.as_ref() {
                s.truncated_below = Some(sequence);
                continue;
            }
            let entry = Entry {
                sequence,
                deleted: deleted.value(i),
                deleted_at_ms: at.value(i),
            };
            s.note_tombstone(&entry);
            s.entries.insert(key.into(), entry);
        }
        Ok(s)
    }

    /// Keys held (tombstones included).
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// (keys changed since the last commit, keys removed, bytes held).
    pub(super) fn progress(&self) -> (u64, u64, u64) {
        let bytes: usize = self
            .entries
            .iter()
            .map(|(k, e)| k.len() + e.sequence.len() + std::mem::size_of::<(Box<[u8]>, Entry)>())
            .sum();
        (
            self.touched.len() as u64,
            self.removed.len() as u64,
            bytes as u64,
        )
    }

    fn forget(&mut self, key: &[u8]) -> Option<Entry> {
        let e = self.entries.remove(key);
        self.touched.remove(key);
        self.removed.insert(key.into());
        e
    }

    fn note_tombstone(&mut self, e: &Entry) {
        if e.deleted {
            self.oldest_tombstone_ms = Some(
                self.oldest_tombstone_ms
                    .map_or(e.deleted_at_ms, |o| o.min(e.deleted_at_ms)),
            );
        }
    }

    fn record(&mut self, key: &[u8], entry: Entry) {
        self.note_tombstone(&entry);
        self.entries.insert(key.into(), entry);
        self.removed.remove(key);
        self.touched.insert(key.into());
    }

    /// The batch's changes to the target.
    pub(super) fn apply(
        &mut self,
        c: &Common,
        feed: &RecordBatch,
        ev: &Events,
        batch_timestamp_ms: i64,
    ) -> Result<ChangeSet> {
        // Tombstones older than the threshold are forgotten.
        let horizon = batch_timestamp_ms.saturating_sub(self.gc_ms);
        if self.oldest_tombstone_ms.is_some_and(|o| o < horizon) {
            let expired: Vec<Box<[u8]>> = self
                .entries
                .iter()
                .filter(|(_, e)| e.deleted && e.deleted_at_ms < horizon)
                .map(|(k, _)| k.clone())
                .collect();
            for k in expired {
                self.forget(&k);
            }
            self.oldest_tombstone_ms = self
                .entries
                .values()
                .filter(|e| e.deleted)
                .map(|e| e.deleted_at_ms)
                .min();
        }

        // The batch's winning event per key, and its latest truncate.
        let seq = |i: usize| ev.sequences.row(i);
        let beats = |i: usize, w: usize| {
            let (si, sw) = (seq(i), seq(w));
            si > sw || (si == sw && (!ev.deletes.value(i) || ev.deletes.value(w)))
        };
        let mut winners: HashMap<&[u8], usize> = HashMap::new();
        let mut truncate: Option<usize> = None;
        for i in 0..feed.num_rows() {
            if ev.truncates.value(i) {
                if truncate.is_none_or(|t| seq(i) >= seq(t)) {
                    truncate = Some(i);
                }
                continue;
            }
            winners
                .entry(ev.keys.row(i).data())
                .and_modify(|w| {
                    if beats(i, *w) {
                        *w = i
                    }
                })
                .or_insert(i);
        }

        // Per key what the target does: Some(row) upserts it, None deletes.
        let mut actions: HashMap<Box<[u8]>, Option<usize>> = HashMap::new();
        if let Some(t) = truncate {
            let t = seq(t).data();
            if self.truncated_below.as_deref().is_none_or(|old| t > old) {
                let below: Vec<Box<[u8]>> = self
                    .entries
                    .iter()
                    .filter(|(_, e)| e.sequence.as_ref() < t)
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in below {
                    if self.forget(&k).is_some_and(|e| !e.deleted) {
                        actions.insert(k, None);
                    }
                }
                self.truncated_below = Some(t.into());
                self.truncate_changed = true;
            }
        }
        let mut inserts_only = true;
        let mut winners: Vec<(&[u8], usize)> = winners.into_iter().collect();
        winners.sort_unstable();
        for (key, i) in winners {
            let s = seq(i).data();
            if self.truncated_below.as_deref().is_some_and(|t| s < t) {
                continue;
            }
            let delete = ev.deletes.value(i);
            let held = self.entries.get(key);
            match held {
                Some(e) if delete && s <= e.sequence.as_ref() => continue,
                Some(e) if !delete && s < e.sequence.as_ref() => continue,
                _ => {}
            }
            let in_table =
                held.is_some_and(|e| !e.deleted) || actions.get(key).is_some_and(Option::is_none);
            if delete {
                if in_table {
                    actions.insert(key.into(), None);
                }
                self.record(
                    key,
                    Entry {
                        sequence: s.into(),
                        deleted: true,
                        deleted_at_ms: batch_timestamp_ms,
                    },
                );
            } else {
                if in_table {
                    inserts_only = false;
                }
                actions.insert(key.into(), Some(i));
                self.record(
                    key,
                    Entry {
                        sequence: s.into(),
                        deleted: false,
                        deleted_at_ms: 0,
                    },
                );
            }
        }

        let mut actions: Vec<(Box<[u8]>, Option<usize>)> = actions.into_iter().collect();
        actions.sort_unstable();
        let upserts: Vec<u32> = actions
            .iter()
            .filter_map(|(_, a)| a.map(|i| i as u32))
            .collect();
        let deletes: Vec<&[u8]> = actions
            .iter()
            .filter(|(_, a)| a.is_none())
            .map(|(k, _)| k.as_ref())
            .collect();
        let upsert_columns = take_columns(feed, &c.layout.value_columns, &upserts)?;
        let delete_columns = c.delete_rows(&deletes, Vec::new())?;
        c.change_set(
            upsert_columns,
            upserts.len(),
            delete_columns,
            deletes.len(),
            inserts_only,
        )
    }

    /// The state's changes since the last commit (rows in the state
    /// schema, removed keys) and, at snapshot versions, the whole state.
    pub(super) fn take_changes(
        &mut self,
        c: &Common,
        batch_id: u64,
    ) -> Result<(RecordBatch, Vec<ArrayRef>, Vec<RecordBatch>)> {
        let mut touched: Vec<Box<[u8]>> = std::mem::take(&mut self.touched).into_iter().collect();
        touched.sort_unstable();
        let upserts = self.rows(c, touched.iter().map(|k| k.as_ref()), self.truncate_changed)?;
        self.truncate_changed = false;
        let mut removed: Vec<Box<[u8]>> = std::mem::take(&mut self.removed)
            .into_iter()
            .filter(|k| !self.entries.contains_key(k))
            .collect();
        removed.sort_unstable();
        let removed_refs: Vec<&[u8]> = removed.iter().map(|k| k.as_ref()).collect();
        let removed = if removed_refs.is_empty() {
            Vec::new()
        } else {
            c.key_arrays(&removed_refs)?
        };
        let full = if batch_id % SNAPSHOT_EVERY == SNAPSHOT_EVERY - 1 {
            let mut all: Vec<&[u8]> = self.entries.keys().map(|k| k.as_ref()).collect();
            all.sort_unstable();
            vec![self.rows(c, all.into_iter(), self.truncated_below.is_some())?]
        } else {
            Vec::new()
        };
        Ok((upserts, removed, full))
    }

    /// State rows of `keys`, and the truncate marker when `marker`.
    fn rows<'a>(
        &self,
        c: &Common,
        keys: impl Iterator<Item = &'a [u8]>,
        marker: bool,
    ) -> Result<RecordBatch> {
        let mut ks: Vec<&[u8]> = Vec::new();
        let mut seqs: Vec<&[u8]> = Vec::new();
        let mut deleted = Vec::new();
        let mut at = Vec::new();
        for k in keys {
            if let Some(e) = self.entries.get(k) {
                ks.push(k);
                seqs.push(&e.sequence);
                deleted.push(e.deleted);
                at.push(e.deleted_at_ms);
            }
        }
        if marker {
            if let Some(t) = &self.truncated_below {
                ks.push(&c.null_key);
                seqs.push(t);
                deleted.push(true);
                at.push(i64::MAX);
            }
        }
        let schema = self.schema_of(c);
        if ks.is_empty() {
            return Ok(RecordBatch::new_empty(schema));
        }
        let mut columns = c.key_arrays(&ks)?;
        columns.push(c.sequence_array(&seqs)?);
        columns.push(Arc::new(BooleanArray::from(deleted)) as ArrayRef);
        columns.push(Arc::new(Int64Array::from(at)) as ArrayRef);
        RecordBatch::try_new(schema, columns).map_err(Error::from)
    }

    fn schema_of(&self, c: &Common) -> SchemaRef {
        c.state_schema.clone()
    }
}
