//! How long a raised interrupt waited for the guest's handler: quantiles of a row's timed waits.

use crate::results::{HeldWait, PendingLatency};
use crate::statistics::{median_ci, quantile, quantile_ci95, Ci, MIN_CI_SAMPLES};

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
        held_by_if: None,
    })
}

/// The waits of the interrupts that waited for IF (`held`) against the others': the median
/// difference with a conservative 95% CI (each median's order-statistic CI at 97.5%, so both
/// cover together at ≥ 95%, and the differences of their ends). `None` unless both were timed.
pub fn held_wait(held: &[u64], other: &[u64]) -> Option<HeldWait> {
    let sorted = |w: &[u64]| {
        let mut v: Vec<f64> = w.iter().map(|&x| x as f64).collect();
        v.sort_unstable_by(f64::total_cmp);
        v
    };
    let (h, o) = (sorted(held), sorted(other));
    let extra = quantile(&h, 0.5)? - quantile(&o, 0.5)?;
    let ci = |v: &[f64]| {
        (v.len() >= MIN_CI_SAMPLES)
            .then(|| median_ci(v, 0.975))
            .flatten()
    };
    let extra_ci95 = match (ci(&h), ci(&o)) {
        (Some(a), Some(b)) => Some(Ci {
            lo: a.lo - b.hi,
            hi: a.hi - b.lo,
        }),
        _ => None,
    };
    Some(HeldWait {
        held: h.len() as u64,
        other: o.len() as u64,
        extra_median_cycles: extra,
        extra_ci95,
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
    fn held_waits_are_told_from_the_others_only_where_their_cis_part() {
        assert_eq!(held_wait(&[], &[1, 2, 3]), None);
        assert_eq!(held_wait(&[1, 2, 3], &[]), None);
        let few = held_wait(&[10, 12, 14], &[1, 2, 3]).expect("both timed");
        assert_eq!((few.held, few.other, few.extra_median_cycles), (3, 3, 10.0));
        assert_eq!(few.extra_ci95, None, "fewer than six in a group");
        // 100 waits around 1000 held, 100 around 500 not: +500, a CI that excludes 0.
        let held: Vec<u64> = (950..1050).collect();
        let other: Vec<u64> = (450..550).collect();
        let w = held_wait(&held, &other).expect("both timed");
        assert_eq!(w.extra_median_cycles, 500.0);
        let ci = w.extra_ci95.expect("a CI");
        assert!(ci.lo > 0.0 && ci.lo < 500.0 && ci.hi > 500.0, "{ci:?}");
        // The same waits on both sides: the CI holds 0.
        let same = held_wait(&held, &held).expect("both timed");
        let ci = same.extra_ci95.expect("a CI");
        assert!(ci.lo < 0.0 && ci.hi > 0.0, "{ci:?}");
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
