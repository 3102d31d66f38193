//! The checks' judges: pure functions from an expectation (the host's KVM flavour, and for PVM
//! its emulation batch) and a measurement to a verdict with the expected and measured values
//! in words. No KVM here: tests feed synthetic measurements, so the checks that can pass only
//! on VMX/SVM, and every way a check can fail, are exercised on any host. docs/VALIDATE.md is
//! the same table with the KVM documentation and source each row comes from.

pub use super::observations::*;
use crate::results::host::agrees;
use crate::results::{KvmFlavour, Verdict};

/// One check's outcome in words.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Judged {
    pub verdict: Verdict,
    pub expected: String,
    pub measured: String,
    /// Why a WARN or FAIL, or what a PVM PASS means.
    pub note: String,
}

/// A check's expected and measured values in words, waiting for its verdict.
#[derive(Debug)]
pub(super) struct Words {
    expected: String,
    measured: String,
}

pub(super) fn words(expected: String, measured: impl Into<String>) -> Words {
    Words {
        expected,
        measured: measured.into(),
    }
}

impl Words {
    pub(super) fn with(self, verdict: Verdict, note: &str) -> Judged {
        Judged {
            verdict,
            expected: self.expected,
            measured: if self.measured.is_empty() {
                "nothing".to_owned()
            } else {
                self.measured
            },
            note: note.to_owned(),
        }
    }

    pub(super) fn pass(self) -> Judged {
        self.with(Verdict::Pass, "")
    }

    /// A PASS whose meaning needs saying (what a PVM PASS means).
    pub(super) fn pass_noting(self, note: &str) -> Judged {
        self.with(Verdict::Pass, note)
    }

    pub(super) fn warn(self, note: &str) -> Judged {
        self.with(Verdict::Warn, note)
    }

    pub(super) fn fail(self, note: &str) -> Judged {
        self.with(Verdict::Fail, note)
    }

    /// PASS when `ok`, else `otherwise` with `why`.
    pub(super) fn pass_or(self, ok: bool, otherwise: Verdict, why: &str) -> Judged {
        if ok {
            self.pass()
        } else {
            self.with(otherwise, why)
        }
    }
}

/// What the host's flavour makes of each check.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Expectations {
    pub flavour: KvmFlavour,
    /// PVM emulates guest CPL0 code in batches of this many instructions (`kvm_pvm.pvm_emul_batch`)
    /// and counts one `exits` per batch.
    pub emul_batch: f64,
}

impl Expectations {
    /// `pvm_emul_batch` from the module parameters (1024 where unreadable).
    pub fn new(flavour: KvmFlavour, pvm_emul_batch: Option<&str>) -> Expectations {
        let emul_batch = pvm_emul_batch
            .and_then(|b| b.trim().parse::<f64>().ok())
            .filter(|&b| b >= 1.0)
            .unwrap_or(DEFAULT_EMUL_BATCH);
        Expectations {
            flavour,
            emul_batch,
        }
    }
}

pub const DEFAULT_EMUL_BATCH: f64 = 1024.0;
/// Guest TSC rate against KVM_GET_TSC_KHZ, over CLOCK_MONOTONIC.
pub const TSC_RATE_TOLERANCE: f64 = 0.001;
/// vCPU 1 − vCPU 0 TSC at one instant: the 25th percentile of |difference| allowed.
pub const TSC_SKEW_MAX_US: f64 = 50.0;
/// LAPIC timer ticks delivered against those programmed.
pub const LAPIC_TOLERANCE: f64 = 0.10;
/// Injected interrupts the guest must take of those the host raised (some merge when two are
/// raised before one is injected; a few raised after the phase ended are never taken).
pub const INJECT_MIN_FRACTION: f64 = 0.90;
/// Exits per flag instruction allowed on VMX/SVM (none is expected; host interrupts during a
/// block are netted out with the empty block).
pub const NATIVE_FLAG_EXITS_MAX: f64 = 0.01;
pub const CPUID_EXITS_NATIVE: [f64; 2] = [0.8, 1.2];
pub const CPUID_EXITS_PVM_MAX: f64 = 0.05;
pub const TSC_SKEW_MIN_BLOCKS: usize = 8;
pub const LOAD_PER_CPU_MAX: f64 = 0.5;
pub const STEAL_MAX: f64 = 0.01;
pub const SIBLING_BUSY_MAX: f64 = 0.10;

