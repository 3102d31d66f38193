//! The `irqbench` command line.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::{CommandFactory, Parser, Subcommand};
use irqbench::config::{self, Limits};
use irqbench::guest_image::GuestImage;
use irqbench::measure;
use irqbench::plan::{InsnId, IrqSource, Plan, StrategyId};
use irqbench::report::{self, OutputDir};
use irqbench::results::RunReport;
use irqbench::session::RunOptions;
use irqbench::{decode, host};

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
  irqbench host                             # CPU, kernel, KVM flavour (vmx/svm/pvm), TSC
  irqbench disasm native-skip               # the exact instructions of a strategy
  irqbench list                             # strategies, instructions, irq sources, configs"
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
  irqbench run configs/strategies.toml           # all seven strategies, nesting 0 and 0.5
  irqbench run pv-restore-skip --out results     # results/pv-restore-skip-<UTC time>/...
  irqbench run epoll-irqsave-vs-irq --markdown mail.md
  irqbench run my.toml --guest ./my-guest.elf    # another guest payload

Exit status: 0 all phases measured; 1 a phase failed (guest fault, timeout, protocol
violation) or the run could not start; 2 bad config or arguments; 130 interrupted (partial
results are still written and marked \"partial\").")]
    Run(RunArgs),
    /// Print the host manifest: CPU, kernel, KVM flavour, TSC, capabilities.
    #[command(after_help = "Example:\n  irqbench host")]
    Host {
        /// As JSON instead of text.
        #[arg(long)]
        json: bool,
    },
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
    /// Compare two result files: old --> new per result, and whether it is beyond noise.
    #[command(after_help = "Examples:
  irqbench compare before.json after.json
  irqbench compare before.json after.json --markdown > mail.md

A change is 'beyond noise' when Welch's t-test on the two medians rejects 'no change' at 99%:
each run's median uncertainty comes from its repeats (1.25 sigma/sqrt(n); each cycles/op repeat
subtracts its own paired baseline run); exits/op are judged as Poisson counts. With one repeat nothing is claimed, and with three the
test is deliberately strict: use more repeats to resolve small changes. Changes below
--min-change (default 5%) are never called beyond noise: back-to-back runs drift that much.")]
    Compare {
        old: PathBuf,
        new: PathBuf,
        /// Markdown table instead of aligned text.
        #[arg(long)]
        markdown: bool,
        /// Never call a change below this many percent beyond noise (run-to-run drift floor).
        #[arg(long, value_name = "PCT", default_value_t = report::DEFAULT_MIN_CHANGE_PCT)]
        min_change: f64,
    },
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
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => cmd_run(args),
        Command::Host { json } => cmd_host(json),
        Command::Disasm { strategies, guest } => cmd_disasm(&strategies, guest.as_deref()),
        Command::Compare {
            old,
            new,
            markdown,
            min_change,
        } => cmd_compare(&old, &new, markdown, min_change),
        Command::List => {
            cmd_list();
            ExitCode::SUCCESS
        }
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "irqbench",
                &mut std::io::stdout(),
            );
            ExitCode::SUCCESS
        }
    }
}

fn fail(code: u8, msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("irqbench: {msg}");
    ExitCode::from(code)
}

/// An error with every `#[source]` below it, one per line.
fn chain(e: &dyn std::error::Error) -> String {
    irqbench::error_chain(e, "\n  caused by: ")
}

fn load_image(guest: Option<&Path>) -> Result<GuestImage, ExitCode> {
    match guest {
        Some(p) => GuestImage::from_file(p),
        None => GuestImage::embedded(),
    }
    .map_err(|e| fail(1, chain(&e)))
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// A config file, or the name of a shipped config (see `irqbench list`). Default: the
    /// built-in quick config.
    config: Option<String>,
    /// Guest kernel ELF to boot instead of the embedded one.
    #[arg(long, value_name = "FILE")]
    guest: Option<PathBuf>,
    /// Write the results as JSON (and an SVG chart next to it).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write one CSV row per result.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Write a Markdown report (host manifest and tables) to paste into a mail.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Write every format into a new timestamped folder under DIR (never overwritten).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print nothing but errors (files are still written).
    #[arg(long, short)]
    quiet: bool,
}

