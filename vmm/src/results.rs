//! The results of a run: what reports render and `--json` writes.
//!
//! The JSON keys are a stable, versioned interface (README "JSON schema"): add keys freely, but
//! rename or remove one only with a new [`SCHEMA`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Names the JSON layout; `compare` refuses files of another major version.
pub const SCHEMA: &str = "irqbench-results/1";

/// Where the numbers were measured. Every report carries it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostManifest {
    pub cpu_model: String,
    pub host_cpus: u32,
    pub kernel_release: String,
    /// `vmx`, `svm` or `pvm` (`unknown` when no KVM vendor module is loaded).
    pub kvm_flavour: String,
    /// The host itself runs under a hypervisor (CPUID "hypervisor" bit).
    pub nested: bool,
    /// Module parameters that change exit behaviour, by `module.param`.
    pub module_params: BTreeMap<String, String>,
    pub tsc_khz: u64,
    pub kvm_api_version: i32,
    /// Capabilities that matter here, by name: value (0 = absent).
    pub capabilities: BTreeMap<String, i64>,
    pub max_vcpus: u32,
    pub recommended_vcpus: u32,
    /// Filled per run: `in-kernel` or `userspace` for each irqchip mode the run used.
    pub irqchip_modes: Vec<String>,
    pub vcpu_pinning: bool,
    pub warnings: Vec<String>,
}

/// Median, 5th and 95th percentile and coefficient of variation of per-repeat samples.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub median: f64,
    pub p5: f64,
    pub p95: f64,
    /// Standard deviation / mean (0 when fewer than two samples or mean is 0).
    pub cv: f64,
    pub samples: Vec<f64>,
}

impl Summary {
    pub fn from_samples(samples: &[f64]) -> Summary {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|s| s.is_finite()).collect();
        sorted.sort_by(f64::total_cmp);
        if sorted.is_empty() {
            return Summary::default();
        }
        let n = sorted.len() as f64;
        let mean = sorted.iter().sum::<f64>() / n;
        let cv = if sorted.len() > 1 && mean.abs() > f64::EPSILON {
            let var = sorted.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (n - 1.0);
            var.sqrt() / mean.abs()
        } else {
            0.0
        };
        Summary {
            median: percentile(&sorted, 50.0),
            p5: percentile(&sorted, 5.0),
            p95: percentile(&sorted, 95.0),
            cv,
            samples: samples.to_vec(),
        }
    }
}

/// Linear interpolation between closest ranks of an ascending slice.
pub fn percentile(sorted: &[f64], pct: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        1 => sorted[0],
        n => {
            let rank = pct / 100.0 * (n - 1) as f64;
            let lo = rank.floor() as usize;
            let hi = rank.ceil().min((n - 1) as f64) as usize;
            sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
        }
    }
}

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
    pub count: u64,
    pub rip: u64,
    /// The instruction at `rip`, decoded (GNU syntax).
    pub instruction: String,
}

/// The spinlock workload's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LockStats {
    pub acquisitions: u64,
    pub spins: u64,
    pub spins_per_op: f64,
    /// The counter incremented inside the lock, read after the phase.
    pub counter: u64,
    /// `counter` equals the operations all vCPUs completed ×2 (two sections per op).
    pub mutual_exclusion_held: bool,
}

/// One row of the report: one [`crate::plan::PhasePlan`] measured `repeats` times.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    pub name: String,
    /// `strategy`, `insn`, `lock`, `mixed`.
    pub kind: String,
    pub strategy: String,
    pub irq_source: String,
    pub nesting: f64,
    pub vcpus: u32,
    pub body_ops: u32,
    /// Iterations per vCPU per repeat (after adaptation).
    pub iterations: u64,
    /// Operations measured, all repeats and vCPUs.
    pub ops: u64,
    pub repeats: u32,
    /// Baseline-subtracted TSC cycles per operation, one sample per repeat.
    pub cycles_per_op: Summary,
    /// The empty-body baseline's cycles per operation that was subtracted (its median).
    pub baseline_cycles_per_op: f64,
    /// The baseline's own repeats, per operation: its spread is part of the result's noise.
    #[serde(default)]
    pub baseline_cycles: Summary,
    /// Raw (not subtracted) cycles per operation.
    pub raw_cycles_per_op: Summary,
    /// Operations per second over all vCPUs, one sample per repeat.
    pub ops_per_sec: Summary,
    /// Operations per vCPU (sum over repeats).
    pub per_vcpu_ops: Vec<u64>,
    /// Each vCPU's own throughput: its operations over its own TSC time (all repeats).
    #[serde(default)]
    pub per_vcpu_ops_per_sec: Vec<f64>,
    /// Per-vCPU KVM stat deltas per operation, by kernel name (only stats that moved).
    pub exits_per_op: BTreeMap<String, f64>,
    /// The same for the VM-wide stats.
    pub vm_stats_per_op: BTreeMap<String, f64>,
    /// The VMM's own count of userspace exits by reason, per operation (markers subtracted).
    pub userspace_exits_per_op: BTreeMap<String, f64>,
    pub interrupts: u64,
    /// Interrupts (`inject`) or events (`pv-event`) the host raised; more than the guest took
    /// means some merged while one was still pending.
    #[serde(default)]
    pub irqs_raised: u64,
    pub hypercalls: u64,
    /// Hypercalls the VMM saw (must equal `hypercalls`).
    pub hypercalls_seen_by_vmm: u64,
    pub if_violations: u64,
    pub exit_sites: Vec<ExitSite>,
    pub lock: Option<LockStats>,
    /// Operations per strategy (mixed phases).
    pub strategy_ops: BTreeMap<String, u64>,
    /// The coefficient of variation of cycles/op exceeds the plan's threshold.
    pub noisy: bool,
    /// Wall time of the measured repeats.
    pub wall_ms: f64,
}

/// A phase that did not produce a result, and why.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseFailure {
    pub name: String,
    pub error: String,
}

/// A whole run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub schema: String,
    pub irqbench_version: String,
    pub config_name: String,
    pub config_source: String,
    /// Seconds since the Unix epoch when the run started.
    pub started_unix: u64,
    pub wall_seconds: f64,
    /// The run stopped early (signal, fatal guest error); `results` holds what was measured.
    pub partial: bool,
    pub partial_reason: Option<String>,
    pub host: HostManifest,
    pub results: Vec<PhaseResult>,
    pub failures: Vec<PhaseFailure>,
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
    fn summary_of_nothing_is_zero() {
        assert_eq!(Summary::from_samples(&[]).median, 0.0);
        assert_eq!(Summary::from_samples(&[7.0]).cv, 0.0);
    }
}
