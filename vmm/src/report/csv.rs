//! CSV: every column of the shared spec with raw (unrounded) numbers, then one column per KVM
//! stat (`stat:`) and userspace exit reason (`uexit:`) seen in any result: its net per-op
//! figure from the row's `counts`.

use std::collections::BTreeSet;

use crate::results::exits::vmm_count_key;
use crate::results::{HandledBy, PhaseResult, RunReport};

use super::columns::COLUMNS;
use super::format::raw_number;

/// RFC 4180 quoting: only when needed, so plain cells stay greppable. A cell keeps its text
/// exactly (CSV has no escape for a control character); stdout shows such a character escaped.
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

/// The VMM's exit reasons any row took, sorted.
fn exit_reason_names(report: &RunReport) -> Vec<&str> {
    let keys: BTreeSet<&str> = report
        .results
        .iter()
        .flat_map(|r| &r.exit_reasons)
        .filter(|e| e.handled_by == HandledBy::Vmm)
        .map(|e| e.reason.as_str())
        .collect();
    keys.into_iter().collect()
}

/// The KVM stats any row counted, sorted.
pub(crate) fn kvm_stat_names(report: &RunReport) -> Vec<&str> {
    let keys: BTreeSet<&str> = report
        .results
        .iter()
        .flat_map(|r| crate::results::kvm_stats(&r.counts).map(|(name, _)| name))
        .collect();
    keys.into_iter().collect()
}

pub fn render_csv(report: &RunReport) -> String {
    let stats = kvm_stat_names(report);
    let uexits = exit_reason_names(report);
    let fields = || COLUMNS.iter().flat_map(|c| c.csv.iter());

    let mut out = String::new();
    let mut header: Vec<String> = fields().map(|(name, _)| name.to_string()).collect();
    header.extend(stats.iter().map(|s| format!("stat:{s}")));
    header.extend(uexits.iter().map(|s| format!("uexit:{s}")));
    csv_line(&mut out, &header);

    // A count absent from a result did not move in that phase: 0, not unknown.
    let get = |r: &PhaseResult, k: &str| raw_number(r.counts.get(k).map_or(0.0, |e| e.per_op));
    for r in &report.results {
        let mut row: Vec<String> = fields().map(|(_, value)| value(r)).collect();
        row.extend(stats.iter().map(|k| get(r, k)));
        row.extend(uexits.iter().map(|k| get(r, &vmm_count_key(k))));
        csv_line(&mut out, &row);
    }
    out
}
