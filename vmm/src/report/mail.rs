//! The mail report (`--mail`): plain text of at most [`MAIL_WIDTH`] columns to paste into a
//! reply on a kernel list. The command that reproduces the run, the host, then per question
//! (one comparison across the conditions it was measured in) one line per condition, in the
//! style of the seed mails' `1 Job 7500 --> 8800 enq/s (+17%)`: condition, before -> after,
//! change [95% CI], verdict. No colour, no Markdown, no exit sites.

use std::fmt::Write as _;

use crate::results::{ComparedMetric, PhaseResult, RunReport, Summary};

use super::format::{fmt_fraction, fmt_sig, Estimate};
use super::summary::figures_meaning;
use super::verdict::{Direction, Verdict};
use super::warnings::{figure_warnings_with, Names};
use super::width::wrap;
use crate::analysis::answers::irq_label;

/// Columns a mail line may take (a reply quotes it with `> ` and stays under 80).
pub const MAIL_WIDTH: usize = 72;

/// One question: `b vs a` of one figure, one verdict per condition.
struct Question<'a> {
    title: String,
    metric: ComparedMetric,
    rows: Vec<Verdict<'a>>,
}

/// The mail report of `report`.
pub fn render_mail(report: &RunReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "$ {}", command(report));
    let h = &report.host;
    let nested = if h.nested { " (nested)" } else { "" };
    let _ = writeln!(
        out,
        "host: {} ({} CPUs), kernel {}, KVM {}{nested}",
        h.cpu_model, h.host_cpus, h.kernel_release, h.kvm_flavour
    );
    let _ = writeln!(out, "figures: {}", figures_meaning(report));
    if report.partial {
        let _ = writeln!(
            out,
            "PARTIAL: {}",
            report.partial_reason.as_deref().unwrap_or("reason unknown")
        );
    }
    if !report.failures.is_empty() {
        let _ = writeln!(out, "failed rows: {}", report.failures.len());
    }
    let shared = shared_factors(report);
    if !shared.is_empty() {
        let _ = writeln!(out, "every row: {}", shared.join(", "));
    }
    push_caveats(&mut out, report);
    let _ = writeln!(
        out,
        // One line of at most 72 columns, whatever the level says.
        "change [{}]: median per-round after/before-1; noise: holds 0",
        super::summary::interval_level(report)
    );
    for q in questions(report) {
        render_question(&mut out, &q, &shared);
    }
    finish(&out)
}

/// A mail's text escaped, wrapped and clipped to [`MAIL_WIDTH`] columns.
pub(super) fn finish(out: &str) -> String {
    let text = crate::text::escape(out);
    wrap(&text, MAIL_WIDTH)
        .lines()
        .map(|l| clip(l, MAIL_WIDTH))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// The figures' own warnings (disturbed rows, a lighter load than asked, a host that changed
/// speed): a pasted mail must not hide which figures are weak. One line: the first, with how
/// many there are when more.
fn push_caveats(out: &mut String, report: &RunReport) {
    let all = figure_warnings_with(report, Names::Counted);
    let Some(first) = all.first() else {
        return;
    };
    let first = first.lines().next().unwrap_or_default();
    let first = first.trim_start_matches("warning: ");
    let line = match all.len() {
        1 => format!("caveat: {first}"),
        n => format!("caveat 1 of {n} (run -v): {first}"),
    };
    let _ = writeln!(out, "{}", clip(&line, MAIL_WIDTH));
}

/// `irqbench run NAME --set …`: what reproduces the run (a file config by its path).
fn command(report: &RunReport) -> String {
    let mut cmd = String::from("irqbench run");
    let source = &report.config_source;
    if source.starts_with("<built-in") {
        // The default config: `irqbench run` alone.
    } else if source.starts_with('<') {
        let _ = write!(cmd, " {}", report.config_name);
    } else {
        let _ = write!(cmd, " {source}");
    }
    if !report.adhoc.is_empty() {
        let _ = write!(cmd, " {}", report.adhoc.flags());
    }
    cmd
}

pub(super) fn clip(line: &str, width: usize) -> String {
    if line.chars().count() <= width {
        return line.to_string();
    }
    let mut s: String = line.chars().take(width - 1).collect();
    s.push('…');
    s
}

/// The comparisons, gathered by what they compare (`b vs a` of one figure), in run order.
fn questions(report: &RunReport) -> Vec<Question<'_>> {
    let mut out: Vec<Question> = Vec::new();
    for c in &report.comparisons {
        let v = Verdict::of(report, c);
        let name = |r: Option<&PhaseResult>, n: &str| {
            r.map_or_else(|| n.to_string(), |r| r.strategy.name().to_string())
        };
        let unit = v.kind().unit();
        let figure = match c.metric {
            ComparedMetric::CyclesPerOp => format!("cycles/{unit}"),
            ComparedMetric::OpsPerSec => "ops/s".into(),
        };
        let title = format!("{} vs {}, {figure}", name(v.b, &c.b), name(v.a, &c.a));
        match out.iter_mut().find(|q| q.title == title) {
            Some(q) => q.rows.push(v),
            None => out.push(Question {
                title,
                metric: c.metric,
                rows: vec![v],
            }),
        }
    }
    out
}

