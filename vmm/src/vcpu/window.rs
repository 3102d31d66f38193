//! The measurement window of one vCPU: a phase between its BEGIN and END doorbells, cut into
//! blocks by BLOCK doorbells. At every doorbell the vCPU is stopped in the VMM, outside any timed
//! window, which is when the KVM stats, the thread's clocks and the guest's block record are read.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use irqbench_abi::{BlockRecord, PhaseRecord};

use super::exit::ExitReason;
use crate::kvm::stats::{StatsDelta, StatsSnapshot};

/// Userspace exits by reason.
pub type ExitCounts = BTreeMap<ExitReason, u64>;
/// (rip, reason) → count, for attribution to guest symbols.
pub type ExitRips = BTreeMap<(u64, ExitReason), u64>;

/// One exit reason over a block: the exits the VMM handled, and how long it took over those
/// it timed, from KVM_RUN's return to the next KVM_RUN (monotonic clock; the loop's injection
/// step and the RIP read for attribution included, since the vCPU waits for both).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReasonTally {
    pub count: u64,
    /// Exits with a handling time (the last exit before a stop or a fault has none).
    pub timed: u64,
    pub ns_sum: u64,
    /// Meaningful only when `timed` > 0.
    pub ns_min: u64,
    pub ns_max: u64,
}

impl ReasonTally {
    fn time(&mut self, ns: u64) {
        self.ns_min = if self.timed == 0 {
            ns
        } else {
            self.ns_min.min(ns)
        };
        self.ns_max = self.ns_max.max(ns);
        self.ns_sum = self.ns_sum.saturating_add(ns);
        self.timed += 1;
    }

    /// Adds `other`'s exits and times to these.
    pub fn merge(&mut self, other: &ReasonTally) {
        if other.timed > 0 {
            self.ns_min = if self.timed == 0 {
                other.ns_min
            } else {
                self.ns_min.min(other.ns_min)
            };
            self.ns_max = self.ns_max.max(other.ns_max);
        }
        self.count += other.count;
        self.timed += other.timed;
        self.ns_sum = self.ns_sum.saturating_add(other.ns_sum);
    }
}

/// Per-reason tallies indexed by [`ExitReason::index`]: a fixed array, so counting and timing
/// an exit never allocates on the exit path.
pub type ReasonTallies = [ReasonTally; ExitReason::COUNT];

/// The vCPU thread's clocks at one instant: wall time, its own CPU time and its involuntary
/// context switches. Between two readings, wall − CPU is the time the thread was not running
/// (preempted by another task, stopped by SIGSTOP, or waiting), which the guest's TSC counts
/// as if the guest had been working.
#[derive(Clone, Copy, Debug)]
pub struct ThreadTimes {
    pub wall: Instant,
    pub cpu_ns: u64,
    pub involuntary_switches: u64,
}

impl ThreadTimes {
    /// Reads the calling thread's clocks (clock_gettime(CLOCK_THREAD_CPUTIME_ID) and
    /// getrusage(RUSAGE_THREAD)); `None` where the kernel refuses either.
    pub fn now() -> Option<ThreadTimes> {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec into the struct we own.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
            return None;
        }
        // SAFETY: an all-zero rusage is a valid value; getrusage overwrites it.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage writes one rusage into the struct we own.
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0 {
            return None;
        }
        Some(ThreadTimes {
            wall: Instant::now(),
            cpu_ns: ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64,
            involuntary_switches: usage.ru_nivcsw as u64,
        })
    }

    /// (off-CPU ns, involuntary switches) from `earlier` to `self`.
    pub fn since(&self, earlier: &ThreadTimes) -> (u64, u64) {
        let wall = self.wall.saturating_duration_since(earlier.wall).as_nanos() as u64;
        let cpu = self.cpu_ns.saturating_sub(earlier.cpu_ns);
        (
            wall.saturating_sub(cpu),
            self.involuntary_switches
                .saturating_sub(earlier.involuntary_switches),
        )
    }
}

