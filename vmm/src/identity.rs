//! The identities of the abi's tables as typed ids: a strategy ([`StrategyId`]) and an
//! instruction probe ([`InsnId`]) are positions in `abi::strategy::STRATEGIES` and
//! `abi::insn::INSNS`, and everything known about one is read from its entry. The bottom layer:
//! plans, results and reports all name rows by these.

use irqbench_abi as abi;
use serde::{Deserialize, Serialize};

/// What an identity newtype gets from its abi table (`abi::strategy::STRATEGIES`,
/// `abi::insn::INSNS`): the id is the entry's position, everything else is read from the entry.
macro_rules! identity_from_table {
    ($id:ident, $table:path, $info:ty, $symbol_prefix:literal) => {
        impl $id {
            /// Every id of the table, in id order (the baseline `empty` included).
            pub fn all() -> impl Iterator<Item = $id> {
                (0..$table.len() as u32).map($id)
            }

            /// Its table entry (`None` for an id outside the table).
            pub fn info(self) -> Option<&'static $info> {
                $table.get(self.0 as usize)
            }

            /// The name configs and reports use.
            pub fn name(self) -> &'static str {
                self.info().map_or("?", |i| i.name)
            }

            pub fn from_name(name: &str) -> Option<$id> {
                $table
                    .iter()
                    .position(|i| i.name == name)
                    .map(|i| $id(i as u32))
            }

            /// One line for `irqbench list`.
            pub fn describe(self) -> &'static str {
                self.info().map_or("?", |i| i.describe)
            }

            /// The guest symbol of its code (`-` in the name becomes `_`).
            pub fn symbol(self) -> String {
                format!(concat!($symbol_prefix, "{}"), self.name().replace('-', "_"))
            }
        }
    };
}

/// An interrupt-flag save/restore strategy (README's table), or the empty baseline: an index
/// into `abi::strategy::STRATEGIES`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct StrategyId(pub u32);

identity_from_table!(
    StrategyId,
    abi::strategy::STRATEGIES,
    abi::strategy::Info,
    "irqbench_op_"
);

impl StrategyId {
    pub const EMPTY: StrategyId = StrategyId(abi::strategy::EMPTY);
    pub const NATIVE_POPF: StrategyId = StrategyId(abi::strategy::NATIVE_POPF);
    pub const NATIVE_CLI_STI: StrategyId = StrategyId(abi::strategy::NATIVE_CLI_STI);
    pub const VIF_RESTORE: StrategyId = StrategyId(abi::strategy::VIF_RESTORE);
    pub const NATIVE_SKIP: StrategyId = StrategyId(abi::strategy::NATIVE_SKIP);
    pub const PVOP_POPF: StrategyId = StrategyId(abi::strategy::PVOP_POPF);
    pub const PVOP_SKIP: StrategyId = StrategyId(abi::strategy::PVOP_SKIP);
    pub const VIF_SKIP: StrategyId = StrategyId(abi::strategy::VIF_SKIP);

    /// The comparisons the field asks about, (a, then b: "b vs a"), made wherever both are in
    /// a group that chose none of its own: the 2021 skip, the 2017 pv-op skip, the virtual-IF
    /// skip, and spin_lock_irq against irqsave.
    pub const FIELD_PAIRS: [(StrategyId, StrategyId); 4] = [
        (StrategyId::NATIVE_POPF, StrategyId::NATIVE_SKIP),
        (StrategyId::PVOP_POPF, StrategyId::PVOP_SKIP),
        (StrategyId::VIF_RESTORE, StrategyId::VIF_SKIP),
        (StrategyId::NATIVE_POPF, StrategyId::NATIVE_CLI_STI),
    ];

    #[cfg(test)]
    pub fn is_vif(self) -> bool {
        abi::strategy::is_vif(self.0)
    }

    /// Guest functions its code calls (pv-ops, the hypercall stub), for `irqbench disasm`.
    pub fn calls(self) -> &'static [&'static str] {
        self.info().map_or(&[], |i| i.calls)
    }

    /// The loop a strategy row's blocks run with no nesting and no body (the guest's
    /// `irqbench_strategy_loop_f_<name>`): the operation inlined four times per turn.
    pub fn flat_loop_symbol(self) -> String {
        format!("irqbench_strategy_loop_f_{}", self.name().replace('-', "_"))
    }
}

/// The `<name><site>` part of a strategy operation's symbol: the operation itself
/// (`irqbench_op_`), its lock-phase twin (`irqbench_lockop_`) or one of its inlined copies in
/// the measured loops (`irqbench_op<kind><copy>_`, e.g. `irqbench_opf2_native_popf_restore`).
/// `None` for any other symbol.
pub fn strategy_symbol_rest(name: &str) -> Option<&str> {
    if let Some(rest) = name
        .strip_prefix("irqbench_op_")
        .or_else(|| name.strip_prefix("irqbench_lockop_"))
    {
        return Some(rest);
    }
    let (tag, rest) = name.strip_prefix("irqbench_op")?.split_once('_')?;
    let (kind, copy) = tag.split_at(tag.find(|c: char| c.is_ascii_digit())?);
    let copy_ok = !copy.is_empty() && copy.bytes().all(|b| b.is_ascii_digit());
    (matches!(kind, "f" | "fb" | "n" | "nb") && copy_ok).then_some(rest)
}

