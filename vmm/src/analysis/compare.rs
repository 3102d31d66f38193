//! Two runs side by side, matched by result name. The runs were not measured together, so
//! nothing is paired: a change is beyond noise when the two 95% CIs of the medians do not
//! overlap and it is at least a relative floor that covers drift between runs. Matching and
//! judging here; the text and Markdown in `report/comparison.rs`.

use std::collections::BTreeMap;

use crate::results::{ComparedMetric, PairedComparison, PhaseResult, RowRerun, RunReport, Summary};

use super::estimate::{exits_estimate, exits_stat};
use crate::statistics::Ci;

/// Back-to-back runs of one config on one host drift by a few percent (a new VM, other load):
/// below this relative change nothing is called beyond noise, whatever the CIs say.
pub const DEFAULT_MIN_CHANGE_PCT: f64 = 5.0;

/// How a row's verdict was reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NoiseBasis {
    /// Both runs have a 95% CI: beyond noise iff the CIs do not overlap.
    #[default]
    Ci,
    /// Too few samples in a run to say anything.
    Unknown,
    /// A run has no figure for the row at all (it kept no round).
    NoData,
}

impl NoiseBasis {
    /// Whether the row was judged at all: a gate that cannot judge a row does not pass it.
    pub fn judged(self) -> bool {
        !matches!(self, NoiseBasis::Unknown | NoiseBasis::NoData)
    }
}

/// One run as the comparison header names it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunLabel {
    /// Which run it is, as the user named it: `run 12`, `baseline main (run 12)`, a path;
    /// empty when the caller does not say (the header then starts with the config).
    pub source: String,
    pub config_name: String,
    pub started_unix: u64,
    pub host: String,
    pub schema: String,
}

/// Two runs side by side, matched by result name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    /// The old (`a`) and new (`b`) run.
    pub runs: [RunLabel; 2],
    pub rows: Vec<CompareRow>,
    /// Result names only the old run (`a`) has.
    pub only_in_a: Vec<String>,
    pub only_in_b: Vec<String>,
    /// `field: old --> new` for host manifest fields that differ: the numbers may not be
    /// comparable at all then.
    pub host_differs: Vec<String>,
    /// `row: field old --> new` for rows of one name that measured different things (a
    /// config changed under its name): not compared, and named.
    pub config_differs: Vec<String>,
    /// Groups whose `empty` loop ran at another speed in the new run, beyond noise: the host
    /// ran faster or slower, and every cycles/op of the group moved with it.
    pub speed_differs: Vec<SpeedDifference>,
    /// Costs compared in units of each group's `empty` loop (`--normalised`).
    pub normalised: bool,
    /// Partial runs, duplicate result names.
    pub warnings: Vec<String>,
}

/// One group's `empty` loop in the two runs: the host's speed as the group saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct SpeedDifference {
    pub group: String,
    /// The loop's cycles/op (the first row's paired baseline) as [`CompareRow`] has it.
    pub empty: CompareRow,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CompareRow {
    pub name: String,
    /// `cycles/op`, `ops/s` or `exits/op`.
    pub metric: String,
    pub old: f64,
    pub new: f64,
    pub old_ci95: Option<Ci>,
    pub new_ci95: Option<Ci>,
    /// (new - old) / old × 100; ±inf when old is 0 and new is not.
    pub change_pct: f64,
    /// See [`NoiseBasis`] for the rule.
    pub beyond_noise: bool,
    pub basis: NoiseBasis,
}

pub(crate) const METRIC_CYCLES: &str = "cycles/op";
/// Cycles per op in units of the group's empty loop's cycles per op.
pub(crate) const METRIC_PER_LOOP: &str = "cost/loop";
pub(crate) const METRIC_OPS: &str = "ops/s";
/// Ops per second times the group's empty loop's seconds per op: ops done in the time of one
/// loop op, which a host that runs everything k times slower leaves unchanged.
pub(crate) const METRIC_OPS_PER_LOOP: &str = "ops/loop";
pub(crate) const METRIC_EXITS: &str = "exits/op";
/// A row's paired ratio to another row of its group: `÷ native-popf`.
pub(crate) const METRIC_RATIO_PREFIX: &str = "÷ ";

