//! From blocks to figures. Every figure is paired inside a round: a round ran every variant of
//! its group once, within a few milliseconds, so the host's slow drift (about 10% over seconds
//! on the hosts we build on) is common to the blocks of one round and cancels in
//! `block(v) − block(empty)` or `block(b) / block(a)`. A figure is the median of those per-round
//! values with a distribution-free 95% CI ([`crate::statistics::median_ci95`]); disturbed rounds of a
//! variant (its block or the baseline's) are left out.

use std::collections::BTreeMap;

use super::counts::RoundCount;
use crate::results::{Ci, Estimate, Summary};
use crate::statistics;

/// The guest's own counters over a block, summed over vCPUs: the abi's one counts record.
pub use irqbench_abi::Counts as GuestCounts;

/// One variant's block in one round, over all vCPUs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cell {
    /// TSC cycles of the block, mean over vCPUs.
    pub cycles_mean: f64,
    /// TSC cycles of the slowest vCPU's block (its wall time, for ops/s).
    pub cycles_max: f64,
    /// Operations per vCPU in the block.
    pub ops: u64,
    /// Loop iterations per vCPU in the block: what a baseline is scaled by (an `insn` probe's
    /// ops are its iterations × its unroll, the `empty` loop's × 8).
    pub loops: u64,
    pub vcpus: u32,
    /// Userspace exits over the block, summed over vCPUs.
    pub userspace_exits: u64,
    /// Hypercalls the VMM saw over the block, summed over vCPUs.
    pub hypercalls_seen: u64,
    pub guest: GuestCounts,
    /// Non-zero KVM stats over the block, summed over vCPUs, by index into
    /// [`RoundTable::stat_names`]; `None` without binary stats.
    pub stats: Option<BTreeMap<u16, u64>>,
    /// Userspace exits over the block by `ExitReason::index`, summed over vCPUs.
    pub reasons: [u64; crate::vcpu::ExitReason::COUNT],
    /// Any vCPU's block was disturbed.
    pub disturbed: bool,
    /// vCPU blocks the thread clocks flagged in a cell [`super::disturbance::disturbed`] kept.
    pub corrected: u32,
}

impl Cell {
    /// (block − the empty block) / ops: net TSC cycles per operation.
    fn net(&self, empty: &Cell) -> f64 {
        (self.cycles_mean - empty.cycles_mean) / self.ops.max(1) as f64
    }

    /// Stat `index` over the block (0 when it did not move); `None` without stats.
    #[cfg(test)]
    fn stat(&self, index: u16) -> Option<f64> {
        self.stat_count(index).map(|n| n as f64)
    }

    fn stat_count(&self, index: u16) -> Option<u64> {
        let stats = self.stats.as_ref()?;
        Some(stats.get(&index).copied().unwrap_or(0))
    }

    /// Operations over all vCPUs.
    fn total_ops(&self) -> u64 {
        self.ops * u64::from(self.vcpus.max(1))
    }

    /// Loop iterations over all vCPUs.
    fn total_loops(&self) -> u64 {
        self.loops * u64::from(self.vcpus.max(1))
    }

    /// Operations per second over all vCPUs, from the slowest vCPU's block.
    fn ops_per_sec(&self, tsc_hz: f64) -> f64 {
        (self.ops * u64::from(self.vcpus)) as f64 * tsc_hz / self.cycles_max
    }
}

/// `rounds[r][v]`: variant `v` (0 = the empty baseline) in round `r`.
#[derive(Clone, Debug, Default)]
pub struct RoundTable {
    pub variants: usize,
    /// Names of the KVM stats that [`Cell::stats`] indexes.
    pub stat_names: Vec<String>,
    pub rounds: Vec<Vec<Option<Cell>>>,
}

impl RoundTable {
    pub fn new(variants: usize) -> RoundTable {
        RoundTable {
            variants,
            stat_names: Vec::new(),
            rounds: Vec::new(),
        }
    }

