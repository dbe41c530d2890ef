//! A flow's checkpoint directory, in Spark Structured Streaming's on-disk
//! format, so a checkpoint reads the same way in both.
//!
//! ```text
//! <checkpoint>/
//!   metadata        {"id":"<query id, a uuid v4>"}
//!   offsets/<N>     v1
//!                   {"batchWatermarkMs":0,"batchTimestampMs":1700000000000,"conf":{...}}
//!                   <offset JSON of source 0, or `-` when it has none yet>
//!                   <offset JSON of source 1> ...
//!   commits/<N>     v1
//!                   {"nextBatchWatermarkMs":0}
//!   sources/<i>/    private to source i (e.g. the file source's seen-files log)
//!   shape.json      the query's shape, to explain what changed on restart
//! ```
//!
//! Like Spark's `HDFSMetadataLog`, files have no trailing newline, each
//! write goes to a hidden temp file (`.N.<uuid>.tmp`) that is then moved
//! into place, and the logs are write-once: writing batch N again with
//! different content is refused. A damaged file is an error that names it;
//! nothing is silently reset.
//!
//! The same layout works in a local directory and in object storage
//! (`s3://bucket/prefix`, see [`crate::engine::storage`]): there a write-once
//! is a conditional put instead of a hard link. Durability and syncing:
//! [`crate::engine::storage::local`].

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::engine::storage::{Location, ObjectKey, WriteOnce};
use crate::error::{Error, Result};

/// The version line of the offset and commit logs.
const LOG_VERSION: &str = "v1";

/// Source options that limit how much is admitted per batch: Spark lets them
/// change on an existing checkpoint.
const ADMISSION_OPTIONS: &[&str] = &[
    "maxfilespertrigger",
    "maxbytespertrigger",
    "maxoffsetspertrigger",
    "minoffsetspertrigger",
    "maxtriggerdelay",
    "rowspersecond",
    "rowspermicrobatch",
];

/// What a user can do about a damaged checkpoint file.
const DAMAGED_HINT: &str = "the checkpoint is damaged: restore this file from a backup, or rerun \
     the flow with `--full-refresh <flow>` to start over from a new checkpoint";

/// One entry of the offset log (`offsets/<N>`): what batch N reads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OffsetEntry {
    /// The event-time watermark in effect for the batch (ms since the epoch).
    pub batch_watermark_ms: i64,
    /// When the batch was planned (ms since the epoch); `current_timestamp()`.
    pub batch_timestamp_ms: i64,
    /// Configuration that must stay fixed for the life of the checkpoint.
    pub conf: BTreeMap<String, String>,
    /// The end offset of each source, in source order (`None`: no offset yet).
    pub sources: Vec<Option<serde_json::Value>>,
}

/// One entry of the commit log (`commits/<N>`): batch N is complete.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommitEntry {
    /// The watermark the next batch starts with (ms since the epoch).
    pub next_batch_watermark_ms: i64,
    /// The rows the batch handed to its sink (this engine's addition to
    /// Spark's commit metadata, which ignores it): a restart checks that a
    /// sink that records its batches has the last one (a power loss can
    /// take a manifest entry that was never synced).
    pub sink_rows: Option<u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OffsetMetadataJson {
    #[serde(default)]
    batch_watermark_ms: i64,
    #[serde(default)]
    batch_timestamp_ms: i64,
    #[serde(default)]
    conf: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CommitJson {
    #[serde(default)]
    next_batch_watermark_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pipelines_sink_rows: Option<u64>,
}

#[derive(Serialize, Deserialize)]
struct MetadataJson {
    id: String,
}

/// One source of a query, as recorded in the query shape.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceShape {
    /// The source's description, e.g. "json source `data/logs`".
    pub description: String,
    /// The source format, e.g. `json`.
    pub format: String,
    /// The source's options (Spark option names).
    #[serde(default)]
    pub options: BTreeMap<String, String>,
}

mod lease;

/// An exclusive lock on a flow's checkpoint, held while the flow runs (and
/// while `--full-refresh` clears it): two runs of one flow would otherwise
/// both write the same batches. On a local checkpoint the lock is the
/// operating system's (`flock`) on `<checkpoint>.lock` beside the directory,
/// so it is released when the process ends, even by SIGKILL. In object
/// storage, which has no such lock, it is a lease object at the same name,
/// taken with a conditional put and renewed while the run lasts (see
/// `lease`); the write-once logs stop a second writer in any case.
#[derive(Debug)]
pub struct CheckpointLock {
    _file: Option<fs::File>,
    _lease: Option<lease::Lease>,
}

