//! Where a measured run is saved, and the outputs that must not replace the history: the
//! arguments and checks `run` and `check` share with the history's reading commands.

use std::path::{Path, PathBuf};

use irqbench::files::write::{OutputError, OutputTarget};
use irqbench::history::{DbLocation, Origin, RunMeta, Saved, Store};
use irqbench::results::RunReport;
use irqbench::text::escape_path;

use super::error::{warn, CliError, Status};

/// Where a run is saved: every command that measures takes these.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct SaveArgs {
    /// The history database to save the run in (default:
    /// $XDG_DATA_HOME/irqbench/history.sqlite, or ~/.local/share/irqbench/history.sqlite).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Do not save the run in the history database (check still reads its baseline there).
    #[arg(long)]
    pub no_save: bool,
}

/// The history database a reading command uses.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct DbArg {
    /// The history database (default: $XDG_DATA_HOME/irqbench/history.sqlite, or
    /// ~/.local/share/irqbench/history.sqlite).
    // Global: `baseline save NAME --db X` as well as `baseline --db X save NAME`.
    #[arg(long, value_name = "PATH", global = true)]
    pub db: Option<PathBuf>,
}

pub(crate) fn location(db: Option<&Path>) -> Result<DbLocation, CliError> {
    Ok(DbLocation::resolve(db)?)
}

/// Refuses outputs that would replace the history database (`--db`, or the default one) or a
/// file SQLite keeps beside it: `run --json ~/.local/share/irqbench/history.sqlite` would
/// otherwise destroy every saved run. Without a location there is nothing to protect.
pub(crate) fn not_over_history(
    targets: &[&OutputTarget],
    db: Option<&Path>,
) -> Result<(), OutputError> {
    let Ok(loc) = DbLocation::resolve(db) else {
        return Ok(());
    };
    let files = loc.files();
    let files: Vec<(&str, &Path)> = files.iter().map(|(w, p)| (*w, p.as_path())).collect();
    irqbench::files::write::check_not_over(targets, &files)
}

/// The history a run is saved in, checked before the run starts.
#[derive(Debug)]
pub(crate) struct Saver {
    loc: DbLocation,
}

impl Saver {
    /// `None` with --no-save, or when the default location cannot be used: the run goes on
    /// with a warning, and its status is 1 (a save was asked for and will not happen). A
    /// database named with --db that cannot be used fails at once, with 2, before any VM
    /// starts, as a bad output path does.
    pub(crate) fn prepare(args: &SaveArgs) -> Result<(Option<Saver>, Status), CliError> {
        if args.no_save {
            return Ok((None, Status::Success));
        }
        let opened = DbLocation::resolve(args.db.as_deref())
            .and_then(|loc| Store::check_can_save(&loc).map(|()| loc));
        match opened {
            Ok(loc) => Ok((Some(Saver { loc }), Status::Success)),
            Err(e) if args.db.is_some() => Err(CliError::SaveTarget(Box::new(e))),
            Err(e) => {
                warn(format_args!(
                    "warning: this run will not be saved in the history (--db PATH names \
                     another file; --no-save silences this): {}",
                    irqbench::error_chain(&e, "\n  caused by: ")
                ));
                Ok((None, Status::Failed))
            }
        }
    }

    /// Saves the run; a failure is reported and gives status 1, never a lost result: the
    /// caller still writes and prints everything.
    pub(crate) fn save(&self, report: &RunReport, meta: &RunMeta, quiet: bool) -> Status {
        match Store::open(&self.loc).and_then(|s| s.save(report, meta)) {
            Ok(saved) => {
                if !quiet {
                    let how = match saved {
                        Saved::New(_) => "saved as run",
                        Saved::Duplicate(_) => "already saved as run",
                    };
                    warn(format_args!(
                        "{how} {} in {}",
                        saved.id(),
                        escape_path(&self.loc.path)
                    ));
                }
                Status::Success
            }
            Err(e) => {
                warn(format_args!(
                    "the run was not saved in the history (its results are still printed \
                     and written): {}",
                    irqbench::error_chain(&e, "\n  caused by: ")
                ));
                Status::Failed
            }
        }
    }
}

/// What a measured run knows about itself, for the history.
pub(crate) fn run_meta<'a>(
    origin: Origin,
    config_text: &'a str,
    image: &'a irqbench::machine::image::GuestImage,
) -> RunMeta<'a> {
    RunMeta {
        origin,
        config_text: Some(config_text),
        guest: Some((&image.source, &image.bytes)),
        source_file: None,
    }
}

// ---------------------------------------------------------------------------------------------
// history

/// `--mail FILE|-`, checked before anything is read or run: kind, folder, not the history.
pub(crate) fn mail_target(
    mail: Option<&Path>,
    db: &Path,
) -> Result<Option<OutputTarget>, CliError> {
    mail.map(|p| {
        OutputTarget::new("--mail", p).and_then(|t| not_over_history(&[&t], Some(db)).map(|()| t))
    })
    .transpose()
    .map_err(CliError::Output)
}
