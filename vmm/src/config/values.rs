//! Checks of single values against the schema, the `[run]` table, and the assembly of the plan.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::ops::Range;

use toml::Spanned;

use super::raw::{RawBench, RawConfig, RawRun, SpannedList};
use super::schema::{self, fmt_int, Key};
use super::spans::{key_norm, Source};
use super::{ConfigError, Limits, MAX_PHASES};
use crate::config::plan::defaults;
use crate::config::plan::{HypercallTransport, InsnId, IrqSource, Plan, Workload};
use crate::results::redact::Redaction;

/// A step of validation.
pub(super) type Checked<T> = Result<T, ConfigError>;

/// The closest of `candidates` to `word` within edit distance 3 (and at most half the candidate,
/// so `bogus` does not suggest `vcpus`).
pub(super) fn closest<'c>(word: &str, candidates: &[&'c str]) -> Option<&'c str> {
    candidates
        .iter()
        .map(|c| (strsim::levenshtein(word, c), *c))
        .filter(|(d, c)| *d <= 3 && *d * 2 <= c.chars().count())
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

const HYPERCALLS: [(&str, HypercallTransport); 3] = [
    ("port", HypercallTransport::Port),
    ("vmcall", HypercallTransport::Vmcall),
    ("vapic-poll", HypercallTransport::VapicPoll),
];

/// The validated `[run]` values benches need.
#[derive(Debug)]
pub(super) struct RunValues {
    pub vcpus: u32,
    /// `run.max_seconds` and where it was set (`None`: the default).
    pub max_seconds: f64,
    pub max_seconds_span: Option<Range<usize>>,
}

impl RunValues {
    /// How an error shows the budget: `run.max_seconds = 0.5` (or its default).
    pub(super) fn budget(&self) -> String {
        let at = if self.max_seconds_span.is_some() {
            ""
        } else {
            " (the default)"
        };
        format!(
            "run.max_seconds = {}{at}",
            schema::fmt_num(self.max_seconds)
        )
    }
}

/// What validation needs besides the raw values.
#[derive(Debug)]
pub(super) struct Ctx<'a> {
    pub src: Source<'a>,
    pub limits: Limits,
    /// Rows one group may hold ([`crate::config::plan::MAX_GROUP_VARIANTS`] outside tests).
    pub max_group: usize,
}