/// Takes the lock of the checkpoint at `dir` ([`CheckpointLock`]); when
/// another run holds it, an error naming that run (process, host, since)
/// and the checkpoint.
pub fn lock_checkpoint(dir: impl Into<Location>) -> Result<CheckpointLock> {
    match &dir.into() {
        Location::Local(p) => lock_local(p),
        Location::Object(key) => {
            let name = key.key.rsplit('/').next().unwrap_or("checkpoint");
            let lock = ObjectKey {
                store: key.store.clone(),
                key: match key.key.rsplit_once('/') {
                    Some((parent, _)) => format!("{parent}/{name}.lock"),
                    None => format!("{name}.lock"),
                },
            };
            let lease = lease::acquire(lock, &key.url(), &hostname())?;
            Ok(CheckpointLock {
                _file: None,
                _lease: Some(lease),
            })
        }
    }
}

fn lock_local(dir: &Path) -> Result<CheckpointLock> {
    use std::io::{Read, Seek, Write};
    use std::os::unix::io::AsRawFd;
    let name = dir
        .file_name()
        .map(|n| format!("{}.lock", n.to_string_lossy()))
        .unwrap_or_else(|| "checkpoint.lock".to_string());
    let path = dir.parent().unwrap_or_else(|| Path::new(".")).join(name);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    // SAFETY: flock on a descriptor this function owns; no memory is shared.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    if !locked {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::WouldBlock {
            return Err(Error::io(&path, e));
        }
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        let holder = holder.trim();
        return Err(Error::runtime_with_help(
            format!(
                "the checkpoint {} is in use by another run ({})",
                crate::spec::display_path(dir),
                if holder.is_empty() { "holder unknown" } else { holder }
            ),
            "wait for that run to finish or stop it; two runs of one flow would write the same batches twice",
        ));
    }
    let host = hostname();
    let since = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let info = format!("pid {} on {host} since {since}", std::process::id());
    let written = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(info.as_bytes()));
    written.map_err(|e| Error::io(&path, e))?;
    Ok(CheckpointLock {
        _file: Some(file),
        _lease: None,
    })
}

/// This machine's host name, for lock messages.
fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown host".to_string();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// What `shape.json` stores instead of a secret option's value.
pub const SECRET_VALUE: &str = "<secret: not stored>";

/// True for an option whose value is a secret (any case): a key containing
/// `password`, `secret` or `token`, every `kafka.sasl.*` option and the
/// `kafka.ssl.*` options holding keys. Their values are never written to the
/// checkpoint nor printed, and changing one (rotating a password) is not a
/// change of the query.
pub fn is_secret_option(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.contains("password")
        || k.contains("secret")
        || k.contains("token")
        || k.starts_with("kafka.sasl.")
        || (k.starts_with("kafka.ssl.") && k.contains("key"))
}

