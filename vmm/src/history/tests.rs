//! Store tests on synthetic runs in temporary folders: no KVM, never the real data folder.

use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use super::*;
use crate::report::tests::rounds;
use crate::results::{
    Ci, ComparedMetric, Estimate, HostManifest, PairedComparison, PhaseResult, ResultKind,
    RunReport, SCHEMA,
};

fn row(strategy: &str, cycles: f64, spread: f64) -> PhaseResult {
    PhaseResult {
        name: format!("quick/{strategy}/n0/none/1v"),
        group: "quick/n0/none/1v".into(),
        kind: ResultKind::Strategy,
        strategy: crate::identity::Subject::from_name(strategy).expect(strategy),
        irq_source: "none".into(),
        vcpus: 1,
        body_ops: 4,
        ops: 100_000,
        rounds: 25,
        cycles_per_op: rounds(cycles, spread, 25),
        ns_per_op: rounds(cycles / 2.6, spread / 2.6, 25),
        ops_per_sec: rounds(2.6e9 / (cycles + 70_000.0), 10.0, 25),
        ..PhaseResult::default()
    }
}

/// A quick-like run started at `started` whose native-popf costs `popf` cycles.
fn report(started: u64, popf: f64) -> RunReport {
    RunReport {
        schema: SCHEMA.into(),
        irqbench_version: "0.1.0".into(),
        config_name: "quick".into(),
        config_source: "<shipped config quick>".into(),
        started_unix: started,
        wall_seconds: 12.5,
        host: HostManifest {
            cpu_model: "Test CPU".into(),
            host_cpus: 2,
            kernel_release: "6.1.0-test".into(),
            kvm_flavour: "vmx".into(),
            ..HostManifest::default()
        },
        results: vec![
            row("native-popf", popf, 80.0),
            row("native-skip", 13_000.0, 80.0),
        ],
        comparisons: vec![PairedComparison {
            a: "quick/native-popf/n0/none/1v".into(),
            b: "quick/native-skip/n0/none/1v".into(),
            group: "quick/n0/none/1v".into(),
            metric: ComparedMetric::CyclesPerOp,
            ratio: Some(Estimate {
                point: 0.88,
                ci: Some(Ci::from([0.87, 0.89])),
            }),
            rounds: 25,
            no_ratio: None,
            ..PairedComparison::default()
        }],
        ..RunReport::default()
    }
}

fn loc(path: &Path) -> DbLocation {
    DbLocation {
        path: path.to_owned(),
        explicit: true,
    }
}

fn meta() -> RunMeta<'static> {
    RunMeta {
        origin: Origin::Run,
        config_text: Some("name = \"quick\"\n"),
        guest: Some(("<embedded>", b"\x7fELF")),
        source_file: None,
    }
}

fn db(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("history.sqlite")
}

#[test]
fn the_default_location_follows_xdg_then_home() {
    use std::ffi::OsStr;
    let p = default_path(Some(OsStr::new("/x/data")), Some(OsStr::new("/home/u"))).unwrap();
    assert_eq!(p, Path::new("/x/data/irqbench/history.sqlite"));
    // A relative or empty XDG_DATA_HOME is ignored, as the spec says.
    for xdg in [None, Some(OsStr::new("")), Some(OsStr::new("rel/data"))] {
        let p = default_path(xdg, Some(OsStr::new("/home/u"))).unwrap();
        assert_eq!(p, Path::new("/home/u/.local/share/irqbench/history.sqlite"));
    }
    assert!(matches!(
        default_path(None, None),
        Err(HistoryError::NoLocation)
    ));
}

#[test]
fn a_saved_run_reads_back_exactly_with_rows_and_comparisons() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&loc(&db(&dir))).unwrap();
    assert_eq!(store.schema_version().unwrap(), LATEST_VERSION);
    let r = report(1_700_000_000, 14_750.0);
    let id = match store.save(&r, &meta()).unwrap() {
        Saved::New(id) => id,
        other => panic!("{other:?}"),
    };
    assert_eq!(store.report(id).unwrap(), r);
    assert_eq!(store.save(&r, &meta()).unwrap(), Saved::Duplicate(id));
    let runs = store.runs(&RunFilter {
        last: 10,
        ..RunFilter::default()
    });
    let runs = runs.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].rows, 2);
    assert_eq!(
        runs[0].host_label,
        "Test CPU (2 CPUs), kernel 6.1.0-test, vmx"
    );
    assert_eq!(
        runs[0].config_sha256.as_deref(),
        Some(sha256_hex(b"name = \"quick\"\n").as_str())
    );
    let (comparisons, samples): (i64, String) = store
        .conn
        .query_row(
            "SELECT (SELECT count(*) FROM comparisons WHERE run_id = ?1),
                    (SELECT cycles_samples FROM results WHERE run_id = ?1 AND position = 0)",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(comparisons, 1);
    let samples: Vec<f64> = serde_json::from_str(&samples).unwrap();
    assert_eq!(samples, r.results[0].cycles_per_op.samples);
    let points = store.trend(&[id], Some("native-skip")).unwrap();
    assert_eq!(points.len(), 1);
    assert!(points[0].ci95.is_some());
}

