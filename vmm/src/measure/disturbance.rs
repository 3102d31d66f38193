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

/// A block the thread clocks flagged is cleared (kept, counted as corrected) when its TSC time
/// lies within this many scaled MADs of its variant's unflagged blocks' median: the thread was
/// off its CPU between the block's doorbells but outside the guest's timed window (at the
/// doorbell exit, or waiting for the other vCPUs to start the block).
pub const CLEAR_MADS: f64 = 3.0;

/// Which of `cycles` (one variant's blocks) that the thread clocks `flagged` are to be cleared:
/// each within [`CLEAR_MADS`] of the unflagged blocks' median, and the cleared ones together with
/// a median inside the unflagged blocks' 95% CI (else none is: blocks the host slowed a little
/// would pull the figure). Where most blocks are flagged — an `inject` thread or sibling vCPUs
/// switched the vCPU out in most of them, so the unflagged ones are a biased few — all of the
/// variant's blocks are the reference first (a block preempted inside its timed window is
/// several times slower than their median, one preempted outside is not), and the unflagged
/// ones when that clears none; otherwise the other way round.
pub fn cleared(cycles: &[f64], flagged: &[bool]) -> Vec<bool> {
    let quiet: Vec<f64> = cycles
        .iter()
        .zip(flagged)
        .filter(|(_, f)| !**f)
        .map(|(c, _)| *c)
        .collect();
    // Judged first against whichever reference holds most of the blocks, then the other.
    let mostly_quiet = 2 * quiet.len() >= cycles.len();
    let (first, second): (&[f64], &[f64]) = if mostly_quiet {
        (&quiet, cycles)
    } else {
        (cycles, &quiet)
    };
    let by_first = cleared_against(cycles, flagged, first);
    if by_first.iter().any(|c| *c) {
        return by_first;
    }
    cleared_against(cycles, flagged, second)
}

/// [`cleared`] with `reference` as the undisturbed blocks.
fn cleared_against(cycles: &[f64], flagged: &[bool], reference: &[f64]) -> Vec<bool> {
    let none = vec![false; cycles.len()];
    let sorted = crate::statistics::sorted_finite(reference);
    let (Some(median), Some(ci)) = (
        crate::statistics::median(&sorted),
        crate::statistics::median_ci95(&sorted),
    ) else {
        return none;
    };
    let deviations: Vec<f64> = sorted.iter().map(|c| (c - median).abs()).collect();
    let mad = crate::statistics::median(&deviations).unwrap_or(0.0) * 1.4826;
    let limit = median + CLEAR_MADS * mad;
    let candidate: Vec<bool> = cycles
        .iter()
        .zip(flagged)
        .map(|(c, f)| *f && *c <= limit)
        .collect();
    let kept: Vec<f64> = cycles
        .iter()
        .zip(&candidate)
        .filter(|(_, k)| **k)
        .map(|(c, _)| *c)
        .collect();
    match crate::statistics::median(&kept) {
        Some(m) if ci[0] <= m && m <= ci[1] => candidate,
        _ => none,
    }
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
    fn flagged_blocks_whose_timed_window_was_undisturbed_are_cleared() {
        // 200 blocks around 1000; 40 flagged: 30 as fast as the rest (the thread waited outside
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
        let c = cleared(&cycles, &flagged);
        assert_eq!(c.iter().filter(|c| **c).count(), 30);
        assert!(c.iter().zip(&cycles).all(|(c, x)| !*c || *x < 2000.0));
        assert!(c.iter().zip(&flagged).all(|(c, f)| !*c || *f));
        // Flagged blocks all a little slower (3 MADs but beyond the CI): none is cleared.
        let slow: Vec<f64> = (0..200)
            .map(|i| 1000.0 + (i % 9) as f64 + if i % 5 == 0 { 6.0 } else { 0.0 })
            .collect();
        assert!(cleared(&slow, &flagged).iter().all(|c| !*c));
        assert!(cleared(&[1.0; 5], &[true; 5]).iter().all(|c| !*c));
        // Every block flagged (an inject thread switched the vCPU out in each): judged against
        // all blocks, the fast ones are lifted and the ten slow ones stay out.
        let all = cleared(&cycles, &[true; 200]);
        assert_eq!(all.iter().filter(|c| **c).count(), 190);
        assert!(all.iter().zip(&cycles).all(|(c, x)| *c == (*x < 2000.0)));
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