/// A row's ops/s in units of its loop ([`METRIC_OPS_PER_LOOP`]): the median the product of the
/// two medians, the CI the two relative half-widths added in quadrature on each side (the two
/// come from the same rounds, and a host that slows both moves them apart, so this errs wide).
/// Without a CI on either factor the product has none.
fn ops_per_loop(r: &PhaseResult) -> Summary {
    let (ops, base) = (&r.ops_per_sec, &r.baseline_ns);
    let scale = base.median * 1e-9;
    let median = ops.median * scale;
    let (Some(co), Some(cb), true) = (ops.ci95, base.ci95, median.is_finite() && median > 0.0)
    else {
        return Summary {
            median,
            samples: Vec::new(),
            ..Summary::default()
        };
    };
    let rel = |m: f64, b: f64| ((m - b) / m).abs();
    let lo = median * (1.0 - rel(ops.median, co.lo).hypot(rel(base.median, cb.lo)));
    let hi = median * (1.0 + rel(ops.median, co.hi).hypot(rel(base.median, cb.hi)));
    Summary {
        median,
        ci95: Some(Ci { lo, hi }),
        samples: ops.samples.iter().map(|x| x * scale).collect(),
        ..Summary::default()
    }
}

/// `s` with its run's rerun interval as its CI, where the run has one: what a rerun of the
/// same code shows is the noise a change must clear (the run's own CI holds one run's).
fn widened(s: &Summary, rerun95: Option<Ci>) -> Summary {
    let mut out = s.clone();
    if let (Some(r), true) = (rerun95, s.has_data()) {
        out.ci95 = Some(r);
    }
    out
}

fn change_pct(old: f64, new: f64) -> f64 {
    if old == new {
        0.0
    } else if old == 0.0 {
        f64::INFINITY.copysign(new)
    } else {
        (new - old) / old.abs() * 100.0
    }
}

fn disjoint(a: Ci, b: Ci) -> bool {
    a.hi < b.lo || b.hi < a.lo
}

/// A row of a per-round summary: by the CIs when both runs have one; a run without one (too
/// few rounds) cannot be judged.
pub(crate) fn summary_row(
    name: &str,
    metric: &str,
    a: &Summary,
    b: &Summary,
    min_change_pct: f64,
) -> CompareRow {
    let both = a.estimate().zip(b.estimate());
    let change = both.map_or(f64::NAN, |(ea, eb)| change_pct(ea.point, eb.point));
    let (beyond_noise, basis) = match (both, a.ci95, b.ci95) {
        (None, ..) => (false, NoiseBasis::NoData),
        (_, Some(ca), Some(cb)) => (
            disjoint(ca, cb) && change.abs() >= min_change_pct,
            NoiseBasis::Ci,
        ),
        _ => (false, NoiseBasis::Unknown),
    };
    CompareRow {
        name: name.into(),
        metric: metric.into(),
        old: a.median,
        new: b.median,
        old_ci95: a.ci95,
        new_ci95: b.ci95,
        change_pct: change,
        beyond_noise,
        basis,
    }
}

/// Exits per op: by the CIs of the counts (a run without one, too few kept rounds for a count,
/// cannot be judged).
fn exits_row(name: &str, ra: &PhaseResult, rb: &PhaseResult, min_change_pct: f64) -> CompareRow {
    // A run without the stat (too few kept rounds for a count, or a kernel without binary
    // stats) has no figure: not a 0.
    let old = exits_stat(ra).unwrap_or(f64::NAN);
    let new = exits_stat(rb).unwrap_or(f64::NAN);
    let cis = (
        exits_estimate(ra).and_then(|e| e.ci),
        exits_estimate(rb).and_then(|e| e.ci),
    );
    let known = old.is_finite() && new.is_finite();
    let change = if known {
        change_pct(old, new)
    } else {
        f64::NAN
    };
    // From a baseline whose CI holds 0 (printed ≈0) a relative change is unbounded however
    // small the difference (back to back on a busy CI host: ≈0 → 0.027 exits/op, "+4380%"),
    // so the floor is then the same share of one exit per op (at 50%, half an exit per op).
    let from_zero = cis.0.is_some_and(Ci::holds_zero);
    let big_enough = if from_zero {
        (new - old).abs() * 100.0 >= min_change_pct
    } else {
        change.abs() >= min_change_pct
    };
    let (beyond_noise, basis) = if !known {
        (false, NoiseBasis::NoData)
    } else if let (Some(ca), Some(cb)) = cis {
        (disjoint(ca, cb) && big_enough, NoiseBasis::Ci)
    } else {
        (false, NoiseBasis::Unknown)
    };
    CompareRow {
        name: name.into(),
        metric: METRIC_EXITS.into(),
        old,
        new,
        old_ci95: cis.0,
        new_ci95: cis.1,
        change_pct: change,
        beyond_noise,
        basis,
    }
}

