//! A validated benchmark plan: what `config.rs` produces from a TOML file and `runner.rs` executes.
//!
//! Nothing here is unchecked user input: every value was range-checked by the config loader.

use irqbench_abi as abi;
use serde::{Deserialize, Serialize};

use crate::results::ResultKind;

/// An interrupt-flag save/restore strategy (see DESIGN.md's table), or the empty baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct StrategyId(pub u32);

impl StrategyId {
    pub const EMPTY: StrategyId = StrategyId(abi::strategy::EMPTY);

    /// All strategies a config may name (the baseline `empty` included).
    pub fn all() -> impl Iterator<Item = StrategyId> {
        (0..abi::strategy::COUNT).map(StrategyId)
    }

    pub fn name(self) -> &'static str {
        abi::strategy::NAMES
            .get(self.0 as usize)
            .copied()
            .unwrap_or("?")
    }

    pub fn from_name(name: &str) -> Option<StrategyId> {
        abi::strategy::NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| StrategyId(i as u32))
    }

    /// The guest symbol of the operation (`irqbench_op_native_popf`).
    pub fn symbol(self) -> String {
        format!("irqbench_op_{}", self.name().replace('-', "_"))
    }

    pub fn is_vif(self) -> bool {
        abi::strategy::is_vif(self.0)
    }

    /// One line for `irqbench list` and `--help`.
    pub fn describe(self) -> &'static str {
        match self.0 {
            abi::strategy::EMPTY => "baseline: the same loop and body with no flag handling",
            abi::strategy::NATIVE_POPF => "pushf; pop / cli / push; popf (irqsave before 2021)",
            abi::strategy::NATIVE_CLI_STI => {
                "cli / sti (spin_lock_irq: re-enables even if IRQs were off)"
            }
            abi::strategy::NATIVE_SKIP => {
                "pushf; pop / cli / test $IF; jz; sti (upstream since 2021)"
            }
            abi::strategy::PVOP_POPF => {
                "call *save_fl / call *irq_disable / call *restore_fl (popf)"
            }
            abi::strategy::PVOP_SKIP => {
                "call *save_fl / call *irq_disable / test $IF; jz; call *irq_enable (2017 patch)"
            }
            abi::strategy::VIF_RESTORE => {
                "virtual IF byte: mask=!(f&IF); hypercall if unmasked and pending"
            }
            abi::strategy::VIF_SKIP => {
                "virtual IF byte: only if (f&IF) { mask=0; hypercall if pending }"
            }
            _ => "?",
        }
    }
}

/// An instruction (or exit) of the instruction-cost suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct InsnId(pub u32);

impl InsnId {
    pub const EMPTY: InsnId = InsnId(abi::insn::EMPTY);

    pub fn all() -> impl Iterator<Item = InsnId> {
        (0..abi::insn::COUNT).map(InsnId)
    }

    pub fn name(self) -> &'static str {
        abi::insn::NAMES
            .get(self.0 as usize)
            .copied()
            .unwrap_or("?")
    }

    pub fn from_name(name: &str) -> Option<InsnId> {
        abi::insn::NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| InsnId(i as u32))
    }

    pub fn unroll(self) -> u32 {
        abi::insn::unroll(self.0)
    }

    pub fn symbol(self) -> String {
        format!("irqbench_insn_{}", self.name().replace('-', "_"))
    }

    /// One line for `irqbench list`.
    pub fn describe(self) -> &'static str {
        match self.0 {
            abi::insn::EMPTY => "baseline: the loop alone",
            abi::insn::CLI => "cli",
            abi::insn::STI => "sti",
            abi::insn::POPF_SET_IF => "cli; push; popf that sets IF",
            abi::insn::POPF_CLEAR_IF => "sti; push; popf that clears IF",
            abi::insn::POPF_SAME_IF => "push; popf that leaves IF set",
            abi::insn::PUSHF => "pushf; pop",
            abi::insn::PIO_EXIT => "out to a VMM port: one port-I/O exit",
            abi::insn::MMIO_EXIT => "store to unbacked memory: one MMIO exit",
            abi::insn::CPUID => "cpuid leaf 0 (in-kernel exit on VMX/SVM)",
            abi::insn::HLT_EXIT => "hlt with IF set: one KVM_EXIT_HLT to the VMM",
            _ => "?",
        }
    }
}

/// Where a phase's interrupts come from.
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
}

impl IrqSource {
    pub const NAMES: [&'static str; 4] = ["none", "lapic-timer", "inject", "pv-event"];

    pub fn name(&self) -> &'static str {
        match self {
            IrqSource::None => "none",
            IrqSource::LapicTimer { .. } => "lapic-timer",
            IrqSource::Inject { .. } => "inject",
            IrqSource::PvEvent { .. } => "pv-event",
        }
    }

