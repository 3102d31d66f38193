//! A group's figures: one [`PhaseResult`] per row, the paired comparisons between its rows and,
//! for the instruction suite, the single-instruction costs derived from paired differences.

use std::collections::BTreeMap;
use std::time::Duration;

use super::attribution::{attribute_interrupts, attribute_sites};
use super::breakdown;
use super::collect::{Collected, VariantSums};
use crate::analysis::counts::{self, InvariantViolation};
use crate::analysis::estimators::{self, Cell, Metric, RoundTable};
use crate::config::plan::{HypercallTransport, IrqSource, PhasePlan, StrategyId, Workload};
use crate::identity::InsnId;
use crate::machine::image::GuestImage;
use crate::results::warning::{Warning, WarningKind};
use crate::results::{
    Ci, ComparedMetric, CountEstimate, IrqDelivery, LockStats, PairedComparison, PairedDifference,
    PhaseResult, Summary, TimerTicks,
};

/// Differences the instruction suite derives: (what it measures, minuend, subtrahend).
const INSN_DIFFERENCES: [(&str, InsnId, InsnId); 2] = [
    ("push; popf that sets IF", InsnId::POPF_SET_IF, InsnId::CLI),
    (
        "push; popf that clears IF",
        InsnId::POPF_CLEAR_IF,
        InsnId::STI,
    ),
];

/// What the figures of a group are built from, besides its rounds.
#[derive(Clone, Copy, Debug)]
pub(super) struct GroupFacts<'a> {
    pub rows: &'a [&'a PhasePlan],
    /// The booted guest: exit RIPs are attributed through its symbols.
    pub image: &'a GuestImage,
    pub tsc_khz: u64,
    pub precision: f64,
    /// The plan's hypercall transport (which hypercalls must reach the VMM).
    pub hypercall: HypercallTransport,
    /// Hold in-kernel groups to the window law ([`breakdown::check_group_windows`]).
    pub window_law: bool,
}

/// What one group measured.
#[derive(Debug, Default)]
pub struct GroupOutcome {
    pub results: Vec<PhaseResult>,
    pub comparisons: Vec<PairedComparison>,
    pub differences: Vec<PairedDifference>,
    /// VM-wide KVM stats that moved, totals over the group's dispatches.
    pub vm_stats: BTreeMap<String, u64>,
    /// Warnings about the group's figures (`RunReport::warnings`).
    pub warnings: Vec<Warning>,
    /// Laws of counting the figures break, with the row (or `group NAME`) that breaks each;
    /// the run reports them one line per law ([`counts::violation_warnings`]).
    pub violations: Vec<(String, InvariantViolation)>,
    /// The user stopped the run during this group; the figures are from the rounds before.
    pub interrupted: bool,
}

pub(super) fn build(
    run: GroupFacts<'_>,
    collected: &Collected,
    table: &RoundTable,
    wall: Duration,
    interrupted: bool,
) -> GroupOutcome {
    let tsc_hz = run.tsc_khz as f64 * 1000.0;
    let total_cycles: u64 = collected.sums.iter().map(|s| s.cycles).sum();
    let mut results = Vec::new();
    let mut warnings = Vec::new();
    let mut violations = Vec::new();
    // One load per group (its rows share their irq source): its raised rate is the group's.
    let raised_hz = run
        .rows
        .first()
        .and_then(|row| raised_rate(collected, &row.irq));
    for (i, row) in run.rows.iter().enumerate() {
        let v = i + 1;
        let mut r = row_result(row, table, v, tsc_hz, run.precision);
        let sums = &collected.sums[v];
        fill_counts(&mut r, sums, collected.rounds, tsc_hz);
        r.exit_reasons = breakdown::exit_reasons(table, v, sums, &mut r.counts);
        for broken in breakdown::check_row(table, v, sums, run.hypercall) {
            violations.push((r.name.clone(), broken));
        }
        r.totals.irqs_raised = if total_cycles > 0 {
            (collected.irqs_raised as f64 * sums.cycles as f64 / total_cycles as f64).round() as u64
        } else {
            0
        };
        r.exit_sites = attribute_sites(run.image, &sums.exit_rips, row);
        r.interrupt_sites = attribute_interrupts(run.image, &sums.interrupt_rips, row);
        if matches!(row.workload, Workload::Lock { .. }) {
            r.lock = Some(LockStats {
                acquisitions: sums.counts.lock_acquisitions,
                spins: sums.counts.lock_spins,
                counter: collected.lock_counter,
                mutual_exclusion_held: collected.mutual_exclusion_held,
            });
        }
        if matches!(row.workload, Workload::Mixed { .. }) {
            r.strategy_ops = collected
                .strategy_ops
                .iter()
                .map(|(id, n)| (StrategyId(*id).name().to_string(), *n))
                .collect();
        }
        r.wall_ms = wall.as_secs_f64() * 1000.0;
        warnings.extend(load_delivery(&mut r, &row.irq, sums, tsc_hz, raised_hz));
        if let Some(latency) = &mut r.pending_latency {
            latency.held_by_if = held_by_if(run.image, row, sums);
        }
        r.ipi_sender = collected.ipi_sender.cost();
        if !r.cycles_per_op.has_data() {
            let (seen, disturbed) = table.blocks_disturbed(v);
            r.no_data = Some(format!("no data ({disturbed} of {seen} blocks disturbed)"));
        }
        results.push(r);
    }
    let empty: Vec<String> = results
        .iter()
        .filter_map(|r| r.no_data.as_ref().map(|why| format!("{} {why}", r.name)))
        .collect();
    if !empty.is_empty() {
        warnings.push(Warning::run(
            WarningKind::NoData,
            format!(
                "no data: {} row(s) kept no round, so they have no figure: {}",
                empty.len(),
                empty.join("; ")
            ),
        ));
    }
    violations.extend(group_violations(&run, table, collected));
    let comparisons = comparisons(run, table, &results, tsc_hz);
    let differences = differences(run, table, &results, tsc_hz);
    GroupOutcome {
        results,
        comparisons,
        differences,
        vm_stats: collected
            .vm_stats
            .nonzero()
            .map(|(k, n)| (k.to_string(), n))
            .collect(),
        warnings,
        violations,
        interrupted,
    }
}

