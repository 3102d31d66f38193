//! The irqbench guest kernel.
//!
//! Boots in 64-bit mode (the VMM set up paging, GDT and registers), installs an IDT, then asks the
//! VMM for phases over the command port and runs each between two doorbells. The measured code is
//! in `ops.S`; this file is the glue. Constraints of the hosts we run on (docs/ARCHITECTURE.md, "Host
//! flavours"): no SSE
//! anywhere (CPL0 code is emulated and SSE is not), so no `core::fmt`, no floats, and memory is
//! read and written field by field with volatile accesses (a struct copy may become `movups`).
#![no_std]
#![no_main]

use core::arch::{asm, global_asm};
use core::ptr::{addr_of, addr_of_mut};

use irqbench_abi::{self as abi, doorbell, offset, port, record_status, workload, VcpuSlot};

global_asm!(
    include_str!(concat!(env!("OUT_DIR"), "/tables.S")),
    include_str!("ops.S"),
    FAULT = const offset::SLOT_FAULT,
    INTERRUPTS = const offset::SLOT_INTERRUPTS,
    VIF_MASK = const offset::SLOT_VIF_MASK,
    VIF_PENDING = const offset::SLOT_VIF_PENDING,
    HYPERCALLS = const offset::SLOT_HYPERCALLS,
    SCRATCH = const offset::SLOT_SCRATCH,
    LOCK_ACQUISITIONS = const offset::SLOT_LOCK_ACQUISITIONS,
    LOCK_SPINS = const offset::SLOT_LOCK_SPINS,
    SHARED_LOCK = const abi::MAILBOX_GPA + offset::SHARED_LOCK as u64,
    SHARED_LOCK_COUNTER = const abi::MAILBOX_GPA + offset::SHARED_LOCK_COUNTER as u64,
    SHARED_READY_LIST = const abi::MAILBOX_GPA + offset::SHARED_READY_LIST as u64,
    PORT_FAULT = const port::FAULT,
    PORT_HYPERCALL = const port::HYPERCALL,
    PORT_EXIT_PROBE = const port::EXIT_PROBE,
    LAPIC_EOI = const abi::LAPIC_GPA + 0xB0,
    RAISE_TSC = const offset::SLOT_RAISE_TSC,
    BLOCK_TAG = const offset::SLOT_BLOCK_TAG,
    LATENCY_COUNT = const offset::SLOT_LATENCY_COUNT,
    LATENCY_LOG = const offset::SLOT_LATENCY_LOG,
    LATENCY_RIP = const offset::SLOT_LATENCY_RIP,
    LATENCY_CYCLES_MAX = const abi::latency::CYCLES_MAX,
    LATENCY_UNTIMED = const abi::latency::UNTIMED,
    LATENCY_TAG_SHIFT = const abi::latency::TAG_SHIFT,
    LATENCY_LOG_MASK = const abi::latency::LOG_LEN - 1,
    MMIO_PROBE = const abi::MMIO_PROBE_GPA,
    HC_PORT = const abi::hypercall::PORT,
    HC_VAPIC_POLL = const abi::hypercall::VAPIC_POLL,
    KVM_HC_VAPIC_POLL_IRQ = const abi::hypercall::KVM_HC_VAPIC_POLL_IRQ,
    KVM_HC_MAP_GPA_RANGE = const abi::hypercall::KVM_HC_MAP_GPA_RANGE,
    HC_INSN_VMMCALL = const abi::hypercall_insn::VMMCALL,
    options(att_syntax)
);

/// An operation entry point from `ops.S` (custom convention, see there).
type OpFn = unsafe extern "C" fn();
/// A strategy's measured loop (ops.S, "The measured loops"): (iterations, body_ops,
/// nesting_per_65536) → IF violations.
type LoopFn = unsafe extern "C" fn(u64, u32, u32) -> u64;

