//! The one way a stop travels: a [`Stop`] token that a signal handler (or any thread) sets and
//! every wait, sleep and join of a run watches. Clones share one token.
//!
//! A wait that blocks on something of its own (a channel) registers a waker with
//! [`Stop::on_wake`]; a thread that only sleeps uses [`Stop::sleep`]. A signal handler may only
//! call [`Stop::signal`] (atomics and the clock: async-signal-safe); it wakes nothing, so the
//! process's signal listener thread calls [`Stop::wake`] after it.

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The cause of a stop that code asked for ([`Stop::request`]), not a signal.
const ASKED: i32 = -1;

/// A stop token: unset until a signal or a caller sets it, then set for good.
#[derive(Clone, Default)]
pub struct Stop(Arc<Shared>);

#[derive(Default)]
struct Shared {
    /// 0: not stopped; else the first signal's number, or [`ASKED`].
    cause: AtomicI32,
    /// When the first stop came (CLOCK_MONOTONIC ns; 0: none yet).
    first_ns: AtomicU64,
    wakers: Mutex<Wakers>,
    /// What [`Stop::sleep`] waits on; [`Stop::wake`] notifies it.
    woken: Condvar,
}

/// The callbacks of the waits that block on something of their own, by registration id.
#[derive(Default)]
struct Wakers {
    next: u64,
    calls: Vec<(u64, Box<dyn Fn() + Send>)>,
}

/// A waker registered with [`Stop::on_wake`]; dropping it removes the waker.
pub struct WakerGuard {
    stop: Stop,
    id: u64,
}

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stop")
            .field("set", &self.is_set())
            .field("signal", &self.signal_number())
            .finish()
    }
}

impl std::fmt::Debug for WakerGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WakerGuard").field("id", &self.id).finish()
    }
}

impl Drop for WakerGuard {
    fn drop(&mut self) {
        self.stop.wakers().calls.retain(|(id, _)| *id != self.id);
    }
}

/// CLOCK_MONOTONIC in ns (async-signal-safe: clock_gettime is on POSIX's list).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own and nothing else.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

impl Stop {
    /// A token nothing has set yet.
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Marks the stop as caused by signal `sig` (the first cause stays) and gives how long ago
    /// the first stop came: zero for this one. Async-signal-safe (atomics and the clock); it
    /// wakes nothing, so the signal listener calls [`Stop::wake`] after it.
    pub fn signal(&self, sig: i32) -> Duration {
        self.mark(sig)
    }

    /// Stops every watcher now and wakes them (from a thread, not a signal handler: it locks).
    pub fn request(&self) {
        self.mark(ASKED);
        self.wake();
    }

    fn mark(&self, cause: i32) -> Duration {
        let now = monotonic_ns().max(1);
        let _ = self
            .0
            .cause
            .compare_exchange(0, cause, Ordering::SeqCst, Ordering::SeqCst);
        match self
            .0
            .first_ns
            .compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => Duration::ZERO,
            Err(first) => Duration::from_nanos(now.saturating_sub(first)),
        }
    }

    /// Whether a stop was asked for.
    pub fn is_set(&self) -> bool {
        self.0.cause.load(Ordering::SeqCst) != 0
    }

    /// The signal that set the stop, if a signal did.
    pub fn signal_number(&self) -> Option<i32> {
        Some(self.0.cause.load(Ordering::SeqCst)).filter(|&c| c > 0)
    }

    /// Wakes every registered wait and every [`Stop::sleep`], which then look at the token.
    pub fn wake(&self) {
        let wakers = self.wakers();
        for (_, call) in &wakers.calls {
            call();
        }
        self.0.woken.notify_all();
    }

    /// Registers `call`, run by every [`Stop::wake`] until the guard is dropped: for a wait
    /// that blocks on something of its own (it should make that wait return).
    pub fn on_wake(&self, call: impl Fn() + Send + 'static) -> WakerGuard {
        let mut wakers = self.wakers();
        let id = wakers.next;
        wakers.next += 1;
        wakers.calls.push((id, Box::new(call)));
        WakerGuard {
            stop: self.clone(),
            id,
        }
    }

    /// Sleeps for `duration`, or less when the stop is set and woken; true when it is set.
    pub fn sleep(&self, duration: Duration) -> bool {
        let deadline = Instant::now().checked_add(duration);
        let mut wakers = self.wakers();
        loop {
            if self.is_set() {
                return true;
            }
            let left = deadline.map_or(duration, |d| d.saturating_duration_since(Instant::now()));
            if left.is_zero() {
                return false;
            }
            wakers = match self.0.woken.wait_timeout(wakers, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// The wakers, even after a waker panicked while they were held.
    fn wakers(&self) -> MutexGuard<'_, Wakers> {
        self.0.wakers.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_cause_stays_and_a_request_wakes_sleeps_and_wakers() {
        let stop = Stop::new();
        assert!(!stop.is_set());
        assert!(!stop.sleep(Duration::from_millis(1)));
        assert_eq!(stop.signal(2), Duration::ZERO);
        assert!(stop.signal(15) < Duration::from_secs(5));
        assert_eq!(stop.signal_number(), Some(2));

        let stop = Stop::new();
        let (tx, rx) = std::sync::mpsc::channel();
        let guard = stop.on_wake(move || {
            let _ = tx.send(());
        });
        let sleeper = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                (stop.sleep(Duration::from_secs(60)), started.elapsed())
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        stop.request();
        let (set, slept) = sleeper.join().expect("the sleeper");
        assert!(set && slept < Duration::from_secs(10), "{slept:?}");
        rx.recv_timeout(Duration::from_secs(10)).expect("woken");
        assert_eq!(stop.signal_number(), None, "asked, not signalled");
        drop(guard);
        assert!(stop.wakers().calls.is_empty());
    }
}
