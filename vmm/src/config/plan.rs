//! A validated benchmark plan: what the config loader ([`crate::config`]) produces from a TOML
//! file and [`crate::measure`] runs.
//!
//! Nothing here is unchecked user input: every value was range-checked by the config loader.

use irqbench_abi as abi;
use serde::{Deserialize, Serialize};

use crate::results::redact::Redaction;
use crate::results::ResultKind;

use crate::identity::{Diagnostic, Subject};
pub use crate::identity::{InsnId, StrategyId};

/// Where a phase's interrupts come from. The variant's position in [`IrqSource::with_param`]
/// is its id in `abi::irq::SOURCES`, which has its name, description, parameter and irqchip.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "kebab-case")]
pub enum IrqSource {
    None,
    /// In-kernel irqchip; the guest's LAPIC timer fires every `period_us`.
    LapicTimer {
        period_us: f64,
    },
    /// Userspace irqchip; a host thread raises a vector `rate_hz` times a second.
    Inject {
        rate_hz: f64,
    },
    /// A host thread sets the virtual-IF pending byte `rate_hz` times a second.
    PvEvent {
        rate_hz: f64,
    },
    /// In-kernel irqchip; a host thread signals each vCPU's irqfd, an MSI to its APIC,
    /// `rate_hz` times a second.
    Msi {
        rate_hz: f64,
    },
    /// In-kernel irqchip; an extra, unmeasured vCPU sends each measured vCPU an IPI (an ICR
    /// write) `rate_hz` times a second.
    Ipi {
        rate_hz: f64,
    },
}

/// An [`IrqSource`] from its parameter (ignored by a source without one).
pub type IrqBuild = fn(f64) -> IrqSource;

/// How a host thread raises a source's events (`session/irq_load.rs` does it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostRaise {
    /// A vector, injected with KVM_INTERRUPT (userspace irqchip).
    Interrupt,
    /// The slot's virtual-IF pending byte.
    VifEvent,
    /// An eventfd bound with KVM_IRQFD to an MSI of `MSI_VECTOR` (in-kernel irqchip): KVM
    /// delivers it, the VMM never sees its window.
    Msi,
}

impl HostRaise {
    /// A real interrupt, whose handler logs how long it waited (the virtual-IF event has none).
    pub fn is_interrupt(self) -> bool {
        match self {
            HostRaise::Interrupt | HostRaise::Msi => true,
            HostRaise::VifEvent => false,
        }
    }
}

impl IrqSource {
    /// A constructor per entry of `abi::irq::SOURCES`, in id order (a test checks `abi_id` and
    /// the parameter's key). The array is as long as the table by its type, so a config's
    /// source name, found in the table, always has its constructor: no lookup can miss.
    pub const BUILDERS: [IrqBuild; abi::irq::COUNT as usize] = [
        |_| IrqSource::None,
        |x| IrqSource::LapicTimer { period_us: x },
        |x| IrqSource::Inject { rate_hz: x },
        |x| IrqSource::PvEvent { rate_hz: x },
        |x| IrqSource::Msi { rate_hz: x },
        |x| IrqSource::Ipi { rate_hz: x },
    ];

    /// The source of id `id` with its parameter (if it takes one) set to `x`.
    #[cfg(test)]
    pub fn with_param(id: usize, x: f64) -> Option<IrqSource> {
        IrqSource::BUILDERS.get(id).map(|build| build(x))
    }

    pub fn abi_id(&self) -> u32 {
        match self {
            IrqSource::None => abi::irq::NONE,
            IrqSource::LapicTimer { .. } => abi::irq::LAPIC_TIMER,
            IrqSource::Inject { .. } => abi::irq::INJECT,
            IrqSource::PvEvent { .. } => abi::irq::PV_EVENT,
            IrqSource::Msi { .. } => abi::irq::MSI,
            IrqSource::Ipi { .. } => abi::irq::IPI,
        }
    }

    /// The value of its parameter (`abi::irq::Info::param` says which).
    pub fn param(&self) -> Option<f64> {
        match *self {
            IrqSource::None => None,
            IrqSource::LapicTimer { period_us } => Some(period_us),
            IrqSource::Inject { rate_hz }
            | IrqSource::PvEvent { rate_hz }
            | IrqSource::Msi { rate_hz }
            | IrqSource::Ipi { rate_hz } => Some(rate_hz),
        }
    }

    /// What a host thread raises for this source, and how many times a second.
    pub fn host_raised(&self) -> Option<(HostRaise, f64)> {
        match *self {
            IrqSource::Inject { rate_hz } => Some((HostRaise::Interrupt, rate_hz)),
            IrqSource::PvEvent { rate_hz } => Some((HostRaise::VifEvent, rate_hz)),
            IrqSource::Msi { rate_hz } => Some((HostRaise::Msi, rate_hz)),
            IrqSource::None | IrqSource::LapicTimer { .. } | IrqSource::Ipi { .. } => None,
        }
    }

