//! What one KVM_RUN exit means, decided by a pure function: `handle_exit(exit, state)` takes an
//! owned copy of the exit ([`ExitEvent`]) and returns an [`ExitAction`] that the run loop carries
//! out. No KVM is needed to test it, so the exits our PVM hosts never produce (an interrupt
//! window that opens at once, FAIL_ENTRY, SYSTEM_EVENT, every INTERNAL_ERROR sub-error) are
//! exercised here with synthetic exits.

use std::fmt;

use irqbench_abi::{self as abi, port};
use serde::{Deserialize, Serialize};

/// Why the VMM got control back, for the exit counts (doorbells and commands are not counted:
/// they are the protocol, not the workload).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExitReason {
    PioConsole,
    PioHypercall,
    PioProbe,
    PioOther,
    PioInOther,
    MmioProbe,
    MmioOther,
    IrqWindowOpen,
    Vmcall,
    Hlt,
    /// KVM_RUN returned EINTR/EAGAIN: a kick (interrupt injection, watchdog) or a signal.
    Signal,
}

impl ExitReason {
    /// How many reasons there are: the length of the fixed per-reason arrays
    /// ([`ExitReason::index`]) the exit path counts into without allocating.
    pub const COUNT: usize = 11;

    pub const ALL: [ExitReason; ExitReason::COUNT] = [
        ExitReason::PioConsole,
        ExitReason::PioHypercall,
        ExitReason::PioProbe,
        ExitReason::PioOther,
        ExitReason::PioInOther,
        ExitReason::MmioProbe,
        ExitReason::MmioOther,
        ExitReason::IrqWindowOpen,
        ExitReason::Vmcall,
        ExitReason::Hlt,
        ExitReason::Signal,
    ];

    /// Position in [`ExitReason::ALL`] (declaration order).
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            ExitReason::PioConsole => "pio-console",
            ExitReason::PioHypercall => "pio-hypercall",
            ExitReason::PioProbe => "pio-probe",
            ExitReason::PioOther => "pio-other",
            ExitReason::PioInOther => "pio-in-other",
            ExitReason::MmioProbe => "mmio-probe",
            ExitReason::MmioOther => "mmio-other",
            ExitReason::IrqWindowOpen => "irq-window-open",
            ExitReason::Vmcall => "vmcall",
            ExitReason::Hlt => "hlt",
            ExitReason::Signal => "signal",
        }
    }

    /// The exit-cost probes' sites are known by construction: reading registers there would add
    /// work to the very round trip they measure.
    pub fn is_probe(self) -> bool {
        matches!(
            self,
            ExitReason::PioProbe | ExitReason::MmioProbe | ExitReason::Hlt
        )
    }
}

impl fmt::Display for ExitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The bytes of a port write, inline: an `out` writes at most 4 bytes, so the exit path of
/// every port write (the measured `pio-exit` probe's too) copies them without allocating.
/// A longer write (`rep outs`) keeps its length and its first 4 bytes; none of the VMM's ports
/// takes one, and the doorbell check rejects it by its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortData {
    bytes: [u8; PortData::INLINE],
    len: usize,
}

impl PortData {
    const INLINE: usize = 4;

    pub fn new(data: &[u8]) -> PortData {
        let mut bytes = [0; PortData::INLINE];
        let kept = data.len().min(PortData::INLINE);
        bytes[..kept].copy_from_slice(&data[..kept]);
        PortData {
            bytes,
            len: data.len(),
        }
    }

    /// How many bytes the guest wrote.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The written bytes, or their first 4 for a longer write.
    pub fn kept(&self) -> &[u8] {
        &self.bytes[..self.len.min(PortData::INLINE)]
    }

    /// The written u32, if exactly 4 bytes were written.
    pub fn word(&self) -> Option<u32> {
        (self.len == PortData::INLINE).then(|| u32::from_le_bytes(self.bytes))
    }
}

