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
//! written once (an exclusive hard link locally, a conditional put in object
//! storage), so concurrent writers (several flows appending to one table)
//! each get their own entry number. Unlike Spark's
//! file sink, entry numbers are therefore not batch ids; the `pipelines`
//! field carries the batch.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::engine::checkpoint::{check_version, shorten};
use crate::engine::storage::{Location, WriteOnce};
use crate::error::{Error, Result};

/// The name of the manifest directory inside a table directory.
pub const METADATA_DIR: &str = "_spark_metadata";

/// In object storage, where directories do not exist, the object that
/// marks a manifest before its first entry (readers then know the
/// directory is a sink's table, as they know from `_spark_metadata/`
/// existing locally). Spark's manifest readers skip it: it is not a number.
pub(crate) const MARKER: &str = ".pipelines-manifest";

/// Spark's default `spark.sql.streaming.fileSink.log.compactInterval`.
pub const COMPACT_INTERVAL: u64 = 10;

const MANIFEST_HINT: &str = "the table's manifest is damaged: restore the file from a backup \
     (readers only see data files listed in `_spark_metadata`)";

/// A data file of a table, as listed by its manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedFile {
    /// The data file (an absolute path, or an object).
    pub path: Location,
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
pub fn committed_files(dir: impl Into<Location>) -> Result<Option<Vec<CommittedFile>>> {
    let dir = dir.into();
    let meta = dir.join(METADATA_DIR);
    if !meta.is_dir()? {
        return Ok(None);
    }
    let state = read_log(&meta)?;
    let mut out = Vec::with_capacity(state.live.len());
    for (file, s) in state.live {
        out.push(to_committed(&dir, &file, s)?);
    }
    Ok(Some(out))
}

