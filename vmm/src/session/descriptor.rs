//! Phase descriptors: what the guest is asked to run, built from a plan's rows.

use irqbench_abi::{self as abi, PhaseDescriptor};

use crate::config::plan::{PhasePlan, Workload};

/// The workload kind and table id of `workload` (`VARIANT_MIXED` for the mixed workload).
pub fn workload_ids(workload: &Workload) -> (u32, u32) {
    match workload {
        Workload::Strategy { strategy } => (abi::workload::STRATEGY, strategy.0),
        Workload::Insn { insn } => (abi::workload::INSN, insn.0),
        Workload::Lock { strategy } => (abi::workload::LOCK, strategy.0),
        Workload::Mixed { .. } => (abi::workload::MIXED, abi::VARIANT_MIXED),
        Workload::Doorbells => (abi::workload::DOORBELLS, 0),
        Workload::FaultUd2 => (abi::workload::FAULT_UD2, 0),
        Workload::SpinForever => (abi::workload::SPIN_FOREVER, 0),
        Workload::GarbageRecord => (abi::workload::GARBAGE_RECORD, 0),
        Workload::Idle { .. } => (abi::workload::IDLE, 0),
        Workload::HaltForever => (abi::workload::HALT_FOREVER, 0),
        Workload::LatencyProbe => (abi::workload::LATENCY_PROBE, 0),
    }
}

/// The descriptor fields every phase of `row`'s group shares.
fn common(row: &PhasePlan, kind: u32, iterations: u64) -> PhaseDescriptor {
    let mut weights = [0u16; abi::strategy::WEIGHT_SLOTS];
    if let Workload::Mixed { weights: w } = &row.workload {
        for (s, weight) in w {
            if let Some(slot) = weights.get_mut(s.0 as usize) {
                *slot = *weight;
            }
        }
    }
    let idle_tsc_cycles = match row.workload {
        Workload::Idle { tsc_cycles } => tsc_cycles,
        _ => 0,
    };
    PhaseDescriptor {
        workload: kind,
        idle_tsc_cycles,
        irq_source: row.irq.abi_id(),
        iterations,
        nesting_per_65536: (row.nesting * 65536.0).round().clamp(0.0, 65536.0) as u32,
        body_ops: row.body_ops,
        seed: row.seed,
        timer_initial_count: row.irq.timer_initial_count(),
        weights,
        ..Default::default()
    }
}

/// Rounds of a group: `variants[0]` is the `empty` baseline, the rest the group's rows in plan
/// order. `block_ops` is rounded up to a multiple of 4 (the flat strategy loop is unrolled ×4).
pub fn rounds(
    rows: &[&PhasePlan],
    variants: &[u32],
    block_ops: u64,
    first_round: u32,
    rounds: u32,
) -> PhaseDescriptor {
    let row = rows[0];
    let (kind, _) = workload_ids(&row.workload);
    let mut desc = common(row, kind, block_ops.max(4).div_ceil(4) * 4);
    desc.rounds = rounds;
    desc.first_round = first_round;
    desc.variant_count = variants.len().min(abi::MAX_VARIANTS) as u32;
    for (slot, id) in desc.variants.iter_mut().zip(variants) {
        *slot = *id;
    }
    // Lock rows run on all vCPUs at once: every block starts together, so contention is
    // like-for-like between the variants of a round.
    desc.barrier = u32::from(row.vcpus > 1 && matches!(row.workload, Workload::Lock { .. }));
    desc
}

/// A test or diagnostic phase (doorbells, faults, idle …): one run of `iterations`.
pub fn diagnostic(row: &PhasePlan, iterations: u64) -> PhaseDescriptor {
    let (kind, id) = workload_ids(&row.workload);
    let mut desc = common(row, kind, iterations);
    desc.strategy = id;
    if crate::vcpu::protocol::runs_rounds(&desc) {
        // A measured workload run once: one round of the row's variant alone.
        desc.rounds = 1;
        desc.variant_count = 1;
        desc.variants[0] = id;
        desc.iterations = if kind == abi::workload::STRATEGY && desc.nesting_per_65536 == 0 {
            iterations.div_ceil(4) * 4
        } else {
            iterations
        };
    }
    desc
}
