//! Report tests on realistic synthetic runs: groups measured in rounds, per-round samples with
//! CIs, paired comparisons and differences. No KVM needed.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::format::{
    compact_timestamp, ellipsize, fmt_cost, fmt_count, fmt_fraction, fmt_interval, fmt_rate,
    fmt_ratio_change, human_timestamp, Ci, Estimate,
};
use super::table::TextTable;
use super::*;
use crate::analysis::compare::{
    compare, compare_by, compare_with, NoiseBasis, DEFAULT_MIN_CHANGE_PCT,
};
use crate::results::{
    ComparedMetric, DisturbanceInfo, ExitSite, HostManifest, LockStats, PairedComparison,
    PairedDifference, PhaseFailure, PhaseResult, ResultKind, RunReport, Summary, SCHEMA,
};

static SCRATCH_SEQ: AtomicU64 = AtomicU64::new(0);

/// A fresh empty folder under the system temp dir, unique per test.
/// The results JSON of `report` at `path`.
fn write_json(report: &RunReport, path: &Path) -> io::Result<()> {
    fs::write(path, to_json(report).expect("encodable"))
}

fn scratch_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "irqbench-report-{}-{test}-{}",
        std::process::id(),
        SCRATCH_SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// `n` per-round samples spread evenly over median ± spread, in a scrambled order (rounds are
/// not sorted), so `Summary::from_samples` computes a real order-statistics CI. The history's
/// tests use it too.
pub(crate) fn rounds(median: f64, spread: f64, n: usize) -> Summary {
    let samples: Vec<f64> = (0..n)
        .map(|i| {
            let k = (i * 7) % n;
            median + spread * (2.0 * k as f64 / (n - 1) as f64 - 1.0)
        })
        .collect();
    Summary::from_samples(&samples)
}

const TSC_GHZ: f64 = 2.45;
const ROUNDS: usize = 25;

/// One row, named like the plan names it: `{bench}/{variant}/n{nest}/{irq}/{vcpus}v`.
fn row(bench: &str, kind: ResultKind, variant: &str, cycles: f64, spread: f64) -> PhaseResult {
    let group = format!("{bench}/n0/none/1v");
    let cycles_per_op = rounds(cycles, spread, ROUNDS);
    let ns: Vec<f64> = cycles_per_op.samples.iter().map(|c| c / TSC_GHZ).collect();
    PhaseResult {
        name: format!("{bench}/{variant}/n0/none/1v"),
        group,
        kind,
        strategy: crate::identity::Subject::from_name(variant).expect(variant),
        irq_source: "none".into(),
        nesting: 0.0,
        vcpus: 1,
        body_ops: 4,
        block_ops: 20_000,
        ops: 20_000 * ROUNDS as u64,
        rounds: ROUNDS as u32,
        disturbed_fraction: 0.02,
        precision_reached: true,
        ns_per_op: Summary::from_samples(&ns),
        baseline_cycles: rounds(11.0, 0.5, ROUNDS),
        raw_cycles_per_op: rounds(cycles + 11.0, spread, ROUNDS),
        ops_per_sec: {
            let ops = (TSC_GHZ * 1e9 / cycles.abs().max(1.0)).round();
            rounds(ops, ops * 0.01, ROUNDS)
        },
        cycles_per_op,
        per_vcpu_ops: vec![20_000 * ROUNDS as u64],
        wall_ms: 812.0,
        ..PhaseResult::default()
    }
}

fn with_exits(mut r: PhaseResult, exits: f64, spread: f64) -> PhaseResult {
    let per_round = rounds(exits, spread, ROUNDS);
    // Every count carries the CI of its per-round samples, scaled like its median.
    for (name, share) in [
        ("exits", 1.0),
        ("io_exits", 0.75),
        ("irq_window_exits", 0.25),
        ("vmm:io-out", 0.75),
        ("vmm:userspace_exits", 0.75),
    ] {
        let e = crate::results::CountEstimate {
            per_op: exits * share,
            ci95: per_round.ci95.expect("a CI").scaled(share),
            rounds: ROUNDS,
            ..Default::default()
        };
        r.counts.insert(name.into(), e);
    }
    r.exit_reasons.push(crate::results::ExitReasonFigure {
        reason: "io-out".into(),
        total: (exits * 0.75 * r.ops as f64).round() as u64,
        ..Default::default()
    });
    r
}

/// A figure with its CI.
pub(crate) fn est(point: f64, lo: f64, hi: f64) -> Estimate {
    let ci = Some(Ci { lo, hi });
    Estimate { point, ci }
}

fn comparison(a: &PhaseResult, b: &PhaseResult, ratio: f64, ci: [f64; 2]) -> PairedComparison {
    PairedComparison {
        a: a.name.clone(),
        b: b.name.clone(),
        group: a.group.clone(),
        metric: ComparedMetric::CyclesPerOp,
        ratio: Some(est(ratio, ci[0], ci[1])),
        rounds: ROUNDS as u32,
        no_ratio: None,
        ..PairedComparison::default()
    }
}

fn strategy_rows() -> Vec<PhaseResult> {
    let s = ResultKind::Strategy;
    let mut popf = with_exits(row("pv", s, "pvop-popf", 12_371.4, 60.0), 2.0, 0.01);
    popf.exit_sites.push(ExitSite {
        strategy: "pvop-popf".into(),
        site: "restore".into(),
        symbol: "irqbench_op_pvop_popf".into(),
        reason: "io-out".into(),
        total: 3_750_000,
        rip: 0x20_1a3c,
        instruction: "popfq".into(),
        sti_rip: None,
    });
    popf.totals.interrupts = 12_345;
    let skip = with_exits(row("pv", s, "pvop-skip", 11_245.2, 50.0), 0.0004, 0.003);
    let mut native = row("pv", s, "native-skip", 0.8, 4.0);
    native.precision_reached = false;
    native.disturbed_fraction = 0.12;
    vec![popf, skip, native]
}

fn insn_rows() -> Vec<PhaseResult> {
    let i = ResultKind::Insn;
    vec![
        row("insn", i, "cli", 7_020.0, 30.0),
        row("insn", i, "popf-set-if", 12_672.0, 40.0),
        row("insn", i, "popf-same-if", 41.3, 0.4),
        row("insn", i, "pushf", 3.1, 0.2),
    ]
}

fn lock_rows() -> (Vec<PhaseResult>, Vec<PairedComparison>) {
    let mut rows = Vec::new();
    let mut comparisons = Vec::new();
    for (vcpus, ratio, ci) in [(1, 1.02, [0.99, 1.05]), (2, 1.17, [1.12, 1.21])] {
        let mut pair = Vec::new();
        for (strategy, cycles) in [("native-popf", 1234.5), ("native-cli-sti", 1100.0)] {
            let mut r = row("epoll", ResultKind::Lock, strategy, cycles, 20.0);
            r.name = format!("epoll/{strategy}/n0/none/{vcpus}v");
            r.group = format!("epoll/n0/none/{vcpus}v");
            r.vcpus = vcpus;
            r.lock = Some(LockStats {
                acquisitions: 10_000_000,
                spins: 2_500_000,
                counter: 10_000_000,
                mutual_exclusion_held: true,
            });
            let spins = crate::results::CountEstimate {
                per_op: 0.25,
                ci95: Ci::from([0.24, 0.26]),
                rounds: ROUNDS,
                ..Default::default()
            };
            r.counts.insert("guest:lock_spins".into(), spins);
            pair.push(r);
        }
        let mut c = comparison(&pair[0], &pair[1], ratio, ci);
        c.metric = ComparedMetric::OpsPerSec;
        comparisons.push(c);
        rows.extend(pair);
    }
    (rows, comparisons)
}