extern "C" {
    static irqbench_ops: [OpFn; abi::strategy::COUNT as usize];
    static irqbench_lockops: [OpFn; abi::strategy::COUNT as usize];
    static irqbench_insns: [OpFn; abi::insn::COUNT as usize];
    static irqbench_loops_f: [LoopFn; abi::strategy::COUNT as usize];
    static irqbench_loops_fb: [LoopFn; abi::strategy::COUNT as usize];
    static irqbench_loops_n: [LoopFn; abi::strategy::COUNT as usize];
    static irqbench_loops_nb: [LoopFn; abi::strategy::COUNT as usize];
    static mut irqbench_hypercall_transport: u32;
    static mut irqbench_hypercall_insn: u32;
    fn irqbench_lock_loop(op: OpFn, iterations: u64, body: u32);
    fn irqbench_op_once(op: OpFn, body: u32);
    fn irqbench_insn_loop(f: OpFn, iterations: u64);
    fn irqbench_irq_timer();
    fn irqbench_irq_inject();
    fn irqbench_irq_msi();
    fn irqbench_irq_ipi();
    fn irqbench_irq_spurious();
    /// The 32 exception stubs (their sizes differ: some push an error code).
    static irqbench_exc_table: [u64; 32];
}

/// 256 gates of 16 bytes.
static mut IDT: [u64; 512] = [0; 512];

#[no_mangle]
extern "C" fn guest_main(index: u32, slot: *mut VcpuSlot) -> ! {
    install_idt();
    // SAFETY: the VMM wrote the slot's header before starting us; these are plain reads.
    let (magic, version) = unsafe {
        (
            addr_of!((*slot).magic).read_volatile(),
            addr_of!((*slot).version).read_volatile(),
        )
    };
    if magic != abi::MAILBOX_MAGIC || version != abi::ABI_VERSION {
        console(b"irqbench guest: mailbox magic/version mismatch\n");
        halt_forever();
    }
    if index == 0 {
        console(b"irqbench guest: booted\n");
    }
    // SAFETY: interrupts may arrive from here on; the IDT is loaded.
    unsafe { asm!("sti", options(nomem, nostack)) };
    ring(doorbell::BOOTED, 0);
    loop {
        match inl(port::COMMAND) {
            c if c == abi::Command::RunPhase as u32 => run_phase(slot),
            _ => halt_forever(),
        }
    }
}

fn install_idt() {
    // Indexing through a raw pointer with volatile reads: the table lives in ops.S.
    #[allow(clippy::needless_range_loop)]
    for vector in 0..32 {
        // SAFETY: a static table of 32 addresses in ops.S.
        let stub = unsafe { addr_of!(irqbench_exc_table[vector]).read_volatile() };
        set_gate(vector, stub);
    }
    set_gate(
        abi::irq::TIMER_VECTOR as usize,
        irqbench_irq_timer as *const () as u64,
    );
    set_gate(
        abi::irq::INJECT_VECTOR as usize,
        irqbench_irq_inject as *const () as u64,
    );
    set_gate(
        abi::irq::MSI_VECTOR as usize,
        irqbench_irq_msi as *const () as u64,
    );
    set_gate(
        abi::irq::IPI_VECTOR as usize,
        irqbench_irq_ipi as *const () as u64,
    );
    set_gate(
        abi::irq::SPURIOUS_VECTOR as usize,
        irqbench_irq_spurious as *const () as u64,
    );
    let base = addr_of!(IDT) as u64;
    let limit: u16 = 256 * 16 - 1;
    let mut pointer = [0u16; 5];
    pointer[0] = limit;
    pointer[1] = base as u16;
    pointer[2] = (base >> 16) as u16;
    pointer[3] = (base >> 32) as u16;
    pointer[4] = (base >> 48) as u16;
    // SAFETY: `pointer` is a valid 10-byte IDTR image describing the static IDT.
    unsafe { asm!("lidt [{}]", in(reg) pointer.as_ptr(), options(nostack, readonly)) };
}

