//! Files on this machine's file system, written the way a checkpoint needs
//! them: atomically (a hidden temp file moved into place), write-once by a
//! hard link (which fails when the name exists, so two writers never both
//! win), owner-only where they hold a flow's positions, and synced only when
//! the pipeline asks for it (`pipelines.checkpoint.fsync`).
//!
//! Durability: like Spark, files are not fsynced by default. A process
//! crash (even SIGKILL) loses nothing, since written data stays in the
//! operating system's page cache; only a power loss or kernel crash could
//! lose the last batches' checkpoint and output files. With
//! [`configure_fsync`] on, every checkpoint file, source log entry, output
//! file and manifest entry, and their directories, are synced before the
//! next step of the batch protocol.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};

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

/// The outcome of a write-once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOnce {
    /// The file was created.
    Written,
    /// The file already existed with the same content.
    Identical,
    /// The file already existed with other content.
    Differs,
}

/// The bytes of `path`; `None` when it does not exist.
pub(crate) fn read_optional_bytes(path: &Path) -> Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path, e)),
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

/// Makes a new name in `dir` durable (POSIX), when fsync is on; best effort.
pub(crate) fn sync_dir(dir: &Path) {
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

/// Atomically creates `path` with `bytes` unless it exists: the content is
/// written to a synced temp file which is then hard-linked to `path` (which
/// fails when `path` exists, so two writers never both win).
pub(crate) fn write_once(path: &Path, bytes: &[u8]) -> Result<WriteOnce> {
    write_once_as(path, bytes, Access::Owner)
}

/// [`write_once`] of a file with the given access (a table's manifest is
/// readable by others, a checkpoint's files are the owner's).
pub(crate) fn write_once_as(path: &Path, bytes: &[u8], access: Access) -> Result<WriteOnce> {
    let tmp = write_temp(path, bytes, access)?;
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

/// The names of the files directly in `dir` (not directories; hidden temp
/// files included, callers filter); empty when `dir` does not exist.
pub(crate) fn list_files(dir: &Path) -> Result<Vec<String>> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            continue;
        }
        if let Some(name) = entry.file_name().to_str() {
            names.push(name.to_string());
        }
    }
    names.sort_unstable();
    Ok(names)
}

/// Removes `path`; `false` when it did not exist.
pub(crate) fn remove_file(path: &Path) -> Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Removes the directory `dir` and everything in it; nothing when it does
/// not exist.
pub(crate) fn remove_dir_all(dir: &Path) -> Result<()> {
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(dir, e)),
    }
}
