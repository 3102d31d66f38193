//! The command line's one error type and its exit statuses. A command returns
//! `Result<Status, CliError>`: `Ok` with a non-zero status is an outcome that was reported
//! (a failed phase, a regression), `Err` an error `main` prints once, with its `#[source]`
//! chain, and exits with [`CliError::status`].

use std::io::{self, Write};
use std::path::PathBuf;

use irqbench::files::read::BoundedReadError;
use irqbench::files::write::OutputError;
use irqbench::history::HistoryError;

/// The exit statuses, as the README's table lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Everything asked was done.
    Success,
    /// The work failed: a phase, the host's validation, KVM, a write or save, a regression.
    Failed,
    /// What was asked cannot be done as given: arguments, config, a path refused up front.
    Usage,
    /// SIGHUP stopped the run (128 + 1, as a shell reports it).
    Hangup,
    /// SIGINT or SIGTERM stopped the run.
    Interrupted,
    /// stdout was a closed pipe (as a command SIGPIPE killed).
    BrokenPipe,
}

impl Status {
    pub fn code(self) -> u8 {
        match self {
            Status::Success => 0,
            Status::Failed => 1,
            Status::Usage => 2,
            Status::Hangup => 129,
            Status::Interrupted => 130,
            Status::BrokenPipe => irqbench::files::write::BROKEN_PIPE_STATUS,
        }
    }

    /// The status of two outcomes of one command: a signal outranks everything (the user
    /// asked to stop), then a closed stdout, then a usage error, then a failure.
    pub fn and(self, other: Status) -> Status {
        let rank = |s: &Status| match s {
            Status::Success => 0,
            Status::Failed => 1,
            Status::Usage => 2,
            Status::BrokenPipe => 3,
            Status::Hangup | Status::Interrupted => 4,
        };
        // On a tie `max_by_key` gives its second argument: `self`, as it should.
        std::cmp::max_by_key(other, self, rank)
    }
}

/// Everything that stops a command. Variants that wrap a library error are transparent: its
/// message and sources are the library's, this type adds only the exit status.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad arguments, found by irqbench rather than clap.
    #[error("{0}")]
    Usage(String),
    /// A failure the message says everything about.
    #[error("{0}")]
    Failed(String),
    #[error(transparent)]
    Config(#[from] irqbench::config::ConfigError),
    #[error(transparent)]
    ConfigFile(BoundedReadError),
    #[error(
        "cannot read config {path} ({errno})",
        path = irqbench::text::escape_path(.path)
    )]
    ConfigPath {
        path: PathBuf,
        errno: &'static str,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Guest(#[from] irqbench::machine::image::ImageError),
    #[error(transparent)]
    Host(#[from] irqbench::host::HostError),
    /// An output refused before the run.
    #[error(transparent)]
    Output(OutputError),
    /// An output that failed while being written.
    #[error(transparent)]
    Write(OutputError),
    #[error(transparent)]
    History(Box<HistoryError>),
    #[error(
        "`{arg}` is no file, so it names a stored run",
        arg = irqbench::text::escape_clipped(.arg, 80)
    )]
    RunRef {
        arg: String,
        #[source]
        source: Box<HistoryError>,
    },
    /// A database named with --db that a run could not use: refused before the run.
    #[error(transparent)]
    SaveTarget(Box<HistoryError>),
    #[error(transparent)]
    Report(#[from] irqbench::report::ReportError),
    #[error(transparent)]
    Refused(#[from] irqbench::validate::Refusal),
    /// The config asks for what this host cannot give: fixed in the config.
    #[error("{source_name}")]
    Unsupported {
        source_name: String,
        #[source]
        source: irqbench::measure::RunError,
    },
    /// The config names its file in the message already.
    #[error(transparent)]
    Unfit(irqbench::measure::RunError),
    #[error(transparent)]
    Run(irqbench::measure::RunError),
    #[error("cannot write to stdout")]
    Stdout(#[source] io::Error),
    /// A signal came before the run started: nothing was created.
    #[error("stopped by {signal} before the run started: nothing was measured, written or saved")]
    StoppedBefore {
        signal: &'static str,
        status: Status,
    },
    /// A stage failed after a signal asked the run to stop: the signal's status, not the
    /// failure's.
    #[error("stopped by {signal}")]
    Stopped {
        signal: &'static str,
        status: Status,
        #[source]
        source: Box<CliError>,
    },
}

impl From<HistoryError> for CliError {
    fn from(e: HistoryError) -> CliError {
        CliError::History(Box::new(e))
    }
}

impl CliError {
    pub fn status(&self) -> Status {
        match self {
            CliError::Usage(_)
            | CliError::Config(_)
            | CliError::ConfigFile(_)
            | CliError::ConfigPath { .. }
            | CliError::Output(_)
            | CliError::SaveTarget(_)
            | CliError::Report(_)
            | CliError::Unsupported { .. }
            | CliError::Unfit(_) => Status::Usage,
            CliError::History(e) | CliError::RunRef { source: e, .. } => history_status(e),
            CliError::Stdout(e) if e.kind() == io::ErrorKind::BrokenPipe => Status::BrokenPipe,
            CliError::Write(e) if e.is_broken_pipe() => Status::BrokenPipe,
            CliError::Stopped { status, .. } | CliError::StoppedBefore { status, .. } => *status,
            CliError::Failed(_)
            | CliError::Guest(_)
            | CliError::Host(_)
            | CliError::Write(_)
            | CliError::Refused(_)
            | CliError::Run(_)
            | CliError::Stdout(_) => Status::Failed,
        }
    }

    /// Prints the error once, with its sources, and gives its status. A closed stdout pipe is
    /// not worth a message (`irqbench list | head -1`).
    pub fn report(&self) -> Status {
        let status = self.status();
        if status != Status::BrokenPipe {
            warn(irqbench::error_chain(self, "\n  caused by: "));
        }
        status
    }
}

/// What the user named wrongly (a path, a run, a baseline, a filter) is 2; a database that
/// failed while being used is 1.
fn history_status(e: &HistoryError) -> Status {
    match e {
        HistoryError::Sqlite { .. }
        | HistoryError::Encode { .. }
        | HistoryError::Decode { .. }
        | HistoryError::CreateDir { .. }
        | HistoryError::Inspect { .. } => Status::Failed,
        _ => Status::Usage,
    }
}

/// The symbolic name of an OS error a path lookup gives, for messages that must say which.
pub fn errno_name(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::ELOOP) => "ELOOP: a symbolic link loop",
        Some(libc::ENOTDIR) => "ENOTDIR: a part of the path is not a folder",
        Some(libc::EACCES) => "EACCES: a folder on the path cannot be searched, or the file read",
        Some(libc::ENAMETOOLONG) => "ENAMETOOLONG",
        Some(libc::EPERM) => "EPERM",
        Some(libc::EIO) => "EIO",
        _ => "an error",
    }
}

/// Messages go to stderr without `eprintln!`, which panics when stderr is a closed pipe or full;
/// what they quote is escaped, and they wrap to the terminal.
pub fn warn(msg: impl std::fmt::Display) {
    // What is said may quote a config, an argument, a file or the guest: shown, never sent.
    // Wrapped to the terminal like the report.
    let text = format!("irqbench: {msg}");
    let text = irqbench::report::wrap(
        &irqbench::text::escape(&text),
        irqbench::report::text_width(),
    );
    let _ = writeln!(io::stderr().lock(), "{text}");
}
