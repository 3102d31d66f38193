//! From byte offsets in the TOML text to what a person reads: `file:line:col` and key paths like
//! `bench[0].irq[1].rate_hz`.
//!
//! Key paths come from walking toml's spanned document, not from `serde_path_to_error`: that
//! crate is not in the lockfile, and it would give the path but not the line and column, which
//! still need the spans; the spans alone give both, inside inline tables and dotted keys too.

use std::ops::Range;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::Location;

/// One `--set` change to the text: `removed` bytes at `at` became `inserted` bytes written
/// for `flag`.
#[derive(Clone, Debug)]
pub(super) struct Edit {
    pub at: usize,
    pub removed: usize,
    pub inserted: usize,
    /// The value's bytes within the inserted ones: the flag's part.
    pub value: Range<usize>,
    pub flag: String,
}

/// Where byte `offset` of the edited text came from: the flag that wrote it, or the offset in
/// the text before the edits.
pub(super) enum Origin<'e> {
    Flag(&'e str),
    File(usize),
}

/// Maps `offset` of the text after `edits` back (latest edit first).
pub(super) fn origin(edits: &[Edit], mut offset: usize) -> Origin<'_> {
    for e in edits.iter().rev() {
        let value = e.at + e.value.start..e.at + e.value.end;
        if value.contains(&offset) {
            return Origin::Flag(&e.flag);
        }
        if offset >= e.at + e.inserted {
            offset = offset - e.inserted + e.removed;
        } else if offset >= e.at {
            // The `key = ` written before the value: where it went in the text before.
            offset = e.at;
        }
    }
    Origin::File(offset)
}

/// The place a flag's error points at: the flag itself.
pub(super) fn flag_location(flag: &str) -> Location {
    Location {
        file: flag.to_string(),
        line: 0,
        column: 0,
    }
}

/// The config text and the name errors give it. `text` is what is parsed: the file with the
/// `--set` edits written in; places are reported in `file` as it is (or as the flag).
#[derive(Clone, Copy, Debug)]
pub(super) struct Source<'a> {
    pub file: &'a str,
    pub text: &'a str,
    /// The text before the edits.
    pub original: &'a str,
    pub edits: &'a [Edit],
}

impl<'a> Source<'a> {
    /// A text without edits.
    pub(super) fn new(file: &'a str, text: &'a str) -> Source<'a> {
        Source {
            file,
            text,
            original: text,
            edits: &[],
        }
    }

    /// 1-based line and column (in characters) of byte `offset` of `text`, in the file, or
    /// the `--set` flag that wrote it.
    pub(super) fn location(&self, offset: usize) -> Location {
        let offset = match origin(self.edits, offset) {
            Origin::Flag(flag) => return flag_location(flag),
            Origin::File(offset) => offset,
        };
        let bytes = self.original.as_bytes();
        let offset = offset.min(bytes.len());
        let before = &bytes[..offset];
        let line_start = before
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        let line = 1 + before.iter().filter(|b| **b == b'\n').count();
        // Count characters, not bytes: skip UTF-8 continuation bytes.
        let column = 1 + before[line_start..]
            .iter()
            .filter(|b| (**b & 0xC0) != 0x80)
            .count();
        Location {
            file: self.file.to_string(),
            line: u32::try_from(line).unwrap_or(u32::MAX),
            column: u32::try_from(column).unwrap_or(u32::MAX),
        }
    }
}

/// One step of a key path.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Seg {
    Key(String),
    Index(usize),
}

pub(super) fn render_path(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) if out.is_empty() => out.push_str(k),
            Seg::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// `bench[0].irq[1].rate_hz` → `bench.irq.rate_hz`: the schema's name of the key.
pub(super) fn normalize(path: &[Seg]) -> String {
    path.iter()
        .filter_map(|s| match s {
            Seg::Key(k) => Some(k.as_str()),
            Seg::Index(_) => None,
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// [`normalize`] for a rendered path: `bench[0].nesting` → `bench.nesting`.
pub(super) fn key_norm(key: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in key.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            c if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

fn span_contains(span: &Range<usize>, offset: usize) -> bool {
    span.start <= offset && offset < span.end.max(span.start + 1)
}

/// The deepest key or element of `table` whose key or value covers byte `offset`.
pub(super) fn find_path(table: &DeTable<'_>, offset: usize) -> Option<Vec<Seg>> {
    let mut path = Vec::new();
    find_in_table(table, offset, &mut path).then_some(path)
}

fn find_in_table(table: &DeTable<'_>, offset: usize, path: &mut Vec<Seg>) -> bool {
    for (key, value) in table.iter() {
        path.push(Seg::Key(key.get_ref().to_string()));
        if find_in_value(value, offset, path) || span_contains(&key.span(), offset) {
            return true;
        }
        path.pop();
    }
    false
}

fn find_in_value(value: &Spanned<DeValue<'_>>, offset: usize, path: &mut Vec<Seg>) -> bool {
    if let Some(table) = value.get_ref().as_table() {
        if find_in_table(table, offset, path) {
            return true;
        }
    }
    if let Some(array) = value.get_ref().as_array() {
        for (i, element) in array.iter().enumerate() {
            path.push(Seg::Index(i));
            if find_in_value(element, offset, path) {
                return true;
            }
            path.pop();
        }
    }
    span_contains(&value.span(), offset)
}

/// The table `path` names, if it names one.
pub(super) fn table_at<'t, 'i>(root: &'t DeTable<'i>, path: &[Seg]) -> Option<&'t DeTable<'i>> {
    let mut value: Option<&Spanned<DeValue<'i>>> = None;
    for seg in path {
        value = match (seg, value) {
            (Seg::Key(k), None) => root.get(k.as_str()),
            (Seg::Key(k), Some(v)) => v.get_ref().as_table()?.get(k.as_str()),
            (Seg::Index(i), Some(v)) => v.get_ref().as_array()?.get(*i),
            (Seg::Index(_), None) => None,
        };
        value?;
    }
    match value {
        None => Some(root),
        Some(v) => v.get_ref().as_table(),
    }
}

/// The longest prefix of `path` that names a table (where a missing key belongs).
pub(super) fn table_prefix(root: &DeTable<'_>, path: &[Seg]) -> Vec<Seg> {
    let mut out = Vec::new();
    let mut table = root;
    let mut array: Option<&[Spanned<DeValue<'_>>]> = None;
    for seg in path {
        let next = match (seg, array) {
            (Seg::Index(i), Some(elements)) => elements.get(*i),
            (Seg::Key(k), None) => table.get(k.as_str()),
            (Seg::Index(_), None) | (Seg::Key(_), Some(_)) => None,
        };
        let Some(next) = next else { break };
        if let Some(t) = next.get_ref().as_table() {
            table = t;
            array = None;
            out.push(seg.clone());
        } else if let Some(a) = next.get_ref().as_array() {
            array = Some(a);
            out.push(seg.clone());
        } else {
            break;
        }
    }
    // A path ending at an array is not a table: drop it.
    if array.is_some() {
        out.pop();
    }
    out
}
