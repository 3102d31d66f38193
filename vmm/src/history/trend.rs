//! `irqbench history`: the runs, and each result row's median with its 95% CI across them, as
//! text, JSON or an SVG chart (the CI drawn as a band around the median line).

use std::fmt::Write as _;

use plotters::prelude::*;

use super::{RunRow, TrendPoint};
use crate::report::columns::Align;
use crate::report::format::{fmt_cost, human_timestamp, Ci, Estimate};
use crate::report::table::TextTable;

/// Runs `history` lists when `--last` is not given.
pub const DEFAULT_LAST: usize = 20;
/// Panels one chart draws; rows past this are named in a note.
const MAX_PANELS: usize = 24;
const PANEL_PX: u32 = 230;
/// Panels side by side in `history --svg`, each this wide.
const GRID_COLUMNS: usize = 3;
const COLUMN_PX: u32 = 540;
const BAND: RGBColor = RGBColor(70, 120, 180);

/// One result row across runs, in run order.
#[derive(Debug, serde::Serialize)]
pub struct Trend<'a> {
    pub name: &'a str,
    pub strategy: &'a str,
    pub unit: &'static str,
    pub points: Vec<&'a TrendPoint>,
}

/// Points grouped by result name, names in order of first appearance. Linear in the points:
/// an imported run may hold hundreds of thousands of rows.
pub fn trends(points: &[TrendPoint]) -> Vec<Trend<'_>> {
    trends_hashed::<std::collections::hash_map::RandomState>(points)
}

/// [`trends`] with the name index hashed by `S`: its tests count the hashes to show one lookup
/// per point (a wall-time ratio is the host's load as much as the algorithm's).
pub(super) fn trends_hashed<S: std::hash::BuildHasher + Default>(
    points: &[TrendPoint],
) -> Vec<Trend<'_>> {
    let mut out: Vec<Trend> = Vec::new();
    let mut index: std::collections::HashMap<&str, usize, S> = std::collections::HashMap::default();
    for p in points {
        match index.get(p.name.as_str()) {
            Some(&i) => out[i].points.push(p),
            None => {
                index.insert(&p.name, out.len());
                out.push(Trend {
                    name: &p.name,
                    strategy: &p.strategy,
                    unit: if p.kind == crate::results::ResultKind::Insn.name() {
                        "cycles/insn"
                    } else {
                        "cycles/op"
                    },
                    points: vec![p],
                })
            }
        }
    }
    out
}

pub(super) fn estimate(p: &TrendPoint) -> Estimate {
    Estimate {
        point: p.median,
        ci: p.ci95,
    }
}

/// `2026-03-21 14:25` (the seconds are noise in a listing).
fn minute(unix: u64) -> String {
    let t = human_timestamp(unix);
    t.get(..16).unwrap_or(&t).to_owned()
}

pub(super) fn runs_table(runs: &[RunRow]) -> String {
    runs_table_with(runs, true)
}

/// The host a run was measured on, as the runs table shows it.
pub(super) fn host_text(r: &RunRow) -> String {
    if r.hostname.is_empty() {
        r.host_label.clone()
    } else {
        format!("{}: {}", r.hostname, r.host_label)
    }
}

/// The runs, with or without the host column (the compact listing names a host every run
/// shares once, above the table).
pub(super) fn runs_table_with(runs: &[RunRow], host_column: bool) -> String {
    use Align::{Left, Right};
    let mut headers = vec![("run", Right), ("started (UTC)", Left), ("config", Left)];
    if host_column {
        headers.push(("host", Left));
    }
    headers.extend([("rows", Right), ("origin", Left), ("note", Left)]);
    let mut t = TextTable::new(&headers);
    for r in runs {
        let mut note: Vec<String> = r
            .baselines
            .iter()
            .map(|b| format!("baseline {b}"))
            .collect();
        if r.partial {
            note.push("PARTIAL".into());
        }
        let mut row = vec![
            r.id.to_string(),
            minute(r.started_unix),
            r.config_name.clone(),
        ];
        if host_column {
            row.push(host_text(r));
        }
        row.extend([r.rows.to_string(), r.origin.clone(), note.join(", ")]);
        t.rows.push(row);
    }
    // Not shortened: a host cut in the middle ("kerne…18.44") says less than a long line.
    t.render("  ", usize::MAX)
}

