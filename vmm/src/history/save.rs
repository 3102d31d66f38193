//! Saving a run: one `BEGIN IMMEDIATE` transaction per run, so a run is stored whole or not
//! at all, and a second process saving at the same time waits for the first (busy timeout).

use std::path::Path;

use rusqlite::{params, Transaction, TransactionBehavior};
use sha2::{Digest, Sha256};

use super::schema::host_label;
use super::{HistoryError, Store, SAVE_PAUSE_ENV};
use crate::report::columns::{exits_estimate, exits_stat};
use crate::report::format::human_timestamp;
use crate::results::Estimate;
use crate::results::{PhaseResult, RunReport, Summary};

/// What produced a stored run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `irqbench run`.
    Run,
    /// The run of `irqbench check`.
    Check,
    /// `irqbench import` of a results JSON.
    Import,
}

impl Origin {
    pub fn name(self) -> &'static str {
        match self {
            Origin::Run => "run",
            Origin::Check => "check",
            Origin::Import => "import",
        }
    }
}

/// What a run knows about itself beyond its report (an imported JSON knows none of it).
#[derive(Clone, Debug)]
pub struct RunMeta<'a> {
    pub origin: Origin,
    /// The config's TOML text.
    pub config_text: Option<&'a str>,
    /// The guest ELF: where it came from and its bytes.
    pub guest: Option<(&'a str, &'a [u8])>,
    /// The JSON file an import read.
    pub source_file: Option<&'a Path>,
}

/// The outcome of [`Store::save`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Saved {
    /// Stored as this run id.
    New(i64),
    /// The same report was stored before, as this run id (an import of a file twice).
    Duplicate(i64),
}

impl Saved {
    pub fn id(self) -> i64 {
        match self {
            Saved::New(id) | Saved::Duplicate(id) => id,
        }
    }
}

/// Lower-case hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// `2026-03-21T14:25:01Z`.
pub(super) fn utc_now() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    human_timestamp(now)
        .replace(" UTC", "Z")
        .replacen(' ', "T", 1)
}

/// The CI bounds of a summary as two nullable columns (no CI: both NULL).
fn ci_columns(s: &Summary) -> (Option<f64>, Option<f64>) {
    s.ci95.map_or((None, None), |c| (Some(c.lo), Some(c.hi)))
}

/// Tests only: sleeps inside the open transaction after telling stderr, so a test can kill
/// the process there.
fn test_pause(id: i64) {
    let Some(ms) = std::env::var(SAVE_PAUSE_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|ms| *ms > 0)
    else {
        return;
    };
    {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr().lock(),
            "irqbench: {SAVE_PAUSE_ENV}: pausing {ms} ms inside the save transaction of run {id}"
        );
    }
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

impl Store {
    /// Stores `report` with `meta` in one transaction; a report stored before (same bytes) is
    /// not stored twice.
    pub fn save(&self, report: &RunReport, meta: &RunMeta) -> Result<Saved, HistoryError> {
        let err = self.err();
        check_fits("started_unix", report.started_unix)?;
        for r in &report.results {
            check_fits("results[].ops", r.ops)?;
        }
        let json =
            serde_json::to_string(report).map_err(|source| HistoryError::Encode { source })?;
        let report_sha = sha256_hex(json.as_bytes());
        let host_json = serde_json::to_string(&report.host)
            .map_err(|source| HistoryError::Encode { source })?;
        let tx =
            Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate).map_err(&err)?;
        let existing: Option<i64> = tx
            .query_row(
                "SELECT id FROM runs WHERE report_sha256 = ?1",
                [&report_sha],
                |r| r.get(0),
            )
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })
            .map_err(&err)?;
        if let Some(id) = existing {
            return Ok(Saved::Duplicate(id));
        }
        tx.execute(
            "INSERT INTO runs (saved_utc, started_unix, wall_seconds, irqbench_version,
                 results_schema, origin, source_file, guest_source, guest_sha256, config_name,
                 config_source, config_text, config_sha256, hostname, host_json, host_label,
                 partial, partial_reason, report_sha256, report_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                 ?18, ?19, ?20)",
            params![
                utc_now(),
                report.started_unix as i64,
                report.wall_seconds,
                report.irqbench_version,
                report.schema,
                meta.origin.name(),
                meta.source_file.map(|p| p.display().to_string()),
                meta.guest.map(|(source, _)| source),
                meta.guest.map(|(_, bytes)| sha256_hex(bytes)),
                report.config_name,
                report.config_source,
                meta.config_text,
                meta.config_text.map(|t| sha256_hex(t.as_bytes())),
                // An imported file says nothing about the machine it was measured on, and a
                // run redacted by `--redact hostname` keeps it out of the history too.
                if meta.origin == Origin::Import
                    || report
                        .host
                        .redacted
                        .iter()
                        .any(|r| r == crate::results::redact::Redaction::Hostname.name())
                {
                    String::new()
                } else {
                    crate::host::hostname().unwrap_or_default()
                },
                host_json,
                host_label(&report.host),
                report.partial,
                report.partial_reason,
                report_sha,
                json,
            ],
        )
        .map_err(&err)?;
        let id = tx.last_insert_rowid();
        insert_rows(&tx, id, report).map_err(&err)?;
        test_pause(id);
        tx.commit().map_err(&err)?;
        Ok(Saved::New(id))
    }
}

