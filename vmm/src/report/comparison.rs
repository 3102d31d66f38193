//! `compare`'s output: the header (runs, warnings, differences of host, config and speed),
//! one line (or Markdown row) per figure with its change and verdict, and the legend. What is
//! compared and judged is [`crate::analysis::compare`]'s.

use std::fmt::Write as _;

use super::columns::Align;
use super::format::{fmt_cost, fmt_rate, fmt_si, fmt_sig, human_timestamp, Ci, Estimate, NO_DATA};
use super::markdown::md_table;
use super::table::{push_wrapped, TextTable};
use crate::analysis::compare::{CompareRow, Comparison, NoiseBasis, METRIC_EXITS, METRIC_OPS};

/// A compared value at the resolution of its CI (cycles and exits follow the table's `≈0`
/// rule); without a CI, 4 significant digits and `±?`, as the run's table has it; without a
/// figure, `no data`.
fn fmt_value(metric: &str, v: f64, ci: Option<Ci>) -> String {
    match (metric, ci) {
        _ if !v.is_finite() => NO_DATA.into(),
        (METRIC_OPS, None) if v >= 0.0 => format!("{} ±?", fmt_si(v)),
        (_, Some(_)) => fmt_cost(Estimate { point: v, ci }),
        (METRIC_EXITS, None) if v == 0.0 => "0".into(),
        (METRIC_EXITS, None) if v >= 0.0 => format!("{} ±?", fmt_rate(v)),
        // A plain number only at and above 0, as `fmt_cost` has it: `<0 (±?)` below.
        (_, None) if v < 0.0 => fmt_cost(Estimate { point: v, ci }),
        (_, None) => format!("{} ±?", fmt_sig(v, 4)),
    }
}

/// How a compared value is printed ([`fmt_cost`]'s cases), which decides whether a relative
/// change can be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shown {
    NoData,
    /// Exactly 0 (no CI, or the CI `[0, 0]`).
    Zero,
    /// `≈0`: the CI holds 0.
    NearZero,
    /// `<0`: the CI lies below 0.
    BelowZero,
    Number,
}

fn shown(v: f64, ci: Option<Ci>) -> Shown {
    if !v.is_finite() {
        return Shown::NoData;
    }
    match ci {
        Some(ci) if ci.lo == 0.0 && ci.hi == 0.0 && v == 0.0 => Shown::Zero,
        Some(ci) if ci.holds_zero() => Shown::NearZero,
        Some(ci) if ci.hi < 0.0 => Shown::BelowZero,
        None if v == 0.0 => Shown::Zero,
        None if v < 0.0 => Shown::BelowZero,
        _ => Shown::Number,
    }
}

/// The change column: a percentage only between two figures printed as numbers. A figure
/// printed `≈0` may be any value in its CI, so a percentage from or to it would be a plain
/// number for an interval that spans zero (`≈0 --> 0` read "-100%", `≈0 --> ≈0` "+1195%").
pub(crate) fn change_text(r: &CompareRow) -> String {
    use Shown::{BelowZero, NearZero, NoData, Number, Zero};
    let about = |s: Shown| if s == Zero { "0" } else { "≈0" };
    if r.basis == NoiseBasis::Unknown {
        // Too few rounds for a CI or a test: a percentage would be a number without any
        // uncertainty.
        return "no %: too few rounds".into();
    }
    match (shown(r.old, r.old_ci95), shown(r.new, r.new_ci95)) {
        (NoData, _) | (_, NoData) => "no data".into(),
        (Number, Number) => format!("{:+.1}%", r.change_pct),
        (Zero, Zero) => "both 0".into(),
        (Zero | NearZero, Zero | NearZero) => "both ≈0".into(),
        (old @ (Zero | NearZero), Number) => format!("from {}", about(old)),
        (Number, new @ (Zero | NearZero)) => format!("to {}", about(new)),
        (BelowZero, _) | (_, BelowZero) => "no %: below 0".into(),
    }
}

fn fmt_change(r: &CompareRow) -> String {
    format!("({})", change_text(r))
}

fn verdict(r: &CompareRow) -> String {
    let without = if r.old_ci95.is_none() {
        "no CI in the old run"
    } else {
        "no CI in the new run"
    };
    let no_data = |v: f64| !v.is_finite();
    match (r.beyond_noise, r.basis) {
        (_, NoiseBasis::NoData) => format!(
            "(no data in the {} run: cannot judge)",
            match (no_data(r.old), no_data(r.new)) {
                (true, true) => "old and the new",
                (true, false) => "old",
                _ => "new",
            }
        ),
        (true, _) => "beyond noise".into(),
        (false, NoiseBasis::Unknown) => format!("({without}, too few samples to judge)"),
        (false, _) => "(within noise)".into(),
    }
}

/// Text from the files (names, the host, a config's name) on one line: a newline in a group
/// name must not start a line that reads like one of ours.
fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    crate::text::outside(text)
}

