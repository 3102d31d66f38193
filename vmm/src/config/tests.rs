use std::path::Path;

use super::schema;
use super::schema::fmt_int;
use super::spans::{key_norm, Source};
use super::values::closest;
use super::*;
use crate::config::plan::{defaults, HypercallTransport, InsnId, IrqSource, StrategyId, Workload};
use crate::files::read;
use crate::results::redact::Redaction;
use irqbench_abi as abi;

const CONFIG_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs");
const FILE: &str = "configs/x.toml";
/// A valid prefix: the bench's own keys start on line 4.
const H: &str = "name = \"x\"\n[[bench]]\nname = \"b\"\n";

fn limits() -> Limits {
    Limits { max_vcpus: 8 }
}

fn ok(text: &str) -> Plan {
    load_str(text, FILE, &limits()).unwrap_or_else(|e| panic!("{e}"))
}

/// Asserts the error names the file at `line:col`, the key, and every word of `words`.
#[track_caller]
fn bad(text: &str, line_col: &str, key: &str, words: &[&str]) -> String {
    let msg = match load_str(text, FILE, &limits()) {
        Ok(plan) => panic!("accepted {text:?}: {} phases", plan.phases.len()),
        Err(e) => e.to_string(),
    };
    let at = format!("{FILE}:{line_col}: ");
    assert!(msg.starts_with(&at), "expected {at:?} in {msg:?}");
    assert!(msg.contains(key), "expected key {key:?} in {msg:?}");
    for w in words {
        assert!(msg.contains(w), "expected {w:?} in {msg:?}");
    }
    assert!(!msg.contains('\n'), "one line: {msg:?}");
    msg
}

fn bench(lines: &str) -> String {
    format!("{H}{lines}\n")
}

// ---- bad configs ------------------------------------------------------------------------