/// A 64-bit interrupt gate (type 0xE, DPL 0, present) through the code selector. Every vCPU
/// writes the same values, so concurrent boots are harmless.
fn set_gate(vector: usize, handler: u64) {
    let low = (handler & 0xFFFF)
        | (u64::from(abi::SEL_CODE64) << 16)
        | (0x8E_u64 << 40)
        | ((handler >> 16) & 0xFFFF) << 48;
    let high = handler >> 32;
    // SAFETY: vector < 256, so both words are inside the static IDT.
    unsafe {
        let idt = addr_of_mut!(IDT) as *mut u64;
        idt.add(vector * 2).write_volatile(low);
        idt.add(vector * 2 + 1).write_volatile(high);
    }
}

macro_rules! rd {
    ($slot:expr, $($field:tt)+) => {
        // SAFETY: the slot is this vCPU's page of the mailbox, mapped for its whole life.
        unsafe { addr_of!((*$slot).$($field)+).read_volatile() }
    };
}
macro_rules! wr {
    ($slot:expr, $val:expr, $($field:tt)+) => {
        {
            let value = $val;
            // SAFETY: as for `rd!`; only this vCPU writes its slot's guest-owned fields.
            unsafe { addr_of_mut!((*$slot).$($field)+).write_volatile(value) }
        }
    };
}

mod ipi;

/// Everything a block of a measured workload needs, read once per dispatch.
#[derive(Clone, Copy)]
struct Rounds {
    seq: u32,
    kind: u32,
    iterations: u64,
    nesting: u32,
    body: u32,
    seed: u64,
    rounds: u32,
    first_round: u32,
    count: usize,
    barrier: bool,
    vcpus: u64,
    variants: [u32; abi::MAX_VARIANTS],
}

/// A record's head and counts (`record` or `block`), written field by field.
macro_rules! write_measured {
    ($slot:expr, $rec:ident, $head:expr, $counts:expr) => {{
        let (h, c): (abi::RecordHead, abi::Counts) = ($head, $counts);
        wr!($slot, h.seq, $rec.head.seq);
        wr!($slot, h.tsc_start, $rec.head.tsc_start);
        wr!($slot, h.tsc_end, $rec.head.tsc_end);
        wr!($slot, h.ops, $rec.head.ops);
        wr!($slot, c.interrupts, $rec.counts.interrupts);
        wr!($slot, c.hypercalls, $rec.counts.hypercalls);
        wr!($slot, c.if_violations, $rec.counts.if_violations);
        wr!($slot, c.lock_acquisitions, $rec.counts.lock_acquisitions);
        wr!($slot, c.lock_spins, $rec.counts.lock_spins);
    }};
}

/// The slot's since-boot counters; a record's counts are their differences across it (IF
/// violations are counted by the workload, not the slot).
fn counters(slot: *mut VcpuSlot) -> abi::Counts {
    abi::Counts {
        interrupts: rd!(slot, interrupts),
        hypercalls: rd!(slot, hypercalls),
        if_violations: 0,
        lock_acquisitions: rd!(slot, lock_acquisitions),
        lock_spins: rd!(slot, lock_spins),
    }
}

/// What a record says: its head, and the counters' differences plus the workload's IF violations.
fn measured(
    seq: u32,
    (t0, t1, ops): (u64, u64, u64),
    before: &abi::Counts,
    after: &abi::Counts,
    if_violations: u64,
) -> (abi::RecordHead, abi::Counts) {
    let head = abi::RecordHead {
        seq,
        _pad: 0,
        tsc_start: t0,
        tsc_end: t1,
        ops,
    };
    let counts = abi::Counts {
        if_violations,
        ..after.since(before)
    };
    (head, counts)
}

