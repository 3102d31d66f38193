//! Measurement: a plan's rows, measured group by group in interleaved rounds.
//!
//! A *group* is the rows that share nesting, body, interrupt load and vCPU count; it is always
//! measured together with the `empty` baseline. The guest runs rounds; each round runs every
//! variant once as a block of n operations in an order shuffled per round, with a doorbell
//! between blocks (outside the timed window) at which the VMM reads the KVM stats and the vCPU
//! thread's clocks. Figures are medians of per-round paired values with a 95% CI
//! ([`estimators`]); blocks the host disturbed are left out ([`disturbance`]); a group runs
//! until every row reaches the plan's precision or its time budget ([`group`]).
//! docs/ARCHITECTURE.md describes the whole flow.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use kvm_ioctls::Kvm;

use crate::guest_image::GuestImage;
use crate::host::{self, KvmFlavour};
use crate::machine::{IrqchipMode, MachineConfig, MachineError};
use crate::plan::{HypercallTransport, PhasePlan, Plan};
use crate::results::{DisturbanceInfo, HostManifest, PhaseFailure, RunReport, CI_METHOD, SCHEMA};
use crate::session::{PhaseError, ProgressFn, RunOptions, Session};

pub mod attribution;
pub mod collect;
pub mod descriptor;
pub mod disturbance;
pub mod estimators;
pub mod group;
mod rows;

pub use attribution::classify_symbol;
use group::GroupRun;

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


/// The plan's rows, grouped by `group` in order of first appearance (a group holds at most
/// `MAX_GROUP_VARIANTS` rows; the config loader refuses more, and a larger one is split).
pub fn groups(phases: &[PhasePlan]) -> Vec<Vec<&PhasePlan>> {
    let mut out: Vec<Vec<&PhasePlan>> = Vec::new();
    for p in phases {
        match out
            .iter_mut()
            .find(|g| g[0].group == p.group && g.len() < crate::plan::MAX_GROUP_VARIANTS)
        {
            Some(g) => g.push(p),
            None => out.push(vec![p]),
        }
    }
    out
}

fn fail_rows(report: &mut RunReport, rows: &[&PhasePlan], e: &PhaseError) {
    for r in rows {
        report.failures.push(PhaseFailure {
            name: r.name.clone(),
            error: e.to_string(),
        });
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
        description: plan.description.clone(),
        ci_method: CI_METHOD.into(),
        disturbance: DisturbanceInfo {
            sources: vec![
                disturbance::SOURCE_OFF_CPU.into(),
                disturbance::SOURCE_SWITCHES.into(),
                disturbance::SOURCE_OUTLIER.into(),
            ],
            not_used: vec![disturbance::NOT_USED_STEAL.into()],
        },
        started_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        host: manifest,
        ..Default::default()
    };
    let tsc_khz = report.host.tsc_khz.max(1);
    let mut session: Option<Session> = None;
    let groups = groups(&plan.phases);
    let total = groups.len();
    for (i, rows) in groups.into_iter().enumerate() {
        let first = rows[0];
        if options.stop.load(Ordering::SeqCst) {
            report.partial = true;
            report.partial_reason = Some("stopped by signal".into());
            break;
        }
        let irqchip = if first.irq.needs_in_kernel_irqchip() {
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
            .is_some_and(|s| !s.dead && s.vcpus == first.vcpus && s.irqchip == irqchip);
        if !reuse {
            if let Some(s) = session.take() {
                s.shutdown();
            }
            progress(i, total, &first.group, "boot");
            let config = MachineConfig {
                vcpus: first.vcpus,
                memory_bytes: u64::from(plan.memory_mib) << 20,
                irqchip,
                hypercall_exits: plan.hypercall == HypercallTransport::Vmcall,
            };
            match Session::boot(kvm, image, config, plan.hypercall, plan.pin_vcpus) {
                Ok(s) => session = Some(s),
                Err(e) => {
                    fail_rows(&mut report, &rows, &e);
                    continue;
                }
            }
        }
        let Some(s) = session.as_mut() else { continue };
        let mut run = GroupRun {
            session: s,
            plan,
            rows: rows.clone(),
            tsc_khz,
            options,
        };
        match run.run(&mut |step| progress(i, total, &first.group, step)) {
            Ok(outcome) => {
                report.results.extend(outcome.results);
                report.comparisons.extend(outcome.comparisons);
                report.differences.extend(outcome.differences);
                if outcome.interrupted {
                    report.partial = true;
                    report.partial_reason =
                        Some(format!("stopped by signal during {}", first.group));
                    break;
                }
            }
            Err(PhaseError::Interrupted) => {
                report.partial = true;
                report.partial_reason = Some(format!("stopped by signal during {}", first.group));
                break;
            }
            Err(e) => fail_rows(&mut report, &rows, &e),
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