impl Ctx<'_> {
    pub(super) fn invalid(
        &self,
        span: Range<usize>,
        key: &str,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError::Invalid {
            at: self.src.location(span.start),
            key: key.to_string(),
            message: message.into(),
        }
    }

    /// An integer in `lo..=hi`; `why` says what the key means.
    pub(super) fn int_in<T>(
        &self,
        v: &Spanned<i64>,
        key: &str,
        (lo, hi): (i64, i64),
        why: &str,
    ) -> Checked<T>
    where
        T: TryFrom<i64>,
    {
        let x = *v.get_ref();
        if x < lo || x > hi {
            let (x, lo, hi) = (fmt_int(x), fmt_int(lo), fmt_int(hi));
            let message = format!("{x} is outside {lo}..={hi} ({why})");
            return Err(self.invalid(v.span(), key, message));
        }
        T::try_from(x).map_err(|_| self.invalid(v.span(), key, "out of range"))
    }

    /// An integer key checked against its schema entry; `key` is the path in the file.
    pub(super) fn int<T>(&self, v: &Spanned<i64>, key: &str) -> Checked<T>
    where
        T: TryFrom<i64>,
    {
        let spec = schema::spec(&key_norm(key));
        self.int_in(v, key, int_range(spec), &spec.meaning())
    }

    /// An optional integer key, or `default`.
    pub(super) fn opt_int<T>(&self, v: &Option<Spanned<i64>>, key: &str, default: T) -> Checked<T>
    where
        T: TryFrom<i64>,
    {
        v.as_ref().map_or(Ok(default), |v| self.int(v, key))
    }

    /// A number key checked against its schema entry.
    pub(super) fn num(&self, v: &Spanned<f64>, key: &str) -> Checked<f64> {
        let spec = schema::spec(&key_norm(key));
        let x = *v.get_ref();
        if !spec.range.contains(x) {
            // 1e-300 as written, not as 300 digits.
            let far = x.is_finite() && x != 0.0 && !(1e-4..1e15).contains(&x.abs());
            let shown = if far {
                schema::fmt_num(x)
            } else {
                x.to_string()
            };
            let message = format!(
                "{shown} is outside {} ({})",
                spec.range.render(),
                spec.meaning()
            );
            return Err(self.invalid(v.span(), key, message));
        }
        Ok(x)
    }

    /// A block length whose round (a row's block and the `empty` baseline's, at least) fits
    /// the budget: known before boot, so not left to the calibration to refuse.
    fn block_us(&self, v: &Option<Spanned<i64>>, max_seconds: f64) -> Checked<u32> {
        let us: u32 = self.opt_int(v, "run.block_us", defaults::BLOCK_US)?;
        let round_s = 2.0 * f64::from(us) / 1e6;
        let Some(v) = v.as_ref().filter(|_| round_s > max_seconds) else {
            return Ok(us);
        };
        let most = (max_seconds * 1e6 / 2.0).floor() as i64;
        Err(self.invalid(
            v.span(),
            "run.block_us",
            format!(
                "{} µs per block make one round (a row's block and the `empty` baseline's) last \
                 at least {} s, longer than run.max_seconds = {}; valid with this budget: 20..={}",
                fmt_int(i64::from(us)),
                schema::fmt_num(round_s),
                schema::fmt_num(max_seconds),
                fmt_int(most)
            ),
        ))
    }

    fn opt_num(&self, v: &Option<Spanned<f64>>, key: &str, default: f64) -> Checked<f64> {
        v.as_ref().map_or(Ok(default), |v| self.num(v, key))
    }

    /// A name: 1..=64 of a-z, 0-9, `_`, `-`.
    pub(super) fn ident(&self, v: &Spanned<String>, key: &str) -> Checked<String> {
        let s = v.get_ref();
        let bad = s
            .chars()
            .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_' || *c == '-'));
        let problem = if s.is_empty() {
            Some("an empty name".to_string())
        } else if s.chars().count() > 64 {
            // The start is enough to find it: a 10k-character name is not echoed whole.
            let start: String = s.chars().take(60).collect();
            let n = s.chars().count();
            Some(format!(
                "{start:?}… ({n} characters) is longer than 64 characters"
            ))
        } else {
            bad.map(|c| format!("{s:?} contains {c:?}"))
        };
        match problem {
            Some(p) => Err(self.invalid(
                v.span(),
                key,
                format!("{p}; a name is 1..=64 characters from a-z, 0-9, `_` and `-`"),
            )),
            None => Ok(s.clone()),
        }
    }

    /// The index of `v` in `candidates`, or "unknown {what} ...; valid: ...; did you mean ...?".
    pub(super) fn choice_index(
        &self,
        v: &Spanned<String>,
        key: &str,
        what: &str,
        candidates: &[&str],
    ) -> Checked<usize> {
        let s = v.get_ref();
        candidates.iter().position(|c| c == s).ok_or_else(|| {
            let hint = closest(s, candidates)
                .map(|c| format!("; did you mean {c}?"))
                .unwrap_or_default();
            let valid = candidates.join(", ");
            self.invalid(
                v.span(),
                key,
                format!("unknown {what} {s:?}; valid: {valid}{hint}"),
            )
        })
    }

    /// The value `v` names in `table`.
    pub(super) fn choice<T: Copy>(
        &self,
        v: &Spanned<String>,
        key: &str,
        what: &str,
        table: &[(&str, T)],
    ) -> Checked<T> {
        let names: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
        let i = self.choice_index(v, key, what, &names)?;
        Ok(table[i].1)
    }

    /// The checked elements of a non-empty list whose elements must differ; `check` returns an
    /// element's value and how messages show it (equal shows are duplicates). Linear in the
    /// list's length: the shows seen so far are a hash map, not a list searched per element.
    pub(super) fn unique_list<T, U, S>(
        &self,
        list: &SpannedList<T>,
        key: &str,
        mut check: impl FnMut(&Spanned<T>, &str) -> Checked<(U, S)>,
    ) -> Checked<Vec<U>>
    where
        S: Hash + Eq + fmt::Display,
    {
        if list.get_ref().is_empty() {
            let expected = schema::expected(&key_norm(key)).unwrap_or_default();
            return Err(self.invalid(list.span(), key, format!("empty list; expected {expected}")));
        }
        let mut seen: HashMap<S, usize> = HashMap::with_capacity(list.get_ref().len());
        let mut out = Vec::with_capacity(list.get_ref().len());
        for (j, v) in list.get_ref().iter().enumerate() {
            let ek = format!("{key}[{j}]");
            let (value, show) = check(v, &ek)?;
            match seen.entry(show) {
                Entry::Occupied(first) => {
                    let (show, first) = (first.key(), first.get());
                    // Only a bench's lists make rows.
                    let why = if key.starts_with("bench") {
                        "it would yield the same row names twice"
                    } else {
                        "listed twice"
                    };
                    return Err(self.invalid(
                        v.span(),
                        &ek,
                        format!("duplicate value {show} (also {key}[{first}]); {why}"),
                    ));
                }
                Entry::Vacant(slot) => {
                    slot.insert(j);
                }
            }
            out.push(value);
        }
        Ok(out)
    }

    /// Refuses rows that would measure something other than their name says: `hlt-exit` under
    /// a load that needs the in-kernel irqchip (`lapic-timer`, `msi`), where KVM handles HLT
    /// itself (arch/x86/kvm/x86.c `kvm_emulate_halt`: the vCPU blocks in KVM until its next
    /// interrupt), so no exit reaches irqbench and each operation lasts until the next one.
    pub(super) fn measures_what_it_says(
        &self,
        key: &str,
        b: &RawBench,
        workloads: &[Workload],
        irqs: &[IrqSource],
    ) -> Checked<()> {
        let hlt = InsnId::from_name("hlt-exit");
        let has_hlt = workloads
            .iter()
            .any(|w| matches!(w, Workload::Insn { insn } if Some(*insn) == hlt));
        let in_kernel = irqs.iter().position(IrqSource::needs_in_kernel_irqchip);
        let (true, Some(k)) = (has_hlt, in_kernel) else {
            return Ok(());
        };
        let source = irqs[k].name();
        let why = format!(
            "measures the wait for the next interrupt (a timer tick, an MSI), not an exit: \
             {source} needs the in-kernel irqchip, where KVM handles HLT itself and the vCPU \
             sleeps until its next interrupt (arch/x86/kvm/x86.c kvm_emulate_halt)"
        );
        let named = b.insns.as_ref().and_then(|list| {
            let j = list
                .get_ref()
                .iter()
                .position(|v| v.get_ref() == "hlt-exit")?;
            Some((list.get_ref()[j].span(), j))
        });
        if let Some((span, j)) = named {
            return Err(self.invalid(
                span,
                &format!("{key}.insns[{j}]"),
                format!("\"hlt-exit\" with {key}.irq[{k}] source = \"{source}\" {why}; measure hlt-exit in a bench without {source}, or remove it from insns"),
            ));
        }
        let span = b
            .irq
            .as_ref()
            .and_then(|list| list.get_ref().get(k).map(Spanned::span))
            .unwrap_or(b.name.span());
        Err(self.invalid(
            span,
            &format!("{key}.irq[{k}]"),
            format!("source = \"{source}\" with the default insns, which include \"hlt-exit\": hlt-exit {why}; list the insns without \"hlt-exit\", or use another irq source"),
        ))
    }

    /// `ipi` runs one more vCPU than the row's (its sender): the largest vCPU count must leave
    /// room for it within the ABI's and the host's limits.
    pub(super) fn room_for_an_ipi_sender(
        &self,
        key: &str,
        b: &RawBench,
        vcpus: &[u32],
        irqs: &[IrqSource],
    ) -> Checked<()> {
        let Some(k) = irqs.iter().position(IrqSource::needs_ipi_sender) else {
            return Ok(());
        };
        let max = irqbench_abi::MAX_VCPUS.min(self.limits.max_vcpus.max(1));
        let Some(&most) = vcpus.iter().max().filter(|&&n| n + 1 > max) else {
            return Ok(());
        };
        let span = b
            .irq
            .as_ref()
            .and_then(|list| list.get_ref().get(k))
            .map_or(0..0, Spanned::span);
        Err(self.invalid(
            span,
            &format!("{key}.irq[{k}]"),
            format!("source = \"ipi\" runs an extra sender vCPU beside the row's {most}, and {} is beyond the limit of {max} vCPUs (irqbench's and this host's KVM's); use at most {} vCPUs with ipi", most + 1, max - 1),
        ))
    }

    /// A vCPU count within the ABI's and the host's limits.
    pub(super) fn vcpus(&self, v: &Spanned<i64>, key: &str) -> Checked<u32> {
        let x = *v.get_ref();
        let (lo, abi_max) = int_range(schema::spec("run.vcpus"));
        let host_max = i64::from(self.limits.max_vcpus);
        if (lo..=abi_max).contains(&x) && x > host_max {
            return Err(self.invalid(
                v.span(),
                key,
                format!(
                    "{x} vCPUs is beyond this host's KVM limit of {host_max} vCPUs; valid: 1..={host_max}"
                ),
            ));
        }
        let why = format!("vCPUs; irqbench supports at most {abi_max}");
        self.int_in(v, key, (lo, abi_max.min(host_max.max(1))), &why)
    }

    /// The whole plan.
    pub(super) fn plan(&self, raw: RawConfig) -> Checked<Plan> {
        let name = self.ident(&raw.name, "name")?;
        let run = raw.run.unwrap_or_default();
        let mut plan = self.run(&run)?;
        plan.name = name;
        plan.description = raw.description.unwrap_or_default();
        plan.redact = self.redact(raw.report.as_ref().and_then(|r| r.redact.as_ref()))?;
        let run_values = RunValues {
            vcpus: match &run.vcpus {
                None => defaults::VCPUS,
                Some(v) => self.vcpus(v, "run.vcpus")?,
            },
            max_seconds: plan.max_seconds,
            max_seconds_span: run.max_seconds.as_ref().map(Spanned::span),
        };

        let benches = match &raw.bench {
            Some(b) if !b.get_ref().is_empty() => b.get_ref(),
            other => {
                let span = other.as_ref().map_or(0..0, |b| b.span());
                return Err(self.invalid(
                    span,
                    "bench",
                    "no benches; a config needs at least one [[bench]] table with a `name`",
                ));
            }
        };
        let mut bench_names: HashMap<&str, usize> = HashMap::new();
        let mut phase_names: HashMap<String, usize> = HashMap::new();
        for (i, bench) in benches.iter().enumerate() {
            let key = format!("bench[{i}]");
            let bench_name = self.ident(&bench.name, &format!("{key}.name"))?;
            if let Some(first) = bench_names.insert(bench.name.get_ref(), i) {
                return Err(self.invalid(
                    bench.name.span(),
                    &format!("{key}.name"),
                    format!("duplicate bench name {bench_name:?}: bench[{first}] has it already; bench names must be unique"),
                ));
            }
            for phase in self.bench(&key, &bench_name, bench, &run_values)? {
                // Bench names are unique and prefix every phase name; this guards that link.
                if let Some(first) = phase_names.insert(phase.name.clone(), i) {
                    return Err(self.invalid(
                        bench.name.span(),
                        &key,
                        format!("duplicate row name {:?} (bench[{first}] yields it too); row names must be unique", phase.name),
                    ));
                }
                plan.phases.push(phase);
            }
            if plan.phases.len() > MAX_PHASES {
                return Err(self.invalid(
                    bench.name.span(),
                    &key,
                    format!("the plan expands to more than {MAX_PHASES} rows; shorten the lists"),
                ));
            }
        }
        Ok(plan)
    }

    /// `report.redact`: names of [`Redaction`]s, each once; an empty list is none.
    fn redact(&self, list: Option<&SpannedList<String>>) -> Checked<Vec<Redaction>> {
        let Some(list) = list.filter(|l| !l.get_ref().is_empty()) else {
            return Ok(Vec::new());
        };
        let names: Vec<&str> = Redaction::ALL.iter().map(|r| r.name()).collect();
        self.unique_list(list, "report.redact", |v, ek| {
            let i = self.choice_index(v, ek, "fact to redact", &names)?;
            Ok((Redaction::ALL[i], names[i]))
        })
    }

    /// A plan with the `[run]` values and no name, description or phases yet.
    fn run(&self, run: &RawRun) -> Checked<Plan> {
        let hypercall = match &run.hypercall {
            None => HypercallTransport::Port,
            Some(v) => self.choice(v, "run.hypercall", "hypercall transport", &HYPERCALLS)?,
        };
        let phase_timeout_ms = run
            .phase_timeout_ms
            .as_ref()
            .map(|v| self.int(v, "run.phase_timeout_ms"))
            .transpose()?;
        let max_seconds =
            self.opt_num(&run.max_seconds, "run.max_seconds", defaults::MAX_SECONDS)?;
        Ok(Plan {
            name: String::new(),
            description: String::new(),
            source: self.src.file.to_string(),
            memory_mib: self.opt_int(&run.memory_mib, "run.memory_mib", defaults::MEMORY_MIB)?,
            precision: self.opt_num(&run.precision, "run.precision", defaults::PRECISION)?,
            max_seconds,
            min_rounds: self.opt_int(&run.min_rounds, "run.min_rounds", defaults::MIN_ROUNDS)?,
            block_us: self.block_us(&run.block_us, max_seconds)?,
            replicates: self.opt_int(&run.replicates, "run.replicates", defaults::REPLICATES)?,
            pin_vcpus: run.pin.unwrap_or(false),
            hypercall,
            phase_timeout_ms,
            phases: Vec::new(),
            redact: Vec::new(),
        })
    }
}

/// The integer range of a schema key; the schema's own tests prove every key read here has one.
pub(super) fn int_range(spec: &Key) -> (i64, i64) {
    int_range_of(spec.range)
}

pub(super) fn int_range_of(range: schema::Range) -> (i64, i64) {
    match range {
        schema::Range::Int(lo, hi) => (lo, hi),
        schema::Range::Num { .. } | schema::Range::Fraction | schema::Range::Text(_) => {
            panic!("{range:?} is no integer range: schema::KEYS and its reader disagree")
        }
    }
}