#[test]
fn sha256_matches_a_known_digest() {
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

/// Two connections saving at the same time (WAL, busy timeout): every run lands.
#[test]
fn concurrent_saves_from_two_connections_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    Store::open(&loc(&path)).unwrap();
    let threads: Vec<_> = (0..2u64)
        .map(|t| {
            let path = path.clone();
            std::thread::spawn(move || {
                let store = Store::open(&loc(&path)).unwrap();
                for i in 0..10u64 {
                    let r = report(1_700_000_000 + t * 1000 + i, 14_000.0 + i as f64);
                    assert!(matches!(store.save(&r, &meta()).unwrap(), Saved::New(_)));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let store = Store::open(&loc(&path)).unwrap();
    assert_eq!(store.run_count().unwrap(), 20);
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

/// A version 1 or 2 database (this build's, marked older) is refused, left as it was, with the
/// commands that carry its runs into a new one; those commands do so.
#[test]
fn an_older_schema_is_refused_with_the_commands_that_carry_its_runs_over() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let r = report(1_600_000_000, 15_000.0);
    {
        let store = Store::open(&loc(&path)).unwrap();
        store.save(&r, &meta()).unwrap();
        store.conn.pragma_update(None, "user_version", 2).unwrap();
        store
            .conn
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
    }
    let before = fs::read(&path).unwrap();
    for version in [2, 1] {
        if version == 1 {
            let conn = Connection::open(&path).unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
        }
        let err = Store::open(&loc(&path)).unwrap_err();
        assert!(
            matches!(err, HistoryError::Older { found, .. } if found == version),
            "{err}"
        );
        let said = err.to_string();
        assert!(said.contains("irqbench import runs/*.json"), "{said}");
        assert!(said.contains(&*path.to_string_lossy()), "{said}");
    }
    assert_eq!(fs::read(&path).unwrap().len(), before.len());
    // What the message's SQL writes is each stored report, which imports as it was saved.
    let conn = Connection::open(&path).unwrap();
    let json: String = conn
        .query_row("SELECT report_json FROM runs WHERE id = 1", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert_eq!(crate::report::report_from_str(&json).unwrap(), r);
}

#[test]
fn a_newer_schema_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    {
        let store = Store::open(&loc(&path)).unwrap();
        store.conn.pragma_update(None, "user_version", 99).unwrap();
        store
            .conn
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
    }
    let before = fs::read(&path).unwrap();
    let err = Store::open(&loc(&path)).unwrap_err();
    assert!(
        matches!(err, HistoryError::Newer { found: 99, .. }),
        "{err}"
    );
    assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
    assert_eq!(fs::read(&path).unwrap(), before);
}

/// A text file, a short file, another application's database (with and without an id) and a
/// damaged one: each is refused with its path, and not one byte of it changes.
#[test]
fn foreign_and_damaged_files_are_refused_and_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    fs::write(&text, "my notes, not a database\n".repeat(20)).unwrap();
    let short = dir.path().join("short");
    fs::write(&short, "SQLite").unwrap();
    let other = dir.path().join("other.sqlite");
    {
        let c = Connection::open(&other).unwrap();
        c.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
            .unwrap();
    }
    let tagged = dir.path().join("tagged.sqlite");
    {
        let c = Connection::open(&tagged).unwrap();
        c.execute_batch("PRAGMA application_id = 42; CREATE TABLE t (x);")
            .unwrap();
    }
    let damaged = dir.path().join("damaged.sqlite");
    {
        let store = Store::open(&loc(&damaged)).unwrap();
        store.save(&report(1, 1.0), &meta()).unwrap();
        store
            .conn
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
    }
    let mut bytes = fs::read(&damaged).unwrap();
    // Keep the header, scramble the schema on page 1.
    for (i, b) in bytes.iter_mut().enumerate().skip(100).take(3900) {
        *b = (i * 31 % 251) as u8;
    }
    fs::write(&damaged, &bytes).unwrap();
    for (path, expected) in [
        (&text, "not an SQLite database"),
        (&short, "not an SQLite database"),
        (&other, "without irqbench's application_id"),
        (&tagged, "another application's"),
        (&damaged, "damaged"),
    ] {
        let before = fs::read(path).unwrap();
        let err = Store::open(&loc(path)).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(expected) && msg.contains(&*path.to_string_lossy()),
            "{}: {msg}",
            path.display()
        );
        assert_eq!(
            fs::read(path).unwrap(),
            before,
            "{} changed",
            path.display()
        );
    }
}

#[test]
fn links_fifos_and_folders_at_the_path_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let real = db(&dir);
    Store::open(&loc(&real)).unwrap();
    let link = dir.path().join("link.sqlite");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let fifo = dir.path().join("fifo.sqlite");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path, which outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for (path, kind) in [
        (link.as_path(), "symbolic link"),
        (fifo.as_path(), "FIFO"),
        (Path::new("/dev/null"), "character device"),
        (dir.path(), "directory"),
    ] {
        let err = Store::open(&loc(path)).unwrap_err();
        assert!(err.to_string().contains(kind), "{err}");
    }
    let missing_folder = dir.path().join("nope").join("h.sqlite");
    let err = Store::open(&loc(&missing_folder)).unwrap_err();
    assert!(matches!(err, HistoryError::NoFolder { .. }), "{err}");
    // The default location creates its folder.
    let default = DbLocation {
        path: dir.path().join("data/irqbench/history.sqlite"),
        explicit: false,
    };
    Store::open(&default).unwrap();
    assert!(matches!(
        Store::open_existing(&loc(&dir.path().join("absent.sqlite"))),
        Err(HistoryError::Missing { .. })
    ));
}

/// A FIFO, link or folder beside the database (`-wal`, `-shm`, `-journal`) is refused by its
/// kind before SQLite sees it: SQLite would open a FIFO there read-write and then unlink it.
#[test]
fn fifos_links_and_folders_beside_the_database_are_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let real = db(&dir);
    Store::open(&loc(&real)).unwrap();
    let wal = dir.path().join("history.sqlite-wal");
    let c = std::ffi::CString::new(wal.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path, which outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let err = Store::open(&loc(&real)).unwrap_err();
    assert!(
        matches!(&err, HistoryError::NotRegular { path, kind: "FIFO" } if *path == wal),
        "{err}"
    );
    assert!(Store::open_existing(&loc(&real)).is_err());
    assert!(fs::symlink_metadata(&wal).unwrap().file_type().is_fifo());
    fs::remove_file(&wal).unwrap();
    let shm = dir.path().join("history.sqlite-shm");
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), &shm).unwrap();
    let err = Store::open(&loc(&real)).unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    fs::remove_file(&shm).unwrap();
    fs::create_dir(dir.path().join("history.sqlite-journal")).unwrap();
    let err = Store::open(&loc(&real)).unwrap_err();
    assert!(err.to_string().contains("directory"), "{err}");
}

