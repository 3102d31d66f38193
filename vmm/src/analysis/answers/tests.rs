use super::*;
use crate::results::{ComparedMetric, Summary};

/// A standard normal draw (Box–Muller).
fn normal(rng: &mut SplitMix64) -> f64 {
    let u = rng.unit().max(f64::MIN_POSITIVE);
    let v = rng.unit();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

fn draws(rng: &mut SplitMix64, n: usize, centre: f64, sd: f64) -> Vec<f64> {
    (0..n).map(|_| centre + sd * normal(rng)).collect()
}

/// `stretches` stretches of `n` rounds around `centre`, each at a level of its own (sd
/// `between`), each round at sd `within` about it: rounds that drift together.
fn drifting(
    rng: &mut SplitMix64,
    stretches: usize,
    n: usize,
    centre: f64,
    between: f64,
    within: f64,
) -> Vec<f64> {
    (0..stretches)
        .flat_map(|_| {
            let level = centre + between * normal(rng);
            draws(rng, n, level, within)
        })
        .collect()
}

#[test]
fn rounds_that_drift_together_are_resampled_in_blocks_and_covered() {
    // Two conditions, no interaction; each run's rounds in 20 stretches of 15 with a level of
    // their own (2% sd, rounds 3%). Resampling single rounds held 0 in 69 of these 100 runs,
    // blocks of n/20 rounds in 90 (a block bootstrap of 300 rounds runs a little short).
    let from = 0.91f64.ln();
    let mut holds_zero = 0;
    for t in 0..100 {
        let mut rng = SplitMix64(4000 + t);
        let a = drifting(&mut rng, 20, 15, from, 0.02, 0.03);
        let b = drifting(&mut rng, 20, 15, from, 0.02, 0.03);
        assert_eq!(block_len(a.len()), 15);
        let d = interaction(&a, &b, 400, t).expect("an estimate");
        holds_zero += usize::from(!d.excludes(0.0));
    }
    println!("drifting rounds, no interaction: the CI holds 0 in {holds_zero} of 100");
    assert!(holds_zero >= 85, "{holds_zero} of 100");
}

#[test]
fn the_interaction_estimates_a_known_difference_and_its_ci_covers_it() {
    // Two groups' per-round log-ratios: −9% (ln 0.91) without load, −6% (ln 0.94) under load;
    // different spreads and round counts, as two groups of one run have. The true interaction
    // is ln 0.94 − ln 0.91 (the medians of normal draws are their centres).
    let (from, to) = (0.91f64.ln(), 0.94f64.ln());
    let truth = to - from;
    let trials = 200;
    let (mut covered, mut sum) = (0, 0.0);
    for t in 0..trials {
        let mut rng = SplitMix64(1000 + t);
        let a = draws(&mut rng, 60, from, 0.02);
        let b = draws(&mut rng, 45, to, 0.03);
        let d = interaction(
            &a,
            &b,
            INTERACTION_REPLICATES,
            seed_for(&["t", &t.to_string()]),
        )
        .expect("an estimate");
        let ci = d.ci.expect("a CI");
        assert!(!ci.excludes(d.point), "{d:?}");
        covered += usize::from(!ci.excludes(truth));
        sum += d.point;
    }
    let coverage = covered as f64 / trials as f64;
    let mean = sum / trials as f64;
    println!("coverage {coverage:.3} of {trials}, mean Δ {mean:.5}, truth {truth:.5}");
    // Nominal 95%: a percentile bootstrap of a median at 45–60 rounds covers 92–97%.
    assert!(
        (0.90..=0.99).contains(&coverage),
        "coverage {coverage} of the true interaction {truth}"
    );
    assert!(
        (mean - truth).abs() < 0.002,
        "mean estimate {mean}, truth {truth}"
    );
    // No interaction at all: the CI holds 0 about 95% of the time, as it must to say "noise".
    let mut holds_zero = 0;
    for t in 0..100 {
        let mut rng = SplitMix64(9000 + t);
        let a = draws(&mut rng, 50, from, 0.02);
        let b = draws(&mut rng, 50, from, 0.02);
        let d = interaction(&a, &b, INTERACTION_REPLICATES, t).expect("an estimate");
        holds_zero += usize::from(!d.excludes(0.0));
    }
    println!("no interaction: the CI holds 0 in {holds_zero} of 100");
    assert!((88..=100).contains(&holds_zero), "{holds_zero} of 100");
}

#[test]
fn the_bootstrap_is_reproducible_and_refuses_nothing_to_resample() {
    let mut rng = SplitMix64(7);
    let a = draws(&mut rng, 30, 0.0, 0.01);
    let b = draws(&mut rng, 30, 0.01, 0.01);
    assert_eq!(interaction(&a, &b, 500, 42), interaction(&a, &b, 500, 42));
    assert_ne!(interaction(&a, &b, 500, 42), interaction(&a, &b, 500, 43));
    assert!(interaction(&[], &b, 500, 1).is_none());
    assert!(interaction(&[f64::NAN], &b, 500, 1).is_none());
    // A few rounds below the baseline (ln 0 = −∞) move the median by a rank, not to −∞.
    let mut with_low = a.clone();
    with_low.extend([f64::NEG_INFINITY; 3]);
    let d = interaction(&with_low, &b, 500, 42).unwrap();
    assert!(
        d.point.is_finite() && d.ci.is_some_and(|c| c.lo.is_finite() && c.hi.is_finite()),
        "{d:?}"
    );
    assert!(interaction(&a, &b, 0, 1).is_none());
    assert_eq!(median_of(&mut [3.0, 1.0, 2.0, 10.0]), 2.5);
    assert_eq!(median_of(&mut [3.0, 1.0, 2.0]), 2.0);
}

#[test]
fn irq_labels_read_as_a_person_says_them() {
    assert_eq!(irq_label("none"), "no load");
    assert_eq!(irq_label("inject@1000Hz"), "inject 1 kHz");
    assert_eq!(irq_label("inject@500Hz"), "inject 500 Hz");
    assert_eq!(irq_label("pv-event@10000Hz"), "pv-event 10 kHz");
    assert_eq!(irq_label("lapic-timer@100us"), "lapic-timer 100 µs");
    assert_eq!(irq_label("odd"), "odd");
}

/// A strategy row of the answers' test run.
fn strategy_row(strategy: &str, nesting: f64, irq: &str) -> PhaseResult {
    let group = format!("ans/n{nesting}/{irq}/1v");
    PhaseResult {
        name: format!("ans/{strategy}/n{nesting}/{irq}/1v"),
        group,
        kind: ResultKind::Strategy,
        strategy: crate::identity::Subject::from_name(strategy).expect(strategy),
        irq_source: irq.into(),
        nesting,
        vcpus: 1,
        body_ops: 4,
        precision_reached: true,
        cycles_per_op: Summary::from_samples(&[100.0; 10]),
        ..PhaseResult::default()
    }
}

/// `b vs a` of a group from its per-round log-ratios, as `measure` records it.
fn paired(a: &PhaseResult, b: &PhaseResult, logs: Vec<f64>) -> PairedComparison {
    let ratios: Vec<f64> = logs.iter().map(|l| l.exp()).collect();
    let s = Summary::from_samples(&ratios);
    PairedComparison {
        a: a.name.clone(),
        b: b.name.clone(),
        group: a.group.clone(),
        metric: ComparedMetric::CyclesPerOp,
        ratio: s.estimate(),
        rounds: logs.len() as u32,
        no_ratio: None,
        log_ratios: logs,
        nonpositive_ratios: 0,
        ci_batches: 0,
        replicates: None,
        rerun95: None,
    }
}

/// nesting [0, 0.5] × irq [none, inject 1 kHz], pvop-skip against pvop-popf: −9% everywhere
/// except −3% at nesting 0.5 without load (a nesting interaction of +6 points there, and a load
/// interaction of −6 at nesting 0.5).
pub(crate) fn two_by_two() -> RunReport {
    let mut report = RunReport {
        schema: crate::results::SCHEMA.into(),
        config_name: "answers".into(),
        ..RunReport::default()
    };
    let mut rng = SplitMix64(3);
    for nesting in [0.0, 0.5] {
        for irq in ["none", "inject@1000Hz"] {
            let a = strategy_row("pvop-popf", nesting, irq);
            let b = strategy_row("pvop-skip", nesting, irq);
            let centre = if nesting == 0.5 && irq == "none" {
                0.97f64.ln()
            } else {
                0.91f64.ln()
            };
            let logs = draws(&mut rng, 40, centre, 0.005);
            report.comparisons.push(paired(&a, &b, logs));
            report.results.extend([a, b]);
        }
    }
    fill_answers(&mut report);
    report
}

#[test]
fn a_two_by_two_run_answers_per_condition_with_each_one_factor_interaction() {
    let report = two_by_two();
    assert_eq!(report.answers.len(), 1, "{:?}", report.answers);
    let a = &report.answers[0];
    assert_eq!((a.a.name(), a.b.name()), ("pvop-popf", "pvop-skip"));
    let labels: Vec<&str> = a.conditions.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "nesting 0, no load, 1 vCPU",
            "nesting 0, inject 1 kHz, 1 vCPU",
            "nesting 0.5, no load, 1 vCPU",
            "nesting 0.5, inject 1 kHz, 1 vCPU"
        ]
    );
    // Two load interactions (one per nesting) and two nesting ones (one per load); the
    // diagonal pairs differ in two factors and have none.
    let found: Vec<(Factor, &str, &str)> = a
        .interactions
        .iter()
        .map(|i| (i.factor, i.label.as_str(), i.at.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (Factor::Load, "inject 1 kHz vs no load", "nesting 0, 1 vCPU"),
            (Factor::Nesting, "0.5 vs 0", "no load, 1 vCPU"),
            (Factor::Nesting, "0.5 vs 0", "inject 1 kHz, 1 vCPU"),
            (
                Factor::Load,
                "inject 1 kHz vs no load",
                "nesting 0.5, 1 vCPU"
            ),
        ]
    );
    let truth = 0.97f64.ln() - 0.91f64.ln();
    let by = |k: usize| a.interactions[k].delta_log.expect("an estimate");
    assert!(
        !by(0).excludes(0.0),
        "no load interaction at nesting 0: {:?}",
        by(0)
    );
    assert!(
        by(1).excludes(0.0) && (by(1).point - truth).abs() < 0.004,
        "{:?}",
        by(1)
    );
    assert!(
        by(3).excludes(0.0) && (by(3).point + truth).abs() < 0.004,
        "{:?}",
        by(3)
    );
    assert_eq!(report.interaction_method, INTERACTION_METHOD);
    // The same run gives the same answers, digit for digit.
    assert_eq!(two_by_two().answers, report.answers);
}

