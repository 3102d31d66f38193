//! The measuring side of the checks: real guests on the real KVM, through the same session,
//! descriptors and records as a benchmark run. Each function returns a measurement for a
//! judge, or why it could not be taken (a boot failure, a guest fault, a protocol violation).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kvm_ioctls::Kvm;

use super::judge::{
    DoorbellObs, DoorbellVcpu, HltObs, HypercallObs, InjectObs, InsnNet, LapicObs, Share, SiteObs,
    TscRate, TscSkew,
};
use crate::config::plan::{
    HypercallTransport, InsnId, IrqSource, PhasePlan, Plan, StrategyId, Workload,
};
use crate::machine::image::GuestImage;
use crate::machine::{IrqchipMode, MachineConfig};
use crate::session::descriptor;
use crate::session::{Dispatch, Session};
use crate::vcpu::protocol;
use crate::vcpu::{ExitReason, Stop};

/// No validation phase comes near this; a hung guest fails its check instead of the suite.
const PHASE_TIMEOUT: Duration = Duration::from_secs(10);
/// Iterations of the calibration phase that sizes a workload to a duration.
const CALIBRATION_ITERATIONS: u64 = 2048;

/// Boots a guest for the checks (port hypercalls, vCPU threads not pinned); its waits end when
/// `stop` is set.
pub fn boot(
    kvm: &Kvm,
    image: &Arc<GuestImage>,
    vcpus: u32,
    irqchip: IrqchipMode,
    stop: &Stop,
) -> Result<Session, String> {
    let config = MachineConfig {
        vcpus,
        memory_bytes: 16 << 20,
        irqchip,
        hypercall_exits: false,
        ipi_sender: false,
    };
    Session::boot(kvm, image, config, HypercallTransport::Port, false, stop)
        .map_err(|e| format!("booting a {vcpus}-vCPU {} guest: {e}", irqchip.name()))
}

fn row(workload: Workload, vcpus: u32, irq: IrqSource) -> PhasePlan {
    let mut p = Plan::single(workload, vcpus, 1).phases.remove(0);
    p.irq = irq;
    p
}

fn dispatch(
    s: &mut Session,
    desc: irqbench_abi::PhaseDescriptor,
    irq: IrqSource,
) -> Result<Dispatch, String> {
    s.dispatch(desc, irq, PHASE_TIMEOUT)
        .map_err(|e| e.to_string())
}

/// A single run of `p` with `iterations`.
fn run_once(s: &mut Session, p: &PhasePlan, iterations: u64) -> Result<Dispatch, String> {
    dispatch(s, descriptor::diagnostic(p, iterations), p.irq)
}

/// Iterations of `p` (without its interrupt load) that last about `target`.
fn sized(s: &mut Session, p: &PhasePlan, target: Duration) -> Result<u64, String> {
    let quiet = PhasePlan {
        irq: IrqSource::None,
        ..p.clone()
    };
    let d = run_once(s, &quiet, CALIBRATION_ITERATIONS)?;
    let wall = d.wall();
    let per = wall.as_secs_f64() / CALIBRATION_ITERATIONS as f64;
    let n = target.as_secs_f64() / per.max(1e-10);
    Ok((n as u64).clamp(4, 1 << 31))
}

/// `accounting.doorbells`: every vCPU rings `k` PING doorbells.
pub fn doorbells(s: &mut Session, k: u64) -> Result<DoorbellObs, String> {
    let d = run_once(s, &row(Workload::Doorbells, s.vcpus, IrqSource::None), k)?;
    let vcpus = d
        .samples
        .iter()
        .map(|x| DoorbellVcpu {
            seen: x.pings,
            other_exits: x.exits.values().sum(),
            exits_stat: x.stats.as_ref().and_then(|st| st.get("exits")),
        })
        .collect();
    Ok(DoorbellObs { rung: k, vcpus })
}

