//! The terminal report: host header, one table per measurement group with its paired
//! comparisons and derived costs, the legend, exits by KVM stat, exit sites, mixed phases,
//! scaling and failures.

use std::fmt::Write as _;

use crate::text::{escape_line, outside};

use crate::results::{
    ComparedMetric, ExitSite, PairedComparison, PairedDifference, PhaseResult, ResultKind,
    RunReport,
};

use super::columns::{grid, stat_estimate, Align};
use super::format::{
    ellipsize, fmt_cost, fmt_count, fmt_interval, fmt_ratio_change, fmt_sig, fmt_spread, tsc_ghz,
    MIN_CI_SAMPLES, NO_DATA,
};
pub(crate) use super::warnings::figure_warnings;
use super::width::{text_width, wrap};

pub use super::columns::vcpu_spread;

/// Exit sites per result in the terminal table.
const EXIT_SITES_SHOWN: usize = 6;

/// A text table whose text columns shrink (middle ellipsis) to fit the terminal.
#[derive(Debug)]
pub(crate) struct TextTable {
    pub headers: Vec<(String, Align)>,
    pub rows: Vec<Vec<String>>,
    /// Columns that may be shortened, by header, in order of preference, each down to a floor.
    pub shrinkable: Vec<(&'static str, usize)>,
}

impl TextTable {
    pub fn new(headers: &[(&str, Align)]) -> TextTable {
        TextTable {
            headers: headers.iter().map(|(h, a)| (h.to_string(), *a)).collect(),
            rows: Vec::new(),
            shrinkable: Vec::new(),
        }
    }

    /// Two spaces before a text column; one between right-aligned numbers, whose
    /// alignment already separates them.
    fn separator(&self, prev: Option<usize>, col: usize) -> &'static str {
        match prev {
            None => "",
            Some(p) if self.headers[p].1 == Align::Right && self.headers[col].1 == Align::Right => {
                " "
            }
            Some(_) => "  ",
        }
    }