#[test]
fn unknown_strategy_suggests_closest() {
    bad(
        &bench(r#"strategies = ["native-popf", "empty", "native-pop"]"#),
        "4:39",
        "`bench[0].strategies[2]`",
        &[
            "unknown strategy \"native-pop\"",
            "valid: empty, native-popf",
            "did you mean native-popf?",
        ],
    );
}

#[test]
fn unknown_strategy_far_from_all_gets_no_suggestion() {
    let msg = bad(
        &bench(r#"strategies = ["frobnicate"]"#),
        "4:15",
        "`bench[0].strategies[0]`",
        &["unknown strategy"],
    );
    assert!(!msg.contains("did you mean"), "{msg}");
}

#[test]
fn zero_block_ops() {
    bad(
        &bench("block_ops = 0"),
        "4:13",
        "`bench[0].block_ops`",
        &["0 is outside 1..=1_000_000_000"],
    );
}

#[test]
fn huge_block_ops() {
    bad(
        &bench("block_ops = 2_000_000_000"),
        "4:13",
        "`bench[0].block_ops`",
        &["2_000_000_000 is outside 1..=1_000_000_000"],
    );
}

/// A block too long for the budget is refused before boot (issue 20 rule: a round longer than
/// `max_seconds`), not by the calibration after it.
#[test]
fn a_block_longer_than_half_the_budget_is_refused() {
    let text = "name = \"x\"\n[run]\nmax_seconds = 0.1\nblock_us = 100000\n\n[[bench]]\n\
                name = \"b\"\n";
    bad(
        text,
        "4:12",
        "`run.block_us`",
        &[
            "longer than run.max_seconds = 0.1",
            "valid with this budget: 20..=50_000",
        ],
    );
}

/// A 10 000-character name is refused by its start and length, not echoed whole.
#[test]
fn a_huge_name_is_not_echoed_whole() {
    let text = format!(
        "name = \"{}\"\n[[bench]]\nname = \"b\"\n",
        "a".repeat(10_000)
    );
    let msg = bad(
        &text,
        "1:8",
        "`name`",
        &["(10000 characters) is longer than 64"],
    );
    assert!(msg.len() < 400, "{} bytes", msg.len());
}

/// A number far outside its range is shown as written (issue 20, rerun: `period_us = 1e-300`
/// printed 300 digits).
#[test]
fn a_tiny_or_huge_number_is_shown_short() {
    for (value, shown) in [
        ("-1e-300", "-1e-300 is outside"),
        ("1e300", "1e300 is outside"),
    ] {
        let msg = bad(
            &bench(&format!("nesting = [{value}]")),
            "4:12",
            "`bench[0].nesting[0]`",
            &[shown],
        );
        assert!(msg.len() < 300, "{msg}");
    }
}

#[test]
fn nesting_outside_unit_interval() {
    bad(
        &bench("nesting = [0.0, 1.5]"),
        "4:17",
        "`bench[0].nesting[1]`",
        &["1.5 is outside 0.0..=1.0", "interrupts already off"],
    );
    bad(
        &bench("nesting = [-0.5]"),
        "4:12",
        "`bench[0].nesting[0]`",
        &["-0.5 is outside 0.0..=1.0"],
    );
    bad(
        &bench("nesting = [nan]"),
        "4:12",
        "`bench[0].nesting[0]`",
        &["NaN is outside"],
    );
}

#[test]
fn vcpus_beyond_host_limit() {
    bad(
        &bench("vcpus = [1, 16]"),
        "4:13",
        "`bench[0].vcpus[1]`",
        &["16 vCPUs", "this host's KVM limit of 8", "1..=8"],
    );
    bad(
        &format!("{H}[run]\nvcpus = 9\n"),
        "5:9",
        "`run.vcpus`",
        &["host's KVM limit of 8"],
    );
}

#[test]
fn vcpus_beyond_what_irqbench_supports() {
    let text = bench("vcpus = [65]");
    let msg = load_str(&text, FILE, &Limits { max_vcpus: 1024 })
        .unwrap_err()
        .to_string();
    assert!(
        msg.starts_with("configs/x.toml:4:10: key `bench[0].vcpus[0]`: 65 is outside 1..=64"),
        "{msg}"
    );
    bad(
        &bench("vcpus = [0]"),
        "4:10",
        "`bench[0].vcpus[0]`",
        &["0 is outside 1..=8"],
    );
}

#[test]
fn memory_too_small() {
    bad(
        &format!("{H}[run]\nmemory_mib = 8\n"),
        "5:14",
        "`run.memory_mib`",
        &["8 is outside 16..=1024", "at least 16"],
    );
}

#[test]
fn memory_too_large() {
    bad(
        &format!("{H}[run]\nmemory_mib = 4096\n"),
        "5:14",
        "`run.memory_mib`",
        &["4096 is outside 16..=1024"],
    );
}

#[test]
fn unknown_irq_source_lists_valid_ones() {
    bad(
        &bench(r#"irq = [{ source = "none" }, { source = "injekt", rate_hz = 5 }]"#),
        "4:40",
        "`bench[0].irq[1].source`",
        &[
            "unknown irq source \"injekt\"",
            "valid: none, lapic-timer, inject, pv-event, msi, ipi",
            "did you mean inject?",
        ],
    );
}

#[test]
fn rate_zero() {
    bad(
        &bench(r#"irq = [{ source = "inject", rate_hz = 0 }]"#),
        "4:39",
        "`bench[0].irq[0].rate_hz`",
        &["0 is outside >0..=1_000_000", "events per second"],
    );
    bad(
        &bench(r#"irq = [{ source = "pv-event", rate_hz = 2e6 }]"#),
        "4:41",
        "`bench[0].irq[0].rate_hz`",
        &["2000000 is outside"],
    );
}

#[test]
fn msi_takes_a_rate_like_inject() {
    bad(
        &bench(r#"irq = [{ source = "msi", rate_hz = 0 }]"#),
        "4:36",
        "`bench[0].irq[0].rate_hz`",
        &["0 is outside >0..=1_000_000", "events per second"],
    );
    bad(
        &bench(r#"irq = [{ source = "msi" }]"#),
        "4:8",
        "`bench[0].irq[0].rate_hz`",
        &["missing", "source \"msi\" needs `rate_hz`"],
    );
    bad(
        &bench(r#"irq = [{ source = "msi", period_us = 100 }]"#),
        "4:38",
        "`bench[0].irq[0].period_us`",
        &["does not apply to source \"msi\"", "takes `rate_hz`"],
    );
    let plan = load_str(
        &bench(r#"irq = [{ source = "msi", rate_hz = 2000 }]"#),
        FILE,
        &limits(),
    )
    .expect("msi config");
    assert_eq!(plan.phases[0].irq, IrqSource::Msi { rate_hz: 2000.0 });
    assert!(
        plan.phases[0].name.ends_with("/msi@2000Hz/1v"),
        "{}",
        plan.phases[0].name
    );
}

#[test]
fn ipi_takes_a_rate_like_msi() {
    bad(
        &bench(r#"irq = [{ source = "ipi", rate_hz = 0 }]"#),
        "4:36",
        "`bench[0].irq[0].rate_hz`",
        &["0 is outside >0..=1_000_000", "events per second"],
    );
    bad(
        &bench(r#"irq = [{ source = "ipi" }]"#),
        "4:8",
        "`bench[0].irq[0].rate_hz`",
        &["missing", "source \"ipi\" needs `rate_hz`"],
    );
    bad(
        &bench(r#"irq = [{ source = "ipi", period_us = 100 }]"#),
        "4:38",
        "`bench[0].irq[0].period_us`",
        &["does not apply to source \"ipi\"", "takes `rate_hz`"],
    );
    // ipi needs the in-kernel irqchip, where KVM handles HLT itself.
    bad(
        &bench("kind = \"insn\"\nirq = [{ source = \"ipi\", rate_hz = 1000 }]"),
        "5:8",
        "`bench[0].irq[0]`",
        &[
            "source = \"ipi\" with the default insns",
            "ipi needs the in-kernel irqchip",
        ],
    );
    let plan = load_str(
        &bench(r#"irq = [{ source = "ipi", rate_hz = 2000 }]"#),
        FILE,
        &limits(),
    )
    .expect("ipi config");
    assert_eq!(plan.phases[0].irq, IrqSource::Ipi { rate_hz: 2000.0 });
    assert!(plan.phases[0].irq.needs_ipi_sender());
    // Its sender is one more vCPU: the host's limit (8 here) leaves ipi at most 7.
    bad(
        &bench("vcpus = [1, 8]\nirq = [{ source = \"ipi\", rate_hz = 1000 }]"),
        "5:8",
        "`bench[0].irq[0]`",
        &[
            "extra sender vCPU beside the row's 8",
            "9 is beyond the limit of 8",
            "at most 7",
        ],
    );
    load_str(
        &bench("vcpus = [7]\nirq = [{ source = \"ipi\", rate_hz = 1000 }]"),
        FILE,
        &limits(),
    )
    .expect("7 vCPUs and the sender fit 8");
    assert!(
        plan.phases[0].name.ends_with("/ipi@2000Hz/1v"),
        "{}",
        plan.phases[0].name
    );
}

#[test]
fn rate_missing() {
    bad(
        &bench(r#"irq = [{ source = "inject" }]"#),
        "4:8",
        "`bench[0].irq[0].rate_hz`",
        &["missing", "source \"inject\" needs `rate_hz`"],
    );
}

#[test]
fn lapic_period_zero() {
    bad(
        &bench(r#"irq = [{ source = "lapic-timer", period_us = 0 }]"#),
        "4:46",
        "`bench[0].irq[0].period_us`",
        &["0 is outside 1..=1_000_000", "microseconds"],
    );
}

#[test]
fn parameter_of_another_source() {
    bad(
        &bench(r#"irq = [{ source = "inject", period_us = 10 }]"#),
        "4:41",
        "`bench[0].irq[0].period_us`",
        &["does not apply to source \"inject\"", "takes `rate_hz`"],
    );
    bad(
        &bench(r#"irq = [{ source = "none", rate_hz = 10 }]"#),
        "4:37",
        "`bench[0].irq[0].rate_hz`",
        &["does not apply to source \"none\""],
    );
}

#[test]
fn duplicate_bench_names() {
    bad(
        &format!("{H}[[bench]]\nname = \"b\"\n"),
        "5:8",
        "`bench[1].name`",
        &["duplicate bench name \"b\"", "bench[0]", "unique"],
    );
}

#[test]
fn duplicate_list_values_would_duplicate_phase_names() {
    bad(
        &bench(r#"strategies = ["pvop-skip", "pvop-skip"]"#),
        "4:28",
        "`bench[0].strategies[1]`",
        &[
            "duplicate value \"pvop-skip\"",
            "bench[0].strategies[0]",
            "same row names",
        ],
    );
    bad(
        &bench("nesting = [0.5, 0.5]"),
        "4:17",
        "`bench[0].nesting[1]`",
        &["duplicate value 0.5"],
    );
    bad(
        &bench("vcpus = [2, 2]"),
        "4:13",
        "`bench[0].vcpus[1]`",
        &["duplicate value 2"],
    );
    bad(
        &bench(
            r#"irq = [{ source = "inject", rate_hz = 1e3 }, { source = "inject", rate_hz = 1000 }]"#,
        ),
        "4:46",
        "`bench[0].irq[1]`",
        &["duplicate value inject@1000Hz"],
    );
}

#[test]
fn wrong_type_string_where_number() {
    bad(
        &format!("{H}[run]\nmemory_mib = \"big\"\n"),
        "5:14",
        "`run.memory_mib`",
        &[
            "wrong type: found string \"big\"",
            "expected an integer 16..=1024",
        ],
    );
    bad(
        &bench("body_ops = 1.5"),
        "4:12",
        "`bench[0].body_ops`",
        &["wrong type: found floating point `1.5`", "0..=4096"],
    );
    bad(
        &bench(r#"nesting = [0.0, "half"]"#),
        "4:17",
        "`bench[0].nesting[1]`",
        &["wrong type: found string \"half\"", "0.0..=1.0"],
    );
}

#[test]
fn wrong_type_scalar_where_list() {
    bad(
        &bench("nesting = 0.5"),
        "4:11",
        "`bench[0].nesting`",
        &["wrong type", "expected a non-empty list"],
    );
    bad(
        &format!("{H}[run]\npin = 1\n"),
        "5:7",
        "`run.pin`",
        &["wrong type: found integer `1`", "true or false"],
    );
}

#[test]
fn wrong_type_tables() {
    bad(
        "name = \"x\"\n[bench]\nname = \"b\"\n",
        "2:1",
        "key `bench`",
        &["wrong type: found map", "[[bench]]"],
    );
    bad(
        "name = \"x\"\nrun = 3\n[[bench]]\nname = \"b\"\n",
        "2:7",
        "key `run`",
        &["wrong type", "a [run] table"],
    );
    bad(
        &bench("[bench.irq]\nsource = \"none\""),
        "4:1",
        "`bench[0].irq`",
        &["wrong type: found map", "list"],
    );
    bad(
        &bench("irq = [{ source = 3 }]"),
        "4:19",
        "`bench[0].irq[0].source`",
        &["wrong type", "\"lapic-timer\""],
    );
    bad(
        &bench("irq = [{ rate_hz = 3 }]"),
        "4:8",
        "`bench[0].irq[0].source`",
        &["missing", "\"pv-event\""],
    );
    bad(
        &bench("seed = 99999999999999999999"),
        "4:8",
        "`bench[0].seed`",
        &["does not fit in 64 bits"],
    );
}

/// Between i64::MAX and u64::MAX toml reads an integer as u64: the error still names the key
/// and its valid range, not serde's "expected i64".
#[test]
fn integers_above_i64_max_name_the_key_and_range() {
    for (key, col, range) in [
        ("body_ops", "12", "0..=4096"),
        ("block_ops", "13", "1..=1_000_000_000"),
        ("seed", "8", "0..=9_223_372_036_854_775_807"),
    ] {
        let msg = bad(
            &bench(&format!("{key} = 9223372036854775808")),
            &format!("4:{col}"),
            &format!("`bench[0].{key}`"),
            &[
                "9223372036854775808 is beyond the largest 64-bit integer",
                range,
            ],
        );
        assert!(!msg.contains("expected i64"), "{msg}");
    }
    bad(
        "name = \"x\"\n[run]\nmin_rounds = 18446744073709551615\n[[bench]]\nname = \"b\"\n",
        "3:14",
        "`run.min_rounds`",
        &["beyond the largest 64-bit integer", "3..=100_000"],
    );
}

#[test]
fn dotted_keys_are_located() {
    bad(
        "name = \"x\"\nrun.memory_mib = 8\n[[bench]]\nname = \"b\"\n",
        "2:18",
        "`run.memory_mib`",
        &["8 is outside 16..=1024"],
    );
}

#[test]
fn unknown_top_level_key() {
    bad(
        &format!("repeats = 3\n{H}"),
        "1:1",
        "unknown key `repeats` in the top level",
        &["valid keys: name, description, run, report, bench"],
    );
}

/// A quoted key may hold any character: shown escaped, on the error's one line (`bad` checks
/// there is no newline), never sent to the terminal.
#[test]
fn an_unknown_quoted_key_with_a_newline_is_shown_escaped() {
    let msg = bad(
        &format!("\"\\u001b[31mRED\\nFAKE\" = 1\n{H}"),
        "1:1",
        "unknown key `\\u{1b}[31mRED\\nFAKE` in the top level",
        &["valid keys"],
    );
    assert!(!msg.contains('\u{1b}'), "{msg:?}");
}

#[test]
fn unknown_run_key() {
    bad(
        &format!("{H}[run]\nprecison = 3\n"),
        "5:1",
        "unknown key `precison` in [run]",
        &[
            "valid keys: memory_mib, precision, max_seconds, min_rounds, block_us, replicates,",
            "did you mean `precision`?",
        ],
    );
}

#[test]
fn unknown_run_key_far_from_all() {
    let msg = bad(
        &format!("{H}[run]\nbogus = 3\n"),
        "5:1",
        "unknown key `bogus` in [run]",
        &["valid keys"],
    );
    assert!(!msg.contains("did you mean"), "{msg}");
}

#[test]
fn unknown_bench_key() {
    bad(
        &bench("nestin = [0.5]"),
        "4:1",
        "unknown key `nestin` in `bench[0]`",
        &[
            "valid keys: name, kind, strategies, insns, weights, nesting,",
            "did you mean `nesting`?",
        ],
    );
}

#[test]
fn unknown_irq_key() {
    bad(
        &bench(r#"irq = [{ source = "inject", rate = 5 }]"#),
        "4:29",
        "unknown key `rate` in `bench[0].irq[0]`",
        &[
            "valid keys: source, period_us, rate_hz",
            "did you mean `rate_hz`?",
        ],
    );
}

#[test]
fn empty_lists() {
    bad(
        &bench("strategies = []"),
        "4:14",
        "`bench[0].strategies`",
        &["empty list", "native-popf"],
    );
    bad(
        &bench("nesting = []"),
        "4:11",
        "`bench[0].nesting`",
        &["empty list"],
    );
    bad(
        &bench("vcpus = []"),
        "4:9",
        "`bench[0].vcpus`",
        &["empty list"],
    );
    bad(&bench("irq = []"), "4:7", "`bench[0].irq`", &["empty list"]);
    bad(
        &bench("kind = \"mixed\"\nweights = {}"),
        "5:11",
        "`bench[0].weights`",
        &["empty table"],
    );
}

#[test]
fn weights_on_non_mixed() {
    bad(
        &bench("weights = { native-popf = 3 }"),
        "4:11",
        "`bench[0].weights`",
        &["applies to kind \"mixed\" only, not \"strategy\""],
    );
}

#[test]
fn keys_of_another_kind() {
    bad(
        &bench("kind = \"lock\"\ninsns = [\"cli\"]"),
        "5:9",
        "`bench[0].insns`",
        &["applies to kind \"insn\" only, not \"lock\""],
    );
    bad(
        &bench("kind = \"insn\"\nstrategies = [\"native-popf\"]"),
        "5:14",
        "`bench[0].strategies`",
        &["not \"insn\"", "`insns`"],
    );
    bad(
        &bench("kind = \"mixed\"\nstrategies = [\"native-popf\"]"),
        "5:14",
        "`bench[0].strategies`",
        &["`weights`"],
    );
}

#[test]
fn bad_weights() {
    bad(
        &bench("kind = \"mixed\"\nweights = { native-popf = 0 }"),
        "5:27",
        "`bench[0].weights.native-popf`",
        &["0 is outside 1..=65_535"],
    );
    bad(
        &bench("kind = \"mixed\"\nweights = { native-pop = 2 }"),
        "5:13",
        "`bench[0].weights.native-pop`",
        &["unknown strategy", "did you mean native-popf?"],
    );
}

#[test]
fn negative_body_ops() {
    bad(
        &bench("body_ops = -1"),
        "4:12",
        "`bench[0].body_ops`",
        &["-1 is outside 0..=4096"],
    );
}

#[test]
fn negative_seed() {
    bad(
        &bench("seed = -1"),
        "4:8",
        "`bench[0].seed`",
        &["-1 is outside 0..="],
    );
}

#[test]
fn missing_name() {
    bad(
        "[[bench]]\nname = \"b\"\n",
        "1:1",
        "key `name`",
        &["missing", "a-z, 0-9"],
    );
    bad(
        &format!("{H}[[bench]]\nnesting = [0.5]\n"),
        "4:1",
        "key `bench[1].name`",
        &["missing"],
    );
}

#[test]
fn invalid_hypercall() {
    bad(
        &format!("{H}[run]\nhypercall = \"vmcal\"\n"),
        "5:13",
        "`run.hypercall`",
        &[
            "unknown hypercall transport \"vmcal\"",
            "valid: port, vmcall, vapic-poll",
            "did you mean vmcall?",
        ],
    );
}

#[test]
fn hlt_exit_under_a_lapic_timer_is_refused() {
    // Named in insns: the error points at it and names the irq entry.
    bad(
        &bench(
            "kind = \"insn\"\ninsns = [\"cli\", \"hlt-exit\"]\n\
             irq = [{ source = \"none\" }, { source = \"lapic-timer\", period_us = 500 }]",
        ),
        "5:17",
        "`bench[0].insns[1]`",
        &[
            "\"hlt-exit\" with bench[0].irq[1] source = \"lapic-timer\"",
            "wait for the next interrupt",
            "kvm_emulate_halt",
        ],
    );
    // The default insns include it: the error points at the lapic-timer entry.
    bad(
        &bench("kind = \"insn\"\nirq = [{ source = \"lapic-timer\", period_us = 500 }]"),
        "5:8",
        "`bench[0].irq[0]`",
        &["default insns", "\"hlt-exit\"", "list the insns without"],
    );
    // msi needs the in-kernel irqchip too.
    bad(
        &bench("kind = \"insn\"\nirq = [{ source = \"msi\", rate_hz = 1000 }]"),
        "5:8",
        "`bench[0].irq[0]`",
        &[
            "source = \"msi\" with the default insns",
            "msi needs the in-kernel irqchip",
        ],
    );
    // hlt-exit alone, or lapic-timer without it, are fine.
    let ok = |text: &str| {
        load_str(text, FILE, &limits()).unwrap_or_else(|e| panic!("{text}: {e}"));
    };
    ok(&bench(
        "kind = \"insn\"\ninsns = [\"hlt-exit\"]\nirq = [{ source = \"inject\", rate_hz = 100 }]",
    ));
    ok(&bench(
        "kind = \"insn\"\ninsns = [\"cli\"]\nirq = [{ source = \"lapic-timer\", period_us = 500 }]",
    ));
}

#[test]
fn unknown_kind() {
    bad(
        &bench("kind = \"locks\""),
        "4:8",
        "`bench[0].kind`",
        &[
            "unknown bench kind",
            "strategy, insn, lock, mixed",
            "did you mean lock?",
        ],
    );
}

#[test]
fn invalid_name_characters() {
    bad(
        "name = \"Bad Name\"\n[[bench]]\nname = \"b\"\n",
        "1:8",
        "key `name`",
        &["\"Bad Name\" contains 'B'", "a-z, 0-9"],
    );
    bad(
        "name = \"x\"\n[[bench]]\nname = \"a/b\"\n",
        "3:8",
        "`bench[0].name`",
        &["contains '/'"],
    );
    bad(
        "name = \"\"\n[[bench]]\nname = \"b\"\n",
        "1:8",
        "key `name`",
        &["an empty name"],
    );
}

#[test]
fn no_benches() {
    bad(
        "name = \"x\"\n[run]\npin = true\n",
        "1:1",
        "key `bench`",
        &["no benches", "[[bench]]"],
    );
    bad(
        "name = \"x\"\nbench = []\n",
        "2:9",
        "key `bench`",
        &["no benches"],
    );
}

#[test]
fn unknown_insn() {
    bad(
        &bench("kind = \"insn\"\ninsns = [\"cli\", \"stii\"]"),
        "5:17",
        "`bench[0].insns[1]`",
        &[
            "unknown instruction \"stii\"",
            "popf-set-if",
            "did you mean sti?",
        ],
    );
}

#[test]
fn toml_syntax_errors() {
    bad(
        &bench("nesting = [0.0,"),
        "4:16",
        "invalid TOML",
        &["unclosed array"],
    );
    bad(
        &bench("name = \"c\""),
        "4:1",
        "duplicate key `name`",
        &["invalid TOML"],
    );
}

#[test]
fn too_many_phases() {
    let nesting: Vec<String> = (0..=1000)
        .map(|i| format!("{}", f64::from(i) / 1000.0))
        .collect();
    let irq = r#"irq = [{ source = "none" }, { source = "inject", rate_hz = 1 }]"#;
    // Every strategy but `empty` × 1001 nesting values × 2 sources.
    let phases = (abi::strategy::COUNT - 1) * 1001 * 2;
    bad(
        &bench(&format!("nesting = [{}]\n{irq}", nesting.join(", "))),
        "4:11",
        "`bench[0].nesting`",
        &[&format!(
            "bench[0] expands to {phases} rows, more than 10000"
        )],
    );
}

/// A bench made too large by a `--set` is refused naming the flag, not the bench's line in
/// the file (`<shipped config quick>:21:8`).
#[test]
fn a_bench_made_too_large_by_a_setting_names_the_setting() {
    let list: Vec<String> = (0..=10_000)
        .map(|i| format!("{}", f64::from(i) / 20_000.0))
        .collect();
    let flag = format!("bench.nesting=[{}]", list.join(","));
    let setting = Setting::parse(&flag).expect("a setting");
    let err = load_str_with(H, FILE, &limits(), &[setting])
        .expect_err("too large")
        .to_string();
    assert!(err.starts_with("--set bench.nesting=[0,"), "{err}");
    assert!(err.contains("expands to") && !err.contains(FILE), "{err}");
}

/// The phase count comes from the lists' lengths, before their elements are checked: a
/// 100 000-value list is refused for its size, not after every value (and a quadratic
/// duplicate search over them, 7 s) reached its bad last element.
#[test]
fn a_bench_too_large_is_refused_before_its_values_are_checked() {
    let mut nesting: Vec<String> = (0..100_000)
        .map(|i| format!("{}", f64::from(i) / 200_000.0))
        .collect();
    nesting.push("7.5".into());
    bad(
        &bench(&format!("nesting = [{}]", nesting.join(", "))),
        "4:11",
        "`bench[0].nesting`",
        &["expands to 700007 rows, more than 10000"],
    );
}

thread_local! {
    /// Equality tests of [`Probe`] values on this thread.
    static EQ_TESTS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A list of n distinct values is checked for duplicates in O(n) comparisons, not n²/2.
#[test]
fn duplicate_checks_are_linear_in_the_list_length() {
    /// A list element's show that counts its equality tests.
    #[derive(Debug)]
    struct Probe(u32);
    impl std::hash::Hash for Probe {
        fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
            self.0.hash(state);
        }
    }
    impl PartialEq for Probe {
        fn eq(&self, other: &Probe) -> bool {
            EQ_TESTS.with(|c| c.set(c.get() + 1));
            self.0 == other.0
        }
    }
    impl Eq for Probe {}
    impl fmt::Display for Probe {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "{}", self.0)
        }
    }
    let ctx = values::Ctx {
        src: Source::new(FILE, ""),
        limits: limits(),
        max_group: 15,
    };
    let n = 20_000u32;
    let list = toml::Spanned::new(
        0..0,
        (0..n)
            .map(|i| toml::Spanned::new(0..0, i))
            .collect::<Vec<_>>(),
    );
    EQ_TESTS.with(|c| c.set(0));
    let values = ctx
        .unique_list(&list, "bench[0].vcpus", |v, _| {
            Ok((*v.get_ref(), Probe(*v.get_ref())))
        })
        .expect("distinct values");
    assert_eq!(values.len(), n as usize);
    let tests = EQ_TESTS.with(std::cell::Cell::get);
    assert!(tests <= u64::from(n), "{tests} comparisons for {n} values");
    // A duplicate is still found, and named with its first place.
    let mut dup = list.into_inner();
    dup.push(toml::Spanned::new(0..0, 7));
    let err = ctx
        .unique_list(&toml::Spanned::new(0..0, dup), "bench[0].vcpus", |v, _| {
            Ok((*v.get_ref(), Probe(*v.get_ref())))
        })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("duplicate value 7 (also bench[0].vcpus[7])"),
        "{err}"
    );
}

/// A load whose one event is further apart than the group's budget is refused, naming the
/// budget and the rates it allows: at 1e-300 Hz the period did not even fit a Duration (a
/// panic), at 0.05 Hz the load thread slept 20 s past a 0.5 s budget.
#[test]
fn an_interrupt_load_slower_than_the_budget_is_refused() {
    let run = "name = \"x\"\n[run]\nmax_seconds = 0.5\n[[bench]]\nname = \"b\"\n";
    for (rate, every) in [("0.05", "20 s"), ("1e-300", "1e300 s"), ("1e-19", "1e19 s")] {
        for source in ["inject", "pv-event"] {
            let line = format!("irq = [{{ source = \"{source}\", rate_hz = {rate} }}]");
            let col = line.find(rate).expect("rate") + 1;
            bad(
                &format!("{run}{line}\n"),
                &format!("6:{col}"),
                "`bench[0].irq[0].rate_hz`",
                &[
                    &format!("{rate} Hz is one event every {every}"),
                    "longer than run.max_seconds = 0.5",
                    "valid with this budget: 2..=1_000_000",
                ],
            );
        }
    }
    bad(
        &bench("irq = [{ source = \"lapic-timer\", period_us = 1_000_000 }]\n[run]\nmax_seconds = 0.25"),
        "4:46",
        "`bench[0].irq[0].period_us`",
        &["1_000_000 µs is one event every 1 s", "run.max_seconds = 0.25", "valid with this budget: 1..=250_000"],
    );
    // The default budget is named as such; a period inside it passes.
    bad(
        &bench("irq = [{ source = \"inject\", rate_hz = 0.1 }]"),
        "4:39",
        "`bench[0].irq[0].rate_hz`",
        &["run.max_seconds = 8 (the default)", "0.125..=1_000_000"],
    );
    ok(&format!(
        "{run}irq = [{{ source = \"inject\", rate_hz = 2 }}]\n"
    ));
}

/// A fixed block size whose one round cannot fit the budget on any host is refused before
/// boot: 1e9 operations took about 12 h per round on this host against a 0.1 s budget.
#[test]
fn block_ops_whose_round_exceeds_the_budget_are_refused() {
    let text = bench(
        "block_ops = 1_000_000_000\nstrategies = [\"native-popf\"]\n[run]\nmax_seconds = 0.1",
    );
    bad(
        &text,
        "4:13",
        "`bench[0].block_ops`",
        &[
            "1_000_000_000 operations per block",
            "2 blocks",
            "at least 0.2 s",
            "longer than run.max_seconds = 0.1",
            "valid with this budget: 1..=500_000_000",
        ],
    );
    ok(&text.replace("1_000_000_000", "500_000_000"));
}

// ---- good configs -----------------------------------------------------------------------

#[test]
fn cross_product() {
    let plan = ok(&bench(concat!(
        "strategies = [\"native-popf\", \"pvop-skip\", \"vif-skip\"]\n",
        "nesting = [0, 0.25]\n",
        "irq = [{ source = \"none\" }, { source = \"lapic-timer\", period_us = 100 }]\n",
        "vcpus = [1, 4]\n",
    )));
    assert_eq!(plan.phases.len(), 3 * 2 * 2 * 2);
    let names: Vec<&str> = plan.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names[0], "b/native-popf/n0/none/1v");
    assert_eq!(names[1], "b/native-popf/n0/none/4v");
    assert_eq!(names[2], "b/native-popf/n0/lapic-timer@100us/1v");
    assert_eq!(names[4], "b/native-popf/n0.25/none/1v");
    assert_eq!(names[23], "b/vif-skip/n0.25/lapic-timer@100us/4v");
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), names.len());
    assert_eq!(
        plan.phases[2].irq,
        IrqSource::LapicTimer { period_us: 100.0 }
    );
}

#[test]
fn kinds_map_to_workloads() {
    let plan = ok(concat!(
        "name = \"k\"\n",
        "[[bench]]\nname = \"i\"\nkind = \"insn\"\n",
        "[[bench]]\nname = \"l\"\nkind = \"lock\"\nstrategies = [\"native-popf\", \"native-cli-sti\"]\n",
        "[[bench]]\nname = \"m\"\nkind = \"mixed\"\nweights = { vif-skip = 2, native-popf = 3 }\n",
        "nesting = [0, 0.5]\nirq = [{ source = \"pv-event\", rate_hz = 10 }, { source = \"inject\", rate_hz = 10 }]\n",
        "[[bench]]\nname = \"d\"\nkind = \"mixed\"\n",
    ));
    let kinds = |k: &str| {
        plan.phases
            .iter()
            .filter(|p| p.workload.kind().name() == k)
            .count()
    };
    // The insn bench names none: every instruction but `empty`.
    let insns = abi::insn::COUNT as usize - 1;
    assert_eq!(kinds("insn"), insns);
    assert_eq!(kinds("lock"), 2);
    assert_eq!(kinds("mixed"), 2 * 2 + 1);
    assert_eq!(plan.phases[0].workload, Workload::Insn { insn: InsnId(1) });
    assert_eq!(
        plan.phases[insns].workload,
        Workload::Lock {
            strategy: StrategyId(1)
        }
    );
    let mixed = &plan.phases[insns + 2];
    assert_eq!(mixed.name, "m/mixed/n0/pv-event@10Hz/1v");
    assert_eq!(mixed.irq, IrqSource::PvEvent { rate_hz: 10.0 });
    assert_eq!(
        mixed.workload,
        Workload::Mixed {
            weights: vec![
                (StrategyId(abi::strategy::NATIVE_POPF), 3),
                (StrategyId(abi::strategy::VIF_SKIP), 2)
            ]
        }
    );
    let default_mixed = plan.phases.last().expect("phases");
    assert_eq!(
        default_mixed.workload,
        Workload::Mixed {
            weights: (1..abi::strategy::COUNT)
                .map(|i| (StrategyId(i), 1))
                .collect()
        }
    );
}

#[test]
fn every_shipped_config_parses() {
    let mut count = 0;
    for entry in std::fs::read_dir(CONFIG_DIR).expect("configs/") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let plan = load_file(&path, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("utf-8 name");
        assert_eq!(
            plan.name,
            stem,
            "{}: `name` should match the file name",
            path.display()
        );
        assert!(
            !plan.description.is_empty(),
            "{}: add a description",
            path.display()
        );
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(
            text.starts_with('#'),
            "{}: start with a comment header",
            path.display()
        );
        count += 1;
    }
    assert!(
        count >= 6,
        "expected the shipped configs in {CONFIG_DIR}, found {count}"
    );
}

#[test]
fn shipped_configs_are_sized_as_documented() {
    let load =
        |name: &str| load_file(&Path::new(CONFIG_DIR).join(name), &Limits::default()).expect(name);
    // `strategies` and soak's first bench name no strategies: every one but `empty`.
    let strategies = abi::strategy::COUNT as usize - 1;
    assert_eq!(load("strategies.toml").phases.len(), 2 * strategies);
    assert_eq!(load("insn-cost.toml").phases.len(), 10);
    assert_eq!(load("pv-restore-skip.toml").phases.len(), 36);
    assert_eq!(load("epoll-irqsave-vs-irq.toml").phases.len(), 24);
    assert_eq!(load("answers-load.toml").phases.len(), 16);
    assert_eq!(load("irq-paths.toml").phases.len(), 32);
    let soak = load("soak.toml");
    assert_eq!((soak.phases.len(), soak.max_vcpus()), (strategies + 1, 4));
}

#[test]
fn columns_count_characters() {
    let ctx = Source::new("f", "aé\nxéz");
    let at = ctx.location("aé\nxé".len());
    assert_eq!((at.line, at.column), (2, 3));
    assert_eq!(ctx.location(0).to_string(), "f:1:1");
}

#[test]
fn helpers() {
    assert_eq!(fmt_int(1_000_000_000), "1_000_000_000");
    assert_eq!(fmt_int(-12345), "-12_345");
    assert_eq!(fmt_int(4096), "4096");
    assert_eq!(schema::fmt_num(8.0), "8");
    assert_eq!(schema::fmt_num(1e6), "1_000_000");
    assert_eq!(schema::fmt_num(0.02), "0.02");
    assert_eq!(schema::fmt_num(1e300), "1e300");
    assert_eq!(schema::fmt_num(1.0 / 1e-300), "1e300");
    assert_eq!(schema::fmt_num(1.25e-7), "1.25e-7");
    assert_eq!(schema::fmt_num(1e-19), "1e-19");
    assert_eq!(
        closest("native-pop", &irqbench_abi::strategy::NAMES),
        Some("native-popf")
    );
    assert_eq!(closest("bogus", &["vcpus"]), None);
    assert_eq!(key_norm("bench[0].irq[12].rate_hz"), "bench.irq.rate_hz");
}

// ---- plans ---------------------------------------------------------------------------------

#[test]
fn default_config_parses() {
    let plan = default_plan(&Limits::default());
    assert_eq!(plan.name, DEFAULT_CONFIG_NAME);
    assert_eq!(plan.source, DEFAULT_SOURCE);
    let names: Vec<&str> = plan.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "quick/native-popf/n0/none/1v",
            "quick/native-cli-sti/n0/none/1v",
            "quick/native-skip/n0/none/1v",
            "quick/pvop-popf/n0/none/1v",
            "quick/pvop-skip/n0/none/1v",
        ]
    );
    // One group: the five strategies are measured together against one baseline.
    assert!(plan
        .phases
        .iter()
        .all(|p| p.group.to_string() == "quick/n0/none/1v"));
    assert!(plan
        .phases
        .iter()
        .all(|p| p.body_ops == 4 && p.irq == IrqSource::None && p.block_ops.is_none()));
    // Sized to stay short on an emulating host: a small budget per group.
    assert!(plan.max_seconds <= 5.0, "{}", plan.max_seconds);
    // Even a host that reports no vCPU limit gets the default plan.
    assert_eq!(default_plan(&Limits { max_vcpus: 0 }).phases.len(), 5);
}

#[test]
fn defaults_applied() {
    let plan = ok("name = \"min\"\n[[bench]]\nname = \"b\"\n");
    assert_eq!(plan.description, "");
    assert_eq!(plan.source, FILE);
    assert_eq!(plan.memory_mib, defaults::MEMORY_MIB);
    assert_eq!(plan.precision, defaults::PRECISION);
    assert_eq!(plan.max_seconds, defaults::MAX_SECONDS);
    assert_eq!(plan.min_rounds, defaults::MIN_ROUNDS);
    assert_eq!(plan.block_us, defaults::BLOCK_US);
    assert!(!plan.pin_vcpus);
    assert_eq!(plan.hypercall, HypercallTransport::Port);
    assert_eq!(plan.phase_timeout_ms, None);
    // Every strategy but `empty`, in id order, in one group.
    assert_eq!(plan.phases.len(), abi::strategy::COUNT as usize - 1);
    for (i, p) in plan.phases.iter().enumerate() {
        assert_eq!(
            p.workload,
            Workload::Strategy {
                strategy: StrategyId(i as u32 + 1)
            }
        );
        assert_eq!((p.nesting, p.body_ops, p.vcpus, p.seed), (0.0, 4, 1, 1));
        assert_eq!((p.irq, p.block_ops), (IrqSource::None, None));
        assert_eq!(p.group.to_string(), "b/n0/none/1v");
    }
}

#[test]
fn run_values_are_used() {
    let plan = ok(concat!(
        "name = \"r\"\ndescription = \"d\"\n[run]\nmemory_mib = 64\nprecision = 0.05\n",
        "max_seconds = 2.5\nmin_rounds = 7\nblock_us = 250\npin = true\nhypercall = \"vmcall\"\n",
        "phase_timeout_ms = 5000\nvcpus = 3\n[[bench]]\nname = \"b\"\n",
        "strategies = [\"empty\"]\nblock_ops = 500\nseed = 42\n",
    ));
    assert_eq!(plan.description, "d");
    assert_eq!(plan.memory_mib, 64);
    assert_eq!((plan.precision, plan.max_seconds), (0.05, 2.5));
    assert_eq!((plan.min_rounds, plan.block_us), (7, 250));
    assert!(plan.pin_vcpus);
    assert_eq!(plan.hypercall, HypercallTransport::Vmcall);
    assert_eq!(plan.phase_timeout_ms, Some(5000));
    let p = &plan.phases[0];
    assert_eq!(p.name, "b/empty/n0/none/3v");
    assert_eq!(p.group.to_string(), "b/n0/none/3v");
    assert_eq!((p.vcpus, p.seed, p.block_ops), (3, 42, Some(500)));
    assert_eq!(plan.max_vcpus(), 3);
}

#[test]
fn groups_share_everything_but_the_workload() {
    let plan = ok(&bench(concat!(
        "strategies = [\"empty\", \"native-popf\", \"vif-skip\"]\n",
        "nesting = [0, 0.5]\nvcpus = [1, 2]\n",
        "irq = [{ source = \"none\" }, { source = \"inject\", rate_hz = 1000 }]\n",
    )));
    let mut groups: Vec<String> = plan.phases.iter().map(|p| p.group.to_string()).collect();
    groups.sort_unstable();
    groups.dedup();
    assert_eq!(groups.len(), 2 * 2 * 2);
    assert!(groups.iter().any(|g| g == "b/n0.5/inject@1000Hz/2v"));
    for g in groups {
        let rows: Vec<_> = plan
            .phases
            .iter()
            .filter(|p| p.group.to_string() == g)
            .collect();
        assert_eq!(rows.len(), 3, "{g}");
        assert!(rows.iter().all(|p| (p.nesting, p.irq, p.vcpus, p.body_ops)
            == (
                rows[0].nesting,
                rows[0].irq,
                rows[0].vcpus,
                rows[0].body_ops
            )));
    }
    // A mixed bench: one row per group.
    let mixed = ok(&bench("kind = \"mixed\"\nnesting = [0, 0.5]"));
    assert_eq!(mixed.phases.len(), 2);
    assert_ne!(mixed.phases[0].group, mixed.phases[1].group);
}

#[test]
fn group_size_is_limited() {
    let text = bench(r#"strategies = ["native-popf", "native-skip", "pvop-popf"]"#);
    let msg = load_with(&text, FILE, &limits(), 2, &[])
        .unwrap_err()
        .to_string();
    assert!(
        msg.starts_with("configs/x.toml:3:8: key `bench[0]`: "),
        "{msg}"
    );
    for w in [
        "puts 3 rows in each group",
        "more than the 2 a group may hold",
        "`strategies`",
    ] {
        assert!(msg.contains(w), "expected {w:?} in {msg:?}");
    }
    assert!(load_with(&text, FILE, &limits(), 3, &[]).is_ok());
    // The real limit holds every instruction of the ABI, the baseline included.
    ok(&bench(&format!(
        "kind = \"insn\"\ninsns = {:?}",
        irqbench_abi::insn::NAMES
    )));
    assert!(irqbench_abi::insn::NAMES.len() <= plan::MAX_GROUP_VARIANTS);
}

// ---- removed keys and the new keys' ranges ---------------------------------------------------

/// Every removed key is refused at its own line:col with what replaced it.
#[test]
fn removed_keys_say_what_replaced_them() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "repeats = 5",
            "run.repeats",
            &[
                "interleaved in rounds",
                "95% CI",
                "`run.precision` (default 0.02)",
                "`run.max_seconds` (default 8)",
                "delete `repeats`",
            ],
        ),
        (
            "warmup = 1",
            "run.warmup",
            &[
                "interleaved in rounds",
                "delete `warmup`",
                "`min_rounds`, default 20",
            ],
        ),
        (
            "target_ms = 50",
            "run.target_ms",
            &["`run.block_us` (default 500)", "delete `target_ms`"],
        ),
        (
            "min_iterations = 16",
            "run.min_iterations",
            &["calibrated", "delete `min_iterations`", "`block_ops`"],
        ),
        (
            "max_iterations = 1000",
            "run.max_iterations",
            &["calibrated", "delete `max_iterations`"],
        ),
        (
            "noisy_cv = 0.1",
            "run.noisy_cv",
            &[
                "95% confidence interval",
                "delete `noisy_cv`",
                "`precision`",
            ],
        ),
    ];
    for (line, key, words) in cases {
        // After a valid key, so the line and column are the removed key's own.
        let text = format!("{H}[run]\npin = false\n{line}\n");
        let msg = bad(&text, "6:1", &format!("`{key}` was removed: "), words);
        assert!(!msg.contains("unknown key"), "{msg}");
    }
    bad(
        &bench("nesting = [0.5]\niterations = 1000"),
        "5:1",
        "`bench[0].iterations` was removed: ",
        &[
            "`block_ops`",
            "rename `iterations` to `block_ops`",
            "delete it to calibrate",
        ],
    );
    // Several: the first in the file is reported, whatever order serde reads tables in.
    bad(
        "name = \"o\"\n[run]\nwarmup = 1\nrepeats = 3\n[[bench]]\nname = \"b\"\niterations = 5\n",
        "3:1",
        "`run.warmup` was removed",
        &[],
    );
    bad(
        "name = \"o\"\n[[bench]]\nname = \"b\"\niterations = 5\n[run]\nrepeats = 3\n",
        "4:1",
        "`bench[0].iterations` was removed",
        &[],
    );
    bad(
        "name = \"o\"\nrun.noisy_cv = 0.1\n[[bench]]\nname = \"b\"\n",
        "2:5",
        "`run.noisy_cv` was removed",
        &[],
    );
    // Elsewhere the same names are plain unknown keys.
    bad(
        &bench("repeats = 3"),
        "4:1",
        "unknown key `repeats` in `bench[0]`",
        &["valid keys"],
    );
}

#[test]
fn new_run_keys_are_range_checked() {
    let cases = [
        (
            "precision = 0",
            "5:13",
            "run.precision",
            "0 is outside >0..=0.5",
        ),
        (
            "precision = 0.6",
            "5:13",
            "run.precision",
            "0.6 is outside >0..=0.5",
        ),
        (
            "max_seconds = 0.05",
            "5:15",
            "run.max_seconds",
            "0.05 is outside 0.1..=3600",
        ),
        (
            "max_seconds = 4000",
            "5:15",
            "run.max_seconds",
            "4000 is outside 0.1..=3600",
        ),
        (
            "min_rounds = 2",
            "5:14",
            "run.min_rounds",
            "2 is outside 3..=100_000",
        ),
        (
            "min_rounds = 100001",
            "5:14",
            "run.min_rounds",
            "100_001 is outside 3..=100_000",
        ),
        (
            "replicates = 0",
            "5:14",
            "run.replicates",
            "0 is outside 1..=16",
        ),
        (
            "replicates = 17",
            "5:14",
            "run.replicates",
            "17 is outside 1..=16",
        ),
        (
            "block_us = 19",
            "5:12",
            "run.block_us",
            "19 is outside 20..=100_000",
        ),
        (
            "block_us = 100_001",
            "5:12",
            "run.block_us",
            "100_001 is outside 20..=100_000",
        ),
        (
            "phase_timeout_ms = 10",
            "5:20",
            "run.phase_timeout_ms",
            "10 is outside 100..=3_600_000",
        ),
    ];
    for (line, at, key, words) in cases {
        bad(
            &format!("{H}[run]\n{line}\n"),
            at,
            &format!("`{key}`"),
            &[words],
        );
    }
    // Integers are numbers too; edges are inclusive where the schema says so.
    let plan = ok(&format!(
        "{H}[run]\nprecision = 0.5\nmax_seconds = 3600\nmin_rounds = 3\nblock_us = 20\n"
    ));
    assert_eq!((plan.precision, plan.max_seconds), (0.5, 3600.0));
    assert_eq!((plan.min_rounds, plan.block_us), (3, 20));
    bad(
        &format!("{H}[run]\nprecision = \"tight\"\n"),
        "5:13",
        "`run.precision`",
        &[
            "wrong type",
            "expected a number >0..=0.5: the target half-width",
        ],
    );
}

// ---- files -----------------------------------------------------------------------------------

#[test]
fn unreadable_file_names_path_and_keeps_os_error() {
    let path = Path::new("configs/does-not-exist.toml");
    let err = load_file(path, &limits()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot read config configs/does-not-exist.toml"
    );
    let source = std::error::Error::source(&err).expect("io error as source");
    let io = source
        .downcast_ref::<std::io::Error>()
        .expect("an io::Error");
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    assert!(err.location().is_none());
}

#[test]
fn devices_fifos_and_huge_files_are_refused_at_once() {
    let err = load_file(Path::new("/dev/zero"), &limits()).unwrap_err();
    let msg = crate::error_chain(&err, ": ");
    assert!(
        msg.contains("/dev/zero") && msg.contains("character device"),
        "{msg}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("config.toml");
    let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("no NUL");
    // SAFETY: mkfifo reads the NUL-terminated path, which `c` owns for the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // No writer ever opens the FIFO: returning at all shows the load does not wait for one.
    let msg = load_file(&fifo, &limits()).unwrap_err().to_string();
    assert!(
        msg.contains(&fifo.display().to_string()) && msg.contains("FIFO"),
        "{msg}"
    );

    let huge = dir.path().join("huge.toml");
    let file = std::fs::File::create(&huge).expect("create");
    file.set_len(read::MAX_CONFIG_BYTES + 1)
        .expect("sparse file");
    let msg = load_file(&huge, &limits()).unwrap_err().to_string();
    assert!(
        msg.contains("huge.toml") && msg.contains("more than the"),
        "{msg}"
    );
}

// ---- the schema ------------------------------------------------------------------------------

/// `configs/README.md`'s key reference is the schema's; `IRQBENCH_BLESS=1` rewrites it.
#[test]
fn readme_key_reference_is_the_schema() {
    const BEGIN: &str = "<!-- keys:begin (generated from vmm/src/config/schema.rs) -->\n";
    const END: &str = "<!-- keys:end -->";
    let path = Path::new(CONFIG_DIR).join("README.md");
    let readme = std::fs::read_to_string(&path).expect("configs/README.md");
    let (head, rest) = readme.split_once(BEGIN).expect("the keys:begin marker");
    let (current, tail) = rest.split_once(END).expect("the keys:end marker");
    let generated = key_reference();
    if current != generated {
        if std::env::var_os("IRQBENCH_BLESS").is_some() {
            std::fs::write(&path, format!("{head}{BEGIN}{generated}{END}{tail}")).expect("write");
            return;
        }
        panic!(
            "configs/README.md's key reference differs from the schema; rerun with \
             IRQBENCH_BLESS=1 to regenerate it. Expected:\n{generated}"
        );
    }
}

#[test]
fn schema_is_consistent() {
    for k in schema::KEYS {
        assert!(
            schema::REMOVED
                .iter()
                .all(|r| (r.table, r.key) != (k.table, k.key)),
            "{}.{} is both current and removed",
            k.table,
            k.key
        );
        assert!(!k.meaning.is_empty(), "{}: no meaning", k.key);
    }
    // Every key the raw structs read has a schema entry: a config with all of them loads.
    let all = concat!(
        "name = \"a\"\ndescription = \"d\"\n[run]\nmemory_mib = 32\nprecision = 0.1\n",
        "max_seconds = 1\nmin_rounds = 5\nblock_us = 100\npin = false\nhypercall = \"port\"\n",
        "phase_timeout_ms = 1000\nvcpus = 1\n[[bench]]\nname = \"b\"\nkind = \"strategy\"\n",
        "strategies = [\"empty\"]\nnesting = [0.5]\nbody_ops = 1\nvcpus = [1]\nblock_ops = 10\n",
        "seed = 2\nirq = [{ source = \"lapic-timer\", period_us = 10 }, ",
        "{ source = \"pv-event\", rate_hz = 10 }]\n",
    );
    ok(all);
}

// ---- chosen comparisons -------------------------------------------------------------------

#[test]
fn a_bench_chooses_its_comparisons_or_gets_the_fields_pairs() {
    let id = |n: &str| StrategyId::from_name(n).expect(n);
    let chosen = ok(&bench(
        "strategies = [\"native-popf\", \"pvop-popf\", \"pvop-skip\"]\ncompare = [[\"pvop-popf\", \"pvop-skip\"]]",
    ));
    assert_eq!(
        chosen.phases[0].compare,
        [(id("pvop-popf"), id("pvop-skip"))]
    );
    let reference = ok(&bench(
        "strategies = [\"vif-restore\", \"vif-skip\", \"pvop-popf\"]\nreference = \"vif-skip\"",
    ));
    assert_eq!(
        reference.phases[0].compare,
        [
            (id("vif-skip"), id("vif-restore")),
            (id("vif-skip"), id("pvop-popf"))
        ]
    );
    // Default: every row against the first, then the field's pairs that are present.
    let default = ok(&bench(
        "strategies = [\"pvop-popf\", \"vif-restore\", \"vif-skip\"]",
    ));
    assert_eq!(
        default.phases[0].compare,
        [
            (id("pvop-popf"), id("vif-restore")),
            (id("pvop-popf"), id("vif-skip")),
            (id("vif-restore"), id("vif-skip")),
        ]
    );
}

#[test]
fn a_comparison_naming_a_strategy_not_in_the_bench_is_refused_at_its_place() {
    bad(
        &bench("strategies = [\"native-popf\", \"pvop-skip\"]\ncompare = [[\"pvop-popf\", \"pvop-skip\"]]"),
        "5:13",
        "bench[0].compare[0]",
        &["pvop-popf", "not one of this bench's strategies", "native-popf, pvop-skip"],
    );
    bad(
        &bench("strategies = [\"native-popf\", \"pvop-skip\"]\ncompare = [[\"native-popf\"]]"),
        "5:12",
        "bench[0].compare[0]",
        &["two strategy names"],
    );
}

#[test]
fn report_redact_names_facts_and_refuses_others_with_their_place() {
    let plan = ok(&format!(
        "{H}[report]\nredact = [\"hostname\", \"cmdline\"]\n"
    ));
    assert_eq!(plan.redact, [Redaction::Hostname, Redaction::Cmdline]);
    assert!(ok(&format!("{H}[report]\nredact = []\n")).redact.is_empty());
    assert!(ok(H).redact.is_empty());
    bad(
        &format!("{H}[report]\nredact = [\"cmdline\", \"hostnam\"]\n"),
        "5:22",
        "report.redact[1]",
        &[
            "unknown fact to redact \"hostnam\"",
            "valid: cmdline, hostname",
            "did you mean hostname?",
        ],
    );
    bad(
        &format!("{H}[report]\nredact = [\"cmdline\", \"cmdline\"]\n"),
        "5:22",
        "report.redact[1]",
        &["duplicate value", "listed twice"],
    );
    let err = load_str(
        &format!("{H}[report]\nredact = [\"cmdline\", \"cmdline\"]\n"),
        FILE,
        &limits(),
    )
    .unwrap_err()
    .to_string();
    assert!(!err.contains("row names"), "{err}");
    bad(
        &format!("{H}[report]\nredac = []\n"),
        "5:1",
        "redac",
        &["valid keys: redact"],
    );
}

/// Every source of the ABI table loads from a config as itself, with its parameter: the name
/// is found together with its constructor, so no name of the table can lack one.
#[test]
fn every_irq_source_of_the_table_loads_as_itself() {
    for info in abi::irq::SOURCES {
        let param = info
            .param
            .map(|p| format!(", {} = 100", p.key))
            .unwrap_or_default();
        let plan = ok(&format!(
            "{H}strategies = [\"native-popf\"]\nirq = [{{ source = \"{}\"{param} }}]\n",
            info.name
        ));
        let irq = plan.phases[0].irq;
        assert_eq!(irq.name(), info.name);
        assert_eq!(irq.param(), info.param.map(|_| 100.0), "{}", info.name);
    }
}
