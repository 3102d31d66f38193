//! What a command writes: its stdout in one piece, and the files it was asked for.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use irqbench::files::write::{self, Form, OutputTarget};

use super::error::{warn, CliError, Status};

/// Prints a command's whole output. A closed stdout (`irqbench list >&-`) is an error, as a
/// full disk is: see [`STDOUT_CLOSED_AT_START`].
pub fn emit(text: &str) -> Result<Status, CliError> {
    emit_bytes(text.as_bytes())
}

pub fn emit_bytes(bytes: &[u8]) -> Result<Status, CliError> {
    emit_as(bytes, Form::Text)
}

/// Prints a command's whole output, serialized JSON (`--json`): it stays JSON on a terminal.
pub fn emit_json(json: &str) -> Result<Status, CliError> {
    emit_as(json.as_bytes(), Form::Json)
}

fn emit_as(bytes: &[u8], form: Form) -> Result<Status, CliError> {
    stdout_open()?;
    write::print_stdout(bytes, form).map_err(CliError::Stdout)?;
    Ok(Status::Success)
}

/// Whether descriptor 1 was closed when the process started. Rust's runtime opens /dev/null
/// on a closed 0, 1 or 2 before `main`, so output to a closed stdout would vanish with
/// status 0; this is looked at earlier, by the loader, through `.init_array`.
static STDOUT_CLOSED_AT_START: AtomicBool = AtomicBool::new(false);

extern "C" fn probe_stdout() {
    // SAFETY: F_GETFD only reads the descriptor's flags; it touches no memory, and needs
    // nothing the runtime sets up.
    if unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFD) } == -1 {
        STDOUT_CLOSED_AT_START.store(true, Ordering::Relaxed);
    }
}

#[used]
#[link_section = ".init_array"]
static PROBE_STDOUT: extern "C" fn() = probe_stdout;

/// EBADF when descriptor 1 was closed at the start or is closed now.
fn stdout_open() -> Result<(), CliError> {
    if STDOUT_CLOSED_AT_START.load(Ordering::Relaxed) {
        return Err(CliError::Stdout(io::Error::from_raw_os_error(libc::EBADF)));
    }
    // SAFETY: as in `probe_stdout`.
    if unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFD) } == -1 {
        return Err(CliError::Stdout(io::Error::last_os_error()));
    }
    Ok(())
}

/// Writes one rendered output; a render failure or a write failure is the error.
pub fn write_one(
    target: &OutputTarget,
    text: Result<String, String>,
    quiet: bool,
) -> Result<(), CliError> {
    let text =
        text.map_err(|why| CliError::Failed(format!("cannot render {}: {why}", target.what())))?;
    if target.is_stdout() {
        stdout_open()?;
    }
    target.write(text.as_bytes()).map_err(CliError::Write)?;
    if !quiet {
        warn(format_args!(
            "wrote {} {}",
            target.what(),
            irqbench::text::outside(&target.describe())
        ));
    }
    Ok(())
}

/// A result of `cmd` that may fail without stopping the others: reported now, its status kept.
pub fn reported(result: Result<(), CliError>) -> Status {
    match result {
        Ok(()) => Status::Success,
        Err(e) => e.report(),
    }
}