fn host() -> HostManifest {
    HostManifest {
        cpu_model: "AMD EPYC 9B14".into(),
        host_cpus: 2,
        kernel_release: "6.18.0".into(),
        kvm_flavour: "pvm".into(),
        nested: true,
        module_params: BTreeMap::from([("kvm.halt_poll_ns".into(), "0".into())]),
        tsc_khz: 2_450_000,
        kvm_api_version: 12,
        capabilities: BTreeMap::from([("KVM_CAP_BINARY_STATS_FD".into(), 1)]),
        max_vcpus: 1024,
        recommended_vcpus: 2,
        irqchip_modes: vec!["userspace".into()],
        vcpu_pinning: true,
        pinning: crate::results::Pinning {
            pinned: true,
            cpus: vec![0, 1],
            ..Default::default()
        },
        warnings: vec!["host has 2 CPUs: 4-vCPU phases are oversubscribed".into()],
        ..Default::default()
    }
}

fn sample_report() -> RunReport {
    let strategies = strategy_rows();
    let insns = insn_rows();
    let (locks, lock_cmp) = lock_rows();
    let mut comparisons = vec![
        comparison(&strategies[0], &strategies[1], 0.909, [0.900, 0.918]),
        comparison(&strategies[0], &strategies[2], 0.0001, [-0.0003, 0.0004]),
        comparison(&insns[0], &insns[1], 1.0, [0.99, 1.01]),
    ];
    comparisons.extend(lock_cmp);
    let differences = vec![PairedDifference {
        name: "push; popf that sets IF".into(),
        minuend: insns[1].name.clone(),
        subtrahend: insns[0].name.clone(),
        group: insns[0].group.clone(),
        cycles: Some(est(5_652.0, 5_601.0, 5_703.0)),
        ns: Some(est(2_173.8, 2_154.2, 2_193.5)),
        rounds: ROUNDS as u32,
    }];
    let mut odd = row("mix", ResultKind::Mixed, "mixed", 99.0, 2.0);
    odd.name = "odd, name \"quoted\"".into();
    odd.strategy_ops.insert("native-popf".into(), 10);
    let mut results = strategies;
    results.extend(insns);
    results.extend(locks);
    results.push(odd);
    RunReport {
        schema: SCHEMA.into(),
        irqbench_version: "0.2.0".into(),
        config_name: "quick".into(),
        config_source: "<built-in default>".into(),
        adhoc: Default::default(),
        started_unix: 1_774_000_000,
        wall_seconds: 42.5,
        partial: false,
        partial_reason: None,
        host: host(),
        results,
        failures: vec![PhaseFailure {
            name: "pv/sti-hlt/n0/none/1v".into(),
            error: "guest triple fault".into(),
        }],
        comparisons,
        differences,
        disturbance: DisturbanceInfo {
            sources: vec!["vcpu-thread-off-cpu".into(), "block-time-outlier".into()],
            not_used: vec!["steal time: not reported by this host".into()],
        },
        ci_method: crate::results::CI_METHOD.into(),
        replicates: 1,
        replicate_ci_method: String::new(),
        rerun: None,
        description: "Paravirt flag save/restore against native, quick settings.".into(),
        vm_stats_by_group: BTreeMap::from([(
            "strategies/n0/none/1v".into(),
            BTreeMap::from([("mmu_pte_write".into(), 119_000)]),
        )]),
        warnings: vec![crate::results::warning::Warning::about(
            crate::results::warning::WarningKind::TicksShort,
            "lt/native-popf",
            "the guest took 12 of the 100 LAPIC timer interrupts".into(),
        )],
        hypercall_transport: "port".into(),
        hypercall_insn: "vmmcall".into(),
        cycles_source: crate::results::CyclesSource {
            source: "tsc".into(),
            tsc_khz: 2_450_000,
            vpmu: None,
            core_cycles_available: false,
            reason: "CPUID leaf 0xA from KVM_GET_SUPPORTED_CPUID is zero".into(),
        },
        exit_trace: None,
        answers: Vec::new(),
        interaction_method: String::new(),
    }
}

/// The cells of the table line that shows `name`'s row (`strategy` column first).
fn table_row<'a>(table: &'a str, strategy: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{strategy} ")))
        .unwrap_or_else(|| panic!("no row {strategy}:\n{table}"))
}

#[test]
fn table_has_every_group_unit_and_section() {
    let report = sample_report();
    let table = render_table_at(&report, 120);
    for r in &report.results {
        assert!(
            table.contains(r.strategy.name()),
            "{} missing:\n{table}",
            r.strategy
        );
        // Full names appear in the per-stat section.
        assert!(table.contains(&r.name), "{} missing:\n{table}", r.name);
    }
    for unit in [
        "cycles/op",
        "ns/op",
        "exits/op",
        "cycles/insn",
        "ns/insn",
        "rounds",
    ] {
        assert!(table.contains(unit), "{unit} missing:\n{table}");
    }
    assert!(table.contains("pv/n0/none/1v (strategy, 3 rows"), "{table}");
    assert!(table.contains("spins/op") && table.contains("ops/s"));
    assert!(table.contains("io_exits=1.5000 ±0.0031"), "{table}");
    assert!(table.contains("exit sites") && table.contains("popfq"));
    assert!(table.contains("failures (1)") && table.contains("guest triple fault"));
    assert!(table.starts_with("host: AMD EPYC 9B14 (2 CPUs), kernel 6.18.0, KVM pvm (nested)"));
    assert!(table.contains("\nParavirt flag save/restore against native, quick settings.\n"));
    assert!(table.contains("warning: host has 2 CPUs"));
    assert!(table.contains("\nvCPU threads pinned to CPUs 0,1 (vCPU i on the i-th)\n"));
    for line in table.lines() {
        assert!(line.chars().count() <= 120, "too wide: {line}");
    }
}

#[test]
fn userspace_exits_and_vm_stats_print_with_what_bounds_them() {
    let report = sample_report();
    let table = render_table_at(&report, 120);
    // pvop-popf: 1.5 userspace exits per op, with the CI of its per-round values.
    let popf = table_row(&table, "pvop-popf");
    assert!(popf.contains("1.5000 ±0.0031"), "{popf}");
    // A VM-wide counter is a group total, not a per-row rate.
    assert!(!table.contains("vm.mmu_pte_write=0"), "{table}");
    let vm = table
        .lines()
        .find(|l| l.contains("vm.mmu_pte_write"))
        .expect("VM-wide stats line");
    assert!(
        vm.contains("strategies/n0/none/1v: vm.mmu_pte_write=119k"),
        "{vm}"
    );
}

#[test]
fn a_net_whose_ci_spans_zero_prints_approximately_zero() {
    let e = est;
    assert_eq!(fmt_cost(e(0.8, -3.1, 4.2)), "≈0 (±3.9)");
    assert_eq!(fmt_cost(e(-1.5, -3.0, 0.5)), "≈0 (±2.0)");
    assert_eq!(fmt_cost(e(-5.0, -7.0, -3.0)), "<0 (±2.0)");
    assert_eq!(fmt_cost(e(0.0, 0.0, 0.0)), "0");
    let table = render_table_at(&sample_report(), 120);
    let native = table_row(&table, "native-skip");
    assert!(native.contains("≈0 (±"), "{native}");
    // Its exits CI spans zero too.
    let skip = table_row(&table, "pvop-skip");
    assert!(skip.contains("≈0 (±0.0"), "{skip}");
}

