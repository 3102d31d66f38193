//! SIGINT, SIGTERM and SIGHUP for the commands that measure: noted from the loader on,
//! acted on by flags the run looks at, announced once, and turned into the exit status.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use irqbench::results::RunReport;
use irqbench::session;

use super::error::{warn, Status};

/// Which signal stopped the run (0: none), for the exit status.
#[derive(Clone)]
pub(crate) struct Signals {
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) which: Arc<AtomicUsize>,
}

impl Signals {
    /// The status of the signal that arrived, if one did.
    pub(crate) fn arrived(&self) -> Option<(&'static str, Status)> {
        if !self.stop.load(Ordering::SeqCst) {
            return None;
        }
        Some(match self.which.load(Ordering::SeqCst) as i32 {
            signal_hook::consts::SIGHUP => ("SIGHUP", Status::Hangup),
            signal_hook::consts::SIGTERM => ("SIGTERM", Status::Interrupted),
            _ => ("SIGINT", Status::Interrupted),
        })
    }

    /// 130/129 for a run a signal stopped, 1 when a phase failed or a row has no data (its
    /// figure is missing: the run did not measure what it was asked to), else 0.
    pub(crate) fn status_of(&self, report: &RunReport) -> Status {
        let no_data = report
            .results
            .iter()
            .any(|r| r.no_data.is_some() || !r.cycles_per_op.has_data());
        // A signal after the last round (while the figures were computed, or the results
        // written) still ends the run with its status.
        if report.partial || self.stop.load(Ordering::SeqCst) {
            self.arrived().map_or(Status::Interrupted, |(_, s)| s)
        } else if !report.failures.is_empty() || no_data {
            Status::Failed
        } else {
            Status::Success
        }
    }
}

/// A second signal this soon after the first is the same one delivered twice: timeout(1) and
/// a kill of the process group send it to irqbench and to its group.
const REPEAT_NS: u64 = 300_000_000;

/// When the first stop signal came (CLOCK_MONOTONIC ns; 0: none yet).
static FIRST_SIGNAL_NS: AtomicU64 = AtomicU64::new(0);

/// CLOCK_MONOTONIC in ns (async-signal-safe: clock_gettime is on POSIX's list).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own and nothing else.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

/// Whether the command in `args` (the program name first) boots a guest or creates files a
/// signal must not leave half made: its stop signals are handled from the start (a query keeps
/// the default action, so ^C ends it).
pub(crate) fn measures<A: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = A>) -> bool {
    const MEASURING: [&str; 5] = ["run", "check", "validate", "host", "reference"];
    args.into_iter()
        .skip(1)
        .find(|a| !a.as_ref().as_encoded_bytes().starts_with(b"-"))
        .is_some_and(|a| MEASURING.iter().any(|m| a.as_ref() == *m))
}

/// The first SIGINT, SIGTERM or SIGHUP that came before `main` installed the handlers.
static EARLY_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn note_early_signal(sig: libc::c_int) {
    let _ = EARLY_SIGNAL.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
}

/// Run by the loader before `main` (glibc passes argc and argv to `.init_array` functions):
/// for a measuring command a stop signal is noted from here on, not acted on by the default
/// action (a SIGINT 2 ms after exec had killed a run and left an empty history).
#[cfg_attr(not(target_env = "gnu"), allow(dead_code))]
extern "C" fn catch_early_signals(
    argc: libc::c_int,
    argv: *const *const libc::c_char,
    _envp: *const *const libc::c_char,
) {
    if argv.is_null() || argc < 2 {
        return;
    }
    // SAFETY: glibc passes the process's argc and argv, argc valid NUL-terminated strings
    // that live for the whole process.
    let args = (0..argc as usize).map(|i| unsafe {
        std::ffi::OsStr::from_encoded_bytes_unchecked(
            std::ffi::CStr::from_ptr(*argv.add(i)).to_bytes(),
        )
    });
    if !measures(args) {
        return;
    }
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores an atomic (async-signal-safe); signal_hook, installed
        // later, keeps it as the previous action and chains to it.
        unsafe {
            libc::signal(sig, note_early_signal as *const () as libc::sighandler_t);
        }
    }
}

// glibc only: it passes argc and argv to `.init_array` functions (musl passes nothing).
#[cfg(target_env = "gnu")]
#[used]
#[link_section = ".init_array"]
static CATCH_EARLY_SIGNALS: extern "C" fn(
    libc::c_int,
    *const *const libc::c_char,
    *const *const libc::c_char,
) = catch_early_signals;

