//! A run in the formats CI dashboards read: Bencher's Metric Format and github-action-benchmark's
//! `customSmallerIsBetter`. Each row is one benchmark; a row without kept rounds has no figure
//! and is left out (and named, so the caller can say so).

use serde_json::{json, Map, Value};

use crate::results::{Estimate, PhaseResult, RunReport};

/// The dashboards irqbench writes for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// Bencher Metric Format: `{"<row>": {"cycles_per_op": {"value", "lower_value",
    /// "upper_value"}, "exits_per_op": {…}}}`.
    Bencher,
    /// github-action-benchmark `customSmallerIsBetter`: `[{"name", "unit", "value", "range",
    /// "extra"}]`.
    GithubBenchmark,
}

impl ExportFormat {
    pub const ALL: [ExportFormat; 2] = [ExportFormat::Bencher, ExportFormat::GithubBenchmark];

    /// As written in `--export NAME=PATH`.
    pub fn name(self) -> &'static str {
        match self {
            ExportFormat::Bencher => "bencher",
            ExportFormat::GithubBenchmark => "github-benchmark",
        }
    }

    pub fn from_name(name: &str) -> Option<ExportFormat> {
        ExportFormat::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// A rendered export and the rows it left out for having no figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Export {
    pub text: String,
    pub left_out: Vec<String>,
}

/// A row has a figure when rounds were kept and the median has an interval around it (a row
/// of under 6 rounds has a median but no CI, and a dashboard is given no figure without one).
fn has_data(r: &PhaseResult) -> bool {
    r.rounds > 0 && !r.cycles_per_op.samples.is_empty() && r.cycles_per_op.ci95.is_some()
}

fn bencher(rows: &[&PhaseResult]) -> Value {
    let mut out = Map::new();
    for r in rows {
        let mut measures = Map::new();
        if let Some(Estimate {
            point,
            ci: Some(ci),
        }) = r.cycles_per_op.estimate()
        {
            measures.insert(
                format!("cycles_per_{}", r.kind.unit()),
                json!({"value": point, "lower_value": ci.lo, "upper_value": ci.hi}),
            );
        }
        if let Some(e) = r.counts.get(crate::results::EXITS_STAT) {
            let (exits, lo, hi) = (e.per_op, e.ci95.lo, e.ci95.hi);
            measures.insert(
                format!("exits_per_{}", r.kind.unit()),
                json!({"value": exits, "lower_value": lo, "upper_value": hi}),
            );
        }
        out.insert(r.name.clone(), Value::Object(measures));
    }
    Value::Object(out)
}

fn github_benchmark(rows: &[&PhaseResult]) -> Value {
    let entries: Vec<Value> = rows
        .iter()
        .filter_map(|r| {
            let (median, ci) = (r.cycles_per_op.median, r.cycles_per_op.ci95?);
            Some(json!({
                "name": format!("{} cycles/{}", r.name, r.kind.unit()),
                "unit": "cycles",
                "value": median,
                "range": format!("±{}", trim(ci.half_width(median))),
                "extra": format!(
                    "95% CI [{}, {}], {} rounds",
                    trim(ci.lo),
                    trim(ci.hi),
                    r.rounds
                ),
            }))
        })
        .collect();
    Value::Array(entries)
}

