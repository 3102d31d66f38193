//! The results history through the binary: import, history, baselines, compare by run id and
//! baseline, check, concurrent saves, a kill mid-save, and a database path that is not ours.
//! Every test uses its own temporary XDG_DATA_HOME (or --db): nothing reaches ~/.local/share.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use irqbench::history::{DbLocation, Store, SAVE_PAUSE_ENV};
use irqbench::results::{HostManifest, PhaseResult, ResultKind, RunReport, Summary, SCHEMA};

/// The binary with XDG_DATA_HOME at `data`.
fn irqbench(data: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_irqbench"));
    cmd.env("XDG_DATA_HOME", data).env_remove(SAVE_PAUSE_ENV);
    cmd
}

fn run(data: &Path, args: &[&str]) -> Output {
    let out = irqbench(data).args(args).output().expect("spawn irqbench");
    common::check_written_reports(args, &out);
    out
}

/// `run` with no KVM device: a command that got past its checks would fail on opening KVM
/// instead, so a refusal it gives was given before anything ran.
fn run_no_kvm(data: &Path, args: &[&str]) -> Output {
    irqbench(data)
        .env("IRQBENCH_KVM_DEVICE", "/nonexistent/kvm")
        .args(args)
        .output()
        .expect("spawn irqbench")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

fn db_path(data: &Path) -> PathBuf {
    data.join("irqbench").join("history.sqlite")
}

fn store(data: &Path) -> Store {
    Store::open_existing(&DbLocation {
        path: db_path(data),
        explicit: true,
    })
    .expect("history database")
}

fn rounds(median: f64, spread: f64) -> Summary {
    let samples: Vec<f64> = (0..25)
        .map(|i| median + spread * (2.0 * ((i * 7) % 25) as f64 / 24.0 - 1.0))
        .collect();
    Summary::from_samples(&samples)
}

/// A results JSON like a quick run's, started at `started`, native-popf at `popf` cycles.
fn results_file(dir: &Path, name: &str, started: u64, popf: f64) -> PathBuf {
    let row = |strategy: &str, cycles: f64| PhaseResult {
        name: format!("quick/{strategy}/n0/none/1v"),
        group: "quick/n0/none/1v".into(),
        kind: ResultKind::Strategy,
        strategy: irqbench::identity::Subject::from_name(strategy).expect(strategy),
        irq_source: "none".into(),
        vcpus: 1,
        ops: 100_000,
        rounds: 25,
        cycles_per_op: rounds(cycles, 80.0),
        ops_per_sec: rounds(2.6e9 / (cycles + 70_000.0), 10.0),
        ..PhaseResult::default()
    };
    let report = RunReport {
        schema: SCHEMA.into(),
        irqbench_version: "0.1.0".into(),
        config_name: "quick".into(),
        config_source: "<shipped config quick>".into(),
        started_unix: started,
        host: HostManifest {
            cpu_model: "Test CPU".into(),
            host_cpus: 2,
            kernel_release: "6.1.0-test".into(),
            kvm_flavour: "vmx".into(),
            ..HostManifest::default()
        },
        results: vec![row("native-popf", popf), row("native-skip", 13_000.0)],
        ..RunReport::default()
    };
    let path = dir.join(name);
    std::fs::write(&path, irqbench::report::to_json(&report).expect("json")).expect("write");
    common::check_report_file(&path);
    path
}

#[test]
fn import_history_baselines_and_compare_by_id_and_name() {
    let data = tempfile::tempdir().expect("tmp");
    let dir = tempfile::tempdir().expect("tmp");
    let a = results_file(dir.path(), "a.json", 1_700_000_000, 14_750.0);
    let b = results_file(dir.path(), "b.json", 1_700_000_600, 18_000.0);
    // An irqbench-results/3 file, as the last build of that schema wrote it.
    let old = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results-v3.json");

    let out = run(
        data.path(),
        &["import", path_str(&a), path_str(&b), path_str(&old)],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("as run 1") && said.contains("as run 3"),
        "{said}"
    );
    let out = run(data.path(), &["import", path_str(&a)]);
    assert!(text(&out.stdout).contains("already stored as run 1"));
    assert_eq!(store(data.path()).run_count().expect("count"), 3);

    let out = run(data.path(), &["baseline", "save", "B", "1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let list = text(&run(data.path(), &["baseline", "list"]).stdout);
    assert!(list.contains("B") && list.contains("quick"), "{list}");
    // --db goes before or after the action, as with every other command.
    let db = db_path(data.path());
    let out = run(
        data.path(),
        &["baseline", "save", "C", "2", "--db", path_str(&db)],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let list = text(&run(data.path(), &["baseline", "--db", path_str(&db), "list"]).stdout);
    assert!(list.contains("C "), "{list}");

    let out = run(data.path(), &["history", "--strategy", "native-popf"]);
    let hist = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        hist.contains("baseline B") && hist.contains("14750 ±"),
        "{hist}"
    );
    assert!(
        !hist.contains("native-skip/"),
        "filtered by strategy: {hist}"
    );
    let out = run(data.path(), &["history", "--json", "--last", "2"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(json["runs"].as_array().expect("runs").len(), 2);
    let svg = dir.path().join("trend.svg");
    let out = run(data.path(), &["history", "--svg", path_str(&svg)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::read_to_string(&svg)
        .expect("svg")
        .contains("<polygon"));
    let out = run(data.path(), &["history", "--strategy", "native-pop"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("native-popf"),
        "lists what exists"
    );

    // Baseline against run id, and a baseline against a file: either side, any kind.
    let out = run(data.path(), &["compare", "B", "2"]);
    let cmp = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        cmp.contains("beyond noise") && cmp.contains("+22.0%"),
        "{cmp}"
    );
    let out = run(data.path(), &["compare", path_str(&b), "baseline:B"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(data.path(), &["compare", "B", "9"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no run 9"),
        "{}",
        text(&out.stderr)
    );

    // The stored /3 report reads back converted, as the file itself does.
    let out = run(data.path(), &["compare", "3", path_str(&old)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("fx/pvop-skip"),
        "{}",
        text(&out.stdout)
    );

    let out = run(data.path(), &["baseline", "rm", "B"]);
    assert!(out.status.success());
    let out = run(data.path(), &["compare", "B", "2"]);
    assert_eq!(out.status.code(), Some(2));
}

/// A results file of `rows`' JSON edited by `edit`, written as `name`.
fn edited(dir: &Path, from: &Path, name: &str, edit: impl Fn(&mut serde_json::Value)) -> PathBuf {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(from).expect("read")).expect("json");
    edit(&mut v);
    let path = dir.join(name);
    std::fs::write(&path, v.to_string()).expect("write");
    path
}

/// A /2 file (exits in `exits_per_op` and `exits_per_op_ci95` alone) is refused, naming its
/// schema and what is read, and not stored; schema 4 files compare by their `counts`. A file
/// whose row names no strategy this build knows is refused, naming the row and the field, and
/// not stored.
#[test]
fn an_old_schema_and_an_unknown_subject_are_refused() {
    let data = tempfile::tempdir().expect("tmp");
    let dir = tempfile::tempdir().expect("tmp");
    let plain = results_file(dir.path(), "plain.json", 1_700_000_000, 14_750.0);
    let new = edited(dir.path(), &plain, "new.json", |v| {
        for r in v["results"].as_array_mut().expect("rows") {
            r["counts"]["exits"] = serde_json::json!({"per_op": 2.0, "ci95": [1.95, 2.05],
                "rounds": 25, "events": 200_000, "baseline_events": 0, "ops": 100_000});
        }
    });
    let old = edited(dir.path(), &plain, "old.json", |v| {
        v["schema"] = "irqbench-results/2".into();
        v["started_unix"] = 1_600_000_000.into();
        for r in v["results"].as_array_mut().expect("rows") {
            let row = r.as_object_mut().expect("row");
            row.remove("counts");
            row.remove("stats_ci95");
            row.insert("exits_per_op".into(), serde_json::json!({"exits": 3.0}));
            row.insert("exits_per_op_ci95".into(), serde_json::json!([2.95, 3.05]));
        }
    });
    let out = run(data.path(), &["import", path_str(&old)]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("\"irqbench-results/2\"") && err.contains("irqbench-results/4 (and converts"),
        "{err}"
    );
    let old = edited(dir.path(), &plain, "older.json", |v| {
        v["started_unix"] = 1_600_000_000.into();
        for r in v["results"].as_array_mut().expect("rows") {
            r["counts"]["exits"] = serde_json::json!({"per_op": 3.0, "ci95": [2.95, 3.05],
                "rounds": 25, "events": 300_000, "baseline_events": 0, "ops": 100_000});
        }
    });
    let out = run(data.path(), &["import", path_str(&old), path_str(&new)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(data.path(), &["compare", "1", "2"]);
    let diff = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let exits = diff
        .lines()
        .find(|l| l.contains("native-popf") && l.contains("exits/op"))
        .unwrap_or_else(|| panic!("no exits row: {diff}"));
    assert!(exits.contains('3') && exits.contains('2'), "{exits}");

    let bad = edited(dir.path(), &plain, "bad.json", |v| {
        v["started_unix"] = 1_800_000_000.into();
        v["results"][1]["strategy"] = "native-skipp".into();
    });
    for args in [
        vec!["import", path_str(&bad)],
        vec!["compare", path_str(&new), path_str(&bad)],
    ] {
        let out = run(data.path(), &args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("results[1]") && err.contains("`strategy` is `native-skipp`"),
            "{args:?}: {err}"
        );
        assert!(err.contains("native-skip,"), "lists what is valid: {err}");
    }
    assert_eq!(store(data.path()).run_count().expect("count"), 2);
}

/// A child's stderr up to the line that says it is inside the save transaction.
fn wait_for_pause(child: &mut Child) {
    let stderr = child.stderr.take().expect("stderr piped");
    let mut lines = BufReader::new(stderr).lines();
    let started = Instant::now();
    loop {
        let line = lines
            .next()
            .expect("the child ended before its save paused")
            .expect("stderr");
        if line.contains("inside the save transaction") {
            return;
        }
        // A hang guard, not a performance target: a child that talks but never pauses.
        assert!(started.elapsed() < Duration::from_secs(60), "no pause");
    }
}

fn import_child(data: &Path, file: &Path, pause_ms: Option<u64>) -> Child {
    let mut cmd = irqbench(data);
    cmd.args(["import", path_str(file)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(ms) = pause_ms {
        cmd.env(SAVE_PAUSE_ENV, ms.to_string());
    }
    cmd.spawn().expect("spawn")
}

/// Two processes save at once: first both creating the database, then one while the other
/// holds the write transaction (the second waits for it). Every run lands.
#[test]
fn two_processes_saving_at_once_both_land() {
    let data = tempfile::tempdir().expect("tmp");
    let dir = tempfile::tempdir().expect("tmp");
    let files: Vec<PathBuf> = (0..4u64)
        .map(|i| {
            results_file(
                dir.path(),
                &format!("r{i}.json"),
                1_700_000_000 + i,
                14_000.0,
            )
        })
        .collect();
    // Creating the database at once races the schema and the application id: a few times, each
    // in a fresh folder (this once mistook a half-created history for a foreign file).
    for _ in 0..5 {
        let fresh = tempfile::tempdir().expect("tmp");
        let both = [
            import_child(fresh.path(), &files[0], None),
            import_child(fresh.path(), &files[1], None),
        ];
        for c in both {
            let out = c.wait_with_output().expect("wait");
            assert!(out.status.success(), "{}", text(&out.stderr));
        }
        assert_eq!(store(fresh.path()).run_count().expect("count"), 2);
    }
    for f in &files[..2] {
        let out = run(data.path(), &["import", path_str(f)]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let mut holder = import_child(data.path(), &files[2], Some(1500));
    wait_for_pause(&mut holder);
    let waiter = irqbench(data.path())
        .args(["import", path_str(&files[3])])
        .output()
        .expect("spawn");
    assert!(waiter.status.success(), "{}", text(&waiter.stderr));
    assert!(holder.wait().expect("wait").success());
    let s = store(data.path());
    assert_eq!(s.run_count().expect("count"), 4);
    assert_eq!(s.integrity_check().expect("check"), "ok");
}

/// SIGKILL inside the save transaction: the database is intact, the earlier runs are all
/// there and the killed run is not; the next save works.
#[test]
fn a_kill_mid_save_loses_only_that_run() {
    let data = tempfile::tempdir().expect("tmp");
    let dir = tempfile::tempdir().expect("tmp");
    let first = results_file(dir.path(), "1.json", 1_700_000_001, 14_000.0);
    let second = results_file(dir.path(), "2.json", 1_700_000_002, 14_000.0);
    let killed = results_file(dir.path(), "3.json", 1_700_000_003, 14_000.0);
    let out = run(
        data.path(),
        &["import", path_str(&first), path_str(&second)],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut child = import_child(data.path(), &killed, Some(60_000));
    wait_for_pause(&mut child);
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGKILL) }, 0);
    let status = child.wait().expect("wait");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
    let s = store(data.path());
    assert_eq!(s.integrity_check().expect("check"), "ok");
    assert_eq!(s.run_count().expect("count"), 2);
    assert!(s.report(1).is_ok() && s.report(2).is_ok());
    drop(s);
    let out = run(data.path(), &["import", path_str(&killed)]);
    assert!(
        text(&out.stdout).contains("as run 3"),
        "{}",
        text(&out.stdout)
    );
}

/// A file at --db that is not an irqbench history is named and left byte for byte; a FIFO or
/// a link there is refused without being opened.
#[test]
fn a_database_path_that_is_not_ours_is_refused_and_untouched() {
    let data = tempfile::tempdir().expect("tmp");
    let dir = tempfile::tempdir().expect("tmp");
    let json = results_file(dir.path(), "r.json", 1_700_000_000, 14_000.0);
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "not a database\n".repeat(10)).expect("write");
    let link = dir.path().join("link.sqlite");
    std::os::unix::fs::symlink(&notes, &link).expect("symlink");
    for (db, expected) in [(&notes, "not an SQLite database"), (&link, "symbolic link")] {
        let out = run(
            data.path(),
            &["import", path_str(&json), "--db", path_str(db)],
        );
        assert_eq!(out.status.code(), Some(2), "{db:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains(expected) && err.contains(path_str(db)),
            "{err}"
        );
        // A run with that --db fails before any VM starts, with 2.
        let out = run(data.path(), &["run", "quick", "--db", path_str(db)]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains(expected),
            "{}",
            text(&out.stderr)
        );
    }
    assert_eq!(
        std::fs::read_to_string(&notes).expect("notes"),
        "not a database\n".repeat(10)
    );
    assert!(!db_path(data.path()).exists(), "the default was not used");
}

/// No output may be written over the history database (the default one or --db), under any
/// spelling, nor over the files SQLite keeps beside it: each is refused with 2 before anything
/// runs, and the saved runs stay.
#[test]
fn outputs_never_replace_the_history_database() {
    let data = tempfile::tempdir().expect("tmp");
    let dir = tempfile::tempdir().expect("tmp");
    let json = results_file(dir.path(), "r.json", 1_700_000_000, 14_000.0);
    let out = run(data.path(), &["import", path_str(&json)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(data.path(), &["baseline", "save", "B"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let db = db_path(data.path());
    let respelled = data.path().join("irqbench/./history.sqlite");
    let wal = data.path().join("irqbench/history.sqlite-wal");
    let other = dir.path().join("other.sqlite");
    let cases: Vec<Vec<&str>> = vec![
        vec!["run", "quick", "-q", "--json", path_str(&db)],
        vec!["run", "quick", "-q", "--csv", path_str(&respelled)],
        vec!["run", "quick", "-q", "--markdown", path_str(&wal)],
        vec![
            "run",
            "quick",
            "-q",
            "--db",
            path_str(&other),
            "--json",
            path_str(&other),
        ],
        vec!["history", "--svg", path_str(&db)],
        vec!["check", "quick", "--baseline", "B", "--json", path_str(&db)],
    ];
    for args in cases {
        let out = run_no_kvm(data.path(), &args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("history database"), "{args:?}: {err}");
    }
    assert_eq!(store(data.path()).run_count().expect("runs"), 1);
    assert!(!wal.exists() && !other.exists());
}

/// `history --svg -` puts the chart alone on stdout, so `> trend.svg` is an SVG; with --json,
/// which also wants stdout, it is refused.
#[test]
fn history_svg_to_stdout_is_the_whole_stdout() {
    let data = tempfile::tempdir().expect("tmp");
    let dir = tempfile::tempdir().expect("tmp");
    let json = results_file(dir.path(), "r.json", 1_700_000_000, 14_000.0);
    assert!(run(data.path(), &["import", path_str(&json)])
        .status
        .success());
    let out = run(data.path(), &["history", "--svg", "-"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let svg = text(&out.stdout);
    assert!(svg.trim_end().ends_with("</svg>"), "{svg}");
    assert!(
        !svg.contains("per row and run"),
        "the table follows the chart"
    );
    let out = run(data.path(), &["history", "--json", "--svg", "-"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("stdout"));
}

/// At least 20 rounds a run, the shipped default: the check below asserts the plumbing, and the
/// svm box's TCG once ran the second of two runs that had stopped after a few rounds 58% slower.
fn tiny_config(dir: &Path, body_ops: u32) -> PathBuf {
    let path = dir.join(format!("tiny-{body_ops}.toml"));
    std::fs::write(
        &path,
        format!(
            "name = \"tiny\"\n[run]\nmax_seconds = 0.5\nmin_rounds = 20\n\n[[bench]]\n\
             name = \"t\"\nstrategies = [\"native-popf\", \"native-skip\"]\n\
             body_ops = {body_ops}\n"
        ),
    )
    .expect("write config");
    path
}

/// A run is saved (and --no-save is not); check passes against the same config and fails,
/// with 1, against a heavier critical section under the same row names.
#[test]
fn runs_are_saved_and_check_gates_a_regression() {
    if irqbench::host::test_kvm().is_none() {
        return;
    }
    let data = tempfile::tempdir().expect("tmp");
    let dir = tempfile::tempdir().expect("tmp");
    let light = tiny_config(dir.path(), 4);
    let heavy = tiny_config(dir.path(), 64);
    let out = run(data.path(), &["run", path_str(&light), "-q"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(data.path(), &["run", path_str(&light), "-q", "--no-save"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(store(data.path()).run_count().expect("count"), 1);
    let out = run(data.path(), &["baseline", "save", "B"]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    // A generous threshold and costs in units of the loop: this asserts the plumbing, not the
    // host's speed (here, a second apart, the `empty` loop once ran +55.6% slower, every
    // cycles/op +51–55% with it: the raw gate failed at 50%).
    let out = run(
        data.path(),
        &[
            "check",
            path_str(&light),
            "--baseline",
            "B",
            "--max-regression",
            "50",
            "--normalised",
            "-q",
        ],
    );
    let verdict = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{verdict}{}", text(&out.stderr));
    assert!(
        verdict.contains("| row |") && verdict.contains("check passed"),
        "{verdict}"
    );

    let out = run(
        data.path(),
        &["check", path_str(&heavy), "--baseline", "B", "-q"],
    );
    let verdict = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{verdict}{}", text(&out.stderr));
    assert!(
        verdict.contains("check FAILED") && verdict.contains("native-popf"),
        "{verdict}"
    );
    assert_eq!(
        store(data.path()).run_count().expect("count"),
        3,
        "check runs are saved"
    );

    let out = run(
        data.path(),
        &["check", path_str(&light), "--baseline", "nope"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no baseline `nope`"));
}

/// A default location that cannot be created: the run warns, prints its table, and exits 1,
/// since the save it was asked for (no --no-save) did not happen.
#[test]
fn an_unusable_default_location_warns_and_keeps_the_results() {
    if irqbench::host::test_kvm().is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "a file where a folder should be").expect("write");
    let config = tiny_config(dir.path(), 4);
    let out = run(&blocker.join("data"), &["run", path_str(&config)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("cycles/op"));
    assert!(
        text(&out.stderr).contains("will not be saved"),
        "{}",
        text(&out.stderr)
    );
}

/// A history of two imported runs (ids 1 and 2) with baseline `B` at `db`, in a folder any
/// user may enter.
fn two_run_history(dir: &Path, db: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let a = results_file(dir, "a.json", 1_700_000_000, 14_750.0);
    let b = results_file(dir, "b.json", 1_700_000_600, 18_000.0);
    for file in [&a, &b] {
        let out = run(dir, &["import", path_str(file), "--db", path_str(db)]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let out = run(dir, &["baseline", "save", "B", "1", "--db", path_str(db)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// The binary as user nobody when this runs as root (root passes every permission check).
fn unprivileged(data: &Path) -> Option<Command> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some(irqbench(data));
    }
    let ids = ["--reuid=65534", "--regid=65534", "--clear-groups"];
    let probe = Command::new("setpriv").args(ids).arg("true").status();
    if !probe.is_ok_and(|s| s.success()) {
        return None;
    }
    let mut cmd = Command::new("setpriv");
    cmd.args(ids)
        .arg(env!("CARGO_BIN_EXE_irqbench"))
        .env("XDG_DATA_HOME", data)
        .env_remove(SAVE_PAUSE_ENV);
    Some(cmd)
}

/// The queries of a history this user may only read (another user's file in another user's
/// folder) open it read-only and work; a save into it says why it cannot.
#[test]
fn a_history_this_user_may_only_read_can_be_queried() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("h.sqlite");
    two_run_history(dir.path(), &db);
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).expect("chmod");
    }
    let queries: [&[&str]; 3] = [&["history"], &["baseline", "list"], &["compare", "1", "2"]];
    for args in queries {
        let Some(mut cmd) = unprivileged(dir.path()) else {
            eprintln!("skipped: cannot run as an unprivileged user here (setpriv)");
            return;
        };
        let out = cmd
            .args(args)
            .args(["--db", path_str(&db)])
            .output()
            .expect("spawn");
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        assert!(!out.stdout.is_empty(), "{args:?}");
    }
    let json = results_file(dir.path(), "c.json", 1_700_001_200, 15_000.0);
    let mut cmd = unprivileged(dir.path()).expect("worked above");
    let out = cmd
        .args(["import", path_str(&json), "--db", path_str(&db)])
        .output()
        .expect("spawn");
    let err = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("EACCES") && err.contains(path_str(&db)),
        "{err}"
    );
}

/// On a read-only mount the queries work, and a save names the mount (EROFS) as the cause.
/// The mount lives in a private mount namespace (`unshare -m`), gone when the test ends.
#[test]
fn a_history_on_a_read_only_mount_can_be_queried_and_names_erofs() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("h.sqlite");
    two_run_history(dir.path(), &db);
    let json = results_file(dir.path(), "c.json", 1_700_001_200, 15_000.0);
    let bin = env!("CARGO_BIN_EXE_irqbench");
    let (d, h) = (path_str(dir.path()), path_str(&db));
    let script = format!(
        "mount --bind {d} {d} && mount -o remount,ro,bind {d} || exit 77\n\
         {bin} history --db {h} >/dev/null && {bin} baseline list --db {h} >/dev/null && \
         {bin} compare 1 B --db {h} >/dev/null || exit 10\n\
         {bin} import {j} --db {h}; echo \"import exit $?\" >&2",
        j = path_str(&json)
    );
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .env("XDG_DATA_HOME", dir.path())
        .output();
    let Ok(out) = out else {
        eprintln!("skipped: no unshare here");
        return;
    };
    let err = text(&out.stderr);
    if out.status.code() == Some(77) || err.contains("unshare failed") {
        eprintln!("skipped: cannot make a read-only mount here: {err}");
        return;
    }
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("EROFS") && err.contains(h), "{err}");
    assert!(!err.contains("import exit 0"), "{err}");
}

/// A damaged database (its pages overwritten past the header): named with --db it is refused
/// before any VM starts (exit 2; it had measured, then failed the save); as the default
/// history the run goes on unsaved, its results printed, and its status is 1.
#[test]
fn a_damaged_history_is_found_before_the_run() {
    if irqbench::host::test_kvm().is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let db = db_path(dir.path());
    std::fs::create_dir_all(db.parent().unwrap()).expect("mkdir");
    two_run_history(dir.path(), &db);
    let mut bytes = std::fs::read(&db).expect("db");
    assert!(bytes.len() > 8192, "{} bytes", bytes.len());
    for b in &mut bytes[4096..] {
        *b = 0xa5;
    }
    std::fs::write(&db, &bytes).expect("damage");
    let config = tiny_config(dir.path(), 4);
    let out = run(
        dir.path(),
        &["run", path_str(&config), "--db", path_str(&db)],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is damaged") && !err.contains("running"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "nothing measured");
    let out = run(dir.path(), &["run", path_str(&config)]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("will not be saved"), "{err}");
    assert!(
        text(&out.stdout).contains("cycles/op"),
        "the table is still printed"
    );
}

/// A run that cannot start (no KVM device) leaves no history database behind.
#[test]
fn a_run_that_cannot_start_creates_no_database() {
    let data = tempfile::tempdir().expect("tmp");
    let out = irqbench(data.path())
        .args(["run", "quick"])
        .env("IRQBENCH_KVM_DEVICE", "/nonexistent/kvm")
        .output()
        .expect("spawn");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(!db_path(data.path()).exists(), "a database was created");
    assert!(
        !data.path().join("irqbench").exists(),
        "its folder was created"
    );
}

/// Without HOME or XDG_DATA_HOME the queries suggest what they take (--db), not --no-save.
#[test]
fn no_data_folder_hints_at_what_the_command_takes() {
    for args in [&["history"][..], &["baseline", "list"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_irqbench"))
            .args(args)
            .env_remove("HOME")
            .env_remove("XDG_DATA_HOME")
            .output()
            .expect("spawn");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("--db") && !err.contains("--no-save"), "{err}");
    }
}

/// A history that cannot grow under a file-size limit says so (the limit, EFBIG), not only
/// SQLite's "disk I/O error".
#[test]
fn a_file_size_limit_on_the_history_is_named() {
    use std::os::unix::process::CommandExt;
    let data = tempfile::tempdir().expect("tmp");
    let dir = tempfile::tempdir().expect("tmp");
    let json = results_file(dir.path(), "r.json", 1_700_000_000, 14_000.0);
    let mut cmd = irqbench(data.path());
    cmd.args(["import", path_str(&json)]);
    // SAFETY: setrlimit is async-signal-safe and touches only the child about to exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 4096,
                rlim_max: 4096,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let out = cmd.output().expect("spawn");
    let err = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("ulimit -f") && err.contains("EFBIG"), "{err}");
}