#[test]
fn no_cost_is_printed_with_a_minus_sign() {
    let mut report = sample_report();
    // A net that subtracting the baseline pushed below zero in most rounds.
    report.results[2].cycles_per_op = rounds(-2.0, 3.0, ROUNDS);
    report.results[2].ns_per_op = rounds(-0.8, 1.2, ROUNDS);
    let (table, md) = (render_table_at(&report, 120), render_markdown(&report));
    // The results sections: tables, comparisons, derived costs, legend.
    let sections = [
        &table[table.find("\npv/n0").unwrap()..table.find("exits per op by").unwrap()],
        &md[md.find("## Results").unwrap()..md.find("## Exits per op").unwrap()],
    ];
    for text in sections {
        assert!(text.contains("≈0 (±"), "{text}");
        let bytes = text.as_bytes();
        for (i, w) in bytes.windows(2).enumerate() {
            assert!(
                // `1.2e-4` is an exponent, not a sign.
                !(w[0] == b'-' && w[1].is_ascii_digit() && (i == 0 || bytes[i - 1] != b'e')),
                "minus before a number at {i}: {}",
                &text[i.saturating_sub(40)..(i + 20).min(text.len())]
            );
        }
    }
}

#[test]
fn digits_follow_the_ci() {
    let e = est;
    assert_eq!(fmt_cost(e(33_958.0, 33_658.0, 34_258.0)), "33960 ±300");
    assert_eq!(fmt_cost(e(33_958.0, 33_000.0, 35_100.0)), "34000 ±1100");
    assert_eq!(fmt_cost(e(12_371.0, 12_320.0, 12_410.0)), "12371 ±51");
    assert_eq!(fmt_cost(e(21.374, 20.95, 21.80)), "21.37 ±0.43");
    assert_eq!(fmt_cost(e(7.0, 7.0, 7.0)), "7.000");
    assert_eq!(
        fmt_cost(Estimate {
            point: 123.456,
            ci: None
        }),
        "123 ±?"
    );
    assert_eq!(
        fmt_interval(est(5_652.0, 5_601.0, 5_703.0)),
        "5652 [5601, 5703]"
    );
    assert_eq!(
        fmt_interval(est(5_652.0, 5_400.0, 5_904.0)),
        "5650 [5400, 5900]"
    );
    assert_eq!(
        fmt_ratio_change(est(0.909, 0.900, 0.918)),
        "−9.1% [−10.0, −8.2]"
    );
    // A table never shows a median finer than its CI.
    let table = render_table_at(&sample_report(), 120);
    assert!(!table.contains("12371.4"), "{table}");
    assert!(
        table_row(&table, "pvop-popf").contains("12371 ±"),
        "{table}"
    );
}

#[test]
fn comparisons_and_differences_follow_their_group() {
    let table = render_table_at(&sample_report(), 120);
    let line = table
        .lines()
        .find(|l| l.contains("pvop-skip vs pvop-popf"))
        .expect("comparison line");
    assert!(line.contains("cycles/op −9.1% [−10.0, −8.2]"), "{line}");
    assert!(!line.contains("no difference"), "{line}");
    let native = table
        .lines()
        .find(|l| l.contains("native-skip vs pvop-popf"))
        .unwrap();
    assert!(!native.contains("no difference beyond noise"), "{native}");
    let same = table
        .lines()
        .find(|l| l.contains("popf-set-if vs cli"))
        .unwrap();
    assert!(same.contains("no difference beyond noise"), "{same}");
    assert!(table.contains("derived from paired differences per round:"));
    assert!(
        table.contains("push; popf that sets IF = popf-set-if − cli: 5652 [5601, 5703] cycles"),
        "{table}"
    );
    // The comparison follows the group's table, before the next group's heading.
    let cmp = table.find("pvop-skip vs pvop-popf").unwrap();
    let next = table.find("insn/n0/none/1v (insn").unwrap();
    assert!(cmp < next);
}

#[test]
fn insn_rows_say_what_they_measure() {
    let table = render_table_at(&sample_report(), 120);
    assert!(
        table_row(&table, "popf-set-if").contains("cli; push; popf"),
        "{table}"
    );
    assert!(table_row(&table, "popf-same-if").contains("push; popf"));
    assert!(table_row(&table, "pushf").contains("pushf; pop"));
    assert!(table.contains("measures"));
    let csv = render_csv(&sample_report());
    assert!(csv.contains(",popf-set-if,cli; push; popf,"), "{csv}");
}

#[test]
fn imprecise_and_disturbed_rows_are_flagged_with_a_legend() {
    let table = render_table_at(&sample_report(), 120);
    let row = table_row(&table, "native-skip");
    assert!(row.contains(")~"), "{row}");
    assert!(row.contains("12.0%!"), "{row}");
    assert!(table.contains("~ precision not reached"));
    assert!(table.contains(
        "warning: disturbed > 5%: 1 row (pv/native-skip/n0/none/1v; 12.0% of its blocks)"
    ));
    assert!(!table_row(&table, "pvop-popf").contains('~'));
    assert!(table.contains("disturbance sources: vcpu-thread-off-cpu, block-time-outlier"));
    assert!(table.contains("CI: distribution-free 95% CI of the median"));
}

#[test]
fn partial_runs_say_so() {
    let mut report = sample_report();
    report.partial = true;
    report.partial_reason = Some("SIGINT".into());
    assert!(host_header(&report, 100).contains("PARTIAL: SIGINT"));
}

#[test]
fn number_formats() {
    assert_eq!(fmt_rate(0.0), "0");
    assert_eq!(fmt_rate(2.0), "2.000");
    assert_eq!(fmt_rate(0.012_345), "0.01235");
    assert_eq!(fmt_rate(1234.5), "1234");
    assert_eq!(fmt_rate(9.99996), "10.00");
    assert_eq!(fmt_rate(0.000_123_4), "1.234e-4");
    assert_eq!(fmt_count(999), "999");
    assert_eq!(fmt_count(12_345), "12.3k");
    assert_eq!(fmt_count(5_000_000), "5.00M");
    assert_eq!(fmt_fraction(0.5), "0.5");
    assert_eq!(fmt_fraction(0.0), "0");
    assert_eq!(ellipsize("abcdefghij", 7), "abc…hij");
    assert_eq!(vcpu_spread(&[90.0, 110.0]), 0.2);
    assert_eq!(vcpu_spread(&[]), 0.0);
}

#[test]
fn utc_dates() {
    assert_eq!(compact_timestamp(0), "19700101-000000");
    assert_eq!(compact_timestamp(951_782_400), "20000229-000000");
    assert_eq!(compact_timestamp(1_700_000_000), "20231114-221320");
    assert_eq!(human_timestamp(1_700_000_000), "2023-11-14 22:13:20 UTC");
}

