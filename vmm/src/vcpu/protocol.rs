//! The one validating layer between guest-written data and the VMM's measurements.
//!
//! A phase record is untrusted: the guest may be buggy, hand-built (`--guest`), or deliberately
//! hostile. Everything a record says is checked against the descriptor the VMM sent before any
//! number from it reaches a result; a failure names the field and the value.

use irqbench_abi::{
    self as abi, doorbell, record_status, workload, Counts, FaultRecord, PhaseDescriptor,
    PhaseRecord, RecordHead,
};

use super::exit::PortData;

/// More interrupts or hypercalls than this in one phase is not a measurement, it is garbage.
const MAX_EVENTS_PER_PHASE: u64 = 1 << 40;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("guest protocol violation on vCPU {vcpu}: field `{field}` {problem}")]
pub struct ProtocolViolation {
    pub vcpu: u32,
    pub field: &'static str,
    pub problem: String,
}

/// The violations of vCPU `vcpu`, from a field and what is wrong with it.
fn on_vcpu(vcpu: u32) -> impl Fn(&'static str, String) -> ProtocolViolation {
    move |field, problem| ProtocolViolation {
        vcpu,
        field,
        problem,
    }
}

/// A record that passed every check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValidRecord {
    pub tsc_cycles: u64,
    pub ops: u64,
    pub counts: Counts,
    pub strategy_ops: [u64; abi::strategy::COUNT as usize],
}

/// Which record a check reads: the first part of every field path it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rec {
    Block,
    Phase,
}

impl Rec {
    fn pick(self, block: &'static str, phase: &'static str) -> &'static str {
        match self {
            Rec::Block => block,
            Rec::Phase => phase,
        }
    }
}

/// The bound a count must keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bound {
    /// At most [`MAX_EVENTS_PER_PHASE`]: more is not a measurement, it is garbage.
    Events,
    /// At most the record's operations (one violation per operation at most).
    Ops,
}

/// The plausibility rule of one count, with its field path in each record.
struct CountRule {
    block: &'static str,
    phase: &'static str,
    get: fn(&Counts) -> u64,
    bound: Bound,
}

macro_rules! count_rules {
    ($($field:ident: $bound:ident),+ $(,)?) => {
        [$(CountRule {
            block: concat!("block.counts.", stringify!($field)),
            phase: concat!("record.counts.", stringify!($field)),
            get: |c| c.$field,
            bound: Bound::$bound,
        }),+]
    };
}

/// One plausibility table for the counts of blocks and phase records alike.
const COUNT_RULES: [CountRule; 5] = count_rules!(
    interrupts: Events,
    hypercalls: Events,
    if_violations: Ops,
    lock_acquisitions: Events,
    lock_spins: Events,
);

/// The head's seq, time and operations: returns the TSC cycles it spans.
fn check_head(
    rec: Rec,
    head: &RecordHead,
    seq: u32,
    ops: u64,
) -> Result<u64, (&'static str, String)> {
    if head.seq != seq {
        return Err((
            rec.pick("block.head.seq", "record.head.seq"),
            format!("is {} but the phase sent was {seq}", head.seq),
        ));
    }
    if head.tsc_end < head.tsc_start {
        return Err((
            rec.pick("block.head.tsc_end", "record.head.tsc_end"),
            format!(
                "({}) is before tsc_start ({}): time cannot run backwards",
                head.tsc_end, head.tsc_start
            ),
        ));
    }
    if head.ops != ops {
        return Err((
            rec.pick("block.head.ops", "record.head.ops"),
            format!("is {} but the phase asked for {ops}", head.ops),
        ));
    }
    Ok(head.tsc_end - head.tsc_start)
}