/// The figures of row `v` from the round table.
fn row_result(
    row: &PhasePlan,
    table: &RoundTable,
    v: usize,
    tsc_hz: f64,
    precision: f64,
) -> PhaseResult {
    let (cycles, ci_batches) = estimators::batched(&table.net_cycles(v));
    let baseline = Summary::from_samples(&table.baseline_cycles(v));
    let raw = Summary::from_samples(&table.raw_cycles(v));
    let per_loop = Summary::from_samples(&table.normalised(v));
    let ns_per_cycle = 1e9 / tsc_hz;
    let mut r = PhaseResult {
        name: row.name.clone(),
        group: row.group.to_string(),
        kind: row.workload.kind(),
        strategy: row.workload.subject(),
        irq_source: row.irq.label(),
        nesting: row.nesting,
        vcpus: row.vcpus,
        body_ops: row.body_ops,
        disturbed_fraction: table.disturbed_fraction(v),
        corrected_blocks: table.blocks_corrected(v),
        precision_reached: estimators::precise(&cycles, baseline.median, precision),
        ns_per_op: to_ns(&cycles, ns_per_cycle),
        baseline_ns: to_ns(&baseline, ns_per_cycle),
        raw_ns_per_op: to_ns(&raw, ns_per_cycle),
        cycles_source: CYCLES_SOURCE.into(),
        raw_cycles_per_op: raw,
        cycles_per_loop: per_loop,
        ops_per_sec: Summary::from_samples(&table.ops_per_sec(v, tsc_hz)),
        counts: event_counts(table, v),
        ..Default::default()
    };
    r.cycles_per_op = cycles;
    r.ci_batches = ci_batches as u32;
    r.baseline_cycles = baseline;
    r
}

/// Reads one counter of a block.
type Counter = fn(&Cell) -> u64;

/// The counters of a block that are not KVM stats, by their key in `PhaseResult::counts`.
const OWN_COUNTS: [(&str, Counter); 6] = [
    (counts::USERSPACE_EXITS, |c| c.userspace_exits),
    (counts::VMM_HYPERCALLS, |c| c.hypercalls_seen),
    (counts::INTERRUPTS, |c| c.guest.interrupts),
    (counts::GUEST_HYPERCALLS, |c| c.guest.hypercalls),
    (counts::IF_VIOLATIONS, |c| c.guest.if_violations),
    (counts::LOCK_SPINS, |c| c.guest.lock_spins),
];

/// Every event count of row `v` per op, as a mean over its kept rounds with a CI: the KVM
/// stats that moved in the group, then [`OWN_COUNTS`]. Counts with too few kept rounds are
/// left out.
pub(super) fn event_counts(table: &RoundTable, v: usize) -> BTreeMap<String, CountEstimate> {
    let stats = table
        .stat_names
        .iter()
        .map(|name| (name.clone(), table.stat_counts(v, name)));
    let own = OWN_COUNTS
        .iter()
        .map(|(name, events)| (name.to_string(), table.counts(v, |c| Some(events(c)))));
    stats
        .chain(own)
        .filter_map(|(name, rounds)| Some((name, counts::estimate(&rounds)?)))
        .collect()
}