    /// The rounds where neither `a` nor `b` was disturbed: their (a, b) cells.
    fn pairs(&self, a: usize, b: usize) -> impl Iterator<Item = (&Cell, &Cell)> + '_ {
        self.rounds.iter().filter_map(move |round| {
            let x = round.get(a)?.as_ref()?;
            let y = round.get(b)?.as_ref()?;
            (!x.disturbed && !y.disturbed).then_some((x, y))
        })
    }

    /// The rounds where neither the baseline, `a` nor `b` was disturbed: their cells.
    fn triples(&self, a: usize, b: usize) -> impl Iterator<Item = (&Cell, &Cell, &Cell)> + '_ {
        self.rounds.iter().filter_map(move |round| {
            let e = round.first()?.as_ref()?;
            let x = round.get(a)?.as_ref()?;
            let y = round.get(b)?.as_ref()?;
            (!e.disturbed && !x.disturbed && !y.disturbed).then_some((e, x, y))
        })
    }

    /// Per round: (block(v) − block(empty)) / ops(v): net TSC cycles per operation.
    pub fn net_cycles(&self, v: usize) -> Vec<f64> {
        self.pairs(0, v).map(|(e, x)| x.net(e)).collect()
    }

    /// Per round: block(v) / ops(v), nothing subtracted.
    pub fn raw_cycles(&self, v: usize) -> Vec<f64> {
        self.pairs(0, v)
            .map(|(_, x)| x.cycles_mean / x.ops.max(1) as f64)
            .collect()
    }

    /// Per round: block(empty) / ops(v): the loop overhead that was subtracted from `v`.
    pub fn baseline_cycles(&self, v: usize) -> Vec<f64> {
        self.pairs(0, v)
            .map(|(e, x)| e.cycles_mean / x.ops.max(1) as f64)
            .collect()
    }

    /// Per round: net(v) / (block(empty) / ops(v)): the row's cost in units of the group's own
    /// loop, measured in the same round, so a host that runs everything faster or slower
    /// leaves it where it was.
    pub fn normalised(&self, v: usize) -> Vec<f64> {
        self.pairs(0, v)
            .filter(|(e, _)| e.cycles_mean > 0.0)
            .map(|(e, x)| x.net(e) / (e.cycles_mean / x.ops.max(1) as f64))
            .collect()
    }

    /// Per round: (stat(v) − stat(empty)) / (ops(v) × vCPUs), for the KVM stat `name`; empty
    /// where the host has no such stat.
    #[cfg(test)]
    pub fn net_stat(&self, v: usize, name: &str) -> Vec<f64> {
        let Some(index) = self.stat_names.iter().position(|n| n == name) else {
            return Vec::new();
        };
        self.pairs(0, v)
            .filter_map(|(e, x)| {
                let ops = (x.ops.max(1) * u64::from(x.vcpus.max(1))) as f64;
                Some((x.stat(index as u16)? - e.stat(index as u16)?) / ops)
            })
            .collect()
    }

    /// Per kept round: the `events` of `v` and of the baseline with their loop iterations, and
    /// `v`'s operations (all vCPUs), for [`super::counts::estimate`]; rounds where either has
    /// no such count are left out.
    pub fn counts(&self, v: usize, events: impl Fn(&Cell) -> Option<u64>) -> Vec<RoundCount> {
        self.pairs(0, v)
            .filter_map(|(e, x)| {
                Some(RoundCount {
                    events: events(x)?,
                    ops: x.total_ops(),
                    loops: x.total_loops(),
                    baseline_events: events(e)?,
                    baseline_loops: e.total_loops(),
                })
            })
            .collect()
    }

    /// [`RoundTable::counts`] of the KVM stat `name`; empty where the host has no such stat.
    pub fn stat_counts(&self, v: usize, name: &str) -> Vec<RoundCount> {
        match self.stat_names.iter().position(|n| n == name) {
            Some(index) => self.counts(v, |c| c.stat_count(index as u16)),
            None => Vec::new(),
        }
    }

    /// Per round: userspace exits(v) / (ops(v) × vCPUs), nothing subtracted (the baseline's
    /// blocks take none unless an interrupt load lands in them, and those are the load's).
    #[cfg(test)]
    pub fn userspace_exits(&self, v: usize) -> Vec<f64> {
        self.pairs(0, v)
            .map(|(_, x)| {
                x.userspace_exits as f64 / (x.ops.max(1) * u64::from(x.vcpus.max(1))) as f64
            })
            .collect()
    }

    /// Per round: operations per second over all vCPUs, from the slowest vCPU's block.
    pub fn ops_per_sec(&self, v: usize, tsc_hz: f64) -> Vec<f64> {
        self.pairs(0, v)
            .filter(|(_, x)| x.cycles_max > 0.0)
            .map(|(_, x)| x.ops_per_sec(tsc_hz))
            .collect()
    }

    /// Rounds in which row `v` and the baseline both ran, and how many of those had either
    /// disturbed.
    pub fn blocks_disturbed(&self, v: usize) -> (usize, usize) {
        let mut seen = 0usize;
        let mut disturbed = 0usize;
        for round in &self.rounds {
            if let (Some(Some(e)), Some(Some(x))) = (round.first(), round.get(v)) {
                seen += 1;
                if e.disturbed || x.disturbed {
                    disturbed += 1;
                }
            }
        }
        (seen, disturbed)
    }

    /// Cleared vCPU blocks ([`Cell::corrected`]) of `v` and the baseline in the rounds where
    /// neither was disturbed.
    pub fn blocks_corrected(&self, v: usize) -> u64 {
        self.pairs(0, v)
            .map(|(e, x)| u64::from(e.corrected) + u64::from(x.corrected))
            .sum()
    }

    /// Fraction of the rounds in which `v` or the baseline was disturbed.
    pub fn disturbed_fraction(&self, v: usize) -> f64 {
        match self.blocks_disturbed(v) {
            (0, _) => 0.0,
            (seen, disturbed) => disturbed as f64 / seen as f64,
        }
    }

    /// Per round: metric(b) / metric(a) with the metric's per-round values; rounds where either
    /// (or the baseline) was disturbed are skipped.
    pub fn paired_ratios(&self, a: usize, b: usize, metric: Metric, tsc_hz: f64) -> Vec<f64> {
        self.triples(a, b)
            .filter_map(|(e, x, y)| {
                let r = match metric {
                    Metric::NetCycles => y.net(e) / x.net(e),
                    Metric::OpsPerSec => y.ops_per_sec(tsc_hz) / x.ops_per_sec(tsc_hz),
                };
                r.is_finite().then_some(r)
            })
            .collect()
    }

    /// Per round: net(a) − net(b), cycles per operation.
    pub fn paired_differences(&self, a: usize, b: usize) -> Vec<f64> {
        self.triples(a, b)
            .map(|(e, x, y)| x.net(e) - y.net(e))
            .collect()
    }
}