// ---------------------------------------------------------------------------------------------
// Judges

fn pct(x: f64) -> String {
    format!("{:+.3}%", x * 100.0)
}

/// `flavour`: the declared flavour agrees with what CPL0 `cli` does to `insn_emulation`; on
/// an ambiguous host a disagreement is the behaviour deciding (WARN), elsewhere a FAIL.
pub fn flavour(_: &Expectations, m: &FlavourObs) -> Judged {
    let b = &m.behaviour;
    let e = &Expectations::new(m.declared, None);
    let measured = format!(
        "insn_emulation {:+.2} per CPL0 cli ({})",
        b.insn_emulation_per_cli,
        if b.emulates_cpl0 {
            "emulated"
        } else {
            "run by the CPU"
        }
    );
    let expected = match e.flavour.runs_cpl0_natively() {
        Some(true) => format!("{}: 0 per cli (guest code runs on the CPU)", e.flavour),
        Some(false) => "pvm: +1 per cli (every CPL0 instruction is emulated)".to_owned(),
        None => "a known vendor module".to_owned(),
    };
    match agrees(e.flavour, b) {
        Some(true) => words(expected, measured).pass(),
        Some(false) if m.ambiguous => words(expected, measured).warn(
            "kvm_pvm and a hardware module are both present and the device does not say which \
             serves it: the behaviour decides, and the run reports the other flavour",
        ),
        Some(false) => words(expected, measured).fail(
            "the behaviour contradicts the declared flavour: the results would be labelled \
             with the wrong KVM",
        ),
        None => words(expected, measured)
            .warn("no vendor module identified: expectations default to VMX/SVM"),
    }
}

pub fn doorbells(_: &Expectations, m: &DoorbellObs) -> Judged {
    let expected = format!(
        "{} doorbells per vCPU → {} userspace exits each, none other; `exits` stat ≥ {}",
        m.rung, m.rung, m.rung
    );
    let measured = m
        .vcpus
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let stat = v
                .exits_stat
                .map_or("no stat".into(), |s| format!("exits +{s}"));
            format!("vCPU {i}: {} seen, {} other, {stat}", v.seen, v.other_exits)
        })
        .collect::<Vec<_>>()
        .join("; ");
    let ok = !m.vcpus.is_empty()
        && m.vcpus.iter().all(|v| {
            v.seen == m.rung && v.other_exits == 0 && v.exits_stat.is_none_or(|s| s >= m.rung)
        });
    words(expected, measured).pass_or(
        ok,
        Verdict::Fail,
        "a doorbell was lost or invented: block boundaries, and so every per-block stat, \
         would be misplaced",
    )
}

pub fn hypercalls(_: &Expectations, m: &HypercallObs) -> Judged {
    let expected = "hypercalls handled by the VMM = hypercalls the guest issued (> 0)".to_owned();
    let measured = format!("{} issued, {} handled", m.issued, m.seen);
    match (m.issued == m.seen, m.issued > 0) {
        (true, true) => words(expected, measured).pass(),
        (true, false) => words(expected, measured)
            .warn("no event was delivered during the phase: nothing to compare"),
        (false, _) => words(expected, measured)
            .fail("the port transport lost or invented hypercalls: `hcalls` would be wrong"),
    }
}

pub fn tsc_invariant(_: &Expectations, invariant: Option<bool>) -> Judged {
    let expected = "CPUID 80000007h EDX[8] (invariant TSC) set on the host".to_owned();
    match invariant {
        Some(true) => words(expected, "set").pass(),
        Some(false) => words(expected, "clear")
            .fail("the TSC rate may change with P-states or stop in C-states: cycles are not time"),
        None => words(expected, "leaf 80000007h not offered")
            .warn("cannot tell whether the TSC is invariant"),
    }
}

