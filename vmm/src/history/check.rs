//! `irqbench check`: a run against a baseline, judged by `compare`'s rule (the two runs' 95%
//! CIs do not overlap and the change is at least the threshold); a change for the worse that
//! passes it is a regression.

use std::fmt::Write as _;

use crate::analysis::compare::{compare_by, CompareRow, Comparison};
use crate::report::render_compare;
use crate::results::RunReport;

/// A change below this is never a regression (back-to-back runs drift this much), unless
/// `--max-regression` says otherwise.
pub const DEFAULT_MAX_REGRESSION_PCT: f64 = crate::analysis::compare::DEFAULT_MIN_CHANGE_PCT;

/// The verdict of one check.
#[derive(Debug)]
pub struct CheckOutcome {
    pub comparison: Comparison,
    /// Rows whose change for the worse is beyond noise and the threshold.
    pub regressions: Vec<CompareRow>,
    /// Rows beyond noise and the threshold, for the better.
    pub improvements: Vec<CompareRow>,
    /// Baseline results this run does not have (a phase failed, or the config changed).
    pub missing: Vec<String>,
    /// Rows the gate could not judge: no data in either run, or too few rounds for any rule.
    pub unjudged: Vec<CompareRow>,
    /// Raw figures beyond noise that their group's loop units do not confirm: the host ran at
    /// another speed (or the loop moved alone), not the code.
    pub host_speed: Vec<CompareRow>,
    pub baseline: String,
    pub baseline_run: i64,
    pub threshold_pct: f64,
}

impl CheckOutcome {
    /// Passed only when every baseline row was found and judged and none regressed: a gate
    /// that cannot judge does not pass, and one that compared nothing judged nothing.
    pub fn passed(&self) -> bool {
        self.regressions.is_empty()
            && self.missing.is_empty()
            && self.unjudged.is_empty()
            && !self.comparison.rows.is_empty()
    }
}

/// Worse is more cycles or exits per operation, or fewer operations per second (or per loop).
fn worse(row: &CompareRow) -> bool {
    if row.metric == "ops/s" || row.metric == crate::analysis::compare::METRIC_OPS_PER_LOOP {
        row.change_pct < 0.0
    } else {
        row.change_pct > 0.0
    }
}

/// The same figure in units of the group's loop: cycles/op ↔ cost/loop, ops/s ↔ ops/loop.
fn in_loop_units(metric: &str) -> Option<&'static str> {
    use crate::analysis::compare::{
        METRIC_CYCLES, METRIC_OPS, METRIC_OPS_PER_LOOP, METRIC_PER_LOOP,
    };
    match metric {
        m if m == METRIC_CYCLES => Some(METRIC_PER_LOOP),
        m if m == METRIC_OPS => Some(METRIC_OPS_PER_LOOP),
        _ => None,
    }
}

/// Whether a raw figure's change beyond noise is one the same figure in units of its group's
/// loop shows too, the same way. A host that ran at another speed moves raw cycles and ops/s
/// but not the loop's units; a loop that moved alone moves the loop's units but not the raw
/// figures; a change of the measured code moves both. Without a judged figure in loop units
/// (a file from before them) the raw verdict stands.
fn confirmed(r: &CompareRow, in_loops: &Comparison) -> bool {
    let Some(metric) = in_loop_units(&r.metric) else {
        return true;
    };
    match in_loops
        .rows
        .iter()
        .find(|x| x.name == r.name && x.metric == metric)
    {
        Some(x) if x.basis.judged() => x.beyond_noise && worse(x) == worse(r),
        _ => true,
    }
}

/// Compares `new` with `baseline` (run `baseline_run`, named `name`) at `threshold_pct`. A raw
/// figure beyond noise counts only where its loop units agree ([`confirmed`]); with
/// `normalised` the loop units alone are judged.
pub fn check(
    baseline: &RunReport,
    new: &RunReport,
    name: &str,
    baseline_run: i64,
    threshold_pct: f64,
    normalised: bool,
) -> CheckOutcome {
    let comparison = compare_by(baseline, new, threshold_pct, normalised);
    let in_loops = (!normalised).then(|| compare_by(baseline, new, threshold_pct, true));
    let beyond: Vec<&CompareRow> = comparison.rows.iter().filter(|r| r.beyond_noise).collect();
    let (changed, host_speed): (Vec<&CompareRow>, Vec<&CompareRow>) = beyond
        .into_iter()
        .partition(|r| in_loops.as_ref().is_none_or(|n| confirmed(r, n)));
    let (regressions, improvements): (Vec<CompareRow>, Vec<CompareRow>) =
        changed.into_iter().cloned().partition(worse);
    let unjudged = comparison
        .rows
        .iter()
        .filter(|r| !r.basis.judged())
        .cloned()
        .collect();
    CheckOutcome {
        missing: comparison.only_in_a.clone(),
        unjudged,
        host_speed: host_speed.into_iter().cloned().collect(),
        comparison,
        regressions,
        improvements,
        baseline: name.to_owned(),
        baseline_run,
        threshold_pct,
    }
}

