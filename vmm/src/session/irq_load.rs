//! The interrupt load of a phase: a host thread that raises interrupts (`inject`), virtual-IF
//! events (`pv-event`) or MSIs through irqfd (`msi`) at a rate while the phase runs.
//! `lapic-timer` needs no thread: the guest programs its own in-kernel LAPIC.
//!
//! The thread never sleeps longer than [`SLICE`] before looking at its [`Stop`], and `stop`
//! wakes it, so stopping a phase (a signal, the end of a dispatch) never waits for a period,
//! however slow the rate. A schedule carries over from one dispatch to the next ([`Resume`]):
//! a load slower than one dispatch still raises its events at its rate across the rounds.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::plan::{HostRaise, IrqSource};
use crate::machine::Mailbox;
use crate::vcpu::{Stop, VcpuControl};

/// The longest the load thread waits before looking at its stop again.
const SLICE: Duration = Duration::from_millis(20);
/// Ticks the thread may fall behind (host busy) before it skips them rather than burst.
const MAX_BEHIND: u32 = 4;

/// Where a load's schedule stood when a dispatch ended: the next dispatch of the same load
/// continues it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Resume {
    pub irq: IrqSource,
    pub next: Instant,
}

/// Why a load did not run to its stop.
#[derive(Debug, thiserror::Error)]
pub enum IrqLoadError {
    #[error("irqbench bug: the interrupt-load thread panicked: {0}")]
    Panicked(String),
}

/// A host thread that raises interrupts (`inject`, `msi`) or virtual-IF events (`pv-event`) at a
/// rate.
#[derive(Debug)]
pub struct IrqLoad {
    irq: IrqSource,
    /// Ends the thread (a dispatch's own: the run's stop ends the dispatch, which sets it).
    stop: Stop,
    thread: Option<JoinHandle<Option<Instant>>>,
}

/// The time between two events at `rate` per second; `None` for a rate no Duration holds
/// (0, negative, NaN, 1e-300: the config refuses these, so nothing is raised).
pub fn period_of(rate: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(1.0 / rate)
        .ok()
        .filter(|p| !p.is_zero())
}

/// The tick after `tick`, as seen at `now`: one period on, or one period from `now` when the
/// thread fell more than [`MAX_BEHIND`] periods behind. `None`: beyond what an Instant holds.
fn next_tick(tick: Instant, period: Duration, now: Instant) -> Option<Instant> {
    let next = tick.checked_add(period)?;
    let behind = period
        .checked_mul(MAX_BEHIND)
        .and_then(|late| next.checked_add(late));
    match behind {
        Some(limit) if now > limit => now.checked_add(period),
        _ => Some(next),
    }
}

/// How long to wait at `now` for `tick`: at most [`SLICE`], zero when it is due.
fn wait_for(tick: Option<Instant>, now: Instant) -> Duration {
    tick.map_or(SLICE, |t| t.saturating_duration_since(now).min(SLICE))
}

impl IrqLoad {
    /// Starts the load of `irq`; `resume` continues the schedule a previous dispatch of the
    /// same load left (else the first event comes one period from now).
    pub fn start(
        irq: IrqSource,
        controls: &[Arc<VcpuControl>],
        mailbox: &Mailbox,
        resume: Option<Resume>,
    ) -> IrqLoad {
        let stop = Stop::new();
        let Some((raise, rate)) = irq.host_raised() else {
            return IrqLoad {
                irq,
                stop,
                thread: None,
            };
        };
        let period = period_of(rate);
        let first = match resume {
            Some(r) if r.irq == irq => Some(r.next),
            _ => period.and_then(|p| Instant::now().checked_add(p)),
        };
        let controls = controls.to_vec();
        let mailbox = mailbox.clone();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("irq-source".into())
            .spawn(move || {
                let mut tick = first;
                while !flag.is_set() {
                    let now = Instant::now();
                    let wait = wait_for(tick, now);
                    if !wait.is_zero() {
                        flag.sleep(wait);
                        continue;
                    }
                    raise_all(raise, &controls, &mailbox);
                    tick = match (tick, period) {
                        (Some(t), Some(p)) => next_tick(t, p, Instant::now()),
                        _ => None,
                    };
                }
                tick
            })
            .ok();
        IrqLoad { irq, stop, thread }
    }

    /// Stops the thread (it wakes at once) and returns where its schedule stood; an error when
    /// the thread panicked, so a load that silently stopped cannot pass for one that ran.
    pub fn stop(mut self) -> Result<Option<Resume>, IrqLoadError> {
        self.stop.request();
        let Some(t) = self.thread.take() else {
            return Ok(None);
        };
        match t.join() {
            Ok(next) => Ok(next.map(|next| Resume {
                irq: self.irq,
                next,
            })),
            Err(panic) => Err(IrqLoadError::Panicked(panic_text(panic.as_ref()))),
        }
    }
}

