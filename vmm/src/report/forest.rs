//! The chart of the answer, for slides: forest plots of the run's comparisons on 16:9 pages of
//! at most 1600×900. Each question (a comparison measured across conditions, one of the run's
//! answers) is one panel, a line per condition, `b vs a` as the change in percent with its 95%
//! CI around a zero line; its interactions (how much the change differs between two
//! conditions) are the next panel, around their own zero line. Comparisons measured in one
//! condition only share a last panel, under their group. A comparison beyond noise (its CI
//! excludes 0) is drawn dark, one within noise grey; a row that did not reach its precision is
//! marked `~` and drawn hollow, as the table marks it. What does not fit one page goes on the
//! next: numbered files, never one tall chart.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::results::{Answer, Estimate, PairedComparison, PhaseResult, RunReport};

/// A page: 16:9, the largest a slide needs.
pub const PAGE_PX: (u32, u32) = (1600, 900);
const TITLE_PX: u32 = 44;
/// A panel's own title, x axis and margins.
const PANEL_EXTRA_PX: u32 = 96;
const ROW_PX: u32 = 22;
/// A page with few lines spreads them, up to this many times [`ROW_PX`].
const MAX_STRETCH: f64 = 2.0;
const LABEL_FONT_PX: u32 = 13;
const LABEL_CHAR_PX: u32 = 8;
/// Labels take at most this much of the width; a longer one is cut with `…`.
const MAX_LABEL_PX: u32 = 760;
const BEYOND: RGBColor = RGBColor(40, 70, 140);
const WITHIN: RGBColor = RGBColor(150, 150, 150);
const CHANGE_AXIS: &str =
    "change of b against a, % (median of per-round paired ratios, whiskers: 95% CI)";
const DELTA_AXIS: &str =
    "Δ, log-points (100 × difference of median ln(b/a); whiskers: seeded bootstrap 95% CI)";

/// One line of a panel: a heading (a group) or an estimate.
#[derive(Clone)]
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

/// A panel: a title, its x axis, its lines around one zero line.
#[derive(Clone)]
struct Panel {
    title: String,
    x_desc: &'static str,
    lines: Vec<Line>,
}

impl Panel {
    fn px(&self) -> u32 {
        self.lines.len() as u32 * ROW_PX + PANEL_EXTRA_PX
    }
}

/// The group or strategy name a comparison line shows for a row.
fn strategy<'a>(r: Option<&'a PhaseResult>, name: &'a str) -> &'a str {
    match r {
        Some(r) => r.strategy.name(),
        None => name,
    }
}

/// `(group, b, a)`: what an answer's condition and a comparison share.
fn comparison_key<'a>(
    report: &'a RunReport,
    c: &'a PairedComparison,
) -> (&'a str, &'a str, &'a str) {
    let (a, b) = (report.row(&c.a), report.row(&c.b));
    (c.group.as_str(), strategy(b, &c.b), strategy(a, &c.a))
}

/// ` ~`, ` (no ratio)`, ` (too few rounds for a CI)`: what a line's label adds.
fn marks(imprecise: bool, no_ratio: bool, has_ci: bool) -> String {
    let mut s = String::from(if imprecise { " ~" } else { "" });
    if no_ratio {
        s.push_str(" (no ratio)");
    } else if !has_ci {
        s.push_str(" (too few rounds for a CI)");
    }
    s
}

fn percent(e: Estimate) -> Option<[f64; 3]> {
    let ci = e.ci?;
    Some([e.point, ci.lo, ci.hi].map(|r| (r - 1.0) * 100.0))
}

fn comparison_line(report: &RunReport, c: &PairedComparison) -> Line {
    let (a, b) = (report.row(&c.a), report.row(&c.b));
    let imprecise = [a, b]
        .iter()
        .any(|r| r.is_some_and(|r| !r.precision_reached));
    let (_, bn, an) = comparison_key(report, c);
    let value = c.ratio.and_then(percent);
    Line::Estimate {
        label: format!(
            "{bn} vs {an}{}",
            marks(imprecise, c.no_ratio.is_some(), value.is_some())
        ),
        value,
        imprecise,
    }
}

