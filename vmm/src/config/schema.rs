//! The one table of config keys. Range checks, "expected ..." in type errors, "valid keys" and
//! "did you mean" for unknown keys, the messages for removed keys and the key reference in
//! `configs/README.md` all come from here, so a key changes in one place.

use irqbench_abi as abi;

use crate::config::plan::defaults;
use crate::results::redact::Redaction;

/// What values a key accepts, in a form both the checks and the docs read.
#[derive(Clone, Copy, Debug)]
pub(super) enum Range {
    /// An integer in `lo..=hi`.
    Int(i64, i64),
    /// A number in `lo..=hi`, or `lo < x <= hi` when `lo_open`.
    Num { lo: f64, hi: f64, lo_open: bool },
    /// A number in `0.0..=1.0`.
    Fraction,
    /// Anything else, described in words (names, choices, tables).
    Text(&'static str),
}

impl Range {
    pub(super) fn render(self) -> String {
        match self {
            Range::Int(lo, hi) => format!("{}..={}", fmt_int(lo), fmt_int(hi)),
            Range::Num { lo, hi, lo_open } => {
                let open = if lo_open { ">" } else { "" };
                format!("{open}{}..={}", fmt_num(lo), fmt_num(hi))
            }
            Range::Fraction => "0.0..=1.0".into(),
            Range::Text(t) => substitute(t),
        }
    }

