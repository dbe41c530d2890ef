//! The file sink's manifest log, `<table>/_spark_metadata/`, in Spark's
//! format (`FileStreamSinkLog`): which data files of a table directory are
//! committed. Readers list files through it, so a data file written by a
//! batch that crashed before its entry was created is invisible.
//!
//! Each entry `N` is `v1` then one JSON line per added file
//! (Spark's `SinkFileStatus`):
//!
//! ```text
//! v1
//! {"path":"file:///abs/part-00000-<uuid>-c000.snappy.parquet","size":1234,"isDir":false,"modificationTime":1700000000000,"blockReplication":1,"blockSize":33554432,"action":"add","pipelines":{"queryId":"<uuid>","batchId":3}}
//! ```
//!
//! The `pipelines` field is ours (Spark ignores unknown fields): it records
//! which query and batch wrote the file, so a replayed batch is recognised.
//! Every 10th entry (`N % 10 == 9`) is a compaction `N.compact` holding every
//! live file so far; readers start from the latest compaction. Entries are
//! created with an exclusive hard link, so concurrent writers (several flows
//! appending to one table) each get their own entry number. Unlike Spark's
//! file sink, entry numbers are therefore not batch ids; the `pipelines`
//! field carries the batch.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::engine::checkpoint::{check_version, shorten};
use crate::engine::storage::local::{link_exclusive, write_temp, Access};
use crate::error::{Error, Result};

/// The name of the manifest directory inside a table directory.
pub const METADATA_DIR: &str = "_spark_metadata";

/// Spark's default `spark.sql.streaming.fileSink.log.compactInterval`.
pub const COMPACT_INTERVAL: u64 = 10;

const MANIFEST_HINT: &str = "the table's manifest is damaged: restore the file from a backup \
     (readers only see data files listed in `_spark_metadata`)";

/// A data file of a table, as listed by its manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedFile {
    /// Absolute path of the data file.
    pub path: PathBuf,
    /// Size in bytes when it was committed.
    pub size: u64,
    /// Modification time when it was committed (ms since the epoch).
    pub modification_time_ms: i64,
    /// The `(query id, batch id)` that wrote it, when written by this
    /// framework (`None` for files written by Spark).
    pub batch: Option<(String, u64)>,
}

/// Our extra field on each manifest line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PipelinesTag {
    pub query_id: String,
    pub batch_id: u64,
}

fn default_replication() -> i64 {
    1
}

fn default_action() -> String {
    "add".to_string()
}

/// Spark's `SinkFileStatus`, plus our `pipelines` field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SinkFileStatus {
    pub path: String,
    pub size: i64,
    #[serde(default)]
    pub is_dir: bool,
    #[serde(default)]
    pub modification_time: i64,
    #[serde(default = "default_replication")]
    pub block_replication: i64,
    #[serde(default)]
    pub block_size: i64,
    #[serde(default = "default_action")]
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipelines: Option<PipelinesTag>,
}

/// The files listed in a table's manifest (`dir/_spark_metadata`), in log
/// order (the latest compaction, then later entries); `None` when `dir` has
/// no manifest (a plain directory: list its files instead). Files removed by
/// a `"delete"` action are left out. Reads logs written by Spark too
/// (`file:` URIs, percent-encoded). A number missing between the latest
/// compaction and the latest entry is an error naming the missing file.
pub fn committed_files(dir: &Path) -> Result<Option<Vec<CommittedFile>>> {
    let meta = dir.join(METADATA_DIR);
    if !meta.is_dir() {
        return Ok(None);
    }
    let state = read_log(&meta)?;
    let mut out = Vec::with_capacity(state.live.len());
    for (file, s) in state.live {
        out.push(to_committed(dir, &file, s)?);
    }
    Ok(Some(out))
}

fn to_committed(dir: &Path, file: &Path, s: SinkFileStatus) -> Result<CommittedFile> {
    let path = uri_to_path(&s.path, dir).map_err(|m| Error::checkpoint(file, m))?;
    if s.size < 0 {
        return Err(Error::checkpoint(
            file,
            format!("lists `{}` with a negative size; {MANIFEST_HINT}", s.path),
        ));
    }
    Ok(CommittedFile {
        path,
        size: s.size as u64,
        modification_time_ms: s.modification_time,
        batch: s.pipelines.map(|p| (p.query_id, p.batch_id)),
    })
}

