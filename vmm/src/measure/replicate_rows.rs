//! A group's figures when it ran on several fresh VMs (`run.replicates` > 1): the rounds of all
//! replicates give the group's outcome as one VM's would ([`super::rows::build`]), then every
//! row's cycles/op, ns/op, cycles/loop, ops/s, count, comparison and difference takes the
//! replicates' combination ([`crate::analysis::replicates`]) of the same estimate computed on each
//! replicate's rounds.

use super::rows::{self, GroupOutcome};
use crate::analysis::estimators::{self, RoundTable};
use crate::analysis::replicates::{self, Combined};
use crate::config::plan::PhasePlan;
use crate::results::{Ci, CountEstimate, Estimate, PhaseResult, ReplicateSpread, Summary};

/// The rounds of `table` each replicate ran, as one table per replicate (`replicate_of[r]` is
/// round r's replicate).
pub(super) fn split(
    table: &RoundTable,
    replicate_of: &[usize],
    replicates: usize,
) -> Vec<RoundTable> {
    let mut out: Vec<RoundTable> = (0..replicates)
        .map(|_| RoundTable {
            variants: table.variants,
            stat_names: table.stat_names.clone(),
            rounds: Vec::new(),
        })
        .collect();
    for (round, r) in table.rounds.iter().zip(replicate_of) {
        if let Some(t) = out.get_mut(*r) {
            t.rounds.push(round.clone());
        }
    }
    out
}

/// Each replicate's median and CI of per-round `values` ([`estimators::batched`]).
fn within(
    tables: &[RoundTable],
    values: impl Fn(&RoundTable) -> Vec<f64>,
) -> Vec<Option<Estimate>> {
    tables
        .iter()
        .map(|t| estimators::batched(&values(t)).0.estimate())
        .collect()
}

fn spread(c: &Combined, pooled: Option<Ci>) -> ReplicateSpread {
    ReplicateSpread {
        estimates: c.estimates.clone(),
        between_share: c.between_share,
        within_ci95: pooled,
    }
}

/// A summary whose median and CI are the combination's (the rest stays the pooled rounds').
fn set_summary(s: &mut Summary, c: &Combined, scale: f64) {
    s.median = c.estimate * scale;
    s.ci95 = Some(c.ci95.scaled(scale));
}

/// The combination's figure; without one (fewer than two replicates had a figure), the pooled
/// point without a CI.
fn combined_or_point(pooled: Option<Estimate>, c: Option<&Combined>) -> Option<Estimate> {
    match c {
        Some(c) => Some(c.figure()),
        None => pooled.map(|p| Estimate { ci: None, ..p }),
    }
}

/// Combines the outcome's figures over the replicates' `tables`; the host moving between them
/// becomes one warning line (the figure that moved most).
pub(super) fn combine(
    outcome: &mut GroupOutcome,
    group_rows: &[&PhasePlan],
    tables: &[RoundTable],
    tsc_hz: f64,
    precision: f64,
) {
    let mut moved: Vec<(String, Combined)> = Vec::new();
    for (i, r) in outcome.results.iter_mut().enumerate() {
        if let Some(c) = combine_row(r, tables, i + 1, tsc_hz, precision) {
            moved.push((format!("{}: {} cycles/op", r.group, r.name), c));
        }
    }
    let (metric, _) = rows::compared_metric(group_rows);
    let index = |name: &str| outcome.results.iter().position(|r| r.name == name);
    for c in &mut outcome.comparisons {
        let (Some(a), Some(b)) = (index(&c.a), index(&c.b)) else {
            continue;
        };
        if c.no_ratio.is_some() {
            continue;
        }
        let pooled = c.ratio.and_then(|r| r.ci);
        let combined = replicates::combine(&within(tables, |t| {
            t.paired_ratios(a + 1, b + 1, metric, tsc_hz)
        }));
        c.ratio = combined_or_point(c.ratio, combined.as_ref());
        if let Some(combined) = combined {
            c.replicates = Some(spread(&combined, pooled));
            moved.push((format!("{}: {} vs {} ratio", c.group, c.b, c.a), combined));
        }
    }
    for d in &mut outcome.differences {
        let (Some(a), Some(b)) = (index(&d.minuend), index(&d.subtrahend)) else {
            continue;
        };
        let combined = replicates::combine(&within(tables, |t| t.paired_differences(a + 1, b + 1)));
        let ns_per_cycle = 1e9 / tsc_hz;
        d.cycles = combined_or_point(d.cycles, combined.as_ref());
        d.ns = d.cycles.map(|c| c.scaled(ns_per_cycle));
    }
    let worst = moved
        .iter()
        .filter(|(_, c)| c.between_dominates())
        .max_by(|x, y| x.1.relative_spread().total_cmp(&y.1.relative_spread()));
    if let Some((what, c)) = worst {
        outcome.warnings.push(replicates::moved_warning(what, c));
    }
}

