//! Statistics every figure of a report is built from: percentiles, the distribution-free
//! confidence interval of a median, and mean/variance. Pure functions on slices, tested on
//! synthetic samples with known answers.

/// Samples a distribution-free 95% CI of a median needs before it says anything
/// ([`median_ci_ranks`] has no interval below this); every figure with a CI uses this floor.
pub const MIN_CI_SAMPLES: usize = 6;

/// Linear interpolation between closest ranks of an ascending slice.
pub fn percentile(sorted: &[f64], pct: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        1 => sorted[0],
        n => {
            let rank = pct / 100.0 * (n - 1) as f64;
            let lo = rank.floor() as usize;
            let hi = rank.ceil().min((n - 1) as f64) as usize;
            sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
        }
    }
}

/// The median of an unsorted slice (NaNs and infinities ignored); `None` when empty.
pub fn median(samples: &[f64]) -> Option<f64> {
    let sorted = sorted_finite(samples);
    (!sorted.is_empty()).then(|| percentile(&sorted, 50.0))
}

/// The finite values of `samples`, ascending.
pub fn sorted_finite(samples: &[f64]) -> Vec<f64> {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|s| s.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    sorted
}

/// Batches a figure's per-round values are cut into, at most (batch means over contiguous
/// rounds: `analysis::estimators::batched`, `analysis::counts::estimate`).
pub const MAX_BATCHES: usize = 20;
/// Fewer batches than this cannot place a t interval (t(9) = 2.26; below, t grows fast).
pub const MIN_BATCHES: usize = 10;
/// Values per batch, at least: a median of fewer says too little.
pub const MIN_BATCH_VALUES: usize = 6;

/// `n` values in order cut into contiguous batches of (nearly) equal size, as many as
/// [`MAX_BATCHES`] with [`MIN_BATCH_VALUES`] each; none when fewer than [`MIN_BATCHES`] fit.
pub fn batch_ranges(n: usize) -> Vec<std::ops::Range<usize>> {
    let batches = (n / MIN_BATCH_VALUES).min(MAX_BATCHES);
    if batches < MIN_BATCHES {
        return Vec::new();
    }
    (0..batches)
        .map(|k| k * n / batches..(k + 1) * n / batches)
        .collect()
}

/// Sample mean and (n−1) standard deviation; `None` with fewer than two samples.
pub fn mean_sd(samples: &[f64]) -> Option<(f64, f64)> {
    if samples.len() < 2 {
        return None;
    }
    let n = samples.len() as f64;
    let mean = samples.iter().sum::<f64>() / n;
    let var = samples.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some((mean, var.sqrt()))
}

/// P(X = i) for X ~ Binomial(n, 1/2), in logs (2^-n underflows for n > 1074).
fn binomial_half_pmf(n: u64, i: u64) -> f64 {
    use statrs::function::factorial::ln_factorial;
    #[cfg(test)]
    tests::PMF_TERMS.with(|c| c.set(c.get() + 1));
    let ln_half_n = n as f64 * 0.5f64.ln();
    (ln_factorial(n) - ln_factorial(i) - ln_factorial(n - i) + ln_half_n).exp()
}

/// P(X ≤ k) for X ~ Binomial(n, 1/2).
#[cfg(test)]
fn binomial_half_cdf(n: u64, k: u64) -> f64 {
    (0..=k.min(n))
        .map(|i| binomial_half_pmf(n, i))
        .sum::<f64>()
        .min(1.0)
}

/// The 0-based ranks (lo, hi) of the sorted samples that bound a distribution-free confidence
/// interval of the median with coverage ≥ `confidence`: the largest `j` with
/// P(Binomial(n, ½) ≤ j−1) ≤ (1−confidence)/2 gives [x(j), x(n−j+1)] in 1-based order
/// statistics. `None` when n is too small for any interval to reach that coverage (n < 6 at
/// 95%).
///
/// The cumulative probability is summed once, term by term, as j grows: O(n) in all (a figure
/// over n rounds must not cost O(n²), which at 16 k rounds took longer than the rounds).
pub fn median_ci_ranks(n: usize, confidence: f64) -> Option<(usize, usize)> {
    let tail = (1.0 - confidence) / 2.0;
    let n64 = n as u64;
    // j (1-based) such that the interval [x(j), x(n+1-j)] has coverage 1 − 2·P(X ≤ j−1).
    let mut best = None;
    let mut cdf = 0.0f64;
    let mut j = 1u64;
    while j <= n64 / 2 {
        cdf += binomial_half_pmf(n64, j - 1);
        if cdf.min(1.0) > tail {
            break;
        }
        best = Some(j);
        j += 1;
    }
    best.map(|j| ((j - 1) as usize, (n64 - j) as usize))
}

/// The 95% confidence interval of the median of an ascending slice, by order statistics
/// ([`median_ci_ranks`]); `None` with fewer than 6 samples.
pub fn median_ci95(sorted: &[f64]) -> Option<Ci> {
    median_ci(sorted, 0.95)
}

