//! Where the engine keeps its files: a directory on this machine or a
//! prefix in object storage (`s3://bucket/prefix`).
//!
//! A [`Location`] names a file or a directory in either place and offers the
//! operations a checkpoint is made of: read, write once (the offset and
//! commit logs, state files, source logs), replace atomically, list a
//! directory, remove. The checkpoint protocol is the same on both: locally a
//! write-once is a hard link of a temp file ([`local`]), in object storage a
//! conditional put ([`object`]); in both a second writer of the same name
//! loses and is told so.
//!
//! ```
//! use pipelines_core::engine::storage::{Location, WriteOnce};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let offsets = Location::parse("offsets", dir.path()).unwrap();
//! offsets.create_dir().unwrap();
//! let first = offsets.join("0");
//! assert_eq!(first.write_once(b"v1").unwrap(), WriteOnce::Written);
//! assert_eq!(first.write_once(b"v2").unwrap(), WriteOnce::Differs);
//! assert_eq!(offsets.list().unwrap(), vec!["0".to_string()]);
//! assert!(Location::parse("s3://bucket/checkpoints", dir.path()).unwrap().is_object());
//! ```

pub mod local;
pub mod object;

use std::fmt;
use std::path::{Path, PathBuf};

pub use local::WriteOnce;
pub use object::{ListedObject, ObjectKey};

use crate::error::{Error, Result};

/// The URL schemes of object storage this build reads and writes.
pub const OBJECT_SCHEMES: &[&str] = &["s3", "s3a"];

/// A file or directory, on this machine or in object storage.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Location {
    /// A path on this machine's file system.
    Local(PathBuf),
    /// A key in object storage.
    Object(ObjectKey),
}

impl From<PathBuf> for Location {
    fn from(p: PathBuf) -> Self {
        Location::Local(p)
    }
}

impl From<&Path> for Location {
    fn from(p: &Path) -> Self {
        Location::Local(p.to_path_buf())
    }
}

impl From<&PathBuf> for Location {
    fn from(p: &PathBuf) -> Self {
        Location::Local(p.clone())
    }
}

impl From<&Location> for Location {
    fn from(l: &Location) -> Self {
        l.clone()
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", crate::spec::display_path(p)),
            Location::Object(k) => f.write_str(&k.url()),
        }
    }
}

/// The object-storage key of `text` when it is an `s3://bucket/key` URL
/// (`s3a://` as Hadoop writes it, the same store); `None` for anything else.
/// An object URL without a bucket is an error.
pub fn object_key(text: &str) -> std::result::Result<Option<ObjectKey>, String> {
    let Some((scheme, rest)) = text.split_once("://") else {
        return Ok(None);
    };
    if !OBJECT_SCHEMES
        .iter()
        .any(|s| s.eq_ignore_ascii_case(scheme))
    {
        return Ok(None);
    }
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(format!(
            "`{text}` names no bucket; write `s3://<bucket>/<prefix>`"
        ));
    }
    let key = key
        .split('/')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("/");
    Ok(Some(ObjectKey {
        store: format!("s3://{bucket}"),
        key,
    }))
}

impl Location {
    /// The location `text` names: an `s3://bucket/prefix` URL, a `file:` URI
    /// or a path (relative ones resolved against `base`). Another scheme is
    /// an error saying which ones work.
    pub fn parse(text: &str, base: &Path) -> std::result::Result<Location, String> {
        if let Some(key) = object_key(text)? {
            return Ok(Location::Object(key));
        }
        let local = crate::spec::local_storage(text)?;
        let path = Path::new(&local);
        let joined = if path.is_absolute() {
            path.to_path_buf()
        } else {
            base.join(path)
        };
        Ok(Location::Local(
            joined
                .components()
                .filter(|c| !matches!(c, std::path::Component::CurDir))
                .collect(),
        ))
    }

    /// True for a key in object storage.
    pub fn is_object(&self) -> bool {
        matches!(self, Location::Object(_))
    }

    /// The local path, when this is one.
    pub fn as_local(&self) -> Option<&Path> {
        match self {
            Location::Local(p) => Some(p),
            Location::Object(_) => None,
        }
    }

    /// The location `name` inside this directory.
    pub fn join(&self, name: &str) -> Location {
        match self {
            Location::Local(p) => Location::Local(p.join(name)),
            Location::Object(k) => {
                let name = name.trim_matches('/');
                let key = if k.key.is_empty() {
                    name.to_string()
                } else {
                    format!("{}/{name}", k.key)
                };
                Location::Object(ObjectKey {
                    store: k.store.clone(),
                    key,
                })
            }
        }
    }

