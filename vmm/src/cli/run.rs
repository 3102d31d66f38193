//! The one run pipeline, for `run` and `check`: prepare (config, guest, KVM, history) →
//! validate → measure → write → save. The same outcome gives the same status in both.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use irqbench::config::plan::Plan;
use irqbench::config::Limits;
use irqbench::files::write::{self, Form, OutputTarget};
use irqbench::history::{self, DbLocation, Origin, Store};
use irqbench::machine::image::GuestImage;
use irqbench::report::{self, ExportFormat, OutputDir};
use irqbench::results::redact::{redact, redact_text, Redaction};
use irqbench::results::{HostManifest, RunReport};
use irqbench::session::RunOptions;
use irqbench::validate::OnFail;
use irqbench::vcpu::Stop;
use irqbench::{host, measure, session, validate};

use super::config::{load_image, load_plan, PlanArgs};
use super::error::{warn, CliError, Status};
use super::output::{emit, reported, write_one};
use super::progress::Progress;
use super::save::{not_over_history, run_meta, SaveArgs, Saver};
use super::signals::{announce_stop, arrived, install_signals, status_of, RESULTS_WHOLE};

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// A config file, or the name of a shipped config (see `irqbench list`). Default: the
    /// built-in quick config.
    config: Option<String>,
    /// Write the results as JSON (and an SVG chart next to it); `-` for stdout.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write one CSV line per row; `-` for stdout.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Write a Markdown report (host manifest and tables) to paste into a mail; `-` for stdout.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Write a plain-text report of at most 72 columns to paste into a mail: the command, the
    /// host, and per comparison a table across conditions; `-` for stdout.
    #[arg(long, value_name = "FILE")]
    mail: Option<PathBuf>,
    /// Write every format into a new timestamped folder under DIR (never overwritten).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print the whole report: legend, KVM stats per op, exit sites, validation detail,
    /// scaling tables, per-vCPU throughput (the default prints one screen: the answers and a
    /// compact table per group).
    #[arg(long, short, conflicts_with = "quiet")]
    verbose: bool,
    #[command(flatten)]
    pub measure: MeasureArgs,
    /// Also count KVM's exits by hardware reason from the kvm:kvm_exit/kvm_entry tracepoints
    /// (root, a mounted tracefs, VMX or SVM); the report says why when it cannot.
    #[arg(long)]
    trace_exits: bool,
}

/// What `run` and `check` share: the guest, the output on stderr, the plan's changes and
/// length, the host validation's override, the report's exports and redaction, the history.
#[derive(Debug, clap::Args)]
pub struct MeasureArgs {
    /// Guest kernel ELF to boot instead of the embedded one.
    #[arg(long, value_name = "FILE")]
    pub guest: Option<PathBuf>,
    /// Print nothing but errors (and `check`'s verdict): no progress, no notes, no table (the
    /// files asked for are still written).
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub adhoc: PlanArgs,
    #[command(flatten)]
    pub reporting: ReportArgs,
    #[command(flatten)]
    pub save: SaveArgs,
    /// Measure and report (`check`: and judge) even when the quick host validation FAILs (its
    /// lines stay above the table and in the JSON's host.validation).
    #[arg(long)]
    pub force: bool,
    /// Run a plan whose budgets add up to more than an hour (refused without it).
    #[arg(long)]
    pub yes: bool,
}

impl MeasureArgs {
    /// What a FAIL of the quick host validation does: `--force` decides it, here only.
    pub fn on_fail(&self) -> OnFail {
        if self.force {
            OnFail::Measure
        } else {
            OnFail::Refuse
        }
    }
}

/// What `run` and `check` share about the report: dashboard exports and redaction.
#[derive(Debug, Default, clap::Args)]
pub struct ReportArgs {
    /// Also write the run for a CI dashboard: `bencher=PATH` (Bencher Metric Format) or
    /// `github-benchmark=PATH` (github-action-benchmark, customSmallerIsBetter). Repeatable.
    /// Rows without data are left out and named on stderr.
    #[arg(long, value_name = "KIND=PATH", value_parser = parse_export)]
    pub export: Vec<(ExportFormat, PathBuf)>,
    /// Keep these host facts out of every output and the history, comma-separated:
    /// `cmdline` (the kernel command line), `hostname` (the host's name wherever it appears).
    /// The report says what was redacted.
    #[arg(long, value_name = "FACTS", value_delimiter = ',', value_parser = parse_redaction)]
    pub redact: Vec<Redaction>,
}

