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
pub const ABI_VERSION: u32 = 7;
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
    /// `ipi`'s sender vCPU: an `IPI_VECTOR` IPI to each measured vCPU every
    /// `ipi_period_tsc` TSC cycles until `SharedPage::ipi_stop`; `head.ops` = IPIs sent.
    pub const IPI_SEND: u32 = 11;
    /// The pending-interrupt latency's known answer (needs the in-kernel LAPIC, as `msi`
    /// sets up): `iterations` times, with IF clear, time a raise and send the LAPIC a self-IPI of
    /// `MSI_VECTOR`, run `body_ops` iterations of `dec; jnz`, then `sti; hlt`. Each latency
    /// logged is at least those instructions' time.
    pub const LATENCY_PROBE: u32 = 12;
}

/// `[table[0].name, table[1].name, …]` as a const array (the `NAMES` of an identity table).
macro_rules! names_of {
    ($table:expr) => {{
        let mut names = [""; $table.len()];
        let mut i = 0;
        while i < names.len() {
            names[i] = $table[i].name;
            i += 1;
        }
        names
    }};
}

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The id of `name`: its position in an identity table. A name not in the table is a compile
/// error where the constant is defined.
const fn id(names: &[&str], name: &str) -> u32 {
    let mut i = 0;
    while i < names.len() {
        if same(names[i], name) {
            return i as u32;
        }
        i += 1;
    }
    panic!("an id constant names an entry its table does not have");
}

