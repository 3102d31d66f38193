//! Candidate estimators of a comparison's ratio net(b) / net(a) from paired rounds, and of a
//! row's net, each with a 95% CI. [`super::estimators`] uses the one the evaluation in this
//! file's tests chose (the coverage/width table: `cargo test --release -p irqbench --lib
//! ratio::tests::coverage_table -- --ignored --nocapture`); the others stay for that table and
//! for evaluating real rounds dumped with `IRQBENCH_DUMP_ROUNDS`.
//!
//! - per-round paired ratio: the median of net(b)/net(a) per round, order-statistics CI;
//! - ratio of medians: median(net b) / median(net a), percentile bootstrap over rounds (a round
//!   is resampled whole, so its drift stays common to both);
//! - Hodges–Lehmann: the median of the Walsh averages of the per-round log-ratios, with the
//!   Wilcoxon signed-rank CI, exponentiated;
//! - batched: per batch of consecutive rounds Σ net(b) / Σ net(a), then the median of the
//!   batch ratios with its order-statistics CI.

use crate::results::Interval;
use crate::statistics;

/// A small seeded PRNG (SplitMix64): bootstrap resamples are reproducible from the seed.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.uniform() * n as f64) as usize % n.max(1)
    }
}

/// Median with its order-statistics CI; `None` below 6 values.
pub fn median_interval(values: &[f64]) -> Option<Interval> {
    let sorted = statistics::sorted_finite(values);
    let ci95 = statistics::median_ci95(&sorted)?;
    Some(Interval {
        median: statistics::percentile(&sorted, 50.0),
        ci95,
    })
}

/// (a) The median of the per-round ratios y/x.
pub fn paired_ratio(pairs: &[(f64, f64)]) -> Option<Interval> {
    let r: Vec<f64> = pairs.iter().map(|(x, y)| y / x).collect();
    median_interval(&r)
}

fn median_in_place(v: &mut [f64]) -> f64 {
    let n = v.len();
    let (_, hi, _) = v.select_nth_unstable_by(n / 2, f64::total_cmp);
    let hi = *hi;
    if n % 2 == 1 {
        return hi;
    }
    let lo = v[..n / 2].iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo + hi) / 2.0
}

/// (b) median(y) / median(x), with a percentile bootstrap CI of `replicates` resamples of
/// whole rounds.
pub fn ratio_of_medians(pairs: &[(f64, f64)], replicates: usize, seed: u64) -> Option<Interval> {
    if pairs.len() < 6 || replicates < 40 {
        return None;
    }
    let mut xs: Vec<f64> = pairs.iter().map(|p| p.0).collect();
    let mut ys: Vec<f64> = pairs.iter().map(|p| p.1).collect();
    let point = median_in_place(&mut ys) / median_in_place(&mut xs);
    let mut rng = Rng(seed);
    let mut reps = Vec::with_capacity(replicates);
    for _ in 0..replicates {
        for k in 0..pairs.len() {
            let (x, y) = pairs[rng.below(pairs.len())];
            xs[k] = x;
            ys[k] = y;
        }
        reps.push(median_in_place(&mut ys) / median_in_place(&mut xs));
    }
    let sorted = statistics::sorted_finite(&reps);
    Some(Interval {
        median: point,
        ci95: [
            statistics::percentile(&sorted, 2.5),
            statistics::percentile(&sorted, 97.5),
        ],
    })
}

/// The `k`-th smallest (0-based) of the Walsh averages (s_i + s_j)/2, i ≤ j, of an ascending
/// slice, by bisection on the value: O(n) per step, never the n²/2 averages themselves.
fn walsh_quantile(sorted: &[f64], k: u64) -> f64 {
    // Walsh averages ≤ t: pairs i ≤ j with s_i + s_j ≤ 2t (two pointers over the sorted slice).
    let count = |t: f64| -> u64 {
        let mut c = 0u64;
        let mut j = sorted.len();
        for i in 0..sorted.len() {
            while j > i && sorted[i] + sorted[j - 1] > 2.0 * t {
                j -= 1;
            }
            if j <= i {
                break;
            }
            c += (j - i) as u64;
        }
        c
    };
    let (mut lo, mut hi) = (sorted[0], sorted[sorted.len() - 1]);
    for _ in 0..200 {
        let mid = lo + (hi - lo) / 2.0;
        if mid <= lo || mid >= hi {
            break;
        }
        if count(mid) > k {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// The Hodges–Lehmann location of `values` with the Wilcoxon signed-rank 95% CI (normal
/// approximation of the rank statistic; exact enough from ~20 values); `None` below 6.
pub fn hodges_lehmann(values: &[f64]) -> Option<Interval> {
    let sorted = statistics::sorted_finite(values);
    let n = sorted.len() as u64;
    if n < 6 {
        return None;
    }
    let walsh = n * (n + 1) / 2;
    let sd = ((n * (n + 1) * (2 * n + 1)) as f64 / 24.0).sqrt();
    let k = ((walsh as f64 / 2.0 - 1.959_964 * sd).floor().max(0.0)) as u64;
    Some(Interval {
        median: (walsh_quantile(&sorted, (walsh - 1) / 2) + walsh_quantile(&sorted, walsh / 2))
            / 2.0,
        ci95: [
            walsh_quantile(&sorted, k),
            walsh_quantile(&sorted, walsh - 1 - k),
        ],
    })
}

/// (c) Hodges–Lehmann of the per-round log-ratios, back on the ratio scale; `None` where a
/// round's ratio is not positive (a net at or below zero: no ratio to take a log of).
pub fn hodges_lehmann_ratio(pairs: &[(f64, f64)]) -> Option<Interval> {
    let logs: Option<Vec<f64>> = pairs
        .iter()
        .map(|(x, y)| {
            let r = y / x;
            (r > 0.0 && r.is_finite()).then(|| r.ln())
        })
        .collect();
    let i = hodges_lehmann(&logs?)?;
    Some(Interval {
        median: i.median.exp(),
        ci95: [i.ci95[0].exp(), i.ci95[1].exp()],
    })
}

/// (d) Σy / Σx per batch of `batch` consecutive rounds, then their median and its CI (a
/// trailing partial batch is left out).
pub fn batched_ratio(pairs: &[(f64, f64)], batch: usize) -> Option<Interval> {
    let r: Vec<f64> = pairs
        .chunks_exact(batch.max(1))
        .map(|c| c.iter().map(|p| p.1).sum::<f64>() / c.iter().map(|p| p.0).sum::<f64>())
        .collect();
    median_interval(&r)
}

/// The mean of each batch of `batch` consecutive values, then their median and its CI.
pub fn batched_location(values: &[f64], batch: usize) -> Option<Interval> {
    let m: Vec<f64> = values
        .chunks_exact(batch.max(1))
        .map(|c| c.iter().sum::<f64>() / c.len() as f64)
        .collect();
    median_interval(&m)
}

#[cfg(test)]
#[path = "ratio_tests.rs"]
mod tests;
