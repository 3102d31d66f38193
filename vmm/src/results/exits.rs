//! Exit breakdowns: a row's exits by reason (`results[].exit_reasons[]`) and, with
//! `--trace-exits`, KVM's own exits by hardware reason from tracefs (`exit_trace`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Who handled the exits of one [`ExitReasonFigure`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HandledBy {
    /// The VMM, after KVM_RUN returned (a userspace exit).
    #[default]
    Vmm,
    /// KVM, by its binary stats counter of that name.
    Kvm,
}

/// How long handling one exit took, in nanoseconds, over the exits timed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HandlingTime {
    pub min: f64,
    pub mean: f64,
    pub max: f64,
}

/// One line of a row's exit breakdown, as `perf kvm stat` prints one per reason. Its net
/// per-op figure is the row's `counts` entry [`ExitReasonFigure::count_key`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExitReasonFigure {
    /// `vmm`: the VMM's reason (`irq-window-open`, `pio-hypercall`, `signal`, …); `kvm`: the
    /// KVM stat's name (`exits`, `irq_window_exits`, …).
    pub reason: String,
    pub handled_by: HandledBy,
    /// Gross events over all of the row's blocks, disturbed ones included.
    pub total: u64,
    /// Share of the row's KVM `exits` over the kept rounds (gross counts of both); for `kvm`
    /// entries only the `*exits` counters have one. `null` without the `exits` stat.
    pub share_of_exits: Option<f64>,
    /// `vmm` reasons: the VMM's handling time per exit, from KVM_RUN's return to the next
    /// KVM_RUN (all blocks, like `total`); `null` for `kvm` entries and untimed reasons.
    pub time_ns: Option<HandlingTime>,
}

/// The `counts` key of the VMM's exits of one reason.
pub fn vmm_count_key(reason: &str) -> String {
    format!("vmm:{reason}")
}

impl ExitReasonFigure {
    /// Where the row's `counts` holds this reason's net per-op figure: `vmm:<reason>` for the
    /// VMM's, the stat's own name for KVM's.
    pub fn count_key(&self) -> String {
        match self.handled_by {
            HandledBy::Vmm => vmm_count_key(&self.reason),
            HandledBy::Kvm => self.reason.clone(),
        }
    }
}

/// Whether `--trace-exits` could trace, and what it found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExitTrace {
    /// Events were read from tracefs (false: `note` says why not).
    pub available: bool,
    /// Why tracing was unavailable or found nothing, or how it was done.
    pub note: String,
    /// Per group: KVM exits of its vCPU threads by hardware exit reason (all its rows and
    /// the baseline together: the tracepoints know nothing of blocks).
    pub groups: BTreeMap<String, Vec<TracedExit>>,
    /// Per group: KVM's interrupt-window exits (`INTERRUPT_WINDOW` on VMX, `vintr` on SVM) by
    /// the guest code site they left, in-kernel ones included; `reason` is `kvm:` and the
    /// tracepoint's name. Empty where none was traced.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub window_sites: BTreeMap<String, Vec<super::ExitSite>>,
}

/// Exits of one hardware reason from `kvm:kvm_exit`, paired with the vCPU thread's next
/// `kvm:kvm_entry` as `perf kvm stat` pairs them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TracedExit {
    /// The reason as the tracepoint prints it (`EXTERNAL_INTERRUPT`, `npf`, `io`, …).
    pub reason: String,
    /// Exits of the reason over the group's rounds.
    pub total: u64,
    /// Exit to next entry on the same thread (in-kernel handling, plus the VMM's for exits
    /// KVM passed on); `null` when no exit of the reason had a later entry.
    pub time_ns: Option<HandlingTime>,
}
