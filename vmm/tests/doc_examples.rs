//! Every shell example in README.md and docs/*.md runs, so none goes stale: a flag that
//! disappears, a config renamed or a command that now fails makes this test fail.
//!
//! What runs, per Markdown file, in the order the file gives it:
//! - each fenced block whose info string is `sh`, `bash` or `shell`, as one `sh -e` script;
//! - each `run:` step of a `yaml` block that calls `target/release/irqbench` (the CI examples);
//! - each `<!-- output: ARGS -->` marker's `irqbench ARGS` (the measured sample outputs that
//!   scripts/update-readme-tables.py regenerates), with `--no-save`.
//!
//! A block that must not run (it builds or installs the tool, or runs the test suite) carries
//! `<!-- example: not run (WHY) -->` on the line just before its fence; the test prints it with
//! its reason, and refuses a `cargo` command in a block without that marker.
//!
//! Each file's examples share one temporary folder (holding a copy of configs/, as a clone
//! does) and one results history (XDG_DATA_HOME), so a later example may use an earlier one's
//! run, baseline or files. `irqbench` on their PATH is the binary cargo built, behind a wrapper
//! that gives `run`, `check` and `reference` tiny budgets (and, on a one-CPU host, one vCPU a
//! bench): the examples are run to show they still work as written, not to measure, and for
//! the same reason `check` gets a regression floor of 1000% where the example sets none
//! (figures from 0.1 s are noisy).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The repository root: vmm/'s parent.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("vmm/ has a parent")
        .to_path_buf()
}

/// README.md and every docs/*.md, in a stable order.
fn markdown_files() -> Vec<PathBuf> {
    let root = repo();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("read docs/")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    let mut files = vec![root.join("README.md")];
    files.extend(docs);
    files
}

/// One thing to run, found in a Markdown file.
#[derive(Debug, PartialEq)]
enum Example {
    /// A shell block: its text, run whole by `sh -e`.
    Shell(String),
    /// One command line (a yaml `run:` step, an output marker's command).
    Command(String),
    /// A block marked not to run, with the marker's reason.
    NotRun(String),
}

/// An example and the line of the file it starts on (1-based).
#[derive(Debug, PartialEq)]
struct Found {
    line: usize,
    example: Example,
}

const NOT_RUN: &str = "<!-- example: not run (";

/// The examples of one Markdown text, in order.
fn examples(text: &str) -> Vec<Found> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(args) = output_marker(line) {
            let command = format!("irqbench {args} --no-save");
            found.push(Found {
                line: i + 1,
                example: Example::Command(command),
            });
        }
        let Some(info) = line.strip_prefix("```") else {
            i += 1;
            continue;
        };
        let end = (i + 1..lines.len())
            .find(|&k| lines[k].starts_with("```"))
            .unwrap_or_else(|| panic!("line {}: a fence that never closes", i + 1));
        let body = lines[i + 1..end].join("\n") + "\n";
        let not_run = i
            .checked_sub(1)
            .and_then(|k| lines[k].strip_prefix(NOT_RUN))
            .map(|rest| rest.trim_end().trim_end_matches("-->").trim_end());
        let lang = info.split_whitespace().next().unwrap_or("");
        match (lang, not_run) {
            ("sh" | "bash" | "shell", Some(why)) => {
                let why = why.strip_suffix(')').unwrap_or(why);
                assert!(
                    !why.is_empty(),
                    "line {i}: a not-run marker without its reason"
                );
                found.push(Found {
                    line: i + 1,
                    example: Example::NotRun(why.to_string()),
                });
            }
            ("sh" | "bash" | "shell", None) => {
                found.push(Found {
                    line: i + 1,
                    example: Example::Shell(body),
                });
            }
            ("yaml", _) => found.extend(yaml_steps(&lines[i + 1..end], i + 2)),
            _ => {}
        }
        i = end + 1;
    }
    found
}

/// `<!-- output: ARGS -->` gives ARGS.
fn output_marker(line: &str) -> Option<&str> {
    let args = line
        .trim()
        .strip_prefix("<!-- output:")?
        .strip_suffix("-->")?;
    Some(args.trim())
}