/// Issue 20 item 5: a page `baseline save` never reads (the runs' unique index, which the
/// next run's save trips over) is damage all the same: the baseline is refused and the file
/// keeps every byte.
#[test]
fn a_baseline_is_not_saved_into_a_damaged_history() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let root: i64 = {
        let store = Store::open(&loc(&path)).unwrap();
        store.save(&report(10, 1.0), &meta()).unwrap();
        store
            .conn
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
        store
            .conn
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_runs_1'",
                [],
                |r| r.get(0),
            )
            .unwrap()
    };
    let mut bytes = fs::read(&path).unwrap();
    let page = 4096 * (root as usize - 1);
    bytes[page..page + 4096].fill(0xde);
    fs::write(&path, &bytes).unwrap();
    let store = Store::open(&loc(&path)).unwrap();
    let err = store.save_baseline("main", None).unwrap_err();
    assert!(matches!(err, HistoryError::Corrupt { .. }), "{err}");
    let cause = std::error::Error::source(&err).map(ToString::to_string);
    assert!(
        cause.as_deref().is_some_and(|c| c.contains("Page")),
        "the cause names the damaged page: {cause:?}"
    );
    drop(store);
    assert_eq!(fs::read(&path).unwrap(), bytes, "the damaged file changed");
}

#[test]
fn baselines_name_runs_and_refuse_ambiguous_names() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&loc(&db(&dir))).unwrap();
    assert!(matches!(
        store.save_baseline("b", None),
        Err(HistoryError::NoRuns { .. })
    ));
    let first = store.save(&report(10, 1.0), &meta()).unwrap().id();
    let second = store.save(&report(20, 1.0), &meta()).unwrap().id();
    assert_eq!(store.save_baseline("main", None).unwrap(), (second, None));
    assert_eq!(
        store.save_baseline("main", Some(first)).unwrap(),
        (first, Some(second))
    );
    assert_eq!(store.baseline_run("main").unwrap(), first);
    let err = store.save_baseline("x", Some(99)).unwrap_err();
    assert!(err.to_string().contains("no run 99"), "{err}");
    for bad in [
        "",
        "12",
        "latest",
        "a b",
        "x.json",
        "-x",
        "a/b",
        &"n".repeat(65),
    ] {
        let err = store.save_baseline(bad, None).unwrap_err();
        assert!(matches!(err, HistoryError::BadBaselineName { .. }), "{bad}");
    }
    // A name of 10k characters is refused without being echoed in full.
    let err = store
        .save_baseline(&"n".repeat(10_000), None)
        .unwrap_err()
        .to_string();
    assert!(err.len() < 400 && err.contains("…"), "{} bytes", err.len());
    assert_eq!(store.baselines().unwrap().len(), 1);
    assert_eq!(store.remove_baseline("main").unwrap(), first);
    let err = store.remove_baseline("main").unwrap_err();
    assert!(err.to_string().contains("none yet"), "{err}");
}

