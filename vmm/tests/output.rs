//! What a person reads from the `irqbench` binary: warnings once per kind, lines that fit,
//! a short `host`, a compact `history`, progress on stderr and `-q` the same for every command.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Every run these tests start is saved in a history database under target/ (cargo's
/// CARGO_TARGET_TMPDIR), never in the real ~/.local/share.
fn irqbench() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_irqbench"));
    cmd.env(
        "XDG_DATA_HOME",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("output-xdg-data"),
    );
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn kvm_or_skip() -> bool {
    irqbench::host::test_kvm().is_some()
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// The lines of `text` with each wrapped continuation (indented) joined to its line.
fn unwrapped(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in text.lines() {
        match out.last_mut() {
            Some(last) if l.starts_with("  ") => {
                last.push(' ');
                last.push_str(l.trim_start());
            }
            _ => out.push(l.to_string()),
        }
    }
    out
}

fn widest(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// A config of `strategies` × nesting [0, 0.5] × irq [none, lapic 1 ms], short budgets.
fn config(dir: &Path, name: &str, strategies: &str, max_seconds: f64) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            "name = \"{name}\"\n[run]\nmax_seconds = {max_seconds}\nmin_rounds = 6\n\
             precision = 0.001\n\n[[bench]]\nname = \"{name}\"\nkind = \"strategy\"\n\
             strategies = {strategies}\nnesting = [0.0, 0.5]\nbody_ops = 4\n\
             irq = [{{ source = \"none\" }}, {{ source = \"lapic-timer\", period_us = 1000 }}]\n"
        ),
    )
    .expect("write config");
    path
}

#[test]
fn host_shortens_the_kernel_command_line_unless_verbose() {
    if !kvm_or_skip() {
        return;
    }
    let json = irqbench().args(["host", "--json"]).output().expect("spawn");
    assert!(json.status.success(), "{}", text(&json.stderr));
    let m: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    let cmdline = m["kernel_cmdline"]["value"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let host = |args: &[&str]| -> Output {
        irqbench()
            .env("COLUMNS", "80")
            .args(args)
            .output()
            .expect("spawn")
    };
    let short = host(&["host"]);
    let out = text(&short.stdout);
    assert!(short.status.success());
    assert!(widest(&out) <= 80, "{out}");
    let verbose = irqbench()
        .env("COLUMNS", "100000")
        .args(["host", "--verbose"])
        .output()
        .expect("spawn");
    let all = text(&verbose.stdout);
    if cmdline.chars().count() > 120 && !cmdline.chars().any(char::is_control) {
        let note = format!("({} chars, --verbose for all)", cmdline.chars().count());
        let joined = out.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(joined.contains(&note), "{out}");
        assert!(all.contains(&cmdline), "{all}");
        assert!(!all.contains("--verbose for all"));
    } else {
        eprintln!("the command line is short here: only the width is checked");
    }
    assert!(host(&["host", "-q"]).status.success());
}

/// Spins on every CPU until `stop`: a busy host, so rows get disturbed blocks.
fn compete(stop: &irqbench::vcpu::Stop) -> Vec<std::thread::JoinHandle<()>> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..cpus)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.is_set() {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            })
        })
        .collect()
}

