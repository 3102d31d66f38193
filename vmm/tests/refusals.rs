//! What cannot be done is refused before anything runs or is created: budgets checked with the
//! blocks a round really runs, stdout kept for one thing, a host mismatch found before the
//! measuring, no database or folder left by a run that never started, and a signal in the
//! first milliseconds stopping the run cleanly.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn irqbench(data: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_irqbench"));
    cmd.env("XDG_DATA_HOME", data);
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn kvm_or_skip() -> bool {
    irqbench::host::test_kvm().is_some()
}

fn run(data: &Path, args: &[&str]) -> Output {
    irqbench(data).args(args).output().expect("spawn irqbench")
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// What is in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A 4-row group runs 5 blocks a round (its rows and the `empty` baseline): at 50 ms a block
/// and 0.1 s of budget it cannot fit, which the up-front check (assuming 2 blocks) had passed,
/// and all 16 rows then failed.
#[test]
fn a_round_too_long_for_the_budget_is_refused_with_the_range_that_fits() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = run(
        dir.path(),
        &[
            "run",
            "answers-load",
            "--no-save",
            "--set",
            "run.block_us=50000",
            "--set",
            "run.max_seconds=0.1",
        ],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("5 blocks a round") && err.contains("run.block_us 20..=20000"),
        "{err}"
    );
    assert!(!err.contains("running"), "refused before the run: {err}");
    // With one row selected its group runs 2 blocks: 40 ms a block fits 0.1 s, and the check
    // lets it through (no KVM device here, so that is where it stops).
    let ok = irqbench(dir.path())
        .env("IRQBENCH_KVM_DEVICE", "/nonexistent/kvm")
        .args(["run", "answers-load", "--no-save"])
        .args([
            "--set",
            "run.block_us=40000",
            "--set",
            "run.max_seconds=0.1",
        ])
        .args(["--only", "load/native-popf/n0/none/1v"])
        .output()
        .expect("spawn");
    let err = text(&ok.stderr);
    assert!(
        !err.contains("blocks a round") && err.contains("KVM"),
        "{err}"
    );
}

/// `check --export NAME=-` would mix the export and the verdict on stdout: refused as
/// `check --json -` is. `run --db` with `--no-save` had the --db silently ignored.
#[test]
fn contradictory_outputs_are_refused_before_the_run() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("h.sqlite");
    let out = irqbench(dir.path())
        .env("IRQBENCH_KVM_DEVICE", "/nonexistent/kvm")
        .args(["check", "quick", "--baseline", "b", "--no-save"])
        .args(["--db", path_str(&db), "--export", "bencher=-"])
        .output()
        .expect("spawn");
    let err = text(&out.stderr);
    // No baseline in a missing database is refused first, also with 2; with one, the export.
    assert_eq!(out.status.code(), Some(2), "{err}");
    let out = run(
        dir.path(),
        &["run", "quick", "--no-save", "--db", path_str(&db)],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--no-save saves nothing"), "{err}");
    assert!(!db.exists());
}

/// A results file of `host` made into a baseline on another CPU: `check --strict-host` refuses
/// before measuring (it had measured the whole config first); `--export -` is refused too.
#[test]
fn check_refuses_another_host_and_stdout_exports_before_measuring() {
    if !kvm_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("h.sqlite");
    let json = dir.path().join("base.json");
    let q = [
        "--set",
        "run.max_seconds=0.1",
        "--only",
        "quick/native-popf/*",
    ];
    let out = irqbench(dir.path())
        .args(["run", "quick", "--no-save", "--json", path_str(&json)])
        .args(q)
        .output()
        .expect("spawn");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    doc["host"]["cpu_model"] = "Another CPU".into();
    std::fs::write(&json, serde_json::to_vec(&doc).unwrap()).unwrap();
    for args in [
        vec!["import", "--db", path_str(&db), path_str(&json)],
        vec!["baseline", "save", "other", "--db", path_str(&db)],
    ] {
        let out = run(dir.path(), &args);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let check = |extra: &[&str]| {
        irqbench(dir.path())
            .args(["check", "quick", "--baseline", "other", "--no-save"])
            .args(["--db", path_str(&db)])
            .args(q)
            .args(extra)
            .output()
            .expect("spawn")
    };
    let out = check(&["--strict-host"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cpu_model: Another CPU -->"), "{err}");
    assert!(!err.contains("running"), "refused before measuring: {err}");
    let out = check(&["--export", "bencher=-"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("stdout carries the verdict"), "{err}");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
}

/// A failed import leaves no database; a guest that never boots leaves no --out folder and
/// no history (both had been created before the run could start).
#[test]
fn nothing_is_created_by_what_never_started() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("h.sqlite");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{}").unwrap();
    let out = run(
        dir.path(),
        &["import", "--db", path_str(&db), path_str(&bad)],
    );
    assert_ne!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!db.exists(), "a failed import created {}", db.display());
    if !kvm_or_skip() {
        return;
    }
    let guest = dir.path().join("ud2.elf");
    let mut elf = irqbench::machine::image::EMBEDDED_GUEST.to_vec();
    let magic = irqbench_abi::MAILBOX_MAGIC.to_le_bytes();
    let at = elf
        .windows(4)
        .position(|w| w == magic)
        .expect("the guest's magic check");
    elf[at] ^= 1;
    std::fs::write(&guest, elf).unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = run(
        dir.path(),
        &[
            "run",
            "quick",
            "--guest",
            path_str(&guest),
            "--db",
            path_str(&db),
            "--out",
            path_str(&out_dir),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(listing(&out_dir).is_empty(), "{:?}", listing(&out_dir));
    assert!(!db.exists(), "a run that never started created the history");
}

/// SIGINT a few milliseconds after exec. Before the loader has run irqbench's first function
/// (about 2 ms here, longer in an emulator) only the default action can act, and nothing was
/// created; from then on the signal is noted, the run stops with 130 and a message, and a history created only for a
/// run that measured something is absent (it had been left empty when the signal came between
/// its creation and the handlers' installation).
#[test]
fn a_signal_in_the_first_milliseconds_stops_cleanly() {
    use std::os::unix::process::ExitStatusExt;
    if !kvm_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    for delay_ms in [1u64, 2, 3, 4, 6, 8, 10, 12, 30] {
        let sub = dir.path().join(format!("d{delay_ms}"));
        std::fs::create_dir(&sub).unwrap();
        let db: PathBuf = sub.join("h.sqlite");
        let child = irqbench(&sub)
            .args(["run", "quick", "--db", path_str(&db)])
            .args(["--set", "run.max_seconds=0.2"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        std::thread::sleep(Duration::from_millis(delay_ms));
        // SAFETY: kill only sends a signal to the child this test started.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGINT);
        }
        let out = child.wait_with_output().expect("wait");
        let err = text(&out.stderr);
        let files = listing(&sub);
        if out.status.signal() == Some(libc::SIGINT) {
            assert!(files.is_empty(), "killed at {delay_ms} ms, left {files:?}");
            continue;
        }
        assert_eq!(out.status.code(), Some(130), "{delay_ms} ms: {err}");
        assert!(err.contains("SIGINT"), "{delay_ms} ms: {err}");
        if err.contains("before the run started") {
            assert!(files.is_empty(), "{delay_ms} ms: {files:?}\n{err}");
        } else {
            assert!(
                err.contains("saved as run"),
                "{delay_ms} ms: {files:?}\n{err}"
            );
        }
    }
}