fn parse_export(s: &str) -> Result<(ExportFormat, PathBuf), String> {
    let names: Vec<&str> = ExportFormat::ALL.iter().map(|f| f.name()).collect();
    let (kind, path) = s
        .split_once('=')
        .ok_or_else(|| format!("expected KIND=PATH, KIND one of {}", names.join(", ")))?;
    let format = ExportFormat::from_name(kind).ok_or_else(|| {
        format!(
            "`{}` is not an export kind; valid: {}",
            irqbench::text::escape_line(kind),
            names.join(", ")
        )
    })?;
    if path.is_empty() {
        return Err("the export needs a path after `=`".into());
    }
    Ok((format, PathBuf::from(path)))
}

fn parse_redaction(s: &str) -> Result<Redaction, String> {
    Redaction::from_name(s.trim()).ok_or_else(|| {
        let names: Vec<&str> = Redaction::ALL.iter().map(|r| r.name()).collect();
        format!(
            "`{}` is not a fact irqbench can redact; valid: {}",
            irqbench::text::escape_line(s),
            names.join(", ")
        )
    })
}

/// The run's file outputs, each checked before any VM starts.
#[derive(Debug, Default)]
pub struct Outputs {
    pub json: Option<OutputTarget>,
    pub svg: Option<OutputTarget>,
    /// The forest plot of the comparisons, beside `--json` (`NAME.forest.svg`).
    pub forest: Option<OutputTarget>,
    pub csv: Option<OutputTarget>,
    pub markdown: Option<OutputTarget>,
    pub mail: Option<OutputTarget>,
    pub exports: Vec<(ExportFormat, OutputTarget)>,
}

impl Outputs {
    fn all(&self) -> Vec<&OutputTarget> {
        [
            &self.json,
            &self.svg,
            &self.forest,
            &self.csv,
            &self.markdown,
            &self.mail,
        ]
        .into_iter()
        .flatten()
        .chain(self.exports.iter().map(|(_, t)| t))
        .collect()
    }

    /// The `--export` targets, checked as every output is.
    pub fn with_exports(mut self, args: &ReportArgs) -> Result<Outputs, CliError> {
        for (format, path) in &args.export {
            let what = format!("--export {}", format.name());
            let target = OutputTarget::new(what, path).map_err(CliError::Output)?;
            // Both export formats are JSON.
            self.exports.push((*format, target.holding(Form::Json)));
        }
        Ok(self)
    }

    fn uses_stdout(&self) -> bool {
        self.all().iter().any(|t| t.is_stdout())
    }

    /// Refuses outputs that are one path twice, an input of the run, or the history database.
    pub fn check(
        &self,
        config: Option<&str>,
        guest: Option<&Path>,
        db: Option<&Path>,
    ) -> Result<(), CliError> {
        let mut inputs: Vec<(&str, &Path)> = Vec::new();
        if let Some(c) = config {
            inputs.push(("config", Path::new(c)));
        }
        if let Some(g) = guest {
            inputs.push(("guest image", g));
        }
        write::check_distinct(&self.all(), &inputs).map_err(CliError::Output)?;
        not_over_history(&self.all(), db).map_err(CliError::Output)
    }
}

/// Every output path is checked up front (a typo must not cost a whole run): kind, folder,
/// duplicates, and overlap with the config or guest this run reads or the history database.
fn check_outputs(args: &RunArgs) -> Result<Outputs, CliError> {
    let target = |what: &str, p: &Option<PathBuf>| {
        let target = p.as_deref().map(|p| OutputTarget::new(what, p));
        target.transpose().map_err(CliError::Output)
    };
    let json = target("--json", &args.json)?.map(|t| t.holding(Form::Json));
    let svg = json
        .as_ref()
        .and_then(|j| j.sibling("the chart beside --json", "svg"))
        .transpose()
        .map_err(CliError::Output)?;
    let forest = json
        .as_ref()
        .and_then(|j| j.sibling("the forest plot beside --json", "forest.svg"))
        .transpose()
        .map_err(CliError::Output)?;
    let outputs = Outputs {
        json,
        svg,
        forest,
        csv: target("--csv", &args.csv)?,
        markdown: target("--markdown", &args.markdown)?,
        mail: target("--mail", &args.mail)?,
        exports: Vec::new(),
    }
    .with_exports(&args.measure.reporting)?;
    outputs.check(
        args.config.as_deref(),
        args.measure.guest.as_deref(),
        args.measure.save.db.as_deref(),
    )?;
    Ok(outputs)
}