/// One block as the VMM saw it: the guest's record (unvalidated) and what the host measured
/// from this block's BLOCK doorbell to the next doorbell.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BlockSample {
    /// The variant index the BLOCK doorbell announced.
    pub announced: u32,
    /// The guest's record of the block, read at the next doorbell; validate before use.
    pub record: BlockRecord,
    /// KVM stat deltas of this vCPU over the block; `None` without binary stats.
    pub stats: Option<StatsDelta>,
    /// Userspace exits the VMM handled, doorbells and commands excluded.
    pub userspace_exits: u64,
    /// Hypercalls the VMM acknowledged.
    pub hypercalls_seen: u64,
    /// `userspace_exits` by reason, with the VMM's handling time.
    pub reasons: ReasonTallies,
    /// Time the vCPU thread was not on a CPU.
    pub off_cpu_ns: u64,
    pub involuntary_switches: u64,
    pub wall_ns: u64,
    /// Cycles each interrupt taken in this block's timed window waited since its raise (those
    /// whose raise was timed).
    pub latencies: Vec<u64>,
    /// The guest RIP each of `latencies` was taken at (same order).
    pub latency_rips: Vec<u64>,
    /// Where each interrupt taken in the block's timed window was taken: the guest's RIP.
    pub interrupt_rips: Vec<u64>,
}

/// Sums per variant index over a phase: userspace exits and their RIPs (the KVM stats are
/// kept per block, in [`BlockSample::stats`]).
#[derive(Clone, Debug, Default)]
pub struct VariantTotals {
    pub exits: ExitCounts,
    pub exit_rips: ExitRips,
}

/// Everything one vCPU measured in one phase (BEGIN to END doorbell).
#[derive(Clone, Debug, Default)]
pub struct PhaseSample {
    pub index: u32,
    pub record: PhaseRecord,
    /// KVM stat deltas of this vCPU over the whole phase; `None` without binary stats.
    pub stats: Option<StatsDelta>,
    /// Userspace exits by reason over the whole phase, doorbell markers excluded.
    pub exits: ExitCounts,
    pub exit_rips: ExitRips,
    /// One entry per block, in the order run.
    pub blocks: Vec<BlockSample>,
    /// Indexed by variant index.
    pub variants: Vec<VariantTotals>,
    /// PING doorbells seen.
    pub pings: u64,
    /// Host time of those PINGs, from KVM_RUN returning to entering it again (the run loop's
    /// own share of a doorbell round trip).
    pub ping_host: Duration,
    /// Of `ping_host`, the part up to the doorbell's handling being done (decode, parse,
    /// count); the rest is the loop's checks before the next KVM_RUN.
    pub ping_handled: Duration,
    /// Hypercalls seen by the VMM (port or vmcall).
    pub hypercalls: u64,
    /// Interrupts injected with KVM_INTERRUPT.
    pub injected: u64,
    pub wall: Duration,
    /// Latency-log entries (`abi::latency`) of interrupts taken outside every block's window.
    pub latencies_outside: Vec<u64>,
    /// Latency-log entries the guest's ring overwrote before the VMM read them.
    pub latencies_lost: u64,
}

/// A block in flight: what was read at its BLOCK doorbell.
#[derive(Debug)]
struct OpenBlock {
    announced: u32,
    stats: Option<StatsSnapshot>,
    times: Option<ThreadTimes>,
    userspace_exits: u64,
    hypercalls_seen: u64,
    reasons: ReasonTallies,
    latencies: Vec<u64>,
    latency_rips: Vec<u64>,
    interrupt_rips: Vec<u64>,
}

/// The open phase of one vCPU.
#[derive(Debug, Default)]
pub struct PhaseWindow {
    pub open: bool,
    pub seq: u32,
    begin: Option<StatsSnapshot>,
    started: Option<Instant>,
    block: Option<OpenBlock>,
    pub sample: PhaseSample,
    /// The guest's latency-log count up to which entries were read.
    pub latency_cursor: u64,
}

impl PhaseWindow {
    pub fn begin(index: u32, seq: u32, stats: Option<StatsSnapshot>) -> PhaseWindow {
        PhaseWindow {
            open: true,
            seq,
            begin: stats,
            started: Some(Instant::now()),
            block: None,
            sample: PhaseSample {
                index,
                ..Default::default()
            },
            latency_cursor: 0,
        }
    }

    /// The variant whose block is running, if any.
    pub fn current_variant(&self) -> Option<u32> {
        self.block.as_ref().map(|b| b.announced)
    }

    /// Counts one userspace exit (and where it happened, if known).
    pub fn count_exit(&mut self, reason: ExitReason, rip: Option<u64>) {
        *self.sample.exits.entry(reason).or_default() += 1;
        if let Some(rip) = rip {
            *self.sample.exit_rips.entry((rip, reason)).or_default() += 1;
        }
        let Some(block) = &mut self.block else { return };
        block.userspace_exits += 1;
        block.reasons[reason.index()].count += 1;
        let v = variant_slot(&mut self.sample.variants, block.announced);
        *v.exits.entry(reason).or_default() += 1;
        if let Some(rip) = rip {
            *v.exit_rips.entry((rip, reason)).or_default() += 1;
        }
    }

