//! The command line of the results history: saving each run, `history`, `baseline`, `check`,
//! `import`, and `compare`'s run ids and baseline names. The work is in `irqbench::history`;
//! this is argument parsing, messages and exit codes.

use std::path::{Path, PathBuf};

use irqbench::files::write::OutputTarget;
use irqbench::history::{
    self, DbLocation, HistoryError, Origin, RunFilter, RunMeta, RunRef, Saved, Store,
};
use irqbench::report;
use irqbench::results::RunReport;
use irqbench::text::{escape_path, outside as escape_line};

use super::error::{warn, CliError, Status};
use super::output::{emit, emit_json, write_one};
use super::save::{location, mail_target, not_over_history, DbArg};

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  irqbench history                               # the last 20 runs, one line each
  irqbench history --row 'quick/*'               # and each quick row's median per run
  irqbench history --config quick --strategy native-popf --last 10
  irqbench history --host epyc --json > history.json
  irqbench history --strategy pvop-skip --svg trend.svg   # median line, 95% CI band

With --strategy or --row, below the runs, one table of rows × runs: each cell is the row's median with the 95% CI of
that run (`±h` reaches the farther end of the CI; a CI that includes 0 prints `≈0 (±h)`);
runs past the width continue in panels. --long prints a table per row instead. --host
matches part of the hostname or of the host (CPU, kernel, KVM flavour), in any case.")]
pub(crate) struct HistoryArgs {
    /// Only runs of this config (its name, as `irqbench list` shows it).
    #[arg(long, value_name = "NAME")]
    config: Option<String>,
    /// Only runs with a row of this strategy (or instruction probe), and only those rows.
    #[arg(long, value_name = "NAME")]
    strategy: Option<String>,
    /// Each row whose full name matches this glob (`quick/pvop-*`; `*` matches `/` too): its
    /// median per run below the runs. Without --row or --strategy, one line per run.
    #[arg(long, value_name = "GLOB")]
    row: Option<String>,
    /// Only runs on a host whose name or description contains this.
    #[arg(long, value_name = "TEXT")]
    host: Option<String>,
    /// The most recent N matching runs.
    #[arg(long, value_name = "N", default_value_t = history::DEFAULT_LAST as u32,
          value_parser = last_runs)]
    last: u32,
    /// JSON on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// A table per row (run, start, median ±h) instead of one table of rows × runs.
    #[arg(long)]
    long: bool,
    /// Print nothing but errors and the listing (no note when no run is saved yet).
    #[arg(long, short)]
    quiet: bool,
    /// Draw the trends as an SVG chart (a new path or a regular file; replaced atomically).
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    #[command(flatten)]
    db: DbArg,
}