/// What one pass through the pipeline needs.
pub struct Request<'a> {
    pub config: Option<&'a str>,
    pub measure: &'a MeasureArgs,
    pub outputs: &'a Outputs,
    pub out_dir: Option<&'a Path>,
    pub origin: Origin,
    /// `--trace-exits` (`run` only).
    pub trace_exits: bool,
}

/// A run that was measured (perhaps partly), with the status its outcome gives.
pub struct Finished {
    pub report: RunReport,
    pub status: Status,
}

/// The pipeline. `Err` only when nothing was measured; a failed phase, output or save is
/// reported on stderr and counted in [`Finished::status`].
pub fn pipeline(req: &Request) -> Result<Finished, CliError> {
    // Installed before anything is created (main installed them already for a command that
    // measures; this returns the same).
    let stop = install_signals();
    let mut p = prepare(req)?;
    // A signal while the config, guest and KVM were checked: nothing was created yet.
    if let Some((signal, status)) = arrived(&stop) {
        return Err(CliError::StoppedBefore { signal, status });
    }
    // Checked, not created: a run that cannot start leaves no new database or folder behind.
    let (saver, mut status) = Saver::prepare(&req.measure.save)?;
    if let Some(base) = req.out_dir {
        report::check_out_base(base)?;
    }
    let mut report = measure_plan(&mut p, &stop, req)?;
    // Stopped before any row was measured: nothing to write or save, so nothing is created.
    if let Some((signal, status)) = arrived(&stop).filter(|_| report.results.is_empty()) {
        return Err(CliError::StoppedBefore { signal, status });
    }
    let out_dir = match req
        .out_dir
        .map(|base| OutputDir::create(base, &p.plan.name))
    {
        Some(Err(e)) => {
            status = status.and(CliError::Report(e).report());
            None
        }
        made => made.and_then(Result::ok),
    };
    if stop.is_set() && !report.partial {
        report.partial = true;
        report.partial_reason = Some("stopped by signal after the measuring".into());
    }
    // From here a signal leaves the results whole: the stop message says so.
    RESULTS_WHOLE.store(true, Ordering::SeqCst);
    let quiet = req.measure.quiet;
    report.adhoc = req.measure.adhoc.recorded();
    let hostname = host::hostname();
    rerun_from_history(
        &mut report,
        &req.measure.save,
        hostname.as_deref(),
        p.plan.precision,
    );
    // Before anything is written or saved: a redacted fact reaches no output.
    redact(&mut report, &p.redact, hostname.as_deref());
    let config_text = redact_text(&p.config_text, &p.redact, hostname.as_deref());
    status = status.and(status_of(&stop, &report));
    status = status.and(write_outputs(&report, req.outputs, out_dir.as_ref(), quiet));
    if let Some(s) = &saver {
        let meta = run_meta(req.origin, &config_text, &p.image);
        status = status.and(s.save(&report, &meta, quiet));
    }
    // A signal while the outputs were written or the run saved said "stopping": its status.
    status = status.and(status_of(&stop, &report));
    for line in super::progress::failure_lines(&report.failures) {
        warn(line);
    }
    if report.partial {
        warn(format_args!(
            "run stopped early ({}); results are marked partial",
            report.partial_reason.as_deref().unwrap_or("?")
        ));
    }
    Ok(Finished { report, status })
}

/// The rerun intervals from the earlier runs in the history (`--db`, or the default one; read
/// even with --no-save). A history that is missing or unreadable leaves them out: the run's own
/// CIs stand, and the legend says so.
fn rerun_from_history(
    report: &mut RunReport,
    save: &SaveArgs,
    hostname: Option<&str>,
    precision: f64,
) {
    let (Some(hostname), Ok(loc)) = (hostname, DbLocation::resolve(save.db.as_deref())) else {
        return;
    };
    let filled = Store::open_read_only(&loc)
        .and_then(|store| history::fill_rerun(&store, report, hostname, precision));
    match filled {
        Ok(()) | Err(history::HistoryError::Missing { .. }) => {}
        Err(e) => warn(format_args!(
            "warning: no rerun intervals (the history could not be read): {}",
            irqbench::error_chain(&e, "\n  caused by: ")
        )),
    }
}