/// Every count against its rule in [`COUNT_RULES`] (`ops`: the record's checked operations).
fn check_counts(rec: Rec, counts: &Counts, ops: u64) -> Result<(), (&'static str, String)> {
    for rule in &COUNT_RULES {
        let value = (rule.get)(counts);
        let problem = match rule.bound {
            Bound::Events if value > MAX_EVENTS_PER_PHASE => {
                format!("is {value}, above the plausible maximum {MAX_EVENTS_PER_PHASE}")
            }
            Bound::Ops if value > ops => format!("({value}) exceeds the operations ({ops})"),
            Bound::Events | Bound::Ops => continue,
        };
        return Err((rec.pick(rule.block, rule.phase), problem));
    }
    Ok(())
}

/// A doorbell write, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Doorbell {
    Booted,
    Begin(u32),
    End(u32),
    Ping,
    /// A block starts; the variant index it announces (checked `< MAX_VARIANTS`).
    Block(u32),
}

/// Decodes a doorbell port write and checks it against the phase the vCPU has open
/// (`open`: the sequence number of the open phase, if any).
pub fn parse_doorbell(
    vcpu: u32,
    data: &PortData,
    open: Option<u32>,
) -> Result<Doorbell, ProtocolViolation> {
    let bad = |problem| on_vcpu(vcpu)("doorbell", problem);
    let Some(marker) = data.word() else {
        return Err(bad(format!(
            "written with {} bytes, expected 4",
            data.len()
        )));
    };
    let seq = doorbell::seq(marker);
    let bell = match doorbell::kind(marker) {
        doorbell::BOOTED => Doorbell::Booted,
        doorbell::BEGIN => Doorbell::Begin(seq),
        doorbell::END => Doorbell::End(seq),
        doorbell::PING => Doorbell::Ping,
        doorbell::BLOCK if (seq as usize) < abi::MAX_VARIANTS => Doorbell::Block(seq),
        doorbell::BLOCK => {
            return Err(bad(format!(
                "BLOCK announces variant {seq}; a round has at most {} variants",
                abi::MAX_VARIANTS
            )))
        }
        other => {
            return Err(bad(format!(
                "kind {other} (marker {marker:#x}) is not defined; valid: {} booted, {} begin, \
                 {} end, {} ping, {} block",
                doorbell::BOOTED,
                doorbell::BEGIN,
                doorbell::END,
                doorbell::PING,
                doorbell::BLOCK
            )))
        }
    };
    match (bell, open) {
        (Doorbell::Begin(s), Some(o)) => {
            Err(bad(format!("BEGIN for phase {s} while phase {o} is open")))
        }
        (Doorbell::End(s), None) => Err(bad(format!("END for phase {s} with no phase open"))),
        (Doorbell::Block(v), None) => Err(bad(format!("BLOCK {v} with no phase open"))),
        (Doorbell::End(s), Some(o)) if s != o => {
            Err(bad(format!("END for phase {s} but the open phase is {o}")))
        }
        _ => Ok(bell),
    }
}

/// Checks what the guest's exception handler reported before it is shown as a fault.
pub fn validate_fault(vcpu: u32, rec: &FaultRecord) -> Result<FaultRecord, ProtocolViolation> {
    let bad = on_vcpu(vcpu);
    if rec.vector >= 32 {
        return Err(bad(
            "fault.vector",
            format!("is {}; exceptions are vectors 0..=31", rec.vector),
        ));
    }
    // A canonical 48-bit address: bits 63..47 all equal.
    let top = rec.rip >> 47;
    if top != 0 && top != (1 << 17) - 1 {
        return Err(bad(
            "fault.rip",
            format!("{:#x} is not a canonical address", rec.rip),
        ));
    }
    Ok(*rec)
}

/// Whether `desc` runs interleaved rounds of blocks (the measured workloads).
pub fn runs_rounds(desc: &PhaseDescriptor) -> bool {
    matches!(
        desc.workload,
        workload::STRATEGY | workload::INSN | workload::LOCK | workload::MIXED
    )
}

/// Operations one block of variant `id` completes.
pub fn block_ops(desc: &PhaseDescriptor, id: u32) -> u64 {
    match desc.workload {
        workload::INSN => desc
            .iterations
            .saturating_mul(u64::from(abi::insn::unroll(id))),
        _ => desc.iterations,
    }
}

