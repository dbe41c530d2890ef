//! The lock of a checkpoint in object storage: a lease object.
//!
//! Object storage has no `flock`, so a run holds `<checkpoint>.lock` as an
//! object it created with a conditional put and renews (a conditional
//! replace of the version it wrote) every [`RENEW_EVERY`]. Another run is
//! refused while the lease is fresh, naming the holder. A lease counts as
//! abandoned when it was not renewed for [`EXPIRES_AFTER`], or at once when
//! its holder is a process of this machine that no longer exists (a run
//! killed by SIGKILL restarts without waiting). Taking an abandoned lease is
//! itself a conditional replace, so of two runs taking it only one wins.
//! The write-once logs stay the last line of defence either way.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::storage::object::{self, ObjectKey, Version};
use crate::error::{Error, Result};

/// How often a held lease is renewed.
pub const RENEW_EVERY: Duration = Duration::from_secs(10);
/// A lease not renewed for this long is abandoned.
pub const EXPIRES_AFTER: Duration = Duration::from_secs(60);

/// What the lease object holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Holder {
    pid: u32,
    host: String,
    since: String,
    renewed_ms: i64,
}

impl Holder {
    fn describe(&self) -> String {
        format!("pid {} on {} since {}", self.pid, self.host, self.since)
    }
}

/// A lease held by this process; released (deleted) on drop.
#[derive(Debug)]
pub(crate) struct Lease {
    key: ObjectKey,
    stop: Arc<AtomicBool>,
    version: Arc<Mutex<Option<Version>>>,
    renewer: Option<std::thread::JoinHandle<()>>,
}

/// Takes the lease `key` for the checkpoint `checkpoint` (shown in the
/// error when another run holds it).
pub(crate) fn acquire(key: ObjectKey, checkpoint: &str, host: &str) -> Result<Lease> {
    let now = chrono::Utc::now();
    let me = Holder {
        pid: std::process::id(),
        host: host.to_string(),
        since: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        renewed_ms: now.timestamp_millis(),
    };
    let bytes = serde_json::to_vec(&me).map_err(|e| Error::runtime(e.to_string()))?;
    let in_use = |holder: Option<Holder>| {
        Error::runtime_with_help(
            format!(
                "the checkpoint {checkpoint} is in use by another run ({})",
                holder.map_or_else(|| "holder unknown".to_string(), |h| h.describe())
            ),
            format!(
                "wait for that run to finish or stop it; two runs of one flow would write the \
                 same batches twice (a lease nobody renews expires after {} s)",
                EXPIRES_AFTER.as_secs()
            ),
        )
    };
    let won = match object::read_versioned(&key)? {
        None => object::write_if(&key, &bytes, None)?,
        Some((held, version)) => {
            let holder: Option<Holder> = serde_json::from_slice(&held).ok();
            if !holder.as_ref().is_none_or(|h| abandoned(h, host)) {
                return Err(in_use(holder));
            }
            object::write_if(&key, &bytes, Some(&version))?
        }
    };
    let Some(version) = won else {
        let holder =
            object::read_versioned(&key)?.and_then(|(b, _)| serde_json::from_slice(&b).ok());
        return Err(in_use(holder));
    };
    let stop = Arc::new(AtomicBool::new(false));
    let version = Arc::new(Mutex::new(Some(version)));
    let renewer = {
        let (key, stop, version, mut me) = (key.clone(), stop.clone(), version.clone(), me);
        std::thread::Builder::new()
            .name("pipelines-lease".into())
            .spawn(move || renew(&key, &stop, &version, &mut me))
            .ok()
    };
    Ok(Lease {
        key,
        stop,
        version,
        renewer,
    })
}

/// Renews the lease every [`RENEW_EVERY`] until `stop`.
fn renew(key: &ObjectKey, stop: &AtomicBool, version: &Mutex<Option<Version>>, me: &mut Holder) {
    let step = Duration::from_millis(100);
    let mut waited = Duration::ZERO;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(step);
        waited += step;
        if waited < RENEW_EVERY {
            continue;
        }
        waited = Duration::ZERO;
        me.renewed_ms = chrono::Utc::now().timestamp_millis();
        let Ok(bytes) = serde_json::to_vec(me) else {
            continue;
        };
        let mut current = version.lock().unwrap_or_else(|p| p.into_inner());
        let Some(expected) = current.clone() else {
            return;
        };
        match object::write_if(key, &bytes, Some(&expected)) {
            Ok(Some(next)) => *current = Some(next),
            Ok(None) => {
                tracing::warn!(
                    "the lease {} was taken by another run; this run's next batch fails at its \
                     write-once offsets if that run writes the same batch",
                    key.url()
                );
                *current = None;
                return;
            }
            // A failed renewal is tried again at the next step.
            Err(e) => tracing::warn!("renewing the lease {}: {e}", key.url()),
        }
    }
}

/// Whether a lease's holder is gone: not renewed for [`EXPIRES_AFTER`], or
/// a process of this host that no longer exists.
fn abandoned(holder: &Holder, host: &str) -> bool {
    let age = chrono::Utc::now().timestamp_millis() - holder.renewed_ms;
    if age > EXPIRES_AFTER.as_millis() as i64 {
        return true;
    }
    holder.host == host && holder.pid != std::process::id() && !process_exists(holder.pid)
}

fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.renewer.take() {
            let _ = t.join();
        }
        // Released only while still ours.
        if self
            .version
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
        {
            let _ = object::remove(&self.key);
        }
    }
}
