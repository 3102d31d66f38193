//! The results of a run: what reports render and `--json` writes.
//!
//! The JSON keys are a stable, versioned interface (README "JSON schema"): add keys freely, but
//! rename or remove one only with a new [`SCHEMA`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub mod answers;
use crate::identity::Subject;

pub mod exits;
pub mod host;
pub mod interrupts;
pub mod ipi_sender;
pub mod redact;
pub mod validation;
pub mod warning;

pub use answers::{Answer, AnswerCondition, Condition, Factor, Interaction, LetIn, WaitPair};
pub use exits::{ExitReasonFigure, ExitTrace, HandledBy, HandlingTime, TracedExit};
pub use host::{
    ApicvState, Behaviour, CpuFreq, CyclesSource, FlavourRecord, KvmFlavour, Pinning, Readable,
    Smt, Vpmu,
};
pub use interrupts::{HeldWait, IrqDelivery, PendingLatency, TimerTicks};
pub use ipi_sender::IpiSenderCost;
pub use validation::{Check, Scope, Validation, Verdict};

/// Names the JSON layout; readers refuse files of another major version.
pub const SCHEMA: &str = "irqbench-results/4";
/// The one older layout still read, converted to [`SCHEMA`] on reading (`report::json`).
pub const SCHEMA_CONVERTED: &str = "irqbench-results/3";
/// How every `ci95` in a report is computed.
pub const CI_METHOD: &str = "distribution-free 95% CI of the median from order statistics \
     (binomial ranks); for cycles/op, ns/op, paired differences and comparisons (median of \
     per-round paired ratios) widened where wider to a batch-means t interval over 10 to 20 batches \
     of contiguous rounds (rounds close in time can share the host's state)";

/// Where the numbers were measured. Every report carries it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostManifest {
    pub cpu_model: String,
    pub host_cpus: u32,
    pub kernel_release: String,
    /// `vmx`, `svm` or `pvm` (`unknown` when no KVM vendor module is loaded): the declared
    /// flavour, see `flavour`. Files that stored it as a string read into the same names.
    pub kvm_flavour: KvmFlavour,
    /// How the flavour was decided, and what the guest's behaviour said.
    #[serde(default)]
    pub flavour: FlavourRecord,
    /// The host itself runs under a hypervisor (CPUID "hypervisor" bit).
    pub nested: bool,
    /// Module parameters that change exit behaviour, by `module.param`.
    pub module_params: BTreeMap<String, String>,
    /// Wanted parameters of present modules that could not be read, with why.
    #[serde(default)]
    pub module_params_unavailable: BTreeMap<String, String>,
    /// Whether APICv/AVIC accelerates a VM of each irqchip mode, and why.
    #[serde(default)]
    pub apicv: Vec<ApicvState>,
    pub tsc_khz: u64,
    pub kvm_api_version: i32,
    /// Capabilities that matter here, by name: value (0 = absent).
    pub capabilities: BTreeMap<String, i64>,
    pub max_vcpus: u32,
    pub recommended_vcpus: u32,
    /// Filled per run: `in-kernel` or `userspace` for each irqchip mode the run used.
    pub irqchip_modes: Vec<String>,
    /// `run.pin` was asked for and every vCPU thread of every session was pinned (read back
    /// from the kernel); a failure is a warning and leaves this false.
    pub vcpu_pinning: bool,
    /// Where the vCPU threads were pinned, and whether to isolated CPUs.
    #[serde(default)]
    pub pinning: Pinning,
    #[serde(default)]
    pub kernel_cmdline: Readable<String>,
    /// /sys/devices/system/cpu/vulnerabilities/*, by name.
    #[serde(default)]
    pub vulnerabilities: Readable<BTreeMap<String, String>>,
    #[serde(default)]
    pub cpufreq: Readable<CpuFreq>,
    #[serde(default)]
    pub smt: Readable<Smt>,
    #[serde(default)]
    pub microcode: Readable<String>,
    /// /proc/loadavg at the start (1, 5, 15 minutes).
    #[serde(default)]
    pub load_average: Readable<[f64; 3]>,
    pub warnings: Vec<String>,
    /// `run`'s quick validation (`irqbench validate` runs the whole suite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<Validation>,
    /// The CPU is emulated (QEMU TCG, Bochs), by what: its timing is the emulator's, so the
    /// checks that need hardware timing are not judged; exit counts and reasons are KVM's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulated_cpu: Option<String>,
    /// Facts left out of this report at the user's request (`--redact`), by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<String>,
}

