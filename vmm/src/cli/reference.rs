//! `irqbench reference`: the command-line side of `irqbench::reference`.

use std::sync::Arc;

use irqbench::host;
use irqbench::reference::compare::{self, Options};
use irqbench::reference::{estimate, ProbeOptions};
use irqbench::reference::{EXIT_ITERATIONS, ITERATIONS, ROUNDS, TRIP_ROUNDS};

use super::config::load_image;
use super::error::{warn, CliError, Status};
use super::output::emit;
use super::signals::install_signals;

pub const AFTER_HELP: &str = "Examples:
  irqbench reference                       # 1000 rounds, 350 iterations a block
  irqbench reference --rounds 300 --trip-rounds 0
  irqbench reference --slices 10             # finer alternation on a host that steps often

What the method can reach on this host, and how close irqbench gets, from one invocation:
  1. the reference probe: raw KVM ioctls, one vCPU, a hand-encoded guest in the mode
     irqbench's guest measures in (64-bit long mode, CPL0, IF set); per round the empty loop,
     cli;sti, pushf;pop;cli;push;popf and an `out` loop, in a seeded shuffled order, each
     block timed by the guest's rdtsc and reported with one port-I/O exit;
  2. irqbench's own measurement of native-cli-sti against native-popf (body 0), run_plan on
     a built-in plan;
     1 and 2 run in --slices slices (default 4), alternating, each side's rounds pooled: the
     host's speed changes for seconds at a time, and both sides then see the same mix of it;
  3. a raw `out` against irqbench's PING doorbell, interleaved per round.
Both sides' figures are medians of per-round paired values with their 95% CI (irqbench's
estimators). Precision per second is 1 / (relative CI half-width² × seconds): the quantity a
longer run does not change. Only the ratios printed here carry between runs; absolute
numbers drift on an emulating host.

Length: the counts set it, not a time budget, so before it starts the reference times a few
short blocks of each variant on this host and prints how long it will take (`reference:
about ...` on stderr). Past an hour it runs only with --yes; a block estimated past half its
10 s watchdog is refused, naming the flag and a count that fits with room for the estimate's error.

Exit status: 0 measured; 1 KVM or a run failed; 2 bad arguments (a count out of range, a
block too long, over an hour without --yes); 130 stopped by SIGINT or SIGTERM, 129 by SIGHUP
(nothing printed: a side cut short would not compare like with like); 141 stdout was a
closed pipe.";

#[derive(Debug, clap::Args)]
pub struct ReferenceArgs {
    /// Kept rounds of the reference probe (6..=1000000).
    #[arg(long, default_value_t = 1000, value_parser = rounds)]
    pub rounds: u32,
    /// Loop iterations per block of the instruction variants (1..=100000000).
    #[arg(long, default_value_t = 350, value_parser = iterations)]
    pub iterations: u32,
    /// `out`s per block of the probe's exit variant (0..=1000000; 0 leaves it out).
    #[arg(long, default_value_t = 50, value_parser = exit_iterations)]
    pub exit_iterations: u32,
    /// Rounds of the raw-exit against PING comparison (0..=100000; 0 leaves it out).
    #[arg(long, default_value_t = 200, value_parser = trip_rounds)]
    pub trip_rounds: u32,
    /// Slices the probe and irqbench's pair alternate in, each side's rounds pooled (1..=50;
    /// 1 runs the probe, then irqbench). Fewer when a slice would get under 6 probe rounds.
    #[arg(long, default_value_t = compare::SLICES, value_parser = slices)]
    pub slices: u32,
    /// Seed of the probe's shuffled block order: a whole number in 0..=18446744073709551615
    /// (u64); the same seed gives the same order, another seed another order.
    #[arg(long, default_value_t = ProbeOptions::default().seed, value_parser = seed,
          allow_negative_numbers = true)]
    pub seed: u64,
    /// Run a reference estimated at more than an hour (refused without it).
    #[arg(long)]
    pub yes: bool,
}

/// A count in `lo..=hi`, with the range named also for a number past u64 (clap's own parser
/// then says only "number too large to fit in target type").
fn count_in(s: &str, (lo, hi): (u32, u32)) -> Result<u32, String> {
    match s.parse::<u64>() {
        Ok(n) if (u64::from(lo)..=u64::from(hi)).contains(&n) => Ok(n as u32),
        _ => Err(format!(
            "`{}` is not a count in {lo}..={hi}",
            irqbench::text::escape_clipped(s, 40)
        )),
    }
}

