//! A run's progress on stderr. On a terminal: a bar over the groups with the current group's
//! rounds, the precision it has reached and an ETA from `run.max_seconds`. Without one: a line
//! per finished group. Both are updated only when the measuring calls back, between dispatches
//! on the main thread: nothing redraws or polls while the vCPUs run a round.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use irqbench::session::Step;

use super::error::warn;

/// What the progress display knows of the plan.
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
    /// Lines per finished group (stderr is not a terminal).
    lines: bool,
    started: Instant,
    bar_shown: bool,
    /// The plan's `run.max_seconds` and `run.precision`.
    max_seconds: f64,
    precision: f64,
    /// When the current group booted or started (its budget counts from there).
    group_started: Instant,
}

impl Progress {
    /// Nothing at all under `quiet`.
    pub fn new(quiet: bool, groups: usize, max_seconds: f64, precision: f64) -> Progress {
        let terminal = !quiet && std::io::stderr().is_terminal();
        Progress {
            bar: terminal.then(|| bar(groups)),
            lines: !quiet && !terminal,
            started: Instant::now(),
            bar_shown: false,
            max_seconds,
            precision,
            group_started: Instant::now(),
        }
    }

    /// The bar, for messages that must print above it.
    pub fn bar(&self) -> Option<indicatif::ProgressBar> {
        self.bar.clone()
    }

    /// One step of group `i` of `n`.
    pub fn step(&mut self, i: usize, n: usize, group: &str, step: &Step) {
        // The group's budget starts at Start; a boot before it restarts the clock too, so a
        // slow boot does not count against the previous group's start.
        if matches!(step, Step::Boot | Step::Start) {
            self.group_started = Instant::now();
        }
        if self.lines {
            if let Some(line) = finished_line(i, n, group, step, self.precision) {
                warn(line);
            }
        }
        let Some(b) = &self.bar else { return };
        // Shown only once the run has lasted a second: short runs stay quiet.
        if !self.bar_shown && self.started.elapsed() > Duration::from_secs(1) {
            b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            self.bar_shown = true;
        }
        let in_group = self.group_started.elapsed().as_secs_f64();
        let eta = eta_seconds(i, n, in_group, self.max_seconds);
        b.set_position(i as u64);
        b.set_message(bar_message(group, step, self.precision, eta));
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

fn bar(groups: usize) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(groups as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed:>4} [{bar:12}] {pos}/{len} groups {wide_msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    bar
}

/// At most what is left: the current group's budget and every later group's (a group ends
/// sooner when its rows reach the precision).
fn eta_seconds(i: usize, n: usize, in_group: f64, max_seconds: f64) -> f64 {
    let later = n.saturating_sub(i + 1) as f64 * max_seconds;
    (max_seconds - in_group).max(0.0) + later
}

fn duration_text(seconds: f64) -> String {
    let s = seconds.round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// "≤ 1m20s left, round 120, CI ±1.3% (target ±1.0%), quick/n0/none/1v": the ETA and the
/// precision first, as the end of a long message is cut at the terminal's width.
fn bar_message(group: &str, step: &Step, precision: f64, eta: f64) -> String {
    let what = match step {
        // Too few rounds for a CI give a width of 0: not "precise", just not known yet.
        Step::Rounds { done, worst } if !(*worst > 0.0 && worst.is_finite()) => {
            format!(
                "round {done}, CI not yet (target ±{:.1}%)",
                precision * 100.0
            )
        }
        Step::Rounds { done, worst } => format!(
            "round {done}, CI ±{:.1}% (target ±{:.1}%)",
            worst * 100.0,
            precision * 100.0
        ),
        other => other.to_string(),
    };
    let group = irqbench::text::escape_line(group);
    format!("≤ {} left, {what}, {group}", duration_text(eta))
}

/// The line a finished (or failed) group gives without a terminal.
fn finished_line(i: usize, n: usize, group: &str, step: &Step, precision: f64) -> Option<String> {
    let what = match step {
        Step::Finished {
            rows,
            rounds,
            precise,
            seconds,
        } => format!(
            "{rows} row{}, {rounds} rounds, precision ±{:.1}% {}, {seconds:.1} s",
            if *rows == 1 { "" } else { "s" },
            precision * 100.0,
            if *precise { "reached" } else { "not reached" },
        ),
        Step::Failed => "failed (see the report)".into(),
        _ => return None,
    };
    Some(format!("group {}/{n} {group}: {what}", i + 1))
}

/// The failed rows, one message per distinct error (a group's rows fail together, with one
/// error): "row a failed" or "3 rows failed (a, b, c)", then the error.
pub fn failure_lines(failures: &[irqbench::results::PhaseFailure]) -> Vec<String> {
    let mut kinds: Vec<(&str, Vec<&str>)> = Vec::new();
    for f in failures {
        match kinds.iter_mut().find(|(e, _)| *e == f.error) {
            Some((_, rows)) => rows.push(&f.name),
            None => kinds.push((&f.error, vec![&f.name])),
        }
    }
    kinds
        .into_iter()
        .map(|(error, rows)| match rows.as_slice() {
            [one] => format!("row {one} failed:\n{error}"),
            _ => format!(
                "{} rows failed ({}):\n{error}",
                rows.len(),
                irqbench::report::name_list(&rows)
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_that_failed_with_one_error_are_one_message() {
        let failure = |name: &str, error: &str| irqbench::results::PhaseFailure {
            name: name.into(),
            error: error.into(),
        };
        let lines = failure_lines(&[
            failure("g/a", "guest fault"),
            failure("g/b", "guest fault"),
            failure("h/c", "timeout"),
        ]);
        assert_eq!(
            lines,
            [
                "2 rows failed (g/a, g/b):\nguest fault",
                "row h/c failed:\ntimeout"
            ]
        );
        assert!(failure_lines(&[]).is_empty());
    }

    #[test]
    fn the_eta_counts_the_current_budget_and_every_later_one() {
        assert_eq!(eta_seconds(0, 4, 1.0, 3.0), 2.0 + 9.0);
        assert_eq!(eta_seconds(3, 4, 5.0, 3.0), 0.0);
        assert_eq!(eta_seconds(9, 4, 0.0, 3.0), 3.0);
        assert_eq!(duration_text(80.4), "1m20s");
        assert_eq!(duration_text(3725.0), "1h02m");
        assert_eq!(duration_text(0.2), "0s");
    }

    #[test]
    fn a_finished_group_says_rows_rounds_precision_and_seconds() {
        let step = Step::Finished {
            rows: 7,
            rounds: 52,
            precise: false,
            seconds: 3.04,
        };
        assert_eq!(
            finished_line(1, 4, "q/n0/none/1v", &step, 0.01).as_deref(),
            Some("group 2/4 q/n0/none/1v: 7 rows, 52 rounds, precision ±1.0% not reached, 3.0 s")
        );
        assert_eq!(finished_line(0, 4, "g", &Step::WarmUp, 0.01), None);
        let rounds = Step::Rounds {
            done: 120,
            worst: 0.013,
        };
        assert_eq!(
            bar_message("q/n0", &rounds, 0.01, 80.0),
            "≤ 1m20s left, round 120, CI ±1.3% (target ±1.0%), q/n0"
        );
        let early = Step::Rounds {
            done: 4,
            worst: 0.0,
        };
        assert!(bar_message("q", &early, 0.01, 1.0).contains("round 4, CI not yet"));
    }
}
