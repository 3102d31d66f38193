//! `irqbench validate`: does this host behave as its KVM flavour should, so that numbers
//! measured on it mean what the reports say?
//!
//! Each check boots real guests (or reads the host's files), then a pure judge
//! ([`judge`]) compares the measurement with what the flavour's KVM does by its documentation
//! and source (docs/VALIDATE.md has the table with citations) and gives PASS, WARN or FAIL
//! with the expected and measured values in words. [`Scope::Full`] is the whole suite
//! (`irqbench validate`, a few seconds); [`Scope::Quick`] the subset `irqbench run` does first
//! (under 100 ms), recorded as `host.validation`.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kvm_ioctls::Kvm;

use crate::identity::InsnId;
use crate::machine::image::GuestImage;
use crate::machine::IrqchipMode;
use crate::results::host::classify;
use crate::results::{Behaviour, Check, HostManifest, Readable, Scope, Validation, Verdict};
use crate::session::Session;
use crate::vcpu::Stop;

pub mod beside;
pub mod judge;
pub mod noise;
pub mod observations;
pub mod probes;

use judge::{Expectations, Judged};

/// Why a run did not get past its host validation.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The quick validation FAILed (and was not forced).
    #[error(
        "the host failed validation, so its numbers would mislead (`irqbench validate` explains \
         each check; `run --force` measures anyway):\n{0}"
    )]
    HostFailed(String),
    /// The guest never booted: nothing about the host was learnt, and nothing could be measured.
    #[error(
        "the guest could not be booted, so the host was not validated and nothing can be \
         measured; the cause is the guest image (or this process's limits), not the host: {0}"
    )]
    GuestDidNotBoot(String),
}

/// What a FAIL of the run's quick validation does to the run (`--force`: measure anyway). A
/// guest that does not boot refuses the run either way: nothing could be measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnFail {
    #[default]
    Refuse,
    Measure,
}

/// The stage a run passes before it measures: the quick checks, recorded in the manifest as
/// `host.validation`; a FAIL refuses the run unless `on_fail` says measure. `stop` ends their
/// waits.
pub fn before_run(
    kvm: &Kvm,
    image: &Arc<GuestImage>,
    manifest: &mut HostManifest,
    on_fail: OnFail,
    stop: &Stop,
) -> Result<(), Refusal> {
    let probe = probes::TscProbe::start(kvm);
    match begin_run(kvm, image, manifest, on_fail, probe, stop)? {
        Some(pending) => finish_run(pending, manifest, on_fail),
        None => Ok(()),
    }
}

/// [`before_run`] in two steps, for a run that boots and warms up its first guest while the
/// quick TSC reading's span passes: the checks that boot a guest. A refusal they already give
/// is returned at once, the validation finished and recorded (`Ok(None)`: finished, and the
/// run may go on); otherwise what is left open, for [`finish_run`] before any round is measured.
pub fn begin_run(
    kvm: &Kvm,
    image: &Arc<GuestImage>,
    manifest: &mut HostManifest,
    on_fail: OnFail,
    probe: Result<probes::TscProbe, String>,
    stop: &Stop,
) -> Result<Option<Pending>, Refusal> {
    let pending = begin(kvm, image, manifest, Scope::Quick, Some(probe), stop);
    if !pending.refuses(on_fail) {
        return Ok(Some(pending));
    }
    finish_run(pending, manifest, on_fail).map(|()| None)
}

/// Judges what [`begin_run`] left open and records the validation in the manifest as
/// `host.validation`; a FAIL refuses the run unless `on_fail` says measure.
pub fn finish_run(
    pending: Pending,
    manifest: &mut HostManifest,
    on_fail: OnFail,
) -> Result<(), Refusal> {
    let v = pending.finish(manifest);
    let refused = refusal(&v, on_fail);
    manifest.validation = Some(v);
    refused.map_or(Ok(()), Err)
}

/// A validation with a FAIL refuses the run, unless `on_fail` says measure.
fn refusal(v: &Validation, on_fail: OnFail) -> Option<Refusal> {
    if let Some(why) = &v.guest_boot_failed {
        return Some(Refusal::GuestDidNotBoot(why.clone()));
    }
    (v.verdict == Verdict::Fail && on_fail == OnFail::Refuse)
        .then(|| Refusal::HostFailed(problem_lines(v).join("\n")))
}