/// Compares run `a` (old) with run `b` (new) with [`DEFAULT_MIN_CHANGE_PCT`].
#[cfg(test)]
pub fn compare(a: &RunReport, b: &RunReport) -> Comparison {
    compare_with(a, b, DEFAULT_MIN_CHANGE_PCT)
}

fn label(r: &RunReport) -> RunLabel {
    RunLabel {
        source: String::new(),
        config_name: r.config_name.clone(),
        started_unix: r.started_unix,
        host: format!("{}, kernel {}", r.host.cpu_model, r.host.kernel_release),
        schema: r.schema.clone(),
    }
}

/// What a row measured, field by field: two rows are the same measurement only when all of
/// these agree, whatever their names (a config may keep its name and change `body_ops`).
/// `block_ops` is not among them: it is calibrated per run to `run.block_us` unless fixed, and
/// the per-op figures do not depend on it. The hypercall transport is the run's (see
/// `host_differences`).
fn identity(r: &PhaseResult) -> [(&'static str, String); 7] {
    [
        ("kind", r.kind.name().to_string()),
        ("strategy", r.strategy.name().into()),
        ("nesting", r.nesting.to_string()),
        ("body_ops", r.body_ops.to_string()),
        ("irq", r.irq_source.clone()),
        ("vcpus", r.vcpus.to_string()),
        ("bench", bench_of(&r.name).to_string()),
    ]
}

/// A row's bench, the first part of its name (`quick/native-popf/n0/none/1v` → `quick`; v1
/// files have no group): two benches of one config may measure the same row, and are still
/// different rows.
fn bench_of(name: &str) -> &str {
    name.split('/').next().unwrap_or(name)
}

fn identity_key(r: &PhaseResult) -> String {
    identity(r)
        .iter()
        .map(|(_, v)| v.as_str())
        .collect::<Vec<_>>()
        .join("|")
}

/// Each measurement's first result; later ones that measured the same are reported, not
/// compared.
fn by_identity<'a>(
    run: &'a RunReport,
    which: &str,
    warnings: &mut Vec<String>,
) -> BTreeMap<String, &'a PhaseResult> {
    let mut map: BTreeMap<String, &PhaseResult> = BTreeMap::new();
    let mut dups: Vec<&str> = Vec::new();
    for r in &run.results {
        match map.entry(identity_key(r)) {
            std::collections::btree_map::Entry::Occupied(_) => {
                if !dups.contains(&r.name.as_str()) {
                    dups.push(&r.name);
                }
            }
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(r);
            }
        }
    }
    for d in dups {
        warnings.push(format!(
            "the {which} run measured {d} more than once: comparing the first"
        ));
    }
    map
}

/// For a row of the old run that the new one does not have, the new row of the same name
/// that measured something else, and how.
fn config_difference(ra: &PhaseResult, b: &RunReport) -> Option<String> {
    let rb = b.row(&ra.name)?;
    let diffs: Vec<String> = identity(ra)
        .iter()
        .zip(identity(rb).iter())
        .filter(|((_, x), (_, y))| x != y)
        .map(|((field, x), (_, y))| format!("{field} {x} --> {y}"))
        .collect();
    (!diffs.is_empty()).then(|| format!("{}: {}", ra.name, diffs.join(", ")))
}

fn run_warnings(which: &str, r: &RunReport, warnings: &mut Vec<String>) {
    if r.partial {
        let reason = r.partial_reason.as_deref().unwrap_or("reason unknown");
        warnings.push(format!(
            "the {which} run is partial ({reason}): rows it lacks are listed as missing"
        ));
    }
}

/// Runs measured on different numbers of VMs per group (`run.replicates`): a CI from one VM
/// holds none of the host's moves between VMs, which a replicated run's CI holds.
fn replicates_warning(a: &RunReport, b: &RunReport) -> Option<String> {
    let (ka, kb) = (a.replicates.max(1), b.replicates.max(1));
    (ka != kb).then(|| {
        format!(
            "the old run measured each group on {ka} VM(s), the new on {kb}: a CI from one VM \
             holds none of the host's moves between VMs (run.replicates), so judging by CIs \
             apart is stricter on its side"
        )
    })
}

/// [`compare`] with the relative-change floor chosen by the caller.
#[cfg(test)]
pub fn compare_with(a: &RunReport, b: &RunReport, min_change_pct: f64) -> Comparison {
    compare_by(a, b, min_change_pct, false)
}

