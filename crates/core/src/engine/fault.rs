//! Fault injection for the crash-recovery tests: [`fault_point`] kills the
//! process at a named step of the batch protocol when `PIPELINES_FAULT`
//! asks, [`inject_failure`] makes an in-process run fail once at a step.

use crate::error::{Error, Result};

fn injected() -> std::sync::MutexGuard<'static, Vec<(String, String, u64)>> {
    static FAILURES: std::sync::OnceLock<std::sync::Mutex<Vec<(String, String, u64)>>> =
        std::sync::OnceLock::new();
    FAILURES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Makes the run of flow `flow` fail once, with an error, when it reaches
/// `point` (`after_offsets` or `before_commit`) in batch `batch` — a crash
/// for in-process tests: the next run recovers from the checkpoint.
pub fn inject_failure(flow: &str, point: &str, batch: u64) {
    injected().push((flow.to_string(), point.to_string(), batch));
}

/// Fails (once) where [`inject_failure`] asked, and aborts where
/// `PIPELINES_FAULT` asks ([`fault_point`]).
pub(crate) fn checkpoint_step(flow: &str, point: &str, batch: u64) -> Result<()> {
    fault_point(flow, point, batch);
    let mut list = injected();
    if let Some(i) = list
        .iter()
        .position(|(f, p, b)| f == flow && p == point && *b == batch)
    {
        list.remove(i);
        return Err(Error::runtime(format!(
            "flow `{flow}`: injected failure at {point} of batch {batch}"
        )));
    }
    Ok(())
}

/// Aborts the process at a named point when `PIPELINES_FAULT=<point>:<batch>`
/// (optionally `<flow>/<point>:<batch>`) is set: the crash-recovery tests use
/// it to kill a pipeline between two steps of the batch protocol.
pub fn fault_point(flow: &str, point: &str, batch: u64) {
    if let Ok(spec) = std::env::var("PIPELINES_FAULT") {
        let want_a = format!("{point}:{batch}");
        let want_b = format!("{flow}/{point}:{batch}");
        if spec == want_a || spec == want_b {
            // Straight to fd 2: the process dies next, and std's stderr lock
            // may be held by a librdkafka thread that is logging.
            let line = format!("PIPELINES_FAULT: killing the process at {flow}/{point}:{batch}\n");
            // SAFETY: writes a valid buffer of its own length to fd 2.
            unsafe {
                libc::write(2, line.as_ptr().cast(), line.len());
            }
            // SIGKILL: no destructor, flush or cleanup runs, as in a real crash.
            // SAFETY: sends SIGKILL to this process; no memory is touched.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
            std::process::abort();
        }
    }
}
