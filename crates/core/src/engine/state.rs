//! The versioned state store of one stateful operator.
//!
//! A stateful operator (aggregation, deduplication, stream-stream join)
//! keeps its state as Arrow rows whose first `key_columns` columns are the
//! key. After micro-batch `N` it hands the store what changed — the rows it
//! inserted or updated and the keys it removed — and the store writes them
//! as version `N`:
//!
//! - `<dir>/<N>.delta`: the changes of batch `N` (Arrow IPC; a `__deleted`
//!   column marks removed keys), written every batch;
//! - `<dir>/<N>.snapshot`: the whole state after batch `N`, written every
//!   [`SNAPSHOT_EVERY`] versions, so a restart reads one snapshot and at
//!   most that many deltas.
//!
//! [`StateStore::load`] rebuilds the state of version `N` exactly: the
//! newest snapshot at or below `N`, then every delta after it. A missing or
//! damaged file is an error naming the file (a silent reset would re-emit or
//! lose results), never an empty state.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, BooleanArray, UInt32Array};
use arrow::compute::{concat_batches, filter_record_batch, take_record_batch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;
use arrow::record_batch::RecordBatch;
use datafusion::physical_plan::aggregates::group_values::new_group_values;
use datafusion::physical_plan::aggregates::order::GroupOrdering;

use crate::engine::storage::Location;
use crate::error::{Error, Result};

/// An operator's changes in one batch: rows inserted or updated (state
/// schema), and the key columns of removed keys.
pub type StateChanges = (RecordBatch, Vec<ArrayRef>);

/// A full snapshot is written every this many versions.
pub const SNAPSHOT_EVERY: u64 = 10;

const DELETED: &str = "__deleted";

/// The two kinds of state file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Delta,
    Snapshot,
}

impl Kind {
    fn extension(self) -> &'static str {
        match self {
            Kind::Delta => "delta",
            Kind::Snapshot => "snapshot",
        }
    }
}

/// The state files of one stateful operator: `<checkpoint>/state/<operator>/`.
#[derive(Clone, Debug)]
pub struct StateStore {
    dir: Location,
    schema: SchemaRef,
    key_columns: usize,
    /// Versions that have a snapshot although they are not every
    /// [`SNAPSHOT_EVERY`]th (real-time epochs; one a failed epoch left
    /// would hide a later delta of its version): from the listing at load
    /// and this store's own writes, so a commit needs no look-up.
    off_cycle_snapshots: Arc<std::sync::Mutex<BTreeSet<u64>>>,
}

