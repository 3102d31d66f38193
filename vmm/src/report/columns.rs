//! The one column spec behind the text table, Markdown and CSV: a column's header, how a row
//! shows in a table cell, and the raw CSV fields it stands for. A figure added here appears in
//! all three, with the same rounding rules.

use crate::analysis::counts::{LOCK_SPINS, USERSPACE_EXITS};
use crate::results::{PhaseResult, ResultKind};

use super::format::{fmt_cost, fmt_count, fmt_fraction, fmt_pct, fmt_si, raw_number, Ci, Estimate};

pub(crate) use crate::analysis::estimate::{exits_estimate, exits_stat, stat_estimate};

/// The KVM per-vCPU stat that counts every VM exit.
pub(crate) use crate::results::EXITS_STAT;

/// Above this fraction of disturbed blocks a row is flagged: its rounds were not the quiet
/// ones the CI assumes to be typical.
pub(crate) const DISTURBED_WARN: f64 = 0.05;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Right,
}

/// Which tables show a column (CSV has every column for every row).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Not in the text table or Markdown.
    CsvOnly,
    All,
    Insn,
    NotInsn,
    /// Tables with at least one spinlock row.
    Lock,
}

/// When a table leaves a column out although it is in scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Omit {
    Never,
    /// Every cell is 0 or `-`: one note line says it for all of them.
    IfAllZero,
    /// Every cell is equal: the table's heading (its group) already says it.
    IfUniform,
    /// Every cell is `-`: the figure does not apply to these rows (no note).
    IfAbsent,
}

pub(crate) type Cell = fn(&PhaseResult) -> String;

#[derive(Debug)]
pub(crate) struct Column {
    /// `{u}` stands for the unit of the table's kind ([`ResultKind::unit`]).
    pub header: &'static str,
    pub align: Align,
    pub scope: Scope,
    pub omit: Omit,
    pub cell: Cell,
    /// (CSV header, raw value): numbers as Rust prints them, never rounded.
    pub csv: &'static [(&'static str, Cell)],
}

impl Column {
    const fn csv(self, csv: &'static [(&'static str, Cell)]) -> Self {
        Self { csv, ..self }
    }

    pub fn header_for(&self, kind: ResultKind) -> String {
        self.header.replace("{u}", kind.unit())
    }

    pub fn shown(&self, kind: ResultKind, has_lock: bool) -> bool {
        match self.scope {
            Scope::CsvOnly => false,
            Scope::All => true,
            Scope::Insn => kind == ResultKind::Insn,
            Scope::NotInsn => kind != ResultKind::Insn,
            Scope::Lock => has_lock,
        }
    }
}

/// The `exits` stat's CI, if the kernel reported it.
fn exits_ci(r: &PhaseResult) -> Option<Ci> {
    r.counts.get(EXITS_STAT).map(|e| e.ci95)
}

/// Userspace exits per op: the mean over kept rounds net of the baseline with its CI; none
/// with too few kept rounds.
pub(crate) fn userspace_exits_estimate(r: &PhaseResult) -> Option<Estimate> {
    stat_estimate(r, USERSPACE_EXITS)
}

/// The cycles cell carries `~` when the run ran out of time before its CI reached the plan's
/// precision; others get a space so the digits of both line up.
fn cycles_cell(r: &PhaseResult) -> String {
    let marker = if r.precision_reached { ' ' } else { '~' };
    format!("{}{marker}", fmt_cost(r.cycles_per_op.estimate()))
}

fn exits_cell(r: &PhaseResult) -> String {
    exits_estimate(r).map_or_else(|| "-".into(), fmt_cost)
}

fn disturbed_cell(r: &PhaseResult) -> String {
    let flag = if r.disturbed_fraction > DISTURBED_WARN {
        "!"
    } else {
        ""
    };
    format!("{}{flag}", fmt_pct(r.disturbed_fraction))
}

fn lock_spins(r: &PhaseResult) -> Option<Estimate> {
    r.lock.as_ref()?;
    stat_estimate(r, LOCK_SPINS)
}

fn opt_raw(v: Option<f64>) -> String {
    v.map_or_else(String::new, raw_number)
}

