//! The SVG chart: horizontal bars, so every result name fits in full beside its bar. Bars are
//! grouped by the condition they were measured in (their group), and within it the two sides
//! of each of the run's comparisons sit next to each other (`pvop-popf`, then `pvop-skip`);
//! each condition (nesting / interrupt load / vCPU count) has its own colour and its own key
//! (`#3`, beside the bar's value and in the legend), so colours that look alike, or a print in
//! grey, still tell the bars apart; whiskers are the 95% CI of the median. One panel per unit,
//! so `cycles/op` and `cycles/insn` never share an axis.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::results::{PairedComparison, PhaseResult, ResultKind, RunReport};

use super::format::{fmt_cost, fmt_fraction, fmt_si, Estimate};
use super::table::kvm_text;

const ROW_PX: u32 = 22;
const PANEL_EXTRA_PX: u32 = 126;
/// Under the axis: its tick labels, then the legend, then the axis description.
const LEGEND_TOP_PX: i32 = 36;
const AXIS_DESC_PX: u32 = 28;
const LABEL_FONT_PX: u32 = 13;
const LEGEND_ROW_PX: u32 = 18;
/// sans-serif at 13 px averages well under this per character; long names must not clip.
const LABEL_CHAR_PX: u32 = 8;
const PALETTE: [RGBColor; 8] = [
    RGBColor(70, 120, 180),
    RGBColor(220, 130, 40),
    RGBColor(80, 160, 80),
    RGBColor(190, 60, 60),
    RGBColor(140, 100, 180),
    RGBColor(140, 90, 70),
    RGBColor(210, 110, 170),
    RGBColor(120, 120, 120),
];

/// The colour of variant `i`: the palette, then hues 137.5° apart (the golden angle, so no
/// two of the first hundreds coincide) at alternating lightness.
fn colour(i: usize) -> RGBColor {
    if let Some(c) = PALETTE.get(i) {
        return *c;
    }
    let k = i - PALETTE.len();
    let hue = (20.0 + 137.508 * k as f64).rem_euclid(360.0) / 360.0;
    let light = if k.is_multiple_of(2) { 0.42 } else { 0.58 };
    let (r, g, b) = HSLColor(hue, 0.65, light).rgb();
    RGBColor(r, g, b)
}

/// The key that names variant `i` beside its bars and in the legend.
fn key(i: usize) -> String {
    format!("#{}", i + 1)
}

/// What differs between bars of one strategy: nesting, interrupt load and vCPUs.
fn variant(r: &PhaseResult) -> String {
    let nest = if r.kind == ResultKind::Insn {
        String::new()
    } else {
        format!("nesting {}, ", fmt_fraction(r.nesting))
    };
    format!("{nest}irq {}, {} vCPU", r.irq_source, r.vcpus)
}

/// The variants of a panel in order of first appearance: one colour each.
fn variants(rows: &[&PhaseResult]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for r in rows {
        if !seen.contains(&variant(r)) {
            seen.push(variant(r));
        }
    }
    seen
}

/// A panel's rows: grouped by group in order of first appearance; within a group, each
/// comparison's `a` then `b` (so the two sides of a comparison are neighbours), then the rows no
/// comparison names, in config order.
fn ordered<'a>(rows: &[&'a PhaseResult], comparisons: &[PairedComparison]) -> Vec<&'a PhaseResult> {
    let mut groups: Vec<&str> = Vec::new();
    for r in rows {
        if !groups.contains(&r.group.as_str()) {
            groups.push(&r.group);
        }
    }
    let mut out: Vec<&PhaseResult> = Vec::new();
    for g in groups {
        let in_group: Vec<&PhaseResult> = rows.iter().copied().filter(|r| r.group == g).collect();
        let named = comparisons
            .iter()
            .filter(|c| c.group == g)
            .flat_map(|c| [&c.a, &c.b]);
        for name in named {
            if let Some(r) = in_group.iter().find(|r| &r.name == name) {
                if !out.iter().any(|o| std::ptr::eq(*o, *r)) {
                    out.push(r);
                }
            }
        }
        for r in in_group {
            if !out.iter().any(|o| std::ptr::eq(*o, r)) {
                out.push(r);
            }
        }
    }
    out
}

fn label_px(rows: &[&PhaseResult]) -> u32 {
    let longest = rows
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(1) as u32;
    longest * LABEL_CHAR_PX + 24
}

