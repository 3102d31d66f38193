//! The `ipi` source's sender: the VM's extra, unmeasured vCPU (index = the measured vCPUs'
//! count) that writes its ICR at the load's rate while the measured vCPUs run their phase
//! (guest/src/ipi.rs), and what one dispatch of it measured.

use irqbench_abi::{self as abi, record_status, PhaseDescriptor};
use kvm_ioctls::Kvm;

use crate::kvm::stats::StatsDelta;
use crate::machine::Mailbox;
use crate::vcpu::protocol::ProtocolViolation;
use crate::vcpu::{ExitReason, PhaseSample};

/// CPUID.1:ECX.x2APIC.
const CPUID_1_ECX_X2APIC: u32 = 1 << 21;

/// How the sender writes its ICR: x2APIC (one WRMSR) where KVM's supported CPUID, which every
/// vCPU gets, offers it; else the xAPIC's two MMIO stores.
pub fn icr_mode(kvm: &Kvm) -> u32 {
    let x2apic = crate::kvm::supported_cpuid(kvm).is_ok_and(|c| {
        c.as_slice()
            .iter()
            .any(|e| e.function == 1 && e.ecx & CPUID_1_ECX_X2APIC != 0)
    });
    if x2apic {
        abi::irq::ICR_X2APIC
    } else {
        abi::irq::ICR_XAPIC
    }
}

/// The name an ICR mode goes by in reports.
pub fn icr_name(icr: u32) -> &'static str {
    if icr == abi::irq::ICR_X2APIC {
        "x2apic"
    } else {
        "xapic"
    }
}

/// The sender's descriptor for a phase `desc` of a source at `rate_hz`: the same seq and
/// source, its own workload, one tick every `tsc_khz × 1000 / rate_hz` TSC cycles.
pub fn descriptor(desc: &PhaseDescriptor, rate_hz: f64, tsc_khz: u64, icr: u32) -> PhaseDescriptor {
    let period = (tsc_khz as f64 * 1000.0 / rate_hz.max(1e-3)).clamp(1.0, u64::MAX as f64);
    PhaseDescriptor {
        seq: desc.seq,
        workload: abi::workload::IPI_SEND,
        irq_source: desc.irq_source,
        hypercall_transport: desc.hypercall_transport,
        hypercall_insn: desc.hypercall_insn,
        ipi_icr: icr,
        ipi_period_tsc: period as u64,
        ..Default::default()
    }
}

/// What the sender did over one dispatch.
#[derive(Clone, Debug, PartialEq)]
pub struct SenderSample {
    /// `x2apic` or `xapic`.
    pub icr: &'static str,
    /// IPIs sent (ICR writes), one per measured vCPU at each tick.
    pub ipis: u64,
    /// Its phase in guest TSC cycles.
    pub tsc_cycles: u64,
    /// Its vCPU's KVM stats over its phase; `None` without binary stats.
    pub stats: Option<StatsDelta>,
    /// Userspace exits of its vCPU (doorbells and kicks excluded): an in-kernel ICR has none.
    pub vmm_exits: u64,
    /// Guest TSC cycles of its last ICR writes (up to `abi::irq::ICR_SAMPLES`; rdtsc included).
    pub icr_cycles: Vec<u32>,
}

/// The sender's record checked against its descriptor, with its ICR cycles from its slot.
pub fn validate(
    index: u32,
    desc: &PhaseDescriptor,
    sample: &PhaseSample,
    mailbox: &Mailbox,
) -> Result<SenderSample, ProtocolViolation> {
    let bad = |field: &'static str, problem: String| ProtocolViolation {
        vcpu: index,
        field,
        problem,
    };
    let rec = &sample.record;
    if rec.status != record_status::DONE {
        return Err(bad(
            "record.status",
            format!(
                "is {:#x}; the ipi sender's must be {}",
                rec.status,
                record_status::DONE
            ),
        ));
    }
    if rec.head.seq != desc.seq {
        let problem = format!("is {} but the phase sent was {}", rec.head.seq, desc.seq);
        return Err(bad("record.head.seq", problem));
    }
    let Some(tsc_cycles) = rec.head.tsc_end.checked_sub(rec.head.tsc_start) else {
        return Err(bad("record.head.tsc_end", "is before tsc_start".into()));
    };
    // Each tick costs the sender an exit at least: more writes than cycles is garbage.
    if rec.head.ops > tsc_cycles {
        let problem = format!("({}) exceeds its TSC cycles ({tsc_cycles})", rec.head.ops);
        return Err(bad("record.head.ops", problem));
    }
    let ring = mailbox
        .read_icr_cycles(index)
        .map_err(|e| bad("icr_cycles", format!("could not be read: {e}")))?;
    let kept = (rec.head.ops as usize).min(abi::irq::ICR_SAMPLES);
    let vmm_exits = sample
        .exits
        .iter()
        .filter(|(r, _)| **r != ExitReason::Signal)
        .map(|(_, n)| n)
        .sum();
    Ok(SenderSample {
        icr: icr_name(desc.ipi_icr),
        ipis: rec.head.ops,
        tsc_cycles,
        stats: sample.stats.clone(),
        vmm_exits,
        icr_cycles: ring[..kept].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use vm_memory::{GuestAddress, GuestMemoryMmap};

    use super::*;

    fn sample(seq: u32, status: u32, ops: u64, cycles: u64) -> PhaseSample {
        let mut s = PhaseSample::default();
        s.record.status = status;
        s.record.head.seq = seq;
        s.record.head.tsc_start = 1000;
        s.record.head.tsc_end = 1000 + cycles;
        s.record.head.ops = ops;
        s
    }

    #[test]
    fn the_senders_period_is_its_rate_in_tsc_cycles() {
        let desc = PhaseDescriptor {
            seq: 9,
            irq_source: abi::irq::IPI,
            ..Default::default()
        };
        let d = descriptor(&desc, 1000.0, 2_500_000, abi::irq::ICR_X2APIC);
        assert_eq!(
            (d.seq, d.workload, d.ipi_icr, d.ipi_period_tsc),
            (9, abi::workload::IPI_SEND, abi::irq::ICR_X2APIC, 2_500_000)
        );
        assert_eq!(
            (icr_name(d.ipi_icr), icr_name(abi::irq::ICR_XAPIC)),
            ("x2apic", "xapic")
        );
    }

    #[test]
    fn a_senders_record_is_checked_before_its_ipis_count() {
        let memory = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 1 << 20)]).expect("RAM");
        let mailbox = Mailbox::new(memory);
        let desc = PhaseDescriptor {
            seq: 9,
            ipi_icr: abi::irq::ICR_X2APIC,
            ..Default::default()
        };
        let ok = validate(
            1,
            &desc,
            &sample(9, record_status::DONE, 40, 1_000_000),
            &mailbox,
        )
        .expect("a consistent record");
        assert_eq!(
            (ok.ipis, ok.icr, ok.icr_cycles.len()),
            (40, "x2apic", abi::irq::ICR_SAMPLES)
        );
        let few = validate(1, &desc, &sample(9, record_status::DONE, 3, 100), &mailbox);
        assert_eq!(few.map(|s| s.icr_cycles.len()).ok(), Some(3));
        for (bad, field) in [
            (sample(8, record_status::DONE, 1, 100), "record.head.seq"),
            (sample(9, record_status::EMPTY, 1, 100), "record.status"),
            (sample(9, record_status::DONE, 101, 100), "record.head.ops"),
        ] {
            let e = validate(1, &desc, &bad, &mailbox).expect_err(field);
            assert_eq!((e.vcpu, e.field), (1, field), "{e}");
        }
    }
}
