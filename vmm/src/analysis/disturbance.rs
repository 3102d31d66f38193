//! Which blocks were disturbed, so that no figure includes them.
//!
//! The guest's TSC keeps counting while its vCPU thread is not running, so a block during which
//! the host preempted the thread (another process, SIGSTOP, the scheduler) looks slower by the
//! time it waited. Three sources flag a block:
//! - the vCPU thread's off-CPU time across the block (wall clock minus the thread's CPU time,
//!   read at the block's doorbells): more than [`OFF_CPU_FLOOR_NS`] or [`OFF_CPU_FRACTION`] of
//!   the block;
//! - involuntary context switches of the thread across the block (getrusage(RUSAGE_THREAD));
//! - block-time outliers (an outer hypervisor's preemption is invisible to the two above): a
//!   block longer than its variant's median by more than [`OUTLIER_MADS`] scaled MADs and
//!   [`OUTLIER_FRACTION`] of the median.
//!
//! The thread clocks span doorbell to doorbell, wider than the guest's timed window, so what
//! they flag is judged by the block's TSC time before it is left out ([`disturbed`]). One rule at
//! every vCPU count: it is applied to each round's block of a variant with its time averaged
//! over the vCPUs (one vCPU: the block itself).
//!
//! Exits the strategy itself causes (PVM's emulation batches, a probe's port I/O) keep the
//! thread on its CPU and leave every block alike, so none of these rules removes them.

/// Off-CPU time that always marks a block disturbed.
pub const OFF_CPU_FLOOR_NS: u64 = 50_000;
/// Off-CPU time, as a fraction of the block's wall time, that marks it disturbed.
pub const OFF_CPU_FRACTION: f64 = 0.02;
/// Outlier rule: distance from the median in MADs (scaled to σ for normal data).
pub const OUTLIER_MADS: f64 = 10.0;
/// Outlier rule: and at least this fraction above the median.
pub const OUTLIER_FRACTION: f64 = 0.25;

pub const SOURCE_OFF_CPU: &str = "vcpu-thread-off-cpu (wall − CLOCK_THREAD_CPUTIME_ID per block)";
pub const SOURCE_SWITCHES: &str =
    "involuntary-context-switches (getrusage RUSAGE_THREAD per block)";
pub const SOURCE_OUTLIER: &str = "block-time-outlier (> median + 10 MAD and > 1.25 × median)";
pub const NOT_USED_STEAL: &str = "kvm-steal-time: the guest does not enable MSR_KVM_STEAL_TIME \
     (untested at emulated CPL0 on PVM); the host-side thread clocks see the same preemption";

/// Why one vCPU's block was flagged (empty = undisturbed).
pub fn host_flags(off_cpu_ns: u64, involuntary_switches: u64, wall_ns: u64) -> bool {
    let fraction = if wall_ns > 0 {
        off_cpu_ns as f64 / wall_ns as f64
    } else {
        0.0
    };
    off_cpu_ns > OFF_CPU_FLOOR_NS || fraction > OFF_CPU_FRACTION || involuntary_switches > 0
}

/// A cell (one round's block of a variant, its time averaged over the vCPUs) that the thread
/// clocks flagged is kept, counted as corrected, when its TSC time lies within this many scaled
/// MADs of its variant's median: the thread was off its CPU between the block's doorbells but
/// outside the guest's timed window (at the doorbell exit, or waiting for the other vCPUs to
/// start the block). A preemption inside the window adds a scheduler slice (milliseconds, on
/// blocks of 500 µs) and lands far outside.
pub const CLEAR_MADS: f64 = 3.0;

/// Which of `cycles` (one variant's cells) are disturbed, `flagged` being the cells in which the
/// thread clocks flagged some vCPU's block. The same rule at every vCPU count, with or without
/// an interrupt-load thread: a cell is disturbed when it is a block-time outlier among all the
/// variant's cells ([`outliers`]), or when it was flagged and its time lies more than
/// [`CLEAR_MADS`] scaled MADs from the median of the variant's other cells (the outliers left
/// out, flagged or not: where the group's own threads outnumber the CPUs most cells are
/// flagged, and the unflagged few are no reference). Faster counts too: a lock row whose
/// sibling vCPU was off its CPU ran with less contention.
pub fn disturbed(cycles: &[f64], flagged: &[bool]) -> Vec<bool> {
    let outlier = outliers(cycles, &vec![false; cycles.len()]);
    let reference: Vec<f64> = cycles
        .iter()
        .zip(&outlier)
        .filter(|(_, o)| !**o)
        .map(|(c, _)| *c)
        .collect();
    let Some(median) = crate::statistics::median(&reference) else {
        return outlier;
    };
    let deviations: Vec<f64> = reference.iter().map(|c| (c - median).abs()).collect();
    let mad = crate::statistics::median(&deviations).unwrap_or(0.0) * 1.4826;
    cycles
        .iter()
        .zip(flagged)
        .zip(&outlier)
        .map(|((c, f), o)| *o || (*f && (c - median).abs() > CLEAR_MADS * mad))
        .collect()
}

