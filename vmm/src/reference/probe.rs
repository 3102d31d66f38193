//! The raw-KVM side of the reference: one VM, one vCPU, the [`super::guest`] code, and a host
//! loop that is nothing but KVM_RUN and the answer to the guest's `in`. No irqbench machinery
//! (Machine, Session, vcpu loop, stats fds) is used, so what it reaches is what this host
//! allows.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use kvm_bindings::{kvm_segment, kvm_userspace_memory_region};
use kvm_ioctls::{Kvm, VcpuExit, VcpuFd, VmFd};
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};

use super::guest::{self, Body, Code};
use super::ReferenceError;
use crate::vcpu::Stop;

/// One block as the guest timed it, and the host's share of its exits.
#[derive(Clone, Copy, Debug, Default)]
pub struct BlockTiming {
    /// Guest TSC cycles between the two `rdtsc`s around the loop.
    pub cycles: u64,
    /// Port-I/O exits inside the block (the [`Body::PortOut`] variant only).
    pub exits: u64,
    /// Host time from KVM_RUN returning those exits to entering KVM_RUN again.
    pub host_in_exits: Duration,
    /// Context switches of this thread over the block (getrusage RUSAGE_THREAD, voluntary and
    /// involuntary): above 0, the host took the CPU away while the block ran.
    pub switches: u64,
}

/// This thread's context switches so far.
fn switches() -> u64 {
    // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD with a valid out-pointer has no other preconditions.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    if rc != 0 {
        return 0;
    }
    (usage.ru_nvcsw + usage.ru_nivcsw) as u64
}

/// A booted reference VM, waiting at its `in` for the next block.
/// Field order is drop order: the watchdog thread ends before the vCPU fd closes.
#[derive(Debug)]
pub struct Probe {
    watchdog: Watchdog,
    vcpu: VcpuFd,
    _vm: VmFd,
    memory: GuestMemoryMmap,
    code: Code,
}

const PDE_2M: u64 = 0x83; // present, writable, 2 MiB page
const PTE_TABLE: u64 = 0x3; // present, writable

fn step(what: &'static str) -> impl Fn(kvm_ioctls::Error) -> ReferenceError {
    move |source| ReferenceError::Kvm { what, source }
}

fn write_u64(memory: &GuestMemoryMmap, gpa: u64, value: u64) -> Result<(), ReferenceError> {
    memory
        .write_obj(value, GuestAddress(gpa))
        .map_err(|source| ReferenceError::Memory { gpa, source })
}

fn segment(selector: u16, type_: u8, l: u8, db: u8) -> kvm_segment {
    kvm_segment {
        base: 0,
        limit: 0xFFFF_FFFF,
        selector,
        type_,
        present: 1,
        s: 1,
        l,
        db,
        g: 1,
        ..Default::default()
    }
}

/// Identity map of the RAM in 2 MiB pages, a GDT with a 64-bit code and a data segment and a TSS (VMX
/// wants a usable TR), and the code.
fn lay_out(memory: &GuestMemoryMmap, code: &Code) -> Result<(), ReferenceError> {
    write_u64(memory, guest::PML4_GPA, guest::PDPT_GPA | PTE_TABLE)?;
    write_u64(memory, guest::PDPT_GPA, guest::PD_GPA | PTE_TABLE)?;
    for page in 0..(guest::MEMORY_BYTES as u64 >> 21) {
        write_u64(memory, guest::PD_GPA + 8 * page, (page << 21) | PDE_2M)?;
    }
    let tss = guest::TSS_GPA;
    let tss_low = 0x67 | ((tss & 0xFF_FFFF) << 16) | (0x8B << 40) | (((tss >> 24) & 0xFF) << 56);
    let gdt = [0, 0x00AF_9B00_0000_FFFF, 0x00CF_9300_0000_FFFF, tss_low, 0];
    for (i, entry) in gdt.iter().enumerate() {
        write_u64(memory, guest::GDT_GPA + 8 * i as u64, *entry)?;
    }
    memory
        .write_slice(&code.bytes, GuestAddress(guest::CODE_GPA))
        .map_err(|source| ReferenceError::Memory {
            gpa: guest::CODE_GPA,
            source,
        })
}

