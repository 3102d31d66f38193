//! The answers section end to end: a real run on /dev/kvm over nesting [0, 0.5] × irq [none,
//! inject 1 kHz] prints each default pair in every condition and the load interaction with
//! its CI, in the text, the Markdown and the JSON's `answers[]`, and draws them in the forest
//! plot.

mod common;

use std::path::Path;
use std::process::Command;

fn kvm_or_skip() -> bool {
    irqbench::host::test_kvm().is_some()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const CONFIG: &str = r#"name = "two-by-two"
[run]
max_seconds = 1.5
min_rounds = 10

[[bench]]
name = "a"
kind = "strategy"
strategies = ["native-popf", "native-skip", "pvop-popf", "pvop-skip"]
nesting = [0.0, 0.5]
irq = [{ source = "none" }, { source = "inject", rate_hz = 1000 }]
"#;

/// The default pairs of the bench: every row against the first, then pvop-skip vs pvop-popf
/// (native-skip vs native-popf is already among the first).
const PAIRS: [(&str, &str); 4] = [
    ("native-skip", "native-popf"),
    ("pvop-popf", "native-popf"),
    ("pvop-skip", "native-popf"),
    ("pvop-skip", "pvop-popf"),
];

const CONDITIONS: [&str; 4] = [
    "nesting 0, no load, 1 vCPU",
    "nesting 0, inject 1 kHz, 1 vCPU",
    "nesting 0.5, no load, 1 vCPU",
    "nesting 0.5, inject 1 kHz, 1 vCPU",
];

/// The part of `out` from `start` to `end` (or its end).
fn section<'a>(out: &'a str, start: &str, end: &str) -> &'a str {
    let Some(at) = out.find(start) else {
        panic!("no {start:?} in:\n{out}");
    };
    let rest = &out[at..];
    let stop = rest[1..].find(end).map_or(rest.len(), |e| e + 1);
    &rest[..stop]
}

#[test]
fn a_two_by_two_run_answers_each_default_pair_per_condition_with_the_load_interaction() {
    if !kvm_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("two-by-two.toml");
    std::fs::write(&config, CONFIG).expect("write config");
    let json = dir.path().join("r.json");
    let md = dir.path().join("r.md");
    let out = Command::new(env!("CARGO_BIN_EXE_irqbench"))
        .env(
            "XDG_DATA_HOME",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("answers-xdg"),
        )
        .env("COLUMNS", "200")
        .args([
            "run",
            config.to_str().expect("utf-8"),
            "--no-save",
            "--verbose",
            "--json",
        ])
        .arg(&json)
        .arg("--markdown")
        .arg(&md)
        .output()
        .expect("spawn irqbench");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", text(&out.stderr));
    common::check_report_file(&json);
    let answers = section(&stdout, "answers: each comparison", "\n\n");
    let markdown = std::fs::read_to_string(&md).expect("markdown");
    let markdown = section(&markdown, "## Answers", "\n## ");
    for out in [answers, markdown] {
        for (b, a) in PAIRS {
            let heading = format!("{b} vs {a} (cycles/op)");
            let at = out
                .find(&heading)
                .unwrap_or_else(|| panic!("{heading}:\n{out}"));
            let block = &out[at..];
            for c in CONDITIONS {
                assert!(block.contains(c), "{heading}: {c} missing:\n{out}");
            }
            // The load interaction at nesting 0: an estimate with its CI, or why not.
            let line = block
                .lines()
                .find(|l| l.contains("load: inject 1 kHz vs no load (nesting 0, 1 vCPU): "))
                .unwrap_or_else(|| panic!("{heading}: no load interaction:\n{out}"));
            assert!(
                (line.contains("Δ = ") && line.contains(" log-points [") && line.contains(", "))
                    || line.contains("no estimate: "),
                "{line}"
            );
        }
        assert!(
            out.contains("percentile bootstrap over rounds"),
            "legend:\n{out}"
        );
    }
    assert_json_answers(&json);
    let forest = std::fs::read_to_string(dir.path().join("r.forest.svg")).expect("forest plot");
    assert!(forest.contains("interactions: how the change differs"));
    assert!(forest.contains("load: inject 1 kHz vs no load (nesting 0, 1 vCPU)"));
}

/// The JSON's answers: one per default pair, every condition, four interactions each, an
/// estimate with its CI or the reason there is none.
fn assert_json_answers(json: &Path) {
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).expect("json")).expect("valid json");
    let answers = report["answers"].as_array().expect("answers[]");
    assert_eq!(answers.len(), PAIRS.len(), "{answers:?}");
    let mut estimated = 0;
    for (answer, (b, a)) in answers.iter().zip(PAIRS) {
        assert_eq!(
            (answer["b"].as_str(), answer["a"].as_str()),
            (Some(b), Some(a))
        );
        let labels: Vec<&str> = answer["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .filter_map(|c| c["label"].as_str())
            .collect();
        assert_eq!(labels, CONDITIONS);
        let interactions = answer["interactions"].as_array().expect("interactions");
        assert_eq!(
            interactions.len(),
            4,
            "two load and two nesting interactions"
        );
        for i in interactions {
            let d = &i["delta_log"];
            if let (Some(m), Some(lo), Some(hi)) = (
                d["median"].as_f64(),
                d["ci95"][0].as_f64(),
                d["ci95"][1].as_f64(),
            ) {
                assert!(lo <= m && m <= hi, "{i}");
                estimated += 1;
            } else {
                assert!(
                    i["no_estimate"].is_string(),
                    "no figure without a reason: {i}"
                );
            }
        }
    }
    assert!(estimated > 0, "not one interaction estimated: {answers:?}");
}
