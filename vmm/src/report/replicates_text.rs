//! The text report's lines about replicates (`run.replicates` > 1): how the CIs combine them,
//! and per row and comparison how far the VMs' estimates spread and how much of that spread is
//! between them.

use crate::results::{ReplicateSpread, RunReport};

/// One line for a figure's spread: the between-replicate share and each VM's estimate.
fn spread_line(what: &str, s: &ReplicateSpread) -> String {
    let share = if s.between_share.is_finite() {
        format!("{:.0}%", s.between_share * 100.0)
    } else {
        "? (a replicate had no CI)".into()
    };
    let estimates: Vec<String> = s
        .estimates
        .iter()
        .map(|e| crate::analysis::replicates::estimate_text(*e))
        .collect();
    format!(
        "  {what}: between-replicate share {share}; per VM {}",
        estimates.join(", ")
    )
}

/// The legend's lines for a replicated run; none for one VM per group.
pub(crate) fn legend(report: &RunReport) -> Vec<String> {
    if report.replicates <= 1 {
        return Vec::new();
    }
    let mut lines = vec![format!(
        "replicates: {} fresh VMs per group; every ± and CI above is the {}. \
         between-replicate share: of the spread of the VMs' estimates, the part their own CIs do \
         not explain (above 50%: the host moved between them).",
        report.replicates, report.replicate_ci_method
    )];
    for r in &report.results {
        if let Some(s) = &r.replicates {
            lines.push(spread_line(&format!("{} cycles/op", r.name), s));
        }
    }
    for c in &report.comparisons {
        if let Some(s) = &c.replicates {
            lines.push(spread_line(&format!("{} vs {} ratio", c.b, c.a), s));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::PhaseResult;

    #[test]
    fn a_replicated_run_names_its_method_and_each_rows_share() {
        let mut report = RunReport {
            replicates: 3,
            replicate_ci_method: "t interval".into(),
            ..Default::default()
        };
        assert!(legend(&RunReport::default()).is_empty());
        report.results.push(PhaseResult {
            name: "a".into(),
            replicates: Some(ReplicateSpread {
                estimates: vec![1.0, 1.5, 2000.4],
                between_share: 0.8,
                within_ci95: Some(crate::results::Ci::from([1.4, 1.6])),
            }),
            ..Default::default()
        });
        let lines = legend(&report);
        assert!(lines[0].starts_with("replicates: 3 fresh VMs"), "{lines:?}");
        assert!(lines[0].contains("the t interval."), "{lines:?}");
        assert_eq!(
            lines[1],
            "  a cycles/op: between-replicate share 80%; per VM 1.0000, 1.5000, 2000"
        );
    }
}
