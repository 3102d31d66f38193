//! Every run kept: the results history, an embedded SQLite database (rusqlite with its bundled
//! SQLite, so nothing is installed besides the Rust toolchain).
//!
//! One file, by default `$XDG_DATA_HOME/irqbench/history.sqlite` (or
//! `~/.local/share/irqbench/history.sqlite`). What it holds, per run: when (UTC), the irqbench
//! version, the guest ELF's SHA-256, the config's name, text and SHA-256, the host manifest,
//! every result row (medians, CIs, per-round samples), the paired comparisons, whether the run
//! is partial, and the whole report as JSON, so `compare` and `check` see exactly what was
//! measured. Baselines are names for runs.
//!
//! Reliability: WAL mode and a busy timeout (two processes saving at once both land); one
//! transaction per run (a `kill -9` mid-save loses that run only); a schema version in
//! `PRAGMA user_version` with migrations ([`schema`]); `PRAGMA application_id` marks the file
//! as irqbench's, and a file at the path that is not an SQLite database, is another
//! application's, or is damaged is refused with its path named and never written; a symlink,
//! FIFO, device or directory at the path is refused without being opened.

mod check;
mod pivot;
mod query;
mod rerun;
mod save;
mod schema;
mod trend;

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags};

pub use check::{check, render_check, CheckOutcome, DEFAULT_MAX_REGRESSION_PCT};
pub use pivot::render_history_pivot;
pub use query::{BaselineRow, RunFilter, RunRef, RunRow, TrendPoint, MAX_BASELINE_NAME};
pub use rerun::fill_rerun;
pub use save::{sha256_hex, Origin, RunMeta, Saved};
pub use schema::LATEST_VERSION;
pub use trend::{
    render_baselines, render_history, render_history_json, render_time, render_trend_svg,
    DEFAULT_LAST,
};

/// `PRAGMA application_id` of an irqbench history: "irqb" in ASCII.
pub const APPLICATION_ID: i32 = 0x6972_7162;
/// The file name under the data folder.
pub const DB_FILE: &str = "history.sqlite";
/// How long a save waits for another process's transaction before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);
/// Tests only: milliseconds a save sleeps inside its transaction, after a line on stderr, so a
/// test can kill the process mid-save.
pub const SAVE_PAUSE_ENV: &str = "IRQBENCH_TEST_SAVE_PAUSE_MS";

