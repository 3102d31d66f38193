//! `--set KEY=VALUE`: a config key overridden from the command line.
//!
//! An override is written into the config text itself (the value replaced where the key is,
//! or the key added to its table), so it goes through every check a value in the file goes
//! through. The edits are kept: an error whose place falls inside one names the flag instead
//! of a line of the file, and every other place maps back to the file as it is on disk.
//!
//! Keys: `name`, `description`, `run.KEY`, `bench.KEY` (every bench) and `bench.NAME.KEY` (the
//! bench named NAME). A bench key is replaced whole (`bench.irq` is the whole list).

use std::fmt;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::schema;
use super::spans::{flag_location, Edit};
use super::translate::unknown_key as unknown_key_in;
use super::values::closest;
use super::{ConfigError, Location};

/// How much of a `--set` an error quotes.
const FLAG_SHOWN: usize = 80;

/// One `--set KEY=VALUE`, as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    pub key: String,
    pub value: String,
}

impl Setting {
    /// `KEY=VALUE` (split at the first `=`); for clap's value parser.
    pub fn parse(flag: &str) -> Result<Setting, String> {
        let (key, value) = flag.split_once('=').ok_or_else(|| {
            "expected KEY=VALUE, e.g. run.max_seconds=5 or bench.vcpus=[1,2]".to_string()
        })?;
        let key = key.trim();
        if key.is_empty() {
            return Err("the key before `=` is empty".into());
        }
        Ok(Setting {
            key: key.to_string(),
            value: value.trim().to_string(),
        })
    }

    /// `--set KEY=VALUE`, escaped for one line of a terminal and cut short past
    /// [`FLAG_SHOWN`] characters: where errors point.
    fn flag(&self) -> String {
        format!(
            "--set {}",
            crate::text::escape_clipped(&self.to_string(), FLAG_SHOWN)
        )
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.key, self.value)
    }
}

/// The text with every setting written in, and the edits that did it. `text` parsed already.
pub(super) fn apply(text: &str, settings: &[Setting]) -> Result<(String, Vec<Edit>), ConfigError> {
    let mut text = text.to_string();
    let mut edits = Vec::new();
    for setting in settings {
        let flag = setting.flag();
        let at = flag_location(&flag);
        let value = toml_value(setting, &at)?;
        let (tree, errors) = DeTable::parse_recoverable(&text);
        if let Some(e) = errors.first() {
            // Only a value this module wrote can break the text: say which.
            return Err(ConfigError::Syntax {
                at,
                key: Some(setting.key.clone()),
                message: e.message().to_string(),
            });
        }
        let mut changes = changes(tree.get_ref(), setting, &value, &text, &at)?;
        // Back to front, so each change's offset still holds when it is made.
        changes.sort_by_key(|c| std::cmp::Reverse(c.start));
        for c in changes {
            let inserted = format!("{}{}{}", c.before, c.value, c.after);
            text.replace_range(c.start..c.end, &inserted);
            edits.push(Edit {
                at: c.start,
                removed: c.end - c.start,
                inserted: inserted.len(),
                value: c.before.len()..c.before.len() + c.value.len(),
                flag: flag.clone(),
            });
        }
    }
    Ok((text, edits))
}

/// VALUE as one TOML value, written out again (no comment or second key can ride along). A
/// bare word that is no TOML value is taken as a string: `run.hypercall=port`.
fn toml_value(setting: &Setting, at: &Location) -> Result<String, ConfigError> {
    let raw = setting.value.as_str();
    let parsed = raw.parse::<toml::Value>().or_else(|e| {
        // A word, not a number TOML refused (`1e400`, an integer beyond 64 bits).
        let bare = raw.starts_with(|c: char| c.is_ascii_alphabetic())
            && raw
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if bare {
            Ok(toml::Value::String(raw.to_string()))
        } else {
            Err(e)
        }
    });
    match parsed {
        Ok(v) => Ok(v.to_string()),
        Err(e) => Err(ConfigError::Invalid {
            at: at.clone(),
            key: setting.key.clone(),
            message: format!(
                "`{}` is not a TOML value ({}); a list is `[1, 2]`, a string with other \
                 characters than a-z, 0-9, `-`, `_` needs quotes (`'bench.strategies=[\"pvop-popf\"]'`)",
                crate::text::escape_line(&raw.chars().take(FLAG_SHOWN).collect::<String>()),
                e.message().trim()
            ),
        }),
    }
}

