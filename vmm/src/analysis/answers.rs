//! The answers of a run: each chosen comparison gathered across the groups (conditions) it
//! was measured in, and the interaction between every two conditions that differ in one
//! factor, as the difference of the two groups' median per-round log-ratios with a seeded
//! bootstrap CI over rounds ([`INTERACTION_METHOD`]). Rendered by `report/answer_lines.rs`.

use irqbench_abi::SplitMix64;

use crate::results::answers::{INTERACTION_METHOD, INTERACTION_REPLICATES, INTERACTION_SEED};
use crate::results::{
    Answer, AnswerCondition, Ci, Condition, Estimate, Factor, Interaction, LetIn, PairedComparison,
    PhaseResult, ResultKind, RunReport, WaitPair,
};

use crate::statistics::{self, MIN_CI_SAMPLES};

/// Builds the answers and sets them (and the method, when there is an interaction) on the
/// report: `measure::run_prepared` calls it once the groups are measured, for every caller.
pub fn fill_answers(report: &mut RunReport) {
    report.answers = gather(report);
    report.interaction_method = if report.answers.iter().any(|a| !a.interactions.is_empty()) {
        INTERACTION_METHOD.to_string()
    } else {
        String::new()
    };
}

/// Every comparison of a strategy, lock or mixed group, keyed by what it compares; an answer
/// for each key measured in two or more conditions (one condition is its group's table line).
pub fn gather(report: &RunReport) -> Vec<Answer> {
    let mut answers: Vec<(Answer, Vec<&PairedComparison>)> = Vec::new();
    for c in &report.comparisons {
        let (Some(ra), Some(rb)) = (report.row(&c.a), report.row(&c.b)) else {
            continue;
        };
        if ra.kind == ResultKind::Insn || ra.kind == ResultKind::Diagnostic {
            continue;
        }
        let found = answers.iter_mut().find(|(x, _)| {
            x.a == ra.strategy && x.b == rb.strategy && x.kind == ra.kind && x.metric == c.metric
        });
        let cond = condition(ra, rb, c);
        match found {
            Some((x, cs)) => {
                x.conditions.push(cond);
                cs.push(c);
            }
            None => answers.push((
                Answer {
                    a: ra.strategy,
                    b: rb.strategy,
                    kind: ra.kind,
                    metric: c.metric,
                    conditions: vec![cond],
                    interactions: Vec::new(),
                },
                vec![c],
            )),
        }
    }
    answers
        .into_iter()
        .filter(|(a, _)| a.conditions.len() >= 2)
        .map(|(mut a, cs)| {
            label_conditions(&mut a.conditions);
            a.interactions = interactions(&a.conditions, &cs, &a);
            a
        })
        .collect()
}

fn condition(ra: &PhaseResult, rb: &PhaseResult, c: &PairedComparison) -> AnswerCondition {
    AnswerCondition {
        condition: Condition {
            bench: c.group.split('/').next().unwrap_or_default().to_string(),
            nesting: ra.nesting,
            irq_source: ra.irq_source.clone(),
            vcpus: ra.vcpus,
            body_ops: ra.body_ops,
        },
        label: String::new(),
        group: c.group.clone(),
        ratio: c.ratio,
        rounds: c.rounds,
        precision_reached: ra.precision_reached && rb.precision_reached,
        no_ratio: c.no_ratio.clone(),
        wait: ra
            .pending_latency
            .clone()
            .zip(rb.pending_latency.clone())
            .map(|(a, b)| WaitPair { a, b }),
        let_in: LetIn::of(&ra.interrupt_sites)
            .zip(LetIn::of(&rb.interrupt_sites))
            .map(|(a, b)| [a, b]),
    }
}

/// `none` → `no load`, `inject@1000Hz` → `inject 1 kHz`, `lapic-timer@100us` →
/// `lapic-timer 100 µs`; anything else as it is.
pub(crate) fn irq_label(irq: &str) -> String {
    if irq == "none" || irq.is_empty() {
        return "no load".into();
    }
    let Some((name, param)) = irq.split_once('@') else {
        return irq.into();
    };
    if let Some(hz) = param.strip_suffix("Hz").and_then(|v| v.parse::<f64>().ok()) {
        return if hz >= 1000.0 {
            format!("{name} {} kHz", fmt_fraction(hz / 1000.0))
        } else {
            format!("{name} {} Hz", fmt_fraction(hz))
        };
    }
    if let Some(us) = param.strip_suffix("us") {
        return format!("{name} {us} µs");
    }
    format!("{name} {param}")
}

/// Nesting fractions are short decimals (0, 0.5, 0.25): no trailing zeros.
pub(crate) fn fmt_fraction(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-" {
        "0".into()
    } else {
        s.into()
    }
}

fn vcpu_label(n: u32) -> String {
    format!("{n} vCPU{}", if n == 1 { "" } else { "s" })
}

/// The factors of a condition, by name: nesting, load, vCPUs (in that order).
fn parts(c: &Condition) -> [String; 3] {
    [
        format!("nesting {}", fmt_fraction(c.nesting)),
        irq_label(&c.irq_source),
        vcpu_label(c.vcpus),
    ]
}

