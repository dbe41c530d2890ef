//! The Delta source: a Delta table read as a stream, the way Spark's
//! `DeltaSource` reads it, or read whole for batch queries.
//!
//! **Streaming.** Without `startingVersion` the first batches read the
//! table's snapshot at the version current when the query first starts;
//! after it (or from `startingVersion`), each new commit's added data files,
//! commit by commit, in log order. The offset is
//! `{"reservoirVersion": v, "index": i, "isStartingVersion": b}`: every file
//! up to index `i` of version `v` (of the snapshot at `v` when
//! `isStartingVersion`) has been read; `index: -1` means none of `v` yet.
//! Reading `(start, end]` again after a crash reads the same files.
//! `maxFilesPerTrigger` (default 1000) caps the files per batch;
//! `maxBytesPerTrigger` caps their bytes (at least one file per batch).
//!
//! A commit that deletes or rewrites rows (a data-changing `remove`:
//! DELETE, MERGE, UPDATE, an overwrite) cannot be streamed as appends and
//! is an error naming the version, unless `skipChangeCommits=true` (such
//! commits are skipped whole) or `ignoreDeletes=true` (commits that only
//! delete are skipped) or `ignoreChanges=true` (their added files are read
//! again, so rewritten rows come twice, as in Spark). Files added without
//! data change (OPTIMIZE) are never read.
//!
//! **Batch** (`read_table`, stream-static joins, `read().format("delta")`):
//! the rows of the table's latest snapshot.

use std::path::Path;

use arrow::datatypes::SchemaRef;
use serde_json::json;

use crate::table::{self, AddFile};
use pipelines_core::engine::source::{Backlog, Offset, ReadBatch, Source, SourceContext};
use pipelines_core::engine::sources::{read_state_file, write_atomic, Options};
use pipelines_core::engine::storage::Location;
use pipelines_core::error::{Error, Result};

/// Spark's default `maxFilesPerTrigger` for Delta sources.
const DEFAULT_MAX_FILES: u64 = 1000;

/// A position in a Delta table's stream (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Position {
    version: u64,
    index: i64,
    starting: bool,
}

impl Position {
    fn to_offset(self) -> Offset {
        json!({
            "reservoirVersion": self.version,
            "index": self.index,
            "isStartingVersion": self.starting,
        })
    }

    fn from_offset(o: &Offset) -> Result<Position> {
        let version = o.get("reservoirVersion").and_then(|v| v.as_u64());
        let index = o.get("index").and_then(|v| v.as_i64());
        match (version, index) {
            (Some(version), Some(index)) => Ok(Position {
                version,
                index,
                starting: o
                    .get("isStartingVersion")
                    .and_then(|v| v.as_bool())
                    .unwrap_or(false),
            }),
            _ => Err(Error::runtime_with_help(
                format!("`{o}` is not a Delta source offset"),
                "the checkpoint was written for another source: run a full refresh of the flow's target",
            )),
        }
    }
}

/// How a commit that deletes or rewrites rows is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChangePolicy {
    Fail,
    SkipChangeCommits,
    IgnoreDeletes,
    IgnoreChanges,
}

/// Where the first batch starts when the checkpoint has no offset yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Start {
    /// The snapshot at the current version, then its changes.
    Snapshot,
    /// Changes from this version on.
    Version(u64),
    /// Only commits after the current version.
    Latest,
}

/// A streaming (or whole-table) read of a Delta table.
pub struct DeltaSource {
    dir: Location,
    schema: SchemaRef,
    batch: bool,
    start: Start,
    policy: ChangePolicy,
    max_files: u64,
    max_bytes: Option<u64>,
    /// Available-now: the version fixed when the run started.
    cap: Option<u64>,
    /// The snapshot files of one version, cached.
    snapshot: Option<(u64, Vec<AddFile>)>,
    /// The start position resolved at the first batch (no offset yet),
    /// kept in `state_dir/start` so a replay of batch 0 starts at the same place.
    initial: Option<Position>,
    state_dir: Location,
    backlog_files: Option<u64>,
    /// The backlog when the available-now run started.
    backlog_total: Option<u64>,
}

