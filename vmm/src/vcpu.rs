//! One vCPU thread: the KVM_RUN loop, every userspace exit counted by reason, phase boundaries
//! (doorbells) snapshotting the vCPU's KVM stats, and an outcome enum when the loop ends.
//!
//! The loop talks to the runner over two channels: it receives [`VcpuCommand`]s when the guest
//! asks for work on the command port, and sends [`VcpuEvent`]s (booted, phase done, exited).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use irqbench_abi::{self as abi, port, PhaseDescriptor, PhaseRecord};
use kvm_bindings::{kvm_interrupt, kvm_regs, KVMIO};
use kvm_ioctls::{SyncReg, VcpuExit, VcpuFd};
use vmm_sys_util::ioctl::ioctl_with_ref;
use vmm_sys_util::{ioctl_iow_nr, signal};

use crate::decode;
use crate::kvm_stats::{StatsDelta, StatsFd, StatsSnapshot};
use crate::machine::{Mailbox, KVM_HC_MAP_GPA_RANGE};
use crate::protocol::{self, Doorbell};

// kvm-ioctls has no wrapper for KVM_INTERRUPT (userspace irqchip injection).
ioctl_iow_nr!(KVM_INTERRUPT, KVMIO, 0x86, kvm_interrupt);

/// The signal that kicks a vCPU thread out of KVM_RUN (SIGRTMIN + this).
const KICK_SIGNAL_OFFSET: i32 = 2;

/// What the runner asks of a vCPU when its guest wants work.
#[derive(Clone, Debug)]
pub enum VcpuCommand {
    Run(PhaseDescriptor),
    Shutdown,
}

/// Userspace exits by reason.
pub type ExitCounts = BTreeMap<&'static str, u64>;

/// Everything one vCPU measured in one phase (BEGIN to END doorbell).
#[derive(Clone, Debug, Default)]
pub struct PhaseSample {
    pub index: u32,
    pub record: PhaseRecord,
    /// KVM stat deltas of this vCPU; `None` where the host has no binary stats.
    pub stats: Option<StatsDelta>,
    /// Userspace exits by reason, doorbell markers excluded.
    pub exits: ExitCounts,
    /// (rip, reason) → count, for attribution to guest symbols.
    pub exit_rips: BTreeMap<(u64, &'static str), u64>,
    /// PING doorbells seen.
    pub pings: u64,
    /// Hypercalls seen by the VMM (port or vmcall).
    pub hypercalls: u64,
    /// Interrupts injected with KVM_INTERRUPT.
    pub injected: u64,
    pub wall: Duration,
}

/// Why a vCPU stopped running. Every arm but `Finished` ends the run with an error report.
#[derive(Debug)]
pub enum VcpuOutcome {
    /// The guest halted after the runner's `Shutdown`.
    Finished,
    /// Stopped by the runner (watchdog, signal).
    Stopped { rip: u64, instruction: String },
    /// The guest faulted or KVM could not run it.
    Fault(Box<FaultReport>),
    /// The guest wrote something the protocol does not allow.
    ProtocolViolation(String),
}

/// What goes from a vCPU thread to the runner.
#[derive(Debug)]
pub enum VcpuEvent {
    Booted { index: u32 },
    PhaseDone(Box<PhaseSample>),
    Exited { index: u32, outcome: VcpuOutcome },
}

/// A guest that faulted: registers and the instruction at RIP.
#[derive(Clone, Debug)]
pub struct FaultReport {
    pub vcpu: u32,
    pub kind: String,
    pub rip: u64,
    pub instruction: String,
    pub symbol: Option<String>,
    pub regs: Option<kvm_regs>,
    pub cr2: Option<u64>,
}

impl fmt::Display for FaultReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "vCPU {}: {}", self.vcpu, self.kind)?;
        write!(f, "  rip {:#018x}", self.rip)?;
        if let Some(sym) = &self.symbol {
            write!(f, " <{sym}>")?;
        }
        writeln!(f, ": {}", self.instruction)?;
        if let Some(r) = &self.regs {
            let rows = [
                [
                    ("rax", r.rax),
                    ("rbx", r.rbx),
                    ("rcx", r.rcx),
                    ("rdx", r.rdx),
                ],
                [
                    ("rsi", r.rsi),
                    ("rdi", r.rdi),
                    ("rbp", r.rbp),
                    ("rsp", r.rsp),
                ],
                [("r8", r.r8), ("r9", r.r9), ("r10", r.r10), ("r11", r.r11)],
                [
                    ("r12", r.r12),
                    ("r13", r.r13),
                    ("r14", r.r14),
                    ("r15", r.r15),
                ],
            ];
            for row in rows {
                for (name, value) in row {
                    write!(f, "  {name:<3} {value:#018x}")?;
                }
                writeln!(f)?;
            }
            write!(f, "  rflags {:#010x}", r.rflags)?;
        }
        if let Some(cr2) = self.cr2 {
            write!(f, " cr2 {cr2:#018x}")?;
        }
        Ok(())
    }
}