    pub(super) fn contains(self, x: f64) -> bool {
        match self {
            // i64 → f64 loses precision only beyond 2^53, far beyond every integer range here.
            Range::Int(lo, hi) => (lo as f64..=hi as f64).contains(&x),
            Range::Num { lo, hi, lo_open } => x <= hi && (x > lo || (!lo_open && x == lo)),
            Range::Fraction => (0.0..=1.0).contains(&x),
            Range::Text(_) => true,
        }
    }
}

/// What a key is when absent.
#[derive(Clone, Copy, Debug)]
pub(super) enum KeyDefault {
    Required,
    /// A value written as TOML.
    Toml(&'static str),
    Int(i64),
    Num(f64),
    /// Absent has a meaning of its own, in words.
    Absent(&'static str),
}

impl KeyDefault {
    pub(super) fn render(self) -> String {
        match self {
            KeyDefault::Required => "required".into(),
            KeyDefault::Toml(t) => format!("`{t}`"),
            KeyDefault::Int(i) => format!("`{}`", fmt_int(i)),
            KeyDefault::Num(x) => format!("`{}`", fmt_num(x)),
            KeyDefault::Absent(t) => substitute(t),
        }
    }
}

#[derive(Debug)]
pub(super) struct Key {
    /// The containing table with indices dropped: "", "run", "bench", "bench.irq".
    pub table: &'static str,
    pub key: &'static str,
    /// The TOML type, as it reads before the range: "an integer", "a non-empty list of ...".
    pub ty: &'static str,
    pub range: Range,
    pub default: KeyDefault,
    /// What the key means; range errors quote it.
    pub meaning: &'static str,
}

impl Key {
    /// "an integer 16..=1024: guest RAM in MiB ..." — what type errors say is expected.
    pub(super) fn expected(&self) -> String {
        let range = self.range.render();
        let sep = if self.ty.is_empty() || range.is_empty() {
            ""
        } else {
            " "
        };
        format!("{}{sep}{range}: {}", self.ty, self.meaning())
    }

    /// What the key means, placeholders filled (see [`substitute`]).
    pub(super) fn meaning(&self) -> String {
        substitute(self.meaning)
    }
}

const NAME_CHARS: &str = "1..=64 characters from a-z, 0-9, `_`, `-`";
const VCPU_RANGE: Range = Range::Int(1, abi::MAX_VCPUS as i64);
/// Where `bench.irq` rates stop.
const MAX_RATE: f64 = 1_000_000.0;
/// One strategy's weight in a `mixed` bench (`bench.weights` is a table, so it has no row).
pub(super) const WEIGHT: Range = Range::Int(1, u16::MAX as i64);

#[rustfmt::skip]
pub(super) const KEYS: &[Key] = &[
    Key { table: "", key: "name", ty: "a string of", range: Range::Text(NAME_CHARS), default: KeyDefault::Required,
          meaning: "the plan's name" },
    Key { table: "", key: "description", ty: "a string", range: Range::Text(""), default: KeyDefault::Toml("\"\""),
          meaning: "free text shown in reports" },
    Key { table: "", key: "run", ty: "a [run] table", range: Range::Text(""), default: KeyDefault::Absent("every key at its default"),
          meaning: "settings of the whole run" },
    Key { table: "", key: "report", ty: "a [report] table", range: Range::Text(""), default: KeyDefault::Absent("every key at its default"),
          meaning: "what the outputs of the run leave out" },
    Key { table: "", key: "bench", ty: "one or more [[bench]] tables", range: Range::Text(""), default: KeyDefault::Required,
          meaning: "each expands to the cross product of its lists" },

    Key { table: "run", key: "memory_mib", ty: "an integer", range: Range::Int(super::MIN_MEMORY_MIB as i64, super::MAX_MEMORY_MIB as i64),
          default: KeyDefault::Int(defaults::MEMORY_MIB as i64),
          meaning: "guest RAM in MiB; the guest layout needs at least 16" },
    Key { table: "run", key: "precision", ty: "a number", range: Range::Num { lo: 0.0, hi: 0.5, lo_open: true },
          default: KeyDefault::Num(defaults::PRECISION),
          meaning: "the target half-width of each row's 95% confidence interval, relative to its value (for a net below 2% of the baseline loop's cycles, relative to that 2%), and of each of the group's comparisons' ratio CI relative to the ratio; rounds stop once every row and comparison of a group reaches it" },
    Key { table: "run", key: "max_seconds", ty: "a number", range: Range::Num { lo: 0.1, hi: 3600.0, lo_open: false },
          default: KeyDefault::Num(defaults::MAX_SECONDS),
          meaning: "the time budget of one group (warm-up, calibration and rounds), in seconds; rounds stop when it runs out, precision reached or not, within about one round" },
    Key { table: "run", key: "min_rounds", ty: "an integer", range: Range::Int(3, 100_000),
          default: KeyDefault::Int(defaults::MIN_ROUNDS as i64),
          meaning: "rounds every group runs at least, past max_seconds if need be; only a cap of 10 × max_seconds ends a group short of them, and its rows are then marked min_rounds_missed with a warning" },
    Key { table: "run", key: "block_us", ty: "an integer", range: Range::Int(20, 100_000),
          default: KeyDefault::Int(defaults::BLOCK_US as i64),
          meaning: "the target length of one block (one row's operations within a round), in microseconds" },
    Key { table: "run", key: "replicates", ty: "an integer", range: Range::Int(1, defaults::MAX_REPLICATES as i64),
          default: KeyDefault::Int(defaults::REPLICATES as i64),
          meaning: "fresh VMs each group is measured on, their rounds interleaved in slices (A B C A B C ...) within the group's max_seconds; above 1, every figure's CI is a t interval over the replicates' estimates, so it holds the host's moves between VMs as well as within one" },
    Key { table: "run", key: "pin", ty: "true or false", range: Range::Text(""), default: KeyDefault::Toml("false"),
          meaning: "pin vCPU i's thread to the i-th CPU the process may run on (its affinity mask, so taskset is respected); the report says pinned only if every pin held" },
    Key { table: "run", key: "hypercall", ty: "", range: Range::Text("\"port\", \"vmcall\" or \"vapic-poll\""), default: KeyDefault::Toml("\"port\""),
          meaning: "how the vif-* strategies call the host: port I/O to irqbench (works everywhere), KVM_HC_MAP_GPA_RANGE forwarded to irqbench, or KVM_HC_VAPIC_POLL_IRQ handled inside KVM; the last two execute vmcall on Intel and vmmcall on AMD and are refused on PVM, where they livelock" },
    Key { table: "run", key: "phase_timeout_ms", ty: "an integer", range: Range::Int(100, 3_600_000),
          default: KeyDefault::Absent("derived by the runner"),
          meaning: "milliseconds before the watchdog stops a dispatch" },
    Key { table: "run", key: "vcpus", ty: "an integer", range: VCPU_RANGE, default: KeyDefault::Int(defaults::VCPUS as i64),
          meaning: "vCPUs; the default of bench.vcpus, at most the host's KVM limit" },

    Key { table: "report", key: "redact", ty: "a list of", range: Range::Text("{redactions}"), default: KeyDefault::Toml("[]"),
          meaning: "host facts kept out of every output and the history, as `--redact` does (the two add up): `cmdline` the kernel command line, `hostname` the host's name wherever it appears; the report says what was redacted" },

    Key { table: "bench", key: "name", ty: "a string of", range: Range::Text(NAME_CHARS), default: KeyDefault::Required,
          meaning: "unique among benches" },
    Key { table: "bench", key: "kind", ty: "", range: Range::Text("\"strategy\", \"insn\", \"lock\" or \"mixed\""),
          default: KeyDefault::Toml("\"strategy\""),
          meaning: "one row per strategy, per instruction, per strategy in the epoll ready-list pattern, or one row of strategies interleaved by weight" },
    Key { table: "bench", key: "strategies", ty: "a non-empty list of strategy names:", range: Range::Text("{strategies}"),
          default: KeyDefault::Absent("every strategy but `empty`"),
          meaning: "kinds strategy and lock" },
    Key { table: "bench", key: "insns", ty: "a non-empty list of instruction names:", range: Range::Text("{insns}"),
          default: KeyDefault::Absent("every instruction but `empty`"),
          meaning: "kind insn" },
    Key { table: "bench", key: "weights", ty: "an inline table", range: Range::Text("{ strategy-name = weight 1..=65_535 }"),
          default: KeyDefault::Absent("weight 1 for every strategy but `empty`"),
          meaning: "kind mixed" },
    Key { table: "bench", key: "nesting", ty: "a non-empty list of numbers, each", range: Range::Fraction,
          default: KeyDefault::Toml("[0.0]"),
          meaning: "the fraction of operations entered with interrupts already off" },
    Key { table: "bench", key: "body_ops", ty: "an integer", range: Range::Int(0, 4096), default: KeyDefault::Int(defaults::BODY_OPS as i64),
          meaning: "critical-section work per operation" },
    Key { table: "bench", key: "vcpus", ty: "a non-empty list of integers, each", range: VCPU_RANGE,
          default: KeyDefault::Absent("[run.vcpus]"),
          meaning: "vCPUs; at most the host's KVM limit" },
    Key { table: "bench", key: "block_ops", ty: "an integer", range: Range::Int(1, 1_000_000_000),
          default: KeyDefault::Absent("calibrated to run.block_us"),
          meaning: "a fixed count of operations per block, per vCPU, rounded up to a multiple of 4 (the flat loop runs four a turn; results' `block_ops` is the count run)" },
    Key { table: "bench", key: "seed", ty: "an integer", range: Range::Int(0, i64::MAX), default: KeyDefault::Int(defaults::SEED as i64),
          meaning: "the rows' seed" },
    Key { table: "bench", key: "compare", ty: "a list of strategy pairs like", range: Range::Text("[[\"pvop-popf\", \"pvop-skip\"]]"),
          default: KeyDefault::Absent("every row against the first, plus the field's pairs present (native-skip, pvop-skip, vif-skip against their popf/restore, native-cli-sti against native-popf)"),
          meaning: "the comparisons to make in each group: `[a, b]` reports b against a; both must be strategies of the bench" },
    Key { table: "bench", key: "reference", ty: "a strategy name", range: Range::Text(""),
          default: KeyDefault::Absent("see `compare`"),
          meaning: "compare every other row with this one (instead of `compare`)" },
    Key { table: "bench", key: "irq", ty: "a non-empty list of inline tables like", range: Range::Text("{ source = \"inject\", rate_hz = 1000 }"),
          default: KeyDefault::Toml("[{ source = \"none\" }]"),
          meaning: "interrupt loads" },

    Key { table: "bench.irq", key: "source", ty: "", range: Range::Text("{irq_sources}"),
          default: KeyDefault::Required,
          meaning: "{irq_source_meanings}" },
    Key { table: "bench.irq", key: "period_us", ty: "a number", range: Range::Num { lo: 1.0, hi: MAX_RATE, lo_open: false },
          default: KeyDefault::Absent("required by {sources_taking:period_us}"),
          meaning: "microseconds between LAPIC timer interrupts" },
    Key { table: "bench.irq", key: "rate_hz", ty: "a number", range: Range::Num { lo: 0.0, hi: MAX_RATE, lo_open: true },
          default: KeyDefault::Absent("required by {sources_taking:rate_hz}"),
          meaning: "events per second; use source = \"none\" for no interrupts" },
];

/// A key that configs used to have, and what to do instead.
#[derive(Debug)]
pub(super) struct Removed {
    pub table: &'static str,
    pub key: &'static str,
    /// After "`run.repeats` was removed: "; `{precision}` etc. become the current defaults.
    pub instead: &'static str,
}

const ROUNDS: &str = "irqbench now runs every strategy of a group interleaved in rounds until \
                      each row's 95% CI is within `run.precision` (default {precision}) or \
                      `run.max_seconds` (default {max_seconds}) runs out";

#[rustfmt::skip]
pub(super) const REMOVED: &[Removed] = &[
    Removed { table: "run", key: "repeats",
              instead: "{rounds}; delete `repeats` (and set `precision`/`max_seconds` if you need to)" },
    Removed { table: "run", key: "warmup",
              instead: "{rounds}, so warm-up and drift hit every row alike instead of being run off beforehand; delete `warmup` (and set `min_rounds`, default {min_rounds}, for more rounds)" },
    Removed { table: "run", key: "target_ms",
              instead: "{rounds}, each round made of blocks of about `run.block_us` (default {block_us}) µs; delete `target_ms` (and set `block_us`/`max_seconds` if you need to)" },
    Removed { table: "run", key: "min_iterations",
              instead: "block sizes are calibrated so one block lasts about `run.block_us` (default {block_us}) µs; delete `min_iterations` (set `block_us`, or a bench's `block_ops` for a fixed count)" },
    Removed { table: "run", key: "max_iterations",
              instead: "block sizes are calibrated so one block lasts about `run.block_us` (default {block_us}) µs; delete `max_iterations` (set `block_us`, or a bench's `block_ops` for a fixed count)" },
    Removed { table: "run", key: "noisy_cv",
              instead: "every result now carries a 95% confidence interval instead of a noisy flag, and {rounds}; delete `noisy_cv` (set `precision` instead)" },
    Removed { table: "bench", key: "iterations",
              instead: "a fixed count is now `block_ops`, operations per block of which a group runs many (one per round); rename `iterations` to `block_ops` with about `run.block_us` (default {block_us}) µs' worth, or delete it to calibrate" },
];

/// The keys of `table` (indices dropped), in table order.
pub(super) fn keys_of(table: &str) -> Vec<&'static str> {
    KEYS.iter()
        .filter(|k| k.table == table)
        .map(|k| k.key)
        .collect()
}

/// The key at `path` (indices dropped: `bench.irq.rate_hz`).
pub(super) fn key(path: &str) -> Option<&'static Key> {
    let (table, key) = path.rsplit_once('.').unwrap_or(("", path));
    KEYS.iter().find(|k| k.table == table && k.key == key)
}

/// The schema entry of a key the validator checks; absent only if the table lost a row.
pub(super) fn spec(path: &str) -> &'static Key {
    key(path).unwrap_or_else(|| panic!("config key `{path}` is missing from schema::KEYS"))
}

