//! A row's counts as figures with their 95% CI ([`Estimate`]): how every reader judges a count,
//! the comparison of two runs and the renderers alike.

pub(crate) use crate::statistics::Estimate;

use crate::results::{CountEstimate, PhaseResult, EXITS_STAT};

/// The `exits` stat per op, if the kernel reported it.
pub(crate) fn exits_stat(r: &PhaseResult) -> Option<f64> {
    r.counts.get(EXITS_STAT).map(|e| e.per_op)
}

/// Count `name` of the row's `counts` per op with its CI.
pub(crate) fn stat_estimate(r: &PhaseResult, name: &str) -> Option<Estimate> {
    r.counts.get(name).map(CountEstimate::estimate)
}

/// Exits per op with the CI of the per-round samples.
pub(crate) fn exits_estimate(r: &PhaseResult) -> Option<Estimate> {
    stat_estimate(r, EXITS_STAT)
}
