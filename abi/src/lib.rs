//! The contract between the irqbench VMM and its guest kernel.
//!
//! Both sides compile this crate: the guest as `#![no_std]` freestanding code, the VMM as a normal
//! library. Everything here is plain data (`#[repr(C)]`, fixed-size integers) so the layout is the
//! same on both sides; the VMM treats every byte the guest writes as untrusted.
//!
//! # Memory map (guest-physical = guest-virtual, identity mapped)
//! | range | what |
//! |---|---|
//! | `0x1000..0x7000` | page tables (PML4, PDPT, 4 PDs: 4 GiB of 2 MiB pages), written by the VMM |
//! | `0x7000` | GDT, written by the VMM |
//! | `MAILBOX_GPA` | shared page (locks, counters), then one [`VcpuSlot`] page per vCPU |
//! | `GUEST_LOAD_GPA..` | the guest ELF's segments |
//! | `STACKS_GPA..` | one `STACK_SIZE` stack per vCPU |
//! | `MMIO_PROBE_GPA` | unbacked: any access is an MMIO exit to the VMM |
#![no_std]

/// Bumped whenever a layout below changes; the guest refuses a mailbox of another version.
pub const ABI_VERSION: u32 = 5;
/// "IRQB" in little endian: the first word of the shared page and of every slot.
pub const MAILBOX_MAGIC: u32 = 0x4251_5249;

pub const PML4_GPA: u64 = 0x1000;
pub const PDPT_GPA: u64 = 0x2000;
pub const PD_GPA: u64 = 0x3000;
/// Number of page directories (each maps 1 GiB): 4 GiB so the LAPIC page is mapped too.
pub const PD_COUNT: u64 = 4;
pub const GDT_GPA: u64 = 0x7000;
pub const MAILBOX_GPA: u64 = 0x1_0000;
pub const SLOT_SIZE: u64 = 0x1000;
pub const MAX_VCPUS: u32 = 64;
/// Where the guest ELF must be linked (see guest/link.ld).
pub const GUEST_LOAD_GPA: u64 = 0x10_0000;
/// The guest image (text, data, bss) must end below this.
pub const GUEST_IMAGE_END: u64 = 0x40_0000;
pub const STACKS_GPA: u64 = 0x40_0000;
pub const STACK_SIZE: u64 = 0x1_0000;
/// Smallest guest RAM that holds everything above for `MAX_VCPUS` vCPUs.
pub const MIN_MEM_BYTES: u64 = STACKS_GPA + STACK_SIZE * MAX_VCPUS as u64;
/// An address with no memory behind it: loads and stores exit to the VMM as MMIO.
pub const MMIO_PROBE_GPA: u64 = 0xD000_0000;
/// xAPIC base (in-kernel irqchip).
pub const LAPIC_GPA: u64 = 0xFEE0_0000;

/// GDT selectors the VMM sets up.
pub const SEL_CODE64: u16 = 0x08;
pub const SEL_DATA: u16 = 0x10;
pub const SEL_TSS: u16 = 0x18;

/// Guest-physical address of vCPU `index`'s slot.
pub const fn slot_gpa(index: u32) -> u64 {
    MAILBOX_GPA + SLOT_SIZE * (1 + index as u64)
}

/// Top of vCPU `index`'s stack (the stack grows down from here).
pub const fn stack_top(index: u32) -> u64 {
    STACKS_GPA + STACK_SIZE * (index as u64 + 1)
}

/// I/O ports the guest uses. None of them is claimed by KVM's in-kernel devices.
pub mod port {
    /// `out` u32: a doorbell marker (see [`super::doorbell`]).
    pub const DOORBELL: u16 = 0xE0;
    /// `in` u32: "what next?"; the VMM answers with a [`super::Command`] after writing the slot.
    pub const COMMAND: u16 = 0xE4;
    /// `out` u8: one byte of a fixed console string.
    pub const CONSOLE: u16 = 0xE8;
    /// `out` u32: exception vector; details are in the slot's [`super::FaultRecord`].
    pub const FAULT: u16 = 0xEC;
    /// `out` u32: the virtual-IF hypercall ("deliver my pending events").
    pub const HYPERCALL: u16 = 0xF0;
    /// `out` u32: does nothing; measures the cost of one port-I/O exit.
    pub const EXIT_PROBE: u16 = 0xF4;
}