/// The Delta source's settings, parsed from its options: what opening the
/// source reads, and what dry-run checks.
pub(crate) struct DeltaSourceOptions {
    policy: ChangePolicy,
    start: Start,
    max_files: u64,
    max_bytes: Option<u64>,
}

impl DeltaSourceOptions {
    /// Parses the options of a Delta source.
    pub(crate) fn parse(options: &Options) -> Result<Self> {
        let flag = |k: &str| options.bool(k, false);
        let policy = if flag("skipChangeCommits")? {
            ChangePolicy::SkipChangeCommits
        } else if flag("ignoreChanges")? {
            ChangePolicy::IgnoreChanges
        } else if flag("ignoreDeletes")? {
            ChangePolicy::IgnoreDeletes
        } else {
            ChangePolicy::Fail
        };
        let start = match options.get("startingVersion").map(str::trim) {
            None => Start::Snapshot,
            Some(v) if v.eq_ignore_ascii_case("latest") => Start::Latest,
            Some(v) => match v.parse::<u64>() {
                Ok(n) => Start::Version(n),
                Err(_) => {
                    return Err(Error::runtime_with_help(
                        format!(
                            "option `startingVersion` must be a table version (0, 1, ...) or `latest`, got `{v}`"
                        ),
                        ".option(\"startingVersion\", \"0\")",
                    ))
                }
            },
        };
        if options.get("startingTimestamp").is_some() {
            return Err(Error::runtime_with_help(
                "option `startingTimestamp` of the Delta source is not supported".to_string(),
                "use `startingVersion` with the table version to start from (see the table's history)",
            ));
        }
        Ok(DeltaSourceOptions {
            policy,
            start,
            max_files: options
                .positive("maxFilesPerTrigger")?
                .unwrap_or(DEFAULT_MAX_FILES),
            max_bytes: options.bytes("maxBytesPerTrigger")?,
        })
    }
}

impl DeltaSource {
    /// Opens a read of the Delta table at `path` (relative to the spec's
    /// directory). `batch`: read the latest snapshot whole instead of
    /// streaming. The table may not exist yet: it has no data then.
    pub fn open(
        path: &str,
        schema: SchemaRef,
        options: Options,
        ctx: SourceContext,
        batch: bool,
    ) -> Result<DeltaSource> {
        let dir = Location::parse(path, &ctx.base_dir).map_err(|e| {
            Error::runtime_with_help(
                format!("flow `{}`: delta source: {e}", ctx.flow),
                "load a local path or an `s3://bucket/prefix` URL",
            )
        })?;
        let settings = DeltaSourceOptions::parse(&options)?;
        Ok(DeltaSource {
            dir,
            schema,
            batch,
            start: settings.start,
            policy: settings.policy,
            max_files: settings.max_files,
            max_bytes: settings.max_bytes,
            cap: None,
            snapshot: None,
            initial: None,
            state_dir: ctx.state_dir,
            backlog_files: None,
            backlog_total: None,
        })
    }

    fn latest(&self) -> Result<Option<u64>> {
        table::latest_version(&self.dir)
    }

    fn snapshot_files(&mut self, version: u64) -> Result<&[AddFile]> {
        if self.snapshot.as_ref().map(|(v, _)| *v) != Some(version) {
            let files = table::snapshot_files(&self.dir, version)?;
            self.snapshot = Some((version, files));
        }
        Ok(self
            .snapshot
            .as_ref()
            .map(|(_, f)| f.as_slice())
            .unwrap_or(&[]))
    }

