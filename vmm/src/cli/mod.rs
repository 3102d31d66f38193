//! The command line: the arguments, one module per command family, one error type. `main.rs`
//! parses, dispatches and prints an error once.

pub mod check;
pub mod complete;
pub mod config;
pub mod error;
pub mod history;
pub mod inspect;
pub mod output;
pub mod progress;
pub mod reference;
pub mod run;
pub mod save;
pub mod signals;
pub mod validate;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "irqbench",
    version,
    about = "Measure what saving and restoring the x86 interrupt flag costs in a KVM guest",
    long_about = "irqbench is a minimal KVM VMM. It boots its own tiny guest kernel and measures, \
for each way of saving and restoring the interrupt flag (native pushf/cli/popf, cli/sti, \
paravirt restore_fl, the 'only enable if IF was set' optimisation, a Xen-style virtual IF), how \
many VM exits and how many TSC cycles one operation costs, under a configurable interrupt load.",
    after_help = "Examples:
  irqbench run                              # the built-in quick config, table on stdout
  irqbench run configs/strategies.toml --out results
  irqbench run insn-cost --json insn.json   # a shipped config by name; SVG next to the JSON
  irqbench run quick --set run.max_seconds=1 --only 'quick/pvop-*'   # ad hoc: no TOML edited
  irqbench compare before.json after.json   # old --> new with the change and its noise
  irqbench history --strategy native-popf   # every run is saved: runs and a row's trend
  irqbench baseline save main               # name the latest run
  irqbench check quick --baseline main      # run, compare, exit 1 on a regression (CI gate)
  irqbench import old/*.json                # earlier JSON results into the history
  irqbench host                             # CPU, kernel, KVM flavour (vmx/svm/pvm), TSC
  irqbench validate                         # does this host behave as its flavour should?
  irqbench reference                        # raw-KVM precision/s against irqbench's
  irqbench disasm native-skip               # the exact instructions of a strategy
  irqbench list                             # strategies, instructions, irq sources, configs

Environment:
  IRQBENCH_KVM_DEVICE   the KVM device node to open instead of /dev/kvm; it must be KVM's
                        character device (10:232), nothing else is opened
  IRQBENCH_REQUIRE_KVM  tests only: 1 makes tests that need KVM fail instead of skip
  XDG_DATA_HOME         the history database is $XDG_DATA_HOME/irqbench/history.sqlite
                        (default ~/.local/share/irqbench/history.sqlite; --db names another)

When stdout is a pipe that was closed (irqbench list | head -1) irqbench stops quietly with
status 141, as a command killed by SIGPIPE; any other stdout error (a full disk) is reported
with status 1."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a benchmark config and report cycles and exits per operation.
    #[command(after_help = "Examples:
  irqbench run                                   # built-in quick config (5 strategies)
  irqbench run configs/strategies.toml           # every strategy, nesting 0 and 0.5
  irqbench run pv-restore-skip --out results     # results/pv-restore-skip-<UTC time>/...
  irqbench run epoll-irqsave-vs-irq --mail -     # 72 columns of plain text for a mail
  irqbench run pv-restore-skip -v                # the whole report, not one screen
  irqbench run my.toml --guest ./my-guest.elf    # another guest payload
  irqbench run quick --no-save                   # not kept in the history database
  irqbench run quick --set run.max_seconds=1 --only 'quick/pvop-*'
                                                 # one second per group, the pvop rows only
  irqbench run strategies --set bench.vcpus=[1,2] --set 'bench.irq=[{source=\"inject\", rate_hz=1000}]'

--set and --only change the config for this run only, and the report records them (JSON
`adhoc`, an `ad hoc:` header line, the history): KEY is `run.KEY`, `report.KEY`, `bench.KEY`
(every bench) or `bench.NAME.KEY` (one bench), VALUE is TOML; a bad one is refused as a bad
config is, naming the flag. --only keeps the rows whose full names (`quick/pvop-skip/n0/none/1v`)
match the glob; each group still measures its empty baseline.

Every run is saved in the history database (see `irqbench history`; --db PATH names another
file, --no-save skips it). A database named with --db that cannot be used fails at once; when
the default one cannot be written, the run warns and still prints and writes its results.

The table fits COLUMNS (else the terminal, else 100 columns): the answers and a compact table
per group; -v adds the legend, KVM stats per op, exit sites, validation detail and scaling.

Outputs: --json/--csv/--markdown/--mail take a new path, a regular file (replaced atomically) or `-`
for stdout (then the table is not printed, and no chart is written); a symlink, FIFO or device
is refused. Every output is checked before the first VM starts.

Before measuring, a run does the quick host checks of `irqbench validate` (under 100 ms): they
are recorded as host.validation in the JSON, WARN and FAIL lines are printed above the table,
and a FAIL stops the run before it measures unless --force is given.

CONFIG is a config file, or the name of a shipped config (`irqbench list`); a file of that
name wins. A folder is never a config: a folder named like a shipped config (./quick) is
passed over with a note and the shipped config runs; any other folder is refused. A path that
cannot be looked at says why (ELOOP, ENOTDIR, EACCES).

Exit status: 0 all rows measured, written and saved; 1 a row failed (guest fault,
timeout, protocol violation), a row has no data, the host failed validation, the run could not
start (no KVM, a bad guest), or an output or the save failed; 2 bad config or arguments
(outputs and --db included, and a plan over an hour of budgets without --yes); 130 interrupted by SIGINT or SIGTERM, 129 by SIGHUP (partial results are still
written and marked \"partial\"); 141 stdout was a closed pipe.")]
    Run(run::RunArgs),
    /// Print the host manifest: CPU, kernel, KVM flavour, TSC, capabilities.
    #[command(
        after_help = "Examples:\n  irqbench host\n  irqbench host --verbose   # the whole kernel command line\n\n\
Exit status: 0 printed; 1 no KVM, or the manifest could not be read; 130 stopped by SIGINT or\n\
SIGTERM, 129 by SIGHUP (nothing printed); 141 stdout was a closed pipe."
    )]
    Host {
        /// As JSON instead of text (always the whole command line).
        #[arg(long)]
        json: bool,
        /// The whole kernel command line (shortened to its start by default).
        #[arg(long, short)]
        verbose: bool,
        /// Print nothing but errors and the manifest (there is nothing else to leave out).
        #[arg(long, short)]
        quiet: bool,
    },
    /// Check that this host behaves as its KVM flavour should: PASS, WARN or FAIL per check.
    #[command(after_help = validate::AFTER_HELP)]
    Validate(validate::ValidateArgs),
    /// The method's limit on this host: a raw-KVM probe against irqbench, in one invocation.
    #[command(after_help = reference::AFTER_HELP)]
    Reference(reference::ReferenceArgs),
    /// Show the exact instructions of each strategy, decoded from the guest ELF.
    #[command(after_help = "Examples:
  irqbench disasm                 # every strategy
  irqbench disasm pvop-skip       # one strategy, with the pv-ops it calls

Lines wrap to the terminal's width (COLUMNS, else the terminal, else 100); the ELF's symbol
names are shown escaped (\\u{1b} for an ESC).")]
    Disasm {
        /// Strategy names (default: all).
        strategies: Vec<String>,
        /// Guest kernel ELF instead of the embedded one.
        #[arg(long, value_name = "FILE")]
        guest: Option<PathBuf>,
    },
    /// Compare two runs: old --> new per row, and whether it is beyond noise.
    #[command(after_help = "Examples:
  irqbench compare before.json after.json
  irqbench compare before.json after.json --markdown > mail.md
  irqbench compare main latest                # baseline `main` against the latest saved run
  irqbench compare 12 14                      # stored runs by id (irqbench history)

The header names each side as given (`old: run 12 = quick, ...`).

Each side is a results JSON file (an existing path, or one with a `/` or ending in .json), a
run id of the history database, `latest`, or a baseline name; `run:12` and `baseline:NAME`
say which explicitly.

A change is 'beyond noise' when the two runs' 95% CIs of the median (per-round paired
figures; the CI also covers rounds that drift together) do not overlap and the change is at
least --min-change; a figure without a CI (under 6 rounds) is not judged, and the output says
so. Changes below --min-change (default 5%) are
never called beyond noise: back-to-back runs drift that much. A change is a percentage only
between two figures printed as numbers: from or to a figure printed ≈0 (its CI holds 0) it
reads `from ≈0`, `to ≈0` or `both ≈0` (`0` for an exact zero); beside a figure below 0
`no %: below 0`; beside none `no data`.

A shared or nested host can run a whole run 20-25% faster or slower than the last one. Where
a group's `empty` loop moved beyond noise (in every row of the group, the same way), the
header says `host speed differs` for it: every cycles/op of that group moved with the loop,
whatever the strategy. --normalised then compares costs in units of each group's own loop
(`cost/loop`) and throughput as `ops/loop` (ops/s times the loop's time per op), which such a
change leaves alone while a change to one strategy still shows.

Exit status: 0 compared; 1 no row of one run matches a row of the other (nothing compared);
2 no such file, run or baseline; 141 stdout was a closed pipe.")]
    Compare {
        /// The run before: a results JSON file (from `run --json` or `--out`), a run id as
        /// `irqbench history` lists it (`12` or `run:12`), `latest`, or a baseline name (`main`
        /// or `baseline:main`).
        #[arg(value_name = "OLD")]
        old: String,
        /// The run after, named as OLD is: a results JSON file, a run id (`14`, `run:14`),
        /// `latest`, or a baseline name (`baseline:NAME`).
        #[arg(value_name = "NEW")]
        new: String,
        #[command(flatten)]
        db: save::DbArg,
        /// Markdown table instead of aligned text.
        #[arg(long)]
        markdown: bool,
        /// Never call a change below this many percent beyond noise (run-to-run drift floor).
        #[arg(
            long,
            value_name = "PCT",
            default_value_t = irqbench::analysis::compare::DEFAULT_MIN_CHANGE_PCT,
            value_parser = parse_min_change,
            allow_hyphen_values = true
        )]
        min_change: f64,
        /// Compare each row's cost in units of its group's own empty loop (`cycles_per_loop`)
        /// instead of raw cycles/op, and ops/s as ops/loop (times the loop's time per op): a
        /// host that ran uniformly faster or slower then moves no figure, while a change to one
        /// strategy still does.
        #[arg(long)]
        normalised: bool,
        /// Print nothing but errors and the comparison.
        #[arg(long, short)]
        quiet: bool,
        /// Also write the comparison as plain text of at most 72 columns to paste into a mail
        /// (the command, the two runs, old -> new per row); `-` for stdout instead of the table.
        #[arg(long, value_name = "FILE")]
        mail: Option<PathBuf>,
    },
    /// The saved runs, and each row's median and CI across them.
    History(history::HistoryArgs),
    /// Name a saved run as a baseline, list or remove baselines.
    Baseline(history::BaselineArgs),
    /// Run a config and compare it with a baseline: exit 1 on a regression beyond noise.
    Check(check::CheckArgs),
    /// Load results JSON files (irqbench-results/4, or /3 converted) into the history database.
    Import(history::ImportArgs),
    /// List strategies, instruction probes, interrupt sources and shipped configs.
    #[command(after_help = "Example:\n  irqbench list")]
    List,
    /// Print a shell completion script.
    #[command(
        after_help = "Example:\n  irqbench completions bash > /etc/bash_completion.d/irqbench"
    )]
    Completions { shell: clap_complete::Shell },
}

/// A percentage a comparison can use: `nan` or a negative floor would call every change noise
/// or none, silently.
pub fn parse_min_change(s: &str) -> Result<f64, String> {
    let shown = || irqbench::text::escape_clipped(s, 40);
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{}` is not a number", shown()))?;
    if !v.is_finite() || !(0.0..=1000.0).contains(&v) {
        return Err(format!("`{}` is outside 0..=1000 (percent)", shown()));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_change_must_be_a_finite_percentage() {
        for bad in ["nan", "NaN", "inf", "-5", "1000.5", "x", ""] {
            assert!(parse_min_change(bad).is_err(), "{bad} accepted");
        }
        for good in ["0", "5", "12.5", "1000"] {
            assert!(parse_min_change(good).is_ok(), "{good} refused");
        }
    }
}
