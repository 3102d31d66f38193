//! One pipeline: a library call of `measure::run_plan` and the CLI (`irqbench run --json`) give
//! the same answers for the same plan, on a real guest on /dev/kvm. Two runs measure different
//! figures; what was answered (each comparison, its conditions, its interactions and their
//! seeds) must not differ.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use irqbench::config::{self, Limits};
use irqbench::machine::image::GuestImage;
use irqbench::measure::run_plan;
use irqbench::session::RunOptions;
use serde_json::Value;

/// Two strategies in two conditions (nesting 0 and 0.5): one answer with a nesting interaction.
const CONFIG: &str = r#"name = "one-pipeline"
[run]
max_seconds = 0.3

[[bench]]
name = "p"
kind = "strategy"
strategies = ["native-popf", "native-skip"]
nesting = [0.0, 0.5]
irq = [{ source = "none" }]
"#;

/// What a run measured in its answers (ratios, deltas, rounds, and why a figure is missing);
/// the rest is what the plan asked and must be the same whoever ran it.
const MEASURED: [&str; 6] = [
    "ratio",
    "rounds",
    "precision_reached",
    "no_ratio",
    "delta_log",
    "no_estimate",
];

fn without_figures(report: &Value) -> Value {
    let mut answers = report["answers"].clone();
    for answer in answers.as_array_mut().expect("answers is a list") {
        for part in ["conditions", "interactions"] {
            for item in answer[part].as_array_mut().expect("a list") {
                let fields = item.as_object_mut().expect("an object");
                for key in MEASURED {
                    fields.remove(key);
                }
            }
        }
    }
    answers
}

#[test]
fn a_library_run_and_the_cli_give_the_same_answers() {
    let Some(kvm) = irqbench::host::test_kvm() else {
        return;
    };
    let plan = config::load_str(CONFIG, "one-pipeline.toml", &Limits::default()).expect("config");
    let image = Arc::new(GuestImage::embedded().expect("embedded guest"));
    let options = RunOptions::default();
    let library = run_plan(&kvm, &plan, &image, &options, &mut |_, _, _, _| {}).expect("run");
    let library: Value =
        serde_json::from_str(&irqbench::report::to_json(&library).expect("json")).expect("parse");

    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("one-pipeline.toml");
    std::fs::write(&config, CONFIG).expect("write config");
    let json = dir.path().join("r.json");
    let out = Command::new(env!("CARGO_BIN_EXE_irqbench"))
        .env(
            "XDG_DATA_HOME",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("one-pipeline-xdg"),
        )
        .args([
            "run",
            config.to_str().expect("utf-8"),
            "--no-save",
            "--json",
        ])
        .arg(&json)
        .output()
        .expect("spawn irqbench");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cli: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("results")).expect("parse");

    let answered = without_figures(&library);
    let answers = answered.as_array().expect("a list");
    assert_eq!(answers.len(), 1, "library run: {answered:#}");
    assert_eq!(answers[0]["conditions"].as_array().map(Vec::len), Some(2));
    assert_eq!(answers[0]["interactions"].as_array().map(Vec::len), Some(1));
    assert_eq!(answered, without_figures(&cli));
    assert_eq!(library["interaction_method"], cli["interaction_method"]);
}
