//! One `[[bench]]` → its rows: the cross product workloads × nesting × irq × vcpus, each row in
//! the group `{bench}/n{nesting}/{irq label}/{vcpus}v` it is measured in.

use irqbench_abi as abi;
use toml::Spanned;

use super::raw::{RawBench, RawIrq, SpannedList};
use super::schema;
use super::schema::fmt_int;
use super::values::{int_range_of, Checked, Ctx, RunValues};
use super::MAX_PHASES;
use crate::config::plan::defaults;
use crate::config::plan::{GroupKey, InsnId, IrqBuild, IrqSource, PhasePlan, StrategyId, Workload};

/// A floor of one operation's cost on any host, in ns: a loop iteration takes at least a
/// cycle, and no host runs at 10 GHz.
const MIN_OP_NS: f64 = 0.1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Strategy,
    Insn,
    Lock,
    Mixed,
}

const KINDS: [(&str, Kind); 4] = [
    ("strategy", Kind::Strategy),
    ("insn", Kind::Insn),
    ("lock", Kind::Lock),
    ("mixed", Kind::Mixed),
];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Strategy => "strategy",
            Kind::Insn => "insn",
            Kind::Lock => "lock",
            Kind::Mixed => "mixed",
        }
    }
}

impl Ctx<'_> {
    /// Refuses a bench whose lists multiply to more than [`MAX_PHASES`] rows, named at its
    /// longest list: a `--set` that gave it is named as the flag, not the bench's line.
    fn rows_fit(&self, key: &str, b: &RawBench, workloads: usize) -> Checked<usize> {
        let lists = [
            (
                "nesting",
                b.nesting.as_ref().map(|l| (l.get_ref().len(), l.span())),
            ),
            ("irq", b.irq.as_ref().map(|l| (l.get_ref().len(), l.span()))),
            (
                "vcpus",
                b.vcpus.as_ref().map(|l| (l.get_ref().len(), l.span())),
            ),
        ];
        let count = lists.iter().fold(workloads, |n, (_, l)| {
            n.saturating_mul(l.as_ref().map_or(1, |(len, _)| *len))
        });
        if count <= MAX_PHASES {
            return Ok(count);
        }
        let longest = lists
            .into_iter()
            .filter_map(|(name, l)| l.map(|(len, span)| (len, name, span)))
            .max_by_key(|(len, _, _)| *len);
        let (span, at) = match longest {
            Some((_, name, span)) => (span, format!("{key}.{name}")),
            None => (b.name.span(), key.to_owned()),
        };
        Err(self.invalid(
            span,
            &at,
            format!("{key} expands to {count} rows, more than {MAX_PHASES}; shorten the lists"),
        ))
    }

    /// The rows of one `[[bench]]` (`key` = `bench[i]`).
    pub(super) fn bench(
        &self,
        key: &str,
        name: &str,
        b: &RawBench,
        run: &RunValues,
    ) -> Checked<Vec<PhasePlan>> {
        let kind = match &b.kind {
            None => Kind::Strategy,
            Some(k) => self.choice(k, &format!("{key}.kind"), "bench kind", &KINDS)?,
        };
        self.keys_of_other_kinds(key, kind, b)?;
        let workloads = self.workloads(key, kind, b)?;
        // The size first, from the lists' lengths: a list of 100 000 values is refused before
        // any of them is checked or a phase is built.
        let count = self.rows_fit(key, b, workloads.len())?;
        let nesting = match &b.nesting {
            None => vec![defaults::NESTING],
            Some(list) => self.unique_list(list, &format!("{key}.nesting"), |v, ek| {
                // -0.0 → 0.0: one phase name per value.
                let x = self.num(v, ek)? + 0.0;
                Ok((x, x.to_string()))
            })?,
        };
        let vcpus = match &b.vcpus {
            None => vec![run.vcpus],
            Some(list) => self.unique_list(list, &format!("{key}.vcpus"), |v, ek| {
                let n = self.vcpus(v, ek)?;
                Ok((n, n.to_string()))
            })?,
        };
        let irqs = match &b.irq {
            None => vec![IrqSource::None],
            Some(list) => self.unique_list(list, &format!("{key}.irq"), |v, ek| {
                let irq = self.irq(v, ek, run)?;
                Ok((irq, irq.label()))
            })?,
        };
        self.measures_what_it_says(key, b, &workloads, &irqs)?;
        self.room_for_an_ipi_sender(key, b, &vcpus, &irqs)?;
        let compare = self.comparisons(key, b, &workloads)?;
        let body_ops = self.opt_int(&b.body_ops, &format!("{key}.body_ops"), defaults::BODY_OPS)?;
        let seed = self.opt_int(&b.seed, &format!("{key}.seed"), defaults::SEED)?;
        let block_ops = match &b.block_ops {
            None => None,
            Some(v) => Some(self.block_ops(v, &format!("{key}.block_ops"), &workloads, run)?),
        };

        if workloads.len() > self.max_group {
            let (rows, max) = (workloads.len(), self.max_group);
            return Err(self.invalid(
                b.name.span(),
                key,
                format!("puts {rows} rows in each group, more than the {max} a group may hold (the rows of a group are measured interleaved in one round, with the `empty` baseline); split the {} across two benches", kind_list(kind)),
            ));
        }
        let mut phases = Vec::with_capacity(count);
        for workload in &workloads {
            for &n in &nesting {
                for irq in &irqs {
                    for &v in &vcpus {
                        phases.push(PhasePlan {
                            name: format!("{name}/{}/n{n}/{}/{v}v", workload.label(), irq.label()),
                            group: GroupKey {
                                bench: name.to_string(),
                                nesting: n,
                                irq: *irq,
                                vcpus: v,
                            },
                            workload: workload.clone(),
                            irq: *irq,
                            nesting: n,
                            body_ops,
                            vcpus: v,
                            seed,
                            block_ops,
                            compare: compare.clone(),
                        });
                    }
                }
            }
        }
        Ok(phases)
    }

    /// Refuses `strategies`, `insns` or `weights` on a bench of a kind that does not read it.
    fn keys_of_other_kinds(&self, key: &str, kind: Kind, b: &RawBench) -> Checked<()> {
        let kind_name = kind.name();
        if let Some(s) = &b.strategies {
            let instead = match kind {
                Kind::Strategy | Kind::Lock => None,
                Kind::Insn => Some("list instructions in `insns`"),
                Kind::Mixed => Some("give strategies as `weights`"),
            };
            if let Some(instead) = instead {
                return Err(self.invalid(
                    s.span(),
                    &format!("{key}.strategies"),
                    format!("`strategies` applies to kinds \"strategy\" and \"lock\", not \"{kind_name}\"; {instead}"),
                ));
            }
        }
        let only = [
            ("insns", b.insns.as_ref().map(Spanned::span), Kind::Insn),
            (
                "weights",
                b.weights.as_ref().map(Spanned::span),
                Kind::Mixed,
            ),
        ];
        for (k, span, wanted) in only {
            if let Some(span) = span.filter(|_| kind != wanted) {
                let wanted = wanted.name();
                return Err(self.invalid(
                    span,
                    &format!("{key}.{k}"),
                    format!("`{k}` applies to kind \"{wanted}\" only, not \"{kind_name}\"; set kind = \"{wanted}\" or remove it"),
                ));
            }
        }
        Ok(())
    }

    /// The bench's comparisons, (a, then b: "b vs a"): `compare` as given, every row against
    /// `reference`, or by default every row against the first plus the field's pairs present.
    /// Only strategy and lock benches have them (an instruction group compares all pairs).
    fn comparisons(
        &self,
        key: &str,
        b: &RawBench,
        workloads: &[Workload],
    ) -> Checked<Vec<(StrategyId, StrategyId)>> {
        let strategies: Vec<StrategyId> = workloads
            .iter()
            .filter_map(|w| match w {
                Workload::Strategy { strategy } | Workload::Lock { strategy } => Some(*strategy),
                _ => None,
            })
            .collect();
        let listed = || {
            strategies
                .iter()
                .map(|s| s.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let member = |name: &Spanned<String>, at: &str| -> Checked<StrategyId> {
            match StrategyId::from_name(name.get_ref()) {
                Some(s) if strategies.contains(&s) => Ok(s),
                _ => Err(self.invalid(
                    name.span(),
                    at,
                    format!(
                        "`{}` is not one of this bench's strategies ({})",
                        crate::text::escape_line(name.get_ref()),
                        listed()
                    ),
                )),
            }
        };
        if strategies.is_empty() {
            if let Some(span) = b
                .compare
                .as_ref()
                .map(|c| c.span())
                .or(b.reference.as_ref().map(|r| r.span()))
            {
                return Err(self.invalid(
                    span,
                    key,
                    "`compare` and `reference` apply to strategy and lock benches (an instruction bench compares its rows pairwise)",
                ));
            }
            return Ok(Vec::new());
        }
        match (&b.compare, &b.reference) {
            (Some(_), Some(r)) => Err(self.invalid(
                r.span(),
                &format!("{key}.reference"),
                "give `compare` or `reference`, not both",
            )),
            (Some(list), None) => {
                let mut pairs = Vec::new();
                for (i, pair) in list.get_ref().iter().enumerate() {
                    let at = format!("{key}.compare[{i}]");
                    let [a, b] = pair.get_ref().as_slice() else {
                        return Err(self.invalid(
                            pair.span(),
                            &at,
                            "a comparison is two strategy names, [a, b] (b is reported against a)",
                        ));
                    };
                    let (a, b) = (member(a, &at)?, member(b, &at)?);
                    if a == b {
                        return Err(self.invalid(
                            pair.span(),
                            &at,
                            "a strategy compared with itself",
                        ));
                    }
                    if !pairs.contains(&(a, b)) {
                        pairs.push((a, b));
                    }
                }
                Ok(pairs)
            }
            (None, Some(r)) => {
                let reference = member(r, &format!("{key}.reference"))?;
                Ok(strategies
                    .iter()
                    .filter(|s| **s != reference)
                    .map(|s| (reference, *s))
                    .collect())
            }
            (None, None) => {
                let first = strategies[0];
                let mut pairs: Vec<(StrategyId, StrategyId)> =
                    strategies[1..].iter().map(|s| (first, *s)).collect();
                for (a, b) in StrategyId::FIELD_PAIRS {
                    if strategies.contains(&a)
                        && strategies.contains(&b)
                        && !pairs.contains(&(a, b))
                    {
                        pairs.push((a, b));
                    }
                }
                Ok(pairs)
            }
        }
    }

    fn workloads(&self, key: &str, kind: Kind, b: &RawBench) -> Checked<Vec<Workload>> {
        let strategies = |list: &Option<SpannedList<String>>| -> Checked<Vec<StrategyId>> {
            Ok(match list {
                None => StrategyId::all()
                    .filter(|s| *s != StrategyId::EMPTY)
                    .collect(),
                Some(list) => self
                    .names(
                        list,
                        &format!("{key}.strategies"),
                        "strategy",
                        &abi::strategy::NAMES,
                    )?
                    .into_iter()
                    .map(StrategyId)
                    .collect(),
            })
        };
        Ok(match kind {
            Kind::Strategy => strategies(&b.strategies)?
                .into_iter()
                .map(|strategy| Workload::Strategy { strategy })
                .collect(),
            Kind::Lock => strategies(&b.strategies)?
                .into_iter()
                .map(|strategy| Workload::Lock { strategy })
                .collect(),
            Kind::Insn => match &b.insns {
                None => InsnId::all().filter(|i| *i != InsnId::EMPTY).collect(),
                Some(list) => self
                    .names(
                        list,
                        &format!("{key}.insns"),
                        "instruction",
                        &abi::insn::NAMES,
                    )?
                    .into_iter()
                    .map(InsnId)
                    .collect::<Vec<_>>(),
            }
            .into_iter()
            .map(|insn| Workload::Insn { insn })
            .collect(),
            Kind::Mixed => vec![Workload::Mixed {
                weights: self.weights(key, b)?,
            }],
        })
    }

    fn weights(&self, key: &str, b: &RawBench) -> Checked<Vec<(StrategyId, u16)>> {
        let Some(map) = &b.weights else {
            return Ok(StrategyId::all()
                .filter(|s| *s != StrategyId::EMPTY)
                .map(|s| (s, 1))
                .collect());
        };
        let k = format!("{key}.weights");
        if map.get_ref().is_empty() {
            let expected = schema::expected("bench.weights").unwrap_or_default();
            return Err(self.invalid(map.span(), &k, format!("empty table; expected {expected}")));
        }
        let mut out = Vec::new();
        for (name, weight) in map.get_ref() {
            let wk = format!("{k}.{}", name.get_ref());
            let id = self.choice_index(name, &wk, "strategy", &abi::strategy::NAMES)?;
            let why = "the strategy's relative weight";
            let w: u16 = self.int_in(weight, &wk, int_range_of(schema::WEIGHT), why)?;
            out.push((StrategyId(id as u32), w));
        }
        out.sort_by_key(|(s, _)| *s);
        Ok(out)
    }

    /// Indices of the names in a non-empty, duplicate-free list.
    fn names(
        &self,
        list: &SpannedList<String>,
        key: &str,
        what: &str,
        candidates: &[&str],
    ) -> Checked<Vec<u32>> {
        self.unique_list(list, key, |v, ek| {
            let id = self.choice_index(v, ek, what, candidates)? as u32;
            Ok((id, format!("{:?}", v.get_ref())))
        })
    }

    /// A fixed block size whose round fits the budget. Before boot only a floor of an
    /// operation's cost is known (`MIN_OP_NS`); the measured round is checked again after
    /// calibration.
    fn block_ops(
        &self,
        v: &Spanned<i64>,
        key: &str,
        workloads: &[Workload],
        run: &RunValues,
    ) -> Checked<u64> {
        let n: u64 = self.int(v, key)?;
        // The group's rows and the `empty` baseline, one block each per round.
        let blocks = workloads.len() as u64 + 1;
        let floor_s = (n * blocks) as f64 * MIN_OP_NS / 1e9;
        if floor_s <= run.max_seconds {
            return Ok(n);
        }
        let most = (run.max_seconds * 1e9 / (blocks as f64 * MIN_OP_NS)).round() as i64;
        Err(self.invalid(
            v.span(),
            key,
            format!(
                "{} operations per block make one round ({blocks} blocks: the group's rows and \
                 the `empty` baseline) last at least {} s even at {MIN_OP_NS} ns per operation, \
                 longer than {}; valid with this budget: 1..={}",
                fmt_int(n as i64),
                schema::fmt_num(floor_s),
                run.budget(),
                fmt_int(most.max(1))
            ),
        ))
    }

    /// A rate or period whose one event fits the budget: a slower load would not reach a
    /// group's rounds at all (and its thread would wait a whole period).
    fn irq_period(
        &self,
        value: &Spanned<f64>,
        key: &str,
        param: &str,
        run: &RunValues,
    ) -> Checked<f64> {
        let x = self.num(value, key)?;
        let (period_s, unit, valid) = match param {
            "rate_hz" => (
                1.0 / x,
                "Hz",
                format!("{}..=1_000_000", schema::fmt_num(1.0 / run.max_seconds)),
            ),
            _ => (
                x * 1e-6,
                "µs",
                format!("1..={}", schema::fmt_num(run.max_seconds * 1e6)),
            ),
        };
        if period_s <= run.max_seconds {
            return Ok(x);
        }
        Err(self.invalid(
            value.span(),
            key,
            format!(
                "{} {unit} is one event every {} s, longer than {}, so no event would land in a \
                 group's rounds; valid with this budget: {valid}",
                self.src.text.get(value.span()).unwrap_or("?"),
                schema::fmt_num(period_s),
                run.budget()
            ),
        ))
    }

    fn irq(&self, v: &Spanned<RawIrq>, key: &str, run: &RunValues) -> Checked<IrqSource> {
        let raw = v.get_ref();
        let sk = format!("{key}.source");
        // Each name paired with its constructor, so the one found is the one built.
        let table: Vec<(&str, (&abi::irq::Info, IrqBuild))> = abi::irq::SOURCES
            .iter()
            .zip(IrqSource::BUILDERS)
            .map(|(info, build)| (info.name, (info, build)))
            .collect();
        let (source, with) = self.choice(&raw.source, &sk, "irq source", &table)?;
        let source_name = source.name;
        let wanted = source.param.map(|p| p.key);
        let params = [("period_us", &raw.period_us), ("rate_hz", &raw.rate_hz)];
        for (name, value) in params {
            let Some(value) = value else { continue };
            if wanted == Some(name) {
                continue;
            }
            let takes = wanted.map_or("no other key".to_string(), |w| format!("`{w}`"));
            return Err(self.invalid(
                value.span(),
                &format!("{key}.{name}"),
                format!("`{name}` does not apply to source \"{source_name}\", which takes {takes}"),
            ));
        }
        let Some(param) = wanted else {
            return Ok(with(0.0));
        };
        let pk = format!("{key}.{param}");
        let value = params.iter().find(|(name, _)| *name == param);
        let Some(value) = value.and_then(|(_, v)| v.as_ref()) else {
            let expected = schema::expected(&format!("bench.irq.{param}")).unwrap_or_default();
            return Err(self.invalid(
                v.span(),
                &pk,
                format!("missing; source \"{source_name}\" needs `{param}`: {expected}"),
            ));
        };
        Ok(with(self.irq_period(value, &pk, param, run)?))
    }
}

/// What a bench lists its rows in, for "split the ... across two benches".
fn kind_list(kind: Kind) -> &'static str {
    match kind {
        Kind::Strategy | Kind::Lock => "`strategies`",
        Kind::Insn => "`insns`",
        // One row per group: the limit cannot be reached this way.
        Kind::Mixed => "`weights`",
    }
}