/// An instruction (or exit) of the instruction-cost suite: an index into `abi::insn::INSNS`.
/// The default is the `empty` baseline.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct InsnId(pub u32);

identity_from_table!(InsnId, abi::insn::INSNS, abi::insn::Info, "irqbench_insn_");

impl InsnId {
    pub const EMPTY: InsnId = InsnId(abi::insn::EMPTY);
    pub const CLI: InsnId = InsnId(abi::insn::CLI);
    pub const STI: InsnId = InsnId(abi::insn::STI);
    pub const POPF_SET_IF: InsnId = InsnId(abi::insn::POPF_SET_IF);
    pub const POPF_CLEAR_IF: InsnId = InsnId(abi::insn::POPF_CLEAR_IF);
    pub const POPF_SAME_IF: InsnId = InsnId(abi::insn::POPF_SAME_IF);
    pub const PIO_EXIT: InsnId = InsnId(abi::insn::PIO_EXIT);
    pub const CPUID: InsnId = InsnId(abi::insn::CPUID);
    pub const HLT_EXIT: InsnId = InsnId(abi::insn::HLT_EXIT);

    pub fn unroll(self) -> u32 {
        abi::insn::unroll(self.0)
    }

    /// What one unit executes (`cli; push; popf`), for the report's "measures" column.
    pub fn measures(self) -> &'static str {
        self.info().map_or("?", |i| i.measures)
    }

    /// Guest instructions one unit is.
    pub fn instructions(self) -> u32 {
        self.info().map_or(0, |i| i.instructions)
    }
}

/// A test or diagnostic workload (not reachable from configs, so in no abi table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Diagnostic {
    Doorbells,
    FaultUd2,
    SpinForever,
    GarbageRecord,
    Idle,
    HaltForever,
    LatencyProbe,
}

impl Diagnostic {
    pub const ALL: [Diagnostic; 7] = [
        Diagnostic::Doorbells,
        Diagnostic::FaultUd2,
        Diagnostic::SpinForever,
        Diagnostic::GarbageRecord,
        Diagnostic::Idle,
        Diagnostic::HaltForever,
        Diagnostic::LatencyProbe,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Diagnostic::Doorbells => "doorbells",
            Diagnostic::FaultUd2 => "fault-ud2",
            Diagnostic::SpinForever => "spin-forever",
            Diagnostic::GarbageRecord => "garbage-record",
            Diagnostic::Idle => "idle",
            Diagnostic::HaltForever => "halt-forever",
            Diagnostic::LatencyProbe => "latency-probe",
        }
    }
}

/// What a result row measured: its `strategy` field, written (and read) as the name alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subject {
    /// A strategy (strategy and lock rows); never `EMPTY`, which is [`Subject::Baseline`].
    Strategy(StrategyId),
    /// An instruction probe; never `EMPTY`.
    Insn(InsnId),
    /// The `empty` loop of either suite: both tables name it alike, so the name alone cannot
    /// say which, and a row of it (a config that lists `empty`) is this.
    #[default]
    Baseline,
    /// Strategies interleaved by weight (`mixed`).
    Mixed,
    Diagnostic(Diagnostic),
}

impl Subject {
    pub fn strategy(id: StrategyId) -> Subject {
        if id == StrategyId::EMPTY {
            Subject::Baseline
        } else {
            Subject::Strategy(id)
        }
    }

    pub fn insn(id: InsnId) -> Subject {
        if id == InsnId::EMPTY {
            Subject::Baseline
        } else {
            Subject::Insn(id)
        }
    }

    /// Every subject a row can have, in table order.
    pub fn all() -> impl Iterator<Item = Subject> {
        let strategies = StrategyId::all().filter(|s| *s != StrategyId::EMPTY);
        let insns = InsnId::all().filter(|i| *i != InsnId::EMPTY);
        std::iter::once(Subject::Baseline)
            .chain(strategies.map(Subject::Strategy))
            .chain(insns.map(Subject::Insn))
            .chain(std::iter::once(Subject::Mixed))
            .chain(Diagnostic::ALL.into_iter().map(Subject::Diagnostic))
    }