/// A source's options as its shape stores them: secret values replaced by
/// [`SECRET_VALUE`].
pub fn shape_options(options: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    options
        .iter()
        .map(|(k, v)| {
            let v = if is_secret_option(k) {
                SECRET_VALUE.to_string()
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect()
}

/// The parts of a query that a checkpoint depends on: when they change, the
/// checkpoint may no longer fit the query (Spark's "query changes between
/// restarts").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryShape {
    /// The sources, in the order their offsets are stored.
    #[serde(default)]
    pub sources: Vec<SourceShape>,
    /// Stateful operators, e.g. "aggregate [window, service_name]".
    #[serde(default)]
    pub stateful_operators: Vec<String>,
    /// Output columns as `(name, type)`, e.g. `("count", "BIGINT")`.
    #[serde(default)]
    pub output_schema: Vec<(String, String)>,
}

/// A flow's checkpoint directory.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    dir: Location,
    query_id: String,
    /// One more than the newest batch whose `offsets/N` this process wrote
    /// or read (0: none): committing it needs no look-up (a request, in
    /// object storage).
    offsets_known: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Checkpoint {
    /// Opens (creating when needed) the checkpoint at `dir`: creates `dir`,
    /// `offsets/`, `commits/` and `sources/`, and writes `metadata` with a
    /// new query id the first time; later opens read the id back.
    pub fn open(dir: impl Into<Location>) -> Result<Checkpoint> {
        let dir: Location = dir.into();
        for d in [
            dir.clone(),
            dir.join("offsets"),
            dir.join("commits"),
            dir.join("sources"),
        ] {
            d.create_dir()?;
        }
        let meta = dir.join("metadata");
        let query_id = match meta.read_text(DAMAGED_HINT)? {
            Some(text) => parse_metadata(&meta, &text)?,
            None => {
                let id = uuid::Uuid::new_v4().to_string();
                let text = serde_json::to_string(&MetadataJson { id: id.clone() })
                    .map_err(|e| Error::checkpoint(meta.shown(), e.to_string()))?;
                match meta.write_once(text.as_bytes())? {
                    WriteOnce::Written | WriteOnce::Identical => id,
                    // Another process created it first: use its id.
                    WriteOnce::Differs => read_metadata(&meta)?,
                }
            }
        };
        Ok(Checkpoint {
            dir,
            query_id,
            offsets_known: Default::default(),
        })
    }

    /// The checkpoint directory.
    pub fn dir(&self) -> &Location {
        &self.dir
    }

    /// The query id stored in `metadata` (stable for the checkpoint's life).
    pub fn query_id(&self) -> &str {
        &self.query_id
    }

    /// The directory private to source `index` (`sources/<index>`), created
    /// when possible (a failure to create it surfaces when the source uses it).
    pub fn source_dir(&self, index: usize) -> Location {
        let d = self.dir.join("sources").join(&index.to_string());
        let _ = d.create_dir();
        d
    }

    fn offsets_dir(&self) -> Location {
        self.dir.join("offsets")
    }

    fn commits_dir(&self) -> Location {
        self.dir.join("commits")
    }

    /// The file `offsets/<n>`.
    pub fn offsets_file(&self, n: u64) -> Location {
        self.offsets_dir().join(&n.to_string())
    }

    /// The offsets of batch `n`; an error naming `offsets/<n>` when it does
    /// not exist (see [`Checkpoint::try_offsets`]).
    pub fn offsets(&self, n: u64) -> Result<OffsetEntry> {
        let path = self.offsets_file(n);
        self.try_offsets(n)?.ok_or_else(|| {
            Error::checkpoint(
                path.shown(),
                format!("is missing: batch {n} has no offsets; {DAMAGED_HINT}"),
            )
        })
    }

    /// The offsets of batch `n`, or `None` when `offsets/<n>` does not exist.
    pub fn try_offsets(&self, n: u64) -> Result<Option<OffsetEntry>> {
        let path = self.offsets_file(n);
        match path.read_text(DAMAGED_HINT)? {
            None => Ok(None),
            Some(text) => {
                let entry = parse_offsets(&path.shown(), &text)?;
                self.offsets_exist(n);
                Ok(Some(entry))
            }
        }
    }

    /// Notes that `offsets/<n>` exists.
    fn offsets_exist(&self, n: u64) {
        self.offsets_known
            .fetch_max(n + 1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The latest batch of the offset log and its offsets.
    pub fn latest_offsets(&self) -> Result<Option<(u64, OffsetEntry)>> {
        let ids = batch_ids(&self.offsets_dir())?;
        check_contiguous(&self.offsets_dir(), &ids)?;
        match ids.last() {
            None => Ok(None),
            Some(&n) => {
                let entry = self.offsets(n)?;
                Ok(Some((n, entry)))
            }
        }
    }

    /// Writes `offsets/<n>`. Refused when the file exists with other content.
    pub fn write_offsets(&self, n: u64, entry: &OffsetEntry) -> Result<()> {
        let path = self.offsets_file(n);
        let text = format_offsets(entry).map_err(|e| Error::checkpoint(path.shown(), e))?;
        match path.write_once(text.as_bytes())? {
            WriteOnce::Written | WriteOnce::Identical => {
                self.offsets_exist(n);
                Ok(())
            }
            WriteOnce::Differs => Err(Error::checkpoint(
                path.shown(),
                format!(
                    "batch {n} already has offsets that differ from the ones being written; \
                     the offset log is write-once (is another run of this flow using the same \
                     checkpoint?)"
                ),
            )),
        }
    }

    /// The latest batch of the commit log. Errors when its batch has no
    /// offsets, or when the commit log runs ahead of the offset log.
    pub fn latest_commit(&self) -> Result<Option<(u64, CommitEntry)>> {
        let ids = batch_ids(&self.commits_dir())?;
        let Some(&n) = ids.last() else {
            return Ok(None);
        };
        let path = self.commits_dir().join(&n.to_string());
        let offsets_path = self.offsets_file(n);
        if !offsets_path.exists()? {
            return Err(Error::checkpoint(
                offsets_path.shown(),
                format!(
                    "is missing, but commits/{n} exists: batch {n} was committed without \
                     offsets; {DAMAGED_HINT}"
                ),
            ));
        }
        let text = path.read_text(DAMAGED_HINT)?.ok_or_else(|| {
            Error::checkpoint(path.shown(), "disappeared while it was being read")
        })?;
        Ok(Some((n, parse_commit(&path.shown(), &text)?)))
    }

    /// The commit of batch `n`, or `None` when `commits/<n>` does not exist.
    pub fn commit(&self, n: u64) -> Result<Option<CommitEntry>> {
        let path = self.commits_dir().join(&n.to_string());
        match path.read_text(DAMAGED_HINT)? {
            None => Ok(None),
            Some(text) => parse_commit(&path.shown(), &text).map(Some),
        }
    }

    /// Writes `commits/<n>`. Refused when batch `n` has no offsets, or when
    /// the file exists with other content.
    pub fn write_commit(&self, n: u64, entry: &CommitEntry) -> Result<()> {
        let path = self.commits_dir().join(&n.to_string());
        let known = self
            .offsets_known
            .load(std::sync::atomic::Ordering::Relaxed)
            > n;
        if !known && !self.offsets_file(n).exists()? {
            return Err(Error::checkpoint(
                path.shown(),
                format!("cannot commit batch {n}: offsets/{n} does not exist"),
            ));
        }
        let text = format_commit(entry).map_err(|e| Error::checkpoint(path.shown(), e))?;
        match path.write_once(text.as_bytes())? {
            WriteOnce::Written | WriteOnce::Identical => Ok(()),
            WriteOnce::Differs => Err(Error::checkpoint(
                path.shown(),
                format!(
                    "batch {n} is already committed with a different watermark; the commit \
                     log is write-once (is another run of this flow using the same checkpoint?)"
                ),
            )),
        }
    }

    /// Deletes offset and commit files of batches older than the latest
    /// `keep` (Spark's `spark.sql.streaming.minBatchesToRetain`, default
    /// 100; `0` counts as 1). Returns how many files were deleted.
    pub fn purge(&self, keep: usize) -> Result<usize> {
        let keep = keep.max(1) as u64;
        let offset_ids = batch_ids(&self.offsets_dir())?;
        let Some(&latest) = offset_ids.last() else {
            return Ok(0);
        };
        let threshold = (latest + 1).saturating_sub(keep);
        let mut deleted = 0;
        for dir in [self.offsets_dir(), self.commits_dir()] {
            for id in batch_ids(&dir)? {
                if id < threshold && dir.join(&id.to_string()).remove()? {
                    deleted += 1;
                }
            }
        }
        Ok(deleted)
    }

    /// Stores the query's shape in `shape.json` (replacing the previous one).
    pub fn write_shape(&self, shape: &QueryShape) -> Result<()> {
        let path = self.dir.join("shape.json");
        let text = serde_json::to_string_pretty(shape)
            .map_err(|e| Error::checkpoint(path.shown(), e.to_string()))?;
        path.replace(text.as_bytes())
    }

    /// The shape stored by [`Checkpoint::write_shape`], if any.
    pub fn read_shape(&self) -> Result<Option<QueryShape>> {
        let path = self.dir.join("shape.json");
        match path.read_text(DAMAGED_HINT)? {
            None => Ok(None),
            Some(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
                Error::checkpoint(
                    path.shown(),
                    format!("is not a valid query shape ({e}); {DAMAGED_HINT}"),
                )
            }),
        }
    }
}

/// Readable differences between the shape a checkpoint was written with
/// (`old`) and the current query (`new`), one line each; empty when the
/// checkpoint still fits. Sources are numbered from 1 in declaration order.
/// Admission-limit options (`maxFilesPerTrigger`, `maxBytesPerTrigger`,
/// `maxOffsetsPerTrigger`, `rowsPerSecond`, ...) may change freely, as in
/// Spark, and are not listed.
pub fn shape_diff(old: &QueryShape, new: &QueryShape) -> Vec<String> {
    let mut lines = Vec::new();
    let common = old.sources.len().min(new.sources.len());
    for i in 0..common {
        let (o, n) = (&old.sources[i], &new.sources[i]);
        let num = i + 1;
        if o.description != n.description || o.format != n.format {
            lines.push(format!(
                "source {num} changed: {} → {}",
                o.description, n.description
            ));
            continue;
        }
        let keys: BTreeSet<&String> = o.options.keys().chain(n.options.keys()).collect();
        for k in keys {
            if ADMISSION_OPTIONS.contains(&k.to_ascii_lowercase().as_str()) || is_secret_option(k) {
                continue;
            }
            match (o.options.get(k), n.options.get(k)) {
                (Some(a), Some(b)) if a != b => {
                    lines.push(format!("option `{k}` of source {num} changed: {a} → {b}"))
                }
                (Some(a), None) => {
                    lines.push(format!("option `{k}` of source {num} removed (was {a})"))
                }
                (None, Some(b)) => lines.push(format!("option `{k}` of source {num} added: {b}")),
                _ => {}
            }
        }
    }
    for s in &new.sources[common..] {
        lines.push(format!("source added: {}", s.description));
    }
    for s in &old.sources[common..] {
        lines.push(format!("source removed: {}", s.description));
    }

    let mut remaining: Vec<&String> = new.stateful_operators.iter().collect();
    let mut removed = Vec::new();
    for op in &old.stateful_operators {
        match remaining.iter().position(|r| *r == op) {
            Some(p) => {
                remaining.remove(p);
            }
            None => removed.push(op),
        }
    }
    for op in remaining {
        lines.push(format!("stateful operator added: {op}"));
    }
    for op in removed {
        lines.push(format!("stateful operator removed: {op}"));
    }

    for (name, ty) in &new.output_schema {
        match old.output_schema.iter().find(|(n, _)| n == name) {
            Some((_, old_ty)) if old_ty != ty => lines.push(format!(
                "output column `{name}` changed type: {old_ty} → {ty}"
            )),
            Some(_) => {}
            None => lines.push(format!("output column `{name}` added ({ty})")),
        }
    }
    for (name, ty) in &old.output_schema {
        if !new.output_schema.iter().any(|(n, _)| n == name) {
            lines.push(format!("output column `{name}` removed (was {ty})"));
        }
    }
    lines
}

/// Copies an external checkpoint directory (e.g. one written by Spark) into
/// `into`, recursively, when `into` does not exist or is empty; returns
/// whether it copied. `external` must look like a checkpoint (it has
/// `offsets/` or `metadata`). The copy is made in a sibling temp directory
/// and renamed into place, so a crash never leaves half a checkpoint.
pub fn import_from(external: &Path, into: impl Into<Location>) -> Result<bool> {
    let into: &Location = &into.into();
    if !external.is_dir() {
        return Err(Error::runtime_with_help(
            format!(
                "cannot import checkpoint {}: it is not a directory",
                external.display()
            ),
            "point the import at a Spark checkpoint directory (it contains `offsets/` and `metadata`)",
        ));
    }
    if !external.join("offsets").is_dir() && !external.join("metadata").is_file() {
        return Err(Error::runtime_with_help(
            format!(
                "cannot import checkpoint {}: it has neither `offsets/` nor `metadata`, so it is \
                 not a streaming checkpoint",
                external.display()
            ),
            "point the import at a Spark checkpoint directory (it contains `offsets/` and `metadata`)",
        ));
    }
    match into {
        Location::Local(p) => import_local(external, p),
        Location::Object(_) => import_object(external, into),
    }
}

/// [`import_from`] into a local directory: copied aside, renamed in.
fn import_local(external: &Path, into: &Path) -> Result<bool> {
    if into.exists() {
        let mut entries = fs::read_dir(into).map_err(|e| Error::io(into, e))?;
        if entries.next().is_some() {
            return Ok(false);
        }
    }
    let parent = match into.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    let name = into
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "checkpoint".into());
    let tmp = parent.join(format!(".{name}.import-{}", uuid::Uuid::new_v4()));
    if let Err(e) = copy_dir(external, &tmp) {
        let _ = fs::remove_dir_all(&tmp);
        return Err(e);
    }
    if into.exists() {
        // Empty: remove it so the rename can take its place.
        fs::remove_dir(into).map_err(|e| Error::io(into, e))?;
    }
    if let Err(e) = fs::rename(&tmp, into) {
        let _ = fs::remove_dir_all(&tmp);
        return Err(Error::io(into, e));
    }
    Ok(true)
}

/// [`import_from`] into object storage, which has no rename: every file
/// put under `into`, `metadata` last, so an import cut short is done again
/// by the next run (until `metadata` is there, the checkpoint counts as not
/// imported).
fn import_object(external: &Path, into: &Location) -> Result<bool> {
    if into.join("metadata").exists()? {
        return Ok(false);
    }
    let mut files = Vec::new();
    list_tree(external, "", &mut files)?;
    files.sort_by_key(|rel| rel == "metadata");
    for rel in files {
        let src = external.join(&rel);
        let bytes = fs::read(&src).map_err(|e| Error::io(&src, e))?;
        let target = rel
            .split('/')
            .fold(into.clone(), |loc, part| loc.join(part));
        target.replace(&bytes)?;
    }
    Ok(true)
}

/// The files under `dir`, as `/`-separated paths relative to it.
fn list_tree(dir: &Path, prefix: &str, out: &mut Vec<String>) -> Result<()> {
    for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let ty = entry.file_type().map_err(|e| Error::io(entry.path(), e))?;
        if ty.is_dir() {
            list_tree(&entry.path(), &rel, out)?;
        } else {
            out.push(rel);
        }
    }
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to).map_err(|e| Error::io(to, e))?;
    for entry in fs::read_dir(from).map_err(|e| Error::io(from, e))? {
        let entry = entry.map_err(|e| Error::io(from, e))?;
        let src = entry.path();
        let dst = to.join(entry.file_name());
        let ty = entry.file_type().map_err(|e| Error::io(&src, e))?;
        if ty.is_dir() {
            copy_dir(&src, &dst)?;
        } else {
            fs::copy(&src, &dst).map_err(|e| Error::io(&src, e))?;
        }
    }
    Ok(())
}

