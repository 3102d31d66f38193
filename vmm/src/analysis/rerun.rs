//! Where a rerun's figure lands: the interval a run claims for the next run of the same config
//! on the same host, learnt from the spread of earlier runs' figures (the history's).
//!
//! A run's own CI holds what varied inside it (rounds, or VMs with `run.replicates`). The host
//! also has states that outlast a run and hold for all its VMs alike, so only runs apart in
//! time sample them (variance at the run level, Kalibera & Jones 2013). The rerun interval is
//! the figure ± t(n−1) × √2 × s: s the sd of n earlier runs' figures (never below this run's
//! own standard error), √2 as the next run's figure varies as much as this one's.

use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::statistics::{self, Ci};

/// The method of every rerun interval, as the report names it.
pub const RERUN_METHOD: &str = "95% rerun interval: the figure ± t(n−1) × √2 × s, s the sd of \
     the same figure in the n latest earlier runs of this config on this host (at least this \
     run's own standard error: its CI half-width / 1.96, or / t(K−1) with K replicates): where the next run's figure lands 95% \
     of the time if the host varies as it did over those runs";

/// Fewer earlier runs give no rerun interval: an sd of two figures says too little.
pub const MIN_EARLIER_RUNS: usize = 3;

/// The latest earlier runs the spread is learnt from: older ones may be another host state.
pub const EARLIER_RUNS_WINDOW: usize = 10;

/// The standard error behind a 95% CI: its half-width over the quantile it was built with,
/// 1.96 for one VM's rounds, t(K−1) for the combination of K replicates (whose t quantile
/// already pays for their few degrees of freedom, which the rerun interval's t pays again).
pub fn standard_error(ci95: Option<Ci>, replicates: usize) -> f64 {
    let quantile = if replicates >= 2 {
        StudentsT::new(0.0, 1.0, (replicates - 1) as f64).map_or(f64::NAN, |t| t.inverse_cdf(0.975))
    } else {
        1.96
    };
    ci95.map_or(0.0, |ci| (ci.hi - ci.lo).abs() / (2.0 * quantile))
}

/// The 95% rerun interval of `estimate` (whose own standard error is `own_se`,
/// [`standard_error`]) from the same figure in earlier runs; `None` with fewer than
/// [`MIN_EARLIER_RUNS`] finite earlier figures or no finite estimate.
pub fn rerun_interval(estimate: f64, own_se: f64, earlier: &[f64]) -> Option<Ci> {
    let earlier: Vec<f64> = earlier.iter().copied().filter(|e| e.is_finite()).collect();
    if !estimate.is_finite() || earlier.len() < MIN_EARLIER_RUNS {
        return None;
    }
    let (_, sd) = statistics::mean_sd(&earlier)?;
    let own_se = if own_se.is_finite() { own_se } else { 0.0 };
    let t = StudentsT::new(0.0, 1.0, (earlier.len() - 1) as f64).ok()?;
    let half = t.inverse_cdf(0.975) * std::f64::consts::SQRT_2 * sd.max(own_se);
    Some(Ci {
        lo: estimate - half,
        hi: estimate + half,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqbench_abi::SplitMix64 as Rng;

    fn normal(rng: &mut Rng) -> f64 {
        let u = 1.0 - rng.unit();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * rng.unit()).cos()
    }

    /// Runs whose level moves by `between` (sd, a state shared by all of a run) under a within-run
    /// CI of `within` (sd of the estimate): per seed, a history of 10 runs, then this run and the
    /// next. Counts the seeds in which this run's interval covers the next run's figure.
    fn rerun_coverage(between: f64, within: f64) -> (usize, usize) {
        let mut rng = Rng(39);
        let (mut rerun, mut own) = (0, 0);
        for _ in 0..100 {
            let mut run = || 1.0 + between * normal(&mut rng) + within * normal(&mut rng);
            let earlier: Vec<f64> = (0..EARLIER_RUNS_WINDOW).map(|_| run()).collect();
            let (this, next) = (run(), run());
            let own_ci = Ci::from([this - 1.96 * within, this + 1.96 * within]);
            let own_se = standard_error(Some(own_ci), 1);
            let ci = rerun_interval(this, own_se, &earlier).expect("an interval");
            rerun += usize::from(!ci.excludes(next));
            own += usize::from(!own_ci.excludes(next));
        }
        (rerun, own)
    }

    /// A host state that outlasts a run (1% sd) under a run's own CI of ±0.2%: the run's own CI
    /// covers the next run's figure in few seeds, the rerun interval in at least 93 of 100.
    #[test]
    fn a_state_between_runs_is_covered_only_by_the_rerun_interval() {
        let (rerun, own) = rerun_coverage(0.01, 0.001);
        assert!(rerun >= 93, "rerun interval covered {rerun} of 100");
        assert!(own < 50, "own CI covered {own} of 100");
    }

    /// A host that holds still between runs: the rerun interval still covers.
    #[test]
    fn without_a_move_between_runs_the_rerun_interval_still_covers() {
        let (rerun, _) = rerun_coverage(0.0, 0.003);
        assert!(rerun >= 93, "rerun interval covered {rerun} of 100");
    }

    #[test]
    fn too_few_earlier_runs_give_no_interval_and_the_own_noise_is_a_floor() {
        assert_eq!(rerun_interval(1.0, 0.0, &[1.0, 1.1]), None);
        assert_eq!(rerun_interval(f64::NAN, 0.0, &[1.0, 1.1, 1.2]), None);
        // Three earlier runs that agree exactly: the run's own noise sets the width.
        let se = standard_error(Some(Ci::from([0.98, 1.02])), 1);
        let ci = rerun_interval(1.0, se, &[1.0, 1.0, 1.0]).expect("interval");
        let half = 4.303 * std::f64::consts::SQRT_2 * (0.02 / 1.96);
        assert!((ci.hi - 1.0 - half).abs() < 1e-3, "{ci:?}");
        // Three replicates' CI was built with t(2): its standard error is half-width / 4.303.
        assert!((standard_error(Some(Ci::from([0.9, 1.1])), 3) - 0.1 / 4.303).abs() < 1e-4);
        assert_eq!(standard_error(None, 3), 0.0);
        // sd 0.1 of three runs: ± t(2) × √2 × 0.1.
        let ci = rerun_interval(1.0, 0.0, &[0.9, 1.0, 1.1]).expect("interval");
        assert!(
            (ci.hi - 1.0 - 4.303 * std::f64::consts::SQRT_2 * 0.1).abs() < 1e-3,
            "{ci:?}"
        );
    }
}