/// Median with its 95% confidence interval, min, 5th and 95th percentile and coefficient of
/// variation of per-round samples (one sample per undisturbed round).
///
/// No samples is no figure: every number is NaN, written as JSON `null` (and read back from
/// it), and every renderer shows "no data" for it, never a 0.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    #[serde(deserialize_with = "f64_or_null")]
    pub median: f64,
    /// 95% CI of the median ([`CI_METHOD`]); none, JSON `null`, with too few samples to give
    /// one: a point is not an interval.
    #[serde(default)]
    pub ci95: Option<Ci>,
    #[serde(default, deserialize_with = "f64_or_null")]
    pub min: f64,
    #[serde(deserialize_with = "f64_or_null")]
    pub p5: f64,
    #[serde(deserialize_with = "f64_or_null")]
    pub p95: f64,
    /// Standard deviation / mean (0 when fewer than two samples or mean is 0).
    #[serde(deserialize_with = "f64_or_null")]
    pub cv: f64,
    pub samples: Vec<f64>,
}

/// `null` (no figure, as NaN is written) reads back as NaN.
pub(crate) fn f64_or_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// An optional [`Estimate`] as JSON `{"median": m, "ci95": [lo, hi]}`, each `null` where there
/// is none (no figure: both).
pub(crate) mod median_ci {
    use super::{Ci, Deserialize, Estimate, Serialize};

    #[derive(Serialize, Deserialize)]
    struct MedianCi {
        #[serde(default)]
        median: Option<f64>,
        #[serde(default)]
        ci95: Option<Ci>,
    }

    pub fn serialize<S: serde::Serializer>(e: &Option<Estimate>, s: S) -> Result<S::Ok, S::Error> {
        let (median, ci95) = (e.map(|e| e.point), e.and_then(|e| e.ci));
        MedianCi { median, ci95 }.serialize(s)
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Estimate>, D::Error> {
        let MedianCi { median, ci95 } = MedianCi::deserialize(d)?;
        Ok(median.map(|point| Estimate { point, ci: ci95 }))
    }
}

impl Summary {
    /// The figure of nothing measured.
    pub fn no_data() -> Summary {
        Summary {
            median: f64::NAN,
            ci95: None,
            min: f64::NAN,
            p5: f64::NAN,
            p95: f64::NAN,
            cv: f64::NAN,
            samples: Vec::new(),
        }
    }

    /// Whether there is a figure at all (a run with no kept rounds has none).
    pub fn has_data(&self) -> bool {
        self.median.is_finite()
    }

    /// The median with its CI, as the file or the rounds gave it; `None` without data.
    pub fn estimate(&self) -> Option<Estimate> {
        let ci = self.ci95;
        self.has_data().then_some(Estimate {
            point: self.median,
            ci,
        })
    }

    pub fn from_samples(samples: &[f64]) -> Summary {
        let sorted = crate::statistics::sorted_finite(samples);
        if sorted.is_empty() {
            return Summary::no_data();
        }
        let cv = match crate::statistics::mean_sd(&sorted) {
            Some((mean, sd)) if mean.abs() > f64::EPSILON => sd / mean.abs(),
            _ => 0.0,
        };
        let median = percentile(&sorted, 50.0);
        Summary {
            median,
            ci95: Estimate::new(
                median,
                crate::statistics::median_ci95(&sorted),
                sorted.len(),
            )
            .and_then(|e| e.ci),
            min: sorted[0],
            p5: percentile(&sorted, 5.0),
            p95: percentile(&sorted, 95.0),
            cv,
            samples: samples.to_vec(),
        }
    }
}

pub use crate::statistics::{percentile, Ci, Estimate};

/// Userspace exits seen at one guest code site, attributed through the ELF symbol table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExitSite {
    /// The strategy whose code contains the RIP (`-` outside any strategy).
    pub strategy: String,
    /// `save`, `disable`, `body`, `restore`, `enable`, `hypercall`, or the guest symbol.
    pub site: String,
    pub symbol: String,
    /// Userspace exit reason (`irq-window-open`, `io-out`, …).
    pub reason: String,
    /// Exits at the site over all of the row's blocks.
    pub total: u64,
    pub rip: u64,
    /// The instruction at `rip`, decoded (GNU syntax).
    pub instruction: String,
    /// Interrupt-window exits one instruction after a `sti` (its shadow delays the window):
    /// the `sti` they are attributed to, whose symbol and site the row names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sti_rip: Option<u64>,
}