/// Compares run `a` (old) with run `b` (new), no change below `min_change_pct` (`--min-change`)
/// beyond noise; with `normalised`, costs are compared in units of each group's own
/// empty loop (`cycles_per_loop`), which a host that got uniformly faster or slower leaves
/// unchanged, and ops/s (which it does not) is left out (`compare`/`check --normalised`).
pub fn compare_by(
    a: &RunReport,
    b: &RunReport,
    min_change_pct: f64,
    normalised: bool,
) -> Comparison {
    let mut c = Comparison {
        runs: [label(a), label(b)],
        normalised,
        ..Comparison::default()
    };
    run_warnings("old", a, &mut c.warnings);
    run_warnings("new", b, &mut c.warnings);
    c.warnings.extend(replicates_warning(a, b));
    let a_by_id = by_identity(a, "old", &mut c.warnings);
    let b_by_id = by_identity(b, "new", &mut c.warnings);

    for ra in a
        .results
        .iter()
        .filter(|r| std::ptr::eq(a_by_id[&identity_key(r)], *r))
    {
        let Some(rb) = b_by_id.get(&identity_key(ra)) else {
            c.only_in_a.push(ra.name.clone());
            if let Some(d) = config_difference(ra, b) {
                c.config_differs.push(d);
            }
            continue;
        };
        let rerun =
            |r: &PhaseResult, pick: fn(&RowRerun) -> Option<Ci>| r.rerun95.as_ref().and_then(pick);
        let (metric, ca, cb) = if normalised {
            (
                METRIC_PER_LOOP,
                ra.cycles_per_loop.clone(),
                rb.cycles_per_loop.clone(),
            )
        } else {
            (
                METRIC_CYCLES,
                widened(&ra.cycles_per_op, rerun(ra, |x| x.cycles_per_op)),
                widened(&rb.cycles_per_op, rerun(rb, |x| x.cycles_per_op)),
            )
        };
        c.rows
            .push(summary_row(&ra.name, metric, &ca, &cb, min_change_pct));
        // Throughput is the host's speed as much as the strategy's: normalised, it is in
        // units of the loop too, or a host that ran slower would still move (and fail `check`
        // on) every row. It stays: on a row of several vCPUs it is the slowest vCPU's, which
        // the costs (means over the vCPUs) hardly show.
        if normalised {
            let (oa, ob) = (ops_per_loop(ra), ops_per_loop(rb));
            c.rows.push(summary_row(
                &ra.name,
                METRIC_OPS_PER_LOOP,
                &oa,
                &ob,
                min_change_pct,
            ));
        } else {
            let oa = widened(&ra.ops_per_sec, rerun(ra, |x| x.ops_per_sec));
            let ob = widened(&rb.ops_per_sec, rerun(rb, |x| x.ops_per_sec));
            c.rows
                .push(summary_row(&ra.name, METRIC_OPS, &oa, &ob, min_change_pct));
        }
        if exits_stat(ra).is_some() || exits_stat(rb).is_some() {
            c.rows.push(exits_row(&ra.name, ra, rb, min_change_pct));
        }
    }
    c.rows.extend(ratio_rows(a, b, min_change_pct));
    c.only_in_b = b
        .results
        .iter()
        .filter(|r| !a_by_id.contains_key(&identity_key(r)))
        .map(|r| r.name.clone())
        .collect();
    c.only_in_b.dedup();
    c.host_differs = host_differences(a, b);
    c.speed_differs = speed_differences(&a_by_id, &b_by_id, min_change_pct);
    c
}

/// Each paired comparison both runs have with a CI, as a row `÷ a`: `b`'s cost in units of
/// `a`'s (cycles/op; a lock group's time per op, the inverse of its ops/s ratio), which the
/// host's speed, moving both, leaves alone; higher is dearer. Its interval is the run's rerun
/// interval where it has one, else its CI; a comparison without a CI in a run is left out (the
/// rows themselves are judged).
fn ratio_rows(a: &RunReport, b: &RunReport, min_change_pct: f64) -> Vec<CompareRow> {
    // The ratio and the interval it is judged by, when it has both.
    let judged = |c: &PairedComparison| {
        let r = c.ratio.filter(|_| c.no_ratio.is_none())?;
        Some((r.point, c.rerun95.or(r.ci)?))
    };
    let as_cost = |c: &PairedComparison| {
        let (point, Ci { lo, hi }) = judged(c)?;
        let (median, ci) = match c.metric {
            ComparedMetric::CyclesPerOp => (point, Ci { lo, hi }),
            ComparedMetric::OpsPerSec => (1.0 / point, Ci::from([1.0 / hi, 1.0 / lo])),
        };
        Some(Summary {
            median,
            ci95: Some(ci),
            ..Summary::default()
        })
    };
    a.comparisons
        .iter()
        .filter(|c| {
            [a, b]
                .iter()
                .all(|r| r.row(&c.a).is_some() && r.row(&c.b).is_some())
        })
        .filter_map(|ca| {
            let cb = b
                .comparisons
                .iter()
                .find(|cb| cb.a == ca.a && cb.b == ca.b && cb.metric == ca.metric)?;
            let (old, new) = (as_cost(ca)?, as_cost(cb)?);
            let of = ca.a.split('/').nth(1).unwrap_or(&ca.a);
            let metric = format!("{METRIC_RATIO_PREFIX}{of}");
            Some(summary_row(&ca.b, &metric, &old, &new, min_change_pct))
        })
        .collect()
}

