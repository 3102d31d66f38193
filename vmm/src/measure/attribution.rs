//! Which guest code caused an exit: the exit RIP resolved through the guest ELF's symbol table
//! to (strategy, site) — save, disable, body, restore — with the instruction there decoded.

use std::collections::BTreeMap;

use super::shadow;
use crate::config::plan::{PhasePlan, Workload};
use crate::machine::image::GuestImage;
use crate::results::ExitSite;
use crate::vcpu::window::ExitRips;
use crate::vcpu::ExitReason;

/// (symbol, reason, the `sti` whose shadow placed the exit) → (count, busiest RIP, its count).
type Grouped = BTreeMap<(String, &'static str, Option<u64>), (u64, u64, u64)>;

/// (strategy, symbol, reason, `sti`) → (the site, its busiest RIP's count).
type Merged = BTreeMap<(String, String, String, Option<u64>), (ExitSite, u64)>;

/// The `reason` of an interrupt the guest's handler saw taken at a RIP (not an exit).
pub const INTERRUPT_TAKEN: &str = "interrupt-taken";

/// Maps exit RIPs to (strategy, site) through the symbol table. An interrupt-window exit that
/// an `sti` shadow put after the `sti` (in the caller, after `sti; ret`) is credited to that
/// `sti`'s site, marked "(after sti shadow)".
pub fn attribute_sites(image: &GuestImage, sites: &ExitRips, phase: &PhasePlan) -> Vec<ExitSite> {
    let keyed = sites.iter().map(|(&(rip, reason), &count)| {
        let window = reason == ExitReason::IrqWindowOpen;
        (rip, reason.name(), window, count)
    });
    attribute(image, keyed, phase)
}

/// Maps the RIPs the guest took interrupts at to (strategy, site), as window exits are: the
/// interrupt a restore lets in is taken after it, or after the instruction an `sti` shadows.
pub fn attribute_interrupts(
    image: &GuestImage,
    rips: &BTreeMap<u64, u64>,
    phase: &PhasePlan,
) -> Vec<ExitSite> {
    let keyed = rips
        .iter()
        .map(|(&rip, &count)| (rip, INTERRUPT_TAKEN, true, count));
    attribute(image, keyed, phase)
}

/// Maps KVM's traced interrupt-window exits of a group ((`kvm:` reason, RIP) → count) to sites.
/// The trace knows no rows: a RIP in code a strategy's symbol names (after an `sti` shadow
/// included) goes to the row of that strategy; one in code the rows share (a paravirt op, the
/// loop, a handler) gets strategy `-`, as no row can be told from the trace.
pub fn attribute_traced_windows(
    image: &GuestImage,
    rips: &crate::host::trace::WindowRips,
    rows: &[&PhasePlan],
) -> Vec<ExitSite> {
    if rows.is_empty() {
        return Vec::new();
    }
    let mut merged = Merged::new();
    for (&(reason, rip), &count) in rips {
        // The RIP as each row would attribute it, once.
        let as_row: Vec<Option<ExitSite>> = rows
            .iter()
            .map(|row| {
                attribute(image, std::iter::once((rip, reason, true, count)), row)
                    .into_iter()
                    .next()
            })
            .collect();
        let named = |s: &ExitSite| crate::identity::strategy_symbol_rest(&s.symbol).is_some();
        let own = rows.iter().zip(&as_row).find_map(|(row, site)| {
            site.clone()
                .filter(|s| named(s) && s.strategy == row.workload.label())
        });
        let shared = || {
            as_row[0].clone().map(|s| ExitSite {
                strategy: "-".into(),
                ..s
            })
        };
        let Some(site) = own.or_else(shared) else {
            continue;
        };
        let key = (
            site.strategy.clone(),
            site.symbol.clone(),
            site.reason.clone(),
            site.sti_rip,
        );
        let (entry, busiest) = merged.entry(key).or_insert_with(|| {
            let empty = ExitSite {
                total: 0,
                ..site.clone()
            };
            (empty, 0)
        });
        // Shown at its busiest RIP, as a row's sites are.
        if site.total > *busiest {
            *busiest = site.total;
            entry.rip = site.rip;
            entry.instruction.clone_from(&site.instruction);
        }
        entry.total += site.total;
    }
    let mut out: Vec<ExitSite> = merged.into_values().map(|(s, _)| s).collect();
    out.sort_by(|a, b| b.total.cmp(&a.total).then(a.rip.cmp(&b.rip)));
    out
}

/// (rip, reason, whether an `sti` shadow may have moved it, count) → sites, busiest first.
fn attribute(
    image: &GuestImage,
    keyed: impl Iterator<Item = (u64, &'static str, bool, u64)>,
    phase: &PhasePlan,
) -> Vec<ExitSite> {
    // One row per (symbol, reason): the count over all its RIPs, shown at its busiest RIP.
    // Where labels of two strategies share an address, the row's own strategy wins.
    let stem = phase.workload.label().replace('-', "_");
    // Not an `_end` label: in a measured loop the last copy's `_end` is the loop's own `jnz`
    // (its `_next` label), which is the loop's, not the strategy's.
    let prefer = |name: &str| {
        crate::identity::strategy_symbol_rest(name)
            .is_some_and(|rest| rest.starts_with(&stem) && !rest.ends_with("_end"))
    };
    let row_op = row_op(image, phase);
    let mut grouped = Grouped::new();
    for (rip, reason, shadowed, count) in keyed {
        let sti = shadowed
            .then(|| shadow::sti_before(image, rip, row_op))
            .flatten()
            .map(|(sti, _)| sti);
        let symbol = image
            .symbols
            .lookup_for(sti.unwrap_or(rip), prefer)
            .map_or_else(|| "?".to_string(), |(s, _)| s.name.clone());
        let entry = grouped.entry((symbol, reason, sti)).or_insert((0, rip, 0));
        entry.0 += count;
        if count > entry.2 {
            entry.1 = rip;
            entry.2 = count;
        }
    }
    let mut out: Vec<ExitSite> = grouped
        .into_iter()
        .map(|((symbol, reason, sti), (count, rip, _))| {
            site(image, phase, symbol, reason, sti, count, rip)
        })
        .collect();
    out.sort_by(|a, b| b.total.cmp(&a.total).then(a.rip.cmp(&b.rip)));
    out
}

/// The operation a row's loop calls through a register: its strategy's (lock) op or its
/// instruction probe.
fn row_op(image: &GuestImage, phase: &PhasePlan) -> Option<u64> {
    let name = match &phase.workload {
        Workload::Strategy { strategy } => strategy.symbol(),
        Workload::Lock { strategy } => strategy
            .symbol()
            .replace("irqbench_op_", "irqbench_lockop_"),
        Workload::Insn { insn } => insn.symbol(),
        _ => return None,
    };
    image.symbols.address(&name)
}

fn site(
    image: &GuestImage,
    phase: &PhasePlan,
    symbol: String,
    reason: &str,
    sti: Option<u64>,
    count: u64,
    rip: u64,
) -> ExitSite {
    let (strategy, mut site) = if symbol == "?" {
        ("-".to_string(), "?".to_string())
    } else {
        classify_symbol(&symbol, phase)
    };
    if sti.is_some() {
        site.push_str(" (after sti shadow)");
    }
    let instruction = (1..=15)
        .rev()
        .find_map(|len| image.code_bytes(rip, len))
        .map(|b| crate::machine::decode::decode_one(b, rip))
        .unwrap_or_default();
    ExitSite {
        strategy,
        site,
        symbol,
        reason: reason.to_string(),
        total: count,
        rip,
        instruction,
        sti_rip: sti,
    }
}

/// `irqbench_op_native_skip_restore` → ("native-skip", "restore"); pv-op targets → the phase's
/// strategy and the pv-op's role.
pub fn classify_symbol(name: &str, phase: &PhasePlan) -> (String, String) {
    let phase_strategy = phase.workload.label();
    if let Some(rest) = crate::identity::strategy_symbol_rest(name) {
        for s in crate::config::plan::StrategyId::all() {
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

#[cfg(test)]
mod tests {
    use iced_x86::Mnemonic;

    use super::*;
    use crate::config::plan::{Plan, StrategyId};

    fn row(strategy: &str) -> PhasePlan {
        let strategy = StrategyId::from_name(strategy).expect("strategy");
        Plan::single(Workload::Strategy { strategy }, 1, 1)
            .phases
            .remove(0)
    }

    /// An interrupt the guest took where a window exit would stop, after `sti; dec`, is the
    /// restore's too, and after a `popf` the popf's: the guest's record reads like the exits.
    #[test]
    fn an_interrupt_taken_after_a_restore_is_the_restores() {
        let image = GuestImage::embedded().expect("embedded guest");
        let next_copy = image
            .symbols
            .address("irqbench_opf1_native_cli_sti")
            .expect("the second copy");
        let rips: BTreeMap<u64, u64> = [(next_copy, 3)].into_iter().collect();
        let out = attribute_interrupts(&image, &rips, &row("native-cli-sti"));
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].reason, INTERRUPT_TAKEN);
        assert_eq!(out[0].site, "restore (after sti shadow)");
        assert_eq!(out[0].total, 3);
    }

    /// A traced window exit of a group goes to the row whose strategy's code it left (after
    /// the sti shadow too, whichever row comes first); one in a paravirt op the rows share gets
    /// strategy `-`; two RIPs of one site add up.
    #[test]
    fn a_groups_traced_window_exits_go_to_the_strategy_whose_code_they_left() {
        let image = GuestImage::embedded().expect("embedded guest");
        let at = |name: &str| image.symbols.address(name).expect(name);
        let next_copy = at("irqbench_opf1_native_cli_sti");
        let pv = at("irqbench_pv_restore_fl");
        let rips: BTreeMap<(&'static str, u64), u64> = [
            (("kvm:INTERRUPT_WINDOW", next_copy), 5),
            (("kvm:INTERRUPT_WINDOW", pv), 2),
            (("kvm:INTERRUPT_WINDOW", pv + 1), 1),
        ]
        .into_iter()
        .collect();
        let (popf, cli_sti, pvop) = (row("native-popf"), row("native-cli-sti"), row("pvop-popf"));
        let out = attribute_traced_windows(&image, &rips, &[&popf, &cli_sti, &pvop]);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(
            (out[0].strategy.as_str(), out[0].site.as_str(), out[0].total),
            ("native-cli-sti", "restore (after sti shadow)", 5)
        );
        assert_eq!(
            (out[0].reason.as_str(), out[0].rip),
            ("kvm:INTERRUPT_WINDOW", next_copy)
        );
        assert_eq!(
            (
                out[1].strategy.as_str(),
                out[1].symbol.as_str(),
                out[1].total
            ),
            ("-", "irqbench_pv_restore_fl", 3)
        );
        assert_eq!(out[1].rip, pv, "shown at its busiest RIP");
        assert!(attribute_traced_windows(&image, &rips, &[]).is_empty());
    }

    /// In a measured loop the operation is inlined and followed by the counter's `dec`: a
    /// window exit after `sti; dec`, at the next copy's `cli`, is the native-cli-sti restore's;
    /// a signal exit at the same RIP is where the vCPU stood, the next copy's disable. popf
    /// opens the window at once: its exit, before the `dec`, stays the restore's.
    #[test]
    fn a_window_exit_under_the_sti_shadow_is_credited_to_the_sti() {
        let image = GuestImage::embedded().expect("embedded guest");
        let next_copy = image
            .symbols
            .address("irqbench_opf1_native_cli_sti")
            .expect("the second copy");
        let sites: ExitRips = [
            ((next_copy, ExitReason::IrqWindowOpen), 5),
            ((next_copy, ExitReason::Signal), 2),
        ]
        .into_iter()
        .collect();
        let out = attribute_sites(&image, &sites, &row("native-cli-sti"));
        let window = out
            .iter()
            .find(|s| s.reason == "irq-window-open")
            .expect("window row");
        assert_eq!(window.strategy, "native-cli-sti");
        assert_eq!(window.site, "restore (after sti shadow)");
        assert_eq!(window.symbol, "irqbench_opf0_native_cli_sti_restore");
        assert_eq!((window.total, window.rip), (5, next_copy));
        let sti = window.sti_rip.expect("the sti");
        assert_eq!(
            image.symbols.lookup(sti).map(|(s, _)| s.name.as_str()),
            Some("irqbench_opf0_native_cli_sti_restore")
        );
        let signal = out
            .iter()
            .find(|s| s.reason == "signal")
            .expect("signal row");
        assert_eq!(
            (
                signal.strategy.as_str(),
                signal.site.as_str(),
                signal.sti_rip
            ),
            ("native-cli-sti", "disable", None)
        );
        // A signal at the loop's `jnz`, which the last copy's `_end` label shares: the loop's.
        let next = image
            .symbols
            .address("irqbench_strategy_loop_f_native_cli_sti_next")
            .expect("the loop's jnz");
        let sites: ExitRips = [((next, ExitReason::Signal), 1)].into_iter().collect();
        let at_jnz = attribute_sites(&image, &sites, &row("native-cli-sti"));
        assert_eq!(at_jnz[0].site, "loop", "{at_jnz:?}");
        let (addr, code) = image
            .function_code(&StrategyId::NATIVE_POPF.flat_loop_symbol())
            .expect("native-popf's loop");
        let after_popf = crate::machine::decode::decode_all(code, addr)
            .iter()
            .find(|i| i.mnemonic == Mnemonic::Popfq)
            .map(|i| i.addr + i.bytes.len() as u64)
            .expect("popf");
        let sites: ExitRips = [((after_popf, ExitReason::IrqWindowOpen), 3)]
            .into_iter()
            .collect();
        let popf = attribute_sites(&image, &sites, &row("native-popf"));
        assert_eq!(popf.len(), 1, "{popf:?}");
        assert_eq!(
            (
                popf[0].strategy.as_str(),
                popf[0].site.as_str(),
                popf[0].sti_rip
            ),
            ("native-popf", "restore", None)
        );
    }
}