/// Operations the guest must report for `desc`.
pub fn expected_ops(desc: &PhaseDescriptor) -> u64 {
    if !runs_rounds(desc) {
        return desc.iterations;
    }
    let count = (desc.variant_count as usize).min(abi::MAX_VARIANTS);
    desc.variants[..count]
        .iter()
        .map(|&id| block_ops(desc, id))
        .fold(0u64, u64::saturating_add)
        .saturating_mul(u64::from(desc.rounds))
}

/// A block record that passed every check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValidBlock {
    pub round: u32,
    /// Index into the descriptor's variants.
    pub variant: usize,
    pub position: u32,
    pub tsc_cycles: u64,
    pub ops: u64,
    /// Loop iterations of the block (the descriptor's; `ops` = loops × the variant's unroll).
    pub loops: u64,
    pub counts: Counts,
}

/// Checks one block record against the descriptor and the variant its BLOCK doorbell announced.
pub fn validate_block(
    vcpu: u32,
    desc: &PhaseDescriptor,
    announced: u32,
    rec: &abi::BlockRecord,
) -> Result<ValidBlock, ProtocolViolation> {
    let bad = on_vcpu(vcpu);
    if rec.variant >= desc.variant_count || rec.variant != announced {
        return Err(bad(
            "block.variant",
            format!(
                "is {} but the BLOCK doorbell announced {announced} of {} variants",
                rec.variant, desc.variant_count
            ),
        ));
    }
    let last = desc.first_round.saturating_add(desc.rounds);
    if rec.round < desc.first_round || rec.round >= last {
        return Err(bad(
            "block.round",
            format!(
                "is {}; this phase runs rounds {}..{last}",
                rec.round, desc.first_round
            ),
        ));
    }
    if rec.position >= desc.variant_count {
        return Err(bad(
            "block.position",
            format!("is {} of {} variants", rec.position, desc.variant_count),
        ));
    }
    let ops = block_ops(desc, desc.variants[rec.variant as usize]);
    let checked = check_head(Rec::Block, &rec.head, desc.seq, ops)
        .and_then(|cycles| check_counts(Rec::Block, &rec.counts, ops).map(|()| cycles));
    let tsc_cycles = checked.map_err(|(field, problem)| bad(field, problem))?;
    Ok(ValidBlock {
        round: rec.round,
        variant: rec.variant as usize,
        position: rec.position,
        tsc_cycles,
        ops,
        loops: desc.iterations,
        counts: rec.counts,
    })
}

/// The counts a workload fixes: lock acquisitions (two per op in a lock phase, else none) and
/// per-strategy ops (they sum to the mixed blocks' ops in a mixed phase, else all zero).
fn check_workload_counts(
    desc: &PhaseDescriptor,
    rec: &PhaseRecord,
) -> Result<(), (&'static str, String)> {
    let acquisitions_want = if desc.workload == workload::LOCK {
        rec.head.ops.saturating_mul(2)
    } else {
        0
    };
    if rec.counts.lock_acquisitions != acquisitions_want {
        return Err((
            "record.counts.lock_acquisitions",
            format!(
                "is {} but this phase takes the lock {acquisitions_want} times",
                rec.counts.lock_acquisitions
            ),
        ));
    }
    if desc.workload == workload::MIXED {
        let sum = rec
            .strategy_ops
            .iter()
            .fold(0u64, |a, b| a.saturating_add(*b));
        // Only the mixed blocks count per strategy; the baseline's blocks do not.
        let count = (desc.variant_count as usize).min(abi::MAX_VARIANTS);
        let mixed_blocks = desc.variants[..count]
            .iter()
            .filter(|&&v| v == abi::VARIANT_MIXED)
            .count() as u64;
        let want = desc
            .iterations
            .saturating_mul(u64::from(desc.rounds))
            .saturating_mul(mixed_blocks);
        if sum != want {
            return Err((
                "record.strategy_ops",
                format!("sum to {sum} but the mixed blocks ran {want} operations"),
            ));
        }
    } else if rec.strategy_ops.iter().any(|c| *c != 0) {
        return Err((
            "record.strategy_ops",
            "are non-zero outside a mixed phase".into(),
        ));
    }
    Ok(())
}