/// A question's panel: one line per condition it was measured in.
fn answer_panel(a: &Answer) -> Panel {
    let lines = a
        .conditions
        .iter()
        .map(|c| {
            let value = c.ratio.filter(|_| c.no_ratio.is_none()).and_then(percent);
            let imprecise = !c.precision_reached;
            Line::Estimate {
                label: format!(
                    "{}{}",
                    c.label,
                    marks(imprecise, c.no_ratio.is_some(), value.is_some())
                ),
                value,
                imprecise,
            }
        })
        .collect();
    Panel {
        title: super::answer_lines::heading(a),
        x_desc: CHANGE_AXIS,
        lines,
    }
}

/// A question's interactions, when it has any.
fn interaction_panel(a: &Answer) -> Option<Panel> {
    let lines: Vec<Line> = a
        .interactions
        .iter()
        .map(|i| {
            let d = i.delta_log.filter(|_| i.no_estimate.is_none());
            let value = d.and_then(|d| Some([d.point, d.ci?.lo, d.ci?.hi].map(|v| v * 100.0)));
            let none = if value.is_none() {
                " (no estimate)"
            } else {
                ""
            };
            Line::Estimate {
                label: format!("{}{none}", super::answer_lines::interaction_label(i)),
                value,
                imprecise: false,
            }
        })
        .collect();
    (!lines.is_empty()).then(|| Panel {
        title: format!(
            "interactions: how the change differs between two conditions, {}",
            super::answer_lines::heading(a)
        ),
        x_desc: DELTA_AXIS,
        lines,
    })
}

/// The comparisons no answer holds (measured in one condition): under their groups, in order
/// of first appearance.
fn single_condition_panel(report: &RunReport) -> Option<Panel> {
    let answered = |c: &PairedComparison| {
        let (g, b, a) = comparison_key(report, c);
        report.answers.iter().any(|ans| {
            ans.b.name() == b && ans.a.name() == a && ans.conditions.iter().any(|k| k.group == g)
        })
    };
    let rest: Vec<&PairedComparison> = report.comparisons.iter().filter(|c| !answered(c)).collect();
    let mut groups: Vec<&str> = Vec::new();
    for c in &rest {
        if !groups.contains(&c.group.as_str()) {
            groups.push(&c.group);
        }
    }
    let mut lines = Vec::new();
    for g in groups {
        lines.push(Line::Heading(g.to_string()));
        lines.extend(
            rest.iter()
                .filter(|c| c.group == g)
                .map(|c| comparison_line(report, c)),
        );
    }
    let title = if report.answers.is_empty() {
        "comparisons"
    } else {
        "comparisons measured in one condition"
    };
    (!lines.is_empty()).then(|| Panel {
        title: title.into(),
        x_desc: CHANGE_AXIS,
        lines,
    })
}

/// Every panel, in reading order: each question and its interactions, then the rest.
fn panels(report: &RunReport) -> Vec<Panel> {
    let mut out = Vec::new();
    for a in &report.answers {
        out.push(answer_panel(a));
        out.extend(interaction_panel(a));
    }
    out.extend(single_condition_panel(report));
    out
}

