//! How many rounds each dispatch of a group runs, and when the group's rounds end.
//!
//! A dispatch runs about [`DISPATCH_TARGET`] of rounds, sized from the time the previous
//! dispatch really took per round (the calibration's estimate is the fastest of three short
//! blocks, which an interrupt load or a busy host can make many times too small), and never
//! more than fit in what is left of the budget: a group ends within about one round of
//! `run.max_seconds`. `run.min_rounds` is a floor the budget cannot cut; only the hard cap of
//! [`CAP_FACTOR`] × `max_seconds` ends a group short of it, and the rows say so.

use std::time::Duration;

use crate::results::warning::{Warning, WarningKind};

/// A dispatch (many rounds) should last about this long: long enough that the dispatch's fixed
/// cost (~0.15 ms) is small, short enough to check precision and Ctrl-C often.
pub const DISPATCH_TARGET: Duration = Duration::from_millis(100);
/// Until this many rounds, each dispatch runs at most [`EARLY_STEP`] rounds and is followed by a
/// precision check: a quiet group ends within three rounds of the fewest that meet its
/// precision (six is the fewest whose median has a 95% CI at all), and a first dispatch sized
/// by a calibration that underestimated the rounds many times over still ends within a round
/// of `run.min_rounds`' lower bound (3).
const EARLY_ROUNDS: u32 = 18;
const EARLY_STEP: u32 = 3;
/// A dispatch runs at most this many times the rounds of the one before (the host can slow
/// down between two dispatches as well).
const GROWTH: u32 = 4;
/// The most rounds one dispatch runs.
const MAX_PER_DISPATCH: u32 = 500;
/// Until `min_rounds` are reached a group may run this many times its budget.
pub const CAP_FACTOR: u32 = 10;

/// Why a group's rounds ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// `max_seconds` ran out with `min_rounds` reached.
    Budget,
    /// [`CAP_FACTOR`] × `max_seconds` ran out before `min_rounds`.
    Cap,
}

/// The pacing of one group's rounds; times are since the group started.
#[derive(Clone, Debug)]
pub struct Pacer {
    budget: Duration,
    cap: Duration,
    min_rounds: u32,
    /// Time per round: the calibration's estimate, then what the last dispatch took.
    round: Duration,
    /// Rounds of the last dispatch (0: none yet).
    last: u32,
}

impl Pacer {
    pub fn new(max_seconds: f64, min_rounds: u32, estimate: Duration) -> Pacer {
        let budget = Duration::try_from_secs_f64(max_seconds).unwrap_or(Duration::MAX);
        Pacer {
            budget,
            cap: budget.saturating_mul(CAP_FACTOR),
            min_rounds,
            round: estimate.max(Duration::from_micros(1)),
            last: 0,
        }
    }

    /// The estimated time of one round.
    pub fn round(&self) -> Duration {
        self.round
    }

    /// Rounds the next dispatch runs, after `done` rounds at `elapsed`: about a dispatch's
    /// worth, no more than fit in what is left (of the budget, or of the cap while short of
    /// `min_rounds`), at least one.
    pub fn next_rounds(&self, elapsed: Duration, done: u32) -> u32 {
        let deadline = if done < self.min_rounds {
            self.cap
        } else {
            self.budget
        };
        let left = deadline.saturating_sub(elapsed).min(DISPATCH_TARGET);
        let by_time = (left.as_secs_f64() / self.round.as_secs_f64()) as u32;
        let by_growth = if done < EARLY_ROUNDS {
            EARLY_STEP
        } else {
            self.last.saturating_mul(GROWTH)
        };
        by_time.min(by_growth).clamp(1, MAX_PER_DISPATCH)
    }

    /// A dispatch of `rounds` took `took`: the estimate for the next one.
    pub fn observe(&mut self, rounds: u32, took: Duration) {
        self.last = rounds;
        if rounds > 0 {
            self.round = (took / rounds).max(Duration::from_micros(1));
        }
    }

    /// Whether the rounds are over after `done` rounds at `elapsed`, and why.
    pub fn end(&self, elapsed: Duration, done: u32) -> Option<End> {
        if done < self.min_rounds {
            return (elapsed >= self.cap || self.cap_too_near(elapsed)).then_some(End::Cap);
        }
        (elapsed >= self.budget || self.next_ends_late(elapsed)).then_some(End::Budget)
    }