pub fn cmd_run(args: &RunArgs) -> Result<Status, CliError> {
    if args.measure.save.no_save && args.measure.save.db.is_some() {
        return Err(CliError::Usage(
            "run --db names the history to save in and --no-save saves nothing: give one".into(),
        ));
    }
    let outputs = check_outputs(args)?;
    let done = pipeline(&Request {
        config: args.config.as_deref(),
        measure: &args.measure,
        outputs: &outputs,
        out_dir: args.out.as_deref(),
        origin: Origin::Run,
        trace_exits: args.trace_exits,
    })?;
    // The table last: a closed stdout must not cost the files or the messages above.
    if args.measure.quiet || outputs.uses_stdout() {
        return Ok(done.status);
    }
    let table = if args.verbose {
        format!("{}\n", report::render_table(&done.report))
    } else {
        report::render_summary(&done.report)
    };
    let printed = emit(&table).unwrap_or_else(|e| e.report());
    Ok(done.status.and(printed))
}

/// A plan longer than an hour by its budgets runs only with `--yes`: 10 000 groups of
/// `max_seconds = 3600` would run for over a year.
fn confirm_length(plan: &Plan, yes: bool) -> Result<(), CliError> {
    let length = measure::pacing::PlanLength::of(plan);
    if !length.needs_confirmation() || yes {
        return Ok(());
    }
    Err(CliError::Usage(format!(
        "{}: the plan runs for about {length}, more than an hour; pass --yes to run it anyway, \
         or shorten its lists or run.max_seconds",
        irqbench::text::escape_line(&plan.source)
    )))
}

/// What a measured run needs, each part checked: KVM, the plan and its config text, the guest.
struct Prepared {
    kvm: kvm_ioctls::Kvm,
    plan: Plan,
    config_text: String,
    image: Arc<GuestImage>,
    /// `--redact` and the config's `report.redact`, each fact once.
    redact: Vec<Redaction>,
    /// The quick validation reads a vCPU's TSC across a span, whatever runs meanwhile: from as
    /// soon as KVM is open, over the config, the history database, the manifest, the
    /// validation's guests and the first group's boot, warm-up and calibration (the gate waits
    /// out what is left of it before any round is measured).
    tsc_probe: Option<Result<validate::probes::TscProbe, String>>,
}

fn prepare(req: &Request) -> Result<Prepared, CliError> {
    let (config, guest, yes) = (req.config, req.measure.guest.as_deref(), req.measure.yes);
    // Config and guest errors come first, so both can be checked on a machine without KVM;
    // the vCPU limit is KVM's when it can be asked.
    let kvm = host::open_kvm();
    let tsc_probe = kvm.as_ref().ok().map(validate::probes::TscProbe::start);
    let limits = match &kvm {
        Ok(k) => Limits {
            max_vcpus: (k.get_max_vcpus() as u32).min(irqbench_abi::MAX_VCPUS),
        },
        Err(_) => Limits::default(),
    };
    let (plan, config_text) = load_plan(config, &limits, &req.measure.adhoc)?;
    confirm_length(&plan, yes)?;
    let image = Arc::new(load_image(guest)?);
    let asked = &req.measure.reporting.redact;
    let redact = Redaction::ALL
        .into_iter()
        .filter(|r| asked.contains(r) || plan.redact.contains(r))
        .collect();
    Ok(Prepared {
        kvm: kvm?,
        plan,
        config_text,
        image,
        redact,
        tsc_probe,
    })
}