#[test]
fn compare_arguments_name_files_runs_and_baselines() {
    let parse = |arg: &str| RunRef::parse(arg).unwrap();
    assert_eq!(parse("12"), RunRef::Run(12));
    assert_eq!(parse("run:7"), RunRef::Run(7));
    assert_eq!(parse("latest"), RunRef::Latest);
    assert_eq!(parse("main"), RunRef::Baseline("main".into()));
    assert_eq!(parse("baseline:12"), RunRef::Baseline("12".into()));
    assert_eq!(parse("a.json"), RunRef::File(PathBuf::from("a.json")));
    assert_eq!(parse("out/x"), RunRef::File(PathBuf::from("out/x")));
    assert!(matches!(parse("/dev/zero"), RunRef::File(_)));
}

#[test]
fn run_colon_without_an_id_says_the_id_is_missing_not_no_baseline() {
    for arg in ["run:", "run:x", "run:-1", "run:+3"] {
        let err = RunRef::parse(arg).unwrap_err().to_string();
        assert!(err.starts_with(&format!("`{arg}` names no run")), "{err}");
        assert!(
            err.contains("`run:12`") && !err.contains("no baseline"),
            "{err}"
        );
    }
    // Shown on one line, however the argument was typed.
    let err = RunRef::parse("run:\nFAKE").unwrap_err().to_string();
    assert!(!err.contains('\n') && err.contains("run:\\nFAKE"), "{err}");
}

#[test]
fn check_fails_on_a_slower_run_and_passes_on_the_same_one() {
    let base = report(10, 14_750.0);
    let same = report(20, 14_760.0);
    let o = check(&base, &same, "B", 1, DEFAULT_MAX_REGRESSION_PCT, false);
    assert!(o.passed(), "{}", render_check(&o));
    assert!(render_check(&o).contains("check passed"));
    let slower = report(30, 18_000.0);
    let o = check(&base, &slower, "B", 1, DEFAULT_MAX_REGRESSION_PCT, false);
    assert!(!o.passed());
    let text = render_check(&o);
    assert!(
        text.contains("check FAILED") && text.contains("native-popf"),
        "{text}"
    );
    // A threshold above the change lets it pass; a faster run is an improvement, not a failure.
    assert!(check(&base, &slower, "B", 1, 30.0, false).passed());
    let o = check(&slower, &base, "B", 1, DEFAULT_MAX_REGRESSION_PCT, false);
    assert!(o.passed() && !o.improvements.is_empty());
    // A row the new run lacks fails the check.
    let mut fewer = report(40, 14_750.0);
    fewer.results.pop();
    let o = check(&base, &fewer, "B", 1, DEFAULT_MAX_REGRESSION_PCT, false);
    assert!(!o.passed() && o.missing.len() == 1);
}

/// A baseline with no rows leaves nothing to compare: the check fails and says so, where it
/// had passed with "0 figures compared".
#[test]
fn check_fails_when_it_compared_nothing() {
    let mut empty = report(10, 14_750.0);
    empty.results.clear();
    let o = check(&empty, &report(20, 14_750.0), "B", 1, 5.0, false);
    let text = render_check(&o);
    assert!(!o.passed(), "{text}");
    assert!(
        text.contains("check FAILED") && text.contains("no figure compared"),
        "{text}"
    );
}

/// A run with too few kept rounds for an exits count has no exits figure: `compare` says no
/// data and the check does not judge it, where it had shown `0`.
#[test]
fn exits_without_a_count_are_no_data_not_zero() {
    let mut base = report(10, 14_750.0);
    for r in &mut base.results {
        let exits = crate::results::CountEstimate {
            per_op: 0.5,
            ci95: Ci::from([0.45, 0.55]),
            rounds: 25,
            ops: 25_000,
            ..Default::default()
        };
        r.counts.insert(crate::results::EXITS_STAT.into(), exits);
    }
    let few = report(20, 14_750.0);
    let c = crate::analysis::compare::compare(&base, &few);
    let rows: Vec<_> = c.rows.iter().filter(|r| r.metric == "exits/op").collect();
    assert_eq!(rows.len(), base.results.len());
    for r in &rows {
        assert_eq!(
            r.basis,
            crate::analysis::compare::NoiseBasis::NoData,
            "{r:?}"
        );
    }
    let text = crate::report::render_compare(&c, false);
    assert!(!text.contains("NaN"), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("exits/op"))
        .unwrap_or_default();
    assert!(line.contains("no data") && !line.contains("  0 "), "{text}");
    assert!(!check(&base, &few, "B", 1, 5.0, false).passed());
}