/// `--seed`: any u64, the range named for a negative number or one past u64 (clap's own
/// parser says only "invalid digit found in string" or, for `-1`, "unexpected argument").
fn seed(s: &str) -> Result<u64, String> {
    s.parse::<u64>().map_err(|_| {
        format!(
            "`{}` is not a seed: a whole number in 0..={}",
            irqbench::text::escape_clipped(s, 40),
            u64::MAX
        )
    })
}

fn rounds(s: &str) -> Result<u32, String> {
    count_in(s, ROUNDS)
}

fn iterations(s: &str) -> Result<u32, String> {
    count_in(s, ITERATIONS)
}

fn exit_iterations(s: &str) -> Result<u32, String> {
    count_in(s, EXIT_ITERATIONS)
}

fn trip_rounds(s: &str) -> Result<u32, String> {
    count_in(s, TRIP_ROUNDS)
}

fn slices(s: &str) -> Result<u32, String> {
    count_in(s, compare::SLICE_RANGE)
}

pub fn cmd_reference(args: &ReferenceArgs) -> Result<Status, CliError> {
    // Installed first: from here a stop signal ends the block under way (the watchdog kicks
    // it within 50 ms) and every one after it, and is this command's to answer.
    let stop = install_signals();
    let probe = ProbeOptions {
        rounds: args.rounds,
        iterations: args.iterations,
        exit_iterations: args.exit_iterations,
        seed: args.seed,
        stop: stop.clone(),
        ..ProbeOptions::default()
    };
    probe
        .check()
        .map_err(|e| CliError::Usage(irqbench::error_chain(&e, ": ")))?;
    let kvm = host::open_kvm()?;
    let image = Arc::new(load_image(None)?);
    let options = Options {
        probe,
        trip_rounds: args.trip_rounds,
        slices: args.slices,
    };
    let planned = estimate::estimate(&kvm, &options);
    if let Some(status) = stopped(&stop) {
        return Ok(status);
    }
    let planned = planned.map_err(|e| CliError::Failed(irqbench::error_chain(&e, ": ")))?;
    warn(format_args!("reference: {planned}"));
    confirm(&planned, args.yes)?;
    let result = compare::compare(&kvm, &image, &options);
    if let Some(status) = stopped(&stop) {
        return Ok(status);
    }
    let c = result.map_err(|e| CliError::Failed(irqbench::error_chain(&e, ": ")))?;
    emit(&compare::text(&c))
}

/// The status of a signal that arrived, said on stderr.
fn stopped(stop: &irqbench::vcpu::Stop) -> Option<Status> {
    let (signal, status) = super::signals::arrived(stop)?;
    warn(format_args!(
        "{signal}: the reference stopped before its last block; nothing is printed (a side \
         cut short would not compare like with like)"
    ));
    Some(status)
}

/// A block the watchdog would cut short is refused; past an hour, only with --yes.
fn confirm(planned: &estimate::Estimate, yes: bool) -> Result<(), CliError> {
    if let Some((block, fits)) = planned.block_too_long() {
        let flag = match block.body {
            irqbench::reference::guest::Body::PortOut => "--exit-iterations",
            _ => "--iterations",
        };
        return Err(CliError::Usage(format!(
            "{flag} {}: a block of {} would take about {:.1} s, past half the {} s a block may \
             take; try at most about {fits} (half the count the estimate allows, which is only \
             good to about ±50% on a busy host)",
            block.iterations,
            block.body.name(),
            block.took.as_secs_f64(),
            planned.block_timeout.as_secs()
        )));
    }
    if planned.needs_confirmation() && !yes {
        return Err(CliError::Usage(format!(
            "the reference runs for {planned}, more than an hour; pass --yes to run it anyway, \
             or lower --rounds, --iterations, --exit-iterations or --trip-rounds"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_is_any_u64_and_a_bad_one_names_the_range() {
        assert_eq!(seed("0"), Ok(0));
        assert_eq!(seed("18446744073709551615"), Ok(u64::MAX));
        for bad in ["-1", "18446744073709551616", "x", "1\nFAKE"] {
            let err = seed(bad).unwrap_err();
            assert!(err.contains("0..=18446744073709551615"), "{err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }
}