/// What `path` (indices dropped) accepts, for "expected ..." in messages.
pub(super) fn expected(path: &str) -> Option<String> {
    if path.starts_with("bench.weights.") {
        return Some(format!("an integer weight {}", WEIGHT.render()));
    }
    key(path).map(Key::expected)
}

/// What replaced a removed key, if `table.key` is one.
pub(super) fn removed(table: &str, key: &str) -> Option<String> {
    REMOVED
        .iter()
        .find(|r| r.table == table && r.key == key)
        .map(|r| substitute(r.instead))
}

/// Fills the placeholders the table's texts use with the current names and defaults: a list of
/// names comes from its identity table, so the texts do not go stale when one is added.
fn substitute(text: &str) -> String {
    let mut text = text
        .replace("{rounds}", ROUNDS)
        .replace("{strategies}", &abi::strategy::NAMES.join(", "))
        .replace("{redactions}", &redactions())
        .replace("{insns}", &abi::insn::NAMES.join(", "))
        .replace("{irq_sources}", &irq_sources())
        .replace("{irq_source_meanings}", &irq_source_meanings());
    for param in abi::irq::SOURCES.iter().filter_map(|s| s.param) {
        let takers = abi::irq::SOURCES
            .iter()
            .filter(|s| s.param == Some(param))
            .map(|s| s.name);
        let placeholder = format!("{{sources_taking:{}}}", param.key);
        text = text.replace(&placeholder, &joined(takers, "", "and"));
    }
    text.replace("{precision}", &fmt_num(defaults::PRECISION))
        .replace("{max_seconds}", &fmt_num(defaults::MAX_SECONDS))
        .replace("{min_rounds}", &defaults::MIN_ROUNDS.to_string())
        .replace("{block_us}", &defaults::BLOCK_US.to_string())
}