/// A `lapic-timer` row whose guest took fewer than this fraction of the ticks its period asks
/// for is warned about: it ran under a lighter interrupt load than its name says.
const TICKS_WARN_BELOW: f64 = 0.9;

/// A `lapic-timer` row's ticks over its blocks: `cycles` (TSC, summed over vCPUs) / period
/// expected, `interrupts` (the guest's count, summed over vCPUs) delivered.
fn timer_ticks(irq: &IrqSource, cycles: u64, interrupts: u64, tsc_hz: f64) -> Option<TimerTicks> {
    let IrqSource::LapicTimer { period_us } = *irq else {
        return None;
    };
    let expected = cycles as f64 / tsc_hz / (period_us * 1e-6);
    Some(TimerTicks {
        period_us,
        expected,
        delivered: interrupts,
        delivered_fraction: if expected > 0.0 {
            interrupts as f64 / expected
        } else {
            0.0
        },
    })
}

/// The warning for a row whose delivered ticks fall short of [`TICKS_WARN_BELOW`].
fn ticks_warning(name: &str, t: &TimerTicks) -> Option<Warning> {
    if t.expected < 1.0 || t.delivered_fraction >= TICKS_WARN_BELOW {
        return None;
    }
    let every = if t.delivered > 0 {
        format!(
            "one every {:.0} µs instead of every {} µs",
            t.period_us / t.delivered_fraction,
            t.period_us
        )
    } else {
        "none at all".to_string()
    };
    let figures = format!(
        "the guest took {} of the {:.0} LAPIC timer interrupts its {} µs period asks \
         for during its blocks ({:.0}%; {every}), so it ran under a lighter interrupt load than \
         its name says. KVM fires a periodic LAPIC timer from a host hrtimer and injects the \
         tick at a later guest entry: an emulating (PVM) or busy host delivers a fraction of them",
        t.delivered,
        t.expected,
        t.period_us,
        t.delivered_fraction * 100.0
    );
    Some(Warning::about(WarningKind::TicksShort, name, figures))
}

/// The group's laws: the window law (in-kernel irqchip, VMX/SVM) and taken within raised.
fn group_violations(
    run: &GroupFacts<'_>,
    table: &RoundTable,
    collected: &Collected,
) -> Vec<(String, InvariantViolation)> {
    let group = run
        .rows
        .first()
        .map_or(String::new(), |r| format!("group {}", r.group));
    let in_kernel = run
        .rows
        .first()
        .is_some_and(|r| r.irq.needs_in_kernel_irqchip());
    let windows = (run.window_law && in_kernel)
        .then(|| breakdown::check_group_windows(table, collected))
        .flatten();
    let raised = breakdown::check_group(run.rows, collected);
    windows
        .into_iter()
        .chain(raised)
        .map(|broken| (group.clone(), broken))
        .collect()
}

/// The row's timed waits split by whether the interrupt had waited for IF (where the guest
/// took it, attributed as `interrupt_sites` are: after the restore or an `sti` shadow).
fn held_by_if(
    image: &GuestImage,
    row: &PhasePlan,
    sums: &VariantSums,
) -> Option<crate::results::HeldWait> {
    let mut waited_at: BTreeMap<u64, bool> = BTreeMap::new();
    let (mut held, mut other) = (Vec::new(), Vec::new());
    for (&wait, &rip) in sums.waits.iter().zip(&sums.wait_rips) {
        let waited = *waited_at.entry(rip).or_insert_with(|| {
            let one = BTreeMap::from([(rip, 1)]);
            attribute_interrupts(image, &one, row)
                .first()
                .is_some_and(|s| crate::results::LetIn::waited_for_if(&s.site))
        });
        if waited { &mut held } else { &mut other }.push(wait);
    }
    crate::analysis::latency::held_wait(&held, &other)
}

/// How much of its interrupt load row `r` took during its blocks (`lapic-timer` ticks, `inject`
/// interrupts; both against the row's block time, `sums.cycles` / TSC Hz summed over vCPUs),
/// and the warnings for a row that took too little of it.
fn load_delivery(
    r: &mut PhaseResult,
    irq: &IrqSource,
    sums: &VariantSums,
    tsc_hz: f64,
    raised_hz: Option<f64>,
) -> Vec<Warning> {
    r.timer_ticks = timer_ticks(irq, sums.cycles, sums.counts.interrupts, tsc_hz);
    r.irq_delivery = irq_delivery(irq, sums.cycles, sums.counts.interrupts, tsc_hz, raised_hz);
    if r.irq_delivery.is_some() {
        r.pending_latency = crate::analysis::latency::pending_latency(&sums.waits);
    }
    let ticks = r
        .timer_ticks
        .as_ref()
        .and_then(|t| ticks_warning(&r.name, t));
    let injected = r
        .irq_delivery
        .as_ref()
        .and_then(|d| delivery_warning(&r.name, d));
    ticks.into_iter().chain(injected).collect()
}

