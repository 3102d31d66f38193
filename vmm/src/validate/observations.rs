//! What the checks measure: plain data that probes.rs and noise.rs fill in and the judges
//! read. Synthetic values of these types are how the tests fail every check by construction.

use crate::identity::InsnId;
use crate::results::{Behaviour, KvmFlavour, Readable, Smt};

/// `flavour`: what CPL0 `cli` did to `insn_emulation`, against the declaration.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlavourObs {
    pub declared: KvmFlavour,
    /// kvm_pvm and a hardware module are both present and the device did not say which.
    pub ambiguous: bool,
    pub behaviour: Behaviour,
}

/// `accounting.doorbells`: K PING doorbells rung by every vCPU.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DoorbellObs {
    pub rung: u64,
    pub vcpus: Vec<DoorbellVcpu>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct DoorbellVcpu {
    /// PING doorbells the VMM handled.
    pub seen: u64,
    /// Other userspace exits in the phase (there should be none).
    pub other_exits: u64,
    /// The vCPU's `exits` stat over the phase (`None` without binary stats).
    pub exits_stat: Option<u64>,
}

/// `accounting.hypercalls`: virtual-IF hypercalls under pv-event load.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HypercallObs {
    /// Counted by the guest.
    pub issued: u64,
    /// Handled by the VMM.
    pub seen: u64,
}

/// `tsc.rate`: guest TSC cycles over CLOCK_MONOTONIC between two phase lengths.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TscRate {
    /// How the guest TSC was read.
    pub method: String,
    /// KVM_GET_TSC_KHZ (or the manifest's fallback when `kvm_reported` is false).
    pub kvm_khz: u64,
    pub kvm_reported: bool,
    /// One estimate per vCPU (slope between its least delayed short and long phase), kHz.
    pub estimates_khz: Vec<f64>,
    /// Length of the long phase (or the span between the KVM readings).
    pub long_ms: f64,
    /// How far off the rate may be from timing noise alone, relative: the brackets of the KVM
    /// readings, or how much the phases' edge delays varied.
    pub uncertainty: f64,
}

/// `tsc.vcpus`: vCPU 1's TSC − vCPU 0's at the same instant, one sample per block (or per
/// pair of KVM readings).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TscSkew {
    /// How the two TSCs were read at one instant.
    pub method: String,
    pub khz: u64,
    /// Blocks neither vCPU thread was preempted around.
    pub skews_cycles: Vec<i64>,
    /// Blocks left out because a vCPU thread was preempted around the barrier.
    pub preempted: usize,
}

/// Net exits and emulations per unit of one instruction probe (its block − the empty block).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InsnNet {
    /// The probe (`cli`, `popf-set-if`, `cpuid` …).
    pub insn: InsnId,
    /// Units measured (instructions, or instruction groups like `cli; push; popf`).
    pub units: u64,
    /// Blocks they ran in (each netted against an empty block).
    pub blocks: u64,
    pub exits: f64,
    pub insn_emulation: f64,
    /// Guest instructions one unit is, on a host that emulates each (PVM).
    pub instructions: u32,
}

/// `exits.hlt`: HLTs executed with the userspace irqchip and KVM_EXIT_HLTs seen.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HltObs {
    pub executed: u64,
    pub exits: u64,
}

/// Interrupts one vCPU (or all) took in a phase under load, against what the load offered.
/// A vCPU thread waiting for a CPU (a busy host) merges the interrupts that come meanwhile, on
/// any flavour, so that time is counted apart.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Share {
    pub taken: f64,
    /// What the load offered over the phase.
    pub offered: f64,
    /// Of `offered`, what came while the vCPU thread was off its CPU.
    pub while_preempted: f64,
}

impl Share {
    /// What a vCPU that ran the whole time would take: the offer less the preempted part.
    pub fn deliverable(&self) -> f64 {
        (self.offered - self.while_preempted).max(0.0)
    }
}

impl std::ops::Add for Share {
    type Output = Share;

    fn add(self, o: Share) -> Share {
        Share {
            taken: self.taken + o.taken,
            offered: self.offered + o.offered,
            while_preempted: self.while_preempted + o.while_preempted,
        }
    }
}

/// `irq.inject` and `exits.irq-window`: `cli; sti` under injected interrupts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InjectObs {
    pub vcpus: u32,
    /// Inject phases run (validate/probes.rs `INJECT_PHASES`); the counts are their sums.
    pub phases: u32,
    pub raised: u64,
    /// KVM_INTERRUPT calls that succeeded (or merged with a queued one).
    pub injected: u64,
    /// Interrupts the guest's handler counted.
    pub taken: u64,
    pub window_exits: u64,
    /// `taken` against `raised` (at the rate the load thread kept), all vCPUs.
    pub share: Share,
}

/// `irq.lapic-timer-*`: ticks of the guest's periodic LAPIC timer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LapicObs {
    pub period_us: f64,
    /// Per vCPU: ticks taken against the ticks its phase's TSC span holds.
    pub per_vcpu: Vec<Share>,
}

/// `attribution.exit-site`: the port-I/O exits of the hypercall, by RIP.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiteObs {
    /// (symbol, address of its `out`, address of the instruction after it) from the image.
    pub expected: Vec<(String, u64, u64)>,
    /// (rip, exits, symbol the rip resolves to).
    pub seen: Vec<(u64, u64, String)>,
    /// Hypercalls the guest issued in the phase: none means no exit to place.
    pub issued: u64,
}

/// `noise.steal`: /proc/stat over the suite.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StealObs {
    pub steal_ticks: u64,
    pub total_ticks: u64,
    pub seconds: f64,
}

/// `noise.smt`: SMT state and the busiest sibling of the CPUs vCPUs may use.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SmtObs {
    pub smt: Readable<Smt>,
    /// (cpu, busy fraction) of the busiest sibling hyperthread, if any.
    pub busiest_sibling: Option<(u32, f64)>,
}
