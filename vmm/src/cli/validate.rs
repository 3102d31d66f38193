//! `irqbench validate`: the command-line side of `irqbench::validate`.

use std::sync::Arc;

use irqbench::{host, validate};

use super::config::load_image;
use super::error::{CliError, Status};
use super::output::{emit, emit_json};
use super::signals::{arrived, install_signals};

pub const AFTER_HELP: &str = "Examples:
  irqbench validate                  # every check, expected against measured
  irqbench validate --json | jq '.validation.checks[] | select(.verdict != \"pass\")'

Each check boots a small guest (or reads the host's files) and compares what it measures
with what this host's KVM flavour (vmx, svm or pvm) must do by the KVM documentation and
source; docs/VALIDATE.md lists every expectation with its citation. The checks:
  flavour                  the declared flavour agrees with CPL0 `cli` (emulated or not)
  accounting.doorbells     K doorbells give K userspace exits
  accounting.hypercalls    hypercalls the VMM handled = hypercalls the guest issued
  tsc.invariant            the host TSC is invariant (CPUID 80000007h EDX[8])
  tsc.rate                 guest TSC over CLOCK_MONOTONIC = KVM_GET_TSC_KHZ within 0.1%
  tsc.vcpus                the vCPUs' TSCs agree
  exits.cpuid              CPUID counts in the `exits` stat as the flavour does it
  exits.flag-insns         cli, sti, popf with nothing pending: no exits (PVM: per batch)
  exits.irq-window         sti with an injected interrupt pending: an IRQ-window exit
  exits.hlt                HLT exits to userspace with the userspace irqchip
  irq.lapic-timer-1v/-2v   the LAPIC timer delivers its rate within 10%
  irq.inject               the guest takes the interrupts the host raised
  noise.*                  load, steal time over 1 s, frequency governor/boost, SMT siblings
  attribution.exit-site    a known exit's RIP resolves to its symbol and instruction

Verdicts:
  PASS  the host does what its flavour should
  WARN  it does not, but the reason is known and explained (e.g. PVM opens interrupt
        windows late, so injected interrupts merge), or host noise, or a host too busy to
        measure: numbers stay valid, read them with the note in mind
  FAIL  it does not, and numbers measured here would mislead; `irqbench run` refuses to
        report after a FAIL of its quick checks unless given --force

Exit status: 0 every check PASS or WARN; 1 a check FAILed, or the suite could not run (no
KVM); 2 bad arguments; 130 stopped by SIGINT or SIGTERM, 129 by SIGHUP (no verdict); 141
stdout was a closed pipe.";

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// The checks and the host manifest as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Print nothing but errors and the checks (there is nothing else to leave out).
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn cmd_validate(args: &ValidateArgs) -> Result<Status, CliError> {
    // A stop signal ends the guest boots of the checks still to come; their FAILs would be
    // the signal's, not the host's, so no verdict is printed. Installed first: from here on a
    // signal is this command's to answer.
    let stop = install_signals();
    let kvm = host::open_kvm()?;
    let mut manifest = host::manifest(&kvm)?;
    let image = Arc::new(load_image(None)?);
    let v = validate::run(
        &kvm,
        &image,
        &mut manifest,
        irqbench::results::Scope::Full,
        &stop,
    );
    if let Some((signal, status)) = arrived(&stop) {
        super::error::warn(format!(
            "{signal}: the validation stopped before its last check; no verdict"
        ));
        return Ok(status);
    }
    let verdict = v.verdict;
    let printed = if args.json {
        let doc = serde_json::json!({ "validation": v, "host": manifest });
        let t = serde_json::to_string_pretty(&doc)
            .map_err(|e| CliError::Failed(format!("cannot encode the validation: {e}")))?;
        emit_json(&format!("{t}\n"))?
    } else {
        emit(&irqbench::report::wrap(
            &validate::render(&v),
            irqbench::report::text_width(),
        ))?
    };
    Ok(if verdict == irqbench::results::Verdict::Fail {
        printed.and(Status::Failed)
    } else {
        printed
    })
}