/// A figure with the digits a dashboard shows (no exponent, no trailing zeros).
fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// `report` as `format`, pretty JSON with a trailing newline.
pub fn render_export(report: &RunReport, format: ExportFormat) -> Export {
    let (rows, left_out): (Vec<&PhaseResult>, Vec<&PhaseResult>) =
        report.results.iter().partition(|r| has_data(r));
    let value = match format {
        ExportFormat::Bencher => bencher(&rows),
        ExportFormat::GithubBenchmark => github_benchmark(&rows),
    };
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| "null".into());
    text.push('\n');
    Export {
        text,
        left_out: left_out.into_iter().map(|r| r.name.clone()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::rounds;
    use crate::results::ResultKind;

    fn row(name: &str, median: f64, exits: Option<(f64, [f64; 2])>) -> PhaseResult {
        let mut r = PhaseResult {
            name: name.into(),
            kind: ResultKind::Strategy,
            rounds: 40,
            cycles_per_op: rounds(median, median * 0.01, 40),
            ..Default::default()
        };
        if let Some((m, ci)) = exits {
            let e = crate::results::CountEstimate {
                per_op: m,
                ci95: ci.into(),
                ..Default::default()
            };
            r.counts.insert("exits".into(), e);
        }
        r
    }

    fn report() -> RunReport {
        let mut empty = row("quick/n0/none/1v/native-skip", 0.0, None);
        empty.rounds = 0;
        empty.cycles_per_op = Default::default();
        RunReport {
            results: vec![
                row(
                    "quick/n0/none/1v/native-popf",
                    14794.0,
                    Some((0.25, [0.22, 0.28])),
                ),
                row("quick/n0/none/1v/pvop-skip", 37180.0, None),
                empty,
            ],
            ..Default::default()
        }
    }

    #[test]
    fn bencher_metric_format_has_value_and_bounds_per_measure() {
        let e = render_export(&report(), ExportFormat::Bencher);
        assert_eq!(e.left_out, ["quick/n0/none/1v/native-skip"]);
        let v: Value = serde_json::from_str(&e.text).expect("JSON");
        let obj = v.as_object().expect("an object of benchmarks");
        assert_eq!(obj.len(), 2, "the row without data is left out");
        for (name, measures) in obj {
            let m = measures.as_object().expect("an object of measures");
            assert!(m.contains_key("cycles_per_op"), "{name}");
            for (slug, fig) in m {
                let f = fig.as_object().expect("a metric");
                let (val, lo, hi) = (
                    f["value"].as_f64().expect("value"),
                    f["lower_value"].as_f64().expect("lower_value"),
                    f["upper_value"].as_f64().expect("upper_value"),
                );
                assert!(lo <= val && val <= hi, "{name} {slug}: {lo} {val} {hi}");
                assert_eq!(f.len(), 3, "{name} {slug}: only the three keys");
            }
        }
        let popf = &obj["quick/n0/none/1v/native-popf"]["exits_per_op"];
        assert_eq!(popf["value"].as_f64(), Some(0.25));
        assert!(obj["quick/n0/none/1v/pvop-skip"]
            .get("exits_per_op")
            .is_none());
    }

    #[test]
    fn github_benchmark_is_custom_smaller_is_better() {
        let e = render_export(&report(), ExportFormat::GithubBenchmark);
        let v: Value = serde_json::from_str(&e.text).expect("JSON");
        let entries = v.as_array().expect("an array");
        assert_eq!(entries.len(), 2);
        for entry in entries {
            let o = entry.as_object().expect("an object");
            let mut keys: Vec<&str> = o.keys().map(String::as_str).collect();
            keys.sort_unstable();
            assert_eq!(keys, ["extra", "name", "range", "unit", "value"]);
            assert!(o["name"].as_str().expect("name").ends_with(" cycles/op"));
            assert_eq!(o["unit"], "cycles");
            assert!(o["value"].as_f64().expect("a number") > 0.0);
            assert!(o["range"].as_str().expect("range").starts_with('±'));
            let extra = o["extra"].as_str().expect("extra");
            assert!(
                extra.starts_with("95% CI [") && extra.ends_with(", 40 rounds"),
                "{extra}"
            );
        }
    }

    #[test]
    fn formats_are_named_as_the_flag_writes_them() {
        for f in ExportFormat::ALL {
            assert_eq!(ExportFormat::from_name(f.name()), Some(f));
        }
        assert_eq!(ExportFormat::from_name("csv"), None);
        assert_eq!(trim(-0.0001), "0");
        assert_eq!(trim(98.5), "98.5");
    }
}