    /// `ipi`: the VM gets one more vCPU, which sends the IPIs.
    pub fn needs_ipi_sender(&self) -> bool {
        matches!(self, IrqSource::Ipi { .. })
    }

    /// The guest's LAPIC timer initial count (`PhaseDescriptor::timer_initial_count`).
    pub fn timer_initial_count(&self) -> u32 {
        match *self {
            // KVM's emulated LAPIC counts at 1 GHz (APIC_BUS_CYCLE_NS = 1) with divide-by-1.
            IrqSource::LapicTimer { period_us } => {
                (period_us * 1000.0).clamp(1.0, u32::MAX as f64) as u32
            }
            IrqSource::None
            | IrqSource::Inject { .. }
            | IrqSource::PvEvent { .. }
            | IrqSource::Msi { .. }
            | IrqSource::Ipi { .. } => 0,
        }
    }

    /// Its entry in `abi::irq::SOURCES`.
    pub fn info(&self) -> &'static abi::irq::Info {
        &abi::irq::SOURCES[self.abi_id() as usize]
    }

    pub fn name(&self) -> &'static str {
        self.info().name
    }

    /// `inject@1000Hz`, `lapic-timer@100us`, `none`.
    pub fn label(&self) -> String {
        match self.info().param.zip(self.param()) {
            Some((p, x)) => format!("{}@{x}{}", self.name(), p.unit),
            None => self.name().into(),
        }
    }

    /// The in-kernel irqchip is needed for the LAPIC timer, MSIs (KVM_IRQFD) and IPIs; `inject`
    /// needs it absent (KVM_INTERRUPT works only with a userspace irqchip).
    pub fn needs_in_kernel_irqchip(&self) -> bool {
        self.info().in_kernel_irqchip
    }
}

/// How the `vif-*` strategies call the host. Port I/O is the default: KVM's API documentation
/// (api.rst, "KVM_EXIT_HYPERCALL") directs guest-to-VMM calls to KVM_EXIT_IO, which every KVM
/// flavour delivers, while the hypercall instruction differs by vendor and livelocks on PVM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HypercallTransport {
    /// `out` to a port: a KVM_EXIT_IO the VMM handles; works on every KVM host.
    Port,
    /// `KVM_HC_MAP_GPA_RANGE` with the host vendor's instruction (`vmcall` on Intel, `vmmcall`
    /// on AMD), forwarded to the VMM as KVM_EXIT_HYPERCALL; refused on PVM, where it livelocks.
    Vmcall,
    /// `KVM_HC_VAPIC_POLL_IRQ` with the vendor's instruction: handled inside KVM (its
    /// `hypercalls` stat counts it), no userspace exit; refused on PVM like `vmcall`.
    VapicPoll,
}

impl HypercallTransport {
    pub fn name(self) -> &'static str {
        match self {
            HypercallTransport::Port => "port",
            HypercallTransport::Vmcall => "vmcall",
            HypercallTransport::VapicPoll => "vapic-poll",
        }
    }

    /// The id the guest reads (`PhaseDescriptor::hypercall_transport`).
    pub fn abi_id(self) -> u32 {
        match self {
            HypercallTransport::Port => abi::hypercall::PORT,
            HypercallTransport::Vmcall => abi::hypercall::EXIT,
            HypercallTransport::VapicPoll => abi::hypercall::VAPIC_POLL,
        }
    }

    /// Executes a KVM hypercall instruction (`vmcall`/`vmmcall`).
    pub fn uses_hypercall_insn(self) -> bool {
        !matches!(self, HypercallTransport::Port)
    }
}

/// What a phase runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Workload {
    /// save / disable / body / restore with one strategy.
    Strategy {
        strategy: StrategyId,
    },
    /// One instruction of the instruction-cost suite.
    Insn {
        insn: InsnId,
    },
    /// The epoll ready-list pattern: lock, splice, unlock, work, lock, requeue, unlock.
    Lock {
        strategy: StrategyId,
    },
    /// Strategies interleaved by weight (index = strategy id) with the phase's seed.
    Mixed {
        weights: Vec<(StrategyId, u16)>,
    },
    /// Test and diagnostic workloads (not reachable from configs).
    Doorbells,
    FaultUd2,
    SpinForever,
    GarbageRecord,
    /// Spin with interrupts enabled for `tsc_cycles` TSC cycles (time, not iterations: the
    /// same phase idles equally long where guest code is emulated and where it runs natively).
    Idle {
        tsc_cycles: u64,
    },
    HaltForever,
    /// The latency's known answer: self-IPIs raised with IF clear for `body_ops` iterations of
    /// `dec; jnz` (`abi::workload::LATENCY_PROBE`).
    LatencyProbe,
}