impl StateStore {
    /// A store at `dir` for rows of `schema` keyed by its first
    /// `key_columns` columns. Creates `dir`.
    pub fn open(dir: &Location, schema: SchemaRef, key_columns: usize) -> Result<StateStore> {
        dir.create_dir()?;
        Ok(StateStore {
            dir: dir.clone(),
            schema,
            key_columns,
            off_cycle_snapshots: Default::default(),
        })
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Location {
        &self.dir
    }

    /// The state after batch `version`, rebuilt from the newest snapshot at
    /// or below it and the deltas after that snapshot. Every delta from the
    /// snapshot (or from version 0) up to `version` must exist.
    pub fn load(&self, version: u64) -> Result<RecordBatch> {
        let files = self.files()?;
        self.note_off_cycle(&files);
        self.load_from(&files, version)
    }

    /// [`StateStore::load`] over the directory's files, listed once.
    fn load_from(&self, files: &BTreeSet<(u64, Kind)>, version: u64) -> Result<RecordBatch> {
        let mut base = None;
        for v in (0..=version).rev() {
            if files.contains(&(v, Kind::Snapshot)) {
                base = Some((v, self.read(&self.path(v, "snapshot"))?));
                break;
            }
        }
        let (from, mut state) = match base {
            Some((v, b)) => (v + 1, strip_deleted(&b, &self.schema)?),
            None => (0, RecordBatch::new_empty(self.schema.clone())),
        };
        for v in from..=version {
            let p = self.path(v, "delta");
            if !files.contains(&(v, Kind::Delta)) {
                return Err(Error::checkpoint(
                    p.shown(),
                    format!(
                        "the state of batch {version} needs this file, which is missing; the checkpoint is incomplete (restore it, or reset the flow with --full-refresh)"
                    ),
                ));
            }
            let delta = self.read(&p)?;
            state = self.apply(&state, &delta, &p)?;
        }
        Ok(state)
    }

    /// Records version `version`: the rows inserted or updated (`upserts`, in
    /// the state schema) and the keys removed (`removed`, the key columns
    /// only); `full` is the whole state after the batch (in parts), written
    /// as a snapshot every [`SNAPSHOT_EVERY`] versions. Rewriting a version (a
    /// replayed batch) replaces its files.
    pub fn commit(
        &self,
        version: u64,
        upserts: &RecordBatch,
        removed: &[ArrayRef],
        full: &[RecordBatch],
    ) -> Result<()> {
        let delta = self.delta_batch(upserts, removed)?;
        self.write(&self.path(version, "delta"), &delta)?;
        if version % SNAPSHOT_EVERY == SNAPSHOT_EVERY - 1 {
            self.write_snapshot(version, full)?;
        } else {
            // A snapshot a failed real-time epoch left for this version
            // would hide the delta.
            if self.off_cycle().remove(&version) {
                self.path(version, "snapshot").remove()?;
            }
        }
        Ok(())
    }

    /// Records version `version` as a snapshot of the whole state (`full`,
    /// in parts): a real-time epoch, whose changes came in many steps.
    pub fn write_snapshot(&self, version: u64, full: &[RecordBatch]) -> Result<()> {
        let full = concat_batches(&self.schema, full).map_err(|e| self.fail(e))?;
        let snap = self.delta_batch(&full, &[])?;
        self.write(&self.path(version, "snapshot"), &snap)?;
        if version % SNAPSHOT_EVERY != SNAPSHOT_EVERY - 1 {
            self.off_cycle().insert(version);
        }
        Ok(())
    }

    fn off_cycle(&self) -> std::sync::MutexGuard<'_, BTreeSet<u64>> {
        self.off_cycle_snapshots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Records the off-cycle snapshots among `files`.
    fn note_off_cycle(&self, files: &BTreeSet<(u64, Kind)>) {
        self.off_cycle().extend(
            files
                .iter()
                .filter(|(v, k)| *k == Kind::Snapshot && v % SNAPSHOT_EVERY != SNAPSHOT_EVERY - 1)
                .map(|(v, _)| *v),
        );
    }

    /// The state after batch `version`, or an empty state when no batch is
    /// committed yet (`None`).
    pub fn load_or_empty(&self, version: Option<u64>) -> Result<RecordBatch> {
        let files = self.files()?;
        self.note_off_cycle(&files);
        match version {
            Some(v) => self.load_from(&files, v),
            None => Ok(RecordBatch::new_empty(self.schema.clone())),
        }
    }

    /// Records version `version` from an operator's pending changes (none:
    /// an empty delta, so every version exists), and every 100 versions
    /// deletes the files older versions no longer need.
    /// With `whole` (a real-time epoch) the whole state is written as a
    /// snapshot instead.
    pub fn commit_changes(
        &self,
        version: u64,
        changes: Option<StateChanges>,
        full: &[RecordBatch],
        whole: bool,
    ) -> Result<()> {
        if whole {
            self.write_snapshot(version, full)?;
        } else {
            let (upserts, removed) = changes
                .unwrap_or_else(|| (RecordBatch::new_empty(self.schema.clone()), Vec::new()));
            self.commit(version, &upserts, &removed, full)?;
        }
        if version % 100 == 99 {
            self.purge(version.saturating_sub(100))?;
        }
        Ok(())
    }

    /// Deletes files no longer needed to load `keep_from` or later versions.
    pub fn purge(&self, keep_from: u64) -> Result<()> {
        let files = self.files()?;
        // The newest snapshot at or below keep_from is still needed.
        let Some(snap) = (0..=keep_from)
            .rev()
            .find(|v| files.contains(&(*v, Kind::Snapshot)))
        else {
            return Ok(());
        };
        for (v, kind) in files {
            if v < snap {
                let _ = self.path(v, kind.extension()).remove();
            }
        }
        Ok(())
    }

    /// The versions and kinds of the files in the directory, listed once.
    fn files(&self) -> Result<BTreeSet<(u64, Kind)>> {
        Ok(self
            .dir
            .list()?
            .iter()
            .filter_map(|name| {
                let (v, ext) = name.split_once('.')?;
                let kind = match ext {
                    "delta" => Kind::Delta,
                    "snapshot" => Kind::Snapshot,
                    _ => return None,
                };
                Some((v.parse::<u64>().ok()?, kind))
            })
            .collect())
    }

    fn path(&self, version: u64, kind: &str) -> Location {
        self.dir.join(&format!("{version}.{kind}"))
    }

    fn stored_schema(&self) -> SchemaRef {
        let mut fields: Vec<Field> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        fields.push(Field::new(DELETED, DataType::Boolean, false));
        Arc::new(Schema::new(fields))
    }

    fn delta_batch(&self, upserts: &RecordBatch, removed: &[ArrayRef]) -> Result<RecordBatch> {
        let schema = self.stored_schema();
        let n_up = upserts.num_rows();
        let n_rm = removed.first().map(|a| a.len()).unwrap_or(0);
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for (i, f) in self.schema.fields().iter().enumerate() {
            let up = upserts.column(i).clone();
            let col = if n_rm == 0 {
                up
            } else {
                let rm = if i < self.key_columns {
                    removed[i].clone()
                } else {
                    new_null_array(f.data_type(), n_rm)
                };
                arrow::compute::concat(&[up.as_ref(), rm.as_ref()]).map_err(|e| self.fail(e))?
            };
            columns.push(col);
        }
        let mut flags = vec![false; n_up];
        flags.extend(std::iter::repeat_n(true, n_rm));
        columns.push(Arc::new(BooleanArray::from(flags)));
        RecordBatch::try_new(schema, columns).map_err(|e| self.fail(e))
    }

    fn apply(
        &self,
        state: &RecordBatch,
        delta: &RecordBatch,
        path: &Location,
    ) -> Result<RecordBatch> {
        if delta.num_rows() == 0 {
            return Ok(state.clone());
        }
        let fail =
            |e: String| Error::checkpoint(path.shown(), format!("cannot apply state changes: {e}"));
        let n_cols = self.schema.fields().len();
        let deleted = delta
            .column(n_cols)
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(|| fail("no `__deleted` column".into()))?
            .clone();
        let nullable = nullable_schema(&self.schema);
        let as_nullable = |b: &RecordBatch, n: usize| {
            RecordBatch::try_new_with_options(
                nullable.clone(),
                b.columns()[..n].to_vec(),
                &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(b.num_rows())),
            )
            .map_err(|e| fail(e.to_string()))
        };
        let all = concat_batches(
            &nullable,
            [&as_nullable(state, n_cols)?, &as_nullable(delta, n_cols)?],
        )
        .map_err(|e| fail(e.to_string()))?;
        let key_schema = Arc::new(Schema::new(
            self.schema.fields()[..self.key_columns].to_vec(),
        ));
        let mut groups =
            new_group_values(key_schema, &GroupOrdering::None).map_err(|e| fail(e.to_string()))?;
        let mut ids = Vec::new();
        groups
            .intern(&all.columns()[..self.key_columns], &mut ids)
            .map_err(|e| fail(e.to_string()))?;
        // The last row of each key wins; a deletion removes the key.
        let mut last: Vec<Option<u32>> = vec![None; groups.len()];
        let offset = state.num_rows();
        for (row, g) in ids.iter().enumerate() {
            let removed = row >= offset && deleted.value(row - offset);
            last[*g] = if removed { None } else { Some(row as u32) };
        }
        let mut keep: Vec<u32> = last.into_iter().flatten().collect();
        keep.sort_unstable();
        let kept =
            take_record_batch(&all, &UInt32Array::from(keep)).map_err(|e| fail(e.to_string()))?;
        RecordBatch::try_new(self.schema.clone(), kept.columns().to_vec())
            .map_err(|e| fail(e.to_string()))
    }