#[test]
fn csv_has_ci_columns_quoting_and_no_negative_zero() {
    let mut report = sample_report();
    if let Some(ci) = &mut report.results[0].cycles_per_op.ci95 {
        ci.lo = -0.0;
    }
    report.results[0].nesting = -0.0;
    report.results[1]
        .counts
        .get_mut("exits")
        .expect("a row with exits")
        .per_op = -0.0;
    let text = render_csv(&report);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + report.results.len());
    assert!(lines[0].starts_with("name,kind,group,strategy,measures,irq_source,nesting,vcpus,"));
    for col in [
        "cycles_median",
        "cycles_ci_lo",
        "cycles_ci_hi",
        "cycles_min",
        "rounds",
        "disturbed_fraction",
        "precision_reached",
        "exits_ci_lo",
        "ns_median",
    ] {
        assert!(lines[0].split(',').any(|h| h == col), "{col} missing");
    }
    assert!(lines[0].contains(",stat:exits,") && lines[0].contains("uexit:io-out"));
    assert!(text.contains("\"odd, name \"\"quoted\"\"\",mixed,"));
    let columns = lines[0].split(',').count();
    assert_eq!(lines[1].split(',').count(), columns);
    for line in &lines {
        assert!(!line.split(',').any(|f| f == "-0" || f == "-0.0"), "{line}");
    }
}

/// A row without the `exits` stat has empty exits CI cells, as its empty `exits_per_op`: not
/// `0,0`, which reads as a measured CI.
#[test]
fn csv_leaves_an_absent_exits_ci_empty() {
    let mut report = sample_report();
    report.results[1].counts.remove("exits");
    let text = render_csv(&report);
    let lines: Vec<&str> = text.lines().collect();
    let header: Vec<&str> = lines[0].split(',').collect();
    let at = |name: &str| header.iter().position(|h| *h == name).expect(name);
    let row: Vec<&str> = lines[2].split(',').collect();
    for col in ["exits_per_op", "exits_ci_lo", "exits_ci_hi"] {
        assert_eq!(row[at(col)], "", "{col} in {}", lines[2]);
    }
}

/// Equal JSON values, numbers to the last few bits: serde_json without `float_roundtrip` may
/// misread the last bit of a 17-digit float.
fn assert_json_close(a: &serde_json::Value, b: &serde_json::Value) {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!((x - y).abs() <= 1e-12 * x.abs().max(y.abs()), "{x} != {y}");
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len());
            x.iter().zip(y).for_each(|(x, y)| assert_json_close(x, y));
        }
        (Value::Object(x), Value::Object(y)) => {
            assert_eq!(x.keys().collect::<Vec<_>>(), y.keys().collect::<Vec<_>>());
            x.iter().for_each(|(k, v)| assert_json_close(v, &y[k]));
        }
        _ => assert_eq!(a, b),
    }
}

#[test]
fn json_roundtrips_and_leaves_no_temporary_file() {
    let report = sample_report();
    let dir = scratch_dir("json");
    let path = dir.join("r.json");
    write_json(&report, &path).unwrap();
    let back = read_json(&path).unwrap();
    assert_json_close(
        &serde_json::to_value(&back).unwrap(),
        &serde_json::to_value(&report).unwrap(),
    );
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
    fs::remove_dir_all(dir).unwrap();
}

/// A row or comparison of fewer than 6 rounds has a median and no CI: the JSON writes `null`
/// for it (a point is no interval), the file reads back, the table says the comparison has no
/// CI instead of `[+x, +x]`, and a dashboard export leaves the row out.
#[test]
fn too_few_rounds_give_no_ci_anywhere() {
    let mut report = sample_report();
    let few = Summary::from_samples(&[9650.0, 9640.0, 9660.0]);
    assert!(few.estimate().is_some() && few.ci95.is_none());
    report.results[0].cycles_per_op = few;
    report.results[0].rounds = 3;
    let name = report.results[0].name.clone();
    let c = &mut report.comparisons[0];
    c.rounds = 2;
    c.ratio = crate::analysis::estimators::interval(&[3.3, 3.4]);
    assert!(c.ratio.is_some_and(|r| r.ci.is_none()), "{:?}", c.ratio);

    let json = serde_json::to_value(&report).unwrap();
    assert!(
        json["results"][0]["cycles_per_op"]["ci95"][0].is_null(),
        "{json}"
    );
    assert!(
        json["comparisons"][0]["ratio"]["ci95"][0].is_null(),
        "{json}"
    );
    let dir = scratch_dir("few");
    let path = dir.join("few.json");
    write_json(&report, &path).unwrap();
    let back = read_json(&path).unwrap();
    fs::remove_dir_all(dir).unwrap();
    assert_eq!(back.results[0].cycles_per_op.ci95, None);

    let table = render_table_at(&report, 160);
    assert!(
        table.contains("[no CI]") && table.contains("too few rounds for a CI"),
        "{table}"
    );
    assert!(
        !table.contains("no difference beyond noise (2 rounds)"),
        "{table}"
    );
    let export = render_export(&report, ExportFormat::GithubBenchmark);
    assert!(export.left_out.contains(&name), "{:?}", export.left_out);
    assert!(!export.text.contains(&name), "{}", export.text);
}

#[test]
fn read_json_refuses_devices_other_schemas_and_bad_json_naming_the_file() {
    let started = std::time::Instant::now();
    let err = read_json(Path::new("/dev/zero")).unwrap_err();
    assert!(matches!(err, ReportError::Read(_)), "{err:?}");
    assert!(started.elapsed().as_secs() < 2);

    let dir = scratch_dir("badjson");
    let mut report = sample_report();
    let other = dir.join("v4.json");
    for schema in [
        "irqbench-results/1",
        "irqbench-results/2",
        "irqbench-results/5",
        "irqbench-results/40",
        "irqbench-results/30",
    ] {
        report.schema = schema.into();
        write_json(&report, &other).unwrap();
        let err = read_json(&other).unwrap_err();
        assert!(matches!(err, ReportError::Schema { .. }), "{err:?}");
        assert!(err.to_string().contains("v4.json"), "{err}");
    }
    let bad = dir.join("bad.json");
    fs::write(
        &bad,
        "{\n  \"schema\": \"irqbench-results/2\",\n  oops\n}\n",
    )
    .unwrap();
    let err = read_json(&bad).unwrap_err();
    assert!(err.to_string().contains("bad.json:3:3"), "{err}");
    assert!(std::error::Error::source(&err).is_some());
    let missing = dir.join("missing.json");
    assert!(read_json(&missing)
        .unwrap_err()
        .to_string()
        .contains("missing.json"));
    fs::remove_dir_all(dir).unwrap();
}

/// An `irqbench-results/3` file as the build before schema 4 wrote it (`run` of
/// tests/fixtures/v3-fixture.toml): no load and inject at 5 kHz.
const V3_FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/results-v3.json"
);

