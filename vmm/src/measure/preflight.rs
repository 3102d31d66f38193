//! Checks of a plan against the host before any VM exists: what the KVM flavour and CPU can run
//! (hypercall transports), what KVM would silently change (LAPIC timer periods below
//! `kvm.min_timer_period_us`), and what the host has room for (vCPUs, memory, fds, threads).
//! Hard limits are errors that name the config key; soft ones become report warnings.

use super::RunError;
use crate::config::plan::{HypercallTransport, IrqSource, Plan};
use crate::host::cpu::{self, HypercallInsn, Vendor};
use crate::host::soft_limit;
use crate::results::HostManifest;

/// KVM's default `min_timer_period_us` (arch/x86/kvm/x86.c), for the warning when the
/// parameter cannot be read.
const DEFAULT_MIN_TIMER_PERIOD_US: u64 = 200;

/// The instruction the guest's KVM hypercalls use. Refuses the `vmcall` and `vapic-poll`
/// transports on PVM (a hypercall instruction at guest CPL0 livelocks there) and on a CPU
/// vendor whose instruction irqbench does not know.
pub(super) fn hypercall(
    transport: HypercallTransport,
    pvm: bool,
    vendor: &Vendor,
) -> Result<Option<HypercallInsn>, RunError> {
    if !transport.uses_hypercall_insn() {
        return Ok(cpu::hypercall_insn(vendor));
    }
    if pvm {
        return Err(RunError::HypercallRefused {
            transport: transport.name(),
            flavour: "pvm",
        });
    }
    match cpu::hypercall_insn(vendor) {
        Some(insn) => Ok(Some(insn)),
        None => Err(RunError::HypercallVendor {
            transport: transport.name(),
            vendor: vendor.name(),
        }),
    }
}

/// Refuses a `lapic-timer` period below KVM's `min_timer_period_us` (`min`: the parameter as
/// read, or why it could not be): KVM would lengthen every such periodic timer to the minimum
/// (arch/x86/kvm/lapic.c `limit_periodic_timer_frequency`), so the row would measure another
/// load than its name says. An unreadable parameter is a warning.
pub(super) fn timer_periods(
    plan: &Plan,
    min: Result<String, String>,
    warnings: &mut Vec<String>,
) -> Result<(), RunError> {
    let periods = plan.phases.iter().filter_map(|p| match p.irq {
        IrqSource::LapicTimer { period_us } => Some((p, period_us)),
        _ => None,
    });
    let periods: Vec<_> = periods.collect();
    if periods.is_empty() {
        return Ok(());
    }
    let min_us = match min.map(|v| (v.trim().parse::<u64>(), v)) {
        Ok((Ok(us), _)) => us,
        Ok((Err(_), text)) => {
            warnings.push(format!(
                "kvm.min_timer_period_us reads {text:?}, not a number: lapic-timer periods \
                 below it (KVM's default is {DEFAULT_MIN_TIMER_PERIOD_US} µs) would be \
                 lengthened by KVM without notice"
            ));
            return Ok(());
        }
        Err(why) => {
            warnings.push(format!(
                "{why}: lapic-timer periods below kvm.min_timer_period_us (KVM's default is \
                 {DEFAULT_MIN_TIMER_PERIOD_US} µs) would be lengthened by KVM without notice"
            ));
            return Ok(());
        }
    };
    match periods.iter().find(|(_, us)| *us < min_us as f64) {
        Some((row, us)) => Err(RunError::TimerPeriod {
            file: plan.source.clone(),
            bench: row.name.split('/').next().unwrap_or(&row.name).to_owned(),
            period_us: *us,
            min_us,
        }),
        None => Ok(()),
    }
}

/// vCPUs against KVM's limits, guest memory against what the host has free, and file
/// descriptors and threads against the process limits.
pub(super) fn resources(plan: &Plan, manifest: &mut HostManifest) -> Result<(), RunError> {
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
    // Every replicate is a VM of its own: its memory and vCPU threads all live at once.
    let replicates = plan.replicates.max(1);
    let need_mib = u64::from(plan.memory_mib) * u64::from(replicates);
    let (lower, of) = if replicates > 1 {
        (
            "run.memory_mib or run.replicates",
            format!(" ({replicates} replicates)"),
        )
    } else {
        ("run.memory_mib", String::new())
    };
    if let Some(avail_mib) = mem_available_mib() {
        if need_mib > avail_mib {
            return Err(RunError::Resources(format!(
                "guest memory {need_mib} MiB{of} exceeds the host's available {avail_mib} MiB \
                 (MemAvailable in /proc/meminfo); lower {lower}"
            )));
        }
    }
    let threads = vcpus.saturating_mul(replicates);
    process_limits(threads)?;
    address_space(need_mib, threads)
}

/// What this process has mapped now (VmSize in /proc/self/status), in bytes.
fn mapped_now() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// A run maps the guest's memory and a stack per thread (the vCPUs, the interrupt load, the
/// signal listener) on top of what the process holds: under an address-space limit (`ulimit
/// -v`) too small for that, an allocation would fail in the middle of the run and abort it.
/// Refused up front instead, naming the limit.
fn address_space(guest_mib: u64, vcpus: u32) -> Result<(), RunError> {
    const MIB: u64 = 1 << 20;
    // Rust's default thread stack (2 MiB) and its guard page, rounded up; and room for what
    // the run maps besides (the heap its blocks and round tables grow, the validation's own
    // guest, KVM's per-vCPU pages). Measured: the quick config (32 MiB guest) aborted at a
    // limit of 66.4 MiB and ran at 68.4 MiB, with 12 MiB mapped at this point; the estimate
    // errs a little on the safe side.
    const PER_THREAD: u64 = 3 * MIB;
    const HEAP_ROOM: u64 = 16 * MIB;
    let Some(limit) = soft_limit(libc::RLIMIT_AS) else {
        return Ok(());
    };
    let Some(now) = mapped_now() else {
        return Ok(());
    };
    let threads = u64::from(vcpus) + 2;
    let need = now + guest_mib * MIB + threads * PER_THREAD + HEAP_ROOM;
    if need <= limit {
        return Ok(());
    }
    Err(RunError::Resources(format!(
        "the run needs about {} MiB of address space ({} MiB mapped now, {guest_mib} MiB of \
         guest memory, {threads} thread stacks), but the address-space limit (ulimit -v) is {} \
         MiB; raise it or lower run.memory_mib",
        need.div_ceil(MIB),
        now / MIB,
        limit / MIB
    )))
}

