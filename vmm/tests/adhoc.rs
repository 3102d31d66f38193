//! Ad-hoc runs as a user types them (issue 21 item 4): `--set`, `--only`, `[report] redact`
//! through `--set`, what the report records of them, and `compare`'s header and status.

mod common;

use std::path::Path;
use std::process::{Command, Output};

/// Runs are saved in a history database under target/, never in ~/.local/share.
fn irqbench() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_irqbench"));
    // Messages unwrapped, so a test finds its words on one line.
    cmd.env("COLUMNS", "400");
    cmd.env(
        "XDG_DATA_HOME",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("adhoc-xdg-data"),
    );
    cmd
}

fn run(args: &[&str]) -> Output {
    let out = irqbench().args(args).output().expect("spawn irqbench");
    common::check_written_reports(args, &out);
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// A bad key or value is a config error (exit 2, before any VM) that names the flag, with
/// the file's did-you-mean and valid values; `--only` matching nothing lists rows. These need
/// no KVM: the config is checked first.
#[test]
fn bad_settings_and_globs_are_config_errors_naming_the_flag() {
    let cases: [(&[&str], &[&str]); 5] = [
        (
            &["run", "quick", "--set", "run.max_secnds=5"],
            &[
                "--set run.max_secnds=5: unknown key `max_secnds` in [run]",
                "did you mean `max_seconds`?",
            ],
        ),
        (
            &["run", "quick", "--set", "run.max_seconds=0"],
            &["--set run.max_seconds=0: key `run.max_seconds`: 0 is outside 0.1..=3600"],
        ),
        (
            &["run", "quick", "--set", "bench.window.vcpus=[1,2]"],
            &["no bench is named `window`; benches: quick"],
        ),
        (&["run", "quick", "--set", "nokey"], &["expected KEY=VALUE"]),
        (
            &["run", "quick", "--only", "quick/nothing-*"],
            &[
                "--only quick/nothing-*: matches no row of `quick`",
                "quick/pvop-skip/n0/none/1v",
            ],
        ),
    ];
    let dir = tmp();
    for (args, words) in cases {
        let out = irqbench()
            .env("XDG_DATA_HOME", dir.path())
            .args(args)
            .arg("--no-save")
            .output()
            .expect("spawn");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        for w in words {
            assert!(err.contains(w), "{args:?}: expected {w:?} in {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// The example of the README: `--only 'quick/pvop-*'` runs exactly the two pvop rows, with
/// `--set` shortening the run, and both are recorded in the JSON, the text and Markdown
/// headers and the stored run; `--set report.redact` redacts as `--redact` does.
#[test]
fn only_runs_the_matching_rows_and_the_report_records_the_flags() {
    if irqbench::host::test_kvm().is_none() {
        return;
    }
    let dir = tmp();
    let json = dir.path().join("r.json");
    let md = dir.path().join("r.md");
    let db = dir.path().join("h.sqlite");
    let out = run(&[
        "run",
        "quick",
        "--set",
        "run.max_seconds=0.5",
        "--set",
        "run.min_rounds=5",
        "--set",
        "report.redact=[\"cmdline\"]",
        "--only",
        "quick/pvop-*",
        "--verbose",
        "--json",
        path_str(&json),
        "--markdown",
        path_str(&md),
        "--db",
        path_str(&db),
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("(2 rows in 1 group)"), "{stderr}");
    let flags = "--set run.max_seconds=0.5 --set run.min_rounds=5 --set \
                 'report.redact=[\"cmdline\"]' --only 'quick/pvop-*'";
    assert!(stdout.contains(&format!("ad hoc: {flags}")), "{stdout}");
    assert!(std::fs::read_to_string(&md).expect("md").contains(flags));

    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("json")).expect("parse");
    let names: Vec<&str> = report["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        ["quick/pvop-popf/n0/none/1v", "quick/pvop-skip/n0/none/1v"]
    );
    assert_eq!(
        report["adhoc"],
        serde_json::json!({
            "set": ["run.max_seconds=0.5", "run.min_rounds=5", "report.redact=[\"cmdline\"]"],
            "only": ["quick/pvop-*"],
        })
    );
    assert_eq!(report["host"]["redacted"], serde_json::json!(["cmdline"]));
    // The field's pair survives the selection.
    let pairs: Vec<(&str, &str)> = report["comparisons"]
        .as_array()
        .expect("comparisons")
        .iter()
        .map(|c| {
            (
                c["a"].as_str().unwrap_or("?"),
                c["b"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    assert!(!pairs.is_empty(), "{}", report["comparisons"]);

    // The stored run keeps the flags.
    let conn = rusqlite::Connection::open(&db).expect("open db");
    let stored: String = conn
        .query_row("SELECT report_json FROM runs", [], |r| r.get(0))
        .expect("one run");
    let stored: serde_json::Value = serde_json::from_str(&stored).expect("stored json");
    assert_eq!(stored["adhoc"], report["adhoc"]);

    check_takes_the_flags(&db);
    compare_names_each_side_and_fails_when_nothing_matches(dir.path(), &json, &db);
}

/// `check` takes the same flags with the same errors, and `check --only` judges the selected
/// rows: the baseline's others are set aside, not missing.
fn check_takes_the_flags(db: &Path) {
    // `check` takes the same flags, with the same errors.
    let out = run(&["baseline", "save", "B", "1", "--db", path_str(db)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(&[
        "check",
        "quick",
        "--baseline",
        "B",
        "--db",
        path_str(db),
        "--set",
        "run.max_secnds=1",
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--set run.max_secnds=1: unknown key"), "{err}");

    // `check --only` judges the selected rows: the baseline's others are not missing.
    let out = run(&[
        "check",
        "quick",
        "--baseline",
        "B",
        "--db",
        path_str(db),
        "--no-save",
        "--max-regression",
        "1000",
        "--set",
        "run.max_seconds=0.3",
        "--set",
        "run.min_rounds=3",
        "--only",
        "quick/pvop-skip/*",
    ]);
    let (stdout, err) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{err}");
    assert!(
        err.contains("--only: 1 of the baseline's 2 rows are not judged"),
        "{err}"
    );
    assert!(!stdout.contains("pvop-popf"), "{stdout}");
    assert!(
        stdout.contains("old: baseline B (run 1) = quick"),
        "{stdout}"
    );
}

/// `compare` says which file or run each side is, and exits 1 when no row of one matches a
/// row of the other.
fn compare_names_each_side_and_fails_when_nothing_matches(dir: &Path, json: &Path, db: &Path) {
    let out = run(&["compare", path_str(json), "1", "--db", path_str(db)]);
    let cmp = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        cmp.contains(&format!("old: {} = quick, ", json.display())),
        "{cmp}"
    );
    assert!(cmp.contains("new: run 1 = quick, "), "{cmp}");
    let out = run(&["compare", "latest", "run:1", "--db", path_str(db)]);
    assert!(
        text(&out.stdout).contains("old: run 1 (latest) = quick"),
        "{}",
        text(&out.stdout)
    );

    // The same rows under other names: nothing to compare.
    let renamed = dir.join("renamed.json");
    let body = std::fs::read_to_string(json).expect("json");
    std::fs::write(&renamed, body.replace("quick/pvop-", "other/pvop-")).expect("write");
    let out = run(&["compare", path_str(json), path_str(&renamed)]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("nothing compared"), "{err}");
    assert!(
        text(&out.stdout).contains("only in the old run"),
        "{}",
        text(&out.stdout)
    );
}

/// Completion scripts offer the shipped configs where a config goes and the strategies where
/// a strategy goes.
#[test]
fn completions_offer_config_and_strategy_names() {
    for shell in ["bash", "zsh", "fish"] {
        let out = run(&["completions", shell]);
        assert!(out.status.success(), "{shell}");
        let script = text(&out.stdout);
        for name in [
            "pv-restore-skip",
            "epoll-irqsave-vs-irq",
            "pvop-skip",
            "vif-restore",
        ] {
            assert!(script.contains(name), "{shell} lacks {name}");
        }
    }
    let bash = text(&run(&["completions", "bash"]).stdout);
    let disasm = bash
        .lines()
        .find(|l| l.contains("opts=\"-h --guest --help"))
        .expect("disasm's opts");
    assert!(
        disasm.contains("pvop-skip vif-restore vif-skip"),
        "{disasm}"
    );
}