/// What the instruction rounds gave.
#[derive(Clone, Debug, Default)]
pub struct InsnRounds {
    /// Every probe but `empty` and `hlt-exit`, net of the empty block.
    pub nets: Vec<InsnNet>,
    pub hlt: Option<HltObs>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Totals {
    blocks: u64,
    ops: u64,
    exits: u64,
    emulations: u64,
}

/// Per-variant sums of validated blocks, and block start TSCs by (round, position, vCPU).
type BlockStarts = BTreeMap<(u32, u32), BTreeMap<u32, u64>>;

fn collect_blocks(d: &Dispatch, variants: usize) -> Result<(Vec<Totals>, BlockStarts), String> {
    let mut totals = vec![Totals::default(); variants];
    let mut starts = BlockStarts::new();
    for s in &d.samples {
        for b in &s.blocks {
            let v = protocol::validate_block(s.index, &d.desc, b.announced, &b.record)
                .map_err(|e| e.to_string())?;
            let t = &mut totals[v.variant];
            t.blocks += 1;
            t.ops += v.ops;
            let stat = |n| b.stats.as_ref().and_then(|st| st.get(n)).unwrap_or(0);
            t.exits += stat("exits");
            t.emulations += stat("insn_emulation");
            starts
                .entry((v.round, v.position))
                .or_default()
                .insert(s.index, b.record.head.tsc_start);
        }
    }
    Ok((totals, starts))
}

fn net(insn: InsnId, t: &Totals, empty: &Totals) -> InsnNet {
    let per_block = |x: u64, blocks: u64| x as f64 / blocks.max(1) as f64;
    let ops_per_block = per_block(t.ops, t.blocks).max(1.0);
    InsnNet {
        insn,
        units: t.ops,
        blocks: t.blocks,
        exits: (per_block(t.exits, t.blocks) - per_block(empty.exits, empty.blocks))
            / ops_per_block,
        insn_emulation: (per_block(t.emulations, t.blocks)
            - per_block(empty.emulations, empty.blocks))
            / ops_per_block,
        instructions: insn.instructions(),
    }
}

/// Rounds of the instruction probes `insns` (`empty` first, added if missing), `iterations`
/// per block, each vCPU on its own (a barrier's spinning would land in the blocks' stats).
pub fn insn_rounds(
    s: &mut Session,
    insns: &[InsnId],
    iterations: u64,
    rounds: u32,
) -> Result<InsnRounds, String> {
    let insns: Vec<InsnId> = std::iter::once(InsnId::EMPTY)
        .chain(insns.iter().copied().filter(|i| *i != InsnId::EMPTY))
        .collect();
    let ids: Vec<u32> = insns.iter().map(|i| i.0).collect();
    let p = row(
        Workload::Insn {
            insn: InsnId::EMPTY,
        },
        s.vcpus,
        IrqSource::None,
    );
    let desc = descriptor::rounds(&[&p], &ids, iterations, 0, rounds);
    let d = dispatch(s, desc, IrqSource::None)?;
    let (totals, _) = collect_blocks(&d, insns.len())?;
    let mut out = InsnRounds::default();
    for (i, &insn) in insns.iter().enumerate().skip(1) {
        if insn == InsnId::HLT_EXIT {
            let exits = d
                .samples
                .iter()
                .filter_map(|x| x.variants.get(i)?.exits.get(&ExitReason::Hlt))
                .sum();
            out.hlt = Some(HltObs {
                executed: totals[i].ops,
                exits,
            });
        } else {
            out.nets.push(net(insn, &totals[i], &totals[0]));
        }
    }
    Ok(out)
}

/// A block interval in which the vCPU thread left its CPU: a vCPU released by the barrier (at
/// the end of the previous interval) or about to read its TSC (in this one) may have waited.
fn preempted(b: &crate::vcpu::BlockSample) -> bool {
    b.off_cpu_ns > SKEW_OFF_CPU_NS || b.involuntary_switches > 0
}
const SKEW_OFF_CPU_NS: u64 = 20_000;

/// `tsc.vcpus`: `rounds` empty blocks with every vCPU released by a shared barrier before each
/// (then each rings its BLOCK doorbell and reads its TSC): vCPU 1's start − vCPU 0's, for each
/// block neither vCPU thread was preempted around.
pub fn tsc_skew(s: &mut Session, rounds: u32, khz: u64) -> Result<TscSkew, String> {
    let p = row(
        Workload::Insn {
            insn: InsnId::EMPTY,
        },
        s.vcpus,
        IrqSource::None,
    );
    let mut desc = descriptor::rounds(&[&p], &[InsnId::EMPTY.0], 16, 0, rounds);
    desc.barrier = 1;
    let d = dispatch(s, desc, IrqSource::None)?;
    collect_blocks(&d, 1)?; // validates every record
    let (Some(v0), Some(v1)) = (
        d.samples.iter().find(|x| x.index == 0),
        d.samples.iter().find(|x| x.index == 1),
    ) else {
        return Err("fewer than two vCPUs reported".into());
    };
    let mut skew = TscSkew {
        method: "guest rdtsc after a shared barrier".into(),
        khz,
        ..Default::default()
    };
    // One variant per round: block j of every vCPU is round j.
    for j in 1..v0.blocks.len().min(v1.blocks.len()) {
        let quiet =
            |x: &crate::vcpu::PhaseSample| !preempted(&x.blocks[j]) && !preempted(&x.blocks[j - 1]);
        if quiet(v0) && quiet(v1) {
            let (a, b) = (
                v0.blocks[j].record.head.tsc_start,
                v1.blocks[j].record.head.tsc_start,
            );
            skew.skews_cycles.push(b as i64 - a as i64);
        } else {
            skew.preempted += 1;
        }
    }
    Ok(skew)
}

/// (guest TSC cycles, host wall ns) of every vCPU of one idle phase.
fn idle_spans(s: &mut Session, p: &PhasePlan, n: u64) -> Result<Vec<(f64, f64)>, String> {
    let d = run_once(s, p, n)?;
    Ok(d.records
        .iter()
        .zip(&d.samples)
        .map(|(r, x)| (r.tsc_cycles as f64, x.wall.as_nanos() as f64))
        .collect())
}

/// Per vCPU, the phase of `runs` least delayed at its edges. The host reads its clock at the
/// BEGIN and END doorbells, the guest its TSC just inside them, so a phase's wall time is its
/// TSC span plus a fixed part plus whatever preempted the vCPU thread at an edge (never
/// negative): the phase with the smallest `wall − cycles / reference` had the least of it.
fn least_delayed(runs: &[Vec<(f64, f64)>], per_ns: f64) -> Vec<(f64, f64)> {
    let vcpus = runs.iter().map(Vec::len).min().unwrap_or(0);
    (0..vcpus)
        .filter_map(|v| {
            runs.iter()
                .map(|r| r[v])
                .min_by(|a, b| (a.1 - a.0 / per_ns).total_cmp(&(b.1 - b.0 / per_ns)))
        })
        .collect()
}

/// `tsc.rate`: the guest TSC over CLOCK_MONOTONIC as the slope between a short and a long
/// idle phase (Δcycles / Δns cancels the fixed time between the host's clock reading at a
/// doorbell and the guest's `rdtsc` beside it), each the least delayed of `repeats`.
pub fn tsc_rate(
    s: &mut Session,
    kvm_khz: u64,
    kvm_reported: bool,
    long: Duration,
    repeats: usize,
) -> Result<TscRate, String> {
    let per_ns = kvm_khz.max(1) as f64 / 1e6;
    // The guest idles until its TSC has advanced this much (a TSC deadline, not a count of
    // loop passes), so each phase's length is set in TSC cycles at KVM's stated rate.
    let idle = |d: Duration| {
        let tsc_cycles = (d.as_nanos() as f64 * per_ns) as u64;
        row(Workload::Idle { tsc_cycles }, s.vcpus, IrqSource::None)
    };
    let (p_short, p_long) = (idle(long / 16), idle(long));
    let shorts: Vec<_> = (0..=repeats)
        .map(|_| idle_spans(s, &p_short, 1))
        .collect::<Result<_, _>>()?;
    let longs: Vec<_> = (0..repeats)
        .map(|_| idle_spans(s, &p_long, 1))
        .collect::<Result<_, _>>()?;
    let (short, long) = (
        least_delayed(&shorts, per_ns),
        least_delayed(&longs, per_ns),
    );
    let estimates_khz = short
        .iter()
        .zip(&long)
        .filter(|((_, w0), (_, w1))| w1 > w0)
        .map(|((c0, w0), (c1, w1))| (c1 - c0) / (w1 - w0) * 1e6)
        .collect();
    let long_ns = long.iter().map(|x| x.1).fold(0.0, f64::max);
    Ok(TscRate {
        method: "guest rdtsc over idle phases".into(),
        kvm_khz,
        kvm_reported,
        estimates_khz,
        long_ms: long_ns / 1e6,
        uncertainty: (delay_spread(&shorts, per_ns) + delay_spread(&longs, per_ns))
            / long_ns.max(1.0),
    })
}

/// How much the edge delay (`wall − cycles / reference`) varied between the runs of one
/// length, worst vCPU: the scale of what the least delayed run may still carry.
fn delay_spread(runs: &[Vec<(f64, f64)>], per_ns: f64) -> f64 {
    let vcpus = runs.iter().map(Vec::len).min().unwrap_or(0);
    (0..vcpus)
        .map(|v| {
            let delays = runs.iter().map(|r| r[v].1 - r[v].0 / per_ns);
            let (lo, hi) = delays.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), d| {
                (lo.min(d), hi.max(d))
            });
            if hi >= lo {
                hi - lo
            } else {
                0.0
            }
        })
        .fold(0.0, f64::max)
}