/// Shared between a vCPU thread and the runner's helper threads.
#[derive(Debug, Default)]
pub struct VcpuControl {
    /// Stop at the next exit (watchdog, Ctrl-C).
    pub stop: AtomicBool,
    /// `inject`: an interrupt waits to be injected.
    pub irq_pending: AtomicBool,
    /// Raised by the irq source thread, for the report.
    pub irqs_raised: AtomicU64,
    thread: Mutex<Option<libc::pthread_t>>,
}

impl VcpuControl {
    /// Interrupt the thread's KVM_RUN (it returns EINTR). Harmless when not in KVM_RUN: every
    /// loop iteration checks the flags before entering the guest again.
    pub fn kick(&self) {
        let guard = self.thread.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(thread) = *guard {
            // SAFETY: `thread` is a live thread of this process: it is cleared (under this lock)
            // before the vCPU thread exits.
            unsafe { libc::pthread_kill(thread, kick_signal()) };
        }
    }
}

fn kick_signal() -> i32 {
    signal::SIGRTMIN() + KICK_SIGNAL_OFFSET
}

thread_local! {
    /// This thread's `kvm_run.immediate_exit`, set while the thread owns a vCPU.
    static IMMEDIATE_EXIT: Cell<*mut u8> = const { Cell::new(std::ptr::null_mut()) };
}

/// KVM API (KVM_RUN, `immediate_exit`): a signal that arrives just before KVM_RUN would be
/// lost; setting `immediate_exit` from the handler makes that KVM_RUN return EINTR at once.
extern "C" fn on_kick(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // A const-initialised thread-local without destructor: async-signal-safe to read.
    let flag = IMMEDIATE_EXIT
        .try_with(Cell::get)
        .unwrap_or(std::ptr::null_mut());
    if !flag.is_null() {
        // SAFETY: the pointer is this thread's kvm_run.immediate_exit, which stays mapped while
        // it is registered (run_vcpu clears it before the vCPU fd can be dropped).
        unsafe { flag.write_volatile(1) };
    }
}

/// Installs the (empty) kick handler once per process: its only job is to make KVM_RUN return.
pub fn install_kick_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if let Err(e) = signal::register_signal_handler(kick_signal(), on_kick) {
            eprintln!("irqbench: cannot install the vCPU kick signal handler: {e}");
        }
    });
}

/// Everything a vCPU thread owns.
#[derive(Debug)]
pub struct VcpuContext {
    pub index: u32,
    pub vcpu: VcpuFd,
    pub stats: Option<StatsFd>,
    pub mailbox: Mailbox,
    pub symbols: Arc<crate::guest_image::SymbolTable>,
    pub control: Arc<VcpuControl>,
    pub commands: Receiver<VcpuCommand>,
    pub events: Sender<VcpuEvent>,
    /// Console bytes the guest wrote, line-buffered for the log.
    pub console: Arc<Mutex<String>>,
    /// KVM_CAP_SYNC_REGS covers the general registers: exit RIPs can come with kvm_run.
    pub sync_regs: bool,
}

