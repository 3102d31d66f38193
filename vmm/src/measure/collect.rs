//! Everything one group's dispatches produced, validated block by block and kept per variant
//! until the figures are computed.

use std::collections::BTreeMap;

use irqbench_abi::{Counts, PhaseDescriptor};

use crate::analysis::disturbance;
use crate::analysis::estimators::{Cell, GuestCounts, RoundTable};
use crate::kvm::stats::StatsDelta;
use crate::session::Dispatch;
use crate::vcpu::protocol::{self, ProtocolViolation};
use crate::vcpu::window::{ExitCounts, ExitRips, ReasonTallies};
use crate::vcpu::ExitReason;

/// One vCPU's block, validated.
#[derive(Clone, Copy, Debug)]
pub struct Obs {
    pub round: u32,
    pub variant: usize,
    pub vcpu: u32,
    pub cycles: u64,
    pub ops: u64,
    /// Loop iterations of the block.
    pub loops: u64,
    /// Userspace exits the VMM handled in the block (doorbells excluded).
    pub userspace_exits: u64,
    pub hypercalls_seen: u64,
    pub guest: GuestCounts,
    pub host_disturbed: bool,
    /// The vCPU thread's off-CPU time and wall time across the block (0 without thread clocks).
    pub off_cpu_ns: u64,
    pub wall_ns: u64,
}

/// KVM stats of one (round, variant) summed over vCPUs, by index into
/// [`Collected::stat_names`]; `None` where a block had no stats (no binary stats fd).
type CellStats = Option<BTreeMap<u16, u64>>;

/// Sums over a phase for one variant (all vCPUs).
#[derive(Clone, Debug, Default)]
pub struct VariantSums {
    pub blocks: u64,
    pub ops: u64,
    pub cycles: u64,
    /// What the guest counted, over the variant's blocks.
    pub counts: Counts,
    /// Hypercalls the VMM handled (must equal `counts.hypercalls`).
    pub hypercalls_seen: u64,
    pub exits: ExitCounts,
    pub exit_rips: ExitRips,
    /// The blocks' userspace exits by reason with the VMM's handling times (all rounds, like
    /// `exits`, which counts the same exits through the phase totals).
    pub reasons: ReasonTallies,
    pub per_vcpu_ops: Vec<u64>,
    pub per_vcpu_cycles: Vec<u64>,
    /// Guest TSC cycles each interrupt taken in the variant's blocks waited since its raise (at
    /// most [`MAX_WAITS`]).
    pub waits: Vec<u64>,
    /// The guest RIP each of `waits` was taken at (same order).
    pub wait_rips: Vec<u64>,
    /// Interrupts taken in the variant's blocks, by the guest RIP they were taken at.
    pub interrupt_rips: BTreeMap<u64, u64>,
}

/// Waits kept per variant: a bound on memory however long a group runs (an hour at 10 kHz
/// would be 36 M).
pub const MAX_WAITS: usize = 1 << 20;

/// Distinct interrupt RIPs kept per variant (a strategy's loop has a few dozen instructions).
pub const MAX_INTERRUPT_RIPS: usize = 4096;

/// A group's measurements so far.
#[derive(Debug, Default)]
pub struct Collected {
    pub variants: usize,
    pub vcpus: u32,
    pub obs: Vec<Obs>,
    pub sums: Vec<VariantSums>,
    pub vm_stats: StatsDelta,
    pub irqs_raised: u64,
    /// The dispatches' wall time (each its longest vCPU's phase), over which `irqs_raised` were
    /// raised: their rate is what the load really kept.
    pub raise_span_ns: u64,
    /// The lock workload's shared counter always matched 2 × operations.
    pub mutual_exclusion_held: bool,
    pub lock_counter: u64,
    pub strategy_ops: BTreeMap<u32, u64>,
    pub rounds: u32,
    /// Names of the KVM stats seen, in order of first appearance (indices keep the per-round
    /// maps small: a long group holds tens of thousands of them).
    pub stat_names: Vec<String>,
    /// Per (round, variant): the non-zero stats of its blocks, summed over vCPUs.
    pub cell_stats: BTreeMap<(u32, usize), CellStats>,
    /// Per (round, variant): its blocks' userspace exits by [`ExitReason::index`], summed
    /// over vCPUs.
    pub cell_reasons: BTreeMap<(u32, usize), [u64; ExitReason::COUNT]>,
    /// `ipi`: what the sender vCPU did in each dispatch.
    pub ipi_sender: super::ipi_cost::SenderTotals,
    /// Interrupts the guest took outside every block's timed window (its log's entries there,
    /// and those the full log lost, which may be either).
    pub interrupts_outside: u64,
}

impl Collected {
    pub fn new(variants: usize, vcpus: u32) -> Collected {
        let sums = (0..variants)
            .map(|_| VariantSums {
                per_vcpu_ops: vec![0; vcpus as usize],
                per_vcpu_cycles: vec![0; vcpus as usize],
                ..Default::default()
            })
            .collect();
        Collected {
            variants,
            vcpus,
            sums,
            mutual_exclusion_held: true,
            ..Default::default()
        }
    }

