//! Every results report these tests have the binary write is checked against the published
//! schema, docs/schema-4.json (each test file uses the parts it needs).
#![allow(dead_code)]

use std::path::Path;
use std::process::Output;
use std::sync::OnceLock;

const SCHEMA_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/schema-4.json");

fn validator() -> &'static jsonschema::Validator {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        let text = std::fs::read_to_string(SCHEMA_PATH).expect("docs/schema-4.json");
        let schema: serde_json::Value = serde_json::from_str(&text).expect("the schema is JSON");
        jsonschema::validator_for(&schema).expect("docs/schema-4.json is a JSON Schema")
    })
}

/// Panics naming `whence` and the first mismatches when `report` breaks the schema.
pub fn assert_matches_schema(report: &serde_json::Value, whence: &str) {
    let errors: Vec<String> = validator()
        .iter_errors(report)
        .take(10)
        .map(|e| format!("  at {}: {e}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{whence} does not match docs/schema-4.json:\n{}",
        errors.join("\n")
    );
}

/// `text` as a results report, if it is one (a test may leave other text where a report would
/// go, and a refused command writes none).
fn as_report(text: &str) -> Option<serde_json::Value> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let schema = value.get("schema")?.as_str()?;
    schema.starts_with("irqbench-results/").then_some(value)
}

/// The report at `path`, checked if there is one.
pub fn check_report_file(path: &Path) {
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    if let Some(report) = as_report(&text) {
        assert_matches_schema(&report, &path.display().to_string());
    }
}

/// Every report a command of `args` wrote: `--json FILE`, `--json -` (stdout) and the
/// `results.json` of each folder under `--out DIR`.
pub fn check_written_reports(args: &[&str], out: &Output) {
    for pair in args.windows(2) {
        match (pair[0], pair[1]) {
            ("--json", "-") => {
                if let Some(report) = as_report(&String::from_utf8_lossy(&out.stdout)) {
                    assert_matches_schema(&report, "stdout");
                }
            }
            ("--json", file) => check_report_file(Path::new(file)),
            ("--out", dir) => {
                let folders = std::fs::read_dir(dir).into_iter().flatten().flatten();
                for folder in folders {
                    check_report_file(&folder.path().join("results.json"));
                }
            }
            _ => {}
        }
    }
}
