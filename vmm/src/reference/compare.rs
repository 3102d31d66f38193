//! The reference probe against irqbench in one invocation: the same pair measured both ways,
//! and a raw port-I/O exit against irqbench's doorbell round trip, interleaved.

use std::fmt::Write as _;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kvm_ioctls::Kvm;

use super::guest::Body;
use super::probe::Probe;
use super::{precision_per_second, relative_half_width, run_probe, shuffled};
use super::{ProbeOptions, ProbeResult, ReferenceError};
use crate::config::plan::{HypercallTransport, IrqSource, Plan, Workload};
use crate::config::{self, Limits};
use crate::identity::{StrategyId, Subject};
use crate::machine::image::GuestImage;
use crate::machine::{IrqchipMode, MachineConfig};
use crate::measure::session::{RunOptions, Session};
use crate::measure::{self, descriptor, estimators};
use crate::results::{Interval, RunReport, Summary};

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

#[derive(Clone, Debug)]
pub struct Options {
    pub probe: ProbeOptions,
    /// Rounds of the round-trip comparison (0 leaves it out).
    pub trip_rounds: u32,
}

/// irqbench's figures for the pair.
#[derive(Clone, Debug)]
pub struct IrqbenchPair {
    pub popf: Summary,
    pub cli_sti: Summary,
    /// native-cli-sti / native-popf, paired per round.
    pub ratio: Interval,
    pub rounds: u32,
    pub elapsed: Duration,
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
    pub ratio: Interval,
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
    let probe = run_probe(kvm, &options.probe)?;
    options.probe.stopped()?;
    let irqbench = irqbench_pair(kvm, image, &options.probe.stop)?;
    // run_plan ends a stopped run with a partial report, which is no figure to compare.
    options.probe.stopped()?;
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

fn irqbench_pair(
    kvm: &Kvm,
    image: &Arc<GuestImage>,
    stop: &Arc<AtomicBool>,
) -> Result<IrqbenchPair, CompareError> {
    let plan = pair_plan()?;
    let options = RunOptions {
        stop: Arc::clone(stop),
        trace_exits: false,
    };
    let started = Instant::now();
    let report = measure::run_plan(kvm, &plan, image, &options, &mut |_, _, _, _| {})
        .map_err(CompareError::Run)?;
    let elapsed = started.elapsed();
    pair_of(&report, elapsed)
}

fn pair_of(report: &RunReport, elapsed: Duration) -> Result<IrqbenchPair, CompareError> {
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
    Ok(IrqbenchPair {
        popf: popf.cycles_per_op.clone(),
        cli_sti: cli_sti.cycles_per_op.clone(),
        ratio: comparison.ratio.clone(),
        rounds: comparison.rounds,
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
    let mut probe = Probe::boot(kvm, Arc::clone(&options.stop))?;
    let config = MachineConfig {
        vcpus: 1,
        memory_bytes: 16 << 20,
        irqchip: IrqchipMode::Userspace,
        hypercall_exits: false,
    };
    let mut session = Session::boot(kvm, image, config, HypercallTransport::Port, false)
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
                        .dispatch(desc, IrqSource::None, options.block_timeout, &options.stop)
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
        ratio: estimators::interval(&ratios),
        raw_host: per(raw_host, raw_exits),
        ping_host: per(ping_host, pings),
        ping_handled: per(ping_handled, pings),
    })
}

fn pct(i: &Interval) -> f64 {
    100.0 * relative_half_width(i)
}

fn summary_line(out: &mut String, what: &str, s: &Summary) {
    let i = Interval {
        median: s.median,
        ci95: s.ci95,
    };
    let _ = writeln!(
        out,
        "  {what:<28} {:>10.1} cycles  [{:.1}, {:.1}]  ±{:.2}%  ({} rounds)",
        s.median,
        s.ci95[0],
        s.ci95[1],
        pct(&i),
        s.samples.len()
    );
}

/// Prints the ratio and returns its precision per second; NaN when it has no CI (fewer than 6
/// kept rounds collapse the CI to the median).
fn ratio_line(out: &mut String, what: &str, i: &Interval, elapsed: Duration) -> f64 {
    let h = relative_half_width(i);
    if !(h.is_finite() && h > 0.0) {
        let _ = writeln!(
            out,
            "  {what:<28} {:>10.4}  no CI (too few undisturbed rounds)",
            i.median
        );
        return f64::NAN;
    }
    let pps = precision_per_second(h, elapsed);
    let _ = writeln!(
        out,
        "  {what:<28} {:>10.4}  [{:.4}, {:.4}]  ±{:.2}% in {:.2} s: precision/s {:.3e} \
         (±1% would take {:.2} s)",
        i.median,
        i.ci95[0],
        i.ci95[1],
        100.0 * h,
        elapsed.as_secs_f64(),
        pps,
        elapsed.as_secs_f64() * (h / 0.01).powi(2)
    );
    pps
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
         shuffled per round, {} iterations a block):",
        p.table.rounds.len(),
        p.bodies.len(),
        p.table
            .rounds
            .first()
            .and_then(|r| r.first())
            .and_then(|c| c.as_ref())
            .map_or(0, |c| c.ops)
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
        &p.ratio(Body::Popf, Body::CliSti),
        p.elapsed,
    );
    let i = &c.irqbench;
    let _ = writeln!(
        out,
        "irqbench (built-in plan `reference-pair`, run_plan, {} paired rounds):",
        i.rounds
    );
    summary_line(&mut out, "native-cli-sti (net)", &i.cli_sti);
    summary_line(&mut out, "native-popf (net)", &i.popf);
    let irq_pps = ratio_line(
        &mut out,
        "native-cli-sti / native-popf",
        &i.ratio,
        i.elapsed,
    );
    if (irq_pps / ref_pps).is_finite() {
        let _ = writeln!(
            out,
            "precision per second, irqbench / reference: {:.3} (reference {:.2}× irqbench's)",
            irq_pps / ref_pps,
            ref_pps / irq_pps
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
        let _ = writeln!(
            out,
            "  {what:<28} {:>10.0} cycles = {:.2} µs  [{:.0}, {:.0}]; host side {:.2} µs",
            s.median,
            us(s.median, tsc_khz),
            s.ci95[0],
            s.ci95[1],
            host.as_secs_f64() * 1e6
        );
    }
    let _ = writeln!(
        out,
        "  irqbench host side: {:.2} µs to the doorbell handled, {:.2} µs more to KVM_RUN",
        t.ping_handled.as_secs_f64() * 1e6,
        t.ping_host.saturating_sub(t.ping_handled).as_secs_f64() * 1e6
    );
    let _ = writeln!(
        out,
        "  PING / raw exit: {:.3}  [{:.3}, {:.3}]  (target ≤ 1.1)",
        t.ratio.median, t.ratio.ci95[0], t.ratio.ci95[1]
    );
}

impl RoundTrip {
    fn ratio_rounds(&self) -> usize {
        self.raw.samples.len()
    }
}
