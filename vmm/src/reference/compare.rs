//! The reference probe against irqbench in one invocation: the same pair measured both ways,
//! and a raw port-I/O exit against irqbench's doorbell round trip, interleaved.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kvm_ioctls::Kvm;

use super::guest::Body;
use super::probe::Probe;
use super::{precision_per_second, relative_half_width, run_probe, shuffled};
use super::{ProbeOptions, ProbeResult, ReferenceError};
use crate::analysis::estimators;
use crate::config::plan::{HypercallTransport, IrqSource, Plan, Workload};
use crate::config::{self, Limits};
use crate::identity::{StrategyId, Subject};
use crate::machine::image::GuestImage;
use crate::machine::{IrqchipMode, MachineConfig};
use crate::measure;
use crate::results::{Estimate, RunReport, Summary};
use crate::session::descriptor;
use crate::session::{RunOptions, Session};
use crate::vcpu::Stop;

/// irqbench's own plan for the pair: `native-cli-sti` against `native-popf` (the rows of
/// configs/strategies.toml) with no critical-section body, so both sides time the same
/// instructions.
pub const PLAN: &str = r#"
name = "reference-pair"
description = "native-cli-sti against native-popf, body 0, nesting 0, no interrupt load"

[run]
precision = 0.0025
max_seconds = 4

[[bench]]
name = "pair"
kind = "strategy"
strategies = ["native-popf", "native-cli-sti"]
nesting = [0.0]
body_ops = 0
irq = [{ source = "none" }]
compare = [["native-popf", "native-cli-sti"]]
"#;

/// PINGs (and raw exits) per block of the round-trip comparison.
pub const PINGS: u32 = 100;

/// The probe and irqbench's pair each run in this many slices by default, alternating (probe
/// first in even slices, irqbench first in odd ones), and each side's rounds are pooled: an
/// emulating host changes speed for seconds at a time, and by more for some instructions than
/// for others, so two sides run one after the other (6 s, then 4 s) each saw their own mix of
/// its states. Four invocations back to back on a 2-CPU PVM host (2026-12-02) gave irqbench's
/// precision per second 0.19, 13.4, 0.96 and 4.0 times the probe's that way; sliced in four,
/// 0.51-8.8 in 13 runs. Ten slices track the host more closely (the sides' native-popf nets
/// 0.1-0.8% apart where four left 5-6% in three pairs of runs while it stepped), but pool ten
/// VMs' rounds for irqbench, each paying its boot, warm-up and calibration: 0.24-8.3 in 7 runs,
/// one under the 0.5 that four never gave. `--slices` chooses.
pub const SLICES: u32 = 4;

/// The valid range of `--slices`.
pub const SLICE_RANGE: (u32, u32) = (1, 50);

/// A probe slice needs rounds enough for a CI of its own to be possible ([`super::ROUNDS`]).
const MIN_SLICE_ROUNDS: u32 = 6;

#[derive(Clone, Debug)]
pub struct Options {
    pub probe: ProbeOptions,
    /// Rounds of the round-trip comparison (0 leaves it out).
    pub trip_rounds: u32,
    /// Slices of the probe and of irqbench's pair, alternating ([`SLICES`] by default).
    pub slices: u32,
}

/// irqbench's figures for the pair.
#[derive(Clone, Debug)]
pub struct IrqbenchPair {
    pub popf: Summary,
    pub cli_sti: Summary,
    /// native-cli-sti / native-popf, paired per round.
    pub ratio: Option<Estimate>,
    pub rounds: u32,
    pub elapsed: Duration,
    /// The slices it ran in, alternating with the probe's ([`SLICES`]).
    pub slices: u32,
    /// Each slice's `run.max_seconds`: the plan's, divided among the slices.
    pub slice_seconds: f64,
}

/// One round trip comparison: per round, a raw `out` block and a PING dispatch of [`PINGS`],
/// in shuffled order.
#[derive(Clone, Debug)]
pub struct RoundTrip {
    /// Guest TSC cycles per raw `out` (its `dec; jnz` included).
    pub raw: Summary,
    /// Guest TSC cycles per irqbench PING (its loop included).
    pub ping: Summary,
    /// Per round ping / raw.
    pub ratio: Option<Estimate>,
    /// Host time per exit in the raw loop and in irqbench's vCPU loop.
    pub raw_host: Duration,
    pub ping_host: Duration,
    /// Of `ping_host`, KVM_RUN return to the doorbell handled.
    pub ping_handled: Duration,
}