pub(crate) fn cmd_history(args: HistoryArgs) -> Result<Status, CliError> {
    let loc = location(args.db.db.as_deref())?;
    let svg = args
        .svg
        .as_deref()
        .map(|p| {
            OutputTarget::new("--svg", p)
                .and_then(|t| not_over_history(&[&t], Some(&loc.path)).map(|()| t))
        })
        .transpose()
        .map_err(CliError::Output)?;
    if svg.as_ref().is_some_and(|t| t.is_stdout() && args.json) {
        return Err(CliError::Usage(
            "--json and --svg - both name stdout: give --svg a file".into(),
        ));
    }
    let per_row = args.strategy.is_some() || args.row.is_some();
    let filter = RunFilter {
        config: args.config,
        strategy: args.strategy,
        host: args.host,
        last: args.last as usize,
    };
    let (runs, points) = match Store::open_read_only(&loc) {
        Ok(store) => history_rows(&store, &filter)?,
        Err(HistoryError::Missing { path }) => {
            if !args.quiet {
                warn(format_args!(
                    "no runs saved yet: {} does not exist (`irqbench run` creates it)",
                    escape_path(&path)
                ));
            }
            (Vec::new(), Vec::new())
        }
        Err(e) => return Err(e.into()),
    };
    let points: Vec<history::TrendPoint> = match &args.row {
        Some(glob) => points
            .into_iter()
            .filter(|p| irqbench::config::select::matches(glob, &p.name))
            .collect(),
        None => points,
    };
    if let Some(target) = &svg {
        let chart = history::render_trend_svg(&points)
            .map_err(|why| format!("{why} (nothing matched, or no run has rows)"));
        write_one(target, chart, args.quiet)?;
        // `--svg -` is the whole stdout, as `run --json -` is: a table after it would make
        // `history --svg - > trend.svg` no SVG.
        if target.is_stdout() {
            return Ok(Status::Success);
        }
    }
    if args.json {
        let text = history::render_history_json(&loc.path, &runs, &points)
            .map_err(|e| CliError::Failed(format!("cannot encode the history: {e}")))?;
        emit_json(&text)
    } else if args.long {
        emit(&history::render_history(&loc.path, &runs, &points))
    } else if per_row {
        let width = report::text_width();
        emit(&history::render_history_pivot(
            &loc.path, &runs, &points, width,
        ))
    } else {
        let width = report::text_width();
        let mut text = history::render_history_pivot(&loc.path, &runs, &[], width);
        if !points.is_empty() {
            text.push_str(
                "\nper-row trends: --row GLOB (`--row 'quick/*'`), --strategy NAME, or --long\n",
            );
        }
        emit(&text)
    }
}

/// The runs `filter` selects and their trend points; a filter that matches nothing in a
/// history that has runs is an error that lists what would match.
fn history_rows(
    store: &Store,
    filter: &RunFilter,
) -> Result<(Vec<history::RunRow>, Vec<history::TrendPoint>), HistoryError> {
    let runs = store.runs(filter)?;
    let filtered = filter.config.is_some() || filter.strategy.is_some() || filter.host.is_some();
    if runs.is_empty() && filtered && store.run_count()? > 0 {
        return Err(store.explain_no_match(filter)?);
    }
    let ids: Vec<i64> = runs.iter().map(|r| r.id).collect();
    let points = store.trend(&ids, filter.strategy.as_deref())?;
    Ok((runs, points))
}

// ---------------------------------------------------------------------------------------------
// baseline

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  irqbench run quick && irqbench baseline save main   # name the run just made
  irqbench baseline save before-patch 12              # name run 12 (see irqbench history)
  irqbench baseline list
  irqbench baseline rm before-patch
  irqbench check quick --baseline main                # a new run against it

A baseline names a stored run. Saving a name again moves it to the new run. Names are letters,
digits, `.`, `_` and `-` (not only digits, so they never read as run ids).")]
pub(crate) struct BaselineArgs {
    #[command(subcommand)]
    action: BaselineAction,
    #[command(flatten)]
    db: DbArg,
}

#[derive(Debug, clap::Subcommand)]
enum BaselineAction {
    /// Name a run (default: the latest) as a baseline.
    Save {
        name: String,
        /// The run id (`irqbench history` lists them).
        #[arg(value_name = "RUN-ID", value_parser = run_id, allow_negative_numbers = true)]
        run: Option<i64>,
    },
    /// List the baselines.
    List,
    /// Remove a baseline (the run stays in the history).
    Rm { name: String },
}

pub(crate) fn cmd_baseline(args: BaselineArgs) -> Result<Status, CliError> {
    let loc = location(args.db.db.as_deref())?;
    let list = matches!(args.action, BaselineAction::List);
    // Listing is a query: a history this user may only read can still be listed.
    let opened = if list {
        Store::open_read_only(&loc)
    } else {
        Store::open_existing(&loc)
    };
    let store = match opened {
        Ok(s) => s,
        Err(HistoryError::Missing { .. }) if list => {
            return emit(&format!(
                "no baselines: {} does not exist yet\n",
                escape_path(&loc.path)
            ));
        }
        Err(e) => return Err(e.into()),
    };
    let text = match args.action {
        BaselineAction::Save { name, run } => baseline_save(&store, &name, run),
        BaselineAction::List => baseline_list(&store),
        BaselineAction::Rm { name } => store.remove_baseline(&name).map(|id| {
            format!(
                "removed baseline {} (run {id} stays in the history)\n",
                escape_line(&name)
            )
        }),
    }?;
    emit(&text)
}