fn read_metadata(path: &Location) -> Result<String> {
    let text = path
        .read_text(DAMAGED_HINT)?
        .ok_or_else(|| Error::checkpoint(path.shown(), "disappeared while it was being read"))?;
    parse_metadata(path, &text)
}

fn parse_metadata(path: &Location, text: &str) -> Result<String> {
    let meta: MetadataJson = serde_json::from_str(text.trim()).map_err(|e| {
        Error::checkpoint(
            path.shown(),
            format!("is not valid metadata (expected {{\"id\":\"<uuid>\"}}): {e}; {DAMAGED_HINT}"),
        )
    })?;
    if meta.id.trim().is_empty() {
        return Err(Error::checkpoint(
            path.shown(),
            format!("has an empty query id; {DAMAGED_HINT}"),
        ));
    }
    Ok(meta.id)
}

fn format_offsets(entry: &OffsetEntry) -> std::result::Result<String, String> {
    let meta = OffsetMetadataJson {
        batch_watermark_ms: entry.batch_watermark_ms,
        batch_timestamp_ms: entry.batch_timestamp_ms,
        conf: entry.conf.clone(),
    };
    let mut text = String::from(LOG_VERSION);
    text.push('\n');
    text.push_str(&serde_json::to_string(&meta).map_err(|e| e.to_string())?);
    for s in &entry.sources {
        text.push('\n');
        match s {
            Some(v) => text.push_str(&serde_json::to_string(v).map_err(|e| e.to_string())?),
            None => text.push('-'),
        }
    }
    Ok(text)
}