/// A row's gross event totals over all its blocks, disturbed ones included; the net per-op
/// figures are in `PhaseResult::counts`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RowTotals {
    /// Interrupts the guest's handler took.
    pub interrupts: u64,
    /// Interrupts (`inject`) or events (`pv-event`) the host raised during the group's rounds,
    /// shared among its rows by block time.
    pub irqs_raised: u64,
    /// Hypercalls the guest issued.
    pub hypercalls: u64,
    /// Hypercalls the VMM saw (must equal `hypercalls`).
    pub hypercalls_seen_by_vmm: u64,
    /// Times the guest found IF set where its strategy had cleared it.
    pub if_violations: u64,
}

/// The spinlock workload's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LockStats {
    pub acquisitions: u64,
    /// Gross over all blocks (net per op: `counts["guest:lock_spins"]`).
    pub spins: u64,
    /// The counter incremented inside the lock, read after the phase.
    pub counter: u64,
    /// `counter` equals the operations all vCPUs completed ×2 (two sections per op).
    pub mutual_exclusion_held: bool,
}

/// One row of the report: one [`crate::config::plan::PhasePlan`], measured in rounds with its group.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    pub name: String,
    /// The group it was measured in (rows of one group share rounds and a baseline).
    #[serde(default)]
    pub group: String,
    pub kind: ResultKind,
    pub strategy: Subject,
    pub irq_source: String,
    pub nesting: f64,
    pub vcpus: u32,
    pub body_ops: u32,
    /// Operations per block, per vCPU (`insn` rows: iterations; ops = iterations × unroll).
    #[serde(default, alias = "iterations")]
    pub block_ops: u64,
    /// Operations measured, all rounds and vCPUs (disturbed blocks included).
    pub ops: u64,
    /// Rounds measured (each ran every variant of the group once).
    #[serde(default)]
    pub rounds: u32,
    /// Batches of contiguous rounds whose medians' t interval `cycles_per_op`'s CI also covers
    /// (0: too few rounds for batches, or a file from before them).
    #[serde(default)]
    pub ci_batches: u32,
    /// Fewer rounds than `run.min_rounds`: the group's hard cap (10 × `max_seconds`) or a
    /// signal ended it first (a warning says which).
    #[serde(default)]
    pub min_rounds_missed: bool,
    /// Fraction of this row's blocks (or its baseline partner's) flagged as disturbed and left
    /// out of every figure.
    #[serde(default)]
    pub disturbed_fraction: f64,
    /// vCPU blocks the thread clocks flagged (off-CPU between their doorbells) whose timed
    /// window was undisturbed, so they stayed in (analysis/disturbance.rs `cleared`), in the
    /// rounds of this row and its baseline partner.
    #[serde(default)]
    pub corrected_blocks: u64,
    /// The CI half-width reached the plan's precision before the time budget ran out.
    #[serde(default)]
    pub precision_reached: bool,
    /// Set when the row kept no round ("no data (35 of 35 blocks disturbed)"): its figures are
    /// `null`, the run exits 1, and `check` cannot judge it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_data: Option<String>,
    /// Net TSC cycles per operation: per round (block − empty block) / ops; median, CI, min.
    pub cycles_per_op: Summary,
    /// Nanoseconds per operation: `cycles_per_op` over the TSC frequency.
    #[serde(default)]
    pub ns_per_op: Summary,
    /// What the cycle figures count: `tsc` (see [`RunReport::cycles_source`]).
    #[serde(default)]
    pub cycles_source: String,
    /// The empty baseline's own cycles per operation (the loop that was subtracted).
    #[serde(default)]
    pub baseline_cycles: Summary,
    /// The cost normalised to the group's empty loop: per round, net cycles / the baseline's
    /// cycles per op, median and CI over the same rounds (`check --normalised` gates on it).
    #[serde(default = "Summary::no_data")]
    pub cycles_per_loop: Summary,
    /// `baseline_cycles` in ns.
    #[serde(default)]
    pub baseline_ns: Summary,
    /// Raw (not subtracted) cycles per operation.
    pub raw_cycles_per_op: Summary,
    /// `raw_cycles_per_op` in ns.
    #[serde(default)]
    pub raw_ns_per_op: Summary,
    /// Operations per second over all vCPUs, one sample per round (gross, not net).
    pub ops_per_sec: Summary,
    /// Operations per vCPU (sum over rounds).
    pub per_vcpu_ops: Vec<u64>,
    /// Each vCPU's own throughput: its operations over its own TSC time (all rounds).
    #[serde(default)]
    pub per_vcpu_ops_per_sec: Vec<f64>,
    /// Every event count per operation, net of the baseline: a mean over the kept rounds
    /// with its CI ([`crate::analysis::counts::COUNT_CI_METHOD`]). Keys: the KVM stats that
    /// moved in the group by kernel name, the VMM's exits by reason as `vmm:<reason>` with
    /// their sum `vmm:userspace_exits` and `vmm:hypercalls`, and the guest's own counters as
    /// `guest:…`. A count with too few kept rounds is absent. The one place a row's per-op
    /// counts are: `exit_reasons` and the tables read them here.
    pub counts: BTreeMap<String, CountEstimate>,
    /// Gross event totals over all of the row's blocks, disturbed ones included.
    pub totals: RowTotals,
    /// The row's exits by reason: those the VMM handled, then every KVM stat counter (their
    /// per-op figures are in `counts`, see [`ExitReasonFigure::count_key`]).
    pub exit_reasons: Vec<ExitReasonFigure>,
    pub exit_sites: Vec<ExitSite>,
    /// Where the guest took the row's interrupts (its handler's record of the interrupted RIP,
    /// `reason` "interrupt-taken"), by site like `exit_sites`: the instruction that let a
    /// pending interrupt in, whichever path delivered it. Absent in files from before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interrupt_sites: Vec<ExitSite>,
    pub lock: Option<LockStats>,
    /// Operations per strategy (mixed rows).
    pub strategy_ops: BTreeMap<String, u64>,
    /// Wall time of the group's measured rounds.
    pub wall_ms: f64,
    /// `lapic-timer` rows: the timer interrupts the guest took against those its period asks
    /// for over the row's blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer_ticks: Option<TimerTicks>,
    /// `inject`, `msi` and `ipi` rows: the interrupts the guest took against those raised
    /// over the row's blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq_delivery: Option<IrqDelivery>,
    /// `inject`, `msi` and `ipi` rows: how long their interrupts waited. Absent where none was timed
    /// (and in files from before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_latency: Option<PendingLatency>,
    /// The row's VM's irqchip and whether APICv/AVIC accelerated it: the `host.apicv` entry
    /// of that irqchip. Absent in files from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apicv: Option<ApicvState>,
    /// `ipi` rows: what the group's sender vCPU paid per IPI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipi_sender: Option<IpiSenderCost>,
    /// Measured on `run.replicates` > 1 fresh VMs: the median and ci95 of `cycles_per_op`,
    /// `ns_per_op`, `cycles_per_loop` and `ops_per_sec`, and `counts`, are then the replicates'
    /// combination ([`RunReport::replicate_ci_method`]);
    /// this holds the cycles/op of each replicate and the between-replicate share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicates: Option<ReplicateSpread>,
    /// Where the next run's `cycles_per_op` and `ops_per_sec` land, from earlier runs of this
    /// config on this host ([`RunReport::rerun`]); absent without enough of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun95: Option<RowRerun>,
}

