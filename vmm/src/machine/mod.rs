//! The virtual machine: KVM VM, guest RAM, the loaded guest image and long-mode vCPUs.
//!
//! One small free function per setup step (as Firecracker's arch/x86_64/regs.rs): page tables,
//! GDT, segment registers, control registers, general registers, CPUID, mailbox.

use std::sync::atomic::Ordering;

use irqbench_abi::{self as abi, FaultRecord, PhaseDescriptor, PhaseRecord};
use kvm_bindings::{
    kvm_enable_cap, kvm_fpu, kvm_mp_state, kvm_regs, kvm_segment, kvm_sregs,
    kvm_userspace_memory_region, CpuId, KVM_CAP_EXIT_HYPERCALL, KVM_MP_STATE_RUNNABLE,
};
use kvm_ioctls::{Kvm, VcpuFd, VmFd};
use vm_memory::{ByteValued, Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};

use image::{GuestImage, ImageError};

pub mod decode;
pub mod image;
pub mod msi;

const CR0_PE: u64 = 1 << 0;
const CR0_ET: u64 = 1 << 4;
const CR0_NE: u64 = 1 << 5;
const CR0_WP: u64 = 1 << 16;
const CR0_PG: u64 = 1 << 31;
const CR4_PAE: u64 = 1 << 5;
const EFER_LME: u64 = 1 << 8;
const EFER_LMA: u64 = 1 << 10;
/// Present, writable, 2 MiB page.
const PDE_2M: u64 = 0x83;
/// Present, writable (a table pointer).
const PTE_TABLE: u64 = 0x03;
/// Where the (unused but architecturally required) TSS lives: inside the GDT page.
const TSS_GPA: u64 = abi::GDT_GPA + 0x800;
/// KVM needs three pages for the real-mode TSS on VMX; above 4 GiB-32 MiB like Firecracker.
const KVM_TSS_ADDRESS: usize = 0xFFFB_D000;

