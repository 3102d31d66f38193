//! The results JSON: what `compare` reads back, so reading is strict about the schema and
//! bounded in size.

use std::path::Path;

use serde::Deserialize;

use crate::results::{Ci, RunReport, SCHEMA, SCHEMA_CONVERTED};

use super::ReportError;

/// Pretty JSON with a trailing newline; numbers as measured, never rounded.
pub fn to_json(report: &RunReport) -> Result<String, serde_json::Error> {
    let mut text = serde_json::to_string_pretty(report)?;
    text.push('\n');
    #[cfg(test)]
    tests::assert_matches_schema(&text);
    Ok(text)
}

/// Only the schema, so a file of another version is refused before its fields confuse serde.
#[derive(Debug, Deserialize)]
struct SchemaProbe {
    #[serde(default)]
    schema: Option<String>,
}

/// `schema` is `known` or a minor revision of it (`irqbench-results/4.1`); not `/40`.
fn schema_is(schema: &str, known: &str) -> bool {
    schema
        .strip_prefix(known)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// Reads a results file of [`SCHEMA`], or of [`SCHEMA_CONVERTED`] through [`convert_v3`].
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
    let report: RunReport = match probe.schema {
        Some(s) if schema_is(&s, SCHEMA) => serde_json::from_str(&text).map_err(parse_err)?,
        Some(s) if schema_is(&s, SCHEMA_CONVERTED) => {
            let old: serde_json::Value = serde_json::from_str(&text).map_err(parse_err)?;
            // A value read back is no longer at a line: errors name the row and field.
            serde_json::from_value(convert_v3(old)).map_err(parse_err)?
        }
        found => {
            return Err(ReportError::Schema {
                path: path.to_owned(),
                found: found.unwrap_or_else(|| "<none>".into()),
            })
        }
    };
    check_figures(&report).map_err(|(field, value, why)| ReportError::Implausible {
        path: path.to_owned(),
        field,
        value,
        why,
    })?;
    Ok(report)
}

/// A report as JSON text of [`SCHEMA`], or of [`SCHEMA_CONVERTED`] converted: how `history`
/// reads the reports it stored.
pub fn report_from_str(text: &str) -> Result<RunReport, serde_json::Error> {
    use serde::de::Error as _;
    let probe: SchemaProbe = serde_json::from_str(text)?;
    match probe.schema.as_deref() {
        Some(s) if schema_is(s, SCHEMA) => serde_json::from_str(text),
        Some(s) if schema_is(s, SCHEMA_CONVERTED) => {
            serde_json::from_value(convert_v3(serde_json::from_str(text)?))
        }
        found => Err(serde_json::Error::custom(format_args!(
            "schema {:?}: this irqbench reads {SCHEMA} and converts {SCHEMA_CONVERTED}",
            found.unwrap_or("<none>")
        ))),
    }
}

type Object = serde_json::Map<String, serde_json::Value>;

/// An `irqbench-results/3` report as schema 4 has it (docs/SCHEMA.md "From schema 3"): the
/// row views schema 4 dropped go, its gross counters move under `totals`, and an exit reason's,
/// exit site's or traced exit's `count` is its `total`. A VMM reason's per-op figure of /3 lacks the events schema 4's
/// `counts` carry, so it is left out (`exit_reasons` keeps its total).
pub fn convert_v3(mut report: serde_json::Value) -> serde_json::Value {
    let Some(top) = report.as_object_mut() else {
        return report;
    };
    top.insert("schema".into(), SCHEMA.into());
    let traced = top
        .get_mut("exit_trace")
        .and_then(|t| t.get_mut("groups"))
        .and_then(|g| g.as_object_mut());
    for exits in traced.into_iter().flat_map(|g| g.values_mut()) {
        for exit in exits.as_array_mut().into_iter().flatten() {
            rename_count_total(exit);
        }
    }
    let rows = top.get_mut("results").and_then(|r| r.as_array_mut());
    for row in rows.into_iter().flatten().filter_map(|r| r.as_object_mut()) {
        convert_v3_row(row);
    }
    report
}

/// Keys of a /3 row that only repeated `counts` or were gross per-op ratios.
const V3_DROPPED: [&str; 7] = [
    "exits_per_op",
    "exits_per_op_ci95",
    "stats_ci95",
    "exits_per_round",
    "userspace_exits_per_round",
    "userspace_exits_per_op",
    "vm_stats_per_op",
];

/// A /3 row's gross counters, now `totals`.
const V3_TOTALS: [&str; 5] = [
    "interrupts",
    "irqs_raised",
    "hypercalls",
    "hypercalls_seen_by_vmm",
    "if_violations",
];

