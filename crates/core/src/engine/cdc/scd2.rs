//! SCD type 2: the target holds every version of every key, each with
//! `__START_AT` (the sequence of the event that opened it) and `__END_AT`
//! (the sequence of the next version or of the delete that closed it;
//! NULL while it is the open version).
//!
//! The versions of a key are a function of all its events, taken in
//! sequence order: an upsert whose tracked columns equal the open
//! version's is coalesced into it (the version keeps its start and takes
//! the upsert's values); any other upsert closes the open version at its
//! sequence and opens a new one; a delete closes the open version (a
//! delete with nothing open changes nothing, but is kept: an older upsert
//! arriving later ends at it). At equal sequences a delete wins over an
//! upsert, and of two upserts the later one counts, as in Spark.
//!
//! The state holds every event, so a late event is placed into history at
//! its position: per batch, the versions of each key it touches are
//! computed before and after its events, and the difference (versions
//! inserted, changed, removed) is the change set, matched on the keys and
//! `__START_AT`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray};
use arrow::compute::interleave;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, SortField};

use super::{Common, Events};
use crate::engine::sink::ChangeSet;
use crate::engine::state::SNAPSHOT_EVERY;
use crate::error::{Error, Result};

/// Arrow row-format bytes of a key or a sequence.
type Bytes = Box<[u8]>;

/// A key's events by sequence.
type History = BTreeMap<Bytes, Event>;

/// One event of a key: where its row is, whether it is a delete, and its
/// tracked columns' row bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Event {
    at: (usize, usize),
    deleted: bool,
    tracked: Box<[u8]>,
}

/// One version of a key.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Version {
    start: Box<[u8]>,
    end: Option<Box<[u8]>>,
    /// The event whose values it shows (the latest one coalesced into it).
    latest: (usize, usize),
}

/// The SCD 2 state: every event of every key.
pub(super) struct Scd2 {
    /// Event rows in the state schema; a new chunk per batch.
    chunks: Vec<RecordBatch>,
    histories: HashMap<Bytes, History>,
    /// (key, sequence) of the events recorded since the last commit.
    pending: Vec<(Bytes, Bytes)>,
    tracked: RowConverter,
    /// The tracked columns' positions among the value columns.
    tracked_values: Vec<usize>,
    events: usize,
}

/// The state's rows: the keys, the sequence, whether it is a delete, then
/// the target's columns (without `__START_AT`/`__END_AT`).
pub(super) fn state_schema(c: &Common, feed: &SchemaRef) -> SchemaRef {
    let mut fields = c.key_fields(feed);
    fields.push(Field::new(
        "__cdc_seq",
        c.layout.sequence_type.clone(),
        true,
    ));
    fields.push(Field::new("__cdc_deleted", DataType::Boolean, false));
    for &v in &c.layout.value_columns {
        let f = feed.field(v);
        fields.push(Field::new(f.name(), f.data_type().clone(), true));
    }
    Arc::new(Schema::new(fields))
}

impl Scd2 {
    /// The state as loaded from the store.
    pub(super) fn load(c: &Common, feed: &SchemaRef, loaded: RecordBatch) -> Result<Scd2> {
        let tracked_values: Vec<usize> = c
            .layout
            .value_columns
            .iter()
            .enumerate()
            .filter(|(_, v)| c.layout.tracked_columns.contains(v))
            .map(|(p, _)| p)
            .collect();
        let tracked = RowConverter::new(
            tracked_values
                .iter()
                .map(|&p| SortField::new(feed.field(c.layout.value_columns[p]).data_type().clone()))
                .collect(),
        )
        .map_err(|e| c.error(e))?;
        let mut s = Scd2 {
            chunks: Vec::new(),
            histories: HashMap::new(),
            pending: Vec::new(),
            tracked,
            tracked_values,
            events: 0,
        };
        if loaded.num_rows() > 0 {
            s.chunks.push(loaded);
            s.index_chunk(c, 0, false)?;
        }
        Ok(s)
    }

    /// Events held.
    pub(super) fn len(&self) -> usize {
        self.events
    }

    /// (events recorded since the last commit, 0, bytes held: the event
    /// rows and the index).
    pub(super) fn progress(&self) -> (u64, u64, u64) {
        let rows: usize = self.chunks.iter().map(|c| c.get_array_memory_size()).sum();
        let index: usize = self
            .histories
            .iter()
            .map(|(k, h)| {
                k.len()
                    + h.iter()
                        .map(|(s, e)| {
                            s.len() + e.tracked.len() + std::mem::size_of::<(Bytes, Event)>()
                        })
                        .sum::<usize>()
            })
            .sum();
        (self.pending.len() as u64, 0, (rows + index) as u64)
    }