use crate::kvm::TSC_READ_MAX as MSR_READ_MAX;
/// A pair of readings for `tsc.vcpus` whose brackets could move their difference by more than
/// this is left out: half the judge's limit, so that timing alone never fails a host (brackets
/// are 5 µs on the AMD PVM host, 9–13 µs on an Intel one).
const TSC_PAIR_UNCERTAINTY_MAX: Duration =
    Duration::from_micros((super::judge::TSC_SKEW_MAX_US / 2.0) as u64);

/// A vCPU that never runs, whose guest TSC the VMM reads through KVM_GET_MSRS: for `run`'s
/// quick check, where no guest phase is long enough to time the guest's own `rdtsc` to 0.1%.
#[derive(Debug)]
pub struct TscProbe {
    _vm: kvm_ioctls::VmFd,
    vcpu: kvm_ioctls::VcpuFd,
    first: (Instant, u64, Duration),
}

impl TscProbe {
    pub fn start(kvm: &Kvm) -> Result<TscProbe, String> {
        let vm = kvm.create_vm().map_err(|e| format!("KVM_CREATE_VM: {e}"))?;
        let vcpu = vm
            .create_vcpu(0)
            .map_err(|e| format!("KVM_CREATE_VCPU: {e}"))?;
        read_guest_tsc(&vcpu)?; // the first ioctl is slow
        let first = read_guest_tsc(&vcpu)?;
        Ok(TscProbe {
            _vm: vm,
            vcpu,
            first,
        })
    }

