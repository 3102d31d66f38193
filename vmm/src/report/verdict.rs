//! One comparison as a reader asks it: the change in the compared figure (the paired ratio
//! with its CI), the change in exits/op (a difference of the two rows' per-op counts with its
//! CI) and one verdict for both. The summary and the mail report print it.

use crate::results::{ComparedMetric, PairedComparison, PhaseResult, ResultKind, RunReport};

use super::columns::exits_estimate;
use super::format::{fmt_ratio_change, fmt_spread, Estimate, MIN_CI_SAMPLES};

/// How a Δexits/op's CI is made, for the verbose legend and the docs.
pub const EXITS_DIFFERENCE_METHOD: &str = "Δexits/op: b's exits/op − a's, 95% CI from the two \
     rows' CI half-widths in quadrature (as if independent; rows measured in the same rounds \
     that move together make it wider, not narrower)";

/// A difference of two per-op counts: `None` when a row has no count or no CI.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Difference {
    pub value: f64,
    pub half: f64,
}

impl Difference {
    pub fn of(a: Estimate, b: Estimate) -> Option<Difference> {
        let (ca, cb) = (a.ci?, b.ci?);
        if !(a.median.is_finite() && b.median.is_finite()) {
            return None;
        }
        let ha = crate::statistics::half_width(a.median, ca);
        let hb = crate::statistics::half_width(b.median, cb);
        Some(Difference {
            value: b.median - a.median,
            half: ha.hypot(hb),
        })
    }

    /// Whether the CI leaves out 0: the rows' counts differ beyond noise.
    pub fn beyond_noise(&self) -> bool {
        self.value.abs() > self.half
    }

    /// `−0.011 ±0.004`, or `≈0 (±0.0047)` when the CI holds 0: never a plain number then.
    pub fn text(&self) -> String {
        if self.value == 0.0 && self.half == 0.0 {
            // Both rows counted exactly nothing.
            return "0".into();
        }
        if !self.beyond_noise() {
            return format!("≈0 (±{})", fmt_spread(self.half));
        }
        let sign = if self.value < 0.0 { '−' } else { '+' };
        let magnitude = super::format::fmt_cost(Estimate {
            median: self.value.abs(),
            ci: Some([self.value.abs() - self.half, self.value.abs() + self.half]),
        });
        format!("{sign}{magnitude}")
    }
}

/// Which way a figure moved, beyond noise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Down,
    Up,
    /// The CI holds no change.
    Neither,
    /// Too few rounds, or no figure.
    Unknown,
}

/// A comparison with both changes and its verdict.
#[derive(Clone, Debug)]
pub(crate) struct Verdict<'a> {
    pub comparison: &'a PairedComparison,
    pub a: Option<&'a PhaseResult>,
    pub b: Option<&'a PhaseResult>,
    /// The compared figure's change, `−7.1% [−9.4, −4.9]`, or `no ratio`.
    pub change: String,
    pub figure: Direction,
    pub exits: Option<Difference>,
}

