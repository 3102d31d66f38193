//! The chart of the answer: a forest plot of the run's comparisons. One line per comparison,
//! `b vs a` as the change in percent with its 95% CI, grouped under the condition (group) it
//! was measured in, around a zero line. A comparison beyond noise (its CI excludes 0) is drawn
//! dark, one within noise grey; a row that did not reach its precision is marked `~` and drawn
//! hollow, as the table marks it. A second panel shows the interactions of the run's answers
//! (how much a comparison's change differs between two conditions), around its own zero line.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::results::{PairedComparison, PhaseResult, RunReport};

const ROW_PX: u32 = 22;
const EXTRA_PX: u32 = 120;
const LABEL_FONT_PX: u32 = 13;
const LABEL_CHAR_PX: u32 = 8;
const BEYOND: RGBColor = RGBColor(40, 70, 140);
const WITHIN: RGBColor = RGBColor(150, 150, 150);

/// One line of the plot: a heading (a group, or an answer) or an estimate.
enum Line {
    Heading(String),
    Estimate {
        label: String,
        /// Median and CI in percent (points); `None`: nothing to draw, the label says why.
        value: Option<[f64; 3]>,
        /// Drawn hollow: a row did not reach its precision.
        imprecise: bool,
    },
}

/// The group or strategy name a comparison line shows for a row.
fn strategy<'a>(r: Option<&'a PhaseResult>, name: &'a str) -> &'a str {
    match r {
        Some(r) => r.strategy.name(),
        None => name,
    }
}

fn comparison_line(report: &RunReport, c: &PairedComparison) -> Line {
    let (a, b) = (report.row(&c.a), report.row(&c.b));
    let imprecise = [a, b]
        .iter()
        .any(|r| r.is_some_and(|r| !r.precision_reached));
    // A ratio from too few rounds for a CI is no point with whiskers, and its label says so.
    let finite = c.has_ci();
    // The group header names the condition; the line names what was compared.
    let label = format!(
        "{} vs {}{}{}",
        strategy(b, &c.b),
        strategy(a, &c.a),
        if imprecise { " ~" } else { "" },
        if c.no_ratio.is_some() {
            " (no ratio)"
        } else if !finite {
            " (too few rounds for a CI)"
        } else {
            ""
        }
    );
    let value = finite
        .then(|| [c.ratio.median, c.ratio.ci95[0], c.ratio.ci95[1]].map(|r| (r - 1.0) * 100.0));
    Line::Estimate {
        label,
        value,
        imprecise,
    }
}

/// The comparisons' lines: groups in order of first appearance, each with its comparisons.
fn comparison_lines(report: &RunReport) -> Vec<Line> {
    let mut groups: Vec<&str> = Vec::new();
    for c in &report.comparisons {
        if !groups.contains(&c.group.as_str()) {
            groups.push(&c.group);
        }
    }
    let mut out = Vec::new();
    for g in groups {
        out.push(Line::Heading(g.to_string()));
        for c in report.comparisons.iter().filter(|c| c.group == g) {
            out.push(comparison_line(report, c));
        }
    }
    out
}

/// The interactions' lines: one heading per answer that has any.
fn interaction_lines(report: &RunReport) -> Vec<Line> {
    let mut out = Vec::new();
    for a in report.answers.iter().filter(|a| !a.interactions.is_empty()) {
        out.push(Line::Heading(super::answers_text::heading(a)));
        for i in &a.interactions {
            let d = &i.delta_log;
            let value = (i.no_estimate.is_none() && d.median.is_finite())
                .then(|| [d.median, d.ci95[0], d.ci95[1]].map(|v| v * 100.0));
            let none = if value.is_none() {
                " (no estimate)"
            } else {
                ""
            };
            out.push(Line::Estimate {
                label: format!("{}{none}", super::answers_text::interaction_label(i)),
                value,
                imprecise: false,
            });
        }
    }
    out
}

