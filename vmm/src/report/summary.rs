//! The default terminal output of a run, one screen: a header (host, what the figures are on
//! this flavour, the config), at most [`WARNINGS_SHOWN`] warning lines, then per group its
//! answer lines (each comparison's change in the compared figure and in exits/op, with one
//! verdict) and a compact table. Everything else is in `render_table` (`--verbose`) and the
//! files.

use std::fmt::Write as _;

use crate::results::{KvmFlavour, ResultKind, RunReport};

use super::columns::{grid, Align};
use super::format::tsc_ghz;
use super::table::{groups, Group, TextTable};
use super::verdict::Verdict;
use super::warnings::{figure_warnings_with, Names};
use super::width::{text_width, wrap};

/// Warning lines at most, the "N more" line included (the issue allows five; four keep
/// `run pv-restore-skip`, 12 groups, within its 100 lines).
pub const WARNINGS_SHOWN: usize = 4;

/// The columns of the compact table (when the group has them), besides the row's name.
const COMPACT_COLUMNS: &[&str] = &[
    "cycles/op",
    "cycles/insn",
    "exits/op",
    "uexits/op",
    "ops/s",
    "IF viol",
    "wait p50/p90",
];

/// What the line under `verbose_hint` points to.
const VERBOSE_HINT: &str =
    "more: --verbose (legend, KVM stats per op, exit sites, validation, scaling); --out DIR keeps all";

/// The summary at the terminal's width ([`text_width`]).
pub fn render_summary(report: &RunReport) -> String {
    render_summary_at(report, text_width())
}

/// The summary in `width` columns.
pub fn render_summary_at(report: &RunReport, width: usize) -> String {
    let mut out = String::new();
    for line in header_lines(report) {
        let _ = writeln!(out, "{}", clip(&line, width));
    }
    for line in warning_lines(report, width) {
        let _ = writeln!(out, "{line}");
    }
    out.push('\n');
    if report.results.is_empty() {
        out.push_str("no rows\n");
    }
    for group in groups(report) {
        render_group(&mut out, report, &group, width);
    }
    let _ = writeln!(out, "{}", clip(VERBOSE_HINT, width));
    wrap(&crate::text::escape(&out), width)
}

/// One line of outside text, escaped, cut to `width` columns with `…`.
fn clip(line: &str, width: usize) -> String {
    let line = crate::text::escape_line(line);
    if line.chars().count() <= width {
        return line.into_owned();
    }
    let mut s: String = line.chars().take(width.saturating_sub(1)).collect();
    s.push('…');
    s
}

fn header_lines(report: &RunReport) -> Vec<String> {
    let h = &report.host;
    let nested = if h.nested { " (nested)" } else { "" };
    let mut lines = vec![
        format!(
            "host: {} ({} CPUs), kernel {}, KVM {}{nested}, TSC {}",
            h.cpu_model,
            h.host_cpus,
            h.kernel_release,
            h.kvm_flavour,
            tsc_ghz(h.tsc_khz)
        ),
        format!("figures: {}", figures_meaning(report)),
    ];
    let adhoc = if report.adhoc.is_empty() {
        String::new()
    } else {
        format!(" ({})", report.adhoc.flags())
    };
    // The whole description, its newlines escaped (`clip` keeps it on one line): a first line
    // alone would hide what a second line says, forged or not.
    let description = report.description.trim_end();
    let sep = if description.is_empty() { "" } else { ": " };
    lines.push(format!(
        "config {}{adhoc}{sep}{description}",
        report.config_name
    ));
    lines
}

/// What a cycle figure is on this run's host, as `irqbench host` tells it: an emulated CPU
/// (QEMU TCG, Bochs) first, then PVM (CPL0 guest code emulated), then VMX/SVM hardware.
pub fn figures_meaning(report: &RunReport) -> String {
    let h = &report.host;
    if let Some(by) = &h.emulated_cpu {
        let first = by.split(" (").next().unwrap_or(by);
        let tsc = if by.starts_with("Bochs") {
            ": TSC = instructions"
        } else {
            ""
        };
        return format!(
            "the CPU is emulated ({first}{tsc}): cycles are the emulator's; exits are KVM's"
        );
    }
    let emulates_cpl0 = matches!(
        &h.flavour.behaviour,
        crate::results::Readable::Value(b) if b.emulates_cpl0
    );
    match h.kvm_flavour {
        KvmFlavour::Pvm => {
            "PVM emulates CPL0 code: cycles are the emulator's, only ratios of strategies carry \
             over"
                .into()
        }
        _ if emulates_cpl0 => "CPL0 code is emulated: cycles are the emulator's, only ratios \
                               of strategies carry over"
            .into(),
        KvmFlavour::Vmx | KvmFlavour::Svm => format!(
            "TSC cycles of native execution under {} (guest code runs on the CPU)",
            h.kvm_flavour
        ),
        KvmFlavour::Unknown => {
            "KVM flavour unknown: cycles may be an emulator's, not the CPU's".into()
        }
    }
}

