//! Executes a [`Plan`]: boots machines, dispatches phases to the vCPU threads, adapts iteration
//! counts, subtracts the empty-body baseline, drives the interrupt load, and turns samples into
//! [`PhaseResult`]s.
//!
//! Measurement rules (DESIGN.md): cycles come from the guest's fenced TSC reads; exits from the
//! KVM binary stats of each vCPU between its BEGIN and END doorbells, plus the VMM's own count of
//! userspace exits (markers excluded). Every per-op figure is net of the `empty` baseline run
//! with the same nesting, body, interrupt load and vCPU count.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use irqbench_abi::{self as abi, PhaseDescriptor};
use kvm_ioctls::Kvm;

use crate::guest_image::GuestImage;
use crate::host::{self, KvmFlavour};
use crate::kvm_stats::{StatsDelta, StatsFd};
use crate::machine::{IrqchipMode, Machine, MachineConfig, MachineError, Mailbox};
use crate::plan::{HypercallTransport, IrqSource, PhasePlan, Plan, Workload};
use crate::protocol::{self, ValidRecord};
use crate::results::{
    ExitSite, HostManifest, LockStats, PhaseFailure, PhaseResult, RunReport, Summary, SCHEMA,
};
use crate::vcpu::{
    self, PhaseSample, VcpuCommand, VcpuContext, VcpuControl, VcpuEvent, VcpuOutcome,
};