/// Whether kvm_run carries the registers on exit: on (where KVM supports it) for phases under
/// interrupt load, whose many exits are all attributed; off otherwise, since KVM then copies
/// the registers out on every exit, probes and doorbells included (~0.8 µs each on PVM).
fn set_sync_regs(ctx: &mut VcpuContext, on: bool) {
    if on && ctx.sync_regs {
        ctx.vcpu.set_sync_valid_reg(SyncReg::Register);
    } else {
        ctx.vcpu.clear_sync_valid_reg(SyncReg::Register);
    }
}

/// State of the phase in flight.
#[derive(Default)]
struct PhaseWindow {
    open: bool,
    seq: u32,
    begin: Option<StatsSnapshot>,
    started: Option<Instant>,
    sample: PhaseSample,
}

/// Runs the vCPU until the guest halts after `Shutdown`, faults, or the runner stops it.
pub fn run_vcpu(mut ctx: VcpuContext) -> VcpuOutcome {
    {
        let mut guard = ctx.control.thread.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: pthread_self has no preconditions.
        *guard = Some(unsafe { libc::pthread_self() });
    }
    let flag: *mut u8 = &mut ctx.vcpu.get_kvm_run().immediate_exit;
    IMMEDIATE_EXIT.with(|c| c.set(flag));
    let outcome = run_loop(&mut ctx);
    *ctx.control.thread.lock().unwrap_or_else(|e| e.into_inner()) = None;
    IMMEDIATE_EXIT.with(|c| c.set(std::ptr::null_mut()));
    outcome
}

