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
    /// Medians of ops/s over the rounds (all vCPUs together).
    pub a_ops_per_sec: f64,
    pub b_ops_per_sec: f64,
    /// Their 95% CIs; `None` for runs with too few rounds or files without CIs.
    pub a_ci95: Option<[f64; 2]>,
    pub b_ci95: Option<[f64; 2]>,
    /// Median of the per-round paired ratios b/a, minus 1, in percent.
    pub change_pct: f64,
    /// 95% CI of the ratio b/a; `None` with too few paired rounds for one.
    pub ratio_ci95: Option<[f64; 2]>,
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
            a_ops_per_sec: ra.ops_per_sec.median,
            b_ops_per_sec: rb.ops_per_sec.median,
            a_ci95: Estimate::of(&ra.ops_per_sec).ci,
            b_ci95: Estimate::of(&rb.ops_per_sec).ci,
            change_pct: (c.ratio.median - 1.0) * 100.0,
            // A comparison without a ratio stays as a line that says so.
            ratio_ci95: c.has_ci().then_some(c.ratio.ci95),
            beyond_noise: c.ratio.excludes(1.0),
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
        let (change, verdict) = match r.ratio_ci95 {
            Some(ci) => (
                fmt_ratio_change(1.0 + r.change_pct / 100.0, ci),
                if r.beyond_noise {
                    "beyond noise"
                } else {
                    "no difference beyond noise"
                },
            ),
            None if !r.change_pct.is_finite() => ("no ratio".to_string(), "no data"),
            None => (
                format!("{:+.1}% [no CI]", r.change_pct),
                "too few rounds for a CI",
            ),
        };
        let _ = writeln!(
            out,
            "  {:>5}  {:>13}  {:>13}  {change:<26}  {verdict}",
            r.vcpus,
            fmt_cost(Estimate {
                median: r.a_ops_per_sec,
                ci: r.a_ci95
            }),
            fmt_cost(Estimate {
                median: r.b_ops_per_sec,
                ci: r.b_ci95
            }),
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
