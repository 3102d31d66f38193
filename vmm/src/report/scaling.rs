//! Scaling (the 2018 epoll mail): strategy A against strategy B in the lock groups, one line
//! per vCPU count, from the paired ops/s comparisons the run measured.

use std::fmt::Write as _;

use crate::results::{ComparedMetric, RunReport};

use super::format::{fmt_cost, fmt_ratio_change, Estimate};

/// One line of the scaling table: `vCPUs  A ops/s  B ops/s  change [CI]  verdict`.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalingRow {
    /// The groups' common name without the vCPU count (`epoll/n0/none`).
    pub group: String,
    /// Strategies.
    pub a: String,
    pub b: String,
    pub vcpus: u32,
    /// Medians of ops/s over the rounds (all vCPUs together) with their 95% CIs.
    pub a_ops_per_sec: Option<Estimate>,
    pub b_ops_per_sec: Option<Estimate>,
    /// Median of the per-round paired ratios b/a with its 95% CI; `None`: no ratio.
    pub ratio: Option<Estimate>,
    /// The ratio's CI excludes 1.
    pub beyond_noise: bool,
}

/// `epoll/n0/none/4v` → `epoll/n0/none`: the groups a scaling table joins differ only there.
fn family(group: &str) -> &str {
    match group.rsplit_once('/') {
        Some((head, last))
            if last.ends_with('v') && last[..last.len() - 1].parse::<u32>().is_ok() =>
        {
            head
        }
        _ => group,
    }
}

/// Rows from the paired ops/s comparisons of each lock group against its first row.
pub fn scaling_rows(report: &RunReport) -> Vec<ScalingRow> {
    let mut rows: Vec<ScalingRow> = Vec::new();
    for c in report
        .comparisons
        .iter()
        .filter(|c| c.metric == ComparedMetric::OpsPerSec && c.a != c.b)
    {
        let (Some(ra), Some(rb)) = (report.row(&c.a), report.row(&c.b)) else {
            continue;
        };
        let first = report.results.iter().find(|r| r.group == c.group);
        if first.is_some_and(|f| f.name != ra.name) {
            continue;
        }
        rows.push(ScalingRow {
            group: family(&c.group).to_string(),
            a: ra.strategy.name().into(),
            b: rb.strategy.name().into(),
            vcpus: ra.vcpus,
            a_ops_per_sec: ra.ops_per_sec.estimate(),
            b_ops_per_sec: rb.ops_per_sec.estimate(),
            // A comparison without a ratio stays as a line that says so.
            ratio: c.ratio,
            beyond_noise: c.ratio.is_some_and(|r| r.excludes(1.0)),
        });
    }
    // Stable: families and pairs keep the config's order, vCPU counts ascend within them.
    let order: Vec<(String, String, String)> = rows.iter().fold(Vec::new(), |mut v, r| {
        let key = (r.group.clone(), r.a.clone(), r.b.clone());
        if !v.contains(&key) {
            v.push(key);
        }
        v
    });
    rows.sort_by_key(|r| {
        let key = (r.group.clone(), r.a.clone(), r.b.clone());
        (order.iter().position(|k| *k == key), r.vcpus)
    });
    rows
}

/// The table as the 2018 mail showed it, per pair, with the CI of the change and its verdict.
pub fn render_scaling(report: &RunReport) -> String {
    let rows = scaling_rows(report);
    let mut out = String::new();
    let mut last = String::new();
    for r in &rows {
        let header = format!("{}: {} (A) vs {} (B)", r.group, r.a, r.b);
        if header != last {
            let _ = writeln!(out, "\n{header}");
            let _ = writeln!(
                out,
                "  {:>5}  {:>13}  {:>13}  {:<26}  verdict",
                "vCPUs", "A ops/s", "B ops/s", "change [95% CI]"
            );
            last = header;
        }
        let verdict = match r.ratio.map(|r| r.ci.is_some()) {
            None => "no data",
            Some(false) => "too few rounds for a CI",
            Some(true) if r.beyond_noise => "beyond noise",
            Some(true) => "no difference beyond noise",
        };
        let change = r.ratio.map_or_else(|| "no ratio".into(), fmt_ratio_change);
        let _ = writeln!(
            out,
            "  {:>5}  {:>13}  {:>13}  {change:<26}  {verdict}",
            r.vcpus,
            fmt_cost(r.a_ops_per_sec),
            fmt_cost(r.b_ops_per_sec),
        );
    }
    if !out.is_empty() {
        out.insert_str(
            0,
            "\nscaling: total ops/s over all vCPUs (median of rounds ±95% CI); change = median of \
             per-round B/A - 1",
        );
    }
    out
}