/// One change of the text: `start..end` becomes `before`, the value, `after` (only the value
/// is the flag's: a place in the key before it is the file's, at `start`).
struct Change {
    start: usize,
    end: usize,
    before: String,
    value: String,
    after: String,
}

impl Change {
    /// A new `key = value` line at `at` (`before` ends with `key = `).
    fn insert(at: usize, before: String, value: &str) -> Change {
        Change {
            start: at,
            end: at,
            before,
            value: value.to_string(),
            after: "\n".into(),
        }
    }

    /// The value `old` replaced.
    fn replace(old: &Spanned<DeValue<'_>>, value: &str) -> Change {
        Change {
            start: old.span().start,
            end: old.span().end,
            before: String::new(),
            value: value.to_string(),
            after: String::new(),
        }
    }
}

/// A table a setting writes into, and the key in it.
enum Target {
    Root,
    /// `[run]` or `[report]`.
    Table(&'static str),
    /// Bench indices (every bench, or the one named).
    Benches(Vec<usize>),
}

/// The edits of one setting: (start, end, replacement) in `text`.
fn changes(
    tree: &DeTable<'_>,
    setting: &Setting,
    value: &str,
    text: &str,
    at: &Location,
) -> Result<Vec<Change>, ConfigError> {
    let (target, key) = target(tree, &setting.key, at)?;
    let benches = tree
        .get("bench")
        .and_then(|b| b.get_ref().as_array())
        .map_or(&[][..], |a| &a[..]);
    let out = match target {
        Target::Root => vec![in_root(tree, key, value)],
        Target::Table(name) => match tree.get(name) {
            Some(t) => vec![in_table(t, key, value, text, &format!("{name}."))],
            None => vec![Change::insert(
                text.len(),
                format!("\n[{name}]\n{key} = "),
                value,
            )],
        },
        Target::Benches(indices) => indices
            .into_iter()
            .filter_map(|i| benches.get(i))
            .map(|b| in_table(b, key, value, text, ""))
            .collect(),
    };
    Ok(out)
}

/// A top-level key: replaced where it is, else written first (top-level keys precede tables).
fn in_root(tree: &DeTable<'_>, key: &str, value: &str) -> Change {
    match tree.get(key) {
        Some(v) => Change::replace(v, value),
        None => Change::insert(0, format!("{key} = "), value),
    }
}

/// A key of `table` (a `[header]` table, an inline `{ }` one, or dotted `run.x = ` keys).
fn in_table(
    table: &Spanned<DeValue<'_>>,
    key: &str,
    value: &str,
    text: &str,
    dotted_prefix: &str,
) -> Change {
    let span = table.span();
    let entries = table.get_ref().as_table();
    if let Some(v) = entries.and_then(|t| t.get(key)) {
        return Change::replace(v, value);
    }
    let empty = entries.is_none_or(|t| t.is_empty());
    match text.as_bytes().get(span.start) {
        // A header's span is the header: the key goes on the line below it.
        Some(b'[') => {
            let eol = text[span.end..]
                .find('\n')
                .map_or(text.len(), |i| span.end + i + 1);
            let newline = if eol == text.len() && !text.ends_with('\n') {
                "\n"
            } else {
                ""
            };
            Change::insert(eol, format!("{newline}{key} = "), value)
        }
        Some(b'{') => {
            let sep = if empty { " " } else { ", " };
            Change {
                start: span.start + 1,
                end: span.start + 1,
                before: format!(" {key} = "),
                value: value.to_string(),
                after: sep.to_string(),
            }
        }
        // Dotted keys at the top level (`run.pin = true`): one more, first.
        _ => Change::insert(0, format!("{dotted_prefix}{key} = "), value),
    }
}

/// Which table `key` names and the key in it, checked against the schema.
fn target<'k>(
    tree: &DeTable<'_>,
    key: &'k str,
    at: &Location,
) -> Result<(Target, &'k str), ConfigError> {
    let parts: Vec<&str> = key.split('.').collect();
    let bench_names: Vec<&str> = tree
        .get("bench")
        .and_then(|b| b.get_ref().as_array())
        .map(|a| {
            a.iter()
                .map(|b| {
                    b.get_ref()
                        .get("name")
                        .and_then(|n| n.get_ref().as_str())
                        .unwrap_or("")
                })
                .collect()
        })
        .unwrap_or_default();
    let (target, table, leaf) = match parts.as_slice() {
        ["run" | "report" | "bench"] => {
            return Err(invalid(at, key, format!(
                "`{key}` is a table: set one of its keys, e.g. `{key}.{}`",
                schema::keys_of(key)[0]
            )))
        }
        [leaf] => (Target::Root, "", *leaf),
        ["run", leaf] => (Target::Table("run"), "run", *leaf),
        ["report", leaf] => (Target::Table("report"), "report", *leaf),
        ["bench", leaf] if schema::key(&format!("bench.{leaf}")).is_some() => {
            (Target::Benches((0..bench_names.len()).collect()), "bench", *leaf)
        }
        ["bench", name, leaf] if schema::key(&format!("bench.{name}")).is_none() => {
            let Some(i) = bench_names.iter().position(|n| n == name) else {
                return Err(no_bench(at, key, name, &bench_names));
            };
            (Target::Benches(vec![i]), "bench", *leaf)
        }
        ["bench", sub, ..] if schema::key(&format!("bench.{sub}")).is_some() => {
            return Err(invalid(at, key, format!(
                "`bench.{sub}` is set whole, e.g. `bench.irq=[{{ source = \"inject\", rate_hz = 1000 }}]`"
            )))
        }
        ["bench", name] => return Err(no_bench_key(at, key, name, &bench_names)),
        [table @ ("run" | "report"), rest @ ..] => {
            let path = vec![super::spans::Seg::Key(table.to_string())];
            return Err(unknown_key_in(at.clone(), &rest.join("."), path));
        }
        _ => return Err(unknown_key_in(at.clone(), key, Vec::new())),
    };
    if let Some(instead) = schema::removed(table, leaf) {
        return Err(ConfigError::Removed {
            at: at.clone(),
            key: key.to_string(),
            instead,
        });
    }
    let is_value = schema::key(&if table.is_empty() {
        leaf.to_string()
    } else {
        format!("{table}.{leaf}")
    })
    .is_some();
    if !is_value {
        let path = if table.is_empty() {
            Vec::new()
        } else {
            vec![super::spans::Seg::Key(table.to_string())]
        };
        return Err(unknown_key_in(at.clone(), leaf, path));
    }
    Ok((target, leaf))
}

fn invalid(at: &Location, key: &str, message: String) -> ConfigError {
    ConfigError::Invalid {
        at: at.clone(),
        key: key.to_string(),
        message,
    }
}

/// `bench.NAME.KEY` with no bench NAME.
fn no_bench(at: &Location, key: &str, name: &str, names: &[&str]) -> ConfigError {
    let suggestion = closest(name, names)
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default();
    invalid(
        at,
        key,
        format!(
            "no bench is named `{}`; benches: {}{suggestion} (`bench.KEY` sets KEY in every bench)",
            crate::text::escape_line(name),
            names.join(", ")
        ),
    )
}

/// `bench.X` where X is neither a bench key nor followed by one.
fn no_bench_key(at: &Location, key: &str, word: &str, names: &[&str]) -> ConfigError {
    if names.contains(&word) {
        return invalid(
            at,
            key,
            format!("set one key of bench `{word}`, e.g. `bench.{word}.vcpus`"),
        );
    }
    unknown_key_in(
        at.clone(),
        word,
        vec![super::spans::Seg::Key("bench".into())],
    )
}

#[cfg(test)]
mod tests;