    /// Records the events of chunk `chunk` (the keys it touches, in order,
    /// are returned); `pending` marks them for the next commit.
    fn index_chunk(&mut self, c: &Common, chunk: usize, pending: bool) -> Result<()> {
        let batch = &self.chunks[chunk];
        let nk = c.layout.key_columns.len();
        let keys = c
            .keys
            .convert_columns(&batch.columns()[..nk])
            .map_err(|e| c.error(e))?;
        let seqs = c
            .sequence
            .convert_columns(&[batch.column(nk).clone()])
            .map_err(|e| c.error(e))?;
        let deleted = batch
            .column(nk + 1)
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(|| c.error("the CDC state's delete column is not BOOLEAN"))?
            .clone();
        let tracked_columns: Vec<ArrayRef> = self
            .tracked_values
            .iter()
            .map(|&p| batch.column(nk + 2 + p).clone())
            .collect();
        let tracked = if tracked_columns.is_empty() {
            None
        } else {
            Some(
                self.tracked
                    .convert_columns(&tracked_columns)
                    .map_err(|e| c.error(e))?,
            )
        };
        for r in 0..batch.num_rows() {
            let key: Box<[u8]> = keys.row(r).data().into();
            let seq: Box<[u8]> = seqs.row(r).data().into();
            let event = Event {
                at: (chunk, r),
                deleted: deleted.value(r),
                tracked: tracked
                    .as_ref()
                    .map(|t| t.row(r).data().into())
                    .unwrap_or_default(),
            };
            let history = self.histories.entry(key.clone()).or_default();
            match history.get(&seq) {
                // At one sequence a delete wins over an upsert.
                Some(held) if held.deleted && !event.deleted => continue,
                Some(_) => {}
                None => self.events += 1,
            }
            history.insert(seq.clone(), event);
            if pending {
                self.pending.push((key, seq));
            }
        }
        Ok(())
    }

    /// The versions of a key's events.
    fn versions(history: Option<&History>) -> Vec<Version> {
        let mut out = Vec::new();
        let Some(history) = history else {
            return out;
        };
        let mut open: Option<(Bytes, &[u8], (usize, usize))> = None;
        for (seq, e) in history {
            if e.deleted {
                if let Some((start, _, latest)) = open.take() {
                    out.push(Version {
                        start,
                        end: Some(seq.clone()),
                        latest,
                    });
                }
                continue;
            }
            if let Some(o) = open.as_mut().filter(|o| o.1 == e.tracked.as_ref()) {
                o.2 = e.at;
                continue;
            }
            if let Some((start, _, latest)) = open.take() {
                out.push(Version {
                    start,
                    end: Some(seq.clone()),
                    latest,
                });
            }
            open = Some((seq.clone(), &e.tracked, e.at));
        }
        if let Some((start, _, latest)) = open {
            out.push(Version {
                start,
                end: None,
                latest,
            });
        }
        out
    }

