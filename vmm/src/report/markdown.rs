//! A Markdown report to paste into an issue or a mail: the same groups, columns, comparisons
//! and derived costs as the terminal table, and the answers across them.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::text::{escape_line, outside};

use crate::results::RunReport;

use super::answer_lines as text;
use super::columns::{grid, stat_estimate, Align};
use super::csv::kvm_stat_names;
use super::format::{fmt_cost, human_timestamp, tsc_ghz};
use super::table::{
    comparison_lines, difference_lines, figure_warnings, group_heading, groups, irqchip_text,
    legend,
};

/// A table cell: pipes would split the cell, newlines would end the table.
pub(crate) fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

pub(crate) fn md_table(out: &mut String, headers: &[&str], right: &[bool], rows: &[Vec<String>]) {
    let _ = writeln!(out, "| {} |", headers.join(" | "));
    let rule: Vec<&str> = right
        .iter()
        .map(|r| if *r { "---:" } else { "---" })
        .collect();
    let _ = writeln!(out, "|{}|", rule.join("|"));
    for row in rows {
        let cells: Vec<String> = row.iter().map(|c| md_cell(c)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
}

fn md_map(map: &BTreeMap<String, impl std::fmt::Display>) -> String {
    if map.is_empty() {
        return "none".into();
    }
    map.iter()
        .map(|(k, v)| format!("`{k}`={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn header(out: &mut String, report: &RunReport) {
    let h = &report.host;
    let _ = writeln!(
        out,
        "# irqbench results: {}\n",
        md_cell(&report.config_name)
    );
    if report.partial {
        let reason = report.partial_reason.as_deref().unwrap_or("reason unknown");
        let _ = writeln!(out, "> **PARTIAL run:** {}\n", md_cell(reason));
    }
    if !report.description.is_empty() {
        let _ = writeln!(
            out,
            "{}\n",
            md_cell(&outside(report.description.trim_end()))
        );
    }
    let kvm = format!(
        "{}{}, API {}, max vCPUs {} (recommended {})",
        h.kvm_flavour,
        if h.nested { " (nested)" } else { "" },
        h.kvm_api_version,
        h.max_vcpus,
        h.recommended_vcpus
    );
    let run = format!(
        "irqbench {}, config `{}` ({}), started {}, {:.1} s",
        outside(&report.irqbench_version),
        outside(&report.config_name),
        outside(&report.config_source),
        human_timestamp(report.started_unix),
        report.wall_seconds
    );
    let bullets = [
        (
            "CPU",
            format!("{} ({} CPUs)", outside(&h.cpu_model), h.host_cpus),
        ),
        ("kernel", outside(&h.kernel_release).into_owned()),
        ("KVM", kvm),
        ("TSC", tsc_ghz(h.tsc_khz)),
        ("irqchip", irqchip_text(report)),
        (
            "vCPU pinning",
            match (h.vcpu_pinning, h.pinning.cpus.is_empty()) {
                (false, _) => "no".into(),
                (true, true) => "yes".into(),
                (true, false) => format!("vCPU i on CPU {:?}[i]", h.pinning.cpus),
            },
        ),
        ("module parameters", md_map(&h.module_params)),
        ("capabilities", md_map(&h.capabilities)),
        ("run", run),
        ("ad hoc", adhoc_text(report)),
        ("CI", report.ci_method.clone()),
    ];
    for (k, v) in bullets.iter().filter(|(_, v)| !v.is_empty()) {
        let _ = writeln!(out, "- **{k}:** {v}");
    }
    for w in &h.warnings {
        let _ = writeln!(out, "- **warning:** {}", escape_line(w));
    }
    if let Some(v) = &h.validation {
        for (head, why) in crate::validate::problems(v) {
            let _ = writeln!(out, "- **{head}** — {why}");
        }
    }
}

fn results(out: &mut String, report: &RunReport) {
    out.push_str("\n## Results\n");
    if report.results.is_empty() {
        out.push_str("\nNo rows.\n");
        return;
    }
    for group in groups(report) {
        let g = grid(group.kind, &group.rows);
        let _ = writeln!(
            out,
            "\n### {}\n",
            md_cell(&group_heading(&group, &g.uniform))
        );
        let mut headers = vec!["row"];
        headers.extend(g.headers.iter().map(|(h, _)| h.as_str()));
        let mut right = vec![false];
        right.extend(g.headers.iter().map(|(_, a)| *a == Align::Right));
        let rows: Vec<Vec<String>> = group
            .rows
            .iter()
            .zip(&g.rows)
            .map(|(r, cells)| {
                let mut row = vec![format!("`{}`", r.name)];
                row.extend(cells.iter().map(|c| c.trim_end().to_string()));
                row
            })
            .collect();
        md_table(out, &headers, &right, &rows);
        if !g.all_zero.is_empty() {
            let _ = writeln!(out, "\n0 in every row: {}.", g.all_zero.join(", "));
        }
        let comparisons = comparison_lines(report, &group);
        if !comparisons.is_empty() {
            out.push('\n');
        }
        for line in comparisons {
            let _ = writeln!(out, "- {}", md_cell(&line));
        }
        let diffs = difference_lines(report, &group);
        if !diffs.is_empty() {
            out.push_str("\nDerived from paired differences per round:\n\n");
        }
        for line in diffs {
            let _ = writeln!(out, "- {}", md_cell(&line));
        }
    }
    out.push('\n');
    for line in legend(report).iter().chain(&figure_warnings(report)) {
        let _ = writeln!(out, "{}  ", md_cell(line));
    }
}

fn exits_by_stat(out: &mut String, report: &RunReport) {
    let stats = kvm_stat_names(report);
    if stats.is_empty() {
        return;
    }
    out.push_str("\n## Exits per op by KVM stat (net of the baseline, ±95% CI)\n\n");
    let mut headers = vec!["row"];
    headers.extend(stats.iter().copied());
    let mut right = vec![false];
    right.extend(vec![true; stats.len()]);
    let rows: Vec<Vec<String>> = report
        .results
        .iter()
        .map(|r| {
            let mut row = vec![format!("`{}`", r.name)];
            row.extend(
                stats
                    .iter()
                    .map(|s| stat_estimate(r, s).map_or_else(|| "0".into(), fmt_cost)),
            );
            row
        })
        .collect();
    md_table(out, &headers, &right, &rows);
}

fn exit_sites(out: &mut String, report: &RunReport) {
    let sites: Vec<Vec<String>> = report
        .results
        .iter()
        .flat_map(|r| {
            r.exit_sites.iter().map(|s| {
                vec![
                    format!("`{}`", r.name),
                    s.strategy.clone(),
                    s.site.clone(),
                    s.reason.clone(),
                    s.total.to_string(),
                    format!("`{}`", s.instruction),
                ]
            })
        })
        .collect();
    if sites.is_empty() {
        return;
    }
    out.push_str("\n## Exit sites\n\n");
    md_table(
        out,
        &["row", "strategy", "site", "reason", "count", "instruction"],
        &[false, false, false, false, true, false],
        &sites,
    );
}

/// The `## Answers` section of the Markdown report (empty without answers).
fn answers(out: &mut String, report: &RunReport) {
    if report.answers.is_empty() {
        return;
    }
    out.push_str("\n## Answers\n");
    for a in &report.answers {
        let _ = writeln!(out, "\n### {}\n", md_cell(&text::heading(a)));
        let rows: Vec<Vec<String>> = a
            .conditions
            .iter()
            .map(|c| vec![c.label.clone(), text::condition_value(c)])
            .collect();
        md_table(out, &["condition", "b vs a"], &[false, false], &rows);
        if !a.interactions.is_empty() {
            out.push('\n');
        }
        for i in &a.interactions {
            let _ = writeln!(
                out,
                "- {}: {}",
                md_cell(&text::interaction_label(i)),
                md_cell(&text::interaction_value(i))
            );
        }
    }
    out.push('\n');
    for line in text::legend(report) {
        let _ = writeln!(out, "{}  ", md_cell(&line));
    }
}

/// A Markdown report to paste into an issue or a mail.
pub fn render_markdown(report: &RunReport) -> String {
    let mut out = String::new();
    header(&mut out, report);
    results(&mut out, report);
    answers(&mut out, report);
    exits_by_stat(&mut out, report);
    out.push_str(&super::exits::render_exit_breakdown(report, &md_table));
    exit_sites(&mut out, report);
    let scaling = super::scaling::render_scaling(report);
    if !scaling.is_empty() {
        let _ = writeln!(out, "\n## Scaling\n\n```{scaling}```");
    }
    if !report.failures.is_empty() {
        out.push_str("\n## Failures\n\n");
        for f in &report.failures {
            let _ = writeln!(out, "- `{}`: {}", f.name, md_cell(&f.error));
        }
    }
    crate::text::escape(&out).into_owned()
}

/// The run's `--set`/`--only` as a code span, or nothing.
fn adhoc_text(report: &RunReport) -> String {
    if report.adhoc.is_empty() {
        String::new()
    } else {
        format!("`` {} ``", report.adhoc.flags())
    }
}