fn format_commit(entry: &CommitEntry) -> std::result::Result<String, String> {
    let json = serde_json::to_string(&CommitJson {
        next_batch_watermark_ms: entry.next_batch_watermark_ms,
        pipelines_sink_rows: entry.sink_rows,
    })
    .map_err(|e| e.to_string())?;
    Ok(format!("{LOG_VERSION}\n{json}"))
}

/// Checks the version line of a log file (Spark's `validateVersion`).
pub(crate) fn check_version(path: &Path, line: Option<&str>, hint: &str) -> Result<()> {
    let Some(line) = line else {
        return Err(Error::checkpoint(
            path,
            format!("is empty (truncated by a crash or a full disk?); {hint}"),
        ));
    };
    let line = line.trim_end_matches('\r');
    if line == LOG_VERSION {
        return Ok(());
    }
    let version = line
        .strip_prefix('v')
        .and_then(|v| v.trim().parse::<u32>().ok());
    match version {
        Some(v) if v > 1 => Err(Error::checkpoint(
            path,
            format!(
                "was written in log version v{v} by a newer version of Spark or of this \
                 framework; this build reads v1. Run the flow with the version that wrote it"
            ),
        )),
        _ => Err(Error::checkpoint(
            path,
            format!(
                "line 1 should be the log version `v1` but is `{}`; {hint}",
                shorten(line)
            ),
        )),
    }
}

