//! How long a raised interrupt waited for the guest's handler: quantiles of a row's timed waits.

use crate::results::PendingLatency;
use crate::statistics::{quantile, quantile_ci95, Ci, MIN_CI_SAMPLES};

/// How the latency's CIs are estimated (the level: single interrupts of one run).
pub const LATENCY_CI_METHOD: &str = "distribution-free 95% CIs of the median and p90 by order \
     statistics over the row's timed interrupts, all rounds and vCPUs pooled: they say where \
     this run's quantile lies, not where a rerun's will";

/// The row's pending-interrupt latency from the waits (guest TSC cycles) of the interrupts it
/// took inside its blocks; `None` when none was timed.
pub fn pending_latency(waits: &[u64]) -> Option<PendingLatency> {
    let mut sorted: Vec<f64> = waits.iter().map(|&w| w as f64).collect();
    sorted.sort_unstable_by(f64::total_cmp);
    let ci = |q: f64| -> Option<Ci> {
        (sorted.len() >= MIN_CI_SAMPLES)
            .then(|| quantile_ci95(&sorted, q))
            .flatten()
    };
    Some(PendingLatency {
        timed: sorted.len() as u64,
        median_cycles: quantile(&sorted, 0.5)?,
        median_ci95: ci(0.5),
        p90_cycles: quantile(&sorted, 0.9)?,
        p90_ci95: ci(0.9),
        max_cycles: *sorted.last()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_wait_timed_is_no_figure_and_few_have_no_ci() {
        assert_eq!(pending_latency(&[]), None);
        let few = pending_latency(&[5, 1, 3]).expect("three waits");
        assert_eq!(
            (few.timed, few.median_cycles, few.max_cycles),
            (3, 3.0, 5.0)
        );
        assert_eq!((few.median_ci95, few.p90_ci95), (None, None));
    }

    #[test]
    fn the_quantiles_and_their_cis_come_from_the_sorted_waits() {
        let waits: Vec<u64> = (1..=1000).rev().collect();
        let l = pending_latency(&waits).expect("1000 waits");
        assert_eq!(
            (l.timed, l.median_cycles, l.p90_cycles, l.max_cycles),
            (1000, 500.0, 900.0, 1000.0)
        );
        let m = l.median_ci95.expect("median CI");
        assert!(m.lo < 500.0 && m.hi > 500.0, "{m:?}");
        let p = l.p90_ci95.expect("p90 CI");
        assert!(p.lo < 900.0 && p.hi > 900.0 && p.hi < 1000.0, "{p:?}");
    }
}