/// The 16 bytes every SQLite database file starts with.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";
/// Offset of the big-endian application id in the database header.
const HEADER_APPLICATION_ID: usize = 68;
const HEADER_LEN: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error(
        "cannot store this run: {field} = {value} is beyond what the history keeps (at most \
         {max}); the results file is damaged or was not written by irqbench"
    )]
    OutOfRange {
        field: &'static str,
        value: u64,
        max: i64,
    },
    #[error(
        "no folder for the history database: neither XDG_DATA_HOME nor HOME is an absolute \
         path (name a file with --db)"
    )]
    NoLocation,
    #[error(
        "cannot create the folder {dir} for the history database",
        dir = crate::text::escape_path(.dir)
    )]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "history database {path}: the folder {dir} does not exist or is not a folder",
        path = crate::text::escape_path(.path),
        dir = crate::text::escape_path(.dir)
    )]
    NoFolder { path: PathBuf, dir: PathBuf },
    #[error(
        "history database {path} is a {kind}, not a regular file: irqbench keeps its history \
         only in a regular file; name another path with --db (a new one, or an existing irqbench \
         history)",
        path = crate::text::escape_path(.path)
    )]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error(
        "cannot look at the history database {path}",
        path = crate::text::escape_path(.path)
    )]
    Inspect {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{path} is not an SQLite database ({what}): it is no irqbench history, and irqbench \
         leaves it untouched; move it away or name another file with --db",
        path = crate::text::escape_path(.path)
    )]
    NotSqlite { path: PathBuf, what: &'static str },
    #[error(
        "{path} is another application's SQLite database (application_id {found:#010x}; an \
         irqbench history has {APPLICATION_ID:#010x}): irqbench leaves it untouched; name \
         another file with --db",
        path = crate::text::escape_path(.path)
    )]
    Foreign { path: PathBuf, found: i32 },
    #[error(
        "{path} is an SQLite database with tables but without irqbench's application_id: it is \
         no irqbench history, and irqbench leaves it untouched; name another file with --db",
        path = crate::text::escape_path(.path)
    )]
    Unmarked { path: PathBuf },
    #[error(
        "history database {path} is damaged: irqbench leaves it untouched; move it away (a new \
         history then starts) or try `sqlite3 {path} .recover`",
        path = crate::text::escape_path(.path)
    )]
    Corrupt {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "history database {path} has schema version {found}, newer than the {LATEST_VERSION} \
         this irqbench knows: use a newer irqbench, or name another file with --db",
        path = crate::text::escape_path(.path)
    )]
    Newer { path: PathBuf, found: i64 },
    /// Versions 1 and 2 (irqbench of 2026-11): their runs' reports are in the file, and the
    /// ones this irqbench reads (schema 3 on) import into a new database.
    #[error(
        "history database {path} has schema version {found}, older than the {LATEST_VERSION} \
         this irqbench reads; carry its runs into a new database: `mkdir runs && sqlite3 \
         {path} \"SELECT writefile('runs/' || id || '.json', report_json) FROM runs\" && \
         irqbench import runs/*.json --db NEW.sqlite` (runs stored as irqbench-results/1 or /2 \
         are no longer read)",
        path = crate::text::escape_path(.path)
    )]
    Older { path: PathBuf, found: i64 },
    #[error(
        "history database {path} cannot be written: {why}",
        path = crate::text::escape_path(.path)
    )]
    ReadOnly {
        path: PathBuf,
        why: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "history database {path} cannot be written: {why}",
        path = crate::text::escape_path(.path)
    )]
    NoSpace {
        path: PathBuf,
        why: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "history database {path}",
        path = crate::text::escape_path(.path)
    )]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("cannot encode the run for the history database")]
    Encode {
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "history database {path}: the report of run {id} cannot be read back",
        path = crate::text::escape_path(.path)
    )]
    Decode {
        path: PathBuf,
        id: i64,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "there is no history database at {path} yet: `irqbench run` creates it",
        path = crate::text::escape_path(.path)
    )]
    Missing { path: PathBuf },
    #[error(
        "{path} holds no runs yet: `irqbench run` saves one",
        path = crate::text::escape_path(.path)
    )]
    NoRuns { path: PathBuf },
    #[error(
        "there is no run {id} in {path}; its runs are {known} (`irqbench history` lists them)",
        path = crate::text::escape_path(.path)
    )]
    NoSuchRun {
        path: PathBuf,
        id: i64,
        known: String,
    },
    #[error(
        "there is no baseline `{name}` in {path}; {known}",
        name = crate::text::escape_clipped(.name, 64),
        path = crate::text::escape_path(.path),
        known = crate::text::escape_line(.known)
    )]
    NoSuchBaseline {
        path: PathBuf,
        name: String,
        known: String,
    },
    #[error(
        "`{name}` cannot name a baseline: {why} (use letters, digits, `.`, `_` and `-`, at most \
         {MAX_BASELINE_NAME} characters, not only digits)",
        name = crate::text::outside(.name)
    )]
    BadBaselineName { name: String, why: &'static str },
    #[error(
        "run {id} has no result rows: a check against it would judge nothing; name a run that \
         measured something (`irqbench history` lists them with their rows)"
    )]
    EmptyBaseline { id: i64 },
    #[error(
        "no stored run matches {what}; stored: {known}",
        what = crate::text::escape_message(.what),
        known = crate::text::escape_message(.known)
    )]
    NoMatch { what: String, known: String },
    #[error(
        "`{arg}` names no run: after `run:` comes a run id, a number from 1 up as `irqbench \
         history` lists them (`run:12`); a results file, `latest`, a run id or a baseline name \
         (`baseline:NAME`) name a run too",
        arg = crate::text::escape_clipped(.arg, 64)
    )]
    BadRunId { arg: String },
}

