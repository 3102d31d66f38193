//! The `irqbench` command line.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use clap::{CommandFactory, Parser, Subcommand};
use irqbench::config::plan::Plan;
use irqbench::config::{self, Limits};
use irqbench::files::write::{self, OutputError, OutputTarget};
use irqbench::machine::image::GuestImage;
use irqbench::measure;
use irqbench::measure::session::RunOptions;
use irqbench::report::{self, OutputDir};
use irqbench::results::RunReport;
use irqbench::{history, host, validate};

mod cli;

/// The configs shipped in configs/, runnable by name (`irqbench run strategies`).
const BUILTIN_CONFIGS: [(&str, &str); 6] = [
    ("quick", include_str!("../../configs/quick.toml")),
    ("strategies", include_str!("../../configs/strategies.toml")),
    ("insn-cost", include_str!("../../configs/insn-cost.toml")),
    (
        "pv-restore-skip",
        include_str!("../../configs/pv-restore-skip.toml"),
    ),
    (
        "epoll-irqsave-vs-irq",
        include_str!("../../configs/epoll-irqsave-vs-irq.toml"),
    ),
    ("soak", include_str!("../../configs/soak.toml")),
];

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
  irqbench compare before.json after.json   # old --> new with the change and its noise
  irqbench history --strategy native-popf   # every run is saved: runs and a row's trend
  irqbench baseline save main               # name the latest run
  irqbench check quick --baseline main      # run, compare, exit 1 on a regression (CI gate)
  irqbench import old/*.json                # earlier JSON results into the history
  irqbench host                             # CPU, kernel, KVM flavour (vmx/svm/pvm), TSC
  irqbench validate                         # does this host behave as its flavour should?
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
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a benchmark config and report cycles and exits per operation.
    #[command(after_help = "Examples:
  irqbench run                                   # built-in quick config (5 strategies)
  irqbench run configs/strategies.toml           # every strategy, nesting 0 and 0.5
  irqbench run pv-restore-skip --out results     # results/pv-restore-skip-<UTC time>/...
  irqbench run epoll-irqsave-vs-irq --markdown mail.md
  irqbench run my.toml --guest ./my-guest.elf    # another guest payload
  irqbench run quick --no-save                   # not kept in the history database

Every run is saved in the history database (see `irqbench history`; --db PATH names another
file, --no-save skips it). A database named with --db that cannot be used fails at once; when
the default one cannot be written, the run warns and still prints and writes its results.

Outputs: --json/--csv/--markdown take a new path, a regular file (replaced atomically) or `-`
for stdout (then the table is not printed, and no chart is written); a symlink, FIFO or device
is refused. Every output is checked before the first VM starts.

Before measuring, a run does the quick host checks of `irqbench validate` (under 100 ms): they
are recorded as host.validation in the JSON, WARN and FAIL lines are printed above the table,
and a FAIL stops the run before it measures unless --force is given.

Exit status: 0 all phases measured; 1 a phase failed (guest fault, timeout, protocol
violation), the host failed validation, or the run could not start; 2 bad config or arguments (outputs included); 130
interrupted by SIGINT or SIGTERM, 129 by SIGHUP (partial results are still written and marked
\"partial\"); 141 stdout was a closed pipe.")]
    Run(RunArgs),
    /// Print the host manifest: CPU, kernel, KVM flavour, TSC, capabilities.
    #[command(after_help = "Example:\n  irqbench host")]
    Host {
        /// As JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check that this host behaves as its KVM flavour should: PASS, WARN or FAIL per check.
    #[command(after_help = cli::validate::AFTER_HELP)]
    Validate(cli::validate::ValidateArgs),
    /// Show the exact instructions of each strategy, decoded from the guest ELF.
    #[command(after_help = "Examples:
  irqbench disasm                 # every strategy
  irqbench disasm pvop-skip       # one strategy, with the pv-ops it calls")]
    Disasm {
        /// Strategy names (default: all).
        strategies: Vec<String>,
        /// Guest kernel ELF instead of the embedded one.
        #[arg(long, value_name = "FILE")]
        guest: Option<PathBuf>,
    },
    /// Compare two runs: old --> new per result, and whether it is beyond noise.
    #[command(after_help = "Examples:
  irqbench compare before.json after.json
  irqbench compare before.json after.json --markdown > mail.md
  irqbench compare main latest                # baseline `main` against the latest saved run
  irqbench compare 12 14                      # stored runs by id (irqbench history)

Each side is a results JSON file (an existing path, or one with a `/` or ending in .json), a
run id of the history database, `latest`, or a baseline name; `run:12` and `baseline:NAME`
say which explicitly.

A change is 'beyond noise' when the two runs' 95% CIs of the median (per-round paired
figures, order statistics) do not overlap and the change is at least --min-change. Files
written as irqbench-results/1 carry no CI: for them Welch's t-test at 99% on the medians
decides, and the output says so. Changes below
--min-change (default 5%) are never called beyond noise: back-to-back runs drift that much.")]
    Compare {
        old: String,
        new: String,
        #[command(flatten)]
        db: cli::history::DbArg,
        /// Markdown table instead of aligned text.
        #[arg(long)]
        markdown: bool,
        /// Never call a change below this many percent beyond noise (run-to-run drift floor).
        #[arg(
            long,
            value_name = "PCT",
            default_value_t = report::DEFAULT_MIN_CHANGE_PCT,
            value_parser = parse_min_change,
            allow_hyphen_values = true
        )]
        min_change: f64,
    },
    /// The saved runs, and each result row's median and CI across them.
    History(cli::history::HistoryArgs),
    /// Name a saved run as a baseline, list or remove baselines.
    Baseline(cli::history::BaselineArgs),
    /// Run a config and compare it with a baseline: exit 1 on a regression beyond noise.
    Check(cli::history::CheckArgs),
    /// Load results JSON files (irqbench-results/1 or /2) into the history database.
    Import(cli::history::ImportArgs),
    /// List strategies, instruction probes, interrupt sources and shipped configs.
    #[command(after_help = "Example:\n  irqbench list")]
    List,
    /// Print a shell completion script.
    #[command(
        after_help = "Example:\n  irqbench completions bash > /etc/bash_completion.d/irqbench"
    )]
    Completions { shell: clap_complete::Shell },
}

fn main() -> ExitCode {
    ignore_file_size_signal();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_exit(&e),
    };
    match cli.command {
        Command::Run(args) => cmd_run(args),
        Command::Host { json } => cli::inspect::cmd_host(json),
        Command::Validate(args) => cli::validate::cmd_validate(&args),
        Command::Disasm { strategies, guest } => {
            cli::inspect::cmd_disasm(&strategies, guest.as_deref())
        }
        Command::Compare {
            old,
            new,
            db,
            markdown,
            min_change,
        } => cli::history::cmd_compare(&old, &new, db.db.as_deref(), markdown, min_change),
        Command::History(args) => cli::history::cmd_history(args),
        Command::Baseline(args) => cli::history::cmd_baseline(args),
        Command::Check(args) => cli::history::cmd_check(args),
        Command::Import(args) => cli::history::cmd_import(args),
        Command::List => emit(&cli::inspect::list_text()),
        Command::Completions { shell } => {
            // Generated into memory: clap_complete panics when its writer fails.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "irqbench", &mut script);
            emit_bytes(&script)
        }
    }
}

/// A file-size limit (`ulimit -f`) must be a write error irqbench reports (EFBIG), as a full
/// disk is, not SIGXFSZ killing the run before its table is printed and its results saved.
fn ignore_file_size_signal() {
    // SAFETY: sets one signal's disposition to SIG_IGN before any other thread exists; no
    // handler runs, so nothing async-signal-unsafe can happen.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// What clap has to say instead of a command: `--help` and `--version` go to stdout through
/// [`emit`] (clap's own printing ignores a closed pipe or a full disk and exits 0), usage errors
/// to stderr with clap's status.
fn clap_exit(e: &clap::Error) -> ExitCode {
    let code = u8::try_from(e.exit_code()).unwrap_or(2);
    if e.use_stderr() {
        // As `warn`: a closed stderr leaves nothing to report to.
        let _ = e.print();
        return ExitCode::from(code);
    }
    let text = if std::io::stdout().is_terminal() {
        e.render().ansi().to_string()
    } else {
        e.render().to_string()
    };
    match emit(&text) {
        ExitCode::SUCCESS => ExitCode::from(code),
        failed => failed,
    }
}

/// A percentage a comparison can use: `nan` or a negative floor would call every change noise
/// or none, silently.
fn parse_min_change(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number"))?;
    if !v.is_finite() || !(0.0..=1000.0).contains(&v) {
        return Err(format!("`{s}` is outside 0..=1000 (percent)"));
    }
    Ok(v)
}

/// Messages go to stderr without `eprintln!`, which panics when stderr is a closed pipe or full.
fn warn(msg: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "irqbench: {msg}");
}

fn fail(code: u8, msg: impl std::fmt::Display) -> ExitCode {
    warn(msg);
    ExitCode::from(code)
}

/// An error with every `#[source]` below it, one per line.
fn chain(e: &dyn std::error::Error) -> String {
    irqbench::error_chain(e, "\n  caused by: ")
}

/// Prints a command's whole output; see [`stdout_status`].
fn emit(text: &str) -> ExitCode {
    emit_bytes(text.as_bytes())
}

fn emit_bytes(bytes: &[u8]) -> ExitCode {
    match write::print_stdout(bytes) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => stdout_status(&e),
    }
}

/// A closed pipe ends quietly with 141 (what a shell shows for SIGPIPE: `| head` is not an
/// error worth a message); any other failure (`> /dev/full`) is reported, status 1.
fn stdout_status(e: &std::io::Error) -> ExitCode {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        ExitCode::from(write::BROKEN_PIPE_STATUS)
    } else {
        fail(1, format!("cannot write to stdout: {e}"))
    }
}

fn load_image(guest: Option<&Path>) -> Result<GuestImage, ExitCode> {
    let image = match guest {
        Some(p) => GuestImage::from_file(p),
        None => GuestImage::embedded(),
    }
    .map_err(|e| fail(1, chain(&e)))?;
    if let Some(w) = image.symbol_warning() {
        warn(format!("warning: {w}"));
    }
    Ok(image)
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// A config file, or the name of a shipped config (see `irqbench list`). Default: the
    /// built-in quick config.
    config: Option<String>,
    /// Guest kernel ELF to boot instead of the embedded one.
    #[arg(long, value_name = "FILE")]
    guest: Option<PathBuf>,
    /// Write the results as JSON (and an SVG chart next to it); `-` for stdout.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write one CSV row per result; `-` for stdout.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Write a Markdown report (host manifest and tables) to paste into a mail; `-` for stdout.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Write every format into a new timestamped folder under DIR (never overwritten).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print nothing but errors (files are still written).
    #[arg(long, short)]
    quiet: bool,
    /// Also count KVM's exits by hardware reason from the kvm:kvm_exit/kvm_entry tracepoints
    /// (root, a mounted tracefs, VMX or SVM); the report says why when it cannot.
    #[arg(long)]
    trace_exits: bool,
    #[command(flatten)]
    save: cli::history::SaveArgs,
    /// Measure and report even when the quick host validation FAILs (its lines stay above
    /// the table and in the JSON's host.validation).
    #[arg(long)]
    force: bool,
}

/// The plan and the config text it came from (saved with the run).
fn load_plan(config: Option<&str>, limits: &Limits) -> Result<(Plan, String), ExitCode> {
    let Some(arg) = config else {
        let text = config::DEFAULT_CONFIG_TOML.to_owned();
        return Ok((config::default_plan(limits), text));
    };
    let path = Path::new(arg);
    if !path.exists() {
        if let Some((name, text)) = BUILTIN_CONFIGS.iter().find(|(n, _)| *n == arg) {
            return config::load_str(text, &format!("<shipped config {name}>"), limits)
                .map(|plan| (plan, text.to_string()))
                .map_err(|e| fail(2, e));
        }
        let names: Vec<&str> = BUILTIN_CONFIGS.iter().map(|(n, _)| *n).collect();
        return Err(fail(
            2,
            format!(
                "config `{arg}` is neither a file nor a shipped config; shipped: {}",
                names.join(", ")
            ),
        ));
    }
    // Bounded: `irqbench run /dev/zero` or a FIFO must not read without end or block.
    let text = irqbench::files::read::read_text_bounded(
        path,
        irqbench::files::read::MAX_CONFIG_BYTES,
        "config",
    )
    .map_err(|e| fail(2, chain(&e)))?;
    config::load_str(&text, &path.display().to_string(), limits)
        .map(|plan| (plan, text))
        .map_err(|e| fail(2, chain(&e)))
}

/// The run's file outputs, each checked before any VM starts.
#[derive(Debug, Default)]
struct Outputs {
    json: Option<OutputTarget>,
    svg: Option<OutputTarget>,
    csv: Option<OutputTarget>,
    markdown: Option<OutputTarget>,
}

impl Outputs {
    fn all(&self) -> Vec<&OutputTarget> {
        [&self.json, &self.svg, &self.csv, &self.markdown]
            .into_iter()
            .flatten()
            .collect()
    }

    fn uses_stdout(&self) -> bool {
        self.all().iter().any(|t| t.is_stdout())
    }
}

/// Every output path is checked up front (a typo must not cost a whole run): kind, folder,
/// duplicates, and overlap with the config or guest this run reads or the history database.
fn check_outputs(args: &RunArgs) -> Result<Outputs, OutputError> {
    let target = |what: &str, p: &Option<PathBuf>| p.as_deref().map(|p| OutputTarget::new(what, p));
    let json = target("--json", &args.json).transpose()?;
    let svg = json
        .as_ref()
        .and_then(|j| j.sibling("the chart beside --json", "svg"))
        .transpose()?;
    let outputs = Outputs {
        json,
        svg,
        csv: target("--csv", &args.csv).transpose()?,
        markdown: target("--markdown", &args.markdown).transpose()?,
    };
    let mut inputs: Vec<(&str, &Path)> = Vec::new();
    if let Some(c) = &args.config {
        inputs.push(("config", Path::new(c)));
    }
    if let Some(g) = &args.guest {
        inputs.push(("guest image", g));
    }
    write::check_distinct(&outputs.all(), &inputs)?;
    cli::history::not_over_history(&outputs.all(), args.save.db.as_deref())?;
    Ok(outputs)
}

/// Which signal stopped the run (0: none), for the exit status.
struct Signals {
    stop: Arc<AtomicBool>,
    which: Arc<AtomicUsize>,
}

/// SIGINT, SIGTERM and SIGHUP (a closed terminal or ssh session) stop the run cleanly so the
/// measured part is written; a second one exits at once.
fn install_signals() -> Signals {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let stop = Arc::new(AtomicBool::new(false));
    let which = Arc::new(AtomicUsize::new(0));
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        let _ =
            signal_hook::flag::register_conditional_shutdown(sig, exit_status(sig), stop.clone());
        let _ = signal_hook::flag::register_usize(sig, which.clone(), sig as usize);
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    Signals { stop, which }
}

/// SIGHUP gives 128 + 1 as a shell would; SIGINT and SIGTERM keep the documented 130.
fn exit_status(sig: i32) -> i32 {
    if sig == signal_hook::consts::SIGHUP {
        129
    } else {
        130
    }
}

fn progress_bar(quiet: bool, phases: usize) -> Option<indicatif::ProgressBar> {
    (!quiet && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(phases as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        // Shown only once the run has lasted a second: short runs stay quiet.
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        bar
    })
}

/// What a measured run needs, each part checked: KVM, the plan and its config text, the guest.
struct Prepared {
    kvm: kvm_ioctls::Kvm,
    plan: Plan,
    config_text: String,
    image: Arc<GuestImage>,
}

fn prepare(config: Option<&str>, guest: Option<&Path>) -> Result<Prepared, ExitCode> {
    // Config and guest errors come first, so both can be checked on a machine without KVM;
    // the vCPU limit is KVM's when it can be asked.
    let kvm = host::open_kvm();
    let limits = match &kvm {
        Ok(k) => Limits {
            max_vcpus: (k.get_max_vcpus() as u32).min(irqbench_abi::MAX_VCPUS),
        },
        Err(_) => Limits::default(),
    };
    let (plan, config_text) = load_plan(config, &limits)?;
    let image = Arc::new(load_image(guest)?);
    let kvm = kvm.map_err(|e| fail(1, chain(&e)))?;
    Ok(Prepared {
        kvm,
        plan,
        config_text,
        image,
    })
}

/// 130/129 for a run a signal stopped, 1 when a phase failed, else 0.
fn run_status(report: &RunReport, signals: &Signals) -> ExitCode {
    if report.partial {
        let sig = signals.which.load(Ordering::SeqCst) as i32;
        ExitCode::from(if sig == 0 {
            130
        } else {
            exit_status(sig) as u8
        })
    } else if !report.failures.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn cmd_run(args: RunArgs) -> ExitCode {
    let outputs = match check_outputs(&args) {
        Ok(o) => o,
        Err(e) => return fail(2, chain(&e)),
    };
    // The history database is checked with the outputs: a bad --db must not cost a run.
    let saver = match cli::history::Saver::prepare(&args.save) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let p = match prepare(args.config.as_deref(), args.guest.as_deref()) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let out_dir = match &args.out {
        Some(base) => match OutputDir::create(base, &p.plan.name) {
            Ok(d) => Some(d),
            Err(e) => return fail(2, chain(&e)),
        },
        None => None,
    };
    let signals = install_signals();
    let trace = args.trace_exits;
    let report = match measure(
        &p.kvm, &p.plan, &p.image, &signals, args.quiet, args.force, trace,
    ) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mut status = run_status(&report, &signals);
    if let Err(code) = write_outputs(&report, &outputs, out_dir.as_ref(), args.quiet) {
        status = code;
    }
    if let Some(s) = &saver {
        let meta = cli::history::run_meta(history::Origin::Run, &p.config_text, &p.image);
        s.save(&report, &meta, args.quiet);
    }
    for f in &report.failures {
        warn(format_args!("phase {} failed:\n{}", f.name, f.error));
    }
    if report.partial {
        warn(format_args!(
            "run stopped early ({}); results are marked partial",
            report.partial_reason.as_deref().unwrap_or("?")
        ));
    }
    // The table last: a closed stdout must not cost the files or the messages above.
    if !args.quiet && !outputs.uses_stdout() {
        if let Err(e) =
            write::print_stdout(format!("{}\n", report::render_table(&report)).as_bytes())
        {
            let code = stdout_status(&e);
            if status == ExitCode::SUCCESS {
                status = code;
            }
        }
    }
    status
}

/// Runs the plan with progress on stderr.
fn measure(
    kvm: &kvm_ioctls::Kvm,
    plan: &Plan,
    image: &Arc<GuestImage>,
    signals: &Signals,
    quiet: bool,
    force: bool,
    trace_exits: bool,
) -> Result<RunReport, ExitCode> {
    let options = RunOptions {
        stop: signals.stop.clone(),
        trace_exits,
    };
    let bar = progress_bar(quiet, plan.phases.len());
    let started = std::time::Instant::now();
    let mut bar_shown = false;
    if !quiet {
        warn(format_args!(
            "running `{}` ({} phases) from {}",
            plan.name,
            plan.phases.len(),
            plan.source
        ));
    }
    let mut progress = |i: usize, _n: usize, name: &str, step: &str| {
        if let Some(b) = &bar {
            if !bar_shown && started.elapsed() > std::time::Duration::from_secs(1) {
                b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                bar_shown = true;
            }
            b.set_position(i as u64);
            b.set_message(format!("{name}: {step}"));
        }
    };
    // The pipeline's stages: the report's manifest and preflight, the host validation, then
    // the measurement; the library's `run_plan` is the same without the validation.
    let result = measure::start_report(kvm, plan)
        .map_err(Stage::Measure)
        .and_then(|mut report| {
            validate::before_run(kvm, image, &mut report.host, force).map_err(Stage::Validate)?;
            measure::run_prepared(kvm, plan, image, report, &options, &mut progress)
                .map_err(Stage::Measure)
        });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    result.map_err(|e| match e {
        Stage::Validate(e) => fail(1, chain(&e)),
        // The config asks for what this host cannot give: fixed in the config, like any bad
        // config (exit 2), and named by its file.
        Stage::Measure(
            e @ (measure::RunError::HypercallRefused { .. }
            | measure::RunError::HypercallVendor { .. }),
        ) => fail(2, format!("{}: {}", plan.source, chain(&e))),
        Stage::Measure(e @ measure::RunError::TimerPeriod { .. }) => fail(2, chain(&e)),
        Stage::Measure(e) => fail(1, chain(&e)),
    })
}

/// Where the run pipeline stopped.
enum Stage {
    Validate(validate::Refusal),
    Measure(measure::RunError),
}

/// Every format rendered in memory, then written through [`OutputTarget`]; a failure is
/// reported and the remaining outputs are still written.
fn write_outputs(
    report: &RunReport,
    outputs: &Outputs,
    out_dir: Option<&OutputDir>,
    quiet: bool,
) -> Result<(), ExitCode> {
    let mut jobs: Vec<(OutputTarget, Result<String, String>)> = Vec::new();
    let mut failed = None;
    if let Some(t) = &outputs.json {
        jobs.push((t.clone(), render_json(report)));
    }
    if let Some(t) = &outputs.svg {
        jobs.push((t.clone(), report::render_svg(report)));
    }
    if let Some(t) = &outputs.csv {
        jobs.push((t.clone(), Ok(report::render_csv(report))));
    }
    if let Some(t) = &outputs.markdown {
        jobs.push((t.clone(), Ok(report::render_markdown(report))));
    }
    if let Some(d) = out_dir {
        for (path, text) in d.files(report) {
            match OutputTarget::new("a file in --out", &path) {
                Ok(t) => jobs.push((t, text)),
                Err(e) => failed = Some(fail(1, chain(&e))),
            }
        }
    }
    for (target, text) in jobs {
        if let Err(code) = write_one(&target, text, quiet) {
            failed = Some(code);
        }
    }
    match failed {
        Some(code) => Err(code),
        None => Ok(()),
    }
}

fn write_one(
    target: &OutputTarget,
    text: Result<String, String>,
    quiet: bool,
) -> Result<(), ExitCode> {
    let text = text.map_err(|why| fail(1, format!("cannot render {}: {why}", target.what())))?;
    match target.write(text.as_bytes()) {
        Ok(()) => {
            if !quiet {
                warn(format_args!(
                    "wrote {} {}",
                    target.what(),
                    target.describe()
                ));
            }
            Ok(())
        }
        Err(e) if e.is_broken_pipe() => Err(ExitCode::from(write::BROKEN_PIPE_STATUS)),
        Err(e) => Err(fail(1, chain(&e))),
    }
}

/// Pretty JSON with a trailing newline.
fn render_json(report: &RunReport) -> Result<String, String> {
    report::to_json(report).map_err(|e| e.to_string())
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
