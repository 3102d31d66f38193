//! The `irqbench` binary as a user meets it: real runs on /dev/kvm, errors, signals, compare.

mod common;

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Every run these tests start is saved in a history database under target/ (cargo's
/// CARGO_TARGET_TMPDIR), never in the real ~/.local/share.
fn irqbench() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_irqbench"));
    cmd.env(
        "XDG_DATA_HOME",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-xdg-data"),
    );
    cmd
}

fn run(args: &[&str]) -> Output {
    let out = irqbench().args(args).output().expect("spawn irqbench");
    common::check_written_reports(args, &out);
    out
}

/// `run` with no KVM device: a command that got past its checks would fail on opening KVM
/// instead, so a refusal it gives was given before anything ran.
fn run_no_kvm(args: &[&str]) -> Output {
    irqbench()
        .env("IRQBENCH_KVM_DEVICE", "/nonexistent/kvm")
        .args(args)
        .output()
        .expect("spawn irqbench")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The library's check: honours IRQBENCH_KVM_DEVICE, and panics instead of skipping under
/// IRQBENCH_REQUIRE_KVM=1.
fn kvm_or_skip() -> bool {
    irqbench::host::test_kvm().is_some()
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// A config that runs quickly: two strategies, short phases.
fn tiny_config(dir: &Path, strategies: &[&str]) -> PathBuf {
    let list: Vec<String> = strategies.iter().map(|s| format!("\"{s}\"")).collect();
    let path = dir.join("tiny.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"tiny\"\n[run]\nmax_seconds = 0.5\nmin_rounds = 6\n\n\
             [[bench]]\nname = \"t\"\nstrategies = [{}]\n",
            list.join(", ")
        ),
    )
    .expect("write config");
    path
}

/// An argument clap does not know is quoted twice in its error (the message and its tip, `use
/// '-- ARG'`): a newline in it never starts a line of its own in either.
#[test]
fn a_newline_in_an_unknown_argument_never_starts_a_line() {
    let out = run(&["compare", "--x\nerror: check passed", "a.json", "b.json"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--x\\nerror"), "{err}");
    assert!(
        !err.lines()
            .any(|l| l.trim_start().starts_with("error: check passed")),
        "{err}"
    );
}

/// `history --last` past u64 said only "number too large to fit in target type": every
/// refused value names the valid range.
#[test]
fn history_last_out_of_range_names_the_range() {
    let dir = tmp();
    for bad in ["0", "100001", "99999999999999999999", "x"] {
        let out = irqbench()
            .env("XDG_DATA_HOME", dir.path())
            .args(["history", "--last", bad])
            .output()
            .expect("spawn");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("1..=100000"), "{bad}: {err}");
    }
}

#[test]
fn every_command_has_help_with_examples() {
    for args in [
        vec!["--help"],
        vec!["run", "--help"],
        vec!["host", "--help"],
        vec!["validate", "--help"],
        vec!["reference", "--help"],
        vec!["disasm", "--help"],
        vec!["compare", "--help"],
        vec!["list", "--help"],
        vec!["completions", "--help"],
        vec!["history", "--help"],
        vec!["baseline", "--help"],
        vec!["check", "--help"],
        vec!["import", "--help"],
    ] {
        let out = run(&args);
        assert!(out.status.success(), "{args:?}");
        let help = text(&out.stdout);
        assert!(
            help.contains("Example"),
            "{args:?} has no examples:\n{help}"
        );
    }
}

#[test]
fn a_bad_config_names_file_line_and_key() {
    let dir = tmp();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "name = \"bad\"\n\n[[bench]]\nname = \"b\"\nstrategies = [\"native-pop\"]\n",
    )
    .expect("write");
    let out = run(&["run", path.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("bad.toml:5:"), "{err}");
    assert!(err.contains("bench[0].strategies[0]"), "{err}");
    assert!(err.contains("native-popf"), "no suggestion: {err}");
}

/// 2000 groups of an hour each (83 days) are refused before anything opens KVM, unless
/// --yes confirms them.
#[test]
fn a_plan_longer_than_an_hour_needs_yes() {
    let dir = tmp();
    let config = dir.path().join("long.toml");
    let nesting: Vec<String> = (0..2000)
        .map(|i| format!("{}", f64::from(i) / 2000.0))
        .collect();
    std::fs::write(
        &config,
        format!(
            "name = \"long\"\n[run]\nmax_seconds = 3600\n[[bench]]\nname = \"l\"\n\
             strategies = [\"native-popf\"]\nnesting = [{}]\n",
            nesting.join(", ")
        ),
    )
    .expect("write");
    let no_kvm = dir.path().join("no-kvm");
    let run = |extra: &[&str]| {
        irqbench()
            .args(["run", path_str(&config), "--no-save"])
            .args(extra)
            .env("IRQBENCH_KVM_DEVICE", &no_kvm)
            .output()
            .expect("spawn")
    };
    let out = run(&[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for w in [
        "long.toml",
        "about 83 days (2000 groups",
        "more than an hour",
        "--yes",
    ] {
        assert!(stderr.contains(w), "{w:?} missing: {stderr}");
    }
    // Confirmed, it goes on to open KVM (which this test made absent).
    let out = run(&["--yes"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("more than an hour"), "{stderr}");
}

#[test]
fn a_missing_or_malformed_guest_gives_a_clear_error() {
    if !kvm_or_skip() {
        return;
    }
    let out = run(&["run", "--guest", "/nonexistent/guest.elf"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("cannot read guest image /nonexistent/guest.elf"),
        "{err}"
    );

    let dir = tmp();
    let junk = dir.path().join("junk.elf");
    std::fs::write(&junk, b"#!/bin/sh\necho not an elf\n").expect("write");
    let out = run(&["run", "--guest", junk.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("not a valid guest kernel") && err.contains("junk.elf"),
        "{err}"
    );
}

#[test]
fn a_missing_kvm_device_gives_a_clear_error() {
    let out = irqbench()
        .args(["run"])
        .env("IRQBENCH_KVM_DEVICE", "/nonexistent/kvm")
        .output()
        .expect("spawn");
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("/nonexistent/kvm does not exist"), "{err}");
}

#[test]
fn host_names_the_kvm_flavour_it_runs_on() {
    if !kvm_or_skip() {
        return;
    }
    let out = run(&["host", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let flavour = m["kvm_flavour"].as_str().expect("a flavour").to_owned();
    assert!(
        ["vmx", "svm", "pvm"].contains(&flavour.as_str()),
        "{flavour}"
    );
    // Declared, then confirmed by a guest's behaviour: the two agree on a sound host.
    assert_eq!(
        m["flavour"]["behavioural"],
        flavour.as_str(),
        "{}",
        m["flavour"]
    );
    assert!(m["flavour"]["behaviour"]["value"]["insn_emulation_per_cli"].is_number());
    let stdout = text(&run(&["host"]).stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("kvm flavour:") && l.contains(&format!(" {flavour} ("))),
        "{stdout}"
    );
}

#[test]
fn host_json_carries_every_manifest_field_or_why_not() {
    if !kvm_or_skip() {
        return;
    }
    let out = run(&["host", "--json"]);
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    for field in [
        "kernel_cmdline",
        "vulnerabilities",
        "cpufreq",
        "smt",
        "microcode",
        "load_average",
    ] {
        let v = &m[field];
        let readable = v.get("value").is_some()
            || v.get("unavailable")
                .and_then(|w| w.as_str())
                .is_some_and(|w| !w.is_empty());
        assert!(readable, "{field}: {v}");
    }
    assert!(m["pinning"]["pinned"].is_boolean(), "{}", m["pinning"]);
    assert!(
        m["pinning"]["isolated_cpus"].is_object(),
        "{}",
        m["pinning"]
    );
    let apicv = m["apicv"].as_array().expect("apicv per irqchip mode");
    assert!(
        apicv
            .iter()
            .any(|a| a["irqchip"] == "userspace" && a["in_effect"]["value"] == false),
        "{apicv:?}"
    );
    assert!(
        m["module_params"]["kvm.min_timer_period_us"].is_string(),
        "{}",
        m["module_params"]
    );
}

#[test]
fn validate_judges_this_host_and_exits_by_its_verdict() {
    if !kvm_or_skip() {
        return;
    }
    let out = run(&["validate", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let v = &doc["validation"];
    let checks = v["checks"].as_array().expect("checks");
    assert_eq!(checks.len(), 18, "{v}");
    for c in checks {
        assert!(
            ["pass", "not-judged", "warn", "fail"].contains(&c["verdict"].as_str().unwrap_or("")),
            "{c}"
        );
        assert!(
            c["expected"].is_string() && c["measured"].is_string(),
            "{c}"
        );
    }
    let failed = v["verdict"] == "fail";
    assert_eq!(out.status.code(), Some(i32::from(failed)), "{v}");
    assert!(!failed, "this host fails validation: {v:#}");
    assert_eq!(doc["host"]["kvm_flavour"], v["flavour"]);
    let out = run(&["validate"]);
    let text = text(&out.stdout);
    assert!(
        text.contains("expected:") && text.contains("measured:"),
        "{text}"
    );
    assert!(
        text.lines().last().is_some_and(|l| l.contains(" PASS, ")),
        "{text}"
    );
}

#[test]
fn run_writes_every_output_and_compare_reads_them() {
    if !kvm_or_skip() {
        return;
    }
    let dir = tmp();
    let config = tiny_config(dir.path(), &["native-popf", "native-skip"]);
    let a = dir.path().join("a.json");
    let b = dir.path().join("b.json");
    let csv = dir.path().join("a.csv");
    let md = dir.path().join("a.md");
    let out = run(&[
        "run",
        config.to_str().expect("utf-8"),
        "--json",
        a.to_str().expect("utf-8"),
        "--csv",
        csv.to_str().expect("utf-8"),
        "--markdown",
        md.to_str().expect("utf-8"),
        "--out",
        dir.path().to_str().expect("utf-8"),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(
        table.contains("native-popf") && table.contains("cycles/op"),
        "{table}"
    );
    let svg = std::fs::read_to_string(a.with_extension("svg")).expect("svg next to the JSON");
    assert!(svg.contains("<svg"));
    assert!(std::fs::read_to_string(&csv).expect("csv").lines().count() == 3);
    assert!(std::fs::read_to_string(&md).expect("md").contains("|---"));
    let folders: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .flatten()
        .filter(|e| e.path().is_dir())
        .collect();
    assert_eq!(folders.len(), 1, "one results folder");

    let out = run(&[
        "run",
        config.to_str().expect("utf-8"),
        "--quiet",
        "--json",
        b.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success());
    assert!(
        out.stdout.is_empty(),
        "--quiet printed: {}",
        text(&out.stdout)
    );

    // Same config twice: a delta for every result, each judged against the noise.
    let out = run(&[
        "compare",
        a.to_str().expect("utf-8"),
        b.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success());
    let cmp = text(&out.stdout);
    for name in ["t/native-popf/n0/none/1v", "t/native-skip/n0/none/1v"] {
        assert!(cmp.contains(name), "{cmp}");
    }
    assert!(cmp.contains("-->") && cmp.contains("noise"), "{cmp}");
    // A run against itself: every change is 0% and within noise.
    let out = run(&[
        "compare",
        a.to_str().expect("utf-8"),
        a.to_str().expect("utf-8"),
    ]);
    let same = text(&out.stdout);
    assert!(
        !same
            .lines()
            .any(|l| l.contains("-->") && l.contains("beyond noise")),
        "{same}"
    );
    assert!(!same.contains("host speed differs"), "{same}");
    compare_normalised_is_in_units_of_the_loop(&a, &b);

    // Different strategies: the differences are listed.
    let other = tiny_config(dir.path(), &["native-popf", "pvop-skip"]);
    let c = dir.path().join("c.json");
    let out = run(&[
        "run",
        other.to_str().expect("utf-8"),
        "-q",
        "--json",
        c.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success());
    let out = run(&[
        "compare",
        a.to_str().expect("utf-8"),
        c.to_str().expect("utf-8"),
    ]);
    let diff = text(&out.stdout);
    assert!(
        diff.contains("native-skip") && diff.contains("pvop-skip"),
        "{diff}"
    );
}

/// `compare --normalised` of two runs of one config: costs and throughput in units of the loop,
/// no raw ops/s.
fn compare_normalised_is_in_units_of_the_loop(a: &Path, b: &Path) {
    let out = run(&[
        "compare",
        "--normalised",
        a.to_str().expect("utf-8"),
        b.to_str().expect("utf-8"),
    ]);
    let normalised = text(&out.stdout);
    assert!(out.status.success(), "{normalised}");
    assert!(
        normalised.contains("cost/loop")
            && normalised.contains("ops/loop")
            && !normalised.contains("ops/s"),
        "{normalised}"
    );
}

/// Starts a two-group run, sends `signal` once the first group's line is on stderr, and returns
/// the exit code, stderr, the parsed JSON the run left behind and how long after the signal the
/// run exited.
fn signal_mid_run(signal: i32) -> (Option<i32>, String, serde_json::Value, Duration) {
    let dir = tmp();
    let json = dir.path().join("partial.json");
    let config = dir.path().join("long.toml");
    // Two groups of 2 s each (precision out of reach): the signal goes out when the first
    // group's line reaches stderr, so it lands in the second group's 2 s however fast the host
    // boots and measures (a fixed delay was still booting under an emulator).
    std::fs::write(
        &config,
        "name = \"long\"\n[run]\nmax_seconds = 2\nprecision = 0.0001\n\n\
         [[bench]]\nname = \"short\"\nstrategies = [\"native-popf\"]\n\n\
         [[bench]]\nname = \"l\"\n",
    )
    .expect("write");
    let mut child = irqbench()
        .args(["run", path_str(&config), "--json", path_str(&json)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, lines) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(300);
    while !seen.contains("group 1/2") {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => seen.push_str(&(line + "\n")),
            Err(_) => {
                let _ = child.kill();
                panic!("no \"group 1/2\" line within 300 s; stderr:\n{seen}");
            }
        }
    }
    // SAFETY: kill(2) on our own child's pid, which has not been waited for.
    unsafe { libc::kill(child.id() as i32, signal) };
    let sent = Instant::now();
    let status = wait_bounded(&mut child, Duration::from_secs(120));
    let took = sent.elapsed();
    reader.join().expect("stderr reader");
    seen.extend(lines.try_iter().map(|l| l + "\n"));
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|e| panic!("partial JSON not written ({e}); stderr:\n{seen}"));
    let report: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    common::assert_matches_schema(&report, "the partial report");
    // The signal ended the run at the second group (before, while booting or during it), not
    // its budget or the plan; the first group's results stay in the report.
    let reason = report["partial_reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("stopped by signal ") && reason.contains("l/n0/none/1v"),
        "{reason:?}"
    );
    let results = report["results"].as_array().expect("results");
    assert!(
        results
            .iter()
            .any(|r| r["name"].as_str().is_some_and(|n| n.starts_with("short/"))),
        "the first group's rows are kept: {results:?}"
    );
    (status.code(), seen, report, took)
}

/// Waits for `child` at most `bound`, then kills it and fails.
fn wait_bounded(child: &mut std::process::Child, bound: Duration) -> std::process::ExitStatus {
    let until = Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("the run did not exit within {bound:?} of the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `config` with --json, sends `signal` after `after`, and waits at most `bound` for the
/// exit (then kills it): (exit code, stderr, JSON text if written).
fn signal_run(
    config: &Path,
    signal: i32,
    after: Duration,
    bound: Duration,
) -> (Option<i32>, String, Option<String>) {
    let dir = tmp();
    let json = dir.path().join("out.json");
    let mut child = irqbench()
        .args([
            "run",
            path_str(config),
            "--no-save",
            "--json",
            path_str(&json),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    std::thread::sleep(after);
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, signal) };
    let sent = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if sent.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
    }
    let status =
        status.unwrap_or_else(|| panic!("still running {bound:?} after the signal:\n{stderr}"));
    (status.code(), stderr, std::fs::read_to_string(&json).ok())
}

/// An interrupt load of one event per 20 s: its thread used to sleep the whole period, and
/// stopping it joined that sleep, so SIGTERM took 20 s (at 0.01 Hz, SIGKILL). The run now
/// stops at once, says so, and leaves a partial JSON.
#[test]
fn a_signal_stops_a_run_under_a_slow_interrupt_load_at_once() {
    if !kvm_or_skip() {
        return;
    }
    let dir = tmp();
    let config = dir.path().join("slow.toml");
    std::fs::write(
        &config,
        "name = \"slow\"\n[run]\nmax_seconds = 30\nprecision = 0.0001\n\n[[bench]]\nname = \"s\"\n\
         strategies = [\"native-popf\"]\nirq = [{ source = \"inject\", rate_hz = 0.05 }]\n",
    )
    .expect("write");
    // Bound: ten times what a stop may take (1 s); the period is 20 s.
    let (code, stderr, json) = signal_run(
        &config,
        libc::SIGTERM,
        Duration::from_millis(2500),
        Duration::from_secs(10),
    );
    assert_eq!(code, Some(130), "stderr:\n{stderr}");
    assert!(stderr.contains("SIGTERM: stopping"), "{stderr}");
    let report: serde_json::Value =
        serde_json::from_str(&json.expect("partial JSON")).expect("valid JSON");
    assert_eq!(report["partial"], serde_json::Value::Bool(true));
}

/// A SIGINT while the run is being saved (held there by the test pause) said "stopping" and
/// then exited 0; the README promises 130 for a signal after the last round. The run itself is
/// saved whole (the transaction was under way).
#[test]
fn a_signal_during_the_save_exits_130() {
    if !kvm_or_skip() {
        return;
    }
    let dir = tmp();
    let config = tiny_config(dir.path(), &["native-popf"]);
    let db = dir.path().join("h.sqlite");
    let mut child = irqbench()
        .args(["run", path_str(&config), "-q", "--db", path_str(&db)])
        .env(irqbench::history::SAVE_PAUSE_ENV, "3000")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let n = std::io::BufRead::read_line(&mut stderr, &mut line).expect("read stderr");
        seen.push_str(&line);
        if n == 0 || line.contains("pausing") {
            break;
        }
    }
    assert!(seen.contains("pausing"), "no save pause:\n{seen}");
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let sent = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if sent.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("still running 10 s after SIGINT:\n{seen}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = std::io::Read::read_to_string(&mut stderr, &mut seen);
    assert_eq!(status.code(), Some(130), "stderr:\n{seen}");
    assert!(seen.contains("SIGINT: stopping"), "{seen}");
    // The run was saved whole (partial = false): the message had said "marked partial".
    assert!(
        seen.contains("written whole") && !seen.contains("so far is written"),
        "{seen}"
    );
}

#[test]
fn sigint_stops_the_run_and_leaves_a_partial_json() {
    if !kvm_or_skip() {
        return;
    }
    let (code, stderr, report, took) = signal_mid_run(libc::SIGINT);
    assert_eq!(code, Some(130), "stderr:\n{stderr}");
    // The signal wakes every wait: the vCPUs are stopped and the partial report written at
    // once, not after the group's 2 s budget or a poll.
    assert!(
        took < Duration::from_secs(2),
        "exited {took:?} after SIGINT:\n{stderr}"
    );
    assert_eq!(report["partial"], serde_json::Value::Bool(true));
    assert_eq!(report["schema"], irqbench::results::SCHEMA);
}

#[test]
fn hypercall_instructions_are_refused_on_pvm_with_a_clear_error() {
    if !kvm_or_skip() {
        return;
    }
    if !Path::new("/sys/module/kvm_pvm").exists() {
        eprintln!("skipped: only PVM hosts refuse vmcall and vapic-poll");
        return;
    }
    let dir = tmp();
    for transport in ["vmcall", "vapic-poll"] {
        let config = dir.path().join(format!("{transport}.toml"));
        std::fs::write(
            &config,
            format!(
                "name = \"hc\"\n[run]\nhypercall = \"{transport}\"\n\n[[bench]]\nname = \"v\"\n\
                 strategies = [\"vif-skip\"]\n"
            ),
        )
        .expect("write");
        let out = run(&["run", config.to_str().expect("utf-8")]);
        // A config this host cannot run is a bad config: 2, naming the file.
        assert_eq!(out.status.code(), Some(2));
        let err = text(&out.stderr);
        assert!(
            err.contains(path_str(&config))
                && err.contains(&format!("hypercall = \"{transport}\""))
                && err.contains("livelocks")
                && err.contains("\"port\""),
            "{err}"
        );
    }
}

#[test]
fn a_lapic_period_below_kvms_minimum_is_refused_naming_file_bench_and_limit() {
    if !kvm_or_skip() {
        return;
    }
    let min: u64 = std::fs::read_to_string("/sys/module/kvm/parameters/min_timer_period_us")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    if min < 2 {
        eprintln!("skipped: kvm.min_timer_period_us is unreadable or below 2 µs here");
        return;
    }
    let dir = tmp();
    let config = dir.path().join("fast-timer.toml");
    std::fs::write(
        &config,
        format!(
            "name = \"t\"\n\n[[bench]]\nname = \"lt\"\nstrategies = [\"native-popf\"]\n\
             irq = [{{ source = \"lapic-timer\", period_us = {} }}]\n",
            min / 2
        ),
    )
    .expect("write");
    let out = run(&["run", path_str(&config)]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    for part in [
        path_str(&config),
        "bench \"lt\"",
        &format!("period_us = {}", min / 2),
        &format!("kvm.min_timer_period_us = {min}"),
    ] {
        assert!(err.contains(part), "{part:?} missing: {err}");
    }
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path_str(path)).expect("no NUL");
    // SAFETY: mkfifo reads the NUL-terminated path, which outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// The write end of a pipe whose read end is already closed: every write gets EPIPE.
fn closed_pipe() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two-element array it is given.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both fds were just created by pipe2 and are owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    Stdio::from(write)
}

/// Outputs at a symlink or a FIFO (stand-ins for device nodes) are refused before anything
/// runs: the link and the FIFO stay as they were, and no chart appears beside them.
#[test]
fn outputs_that_are_not_regular_files_are_refused_and_left_alone() {
    let dir = tmp();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "keep").expect("write");
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&victim, &link).expect("symlink");
    let fifo = dir.path().join("fifo.json");
    mkfifo(&fifo);
    for (flag, path, kind) in [
        ("--json", &link, "symbolic link"),
        ("--json", &fifo, "FIFO"),
        ("--csv", &fifo, "FIFO"),
        ("--markdown", &link, "symbolic link"),
    ] {
        let out = run_no_kvm(&["run", "quick", "-q", flag, path_str(path)]);
        assert_eq!(out.status.code(), Some(2), "{flag} {path:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains(kind) && err.contains(path_str(path)),
            "{flag}: {err}"
        );
    }
    assert!(std::fs::symlink_metadata(&link)
        .expect("link")
        .file_type()
        .is_symlink());
    assert!(std::fs::symlink_metadata(&fifo)
        .expect("fifo")
        .file_type()
        .is_fifo());
    assert_eq!(std::fs::read_to_string(&victim).expect("victim"), "keep");
    assert!(!link.with_extension("svg").exists() && !fifo.with_extension("svg").exists());
}

/// Every output problem is found before the first VM starts, so these fail at once with 2 and
/// touch nothing.
#[test]
fn bad_output_paths_fail_before_the_run() {
    let dir = tmp();
    let config = tiny_config(dir.path(), &["native-popf"]);
    let before = std::fs::read_to_string(&config).expect("config");
    let x = dir.path().join("x");
    let x_again = format!("{}/./x", path_str(dir.path()));
    let cfg = path_str(&config);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--json", "/nonexistent/x.json"], "/nonexistent"),
        (vec!["--json", path_str(&x), "--csv", &x_again], "both name"),
        (vec!["--markdown", cfg], "config"),
        (vec!["--json", "-", "--csv", "-"], "both name"),
        (vec!["--json", path_str(dir.path())], "directory"),
    ];
    for (extra, expected) in cases {
        let mut args = vec!["run", cfg, "-q"];
        args.extend(&extra);
        let out = run_no_kvm(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(expected), "{extra:?}: {err}");
    }
    assert_eq!(std::fs::read_to_string(&config).expect("config"), before);
    assert!(!x.exists());
}

#[test]
fn a_device_as_guest_fails_at_once() {
    let out = run_no_kvm(&["run", "--guest", "/dev/zero"]);
    assert_ne!(out.status.code(), Some(0));
    let err = text(&out.stderr);
    assert!(
        err.contains("/dev/zero") && err.contains("character device"),
        "{err}"
    );
}

/// A config or results file that is a device or FIFO is refused at once, never read or waited on.
#[test]
fn devices_and_fifos_as_config_or_results_fail_at_once() {
    let dir = tmp();
    let fifo = dir.path().join("in.fifo");
    mkfifo(&fifo);
    for input in ["/dev/zero", path_str(&fifo)] {
        for args in [vec!["run", input], vec!["compare", input, input]] {
            let out = run_no_kvm(&args);
            assert_eq!(out.status.code(), Some(2), "{args:?}");
            assert!(text(&out.stderr).contains("not a regular file"), "{args:?}");
        }
    }
}

/// `irqbench list | head -1` and friends: a closed pipe ends quietly with 141, never a panic.
#[test]
fn a_closed_stdout_pipe_ends_quietly_with_141() {
    let mut commands = vec![vec!["list"], vec!["disasm"], vec!["completions", "bash"]];
    if kvm_or_skip() {
        commands.push(vec!["host"]);
        commands.push(vec!["host", "--json"]);
    }
    for args in commands {
        let out = irqbench()
            .args(&args)
            .stdout(closed_pipe())
            .output()
            .expect("spawn");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(141), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?} complained: {err}");
    }
}

#[test]
fn a_full_stdout_is_an_error() {
    for args in [vec!["list"], vec!["disasm", "native-popf"]] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let out = irqbench().args(&args).stdout(full).output().expect("spawn");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.contains("stdout") && !err.contains("panicked"), "{err}");
    }
}

/// `--help` and `--version` are clap's, printed like every other stdout: 141 on a closed pipe,
/// 1 with a message on a full disk (clap's own printing said nothing and exited 0).
#[test]
fn help_and_version_check_their_stdout_too() {
    for args in [vec!["--help"], vec!["--version"], vec!["run", "--help"]] {
        let out = irqbench()
            .args(&args)
            .stdout(closed_pipe())
            .output()
            .expect("spawn");
        assert_eq!(out.status.code(), Some(141), "{args:?}");
        assert!(out.stderr.is_empty(), "{args:?}: {}", text(&out.stderr));
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let out = irqbench().args(&args).stdout(full).output().expect("spawn");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(text(&out.stderr).contains("stdout"), "{args:?}");
        let out = run(&args);
        assert!(out.status.success() && !out.stdout.is_empty(), "{args:?}");
    }
    // Usage errors still go to stderr with 2.
    let out = run(&["run", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--no-such-flag"));
}

/// Under a file-size limit (`ulimit -f`) a write that passes it is an error with a message
/// (EFBIG), not SIGXFSZ killing irqbench before it can report, save or print anything else.
#[test]
fn a_file_size_limit_is_a_write_error_not_a_kill() {
    use std::os::unix::process::CommandExt;
    let dir = tmp();
    let file = std::fs::File::create(dir.path().join("out.txt")).expect("create");
    let mut cmd = irqbench();
    cmd.args(["completions", "bash"]).stdout(file);
    // SAFETY: setrlimit is async-signal-safe and touches only the child about to exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 512,
                rlim_max: 512,
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
    assert_eq!(out.status.code(), Some(1), "{:?}: {err}", out.status);
    assert!(err.contains("stdout") && err.contains("too large"), "{err}");
}

#[test]
fn min_change_must_be_a_finite_percentage() {
    for bad in ["--min-change=nan", "--min-change=-5", "--min-change=inf"] {
        let out = run(&["compare", "a.json", "b.json", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(text(&out.stderr).contains("0..=1000"), "{bad}");
    }
}

#[test]
fn a_kvm_device_variable_naming_something_else_is_refused() {
    for device in ["/dev/null", "/dev/zero"] {
        let out = irqbench()
            .args(["host"])
            .env("IRQBENCH_KVM_DEVICE", device)
            .output()
            .expect("spawn");
        assert_eq!(out.status.code(), Some(1));
        let err = text(&out.stderr);
        assert!(
            err.contains("IRQBENCH_KVM_DEVICE") && err.contains(device),
            "{err}"
        );
    }
    let out = irqbench()
        .args(["run"])
        .env("IRQBENCH_KVM_DEVICE", "")
        .output()
        .expect("spawn");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("empty"));
    let help = text(&run(&["--help"]).stdout);
    assert!(help.contains("IRQBENCH_KVM_DEVICE"), "{help}");
}

#[test]
fn host_lists_the_irqchip_modes() {
    if !kvm_or_skip() {
        return;
    }
    let stdout = text(&run(&["host"]).stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("irqchip modes:"))
        .expect("an irqchip modes line");
    assert!(
        line.contains("userspace") && !line.ends_with(" -"),
        "{line}"
    );
}

/// `--json -` prints the JSON (and nothing else) on stdout; a full stdout fails the run.
#[test]
fn json_to_stdout_and_a_full_stdout() {
    if !kvm_or_skip() {
        return;
    }
    let dir = tmp();
    let config = tiny_config(dir.path(), &["native-popf"]);
    let out = run(&["run", path_str(&config), "--json", "-"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is exactly the JSON");
    assert_eq!(report["schema"], irqbench::results::SCHEMA);
    // The run validated the host first, quickly, and kept the result.
    let v = &report["host"]["validation"];
    assert_eq!(v["scope"], "quick", "{v}");
    // How long it took is the start-time script's figure (scripts/start-time.py), not a bound
    // here: an emulated host takes several times longer.
    assert!(
        v["seconds"]
            .as_f64()
            .is_some_and(|s| s.is_finite() && s > 0.0),
        "{v}"
    );
    assert!(!v["checks"].as_array().expect("checks").is_empty());
    // Where its guest checks ran: beside the first group, or before it with the reason.
    let placement = v["placement"].as_str().unwrap_or_default();
    assert!(
        placement == "beside the first group's preparation"
            || placement.len() > 25 && placement.starts_with("before the first group: "),
        "{v}"
    );
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let out = irqbench()
        .args(["run", path_str(&config)])
        .stdout(full)
        .output()
        .expect("spawn");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("cannot write to stdout"));
}

#[test]
fn sighup_stops_the_run_like_sigterm_and_leaves_a_partial_json() {
    if !kvm_or_skip() {
        return;
    }
    let (code, stderr, report, _) = signal_mid_run(libc::SIGHUP);
    assert_eq!(code, Some(129), "stderr:\n{stderr}");
    assert_eq!(report["partial"], serde_json::Value::Bool(true));
}

/// `cmd` with its stdout descriptor closed (`irqbench list >&-`).
fn with_stdout_closed(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: runs in the child between fork and exec; close is async-signal-safe and
    // touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::close(1);
            Ok(())
        })
    }
}

/// A closed stdout loses the output: status 1 and a message, as a full disk gives, not 0.
#[test]
fn a_closed_stdout_is_an_error_not_a_success() {
    let mut commands = vec![vec!["list"], vec!["disasm", "native-popf"]];
    if kvm_or_skip() {
        commands.push(vec!["host"]);
    }
    for args in commands {
        let out = with_stdout_closed(irqbench().args(&args))
            .stdout(Stdio::inherit())
            .output()
            .expect("spawn");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("cannot write to stdout") && err.contains("Bad file descriptor"),
            "{args:?}: {err}"
        );
    }
}

/// `cmd` as user nobody when this test runs as root (root passes every permission check);
/// `None` when that cannot be arranged here.
fn as_unprivileged(bin: &str) -> Option<Command> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some(Command::new(bin));
    }
    let probe = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "true"])
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        return None;
    }
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", bin]);
    Some(cmd)
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A config path that cannot be looked at says why, by the errno's name, instead of calling
/// it "neither a file nor a shipped config".
#[test]
fn a_config_path_that_cannot_be_looked_at_names_eloop_enotdir_eacces() {
    let dir = tmp();
    chmod(dir.path(), 0o755);
    let looped = dir.path().join("loop.toml");
    std::os::unix::fs::symlink(&looped, &looped).expect("symlink");
    let file = tiny_config(dir.path(), &["native-popf"]);
    let not_dir = format!("{}/", path_str(&file));
    for (arg, errno) in [(path_str(&looped), "ELOOP"), (not_dir.as_str(), "ENOTDIR")] {
        let out = run(&["run", arg, "--no-save"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{arg}: {err}");
        assert!(
            err.contains(errno) && err.contains(arg) && !err.contains("neither"),
            "{arg}: {err}"
        );
    }
    let closed = dir.path().join("closed");
    std::fs::create_dir(&closed).expect("mkdir");
    let config = tiny_config(&closed, &["native-popf"]);
    chmod(&closed, 0o000);
    let Some(mut cmd) = as_unprivileged(env!("CARGO_BIN_EXE_irqbench")) else {
        chmod(&closed, 0o755);
        eprintln!("skipped EACCES: cannot run as an unprivileged user here (setpriv)");
        return;
    };
    let out = cmd
        .args(["run", path_str(&config), "--no-save"])
        .output()
        .expect("spawn");
    chmod(&closed, 0o755);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("EACCES") && err.contains(path_str(&config)),
        "{err}"
    );
}

/// A folder named like a shipped config is no config: the shipped one runs, with a note (a
/// missing KVM device stops the run right after, so nothing is measured). Any other folder
/// is refused as a folder.
#[test]
fn a_folder_does_not_shadow_a_shipped_config() {
    let dir = tmp();
    std::fs::create_dir(dir.path().join("quick")).expect("mkdir");
    std::fs::create_dir(dir.path().join("mine")).expect("mkdir");
    let out = irqbench()
        .args(["run", "quick", "--no-save"])
        .current_dir(dir.path())
        .env("IRQBENCH_KVM_DEVICE", "/nonexistent/kvm")
        .output()
        .expect("spawn");
    let err = text(&out.stderr);
    assert!(
        err.contains("quick is a folder, not a config: running the shipped config quick"),
        "{err}"
    );
    // Past the config: the next thing to fail is the KVM device.
    assert!(err.contains("/nonexistent/kvm does not exist"), "{err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    let out = irqbench()
        .args(["run", "mine", "--no-save"])
        .current_dir(dir.path())
        .output()
        .expect("spawn");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("mine is a folder, not a config file"), "{err}");
}

/// The same outcome, the same status, whichever command: no KVM is 1 for `run`, `validate`
/// and `host` (it was 2 for `validate`), and the error is printed once.
#[test]
fn no_kvm_is_one_status_in_every_command() {
    let data = tmp();
    for args in [
        vec!["run", "quick", "--no-save"],
        vec!["validate"],
        vec!["host"],
        vec!["reference", "--rounds", "6"],
    ] {
        let out = irqbench()
            .args(&args)
            .env("IRQBENCH_KVM_DEVICE", "/nonexistent/kvm")
            .env("XDG_DATA_HOME", data.path())
            .output()
            .expect("spawn");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(
            err.matches("/nonexistent/kvm does not exist").count(),
            1,
            "{args:?}: {err}"
        );
    }
}

/// `COLUMNS=80 irqbench run quick` prints no line wider than 80 columns, on stdout or stderr
/// (issue 19): tables fit, everything else wraps.
#[test]
fn a_run_fits_the_width_columns_asks_for() {
    if !kvm_or_skip() {
        return;
    }
    let out = irqbench()
        .args(["run", "quick", "--no-save"])
        .env("COLUMNS", "80")
        .output()
        .expect("spawn irqbench");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("cycles/op"), "{stdout}");
    for line in stdout.lines().chain(stderr.lines()) {
        assert!(
            line.chars().count() <= 80,
            "{} columns: {line}",
            line.chars().count()
        );
    }
}

/// `--redact cmdline,hostname` keeps /proc/cmdline and the host's name out of the JSON, the
/// Markdown, the dashboard exports and the stored run, and says what it left out; the exports
/// have the shapes the dashboards read.
#[test]
fn redacted_facts_reach_no_output_and_exports_are_written() {
    if !kvm_or_skip() {
        return;
    }
    let cmdline = std::fs::read_to_string("/proc/cmdline").expect("/proc/cmdline");
    let cmdline = cmdline.trim();
    let dir = tmp();
    let config = tiny_config(dir.path(), &["native-popf", "native-cli-sti"]);
    let db = dir.path().join("h.sqlite");
    let (json, md, bencher, gh) = (
        dir.path().join("r.json"),
        dir.path().join("r.md"),
        dir.path().join("b.json"),
        dir.path().join("g.json"),
    );
    let arg = |p: &Path| p.to_str().expect("utf-8 path").to_owned();
    let out = run(&[
        "run",
        config.to_str().unwrap(),
        "-q",
        "--db",
        &arg(&db),
        "--json",
        &arg(&json),
        "--markdown",
        &arg(&md),
        "--export",
        &format!("bencher={}", arg(&bencher)),
        "--export",
        &format!("github-benchmark={}", arg(&gh)),
        "--redact",
        "cmdline,hostname",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The stored run, as SQLite keeps it on disk (the database and its write-ahead log).
    let mut stored = std::fs::read(&db).unwrap();
    stored.extend(std::fs::read(dir.path().join("h.sqlite-wal")).unwrap_or_default());
    let json_text = std::fs::read_to_string(&json).unwrap();
    for (what, t) in [
        ("JSON", json_text.clone()),
        ("Markdown", std::fs::read_to_string(&md).unwrap()),
        ("history", text(&stored)),
    ] {
        // A command line this short could be part of anything; real ones are long.
        if cmdline.len() >= 8 {
            assert!(!t.contains(cmdline), "{what} holds /proc/cmdline");
        }
    }
    let report: serde_json::Value = serde_json::from_str(&json_text).unwrap();
    assert_eq!(
        report["host"]["redacted"],
        serde_json::json!(["cmdline", "hostname"])
    );
    let b: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&bencher).unwrap()).unwrap();
    for (row, measures) in b.as_object().expect("bencher: an object") {
        let c = &measures["cycles_per_op"];
        assert!(
            c["lower_value"].as_f64() <= c["value"].as_f64()
                && c["value"].as_f64() <= c["upper_value"].as_f64(),
            "{row}: {c}"
        );
    }
    let g: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&gh).unwrap()).unwrap();
    let entries = g.as_array().expect("github-benchmark: an array");
    assert_eq!(entries.len(), b.as_object().unwrap().len());
    for e in entries {
        assert_eq!(e["unit"], "cycles");
        assert!(e["range"].as_str().unwrap().starts_with('±'), "{e}");
    }
    // A bad kind is a usage error naming the valid ones.
    let bad = run(&["run", "--export", "jenkins=x.json", "--no-save"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("bencher, github-benchmark"));
}

/// ESC (clear screen), OSC (set the title, ended by BEL) and a CR through every channel text
/// from outside reaches the terminal by: a config's description, an unknown key's name, an
/// argument echoed in an error (config name, baseline name, disasm strategy, a bad flag
/// value), and the names of an imported results file shown by `history`, `baseline list` and
/// `compare`. No byte below 0x20 (but tab and newline) or 0x7f reaches stdout or stderr.
#[test]
fn control_sequences_from_outside_are_shown_escaped_on_every_channel() {
    const HOSTILE: &str = "\u{1b}[2J\u{1b}]0;owned\u{7}\rforged";
    let raw = |b: &[u8]| {
        b.iter()
            .any(|&c| (c < 0x20 && c != b'\n' && c != b'\t') || c == 0x7f)
    };
    let dir = tmp();
    let toml_hostile = "\\u001b[2J\\u001b]0;owned\\u0007\\rforged";
    let unknown = dir.path().join("unknown.toml");
    std::fs::write(
        &unknown,
        format!("name = \"u\"\n\"{toml_hostile}\" = 1\n[[bench]]\nname = \"b\"\nstrategies = [\"native-popf\"]\n"),
    )
    .unwrap();
    let db = dir.path().join("h.sqlite");
    let db_arg = db.to_str().unwrap();
    let mut cases: Vec<(String, Vec<String>)> = vec![
        (
            "unknown key".into(),
            vec![
                "run".into(),
                unknown.to_str().unwrap().into(),
                "--no-save".into(),
            ],
        ),
        (
            "config argument".into(),
            vec!["run".into(), HOSTILE.into(), "--no-save".into()],
        ),
        (
            "disasm strategy".into(),
            vec!["disasm".into(), HOSTILE.into()],
        ),
        (
            "baseline name".into(),
            vec![
                "baseline".into(),
                "save".into(),
                HOSTILE.into(),
                "--db".into(),
                db_arg.into(),
            ],
        ),
        (
            "a bad flag value".into(),
            vec![
                "run".into(),
                "--export".into(),
                format!("{HOSTILE}=x"),
                "--no-save".into(),
            ],
        ),
        (
            "history --config".into(),
            vec![
                "history".into(),
                "--config".into(),
                HOSTILE.into(),
                "--db".into(),
                db_arg.into(),
            ],
        ),
    ];
    if kvm_or_skip() {
        cases.extend(imported_hostile_names(dir.path(), db_arg, toml_hostile));
    }
    for (what, args) in &cases {
        let out = irqbench().args(args).output().expect("spawn irqbench");
        assert!(
            !raw(&out.stdout) && !raw(&out.stderr),
            "{what}: a control character reached the terminal:\nstdout {:?}\nstderr {:?}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
}

/// A `--json` that cannot be written (here a file-size limit, as a full disk would) keeps the
/// old file, and the chart beside it is not replaced either: the two stay a pair. The limit is
/// well under the smallest two-row JSON (about 40 KB: a busy host's fewer rounds let a 43 KB
/// JSON pass a 60 000-byte limit).
#[test]
fn a_json_that_cannot_be_written_takes_its_chart_along() {
    if !kvm_or_skip() {
        return;
    }
    if Command::new("prlimit").arg("--version").output().is_err() {
        println!("skipped: needs prlimit (util-linux) to limit the file size");
        return;
    }
    let dir = tmp();
    let config = tiny_config(dir.path(), &["native-popf", "native-cli-sti"]);
    let json = dir.path().join("r.json");
    std::fs::write(&json, "old").unwrap();
    let out = Command::new("prlimit")
        .arg("--fsize=16000")
        .arg(env!("CARGO_BIN_EXE_irqbench"))
        .args(["run", config.to_str().unwrap(), "-q", "--no-save", "--json"])
        .arg(&json)
        .output()
        .expect("spawn prlimit");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "old");
    assert!(
        !dir.path().join("r.svg").exists(),
        "a new chart beside the old JSON"
    );
    assert!(!dir.path().join("r.forest.svg").exists());
    assert!(
        text(&out.stderr).contains("stay a pair"),
        "{}",
        text(&out.stderr)
    );
}

/// A run whose config description is hostile (checked here), then its results file with
/// hostile names: the commands that show an imported file's names.
fn imported_hostile_names(
    dir: &Path,
    db_arg: &str,
    toml_hostile: &str,
) -> Vec<(String, Vec<String>)> {
    const HOSTILE: &str = "\u{1b}[2J\u{1b}]0;owned\u{7}\rforged";
    let raw = |b: &[u8]| {
        b.iter()
            .any(|&c| (c < 0x20 && c != b'\n' && c != b'\t') || c == 0x7f)
    };
    let mut cases = Vec::new();
    let described = dir.join("described.toml");
    std::fs::write(
        &described,
        format!(
            "name = \"d\"\ndescription = \"{toml_hostile}\"\n[run]\nmax_seconds = 0.3\nmin_rounds = 6\n\
             [[bench]]\nname = \"b\"\nstrategies = [\"native-popf\"]\n"
        ),
    )
    .unwrap();
    let json = dir.join("r.json");
    let out = run(&[
        "run",
        described.to_str().unwrap(),
        "--no-save",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(
        !raw(&out.stdout) && !raw(&out.stderr),
        "description: {}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stdout).contains("\\u{1b}[2J"),
        "the description is shown, escaped"
    );
    // The same results file with hostile names, imported: history, baseline list, compare.
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    doc["config_name"] = format!("c{HOSTILE}").into();
    doc["host"]["cpu_model"] = format!("cpu{HOSTILE}").into();
    doc["results"][0]["name"] = format!("row{HOSTILE}").into();
    let hostile_json = dir.join("hostile.json");
    std::fs::write(&hostile_json, doc.to_string()).unwrap();
    let hj = hostile_json.to_str().unwrap().to_string();
    cases.push((
        "import".into(),
        vec!["import".into(), hj.clone(), "--db".into(), db_arg.into()],
    ));
    cases.push((
        "history".into(),
        vec!["history".into(), "--db".into(), db_arg.into()],
    ));
    cases.push((
        "baseline save".into(),
        vec![
            "baseline".into(),
            "save".into(),
            "b1".into(),
            "--db".into(),
            db_arg.into(),
        ],
    ));
    cases.push((
        "baseline list".into(),
        vec![
            "baseline".into(),
            "list".into(),
            "--db".into(),
            db_arg.into(),
        ],
    ));
    cases.push((
        "compare".into(),
        vec!["compare".into(), hj.clone(), json.to_str().unwrap().into()],
    ));
    cases
}

/// Issue 20 item 4: a long `--json` name is written (its temporary name no longer grows with
/// it), and one longer than NAME_MAX is refused before the run.
#[test]
fn a_long_json_name_is_written_and_one_too_long_is_refused_before_the_run() {
    if !kvm_or_skip() {
        return;
    }
    let dir = tmp();
    let config = tiny_config(dir.path(), &["native-popf"]);
    let too_long = dir.path().join(format!("{}.json", "r".repeat(251)));
    let out = run(&[
        "run",
        path_str(&config),
        "--no-save",
        "--json",
        path_str(&too_long),
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("ENAMETOOLONG"), "{err}");
    // Refused before the run: nothing was measured, so nothing was written or printed.
    assert!(
        !err.contains("running `") && out.stdout.is_empty(),
        "it ran: {err}"
    );
    // 240 + `.forest.svg` (the longest file beside it) is 251 bytes: every name fits.
    let long = dir.path().join(format!("{}.json", "r".repeat(240)));
    let out = run(&[
        "run",
        path_str(&config),
        "-q",
        "--no-save",
        "--json",
        path_str(&long),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&long).expect("the JSON")).expect("JSON");
    assert!(json["results"].as_array().is_some_and(|r| !r.is_empty()));
    assert!(long.with_extension("svg").exists(), "the chart beside it");
}

/// Under an address-space limit (`ulimit -v`) too small for the guest, the run is refused up
/// front with the limit named, instead of aborting (exit 134) on a failed allocation mid-run.
#[test]
fn a_too_small_address_space_limit_is_named_not_an_abort() {
    if !kvm_or_skip() {
        return;
    }
    if Command::new("prlimit").arg("--version").output().is_err() {
        println!("skipped: needs prlimit (util-linux) to limit the address space");
        return;
    }
    for bytes in ["30000000", "60000000"] {
        let out = Command::new("prlimit")
            .arg(format!("--as={bytes}"))
            .arg(env!("CARGO_BIN_EXE_irqbench"))
            .args(["run", "quick", "--no-save", "-q"])
            .env("XDG_DATA_HOME", tmp().path())
            .output()
            .expect("spawn prlimit");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "limit {bytes}: {err}");
        assert!(err.contains("ulimit -v"), "limit {bytes}: {err}");
    }
}

/// The embedded guest with its first instructions replaced by `code`, as a file to `--guest`.
fn patched_guest(dir: &Path, code: &[u8]) -> PathBuf {
    let mut elf = irqbench::machine::image::EMBEDDED_GUEST.to_vec();
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes(b[at..at + 2].try_into().unwrap());
    let (entry, phoff) = (u64_at(&elf, 0x18), u64_at(&elf, 0x20) as usize);
    let (phentsize, phnum) = (u16_at(&elf, 0x36) as usize, u16_at(&elf, 0x38) as usize);
    let offset = (0..phnum)
        .map(|i| phoff + i * phentsize)
        .find_map(|ph| {
            let (offset, paddr, filesz) = (
                u64_at(&elf, ph + 8),
                u64_at(&elf, ph + 24),
                u64_at(&elf, ph + 32),
            );
            (paddr <= entry && entry < paddr + filesz).then(|| (offset + entry - paddr) as usize)
        })
        .expect("a segment holds the entry");
    elf[offset..offset + code.len()].copy_from_slice(code);
    let path = dir.join("broken-guest.elf");
    std::fs::write(&path, elf).unwrap();
    path
}

/// A guest that faults before it boots (`ud2` at its entry, no IDT yet) is the guest's fault:
/// the run says so, not that the host failed validation, and exits 1.
#[test]
fn a_guest_that_never_boots_is_blamed_on_the_guest_not_the_host() {
    if !kvm_or_skip() {
        return;
    }
    let dir = tmp();
    let guest = patched_guest(dir.path(), &[0x0f, 0x0b]);
    let out = run(&[
        "run",
        "quick",
        "--no-save",
        "--guest",
        guest.to_str().unwrap(),
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("the guest could not be booted"), "{err}");
    assert!(!err.contains("the host failed validation"), "{err}");
}

/// `validate` stopped by SIGTERM exits 130 like `run` (not 143, killed), and prints no verdict:
/// the checks its stop cut short would FAIL for the signal, not the host.
#[test]
fn a_signal_stops_validate_with_130_and_no_verdict() {
    if !kvm_or_skip() {
        return;
    }
    let child = irqbench()
        .arg("validate")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Signal once the handler is in place (SigCgt has SIGTERM's bit): earlier, the default
    // action kills the process, which is not what is tested. The suite then takes seconds (on an
    // emulated CPU minutes), so the signal lands within it.
    let status = format!("/proc/{}/status", child.id());
    let caught = |s: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .is_some_and(|m| m & (1 << (libc::SIGTERM - 1)) != 0)
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&status).is_ok_and(|s| caught(&s)) {
        assert!(Instant::now() < deadline, "no SIGTERM handler after 60 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: kill only sends a signal to the child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().expect("wait");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{:?}: {err}", out.status);
    assert!(err.contains("no verdict"), "{err}");
    assert!(!text(&out.stdout).contains("FAIL"), "{}", text(&out.stdout));
}

#[test]
fn reference_refuses_bad_lengths_before_opening_kvm() {
    for (args, needle) in [
        (
            vec!["reference", "--rounds", "3"],
            "'--rounds <ROUNDS>': `3` is not a count in 6..=1000000",
        ),
        (
            vec!["reference", "--rounds", "99999999999999999999"],
            "is not a count in 6..=1000000",
        ),
        (
            vec!["reference", "--iterations", "0"],
            "'--iterations <ITERATIONS>': `0` is not a count in 1..=100000000",
        ),
        (
            vec!["reference", "--exit-iterations", "1000001"],
            "is not a count in 0..=1000000",
        ),
        (
            vec!["reference", "--trip-rounds", "100001"],
            "'--trip-rounds <TRIP_ROUNDS>': `100001` is not a count in 0..=100000",
        ),
        (
            vec!["reference", "--slices", "0"],
            "'--slices <SLICES>': `0` is not a count in 1..=50",
        ),
        (
            vec!["reference", "--slices", "51"],
            "is not a count in 1..=50",
        ),
    ] {
        let out = irqbench()
            .args(&args)
            .env("IRQBENCH_KVM_DEVICE", "/nonexistent/kvm")
            .output()
            .expect("spawn");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// Reads `child`'s stderr until a line contains `needle` (or it ends): what was read.
fn stderr_until(stderr: &mut impl std::io::BufRead, needle: &str) -> String {
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let n = stderr.read_line(&mut line).expect("read stderr");
        seen.push_str(&line);
        if n == 0 || line.contains(needle) {
            return seen;
        }
    }
}

/// Waits at most `bound` for `child` to exit (then kills it and fails).
fn exit_within(child: &mut std::process::Child, bound: Duration, seen: &str) -> Option<i32> {
    let sent = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code();
        }
        if sent.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running {bound:?} after the signal:\n{seen}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `reference` was killed by SIGHUP's default action and stopped silently on SIGINT/SIGTERM.
/// It now stops within the block under way, says so, prints no half comparison and exits
/// 130/129. `--rounds 1000000 --yes` is hours here: the signal lands in the probe's rounds.
#[test]
fn a_signal_stops_reference_with_its_status_and_says_so() {
    if !kvm_or_skip() {
        return;
    }
    for (signal, name, code) in [(libc::SIGINT, "SIGINT", 130), (libc::SIGHUP, "SIGHUP", 129)] {
        let mut child = irqbench()
            .args(["reference", "--rounds", "1000000", "--yes"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
        // The estimate is printed after the handler is installed and before the rounds.
        let mut seen = stderr_until(&mut stderr, "reference: about");
        assert!(seen.contains("reference: about"), "no estimate:\n{seen}");
        std::thread::sleep(Duration::from_millis(300));
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, signal) };
        // Bound: a block is milliseconds and the watchdog ticks at 50 ms.
        let status = exit_within(&mut child, Duration::from_secs(10), &seen);
        let _ = std::io::Read::read_to_string(&mut stderr, &mut seen);
        let mut stdout = String::new();
        if let Some(mut o) = child.stdout.take() {
            let _ = std::io::Read::read_to_string(&mut o, &mut stdout);
        }
        assert_eq!(status, Some(code), "{name}: {seen}");
        assert!(
            seen.contains(&format!("{name}: the reference stopped")),
            "{seen}"
        );
        assert!(
            stdout.is_empty(),
            "{name}: half a comparison printed:\n{stdout}"
        );
    }
}

/// `reference` with counts of days started without a word. Now its estimate comes first, and
/// a length past an hour (without --yes) or a block past half its watchdog is refused with
/// status 2, naming the flag, before any round. Which refusal depends on the host's speed.
#[test]
fn reference_estimates_its_length_and_refuses_days_without_yes() {
    if !kvm_or_skip() {
        return;
    }
    let started = Instant::now();
    let out = run(&["reference", "--rounds", "1000000", "--iterations", "300000"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("reference: about"), "{err}");
    assert!(
        err.contains("more than an hour; pass --yes")
            || err.contains("--iterations 300000: a block of"),
        "{err}"
    );
    assert!(text(&out.stdout).is_empty());
    // Refused after the calibration, not after the rounds (the run would be hours).
    assert!(started.elapsed() < Duration::from_secs(120), "{err}");
}

/// `host` died by SIGTERM's default action (143). The handler is installed first now: a
/// signal during the flavour probe exits 130 with nothing printed, one after it changes
/// nothing. It takes ~30 ms, so it is started until a signal lands inside it.
#[test]
fn a_signal_stops_host_with_130_and_prints_no_manifest() {
    if !kvm_or_skip() {
        return;
    }
    let caught = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("SigCgt:"))
                .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
                .is_some_and(|m| m & (1 << (libc::SIGTERM - 1)) != 0)
        })
    };
    let mut stopped = 0;
    for _ in 0..20 {
        let mut child = irqbench()
            .args(["host", "--verbose"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !caught(child.id()) && child.try_wait().expect("wait").is_none() {
            assert!(Instant::now() < deadline, "no SIGTERM handler after 10 s");
            std::thread::sleep(Duration::from_micros(200));
        }
        // SAFETY: kill(2) on our own child's pid (a zombie if it already exited).
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let out = child.wait_with_output().expect("wait");
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        match out.status.code() {
            Some(0) => assert!(stdout.contains("kvm flavour:"), "{stdout}"),
            Some(130) => {
                assert!(stdout.is_empty(), "{stdout}");
                assert!(
                    stderr.contains("SIGTERM: stopped before the manifest"),
                    "{stderr}"
                );
                stopped += 1;
            }
            other => panic!("{other:?} ({:?}): {stderr}", out.status),
        }
        if stopped > 0 {
            return;
        }
    }
    panic!("no SIGTERM landed inside `host` in 20 tries");
}

/// `disasm` printed its lines at any length and the ELF's symbol names as they were: a
/// symbol carrying ESC reached the terminal. Now the text wraps to COLUMNS and the name is
/// shown escaped. The guest is the embedded one with a site label renamed (same length).
#[test]
fn disasm_wraps_to_the_terminal_and_escapes_symbol_names() {
    let dir = tmp();
    let mut elf = irqbench::machine::image::EMBEDDED_GUEST.to_vec();
    let (from, to) = (
        b"irqbench_op_pvop_skip_body\0".as_slice(),
        b"irqbench_op_pvop_skip_\x1b[2J\0".as_slice(),
    );
    let mut renamed = 0;
    for i in 0..elf.len() - from.len() {
        if &elf[i..i + from.len()] == from {
            elf[i..i + to.len()].copy_from_slice(to);
            renamed += 1;
        }
    }
    assert!(renamed > 0, "no site label to rename");
    let guest = dir.path().join("hostile.elf");
    std::fs::write(&guest, elf).expect("write");
    let out = irqbench()
        .args(["disasm", "pvop-skip", "--guest", path_str(&guest)])
        .env("COLUMNS", "60")
        .output()
        .expect("spawn");
    let shown = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !shown.contains('\u{1b}'),
        "ESC reached the terminal:\n{shown}"
    );
    assert!(
        shown.contains("<irqbench_op_pvop_skip_\\u{1b}[2J>"),
        "{shown}"
    );
    for line in shown.lines() {
        assert!(
            line.chars().count() <= 60,
            "{} columns: {line}",
            line.chars().count()
        );
    }
}
