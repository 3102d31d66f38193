//! Everything one group's dispatches produced, validated block by block and kept per variant
//! until the figures are computed.

use std::collections::BTreeMap;

use irqbench_abi::{Counts, PhaseDescriptor};

use super::disturbance;
use super::estimators::{Cell, GuestCounts, RoundTable};
use crate::kvm::stats::StatsDelta;
use crate::measure::session::Dispatch;
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
}

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
    /// Whether the thread-clock rules may flag blocks (see [`host_rules_apply`]).
    pub host_rules: bool,
}

/// The thread-clock rules (off-CPU time, involuntary switches) say "someone else took the
/// CPU". When the group's own threads — its vCPUs and the interrupt-load thread — outnumber
/// the CPUs the process may run on, they take it from each other in every block: that
/// scheduling is part of what the row measures (like exits the strategy causes), not a
/// disturbance, and only the outlier rule applies. (Applying the thread clocks there too, with
/// flagged blocks cleared by [`disturbance::cleared`], was measured and lost every 2-vCPU
/// `inject` comparison in one of three runs: docs/ARCHITECTURE.md, "Disturbance".)
pub fn host_rules_apply(vcpus: u32, load_thread: bool, host_cpus: usize) -> bool {
    vcpus as usize + usize::from(load_thread) <= host_cpus
}

impl Collected {
    pub fn new(variants: usize, vcpus: u32, host_rules: bool) -> Collected {
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
            host_rules,
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
            for b in &s.blocks {
                let v = protocol::validate_block(s.index, desc, b.announced, &b.record)?;
                self.obs.push(Obs {
                    round: v.round,
                    variant: v.variant,
                    vcpu: s.index,
                    cycles: v.tsc_cycles,
                    ops: v.ops,
                    userspace_exits: b.userspace_exits,
                    hypercalls_seen: b.hypercalls_seen,
                    guest: v.counts,
                    host_disturbed: self.host_rules
                        && disturbance::host_flags(b.off_cpu_ns, b.involuntary_switches, b.wall_ns),
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

    /// The rounds as a table of cells, with host-flagged blocks and block-time outliers marked
    /// disturbed. Where the thread-clock rules apply, outliers are judged per vCPU block; where
    /// the group's threads share CPUs, each vCPU's blocks are heavy-tailed by construction, so
    /// outliers are judged on the round's mean over vCPUs instead.
    pub fn table(&self) -> RoundTable {
        let (per_block, cleared) = if self.host_rules {
            self.block_outliers()
        } else {
            (vec![false; self.obs.len()], vec![false; self.obs.len()])
        };
        let mut table = RoundTable::new(self.variants);
        table.stat_names = self.stat_names.clone();
        table.rounds = vec![vec![None; self.variants]; self.rounds as usize];
        // Sum per (round, variant) over vCPUs, then average.
        let mut acc: BTreeMap<(u32, usize), (Cell, u32)> = BTreeMap::new();
        for ((o, out), clear) in self.obs.iter().zip(&per_block).zip(&cleared) {
            let (cell, n) = acc.entry((o.round, o.variant)).or_default();
            cell.cycles_mean += o.cycles as f64;
            cell.cycles_max = cell.cycles_max.max(o.cycles as f64);
            cell.ops = o.ops;
            cell.userspace_exits += o.userspace_exits;
            cell.hypercalls_seen += o.hypercalls_seen;
            cell.guest += o.guest;
            cell.disturbed |= (o.host_disturbed && !clear) || *out;
            cell.corrected += u32::from(*clear);
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
        if !self.host_rules {
            mark_cell_outliers(&mut table);
        }
        table
    }

    /// Outlier flags of every vCPU block, judged within its variant, and which thread-clock
    /// flags [`disturbance::cleared`] lifted.
    fn block_outliers(&self) -> (Vec<bool>, Vec<bool>) {
        let mut outlier = vec![false; self.obs.len()];
        let mut lifted = vec![false; self.obs.len()];
        for v in 0..self.variants {
            let idx: Vec<usize> = (0..self.obs.len())
                .filter(|&i| self.obs[i].variant == v)
                .collect();
            let cycles: Vec<f64> = idx.iter().map(|&i| self.obs[i].cycles as f64).collect();
            let mut flagged: Vec<bool> = idx.iter().map(|&i| self.obs[i].host_disturbed).collect();
            for (k, c) in disturbance::cleared(&cycles, &flagged)
                .into_iter()
                .enumerate()
            {
                lifted[idx[k]] = c;
                flagged[k] &= !c;
            }
            for (k, o) in disturbance::outliers(&cycles, &flagged)
                .into_iter()
                .enumerate()
            {
                outlier[idx[k]] = o;
            }
        }
        (outlier, lifted)
    }
}

/// Marks the cells whose mean block time is an outlier within its variant.
fn mark_cell_outliers(table: &mut RoundTable) {
    for v in 0..table.variants {
        let cycles: Vec<f64> = table
            .rounds
            .iter()
            .filter_map(|r| r[v].as_ref().map(|c| c.cycles_mean))
            .collect();
        let flagged = vec![false; cycles.len()];
        let outliers = disturbance::outliers(&cycles, &flagged);
        let cells = table.rounds.iter_mut().filter_map(|r| r[v].as_mut());
        for (cell, out) in cells.zip(outliers) {
            cell.disturbed |= out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_clock_rules_apply_only_while_the_groups_threads_fit_the_cpus() {
        assert!(host_rules_apply(1, false, 2));
        assert!(host_rules_apply(1, true, 2));
        assert!(host_rules_apply(2, false, 2));
        assert!(
            !host_rules_apply(2, true, 2),
            "2 vCPUs + the inject thread on 2 CPUs"
        );
        assert!(!host_rules_apply(4, false, 2));
    }
}