/// Identity names become assembler symbols and macro names (`-` as `_`): non-empty, lower-case
/// ASCII letters, digits and `-`, starting with a letter, and unique within their table.
const fn names_ok(names: &[&str]) -> bool {
    let mut i = 0;
    while i < names.len() {
        let b = names[i].as_bytes();
        if b.is_empty() || !b[0].is_ascii_lowercase() || id(names, names[i]) != i as u32 {
            return false;
        }
        let mut j = 0;
        while j < b.len() {
            if !(b[j].is_ascii_lowercase() || b[j].is_ascii_digit() || b[j] == b'-') {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

const _: () = assert!(names_ok(&strategy::NAMES) && names_ok(&insn::NAMES));
const _: () = assert!(names_ok(&irq::NAMES));

/// Irq-flag strategies: one table, indexed by id; `EMPTY` is the baseline.
///
/// A strategy is its entry in [`strategy::STRATEGIES`] plus its `OP_<NAME>` macro in
/// guest/src/ops.S. guest/build.rs generates the guest's dispatch tables (`irqbench_ops`,
/// `irqbench_lockops`, in id order) from this table. Ids are positions and part of the ABI:
/// append, and bump [`ABI_VERSION`] (`COUNT` sizes `PhaseDescriptor::weights` and
/// `PhaseRecord::strategy_ops`).
pub mod strategy {
    /// Everything irqbench knows about a strategy besides its code.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Info {
        /// Config and report name. With `-` as `_` it is the stem of the guest's symbols
        /// (`irqbench_op_<stem>`, `irqbench_lockop_<stem>`) and macro (`OP_<STEM>` upper-cased).
        pub name: &'static str,
        /// Keeps IF in the slot's mask byte (the virtual IF), not in RFLAGS.
        pub vif: bool,
        /// One line for `irqbench list` and `irqbench disasm`.
        pub describe: &'static str,
        /// Guest functions its code reaches through indirect calls or the hypercall stub;
        /// `irqbench disasm` shows them after the operation.
        pub calls: &'static [&'static str],
        /// The flag instructions its code contains; a test decodes the built guest against it.
        pub flags: FlagOps,
    }

    /// Flag-relevant instructions of one operation's own code (the critical section excluded),
    /// as counts.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct FlagOps {
        pub cli: u8,
        pub sti: u8,
        pub pushf: u8,
        pub popf: u8,
        /// `call *mem`: a pv-op.
        pub indirect_calls: u8,
        /// `test $0x200` (X86_EFLAGS_IF) on the saved flags.
        pub test_if_bit: u8,
        pub cond_branches: u8,
        /// Stores to the slot's virtual-IF mask byte.
        pub vif_mask_writes: u8,
        /// Direct calls of the hypercall stub.
        pub hypercall_calls: u8,
    }

    impl FlagOps {
        #[rustfmt::skip]
        pub const NONE: FlagOps = FlagOps {
            cli: 0, sti: 0, pushf: 0, popf: 0, indirect_calls: 0, test_if_bit: 0, cond_branches: 0,
            vif_mask_writes: 0, hypercall_calls: 0,
        };
    }

    const PV_SAVE_FL: &str = "irqbench_pv_save_fl";
    const PV_RESTORE_FL: &str = "irqbench_pv_restore_fl";
    const PV_IRQ_DISABLE: &str = "irqbench_pv_irq_disable";
    const PV_IRQ_ENABLE: &str = "irqbench_pv_irq_enable";
    const HYPERCALL: &str = "irqbench_hypercall";

    /// In id order.
    #[rustfmt::skip]
    pub const STRATEGIES: &[Info] = &[
        Info { name: "empty", vif: false, calls: &[], flags: FlagOps::NONE,
               describe: "baseline: the same loop and body with no flag handling" },
        Info { name: "native-popf", vif: false, calls: &[],
               flags: FlagOps { cli: 1, pushf: 1, popf: 1, ..FlagOps::NONE },
               describe: "pushf; pop / cli / push; popf (irqsave before 2021)" },
        Info { name: "native-cli-sti", vif: false, calls: &[],
               flags: FlagOps { cli: 1, sti: 1, ..FlagOps::NONE },
               describe: "cli / sti (spin_lock_irq: re-enables even if IRQs were off)" },
        Info { name: "native-skip", vif: false, calls: &[],
               flags: FlagOps { cli: 1, sti: 1, pushf: 1, test_if_bit: 1, cond_branches: 1, ..FlagOps::NONE },
               describe: "pushf; pop / cli / test $IF; jz; sti (upstream since 2021)" },
        Info { name: "pvop-popf", vif: false, calls: &[PV_SAVE_FL, PV_IRQ_DISABLE, PV_RESTORE_FL],
               flags: FlagOps { indirect_calls: 3, ..FlagOps::NONE },
               describe: "call *save_fl / call *irq_disable / call *restore_fl (popf)" },
        Info { name: "pvop-skip", vif: false, calls: &[PV_SAVE_FL, PV_IRQ_DISABLE, PV_IRQ_ENABLE],
               flags: FlagOps { indirect_calls: 3, test_if_bit: 1, cond_branches: 1, ..FlagOps::NONE },
               describe: "call *save_fl / call *irq_disable / test $IF; jz; call *irq_enable (2017 patch)" },
        Info { name: "vif-restore", vif: true, calls: &[HYPERCALL],
               flags: FlagOps { vif_mask_writes: 2, hypercall_calls: 1, cond_branches: 2, ..FlagOps::NONE },
               describe: "virtual IF byte: mask=!(f&IF); hypercall if unmasked and pending" },
        Info { name: "vif-skip", vif: true, calls: &[HYPERCALL],
               flags: FlagOps { vif_mask_writes: 2, hypercall_calls: 1, cond_branches: 2, ..FlagOps::NONE },
               describe: "virtual IF byte: only if (f&IF) { mask=0; hypercall if pending }" },
    ];

    pub const COUNT: u32 = STRATEGIES.len() as u32;
    /// Names as configs and reports use them, in id order.
    pub const NAMES: [&str; COUNT as usize] = names_of!(STRATEGIES);

    pub const EMPTY: u32 = super::id(&NAMES, "empty");
    pub const NATIVE_POPF: u32 = super::id(&NAMES, "native-popf");
    pub const NATIVE_CLI_STI: u32 = super::id(&NAMES, "native-cli-sti");
    pub const NATIVE_SKIP: u32 = super::id(&NAMES, "native-skip");
    pub const PVOP_POPF: u32 = super::id(&NAMES, "pvop-popf");
    pub const PVOP_SKIP: u32 = super::id(&NAMES, "pvop-skip");
    pub const VIF_RESTORE: u32 = super::id(&NAMES, "vif-restore");
    pub const VIF_SKIP: u32 = super::id(&NAMES, "vif-skip");

    /// Bit `id` set for the strategies with [`Info::vif`] (a mask, so the guest's check does
    /// not pull the table, strings and all, into its image).
    const VIF_IDS: u64 = {
        let mut mask = 0;
        let mut i = 0;
        while i < STRATEGIES.len() {
            if STRATEGIES[i].vif {
                mask |= 1 << i;
            }
            i += 1;
        }
        mask
    };
    const _: () = assert!(STRATEGIES.len() <= 64, "VIF_IDS holds 64 strategies");

    /// `vif-*` keep IF in the slot's mask byte, not in RFLAGS.
    pub const fn is_vif(id: u32) -> bool {
        id < 64 && VIF_IDS & (1 << id) != 0
    }

    /// Entries of `PhaseDescriptor::weights`: `COUNT` rounded up so that no padding follows
    /// the u16 array whatever the count (the VMM copies the descriptor as bytes).
    pub const WEIGHT_SLOTS: usize = (COUNT as usize).next_multiple_of(4);
}

/// Single instructions (and exits) under test in the instruction-cost suite: one table, indexed
/// by id. A probe is its entry in [`insn::INSNS`] plus its function `irqbench_insn_<stem>` in
/// guest/src/ops.S; guest/build.rs generates the guest's `irqbench_insns` table from this one.
pub mod insn {
    /// Everything irqbench knows about an instruction probe besides its code.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Info {
        /// Config and report name; with `-` as `_`, the stem of `irqbench_insn_<stem>`.
        pub name: &'static str,
        /// One line for `irqbench list`.
        pub describe: &'static str,
        /// How many times one iteration executes the instruction.
        pub unroll: u32,
        /// What one unit executes, for the report's "measures" column: the name says what is
        /// measured, this what runs.
        pub measures: &'static str,
        /// Guest instructions one unit is (validate's bound for PVM, which emulates CPL0 code
        /// and exits at most once per batch of them).
        pub instructions: u32,
    }

    /// Instructions are unrolled eight times per iteration; exits are not: each costs
    /// microseconds, and one per iteration keeps phases short.
    const UNROLLED: u32 = 8;

    /// In id order.
    #[rustfmt::skip]
    pub const INSNS: &[Info] = &[
        Info { name: "empty", unroll: UNROLLED, instructions: 0, measures: "(loop only)",
               describe: "baseline: the loop alone" },
        Info { name: "cli", unroll: UNROLLED, instructions: 1, measures: "cli", describe: "cli" },
        Info { name: "sti", unroll: UNROLLED, instructions: 1, measures: "sti", describe: "sti" },
        // `popf` with IF=1 in the popped value while IF is clear.
        Info { name: "popf-set-if", unroll: UNROLLED, instructions: 3, measures: "cli; push; popf",
               describe: "cli; push; popf that sets IF" },
        // `popf` with IF=0 in the popped value while IF is set.
        Info { name: "popf-clear-if", unroll: UNROLLED, instructions: 3, measures: "sti; push; popf",
               describe: "sti; push; popf that clears IF" },
        // `popf` of the current flags (IF unchanged).
        Info { name: "popf-same-if", unroll: UNROLLED, instructions: 2, measures: "push; popf",
               describe: "push; popf that leaves IF set" },
        Info { name: "pushf", unroll: UNROLLED, instructions: 2, measures: "pushf; pop",
               describe: "pushf; pop" },
        // `out` to `port::EXIT_PROBE`.
        Info { name: "pio-exit", unroll: 1, instructions: 1, measures: "out (exit to VMM)",
               describe: "out to a VMM port: one port-I/O exit" },
        // A store to `MMIO_PROBE_GPA`.
        Info { name: "mmio-exit", unroll: 1, instructions: 1, measures: "mmio store (exit)",
               describe: "store to unbacked memory: one MMIO exit" },
        // `push rbx; xor eax; xor ecx; cpuid; pop rbx`: five instructions.
        Info { name: "cpuid", unroll: 1, instructions: 5, measures: "cpuid",
               describe: "cpuid leaf 0 (in-kernel exit on VMX/SVM)" },
        // On a userspace irqchip KVM hands every HLT to the VMM, which resumes the vCPU at once
        // (the "HLT with a pending wake-up" round trip).
        Info { name: "hlt-exit", unroll: 1, instructions: 1, measures: "hlt (exit)",
               describe: "hlt with IF set: one KVM_EXIT_HLT to the VMM" },
    ];

    pub const COUNT: u32 = INSNS.len() as u32;
    /// Names as configs and reports use them, in id order.
    pub const NAMES: [&str; COUNT as usize] = names_of!(INSNS);

    pub const EMPTY: u32 = super::id(&NAMES, "empty");
    pub const CLI: u32 = super::id(&NAMES, "cli");
    pub const STI: u32 = super::id(&NAMES, "sti");
    pub const POPF_SET_IF: u32 = super::id(&NAMES, "popf-set-if");
    pub const POPF_CLEAR_IF: u32 = super::id(&NAMES, "popf-clear-if");
    pub const POPF_SAME_IF: u32 = super::id(&NAMES, "popf-same-if");
    pub const PUSHF: u32 = super::id(&NAMES, "pushf");
    pub const PIO_EXIT: u32 = super::id(&NAMES, "pio-exit");
    pub const MMIO_EXIT: u32 = super::id(&NAMES, "mmio-exit");
    pub const CPUID: u32 = super::id(&NAMES, "cpuid");
    pub const HLT_EXIT: u32 = super::id(&NAMES, "hlt-exit");

    /// [`Info::unroll`] by id (an array of numbers, so the guest's lookup does not pull the
    /// table, strings and all, into its image).
    const UNROLLS: [u32; COUNT as usize] = {
        let mut unrolls = [0; COUNT as usize];
        let mut i = 0;
        while i < unrolls.len() {
            unrolls[i] = INSNS[i].unroll;
            i += 1;
        }
        unrolls
    };

    /// How many times one iteration of probe `id` executes its instruction (1 for an id
    /// outside the table).
    pub const fn unroll(id: u32) -> u32 {
        if (id as usize) < UNROLLS.len() {
            UNROLLS[id as usize]
        } else {
            1
        }
    }
}

