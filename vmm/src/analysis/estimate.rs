//! A row's figure with its 95% CI, `None` where there is none: how every reader judges a
//! [`Summary`] or a count, the comparison of two runs and the renderers alike.

use crate::results::{PhaseResult, Summary, EXITS_STAT};
use crate::statistics::MIN_CI_SAMPLES;

/// A median with the 95% CI that bounds it, `None` when too few rounds gave one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Estimate {
    pub median: f64,
    pub ci: Option<[f64; 2]>,
}

impl Estimate {
    /// The CI of a summary of per-round samples; v1 files and short runs have none. A file's
    /// CI stands without its samples when it is a real interval (a hand-made or trimmed file);
    /// a point (`[m, m]`, how short runs were once written) or v1's `[0, 0]` is no CI.
    pub fn of(s: &Summary) -> Estimate {
        let [lo, hi] = s.ci95;
        let interval = crate::statistics::is_interval(s.ci95) && lo <= hi;
        let usable =
            interval && (s.samples.len() >= MIN_CI_SAMPLES || (s.samples.is_empty() && lo < hi));
        Estimate {
            median: s.median,
            ci: usable.then_some(s.ci95),
        }
    }

    pub fn with_ci(median: f64, ci: [f64; 2], rounds: usize) -> Estimate {
        Estimate {
            median,
            ci: (rounds >= MIN_CI_SAMPLES && crate::statistics::is_interval(ci) && ci[0] <= ci[1])
                .then_some(ci),
        }
    }
}

/// The `exits` stat per op, if the kernel reported it.
pub(crate) fn exits_stat(r: &PhaseResult) -> Option<f64> {
    r.counts.get(EXITS_STAT).map(|e| e.per_op)
}

/// Count `name` of the row's `counts` per op with its CI.
pub(crate) fn stat_estimate(r: &PhaseResult, name: &str) -> Option<Estimate> {
    let e = r.counts.get(name)?;
    Some(Estimate::with_ci(e.per_op, e.ci95, e.rounds))
}

/// Exits per op with the CI of the per-round samples.
pub(crate) fn exits_estimate(r: &PhaseResult) -> Option<Estimate> {
    stat_estimate(r, EXITS_STAT)
}