/// The /3 file reads through the converter: its rows' legacy views are gone, the inject row's
/// userspace exits have one net figure per op (the /3 file also held the gross 0.11 under
/// `userspace_exits_per_op`), and it compares with itself as any report does.
#[test]
fn a_v3_file_reads_converted_to_schema_4() {
    let old: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(V3_FIXTURE).unwrap()).unwrap();
    assert_eq!(old["schema"], "irqbench-results/3");
    let report = read_json(Path::new(V3_FIXTURE)).unwrap();
    assert_eq!(report.schema, SCHEMA);
    assert_eq!(
        report.results.len(),
        old["results"].as_array().unwrap().len()
    );
    for (r, o) in report
        .results
        .iter()
        .zip(old["results"].as_array().unwrap())
    {
        assert_eq!(r.name, o["name"].as_str().unwrap());
        assert_eq!(
            r.cycles_per_op.median,
            o["cycles_per_op"]["median"].as_f64().unwrap()
        );
        assert_eq!(r.totals.interrupts, o["interrupts"].as_u64().unwrap());
        assert_eq!(
            r.counts["exits"].per_op,
            o["counts"]["exits"]["per_op"].as_f64().unwrap()
        );
        for (e, oe) in r
            .exit_reasons
            .iter()
            .zip(o["exit_reasons"].as_array().unwrap())
        {
            assert_eq!(e.total, oe["count"].as_u64().unwrap());
        }
    }
    let inject = report
        .results
        .iter()
        .find(|r| r.irq_source.starts_with("inject"))
        .expect("an inject row");
    let uexits = &inject.counts["vmm:userspace_exits"];
    let json = serde_json::to_value(inject).unwrap();
    for gone in [
        "userspace_exits_per_op",
        "exits_per_op",
        "stats_ci95",
        "interrupts",
    ] {
        assert!(json.get(gone).is_none(), "{gone}");
    }
    let table = render_table_at(&report, 160);
    let shown = fmt_cost(uexits.estimate());
    assert!(table.contains(&shown), "{shown} not in\n{table}");
    let c = compare(&report, &report);
    assert!(c.rows.iter().all(|r| !r.beyond_noise));
    // Written again, it is a schema 4 file that reads back the same.
    let dir = scratch_dir("v3");
    let path = dir.join("v4.json");
    write_json(&report, &path).unwrap();
    assert_eq!(read_json(&path).unwrap(), report);
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn compare_verdicts_come_from_the_cis() {
    let a = sample_report();
    let mut b = a.clone();
    // Overlapping CIs: 12371 ±~60 against 12400 ±~60.
    b.results[0].cycles_per_op = rounds(12_400.0, 60.0, ROUNDS);
    // Disjoint and 13% slower.
    b.results[1].cycles_per_op = rounds(12_700.0, 50.0, ROUNDS);
    // Disjoint but 1%: below the floor.
    b.results[3].cycles_per_op = rounds(7_090.0, 10.0, ROUNDS);
    let c = compare(&a, &b);
    let cycles = |name: &str| {
        c.rows
            .iter()
            .find(|r| r.name == name && r.metric == "cycles/op")
            .unwrap()
    };
    let overlap = cycles(&a.results[0].name);
    assert!(!overlap.beyond_noise && overlap.basis == NoiseBasis::Ci);
    let slower = cycles(&a.results[1].name);
    assert!(slower.beyond_noise, "{slower:?}");
    assert!((slower.change_pct - (12_700.0 - 11_245.2) / 11_245.2 * 100.0).abs() < 1e-9);
    assert!(!cycles(&a.results[3].name).beyond_noise);
    assert!(compare_with(&a, &b, 0.5)
        .rows
        .iter()
        .any(|r| r.name == a.results[3].name && r.metric == "cycles/op" && r.beyond_noise));
    let text = render_compare_at(&c, false, 200);
    let line = text
        .lines()
        .find(|l| l.starts_with("pv/pvop-skip/"))
        .unwrap();
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>().join(" "),
        "pv/pvop-skip/n0/none/1v cycles/op 11245 ±21 --> 12700 ±21 (+12.9%) beyond noise"
    );
    // Narrow: every line fits, and the panel that continues the table names row and metric.
    // 72: the widest first panel is a row name, `÷ native-popf` and a value.
    let narrow = render_compare_at(&c, false, 72);
    assert!(narrow.lines().all(|l| l.chars().count() <= 72), "{narrow}");
    let continued: Vec<&str> = narrow
        .lines()
        .filter(|l| l.starts_with("pv/pvop-skip/n0/none/1v ") && l.contains(" cycles/op "))
        .collect();
    assert!(continued.len() >= 2, "{narrow}");
    assert!(
        continued.iter().any(|l| l.contains("beyond noise")),
        "{narrow}"
    );
}

/// Exits per op from a baseline of ≈0 (its CI holds 0): the floor is a share of one exit per
/// op, not of a value near zero; from a baseline above zero it stays relative.
#[test]
fn exits_from_about_zero_are_judged_by_a_share_of_one_exit_per_op() {
    let set = |r: &mut RunReport, per_op: f64, ci95: [f64; 2]| {
        let e = r.results[0].counts.get_mut("exits").expect("exits");
        (e.per_op, e.ci95) = (per_op, ci95.into());
    };
    let exits_row = |a: &RunReport, b: &RunReport, floor: f64| {
        compare_with(a, b, floor)
            .rows
            .into_iter()
            .find(|r| r.name == a.results[0].name && r.metric == "exits/op")
            .expect("an exits row")
    };
    let mut a = sample_report();
    set(&mut a, 0.0001, [-0.0008, 0.0009]);
    let mut b = a.clone();
    // A busy CI host, back to back: CIs apart, "+27400%", but 0.027 exits per op.
    set(&mut b, 0.0275, [0.0271, 0.0279]);
    assert!(!exits_row(&a, &b, 50.0).beyond_noise);
    assert!(exits_row(&a, &b, 2.0).beyond_noise);
    // Half an exit per op or more is beyond a 50% floor.
    set(&mut b, 0.6, [0.59, 0.61]);
    let row = exits_row(&a, &b, 50.0);
    assert!(row.beyond_noise && row.change_pct > 50.0, "{row:?}");
    // Above zero the floor is relative: 0.5 → 0.6 is +20%.
    set(&mut a, 0.5, [0.49, 0.51]);
    assert!(!exits_row(&a, &b, 50.0).beyond_noise);
    assert!(exits_row(&a, &b, 10.0).beyond_noise);
}

/// A change is a percentage only between two figures printed as numbers: `≈0` may be any
/// value in its CI, so from, to or between such figures the column says so instead.
#[test]
fn a_change_from_or_to_about_zero_is_never_a_percentage() {
    let set = |r: &mut RunReport, per_op: f64, ci95: [f64; 2]| {
        let e = r.results[0].counts.get_mut("exits").expect("exits");
        (e.per_op, e.ci95) = (per_op, ci95.into());
    };
    let line = |a: &RunReport, b: &RunReport| {
        let c = compare(a, b);
        let text = render_compare_at(&c, false, 200);
        let name = &a.results[0].name;
        text.lines()
            .find(|l| l.starts_with(name.as_str()) && l.contains("exits/op"))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .expect("an exits row")
    };
    let (mut a, mut b) = (sample_report(), sample_report());
    // What a real pair printed: "≈0 (±0.00012) --> 0 (-100.0%)".
    set(&mut a, 0.00003, [-0.0001, 0.00014]);
    set(&mut b, 0.0, [0.0, 0.0]);
    assert!(
        line(&a, &b).ends_with("≈0 (±0.00013) --> 0 (both ≈0) (within noise)"),
        "{}",
        line(&a, &b)
    );
    // "≈0 --> ≈0 (+1194.9%)".
    set(&mut b, 0.00039, [-0.0003, 0.0011]);
    assert!(line(&a, &b).contains("(both ≈0)"), "{}", line(&a, &b));
    // A median of exactly 0 inside a CI that holds it read "(new)".
    set(&mut a, 0.0, [-0.0003, 0.0003]);
    assert!(line(&a, &b).contains("(both ≈0)"), "{}", line(&a, &b));
    set(&mut b, 0.6, [0.59, 0.61]);
    assert!(
        line(&a, &b).contains("(from ≈0) beyond noise"),
        "{}",
        line(&a, &b)
    );
    assert!(
        line(&b, &a).contains("(to ≈0) beyond noise"),
        "{}",
        line(&b, &a)
    );
    set(&mut a, 0.5, [0.49, 0.51]);
    assert!(
        line(&a, &b).contains("(+20.0%) beyond noise"),
        "{}",
        line(&a, &b)
    );
    // Exactly zero on both sides, and the Markdown table, which has no parentheses.
    set(&mut a, 0.0, [0.0, 0.0]);
    set(&mut b, 0.0, [0.0, 0.0]);
    assert!(
        line(&a, &b).contains("0 --> 0 (both 0)"),
        "{}",
        line(&a, &b)
    );
    set(&mut b, 0.00039, [-0.0003, 0.0011]);
    let md = render_compare(&compare(&a, &b), true);
    assert!(
        md.lines()
            .any(|l| l.contains("exits/op") && l.contains("| both ≈0 |")),
        "{md}"
    );
}