#[derive(Clone, Debug)]
pub struct Comparison {
    pub probe: ProbeResult,
    pub irqbench: IrqbenchPair,
    pub trip: Option<RoundTrip>,
    pub tsc_khz: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error(transparent)]
    Probe(#[from] ReferenceError),
    #[error("irqbench's plan for the pair does not load")]
    Plan(#[source] config::ConfigError),
    #[error("irqbench's run of the pair failed")]
    Run(#[source] measure::RunError),
    #[error("irqbench's run of the pair has no {0}")]
    Missing(&'static str),
    #[error("irqbench's doorbell round trip: {0}")]
    Session(String),
}

/// Runs the probe, irqbench's measurement of the pair and the round-trip comparison.
pub fn compare(
    kvm: &Kvm,
    image: &Arc<GuestImage>,
    options: &Options,
) -> Result<Comparison, CompareError> {
    let slices = slices_for(options.probe.rounds, options.slices);
    let plan = pair_plan()?;
    let slice_seconds = plan.max_seconds / f64::from(slices);
    let mut probes = Vec::new();
    let mut pairs = Vec::new();
    for k in 0..slices {
        let probe_options = probe_slice(&options.probe, slices, k);
        let mut slice_plan = plan.clone();
        slice_plan.max_seconds = slice_seconds;
        for side in sides(k) {
            if side == Side::Probe {
                probes.push(run_probe(kvm, &probe_options)?);
            } else {
                pairs.push(irqbench_pair(kvm, image, &slice_plan, &options.probe.stop)?);
            }
            // run_plan ends a stopped run with a partial report, which is no figure to compare.
            options.probe.stopped()?;
        }
    }
    let probe = ProbeResult::pooled(probes).ok_or(CompareError::Missing("probe slice"))?;
    let irqbench = IrqbenchPair::pooled(&pairs, slice_seconds)
        .ok_or(CompareError::Missing("irqbench slice"))?;
    let trip = match options.trip_rounds {
        0 => None,
        n => Some(round_trip(kvm, image, n, &options.probe)?),
    };
    let tsc_khz = crate::host::manifest(kvm).map_or(0, |m| m.tsc_khz);
    Ok(Comparison {
        probe,
        irqbench,
        trip,
        tsc_khz,
    })
}

/// irqbench's plan for the pair, loaded.
pub fn pair_plan() -> Result<Plan, CompareError> {
    config::load_str(PLAN, "reference-pair (built in)", &Limits::default())
        .map_err(CompareError::Plan)
}

/// Which side of the comparison runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Probe,
    Irqbench,
}

/// The order of slice `k`: probe first in even slices, irqbench first in odd ones, so that a
/// drift over the invocation favours neither side.
fn sides(k: u32) -> [Side; 2] {
    if k.is_multiple_of(2) {
        [Side::Probe, Side::Irqbench]
    } else {
        [Side::Irqbench, Side::Probe]
    }
}

/// The slices asked for, fewer when the probe's rounds would leave a slice below
/// [`MIN_SLICE_ROUNDS`].
pub fn slices_for(rounds: u32, asked: u32) -> u32 {
    (rounds / MIN_SLICE_ROUNDS).clamp(1, asked.max(1))
}

/// The probe's options for slice `k` of `slices`: its share of the rounds, and a shuffle of its
/// own (the rounds of a slice restart at 0).
fn probe_slice(probe: &ProbeOptions, slices: u32, k: u32) -> ProbeOptions {
    ProbeOptions {
        rounds: share(probe.rounds, slices, k),
        seed: probe.seed ^ u64::from(k).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        ..probe.clone()
    }
}

/// Slice `k`'s share of `total` rounds: as even as can be, the first slices taking the rest.
fn share(total: u32, slices: u32, k: u32) -> u32 {
    total / slices + u32::from(k < total % slices)
}

fn irqbench_pair(
    kvm: &Kvm,
    image: &Arc<GuestImage>,
    plan: &Plan,
    stop: &Stop,
) -> Result<SlicePair, CompareError> {
    let options = RunOptions {
        stop: stop.clone(),
        trace_exits: false,
    };
    let started = Instant::now();
    let report = measure::run_plan(kvm, plan, image, &options, &mut |_, _, _, _| {})
        .map_err(CompareError::Run)?;
    let elapsed = started.elapsed();
    pair_of(&report, elapsed)
}

/// One slice of irqbench's pair: its rows' per-round nets and the comparison's per-round
/// ratios, which [`IrqbenchPair::pooled`] pools over the slices.
#[derive(Clone, Debug)]
struct SlicePair {
    popf: Vec<f64>,
    cli_sti: Vec<f64>,
    /// Per paired round, native-cli-sti / native-popf (0 for a round whose ratio was ≤ 0:
    /// below every other, as irqbench's median ranks it).
    ratios: Vec<f64>,
    elapsed: Duration,
}

impl IrqbenchPair {
    /// The slices' rounds (each of up to `slice_seconds`) as one run's: the same estimators
    /// over all of them, and the time of all the slices together.
    fn pooled(slices: &[SlicePair], slice_seconds: f64) -> Option<IrqbenchPair> {
        if slices.is_empty() {
            return None;
        }
        let all = |f: fn(&SlicePair) -> &Vec<f64>| -> Vec<f64> {
            slices.iter().flat_map(|s| f(s).iter().copied()).collect()
        };
        let ratios = all(|s| &s.ratios);
        Some(IrqbenchPair {
            popf: estimators::batched(&all(|s| &s.popf)).0,
            cli_sti: estimators::batched(&all(|s| &s.cli_sti)).0,
            ratio: estimators::batched_interval(&ratios).0,
            rounds: u32::try_from(ratios.len()).unwrap_or(u32::MAX),
            elapsed: slices.iter().map(|s| s.elapsed).sum(),
            slices: u32::try_from(slices.len()).unwrap_or(u32::MAX),
            slice_seconds,
        })
    }
}

fn pair_of(report: &RunReport, elapsed: Duration) -> Result<SlicePair, CompareError> {
    let row = |s: StrategyId| {
        let subject = Subject::Strategy(s);
        report.results.iter().find(|r| r.strategy == subject)
    };
    let popf = row(StrategyId::NATIVE_POPF).ok_or(CompareError::Missing("native-popf row"))?;
    let cli_sti =
        row(StrategyId::NATIVE_CLI_STI).ok_or(CompareError::Missing("native-cli-sti row"))?;
    let comparison = report
        .comparisons
        .iter()
        .find(|c| c.a == popf.name && c.b == cli_sti.name)
        .ok_or(CompareError::Missing(
            "native-popf → native-cli-sti comparison",
        ))?;
    // The comparison keeps ln(b/a) of its rounds with a ratio > 0, and counts the others.
    let below = (0..comparison.nonpositive_ratios).map(|_| 0.0);
    Ok(SlicePair {
        popf: popf.cycles_per_op.samples.clone(),
        cli_sti: cli_sti.cycles_per_op.samples.clone(),
        ratios: comparison
            .log_ratios
            .iter()
            .map(|l| l.exp())
            .chain(below)
            .collect(),
        elapsed,
    })
}

/// Interleaves raw `out` blocks of the probe with irqbench PING dispatches of a 1-vCPU session.
fn round_trip(
    kvm: &Kvm,
    image: &Arc<GuestImage>,
    rounds: u32,
    options: &ProbeOptions,
) -> Result<RoundTrip, CompareError> {
    let mut probe = Probe::boot(kvm, options.stop.clone())?;
    let config = MachineConfig {
        vcpus: 1,
        memory_bytes: 16 << 20,
        irqchip: IrqchipMode::Userspace,
        hypercall_exits: false,
        ipi_sender: false,
    };
    let mut session = Session::boot(
        kvm,
        image,
        config,
        HypercallTransport::Port,
        false,
        &options.stop,
    )
    .map_err(|e| CompareError::Session(crate::error_chain(&e, ": ")))?;
    let phase = Plan::single(Workload::Doorbells, 1, 0)
        .phases
        .into_iter()
        .next()
        .ok_or(CompareError::Missing("doorbell phase"))?;
    let (mut raw, mut ping, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut raw_host, mut raw_exits) = (Duration::ZERO, 0u64);
    let (mut ping_host, mut ping_handled, mut pings) = (Duration::ZERO, Duration::ZERO, 0u64);
    let result = (|| {
        for round in 0..=rounds {
            let (mut r, mut p) = (0.0, 0.0);
            for which in shuffled(2, options.seed ^ 0xD00B, round) {
                options.stopped()?;
                if which == 0 {
                    let t = probe.block(Body::PortOut, PINGS, options.block_timeout)?;
                    r = t.cycles as f64 / f64::from(PINGS);
                    raw_host += t.host_in_exits;
                    raw_exits += t.exits;
                } else {
                    let desc = descriptor::diagnostic(&phase, u64::from(PINGS));
                    let d = session
                        .dispatch(desc, IrqSource::None, options.block_timeout)
                        .map_err(|e| CompareError::Session(crate::error_chain(&e, ": ")))?;
                    let sample = d.samples.first().ok_or(CompareError::Missing("sample"))?;
                    if sample.pings != u64::from(PINGS) {
                        return Err(CompareError::Session(format!(
                            "{} PINGs seen of {PINGS}",
                            sample.pings
                        )));
                    }
                    p = d.max_cycles() as f64 / f64::from(PINGS);
                    ping_host += sample.ping_host;
                    ping_handled += sample.ping_handled;
                    pings += sample.pings;
                }
            }
            // Round 0 warms both up and is not kept.
            if round > 0 {
                raw.push(r);
                ping.push(p);
                ratios.push(p / r);
            }
        }
        Ok(())
    })();
    session.shutdown();
    probe.finish();
    result?;
    let per = |total: Duration, n: u64| total / u32::try_from(n.max(1)).unwrap_or(u32::MAX);
    Ok(RoundTrip {
        raw: Summary::from_samples(&raw),
        ping: Summary::from_samples(&ping),
        ratio: estimators::batched_interval(&ratios).0,
        raw_host: per(raw_host, raw_exits),
        ping_host: per(ping_host, pings),
        ping_handled: per(ping_handled, pings),
    })
}

fn summary_line(out: &mut String, what: &str, s: &Summary) {
    let h = s.estimate().as_ref().and_then(relative_half_width);
    let (Some(ci), Some(h)) = (s.ci95, h) else {
        let _ = writeln!(
            out,
            "  {what:<28} {:>10.1} cycles  no CI (too few undisturbed rounds: {})",
            s.median,
            s.samples.len()
        );
        return;
    };
    let _ = writeln!(
        out,
        "  {what:<28} {:>10.1} cycles  [{:.1}, {:.1}]  ±{:.2}%  ({} rounds)",
        s.median,
        ci.lo,
        ci.hi,
        100.0 * h,
        s.samples.len()
    );
}

/// Prints the ratio and returns its precision per second; NaN when it has no CI (fewer than 6
/// kept rounds give none).
fn ratio_line(out: &mut String, what: &str, e: Option<Estimate>, elapsed: Duration) -> f64 {
    let h = e.as_ref().and_then(relative_half_width);
    let h = h.filter(|h| h.is_finite() && *h > 0.0);
    let (Some(e), Some(ci), Some(h)) = (e, e.and_then(|e| e.ci), h) else {
        let point = e.map_or(f64::NAN, |e| e.point);
        let _ = writeln!(
            out,
            "  {what:<28} {point:>10.4}  no CI (too few undisturbed rounds)"
        );
        return f64::NAN;
    };
    let pps = precision_per_second(h, elapsed);
    let _ = writeln!(
        out,
        "  {what:<28} {:>10.4}  [{:.4}, {:.4}]  ±{}% in {} s: precision/s {:.3e} \
         (±1% would take {} s)",
        e.point,
        ci.lo,
        ci.hi,
        sig3(100.0 * h),
        sig3(elapsed.as_secs_f64()),
        pps,
        sig3(elapsed.as_secs_f64() * (h / 0.01).powi(2))
    );
    pps
}

/// A figure whose size is not known in advance (a ratio of precisions, seconds) with 3
/// significant digits: a fixed count of decimals prints 1/545 as `0.00`.
/// Below 0.001, exponent form (`1.83e-5`).
fn sig3(v: f64) -> String {
    if !v.is_finite() || v == 0.0 {
        return format!("{v}");
    }
    if v.abs() < 1e-3 {
        return format!("{v:.2e}");
    }
    // Decimals for 3 significant digits (none at 100 and above): the reference sits below
    // `report` and formats its own figures.
    let decimals = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.decimals$}")
}

fn us(cycles: f64, tsc_khz: u64) -> f64 {
    cycles / tsc_khz.max(1) as f64 * 1000.0
}

/// The comparison as text: the reference's figures, irqbench's, and their ratios.
pub fn text(c: &Comparison) -> String {
    let mut out = String::new();
    let p = &c.probe;
    let _ = writeln!(
        out,
        "reference probe (raw KVM, CPL0 long mode as irqbench's guest; {} rounds of {} variants \
         shuffled per round, {} iterations a block; in {} slices alternating with irqbench's):",
        p.table.rounds.len(),
        p.bodies.len(),
        p.table
            .rounds
            .first()
            .and_then(|r| r.first())
            .and_then(|c| c.as_ref())
            .map_or(0, |c| c.ops),
        c.irqbench.slices
    );
    let (disturbed, blocks) = p.disturbed();
    let _ = writeln!(
        out,
        "  {disturbed} of {blocks} blocks preempted (a context switch of the vCPU thread \
         during the block), left out"
    );
    summary_line(&mut out, "empty loop (raw)", &p.raw(Body::Empty));
    summary_line(&mut out, "cli;sti (net)", &p.net(Body::CliSti));
    summary_line(
        &mut out,
        "pushf;pop;cli;push;popf (net)",
        &p.net(Body::Popf),
    );
    if p.bodies.contains(&Body::PortOut) {
        summary_line(&mut out, "out: port-I/O exit (raw)", &p.raw(Body::PortOut));
        summary_line(
            &mut out,
            "out: less the loop",
            &p.per_iteration_net(Body::PortOut),
        );
    }
    let ref_pps = ratio_line(
        &mut out,
        "cli;sti / popf",
        p.ratio(Body::Popf, Body::CliSti),
        p.elapsed,
    );
    let i = &c.irqbench;
    let _ = writeln!(
        out,
        "irqbench (built-in plan `reference-pair`, run_plan in {} slices of ≤ {} s, {} paired rounds):",
        i.slices,
        i.slice_seconds,
        i.rounds
    );
    summary_line(&mut out, "native-cli-sti (net)", &i.cli_sti);
    summary_line(&mut out, "native-popf (net)", &i.popf);
    let irq_pps = ratio_line(&mut out, "native-cli-sti / native-popf", i.ratio, i.elapsed);
    if (irq_pps / ref_pps).is_finite() {
        let _ = writeln!(
            out,
            "precision per second, irqbench / reference: {} (reference {}× irqbench's)",
            sig3(irq_pps / ref_pps),
            sig3(ref_pps / irq_pps)
        );
    } else {
        let _ = writeln!(
            out,
            "precision per second, irqbench / reference: no ratio (a side has no CI)"
        );
    }
    if let Some(t) = &c.trip {
        trip_text(&mut out, t, c.tsc_khz);
    }
    out
}

fn trip_text(out: &mut String, t: &RoundTrip, tsc_khz: u64) {
    let _ = writeln!(
        out,
        "exit round trip ({} rounds, each a raw `out` block and an irqbench PING dispatch of \
         {PINGS}, shuffled):",
        t.ratio_rounds()
    );
    for (what, s, host) in [
        ("raw out; dec; jnz", &t.raw, t.raw_host),
        ("irqbench PING (its loop)", &t.ping, t.ping_host),
    ] {
        let ci = s.ci95.map_or_else(
            || "no CI (too few rounds)".into(),
            |ci| format!("[{:.0}, {:.0}]", ci.lo, ci.hi),
        );
        let _ = writeln!(
            out,
            "  {what:<28} {:>10.0} cycles = {:.2} µs  {ci}; host side {:.2} µs",
            s.median,
            us(s.median, tsc_khz),
            host.as_secs_f64() * 1e6
        );
    }
    let _ = writeln!(
        out,
        "  irqbench host side: {:.2} µs to the doorbell handled, {:.2} µs more to KVM_RUN",
        t.ping_handled.as_secs_f64() * 1e6,
        t.ping_host.saturating_sub(t.ping_handled).as_secs_f64() * 1e6
    );
    let ci = t.ratio.and_then(|r| r.ci).map_or_else(
        || "no CI (too few rounds)".into(),
        |ci| format!("[{:.3}, {:.3}]", ci.lo, ci.hi),
    );
    let point = t.ratio.map_or(f64::NAN, |r| r.point);
    let _ = writeln!(out, "  PING / raw exit: {point:.3}  {ci}  (target ≤ 1.1)");
}

impl RoundTrip {
    fn ratio_rounds(&self) -> usize {
        self.raw.samples.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small nonzero ratio or time keeps its digits: `0.00×` read as "no precision at all".
    #[test]
    fn a_nonzero_figure_never_prints_as_zero() {
        assert_eq!(sig3(1.0 / 545.0), "0.00183");
        assert_eq!(sig3(545.3), "545");
        assert_eq!(sig3(0.004), "0.00400");
        assert_eq!(sig3(2.5e-5), "2.50e-5");
        assert_eq!(sig3(12.34), "12.3");
        assert_eq!(sig3(0.0), "0");
    }

    /// Every probe round goes to exactly one slice, none gets fewer than a CI needs unless the
    /// whole probe is that short, and the order alternates so neither side always goes first.
    #[test]
    fn slices_share_the_rounds_and_alternate_which_side_goes_first() {
        for rounds in [6, 7, 11, 12, 23, 24, 25, 1000, 1001, 1_000_000] {
            let n = slices_for(rounds, SLICES);
            assert!((1..=SLICES).contains(&n), "{rounds}: {n}");
            let shares: Vec<u32> = (0..n).map(|k| share(rounds, n, k)).collect();
            assert_eq!(shares.iter().sum::<u32>(), rounds, "{rounds}: {shares:?}");
            assert!(
                shares.iter().all(|&s| s >= MIN_SLICE_ROUNDS),
                "{rounds}: {shares:?}"
            );
            let (lo, hi) = (shares.iter().min(), shares.iter().max());
            assert!(hi.zip(lo).is_some_and(|(h, l)| h - l <= 1), "{shares:?}");
        }
        assert_eq!(slices_for(1000, SLICES), SLICES);
        assert_eq!(slices_for(11, SLICES), 1);
        assert_eq!(slices_for(1000, 50), 50);
        assert_eq!(slices_for(1000, 0), 1);
        assert_eq!(sides(0), [Side::Probe, Side::Irqbench]);
        assert_eq!(sides(1), [Side::Irqbench, Side::Probe]);
    }

    /// Pooled slices are one sample: the same estimators over all rounds (a round whose ratio
    /// was ≤ 0 ranks below every other), the slices' times added.
    #[test]
    fn pooled_slices_estimate_over_all_their_rounds() {
        let slice = |ratios: Vec<f64>, secs: u64| SlicePair {
            popf: ratios.iter().map(|r| 100.0 / r).collect(),
            cli_sti: vec![25.0; ratios.len()],
            ratios,
            elapsed: Duration::from_secs(secs),
        };
        let a = slice(vec![0.24, 0.25, 0.26, 0.25, 0.25, 0.24], 1);
        let b = slice(vec![0.26, 0.25, 0.0, 0.25, 0.26, 0.25, 0.24], 2);
        let p = IrqbenchPair::pooled(&[a.clone(), b.clone()], 1.0).expect("two slices");
        assert_eq!(p.rounds, 13);
        assert_eq!(p.slices, 2);
        assert_eq!(p.elapsed, Duration::from_secs(3));
        let all = [a.ratios, b.ratios].concat();
        assert_eq!(p.ratio, estimators::batched_interval(&all).0);
        let ratio = p.ratio.expect("a ratio");
        assert_eq!(ratio.point, 0.25);
        assert!(!ratio.excludes(0.25), "{ratio:?}");
        assert_eq!(p.cli_sti.samples.len(), 13);
        assert!(IrqbenchPair::pooled(&[], 1.0).is_none());
    }

    /// On real KVM, the probe's slices pool into the rounds the options asked for.
    #[test]
    fn probe_slices_pool_into_all_their_rounds() {
        let Some(kvm) = crate::host::test_kvm() else {
            return;
        };
        let options = ProbeOptions {
            rounds: 13,
            exit_iterations: 0,
            ..crate::reference::tests::short()
        };
        let n = slices_for(options.rounds, SLICES);
        let parts: Vec<ProbeResult> = (0..n)
            .map(|k| run_probe(&kvm, &probe_slice(&options, n, k)).expect("a slice runs"))
            .collect();
        let elapsed: Duration = parts.iter().map(|p| p.elapsed).sum();
        let pooled = ProbeResult::pooled(parts).expect("slices");
        assert_eq!(pooled.table.rounds.len(), 13);
        assert_eq!(pooled.elapsed, elapsed);
        assert!(pooled.net(Body::CliSti).samples.len() <= 13);
        assert!(ProbeResult::pooled(Vec::new()).is_none());
    }
}