/// How evenly the vCPUs progressed: (max - min) / mean of their own ops/s.
pub fn vcpu_spread(per_vcpu_ops_per_sec: &[f64]) -> f64 {
    let Some((mean, _)) = crate::statistics::mean_sd(per_vcpu_ops_per_sec)
        .or_else(|| per_vcpu_ops_per_sec.first().map(|v| (*v, 0.0)))
    else {
        return 0.0;
    };
    let max = per_vcpu_ops_per_sec
        .iter()
        .copied()
        .fold(f64::MIN, f64::max);
    let min = per_vcpu_ops_per_sec
        .iter()
        .copied()
        .fold(f64::MAX, f64::min);
    if mean == 0.0 {
        0.0
    } else {
        (max - min) / mean
    }
}

/// A column with no CSV fields; [`Column::csv`] adds them.
const fn col(header: &'static str, align: Align, scope: Scope, omit: Omit, cell: Cell) -> Column {
    Column {
        header,
        align,
        scope,
        omit,
        cell,
        csv: &[],
    }
}

/// Every column, in table order.
pub(crate) const COLUMNS: &[Column] = {
    use Align::{Left, Right};
    use Omit::{IfAbsent, IfAllZero, IfUniform, Never};
    use Scope::{All, CsvOnly, Insn, Lock, NotInsn};
    &[
        col("phase", Left, CsvOnly, Never, |r| r.name.clone()).csv(&[
            ("name", |r| r.name.clone()),
            ("kind", |r| r.kind.name().into()),
            ("group", |r| r.group.clone()),
        ]),
        col("strategy", Left, NotInsn, Never, |r| {
            r.strategy.name().into()
        })
        .csv(&[("strategy", |r| r.strategy.name().into())]),
        col("instruction", Left, Insn, Never, |r| {
            r.strategy.name().into()
        }),
        col("measures", Left, Insn, Never, |r| {
            r.strategy.measures().into()
        })
        .csv(&[("measures", |r| {
            if r.kind == ResultKind::Insn {
                r.strategy.measures().into()
            } else {
                String::new()
            }
        })]),
        col("irq", Left, All, IfUniform, |r| r.irq_source.clone())
            .csv(&[("irq_source", |r| r.irq_source.clone())]),
        col("nest", Right, NotInsn, IfUniform, |r| {
            fmt_fraction(r.nesting)
        })
        .csv(&[("nesting", |r| raw_number(r.nesting))]),
        col("vCPUs", Right, All, IfUniform, |r| r.vcpus.to_string()).csv(&[
            ("vcpus", |r| r.vcpus.to_string()),
            ("body_ops", |r| r.body_ops.to_string()),
            ("block_ops", |r| r.block_ops.to_string()),
            ("ops", |r| r.ops.to_string()),
        ]),
        col("cycles/{u}", Right, All, Never, cycles_cell).csv(&[
            ("cycles_median", |r| raw_number(r.cycles_per_op.median)),
            ("cycles_ci_lo", |r| {
                opt_raw(r.cycles_per_op.ci95.map(|c| c.lo))
            }),
            ("cycles_ci_hi", |r| {
                opt_raw(r.cycles_per_op.ci95.map(|c| c.hi))
            }),
            ("cycles_min", |r| raw_number(r.cycles_per_op.min)),
            ("cycles_p5", |r| raw_number(r.cycles_per_op.p5)),
            ("cycles_p95", |r| raw_number(r.cycles_per_op.p95)),
            ("cycles_cv", |r| raw_number(r.cycles_per_op.cv)),
        ]),
        col("ns/{u}", Right, All, Never, |r| {
            fmt_cost(r.ns_per_op.estimate())
        })
        .csv(&[
            ("ns_median", |r| raw_number(r.ns_per_op.median)),
            ("ns_ci_lo", |r| opt_raw(r.ns_per_op.ci95.map(|c| c.lo))),
            ("ns_ci_hi", |r| opt_raw(r.ns_per_op.ci95.map(|c| c.hi))),
        ]),
        col("exits/{u}", Right, All, Never, exits_cell).csv(&[
            ("exits_per_op", |r| opt_raw(exits_stat(r))),
            ("exits_ci_lo", |r| opt_raw(exits_ci(r).map(|c| c.lo))),
            ("exits_ci_hi", |r| opt_raw(exits_ci(r).map(|c| c.hi))),
        ]),
        col("uexits/{u}", Right, All, IfAllZero, |r| {
            userspace_exits_estimate(r).map_or_else(|| "-".into(), fmt_cost)
        })
        .csv(&[
            ("userspace_exits_per_op", |r| {
                opt_raw(userspace_exits_estimate(r).map(|e| e.point))
            }),
            ("uexits_ci_lo", |r| {
                opt_raw(userspace_exits_estimate(r).and_then(|e| e.ci).map(|c| c.lo))
            }),
            ("uexits_ci_hi", |r| {
                opt_raw(userspace_exits_estimate(r).and_then(|e| e.ci).map(|c| c.hi))
            }),
        ]),
        col("rounds", Right, All, Never, |r| r.rounds.to_string())
            .csv(&[("rounds", |r| r.rounds.to_string())]),
        col("disturbed", Right, All, Never, disturbed_cell).csv(&[
            ("disturbed_fraction", |r| raw_number(r.disturbed_fraction)),
            ("precision_reached", |r| r.precision_reached.to_string()),
        ]),
        col("IRQs", Right, All, IfAllZero, |r| {
            fmt_count(r.totals.interrupts)
        })
        .csv(&[
            ("interrupts", |r| r.totals.interrupts.to_string()),
            ("irqs_raised", |r| r.totals.irqs_raised.to_string()),
        ]),
        col("ticks", Right, NotInsn, IfAbsent, ticks_cell).csv(&[
            ("timer_ticks_delivered", |r| {
                r.timer_ticks
                    .as_ref()
                    .map_or_else(String::new, |t| t.delivered.to_string())
            }),
            ("timer_ticks_expected", |r| {
                opt_raw(r.timer_ticks.as_ref().map(|t| t.expected))
            }),
        ]),
        col("taken", Right, NotInsn, IfAbsent, delivery_cell).csv(&[
            ("irq_delivered", |r| {
                r.irq_delivery
                    .as_ref()
                    .map_or_else(String::new, |d| d.delivered.to_string())
            }),
            ("irq_expected", |r| {
                opt_raw(r.irq_delivery.as_ref().map(|d| d.expected))
            }),
        ]),
        col("wait p50/p90", Right, NotInsn, IfAbsent, wait_cell).csv(&[
            ("pending_latency_timed", |r| {
                r.pending_latency
                    .as_ref()
                    .map_or_else(String::new, |l| l.timed.to_string())
            }),
            ("pending_latency_median_cycles", |r| {
                opt_raw(r.pending_latency.as_ref().map(|l| l.median_cycles))
            }),
            ("pending_latency_p90_cycles", |r| {
                opt_raw(r.pending_latency.as_ref().map(|l| l.p90_cycles))
            }),
        ]),
        col("hcalls", Right, NotInsn, IfAllZero, |r| {
            fmt_count(r.totals.hypercalls)
        })
        .csv(&[
            ("hypercalls", |r| r.totals.hypercalls.to_string()),
            ("hypercalls_seen_by_vmm", |r| {
                r.totals.hypercalls_seen_by_vmm.to_string()
            }),
        ]),
        col("IF viol", Right, NotInsn, IfAllZero, |r| {
            r.totals.if_violations.to_string()
        })
        .csv(&[("if_violations", |r| r.totals.if_violations.to_string())]),
        col("spins/op", Right, Lock, Never, |r| {
            lock_spins(r).map_or_else(|| "-".into(), fmt_cost)
        })
        .csv(&[
            ("lock_spins_per_op", |r| {
                opt_raw(lock_spins(r).map(|e| e.point))
            }),
            ("lock_mutual_exclusion_held", |r| {
                r.lock
                    .as_ref()
                    .map_or_else(String::new, |l| l.mutual_exclusion_held.to_string())
            }),
        ]),
        col("ops/s", Right, Lock, Never, |r| {
            fmt_si(r.ops_per_sec.median)
        })
        .csv(&[
            ("ops_per_sec_median", |r| raw_number(r.ops_per_sec.median)),
            ("ops_per_sec_ci_lo", |r| {
                opt_raw(r.ops_per_sec.ci95.map(|c| c.lo))
            }),
            ("ops_per_sec_ci_hi", |r| {
                opt_raw(r.ops_per_sec.ci95.map(|c| c.hi))
            }),
        ]),
        col("spread", Right, Lock, Never, |r| {
            fmt_pct(vcpu_spread(&r.per_vcpu_ops_per_sec))
        })
        .csv(&[("vcpu_spread", |r| {
            raw_number(vcpu_spread(&r.per_vcpu_ops_per_sec))
        })]),
        col("", Right, CsvOnly, Never, |_| String::new()).csv(&[
            ("baseline_cycles_median", |r| {
                raw_number(r.baseline_cycles.median)
            }),
            ("raw_cycles_median", |r| {
                raw_number(r.raw_cycles_per_op.median)
            }),
            ("wall_ms", |r| raw_number(r.wall_ms)),
        ]),
    ]
};

