//! The config loader: a TOML file → a validated [`Plan`].
//!
//! A config answers one question ("what does one save/disable/restore cost per strategy?"); it
//! says so in a comment header. Every value is range-checked here, so nothing downstream sees
//! unchecked input. An error names the file, the line and column, the key and what would be
//! valid, e.g.
//!
//! ```text
//! configs/x.toml:7:13: key `bench[0].nesting[1]`: 1.5 is outside 0.0..=1.0 (...)
//! ```
//!
//! The keys, their ranges, defaults and meanings are one table, `schema::KEYS`; the key
//! reference in `configs/README.md` is generated from it ([`key_reference`]; a test keeps the
//! two equal, `IRQBENCH_BLESS=1` rewrites the README).
//!
//! The way through, one file each: `spans` turns byte offsets into `file:line:col` and key
//! paths, `translate` turns toml's and serde's errors into ours (removed keys included), `raw`
//! is the file as serde reads it, `validate` checks single values and `[run]`, `expand` turns
//! each `[[bench]]` into rows and groups.

mod expand;
mod overrides;
pub mod plan;
mod raw;
mod schema;
pub mod select;
mod spans;
mod translate;
mod values;

#[cfg(test)]
mod tests;

use std::fmt;

use irqbench_abi as abi;
use toml::de::DeTable;

use crate::config::plan::Plan;
use crate::files::read::BoundedReadError;
use crate::text::{escape_message as escape_line, outside};

pub use overrides::Setting;
pub use select::{matches as glob_matches, only, round_fits, RoundTooLong, SelectError};

/// The name of the built-in config ([`DEFAULT_CONFIG_TOML`]).
#[cfg(test)]
pub const DEFAULT_CONFIG_NAME: &str = "quick";
/// The configs shipped in configs/, compiled in once: runnable by name (`irqbench run
/// strategies`), the first of them when no config is given.
pub const SHIPPED_CONFIGS: [(&str, &str); 8] = [
    ("quick", include_str!("../../../configs/quick.toml")),
    (
        "strategies",
        include_str!("../../../configs/strategies.toml"),
    ),
    ("insn-cost", include_str!("../../../configs/insn-cost.toml")),
    (
        "pv-restore-skip",
        include_str!("../../../configs/pv-restore-skip.toml"),
    ),
    (
        "epoll-irqsave-vs-irq",
        include_str!("../../../configs/epoll-irqsave-vs-irq.toml"),
    ),
    ("soak", include_str!("../../../configs/soak.toml")),
    (
        "answers-load",
        include_str!("../../../configs/answers-load.toml"),
    ),
    ("irq-paths", include_str!("../../../configs/irq-paths.toml")),
];
/// `configs/quick.toml`: what runs when no config is given.
pub const DEFAULT_CONFIG_TOML: &str = SHIPPED_CONFIGS[0].1;
const _: () = assert!(matches!(SHIPPED_CONFIGS[0].0.as_bytes(), b"quick"));
/// [`Plan::source`] of [`default_plan`].
pub const DEFAULT_SOURCE: &str = "<built-in default>";

/// The smallest `run.memory_mib`.
pub const MIN_MEMORY_MIB: u32 = 16;
/// The largest `run.memory_mib`.
pub const MAX_MEMORY_MIB: u32 = 1024;
/// A plan with more phases than this is refused (it would run for days).
pub const MAX_PHASES: usize = 10_000;

const _: () = assert!(MIN_MEMORY_MIB as u64 * 1024 * 1024 >= abi::MIN_MEM_BYTES);

/// What the host allows; the caller asks KVM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// KVM_CAP_MAX_VCPUS of this host.
    pub max_vcpus: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_vcpus: abi::MAX_VCPUS,
        }
    }
}

/// Where in a config something is: `configs/x.toml:7:13` (1-based line and column, in
/// characters), or the `--set KEY=VALUE` flag that gave the value (line 0: no line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub file: String,
    pub line: u32,
    pub column: u32,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            return write!(f, "{}", outside(&self.file));
        }
        write!(f, "{}:{}:{}", outside(&self.file), self.line, self.column)
    }
}

/// Why a config was refused. Every variant but [`ConfigError::Read`] points into the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read, or is no regular file of bounded size (the source names it).
    #[error(transparent)]
    Read(#[from] BoundedReadError),
    /// Not TOML at all (toml's parser message, translated to our location format).
    #[error("{at}: invalid TOML{}: {}", key_suffix(key), escape_line(message))]
    Syntax {
        at: Location,
        key: Option<String>,
        message: String,
    },
    /// A key the schema does not have (`table` is `[run]`, `` `bench[0]` ``, or `the top level`).
    #[error(
        "{at}: unknown key `{}` in {}; valid keys: {}{}",
        escape_line(key),
        escape_line(table),
        valid.join(", "),
        did_you_mean(suggestion)
    )]
    UnknownKey {
        at: Location,
        key: String,
        table: String,
        valid: Vec<&'static str>,
        suggestion: Option<&'static str>,
    },
    /// A key irqbench used to have; `instead` says what replaced it.
    #[error("{at}: `{}` was removed: {instead}", escape_line(key))]
    Removed {
        at: Location,
        key: String,
        instead: String,
    },
    /// A key with a wrong type or value, or missing; `key` is the path (`bench[0].nesting[1]`).
    #[error("{at}: key `{}`: {}", escape_line(key), escape_line(message))]
    Invalid {
        at: Location,
        key: String,
        message: String,
    },
}

