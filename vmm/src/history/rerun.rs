//! A run's rerun intervals: the same figures in the latest earlier runs of its config on its
//! host ([`crate::analysis::rerun`]), read from the history before the run is saved.

use std::collections::HashMap;

use rusqlite::params;

use super::schema::host_label;
use super::{HistoryError, Store};
use crate::analysis::rerun::{
    rerun_interval, standard_error, EARLIER_RUNS_WINDOW, MIN_EARLIER_RUNS, RERUN_METHOD,
};
use crate::results::warning::{Warning, WarningKind};
use crate::results::{ComparedMetric, ReplicateSpread, RerunLevel, RowRerun, RunReport};
use crate::statistics::Ci;

/// Each figure's values in the earlier runs, oldest run first.
#[derive(Default)]
struct Earlier {
    /// (a, b, metric) → ratios.
    ratios: HashMap<(String, String, String), Vec<f64>>,
    /// Row name → (cycles/op, ops/s).
    rows: HashMap<String, (Vec<f64>, Vec<f64>)>,
}

impl Store {
    /// The latest whole runs (at most [`EARLIER_RUNS_WINDOW`]) of `config` measured on this
    /// machine (`hostname`, and the same CPU, kernel and KVM flavour), oldest first.
    fn earlier_runs(
        &self,
        config: &str,
        hostname: &str,
        label: &str,
    ) -> Result<Vec<i64>, HistoryError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id FROM runs WHERE config_name = ?1 AND hostname = ?2 AND host_label = ?3
                     AND partial = 0 AND origin != 'import'
                 ORDER BY started_unix DESC, id DESC LIMIT ?4",
            )
            .map_err(self.err())?;
        let mut ids = stmt
            .query_map(
                params![config, hostname, label, EARLIER_RUNS_WINDOW as i64],
                |r| r.get(0),
            )
            .and_then(|rows| rows.collect::<Result<Vec<i64>, _>>())
            .map_err(self.err())?;
        ids.reverse();
        Ok(ids)
    }

    fn earlier_figures(&self, ids: &[i64]) -> Result<Earlier, HistoryError> {
        let mut out = Earlier::default();
        let mut ratios = self
            .conn
            .prepare("SELECT a, b, metric, ratio_median FROM comparisons WHERE run_id = ?1")
            .map_err(self.err())?;
        let mut rows = self
            .conn
            .prepare(
                "SELECT name, cycles_median, ops_per_sec_median FROM results WHERE run_id = ?1",
            )
            .map_err(self.err())?;
        for id in ids {
            let found = ratios
                .query_map([id], |r| Ok(((r.get(0)?, r.get(1)?, r.get(2)?), r.get(3)?)))
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(self.err())?;
            for (key, ratio) in found {
                out.ratios.entry(key).or_default().push(ratio);
            }
            let found = rows
                .query_map([id], |r| Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?)))
                .and_then(|rows| rows.collect::<Result<Vec<(String, f64, f64)>, _>>())
                .map_err(self.err())?;
            for (name, cycles, ops) in found {
                let e = out.rows.entry(name).or_default();
                e.0.push(cycles);
                e.1.push(ops);
            }
        }
        Ok(out)
    }
}

fn metric_name(m: ComparedMetric) -> &'static str {
    match m {
        ComparedMetric::CyclesPerOp => "cycles_per_op",
        ComparedMetric::OpsPerSec => "ops_per_sec",
    }
}

/// The standard error of a figure with CI `ci` from `spread`'s replicates (one VM without).
fn own_se(ci: Option<Ci>, spread: Option<&ReplicateSpread>) -> f64 {
    standard_error(ci, spread.map_or(1, |s| s.estimates.len()))
}

/// Gives `report`'s rows and comparisons their rerun intervals, from the earlier runs of its
/// config on this machine (`hostname`) in `store`; leaves them absent (and `report.rerun`)
/// with fewer than [`MIN_EARLIER_RUNS`] such runs. Comparisons whose rerun interval is wider
/// than `precision` (relative half-width) get one warning: the run says what it could not give.
pub fn fill_rerun(
    store: &Store,
    report: &mut RunReport,
    hostname: &str,
    precision: f64,
) -> Result<(), HistoryError> {
    if hostname.is_empty() {
        return Ok(());
    }
    let ids = store.earlier_runs(&report.config_name, hostname, &host_label(&report.host))?;
    if ids.len() < MIN_EARLIER_RUNS {
        return Ok(());
    }
    let earlier = store.earlier_figures(&ids)?;
    for c in &mut report.comparisons {
        let key = (c.a.clone(), c.b.clone(), metric_name(c.metric).to_owned());
        let ratio = c.ratio.filter(|_| c.no_ratio.is_none());
        if let (Some(ratio), Some(values)) = (ratio, earlier.ratios.get(&key)) {
            let se = own_se(ratio.ci, c.replicates.as_ref());
            c.rerun95 = rerun_interval(ratio.point, se, values);
        }
    }
    for r in &mut report.results {
        let Some((cycles, ops)) = earlier.rows.get(&r.name) else {
            continue;
        };
        let spread = r.replicates.as_ref();
        let (c, o) = (&r.cycles_per_op, &r.ops_per_sec);
        let rerun = RowRerun {
            cycles_per_op: rerun_interval(c.median, own_se(c.ci95, spread), cycles),
            ops_per_sec: rerun_interval(o.median, own_se(o.ci95, spread), ops),
        };
        if rerun.cycles_per_op.is_some() || rerun.ops_per_sec.is_some() {
            r.rerun95 = Some(rerun);
        }
    }
    if let Some(w) = wider_than(report, precision) {
        report.warnings.push(w);
    }
    report.rerun = Some(RerunLevel {
        earlier_runs: ids.len() as u32,
        run_ids: ids,
        method: RERUN_METHOD.into(),
    });
    Ok(())
}

/// The warning for comparisons whose rerun interval is wider than `precision`.
fn wider_than(report: &RunReport, precision: f64) -> Option<Warning> {
    let half = |c: &crate::results::PairedComparison| {
        c.rerun95
            .zip(c.ratio)
            .map(|(ci, r)| (ci.hi - ci.lo) / 2.0 / r.point.abs())
    };
    let with: Vec<_> = report
        .comparisons
        .iter()
        .filter_map(|c| Some((c, half(c)?)))
        .collect();
    let wide: Vec<_> = with.iter().filter(|(_, h)| *h > precision).collect();
    let (widest, h) = wide.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
    let short = |name: &str| name.split('/').nth(1).unwrap_or(name).to_owned();
    let figures = format!(
        "rerun intervals: {} of {} comparisons wider than the config's precision ±{}% (widest: \
         {} vs {} ±{:.2}%): the host moved that much between the earlier runs, and no run \
         length inside one run narrows it",
        wide.len(),
        with.len(),
        precision * 100.0,
        short(&widest.b),
        short(&widest.a),
        h * 100.0
    );
    Some(Warning::run(WarningKind::RerunWide, figures))
}