/// [`median_ci95`] at another `confidence`.
pub fn median_ci(sorted: &[f64], confidence: f64) -> Option<Ci> {
    let (lo, hi) = median_ci_ranks(sorted.len(), confidence)?;
    Some(Ci {
        lo: sorted[lo],
        hi: sorted[hi],
    })
}

/// The 0-based ranks (lo, hi) of the sorted samples that bound a distribution-free interval
/// of the `q`-quantile with coverage ≥ `confidence`: [x(j), x(k)] (1-based) covers it with
/// P(j ≤ B ≤ k−1), B ~ Binomial(n, q); j is the largest with P(B ≤ j−1) ≤ α/2 and k the
/// smallest with P(B ≥ k) ≤ α/2. `None` when n is too small for either end.
pub fn quantile_ci_ranks(n: usize, q: f64, confidence: f64) -> Option<(usize, usize)> {
    use statrs::function::factorial::ln_factorial;
    if n == 0 || !(0.0 < q && q < 1.0) {
        return None;
    }
    let tail = (1.0 - confidence) / 2.0;
    let n64 = n as u64;
    let pmf = |i: u64| {
        (ln_factorial(n64) - ln_factorial(i) - ln_factorial(n64 - i)
            + i as f64 * q.ln()
            + (n64 - i) as f64 * (1.0 - q).ln())
        .exp()
    };
    let (mut j, mut k) = (None, None);
    let mut cdf = 0.0f64; // P(B ≤ i − 1) before adding pmf(i − 1)
    for i in 1..=n64 {
        cdf += pmf(i - 1);
        if cdf <= tail {
            j = Some(i); // P(B ≤ i − 1) ≤ α/2
        }
        if k.is_none() && 1.0 - cdf <= tail {
            k = Some(i); // P(B ≥ i) = 1 − P(B ≤ i − 1) ≤ α/2
        }
    }
    Some(((j? - 1) as usize, (k? - 1) as usize))
}

/// The `q`-quantile of an ascending slice by nearest rank (x(⌈nq⌉), 1-based); `None` when
/// empty.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len().max(1));
    sorted.get(rank - 1).copied()
}

/// The 95% confidence interval of the `q`-quantile of an ascending slice by order statistics
/// ([`quantile_ci_ranks`]).
pub fn quantile_ci95(sorted: &[f64], q: f64) -> Option<Ci> {
    let (lo, hi) = quantile_ci_ranks(sorted.len(), q, 0.95)?;
    Some(Ci {
        lo: sorted[lo],
        hi: sorted[hi],
    })
}

/// A 95% confidence interval, JSON `[lo, hi]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(from = "[f64; 2]", into = "[f64; 2]")]
pub struct Ci {
    pub lo: f64,
    pub hi: f64,
}

impl From<[f64; 2]> for Ci {
    fn from([lo, hi]: [f64; 2]) -> Ci {
        Ci { lo, hi }
    }
}

impl From<Ci> for [f64; 2] {
    fn from(ci: Ci) -> [f64; 2] {
        [ci.lo, ci.hi]
    }
}

impl Ci {
    /// Half the width, measured from `point` to the farther end.
    pub fn half_width(self, point: f64) -> f64 {
        (point - self.lo).max(self.hi - point).max(0.0)
    }

    /// Whether it includes 0: such a value is printed `≈0`, never as a plain number.
    pub fn holds_zero(self) -> bool {
        self.lo <= 0.0 && self.hi >= 0.0
    }

    /// It lies strictly on one side of `value`.
    pub fn excludes(self, value: f64) -> bool {
        self.lo > value || self.hi < value
    }

    /// In other units: both ends times `k` (> 0).
    pub fn scaled(self, k: f64) -> Ci {
        Ci {
            lo: self.lo * k,
            hi: self.hi * k,
        }
    }
}

/// A figure: its point estimate (a median, or a count's mean) and the 95% CI that bounds it,
/// where its samples give one. A figure without data is no `Estimate`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub point: f64,
    pub ci: Option<Ci>,
}

impl Estimate {
    /// The one place that decides whether a figure has a CI: not from fewer than
    /// [`MIN_CI_SAMPLES`] of `n` samples, nor with ends that are not numbers or lie the wrong
    /// way round. No finite point is no figure.
    pub fn new(point: f64, ci: Option<Ci>, n: usize) -> Option<Estimate> {
        let ci = ci.filter(|c| n >= MIN_CI_SAMPLES && c.lo.is_finite() && c.hi.is_finite());
        point.is_finite().then_some(Estimate {
            point,
            ci: ci.filter(|c| c.lo <= c.hi),
        })
    }

    /// Half the CI's width from the point; `None` without a CI.
    pub fn half_width(&self) -> Option<f64> {
        self.ci.map(|c| c.half_width(self.point))
    }

    /// In other units: the point and the CI times `k` (> 0).
    pub fn scaled(self, k: f64) -> Estimate {
        let ci = self.ci.map(|c| c.scaled(k));
        Estimate {
            point: self.point * k,
            ci,
        }
    }