impl ConfigError {
    /// Where in the file, if the error points into one.
    #[cfg(test)]
    pub fn location(&self) -> Option<&Location> {
        match self {
            ConfigError::Read(_) => None,
            ConfigError::Syntax { at, .. }
            | ConfigError::UnknownKey { at, .. }
            | ConfigError::Removed { at, .. }
            | ConfigError::Invalid { at, .. } => Some(at),
        }
    }
}

fn key_suffix(key: &Option<String>) -> String {
    key.as_ref()
        .map(|k| format!(" at key `{}`", escape_line(k)))
        .unwrap_or_default()
}

fn did_you_mean(suggestion: &Option<&str>) -> String {
    suggestion
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default()
}

/// Reads and validates the config at `path`; [`Plan::source`] is `path` as given. The read is
/// bounded: `/dev/zero`, a FIFO or a huge file is refused before anything waits or fills memory.
#[cfg(test)]
pub fn load_file(path: &std::path::Path, limits: &Limits) -> Result<Plan, ConfigError> {
    use crate::files::read;
    let text = read::read_text_bounded(path, read::MAX_CONFIG_BYTES, "config")?;
    load_str(&text, &path.display().to_string(), limits)
}

/// Validates a config held in memory; `source` names it in errors and in [`Plan::source`].
pub fn load_str(text: &str, source: &str, limits: &Limits) -> Result<Plan, ConfigError> {
    load_with(text, source, limits, plan::MAX_GROUP_VARIANTS, &[])
}

/// [`load_str`] with `--set` overrides written in, in order (a later one of a key wins). An
/// error in a value a setting gave names the flag (`--set run.max_seconds=0: key ...`).
pub fn load_str_with(
    text: &str,
    source: &str,
    limits: &Limits,
    settings: &[Setting],
) -> Result<Plan, ConfigError> {
    load_with(text, source, limits, plan::MAX_GROUP_VARIANTS, settings)
}

/// [`load_str`] with the group-size limit as a parameter, so tests can reach it with the
/// names the ABI has today.
fn load_with(
    text: &str,
    source: &str,
    limits: &Limits,
    max_group: usize,
    settings: &[Setting],
) -> Result<Plan, ConfigError> {
    let file = spans::Source::new(source, text);
    // The spanned document first: syntax errors, and key paths for serde's errors below.
    let (tree, syntax_errors) = DeTable::parse_recoverable(text);
    if let Some(err) = syntax_errors.first() {
        return Err(translate::syntax_error(file, err, tree.get_ref()));
    }
    if settings.is_empty() {
        return check(file, limits, max_group);
    }
    let (edited, edits) = overrides::apply(text, settings)?;
    let src = spans::Source {
        text: &edited,
        edits: &edits,
        ..file
    };
    check(src, limits, max_group)
}

/// Every check past the syntax of the file, on `src.text`.
fn check(src: spans::Source<'_>, limits: &Limits, max_group: usize) -> Result<Plan, ConfigError> {
    let text = src.text;
    let (tree, syntax_errors) = DeTable::parse_recoverable(text);
    if let Some(err) = syntax_errors.first() {
        return Err(translate::syntax_error(src, err, tree.get_ref()));
    }
    if let Some(err) = translate::first_removed_key(src, tree.get_ref()) {
        return Err(err);
    }
    let raw: raw::RawConfig =
        toml::from_str(text).map_err(|e| translate::serde_error(src, &e, tree.get_ref()))?;
    let ctx = values::Ctx {
        src,
        limits: *limits,
        max_group,
    };
    ctx.plan(raw)
}

/// The key reference of `configs/README.md` in Markdown: every key with what it accepts, its
/// default and meaning, and the removed keys with what replaced them.
pub fn key_reference() -> String {
    schema::markdown()
}

/// The plan of [`DEFAULT_CONFIG_TOML`] (a test proves it loads).
pub fn default_plan(limits: &Limits) -> Plan {
    let limits = Limits {
        max_vcpus: limits.max_vcpus.max(1),
    };
    load_str(DEFAULT_CONFIG_TOML, DEFAULT_SOURCE, &limits)
        .unwrap_or_else(|e| panic!("the built-in config is invalid: {e}"))
}