    /// The VMM's handling time of the last exit counted with `reason` (charged to the running
    /// block; an exit outside every block is counted in the phase only and not timed).
    pub fn time_exit(&mut self, reason: ExitReason, handling: Duration) {
        if let Some(block) = &mut self.block {
            let ns = u64::try_from(handling.as_nanos()).unwrap_or(u64::MAX);
            block.reasons[reason.index()].time(ns);
        }
    }

    /// Latency-log entries read at a boundary: those tagged with the running block's variant
    /// are its own, the rest were taken outside every block's window.
    pub fn add_latencies(&mut self, entries: &[(u64, u64)], lost: u64) {
        use irqbench_abi::latency;
        self.sample.latencies_lost = self.sample.latencies_lost.saturating_add(lost);
        for &(e, rip) in entries {
            match &mut self.block {
                Some(b) if latency::tag(e) == u64::from(b.announced) + 1 => {
                    if latency::cycles(e) != latency::UNTIMED {
                        b.latencies.push(latency::cycles(e));
                        b.latency_rips.push(rip);
                    }
                    b.interrupt_rips.push(rip);
                }
                _ => self.sample.latencies_outside.push(e),
            }
        }
    }

    pub fn count_hypercall(&mut self) {
        self.sample.hypercalls += 1;
        if let Some(block) = &mut self.block {
            block.hypercalls_seen += 1;
        }
    }

    /// Closes the running block (if any) with the guest's `record` and the readings taken now,
    /// then opens the block `next` announces.
    pub fn block_boundary(
        &mut self,
        record: Option<BlockRecord>,
        stats: Option<StatsSnapshot>,
        next: Option<u32>,
    ) {
        let times = ThreadTimes::now();
        if let (Some(block), Some(record)) = (self.block.take(), record) {
            let delta = match (&block.stats, &stats) {
                (Some(b), Some(e)) => Some(e.delta(b)),
                _ => None,
            };
            let (off_cpu_ns, involuntary_switches, wall_ns) = match (&block.times, &times) {
                (Some(b), Some(e)) => {
                    let (off, invol) = e.since(b);
                    let wall = e.wall.saturating_duration_since(b.wall).as_nanos() as u64;
                    (off, invol, wall)
                }
                _ => (0, 0, 0),
            };
            self.sample.blocks.push(BlockSample {
                announced: block.announced,
                record,
                stats: delta,
                userspace_exits: block.userspace_exits,
                hypercalls_seen: block.hypercalls_seen,
                reasons: block.reasons,
                off_cpu_ns,
                involuntary_switches,
                wall_ns,
                latencies: block.latencies,
                latency_rips: block.latency_rips,
                interrupt_rips: block.interrupt_rips,
            });
        }
        self.block = next.map(|announced| OpenBlock {
            announced,
            stats,
            times,
            userspace_exits: 0,
            hypercalls_seen: 0,
            reasons: ReasonTallies::default(),
            latencies: Vec::new(),
            latency_rips: Vec::new(),
            interrupt_rips: Vec::new(),
        });
    }

    /// Closes the phase: whole-phase stats and wall time.
    pub fn end(&mut self, stats: Option<StatsSnapshot>) -> PhaseSample {
        self.open = false;
        let mut sample = std::mem::take(&mut self.sample);
        sample.stats = match (&self.begin, &stats) {
            (Some(b), Some(e)) => Some(e.delta(b)),
            _ => None,
        };
        sample.wall = self.started.map(|s| s.elapsed()).unwrap_or_default();
        sample
    }
}