pub fn validate_record(
    vcpu: u32,
    desc: &PhaseDescriptor,
    rec: &PhaseRecord,
) -> Result<ValidRecord, ProtocolViolation> {
    let bad = on_vcpu(vcpu);
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
    let ops = expected_ops(desc);
    let tsc_cycles = check_head(Rec::Phase, &rec.head, desc.seq, ops)
        .and_then(|cycles| check_counts(Rec::Phase, &rec.counts, ops).map(|()| cycles))
        .and_then(|cycles| check_workload_counts(desc, rec).map(|()| cycles))
        .map_err(|(field, problem)| bad(field, problem))?;
    Ok(ValidRecord {
        tsc_cycles,
        ops,
        counts: rec.counts,
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
            rounds: 1,
            variant_count: 1,
            variants: [abi::strategy::NATIVE_POPF; abi::MAX_VARIANTS],
            ..Default::default()
        }
    }

    fn head() -> RecordHead {
        RecordHead {
            seq: 7,
            tsc_start: 1000,
            tsc_end: 5000,
            ops: 100,
            ..Default::default()
        }
    }

    fn good() -> PhaseRecord {
        PhaseRecord {
            head: head(),
            status: record_status::DONE,
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
            ("record.head.seq", Box::new(|r| r.head.seq = 8)),
            ("record.status", Box::new(|r| r.status = 0xDEAD)),
            ("record.head.tsc_end", Box::new(|r| r.head.tsc_end = 1)),
            ("record.head.ops", Box::new(|r| r.head.ops = u64::MAX)),
            (
                "record.counts.interrupts",
                Box::new(|r| r.counts.interrupts = u64::MAX),
            ),
            (
                "record.counts.if_violations",
                Box::new(|r| r.counts.if_violations = 101),
            ),
            (
                "record.counts.lock_acquisitions",
                Box::new(|r| r.counts.lock_acquisitions = 1),
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

    /// Every count has exactly one rule, and blocks and records name it by the same path.
    #[test]
    fn one_count_rule_per_count_for_blocks_and_records_alike() {
        let counts = Counts {
            interrupts: 1,
            hypercalls: 2,
            if_violations: 3,
            lock_acquisitions: 4,
            lock_spins: 5,
        };
        let mut got: Vec<u64> = COUNT_RULES.iter().map(|r| (r.get)(&counts)).collect();
        got.sort_unstable();
        assert_eq!(got, [1, 2, 3, 4, 5]);
        for rule in &COUNT_RULES {
            assert_eq!(
                rule.block.strip_prefix("block."),
                rule.phase.strip_prefix("record.")
            );
        }
        // Lock acquisitions beyond any plausible count: rejected in a block as in a record.
        let huge = MAX_EVENTS_PER_PHASE + 1;
        let mut b = good_block();
        b.counts.lock_acquisitions = huge;
        let err = validate_block(0, &desc(), 0, &b).expect_err("block");
        assert_eq!(err.field, "block.counts.lock_acquisitions");
        let mut r = good();
        r.counts.lock_acquisitions = huge;
        let err = validate_record(0, &desc(), &r).expect_err("record");
        assert_eq!(err.field, "record.counts.lock_acquisitions");
        assert!(err.problem.contains("plausible maximum"), "{err}");
    }

    #[test]
    fn doorbells_are_decoded_and_checked_against_the_open_phase() {
        let ring = |kind, seq| PortData::new(&doorbell::encode(kind, seq).to_le_bytes());
        assert_eq!(
            parse_doorbell(0, &ring(doorbell::BEGIN, 5), None),
            Ok(Doorbell::Begin(5))
        );
        assert_eq!(
            parse_doorbell(0, &ring(doorbell::END, 5), Some(5)),
            Ok(Doorbell::End(5))
        );
        for (data, open, words) in [
            (ring(doorbell::BEGIN, 6), Some(5), "while phase 5 is open"),
            (ring(doorbell::END, 6), Some(5), "open phase is 5"),
            (ring(doorbell::END, 6), None, "no phase open"),
            (ring(99, 0), None, "kind 99"),
            (PortData::new(&[1, 2]), None, "2 bytes"),
            (PortData::new(&[0; 8]), None, "8 bytes"),
        ] {
            let err = parse_doorbell(3, &data, open).expect_err(words).to_string();
            assert!(err.contains(words) && err.contains("vCPU 3"), "{err}");
        }
    }

    #[test]
    fn fault_records_are_checked() {
        let ok = FaultRecord {
            vector: 6,
            rip: 0x10_0000,
            ..Default::default()
        };
        assert!(validate_fault(0, &ok).is_ok());
        let err = validate_fault(0, &FaultRecord { vector: 200, ..ok }).expect_err("vector");
        assert_eq!(err.field, "fault.vector");
        let err = validate_fault(0, &FaultRecord { rip: 1 << 60, ..ok }).expect_err("rip");
        assert_eq!(err.field, "fault.rip");
    }

    fn good_block() -> abi::BlockRecord {
        abi::BlockRecord {
            head: head(),
            ..Default::default()
        }
    }

    /// A valid phase record with field `field` (mod 9) set to `value`, and the field the
    /// validator must name if that makes the record invalid (`None`: still valid).
    fn corrupt_record(field: u8, value: u64) -> (PhaseRecord, Option<&'static str>) {
        let mut r = good();
        let must = |f: &'static str, bad: bool| bad.then_some(f);
        let named = match field % 9 {
            0 => {
                r.head.seq = value as u32;
                must("record.head.seq", r.head.seq != 7)
            }
            1 => {
                r.status = value as u32;
                must("record.status", r.status != record_status::DONE)
            }
            2 => {
                r.head.tsc_end = value;
                must("record.head.tsc_end", value < r.head.tsc_start)
            }
            3 => {
                r.head.ops = value;
                must("record.head.ops", value != 100)
            }
            4 => {
                r.counts.interrupts = value;
                must("record.counts.interrupts", value > MAX_EVENTS_PER_PHASE)
            }
            5 => {
                r.counts.hypercalls = value;
                must("record.counts.hypercalls", value > MAX_EVENTS_PER_PHASE)
            }
            6 => {
                r.counts.if_violations = value;
                must("record.counts.if_violations", value > 100)
            }
            7 => {
                r.counts.lock_acquisitions = value;
                must("record.counts.lock_acquisitions", value != 0)
            }
            _ => {
                r.strategy_ops[(value % u64::from(abi::strategy::COUNT)) as usize] = value;
                must("record.strategy_ops", value != 0)
            }
        };
        (r, named)
    }

    /// The same for a block record (announced variant 0 of a 1-variant, 1-round phase).
    fn corrupt_block(field: u8, value: u64) -> (abi::BlockRecord, Option<&'static str>) {
        let mut b = good_block();
        let must = |f: &'static str, bad: bool| bad.then_some(f);
        let v32 = value as u32;
        let named = match field % 9 {
            0 => {
                b.head.seq = v32;
                must("block.head.seq", v32 != 7)
            }
            1 => {
                b.variant = v32;
                must("block.variant", v32 != 0)
            }
            2 => {
                b.round = v32;
                must("block.round", v32 != 0)
            }
            3 => {
                b.position = v32;
                must("block.position", v32 != 0)
            }
            4 => {
                b.head.tsc_end = value;
                must("block.head.tsc_end", value < b.head.tsc_start)
            }
            5 => {
                b.head.ops = value;
                must("block.head.ops", value != 100)
            }
            6 => {
                b.counts.interrupts = value;
                must("block.counts.interrupts", value > MAX_EVENTS_PER_PHASE)
            }
            7 => {
                b.counts.lock_spins = value;
                must("block.counts.lock_spins", value > MAX_EVENTS_PER_PHASE)
            }
            _ => {
                b.counts.if_violations = value;
                must("block.counts.if_violations", value > 100)
            }
        };
        (b, named)
    }

    /// Values that sit on and around every boundary the validators know.
    fn edge_value() -> impl Strategy<Value = u64> {
        prop_oneof![
            Just(0u64),
            Just(7),
            Just(99),
            Just(100),
            Just(101),
            Just(999),
            Just(MAX_EVENTS_PER_PHASE),
            Just(MAX_EVENTS_PER_PHASE + 1),
            Just(u64::from(u32::MAX)),
            Just(u64::MAX),
            any::<u64>(),
        ]
    }

    /// One corruption of each kind: rejected, by the field's name, or accepted when the value
    /// is still valid. Returns whether it was rejected.
    fn check_corruption(field: u8, value: u64) -> Result<bool, TestCaseError> {
        let (r, named) = corrupt_record(field, value);
        match (validate_record(0, &desc(), &r), named) {
            (Ok(_), None) => {}
            (Err(e), Some(f)) => prop_assert_eq!(e.field, f),
            (got, want) => prop_assert!(
                false,
                "record field {field} = {value}: {got:?}, want {want:?}"
            ),
        }
        let (b, named) = corrupt_block(field, value);
        match (validate_block(0, &desc(), 0, &b), named) {
            (Ok(_), None) => Ok(false),
            (Err(e), Some(f)) => {
                prop_assert_eq!(e.field, f);
                Ok(true)
            }
            (got, want) => {
                prop_assert!(
                    false,
                    "block field {field} = {value}: {got:?}, want {want:?}"
                );
                Ok(false)
            }
        }
    }

    #[test]
    fn each_block_inconsistency_names_its_field() {
        assert!(validate_block(0, &desc(), 0, &good_block()).is_ok());
        for field in 0..9 {
            let value = [8, 3, 1, 1, 1, 99, u64::MAX, u64::MAX, 101][field as usize];
            let (b, named) = corrupt_block(field, value);
            let err = validate_block(5, &desc(), 0, &b).expect_err("corrupt block");
            assert_eq!(Some(err.field), named);
            assert!(err.to_string().contains("vCPU 5"), "{err}");
        }
        // A block that is valid in itself but not the one the doorbell announced.
        let err = validate_block(
            0,
            &PhaseDescriptor {
                variant_count: 2,
                ..desc()
            },
            1,
            &good_block(),
        )
        .expect_err("announced 1");
        assert_eq!(err.field, "block.variant");
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
            any::<[u64; abi::strategy::COUNT as usize]>(),
        )
            .prop_map(|(seq, status, a, b, ops, i, h, v, so)| PhaseRecord {
                head: RecordHead {
                    seq,
                    _pad: 0,
                    tsc_start: a,
                    tsc_end: b,
                    ops,
                },
                counts: Counts {
                    interrupts: i,
                    hypercalls: h,
                    if_violations: v,
                    ..Counts::default()
                },
                status,
                _pad: 0,
                strategy_ops: so,
            })
    }

    proptest! {
        /// Random doorbell writes and fault records never panic.
        #[test]
        fn random_doorbells_and_faults_never_panic(
            data in proptest::collection::vec(any::<u8>(), 0..8),
            open in proptest::option::of(any::<u32>()),
            vector in any::<u64>(),
            rip in any::<u64>(),
        ) {
            let _ = parse_doorbell(0, &PortData::new(&data), open);
            let _ = validate_fault(0, &FaultRecord { vector, rip, ..Default::default() });
        }

        /// Random block records never panic; whatever passes matches its descriptor.
        #[test]
        fn random_block_records_never_panic(
            seq in prop_oneof![Just(7u32), any::<u32>()],
            round in 0u32..4,
            variant in 0u32..20,
            announced in 0u32..20,
            position in 0u32..20,
            a in any::<u64>(),
            b in any::<u64>(),
            ops in prop_oneof![Just(100u64), any::<u64>()],
            count in 0u32..17,
            rounds in 0u32..4,
            events in any::<[u64; 4]>(),
        ) {
            let d = PhaseDescriptor { variant_count: count, rounds, ..desc() };
            let rec = abi::BlockRecord {
                head: RecordHead { seq, _pad: 0, tsc_start: a, tsc_end: b, ops },
                counts: Counts {
                    interrupts: events[0], hypercalls: events[1], if_violations: events[2],
                    lock_acquisitions: events[3], lock_spins: 0,
                },
                round, variant, position, _pad: 0,
            };
            if let Ok(v) = validate_block(0, &d, announced, &rec) {
                prop_assert!(b >= a && v.variant < count as usize && v.variant as u32 == announced);
                prop_assert!(round < rounds && v.ops == 100 && v.counts.if_violations <= v.ops);
            }
        }

        /// Adversarial: one field of a valid record or block set to a boundary or random value
        /// is rejected by that field's name exactly when the value breaks its rule.
        #[test]
        fn single_field_corruptions_are_rejected_by_name(field in 0u8..9, value in edge_value()) {
            check_corruption(field, value)?;
        }

        /// Random and adversarial records never panic; whatever passes is self-consistent.
        #[test]
        fn random_records_never_panic(rec in any_record(), workload in 0u32..12, iters in any::<u64>()) {
            let d = PhaseDescriptor { seq: rec.head.seq, workload, iterations: iters, ..desc() };
            if let Ok(v) = validate_record(0, &d, &rec) {
                prop_assert!(rec.head.tsc_end >= rec.head.tsc_start);
                prop_assert_eq!(v.ops, expected_ops(&d));
                prop_assert!(v.counts.if_violations <= v.ops);
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
        let mut rejected = 0u64;
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
                            seq: rec.head.seq,
                            workload,
                            iterations: iters,
                            ..desc()
                        };
                        if let Ok(v) = validate_record(0, &d, &rec) {
                            prop_assert!(rec.head.tsc_end >= rec.head.tsc_start);
                            prop_assert_eq!(v.ops, expected_ops(&d));
                        }
                        Ok(())
                    },
                )
                .expect("no failure");
            cases += 10_000;
            runner
                .run(
                    &(
                        proptest::collection::vec(any::<u8>(), 0..8),
                        proptest::option::of(any::<u32>()),
                        any::<u64>(),
                        any::<u64>(),
                    ),
                    |(data, open, vector, rip)| {
                        let _ = parse_doorbell(0, &PortData::new(&data), open);
                        let fault = FaultRecord {
                            vector,
                            rip,
                            ..Default::default()
                        };
                        if let Ok(f) = validate_fault(0, &fault) {
                            prop_assert!(f.vector < 32);
                        }
                        Ok(())
                    },
                )
                .expect("no failure");
            cases += 10_000;
            // Adversarial: single-field corruptions of a valid record and block, each rejected
            // by that field's name exactly when it breaks the field's rule.
            runner
                .run(&(0u8..9, edge_value()), |(field, value)| {
                    check_corruption(field, value).map(|_| ())
                })
                .expect("no failure");
            cases += 10_000;
            for field in 0..9 {
                if check_corruption(field, cases).expect("consistent verdict") {
                    rejected += 1;
                }
            }
        }
        println!(
            "fuzzed {cases} records in {secs} s; {rejected} counter-valued corruptions rejected"
        );
        // Every round corrupts seq, variant, round, position and ops with a value (the case
        // count) that no valid block carries.
        assert!(rejected >= 5 * (cases / 30_000));
    }
}
