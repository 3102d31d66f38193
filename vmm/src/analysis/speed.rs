//! Whether the host changed speed while a group ran.
//!
//! On a shared or nested host the whole machine can run faster or slower for seconds at a time
//! (seen here: a PVM host whose emulated guest kernel code stepped between two speeds 20–30%
//! apart, with or without a competing load). Every block of a round then moves together, so the
//! paired ratios and `cycles_per_loop` barely move; a row's median cycles, though, is the median
//! of a mixture of speeds, and where the mixture falls between the two its CI widens and the
//! next run's median lands elsewhere. The group's `empty` baseline shows it best: its cost is
//! the loop alone, the same in every round but for the host. The group's undisturbed baseline
//! blocks, in round order, are cut into stretches (20 of them, or of [`MAX_STRETCH`] rounds each
//! in a group of more than 2000); when the fastest and the slowest stretch's medians are more
//! than [`STEP`] apart and their CIs do not overlap (95% for the family of every pair of
//! stretches), the host stepped.
//! Only groups without an interrupt load are judged: under one the baseline also holds the
//! interrupts its blocks took, and a timer's period beating against the rounds' moves that in
//! stretches as well.

use super::estimators::RoundTable;
use crate::results::warning::{Warning, WarningKind};
use crate::statistics::{median_ci_ranks, percentile, sorted_finite};

/// Stretches smaller than this many rounds say too little.
const MIN_STRETCH: usize = 25;
/// A group is cut into this many stretches while they are no longer than [`MAX_STRETCH`].
const MAX_STRETCHES: usize = 20;
/// Stretches longer than this many rounds (0.2–0.4 s of a strategy group) would mix speeds that
/// last a few seconds: a stretch that spans both has a CI that spans both, and a long group
/// (5000 rounds: stretches of 250) never showed the steps its first 1000 rounds did.
const MAX_STRETCH: usize = 100;
/// Fewer stretches than this cannot show a step from a drift.
const MIN_STRETCHES: usize = 4;
/// A spread between stretch medians below this is not reported, however sure.
const STEP: f64 = 0.05;

/// The host's speed steps seen in one group's baseline.
#[derive(Clone, Debug, PartialEq)]
pub struct SpeedSteps {
    /// Median baseline cycles/op of the fastest and the slowest stretch.
    pub fastest: f64,
    pub slowest: f64,
    /// Stretches and rounds in each.
    pub stretches: usize,
    pub stretch_rounds: usize,
}

impl SpeedSteps {
    /// (slowest − fastest) / fastest.
    pub fn spread(&self) -> f64 {
        (self.slowest - self.fastest) / self.fastest.max(f64::MIN_POSITIVE)
    }
}

/// The steps in `table`'s baseline (variant 0), or `None` when it held its speed or has too few
/// rounds to tell.
pub fn steps(table: &RoundTable) -> Option<SpeedSteps> {
    let series: Vec<f64> = table
        .rounds
        .iter()
        .filter_map(|round| {
            let e = round.first()?.as_ref()?;
            (!e.disturbed && e.ops > 0).then(|| e.cycles_mean / e.ops as f64)
        })
        .collect();
    let stretch = (series.len() / MAX_STRETCHES).clamp(MIN_STRETCH, MAX_STRETCH);
    let stretches = series.len() / stretch;
    if stretches < MIN_STRETCHES {
        return None;
    }
    // The fastest and the slowest of `stretches` are compared, not two chosen beforehand: on
    // steady but noisy rounds the extremes of 20 stretches lie apart by far more than two
    // stretches' 95% CIs (at a 10% per-round spread, 1 in 6 steady groups of 1000 rounds was
    // "stepping"). Each CI is widened for every pair it could have been (Bonferroni), so that
    // a steady group is warned about in at most 5% of runs.
    let pairs = (stretches * (stretches - 1) / 2) as f64;
    let confidence = 1.0 - 0.05 / pairs;
    // (median, CI) of each whole stretch.
    let summaries: Vec<(f64, [f64; 2])> = series
        .chunks_exact(stretch)
        .filter_map(|chunk| {
            let sorted = sorted_finite(chunk);
            let (lo, hi) = median_ci_ranks(sorted.len(), confidence)?;
            Some((percentile(&sorted, 50.0), [sorted[lo], sorted[hi]]))
        })
        .collect();
    let by_median = |a: &&(f64, [f64; 2]), b: &&(f64, [f64; 2])| a.0.total_cmp(&b.0);
    let fast = summaries.iter().min_by(by_median)?;
    let slow = summaries.iter().max_by(by_median)?;
    let found = SpeedSteps {
        fastest: fast.0,
        slowest: slow.0,
        stretches: summaries.len(),
        stretch_rounds: stretch,
    };
    (found.spread() > STEP && fast.1[1] < slow.1[0]).then_some(found)
}