/// An SQLite error as ours: corruption and "not a database" name the damage, a write refused
/// by the file system or the file's mode names which, the rest the path.
fn db_error(path: &Path) -> impl Fn(rusqlite::Error) -> HistoryError + '_ {
    move |source| {
        let path = path.to_owned();
        match source.sqlite_error_code() {
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => {
                HistoryError::Corrupt { path, source }
            }
            // SQLite says "attempt to write a readonly database" or, on a read-only mount where
            // it cannot create the -shm file, "unable to open database file": neither names why.
            Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen) => match read_only_cause(&path) {
                Some(why) => HistoryError::ReadOnly { path, why, source },
                None => HistoryError::Sqlite { path, source },
            },
            // SQLite says "database or disk is full" or, for EFBIG, "disk I/O error".
            Some(ErrorCode::DiskFull | ErrorCode::SystemIoFailure) => match space_cause(&path) {
                Some(why) => HistoryError::NoSpace { path, why, source },
                None => HistoryError::Sqlite { path, source },
            },
            _ => HistoryError::Sqlite { path, source },
        }
    }
}

/// Why a write may have failed for room: a file-size limit (`ulimit -f`, EFBIG) or a file
/// system with less than 1 MiB left for this user (ENOSPC).
fn space_cause(path: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit) } == 0
        && limit.rlim_cur != libc::RLIM_INFINITY
    {
        return Some(format!(
            "the file-size limit (ulimit -f) is {} bytes (EFBIG)",
            limit.rlim_cur
        ));
    }
    let dir = std::ffi::CString::new(folder(path).as_os_str().as_bytes()).ok()?;
    let free = statvfs(&dir).map(|st| st.f_bavail * st.f_frsize)?;
    (free < 1 << 20).then(|| format!("its file system has {free} bytes left (ENOSPC)"))
}

/// The file system facts of the folder `dir`, or `None` when it cannot be looked at.
fn statvfs(dir: &std::ffi::CStr) -> Option<libc::statvfs> {
    // SAFETY: statvfs writes only into the zeroed struct it is given; the path is a valid
    // NUL-terminated string that outlives the call.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        (libc::statvfs(dir.as_ptr(), &mut st) == 0).then_some(st)
    }
}

fn folder(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Why this process cannot write the database at `path`, if the file system or the modes say.
fn read_only_cause(path: &Path) -> Option<&'static str> {
    use std::os::unix::ffi::OsStrExt;
    let dir = folder(path);
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).ok();
    let (file_c, dir_c) = (c(path)?, c(dir)?);
    if statvfs(&dir_c).is_some_and(|st| st.f_flag & libc::ST_RDONLY != 0) {
        return Some("the file system it is on is mounted read-only (EROFS)");
    }
    // SAFETY: access only reads the NUL-terminated path.
    let writable = |p: &std::ffi::CString| unsafe { libc::access(p.as_ptr(), libc::W_OK) == 0 };
    if path.exists() && !writable(&file_c) {
        return Some("this user may not write the file (EACCES)");
    }
    if !writable(&dir_c) {
        return Some(
            "this user may not write its folder, where SQLite keeps the -wal and -shm files \
             (EACCES)",
        );
    }
    None
}

/// Where the history lives: `--db PATH`, or the default under the XDG data folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbLocation {
    pub path: PathBuf,
    /// Named with `--db`: its folder must exist (the default folder is created).
    pub explicit: bool,
}

impl DbLocation {
    /// The database and the files SQLite keeps beside it, each with what it is (for messages):
    /// an output written over any of them would destroy the history.
    pub fn files(&self) -> Vec<(&'static str, PathBuf)> {
        let [wal, shm, journal] = SIDE_FILES.map(|suffix| beside(&self.path, suffix));
        vec![
            ("history database", self.path.clone()),
            ("history database's write-ahead log", wal),
            ("history database's shared-memory file", shm),
            ("history database's journal", journal),
        ]
    }

    /// `--db` if given, else the default from the environment.
    pub fn resolve(db: Option<&Path>) -> Result<DbLocation, HistoryError> {
        match db {
            Some(p) => Ok(DbLocation {
                path: p.to_owned(),
                explicit: true,
            }),
            None => Ok(DbLocation {
                path: default_path(
                    std::env::var_os("XDG_DATA_HOME").as_deref(),
                    std::env::var_os("HOME").as_deref(),
                )?,
                explicit: false,
            }),
        }
    }
}