/// `lapic-timer` rows: timer interrupts delivered / expected over the row's blocks.
fn ticks_cell(r: &PhaseResult) -> String {
    match &r.timer_ticks {
        Some(t) => format!(
            "{}/{}",
            fmt_count(t.delivered),
            fmt_count(t.expected.round() as u64)
        ),
        None => "-".into(),
    }
}

/// `inject`, `msi` and `ipi` rows: interrupts the guest took / those the load raised over the row's
/// blocks.
fn delivery_cell(r: &PhaseResult) -> String {
    match &r.irq_delivery {
        // A few expected keep a decimal: `0/0.4` is not `0/0`, which would read as none due.
        Some(d) if d.expected < 10.0 => {
            format!("{}/{:.1}", fmt_count(d.delivered), d.expected.max(0.0))
        }
        Some(d) => format!(
            "{}/{}",
            fmt_count(d.delivered),
            fmt_count(d.expected.round() as u64)
        ),
        None => "-".into(),
    }
}

/// `inject`, `msi` and `ipi` rows: the median and p90 of the cycles their interrupts waited.
fn wait_cell(r: &PhaseResult) -> String {
    match &r.pending_latency {
        Some(l) if l.median_ci95.is_some() => {
            format!("{}/{}", fmt_si(l.median_cycles), fmt_si(l.p90_cycles))
        }
        // Too few for a CI: the one or few waits as they are, with their number.
        Some(l) => format!("{} (n {})", fmt_si(l.median_cycles), l.timed),
        None => "-".into(),
    }
}