/// A row's 95% rerun intervals ([`RunReport::rerun`]): `[lo, hi]` each, `null` where the
/// earlier runs had too few of that figure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RowRerun {
    pub cycles_per_op: Option<Ci>,
    pub ops_per_sec: Option<Ci>,
}

/// The run level of the rerun intervals: which earlier runs they were learnt from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RerunLevel {
    /// Earlier runs of this config on this host the spread was learnt from.
    pub earlier_runs: u32,
    /// Their history ids, oldest first.
    pub run_ids: Vec<i64>,
    /// How the intervals were computed (`analysis::rerun::RERUN_METHOD`).
    pub method: String,
}

/// How a figure measured on several fresh VMs spread across them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplicateSpread {
    /// Each replicate's own estimate (median of its rounds), in replicate order.
    pub estimates: Vec<f64>,
    /// Of the variance of `estimates`, the share their own CIs do not explain (0-1; null
    /// where a replicate had no CI): above 0.5 the host moved between the replicates.
    #[serde(deserialize_with = "f64_or_null")]
    pub between_share: f64,
    /// The 95% CI the rounds of all replicates give pooled, as if from one VM ([`CI_METHOD`]):
    /// what the combined CI would be without the between-replicate variance.
    pub within_ci95: Option<Ci>,
}