/// A gate that cannot judge does not pass: a new run whose row has no data (it kept no
/// round) fails the check with the row named, and `compare` shows "no data", never −100%.
#[test]
fn check_fails_closed_on_a_row_without_data_and_compare_says_no_data() {
    let base = report(10, 14_750.0);
    let mut empty = report(20, 14_750.0);
    let row = &mut empty.results[0];
    row.rounds = 0;
    row.no_data = Some("no data (35 of 35 blocks disturbed)".into());
    for s in [
        &mut row.cycles_per_op,
        &mut row.ns_per_op,
        &mut row.ops_per_sec,
    ] {
        *s = crate::results::Summary::no_data();
    }
    let name = row.name.clone();
    let o = check(&base, &empty, "B", 1, DEFAULT_MAX_REGRESSION_PCT, false);
    let text = render_check(&o);
    assert!(!o.passed(), "{text}");
    assert!(
        text.contains("check FAILED") && !text.contains("check passed"),
        "{text}"
    );
    assert!(
        text.contains(&format!("`{name}` cycles/op: not judged")),
        "{text}"
    );
    assert!(!text.contains("-100") && !text.contains("−100"), "{text}");
    let compared =
        crate::report::render_compare(&crate::analysis::compare::compare(&base, &empty), false);
    assert!(compared.contains("no data"), "{compared}");
    assert!(
        !compared.contains("-100") && !compared.contains("−100"),
        "{compared}"
    );
}

/// Rows are matched by what they measured: the same name with another `body_ops` is not the
/// same row (it is named, with the field that differs, and the check fails), and a changed
/// host (kernel, microcode, KVM module parameters) is listed.
#[test]
fn check_matches_rows_by_what_they_measured_and_names_host_changes() {
    let base = report(10, 14_750.0);
    let mut other = report(20, 14_750.0);
    other.results[0].body_ops += 4;
    other.host.kernel_release = "6.99.0-new".into();
    other
        .host
        .module_params
        .insert("kvm_amd.avic".into(), "1".into());
    let o = check(&base, &other, "B", 1, DEFAULT_MAX_REGRESSION_PCT, false);
    assert!(!o.passed());
    let text = render_check(&o);
    assert!(text.contains("config differs, not compared"), "{text}");
    assert!(
        text.contains(&format!(
            "body_ops {} --> {}",
            base.results[0].body_ops,
            base.results[0].body_ops + 4
        )),
        "{text}"
    );
    assert!(
        text.contains("kernel_release:") && text.contains("6.99.0-new"),
        "{text}"
    );
    assert!(text.contains("kvm_amd.avic: (absent) --> 1"), "{text}");
}

