//! The warnings under a report's tables: one line per kind of warning for the whole run, listing
//! the rows (or groups) it is about, so a 40-row run on a busy host says "busy" once, not 40
//! times.

use crate::results::warning::{Warning, WarningKind};
use crate::results::RunReport;

use super::columns::DISTURBED_WARN;

/// How many names a merged warning lists before "… and N more".
const NAMES_SHOWN: usize = 4;

/// Whether a line about several rows lists them (the full report) or only counts them (one
/// screen, a mail: the list would push out what the warning says; `--verbose` keeps it).
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Names {
    Listed,
    Counted,
}

/// The run's warnings about its figures (e.g. LAPIC ticks delivered short), then the rows whose
/// disturbed fraction is high enough to doubt that the kept rounds are typical; each kind once.
pub(crate) fn figure_warnings(report: &RunReport) -> Vec<String> {
    figure_warnings_with(report, Names::Listed)
}

/// [`figure_warnings`], its rows listed or only counted.
pub(crate) fn figure_warnings_with(report: &RunReport, names: Names) -> Vec<String> {
    let groups: Vec<&str> = report.results.iter().map(|r| r.group.as_str()).collect();
    let mut lines: Vec<String> = merge(&report.warnings, &groups, names)
        .into_iter()
        .map(|w| format!("warning: {w}"))
        .collect();
    lines.extend(disturbed_warning(report, names));
    lines
}

/// `names` as "a, b, c, d … and 9 more".
pub fn name_list(names: &[&str]) -> String {
    let shown = if names.len() > NAMES_SHOWN + 1 {
        NAMES_SHOWN
    } else {
        names.len()
    };
    let mut out = names[..shown].join(", ");
    if shown < names.len() {
        out.push_str(&format!(" … and {} more", names.len() - shown));
    }
    out
}

/// One line for every row whose disturbed fraction passes [`DISTURBED_WARN`], with the range.
fn disturbed_warning(report: &RunReport, listed: Names) -> Option<String> {
    let mut busy: Vec<(&str, f64)> = report
        .results
        .iter()
        .filter(|r| r.disturbed_fraction > DISTURBED_WARN)
        .map(|r| (r.name.as_str(), r.disturbed_fraction))
        .collect();
    if busy.is_empty() {
        return None;
    }
    // The worst first: the names shown are the ones to look at.
    busy.sort_by(|a, b| b.1.total_cmp(&a.1));
    let names: Vec<&str> = busy.iter().map(|(n, _)| *n).collect();
    let (worst, least) = (busy[0].1, busy[busy.len() - 1].1);
    let range = if busy.len() == 1 {
        format!("{:.1}%", worst * 100.0)
    } else {
        format!("{:.1}–{:.1}%", least * 100.0, worst * 100.0)
    };
    let their = if busy.len() == 1 { "its" } else { "their" };
    let which = match listed {
        Names::Listed => format!(" ({}; {range} of {their} blocks)", name_list(&names)),
        Names::Counted => String::new(),
    };
    Some(format!(
        "warning: disturbed > {:.0}%: {}{which}: the host was busy, treat {their} CIs with care",
        DISTURBED_WARN * 100.0,
        rows(busy.len()),
    ))
}

fn rows(n: usize) -> String {
    if n == 1 {
        "1 row".into()
    } else {
        format!("{n} rows")
    }
}