/// The knobs of one scope.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    vcpus: u32,
    doorbells: u64,
    /// The probes after the `empty` baseline (which `insn_rounds` runs first).
    insns: &'static [InsnId],
    insn_iterations: u64,
    insn_rounds: u32,
    /// Full: the long idle phase of the guest-rdtsc rate; quick: the longest span of the KVM
    /// reading (it ends sooner once [`QUICK_TSC_UNCERTAINTY`] is met).
    tsc_long: Duration,
    /// Long idle phases of the guest-rdtsc rate (one more short one is run).
    tsc_repeats: usize,
}

const QUICK: Sizes = Sizes {
    vcpus: 1,
    doorbells: 16,
    insns: &[InsnId::CLI, InsnId::CPUID],
    insn_iterations: 64,
    insn_rounds: 2,
    tsc_long: Duration::from_millis(40),
    tsc_repeats: 0,
};

/// The quick suite's KVM reading of the TSC rate ends once its timing uncertainty is this
/// small: a third of the tolerance. The noise can then turn a PASS or a FAIL into a WARN only
/// within a third of the tolerance of its edge (the judge's WARN band is the uncertainty), and
/// the span (~18 ms at this host's 6 µs brackets) is mostly over before a run's first rounds.
const QUICK_TSC_UNCERTAINTY: f64 = judge::TSC_RATE_TOLERANCE / 3.0;

const FULL: Sizes = Sizes {
    vcpus: 2,
    doorbells: 64,
    insns: &[
        InsnId::CLI,
        InsnId::STI,
        InsnId::POPF_SET_IF,
        InsnId::POPF_SAME_IF,
        InsnId::CPUID,
        InsnId::HLT_EXIT,
    ],
    insn_iterations: 128,
    insn_rounds: 4,
    tsc_long: Duration::from_millis(120),
    tsc_repeats: 2,
};

/// Interrupt loads of the full suite: rates every flavour can deliver, phases long enough to
/// count them.
const INJECT_HZ: f64 = 1000.0;
const PV_EVENT_HZ: f64 = 2000.0;
const LOAD_PHASE: Duration = Duration::from_millis(120);
/// Barrier-aligned blocks for the vCPUs' TSC comparison.
const SKEW_ROUNDS: u32 = 64;
const LAPIC_PERIOD_US: f64 = 1000.0;
const LAPIC_PHASE: Duration = Duration::from_millis(200);
/// The order checks are reported in (measured in the order sessions allow).
const GROUPS: [&str; 7] = [
    "flavour",
    "accounting.",
    "tsc.",
    "exits.",
    "irq.",
    "attribution.",
    "noise.",
];
/// Steal time is sampled over at least this long.
const STEAL_WINDOW: Duration = Duration::from_secs(1);

/// The checks that judge hardware timing: on an emulated CPU they are not judged.
const HARDWARE_TIMING: [&str; 6] = [
    "tsc.invariant",
    "tsc.rate",
    "tsc.vcpus",
    "irq.inject",
    "irq.lapic-timer-1v",
    "irq.lapic-timer-2v",
];

/// Collects checks: a measurement judged, or a failure to measure.
struct Suite<'a> {
    e: Expectations,
    /// What emulates the CPU, when one does (`host.emulated_cpu`).
    emulated: Option<String>,
    checks: &'a mut Vec<Check>,
    /// Why the guest could not be booted, when it could not.
    boot_failed: Option<String>,
    /// The run's stop: a check it cut short is not judged.
    stop: Stop,
}

impl Suite<'_> {
    fn push(&mut self, id: &str, j: Judged) {
        let mut j = j;
        if let Some(by) = self.emulated.as_deref() {
            if HARDWARE_TIMING.contains(&id) {
                j.verdict = Verdict::NotJudged;
                j.note = format!(
                    "not judged: the CPU is emulated ({by}), so this timing is the emulator's, not \
                     a CPU's (exit counts and reasons are still judged: they are KVM's)"
                );
            }
        }
        self.checks.push(Check {
            id: id.to_owned(),
            verdict: j.verdict,
            expected: j.expected,
            measured: j.measured,
            note: j.note,
        });
    }

    fn judge<M>(
        &mut self,
        id: &str,
        m: &Result<M, String>,
        judge: impl FnOnce(&Expectations, &M) -> Judged,
    ) {
        let j = match m {
            Ok(m) => judge(&self.e, m),
            // Cut short by the user, not by the host: no verdict on the host.
            Err(why) if self.stop.is_set() => judge::words("a measurement".into(), "none").with(
                Verdict::NotJudged,
                &format!("not judged: a signal stopped the run before it was measured ({why})"),
            ),
            Err(why) => judge::words("a measurement".into(), "none")
                .fail(&format!("could not measure: {why}")),
        };
        self.push(id, j);
    }
}