/// The first line of `history`, long or not.
pub(super) fn heading(db: &std::path::Path, runs: &[RunRow]) -> String {
    let s = if runs.len() == 1 { "" } else { "s" };
    format!(
        "history: {} ({} run{s} shown, oldest first)\n",
        crate::text::escape_path(db),
        runs.len()
    )
}

/// The text of `history`: the runs, then one small table per result row with its median ±CI
/// in each run (`≈0 (±h)` where the CI spans zero, as in every report).
pub fn render_history(db: &std::path::Path, runs: &[RunRow], points: &[TrendPoint]) -> String {
    let mut out = heading(db, runs);
    out.push_str(&runs_table(runs));
    let trends = trends(points);
    if trends.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "\ntrend per row: median ±h, h = the farther end of its 95% CI"
    );
    for t in &trends {
        let _ = writeln!(out, "\n{}", crate::text::outside(t.name));
        let mut table = TextTable::new(&[
            ("run", Align::Right),
            ("started (UTC)", Align::Left),
            (t.unit, Align::Right),
        ]);
        for p in &t.points {
            table.rows.push(vec![
                p.run_id.to_string(),
                minute(p.started_unix),
                fmt_cost(estimate(p)),
            ]);
        }
        out.push_str(&table.render("  ", crate::report::text_width()));
    }
    out
}

#[derive(serde::Serialize)]
struct HistoryJson<'a> {
    database: String,
    runs: &'a [RunRow],
    trends: Vec<Trend<'a>>,
}

/// The same as JSON: `{database, runs[], trends[{name, strategy, unit, points[]}]}`; every
/// point keeps its numbers (`ci95` null where there is none).
pub fn render_history_json(
    db: &std::path::Path,
    runs: &[RunRow],
    points: &[TrendPoint],
) -> Result<String, serde_json::Error> {
    let mut text = serde_json::to_string_pretty(&HistoryJson {
        database: db.display().to_string(),
        runs,
        trends: trends(points),
    })?;
    text.push('\n');
    Ok(text)
}

fn draw_trend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    t: &Trend,
) -> Result<(), String> {
    let n = t.points.len();
    let bounds = |p: &&TrendPoint| p.ci95.map_or([p.median; 2], <[f64; 2]>::from);
    let lo = t
        .points
        .iter()
        .map(|p| bounds(p)[0])
        .fold(f64::INFINITY, f64::min);
    let hi = t
        .points
        .iter()
        .map(|p| bounds(p)[1])
        .fold(f64::NEG_INFINITY, f64::max);
    let (y0, y1, from_zero) = y_range(lo, hi);
    let ids: Vec<i64> = t.points.iter().map(|p| p.run_id).collect();
    let caption = if from_zero {
        t.name.to_string()
    } else {
        format!("{} (axis from {}, not 0)", t.name, axis_label(y0, y0, y1))
    };
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 15))
        .margin(10)
        .x_label_area_size(34)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), y0..y1)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_labels(n.min(20))
        .x_label_formatter(&|v| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 {
                ids.get(i as usize)
                    .map_or(String::new(), |id| format!("#{id}"))
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| axis_label(*v, y0, y1))
        .light_line_style(TRANSPARENT)
        .x_desc("run")
        .y_desc(format!("{} (median, band: 95% CI)", t.unit))
        .draw()
        .map_err(|e| e.to_string())?;
    let upper = t
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| (i as f64, bounds(p)[1]));
    let lower = t
        .points
        .iter()
        .enumerate()
        .rev()
        .map(|(i, p)| (i as f64, bounds(p)[0]));
    let band: Vec<(f64, f64)> = upper.chain(lower).collect();
    if n > 1 {
        chart
            .draw_series([Polygon::new(band, BAND.mix(0.25).filled())])
            .map_err(|e| e.to_string())?;
    }
    // One run has no band to draw between runs: its CI is a whisker (every run without a CI
    // has none).
    for (i, p) in t.points.iter().enumerate() {
        let Some(Ci { lo: wlo, hi: whi }) = p.ci95.filter(|_| n == 1) else {
            continue;
        };
        let x = i as f64;
        let whisker = [
            vec![(x, wlo), (x, whi)],
            vec![(x - 0.08, wlo), (x + 0.08, wlo)],
            vec![(x - 0.08, whi), (x + 0.08, whi)],
        ];
        chart
            .draw_series(
                whisker
                    .into_iter()
                    .map(|l| PathElement::new(l, BAND.stroke_width(2))),
            )
            .map_err(|e| e.to_string())?;
    }
    let line: Vec<(f64, f64)> = t
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| (i as f64, p.median))
        .collect();
    chart
        .draw_series(LineSeries::new(line.clone(), BAND.stroke_width(2)))
        .map_err(|e| e.to_string())?;
    chart
        .draw_series(
            line.iter()
                .map(|&(x, y)| Circle::new((x, y), 3, BAND.filled())),
        )
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// The y axis of a panel: from 0 (costs are drawn against zero), unless the data would then
/// fill less than a tenth of the panel (a trend of 0.2% steps on a 70 000-cycle cost): then
/// from just below the lowest CI, and the caption says the axis does not start at 0. A
/// negative net always shows 0.
fn y_range(lo: f64, hi: f64) -> (f64, f64, bool) {
    let pad = ((hi - lo).abs() * 0.15).max(hi.abs() * 0.01).max(1e-9);
    if lo <= 0.0 {
        return (lo - pad, hi.max(0.0) + pad, true);
    }
    if (hi - lo) * 10.0 >= hi {
        return (0.0, hi + pad, true);
    }
    (lo - pad, hi + pad, false)
}

