//! How long `irqbench reference` will run, said before it starts. The probe is bounded by
//! counts (rounds × blocks of iterations), not by a time budget as a run is, so its length is
//! the counts times this host's speed: a few short blocks of each variant, timed on a VM of
//! their own, give the speed. The estimate refuses what cannot work (a block past the
//! watchdog) and, as `irqbench run`, asks for `--yes` past an hour.

use std::time::{Duration, Instant};

use kvm_ioctls::Kvm;

use super::compare::{self, CompareError, Options, PINGS};
use super::guest::Body;
use super::probe::Probe;
use super::{ProbeOptions, ReferenceError};
use crate::measure::pacing::{self, PlanLength};

/// The counts of the two calibration blocks differ by at least this long a loop, so the
/// timer's and the host's noise is small in the per-iteration figure.
const CALIBRATION: Duration = Duration::from_millis(2);

/// The first count tried; doubled until the doubling adds [`CALIBRATION`].
const FIRST_COUNT: u32 = 64;

/// Blocks timed at each calibration count, the median kept.
const REPEATS: usize = 3;

/// A block estimated past this share of the watchdog is refused: noise would time it out.
const WATCHDOG_SHARE: f64 = 0.5;
/// The count suggested in place of a refused one fills this share of the allowed block time:
/// the estimate comes from a few short blocks and was off by up to ±50% on a busy host, so the
/// count at the limit itself was refused again on a second try.
const SUGGEST_SHARE: f64 = 0.5;

/// The PING dispatch of a round-trip round costs about as much as its raw `out` block (1.2×
/// on PVM) plus the session's loop; it is counted as 1.5 raw blocks.
const PING_PER_RAW: f64 = 1.5;

/// What one block of a variant takes at the count asked for.
#[derive(Clone, Copy, Debug)]
pub struct BlockTime {
    pub body: Body,
    pub iterations: u32,
    pub took: Duration,
}

/// The parts of the reference and what each is expected to take.
#[derive(Clone, Debug)]
pub struct Estimate {
    /// Kept rounds and the warm-up round of each slice.
    pub probe_rounds: u32,
    pub blocks: Vec<BlockTime>,
    pub probe: Duration,
    /// irqbench's run of the pair: its plan's budget.
    pub pair: PlanLength,
    pub trip_rounds: u32,
    pub trip: Duration,
    /// The watchdog of one block.
    pub block_timeout: Duration,
}

/// Times the variants on a VM of their own (not the probe's, whose time is what it reports).
pub fn estimate(kvm: &Kvm, options: &Options) -> Result<Estimate, CompareError> {
    let p = &options.probe;
    let pair = PlanLength::of(&compare::pair_plan()?);
    let mut probe = Probe::boot(kvm, p.stop.clone())?;
    let timed = (|| {
        let mut blocks = Vec::new();
        for body in p.bodies() {
            blocks.push(block_time(&mut probe, body, p.iterations_of(body), p)?);
        }
        let raw = match options.trip_rounds {
            0 => Duration::ZERO,
            _ => block_time(&mut probe, Body::PortOut, PINGS, p)?.took,
        };
        Ok::<_, ReferenceError>((blocks, raw))
    })();
    probe.finish();
    let (blocks, raw) = timed?;
    let per_round: Duration = blocks.iter().map(|b| b.took).sum();
    // Each slice of the probe warms up with a round of its own.
    let probe_rounds = p
        .rounds
        .saturating_add(compare::slices_for(p.rounds, options.slices));
    let trip_rounds = match options.trip_rounds {
        0 => 0,
        n => n.saturating_add(1),
    };
    Ok(Estimate {
        probe_rounds,
        blocks,
        probe: per_round.saturating_mul(probe_rounds),
        pair,
        trip_rounds,
        trip: raw.mul_f64((1.0 + PING_PER_RAW) * f64::from(trip_rounds)),
        block_timeout: p.block_timeout,
    })
}

/// One block of `n` iterations of `body`: timed at `n`, or fitted as fixed cost plus a cost
/// per iteration from two counts whose times differ by at least [`CALIBRATION`] (a block's
/// fixed cost, its two exits, is milliseconds on an emulating host: scaling one block's time
/// by the count would charge it once per iteration).
fn block_time(
    probe: &mut Probe,
    body: Body,
    n: u32,
    options: &ProbeOptions,
) -> Result<BlockTime, ReferenceError> {
    let mut count = n.min(FIRST_COUNT);
    let mut previous: Option<(u32, Duration)> = None;
    loop {
        let took = typical(probe, body, count, options)?;
        let fitted = match previous {
            _ if count == n => Some(took),
            Some((c0, t0)) if took.saturating_sub(t0) >= CALIBRATION => {
                let per = took.saturating_sub(t0).as_secs_f64() / f64::from(count - c0);
                Some(took + Duration::from_secs_f64(per * f64::from(n - count)))
            }
            _ => None,
        };
        if let Some(took) = fitted {
            return Ok(BlockTime {
                body,
                iterations: n,
                took,
            });
        }
        previous = Some((count, took));
        count = count.saturating_mul(2).min(n);
    }
}