/// An `inject` row whose guest took fewer than this fraction of the interrupts the load raises
/// during its blocks is warned about: it ran under a lighter load than its name says. Where an
/// interrupt reaches the guest microseconds after it is raised, a row loses only those raised
/// in its blocks' last microseconds. A PVM host measured 30-60% (native-*, pvop-skip; 5 kHz and
/// 500 Hz; nesting 0 and 0.5; 1 vCPU), 16-51% while other builds ran, and in `pv-restore-skip`
/// (busy) 20-36% for pvop-* against 45-76% for vif-*: this sits above all of it while leaving
/// room for chance.
pub(super) const DELIVERY_WARN_BELOW: f64 = 0.8;

/// An `inject` row is warned about only when its blocks should have taken at least this many
/// interrupts: which block a raise falls in is chance (a 500 Hz load raises one per 2 ms, so a
/// 500 µs block holds 0 or 1), so a row expecting a few can take half of them losing none.
pub(super) const DELIVERY_WARN_MIN_EXPECTED: f64 = 10.0;

/// The rate, per vCPU, at which the group's `inject` or `msi` load really raised: its raises over the
/// dispatches' wall time. `None` for other sources, without a recorded span, and where the
/// configured rate asks for fewer than [`DELIVERY_WARN_MIN_EXPECTED`] raises in that span (a
/// 2 Hz load over 0.4 s raises 0 or 1: no rate can be read from that).
fn raised_rate(collected: &Collected, irq: &IrqSource) -> Option<f64> {
    let rate_hz = interrupt_rate(irq)?;
    let span_s = collected.raise_span_ns as f64 / 1e9;
    let vcpus = f64::from(collected.vcpus);
    (rate_hz * span_s * vcpus >= DELIVERY_WARN_MIN_EXPECTED)
        .then(|| collected.irqs_raised as f64 / vcpus / span_s)
}

/// A load that raised below this fraction of its configured rate fell behind (the thread skips
/// ticks more than a few periods late): the row is warned about whatever the guest took.
pub(super) const RAISED_WARN_BELOW: f64 = 0.9;

/// An `inject` or `msi` row's interrupts over its blocks: `cycles` (TSC, summed over vCPUs) × the rate
/// the load kept expected (the configured one, or the raised one where lower: interrupts never
/// raised cannot be expected), since the load raises one on every vCPU at each tick;
/// `interrupts` (the guest's count inside the blocks, summed over vCPUs) delivered.
fn irq_delivery(
    irq: &IrqSource,
    cycles: u64,
    interrupts: u64,
    tsc_hz: f64,
    raised_hz: Option<f64>,
) -> Option<IrqDelivery> {
    let rate_hz = interrupt_rate(irq)?;
    let expected = cycles as f64 / tsc_hz * kept_rate(rate_hz, raised_hz);
    Some(IrqDelivery {
        rate_hz,
        raised_hz,
        expected,
        delivered: interrupts,
        delivered_fraction: (expected > 0.0).then(|| interrupts as f64 / expected),
    })
}

/// The rate of a load raised as real interrupts, one per vCPU at each tick (`inject`, `msi` by
/// a host thread, `ipi` by the sender vCPU); `None` for the others.
fn interrupt_rate(irq: &IrqSource) -> Option<f64> {
    match *irq {
        IrqSource::Inject { rate_hz } | IrqSource::Msi { rate_hz } | IrqSource::Ipi { rate_hz } => {
            Some(rate_hz)
        }
        _ => None,
    }
}

/// The rate expected of a load: the configured one, or the raised one where lower.
fn kept_rate(rate_hz: f64, raised_hz: Option<f64>) -> f64 {
    raised_hz.map_or(rate_hz, |r| r.min(rate_hz))
}

/// Whether the load thread raised below [`RAISED_WARN_BELOW`] of its configured rate.
fn fell_behind(d: &IrqDelivery) -> bool {
    d.raised_hz
        .is_some_and(|r| r < d.rate_hz * RAISED_WARN_BELOW)
}