/// The `run:` steps of a yaml block that call irqbench's release binary.
fn yaml_steps(lines: &[&str], first_line: usize) -> Vec<Found> {
    let mut steps = Vec::new();
    for (k, line) in lines.iter().enumerate() {
        let step = line.trim_start().trim_start_matches("- ").trim_start();
        let Some(command) = step.strip_prefix("run:") else {
            continue;
        };
        let command = command.trim();
        if command.starts_with("target/release/irqbench ") {
            steps.push(Found {
                line: first_line + k,
                example: Example::Command(command.into()),
            });
        }
    }
    steps
}

/// The wrapper that stands for `irqbench` on the examples' PATH.
fn wrapper_script(real: &Path) -> String {
    let real = real.display().to_string().replace('\'', r"'\''");
    format!(
        r#"#!/bin/sh
# irqbench for the doc examples: tiny budgets where the example sets none (doc_examples.rs).
real='{real}'
has() {{ f=$1; shift; for a in "$@"; do case $a in "$f"|"$f="*) return 0 ;; esac; done; return 1; }}
case $1 in
run | check)
    extra="--set run.max_seconds=0.1 --set run.min_rounds=20 --set run.precision=0.5"
    if [ "$1" = check ] && ! has --max-regression "$@"; then extra="$extra --max-regression 1000"; fi
    # On one CPU (the svm box) a 4-vCPU group can leave every block of a row disturbed: no
    # data, exit 1, which says nothing of the example.
    if [ "$(nproc)" -lt 2 ]; then extra="$extra --set bench.vcpus=[1]"; fi
    exec "$real" "$@" $extra ;;
reference)
    extra=
    has --rounds "$@" || extra="$extra --rounds 6"
    has --iterations "$@" || extra="$extra --iterations 10"
    has --exit-iterations "$@" || extra="$extra --exit-iterations 1"
    has --trip-rounds "$@" || extra="$extra --trip-rounds 6"
    has --slices "$@" || extra="$extra --slices 1"
    exec "$real" "$@" $extra ;;
esac
exec "$real" "$@"
"#
    )
}

/// A folder for one file's examples: the wrapper as bin/irqbench and as
/// target/release/irqbench, a copy of configs/, and the history's XDG_DATA_HOME.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        for folder in ["bin", "target/release", "configs", "xdg", "home"] {
            std::fs::create_dir_all(root.join(folder)).expect("create folder");
        }
        let wrapper = root.join("bin/irqbench");
        std::fs::write(
            &wrapper,
            wrapper_script(Path::new(env!("CARGO_BIN_EXE_irqbench"))),
        )
        .expect("write wrapper");
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
            .expect("chmod wrapper");
        std::os::unix::fs::symlink(&wrapper, root.join("target/release/irqbench"))
            .expect("link wrapper");
        for entry in std::fs::read_dir(repo().join("configs")).expect("read configs/") {
            let path = entry.expect("configs/ entry").path();
            let name = path.file_name().expect("a file name");
            std::fs::copy(&path, root.join("configs").join(name)).expect("copy config");
        }
        Sandbox { dir }
    }

    /// `sh -e -c SCRIPT` in the sandbox.
    fn shell(&self, script: &str) -> Command {
        let root = self.dir.path();
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![root.join("bin")];
        paths.extend(std::env::split_paths(&path));
        let mut cmd = Command::new("sh");
        cmd.arg("-e")
            .arg("-c")
            .arg(script)
            .current_dir(root)
            .env("PATH", std::env::join_paths(paths).expect("PATH"))
            .env("XDG_DATA_HOME", root.join("xdg"))
            .env("HOME", root.join("home"))
            .env("COLUMNS", "100");
        cmd
    }
}

/// The last `n` lines of a text.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Runs one file's examples; returns what it ran, or why an example failed.
fn run_file(path: &Path, log: &mut String) -> Result<(), String> {
    let text = std::fs::read_to_string(path).expect("read a Markdown file");
    let name = path
        .strip_prefix(repo())
        .unwrap_or(path)
        .display()
        .to_string();
    let sandbox = Sandbox::new();
    for Found { line, example } in examples(&text) {
        let script = match example {
            Example::NotRun(why) => {
                let _ = writeln!(log, "{name}:{line}: not run ({why})");
                continue;
            }
            Example::Shell(script) | Example::Command(script) => script,
        };
        if script.split_whitespace().any(|w| w == "cargo") {
            return Err(format!(
                "{name}:{line}: a block that runs cargo needs `{NOT_RUN}WHY) -->` before it"
            ));
        }
        let t0 = Instant::now();
        let out = sandbox.shell(&script).output().expect("spawn sh");
        let _ = writeln!(
            log,
            "{name}:{line}: ran in {:.1} s",
            t0.elapsed().as_secs_f64()
        );
        if !out.status.success() {
            return Err(format!(
                "{name}:{line}: the example failed ({}):\n{script}\n--- stdout (end):\n{}\n--- stderr (end):\n{}",
                out.status,
                tail(&String::from_utf8_lossy(&out.stdout), 20),
                tail(&String::from_utf8_lossy(&out.stderr), 20),
            ));
        }
    }
    Ok(())
}