/// Two runs whose groups' `empty` loops ran at different speeds: the header names each group
/// whose loop moved beyond noise before any row is read; a group whose loop held still is not
/// named.
#[test]
fn compare_names_the_groups_whose_loop_ran_at_another_speed() {
    let a = sample_report();
    let mut b = a.clone();
    let moved = b.results[0].group.clone();
    for r in b.results.iter_mut().filter(|r| r.group == moved) {
        r.baseline_cycles = rounds(13.2, 0.5, ROUNDS);
    }
    let c = compare(&a, &b);
    assert_eq!(
        c.speed_differs
            .iter()
            .map(|d| d.group.as_str())
            .collect::<Vec<_>>(),
        [moved.as_str()]
    );
    let text = render_compare_at(&c, false, 200);
    assert!(
        text.contains(&format!("host speed differs: {moved}: its `empty` loop"))
            && text.contains("(+20.0%)")
            && text.contains("--normalised compares costs in units of it"),
        "{text}"
    );
    assert!(compare(&a, &a).speed_differs.is_empty());
    // One row's loop alone neither names its group nor, moved back, keeps it unnamed.
    let mut one = a.clone();
    let first = one
        .results
        .iter_mut()
        .find(|r| r.group == moved)
        .expect("a row");
    first.baseline_cycles = rounds(13.2, 0.5, ROUNDS);
    assert!(compare(&a, &one).speed_differs.is_empty());
    let mut all_but_one = b.clone();
    let first = all_but_one
        .results
        .iter_mut()
        .find(|r| r.group == moved)
        .expect("a row");
    first.baseline_cycles = Summary::no_data();
    assert_eq!(compare(&a, &all_but_one).speed_differs.len(), 1);
    // A newline in a group's name does not start a line of its own.
    let (mut x, mut y) = (a.clone(), b.clone());
    for r in x.results.iter_mut().chain(y.results.iter_mut()) {
        r.group = r.group.replace("pv/", "pv\nhost differs: forged/");
    }
    let forged = render_compare_at(&compare(&x, &y), false, 200);
    assert!(
        forged.contains("host speed differs: pv\\nhost differs: forged/")
            && !forged.lines().any(|l| l.starts_with("host differs")),
        "{forged}"
    );
    let normalised = compare_by(&a, &b, DEFAULT_MIN_CHANGE_PCT, true);
    assert!(normalised.rows.iter().all(|r| r.metric != "ops/s"));
    assert!(normalised.rows.iter().any(|r| r.metric == "ops/loop"));
    assert!(render_compare_at(&normalised, false, 200)
        .contains("costs below are in units of each group's loop"));
}

#[test]
fn compare_with_itself_is_all_within_noise() {
    let report = sample_report();
    let c = compare(&report, &report);
    assert!(!c.rows.is_empty());
    assert!(c
        .rows
        .iter()
        .all(|r| !r.beyond_noise && r.change_pct == 0.0));
    assert!(c.only_in_a.is_empty() && c.only_in_b.is_empty() && c.host_differs.is_empty());
    assert!(c.warnings.is_empty());
    let text = render_compare(&c, false);
    assert!(text.contains("(within noise)"));
    // Throughput carries its CI like every other figure.
    let ops = text
        .lines()
        .find(|l| l.contains("pvop-popf") && l.contains("ops/s"))
        .expect("ops/s row");
    assert!(ops.contains('±'), "{ops}");
}

#[test]
fn compare_warns_on_partial_runs_duplicates_and_host_changes() {
    let a = sample_report();
    let mut b = a.clone();
    b.partial = true;
    b.partial_reason = Some("SIGINT".into());
    let mut dup = b.results[0].clone();
    dup.cycles_per_op = rounds(99_999.0, 10.0, ROUNDS);
    b.results.push(dup);
    b.host.kernel_release = "6.19.0".into();
    let c = compare(&a, &b);
    assert_eq!(c.host_differs, ["kernel_release: 6.18.0 --> 6.19.0"]);
    let text = render_compare(&c, false);
    assert!(
        text.contains("warning: the new run is partial (SIGINT)"),
        "{text}"
    );
    assert!(
        text.contains(
            "the new run measured pv/pvop-popf/n0/none/1v more than once: comparing the first"
        ),
        "{text}"
    );
    // The first of the duplicates was compared: unchanged.
    let row = c.rows.iter().find(|r| r.name == a.results[0].name).unwrap();
    assert_eq!(row.change_pct, 0.0);
}

#[test]
fn compare_lists_results_of_only_one_run() {
    let a = sample_report();
    let mut b = a.clone();
    let gone = b.results.remove(1);
    b.results
        .push(row("pv", ResultKind::Strategy, "vif-skip", 5.0, 1.0));
    let c = compare(&a, &b);
    assert_eq!(c.only_in_a, [gone.name]);
    assert_eq!(c.only_in_b, ["pv/vif-skip/n0/none/1v"]);
    let text = render_compare(&c, true);
    assert!(text.contains("only in the new run: `pv/vif-skip/n0/none/1v`"));
    assert!(text.contains("|---"));
}

#[test]
fn scaling_comes_from_paired_ops_per_sec_comparisons() {
    let report = sample_report();
    let rows = scaling_rows(&report);
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].vcpus, rows[1].vcpus), (1, 2));
    assert_eq!(rows[0].group, "epoll/n0/none");
    assert!(!rows[0].beyond_noise && rows[1].beyond_noise);
    let ratio = rows[1].ratio.expect("a ratio");
    assert!((ratio.point - 1.17).abs() < 1e-9);
    let text = render_scaling(&report);
    assert!(
        text.contains("native-popf (A) vs native-cli-sti (B)"),
        "{text}"
    );
    assert!(text.contains("+17.0% [+12.0, +21.0]"), "{text}");
    assert!(text.contains("no difference beyond noise"), "{text}");
}

#[test]
fn svg_shows_every_full_name_the_ci_and_the_unit() {
    let report = sample_report();
    let svg = render_svg(&report).unwrap();
    assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"));
    for r in &report.results {
        let label = r.name.replace('&', "&amp;").replace('"', "&quot;");
        assert!(svg.contains(&label), "{label} missing");
    }
    assert!(!svg.contains('…'));
    assert!(svg.contains("cycles/op (median, whiskers: 95% CI)"));
    assert!(svg.contains("cycles/insn (median, whiskers: 95% CI)"));
    assert!(svg.contains("nesting 0, irq none, 1 vCPU") && svg.contains("2 vCPU"));
    assert!(svg.contains("irqbench quick"));
}