std::thread_local! {
    /// Hashes the counting hasher below finished on this thread.
    static HASHES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The standard hasher, counting each hash it computes (lookups, inserts and a growing table's
/// rehashes alike).
#[derive(Default)]
struct CountingHasher(std::collections::hash_map::DefaultHasher);

impl std::hash::Hasher for CountingHasher {
    fn finish(&self) -> u64 {
        HASHES.with(|h| h.set(h.get() + 1));
        self.0.finish()
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }
}

/// How many hashes grouping `points` computed.
fn hashes_to_group(points: &[TrendPoint]) -> (u64, usize) {
    HASHES.with(|h| h.set(0));
    let grouped = trend::trends_hashed::<std::hash::BuildHasherDefault<CountingHasher>>(points);
    (HASHES.with(std::cell::Cell::get), grouped.len())
}

/// `history` over a run with very many rows (an import of a 250 MB results file holds 400k):
/// the rows are grouped in linear time, where a search per point took hours. Counted, not
/// timed: one lookup per point, one insert per name, and the table's rehashes as it grows
/// (fewer than two per name in all) — at most 4 hashes a point at any size, where a search per
/// point compares each point with every name before it.
#[test]
fn trends_of_runs_with_many_rows_are_grouped_in_linear_time() {
    let points = |n: i64| -> Vec<TrendPoint> {
        (0..n)
            .map(|i| TrendPoint {
                run_id: 1 + (i % 2),
                started_unix: 0,
                name: format!("quick/native-popf/n0/none/{}v", i / 2),
                kind: "strategy".into(),
                strategy: "native-popf".into(),
                median: 1.0,
                ci95: None,
            })
            .collect()
    };
    let (small, large) = (points(50_000), points(200_000));
    let grouped = trend::trends(&large);
    assert_eq!(grouped.len(), 100_000);
    assert!(grouped.iter().all(|t| t.points.len() == 2));
    assert_eq!(grouped[7].name, "quick/native-popf/n0/none/7v");
    // Every name distinct: the most inserts and rehashes a point can cause.
    let mut distinct = points(200_000);
    for (i, p) in distinct.iter_mut().enumerate() {
        p.name = format!("quick/native-popf/n0/none/{i}v");
    }
    for p in [&small, &large, &distinct] {
        let (hashes, names) = hashes_to_group(p);
        let n = p.len() as u64;
        eprintln!("{n} points, {names} names: {hashes} hashes");
        assert!(
            hashes >= n,
            "{hashes} hashes for {n} points: not every point looked up"
        );
        assert!(
            hashes <= 4 * n,
            "{hashes} hashes for {n} points ({names} names): more than a constant per point"
        );
    }
}

#[test]
fn history_text_json_and_svg_carry_the_intervals() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&loc(&db(&dir))).unwrap();
    let mut noisy = report(100, 14_750.0);
    // A net whose CI spans zero must print as ≈0, never as a plain number.
    noisy.results[1].cycles_per_op = rounds(5.0, 200.0, 25);
    for r in [report(50, 14_700.0), noisy] {
        store.save(&r, &meta()).unwrap();
    }
    store.save_baseline("B", Some(1)).unwrap();
    let runs = store
        .runs(&RunFilter {
            last: 20,
            ..RunFilter::default()
        })
        .unwrap();
    let ids: Vec<i64> = runs.iter().map(|r| r.id).collect();
    assert_eq!(ids, vec![1, 2], "oldest first");
    let points = store.trend(&ids, None).unwrap();
    let text = render_history(store.path(), &runs, &points);
    assert!(text.contains("baseline B"), "{text}");
    assert!(text.contains("≈0 (±"), "{text}");
    assert!(text.contains(" ±"), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&render_history_json(store.path(), &runs, &points).unwrap()).unwrap();
    assert_eq!(json["trends"].as_array().unwrap().len(), 2);
    assert!(json["trends"][0]["points"][0]["ci95"].is_array());
    let svg = render_trend_svg(&points).unwrap();
    assert!(svg.contains("<svg") && svg.contains("<polygon"), "no band");
    // A stored name with a control character (an imported file's) keeps the XML well-formed.
    let mut hostile = points.clone();
    for p in &mut hostile {
        p.name = format!("{}\u{1b}]0;t\u{7}", p.name);
    }
    let svg = render_trend_svg(&hostile).unwrap();
    assert!(
        !svg.bytes().any(|b| b < 0x20 && b != b'\n' && b != b'\t'),
        "raw control in SVG"
    );
    assert!(
        svg.contains("\\u{1b}]0;t\\u{7}"),
        "the name is shown escaped"
    );
    let none = store
        .runs(&RunFilter {
            strategy: Some("nope".into()),
            last: 5,
            ..RunFilter::default()
        })
        .unwrap();
    assert!(none.is_empty());
    let why = store
        .explain_no_match(&RunFilter {
            strategy: Some("nope".into()),
            ..RunFilter::default()
        })
        .unwrap();
    assert!(why.to_string().contains("native-popf"), "{why}");
}

/// No line of `text` is one a newline in stored or typed text forged.
fn no_forged_line(text: &str) {
    assert!(
        !text.lines().any(|l| l.trim_start().starts_with("FAKE")),
        "a forged line:\n{text}"
    );
}

/// A newline in an imported run's config name or host, or in a name given as an argument,
/// is shown as `\n` inside its line: every listing and message that quotes one.
#[test]
fn newlines_in_stored_or_typed_names_never_start_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&loc(&db(&dir))).unwrap();
    let mut r = report(50, 14_700.0);
    r.config_name = "quick\nFAKE check passed".into();
    r.host.cpu_model = "EPYC\nFAKE host".into();
    store.save(&r, &meta()).unwrap();
    store.save(&report(60, 14_700.0), &meta()).unwrap();
    store.save_baseline("B", Some(1)).unwrap();
    let all = RunFilter {
        last: 20,
        ..RunFilter::default()
    };
    let runs = store.runs(&all).unwrap();
    let points = store.trend(&[1, 2], None).unwrap();
    for text in [
        render_history(store.path(), &runs, &points),
        render_history_pivot(store.path(), &runs, &points, 100),
        // One run: its host is said once, above the table.
        render_history_pivot(store.path(), &runs[..1], &points, 100),
        render_baselines(&store.baselines().unwrap()),
    ] {
        no_forged_line(&text);
        assert!(text.contains("quick\\nFAKE check passed"), "{text}");
        assert!(text.contains("EPYC\\nFAKE host"), "{text}");
    }
    for (filter, stored) in [
        (
            RunFilter {
                config: Some("x\nFAKE".into()),
                ..all.clone()
            },
            "quick\\nFAKE",
        ),
        (
            RunFilter {
                host: Some("x\nFAKE".into()),
                ..all.clone()
            },
            "EPYC\\nFAKE",
        ),
    ] {
        let why = store.explain_no_match(&filter).unwrap().to_string();
        no_forged_line(&why);
        assert!(why.contains("x\\nFAKE") && why.contains(stored), "{why}");
    }
    let err = store.baseline_run("x\nFAKE").unwrap_err().to_string();
    no_forged_line(&err);
    assert!(err.contains("`x\\nFAKE`"), "{err}");
}