pub fn tsc_rate(_: &Expectations, m: &TscRate) -> Judged {
    let source = if m.kvm_reported {
        "KVM_GET_TSC_KHZ"
    } else {
        "cpu MHz (no KVM_GET_TSC_KHZ)"
    };
    let expected = format!(
        "guest TSC over CLOCK_MONOTONIC = {} kHz ({source}) within {}",
        m.kvm_khz,
        pct(TSC_RATE_TOLERANCE).trim_start_matches('+')
    );
    let Some(median) = crate::statistics::median(&m.estimates_khz) else {
        return words(expected, "no estimate").fail("no phase pair measured");
    };
    let off = median / m.kvm_khz.max(1) as f64 - 1.0;
    let measured = format!(
        "{median:.0} kHz ({}; {}, median of {} over {:.0} ms)",
        pct(off),
        m.method,
        m.estimates_khz.len(),
        m.long_ms
    );
    if off.abs() > TSC_RATE_TOLERANCE + m.uncertainty {
        words(expected, measured)
            .fail("cycles → ns conversions and TSC-based rates would be off by this much")
    } else if off.abs() > TSC_RATE_TOLERANCE {
        words(expected, measured).warn(&format!(
            "outside the tolerance but within the timing noise of this measurement ({}): \
                 the host was too busy to time the TSC to 0.1%",
            pct(m.uncertainty).trim_start_matches('+')
        ))
    } else if !m.kvm_reported {
        words(expected, measured)
            .warn("KVM did not report the guest TSC rate; /proc/cpuinfo was compared instead")
    } else {
        words(expected, measured).pass()
    }
}

/// `tsc.vcpus`: a constant offset between the vCPUs' TSCs shows in every block; a vCPU thread
/// preempted between the barrier and its `rdtsc` only inflates some. So the check reads the
/// quarter-way |skew|: robust while three blocks in four are undisturbed.
pub fn tsc_vcpus(_: &Expectations, m: &TscSkew) -> Judged {
    let expected = format!(
        "vCPU 1 − vCPU 0 TSC at one instant: 25th percentile of |difference| ≤ \
         {TSC_SKEW_MAX_US} µs"
    );
    let per_us = m.khz.max(1) as f64 / 1000.0;
    let abs_us = crate::statistics::sorted_finite(
        &m.skews_cycles
            .iter()
            .map(|&c| (c as f64 / per_us).abs())
            .collect::<Vec<_>>(),
    );
    if abs_us.len() < TSC_SKEW_MIN_BLOCKS {
        return words(
            expected,
            format!(
                "{}: {} usable samples, {} preempted",
                m.method,
                abs_us.len(),
                m.preempted
            ),
        )
        .warn(
            "the vCPU threads were preempted around most readings: the host is too busy to \
             compare the vCPUs' TSCs",
        );
    }
    let q = crate::statistics::percentile(&abs_us, 25.0);
    let signed: Vec<f64> = m.skews_cycles.iter().map(|&c| c as f64 / per_us).collect();
    let median = crate::statistics::median(&signed).unwrap_or(0.0);
    let measured = format!(
        "{q:.1} µs (median difference {median:+.1} µs; {}: {} samples, {} preempted left out)",
        m.method,
        abs_us.len(),
        m.preempted
    );
    words(expected, measured).pass_or(
        q <= TSC_SKEW_MAX_US,
        Verdict::Fail,
        "the vCPUs' TSCs disagree: cycles of blocks on different vCPUs are not comparable",
    )
}

/// Exits per unit that counting alone explains: a block and its empty partner may each see a
/// batch boundary or a host interrupt more or less, ±2 exits per block.
fn count_slack(m: &InsnNet) -> f64 {
    2.0 * m.blocks.max(1) as f64 / m.units.max(1) as f64
}

/// The most exits per unit a PVM host may show: one per batch of emulated instructions (twice
/// that, for where batches fall), plus the counting slack.
fn pvm_exits_bound(e: &Expectations, m: &InsnNet) -> f64 {
    2.0 * f64::from(m.instructions.max(1)) / e.emul_batch + count_slack(m)
}

/// Exits per cpuid beyond the expected that are no longer the host's noise: half an exit per
/// instruction more is the flavour's own behaviour (or a stat that counts twice).
const NOT_NOISE: f64 = 0.5;