impl PhaseResult {
    /// The JSON keys of the row's per-round summaries.
    pub const SUMMARY_KEYS: [&str; 8] = [
        "cycles_per_op",
        "ns_per_op",
        "baseline_cycles",
        "baseline_ns",
        "raw_cycles_per_op",
        "raw_ns_per_op",
        "ops_per_sec",
        "cycles_per_loop",
    ];
}

/// What a row measures: it decides the table a row goes in and its unit.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ResultKind {
    /// save / disable / body / restore with one strategy (unit: op).
    #[default]
    Strategy,
    /// One instruction of the instruction-cost suite (unit: insn).
    Insn,
    /// The epoll ready-list lock pattern (unit: op; ops/s is the figure to read).
    Lock,
    /// Strategies interleaved by weight.
    Mixed,
    /// Test and diagnostic workloads.
    Diagnostic,
}

impl ResultKind {
    pub fn name(self) -> &'static str {
        match self {
            ResultKind::Strategy => "strategy",
            ResultKind::Insn => "insn",
            ResultKind::Lock => "lock",
            ResultKind::Mixed => "mixed",
            ResultKind::Diagnostic => "diagnostic",
        }
    }
    /// What one operation of this kind is called in column headers.
    pub fn unit(self) -> &'static str {
        match self {
            ResultKind::Insn => "insn",
            ResultKind::Strategy
            | ResultKind::Lock
            | ResultKind::Mixed
            | ResultKind::Diagnostic => "op",
        }
    }
}

/// Which figure a [`PairedComparison`] compares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComparedMetric {
    /// Net cycles per operation (strategy, insn and mixed groups).
    #[default]
    CyclesPerOp,
    /// Gross operations per second over all vCPUs (lock groups).
    OpsPerSec,
}

/// `b` against `a` inside one group: the median of per-round paired ratios b/a, with its CI.
/// `pvop-skip vs pvop-popf −9.1% [−10.0, −8.2]` is ratio 0.909 [0.900, 0.918].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PairedComparison {
    /// Result names (`results[].name`).
    pub a: String,
    pub b: String,
    pub group: String,
    pub metric: ComparedMetric,
    /// None (JSON `null`s) when there is no ratio; `no_ratio` says why.
    #[serde(with = "median_ci")]
    pub ratio: Option<Estimate>,
    /// Rounds in which both blocks (and the baseline) were undisturbed.
    pub rounds: u32,
    /// Why this comparison has no ratio ("0 of 35 paired rounds undisturbed"): a comparison
    /// never disappears for lack of data, it says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_ratio: Option<String>,
    /// Per paired round whose ratio is > 0, ln(b/a) rounded to 6 decimals: what the answers'
    /// interactions resample (absent in files written before them, and without a ratio).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log_ratios: Vec<f64>,
    /// Paired rounds whose ratio was not > 0 (a net below the baseline): their ln(b/a) is
    /// taken as ln 0 = −∞, below every other round, which a median (a rank) allows.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub nonpositive_ratios: u32,
    /// Batches of contiguous rounds whose medians' t interval `ratio`'s CI also covers (0: too
    /// few rounds for batches, or a file from before them; the CI is then the rounds' alone).
    #[serde(default)]
    pub ci_batches: u32,
    /// Measured on `run.replicates` > 1 fresh VMs: `ratio` is then the replicates'
    /// combination ([`RunReport::replicate_ci_method`]) of their median paired ratios.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicates: Option<ReplicateSpread>,
    /// Where the next run's ratio lands, from earlier runs ([`RunReport::rerun`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun95: Option<Ci>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A cost derived from two rows of one group by a paired difference per round, e.g. the popf