#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    #[error("creating the VM failed")]
    CreateVm(#[source] kvm_ioctls::Error),
    #[error("setting the KVM TSS address failed")]
    SetTssAddress(#[source] kvm_ioctls::Error),
    #[error("creating the in-kernel irqchip failed")]
    CreateIrqchip(#[source] kvm_ioctls::Error),
    #[error(
        "this KVM cannot forward vmcall to userspace: KVM_CAP_EXIT_HYPERCALL bitmask is {0:#x}, \
         without KVM_HC_MAP_GPA_RANGE (bit 12); use hypercall = \"port\""
    )]
    HypercallExitUnsupported(i32),
    #[error("enabling KVM_CAP_EXIT_HYPERCALL failed (needed for hypercall = \"vmcall\")")]
    EnableHypercallExit(#[source] kvm_ioctls::Error),
    #[error("allocating {mib} MiB of guest memory failed")]
    AllocateMemory {
        mib: u64,
        #[source]
        source: vm_memory::mmap::FromRangesError,
    },
    #[error("registering guest memory with KVM failed")]
    RegisterMemory(#[source] kvm_ioctls::Error),
    #[error("guest memory of {bytes} bytes is below the {min} bytes the guest layout needs")]
    MemoryTooSmall { bytes: u64, min: u64 },
    #[error("{vcpus} vCPUs requested; the guest supports 1..={max}")]
    TooManyVcpus { vcpus: u32, max: u32 },
    #[error("writing {what} into guest memory failed")]
    WriteMemory {
        what: &'static str,
        #[source]
        source: vm_memory::GuestMemoryError,
    },
    #[error("reading {what} from guest memory failed")]
    ReadMemory {
        what: &'static str,
        #[source]
        source: vm_memory::GuestMemoryError,
    },
    #[error(transparent)]
    Image(#[from] ImageError),
    #[error("creating vCPU {index} failed")]
    CreateVcpu {
        index: u32,
        #[source]
        source: kvm_ioctls::Error,
    },
    #[error("configuring vCPU {index} ({step}) failed")]
    ConfigureVcpu {
        index: u32,
        step: &'static str,
        #[source]
        source: kvm_ioctls::Error,
    },
}

/// Where interrupts are delivered from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IrqchipMode {
    /// KVM emulates the LAPIC (and PIC/IOAPIC): the guest's LAPIC timer works.
    InKernel,
    /// No in-kernel irqchip: the VMM injects with KVM_INTERRUPT.
    Userspace,
}

impl IrqchipMode {
    pub fn name(self) -> &'static str {
        match self {
            IrqchipMode::InKernel => "in-kernel",
            IrqchipMode::Userspace => "userspace",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MachineConfig {
    pub vcpus: u32,
    pub memory_bytes: u64,
    pub irqchip: IrqchipMode,
    /// Forward `vmcall` (KVM_HC_MAP_GPA_RANGE) to userspace.
    pub hypercall_exits: bool,
    /// `ipi`: one more vCPU (index `vcpus`), unmeasured, that sends the IPIs.
    pub ipi_sender: bool,
}

impl MachineConfig {
    /// vCPUs the VM has: the measured ones and the `ipi` sender.
    pub fn machine_vcpus(&self) -> u32 {
        self.vcpus + u32::from(self.ipi_sender)
    }
}

/// A booted-but-not-running VM: memory written, vCPUs configured.
#[derive(Debug)]
pub struct Machine {
    pub vm: VmFd,
    pub memory: GuestMemoryMmap,
    pub vcpus: Vec<VcpuFd>,
}

impl Machine {
    pub fn create(
        kvm: &Kvm,
        image: &GuestImage,
        config: MachineConfig,
    ) -> Result<Machine, MachineError> {
        if config.vcpus == 0 || config.machine_vcpus() > abi::MAX_VCPUS {
            return Err(MachineError::TooManyVcpus {
                vcpus: config.machine_vcpus(),
                max: abi::MAX_VCPUS,
            });
        }
        let vm = kvm.create_vm().map_err(MachineError::CreateVm)?;
        vm.set_tss_address(KVM_TSS_ADDRESS)
            .map_err(MachineError::SetTssAddress)?;
        if config.irqchip == IrqchipMode::InKernel {
            vm.create_irq_chip().map_err(MachineError::CreateIrqchip)?;
        }
        if config.hypercall_exits {
            enable_hypercall_exits(&vm)?;
        }
        let memory = create_memory(&vm, config.memory_bytes)?;
        write_page_tables(&memory)?;
        write_gdt(&memory)?;
        write_mailbox(&memory, config.vcpus, config.machine_vcpus())?;
        let entry = image.load(&memory)?;
        let cpuid =
            crate::kvm::supported_cpuid(kvm).map_err(|source| MachineError::ConfigureVcpu {
                index: 0,
                step: "KVM_GET_SUPPORTED_CPUID",
                source,
            })?;
        let mut vcpus = Vec::new();
        for index in 0..config.machine_vcpus() {
            let vcpu = vm
                .create_vcpu(u64::from(index))
                .map_err(|source| MachineError::CreateVcpu { index, source })?;
            configure_vcpu(&vcpu, index, entry, &cpuid)?;
            if config.irqchip == IrqchipMode::InKernel {
                make_runnable(&vcpu, index)?;
            }
            vcpus.push(vcpu);
        }
        Ok(Machine { vm, memory, vcpus })
    }
}

fn enable_hypercall_exits(vm: &VmFd) -> Result<(), MachineError> {
    // KVM API 8.34: KVM_CHECK_EXTENSION returns the bitmask of hypercalls that can exit.
    let supported = vm.check_extension_raw(u64::from(KVM_CAP_EXIT_HYPERCALL));
    if supported < 0 || (supported as u64) & (1 << abi::hypercall::KVM_HC_MAP_GPA_RANGE) == 0 {
        return Err(MachineError::HypercallExitUnsupported(supported));
    }
    let mut cap = kvm_enable_cap {
        cap: KVM_CAP_EXIT_HYPERCALL,
        ..Default::default()
    };
    // The one hypercall KVM_CAP_EXIT_HYPERCALL can forward to userspace.
    cap.args[0] = 1 << abi::hypercall::KVM_HC_MAP_GPA_RANGE;
    vm.enable_cap(&cap)
        .map_err(MachineError::EnableHypercallExit)
}

fn create_memory(vm: &VmFd, bytes: u64) -> Result<GuestMemoryMmap, MachineError> {
    if bytes < abi::MIN_MEM_BYTES {
        return Err(MachineError::MemoryTooSmall {
            bytes,
            min: abi::MIN_MEM_BYTES,
        });
    }
    let memory =
        GuestMemoryMmap::from_ranges(&[(GuestAddress(0), bytes as usize)]).map_err(|source| {
            MachineError::AllocateMemory {
                mib: bytes >> 20,
                source,
            }
        })?;
    let host =
        memory
            .get_host_address(GuestAddress(0))
            .map_err(|source| MachineError::ReadMemory {
                what: "the RAM mapping",
                source,
            })?;
    let region = kvm_userspace_memory_region {
        slot: 0,
        flags: 0,
        guest_phys_addr: 0,
        memory_size: bytes,
        userspace_addr: host as u64,
    };
    // SAFETY: `host` is the start of a live anonymous mapping of `bytes` bytes owned by `memory`,
    // which the Machine keeps alive for as long as the VM fd exists.
    unsafe { vm.set_user_memory_region(region) }.map_err(MachineError::RegisterMemory)?;
    Ok(memory)
}

fn write<T: ByteValued>(
    memory: &GuestMemoryMmap,
    what: &'static str,
    value: T,
    gpa: u64,
) -> Result<(), MachineError> {
    memory
        .write_obj(value, GuestAddress(gpa))
        .map_err(|source| MachineError::WriteMemory { what, source })
}

/// Identity-maps the first 4 GiB with 2 MiB pages (RAM, the LAPIC and the MMIO probe address).
fn write_page_tables(memory: &GuestMemoryMmap) -> Result<(), MachineError> {
    write(memory, "PML4", abi::PDPT_GPA | PTE_TABLE, abi::PML4_GPA)?;
    for pd in 0..abi::PD_COUNT {
        let pd_gpa = abi::PD_GPA + pd * 0x1000;
        write(memory, "PDPT", pd_gpa | PTE_TABLE, abi::PDPT_GPA + pd * 8)?;
        for entry in 0..512u64 {
            let addr = (pd << 30) | (entry << 21);
            write(memory, "page directory", addr | PDE_2M, pd_gpa + entry * 8)?;
        }
    }
    Ok(())
}

/// GDT descriptors for the segments `segment()` describes.
fn gdt_entry(seg: &kvm_segment) -> u64 {
    let base = seg.base;
    let limit = u64::from(seg.limit);
    (limit & 0xFFFF)
        | ((base & 0xFF_FFFF) << 16)
        | (u64::from(seg.type_) << 40)
        | (u64::from(seg.s) << 44)
        | (u64::from(seg.dpl) << 45)
        | (u64::from(seg.present) << 47)
        | (((limit >> 16) & 0xF) << 48)
        | (u64::from(seg.avl) << 52)
        | (u64::from(seg.l) << 53)
        | (u64::from(seg.db) << 54)
        | (u64::from(seg.g) << 55)
        | (((base >> 24) & 0xFF) << 56)
}

fn code_segment() -> kvm_segment {
    kvm_segment {
        base: 0,
        limit: 0xFFFF_FFFF,
        selector: abi::SEL_CODE64,
        type_: 0xB, // execute/read, accessed
        present: 1,
        dpl: 0,
        db: 0,
        s: 1,
        l: 1,
        g: 1,
        ..Default::default()
    }
}

fn data_segment(base: u64) -> kvm_segment {
    kvm_segment {
        base,
        limit: 0xFFFF_FFFF,
        selector: abi::SEL_DATA,
        type_: 0x3, // read/write, accessed
        present: 1,
        dpl: 0,
        db: 1,
        s: 1,
        l: 0,
        g: 1,
        ..Default::default()
    }
}

/// VMX requires a usable TR even though the guest never switches tasks or stacks.
fn tss_segment() -> kvm_segment {
    kvm_segment {
        base: TSS_GPA,
        limit: 0x67,
        selector: abi::SEL_TSS,
        type_: 0xB, // 64-bit TSS, busy
        present: 1,
        s: 0,
        ..Default::default()
    }
}

fn write_gdt(memory: &GuestMemoryMmap) -> Result<(), MachineError> {
    let tss = tss_segment();
    let entries = [
        0u64,
        gdt_entry(&code_segment()),
        gdt_entry(&data_segment(0)),
        gdt_entry(&tss),
        tss.base >> 32, // upper half of the 16-byte system descriptor
    ];
    for (i, e) in entries.iter().enumerate() {
        write(memory, "GDT", *e, abi::GDT_GPA + i as u64 * 8)?;
    }
    Ok(())
}

/// Newtypes so vm-memory can copy the mailbox records as bytes.
macro_rules! byte_valued {
    ($($name:ident($record:ty)),+ $(,)?) => {$(
        #[derive(Clone, Copy, Debug, Default)]
        #[repr(transparent)]
        struct $name($record);
        // SAFETY: each record is #[repr(C)] of integers with no padding (the size assertions
        // below check every one), so any bit pattern is a valid value.
        unsafe impl ByteValued for $name {}
    )+};
}

byte_valued!(
    DescriptorBytes(PhaseDescriptor),
    RecordBytes(PhaseRecord),
    FaultBytes(FaultRecord),
    BlockBytes(abi::BlockRecord),
);

/// The head and the counts both records start with.
const HEAD_AND_COUNTS: usize = 2 * 4 + 3 * 8 + 5 * 8;
const _: () = assert!(size_of::<abi::BlockRecord>() == HEAD_AND_COUNTS + 4 * 4);

const _: () = {
    // Eight u32s, two u64s, the u16 weights, four u32s, the u32 variant ids, then a u64, two
    // u32s and a u64: no padding.
    assert!(
        size_of::<PhaseDescriptor>()
            == 8 * 4
                + 2 * 8
                + 2 * abi::strategy::WEIGHT_SLOTS
                + 4 * 4
                + 4 * abi::MAX_VARIANTS
                + 8
                + 2 * 4
                + 8
    );
    assert!(
        size_of::<PhaseRecord>() == HEAD_AND_COUNTS + 2 * 4 + 8 * abi::strategy::COUNT as usize
    );
    assert!(size_of::<FaultRecord>() == 7 * 8);
};

/// Initial mailbox: the shared page and each vCPU's slot header (the guest checks magic/version);
/// `vcpu_count` is the measured vCPUs (the barrier's and the `ipi` sender's count).
fn write_mailbox(memory: &GuestMemoryMmap, vcpus: u32, all: u32) -> Result<(), MachineError> {
    let shared = abi::MAILBOX_GPA;
    write(memory, "mailbox", abi::MAILBOX_MAGIC, shared)?;
    write(memory, "mailbox", abi::ABI_VERSION, shared + 4)?;
    write(memory, "mailbox", vcpus, shared + 8)?;
    for index in 0..all {
        let slot = abi::slot_gpa(index);
        write(memory, "mailbox slot", abi::MAILBOX_MAGIC, slot)?;
        write(memory, "mailbox slot", abi::ABI_VERSION, slot + 4)?;
        write(memory, "mailbox slot", index, slot + 8)?;
        write(memory, "mailbox slot", vcpus, slot + 12)?;
    }
    Ok(())
}

/// The host's view of the mailbox. Reads return raw guest data: validate before trusting.
#[derive(Clone, Debug)]
pub struct Mailbox {
    memory: GuestMemoryMmap,
}

impl Mailbox {
    pub fn new(memory: GuestMemoryMmap) -> Mailbox {
        Mailbox { memory }
    }

    pub fn write_phase(&self, index: u32, phase: &PhaseDescriptor) -> Result<(), MachineError> {
        write(
            &self.memory,
            "phase descriptor",
            DescriptorBytes(*phase),
            abi::slot_gpa(index) + std::mem::offset_of!(abi::VcpuSlot, phase) as u64,
        )
    }

    /// The `T` at byte `offset` of vCPU `index`'s slot (raw guest data: validate it).
    fn read_slot<T: ByteValued>(
        &self,
        index: u32,
        offset: usize,
        what: &'static str,
    ) -> Result<T, MachineError> {
        self.memory
            .read_obj::<T>(GuestAddress(abi::slot_gpa(index) + offset as u64))
            .map_err(|source| MachineError::ReadMemory { what, source })
    }

    pub fn read_record(&self, index: u32) -> Result<PhaseRecord, MachineError> {
        let offset = std::mem::offset_of!(abi::VcpuSlot, record);
        self.read_slot::<RecordBytes>(index, offset, "phase record")
            .map(|r| r.0)
    }

    pub fn read_block(&self, index: u32) -> Result<abi::BlockRecord, MachineError> {
        self.read_slot::<BlockBytes>(index, abi::offset::SLOT_BLOCK, "block record")
            .map(|r| r.0)
    }

    /// `ipi`'s sender: its ring of ICR-write cycles.
    pub fn read_icr_cycles(
        &self,
        index: u32,
    ) -> Result<[u32; abi::irq::ICR_SAMPLES], MachineError> {
        let offset = std::mem::offset_of!(abi::VcpuSlot, icr_cycles);
        self.read_slot::<[u32; abi::irq::ICR_SAMPLES]>(index, offset, "ICR cycles")
    }

    pub fn read_fault(&self, index: u32) -> Result<FaultRecord, MachineError> {
        self.read_slot::<FaultBytes>(index, abi::offset::SLOT_FAULT, "fault record")
            .map(|r| r.0)
    }

    /// `pv-event`: raise (1) or acknowledge (0) the virtual-IF pending byte.
    pub fn set_vif_pending(&self, index: u32, value: u8) -> Result<(), MachineError> {
        let gpa = abi::slot_gpa(index) + abi::offset::SLOT_VIF_PENDING as u64;
        self.memory
            .store(value, GuestAddress(gpa), Ordering::SeqCst)
            .map_err(|source| MachineError::WriteMemory {
                what: "vif pending byte",
                source,
            })
    }

    /// Times a raise for the guest's latency log: writes `guest_tsc` as the slot's
    /// `raise_tsc` unless a raise is already waiting (the guest only ever swaps it to 0, and one
    /// thread raises, so load-then-store does not race).
    pub fn mark_raise(&self, index: u32, guest_tsc: u64) -> Result<(), MachineError> {
        let gpa = GuestAddress(abi::slot_gpa(index) + abi::offset::SLOT_RAISE_TSC as u64);
        let err = |source| MachineError::WriteMemory {
            what: "raise time",
            source,
        };
        if self
            .memory
            .load::<u64>(gpa, Ordering::SeqCst)
            .map_err(err)?
            == 0
        {
            self.memory
                .store(guest_tsc.max(1), gpa, Ordering::SeqCst)
                .map_err(err)?;
        }
        Ok(())
    }

    /// The guest's latency-log count since boot.
    pub fn latency_count(&self, index: u32) -> Result<u64, MachineError> {
        self.read_slot::<u64>(index, abi::offset::SLOT_LATENCY_COUNT, "latency count")
    }

    /// The latency entries logged since `*cursor` (advanced to the count read), each with the
    /// RIP its interrupt was taken at, and how many of them the ring had already overwritten.
    /// Raw guest data: entries are only ever bounded numbers, and a count that went backwards
    /// reads as nothing new.
    pub fn read_latencies(
        &self,
        index: u32,
        cursor: &mut u64,
    ) -> Result<(Vec<(u64, u64)>, u64), MachineError> {
        let count = self.latency_count(index)?;
        let new = count.saturating_sub(*cursor);
        let len = abi::latency::LOG_LEN as u64;
        let kept = new.min(len);
        let mut entries = Vec::with_capacity(kept as usize);
        for i in count - kept..count {
            let at = 8 * (i % len) as usize;
            let entry =
                self.read_slot::<u64>(index, abi::offset::SLOT_LATENCY_LOG + at, "latency log")?;
            let rip =
                self.read_slot::<u64>(index, abi::offset::SLOT_LATENCY_RIP + at, "latency log")?;
            entries.push((entry, rip));
        }
        *cursor = count;
        Ok((entries, new - kept))
    }

    pub fn read_u64(&self, gpa: u64, what: &'static str) -> Result<u64, MachineError> {
        self.memory
            .read_obj::<u64>(GuestAddress(gpa))
            .map_err(|source| MachineError::ReadMemory { what, source })
    }

    pub fn write_u64(&self, gpa: u64, value: u64, what: &'static str) -> Result<(), MachineError> {
        write(&self.memory, what, value, gpa)
    }

    /// Guest bytes at `gpa` (for decoding the instruction at a RIP); short or empty when the
    /// address is outside RAM.
    pub fn read_bytes(&self, gpa: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0u8; len];
        // `read` (unlike `read_slice`) stops at the end of RAM and says how far it got.
        let got = self.memory.read(&mut buf, GuestAddress(gpa)).unwrap_or(0);
        buf.truncate(got);
        buf
    }
}

fn configure_vcpu(
    vcpu: &VcpuFd,
    index: u32,
    entry: u64,
    supported: &CpuId,
) -> Result<(), MachineError> {
    let step = |step: &'static str| {
        move |source| MachineError::ConfigureVcpu {
            index,
            step,
            source,
        }
    };
    vcpu.set_cpuid2(&vcpu_cpuid(supported, index))
        .map_err(step("KVM_SET_CPUID2"))?;
    let mut sregs = vcpu.get_sregs().map_err(step("KVM_GET_SREGS"))?;
    setup_sregs(&mut sregs, index);
    vcpu.set_sregs(&sregs).map_err(step("KVM_SET_SREGS"))?;
    vcpu.set_regs(&initial_regs(entry, index))
        .map_err(step("KVM_SET_REGS"))?;
    let fpu = kvm_fpu {
        fcw: 0x37F,
        mxcsr: 0x1F80,
        ..Default::default()
    };
    vcpu.set_fpu(&fpu).map_err(step("KVM_SET_FPU"))?;
    Ok(())
}

/// With an in-kernel irqchip KVM models the x86 boot protocol: vCPU 0 is the BSP and every other
/// vCPU starts as an application processor in KVM_MP_STATE_UNINITIALIZED, waiting for an
/// INIT/SIPI that this guest never sends, so KVM_RUN on it never enters the guest. Every vCPU here
/// already has its long-mode registers, so it is made runnable directly. KVM API documentation
/// (Documentation/virt/kvm/api.rst) 4.38 KVM_GET_MP_STATE lists the states, and 4.39
/// KVM_SET_MP_STATE says that on x86 the ioctl "is only useful after KVM_CREATE_IRQCHIP"
/// (without one userspace owns the state, and every vCPU already runs). The ioctl is generic x86
/// code, the same on VMX, SVM and PVM; it comes after KVM_SET_REGS/SREGS because those never
/// change the MP state of an AP, while setting RUNNABLE last leaves no INIT latched.
fn make_runnable(vcpu: &VcpuFd, index: u32) -> Result<(), MachineError> {
    vcpu.set_mp_state(kvm_mp_state {
        mp_state: KVM_MP_STATE_RUNNABLE,
    })
    .map_err(|source| MachineError::ConfigureVcpu {
        index,
        step: "KVM_SET_MP_STATE",
        source,
    })
}

/// The supported CPUID with this vCPU's APIC id, so every vCPU is distinct to the guest.
fn vcpu_cpuid(supported: &CpuId, index: u32) -> CpuId {
    let mut cpuid = supported.clone();
    for entry in cpuid.as_mut_slice() {
        match entry.function {
            1 => entry.ebx = (entry.ebx & 0x00FF_FFFF) | (index << 24),
            0xB | 0x1F => entry.edx = index,
            _ => {}
        }
    }
    cpuid
}

/// 64-bit long mode with paging; %gs points at the vCPU's mailbox slot.
fn setup_sregs(sregs: &mut kvm_sregs, index: u32) {
    sregs.cs = code_segment();
    let data = data_segment(0);
    sregs.ds = data;
    sregs.es = data;
    sregs.fs = data;
    sregs.ss = data;
    sregs.gs = data_segment(abi::slot_gpa(index));
    sregs.tr = tss_segment();
    sregs.gdt.base = abi::GDT_GPA;
    sregs.gdt.limit = 5 * 8 - 1;
    // No IDT until the guest loads its own: an exception before that is a triple fault, which
    // the VMM reports as such.
    sregs.idt.base = 0;
    sregs.idt.limit = 0;
    sregs.cr0 = CR0_PE | CR0_ET | CR0_NE | CR0_WP | CR0_PG;
    sregs.cr3 = abi::PML4_GPA;
    // CR4.OSFXSR stays clear: an SSE instruction raises #UD, reported with its RIP, instead of
    // running on one host and failing emulation on another.
    sregs.cr4 = CR4_PAE;
    sregs.efer = EFER_LME | EFER_LMA;
}

fn initial_regs(entry: u64, index: u32) -> kvm_regs {
    kvm_regs {
        rip: entry,
        rsp: abi::stack_top(index),
        rdi: u64::from(index),
        rsi: abi::slot_gpa(index),
        rflags: 0x2, // reserved bit 1; IF clear until the guest has an IDT
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gdt_code_descriptor_is_the_canonical_long_mode_one() {
        assert_eq!(gdt_entry(&code_segment()), 0x00AF_9B00_0000_FFFF);
        assert_eq!(gdt_entry(&data_segment(0)), 0x00CF_9300_0000_FFFF);
    }

    /// A fault report decodes what it can of the bytes at a RIP: all of them inside RAM, the
    /// part before its end when they straddle it, none outside.
    #[test]
    fn read_bytes_stops_at_the_end_of_ram() {
        let memory = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0x2000)]).unwrap();
        memory
            .write_slice(&[0xAB; 8], GuestAddress(0x1FF8))
            .unwrap();
        let mailbox = Mailbox::new(memory);
        assert_eq!(mailbox.read_bytes(0x100, 16).len(), 16);
        assert_eq!(mailbox.read_bytes(0x1FFC, 16), [0xAB; 4]);
        assert!(mailbox.read_bytes(0x2000, 16).is_empty());
        assert!(mailbox.read_bytes(u64::MAX - 3, 16).is_empty());
    }

    #[test]
    fn creates_a_machine_on_real_kvm() {
        let Some(kvm) = crate::host::test_kvm() else {
            return;
        };
        let image = GuestImage::embedded().expect("embedded guest");
        let m = Machine::create(
            &kvm,
            &image,
            MachineConfig {
                vcpus: 2,
                memory_bytes: 16 << 20,
                irqchip: IrqchipMode::Userspace,
                hypercall_exits: false,
                ipi_sender: false,
            },
        )
        .expect("machine");
        assert_eq!(m.vcpus.len(), 2);
        let regs = m.vcpus[1].get_regs().expect("regs");
        assert_eq!(regs.rsi, abi::slot_gpa(1));
        let sregs = m.vcpus[1].get_sregs().expect("sregs");
        assert_eq!(sregs.gs.base, abi::slot_gpa(1));
        assert_eq!(sregs.efer & EFER_LMA, EFER_LMA);
        let mailbox = Mailbox::new(m.memory.clone());
        assert_eq!(
            mailbox.read_u64(abi::slot_gpa(1), "slot").expect("read") as u32,
            abi::MAILBOX_MAGIC
        );
    }

    /// Application processors used to stay in KVM_MP_STATE_UNINITIALIZED under the in-kernel
    /// irqchip: a 2-vCPU lapic-timer run never booted vCPU 1. Each vCPU must boot and take its
    /// own timer interrupts.
    #[test]
    fn every_vcpu_boots_and_ticks_with_the_in_kernel_irqchip() {
        use crate::config::plan::{IrqSource, Plan, Workload};
        let Some(kvm) = crate::host::test_kvm() else {
            return;
        };
        let image = std::sync::Arc::new(GuestImage::embedded().expect("embedded guest"));
        let tsc_khz = crate::host::manifest(&kvm).expect("manifest").tsc_khz;
        for vcpus in [1u32, 2, 4] {
            // 20 ms of idling: 100 periods of 200 µs, however fast the host runs guest code
            // (a PVM host delivers about one tick in eight).
            let idle = Workload::Idle {
                tsc_cycles: 20 * tsc_khz,
            };
            let mut phase = Plan::single(idle, vcpus, 1).phases.remove(0);
            phase.irq = IrqSource::LapicTimer { period_us: 200.0 };
            let (session, d) = crate::session::run_raw(
                &kvm,
                &image,
                &phase,
                IrqchipMode::InKernel,
                std::time::Duration::from_secs(60),
            )
            .unwrap_or_else(|e| panic!("{vcpus} vCPUs: {}", crate::error_chain(&e, ": ")));
            assert_eq!(d.records.len(), vcpus as usize);
            for (i, r) in d.records.iter().enumerate() {
                assert!(
                    r.counts.interrupts > 0,
                    "{vcpus} vCPUs: vCPU {i} took no timer interrupt in {} cycles",
                    r.tsc_cycles
                );
            }
            session.shutdown();
        }
    }

    #[test]
    fn memory_below_the_layout_minimum_is_refused() {
        let Some(kvm) = crate::host::test_kvm() else {
            return;
        };
        let image = GuestImage::embedded().expect("embedded guest");
        let err = Machine::create(
            &kvm,
            &image,
            MachineConfig {
                vcpus: 1,
                memory_bytes: 1 << 20,
                irqchip: IrqchipMode::Userspace,
                hypercall_exits: false,
                ipi_sender: false,
            },
        )
        .expect_err("too small");
        assert!(err.to_string().contains("below"), "{err}");
    }
}