    /// `inject@1000Hz`, `lapic-timer@100us`, `none`.
    pub fn label(&self) -> String {
        match self {
            IrqSource::None => "none".into(),
            IrqSource::LapicTimer { period_us } => format!("lapic-timer@{period_us}us"),
            IrqSource::Inject { rate_hz } => format!("inject@{rate_hz}Hz"),
            IrqSource::PvEvent { rate_hz } => format!("pv-event@{rate_hz}Hz"),
        }
    }

    pub fn abi_id(&self) -> u32 {
        match self {
            IrqSource::None => abi::irq::NONE,
            IrqSource::LapicTimer { .. } => abi::irq::LAPIC_TIMER,
            IrqSource::Inject { .. } => abi::irq::INJECT,
            IrqSource::PvEvent { .. } => abi::irq::PV_EVENT,
        }
    }

    /// The in-kernel irqchip is needed for the LAPIC timer; `inject` needs it absent
    /// (KVM_INTERRUPT works only with a userspace irqchip).
    pub fn needs_in_kernel_irqchip(&self) -> bool {
        matches!(self, IrqSource::LapicTimer { .. })
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
}

impl Workload {
    /// The name shown in the report's strategy column.
    pub fn label(&self) -> String {
        match self {
            Workload::Strategy { strategy } | Workload::Lock { strategy } => {
                strategy.name().to_string()
            }
            Workload::Insn { insn } => insn.name().to_string(),
            Workload::Mixed { .. } => "mixed".into(),
            Workload::Doorbells => "doorbells".into(),
            Workload::FaultUd2 => "fault-ud2".into(),
            Workload::SpinForever => "spin-forever".into(),
            Workload::GarbageRecord => "garbage-record".into(),
            Workload::Idle { .. } => "idle".into(),
            Workload::HaltForever => "halt-forever".into(),
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
            | Workload::HaltForever => ResultKind::Diagnostic,
        }
    }

    /// The workload whose phase is subtracted as "loop + marker overhead".
    pub fn baseline(&self) -> Option<Workload> {
        match self {
            Workload::Strategy { .. } | Workload::Mixed { .. } => Some(Workload::Strategy {
                strategy: StrategyId::EMPTY,
            }),
            Workload::Insn { .. } => Some(Workload::Insn {
                insn: InsnId::EMPTY,
            }),
            Workload::Lock { .. } => Some(Workload::Lock {
                strategy: StrategyId::EMPTY,
            }),
            _ => None,
        }
    }

    /// Operations one iteration completes.
    pub fn ops_per_iteration(&self) -> u64 {
        match self {
            Workload::Insn { insn } => u64::from(insn.unroll()),
            _ => 1,
        }
    }
}

/// One measured row of the plan: a workload under one interrupt load, nesting and vCPU count.
///
/// Rows that share `group` are measured together, interleaved in rounds against the group's
/// `empty` baseline (see `measure/`): they must share everything but the workload's variant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhasePlan {
    /// Unique within the plan; shown in reports and used by `compare` to match results.
    pub name: String,
    /// The group this row is measured in: `{bench}/n{nesting}/{irq label}/{vcpus}v`.
    pub group: String,
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
    pub pin_vcpus: bool,
    pub hypercall: HypercallTransport,
    /// A dispatch still running after this long is stopped by the watchdog; `None` = derived.
    pub phase_timeout_ms: Option<u64>,
    pub phases: Vec<PhasePlan>,
}

/// Rows one group may hold (the guest runs at most `abi::MAX_VARIANTS` blocks per round, one
/// of them the `empty` baseline).
pub const MAX_GROUP_VARIANTS: usize = 15;

/// Defaults of the measurement knobs (the config loader documents them).
pub mod defaults {
    pub const PRECISION: f64 = 0.02;
    pub const MAX_SECONDS: f64 = 8.0;
    pub const MIN_ROUNDS: u32 = 20;
    pub const BLOCK_US: u32 = 500;
}

impl Plan {
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
            pin_vcpus: false,
            hypercall: HypercallTransport::Port,
            phase_timeout_ms: None,
            phases: vec![PhasePlan {
                name: workload.label(),
                group: "single".into(),
                workload,
                irq: IrqSource::None,
                nesting: 0.0,
                body_ops: 1,
                vcpus,
                seed: 1,
                block_ops: Some(block_ops),
            }],
        }
    }

    /// The largest vCPU count any phase uses.
    pub fn max_vcpus(&self) -> u32 {
        self.phases.iter().map(|p| p.vcpus).max().unwrap_or(1)
    }
}