fn axis_label(v: f64, y0: f64, y1: f64) -> String {
    if y1 - y0 >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// The trends as SVG: one panel per result row (at most [`MAX_PANELS`]), x = runs in order
/// (labelled `#id`), the median as a line and its 95% CI as a band; the panels in a grid of up
/// to [`GRID_COLUMNS`] columns, so the chart is as tall as the rows it holds need (24 rows had
/// been one column of 900×5600).
pub fn render_trend_svg(points: &[TrendPoint]) -> Result<String, String> {
    let trends = trends(points);
    if trends.is_empty() {
        return Err("no rows to draw".into());
    }
    let shown = &trends[..trends.len().min(MAX_PANELS)];
    let extra = if trends.len() > shown.len() { 30 } else { 0 };
    let columns = shown.len().min(GRID_COLUMNS);
    let grid_rows = shown.len().div_ceil(columns);
    let width = (COLUMN_PX * columns as u32).max(900);
    let height = PANEL_PX * grid_rows as u32 + 50 + extra;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let rest = root
            .titled(
                "irqbench history: median per run, band = 95% CI",
                ("sans-serif", 20),
            )
            .map_err(|e| e.to_string())?;
        let (grid, note_area) = rest.split_vertically(PANEL_PX * grid_rows as u32);
        let cells = grid.split_evenly((grid_rows, columns));
        for (t, cell) in shown.iter().zip(&cells) {
            draw_trend(cell, t)?;
        }
        if extra > 0 {
            let note = format!(
                "{} more rows not drawn: narrow with --strategy or --config",
                trends.len() - shown.len()
            );
            note_area
                .draw(&Text::new(note, (12, 8), ("sans-serif", 13).into_font()))
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    // As the run chart: a stored name with a control character stays well-formed XML.
    Ok(crate::text::xml_for_terminal(&svg).into_owned())
}

/// `2026-03-21 14:25:01 UTC`.
pub fn render_time(unix: u64) -> String {
    human_timestamp(unix)
}

/// `baseline list`: name, run, config, when the run started, host.
pub fn render_baselines(rows: &[super::BaselineRow]) -> String {
    let mut t = TextTable::new(&[
        ("baseline", Align::Left),
        ("run", Align::Right),
        ("config", Align::Left),
        ("run started (UTC)", Align::Left),
        ("host", Align::Left),
    ]);
    for b in rows {
        t.rows.push(vec![
            b.name.clone(),
            b.run_id.to_string(),
            b.config_name.clone(),
            minute(b.started_unix),
            b.host_label.clone(),
        ]);
    }
    t.render("", usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(run_id: i64, median: f64, ci95: Option<[f64; 2]>) -> TrendPoint {
        TrendPoint {
            run_id,
            started_unix: 1_764_590_000 + run_id as u64 * 60,
            name: "quick/pvop-skip/n0/none/1v".into(),
            kind: "strategy".into(),
            strategy: "pvop-skip".into(),
            median,
            ci95: ci95.map(Ci::from),
        }
    }

    fn keep(name: &str, svg: &str) {
        // IRQBENCH_CHART_DIR=DIR keeps the chart, to look at it rendered.
        if let Some(dir) = std::env::var_os("IRQBENCH_CHART_DIR") {
            std::fs::write(std::path::Path::new(&dir).join(name), svg).unwrap();
        }
    }

    #[test]
    fn one_run_is_a_point_with_its_ci_whisker_on_an_axis_from_zero() {
        let svg = render_trend_svg(&[point(7, 5200.0, Some([4700.0, 5800.0]))]).unwrap();
        keep("history-one-run.svg", &svg);
        assert!(!svg.contains("<polygon"), "no band for one run");
        assert_eq!(svg.matches("<circle").count(), 1);
        // The whisker: its stem and two caps, each a two-point line in the band's colour.
        let whisker = |svg: &str| {
            svg.lines()
                .filter(|l| l.contains("stroke=\"#4678B4\" stroke-width=\"2\""))
                .filter(|l| l.matches(',').count() == 2)
                .count()
        };
        assert_eq!(whisker(&svg), 3, "{svg}");
        assert_eq!(
            whisker(&render_trend_svg(&[point(7, 5200.0, None)]).unwrap()),
            0
        );
        assert!(!svg.contains("not 0"), "from zero");
        assert_eq!(y_range(4700.0, 5800.0).0, 0.0);
        // A narrow one is still a whisker, on an axis that says it is not from 0.
        let narrow = render_trend_svg(&[point(7, 5200.0, Some([5190.0, 5215.0]))]).unwrap();
        assert!(!narrow.contains("<polygon") && narrow.contains("not 0)"));
    }

    #[test]
    fn a_narrow_trend_says_its_axis_does_not_start_at_zero() {
        let points: Vec<TrendPoint> = (1..=5)
            .map(|i| {
                let m = 70_000.0 + 40.0 * i as f64;
                point(i, m, Some([m - 90.0, m + 90.0]))
            })
            .collect();
        let svg = render_trend_svg(&points).unwrap();
        keep("history-narrow.svg", &svg);
        assert!(svg.contains("<polygon"), "a band across runs");
        assert!(svg.contains("(axis from 69"), "says where the axis starts");
        assert!(svg.contains("not 0)"));
        let (y0, _, zero) = y_range(69_950.0, 70_290.0);
        assert!(!zero && y0 > 60_000.0);
        // A net below zero, and a wide trend, both keep 0 on the axis.
        assert!(y_range(-5.0, 20.0).0 < -5.0 && y_range(-5.0, 20.0).2);
        let (y0, y1, zero) = y_range(100.0, 300.0);
        assert!(y0 == 0.0 && y1 > 300.0 && zero);
    }

    #[test]
    fn the_panels_sit_in_a_grid_sized_to_the_rows_it_holds() {
        let size = |svg: &str| {
            let head = &svg[..svg.find('>').unwrap()];
            let num = |key: &str| -> u32 {
                let at = head.find(key).unwrap() + key.len();
                head[at..].split('"').next().unwrap().parse().unwrap()
            };
            (num("width=\""), num("height=\""))
        };
        let one = render_trend_svg(&[point(7, 5200.0, Some([4700.0, 5800.0]))]).unwrap();
        assert_eq!(size(&one), (900, PANEL_PX + 50));
        let many: Vec<TrendPoint> = (0..24)
            .flat_map(|row| {
                (1..=2).map(move |run| TrendPoint {
                    name: format!("quick/row{row}/n0/none/1v"),
                    ..point(run, 5000.0, Some([4900.0, 5100.0]))
                })
            })
            .collect();
        let svg = render_trend_svg(&many).unwrap();
        keep("history-24-rows.svg", &svg);
        assert_eq!(size(&svg), (3 * COLUMN_PX, 8 * PANEL_PX + 50));
        assert_eq!(svg.matches("<polygon").count(), 24, "a band per row");
    }
}