/// Runs the checks of `scope` on this host and records the flavour's behaviour in `m`; `stop`
/// ends their waits.
pub fn run(
    kvm: &Kvm,
    image: &Arc<GuestImage>,
    m: &mut HostManifest,
    scope: Scope,
    stop: &Stop,
) -> Validation {
    let probe = (scope == Scope::Quick).then(|| probes::TscProbe::start(kvm));
    begin(kvm, image, m, scope, probe, stop).finish(m)
}

/// A validation whose guests have run and been shut down, with what is judged last still
/// open: the quick suite's `tsc.rate` (its KVM reading spans from [`probes::TscProbe::start`],
/// whatever else runs meanwhile, until [`QUICK_TSC_UNCERTAINTY`] is met or [`QUICK`]'s
/// `tsc_long` has passed), `tsc.invariant` and the noise checks (over the whole validation,
/// from its first /proc/stat sample to the last).
#[allow(missing_debug_implementations)] // holds a vCPU fd, which is not Debug-worthy
pub struct Pending {
    started: Instant,
    scope: Scope,
    e: Expectations,
    emulated: Option<String>,
    checks: Vec<Check>,
    boot_failed: Option<String>,
    stat_start: Result<noise::StatSample, String>,
    /// The quick suite's TSC probe, and whether KVM reported the rate it is compared with.
    tsc: Option<(Result<probes::TscProbe, String>, bool)>,
    stop: Stop,
}

/// The checks that boot a guest, in the order [`run`] does them; `probe` is the quick suite's
/// TSC reading, started by the caller (as early as it likes: the span only has to pass).
fn begin(
    kvm: &Kvm,
    image: &Arc<GuestImage>,
    m: &mut HostManifest,
    scope: Scope,
    probe: Option<Result<probes::TscProbe, String>>,
    stop: &Stop,
) -> Pending {
    let started = Instant::now();
    let stat_start = noise::sample_in(Path::new("/"));
    let e = Expectations::new(
        m.kvm_flavour,
        m.module_params
            .get("kvm_pvm.pvm_emul_batch")
            .map(String::as_str),
    );
    let mut checks = Vec::new();
    let mut suite = Suite {
        e,
        checks: &mut checks,
        boot_failed: None,
        emulated: m.emulated_cpu.clone(),
        stop: stop.clone(),
    };
    let sizes = match scope {
        Scope::Quick => QUICK,
        Scope::Full => FULL,
    };
    let tsc = userspace_checks(kvm, image, m, &mut suite, scope, sizes, probe);
    if scope == Scope::Full {
        lapic_checks(kvm, image, m, &mut suite);
    }
    let (e, emulated, boot_failed, stop) = (suite.e, suite.emulated, suite.boot_failed, suite.stop);
    Pending {
        started,
        scope,
        e,
        emulated,
        checks,
        boot_failed,
        stat_start,
        tsc,
        stop,
    }
}

impl Pending {
    /// Judges what is still open (waiting out the TSC span, or the full suite's steal window,
    /// if they have not passed yet) and gives the whole validation.
    pub fn finish(self, m: &HostManifest) -> Validation {
        let root = Path::new("/");
        let (started, scope) = (self.started, self.scope);
        let mut checks = self.checks;
        let mut suite = Suite {
            e: self.e,
            checks: &mut checks,
            boot_failed: self.boot_failed,
            emulated: self.emulated,
            stop: self.stop,
        };
        if let Some((probe, reported)) = self.tsc {
            let rate = probe
                .and_then(|p| p.finish(m.tsc_khz, reported, QUICK.tsc_long, QUICK_TSC_UNCERTAINTY));
            suite.judge("tsc.rate", &rate, judge::tsc_rate);
        }
        suite.push(
            "tsc.invariant",
            judge::tsc_invariant(&suite.e, noise::host_tsc_invariant()),
        );
        if scope == Scope::Full {
            let left = STEAL_WINDOW.saturating_sub(started.elapsed());
            suite.stop.sleep(left);
        }
        noise_checks(root, m, &mut suite, scope, self.stat_start);
        let guest_boot_failed = suite.boot_failed.take();
        checks.sort_by_key(|c| GROUPS.iter().position(|g| c.id.starts_with(g)));
        let verdict = checks.iter().map(|c| c.verdict).max().unwrap_or_default();
        Validation {
            scope,
            flavour: m.kvm_flavour,
            verdict,
            seconds: started.elapsed().as_secs_f64(),
            checks,
            guest_boot_failed,
            placement: None,
        }
    }