    /// The batch's changes to the target.
    pub(super) fn apply(
        &mut self,
        c: &Common,
        feed: &RecordBatch,
        ev: &Events,
    ) -> Result<ChangeSet> {
        let n = feed.num_rows();
        let l = &c.layout;
        let mut columns: Vec<ArrayRef> = l
            .key_columns
            .iter()
            .map(|&k| feed.column(k).clone())
            .collect();
        columns.push(feed.column(l.sequence_column).clone());
        columns.push(Arc::new(ev.deletes.clone()));
        columns.extend(l.value_columns.iter().map(|&v| feed.column(v).clone()));
        let chunk =
            RecordBatch::try_new(c.state_schema.clone(), columns).map_err(|e| c.error(e))?;

        // The touched keys' versions before the batch.
        let mut before: BTreeMap<Box<[u8]>, Vec<Version>> = BTreeMap::new();
        for r in 0..n {
            let key = ev.keys.row(r).data();
            if !before.contains_key(key) {
                before.insert(key.into(), Self::versions(self.histories.get(key)));
            }
        }
        let chunk_index = self.chunks.len();
        self.chunks.push(chunk);
        self.index_chunk(c, chunk_index, true)?;

        let mut upserts: Vec<Version> = Vec::new();
        let mut deletes: Vec<(Bytes, Bytes)> = Vec::new();
        let mut inserts_only = true;
        for (key, old) in before {
            let new = Self::versions(self.histories.get(&key));
            let old_by_start: HashMap<&[u8], &Version> =
                old.iter().map(|v| (v.start.as_ref(), v)).collect();
            for v in &new {
                match old_by_start.get(v.start.as_ref()) {
                    Some(o) if *o == v => {}
                    Some(_) => {
                        inserts_only = false;
                        upserts.push(v.clone());
                    }
                    None => upserts.push(v.clone()),
                }
            }
            for o in &old {
                if !new.iter().any(|v| v.start == o.start) {
                    deletes.push((key.clone(), o.start.clone()));
                }
            }
        }

        // Upserts: the latest event's values, the version's bounds.
        let mut upsert_columns =
            self.gather(c, &upserts.iter().map(|v| v.latest).collect::<Vec<_>>(), 2)?;
        let starts: Vec<&[u8]> = upserts.iter().map(|v| v.start.as_ref()).collect();
        let ends: Vec<&[u8]> = upserts
            .iter()
            .map(|v| v.end.as_deref().unwrap_or(&c.null_sequence))
            .collect();
        upsert_columns.push(c.sequence_array(&starts)?);
        upsert_columns.push(c.sequence_array(&ends)?);
        let delete_keys: Vec<&[u8]> = deletes.iter().map(|(k, _)| k.as_ref()).collect();
        let delete_starts: Vec<&[u8]> = deletes.iter().map(|(_, s)| s.as_ref()).collect();
        let delete_columns =
            c.delete_rows(&delete_keys, vec![c.sequence_array(&delete_starts)?])?;
        c.change_set(
            upsert_columns,
            upserts.len(),
            delete_columns,
            deletes.len(),
            inserts_only,
        )
    }

    /// Columns `from..` of the state rows at `at` (2 past the keys: the
    /// target's values; 0: the whole row).
    fn gather(&self, c: &Common, at: &[(usize, usize)], from: usize) -> Result<Vec<ArrayRef>> {
        let nk = c.layout.key_columns.len();
        let first = if from == 0 { 0 } else { nk + from };
        (first..c.state_schema.fields().len())
            .map(|col| {
                if at.is_empty() {
                    return Ok(arrow::array::new_empty_array(
                        c.state_schema.field(col).data_type(),
                    ));
                }
                let arrays: Vec<&dyn Array> =
                    self.chunks.iter().map(|b| b.column(col).as_ref()).collect();
                interleave(&arrays, at).map_err(Error::from)
            })
            .collect()
    }

    /// The events recorded since the last commit (state rows; no key is
    /// ever removed) and, at snapshot versions, every event.
    pub(super) fn take_changes(
        &mut self,
        c: &Common,
        batch_id: u64,
    ) -> Result<(RecordBatch, Vec<ArrayRef>, Vec<RecordBatch>)> {
        let mut pending = std::mem::take(&mut self.pending);
        pending.sort_unstable();
        pending.dedup();
        let at: Vec<(usize, usize)> = pending
            .iter()
            .filter_map(|(k, s)| self.histories.get(k).and_then(|h| h.get(s)).map(|e| e.at))
            .collect();
        let upserts = self.rows(c, &at)?;
        let full = if batch_id % SNAPSHOT_EVERY == SNAPSHOT_EVERY - 1 {
            let mut keys: Vec<&Box<[u8]>> = self.histories.keys().collect();
            keys.sort_unstable();
            let all: Vec<(usize, usize)> = keys
                .into_iter()
                .flat_map(|k| self.histories[k].values().map(|e| e.at))
                .collect();
            let whole = self.rows(c, &all)?;
            // One chunk from now on: the replaced events' rows are dropped.
            self.compact(c, whole.clone())?;
            vec![whole]
        } else {
            Vec::new()
        };
        Ok((upserts, Vec::new(), full))
    }

    fn rows(&self, c: &Common, at: &[(usize, usize)]) -> Result<RecordBatch> {
        if at.is_empty() {
            return Ok(RecordBatch::new_empty(c.state_schema.clone()));
        }
        RecordBatch::try_new(c.state_schema.clone(), self.gather(c, at, 0)?).map_err(Error::from)
    }

    /// Replaces the chunks by `whole` (every held event, once).
    fn compact(&mut self, c: &Common, whole: RecordBatch) -> Result<()> {
        self.chunks = vec![whole];
        self.histories.clear();
        self.events = 0;
        if self.chunks[0].num_rows() > 0 {
            self.index_chunk(c, 0, false)?;
        }
        Ok(())
    }
}
