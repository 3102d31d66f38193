//! Text from outside through every channel it enters by (config values and paths, arguments,
//! the environment, the guest's console, imported files, host facts), each hostile payload in
//! turn: (a) nothing reaches the terminal that would act on it (no byte below 0x20 but tab and
//! newline, no DEL, no C1 or bidi character), (b) each outside value stays on its own line, and
//! (c) every `--json -` and `--json FILE` parses as JSON.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The hostile payloads: each is put between `AAA` and `ZZZ`, so a value split over two lines
/// is seen, and a forged line starts with `FORGED`.
const PAYLOADS: [(&str, &str); 10] = [
    ("ESC", "\u{1b}[2J\u{1b}[1m"),
    ("OSC-8", "\u{1b}]8;;http:x.invalid\u{7}L\u{1b}]8;;\u{7}"),
    ("BEL", "\u{7}"),
    ("CR", "\rFORGED cr"),
    ("LF", "\nFORGED lf"),
    // clap's styling strips the ESC sequence from the value it quotes, leaving the LF.
    ("ESC+LF", "\u{1b}[1m\nFORGED esc-lf"),
    ("CRLF", "\r\nFORGED crlf"),
    ("bidi", "\u{202e}\u{2066}"),
    ("LS/PS", "\u{2028}FORGED ls\u{2029}"),
    ("C1", "\u{9b}31m\u{85}"),
];

/// C1 as raw bytes, not UTF-8: only arguments, paths and the environment can carry them.
const RAW_C1: &[u8] = b"\x9b31m\x85";

fn value(payload: &str) -> String {
    format!("AAA{payload}ZZZ")
}

fn raw_value() -> OsString {
    OsString::from_vec([b"AAA", RAW_C1, b"ZZZ"].concat())
}

/// Every run here takes `--force`: a host that fails validation under the load of parallel
/// tests must not keep the outputs under test from being written.
///
/// Wide enough that no message is wrapped inside a value (a wrap is not a forged line, but
/// would hide one from the check).
fn irqbench(data: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_irqbench"));
    cmd.env("XDG_DATA_HOME", data).env("COLUMNS", "1000");
    cmd
}

fn kvm_or_skip() -> bool {
    irqbench::host::test_kvm().is_some()
}

/// Whether `c` would act on a terminal: C0 but tab and newline, DEL, C1, bidi controls.
fn acts(c: char) -> bool {
    (c < ' ' && c != '\n' && c != '\t')
        || ('\u{7f}'..='\u{9f}').contains(&c)
        || matches!(c, '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// (a) and (b) for what one stream of a command printed.
fn assert_safe(what: &str, bytes: &[u8]) {
    assert_safe_lines(what, bytes, true);
}

/// (a), and no line started by the value's own CR or newline; with `whole`, each value on
/// one line (a guest's console is quoted line by line instead, each prefixed).
fn assert_safe_lines(what: &str, bytes: &[u8], whole: bool) {
    let text = std::str::from_utf8(bytes).unwrap_or_else(|e| {
        panic!(
            "{what}: not UTF-8 ({e}): {:?}",
            String::from_utf8_lossy(bytes)
        )
    });
    if let Some(c) = text.chars().find(|c| acts(*c)) {
        panic!("{what}: {c:?} reached the terminal:\n{text}");
    }
    for line in text.lines() {
        assert!(
            !line.trim_start().starts_with("FORGED"),
            "{what}: a forged line:\n{text}"
        );
        if let Some(at) = line.find("AAA").filter(|_| whole) {
            let rest = &line[at..];
            assert!(
                rest.contains("ZZZ") || rest.contains('…'),
                "{what}: a value split over lines:\n{text}"
            );
        }
    }
}

/// (a) and (b) on both streams; the status must not be a crash (a signal, 101 for a panic).
fn assert_output(what: &str, out: &Output) {
    assert!(
        matches!(out.status.code(), Some(0..=2)),
        "{what}: status {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_safe(&format!("{what} (stdout)"), &out.stdout);
    assert_safe(&format!("{what} (stderr)"), &out.stderr);
}

/// (c): `bytes` are JSON.
fn assert_json(what: &str, bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        panic!(
            "{what}: not JSON ({e}):\n{}",
            String::from_utf8_lossy(bytes)
        )
    })
}

/// `s` as a TOML basic string, every character outside printable ASCII as `\uXXXX`.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push_str(&format!("\\U{:08X}", c as u32)),
        }
    }
    out.push('"');
    out
}

