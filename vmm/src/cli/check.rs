//! `irqbench check`: `run`'s pipeline against a saved baseline, then the verdict.

use std::path::PathBuf;

use irqbench::files::write::{Form, OutputTarget};
use irqbench::history::{self, Origin, Store};
use irqbench::report;
use irqbench::results::RunReport;
use irqbench::text::outside as escape_line;

use super::error::{warn, CliError, Status};
use super::output::{emit, write_one};
use super::run::{pipeline, MeasureArgs, Outputs, Request};
use super::save::{location, mail_target};

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  irqbench run quick && irqbench baseline save main    # once, on a known-good tree
  irqbench check quick --baseline main                 # after a change: exit 1 on a regression
  irqbench check configs/strategies.toml --baseline main --max-regression 10 > check.md
  irqbench check quick --baseline main --set run.max_seconds=2 --only 'quick/native-*'

Runs CONFIG, saves the run (unless --no-save), and compares it with the baseline by the rule of
`irqbench compare`: a change is beyond noise when the two runs' 95% CIs do not overlap and it is
at least --max-regression percent. A change for the worse that is beyond noise (more cycles or
exits per op, fewer ops/s, or with --normalised fewer ops/loop), or a baseline result this run
lacks, is a regression. Prints the Markdown compare table and the verdict.

Exit status, as for `irqbench run`: 0 no regression and every row measured; 1 a
regression, a failed row, a failed host validation, no KVM, or a failed write or save; 2 bad
config or arguments, or no such baseline; 130/129 interrupted by a signal (no verdict).")]
pub(crate) struct CheckArgs {
    /// A config file, or the name of a shipped config.
    config: String,
    /// The baseline to compare with (`irqbench baseline list`).
    #[arg(long, value_name = "NAME")]
    baseline: String,
    /// Changes for the worse below this many percent are never regressions.
    #[arg(long, value_name = "PCT", default_value_t = history::DEFAULT_MAX_REGRESSION_PCT,
          value_parser = super::parse_min_change, allow_hyphen_values = true)]
    max_regression: f64,
    /// Also write this run's results as JSON (a new path or a regular file; `-` not allowed:
    /// stdout carries the verdict).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also write the comparison and the verdict as plain text of at most 72 columns to paste
    /// into a mail; `-` for stdout instead of the table.
    #[arg(long, value_name = "FILE")]
    mail: Option<PathBuf>,
    /// Refuse to judge (exit 2) when the baseline's host differs in kernel release,
    /// microcode, KVM flavour, CPU, TSC rate or KVM module parameters: its numbers may not be
    /// comparable at all. Without it the differences are listed above the verdict.
    #[arg(long)]
    strict_host: bool,
    /// Gate on each row's cost in units of its group's own empty loop (`cycles_per_loop`)
    /// instead of raw cycles/op, and ops/s as ops/loop (times the loop's time per op): a host
    /// that got uniformly faster or slower (a new kernel build, another emulation speed) then
    /// moves no figure, while a change to one strategy still does.
    #[arg(long)]
    normalised: bool,
    #[command(flatten)]
    measure: MeasureArgs,
}

/// `check --only`: the baseline's rows the run leaves out are not missing, they were not asked
/// for; the verdict is over the selected rows (and says how many it set aside).
fn only_selected(base: &mut RunReport, globs: &[String]) {
    if globs.is_empty() {
        return;
    }
    let before = base.results.len();
    base.results.retain(|r| {
        globs
            .iter()
            .any(|g| irqbench::config::glob_matches(g, &r.name))
    });
    let left_out = before - base.results.len();
    if left_out > 0 {
        warn(format_args!(
            "--only: {left_out} of the baseline's {before} rows are not judged"
        ));
    }
}

/// The baseline's run id and report, from the database the run will be saved in.
fn load_baseline(args: &CheckArgs) -> Result<(i64, RunReport), CliError> {
    let loc = location(args.measure.save.db.as_deref())?;
    let store = Store::open_read_only(&loc)?;
    let id = store.baseline_run(&args.baseline)?;
    Ok((id, store.report(id)?))
}

fn json_target(args: &CheckArgs) -> Result<Outputs, CliError> {
    let json = match args.json.as_deref() {
        Some(path) if path.as_os_str() == irqbench::files::write::STDOUT_ARG => {
            return Err(CliError::Usage(
                "check --json takes a file: stdout carries the verdict".into(),
            ));
        }
        Some(path) => Some(
            OutputTarget::new("--json", path)
                .map_err(|e| CliError::Output(e.file_only()))?
                .holding(Form::Json),
        ),
        None => None,
    };
    let outputs = Outputs {
        json,
        ..Outputs::default()
    }
    .with_exports(&args.measure.reporting)?;
    if let Some((format, _)) = outputs.exports.iter().find(|(_, t)| t.is_stdout()) {
        return Err(CliError::Usage(format!(
            "check --export {} takes a file: stdout carries the verdict",
            format.name()
        )));
    }
    outputs.check(
        Some(&args.config),
        args.measure.guest.as_deref(),
        args.measure.save.db.as_deref(),
    )?;
    Ok(outputs)
}

