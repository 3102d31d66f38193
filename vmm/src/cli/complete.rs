//! `irqbench completions SHELL`: clap_complete's script for the command line, with the names
//! a user types most offered where they go: shipped config names for CONFIG (a file still
//! completes in the shells that can mix both), strategy names for `disasm` and `--strategy`.

use clap::builder::PossibleValuesParser;
use clap::{Arg, Command, CommandFactory, ValueHint};
use clap_complete::Shell;

use super::config::BUILTIN_CONFIGS;
use super::Cli;

/// The script for `shell`. Generated into memory: clap_complete panics when its writer fails.
pub fn script(shell: Shell) -> Vec<u8> {
    let mut cmd = with_names(Cli::command());
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "irqbench", &mut out);
    out
}

/// The command line with the names as possible values, for completion only: parsing keeps
/// its own checks and messages (a config may be any file, a strategy is checked by name).
fn with_names(cmd: Command) -> Command {
    let configs: Vec<&'static str> = BUILTIN_CONFIGS.iter().map(|(n, _)| *n).collect();
    let strategies: Vec<&'static str> = irqbench_abi::strategy::NAMES.to_vec();
    let config = move |a: Arg| {
        a.value_parser(PossibleValuesParser::new(configs.clone()))
            .value_hint(ValueHint::Other)
    };
    let strategy = move |a: Arg| a.value_parser(PossibleValuesParser::new(strategies.clone()));
    cmd.mut_subcommand("run", |c| c.mut_arg("config", config.clone()))
        .mut_subcommand("check", |c| c.mut_arg("config", config.clone()))
        .mut_subcommand("disasm", |c| c.mut_arg("strategies", strategy.clone()))
        .mut_subcommand("history", |c| {
            c.mut_arg("strategy", strategy.clone())
                .mut_arg("config", config.clone())
        })
}
