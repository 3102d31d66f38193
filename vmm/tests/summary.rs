//! The answer on one screen: `run`'s default output of each shipped question within its line
//! budget at `COLUMNS=100`, its first figure near the top, the same lines whatever the time
//! budget; `--verbose` the whole report; `--mail` in 72 columns.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

/// (config, the most lines its default output may take at `COLUMNS=100`).
const BUDGETS: [(&str, usize); 4] = [
    ("quick", 30),
    ("strategies", 60),
    ("epoll-irqsave-vs-irq", 80),
    ("pv-restore-skip", 100),
];

/// The first figure must be on one of these first lines.
const FIRST_FIGURE_BY: usize = 12;

fn irqbench() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_irqbench"));
    cmd.env(
        "XDG_DATA_HOME",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("summary-xdg-data"),
    )
    .env("COLUMNS", "100");
    cmd
}

fn kvm_or_skip() -> bool {
    irqbench::host::test_kvm().is_some()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn run(config: &str, max_seconds: &str, extra: &[&str]) -> Output {
    let out = irqbench()
        .args(["run", config, "--no-save", "--set"])
        .arg(format!("run.max_seconds={max_seconds}"))
        .args(extra)
        .output()
        .expect("spawn irqbench");
    assert!(
        out.status.success(),
        "{config}: {}\n{}",
        text(&out.stderr),
        text(&out.stdout)
    );
    out
}

/// A line that gives a figure: a comparison's change with its CI.
fn is_figure(line: &str) -> bool {
    line.starts_with("  ") && line.contains("% [")
}

/// The lines whose number depends on the host's state, not on the run's structure.
fn is_warning(line: &str) -> bool {
    ["warning", "validation ", "PARTIAL", "failed: "]
        .iter()
        .any(|p| line.starts_with(p))
        || line.ends_with(" more: --verbose")
}

#[test]
fn each_shipped_question_fits_its_line_budget_whatever_the_time_budget() {
    if !kvm_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    for (config, budget) in BUDGETS {
        let mut structure: Vec<(String, usize)> = Vec::new();
        for max_seconds in ["0.2", "0.5"] {
            let started = Instant::now();
            let mail = dir.path().join(format!("{config}-{max_seconds}.txt"));
            let out = run(
                config,
                max_seconds,
                &["--mail", mail.to_str().expect("utf-8")],
            );
            let stdout = text(&out.stdout);
            let lines: Vec<&str> = stdout.lines().collect();
            eprintln!(
                "{config} at {max_seconds} s a group: {} lines in {:.1} s",
                lines.len(),
                started.elapsed().as_secs_f64()
            );
            assert!(
                lines.len() <= budget,
                "{config}: {} lines\n{stdout}",
                lines.len()
            );
            let widest = lines.iter().map(|l| l.chars().count()).max().unwrap_or(0);
            assert!(
                widest <= 100,
                "{config}: a line of {widest} columns\n{stdout}"
            );
            let first = lines.iter().position(|l| is_figure(l));
            assert!(
                first.is_some_and(|i| i < FIRST_FIGURE_BY),
                "{config}: first figure on line {first:?}\n{stdout}"
            );
            for hidden in [
                "cycles/op: median over rounds",
                "exits per op by KVM stat",
                // A validation check's reason line (a comparison without a ratio says
                // `why: --verbose` in its verdict cell, which may follow two spaces).
                "\n  why: ",
            ] {
                assert!(
                    !stdout.contains(hidden),
                    "{config}: `{hidden}` is --verbose's"
                );
            }
            let mail = std::fs::read_to_string(&mail).expect("the mail report");
            let widest = mail.lines().map(|l| l.chars().count()).max().unwrap_or(0);
            assert!(widest <= 72, "{config} --mail: {widest} columns\n{mail}");
            assert!(
                mail.starts_with(&format!("$ irqbench run {config}")),
                "{mail}"
            );
            if config == "epoll-irqsave-vs-irq" {
                let n = mail.lines().count();
                assert!(n <= 40, "{config} --mail: {n} lines\n{mail}");
            }
            if config == "pv-restore-skip" {
                skip_lines_have_both_changes(&stdout);
            }
            let kept: Vec<&str> = lines.iter().copied().filter(|l| !is_warning(l)).collect();
            structure.push((max_seconds.to_string(), kept.len()));
        }
        assert_eq!(
            structure[0].1, structure[1].1,
            "{config}: the lines besides the warnings differ with the time budget: {structure:?}"
        );
    }
}

/// Every condition's `pvop-skip vs pvop-popf` line: Δcycles/op with its CI and Δexits/op
/// with its CI (`≈0 (±h)`, `−0.011 ±0.004`, or `0` where neither row counted one).
fn skip_lines_have_both_changes(stdout: &str) {
    let conditions = stdout.lines().filter(|l| l.starts_with("inject/")).count();
    assert_eq!(conditions, 6, "3 nestings × 2 rates:\n{stdout}");
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("  pvop-skip vs pvop-popf "))
        .collect();
    assert_eq!(lines.len(), conditions, "{stdout}");
    for line in lines {
        let cells: Vec<&str> = line.trim().split("  ").filter(|c| !c.is_empty()).collect();
        assert!(cells.len() >= 4, "{line}");
        let (change, exits) = (cells[1].trim(), cells[2].trim());
        // A ratio whose rows' nets cannot be told from the baseline (a busy host, 0.2 s a
        // group) is none, and its verdict cell points to the reason: a measured outcome, not
        // a layout fault.
        let no_ratio = change == "no ratio" && line.ends_with("why: --verbose");
        assert!(
            change.contains("% [") || change.contains("[no CI]") || no_ratio,
            "{line}"
        );
        assert!(exits.contains('±') || exits == "0", "{line}");
    }
}

