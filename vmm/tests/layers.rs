//! The layering of `vmm/src`, checked from the code's own `crate::` and `super::` paths.
//!
//! docs/ARCHITECTURE.md §2 gives the layers; this test holds the code to them: no module imports
//! one of a higher layer (or another module of its own layer), and no two files import each other
//! through any chain. Test code (a file's part from its first top-level `#[cfg(test)]`, and
//! `tests.rs` files) is left out: a test may assemble any layers it needs.
//!
//! `cargo test -p irqbench --test layers -- --nocapture` prints the file graph it checked.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The library's top-level modules, lowest layer first. A module may use only modules of the
/// layers before its own. The binary's `cli/` sits above all of them (it is not in the library);
/// its files are in the circle check like the library's.
const LAYERS: &[&[&str]] = &[
    &["identity", "statistics", "text"],
    &["files"],
    &["results"],
    &["kvm"],
    &["machine"],
    &["vcpu"],
    &["host"],
    &["config"],
    &["session", "analysis"],
    &["measure"],
    &["reference"],
    &["validate"],
    &["report"],
    &["history"],
];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file: `measure/rows.rs` → ["measure", "rows"]; `measure/mod.rs` →
/// ["measure"]; `lib.rs` and `main.rs` → [].
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

/// The non-test code of a file, without comments (doc links name modules without using them).
fn code_of(text: &str) -> String {
    let mut code = String::new();
    for line in text.lines() {
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let line = match line.find("//") {
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        };
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// Every path that starts with `crate::` or `super::`, expanded over `{a, b::c}` groups, as its
/// segments from the crate root.
fn referenced_paths(code: &str, here: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let at_word_start =
            i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let rest = &bytes[i..];
        let base: Option<(usize, Vec<String>)> = if !at_word_start {
            None
        } else if rest.starts_with(b"crate::") {
            Some((7, Vec::new()))
        } else if rest.starts_with(b"super::") {
            // `super` of `a/b/mod.rs` ([a, b]) and of `a/b.rs` ([a, b]) is [a].
            let mut parent = here.to_vec();
            let mut len = 7;
            let mut levels = 1;
            while bytes[i + len..].starts_with(b"super::") {
                len += 7;
                levels += 1;
            }
            for _ in 0..levels {
                parent.pop();
            }
            Some((len, parent))
        } else {
            None
        };
        match base {
            Some((len, prefix)) => {
                let (paths, used) = parse_tree(&code[i + len..]);
                for p in paths {
                    let mut full = prefix.clone();
                    full.extend(p);
                    out.push(full);
                }
                i += len + used.max(1);
            }
            None => i += 1,
        }
    }
    out
}

/// Parses `a::b::{c, d::e}` at the start of `s` into its paths; returns them and the bytes read.
fn parse_tree(s: &str) -> (Vec<Vec<String>>, usize) {
    let b = s.as_bytes();
    let mut i = 0;
    let mut segs = Vec::new();
    loop {
        if i < b.len() && b[i] == b'{' {
            let mut out = Vec::new();
            i += 1;
            loop {
                while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b',') {
                    i += 1;
                }
                if i >= b.len() || b[i] == b'}' {
                    i += 1;
                    break;
                }
                let (inner, used) = parse_tree(&s[i..]);
                for p in inner {
                    let mut full = segs.clone();
                    full.extend(p);
                    out.push(full);
                }
                i += used.max(1);
            }
            return (out, i);
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        if i == start {
            return (vec![segs], i);
        }
        segs.push(s[start..i].to_string());
        if s[i..].starts_with("::") {
            i += 2;
        } else {
            return (vec![segs], i);
        }
    }
}

struct Tree {
    /// module path → file (relative to src/)
    files: BTreeMap<Vec<String>, PathBuf>,
}

impl Tree {
    /// The file that defines the longest module prefix of `path`.
    fn resolve(&self, path: &[String]) -> Option<&PathBuf> {
        (1..=path.len())
            .rev()
            .find_map(|n| self.files.get(&path[..n]))
    }
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn find_cycles(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    // Tarjan's strongly connected components; every component of two or more files is a circle.
    struct State<'a> {
        edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        out: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a PathBuf) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_module_imports_upward_and_no_files_import_in_a_circle() {
    let src = src_dir();
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    let rel: Vec<PathBuf> = paths
        .iter()
        .map(|p| p.strip_prefix(&src).expect("under src").to_path_buf())
        .filter(|r| r.file_name().is_some_and(|n| n != "tests.rs"))
        .collect();
    let tree = Tree {
        files: rel
            .iter()
            .filter(|r| r.as_os_str() != "main.rs")
            .map(|r| (module_path(r), r.clone()))
            .collect(),
    };
    let mut upward = Vec::new();
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for r in &rel {
        let text = std::fs::read_to_string(src.join(r)).expect("source file");
        let here = module_path(r);
        let is_mod = r.file_name().is_some_and(|n| n == "mod.rs");
        let in_bin = r.starts_with("cli") || r.as_os_str() == "main.rs";
        let from = here.first().cloned().unwrap_or_default();
        let mut code = code_of(&text);
        if in_bin {
            // The binary names the library as `irqbench::`; its own tree stays `crate::`.
            code = code.replace("irqbench::", "crate::lib::");
        }
        for p in referenced_paths(&code, &here) {
            let Some(to) = p.first() else { continue };
            if to == "lib" {
                continue;
            }
            // The binary's `cli/` is the top layer: it may use every library module, and its
            // own files are held to no circle like every other folder's.
            if !in_bin && !from.is_empty() && to != &from {
                match (layer_of(&from), layer_of(to)) {
                    (Some(a), Some(b)) if b >= a => upward.push(format!(
                        "{}: uses crate::{} ({}), a module of layer {b} from layer {a}",
                        r.display(),
                        p.join("::"),
                        to
                    )),
                    (None, _) => {
                        upward.push(format!("{}: module `{from}` is in no layer", r.display()))
                    }
                    (_, None) if tree.files.contains_key(&vec![to.clone()]) => upward.push(
                        format!("{}: uses `{to}`, which is in no layer", r.display()),
                    ),
                    _ => {}
                }
            }
            // A folder's mod.rs may use its own files (it is their front door); the other way
            // round, and between files, every use is an arrow.
            let own_descendant = is_mod && p.len() > here.len() && p.starts_with(&here);
            if let Some(target) = tree.resolve(&p) {
                if target != r && !own_descendant {
                    edges.entry(r.clone()).or_default().insert(target.clone());
                }
            }
        }
        edges.entry(r.clone()).or_default();
    }
    for (from, tos) in &edges {
        let tos: Vec<String> = tos.iter().map(|t| t.display().to_string()).collect();
        println!("{} -> {}", from.display(), tos.join(", "));
    }
    let cycles = find_cycles(&edges);
    let mut problems = upward;
    for c in cycles {
        let names: Vec<String> = c.iter().map(|p| p.display().to_string()).collect();
        problems.push(format!(
            "files import each other in a circle: {}",
            names.join(", ")
        ));
    }
    assert!(
        problems.is_empty(),
        "layering broken:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_top_level_module_has_a_layer() {
    let src = src_dir();
    let mut missing = Vec::new();
    for e in std::fs::read_dir(&src).expect("src") {
        let p = e.expect("entry").path();
        let name = p.file_stem().expect("name").to_string_lossy().into_owned();
        if matches!(name.as_str(), "lib" | "main" | "cli") {
            continue;
        }
        if layer_of(&name).is_none() {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "modules in no layer of tests/layers.rs: {missing:?}"
    );
}