    /// Whether the checks judged so far already refuse the run (the guest did not boot, or a
    /// FAIL that is not forced, a TSC probe that could not start included): nothing still
    /// open can lift that.
    fn refuses(&self, on_fail: OnFail) -> bool {
        let failed = self.checks.iter().any(|c| c.verdict == Verdict::Fail)
            || matches!(self.tsc, Some((Err(_), _)));
        self.boot_failed.is_some() || (failed && on_fail == OnFail::Refuse)
    }
}

/// Records the behaviour in `m`; where it decides an ambiguous flavour, the manifest and the
/// expectations of the checks still to come take the behaviour's.
fn adopt(m: &mut HostManifest, suite: &mut Suite<'_>, b: Behaviour) {
    let effective = m.flavour.record(b);
    if effective != m.kvm_flavour {
        m.warnings.push(format!(
            "declared {} but CPL0 code behaves as {effective}'s: reported as {effective}",
            m.kvm_flavour
        ));
        m.kvm_flavour = effective;
        suite.e.flavour = effective;
    }
}

/// Records in `m` what a CPL0 `cli` does to `insn_emulation` (for `irqbench host`, which
/// runs no other check).
pub fn probe_flavour(kvm: &Kvm, image: &Arc<GuestImage>, m: &mut HostManifest, stop: &Stop) {
    let measured = probes::boot(kvm, image, 1, IrqchipMode::Userspace, stop).and_then(|mut s| {
        let r = probes::insn_rounds(&mut s, &[InsnId::CLI], QUICK.insn_iterations, 1);
        s.shutdown();
        r?.nets
            .first()
            .map(|cli| classify(cli.insn_emulation))
            .ok_or_else(|| "no cli block".to_owned())
    });
    match measured {
        Ok(b) => {
            let effective = m.flavour.record(b);
            m.kvm_flavour = effective;
        }
        Err(why) => m.flavour.behaviour = Readable::Unavailable(why),
    }
}

/// The checks on one userspace-irqchip guest (`sizes.vcpus` vCPUs, at most the host's CPUs);
/// the quick suite's TSC probe is handed back, its span still running, for [`Pending::finish`].
fn userspace_checks(
    kvm: &Kvm,
    image: &Arc<GuestImage>,
    m: &mut HostManifest,
    suite: &mut Suite<'_>,
    scope: Scope,
    sizes: Sizes,
    probe: Option<Result<probes::TscProbe, String>>,
) -> Option<(Result<probes::TscProbe, String>, bool)> {
    let vcpus = sizes.vcpus.min(m.host_cpus.max(1));
    let mut s = match probes::boot(kvm, image, vcpus, IrqchipMode::Userspace, &suite.stop) {
        Ok(s) => s,
        Err(why) => {
            m.flavour.behaviour = Readable::Unavailable(why.clone());
            suite.boot_failed = Some(why.clone());
            for id in ["flavour", "accounting.doorbells", "tsc.rate", "exits.cpuid"] {
                suite.judge::<()>(id, &Err(why.clone()), |_, _| Judged::default());
            }
            return None;
        }
    };
    suite.judge(
        "accounting.doorbells",
        &probes::doorbells(&mut s, sizes.doorbells),
        judge::doorbells,
    );
    insn_checks(kvm, &mut s, m, suite, sizes);
    let reported = m
        .capabilities
        .get("KVM_CAP_GET_TSC_KHZ")
        .is_some_and(|&c| c > 0);
    let pending = match (scope, probe) {
        (Scope::Quick, Some(p)) => Some((p, reported)),
        (Scope::Quick, None) => Some((Err("no TSC probe was started".into()), reported)),
        (Scope::Full, _) => {
            let rate = probes::tsc_rate(
                &mut s,
                m.tsc_khz,
                reported,
                sizes.tsc_long,
                sizes.tsc_repeats,
            );
            suite.judge("tsc.rate", &rate, judge::tsc_rate);
            load_checks(&mut s, suite);
            None
        }
    };
    s.shutdown();
    pending
}