/// `"cmdline" and "hostname"`: what `report.redact` may name.
fn redactions() -> String {
    joined(Redaction::ALL.iter().map(|r| r.name()), "\"", "and")
}

/// `"none", "lapic-timer", "inject" or "pv-event"`.
fn irq_sources() -> String {
    joined(abi::irq::NAMES.iter().copied(), "\"", "or")
}

/// `none: no interrupt load. lapic-timer: …`, from the sources' descriptions.
fn irq_source_meanings() -> String {
    abi::irq::SOURCES
        .iter()
        .map(|s| format!("{}: {}", s.name, s.describe))
        .collect::<Vec<_>>()
        .join(". ")
}

/// `a, b and c` (`quote` around each item; `and` or `or` before the last).
fn joined<'a>(items: impl Iterator<Item = &'a str>, quote: &str, last: &str) -> String {
    let items: Vec<String> = items.map(|i| format!("{quote}{i}{quote}")).collect();
    match items.split_last() {
        Some((tail, head)) if !head.is_empty() => format!("{} {last} {tail}", head.join(", ")),
        _ => items.concat(),
    }
}

/// `8.0` → `8`, `1e6` → `1_000_000`, `0.02` → `0.02`; beyond those, four significant digits
/// in exponent form (`1e300`, `1.25e-7`) rather than 300 digits.
pub(super) fn fmt_num(x: f64) -> String {
    let tiny = x != 0.0 && x.abs() < 1e-4;
    if x.is_finite() && (tiny || x.abs() >= 1e15) {
        let s = format!("{x:.3e}");
        let (mantissa, exponent) = s.split_once('e').unwrap_or((&s, "0"));
        let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
        format!("{mantissa}e{exponent}")
    } else if x.fract() == 0.0 && x.abs() < 1e15 {
        fmt_int(x as i64)
    } else {
        x.to_string()
    }
}