/// Interrupt sources: one table, indexed by id, plus the vectors the guest takes.
pub mod irq {
    /// The one parameter a source takes: its config key and the unit its label shows
    /// (`inject@1000Hz`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Param {
        pub key: &'static str,
        pub unit: &'static str,
    }

    pub const PERIOD_US: Param = Param {
        key: "period_us",
        unit: "us",
    };
    pub const RATE_HZ: Param = Param {
        key: "rate_hz",
        unit: "Hz",
    };

    /// Everything irqbench knows about an interrupt source besides how it is delivered.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Info {
        /// Config and report name.
        pub name: &'static str,
        /// One line for `irqbench list` and the config key reference.
        pub describe: &'static str,
        pub param: Option<Param>,
        /// Needs KVM's in-kernel irqchip (`false`: a userspace one, which KVM_INTERRUPT needs).
        pub in_kernel_irqchip: bool,
    }

    /// In id order.
    #[rustfmt::skip]
    pub const SOURCES: &[Info] = &[
        Info { name: "none", param: None, in_kernel_irqchip: false,
               describe: "no interrupt load" },
        // The guest programs its LAPIC timer with `PhaseDescriptor::timer_initial_count`.
        Info { name: "lapic-timer", param: Some(PERIOD_US), in_kernel_irqchip: true,
               describe: "in-kernel irqchip; the guest's LAPIC timer every period_us" },
        // The VMM injects `INJECT_VECTOR` with KVM_INTERRUPT.
        Info { name: "inject", param: Some(RATE_HZ), in_kernel_irqchip: false,
               describe: "userspace irqchip; the VMM injects with KVM_INTERRUPT rate_hz times/s" },
        // The VMM sets the slot's virtual-IF pending byte.
        Info { name: "pv-event", param: Some(RATE_HZ), in_kernel_irqchip: false,
               describe: "the VMM sets the virtual-IF pending byte rate_hz times/s (vif-*)" },
        // The VMM writes each vCPU's eventfd, bound with KVM_IRQFD to an MSI of `MSI_VECTOR`.
        Info { name: "msi", param: Some(RATE_HZ), in_kernel_irqchip: true,
               describe: "in-kernel irqchip; the VMM signals an MSI irqfd rate_hz times/s" },
        // An extra, unmeasured sender vCPU writes its ICR (`workload::IPI_SEND`).
        Info { name: "ipi", param: Some(RATE_HZ), in_kernel_irqchip: true,
               describe: "in-kernel irqchip; a sender vCPU IPIs each vCPU rate_hz times/s" },
    ];

    pub const COUNT: u32 = SOURCES.len() as u32;
    /// Names as configs and reports use them, in id order.
    pub const NAMES: [&str; COUNT as usize] = names_of!(SOURCES);

    pub const NONE: u32 = super::id(&NAMES, "none");
    pub const LAPIC_TIMER: u32 = super::id(&NAMES, "lapic-timer");
    pub const INJECT: u32 = super::id(&NAMES, "inject");
    pub const PV_EVENT: u32 = super::id(&NAMES, "pv-event");
    pub const MSI: u32 = super::id(&NAMES, "msi");
    pub const IPI: u32 = super::id(&NAMES, "ipi");

    pub const TIMER_VECTOR: u8 = 0x40;
    pub const INJECT_VECTOR: u8 = 0x41;
    pub const MSI_VECTOR: u8 = 0x42;
    pub const IPI_VECTOR: u8 = 0x43;
    /// `PhaseDescriptor::ipi_icr`: the sender's ICR, one WRMSR 0x830 or two xAPIC MMIO stores.
    pub const ICR_XAPIC: u32 = 0;
    pub const ICR_X2APIC: u32 = 1;
    /// ICR writes whose guest TSC cycles the sender keeps (`VcpuSlot::icr_cycles`, a ring).
    pub const ICR_SAMPLES: usize = 32;
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
    /// Relative weights per strategy for `MIXED` (index = strategy id; slots past
    /// `strategy::COUNT` stay 0).
    pub weights: [u16; strategy::WEIGHT_SLOTS],
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
    /// `IPI_SEND`: [`irq::ICR_X2APIC`] or [`irq::ICR_XAPIC`], and the TSC cycles between ticks.
    pub ipi_icr: u32,
    pub ipi_period_tsc: u64,
}