    fn widths(&self, indent: &str, max_width: usize) -> Vec<usize> {
        let mut widths: Vec<usize> = self
            .headers
            .iter()
            .enumerate()
            .map(|(i, (h, _))| {
                self.rows
                    .iter()
                    .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                    .chain([h.chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let total = |w: &[usize]| {
            indent.len()
                + w.iter().sum::<usize>()
                + (0..w.len())
                    .map(|i| self.separator(i.checked_sub(1), i).len())
                    .sum::<usize>()
        };
        for &(name, floor) in &self.shrinkable {
            let excess = total(&widths).saturating_sub(max_width);
            if excess == 0 {
                break;
            }
            if let Some(col) = self.headers.iter().position(|(h, _)| h == name) {
                let floor = floor.max(self.headers[col].0.chars().count());
                widths[col] = widths[col]
                    .saturating_sub(excess)
                    .max(floor)
                    .min(widths[col]);
            }
        }
        widths
    }

    /// The table in `max_width` columns: shrinkable columns first give up their excess, then
    /// a table still too wide continues below in panels, each repeating the first column (the
    /// row's name), so that no row is cut at the terminal's edge.
    ///
    /// A cell is one line: a newline or control character in one (a config's or a host's name
    /// from an imported file) is shown escaped and clipped ([`outside`]), never sent, so
    /// it cannot start a line of its own.
    pub fn render(&self, indent: &str, max_width: usize) -> String {
        let raw = |c: &String| outside(c) != c.as_str();
        if self.rows.iter().flatten().any(raw) {
            let rows = self
                .rows
                .iter()
                .map(|r| r.iter().map(|c| outside(c).into_owned()).collect())
                .collect();
            let safe = TextTable {
                headers: self.headers.clone(),
                rows,
                shrinkable: self.shrinkable.clone(),
            };
            return safe.render(indent, max_width);
        }
        let widths = self.widths(indent, max_width);
        self.panels(indent, &widths, max_width)
            .iter()
            .map(|cols| self.render_panel(indent, &widths, cols))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Column indices per panel; every panel but a lone too-wide column fits `max_width`.
    fn panels(&self, indent: &str, widths: &[usize], max_width: usize) -> Vec<Vec<usize>> {
        let Some(&first) = widths.first() else {
            return vec![Vec::new()];
        };
        let mut panels = Vec::new();
        let (mut cols, mut width) = (vec![0], indent.len() + first);
        for (col, w) in widths.iter().enumerate().skip(1) {
            let prev = cols.last().copied();
            let add = self.separator(prev, col).len() + w;
            if cols.len() > 1 && width + add > max_width {
                panels.push(std::mem::replace(&mut cols, vec![0, col]));
                width = indent.len() + first + self.separator(Some(0), col).len() + w;
            } else {
                cols.push(col);
                width += add;
            }
        }
        panels.push(cols);
        panels
    }

    fn render_panel(&self, indent: &str, widths: &[usize], cols: &[usize]) -> String {
        let mut out = String::new();
        let headers: Vec<String> = self.headers.iter().map(|(h, _)| h.clone()).collect();
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        for row in [&headers, &rule].into_iter().chain(self.rows.iter()) {
            let mut line = String::from(indent);
            let mut prev = None;
            for &i in cols {
                let cell = ellipsize(row.get(i).map_or("", String::as_str), widths[i]);
                let pad = widths[i].saturating_sub(cell.chars().count());
                line.push_str(self.separator(prev, i));
                prev = Some(i);
                match self.headers[i].1 {
                    Align::Left => {
                        line.push_str(&cell);
                        line.extend(std::iter::repeat_n(' ', pad));
                    }
                    Align::Right => {
                        line.extend(std::iter::repeat_n(' ', pad));
                        line.push_str(&cell);
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Host header

pub(crate) fn kvm_text(report: &RunReport) -> String {
    let nested = if report.host.nested { " (nested)" } else { "" };
    format!("KVM {}{nested}", report.host.kvm_flavour)
}

pub(crate) fn irqchip_text(report: &RunReport) -> String {
    if report.host.irqchip_modes.is_empty() {
        "-".into()
    } else {
        report.host.irqchip_modes.join("+")
    }
}

/// The lines that say where and how the numbers were measured, for the top of every report,
/// laid out for `width` columns (unwrapped: [`render_table`] wraps the whole report).
pub fn host_header(report: &RunReport, width: usize) -> String {
    let h = &report.host;
    let host = format!(
        "host: {} ({} CPUs), kernel {}, {}, TSC {}, irqchip: {}{}",
        outside(&h.cpu_model),
        h.host_cpus,
        outside(&h.kernel_release),
        kvm_text(report),
        tsc_ghz(h.tsc_khz),
        irqchip_text(report),
        if h.vcpu_pinning { ", vCPUs pinned" } else { "" },
    );
    let run = format!(
        "irqbench {}, config {} ({})",
        outside(&report.irqbench_version),
        outside(&report.config_name),
        outside(&report.config_source)
    );
    let mut out = String::new();
    if host.chars().count() + 2 + run.chars().count() <= width {
        let _ = writeln!(out, "{host}; {run}");
    } else {
        let _ = writeln!(out, "{host}");
        let _ = writeln!(out, "{run}");
    }
    if !report.adhoc.is_empty() {
        let _ = writeln!(out, "ad hoc: {}", report.adhoc.flags());
    }
    if !h.redacted.is_empty() {
        let _ = writeln!(
            out,
            "redacted at the user's request: {}",
            h.redacted.join(", ")
        );
    }
    if h.vcpu_pinning && !h.pinning.cpus.is_empty() {
        let cpus: Vec<String> = h.pinning.cpus.iter().map(u32::to_string).collect();
        let _ = writeln!(
            out,
            "vCPU threads pinned to CPUs {} (vCPU i on the i-th)",
            cpus.join(",")
        );
    }
    if !report.description.is_empty() {
        let _ = writeln!(out, "{}", outside(report.description.trim_end()));
    }
    for w in &h.warnings {
        let _ = writeln!(out, "warning: {}", escape_line(w));
    }
    if let Some(v) = &h.validation {
        for line in crate::validate::problem_lines(v) {
            let _ = writeln!(out, "{line}");
        }
    }
    if report.partial {
        let reason = report.partial_reason.as_deref().unwrap_or("reason unknown");
        let _ = writeln!(out, "PARTIAL: {}", escape_line(reason));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Groups, comparisons and differences (shared with Markdown)

/// One measurement group: rows that shared rounds and a baseline, in config order.
#[derive(Debug)]
pub(crate) struct Group<'a> {
    /// `results[].group`, or the kind's name for files that predate groups.
    pub name: String,
    pub kind: ResultKind,
    pub rows: Vec<&'a PhaseResult>,
}

pub(crate) fn groups(report: &RunReport) -> Vec<Group<'_>> {
    let mut out: Vec<Group> = Vec::new();
    for r in &report.results {
        let name = if r.group.is_empty() {
            r.kind.name().to_string()
        } else {
            r.group.clone()
        };
        match out.iter_mut().find(|g| g.name == name) {
            Some(g) => g.rows.push(r),
            None => out.push(Group {
                name,
                kind: r.kind,
                rows: vec![r],
            }),
        }
    }
    out
}

/// What a row is called in a comparison line: its strategy or instruction, the part that
/// differs inside a group.
fn short_name(report: &RunReport, name: &str) -> String {
    report
        .row(name)
        .map_or_else(|| name.to_string(), |r| r.strategy.name().into())
}

fn metric_label(metric: ComparedMetric, kind: ResultKind) -> String {
    match metric {
        ComparedMetric::CyclesPerOp => format!("cycles/{}", kind.unit()),
        ComparedMetric::OpsPerSec => "ops/s".into(),
    }
}

/// `pvop-skip vs pvop-popf  cycles/op −9.1% [−10.0, −8.2]` for each comparison the group chose
/// (an instruction group, which compares every pair, shows those against its first row).
pub(crate) fn comparison_lines(report: &RunReport, group: &Group) -> Vec<String> {
    let Some(first) = group.rows.first() else {
        return Vec::new();
    };
    let every_pair = group.kind == ResultKind::Insn;
    let picked: Vec<&PairedComparison> = report
        .comparisons
        .iter()
        .filter(|c| !every_pair || (c.a == first.name && c.b != first.name))
        .filter(|c| c.group == group.name || c.group.is_empty())
        .collect();
    picked
        .iter()
        .map(|c| {
            if let Some(why) = &c.no_ratio {
                return format!(
                    "{} vs {}  {} no ratio: {why}",
                    short_name(report, &c.b),
                    short_name(report, &c.a),
                    metric_label(c.metric, group.kind),
                );
            }
            let verdict = match c.ratio.and_then(|r| r.ci) {
                None => format!("  too few rounds for a CI (a CI needs {MIN_CI_SAMPLES})"),
                Some(ci) if ci.excludes(1.0) => String::new(),
                Some(_) => "  no difference beyond noise".into(),
            };
            format!(
                "{} vs {}  {} {} ({} rounds){verdict}",
                short_name(report, &c.b),
                short_name(report, &c.a),
                metric_label(c.metric, group.kind),
                c.ratio.map_or_else(|| NO_DATA.into(), fmt_ratio_change),
                c.rounds,
            )
        })
        .collect()
}

/// A derived cost with its CI; like every net cost, one whose CI includes 0 is `≈0`.
pub(crate) fn fmt_derived(d: &PairedDifference) -> String {
    let Some(e) = d.cycles else {
        return NO_DATA.into();
    };
    let Some(ci) = e.ci else {
        // Too few rounds for a CI: the sign is all that is shown of a negative cost.
        return if e.point < 0.0 {
            "<0 [no CI]".into()
        } else {
            format!("{} [no CI]", fmt_sig(e.point, 3))
        };
    };
    let half = ci.half_width(e.point);
    if ci.holds_zero() {
        format!("≈0 (±{})", fmt_spread(half))
    } else if ci.hi < 0.0 {
        format!("<0 (±{})", fmt_spread(half))
    } else {
        fmt_interval(e)
    }
}

pub(crate) fn difference_lines(report: &RunReport, group: &Group) -> Vec<String> {
    report
        .differences
        .iter()
        .filter(|d| d.group == group.name)
        .map(|d| {
            format!(
                "{} = {} − {}: {} cycles{} ({} rounds)",
                d.name,
                short_name(report, &d.minuend),
                short_name(report, &d.subtrahend),
                fmt_derived(d),
                derived_ns(d),
                d.rounds
            )
        })
        .collect()
}

/// ` = 2174 [2154, 2194] ns` beside a derived cost (files written before `ns`: nothing).
fn derived_ns(d: &PairedDifference) -> String {
    d.ns.map_or_else(String::new, |ns| format!(" = {} ns", fmt_interval(ns)))
}

/// What "cycles" means in this report: TSC cycles at the host's TSC rate, and why not core
/// cycles (`RunReport::cycles_source`).
fn cycles_line(report: &RunReport) -> String {
    let why = &report.cycles_source.reason;
    let why = if why.is_empty() {
        String::new()
    } else {
        format!(" Core cycles: {why}.")
    };
    format!(
        "cycles are TSC cycles at {} (a constant rate, not core clock cycles; ns = cycles / TSC \
         rate).{why}",
        tsc_ghz(report.host.tsc_khz)
    )
}

/// Differences whose group has no rows in this report (they would be lost otherwise).
fn orphan_differences(report: &RunReport) -> Vec<&PairedDifference> {
    let names: Vec<String> = groups(report).into_iter().map(|g| g.name).collect();
    report
        .differences
        .iter()
        .filter(|d| !names.contains(&d.group))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The report

/// The heading of a group's table: the group, and what every row of it shares.
pub(crate) fn group_heading(group: &Group, uniform: &[(String, String)]) -> String {
    let plural = if group.rows.len() == 1 { "" } else { "s" };
    let shared: Vec<String> = uniform.iter().map(|(h, v)| format!("{h} {v}")).collect();
    let mut s = format!(
        "{} ({}, {} row{plural}",
        group.name,
        group.kind.name(),
        group.rows.len()
    );
    if !shared.is_empty() {
        let _ = write!(s, "; {}", shared.join(", "));
    }
    s.push(')');
    s
}

fn render_group(out: &mut String, report: &RunReport, group: &Group, width: usize) {
    let g = grid(group.kind, &group.rows);
    let _ = writeln!(out, "\n{}", group_heading(group, &g.uniform));
    if let Some(line) = interrupt_path_line(group) {
        let _ = writeln!(out, "  {line}");
    }
    if let Some(line) = ipi_sender_line(group) {
        let _ = writeln!(out, "  {line}");
    }
    let mut t = TextTable {
        headers: g.headers,
        rows: g.rows,
        shrinkable: vec![("strategy", 14), ("instruction", 12), ("irq", 10)],
    };
    t.shrinkable.push(("measures", 12));
    out.push_str(&t.render("  ", width));
    if !g.all_zero.is_empty() {
        let _ = writeln!(out, "  (0 in every row: {})", g.all_zero.join(", "));
    }
    for line in comparison_lines(report, group) {
        let _ = writeln!(out, "  {line}");
    }
    let diffs = difference_lines(report, group);
    if !diffs.is_empty() {
        out.push_str("  derived from paired differences per round:\n");
        for line in diffs {
            let _ = writeln!(out, "    {line}");
        }
    }
}

/// How a loaded group's interrupts reached its guest: the irqchip and whether APICv/AVIC
/// delivered them (the rows' `apicv`, the same for every row of a group). None for a group
/// without an interrupt load or from a file without it.
pub(crate) fn interrupt_path_line(group: &Group) -> Option<String> {
    let first = group.rows.first()?;
    let a = first.apicv.as_ref()?;
    if first.irq_source == "none" {
        return None;
    }
    let state = a
        .in_effect
        .text(|on| if *on { "on" } else { "off" }.to_string());
    Some(format!(
        "interrupt path: {} irqchip, APICv/AVIC {}",
        outside(&a.irqchip),
        outside(&state)
    ))
}

/// An `ipi` group's sender vCPU: what each IPI cost it (the rows' `ipi_sender`, the same for
/// every row of the group). None for other groups.
pub(crate) fn ipi_sender_line(group: &Group) -> Option<String> {
    let s = group.rows.first()?.ipi_sender.as_ref()?;
    let per_ipi = |c: &Option<crate::results::CountEstimate>| {
        fmt_cost(c.as_ref().map(crate::results::CountEstimate::estimate))
    };
    Some(format!(
        "ipi sender ({} ICR): {} IPIs; per IPI {} exits (its wait between ticks included), \
         {} to the VMM; {} cycles per ICR write (median of {}, rdtsc included)",
        outside(&s.icr),
        fmt_count(s.ipis),
        per_ipi(&s.exits_per_ipi),
        per_ipi(&s.vmm_exits_per_ipi),
        fmt_cost(s.icr_write_cycles),
        s.icr_write_samples
    ))
}

/// What the columns mean, and warnings about rows a reader should not trust as much.
pub(crate) fn legend(report: &RunReport) -> Vec<String> {
    let mut lines = vec![
        // scripts/update-readme-tables.py ends the README's table at the line "cycles/op:".
        "cycles/op: median over rounds of the paired net (block - empty baseline) / ops \
         (cycles/insn for insn rows; ns/op the same in ns); ±h: the 95% CI of that median reaches h from it \
         (farther end); digits beyond the CI's resolution are not printed."
            .to_string(),
        "≈0 (±h): the CI includes 0, the cost cannot be told from the baseline; <0: the whole \
         CI is below the baseline; ±?: too few rounds for a CI. JSON and CSV keep the raw numbers."
            .to_string(),
        format!(
            "exits/op: the KVM `exits` stat; uexits/op: exits handled by irqbench in userspace; \
             both counts, not medians: {}. disturbed: fraction of blocks left out as disturbed.",
            crate::analysis::counts::COUNT_CI_METHOD
        ),
        "comparisons: median of per-round paired ratios (b/a - 1) with its 95% CI.".to_string(),
        format!("{}.", super::verdict::EXITS_DIFFERENCE_METHOD),
    ];
    lines.push(cycles_line(report));
    if report.results.iter().any(|r| r.kind == ResultKind::Insn) {
        lines.push(
            "insn rows: `measures` is what each probe executes per op (popf-set-if is \
             cli; push; popf, popf-clear-if is sti; push; popf, popf-same-if is push; popf, \
             pushf is pushf; pop)."
                .into(),
        );
    }
    if report.results.iter().any(|r| r.pending_latency.is_some()) {
        lines.push(format!(
            "taken: interrupts the guest took in the row's blocks / those the load raised in \
             that time. wait p50/p90: TSC cycles from an interrupt's raise to the guest's \
             handler, median and 90th percentile; {}.",
            crate::analysis::latency::LATENCY_CI_METHOD
        ));
    }
    if report.results.iter().any(|r| !r.precision_reached) {
        lines.push(
            "~ precision not reached: the time budget ran out before the CI was as narrow as \
             the plan asked; re-run longer or on a quieter host."
                .into(),
        );
    }
    if report.results.iter().any(|r| r.lock.is_some()) {
        lines.push(
            "spins/op: spins while another vCPU held the lock; ops/s: all vCPUs together; \
             spread: (max - min) / mean of the vCPUs' own ops/s."
                .into(),
        );
    }
    if !report.ci_method.is_empty() {
        lines.push(format!("CI: {}", report.ci_method));
    }
    lines.extend(super::replicates_text::legend(report));
    if !report.disturbance.sources.is_empty() {
        lines.push(format!(
            "disturbance sources: {}",
            report.disturbance.sources.join(", ")
        ));
    }
    for n in &report.disturbance.not_used {
        lines.push(format!("not used: {n}"));
    }
    lines
}

/// The terminal report at the terminal's width ([`text_width`]).
pub fn render_table(report: &RunReport) -> String {
    render_table_at(report, text_width())
}

/// The report in `width` columns: host header, one table per group, then the per-stat exits,
/// exit sites and failures. Tables are laid out to fit; every other line is wrapped.
pub fn render_table_at(report: &RunReport, width: usize) -> String {
    let mut out = host_header(report, width);
    for group in groups(report) {
        render_group(&mut out, report, &group, width);
    }
    super::answer_lines::render_text(&mut out, report);
    let orphans = orphan_differences(report);
    if !orphans.is_empty() {
        out.push_str("\nderived from paired differences per round:\n");
        for d in orphans {
            let _ = writeln!(
                out,
                "  {}: {} cycles{}",
                d.name,
                fmt_derived(d),
                derived_ns(d)
            );
        }
    }
    if report.results.is_empty() {
        out.push_str("\nno rows\n");
    } else {
        out.push('\n');
        for line in legend(report).iter().chain(&figure_warnings(report)) {
            let _ = writeln!(out, "{line}");
        }
        render_stats(&mut out, report, width);
    }
    render_exit_sites(&mut out, report, width);
    out.push_str(&render_mixed(report));
    out.push_str(&super::scaling::render_scaling(report));
    if !report.failures.is_empty() {
        let _ = writeln!(out, "\nfailures ({})", report.failures.len());
        for f in &report.failures {
            let _ = writeln!(out, "  {}: {}", f.name, f.error);
        }
    }
    // Names, descriptions and guest text come from outside: shown, never sent to the terminal
    // (escaped first, so the wrap counts what is shown).
    wrap(&crate::text::escape(&out), width)
}

/// Appends `items` as a comma-separated list wrapped at `width`.
pub(crate) fn push_wrapped(
    out: &mut String,
    (first_prefix, indent): (&str, &str),
    items: &[String],
    width: usize,
) {
    let mut line = String::from(first_prefix);
    let mut empty = true;
    for item in items {
        let add = if empty {
            item.clone()
        } else {
            format!(", {item}")
        };
        if !empty && line.chars().count() + add.chars().count() + 1 > width {
            line.push(',');
            out.push_str(&line);
            out.push('\n');
            line = format!("{indent}{item}");
        } else {
            line.push_str(&add);
        }
        empty = false;
    }
    out.push_str(&line);
    out.push('\n');
}

fn render_stats(out: &mut String, report: &RunReport, width: usize) {
    // Every result, with its full name: the tables above show only its strategy.
    out.push_str("\nexits per op by KVM stat (net of the baseline ±95% CI; non-zero only)\n");
    for r in &report.results {
        let mut items: Vec<String> = crate::results::kvm_stats(&r.counts)
            .filter(|(_, e)| e.per_op != 0.0)
            .filter_map(|(k, _)| Some(format!("{k}={}", fmt_cost(stat_estimate(r, k)?))))
            .collect();
        if items.is_empty() {
            items.push("-".into());
        }
        push_wrapped(out, (&format!("  {}: ", r.name), "      "), &items, width);
    }
    if report.vm_stats_by_group.is_empty() {
        return;
    }
    out.push_str(
        "\nVM-wide KVM stats by group (exact totals over all its rounds and rows; a VM-wide \
         counter belongs to no one row)\n",
    );
    for (group, stats) in &report.vm_stats_by_group {
        let items: Vec<String> = stats
            .iter()
            .map(|(k, n)| format!("vm.{k}={}", fmt_count(*n)))
            .collect();
        push_wrapped(out, (&format!("  {group}: "), "      "), &items, width);
    }
}

fn render_exit_sites(out: &mut String, report: &RunReport, width: usize) {
    let none = |r: &PhaseResult| r.exit_sites.is_empty() && r.interrupt_sites.is_empty();
    let traced = report.exit_trace.as_ref().map(|t| &t.window_sites);
    if report.results.iter().all(none) && traced.is_none_or(|t| t.is_empty()) {
        return;
    }
    use Align::{Left, Right};
    let kvm = if traced.is_some_and(|t| !t.is_empty()) {
        ", KVM's traced window exits per group"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "\nexit sites (userspace exits, interrupts the guest took{kvm}, by guest code site)"
    );
    let mut t = TextTable::new(&[
        ("row", Left),
        ("strategy", Left),
        ("site", Left),
        ("reason", Left),
        ("count", Right),
        ("rip", Right),
        ("instruction", Left),
    ]);
    t.shrinkable = vec![("row", 16), ("instruction", 16), ("site", 12)];
    // One line a site, under the row (or, for `--trace-exits`, the group) it belongs to.
    let line = |owner: &str, s: &ExitSite| {
        let site = if s.symbol.is_empty() || s.symbol == s.site {
            s.site.clone()
        } else {
            format!("{} ({})", s.site, s.symbol)
        };
        vec![
            owner.to_string(),
            s.strategy.clone(),
            site,
            s.reason.clone(),
            fmt_count(s.total),
            format!("{:#x}", s.rip),
            s.instruction.clone(),
        ]
    };
    for r in &report.results {
        // The busiest sites; the JSON has all of them.
        let exits = r.exit_sites.iter().take(EXIT_SITES_SHOWN);
        for s in exits.chain(r.interrupt_sites.iter().take(EXIT_SITES_SHOWN)) {
            t.rows.push(line(&r.name, s));
        }
    }
    // `--trace-exits`: KVM's window exits, in-kernel ones included, per group (the trace
    // knows no rows).
    for (group, sites) in traced.into_iter().flatten() {
        for s in sites.iter().take(EXIT_SITES_SHOWN) {
            t.rows.push(line(group, s));
        }
    }
    out.push_str(&t.render("  ", width));
}

/// Mixed phases: overall throughput, and per strategy the operations the guest counted and the
/// userspace exits attributed to that strategy's code.
pub fn render_mixed(report: &RunReport) -> String {
    let mut out = String::new();
    for r in report.results.iter().filter(|r| !r.strategy_ops.is_empty()) {
        if out.is_empty() {
            out.push_str("\nmixed rows (per strategy: guest-counted ops, attributed exits)\n");
        }
        let total: u64 = r.strategy_ops.values().sum();
        let _ = writeln!(
            out,
            "  {}: {} ops/s overall (median)",
            r.name,
            fmt_count(r.ops_per_sec.median as u64)
        );
        for (strategy, ops) in &r.strategy_ops {
            let exits: u64 = r
                .exit_sites
                .iter()
                .filter(|s| s.strategy == *strategy)
                .map(|s| s.total)
                .sum();
            let _ = writeln!(
                out,
                "    {strategy:<16} {:>8} ops ({:>5.1}%)  {exits} exits",
                ops,
                *ops as f64 * 100.0 / total.max(1) as f64
            );
        }
    }
    out
}