/// The key reference of `configs/README.md`, between its `keys` markers.
pub(super) fn markdown() -> String {
    let mut out = String::new();
    for (table, title) in [
        ("", "Top level"),
        ("run", "`[run]` (optional; every key optional)"),
        ("report", "`[report]` (optional)"),
        ("bench", "`[[bench]]` (one or more)"),
        ("bench.irq", "`bench.irq` elements"),
    ] {
        out.push_str(&format!(
            "\n{title}:\n\n| key | accepts | default | meaning |\n|---|---|---|---|\n"
        ));
        for k in KEYS.iter().filter(|k| k.table == table) {
            let sep = if k.ty.is_empty() { "" } else { " " };
            let accepts = format!("{}{sep}{}", k.ty, k.range.render());
            out.push_str(&format!(
                "| `{}` | {} | {} | {} |\n",
                k.key,
                accepts.trim().replace('|', "\\|"),
                k.default.render(),
                k.meaning()
            ));
        }
    }
    out.push_str(
        "\nRemoved keys (a config that still has one is refused with what to do instead):\n\n",
    );
    for r in REMOVED {
        out.push_str(&format!(
            "- `{}.{}`: {}\n",
            r.table,
            r.key,
            substitute(r.instead)
        ));
    }
    out
}

/// `1000000000` → `1_000_000_000` (as a TOML integer may be written).
pub(super) fn fmt_int(v: i64) -> String {
    let digits = v.unsigned_abs().to_string();
    if digits.len() <= 4 {
        return v.to_string();
    }
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('_');
        }
        out.push(c);
    }
    if v < 0 {
        out.insert(0, '-');
    }
    out
}
