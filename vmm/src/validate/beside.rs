//! The quick validation beside a run's first guest: its guest checks on a thread of their own
//! while the first group boots, warms up and calibrates on another CPU, so the run's start is the
//! longer of the two instead of their sum. The gate before the first round waits for them, so
//! no round is ever measured beside them, and a FAIL still refuses the run before it measures.

use std::sync::Arc;
use std::thread::{Scope as ThreadScope, ScopedJoinHandle};

use kvm_ioctls::Kvm;

use super::{begin, finish_run, probes, OnFail, Pending, Refusal};
use crate::config::plan::Plan;
use crate::host::soft_limit;
use crate::machine::image::GuestImage;
use crate::results::{HostManifest, Scope};
use crate::vcpu::Stop;

/// Why the validation's guest checks may not run beside this plan's first group here, if they
/// may not: the plan ([`not_beside`], with the CPUs of the process's affinity mask) or the
/// process's limits ([`limits_leave_no_room`]).
pub fn why_not_beside(plan: &Plan, trace_exits: bool) -> Option<&'static str> {
    not_beside(plan, trace_exits, super::noise::allowed_cpus().len()).or_else(|| {
        limits_leave_no_room(
            soft_limit(libc::RLIMIT_AS),
            soft_limit(libc::RLIMIT_NPROC),
            system_tasks(),
        )
    })
}

/// Tasks the checks add beside the first group: their thread, its vCPU thread and the kernel's
/// worker of their VM (KVM's NX huge-page recovery thread is charged to the user).
const TASKS_BESIDE: u64 = 3;
/// Room kept under a task limit for what else the user starts meanwhile.
const TASKS_SPARE: u64 = 16;

/// The run's preflight budgets the process's limits for one guest at a time: the checks run
/// beside the first group only where the limits leave room for both. Under an address-space
/// limit (`ulimit -v`) never (a second guest's memory and two thread stacks may not fit); under a
/// task limit (`ulimit -u`, which counts every task of the user) only while it exceeds every
/// task of the system (`system_tasks`, an upper bound on the user's) by [`TASKS_BESIDE`] and
/// [`TASKS_SPARE`].
fn limits_leave_no_room(
    address_space: Option<u64>,
    tasks_limit: Option<u64>,
    system_tasks: Option<u64>,
) -> Option<&'static str> {
    if address_space.is_some() {
        return Some("an address-space limit (ulimit -v) is budgeted for one guest at a time");
    }
    match (tasks_limit, system_tasks) {
        (None, _) => None,
        (Some(limit), Some(tasks)) if limit >= tasks + TASKS_BESIDE + TASKS_SPARE => None,
        _ => Some("the task limit (ulimit -u) leaves no room for the validation's threads"),
    }
}

/// Every task of the system: the 4th field of /proc/loadavg (`running/total`).
fn system_tasks() -> Option<u64> {
    let text = crate::host::read_fact(std::path::Path::new("/proc/loadavg")).ok()?;
    let field = text.split_whitespace().nth(3)?;
    field.split_once('/')?.1.parse().ok()
}

/// Why a plan's first group may not boot beside the validation's guest on `cpus` CPUs, if it
/// may not.
pub fn not_beside(plan: &Plan, trace_exits: bool, cpus: usize) -> Option<&'static str> {
    let first_vcpus = plan.phases.first().map_or(1, |p| p.vcpus) as usize;
    if plan.hypercall.uses_hypercall_insn() {
        // The validation may find PVM behind an ambiguous declaration, where the instruction
        // livelocks: the first group's warm-up must not issue it before that is known.
        Some("the plan's hypercall instruction waits for the validation's flavour")
    } else if trace_exits {
        // The exit trace counts every vCPU thread of the process.
        Some("--trace-exits counts every vCPU thread of the process")
    } else if first_vcpus + 1 > cpus {
        // The validation's vCPU would share a CPU with the first group's, and slow the
        // calibration that sizes its blocks.
        Some("no CPU is left for the validation's vCPU beside the first group's")
    } else {
        None
    }
}

/// The quick suite's guest checks, running on a thread beside the caller.
#[allow(missing_debug_implementations)] // a join handle, which is not Debug-worthy
pub struct Beside<'scope> {
    thread: ScopedJoinHandle<'scope, (Pending, HostManifest)>,
    /// The manifest's warnings when the checks started: theirs follow.
    warnings_before: usize,
}

impl<'scope> Beside<'scope> {
    /// Starts the checks on a thread of `scope`, on a copy of `manifest`. Err when no thread
    /// could be started (the probe is gone with it: the caller starts another and runs the
    /// checks in series).
    pub fn start<'env>(
        scope: &'scope ThreadScope<'scope, 'env>,
        kvm: &'env Kvm,
        image: &'env Arc<GuestImage>,
        manifest: &HostManifest,
        probe: Result<probes::TscProbe, String>,
        stop: &Stop,
    ) -> std::io::Result<Beside<'scope>> {
        let mut copy = manifest.clone();
        let stop = stop.clone();
        let warnings_before = copy.warnings.len();
        let thread = std::thread::Builder::new()
            .name("validate".into())
            .spawn_scoped(scope, move || {
                let pending = begin(kvm, image, &mut copy, Scope::Quick, Some(probe), &stop);
                (pending, copy)
            })?;
        Ok(Beside {
            thread,
            warnings_before,
        })
    }

    /// Waits for the checks, takes what they learnt about the host into `manifest`, then judges
    /// what was left open as [`finish_run`] does. The wait is bounded: every wait of the checks
    /// is (a hung guest fails its check after 10 s), and a signal wakes and ends them.
    pub fn finish(self, manifest: &mut HostManifest, on_fail: OnFail) -> Result<(), Refusal> {
        let (pending, checked) = match self.thread.join() {
            Ok(done) => done,
            // A panic in the checks is a VMM bug: it goes on as it would have in series.
            Err(panic) => std::panic::resume_unwind(panic),
        };
        adopt_findings(manifest, checked, self.warnings_before);
        finish_run(pending, manifest, on_fail)
    }
}