/// `$XDG_DATA_HOME/irqbench/history.sqlite`, else `$HOME/.local/share/irqbench/...`. A relative
/// or empty XDG_DATA_HOME is ignored, as the XDG base directory spec says.
pub fn default_path(
    xdg_data_home: Option<&std::ffi::OsStr>,
    home: Option<&std::ffi::OsStr>,
) -> Result<PathBuf, HistoryError> {
    let absolute = |v: Option<&std::ffi::OsStr>| {
        v.map(PathBuf::from)
            .filter(|p| p.is_absolute() && p.as_os_str().len() > 1)
    };
    let data = absolute(xdg_data_home)
        .or_else(|| absolute(home).map(|h| h.join(".local").join("share")))
        .ok_or(HistoryError::NoLocation)?;
    Ok(data.join("irqbench").join(DB_FILE))
}

/// `file:` URI of `path` with `query`: every byte but unreserved ones and `/` percent-encoded,
/// so `?`, `#` and `%` in a file name stay part of it.
fn sqlite_uri(path: &Path, query: &str) -> String {
    use std::fmt::Write as _;
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/._-~".contains(&b) {
            uri.push(char::from(b));
        } else {
            let _ = write!(uri, "%{b:02X}");
        }
    }
    uri.push_str(query);
    uri
}

/// The files SQLite keeps beside the database: `<path>-wal`, `-shm`, `-journal`.
const SIDE_FILES: [&str; 3] = ["-wal", "-shm", "-journal"];

fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// SQLite opens the files beside the database read-write and deletes them when it is done: a
/// FIFO or device node there would be opened, written and unlinked, a link or folder fails
/// with an error that names none of them. Only nothing or a regular file is accepted.
fn inspect_side_files(path: &Path) -> Result<(), HistoryError> {
    for suffix in SIDE_FILES {
        let side = beside(path, suffix);
        match fs::symlink_metadata(&side) {
            Ok(meta) if !meta.file_type().is_file() => {
                return Err(HistoryError::NotRegular {
                    kind: crate::files::read::file_kind(&meta),
                    path: side,
                })
            }
            // A regular file, nothing, or nothing to look at (SQLite's own error names that).
            _ => {}
        }
    }
    Ok(())
}

/// What is at the database path before SQLite sees it.
#[derive(Debug, PartialEq, Eq)]
enum FileState {
    Missing,
    /// A regular file: empty, or with the SQLite header.
    Present,
}

/// Refuses anything but nothing or a regular file that is empty or starts with the SQLite
/// header without another application's id. Opened with O_NOFOLLOW and O_NONBLOCK: a FIFO
/// never blocks and a link is never followed.
fn inspect(path: &Path) -> Result<FileState, HistoryError> {
    inspect_side_files(path)?;
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(FileState::Missing),
        Err(source) => {
            return Err(HistoryError::Inspect {
                path: path.to_owned(),
                source,
            })
        }
    };
    let not_regular = |meta: &fs::Metadata| HistoryError::NotRegular {
        path: path.to_owned(),
        kind: crate::files::read::file_kind(meta),
    };
    if !meta.file_type().is_file() {
        return Err(not_regular(&meta));
    }
    let inspect_err = |source| HistoryError::Inspect {
        path: path.to_owned(),
        source,
    };
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
            .map_err(inspect_err)?
    };
    let meta = file.metadata().map_err(inspect_err)?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    let mut header = Vec::with_capacity(HEADER_LEN);
    file.take(HEADER_LEN as u64)
        .read_to_end(&mut header)
        .map_err(inspect_err)?;
    check_header(path, &header)?;
    Ok(FileState::Present)
}