    /// Adds one dispatch: every block record is validated against `desc` (a missing or extra
    /// block is a protocol violation, not a smaller sample).
    pub fn add(
        &mut self,
        desc: &PhaseDescriptor,
        d: &Dispatch,
        lock: bool,
    ) -> Result<(), ProtocolViolation> {
        let want_blocks = desc.rounds as usize * desc.variant_count as usize;
        for s in &d.samples {
            if s.blocks.len() != want_blocks {
                return Err(ProtocolViolation {
                    vcpu: s.index,
                    field: "block",
                    problem: format!(
                        "{} blocks reported; {} rounds of {} variants make {want_blocks}",
                        s.blocks.len(),
                        desc.rounds,
                        desc.variant_count
                    ),
                });
            }
            self.interrupts_outside += s.latencies_outside.len() as u64 + s.latencies_lost;
            for b in &s.blocks {
                let v = protocol::validate_block(s.index, desc, b.announced, &b.record)?;
                self.obs.push(Obs {
                    round: v.round,
                    variant: v.variant,
                    vcpu: s.index,
                    cycles: v.tsc_cycles,
                    ops: v.ops,
                    loops: v.loops,
                    userspace_exits: b.userspace_exits,
                    hypercalls_seen: b.hypercalls_seen,
                    guest: v.counts,
                    host_disturbed: disturbance::host_flags(
                        b.off_cpu_ns,
                        b.involuntary_switches,
                        b.wall_ns,
                    ),
                    off_cpu_ns: b.off_cpu_ns,
                    wall_ns: b.wall_ns,
                });
                self.add_cell_stats(v.round, v.variant, b.stats.as_ref());
                let cell = self.cell_reasons.entry((v.round, v.variant)).or_default();
                for (n, t) in cell.iter_mut().zip(&b.reasons) {
                    *n += t.count;
                }
                let sum = &mut self.sums[v.variant];
                for (into, t) in sum.reasons.iter_mut().zip(&b.reasons) {
                    into.merge(t);
                }
                sum.blocks += 1;
                sum.ops += v.ops;
                sum.cycles += v.tsc_cycles;
                sum.counts += v.counts;
                sum.hypercalls_seen += b.hypercalls_seen;
                let room = MAX_WAITS.saturating_sub(sum.waits.len());
                sum.waits.extend(b.latencies.iter().take(room));
                sum.wait_rips.extend(b.latency_rips.iter().take(room));
                for &rip in &b.interrupt_rips {
                    // The RIPs are the guest's word: a bound on distinct ones bounds memory.
                    let known = sum.interrupt_rips.len() < MAX_INTERRUPT_RIPS
                        || sum.interrupt_rips.contains_key(&rip);
                    if known {
                        *sum.interrupt_rips.entry(rip).or_default() += 1;
                    }
                }
                if let Some(slot) = sum.per_vcpu_ops.get_mut(s.index as usize) {
                    *slot += v.ops;
                }
                if let Some(slot) = sum.per_vcpu_cycles.get_mut(s.index as usize) {
                    *slot += v.tsc_cycles;
                }
            }
            for (i, totals) in s.variants.iter().enumerate().take(self.variants) {
                let sum = &mut self.sums[i];
                for (k, n) in &totals.exits {
                    *sum.exits.entry(*k).or_default() += n;
                }
                for (k, n) in &totals.exit_rips {
                    *sum.exit_rips.entry(*k).or_default() += n;
                }
            }
            for (i, c) in s.record.strategy_ops.iter().enumerate() {
                if *c > 0 {
                    *self.strategy_ops.entry(i as u32).or_default() += c;
                }
            }
        }
        if let Some(vm) = &d.vm_stats {
            self.vm_stats.add(vm);
        }
        self.irqs_raised += d.irqs_raised;
        if let Some(s) = &d.ipi_sender {
            self.ipi_sender.add(s);
        }
        self.raise_span_ns = self
            .raise_span_ns
            .saturating_add(u64::try_from(d.wall().as_nanos()).unwrap_or(u64::MAX));
        if lock {
            self.lock_counter += d.lock_counter;
            if d.lock_counter != d.total_ops() * 2 {
                self.mutual_exclusion_held = false;
            }
        }
        self.rounds = self.rounds.max(desc.first_round + desc.rounds);
        Ok(())
    }

    /// Adds one block's KVM stats to its (round, variant) cell.
    fn add_cell_stats(&mut self, round: u32, variant: usize, stats: Option<&StatsDelta>) {
        let indices: Option<Vec<(u16, u64)>> = stats.map(|d| {
            d.nonzero()
                .map(|(name, n)| (self.stat_index(name), n))
                .collect()
        });
        let cell = self
            .cell_stats
            .entry((round, variant))
            .or_insert_with(|| Some(BTreeMap::new()));
        match (cell.as_mut(), indices) {
            (Some(map), Some(values)) => {
                for (i, n) in values {
                    *map.entry(i).or_default() += n;
                }
            }
            _ => *cell = None,
        }
    }

