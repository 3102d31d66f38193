//! What a row's interrupt load did: the interrupts taken against those raised, and how long
//! they waited.

use serde::{Deserialize, Serialize};

use crate::statistics::Ci;

/// Timer interrupts of a `lapic-timer` row: delivered (counted by the guest's handler, all
/// vCPUs) against expected (the row's block time / period, summed over vCPUs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimerTicks {
    pub period_us: f64,
    pub expected: f64,
    pub delivered: u64,
    /// delivered / expected.
    pub delivered_fraction: f64,
}

/// Injected interrupts of an `inject` row: delivered (counted by the guest's handler inside
/// the row's blocks, all vCPUs: `interrupts`) against expected (the row's block time summed
/// over vCPUs × the rate the load kept: `rate_hz`, or `raised_hz` where that is lower).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IrqDelivery {
    pub rate_hz: f64,
    /// The rate the load thread really raised at, per vCPU, over the group's dispatches: below
    /// `rate_hz` when the host could not keep the rate (ticks far behind are skipped). Absent in
    /// files from before it and where no dispatch time was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raised_hz: Option<f64>,
    pub expected: f64,
    pub delivered: u64,
    /// delivered / expected; `null` when nothing was expected (no figure without data).
    pub delivered_fraction: Option<f64>,
}

/// How long the row's raised interrupts waited for the guest's handler (`inject`, `msi` and
/// `ipi` rows): guest TSC cycles from the raise (the load thread's host TSC plus the vCPU's
/// TSC offset; the `ipi` sender's own TSC) to the handler's first instructions, over the
/// interrupts taken inside the row's timed blocks, all rounds and vCPUs ([`crate::analysis::latency::LATENCY_CI_METHOD`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PendingLatency {
    /// Interrupts whose wait was timed.
    pub timed: u64,
    pub median_cycles: f64,
    pub median_ci95: Option<Ci>,
    /// The 90th percentile (nearest rank).
    pub p90_cycles: f64,
    pub p90_ci95: Option<Ci>,
    pub max_cycles: f64,
    /// How much longer the interrupts the row's restore let in waited than its others: what
    /// being held by IF added (the rest of the section, and without APICv/AVIC the window exit
    /// and re-injection). `None` unless both kinds were timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_by_if: Option<HeldWait>,
}

/// The row's timed interrupts split by where the guest took them: right after an instruction
/// that set IF (the restore, the skip's enable, a nested loop's outer `sti`), so they had
/// waited for IF, or elsewhere ([`crate::results::LetIn::waited_for_if`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HeldWait {
    /// Timed interrupts that had waited for IF.
    pub held: u64,
    /// Timed interrupts taken elsewhere.
    pub other: u64,
    /// Median wait of the held minus median wait of the others (cycles).
    pub extra_median_cycles: f64,
    /// 95% CI of that difference: each group's median by order statistics at 97.5%, the
    /// interval between their extreme differences (both cover at once with ≥ 95%); `None` with
    /// fewer than six waits in either group.
    pub extra_ci95: Option<Ci>,
}