#[test]
fn a_condition_without_a_ratio_gives_no_interaction_and_says_why() {
    let mut report = two_by_two();
    report.comparisons[2].no_ratio = Some("0 of 40 paired rounds undisturbed".into());
    report.comparisons[2].log_ratios.clear();
    // Half the rounds below the baseline: no median ln(b/a).
    report.comparisons[3].nonpositive_ratios = 40;
    fill_answers(&mut report);
    let a = &report.answers[0];
    let nesting_none = &a.interactions[1];
    assert!(nesting_none.delta_log.is_none());
    let why = nesting_none.no_estimate.as_deref().unwrap_or_default();
    assert!(
        why.contains("no ratio under nesting 0.5, no load") && why.contains("undisturbed"),
        "{why}"
    );
    let why = a.interactions[2].no_estimate.as_deref().unwrap_or_default();
    assert!(
        why.contains("40 of 80 paired rounds") && why.contains("≤ 0"),
        "{why}"
    );
    // Too few rounds for a CI: the condition's change is not shown as if it had one.
    report.answers[0].conditions[1].rounds = 4;
    report.answers[0].conditions[1].ratio = Some(Estimate {
        point: 0.98,
        ci: None,
    });
    let line = crate::report::answer_lines::condition_value(&report.answers[0].conditions[1]);
    assert!(
        line.starts_with("−2.0% (4 rounds: too few for a CI"),
        "{line}"
    );
    // A file written before answers has ratios but no per-round log-ratios.
    report.comparisons[0].log_ratios.clear();
    fill_answers(&mut report);
    let why = report.answers[0].interactions[0].no_estimate.clone();
    assert!(why.unwrap_or_default().contains("written before answers"));
}