impl Workload {
    /// The name shown in the report's strategy column.
    pub fn label(&self) -> String {
        self.subject().name().into()
    }

    /// What its result row names in `strategy`.
    pub fn subject(&self) -> Subject {
        match self {
            Workload::Strategy { strategy } | Workload::Lock { strategy } => {
                Subject::strategy(*strategy)
            }
            Workload::Insn { insn } => Subject::insn(*insn),
            Workload::Mixed { .. } => Subject::Mixed,
            Workload::Doorbells => Subject::Diagnostic(Diagnostic::Doorbells),
            Workload::FaultUd2 => Subject::Diagnostic(Diagnostic::FaultUd2),
            Workload::SpinForever => Subject::Diagnostic(Diagnostic::SpinForever),
            Workload::GarbageRecord => Subject::Diagnostic(Diagnostic::GarbageRecord),
            Workload::Idle { .. } => Subject::Diagnostic(Diagnostic::Idle),
            Workload::HaltForever => Subject::Diagnostic(Diagnostic::HaltForever),
            Workload::LatencyProbe => Subject::Diagnostic(Diagnostic::LatencyProbe),
        }
    }

    pub fn kind(&self) -> ResultKind {
        match self {
            Workload::Strategy { .. } => ResultKind::Strategy,
            Workload::Insn { .. } => ResultKind::Insn,
            Workload::Lock { .. } => ResultKind::Lock,
            Workload::Mixed { .. } => ResultKind::Mixed,
            Workload::Doorbells
            | Workload::FaultUd2
            | Workload::SpinForever
            | Workload::GarbageRecord
            | Workload::Idle { .. }
            | Workload::HaltForever
            | Workload::LatencyProbe => ResultKind::Diagnostic,
        }
    }
}

/// What the rows of one group share (everything but the workload's variant). It renders as
/// `{bench}/n{nesting}/{irq label}/{vcpus}v`, the group name reports and results files carry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupKey {
    pub bench: String,
    pub nesting: f64,
    pub irq: IrqSource,
    pub vcpus: u32,
}

impl std::fmt::Display for GroupKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let GroupKey {
            bench,
            nesting,
            irq,
            vcpus,
        } = self;
        write!(f, "{bench}/n{nesting}/{}/{vcpus}v", irq.label())
    }
}

/// One measured row of the plan: a workload under one interrupt load, nesting and vCPU count.
///
/// Rows that share `group` are measured together, interleaved in rounds against the group's
/// `empty` baseline (see `measure/`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhasePlan {
    /// Unique within the plan; shown in reports and used by `compare` to match results.
    pub name: String,
    /// The group this row is measured in.
    pub group: GroupKey,
    pub workload: Workload,
    pub irq: IrqSource,
    /// Fraction of operations entered with interrupts already disabled.
    pub nesting: f64,
    /// Critical-section work per operation.
    pub body_ops: u32,
    pub vcpus: u32,
    pub seed: u64,
    /// Operations per block (per vCPU, per variant); `None` = calibrated to `Plan::block_us`.
    pub block_ops: Option<u64>,
    /// The comparisons of its group, (a, then b: "b vs a"), the same on every row of a bench;
    /// empty: every pair (instruction groups).
    #[serde(default)]
    pub compare: Vec<(StrategyId, StrategyId)>,
}

/// Everything a run needs, validated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub name: String,
    pub description: String,
    /// The config file, or `<built-in default>`.
    pub source: String,
    pub memory_mib: u32,
    /// Rounds continue until every row's 95% CI half-width is at most this fraction of its
    /// median (or of the group's baseline cycles/op, for nets near zero), or time runs out.
    pub precision: f64,
    /// Time budget of one group's rounds, in seconds.
    pub max_seconds: f64,
    /// Rounds every group runs at least, precision reached or not.
    pub min_rounds: u32,
    /// Target length of one block (one variant's n operations), in microseconds.
    pub block_us: u32,
    /// Fresh VMs each group is measured on, interleaved in slices of rounds (1: one VM).
    #[serde(default = "defaults::replicates")]
    pub replicates: u32,
    pub pin_vcpus: bool,
    pub hypercall: HypercallTransport,
    /// A dispatch still running after this long is stopped by the watchdog; `None` = derived.
    pub phase_timeout_ms: Option<u64>,
    pub phases: Vec<PhasePlan>,
    /// `report.redact`: the facts to keep out of every output.
    #[serde(default)]
    pub redact: Vec<Redaction>,
}

/// Rows one group may hold (the guest runs at most `abi::MAX_VARIANTS` blocks per round, one
/// of them the `empty` baseline).
pub const MAX_GROUP_VARIANTS: usize = 15;

