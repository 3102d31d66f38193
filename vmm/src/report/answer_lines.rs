//! The answers section of the text report, and the lines the Markdown report and the forest
//! plot share with it: per answer, one line per condition (its group's comparison) and one per
//! interaction, then how they were computed.

use std::fmt::Write as _;

use crate::results::{
    Answer, AnswerCondition, ComparedMetric, Interaction, ResultKind, RunReport, WaitPair,
};
use crate::statistics::{Ci, Estimate};

use super::format::{fmt_cost, fmt_ratio_change, fmt_si, MIN_CI_SAMPLES};

/// `pvop-skip vs pvop-popf (cycles/op)`.
pub(crate) fn heading(a: &Answer) -> String {
    let metric = match a.metric {
        ComparedMetric::CyclesPerOp if a.kind == ResultKind::Insn => "cycles/insn",
        ComparedMetric::CyclesPerOp => "cycles/op",
        ComparedMetric::OpsPerSec => "ops/s",
    };
    format!("{} vs {} ({metric})", a.b, a.a)
}

/// `−3.1% [−3.9, −2.3] (412 rounds)`, with `(not beyond noise)` when the CI holds 0 and `~`
/// when a row did not reach its precision; or why there is no ratio.
pub(crate) fn condition_value(c: &AnswerCondition) -> String {
    if let Some(why) = &c.no_ratio {
        return format!("no ratio: {why}");
    }
    let Some(ratio) = c.ratio else {
        return "no ratio".into();
    };
    let rough = if c.precision_reached { "" } else { " ~" };
    let Some(ci) = ratio.ci else {
        let pct = fmt_ratio_change(ratio);
        let pct = pct.split(' ').next().unwrap_or_default();
        return format!(
            "{pct} ({} rounds: too few for a CI, a CI needs {MIN_CI_SAMPLES}){rough}",
            c.rounds
        );
    };
    let noise = if ci.excludes(1.0) {
        ""
    } else {
        " (not beyond noise)"
    };
    format!(
        "{} ({} rounds){noise}{rough}",
        fmt_ratio_change(ratio),
        c.rounds
    )
}

/// `wait p50 98.2k ±0.9k → 98.8k ±1.1k, p90 103k → 102k cycles`: how long a's and b's
/// interrupts waited, each with its CI's farther reach (`±?` without one).
pub(crate) fn wait_value(w: &WaitPair) -> String {
    // The reach in the point's unit: `108k ±0.9k`, not `108k ±911`.
    let level = |point: f64, ci: Option<Ci>| match ci {
        Some(ci) if point >= 10_000.0 => {
            format!("{} ±{:.1}k", fmt_si(point), ci.half_width(point) / 1000.0)
        }
        Some(ci) => format!(
            "{} ±{}",
            fmt_si(point),
            fmt_si(ci.half_width(point).round())
        ),
        None => format!("{} ±?", fmt_si(point)),
    };
    format!(
        "wait p50 {} → {}, p90 {} → {} cycles",
        level(w.a.median_cycles, w.a.median_ci95),
        level(w.b.median_cycles, w.b.median_ci95),
        level(w.a.p90_cycles, w.a.p90_ci95),
        level(w.b.p90_cycles, w.b.p90_ci95)
    )
}

/// What being held by IF added to the waits of the interrupts that had waited for it (their
/// median wait minus the others'), where either row timed both kinds.
pub(crate) fn held_value(w: &WaitPair) -> Option<String> {
    let side = |l: &crate::results::PendingLatency| match &l.held_by_if {
        Some(h) => {
            let n = h.held.min(h.other) as usize;
            fmt_cost(Estimate::new(h.extra_median_cycles, h.extra_ci95, n))
        }
        None => "-".to_string(),
    };
    (w.a.held_by_if.is_some() || w.b.held_by_if.is_some()).then(|| {
        format!(
            "added by IF to the wait p50 (held − not): {} → {} cycles",
            side(&w.a),
            side(&w.b)
        )
    })
}

/// Decimals that show the CI's half-width with at least one significant digit (1 to 3).
fn decimals(half: f64) -> usize {
    if !(half.is_finite() && half > 0.0) {
        return 1;
    }
    (-half.log10()).ceil().clamp(1.0, 3.0) as usize
}

fn signed(v: f64, d: usize) -> String {
    let s = format!("{v:+.d$}");
    if s.trim_start_matches(['+', '-'])
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        format!("{:.d$}", 0.0)
    } else {
        s.replace('-', "−")
    }
}

/// `Δ = −0.4 log-points [−1.9, +1.0] (not beyond noise)`, or why there is no estimate. A CI that
/// holds 0 is never shown as a bare number.
pub(crate) fn interaction_value(i: &Interaction) -> String {
    if let Some(why) = &i.no_estimate {
        return format!("no estimate: {why}");
    }
    let Some((point, Some(ci))) = i.delta_log.map(|e| (e.point, e.ci)) else {
        return "no estimate".into();
    };
    let [m, lo, hi] = [point, ci.lo, ci.hi].map(|v| v * 100.0);
    let d = decimals(ci.half_width(point) * 100.0);
    let noise = if ci.excludes(0.0) {
        ""
    } else {
        " (not beyond noise)"
    };
    format!(
        "Δ = {} log-points [{}, {}]{noise}",
        signed(m, d),
        signed(lo, d),
        signed(hi, d)
    )
}