/// Validates the host, then runs the plan with progress on stderr. A stage that fails after
/// a signal arrived ends with the signal's status: the user asked to stop.
fn measure_plan(p: &mut Prepared, stop: &Stop, req: &Request) -> Result<RunReport, CliError> {
    let probe = p
        .tsc_probe
        .take()
        .unwrap_or_else(|| validate::probes::TscProbe::start(&p.kvm));
    let p = &*p;
    let (quiet, on_fail) = (req.measure.quiet, req.measure.on_fail());
    let options = RunOptions {
        stop: stop.clone(),
        trace_exits: req.trace_exits,
    };
    let plan = &p.plan;
    let length = measure::pacing::PlanLength::of(plan);
    let mut bar = Progress::new(quiet, length.groups, plan.max_seconds, plan.precision);
    announce_stop(bar.bar());
    if !quiet {
        warn(format_args!(
            "running `{}` ({} row{} in {} group{}) from {}: about {length}",
            plan.name,
            plan.phases.len(),
            if plan.phases.len() == 1 { "" } else { "s" },
            length.groups,
            if length.groups == 1 { "" } else { "s" },
            irqbench::text::escape_line(&plan.source),
        ));
    }
    let mut progress = |i: usize, n: usize, group: &str, step: &session::Step| {
        bar.step(i, n, group, step);
    };
    let not_beside = validate::beside::why_not_beside(plan, req.trace_exits);
    let started = measure::start_report(&p.kvm, plan).map_err(|e| run_error(plan, e));
    // A signal that cut the host manifest short (its probe VM's ioctl returns EINTR) came
    // before anything ran or was created: the same stop as one before the handlers.
    if let (Err(_), Some((signal, status))) = (&started, arrived(stop)) {
        bar.finish();
        return Err(CliError::StoppedBefore { signal, status });
    }
    let result = started.and_then(|mut report| {
        // Scoped: the validation's thread borrows KVM and the image, and is joined by the
        // gate (or, when the run ends before asking it, at the scope's end).
        std::thread::scope(|scope| {
            // A signal that cut the checks short stops the run (partial, its validation
            // recorded), rather than refusing it as a host that failed.
            let stopped = || stop.is_set();
            let mut validation = match RunValidation::start(
                scope,
                p,
                &mut report.host,
                on_fail,
                stop,
                probe,
                not_beside,
            ) {
                Ok(v) => v,
                Err(_) if stopped() => RunValidation::Pending(None, String::new()),
                Err(r) => return Err(r.into()),
            };
            let mut refused = None;
            let mut gate = |host: &mut HostManifest| {
                let open =
                    std::mem::replace(&mut validation, RunValidation::Pending(None, String::new()));
                match open.finish(host, on_fail) {
                    Ok(()) => true,
                    Err(r) => {
                        refused = (!stopped()).then_some(r);
                        false
                    }
                }
            };
            let report = measure::run_prepared(
                &p.kvm,
                plan,
                &p.image,
                report,
                &options,
                &mut progress,
                &mut gate,
            )
            .map_err(|e| run_error(plan, e))?;
            refused.map_or(Ok(report), |r| Err(r.into()))
        })
    });
    bar.finish();
    result.map_err(|e| match arrived(stop) {
        Some((signal, status)) => CliError::Stopped {
            signal,
            status,
            source: Box::new(e),
        },
        None => e,
    })
}

/// The run's quick host validation, as far as it has got before the gate.
enum RunValidation<'scope> {
    /// Its guest checks ran in series, before the first boot (the report's `placement`, which
    /// says why); `None`: nothing is left open.
    Pending(Option<Box<validate::Pending>>, String),
    /// Its guest checks run beside the first group's boot, warm-up and calibration.
    Beside(validate::beside::Beside<'scope>),
}

/// The report's `placement` of checks that ran beside the first group.
const BESIDE: &str = "beside the first group's preparation";

impl<'scope> RunValidation<'scope> {
    /// The checks on a thread of `scope` (unless `not_beside` says why not), or in series:
    /// before the first boot, or when no thread could be started. A refusal they already give
    /// in series is returned.
    fn start<'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        p: &'env Prepared,
        host: &mut HostManifest,
        on_fail: OnFail,
        stop: &Stop,
        probe: Result<validate::probes::TscProbe, String>,
        not_beside: Option<&'static str>,
    ) -> Result<RunValidation<'scope>, validate::Refusal> {
        let (probe, why) = match not_beside {
            None => {
                match validate::beside::Beside::start(scope, &p.kvm, &p.image, host, probe, stop) {
                    Ok(beside) => return Ok(RunValidation::Beside(beside)),
                    Err(_) => (
                        validate::probes::TscProbe::start(&p.kvm),
                        "no thread could be started for them",
                    ),
                }
            }
            Some(why) => (probe, why),
        };
        let pending = validate::begin_run(&p.kvm, &p.image, host, on_fail, probe, stop);
        let placement = format!("before the first group: {why}");
        record_placement(host, &placement);
        Ok(RunValidation::Pending(pending?.map(Box::new), placement))
    }

    /// Judges what is open and records the validation in `host`; a FAIL refuses the run.
    fn finish(self, host: &mut HostManifest, on_fail: OnFail) -> Result<(), validate::Refusal> {
        let (verdict, placement) = match self {
            RunValidation::Pending(None, _) => return Ok(()),
            RunValidation::Pending(Some(pending), placement) => {
                (validate::finish_run(*pending, host, on_fail), placement)
            }
            RunValidation::Beside(beside) => (beside.finish(host, on_fail), BESIDE.to_string()),
        };
        record_placement(host, &placement);
        verdict
    }
}

