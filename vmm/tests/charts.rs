//! The charts beside `--json`, as a real run writes them: the forest plot for slides on
//! numbered 16:9 pages, each written as safely as the first.

use std::path::Path;
use std::process::{Command, Output};

fn run_pv_restore_skip(dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_irqbench"))
        .args([
            "run",
            "pv-restore-skip",
            "--set",
            "run.max_seconds=0.1",
            "--set",
            "run.min_rounds=6",
            "--no-save",
            "-q",
            "--json",
        ])
        .arg(dir.join("x.json"))
        .output()
        .expect("spawn irqbench")
}

/// `width="W" height="H"` of an SVG's root element.
fn size(svg: &str) -> (u32, u32) {
    let head = &svg[..svg.find('>').expect("a root element")];
    let num = |key: &str| -> u32 {
        let at = head.find(key).expect(key) + key.len();
        head[at..].split('"').next().unwrap().parse().unwrap()
    };
    (num("width=\""), num("height=\""))
}

/// pv-restore-skip holds 30 comparisons and 3 answers with their interactions: more than a
/// slide. Its forest plot was one 1228×2506 file; now every page is 1600×900, numbered.
#[test]
fn a_forest_plot_longer_than_a_slide_is_numbered_pages_of_1600_by_900() {
    if irqbench::host::test_kvm().is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let out = run_pv_restore_skip(dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut pages = Vec::new();
    for k in 1.. {
        let name = if k == 1 {
            "x.forest.svg".to_string()
        } else {
            format!("x.forest-{k}.svg")
        };
        let Ok(svg) = std::fs::read_to_string(dir.path().join(&name)) else {
            break;
        };
        assert_eq!(size(&svg), (1600, 900), "{name}");
        pages.push(svg);
    }
    assert!(pages.len() >= 2, "{} page(s)", pages.len());
    let n = pages.len();
    assert!(pages[n - 1].contains(&format!("(page {n} of {n})")));
    assert!(pages[0].contains("pvop-skip vs pvop-popf (cycles/op)"));
}

/// A later page's path is checked as the first one's is: a symlink there is refused (exit 1)
/// and left alone, and the other pages are still written.
#[test]
fn a_symlink_where_a_later_page_goes_is_refused_and_left_alone() {
    if irqbench::host::test_kvm().is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let link = dir.path().join("x.forest-2.svg");
    std::os::unix::fs::symlink("/dev/null", &link).expect("symlink");
    let out = run_pv_restore_skip(dir.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("x.forest-2.svg is a symbolic link"), "{err}");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(dir.path().join("x.forest.svg").exists());
    assert!(dir.path().join("x.forest-3.svg").exists());
}