/// The x range: every CI and zero, padded.
fn x_range(lines: &[Line]) -> (f64, f64) {
    let (lo, hi) = lines
        .iter()
        .filter_map(|l| match l {
            Line::Estimate { value, .. } => *value,
            Line::Heading(_) => None,
        })
        .flatten()
        .filter(|v| v.is_finite())
        .fold((0.0f64, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    let pad = ((hi - lo) * 0.08).max(1.0);
    (lo - pad, hi + pad)
}

fn label_text(line: &Line) -> (String, bool) {
    match line {
        Line::Heading(g) => (g.clone(), true),
        Line::Estimate { label, .. } => (format!("  {label}"), false),
    }
}

fn draw(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    lines: &[Line],
    label_px: u32,
    x_desc: &str,
) -> Result<(), String> {
    let n = lines.len().max(1);
    let (x0, x1) = x_range(lines);
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(label_px)
        .build_cartesian_2d(x0..x1, 0f64..n as f64)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .x_desc(x_desc)
        .draw()
        .map_err(|e| e.to_string())?;
    chart
        .draw_series([PathElement::new(
            [(0.0, 0.0), (0.0, n as f64)],
            BLACK.stroke_width(1),
        )])
        .map_err(|e| e.to_string())?;
    let (base_x, base_y) = area.get_base_pixel();
    for (i, line) in lines.iter().enumerate() {
        // Top to bottom in plan order.
        let y = (n - 1 - i) as f64 + 0.5;
        let (px, py) = chart.backend_coord(&(x0, y));
        let (text, bold) = label_text(line);
        let font = ("sans-serif", LABEL_FONT_PX).into_font();
        let font = if bold {
            font.style(FontStyle::Bold)
        } else {
            font
        };
        let style = font.color(&BLACK).pos(Pos::new(HPos::Right, VPos::Center));
        area.draw(&Text::new(text, (px - base_x - 6, py - base_y), style))
            .map_err(|e| e.to_string())?;
        let Line::Estimate {
            value: Some([mark, lo, hi]),
            imprecise,
            ..
        } = line
        else {
            // A heading, or no figure: the label says so, nothing is drawn.
            continue;
        };
        let colour = if *lo > 0.0 || *hi < 0.0 {
            BEYOND
        } else {
            WITHIN
        };
        chart
            .draw_series([PathElement::new(
                [(*lo, y), (*hi, y)],
                colour.stroke_width(2),
            )])
            .map_err(|e| e.to_string())?;
        let style = if *imprecise {
            colour.stroke_width(2)
        } else {
            colour.filled()
        };
        chart
            .draw_series([Circle::new((*mark, y), 5, style)])
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn panel_px(lines: &[Line]) -> u32 {
    lines.len() as u32 * ROW_PX + EXTRA_PX
}

/// The forest plot as SVG text; `None` when the run has no comparison to draw. The
/// interactions of the run's answers, when there are any, are a second panel below.
pub fn render_forest(report: &RunReport) -> Option<Result<String, String>> {
    let lines = comparison_lines(report);
    if lines.is_empty() {
        return None;
    }
    let second = interaction_lines(report);
    let longest = lines
        .iter()
        .chain(&second)
        .map(|l| label_text(l).0.chars().count())
        .max()
        .unwrap_or(10) as u32;
    let label_px = longest * LABEL_CHAR_PX + 24;
    let width = (label_px + 700).max(900);
    let height = panel_px(&lines)
        + if second.is_empty() {
            0
        } else {
            panel_px(&second)
        };
    let mut svg = String::new();
    let drawn = (|| {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let title = format!(
            "irqbench {}: comparisons (dark: beyond noise; ~: precision not reached){}",
            report.config_name,
            if report.partial { " (PARTIAL)" } else { "" }
        );
        let area = root
            .titled(&title, ("sans-serif", 18))
            .map_err(|e| e.to_string())?;
        let (top, bottom) = area.split_vertically(panel_px(&lines) - 30);
        draw(
            &top,
            &lines,
            label_px,
            "change of b against a, % (median of per-round paired ratios, whiskers: 95% CI)",
        )?;
        if !second.is_empty() {
            let bottom = bottom
                .titled(
                    "interactions: how the change differs between two conditions",
                    ("sans-serif", 16),
                )
                .map_err(|e| e.to_string())?;
            draw(
                &bottom,
                &second,
                label_px,
                "Δ, log-points (100 × difference of median ln(b/a); whiskers: seeded bootstrap 95% CI)",
            )?;
        }
        root.present().map_err(|e| e.to_string())
    })();
    Some(drawn.map(|()| crate::text::xml_for_terminal(&svg).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Interval;

    fn cmp(group: &str, a: &str, b: &str, ratio: f64, ci: [f64; 2]) -> PairedComparison {
        PairedComparison {
            a: format!("{group}/{a}"),
            b: format!("{group}/{b}"),
            group: group.into(),
            ratio: Interval {
                median: ratio,
                ci95: ci,
            },
            rounds: 100,
            ..Default::default()
        }
    }

    #[test]
    fn every_comparison_is_a_line_under_its_group_with_a_zero_line() {
        let mut report = RunReport {
            config_name: "t".into(),
            comparisons: vec![
                cmp("g/n0", "pvop-popf", "pvop-skip", 0.91, [0.90, 0.92]),
                cmp("g/n0.5", "pvop-popf", "pvop-skip", 1.001, [0.995, 1.006]),
            ],
            ..Default::default()
        };
        for (name, strategy, precise) in [
            ("g/n0.5/pvop-skip", "pvop-skip", false),
            ("g/n0.5/pvop-popf", "pvop-popf", true),
        ] {
            report.results.push(PhaseResult {
                name: name.into(),
                strategy: crate::identity::Subject::from_name(strategy).expect(strategy),
                precision_reached: precise,
                ..Default::default()
            });
        }
        let svg = render_forest(&report).expect("a plot").expect("drawn");
        assert!(
            svg.contains("g/n0") && svg.contains("g/n0.5"),
            "group headers"
        );
        assert_eq!(
            svg.matches("pvop-skip vs pvop-popf").count(),
            1,
            "by strategy"
        );
        assert_eq!(
            svg.matches("g/n0/pvop-skip vs g/n0/pvop-popf").count(),
            1,
            "by name"
        );
        assert!(svg.contains("pvop-skip vs pvop-popf ~"), "imprecise marked");
        // Two whiskers and the zero line.
        assert!(svg.matches("<polyline").count() >= 3, "{svg}");
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(render_forest(&RunReport::default()).is_none());
    }
}