/// A condition's factors: nesting, load, vCPUs.
fn factors(r: Option<&PhaseResult>, group: &str) -> Vec<String> {
    let Some(r) = r else {
        return vec![group.to_string()];
    };
    let n = r.vcpus;
    vec![
        format!("nest {}", fmt_fraction(r.nesting)),
        irq_label(&r.irq_source),
        format!("{n} vCPU{}", if n == 1 { "" } else { "s" }),
    ]
}

/// The factors every compared row of the run shares: said once, above the questions.
fn shared_factors(report: &RunReport) -> Vec<String> {
    let all: Vec<Vec<String>> = report
        .comparisons
        .iter()
        .map(|c| factors(report.row(&c.a), &c.group))
        .collect();
    let Some(first) = all.first() else {
        return Vec::new();
    };
    first
        .iter()
        .enumerate()
        .filter(|(i, f)| all.iter().all(|o| o.get(*i) == Some(f)))
        .map(|(_, f)| f.clone())
        .collect()
}

/// Each row's condition: the factors that differ between the question's rows, or for a
/// question of one row those the run does not share; the bench where two would read alike.
fn labels(rows: &[Verdict], shared: &[String]) -> Vec<String> {
    let all: Vec<Vec<String>> = rows
        .iter()
        .map(|v| factors(v.a, &v.comparison.group))
        .collect();
    let differs = |i: usize| all.iter().any(|f| f.get(i) != all[0].get(i));
    let mut labels: Vec<String> = all
        .iter()
        .map(|f| {
            let parts: Vec<&str> = f
                .iter()
                .enumerate()
                .filter(|(i, p)| differs(*i) || (all.len() == 1 && !shared.contains(p)))
                .map(|(_, p)| p.as_str())
                .collect();
            parts.join(", ")
        })
        .collect();
    let twins: Vec<bool> = labels
        .iter()
        .map(|l| labels.iter().filter(|o| *o == l).count() > 1)
        .collect();
    for ((label, twin), v) in labels.iter_mut().zip(twins).zip(rows) {
        if twin {
            let bench = v.comparison.group.split('/').next().unwrap_or_default();
            label.push_str(&format!(" ({bench})"));
        }
    }
    labels
}

/// 3 significant digits, `17.4k` past 10 000; a net whose CI holds 0 is `≈0`, one below it
/// `<0`: never a plain number then.
fn figure(s: &Summary) -> String {
    short_figure(s.estimate())
}

/// [`figure`] of an estimate: `≈0`, `<0`, `no data` or 3 significant digits.
pub(super) fn short_figure(e: Option<Estimate>) -> String {
    let Some(e) = e else {
        return "no data".into();
    };
    if let Some(ci) = e.ci {
        if ci.holds_zero() {
            return "≈0".into();
        }
        if ci.hi < 0.0 {
            return "<0".into();
        }
    }
    three_digits(e.point)
}

/// 3 significant digits, with `k`/`M` from a thousand on: `3.11k`, `17.4k`, `116k`.
fn three_digits(v: f64) -> String {
    if v.abs() < 1000.0 {
        return fmt_sig(v, 3);
    }
    let (scaled, suffix) = if v.abs() < 1e6 {
        (v / 1e3, "k")
    } else {
        (v / 1e6, "M")
    };
    let s = fmt_sig(scaled, 3);
    format!("{s}{suffix}")
}

fn summary_of(r: Option<&PhaseResult>, metric: ComparedMetric) -> Option<&Summary> {
    r.map(|r| match metric {
        ComparedMetric::CyclesPerOp => &r.cycles_per_op,
        ComparedMetric::OpsPerSec => &r.ops_per_sec,
    })
}

fn figure_verdict(v: &Verdict) -> &'static str {
    match (v.comparison.metric, v.figure) {
        (_, Direction::Unknown) => "no CI",
        (_, Direction::Neither) => "noise",
        (ComparedMetric::CyclesPerOp, Direction::Down) => "cheaper",
        (ComparedMetric::CyclesPerOp, Direction::Up) => "dearer",
        (ComparedMetric::OpsPerSec, Direction::Up) => "faster",
        (ComparedMetric::OpsPerSec, Direction::Down) => "slower",
    }
}