/// inside `popf-set-if` (`cli; push; popf`) as `popf-set-if − cli`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PairedDifference {
    /// What the difference measures (`push; popf that sets IF`).
    pub name: String,
    pub minuend: String,
    pub subtrahend: String,
    pub group: String,
    /// Cycles per operation.
    #[serde(with = "median_ci")]
    pub cycles: Option<Estimate>,
    /// `cycles` in ns.
    #[serde(default, with = "median_ci")]
    pub ns: Option<Estimate>,
    pub rounds: u32,
}

/// How disturbed blocks were recognised: every source that was consulted, by name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DisturbanceInfo {
    /// e.g. `vcpu-thread-off-cpu`, `involuntary-context-switches`, `block-time-outlier`.
    pub sources: Vec<String>,
    /// Sources considered and not used, with why (e.g. steal time).
    pub not_used: Vec<String>,
}

/// A phase that did not produce a result, and why.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseFailure {
    pub name: String,
    pub error: String,
}

/// A run's changes to its config from the command line, as given.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Adhoc {
    /// `--set KEY=VALUE`, each as `KEY=VALUE`, in order.
    #[serde(default)]
    pub set: Vec<String>,
    /// `--only GLOB`, each glob.
    #[serde(default)]
    pub only: Vec<String>,
}

impl Adhoc {
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.only.is_empty()
    }

    /// `--set run.max_seconds=1 --only 'quick/pvop-*'`: the flags as a shell would take them.
    pub fn flags(&self) -> String {
        // For a reader: each value on this one line, escaped and clipped.
        let quote = |s: &str| {
            let s = &*crate::text::outside(s);
            let plain = s
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.=/,:@".contains(c));
            if plain {
                s.to_string()
            } else {
                format!("'{}'", s.replace('\'', "'\\''"))
            }
        };
        let set = self.set.iter().map(|s| format!("--set {}", quote(s)));
        let only = self.only.iter().map(|g| format!("--only {}", quote(g)));
        set.chain(only).collect::<Vec<_>>().join(" ")
    }
}