fn process_limits(vcpus: u32) -> Result<(), RunError> {
    // Per VM: the VM fd and its stats fd; per vCPU: its fd and stats fd; the kvm fd itself.
    let need_fds = 3 + 2 * u64::from(vcpus) + 16;
    if let Some(limit) = soft_limit(libc::RLIMIT_NOFILE).filter(|&l| l < need_fds) {
        return Err(RunError::Resources(format!(
            "{vcpus} vCPUs need about {need_fds} open files; the limit is {limit} (ulimit -n)"
        )));
    }
    if let Some(limit) = soft_limit(libc::RLIMIT_NPROC).filter(|&l| l < u64::from(vcpus) + 8) {
        return Err(RunError::Resources(format!(
            "{vcpus} vCPU threads exceed the process limit {limit} (ulimit -u)"
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::plan::Workload;

    fn plan_with(vcpus: u32, irq: IrqSource) -> Plan {
        let mut plan = Plan::single(Workload::Doorbells, vcpus, 1);
        plan.source = "configs/x.toml".into();
        plan.phases[0].name = "lt/native-popf/n0/lapic-timer@100us/1v".into();
        plan.phases[0].irq = irq;
        plan
    }

    #[test]
    fn resources_refuse_plans_beyond_the_host() {
        let mut manifest = HostManifest {
            max_vcpus: 2,
            recommended_vcpus: 1,
            ..Default::default()
        };
        let mut plan = plan_with(4, IrqSource::None);
        let err = resources(&plan, &mut manifest)
            .expect_err("4 > 2 vCPUs")
            .to_string();
        assert!(
            err.contains("at most 2") && err.contains("KVM_CAP_MAX_VCPUS"),
            "{err}"
        );

        plan.phases[0].vcpus = 2;
        resources(&plan, &mut manifest).expect("2 vCPUs fit");
        assert!(
            manifest
                .warnings
                .iter()
                .any(|w| w.contains("recommended 1")),
            "{:?}",
            manifest.warnings
        );

        plan.memory_mib = u32::MAX;
        let err = resources(&plan, &mut manifest)
            .expect_err("too much memory")
            .to_string();
        assert!(
            err.contains("MemAvailable") && err.contains("memory_mib"),
            "{err}"
        );
    }

    #[test]
    fn a_lapic_period_below_kvms_minimum_is_refused_with_key_value_and_limit() {
        let lapic = |us| IrqSource::LapicTimer { period_us: us };
        let mut warnings = Vec::new();
        let err = timer_periods(&plan_with(1, lapic(100.0)), Ok("200".into()), &mut warnings)
            .expect_err("100 µs < 200 µs")
            .to_string();
        for part in [
            "configs/x.toml",
            "bench \"lt\"",
            "period_us = 100",
            "kvm.min_timer_period_us = 200",
            "limit_periodic_timer_frequency",
        ] {
            assert!(err.contains(part), "{part:?} missing: {err}");
        }
        timer_periods(
            &plan_with(1, lapic(200.0)),
            Ok("200\n".into()),
            &mut warnings,
        )
        .expect("at the minimum");
        timer_periods(&plan_with(1, lapic(50.0)), Ok("0".into()), &mut warnings)
            .expect("no minimum");
        assert!(warnings.is_empty(), "{warnings:?}");
        // Unreadable: a warning, not an error; rows without a LAPIC timer do not care.
        timer_periods(
            &plan_with(1, lapic(50.0)),
            Err("cannot read X".into()),
            &mut warnings,
        )
        .expect("unreadable is a warning");
        assert!(
            warnings.len() == 1 && warnings[0].contains("cannot read X"),
            "{warnings:?}"
        );
        timer_periods(
            &plan_with(1, IrqSource::None),
            Err("x".into()),
            &mut warnings,
        )
        .expect("no lapic-timer row");
        assert_eq!(warnings.len(), 1);
    }

    #[test]
    fn hypercall_instructions_are_refused_on_pvm_and_unknown_vendors() {
        for transport in [HypercallTransport::Vmcall, HypercallTransport::VapicPoll] {
            let err = hypercall(transport, true, &Vendor::Intel)
                .expect_err("PVM")
                .to_string();
            assert!(
                err.contains(transport.name())
                    && err.contains("livelocks")
                    && err.contains("\"port\""),
                "{err}"
            );
            let err = hypercall(transport, false, &Vendor::Other("Weird".into()))
                .expect_err("unknown vendor")
                .to_string();
            assert!(err.contains("Weird") && err.contains("\"port\""), "{err}");
            assert_eq!(
                hypercall(transport, false, &Vendor::Amd).expect("SVM"),
                Some(HypercallInsn::Vmmcall)
            );
        }
        // Port I/O runs everywhere.
        hypercall(HypercallTransport::Port, true, &Vendor::Other("x".into())).expect("port");
    }
}