fn baseline_save(store: &Store, name: &str, run: Option<i64>) -> Result<String, HistoryError> {
    let (id, before) = store.save_baseline(name, run)?;
    let r = store.report(id)?;
    if r.partial {
        warn(format_args!(
            "warning: run {id} is partial ({}): a check against it compares only what it has",
            escape_line(r.partial_reason.as_deref().unwrap_or("reason unknown"))
        ));
    }
    let moved = match before {
        Some(b) if b != id => format!(" (was run {b})"),
        _ => String::new(),
    };
    Ok(format!(
        "baseline {}: run {id}{moved}, config {}, {} rows, started {}\n",
        escape_line(name),
        escape_line(&r.config_name),
        r.results.len(),
        human_time(r.started_unix)
    ))
}

fn human_time(unix: u64) -> String {
    history::render_time(unix)
}

fn baseline_list(store: &Store) -> Result<String, HistoryError> {
    let rows = store.baselines()?;
    if rows.is_empty() {
        return Ok(format!(
            "no baselines in {} (`irqbench baseline save NAME` names the latest run)\n",
            escape_path(store.path())
        ));
    }
    Ok(history::render_baselines(&rows))
}

// ---------------------------------------------------------------------------------------------
// import

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  irqbench import results/*/results.json       # earlier --out folders
  irqbench import old.json --db /tmp/h.sqlite

Reads results files of schema irqbench-results/4, or /3 converted (regular files only, bounded in size).
A file whose report is already stored is skipped. Exit status: 0 every file stored (or already
there), 2 a file could not be read (the others are still imported), 1 the database failed.")]
pub(crate) struct ImportArgs {
    /// Results JSON files written by `irqbench run --json` or `--out`.
    #[arg(required = true, value_name = "FILE.json")]
    files: Vec<PathBuf>,
    #[command(flatten)]
    db: DbArg,
}

pub(crate) fn cmd_import(args: ImportArgs) -> Result<Status, CliError> {
    let loc = location(args.db.db.as_deref())?;
    // Checked up front, created with the first file that reads: a failed import leaves no
    // new database.
    Store::check_can_save(&loc)?;
    let mut opened: Option<Store> = None;
    let mut out = String::new();
    let mut status = Status::Success;
    for file in &args.files {
        let report = match report::read_json(file) {
            Ok(r) => r,
            Err(e) => {
                status = status.and(CliError::from(e).report());
                continue;
            }
        };
        let meta = RunMeta {
            origin: Origin::Import,
            config_text: None,
            guest: None,
            source_file: Some(file),
        };
        let store = match &mut opened {
            Some(s) => s,
            None => opened.insert(Store::open(&loc)?),
        };
        match store.save(&report, &meta)? {
            Saved::New(id) => {
                out.push_str(&format!("imported {} as run {id}\n", escape_path(file)))
            }
            Saved::Duplicate(id) => out.push_str(&format!(
                "{}: already stored as run {id}\n",
                escape_path(file)
            )),
        }
    }
    Ok(emit(&out)?.and(status))
}

// ---------------------------------------------------------------------------------------------
// compare and check

/// A compare argument's report: a file, or a run the history holds (opened read-only).
/// The run `arg` names, and how the compare header names it (`run 12`, `baseline main (run
/// 12)`, the path), so two runs of one config and minute are told apart.
fn load_ref(
    arg: &str,
    loc: &DbLocation,
    store: &mut Option<Store>,
) -> Result<(RunReport, String), CliError> {
    let r = RunRef::parse(arg)?;
    if let RunRef::File(path) = &r {
        // read_json is bounded: /dev/zero or a FIFO is refused before anything is read.
        let shown = escape_path(path);
        return Ok((report::read_json(path)?, shown));
    }
    let s = match store {
        Some(s) => s,
        None => store.insert(Store::open_read_only(loc).map_err(|e| CliError::RunRef {
            arg: arg.to_owned(),
            source: Box::new(e),
        })?),
    };
    let id = s.resolve(&r)?;
    let shown = match &r {
        RunRef::Baseline(name) => {
            format!("baseline {} (run {id})", escape_line(name))
        }
        RunRef::Latest => format!("run {id} (latest)"),
        RunRef::Run(_) | RunRef::File(_) => format!("run {id}"),
    };
    Ok((s.report(id)?, shown))
}

pub(crate) fn cmd_compare(
    old: &str,
    new: &str,
    db: Option<&Path>,
    markdown: bool,
    (min_change, normalised): (f64, bool),
    mail: Option<&Path>,
) -> Result<Status, CliError> {
    let loc = location(db)?;
    let mail = mail_target(mail, &loc.path)?;
    let mut store = None;
    let (a, a_shown) = load_ref(old, &loc, &mut store)?;
    let (b, b_shown) = load_ref(new, &loc, &mut store)?;
    let mut c = irqbench::analysis::compare::compare_by(&a, &b, min_change, normalised);
    c.runs[0].source = a_shown;
    c.runs[1].source = b_shown;
    let mut printed = Status::Success;
    if let Some(t) = &mail {
        let flag = if normalised { " --normalised" } else { "" };
        let command = format!(
            "irqbench compare {} {}{flag}",
            escape_line(old),
            escape_line(new)
        );
        write_one(t, Ok(report::render_compare_mail(&c, &command)), true)?;
    }
    if !mail.as_ref().is_some_and(OutputTarget::is_stdout) {
        printed = emit(&report::render_compare(&c, markdown))?;
    }
    if c.rows.is_empty() {
        // Nothing was compared: a CI step comparing the wrong pair must not pass.
        warn(format_args!(
            "no row of {} matches a row of {} (rows match by name and by what they measured): \
             nothing compared",
            c.runs[0].source, c.runs[1].source
        ));
        return Ok(printed.and(Status::Failed));
    }
    Ok(printed)
}

/// `--last N`: a count in range, with the range named also for a number past u64 (clap's own
/// parser then says only "number too large to fit in target type").
fn last_runs(s: &str) -> Result<u32, String> {
    match s.parse::<u64>() {
        Ok(n @ 1..=100_000) => Ok(n as u32),
        _ => Err(format!(
            "`{}` is not a count in 1..=100000",
            irqbench::text::escape_clipped(s, 40)
        )),
    }
}

/// `baseline save NAME RUN-ID`: a run id as `irqbench history` lists them, the argument shown
/// on one line (clap's own parser quotes it as typed, newlines and all).
fn run_id(s: &str) -> Result<i64, String> {
    match s.parse::<i64>() {
        Ok(n) if n >= 1 && !s.starts_with('+') => Ok(n),
        _ => Err(format!(
            "`{}` is not a run id: a number from 1 up, as `irqbench history` lists them",
            irqbench::text::escape_clipped(s, 40)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_count_or_run_id_is_named_on_one_line() {
        for err in [
            last_runs("1\nerror: FAKE").unwrap_err(),
            run_id("1\nerror: FAKE").unwrap_err(),
        ] {
            assert!(!err.contains('\n'), "{err}");
            assert!(err.contains("`1\\nerror: FAKE`"), "{err}");
        }
        assert_eq!(run_id("12"), Ok(12));
        assert!(run_id("0").unwrap_err().contains("from 1 up"));
        assert_eq!(last_runs("20"), Ok(20));
    }
}
