//! One group's measurement: calibrate the block size, warm up, then run rounds until every
//! row's CI reaches the plan's precision or the group's time budget runs out ([`super::pacing`]
//! sizes the dispatches and holds the budget and the `min_rounds` floor).

use std::time::{Duration, Instant};

use irqbench_abi::{self as abi, PhaseDescriptor};

use super::collect::Collected;
use super::pacing::{End, Pacer};
use super::replicate_rows;
use super::rows::{self, GroupOutcome};
use crate::analysis::estimators;
use crate::config::plan::{PhasePlan, Plan, Workload};
use crate::results::warning::{Warning, WarningKind};
use crate::results::{Ci, PhaseResult, ResultKind};
use crate::session::descriptor::{self, workload_ids};
use crate::session::{PhaseError, RunOptions, Session, Step};

/// Where calibration starts (operations per block).
const CALIBRATION_OPS: u64 = 16;
/// Rounds of warm-up, discarded.
const WARMUP_ROUNDS: u32 = 2;
/// A group keeps every block's figures until its own figures are computed; these bound that
/// memory whatever `max_seconds` says (a group stops at whichever comes first): per-vCPU
/// block records (~40 bytes each) and per-(round, variant) stat maps.
const MAX_BLOCKS: usize = 2_000_000;
const MAX_CELLS: usize = 250_000;

/// What a group's rounds gave: the blocks (of every replicate), the replicate that ran each
/// round, whether a signal stopped them, and how the pacer ended them.
struct RoundsRun {
    collected: Collected,
    replicate_of: Vec<usize>,
    interrupted: bool,
    end: Option<End>,
}

/// The most rounds a group of `variants` blocks on `vcpus` vCPUs may keep.
fn max_rounds(variants: usize, vcpus: u32) -> u32 {
    let by_blocks = MAX_BLOCKS / (variants.max(1) * vcpus.max(1) as usize);
    let by_cells = MAX_CELLS / variants.max(1);
    by_blocks.min(by_cells).min(u32::MAX as usize) as u32
}

/// Everything a group's dispatches need.
#[allow(missing_debug_implementations)] // holds the sessions, which are not Debug-worthy
pub struct GroupRun<'a> {
    /// One fresh VM per replicate (`run.replicates`); their rounds interleave in slices.
    pub sessions: &'a mut [Session],
    pub plan: &'a Plan,
    pub rows: Vec<&'a PhasePlan>,
    pub tsc_khz: u64,
    pub options: &'a RunOptions,
    /// Asked once the VM is warm and calibrated, before any round: `false` stops the group there
    /// ([`PhaseError::Refused`]). Its time is not the group's: the budget clock skips it.
    pub before_rounds: &'a mut dyn FnMut() -> bool,
    /// In-kernel rows are held to the window law (VMX/SVM; PVM counts `irq_window_exits`
    /// its own way: more than the interrupts taken, seen on every in-kernel path).
    pub window_law: bool,
}