const QUICK: [&str; 4] = [
    "--set",
    "run.max_seconds=0.1",
    "--only",
    "quick/native-popf/*",
];

fn quick_config(dir: &Path, file_name: &OsStr, description: &str) -> PathBuf {
    let path = dir.join(file_name);
    std::fs::write(
        &path,
        format!(
            "name = \"quick\"\ndescription = {}\n[run]\nmax_seconds = 0.1\n\n[[bench]]\n\
             name = \"quick\"\nkind = \"strategy\"\nstrategies = [\"native-popf\"]\n",
            toml_string(description)
        ),
    )
    .expect("write config");
    path
}

/// Config values (`--set description=`, a description in the file) and a config path, to
/// the table, `--json -`, `--json FILE` and the Markdown.
#[test]
fn config_values_and_paths_reach_no_terminal_and_keep_json_valid() {
    if !kvm_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    for (name, payload) in PAYLOADS {
        let v = value(payload);
        let set = format!("description={}", toml_string(&v));
        let out = irqbench(&data)
            .args([
                "run",
                "quick",
                "--no-save",
                "--force",
                "--set",
                &set,
                "--json",
                "-",
            ])
            .args(QUICK)
            .output()
            .expect("spawn");
        assert_output(&format!("{name}: --set description, --json -"), &out);
        let json = assert_json(&format!("{name}: --json -"), &out.stdout);
        assert_eq!(
            json["description"],
            v.as_str(),
            "{name}: the JSON keeps the value"
        );

        let file_name = OsString::from(format!("c{}.toml", payload.replace('/', "_")));
        let config = quick_config(dir.path(), &file_name, &v);
        let (json_file, markdown_file) = (dir.path().join("r.json"), dir.path().join("r.md"));
        let out = irqbench(&data)
            .arg("run")
            .arg(&config)
            .args(["--no-save", "--force", "--json"])
            .arg(&json_file)
            .arg("--markdown")
            .arg(&markdown_file)
            .output()
            .expect("spawn");
        assert_output(
            &format!("{name}: description and path in the file, table"),
            &out,
        );
        let json = assert_json(
            &format!("{name}: --json FILE"),
            &std::fs::read(&json_file).expect("the JSON file"),
        );
        assert_eq!(json["description"], v.as_str());
        // Markdown as `--markdown -` would print it (the same text, through the same path).
        let markdown = std::fs::read(&markdown_file).expect("the Markdown file");
        assert_safe(&format!("{name}: --markdown"), &markdown);
    }
}

/// What a case is called, its arguments, and an environment variable it sets.
type Case<'a> = (&'a str, Vec<OsString>, Option<(&'a str, OsString)>);

/// Arguments, clap's and irqbench's own parsers, and the environment: each refused with the
/// value shown, never sent. Nothing here boots a guest.
#[test]
fn arguments_and_the_environment_reach_no_terminal() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let db = dir.path().join("h.sqlite");
    let mut values: Vec<(String, OsString)> = PAYLOADS
        .iter()
        .map(|(n, p)| (n.to_string(), OsString::from(value(p))))
        .collect();
    values.push(("raw C1 bytes".into(), raw_value()));
    for (name, v) in &values {
        let mut flag = OsString::from("--x");
        flag.push(v);
        let mut device = OsString::from("/nonexistent/");
        device.push(v);
        let cases: Vec<Case> = vec![
            (
                "history --last",
                vec!["history".into(), "--last".into(), v.clone()],
                None,
            ),
            (
                "an unknown flag",
                vec!["history".into(), flag.clone()],
                None,
            ),
            ("a config name", vec!["run".into(), v.clone()], None),
            (
                "--only",
                vec!["run".into(), "quick".into(), "--only".into(), v.clone()],
                None,
            ),
            (
                "baseline rm",
                vec![
                    "baseline".into(),
                    "rm".into(),
                    v.clone(),
                    "--db".into(),
                    db.clone().into(),
                ],
                None,
            ),
            (
                "compare",
                vec![
                    "compare".into(),
                    v.clone(),
                    v.clone(),
                    "--db".into(),
                    db.clone().into(),
                ],
                None,
            ),
            (
                "--db",
                vec!["history".into(), "--db".into(), dir.path().join(v).into()],
                None,
            ),
            (
                "--json in a missing folder",
                vec![
                    "run".into(),
                    "--json".into(),
                    dir.path().join(v).join("r.json").into(),
                ],
                None,
            ),
            (
                "--guest",
                vec!["disasm".into(), "--guest".into(), dir.path().join(v).into()],
                None,
            ),
            (
                "IRQBENCH_KVM_DEVICE",
                vec!["host".into()],
                Some(("IRQBENCH_KVM_DEVICE", device.clone())),
            ),
        ];
        for (what, args, env) in cases {
            let mut cmd = irqbench(&data);
            cmd.args(&args);
            if let Some((k, val)) = env {
                cmd.env(k, val);
            }
            let out = cmd.output().expect("spawn");
            assert_output(&format!("{name}: {what}"), &out);
        }
    }
}