fn run_phase(slot: *mut VcpuSlot) {
    let seq = rd!(slot, phase.seq);
    let kind = rd!(slot, phase.workload);
    let irq = rd!(slot, phase.irq_source);
    let transport = rd!(slot, phase.hypercall_transport);
    let insn = rd!(slot, phase.hypercall_insn);
    // SAFETY: plain stores to guest-private statics read by the hypercall stub.
    unsafe {
        addr_of_mut!(irqbench_hypercall_transport).write_volatile(transport);
        addr_of_mut!(irqbench_hypercall_insn).write_volatile(insn);
    }

    wr!(slot, seq, record.head.seq);
    wr!(slot, record_status::EMPTY, record.status);
    for i in 0..abi::strategy::COUNT as usize {
        wr!(slot, 0, record.strategy_ops[i]);
    }
    let before = counters(slot);
    if irq == abi::irq::LAPIC_TIMER {
        lapic_timer_start(rd!(slot, phase.timer_initial_count));
    }
    if irq == abi::irq::MSI || (irq == abi::irq::IPI && kind != workload::IPI_SEND) {
        // A software-disabled LAPIC drops fixed interrupts (KVM's __apic_accept_irq).
        lapic_enable();
    }
    ring(doorbell::BEGIN, seq);
    let t0 = tsc();
    let (ops, violations) = match kind {
        workload::STRATEGY | workload::INSN | workload::LOCK | workload::MIXED => {
            match read_rounds(slot, seq, kind) {
                Some(r) => run_rounds(slot, &r),
                None => {
                    wr!(slot, record_status::BAD_DESCRIPTOR, record.status);
                    (0, 0)
                }
            }
        }
        _ => (run_diagnostic(slot, kind), 0),
    };
    let t1 = tsc();
    if irq == abi::irq::LAPIC_TIMER {
        lapic_timer_stop();
    }
    let after = counters(slot);
    let (head, counts) = measured(seq, (t0, t1, ops), &before, &after, violations);
    write_measured!(slot, record, head, counts);
    if kind == workload::GARBAGE_RECORD {
        // Deliberately inconsistent: a record for another phase, time running backwards.
        wr!(slot, seq ^ 0x5A5A, record.head.seq);
        wr!(slot, 0xDEAD, record.status);
        wr!(slot, t0.wrapping_sub(1_000_000), record.head.tsc_end);
        wr!(slot, u64::MAX, record.head.ops);
    } else if rd!(slot, record.status) == record_status::EMPTY {
        wr!(slot, record_status::DONE, record.status);
    }
    ring(doorbell::END, seq);
}

/// The descriptor's round parameters; `None` when a variant id is not in the workload's table.
fn read_rounds(slot: *mut VcpuSlot, seq: u32, kind: u32) -> Option<Rounds> {
    let count = rd!(slot, phase.variant_count) as usize;
    if count == 0 || count > abi::MAX_VARIANTS {
        return None;
    }
    let mut variants = [0u32; abi::MAX_VARIANTS];
    for (i, v) in variants.iter_mut().enumerate().take(count) {
        *v = rd!(slot, phase.variants[i]);
        let known = match kind {
            workload::INSN => *v < abi::insn::COUNT,
            workload::MIXED => *v < abi::strategy::COUNT || *v == abi::VARIANT_MIXED,
            _ => *v < abi::strategy::COUNT,
        };
        if !known {
            return None;
        }
    }
    Some(Rounds {
        seq,
        kind,
        iterations: rd!(slot, phase.iterations),
        nesting: rd!(slot, phase.nesting_per_65536),
        body: rd!(slot, phase.body_ops),
        seed: rd!(slot, phase.seed),
        rounds: rd!(slot, phase.rounds),
        first_round: rd!(slot, phase.first_round),
        count,
        barrier: rd!(slot, phase.barrier) != 0,
        vcpus: u64::from(rd!(slot, vcpu_count)),
        variants,
    })
}

/// The shuffle of round r is a function of the seed and r alone, so every vCPU of a phase draws
/// the same order.
fn mix(z: u64) -> u64 {
    abi::SplitMix64::mix(z)
}