#[test]
fn every_shell_example_in_the_readme_and_docs_runs() {
    if irqbench::host::test_kvm().is_none() {
        return;
    }
    let mut log = String::new();
    let mut failures = Vec::new();
    for path in markdown_files() {
        if let Err(why) = run_file(&path, &mut log) {
            failures.push(why);
        }
    }
    println!("{log}");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The README's examples must still be found: a fence or marker renamed would otherwise
    // leave this test with nothing to run.
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("read README.md");
    let found = examples(&readme);
    let runs = found
        .iter()
        .filter(|f| !matches!(f.example, Example::NotRun(_)))
        .count();
    assert!(runs >= 3, "README.md: only {runs} examples found to run");
}

#[test]
fn blocks_markers_and_yaml_steps_are_found_in_order() {
    let text = "intro\n<!-- output: run quick -->\n```\nsample\n```\n<!-- /output -->\n\
                ```sh\nirqbench list\nirqbench host\n```\n\
                <!-- example: not run (builds the tool) -->\n```sh\ncargo build\n```\n\
                ```yaml\nsteps:\n  - run: cargo build --release\n  - run: target/release/irqbench run quick\n```\n\
                ```toml\nname = \"x\"\n```\n";
    let found = examples(text);
    let want = vec![
        Found {
            line: 2,
            example: Example::Command("irqbench run quick --no-save".into()),
        },
        Found {
            line: 7,
            example: Example::Shell("irqbench list\nirqbench host\n".into()),
        },
        Found {
            line: 12,
            example: Example::NotRun("builds the tool".into()),
        },
        Found {
            line: 18,
            example: Example::Command("target/release/irqbench run quick".into()),
        },
    ];
    assert_eq!(found, want);
}

/// GitHub's anchor for a heading: lower case, spaces to hyphens, other punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown text's headings (outside fenced blocks).
fn anchors(text: &str) -> Vec<String> {
    let mut in_fence = false;
    let mut found = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_fence = !in_fence;
        } else if !in_fence && line.starts_with('#') {
            found.push(anchor(line.trim_start_matches('#').trim()));
        }
    }
    found
}

/// Every relative link `](path)` or `](path#anchor)` of a text, outside fenced blocks.
fn relative_links(text: &str) -> Vec<String> {
    let mut in_fence = false;
    let mut links = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = &rest[..end];
            if !target.contains("://") && !target.starts_with("mailto:") {
                links.push(target.to_string());
            }
            rest = &rest[end..];
        }
    }
    links
}

/// The docs moved out of the README link to each other: every relative link names a file that
/// exists, and every `#anchor` a heading of it.
#[test]
fn every_relative_link_in_the_readme_and_docs_resolves() {
    let mut broken = Vec::new();
    for path in markdown_files() {
        let text = std::fs::read_to_string(&path).expect("read a Markdown file");
        for link in relative_links(&text) {
            let (file, fragment) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() {
                path.clone()
            } else {
                path.parent().expect("a folder").join(file)
            };
            let name = path
                .strip_prefix(repo())
                .unwrap_or(&path)
                .display()
                .to_string();
            if !target.exists() {
                broken.push(format!("{name}: ({link}): no such file"));
            } else if !fragment.is_empty() {
                let target_text = std::fs::read_to_string(&target).unwrap_or_default();
                if !anchors(&target_text).iter().any(|a| a == fragment) {
                    broken.push(format!("{name}: ({link}): no such heading"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn anchors_follow_githubs_rule() {
    assert_eq!(anchor("Exit status"), "exit-status");
    assert_eq!(anchor("`host`: the manifest"), "host-the-manifest");
    assert_eq!(
        anchor("The method's limit: `irqbench reference`"),
        "the-methods-limit-irqbench-reference"
    );
}
