//! The `ipi` source's sender (`workload::IPI_SEND`), run by the VM's extra vCPU: every
//! `ipi_period_tsc` TSC cycles one fixed `IPI_VECTOR` IPI to each measured vCPU (APIC ids
//! `0..vcpu_count`), until the VMM sets `SharedPage::ipi_stop`.

use core::arch::asm;
use core::ptr::{addr_of, addr_of_mut};

use irqbench_abi::{self as abi, offset, VcpuSlot};

use crate::{lapic_write, tsc};

const IA32_APIC_BASE: u32 = 0x1B;
/// IA32_APIC_BASE.EXTD (x2APIC mode; EN, bit 11, is already set from reset).
const APIC_BASE_EXTD: u64 = 1 << 10;
const APIC_BASE_EN: u64 = 1 << 11;
/// The x2APIC ICR: one 64-bit MSR, destination in the high half.
const X2APIC_ICR: u32 = 0x830;
/// Fixed delivery, physical destination, level assert (the SDM's value for all but INIT).
const ICR_LOW: u32 = (1 << 14) | abi::irq::IPI_VECTOR as u32;

/// Sends until told to stop; returns the IPIs sent (ICR writes). A tick it is late for is not
/// made up. Its wait spins without `pause`: VMX's pause-loop and SVM's pause-filter exits
/// would count among the sender's exits per IPI.
pub fn send(slot: *mut VcpuSlot) -> u64 {
    let targets = rd!(slot, vcpu_count);
    let period = rd!(slot, phase.ipi_period_tsc).max(1);
    let x2apic = rd!(slot, phase.ipi_icr) == abi::irq::ICR_X2APIC;
    if x2apic {
        x2apic_enable();
    }
    let stop = (abi::MAILBOX_GPA + offset::SHARED_IPI_STOP as u64) as *const u64;
    let mut sent = 0u64;
    let mut next = tsc().saturating_add(period);
    loop {
        loop {
            // SAFETY: the shared page is identity-mapped for the guest's whole life; an
            // aligned u64 load is atomic on x86.
            if unsafe { stop.read_volatile() } != 0 {
                return sent;
            }
            if tsc() >= next {
                break;
            }
        }
        for target in 0..targets {
            let t0 = tsc();
            mark_raise(target, t0);
            if x2apic {
                x2apic_icr_write(target);
            } else {
                xapic_icr_write(target);
            }
            let cycles = tsc().wrapping_sub(t0).min(u64::from(u32::MAX)) as u32;
            // A mask, not `%`: the index is provably in bounds (no panic path, no division).
            let i = (sent as usize) & (abi::irq::ICR_SAMPLES - 1);
            wr!(slot, cycles, icr_cycles[i]);
            sent += 1;
        }
        let now = tsc();
        next = next.saturating_add(period).max(now);
    }
}

const _: () = assert!(abi::irq::ICR_SAMPLES.is_power_of_two());

/// Times the raise for the target's latency log, as the VMM's load thread does: unless a
/// raise already waits there (only the target's handler swaps it back to 0, and only this
/// vCPU raises, so read-then-write does not race). The vCPUs of one VM share a TSC.
fn mark_raise(target: u32, now: u64) {
    let at = (abi::slot_gpa(target) + offset::SLOT_RAISE_TSC as u64) as *mut u64;
    // SAFETY: every vCPU's slot is identity-mapped for the guest's whole life; aligned u64
    // loads and stores are atomic on x86.
    unsafe {
        if at.read_volatile() == 0 {
            at.write_volatile(now.max(1));
        }
    }
}

/// Switches this vCPU's APIC to x2APIC mode (once: a later phase finds it there).
fn x2apic_enable() {
    let base = rdmsr(IA32_APIC_BASE);
    if base & APIC_BASE_EXTD == 0 {
        wrmsr(IA32_APIC_BASE, base | APIC_BASE_EXTD | APIC_BASE_EN);
    }
}

/// One WRMSR: KVM's `kvm_x2apic_icr_write`.
fn x2apic_icr_write(target: u32) {
    wrmsr(X2APIC_ICR, (u64::from(target) << 32) | u64::from(ICR_LOW));
}

/// Two MMIO stores, the destination (ICR high) then the command (ICR low), which sends.
fn xapic_icr_write(target: u32) {
    lapic_write(0x310, target << 24);
    lapic_write(0x300, ICR_LOW);
}

fn rdmsr(msr: u32) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: reads an architectural MSR KVM emulates; no memory effects.
    unsafe { asm!("rdmsr", in("ecx") msr, out("eax") lo, out("edx") hi, options(nomem, nostack)) };
    (u64::from(hi) << 32) | u64::from(lo)
}

fn wrmsr(msr: u32, value: u64) {
    // SAFETY: the VMM offers x2APIC in CPUID before it asks for this mode, so the APIC MSRs
    // written here exist; no memory effects.
    unsafe {
        asm!("wrmsr", in("ecx") msr, in("eax") value as u32, in("edx") (value >> 32) as u32,
             options(nomem, nostack))
    };
}