fn convert_v3_row(row: &mut Object) {
    for key in V3_DROPPED {
        row.remove(key);
    }
    let totals: Object = V3_TOTALS
        .iter()
        .map(|k| (k.to_string(), row.remove(*k).unwrap_or(0.into())))
        .collect();
    row.insert("totals".into(), totals.into());
    if let Some(lock) = row.get_mut("lock").and_then(|l| l.as_object_mut()) {
        lock.remove("spins_per_op");
    }
    let reasons = row.get_mut("exit_reasons").and_then(|e| e.as_array_mut());
    for reason in reasons
        .into_iter()
        .flatten()
        .filter_map(|e| e.as_object_mut())
    {
        reason.remove("per_op");
        reason.remove("per_op_ci95");
    }
    for key in ["exit_reasons", "exit_sites"] {
        let entries = row.get_mut(key).and_then(|e| e.as_array_mut());
        for entry in entries.into_iter().flatten() {
            rename_count_total(entry);
        }
    }
    mark_row_without_data(row);
}

/// A /3 exit reason's, site's or traced exit's gross `count` is its `total`.
fn rename_count_total(entry: &mut serde_json::Value) {
    if let Some(entry) = entry.as_object_mut() {
        if let Some(count) = entry.remove("count") {
            entry.insert("total".into(), count);
        }
    }
}

/// /3 files written before figures without data were `null` hold `0` for them: a row with no
/// rounds and no samples had no data.
fn mark_row_without_data(row: &mut Object) {
    let no_rounds = row.get("rounds").and_then(|r| r.as_u64()) == Some(0);
    let no_samples = row
        .get("cycles_per_op")
        .and_then(|c| c.get("samples"))
        .and_then(|s| s.as_array())
        .is_some_and(|s| s.is_empty());
    if !(no_rounds && no_samples) {
        return;
    }
    let no_data = serde_json::to_value(crate::results::Summary::no_data()).unwrap_or_default();
    for key in crate::results::PhaseResult::SUMMARY_KEYS {
        row.insert(key.into(), no_data.clone());
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

/// A median and its CI as a run writes them: finite, in range, the CI around the median. No CI
/// (`null`, a figure from too few rounds for one) is accepted: then only the median is checked.
fn check_interval(
    field: String,
    median: f64,
    ci: Option<Ci>,
    non_negative: bool,
) -> Result<(), Implausible> {
    let ci: [f64; 2] = ci.map_or([median; 2], Into::into);
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
            check_interval(at(&format!("counts.{name}")), e.per_op, Some(e.ci95), false)?;
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
        if let Some(r) = c.ratio {
            check_interval(field, r.point, r.ci, false)?;
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::OnceLock;

    /// Where `report` breaks docs/schema-4.json (the first ten places).
    fn schema_errors(report: &serde_json::Value) -> Vec<String> {
        static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
        let validator = VALIDATOR.get_or_init(|| {
            let schema = include_str!("../../../docs/schema-4.json");
            let schema = serde_json::from_str(schema).expect("the schema is JSON");
            jsonschema::validator_for(&schema).expect("docs/schema-4.json is a JSON Schema")
        });
        validator
            .iter_errors(report)
            .take(10)
            .map(|e| format!("  at {}: {e}", e.instance_path()))
            .collect()
    }

    /// Every report the unit tests write matches docs/schema-4.json (but one of another
    /// schema, which a test writes to see it refused).
    pub(crate) fn assert_matches_schema(text: &str) {
        let report: serde_json::Value = serde_json::from_str(text).expect("a report is JSON");
        let schema = report["schema"].as_str().unwrap_or_default();
        if schema.starts_with("irqbench-results/") && !super::schema_is(schema, super::SCHEMA) {
            return;
        }
        let errors = schema_errors(&report);
        assert!(
            errors.is_empty(),
            "a report does not match docs/schema-4.json:\n{}",
            errors.join("\n")
        );
    }

    /// The schema refuses what schema 4 dropped: a /3 file as written, a legacy view of the
    /// counts, a CI of two nulls, a count without its CI.
    #[test]
    fn the_schema_refuses_the_views_schema_4_dropped() {
        let v3 = include_str!("../../tests/fixtures/results-v3.json");
        let v3: serde_json::Value = serde_json::from_str(v3).expect("JSON");
        assert!(!schema_errors(&v3).is_empty());
        let v4 = super::convert_v3(v3);
        assert_eq!(schema_errors(&v4), Vec::<String>::new());
        let broken: [fn(&mut serde_json::Value); 4] = [
            |r| r["results"][0]["exits_per_op"] = serde_json::json!({"exits": 1.0}),
            |r| r["results"][0]["cycles_per_op"]["ci95"] = serde_json::json!([null, null]),
            |r| r["results"][0]["counts"]["exits"]["ci95"] = serde_json::Value::Null,
            |r| r["results"][0]["totals"]["interrupts"] = serde_json::json!(-1),
        ];
        for (i, edit) in broken.iter().enumerate() {
            let mut r = v4.clone();
            edit(&mut r);
            assert!(!schema_errors(&r).is_empty(), "edit {i} passed");
        }
    }
}