    fn write(&self, path: &Location, batch: &RecordBatch) -> Result<()> {
        let mut buf = Vec::new();
        {
            let mut w =
                FileWriter::try_new(&mut buf, batch.schema_ref()).map_err(|e| self.fail(e))?;
            w.write(batch).map_err(|e| self.fail(e))?;
            w.finish().map_err(|e| self.fail(e))?;
        }
        path.replace(&buf)
    }

    fn read(&self, path: &Location) -> Result<RecordBatch> {
        let bytes = path.read()?.ok_or_else(|| {
            Error::checkpoint(path.shown(), "disappeared while it was being read")
        })?;
        let damaged = |e: String| {
            Error::checkpoint(
                path.shown(),
                format!("the state file is damaged ({e}); restore it, or reset the flow with --full-refresh"),
            )
        };
        let reader = FileReader::try_new(std::io::Cursor::new(bytes), None)
            .map_err(|e| damaged(e.to_string()))?;
        let schema = reader.schema();
        let expected = self.stored_schema();
        let same = schema.fields().len() == expected.fields().len()
            && schema
                .fields()
                .iter()
                .zip(expected.fields())
                .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
        if !same {
            return Err(Error::checkpoint(
                path.shown(),
                format!(
                    "the state was written for columns ({}) but the operator now keeps ({}); reset the flow with --full-refresh",
                    crate::plan::ddl::schema_to_ddl(&schema),
                    crate::plan::ddl::schema_to_ddl(&expected)
                ),
            ));
        }
        let mut batches = Vec::new();
        for b in reader {
            batches.push(b.map_err(|e| damaged(e.to_string()))?);
        }
        concat_batches(&expected, &batches).map_err(|e| damaged(e.to_string()))
    }