/// The manifest's entries: number → is it a compaction.
fn list_log(meta: &Path) -> Result<BTreeMap<u64, bool>> {
    let mut out = BTreeMap::new();
    let entries = match fs::read_dir(meta) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::io(meta, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(meta, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') {
            continue;
        }
        if let Some(id) = name
            .strip_suffix(".compact")
            .and_then(|n| n.parse::<u64>().ok())
        {
            out.insert(id, true);
        } else if let Ok(id) = name.parse::<u64>() {
            out.entry(id).or_insert(false);
        }
    }
    Ok(out)
}

fn entry_path(meta: &Path, id: u64, compact: bool) -> PathBuf {
    if compact {
        meta.join(format!("{id}.compact"))
    } else {
        meta.join(id.to_string())
    }
}

/// What the manifest holds.
pub(crate) struct LogState {
    /// The latest entry number.
    pub latest: Option<u64>,
    /// The latest compaction at or before `latest`.
    pub latest_compact: Option<u64>,
    /// Live files in log order, with the manifest file that listed them.
    pub live: Vec<(PathBuf, SinkFileStatus)>,
}

/// Reads the manifest from its latest compaction on. Retries when a file
/// disappears while reading (a concurrent writer's cleanup).
pub(crate) fn read_log(meta: &Path) -> Result<LogState> {
    let mut last_missing = None;
    for _ in 0..20 {
        match try_read_log(meta)? {
            Ok(state) => return Ok(state),
            Err(missing) => last_missing = Some(missing),
        }
    }
    let missing = last_missing.unwrap_or_else(|| meta.to_path_buf());
    Err(Error::checkpoint(
        missing,
        "kept disappearing while the manifest was read (is something deleting `_spark_metadata` files?)",
    ))
}

/// `Ok(Err(path))` when `path` vanished between listing and reading.
fn try_read_log(meta: &Path) -> Result<std::result::Result<LogState, PathBuf>> {
    let listing = list_log(meta)?;
    let Some((&latest, _)) = listing.iter().next_back() else {
        return Ok(Ok(LogState {
            latest: None,
            latest_compact: None,
            live: Vec::new(),
        }));
    };
    let latest_compact = listing.iter().rev().find(|(_, &c)| c).map(|(&id, _)| id);
    let start = latest_compact.unwrap_or(0);
    let mut live: Vec<(PathBuf, SinkFileStatus)> = Vec::new();
    for id in start..=latest {
        let Some(&compact) = listing.get(&id) else {
            let missing = meta.join(id.to_string());
            let after = if start == 0 && latest_compact.is_none() {
                "the log starts at 0".to_string()
            } else {
                format!("it follows `{start}.compact`")
            };
            return Err(Error::checkpoint(
                missing,
                format!(
                    "is missing from the manifest ({after} and runs to entry {latest}); \
                     {MANIFEST_HINT}"
                ),
            ));
        };
        let path = entry_path(meta, id, compact);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Err(path)),
            Err(e) => return Err(Error::io(&path, e)),
        };
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::checkpoint(&path, format!("is not UTF-8 text; {MANIFEST_HINT}")))?;
        for s in parse_entry(&path, &text)? {
            if s.action == "delete" {
                live.retain(|(_, l)| l.path != s.path);
            } else {
                live.push((path.clone(), s));
            }
        }
    }
    Ok(Ok(LogState {
        latest: Some(latest),
        latest_compact,
        live,
    }))
}

fn parse_entry(path: &Path, text: &str) -> Result<Vec<SinkFileStatus>> {
    let mut lines = text.split('\n');
    let first = lines.next().filter(|l| !l.is_empty());
    check_version(path, first, MANIFEST_HINT)?;
    let mut out = Vec::new();
    for (i, line) in lines.enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let s: SinkFileStatus = serde_json::from_str(line).map_err(|e| {
            Error::checkpoint(
                path,
                format!(
                    "line {} is not a valid file status ({e}): `{}`; {MANIFEST_HINT}",
                    i + 2,
                    shorten(line)
                ),
            )
        })?;
        out.push(s);
    }
    Ok(out)
}

fn format_entry(statuses: &[SinkFileStatus]) -> Result<String> {
    let mut text = String::from("v1");
    for s in statuses {
        text.push('\n');
        text.push_str(&serde_json::to_string(s).map_err(|e| Error::runtime(e.to_string()))?);
    }
    Ok(text)
}