impl GroupRun<'_> {
    /// Ids of the group's variants: the `empty` baseline first, then the rows in plan order.
    fn variants(&self) -> Vec<u32> {
        let mut v = vec![match self.rows[0].workload.kind() {
            ResultKind::Insn => abi::insn::EMPTY,
            ResultKind::Strategy
            | ResultKind::Lock
            | ResultKind::Mixed
            | ResultKind::Diagnostic => abi::strategy::EMPTY,
        }];
        v.extend(self.rows.iter().map(|r| workload_ids(&r.workload).1));
        v
    }

    fn timeout(&self, expected: Duration) -> Duration {
        match self.plan.phase_timeout_ms {
            Some(ms) => Duration::from_millis(ms),
            None => (expected * 50).max(Duration::from_secs(60)),
        }
    }

    fn dispatch(
        &mut self,
        desc: PhaseDescriptor,
        expected: Duration,
    ) -> Result<crate::session::Dispatch, PhaseError> {
        self.dispatch_on(0, desc, expected)
    }

    /// Dispatches to replicate `r`'s VM.
    fn dispatch_on(
        &mut self,
        r: usize,
        desc: PhaseDescriptor,
        expected: Duration,
    ) -> Result<crate::session::Dispatch, PhaseError> {
        let timeout = self.timeout(expected);
        let irq = self.rows[0].irq;
        self.sessions[r].dispatch(desc, irq, timeout)
    }

    /// Block size n: the slowest variant's block lasts about `block_us`; and the cycles one
    /// round takes at that n. Each variant's cost is its fastest of three blocks, so a block the
    /// host preempted cannot shrink n.
    fn calibrate(&mut self, variants: &[u32]) -> Result<(u64, f64), PhaseError> {
        const ROUNDS: u32 = 3;
        let desc = descriptor::rounds(&self.rows, variants, CALIBRATION_OPS, 0, ROUNDS);
        let d = self.dispatch(desc, Duration::from_secs(1))?;
        let mut fastest = vec![f64::INFINITY; variants.len()];
        for s in &d.samples {
            for b in &s.blocks {
                let cycles = b
                    .record
                    .head
                    .tsc_end
                    .saturating_sub(b.record.head.tsc_start) as f64;
                let per_iteration = cycles / desc.iterations as f64;
                if let Some(f) = fastest.get_mut(b.announced as usize) {
                    *f = f.min(per_iteration);
                }
            }
        }
        let known: Vec<f64> = fastest.into_iter().filter(|f| f.is_finite()).collect();
        let slowest = known.iter().copied().fold(1.0f64, f64::max);
        let round_per_iteration: f64 = known.iter().sum();
        let target = f64::from(self.plan.block_us) * self.tsc_khz as f64 / 1000.0;
        let n = match self.rows[0].block_ops {
            Some(n) => n,
            None => ((target / slowest) as u64).clamp(4, 100_000_000),
        };
        Ok((n, round_per_iteration * n as f64))
    }

    /// Test and diagnostic rows (doorbells, faults, spinning …) are not measured in rounds:
    /// each runs once and reports what it did.
    fn run_diagnostic(&mut self) -> Result<GroupOutcome, PhaseError> {
        let mut results = Vec::new();
        for row in self.rows.clone() {
            let desc = descriptor::diagnostic(row, row.block_ops.unwrap_or(1));
            let d = self.dispatch(desc, Duration::from_secs(1))?;
            results.push(PhaseResult {
                name: row.name.clone(),
                group: row.group.to_string(),
                kind: row.workload.kind(),
                strategy: row.workload.subject(),
                irq_source: row.irq.label(),
                vcpus: row.vcpus,
                ops: d.total_ops(),
                rounds: 1,
                totals: crate::results::RowTotals {
                    interrupts: d.records.iter().map(|r| r.counts.interrupts).sum(),
                    ..Default::default()
                },
                ..Default::default()
            });
        }
        Ok(GroupOutcome {
            results,
            ..Default::default()
        })
    }

    /// Runs the group; see the module doc.
    pub fn run(&mut self, step: &mut dyn FnMut(&Step)) -> Result<GroupOutcome, PhaseError> {
        if self.rows[0].workload.kind() == ResultKind::Diagnostic {
            if !(self.before_rounds)() {
                return Err(PhaseError::Refused);
            }
            return self.run_diagnostic();
        }
        let variants = self.variants();
        // The budget counts from here: warm-up and calibration are the group's time too.
        let mut started = Instant::now();
        // Warm-up first: a fresh VM's first blocks pay for page-table and code first touches,
        // which would make the calibration pick blocks far too short.
        step(&Step::WarmUp);
        let warm = descriptor::rounds(&self.rows, &variants, CALIBRATION_OPS, 0, WARMUP_ROUNDS);
        for r in 0..self.sessions.len() {
            self.dispatch_on(r, warm, Duration::from_secs(1))?;
        }
        step(&Step::Calibrate);
        let (n, round_cycles) = self.calibrate(&variants)?;
        // After the calibration, whose three short blocks are no figure: what the gate waits
        // for (the host validation's TSC span) overlaps them, and the rounds still follow it.
        let asked = Instant::now();
        if !(self.before_rounds)() {
            return Err(PhaseError::Refused);
        }
        started += asked.elapsed();
        let estimate = Duration::try_from_secs_f64(round_cycles / (self.tsc_khz as f64 * 1000.0))
            .unwrap_or(Duration::MAX);
        self.round_fits_budget(n, variants.len(), estimate)?;
        let mut pacer = Pacer::new(self.plan.max_seconds, self.min_rounds(), estimate);
        let rounds_started = Instant::now();
        let dump = super::dump::dir().map(|d| (d, super::dump::snapshot()));
        let ran = self.rounds(&variants, n, &mut pacer, started, step)?;
        let (collected, interrupted, end) = (&ran.collected, ran.interrupted, ran.end);
        let wall = rounds_started.elapsed();
        if let Some((dir, before)) = &dump {
            let group = self.rows[0].group.to_string();
            super::dump::write(
                dir,
                &group,
                &collected.obs,
                before,
                &super::dump::snapshot(),
            );
        }
        let facts = rows::GroupFacts {
            rows: &self.rows,
            image: &self.sessions[0].image,
            tsc_khz: self.tsc_khz,
            precision: self.plan.precision,
            hypercall: self.plan.hypercall,
            window_law: self.window_law,
        };
        let table = collected.table();
        let mut outcome = rows::build(facts, collected, &table, wall, interrupted);
        let tsc_hz = self.tsc_khz as f64 * 1000.0;
        let tables = self.replicate_tables(&table, &ran.replicate_of);
        if let Some(tables) = &tables {
            replicate_rows::combine(
                &mut outcome,
                &self.rows,
                tables,
                tsc_hz,
                self.plan.precision,
            );
        }
        // A signal while the figures were computed: they are complete, the run is not.
        outcome.interrupted |= self.options.stop.is_set();
        self.mark_short(&mut outcome, &pacer, collected.rounds, end);
        if matches!(end, Some(End::Budget)) && outcome.results.iter().all(|r| r.precision_reached) {
            let judged = match &tables {
                Some(t) => replicate_rows::precise(&self.rows, t, tsc_hz, self.plan.precision),
                None => comparisons_precise(&self.rows, &table, tsc_hz, self.plan.precision),
            };
            outcome
                .warnings
                .extend(comparisons_warning(&self.rows, judged, self.plan));
        }
        // Under an interrupt load the baseline's cost also holds the interrupts its blocks
        // took, which a timer's period beating against the rounds' moves in stretches too.
        let no_load = self.rows[0].irq == crate::config::plan::IrqSource::None;
        if let Some(steps) = no_load
            .then(|| crate::analysis::speed::steps(&table))
            .flatten()
        {
            let group = self.rows[0].group.to_string();
            outcome
                .warnings
                .push(crate::analysis::speed::warning(&group, &steps));
        }
        Ok(outcome)
    }

    /// The rounds the group runs at least: `run.min_rounds` on every replicate.
    fn min_rounds(&self) -> u32 {
        let k = self.sessions.len().max(1) as u32;
        self.plan.min_rounds.saturating_mul(k)
    }

    /// [`Self::min_rounds`] as its keys and value.
    fn min_rounds_named(&self) -> String {
        match self.sessions.len() {
            0 | 1 => format!("run.min_rounds = {}", self.plan.min_rounds),
            k => format!(
                "run.min_rounds × run.replicates = {} × {k}",
                self.plan.min_rounds
            ),
        }
    }

    /// With replicates, the pooled `table`'s rounds split by the replicate that ran each.
    fn replicate_tables(
        &self,
        table: &estimators::RoundTable,
        replicate_of: &[usize],
    ) -> Option<Vec<estimators::RoundTable>> {
        let k = self.sessions.len();
        (k > 1).then(|| replicate_rows::split(table, replicate_of, k))
    }

    /// Rounds until the pacer ends them, precision is reached, a signal stops them or the
    /// memory bound is hit. With replicates each of the pacer's dispatches is a slice run on
    /// every replicate in turn (A B C A B C …), so the host's slow stretches fall on all of them.
    fn rounds(
        &mut self,
        variants: &[u32],
        n: u64,
        pacer: &mut Pacer,
        started: Instant,
        step: &mut dyn FnMut(&Step),
    ) -> Result<RoundsRun, PhaseError> {
        let lock = matches!(self.rows[0].workload, Workload::Lock { .. });
        let first = self.rows[0];
        let mut ran = RoundsRun {
            collected: Collected::new(variants.len(), first.vcpus),
            replicate_of: Vec::new(),
            interrupted: false,
            end: None,
        };
        let round_cap = max_rounds(variants.len(), first.vcpus);
        let mut first_round = 0u32;
        // Computing the figures reads every block so far: check precision after a dispatch
        // once the rounds have grown by a tenth (after every one of the pacer's first few).
        let mut next_check = 0u32;
        loop {
            for r in 0..self.sessions.len() {
                let rounds = pacer
                    .next_rounds(started.elapsed(), first_round)
                    .min(round_cap - first_round);
                let desc = descriptor::rounds(&self.rows, variants, n, first_round, rounds);
                let sent = Instant::now();
                match self.dispatch_on(r, desc, pacer.round() * rounds) {
                    Ok(d) => ran.collected.add(&d.desc, &d, lock)?,
                    Err(PhaseError::Interrupted) if ran.collected.rounds > 0 => {
                        ran.interrupted = true;
                        return Ok(ran);
                    }
                    Err(e) => return Err(e),
                }
                ran.replicate_of
                    .extend(std::iter::repeat_n(r, rounds as usize));
                pacer.observe(rounds, sent.elapsed());
                first_round += rounds;
                if self.options.stop.is_set() {
                    ran.interrupted = true;
                    return Ok(ran);
                }
                if first_round >= round_cap {
                    return Ok(ran);
                }
            }
            if let Some(end) = pacer.end(started.elapsed(), first_round) {
                ran.end = Some(end);
                return Ok(ran);
            }
            if first_round >= next_check {
                next_check = first_round + first_round / 10;
                let (done, worst) = self.precision(&ran);
                step(&Step::Rounds {
                    done: first_round,
                    worst,
                });
                if done {
                    return Ok(ran);
                }
            }
        }
    }

    /// Refuses a group whose one round, as calibrated, is longer than its whole budget.
    fn round_fits_budget(&self, n: u64, blocks: usize, round: Duration) -> Result<(), PhaseError> {
        let budget = self.plan.max_seconds;
        if round.as_secs_f64() <= budget {
            return Ok(());
        }
        let instead = match self.rows[0].block_ops {
            Some(_) => block_ops_advice(n, budget, round.as_secs_f64()),
            None => {
                "lower run.block_us, put fewer rows in the bench, or raise run.max_seconds".into()
            }
        };
        Err(PhaseError::TooLong(format!(
            "one round ({blocks} blocks of {n} operations) takes about {:.3} s by the \
             calibration, longer than run.max_seconds = {budget}; {instead}",
            round.as_secs_f64()
        )))
    }

    /// Marks the rows of a group that ran fewer than `min_rounds` rounds, and says why.
    fn mark_short(&self, outcome: &mut GroupOutcome, pacer: &Pacer, done: u32, end: Option<End>) {
        if done >= self.min_rounds() {
            return;
        }
        for r in &mut outcome.results {
            r.min_rounds_missed = true;
        }
        let group = &self.rows[0].group;
        let why = match end {
            Some(End::Cap) => pacer.cap_warning(&group.to_string(), done),
            // A signal: the run is marked partial, which says it.
            _ if outcome.interrupted => return,
            _ => Warning::about(
                WarningKind::RoundsInMemory,
                group,
                format!(
                    "{done} of {} rounds: the group keeps at most {done} rounds in memory; its \
                     rows are marked min_rounds_missed",
                    self.min_rounds_named()
                ),
            ),
        };
        outcome.warnings.push(why);
    }

    /// Whether every row and every comparison is precise, and the worst relative half-width
    /// (for progress); with replicates, by their combined CIs.
    fn precision(&self, ran: &RoundsRun) -> (bool, f64) {
        let table = ran.collected.table();
        let enough = ran.collected.rounds >= self.min_rounds();
        let tsc_hz = self.tsc_khz as f64 * 1000.0;
        if let Some(tables) = self.replicate_tables(&table, &ran.replicate_of) {
            let (all, worst) =
                replicate_rows::precise(&self.rows, &tables, tsc_hz, self.plan.precision);
            return (enough && all, worst);
        }
        let table = &table;
        let mut all = enough;
        let mut worst = 0.0f64;
        for v in 1..table.variants {
            let (net, _) = estimators::batched(&table.net_cycles(v));
            let base = crate::statistics::median(&table.baseline_cycles(v)).unwrap_or(0.0);
            let scale = net
                .median
                .abs()
                .max(estimators::FLOOR_OF_BASELINE * base.abs())
                .max(f64::MIN_POSITIVE);
            let half = net.estimate().and_then(|e| e.half_width());
            worst = worst.max(half.unwrap_or(0.0) / scale);
            all &= estimators::precise(&net, base, self.plan.precision);
        }
        let (compared, worst_ratio) = comparisons_precise(
            &self.rows,
            table,
            self.tsc_khz as f64 * 1000.0,
            self.plan.precision,
        );
        (all && compared, worst.max(worst_ratio))
    }
}