/// What a paired ratio compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    NetCycles,
    OpsPerSec,
}

/// Median and CI of per-round values; `None` without any.
pub fn interval(samples: &[f64]) -> Option<Estimate> {
    Summary::from_samples(samples).estimate()
}

/// The medians of `values` (per-round values in round order) cut into
/// [`statistics::batch_ranges`]; none when too few values for [`statistics::MIN_BATCHES`].
pub fn batch_medians(values: &[f64]) -> Vec<f64> {
    statistics::batch_ranges(values.len())
        .into_iter()
        .filter_map(|r| statistics::median(&values[r]))
        .collect()
}

/// A figure's median and CI from its per-round `values` in round order: the median of all of
/// them, with a CI that is the wider, on each side, of the distribution-free one (which takes
/// the rounds as independent) and a batch-means t interval (the batches' medians' mean ± t(B−1)
/// × sd / √B, around the median). Rounds close in time are not always independent: on a 2-CPU
/// PVM host, contiguous stretches of ~85 rounds (~0.25 s) had medians of their own, their spread
/// up to 1.6 times what shuffled rounds give (permutation test, p < 0.05 for 6 of 12 ratios to
/// native-popf), on one VM as much as on a fresh VM per stretch; the order-statistic CI then
/// promised more than the next run could repeat. With independent rounds the batch interval is
/// about as wide (t and the batching cost ~10% in the tests below), so the wider of the two only
/// widens where the rounds drift together. With too few rounds for [`statistics::MIN_BATCHES`]
/// batches the distribution-free CI stands alone. Returns the summary and the number of batches used.
pub fn batched(values: &[f64]) -> (Summary, usize) {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    let pooled = Summary::from_samples(values);
    let medians = batch_medians(values);
    let b = medians.len();
    let (Some((_, sd)), Ok(t), Some(ci)) = (
        statistics::mean_sd(&medians),
        StudentsT::new(0.0, 1.0, b.saturating_sub(1).max(1) as f64),
        pooled.ci95,
    ) else {
        return (pooled, 0);
    };
    let half = t.inverse_cdf(0.975) * sd / (b as f64).sqrt();
    let ci95 = Some(Ci {
        lo: ci.lo.min(pooled.median - half),
        hi: ci.hi.max(pooled.median + half),
    });
    (Summary { ci95, ..pooled }, b)
}