/// Events the guest counts over a block or a phase (differences of its since-boot counters,
/// and the IF violations its workload saw). One struct for both records, so the guest writes
/// it with one helper and the VMM checks it with one table.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub interrupts: u64,
    pub hypercalls: u64,
    /// Operations that found IF in the wrong state (see the strategy's contract).
    pub if_violations: u64,
    pub lock_acquisitions: u64,
    /// Spins while the lock was held by another vCPU.
    pub lock_spins: u64,
}

impl Counts {
    /// `self − before`, counter by counter (a since-boot counter wraps only after 2^64 events).
    pub const fn since(&self, before: &Counts) -> Counts {
        Counts {
            interrupts: self.interrupts.wrapping_sub(before.interrupts),
            hypercalls: self.hypercalls.wrapping_sub(before.hypercalls),
            if_violations: self.if_violations.wrapping_sub(before.if_violations),
            lock_acquisitions: self
                .lock_acquisitions
                .wrapping_sub(before.lock_acquisitions),
            lock_spins: self.lock_spins.wrapping_sub(before.lock_spins),
        }
    }
}

/// Sums over blocks and vCPUs; saturating, since the VMM adds untrusted (if checked) values.
impl core::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.interrupts = self.interrupts.saturating_add(o.interrupts);
        self.hypercalls = self.hypercalls.saturating_add(o.hypercalls);
        self.if_violations = self.if_violations.saturating_add(o.if_violations);
        self.lock_acquisitions = self.lock_acquisitions.saturating_add(o.lock_acquisitions);
        self.lock_spins = self.lock_spins.saturating_add(o.lock_spins);
    }
}