fn row_line(r: &CompareRow) -> String {
    let change = crate::report::change_text(r);
    // Only rows whose CIs are apart are found beyond noise.
    format!(
        "- `{}` {}: {change} (old {} → new {}, CIs apart)",
        crate::text::outside(&r.name),
        r.metric,
        ci_text(r.old, r.old_ci95),
        ci_text(r.new, r.new_ci95)
    )
}

fn ci_text(v: f64, ci: Option<crate::results::Ci>) -> String {
    let e = crate::results::Estimate { point: v, ci };
    if ci.is_some() || v < 0.0 {
        crate::report::format::fmt_cost(e)
    } else {
        format!("{} (no CI)", crate::report::format::fmt_sig(v, 4))
    }
}

/// The Markdown compare table (baseline = old, this run = new) and the verdict under it.
pub fn render_check(o: &CheckOutcome) -> String {
    let mut out = render_compare(&o.comparison, true);
    // 5, 2.5: the threshold as it was given.
    let rule = format!(
        "beyond noise (95% CIs apart, or a 99% test where a run has no CI) and at least {}%",
        o.threshold_pct
    );
    let _ = writeln!(out);
    if o.passed() {
        let _ = writeln!(
            out,
            "**check passed**: no regression {rule} against baseline `{}` (run {}); {} \
             figures compared.",
            crate::text::outside(&o.baseline),
            o.baseline_run,
            o.comparison.rows.len()
        );
    } else {
        let mut also = String::new();
        if o.comparison.rows.is_empty() {
            also.push_str(", and no figure compared: a check that judged nothing does not pass");
        }
        if !o.missing.is_empty() {
            let _ = write!(also, ", {} baseline row(s) missing", o.missing.len());
        }
        if !o.unjudged.is_empty() {
            let _ = write!(
                also,
                ", {} figure(s) that could not be judged",
                o.unjudged.len()
            );
        }
        let _ = writeln!(
            out,
            "**check FAILED** against baseline `{}` (run {}): {} regression(s) {rule}{also}.",
            crate::text::outside(&o.baseline),
            o.baseline_run,
            o.regressions.len(),
        );
        let _ = writeln!(out);
        for r in &o.regressions {
            let _ = writeln!(out, "{}", row_line(r));
        }
        for m in &o.missing {
            let m = crate::text::outside(m);
            let _ = writeln!(out, "- `{m}`: in the baseline, missing from this run");
        }
        for r in &o.unjudged {
            let in_loops = o.comparison.normalised && r.metric != "exits/op";
            let why = if r.old.is_finite() && r.new.is_finite() {
                "too few rounds in a run to judge"
            } else if r.metric == crate::analysis::compare::METRIC_EXITS {
                "no exits count in a run (too few kept rounds for one, or a kernel without KVM \
                 binary stats)"
            } else if in_loops {
                "no figure in units of the loop in a run (no kept round, or a file written \
                 before irqbench wrote cycles_per_loop and baseline_ns)"
            } else {
                "no data (no kept round) in a run"
            };
            let name = crate::text::outside(&r.name);
            let _ = writeln!(out, "- `{name}` {}: not judged: {why}", r.metric);
        }
    }
    if !o.host_speed.is_empty() {
        let _ = writeln!(
            out,
            "\n{} figure(s) beyond noise in raw units moved with the host's speed (not in units \
             of their group's loop): not judged a change of the code.",
            o.host_speed.len()
        );
    }
    if !o.improvements.is_empty() {
        let _ = writeln!(out, "\nImprovements {rule}:\n");
        for r in &o.improvements {
            let _ = writeln!(out, "{}", row_line(r));
        }
    }
    out
}
