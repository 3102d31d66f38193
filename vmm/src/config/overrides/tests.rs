use super::super::{load_str, load_str_with, Limits, Setting};
use crate::config::plan::{IrqSource, Plan};
use crate::results::redact::Redaction;

const FILE: &str = "configs/x.toml";

/// Two benches: `[run]` as a header table, one bench without `vcpus`.
const TWO: &str = "name = \"x\"\n[run]\npin = false\n\n[[bench]]\nname = \"a\"\n\
                   strategies = [\"native-popf\", \"pvop-skip\"]\n\n[[bench]]\nname = \"b\"\n\
                   strategies = [\"pvop-popf\"]\nvcpus = [1]\n";

fn set(flags: &[&str]) -> Vec<Setting> {
    flags.iter().map(|f| Setting::parse(f).unwrap()).collect()
}

fn load(text: &str, flags: &[&str]) -> Result<Plan, String> {
    load_str_with(text, FILE, &Limits { max_vcpus: 8 }, &set(flags)).map_err(|e| e.to_string())
}

fn vcpus_of(plan: &Plan, bench: &str) -> Vec<u32> {
    plan.phases
        .iter()
        .filter(|p| p.group.bench == bench)
        .map(|p| p.vcpus)
        .collect()
}

#[test]
fn a_setting_replaces_or_adds_a_key_in_every_kind_of_table() {
    let plan = load(
        TWO,
        &["run.max_seconds=1.5", "run.pin=true", "bench.b.vcpus=[1,2]"],
    )
    .unwrap();
    assert_eq!((plan.max_seconds, plan.pin_vcpus), (1.5, true));
    assert_eq!(vcpus_of(&plan, "a"), [1, 1]);
    assert_eq!(vcpus_of(&plan, "b"), [1, 2]);
    // `bench.KEY` sets it in every bench; the later of two settings of a key wins.
    let plan = load(
        TWO,
        &["bench.vcpus=[2]", "bench.a.vcpus=[3]", "description=hi"],
    )
    .unwrap();
    assert_eq!(
        (vcpus_of(&plan, "a"), vcpus_of(&plan, "b")),
        (vec![3, 3], vec![2])
    );
    assert_eq!(plan.description, "hi");
    // Inline tables, an absent [run], dotted keys.
    let inline =
        "name = \"x\"\nrun = {}\nbench = [{ name = \"a\", strategies = [\"pvop-popf\"] }]\n";
    let plan = load(
        inline,
        &["run.max_seconds=2", "bench.nesting=[0.5]", "run.pin=true"],
    )
    .unwrap();
    assert_eq!((plan.max_seconds, plan.phases[0].nesting), (2.0, 0.5));
    let no_run = "name = \"x\"\n[[bench]]\nname = \"a\"";
    assert_eq!(
        load(no_run, &["run.max_seconds=2"]).unwrap().max_seconds,
        2.0
    );
    let dotted = "name = \"x\"\nrun.pin = true\n[[bench]]\nname = \"a\"\n";
    assert_eq!(
        load(dotted, &["run.max_seconds=2"]).unwrap().max_seconds,
        2.0
    );
    let irq = load(
        TWO,
        &["bench.a.irq=[{ source = \"inject\", rate_hz = 500 }]"],
    )
    .unwrap();
    assert_eq!(irq.phases[0].irq, IrqSource::Inject { rate_hz: 500.0 });
    // A bare word is a string.
    let plan = load(
        TWO,
        &[
            "bench.a.kind=lock",
            "run.hypercall=port",
            "report.redact=[\"cmdline\"]",
        ],
    )
    .unwrap();
    assert_eq!(plan.redact, [Redaction::Cmdline]);
    assert_eq!(
        plan.phases[0].workload.kind(),
        crate::results::ResultKind::Lock
    );
}

#[test]
fn a_bad_setting_names_the_flag_with_the_config_error_text() {
    let cases: &[(&str, &[&str])] = &[
        (
            "run.max_secnds=5",
            &[
                "--set run.max_secnds=5: unknown key `max_secnds` in [run]",
                "did you mean `max_seconds`?",
            ],
        ),
        (
            "run.max_seconds=0",
            &["--set run.max_seconds=0: key `run.max_seconds`: 0 is outside 0.1..=3600"],
        ),
        (
            "run.max_seconds=\"5\"",
            &["wrong type: found string", "expected a number"],
        ),
        (
            "bench.vcpu=[1]",
            &["unknown key `vcpu` in `bench`", "did you mean `vcpus`?"],
        ),
        (
            "bench.c.vcpus=[1]",
            &["no bench is named `c`; benches: a, b"],
        ),
        (
            "bench.b.vcpus=[1,99]",
            &["--set bench.b.vcpus=[1,99]: key `bench[1].vcpus[1]`: 99 is outside 1..=8"],
        ),
        (
            "bench.strategies=[\"pvop-sip\"]",
            &["unknown strategy \"pvop-sip\"", "did you mean pvop-skip?"],
        ),
        ("bench.irq.rate_hz=5", &["`bench.irq` is set whole"]),
        ("run.repeats=3", &["`run.repeats` was removed"]),
        ("run=1", &["`run` is a table"]),
        (
            "nme=x",
            &["unknown key `nme` in the top level", "did you mean `name`?"],
        ),
        ("run.max_seconds=[1", &["is not a TOML value"]),
        // One value only: no second key rides along.
        ("run.max_seconds=1\nname = \"y\"", &["is not a TOML value"]),
        (
            "report.redact=[\"cmdlin\"]",
            &["unknown fact to redact \"cmdlin\"", "did you mean cmdline?"],
        ),
    ];
    for (flag, words) in cases {
        let msg = load(TWO, &[flag]).map(|_| ()).unwrap_err();
        for w in *words {
            assert!(msg.contains(w), "--set {flag:?}: expected {w:?} in {msg:?}");
        }
        assert!(msg.starts_with("--set "), "{msg}");
        assert!(!msg.contains('\n'), "one line, the flag escaped: {msg:?}");
    }
    for bad in ["", "=1", "max_seconds"] {
        assert!(Setting::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn errors_in_the_file_keep_their_place_around_the_edits() {
    // The bad value on line 7 stays line 7 with keys written before and after it.
    let text = format!("{TWO}nesting = [2.0]\n");
    let plain = load(&text, &[]).unwrap_err();
    assert!(plain.starts_with("configs/x.toml:13:12: "), "{plain}");
    let flags = [
        "description='''a\nlonger\ntext'''",
        "run.max_seconds=1",
        "bench.a.seed=3",
        "bench.seed=4",
    ];
    assert_eq!(load(&text, &flags).unwrap_err(), plain);
    // And the file is read as it is: no setting, the same plan as load_str.
    let limits = Limits { max_vcpus: 8 };
    assert_eq!(
        load(TWO, &[]).unwrap(),
        load_str(TWO, FILE, &limits).unwrap()
    );
}

/// An error about the whole file (a missing key) stays the file's when a setting wrote a line
/// at its top: only the value a setting wrote is the flag's.
#[test]
fn an_error_of_the_whole_file_is_not_blamed_on_a_setting() {
    let no_name = "[[bench]]\nname = \"a\"\n";
    let msg = load(no_name, &["description=x", "run.max_seconds=1"]).unwrap_err();
    assert!(
        msg.starts_with("configs/x.toml:1:1: key `name`: missing"),
        "{msg}"
    );
    let no_bench = "name = \"x\"\n";
    let msg = load(no_bench, &["description=x", "run.max_seconds=1"]).unwrap_err();
    assert!(msg.starts_with("configs/x.toml:1:1: key `bench`"), "{msg}");
}