/// Warnings of one kind about different rows or groups as one line: the first one's figures,
/// with every subject it applies to. Subjects that are all among `groups` (a group's warning:
/// a speed step, min_rounds missed) are counted as groups, not rows. A warning about the run
/// as a whole keeps its own line.
fn merge(warnings: &[Warning], groups: &[&str], listed: Names) -> Vec<String> {
    let mut kinds: Vec<(WarningKind, Vec<&str>, &str)> = Vec::new();
    let mut out_order: Vec<Result<usize, &Warning>> = Vec::new();
    for w in warnings {
        let Some(subject) = w.subject.as_deref() else {
            out_order.push(Err(w));
            continue;
        };
        match kinds.iter().position(|(kind, _, _)| *kind == w.kind) {
            Some(i) => kinds[i].1.push(subject),
            None => {
                out_order.push(Ok(kinds.len()));
                kinds.push((w.kind, vec![subject], w.figures.as_str()));
            }
        }
    }
    out_order
        .into_iter()
        .map(|entry| match entry {
            Err(w) => w.to_string(),
            Ok(i) => {
                let (_, names, figures) = &kinds[i];
                if names.len() == 1 {
                    format!("{}: {figures}", names[0])
                } else {
                    let count = if names.iter().all(|n| groups.contains(n)) {
                        format!("{} groups", names.len())
                    } else {
                        rows(names.len())
                    };
                    let which = match listed {
                        Names::Listed => format!(" ({})", name_list(names)),
                        Names::Counted => String::new(),
                    };
                    format!("{count}{which}: {figures} (the figures are {}'s)", names[0])
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::PhaseResult;

    fn ticks(row: &str, took: u32) -> Warning {
        let figures = format!(
            "the guest took {took} of the 69 LAPIC timer interrupts its 1000 µs period asks \
             for ({})",
            69_000u32
                .checked_div(took)
                .map_or("none at all".to_string(), |us| format!("one every {us} µs"))
        );
        Warning::about(WarningKind::TicksShort, row, figures)
    }

    fn other(row: &str) -> Warning {
        Warning::about(
            WarningKind::InjectShort,
            row,
            "something else entirely".into(),
        )
    }

    #[test]
    fn forty_busy_rows_give_one_line_per_kind_naming_the_rows() {
        let mut report = RunReport::default();
        for i in 0..40 {
            let name = format!("big/s{i}/n0/none/1v");
            report.warnings.push(ticks(&name, i));
            report.results.push(PhaseResult {
                name,
                disturbed_fraction: 0.06 + f64::from(i) / 100.0,
                ..Default::default()
            });
        }
        report.warnings.insert(
            3,
            Warning::run(
                WarningKind::NoData,
                "no data: 1 row(s) kept no round".into(),
            ),
        );
        let lines = figure_warnings(&report);
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert!(
            lines[0].starts_with("warning: 40 rows (big/s0/n0/none/1v, "),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains("… and 36 more): the guest took 0 of"),
            "{}",
            lines[0]
        );
        assert!(lines[0].ends_with("(the figures are big/s0/n0/none/1v's)"));
        assert_eq!(lines[1], "warning: no data: 1 row(s) kept no round");
        assert!(
            lines[2].starts_with("warning: disturbed > 5%: 40 rows (big/s39/n0/none/1v, "),
            "{}",
            lines[2]
        );
        assert!(
            lines[2].contains("and 36 more; 6.0–45.0% of their blocks)"),
            "{}",
            lines[2]
        );
        // One screen and a mail count the rows without naming them.
        let counted = figure_warnings_with(&report, Names::Counted);
        assert!(
            counted[0].starts_with("warning: 40 rows: the guest took 0 of")
                && counted[0].ends_with("(the figures are big/s0/n0/none/1v's)"),
            "{}",
            counted[0]
        );
        assert_eq!(counted[1], lines[1]);
        assert_eq!(
            counted[2],
            "warning: disturbed > 5%: 40 rows: the host was busy, treat their CIs with care"
        );
    }

    #[test]
    fn different_kinds_stay_apart_and_one_row_keeps_its_own_line() {
        let w = vec![ticks("g/a/1v", 1), other("g/b/1v"), other("g/c/1v")];
        let merged = merge(&w, &[], Names::Listed);
        assert_eq!(merged[0], ticks("g/a/1v", 1).to_string());
        // One kind, whatever its figures say.
        assert_eq!(
            merge(
                &[ticks("g/a/1v", 0), ticks("g/b/1v", 3)],
                &[],
                Names::Listed
            )
            .len(),
            1
        );
        // A line read back from a file is its own: its text is never parsed for a subject.
        let recorded: Vec<Warning> =
            serde_json::from_str(r#"["g/a/1v: the guest took 1", "g/b/1v: the guest took 1"]"#)
                .expect("lines");
        assert_eq!(
            merge(&recorded, &[], Names::Listed),
            ["g/a/1v: the guest took 1", "g/b/1v: the guest took 1"]
        );
        assert_eq!(
            merged[1],
            "2 rows (g/b/1v, g/c/1v): something else entirely (the figures are g/b/1v's)"
        );
        assert_eq!(merged.len(), 2);
        assert!(figure_warnings(&RunReport::default()).is_empty());
        assert_eq!(name_list(&["a", "b", "c", "d", "e"]), "a, b, c, d, e");
        assert_eq!(
            name_list(&["a", "b", "c", "d", "e", "f"]),
            "a, b, c, d … and 2 more"
        );
    }

    /// Two groups' speed-step warnings merge into one line that counts groups, not rows.
    #[test]
    fn group_warnings_merge_as_groups() {
        let steps = crate::analysis::speed::SpeedSteps {
            fastest: 16_800.0,
            slowest: 21_400.0,
            stretches: 20,
            stretch_rounds: 50,
        };
        let mut report = RunReport::default();
        for g in ["a/n0/none/1v", "b/n0/none/1v"] {
            report
                .warnings
                .push(crate::analysis::speed::warning(g, &steps));
            report.results.push(PhaseResult {
                name: format!("{}/native-skip/n0/none/1v", &g[..1]),
                group: g.into(),
                ..Default::default()
            });
        }
        let lines = figure_warnings(&report);
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(
            lines[0].starts_with(
                "warning: 2 groups (a/n0/none/1v, b/n0/none/1v): the host changed speed while it \
                 ran: its empty loop's cost stepped between 16800 and 21400 cycles/op (+27%)"
            ),
            "{}",
            lines[0]
        );
    }
}