/// Doorbell markers: `kind << 24 | (seq & 0xFF_FFFF)`.
pub mod doorbell {
    pub const BEGIN: u32 = 1;
    pub const END: u32 = 2;
    /// A bare ring with no meaning: the "exactly K doorbells" workload.
    pub const PING: u32 = 3;
    /// The guest finished booting and is about to ask for its first command.
    pub const BOOTED: u32 = 4;
    /// A block starts (outside its timed window); `seq` = the variant's index in
    /// `PhaseDescriptor::variants`. The previous block's [`super::BlockRecord`] is in the slot.
    pub const BLOCK: u32 = 5;

    pub const fn encode(kind: u32, seq: u32) -> u32 {
        (kind << 24) | (seq & 0xFF_FFFF)
    }
    pub const fn kind(marker: u32) -> u32 {
        marker >> 24
    }
    pub const fn seq(marker: u32) -> u32 {
        marker & 0xFF_FFFF
    }
}

/// What the VMM answers on [`port::COMMAND`].
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Run the phase described in the slot's `phase` field.
    RunPhase = 1,
    /// Stop: the guest executes `cli; hlt` forever.
    Shutdown = 2,
}

/// The code a phase runs. The numeric ids are part of the ABI.
pub mod workload {
    /// Save/disable/body/restore with the phase's strategy, `iterations` times.
    pub const STRATEGY: u32 = 1;
    /// One instruction under test, unrolled `INSN_UNROLL` times per iteration.
    pub const INSN: u32 = 2;
    /// Ring the doorbell with `PING` markers `iterations` times.
    pub const DOORBELLS: u32 = 3;
    /// Execute `ud2`: the exception path end to end.
    pub const FAULT_UD2: u32 = 4;
    /// Spin forever with interrupts enabled (watchdog test).
    pub const SPIN_FOREVER: u32 = 5;
    /// Write an out-of-range record (protocol-violation test).
    pub const GARBAGE_RECORD: u32 = 6;
    /// The epoll ready-list pattern around a spinlock shared by all vCPUs.
    pub const LOCK: u32 = 7;
    /// Strategies interleaved by weight with a deterministic seed.
    pub const MIXED: u32 = 8;
    /// Spin with interrupts enabled until `PhaseDescriptor::idle_tsc_cycles` TSC cycles have
    /// passed (read the TSC, compare with the deadline, loop): counts timer interrupts over a
    /// fixed time, however fast the host runs guest code (lapic-timer tests). Reports
    /// `iterations` as its operations.
    pub const IDLE: u32 = 9;
    /// Execute `cli; hlt` with IF clear: KVM reports a halted vCPU that nothing can wake.
    pub const HALT_FOREVER: u32 = 10;
}

/// Irq-flag strategies; index into the guest's operation table. `EMPTY` is the baseline.
pub mod strategy {
    pub const EMPTY: u32 = 0;
    pub const NATIVE_POPF: u32 = 1;
    pub const NATIVE_CLI_STI: u32 = 2;
    pub const NATIVE_SKIP: u32 = 3;
    pub const PVOP_POPF: u32 = 4;
    pub const PVOP_SKIP: u32 = 5;
    pub const VIF_RESTORE: u32 = 6;
    pub const VIF_SKIP: u32 = 7;
    pub const COUNT: u32 = 8;
    /// Name as used in configs and reports, and the guest symbol stem
    /// (`irqbench_op_<name with '-' as '_'>`).
    pub const NAMES: [&str; COUNT as usize] = [
        "empty",
        "native-popf",
        "native-cli-sti",
        "native-skip",
        "pvop-popf",
        "pvop-skip",
        "vif-restore",
        "vif-skip",
    ];
    /// `vif-*` keep IF in the slot's mask byte, not in RFLAGS.
    pub const fn is_vif(id: u32) -> bool {
        id == VIF_RESTORE || id == VIF_SKIP
    }
}