/// The report's warnings, most telling first, one line each; past [`WARNINGS_SHOWN`], the
/// rest counted in one line.
fn warning_lines(report: &RunReport, width: usize) -> Vec<String> {
    let mut all: Vec<String> = Vec::new();
    if report.partial {
        let reason = report.partial_reason.as_deref().unwrap_or("reason unknown");
        all.push(format!("PARTIAL: {reason}"));
    }
    for f in &report.failures {
        all.push(format!("failed: {}: {}", f.name, f.error));
    }
    let problems = report
        .host
        .validation
        .as_ref()
        .map(crate::validate::problems)
        .unwrap_or_default();
    let (fails, warns): (Vec<_>, Vec<_>) = problems
        .into_iter()
        .map(|(head, _)| head)
        .partition(|head| head.starts_with("validation FAIL"));
    all.extend(fails);
    all.extend(figure_warnings_with(report, Names::Counted));
    all.extend(warns);
    all.extend(report.host.warnings.iter().map(|w| format!("warning: {w}")));
    let all: Vec<String> = all.iter().map(|l| first_line(l)).collect();
    if all.len() <= WARNINGS_SHOWN {
        return all.iter().map(|l| clip(l, width)).collect();
    }
    let shown = WARNINGS_SHOWN - 1;
    let mut lines: Vec<String> = all[..shown].iter().map(|l| clip(l, width)).collect();
    lines.push(format!("{} more: --verbose", all.len() - shown));
    lines
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

/// Every comparison of `group`, as the tables pick them (an instruction group: those against
/// its first row).
pub(crate) fn group_verdicts<'a>(report: &'a RunReport, group: &Group<'a>) -> Vec<Verdict<'a>> {
    let Some(first) = group.rows.first() else {
        return Vec::new();
    };
    let every_pair = group.kind == ResultKind::Insn;
    report
        .comparisons
        .iter()
        .filter(|c| !every_pair || (c.a == first.name && c.b != first.name))
        .filter(|c| c.group == group.name || c.group.is_empty())
        .map(|c| Verdict::of(report, c))
        .collect()
}

/// The group's answer lines under a heading that names the group and their columns, then its
/// compact table. A group without comparisons gets its plain heading.
fn render_group(out: &mut String, report: &RunReport, group: &Group, width: usize) {
    let g = grid(group.kind, &group.rows);
    let verdicts = group_verdicts(report, group);
    if verdicts.is_empty() {
        let heading = super::table::group_heading(group, &g.uniform);
        let _ = writeln!(out, "{}", clip(&heading, width));
    } else {
        let mut t = TextTable::new(&[
            (group.name.as_str(), Align::Left),
            (
                &format!(
                    "{} [{}]",
                    verdicts[0].figure_label(),
                    interval_level(report)
                ),
                Align::Left,
            ),
            ("Δexits/op", Align::Left),
            ("verdict", Align::Left),
        ]);
        t.rows = verdicts
            .iter()
            .map(|v| {
                vec![
                    format!("  {}", v.names()),
                    v.change.clone(),
                    v.exits_text(),
                    v.verdict(),
                ]
            })
            .collect();
        push_without_rule(out, &t.render("", width));
    }
    let keep: Vec<usize> = g
        .headers
        .iter()
        .enumerate()
        .filter(|(i, (h, _))| *i == 0 || COMPACT_COLUMNS.contains(&h.as_str()))
        .map(|(i, _)| i)
        .collect();
    let table = TextTable {
        headers: keep.iter().map(|&i| g.headers[i].clone()).collect(),
        rows: g
            .rows
            .iter()
            .map(|r| keep.iter().map(|&i| r[i].clone()).collect())
            .collect(),
        shrinkable: vec![("strategy", 14), ("instruction", 12)],
    };
    push_without_rule(out, &table.render("  ", width));
}

/// What the change's interval claims, and at which level it was estimated: a rerun interval
/// from earlier runs, the CI of this run's VMs, or of its rounds (which a rerun may fall
/// outside). Short: the header must not widen the column its values set.
pub(crate) fn interval_level(report: &RunReport) -> String {
    match (&report.rerun, report.replicates) {
        (Some(_), _) => "95% rerun".into(),
        (None, k) if k > 1 => format!("95% CI, {k} VMs"),
        _ => "95% CI".into(),
    }
}

/// A rendered table without the rule under its header: in the summary it is a line of nothing.
fn push_without_rule(out: &mut String, table: &str) {
    for line in table.lines() {
        if !line.trim().chars().all(|c| c == '-' || c == ' ') {
            let _ = writeln!(out, "{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_says_what_the_cycles_are_on_each_flavour() {
        let mut r = RunReport::default();
        r.host.kvm_flavour = KvmFlavour::Pvm;
        assert!(figures_meaning(&r).contains("the emulator's, only ratios"));
        r.host.kvm_flavour = KvmFlavour::Vmx;
        assert!(figures_meaning(&r).starts_with("TSC cycles of native execution"));
        // The svm box: QEMU TCG; the vmx box: Bochs, whose TSC counts instructions.
        r.host.emulated_cpu = Some("QEMU TCG (hypervisor signature TCGTCGTCGTCG)".into());
        assert_eq!(
            figures_meaning(&r),
            "the CPU is emulated (QEMU TCG): cycles are the emulator's; exits are KVM's"
        );
        r.host.emulated_cpu = Some("Bochs (DMI Bochs Bochs; no hypervisor signature)".into());
        assert!(figures_meaning(&r).contains("(Bochs: TSC = instructions)"));
        let line = format!("figures: {}", figures_meaning(&r));
        assert!(line.chars().count() <= 100, "{line}");
    }
}
