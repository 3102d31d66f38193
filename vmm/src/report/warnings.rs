//! The warnings under a report's tables: one line per kind of warning for the whole run, listing
//! the rows (or groups) it is about, so a 40-row run on a busy host says "busy" once, not 40
//! times.

use crate::results::RunReport;

use super::columns::DISTURBED_WARN;

/// How many names a merged warning lists before "… and N more".
const NAMES_SHOWN: usize = 4;

/// The run's warnings about its figures (e.g. LAPIC ticks delivered short), then the rows whose
/// disturbed fraction is high enough to doubt that the kept rounds are typical; each kind once.
pub(crate) fn figure_warnings(report: &RunReport) -> Vec<String> {
    let groups: Vec<&str> = report.results.iter().map(|r| r.group.as_str()).collect();
    let mut lines: Vec<String> = merge(&report.warnings, &groups)
        .into_iter()
        .map(|w| format!("warning: {w}"))
        .collect();
    lines.extend(disturbed_warning(report));
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
fn disturbed_warning(report: &RunReport) -> Option<String> {
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
    Some(format!(
        "warning: disturbed > {:.0}%: {} ({}; {range} of {their} blocks): the host was busy, treat \
         {their} CIs with care",
        DISTURBED_WARN * 100.0,
        rows(busy.len()),
        name_list(&names),
        their = if busy.len() == 1 { "its" } else { "their" },
    ))
}

fn rows(n: usize) -> String {
    if n == 1 {
        "1 row".into()
    } else {
        format!("{n} rows")
    }
}

/// Warnings that say the same about different rows or groups ("NAME: text", differing only in
/// NAME and numbers) as one: the first one's text, with every name it applies to. Names that
/// are all among `groups` (a group's warning: a speed step, min_rounds missed) are counted as
/// groups, not rows.
fn merge(warnings: &[String], groups: &[&str]) -> Vec<String> {
    let mut kinds: Vec<(Vec<&str>, &str)> = Vec::new();
    let mut by_shape: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut out_order: Vec<Result<usize, &str>> = Vec::new();
    for w in warnings {
        let Some((subject, text)) = subject_of(w) else {
            out_order.push(Err(w));
            continue;
        };
        match by_shape.entry(shape(text)) {
            std::collections::hash_map::Entry::Occupied(i) => kinds[*i.get()].0.push(subject),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(kinds.len());
                out_order.push(Ok(kinds.len()));
                kinds.push((vec![subject], text));
            }
        }
    }
    out_order
        .into_iter()
        .map(|entry| match entry {
            Err(w) => w.to_string(),
            Ok(i) => {
                let (names, text) = &kinds[i];
                if names.len() == 1 {
                    format!("{}: {text}", names[0])
                } else {
                    let count = if names.iter().all(|n| groups.contains(n)) {
                        format!("{} groups", names.len())
                    } else {
                        rows(names.len())
                    };
                    format!(
                        "{count} ({}): {text} (the figures are {}'s)",
                        name_list(names),
                        names[0]
                    )
                }
            }
        })
        .collect()
}

/// "quick/pvop-skip/n0/none/1v: the guest took …" → the name and the text after it; `None`
/// when the warning does not start with a name (one word, then ": ").
fn subject_of(w: &str) -> Option<(&str, &str)> {
    let (subject, text) = w.split_once(": ")?;
    (!subject.is_empty() && !subject.contains(' ') && subject.contains('/'))
        .then_some((subject, text))
}

/// The text with every run of digits as `#` and what stands in parentheses left out: two
/// warnings of one shape differ only in numbers and in their details.
fn shape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_number = false;
    let mut depth = 0usize;
    for c in text.chars() {
        if c == '(' {
            depth += 1;
        }
        if depth > 0 {
            depth -= usize::from(c == ')');
            continue;
        }
        if c.is_ascii_digit() || (in_number && c == '.') {
            if !in_number {
                out.push('#');
            }
            in_number = true;
        } else {
            in_number = false;
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::PhaseResult;

    fn ticks(row: &str, took: u32) -> String {
        format!(
            "{row}: the guest took {took} of the 69 LAPIC timer interrupts its 1000 µs period \
             asks for ({})",
            69_000u32
                .checked_div(took)
                .map_or("none at all".to_string(), |us| format!("one every {us} µs"))
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
        report
            .warnings
            .insert(3, "no data: 1 row(s) kept no round".into());
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
    }

    #[test]
    fn different_texts_stay_apart_and_one_row_keeps_its_own_line() {
        let w = vec![
            ticks("g/a/1v", 1),
            "g/b/1v: something else entirely".to_string(),
            "g/c/1v: something else entirely".to_string(),
        ];
        let merged = merge(&w, &[]);
        assert_eq!(merged[0], ticks("g/a/1v", 1));
        // Only the details in parentheses differ: one kind.
        assert_eq!(
            merge(&[ticks("g/a/1v", 0), ticks("g/b/1v", 3)], &[]).len(),
            1
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