/// An owned copy of the parts of a `kvm_ioctls::VcpuExit` the VMM looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExitEvent {
    IoOut {
        port: u16,
        data: PortData,
    },
    IoIn {
        port: u16,
        size: usize,
    },
    MmioWrite {
        addr: u64,
    },
    MmioRead {
        addr: u64,
    },
    IrqWindowOpen,
    /// KVM_EXIT_HYPERCALL (KVM_CAP_EXIT_HYPERCALL): the hypercall number.
    Hypercall {
        nr: u64,
    },
    Hlt,
    Shutdown,
    /// KVM_EXIT_INTERNAL_ERROR with its sub-error and data words.
    InternalError {
        suberror: u32,
        data: Vec<u64>,
    },
    /// KVM_EXIT_FAIL_ENTRY: hardware_entry_failure_reason and the host CPU.
    FailEntry {
        reason: u64,
        cpu: u32,
    },
    /// KVM_EXIT_SYSTEM_EVENT: its type (KVM_SYSTEM_EVENT_*).
    SystemEvent {
        kind: u32,
    },
    /// KVM_RUN returned EINTR or EAGAIN.
    Interrupted,
    /// Any other exit, by its debug text.
    Other(String),
}

/// The run loop's state that decides what an exit means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopState {
    /// The runner asked the guest to shut down: a HLT now is the guest's last instruction.
    pub shutting_down: bool,
    /// A phase is open (between BEGIN and END).
    pub phase_open: bool,
}

/// What the run loop must do about an exit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExitAction {
    /// Count it and run the guest again.
    Resume(ExitReason),
    /// A doorbell marker: hand the written bytes to the protocol layer.
    Doorbell(PortData),
    /// The guest asks for its next command (answer with `size` bytes).
    Command { size: usize },
    /// One console byte, then resume.
    Console(u8),
    /// The virtual-IF "deliver my pending events" call: acknowledge, count, resume.
    Hypercall(ExitReason),
    /// The guest's exception handler reported through the fault port.
    GuestException,
    /// The guest halted after `Shutdown`: the vCPU is done.
    Finished,
    /// The run cannot go on: why.
    Fault(String),
}

/// KVM_HC_MAP_GPA_RANGE: the one hypercall KVM_CAP_EXIT_HYPERCALL forwards to userspace.
const MAP_GPA_RANGE: u64 = abi::hypercall::KVM_HC_MAP_GPA_RANGE as u64;

fn mmio_reason(addr: u64) -> ExitReason {
    if (abi::MMIO_PROBE_GPA..abi::MMIO_PROBE_GPA + 0x1000).contains(&addr) {
        ExitReason::MmioProbe
    } else {
        ExitReason::MmioOther
    }
}