/// Defaults of the optional config keys (the config loader's key table documents them).
pub mod defaults {
    pub const MEMORY_MIB: u32 = 32;
    pub const VCPUS: u32 = 1;
    pub const BODY_OPS: u32 = 4;
    pub const SEED: u64 = 1;
    pub const NESTING: f64 = 0.0;
    pub const PRECISION: f64 = 0.02;
    pub const MAX_SECONDS: f64 = 8.0;
    pub const MIN_ROUNDS: u32 = 20;
    pub const BLOCK_US: u32 = 500;
    pub const REPLICATES: u32 = 1;
    /// Each replicate is a VM with its own guest memory and vCPU threads.
    pub const MAX_REPLICATES: u32 = 16;

    /// [`REPLICATES`], for plans serialized before the key.
    pub fn replicates() -> u32 {
        REPLICATES
    }
}

impl Plan {
    /// The most blocks one round of this plan runs, and the group that runs them: a group's
    /// rows and its `empty` baseline, grouped as the measuring groups them (by `group`, at most
    /// [`MAX_GROUP_VARIANTS`] rows, a diagnostic row alone).
    pub fn largest_round(&self) -> Option<(usize, String)> {
        let mut rows: std::collections::HashMap<String, usize> = Default::default();
        let mut largest: Option<(usize, String)> = None;
        for p in &self.phases {
            let key = p.group.to_string();
            let n = if p.workload.kind() == ResultKind::Diagnostic {
                1
            } else {
                let n = rows.entry(key.clone()).or_insert(0);
                *n += 1;
                (*n).min(MAX_GROUP_VARIANTS)
            };
            if largest.as_ref().is_none_or(|(most, _)| n + 1 > *most) {
                largest = Some((n + 1, key));
            }
        }
        largest
    }

    /// A one-row plan for tests and benchmarks: `workload` on `vcpus` vCPUs, fixed block size.
    pub fn single(workload: Workload, vcpus: u32, block_ops: u64) -> Plan {
        Plan {
            name: "single".into(),
            description: String::new(),
            source: "<code>".into(),
            memory_mib: 16,
            precision: defaults::PRECISION,
            max_seconds: 2.0,
            min_rounds: 3,
            block_us: defaults::BLOCK_US,
            replicates: defaults::REPLICATES,
            pin_vcpus: false,
            hypercall: HypercallTransport::Port,
            phase_timeout_ms: None,
            phases: vec![PhasePlan {
                name: workload.label(),
                group: GroupKey {
                    bench: "single".into(),
                    nesting: 0.0,
                    irq: IrqSource::None,
                    vcpus,
                },
                workload,
                irq: IrqSource::None,
                nesting: 0.0,
                body_ops: 1,
                vcpus,
                seed: 1,
                block_ops: Some(block_ops),
                compare: Vec::new(),
            }],
            redact: Vec::new(),
        }
    }

    /// The largest vCPU count any phase uses.
    pub fn max_vcpus(&self) -> u32 {
        self.phases.iter().map(|p| p.vcpus).max().unwrap_or(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `IrqSource::with_param` has one source per entry of `abi::irq::SOURCES`, in id order,
    /// each taking the parameter (serde key and value) its entry names.
    #[test]
    fn irq_sources_follow_the_abi_table() {
        for (id, info) in abi::irq::SOURCES.iter().enumerate() {
            let s = IrqSource::with_param(id, 250.0).expect("a source per table entry");
            assert_eq!(s.abi_id() as usize, id, "{}", info.name);
            assert_eq!(s.name(), info.name);
            let json = serde_json::to_value(s).expect("serialize");
            assert_eq!(json["source"], info.name);
            match info.param {
                Some(p) => {
                    assert_eq!(json[p.key], 250.0, "{}", info.name);
                    assert_eq!(s.label(), format!("{}@250{}", info.name, p.unit));
                }
                None => assert_eq!((s.param(), s.label()), (None, info.name.to_string())),
            }
        }
        assert_eq!(IrqSource::with_param(abi::irq::SOURCES.len(), 1.0), None);
    }

    #[test]
    fn identities_read_their_table() {
        assert_eq!(StrategyId::from_name("native-skip"), Some(StrategyId(3)));
        assert_eq!(StrategyId(3).symbol(), "irqbench_op_native_skip");
        assert_eq!(StrategyId(99).name(), "?");
        assert_eq!(InsnId::all().count(), abi::insn::COUNT as usize);
        assert_eq!(InsnId::from_name("pio-exit").map(InsnId::unroll), Some(1));
        assert!(StrategyId::all()
            .filter(|s| s.is_vif())
            .all(|s| s.name().starts_with("vif-")));
    }
}