    /// The CI lies strictly on one side of `value` (never without a CI).
    pub fn excludes(&self, value: f64) -> bool {
        self.ci.is_some_and(|c| c.excludes(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// Binomial terms evaluated on this thread: the cost of the sums.
        pub(super) static PMF_TERMS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    #[test]
    fn percentiles_of_known_samples() {
        let s = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(percentile(&s, 50.0), 3.0);
        assert!((percentile(&s, 5.0) - 1.2).abs() < 1e-9);
        assert!((percentile(&s, 95.0) - 4.8).abs() < 1e-9);
        assert_eq!(median(&[5.0, f64::NAN, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn quantile_ranks_agree_with_the_medians_and_widen_to_the_tails() {
        for n in [6, 7, 20, 101, 1000] {
            assert_eq!(
                quantile_ci_ranks(n, 0.5, 0.95),
                median_ci_ranks(n, 0.95),
                "n {n}"
            );
        }
        assert_eq!(quantile_ci_ranks(5, 0.5, 0.95), None);
        // p90 of 20: x(15)..x(20) is the narrowest two-sided 95% interval there is? B ≥ 20
        // has 0.9^20 = 12% > 2.5%, so no upper end exists: none.
        assert_eq!(quantile_ci_ranks(20, 0.9, 0.95), None);
        let (lo, hi) = quantile_ci_ranks(1000, 0.9, 0.95).expect("n 1000");
        assert!(lo < 900 && (900..1000).contains(&hi), "{lo} {hi}");
        let sorted: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(quantile(&sorted, 0.9), Some(900.0));
        assert_eq!(quantile(&sorted, 0.5), Some(500.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn binomial_cdf_matches_exact_values() {
        // n = 10: P(X <= 1) = 11/1024, P(X <= 5) = 638/1024.
        assert!((binomial_half_cdf(10, 1) - 11.0 / 1024.0).abs() < 1e-12);
        assert!((binomial_half_cdf(10, 5) - 638.0 / 1024.0).abs() < 1e-12);
        assert!((binomial_half_cdf(200, 200) - 1.0).abs() < 1e-9);
        // statrs's ln(n!) agrees with the summation on both sides of its table's end (170!).
        for n in [64u64, 200] {
            let direct: f64 = (2..=n).map(|k| (k as f64).ln()).sum();
            let ln = statrs::function::factorial::ln_factorial(n);
            assert!((ln - direct).abs() < 1e-9 * direct, "{n}");
        }
    }

    #[test]
    fn median_ci_ranks_match_published_tables() {
        // Conover / Hollander–Wolfe tables for 95% (two-sided): n=6 → [x1, x6]; n=10 → [x2, x9];
        // n=20 → [x6, x15]; n=100 → [x40, x61].
        assert_eq!(median_ci_ranks(5, 0.95), None);
        assert_eq!(median_ci_ranks(6, 0.95), Some((0, 5)));
        assert_eq!(median_ci_ranks(10, 0.95), Some((1, 8)));
        assert_eq!(median_ci_ranks(20, 0.95), Some((5, 14)));
        assert_eq!(median_ci_ranks(100, 0.95), Some((39, 60)));
    }

    /// The ranks for n samples cost O(n) binomial terms, not O(n²): at 16 500 rounds a
    /// cumulative sum per rank evaluated ~34 million terms per figure.
    #[test]
    fn median_ci_ranks_evaluate_at_most_n_terms() {
        for n in [6usize, 100, 16_500, 250_000] {
            PMF_TERMS.with(|c| c.set(0));
            let ranks = median_ci_ranks(n, 0.95);
            // At most n/2 binomial terms.
            let terms = PMF_TERMS.with(std::cell::Cell::get);
            assert!(terms <= n as u64 / 2 + 1, "n = {n}: {terms} terms");
            // Still the exact order statistics: P(X ≤ lo) within the 2.5% tail, and one rank
            // further in outside it.
            let (lo, hi) = ranks.expect("n ≥ 6");
            assert_eq!(lo + hi, n - 1);
            let tail = binomial_half_cdf(n as u64, lo as u64);
            let one_further = binomial_half_cdf(n as u64, lo as u64 + 1);
            assert!(
                tail <= 0.025 && one_further > 0.025,
                "n = {n}: {tail} {one_further}"
            );
        }
    }

    #[test]
    fn median_ci_covers_the_true_median_about_95_percent_of_the_time() {
        // Synthetic samples from a known distribution (uniform on [0, 1), median 0.5) with a
        // fixed xorshift stream: the interval must contain 0.5 in ≥ 93% of 2000 trials.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut covered = 0;
        for _ in 0..2000 {
            let mut s: Vec<f64> = (0..41).map(|_| next()).collect();
            s.sort_by(f64::total_cmp);
            let ci = median_ci95(&s).expect("41 samples");
            if !ci.excludes(0.5) {
                covered += 1;
            }
        }
        assert!(
            (1860..=1990).contains(&covered),
            "covered {covered} of 2000"
        );
    }

    #[test]
    fn mean_sd_and_half_width() {
        let (m, sd) = mean_sd(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!(m, 3.0);
        assert!((sd - 2.5f64.sqrt()).abs() < 1e-12);
        assert_eq!(mean_sd(&[1.0]), None);
        assert_eq!(Ci { lo: 9.0, hi: 10.5 }.half_width(10.0), 1.0);
    }
}