fn load_plan(config: Option<&str>, limits: &Limits) -> Result<Plan, ExitCode> {
    let Some(arg) = config else {
        return Ok(config::default_plan(limits));
    };
    let path = Path::new(arg);
    if !path.exists() {
        if let Some((name, text)) = BUILTIN_CONFIGS.iter().find(|(n, _)| *n == arg) {
            return config::load_str(text, &format!("<shipped config {name}>"), limits)
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
    config::load_file(path, limits).map_err(|e| fail(2, chain(&e)))
}

fn cmd_run(args: RunArgs) -> ExitCode {
    // Config and guest errors come first, so both can be checked on a machine without KVM;
    // the vCPU limit is KVM's when it can be asked.
    let kvm = host::open_kvm();
    let limits = match &kvm {
        Ok(k) => Limits {
            max_vcpus: (k.get_max_vcpus() as u32).min(irqbench_abi::MAX_VCPUS),
        },
        Err(_) => Limits::default(),
    };
    let plan = match load_plan(args.config.as_deref(), &limits) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let image = match load_image(args.guest.as_deref()) {
        Ok(i) => Arc::new(i),
        Err(code) => return code,
    };
    let kvm = match kvm {
        Ok(k) => k,
        Err(e) => return fail(1, chain(&e)),
    };
    let out_dir = match &args.out {
        Some(base) => match OutputDir::create(base, &plan.name) {
            Ok(d) => Some(d),
            Err(e) => return fail(1, chain(&e)),
        },
        None => None,
    };

    // Ctrl-C / SIGTERM: stop cleanly and write what was measured; a second Ctrl-C exits at once.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone());
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    let options = RunOptions { stop: stop.clone() };
    let bar = (!args.quiet && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(plan.phases.len() as u64);
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
    });
    let started = std::time::Instant::now();
    let mut bar_shown = false;
    if !args.quiet {
        eprintln!(
            "irqbench: running `{}` ({} phases) from {}",
            plan.name,
            plan.phases.len(),
            plan.source
        );
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
    let result = measure::run_plan(&kvm, &plan, &image, &options, &mut progress);
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let report = match result {
        Ok(r) => r,
        Err(e) => return fail(1, chain(&e)),
    };
    let mut status = if report.partial {
        ExitCode::from(130)
    } else if !report.failures.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    };
    if let Err(code) = write_outputs(&report, &args, out_dir.as_ref()) {
        status = code;
    }
    if !args.quiet {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{}", report::render_table(&report));
    }
    for f in &report.failures {
        eprintln!("irqbench: phase {} failed:\n{}", f.name, f.error);
    }
    if report.partial {
        eprintln!(
            "irqbench: run stopped early ({}); results are marked partial",
            report.partial_reason.as_deref().unwrap_or("?")
        );
    }
    status
}

fn write_outputs(
    report: &RunReport,
    args: &RunArgs,
    out_dir: Option<&OutputDir>,
) -> Result<(), ExitCode> {
    let mut failed = None;
    let mut note = |what: &str, path: &Path, r: Result<(), report::ReportError>| match r {
        Ok(()) => {
            if !args.quiet {
                eprintln!("irqbench: wrote {what} {}", path.display());
            }
        }
        Err(e) => failed = Some(fail(1, chain(&e))),
    };
    if let Some(p) = &args.json {
        note("JSON", p, report::write_json(report, p));
        let svg = p.with_extension("svg");
        note("chart", &svg, report::write_svg(report, &svg));
    }
    if let Some(p) = &args.csv {
        note("CSV", p, report::write_csv(report, p));
    }
    if let Some(p) = &args.markdown {
        note("Markdown", p, report::write_markdown(report, p));
    }
    if let Some(d) = out_dir {
        note("results to", d.path(), d.write_all(report));
    }
    match failed {
        Some(code) => Err(code),
        None => Ok(()),
    }
}

fn cmd_host(json: bool) -> ExitCode {
    let kvm = match host::open_kvm() {
        Ok(k) => k,
        Err(e) => return fail(1, chain(&e)),
    };
    match host::manifest(&kvm) {
        Ok(m) if json => {
            println!(
                "{}",
                serde_json::to_string_pretty(&m).unwrap_or_else(|e| e.to_string())
            );
            ExitCode::SUCCESS
        }
        Ok(m) => {
            println!("{}", host::format_manifest(&m));
            ExitCode::SUCCESS
        }
        Err(e) => fail(1, chain(&e)),
    }
}

/// The pv-op implementations a strategy reaches through its indirect calls.
fn pv_targets(strategy: StrategyId) -> &'static [&'static str] {
    match strategy.name() {
        "pvop-popf" => &[
            "irqbench_pv_save_fl",
            "irqbench_pv_irq_disable",
            "irqbench_pv_restore_fl",
        ],
        "pvop-skip" => &[
            "irqbench_pv_save_fl",
            "irqbench_pv_irq_disable",
            "irqbench_pv_irq_enable",
        ],
        "vif-restore" | "vif-skip" => &["irqbench_hypercall"],
        _ => &[],
    }
}