/// Panels laid out on pages: in order, as many as fit a page; a panel taller than a page is
/// cut into parts, each titled `(part k of n)`.
fn paginate(panels: Vec<Panel>) -> Vec<Vec<Panel>> {
    let room = PAGE_PX.1 - TITLE_PX;
    let max_lines = ((room - PANEL_EXTRA_PX) / ROW_PX) as usize;
    let mut pieces = Vec::new();
    for p in panels {
        let parts = p.lines.len().div_ceil(max_lines).max(1);
        for (k, chunk) in p.lines.chunks(max_lines).enumerate() {
            let title = if parts > 1 {
                format!("{} (part {} of {parts})", p.title, k + 1)
            } else {
                p.title.clone()
            };
            pieces.push(Panel {
                title,
                x_desc: p.x_desc,
                lines: chunk.to_vec(),
            });
        }
    }
    let mut pages: Vec<Vec<Panel>> = Vec::new();
    let mut used = room;
    for p in pieces {
        if used + p.px() > room {
            pages.push(Vec::new());
            used = 0;
        }
        used += p.px();
        pages.last_mut().expect("a page was pushed").push(p);
    }
    pages
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

/// A line's label and whether it is bold, cut to `max_chars` with `…`.
fn label_text(line: &Line, max_chars: usize) -> (String, bool) {
    let (text, bold) = match line {
        Line::Heading(g) => (g.clone(), true),
        Line::Estimate { label, .. } => (format!("  {label}"), false),
    };
    if text.chars().count() <= max_chars {
        return (text, bold);
    }
    let cut: String = text.chars().take(max_chars.saturating_sub(1)).collect();
    (format!("{cut}…"), bold)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// One estimate's whisker and dot at height `y`.
fn draw_estimate<C>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, C>,
    y: f64,
    [mark, lo, hi]: [f64; 3],
    imprecise: bool,
) -> Result<(), String>
where
    C: CoordTranslate<From = (f64, f64)>,
{
    let colour = if lo > 0.0 || hi < 0.0 { BEYOND } else { WITHIN };
    chart
        .plotting_area()
        .draw(&PathElement::new(
            [(lo, y), (hi, y)],
            colour.stroke_width(2),
        ))
        .map_err(|e| e.to_string())?;
    let style = if imprecise {
        colour.stroke_width(2)
    } else {
        colour.filled()
    };
    chart
        .plotting_area()
        .draw(&Circle::new((mark, y), 5, style))
        .map_err(|e| e.to_string())
}

/// One panel: its title, a zero line, a labelled line per estimate.
fn draw_panel(area: &Area<'_>, panel: &Panel, label_px: u32) -> Result<(), String> {
    let area = area
        .titled(
            &panel.title,
            ("sans-serif", 16).into_font().style(FontStyle::Bold),
        )
        .map_err(|e| e.to_string())?;
    let lines = &panel.lines;
    let n = lines.len().max(1);
    let (x0, x1) = x_range(lines);
    let mut chart = ChartBuilder::on(&area)
        .margin(8)
        .x_label_area_size(40)
        .y_label_area_size(label_px)
        .build_cartesian_2d(x0..x1, 0f64..n as f64)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .x_desc(panel.x_desc)
        .draw()
        .map_err(|e| e.to_string())?;
    chart
        .draw_series([PathElement::new(
            [(0.0, 0.0), (0.0, n as f64)],
            BLACK.stroke_width(1),
        )])
        .map_err(|e| e.to_string())?;
    let (base_x, base_y) = area.get_base_pixel();
    let max_chars = ((label_px - 24) / LABEL_CHAR_PX) as usize;
    for (i, line) in lines.iter().enumerate() {
        // Top to bottom in order.
        let y = (n - 1 - i) as f64 + 0.5;
        let (px, py) = chart.backend_coord(&(x0, y));
        let (text, bold) = label_text(line, max_chars);
        let font = ("sans-serif", LABEL_FONT_PX).into_font();
        let font = if bold {
            font.style(FontStyle::Bold)
        } else {
            font
        };
        let style = font.color(&BLACK).pos(Pos::new(HPos::Right, VPos::Center));
        area.draw(&Text::new(text, (px - base_x - 6, py - base_y), style))
            .map_err(|e| e.to_string())?;
        if let Line::Estimate {
            value: Some(v),
            imprecise,
            ..
        } = line
        {
            draw_estimate(&mut chart, y, *v, *imprecise)?;
        }
    }
    Ok(())
}

/// One page as SVG text: the title, then its panels one under the other, each as tall as its
/// lines need, stretched up to [`MAX_STRETCH`] when the page has room.
fn render_page(
    report: &RunReport,
    page: &[Panel],
    k: usize,
    pages: usize,
) -> Result<String, String> {
    let longest = page
        .iter()
        .flat_map(|p| &p.lines)
        .map(|l| label_text(l, usize::MAX).0.chars().count())
        .max()
        .unwrap_or(10) as u32;
    let label_px = (longest * LABEL_CHAR_PX + 24).min(MAX_LABEL_PX);
    let room = PAGE_PX.1 - TITLE_PX;
    let needed: u32 = page.iter().map(Panel::px).sum();
    let stretch = (f64::from(room) / f64::from(needed.max(1))).min(MAX_STRETCH);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, PAGE_PX).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let numbered = if pages > 1 {
            format!(" (page {k} of {pages})")
        } else {
            String::new()
        };
        let title = format!(
            "irqbench {}: comparisons (dark: beyond noise; hollow, ~: precision not reached){}{numbered}",
            report.config_name,
            if report.partial { " (PARTIAL)" } else { "" }
        );
        let mut rest = root
            .titled(&title, ("sans-serif", 20))
            .map_err(|e| e.to_string())?;
        for panel in page {
            let h = (f64::from(panel.px()) * stretch) as u32;
            let (this, below) = rest.split_vertically(h);
            draw_panel(&this, panel, label_px)?;
            rest = below;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(crate::text::xml_for_terminal(&svg).into_owned())
}

/// The forest plot as SVG pages of [`PAGE_PX`] (written as `forest.svg`, `forest-2.svg`, …);
/// `None` when the run has no comparison to draw.
pub fn render_forest(report: &RunReport) -> Option<Result<Vec<String>, String>> {
    if report.comparisons.is_empty() {
        return None;
    }
    let pages = paginate(panels(report));
    let n = pages.len();
    Some(
        pages
            .iter()
            .enumerate()
            .map(|(k, page)| render_page(report, page, k + 1, n))
            .collect(),
    )
}

/// The file name of page `k` (1-based) of a forest plot named `first` (`forest.svg`,
/// `x.forest.svg`): the first keeps its name, the others are numbered (`forest-2.svg`).
pub fn forest_page_name(first: &str, k: usize) -> String {
    if k <= 1 {
        return first.to_string();
    }
    match first.strip_suffix(".svg") {
        Some(stem) => format!("{stem}-{k}.svg"),
        None => format!("{first}-{k}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Ci, Estimate};

    fn cmp(group: &str, a: &str, b: &str, ratio: f64, ci: [f64; 2]) -> PairedComparison {
        PairedComparison {
            a: format!("{group}/{a}"),
            b: format!("{group}/{b}"),
            group: group.into(),
            ratio: Some(Estimate {
                point: ratio,
                ci: Some(Ci::from(ci)),
            }),
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
        let pages = render_forest(&report).expect("a plot").expect("drawn");
        assert_eq!(pages.len(), 1, "five lines fit one page");
        let svg = &pages[0];
        assert!(svg.contains(r#"width="1600" height="900""#), "16:9");
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

    #[test]
    fn more_lines_than_a_page_holds_go_on_numbered_pages_of_the_same_size() {
        let groups: Vec<String> = (0..90).map(|i| format!("g/n{i}")).collect();
        let report = RunReport {
            config_name: "big".into(),
            comparisons: groups
                .iter()
                .map(|g| cmp(g, "pvop-popf", "pvop-skip", 0.93, [0.92, 0.94]))
                .collect(),
            ..Default::default()
        };
        let pages = render_forest(&report).expect("a plot").expect("drawn");
        // 180 lines (a heading and a comparison per group), at most 34 a page.
        assert!(pages.len() >= 6, "{} pages", pages.len());
        for (k, svg) in pages.iter().enumerate() {
            assert!(svg.contains(r#"width="1600" height="900""#), "page {k}");
            assert!(svg.contains(&format!("(page {} of {})", k + 1, pages.len())));
        }
        let drawn: usize = pages.iter().map(|s| s.matches("<circle").count()).sum();
        assert_eq!(drawn, 90, "every comparison once");
        assert!(
            pages[0].contains("(part 1 of"),
            "a panel cut into parts says so"
        );
        assert_eq!(forest_page_name("forest.svg", 1), "forest.svg");
        assert_eq!(forest_page_name("x.forest.svg", 3), "x.forest-3.svg");
    }
}