/// The groups whose `empty` loop changed beyond noise by [`summary_row`]'s rule, in every
/// compared row of the group (each row carries the loop's cycles/op from its own paired
/// rounds) and the same way; shown by the row whose change is the median. On a shared or
/// nested host whole runs land in states 20–25% apart, which move every cost of a group
/// together and leave its ratios alone: this says so before the rows are read as regressions.
/// One row alone never names its group, nor keeps it unnamed when another row has no figure.
fn speed_differences(
    a_by_id: &BTreeMap<String, &PhaseResult>,
    b_by_id: &BTreeMap<String, &PhaseResult>,
    min_change_pct: f64,
) -> Vec<SpeedDifference> {
    let mut groups: BTreeMap<&str, Vec<CompareRow>> = BTreeMap::new();
    for (key, ra) in a_by_id {
        let Some(rb) = b_by_id.get(key) else { continue };
        if ra.group.is_empty() || !ra.baseline_cycles.has_data() || !rb.baseline_cycles.has_data() {
            continue;
        }
        groups.entry(&ra.group).or_default().push(summary_row(
            &ra.group,
            "empty cycles/op",
            &ra.baseline_cycles,
            &rb.baseline_cycles,
            min_change_pct,
        ));
    }
    groups
        .into_iter()
        .filter_map(|(group, mut rows)| {
            let same_way =
                rows.iter().all(|r| r.change_pct > 0.0) || rows.iter().all(|r| r.change_pct < 0.0);
            if !same_way || !rows.iter().all(|r| r.beyond_noise) {
                return None;
            }
            rows.sort_by(|x, y| x.change_pct.total_cmp(&y.change_pct));
            let empty = rows.swap_remove(rows.len() / 2);
            Some(SpeedDifference {
                group: group.to_string(),
                empty,
            })
        })
        .collect()
}

/// What differs between the hosts (and hypercall transports) of two runs, one line each.
pub fn host_differences(a: &RunReport, b: &RunReport) -> Vec<String> {
    let (ha, hb) = (&a.host, &b.host);
    let fields = [
        ("cpu_model", ha.cpu_model.clone(), hb.cpu_model.clone()),
        (
            "kvm_flavour",
            ha.kvm_flavour.to_string(),
            hb.kvm_flavour.to_string(),
        ),
        (
            "kernel_release",
            ha.kernel_release.clone(),
            hb.kernel_release.clone(),
        ),
        ("tsc_khz", ha.tsc_khz.to_string(), hb.tsc_khz.to_string()),
        ("nested", ha.nested.to_string(), hb.nested.to_string()),
        (
            "microcode",
            ha.microcode.text(Clone::clone),
            hb.microcode.text(Clone::clone),
        ),
        (
            "hypercall transport",
            a.hypercall_transport.clone(),
            b.hypercall_transport.clone(),
        ),
    ];
    let mut out: Vec<String> = fields
        .into_iter()
        .filter(|(_, old, new)| old != new)
        .map(|(field, old, new)| format!("{field}: {old} --> {new}"))
        .collect();
    // KVM module parameters change exits (ept, avic, enable_apicv, min_timer_period_us).
    let keys: std::collections::BTreeSet<&String> = ha
        .module_params
        .keys()
        .chain(hb.module_params.keys())
        .collect();
    for k in keys {
        let (x, y) = (ha.module_params.get(k), hb.module_params.get(k));
        if x != y {
            let show = |v: Option<&String>| v.map_or("(absent)".to_string(), Clone::clone);
            out.push(format!("{k}: {} --> {}", show(x), show(y)));
        }
    }
    out
}