    /// The rate from the first reading to a later one: as soon as the two readings' timing
    /// uncertainty (half their ioctl brackets, over the span between them) is at most
    /// `uncertainty`, and no later than `span_max` after the first reading. A reading taken
    /// when the work since [`TscProbe::start`] already spans enough is the last one: on a quiet
    /// host (brackets of ~6 µs) a span of 15–25 ms is enough for a third of the 0.1% tolerance;
    /// a busy host's longer brackets wait for more, up to `span_max`.
    pub fn finish(
        self,
        kvm_khz: u64,
        kvm_reported: bool,
        span_max: Duration,
        uncertainty: f64,
    ) -> Result<TscRate, String> {
        let (t0, tsc0, bracket0) = self.first;
        let mut last = read_guest_tsc(&self.vcpu)?;
        // Each pass sleeps until the span these brackets need (or `span_max`): a few passes
        // at most, bounded however the brackets grow.
        for _ in 0..8 {
            let span = last.0.saturating_duration_since(t0);
            let noise = (bracket0 + last.2).as_secs_f64() / 2.0;
            if span >= span_max || noise <= uncertainty * span.as_secs_f64() {
                break;
            }
            let needed = Duration::try_from_secs_f64(noise / uncertainty.max(1e-9))
                .unwrap_or(span_max)
                .min(span_max);
            std::thread::sleep(needed.saturating_sub(span).max(Duration::from_micros(100)));
            last = read_guest_tsc(&self.vcpu)?;
        }
        let (t1, tsc1, bracket1) = last;
        let ns = t1.saturating_duration_since(t0).as_nanos() as f64;
        Ok(TscRate {
            method: "a vCPU's IA32_TSC via KVM_GET_MSRS".into(),
            kvm_khz,
            kvm_reported,
            estimates_khz: vec![tsc1.wrapping_sub(tsc0) as f64 / ns.max(1.0) * 1e6],
            long_ms: ns / 1e6,
            // Each reading is somewhere inside its bracket.
            uncertainty: (bracket0 + bracket1).as_nanos() as f64 / 2.0 / ns.max(1.0),
        })
    }
}