/// Runs every round; returns (operations, IF violations) over all blocks.
fn run_rounds(slot: *mut VcpuSlot, r: &Rounds) -> (u64, u64) {
    let mut ops_total = 0u64;
    let mut violations_total = 0u64;
    let mut block_no = 0u64;
    for round in r.first_round..r.first_round.wrapping_add(r.rounds) {
        // Fisher–Yates with a multiply-high draw (no division: it stays cheap when emulated).
        let mut order = [0u32; abi::MAX_VARIANTS];
        for (i, o) in order.iter_mut().enumerate() {
            *o = i as u32;
        }
        let mut state = mix(r.seed ^ (u64::from(round) << 32));
        let mut i = r.count;
        while i > 1 {
            state = mix(state);
            let j = (((state >> 32) * i as u64) >> 32) as usize;
            i -= 1;
            // Both indices are provably in bounds, so no bounds-check panic (and with it
            // core::fmt's SSE code) is linked in.
            if i < order.len() {
                order.swap(i, j.min(i));
            }
        }
        for (position, &index) in order.iter().enumerate().take(r.count) {
            if r.barrier {
                block_no += 1;
                barrier_wait(r.vcpus * block_no);
            }
            let Some(&id) = r.variants.get(index as usize) else {
                continue;
            };
            ring(doorbell::BLOCK, index);
            let before = counters(slot);
            wr!(slot, u64::from(index) + 1, block_tag);
            let (t0, t1, ops, violations) = run_block(slot, r, id);
            wr!(slot, 0, block_tag);
            let after = counters(slot);
            let (head, counts) = measured(r.seq, (t0, t1, ops), &before, &after, violations);
            write_measured!(slot, block, head, counts);
            wr!(slot, round, block.round);
            wr!(slot, index, block.variant);
            wr!(slot, position as u32, block.position);
            ops_total += ops;
            violations_total += violations;
        }
    }
    (ops_total, violations_total)
}

/// Every vCPU adds one and waits until all have: the block starts on all of them together.
fn barrier_wait(target: u64) {
    let counter = (abi::MAILBOX_GPA + offset::SHARED_BARRIER as u64) as *mut u64;
    // SAFETY: the shared page is identity-mapped for the guest's whole life; `lock xadd` and
    // plain loads of an aligned u64 are atomic on x86.
    unsafe {
        asm!("lock xadd qword ptr [{p}], {one}", p = in(reg) counter, one = inout(reg) 1u64 => _,
             options(nostack));
        while counter.read_volatile() < target {
            core::hint::spin_loop();
        }
    }
}

/// What one block runs, resolved from the tables before its timed window opens: on an
/// emulating host every instruction between the two TSC reads is part of every block's time
/// (the `empty` baseline's included) and of its noise.
#[derive(Clone, Copy)]
enum Block {
    /// A strategy's measured loop (ops.S, "The measured loops").
    Loop(LoopFn),
    Insn(OpFn),
    Lock(OpFn),
    Mixed,
    /// An id outside its table (the descriptor was checked; kept for `get`).
    Nothing,
}

impl Block {
    fn of(r: &Rounds, id: u32) -> Block {
        // SAFETY: the tables are immutable statics in ops.S.
        let (loops, lock_table, insn_table) = unsafe {
            (
                match (r.nesting != 0, r.body != 0) {
                    (false, false) => &*addr_of!(irqbench_loops_f),
                    (false, true) => &*addr_of!(irqbench_loops_fb),
                    (true, false) => &*addr_of!(irqbench_loops_n),
                    (true, true) => &*addr_of!(irqbench_loops_nb),
                },
                &*addr_of!(irqbench_lockops),
                &*addr_of!(irqbench_insns),
            )
        };
        // `get` rather than indexing: a bounds-check panic would pull core::fmt (SSE) into the
        // image.
        let found = match r.kind {
            workload::INSN => insn_table.get(id as usize).map(|op| Block::Insn(*op)),
            workload::LOCK => lock_table.get(id as usize).map(|op| Block::Lock(*op)),
            _ if id == abi::VARIANT_MIXED => Some(Block::Mixed),
            _ => loops.get(id as usize).map(|run| Block::Loop(*run)),
        };
        found.unwrap_or(Block::Nothing)
    }
}