#[test]
fn a_results_folder_whose_parent_is_missing_is_refused_and_nothing_is_created() {
    let base = scratch_dir("noparent");
    let deep = base.join("missing").join("out");
    let err = new_results_dir(&deep, "quick").unwrap_err();
    assert!(
        matches!(err, ReportError::CreateDir { ref path, .. } if path == &deep),
        "{err}"
    );
    assert!(
        !base.join("missing").exists(),
        "a tree of folders was created"
    );
    let file = base.join("a-file");
    fs::write(&file, "x").unwrap();
    let err = new_results_dir(&file, "quick").unwrap_err().to_string();
    assert!(
        err.contains("exists and is a regular file, not a folder") && err.contains("--out needs"),
        "{err}"
    );
    let link = base.join("link-to-file");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let err = new_results_dir(&link, "quick").unwrap_err().to_string();
    assert!(
        err.contains("is a symbolic link to a regular file, not a folder"),
        "{err}"
    );
    let err = new_results_dir(Path::new("/dev/null"), "quick")
        .unwrap_err()
        .to_string();
    assert!(err.contains("is a character device, not a folder"), "{err}");
}

#[test]
fn results_dirs_are_never_reused_and_get_every_file() {
    let base = scratch_dir("dirs");
    let a = new_results_dir(&base, "quick").unwrap();
    let b = new_results_dir(&base, "quick").unwrap();
    let c = OutputDir::create(&base, "quick").unwrap();
    assert_ne!(a, b);
    assert_ne!(Some(b.as_path()), c.json().parent());
    let name = a.file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("quick-20") && name.len() == "quick-YYYYmmdd-HHMMSS".len());
    let odd = new_results_dir(&base, "../x y").unwrap();
    assert_eq!(odd.parent(), Some(base.as_path()));
    let files = c.files(&sample_report());
    for p in [c.json(), c.csv(), c.markdown(), c.svg(), c.table()] {
        let text = files.iter().find(|(f, _)| *f == p).map(|(_, t)| t);
        assert!(
            text.is_some_and(|t| t.as_ref().is_ok_and(|t| !t.is_empty())),
            "{p:?}"
        );
    }
    fs::remove_dir_all(base).unwrap();
}

#[test]
fn markdown_has_group_tables_comparisons_and_legend() {
    let md = render_markdown(&sample_report());
    assert!(md.contains("|---"));
    assert!(md.contains("- **CPU:** AMD EPYC 9B14 (2 CPUs)"));
    assert!(md.contains("### pv/n0/none/1v (strategy, 3 rows"));
    assert!(
        md.contains("| `pv/pvop-popf/n0/none/1v` | pvop-popf |"),
        "{md}"
    );
    assert!(md.contains("- pvop-skip vs pvop-popf  cycles/op −9.1% [−10.0, −8.2]"));
    assert!(md.contains("## Exits per op by KVM stat"));
    assert!(md.contains("## Scaling"));
    assert!(md.contains("≈0 (±"));
}

#[test]
fn run_warnings_are_printed() {
    let report = sample_report();
    for text in [render_table_at(&report, 120), render_markdown(&report)] {
        assert!(
            text.contains("warning: lt/native-popf: the guest took 12 of the 100"),
            "{text}"
        );
    }
}

#[test]
fn lapic_rows_show_delivered_over_expected_ticks_and_others_no_column() {
    let mut report = sample_report();
    assert!(!render_table_at(&report, 120).contains(" ticks"));
    report.results[0].timer_ticks = Some(crate::results::TimerTicks {
        period_us: 200.0,
        expected: 3486.2,
        delivered: 24,
        delivered_fraction: 24.0 / 3486.2,
    });
    let table = render_table_at(&report, 120);
    assert!(table.contains(" ticks"), "{table}");
    let row = table_row(&table, report.results[0].strategy.name());
    assert!(row.contains("24/3486"), "{row}");
    let csv = render_csv(&report);
    assert!(csv
        .lines()
        .next()
        .unwrap_or("")
        .contains("timer_ticks_expected"));
}

#[test]
fn inject_rows_show_delivered_over_expected_interrupts_and_others_no_column() {
    let mut report = sample_report();
    assert!(!table_row(&render_table_at(&report, 120), "strategy").contains("taken"));
    report.results[0].irq_delivery = Some(crate::results::IrqDelivery {
        rate_hz: 5000.0,
        raised_hz: Some(4990.0),
        expected: 1976.4,
        delivered: 743,
        delivered_fraction: Some(743.0 / 1976.4),
    });
    let table = render_table_at(&report, 120);
    assert!(table_row(&table, "strategy").contains("taken"), "{table}");
    let row = table_row(&table, report.results[0].strategy.name());
    assert!(row.contains("743/1976"), "{row}");
    let md = render_markdown(&report);
    assert!(md.contains("743/1976"), "{md}");
    let csv = render_csv(&report);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let at = |key: &str| header.iter().position(|h| *h == key);
    let (d, e) = (
        at("irq_delivered").expect("column"),
        at("irq_expected").expect("column"),
    );
    let first: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    assert_eq!((first[d], first[e]), ("743", "1976.4"), "{csv}");
}

#[test]
fn the_tsc_rate_why_not_core_cycles_and_derived_ns_are_printed() {
    let report = sample_report();
    for text in [render_table_at(&report, 120), render_markdown(&report)] {
        assert!(
            text.contains("cycles are TSC cycles at 2.45 GHz")
                && text.contains("Core cycles: CPUID"),
            "{text}"
        );
        assert!(text.contains("cycles = 2174 [2154, 2194] ns"), "{text}");
    }
}

#[test]
fn validation_problems_are_printed_above_the_table_and_kept_in_the_json() {
    use crate::results::{Check, Scope, Validation, Verdict};
    let mut report = sample_report();
    let check = |id: &str, verdict| Check {
        id: id.into(),
        verdict,
        expected: "ticks within 10%".into(),
        measured: "62%".into(),
        note: "PVM merges ticks".into(),
    };
    report.host.validation = Some(Validation {
        scope: Scope::Quick,
        flavour: crate::results::KvmFlavour::Pvm,
        verdict: Verdict::Warn,
        seconds: 0.05,
        checks: vec![
            check("tsc.rate", Verdict::Pass),
            check("noise.load", Verdict::Warn),
        ],
        guest_boot_failed: None,
        placement: None,
    });
    let table = render_table_at(&report, 120);
    let header = table.split("\n\n").next().unwrap_or_default();
    assert!(
        header.contains(
            "validation WARN noise.load: measured 62%; expected ticks within 10%\n  why: PVM"
        ),
        "{table}"
    );
    assert!(
        !table.contains("tsc.rate"),
        "PASS lines are not printed: {table}"
    );
    assert!(render_markdown(&report).contains("validation WARN noise.load"));
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["host"]["validation"]["checks"][1]["id"], "noise.load");
    assert_eq!(json["host"]["kvm_flavour"], "pvm");
}