/// The totals of variant `index`, growing the table as needed (bounded by the protocol layer,
/// which refuses indices ≥ `abi::MAX_VARIANTS` before they get here).
fn variant_slot(variants: &mut Vec<VariantTotals>, index: u32) -> &mut VariantTotals {
    let i = (index as usize).min(irqbench_abi::MAX_VARIANTS - 1);
    if variants.len() <= i {
        variants.resize_with(i + 1, VariantTotals::default);
    }
    &mut variants[i]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tallies_merge_counts_and_keep_the_extremes_of_timed_exits() {
        let mut a = ReasonTally::default();
        a.merge(&ReasonTally {
            count: 3,
            ..Default::default()
        });
        assert_eq!((a.count, a.timed, a.ns_min), (3, 0, 0));
        let mut b = ReasonTally::default();
        b.time(500);
        b.time(100);
        a.merge(&b);
        let mut c = ReasonTally::default();
        c.time(700);
        a.merge(&c);
        assert_eq!((a.timed, a.ns_min, a.ns_max, a.ns_sum), (3, 100, 700, 1300));
    }

    #[test]
    fn off_cpu_time_is_wall_minus_cpu() {
        let a = ThreadTimes::now().expect("thread clocks");
        // Sleep: the thread is off the CPU for (almost) all of it.
        std::thread::sleep(Duration::from_millis(20));
        let b = ThreadTimes::now().expect("thread clocks");
        let (off, _) = b.since(&a);
        assert!(off >= 15_000_000, "off-CPU {off} ns after a 20 ms sleep");
        // Spin: a spinning thread leaves the CPU only when preempted, which is an involuntary
        // switch; without one its off-CPU time is clock granularity. (On a busy host it may be
        // preempted for most of the 20 ms, so no bound on the time itself holds.) On a nested
        // host the outer hypervisor can also take the CPU for milliseconds, which this kernel
        // counts as neither run time nor a switch (it once took 11 ms of a 20 ms spin here, and
        // in another CI run 4.7-7.1 ms of each of three), so up to ten short spins are timed and
        // the one the thread kept its CPU through is judged: a shorter spin is less likely to
        // hold one of those multi-millisecond gaps.
        let mut never_preempted = Vec::new();
        for _ in 0..10 {
            let c = ThreadTimes::now().unwrap();
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(5) {
                std::hint::spin_loop();
            }
            let d = ThreadTimes::now().unwrap();
            let (off, switches) = d.since(&c);
            let wall = d.wall.saturating_duration_since(c.wall).as_nanos() as u64;
            if switches == 0 {
                never_preempted.push(off);
                if off < 2_000_000 {
                    break;
                }
            } else {
                assert!(
                    off < wall,
                    "off-CPU {off} ns of {wall} ns: the thread never ran"
                );
            }
        }
        if let Some(least) = never_preempted.iter().min() {
            assert!(
                *least < 2_000_000,
                "off-CPU {never_preempted:?} ns while spinning, never preempted"
            );
        }
    }

    #[test]
    fn exits_are_charged_to_the_running_block() {
        let mut w = PhaseWindow::begin(0, 1, None);
        w.count_exit(ExitReason::PioOther, None); // before any block: phase total only
        w.block_boundary(None, None, Some(2));
        w.count_exit(ExitReason::IrqWindowOpen, Some(0x1000));
        w.time_exit(ExitReason::IrqWindowOpen, Duration::from_nanos(900));
        w.count_exit(ExitReason::IrqWindowOpen, None);
        w.time_exit(ExitReason::IrqWindowOpen, Duration::from_nanos(300));
        w.count_exit(ExitReason::Signal, None);
        w.count_hypercall();
        let rec = BlockRecord {
            variant: 2,
            ..Default::default()
        };
        w.block_boundary(Some(rec), None, None);
        w.count_exit(ExitReason::PioOther, None); // after the last block
        let s = w.end(None);
        assert_eq!(s.exits[&ExitReason::PioOther], 2);
        assert_eq!(s.blocks.len(), 1);
        assert_eq!(s.blocks[0].announced, 2);
        assert_eq!(s.blocks[0].userspace_exits, 3);
        assert_eq!(s.blocks[0].hypercalls_seen, 1);
        let window = s.blocks[0].reasons[ExitReason::IrqWindowOpen.index()];
        assert_eq!(
            window,
            ReasonTally {
                count: 2,
                timed: 2,
                ns_sum: 1200,
                ns_min: 300,
                ns_max: 900
            }
        );
        let signal = s.blocks[0].reasons[ExitReason::Signal.index()];
        assert_eq!((signal.count, signal.timed), (1, 0), "counted, not timed");
        let per_reason: u64 = s.blocks[0].reasons.iter().map(|t| t.count).sum();
        assert_eq!(per_reason, s.blocks[0].userspace_exits);
        assert_eq!(s.variants.len(), 3);
        assert_eq!(s.variants[2].exits[&ExitReason::IrqWindowOpen], 2);
        assert_eq!(
            s.variants[2].exit_rips[&(0x1000, ExitReason::IrqWindowOpen)],
            1
        );
    }
}