fn cmd_disasm(names: &[String], guest: Option<&Path>) -> ExitCode {
    let image = match load_image(guest) {
        Ok(i) => i,
        Err(code) => return code,
    };
    let mut strategies = Vec::new();
    if names.is_empty() {
        strategies.extend(StrategyId::all());
    }
    for n in names {
        match StrategyId::from_name(n) {
            Some(s) => strategies.push(s),
            None => {
                let valid: Vec<&str> = StrategyId::all().map(StrategyId::name).collect();
                return fail(
                    2,
                    format!("unknown strategy `{n}`; valid: {}", valid.join(", ")),
                );
            }
        }
    }
    for s in strategies {
        println!("{} — {}", s.name(), s.describe());
        let mut functions = vec![s.symbol()];
        functions.extend(pv_targets(s).iter().map(|t| t.to_string()));
        for f in functions {
            let Some((addr, code)) = image.function_code(&f) else {
                println!("  <{f}>: not found in {}", image.source);
                continue;
            };
            println!("  <{f}>:");
            for insn in decode::decode_all(code, addr) {
                // Site labels of this function only (the previous one's `_end` shares an address).
                let label = image
                    .symbols
                    .iter()
                    .find(|sym| sym.addr == insn.addr && sym.name != f && sym.name.starts_with(&f))
                    .map(|sym| format!("  <{}>", sym.name))
                    .unwrap_or_default();
                println!(
                    "    {:#x}: {:<24} {}{label}",
                    insn.addr,
                    decode::hex(&insn.bytes),
                    insn.text
                );
            }
        }
        println!();
    }
    ExitCode::SUCCESS
}

fn cmd_compare(old: &Path, new: &Path, markdown: bool, min_change: f64) -> ExitCode {
    let a = match report::read_json(old) {
        Ok(r) => r,
        Err(e) => return fail(2, chain(&e)),
    };
    let b = match report::read_json(new) {
        Ok(r) => r,
        Err(e) => return fail(2, chain(&e)),
    };
    let c = report::compare_with(&a, &b, min_change);
    print!("{}", report::render_compare(&c, markdown));
    ExitCode::SUCCESS
}

fn cmd_list() {
    println!("strategies (bench kind \"strategy\" or \"lock\"):");
    for s in StrategyId::all() {
        println!("  {:<16} {}", s.name(), s.describe());
    }
    println!("\ninstruction probes (bench kind \"insn\"):");
    for i in InsnId::all() {
        println!(
            "  {:<16} {} (x{} per iteration)",
            i.name(),
            i.describe(),
            i.unroll()
        );
    }
    println!("\ninterrupt sources (bench key irq = [{{ source = ... }}]):");
    let sources = [
        (IrqSource::None, "no interrupt load"),
        (
            IrqSource::LapicTimer { period_us: 100.0 },
            "in-kernel irqchip; the guest's LAPIC timer every period_us",
        ),
        (
            IrqSource::Inject { rate_hz: 1000.0 },
            "userspace irqchip; the VMM injects with KVM_INTERRUPT rate_hz times/s",
        ),
        (
            IrqSource::PvEvent { rate_hz: 1000.0 },
            "the VMM sets the virtual-IF pending byte rate_hz times/s (vif-*)",
        ),
    ];
    for (s, what) in sources {
        println!("  {:<16} {what}", s.name());
    }
    println!("\nshipped configs (irqbench run NAME, or configs/NAME.toml):");
    for (name, text) in BUILTIN_CONFIGS {
        // Every shipped config opens with "# <name> — <the question it answers>".
        let question = text
            .lines()
            .next()
            .and_then(|l| l.split_once(" — "))
            .map(|(_, q)| q.trim())
            .unwrap_or("");
        println!("  {name:<22} {question}");
    }
}
