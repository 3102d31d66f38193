//! Checks of a plan against the host before any VM exists: what the KVM flavour and CPU can run
//! (hypercall transports), and what the host has room for (vCPUs, memory, fds, threads).
//! Hard limits are errors that name the config key; soft ones become report warnings.

use super::RunError;
use crate::cpu::{self, HypercallInsn, Vendor};
use crate::plan::{HypercallTransport, Plan};
use crate::results::HostManifest;

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
    let need_mib = u64::from(plan.memory_mib);
    if let Some(avail_mib) = mem_available_mib() {
        if need_mib > avail_mib {
            return Err(RunError::Resources(format!(
                "guest memory {need_mib} MiB exceeds the host's available {avail_mib} MiB \
                 (MemAvailable in /proc/meminfo); lower run.memory_mib"
            )));
        }
    }
    process_limits(vcpus)
}

fn process_limits(vcpus: u32) -> Result<(), RunError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Workload;

    fn plan_with(vcpus: u32) -> Plan {
        Plan::single(Workload::Doorbells, vcpus, 1)
    }

    #[test]
    fn resources_refuse_plans_beyond_the_host() {
        let mut manifest = HostManifest {
            max_vcpus: 2,
            recommended_vcpus: 1,
            ..Default::default()
        };
        let mut plan = plan_with(4);
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