/// One event on every vCPU.
fn raise_all(raise: HostRaise, controls: &[Arc<VcpuControl>], mailbox: &Mailbox) {
    for (i, c) in controls.iter().enumerate() {
        if let (true, Some(now)) = (raise.is_interrupt(), c.guest_tsc_now()) {
            let _ = mailbox.mark_raise(i as u32, now);
        }
        match raise {
            HostRaise::Interrupt => {
                c.irqs_raised.fetch_add(1, Ordering::Relaxed);
                // A raise that merges with a pending one needs no kick: the vCPU loop has the
                // pending one in hand (injecting it at its next exit, or waiting for the window
                // it asked for). Kicking anyway cut that wait short: the kick's EINTR exit came
                // before the window opened (PVM opens it at an emulation batch's end), and the
                // interrupt was injected there, so a loaded host saw no window exit at all.
                if !c.irq_pending.swap(true, Ordering::SeqCst) {
                    c.kick();
                }
            }
            HostRaise::VifEvent => {
                let _ = mailbox.set_vif_pending(i as u32, 1);
                c.irqs_raised.fetch_add(1, Ordering::Relaxed);
            }
            // No kick: KVM sets the bit in the vCPU's IRR and kicks the vCPU itself.
            HostRaise::Msi => {
                if c.raise_msi() {
                    c.irqs_raised.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use vm_memory::{GuestAddress, GuestMemoryMmap};

    fn mailbox() -> Mailbox {
        let memory = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), 16 << 20)])
            .expect("guest memory");
        Mailbox::new(memory)
    }

    /// Stops `load` on another thread: Some(result) if stop() returned, None if it was still
    /// waiting after `bound` (which no working stop comes near; a whole period did).
    fn stop_returns(
        load: IrqLoad,
        bound: Duration,
    ) -> Option<Result<Option<Resume>, IrqLoadError>> {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(load.stop());
        });
        rx.recv_timeout(bound).ok()
    }

    /// A load of one event per 100 s (or per 1e300 s, or none at all) stops when told, and
    /// neither its start nor its thread panics on a period no Duration or Instant holds.
    #[test]
    fn a_slow_or_impossible_rate_stops_at_once_and_never_panics() {
        let mailbox = mailbox();
        let controls = vec![Arc::new(VcpuControl::default())];
        for rate_hz in [
            0.01,
            1e-19,
            1e-300,
            1e-320,
            0.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
        ] {
            for irq in [
                IrqSource::Inject { rate_hz },
                IrqSource::PvEvent { rate_hz },
                IrqSource::Msi { rate_hz },
            ] {
                let load = IrqLoad::start(irq, &controls, &mailbox, None);
                let stopped = stop_returns(load, Duration::from_secs(20))
                    .unwrap_or_else(|| panic!("{irq:?}: stop() still waiting"));
                stopped.unwrap_or_else(|e| panic!("{irq:?}: {e}"));
            }
        }
        assert_eq!(controls[0].irqs_raised.load(Ordering::SeqCst), 0);
    }

    /// A schedule resumed from the previous dispatch raises its event when due, even when the
    /// dispatch is much shorter than the period (a restarted schedule never would).
    #[test]
    fn a_resumed_schedule_raises_what_is_due() {
        let mailbox = mailbox();
        let controls = vec![Arc::new(VcpuControl::default())];
        let irq = IrqSource::Inject { rate_hz: 0.5 };
        let due = Resume {
            irq,
            next: Instant::now(),
        };
        let load = IrqLoad::start(irq, &controls, &mailbox, Some(due));
        while controls[0].irqs_raised.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        let resume = load.stop().expect("no panic").expect("a schedule");
        // The next event is one period after the one raised, not one period after the stop.
        assert_eq!(resume.next, due.next + Duration::from_secs(2));
        assert_eq!(controls[0].irqs_raised.load(Ordering::SeqCst), 1);
        // Another load does not inherit it.
        let other = IrqSource::Inject { rate_hz: 1.0 };
        let other = IrqLoad::start(other, &controls, &mailbox, Some(resume));
        let next = other.stop().expect("no panic").expect("a schedule").next;
        assert_ne!(next, resume.next);
    }

    #[test]
    fn the_schedule_skips_ticks_it_fell_far_behind_on() {
        let t0 = Instant::now();
        let p = Duration::from_millis(10);
        assert_eq!(next_tick(t0, p, t0), Some(t0 + p));
        // Four periods late is still caught up; five are skipped.
        assert_eq!(next_tick(t0, p, t0 + p * 5), Some(t0 + p));
        assert_eq!(next_tick(t0, p, t0 + p * 6), Some(t0 + p * 7));
        assert_eq!(next_tick(t0, Duration::MAX, t0), None);
        assert_eq!(wait_for(None, t0), SLICE);
        assert_eq!(wait_for(Some(t0 + Duration::from_secs(100)), t0), SLICE);
        assert_eq!(wait_for(Some(t0), t0 + p), Duration::ZERO);
    }
}