/// Notes in the recorded validation, if there is one yet, where its guest checks ran.
fn record_placement(host: &mut HostManifest, placement: &str) {
    if let Some(v) = host.validation.as_mut() {
        v.placement = Some(placement.to_string());
    }
}

/// A config that asks for what this host cannot give is fixed in the config, like any bad
/// config (exit 2), and named by its file.
fn run_error(plan: &Plan, e: measure::RunError) -> CliError {
    match e {
        measure::RunError::HypercallRefused { .. } | measure::RunError::HypercallVendor { .. } => {
            CliError::Unsupported {
                source_name: irqbench::text::escape_line(&plan.source).into_owned(),
                source: e,
            }
        }
        measure::RunError::TimerPeriod { .. } => CliError::Unfit(e),
        e => CliError::Run(e),
    }
}

/// Every format rendered in memory, then written through [`OutputTarget`]; a failure is
/// reported and the remaining outputs are still written.
fn write_outputs(
    report: &RunReport,
    outputs: &Outputs,
    out_dir: Option<&OutputDir>,
    quiet: bool,
) -> Status {
    let mut jobs: Vec<(OutputTarget, Result<String, String>)> = Vec::new();
    let mut status = Status::Success;
    if let Some(t) = &outputs.json {
        let written = reported(write_one(t, render_json(report), quiet));
        status = status.and(written);
        // The charts beside the JSON belong to it: after a failed JSON (a full disk keeps the
        // old file), a new chart beside the old JSON would be a mismatched pair.
        if written == Status::Success {
            if let Some(t) = &outputs.svg {
                jobs.push((t.clone(), report::render_svg(report)));
            }
            if let (Some(t), Some(forest)) = (&outputs.forest, report::render_forest(report)) {
                status = status.and(forest_jobs(t, outputs.json.as_ref(), forest, &mut jobs));
            }
        } else if outputs.svg.is_some() {
            warn("the charts beside --json were not written either, so the files stay a pair");
        }
    }
    for (format, t) in &outputs.exports {
        let export = report::render_export(report, *format);
        if !export.left_out.is_empty() {
            warn(format_args!(
                "--export {}: left out {} row(s) without data or without a CI (under 6 rounds): {}",
                format.name(),
                export.left_out.len(),
                export.left_out.join(", ")
            ));
        }
        jobs.push((t.clone(), Ok(export.text)));
    }
    if let Some(t) = &outputs.csv {
        jobs.push((t.clone(), Ok(report::render_csv(report))));
    }
    if let Some(t) = &outputs.markdown {
        jobs.push((t.clone(), Ok(report::render_markdown(report))));
    }
    if let Some(t) = &outputs.mail {
        jobs.push((t.clone(), Ok(report::render_mail(report))));
    }
    if let Some(d) = out_dir {
        for (path, text) in d.files(report) {
            match OutputTarget::new("a file in --out", &path) {
                Ok(t) => jobs.push((t, text)),
                Err(e) => status = status.and(CliError::Write(e).report()),
            }
        }
    }
    for (target, text) in jobs {
        status = status.and(reported(write_one(&target, text, quiet)));
    }
    status
}

/// The forest plot's pages beside --json: the first at `NAME.forest.svg` (checked before the
/// run), the others at `NAME.forest-2.svg`, … (checked now, as --out's files are).
fn forest_jobs(
    first: &OutputTarget,
    json: Option<&OutputTarget>,
    forest: Result<Vec<String>, String>,
    jobs: &mut Vec<(OutputTarget, Result<String, String>)>,
) -> Status {
    let pages = match forest {
        Ok(pages) => pages,
        Err(why) => {
            jobs.push((first.clone(), Err(why)));
            return Status::Success;
        }
    };
    let mut status = Status::Success;
    for (k, page) in pages.into_iter().enumerate() {
        let target = match (k, json) {
            (0, _) | (_, None) => Some(Ok(first.clone())),
            (_, Some(j)) => j.sibling(
                "a page of the forest plot beside --json",
                &report::forest_page_name("forest.svg", k + 1),
            ),
        };
        match target {
            Some(Ok(t)) => jobs.push((t, Ok(page))),
            Some(Err(e)) => status = status.and(CliError::Write(e).report()),
            None => {}
        }
    }
    status
}

/// Pretty JSON with a trailing newline.
pub fn render_json(report: &RunReport) -> Result<String, String> {
    report::to_json(report).map_err(|e| e.to_string())
}
