//! The reference probe: what precision per second this host allows for the instruction pairs
//! irqbench measures, with no irqbench machinery in the way, and irqbench's own figure for the
//! same pair from the same invocation (absolute numbers drift between runs on an emulating
//! host; the ratio of two figures taken side by side does not).
//!
//! The probe ([`probe`]) drives raw KVM with the smallest guest loop ([`guest`]): rounds of
//! blocks, every variant once per round in a seeded shuffled order, a fixed iteration count per
//! block, each block timed by the guest's TSC and reported with one port-I/O exit. Its figures
//! go through the same estimators as irqbench's ([`crate::analysis::estimators`]), so the
//! comparison ([`compare`]) is of like with like.

pub mod compare;
pub mod estimate;
pub mod guest;
pub mod probe;

use std::time::{Duration, Instant};

use kvm_ioctls::Kvm;

use crate::analysis::estimators::{self, Cell, Metric, RoundTable};
use crate::results::{Estimate, Summary};
use crate::vcpu::Stop;
use guest::Body;
use probe::Probe;

#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    #[error("reference probe: {what} failed")]
    Kvm {
        what: &'static str,
        #[source]
        source: kvm_ioctls::Error,
    },
    #[error("reference probe: cannot map guest memory")]
    Mmap(#[source] vm_memory::mmap::FromRangesError),
    #[error("reference probe: guest memory at {gpa:#x}")]
    Memory {
        gpa: u64,
        #[source]
        source: vm_memory::GuestMemoryError,
    },
    #[error("reference probe: unexpected exit {0}")]
    Exit(String),
    #[error("reference probe: a block took longer than {0:?} (or the run was stopped)")]
    Timeout(Duration),
    #[error("reference probe: {0}")]
    Options(String),
    #[error("reference: stopped by a signal")]
    Stopped,
}

/// The valid ranges of [`ProbeOptions`]' counts (and of the round trip's rounds), which the
/// command line's flags name.
pub const ROUNDS: (u32, u32) = (6, 1_000_000);
pub const ITERATIONS: (u32, u32) = (1, 100_000_000);
pub const EXIT_ITERATIONS: (u32, u32) = (0, 1_000_000);
pub const TRIP_ROUNDS: (u32, u32) = (0, 100_000);

/// How long the probe runs.
#[derive(Clone, Debug)]
pub struct ProbeOptions {
    pub rounds: u32,
    /// Loop iterations per block of the instruction variants.
    pub iterations: u32,
    /// Loop iterations (port-I/O exits) per block of the exit variant; 0 leaves it out.
    pub exit_iterations: u32,
    pub seed: u64,
    /// Watchdog of one block.
    pub block_timeout: Duration,
    /// The run's stop (the CLI's is set by its signal handler): the current block is cut
    /// short and the probe fails.
    pub stop: Stop,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            rounds: 1000,
            iterations: 350,
            exit_iterations: 50,
            seed: 0x1E_B0_0C,
            block_timeout: Duration::from_secs(10),
            stop: Stop::new(),
        }
    }
}

impl ProbeOptions {
    pub fn check(&self) -> Result<(), ReferenceError> {
        let bad = |what: String| Err(ReferenceError::Options(what));
        for (what, value, (lo, hi)) in [
            ("rounds", self.rounds, ROUNDS),
            ("iterations", self.iterations, ITERATIONS),
            ("exit iterations", self.exit_iterations, EXIT_ITERATIONS),
        ] {
            if !(lo..=hi).contains(&value) {
                return bad(format!("{what} = {value}: valid is {lo}..={hi}"));
            }
        }
        Ok(())
    }

    /// [`ReferenceError::Stopped`] once a signal asked to stop: checked between blocks, so a
    /// stop is seen at the next block even when every block is shorter than the watchdog's tick.
    fn stopped(&self) -> Result<(), ReferenceError> {
        if self.stop.is_set() {
            return Err(ReferenceError::Stopped);
        }
        Ok(())
    }

    fn bodies(&self) -> Vec<Body> {
        let mut v = vec![Body::Empty, Body::CliSti, Body::Popf];
        if self.exit_iterations > 0 {
            v.push(Body::PortOut);
        }
        v
    }

    fn iterations_of(&self, body: Body) -> u32 {
        match body {
            Body::PortOut => self.exit_iterations,
            _ => self.iterations,
        }
    }
}

/// What the probe measured: every block, by round and variant (`table.rounds[r][v]`, variant
/// `v` of [`ProbeResult::bodies`], 0 = empty), and how long it took.
#[derive(Clone, Debug)]
pub struct ProbeResult {
    pub bodies: Vec<Body>,
    pub table: RoundTable,
    /// Boot to the last block.
    pub elapsed: Duration,
    /// Host time per port-I/O exit, KVM_RUN return to KVM_RUN entry (mean).
    pub host_per_exit: Duration,
}

/// The guest's shuffle step.
fn mix(z: u64) -> u64 {
    irqbench_abi::SplitMix64::mix(z)
}