fn to_committed(dir: &Location, file: &Location, s: SinkFileStatus) -> Result<CommittedFile> {
    let path = uri_to_location(&s.path, dir).map_err(|m| Error::checkpoint(file.shown(), m))?;
    if s.size < 0 {
        return Err(Error::checkpoint(
            file.shown(),
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
fn list_log(meta: &Location) -> Result<BTreeMap<u64, bool>> {
    let mut out = BTreeMap::new();
    for name in meta.list()? {
        let name = name.as_str();
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

fn entry_path(meta: &Location, id: u64, compact: bool) -> Location {
    if compact {
        meta.join(&format!("{id}.compact"))
    } else {
        meta.join(&id.to_string())
    }
}

/// What the manifest holds.
pub(crate) struct LogState {
    /// The latest entry number.
    pub latest: Option<u64>,
    /// The latest compaction at or before `latest`.
    pub latest_compact: Option<u64>,
    /// Live files in log order, with the manifest file that listed them.
    pub live: Vec<(Location, SinkFileStatus)>,
}

/// Reads the manifest from its latest compaction on. Retries when a file
/// disappears while reading (a concurrent writer's cleanup).
pub(crate) fn read_log(meta: &Location) -> Result<LogState> {
    let mut last_missing = None;
    for _ in 0..20 {
        match try_read_log(meta)? {
            Ok(state) => return Ok(state),
            Err(missing) => last_missing = Some(missing),
        }
    }
    let missing = last_missing.unwrap_or_else(|| meta.clone());
    Err(Error::checkpoint(
        missing.shown(),
        "kept disappearing while the manifest was read (is something deleting `_spark_metadata` files?)",
    ))
}

/// `Ok(Err(path))` when `path` vanished between listing and reading.
fn try_read_log(meta: &Location) -> Result<std::result::Result<LogState, Location>> {
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
    let mut live: Vec<(Location, SinkFileStatus)> = Vec::new();
    for id in start..=latest {
        let Some(&compact) = listing.get(&id) else {
            let missing = meta.join(&id.to_string());
            let after = if start == 0 && latest_compact.is_none() {
                "the log starts at 0".to_string()
            } else {
                format!("it follows `{start}.compact`")
            };
            return Err(Error::checkpoint(
                missing.shown(),
                format!(
                    "is missing from the manifest ({after} and runs to entry {latest}); \
                     {MANIFEST_HINT}"
                ),
            ));
        };
        let path = entry_path(meta, id, compact);
        let Some(text) = path.read_text(MANIFEST_HINT)? else {
            return Ok(Err(path));
        };
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

fn parse_entry(path: &Location, text: &str) -> Result<Vec<SinkFileStatus>> {
    let mut lines = text.split('\n');
    let first = lines.next().filter(|l| !l.is_empty());
    check_version(&path.shown(), first, MANIFEST_HINT)?;
    let mut out = Vec::new();
    for (i, line) in lines.enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let s: SinkFileStatus = serde_json::from_str(line).map_err(|e| {
            Error::checkpoint(
                path.shown(),
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
/// batch is listed twice. The entry is written once (temp file + hard link,
/// or a conditional put); when another writer took the number, retries
/// with the next one. Every [`COMPACT_INTERVAL`]th entry is a compaction
/// holding all live files; after writing one, entries older than the
/// previous compaction are deleted.
pub(crate) fn append_entry(
    meta: &Location,
    statuses: &[SinkFileStatus],
    seen: Option<u64>,
) -> Result<u64> {
    create(meta)?;
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
        if entry_path(meta, n, !compact).exists()? {
            continue;
        }
        match target.write_once_readable(content.as_bytes())? {
            WriteOnce::Written => {
                // A writer that took its number long ago may have linked
                // it after a newer compaction (and its cleanup) passed that
                // number by: readers start at the compaction, so the entry
                // would be lost. Then take a new number.
                if superseded(meta, n, statuses)? {
                    let _ = target.remove();
                    continue;
                }
                if let Some(p) = prev_compact {
                    cleanup(meta, p);
                }
                return Ok(n);
            }
            WriteOnce::Identical | WriteOnce::Differs => continue,
        }
    }
    Err(Error::runtime(format!(
        "could not add an entry to the manifest {meta}: other writers kept taking every entry number"
    )))
}

/// Makes the manifest `meta` exist before its first entry: a directory
/// locally, the [`MARKER`] object in object storage.
pub(crate) fn create(meta: &Location) -> Result<()> {
    match meta {
        Location::Local(p) => std::fs::create_dir_all(p).map_err(|e| Error::io(p, e)),
        Location::Object(_) => meta.join(MARKER).write_once_readable(b"").map(|_| ()),
    }
}

/// Fails when an entry after `seen` already lists a file of `tag`'s batch.
fn check_not_committed(
    meta: &Location,
    listing: &BTreeMap<u64, bool>,
    seen: Option<u64>,
    tag: &PipelinesTag,
) -> Result<()> {
    let after = seen.map_or(0, |s| s + 1);
    for (&id, &compact) in listing.range(after..) {
        let path = entry_path(meta, id, compact);
        // Removed by a cleanup: a later compaction holds its files.
        let Some(text) = path.read_text(MANIFEST_HINT)? else {
            continue;
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
                    path
                ),
                "run each flow once at a time; this run's files of the batch were not committed",
            ));
        }
    }
    Ok(())
}

/// True when a compaction newer than entry `n` exists that does not list
/// `statuses`' files: entry `n` is then invisible to readers.
fn superseded(meta: &Location, n: u64, statuses: &[SinkFileStatus]) -> Result<bool> {
    for _ in 0..20 {
        let listing = list_log(meta)?;
        let Some(latest_compact) = listing.iter().rev().find(|(_, &c)| c).map(|(&id, _)| id) else {
            return Ok(false);
        };
        if latest_compact <= n {
            return Ok(false);
        }
        let path = entry_path(meta, latest_compact, true);
        // Cleaned up by a newer compaction meanwhile: look again.
        let Some(text) = path.read_text(MANIFEST_HINT)? else {
            continue;
        };
        let listed: HashSet<String> = parse_entry(&path, &text)?
            .into_iter()
            .map(|s| s.path)
            .collect();
        return Ok(!statuses.iter().all(|s| listed.contains(&s.path)));
    }
    Err(Error::checkpoint(
        meta.shown(),
        "its compactions kept disappearing while an entry was added (is something deleting `_spark_metadata` files?)",
    ))
}

/// Deletes manifest entries older than compaction `keep_from` (best effort:
/// they are no longer needed by any reader that starts from a compaction).
fn cleanup(meta: &Location, keep_from: u64) {
    let Ok(listing) = list_log(meta) else { return };
    for (&id, &compact) in listing.range(..keep_from) {
        let _ = entry_path(meta, id, compact).remove();
    }
}

/// The batch ids `query_id` has committed to the manifest at `meta`.
/// Also returns the latest entry number of the manifest.
pub(crate) fn committed_batches_and_latest(
    meta: &Location,
    query_id: &str,
) -> Result<(HashSet<u64>, Option<u64>)> {
    if !meta.is_dir()? {
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

/// Converts a manifest path (`file:///abs`, `file:/abs`, `s3a://bucket/key`
/// or `s3://…`, or a plain path) to a location; relative plain paths are
/// resolved against `dir`.
pub(crate) fn uri_to_location(uri: &str, dir: &Location) -> std::result::Result<Location, String> {
    if let Some(mut key) = crate::engine::storage::object_key(uri)? {
        key.key = percent_decode(&key.key).ok_or_else(|| {
            format!(
                "lists `{}`, whose percent-encoding is not valid UTF-8; {MANIFEST_HINT}",
                shorten(uri)
            )
        })?;
        return Ok(Location::Object(key));
    }
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
        return percent_decode(path)
            .map(|p| Location::Local(p.into()))
            .ok_or_else(|| {
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
                "lists `{}` on `{scheme}://` storage; this build reads local files and s3:// objects",
                shorten(uri)
            ));
        }
    }
    if Path::new(uri).is_absolute() {
        return Ok(Location::Local(uri.into()));
    }
    Ok(dir.join(uri))
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
    push_quoted(&mut out, &s);
    out
}

/// A data file as the manifest lists it: a `file://` URI, or for an object
/// `s3a://bucket/key` (quoted the same way), the scheme Spark's S3 file
/// system writes and reads.
pub(crate) fn location_to_uri(location: &Location) -> String {
    match location {
        Location::Local(p) => path_to_uri(p),
        Location::Object(k) => {
            let bucket = k.store.split_once("://").map_or(&*k.store, |(_, b)| b);
            let mut out = format!("s3a://{bucket}/");
            push_quoted(&mut out, &k.key);
            out
        }
    }
}

/// Appends `s` to `out` quoted like `java.net.URI`'s path.
fn push_quoted(out: &mut String, s: &str) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_round_trip() {
        let x = Location::Local("/x".into());
        let local = |p: &str| Location::Local(p.into());
        let p = Path::new("/tmp/a b/c=2024-01-01 00%3A00/é.parquet");
        let uri = path_to_uri(p);
        assert_eq!(uri, "file:///tmp/a%20b/c=2024-01-01%2000%253A00/é.parquet");
        assert_eq!(uri_to_location(&uri, &x).unwrap(), Location::from(p));
        assert_eq!(
            uri_to_location("file:/tmp/x%20y", &x).unwrap(),
            local("/tmp/x y")
        );
        assert_eq!(
            uri_to_location("file://localhost/tmp/x", &x).unwrap(),
            local("/tmp/x")
        );
        assert_eq!(
            uri_to_location("part-1.json", &x).unwrap(),
            local("/x/part-1.json")
        );
        assert_eq!(
            uri_to_location("hdfs://nn/x", &x).unwrap_err(),
            "lists `hdfs://nn/x` on `hdfs://` storage; this build reads local files and s3:// objects"
        );
        assert_eq!(percent_decode("100%"), Some("100%".into()));
        assert_eq!(percent_decode("%4"), Some("%4".into()));
    }

    #[test]
    fn object_uris_are_s3a_quoted_like_paths() {
        let dir = Location::parse("s3://bkt/t", Path::new("/")).unwrap();
        let file = dir.join("day=2024-01-01 00%3A00").join("part-0.parquet");
        let uri = location_to_uri(&file);
        assert_eq!(uri, "s3a://bkt/t/day=2024-01-01%2000%253A00/part-0.parquet");
        assert_eq!(uri_to_location(&uri, &dir).unwrap(), file);
        assert_eq!(
            uri_to_location("s3://bkt/t/part-0.parquet", &dir).unwrap(),
            dir.join("part-0.parquet")
        );
        assert_eq!(
            uri_to_location("part-1.json", &dir).unwrap(),
            dir.join("part-1.json")
        );
    }
}