/// Decides what `exit` means in `state` (KVM API, "KVM_RUN" and "kvm_run" exit reasons).
pub fn handle_exit(exit: &ExitEvent, state: LoopState) -> ExitAction {
    match exit {
        ExitEvent::IoOut { port, data } => match *port {
            port::DOORBELL => ExitAction::Doorbell(*data),
            port::CONSOLE => ExitAction::Console(data.kept().first().copied().unwrap_or(0)),
            port::FAULT => ExitAction::GuestException,
            port::HYPERCALL => ExitAction::Hypercall(ExitReason::PioHypercall),
            port::EXIT_PROBE => ExitAction::Resume(ExitReason::PioProbe),
            _ => ExitAction::Resume(ExitReason::PioOther),
        },
        ExitEvent::IoIn { port, size } if *port == port::COMMAND => {
            ExitAction::Command { size: *size }
        }
        ExitEvent::IoIn { .. } => ExitAction::Resume(ExitReason::PioInOther),
        ExitEvent::MmioWrite { addr } | ExitEvent::MmioRead { addr } => {
            ExitAction::Resume(mmio_reason(*addr))
        }
        // With a userspace irqchip the window opens when IF=1 and no STI/MOV-SS shadow blocks
        // injection; on VMX/SVM that can be the very next instruction boundary. Either way the
        // loop's injection step runs before the next KVM_RUN.
        ExitEvent::IrqWindowOpen => ExitAction::Resume(ExitReason::IrqWindowOpen),
        ExitEvent::Hypercall { nr } if *nr == MAP_GPA_RANGE => {
            ExitAction::Hypercall(ExitReason::Vmcall)
        }
        ExitEvent::Hypercall { nr } => ExitAction::Fault(format!(
            "unexpected hypercall {nr} (KVM_EXIT_HYPERCALL); irqbench enables only \
             KVM_HC_MAP_GPA_RANGE ({MAP_GPA_RANGE})"
        )),
        ExitEvent::Hlt if state.shutting_down => ExitAction::Finished,
        // Userspace irqchip: KVM hands every HLT to us (the `hlt-exit` probe); resuming runs
        // the next instruction. With the in-kernel irqchip KVM handles HLT itself, so an HLT
        // exit outside a phase means nothing will ever wake this vCPU.
        ExitEvent::Hlt if state.phase_open => ExitAction::Resume(ExitReason::Hlt),
        ExitEvent::Hlt => ExitAction::Fault(
            "the guest halted outside a phase (HLT with nothing to wake it)".into(),
        ),
        ExitEvent::Shutdown => ExitAction::Fault(
            "triple fault (KVM_EXIT_SHUTDOWN): an exception could not be delivered".into(),
        ),
        ExitEvent::InternalError { suberror, data } => {
            ExitAction::Fault(internal_error_text(*suberror, data))
        }
        ExitEvent::FailEntry { reason, cpu } => ExitAction::Fault(fail_entry_text(*reason, *cpu)),
        ExitEvent::SystemEvent { kind } => ExitAction::Fault(system_event_text(*kind)),
        ExitEvent::Interrupted => ExitAction::Resume(ExitReason::Signal),
        ExitEvent::Other(what) => ExitAction::Fault(format!("unexpected exit {what}")),
    }
}

/// KVM_EXIT_INTERNAL_ERROR's sub-errors (include/uapi/linux/kvm.h, KVM_INTERNAL_ERROR_*).
pub fn internal_error_text(suberror: u32, data: &[u64]) -> String {
    let what = match suberror {
        1 => {
            "emulation failure (KVM_INTERNAL_ERROR_EMULATION): the host could not emulate \
              the instruction at RIP (on PVM: SSE/AVX at CPL0)"
        }
        2 => "simultaneous exceptions (KVM_INTERNAL_ERROR_SIMUL_EX)",
        3 => {
            "delivery event (KVM_INTERNAL_ERROR_DELIVERY_EV): an exit while delivering an \
              event through the IDT"
        }
        4 => "unexpected exit reason (KVM_INTERNAL_ERROR_UNEXPECTED_EXIT_REASON)",
        _ => "unknown suberror",
    };
    let data: Vec<String> = data.iter().map(|d| format!("{d:#x}")).collect();
    format!(
        "KVM internal error: suberror {suberror} — {what}; data [{}]",
        data.join(", ")
    )
}

/// KVM_EXIT_FAIL_ENTRY: VM entry itself failed; the reason is the hardware's (VMX exit
/// reason with bit 31 set, or SVM's exit code), which identifies the invalid guest state.
pub fn fail_entry_text(reason: u64, cpu: u32) -> String {
    let hint = match reason & 0xFFFF {
        33 => " (VMX: invalid guest state)",
        34 => " (VMX: MSR loading)",
        41 => " (VMX: machine-check event)",
        _ if reason == u64::MAX => " (SVM: VMEXIT_INVALID, invalid guest state)",
        _ => "",
    };
    format!("VM entry failed: hardware_entry_failure_reason {reason:#x}{hint} on host CPU {cpu}")
}