#[test]
fn verbose_prints_the_whole_report_the_summary_leaves_out() {
    if !kvm_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("r.json");
    let out = run(
        "quick",
        "0.3",
        &["--verbose", "--json", json.to_str().expect("utf-8")],
    );
    let verbose = text(&out.stdout);
    // `--verbose` is the whole report as `render_table` lays it out, every section of it.
    let report = irqbench::report::read_json(&json).expect("read the JSON back");
    assert_eq!(
        verbose,
        format!("{}\n", irqbench::report::render_table_at(&report, 100))
    );
    for section in [
        "cycles/op: median over rounds",
        "comparisons: median of per-round paired ratios",
        "exits per op by KVM stat",
        "CI: distribution-free",
        "quick/n0/none/1v (strategy, 5 rows",
        "  native-skip vs native-popf  cycles/op ",
    ] {
        assert!(
            verbose.contains(section),
            "--verbose lacks `{section}`:\n{verbose}"
        );
    }
    let summary = irqbench::report::render_summary_at(&report, 100);
    assert!(summary.lines().count() < verbose.lines().count());
    for line in summary
        .lines()
        .filter(|l| l.starts_with("  ") && !l.contains(" vs "))
    {
        // Every row of the compact table is a row of the verbose one.
        let name = line.split_whitespace().next().unwrap_or_default();
        assert!(verbose.contains(&format!("  {name} ")), "{name}");
    }
}

#[test]
fn verbose_and_quiet_cannot_be_asked_together() {
    let out = irqbench()
        .args(["run", "--quiet", "--verbose", "--no-save"])
        .output()
        .expect("spawn irqbench");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// `compare --mail -` and `check --mail -`: the mail report alone on stdout, in 72 columns,
/// starting with the command that reproduces it; check's ends with its verdict.
#[test]
fn compare_and_check_write_the_mail_report() {
    if !kvm_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("h.sqlite");
    let db = db.to_str().expect("utf-8");
    let quick = ["--set", "run.max_seconds=0.2", "--db", db];
    let out = irqbench().args(["run", "quick", "-q"]).args(quick).output();
    assert!(out.expect("spawn").status.success());
    let out = irqbench()
        .args(["baseline", "save", "before", "--db", db])
        .output()
        .expect("spawn");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let check = irqbench()
        .args([
            "check",
            "quick",
            "--baseline",
            "before",
            "--mail",
            "-",
            "-q",
        ])
        .args(quick)
        .output()
        .expect("spawn");
    let compare = irqbench()
        .args(["compare", "1", "2", "--mail", "-", "--db", db])
        .output()
        .expect("spawn");
    assert!(compare.status.success(), "{}", text(&compare.stderr));
    for (what, out) in [("check", &check), ("compare", &compare)] {
        let mail = text(&out.stdout);
        assert!(mail.starts_with(&format!("$ irqbench {what} ")), "{mail}");
        let widest = mail.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        assert!(widest <= 72, "{what} --mail: {widest} columns\n{mail}");
        assert!(mail.contains("cycles/op, old -> new"), "{mail}");
        assert!(!mail.contains("| "), "no Markdown: {mail}");
    }
    let verdict = text(&check.stdout);
    let last = verdict.lines().last().unwrap_or_default();
    assert!(last.starts_with("check: "), "{verdict}");
    assert_eq!(last == "check: passed", check.status.success(), "{verdict}");
}
