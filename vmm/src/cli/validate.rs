//! `irqbench validate`: the command-line side of `irqbench::validate`.

use std::process::ExitCode;
use std::sync::Arc;

use irqbench::{host, validate};

use crate::{chain, emit, fail, load_image};

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

Exit status: 0 every check PASS or WARN; 1 a check FAILed; 2 the suite could not run (no
KVM, bad arguments); 141 stdout was a closed pipe.";

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// The checks and the host manifest as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_validate(args: &ValidateArgs) -> ExitCode {
    let kvm = match host::open_kvm() {
        Ok(k) => k,
        Err(e) => return fail(2, chain(&e)),
    };
    let mut manifest = match host::manifest(&kvm) {
        Ok(m) => m,
        Err(e) => return fail(2, chain(&e)),
    };
    let image = match load_image(None) {
        Ok(i) => Arc::new(i),
        Err(_) => return ExitCode::from(2),
    };
    let v = validate::run(&kvm, &image, &mut manifest, irqbench::results::Scope::Full);
    let verdict = v.verdict;
    let text = if args.json {
        let doc = serde_json::json!({ "validation": v, "host": manifest });
        match serde_json::to_string_pretty(&doc) {
            Ok(t) => format!("{t}\n"),
            Err(e) => return fail(2, format!("cannot encode the validation: {e}")),
        }
    } else {
        validate::render(&v)
    };
    let printed = emit(&text);
    if printed != ExitCode::SUCCESS {
        return printed;
    }
    if verdict == irqbench::results::Verdict::Fail {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
