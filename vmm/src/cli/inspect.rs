//! The commands that look at the host and the guest rather than measure: `host`, `disasm` and
//! `list`.

use std::path::Path;
use std::sync::Arc;

use irqbench::config::plan::{InsnId, StrategyId};
use irqbench::machine::decode;
use irqbench::machine::image::GuestImage;
use irqbench::{host, validate};

use super::config::{load_image, BUILTIN_CONFIGS};
use super::error::{CliError, Status};
use super::output::{emit, emit_json};

/// How much of the kernel command line `irqbench host` shows without `--verbose`.
const CMDLINE_SHOWN: usize = 120;

/// The start of a long command line, saying how long it is and how to see all of it.
fn shorten_cmdline(cmdline: &str) -> String {
    let n = cmdline.chars().count();
    if n <= CMDLINE_SHOWN {
        return cmdline.to_string();
    }
    let start: String = cmdline.chars().take(CMDLINE_SHOWN).collect();
    format!("{}… ({n} chars, --verbose for all)", start.trim_end())
}

pub(crate) fn cmd_host(json: bool, verbose: bool) -> Result<Status, CliError> {
    // Installed first, as every command that boots a guest does: a stop signal ends the
    // flavour probe's boot wait, and its status is 130/129 as theirs, not a kill's 143.
    let stop = super::signals::install_signals();
    let kvm = host::open_kvm()?;
    let mut m = host::manifest(&kvm)?;
    // The declared flavour is confirmed by a guest's behaviour (a few milliseconds).
    if let Ok(image) = GuestImage::embedded() {
        validate::probe_flavour(&kvm, &Arc::new(image), &mut m, &stop);
    }
    // A probe the signal cut short would print "flavour behaviour: unavailable" for the
    // signal's sake, not the host's: nothing is printed.
    if let Some((signal, status)) = super::signals::arrived(&stop) {
        super::error::warn(format_args!(
            "{signal}: stopped before the manifest was complete; nothing printed"
        ));
        return Ok(status);
    }
    if json {
        let text = serde_json::to_string_pretty(&m)
            .map_err(|e| CliError::Failed(format!("cannot encode the host manifest: {e}")))?;
        emit_json(&format!("{text}\n"))
    } else {
        if !verbose {
            if let irqbench::results::Readable::Value(c) = &mut m.kernel_cmdline {
                *c = shorten_cmdline(c);
            }
        }
        // The command line, model names and sysfs text come from outside: shown, never sent.
        let text = host::format_manifest(&m);
        let text = irqbench::report::wrap(
            &irqbench::text::escape(&text),
            irqbench::report::text_width(),
        );
        emit(&format!("{text}\n"))
    }
}

pub(crate) fn cmd_disasm(names: &[String], guest: Option<&Path>) -> Result<Status, CliError> {
    let image = load_image(guest)?;
    let mut strategies = Vec::new();
    if names.is_empty() {
        strategies.extend(StrategyId::all());
    }
    for n in names {
        let Some(s) = StrategyId::from_name(n) else {
            let valid: Vec<&str> = StrategyId::all().map(StrategyId::name).collect();
            return Err(CliError::Usage(format!(
                "unknown strategy `{}`; valid: {}",
                n.escape_debug(),
                valid.join(", ")
            )));
        };
        strategies.push(s);
    }
    let mut out = String::new();
    for s in strategies {
        disasm_strategy(&mut out, &image, s);
    }
    // Symbol names and the guest's path come from the ELF and the command line: shown, never
    // sent. Long lines (a long symbol, a wide instruction) wrap to the terminal as every
    // command's text does.
    let out = irqbench::report::wrap(
        &irqbench::text::escape(&out),
        irqbench::report::text_width(),
    );
    emit(&out)
}

fn disasm_strategy(out: &mut String, image: &GuestImage, s: StrategyId) {
    use std::fmt::Write as _;
    let _ = writeln!(out, "{} — {}", s.name(), s.describe());
    // The operation, what it calls, then the loop a row's blocks run it in (no nesting, no
    // body): the instructions a block's time is made of.
    let mut functions = vec![s.symbol()];
    functions.extend(s.calls().iter().map(|t| t.to_string()));
    functions.push(s.flat_loop_symbol());
    for f in functions {
        let Some((addr, code)) = image.function_code(&f) else {
            let _ = writeln!(
                out,
                "  <{f}>: not found in {}",
                irqbench::text::escape_line(&image.source)
            );
            continue;
        };
        let _ = writeln!(out, "  <{f}>:");
        for insn in decode::decode_all(code, addr) {
            // Site labels of this function only (the previous one's `_end` shares an address),
            // and in a loop its inlined copies' sites (the most specific of those sharing one).
            let own = |name: &str| {
                name != f
                    && (name.starts_with(&f)
                        || irqbench::identity::strategy_symbol_rest(name).is_some()
                            && !name.ends_with("_end"))
            };
            let label = image
                .symbols
                .iter()
                .filter(|sym| sym.addr == insn.addr && own(&sym.name))
                .max_by(|a, b| a.name.cmp(&b.name))
                .map(|sym| format!("  <{}>", irqbench::text::escape_line(&sym.name)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "    {:#x}: {:<24} {}{label}",
                insn.addr,
                decode::hex(&insn.bytes),
                insn.text
            );
        }
    }
    out.push('\n');
}

pub(crate) fn list_text() -> String {
    use std::fmt::Write as _;
    let mut out = String::from("strategies (bench kind \"strategy\" or \"lock\"):\n");
    for s in StrategyId::all() {
        let _ = writeln!(out, "  {:<16} {}", s.name(), s.describe());
    }
    out.push_str("\ninstruction probes (bench kind \"insn\"):\n");
    for i in InsnId::all() {
        let _ = writeln!(
            out,
            "  {:<16} {} (x{} per iteration)",
            i.name(),
            i.describe(),
            i.unroll()
        );
    }
    out.push_str("\ninterrupt sources (bench key irq = [{ source = ... }]):\n");
    for s in irqbench_abi::irq::SOURCES {
        let _ = writeln!(out, "  {:<16} {}", s.name, s.describe);
    }
    out.push_str("\nshipped configs (irqbench run NAME, or configs/NAME.toml):\n");
    for (name, text) in BUILTIN_CONFIGS {
        // Every shipped config opens with "# <name> — <the question it answers>".
        let question = text
            .lines()
            .next()
            .and_then(|l| l.split_once(" — "))
            .map(|(_, q)| q.trim())
            .unwrap_or("");
        let _ = writeln!(out, "  {name:<22} {question}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_command_line_is_cut_and_says_how_long_it_was() {
        let long = "root=/dev/vda ".repeat(40);
        let short = shorten_cmdline(&long);
        assert!(short.chars().count() < CMDLINE_SHOWN + 40, "{short}");
        assert!(short.ends_with(&format!("… ({} chars, --verbose for all)", long.len())));
        assert!(long.starts_with(short.split('…').next().unwrap()));
        assert_eq!(shorten_cmdline("quiet ro"), "quiet ro");
        let wide = "é".repeat(CMDLINE_SHOWN + 1);
        assert!(shorten_cmdline(&wide).contains("(121 chars"));
    }
}