fn run_loop(ctx: &mut VcpuContext) -> VcpuOutcome {
    let mut window = PhaseWindow::default();
    let mut shutting_down = false;
    // Set while the exit's data is borrowed; applied before the next KVM_RUN.
    let mut sync_next: Option<bool> = None;
    loop {
        if let Some(on) = sync_next.take() {
            set_sync_regs(ctx, on);
        }
        if ctx.control.stop.load(Ordering::SeqCst) {
            return stopped(ctx);
        }
        if ctx.control.irq_pending.load(Ordering::SeqCst) {
            match try_inject(&mut ctx.vcpu) {
                Ok(true) => {
                    ctx.control.irq_pending.store(false, Ordering::SeqCst);
                    if window.open {
                        window.sample.injected += 1;
                    }
                }
                Ok(false) => {}
                Err(e) => {
                    return fault(ctx, format!("KVM_INTERRUPT failed: {e}"), None);
                }
            }
        }
        let exit = ctx.vcpu.run();
        let reason: &'static str = match exit {
            Ok(VcpuExit::IoOut(p, data)) => {
                let value = le_u32(data);
                match p {
                    port::DOORBELL => {
                        let open = window.open.then_some(window.seq);
                        let bell = match protocol::parse_doorbell(ctx.index, data, open) {
                            Ok(b) => b,
                            Err(v) => return VcpuOutcome::ProtocolViolation(v.to_string()),
                        };
                        if let Some(outcome) = doorbell_rung(ctx, &mut window, bell) {
                            return outcome;
                        }
                        continue;
                    }
                    port::CONSOLE => {
                        let mut console = ctx.console.lock().unwrap_or_else(|e| e.into_inner());
                        if console.len() < 64 * 1024 {
                            console.push(char::from(value as u8));
                        }
                        "pio-console"
                    }
                    port::FAULT => return guest_exception(ctx),
                    port::HYPERCALL => {
                        if let Err(e) = ctx.mailbox.set_vif_pending(ctx.index, 0) {
                            return fault(ctx, format!("acknowledging a hypercall: {e}"), None);
                        }
                        if window.open {
                            window.sample.hypercalls += 1;
                        }
                        "pio-hypercall"
                    }
                    port::EXIT_PROBE => "pio-probe",
                    _ => "pio-other",
                }
            }
            Ok(VcpuExit::IoIn(p, data)) => {
                if p == port::COMMAND {
                    let command = match ctx.commands.recv() {
                        Ok(c) => c,
                        Err(_) => VcpuCommand::Shutdown,
                    };
                    let answer = match command {
                        VcpuCommand::Run(phase) => {
                            sync_next = Some(phase.irq_source != abi::irq::NONE);
                            if let Err(e) = ctx.mailbox.write_phase(ctx.index, &phase) {
                                return fault(ctx, format!("writing the phase: {e}"), None);
                            }
                            abi::Command::RunPhase as u32
                        }
                        VcpuCommand::Shutdown => {
                            shutting_down = true;
                            abi::Command::Shutdown as u32
                        }
                    };
                    let bytes = answer.to_le_bytes();
                    for (d, b) in data.iter_mut().zip(bytes.iter()) {
                        *d = *b;
                    }
                    continue;
                }
                data.fill(0xFF);
                "pio-in-other"
            }
            Ok(VcpuExit::MmioWrite(addr, _)) => {
                if (abi::MMIO_PROBE_GPA..abi::MMIO_PROBE_GPA + 0x1000).contains(&addr) {
                    "mmio-probe"
                } else {
                    "mmio-other"
                }
            }
            Ok(VcpuExit::MmioRead(addr, data)) => {
                data.fill(0);
                if (abi::MMIO_PROBE_GPA..abi::MMIO_PROBE_GPA + 0x1000).contains(&addr) {
                    "mmio-probe"
                } else {
                    "mmio-other"
                }
            }
            Ok(VcpuExit::IrqWindowOpen) => "irq-window-open",
            Ok(VcpuExit::Hypercall(hc)) => {
                *hc.ret = 0;
                if hc.nr == KVM_HC_MAP_GPA_RANGE {
                    if let Err(e) = ctx.mailbox.set_vif_pending(ctx.index, 0) {
                        return fault(ctx, format!("acknowledging a hypercall: {e}"), None);
                    }
                    if window.open {
                        window.sample.hypercalls += 1;
                    }
                }
                "vmcall"
            }
            Ok(VcpuExit::Hlt) => {
                if shutting_down {
                    return VcpuOutcome::Finished;
                }
                if window.open {
                    // Userspace irqchip: KVM hands every HLT to us (the `hlt-exit` probe).
                    // Resuming runs the next instruction; nothing else can wake this vCPU.
                    "hlt"
                } else {
                    return fault(
                        ctx,
                        "the guest halted outside a phase (HLT with nothing to wake it)".into(),
                        None,
                    );
                }
            }
            Ok(VcpuExit::Shutdown) => {
                return fault(
                    ctx,
                    "triple fault (KVM_EXIT_SHUTDOWN): an exception could not be delivered".into(),
                    None,
                );
            }
            Ok(VcpuExit::InternalError) => {
                let detail = internal_error_detail(&mut ctx.vcpu);
                return fault(ctx, format!("KVM internal error: {detail}"), None);
            }
            Ok(VcpuExit::FailEntry(reason, cpu)) => {
                return fault(
                    ctx,
                    format!(
                        "VM entry failed: hardware_entry_failure_reason {reason:#x} on host CPU {cpu}"
                    ),
                    None,
                );
            }
            Ok(VcpuExit::SystemEvent(kind, _)) => {
                return fault(ctx, format!("guest system event {kind}"), None);
            }
            Ok(other) => {
                let what = format!("{other:?}");
                return fault(ctx, format!("unexpected exit {what}"), None);
            }
            Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => {
                ctx.vcpu.set_kvm_immediate_exit(0);
                "signal"
            }
            Err(e) => return fault(ctx, format!("KVM_RUN failed: {e}"), None),
        };
        if window.open {
            *window.sample.exits.entry(reason).or_default() += 1;
            // The exit-cost probes' sites are known by construction; reading registers there
            // would add work to the very round trip they measure.
            let probe = matches!(reason, "pio-probe" | "mmio-probe" | "hlt");
            if let Some(rip) = (!probe).then(|| exit_rip(ctx)).flatten() {
                *window.sample.exit_rips.entry((rip, reason)).or_default() += 1;
            }
        }
    }
}