/// The warning for an `inject` or `msi` row whose delivered interrupts fall short of
/// [`DELIVERY_WARN_BELOW`] of at least [`DELIVERY_WARN_MIN_EXPECTED`].
fn delivery_warning(name: &str, d: &IrqDelivery) -> Option<Warning> {
    let fraction = d.delivered_fraction?;
    if d.expected < DELIVERY_WARN_MIN_EXPECTED
        || (fraction >= DELIVERY_WARN_BELOW && !fell_behind(d))
    {
        return None;
    }
    let kept = kept_rate(d.rate_hz, d.raised_hz);
    let behind = if fell_behind(d) {
        format!(
            "; the load itself raised only ~{kept:.0} Hz of its {} Hz (the host could not keep \
             the rate: the load thread skips ticks more than a few periods late)",
            d.rate_hz
        )
    } else {
        String::new()
    };
    let figures = format!(
        "the guest took {} of the ~{:.0} interrupts its load raises during its \
         blocks ({:.0}%; a load of ~{:.0} Hz where {} Hz was asked){behind}, so its exits/op and \
         cycles/op are under a lighter interrupt load than its name says. Likely causes of \
         interrupts not taken: one raised while one is still pending (a vCPU off its CPU \
         included) merges with it; one raised during a block but injected only after its \
         closing doorbell is taken outside the timed window; on PVM interrupt windows open late \
         (at an emulation batch), which makes both more common",
        d.delivered,
        d.expected,
        fraction * 100.0,
        kept * fraction,
        d.rate_hz
    );
    Some(Warning::about(WarningKind::InjectShort, name, figures))
}

/// What every cycle figure counts (see `RunReport::cycles_source` for why not core cycles).
const CYCLES_SOURCE: &str = "tsc";

/// A TSC-cycle summary in nanoseconds (`ns_per_cycle` = 1e9 / TSC Hz); the CV is unitless.
fn to_ns(s: &Summary, ns_per_cycle: f64) -> Summary {
    Summary {
        median: s.median * ns_per_cycle,
        ci95: s.ci95.map(|c| c.scaled(ns_per_cycle)),
        min: s.min * ns_per_cycle,
        p5: s.p5 * ns_per_cycle,
        p95: s.p95 * ns_per_cycle,
        cv: s.cv,
        samples: s.samples.iter().map(|x| x * ns_per_cycle).collect(),
    }
}

/// Counts summed over the row's blocks.
fn fill_counts(r: &mut PhaseResult, sums: &VariantSums, rounds: u32, tsc_hz: f64) {
    r.rounds = rounds;
    r.ops = sums.ops;
    r.block_ops = sums.ops.checked_div(sums.blocks).unwrap_or(0);
    r.totals.interrupts = sums.counts.interrupts;
    r.totals.hypercalls = sums.counts.hypercalls;
    r.totals.hypercalls_seen_by_vmm = sums.hypercalls_seen;
    r.totals.if_violations = sums.counts.if_violations;
    r.per_vcpu_ops = sums.per_vcpu_ops.clone();
    r.per_vcpu_ops_per_sec = sums
        .per_vcpu_ops
        .iter()
        .zip(&sums.per_vcpu_cycles)
        .map(|(ops, cycles)| *ops as f64 * tsc_hz / (*cycles).max(1) as f64)
        .collect();
}

/// What a group's comparisons compare: ops/s for lock rows, net cycles/op otherwise.
pub(super) fn compared_metric(rows: &[&PhasePlan]) -> (Metric, ComparedMetric) {
    if matches!(rows[0].workload, Workload::Lock { .. }) {
        (Metric::OpsPerSec, ComparedMetric::OpsPerSec)
    } else {
        (Metric::NetCycles, ComparedMetric::CyclesPerOp)
    }
}

/// The group's compared pairs by row index (a, b: b against a): the ones its rows chose, or
/// none chosen (an instruction group) every ordered pair in plan order.
pub(super) fn compared_pairs(rows: &[&PhasePlan]) -> Vec<(usize, usize)> {
    let strategy_of = |r: &PhasePlan| match r.workload {
        Workload::Strategy { strategy } | Workload::Lock { strategy } => Some(strategy),
        _ => None,
    };
    let index = |s: StrategyId| rows.iter().position(|r| strategy_of(r) == Some(s));
    if rows[0].compare.is_empty() {
        (0..rows.len())
            .flat_map(|a| (a + 1..rows.len()).map(move |b| (a, b)))
            .collect()
    } else {
        rows[0]
            .compare
            .iter()
            .filter_map(|(a, b)| Some((index(*a)?, index(*b)?)))
            .collect()
    }
}

