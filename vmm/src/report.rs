//! Everything a [`RunReport`] turns into: the terminal table, JSON, CSV, Markdown, an SVG chart,
//! the per-run output folder, and the comparison of two runs.
//!
//! Every file is written to a temporary sibling and renamed into place, so an interrupted run
//! never leaves a truncated JSON that a later `compare` would choke on.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs::{self, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use thiserror::Error;

use crate::results::{PhaseResult, RunReport, Summary, SCHEMA};

/// The terminal width the table is laid out for.
const TABLE_WIDTH: usize = 120;
/// Exit sites per result in the terminal table.
const EXIT_SITES_SHOWN: usize = 6;

/// The KVM per-vCPU stat that counts every VM exit.
const EXITS_STAT: &str = "exits";

/// Relative change below which a metric without a spread (exits/op) counts as unchanged.

#[derive(Debug, Error)]
pub enum ReportError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Malformed JSON, or JSON that is not a results file; line and column are serde_json's.
    #[error("{path}:{line}:{column}: not a valid irqbench results file")]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path} has schema {found:?}, but this irqbench reads only {SCHEMA}")]
    Schema { path: PathBuf, found: String },
    #[error("cannot encode the results for {path}")]
    Encode {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// plotters' error type is generic over the backend, so only its text is kept.
    #[error("cannot draw the chart for {path}: {message}")]
    Chart { path: PathBuf, message: String },
    #[error("cannot create the results folder {path}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

// ---------------------------------------------------------------------------------------------
// Number formatting

/// Cycles per operation: one decimal is below the run-to-run noise anyway.
fn fmt_cycles(v: f64) -> String {
    format!("{v:.1}")
}

/// A per-operation rate with 4 significant digits; tiny or huge ones in exponent form so the
/// column stays narrow.
fn fmt_rate(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v == 0.0 { "0".into() } else { format!("{v}") };
    }
    let mag = v.abs().log10().floor() as i32;
    if !(-3..5).contains(&mag) {
        return format!("{v:.3e}");
    }
    let mut decimals = (3 - mag).max(0) as usize;
    let mut s = format!("{v:.decimals$}");
    // 9.99996 rounds up to "10.0000": one digit too many.
    let rounded_up = s
        .parse::<f64>()
        .is_ok_and(|r| r.abs() >= 10f64.powi(mag + 1));
    if rounded_up && decimals > 0 {
        decimals -= 1;
        s = format!("{v:.decimals$}");
    }
    s
}

/// A big number with a k/M/G/T suffix and 3 significant digits; small ones exactly.
fn fmt_si(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    if v.abs() < 10_000.0 {
        return if v.fract() == 0.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        };
    }
    let mut scaled = v;
    let mut suffix = "";
    for s in ["k", "M", "G", "T"] {
        if scaled.abs() < 1000.0 {
            break;
        }
        scaled /= 1000.0;
        suffix = s;
    }
    let digits = if scaled.abs() < 10.0 {
        2
    } else if scaled.abs() < 100.0 {
        1
    } else {
        0
    };
    format!("{scaled:.digits$}{suffix}")
}

fn fmt_count(v: u64) -> String {
    fmt_si(v as f64)
}

fn fmt_pct(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

/// Nesting fractions are short decimals (0, 0.5, 0.25): no trailing zeros.
fn fmt_fraction(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-" {
        "0".into()
    } else {
        s.into()
    }
}

/// p5..p95 of cycles/op; whole cycles from 1000 up, where repeats differ by far more than
/// one cycle anyway and the column would otherwise crowd the table.
fn fmt_range(s: &Summary) -> String {
    if s.p95.abs() >= 1000.0 {
        format!("{:.0}..{:.0}", s.p5, s.p95)
    } else {
        format!("{}..{}", fmt_cycles(s.p5), fmt_cycles(s.p95))
    }
}

/// Shortens `s` to `max` characters by cutting out its middle: phase names differ at both ends.
fn ellipsize(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max || max < 3 {
        return s.into();
    }
    let keep = max - 1;
    let head = keep.div_ceil(2);
    let tail = keep - head;
    let mut out: String = s.chars().take(head).collect();
    out.push('…');
    out.extend(s.chars().skip(n - tail));
    out
}

/// The `exits` stat per op, if the kernel reported it.
fn exits_stat(r: &PhaseResult) -> Option<f64> {
    r.exits_per_op.get(EXITS_STAT).copied()
}

/// All userspace exits per op, whatever the reason.
fn userspace_exits(r: &PhaseResult) -> f64 {
    r.userspace_exits_per_op.values().sum()
}