/// KVM_EXIT_SYSTEM_EVENT types (KVM API: KVM_SYSTEM_EVENT_SHUTDOWN, _RESET, _CRASH, …).
pub fn system_event_text(kind: u32) -> String {
    let what = match kind {
        1 => "shutdown (KVM_SYSTEM_EVENT_SHUTDOWN)",
        2 => "reset (KVM_SYSTEM_EVENT_RESET)",
        3 => "crash (KVM_SYSTEM_EVENT_CRASH)",
        4 => "wakeup (KVM_SYSTEM_EVENT_WAKEUP)",
        5 => "suspend (KVM_SYSTEM_EVENT_SUSPEND)",
        6 => "SEV termination (KVM_SYSTEM_EVENT_SEV_TERM)",
        7 => "TDX fatal (KVM_SYSTEM_EVENT_TDX_FATAL)",
        _ => "unknown type",
    };
    format!("guest system event {kind}: {what}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const IN_PHASE: LoopState = LoopState {
        shutting_down: false,
        phase_open: true,
    };
    const IDLE: LoopState = LoopState {
        shutting_down: false,
        phase_open: false,
    };

    fn out(port: u16, data: &[u8]) -> ExitEvent {
        ExitEvent::IoOut {
            port,
            data: PortData::new(data),
        }
    }

    #[test]
    fn port_data_is_inline_and_keeps_a_long_writes_length() {
        let word = PortData::new(&[1, 2, 3, 4]);
        assert_eq!((word.len(), word.word()), (4, Some(0x0403_0201)));
        let byte = PortData::new(b"x");
        assert_eq!((byte.kept(), byte.word()), (&b"x"[..], None));
        let long = PortData::new(&[7; 64]);
        assert_eq!(
            (long.len(), long.kept(), long.word()),
            (64, &[7; 4][..], None)
        );
        assert!(PortData::new(&[]).is_empty());
        assert_eq!(
            handle_exit(&out(port::CONSOLE, &[]), IDLE),
            ExitAction::Console(0)
        );
    }

    #[test]
    fn ports_are_sorted_by_their_meaning() {
        assert_eq!(
            handle_exit(&out(port::DOORBELL, &[1, 0, 0, 1]), IN_PHASE),
            ExitAction::Doorbell(PortData::new(&[1, 0, 0, 1]))
        );
        assert_eq!(
            handle_exit(&out(port::CONSOLE, b"x"), IDLE),
            ExitAction::Console(b'x')
        );
        assert_eq!(
            handle_exit(&out(port::FAULT, &[6, 0, 0, 0]), IN_PHASE),
            ExitAction::GuestException
        );
        assert_eq!(
            handle_exit(&out(port::HYPERCALL, &[0; 4]), IN_PHASE),
            ExitAction::Hypercall(ExitReason::PioHypercall)
        );
        assert_eq!(
            handle_exit(&out(port::EXIT_PROBE, &[0; 4]), IN_PHASE),
            ExitAction::Resume(ExitReason::PioProbe)
        );
        assert_eq!(
            handle_exit(&out(0x80, &[0]), IN_PHASE),
            ExitAction::Resume(ExitReason::PioOther)
        );
        let cmd = ExitEvent::IoIn {
            port: port::COMMAND,
            size: 4,
        };
        assert_eq!(handle_exit(&cmd, IDLE), ExitAction::Command { size: 4 });
        let other_in = ExitEvent::IoIn {
            port: 0x60,
            size: 1,
        };
        assert_eq!(
            handle_exit(&other_in, IN_PHASE),
            ExitAction::Resume(ExitReason::PioInOther)
        );
    }

    #[test]
    fn mmio_probe_page_and_elsewhere() {
        let probe = ExitEvent::MmioWrite {
            addr: abi::MMIO_PROBE_GPA + 8,
        };
        assert_eq!(
            handle_exit(&probe, IN_PHASE),
            ExitAction::Resume(ExitReason::MmioProbe)
        );
        let other = ExitEvent::MmioRead { addr: 0xFEC0_0000 };
        assert_eq!(
            handle_exit(&other, IN_PHASE),
            ExitAction::Resume(ExitReason::MmioOther)
        );
    }

    #[test]
    fn an_irq_window_that_opens_at_once_is_counted_and_resumed() {
        // VMX/SVM: after `sti; ret` the window opens at the next boundary; the exit is a plain
        // resume (the injection step before KVM_RUN does the rest).
        assert_eq!(
            handle_exit(&ExitEvent::IrqWindowOpen, IN_PHASE),
            ExitAction::Resume(ExitReason::IrqWindowOpen)
        );
        assert_eq!(
            handle_exit(&ExitEvent::IrqWindowOpen, IDLE),
            ExitAction::Resume(ExitReason::IrqWindowOpen)
        );
    }

    #[test]
    fn hlt_depends_on_the_loop_state() {
        let shutting = LoopState {
            shutting_down: true,
            phase_open: false,
        };
        assert_eq!(handle_exit(&ExitEvent::Hlt, shutting), ExitAction::Finished);
        assert_eq!(
            handle_exit(&ExitEvent::Hlt, IN_PHASE),
            ExitAction::Resume(ExitReason::Hlt)
        );
        // In-kernel irqchip: KVM keeps HLT; one reaching us outside a phase can never wake.
        let ExitAction::Fault(why) = handle_exit(&ExitEvent::Hlt, IDLE) else {
            panic!("HLT outside a phase must end the run");
        };
        assert!(why.contains("nothing to wake it"), "{why}");
    }

    #[test]
    fn fatal_exits_name_what_happened() {
        let cases = [
            (ExitEvent::Shutdown, "triple fault"),
            (
                ExitEvent::FailEntry {
                    reason: 0x8000_0021,
                    cpu: 3,
                },
                "0x80000021 (VMX: invalid guest state) on host CPU 3",
            ),
            (
                ExitEvent::FailEntry {
                    reason: u64::MAX,
                    cpu: 0,
                },
                "SVM: VMEXIT_INVALID",
            ),
            (
                ExitEvent::SystemEvent { kind: 3 },
                "crash (KVM_SYSTEM_EVENT_CRASH)",
            ),
            (ExitEvent::SystemEvent { kind: 99 }, "unknown type"),
            (
                ExitEvent::InternalError {
                    suberror: 1,
                    data: vec![0x10, 0x20],
                },
                "emulation failure (KVM_INTERNAL_ERROR_EMULATION)",
            ),
            (
                ExitEvent::InternalError {
                    suberror: 2,
                    data: vec![],
                },
                "KVM_INTERNAL_ERROR_SIMUL_EX",
            ),
            (
                ExitEvent::InternalError {
                    suberror: 3,
                    data: vec![0x80000b0e],
                },
                "KVM_INTERNAL_ERROR_DELIVERY_EV",
            ),
            (
                ExitEvent::InternalError {
                    suberror: 4,
                    data: vec![],
                },
                "KVM_INTERNAL_ERROR_UNEXPECTED_EXIT_REASON",
            ),
            (ExitEvent::Hypercall { nr: 5 }, "unexpected hypercall 5"),
            (ExitEvent::Other("Debug".into()), "unexpected exit Debug"),
        ];
        for (exit, expect) in cases {
            match handle_exit(&exit, IN_PHASE) {
                ExitAction::Fault(why) => assert!(why.contains(expect), "{exit:?}: {why}"),
                other => panic!("{exit:?} must end the run, got {other:?}"),
            }
        }
        let ExitAction::Fault(why) = handle_exit(
            &ExitEvent::InternalError {
                suberror: 1,
                data: vec![0x10, 0x20],
            },
            IN_PHASE,
        ) else {
            unreachable!()
        };
        assert!(why.ends_with("data [0x10, 0x20]"), "{why}");
    }

    #[test]
    fn the_vmcall_transport_and_signals() {
        assert_eq!(
            handle_exit(&ExitEvent::Hypercall { nr: MAP_GPA_RANGE }, IN_PHASE),
            ExitAction::Hypercall(ExitReason::Vmcall)
        );
        assert_eq!(
            handle_exit(&ExitEvent::Interrupted, IDLE),
            ExitAction::Resume(ExitReason::Signal)
        );
    }

    #[test]
    fn exit_reasons_have_unique_names() {
        let mut names: Vec<&str> = ExitReason::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ExitReason::ALL.len());
        for (i, r) in ExitReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i, "{r}");
        }
        assert!(ExitReason::PioProbe.is_probe() && !ExitReason::IrqWindowOpen.is_probe());
        assert_eq!(ExitReason::IrqWindowOpen.to_string(), "irq-window-open");
    }
}
