//! The one validating layer between guest-written data and the VMM's measurements.
//!
//! A phase record is untrusted: the guest may be buggy, hand-built (`--guest`), or deliberately
//! hostile. Everything a record says is checked against the descriptor the VMM sent before any
//! number from it reaches a result; a failure names the field and the value.

use irqbench_abi::{self as abi, record_status, workload, PhaseDescriptor, PhaseRecord};

/// More interrupts or hypercalls than this in one phase is not a measurement, it is garbage.
const MAX_EVENTS_PER_PHASE: u64 = 1 << 40;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("guest protocol violation on vCPU {vcpu}: field `{field}` {problem}")]
pub struct ProtocolViolation {
    pub vcpu: u32,
    pub field: &'static str,
    pub problem: String,
}

/// A record that passed every check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValidRecord {
    pub tsc_cycles: u64,
    pub ops: u64,
    pub interrupts: u64,
    pub hypercalls: u64,
    pub if_violations: u64,
    pub lock_acquisitions: u64,
    pub lock_spins: u64,
    pub strategy_ops: [u64; abi::strategy::COUNT as usize],
}

/// Operations the guest must report for `desc`.
pub fn expected_ops(desc: &PhaseDescriptor) -> u64 {
    match desc.workload {
        workload::INSN => desc
            .iterations
            .saturating_mul(u64::from(abi::insn::unroll(desc.strategy))),
        _ => desc.iterations,
    }
}