/// Set once the measuring has ended and a late signal could no longer mark the run partial.
pub(crate) static RESULTS_WHOLE: AtomicBool = AtomicBool::new(false);

/// The handlers, installed once per process ([`install_signals`]).
static SIGNALS: std::sync::OnceLock<Signals> = std::sync::OnceLock::new();

/// SIGINT, SIGTERM and SIGHUP (a closed terminal or ssh session) stop the run cleanly so the
/// measured part is written; a second one exits at once, unless it is the first delivered
/// twice (within [`REPEAT_NS`]). Installed once: a later call returns the same flags.
pub(crate) fn install_signals() -> Signals {
    SIGNALS.get_or_init(register_signals).clone()
}

fn register_signals() -> Signals {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let stop = Arc::new(AtomicBool::new(false));
    let which = Arc::new(AtomicUsize::new(0));
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        let status = if sig == SIGHUP {
            Status::Hangup
        } else {
            Status::Interrupted
        };
        let code = i32::from(status.code());
        let second = move || {
            // Boot waits (the validation's included) end too.
            session::request_stop();
            let now = monotonic_ns().max(1);
            if let Err(first) =
                FIRST_SIGNAL_NS.compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst)
            {
                if now.saturating_sub(first) >= REPEAT_NS {
                    signal_hook::low_level::exit(code);
                }
            }
        };
        // SAFETY: the action only stores an atomic, reads the clock, compares and swaps an
        // atomic and may call _exit (signal_hook::low_level::exit), all async-signal-safe; it
        // allocates nothing.
        let _ = unsafe { signal_hook::low_level::register(sig, second) };
        let _ = signal_hook::flag::register_usize(sig, which.clone(), sig as usize);
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    // A signal the loader's handler noted before these existed: as if it came now.
    let early = EARLY_SIGNAL.load(Ordering::SeqCst);
    if early != 0 {
        session::request_stop();
        let _ = FIRST_SIGNAL_NS.compare_exchange(
            0,
            monotonic_ns().max(1),
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        which.store(early as usize, Ordering::SeqCst);
        stop.store(true, Ordering::SeqCst);
    }
    Signals { stop, which }
}

/// Says at the first SIGINT, SIGTERM or SIGHUP that the run is stopping (it still writes what
/// it measured, which may take a moment); above the progress bar when one is shown. The
/// listening thread is never joined: it ends with the process.
pub(crate) fn announce_stop(bar: Option<indicatif::ProgressBar>) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let Some(sig) = signals.forever().next() else {
                return;
            };
            // The run's wait for its vCPUs looks at the stop flag now, not at its backstop.
            session::wake_waiters();
            let name = match sig {
                SIGINT => "SIGINT",
                SIGTERM => "SIGTERM",
                _ => "SIGHUP",
            };
            let msg = if RESULTS_WHOLE.load(Ordering::SeqCst) {
                format!(
                    "{name}: stopping; the measuring had ended, so the results are written whole, \
                     not marked partial (a second signal exits at once)"
                )
            } else {
                format!(
                    "{name}: stopping; what was measured so far is written, marked partial (a \
                     second signal exits at once)"
                )
            };
            match &bar {
                Some(b) if !b.is_hidden() && !b.is_finished() => {
                    b.println(format!("irqbench: {msg}"));
                }
                _ => warn(msg),
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A signal that lands after the last round (while the figures are computed, or the
    /// results written) still ends the run with 130, not 0; a row without data is 1.
    #[test]
    fn a_signal_after_the_rounds_still_exits_130_and_no_data_is_1() {
        let signals = Signals {
            stop: Arc::new(AtomicBool::new(false)),
            which: Arc::new(AtomicUsize::new(0)),
        };
        let mut report = RunReport::default();
        assert_eq!(signals.status_of(&report), Status::Success);
        report.results.push(irqbench::results::PhaseResult {
            cycles_per_op: irqbench::results::Summary::no_data(),
            ..Default::default()
        });
        assert_eq!(signals.status_of(&report), Status::Failed);
        signals.stop.store(true, Ordering::SeqCst);
        signals
            .which
            .store(signal_hook::consts::SIGINT as usize, Ordering::SeqCst);
        assert_eq!(signals.status_of(&report), Status::Interrupted);
        signals
            .which
            .store(signal_hook::consts::SIGHUP as usize, Ordering::SeqCst);
        assert_eq!(signals.status_of(&report), Status::Hangup);
    }
}