fn render_question(out: &mut String, q: &Question, shared: &[String]) {
    let labels = labels(&q.rows, shared);
    let moved: Vec<(&Verdict, &String)> = q
        .rows
        .iter()
        .zip(&labels)
        .filter(|(v, _)| v.exits.is_some_and(|d| d.beyond_noise()))
        .collect();
    let exits_note = if !moved.is_empty() {
        ""
    } else if q.rows.iter().all(|v| v.exits.is_none()) {
        "; exits/op: no data"
    } else {
        "; exits/op: within noise"
    };
    let _ = writeln!(out, "{}{exits_note}", q.title);
    let rows: Vec<[String; 4]> = q
        .rows
        .iter()
        .zip(&labels)
        .map(|(v, l)| {
            let before = summary_of(v.a, q.metric).map_or_else(|| "?".into(), figure);
            let after = summary_of(v.b, q.metric).map_or_else(|| "?".into(), figure);
            [
                l.clone(),
                format!("{before} -> {after}"),
                v.change.clone(),
                figure_verdict(v).into(),
            ]
        })
        .collect();
    push_table(out, &rows);
    if moved.is_empty() {
        return;
    }
    let _ = writeln!(out, "{}", exits_line(&moved, q.rows.len()));
}

/// The conditions whose exits/op moved beyond noise, in one line (a mail's length must not
/// grow with the conditions): each with its Δ where they fit, else how many went which way.
fn exits_line(moved: &[(&Verdict, &String)], of: usize) -> String {
    let head = format!("  exits/op beyond noise in {} of {of}: ", moved.len());
    let listed: Vec<String> = moved
        .iter()
        .map(|(v, l)| format!("{l} {}", v.exits_text()))
        .collect();
    let line = format!("{head}{}", listed.join("; "));
    if line.chars().count() <= MAIL_WIDTH {
        return line;
    }
    let fewer = moved
        .iter()
        .filter(|(v, _)| v.exits.is_some_and(|d| d.value < 0.0))
        .count();
    format!(
        "{head}{} more, {fewer} fewer (run -v lists them)",
        moved.len() - fewer
    )
}

/// Rows of four cells, each column as wide as its widest cell, two spaces apart (one where two
/// would pass [`MAIL_WIDTH`]); still too wide, the before → after figures are left out (the
/// change and its verdict answer the question, a line a condition); wider yet, the condition
/// goes above its figures.
pub(super) fn push_table(out: &mut String, rows: &[[String; 4]]) {
    let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0);
    let (w0, w1, w2) = (width(0), width(1), width(2));
    let lead = if w0 == 0 { 0 } else { w0 + 2 };
    let fits = |gap: usize| 2 + lead + w1 + gap + w2 + gap + width(3) <= MAIL_WIDTH;
    let gap = if fits(2) { "  " } else { " " };
    if !fits(1) && 2 + lead + w2 + 2 + width(3) <= MAIL_WIDTH {
        for r in rows {
            let label = if w0 == 0 {
                String::new()
            } else {
                format!("{:<w0$}  ", r[0])
            };
            let line = format!("  {label}{:<w2$}  {}", r[2], r[3]);
            let _ = writeln!(out, "{}", line.trim_end());
        }
        return;
    }
    if !fits(1) {
        for r in rows {
            let _ = writeln!(out, "  {}", r[0]);
            let line = format!("      {:>w1$}  {:<w2$}  {}", r[1], r[2], r[3]);
            let _ = writeln!(out, "{}", line.trim_end());
        }
        return;
    }
    for r in rows {
        let label = if w0 == 0 {
            String::new()
        } else {
            format!("{:<w0$}  ", r[0])
        };
        let line = format!("  {label}{:>w1$}{gap}{:<w2$}{gap}{}", r[1], r[2], r[3]);
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: &str, figures: &str, change: &str) -> [String; 4] {
        [label.into(), figures.into(), change.into(), "faster".into()]
    }

    /// A question's table keeps a line a condition as long as its change and verdict fit:
    /// the before → after figures go first, the condition's own line last.
    #[test]
    fn a_table_too_wide_for_a_mail_drops_its_figures_before_it_doubles_its_lines() {
        let mut out = String::new();
        push_table(
            &mut out,
            &[row(
                "no load, 1 vCPU",
                "3.82M -> 7.78M",
                "+100.3% [+97.7, +103.7]",
            )],
        );
        assert_eq!(out.lines().count(), 1, "{out}");
        assert!(out.contains("3.82M -> 7.78M"), "{out}");
        let wide = row(
            "inject 1 kHz, 2 vCPUs",
            "3.82M -> 14.3M",
            "+1401.7% [+555.3, +2217.0]",
        );
        let mut out = String::new();
        push_table(&mut out, &[wide.clone(), wide]);
        assert_eq!(out.lines().count(), 2, "{out}");
        assert!(!out.contains("->"), "{out}");
        assert!(
            out.lines().all(|l| l.chars().count() <= MAIL_WIDTH),
            "{out}"
        );
        assert!(out.contains("inject 1 kHz, 2 vCPUs  +1401.7%"), "{out}");
        let long = "x".repeat(60);
        let mut out = String::new();
        push_table(&mut out, &[row(&long, "1 -> 2", "+100.0% [+90.0, +110.0]")]);
        assert_eq!(
            out.lines().count(),
            2,
            "the condition above its figures:\n{out}"
        );
    }
}