    pub fn name(self) -> &'static str {
        match self {
            Subject::Strategy(s) => s.name(),
            Subject::Insn(i) => i.name(),
            Subject::Baseline => StrategyId::EMPTY.name(),
            Subject::Mixed => "mixed",
            Subject::Diagnostic(d) => d.name(),
        }
    }

    pub fn from_name(name: &str) -> Option<Subject> {
        Subject::all().find(|s| s.name() == name)
    }

    /// What one unit of an instruction row executes (`cli; push; popf`); empty for the rows
    /// of other kinds, which run no probe.
    pub fn measures(self) -> &'static str {
        match self {
            Subject::Insn(i) => i.measures(),
            Subject::Baseline => InsnId::EMPTY.measures(),
            Subject::Strategy(_) | Subject::Mixed | Subject::Diagnostic(_) => "",
        }
    }
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Subject {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// A name as an error quotes it: at most 80 characters (whoever prints it escapes it).
fn shown(name: &str) -> String {
    match name.char_indices().nth(80) {
        Some((end, _)) => format!("{}…", &name[..end]),
        None => name.to_string(),
    }
}

impl<'de> Deserialize<'de> for Subject {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Subject, D::Error> {
        let name = String::deserialize(d)?;
        Subject::from_name(&name).ok_or_else(|| {
            let known: Vec<&str> = Subject::all().map(Subject::name).collect();
            serde::de::Error::custom(format_args!(
                "`strategy` is `{}`, which names no strategy, instruction probe or workload of \
                 this build (known: {})",
                shown(&name),
                known.join(", ")
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The operation, its lock twin and its inlined copies name a strategy site; the loops,
    /// the mixed workload's helper and look-alikes do not.
    #[test]
    fn strategy_symbols_of_every_kind_give_their_site() {
        for (name, rest) in [
            (
                "irqbench_op_native_popf_restore",
                Some("native_popf_restore"),
            ),
            ("irqbench_lockop_vif_skip", Some("vif_skip")),
            (
                "irqbench_opf0_native_cli_sti_end",
                Some("native_cli_sti_end"),
            ),
            ("irqbench_opfb3_pvop_skip_body", Some("pvop_skip_body")),
            ("irqbench_opn1_empty", Some("empty")),
            ("irqbench_opnb12_vif_restore", Some("vif_restore")),
            ("irqbench_opx0_native_popf", None),
            ("irqbench_opf_native_popf", None),
            ("irqbench_op0_native_popf", None),
            ("irqbench_opf0x_native_popf", None),
            ("irqbench_strategy_loop_f_native_popf", None),
            ("irqbench_opf0", None),
        ] {
            assert_eq!(strategy_symbol_rest(name), rest, "{name}");
        }
    }

    /// Every probe has each of its facts: a name, a description, what it executes and how
    /// many instructions one unit is (only the `empty` baseline executes none).
    #[test]
    fn every_insn_entry_has_all_its_facts() {
        for id in InsnId::all() {
            let i = id.info().expect("an id of the table");
            assert!(!i.name.is_empty() && !i.describe.is_empty(), "{i:?}");
            assert!(!i.measures.is_empty(), "{}: no `measures`", i.name);
            assert!(i.unroll >= 1, "{}: unroll 0", i.name);
            assert_eq!(
                i.instructions == 0,
                id == InsnId::EMPTY,
                "{}: instructions per unit {}",
                i.name,
                i.instructions
            );
        }
    }

    /// Every strategy has a name, a description, and flag instructions unless it is the
    /// baseline.
    #[test]
    fn every_strategy_entry_has_all_its_facts() {
        for id in StrategyId::all() {
            let i = id.info().expect("an id of the table");
            assert!(!i.name.is_empty() && !i.describe.is_empty(), "{i:?}");
            let none = i.flags == abi::strategy::FlagOps::NONE;
            assert_eq!(
                none,
                id == StrategyId::EMPTY,
                "{}: flags {:?}",
                i.name,
                i.flags
            );
        }
    }

    /// Every subject is written as its name and read back from it; a name of no table is an
    /// error that says which field and what is valid.
    #[test]
    fn subject_round_trips_as_its_name_and_an_unknown_one_is_refused() {
        let mut names = Vec::new();
        for s in Subject::all() {
            let json = serde_json::to_string(&s).expect("json");
            assert_eq!(json, format!("{:?}", s.name()));
            assert_eq!(serde_json::from_str::<Subject>(&json).expect(&json), s);
            assert!(!names.contains(&s.name()), "{} twice", s.name());
            names.push(s.name());
        }
        assert_eq!(Subject::strategy(StrategyId::EMPTY), Subject::Baseline);
        assert_eq!(Subject::insn(InsnId::EMPTY), Subject::Baseline);
        assert_eq!(
            Subject::from_name("pio-exit"),
            Some(Subject::Insn(InsnId::PIO_EXIT))
        );
        let err = serde_json::from_str::<Subject>("\"native-pof\"").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("`strategy`") && msg.contains("native-pof"),
            "{msg}"
        );
        assert!(
            msg.contains("native-popf") && msg.contains("hlt-exit"),
            "{msg}"
        );
    }
}