    fn stat_index(&mut self, name: &str) -> u16 {
        match self.stat_names.iter().position(|n| n == name) {
            Some(i) => i as u16,
            None => {
                self.stat_names.push(name.to_string());
                (self.stat_names.len() - 1) as u16
            }
        }
    }

    /// The rounds as a table of cells, each marked disturbed by [`disturbance::disturbed`]: its
    /// time averaged over the vCPUs, flagged when the thread clocks flagged any of its blocks.
    pub fn table(&self) -> RoundTable {
        let mut table = RoundTable::new(self.variants);
        table.stat_names = self.stat_names.clone();
        table.rounds = vec![vec![None; self.variants]; self.rounds as usize];
        // Sum per (round, variant) over vCPUs, then average.
        let mut acc: BTreeMap<(u32, usize), (Cell, u32)> = BTreeMap::new();
        for o in &self.obs {
            let (cell, n) = acc.entry((o.round, o.variant)).or_default();
            cell.cycles_mean += o.cycles as f64;
            cell.cycles_max = cell.cycles_max.max(o.cycles as f64);
            cell.ops = o.ops;
            cell.loops = o.loops;
            cell.userspace_exits += o.userspace_exits;
            cell.hypercalls_seen += o.hypercalls_seen;
            cell.guest += o.guest;
            cell.corrected += u32::from(o.host_disturbed);
            *n += 1;
        }
        for ((round, v), (mut cell, n)) in acc {
            cell.cycles_mean /= f64::from(n.max(1));
            cell.vcpus = n;
            cell.stats = self.cell_stats.get(&(round, v)).cloned().flatten();
            cell.reasons = self
                .cell_reasons
                .get(&(round, v))
                .copied()
                .unwrap_or_default();
            if let Some(row) = table.rounds.get_mut(round as usize) {
                row[v] = Some(cell);
            }
        }
        mark_disturbed(&mut table);
        table
    }
}

/// Marks each variant's disturbed cells; a kept cell's flagged blocks stay counted as
/// corrected, a disturbed cell counts none.
fn mark_disturbed(table: &mut RoundTable) {
    for v in 0..table.variants {
        let cells: Vec<&mut Cell> = table
            .rounds
            .iter_mut()
            .filter_map(|r| r.get_mut(v).and_then(Option::as_mut))
            .collect();
        let cycles: Vec<f64> = cells.iter().map(|c| c.cycles_mean).collect();
        let flagged: Vec<bool> = cells.iter().map(|c| c.corrected > 0).collect();
        for (cell, d) in cells
            .into_iter()
            .zip(disturbance::disturbed(&cycles, &flagged))
        {
            cell.disturbed |= d;
            if cell.disturbed {
                cell.corrected = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `vcpus` vCPUs, 2 variants, 100 rounds: blocks of ~1000 cycles; in every 10th round vCPU
    /// 0's thread was off its CPU outside the timed window (flagged, fast), in every 25th inside
    /// it (flagged, ten times slower).
    fn collected(vcpus: u32) -> Collected {
        let mut c = Collected::new(2, vcpus);
        c.rounds = 100;
        for round in 0..100u32 {
            for variant in 0..2 {
                for vcpu in 0..vcpus {
                    let inside = vcpu == 0 && round % 25 == 3;
                    let outside = vcpu == 0 && round % 10 == 5;
                    let cycles = if inside {
                        10_000
                    } else {
                        1000 + u64::from(round % 7)
                    };
                    c.obs.push(Obs {
                        round,
                        variant,
                        vcpu,
                        cycles,
                        ops: 8,
                        loops: 8,
                        userspace_exits: 0,
                        hypercalls_seen: 0,
                        guest: GuestCounts::default(),
                        host_disturbed: inside || outside,
                        off_cpu_ns: if inside || outside { 4_000_000 } else { 0 },
                        wall_ns: 500_000,
                    });
                }
            }
        }
        c
    }

    #[test]
    fn the_same_rule_keeps_blocks_preempted_outside_the_window_at_every_vcpu_count() {
        for vcpus in 1..=4 {
            let table = collected(vcpus).table();
            let (seen, disturbed) = table.blocks_disturbed(1);
            assert_eq!((seen, disturbed), (100, 4), "{vcpus} vCPUs");
            // Ten flagged rounds kept, each with one flagged block in the row and one in the
            // baseline; the four preempted inside the window are left out, not counted.
            assert_eq!(table.blocks_corrected(1), 20, "{vcpus} vCPUs");
            assert_eq!(table.net_cycles(1).len(), seen - disturbed, "{vcpus} vCPUs");
        }
    }
}