/// Single instructions (and exits) under test in the instruction-cost suite.
pub mod insn {
    pub const EMPTY: u32 = 0;
    pub const CLI: u32 = 1;
    pub const STI: u32 = 2;
    /// `popf` with IF=1 in the popped value while IF is clear.
    pub const POPF_SET_IF: u32 = 3;
    /// `popf` with IF=0 in the popped value while IF is set.
    pub const POPF_CLEAR_IF: u32 = 4;
    /// `popf` of the current flags (IF unchanged).
    pub const POPF_SAME_IF: u32 = 5;
    /// `pushf; pop`.
    pub const PUSHF: u32 = 6;
    /// `out` to [`super::port::EXIT_PROBE`]: one port-I/O exit to the VMM.
    pub const PIO_EXIT: u32 = 7;
    /// A store to [`super::MMIO_PROBE_GPA`]: one MMIO exit to the VMM.
    pub const MMIO_EXIT: u32 = 8;
    /// `cpuid` leaf 0: handled in the kernel on VMX/SVM.
    pub const CPUID: u32 = 9;
    /// `hlt` with IF set: on a userspace irqchip KVM hands every HLT to the VMM, which resumes
    /// the vCPU at once (the "HLT with a pending wake-up" round trip).
    pub const HLT_EXIT: u32 = 10;
    pub const COUNT: u32 = 11;
    pub const NAMES: [&str; COUNT as usize] = [
        "empty",
        "cli",
        "sti",
        "popf-set-if",
        "popf-clear-if",
        "popf-same-if",
        "pushf",
        "pio-exit",
        "mmio-exit",
        "cpuid",
        "hlt-exit",
    ];
    /// How many times one iteration executes the instruction. Exits are not unrolled: each
    /// costs microseconds and one per iteration keeps phases short.
    pub const fn unroll(id: u32) -> u32 {
        match id {
            PIO_EXIT | MMIO_EXIT | CPUID | HLT_EXIT => 1,
            _ => 8,
        }
    }
}

/// Interrupt sources the guest must know about.
pub mod irq {
    pub const NONE: u32 = 0;
    /// The guest programs its LAPIC timer (in-kernel irqchip) with `timer_period_ns`.
    pub const LAPIC_TIMER: u32 = 1;
    /// The VMM injects `INJECT_VECTOR` with KVM_INTERRUPT.
    pub const INJECT: u32 = 2;
    /// The VMM sets the slot's virtual-IF pending byte.
    pub const PV_EVENT: u32 = 3;
    pub const TIMER_VECTOR: u8 = 0x40;
    pub const INJECT_VECTOR: u8 = 0x41;
    pub const SPURIOUS_VECTOR: u8 = 0xFF;
}

/// How the `vif-*` strategies ask the host to deliver pending events
/// (`PhaseDescriptor::hypercall_transport`).
pub mod hypercall {
    /// `out` to [`super::port::HYPERCALL`]: a KVM_EXIT_IO the VMM handles (works everywhere).
    pub const PORT: u32 = 0;
    /// `KVM_HC_MAP_GPA_RANGE` through the vendor's hypercall instruction, forwarded to the VMM
    /// as KVM_EXIT_HYPERCALL (KVM_CAP_EXIT_HYPERCALL).
    pub const EXIT: u32 = 1;
    /// `KVM_HC_VAPIC_POLL_IRQ` through the vendor's hypercall instruction: KVM handles it in
    /// the kernel (counted by its `hypercalls` stat) and returns to the guest without a
    /// userspace exit, so the guest acknowledges its own pending event.
    pub const VAPIC_POLL: u32 = 2;
    /// KVM hypercall numbers (include/uapi/linux/kvm_para.h).
    pub const KVM_HC_VAPIC_POLL_IRQ: u32 = 1;
    pub const KVM_HC_MAP_GPA_RANGE: u32 = 12;
}