#[test]
fn one_condition_is_no_answer_and_instruction_groups_have_none() {
    let mut report = two_by_two();
    report.comparisons.truncate(1);
    fill_answers(&mut report);
    assert!(report.answers.is_empty() && report.interaction_method.is_empty());
    let mut insn = two_by_two();
    for r in &mut insn.results {
        r.kind = ResultKind::Insn;
    }
    fill_answers(&mut insn);
    assert!(insn.answers.is_empty());
}

#[test]
fn text_markdown_and_json_carry_every_condition_and_interaction() {
    let report = two_by_two();
    let text = crate::report::render_table_at(&report, 200);
    let md = crate::report::render_markdown(&report);
    for out in [&text, &md] {
        assert!(out.contains("pvop-skip vs pvop-popf (cycles/op)"), "{out}");
        for label in [
            "nesting 0, no load, 1 vCPU",
            "nesting 0.5, inject 1 kHz, 1 vCPU",
        ] {
            assert!(out.contains(label), "{label}: {out}");
        }
        assert!(out.contains("(40 rounds)") && out.contains("% [−"), "{out}");
        assert!(
            out.contains("load: inject 1 kHz vs no load (nesting 0, 1 vCPU): Δ = "),
            "{out}"
        );
        // The nesting-0 load interaction is noise: flagged, never a bare number.
        let line = out
            .lines()
            .find(|l| l.contains("load: inject 1 kHz vs no load (nesting 0, 1 vCPU)"))
            .unwrap();
        assert!(line.ends_with("(not beyond noise)"), "{line}");
        let line = out
            .lines()
            .find(|l| l.contains("nesting: 0.5 vs 0 (no load, 1 vCPU)"))
            .unwrap();
        assert!(
            line.contains("Δ = +6.") && line.contains("log-points") && !line.contains("noise"),
            "{line}"
        );
        assert!(out.contains("percentile bootstrap over rounds"), "legend");
    }
    assert!(md.contains("## Answers") && md.contains("| condition | b vs a |"));
    let json: serde_json::Value =
        serde_json::from_str(&crate::report::to_json(&report).unwrap()).unwrap();
    let answers = json["answers"].as_array().expect("answers[]");
    assert_eq!(answers[0]["conditions"].as_array().unwrap().len(), 4);
    assert_eq!(answers[0]["conditions"][1]["irq_source"], "inject@1000Hz");
    let i = &answers[0]["interactions"][1];
    assert_eq!(i["factor"], "nesting");
    assert!(i["delta_log"]["ci95"][0].as_f64().unwrap() > 0.0, "{i}");
    assert!(json["interaction_method"]
        .as_str()
        .unwrap()
        .contains("seed"));
    // Back from the file, the same answers.
    let back: RunReport = serde_json::from_value(json).unwrap();
    assert_eq!(back.answers, report.answers);
}

