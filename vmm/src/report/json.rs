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

/// A schema we read, or a minor revision of one (`irqbench-results/2.1`); not `/20`.
fn schema_supported(schema: &str) -> bool {
    SCHEMAS_READ.iter().any(|known| {
        schema
            .strip_prefix(known)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
    })
}

/// Reads a results file of any schema in [`SCHEMAS_READ`]; keys an older schema lacks take
/// their defaults (a v1 file has no CIs: `ci95` is `[0, 0]` and no summary has enough samples
/// for [`super::format::Estimate`] to use it).
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
    serde_json::from_str(&text).map_err(parse_err)
}
