//! The results JSON: what `compare` reads back, so reading is strict about the schema and
//! bounded in size.

use std::path::Path;

use serde::Deserialize;

use crate::results::{RunReport, SCHEMAS_READ};

use super::ReportError;

/// Pretty JSON with a trailing newline; numbers as measured, never rounded.
pub fn to_json(report: &RunReport) -> Result<String, serde_json::Error> {
    let mut text = serde_json::to_string_pretty(report)?;
    text.push('\n');
    Ok(text)
}

/// Only the schema, so a file of another version is refused before its fields confuse serde.
#[derive(Debug, Deserialize)]
struct SchemaProbe {
    #[serde(default)]
    schema: Option<String>,
}

/// `schema` is `known` or a minor revision of it (`irqbench-results/2.1`); not `/20`.
fn schema_is(schema: &str, known: &str) -> bool {
    schema
        .strip_prefix(known)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// A schema we read, or a minor revision of one.
fn schema_supported(schema: &str) -> bool {
    SCHEMAS_READ.iter().any(|known| schema_is(schema, known))
}

/// Reads a results file of any schema in [`SCHEMAS_READ`]; keys an older schema lacks take
/// their defaults (a v1 file has no CIs: its absent `ci95` becomes NaN, no CI, in
/// [`forget_v1_cis`]).
pub fn read_json(path: &Path) -> Result<RunReport, ReportError> {
    let text = crate::files::read::read_text_to_parse(
        path,
        crate::files::read::MAX_RESULTS_BYTES,
        "results JSON",
        crate::files::read::RESULTS_MEMORY_PER_BYTE,
    )?;
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
    let mut report: RunReport = serde_json::from_str(&text).map_err(parse_err)?;
    mark_rows_without_data(&mut report);
    forget_v1_cis(&mut report);
    check_figures(&report).map_err(|(field, value, why)| ReportError::Implausible {
        path: path.to_owned(),
        field,
        value,
        why,
    })?;
    Ok(report)
}

/// `irqbench-results/1` or one of its minor versions (`/1.1`), not `/10`.
fn is_v1(schema: &str) -> bool {
    schema_is(schema, "irqbench-results/1")
}

/// A v1 file has no CIs: its `ci95` fields are absent and read as `[0, 0]`, which with 60
/// repeats (the v1 `soak` config) would pass for an interval around 0. They become "no CI"
/// (NaN), so its rows are judged by Welch's test on their samples.
pub(crate) fn forget_v1_cis(report: &mut RunReport) {
    if !is_v1(&report.schema) {
        return;
    }
    for r in &mut report.results {
        for s in r.summaries_mut() {
            s.ci95 = [f64::NAN; 2];
        }
        r.cycles_per_loop.ci95 = [f64::NAN; 2];
    }
}

/// Files written before figures without data were `null` hold `0` for them: a row of a
/// rounds-based file (schema 2 on) with no rounds and no samples had no data.
fn mark_rows_without_data(report: &mut RunReport) {
    if is_v1(&report.schema) {
        return;
    }
    for r in &mut report.results {
        if r.rounds == 0 && r.cycles_per_op.samples.is_empty() && r.cycles_per_op.has_data() {
            for s in r.summaries_mut() {
                *s = crate::results::Summary::no_data();
            }
        }
    }
}

/// No measured figure comes near this (cycles of a 12 h block are about 1e14).
const MAX_MAGNITUDE: f64 = 1e15;

type Implausible = (String, String, &'static str);

/// A figure as an error shows it: exponent notation beyond the plausible range, so a damaged
/// 1e300 reads as that and not as 300 digits.
fn compact(x: f64) -> String {
    if x.is_finite() && x.abs() > MAX_MAGNITUDE {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// A median and its CI as a run writes them: finite, in range, the CI around the median. A v1
/// file's `ci95` of `[0, 0]` with no samples means "no CI" and is accepted, as is `null` (a
/// figure from too few rounds for a CI): then only the median is checked.
fn check_interval(
    field: String,
    median: f64,
    ci: [f64; 2],
    non_negative: bool,
) -> Result<(), Implausible> {
    if ci.iter().all(|b| b.is_nan()) {
        return check_interval(field, median, [median; 2], non_negative);
    }
    let shown = || {
        format!(
            "{} [{}, {}]",
            compact(median),
            compact(ci[0]),
            compact(ci[1])
        )
    };
    if ![median, ci[0], ci[1]].iter().all(|x| x.is_finite()) {
        return Err((field, shown(), "not a finite number"));
    }
    if [median, ci[0], ci[1]]
        .iter()
        .any(|x| x.abs() > MAX_MAGNITUDE)
    {
        return Err((field, shown(), "beyond any measurement (above 1e15)"));
    }
    if non_negative && [median, ci[0], ci[1]].iter().any(|x| *x < 0.0) {
        return Err((field, shown(), "below zero, which this figure cannot be"));
    }
    if ci == [0.0, 0.0] {
        return Ok(());
    }
    // A little slack for the rounding of numbers written by another build.
    let slack = 1e-9 * median.abs().max(1.0);
    if ci[0] > ci[1] + slack {
        return Err((
            field,
            shown(),
            "the CI is inverted (its lower end above its upper)",
        ));
    }
    if median < ci[0] - slack || median > ci[1] + slack {
        return Err((field, shown(), "the median lies outside its own CI"));
    }
    Ok(())
}

/// Every figure `compare`, `check` and `history` read, checked before any of them is used.
fn check_figures(report: &RunReport) -> Result<(), Implausible> {
    for (i, r) in report.results.iter().enumerate() {
        let at = |what: &str| format!("results[{i}] ({}).{what}", r.name);
        for (what, s, non_negative) in [
            ("cycles_per_op", &r.cycles_per_op, false),
            ("ns_per_op", &r.ns_per_op, false),
            ("baseline_cycles", &r.baseline_cycles, true),
            ("raw_cycles_per_op", &r.raw_cycles_per_op, true),
            ("ops_per_sec", &r.ops_per_sec, true),
            ("cycles_per_loop", &r.cycles_per_loop, false),
            ("baseline_ns", &r.baseline_ns, true),
        ] {
            // No figure (no kept rounds) is written as null: nothing to check.
            if s.has_data() {
                check_interval(at(what), s.median, s.ci95, non_negative)?;
            }
        }
        for (name, e) in &r.counts {
            // A stat of a file written before `counts` may have no CI (null): its mean is
            // still checked.
            let what = at(&format!("counts.{name}"));
            if crate::statistics::is_interval(e.ci95) {
                check_interval(what, e.per_op, e.ci95, false)?;
            } else if !e.per_op.is_finite() || e.per_op.abs() > MAX_MAGNITUDE {
                return Err((
                    what,
                    compact(e.per_op),
                    "not a finite number of events per op",
                ));
            }
        }
        if !(0.0..=1.0).contains(&r.disturbed_fraction) {
            return Err((
                at("disturbed_fraction"),
                r.disturbed_fraction.to_string(),
                "a fraction must lie in 0..=1",
            ));
        }
    }
    for (i, c) in report.comparisons.iter().enumerate() {
        let field = format!("comparisons[{i}] ({} vs {}).ratio", c.b, c.a);
        // A per-round ratio of nets near zero can itself be below zero: only the shape is
        // checked. A comparison without a ratio (no paired rounds) has null.
        if c.ratio.median.is_finite() {
            check_interval(field, c.ratio.median, c.ratio.ci95, false)?;
        }
    }
    Ok(())
}