/// The embedded guest made to fail its boot with `text` on its console: its magic check
/// compares against another number, and its mismatch message is `text`.
fn console_guest(dir: &Path, text: &[u8]) -> PathBuf {
    let mut elf = irqbench::machine::image::EMBEDDED_GUEST.to_vec();
    let find = |elf: &[u8], what: &[u8]| elf.windows(what.len()).position(|w| w == what);
    let magic = irqbench_abi::MAILBOX_MAGIC.to_le_bytes();
    let at = find(&elf, &magic).expect("the guest compares the mailbox magic");
    elf[at] ^= 1;
    let message: &[u8] = b"irqbench guest: mailbox magic/version mismatch\n";
    let at = find(&elf, message).expect("the guest's mismatch message");
    assert!(text.len() <= message.len(), "{} bytes", text.len());
    let mut patched = text.to_vec();
    patched.resize(message.len(), b' ');
    elf[at..at + message.len()].copy_from_slice(&patched);
    let path = dir.join("console-guest.elf");
    std::fs::write(&path, elf).expect("write guest");
    path
}

/// What a guest writes on its console, quoted when its boot fails.
#[test]
fn the_guest_console_reaches_no_terminal() {
    if !kvm_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let mut texts: Vec<(String, Vec<u8>)> = PAYLOADS
        .iter()
        .map(|(n, p)| (n.to_string(), value(p).into_bytes()))
        .collect();
    texts.push(("raw C1 bytes".into(), raw_value().into_vec()));
    for (name, text) in texts {
        let guest = console_guest(dir.path(), &text);
        let out = irqbench(&data)
            .args(["run", "quick", "--no-save", "--force", "--guest"])
            .arg(&guest)
            .args(QUICK)
            .output()
            .expect("spawn");
        assert_eq!(
            out.status.code(),
            Some(1),
            "{name}: a guest that does not boot"
        );
        assert_safe(&format!("{name}: guest console (stdout)"), &out.stdout);
        assert_safe_lines(
            &format!("{name}: guest console (stderr)"),
            &out.stderr,
            false,
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("guest console: AAA"),
            "{name}: the console is quoted:\n{err}"
        );
    }
}