/// A whole run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub schema: String,
    pub irqbench_version: String,
    pub config_name: String,
    pub config_source: String,
    /// `--set` and `--only` of this run: the plan is the config with these applied.
    #[serde(default, skip_serializing_if = "Adhoc::is_empty")]
    pub adhoc: Adhoc,
    /// Seconds since the Unix epoch when the run started.
    pub started_unix: u64,
    pub wall_seconds: f64,
    /// The run stopped early (signal, fatal guest error); `results` holds what was measured.
    pub partial: bool,
    pub partial_reason: Option<String>,
    pub host: HostManifest,
    #[serde(deserialize_with = "rows_by_index")]
    pub results: Vec<PhaseResult>,
    pub failures: Vec<PhaseFailure>,
    /// Paired comparisons inside each group (every ordered pair of rows, config order).
    #[serde(default)]
    pub comparisons: Vec<PairedComparison>,
    /// Single-instruction costs derived from paired differences (instruction suite).
    #[serde(default)]
    pub differences: Vec<PairedDifference>,
    /// VM-wide KVM stats by group: exact totals over the group's rounds (every row and the
    /// baseline together; a VM-wide counter belongs to no one row).
    #[serde(default)]
    pub vm_stats_by_group: BTreeMap<String, BTreeMap<String, u64>>,
    #[serde(default)]
    pub disturbance: DisturbanceInfo,
    /// [`CI_METHOD`].
    #[serde(default)]
    pub ci_method: String,
    /// The plan's description (shown under the header).
    #[serde(default)]
    pub description: String,
    /// Warnings about the figures themselves (e.g. LAPIC ticks delivered below the rate the
    /// row asks for), each kept in the file as its line; the host's are in `host.warnings`.
    #[serde(default)]
    pub warnings: Vec<warning::Warning>,
    /// How the `vif-*` strategies called the host: `port`, `vmcall` or `vapic-poll`.
    #[serde(default)]
    pub hypercall_transport: String,
    /// The hypercall instruction of this CPU's vendor (`vmcall` on Intel, `vmmcall` on AMD),
    /// which the `vmcall` and `vapic-poll` transports execute; empty for an unknown vendor.
    #[serde(default)]
    pub hypercall_insn: String,
    /// What every cycle figure counts (TSC cycles) and whether KVM would let the guest count
    /// core cycles instead.
    #[serde(default)]
    pub cycles_source: CyclesSource,
    /// `run --trace-exits`: KVM's exits by hardware reason from tracefs, or why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_trace: Option<ExitTrace>,
    /// Each chosen comparison across the conditions it was measured in (two or more), with
    /// the interactions between conditions that differ in one factor.
    #[serde(default)]
    pub answers: Vec<Answer>,
    /// Fresh VMs each group was measured on (`run.replicates`); 0, absent in the JSON, in files
    /// from before the key and reports built in code: one VM.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replicates: u32,
    /// With `replicates` > 1: how every row's, comparison's, difference's and count's CI
    /// combines the replicates (`ci_method` is then each replicate's own and `within_ci95`'s).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub replicate_ci_method: String,
    /// The earlier runs the rows' and comparisons' `rerun95` were learnt from; absent when
    /// the history held fewer than 3 of this config on this host (each figure's CI then holds
    /// only what varied inside this run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun: Option<RerunLevel>,
    /// [`answers::INTERACTION_METHOD`] when `answers` has interactions.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub interaction_method: String,
}

impl RunReport {
    /// The result row of this name.
    pub fn row(&self, name: &str) -> Option<&PhaseResult> {
        self.results.iter().find(|r| r.name == name)
    }
}

/// Reads `results` one row at a time, so an error names its row (`results[3]: ...`) and not
/// only a line and column.
fn rows_by_index<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<PhaseResult>, D::Error> {
    use serde::de::Error as _;
    struct Rows;
    impl<'de> serde::de::Visitor<'de> for Rows {
        type Value = Vec<PhaseResult>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of result rows")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut rows = Vec::new();
            let at = |i: usize, e: A::Error| A::Error::custom(format_args!("results[{i}]: {e}"));
            while let Some(r) = seq.next_element().map_err(|e| at(rows.len(), e))? {
                rows.push(r);
            }
            Ok(rows)
        }
    }
    d.deserialize_seq(Rows)
}

/// The KVM stat every row has.
pub const EXITS_STAT: &str = "exits";

/// The KVM stats of a row's `counts` (the VMM's and the guest's own are `vmm:…`, `guest:…`).
pub fn kvm_stats(
    counts: &BTreeMap<String, CountEstimate>,
) -> impl Iterator<Item = (&str, &CountEstimate)> {
    counts
        .iter()
        .filter(|(name, _)| !name.contains(':'))
        .map(|(name, e)| (name.as_str(), e))
}

/// A count per operation with its 95% CI.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CountEstimate {
    /// Net events per operation (may be negative: a row that takes fewer than the baseline).
    pub per_op: f64,
    /// A count is estimated only from enough kept rounds, so it always has a CI.
    pub ci95: Ci,
    /// Kept rounds it was computed from.
    pub rounds: usize,
    /// Row events over those rounds (before subtraction).
    pub events: u64,
    /// Baseline events over those rounds (before scaling).
    pub baseline_events: u64,
    /// Row operations over those rounds.
    pub ops: u64,
}