impl<'a> Verdict<'a> {
    pub fn of(report: &'a RunReport, c: &'a PairedComparison) -> Verdict<'a> {
        let (a, b) = (report.row(&c.a), report.row(&c.b));
        let exits = match (a.and_then(exits_estimate), b.and_then(exits_estimate)) {
            (Some(ea), Some(eb)) => Difference::of(ea, eb),
            _ => None,
        };
        // Why there is no ratio is a sentence: `--verbose` has it, the line says only that.
        let (change, figure) = if c.no_ratio.is_some() {
            ("no ratio".to_string(), Direction::Unknown)
        } else if !c.has_ci() {
            let pct = fmt_ratio_change(c.ratio.median, [f64::NAN; 2]);
            let pct = pct.split(' ').next().unwrap_or_default().to_string();
            (format!("{pct} [no CI]"), Direction::Unknown)
        } else {
            // Where a rerun lands, when the history gave it: the claim a reader reruns.
            let ci = c.rerun95.unwrap_or(c.ratio.ci95);
            let direction = if ci[1] < 1.0 {
                Direction::Down
            } else if ci[0] > 1.0 {
                Direction::Up
            } else {
                Direction::Neither
            };
            (fmt_ratio_change(c.ratio.median, ci), direction)
        };
        Verdict {
            comparison: c,
            a,
            b,
            change,
            figure,
            exits,
        }
    }

    pub fn kind(&self) -> ResultKind {
        self.a.map_or(ResultKind::Strategy, |r| r.kind)
    }

    /// `pvop-skip vs pvop-popf`: the rows' strategies (their names when a row is missing).
    pub fn names(&self) -> String {
        let short = |r: Option<&PhaseResult>, n: &str| {
            r.map_or_else(|| n.to_string(), |r| r.strategy.name().to_string())
        };
        format!(
            "{} vs {}",
            short(self.b, &self.comparison.b),
            short(self.a, &self.comparison.a)
        )
    }

    /// `Δcycles/op` or `ops/s` (lock groups compare throughput).
    pub fn figure_label(&self) -> String {
        match self.comparison.metric {
            ComparedMetric::CyclesPerOp => format!("Δcycles/{}", self.kind().unit()),
            ComparedMetric::OpsPerSec => "Δops/s".into(),
        }
    }

    /// `Δexits/op −0.011 ±0.004`, `Δexits/op ≈0 (±0.005)` or `Δexits/op no data`.
    pub fn exits_text(&self) -> String {
        match &self.exits {
            Some(d) => d.text(),
            None => "no data".into(),
        }
    }

    /// The one verdict: what moved beyond noise, in the reader's words.
    pub fn verdict(&self) -> String {
        let figure = match (self.comparison.metric, self.figure) {
            (_, Direction::Unknown) if self.comparison.no_ratio.is_some() => {
                return "why: --verbose".into();
            }
            (_, Direction::Unknown) => return format!("no CI: < {MIN_CI_SAMPLES} rounds"),
            (_, Direction::Neither) => None,
            (ComparedMetric::CyclesPerOp, Direction::Down) => Some("cheaper"),
            (ComparedMetric::CyclesPerOp, Direction::Up) => Some("dearer"),
            (ComparedMetric::OpsPerSec, Direction::Up) => Some("faster"),
            (ComparedMetric::OpsPerSec, Direction::Down) => Some("slower"),
        };
        let exits = self.exits.filter(Difference::beyond_noise).map(|d| {
            if d.value < 0.0 {
                "fewer exits"
            } else {
                "more exits"
            }
        });
        match (figure, exits) {
            (Some(f), Some(e)) => format!("{f}, {e}"),
            (Some(f), None) => f.to_string(),
            (None, Some(e)) => e.to_string(),
            (None, None) => "within noise".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(median: f64, half: f64) -> Estimate {
        Estimate {
            median,
            ci: Some([median - half, median + half]),
        }
    }

    #[test]
    fn a_difference_whose_ci_holds_zero_is_never_a_plain_number() {
        let d = Difference::of(est(0.030, 0.010), est(0.025, 0.010)).unwrap();
        assert!(!d.beyond_noise());
        assert!(d.text().starts_with("≈0 (±"), "{}", d.text());
        let d = Difference::of(est(0.030, 0.003), est(0.010, 0.004)).unwrap();
        assert!(d.beyond_noise());
        assert_eq!(d.text(), "−0.0200 ±0.0050");
        assert!(
            (d.half - 0.005).abs() < 1e-12,
            "quadrature of 0.003 and 0.004"
        );
    }

    #[test]
    fn no_ci_on_either_side_gives_no_difference() {
        let no_ci = Estimate {
            median: 0.03,
            ci: None,
        };
        assert_eq!(Difference::of(no_ci, est(0.01, 0.001)), None);
        assert_eq!(Difference::of(est(0.01, 0.001), no_ci), None);
    }
}