/// A results file with the payload in its names, description, config path and host facts:
/// imported, then shown by `history` (pivot, `--long`, `--json`) and `compare`.
#[test]
fn imported_files_and_host_facts_reach_no_terminal_and_keep_json_valid() {
    if !kvm_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let base = dir.path().join("base.json");
    let out = irqbench(&data)
        .args(["run", "quick", "--no-save", "--force", "--json"])
        .arg(&base)
        .args(QUICK)
        .output()
        .expect("spawn");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let original = assert_json("the base run", &std::fs::read(&base).expect("base JSON"));
    for (i, (name, payload)) in PAYLOADS.iter().enumerate() {
        let v = value(payload);
        let mut json = original.clone();
        json["description"] = v.clone().into();
        json["config_source"] = v.clone().into();
        json["host"]["cpu_model"] = v.clone().into();
        json["host"]["kernel_release"] = v.clone().into();
        json["results"][0]["name"] = format!("quick/{v}").into();
        let file = dir.path().join(format!("hostile-{i}.json"));
        std::fs::write(&file, serde_json::to_vec_pretty(&json).unwrap()).unwrap();
        let db = dir.path().join(format!("h{i}.sqlite"));
        let run = |args: &[&OsStr]| irqbench(&data).args(args).output().expect("spawn");
        let (f, d) = (file.as_os_str(), db.as_os_str());
        let out = run(&["import".as_ref(), "--db".as_ref(), d, f]);
        assert_output(&format!("{name}: import"), &out);
        for (what, args) in [
            ("history", vec!["history".as_ref(), "--db".as_ref(), d]),
            (
                "history --long",
                vec!["history".as_ref(), "--long".as_ref(), "--db".as_ref(), d],
            ),
            ("compare", vec!["compare".as_ref(), base.as_os_str(), f]),
        ] {
            assert_output(&format!("{name}: {what}"), &run(&args));
        }
        let out = run(&["history".as_ref(), "--json".as_ref(), "--db".as_ref(), d]);
        assert_output(&format!("{name}: history --json"), &out);
        assert_json(&format!("{name}: history --json"), &out.stdout);
    }
    // Long outside text is clipped with a mark in every text output: a 1 MB name had printed
    // 3 MB for one run.
    let mut json = original.clone();
    json["description"] = "d".repeat(100_000).into();
    json["config_source"] = "s".repeat(100_000).into();
    json["results"][0]["name"] = format!("quick/{}", "x".repeat(1_000_000)).into();
    let file = dir.path().join("long.json");
    std::fs::write(&file, serde_json::to_vec(&json).unwrap()).unwrap();
    let db = dir.path().join("long.sqlite");
    let (f, d) = (file.as_os_str(), db.as_os_str());
    let run = |args: &[&OsStr]| irqbench(&data).args(args).output().expect("spawn");
    assert_output(
        "long: import",
        &run(&["import".as_ref(), "--db".as_ref(), d, f]),
    );
    for (what, args) in [
        ("history", vec!["history".as_ref(), "--db".as_ref(), d]),
        (
            "history --long",
            vec!["history".as_ref(), "--long".as_ref(), "--db".as_ref(), d],
        ),
        ("compare", vec!["compare".as_ref(), base.as_os_str(), f]),
    ] {
        let out = run(&args);
        assert_output(&format!("long: {what}"), &out);
        let shown = out.stdout.len() + out.stderr.len();
        assert!(shown < 20_000, "long: {what} printed {shown} bytes");
        // `history` lists one line per run, which names no row.
        assert!(
            what != "history --long" || String::from_utf8_lossy(&out.stdout).contains('…'),
            "long: {what} marks the clipped name"
        );
    }
    // A host fact: the KVM device's path, through a link to the real one.
    for (name, payload) in PAYLOADS {
        let link = dir.path().join(value(payload).replace('/', "_"));
        std::os::unix::fs::symlink("/dev/kvm", &link).expect("symlink");
        for json in [false, true] {
            let mut cmd = irqbench(&data);
            cmd.env("IRQBENCH_KVM_DEVICE", &link).arg("host");
            if json {
                cmd.arg("--json");
            }
            let out = cmd.output().expect("spawn");
            assert_output(&format!("{name}: host (json: {json})"), &out);
            if json {
                assert_json(&format!("{name}: host --json"), &out.stdout);
            }
        }
        std::fs::remove_file(&link).unwrap();
    }
}

#[test]
fn the_checks_catch_what_they_look_for() {
    for bad in ["a\u{1b}b", "a\rb", "a\u{7f}", "a\u{9b}", "a\u{202e}"] {
        assert!(bad.chars().any(acts), "{bad:?}");
    }
    assert!(!"tab\tand\nnewline µ ≈ …".chars().any(acts));
    let forged = std::panic::catch_unwind(|| assert_safe("t", b"x AAA\nFORGED ZZZ\n"));
    assert!(forged.is_err());
}

/// A long outside value quoted in an error (a config's value or key, a filter) is clipped with
/// a mark: a 5 000-character string had been printed whole, over 50 wrapped lines.
#[test]
fn long_values_quoted_in_errors_are_clipped() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let long = "q".repeat(5000);
    let configs = [
        format!("name = \"k\"\n[run]\nmax_seconds = \"{long}\"\n[[bench]]\nname = \"b\"\n"),
        format!("name = \"k\"\n{long} = 1\n[[bench]]\nname = \"b\"\n"),
        format!("name = \"k\"\n[[bench]]\nname = \"b\"\nstrategies = [\"{long}\"]\n"),
    ];
    for (i, text) in configs.iter().enumerate() {
        let path = dir.path().join(format!("long-{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let out = irqbench(&data)
            .arg("run")
            .arg(&path)
            .arg("--no-save")
            .output()
            .expect("spawn");
        assert_eq!(out.status.code(), Some(2), "config {i}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.len() < 1000 && err.contains('…'), "config {i}: {err}");
    }
}