/// Adds `statuses` as the next entry of the manifest at `meta` (created
/// when needed) and returns its number. Entries after `seen` (the latest
/// this writer knows of) are read first: one holding a file of the same
/// (query id, batch id) means another run committed this batch meanwhile,
/// and the entry is refused (Spark's "race while writing batch") so that no
/// batch is listed twice. The entry is created exclusively
/// (temp file + hard link); when another writer took the number, retries
/// with the next one. Every [`COMPACT_INTERVAL`]th entry is a compaction
/// holding all live files; after writing one, entries older than the
/// previous compaction are deleted.
pub(crate) fn append_entry(
    meta: &Path,
    statuses: &[SinkFileStatus],
    seen: Option<u64>,
) -> Result<u64> {
    fs::create_dir_all(meta).map_err(|e| Error::io(meta, e))?;
    let tag = statuses.iter().find_map(|s| s.pipelines.as_ref());
    for _ in 0..10_000 {
        let listing = list_log(meta)?;
        let n = listing.keys().next_back().map_or(0, |l| l + 1);
        if let Some(tag) = tag {
            check_not_committed(meta, &listing, seen, tag)?;
        }
        let compact = n % COMPACT_INTERVAL == COMPACT_INTERVAL - 1;
        let (content, prev_compact) = if compact {
            let state = read_log(meta)?;
            if state.latest.is_some_and(|l| l >= n) {
                continue; // Someone wrote entry n meanwhile.
            }
            let mut all: Vec<SinkFileStatus> = state.live.into_iter().map(|(_, s)| s).collect();
            all.extend_from_slice(statuses);
            (format_entry(&all)?, state.latest_compact)
        } else {
            (format_entry(statuses)?, None)
        };
        let target = entry_path(meta, n, compact);
        if entry_path(meta, n, !compact).exists() {
            continue;
        }
        let tmp = write_temp(&target, content.as_bytes(), Access::Shared)?;
        let linked = link_exclusive(&tmp, &target, content.as_bytes());
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(true) => {
                crate::engine::storage::local::sync_dir(meta);
                // A writer that took its number long ago may have linked
                // it after a newer compaction (and its cleanup) passed that
                // number by: readers start at the compaction, so the entry
                // would be lost. Then take a new number.
                if superseded(meta, n, statuses)? {
                    let _ = fs::remove_file(&target);
                    continue;
                }
                if let Some(p) = prev_compact {
                    cleanup(meta, p);
                }
                return Ok(n);
            }
            Ok(false) => continue,
            Err(e) => return Err(Error::io(&target, e)),
        }
    }
    Err(Error::runtime(format!(
        "could not add an entry to the manifest {}: other writers kept taking every entry number",
        meta.display()
    )))
}

/// Fails when an entry after `seen` already lists a file of `tag`'s batch.
fn check_not_committed(
    meta: &Path,
    listing: &BTreeMap<u64, bool>,
    seen: Option<u64>,
    tag: &PipelinesTag,
) -> Result<()> {
    let after = seen.map_or(0, |s| s + 1);
    for (&id, &compact) in listing.range(after..) {
        let path = entry_path(meta, id, compact);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            // Removed by a cleanup: a later compaction holds its files.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&path, e)),
        };
        let taken = parse_entry(&path, &text)?.iter().any(|s| {
            s.action != "delete"
                && s.pipelines
                    .as_ref()
                    .is_some_and(|p| p.query_id == tag.query_id && p.batch_id == tag.batch_id)
        });
        if taken {
            return Err(Error::runtime_with_help(
                format!(
                    "race while writing batch {} of query {}: manifest entry {} already lists it, written by another run of the same flow",
                    tag.batch_id,
                    tag.query_id,
                    path.display()
                ),
                "run each flow once at a time; this run's files of the batch were not committed",
            ));
        }
    }
    Ok(())
}

/// True when a compaction newer than entry `n` exists that does not list
/// `statuses`' files: entry `n` is then invisible to readers.
fn superseded(meta: &Path, n: u64, statuses: &[SinkFileStatus]) -> Result<bool> {
    for _ in 0..20 {
        let listing = list_log(meta)?;
        let Some(latest_compact) = listing.iter().rev().find(|(_, &c)| c).map(|(&id, _)| id) else {
            return Ok(false);
        };
        if latest_compact <= n {
            return Ok(false);
        }
        let path = entry_path(meta, latest_compact, true);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            // Cleaned up by a newer compaction meanwhile: look again.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&path, e)),
        };
        let listed: HashSet<String> = parse_entry(&path, &text)?
            .into_iter()
            .map(|s| s.path)
            .collect();
        return Ok(!statuses.iter().all(|s| listed.contains(&s.path)));
    }
    Err(Error::checkpoint(
        meta,
        "its compactions kept disappearing while an entry was added (is something deleting `_spark_metadata` files?)",
    ))
}

