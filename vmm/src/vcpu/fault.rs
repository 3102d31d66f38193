//! A vCPU that cannot go on: the report a user sees (registers, the decoded instruction at RIP,
//! the guest symbol), built from the vCPU's state at the moment it stopped.

use std::fmt;

use kvm_bindings::kvm_regs;

use super::VcpuContext;
use super::VcpuOutcome;
use crate::machine::decode;
use crate::vcpu::protocol;

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
            const NAMES: [&str; 16] = [
                "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11",
                "r12", "r13", "r14", "r15",
            ];
            let values = [
                r.rax, r.rbx, r.rcx, r.rdx, r.rsi, r.rdi, r.rbp, r.rsp, r.r8, r.r9, r.r10, r.r11,
                r.r12, r.r13, r.r14, r.r15,
            ];
            // Four registers a line.
            for (i, (name, value)) in NAMES.iter().zip(values).enumerate() {
                write!(f, "  {name:<3} {value:#018x}")?;
                if i % 4 == 3 {
                    writeln!(f)?;
                }
            }
            write!(f, "  rflags {:#010x}", r.rflags)?;
        }
        if let Some(cr2) = self.cr2 {
            write!(f, " cr2 {cr2:#018x}")?;
        }
        Ok(())
    }
}

/// The guest's exception handler reported through the fault port.
pub(super) fn guest_exception(ctx: &mut VcpuContext) -> VcpuOutcome {
    let record = match ctx.mailbox.read_fault(ctx.index) {
        Ok(r) => r,
        Err(e) => return fault(ctx, format!("reading the fault record: {e}"), None),
    };
    let record = match protocol::validate_fault(ctx.index, &record) {
        Ok(r) => r,
        Err(v) => return VcpuOutcome::ProtocolViolation(v),
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

pub(super) fn fault(ctx: &mut VcpuContext, kind: String, rip: Option<u64>) -> VcpuOutcome {
    VcpuOutcome::Fault(Box::new(build_report(ctx, kind, rip)))
}

pub(super) fn stopped(ctx: &mut VcpuContext) -> VcpuOutcome {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The register dump a user reads: four registers a line, then rflags and cr2.
    #[test]
    fn a_fault_report_shows_every_register_four_a_line() {
        let regs = kvm_regs {
            rax: 1,
            r15: 0xF,
            rflags: 0x202,
            ..Default::default()
        };
        let report = FaultReport {
            vcpu: 1,
            kind: "guest exception 14 (#PF page fault), error code 0x2".into(),
            rip: 0x10_0000,
            instruction: "mov (%rax),%rax".into(),
            symbol: Some("guest_main+0x4".into()),
            regs: Some(regs),
            cr2: Some(0xdead),
        };
        let zero = format!("{:#018x}", 0);
        let text = report.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "vCPU 1: guest exception 14 (#PF page fault), error code 0x2"
        );
        assert_eq!(
            lines[1],
            "  rip 0x0000000000100000 <guest_main+0x4>: mov (%rax),%rax"
        );
        assert_eq!(
            lines[2],
            format!("  rax 0x0000000000000001  rbx {zero}  rcx {zero}  rdx {zero}")
        );
        assert_eq!(
            lines[3],
            format!("  rsi {zero}  rdi {zero}  rbp {zero}  rsp {zero}")
        );
        assert_eq!(
            lines[4],
            format!("  r8  {zero}  r9  {zero}  r10 {zero}  r11 {zero}")
        );
        assert_eq!(
            lines[5],
            format!("  r12 {zero}  r13 {zero}  r14 {zero}  r15 0x000000000000000f")
        );
        assert_eq!(lines[6], "  rflags 0x00000202 cr2 0x000000000000dead");
        assert_eq!(lines.len(), 7);
    }
}