    /// Where reading starts when the checkpoint has no offset: the position
    /// just before the first file to read.
    fn initial_position(&mut self) -> Result<Option<Position>> {
        if let Some(p) = self.initial {
            return Ok(Some(p));
        }
        let file = self.state_dir.join("start");
        if let Some(text) = read_state_file(&file)? {
            let value: Offset = serde_json::from_str(&text).map_err(|e| {
                Error::checkpoint(file.shown(), format!("not a Delta source offset: {e}"))
            })?;
            let p = Position::from_offset(&value)?;
            self.initial = Some(p);
            return Ok(Some(p));
        }
        let latest = self.latest()?;
        let p = match (self.start, latest) {
            (Start::Snapshot, None) => Position {
                version: 0,
                index: -1,
                starting: false,
            },
            (Start::Snapshot, Some(v)) => Position {
                version: v,
                index: -1,
                starting: true,
            },
            (Start::Version(v), _) => {
                if latest.is_some_and(|l| v > l) {
                    return Err(Error::runtime_with_help(
                        format!(
                            "`startingVersion` {v} is after the latest version {} of the Delta table at {}",
                            latest.unwrap_or(0),
                            self.dir.as_text()
                        ),
                        "start from an existing version, or use `startingVersion: latest`",
                    ));
                }
                Position {
                    version: v,
                    index: -1,
                    starting: false,
                }
            }
            (Start::Latest, l) => Position {
                version: l.map_or(0, |l| l + 1),
                index: -1,
                starting: false,
            },
        };
        write_atomic(&file, p.to_offset().to_string().as_bytes())?;
        self.initial = Some(p);
        Ok(Some(p))
    }

    /// The data files of commit `version` to stream, under the change
    /// policy; `None` when the version is not committed.
    fn commit_files(&self, version: u64) -> Result<Option<Vec<AddFile>>> {
        let Some(commit) = table::read_commit(&self.dir, version)? else {
            return Ok(None);
        };
        let adds: Vec<AddFile> = commit.data_adds().cloned().collect();
        if !commit.changes_data() {
            return Ok(Some(adds));
        }
        match self.policy {
            ChangePolicy::SkipChangeCommits => Ok(Some(Vec::new())),
            ChangePolicy::IgnoreChanges => Ok(Some(adds)),
            ChangePolicy::IgnoreDeletes if adds.is_empty() => Ok(Some(Vec::new())),
            _ => Err(Error::runtime_with_help(
                format!(
                    "version {version} of the Delta table at {} {} rows ({}), which a streaming read cannot pass on as appends",
                    self.dir.as_text(),
                    if adds.is_empty() { "deletes" } else { "rewrites" },
                    commit.operation.as_deref().unwrap_or("a commit removing files"),
                ),
                "set the option `skipChangeCommits: \"true\"` on the reader to skip such commits (or `ignoreDeletes: \"true\"` when they only delete), or run a full refresh of this flow's target",
            )),
        }
    }

    /// Walks from `from` (exclusive) collecting files, at most `limit` files
    /// (when given) and versions up to `until`. Returns the files and the
    /// position after the last one.
    fn walk(
        &mut self,
        from: Position,
        limit: Option<(u64, Option<u64>)>,
        until: u64,
        end: Option<Position>,
    ) -> Result<(Vec<AddFile>, Position)> {
        let mut out: Vec<AddFile> = Vec::new();
        let mut bytes = 0u64;
        let mut pos = from;
        loop {
            if let Some(e) = end {
                if pos == e {
                    break;
                }
            }
            if pos.version > until && !pos.starting {
                break;
            }
            let files: Vec<AddFile> = if pos.starting {
                self.snapshot_files(pos.version)?.to_vec()
            } else {
                match self.commit_files(pos.version)? {
                    Some(f) => f,
                    None => break,
                }
            };
            let mut idx = pos.index + 1;
            let mut full = false;
            while (idx as usize) < files.len() {
                if let Some((max_files, max_bytes)) = limit {
                    let over_files = out.len() as u64 >= max_files;
                    let over_bytes = max_bytes
                        .is_some_and(|m| !out.is_empty() && bytes + files[idx as usize].size > m);
                    if over_files || over_bytes {
                        full = true;
                        break;
                    }
                }
                if let Some(e) = end {
                    if e.version == pos.version && e.starting == pos.starting && idx > e.index {
                        full = true;
                        break;
                    }
                }
                bytes += files[idx as usize].size;
                out.push(files[idx as usize].clone());
                idx += 1;
            }
            if full {
                pos.index = idx - 1;
                break;
            }
            // The whole version is read: continue after it.
            pos = Position {
                version: pos.version + 1,
                index: -1,
                starting: false,
            };
        }
        Ok((out, pos))
    }
}

