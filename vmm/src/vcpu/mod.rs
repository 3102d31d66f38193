//! One vCPU thread: the KVM_RUN loop, every userspace exit counted by reason, phase boundaries
//! (doorbells) snapshotting the vCPU's KVM stats, and an outcome enum when the loop ends.
//!
//! The loop talks to the runner over two channels: it receives [`VcpuCommand`]s when the guest
//! asks for work on the command port, and sends [`VcpuEvent`]s (booted, phase done, exited).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex, Once, OnceLock};
use std::time::Instant;

use irqbench_abi::{self as abi, PhaseDescriptor};
use kvm_ioctls::{SyncReg, VcpuExit, VcpuFd};
use vmm_sys_util::eventfd::EventFd;
use vmm_sys_util::signal;

use crate::kvm::stats::{StatsFd, StatsSnapshot};
use crate::machine::Mailbox;
use protocol::Doorbell;

pub mod exit;
pub mod fault;
pub mod protocol;
pub mod stop;
pub mod window;

pub use exit::{handle_exit, ExitAction, ExitEvent, ExitReason, LoopState, PortData};
pub use fault::{exception_name, FaultReport};
use fault::{fault, guest_exception, stopped};
pub use stop::Stop;
pub use window::{
    BlockSample, ExitCounts, PhaseSample, PhaseWindow, ReasonTallies, ReasonTally, ThreadTimes,
    VariantTotals,
};

/// The signal that kicks a vCPU thread out of KVM_RUN (SIGRTMIN + this).
const KICK_SIGNAL_OFFSET: i32 = 2;

/// What the runner asks of a vCPU when its guest wants work.
#[derive(Clone, Debug)]
pub enum VcpuCommand {
    Run(PhaseDescriptor),
    /// Read the vCPU's guest TSC through KVM (answered with [`VcpuEvent::Tsc`]), then wait
    /// for the next command: the guest goes on waiting for work meanwhile.
    ReadTsc,
    Shutdown,
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
    ProtocolViolation(protocol::ProtocolViolation),
}

/// What goes from a vCPU thread to the runner; `Wake` comes from the run's [`Stop`] instead
/// (its waker): a stop was asked for, so a wait ends now.
#[derive(Debug)]
pub enum VcpuEvent {
    Booted {
        index: u32,
    },
    PhaseDone(Box<PhaseSample>),
    Exited {
        index: u32,
        outcome: VcpuOutcome,
    },
    Tsc {
        index: u32,
        reading: Result<crate::kvm::TscReading, String>,
    },
    Wake,
}

/// Shared between a vCPU thread and the runner's helper threads.
#[derive(Debug, Default)]
pub struct VcpuControl {
    /// Stop at the next exit (the session's watchdog, or its run's stop).
    pub stop: Stop,
    /// `inject`: an interrupt waits to be injected.
    pub irq_pending: AtomicBool,
    /// Raised by the irq source thread, for the report.
    pub irqs_raised: AtomicU64,
    /// The thread is blocked at the guest's command port, waiting for its next command.
    pub awaiting_command: AtomicBool,
    /// `msi`: the eventfd KVM_IRQFD binds to this vCPU's MSI (set on the first `msi` phase).
    pub msi: OnceLock<EventFd>,
    /// Guest TSC − host TSC (wrapping), for timing raises in guest TSC; unset where KVM does
    /// not report it, and then no raise is timed.
    pub tsc_offset: OnceLock<u64>,
    thread: Mutex<Option<libc::pthread_t>>,
}

impl VcpuControl {
    /// Raises this vCPU's MSI (KVM delivers it; nothing waits in the VMM). False when no
    /// eventfd is bound or the write failed.
    /// The guest TSC now, through [`VcpuControl::tsc_offset`].
    pub fn guest_tsc_now(&self) -> Option<u64> {
        let offset = self.tsc_offset.get()?;
        Some(crate::kvm::host_tsc().wrapping_add(*offset))
    }