/// One block: `iterations` operations of variant `id`, timed. Returns (t0, t1, operations, IF
/// violations).
fn run_block(slot: *mut VcpuSlot, r: &Rounds, id: u32) -> (u64, u64, u64, u64) {
    let n = r.iterations;
    let block = Block::of(r, id);
    let (t0, t1, ops, violations) = match block {
        Block::Loop(run) => {
            let t0 = tsc();
            // SAFETY: a loop from the table; it preserves the callee-saved registers and leaves
            // IF as it found it (set).
            let violations = unsafe { run(n, r.body, r.nesting) };
            (t0, tsc(), n, violations)
        }
        Block::Insn(op) => {
            let t0 = tsc();
            // SAFETY: an op from the table; the loop re-enables interrupts before returning.
            unsafe { irqbench_insn_loop(op, n) };
            (t0, tsc(), n * u64::from(abi::insn::unroll(id)), 0)
        }
        Block::Lock(op) => {
            let t0 = tsc();
            // SAFETY: an op from the table; it keeps the callee-saved registers.
            unsafe { irqbench_lock_loop(op, n, r.body) };
            (t0, tsc(), n, 0)
        }
        Block::Mixed => {
            let t0 = tsc();
            let ops = run_mixed(slot, r);
            (t0, tsc(), ops, 0)
        }
        Block::Nothing => {
            let t0 = tsc();
            (t0, tsc(), 0, 0)
        }
    };
    if matches!(block, Block::Loop(_)) && abi::strategy::is_vif(id) {
        wr!(slot, 0, vif_mask);
    }
    (t0, t1, ops, violations)
}

/// Strategies interleaved by weight with a deterministic stream; counts per strategy go to the
/// phase record.
fn run_mixed(slot: *mut VcpuSlot, r: &Rounds) -> u64 {
    // SAFETY: an immutable static in ops.S.
    let ops_table = unsafe { &*addr_of!(irqbench_ops) };
    let mut weights = [0u32; abi::strategy::COUNT as usize];
    let mut total = 0u32;
    for (i, w) in weights.iter_mut().enumerate() {
        *w = u32::from(rd!(slot, phase.weights[i]));
        total += *w;
    }
    if total == 0 {
        return 0;
    }
    let mut state = r.seed | 1;
    let mut counts = [0u64; abi::strategy::COUNT as usize];
    for _ in 0..r.iterations {
        // xorshift64: deterministic for a seed, no division by a non-constant.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut pick = ((state >> 32) * u64::from(total)) >> 32;
        let mut chosen = 0;
        for (i, w) in weights.iter().enumerate() {
            if pick < u64::from(*w) {
                chosen = i;
                break;
            }
            pick -= u64::from(*w);
        }
        if let (Some(op), Some(count)) = (ops_table.get(chosen), counts.get_mut(chosen)) {
            // SAFETY: an op from the table; it keeps the callee-saved registers.
            unsafe { irqbench_op_once(*op, r.body) };
            *count += 1;
        }
    }
    for (i, c) in counts.iter().enumerate() {
        wr!(
            slot,
            rd!(slot, record.strategy_ops[i]) + *c,
            record.strategy_ops[i]
        );
    }
    r.iterations
}

