//! The exit breakdown in the Markdown report: per row, like `perf kvm stat`, the exits the VMM
//! handled by reason and every KVM stat counter; and, after `run --trace-exits`, KVM's exits by
//! hardware reason per group, its interrupt-window exits by guest code site. Markdown only: a dozen lines per row would bury the terminal
//! table (README "Exit breakdown").

use std::fmt::Write as _;

use crate::results::{ExitReasonFigure, HandledBy, HandlingTime, PhaseResult, RunReport};

use super::columns::stat_estimate;
use super::format::{fmt_cost, fmt_sig};

/// Writes one Markdown table: (out, headers, right-aligned, rows). The Markdown renderer's, passed
/// in so that this file and it do not import each other.
pub(crate) type TableFn = dyn Fn(&mut String, &[&str], &[bool], &[Vec<String>]);

const HEADERS: [&str; 6] = [
    "reason",
    "by",
    "total",
    "per op (±95% CI)",
    "share of exits",
    "time min / mean / max (µs)",
];
const RIGHT: [bool; 6] = [false, false, true, true, true, true];

/// Handling times in µs, the unit a VMM's round trip is read in.
fn fmt_time(t: Option<HandlingTime>) -> String {
    t.map_or_else(
        || "—".into(),
        |t| {
            format!(
                "{} / {} / {}",
                fmt_sig(t.min / 1e3, 3),
                fmt_sig(t.mean / 1e3, 3),
                fmt_sig(t.max / 1e3, 3)
            )
        },
    )
}

fn line(r: &PhaseResult, e: &ExitReasonFigure) -> Vec<String> {
    let per_op = stat_estimate(r, &e.count_key()).map_or_else(|| "no data".into(), fmt_cost);
    vec![
        format!("`{}`", e.reason),
        match e.handled_by {
            HandledBy::Vmm => "vmm",
            HandledBy::Kvm => "kvm",
        }
        .into(),
        e.total.to_string(),
        per_op,
        e.share_of_exits
            .map_or_else(|| "—".into(), |s| format!("{:.1}%", s * 100.0)),
        fmt_time(e.time_ns),
    ]
}

/// The `## Exit breakdown` section; empty when no row has one.
pub(crate) fn render_exit_breakdown(report: &RunReport, md_table: &TableFn) -> String {
    let mut out = String::new();
    let rows: Vec<_> = report
        .results
        .iter()
        .filter(|r| !r.exit_reasons.is_empty())
        .collect();
    if !rows.is_empty() {
        out.push_str(
            "\n## Exit breakdown\n\nPer row: the exits the VMM handled (`vmm`, time from \
             KVM_RUN's return to the next KVM_RUN) and every KVM stat counter (`kvm`). Total: \
             all blocks; per op: mean over kept rounds net of the baseline; share: of KVM's \
             `exits` over kept rounds (gross).\n",
        );
    }
    for r in rows {
        let _ = writeln!(out, "\n### `{}`\n", r.name);
        let lines: Vec<Vec<String>> = r.exit_reasons.iter().map(|e| line(r, e)).collect();
        md_table(&mut out, &HEADERS, &RIGHT, &lines);
    }
    if let Some(trace) = &report.exit_trace {
        out.push_str("\n## Exits traced in KVM (`--trace-exits`)\n\n");
        let _ = writeln!(out, "{}", trace.note);
        for (group, exits) in &trace.groups {
            let _ = writeln!(out, "\n### group `{group}`\n");
            let lines: Vec<Vec<String>> = exits
                .iter()
                .map(|e| {
                    vec![
                        format!("`{}`", e.reason),
                        e.total.to_string(),
                        fmt_time(e.time_ns),
                    ]
                })
                .collect();
            md_table(
                &mut out,
                &["exit reason", "total", "exit → entry min / mean / max (µs)"],
                &[false, true, true],
                &lines,
            );
            let Some(sites) = trace.window_sites.get(group) else {
                continue;
            };
            out.push_str("\nInterrupt-window exits by the guest code site they left:\n\n");
            let lines: Vec<Vec<String>> = sites
                .iter()
                .map(|s| {
                    vec![
                        s.strategy.clone(),
                        format!("{} (`{}`)", s.site, s.symbol),
                        format!("`{}`", s.reason),
                        s.total.to_string(),
                        format!("`{:#x}` `{}`", s.rip, s.instruction),
                    ]
                })
                .collect();
            md_table(
                &mut out,
                &[
                    "strategy",
                    "site",
                    "exit reason",
                    "total",
                    "rip, instruction",
                ],
                &[false, false, false, true, false],
                &lines,
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{ExitTrace, PhaseResult, TracedExit};

    #[test]
    fn the_breakdown_shows_total_per_op_share_and_time() {
        let mut report = RunReport::default();
        let per_op = crate::results::CountEstimate {
            per_op: 0.0207,
            ci95: crate::results::Ci::from([0.0125, 0.0289]),
            rounds: 30,
            ..Default::default()
        };
        report.results.push(PhaseResult {
            name: "g/native-popf".into(),
            counts: [("vmm:irq-window-open".to_string(), per_op)].into(),
            exit_reasons: vec![
                ExitReasonFigure {
                    reason: "irq-window-open".into(),
                    handled_by: HandledBy::Vmm,
                    total: 554,
                    share_of_exits: Some(0.1739),
                    time_ns: Some(HandlingTime {
                        min: 4905.0,
                        mean: 8246.0,
                        max: 25564.0,
                    }),
                },
                ExitReasonFigure {
                    reason: "exits".into(),
                    handled_by: HandledBy::Kvm,
                    total: 3107,
                    ..Default::default()
                },
            ],
            ..Default::default()
        });
        report.exit_trace = Some(ExitTrace {
            available: false,
            note: "no kvm:kvm_exit events fired".into(),
            groups: [(
                "g".to_string(),
                vec![TracedExit {
                    reason: "io".into(),
                    total: 3,
                    time_ns: None,
                }],
            )]
            .into(),
            window_sites: [(
                "g".to_string(),
                vec![crate::results::ExitSite {
                    strategy: "native-popf".into(),
                    site: "restore".into(),
                    symbol: "irqbench_opfb0_native_popf_restore".into(),
                    reason: "kvm:INTERRUPT_WINDOW".into(),
                    total: 7,
                    rip: 0x100b87,
                    instruction: "dec     %r12".into(),
                    sti_rip: None,
                }],
            )]
            .into(),
        });
        let md = crate::report::render_markdown(&report);
        for part in [
            "### `g/native-popf`",
            "| `irq-window-open` | vmm | 554 | 0.0207 ±0.0082 | 17.4% | 4.91 / 8.25 / 25.6 |",
            "| `exits` | kvm | 3107 | no data | — | — |",
            "no kvm:kvm_exit events fired",
            "| `io` | 3 | — |",
            "| native-popf | restore (`irqbench_opfb0_native_popf_restore`) | `kvm:INTERRUPT_WINDOW` | 7 | `0x100b87` `dec     %r12` |",
        ] {
            assert!(md.contains(part), "{part:?} missing:\n{md}");
        }
        let none = |_: &mut String, _: &[&str], _: &[bool], _: &[Vec<String>]| {};
        assert_eq!(render_exit_breakdown(&RunReport::default(), &none), "");
    }
}