pub fn cpuid_exits(e: &Expectations, m: &InsnNet) -> Judged {
    let measured = format!("{:.4} exits per cpuid ({} executed)", m.exits, m.units);
    let [lo, hi] = CPUID_EXITS_NATIVE;
    match e.flavour {
        KvmFlavour::Pvm => {
            let expected = format!(
                "≤ {CPUID_EXITS_PVM_MAX} per cpuid, ±2 exits per block (emulated with the rest \
                 of CPL0 code: one exit per {} instructions)",
                e.emul_batch
            );
            // More exits than the emulation accounts for are the host's interrupts while the
            // guest ran (a busy host): noise in the figures, not a host that miscounts.
            let (v, note) = if m.exits <= CPUID_EXITS_PVM_MAX + count_slack(m) {
                (
                    Verdict::Pass,
                    "PVM handles CPUID inside its instruction emulator",
                )
            } else if m.exits >= NOT_NOISE {
                (
                    Verdict::Fail,
                    "cpuid exits as on VMX/SVM: this is not PVM's emulator at work",
                )
            } else {
                (
                    Verdict::Warn,
                    "more exits than PVM's emulation accounts for: the host's interrupts while the \
                     guest ran (a busy host); exits/op figures include them",
                )
            };
            words(expected, measured).with(v, note)
        }
        f => {
            let expected =
                format!("{lo}..{hi} per cpuid, ±2 exits per block (CPUID always exits to KVM)");
            let slack = count_slack(m);
            // Fewer exits than cpuids: the stat misses what KVM handled (FAIL). More: other
            // exits (host interrupts, preemption) landed in the blocks (WARN, noise).
            let (v, note) = if (lo - slack..=hi + slack).contains(&m.exits) {
                (Verdict::Pass, "")
            } else if (m.exits > hi + slack && m.exits < hi + NOT_NOISE) || f == KvmFlavour::Unknown
            {
                (
                    Verdict::Warn,
                    "more exits than cpuids: other exits (host interrupts, preemption) landed in \
                     the blocks; exits/op figures include them",
                )
            } else {
                (
                    Verdict::Fail,
                    "the `exits` stat does not count what KVM handled: exits/op figures are off",
                )
            };
            words(expected, measured).with(v, note)
        }
    }
}

/// `exits.flag-insns`: cli, sti and popf with nothing pending.
pub fn flag_insn_exits(e: &Expectations, m: &[InsnNet]) -> Judged {
    let measured = m
        .iter()
        .map(|i| format!("{} {:.4}", i.insn.name(), i.exits))
        .collect::<Vec<_>>()
        .join(", ");
    if e.flavour == KvmFlavour::Pvm {
        let over: Vec<&InsnNet> = m
            .iter()
            .filter(|i| i.exits > pvm_exits_bound(e, i))
            .collect();
        let expected = format!(
            "≈ instructions/{} per unit (PVM counts one exit per emulation batch): at most twice \
             that, ±2 exits per block",
            e.emul_batch
        );
        return if over.is_empty() && !m.is_empty() {
            words(expected, measured).pass_noting(
                "PVM emulates CPL0 code in batches and counts one `exits` per batch, so the flag \
                 instructions show a small fraction of an exit each: the batch, not the instruction",
            )
        } else {
            words(expected, measured).fail("more exits than emulation batches")
        };
    }
    let expected = format!(
        "≤ {NATIVE_FLAG_EXITS_MAX} per instruction, ±2 exits per block (no intercept for cli, \
         sti, popf)"
    );
    let ok = !m.is_empty()
        && m.iter()
            .all(|i| i.exits <= NATIVE_FLAG_EXITS_MAX + count_slack(i));
    match (ok, e.flavour) {
        (true, _) => words(expected, measured).pass(),
        (false, KvmFlavour::Unknown) => words(expected, measured).warn("unknown flavour"),
        (false, _) => words(expected, measured)
            .fail("flag instructions exit on this host: the strategies' costs would be the host's"),
    }
}

pub fn irq_window(e: &Expectations, m: &InjectObs) -> Judged {
    let expected =
        "≥ 1 KVM_EXIT_IRQ_WINDOW_OPEN when an interrupt waits for cli; …; sti".to_owned();
    let mut measured = format!(
        "{} window exits, {} interrupts raised, {} taken",
        m.window_exits, m.raised, m.taken
    );
    if m.phases > 1 {
        // Retried while no window exit was seen: say so, never hide it.
        measured = format!("{measured} in {} phases", m.phases);
    }
    if m.raised == 0 {
        return words(expected, measured).fail("the inject thread raised nothing");
    }
    if m.window_exits > 0 {
        let note = if e.flavour == KvmFlavour::Pvm {
            "PVM opens the window at the end of an emulation batch, not right after the sti"
        } else {
            ""
        };
        return words(expected, measured).pass_noting(note);
    }
    words(expected, measured).fail(
        "request_interrupt_window never produced an exit: injected interrupts wait for nothing",
    )
}