/// Where a figure's whisker ends: its CI, or its point (a figure without a CI).
fn whisker_ends(e: &Estimate) -> [f64; 2] {
    e.ci.map_or([e.point; 2], <[f64; 2]>::from)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    unit: &str,
    rows: &[&PhaseResult],
    variants: &[String],
) -> Result<(), String> {
    let n = rows.len().max(1);
    let est: Vec<Option<Estimate>> = rows.iter().map(|r| r.cycles_per_op.estimate()).collect();
    let ends = est.iter().flatten().flat_map(|e| {
        let [lo, hi] = whisker_ends(e);
        [lo, hi, e.point]
    });
    let (lo, hi) = ends
        .filter(|v| v.is_finite())
        .fold((0.0f64, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    // Room right of the longest bar for its value.
    let x_max = if hi > 0.0 { hi * 1.25 } else { 1.0 };
    let x_min = if lo < 0.0 { lo * 1.1 } else { 0.0 };
    let rough = if rows.iter().any(|r| !r.precision_reached) {
        "; ~ beside a value: precision not reached"
    } else {
        ""
    };
    let axis = format!("cycles/{unit} (median, whiskers: 95% CI){rough}");
    let mut chart = ChartBuilder::on(area)
        .caption(format!("cycles/{unit}"), ("sans-serif", 18))
        .margin(12)
        // Room under the axis for one legend line per colour.
        .x_label_area_size(
            LEGEND_TOP_PX as u32 + LEGEND_ROW_PX * variants.len() as u32 + AXIS_DESC_PX,
        )
        .y_label_area_size(label_px(rows))
        .build_cartesian_2d(x_min..x_max, 0f64..n as f64)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .light_line_style(TRANSPARENT)
        .y_labels(0)
        .x_desc(axis)
        .x_label_formatter(&|v| fmt_si(*v))
        .draw()
        .map_err(|e| e.to_string())?;
    let (base_x, base_y) = area.get_base_pixel();
    let name_style = ("sans-serif", LABEL_FONT_PX)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Right, VPos::Center));
    let value_style = ("sans-serif", 12)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, (r, e)) in rows.iter().zip(&est).enumerate() {
        // Top to bottom in config order.
        let y = (n - 1 - i) as f64;
        let which = variants.iter().position(|v| *v == variant(r)).unwrap_or(0);
        let colour = colour(which);
        // A row without data gets no bar, only its name and "no data".
        let [wlo, whi] = e.as_ref().map_or([0.0; 2], whisker_ends);
        if let Some(e) = e {
            chart
                .draw_series([Rectangle::new(
                    [(0.0, y + 0.15), (e.point.max(0.0), y + 0.85)],
                    colour.filled(),
                )])
                .map_err(|e| e.to_string())?;
            let style = BLACK.stroke_width(2);
            let whisker = [
                vec![(wlo, y + 0.5), (whi, y + 0.5)],
                vec![(wlo, y + 0.3), (wlo, y + 0.7)],
                vec![(whi, y + 0.3), (whi, y + 0.7)],
            ];
            chart
                .draw_series(whisker.into_iter().map(|l| PathElement::new(l, style)))
                .map_err(|e| e.to_string())?;
        }
        let (px, py) = chart.backend_coord(&(x_min, y + 0.5));
        area.draw(&Text::new(
            r.name.clone(),
            (px - base_x - 6, py - base_y),
            name_style.clone(),
        ))
        .map_err(|e| e.to_string())?;
        let text_x = e.map_or(0.0, |e| whi.max(e.point)).max(0.0) + (x_max - x_min) * 0.01;
        chart
            .draw_series([Text::new(
                format!(
                    "{}{}  {}",
                    fmt_cost(*e),
                    if r.precision_reached { "" } else { " ~" },
                    key(which)
                ),
                (text_x, y + 0.5),
                value_style.clone(),
            )])
            .map_err(|e| e.to_string())?;
    }
    draw_legend(area, label_px(rows) as i32 + 12, variants)
}