/// `nesting 0, no load, 1 vCPU`; the bench and the critical section's length are named only
/// where two conditions would otherwise read the same.
fn label_conditions(conds: &mut [AnswerCondition]) {
    let same = |x: &Condition, y: &Condition| {
        x.nesting == y.nesting && x.irq_source == y.irq_source && x.vcpus == y.vcpus
    };
    let all: Vec<Condition> = conds.iter().map(|c| c.condition.clone()).collect();
    for c in conds.iter_mut() {
        let mut label = parts(&c.condition).join(", ");
        let twins: Vec<&Condition> = all.iter().filter(|o| same(o, &c.condition)).collect();
        if twins.iter().any(|o| o.body_ops != c.condition.body_ops) {
            label.push_str(&format!(", body {}", c.condition.body_ops));
        }
        if twins.iter().any(|o| o.bench != c.condition.bench) {
            label.push_str(&format!(" ({})", c.condition.bench));
        }
        c.label = label;
    }
}

/// The one factor `x` and `y` differ in, if exactly one (the critical section the same).
fn one_factor(x: &Condition, y: &Condition) -> Option<Factor> {
    if x.body_ops != y.body_ops {
        return None;
    }
    let differs = [
        (x.irq_source != y.irq_source, Factor::Load),
        (x.nesting != y.nesting, Factor::Nesting),
        (x.vcpus != y.vcpus, Factor::Vcpus),
    ];
    let mut it = differs.iter().filter(|(d, _)| *d).map(|(_, f)| *f);
    match (it.next(), it.next()) {
        (Some(f), None) => Some(f),
        _ => None,
    }
}

fn interactions(
    conds: &[AnswerCondition],
    cs: &[&PairedComparison],
    answer: &Answer,
) -> Vec<Interaction> {
    // Each condition's bootstrap is drawn once and shared by its interactions: the cost is
    // conditions × replicates × rounds, not interactions × that.
    let mut boots: Vec<Option<Result<Boot, String>>> = vec![None; conds.len()];
    let mut out = Vec::new();
    for from in 0..conds.len() {
        for to in from + 1..conds.len() {
            let (x, y) = (&conds[from].condition, &conds[to].condition);
            let Some(factor) = one_factor(x, y) else {
                continue;
            };
            let (px, py) = (parts(x), parts(y));
            let which = match factor {
                Factor::Nesting => 0,
                Factor::Load => 1,
                Factor::Vcpus => 2,
            };
            let at: Vec<&str> = (0..3)
                .filter(|i| *i != which)
                .map(|i| px[i].as_str())
                .collect();
            let seeds =
                [from, to].map(|i| seed_for(&[answer.a.name(), answer.b.name(), &conds[i].group]));
            for (i, seed) in [from, to].into_iter().zip(seeds) {
                if boots[i].is_none() {
                    boots[i] = Some(condition_boot(&conds[i], cs[i], seed));
                }
            }
            let estimate = match (&boots[from], &boots[to]) {
                (Some(Ok(f)), Some(Ok(t))) => combine(f, t).ok_or_else(|| {
                    "too many paired rounds with a ratio ≤ 0 (nets below their baseline): the \
                     bootstrap's medians are not defined"
                        .to_string()
                }),
                (Some(Err(why)), _) | (_, Some(Err(why))) => Err(why.clone()),
                _ => Err("no estimate".to_string()),
            };
            let (delta_log, no_estimate) = match estimate {
                Ok(d) => (Some(d), None),
                Err(why) => (None, Some(why)),
            };
            out.push(Interaction {
                factor,
                from,
                to,
                label: match factor {
                    Factor::Load => format!("{} vs {}", py[which], px[which]),
                    Factor::Nesting => {
                        format!("{} vs {}", fmt_fraction(y.nesting), fmt_fraction(x.nesting))
                    }
                    Factor::Vcpus => format!("{} vs {}", y.vcpus, x.vcpus),
                },
                at: at.join(", "),
                delta_log,
                rounds: [cs[from].rounds, cs[to].rounds],
                seeds,
                no_estimate,
            });
        }
    }
    out
}

/// Why a condition's per-round log-ratios cannot be used, if they cannot.
fn unusable(cond: &AnswerCondition, c: &PairedComparison) -> Option<String> {
    if let Some(why) = &c.no_ratio {
        return Some(format!("no ratio under {}: {why}", cond.label));
    }
    let k = c.nonpositive_ratios as usize;
    if 2 * k >= c.log_ratios.len() + k && k > 0 {
        return Some(format!(
            "{k} of {} paired rounds under {} have a ratio ≤ 0 (a net below its baseline): \
             the median ln(b/a) is not defined",
            c.log_ratios.len() + k,
            cond.label
        ));
    }
    if c.log_ratios.is_empty() && c.rounds > 0 {
        return Some(format!(
            "no per-round ratios stored for {} (a file written before answers)",
            cond.label
        ));
    }
    if c.log_ratios.len() + k < MIN_CI_SAMPLES {
        return Some(format!(
            "{} paired rounds under {} (a CI needs {MIN_CI_SAMPLES})",
            c.log_ratios.len() + k,
            cond.label
        ));
    }
    None
}

