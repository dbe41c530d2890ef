//! Freeing a finished micro-batch's memory off the thread that finished
//! with it.
//!
//! Dropping the rows of a large batch returns every buffer to the
//! allocator, and large buffers to the kernel (`munmap`, a page at a time):
//! a few milliseconds per hundred megabytes, spent by the query loop after
//! the sink wrote the rows and before the batch commits. [`release_later`]
//! hands such a value to one background thread that drops it while the
//! loop goes on (committing, logging the batch's progress), on a core that
//! is often idle at that moment. [`settle`] waits until everything handed
//! over is freed: the query loop calls it before reading the next batch, so
//! no more than one batch's rows are held at a time.

use std::sync::mpsc::{channel, Sender};
use std::sync::{Condvar, Mutex, OnceLock};

/// A value waiting to be dropped.
type Garbage = Box<dyn Send>;

/// The channel to the releasing thread; `None` when it could not start
/// (values are then dropped where they are released).
static RELEASER: OnceLock<Option<Sender<Garbage>>> = OnceLock::new();

/// Values handed over and not dropped yet, and the signal that the count
/// reached zero.
static PENDING: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());

/// Adds `delta` to the pending count; wakes [`settle`] at zero.
fn count(delta: isize) {
    let (lock, zero) = &PENDING;
    let mut pending = lock.lock().unwrap_or_else(|e| e.into_inner());
    *pending = pending.saturating_add_signed(delta);
    if *pending == 0 {
        zero.notify_all();
    }
}

/// Waits until every value handed to [`release_later`] so far is dropped.
pub fn settle() {
    let (lock, zero) = &PENDING;
    let pending = lock.lock().unwrap_or_else(|e| e.into_inner());
    let _idle = zero
        .wait_while(pending, |p| *p > 0)
        .unwrap_or_else(|e| e.into_inner());
}

/// Drops `value` on the releasing thread (started on first use), or here
/// when that thread is not available. Only [`settle`] waits for the drop:
/// use it for memory, never for a value whose drop has an effect others
/// wait for (a file to close, a lock to release).
pub fn release_later<T: Send + 'static>(value: T) {
    let sender = RELEASER.get_or_init(|| {
        let (tx, rx) = channel::<Garbage>();
        std::thread::Builder::new()
            .name("pipelines-release".into())
            .spawn(move || {
                for garbage in rx {
                    // A drop that panicked still counts as done, so
                    // `settle` never waits for it.
                    let _ =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(garbage)));
                    count(-1);
                }
            })
            .ok()
            .map(|_| tx)
    });
    let Some(sender) = sender else {
        return drop(value);
    };
    count(1);
    if sender.send(Box::new(value)).is_err() {
        // The thread is gone: the value came back in the error and was
        // dropped with it, here.
        count(-1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Counts its drops and remembers the thread that dropped it.
    struct Tracked(Arc<AtomicUsize>, Arc<Mutex<Option<String>>>);

    impl Drop for Tracked {
        fn drop(&mut self) {
            *self.1.lock().unwrap() = std::thread::current().name().map(str::to_string);
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_released_value_is_dropped_once_on_the_releasing_thread() {
        let drops = Arc::new(AtomicUsize::new(0));
        let thread = Arc::new(Mutex::new(None));
        release_later(Tracked(drops.clone(), thread.clone()));
        settle();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert_eq!(thread.lock().unwrap().as_deref(), Some("pipelines-release"));
    }
}
