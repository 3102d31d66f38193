//! CSV: every column of the shared spec with raw (unrounded) numbers, then one column per KVM
//! stat (`stat:`), VM-wide stat (`vmstat:`) and userspace exit reason (`uexit:`) seen in any
//! result.

use std::collections::{BTreeMap, BTreeSet};

use crate::results::{PhaseResult, RunReport};

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

pub(crate) fn union_keys<'a>(
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
    let vm_stats = union_keys(report, |r| &r.vm_stats_per_op);
    let uexits = union_keys(report, |r| &r.userspace_exits_per_op);
    let fields = || COLUMNS.iter().flat_map(|c| c.csv.iter());

    let mut out = String::new();
    let mut header: Vec<String> = fields().map(|(name, _)| name.to_string()).collect();
    header.extend(stats.iter().map(|s| format!("stat:{s}")));
    header.extend(vm_stats.iter().map(|s| format!("vmstat:{s}")));
    header.extend(uexits.iter().map(|s| format!("uexit:{s}")));
    csv_line(&mut out, &header);

    // A stat absent from a result did not move in that phase: 0, not unknown.
    let get = |m: &BTreeMap<String, f64>, k: &str| raw_number(m.get(k).copied().unwrap_or(0.0));
    for r in &report.results {
        let mut row: Vec<String> = fields().map(|(_, value)| value(r)).collect();
        row.extend(
            stats
                .iter()
                .map(|k| raw_number(r.counts.get(*k).map_or(0.0, |e| e.per_op))),
        );
        row.extend(vm_stats.iter().map(|k| get(&r.vm_stats_per_op, k)));
        row.extend(uexits.iter().map(|k| get(&r.userspace_exits_per_op, k)));
        csv_line(&mut out, &row);
    }
    out
}