/// The median of [`REPEATS`] blocks: one the host preempted (milliseconds on a shared
/// machine) does not stand for every block of the run, and the usual noise, which the run's
/// blocks have too, is kept.
fn typical(
    probe: &mut Probe,
    body: Body,
    count: u32,
    options: &ProbeOptions,
) -> Result<Duration, ReferenceError> {
    let mut took = [Duration::ZERO; REPEATS];
    for t in &mut took {
        options.stopped()?;
        let started = Instant::now();
        probe.block(body, count, options.block_timeout)?;
        *t = started.elapsed();
    }
    took.sort_unstable();
    Ok(took[REPEATS / 2])
}

impl Estimate {
    pub fn total(&self) -> Duration {
        self.probe + Duration::from_secs_f64(self.pair.budget_seconds) + self.trip
    }

    /// Whether the reference runs for more than an hour (`irqbench run`'s threshold).
    pub fn needs_confirmation(&self) -> bool {
        self.total().as_secs_f64() > pacing::CONFIRM_ABOVE_SECONDS
    }

    /// The slowest block, if it would take more than [`WATCHDOG_SHARE`] of the watchdog: with
    /// the largest count that stays within it.
    pub fn block_too_long(&self) -> Option<(BlockTime, u64)> {
        let limit = self.block_timeout.mul_f64(WATCHDOG_SHARE);
        let slowest = self.blocks.iter().max_by_key(|b| b.took)?;
        if slowest.took <= limit {
            return None;
        }
        let per = slowest.took.as_secs_f64() / f64::from(slowest.iterations.max(1));
        Some((*slowest, (limit.as_secs_f64() * SUGGEST_SHARE / per) as u64))
    }
}

impl std::fmt::Display for Estimate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = |d: Duration| pacing::human_seconds(d.as_secs_f64());
        write!(
            f,
            "about {} (the probe {} rounds × {} blocks, {}; irqbench's pair {}; ",
            secs(self.total()),
            self.probe_rounds,
            self.blocks.len(),
            secs(self.probe),
            pacing::human_seconds(self.pair.budget_seconds),
        )?;
        match self.trip_rounds {
            0 => write!(f, "no round trip)"),
            n => write!(f, "the round trip {n} rounds, {})", secs(self.trip)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimate(block: Duration, rounds: u32) -> Estimate {
        Estimate {
            probe_rounds: rounds + 1,
            blocks: vec![
                BlockTime {
                    body: Body::Empty,
                    iterations: 1000,
                    took: block / 4,
                },
                BlockTime {
                    body: Body::Popf,
                    iterations: 1000,
                    took: block,
                },
            ],
            probe: (block + block / 4) * (rounds + 1),
            pair: PlanLength {
                groups: 1,
                budget_seconds: 4.0,
                cap_seconds: 8.0,
            },
            trip_rounds: 0,
            trip: Duration::ZERO,
            block_timeout: Duration::from_secs(10),
        }
    }

    #[test]
    fn an_hour_of_rounds_asks_for_confirmation_and_a_minute_does_not() {
        let ms = Duration::from_millis;
        let short = estimate(ms(8), 1000);
        assert!(!short.needs_confirmation(), "{short}");
        assert!(short
            .to_string()
            .starts_with("about 14 s (the probe 1001 rounds × 2 blocks, 10 s;"));
        let long = estimate(ms(8), 1_000_000);
        assert!(long.needs_confirmation(), "{long}");
        assert!(long.to_string().starts_with("about 2.8 h"), "{long}");
        assert!(long.block_too_long().is_none());
    }

    #[test]
    fn a_block_past_half_the_watchdog_is_too_long_and_says_what_fits() {
        let e = estimate(Duration::from_secs(20), 6);
        let (slowest, fits) = e.block_too_long().expect("refused");
        assert_eq!(slowest.body, Body::Popf);
        // 20 s for 1000 iterations; 5 s fit, and half of that is suggested.
        assert_eq!(fits, 125);
        assert!(estimate(Duration::from_secs(5), 6)
            .block_too_long()
            .is_none());
    }
}
