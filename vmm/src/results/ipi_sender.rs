//! What the `ipi` source's unmeasured sender vCPU paid per IPI, beside its group's rows.

use serde::{Deserialize, Serialize};

use super::{median_ci, CountEstimate, Estimate};

/// The sender of an `ipi` group: the same for each of the group's rows (it sent throughout the
/// group's dispatches, whichever block the measured vCPUs ran).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IpiSenderCost {
    /// How it wrote the ICR: "x2apic" (one WRMSR of MSR 0x830) or "xapic" (stores to ICR high
    /// and ICR low at the APIC page).
    pub icr: String,
    /// IPIs it sent (ICR writes) over the group's dispatches.
    pub ipis: u64,
    /// Its vCPU's KVM `exits` stat per IPI: the mean over its phases with the CI of
    /// [`crate::analysis::counts::COUNT_CI_METHOD`], each dispatch a round. Its wait between
    /// ticks (a TSC spin) is in its phase too. Absent without binary stats or enough dispatches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exits_per_ipi: Option<CountEstimate>,
    /// Its vCPU's userspace exits per IPI (doorbells and kicks excluded), as `exits_per_ipi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmm_exits_per_ipi: Option<CountEstimate>,
    /// Guest TSC cycles of one ICR write (the `rdtsc` pair around it included): the median of
    /// its last writes of each dispatch with their 95% CI.
    #[serde(with = "median_ci")]
    pub icr_write_cycles: Option<Estimate>,
    /// ICR writes timed (up to 32 per dispatch).
    pub icr_write_samples: usize,
}