fn set_up_vcpu(kvm: &Kvm, vcpu: &VcpuFd) -> Result<(), ReferenceError> {
    let cpuid = crate::kvm::supported_cpuid(kvm).map_err(step("KVM_GET_SUPPORTED_CPUID"))?;
    vcpu.set_cpuid2(&cpuid).map_err(step("KVM_SET_CPUID2"))?;
    let mut sregs = vcpu.get_sregs().map_err(step("KVM_GET_SREGS"))?;
    sregs.cs = segment(0x08, 0xB, 1, 0);
    let data = segment(0x10, 0x3, 0, 1);
    (sregs.ds, sregs.es, sregs.fs, sregs.gs, sregs.ss) = (data, data, data, data, data);
    sregs.tr = kvm_segment {
        base: guest::TSS_GPA,
        limit: 0x67,
        selector: 0x18,
        type_: 0xB,
        present: 1,
        ..Default::default()
    };
    sregs.gdt.base = guest::GDT_GPA;
    sregs.gdt.limit = 5 * 8 - 1;
    sregs.cr0 = 0x8001_0031; // PG, WP, NE, ET, PE: irqbench's guest's
    sregs.cr3 = guest::PML4_GPA;
    sregs.cr4 = 0x20; // PAE
    sregs.efer = 0x500; // LME, LMA
    vcpu.set_sregs(&sregs).map_err(step("KVM_SET_SREGS"))?;
    let regs = kvm_bindings::kvm_regs {
        rip: guest::CODE_GPA,
        rsp: guest::STACK_TOP,
        // IF set, as irqbench's guest runs its strategies (nothing can interrupt: there is no
        // irqchip and nothing injects).
        rflags: 0x202,
        ..Default::default()
    };
    vcpu.set_regs(&regs).map_err(step("KVM_SET_REGS"))
}

impl Probe {
    /// Creates the VM and runs the guest to its first `in`.
    pub fn boot(kvm: &Kvm, stop: Stop) -> Result<Probe, ReferenceError> {
        let vm = kvm.create_vm().map_err(step("KVM_CREATE_VM"))?;
        let memory = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), guest::MEMORY_BYTES)])
            .map_err(ReferenceError::Mmap)?;
        let code = guest::code();
        lay_out(&memory, &code)?;
        let host = memory
            .get_host_address(GuestAddress(0))
            .map_err(|source| ReferenceError::Memory { gpa: 0, source })?;
        let slot = kvm_userspace_memory_region {
            slot: 0,
            flags: 0,
            guest_phys_addr: 0,
            memory_size: guest::MEMORY_BYTES as u64,
            userspace_addr: host as u64,
        };
        // SAFETY: the region is a live anonymous mapping of MEMORY_BYTES owned by `memory`,
        // which the Probe keeps (and drops after the VM fd's users are gone).
        unsafe { vm.set_user_memory_region(slot) }.map_err(step("KVM_SET_USER_MEMORY_REGION"))?;
        let mut vcpu = vm.create_vcpu(0).map_err(step("KVM_CREATE_VCPU"))?;
        set_up_vcpu(kvm, &vcpu)?;
        let mut probe = Probe {
            watchdog: Watchdog::start(&mut vcpu, stop),
            vcpu,
            _vm: vm,
            memory,
            code,
        };
        probe.run_to_ask(Duration::from_secs(10))?;
        Ok(probe)
    }

    /// Runs one block of `iterations` of `body`; bounded by `timeout`.
    pub fn block(
        &mut self,
        body: Body,
        iterations: u32,
        timeout: Duration,
    ) -> Result<BlockTiming, ReferenceError> {
        let index = Body::ALL.iter().position(|b| *b == body).unwrap_or(0);
        let entry = self.code.entries[index];
        self.answer(entry, iterations.max(1))?;
        let before = switches();
        let timing = self.run_to_ask(timeout)?;
        let switched = switches().saturating_sub(before);
        let cycles: u64 = self
            .memory
            .read_obj(GuestAddress(guest::RESULT_GPA))
            .map_err(|source| ReferenceError::Memory {
                gpa: guest::RESULT_GPA,
                source,
            })?;
        Ok(BlockTiming {
            cycles,
            switches: switched,
            ..timing
        })
    }

    /// Puts the iteration count in memory and the entry address in the pending `in`'s data.
    fn answer(&mut self, entry: u32, iterations: u32) -> Result<(), ReferenceError> {
        self.memory
            .write_obj(iterations, GuestAddress(guest::ITERATIONS_GPA))
            .map_err(|source| ReferenceError::Memory {
                gpa: guest::ITERATIONS_GPA,
                source,
            })?;
        let run = self.vcpu.get_kvm_run();
        // SAFETY: the vCPU stopped at the guest's 4-byte `in` (run_to_ask returned on it), so
        // the `io` member of the exit union is the valid one (KVM API, KVM_EXIT_IO).
        let io = unsafe { run.__bindgen_anon_1.io };
        let base = run as *mut kvm_bindings::kvm_run as *mut u8;
        let bytes = entry.to_le_bytes();
        let len = bytes.len().min(io.size as usize);
        // SAFETY: KVM places the I/O data inside the kvm_run mapping at data_offset; at most 4
        // bytes, the access size, are written.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), base.add(io.data_offset as usize), len);
        }
        Ok(())
    }

    /// KVM_RUN until the guest's next `in`; counts (and times the host side of) its `out`s.
    fn run_to_ask(&mut self, timeout: Duration) -> Result<BlockTiming, ReferenceError> {
        self.watchdog.arm(timeout);
        let mut timing = BlockTiming::default();
        let mut out_returned: Option<Instant> = None;
        let result = loop {
            if let Some(t) = out_returned.take() {
                timing.host_in_exits += t.elapsed();
            }
            let exit = self.vcpu.run();
            let returned = Instant::now();
            match exit {
                Ok(VcpuExit::IoOut(guest::PORT, _)) => {
                    timing.exits += 1;
                    out_returned = Some(returned);
                }
                Ok(VcpuExit::IoIn(guest::PORT, data)) if data.len() == 4 => break Ok(timing),
                Ok(other) => break Err(ReferenceError::Exit(format!("{other:?}"))),
                Err(e) if e.errno() == libc::EINTR => {
                    self.vcpu.set_kvm_immediate_exit(0);
                    if self.watchdog.fired() {
                        break Err(ReferenceError::Timeout(timeout));
                    }
                }
                Err(e) => break Err(step("KVM_RUN")(e)),
            }
        };
        self.watchdog.disarm();
        result
    }

    /// The vCPU, for diagnostics (its stats fd).
    #[cfg(test)]
    pub fn vcpu_fd(&self) -> &VcpuFd {
        &self.vcpu
    }

    /// Sends the guest to its `hlt` and lets it halt.
    pub fn finish(mut self) {
        let halt = self.code.halt;
        if self.answer(halt, 1).is_ok() {
            let _ = self.vcpu.run();
        }
    }
}