/// Which instruction a KVM hypercall uses (`PhaseDescriptor::hypercall_insn`): the host CPU's
/// own, so that KVM never has to patch the guest's code (x86.c `emulator_fix_hypercall`).
pub mod hypercall_insn {
    /// Intel VMX: `vmcall` (0f 01 c1).
    pub const VMCALL: u32 = 0;
    /// AMD SVM: `vmmcall` (0f 01 d9).
    pub const VMMCALL: u32 = 1;
}

/// Blocks one round may hold: the `empty` baseline and up to 15 variants.
pub const MAX_VARIANTS: usize = 16;
/// `PhaseDescriptor::variants` entry of the `MIXED` workload: strategies interleaved by weight.
pub const VARIANT_MIXED: u32 = 0xFF;

/// What the VMM asks of one phase. Written by the VMM before it answers `RunPhase`.
///
/// Measured workloads (`STRATEGY`, `INSN`, `LOCK`, `MIXED`) run `rounds` rounds; each round runs
/// every entry of `variants` once as a block of `iterations` operations, in an order shuffled
/// per round from `seed` and the round's number (`first_round + r`), so every vCPU of a phase
/// draws the same order. A `BLOCK` doorbell precedes each block, outside its timed window.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseDescriptor {
    /// Echoed in the record and the doorbell markers.
    pub seq: u32,
    pub workload: u32,
    /// Strategy id (`STRATEGY`, `LOCK`) or instruction id (`INSN`).
    pub strategy: u32,
    pub irq_source: u32,
    pub iterations: u64,
    /// Fraction of operations entered with interrupts already disabled, in 1/65536.
    pub nesting_per_65536: u32,
    /// Critical-section work: this many ALU ops + memory touches per operation.
    pub body_ops: u32,
    pub seed: u64,
    /// LAPIC timer period in TSC-deadline-free "initial count" units (bus clock ticks).
    pub timer_initial_count: u32,
    pub hypercall_transport: u32,
    /// Relative weights per strategy for `MIXED` (index = strategy id).
    pub weights: [u16; strategy::COUNT as usize],
    /// Rounds to run in this dispatch.
    pub rounds: u32,
    /// The number of the first round (the shuffle of round r depends on seed and r only).
    pub first_round: u32,
    /// Entries of `variants` in use, 1..=MAX_VARIANTS.
    pub variant_count: u32,
    /// 1: every vCPU waits at a barrier before each block, so all run the same variant.
    pub barrier: u32,
    /// Ids in the workload's table (strategy or instruction), or [`VARIANT_MIXED`].
    pub variants: [u32; MAX_VARIANTS],
    /// `IDLE`: how long to spin, in TSC cycles from the start of the idle loop.
    pub idle_tsc_cycles: u64,
    /// [`hypercall_insn`] for the `EXIT` and `VAPIC_POLL` transports.
    pub hypercall_insn: u32,
    pub _pad: u32,
}

/// What the guest reports for one block. Written just before the next `BLOCK` (or `END`)
/// doorbell, which is when the VMM reads it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockRecord {
    /// The phase's seq.
    pub seq: u32,
    /// Round number (`first_round + r`).
    pub round: u32,
    /// Index into `PhaseDescriptor::variants`.
    pub variant: u32,
    /// Position in the round's shuffled order.
    pub position: u32,
    pub tsc_start: u64,
    pub tsc_end: u64,
    pub ops: u64,
    pub interrupts: u64,
    pub hypercalls: u64,
    pub if_violations: u64,
    pub lock_acquisitions: u64,
    pub lock_spins: u64,
}

/// What the guest reports for one phase.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseRecord {
    pub seq: u32,
    /// [`record_status`].
    pub status: u32,
    pub tsc_start: u64,
    pub tsc_end: u64,
    /// Operations completed (iterations × unroll).
    pub ops: u64,
    pub interrupts: u64,
    pub hypercalls: u64,
    pub if_violations: u64,
    pub lock_acquisitions: u64,
    pub lock_spins: u64,
    /// Operations per strategy (`MIXED`).
    pub strategy_ops: [u64; strategy::COUNT as usize],
}