    /// The last segment of the name (`None` for a root).
    pub fn file_name(&self) -> Option<String> {
        match self {
            Location::Local(p) => p.file_name().map(|n| n.to_string_lossy().into_owned()),
            Location::Object(k) => k
                .key
                .rsplit('/')
                .next()
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        }
    }

    /// The directory this is in (`None` for a root).
    pub fn parent(&self) -> Option<Location> {
        match self {
            Location::Local(p) => p.parent().map(|p| Location::Local(p.to_path_buf())),
            Location::Object(k) if k.key.is_empty() => None,
            Location::Object(k) => Some(Location::Object(ObjectKey {
                store: k.store.clone(),
                key: k
                    .key
                    .rsplit_once('/')
                    .map(|(p, _)| p.to_string())
                    .unwrap_or_default(),
            })),
        }
    }

    /// The segments of this location under `base`, joined by `/`
    /// (`None` when it is not under it, or is `base` itself).
    pub fn relative_to(&self, base: &Location) -> Option<String> {
        match (self, base) {
            (Location::Local(p), Location::Local(b)) => {
                let rel = p.strip_prefix(b).ok()?;
                let parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                (!parts.is_empty()).then(|| parts.join("/"))
            }
            (Location::Object(k), Location::Object(b)) if k.store == b.store => {
                if b.key.is_empty() {
                    return (!k.key.is_empty()).then(|| k.key.clone());
                }
                k.key
                    .strip_prefix(&b.key)
                    .and_then(|r| r.strip_prefix('/'))
                    .filter(|r| !r.is_empty())
                    .map(str::to_string)
            }
            _ => None,
        }
    }

    /// The location as text a connector parses back with [`Location::parse`]:
    /// the path as it is (not shortened), or the URL.
    pub fn as_text(&self) -> String {
        match self {
            Location::Local(p) => p.to_string_lossy().into_owned(),
            Location::Object(k) => k.url(),
        }
    }

    /// The local path, or an error saying that `what` works on the local
    /// file system only for now and what to do instead.
    pub fn require_local(&self, what: &str, instead: &str) -> Result<&Path> {
        match self {
            Location::Local(p) => Ok(p),
            Location::Object(k) => Err(Error::runtime_with_help(
                format!(
                    "{what} at {} is not supported in object storage yet",
                    k.url()
                ),
                instead.to_string(),
            )),
        }
    }

    /// The name as a path, for error values that hold a path (an object's
    /// URL as it is written).
    pub fn shown(&self) -> PathBuf {
        match self {
            Location::Local(p) => p.clone(),
            Location::Object(k) => PathBuf::from(k.url()),
        }
    }

    /// Makes this directory exist (locally owner-only; object storage has
    /// no directories, so nothing there).
    pub fn create_dir(&self) -> Result<()> {
        match self {
            Location::Local(p) => local::create_private_dir(p),
            Location::Object(_) => Ok(()),
        }
    }

    /// The file's bytes; `None` when it does not exist.
    pub fn read(&self) -> Result<Option<Vec<u8>>> {
        match self {
            Location::Local(p) => local::read_optional_bytes(p),
            Location::Object(k) => object::read(k),
        }
    }