/// `tsc.vcpus` without running a guest: the IA32_TSC of two vCPUs of a fresh VM read back to
/// back through KVM_GET_MSRS, each corrected by the time between the readings — for a host so
/// busy that no barrier-aligned guest block escaped preemption.
pub fn tsc_offsets(kvm: &Kvm, khz: u64, pairs: usize) -> Result<TscSkew, String> {
    let vm = kvm.create_vm().map_err(|e| format!("KVM_CREATE_VM: {e}"))?;
    let vcpus = [0, 1].map(|i| {
        vm.create_vcpu(i)
            .map_err(|e| format!("KVM_CREATE_VCPU: {e}"))
    });
    let [Ok(v0), Ok(v1)] = vcpus else {
        return Err("cannot create two vCPUs".into());
    };
    let mut skew = TscSkew {
        method: "IA32_TSC of two vCPUs via KVM_GET_MSRS".into(),
        khz,
        ..Default::default()
    };
    for _ in 0..pairs {
        let r0 = kvm_reading(&v0)?;
        let r1 = kvm_reading(&v1)?;
        if r0.bracket.max(r1.bracket) > MSR_READ_MAX {
            skew.preempted += 1;
            continue;
        }
        skew.skews_cycles
            .push(crate::kvm::tsc_skew_cycles(&r0, &r1, khz));
    }
    Ok(skew)
}

/// [`crate::kvm::read_guest_tsc`] with its error as the checks say it.
fn kvm_reading(vcpu: &kvm_ioctls::VcpuFd) -> Result<crate::kvm::TscReading, String> {
    crate::kvm::read_guest_tsc(vcpu).map_err(|e| format!("KVM_GET_MSRS: {e}"))
}

/// (CLOCK_MONOTONIC at the middle of the ioctl, the guest TSC it returned, the ioctl's
/// duration): the best of a few tries, so that a preempted one is taken again.
fn read_guest_tsc(vcpu: &kvm_ioctls::VcpuFd) -> Result<(Instant, u64, Duration), String> {
    let r = kvm_reading(vcpu)?;
    Ok((r.at, r.tsc, r.bracket))
}

/// `tsc.vcpus` through KVM on the session's own vCPUs: each vCPU thread, waiting for its next
/// command (no guest code runs), reads its vCPU's IA32_TSC at a host instant known to within
/// the ioctl; vCPU 1 − vCPU 0 at one instant is the difference of two such readings less the
/// time between them at `khz`. No barrier: on PVM the guest's own reading after a shared
/// barrier carried the barrier's release (the spin is emulated), 30–60 µs with one vCPU mostly
/// the later, whatever the TSCs did. Pairs whose bracket exceeds [`MSR_READ_MAX`] (a thread
/// preempted inside the ioctl) or whose readings could each lie anywhere in brackets wide
/// enough to move the difference by [`TSC_PAIR_UNCERTAINTY_MAX`] are left out and counted.
pub fn tsc_skew_kvm(s: &mut Session, pairs: usize, khz: u64) -> Result<TscSkew, String> {
    let mut skew = TscSkew {
        method: "IA32_TSC of the measuring VM's vCPUs via KVM_GET_MSRS, between phases".into(),
        khz,
        ..Default::default()
    };
    for _ in 0..pairs {
        let readings = s
            .read_tscs(Duration::from_secs(2))
            .map_err(|e| e.to_string())?;
        let [r0, r1, ..] = readings.as_slice() else {
            return Err("fewer than two vCPUs read".into());
        };
        let uncertainty = (r0.bracket + r1.bracket) / 2;
        if r0.bracket.max(r1.bracket) > MSR_READ_MAX || uncertainty > TSC_PAIR_UNCERTAINTY_MAX {
            skew.preempted += 1;
            continue;
        }
        // The two threads read in either order.
        skew.skews_cycles
            .push(crate::kvm::tsc_skew_cycles(r0, r1, khz));
    }
    Ok(skew)
}