/// The test and diagnostic workloads; returns the operations done.
fn run_diagnostic(slot: *mut VcpuSlot, kind: u32) -> u64 {
    let iterations = rd!(slot, phase.iterations);
    match kind {
        workload::DOORBELLS => ping_loop(iterations),
        workload::FAULT_UD2 => {
            // SAFETY: deliberately raises #UD; the handler reports it and never returns.
            unsafe { asm!("ud2", options(nomem, nostack)) };
        }
        workload::SPIN_FOREVER => loop {
            core::hint::spin_loop();
        },
        workload::HALT_FOREVER => {
            // SAFETY: deliberately stops this vCPU with nothing able to wake it.
            unsafe { asm!("cli", "2:", "hlt", "jmp 2b", options(nomem, nostack)) };
        }
        workload::IDLE => {
            // Time-based: the same descriptor idles equally long where guest code is emulated
            // (~1 µs per instruction) and where it runs natively.
            let deadline = tsc().saturating_add(rd!(slot, phase.idle_tsc_cycles));
            while tsc() < deadline {
                core::hint::spin_loop();
            }
        }
        workload::GARBAGE_RECORD => {}
        workload::LATENCY_PROBE => latency_probe(slot, iterations, rd!(slot, phase.body_ops)),
        workload::IPI_SEND => return ipi::send(slot),
        _ => {
            wr!(slot, record_status::BAD_DESCRIPTOR, record.status);
        }
    }
    iterations
}

/// A TSC read ordered against the code around it: `lfence` keeps `rdtsc` from running early
/// or late relative to the measured loop (Intel SDM: "rdtsc is not serializing").
#[inline(always)]
fn tsc() -> u64 {
    let lo: u32;
    let hi: u32;
    // SAFETY: rdtsc/lfence have no memory effects.
    unsafe {
        asm!("lfence", "rdtsc", "lfence", out("eax") lo, out("edx") hi, options(nomem, nostack))
    };
    (u64::from(hi) << 32) | u64::from(lo)
}

/// The latency's known answer (`workload::LATENCY_PROBE`): each self-IPI is raised with IF
/// clear and waits for `section` iterations of `dec; jnz` before `sti; hlt` lets it in.
fn latency_probe(slot: *mut VcpuSlot, iterations: u64, section: u32) {
    // Fixed delivery, edge, destination shorthand "self" (Intel SDM, ICR bits 18-19 = 01).
    let self_ipi = (1 << 18) | u32::from(abi::irq::MSI_VECTOR);
    wr!(slot, 1, block_tag);
    for _ in 0..iterations {
        // SAFETY: clears IF; the `sti` below sets it again.
        unsafe { asm!("cli", options(nomem, nostack)) };
        wr!(slot, tsc().max(1), raise_tsc);
        lapic_write(0x300, self_ipi);
        // SAFETY: a register-only countdown, then `sti; hlt`: the pending IPI ends the `hlt`
        // (it is taken after `sti`'s one-instruction shadow).
        unsafe {
            asm!(
                "test {n:e}, {n:e}",
                "jz 3f",
                "2:",
                "dec {n:e}",
                "jnz 2b",
                "3:",
                "sti",
                "hlt",
                n = inout(reg) section => _,
                options(nomem, nostack),
            )
        };
    }
    wr!(slot, 0, block_tag);
}

fn lapic_write(reg: u64, value: u32) {
    // SAFETY: the LAPIC page is identity-mapped; the in-kernel irqchip emulates the access.
    unsafe { ((abi::LAPIC_GPA + reg) as *mut u32).write_volatile(value) }
}

fn lapic_enable() {
    lapic_write(0xF0, 0x100 | u32::from(abi::irq::SPURIOUS_VECTOR)); // SVR: software enable
}

fn lapic_timer_start(initial_count: u32) {
    lapic_enable();
    lapic_write(0x3E0, 0xB); // divide by 1
    lapic_write(0x320, (1 << 17) | u32::from(abi::irq::TIMER_VECTOR)); // periodic
    lapic_write(0x380, initial_count.max(1));
}

fn lapic_timer_stop() {
    lapic_write(0x320, 1 << 16); // masked
    lapic_write(0x380, 0);
}