/// Instruction probes: the flavour's behaviour, exits of CPUID and the flag instructions,
/// HLT, and (with 2 vCPUs) TSC skew.
fn insn_checks(
    kvm: &Kvm,
    s: &mut Session,
    m: &mut HostManifest,
    suite: &mut Suite<'_>,
    sizes: Sizes,
) {
    let rounds = probes::insn_rounds(s, sizes.insns, sizes.insn_iterations, sizes.insn_rounds);
    let by_id = |insn: InsnId| -> Result<judge::InsnNet, String> {
        let r = rounds.as_ref().map_err(Clone::clone)?;
        r.nets
            .iter()
            .find(|n| n.insn == insn)
            .cloned()
            .ok_or(format!("no {} block", insn.name()))
    };
    let behaviour = by_id(InsnId::CLI).map(|n| classify(n.insn_emulation));
    let obs = behaviour.clone().map(|b| judge::FlavourObs {
        declared: m.flavour.declared,
        ambiguous: m.flavour.ambiguous,
        behaviour: b,
    });
    match behaviour {
        Ok(b) => adopt(m, suite, b),
        Err(why) => m.flavour.behaviour = Readable::Unavailable(why),
    }
    suite.judge("flavour", &obs, judge::flavour);
    suite.judge("exits.cpuid", &by_id(InsnId::CPUID), judge::cpuid_exits);
    let flag_insns = [
        InsnId::CLI,
        InsnId::STI,
        InsnId::POPF_SET_IF,
        InsnId::POPF_SAME_IF,
    ];
    let flags: Result<Vec<_>, String> = flag_insns
        .into_iter()
        .filter(|i| sizes.insns.contains(i))
        .map(by_id)
        .collect();
    suite.judge("exits.flag-insns", &flags, |e, f| {
        judge::flag_insn_exits(e, f)
    });
    let Ok(r) = &rounds else { return };
    if let Some(hlt) = &r.hlt {
        suite.push("exits.hlt", judge::hlt_exits(&suite.e, hlt));
    }
    if sizes.vcpus > 1 {
        let skew = vcpu_tsc_skew(kvm, s, m.tsc_khz);
        suite.judge("tsc.vcpus", &skew, judge::tsc_vcpus);
    }
}

/// The vCPUs' TSCs compared through KVM on the measuring VM's own vCPUs between phases (no
/// barrier, whose release PVM's emulated spin delays by tens of µs); where too few readings
/// escape preemption, in the guest after a shared barrier; where the host is too busy for that
/// too (or has one CPU), through KVM on a fresh VM's two vCPUs.
fn vcpu_tsc_skew(kvm: &Kvm, s: &mut Session, khz: u64) -> Result<judge::TscSkew, String> {
    // Why the readings between phases were not used, for the method of the one that is.
    let mut instead = String::new();
    if s.vcpus > 1 {
        match probes::tsc_skew_kvm(s, SKEW_ROUNDS as usize, khz) {
            Ok(between) if between.skews_cycles.len() >= judge::TSC_SKEW_MIN_BLOCKS => {
                return Ok(between)
            }
            Ok(between) => {
                instead = format!(
                    "; between phases through KVM {} of {} pairs were too loosely timed",
                    between.preempted,
                    between.preempted + between.skews_cycles.len()
                );
            }
            // A VM that stopped cannot run the barrier either: say why it stopped.
            Err(e) if s.dead => return Err(format!("reading the vCPUs' TSCs between phases: {e}")),
            Err(e) => instead = format!("; between phases through KVM: {e}"),
        }
    }
    let mut guest = if s.vcpus > 1 {
        probes::tsc_skew(s, SKEW_ROUNDS, khz)?
    } else {
        judge::TscSkew::default()
    };
    if guest.skews_cycles.len() >= judge::TSC_SKEW_MIN_BLOCKS {
        guest.method.push_str(&instead);
        return Ok(guest);
    }
    let mut kvm_side = probes::tsc_offsets(kvm, khz, SKEW_ROUNDS as usize)?;
    kvm_side.method = format!(
        "{} (the guest's barrier blocks: {} of {} preempted{instead})",
        kvm_side.method,
        guest.preempted,
        guest.preempted + guest.skews_cycles.len()
    );
    Ok(kvm_side)
}

/// Interrupt loads on the userspace-irqchip guest: inject (window exits) and pv-event
/// (hypercall accounting and exit-site attribution).
fn load_checks(s: &mut Session, suite: &mut Suite<'_>) {
    let inj = probes::inject(s, INJECT_HZ, LOAD_PHASE);
    suite.judge("exits.irq-window", &inj, judge::irq_window);
    suite.judge("irq.inject", &inj, judge::inject);
    let pv = probes::pv_event(s, PV_EVENT_HZ, LOAD_PHASE);
    let (calls, sites) = match pv {
        Ok((c, site)) => (Ok(c), Ok(site)),
        Err(why) => (Err(why.clone()), Err(why)),
    };
    suite.judge("accounting.hypercalls", &calls, judge::hypercalls);
    suite.judge("attribution.exit-site", &sites, judge::exit_site);
}

