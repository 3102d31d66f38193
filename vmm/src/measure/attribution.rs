//! Which guest code caused an exit: the exit RIP resolved through the guest ELF's symbol table
//! to (strategy, site) — save, disable, body, restore — with the instruction there decoded.

use std::collections::BTreeMap;

use crate::machine::image::GuestImage;
use crate::plan::PhasePlan;
use crate::results::ExitSite;
use crate::vcpu::window::ExitRips;
use crate::vcpu::ExitReason;

/// Maps exit RIPs to (strategy, site) through the symbol table.
pub fn attribute_sites(image: &GuestImage, sites: &ExitRips, phase: &PhasePlan) -> Vec<ExitSite> {
    // One row per (symbol, reason): the count over all its RIPs, shown at its busiest RIP.
    // Where labels of two strategies share an address, the row's own strategy wins.
    let stem = phase.workload.label().replace('-', "_");
    let mut grouped: BTreeMap<(String, ExitReason), (u64, u64, u64)> = BTreeMap::new();
    for (&(rip, reason), &count) in sites {
        let symbol = image
            .symbols
            .lookup_for(rip, |name| {
                name.strip_prefix("irqbench_op_")
                    .or_else(|| name.strip_prefix("irqbench_lockop_"))
                    .is_some_and(|rest| rest.starts_with(&stem))
            })
            .map_or_else(|| "?".to_string(), |(s, _)| s.name.clone());
        let entry = grouped.entry((symbol, reason)).or_insert((0, rip, 0));
        entry.0 += count;
        if count > entry.2 {
            entry.1 = rip;
            entry.2 = count;
        }
    }
    let mut out: Vec<ExitSite> = grouped
        .into_iter()
        .map(|((symbol, reason), (count, rip, _))| {
            let (strategy, site) = if symbol == "?" {
                ("-".to_string(), "?".to_string())
            } else {
                classify_symbol(&symbol, phase)
            };
            let instruction = (1..=15)
                .rev()
                .find_map(|len| image.code_bytes(rip, len))
                .map(|b| crate::decode::decode_one(b, rip))
                .unwrap_or_default();
            ExitSite {
                strategy,
                site,
                symbol,
                reason: reason.to_string(),
                count,
                rip,
                instruction,
            }
        })
        .collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then(a.rip.cmp(&b.rip)));
    out
}

/// `irqbench_op_native_skip_restore` → ("native-skip", "restore"); pv-op targets → the phase's
/// strategy and the pv-op's role.
pub fn classify_symbol(name: &str, phase: &PhasePlan) -> (String, String) {
    let phase_strategy = phase.workload.label();
    for prefix in ["irqbench_op_", "irqbench_lockop_"] {
        if let Some(rest) = name.strip_prefix(prefix) {
            for s in crate::plan::StrategyId::all() {
                let stem = s.name().replace('-', "_");
                if let Some(site) = rest.strip_prefix(&stem) {
                    let site = match site {
                        "" => "save",
                        "_disable" => "disable",
                        "_body" => "body",
                        "_restore" => "restore",
                        "_end" => "end",
                        _ => continue,
                    };
                    return (s.name().into(), site.into());
                }
            }
        }
    }
    let site = match name {
        "irqbench_pv_save_fl" => "save (pv save_fl)",
        "irqbench_pv_restore_fl" => "restore (pv restore_fl)",
        "irqbench_pv_irq_disable" => "disable (pv irq_disable)",
        "irqbench_pv_irq_enable" => "enable (pv irq_enable)",
        "irqbench_hypercall" => "hypercall (from restore)",
        "irqbench_hypercall_outer" => "hypercall (outer section enable)",
        n if n.starts_with("irqbench_strategy_loop") => "loop",
        n if n.starts_with("irqbench_insn_") => "insn",
        n if n.starts_with("irqbench_irq_") => "interrupt handler",
        _ => return ("-".into(), name.into()),
    };
    (phase_strategy, site.into())
}
