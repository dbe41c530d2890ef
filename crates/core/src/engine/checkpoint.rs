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
//! Durability: like Spark, files are not fsynced by default. A process
//! crash (even SIGKILL) loses nothing, since written data stays in the
//! operating system's page cache; only a power loss or kernel crash could
//! lose the last batches' checkpoint and output files. The pipeline setting
//! `pipelines.checkpoint.fsync: true` (see [`configure_fsync`]) syncs every
//! checkpoint file, source log entry, output file and manifest entry, and
//! their directories, before the next step of the batch protocol.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The version line of the offset and commit logs.
const LOG_VERSION: &str = "v1";

pub use crate::conf::FSYNC_CONF_KEY;

static FSYNC: AtomicBool = AtomicBool::new(false);

/// Reads [`FSYNC_CONF_KEY`] from the pipeline's configuration (default
/// `false`) and applies it to the process: the runtime calls it when a run
/// starts.
pub fn configure_fsync(conf: &BTreeMap<String, String>) -> Result<()> {
    let on = match conf.get(FSYNC_CONF_KEY).map(|v| v.trim()) {
        None => false,
        Some(v) if v.eq_ignore_ascii_case("true") => true,
        Some(v) if v.eq_ignore_ascii_case("false") => false,
        Some(v) => {
            return Err(Error::runtime_with_help(
                format!("configuration `{FSYNC_CONF_KEY}` is `{v}`, not `true` or `false`"),
                format!("set `{FSYNC_CONF_KEY}` to `true` (sync files, survive power loss) or `false` (the default, like Spark)"),
            ))
        }
    };
    set_fsync(on);
    Ok(())
}

/// Turns syncing of checkpoint, log and output files on or off for the process.
pub fn set_fsync(on: bool) {
    FSYNC.store(on, Ordering::Relaxed);
}

/// Whether files are synced (see [`configure_fsync`]).
pub fn fsync_enabled() -> bool {
    FSYNC.load(Ordering::Relaxed)
}

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

/// An exclusive lock on a flow's checkpoint, held while the flow runs (and
/// while `--full-refresh` clears it): two runs of one flow would otherwise
/// both write the same batches. The lock is the operating system's
/// (`flock`) on `<checkpoint>.lock` beside the directory, so it is released
/// when the process ends, even by SIGKILL.
#[derive(Debug)]
pub struct CheckpointLock {
    _file: fs::File,
}

/// Takes the lock of the checkpoint at `dir` ([`CheckpointLock`]); when
/// another run holds it, an error naming that run (process, host, since)
/// and the checkpoint.
pub fn lock_checkpoint(dir: &Path) -> Result<CheckpointLock> {
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
    Ok(CheckpointLock { _file: file })
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
    dir: PathBuf,
    query_id: String,
}

impl Checkpoint {
    /// Opens (creating when needed) the checkpoint at `dir`: creates `dir`,
    /// `offsets/`, `commits/` and `sources/`, and writes `metadata` with a
    /// new query id the first time; later opens read the id back.
    pub fn open(dir: &Path) -> Result<Checkpoint> {
        for d in [
            dir.to_path_buf(),
            dir.join("offsets"),
            dir.join("commits"),
            dir.join("sources"),
        ] {
            create_private_dir(&d)?;
        }
        let meta = dir.join("metadata");
        let query_id = if meta.exists() {
            read_metadata(&meta)?
        } else {
            let id = uuid::Uuid::new_v4().to_string();
            let text = serde_json::to_string(&MetadataJson { id: id.clone() })
                .map_err(|e| Error::checkpoint(&meta, e.to_string()))?;
            match write_once(&meta, text.as_bytes())? {
                WriteOnce::Written | WriteOnce::Identical => id,
                // Another process created it first: use its id.
                WriteOnce::Differs => read_metadata(&meta)?,
            }
        };
        Ok(Checkpoint {
            dir: dir.to_path_buf(),
            query_id,
        })
    }

    /// The checkpoint directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The query id stored in `metadata` (stable for the checkpoint's life).
    pub fn query_id(&self) -> &str {
        &self.query_id
    }

    /// The directory private to source `index` (`sources/<index>`), created
    /// when possible (a failure to create it surfaces when the source uses it).
    pub fn source_dir(&self, index: usize) -> PathBuf {
        let d = self.dir.join("sources").join(index.to_string());
        let _ = create_private_dir(&d);
        d
    }