/// Row `v`'s cycles/op, ns/op and counts combined; the cycles' combination, if any.
fn combine_row(
    r: &mut PhaseResult,
    tables: &[RoundTable],
    v: usize,
    tsc_hz: f64,
    precision: f64,
) -> Option<Combined> {
    // A count that fewer than two replicates have is no combination: absent, as a count from
    // too few rounds is.
    r.counts.retain(|name, count| {
        let per_replicate: Vec<Option<Estimate>> = tables
            .iter()
            .map(|t| {
                rows::event_counts(t, v)
                    .get(name)
                    .map(CountEstimate::estimate)
            })
            .collect();
        let combined = replicates::combine(&per_replicate);
        if let Some(c) = &combined {
            (count.per_op, count.ci95) = (c.estimate, c.ci95);
        }
        combined.is_some()
    });
    if !r.cycles_per_op.has_data() {
        return None;
    }
    let pooled = r.cycles_per_op.ci95;
    let Some(c) = replicates::combine(&within(tables, |t| t.net_cycles(v))) else {
        // Fewer than two replicates kept a round: one VM's figure is no combination.
        r.cycles_per_op.ci95 = None;
        r.ns_per_op.ci95 = None;
        r.precision_reached = false;
        return None;
    };
    let ns_per_cycle = 1e9 / tsc_hz;
    set_summary(&mut r.cycles_per_op, &c, 1.0);
    set_summary(&mut r.ns_per_op, &c, ns_per_cycle);
    // What `check --normalised` and the throughput rows judge, combined the same way.
    for (summary, values) in [
        (&mut r.cycles_per_loop, within(tables, |t| t.normalised(v))),
        (
            &mut r.ops_per_sec,
            within(tables, |t| t.ops_per_sec(v, tsc_hz)),
        ),
    ] {
        match replicates::combine(&values) {
            Some(combined) => set_summary(summary, &combined, 1.0),
            None => summary.ci95 = None,
        }
    }
    r.precision_reached =
        estimators::precise(&r.cycles_per_op, r.baseline_cycles.median, precision);
    r.replicates = Some(spread(&c, pooled));
    Some(c)
}