pub fn hlt_exits(_: &Expectations, m: &HltObs) -> Judged {
    let expected = format!(
        "{} KVM_EXIT_HLT for {} hlt (userspace irqchip)",
        m.executed, m.executed
    );
    let measured = format!("{} exits", m.exits);
    words(expected, measured).pass_or(
        m.exits == m.executed && m.executed > 0,
        Verdict::Fail,
        "HLT did not reach userspace once per instruction: the hlt-exit probe is wrong",
    )
}

/// On PVM, LAPIC ticks merge within one emulation batch (~1 ms), so a fast timer delivers less
/// than its period offers; at 1 kHz this host takes nearly all of them. Below this share of what
/// it could deliver, even PVM has lost ticks: FAIL. (Injected interrupts are judged by what KVM
/// accepted instead: [`inject`].)
pub const PVM_MIN_FRACTION: f64 = 0.2;

/// Interrupts a load check needs to be able to deliver to say anything.
pub const MIN_DELIVERABLE: f64 = 20.0;

fn share_text(s: &Share) -> String {
    format!(
        "took {:.0} of {:.0} offered ({:.0} offered while it waited for a CPU): {:.0}% of the \
         other {:.0}",
        s.taken,
        s.offered,
        s.while_preempted,
        100.0 * s.taken / s.deliverable().max(1e-9),
        s.deliverable()
    )
}

/// A load's share: `None` when it is plausible, else a FAIL (broken) or WARN (too busy to
/// tell) note.
fn implausible(s: &Share) -> Option<(Verdict, &'static str)> {
    if s.taken > s.offered * (1.0 + LAPIC_TOLERANCE) + 2.0 {
        Some((
            Verdict::Fail,
            "more interrupts than the load offered: the source is broken",
        ))
    } else if s.deliverable() < MIN_DELIVERABLE {
        Some((
            Verdict::Warn,
            "the vCPU threads waited for a CPU most of the phase: the host is too busy to tell \
             lost interrupts from merged ones",
        ))
    } else if s.taken == 0.0 {
        Some((Verdict::Fail, "no interrupt arrived: the source is broken"))
    } else {
        None
    }
}

pub fn lapic_timer(e: &Expectations, m: &LapicObs) -> Judged {
    let expected = format!(
        "ticks of a {} µs periodic timer within {:.0}% of what the phase's span holds, less \
         the time the vCPU thread waited for a CPU, on every vCPU",
        m.period_us,
        LAPIC_TOLERANCE * 100.0
    );
    let measured = m
        .per_vcpu
        .iter()
        .enumerate()
        .map(|(i, s)| format!("vCPU {i}: {}", share_text(s)))
        .collect::<Vec<_>>()
        .join("; ");
    if m.per_vcpu.is_empty() {
        return words(expected, measured).fail("no vCPU reported");
    }
    if let Some((v, why)) = m.per_vcpu.iter().find_map(implausible) {
        return words(expected, measured).with(v, why);
    }
    let low = m
        .per_vcpu
        .iter()
        .map(|s| s.taken / s.deliverable())
        .fold(f64::INFINITY, f64::min);
    if low >= 1.0 - LAPIC_TOLERANCE {
        return words(expected, measured).pass();
    }
    if e.flavour == KvmFlavour::Pvm && low >= PVM_MIN_FRACTION {
        return words(expected, measured).warn(
            "PVM injects a pending interrupt between emulation batches (about 1 ms of guest \
             code here), and the LAPIC holds one pending timer interrupt: ticks that expire \
             within one batch merge, so a timer faster than ~1 kHz delivers about one tick per \
             batch and lapic-timer load on PVM is lighter than its period says",
        );
    }
    words(expected, measured).fail(
        "the in-kernel LAPIC timer lost ticks while its vCPU ran: lapic-timer rows would carry \
         less load than configured",
    )
}