/// A condition's bootstrap, or why its rounds cannot give one.
fn condition_boot(cond: &AnswerCondition, c: &PairedComparison, seed: u64) -> Result<Boot, String> {
    if let Some(why) = unusable(cond, c) {
        return Err(why);
    }
    // A ratio ≤ 0 is ln 0 = −∞: below every other round, as its ratio is.
    let mut pool = c.log_ratios.clone();
    pool.extend(std::iter::repeat_n(
        f64::NEG_INFINITY,
        c.nonpositive_ratios as usize,
    ));
    boot(&pool, INTERACTION_REPLICATES, seed).ok_or_else(|| "no per-round log-ratio".into())
}

/// One side of an interaction: the median of its rounds and the medians of `replicates`
/// resamples of them (with replacement).
#[derive(Clone, Debug)]
struct Boot {
    median: f64,
    replicates: Vec<f64>,
}

/// Rounds a resample draws together, in round order, out of `n`: from as many rounds as the
/// comparisons' CIs batch (`analysis::estimators::batched`, [`statistics::batch_ranges`]), one
/// [`statistics::MAX_BATCHES`]th of them, since rounds close in time can share the host's
/// state; one (independent rounds) below.
pub(crate) fn block_len(n: usize) -> usize {
    if n >= statistics::MIN_BATCHES * statistics::MIN_BATCH_VALUES {
        n / statistics::MAX_BATCHES
    } else {
        1
    }
}

/// NaNs are left out; −∞ (a ratio ≤ 0) is a value below all others, and makes a median −∞
/// only when half the rounds or more are it. `values` are in round order: a resample is a
/// moving-block bootstrap, runs of [`block_len`] consecutive rounds from random starts.
fn boot(values: &[f64], replicates: usize, seed: u64) -> Option<Boot> {
    let values: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if values.is_empty() || replicates == 0 {
        return None;
    }
    let n = values.len();
    let block = block_len(n);
    let mut rng = SplitMix64(seed);
    let mut buf = vec![0.0; n];
    let replicates = (0..replicates)
        .map(|_| {
            for chunk in buf.chunks_mut(block) {
                let start = below_by_modulo(&mut rng, n - block + 1);
                chunk.copy_from_slice(&values[start..start + chunk.len()]);
            }
            median_of(&mut buf)
        })
        .collect();
    Some(Boot {
        median: median_of(&mut values.clone()),
        replicates,
    })
}

/// Δ = median of `to` − median of `from`, with the percentile 95% CI of the replicates' Δs
/// (the two sides' resamples are independent, so replicate j of each is one joint draw).
fn combine(from: &Boot, to: &Boot) -> Option<Estimate> {
    let mut deltas: Vec<f64> = to
        .replicates
        .iter()
        .zip(&from.replicates)
        .map(|(t, f)| t - f)
        .collect();
    if deltas.is_empty() || deltas.iter().any(|d| !d.is_finite()) {
        return None;
    }
    deltas.sort_by(f64::total_cmp);
    let at = |q: f64| deltas[((deltas.len() - 1) as f64 * q).round() as usize];
    let median = to.median - from.median;
    median.is_finite().then(|| Estimate {
        point: median,
        ci: Some(Ci::from([at(0.025), at(0.975)])),
    })
}

/// Median of `to` minus median of `from`, with the 95% percentile bootstrap CI: each side's
/// rounds resampled with replacement, independently (`from` from `seed`, `to` from the next
/// stream), `replicates` times. `None` when a side has nothing to resample or a median is not
/// finite (half its rounds −∞ or more).
pub fn interaction(from: &[f64], to: &[f64], replicates: usize, seed: u64) -> Option<Estimate> {
    let f = boot(from, replicates, seed)?;
    let t = boot(to, replicates, seed_for(&[&seed.to_string()]))?;
    combine(&f, &t)
}

/// The median of values without NaN, reordering them (linear time: the bootstrap's inner loop).
fn median_of(v: &mut [f64]) -> f64 {
    let n = v.len();
    let mid = n / 2;
    let (lower, m, _) = v.select_nth_unstable_by(mid, f64::total_cmp);
    let m = *m;
    if n % 2 == 1 {
        m
    } else {
        let below = lower.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (below + m) / 2.0
    }
}

/// The seed of one interaction: [`INTERACTION_SEED`] mixed with its names (FNV-1a), so every
/// interaction has its own stream and the same one on every run.
fn seed_for(names: &[&str]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for n in names {
        for b in n.bytes().chain([0]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    INTERACTION_SEED ^ h
}

/// Uniform in `0..n` by modulo (n ≥ 1; the bias is below 2⁻⁵⁰ for any slice that fits), as
/// the answers' bootstrap has always drawn, so its CIs stay what earlier runs printed.
fn below_by_modulo(rng: &mut SplitMix64, n: usize) -> usize {
    (rng.next_u64() % n as u64) as usize
}

#[cfg(test)]
mod tests;
