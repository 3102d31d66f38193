//! `run --trace-exits` around each group: KVM's exits of its vCPU threads from tracefs
//! ([`crate::host::trace`]), into `RunReport::exit_trace`. Where tracing is impossible, or
//! traced nothing, the report says why instead of showing an empty breakdown.

use crate::config::plan::PhasePlan;
use crate::host::trace::{self, ExitTracer};
use crate::machine::image::GuestImage;
use crate::results::warning::{Warning, WarningKind};
use crate::results::{ExitTrace, RunReport};

/// Says why, when no event fired (PVM's exits never pass through the tracepoints).
const NOTHING_FIRED: &str = "--trace-exits: tracefs is usable but kvm:kvm_exit never fired for \
     the vCPU threads: this host's KVM does not exit through the tracepoints (PVM runs its \
     guests without VMX/SVM exits), so there is no in-kernel breakdown";

/// Starts tracing the group about to run, unless tracing already proved impossible.
pub(super) fn start(report: &mut RunReport, wanted: bool) -> Option<ExitTracer> {
    if !wanted {
        return None;
    }
    let trace = report.exit_trace.get_or_insert_with(|| ExitTrace {
        available: true,
        ..Default::default()
    });
    if !trace.available {
        return None;
    }
    match ExitTracer::start(&trace::vcpu_tids(), report.host.tsc_khz) {
        Ok(t) => Some(t),
        Err(e) => {
            let why = format!(
                "--trace-exits unavailable: {}",
                crate::error_chain(&e, ": ")
            );
            trace.available = false;
            trace.note.clone_from(&why);
            report
                .warnings
                .push(Warning::run(WarningKind::ExitTrace, why));
            None
        }
    }
}

/// Adds the group's traced exits, its interrupt-window exits by the site of `rows`' code they
/// left.
pub(super) fn finish(
    report: &mut RunReport,
    tracer: Option<ExitTracer>,
    group: &str,
    image: &GuestImage,
    rows: &[&PhasePlan],
) {
    let (Some(tracer), Some(trace)) = (tracer, report.exit_trace.as_mut()) else {
        return;
    };
    match tracer.finish() {
        Ok(counts) => {
            if counts.overrun > 0 || counts.truncated {
                let figures = format!(
                    "--trace-exits, group {group}: {} events overwritten in the ring buffer{}: \
                     its traced counts are short",
                    counts.overrun,
                    if counts.truncated {
                        ", trace cut at its read limit"
                    } else {
                        ""
                    }
                );
                report
                    .warnings
                    .push(Warning::run(WarningKind::ExitTrace, figures));
            }
            if !counts.exits.is_empty() {
                trace.groups.insert(group.to_string(), counts.exits);
            }
            let sites =
                super::attribution::attribute_traced_windows(image, &counts.window_rips, rows);
            if !sites.is_empty() {
                trace.window_sites.insert(group.to_string(), sites);
            }
        }
        Err(e) => report.warnings.push(Warning::run(
            WarningKind::ExitTrace,
            format!(
                "--trace-exits, group {group}: {}",
                crate::error_chain(&e, ": ")
            ),
        )),
    }
}

/// After the last group: a trace that found nothing says so.
pub(super) fn close(report: &mut RunReport) {
    let Some(trace) = report.exit_trace.as_mut() else {
        return;
    };
    if trace.available && trace.groups.is_empty() {
        trace.available = false;
        trace.note = NOTHING_FIRED.into();
        report
            .warnings
            .push(Warning::run(WarningKind::ExitTrace, NOTHING_FIRED.into()));
    } else if trace.available {
        trace.note = "kvm:kvm_exit paired with the same vCPU thread's next kvm:kvm_entry (as \
                      perf kvm stat pairs them), per group, all its rows and the baseline \
                      together"
            .into();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::config::plan::{IrqSource, Plan, StrategyId, Workload};
    use crate::machine::image::GuestImage;
    use crate::measure::run_plan;
    use crate::session::RunOptions;

    /// Set to 1 (in the SVM/VMX box) to make the trace test fail instead of skip when tracefs
    /// gives no exits.
    const REQUIRE_TRACE_VAR: &str = "IRQBENCH_REQUIRE_TRACE";

    #[test]
    fn trace_exits_counts_kvm_exits_or_says_why_not() {
        let Some(kvm) = crate::host::test_kvm() else {
            return;
        };
        let mut plan = Plan::single(Workload::Doorbells, 1, 1);
        plan.max_seconds = 0.5;
        plan.min_rounds = crate::config::plan::defaults::MIN_ROUNDS;
        plan.phase_timeout_ms = Some(60_000);
        let row = &mut plan.phases[0];
        row.workload = Workload::Strategy {
            strategy: StrategyId::from_name("native-popf").expect("native-popf"),
        };
        row.irq = IrqSource::Inject { rate_hz: 5000.0 };
        row.block_ops = None;
        let image = Arc::new(GuestImage::embedded().expect("embedded guest"));
        let options = RunOptions {
            trace_exits: true,
            ..Default::default()
        };
        let report = run_plan(&kvm, &plan, &image, &options, &mut |_, _, _, _| {}).expect("run");
        let trace = report.exit_trace.as_ref().expect("asked for a trace");
        let required = std::env::var(REQUIRE_TRACE_VAR).is_ok_and(|v| v == "1");
        if !trace.available {
            // Never an empty breakdown without a word: the note says why, and so do the warnings.
            assert!(trace.groups.is_empty(), "{trace:?}");
            assert!(trace.note.starts_with("--trace-exits"), "{trace:?}");
            assert!(
                report.warnings.iter().any(|w| w.figures == trace.note),
                "{:?}",
                report.warnings
            );
            assert!(
                !required,
                "{REQUIRE_TRACE_VAR}=1 but no exits were traced: {}",
                trace.note
            );
            println!("skipping the trace counts: {}", trace.note);
            return;
        }
        let exits = &trace.groups[&plan.phases[0].group.to_string()];
        for e in exits {
            println!("{e:?}");
        }
        let total: u64 = exits.iter().map(|e| e.total).sum();
        assert!(total > 0, "{trace:?}");
        // Every exit but a thread's last one pairs with an entry.
        assert!(exits.iter().any(|e| e.time_ns.is_some()), "{exits:?}");
        // Every interrupt-window exit traced is attributed to a site, and under a 5 kHz load
        // some are native-popf's own (its restore lets the pending interrupts in).
        let windows: u64 = exits
            .iter()
            .filter(|e| crate::host::trace::WINDOW_EXIT_REASONS.contains(&e.reason.as_str()))
            .map(|e| e.total)
            .sum();
        let sites = trace
            .window_sites
            .get(&plan.phases[0].group.to_string())
            .cloned()
            .unwrap_or_default();
        for s in &sites {
            println!("window site: {s:?}");
        }
        assert!(
            windows > 0,
            "no window exit under a 5 kHz inject load: {exits:?}"
        );
        assert_eq!(
            sites.iter().map(|s| s.total).sum::<u64>(),
            windows,
            "{sites:?}"
        );
        assert!(
            sites.iter().any(|s| s.strategy == "native-popf"),
            "{sites:?}"
        );
    }
}