/// Flags the outliers among `cycles` (one variant's blocks), ignoring those already flagged.
pub fn outliers(cycles: &[f64], flagged: &[bool]) -> Vec<bool> {
    let clean: Vec<f64> = cycles
        .iter()
        .zip(flagged)
        .filter(|(_, f)| !**f)
        .map(|(c, _)| *c)
        .collect();
    let Some(median) = crate::statistics::median(&clean) else {
        return vec![false; cycles.len()];
    };
    let deviations: Vec<f64> = clean.iter().map(|c| (c - median).abs()).collect();
    let mad = crate::statistics::median(&deviations).unwrap_or(0.0) * 1.4826;
    let limit = (median + OUTLIER_MADS * mad).max(median * (1.0 + OUTLIER_FRACTION));
    cycles.iter().map(|c| *c > limit).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_rules() {
        assert!(!host_flags(0, 0, 500_000));
        assert!(!host_flags(5_000, 0, 500_000), "1% off-CPU is noise");
        assert!(host_flags(20_000, 0, 500_000), "4% off-CPU");
        assert!(host_flags(60_000, 0, 10_000_000), "above the floor");
        assert!(host_flags(0, 1, 500_000), "preempted");
    }

    #[test]
    fn flagged_cells_whose_timed_window_was_undisturbed_are_kept() {
        // 200 cells around 1000; 40 flagged: 30 as fast as the rest (the thread waited outside
        // the timed window), 10 ten times slower (preempted inside it).
        let cycles: Vec<f64> = (0..200)
            .map(|i| {
                if i % 20 == 0 {
                    10_000.0
                } else {
                    1000.0 + (i % 9) as f64
                }
            })
            .collect();
        let flagged: Vec<bool> = (0..200).map(|i| i % 5 == 0).collect();
        let d = disturbed(&cycles, &flagged);
        assert_eq!(d.iter().filter(|d| **d).count(), 10);
        assert!(d.iter().zip(&cycles).all(|(d, x)| *d == (*x > 2000.0)));
        // Every cell flagged (an inject thread or sibling vCPUs switched the vCPU out in each):
        // the same ten stay out, the rest are kept.
        assert_eq!(disturbed(&cycles, &[true; 200]), d);
        // Flagged cells a little slower than 3 MADs (the window was slowed): left out, the
        // unflagged ones kept however slow, up to the outlier rule.
        let slow: Vec<f64> = (0..200)
            .map(|i| 1000.0 + (i % 9) as f64 + if i % 5 == 0 { 20.0 } else { 0.0 })
            .collect();
        let d = disturbed(&slow, &flagged);
        assert!(d.iter().zip(&flagged).all(|(d, f)| d == f));
        // Flagged and faster (a lock row whose sibling vCPU was off its CPU): left out too.
        let fast: Vec<f64> = slow
            .iter()
            .map(|c| if *c > 1010.0 { 950.0 } else { *c })
            .collect();
        assert!(disturbed(&fast, &flagged)
            .iter()
            .zip(&flagged)
            .all(|(d, f)| d == f));
        assert!(disturbed(&[], &[]).is_empty());
        assert_eq!(disturbed(&[1.0; 5], &[true; 5]), [false; 5]);
        assert_eq!(disturbed(&[f64::NAN], &[true]), [false]);
    }

    #[test]
    fn outliers_are_far_from_the_median_only() {
        let mut cycles: Vec<f64> = (0..100).map(|i| 1000.0 + (i % 7) as f64).collect();
        cycles[10] = 5000.0;
        cycles[20] = 1100.0; // slower, but within 25% of the median: kept
        let flagged = vec![false; cycles.len()];
        let out = outliers(&cycles, &flagged);
        assert!(out[10]);
        assert!(!out[20]);
        assert_eq!(out.iter().filter(|o| **o).count(), 1);
    }
}
