//! Reading the history back: runs, a row's trend, whole reports, baselines, and what a
//! `compare` argument names.

use std::path::PathBuf;

use rusqlite::{params, OptionalExtension};

use super::{HistoryError, Store};
use crate::results::{Ci, RunReport};

/// Longest baseline name.
pub const MAX_BASELINE_NAME: usize = 64;

/// Which runs `history` lists.
#[derive(Clone, Debug, Default)]
pub struct RunFilter {
    /// The config's name, exactly.
    pub config: Option<String>,
    /// Runs with a result of this strategy (or instruction), exactly.
    pub strategy: Option<String>,
    /// A part of the hostname or of the host label (CPU, kernel, KVM flavour), any case.
    pub host: Option<String>,
    /// The most recent N of the runs that match.
    pub last: usize,
}

/// One stored run, as `history` lists it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RunRow {
    pub id: i64,
    pub started_unix: u64,
    pub saved_utc: String,
    pub irqbench_version: String,
    pub config_name: String,
    pub hostname: String,
    pub host_label: String,
    pub partial: bool,
    pub origin: String,
    pub rows: i64,
    pub guest_sha256: Option<String>,
    pub config_sha256: Option<String>,
    /// Baselines that name this run.
    pub baselines: Vec<String>,
}

/// One result row of one run: a point of a trend.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TrendPoint {
    pub run_id: i64,
    pub started_unix: u64,
    pub name: String,
    pub kind: String,
    pub strategy: String,
    /// Net cycles per operation (or per instruction): median and 95% CI (`None`: too few
    /// rounds, or a v1 file, gave none).
    pub median: f64,
    pub ci95: Option<Ci>,
}

/// A named run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct BaselineRow {
    pub name: String,
    pub run_id: i64,
    pub saved_utc: String,
    pub config_name: String,
    pub started_unix: u64,
    pub host_label: String,
}

/// What a `compare` argument names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunRef {
    /// A results JSON.
    File(PathBuf),
    /// A stored run, by id (`12` or `run:12`).
    Run(i64),
    /// A baseline, by name (`main` or `baseline:main`).
    Baseline(String),
    /// The most recent stored run (`latest`).
    Latest,
}

impl RunRef {
    /// An existing path, anything with a `/` or ending in `.json` is a file; `run:N` and
    /// `baseline:NAME` say which they mean; otherwise digits are a run id, `latest` the latest
    /// run, and the rest a baseline name. `run:` followed by anything but digits (`run:`,
    /// `run:x`) is refused: it names no run, and as a baseline name it would only be reported
    /// missing. An existing file of that name is still a file.
    pub fn parse(arg: &str) -> Result<RunRef, HistoryError> {
        if let Some(id) = arg.strip_prefix("run:") {
            let digits = !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit());
            if let Some(id) = digits.then(|| id.parse().ok()).flatten() {
                return Ok(RunRef::Run(id));
            }
        }
        if let Some(name) = arg.strip_prefix("baseline:") {
            return Ok(RunRef::Baseline(name.to_owned()));
        }
        let path = std::path::Path::new(arg);
        if path.symlink_metadata().is_ok() || arg.contains('/') || arg.ends_with(".json") {
            return Ok(RunRef::File(path.to_owned()));
        }
        if arg.starts_with("run:") {
            return Err(HistoryError::BadRunId {
                arg: arg.to_owned(),
            });
        }
        if arg == "latest" {
            return Ok(RunRef::Latest);
        }
        Ok(match arg.parse::<i64>() {
            Ok(id) if !arg.starts_with(['+', '-']) => RunRef::Run(id),
            _ => RunRef::Baseline(arg.to_owned()),
        })
    }
}

/// Why `name` cannot name a baseline, if it cannot: it must never read as a run id, a file or
/// `latest` (see [`RunRef::parse`]).
pub(super) fn baseline_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.chars().count() > MAX_BASELINE_NAME {
        Some("it is too long")
    } else if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        Some("it has a character other than letters, digits, `.`, `_` and `-`")
    } else if name.chars().all(|c| c.is_ascii_digit()) {
        Some("only digits would read as a run id")
    } else if name == "latest" {
        Some("`latest` names the latest run")
    } else if name.ends_with(".json") {
        Some("a name ending in .json would read as a file")
    } else if name.starts_with('-') {
        Some("a leading `-` would read as an option")
    } else {
        None
    }
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

