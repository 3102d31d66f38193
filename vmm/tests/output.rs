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