#[test]
fn the_forest_plot_has_an_interaction_panel_with_its_zero_line() {
    let report = two_by_two();
    let pages = crate::report::render_forest(&report)
        .expect("a plot")
        .expect("drawn");
    assert_eq!(pages.len(), 1, "two panels of four lines fit one page");
    let svg = pages.concat();
    if let Some(dir) = std::env::var_os("IRQBENCH_CHART_DIR") {
        std::fs::write(std::path::Path::new(&dir).join("forest-2x2.svg"), &svg).unwrap();
    }
    assert!(
        svg.contains("interactions: how the change differs between two conditions"),
        "panel title"
    );
    assert!(svg.contains("load: inject 1 kHz vs no load (nesting 0, 1 vCPU)"));
    assert!(
        svg.contains("pvop-skip vs pvop-popf (cycles/op)"),
        "answer heading"
    );
    // Four comparisons and four interactions, each a dot; two zero lines and eight whiskers.
    assert_eq!(svg.matches("<circle").count(), 8);
    assert!(svg.matches("<polyline").count() >= 10, "{svg}");
    // An interaction without an estimate is named, not drawn.
    let mut none = report.clone();
    none.answers[0].interactions[0].no_estimate = Some("no ratio".into());
    let svg = crate::report::render_forest(&none)
        .unwrap()
        .unwrap()
        .concat();
    assert_eq!(svg.matches("<circle").count(), 7);
    assert!(svg.contains("(nesting 0, 1 vCPU) (no estimate)"));
}

#[test]
fn a_vcpu_factor_is_an_interaction_of_its_own_and_twins_are_told_apart_by_bench() {
    let mut report = two_by_two();
    for r in report.results.iter_mut().filter(|r| r.nesting == 0.5) {
        r.nesting = 0.0;
        r.vcpus = 2;
    }
    fill_answers(&mut report);
    let a = &report.answers[0];
    let found: Vec<(Factor, &str, &str)> = a
        .interactions
        .iter()
        .map(|i| (i.factor, i.label.as_str(), i.at.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (Factor::Load, "inject 1 kHz vs no load", "nesting 0, 1 vCPU"),
            (Factor::Vcpus, "2 vs 1", "nesting 0, no load"),
            (Factor::Vcpus, "2 vs 1", "nesting 0, inject 1 kHz"),
            (
                Factor::Load,
                "inject 1 kHz vs no load",
                "nesting 0, 2 vCPUs"
            ),
        ]
    );
    // The same condition measured by two benches: each label names its bench.
    let mut twins = two_by_two();
    for r in twins.results.iter_mut().filter(|r| r.nesting == 0.5) {
        r.nesting = 0.0;
    }
    for c in twins.comparisons.iter_mut().skip(2) {
        c.group = c.group.replacen("ans/", "other/", 1);
    }
    fill_answers(&mut twins);
    let labels: Vec<&str> = twins.answers[0]
        .conditions
        .iter()
        .map(|c| c.label.as_str())
        .collect();
    assert_eq!(labels[0], "nesting 0, no load, 1 vCPU (ans)");
    assert_eq!(labels[2], "nesting 0, no load, 1 vCPU (other)");
    // Twins differ in no factor: no interaction between them.
    assert!(twins.answers[0]
        .interactions
        .iter()
        .all(|i| i.factor == Factor::Load));
}