// ---------------------------------------------------------------------------------------------
// Time

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`), so no date crate is needed for folder names.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// (year, month, day, hour, minute, second) in UTC.
fn utc_fields(unix: u64) -> (i64, u32, u32, u32, u32, u32) {
    let secs = unix as i64;
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400) as u32;
    (y, mo, d, rem / 3600, rem / 60 % 60, rem % 60)
}

/// `20260321-142501`: sorts chronologically in a directory listing.
fn compact_timestamp(unix: u64) -> String {
    let (y, mo, d, h, mi, s) = utc_fields(unix);
    format!("{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}")
}

fn human_timestamp(unix: u64) -> String {
    let (y, mo, d, h, mi, s) = utc_fields(unix);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02} UTC")
}

// ---------------------------------------------------------------------------------------------
// Host header

fn tsc_ghz(khz: u64) -> String {
    if khz == 0 {
        "unknown".into()
    } else {
        format!("{:.2} GHz", khz as f64 / 1e6)
    }
}

fn kvm_text(report: &RunReport) -> String {
    let nested = if report.host.nested { " (nested)" } else { "" };
    format!("KVM {}{nested}", report.host.kvm_flavour)
}

fn irqchip_text(report: &RunReport) -> String {
    if report.host.irqchip_modes.is_empty() {
        "-".into()
    } else {
        report.host.irqchip_modes.join("+")
    }
}

/// The lines that say where and how the numbers were measured, for the top of every report.
pub fn host_header(report: &RunReport) -> String {
    let h = &report.host;
    let host = format!(
        "host: {} ({} CPUs), kernel {}, {}, TSC {}, irqchip: {}{}",
        h.cpu_model,
        h.host_cpus,
        h.kernel_release,
        kvm_text(report),
        tsc_ghz(h.tsc_khz),
        irqchip_text(report),
        if h.vcpu_pinning { ", vCPUs pinned" } else { "" },
    );
    let run = format!(
        "irqbench {}, config {} ({})",
        report.irqbench_version, report.config_name, report.config_source
    );
    let mut out = String::new();
    if host.chars().count() + 2 + run.chars().count() <= TABLE_WIDTH {
        let _ = writeln!(out, "{host}; {run}");
    } else {
        let _ = writeln!(out, "{host}");
        let _ = writeln!(out, "{run}");
    }
    for w in &h.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    if report.partial {
        let reason = report.partial_reason.as_deref().unwrap_or("reason unknown");
        let _ = writeln!(out, "PARTIAL: {reason}");
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Terminal table

#[derive(Clone, Copy, Debug, PartialEq)]
enum Align {
    Left,
    Right,
}

/// A text table whose text columns shrink (middle ellipsis) to fit the terminal.
#[derive(Debug)]
struct TextTable {
    headers: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
    /// Columns that may be shortened, by header, in order of preference, each down to a floor.
    shrinkable: Vec<(&'static str, usize)>,
}

impl TextTable {
    fn new(headers: &[(&str, Align)]) -> TextTable {
        TextTable {
            headers: headers.iter().map(|(h, a)| (h.to_string(), *a)).collect(),
            rows: Vec::new(),
            shrinkable: Vec::new(),
        }
    }

    /// Removes the named columns where every row is zero and returns their headers: they cost
    /// width on every line and say nothing that one note line cannot.
    fn drop_all_zero(&mut self, names: &[&str]) -> Vec<String> {
        let mut dropped = Vec::new();
        for name in names {
            let Some(col) = self.headers.iter().position(|(h, _)| h == name) else {
                continue;
            };
            if self.rows.is_empty()
                || !self
                    .rows
                    .iter()
                    .all(|r| matches!(r.get(col).map(String::as_str), Some("0" | "-" | "")))
            {
                continue;
            }
            self.headers.remove(col);
            for r in &mut self.rows {
                if col < r.len() {
                    r.remove(col);
                }
            }
            dropped.push(name.to_string());
        }
        dropped
    }

    /// Two spaces before a text column; one between right-aligned numbers, whose
    /// alignment already separates them.
    fn separator(&self, col: usize) -> &'static str {
        if col == 0 {
            ""
        } else if self.headers[col - 1].1 == Align::Right && self.headers[col].1 == Align::Right {
            " "
        } else {
            "  "
        }
    }

    fn render(&self, indent: &str, max_width: usize) -> String {
        let mut widths: Vec<usize> = self
            .headers
            .iter()
            .enumerate()
            .map(|(i, (h, _))| {
                self.rows
                    .iter()
                    .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                    .chain([h.chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let total = |w: &[usize]| {
            indent.len()
                + w.iter().sum::<usize>()
                + (0..w.len()).map(|i| self.separator(i).len()).sum::<usize>()
        };
        for &(name, floor) in &self.shrinkable {
            let excess = total(&widths).saturating_sub(max_width);
            if excess == 0 {
                break;
            }
            if let Some(col) = self.headers.iter().position(|(h, _)| h == name) {
                let floor = floor.max(self.headers[col].0.chars().count());
                widths[col] = widths[col]
                    .saturating_sub(excess)
                    .max(floor)
                    .min(widths[col]);
            }
        }
        let mut out = String::new();
        let headers: Vec<String> = self.headers.iter().map(|(h, _)| h.clone()).collect();
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        for row in [&headers, &rule].into_iter().chain(self.rows.iter()) {
            let mut line = String::from(indent);
            for (i, (_, align)) in self.headers.iter().enumerate() {
                let cell = ellipsize(row.get(i).map_or("", String::as_str), widths[i]);
                let pad = widths[i].saturating_sub(cell.chars().count());
                line.push_str(self.separator(i));
                match align {
                    Align::Left => {
                        line.push_str(&cell);
                        line.extend(std::iter::repeat_n(' ', pad));
                    }
                    Align::Right => {
                        line.extend(std::iter::repeat_n(' ', pad));
                        line.push_str(&cell);
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// The cycles/op median with the noisy marker; non-noisy cells get a space in its place so the
/// digits of both line up.
fn cycles_cell(r: &PhaseResult) -> String {
    format!(
        "{}{}",
        fmt_cycles(r.cycles_per_op.median),
        if !r.precision_reached { '~' } else { ' ' }
    )
}

fn exits_cell(r: &PhaseResult) -> String {
    exits_stat(r).map_or_else(|| "-".into(), fmt_rate)
}

/// Kinds in the order they first appear, so the table follows the config's order.
fn kinds_in_order(report: &RunReport) -> Vec<&str> {
    let mut kinds: Vec<&str> = Vec::new();
    for r in &report.results {
        if !kinds.contains(&r.kind.name()) {
            kinds.push(r.kind.name());
        }
    }
    kinds
}

/// The part of every name up to a `/` that all of them share (`strategies/`), if any.
fn common_dir_prefix<'a>(names: &[&'a str]) -> &'a str {
    let Some(first) = names.first() else {
        return "";
    };
    let mut len = first.len();
    for n in &names[1..] {
        len = first
            .bytes()
            .zip(n.bytes())
            .take(len)
            .take_while(|(a, b)| a == b)
            .count();
    }
    first[..len].rfind('/').map_or("", |i| &first[..=i])
}

/// One table per workload kind. `prefix` is cut from the phase names (the caller says so in
/// the heading): the strategy and irq columns repeat most of a name, so its width is better
/// spent on the rest.
fn kind_table(kind: &str, results: &[&PhaseResult], prefix: &str) -> TextTable {
    // The rest of a phase name repeats the strategy, nest, irq and vCPU columns.
    let _ = prefix;
    let phase = |r: &PhaseResult| r.name.split('/').next().unwrap_or(&r.name).to_string();
    use Align::{Left, Right};
    if kind == "insn" {
        let mut t = TextTable::new(&[
            ("instruction", Left),
            ("bench", Left),
            ("irq", Left),
            ("vCPUs", Right),
            ("insns", Right),
            ("cycles/insn", Right),
            ("p5..p95", Right),
            ("cv", Right),
            ("exits/insn", Right),
            ("uexits/insn", Right),
            ("IRQs", Right),
        ]);
        t.shrinkable = vec![("bench", 16), ("irq", 10), ("bench", 10)];
        for r in results {
            t.rows.push(vec![
                r.strategy.clone(),
                phase(r),
                r.irq_source.clone(),
                r.vcpus.to_string(),
                fmt_count(r.ops),
                cycles_cell(r),
                fmt_range(&r.cycles_per_op),
                fmt_pct(r.cycles_per_op.cv),
                exits_cell(r),
                fmt_rate(userspace_exits(r)),
                fmt_count(r.interrupts),
            ]);
        }
        return t;
    }
    let lock = results.iter().any(|r| r.lock.is_some()) || kind == "lock";
    let mut headers = vec![
        ("bench", Left),
        ("strategy", Left),
        ("irq", Left),
        ("nest", Right),
        ("vCPUs", Right),
        ("ops", Right),
        ("cycles/op", Right),
        ("p5..p95", Right),
        ("cv", Right),
        ("exits/op", Right),
        ("uexits/op", Right),
        ("IRQs", Right),
        ("hcalls", Right),
        ("IF viol", Right),
    ];
    if lock {
        headers.push(("spins/op", Right));
        headers.push(("ops/s", Right));
        headers.push(("spread", Right));
    }
    let mut t = TextTable::new(&headers);
    // The phase name mostly repeats the strategy, irq, nest and vCPU columns, so it gives way
    // first; the irq label carries the rate, which no other column shows.
    t.shrinkable = vec![
        ("bench", 14),
        ("strategy", 12),
        ("irq", 12),
        ("bench", 10),
        ("irq", 8),
        ("strategy", 8),
    ];
    for r in results {
        let mut row = vec![
            phase(r),
            r.strategy.clone(),
            r.irq_source.clone(),
            fmt_fraction(r.nesting),
            r.vcpus.to_string(),
            fmt_count(r.ops),
            cycles_cell(r),
            fmt_range(&r.cycles_per_op),
            fmt_pct(r.cycles_per_op.cv),
            exits_cell(r),
            fmt_rate(userspace_exits(r)),
            fmt_count(r.interrupts),
            fmt_count(r.hypercalls),
            r.if_violations.to_string(),
        ];
        if lock {
            row.push(
                r.lock
                    .as_ref()
                    .map_or_else(|| "-".into(), |l| fmt_rate(l.spins_per_op)),
            );
            row.push(fmt_si(r.ops_per_sec.median));
            row.push(fmt_pct(vcpu_spread(&r.per_vcpu_ops_per_sec)));
        }
        t.rows.push(row);
    }
    t
}

/// Appends `items` as a comma-separated list wrapped at [`TABLE_WIDTH`].
fn push_wrapped(out: &mut String, first_prefix: &str, indent: &str, items: &[String]) {
    let mut line = String::from(first_prefix);
    let mut empty = true;
    for item in items {
        let add = if empty {
            item.clone()
        } else {
            format!(", {item}")
        };
        if !empty && line.chars().count() + add.chars().count() > TABLE_WIDTH {
            line.push(',');
            out.push_str(&line);
            out.push('\n');
            line = format!("{indent}{item}");
        } else {
            line.push_str(&add);
        }
        empty = false;
    }
    out.push_str(&line);
    out.push('\n');
}

fn nonzero_entries(map: &BTreeMap<String, f64>, prefix: &str) -> Vec<String> {
    map.iter()
        .filter(|(_, v)| **v != 0.0)
        .map(|(k, v)| format!("{prefix}{k}={}", fmt_rate(*v)))
        .collect()
}

/// The terminal report: host header, one table per workload kind, then the per-stat exits,
/// exit sites and failures.
pub fn render_table(report: &RunReport) -> String {
    let mut out = host_header(report);
    for kind in kinds_in_order(report) {
        let rows: Vec<&PhaseResult> = report
            .results
            .iter()
            .filter(|r| r.kind.name() == kind)
            .collect();
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        // With one row the "shared" prefix is just that name's directory: nothing gained.
        let prefix = if names.len() > 1 {
            common_dir_prefix(&names)
        } else {
            ""
        };
        let plural = if rows.len() == 1 { "" } else { "s" };
        let _ = write!(out, "\n{kind} ({} result{plural}", rows.len());
        if !prefix.is_empty() {
            let _ = write!(out, ", phases under {prefix}");
        }
        out.push_str(")\n");
        let mut table = kind_table(kind, &rows, prefix);
        let dropped = table.drop_all_zero(&["nest", "IRQs", "hcalls", "IF viol"]);
        out.push_str(&table.render("", TABLE_WIDTH));
        if !dropped.is_empty() {
            let _ = writeln!(out, "(0 in every row: {})", dropped.join(", "));
        }
    }
    if report.results.is_empty() {
        out.push_str("\nno results\n");
    } else {
        out.push('\n');
        out.push_str(
            "cycles/op: median over repeats, baseline subtracted; p5..p95 and cv (stddev/mean) \
             across repeats.\n\
             exits/op: the KVM `exits` stat; uexits/op: exits handled by irqbench in userspace.\n",
        );
        if report.results.iter().any(|r| !r.precision_reached) {
            out.push_str(
                "~ noisy: cv of cycles/op above the plan's threshold; re-run with more repeats \
                 or on a quieter host.\n",
            );
        }
        if report.results.iter().any(|r| r.lock.is_some()) {
            out.push_str(
                "spins/op: spins while another vCPU held the lock; ops/s: all vCPUs together;\n\
                 spread: (max - min) / mean of the vCPUs' own ops/s.\n",
            );
        }
    }

    if !report.results.is_empty() {
        // Every result, with its full name: the tables above may have shortened it.
        out.push_str("\nexits per op by KVM stat (non-zero only; vm.* are VM-wide stats)\n");
        for r in &report.results {
            let mut items = nonzero_entries(&r.exits_per_op, "");
            items.extend(nonzero_entries(&r.vm_stats_per_op, "vm."));
            if items.is_empty() {
                items.push("-".into());
            }
            push_wrapped(&mut out, &format!("  {}: ", r.name), "      ", &items);
        }
    }

    if report.results.iter().any(|r| !r.exit_sites.is_empty()) {
        use Align::{Left, Right};
        out.push_str("\nexit sites (userspace exits by guest code site)\n");
        let mut t = TextTable::new(&[
            ("phase", Left),
            ("strategy", Left),
            ("site", Left),
            ("reason", Left),
            ("count", Right),
            ("rip", Right),
            ("instruction", Left),
        ]);
        t.shrinkable = vec![("phase", 16), ("instruction", 16), ("site", 12)];
        for r in &report.results {
            // The busiest sites; the JSON has all of them.
            for s in r.exit_sites.iter().take(EXIT_SITES_SHOWN) {
                let site = if s.symbol.is_empty() || s.symbol == s.site {
                    s.site.clone()
                } else {
                    format!("{} ({})", s.site, s.symbol)
                };
                t.rows.push(vec![
                    r.name.clone(),
                    s.strategy.clone(),
                    site,
                    s.reason.clone(),
                    fmt_count(s.count),
                    format!("{:#x}", s.rip),
                    s.instruction.clone(),
                ]);
            }
        }
        out.push_str(&t.render("  ", TABLE_WIDTH));
    }

    out.push_str(&render_mixed(report));
    out.push_str(&render_scaling(report));

    if !report.failures.is_empty() {
        let _ = writeln!(out, "\nfailures ({})", report.failures.len());
        for f in &report.failures {
            let _ = writeln!(out, "  {}: {}", f.name, f.error);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Files

static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to a fresh temporary file beside `path`, then renames it over `path`:
/// readers see the old file or the complete new one, never a torn one.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    let err = |source| ReportError::Write {
        path: path.to_owned(),
        source,
    };
    let name = path.file_name().ok_or_else(|| {
        err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path names no file",
        ))
    })?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let tmp = dir.join(format!(
        ".{}.{}-{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        TEMP_SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        // Best effort: the write already failed, and that error is the one worth reporting.
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(err)
}

/// Pretty JSON with a trailing newline.
pub fn write_json(report: &RunReport, path: &Path) -> Result<(), ReportError> {
    let mut text = serde_json::to_string_pretty(report).map_err(|source| ReportError::Encode {
        path: path.to_owned(),
        source,
    })?;
    text.push('\n');
    write_atomically(path, text.as_bytes())
}

/// Only the schema, so a file of another version is refused before its fields confuse serde.
#[derive(Debug, Deserialize)]
struct SchemaProbe {
    #[serde(default)]
    schema: Option<String>,
}

/// `irqbench-results/1` itself or a minor revision (`irqbench-results/1.2`); not `/10`.
fn schema_supported(schema: &str) -> bool {
    schema
        .strip_prefix(SCHEMA)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

pub fn read_json(path: &Path) -> Result<RunReport, ReportError> {
    let text = fs::read_to_string(path).map_err(|source| ReportError::Read {
        path: path.to_owned(),
        source,
    })?;
    let parse_err = |source: serde_json::Error| ReportError::Parse {
        path: path.to_owned(),
        line: source.line(),
        column: source.column(),
        source,
    };
    let probe: SchemaProbe = serde_json::from_str(&text).map_err(parse_err)?;
    match probe.schema {
        Some(s) if schema_supported(&s) => {}
        found => {
            return Err(ReportError::Schema {
                path: path.to_owned(),
                found: found.unwrap_or_else(|| "<none>".into()),
            })
        }
    }
    serde_json::from_str(&text).map_err(parse_err)
}

/// RFC 4180 quoting: only when needed, so plain cells stay greppable.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) || s.starts_with(' ') || s.ends_with(' ') {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.into()
    }
}

fn csv_line(out: &mut String, fields: &[String]) {
    let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
    out.push_str(&line.join(","));
    // RFC 4180 line ending: spreadsheet importers expect it.
    out.push_str("\r\n");
}

fn union_keys<'a>(
    report: &'a RunReport,
    map: impl Fn(&'a PhaseResult) -> &'a BTreeMap<String, f64>,
) -> Vec<&'a str> {
    let keys: BTreeSet<&str> = report
        .results
        .iter()
        .flat_map(|r| map(r).keys().map(String::as_str))
        .collect();
    keys.into_iter().collect()
}

/// The CSV text: fixed columns, then one column per KVM stat (`stat:`), VM-wide stat
/// (`vmstat:`) and userspace exit reason (`uexit:`) seen in any result.
pub fn render_csv(report: &RunReport) -> String {
    const FIXED: [&str; 27] = [
        "name",
        "kind",
        "strategy",
        "irq_source",
        "nesting",
        "vcpus",
        "body_ops",
        "iterations",
        "ops",
        "repeats",
        "cycles_median",
        "cycles_p5",
        "cycles_p95",
        "cycles_cv",
        "noisy",
        "ops_per_sec_median",
        "interrupts",
        "hypercalls",
        "if_violations",
        "exits_per_op",
        "userspace_exits_per_op",
        "baseline_cycles_per_op",
        "raw_cycles_median",
        "hypercalls_seen_by_vmm",
        "lock_spins_per_op",
        "lock_mutual_exclusion_held",
        "wall_ms",
    ];
    let stats = union_keys(report, |r| &r.exits_per_op);
    let vm_stats = union_keys(report, |r| &r.vm_stats_per_op);
    let uexits = union_keys(report, |r| &r.userspace_exits_per_op);

    let mut out = String::new();
    let mut header: Vec<String> = FIXED.iter().map(|s| s.to_string()).collect();
    header.extend(stats.iter().map(|s| format!("stat:{s}")));
    header.extend(vm_stats.iter().map(|s| format!("vmstat:{s}")));
    header.extend(uexits.iter().map(|s| format!("uexit:{s}")));
    csv_line(&mut out, &header);

    // A stat absent from a result did not move in that phase: 0, not unknown.
    let get = |m: &BTreeMap<String, f64>, k: &str| m.get(k).copied().unwrap_or(0.0).to_string();
    for r in &report.results {
        let mut row = vec![
            r.name.clone(),
            r.kind.name().to_string(),
            r.strategy.clone(),
            r.irq_source.clone(),
            r.nesting.to_string(),
            r.vcpus.to_string(),
            r.body_ops.to_string(),
            r.block_ops.to_string(),
            r.ops.to_string(),
            r.rounds.to_string(),
            r.cycles_per_op.median.to_string(),
            r.cycles_per_op.p5.to_string(),
            r.cycles_per_op.p95.to_string(),
            r.cycles_per_op.cv.to_string(),
            (!r.precision_reached).to_string(),
            r.ops_per_sec.median.to_string(),
            r.interrupts.to_string(),
            r.hypercalls.to_string(),
            r.if_violations.to_string(),
            exits_stat(r).map_or_else(String::new, |v| v.to_string()),
            userspace_exits(r).to_string(),
            r.baseline_cycles.median.to_string(),
            r.raw_cycles_per_op.median.to_string(),
            r.hypercalls_seen_by_vmm.to_string(),
            r.lock
                .as_ref()
                .map_or_else(String::new, |l| l.spins_per_op.to_string()),
            r.lock
                .as_ref()
                .map_or_else(String::new, |l| l.mutual_exclusion_held.to_string()),
            r.wall_ms.to_string(),
        ];
        row.extend(stats.iter().map(|k| get(&r.exits_per_op, k)));
        row.extend(vm_stats.iter().map(|k| get(&r.vm_stats_per_op, k)));
        row.extend(uexits.iter().map(|k| get(&r.userspace_exits_per_op, k)));
        csv_line(&mut out, &row);
    }
    out
}

pub fn write_csv(report: &RunReport, path: &Path) -> Result<(), ReportError> {
    write_atomically(path, render_csv(report).as_bytes())
}

// ---------------------------------------------------------------------------------------------
// Markdown

/// A table cell: pipes would split the cell, newlines would end the table.
fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

fn md_table(out: &mut String, headers: &[&str], right: &[bool], rows: &[Vec<String>]) {
    let _ = writeln!(out, "| {} |", headers.join(" | "));
    let rule: Vec<&str> = right
        .iter()
        .map(|r| if *r { "---:" } else { "---" })
        .collect();
    let _ = writeln!(out, "|{}|", rule.join("|"));
    for row in rows {
        let cells: Vec<String> = row.iter().map(|c| md_cell(c)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
}

fn md_map(map: &BTreeMap<String, impl std::fmt::Display>) -> String {
    if map.is_empty() {
        return "none".into();
    }
    map.iter()
        .map(|(k, v)| format!("`{k}`={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A Markdown report to paste into an issue or a mail.
pub fn render_markdown(report: &RunReport) -> String {
    let h = &report.host;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# irqbench results: {}\n",
        md_cell(&report.config_name)
    );
    if report.partial {
        let reason = report.partial_reason.as_deref().unwrap_or("reason unknown");
        let _ = writeln!(
            out,
            "> **PARTIAL run:** {}\n",
            md_cell(reason).replace('\n', " ")
        );
    }
    let bullets = [
        ("CPU", format!("{} ({} CPUs)", h.cpu_model, h.host_cpus)),
        ("kernel", h.kernel_release.clone()),
        (
            "KVM",
            format!(
                "{}{}, API {}, max vCPUs {} (recommended {})",
                h.kvm_flavour,
                if h.nested { " (nested)" } else { "" },
                h.kvm_api_version,
                h.max_vcpus,
                h.recommended_vcpus
            ),
        ),
        ("TSC", tsc_ghz(h.tsc_khz)),
        ("irqchip", irqchip_text(report)),
        (
            "vCPU pinning",
            if h.vcpu_pinning { "yes" } else { "no" }.into(),
        ),
        ("module parameters", md_map(&h.module_params)),
        ("capabilities", md_map(&h.capabilities)),
        (
            "run",
            format!(
                "irqbench {}, config `{}` ({}), started {}, {:.1} s",
                report.irqbench_version,
                report.config_name,
                report.config_source,
                human_timestamp(report.started_unix),
                report.wall_seconds
            ),
        ),
    ];
    for (k, v) in bullets {
        let _ = writeln!(out, "- **{k}:** {v}");
    }
    for w in &h.warnings {
        let _ = writeln!(out, "- **warning:** {w}");
    }

    out.push_str("\n## Results\n\n");
    if report.results.is_empty() {
        out.push_str("No results.\n");
    } else {
        let headers = [
            "phase",
            "kind",
            "strategy",
            "irq",
            "nest",
            "vCPUs",
            "ops",
            "cycles/op (median)",
            "p5..p95",
            "cv",
            "exits/op",
            "uexits/op",
            "IRQs",
            "hcalls",
            "IF viol",
        ];
        let mut right = vec![false; 4];
        right.extend([true; 11]);
        let rows: Vec<Vec<String>> = report
            .results
            .iter()
            .map(|r| {
                vec![
                    format!("`{}`", r.name),
                    r.kind.name().to_string(),
                    r.strategy.clone(),
                    r.irq_source.clone(),
                    fmt_fraction(r.nesting),
                    r.vcpus.to_string(),
                    fmt_count(r.ops),
                    cycles_cell(r).trim_end().to_string(),
                    fmt_range(&r.cycles_per_op),
                    fmt_pct(r.cycles_per_op.cv),
                    exits_cell(r),
                    fmt_rate(userspace_exits(r)),
                    fmt_count(r.interrupts),
                    fmt_count(r.hypercalls),
                    r.if_violations.to_string(),
                ]
            })
            .collect();
        md_table(&mut out, &headers, &right, &rows);
        out.push_str(
            "\ncycles/op: median over repeats, baseline subtracted; insn rows are per instruction.",
        );
        if report.results.iter().any(|r| !r.precision_reached) {
            out.push_str(" `~`: noisy (cv above the plan's threshold).");
        }
        out.push('\n');

        let stats = union_keys(report, |r| &r.exits_per_op);
        if !stats.is_empty() {
            out.push_str("\n## Exits per op by KVM stat\n\n");
            let mut headers = vec!["phase"];
            headers.extend(stats.iter().copied());
            let mut right = vec![false];
            right.extend(vec![true; stats.len()]);
            let rows: Vec<Vec<String>> = report
                .results
                .iter()
                .map(|r| {
                    let mut row = vec![format!("`{}`", r.name)];
                    row.extend(stats.iter().map(|s| {
                        r.exits_per_op
                            .get(*s)
                            .map_or_else(|| "0".into(), |v| fmt_rate(*v))
                    }));
                    row
                })
                .collect();
            md_table(&mut out, &headers, &right, &rows);
        }
    }

    let sites: Vec<Vec<String>> = report
        .results
        .iter()
        .flat_map(|r| {
            r.exit_sites.iter().map(|s| {
                vec![
                    format!("`{}`", r.name),
                    s.strategy.clone(),
                    s.site.clone(),
                    s.reason.clone(),
                    s.count.to_string(),
                    format!("`{}`", s.instruction),
                ]
            })
        })
        .collect();
    if !sites.is_empty() {
        out.push_str("\n## Exit sites\n\n");
        md_table(
            &mut out,
            &[
                "phase",
                "strategy",
                "site",
                "reason",
                "count",
                "instruction",
            ],
            &[false, false, false, false, true, false],
            &sites,
        );
    }

    let scaling = render_scaling(report);
    if !scaling.is_empty() {
        let _ = writeln!(out, "\n## Scaling\n\n```{scaling}```");
    }
    if !report.failures.is_empty() {
        out.push_str("\n## Failures\n\n");
        for f in &report.failures {
            let _ = writeln!(out, "- `{}`: {}", f.name, md_cell(&f.error));
        }
    }
    out
}

pub fn write_markdown(report: &RunReport, path: &Path) -> Result<(), ReportError> {
    write_atomically(path, render_markdown(report).as_bytes())
}

// ---------------------------------------------------------------------------------------------
// SVG chart

/// One bar of a chart panel.
#[derive(Debug)]
struct Bar {
    value: f64,
    /// The p5..p95 whisker, when the metric has one.
    whisker: Option<(f64, f64)>,
}

/// Axis labels longer than this are shortened in the middle.
const SVG_LABEL_CHARS: usize = 32;

fn draw_panel<DB: plotters::prelude::DrawingBackend>(
    area: &plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    y_desc: &str,
    labels: &[String],
    bars: &[Bar],
    color: plotters::style::RGBColor,
) -> Result<(), String> {
    use plotters::prelude::*;

    let n = bars.len().max(1);
    let top = bars
        .iter()
        .map(|b| b.whisker.map_or(b.value, |(_, hi)| hi.max(b.value)))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    // Headroom for the value printed above the tallest bar; 1 keeps an all-zero panel drawable.
    let y_max = if top > 0.0 { top * 1.15 } else { 1.0 };
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(1);
    let label_px = (longest as u32 * 7 + 16).clamp(40, 260);
    // A plain f64 axis: asked for n labels over a span of n, plotters puts one at every integer.
    let x_range = -0.5f64..(n as f64 - 0.5);

    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(label_px)
        .y_label_area_size(80)
        .build_cartesian_2d(x_range, 0f64..y_max)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        // Labels are drawn below by hand: plotters centres rotated labels on the tick, so long
        // ones would run up into the bars.
        .x_label_formatter(&|_| String::new())
        .y_desc(y_desc)
        .y_label_formatter(&|v| {
            if v.abs() < 1.0 && *v != 0.0 {
                fmt_rate(*v)
            } else {
                fmt_si(*v)
            }
        })
        .draw()
        .map_err(|e| e.to_string())?;
    let (base_x, base_y) = area.get_base_pixel();
    let label_style = ("sans-serif", 13)
        .into_font()
        .transform(FontTransform::Rotate90)
        .color(&BLACK)
        .pos(plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Left,
            plotters::style::text_anchor::VPos::Center,
        ));
    for (i, label) in labels.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64, 0.0));
        area.draw(&Text::new(
            label.clone(),
            (x - base_x, y - base_y + 8),
            label_style.clone(),
        ))
        .map_err(|e| e.to_string())?;
    }

    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            let x = i as f64;
            Rectangle::new([(x - 0.35, 0.0), (x + 0.35, b.value)], color.filled())
        }))
        .map_err(|e| e.to_string())?;
    for (i, b) in bars.iter().enumerate() {
        let x = i as f64;
        if let Some((lo, hi)) = b.whisker {
            let style = BLACK.stroke_width(2);
            let lines = [
                vec![(x, lo), (x, hi)],
                vec![(x - 0.15, lo), (x + 0.15, lo)],
                vec![(x - 0.15, hi), (x + 0.15, hi)],
            ];
            chart
                .draw_series(lines.into_iter().map(|l| PathElement::new(l, style)))
                .map_err(|e| e.to_string())?;
        }
        let y = b.whisker.map_or(b.value, |(_, hi)| hi.max(b.value));
        let text = if b.whisker.is_some() {
            fmt_cycles(b.value)
        } else {
            fmt_rate(b.value)
        };
        let style = ("sans-serif", 12).into_font().color(&BLACK).pos(
            plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Bottom,
            ),
        );
        chart
            .draw_series([Text::new(text, (x, y + y_max * 0.01), style)])
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The chart as SVG text: cycles/op with p5..p95 whiskers above, exits/op below.
pub fn render_svg(report: &RunReport) -> Result<String, String> {
    use plotters::prelude::*;

    let labels: Vec<String> = report
        .results
        .iter()
        .map(|r| ellipsize(&r.name, SVG_LABEL_CHARS))
        .collect();
    let width = (report.results.len() as u32 * 48 + 220).max(900);
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(1) as u32;
    let panel = 360 + (longest * 7 + 16).clamp(40, 260);
    let height = 2 * panel + 50;

    let cycles: Vec<Bar> = report
        .results
        .iter()
        .map(|r| Bar {
            value: r.cycles_per_op.median,
            whisker: Some((r.cycles_per_op.p5, r.cycles_per_op.p95)),
        })
        .collect();
    // The KVM stat counts every exit; without it (no binary stats) the VMM's own count of
    // userspace exits is the best available.
    let use_stat = report.results.iter().any(|r| exits_stat(r).is_some());
    let exits: Vec<Bar> = report
        .results
        .iter()
        .map(|r| Bar {
            value: if use_stat {
                exits_stat(r).unwrap_or(0.0)
            } else {
                userspace_exits(r)
            },
            whisker: None,
        })
        .collect();
    let exits_desc = if use_stat {
        "VM exits/op (KVM `exits` stat)"
    } else {
        "userspace exits/op"
    };

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let h = &report.host;
        let title = format!(
            "irqbench {}: {}, {}, kernel {}{}",
            report.config_name,
            h.cpu_model,
            kvm_text(report),
            h.kernel_release,
            if report.partial { " (PARTIAL)" } else { "" }
        );
        let root = root
            .titled(&title, ("sans-serif", 22))
            .map_err(|e| e.to_string())?;
        let (upper, lower) = root.split_vertically(panel);
        draw_panel(
            &upper,
            "cycles/op (median, whiskers p5..p95)",
            "cycles/op",
            &labels,
            &cycles,
            RGBColor(70, 120, 180),
        )?;
        draw_panel(
            &lower,
            exits_desc,
            "exits/op",
            &labels,
            &exits,
            RGBColor(200, 110, 50),
        )?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

pub fn write_svg(report: &RunReport, path: &Path) -> Result<(), ReportError> {
    let svg = render_svg(report).map_err(|message| ReportError::Chart {
        path: path.to_owned(),
        message,
    })?;
    write_atomically(path, svg.as_bytes())
}

// ---------------------------------------------------------------------------------------------
// Output folder

/// A fresh folder for one run's files, with the conventional file names inside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputDir {
    path: PathBuf,
}

impl OutputDir {
    /// Creates `base/<config>-<YYYYmmdd-HHMMSS>[-N]`; see [`new_results_dir`].
    pub fn create(base: &Path, config_name: &str) -> Result<OutputDir, ReportError> {
        new_results_dir(base, config_name).map(|path| OutputDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn json(&self) -> PathBuf {
        self.path.join("results.json")
    }

    pub fn csv(&self) -> PathBuf {
        self.path.join("results.csv")
    }

    pub fn markdown(&self) -> PathBuf {
        self.path.join("results.md")
    }

    pub fn svg(&self) -> PathBuf {
        self.path.join("results.svg")
    }

    pub fn table(&self) -> PathBuf {
        self.path.join("results.txt")
    }

    /// Writes every format. JSON goes first: it is the one `compare` needs.
    pub fn write_all(&self, report: &RunReport) -> Result<(), ReportError> {
        write_json(report, &self.json())?;
        write_csv(report, &self.csv())?;
        write_markdown(report, &self.markdown())?;
        write_atomically(&self.table(), render_table(report).as_bytes())?;
        write_svg(report, &self.svg())
    }
}

/// Config names come from users; keep the folder name to characters every shell and
/// filesystem takes literally.
fn folder_safe(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let s = s.trim_matches(['.', '-']).to_string();
    if s.is_empty() {
        "run".into()
    } else {
        s
    }
}

/// Creates and returns `base/<config>-<YYYYmmdd-HHMMSS>` (UTC), or with `-2`, `-3`, … appended
/// when that exists. `create_dir` (not `_all`) on the last component makes the check and the
/// creation one step, so two runs started in the same second never share a folder.
pub fn new_results_dir(base: &Path, config_name: &str) -> Result<PathBuf, ReportError> {
    fs::create_dir_all(base).map_err(|source| ReportError::CreateDir {
        path: base.to_owned(),
        source,
    })?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let stem = format!("{}-{}", folder_safe(config_name), compact_timestamp(now));
    let mut n = 1u32;
    loop {
        let path = if n == 1 {
            base.join(&stem)
        } else {
            base.join(format!("{stem}-{n}"))
        };
        match fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 10_000 => n += 1,
            Err(source) => return Err(ReportError::CreateDir { path, source }),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Compare

/// Two runs side by side, matched by result name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    pub rows: Vec<CompareRow>,
    /// Result names only the old run (`a`) has.
    pub only_in_a: Vec<String>,
    pub only_in_b: Vec<String>,
    /// `field: old --> new` for host manifest fields that differ: the numbers may not be
    /// comparable at all then.
    pub host_differs: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CompareRow {
    pub name: String,
    /// `cycles/op`, `ops/s` or `exits/op`.
    pub metric: String,
    pub old: f64,
    pub new: f64,
    /// (new - old) / old × 100; ±inf when old is 0 and new is not.
    pub change_pct: f64,
    /// See [`compare`] for the rule.
    pub beyond_noise: bool,
}

const METRIC_CYCLES: &str = "cycles/op";
const METRIC_OPS: &str = "ops/s";
const METRIC_EXITS: &str = "exits/op";

fn change_pct(old: f64, new: f64) -> f64 {
    if old == new {
        0.0
    } else if old == 0.0 {
        f64::INFINITY.copysign(new)
    } else {
        (new - old) / old.abs() * 100.0
    }
}

/// Two-sided 99 % critical values of Student's t by degrees of freedom (1..=30, then the normal
/// quantile): with three repeats a run knows its own spread only roughly, and the test has to
/// say so rather than call every drift a change.
fn t_critical_99(df: f64) -> f64 {
    const TABLE: [f64; 30] = [
        63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169, 3.106, 3.055, 3.012,
        2.977, 2.947, 2.921, 2.898, 2.878, 2.861, 2.845, 2.831, 2.819, 2.807, 2.797, 2.787, 2.779,
        2.771, 2.763, 2.756, 2.750,
    ];
    if !df.is_finite() || df >= 30.0 {
        return if df.is_finite() { 2.576 } else { TABLE[0] };
    }
    TABLE[(df.floor().max(1.0) as usize) - 1]
}

/// A run's median and its squared standard error (1.2533 σ/√n, the large-sample efficiency
/// of the median) with the repeats behind it; `None` with fewer than two repeats.
fn median_error(s: &Summary) -> Option<(f64, usize)> {
    let finite: Vec<f64> = s
        .samples
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    let n = finite.len();
    if n < 2 {
        return None;
    }
    let mean = finite.iter().sum::<f64>() / n as f64;
    let var = finite.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    Some((1.2533f64.powi(2) * var / n as f64, n))
}

/// Welch's t-test on the medians at 99 %: the change is beyond noise when it exceeds the
/// critical t (Welch–Satterthwaite degrees of freedom) times the standard error of the
/// difference, and is at least `min_change_pct`. Each repeat of a baseline-subtracted metric
/// subtracts its own paired baseline run, so the repeats' spread already carries the baseline's
/// noise. With fewer than two repeats in either run nothing is claimed.
fn summary_row(
    name: &str,
    metric: &str,
    a: &Summary,
    b: &Summary,
    min_change_pct: f64,
) -> CompareRow {
    let change = change_pct(a.median, b.median);
    let beyond = match (median_error(a), median_error(b)) {
        (Some(ea), Some(eb)) => {
            let terms = [ea, eb];
            let var: f64 = terms.iter().map(|(v, _)| v).sum();
            let df_den: f64 = terms.iter().map(|(v, n)| v * v / (*n as f64 - 1.0)).sum();
            let df = if df_den > 0.0 {
                var * var / df_den
            } else {
                f64::INFINITY
            };
            let diff = (b.median - a.median).abs();
            diff > 0.0 && diff > t_critical_99(df) * var.sqrt() && change.abs() >= min_change_pct
        }
        _ => false,
    };
    CompareRow {
        name: name.into(),
        metric: metric.into(),
        old: a.median,
        new: b.median,
        change_pct: change,
        beyond_noise: beyond,
    }
}

/// Exit rates are counts: treated as Poisson, the variance of a rate is count / ops².
fn exits_row(
    name: &str,
    (old, ops_a): (f64, u64),
    (new, ops_b): (f64, u64),
    min_change_pct: f64,
) -> CompareRow {
    let var = |rate: f64, ops: u64| {
        let ops = ops.max(1) as f64;
        (rate.abs() * ops).max(1.0) / (ops * ops)
    };
    let se = (var(old, ops_a) + var(new, ops_b)).sqrt();
    CompareRow {
        name: name.into(),
        metric: METRIC_EXITS.into(),
        old,
        new,
        change_pct: change_pct(old, new),
        // 2.576: the two-sided 99 % normal quantile, as for the summaries' large-sample case.
        beyond_noise: (new - old).abs() > 2.576 * se
            && change_pct(old, new).abs() >= min_change_pct,
    }
}

/// Compares run `a` (old) with run `b` (new), result by result (matched by `name`).
///
/// Metrics: cycles/op median and ops/s median, judged by [`summary_row`]'s rule (Welch's t-test
/// on the medians at 99 % and a relative-change floor);
/// exits/op (the KVM `exits` stat, when either run has it) by [`exits_row`]'s Poisson rule.
/// The host manifests are compared too: a different CPU, KVM flavour, kernel or TSC makes
/// every row suspect.
pub fn compare(a: &RunReport, b: &RunReport) -> Comparison {
    compare_with(a, b, DEFAULT_MIN_CHANGE_PCT)
}

/// Back-to-back runs of one config on one host drift by a few percent (a new VM, other load):
/// below this relative change nothing is called beyond noise, whatever the repeats' spread.
pub const DEFAULT_MIN_CHANGE_PCT: f64 = 5.0;

/// [`compare`] with the relative-change floor chosen by the caller (`--min-change`).
pub fn compare_with(a: &RunReport, b: &RunReport, min_change_pct: f64) -> Comparison {
    let mut c = Comparison::default();
    let b_by_name: BTreeMap<&str, &PhaseResult> =
        b.results.iter().map(|r| (r.name.as_str(), r)).collect();
    let a_names: BTreeSet<&str> = a.results.iter().map(|r| r.name.as_str()).collect();

    for ra in &a.results {
        let Some(rb) = b_by_name.get(ra.name.as_str()) else {
            c.only_in_a.push(ra.name.clone());
            continue;
        };
        c.rows.push(summary_row(
            &ra.name,
            METRIC_CYCLES,
            &ra.cycles_per_op,
            &rb.cycles_per_op,
            min_change_pct,
        ));
        c.rows.push(summary_row(
            &ra.name,
            METRIC_OPS,
            &ra.ops_per_sec,
            &rb.ops_per_sec,
            min_change_pct,
        ));
        if exits_stat(ra).is_some() || exits_stat(rb).is_some() {
            c.rows.push(exits_row(
                &ra.name,
                (exits_stat(ra).unwrap_or(0.0), ra.ops),
                (exits_stat(rb).unwrap_or(0.0), rb.ops),
                min_change_pct,
            ));
        }
    }
    c.only_in_b = b
        .results
        .iter()
        .filter(|r| !a_names.contains(r.name.as_str()))
        .map(|r| r.name.clone())
        .collect();

    let (ha, hb) = (&a.host, &b.host);
    let fields = [
        ("cpu_model", ha.cpu_model.clone(), hb.cpu_model.clone()),
        (
            "kvm_flavour",
            ha.kvm_flavour.clone(),
            hb.kvm_flavour.clone(),
        ),
        (
            "kernel_release",
            ha.kernel_release.clone(),
            hb.kernel_release.clone(),
        ),
        ("tsc_khz", ha.tsc_khz.to_string(), hb.tsc_khz.to_string()),
        ("nested", ha.nested.to_string(), hb.nested.to_string()),
    ];
    for (field, old, new) in fields {
        if old != new {
            c.host_differs.push(format!("{field}: {old} --> {new}"));
        }
    }
    c
}

fn fmt_metric(metric: &str, v: f64) -> String {
    match metric {
        METRIC_CYCLES => fmt_cycles(v),
        METRIC_OPS => fmt_si(v),
        _ => fmt_rate(v),
    }
}

fn fmt_change(pct: f64) -> String {
    if pct.is_infinite() {
        if pct > 0.0 { "(new)" } else { "(gone)" }.into()
    } else {
        format!("({pct:+.1}%)")
    }
}

/// The comparison as aligned plain-text lines (the style of a kernel patch's cover letter), or
/// as a Markdown table.
pub fn render_compare(c: &Comparison, markdown: bool) -> String {
    let mut out = String::new();
    for d in &c.host_differs {
        let _ = writeln!(out, "host differs: {d}");
    }
    if !c.host_differs.is_empty() {
        out.push('\n');
    }
    let verdict = |r: &CompareRow| {
        if r.beyond_noise {
            "beyond noise"
        } else {
            "(within noise)"
        }
    };
    if markdown {
        let rows: Vec<Vec<String>> = c
            .rows
            .iter()
            .map(|r| {
                vec![
                    format!("`{}`", r.name),
                    r.metric.clone(),
                    fmt_metric(&r.metric, r.old),
                    fmt_metric(&r.metric, r.new),
                    fmt_change(r.change_pct)
                        .trim_matches(['(', ')'])
                        .to_string(),
                    if r.beyond_noise {
                        "**beyond noise**".into()
                    } else {
                        "within noise".into()
                    },
                ]
            })
            .collect();
        if !rows.is_empty() {
            md_table(
                &mut out,
                &["phase", "metric", "old", "new", "change", "verdict"],
                &[false, false, true, true, true, false],
                &rows,
            );
        }
    } else {
        use Align::{Left, Right};
        let mut t = TextTable::new(&[
            ("", Left),
            ("", Left),
            ("", Right),
            ("", Left),
            ("", Right),
            ("", Right),
            ("", Left),
        ]);
        for r in &c.rows {
            t.rows.push(vec![
                r.name.clone(),
                r.metric.clone(),
                fmt_metric(&r.metric, r.old),
                "-->".into(),
                fmt_metric(&r.metric, r.new),
                fmt_change(r.change_pct),
                verdict(r).into(),
            ]);
        }
        // No header row in this style: drop the blank header and its rule.
        let text = t.render("", usize::MAX);
        for line in text.lines().skip(2) {
            let _ = writeln!(out, "{line}");
        }
    }
    let lists = [
        ("only in the old run", &c.only_in_a),
        ("only in the new run", &c.only_in_b),
    ];
    for (what, names) in lists {
        if !names.is_empty() {
            let items: Vec<String> = names
                .iter()
                .map(|n| {
                    if markdown {
                        format!("`{n}`")
                    } else {
                        n.clone()
                    }
                })
                .collect();
            out.push('\n');
            push_wrapped(&mut out, &format!("{what}: "), "  ", &items);
        }
    }
    if c.rows.is_empty() && c.only_in_a.is_empty() && c.only_in_b.is_empty() {
        out.push_str("no results to compare\n");
    }
    out
}

// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{ExitSite, HostManifest, LockStats, PhaseFailure};

    /// A fresh empty folder under the system temp dir, unique per test.
    fn scratch_dir(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "irqbench-report-{}-{test}-{}",
            std::process::id(),
            TEMP_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn summary(median: f64, spread: f64, cv: f64) -> Summary {
        Summary {
            median,
            ci95: [median - spread / 2.0, median + spread / 2.0],
            min: median - spread,
            p5: median - spread,
            p95: median + spread,
            cv,
            samples: vec![median - spread, median, median + spread],
        }
    }

    fn result(name: &str, kind: &str, strategy: &str, cycles: f64, exits: f64) -> PhaseResult {
        let mut r = PhaseResult {
            name: name.into(),
            kind: match kind {
                "insn" => crate::results::ResultKind::Insn,
                "lock" => crate::results::ResultKind::Lock,
                "mixed" => crate::results::ResultKind::Mixed,
                _ => crate::results::ResultKind::Strategy,
            },
            strategy: strategy.into(),
            irq_source: "none".into(),
            nesting: 0.0,
            vcpus: 1,
            body_ops: 1,
            block_ops: 1_000_000,
            precision_reached: true,
            ops: 5_000_000,
            rounds: 5,
            cycles_per_op: summary(cycles, cycles * 0.02, 0.01),
            raw_cycles_per_op: summary(cycles + 12.5, cycles * 0.02, 0.01),
            // Whole numbers: serde_json (without `float_roundtrip`) may misread the last bit of
            // a 17-digit float, and the JSON test wants exact equality.
            ops_per_sec: summary((2.45e9 / cycles).round(), 1000.0, 0.01),
            per_vcpu_ops: vec![5_000_000],
            wall_ms: 812.0,
            ..PhaseResult::default()
        };
        if exits > 0.0 {
            r.exits_per_op.insert("exits".into(), exits);
            r.exits_per_op.insert("io_exits".into(), exits * 0.75);
            r.exits_per_op
                .insert("irq_window_exits".into(), exits * 0.25);
            r.userspace_exits_per_op
                .insert("io-out".into(), exits * 0.75);
        }
        r
    }

    fn sample_report() -> RunReport {
        let mut popf = result(
            "strategies/native-popf/n0/none/1v",
            "strategy",
            "native-popf",
            7500.0,
            2.0,
        );
        popf.exit_sites.push(ExitSite {
            strategy: "native-popf".into(),
            site: "restore".into(),
            symbol: "irqbench_op_native_popf".into(),
            reason: "io-out".into(),
            count: 3_750_000,
            rip: 0x20_1a3c,
            instruction: "popfq".into(),
        });
        popf.interrupts = 12_345;
        let mut pv = result(
            "strategies/pv-irq/n0.5/inject@1000Hz/2v",
            "strategy",
            "pv-irq",
            38.25,
            0.000_123_4,
        );
        pv.irq_source = "inject@1000Hz".into();
        pv.nesting = 0.5;
        pv.vcpus = 2;
        pv.interrupts = 1_200;
        pv.hypercalls = 1_150;
        pv.hypercalls_seen_by_vmm = 1_150;
        pv.precision_reached = false;
        pv.cycles_per_op.cv = 0.21;
        pv.vm_stats_per_op.insert("remote_tlb_flush".into(), 0.001);
        let mut lock = result("lock/native-cli/4v", "lock", "native-cli", 1234.5, 0.0);
        lock.vcpus = 4;
        lock.lock = Some(LockStats {
            acquisitions: 10_000_000,
            spins: 2_500_000,
            spins_per_op: 0.25,
            counter: 10_000_000,
            mutual_exclusion_held: true,
        });
        let insn = result("insn/popf", "insn", "popf", 21.0, 0.0);
        let mut odd = result("odd, name \"quoted\"", "mixed", "mixed", 99.0, 0.5);
        odd.strategy_ops.insert("native-popf".into(), 10);

        RunReport {
            schema: SCHEMA.into(),
            irqbench_version: "0.1.0".into(),
            config_name: "quick".into(),
            config_source: "<built-in default>".into(),
            started_unix: 1_774_000_000,
            wall_seconds: 42.5,
            partial: false,
            partial_reason: None,
            comparisons: Vec::new(),
            differences: Vec::new(),
            disturbance: Default::default(),
            ci_method: String::new(),
            description: String::new(),
            host: HostManifest {
                cpu_model: "AMD EPYC 9B14".into(),
                host_cpus: 2,
                kernel_release: "6.18.0".into(),
                kvm_flavour: "pvm".into(),
                nested: true,
                module_params: BTreeMap::from([("kvm.halt_poll_ns".into(), "0".into())]),
                tsc_khz: 2_450_000,
                kvm_api_version: 12,
                capabilities: BTreeMap::from([("KVM_CAP_BINARY_STATS_FD".into(), 1)]),
                max_vcpus: 1024,
                recommended_vcpus: 2,
                irqchip_modes: vec!["userspace".into()],
                vcpu_pinning: true,
                warnings: vec!["host has 2 CPUs: 4-vCPU phases are oversubscribed".into()],
            },
            results: vec![popf, pv, lock, insn, odd],
            failures: vec![PhaseFailure {
                name: "strategies/sti-hlt/n0/none/1v".into(),
                error: "guest triple fault".into(),
            }],
        }
    }

    #[test]
    fn table_has_every_result_units_and_sections() {
        let report = sample_report();
        let table = render_table(&report);
        for r in &report.results {
            assert!(table.contains(&r.name), "{} missing:\n{table}", r.name);
        }
        for unit in [
            "cycles/op",
            "exits/op",
            "uexits/op",
            "cycles/insn",
            "exits/insn",
        ] {
            assert!(table.contains(unit), "{unit} missing:\n{table}");
        }
        assert!(table.contains("spins/op") && table.contains("ops/s"));
        assert!(table.contains("exits per op by KVM stat"));
        assert!(table.contains("io_exits=1.500"));
        assert!(table.contains("exit sites") && table.contains("popfq"));
        assert!(table.contains("failures (1)") && table.contains("guest triple fault"));
        assert!(table.starts_with("host: AMD EPYC 9B14 (2 CPUs), kernel 6.18.0, KVM pvm (nested)"));
        assert!(table.contains("warning: host has 2 CPUs"));
        for line in table.lines() {
            assert!(line.chars().count() <= TABLE_WIDTH, "too wide: {line}");
        }
    }

    #[test]
    fn print_samples() {
        // `cargo test print_samples -- --nocapture` shows what a person sees.
        let a = sample_report();
        let mut b = a.clone();
        b.results[0].cycles_per_op = summary(8800.0, 50.0, 0.005);
        b.results.remove(3);
        println!("{}", render_table(&a));
        println!("{}", render_compare(&compare(&a, &b), false));
        println!("{}", render_compare(&compare(&a, &b), true));
        println!("{}", render_markdown(&a));
    }

    #[test]
    fn noisy_rows_are_flagged_with_a_legend() {
        let table = render_table(&sample_report());
        let row = table
            .lines()
            .find(|l| l.contains("pv-irq "))
            .expect("pv-irq row");
        assert!(row.contains("38.2~") || row.contains("38.3~"), "{row}");
        assert!(table.contains("~ noisy"));
        let quiet = table.lines().find(|l| l.contains("native-popf ")).unwrap();
        assert!(!quiet.contains('~'), "{quiet}");
    }

    #[test]
    fn partial_runs_say_so() {
        let mut report = sample_report();
        report.partial = true;
        report.partial_reason = Some("SIGINT".into());
        assert!(host_header(&report).contains("PARTIAL: SIGINT"));
    }

    #[test]
    fn number_formats() {
        assert_eq!(fmt_rate(0.0), "0");
        assert_eq!(fmt_rate(2.0), "2.000");
        assert_eq!(fmt_rate(0.012_345), "0.01235");
        assert_eq!(fmt_rate(1234.5), "1234"); // 4 significant digits, banker-free rounding
        assert_eq!(fmt_rate(9.99996), "10.00");
        assert_eq!(fmt_rate(0.000_123_4), "1.234e-4");
        assert_eq!(fmt_count(999), "999");
        assert_eq!(fmt_count(12_345), "12.3k");
        assert_eq!(fmt_count(5_000_000), "5.00M");
        assert_eq!(fmt_fraction(0.5), "0.5");
        assert_eq!(fmt_fraction(0.0), "0");
        assert_eq!(ellipsize("abcdefghij", 7), "abc…hij");
        assert_eq!(common_dir_prefix(&["a/b/c", "a/b/d", "a/bx"]), "a/");
        assert_eq!(common_dir_prefix(&["a/b/c"]), "a/b/");
        assert_eq!(common_dir_prefix(&["ab", "ac"]), "");
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(compact_timestamp(1_700_000_000), "20231114-221320");
    }

    #[test]
    fn csv_has_header_rows_and_quoting() {
        let report = sample_report();
        let dir = scratch_dir("csv");
        let path = dir.join("r.csv");
        write_csv(&report, &path).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + report.results.len());
        assert!(lines[0].starts_with(
            "name,kind,strategy,irq_source,nesting,vcpus,body_ops,iterations,ops,repeats,\
             cycles_median,cycles_p5,cycles_p95,cycles_cv,noisy,ops_per_sec_median,interrupts,\
             hypercalls,if_violations,exits_per_op,"
        ));
        assert!(lines[0].contains(",stat:exits,") && lines[0].contains("uexit:io-out"));
        assert!(text.contains("\"odd, name \"\"quoted\"\"\",mixed,"));
        let columns = lines[0].split(',').count();
        // The row without commas inside fields has exactly as many fields as the header.
        assert_eq!(lines[1].split(',').count(), columns);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn json_roundtrips() {
        let report = sample_report();
        let dir = scratch_dir("json");
        let path = dir.join("r.json");
        write_json(&report, &path).unwrap();
        assert_eq!(read_json(&path).unwrap(), report);
        // No temporary file is left beside it.
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn read_json_rejects_other_schemas_and_bad_json_naming_the_file() {
        let dir = scratch_dir("badjson");
        let mut report = sample_report();
        report.schema = "irqbench-results/2".into();
        let v2 = dir.join("v2.json");
        write_json(&report, &v2).unwrap();
        let err = read_json(&v2).unwrap_err();
        assert!(matches!(err, ReportError::Schema { .. }), "{err:?}");
        assert!(err.to_string().contains("v2.json"), "{err}");
        assert!(err.to_string().contains("irqbench-results/2"), "{err}");

        report.schema = "irqbench-results/10".into();
        write_json(&report, &v2).unwrap();
        assert!(matches!(
            read_json(&v2).unwrap_err(),
            ReportError::Schema { .. }
        ));

        let bad = dir.join("bad.json");
        fs::write(
            &bad,
            "{\n  \"schema\": \"irqbench-results/1\",\n  oops\n}\n",
        )
        .unwrap();
        let err = read_json(&bad).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("bad.json:3:3"), "{msg}");
        assert!(std::error::Error::source(&err).is_some());

        let missing = dir.join("missing.json");
        assert!(read_json(&missing)
            .unwrap_err()
            .to_string()
            .contains("missing.json"));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn results_dirs_are_never_reused() {
        let base = scratch_dir("dirs");
        let a = new_results_dir(&base, "quick").unwrap();
        let b = new_results_dir(&base, "quick").unwrap();
        let c = OutputDir::create(&base, "quick").unwrap();
        assert_ne!(a, b);
        assert_ne!(b, c.path());
        assert!(a.is_dir() && b.is_dir() && c.path().is_dir());
        let name = a.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("quick-20") && name.len() == "quick-YYYYmmdd-HHMMSS".len());
        let odd = new_results_dir(&base, "../x y").unwrap();
        assert_eq!(odd.parent(), Some(base.as_path()));
        c.write_all(&sample_report()).unwrap();
        assert!(c.json().is_file() && c.svg().is_file() && c.markdown().is_file());
        fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn compare_with_itself_is_all_within_noise() {
        let report = sample_report();
        let c = compare(&report, &report);
        assert!(!c.rows.is_empty());
        assert!(c
            .rows
            .iter()
            .all(|r| !r.beyond_noise && r.change_pct == 0.0));
        assert!(c.only_in_a.is_empty() && c.only_in_b.is_empty() && c.host_differs.is_empty());
        assert!(render_compare(&c, false).contains("(within noise)"));
    }

    #[test]
    fn compare_flags_a_real_change() {
        let a = sample_report();
        let mut b = a.clone();
        b.results[0].cycles_per_op = summary(8800.0, 50.0, 0.005);
        b.results[0].exits_per_op.insert("exits".into(), 1.0);
        b.host.kernel_release = "6.19.0".into();
        let c = compare(&a, &b);
        let row = c
            .rows
            .iter()
            .find(|r| r.name == a.results[0].name && r.metric == "cycles/op")
            .unwrap();
        assert!(row.beyond_noise);
        assert!((row.change_pct - (8800.0 - 7500.0) / 7500.0 * 100.0).abs() < 1e-9);
        let exits = c
            .rows
            .iter()
            .find(|r| r.name == a.results[0].name && r.metric == "exits/op")
            .unwrap();
        assert!(exits.beyond_noise && (exits.change_pct + 50.0).abs() < 1e-9);
        assert_eq!(c.host_differs, ["kernel_release: 6.18.0 --> 6.19.0"]);
        let text = render_compare(&c, false);
        let line = text
            .lines()
            .find(|l| l.contains("cycles/op") && l.contains("native-popf"))
            .unwrap();
        assert_eq!(
            line.split_whitespace().collect::<Vec<_>>().join(" "),
            "strategies/native-popf/n0/none/1v cycles/op 7500.0 --> 8800.0 (+17.3%) beyond noise"
        );

        // Faster is flagged too, with a negative sign.
        let c = compare(&b, &a);
        let row = c.rows.iter().find(|r| r.metric == "cycles/op").unwrap();
        assert!(row.beyond_noise && row.change_pct < 0.0);
    }

    #[test]
    fn the_noise_test_follows_welch_and_the_drift_floor() {
        let s = |samples: &[f64]| Summary::from_samples(samples);
        // Three tight repeats each, 10% apart: t = 100 / sqrt(2 * 1.2533^2 * 1 / 3) >> 9.9.
        let a = s(&[999.0, 1000.0, 1001.0]);
        let b = s(&[1099.0, 1100.0, 1101.0]);
        assert!(summary_row("x", "m", &a, &b, 5.0).beyond_noise);
        // The same 10% with spread as large as the change: not resolvable from three repeats.
        let wide_a = s(&[900.0, 1000.0, 1100.0]);
        let wide_b = s(&[1000.0, 1100.0, 1200.0]);
        assert!(!summary_row("x", "m", &wide_a, &wide_b, 5.0).beyond_noise);
        // Below the drift floor nothing is claimed, however tight.
        let c = s(&[1029.9, 1030.0, 1030.1]);
        assert!(!summary_row("x", "m", &a, &c, 5.0).beyond_noise);
        assert!(summary_row("x", "m", &a, &c, 1.0).beyond_noise);
        // One repeat: no claim.
        let one = s(&[2000.0]);
        assert!(!summary_row("x", "m", &one, &one, 0.0).beyond_noise);
    }

    #[test]
    fn compare_lists_results_of_only_one_run() {
        let a = sample_report();
        let mut b = a.clone();
        let gone = b.results.remove(1);
        b.results.push(result(
            "strategies/new/n0/none/1v",
            "strategy",
            "new",
            5.0,
            0.0,
        ));
        let c = compare(&a, &b);
        assert_eq!(c.only_in_a, [gone.name]);
        assert_eq!(c.only_in_b, ["strategies/new/n0/none/1v"]);
        let text = render_compare(&c, true);
        assert!(text.contains("only in the new run: `strategies/new/n0/none/1v`"));
        assert!(text.contains("|---"));
    }

    #[test]
    fn svg_is_an_svg_with_labels() {
        let report = sample_report();
        let dir = scratch_dir("svg");
        let path = dir.join("r.svg");
        write_svg(&report, &path).unwrap();
        let svg = fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"));
        for r in &report.results {
            let label = ellipsize(&r.name, SVG_LABEL_CHARS)
                .replace('&', "&amp;")
                .replace('"', "&quot;");
            assert!(svg.contains(&label), "{label} missing");
        }
        assert!(svg.contains("irqbench quick"));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn markdown_has_tables() {
        let md = render_markdown(&sample_report());
        assert!(md.contains("|---"));
        assert!(md.contains("- **CPU:** AMD EPYC 9B14 (2 CPUs)"));
        assert!(md.contains("## Exits per op by KVM stat"));
        assert!(md.contains("`strategies/native-popf/n0/none/1v`"));
    }
}

// ---------------------------------------------------------------------------------------------
// Scaling (the 2018 epoll mail): strategy A against strategy B per vCPU count.

/// One line of the scaling table: `vcpus  A ops/s  B ops/s  change  verdict`.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalingRow {
    /// The bench and interrupt load the pair was measured under.
    pub group: String,
    pub a: String,
    pub b: String,
    pub vcpus: u32,
    /// Medians of ops/s over the repeats.
    pub a_ops_per_sec: f64,
    pub b_ops_per_sec: f64,
    /// (b - a) / a, in percent, from the medians above.
    pub change_pct: f64,
    pub beyond_noise: bool,
}

/// Pairs the lock results of each bench and interrupt load: strategies in the order the config
/// lists them, taken two by two (A = irqsave-like, B = its replacement), one row per vCPU count.
pub fn scaling_rows(report: &RunReport) -> Vec<ScalingRow> {
    let mut groups: Vec<(String, Vec<&PhaseResult>)> = Vec::new();
    for r in report
        .results
        .iter()
        .filter(|r| r.kind == crate::results::ResultKind::Lock)
    {
        let bench = r.name.split('/').next().unwrap_or(&r.name);
        let key = format!("{bench} / {}", r.irq_source);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(r),
            None => groups.push((key, vec![r])),
        }
    }
    let mut rows = Vec::new();
    for (group, results) in groups {
        let mut strategies: Vec<&str> = Vec::new();
        for r in &results {
            if !strategies.contains(&r.strategy.as_str()) {
                strategies.push(&r.strategy);
            }
        }
        for pair in strategies.chunks(2) {
            let [a, b] = pair else { continue };
            let mut vcpus: Vec<u32> = results.iter().map(|r| r.vcpus).collect();
            vcpus.sort_unstable();
            vcpus.dedup();
            for n in vcpus {
                let find = |s: &str| {
                    results
                        .iter()
                        .find(|r| r.strategy == s && r.vcpus == n && r.nesting == 0.0)
                        .or_else(|| results.iter().find(|r| r.strategy == s && r.vcpus == n))
                };
                let (Some(ra), Some(rb)) = (find(a), find(b)) else {
                    continue;
                };
                let judged = summary_row(
                    "",
                    "ops/s",
                    &ra.ops_per_sec,
                    &rb.ops_per_sec,
                    DEFAULT_MIN_CHANGE_PCT,
                );
                rows.push(ScalingRow {
                    group: group.clone(),
                    a: a.to_string(),
                    b: b.to_string(),
                    vcpus: n,
                    a_ops_per_sec: ra.ops_per_sec.median,
                    b_ops_per_sec: rb.ops_per_sec.median,
                    change_pct: judged.change_pct,
                    beyond_noise: judged.beyond_noise,
                });
            }
        }
    }
    rows
}

/// The table as the 2018 mail showed it ("1 vCPU  7500 --> 8800 ops/s (+17%)"), per pair.
pub fn render_scaling(report: &RunReport) -> String {
    let rows = scaling_rows(report);
    let mut out = String::new();
    let mut last = String::new();
    for r in &rows {
        let header = format!("{}: {} (A) vs {} (B)", r.group, r.a, r.b);
        if header != last {
            let _ = writeln!(out, "\n{header}");
            let _ = writeln!(
                out,
                "  {:>5}  {:>12}  {:>12}  {:>8}  verdict",
                "vCPUs", "A ops/s", "B ops/s", "change"
            );
            last = header;
        }
        let _ = writeln!(
            out,
            "  {:>5}  {:>12.0}  {:>12.0}  {:>+7.1}%  {}",
            r.vcpus,
            r.a_ops_per_sec,
            r.b_ops_per_sec,
            r.change_pct,
            if r.beyond_noise {
                "beyond noise"
            } else {
                "(within noise)"
            }
        );
    }
    if !out.is_empty() {
        out.insert_str(
            0,
            "\nscaling: total ops/s over all vCPUs (median of repeats); change = (B - A) / A",
        );
    }
    out
}

/// Mixed phases: overall throughput, and per strategy the operations the guest counted and the
/// userspace exits attributed to that strategy's code.
pub fn render_mixed(report: &RunReport) -> String {
    let mut out = String::new();
    for r in report.results.iter().filter(|r| !r.strategy_ops.is_empty()) {
        if out.is_empty() {
            out.push_str("\nmixed phases (per strategy: guest-counted ops, attributed exits)\n");
        }
        let total: u64 = r.strategy_ops.values().sum();
        let _ = writeln!(
            out,
            "  {}: {} ops/s overall (median)",
            r.name,
            fmt_count(r.ops_per_sec.median as u64)
        );
        for (strategy, ops) in &r.strategy_ops {
            let exits: u64 = r
                .exit_sites
                .iter()
                .filter(|s| s.strategy == *strategy)
                .map(|s| s.count)
                .sum();
            let _ = writeln!(
                out,
                "    {strategy:<16} {:>8} ops ({:>5.1}%)  {exits} exits",
                ops,
                *ops as f64 * 100.0 / total.max(1) as f64
            );
        }
    }
    out
}

/// How evenly the vCPUs progressed: (max - min) / mean of their own ops/s.
pub fn vcpu_spread(per_vcpu_ops_per_sec: &[f64]) -> f64 {
    if per_vcpu_ops_per_sec.is_empty() {
        return 0.0;
    }
    let max = per_vcpu_ops_per_sec
        .iter()
        .copied()
        .fold(f64::MIN, f64::max);
    let min = per_vcpu_ops_per_sec
        .iter()
        .copied()
        .fold(f64::MAX, f64::min);
    let mean = per_vcpu_ops_per_sec.iter().sum::<f64>() / per_vcpu_ops_per_sec.len() as f64;
    if mean == 0.0 {
        0.0
    } else {
        (max - min) / mean
    }
}