/// Every ordered pair (a before b in plan order) of the group: b against a, per round.
fn comparisons(
    run: GroupFacts<'_>,
    table: &RoundTable,
    results: &[PhaseResult],
    tsc_hz: f64,
) -> Vec<PairedComparison> {
    let lock = matches!(run.rows[0].workload, Workload::Lock { .. });
    let (metric, compared) = compared_metric(run.rows);
    let mut out = Vec::new();
    for (a, b) in compared_pairs(run.rows) {
        // A ratio to a net whose CI spans zero has no meaning: the comparison stays, without.
        let ci = results[a].cycles_per_op.ci95;
        let a_near_zero = !lock && ci.is_some_and(Ci::holds_zero);
        let ratios = table.paired_ratios(a + 1, b + 1, metric, tsc_hz);
        let no_ratio = if a_near_zero {
            Some(format!(
                "{}'s cost is within noise of 0, so a ratio to it means nothing",
                results[a].strategy
            ))
        } else if ratios.is_empty() {
            Some(format!(
                "0 of {} paired rounds undisturbed",
                table.rounds.len()
            ))
        } else {
            None
        };
        // Kept compact for the answers' interactions, which resample rounds across groups.
        let nonpositive_ratios = ratios.iter().filter(|r| **r <= 0.0).count() as u32;
        let log_ratios = if no_ratio.is_none() {
            ratios
                .iter()
                .filter(|r| **r > 0.0)
                .map(|r| (r.ln() * 1e6).round() / 1e6)
                .collect()
        } else {
            Vec::new()
        };
        let (ratio, ci_batches) = match no_ratio {
            Some(_) => (None, 0),
            None => estimators::batched_interval(&ratios),
        };
        out.push(PairedComparison {
            ci_batches: ci_batches as u32,
            log_ratios,
            nonpositive_ratios,
            a: results[a].name.clone(),
            b: results[b].name.clone(),
            group: results[a].group.clone(),
            metric: compared,
            rounds: ratios.len() as u32,
            ratio,
            no_ratio,
            replicates: None,
            rerun95: None,
        });
    }
    out
}