/// The warning for `group`'s steps.
pub fn warning(group: &str, s: &SpeedSteps) -> Warning {
    let figures = format!(
        "the host changed speed while it ran: its empty loop's cost stepped between \
         {:.0} and {:.0} cycles/op (+{:.0}%) across {} stretches of {} rounds, so its rows' \
         medians mix the host's speeds and may move between runs by more than their CIs; the \
         paired ratios and cycles_per_loop (`check --normalised`) move far less",
        s.fastest,
        s.slowest,
        s.spread() * 100.0,
        s.stretches,
        s.stretch_rounds
    );
    Warning::about(WarningKind::SpeedSteps, group, figures)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::estimators::Cell;

    /// A table of one-variant rounds whose baseline costs `cost(r)` cycles/op in round `r`,
    /// with a small alternating jitter.
    fn table(rounds: usize, mut cost: impl FnMut(usize) -> f64) -> RoundTable {
        let mut t = RoundTable::new(1);
        for r in 0..rounds {
            let per_op = cost(r) * (1.0 + 0.01 * ((r % 7) as f64 - 3.0) / 3.0);
            t.rounds.push(vec![Some(Cell {
                cycles_mean: per_op * 100.0,
                cycles_max: per_op * 100.0,
                ops: 100,
                vcpus: 1,
                ..Default::default()
            })]);
        }
        t
    }

    #[test]
    fn a_host_that_steps_between_two_speeds_is_seen_and_a_steady_one_is_not() {
        // Stretches of 150 rounds alternating between 16.8k and 21.4k, as dumped on this host.
        let stepping = table(1000, |r| {
            if (r / 150) % 2 == 0 {
                16_800.0
            } else {
                21_400.0
            }
        });
        let s = steps(&stepping).expect("the steps are seen");
        assert!(
            (s.spread() - (21_400.0 / 16_800.0 - 1.0)).abs() < 0.03,
            "{s:?}"
        );
        let text = warning("g", &s).to_string();
        assert!(text.starts_with("g: the host changed speed"), "{text}");
        // The same jitter at one speed, and a step under 5%: nothing.
        assert_eq!(steps(&table(1000, |_| 16_800.0)), None);
        assert_eq!(
            steps(&table(1000, |r| if r < 500 { 16_800.0 } else { 17_300.0 })),
            None
        );
        // The same host over a long group: its stretches stay shorter than the host's.
        let long = table(5000, |r| {
            if (r / 150) % 2 == 0 {
                16_800.0
            } else {
                21_400.0
            }
        });
        assert!(steps(&long).is_some(), "a long group's steps are seen");
        // Too few rounds to tell.
        assert_eq!(steps(&table(99, |r| if r < 50 { 1.0 } else { 2.0 })), None);
    }

    /// Disturbed baseline blocks are left out: a burst of preempted rounds is not a speed.
    #[test]
    fn disturbed_blocks_are_no_speed() {
        let mut t = table(400, |_| 10_000.0);
        for round in t.rounds.iter_mut().skip(100).take(100) {
            let cell = round[0].as_mut().expect("a cell");
            cell.cycles_mean *= 2.0;
            cell.disturbed = true;
        }
        assert_eq!(steps(&t), None);
    }

    /// Steady rounds with a 10% per-round spread (a busy or emulating host): the fastest and
    /// the slowest of 20 stretches lie apart by far more than two 95% CIs would allow, and
    /// were warned about in 33 of 200 such groups of 1000 rounds; at most 5% may be, in a
    /// short group and in a long one (more, shorter stretches).
    #[test]
    fn a_steady_but_noisy_baseline_is_not_a_speed_step() {
        for (rounds, groups) in [(1000, 200u64), (10_000, 40)] {
            let mut warned = 0;
            for seed in 0..groups {
                let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut uniform = || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x >> 11) as f64 / (1u64 << 53) as f64
                };
                // A sum of four uniforms: close to normal, with a standard deviation of 1.
                let t = table(rounds, |_| {
                    let z = (uniform() + uniform() + uniform() + uniform() - 2.0)
                        / (1.0f64 / 3.0).sqrt();
                    10_000.0 * (1.0 + 0.1 * z)
                });
                warned += usize::from(steps(&t).is_some());
            }
            assert!(
                warned as u64 <= groups / 20,
                "{warned} of {groups} steady groups of {rounds} rounds warned about"
            );
        }
    }
}