    /// Less than half a round left: one more would end further past the budget than short of
    /// it.
    fn next_ends_late(&self, elapsed: Duration) -> bool {
        self.budget.saturating_sub(elapsed) < self.round / 2
    }

    fn cap_too_near(&self, elapsed: Duration) -> bool {
        self.cap.saturating_sub(elapsed) < self.round / 2
    }

    /// The warning for rows that ended at the cap with `done` of `min_rounds`.
    pub fn cap_warning(&self, group: &str, done: u32) -> Warning {
        let figures = format!(
            "{done} of run.min_rounds = {} rounds: one round took about {:.1} ms, so \
             {CAP_FACTOR} × run.max_seconds ({:.1} s), the most a group may run to reach \
             min_rounds, ran out first; its rows are marked min_rounds_missed (lower min_rounds \
             or block_us, or raise max_seconds)",
            self.min_rounds,
            self.round.as_secs_f64() * 1000.0,
            self.cap.as_secs_f64()
        );
        Warning::about(WarningKind::RoundsCapped, group, figures)
    }
}

/// A plan longer than this, by its budgets, runs only when confirmed (`--yes`).
pub const CONFIRM_ABOVE_SECONDS: f64 = 3600.0;

/// What a plan may take, known before anything boots.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlanLength {
    pub groups: usize,
    /// The groups' budgets together (boot, validation and writing are extra, under a second
    /// each).
    pub budget_seconds: f64,
    /// What the groups may take when every one needs the `min_rounds` cap.
    pub cap_seconds: f64,
}

impl PlanLength {
    pub fn of(plan: &crate::config::plan::Plan) -> PlanLength {
        let groups = super::groups(&plan.phases).len();
        let budget_seconds = groups as f64 * plan.max_seconds;
        PlanLength {
            groups,
            budget_seconds,
            cap_seconds: budget_seconds * f64::from(CAP_FACTOR),
        }
    }

    /// Whether the plan runs for more than an hour by its budgets.
    pub fn needs_confirmation(&self) -> bool {
        self.budget_seconds > CONFIRM_ABOVE_SECONDS
    }
}

impl std::fmt::Display for PlanLength {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({} group{} × run.max_seconds; up to {} if every group needs the min_rounds cap)",
            human_seconds(self.budget_seconds),
            self.groups,
            if self.groups == 1 { "" } else { "s" },
            human_seconds(self.cap_seconds)
        )
    }
}

