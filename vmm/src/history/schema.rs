//! The database layout. `PRAGMA user_version` is the schema version: 0 is an empty file, which
//! gets the layout inside one `BEGIN IMMEDIATE` transaction (two processes opening it at once
//! create it once); an older version is refused with the commands that carry its runs over.

use rusqlite::{Transaction, TransactionBehavior};

use super::{HistoryError, Store, APPLICATION_ID};
use crate::results::HostManifest;

/// The schema this irqbench writes.
pub const LATEST_VERSION: i64 = 3;

/// Version 3: runs, their result rows and paired comparisons, baselines.
const LAYOUT: &str = "
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
    report_json TEXT NOT NULL,
    -- CPU, kernel, KVM flavour: what `history` shows and `--host` matches besides the hostname.
    host_label TEXT NOT NULL DEFAULT ''
);
CREATE INDEX runs_by_config ON runs(config_name, started_unix);
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

/// Gives an empty database the layout and marks it as irqbench's, in one transaction; refuses
/// another version without writing.
pub(super) fn migrate(store: &Store) -> Result<(), HistoryError> {
    let err = store.err();
    let version = store.schema_version()?;
    if version == LATEST_VERSION {
        return Ok(());
    }
    refuse_other(store, version)?;
    let tx =
        Transaction::new_unchecked(&store.conn, TransactionBehavior::Immediate).map_err(&err)?;
    // Another process may have migrated (or created a foreign schema) while this one waited.
    store.identify_in_transaction()?;
    let version: i64 = tx
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(&err)?;
    if version == 0 {
        tx.execute_batch(LAYOUT).map_err(&err)?;
    } else {
        refuse_other(store, version)?;
    }
    tx.pragma_update(None, "application_id", APPLICATION_ID)
        .map_err(&err)?;
    tx.pragma_update(None, "user_version", LATEST_VERSION)
        .map_err(&err)?;
    tx.commit().map_err(&err)
}

/// A database of another version than [`LATEST_VERSION`] (0 is an empty one) is refused.
pub(super) fn refuse_other(store: &Store, found: i64) -> Result<(), HistoryError> {
    let path = store.path.clone();
    match found {
        0 | LATEST_VERSION => Ok(()),
        v if v > LATEST_VERSION => Err(HistoryError::Newer { path, found }),
        _ => Err(HistoryError::Older { path, found }),
    }
}