/// Blocks a load phase is cut into: at each boundary the VMM reads the vCPU thread's clocks,
/// which tell how long it waited for a CPU.
const LOAD_BLOCKS: u32 = 20;

/// Per vCPU: (interrupts over the phase, its TSC cycles, its wall ns, ns its thread was off
/// its CPU in the blocks).
type PhaseSums = (u64, u64, u64, u64);

fn phase_sums(d: &Dispatch) -> Result<Vec<PhaseSums>, String> {
    let mut out = Vec::new();
    for (x, r) in d.samples.iter().zip(&d.records) {
        let mut off = 0;
        for b in &x.blocks {
            protocol::validate_block(x.index, &d.desc, b.announced, &b.record)
                .map_err(|e| e.to_string())?;
            off += b.off_cpu_ns;
        }
        out.push((
            r.counts.interrupts,
            r.tsc_cycles,
            x.wall.as_nanos() as u64,
            off,
        ));
    }
    Ok(out)
}

/// `p` alone in `LOAD_BLOCKS` rounds of blocks of about `target / LOAD_BLOCKS`, under its load.
fn load_rounds(s: &mut Session, p: &PhasePlan, target: Duration) -> Result<Dispatch, String> {
    let n = sized(s, p, target / LOAD_BLOCKS)?;
    let (_, id) = descriptor::workload_ids(&p.workload);
    dispatch(s, descriptor::rounds(&[p], &[id], n, 0, LOAD_BLOCKS), p.irq)
}

/// Inject phases [`inject`] runs at most while none has shown a window exit. An interrupt
/// raised inside `cli; …; sti` waits for the window only until the vCPU's next exit with IF set:
/// a block's doorbell injects it too, and on PVM (which opens the window at the end of an
/// emulation batch) the doorbell often comes first; a host that keeps the vCPU threads off their
/// CPUs (load 4 on 2 CPUs) left 2 of 15 single phases with none. Each phase is a fresh chance;
/// a KVM that never opens the window shows none in any of them.
pub const INJECT_PHASES: u32 = 4;

/// `irq.inject` and `exits.irq-window`: `cli; body; sti` (native-cli-sti) for about `target`
/// while a host thread raises an interrupt `rate_hz` times a second; again (up to
/// [`INJECT_PHASES`] phases, all counted) while no window exit was seen.
pub fn inject(s: &mut Session, rate_hz: f64, target: Duration) -> Result<InjectObs, String> {
    let mut obs = InjectObs {
        vcpus: s.vcpus,
        ..InjectObs::default()
    };
    while obs.phases == 0 || (obs.window_exits == 0 && obs.phases < INJECT_PHASES) {
        let one = inject_phase(s, rate_hz, target)?;
        obs.phases += 1;
        obs.raised += one.raised;
        obs.injected += one.injected;
        obs.taken += one.taken;
        obs.window_exits += one.window_exits;
        obs.share = obs.share + one.share;
    }
    Ok(obs)
}

/// One phase of [`inject`].
fn inject_phase(s: &mut Session, rate_hz: f64, target: Duration) -> Result<InjectObs, String> {
    let workload = Workload::Strategy {
        strategy: StrategyId::NATIVE_CLI_STI,
    };
    let p = row(workload, s.vcpus, IrqSource::Inject { rate_hz });
    let d = load_rounds(s, &p, target)?;
    // The rate the load thread kept (it skips ticks when the host is busy), per vCPU.
    let wall = d.wall();
    let per_ns =
        d.irqs_raised as f64 / f64::from(s.vcpus.max(1)) / (wall.as_nanos() as f64).max(1.0);
    let share = phase_sums(&d)?
        .into_iter()
        .map(|(taken, _, wall_ns, off_ns)| Share {
            taken: taken as f64,
            offered: wall_ns as f64 * per_ns,
            while_preempted: off_ns as f64 * per_ns,
        })
        .fold(Share::default(), |a, b| a + b);
    Ok(InjectObs {
        vcpus: s.vcpus,
        phases: 1,
        raised: d.irqs_raised,
        injected: d.samples.iter().map(|x| x.injected).sum(),
        taken: d.records.iter().map(|r| r.counts.interrupts).sum(),
        window_exits: d
            .samples
            .iter()
            .filter_map(|x| x.exits.get(&ExitReason::IrqWindowOpen))
            .sum(),
        share,
    })
}