#[test]
fn runs_are_ordered_by_when_they_started_not_when_they_were_stored() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&loc(&db(&dir))).unwrap();
    // Today's run first, then an import of one a year older.
    let today = store
        .save(&report(1_790_000_000, 14_750.0), &meta())
        .unwrap()
        .id();
    let old = store
        .save(&report(1_758_000_000, 14_700.0), &meta())
        .unwrap()
        .id();
    let ids: Vec<i64> = store
        .runs(&RunFilter {
            last: 10,
            ..RunFilter::default()
        })
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, vec![old, today], "oldest first by start time");
    assert_eq!(store.latest().unwrap(), today);
    let last = store
        .runs(&RunFilter {
            last: 1,
            ..RunFilter::default()
        })
        .unwrap();
    assert_eq!(last[0].id, today);
}

#[test]
fn a_time_or_count_beyond_sqlite_integers_is_refused_not_wrapped() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&loc(&db(&dir))).unwrap();
    let err = store.save(&report(u64::MAX, 1.0), &meta()).unwrap_err();
    assert!(
        matches!(
            err,
            HistoryError::OutOfRange {
                field: "started_unix",
                ..
            }
        ),
        "{err}"
    );
    let mut r = report(1_790_000_000, 1.0);
    r.results[0].ops = u64::MAX;
    let err = store.save(&r, &meta()).unwrap_err().to_string();
    assert!(err.contains("results[].ops"), "{err}");
    assert_eq!(store.run_count().unwrap(), 0);
}

/// A read-only open reads what a save wrote, also as immutable (a read-only mount), and a
/// file name with URI characters (`?`, `#`, `%`, a space) stays one file name.
#[test]
fn a_read_only_open_reads_the_runs_under_any_file_name() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("odd ?#%name.sqlite");
    let s = Store::open(&loc(&path)).expect("open");
    s.save(&report(1_700_000_000, 14_000.0), &meta())
        .expect("save");
    drop(s);
    for immutable in [false, true] {
        let s = if immutable {
            Store::connect_read_only(&path, true).expect("immutable")
        } else {
            Store::open_read_only(&loc(&path)).expect("read-only")
        };
        assert_eq!(s.run_count().expect("count"), 1, "immutable {immutable}");
        let err = s.save(&report(1_700_000_600, 15_000.0), &meta());
        assert!(err.is_err(), "a read-only store saved");
    }
    let names: Vec<_> = fs::read_dir(dir.path())
        .expect("ls")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| n.to_string_lossy().starts_with("odd ?#%name.sqlite")),
        "{names:?}"
    );
}

/// A host 20% slower at everything (net, loop and throughput alike) moves raw cycles/op and
/// ops/s beyond noise, which the default gate's loop units do not confirm (no regression, the
/// figures named as the host's speed); in units of the group's own loop nothing moved, and the
/// normalised gate (which leaves ops/s out) passes, its header naming the
/// group whose loop moved. A change to one strategy alone still fails it.
#[test]
fn the_normalised_gate_sees_through_a_uniformly_slower_host() {
    let with_loop = |scale: f64, popf_extra: f64| {
        let mut r = report(10, 14_750.0 * scale * popf_extra);
        for row in &mut r.results {
            let loop_cycles = 70_000.0 * scale;
            row.cycles_per_op = rounds(row.cycles_per_op.median, 80.0 * scale, 25);
            row.cycles_per_loop = rounds(row.cycles_per_op.median / loop_cycles, 0.001, 25);
            row.baseline_cycles = rounds(loop_cycles, 100.0 * scale, 25);
            row.baseline_ns = rounds(loop_cycles / 2.5, 40.0 * scale, 25);
            row.ops_per_sec = rounds(30_000.0 / scale, 30.0 / scale, 25);
        }
        r
    };
    let base = with_loop(1.0, 1.0);
    let slower_host = with_loop(1.2, 1.0);
    let raw = check(
        &base,
        &slower_host,
        "B",
        1,
        DEFAULT_MAX_REGRESSION_PCT,
        false,
    );
    assert!(
        raw.passed() && !raw.host_speed.is_empty(),
        "{}",
        render_check(&raw)
    );
    let o = check(
        &base,
        &slower_host,
        "B",
        1,
        DEFAULT_MAX_REGRESSION_PCT,
        true,
    );
    let text = render_check(&o);
    assert!(o.passed(), "{text}");
    assert!(
        text.contains("cost/loop") && text.contains("ops/loop") && !text.contains("ops/s"),
        "{text}"
    );
    let group = &base.results[0].group;
    assert!(
        text.contains(&format!("host speed differs: {group}: its `empty` loop"))
            && text.contains("(+20.0%)"),
        "{text}"
    );
    // A row whose throughput alone fell (on several vCPUs, the slowest vCPU's) still fails
    // the normalised gate, on ops/loop.
    let mut straggler = with_loop(1.2, 1.0);
    let ops = &mut straggler.results[0].ops_per_sec;
    *ops = rounds(ops.median * 0.75, 30.0, 25);
    let o = check(&base, &straggler, "B", 1, DEFAULT_MAX_REGRESSION_PCT, true);
    assert!(
        o.regressions.len() == 1 && o.regressions[0].metric == "ops/loop",
        "{}",
        render_check(&o)
    );
    let slower_popf = with_loop(1.0, 1.2);
    assert!(!check(
        &base,
        &slower_popf,
        "B",
        1,
        DEFAULT_MAX_REGRESSION_PCT,
        true
    )
    .passed());
}

