//! The compact `history` listing: the runs, then one table of rows × runs, each cell the row's
//! median ±h in that run; runs past the width continue in panels that repeat the row names.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::trend::{estimate, heading, host_text, runs_table, runs_table_with, trends};
use super::{RunRow, TrendPoint};
use crate::report::columns::Align;
use crate::report::format::fmt_cost;
use crate::report::table::TextTable;

/// `history` without `--long`, in `width` columns.
pub fn render_history_pivot(
    db: &std::path::Path,
    runs: &[RunRow],
    points: &[TrendPoint],
    width: usize,
) -> String {
    let mut out = heading(db, runs);
    // One host for every run (the usual case) is said once: the table then fits a terminal.
    let host = runs.first().map(host_text);
    match host.filter(|h| runs.iter().all(|r| host_text(r) == *h)) {
        Some(h) => {
            let h = crate::text::outside(&h);
            out.push_str(&crate::report::wrap(&format!("every run on {h}"), width));
            out.push('\n');
            out.push_str(&runs_table_with(runs, false));
        }
        None => out.push_str(&runs_table(runs)),
    }
    let trends = trends(points);
    if trends.is_empty() {
        return out;
    }
    let insn = trends.iter().any(|t| t.unit == "cycles/insn");
    let note = format!(
        "per row and run: median ±h {}, h = the farther end of its 95% CI; `-`: the run has no \
         such row (--long: a table per row)",
        if insn {
            "cycles/op (cycles/insn for insn rows)"
        } else {
            "cycles/op"
        }
    );
    let names: Vec<&str> = trends.iter().map(|t| t.name).collect();
    let (short, pattern) = shortened(&names);
    let note = match pattern {
        Some(p) => format!(
            "{note}; every row is {}, shown by its `*` parts",
            crate::text::outside(&p)
        ),
        None => note,
    };
    let _ = writeln!(out, "\n{}", crate::report::wrap(&note, width));
    let cells: HashMap<(i64, &str), &TrendPoint> = points
        .iter()
        .map(|p| ((p.run_id, p.name.as_str()), p))
        .collect();
    // Only the runs that have a row: a run whose rows were all filtered out would be a column
    // of `-`. Linear in the points: an imported run may hold hundreds of thousands of rows.
    let with_rows: std::collections::HashSet<i64> = points.iter().map(|p| p.run_id).collect();
    let columns: Vec<i64> = runs
        .iter()
        .map(|r| r.id)
        .filter(|id| with_rows.contains(id))
        .collect();
    let mut headers = vec![("row".to_string(), Align::Left)];
    headers.extend(columns.iter().map(|id| (format!("run {id}"), Align::Right)));
    let mut table = TextTable {
        headers,
        rows: Vec::new(),
        shrinkable: Vec::new(),
    };
    for (t, name) in trends.iter().zip(short) {
        let mut row = vec![name];
        row.extend(columns.iter().map(|id| {
            cells
                .get(&(*id, t.name))
                .map_or("-".to_string(), |p| fmt_cost(estimate(p)))
        }));
        table.rows.push(row);
    }
    out.push_str(&table.render("  ", width));
    out
}