/// `irq.inject`: of the interrupts raised, the guest took its share (none invented), the time
/// a vCPU thread waited for a CPU counted apart. On PVM, whose windows open late, a raise that
/// finds one still waiting for its window merges with it (the VMM holds one, as a line holds
/// one edge), so the share says how late the windows opened, not whether interrupts were lost:
/// there a loss is an interrupt KVM accepted (KVM_INTERRUPT) that the guest never took.
pub fn inject(e: &Expectations, m: &InjectObs) -> Judged {
    let expected = format!(
        "taken ≤ raised, and ≥ {:.0}% of those raised while the vCPU threads ran",
        INJECT_MIN_FRACTION * 100.0
    );
    let measured = format!(
        "{} raised, {} injected, {} taken: {}",
        m.raised,
        m.injected,
        m.taken,
        share_text(&m.share)
    );
    if m.raised == 0 || m.taken == 0 || m.taken > m.raised {
        return words(expected, measured).fail("injection is broken");
    }
    if let Some((v, why)) = implausible(&m.share) {
        return words(expected, measured).with(v, why);
    }
    if m.share.taken / m.share.deliverable() >= INJECT_MIN_FRACTION {
        return words(expected, measured).pass();
    }
    if e.flavour != KvmFlavour::Pvm {
        return words(expected, measured).fail("injected interrupts were lost");
    }
    // One may still be queued at each phase's end on each vCPU, taken after its record.
    let queued_at_ends = u64::from(m.vcpus) * u64::from(m.phases.max(1));
    if m.taken + queued_at_ends < m.injected {
        return words(expected, measured).fail(&format!(
            "KVM accepted {} interrupts (KVM_INTERRUPT) that the guest never took: lost after \
             injection",
            m.injected - m.taken
        ));
    }
    words(expected, measured).warn(
        "PVM's interrupt windows open late (at an emulation batch), so interrupts raised \
         meanwhile merge with the one waiting for its window; every one KVM accepted was taken",
    )
}

/// `attribution.exit-site`: where a port-I/O exit's RIP points. VMX and SVM exit to userspace
/// with RIP at the `out` (`kvm_fast_pio_out` leaves the skip to `complete_fast_pio_out`); PVM's
/// emulator completes the `out` first, so RIP is the next instruction.
pub fn exit_site(e: &Expectations, m: &SiteObs) -> Judged {
    let after = e.flavour == KvmFlavour::Pvm;
    let want = |&(_, at, next): &(String, u64, u64)| if after { next } else { at };
    let expected = m
        .expected
        .iter()
        .map(|s| format!("{:#x} <{}>", want(s), s.0))
        .collect::<Vec<_>>()
        .join(" or ");
    let expected = format!(
        "hypercall port exits at {} its `out`: {expected}",
        if after { "the instruction after" } else { "" }
    )
    .replace("at  its", "at its");
    let measured = m
        .seen
        .iter()
        .map(|(rip, n, s)| format!("{n}× {rip:#x} <{s}>"))
        .collect::<Vec<_>>()
        .join(", ");
    if m.expected.is_empty() {
        return words(expected, measured)
            .fail("the guest image has no hypercall symbol to expect: it is not irqbench's guest");
    }
    if m.seen.is_empty() && m.issued == 0 {
        // The same cause as `accounting.hypercalls`'s WARN: no event came, so no exit to place.
        return words(expected, measured)
            .warn("no event was delivered during the phase: no hypercall exit to attribute");
    }
    if m.seen.is_empty() {
        return words(expected, measured).fail(
            "the guest issued hypercalls and no exit site was recorded: attribution is broken",
        );
    }
    let exact = m
        .seen
        .iter()
        .all(|(rip, _, _)| m.expected.iter().any(|s| want(s) == *rip));
    let resolved = m
        .seen
        .iter()
        .all(|(_, _, sym)| m.expected.iter().any(|s| &s.0 == sym));
    let note = if after {
        "PVM's instruction emulator completes the `out` before exiting to userspace, so the \
         exit RIP is past it: exit sites name the right symbol, and decode the next instruction"
    } else {
        ""
    };
    match (exact, resolved) {
        (true, _) => words(expected, measured).pass_noting(note),
        (false, true) => words(expected, measured).warn(
            "the RIP is inside the right function but not where this flavour leaves it: exit \
             sites name the right symbol, the decoded instruction may be a neighbour",
        ),
        (false, false) => words(expected, measured).fail(
            "exit RIPs do not resolve to the code that exited: exit-site attribution is wrong",
        ),
    }
}