/// What the guest checks write into the manifest, and nothing else: the flavour's behaviour and,
/// where it decides an ambiguous declaration, the flavour and a warning saying so.
fn adopt_findings(into: &mut HostManifest, checked: HostManifest, warnings_before: usize) {
    into.flavour = checked.flavour;
    into.kvm_flavour = checked.kvm_flavour;
    into.warnings
        .extend(checked.warnings.into_iter().skip(warnings_before));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::plan::{HypercallTransport, Plan, StrategyId, Workload};
    use crate::validate::before_run;

    fn plan(vcpus: u32, hypercall: HypercallTransport) -> Plan {
        let strategy = StrategyId::NATIVE_POPF;
        let mut plan = Plan::single(Workload::Strategy { strategy }, vcpus, 4);
        plan.hypercall = hypercall;
        plan
    }

    /// Beside only where nothing the first group does waits for the validation's answer, and
    /// where its vCPU has a CPU of its own.
    #[test]
    fn the_first_group_boots_beside_only_with_a_cpu_to_spare_and_nothing_to_wait_for() {
        let port = HypercallTransport::Port;
        assert_eq!(not_beside(&plan(1, port), false, 2), None);
        assert_eq!(not_beside(&plan(3, port), false, 4), None);
        assert!(not_beside(&plan(1, port), false, 1).is_some());
        assert!(not_beside(&plan(2, port), false, 2).is_some());
        assert!(not_beside(&plan(1, port), true, 8).is_some());
        for insn in [HypercallTransport::Vmcall, HypercallTransport::VapicPoll] {
            assert!(not_beside(&plan(1, insn), false, 8).is_some(), "{insn:?}");
        }
    }

    /// Beside only where the process's limits leave room for a second guest and its threads.
    #[test]
    fn limits_keep_the_checks_in_series_where_a_second_guest_may_not_fit() {
        assert_eq!(limits_leave_no_room(None, None, None), None);
        assert_eq!(limits_leave_no_room(None, None, Some(5000)), None);
        assert!(limits_leave_no_room(Some(1 << 40), None, Some(80)).is_some());
        assert_eq!(limits_leave_no_room(None, Some(100), Some(81)), None);
        assert!(limits_leave_no_room(None, Some(100), Some(82)).is_some());
        assert!(limits_leave_no_room(None, Some(100_000), None).is_some());
        assert!(
            system_tasks().is_some_and(|n| n > 0),
            "{:?}",
            system_tasks()
        );
    }

    /// The checks on their thread write into the manifest exactly what they write in series:
    /// the two manifests, from one copy, end equal but for the validation's own timings.
    #[test]
    fn beside_records_what_the_checks_record_in_series() {
        let Some(kvm) = crate::host::test_kvm() else {
            return;
        };
        let image = Arc::new(GuestImage::embedded().expect("embedded guest"));
        let mut host = crate::host::manifest(&kvm).expect("manifest");
        host.warnings.push("a warning the run had before".into());
        let mut series = host.clone();
        before_run(&kvm, &image, &mut series, OnFail::Refuse, &Stop::new())
            .expect("the quick suite passes");
        let mut beside = host;
        std::thread::scope(|scope| {
            let probe = probes::TscProbe::start(&kvm);
            let running =
                Beside::start(scope, &kvm, &image, &beside, probe, &Stop::new()).expect("a thread");
            // The run's own warnings, added meanwhile, stay and come first.
            beside
                .warnings
                .push("a warning the run added meanwhile".into());
            running.finish(&mut beside, OnFail::Refuse)
        })
        .expect("the quick suite passes beside");
        let checks = |m: &mut HostManifest| -> Vec<(String, crate::results::Verdict)> {
            let v = m.validation.take().expect("recorded");
            v.checks.into_iter().map(|c| (c.id, c.verdict)).collect()
        };
        let (in_series, on_thread) = (checks(&mut series), checks(&mut beside));
        let ids = |c: &[(String, crate::results::Verdict)]| -> Vec<String> {
            c.iter().map(|(id, _)| id.clone()).collect()
        };
        assert!(!in_series.is_empty());
        assert_eq!(ids(&in_series), ids(&on_thread));
        let at = |m: &HostManifest, w: &str| m.warnings.iter().position(|x| x == w);
        let added = at(&beside, "a warning the run added meanwhile").expect("kept");
        assert!(at(&beside, "a warning the run had before") < Some(added));
        beside.warnings.remove(added);
        let json = |m: &HostManifest| serde_json::to_value(m).expect("serialisable");
        assert_eq!(json(&series), json(&beside));
        // Not vacuous: the behaviour the checks measured is in both.
        assert!(
            matches!(beside.flavour.behaviour, crate::results::Readable::Value(_)),
            "{:?}",
            beside.flavour.behaviour
        );
    }
}