impl Source for DeltaSource {
    /// A check reads the table's log: real-time mode looks every 20 ms.
    fn arrival_poll_interval(&self) -> std::time::Duration {
        std::time::Duration::from_millis(20)
    }

    fn describe(&self) -> String {
        format!("delta source `{}`", self.dir.as_text())
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn prepare_available_now(&mut self) -> Result<()> {
        self.cap = self.latest()?;
        Ok(())
    }

    fn latest_offset(&mut self, start: Option<&Offset>) -> Result<Option<Offset>> {
        let Some(latest) = self.latest()? else {
            return Ok(None);
        };
        if self.batch {
            // A whole-table read: one batch, the latest snapshot.
            return Ok(match start {
                None => Some(json!({ "reservoirVersion": latest })),
                Some(_) => None,
            });
        }
        let from = match start {
            Some(o) => Position::from_offset(o)?,
            None => match self.initial_position()? {
                Some(p) => p,
                None => return Ok(None),
            },
        };
        let until = self.cap.unwrap_or(latest).min(latest);
        let (files, end) = self.walk(from, Some((self.max_files, self.max_bytes)), until, None)?;
        if self.cap.is_some() {
            let (rest, _) = self.walk(end, None, until, None)?;
            self.backlog_files = Some(rest.len() as u64);
            if self.backlog_total.is_none() {
                self.backlog_total = Some((rest.len() + files.len()) as u64);
            }
        }
        if files.is_empty() {
            return Ok(None);
        }
        Ok(Some(end.to_offset()))
    }

    fn read(&mut self, start: Option<&Offset>, end: &Offset) -> Result<ReadBatch> {
        let files = if self.batch {
            let version = end
                .get("reservoirVersion")
                .and_then(|v| v.as_u64())
                .unwrap_or(0);
            self.snapshot_files(version)?.to_vec()
        } else {
            let from = match start {
                Some(o) => Position::from_offset(o)?,
                None => match self.initial_position()? {
                    Some(p) => p,
                    None => return Ok(ReadBatch::default()),
                },
            };
            let end = Position::from_offset(end)?;
            let (files, _) = self.walk(from, None, end.version, Some(end))?;
            files
        };
        let (batches, bytes) = table::read_files(&files, &self.schema)?;
        Ok(ReadBatch {
            batches,
            bytes,
            malformed_dropped: 0,
            corrupt_files_skipped: 0,
            rows_filtered: 0,
        })
    }

    fn backlog(&self) -> Option<Backlog> {
        self.backlog_files
            .map(|n| Backlog::new(n, self.backlog_total.unwrap_or(n), "file"))
    }
}

/// True when `path` (relative to `base`) is a Delta table.
pub fn is_delta_path(base: &Path, path: &str) -> bool {
    Location::parse(path, base).is_ok_and(|l| table::is_delta_table(&l))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use arrow::array::{Array, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;

    use super::*;
    use crate::sink::DeltaSink;
    use pipelines_core::engine::sink::{Sink, SinkContext};
    use pipelines_core::formats::OutputMode;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]))
    }

    /// Appends one commit per entry to the table at `dir` (created with
    /// version 0), as a new writer each time (a new query id).
    fn table(dir: &Path, commits: &[&[i64]]) {
        static WRITER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let query_id = format!(
            "q{}",
            WRITER.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        );
        let mut sink = DeltaSink::open(&SinkContext {
            name: "t".into(),
            format: "delta".into(),
            options: BTreeMap::new(),
            path: Some(dir.into()),
            partition_cols: vec![],
            merge_keys: vec![],
            schema: schema(),
            flow: "f".into(),
            query_id,
        })
        .unwrap();
        for (n, ids) in commits.iter().enumerate() {
            let b = RecordBatch::try_new(schema(), vec![Arc::new(Int64Array::from(ids.to_vec()))])
                .unwrap();
            sink.add_batch(n as u64, vec![b], OutputMode::Append)
                .unwrap();
        }
    }

    /// The path (as in the log) of the file commit `version` added.
    fn added(dir: &Path, version: u64) -> String {
        table::read_commit(&dir.into(), version)
            .unwrap()
            .unwrap()
            .adds[0]
            .log_path
            .clone()
    }

    /// Writes commit `version` by hand: `(action, path, dataChange)`.
    fn commit(dir: &Path, version: u64, actions: &[(&str, &str, bool)], op: &str) {
        let mut lines = vec![format!(r#"{{"commitInfo":{{"operation":"{op}"}}}}"#)];
        for (kind, path, change) in actions {
            lines.push(format!(
                r#"{{"{kind}":{{"path":"{path}","partitionValues":{{}},"size":1,"modificationTime":0,"dataChange":{change}}}}}"#
            ));
        }
        std::fs::write(
            dir.join(format!("_delta_log/{version:020}.json")),
            lines.join("\n"),
        )
        .unwrap();
    }

    fn source(dir: &Path, state: &Path, options: &[(&str, &str)]) -> DeltaSource {
        let opts: BTreeMap<String, String> = options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let ctx = SourceContext {
            flow: "f".into(),
            state_dir: state.to_path_buf().into(),
            base_dir: dir.to_path_buf(),
            option_overrides: BTreeMap::new(),
        };
        let options = Options::merged(&opts, &BTreeMap::new(), "f");
        DeltaSource::open("t", schema(), options, ctx, false).unwrap()
    }

    /// Every batch until caught up: `(ids, end offset)`.
    fn drain(src: &mut DeltaSource) -> Result<Vec<(Vec<i64>, Offset)>> {
        let mut out = Vec::new();
        let mut start: Option<Offset> = None;
        while let Some(end) = src.latest_offset(start.as_ref())? {
            let read = src.read(start.as_ref(), &end)?;
            let mut ids = Vec::new();
            for b in &read.batches {
                let c = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                ids.extend((0..c.len()).map(|i| c.value(i)));
            }
            out.push((ids, end.clone()));
            start = Some(end);
        }
        Ok(out)
    }

    fn ids(batches: &[(Vec<i64>, Offset)]) -> Vec<Vec<i64>> {
        batches.iter().map(|(i, _)| i.clone()).collect()
    }

    #[test]
    fn optimize_commits_are_not_read_again() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path().join("t");
        table(&t, &[&[1], &[2]]);
        let (f1, f2) = (added(&t, 1), added(&t, 2));
        commit(
            &t,
            3,
            &[
                ("remove", &f1, false),
                ("remove", &f2, false),
                ("add", &f1, false),
            ],
            "OPTIMIZE",
        );
        let mut src = source(
            tmp.path(),
            &tmp.path().join("s"),
            &[("startingVersion", "0"), ("maxFilesPerTrigger", "1")],
        );
        let got = drain(&mut src).unwrap();
        assert_eq!(ids(&got), vec![vec![1], vec![2]]);
        // The OPTIMIZE commit is passed over once a later commit exists.
        table(&t, &[&[3]]);
        let mut start = Some(got[1].1.clone());
        let end = src.latest_offset(start.as_ref()).unwrap().unwrap();
        assert_eq!(
            end,
            json!({"reservoirVersion": 5, "index": -1, "isStartingVersion": false})
        );
        let read = src.read(start.as_ref(), &end).unwrap();
        assert_eq!(read.num_rows(), 1);
        start = Some(end);
        assert!(src.latest_offset(start.as_ref()).unwrap().is_none());
    }

    #[test]
    fn change_commits_follow_the_policy() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path().join("t");
        table(&t, &[&[1], &[2]]);
        let f1 = added(&t, 1);
        commit(&t, 3, &[("remove", &f1, true)], "DELETE");
        table(&t, &[&[9]]);
        let state = |n: &str| tmp.path().join(n);
        let err = drain(&mut source(
            tmp.path(),
            &state("a"),
            &[("startingVersion", "0")],
        ))
        .unwrap_err()
        // The runtime reads every source through `FlowSource`, which names the flow.
        .in_flow("f")
        .to_string();
        assert_eq!(
            err,
            format!("flow `f`: version 3 of the Delta table at {} deletes rows (DELETE), which a streaming read cannot pass on as appends\n  help: set the option `skipChangeCommits: \"true\"` on the reader to skip such commits (or `ignoreDeletes: \"true\"` when they only delete), or run a full refresh of this flow's target", t.display())
        );
        for opt in ["ignoreDeletes", "skipChangeCommits", "ignoreChanges"] {
            let got = drain(&mut source(
                tmp.path(),
                &state(opt),
                &[("startingVersion", "0"), (opt, "true")],
            ))
            .unwrap();
            assert_eq!(ids(&got), vec![vec![1, 2, 9]], "{opt}");
        }
        // A rewrite (remove + add): ignoreDeletes refuses it, ignoreChanges
        // reads the rewritten file again, skipChangeCommits skips it.
        let f2 = added(&t, 2);
        commit(
            &t,
            5,
            &[("remove", &f2, true), ("add", &f2, true)],
            "UPDATE",
        );
        let err = drain(&mut source(
            tmp.path(),
            &state("b"),
            &[("startingVersion", "0"), ("ignoreDeletes", "true")],
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("version 5 of the Delta table at"), "{err}");
        assert!(err.contains("rewrites rows (UPDATE)"), "{err}");
        let got = drain(&mut source(
            tmp.path(),
            &state("c"),
            &[("startingVersion", "0"), ("ignoreChanges", "true")],
        ))
        .unwrap();
        assert_eq!(ids(&got), vec![vec![1, 2, 9, 2]]);
        let got = drain(&mut source(
            tmp.path(),
            &state("d"),
            &[("startingVersion", "0"), ("skipChangeCommits", "true")],
        ))
        .unwrap();
        assert_eq!(ids(&got), vec![vec![1, 2, 9]]);
    }

    #[test]
    fn a_replayed_first_batch_reads_the_snapshot_it_started_from() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path().join("t");
        table(&t, &[&[1], &[2]]);
        let state = tmp.path().join("s");
        let mut src = source(tmp.path(), &state, &[]);
        let end = src.latest_offset(None).unwrap().unwrap();
        assert_eq!(
            end,
            json!({"reservoirVersion": 3, "index": -1, "isStartingVersion": false})
        );
        // The table moves on before the batch is committed; after a restart
        // the batch is read again from the same start (the snapshot at 2).
        table(&t, &[&[3]]);
        let mut again = source(tmp.path(), &state, &[]);
        let read = again.read(None, &end).unwrap();
        let c = read.batches.iter().map(|b| b.num_rows()).sum::<usize>();
        assert_eq!(c, 2);
        // And the rest follows: only the new commit (version 3).
        let next = again.latest_offset(Some(&end)).unwrap().unwrap();
        assert_eq!(
            next,
            json!({"reservoirVersion": 4, "index": -1, "isStartingVersion": false})
        );
        assert_eq!(again.read(Some(&end), &next).unwrap().num_rows(), 1);
    }

    #[test]
    fn options_are_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = |k: &str, v: &str| {
            let m: BTreeMap<String, String> = [(k.to_string(), v.to_string())].into();
            Options::merged(&m, &BTreeMap::new(), "f")
        };
        let ctx = SourceContext {
            flow: "f".into(),
            state_dir: tmp.path().join("s").into(),
            base_dir: tmp.path().to_path_buf(),
            option_overrides: BTreeMap::new(),
        };
        let err = |k: &str, v: &str| {
            DeltaSource::open("t", schema(), opts(k, v), ctx.clone(), false)
                .err()
                .unwrap()
                .in_flow("f")
                .to_string()
        };
        assert_eq!(
            err("startingVersion", "first"),
            "flow `f`: option `startingVersion` must be a table version (0, 1, ...) or `latest`, got `first`\n  help: .option(\"startingVersion\", \"0\")"
        );
        assert_eq!(
            err("maxFilesPerTrigger", "0"),
            "flow `f`: option `maxFilesPerTrigger` must be a positive whole number, got `0`\n  help: .option(\"maxFilesPerTrigger\", \"10\")"
        );
        assert_eq!(
            err("skipChangeCommits", "yes"),
            "flow `f`: option `skipChangeCommits` must be true or false, got `yes`\n  help: .option(\"skipChangeCommits\", \"true\")"
        );
    }
}
