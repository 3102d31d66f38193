//! The database layout and its migrations. `PRAGMA user_version` is the schema version: 0 is
//! an empty file, and each step below takes a database from version n to n + 1 inside one
//! `BEGIN IMMEDIATE` transaction, so two processes opening an old file at once migrate it once.
//! A shipped step is never edited: a change is a new step (the tests build a version-1 file by
//! hand and open it).

use rusqlite::{Connection, Transaction, TransactionBehavior};

use super::{HistoryError, Store, APPLICATION_ID};
use crate::results::HostManifest;

/// The schema this irqbench writes.
pub const LATEST_VERSION: i64 = 3;

/// Version 1, the first schema: runs, their result rows and paired comparisons, baselines.
const V1: &str = "
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    saved_utc TEXT NOT NULL,
    started_unix INTEGER NOT NULL,
    wall_seconds REAL NOT NULL,
    irqbench_version TEXT NOT NULL,
    results_schema TEXT NOT NULL,
    origin TEXT NOT NULL,
    source_file TEXT,
    guest_source TEXT,
    guest_sha256 TEXT,
    config_name TEXT NOT NULL,
    config_source TEXT NOT NULL,
    config_text TEXT,
    config_sha256 TEXT,
    hostname TEXT NOT NULL,
    host_json TEXT NOT NULL,
    partial INTEGER NOT NULL,
    partial_reason TEXT,
    report_sha256 TEXT NOT NULL UNIQUE,
    report_json TEXT NOT NULL
);
CREATE TABLE results (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    name TEXT NOT NULL,
    group_name TEXT NOT NULL,
    kind TEXT NOT NULL,
    strategy TEXT NOT NULL,
    irq_source TEXT NOT NULL,
    nesting REAL NOT NULL,
    vcpus INTEGER NOT NULL,
    body_ops INTEGER NOT NULL,
    rounds INTEGER NOT NULL,
    ops INTEGER NOT NULL,
    cycles_median REAL NOT NULL,
    cycles_lo REAL,
    cycles_hi REAL,
    cycles_samples TEXT NOT NULL,
    ns_median REAL NOT NULL,
    ns_lo REAL,
    ns_hi REAL,
    ops_per_sec_median REAL NOT NULL,
    ops_per_sec_lo REAL,
    ops_per_sec_hi REAL,
    exits_per_op REAL,
    exits_lo REAL,
    exits_hi REAL,
    precision_reached INTEGER NOT NULL,
    disturbed_fraction REAL NOT NULL,
    PRIMARY KEY (run_id, position)
);
CREATE INDEX results_by_name ON results(name, run_id);
CREATE TABLE comparisons (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    a TEXT NOT NULL,
    b TEXT NOT NULL,
    group_name TEXT NOT NULL,
    metric TEXT NOT NULL,
    ratio_median REAL NOT NULL,
    ratio_lo REAL NOT NULL,
    ratio_hi REAL NOT NULL,
    rounds INTEGER NOT NULL,
    PRIMARY KEY (run_id, position)
);
CREATE TABLE baselines (
    name TEXT PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    saved_utc TEXT NOT NULL
);
";

/// Version 2: `runs.host_label` (CPU, kernel, KVM flavour: what `history` shows and `--host`
/// matches besides the hostname), filled in for the runs version 1 stored; an index for the
/// per-config listing.
fn v2(tx: &Connection) -> rusqlite::Result<()> {
    tx.execute_batch(
        "ALTER TABLE runs ADD COLUMN host_label TEXT NOT NULL DEFAULT '';
         CREATE INDEX runs_by_config ON runs(config_name, started_unix);",
    )?;
    let hosts: Vec<(i64, String)> = tx
        .prepare("SELECT id, host_json FROM runs")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let mut update = tx.prepare("UPDATE runs SET host_label = ?1 WHERE id = ?2")?;
    for (id, json) in hosts {
        // A manifest that does not parse keeps the empty label: the run itself stays readable.
        if let Ok(host) = serde_json::from_str::<HostManifest>(&json) {
            update.execute(rusqlite::params![host_label(&host), id])?;
        }
    }
    Ok(())
}

/// Version 3: results of `irqbench-results/1` runs keep no CI. Those files have none, and
/// builds before this step indexed their absent `ci95` (read as `[0, 0]`) as the interval
/// [0, 0] once a row had 6 or more repeats, which `history` then showed as `≈0 (±14000)`.
const V3: &str = "
UPDATE results SET cycles_lo = NULL, cycles_hi = NULL, ns_lo = NULL, ns_hi = NULL,
    ops_per_sec_lo = NULL, ops_per_sec_hi = NULL, exits_lo = NULL, exits_hi = NULL
WHERE run_id IN (SELECT id FROM runs WHERE results_schema = 'irqbench-results/1'
    OR results_schema LIKE 'irqbench-results/1.%');
";

/// `AMD EPYC (2 CPUs), kernel 6.18.44, pvm (nested)`.
pub(crate) fn host_label(h: &HostManifest) -> String {
    format!(
        "{} ({} CPUs), kernel {}, {}{}",
        h.cpu_model,
        h.host_cpus,
        h.kernel_release,
        h.kvm_flavour,
        if h.nested { " (nested)" } else { "" }
    )
}

/// Step n takes version n to n + 1.
fn step(tx: &Connection, from: i64) -> rusqlite::Result<()> {
    match from {
        0 => tx.execute_batch(V1),
        1 => v2(tx),
        2 => tx.execute_batch(V3),
        _ => Ok(()),
    }
}

/// Brings the database to [`LATEST_VERSION`] and marks it as irqbench's, in one transaction;
/// refuses a newer schema without writing.
pub(super) fn migrate(store: &Store) -> Result<(), HistoryError> {
    let err = store.err();
    let version = store.schema_version()?;
    if version == LATEST_VERSION {
        return Ok(());
    }
    if version > LATEST_VERSION {
        return Err(HistoryError::Newer {
            path: store.path.clone(),
            found: version,
        });
    }
    let tx =
        Transaction::new_unchecked(&store.conn, TransactionBehavior::Immediate).map_err(&err)?;
    // Another process may have migrated (or created a foreign schema) while this one waited.
    store.identify_in_transaction()?;
    let version: i64 = tx
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(&err)?;
    if version > LATEST_VERSION {
        return Err(HistoryError::Newer {
            path: store.path.clone(),
            found: version,
        });
    }
    for from in version..LATEST_VERSION {
        step(&tx, from).map_err(&err)?;
    }
    tx.pragma_update(None, "application_id", APPLICATION_ID)
        .map_err(&err)?;
    tx.pragma_update(None, "user_version", LATEST_VERSION)
        .map_err(&err)?;
    tx.commit().map_err(&err)
}