/// Whether every comparison the group reports, which reviewers quote, has its ratio's CI within
/// `precision` of the ratio, and the worst relative half-width. A pair whose first row's net
/// spans 0 gets no ratio (`rows::comparisons`) and is left to that row's own precision, and so
/// is one whose second row's net spans 0: its ratio's CI spans 0 too, and whether it held the
/// group would hang on its median's sign. One with fewer than 6 undisturbed paired rounds is not
/// precise yet.
fn comparisons_precise(
    rows: &[&PhasePlan],
    table: &estimators::RoundTable,
    tsc_hz: f64,
    precision: f64,
) -> (bool, f64) {
    let (metric, _) = rows::compared_metric(rows);
    let (mut all, mut worst) = (true, 0.0f64);
    // Once per row, not once per pair it is in (an instruction group has 45 pairs of 10 rows).
    let spans_zero: Vec<bool> = (0..rows.len())
        .map(|v| {
            let (net, _) = estimators::batched(&table.net_cycles(v + 1));
            net.ci95.is_some_and(Ci::holds_zero)
        })
        .collect();
    for (a, b) in rows::compared_pairs(rows) {
        if metric == estimators::Metric::NetCycles && (spans_zero[a] || spans_zero[b]) {
            continue;
        }
        let ratios = table.paired_ratios(a + 1, b + 1, metric, tsc_hz);
        let (ratio, _) = estimators::batched_interval(&ratios);
        let Some((point, Some(half))) = ratio.map(|r| (r.point, r.half_width())) else {
            all = false; // too few paired rounds for a CI
            continue;
        };
        if point <= 0.0 {
            continue; // b's net is at or below 0: a ratio to quote it by means nothing
        }
        let half = half / point;
        worst = worst.max(half);
        all &= half <= precision;
    }
    (all, worst)
}