/// Every result row (figures, CIs, samples) and every paired comparison of run `id`.
fn insert_rows(tx: &Transaction, id: i64, report: &RunReport) -> rusqlite::Result<()> {
    let mut result = tx.prepare(
        "INSERT INTO results (run_id, position, name, group_name, kind, strategy, irq_source,
             nesting, vcpus, body_ops, rounds, ops, cycles_median, cycles_lo, cycles_hi,
             cycles_samples, ns_median, ns_lo, ns_hi, ops_per_sec_median, ops_per_sec_lo,
             ops_per_sec_hi, exits_per_op, exits_lo, exits_hi, precision_reached,
             disturbed_fraction)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,
             ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27)",
    )?;
    for (position, r) in report.results.iter().enumerate() {
        // A row without data has no figure to index or trend: the stored report keeps it.
        if [&r.cycles_per_op, &r.ns_per_op, &r.ops_per_sec]
            .iter()
            .all(|s| s.has_data())
        {
            insert_result(&mut result, id, position, r)?;
        }
    }
    let mut comparison = tx.prepare(
        "INSERT INTO comparisons (run_id, position, a, b, group_name, metric, ratio_median,
             ratio_lo, ratio_hi, rounds)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    for (position, c) in report.comparisons.iter().enumerate() {
        // Indexed only with a CI (too few rounds give none): the stored report keeps the rest.
        let Some(Estimate {
            point,
            ci: Some(ci),
        }) = c.ratio.filter(|_| c.no_ratio.is_none())
        else {
            continue;
        };
        let metric = match c.metric {
            crate::results::ComparedMetric::CyclesPerOp => "cycles_per_op",
            crate::results::ComparedMetric::OpsPerSec => "ops_per_sec",
        };
        comparison.execute(params![
            id,
            position as i64,
            c.a,
            c.b,
            c.group,
            metric,
            point,
            ci.lo,
            ci.hi,
            c.rounds,
        ])?;
    }
    Ok(())
}

fn insert_result(
    stmt: &mut rusqlite::Statement,
    id: i64,
    position: usize,
    r: &PhaseResult,
) -> rusqlite::Result<()> {
    let (cycles_lo, cycles_hi) = ci_columns(&r.cycles_per_op);
    let (ns_lo, ns_hi) = ci_columns(&r.ns_per_op);
    let (ops_lo, ops_hi) = ci_columns(&r.ops_per_sec);
    // exits_per_op / exits_lo / exits_hi store the report's `exits_per_op["exits"]` and its CI
    // as written: from irqbench-results/3 the mean over kept rounds (ratio-estimator CI); rows
    // of /2 and /1 files (runs.results_schema says which) hold medians of per-round nets, 0 for
    // sparse exits, and are read as they were stored.
    let exits_ci = exits_estimate(r).and_then(|e| e.ci);
    let samples = serde_json::to_string(&r.cycles_per_op.samples)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    stmt.execute(params![
        id,
        position as i64,
        r.name,
        r.group,
        r.kind.name(),
        r.strategy.name(),
        r.irq_source,
        r.nesting,
        r.vcpus,
        r.body_ops,
        r.rounds,
        r.ops as i64,
        r.cycles_per_op.median,
        cycles_lo,
        cycles_hi,
        samples,
        r.ns_per_op.median,
        ns_lo,
        ns_hi,
        r.ops_per_sec.median,
        ops_lo,
        ops_hi,
        exits_stat(r),
        exits_ci.map(|c| c.lo),
        exits_ci.map(|c| c.hi),
        r.precision_reached,
        r.disturbed_fraction,
    ])?;
    Ok(())
}

/// SQLite integers are i64: a larger u64 (only a damaged or hand-made file carries one) is
/// refused instead of wrapping into a negative time or count.
fn check_fits(field: &'static str, value: u64) -> Result<(), HistoryError> {
    i64::try_from(value)
        .map(|_| ())
        .map_err(|_| HistoryError::OutOfRange {
            field,
            value,
            max: i64::MAX,
        })
}