    fn fail(&self, e: impl std::fmt::Display) -> Error {
        Error::checkpoint(self.dir.shown(), format!("cannot write state: {e}"))
    }
}

fn nullable_schema(schema: &SchemaRef) -> SchemaRef {
    Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<_>>(),
    ))
}

/// The rows of a stored batch that are not deletions, in `schema`.
fn strip_deleted(stored: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let n = schema.fields().len();
    let deleted = stored
        .column(n)
        .as_any()
        .downcast_ref::<BooleanArray>()
        .cloned()
        .unwrap_or_else(|| BooleanArray::from(vec![false; stored.num_rows()]));
    let keep = arrow::compute::not(&deleted).map_err(|e| Error::runtime(e.to_string()))?;
    let cols: Vec<ArrayRef> = stored.columns()[..n].to_vec();
    let b = RecordBatch::try_new_with_options(
        nullable_schema(schema),
        cols,
        &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(stored.num_rows())),
    )
    .map_err(|e| Error::runtime(e.to_string()))?;
    let b = filter_record_batch(&b, &keep).map_err(|e| Error::runtime(e.to_string()))?;
    RecordBatch::try_new(schema.clone(), b.columns().to_vec())
        .map_err(|e| Error::runtime(format!("state rows do not fit the operator's schema: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use std::fs;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, true),
            Field::new("n", DataType::Int64, true),
        ]))
    }

    fn rows(k: &[&str], n: &[i64]) -> RecordBatch {
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(StringArray::from(k.to_vec())),
                Arc::new(Int64Array::from(n.to_vec())),
            ],
        )
        .unwrap()
    }

    fn as_pairs(b: &RecordBatch) -> Vec<(String, i64)> {
        let k = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
        let n = b.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
        let mut v: Vec<(String, i64)> = (0..b.num_rows())
            .map(|i| (k.value(i).to_string(), n.value(i)))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn deltas_and_snapshots_rebuild_every_version() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(&Location::from(dir.path()), schema(), 1).unwrap();
        let mut expected: std::collections::BTreeMap<String, i64> = Default::default();
        for v in 0..25u64 {
            let key = format!("k{}", v % 7);
            let n = v as i64;
            expected.insert(key.clone(), n);
            let mut removed: Vec<ArrayRef> = Vec::new();
            if v % 5 == 4 {
                let gone = format!("k{}", (v + 3) % 7);
                expected.remove(&gone);
                removed.push(Arc::new(StringArray::from(vec![gone])));
            }
            let full = rows(
                &expected.keys().map(|s| s.as_str()).collect::<Vec<_>>(),
                &expected.values().copied().collect::<Vec<_>>(),
            );
            store
                .commit(v, &rows(&[key.as_str()], &[n]), &removed, &[full])
                .unwrap();
            let loaded = store.load(v).unwrap();
            let want: Vec<(String, i64)> = expected.iter().map(|(k, n)| (k.clone(), *n)).collect();
            assert_eq!(as_pairs(&loaded), want, "version {v}");
        }
        assert!(dir.path().join("9.snapshot").exists());
        assert!(dir.path().join("19.snapshot").exists());
        store.purge(22).unwrap();
        assert!(!dir.path().join("3.delta").exists());
        assert!(dir.path().join("20.delta").exists());
        assert_eq!(as_pairs(&store.load(24).unwrap()).len(), expected.len());
    }

    #[test]
    fn a_missing_delta_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(&Location::from(dir.path()), schema(), 1).unwrap();
        let empty = rows(&[], &[]);
        store
            .commit(0, &rows(&["a"], &[1]), &[], std::slice::from_ref(&empty))
            .unwrap();
        store
            .commit(1, &rows(&["a"], &[2]), &[], std::slice::from_ref(&empty))
            .unwrap();
        fs::remove_file(dir.path().join("0.delta")).unwrap();
        let err = store.load(1).unwrap_err().to_string();
        assert!(err.contains("0.delta"), "{err}");
        assert!(err.contains("missing"), "{err}");
        fs::write(dir.path().join("0.delta"), b"garbage").unwrap();
        let err = store.load(1).unwrap_err().to_string();
        assert!(err.contains("damaged"), "{err}");
    }
}