    fn offsets_dir(&self) -> PathBuf {
        self.dir.join("offsets")
    }

    fn commits_dir(&self) -> PathBuf {
        self.dir.join("commits")
    }

    /// The offsets of batch `n`; an error naming `offsets/<n>` when it does
    /// not exist (see [`Checkpoint::try_offsets`]).
    pub fn offsets(&self, n: u64) -> Result<OffsetEntry> {
        let path = self.offsets_dir().join(n.to_string());
        self.try_offsets(n)?.ok_or_else(|| {
            Error::checkpoint(
                &path,
                format!("is missing: batch {n} has no offsets; {DAMAGED_HINT}"),
            )
        })
    }

    /// The offsets of batch `n`, or `None` when `offsets/<n>` does not exist.
    pub fn try_offsets(&self, n: u64) -> Result<Option<OffsetEntry>> {
        let path = self.offsets_dir().join(n.to_string());
        match read_optional(&path)? {
            None => Ok(None),
            Some(text) => parse_offsets(&path, &text).map(Some),
        }
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
        let path = self.offsets_dir().join(n.to_string());
        let text = format_offsets(entry).map_err(|e| Error::checkpoint(&path, e))?;
        match write_once(&path, text.as_bytes())? {
            WriteOnce::Written | WriteOnce::Identical => Ok(()),
            WriteOnce::Differs => Err(Error::checkpoint(
                &path,
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
        let path = self.commits_dir().join(n.to_string());
        let offsets_path = self.offsets_dir().join(n.to_string());
        if !offsets_path.exists() {
            return Err(Error::checkpoint(
                &offsets_path,
                format!(
                    "is missing, but commits/{n} exists: batch {n} was committed without \
                     offsets; {DAMAGED_HINT}"
                ),
            ));
        }
        let text = read_optional(&path)?
            .ok_or_else(|| Error::checkpoint(&path, "disappeared while it was being read"))?;
        Ok(Some((n, parse_commit(&path, &text)?)))
    }

    /// The commit of batch `n`, or `None` when `commits/<n>` does not exist.
    pub fn commit(&self, n: u64) -> Result<Option<CommitEntry>> {
        let path = self.commits_dir().join(n.to_string());
        match read_optional(&path)? {
            None => Ok(None),
            Some(text) => parse_commit(&path, &text).map(Some),
        }
    }

    /// Writes `commits/<n>`. Refused when batch `n` has no offsets, or when
    /// the file exists with other content.
    pub fn write_commit(&self, n: u64, entry: &CommitEntry) -> Result<()> {
        let path = self.commits_dir().join(n.to_string());
        if !self.offsets_dir().join(n.to_string()).exists() {
            return Err(Error::checkpoint(
                &path,
                format!("cannot commit batch {n}: offsets/{n} does not exist"),
            ));
        }
        let text = format_commit(entry).map_err(|e| Error::checkpoint(&path, e))?;
        match write_once(&path, text.as_bytes())? {
            WriteOnce::Written | WriteOnce::Identical => Ok(()),
            WriteOnce::Differs => Err(Error::checkpoint(
                &path,
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
                if id < threshold {
                    let p = dir.join(id.to_string());
                    match fs::remove_file(&p) {
                        Ok(()) => deleted += 1,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(Error::io(&p, e)),
                    }
                }
            }
        }
        Ok(deleted)
    }

    /// Stores the query's shape in `shape.json` (replacing the previous one).
    pub fn write_shape(&self, shape: &QueryShape) -> Result<()> {
        let path = self.dir.join("shape.json");
        let text = serde_json::to_string_pretty(shape)
            .map_err(|e| Error::checkpoint(&path, e.to_string()))?;
        write_atomic(&path, text.as_bytes())
    }

    /// The shape stored by [`Checkpoint::write_shape`], if any.
    pub fn read_shape(&self) -> Result<Option<QueryShape>> {
        let path = self.dir.join("shape.json");
        match read_optional(&path)? {
            None => Ok(None),
            Some(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
                Error::checkpoint(
                    &path,
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
pub fn import_from(external: &Path, into: &Path) -> Result<bool> {
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

fn read_metadata(path: &Path) -> Result<String> {
    let text = read_optional(path)?
        .ok_or_else(|| Error::checkpoint(path, "disappeared while it was being read"))?;
    let meta: MetadataJson = serde_json::from_str(text.trim()).map_err(|e| {
        Error::checkpoint(
            path,
            format!("is not valid metadata (expected {{\"id\":\"<uuid>\"}}): {e}; {DAMAGED_HINT}"),
        )
    })?;
    if meta.id.trim().is_empty() {
        return Err(Error::checkpoint(
            path,
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
fn batch_ids(dir: &Path) -> Result<Vec<u64>> {
    let mut ids = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ids),
        Err(e) => return Err(Error::io(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        if let Some(id) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u64>().ok())
        {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

fn check_contiguous(dir: &Path, ids: &[u64]) -> Result<()> {
    for w in ids.windows(2) {
        if w[1] != w[0] + 1 {
            let missing = dir.join((w[0] + 1).to_string());
            return Err(Error::checkpoint(
                &missing,
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

/// Reads a file as UTF-8; `None` when it does not exist.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>> {
    match fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| Error::checkpoint(path, format!("is not UTF-8 text; {DAMAGED_HINT}"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Writes `bytes` to a hidden temp file next to `path` (synced when
/// [`fsync_enabled`]); returns the temp file's path.
/// Who may read a file the engine writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Checkpoint files (offsets, commits, state, source logs, the lock):
    /// the owner only (`0600`, directories `0700`); they can hold a source's
    /// options and positions nobody else needs.
    Owner,
    /// Table files (the `_spark_metadata` manifest), read by other
    /// programs: the process's umask decides.
    Shared,
}

impl Access {
    fn file_mode(self) -> u32 {
        match self {
            Access::Owner => 0o600,
            Access::Shared => 0o666,
        }
    }
}

/// Creates `dir` and its missing parents, owner-only (`0700`): checkpoint
/// directories.
pub(crate) fn create_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io(dir, e))
}

/// Writes `bytes` to a new temp file beside `path`, readable as `access`
/// says, synced when fsync is on; returns the temp file's path.
pub(crate) fn write_temp(path: &Path, bytes: &[u8], access: Access) -> Result<PathBuf> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4()));
    let result = (|| {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(access.file_mode())
            .open(&tmp)?;
        f.write_all(bytes)?;
        if fsync_enabled() {
            f.sync_all()?;
        }
        Ok(())
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(Error::io(&tmp, e));
    }
    Ok(tmp)
}

pub(crate) fn sync_dir(dir: &Path) {
    // Best effort: makes the new name durable on POSIX systems.
    if !fsync_enabled() {
        return;
    }
    if let Ok(f) = fs::File::open(dir) {
        let _ = f.sync_all();
    }
}

/// Atomically replaces `path` with `bytes` (temp file, sync when enabled, rename).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = write_temp(path, bytes, Access::Owner)?;
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    if let Some(p) = path.parent() {
        sync_dir(p);
    }
    Ok(())
}

/// The outcome of [`write_once`].
pub(crate) enum WriteOnce {
    /// The file was created.
    Written,
    /// The file already existed with the same content.
    Identical,
    /// The file already existed with other content.
    Differs,
}

/// Atomically creates `path` with `bytes` unless it exists: the content is
/// written to a synced temp file which is then hard-linked to `path` (which
/// fails when `path` exists, so two writers never both win).
pub(crate) fn write_once(path: &Path, bytes: &[u8]) -> Result<WriteOnce> {
    let tmp = write_temp(path, bytes, Access::Owner)?;
    let linked = link_exclusive(&tmp, path, bytes);
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(true) => {
            if let Some(p) = path.parent() {
                sync_dir(p);
            }
            Ok(WriteOnce::Written)
        }
        Ok(false) => {
            if fs::read(path).map_err(|e| Error::io(path, e))? == bytes {
                Ok(WriteOnce::Identical)
            } else {
                Ok(WriteOnce::Differs)
            }
        }
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Hard-links `tmp` to `target`; `Ok(false)` when `target` exists. On file
/// systems without hard links, falls back to an exclusive create.
pub(crate) fn link_exclusive(tmp: &Path, target: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    match fs::hard_link(tmp, target) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(target)
            {
                Ok(mut f) => {
                    f.write_all(bytes)?;
                    if fsync_enabled() {
                        f.sync_all()?;
                    }
                    Ok(true)
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}