/// `run`'s pipeline, then the verdict: a regression is 1, as a failed phase is.
pub(crate) fn cmd_check(args: CheckArgs) -> Result<Status, CliError> {
    // Everything that can be wrong with the arguments is found before the run.
    let (base_id, mut base) = load_baseline(&args)?;
    only_selected(&mut base, &args.measure.adhoc.only);
    let outputs = json_target(&args)?;
    if args.strict_host {
        refuse_another_host(&args.baseline, base_id, &base)?;
    }
    let mail = match &args.measure.save.db {
        Some(db) => mail_target(args.mail.as_deref(), db)?,
        None => mail_target(args.mail.as_deref(), &location(None)?.path)?,
    };
    let done = pipeline(&Request {
        config: Some(&args.config),
        measure: &args.measure,
        outputs: &outputs,
        out_dir: None,
        origin: Origin::Check,
        trace_exits: false,
    })?;
    let report = &done.report;
    if report.partial {
        warn("the run was interrupted: no verdict");
        return Ok(done.status);
    }
    if base.config_name != report.config_name && !args.measure.quiet {
        warn(format_args!(
            "warning: baseline {} is config {}, this run is config {}",
            escape_line(&args.baseline),
            escape_line(&base.config_name),
            escape_line(&report.config_name)
        ));
    }
    let mut outcome = history::check(
        &base,
        report,
        &args.baseline,
        base_id,
        args.max_regression,
        args.normalised,
    );
    outcome.comparison.runs[0].source =
        format!("baseline {} (run {base_id})", escape_line(&args.baseline));
    outcome.comparison.runs[1].source = "this run".into();
    let host_differs = &outcome.comparison.host_differs;
    if args.strict_host && !host_differs.is_empty() {
        return Err(strict_host_refusal(&args.baseline, base_id, host_differs));
    }
    let verdict = if outcome.passed() {
        Status::Success
    } else {
        Status::Failed
    };
    if let Some(t) = &mail {
        write_one(t, Ok(check_mail(&args, &outcome)), true)?;
        if t.is_stdout() {
            return Ok(done.status.and(verdict));
        }
    }
    Ok(emit(&history::render_check(&outcome))?
        .and(done.status)
        .and(verdict))
}

/// `check --strict-host` against a baseline from another host or setup, refused before the
/// run (the hypercall transport, the plan's, is compared after it).
fn refuse_another_host(name: &str, base_id: i64, base: &RunReport) -> Result<(), CliError> {
    let kvm = irqbench::host::open_kvm()?;
    let now = RunReport {
        host: irqbench::host::manifest(&kvm)?,
        hypercall_transport: base.hypercall_transport.clone(),
        ..RunReport::default()
    };
    let differs = irqbench::analysis::compare::host_differences(base, &now);
    if differs.is_empty() {
        return Ok(());
    }
    Err(strict_host_refusal(name, base_id, &differs))
}

fn strict_host_refusal(name: &str, base_id: i64, differs: &[String]) -> CliError {
    CliError::Usage(format!(
        "baseline {} (run {base_id}) was measured on another host or setup, and --strict-host \
         refuses to judge across it: {}",
        escape_line(name),
        differs
            .iter()
            .map(|d| escape_line(d))
            .collect::<Vec<_>>()
            .join("; ")
    ))
}

/// The mail report of a check: the comparison, then the verdict in one line.
fn check_mail(args: &CheckArgs, outcome: &history::CheckOutcome) -> String {
    let mut command = format!(
        "irqbench check {} --baseline {}",
        escape_line(&args.config),
        escape_line(&args.baseline)
    );
    if args.normalised {
        command.push_str(" --normalised");
    }
    let adhoc = args.measure.adhoc.recorded();
    if !adhoc.is_empty() {
        command.push(' ');
        command.push_str(&adhoc.flags());
    }
    let mut text = report::render_compare_mail(&outcome.comparison, &command);
    let verdict = if outcome.passed() {
        "check: passed".to_string()
    } else {
        format!(
            "check: FAILED: {} regression(s), {} missing, {} not judged",
            outcome.regressions.len(),
            outcome.missing.len(),
            outcome.unjudged.len()
        )
    };
    text.push_str(&verdict);
    text.push('\n');
    text
}