/// The names with the `/`-parts every name shares left out, and the pattern they share
/// (`forty/*/*/*/1v`); the names unchanged when they differ in shape or share nothing.
fn shortened(names: &[&str]) -> (Vec<String>, Option<String>) {
    let parts: Vec<Vec<&str>> = names.iter().map(|n| n.split('/').collect()).collect();
    let n = parts.first().map_or(0, Vec::len);
    let unchanged = || names.iter().map(|s| (*s).to_string()).collect();
    if names.len() < 2 || n < 2 || parts.iter().any(|p| p.len() != n) {
        return (unchanged(), None);
    }
    let shared: Vec<bool> = (0..n)
        .map(|i| parts.iter().all(|p| p[i] == parts[0][i]))
        .collect();
    if !shared.contains(&true) || shared.iter().all(|s| *s) {
        return (unchanged(), None);
    }
    let short = parts
        .iter()
        .map(|p| {
            let kept: Vec<&str> = (0..n).filter(|i| !shared[*i]).map(|i| p[i]).collect();
            kept.join("/")
        })
        .collect();
    let pattern: Vec<&str> = (0..n)
        .map(|i| if shared[i] { parts[0][i] } else { "*" })
        .collect();
    (short, Some(pattern.join("/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_every_row_shares_are_left_out_and_named() {
        let (short, pattern) = shortened(&["q/native-popf/n0/none/1v", "q/pvop-skip/n0.5/none/1v"]);
        assert_eq!(short, ["native-popf/n0", "pvop-skip/n0.5"]);
        assert_eq!(pattern.as_deref(), Some("q/*/*/none/1v"));
        // Different shapes, one row, or nothing shared: the names as they are.
        assert_eq!(shortened(&["a/b", "a/b/c"]).1, None);
        assert_eq!(shortened(&["a/b"]).0, ["a/b"]);
        assert_eq!(shortened(&["a/b", "c/d"]).1, None);
        assert_eq!(shortened(&["a/b", "a/b"]).1, None);
        assert_eq!(shortened(&["", ""]).1, None);
    }

    fn run_row(id: i64) -> RunRow {
        RunRow {
            id,
            started_unix: 1_800_000_000 + id as u64 * 60,
            saved_utc: String::new(),
            irqbench_version: "0.1.0".into(),
            config_name: "quick".into(),
            hostname: "h".into(),
            host_label: "cpu".into(),
            partial: false,
            origin: "run".into(),
            rows: 12,
            guest_sha256: None,
            config_sha256: None,
            baselines: Vec::new(),
        }
    }

    /// 20 runs × 12 rows: one line per row and panel, every line within the width, every run
    /// and every cell present once; a row a run lacks is `-`.
    #[test]
    fn runs_by_rows_fit_the_width_in_panels() {
        let runs: Vec<RunRow> = (1..=20).map(run_row).collect();
        let mut points = Vec::new();
        for r in &runs {
            for s in 0..12 {
                if r.id == 7 && s == 3 {
                    continue;
                }
                points.push(TrendPoint {
                    run_id: r.id,
                    started_unix: r.started_unix,
                    name: format!("quick/strategy-{s}/n0/none/1v"),
                    kind: "strategy".into(),
                    strategy: format!("strategy-{s}"),
                    median: 1000.0 + (r.id * 10 + s) as f64,
                    ci95: Some(crate::results::Ci::from([
                        990.0,
                        1020.0 + (r.id * 10 + s) as f64,
                    ])),
                });
            }
        }
        let text = render_history_pivot(std::path::Path::new("/db"), &runs, &points, 80);
        assert!(text.contains("every run on h: cpu\n"), "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
        let pivot = &text[text.find("per row and run").unwrap()..];
        assert!(pivot.lines().all(|l| l.chars().count() <= 80), "{pivot}");
        for id in 1..=20 {
            assert_eq!(
                pivot.matches(&format!("run {id} ")).count()
                    + pivot.matches(&format!("run {id}\n")).count(),
                1,
                "run {id}: {pivot}"
            );
        }
        let words = pivot.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(words.contains("every row is quick/*/n0/none/1v"), "{pivot}");
        let row3 = pivot
            .lines()
            .filter(|l| l.trim_start().starts_with("strategy-3 "));
        assert!(
            row3.clone().any(|l| l.split_whitespace().any(|c| c == "-")),
            "{pivot}"
        );
        let panels = pivot.matches("strategy-0 ").count();
        assert!(panels >= 3, "20 runs in 80 columns need panels: {pivot}");
        // A line per row and panel, plus headers: tens of lines, not a block per row.
        assert!(text.lines().count() < 30 + panels * 15, "{text}");
        assert!(!text.contains("trend per result"));
    }
}