/// Whether every row's and comparison's combined CI is within `precision`, and the worst
/// relative half-width (the rounds' stop rule with replicates).
pub(super) fn precise(
    group_rows: &[&PhasePlan],
    tables: &[RoundTable],
    tsc_hz: f64,
    precision: f64,
) -> (bool, f64) {
    let (mut all, mut worst) = (true, 0.0f64);
    let mut spans_zero = Vec::new();
    for v in 1..=group_rows.len() {
        let Some(c) = replicates::combine(&within(tables, |t| t.net_cycles(v))) else {
            return (false, f64::INFINITY);
        };
        let base = tables
            .iter()
            .filter_map(|t| crate::statistics::median(&t.baseline_cycles(v)))
            .sum::<f64>()
            / tables.len() as f64;
        let scale = c
            .estimate
            .abs()
            .max(estimators::FLOOR_OF_BASELINE * base.abs())
            .max(f64::MIN_POSITIVE);
        let half = (c.ci95.hi - c.ci95.lo) / 2.0;
        worst = worst.max(half / scale);
        all &= half <= precision * scale;
        spans_zero.push(c.ci95.holds_zero());
    }
    let (metric, _) = rows::compared_metric(group_rows);
    for (a, b) in rows::compared_pairs(group_rows) {
        if metric == estimators::Metric::NetCycles && (spans_zero[a] || spans_zero[b]) {
            continue;
        }
        let Some(c) = replicates::combine(&within(tables, |t| {
            t.paired_ratios(a + 1, b + 1, metric, tsc_hz)
        })) else {
            all = false;
            continue;
        };
        if c.estimate <= 0.0 {
            continue;
        }
        let half = (c.ci95.hi - c.ci95.lo) / 2.0 / c.estimate;
        worst = worst.max(half);
        all &= half <= precision;
    }
    (all, worst)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::estimators::Cell;
    use crate::config::plan::{Plan, StrategyId, Workload};
    use crate::results::PairedComparison;

    fn row(strategy: StrategyId) -> PhasePlan {
        Plan::single(Workload::Strategy { strategy }, 1, 100)
            .phases
            .remove(0)
    }

    /// One block of `net` cycles an operation over a loop of 100, 100 operations.
    fn block(net: f64) -> Option<Cell> {
        Some(Cell {
            cycles_mean: (100.0 + net) * 100.0,
            cycles_max: (100.0 + net) * 100.0,
            ops: 100,
            vcpus: 1,
            ..Default::default()
        })
    }

    /// Three VMs whose rows cost 5% more or less than each other (both rows alike, so their
    /// ratio does not move), in slices of 10 rounds: the rows' combined CIs hold the move and
    /// say so, the ratio's does not need to.
    #[test]
    fn a_move_between_vms_widens_the_rows_and_leaves_the_ratio() {
        let (a, b) = (
            row(StrategyId::NATIVE_POPF),
            row(StrategyId::NATIVE_CLI_STI),
        );
        let group_rows = [&a, &b];
        let levels = [1.0, 1.05, 0.95];
        let mut table = RoundTable::new(3);
        let mut replicate_of = Vec::new();
        for slice in 0..6 {
            for (r, level) in levels.iter().enumerate() {
                for i in 0..10 {
                    let e = if (slice + i) % 2 == 0 { 0.002 } else { -0.002 };
                    table.rounds.push(vec![
                        block(0.0),
                        block(500.0 * level * (1.0 + e)),
                        block(300.0 * level * (1.0 - e)),
                    ]);
                    replicate_of.push(r);
                }
            }
        }
        let tables = split(&table, &replicate_of, 3);
        assert!(tables.iter().all(|t| t.rounds.len() == 60));
        let result = |name: &str, v: usize| PhaseResult {
            name: name.into(),
            group: "g".into(),
            cycles_per_op: Summary::from_samples(&table.net_cycles(v)),
            ..Default::default()
        };
        let mut outcome = GroupOutcome {
            results: vec![result("a", 1), result("b", 2)],
            comparisons: vec![PairedComparison {
                a: "a".into(),
                b: "b".into(),
                group: "g".into(),
                ratio: estimators::interval(&table.paired_ratios(
                    1,
                    2,
                    estimators::Metric::NetCycles,
                    1e9,
                )),
                ..Default::default()
            }],
            ..Default::default()
        };
        let pooled = outcome.results[0].cycles_per_op.ci95.expect("a CI");
        combine(&mut outcome, &group_rows, &tables, 1e9, 0.005);
        let a = &outcome.results[0];
        let spread = a.replicates.as_ref().expect("a's spread");
        assert_eq!(spread.estimates.len(), 3);
        assert!((a.cycles_per_op.median - 500.0).abs() < 1.0, "{a:?}");
        let ci = a.cycles_per_op.ci95.expect("a CI");
        assert!(ci.hi - ci.lo > pooled.hi - pooled.lo);
        assert!(ci.lo < 475.0 && ci.hi > 525.0);
        assert!(spread.between_share > 0.9, "{spread:?}");
        assert!(!a.precision_reached);
        let ratio = &outcome.comparisons[0];
        let r = ratio.ratio.expect("a ratio");
        assert!((r.point - 0.6).abs() < 0.01, "{ratio:?}");
        let half = r.half_width().expect("a CI") / r.point;
        assert!(half < 0.01, "{ratio:?}");
        assert_eq!(outcome.warnings.len(), 1, "{:?}", outcome.warnings);
        assert!(
            outcome.warnings[0].to_string().starts_with("g: ")
                && outcome.warnings[0]
                    .figures
                    .contains("moved between replicates"),
            "{:?}",
            outcome.warnings
        );
        let (precise_now, worst) = precise(&group_rows, &tables, 1e9, 0.005);
        assert!(!precise_now && worst > 0.05, "{worst}");
    }
}
