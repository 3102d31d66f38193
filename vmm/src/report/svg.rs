//! The SVG chart: horizontal bars, so every result name fits in full beside its bar. Bars are
//! grouped by strategy (or instruction), one bar per nesting / interrupt load / vCPU count, each
//! of those in its own colour (legend); whiskers are the 95% CI of the median. One panel per
//! unit, so `cycles/op` and `cycles/insn` never share an axis.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::results::{PhaseResult, ResultKind, RunReport};

use super::format::{fmt_cost, fmt_fraction, fmt_si, Estimate};
use super::table::kvm_text;

const ROW_PX: u32 = 22;
const PANEL_EXTRA_PX: u32 = 110;
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

/// A panel's rows: grouped by strategy in order of first appearance, config order within.
fn ordered<'a>(rows: &[&'a PhaseResult]) -> Vec<&'a PhaseResult> {
    let mut strategies: Vec<crate::identity::Subject> = Vec::new();
    for r in rows {
        if !strategies.contains(&r.strategy) {
            strategies.push(r.strategy);
        }
    }
    strategies
        .iter()
        .flat_map(|s| rows.iter().copied().filter(move |r| r.strategy == *s))
        .collect()
}

fn label_px(rows: &[&PhaseResult]) -> u32 {
    let longest = rows
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(1) as u32;
    longest * LABEL_CHAR_PX + 24
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    unit: &str,
    rows: &[&PhaseResult],
    variants: &[String],
) -> Result<(), String> {
    let n = rows.len().max(1);
    let est: Vec<Estimate> = rows
        .iter()
        .map(|r| Estimate::of(&r.cycles_per_op))
        .collect();
    let ends = est.iter().flat_map(|e| {
        let [lo, hi] = e.ci.unwrap_or([e.median, e.median]);
        [lo, hi, e.median]
    });
    let (lo, hi) = ends
        .filter(|v| v.is_finite())
        .fold((0.0f64, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    // Room right of the longest bar for its value.
    let x_max = if hi > 0.0 { hi * 1.25 } else { 1.0 };
    let x_min = if lo < 0.0 { lo * 1.1 } else { 0.0 };
    let axis = format!("cycles/{unit} (median, whiskers: 95% CI)");
    let mut chart = ChartBuilder::on(area)
        .caption(format!("cycles/{unit}"), ("sans-serif", 18))
        .margin(12)
        // Room under the axis for one legend line per colour.
        .x_label_area_size(48 + LEGEND_ROW_PX * variants.len() as u32)
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
        let colour =
            PALETTE[variants.iter().position(|v| *v == variant(r)).unwrap_or(0) % PALETTE.len()];
        // A row without data gets no bar, only its name and "no data".
        let [wlo, whi] = e.ci.unwrap_or([e.median, e.median]);
        if e.median.is_finite() {
            chart
                .draw_series([Rectangle::new(
                    [(0.0, y + 0.15), (e.median.max(0.0), y + 0.85)],
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
        let text_x = [whi, e.median, 0.0]
            .into_iter()
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::max)
            + (x_max - x_min) * 0.01;
        chart
            .draw_series([Text::new(
                fmt_cost(*e),
                (text_x, y + 0.5),
                value_style.clone(),
            )])
            .map_err(|e| e.to_string())?;
    }
    // The legend goes below the axis, where no bar can hide it.
    let (_, height) = area.dim_in_pixel();
    let x0 = label_px(rows) as i32 + 12;
    for (i, v) in variants.iter().enumerate() {
        let y = height as i32 - 12 - (variants.len() - 1 - i) as i32 * LEGEND_ROW_PX as i32;
        area.draw(&Rectangle::new(
            [(x0, y - 5), (x0 + 12, y + 5)],
            PALETTE[i % PALETTE.len()].filled(),
        ))
        .map_err(|e| e.to_string())?;
        let style = ("sans-serif", LABEL_FONT_PX)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        area.draw(&Text::new(v.clone(), (x0 + 18, y), style))
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
        .map(|(u, rows)| (u, ordered(&rows)))
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
    Ok(crate::text::escape(&svg).into_owned())
}
