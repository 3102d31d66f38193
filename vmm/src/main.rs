//! The `irqbench` command line: parse, dispatch, and print an error once (`cli/` has the rest).

use std::process::ExitCode;

use clap::Parser;

mod cli;

use cli::error::{CliError, Status};
use cli::{Cli, Command};

fn main() -> ExitCode {
    ignore_file_size_signal();
    // Before anything can be created (the loader caught the earliest signals already, see
    // `cli::signals::catch_early_signals`).
    if measures(std::env::args_os()) {
        cli::signals::install_signals();
    }
    let status = match Cli::try_parse() {
        Ok(args) => dispatch(args.command).unwrap_or_else(|e| e.report()),
        Err(e) => clap_exit(&e),
    };
    ExitCode::from(status.code())
}

fn dispatch(command: Command) -> Result<Status, CliError> {
    match command {
        Command::Run(args) => cli::run::cmd_run(&args),
        Command::Host { json, verbose, .. } => cli::inspect::cmd_host(json, verbose),
        Command::Validate(args) => cli::validate::cmd_validate(&args),
        Command::Reference(args) => cli::reference::cmd_reference(&args),
        Command::Disasm { strategies, guest } => {
            cli::inspect::cmd_disasm(&strategies, guest.as_deref())
        }
        Command::Compare {
            old,
            new,
            db,
            markdown,
            min_change,
            normalised,
            mail,
            ..
        } => cli::history::cmd_compare(
            &old,
            &new,
            db.db.as_deref(),
            markdown,
            (min_change, normalised),
            mail.as_deref(),
        ),
        Command::History(args) => cli::history::cmd_history(args),
        Command::Baseline(args) => cli::history::cmd_baseline(args),
        Command::Check(args) => cli::check::cmd_check(args),
        Command::Import(args) => cli::history::cmd_import(args),
        Command::List => cli::output::emit(&irqbench::report::wrap(
            &cli::inspect::list_text(),
            irqbench::report::text_width(),
        )),
        Command::Completions { shell } => cli::output::emit_bytes(&cli::complete::script(shell)),
    }
}

use cli::signals::measures;

/// A file-size limit (`ulimit -f`) must be a write error irqbench reports (EFBIG), as a full
/// disk is, not SIGXFSZ killing the run before its table is printed and its results saved.
fn ignore_file_size_signal() {
    // SAFETY: sets one signal's disposition to SIG_IGN before any other thread exists; no
    // handler runs, so nothing async-signal-unsafe can happen.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// clap's message with each value it quotes from the command line (`invalid value '...'`,
/// `unexpected argument '...'`) on one line: the escaping that follows keeps newlines, and
/// a value's newline would start a line of the attacker's choosing.
fn one_line_values(e: &clap::Error, mut text: String) -> String {
    use clap::error::ContextValue;
    for (_, value) in e.context() {
        let values: &[String] = match value {
            ContextValue::String(s) => std::slice::from_ref(s),
            ContextValue::Strings(v) => v,
            _ => &[],
        };
        for v in values {
            let shown = irqbench::text::escape_line(v);
            if shown == v.as_str() {
                continue;
            }
            // The rendered message has the value as clap's styling left it: its escape
            // sequences stripped (`\e[1m\nerror: x` is printed as `\nerror: x`).
            let stripped = clap::builder::StyledStr::from(v.clone()).to_string();
            for v in [v.as_str(), stripped.as_str()] {
                // Wherever clap quotes it: `'{v}'`, and its tips (`use '-- {v}'`). A value
                // that is only whitespace would match the message's own line breaks: quoted
                // forms only.
                if v.trim().is_empty() {
                    text = text.replace(&format!("'{v}'"), &format!("'{shown}'"));
                } else {
                    text = text.replace(v, &shown);
                }
            }
        }
    }
    text
}

/// What clap has to say instead of a command: `--help` and `--version` go to stdout through
/// [`cli::output::emit`] (clap's own printing ignores a closed pipe or a full disk and exits
/// 0), usage errors to stderr with clap's status (2).
fn clap_exit(e: &clap::Error) -> Status {
    // Plain text, escaped: a usage error quotes the argument as typed, and an argument can
    // hold a terminal control sequence.
    let text = one_line_values(e, e.render().to_string());
    if e.use_stderr() {
        use std::io::Write as _;
        // As `warn`: a closed stderr leaves nothing to report to.
        let _ = write!(
            std::io::stderr().lock(),
            "{}",
            irqbench::text::escape(&text)
        );
        return Status::Usage;
    }
    cli::output::emit(&text).unwrap_or_else(|e| e.report())
}
