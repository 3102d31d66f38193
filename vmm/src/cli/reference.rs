//! `irqbench reference`: the command-line side of `irqbench::reference`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use irqbench::reference::compare::{self, Options};
use irqbench::reference::ProbeOptions;
use irqbench::{host, measure};

use super::config::load_image;
use super::error::{CliError, Status};
use super::output::emit;

pub const AFTER_HELP: &str = "Examples:
  irqbench reference                       # 1000 rounds, 350 iterations a block
  irqbench reference --rounds 300 --trip-rounds 0

What the method can reach on this host, and how close irqbench gets, from one invocation:
  1. the reference probe: raw KVM ioctls, one vCPU, a hand-encoded guest in the mode
     irqbench's guest measures in (64-bit long mode, CPL0, IF set); per round the empty loop,
     cli;sti, pushf;pop;cli;push;popf and an `out` loop, in a seeded shuffled order, each
     block timed by the guest's rdtsc and reported with one port-I/O exit;
  2. irqbench's own measurement of native-cli-sti against native-popf (body 0), run_plan on
     a built-in plan;
  3. a raw `out` against irqbench's PING doorbell, interleaved per round.
Both sides' figures are medians of per-round paired values with their 95% CI (irqbench's
estimators). Precision per second is 1 / (relative CI half-width² × seconds): the quantity a
longer run does not change. Only the ratios printed here carry between runs; absolute
numbers drift on an emulating host.

Exit status: 0 measured; 1 KVM or a run failed; 2 bad arguments; 130 interrupted.";

#[derive(Debug, clap::Args)]
pub struct ReferenceArgs {
    /// Kept rounds of the reference probe.
    #[arg(long, default_value_t = 1000)]
    pub rounds: u32,
    /// Loop iterations per block of the instruction variants.
    #[arg(long, default_value_t = 350)]
    pub iterations: u32,
    /// `out`s per block of the probe's exit variant (0 leaves it out).
    #[arg(long, default_value_t = 50)]
    pub exit_iterations: u32,
    /// Rounds of the raw-exit against PING comparison (0 leaves it out).
    #[arg(long, default_value_t = 200)]
    pub trip_rounds: u32,
    /// Seed of the shuffles.
    #[arg(long, default_value_t = ProbeOptions::default().seed)]
    pub seed: u64,
}

pub fn cmd_reference(args: &ReferenceArgs) -> Result<Status, CliError> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(sig, Arc::clone(&stop));
    }
    let probe = ProbeOptions {
        rounds: args.rounds,
        iterations: args.iterations,
        exit_iterations: args.exit_iterations,
        seed: args.seed,
        stop: Arc::clone(&stop),
        ..ProbeOptions::default()
    };
    probe
        .check()
        .map_err(|e| CliError::Usage(irqbench::error_chain(&e, ": ")))?;
    if args.trip_rounds > 100_000 {
        return Err(CliError::Usage(format!(
            "--trip-rounds {}: valid is 0..=100000",
            args.trip_rounds
        )));
    }
    let kvm = host::open_kvm()?;
    let image = Arc::new(load_image(None)?);
    let options = Options {
        probe,
        trip_rounds: args.trip_rounds,
    };
    let result = compare::compare(&kvm, &image, &options);
    if stop.load(Ordering::SeqCst) {
        measure::session::request_stop();
        return Ok(Status::Interrupted);
    }
    let c = result.map_err(|e| CliError::Failed(irqbench::error_chain(&e, ": ")))?;
    emit(&compare::text(&c))
}