/// Round `round`'s order of `n` variants: Fisher–Yates from the seed and the round alone.
pub fn shuffled(n: usize, seed: u64, round: u32) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut state = mix(seed ^ (u64::from(round) << 32));
    for i in (1..n).rev() {
        state = mix(state);
        let j = (((state >> 32) * (i as u64 + 1)) >> 32) as usize;
        order.swap(i, j.min(i));
    }
    order
}

/// Runs the probe: one warm-up round (not kept), then `rounds` shuffled rounds.
pub fn run_probe(kvm: &Kvm, options: &ProbeOptions) -> Result<ProbeResult, ReferenceError> {
    options.check()?;
    let started = Instant::now();
    let mut probe = Probe::boot(kvm, options.stop.clone())?;
    let bodies = options.bodies();
    let mut table = RoundTable::new(bodies.len());
    let mut host = Duration::ZERO;
    let mut exits = 0u64;
    for round in 0..=options.rounds {
        let mut cells = vec![None; bodies.len()];
        for v in shuffled(bodies.len(), options.seed, round) {
            options.stopped()?;
            let n = options.iterations_of(bodies[v]);
            let t = probe.block(bodies[v], n, options.block_timeout)?;
            host += t.host_in_exits;
            exits += t.exits;
            cells[v] = Some(Cell {
                cycles_mean: t.cycles as f64,
                cycles_max: t.cycles as f64,
                ops: u64::from(n),
                loops: u64::from(n),
                vcpus: 1,
                userspace_exits: t.exits,
                disturbed: t.switches > 0,
                ..Default::default()
            });
        }
        if round > 0 {
            table.rounds.push(cells);
        }
    }
    probe.finish();
    Ok(ProbeResult {
        bodies,
        table,
        elapsed: started.elapsed(),
        host_per_exit: host / u32::try_from(exits.max(1)).unwrap_or(u32::MAX),
    })
}

impl ProbeResult {
    /// Slices of one probe (the same bodies and iterations) as one: their rounds in order, the
    /// time of all of them, the host time per exit weighted by each slice's rounds.
    pub fn pooled(slices: Vec<ProbeResult>) -> Option<ProbeResult> {
        let mut slices = slices.into_iter();
        let mut all = slices.next()?;
        let weight = |p: &ProbeResult| u32::try_from(p.table.rounds.len()).unwrap_or(u32::MAX);
        let mut host = all.host_per_exit * weight(&all);
        for s in slices {
            host += s.host_per_exit * weight(&s);
            all.elapsed += s.elapsed;
            all.table.rounds.extend(s.table.rounds);
        }
        all.host_per_exit = host / weight(&all).max(1);
        Some(all)
    }

    fn index(&self, body: Body) -> Option<usize> {
        self.bodies.iter().position(|b| *b == body)
    }

    /// Blocks the host preempted (left out of every figure), of all blocks.
    pub fn disturbed(&self) -> (usize, usize) {
        let cells = self.table.rounds.iter().flatten().flatten();
        let all = cells.clone().count();
        (cells.filter(|c| c.disturbed).count(), all)
    }

    /// Net cycles per iteration of `body` (the empty loop subtracted), per round.
    pub fn net(&self, body: Body) -> Summary {
        let samples = self.index(body).map(|v| self.table.net_cycles(v));
        estimators::batched(&samples.unwrap_or_default()).0
    }

    /// Cycles per iteration of `body` less the empty loop's per iteration, per round: the
    /// body's cost when the two blocks have different iteration counts (the exit variant).
    pub fn per_iteration_net(&self, body: Body) -> Summary {
        let Some(v) = self.index(body) else {
            return Summary::no_data();
        };
        let per = |c: &Cell| c.cycles_mean / c.ops.max(1) as f64;
        let samples: Vec<f64> = self
            .table
            .rounds
            .iter()
            .filter_map(|r| {
                let (e, x) = (r.first()?.as_ref()?, r.get(v)?.as_ref()?);
                (!e.disturbed && !x.disturbed).then(|| per(x) - per(e))
            })
            .collect();
        Summary::from_samples(&samples)
    }

    /// Cycles per iteration of `body`, nothing subtracted.
    pub fn raw(&self, body: Body) -> Summary {
        let samples = self.index(body).map(|v| self.table.raw_cycles(v));
        Summary::from_samples(&samples.unwrap_or_default())
    }

    /// Per-round paired ratio net(b) / net(a), median and CI, as irqbench's comparisons.
    pub fn ratio(&self, a: Body, b: Body) -> Option<Estimate> {
        let (a, b) = (self.index(a)?, self.index(b)?);
        estimators::batched_interval(&self.table.paired_ratios(a, b, Metric::NetCycles, 1.0)).0
    }
}

/// Relative CI half-width of an estimate; `None` without a CI (fewer than 6 kept rounds).
pub fn relative_half_width(e: &Estimate) -> Option<f64> {
    Some(e.half_width()? / e.point.abs())
}

/// Precision per second: 1 / (relative half-width² × seconds). A CI narrows as 1/√time, so
/// this is what stays put as a run lengthens; 4× it halves the half-width in the same time.
pub fn precision_per_second(relative_half_width: f64, elapsed: Duration) -> f64 {
    1.0 / (relative_half_width * relative_half_width * elapsed.as_secs_f64())
}

#[cfg(test)]
mod tests;
