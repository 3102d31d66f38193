//! The `irqbench` binary as a user meets it: real runs on /dev/kvm, errors, signals, compare.

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
    irqbench().args(args).output().expect("spawn irqbench")
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

#[test]
fn every_command_has_help_with_examples() {
    for args in [
        vec!["--help"],
        vec!["run", "--help"],
        vec!["host", "--help"],
        vec!["validate", "--help"],
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
    let started = Instant::now();
    let out = run(&["validate", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let v = &doc["validation"];
    let checks = v["checks"].as_array().expect("checks");
    assert_eq!(checks.len(), 18, "{v}");
    for c in checks {
        assert!(
            ["pass", "warn", "fail"].contains(&c["verdict"].as_str().unwrap_or("")),
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
    assert!(started.elapsed() < Duration::from_secs(10));
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

/// Starts a run long enough that `signal` lands mid-run, sends it after 1.5 s, and returns the
/// exit code, stderr and the parsed JSON the run left behind.
fn signal_mid_run(signal: i32) -> (Option<i32>, String, serde_json::Value) {
    let dir = tmp();
    let json = dir.path().join("partial.json");
    let config = dir.path().join("long.toml");
    std::fs::write(
        &config,
        "name = \"long\"\n[run]\nmax_seconds = 20\nprecision = 0.0001\n\n[[bench]]\nname = \"l\"\n",
    )
    .expect("write");
    let mut child = irqbench()
        .args([
            "run",
            path_str(&config),
            "--quiet",
            "--json",
            path_str(&json),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, signal) };
    let started = Instant::now();
    let status = child.wait().expect("wait");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "did not stop promptly"
    );
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
    }
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|e| panic!("partial JSON not written ({e}); stderr:\n{stderr}"));
    let report = serde_json::from_str(&text).expect("valid JSON");
    (status.code(), stderr, report)
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

#[test]
fn sigint_stops_the_run_and_leaves_a_partial_json() {
    if !kvm_or_skip() {
        return;
    }
    let (code, stderr, report) = signal_mid_run(libc::SIGINT);
    assert_eq!(code, Some(130), "stderr:\n{stderr}");
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
        let started = Instant::now();
        let out = run(&["run", "quick", "-q", flag, path_str(path)]);
        assert_eq!(out.status.code(), Some(2), "{flag} {path:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains(kind) && err.contains(path_str(path)),
            "{flag}: {err}"
        );
        assert!(started.elapsed() < Duration::from_secs(5), "refused late");
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
        let started = Instant::now();
        let out = run(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(expected), "{extra:?}: {err}");
        assert!(started.elapsed() < Duration::from_secs(5), "{extra:?} ran");
    }
    assert_eq!(std::fs::read_to_string(&config).expect("config"), before);
    assert!(!x.exists());
}

#[test]
fn a_device_as_guest_fails_at_once() {
    let started = Instant::now();
    let out = run(&["run", "--guest", "/dev/zero"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(started.elapsed() < Duration::from_secs(5), "read /dev/zero");
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
            let started = Instant::now();
            let out = run(&args);
            assert_eq!(out.status.code(), Some(2), "{args:?}");
            assert!(started.elapsed() < Duration::from_secs(5), "{args:?} read");
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
    assert!(v["seconds"].as_f64().is_some_and(|s| s < 0.5), "{v}");
    assert!(!v["checks"].as_array().expect("checks").is_empty());
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
    let (code, stderr, report) = signal_mid_run(libc::SIGHUP);
    assert_eq!(code, Some(129), "stderr:\n{stderr}");
    assert_eq!(report["partial"], serde_json::Value::Bool(true));
}