    pub fn raise_msi(&self) -> bool {
        self.msi.get().is_some_and(|fd| fd.write(1).is_ok())
    }

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

pub fn kick_signal() -> i32 {
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
    pub symbols: Arc<crate::machine::image::SymbolTable>,
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

/// Runs the vCPU until the guest halts after `Shutdown`, faults, or the runner stops it.
pub fn run_vcpu(mut ctx: VcpuContext) -> VcpuOutcome {
    {
        let mut guard = ctx.control.thread.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: pthread_self has no preconditions.
        *guard = Some(unsafe { libc::pthread_self() });
    }
    if let Ok(offset) = crate::kvm::tsc_offset(&ctx.vcpu) {
        let _ = ctx.control.tsc_offset.set(offset);
    }
    let flag: *mut u8 = &mut ctx.vcpu.get_kvm_run().immediate_exit;
    IMMEDIATE_EXIT.with(|c| c.set(flag));
    let outcome = run_loop(&mut ctx);
    *ctx.control.thread.lock().unwrap_or_else(|e| e.into_inner()) = None;
    IMMEDIATE_EXIT.with(|c| c.set(std::ptr::null_mut()));
    outcome
}

/// An owned copy of `exit` (the borrow of kvm_run ends here, so the loop can use the vCPU).
/// KVM_EXIT_INTERNAL_ERROR's details live in kvm_run too; [`internal_error`] fills them in
/// once the borrow is over.
fn exit_event(
    exit: Result<VcpuExit<'_>, kvm_ioctls::Error>,
) -> Result<ExitEvent, kvm_ioctls::Error> {
    Ok(match exit {
        Ok(VcpuExit::IoOut(port, data)) => ExitEvent::IoOut {
            port,
            data: PortData::new(data),
        },
        Ok(VcpuExit::IoIn(port, data)) => ExitEvent::IoIn {
            port,
            size: data.len(),
        },
        Ok(VcpuExit::MmioWrite(addr, _)) => ExitEvent::MmioWrite { addr },
        Ok(VcpuExit::MmioRead(addr, data)) => {
            data.fill(0);
            ExitEvent::MmioRead { addr }
        }
        Ok(VcpuExit::IrqWindowOpen) => ExitEvent::IrqWindowOpen,
        Ok(VcpuExit::Hypercall(hc)) => {
            *hc.ret = 0;
            ExitEvent::Hypercall { nr: hc.nr }
        }
        Ok(VcpuExit::Hlt) => ExitEvent::Hlt,
        Ok(VcpuExit::Shutdown) => ExitEvent::Shutdown,
        Ok(VcpuExit::InternalError) => ExitEvent::InternalError {
            suberror: 0,
            data: Vec::new(),
        },
        Ok(VcpuExit::FailEntry(reason, cpu)) => ExitEvent::FailEntry { reason, cpu },
        Ok(VcpuExit::SystemEvent(kind, _)) => ExitEvent::SystemEvent { kind },
        Ok(other) => ExitEvent::Other(format!("{other:?}")),
        Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => ExitEvent::Interrupted,
        Err(e) => return Err(e),
    })
}

/// KVM_EXIT_INTERNAL_ERROR's sub-error and data words, read from kvm_run.
fn internal_error(vcpu: &mut VcpuFd) -> ExitEvent {
    let run = vcpu.get_kvm_run();
    // SAFETY: called only after KVM_RUN returned KVM_EXIT_INTERNAL_ERROR, for which the
    // `internal` member of the exit union is the valid one (KVM API: "struct
    // kvm_internal_error ... internal").
    let internal = unsafe { run.__bindgen_anon_1.internal };
    let n = (internal.ndata as usize).min(internal.data.len());
    ExitEvent::InternalError {
        suberror: internal.suberror,
        data: internal.data[..n].to_vec(),
    }
}

fn run_loop(ctx: &mut VcpuContext) -> VcpuOutcome {
    let mut window = PhaseWindow::default();
    let mut state = LoopState::default();
    // Set while the exit's data is borrowed; applied before the next KVM_RUN.
    let mut sync_next: Option<bool> = None;
    // The counted exit being handled and when KVM_RUN returned it: timed up to the next
    // KVM_RUN.
    let mut handling: Option<(ExitReason, Instant)> = None;
    // A PING being handled and when KVM_RUN returned it.
    let mut ping: Option<Instant> = None;
    loop {
        if let Some(on) = sync_next.take() {
            set_sync_regs(ctx, on);
        }
        if ctx.control.stop.is_set() {
            return stopped(ctx);
        }
        if let Err(e) = inject_pending(ctx, &mut window) {
            return fault(ctx, format!("KVM_INTERRUPT failed: {e}"), None);
        }
        if let Some((reason, returned)) = handling.take() {
            window.time_exit(reason, returned.elapsed());
        }
        if let Some(returned) = ping.take() {
            window.sample.ping_host += returned.elapsed();
        }
        let exit = ctx.vcpu.run();
        let returned = Instant::now();
        let event = match exit_event(exit) {
            Ok(ExitEvent::InternalError { .. }) => internal_error(&mut ctx.vcpu),
            Ok(e) => e,
            Err(e) => return fault(ctx, format!("KVM_RUN failed: {e}"), None),
        };
        if event == ExitEvent::Interrupted {
            ctx.vcpu.set_kvm_immediate_exit(0);
        }
        state.phase_open = window.open;
        let reason = match handle_exit(&event, state) {
            ExitAction::Resume(reason) => reason,
            ExitAction::Doorbell(data) => {
                let open = window.open.then_some(window.seq);
                let bell = match protocol::parse_doorbell(ctx.index, &data, open) {
                    Ok(b) => b,
                    Err(v) => return VcpuOutcome::ProtocolViolation(v),
                };
                if let Err(outcome) = doorbell_rung(ctx, &mut window, bell) {
                    return outcome;
                }
                if bell == Doorbell::Ping && window.open {
                    window.sample.ping_handled += returned.elapsed();
                    ping = Some(returned);
                }
                continue;
            }
            ExitAction::Command { size } => {
                match answer_command(ctx, size, &mut state, &mut sync_next) {
                    Ok(()) => continue,
                    Err(outcome) => return outcome,
                }
            }
            ExitAction::Console(byte) => {
                let mut console = ctx.console.lock().unwrap_or_else(|e| e.into_inner());
                if console.len() < 64 * 1024 {
                    console.push(char::from(byte));
                }
                ExitReason::PioConsole
            }
            ExitAction::Hypercall(reason) => {
                if let Err(e) = ctx.mailbox.set_vif_pending(ctx.index, 0) {
                    return fault(ctx, format!("acknowledging a hypercall: {e}"), None);
                }
                if window.open {
                    window.count_hypercall();
                }
                reason
            }
            ExitAction::GuestException => return guest_exception(ctx),
            ExitAction::Finished => return VcpuOutcome::Finished,
            ExitAction::Fault(why) => return fault(ctx, why, None),
        };
        if window.open {
            let rip = (!reason.is_probe()).then(|| exit_rip(ctx)).flatten();
            window.count_exit(reason, rip);
            handling = Some((reason, returned));
        }
    }
}

/// What the loop does about `inject` before the next KVM_RUN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Injection {
    /// Nothing pending: no window request either.
    None,
    /// KVM_INTERRUPT now.
    Inject,
    /// Ask KVM to exit when the guest can take an interrupt.
    RequestWindow,
}

/// KVM API (kvm_run, KVM_INTERRUPT): with a userspace irqchip, inject only when
/// `ready_for_interrupt_injection` is set (IF=1, no STI/MOV-SS shadow, nothing queued), else set
/// `request_interrupt_window`. With nothing pending the request is withdrawn, so it never
/// outlives the interrupt it was for (one dropped between phases, say) into another phase.
fn injection(pending: bool, ready: bool, if_flag: bool) -> Injection {
    match (pending, ready && if_flag) {
        (false, _) => Injection::None,
        (true, true) => Injection::Inject,
        (true, false) => Injection::RequestWindow,
    }
}

/// `inject`: KVM_INTERRUPT when the guest can take it, else ask for an interrupt window. A
/// queued KVM_INTERRUPT is delivered at the next entry into the guest, before its next
/// instruction (so one queued at a phase's last exit reaches the guest before it asks for the
/// next command, outside every timed window).
fn inject_pending(ctx: &mut VcpuContext, window: &mut PhaseWindow) -> std::io::Result<()> {
    let pending = ctx.control.irq_pending.load(Ordering::SeqCst);
    let run = ctx.vcpu.get_kvm_run();
    let ready = run.ready_for_interrupt_injection != 0;
    match injection(pending, ready, run.if_flag != 0) {
        Injection::None => run.request_interrupt_window = 0,
        Injection::RequestWindow => run.request_interrupt_window = 1,
        Injection::Inject => {
            run.request_interrupt_window = 0;
            inject(&mut ctx.vcpu)?;
            ctx.control.irq_pending.store(false, Ordering::SeqCst);
            if window.open {
                window.sample.injected += 1;
            }
        }
    }
    Ok(())
}

/// The guest asked for work on the command port: block until the runner sends a command, write
/// the phase into the slot, and answer through kvm_run's I/O data.
fn answer_command(
    ctx: &mut VcpuContext,
    size: usize,
    state: &mut LoopState,
    sync_next: &mut Option<bool>,
) -> Result<(), VcpuOutcome> {
    ctx.control.awaiting_command.store(true, Ordering::SeqCst);
    // `Some(phase)` to run, `None` to shut down.
    let command = loop {
        match ctx.commands.recv().unwrap_or(VcpuCommand::Shutdown) {
            VcpuCommand::ReadTsc => {
                let reading =
                    crate::kvm::read_guest_tsc(&ctx.vcpu).map_err(|e| format!("KVM_GET_MSRS: {e}"));
                let index = ctx.index;
                let _ = ctx.events.send(VcpuEvent::Tsc { index, reading });
            }
            VcpuCommand::Run(phase) => break Some(phase),
            VcpuCommand::Shutdown => break None,
        }
    };
    ctx.control.awaiting_command.store(false, Ordering::SeqCst);
    let answer = match command {
        Some(phase) => {
            *sync_next = Some(phase.irq_source != abi::irq::NONE);
            if let Err(e) = ctx.mailbox.write_phase(ctx.index, &phase) {
                return Err(fault(ctx, format!("writing the phase: {e}"), None));
            }
            abi::Command::RunPhase as u32
        }
        None => {
            state.shutting_down = true;
            abi::Command::Shutdown as u32
        }
    };
    let run = ctx.vcpu.get_kvm_run();
    // SAFETY: this is a KVM_EXIT_IO exit (the command port's `in`): the `io` member of the
    // exit union is valid, and data_offset points into the kvm_run mapping (KVM API).
    let io = unsafe { run.__bindgen_anon_1.io };
    let base = run as *mut kvm_bindings::kvm_run as *mut u8;
    let bytes = answer.to_le_bytes();
    let len = size.min(bytes.len()).min(io.size as usize);
    // SAFETY: KVM maps at least one page for kvm_run and places the I/O data inside it at
    // data_offset; we write at most 4 bytes there.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), base.add(io.data_offset as usize), len);
    }
    Ok(())
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

/// KVM_INTERRUPT of the `inject` vector.
fn inject(vcpu: &mut VcpuFd) -> std::io::Result<()> {
    match crate::kvm::interrupt(vcpu, abi::irq::INJECT_VECTOR) {
        // EEXIST: an interrupt is already queued for injection; this one merges with it, as
        // a second edge on a busy line would.
        Err(err) if err.raw_os_error() == Some(libc::EEXIST) => Ok(()),
        other => other,
    }
}

/// The vCPU's KVM stats now, when it has a stats fd that reads.
fn snapshot(ctx: &VcpuContext) -> Option<StatsSnapshot> {
    ctx.stats.as_ref().and_then(|s| s.snapshot().ok())
}

/// The record of the block a BLOCK or END doorbell closes, if a block was open.
fn ended_block(
    ctx: &mut VcpuContext,
    window: &PhaseWindow,
) -> Result<Option<abi::BlockRecord>, VcpuOutcome> {
    if window.current_variant().is_none() {
        return Ok(None);
    }
    let read = ctx.mailbox.read_block(ctx.index);
    read.map(Some)
        .map_err(|e| fault(ctx, format!("reading the block record: {e}"), None))
}

/// The guest's latency log since the last read, into the window.
fn read_latencies(ctx: &mut VcpuContext, window: &mut PhaseWindow) -> Result<(), VcpuOutcome> {
    let read = ctx
        .mailbox
        .read_latencies(ctx.index, &mut window.latency_cursor);
    let (entries, lost) =
        read.map_err(|e| fault(ctx, format!("reading the latency log: {e}"), None))?;
    window.add_latencies(&entries, lost);
    Ok(())
}

/// A doorbell that passed `protocol::parse_doorbell`: open or close the phase window, or cut
/// it into blocks.
fn doorbell_rung(
    ctx: &mut VcpuContext,
    window: &mut PhaseWindow,
    bell: Doorbell,
) -> Result<(), VcpuOutcome> {
    match bell {
        Doorbell::Booted => {
            let _ = ctx.events.send(VcpuEvent::Booted { index: ctx.index });
        }
        Doorbell::Begin(seq) => {
            *window = PhaseWindow::begin(ctx.index, seq, snapshot(ctx));
            window.latency_cursor = ctx
                .mailbox
                .latency_count(ctx.index)
                .map_err(|e| fault(ctx, format!("reading the latency log: {e}"), None))?;
        }
        Doorbell::Block(variant) => {
            read_latencies(ctx, window)?;
            let record = ended_block(ctx, window)?;
            window.block_boundary(record, snapshot(ctx), Some(variant));
        }
        Doorbell::End(_) => {
            let stats = snapshot(ctx);
            read_latencies(ctx, window)?;
            if let Some(record) = ended_block(ctx, window)? {
                window.block_boundary(Some(record), stats.clone(), None);
            }
            let mut sample = window.end(stats);
            let read = ctx.mailbox.read_record(ctx.index);
            sample.record =
                read.map_err(|e| fault(ctx, format!("reading the phase record: {e}"), None))?;
            let _ = ctx.events.send(VcpuEvent::PhaseDone(Box::new(sample)));
        }
        Doorbell::Ping => {
            if window.open {
                window.sample.pings += 1;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_requested_only_while_an_interrupt_waits() {
        assert_eq!(injection(true, true, true), Injection::Inject);
        // IF clear, or an STI/MOV-SS shadow (ready = 0 with IF set): wait for the window.
        assert_eq!(injection(true, true, false), Injection::RequestWindow);
        assert_eq!(injection(true, false, true), Injection::RequestWindow);
        // Nothing pending (e.g. a raise dropped between phases): the request is withdrawn.
        for (ready, if_flag) in [(true, true), (false, false), (false, true)] {
            assert_eq!(injection(false, ready, if_flag), Injection::None);
        }
    }
}