/// What both records start with: which phase, when, and how many operations.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordHead {
    /// The phase's seq.
    pub seq: u32,
    pub _pad: u32,
    pub tsc_start: u64,
    pub tsc_end: u64,
    /// Operations completed (iterations × unroll).
    pub ops: u64,
}

/// What the guest reports for one block. Written just before the next `BLOCK` (or `END`)
/// doorbell, which is when the VMM reads it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockRecord {
    pub head: RecordHead,
    pub counts: Counts,
    /// Round number (`first_round + r`).
    pub round: u32,
    /// Index into `PhaseDescriptor::variants`.
    pub variant: u32,
    /// Position in the round's shuffled order.
    pub position: u32,
    pub _pad: u32,
}

/// What the guest reports for one phase.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseRecord {
    pub head: RecordHead,
    pub counts: Counts,
    /// [`record_status`].
    pub status: u32,
    pub _pad: u32,
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
    /// Guest TSC of the oldest raise the guest has not taken yet, 0 = none (see [`latency`]).
    pub raise_tsc: u64,
    /// Variant index + 1 of the block whose timed window runs; 0 outside blocks.
    pub block_tag: u64,
    /// Latencies logged since boot; the i-th is in `latency_log[i % latency::LOG_LEN]`.
    pub latency_count: u64,
    pub latency_log: [u64; latency::LOG_LEN],
    /// Where each logged interrupt was taken: the interrupted RIP, at the same index.
    pub latency_rip: [u64; latency::LOG_LEN],
    /// `IPI_SEND`: TSC cycles of ICR write n at `n % ICR_SAMPLES` (n from 0 each phase).
    pub icr_cycles: [u32; irq::ICR_SAMPLES],
}