impl CountEstimate {
    /// The count as a figure: a count always has its CI.
    pub fn estimate(&self) -> Estimate {
        let ci = Some(self.ci95);
        Estimate {
            point: self.per_op,
            ci,
        }
    }

    /// The whole CI is 0: the only case a count may print as `0`.
    pub fn is_zero(&self) -> bool {
        self.ci95 == Ci { lo: 0.0, hi: 0.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_samples() {
        let s = Summary::from_samples(&[4.0, 1.0, 3.0, 2.0, 5.0]);
        assert_eq!(s.median, 3.0);
        assert!((s.p5 - 1.2).abs() < 1e-9);
        assert!((s.p95 - 4.8).abs() < 1e-9);
        // sample stddev of 1..5 is sqrt(2.5); mean 3
        assert!((s.cv - 2.5f64.sqrt() / 3.0).abs() < 1e-9);
    }

    #[test]
    fn summary_of_nothing_is_no_figure_and_round_trips_as_null() {
        let none = Summary::from_samples(&[]);
        assert!(!none.has_data() && none.estimate().is_none());
        assert_eq!(Summary::from_samples(&[7.0]).cv, 0.0);
        let json = serde_json::to_value(&none).unwrap();
        assert!(json["median"].is_null() && json["ci95"].is_null(), "{json}");
        let back: Summary = serde_json::from_value(json).unwrap();
        assert!(!back.has_data());
        let ci_null: Summary = serde_json::from_str(
            r#"{"median": null, "ci95": null, "p5": null, "p95": null, "cv": null, "samples": []}"#,
        )
        .unwrap();
        assert!(!ci_null.has_data() && ci_null.ci95.is_none());
    }

    /// A row that names a subject of no table is refused, and the error says which row and
    /// which field; the rows before it read as usual.
    #[test]
    fn a_report_naming_an_unknown_subject_is_refused_naming_row_and_field() {
        let mut report = RunReport {
            schema: SCHEMA.into(),
            ..Default::default()
        };
        for s in [
            Subject::Strategy(crate::identity::StrategyId::NATIVE_POPF),
            Subject::Mixed,
        ] {
            report.results.push(PhaseResult {
                name: format!("g/{s}"),
                strategy: s,
                ..Default::default()
            });
        }
        let good = serde_json::to_string(&report).expect("json");
        let back: RunReport = serde_json::from_str(&good).expect("reads back");
        assert_eq!(back.results, report.results);
        let bad = good.replace("\"mixed\"", "\"native-pof\"");
        let msg = serde_json::from_str::<RunReport>(&bad)
            .expect_err("unknown subject")
            .to_string();
        assert!(
            msg.starts_with("results[1]: `strategy` is `native-pof`"),
            "{msg}"
        );
    }

    /// `irq_delivery` is written only for the rows that have it, and a file from before it
    /// (no key) reads as None.
    #[test]
    fn irq_delivery_round_trips_and_a_file_without_it_reads() {
        let r = PhaseResult {
            irq_delivery: Some(IrqDelivery {
                rate_hz: 5000.0,
                raised_hz: Some(4990.0),
                expected: 1976.4,
                delivered: 743,
                delivered_fraction: Some(743.0 / 1976.4),
            }),
            ..Default::default()
        };
        let json = serde_json::to_value(&r).expect("json");
        assert_eq!(json["irq_delivery"]["delivered"], 743);
        assert_eq!(json["irq_delivery"]["rate_hz"], 5000.0);
        let back: PhaseResult = serde_json::from_value(json.clone()).expect("reads back");
        assert_eq!(back.irq_delivery, r.irq_delivery);
        let none = serde_json::to_value(PhaseResult::default()).expect("json");
        assert!(none.get("irq_delivery").is_none(), "{none}");
        let mut old = json;
        old.as_object_mut()
            .expect("an object")
            .remove("irq_delivery");
        let back: PhaseResult = serde_json::from_value(old).expect("an old row reads");
        assert_eq!(back.irq_delivery, None);
    }
}