/// [`batched`] as an interval.
pub fn batched_interval(values: &[f64]) -> (Option<Estimate>, usize) {
    let (s, b) = batched(values);
    (s.estimate(), b)
}

/// Of the baseline's cycles per op, the fraction a net's CI half-width may always reach.
/// 2%: a net below 2% of the loop it is measured against (on PVM ~1.4 k of ~70 k cycles) is
/// "near zero"; above it, a row must reach its precision relative to itself.
pub const FLOOR_OF_BASELINE: f64 = 0.02;

/// Whether a row's CI is narrow enough: its half-width at most `precision` of |median|, or, for
/// nets near zero where a relative target could never be met, of [`FLOOR_OF_BASELINE`] of
/// `baseline` (the loop's own cycles per op: the scale of the noise every net is measured
/// against). A figure without a CI is never precise.
pub fn precise(summary: &Summary, baseline: f64, precision: f64) -> bool {
    let Some(half) = summary.estimate().and_then(|e| e.half_width()) else {
        return false;
    };
    half <= precision * summary.median.abs().max(FLOOR_OF_BASELINE * baseline.abs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statistics::{MAX_BATCHES, MIN_BATCH_VALUES};

    /// `batches` stretches of `n` rounds in round order: true value 1, a level per stretch of
    /// sd `between` (slow host drift), noise per round of sd `within` (Gaussian, Box–Muller on
    /// a seeded SplitMix64).
    fn drifting(
        batches: usize,
        n: usize,
        between: f64,
        within: f64,
        rng: &mut irqbench_abi::SplitMix64,
    ) -> Vec<f64> {
        let mut normal = || {
            let u = 1.0 - rng.unit();
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * rng.unit()).cos()
        };
        (0..batches)
            .flat_map(|_| {
                let level = 1.0 + between * normal();
                (0..n)
                    .map(|_| level + within * normal())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Coverage of the true value (1) and the median CI width, distribution-free alone and
    /// batched, over 300 synthetic groups.
    fn coverage(stretches: usize, n: usize, between: f64, within: f64) -> [(f64, f64); 2] {
        let mut rng = irqbench_abi::SplitMix64(7);
        let trials = 300;
        let (mut covered, mut widths) = ([0usize; 2], [Vec::new(), Vec::new()]);
        for _ in 0..trials {
            let values = drifting(stretches, n, between, within, &mut rng);
            let (wide, b) = batched(&values);
            assert_eq!(b, MAX_BATCHES.min(values.len() / MIN_BATCH_VALUES));
            for (i, s) in [Summary::from_samples(&values), wide].iter().enumerate() {
                let ci = s.ci95.expect("a CI");
                covered[i] += usize::from(!ci.excludes(1.0));
                widths[i].push(ci.hi - ci.lo);
            }
        }
        let out = [0, 1].map(|i| {
            let w = statistics::median(&widths[i]).unwrap_or(f64::NAN);
            (covered[i] as f64 / trials as f64, w)
        });
        eprintln!(
            "{stretches} stretches × {n} rounds, between {between}, within {within}: \
             distribution-free covers {:.3} (width {:.4}), batched {:.3} (width {:.4})",
            out[0].0, out[0].1, out[1].0, out[1].1
        );
        out
    }

    #[test]
    fn rounds_that_drift_together_widen_the_ci_until_it_covers() {
        // Stretches of 40 rounds with a level of their own, 1% sd, rounds at 3%: their
        // medians spread ~2 times what the rounds imply (ratios on a PVM host: up to 1.6
        // times; stronger here, so the two CIs' coverages lie clearly apart).
        let [alone, wide] = coverage(20, 40, 0.01, 0.03);
        assert!(
            alone.0 < 0.85,
            "alone covers {:.3}: the model does not drift",
            alone.0
        );
        assert!(wide.0 >= 0.93, "batched covers {:.3}", wide.0);
    }

    #[test]
    fn independent_rounds_leave_the_ci_about_as_wide() {
        let [alone, wide] = coverage(20, 40, 0.0, 0.03);
        assert!(alone.0 >= 0.93 && wide.0 >= 0.93, "{alone:?} {wide:?}");
        assert!(wide.1 <= 1.3 * alone.1, "{alone:?} {wide:?}");
    }

    #[test]
    fn too_few_rounds_for_ten_batches_keep_the_distribution_free_ci() {
        let values: Vec<f64> = (0..59).map(f64::from).collect();
        assert_eq!(batch_medians(&values), Vec::<f64>::new());
        assert_eq!(batched(&values), (Summary::from_samples(&values), 0));
        let values: Vec<f64> = (0..60).map(f64::from).collect();
        // Ten batches of six: 0..6, 6..12, …; medians 2.5, 8.5, …
        let m = batch_medians(&values);
        assert_eq!((m.len(), m[0], m[9]), (10, 2.5, 56.5));
        let (s, b) = batched(&values);
        assert_eq!(b, 10);
        assert!(
            s.ci95.unwrap().lo < Summary::from_samples(&values).ci95.unwrap().lo,
            "{s:?}"
        );
    }

    fn cell(cycles: f64, ops: u64) -> Option<Cell> {
        Some(Cell {
            cycles_mean: cycles,
            cycles_max: cycles,
            ops,
            vcpus: 1,
            userspace_exits: ops / 4,
            hypercalls_seen: 0,
            guest: GuestCounts::default(),
            stats: Some(BTreeMap::from([(0, (cycles / 1000.0) as u64)])),
            disturbed: false,
            ..Default::default()
        })
    }

    /// Rounds where the host's speed drifts by ±10% round to round, the same for every block
    /// of a round: the paired figures must not move at all.
    fn drifting_table(rounds: usize) -> RoundTable {
        let mut t = RoundTable::new(3);
        t.stat_names = vec!["exits".into()];
        for r in 0..rounds {
            let speed = 1.0 + 0.1 * ((r as f64) * 0.7).sin();
            t.rounds.push(vec![
                cell(10_000.0 * speed, 100), // empty: 100 cycles/op of loop
                cell(60_000.0 * speed, 100), // a: net 500
                cell(40_000.0 * speed, 100), // b: net 300
            ]);
        }
        t
    }

    #[test]
    fn userspace_exits_have_per_round_samples_with_a_ci() {
        // 100 ops per block; round r takes 25 + r % 5 userspace exits: 0.25..=0.29 per op,
        // median 0.27. A disturbed round is left out like every other figure.
        let mut t = RoundTable::new(2);
        for r in 0..50u64 {
            let mut x = cell(20_000.0, 100).unwrap();
            x.userspace_exits = 25 + r % 5;
            x.disturbed = r == 7;
            t.rounds.push(vec![cell(10_000.0, 100), Some(x)]);
        }
        let s = Summary::from_samples(&t.userspace_exits(1));
        assert_eq!(s.samples.len(), 49);
        assert!((s.median - 0.27).abs() < 1e-12, "{s:?}");
        let ci = s.ci95.expect("a CI");
        assert!(ci.lo >= 0.25 && ci.hi <= 0.29 && ci.lo <= ci.hi);
    }

    #[test]
    fn paired_nets_cancel_drift_and_give_known_medians() {
        let t = drifting_table(50);
        let a = Summary::from_samples(&t.net_cycles(1));
        let b = Summary::from_samples(&t.net_cycles(2));
        // Net scales with speed too (it is a real cost measured in drifting cycles): the median
        // of 500 × speed over a symmetric drift is 500 within 1%.
        assert!((a.median - 500.0).abs() < 5.0, "{a:?}");
        assert!((b.median - 300.0).abs() < 3.0, "{b:?}");
        assert!(a.ci95.is_some_and(|ci| !ci.excludes(a.median)));
        // The ratio is exact in every round: drift cancels completely.
        let ratios = t.paired_ratios(1, 2, Metric::NetCycles, 1e9);
        assert_eq!(ratios.len(), 50);
        let r = interval(&ratios).expect("a ratio");
        assert!((r.point - 0.6).abs() < 1e-12);
        assert!(r.half_width().expect("a CI") < 1e-12);
        let d = interval(&t.paired_differences(1, 2)).expect("a difference");
        assert!((d.point - 200.0).abs() < 2.0);
    }

    #[test]
    fn disturbed_rounds_are_left_out_and_counted() {
        let mut t = drifting_table(20);
        // A preempted block: 10× slower. Flagged, it must not enter any figure.
        t.rounds[3][1] = Some(Cell {
            cycles_mean: 600_000.0,
            cycles_max: 600_000.0,
            disturbed: true,
            ..t.rounds[3][1].clone().unwrap()
        });
        // A disturbed baseline removes that round from every variant.
        t.rounds[5][0].as_mut().unwrap().disturbed = true;
        assert_eq!(t.net_cycles(1).len(), 18);
        assert_eq!(t.net_cycles(2).len(), 19);
        assert!((t.disturbed_fraction(1) - 0.1).abs() < 1e-12);
        assert!((t.disturbed_fraction(2) - 0.05).abs() < 1e-12);
        assert!(t.net_cycles(1).iter().all(|n| *n < 600.0));
        assert_eq!(t.paired_ratios(1, 2, Metric::NetCycles, 1e9).len(), 18);
    }

    #[test]
    fn a_net_near_zero_has_a_ci_that_spans_zero() {
        let mut t = RoundTable::new(2);
        for r in 0..40 {
            let jitter = if r % 2 == 0 { 30.0 } else { -30.0 };
            t.rounds
                .push(vec![cell(10_000.0, 100), cell(10_000.0 + jitter, 100)]);
        }
        let s = Summary::from_samples(&t.net_cycles(1));
        assert!(s.ci95.is_some_and(Ci::holds_zero), "{s:?}");
        // Precise against the baseline's scale: ±0.3 ≤ 2% × (0.02 × 1000), not 2% × (0.02 × 10).
        assert!(precise(&s, 1000.0, 0.02), "{s:?}");
        assert!(!precise(&s, 10.0, 0.02));
    }

    #[test]
    fn exits_and_throughput() {
        let t = drifting_table(10);
        let exits = t.net_stat(1, "exits");
        assert!(t.net_stat(1, "no_such_stat").is_empty());
        assert_eq!(exits.len(), 10);
        // exits = cycles / 1000: (60 − 10) × speed / 100 ops ≈ 0.5 per op.
        assert!(exits.iter().all(|e| (e - 0.5).abs() < 0.06));
        let ops = t.ops_per_sec(2, 1e9);
        // 100 ops in 40 000 cycles at 1 GHz: 2.5 M ops/s (± drift).
        assert!(ops.iter().all(|o| (o / 2.5e6 - 1.0).abs() < 0.11));
        let ratio = interval(&t.paired_ratios(1, 2, Metric::OpsPerSec, 1e9)).expect("a ratio");
        assert!((ratio.point - 1.5).abs() < 1e-9);
    }

    #[test]
    fn sparse_exits_are_counted_as_a_mean_where_the_median_reads_zero() {
        // 2 vCPUs × 12 ops per block; the row takes one `exits` in every fourth round on top
        // of the baseline's one in every round: net 1 / (4 × 24) per op. A disturbed round is
        // left out of the counts as of every other figure.
        let mut t = RoundTable::new(2);
        t.stat_names = vec!["exits".into()];
        for r in 0..41u64 {
            let block = |exits: u64| Cell {
                ops: 12,
                loops: 12,
                vcpus: 2,
                userspace_exits: exits,
                stats: Some(BTreeMap::from([(0, exits)])),
                guest: GuestCounts {
                    interrupts: exits,
                    ..Default::default()
                },
                ..Default::default()
            };
            let mut x = block(1 + u64::from(r % 4 == 0));
            x.disturbed = r == 40;
            t.rounds.push(vec![Some(block(1)), Some(x)]);
        }
        assert_eq!(statistics::median(&t.net_stat(1, "exits")), Some(0.0));
        let rounds = t.stat_counts(1, "exits");
        assert_eq!(rounds.len(), 40);
        assert_eq!(
            rounds[0],
            RoundCount {
                events: 2,
                ops: 24,
                loops: 24,
                baseline_events: 1,
                baseline_loops: 24
            }
        );
        let e = super::super::counts::estimate(&rounds).expect("40 rounds");
        assert!((e.per_op - 1.0 / 96.0).abs() < 1e-12, "{e:?}");
        assert!(e.ci95.lo > 0.0, "{e:?}");
        assert_eq!(t.counts(1, |c| Some(c.guest.interrupts)), rounds);
        assert!(t.stat_counts(1, "no_such_stat").is_empty());
    }

    #[test]
    fn precision_needs_enough_rounds() {
        let s = Summary::from_samples(&[1.0, 1.0, 1.0]);
        assert!(!precise(&s, 1.0, 0.5));
    }
}