    /// The file as UTF-8 text; `None` when it does not exist. Other bytes
    /// are an error naming the file and ending with `hint`.
    pub fn read_text(&self, hint: &str) -> Result<Option<String>> {
        match self.read()? {
            None => Ok(None),
            Some(bytes) => String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| Error::checkpoint(self.shown(), format!("is not UTF-8 text; {hint}"))),
        }
    }

    /// Creates the file with `bytes` unless it exists; whoever comes second
    /// learns whether the first wrote the same bytes.
    pub fn write_once(&self, bytes: &[u8]) -> Result<WriteOnce> {
        match self {
            Location::Local(p) => local::write_once(p, bytes),
            Location::Object(k) => object::write_once(k, bytes),
        }
    }

    /// [`Location::write_once`] of a file others may read too (a table's
    /// manifest entry; a checkpoint's files are owner-only).
    pub fn write_once_readable(&self, bytes: &[u8]) -> Result<WriteOnce> {
        match self {
            Location::Local(p) => local::write_once_as(p, bytes, local::Access::Shared),
            Location::Object(k) => object::write_once(k, bytes),
        }
    }

    /// Replaces the file with `bytes` atomically: a reader sees the old
    /// bytes or the new ones, never a part.
    pub fn replace(&self, bytes: &[u8]) -> Result<()> {
        match self {
            Location::Local(p) => local::write_atomic(p, bytes),
            Location::Object(k) => object::replace(k, bytes),
        }
    }

    /// Whether the file exists.
    pub fn exists(&self) -> Result<bool> {
        match self {
            Location::Local(p) => Ok(p.exists()),
            Location::Object(k) => object::exists(k),
        }
    }

    /// Removes the file; `false` when it did not exist.
    pub fn remove(&self) -> Result<bool> {
        match self {
            Location::Local(p) => local::remove_file(p),
            Location::Object(k) => object::remove(k),
        }
    }

    /// The names of the files directly in this directory, sorted; empty
    /// when it does not exist.
    pub fn list(&self) -> Result<Vec<String>> {
        match self {
            Location::Local(p) => local::list_files(p),
            Location::Object(k) => object::list(k),
        }
    }

    /// The names of the files directly in this directory that sort after
    /// `after` (all when `None`), sorted: a log of fixed-width names read
    /// from where the last read ended (in object storage, one listing from
    /// that key on, not of the whole directory).
    pub fn list_after(&self, after: Option<&str>) -> Result<Vec<String>> {
        match self {
            Location::Local(p) => Ok(local::list_files(p)?
                .into_iter()
                .filter(|n| after.is_none_or(|a| n.as_str() > a))
                .collect()),
            Location::Object(k) => object::list_after(k, after),
        }
    }

    /// True when this is a directory: locally one that exists, in object
    /// storage a prefix with at least one object under it.
    pub fn is_dir(&self) -> Result<bool> {
        match self {
            Location::Local(p) => Ok(p.is_dir()),
            Location::Object(k) => Ok(!object::is_empty(k)?),
        }
    }

    /// Copies the local file `from` here (in object storage an upload, in
    /// parts when large; locally a copy); returns its size.
    pub fn upload_from(&self, from: &Path) -> Result<u64> {
        match self {
            Location::Local(p) => std::fs::copy(from, p).map_err(|e| Error::io(p, e)),
            Location::Object(k) => object::upload(k, from),
        }
    }

    /// True when nothing is in this directory (or it does not exist).
    pub fn is_empty_dir(&self) -> Result<bool> {
        match self {
            Location::Local(p) => match std::fs::read_dir(p) {
                Ok(mut entries) => Ok(entries.next().is_none()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
                Err(e) => Err(Error::io(p, e)),
            },
            Location::Object(k) => object::is_empty(k),
        }
    }

    /// True when `name` is in this directory, as a file or a directory.
    pub fn contains(&self, name: &str) -> Result<bool> {
        let inner = self.join(name);
        match &inner {
            Location::Local(p) => Ok(p.exists()),
            Location::Object(_) => Ok(inner.exists()? || !inner.is_empty_dir()?),
        }
    }

    /// Removes this directory and everything in it.
    pub fn remove_all(&self) -> Result<()> {
        match self {
            Location::Local(p) => local::remove_dir_all(p),
            Location::Object(k) => object::remove_all(k),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_paths_and_joins() {
        let base = Path::new("/base");
        let s3 = Location::parse("s3://bkt/a//b/", base).unwrap();
        assert_eq!(s3.to_string(), "s3://bkt/a/b");
        assert_eq!(
            s3.join("offsets").join("0").to_string(),
            "s3://bkt/a/b/offsets/0"
        );
        assert_eq!(s3.file_name().as_deref(), Some("b"));
        assert_eq!(
            s3.join("d=1/x.json").relative_to(&s3).as_deref(),
            Some("d=1/x.json")
        );
        assert_eq!(s3.relative_to(&s3), None);
        assert_eq!(
            Location::parse("s3://bkt/ab/x", base)
                .unwrap()
                .relative_to(&s3.parent().unwrap()),
            None
        );
        assert_eq!(s3.parent().unwrap().to_string(), "s3://bkt/a");
        assert_eq!(
            Location::parse("s3a://bkt", base).unwrap().to_string(),
            "s3://bkt"
        );
        assert_eq!(
            Location::parse("rel/./x", base).unwrap(),
            Location::Local(PathBuf::from("/base/rel/x"))
        );
        assert_eq!(
            Location::parse("file:///data/p", base).unwrap(),
            Location::Local(PathBuf::from("/data/p"))
        );
        assert_eq!(
            Location::parse("s3:///x", base).unwrap_err(),
            "`s3:///x` names no bucket; write `s3://<bucket>/<prefix>`"
        );
    }
}