fn header(c: &Comparison) -> String {
    let mut out = String::new();
    for (which, r) in ["old", "new"].iter().zip(&c.runs) {
        let source = if r.source.is_empty() {
            String::new()
        } else {
            format!("{} = ", one_line(&r.source))
        };
        let _ = writeln!(
            out,
            "{which}: {source}{}, {}, {} ({})",
            one_line(&r.config_name),
            human_timestamp(r.started_unix),
            one_line(&r.host),
            one_line(&r.schema)
        );
    }
    for w in &c.warnings {
        let _ = writeln!(out, "warning: {}", one_line(w));
    }
    for d in &c.host_differs {
        let _ = writeln!(out, "host differs: {}", one_line(d));
    }
    for d in &c.config_differs {
        let _ = writeln!(out, "config differs, not compared: {}", one_line(d));
    }
    for d in &c.speed_differs {
        let e = &d.empty;
        let _ = writeln!(
            out,
            "host speed differs: {}: its `empty` loop {} --> {} cycles/op ({})",
            one_line(&d.group),
            fmt_value(&e.metric, e.old, e.old_ci95),
            fmt_value(&e.metric, e.new, e.new_ci95),
            change_text(e)
        );
    }
    if !c.speed_differs.is_empty() {
        let how = if c.normalised {
            "the costs below are in units of each group's loop (--normalised), which that leaves \
             alone"
        } else {
            "every cycles/op of such a group moved with its loop, whatever the strategy; \
             --normalised compares costs in units of it"
        };
        let _ = writeln!(
            out,
            "  (the host ran at another speed, as shared and nested hosts do between runs: {how})"
        );
    }
    out.push('\n');
    out
}

fn rows_markdown(out: &mut String, c: &Comparison) {
    let rows: Vec<Vec<String>> = c
        .rows
        .iter()
        .map(|r| {
            let v = verdict(r);
            vec![
                format!("`{}`", one_line(&r.name)),
                r.metric.clone(),
                fmt_value(&r.metric, r.old, r.old_ci95),
                fmt_value(&r.metric, r.new, r.new_ci95),
                change_text(r),
                if r.beyond_noise {
                    format!("**{v}**")
                } else {
                    v.trim_matches(['(', ')']).to_string()
                },
            ]
        })
        .collect();
    if !rows.is_empty() {
        md_table(
            out,
            &["row", "metric", "old", "new", "change", "verdict"],
            &[false, false, true, true, true, false],
            &rows,
        );
    }
}

fn rows_text(out: &mut String, c: &Comparison, width: usize) {
    use Align::{Left, Right};
    let aligns = [Left, Right, Left, Right, Right, Left];
    let mut t = TextTable::new(&aligns.map(|a| ("", a)));
    // The row and its metric are one column, so a panel that continues the table names both.
    let name_width = c
        .rows
        .iter()
        .map(|r| one_line(&r.name).chars().count())
        .max();
    for r in &c.rows {
        let w = name_width.unwrap_or(0);
        t.rows.push(vec![
            format!("{:<w$}  {}", one_line(&r.name), r.metric),
            fmt_value(&r.metric, r.old, r.old_ci95),
            "-->".into(),
            fmt_value(&r.metric, r.new, r.new_ci95),
            fmt_change(r),
            verdict(r),
        ]);
    }
    // No header row in this style: drop each panel's blank header and its rule (a table wider
    // than the terminal continues in panels that repeat the row name).
    let text = t.render("", width);
    for line in text
        .lines()
        .filter(|l| !l.chars().all(|c| c == ' ' || c == '-'))
    {
        let _ = writeln!(out, "{line}");
    }
}

/// The comparison as aligned plain-text lines (the style of a kernel patch's cover letter), or
/// as a Markdown table.
pub fn render_compare(c: &Comparison, markdown: bool) -> String {
    render_compare_at(c, markdown, super::width::text_width())
}

/// [`render_compare`] in `width` columns (the text; Markdown is not wrapped).
pub fn render_compare_at(c: &Comparison, markdown: bool, width: usize) -> String {
    let mut out = if markdown {
        header(c)
    } else {
        super::width::wrap(&header(c), width)
    };
    if markdown {
        rows_markdown(&mut out, c);
    } else {
        rows_text(&mut out, c, width);
    }
    let lists = [
        ("only in the old run", &c.only_in_a),
        ("only in the new run", &c.only_in_b),
    ];
    for (what, names) in lists {
        if !names.is_empty() {
            let items: Vec<String> = names
                .iter()
                .map(|n| {
                    if markdown {
                        format!("`{}`", one_line(n))
                    } else {
                        one_line(n).into_owned()
                    }
                })
                .collect();
            out.push('\n');
            push_wrapped(&mut out, (&format!("{what}: "), "  "), &items, width);
        }
    }
    if c.rows.is_empty() && c.only_in_a.is_empty() && c.only_in_b.is_empty() {
        out.push_str("no rows to compare\n");
    }
    let legend = "\nvalues: median ±h (95% CI, or the run's 95% rerun interval where the \
                  history gave it one); `÷ a`: the row's cost in units of a's, paired; beyond noise = \
                  the two runs' intervals do not overlap and the change is at least the floor\n";
    if markdown {
        out.push_str(legend);
    } else {
        out.push_str(&super::width::wrap(legend, width));
    }
    out
}