/// Three earlier runs of the config on this machine give a run its rerun intervals (their
/// spread, t(2) × √2 × sd); two do not, and another config's runs never count.
#[test]
fn three_earlier_runs_give_rerun_intervals_and_two_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&loc(&db(&dir))).unwrap();
    let host = crate::host::hostname().unwrap_or_else(|| "test-host".into());
    let mut other = report(1_700_000_000, 14_000.0);
    other.config_name = "strategies".into();
    store.save(&other, &meta()).unwrap();
    let with_ratio = |started: u64, ratio: f64| {
        let mut r = report(started, 14_000.0 + ratio);
        r.comparisons[0].ratio = Some(Estimate {
            point: ratio,
            ci: Some([ratio - 0.001, ratio + 0.001].into()),
        });
        r
    };
    for (i, ratio) in [0.87, 0.88].into_iter().enumerate() {
        store
            .save(&with_ratio(1_700_000_100 + i as u64, ratio), &meta())
            .unwrap();
    }
    let mut next = with_ratio(1_700_000_200, 0.88);
    fill_rerun(&store, &mut next, &host, 0.005).unwrap();
    assert_eq!(next.rerun, None);
    assert_eq!(next.comparisons[0].rerun95, None);
    assert_eq!(next.results[0].rerun95, None);
    store
        .save(&with_ratio(1_700_000_150, 0.89), &meta())
        .unwrap();
    fill_rerun(&store, &mut next, &host, 0.005).unwrap();
    let level = next.rerun.as_ref().expect("a rerun level");
    assert_eq!(level.earlier_runs, 3);
    // sd of 0.87, 0.88, 0.89 is 0.01: ± 4.303 × √2 × 0.01.
    let ci = next.comparisons[0].rerun95.expect("a rerun interval");
    let half = 4.303 * std::f64::consts::SQRT_2 * 0.01;
    assert!(
        (ci.hi - 0.88 - half).abs() < 1e-3 && (0.88 - ci.lo - half).abs() < 1e-3,
        "{ci:?}"
    );
    // ±6% against a precision of 0.5%: the run says it could not give that.
    assert!(
        next.warnings
            .iter()
            .any(|w| w.to_string().contains("1 of 1 comparisons wider")),
        "{:?}",
        next.warnings
    );
    let row = next.results[0]
        .rerun95
        .as_ref()
        .expect("a row's rerun intervals");
    assert!(
        row.cycles_per_op.is_some() && row.ops_per_sec.is_some(),
        "{row:?}"
    );
}

/// A host that ran 20% slower moves every raw cycles/op but not the cost in units of its
/// group's loop: not a regression, and the verdict says so. A strategy that got slower moves
/// both: a regression.
#[test]
fn check_tells_the_host_speed_from_a_change_of_the_code() {
    let with_loop = |started: u64, popf: f64, popf_loops: f64, speed: f64| {
        let mut r = report(started, popf * speed);
        for (row, loops) in r.results.iter_mut().zip([popf_loops, 2.6]) {
            row.cycles_per_loop = rounds(loops, 0.01, 25);
            row.ops_per_sec = rounds(1e5 / speed, 10.0, 25);
            row.baseline_ns = rounds(5_000.0 * speed, 5.0, 25);
        }
        r
    };
    let base = with_loop(10, 14_000.0, 2.8, 1.0);
    let slower_host = with_loop(20, 14_000.0, 2.8, 1.2);
    let o = check(
        &base,
        &slower_host,
        "B",
        1,
        DEFAULT_MAX_REGRESSION_PCT,
        false,
    );
    assert!(o.passed(), "{}", render_check(&o));
    assert!(!o.host_speed.is_empty());
    assert!(
        render_check(&o).contains("moved with the host's speed"),
        "{}",
        render_check(&o)
    );
    let slower_popf = with_loop(30, 16_000.0, 3.2, 1.0);
    let o = check(
        &base,
        &slower_popf,
        "B",
        1,
        DEFAULT_MAX_REGRESSION_PCT,
        false,
    );
    assert!(!o.passed(), "{}", render_check(&o));
    assert!(o.regressions.iter().any(|r| r.name.contains("native-popf")));
}