/// An empty file is a database SQLite has not written yet; anything else must be SQLite's,
/// with irqbench's application id or none yet (a new database, checked again once open).
fn check_header(path: &Path, header: &[u8]) -> Result<(), HistoryError> {
    if header.is_empty() {
        return Ok(());
    }
    let not_sqlite = |what| HistoryError::NotSqlite {
        path: path.to_owned(),
        what,
    };
    if header.len() < HEADER_LEN {
        return Err(not_sqlite("shorter than an SQLite header"));
    }
    if &header[..SQLITE_MAGIC.len()] != SQLITE_MAGIC {
        return Err(not_sqlite("no SQLite header"));
    }
    let mut id = [0u8; 4];
    id.copy_from_slice(&header[HEADER_APPLICATION_ID..HEADER_APPLICATION_ID + 4]);
    let found = i32::from_be_bytes(id);
    if found != 0 && found != APPLICATION_ID {
        return Err(HistoryError::Foreign {
            path: path.to_owned(),
            found,
        });
    }
    Ok(())
}

/// An open history database.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Opens the history at `loc`, creating it (and, for the default location, its folder)
    /// when it does not exist, and migrating an older schema.
    pub fn open(loc: &DbLocation) -> Result<Store, HistoryError> {
        let path = &loc.path;
        if inspect(path)? == FileState::Missing {
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            if !loc.explicit {
                fs::create_dir_all(dir).map_err(|source| HistoryError::CreateDir {
                    dir: dir.to_owned(),
                    source,
                })?;
            }
            if !dir.is_dir() {
                return Err(HistoryError::NoFolder {
                    path: path.clone(),
                    dir: dir.to_owned(),
                });
            }
        }
        Store::connect(path)
    }

    /// Whether a run could be saved here: a damaged page is found (`quick_check`), and the
    /// write lock taken and let go at once, so a damaged or read-only history is refused
    /// before the run instead of at its end.
    pub fn check_writable(&self) -> Result<(), HistoryError> {
        self.refuse_damage()?;
        let err = db_error(&self.path);
        self.conn
            .execute_batch("BEGIN IMMEDIATE; ROLLBACK;")
            .map_err(&err)
    }

    /// Whether a run could be saved in an existing history at `loc`, or a new one created
    /// there, creating nothing: a run that cannot start (or is stopped before it does) leaves
    /// no database behind. A new history's folder must exist when named with `--db`; the
    /// default one's nearest existing folder must take new files.
    pub fn check_can_save(loc: &DbLocation) -> Result<(), HistoryError> {
        match Store::open_existing(loc) {
            Ok(store) => return store.check_writable(),
            Err(HistoryError::Missing { .. }) => {}
            Err(e) => return Err(e),
        }
        let dir = folder(&loc.path);
        if loc.explicit && !dir.is_dir() {
            return Err(HistoryError::NoFolder {
                path: loc.path.clone(),
                dir: dir.to_owned(),
            });
        }
        let Some(existing) = dir.ancestors().find(|a| a.is_dir()) else {
            return Ok(());
        };
        let read_only = |why| HistoryError::ReadOnly {
            path: loc.path.clone(),
            why,
            source: rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_READONLY),
                None,
            ),
        };
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(existing.as_os_str().as_bytes())
            .map_err(|_| read_only("its folder's name holds a NUL byte"))?;
        // SAFETY: access only reads the NUL-terminated path, which outlives the call.
        if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
            return Err(read_only(
                "this user may not create files in its folder (EACCES or a read-only mount)",
            ));
        }
        Ok(())
    }

    /// Opens the history only if it exists: reading commands never create one.
    pub fn open_existing(loc: &DbLocation) -> Result<Store, HistoryError> {
        match inspect(&loc.path)? {
            FileState::Missing => Err(HistoryError::Missing {
                path: loc.path.clone(),
            }),
            FileState::Present => Store::connect(&loc.path),
        }
    }

    /// Opens an existing history for queries only: nothing is written, so a file this user
    /// may only read, or one on a read-only mount, can still be queried. A schema older than
    /// this irqbench's is migrated first, which needs write access.
    pub fn open_read_only(loc: &DbLocation) -> Result<Store, HistoryError> {
        if inspect(&loc.path)? == FileState::Missing {
            return Err(HistoryError::Missing {
                path: loc.path.clone(),
            });
        }
        let store = match Store::connect_read_only(&loc.path, false) {
            // A WAL reader needs the -shm file, which SQLite cannot create on a read-only
            // mount or in another user's folder. With no -wal file no writer has pages
            // pending, so the file alone is the history and is read as immutable.
            Err(HistoryError::ReadOnly { .. }) if !beside(&loc.path, "-wal").exists() => {
                Store::connect_read_only(&loc.path, true)?
            }
            other => other?,
        };
        if store.schema_version()? < LATEST_VERSION {
            return Store::connect(&loc.path);
        }
        Ok(store)
    }

    fn connect_read_only(path: &Path, immutable: bool) -> Result<Store, HistoryError> {
        let err = db_error(path);
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NOFOLLOW
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let uri = sqlite_uri(path, if immutable { "?immutable=1" } else { "" });
        let conn = Connection::open_with_flags(uri, flags).map_err(&err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(&err)?;
        let store = Store {
            conn,
            path: path.to_owned(),
        };
        store.identify()?;
        schema::refuse_other(&store, store.schema_version()?)?;
        Ok(store)
    }

    fn connect(path: &Path) -> Result<Store, HistoryError> {
        let err = db_error(path);
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NOFOLLOW
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(&err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(&err)?;
        let store = Store {
            conn,
            path: path.to_owned(),
        };
        // Read-only questions first: nothing is written to a file that is not ours.
        store.identify()?;
        store.enable_wal()?;
        store
            .conn
            .execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = FULL;")
            .map_err(&err)?;
        schema::migrate(&store)?;
        Ok(store)
    }

    /// The database's path, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> HistoryError + '_ {
        db_error(&self.path)
    }

    /// Ours (our application id), or new (no id and no tables); anything else is refused.
    /// Both are read in one transaction: another process creating the schema between the two
    /// reads would otherwise look like tables without our id.
    fn identify(&self) -> Result<(), HistoryError> {
        let tx = rusqlite::Transaction::new_unchecked(
            &self.conn,
            rusqlite::TransactionBehavior::Deferred,
        )
        .map_err(self.err())?;
        self.identify_in_transaction()?;
        tx.commit().map_err(self.err())
    }

    /// [`Store::identify`] inside a transaction the caller holds.
    fn identify_in_transaction(&self) -> Result<(), HistoryError> {
        let app_id: i32 = self
            .conn
            .pragma_query_value(None, "application_id", |r| r.get(0))
            .map_err(self.err())?;
        if app_id == APPLICATION_ID {
            return Ok(());
        }
        if app_id != 0 {
            return Err(HistoryError::Foreign {
                path: self.path.clone(),
                found: app_id,
            });
        }
        let tables: i64 = self
            .conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(self.err())?;
        if tables > 0 {
            return Err(HistoryError::Unmarked {
                path: self.path.clone(),
            });
        }
        Ok(())
    }

    /// WAL lets readers and one writer work at once. Switching needs a moment of exclusive
    /// access, which SQLite does not wait for: two first opens at once retry here.
    fn enable_wal(&self) -> Result<(), HistoryError> {
        let started = Instant::now();
        loop {
            let mode = self
                .conn
                .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0));
            match mode {
                Ok(_) => return Ok(()),
                Err(e)
                    if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy)
                        && started.elapsed() < BUSY_TIMEOUT =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(self.err()(e)),
            }
        }
    }

    /// `PRAGMA integrity_check`: `ok`, or SQLite's list of problems.
    pub fn integrity_check(&self) -> Result<String, HistoryError> {
        self.check_pragma("integrity_check")
    }

    /// `PRAGMA quick_check`: `integrity_check` without the index contents, linear in the file.
    pub fn quick_check(&self) -> Result<String, HistoryError> {
        self.check_pragma("quick_check")
    }

    fn check_pragma(&self, pragma: &str) -> Result<String, HistoryError> {
        let lines: Vec<String> = self
            .conn
            .prepare(&format!("PRAGMA {pragma}"))
            .and_then(|mut s| {
                s.query_map([], |r| r.get::<_, String>(0))?
                    .collect::<Result<Vec<String>, _>>()
            })
            .map_err(self.err())?;
        Ok(lines.join("\n"))
    }

    /// The schema version (`PRAGMA user_version`).
    pub fn schema_version(&self) -> Result<i64, HistoryError> {
        self.conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(self.err())
    }
}

#[cfg(test)]
mod tests;