/// The guest RIP at this exit: from kvm_run's synced registers when they are on (no ioctl;
/// KVM_GET_REGS costs ~5 µs on a nested PVM host), else KVM_GET_REGS.
fn exit_rip(ctx: &mut VcpuContext) -> Option<u64> {
    if ctx.vcpu.get_kvm_run().kvm_valid_regs & u64::from(kvm_bindings::KVM_SYNC_X86_REGS) != 0 {
        Some(ctx.vcpu.sync_regs().regs.rip)
    } else {
        ctx.vcpu.get_regs().ok().map(|r| r.rip)
    }
}

/// KVM_INTERRUPT when the guest can take it; otherwise ask KVM for an exit when it can.
/// KVM API: with a userspace irqchip, inject only when `ready_for_interrupt_injection` is set
/// (which implies IF=1 and no interrupt shadow), else set `request_interrupt_window`.
fn try_inject(vcpu: &mut VcpuFd) -> Result<bool, std::io::Error> {
    let run = vcpu.get_kvm_run();
    if run.ready_for_interrupt_injection != 0 && run.if_flag != 0 {
        run.request_interrupt_window = 0;
        let irq = kvm_interrupt {
            irq: u32::from(abi::irq::INJECT_VECTOR),
        };
        // SAFETY: KVM_INTERRUPT reads a kvm_interrupt from the pointer; `irq` lives across the call.
        let ret = unsafe { ioctl_with_ref(&*vcpu, KVM_INTERRUPT(), &irq) };
        if ret < 0 {
            let err = std::io::Error::last_os_error();
            // EEXIST: an interrupt is already queued for injection; this one merges with it,
            // as a second edge on a busy line would.
            if err.raw_os_error() == Some(libc::EEXIST) {
                return Ok(true);
            }
            return Err(err);
        }
        Ok(true)
    } else {
        run.request_interrupt_window = 1;
        Ok(false)
    }
}

fn le_u32(data: &[u8]) -> u32 {
    let mut b = [0u8; 4];
    for (d, s) in b.iter_mut().zip(data.iter()) {
        *d = *s;
    }
    u32::from_le_bytes(b)
}

/// A doorbell that passed `protocol::parse_doorbell`: open or close the phase window.
fn doorbell_rung(
    ctx: &mut VcpuContext,
    window: &mut PhaseWindow,
    bell: Doorbell,
) -> Option<VcpuOutcome> {
    match bell {
        Doorbell::Booted => {
            let _ = ctx.events.send(VcpuEvent::Booted { index: ctx.index });
        }
        Doorbell::Begin(seq) => {
            *window = PhaseWindow {
                open: true,
                seq,
                begin: ctx.stats.as_ref().and_then(|s| s.snapshot().ok()),
                started: Some(Instant::now()),
                sample: PhaseSample {
                    index: ctx.index,
                    ..Default::default()
                },
            };
        }
        Doorbell::End(_) => {
            let end = ctx.stats.as_ref().and_then(|s| s.snapshot().ok());
            window.open = false;
            let mut sample = std::mem::take(&mut window.sample);
            sample.stats = match (&window.begin, &end) {
                (Some(b), Some(e)) => Some(e.delta(b)),
                _ => None,
            };
            sample.wall = window.started.map(|s| s.elapsed()).unwrap_or_default();
            match ctx.mailbox.read_record(ctx.index) {
                Ok(record) => sample.record = record,
                Err(e) => {
                    return Some(fault(ctx, format!("reading the phase record: {e}"), None));
                }
            }
            let _ = ctx.events.send(VcpuEvent::PhaseDone(Box::new(sample)));
        }
        Doorbell::Ping => {
            if window.open {
                window.sample.pings += 1;
            }
        }
    }
    None
}