/// ESC (clear screen), OSC (window title, ended by BEL), a CR that would overwrite the line and
/// a C1 CSI, as a config description, a row name, a host fact and a guest's failure text: no
/// renderer lets one through, and each shows it escaped.
#[test]
fn text_from_outside_never_reaches_a_terminal_or_an_svg_raw() {
    const HOSTILE: &str = "x\u{1b}[2J\u{1b}]0;owned\u{7}\rforged\u{9b}1m";
    let mut report = sample_report();
    report.description = format!("desc {HOSTILE}");
    report.config_name = format!("cfg{HOSTILE}");
    report.host.cpu_model = format!("cpu{HOSTILE}");
    report.results[0].name = format!("row{HOSTILE}");
    report.failures.push(PhaseFailure {
        name: "quick/x".into(),
        error: format!("guest console: {HOSTILE}"),
    });
    let raw = |s: &str| {
        s.bytes()
            .any(|b| (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f)
            || s.chars().any(|c| ('\u{80}'..='\u{9f}').contains(&c))
    };
    let outputs = [
        ("table", render_table(&report)),
        ("markdown", render_markdown(&report)),
        ("svg", render_svg(&report).expect("svg")),
    ];
    for (what, text) in &outputs {
        assert!(!raw(text), "{what} lets a control character through");
    }
    // CSV goes through its own serializer only: the file keeps the name exactly (quoted, as
    // it holds a CR); stdout shows it through the terminal escaper, which keeps the CSV's shape.
    let csv = render_csv(&report);
    assert!(csv.contains(&format!("\"row{HOSTILE}\"")), "{csv}");
    let shown = crate::text::escape(&csv).replace("\r\n", "\n");
    assert!(!raw(&shown), "{shown}");
    assert!(outputs[0]
        .1
        .contains("desc x\\u{1b}[2J\\u{1b}]0;owned\\u{7}\\u{d}forged"));
    assert!(
        outputs[2].1.contains("rowx\\u{1b}[2J"),
        "the SVG shows the name escaped"
    );
}

/// `compare` and `import` read figures no run can produce as an error naming the field, not as
/// numbers to print: an inverted CI, a median outside its CI, a negative rate, 300 digits.
#[test]
fn impossible_figures_in_a_results_file_are_refused_by_field() {
    let dir = scratch_dir("implausible");
    type Damage = fn(&mut RunReport);
    let cases: [(&str, Damage); 7] = [
        ("CI is inverted", |r| {
            r.results[0].cycles_per_op.ci95 = Some(Ci::from([15000.0, 14000.0]))
        }),
        // What `compare --normalised` reads: it had printed `-5.0 ±7.0 (-282.5%)`.
        (
            "cycles_per_loop = -5 [1, 2]: the median lies outside its own CI",
            |r| {
                let s = &mut r.results[0].cycles_per_loop;
                (s.median, s.ci95) = (-5.0, Some(Ci::from([1.0, 2.0])));
            },
        ),
        ("counts.exits", |r| {
            let e = r.results[0].counts.get_mut("exits").expect("exits");
            (e.per_op, e.ci95) = (-0.5, Ci::from([0.1, 0.2]));
        }),
        ("outside its own CI", |r| {
            r.results[0].cycles_per_op.median = 1e6
        }),
        ("below zero", |r| r.results[0].ops_per_sec.median = -5.0),
        ("beyond any measurement", |r| {
            let s = &mut r.results[1].cycles_per_op;
            s.median = 1e300;
            s.ci95 = Some(Ci::from([1e300, 1e300]));
        }),
        ("inverted", |r| {
            r.comparisons[0].ratio = Some(est(1.0, 1.2, 0.8));
        }),
    ];
    for (i, (why, damage)) in cases.into_iter().enumerate() {
        let mut report = sample_report();
        damage(&mut report);
        let path = dir.join(format!("bad{i}.json"));
        fs::write(&path, to_json(&report).unwrap()).unwrap();
        let err = read_json(&path).unwrap_err().to_string();
        assert!(err.contains(why) && err.contains("bad"), "{why}: {err}");
        assert!(
            err.len() < 400,
            "{why}: the figures are shown compactly: {err}"
        );
    }
    let good = dir.join("good.json");
    fs::write(&good, to_json(&sample_report()).unwrap()).unwrap();
    read_json(&good).expect("a report as written reads back");
}

/// At any width from 40 up, no line is wider than the width, and every table row still shows
/// its row's name and its cells (a table too wide continues below, it is not cut).
#[test]
fn the_report_fits_narrow_terminals_without_cutting_rows() {
    let report = sample_report();
    for width in [40, 60, 80, 100] {
        let table = render_table_at(&report, width);
        let widest = table.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        assert!(widest <= width, "{width}: a line of {widest}:\n{table}");
        for r in &report.results {
            let row = table_row(&table, &ellipsize(r.strategy.name(), 14));
            assert!(row.chars().count() <= width, "{row}");
        }
    }
    let wide = render_table_at(&report, 200);
    assert!(
        wide.lines().any(|l| l.chars().count() > 100),
        "200 columns are used"
    );
}

#[test]
fn a_table_wider_than_the_width_continues_in_panels_that_repeat_the_first_column() {
    use super::columns::Align::{Left, Right};
    let mut t = TextTable::new(&[
        ("name", Left),
        ("first", Right),
        ("second", Right),
        ("third", Left),
    ]);
    t.rows.push(vec![
        "alpha".into(),
        "1".repeat(12),
        "2".repeat(12),
        "three".repeat(3),
    ]);
    let one = t.render("  ", 80);
    assert_eq!(one.lines().count(), 3, "{one}");
    let panels = t.render("  ", 30);
    assert!(panels.lines().all(|l| l.chars().count() <= 30), "{panels}");
    let rows: Vec<&str> = panels.lines().filter(|l| l.contains("alpha")).collect();
    assert!(rows.len() >= 2, "{panels}");
    for cell in ["1".repeat(12), "2".repeat(12), "three".repeat(3)] {
        assert!(rows.iter().any(|r| r.contains(&cell)), "{cell}:\n{panels}");
    }
}

/// `check` judges replicated runs by their combined CIs (`cycles_per_op.ci95` holds them): a
/// 6% move between runs that the VMs of each run also showed among themselves is noise, where
/// the pooled within-only CIs, apart, would have called it a regression; runs on different
/// numbers of VMs say so.
#[test]
fn replicated_runs_are_judged_by_their_combined_cis() {
    let spread = |estimates: Vec<f64>, within: Option<Ci>| crate::results::ReplicateSpread {
        estimates,
        between_share: 0.9,
        within_ci95: within,
    };
    let mut a = sample_report();
    a.replicates = 3;
    let mut b = a.clone();
    let name = a.results[0].name.clone();
    for (r, level) in [(&mut a, 10_000.0), (&mut b, 10_600.0)] {
        let row = &mut r.results[0];
        row.cycles_per_op = rounds(level, 10.0, 60);
        let within = row.cycles_per_op.ci95;
        // Three VMs 5% apart: the combined CI (t over them) is about ±7%.
        row.cycles_per_op.ci95 = Some(Ci::from([level * 0.93, level * 1.07]));
        row.replicates = Some(spread(vec![level * 0.975, level, level * 1.025], within));
    }
    let judged = |a: &RunReport, b: &RunReport| {
        compare(a, b)
            .rows
            .into_iter()
            .find(|r| r.name == name && r.metric == "cycles/op")
            .expect("a cycles row")
    };
    let row = judged(&a, &b);
    assert!(!row.beyond_noise && row.basis == NoiseBasis::Ci, "{row:?}");
    // The same runs with only the within-only CIs: a regression by the old rule.
    let (mut a1, mut b1) = (a.clone(), b.clone());
    for r in [&mut a1, &mut b1] {
        let within = r.results[0].replicates.take().expect("spread").within_ci95;
        r.results[0].cycles_per_op.ci95 = within;
        r.replicates = 1;
    }
    assert!(judged(&a1, &b1).beyond_noise);
    let mixed = compare(&a1, &b);
    assert!(
        mixed
            .warnings
            .iter()
            .any(|w| w.contains("on 1 VM(s), the new on 3")),
        "{:?}",
        mixed.warnings
    );
    assert!(!compare(&a, &b).warnings.iter().any(|w| w.contains("VM(s)")));
}