pub mod latency;

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
    /// Set by the VMM once every measured vCPU has ended its phase: the `ipi` sender stops.
    pub ipi_stop: u64,
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
    pub const SLOT_RAISE_TSC: usize = offset_of!(VcpuSlot, raise_tsc);
    pub const SLOT_BLOCK_TAG: usize = offset_of!(VcpuSlot, block_tag);
    pub const SLOT_LATENCY_COUNT: usize = offset_of!(VcpuSlot, latency_count);
    pub const SLOT_LATENCY_LOG: usize = offset_of!(VcpuSlot, latency_log);
    pub const SLOT_LATENCY_RIP: usize = offset_of!(VcpuSlot, latency_rip);
    pub const SHARED_LOCK: usize = offset_of!(SharedPage, lock);
    pub const SHARED_LOCK_COUNTER: usize = offset_of!(SharedPage, lock_counter);
    pub const SHARED_READY_LIST: usize = offset_of!(SharedPage, ready_list);
    pub const SHARED_BARRIER: usize = offset_of!(SharedPage, barrier);
    pub const SHARED_IPI_STOP: usize = offset_of!(SharedPage, ipi_stop);
}

const _: () = {
    assert!(size_of::<VcpuSlot>() as u64 <= SLOT_SIZE);
    assert!(size_of::<SharedPage>() as u64 <= SLOT_SIZE);
    assert!(slot_gpa(MAX_VCPUS) <= GUEST_LOAD_GPA);
};

mod splitmix;
pub use splitmix::SplitMix64;
