//! A row's exits by reason, as `perf kvm stat` breaks them down, and the laws its counts keep
//! (checked on every row; broken ones become report warnings).

use std::collections::BTreeMap;

use super::collect::{Collected, VariantSums};
use super::counts::{self, CountEstimate, InvariantViolation, RoundCount};
use super::estimators::RoundTable;
use crate::config::plan::{HypercallTransport, IrqSource, PhasePlan};
use crate::results::{ExitReasonFigure, HandledBy, HandlingTime};
use crate::vcpu::window::ReasonTally;
use crate::vcpu::ExitReason;

/// Row `v`'s breakdown: every reason the VMM handled in its blocks, then every KVM stat that
/// moved in the group. `counts` is the row's `PhaseResult::counts` (the KVM stats' estimates).
pub(super) fn exit_reasons(
    table: &RoundTable,
    v: usize,
    sums: &VariantSums,
    counts: &BTreeMap<String, CountEstimate>,
) -> Vec<ExitReasonFigure> {
    let kvm_exits = counts.get("exits").map(|e| e.events);
    let share = |events: u64| {
        kvm_exits
            .filter(|n| *n > 0)
            .map(|n| events as f64 / n as f64)
    };
    let vmm = ExitReason::ALL.iter().filter_map(|reason| {
        let i = reason.index();
        let tally = &sums.reasons[i];
        if tally.count == 0 {
            return None;
        }
        let e = counts::estimate(&table.counts(v, |c| Some(c.reasons[i])));
        Some(ExitReasonFigure {
            reason: reason.name().to_string(),
            handled_by: HandledBy::Vmm,
            count: tally.count,
            per_op: e.map(|e| e.per_op),
            per_op_ci95: e.map(|e| e.ci95),
            share_of_exits: e.and_then(|e| share(e.events)),
            time_ns: handling_time(tally),
        })
    });
    let kvm = table.stat_names.iter().enumerate().map(|(index, name)| {
        let e = counts.get(name);
        ExitReasonFigure {
            reason: name.clone(),
            handled_by: HandledBy::Kvm,
            count: stat_total(table, v, index as u16),
            per_op: e.map(|e| e.per_op),
            per_op_ci95: e.map(|e| e.ci95),
            share_of_exits: e
                .filter(|_| name.ends_with("exits"))
                .and_then(|e| share(e.events)),
            time_ns: None,
        }
    });
    vmm.chain(kvm).collect()
}

/// min / mean / max of the timed exits; `None` when none was timed.
fn handling_time(t: &ReasonTally) -> Option<HandlingTime> {
    (t.timed > 0).then(|| HandlingTime {
        min: t.ns_min as f64,
        mean: t.ns_sum as f64 / t.timed as f64,
        max: t.ns_max as f64,
    })
}

/// KVM stat `index` of row `v` over all its blocks, disturbed ones included (as the VMM's
/// tallies count them).
fn stat_total(table: &RoundTable, v: usize, index: u16) -> u64 {
    table
        .rounds
        .iter()
        .filter_map(|round| round.get(v)?.as_ref()?.stats.as_ref()?.get(&index).copied())
        .sum()
}

/// The per-row laws: KVM's exits cover the VMM's (gross counts, kept rounds) and, on the
/// userspace transports, every hypercall reached the VMM once.
pub(super) fn check_row(
    table: &RoundTable,
    v: usize,
    sums: &VariantSums,
    transport: HypercallTransport,
) -> Vec<InvariantViolation> {
    let gross = |rounds: Vec<RoundCount>| {
        let rounds: Vec<RoundCount> = rounds
            .iter()
            .map(|r| RoundCount::gross(r.events, r.ops))
            .collect();
        counts::estimate(&rounds)
    };
    let kvm = gross(table.stat_counts(v, "exits"));
    let handled = gross(table.counts(v, |c| Some(c.userspace_exits)));
    let mut found = Vec::new();
    if let (Some(kvm), Some(handled)) = (kvm, handled) {
        found.extend(counts::check_exits_cover_handled(&kvm, &handled).err());
    }
    found.extend(
        counts::check_hypercalls_match(transport, sums.hypercalls, sums.hypercalls_seen).err(),
    );
    found
}

/// The group's law: the guest took no more interrupts than the host raised, over all its
/// variants (only the host-raised sources count what they raise).
pub(super) fn check_group(
    rows: &[&PhasePlan],
    collected: &Collected,
) -> Option<InvariantViolation> {
    let raised_by_host = rows
        .first()
        .is_some_and(|r| matches!(r.irq, IrqSource::Inject { .. } | IrqSource::PvEvent { .. }));
    if !raised_by_host {
        return None;
    }
    let taken = collected.sums.iter().map(|s| s.interrupts).sum();
    counts::check_taken_within_raised(taken, collected.irqs_raised).err()
}