/// What block_ops would fit a round of `n` operations a block in `budget` seconds: a multiple
/// of 4, as blocks are run ([`descriptor::rounds`] rounds up), or none when even 4 do not fit.
fn block_ops_advice(n: u64, budget: f64, round_secs: f64) -> String {
    let fits = (n as f64 * budget / round_secs) as u64 / 4 * 4;
    if fits < 4 {
        return "even the fewest block_ops, 4, would not fit: raise run.max_seconds".into();
    }
    format!("set block_ops to at most {fits} (or raise run.max_seconds)")
}

/// Why a group whose rows all reached their precision still ran out its budget: some
/// comparison did not (its rows' `~` marks cannot say so); `judged` is whether its
/// comparisons are precise and the worst relative half-width.
fn comparisons_warning(rows: &[&PhasePlan], judged: (bool, f64), plan: &Plan) -> Option<Warning> {
    let (precise, worst) = judged;
    (!precise).then(|| {
        // Not precise with every half-width within: a pair lacked the rounds to judge.
        let worst = if worst > plan.precision {
            format!("worst ±{:.2}%", worst * 100.0)
        } else {
            "a comparison has fewer than 6 undisturbed paired rounds".into()
        };
        let figures = format!(
            "run.max_seconds = {} ran out before every comparison's ratio CI was within \
             run.precision = {} ({worst}), though its rows' were",
            plan.max_seconds, plan.precision
        );
        Warning::about(WarningKind::ComparisonsImprecise, &rows[0].group, figures)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::plan::StrategyId;
    use estimators::{Cell, RoundTable};

    fn strategy_row(strategy: StrategyId) -> PhasePlan {
        Plan::single(Workload::Strategy { strategy }, 1, 100)
            .phases
            .remove(0)
    }

    /// One block of `net` cycles an operation over a loop of 100, 100 operations.
    fn block(net: f64) -> Option<Cell> {
        Some(Cell {
            cycles_mean: (100.0 + net) * 100.0,
            cycles_max: (100.0 + net) * 100.0,
            ops: 100,
            vcpus: 1,
            ..Default::default()
        })
    }

    /// Rows whose nets scatter ±0.4% are precise at 0.5%; their ratio is precise too when the
    /// two move together round by round, and not when they move apart (±0.8%).
    #[test]
    fn a_group_is_precise_only_when_its_comparisons_are() {
        let a = strategy_row(StrategyId::NATIVE_POPF);
        let b = strategy_row(StrategyId::NATIVE_CLI_STI);
        let rows = [&a, &b];
        for (together, want) in [(true, true), (false, false)] {
            let mut t = RoundTable::new(3);
            for r in 0..200 {
                let e = if r % 2 == 0 { 0.004 } else { -0.004 };
                let eb = if together { e } else { -e };
                t.rounds.push(vec![
                    block(0.0),
                    block(500.0 * (1.0 + e)),
                    block(300.0 * (1.0 + eb)),
                ]);
            }
            for v in 1..3 {
                let (net, _) = estimators::batched(&t.net_cycles(v));
                assert!(estimators::precise(&net, 100.0, 0.005), "row {v}: {net:?}");
            }
            let (precise, worst) = comparisons_precise(&rows, &t, 1e9, 0.005);
            assert_eq!(precise, want, "together {together}: worst ±{worst}");
            let plan = Plan {
                precision: 0.005,
                ..Plan::single(Workload::Doorbells, 1, 1)
            };
            let why = comparisons_warning(&rows, comparisons_precise(&rows, &t, 1e9, 0.005), &plan)
                .map(|w| w.to_string());
            assert_eq!(why.is_none(), want, "{why:?}");
            if let Some(why) = why {
                assert!(why.contains("run.precision = 0.005 (worst ±"), "{why}");
            }
        }
        // Too few paired rounds to judge: not precise.
        let mut t = RoundTable::new(3);
        for _ in 0..5 {
            t.rounds.push(vec![block(0.0), block(500.0), block(300.0)]);
        }
        assert!(!comparisons_precise(&rows, &t, 1e9, 0.005).0);
        let plan = Plan {
            precision: 0.005,
            ..Plan::single(Workload::Doorbells, 1, 1)
        };
        let why = comparisons_warning(&rows, comparisons_precise(&rows, &t, 1e9, 0.005), &plan)
            .expect("a warning")
            .to_string();
        assert!(
            why.contains("fewer than 6 undisturbed paired rounds"),
            "{why}"
        );
    }

    /// A second row whose net spans 0 (a row like `empty`, precise by the baseline floor) has a
    /// ratio whose CI spans 0: whether the group may stop must not hang on that ratio's sign.
    #[test]
    fn a_ratio_to_a_net_spanning_zero_does_not_hold_the_group() {
        let a = strategy_row(StrategyId::NATIVE_POPF);
        let b = strategy_row(StrategyId::NATIVE_CLI_STI);
        let rows = [&a, &b];
        for sign in [1.0, -1.0] {
            let mut t = RoundTable::new(3);
            for r in 0..200 {
                let e = if r % 2 == 0 { 1.0 } else { -0.6 };
                t.rounds
                    .push(vec![block(0.0), block(500.0), block(sign * e)]);
            }
            let (net, _) = estimators::batched(&t.net_cycles(2));
            assert!(
                net.ci95.is_some_and(|c| c.lo < 0.0 && c.hi > 0.0),
                "{net:?}"
            );
            let (precise, worst) = comparisons_precise(&rows, &t, 1e9, 0.005);
            assert!(precise, "sign {sign}: held by a ratio of ±{worst}");
        }
    }

    /// The advice is a count that runs as given (blocks are multiples of 4) and fits.
    #[test]
    fn block_ops_advice_is_a_multiple_of_4_that_fits() {
        // 400 operations in 13.2 s: 0.1 s fits 3, which would run as 4 (0.132 s).
        let none = block_ops_advice(400, 0.1, 13.2);
        assert!(
            none.contains("raise run.max_seconds") && !none.contains("at most"),
            "{none}"
        );
        assert_eq!(
            block_ops_advice(400, 1.0, 13.2),
            "set block_ops to at most 28 (or raise run.max_seconds)"
        );
    }

    #[test]
    fn the_round_cap_bounds_blocks_and_cells_for_any_group() {
        for variants in [2usize, 8, 16] {
            for vcpus in [1u32, 4, 64] {
                let rounds = max_rounds(variants, vcpus) as usize;
                assert!(rounds > 0);
                assert!(rounds * variants * vcpus as usize <= MAX_BLOCKS);
                assert!(rounds * variants <= MAX_CELLS);
            }
        }
        // The soak config's group (7 strategies + empty on 4 vCPUs) keeps ~31k rounds.
        assert_eq!(max_rounds(8, 4), 31_250);
    }
}