pub fn validate_record(
    vcpu: u32,
    desc: &PhaseDescriptor,
    rec: &PhaseRecord,
) -> Result<ValidRecord, ProtocolViolation> {
    let bad = |field: &'static str, problem: String| ProtocolViolation {
        vcpu,
        field,
        problem,
    };
    if rec.seq != desc.seq {
        return Err(bad(
            "record.seq",
            format!("is {} but the phase sent was {}", rec.seq, desc.seq),
        ));
    }
    match rec.status {
        record_status::DONE => {}
        record_status::BAD_DESCRIPTOR => {
            return Err(bad(
                "record.status",
                format!(
                    "says the guest rejected the descriptor (workload {}, id {})",
                    desc.workload, desc.strategy
                ),
            ))
        }
        other => {
            return Err(bad(
                "record.status",
                format!(
                    "is {other:#x}; valid: {} (done) or {} (bad descriptor)",
                    record_status::DONE,
                    record_status::BAD_DESCRIPTOR
                ),
            ))
        }
    }
    if rec.tsc_end < rec.tsc_start {
        return Err(bad(
            "record.tsc_end",
            format!(
                "({}) is before tsc_start ({}): time cannot run backwards",
                rec.tsc_end, rec.tsc_start
            ),
        ));
    }
    let want = expected_ops(desc);
    if rec.ops != want {
        return Err(bad(
            "record.ops",
            format!("is {} but the phase asked for {want}", rec.ops),
        ));
    }
    for (field, value) in [
        ("record.interrupts", rec.interrupts),
        ("record.hypercalls", rec.hypercalls),
        ("record.lock_spins", rec.lock_spins),
    ] {
        if value > MAX_EVENTS_PER_PHASE {
            return Err(bad(
                field,
                format!("is {value}, above the plausible maximum {MAX_EVENTS_PER_PHASE}"),
            ));
        }
    }
    if rec.if_violations > rec.ops {
        return Err(bad(
            "record.if_violations",
            format!(
                "({}) exceeds the operations ({})",
                rec.if_violations, rec.ops
            ),
        ));
    }
    let acquisitions_want = if desc.workload == workload::LOCK {
        rec.ops.saturating_mul(2)
    } else {
        0
    };
    if rec.lock_acquisitions != acquisitions_want {
        return Err(bad(
            "record.lock_acquisitions",
            format!(
                "is {} but this phase takes the lock {acquisitions_want} times",
                rec.lock_acquisitions
            ),
        ));
    }
    if desc.workload == workload::MIXED {
        let sum = rec
            .strategy_ops
            .iter()
            .fold(0u64, |a, b| a.saturating_add(*b));
        if sum != rec.ops {
            return Err(bad(
                "record.strategy_ops",
                format!("sum to {sum} but ops is {}", rec.ops),
            ));
        }
    } else if rec.strategy_ops.iter().any(|c| *c != 0) {
        return Err(bad(
            "record.strategy_ops",
            "are non-zero outside a mixed phase".into(),
        ));
    }
    Ok(ValidRecord {
        tsc_cycles: rec.tsc_end - rec.tsc_start,
        ops: rec.ops,
        interrupts: rec.interrupts,
        hypercalls: rec.hypercalls,
        if_violations: rec.if_violations,
        lock_acquisitions: rec.lock_acquisitions,
        lock_spins: rec.lock_spins,
        strategy_ops: rec.strategy_ops,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn desc() -> PhaseDescriptor {
        PhaseDescriptor {
            seq: 7,
            workload: workload::STRATEGY,
            strategy: abi::strategy::NATIVE_POPF,
            iterations: 100,
            ..Default::default()
        }
    }

    fn good() -> PhaseRecord {
        PhaseRecord {
            seq: 7,
            status: record_status::DONE,
            tsc_start: 1000,
            tsc_end: 5000,
            ops: 100,
            ..Default::default()
        }
    }

    #[test]
    fn a_consistent_record_passes() {
        let v = validate_record(0, &desc(), &good()).expect("valid");
        assert_eq!(v.tsc_cycles, 4000);
    }

    #[test]
    fn each_inconsistency_names_its_field() {
        type Mutation = Box<dyn Fn(&mut PhaseRecord)>;
        let cases: Vec<(&str, Mutation)> = vec![
            ("record.seq", Box::new(|r| r.seq = 8)),
            ("record.status", Box::new(|r| r.status = 0xDEAD)),
            ("record.tsc_end", Box::new(|r| r.tsc_end = 1)),
            ("record.ops", Box::new(|r| r.ops = u64::MAX)),
            ("record.interrupts", Box::new(|r| r.interrupts = u64::MAX)),
            ("record.if_violations", Box::new(|r| r.if_violations = 101)),
            (
                "record.lock_acquisitions",
                Box::new(|r| r.lock_acquisitions = 1),
            ),
            ("record.strategy_ops", Box::new(|r| r.strategy_ops[3] = 1)),
        ];
        for (field, mutate) in cases {
            let mut r = good();
            mutate(&mut r);
            let err = validate_record(2, &desc(), &r).expect_err(field);
            assert_eq!(err.field, field);
            assert!(err.to_string().contains("vCPU 2"), "{err}");
        }
    }

    fn any_record() -> impl Strategy<Value = PhaseRecord> {
        (
            any::<u32>(),
            prop_oneof![Just(record_status::DONE), any::<u32>()],
            any::<u64>(),
            any::<u64>(),
            prop_oneof![Just(100u64), any::<u64>()],
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<[u64; 8]>(),
        )
            .prop_map(|(seq, status, a, b, ops, i, h, v, so)| PhaseRecord {
                seq,
                status,
                tsc_start: a,
                tsc_end: b,
                ops,
                interrupts: i,
                hypercalls: h,
                if_violations: v,
                lock_acquisitions: 0,
                lock_spins: 0,
                strategy_ops: so,
            })
    }

    proptest! {
        /// Random and adversarial records never panic; whatever passes is self-consistent.
        #[test]
        fn random_records_never_panic(rec in any_record(), workload in 0u32..12, iters in any::<u64>()) {
            let d = PhaseDescriptor { seq: rec.seq, workload, iterations: iters, ..desc() };
            if let Ok(v) = validate_record(0, &d, &rec) {
                prop_assert!(rec.tsc_end >= rec.tsc_start);
                prop_assert_eq!(v.ops, expected_ops(&d));
                prop_assert!(v.if_violations <= v.ops);
            }
        }
    }

    /// The long fuzz run: `IRQBENCH_FUZZ_SECS=600 cargo test --release -p irqbench --lib
    /// fuzz_validation_layer -- --ignored --nocapture`. Random and adversarial records
    /// (mutations of a valid one) against every workload; no panic, and whatever passes is
    /// self-consistent.
    #[test]
    #[ignore = "long-running fuzz; run by hand"]
    fn fuzz_validation_layer_for_a_while() {
        use proptest::test_runner::{Config, TestRunner};
        let secs: u64 = std::env::var("IRQBENCH_FUZZ_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(60);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        let mut cases = 0u64;
        let mut accepted = 0u64;
        while std::time::Instant::now() < deadline {
            let mut runner = TestRunner::new(Config {
                cases: 10_000,
                failure_persistence: None,
                ..Config::default()
            });
            runner
                .run(
                    &(
                        any_record(),
                        0u32..12,
                        prop_oneof![Just(100u64), any::<u64>()],
                    ),
                    |(rec, workload, iters)| {
                        let d = PhaseDescriptor {
                            seq: rec.seq,
                            workload,
                            iterations: iters,
                            ..desc()
                        };
                        if let Ok(v) = validate_record(0, &d, &rec) {
                            prop_assert!(rec.tsc_end >= rec.tsc_start);
                            prop_assert_eq!(v.ops, expected_ops(&d));
                        }
                        Ok(())
                    },
                )
                .expect("no failure");
            cases += 10_000;
            // Adversarial: single-field mutations of a valid record.
            let mut r = good();
            r.ops = cases;
            let d = PhaseDescriptor {
                iterations: cases,
                ..desc()
            };
            if validate_record(0, &d, &r).is_ok() {
                accepted += 1;
            }
        }
        println!("fuzzed {cases} records in {secs} s; {accepted} mutation checks passed");
        assert!(cases > 0);
    }
}