pub(crate) fn shorten(s: &str) -> String {
    if s.chars().count() > 60 {
        format!("{}...", s.chars().take(60).collect::<String>())
    } else {
        s.to_string()
    }
}

fn parse_offsets(path: &Path, text: &str) -> Result<OffsetEntry> {
    let mut lines = text.split('\n');
    let first = lines.next().filter(|l| !l.is_empty());
    check_version(path, first, DAMAGED_HINT)?;
    let meta_line = lines.next().map(|l| l.trim_end_matches('\r')).unwrap_or("");
    let meta: OffsetMetadataJson = if meta_line.trim().is_empty() {
        OffsetMetadataJson {
            batch_watermark_ms: 0,
            batch_timestamp_ms: 0,
            conf: BTreeMap::new(),
        }
    } else {
        serde_json::from_str(meta_line).map_err(|e| {
            Error::checkpoint(
                path,
                format!(
                    "line 2 is not valid batch metadata (expected \
                     {{\"batchWatermarkMs\":..,\"batchTimestampMs\":..,\"conf\":{{..}}}}): {e}; \
                     {DAMAGED_HINT}"
                ),
            )
        })?
    };
    let mut sources = Vec::new();
    for (i, line) in lines.enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            // A trailing newline (files written by hand or other tools).
            continue;
        }
        if line.trim() == "-" {
            sources.push(None);
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| {
            Error::checkpoint(
                path,
                format!(
                    "line {} (the offset of source {}) is not valid JSON: {e}; {DAMAGED_HINT}",
                    i + 3,
                    i
                ),
            )
        })?;
        sources.push(Some(v));
    }
    Ok(OffsetEntry {
        batch_watermark_ms: meta.batch_watermark_ms,
        batch_timestamp_ms: meta.batch_timestamp_ms,
        conf: meta.conf,
        sources,
    })
}