fn internal_error_detail(vcpu: &mut VcpuFd) -> String {
    let run = vcpu.get_kvm_run();
    // SAFETY: for KVM_EXIT_INTERNAL_ERROR the `internal` member of the exit union is the valid
    // one (KVM API: "struct kvm_internal_error ... internal").
    let internal = unsafe { run.__bindgen_anon_1.internal };
    let suberror = match internal.suberror {
        1 => "emulation failure (KVM_INTERNAL_ERROR_EMULATION)",
        2 => "simultaneous exceptions (KVM_INTERNAL_ERROR_SIMUL_EX)",
        3 => "delivery event (KVM_INTERNAL_ERROR_DELIVERY_EV)",
        4 => "unexpected exit reason (KVM_INTERNAL_ERROR_UNEXPECTED_EXIT_REASON)",
        _ => "unknown suberror",
    };
    let n = (internal.ndata as usize).min(internal.data.len());
    let data: Vec<String> = internal.data[..n]
        .iter()
        .map(|d| format!("{d:#x}"))
        .collect();
    format!(
        "suberror {} — {suberror}; data [{}]",
        internal.suberror,
        data.join(", ")
    )
}

/// The guest's exception handler reported through the fault port.
fn guest_exception(ctx: &mut VcpuContext) -> VcpuOutcome {
    let record = match ctx.mailbox.read_fault(ctx.index) {
        Ok(r) => r,
        Err(e) => return fault(ctx, format!("reading the fault record: {e}"), None),
    };
    let record = match protocol::validate_fault(ctx.index, &record) {
        Ok(r) => r,
        Err(v) => return VcpuOutcome::ProtocolViolation(v.to_string()),
    };
    let name = exception_name(record.vector);
    let kind = format!(
        "guest exception {} ({name}), error code {:#x}",
        record.vector, record.error_code
    );
    let mut report = build_report(ctx, kind, Some(record.rip));
    if record.vector == 14 {
        report.cr2 = Some(record.cr2);
    }
    VcpuOutcome::Fault(Box::new(report))
}

pub fn exception_name(vector: u64) -> &'static str {
    const NAMES: [&str; 32] = [
        "#DE divide error",
        "#DB debug",
        "NMI",
        "#BP breakpoint",
        "#OF overflow",
        "#BR bound range",
        "#UD invalid opcode",
        "#NM device not available",
        "#DF double fault",
        "coprocessor segment overrun",
        "#TS invalid TSS",
        "#NP segment not present",
        "#SS stack fault",
        "#GP general protection",
        "#PF page fault",
        "reserved",
        "#MF x87 error",
        "#AC alignment check",
        "#MC machine check",
        "#XM SIMD exception",
        "#VE virtualization exception",
        "#CP control protection",
        "reserved",
        "reserved",
        "reserved",
        "reserved",
        "reserved",
        "reserved",
        "#HV hypervisor injection",
        "#VC VMM communication",
        "#SX security",
        "reserved",
    ];
    NAMES
        .get(vector as usize)
        .copied()
        .unwrap_or("not an exception vector")
}

fn fault(ctx: &mut VcpuContext, kind: String, rip: Option<u64>) -> VcpuOutcome {
    VcpuOutcome::Fault(Box::new(build_report(ctx, kind, rip)))
}

fn stopped(ctx: &mut VcpuContext) -> VcpuOutcome {
    let report = build_report(ctx, String::new(), None);
    VcpuOutcome::Stopped {
        rip: report.rip,
        instruction: match report.symbol {
            Some(s) => format!("{} <{s}>", report.instruction),
            None => report.instruction,
        },
    }
}

/// Registers and the decoded instruction at `rip` (default: the vCPU's current RIP).
fn build_report(ctx: &mut VcpuContext, kind: String, rip: Option<u64>) -> FaultReport {
    let regs = ctx.vcpu.get_regs().ok();
    let rip = rip.or(regs.map(|r| r.rip)).unwrap_or(0);
    let bytes = ctx.mailbox.read_bytes(rip, 16);
    let instruction = if bytes.is_empty() {
        format!("(rip {rip:#x} is outside guest memory)")
    } else {
        decode::decode_one(&bytes, rip)
    };
    let symbol = ctx
        .symbols
        .lookup(rip)
        .map(|(s, off)| format!("{}+{off:#x}", s.name));
    FaultReport {
        vcpu: ctx.index,
        kind,
        rip,
        instruction,
        symbol,
        regs,
        cr2: None,
    }
}