/// How long a fresh guest may take to ring its BOOTED doorbell.
const BOOT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long vCPU threads get to stop after being told to.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("reading the host manifest failed")]
    Host(#[source] host::HostError),
    #[error(
        "hypercall = \"vmcall\" is refused on this {0} host: vmcall at guest CPL0 livelocks under \
         PVM (RIP never advances); use hypercall = \"port\""
    )]
    VmcallRefused(&'static str),
    #[error("booting the guest failed")]
    Boot(#[source] MachineError),
    #[error("the plan does not fit this host: {0}")]
    Resources(String),
}

/// Why a phase produced no result.
#[derive(Debug, thiserror::Error)]
pub enum PhaseError {
    #[error("{0}")]
    Guest(String),
    #[error("{0}")]
    Protocol(#[from] protocol::ProtocolViolation),
    #[error("timed out after {after:?}; {where_}")]
    Timeout { after: Duration, where_: String },
    #[error("stopped by the user")]
    Interrupted,
    #[error("booting the guest failed: {0}")]
    Boot(String),
}

/// Knobs of one run that are not part of the plan.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Set from a signal handler: stop between (or inside) phases and return what was measured.
    pub stop: Arc<AtomicBool>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            stop: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// Progress callback: (phase index, phase count, phase name, step).
pub type ProgressFn<'a> = dyn FnMut(usize, usize, &str, &str) + 'a;

/// One measured dispatch of a phase to every vCPU.
#[derive(Debug)]
pub struct Dispatch {
    pub samples: Vec<PhaseSample>,
    pub records: Vec<ValidRecord>,
    pub vm_stats: Option<StatsDelta>,
    /// The lock workload's shared counter after the dispatch.
    pub lock_counter: u64,
    /// Interrupts or events the host's load thread raised during the dispatch.
    pub irqs_raised: u64,
}

impl Dispatch {
    /// Longest vCPU's TSC cycles: the phase's wall time in guest cycles.
    pub fn max_cycles(&self) -> u64 {
        self.records.iter().map(|r| r.tsc_cycles).max().unwrap_or(0)
    }
    pub fn total_ops(&self) -> u64 {
        self.records.iter().map(|r| r.ops).sum()
    }
    /// Mean over vCPUs of cycles per iteration.
    pub fn cycles_per_iteration(&self, iterations: u64) -> f64 {
        if self.records.is_empty() || iterations == 0 {
            return 0.0;
        }
        let sum: f64 = self
            .records
            .iter()
            .map(|r| r.tsc_cycles as f64 / iterations as f64)
            .sum();
        sum / self.records.len() as f64
    }
}

/// A booted VM with one thread per vCPU waiting for commands.
pub struct Session {
    pub vcpus: u32,
    pub irqchip: IrqchipMode,
    pub mailbox: Mailbox,
    controls: Vec<Arc<VcpuControl>>,
    commands: Vec<Sender<VcpuCommand>>,
    events: Receiver<VcpuEvent>,
    threads: Vec<JoinHandle<()>>,
    vm_stats: Option<StatsFd>,
    seq: u32,
    pub console: Arc<Mutex<String>>,
    /// A vCPU has exited: the session cannot run more phases.
    dead: bool,
    hypercall: HypercallTransport,
    /// For attributing exit RIPs to guest symbols.
    pub image: Arc<GuestImage>,
    _machine_vm: kvm_ioctls::VmFd,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("vcpus", &self.vcpus)
            .field("irqchip", &self.irqchip)
            .field("dead", &self.dead)
            .finish()
    }
}

impl Session {
    /// Creates the VM, starts the vCPU threads and waits until every guest CPU has booted.
    pub fn boot(
        kvm: &Kvm,
        image: &Arc<GuestImage>,
        config: MachineConfig,
        hypercall: HypercallTransport,
        pin: bool,
    ) -> Result<Session, PhaseError> {
        vcpu::install_kick_handler();
        let machine =
            Machine::create(kvm, image, config).map_err(|e| PhaseError::Boot(error_chain(&e)))?;
        let Machine {
            vm, memory, vcpus, ..
        } = machine;
        let vm_stats = StatsFd::for_vm(&vm).ok();
        let sync_regs = vm.check_extension_int(kvm_ioctls::Cap::SyncRegs)
            & kvm_bindings::KVM_SYNC_X86_REGS as i32
            != 0;
        let mailbox = Mailbox::new(memory);
        let (event_tx, events) = mpsc::channel();
        let console = Arc::new(Mutex::new(String::new()));
        let symbols = Arc::new(image.symbols.clone());
        let host_cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut session = Session {
            vcpus: config.vcpus,
            irqchip: config.irqchip,
            mailbox: mailbox.clone(),
            controls: Vec::new(),
            commands: Vec::new(),
            events,
            threads: Vec::new(),
            vm_stats,
            seq: 0,
            console: console.clone(),
            dead: false,
            hypercall,
            image: image.clone(),
            _machine_vm: vm,
        };
        for (index, fd) in vcpus.into_iter().enumerate() {
            let index = index as u32;
            let (cmd_tx, cmd_rx) = mpsc::channel();
            let control = Arc::new(VcpuControl::default());
            let ctx = VcpuContext {
                index,
                stats: StatsFd::for_vcpu(&fd).ok(),
                vcpu: fd,
                mailbox: mailbox.clone(),
                symbols: symbols.clone(),
                control: control.clone(),
                commands: cmd_rx,
                events: event_tx.clone(),
                console: console.clone(),
                sync_regs,
            };
            let events = event_tx.clone();
            let cpu = index as usize % host_cpus;
            let handle = std::thread::Builder::new()
                .name(format!("vcpu{index}"))
                .spawn(move || {
                    if pin {
                        pin_to_cpu(cpu);
                    }
                    // A bug in the VMM must end this run with a report, not hang the runner.
                    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        vcpu::run_vcpu(ctx)
                    }))
                    .unwrap_or_else(|panic| {
                        let what = panic
                            .downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| panic.downcast_ref::<String>().cloned())
                            .unwrap_or_default();
                        VcpuOutcome::Fault(Box::new(vcpu::FaultReport {
                            vcpu: index,
                            kind: format!("irqbench bug: the vCPU thread panicked: {what}"),
                            rip: 0,
                            instruction: String::new(),
                            symbol: None,
                            regs: None,
                            cr2: None,
                        }))
                    });
                    let _ = events.send(VcpuEvent::Exited { index, outcome });
                })
                .map_err(|e| PhaseError::Boot(format!("spawning vCPU thread {index}: {e}")))?;
            session.controls.push(control);
            session.commands.push(cmd_tx);
            session.threads.push(handle);
        }
        drop(event_tx);
        let deadline = Instant::now() + BOOT_TIMEOUT;
        let mut booted = 0;
        while booted < config.vcpus {
            match session
                .events
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(VcpuEvent::Booted { .. }) => booted += 1,
                Ok(VcpuEvent::Exited { outcome, .. }) => {
                    session.dead = true;
                    // The guest may have said why on its console (e.g. an ABI mismatch).
                    let console = session
                        .console
                        .lock()
                        .map(|c| c.trim().to_string())
                        .unwrap_or_default();
                    let said = if console.is_empty() {
                        String::new()
                    } else {
                        format!("\nguest console: {console}")
                    };
                    return Err(PhaseError::Boot(format!(
                        "{}{said}",
                        outcome_text(&outcome)
                    )));
                }
                Ok(VcpuEvent::PhaseDone(_)) => {}
                Err(_) => {
                    let where_ = session.stop_all();
                    return Err(PhaseError::Boot(format!(
                        "the guest did not boot within {BOOT_TIMEOUT:?}; {where_}"
                    )));
                }
            }
        }
        Ok(session)
    }

    /// Runs one phase on every vCPU and collects validated records.
    pub fn dispatch(
        &mut self,
        mut desc: PhaseDescriptor,
        irq: IrqSource,
        timeout: Duration,
        stop: &AtomicBool,
    ) -> Result<Dispatch, PhaseError> {
        if self.dead {
            return Err(PhaseError::Guest("the VM is no longer running".into()));
        }
        self.seq = (self.seq + 1) & 0xFF_FFFF;
        desc.seq = self.seq;
        desc.hypercall_transport = match self.hypercall {
            HypercallTransport::Port => abi::hypercall::PORT,
            HypercallTransport::Vmcall => abi::hypercall::VMCALL,
        };
        let shared_counter = abi::MAILBOX_GPA + abi::offset::SHARED_LOCK_COUNTER as u64;
        self.mailbox
            .write_u64(shared_counter, 0, "lock counter")
            .map_err(|e| PhaseError::Guest(error_chain(&e)))?;
        let vm_before = self.vm_stats.as_ref().and_then(|s| s.snapshot().ok());
        let raised_before = self.irqs_raised();
        let load = IrqLoad::start(irq, &self.controls, &self.mailbox);
        for tx in &self.commands {
            if tx.send(VcpuCommand::Run(desc)).is_err() {
                self.dead = true;
                return Err(PhaseError::Guest("a vCPU thread has exited".into()));
            }
        }
        let started = Instant::now();
        let mut samples: Vec<Option<PhaseSample>> = vec![None; self.vcpus as usize];
        let mut failure = None;
        while samples.iter().any(Option::is_none) {
            if stop.load(Ordering::SeqCst) {
                failure = Some(PhaseError::Interrupted);
                break;
            }
            let left = timeout.saturating_sub(started.elapsed());
            if left.is_zero() {
                let where_ = self.stop_all();
                failure = Some(PhaseError::Timeout {
                    after: timeout,
                    where_,
                });
                break;
            }
            match self
                .events
                .recv_timeout(left.min(Duration::from_millis(100)))
            {
                Ok(VcpuEvent::PhaseDone(sample)) => {
                    let i = sample.index as usize;
                    if let Some(slot) = samples.get_mut(i) {
                        *slot = Some(*sample);
                    }
                }
                Ok(VcpuEvent::Exited { outcome, .. }) => {
                    self.dead = true;
                    failure = Some(match outcome {
                        VcpuOutcome::ProtocolViolation(m) => PhaseError::Guest(m),
                        other => PhaseError::Guest(outcome_text(&other)),
                    });
                    break;
                }
                Ok(VcpuEvent::Booted { .. }) => {}
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.dead = true;
                    failure = Some(PhaseError::Guest("every vCPU thread has exited".into()));
                    break;
                }
            }
        }
        load.stop();
        let irqs_raised = self.irqs_raised() - raised_before;
        if let Some(f) = failure {
            if matches!(f, PhaseError::Interrupted) {
                self.stop_all();
            }
            return Err(f);
        }
        let vm_stats = match (
            vm_before,
            self.vm_stats.as_ref().and_then(|s| s.snapshot().ok()),
        ) {
            (Some(b), Some(a)) => Some(a.delta(&b)),
            _ => None,
        };
        let samples: Vec<PhaseSample> = samples.into_iter().flatten().collect();
        let mut records = Vec::new();
        for s in &samples {
            records.push(protocol::validate_record(s.index, &desc, &s.record)?);
        }
        let lock_counter = self
            .mailbox
            .read_u64(shared_counter, "lock counter")
            .unwrap_or(0);
        Ok(Dispatch {
            samples,
            records,
            vm_stats,
            lock_counter,
            irqs_raised,
        })
    }

    fn irqs_raised(&self) -> u64 {
        self.controls
            .iter()
            .map(|c| c.irqs_raised.load(Ordering::SeqCst))
            .sum()
    }

    /// Stops every vCPU (watchdog or Ctrl-C) and describes where each one was.
    fn stop_all(&mut self) -> String {
        self.dead = true;
        for c in &self.controls {
            c.stop.store(true, Ordering::SeqCst);
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        let mut wheres = BTreeMap::new();
        let mut exited = 0;
        while exited < self.vcpus && Instant::now() < deadline {
            for c in &self.controls {
                c.kick();
            }
            match self.events.recv_timeout(Duration::from_millis(20)) {
                Ok(VcpuEvent::Exited { index, outcome }) => {
                    exited += 1;
                    wheres.insert(index, outcome_text(&outcome));
                }
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        if wheres.is_empty() {
            return "no vCPU could be stopped".into();
        }
        wheres
            .into_iter()
            .map(|(i, w)| format!("vCPU {i}: {w}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Shuts the guest down and joins every thread (no thread or fd outlives the session).
    pub fn shutdown(mut self) {
        self.close();
    }

    fn close(&mut self) {
        if !self.dead {
            for tx in &self.commands {
                let _ = tx.send(VcpuCommand::Shutdown);
            }
            let deadline = Instant::now() + STOP_TIMEOUT;
            let mut exited = 0;
            while exited < self.vcpus && Instant::now() < deadline {
                match self.events.recv_timeout(Duration::from_millis(50)) {
                    Ok(VcpuEvent::Exited { .. }) => exited += 1,
                    Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
            if exited < self.vcpus {
                self.stop_all();
            }
        } else {
            // Already stopped; make sure of it.
            for c in &self.controls {
                c.stop.store(true, Ordering::SeqCst);
                c.kick();
            }
        }
        self.commands.clear();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.close();
        }
    }
}

fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and sched_setaffinity only touch
    // the set we own, for the calling thread (pid 0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}

pub fn outcome_text(outcome: &VcpuOutcome) -> String {
    match outcome {
        VcpuOutcome::Finished => "finished".into(),
        VcpuOutcome::Stopped { rip, instruction } => {
            format!("stopped at rip {rip:#x}: {instruction}")
        }
        VcpuOutcome::Fault(report) => report.to_string(),
        VcpuOutcome::ProtocolViolation(m) => m.clone(),
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    crate::error_chain(e, ": ")
}

/// A host thread that raises interrupts (`inject`) or virtual-IF events (`pv-event`) at a rate.
struct IrqLoad {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl IrqLoad {
    fn start(irq: IrqSource, controls: &[Arc<VcpuControl>], mailbox: &Mailbox) -> IrqLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let rate = match irq {
            IrqSource::Inject { rate_hz } | IrqSource::PvEvent { rate_hz } => rate_hz,
            _ => {
                return IrqLoad { stop, thread: None };
            }
        };
        let period = Duration::from_secs_f64(1.0 / rate);
        let controls = controls.to_vec();
        let mailbox = mailbox.clone();
        let flag = stop.clone();
        let inject = matches!(irq, IrqSource::Inject { .. });
        let thread = std::thread::Builder::new()
            .name("irq-source".into())
            .spawn(move || {
                let mut next = Instant::now() + period;
                while !flag.load(Ordering::SeqCst) {
                    let now = Instant::now();
                    if next > now {
                        std::thread::sleep(next - now);
                    }
                    next += period;
                    if Instant::now() > next + period * 4 {
                        // Fell behind (host busy): skip ticks rather than burst.
                        next = Instant::now() + period;
                    }
                    for (i, c) in controls.iter().enumerate() {
                        if inject {
                            c.irq_pending.store(true, Ordering::SeqCst);
                            c.irqs_raised.fetch_add(1, Ordering::Relaxed);
                            c.kick();
                        } else {
                            let _ = mailbox.set_vif_pending(i as u32, 1);
                            c.irqs_raised.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
            .ok();
        IrqLoad { stop, thread }
    }

    fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The descriptor for `phase` at `iterations`.
pub fn descriptor(phase: &PhasePlan, workload: &Workload, iterations: u64) -> PhaseDescriptor {
    let (kind, id) = match workload {
        Workload::Strategy { strategy } => (abi::workload::STRATEGY, strategy.0),
        Workload::Insn { insn } => (abi::workload::INSN, insn.0),
        Workload::Lock { strategy } => (abi::workload::LOCK, strategy.0),
        Workload::Mixed { .. } => (abi::workload::MIXED, 0),
        Workload::Doorbells => (abi::workload::DOORBELLS, 0),
        Workload::FaultUd2 => (abi::workload::FAULT_UD2, 0),
        Workload::SpinForever => (abi::workload::SPIN_FOREVER, 0),
        Workload::GarbageRecord => (abi::workload::GARBAGE_RECORD, 0),
        Workload::Idle => (abi::workload::IDLE, 0),
        Workload::HaltForever => (abi::workload::HALT_FOREVER, 0),
    };
    let mut weights = [0u16; abi::strategy::COUNT as usize];
    if let Workload::Mixed { weights: w } = workload {
        for (s, weight) in w {
            if let Some(slot) = weights.get_mut(s.0 as usize) {
                *slot = *weight;
            }
        }
    }
    let timer_initial_count = match phase.irq {
        // KVM's emulated LAPIC counts at 1 GHz (APIC_BUS_CYCLE_NS = 1) with divide-by-1.
        IrqSource::LapicTimer { period_us } => {
            (period_us * 1000.0).clamp(1.0, u32::MAX as f64) as u32
        }
        _ => 0,
    };
    // The unrolled loop runs four operations per round when nothing nests.
    let nesting_per_65536 = (phase.nesting * 65536.0).round().clamp(0.0, 65536.0) as u32;
    let iterations = if kind == abi::workload::STRATEGY && nesting_per_65536 == 0 {
        iterations.div_ceil(4) * 4
    } else {
        iterations
    };
    PhaseDescriptor {
        seq: 0,
        workload: kind,
        strategy: id,
        irq_source: phase.irq.abi_id(),
        iterations,
        nesting_per_65536,
        body_ops: phase.body_ops,
        seed: phase.seed,
        timer_initial_count,
        hypercall_transport: 0,
        weights,
    }
}

/// Runs the whole plan. Never panics on guest input; a failing phase becomes a
/// [`PhaseFailure`] and the run goes on with a fresh VM.
pub fn run_plan(
    kvm: &Kvm,
    plan: &Plan,
    image: &Arc<GuestImage>,
    options: &RunOptions,
    progress: &mut ProgressFn<'_>,
) -> Result<RunReport, RunError> {
    let started = Instant::now();
    let mut manifest = host::manifest(kvm).map_err(RunError::Host)?;
    let flavour = host::detect_flavour();
    if plan.hypercall == HypercallTransport::Vmcall && flavour == KvmFlavour::Pvm {
        return Err(RunError::VmcallRefused(flavour.name()));
    }
    manifest.vcpu_pinning = plan.pin_vcpus;
    preflight(plan, &mut manifest)?;
    if plan.max_vcpus() as usize > manifest.host_cpus as usize {
        manifest.warnings.push(format!(
            "{} vCPUs on {} host CPUs: vCPUs share CPUs, so lock spins and ops/s reflect host \
             scheduling as much as the guest",
            plan.max_vcpus(),
            manifest.host_cpus
        ));
    }
    let mut report = RunReport {
        schema: SCHEMA.into(),
        irqbench_version: env!("CARGO_PKG_VERSION").into(),
        config_name: plan.name.clone(),
        config_source: plan.source.clone(),
        started_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        host: manifest,
        ..Default::default()
    };
    let tsc_khz = report.host.tsc_khz.max(1);
    let timeout = Duration::from_millis(plan.phase_timeout_ms.unwrap_or(60_000));
    let mut session: Option<Session> = None;
    let total = plan.phases.len();
    for (i, phase) in plan.phases.iter().enumerate() {
        if options.stop.load(Ordering::SeqCst) {
            report.partial = true;
            report.partial_reason = Some("stopped by signal".into());
            break;
        }
        let irqchip = if phase.irq.needs_in_kernel_irqchip() {
            IrqchipMode::InKernel
        } else {
            IrqchipMode::Userspace
        };
        let mode = irqchip.name().to_string();
        if !report.host.irqchip_modes.contains(&mode) {
            report.host.irqchip_modes.push(mode);
        }
        let reuse = session
            .as_ref()
            .is_some_and(|s| !s.dead && s.vcpus == phase.vcpus && s.irqchip == irqchip);
        if !reuse {
            if let Some(s) = session.take() {
                s.shutdown();
            }
            progress(i, total, &phase.name, "boot");
            let config = MachineConfig {
                vcpus: phase.vcpus,
                memory_bytes: u64::from(plan.memory_mib) << 20,
                irqchip,
                hypercall_exits: plan.hypercall == HypercallTransport::Vmcall,
            };
            match Session::boot(kvm, image, config, plan.hypercall, plan.pin_vcpus) {
                Ok(s) => session = Some(s),
                Err(e) => {
                    report.failures.push(PhaseFailure {
                        name: phase.name.clone(),
                        error: e.to_string(),
                    });
                    continue;
                }
            }
        }
        let Some(s) = session.as_mut() else { continue };
        match measure_phase(s, plan, phase, tsc_khz, timeout, options, &mut |step| {
            progress(i, total, &phase.name, step)
        }) {
            Ok(result) => report.results.push(result),
            Err(PhaseError::Interrupted) => {
                report.partial = true;
                report.partial_reason = Some(format!("stopped by signal during {}", phase.name));
                break;
            }
            Err(e) => report.failures.push(PhaseFailure {
                name: phase.name.clone(),
                error: e.to_string(),
            }),
        }
    }
    if let Some(s) = session.take() {
        s.shutdown();
    }
    report.wall_seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Checks the plan against the host before any VM exists: vCPUs against KVM's limits, guest
/// memory against what the host has free, and file descriptors and threads against the
/// process limits. Hard limits are errors; soft ones become report warnings.
fn preflight(plan: &Plan, manifest: &mut HostManifest) -> Result<(), RunError> {
    let vcpus = plan.max_vcpus();
    if manifest.max_vcpus > 0 && vcpus > manifest.max_vcpus {
        return Err(RunError::Resources(format!(
            "{vcpus} vCPUs requested; KVM allows at most {} per VM (KVM_CAP_MAX_VCPUS)",
            manifest.max_vcpus
        )));
    }
    if manifest.recommended_vcpus > 0 && vcpus > manifest.recommended_vcpus {
        manifest.warnings.push(format!(
            "{vcpus} vCPUs exceed KVM's recommended {} (KVM_CAP_NR_VCPUS)",
            manifest.recommended_vcpus
        ));
    }
    let need_mib = u64::from(plan.memory_mib);
    if let Some(avail_mib) = mem_available_mib() {
        if need_mib > avail_mib {
            return Err(RunError::Resources(format!(
                "guest memory {need_mib} MiB exceeds the host's available {avail_mib} MiB                  (MemAvailable in /proc/meminfo); lower run.memory_mib"
            )));
        }
    }
    // Per VM: the VM fd and its stats fd; per vCPU: its fd and stats fd; the kvm fd itself.
    let need_fds = 3 + 2 * u64::from(vcpus) + 16;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0
        && limit.rlim_cur != libc::RLIM_INFINITY
        && limit.rlim_cur < need_fds
    {
        return Err(RunError::Resources(format!(
            "{vcpus} vCPUs need about {need_fds} open files; the limit is {} (ulimit -n)",
            limit.rlim_cur
        )));
    }
    // SAFETY: as above, for the process/thread limit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut limit) } == 0
        && limit.rlim_cur != libc::RLIM_INFINITY
        && limit.rlim_cur < u64::from(vcpus) + 8
    {
        return Err(RunError::Resources(format!(
            "{vcpus} vCPU threads exceed the process limit {} (ulimit -u)",
            limit.rlim_cur
        )));
    }
    Ok(())
}

fn mem_available_mib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

/// Adaptive iteration count, warm-up, baseline and repeats for one phase.
fn measure_phase(
    session: &mut Session,
    plan: &Plan,
    phase: &PhasePlan,
    tsc_khz: u64,
    timeout: Duration,
    options: &RunOptions,
    step: &mut dyn FnMut(&str),
) -> Result<PhaseResult, PhaseError> {
    let stop = &options.stop;
    let target_cycles = u64::from(plan.block_us) * tsc_khz / 1000 * 40;
    // Adapt: grow until one dispatch lasts the target time. These runs double as warm-up.
    let iterations = match phase.block_ops {
        Some(n) => n,
        None => {
            step("calibrate");
            let mut n = 16;
            loop {
                let d = session.dispatch(
                    descriptor(phase, &phase.workload, n),
                    phase.irq,
                    timeout,
                    stop,
                )?;
                let took = d.max_cycles().max(1);
                if took >= target_cycles || n >= 10_000_000 {
                    break n;
                }
                let factor = (target_cycles as f64 / took as f64 * 1.2).clamp(1.5, 16.0);
                n = ((n as f64 * factor) as u64).min(10_000_000);
            }
        }
    };
    for _ in 0..1 {
        step("warm-up");
        session.dispatch(
            descriptor(phase, &phase.workload, iterations),
            phase.irq,
            timeout,
            stop,
        )?;
    }
    let baseline = phase.workload.baseline();
    let ops_per_iteration = phase.workload.ops_per_iteration() as f64;
    let mut result = PhaseResult {
        name: phase.name.clone(),
        kind: phase.workload.kind(),
        group: phase.group.clone(),
        strategy: phase.workload.label(),
        irq_source: phase.irq.label(),
        nesting: phase.nesting,
        vcpus: phase.vcpus,
        body_ops: phase.body_ops,
        rounds: plan.min_rounds.min(5),
        per_vcpu_ops: vec![0; phase.vcpus as usize],
        ..Default::default()
    };
    let mut cycles = Vec::new();
    let mut raw = Vec::new();
    let mut base_samples = Vec::new();
    let mut base_stat_sums: BTreeMap<String, u64> = BTreeMap::new();
    let mut base_iterations = 0u64;
    let mut ops_per_sec = Vec::new();
    let mut stat_sums: BTreeMap<String, u64> = BTreeMap::new();
    let mut vm_sums: BTreeMap<String, u64> = BTreeMap::new();
    let mut uexits: BTreeMap<String, u64> = BTreeMap::new();
    let mut sites: BTreeMap<(u64, &'static str), u64> = BTreeMap::new();
    let mut lock = LockStats {
        mutual_exclusion_held: true,
        ..Default::default()
    };
    let mut strategy_ops: BTreeMap<String, u64> = BTreeMap::new();
    let mut iterations_total = 0u64;
    let mut per_vcpu_cycles = vec![0u64; phase.vcpus as usize];
    let wall = Instant::now();
    for r in 0..result.rounds {
        step(&format!("repeat {}/{}", r + 1, result.rounds));
        // The baseline (the same loop, body, nesting, load and vCPUs without flag handling) runs
        // right before each repeat, and each repeat subtracts its own: pairs cancel the slow
        // drift of a shared host, which a baseline measured once would bake into every row.
        // Measured for the `empty` strategy too: its result then shows the subtraction's noise.
        let base_per_iter = match &baseline {
            Some(b) => {
                let desc = descriptor(phase, b, iterations);
                let d = session.dispatch(desc, phase.irq, timeout, stop)?;
                for s in &d.samples {
                    if let Some(st) = &s.stats {
                        for (k, v) in &st.values {
                            *base_stat_sums.entry(k.clone()).or_default() += v;
                        }
                    }
                    base_iterations += desc.iterations;
                }
                d.cycles_per_iteration(desc.iterations)
            }
            None => 0.0,
        };
        base_samples.push(base_per_iter / ops_per_iteration);
        let desc = descriptor(phase, &phase.workload, iterations);
        result.block_ops = desc.iterations;
        let d = session.dispatch(desc, phase.irq, timeout, stop)?;
        let per_iter = d.cycles_per_iteration(desc.iterations);
        raw.push(per_iter / ops_per_iteration);
        cycles.push((per_iter - base_per_iter) / ops_per_iteration);
        let secs = d.max_cycles() as f64 / (tsc_khz as f64 * 1000.0);
        if secs > 0.0 {
            ops_per_sec.push(d.total_ops() as f64 / secs);
        }
        for (rec, s) in d.records.iter().zip(&d.samples) {
            result.ops += rec.ops;
            iterations_total += desc.iterations;
            if let Some(slot) = result.per_vcpu_ops.get_mut(s.index as usize) {
                *slot += rec.ops;
            }
            if let Some(slot) = per_vcpu_cycles.get_mut(s.index as usize) {
                *slot += rec.tsc_cycles;
            }
            result.interrupts += rec.interrupts;
            result.hypercalls += rec.hypercalls;
            result.if_violations += rec.if_violations;
            result.hypercalls_seen_by_vmm += s.hypercalls;
            lock.acquisitions += rec.lock_acquisitions;
            lock.spins += rec.lock_spins;
            for (i, c) in rec.strategy_ops.iter().enumerate() {
                if *c > 0 {
                    *strategy_ops
                        .entry(crate::plan::StrategyId(i as u32).name().to_string())
                        .or_default() += c;
                }
            }
            if let Some(st) = &s.stats {
                for (k, v) in &st.values {
                    *stat_sums.entry(k.clone()).or_default() += v;
                }
            }
            for (k, v) in &s.exits {
                *uexits.entry((*k).to_string()).or_default() += v;
            }
            for (k, v) in &s.exit_rips {
                *sites.entry(*k).or_default() += v;
            }
        }
        result.irqs_raised += d.irqs_raised;
        if let Some(vm) = &d.vm_stats {
            for (k, v) in &vm.values {
                *vm_sums.entry(k.clone()).or_default() += v;
            }
        }
        if matches!(phase.workload, Workload::Lock { .. }) {
            lock.counter += d.lock_counter;
            if d.lock_counter != d.total_ops() * 2 {
                lock.mutual_exclusion_held = false;
            }
        }
    }
    result.wall_ms = wall.elapsed().as_secs_f64() * 1000.0;
    result.per_vcpu_ops_per_sec = result
        .per_vcpu_ops
        .iter()
        .zip(&per_vcpu_cycles)
        .map(|(ops, cycles)| *ops as f64 * tsc_khz as f64 * 1000.0 / (*cycles).max(1) as f64)
        .collect();
    let ops = result.ops.max(1) as f64;
    result.cycles_per_op = Summary::from_samples(&cycles);
    result.baseline_cycles = Summary::from_samples(&base_samples);
    result.raw_cycles_per_op = Summary::from_samples(&raw);
    result.ops_per_sec = Summary::from_samples(&ops_per_sec);
    result.precision_reached = result.cycles_per_op.cv < plan.precision * 5.0;
    // Per-op stats, net of the baseline's per-iteration share (loop and doorbell overhead).
    for (k, v) in stat_sums {
        let base =
            base_stat_sums.get(&k).copied().unwrap_or(0) as f64 / base_iterations.max(1) as f64;
        let mut per_op = (v as f64 - base * iterations_total as f64) / ops;
        if per_op.abs() < 1e-9 {
            per_op = 0.0; // float residue of subtracting equal counts
        }
        if v > 0 {
            result.exits_per_op.insert(k, per_op);
        }
    }
    for (k, v) in vm_sums {
        if v > 0 {
            result.vm_stats_per_op.insert(k, v as f64 / ops);
        }
    }
    for (k, v) in uexits {
        result.userspace_exits_per_op.insert(k, v as f64 / ops);
    }
    result.exit_sites = attribute_sites(&session.image, sites, phase);
    if matches!(phase.workload, Workload::Lock { .. }) {
        lock.spins_per_op = lock.spins as f64 / ops;
        result.lock = Some(lock);
    }
    result.strategy_ops = strategy_ops;
    Ok(result)
}

/// Maps exit RIPs to (strategy, site) through the symbol table.
fn attribute_sites(
    image: &GuestImage,
    sites: BTreeMap<(u64, &'static str), u64>,
    phase: &PhasePlan,
) -> Vec<ExitSite> {
    // One row per (symbol, reason): the count over all its RIPs, shown at its busiest RIP.
    let mut grouped: BTreeMap<(String, &'static str), (u64, u64, u64)> = BTreeMap::new();
    for ((rip, reason), count) in sites {
        let symbol = image
            .symbols
            .lookup(rip)
            .map_or_else(|| "?".to_string(), |(s, _)| s.name.clone());
        let entry = grouped.entry((symbol, reason)).or_insert((0, rip, 0));
        entry.0 += count;
        if count > entry.2 {
            entry.1 = rip;
            entry.2 = count;
        }
    }
    let mut out: Vec<ExitSite> = grouped
        .into_iter()
        .map(|((symbol, reason), (count, rip, _))| {
            let (strategy, site) = if symbol == "?" {
                ("-".to_string(), "?".to_string())
            } else {
                classify_symbol(&symbol, phase)
            };
            let instruction = (1..=15)
                .rev()
                .find_map(|len| image.code_bytes(rip, len))
                .map(|b| crate::decode::decode_one(b, rip))
                .unwrap_or_default();
            ExitSite {
                strategy,
                site,
                symbol,
                reason: reason.to_string(),
                count,
                rip,
                instruction,
            }
        })
        .collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then(a.rip.cmp(&b.rip)));
    out
}

/// `irqbench_op_native_skip_restore` → ("native-skip", "restore"); pv-op targets → the phase's
/// strategy and the pv-op's role.
pub fn classify_symbol(name: &str, phase: &PhasePlan) -> (String, String) {
    let phase_strategy = phase.workload.label();
    for prefix in ["irqbench_op_", "irqbench_lockop_"] {
        if let Some(rest) = name.strip_prefix(prefix) {
            for s in crate::plan::StrategyId::all() {
                let stem = s.name().replace('-', "_");
                if let Some(site) = rest.strip_prefix(&stem) {
                    let site = match site {
                        "" => "save",
                        "_disable" => "disable",
                        "_body" => "body",
                        "_restore" => "restore",
                        "_end" => "end",
                        _ => continue,
                    };
                    return (s.name().into(), site.into());
                }
            }
        }
    }
    let site = match name {
        "irqbench_pv_save_fl" => "save (pv save_fl)",
        "irqbench_pv_restore_fl" => "restore (pv restore_fl)",
        "irqbench_pv_irq_disable" => "disable (pv irq_disable)",
        "irqbench_pv_irq_enable" => "enable (pv irq_enable)",
        "irqbench_hypercall" => "hypercall (from restore)",
        "irqbench_hypercall_outer" => "hypercall (outer section enable)",
        n if n.starts_with("irqbench_strategy_loop") => "loop",
        n if n.starts_with("irqbench_insn_") => "insn",
        n if n.starts_with("irqbench_irq_") => "interrupt handler",
        _ => return ("-".into(), name.into()),
    };
    (phase_strategy, site.into())
}

/// Runs a single plan phase on a fresh machine and returns the raw dispatches: for tests and
/// benchmarks that need exact counts rather than statistics.
pub fn run_raw(
    kvm: &Kvm,
    image: &Arc<GuestImage>,
    phase: &PhasePlan,
    irqchip: IrqchipMode,
    timeout: Duration,
) -> Result<(Session, Dispatch), PhaseError> {
    let config = MachineConfig {
        vcpus: phase.vcpus,
        memory_bytes: 16 << 20,
        irqchip,
        hypercall_exits: false,
    };
    let mut session = Session::boot(kvm, image, config, HypercallTransport::Port, false)?;
    let iterations = phase.block_ops.unwrap_or(16);
    let stop = AtomicBool::new(false);
    let d = session.dispatch(
        descriptor(phase, &phase.workload, iterations),
        phase.irq,
        timeout,
        &stop,
    )?;
    Ok((session, d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{InsnId, StrategyId};

    const TIMEOUT: Duration = Duration::from_secs(60);

    fn image() -> Arc<GuestImage> {
        Arc::new(GuestImage::embedded().expect("embedded guest"))
    }

    fn phase(workload: Workload, vcpus: u32, iterations: u64) -> PhasePlan {
        let mut p = Plan::single(workload, vcpus, iterations).phases.remove(0);
        p.body_ops = 2;
        p
    }

    fn raw(workload: Workload, vcpus: u32, iterations: u64) -> Option<(Session, Dispatch)> {
        let kvm = host::test_kvm()?;
        let p = phase(workload, vcpus, iterations);
        Some(
            run_raw(&kvm, &image(), &p, IrqchipMode::Userspace, TIMEOUT)
                .unwrap_or_else(|e| panic!("phase failed: {e}")),
        )
    }

    #[test]
    fn a_phase_that_rings_k_doorbells_yields_exactly_k_doorbell_exits() {
        for k in [0u64, 1, 37] {
            let Some((session, d)) = raw(Workload::Doorbells, 1, k) else {
                return;
            };
            assert_eq!(d.samples[0].pings, k, "pings for k={k}");
            assert_eq!(d.records[0].ops, k);
            // Doorbells are markers, not measured exits.
            assert!(d.samples[0].exits.is_empty(), "{:?}", d.samples[0].exits);
            session.shutdown();
        }
    }

    #[test]
    fn stats_deltas_are_non_negative_and_exits_grow() {
        let Some((session, d)) = raw(
            Workload::Insn {
                insn: InsnId::from_name("pio-exit").expect("insn"),
            },
            1,
            25,
        ) else {
            return;
        };
        let stats = d.samples[0]
            .stats
            .as_ref()
            .expect("binary stats on this host");
        assert!(
            stats.backwards.is_empty(),
            "counters went backwards: {:?}",
            stats.backwards
        );
        let exits = stats.get("exits").expect("an `exits` stat");
        // 25 port-I/O exits to the VMM plus the END doorbell: KVM counts each.
        assert!(exits >= 26, "exits delta {exits}");
        assert_eq!(d.samples[0].exits.get("pio-probe"), Some(&25));
        session.shutdown();
    }

    #[test]
    fn each_exit_probe_exits_to_the_vmm_exactly_once_per_iteration() {
        for (insn, reason) in [
            ("pio-exit", "pio-probe"),
            ("mmio-exit", "mmio-probe"),
            ("hlt-exit", "hlt"),
        ] {
            let Some((session, d)) = raw(
                Workload::Insn {
                    insn: InsnId::from_name(insn).expect("insn"),
                },
                1,
                13,
            ) else {
                return;
            };
            let exits = &d.samples[0].exits;
            assert_eq!(exits.get(reason), Some(&13), "{insn}: {exits:?}");
            assert_eq!(exits.len(), 1, "{insn}: other exits {exits:?}");
            session.shutdown();
        }
    }

    #[test]
    fn two_and_four_vcpus_complete_their_phases_with_their_own_records() {
        for vcpus in [2u32, 4] {
            let Some((session, d)) = raw(
                Workload::Strategy {
                    strategy: StrategyId::from_name("native-skip").expect("strategy"),
                },
                vcpus,
                64,
            ) else {
                return;
            };
            assert_eq!(d.samples.len(), vcpus as usize);
            let mut indices: Vec<u32> = d.samples.iter().map(|s| s.index).collect();
            indices.sort_unstable();
            assert_eq!(indices, (0..vcpus).collect::<Vec<_>>());
            for r in &d.records {
                assert_eq!(r.ops, 64);
                assert!(r.tsc_cycles > 0);
            }
            session.shutdown();
        }
    }

    #[test]
    fn a_faulting_phase_is_reported_with_the_decoded_instruction() {
        let Some(kvm) = host::test_kvm() else {
            return;
        };
        let p = phase(Workload::FaultUd2, 1, 1);
        let err = run_raw(&kvm, &image(), &p, IrqchipMode::Userspace, TIMEOUT)
            .expect_err("ud2 faults")
            .to_string();
        assert!(
            err.contains("guest exception 6 (#UD invalid opcode)"),
            "{err}"
        );
        assert!(err.contains(": ud2"), "decoded instruction missing: {err}");
        assert!(err.contains("<guest_main"), "symbol missing: {err}");
        assert!(err.contains("rax "), "registers missing: {err}");
    }

    #[test]
    fn garbage_records_are_a_protocol_violation_not_a_panic() {
        let Some(kvm) = host::test_kvm() else {
            return;
        };
        let p = phase(Workload::GarbageRecord, 1, 1);
        let err = run_raw(&kvm, &image(), &p, IrqchipMode::Userspace, TIMEOUT)
            .expect_err("garbage")
            .to_string();
        assert!(err.contains("guest protocol violation"), "{err}");
        assert!(err.contains("record.seq"), "{err}");
    }

    fn strategy(name: &str) -> StrategyId {
        StrategyId::from_name(name).unwrap_or_else(|| panic!("strategy {name}"))
    }

    /// A plan for statistical tests: short phases, a few repeats.
    fn small_plan(phases: Vec<PhasePlan>) -> Plan {
        Plan {
            phase_timeout_ms: Some(60_000),
            phases,
            ..Plan::single(Workload::Doorbells, 1, 1)
        }
    }

    fn adaptive(workload: Workload, irq: IrqSource, nesting: f64) -> PhasePlan {
        PhasePlan {
            name: format!("{}/{}/{nesting}", workload.label(), irq.label()),
            group: format!("{}/{nesting}", irq.label()),
            workload,
            irq,
            nesting,
            body_ops: 2,
            vcpus: 1,
            seed: 1,
            block_ops: None,
        }
    }

    fn run(plan: &Plan) -> Option<RunReport> {
        let kvm = host::test_kvm()?;
        let report = run_plan(
            &kvm,
            plan,
            &image(),
            &RunOptions::default(),
            &mut |_, _, _, _| {},
        )
        .expect("run");
        assert!(
            report.failures.is_empty(),
            "failures: {:?}",
            report.failures
        );
        Some(report)
    }

    #[test]
    fn nested_restores_leave_if_clear_except_cli_sti() {
        for s in StrategyId::all() {
            let mut p = phase(Workload::Strategy { strategy: s }, 1, 64);
            p.nesting = 0.5;
            let Some(kvm) = host::test_kvm() else {
                return;
            };
            let (session, d) = run_raw(&kvm, &image(), &p, IrqchipMode::Userspace, TIMEOUT)
                .unwrap_or_else(|e| panic!("{}: {e}", s.name()));
            let violations = d.records[0].if_violations;
            if s.name() == "native-cli-sti" {
                // Half of 64 operations run nested; each re-enables interrupts too early.
                assert_eq!(violations, 32, "{}", s.name());
            } else {
                assert_eq!(violations, 0, "{}", s.name());
            }
            session.shutdown();
        }
    }

    #[test]
    fn the_empty_strategy_reports_about_zero_cycles_after_baseline_subtraction() {
        let plan = small_plan(vec![adaptive(
            Workload::Strategy {
                strategy: StrategyId::EMPTY,
            },
            IrqSource::None,
            0.0,
        )]);
        let Some(report) = run(&plan) else { return };
        let r = &report.results[0];
        assert!(r.raw_cycles_per_op.median > 0.0);
        assert!(r.baseline_cycles.median > 0.0, "baseline was not measured");
        // Each repeat subtracts the baseline run paired with it ...
        assert_eq!(r.baseline_cycles.samples.len(), 3);
        for ((net, raw), base) in r
            .cycles_per_op
            .samples
            .iter()
            .zip(&r.raw_cycles_per_op.samples)
            .zip(&r.baseline_cycles.samples)
        {
            assert!((net - (raw - base)).abs() < 1e-6);
        }
        // ... and leaves about nothing of an operation that does nothing. (Without subtraction
        // the median would be the raw cost; the bound leaves room for a busy 2-CPU host.)
        assert!(
            r.cycles_per_op.median.abs() < 0.5 * r.raw_cycles_per_op.median,
            "empty strategy: {} cycles/op net of a {} baseline (raw {})",
            r.cycles_per_op.median,
            r.baseline_cycles.median,
            r.raw_cycles_per_op.median
        );
    }

    #[test]
    fn repeats_give_a_cv_that_the_report_prints() {
        let plan = small_plan(vec![adaptive(
            Workload::Strategy {
                strategy: strategy("native-skip"),
            },
            IrqSource::None,
            0.0,
        )]);
        let Some(report) = run(&plan) else { return };
        let r = &report.results[0];
        assert_eq!(r.cycles_per_op.samples.len(), 3);
        assert!(
            r.cycles_per_op.cv > 0.0,
            "three TSC measurements were identical"
        );
        let table = crate::report::render_table(&report);
        let cv = format!("{:.1}%", r.cycles_per_op.cv * 100.0);
        assert!(
            table.contains(" cv") && table.contains(&cv),
            "{cv} not in\n{table}"
        );
    }

    #[test]
    fn inject_load_counts_window_exits_and_never_blames_the_critical_section() {
        let plan = small_plan(vec![adaptive(
            Workload::Strategy {
                strategy: strategy("native-popf"),
            },
            IrqSource::Inject { rate_hz: 5000.0 },
            0.5,
        )]);
        let Some(report) = run(&plan) else { return };
        let r = &report.results[0];
        assert!(r.interrupts > 0, "no interrupt was delivered");
        // Every interrupt the guest took was raised by the load thread (some may merge).
        assert!(
            r.irqs_raised >= r.interrupts,
            "{} raised, {} taken",
            r.irqs_raised,
            r.interrupts
        );
        let windows: Vec<&ExitSite> = r
            .exit_sites
            .iter()
            .filter(|s| s.reason == "irq-window-open")
            .collect();
        assert!(
            !windows.is_empty(),
            "no IRQ-window exit: {:?}",
            r.exit_sites
        );
        for w in windows {
            assert_ne!(w.site, "body", "window exit attributed to the body: {w:?}");
            assert!(!w.symbol.ends_with("_body"), "{w:?}");
            assert_ne!(w.symbol, "?", "unattributed: {w:?}");
        }
    }

    #[test]
    fn pv_event_hypercalls_seen_by_the_vmm_equal_those_the_guest_issued() {
        let plan = small_plan(vec![adaptive(
            Workload::Strategy {
                strategy: strategy("vif-restore"),
            },
            IrqSource::PvEvent { rate_hz: 5000.0 },
            0.0,
        )]);
        let Some(report) = run(&plan) else { return };
        let r = &report.results[0];
        assert!(r.hypercalls > 0, "no hypercall under pv-event load");
        assert_eq!(r.hypercalls_seen_by_vmm, r.hypercalls);
        assert_eq!(r.interrupts, 0);
    }

    #[test]
    fn vif_restores_with_saved_if_clear_issue_no_hypercall() {
        for name in ["vif-skip", "vif-restore"] {
            // Every operation nested: every restore sees a saved IF of 0.
            let plan = small_plan(vec![adaptive(
                Workload::Strategy {
                    strategy: strategy(name),
                },
                IrqSource::PvEvent { rate_hz: 5000.0 },
                1.0,
            )]);
            let Some(report) = run(&plan) else { return };
            let r = &report.results[0];
            let hypercall_sites: Vec<&ExitSite> = r
                .exit_sites
                .iter()
                .filter(|s| s.reason == "pio-hypercall")
                .collect();
            assert!(
                !hypercall_sites.is_empty(),
                "{name}: events were never delivered"
            );
            for s in hypercall_sites {
                assert_eq!(
                    s.symbol, "irqbench_hypercall_outer",
                    "{name}: a nested restore issued a hypercall: {s:?}"
                );
            }
            assert_eq!(r.hypercalls_seen_by_vmm, r.hypercalls);
        }
    }

    #[test]
    fn lapic_timer_ticks_grow_with_phase_length() {
        let Some(kvm) = host::test_kvm() else {
            return;
        };
        let mut ticks = Vec::new();
        for iterations in [20_000u64, 160_000] {
            let mut p = phase(Workload::Idle, 1, iterations);
            p.irq = IrqSource::LapicTimer { period_us: 200.0 };
            let (session, d) = run_raw(&kvm, &image(), &p, IrqchipMode::InKernel, TIMEOUT)
                .expect("lapic-timer phase");
            ticks.push((d.records[0].interrupts, d.records[0].tsc_cycles));
            session.shutdown();
        }
        let (short, long) = (ticks[0], ticks[1]);
        assert!(short.0 > 0, "no timer tick in {} cycles", short.1);
        assert!(
            long.1 > short.1 * 2,
            "the long phase was not longer: {ticks:?}"
        );
        assert!(
            long.0 > short.0,
            "ticks did not grow with phase length: {ticks:?}"
        );
    }

    #[test]
    fn the_lock_excludes_and_contention_is_counted() {
        for vcpus in [2u32, 4] {
            let Some((session, d)) = raw(
                Workload::Lock {
                    strategy: strategy("native-popf"),
                },
                vcpus,
                300,
            ) else {
                return;
            };
            let total: u64 = d.records.iter().map(|r| r.ops).sum();
            assert_eq!(
                total,
                300 * u64::from(vcpus),
                "each vCPU's ops sum to the total"
            );
            assert_eq!(
                d.lock_counter,
                2 * total,
                "the counter incremented inside the lock lost updates"
            );
            let acquisitions: u64 = d.records.iter().map(|r| r.lock_acquisitions).sum();
            assert_eq!(acquisitions, 2 * total);
            if vcpus == 4 {
                let spins: u64 = d.records.iter().map(|r| r.lock_spins).sum();
                assert!(spins > 0, "4 vCPUs on this host never contended");
            }
            session.shutdown();
        }
    }

    #[test]
    fn the_scaling_percent_is_computed_from_the_medians_shown() {
        let mut phases = Vec::new();
        for vcpus in [1u32, 2] {
            for name in ["native-popf", "native-cli-sti"] {
                let mut p = adaptive(
                    Workload::Lock {
                        strategy: strategy(name),
                    },
                    IrqSource::None,
                    0.0,
                );
                p.vcpus = vcpus;
                p.name = format!("epoll/{name}/{vcpus}v");
                phases.push(p);
            }
        }
        let Some(report) = run(&small_plan(phases)) else {
            return;
        };
        let rows = crate::report::scaling_rows(&report);
        assert_eq!(rows.len(), 2);
        for row in &rows {
            let a = report
                .results
                .iter()
                .find(|r| r.strategy == row.a && r.vcpus == row.vcpus)
                .expect("A");
            let b = report
                .results
                .iter()
                .find(|r| r.strategy == row.b && r.vcpus == row.vcpus)
                .expect("B");
            assert_eq!(row.a_ops_per_sec, a.ops_per_sec.median);
            assert_eq!(row.b_ops_per_sec, b.ops_per_sec.median);
            let pct = (b.ops_per_sec.median - a.ops_per_sec.median) / a.ops_per_sec.median * 100.0;
            assert!((row.change_pct - pct).abs() < 1e-9);
            let per_vcpu: u64 = a.per_vcpu_ops.iter().sum();
            assert_eq!(per_vcpu, a.ops);
        }
        let text = crate::report::render_scaling(&report);
        assert!(
            text.contains("native-popf (A) vs native-cli-sti (B)"),
            "{text}"
        );
    }

    #[test]
    fn the_watchdog_stops_a_spinning_phase_and_the_next_phase_still_runs() {
        let mut spin = phase(Workload::SpinForever, 1, 1);
        spin.name = "spin".into();
        let mut ring = phase(Workload::Doorbells, 1, 5);
        ring.name = "ring".into();
        let mut plan = small_plan(vec![spin, ring]);
        plan.phase_timeout_ms = Some(1_500);
        plan.min_rounds = 1;
        let Some(kvm) = host::test_kvm() else {
            return;
        };
        let started = Instant::now();
        let report = run_plan(
            &kvm,
            &plan,
            &image(),
            &RunOptions::default(),
            &mut |_, _, _, _| {},
        )
        .expect("run");
        assert!(started.elapsed() < Duration::from_secs(30));
        assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
        let f = &report.failures[0];
        assert_eq!(f.name, "spin");
        assert!(f.error.contains("timed out"), "{}", f.error);
        assert!(f.error.contains("rip 0x"), "no RIP: {}", f.error);
        assert!(f.error.contains("guest_main"), "no symbol: {}", f.error);
        assert_eq!(report.results.len(), 1);
        assert_eq!(report.results[0].name, "ring");
    }

    #[test]
    fn a_stop_request_ends_the_run_early_and_marks_it_partial() {
        let phases = (0..20)
            .map(|i| {
                let mut p = phase(Workload::Doorbells, 1, 50);
                p.name = format!("ring{i}");
                p
            })
            .collect();
        let plan = small_plan(phases);
        let Some(kvm) = host::test_kvm() else {
            return;
        };
        let options = RunOptions::default();
        let stop = options.stop.clone();
        let mut seen = 0;
        let report = run_plan(&kvm, &plan, &image(), &options, &mut |i, _, _, _| {
            seen = i;
            if i == 3 {
                stop.store(true, Ordering::SeqCst);
            }
        })
        .expect("run");
        assert!(report.partial);
        assert!(report.results.len() < 20 && !report.results.is_empty());
        assert!(seen < 20);
    }

    #[test]
    fn preflight_refuses_plans_beyond_the_host() {
        let mut manifest = HostManifest {
            max_vcpus: 2,
            recommended_vcpus: 1,
            ..Default::default()
        };
        let mut plan = small_plan(vec![phase(Workload::Doorbells, 4, 1)]);
        let err = preflight(&plan, &mut manifest)
            .expect_err("4 > 2 vCPUs")
            .to_string();
        assert!(
            err.contains("at most 2") && err.contains("KVM_CAP_MAX_VCPUS"),
            "{err}"
        );

        plan.phases[0].vcpus = 2;
        preflight(&plan, &mut manifest).expect("2 vCPUs fit");
        assert!(
            manifest
                .warnings
                .iter()
                .any(|w| w.contains("recommended 1")),
            "{:?}",
            manifest.warnings
        );

        plan.memory_mib = u32::MAX;
        let err = preflight(&plan, &mut manifest)
            .expect_err("too much memory")
            .to_string();
        assert!(
            err.contains("MemAvailable") && err.contains("memory_mib"),
            "{err}"
        );
    }
}