/// The legend goes below the axis, where no bar can hide it: one colour and key per variant.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    x0: i32,
    variants: &[String],
) -> Result<(), String> {
    let (_, height) = area.dim_in_pixel();
    for (i, v) in variants.iter().enumerate() {
        // From just under the tick labels down, so the axis description below stays clear.
        let label_area =
            LEGEND_TOP_PX + (LEGEND_ROW_PX * variants.len() as u32 + AXIS_DESC_PX) as i32;
        let y = height as i32 - 12 - label_area + LEGEND_TOP_PX + i as i32 * LEGEND_ROW_PX as i32;
        area.draw(&Rectangle::new(
            [(x0, y - 5), (x0 + 12, y + 5)],
            colour(i).filled(),
        ))
        .map_err(|e| e.to_string())?;
        let style = ("sans-serif", LABEL_FONT_PX)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        area.draw(&Text::new(format!("{}  {v}", key(i)), (x0 + 18, y), style))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The chart as SVG text: one panel per unit (op, insn).
pub fn render_svg(report: &RunReport) -> Result<String, String> {
    let mut panels: Vec<(&str, Vec<&PhaseResult>)> = Vec::new();
    for r in &report.results {
        let unit = r.kind.unit();
        match panels.iter_mut().find(|(u, _)| *u == unit) {
            Some((_, rows)) => rows.push(r),
            None => panels.push((unit, vec![r])),
        }
    }
    let panels: Vec<(&str, Vec<&PhaseResult>)> = panels
        .into_iter()
        .map(|(u, rows)| (u, ordered(&rows, &report.comparisons)))
        .collect();
    let heights: Vec<u32> = panels
        .iter()
        .map(|(_, rows)| {
            rows.len() as u32 * ROW_PX
                + PANEL_EXTRA_PX
                + LEGEND_ROW_PX * variants(rows).len() as u32
        })
        .collect();
    let widest = panels.iter().map(|(_, r)| label_px(r)).max().unwrap_or(100);
    let width = (widest + 760).max(1000);
    let height = heights.iter().sum::<u32>().max(200) + 50;

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let h = &report.host;
        let title = format!(
            "irqbench {}: {}, {}, kernel {}{}",
            report.config_name,
            h.cpu_model,
            kvm_text(report),
            h.kernel_release,
            if report.partial { " (PARTIAL)" } else { "" }
        );
        let mut rest = root
            .titled(&title, ("sans-serif", 20))
            .map_err(|e| e.to_string())?;
        for ((unit, rows), px) in panels.iter().zip(heights) {
            let (panel, below) = rest.split_vertically(px);
            draw_panel(&panel, unit, rows, &variants(rows))?;
            rest = below;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    // XML 1.0 has no place for most control characters (not even as references): a name that
    // holds one is drawn with it escaped, and the file stays well-formed.
    Ok(crate::text::xml_for_terminal(&svg).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Summary;

    #[test]
    fn colours_stay_distinct_past_the_palette() {
        let all: Vec<RGBColor> = (0..60).map(colour).collect();
        for (i, x) in all.iter().enumerate() {
            for y in &all[i + 1..] {
                assert_ne!((x.0, x.1, x.2), (y.0, y.1, y.2), "colour {i} repeats");
            }
        }
    }

    #[test]
    fn past_ten_variants_every_bar_and_legend_entry_has_its_key() {
        let results: Vec<PhaseResult> = (0..14)
            .map(|i| PhaseResult {
                name: format!("b/pvop-skip/n{i}/none/1v"),
                strategy: crate::identity::Subject::from_name("pvop-skip").expect("a strategy"),
                nesting: f64::from(i),
                irq_source: "none".into(),
                vcpus: 1,
                cycles_per_op: Summary::from_samples(&[100.0 + f64::from(i); 8]),
                ..PhaseResult::default()
            })
            .collect();
        let report = RunReport {
            config_name: "many".into(),
            results,
            ..RunReport::default()
        };
        let svg = render_svg(&report).unwrap();
        // IRQBENCH_CHART_DIR=DIR keeps the chart, to look at it rendered.
        if let Some(dir) = std::env::var_os("IRQBENCH_CHART_DIR") {
            std::fs::write(
                std::path::Path::new(&dir).join("rows-14-variants.svg"),
                &svg,
            )
            .unwrap();
        }
        for i in 1..=14 {
            let legend = format!("#{i}  nesting {}, irq none", i - 1);
            // Every row here is short of its precision (the default): marked beside its value.
            assert!(svg.contains(&format!(" ~  #{i}\n")), "#{i} not marked ~");
            assert!(svg.contains(&legend), "{legend} missing");
            assert_eq!(
                svg.matches(&format!(" ~  #{i}\n")).count(),
                1,
                "#{i} beside its bar"
            );
        }
    }

    #[test]
    fn the_two_sides_of_each_comparison_are_neighbours_within_their_group() {
        let row = |group: &str, strategy: &str| PhaseResult {
            name: format!("{group}/{strategy}"),
            group: group.into(),
            strategy: crate::identity::Subject::from_name(strategy).expect(strategy),
            ..Default::default()
        };
        let rows: Vec<PhaseResult> = ["g/n0", "g/n0.5"]
            .iter()
            .flat_map(|g| {
                ["native-popf", "pvop-popf", "native-skip", "pvop-skip"].map(|s| row(g, s))
            })
            .collect();
        let pair = |g: &str, a: &str, b: &str| PairedComparison {
            a: format!("{g}/{a}"),
            b: format!("{g}/{b}"),
            group: g.into(),
            ..Default::default()
        };
        let comparisons: Vec<PairedComparison> = ["g/n0", "g/n0.5"]
            .iter()
            .flat_map(|g| {
                [
                    pair(g, "native-popf", "native-skip"),
                    pair(g, "pvop-popf", "pvop-skip"),
                ]
            })
            .collect();
        let refs: Vec<&PhaseResult> = rows.iter().collect();
        let names: Vec<&str> = ordered(&refs, &comparisons)
            .iter()
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "g/n0/native-popf",
                "g/n0/native-skip",
                "g/n0/pvop-popf",
                "g/n0/pvop-skip",
                "g/n0.5/native-popf",
                "g/n0.5/native-skip",
                "g/n0.5/pvop-popf",
                "g/n0.5/pvop-skip",
            ]
        );
    }
}