impl Store {
    /// Runs matching `f`, oldest first by start time (the `f.last` that started last).
    pub fn runs(&self, f: &RunFilter) -> Result<Vec<RunRow>, HistoryError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT r.id, r.started_unix, r.saved_utc, r.irqbench_version, r.config_name,
                     r.hostname, r.host_label, r.partial, r.origin,
                     (SELECT count(*) FROM results x WHERE x.run_id = r.id),
                     r.guest_sha256, r.config_sha256,
                     (SELECT group_concat(b.name, ',') FROM baselines b WHERE b.run_id = r.id)
                 FROM runs r
                 WHERE (?1 IS NULL OR r.config_name = ?1)
                   AND (?2 IS NULL OR EXISTS (SELECT 1 FROM results x
                                              WHERE x.run_id = r.id AND x.strategy = ?2))
                   AND (?3 IS NULL OR instr(lower(r.hostname), lower(?3)) > 0
                                   OR instr(lower(r.host_label), lower(?3)) > 0)
                 ORDER BY r.started_unix DESC, r.id DESC LIMIT ?4",
            )
            .map_err(self.err())?;
        let rows = stmt
            .query_map(
                params![f.config, f.strategy, f.host, f.last.max(1) as i64],
                |r| {
                    let baselines: Option<String> = r.get(12)?;
                    Ok(RunRow {
                        id: r.get(0)?,
                        started_unix: r.get::<_, i64>(1)?.max(0) as u64,
                        saved_utc: r.get(2)?,
                        irqbench_version: r.get(3)?,
                        config_name: r.get(4)?,
                        hostname: r.get(5)?,
                        host_label: r.get(6)?,
                        partial: r.get(7)?,
                        origin: r.get(8)?,
                        rows: r.get(9)?,
                        guest_sha256: r.get(10)?,
                        config_sha256: r.get(11)?,
                        baselines: baselines
                            .map(|b| b.split(',').map(str::to_owned).collect())
                            .unwrap_or_default(),
                    })
                },
            )
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(self.err())?;
        Ok(rows.into_iter().rev().collect())
    }

    /// Why nothing matched `f`: the filter values the history does hold.
    pub fn explain_no_match(&self, f: &RunFilter) -> Result<HistoryError, HistoryError> {
        let distinct = |sql: &str| -> Result<Vec<String>, HistoryError> {
            self.conn
                .prepare(sql)
                .and_then(|mut s| {
                    s.query_map([], |r| r.get::<_, String>(0))?
                        .collect::<Result<Vec<_>, _>>()
                })
                .map_err(self.err())
        };
        // Each filter given: its flag, and the values the history holds for it.
        let filters = [
            (
                &f.config,
                "--config",
                "configs",
                "SELECT DISTINCT config_name FROM runs ORDER BY 1",
            ),
            (
                &f.strategy,
                "--strategy",
                "strategies",
                "SELECT DISTINCT strategy FROM results ORDER BY 1",
            ),
            (
                &f.host,
                "--host",
                "hosts",
                "SELECT DISTINCT hostname || ' (' || host_label || ')' FROM runs ORDER BY 1",
            ),
        ];
        let mut what = Vec::new();
        let mut known = Vec::new();
        for (value, flag, label, sql) in filters {
            if let Some(v) = value {
                what.push(format!("{flag} {v}"));
                known.push(format!("{label} {}", list(&distinct(sql)?)));
            }
        }
        Ok(HistoryError::NoMatch {
            what: what.join(" "),
            known: known.join("; "),
        })
    }

    /// The result rows of `runs` (of `strategy` only, if given), in run order, then in each
    /// run's row order.
    pub fn trend(
        &self,
        runs: &[i64],
        strategy: Option<&str>,
    ) -> Result<Vec<TrendPoint>, HistoryError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT x.run_id, r.started_unix, x.name, x.kind, x.strategy, x.cycles_median,
                     x.cycles_lo, x.cycles_hi
                 FROM results x JOIN runs r ON r.id = x.run_id
                 WHERE x.run_id = ?1 AND (?2 IS NULL OR x.strategy = ?2)
                 ORDER BY x.position",
            )
            .map_err(self.err())?;
        let mut points = Vec::new();
        for id in runs {
            let rows = stmt
                .query_map(params![id, strategy], |r| {
                    let lo: Option<f64> = r.get(6)?;
                    let hi: Option<f64> = r.get(7)?;
                    Ok(TrendPoint {
                        run_id: r.get(0)?,
                        started_unix: r.get::<_, i64>(1)?.max(0) as u64,
                        name: r.get(2)?,
                        kind: r.get(3)?,
                        strategy: r.get(4)?,
                        median: r.get(5)?,
                        ci95: lo.zip(hi).map(|(lo, hi)| Ci { lo, hi }),
                    })
                })
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(self.err())?;
            points.extend(rows);
        }
        Ok(points)
    }

    /// The id of the run that started last (an import of an older file is not "latest").
    pub fn latest(&self) -> Result<i64, HistoryError> {
        self.conn
            .query_row(
                "SELECT max(id) FROM (SELECT id FROM runs
                     ORDER BY started_unix DESC, id DESC LIMIT 1)",
                [],
                |r| r.get::<_, Option<i64>>(0),
            )
            .map_err(self.err())?
            .ok_or_else(|| HistoryError::NoRuns {
                path: self.path.clone(),
            })
    }

    /// Run `id`'s report, exactly as it was saved.
    pub fn report(&self, id: i64) -> Result<RunReport, HistoryError> {
        let json: Option<String> = self
            .conn
            .query_row("SELECT report_json FROM runs WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()
            .map_err(self.err())?;
        let Some(json) = json else {
            return Err(self.no_such_run(id)?);
        };
        crate::report::report_from_str(&json).map_err(|source| HistoryError::Decode {
            path: self.path.clone(),
            id,
            source,
        })
    }

    fn no_such_run(&self, id: i64) -> Result<HistoryError, HistoryError> {
        let (count, min, max): (i64, Option<i64>, Option<i64>) = self
            .conn
            .query_row("SELECT count(*), min(id), max(id) FROM runs", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .map_err(self.err())?;
        let known = match (min, max) {
            (Some(a), Some(b)) if a == b => format!("only {a}"),
            (Some(a), Some(b)) => format!("{count} between {a} and {b}"),
            _ => "none yet".into(),
        };
        Ok(HistoryError::NoSuchRun {
            path: self.path.clone(),
            id,
            known,
        })
    }

    /// The run a reference names (a file is not the database's business).
    pub fn resolve(&self, r: &RunRef) -> Result<i64, HistoryError> {
        match r {
            RunRef::Run(id) => self
                .run_exists(*id)?
                .then_some(*id)
                .map_or_else(|| Err(self.no_such_run(*id)?), Ok),
            RunRef::Latest => self.latest(),
            RunRef::File(p) => Err(HistoryError::NoMatch {
                what: p.display().to_string(),
                known: "a results file is read from disk, not looked up".into(),
            }),
            RunRef::Baseline(name) => self.baseline_run(name),
        }
    }

    fn run_exists(&self, id: i64) -> Result<bool, HistoryError> {
        self.conn
            .query_row("SELECT 1 FROM runs WHERE id = ?1", [id], |_| Ok(()))
            .optional()
            .map(|r| r.is_some())
            .map_err(self.err())
    }

    /// The run baseline `name` names, if it exists.
    fn baseline_of(&self, name: &str) -> Result<Option<i64>, HistoryError> {
        self.conn
            .query_row(
                "SELECT run_id FROM baselines WHERE name = ?1",
                [name],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.err())
    }

    /// The run a baseline names.
    pub fn baseline_run(&self, name: &str) -> Result<i64, HistoryError> {
        match self.baseline_of(name)? {
            Some(id) => Ok(id),
            None => {
                let names: Vec<String> = self.baselines()?.into_iter().map(|b| b.name).collect();
                Err(HistoryError::NoSuchBaseline {
                    path: self.path.clone(),
                    name: name.to_owned(),
                    known: if names.is_empty() {
                        "there are none yet (`irqbench baseline save NAME` makes one)".into()
                    } else {
                        format!("baselines: {}", names.join(", "))
                    },
                })
            }
        }
    }

    /// Names run `run` (default: the latest) `name`; returns the run and the one the name
    /// named before, if it named one.
    pub fn save_baseline(
        &self,
        name: &str,
        run: Option<i64>,
    ) -> Result<(i64, Option<i64>), HistoryError> {
        if let Some(why) = baseline_name_problem(name) {
            // A name of any length is refused; the message shows only its start.
            let shown: String = if name.chars().count() > 64 {
                name.chars().take(60).chain("…".chars()).collect()
            } else {
                name.to_owned()
            };
            return Err(HistoryError::BadBaselineName { name: shown, why });
        }
        let id = match run {
            Some(id) => self.resolve(&RunRef::Run(id))?,
            None => self.latest()?,
        };
        let rows: i64 = self
            .conn
            .query_row(
                "SELECT COUNT(*) FROM results WHERE run_id = ?1",
                params![id],
                |r| r.get(0),
            )
            .map_err(self.err())?;
        if rows == 0 {
            return Err(HistoryError::EmptyBaseline { id });
        }
        let before = self.baseline_of(name)?;
        self.refuse_damage()?;
        self.conn
            .execute(
                "INSERT INTO baselines (name, run_id, saved_utc) VALUES (?1, ?2, ?3)
                 ON CONFLICT(name) DO UPDATE SET run_id = excluded.run_id,
                     saved_utc = excluded.saved_utc",
                params![name, id, super::save::utc_now()],
            )
            .map_err(self.err())?;
        Ok((id, before))
    }

    /// A damaged page can sit where naming a baseline never reads (an index of `runs`, say):
    /// `quick_check` finds it, so a history `run` called damaged is not written to here either.
    pub(super) fn refuse_damage(&self) -> Result<(), HistoryError> {
        let problems = self.quick_check()?;
        if problems == "ok" {
            return Ok(());
        }
        // SQLite heads its list with `*** in database main ***`: the first real problem says more.
        let first = problems
            .lines()
            .find(|l| !l.starts_with("***"))
            .unwrap_or_default()
            .to_owned();
        Err(HistoryError::Corrupt {
            path: self.path.clone(),
            source: rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
                Some(first),
            ),
        })
    }

    /// Every baseline, by name.
    pub fn baselines(&self) -> Result<Vec<BaselineRow>, HistoryError> {
        self.conn
            .prepare(
                "SELECT b.name, b.run_id, b.saved_utc, r.config_name, r.started_unix, r.host_label
                 FROM baselines b JOIN runs r ON r.id = b.run_id ORDER BY b.name",
            )
            .and_then(|mut s| {
                s.query_map([], |r| {
                    Ok(BaselineRow {
                        name: r.get(0)?,
                        run_id: r.get(1)?,
                        saved_utc: r.get(2)?,
                        config_name: r.get(3)?,
                        started_unix: r.get::<_, i64>(4)?.max(0) as u64,
                        host_label: r.get(5)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()
            })
            .map_err(self.err())
    }

    /// Removes a baseline (the run stays); returns the run it named.
    pub fn remove_baseline(&self, name: &str) -> Result<i64, HistoryError> {
        let id = self.baseline_run(name)?;
        self.conn
            .execute("DELETE FROM baselines WHERE name = ?1", [name])
            .map_err(self.err())?;
        Ok(id)
    }

    /// How many runs are stored.
    pub fn run_count(&self) -> Result<i64, HistoryError> {
        self.conn
            .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
            .map_err(self.err())
    }
}