/// `iterations` PING doorbells in the smallest loop (`out; dec; jnz`, as a raw port-I/O exit
/// loop): on an emulating host every instruction costs about a microsecond, and the five a
/// compiled loop added per PING (the seq encoding and the counter) were most of what the
/// doorbell round trip cost over a raw exit. PINGs carry seq 0; the VMM only counts them.
fn ping_loop(iterations: u64) {
    if iterations == 0 {
        return;
    }
    // SAFETY: port I/O to the doorbell port the VMM owns; the counter register is clobbered.
    unsafe {
        asm!(
            "2:",
            "out dx, eax",
            "dec {n}",
            "jnz 2b",
            n = inout(reg) iterations => _,
            in("dx") port::DOORBELL,
            in("eax") doorbell::encode(doorbell::PING, 0),
            options(nomem, nostack)
        );
    }
}

fn ring(kind: u32, seq: u32) {
    outl(port::DOORBELL, doorbell::encode(kind, seq));
}

fn outl(port: u16, value: u32) {
    // SAFETY: port I/O to a port the VMM owns; no memory effects.
    unsafe { asm!("out dx, eax", in("dx") port, in("eax") value, options(nomem, nostack)) };
}

fn inl(port: u16) -> u32 {
    let value: u32;
    // SAFETY: as for `outl`.
    unsafe { asm!("in eax, dx", in("dx") port, out("eax") value, options(nomem, nostack)) };
    value
}

fn console(text: &[u8]) {
    for b in text {
        // SAFETY: as for `outl`.
        unsafe { asm!("out dx, al", in("dx") port::CONSOLE, in("al") *b, options(nomem, nostack)) };
    }
}

fn halt_forever() -> ! {
    loop {
        // SAFETY: stops this vCPU; the VMM sees the halt (or has already stopped us).
        unsafe { asm!("cli", "hlt", options(nomem, nostack)) };
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    console(b"irqbench guest: panic\n");
    halt_forever()
}

/// Unoptimised builds reference it even with `panic = "abort"`.
#[no_mangle]
pub extern "C" fn rust_eh_personality() {}

// The compiler emits calls to these; `rep` string instructions keep them SSE-free.

/// # Safety
/// Standard `memcpy` contract.
#[no_mangle]
pub unsafe extern "C" fn memcpy(dest: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the caller guarantees both ranges are valid and disjoint.
    unsafe {
        asm!("rep movsb", inout("rcx") n => _, inout("rdi") dest => _, inout("rsi") src => _,
             options(nostack, preserves_flags))
    };
    dest
}

/// # Safety
/// Standard `memmove` contract.
#[no_mangle]
pub unsafe extern "C" fn memmove(dest: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    if (dest as usize) <= (src as usize) || (dest as usize) >= (src as usize) + n {
        // SAFETY: forward copy is correct when dest does not overlap src's tail.
        unsafe { memcpy(dest, src, n) }
    } else {
        // SAFETY: backward copy with the direction flag set, restored afterwards.
        unsafe {
            asm!("std", "rep movsb", "cld",
                 inout("rcx") n => _, inout("rdi") dest.add(n - 1) => _,
                 inout("rsi") src.add(n - 1) => _, options(nostack))
        };
        dest
    }
}

/// # Safety
/// Standard `memset` contract.
#[no_mangle]
pub unsafe extern "C" fn memset(dest: *mut u8, c: i32, n: usize) -> *mut u8 {
    // SAFETY: the caller guarantees the range is valid.
    unsafe {
        asm!("rep stosb", inout("rcx") n => _, inout("rdi") dest => _, in("al") c as u8,
             options(nostack, preserves_flags))
    };
    dest
}

/// # Safety
/// Standard `memcmp` contract.
#[no_mangle]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    for i in 0..n {
        // SAFETY: the caller guarantees both ranges are valid for n bytes.
        let (x, y) = unsafe { (a.add(i).read_volatile(), b.add(i).read_volatile()) };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
    }
    0
}

/// # Safety
/// Standard `bcmp` contract.
#[no_mangle]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: same contract.
    unsafe { memcmp(a, b, n) }
}