/// The `out` of each hypercall stub of the guest image: (symbol, its address, the next
/// instruction's).
fn hypercall_out_sites(image: &GuestImage) -> Vec<(String, u64, u64)> {
    ["irqbench_hypercall", "irqbench_hypercall_outer"]
        .iter()
        .filter_map(|name| {
            let (addr, code) = image.function_code(name)?;
            let out = crate::machine::decode::decode_all(code, addr)
                .into_iter()
                .find(|i| i.text.starts_with("out"))?;
            Some((
                name.to_string(),
                out.addr,
                out.addr + out.bytes.len() as u64,
            ))
        })
        .collect()
}

/// `accounting.hypercalls` and `attribution.exit-site`: vif-restore for about `target` under
/// `pv-event` load; every port hypercall's RIP resolved through the symbol table.
pub fn pv_event(
    s: &mut Session,
    rate_hz: f64,
    target: Duration,
) -> Result<(HypercallObs, SiteObs), String> {
    let workload = Workload::Strategy {
        strategy: StrategyId::VIF_RESTORE,
    };
    let p = row(workload, s.vcpus, IrqSource::PvEvent { rate_hz });
    let n = sized(s, &p, target)?;
    let d = run_once(s, &p, n)?;
    let calls = HypercallObs {
        issued: d.records.iter().map(|r| r.counts.hypercalls).sum(),
        seen: d.samples.iter().map(|x| x.hypercalls).sum(),
    };
    let mut by_rip: BTreeMap<u64, u64> = BTreeMap::new();
    for x in &d.samples {
        for (&(rip, reason), &count) in &x.exit_rips {
            if reason == ExitReason::PioHypercall {
                *by_rip.entry(rip).or_default() += count;
            }
        }
    }
    let seen = by_rip
        .into_iter()
        .map(|(rip, count)| {
            let symbol = s
                .image
                .symbols
                .lookup(rip)
                .map_or_else(|| "?".to_owned(), |(sym, _)| sym.name.clone());
            (rip, count, symbol)
        })
        .collect();
    let sites = SiteObs {
        expected: hypercall_out_sites(&s.image),
        seen,
        issued: calls.issued,
    };
    Ok((calls, sites))
}

/// `irq.lapic-timer-*`: an in-kernel-irqchip guest of `vcpus` runs empty blocks for about
/// `target` with its LAPIC timer firing every `period_us`; the time each vCPU thread waited
/// for a CPU is counted apart (ticks that expire meanwhile merge, on any host).
pub fn lapic(
    kvm: &Kvm,
    image: &Arc<GuestImage>,
    vcpus: u32,
    period_us: f64,
    target: Duration,
    khz: u64,
    stop: &Stop,
) -> Result<LapicObs, String> {
    let mut s = boot(kvm, image, vcpus, IrqchipMode::InKernel, stop)?;
    let p = row(
        Workload::Insn {
            insn: InsnId::EMPTY,
        },
        vcpus,
        IrqSource::LapicTimer { period_us },
    );
    let result = load_rounds(&mut s, &p, target).and_then(|d| phase_sums(&d));
    s.shutdown();
    let cycles_per_tick = (period_us * khz as f64 / 1000.0).max(1.0);
    let ns_per_tick = period_us * 1000.0;
    Ok(LapicObs {
        period_us,
        per_vcpu: result?
            .into_iter()
            .map(|(ticks, cycles, _, off_ns)| Share {
                taken: ticks as f64,
                offered: cycles as f64 / cycles_per_tick,
                while_preempted: off_ns as f64 / ns_per_tick,
            })
            .collect(),
    })
}