/// Kicks the probe's thread out of KVM_RUN once an armed deadline has passed or `stop` is set:
/// it sets `immediate_exit` (so a kick that lands just before KVM_RUN is not lost) and sends the
/// kick signal, again every 50 ms while the deadline stays armed. One thread for the probe's
/// life, not one per block: the blocks' gaps are part of the time the reference is charged.
#[derive(Debug)]
struct Watchdog {
    /// Ends the thread (the probe's drop sets it).
    done: Stop,
    shared: Arc<Armed>,
    thread: Option<thread::JoinHandle<()>>,
    base: Instant,
}

#[derive(Debug, Default)]
struct Armed {
    /// Nanoseconds after `base` when the armed run must end; 0 when disarmed.
    deadline_ns: AtomicU64,
    /// pthread_t of the thread in KVM_RUN.
    target: AtomicU64,
    fired: AtomicBool,
}

impl Watchdog {
    fn start(vcpu: &mut VcpuFd, stop: Stop) -> Watchdog {
        crate::vcpu::install_kick_handler();
        let flag = &mut vcpu.get_kvm_run().immediate_exit as *mut u8 as usize;
        let done = Stop::new();
        let ended = done.clone();
        let shared = Arc::new(Armed::default());
        let armed = Arc::clone(&shared);
        let base = Instant::now();
        let thread = thread::spawn(move || loop {
            if ended.sleep(Duration::from_millis(50)) {
                return;
            }
            let deadline = armed.deadline_ns.load(Ordering::SeqCst);
            let late = deadline != 0 && base.elapsed().as_nanos() as u64 >= deadline;
            if deadline != 0 && (late || stop.is_set()) {
                armed.fired.store(true, Ordering::SeqCst);
                let target = armed.target.load(Ordering::SeqCst) as libc::pthread_t;
                // SAFETY: `flag` is kvm_run.immediate_exit of the probe's vCPU, whose fd
                // outlives this thread (Probe's drop joins it first); `target` is the thread
                // in run_to_ask, which keeps the deadline armed only while it is there.
                unsafe {
                    (flag as *mut u8).write_volatile(1);
                    libc::pthread_kill(target, crate::vcpu::kick_signal());
                }
            }
        });
        Watchdog {
            done,
            shared,
            thread: Some(thread),
            base,
        }
    }

    fn arm(&self, timeout: Duration) {
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() };
        self.shared.target.store(me as u64, Ordering::SeqCst);
        self.shared.fired.store(false, Ordering::SeqCst);
        let at = (self.base.elapsed() + timeout).as_nanos().max(1) as u64;
        self.shared.deadline_ns.store(at, Ordering::SeqCst);
    }

    fn disarm(&self) {
        self.shared.deadline_ns.store(0, Ordering::SeqCst);
    }

    fn fired(&self) -> bool {
        self.shared.fired.load(Ordering::SeqCst)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.request();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
