//! toml's and serde's errors, translated into ours: a location, the key path, and the schema's
//! words for what is valid; and removed keys, with what replaced them.
//!
//! serde's messages are parsed by their prefixes ("unknown field `", "missing field `",
//! "invalid type: "), which serde has kept stable for years; a message we do not recognise is
//! passed through unchanged, still with location and key, so a change in wording degrades the
//! message rather than losing it.

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::schema;
use super::spans::{find_path, normalize, render_path, table_at, table_prefix, Seg, Source};
use super::values::closest;
use super::ConfigError;

/// A TOML syntax error.
pub(super) fn syntax_error(
    src: Source<'_>,
    err: &toml::de::Error,
    tree: &DeTable<'_>,
) -> ConfigError {
    let span = err.span().unwrap_or(0..0);
    let key = find_path(tree, span.start).filter(|p| !p.is_empty());
    let mut message = err.message().to_string();
    if message == "duplicate key" {
        // toml names no key here: add the one the span points at.
        let name = src.text.get(span.clone()).unwrap_or_default();
        message = format!("duplicate key `{name}`; a key may appear once per table");
    }
    ConfigError::Syntax {
        at: src.location(span.start),
        key: key.map(|p| render_path(&p)),
        message,
    }
}

/// An error of deserializing into `raw`'s structs.
pub(super) fn serde_error(
    src: Source<'_>,
    err: &toml::de::Error,
    tree: &DeTable<'_>,
) -> ConfigError {
    let span = err.span().unwrap_or(0..0);
    let at = src.location(span.start);
    let path = find_path(tree, span.start).unwrap_or_default();
    let message = err.message();
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let key = rest.split('`').next().unwrap_or_default();
        return unknown_key(at, key, path);
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let field = rest.split('`').next().unwrap_or_default();
        let key = missing_key_path(tree, &path, field);
        let expected = schema::expected(&normalize(&key)).unwrap_or_default();
        return ConfigError::Invalid {
            at,
            key: render_path(&key),
            message: format!("missing; expected {expected}"),
        };
    }
    let key = render_path(&path);
    if let Some(big) = unsigned_beyond_i64(message) {
        // toml read an integer above i64::MAX as u64, which our i64 fields cannot take.
        let expected = schema::expected(&normalize(&path)).unwrap_or_else(|| "an i64".into());
        let message = format!("{big} is beyond the largest 64-bit integer; expected {expected}");
        return ConfigError::Invalid { at, key, message };
    }
    let Some(rest) = message.strip_prefix("invalid type: ") else {
        return ConfigError::Invalid {
            at,
            key,
            message: message.to_string(),
        };
    };
    let (found, serde_expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
    let expected =
        schema::expected(&normalize(&path)).unwrap_or_else(|| serde_expected.to_string());
    let message = match found.strip_suffix(" as i128") {
        // TOML integers are 64-bit; toml parsed a bigger one as i128.
        Some(big) => format!("{big} does not fit in 64 bits; expected {expected}"),
        None => format!("wrong type: found {found}; expected {expected}"),
    };
    ConfigError::Invalid { at, key, message }
}

/// The integer of serde's "invalid value: integer `N`, expected i64" (toml's u64 reading of
/// an integer between i64::MAX and u64::MAX).
fn unsigned_beyond_i64(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("invalid value: integer `")?;
    let (big, tail) = rest.split_once('`')?;
    (tail == ", expected i64").then_some(big)
}

/// An unknown key at `path` (which ends at the key, or at its table), with the valid keys and
/// the closest of them.
pub(super) fn unknown_key(at: super::Location, key: &str, mut path: Vec<Seg>) -> ConfigError {
    if path.last() == Some(&Seg::Key(key.to_string())) {
        path.pop();
    }
    let valid = schema::keys_of(&normalize(&path));
    let suggestion = closest(key, &valid);
    let table = match render_path(&path).as_str() {
        "" => "the top level".to_string(),
        "run" => "[run]".to_string(),
        other => format!("`{other}`"),
    };
    ConfigError::UnknownKey {
        at,
        key: key.to_string(),
        table,
        valid,
        suggestion,
    }
}

/// A removed key's place, path and what replaced it.
type Found = Option<(usize, Vec<Seg>, String)>;

/// The first removed key in text order, with what replaced it. Checked before serde runs,
/// because serde reports unknown fields in its own order (tables sorted by key), and an old
/// config should be fixed top to bottom.
pub(super) fn first_removed_key(src: Source<'_>, tree: &DeTable<'_>) -> Option<ConfigError> {
    let mut found = None;
    removed_in_table(tree, &mut Vec::new(), &mut found);
    found.map(|(offset, path, instead)| ConfigError::Removed {
        at: src.location(offset),
        key: render_path(&path),
        instead,
    })
}

fn removed_in_table(table: &DeTable<'_>, path: &mut Vec<Seg>, found: &mut Found) {
    let table_norm = normalize(path);
    for (key, value) in table.iter() {
        let start = key.span().start;
        path.push(Seg::Key(key.get_ref().to_string()));
        if let Some(instead) = schema::removed(&table_norm, key.get_ref()) {
            if found.as_ref().is_none_or(|(first, ..)| start < *first) {
                *found = Some((start, path.clone(), instead));
            }
        }
        removed_in_value(value, path, found);
        path.pop();
    }
}

fn removed_in_value(value: &Spanned<DeValue<'_>>, path: &mut Vec<Seg>, found: &mut Found) {
    if let Some(table) = value.get_ref().as_table() {
        removed_in_table(table, path, found);
    }
    if let Some(array) = value.get_ref().as_array() {
        for (i, element) in array.iter().enumerate() {
            path.push(Seg::Index(i));
            removed_in_value(element, path, found);
            path.pop();
        }
    }
}

/// The path of a missing `field`. toml's span may cover more than the table that lacks it
/// (it points at the whole document for a top-level key): take the deepest table without it.
fn missing_key_path(tree: &DeTable<'_>, path: &[Seg], field: &str) -> Vec<Seg> {
    let mut key = table_prefix(tree, path);
    while !key.is_empty() && table_at(tree, &key).is_some_and(|t| t.contains_key(field)) {
        key.pop();
        while matches!(key.last(), Some(Seg::Index(_))) {
            key.pop();
        }
        key = table_prefix(tree, &key);
    }
    key.push(Seg::Key(field.to_string()));
    key
}