/// A table's columns for rows of one kind: headers, alignment and cells, without the columns
/// [`Omit`] allows left out.
#[derive(Debug)]
pub(crate) struct Grid {
    pub headers: Vec<(String, Align)>,
    pub rows: Vec<Vec<String>>,
    /// Headers of the columns left out because every cell was 0.
    pub all_zero: Vec<String>,
    /// (header, value) of the columns left out because every row had that value.
    pub uniform: Vec<(String, String)>,
}

pub(crate) fn grid(kind: ResultKind, rows: &[&PhaseResult]) -> Grid {
    let has_lock = kind == ResultKind::Lock || rows.iter().any(|r| r.lock.is_some());
    let mut g = Grid {
        headers: Vec::new(),
        rows: vec![Vec::new(); rows.len()],
        all_zero: Vec::new(),
        uniform: Vec::new(),
    };
    for col in COLUMNS.iter().filter(|c| c.shown(kind, has_lock)) {
        let cells: Vec<String> = rows.iter().map(|r| (col.cell)(r)).collect();
        let header = col.header_for(kind);
        match col.omit {
            Omit::IfAllZero
                if !cells.is_empty()
                    && cells.iter().all(|c| matches!(c.as_str(), "0" | "-" | "")) =>
            {
                g.all_zero.push(header);
                continue;
            }
            Omit::IfAbsent if cells.iter().all(|c| c == "-") => continue,
            Omit::IfUniform if !cells.is_empty() && cells.iter().all(|c| *c == cells[0]) => {
                g.uniform.push((header, cells[0].clone()));
                continue;
            }
            _ => {}
        }
        g.headers.push((header, col.align));
        for (row, cell) in g.rows.iter_mut().zip(cells) {
            row.push(cell);
        }
    }
    g
}