/// `3`, `90` and `200_000` s as `3 s`, `1.5 min`, `2.3 days`.
pub fn human_seconds(s: f64) -> String {
    let (value, unit) = match s {
        s if s < 60.0 => (s, "s"),
        s if s < 3600.0 => (s / 60.0, "min"),
        s if s < 86_400.0 => (s / 3600.0, "h"),
        s => (s / 86_400.0, "days"),
    };
    let digits = if value < 10.0 && value.fract() != 0.0 {
        1
    } else {
        0
    };
    format!("{value:.digits$} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a group on a simulated clock: every round really takes `real`, the calibration
    /// said `estimate`. Returns (rounds, simulated time, why it ended).
    fn simulate(
        max_seconds: f64,
        min_rounds: u32,
        estimate: Duration,
        real: Duration,
    ) -> (u32, Duration, End) {
        let mut pacer = Pacer::new(max_seconds, min_rounds, estimate);
        let (mut done, mut now) = (0u32, Duration::ZERO);
        loop {
            if let Some(end) = pacer.end(now, done) {
                return (done, now, end);
            }
            let n = pacer.next_rounds(now, done);
            now += real * n;
            done += n;
            pacer.observe(n, real * n);
        }
    }

    /// min_rounds = 500 with max_seconds = 0.1: every group runs its 500 rounds when they fit
    /// in the cap, and ends at the cap, marked, when they do not (2000 rounds gave 110).
    #[test]
    fn min_rounds_is_a_floor_that_only_the_cap_can_cut() {
        let ms = Duration::from_millis;
        let (rounds, _, end) = simulate(0.1, 500, ms(1), ms(1));
        assert!(rounds >= 500, "{rounds} rounds");
        assert_eq!(end, End::Budget);
        // 2000 rounds of 1 ms need 2 s: the cap (1 s) ends them, about 1000 in.
        let (rounds, took, end) = simulate(0.1, 2000, ms(1), ms(1));
        assert_eq!(end, End::Cap);
        assert!((990..2000).contains(&rounds), "{rounds} rounds");
        assert!(took <= ms(1001), "{took:?}");
        // 10 ms rounds: 500 need 5 s, the cap is 1 s.
        let (rounds, took, end) = simulate(0.1, 500, ms(10), ms(10));
        assert_eq!(end, End::Cap);
        assert!(
            rounds < 500 && took <= ms(1000) + ms(10),
            "{rounds} in {took:?}"
        );
    }

    /// Rounds 20 times slower than calibrated (a 1 MHz inject load) still end within one
    /// round of the budget, and so do rounds longer than a whole dispatch.
    #[test]
    fn the_budget_holds_when_the_calibration_underestimates_rounds() {
        let us = Duration::from_micros;
        for (estimate, real) in [
            (us(50), us(1_000)),
            (us(50), us(50)),
            (us(10), us(300_000)),
            (us(1_000), us(20)),
        ] {
            for max_seconds in [0.1, 1.0, 20.0] {
                let (rounds, took, end) = simulate(max_seconds, 3, estimate, real);
                let budget = Duration::from_secs_f64(max_seconds);
                assert_eq!(end, End::Budget);
                assert!(rounds >= 3);
                let late = took.saturating_sub(budget.max(real * 3));
                assert!(
                    late <= real,
                    "{max_seconds} s, {estimate:?} estimated, {real:?} real: {took:?}"
                );
            }
        }
    }

    /// 10 000 groups of an hour each: 417 days by the budgets, refused without --yes; the
    /// shipped soak config (2 groups of 300 s) runs without.
    #[test]
    fn a_plan_is_sized_by_its_groups_budgets_before_it_runs() {
        use crate::config::plan::{IrqSource, Plan, Workload};
        let mut plan = Plan::single(Workload::Doorbells, 1, 1);
        let row = plan.phases[0].clone();
        plan.phases = (0..10_000)
            .map(|i| crate::config::plan::PhasePlan {
                name: format!("r{i}"),
                group: crate::config::plan::GroupKey {
                    bench: format!("g{i}"),
                    ..row.group.clone()
                },
                workload: Workload::Strategy {
                    strategy: crate::config::plan::StrategyId(1),
                },
                irq: IrqSource::None,
                ..row.clone()
            })
            .collect();
        plan.max_seconds = 3600.0;
        let len = PlanLength::of(&plan);
        assert_eq!(len.groups, 10_000);
        assert!(len.needs_confirmation());
        assert_eq!(human_seconds(len.budget_seconds), "417 days");
        plan.phases.truncate(2);
        plan.max_seconds = 300.0;
        let len = PlanLength::of(&plan);
        assert!(!len.needs_confirmation());
        assert!(len.to_string().starts_with("10 min (2 groups"), "{len}");
        assert_eq!(human_seconds(3.0), "3 s");
        assert_eq!(human_seconds(90.0), "1.5 min");
    }

    #[test]
    fn a_dispatch_is_sized_by_what_the_last_one_took() {
        let ms = Duration::from_millis;
        let mut pacer = Pacer::new(8.0, 20, Duration::from_micros(100));
        // The first on the estimate, and the next few: a few rounds each.
        assert_eq!(pacer.next_rounds(Duration::ZERO, 0), EARLY_STEP);
        pacer.observe(EARLY_STEP, ms(6));
        assert_eq!(pacer.round(), ms(2));
        assert_eq!(pacer.next_rounds(ms(6), 3), EARLY_STEP);
        assert_eq!(pacer.next_rounds(ms(6), EARLY_ROUNDS - 1), EARLY_STEP);
        // Then growing by at most GROWTH, up to the target's worth of measured rounds.
        assert_eq!(pacer.next_rounds(ms(36), EARLY_ROUNDS), EARLY_STEP * GROWTH);
        pacer.observe(EARLY_STEP * GROWTH, ms(24));
        assert_eq!(pacer.next_rounds(ms(60), 30), 48);
        pacer.observe(48, ms(96));
        assert_eq!(pacer.next_rounds(ms(156), 78), 50);
        pacer.observe(50, ms(100));
        // Near the end of the budget, only what fits.
        assert_eq!(pacer.next_rounds(ms(7_990), 4_000), 5);
    }
}