/// The LAPIC timer at 1 and 2 vCPUs, no faster than `kvm.min_timer_period_us` allows.
fn lapic_checks(kvm: &Kvm, image: &Arc<GuestImage>, m: &HostManifest, suite: &mut Suite<'_>) {
    let min_period = m
        .module_params
        .get("kvm.min_timer_period_us")
        .and_then(|p| p.parse::<f64>().ok())
        .unwrap_or(0.0);
    let period = LAPIC_PERIOD_US.max(min_period);
    for vcpus in [1u32, 2] {
        let id = format!("irq.lapic-timer-{vcpus}v");
        let obs = if m
            .capabilities
            .get("KVM_CAP_IRQCHIP")
            .is_some_and(|&c| c > 0)
        {
            probes::lapic(
                kvm,
                image,
                vcpus,
                period,
                LAPIC_PHASE,
                m.tsc_khz,
                &suite.stop,
            )
        } else {
            Err("no KVM_CAP_IRQCHIP: no in-kernel LAPIC".into())
        };
        suite.judge(&id, &obs, judge::lapic_timer);
    }
}

/// Load, steal (full suite), frequency scaling and SMT siblings.
fn noise_checks(
    root: &Path,
    m: &HostManifest,
    suite: &mut Suite<'_>,
    scope: Scope,
    stat_start: Result<noise::StatSample, String>,
) {
    let load1 = m.load_average.clone().map(|l| l[0]);
    suite.push("noise.load", noise::load(load1, m.host_cpus));
    let stat_end = noise::sample_in(root);
    if scope == Scope::Full {
        let steal = match (&stat_start, &stat_end) {
            (Ok(a), Ok(b)) => Ok(noise::steal_between(a, b)),
            (Err(why), _) | (_, Err(why)) => Err(why.clone()),
        };
        suite.push("noise.steal", noise::steal(steal));
    }
    suite.push("noise.cpufreq", noise::cpufreq(&m.cpufreq));
    let smt = match (&stat_start, &stat_end) {
        (Ok(a), Ok(b)) => noise::smt_obs(root, m.smt.clone(), &noise::allowed_cpus(), a, b),
        _ => judge::SmtObs {
            smt: m.smt.clone(),
            busiest_sibling: None,
        },
    };
    suite.push("noise.smt", noise::smt(&smt));
}

/// The whole validation as text: one block per check, then the summary.
pub fn render(v: &Validation) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "irqbench validate ({} suite, KVM {}): {} checks in {:.1} s",
        match v.scope {
            Scope::Quick => "quick",
            Scope::Full => "full",
        },
        v.flavour,
        v.checks.len(),
        v.seconds
    );
    for c in &v.checks {
        let _ = writeln!(out, "\n{}  {}", c.verdict.name(), c.id);
        let _ = writeln!(out, "      expected: {}", c.expected);
        let _ = writeln!(out, "      measured: {}", c.measured);
        if !c.note.is_empty() {
            let _ = writeln!(out, "      why:      {}", c.note);
        }
    }
    let _ = writeln!(
        out,
        "\n{}: {} PASS, {} WARN, {} FAIL",
        v.verdict.name(),
        v.count(Verdict::Pass),
        v.count(Verdict::Warn),
        v.count(Verdict::Fail)
    );
    out
}

/// Per WARN or FAIL: the headline (verdict, check, measured, expected) and why.
pub fn problems(v: &Validation) -> Vec<(String, &str)> {
    v.checks
        .iter()
        .filter(|c| c.verdict != Verdict::Pass)
        .map(|c| {
            let head = format!(
                "validation {} {}: measured {}; expected {}",
                c.verdict.name(),
                c.id,
                c.measured,
                c.expected
            );
            (head, c.note.as_str())
        })
        .collect()
}

/// The problems for the top of a run's report: each headline, with its why indented below.
pub fn problem_lines(v: &Validation) -> Vec<String> {
    problems(v)
        .into_iter()
        .map(|(head, why)| {
            if why.is_empty() {
                head
            } else {
                format!("{head}\n  why: {why}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