/// `load: inject 1 kHz vs no load (nesting 0, 1 vCPU)`.
pub(crate) fn interaction_label(i: &Interaction) -> String {
    format!("{}: {} ({})", i.factor.name(), i.label, i.at)
}

/// How to read the section.
pub(crate) fn legend(report: &RunReport) -> Vec<String> {
    let mut out = vec![
        "answers: each comparison (b vs a: median of per-round paired ratios b/a - 1, 95% CI) in \
         every condition it was measured in; Δ: how much that change differs between two \
         conditions that differ in one factor (the second minus the first), in log-points: 100 × \
         the difference of ln(b/a), close to percentage points for changes of a few percent \
         (−5.7% and −18.6% differ by 14.8 log-points, 12.9 percentage points)."
            .to_string(),
    ];
    if !report.interaction_method.is_empty() {
        out.push(report.interaction_method.clone());
    }
    let held = report
        .answers
        .iter()
        .flat_map(|a| &a.conditions)
        .any(|c| c.wait.as_ref().and_then(held_value).is_some());
    if held {
        out.push(
            "added by IF to the wait p50: the median wait of the interrupts held by IF (taken \
             right after the restore, the skip's enable or an sti's shadow) minus the median of \
             the others, per row (a → b): the rest of the IF-clear section and, without APICv/AVIC, the window \
             exit and re-injection; 95% CI from each median's order-statistic CI at 97.5% (this \
             run's interrupts, not a rerun's); ±?: fewer than six of a kind; -: the row timed \
             only one kind."
                .to_string(),
        );
    }
    out
}

/// The section of the terminal report (empty without answers).
pub(crate) fn render_text(out: &mut String, report: &RunReport) {
    if report.answers.is_empty() {
        return;
    }
    out.push_str("\nanswers: each comparison across the conditions of the run\n");
    for a in &report.answers {
        let _ = writeln!(out, "  {}", heading(a));
        let width = a
            .conditions
            .iter()
            .map(|c| c.label.chars().count())
            .max()
            .unwrap_or(0);
        for c in &a.conditions {
            let pad = width - c.label.chars().count();
            let _ = writeln!(
                out,
                "    {}{}  {}",
                c.label,
                " ".repeat(pad),
                condition_value(c)
            );
            if let Some(w) = &c.wait {
                let _ = writeln!(out, "    {}  {}", " ".repeat(width), wait_value(w));
            }
            if let Some([a, b]) = &c.let_in {
                let _ = writeln!(
                    out,
                    "    {}  let in by the restore: {} of {} interrupts → {} of {}",
                    " ".repeat(width),
                    a.by_restore,
                    a.taken,
                    b.by_restore,
                    b.taken
                );
            }
            if let Some(held) = c.wait.as_ref().and_then(held_value) {
                let _ = writeln!(out, "    {}  {held}", " ".repeat(width));
            }
        }
        if a.interactions.is_empty() {
            let _ = writeln!(out, "    (no two conditions differ in one factor only)");
        } else {
            let _ = writeln!(out, "    between conditions:");
        }
        for i in &a.interactions {
            let _ = writeln!(
                out,
                "      {}: {}",
                interaction_label(i),
                interaction_value(i)
            );
        }
    }
    for line in legend(report) {
        let _ = writeln!(out, "  {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{HeldWait, PendingLatency};

    #[test]
    fn the_if_clear_line_says_what_each_row_timed_and_never_a_bare_negative() {
        let held = |extra: f64, ci: Option<Ci>, n: u64| PendingLatency {
            held_by_if: Some(HeldWait {
                held: n,
                other: n,
                extra_median_cycles: extra,
                extra_ci95: ci,
            }),
            ..Default::default()
        };
        let none = WaitPair::default();
        assert_eq!(held_value(&none), None, "neither row timed both kinds");
        let w = WaitPair {
            a: held(
                500.0,
                Some(Ci {
                    lo: 100.0,
                    hi: 900.0,
                }),
                10,
            ),
            b: PendingLatency::default(),
        };
        assert_eq!(
            held_value(&w).as_deref(),
            Some("added by IF to the wait p50 (held − not): 500 ±400 → - cycles")
        );
        let w = WaitPair {
            a: held(
                -50.0,
                Some(Ci {
                    lo: -300.0,
                    hi: 200.0,
                }),
                10,
            ),
            b: held(-80.0, None, 3),
        };
        let line = held_value(&w).expect("both timed");
        assert!(line.ends_with(": ≈0 (±250) → <0 (±?) cycles"), "{line}");
    }
}