/// Deletes manifest entries older than compaction `keep_from` (best effort:
/// they are no longer needed by any reader that starts from a compaction).
fn cleanup(meta: &Path, keep_from: u64) {
    let Ok(listing) = list_log(meta) else { return };
    for (&id, &compact) in listing.range(..keep_from) {
        let _ = fs::remove_file(entry_path(meta, id, compact));
    }
}

/// The batch ids `query_id` has committed to the manifest at `meta`.
/// Also returns the latest entry number of the manifest.
pub(crate) fn committed_batches_and_latest(
    meta: &Path,
    query_id: &str,
) -> Result<(HashSet<u64>, Option<u64>)> {
    if !meta.is_dir() {
        return Ok((HashSet::new(), None));
    }
    let state = read_log(meta)?;
    let latest = state.latest;
    let committed = state
        .live
        .into_iter()
        .filter_map(|(_, s)| s.pipelines)
        .filter(|p| p.query_id == query_id)
        .map(|p| p.batch_id)
        .collect();
    Ok((committed, latest))
}

/// Converts a manifest path (`file:///abs`, `file:/abs`, or a plain path)
/// to a local path; relative plain paths are resolved against `dir`.
pub(crate) fn uri_to_path(uri: &str, dir: &Path) -> std::result::Result<PathBuf, String> {
    if let Some(rest) = uri.strip_prefix("file:") {
        let path = if let Some(auth) = rest.strip_prefix("//") {
            if auth.starts_with('/') {
                auth
            } else if let Some(p) = auth.strip_prefix("localhost") {
                p
            } else {
                return Err(format!(
                    "lists `{}`, a file on another host; only local files are supported",
                    shorten(uri)
                ));
            }
        } else {
            rest
        };
        return percent_decode(path).map(PathBuf::from).ok_or_else(|| {
            format!(
                "lists `{}`, whose percent-encoding is not valid UTF-8; {MANIFEST_HINT}",
                shorten(uri)
            )
        });
    }
    if let Some((scheme, _)) = uri.split_once("://") {
        if !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+')
        {
            return Err(format!(
                "lists `{}` on `{scheme}://` storage; this build reads local files only",
                shorten(uri)
            ));
        }
    }
    let p = PathBuf::from(uri);
    Ok(if p.is_absolute() { p } else { dir.join(p) })
}

fn percent_decode(s: &str) -> Option<String> {
    String::from_utf8(crate::engine::uri::percent_decode(s)).ok()
}

/// An absolute local path as a `file://` URI, quoted like Java's
/// `java.net.URI` (and so Hadoop's `Path.toUri`): `%`, spaces and other
/// characters not allowed in a URI path are percent-encoded; non-ASCII
/// letters are kept.
pub(crate) fn path_to_uri(path: &Path) -> String {
    let s = path.to_string_lossy();
    let mut out = String::from("file://");
    if !s.starts_with('/') {
        out.push('/');
    }
    for c in s.chars() {
        let keep = c.is_ascii_alphanumeric()
            || "-_.!~*'();:@&=+$,/".contains(c)
            || (!c.is_ascii() && !c.is_control() && !c.is_whitespace());
        if keep {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_round_trip() {
        let p = Path::new("/tmp/a b/c=2024-01-01 00%3A00/é.parquet");
        let uri = path_to_uri(p);
        assert_eq!(uri, "file:///tmp/a%20b/c=2024-01-01%2000%253A00/é.parquet");
        assert_eq!(uri_to_path(&uri, Path::new("/x")).unwrap(), p);
        assert_eq!(
            uri_to_path("file:/tmp/x%20y", Path::new("/x")).unwrap(),
            Path::new("/tmp/x y")
        );
        assert_eq!(
            uri_to_path("file://localhost/tmp/x", Path::new("/x")).unwrap(),
            Path::new("/tmp/x")
        );
        assert_eq!(
            uri_to_path("part-1.json", Path::new("/x")).unwrap(),
            Path::new("/x/part-1.json")
        );
        assert!(uri_to_path("s3a://bucket/x", Path::new("/x")).is_err());
        assert_eq!(percent_decode("100%"), Some("100%".into()));
        assert_eq!(percent_decode("%4"), Some("%4".into()));
    }
}