fn differences(
    run: GroupFacts<'_>,
    table: &RoundTable,
    results: &[PhaseResult],
    tsc_hz: f64,
) -> Vec<PairedDifference> {
    let ns_per_cycle = 1e9 / tsc_hz;
    if !matches!(run.rows[0].workload, Workload::Insn { .. }) {
        return Vec::new();
    }
    let index: BTreeMap<InsnId, usize> = run
        .rows
        .iter()
        .enumerate()
        .filter_map(|(i, row)| match row.workload {
            Workload::Insn { insn } => Some((insn, i)),
            _ => None,
        })
        .collect();
    INSN_DIFFERENCES
        .iter()
        .filter_map(|(name, a, b)| {
            let (ia, ib) = (*index.get(a)?, *index.get(b)?);
            let d = table.paired_differences(ia + 1, ib + 1);
            let (cycles, _) = estimators::batched_interval(&d);
            (!d.is_empty()).then(|| PairedDifference {
                ns: cycles.map(|c| c.scaled(ns_per_cycle)),
                name: (*name).into(),
                minuend: results[ia].name.clone(),
                subtrahend: results[ib].name.clone(),
                group: results[ia].group.clone(),
                rounds: d.len() as u32,
                cycles,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_ticks_compare_delivered_with_block_time_over_period() {
        // 2 vCPUs × 10 ms of blocks at 1 GHz TSC, 200 µs period: 100 ticks expected.
        let lapic = IrqSource::LapicTimer { period_us: 200.0 };
        let t = timer_ticks(&lapic, 20_000_000, 12, 1e9).expect("lapic row");
        assert!((t.expected - 100.0).abs() < 1e-9, "{t:?}");
        assert!((t.delivered_fraction - 0.12).abs() < 1e-9);
        let w = ticks_warning("lt/native-popf", &t)
            .expect("12% < 90%")
            .to_string();
        for part in [
            "lt/native-popf",
            "12 of the 100",
            "200 µs",
            "12%",
            "1667 µs",
        ] {
            assert!(w.contains(part), "{part:?} missing: {w}");
        }
        assert!(!w.contains("  "), "{w}");
        let full = timer_ticks(&lapic, 20_000_000, 95, 1e9).expect("lapic row");
        assert_eq!(ticks_warning("x", &full), None);
        let none = timer_ticks(&lapic, 20_000_000, 0, 1e9).expect("lapic row");
        assert!(ticks_warning("x", &none)
            .expect("0%")
            .figures
            .contains("none at all"));
        assert_eq!(timer_ticks(&IrqSource::None, 1, 1, 1e9), None);
    }

    #[test]
    fn inject_delivery_compares_taken_with_block_time_times_rate() {
        // 2 vCPUs × 10 ms of blocks at 1 GHz TSC, 5 kHz on each vCPU: 100 expected.
        let inject = IrqSource::Inject { rate_hz: 5000.0 };
        let d = irq_delivery(&inject, 20_000_000, 38, 1e9, Some(5010.0)).expect("inject row");
        assert!((d.expected - 100.0).abs() < 1e-9, "{d:?}");
        assert_eq!((d.rate_hz, d.delivered), (5000.0, 38));
        assert!((d.delivered_fraction.expect("expected > 0") - 0.38).abs() < 1e-9);
        let w = delivery_warning("inj/native-popf/n0/inject@5000Hz/1v", &d)
            .expect("38% < 80%")
            .to_string();
        for part in [
            "inj/native-popf/n0/inject@5000Hz/1v: ",
            "took 38 of the ~100 interrupts",
            "where 5000 Hz was asked",
            "5000 Hz",
            "38%",
            "~1900 Hz",
            "exits/op and cycles/op",
            "merges",
            "closing doorbell",
            "PVM",
        ] {
            assert!(w.contains(part), "{part:?} missing: {w}");
        }
        assert!(!w.contains("  "), "{w}");
        for (source, why) in [
            (IrqSource::None, "none"),
            (IrqSource::LapicTimer { period_us: 200.0 }, "ticks"),
            (IrqSource::PvEvent { rate_hz: 5000.0 }, "pv-event"),
        ] {
            assert_eq!(irq_delivery(&source, 1, 1, 1e9, None), None, "{why}");
        }
        // An msi load raises one per vCPU at each tick too: the same figure.
        let msi = IrqSource::Msi { rate_hz: 5000.0 };
        let m = irq_delivery(&msi, 20_000_000, 38, 1e9, Some(5010.0)).expect("msi row");
        assert_eq!(m, d);
        // No block time: nothing expected, and no fraction (not a 0% one) and no warning.
        let idle = irq_delivery(&inject, 0, 0, 1e9, None).expect("inject row");
        assert_eq!((idle.expected, idle.delivered_fraction), (0.0, None));
        assert_eq!(delivery_warning("x", &idle), None);
    }

    /// A load that raised only 3934 of the ~400 000 a 1 MHz rate asks for (the adversary's
    /// case): the guest is judged against what was raised, and the warning says the load fell
    /// behind even where the guest took all of it.
    #[test]
    fn a_load_that_fell_behind_is_expected_at_its_raised_rate_and_warned_about() {
        let inject = IrqSource::Inject { rate_hz: 1e6 };
        // 0.4 s of blocks at 1 GHz, the thread raising 9 835 a second.
        let d = irq_delivery(&inject, 400_000_000, 3900, 1e9, Some(9835.0)).expect("inject");
        assert!((d.expected - 3934.0).abs() < 1e-6, "{d:?}");
        let fraction = d.delivered_fraction.expect("expected > 0");
        assert!(fraction > DELIVERY_WARN_BELOW, "{fraction}");
        let w = delivery_warning("r/native-popf/n0/inject@1000000Hz/1v", &d)
            .expect("behind")
            .figures;
        for part in [
            "raised only ~9835 Hz of its 1000000 Hz",
            "took 3900 of the ~3934",
        ] {
            assert!(w.contains(part), "{part:?} missing: {w}");
        }
        // A raised rate above the configured one (dispatch spans are a little short of the
        // thread's life) never raises the expectation.
        let over = irq_delivery(&inject, 400_000_000, 10, 1e9, Some(2e6)).expect("inject");
        assert!((over.expected - 400_000.0).abs() < 1e-6, "{over:?}");
    }

    /// Synthetic rows either side of the floor and of the threshold.
    #[test]
    fn the_delivery_warning_needs_enough_expected_and_a_fraction_under_the_threshold() {
        let row = |expected: f64, delivered: u64| IrqDelivery {
            rate_hz: 500.0,
            raised_hz: Some(500.0),
            expected,
            delivered,
            delivered_fraction: Some(delivered as f64 / expected),
        };
        let warns = |d: IrqDelivery| delivery_warning("g/s/1v", &d).is_some();
        // Under the floor nothing warns, whatever the fraction.
        assert!(!warns(row(DELIVERY_WARN_MIN_EXPECTED - 0.1, 0)));
        assert!(!warns(row(9.0, 2)));
        // At the floor a short row warns, one at the threshold does not.
        assert!(warns(row(DELIVERY_WARN_MIN_EXPECTED, 0)));
        assert!(warns(row(10.0, 7)));
        assert!(
            !warns(row(10.0, 8)),
            "80% is not under {DELIVERY_WARN_BELOW}"
        );
        assert!(warns(row(1000.0, 799)));
        assert!(!warns(row(1000.0, 800)));
        assert!(!warns(row(1000.0, 1030)), "over-delivery by chance");
    }

    /// Twelve rows' delivery warnings print as one line naming them, with the first one's
    /// figures, beside a ticks warning of its own.
    #[test]
    fn delivery_warnings_of_many_rows_print_as_one_line() {
        let inject = IrqSource::Inject { rate_hz: 5000.0 };
        let mut report = crate::results::RunReport::default();
        for i in 0..12u64 {
            let d = irq_delivery(
                &inject,
                400_000_000 + i * 1_000_000,
                700 + i * 30,
                1e9,
                Some(5000.0),
            )
            .expect("inject row");
            let name = format!("inj/s{i}/n0/inject@5000Hz/1v");
            report.warnings.extend(delivery_warning(&name, &d));
            report.results.push(PhaseResult {
                name,
                irq_delivery: Some(d),
                ..Default::default()
            });
        }
        let lapic = IrqSource::LapicTimer { period_us: 200.0 };
        let t = timer_ticks(&lapic, 20_000_000, 12, 1e9).expect("lapic row");
        report
            .warnings
            .extend(ticks_warning("lt/s0/n0/lapic/1v", &t));
        assert_eq!(report.warnings.len(), 13);
        // Wide enough that no warning wraps.
        let text = crate::report::render_table_at(&report, 100_000);
        let lines: Vec<&str> = text.lines().collect();
        let took = lines
            .iter()
            .filter(|l| l.starts_with("warning: "))
            .collect::<Vec<_>>();
        assert_eq!(took.len(), 2, "{text}");
        assert!(
            took[0].starts_with("warning: 12 rows (inj/s0/n0/inject@5000Hz/1v, "),
            "{text}"
        );
        assert!(text.contains("… and 8 more): the guest"), "{text}");
        assert!(text.contains("took 700 of the ~2000"), "{text}");
        assert!(text.contains("(the figures are"), "{text}");
        assert!(
            took[1].starts_with("warning: lt/s0/n0/lapic/1v: "),
            "{text}"
        );
    }

    fn strategy_row(name: &str) -> PhasePlan {
        let strategy = StrategyId::from_name(name).expect("strategy");
        let mut p = crate::config::plan::Plan::single(Workload::Strategy { strategy }, 1, 1)
            .phases
            .remove(0);
        p.name = format!("g/{name}");
        p.group.bench = "g".into();
        p
    }

    fn cell(cycles: f64, disturbed: bool) -> Option<Cell> {
        Some(Cell {
            cycles_mean: cycles,
            cycles_max: cycles,
            ops: 10,
            vcpus: 1,
            disturbed,
            ..Cell::default()
        })
    }

    /// Every block of the second row disturbed (the verdict injected): that row has no figure
    /// (JSON `null`, "no data (30 of 30 blocks disturbed)"), and its comparisons stay, each
    /// saying why it has no ratio; the first row is measured as usual.
    #[test]
    fn a_row_without_kept_rounds_has_no_figure_and_its_comparisons_stay() {
        let rows = [strategy_row("native-popf"), strategy_row("native-skip")];
        let mut table = RoundTable::new(3);
        for i in 0..30 {
            let jitter = f64::from(i % 5);
            table.rounds.push(vec![
                cell(70_000.0 + jitter, false),
                cell(220_000.0 + jitter * 3.0, false),
                cell(200_000.0, true),
            ]);
        }
        let results: Vec<PhaseResult> = rows
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let mut r = row_result(row, &table, i + 1, 1e9, 0.02);
                if !r.cycles_per_op.has_data() {
                    let (seen, disturbed) = table.blocks_disturbed(i + 1);
                    r.no_data = Some(format!("no data ({disturbed} of {seen} blocks disturbed)"));
                }
                r
            })
            .collect();
        assert!(results[0].cycles_per_op.has_data());
        assert!(!results[1].cycles_per_op.has_data());
        assert_eq!(
            results[1].no_data.as_deref(),
            Some("no data (30 of 30 blocks disturbed)")
        );
        let json = serde_json::to_value(&results[1]).expect("json");
        assert!(json["cycles_per_op"]["median"].is_null(), "{json}");
        assert!(json["ns_per_op"]["ci95"][0].is_null(), "{json}");
        let image = GuestImage::embedded().expect("embedded guest");
        let refs: Vec<&PhasePlan> = rows.iter().collect();
        let facts = GroupFacts {
            rows: &refs,
            image: &image,
            tsc_khz: 1_000_000,
            precision: 0.02,
            hypercall: HypercallTransport::Port,
            window_law: true,
        };
        let cmp = comparisons(facts, &table, &results, 1e9);
        assert_eq!(cmp.len(), 1, "the comparison stays");
        assert_eq!(
            cmp[0].no_ratio.as_deref(),
            Some("0 of 30 paired rounds undisturbed")
        );
        let json = serde_json::to_value(&cmp[0]).expect("json");
        assert!(json["ratio"]["median"].is_null(), "{json}");
    }
}