pub mod record_status {
    pub const EMPTY: u32 = 0;
    pub const DONE: u32 = 1;
    /// The guest did not know the workload or strategy id it was given.
    pub const BAD_DESCRIPTOR: u32 = 2;
}

/// Written by the guest's exception handler before it rings [`port::FAULT`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultRecord {
    pub vector: u64,
    pub error_code: u64,
    pub rip: u64,
    pub cs: u64,
    pub rflags: u64,
    pub rsp: u64,
    pub cr2: u64,
}

/// One vCPU's page of the mailbox.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct VcpuSlot {
    pub magic: u32,
    pub version: u32,
    pub vcpu_index: u32,
    pub vcpu_count: u32,
    pub phase: PhaseDescriptor,
    pub record: PhaseRecord,
    pub fault: FaultRecord,
    /// Interrupts taken since boot (incremented by the guest's handlers through %gs).
    pub interrupts: u64,
    /// Virtual IF: 1 = events masked (the `vif-*` "cli").
    pub vif_mask: u8,
    /// Set by the VMM (`pv-event`): an event waits for delivery.
    pub vif_pending: u8,
    pub _pad: [u8; 6],
    /// Hypercalls issued since boot.
    pub hypercalls: u64,
    /// Scratch the critical-section body touches.
    pub scratch: u64,
    /// `LOCK` workload: acquisitions and spins while the lock was held by another vCPU.
    pub lock_acquisitions: u64,
    pub lock_spins: u64,
    /// The last finished block (see [`BlockRecord`]).
    pub block: BlockRecord,
}

/// The page shared by every vCPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SharedPage {
    pub magic: u32,
    pub version: u32,
    pub vcpu_count: u32,
    pub _pad: u32,
    /// The spinlock of the `LOCK` workload: 0 = free, 1 = held.
    pub lock: u32,
    pub _pad2: u32,
    /// Incremented non-atomically inside the lock: equals total operations iff the lock excludes.
    pub lock_counter: u64,
    /// The "ready list" length the lock protects.
    pub ready_list: u64,
    /// Block barrier: each vCPU adds 1 before a block and waits for `vcpus × (block + 1)`.
    /// The VMM zeroes it before each dispatch.
    pub barrier: u64,
}

/// Byte offsets the guest's assembly uses, from the struct layouts themselves.
pub mod offset {
    use super::{SharedPage, VcpuSlot};
    use core::mem::offset_of;
    pub const SLOT_FAULT: usize = offset_of!(VcpuSlot, fault);
    pub const SLOT_INTERRUPTS: usize = offset_of!(VcpuSlot, interrupts);
    pub const SLOT_VIF_MASK: usize = offset_of!(VcpuSlot, vif_mask);
    pub const SLOT_VIF_PENDING: usize = offset_of!(VcpuSlot, vif_pending);
    pub const SLOT_HYPERCALLS: usize = offset_of!(VcpuSlot, hypercalls);
    pub const SLOT_SCRATCH: usize = offset_of!(VcpuSlot, scratch);
    pub const SLOT_LOCK_ACQUISITIONS: usize = offset_of!(VcpuSlot, lock_acquisitions);
    pub const SLOT_LOCK_SPINS: usize = offset_of!(VcpuSlot, lock_spins);
    pub const SLOT_BLOCK: usize = offset_of!(VcpuSlot, block);
    pub const SHARED_LOCK: usize = offset_of!(SharedPage, lock);
    pub const SHARED_LOCK_COUNTER: usize = offset_of!(SharedPage, lock_counter);
    pub const SHARED_READY_LIST: usize = offset_of!(SharedPage, ready_list);
    pub const SHARED_BARRIER: usize = offset_of!(SharedPage, barrier);
}

const _: () = {
    assert!(size_of::<VcpuSlot>() as u64 <= SLOT_SIZE);
    assert!(size_of::<SharedPage>() as u64 <= SLOT_SIZE);
    assert!(slot_gpa(MAX_VCPUS) <= GUEST_LOAD_GPA);
};
