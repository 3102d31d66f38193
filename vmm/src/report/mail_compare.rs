//! `compare --mail` and `check --mail`: two runs side by side in the mail report's plain text
//! of at most [`MAIL_WIDTH`] columns: the command, the two runs, the host, then per figure
//! one line per row (old -> new, change, verdict).

use std::fmt::Write as _;

use super::comparison::change_text;
use super::format::{Ci, Estimate};
use super::mail::{finish, push_table, short_figure};
use crate::analysis::compare::{CompareRow, Comparison, METRIC_OPS, METRIC_OPS_PER_LOOP};

/// The mail report of a comparison; `command` is what reproduces it.
pub fn render_compare_mail(c: &Comparison, command: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "$ {command}");
    for (which, run) in ["old", "new"].iter().zip(&c.runs) {
        let _ = writeln!(
            out,
            "{which}: {} ({}, {})",
            run.source,
            run.config_name,
            super::format::human_timestamp(run.started_unix)
        );
    }
    if c.host_differs.is_empty() {
        let _ = writeln!(out, "host: {}", c.runs[1].host);
    } else {
        let _ = writeln!(
            out,
            "hosts differ ({}): the figures may not compare",
            c.host_differs.join("; ")
        );
    }
    if !c.speed_differs.is_empty() {
        let _ = writeln!(
            out,
            "host speed differs in {} group(s): every cost there moved with it",
            c.speed_differs.len()
        );
    }
    out.push_str("change: new/old - 1; verdict beyond noise, or noise\n");
    let mut metrics: Vec<&str> = Vec::new();
    for r in &c.rows {
        if !metrics.contains(&r.metric.as_str()) {
            metrics.push(&r.metric);
        }
    }
    for metric in metrics {
        let _ = writeln!(out, "{metric}, old -> new");
        let rows: Vec<[String; 4]> = c
            .rows
            .iter()
            .filter(|r| r.metric == metric)
            .map(|r| {
                [
                    r.name.clone(),
                    format!("{} -> {}", side(r.old, r.old_ci95), side(r.new, r.new_ci95)),
                    change_text(r),
                    verdict(r).into(),
                ]
            })
            .collect();
        push_table(&mut out, &rows);
    }
    if c.rows.is_empty() {
        out.push_str("no row compared\n");
    }
    finish(&out)
}

fn side(v: f64, ci: Option<Ci>) -> String {
    short_figure(v.is_finite().then_some(Estimate { point: v, ci }))
}

/// `better`/`worse` beyond noise (lower is better but for throughput), else `noise`.
fn verdict(r: &CompareRow) -> &'static str {
    if !r.beyond_noise {
        return "noise";
    }
    let higher_is_better = r.metric == METRIC_OPS || r.metric == METRIC_OPS_PER_LOOP;
    if (r.new > r.old) == higher_is_better {
        "better"
    } else {
        "worse"
    }
}