fn parse_commit(path: &Path, text: &str) -> Result<CommitEntry> {
    let mut lines = text.split('\n');
    let first = lines.next().filter(|l| !l.is_empty());
    check_version(path, first, DAMAGED_HINT)?;
    let line = lines.next().map(|l| l.trim_end_matches('\r')).unwrap_or("");
    if line.trim().is_empty() {
        return Err(Error::checkpoint(
            path,
            format!(
                "has no commit metadata on line 2 (truncated by a crash or a full disk?); \
                 {DAMAGED_HINT}"
            ),
        ));
    }
    let json: CommitJson = serde_json::from_str(line).map_err(|e| {
        Error::checkpoint(
            path,
            format!(
                "line 2 is not valid commit metadata (expected {{\"nextBatchWatermarkMs\":..}}): \
                 {e}; {DAMAGED_HINT}"
            ),
        )
    })?;
    Ok(CommitEntry {
        next_batch_watermark_ms: json.next_batch_watermark_ms,
        sink_rows: json.pipelines_sink_rows,
    })
}

/// The batch ids in a log directory (file names that are numbers; hidden
/// temp and `.crc` files are ignored), sorted.
fn batch_ids(dir: &Location) -> Result<Vec<u64>> {
    let mut ids: Vec<u64> = dir
        .list()?
        .iter()
        .filter_map(|n| n.parse::<u64>().ok())
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

fn check_contiguous(dir: &Location, ids: &[u64]) -> Result<()> {
    for w in ids.windows(2) {
        if w[1] != w[0] + 1 {
            let missing = dir.join(&(w[0] + 1).to_string());
            return Err(Error::checkpoint(
                missing.shown(),
                format!(
                    "is missing: the log has batch {} and batch {} but nothing in between; \
                     {DAMAGED_HINT}",
                    w[0], w[1]
                ),
            ));
        }
    }
    Ok(())
}