/// 42 rows on a busy host: each kind of warning is one line, every line fits 80 columns, and
/// stderr (not a terminal here) has one line per finished group; `-q` prints nothing at all.
#[test]
fn a_forty_row_run_on_a_busy_host_warns_once_per_kind_and_reports_each_group() {
    if !kvm_or_skip() {
        return;
    }
    let dir = tmp();
    let cfg = dir.path().join("forty.toml");
    std::fs::write(
        &cfg,
        "name = \"forty\"\n[run]\nmax_seconds = 0.4\nmin_rounds = 6\nprecision = 0.001\n\n\
         [[bench]]\nname = \"forty\"\nkind = \"strategy\"\nnesting = [0.0, 0.25, 0.5]\n\
         body_ops = 4\nirq = [{ source = \"none\" }, { source = \"lapic-timer\", period_us = 1000 }]\n",
    )
    .expect("write config");
    let stop = irqbench::vcpu::Stop::new();
    let spinners = compete(&stop);
    let json = dir.path().join("forty.json");
    let out = irqbench()
        .env("COLUMNS", "80")
        .args(["run", cfg.to_str().unwrap(), "--no-save", "--json"])
        .arg(&json)
        .output()
        .expect("spawn");
    let quiet = irqbench()
        .args(["run", cfg.to_str().unwrap(), "--no-save", "-q"])
        .output()
        .expect("spawn");
    stop.request();
    for s in spinners {
        s.join().expect("spinner");
    }
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "{stderr}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("JSON")).expect("JSON");
    let rows = report["results"].as_array().expect("results").len();
    assert!(rows >= 40, "{rows} rows");
    assert!(widest(&stdout) <= 80, "{stdout}");
    assert!(widest(&stderr) <= 80, "{stderr}");
    // Each warning starts a line; its continuation lines are indented.
    let warnings: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("warning: "))
        .collect();
    let kind = |needle: &str| warnings.iter().filter(|l| l.contains(needle)).count();
    assert!(kind("warning: disturbed >") <= 1, "{stdout}");
    let joined = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    let ticks = joined.matches("LAPIC timer interrupts its").count();
    assert!(ticks <= 1, "{ticks} LAPIC warnings: {stdout}");
    let stored = report["warnings"].as_array().map_or(0, Vec::len);
    eprintln!(
        "{rows} rows: {} warning lines in the table for {stored} stored warnings, {} disturbed",
        warnings.len(),
        kind("warning: disturbed >")
    );
    assert!(warnings.len() <= 8, "{stdout}");
    let groups = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["group"].as_str().unwrap_or(""))
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let messages = unwrapped(&stderr);
    let finished: Vec<&String> = messages
        .iter()
        .filter(|l| l.starts_with("irqbench: group "))
        .collect();
    assert_eq!(finished.len(), groups, "{stderr}");
    assert!(
        finished[0].starts_with(&format!("irqbench: group 1/{groups} forty/")),
        "{stderr}"
    );
    assert!(
        finished
            .iter()
            .all(|l| l.contains(" rows, ") && l.contains(" rounds, ")),
        "{stderr}"
    );
    assert!(!stderr.contains("phase"), "{stderr}");
    assert!(quiet.status.code() == Some(0) || quiet.status.code() == Some(1));
    assert!(quiet.stdout.is_empty(), "{}", text(&quiet.stdout));
    let noise = text(&quiet.stderr);
    // Under -q only errors: a run whose row kept no round (exit 1) says that, nothing else.
    assert!(
        quiet.status.code() == Some(1) || noise.is_empty(),
        "-q printed: {noise}"
    );
}

/// Three saved runs of a 8-row config: `history` is one rows × runs table that fits the width,
/// tens of lines; `--long` is the table per row; `-q` keeps the listing.
#[test]
fn history_lists_a_line_per_run_and_rows_by_runs_on_request() {
    if !kvm_or_skip() {
        return;
    }
    let dir = tmp();
    let cfg = config(dir.path(), "piv", "[\"native-popf\", \"pvop-skip\"]", 0.3);
    let db = dir.path().join("h.sqlite");
    for _ in 0..3 {
        let out = irqbench()
            .args(["run", cfg.to_str().unwrap(), "-q", "--db"])
            .arg(&db)
            .output()
            .expect("spawn");
        assert!(out.status.code() == Some(0) || out.status.code() == Some(1));
    }
    let history = |args: &[&str]| {
        irqbench()
            .env("COLUMNS", "80")
            .arg("history")
            .args(args)
            .arg("--db")
            .arg(&db)
            .output()
            .expect("spawn")
    };
    // By default one line per run, and how to ask for the rows.
    let runs = text(&history(&[]).stdout);
    assert!(!runs.contains("per row and run"), "{runs}");
    assert!(runs.contains("per-row trends: --row GLOB"), "{runs}");
    assert!(runs.lines().count() < 12, "{runs}");
    let out = history(&["--row", "*"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listing = text(&out.stdout);
    let pivot = &listing[listing.find("per row and run").expect(&listing)..];
    // One host for all runs is said once: the whole listing fits, the runs table included.
    assert!(widest(&listing) <= 80, "{listing}");
    assert!(listing.contains("every run on "), "{listing}");
    for id in 1..=3 {
        assert!(pivot.contains(&format!("run {id}")), "{pivot}");
    }
    // 8 rows × 3 runs in one panel: a line per row, not a block per row.
    assert!(listing.lines().count() < 25, "{listing}");
    assert!(pivot.contains("every row is"), "{pivot}");
    assert!(
        !listing.contains("started (UTC)      cycles/op"),
        "{listing}"
    );
    let long = text(&history(&["--long"]).stdout);
    assert!(long.contains("trend per row"), "{long}");
    assert!(long.lines().count() > listing.lines().count(), "{long}");
    let quiet = history(&["-q", "--row", "*"]);
    assert_eq!(text(&quiet.stdout), listing);
    assert!(quiet.stderr.is_empty(), "{}", text(&quiet.stderr));
}

/// `-q` is offered, and described the same way, by every command that prints more than its
/// answer; no help text calls a row a "phase".
#[test]
fn every_command_takes_q_and_help_says_row_not_phase() {
    for cmd in ["run", "check", "validate", "host", "history", "compare"] {
        let out = irqbench().args([cmd, "--help"]).output().expect("spawn");
        let help = text(&out.stdout);
        assert!(out.status.success(), "{cmd}: {}", text(&out.stderr));
        assert!(
            help.contains("-q, --quiet") && help.contains("Print nothing but errors"),
            "{cmd}: {help}"
        );
        assert!(!help.to_lowercase().contains("phase"), "{cmd}: {help}");
    }
    let top = text(&irqbench().arg("--help").output().expect("spawn").stdout);
    assert!(!top.to_lowercase().contains(" phase"), "{top}");
}

/// `validate`'s expected/measured/why lines (up to 258 columns before) wrap to the width.
#[test]
fn validate_lines_wrap_to_the_width() {
    if !kvm_or_skip() {
        return;
    }
    let out = irqbench()
        .env("COLUMNS", "70")
        .args(["validate", "-q"])
        .output()
        .expect("spawn");
    let stdout = text(&out.stdout);
    // PASS or WARN is 0, a FAIL 1 (a busy host can fail a timing check): both print the checks.
    assert!(out.status.code() == Some(0) || out.status.code() == Some(1));
    assert!(stdout.contains("expected: "), "{stdout}");
    assert!(widest(&stdout) <= 70, "{stdout}");
    // A wrapped `      why: …` line continues two columns further in.
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("        ") && !l.starts_with("         ")),
        "nothing needed wrapping: {stdout}"
    );
}

/// On a terminal (a pseudo-terminal from script(1)) the bar counts groups and shows the
/// rounds, the CI against the target and the time left; no per-group lines.
#[test]
fn on_a_terminal_the_bar_shows_rounds_precision_and_time_left() {
    if !kvm_or_skip() {
        return;
    }
    if Command::new("script").arg("--version").output().is_err() {
        println!("skipped: needs script (util-linux) for a pseudo-terminal");
        return;
    }
    let dir = tmp();
    let cfg = config(dir.path(), "tty", "[\"native-popf\", \"pvop-skip\"]", 0.6);
    let data = Path::new(env!("CARGO_TARGET_TMPDIR")).join("output-xdg-data");
    let inner = format!(
        "XDG_DATA_HOME='{}' '{}' run '{}' --no-save > /dev/null",
        data.display(),
        env!("CARGO_BIN_EXE_irqbench"),
        cfg.display()
    );
    let out = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .output()
        .expect("spawn script");
    let screen = text(&out.stdout);
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "{screen}"
    );
    let bar: Vec<&str> = screen
        .split(['\r', '\n'])
        .filter(|l| l.contains(" groups ≤ "))
        .collect();
    assert!(!bar.is_empty(), "no bar: {screen:?}");
    assert!(
        bar.iter()
            .any(|l| l.contains("/4 groups ≤ ") && l.contains(" left, round ")),
        "{bar:#?}"
    );
    // A pseudo-terminal is 80 columns: the end of the message may be cut, not the CI.
    assert!(bar.iter().any(|l| l.contains(", CI ±")), "{bar:#?}");
    assert!(!screen.contains("irqbench: group "), "{screen}");
}
