//! Results files and folders: the only part of the report that touches the filesystem.
//!
//! `write_*` are thin wrappers around the pure renderers; every file goes to a temporary
//! sibling and is renamed into place, so an interrupted run never leaves a truncated JSON that
//! a later `compare` would choke on.

use std::fs::{self, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::results::RunReport;

use super::format::compact_timestamp;
use super::ReportError;

static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to a fresh temporary file beside `path`, then renames it over `path`:
/// readers see the old file or the complete new one, never a torn one.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    let err = |source| ReportError::Write {
        path: path.to_owned(),
        source,
    };
    let name = path.file_name().ok_or_else(|| {
        err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path names no file",
        ))
    })?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let tmp = dir.join(format!(
        ".{}.{}-{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        TEMP_SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        // Best effort: the write already failed, and that error is the one worth reporting.
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(err)
}

pub fn write_json(report: &RunReport, path: &Path) -> Result<(), ReportError> {
    let text = super::json::to_json(report).map_err(|source| ReportError::Encode {
        path: path.to_owned(),
        source,
    })?;
    write_atomically(path, text.as_bytes())
}

pub fn write_csv(report: &RunReport, path: &Path) -> Result<(), ReportError> {
    write_atomically(path, super::csv::render_csv(report).as_bytes())
}

pub fn write_markdown(report: &RunReport, path: &Path) -> Result<(), ReportError> {
    write_atomically(path, super::markdown::render_markdown(report).as_bytes())
}

pub fn write_svg(report: &RunReport, path: &Path) -> Result<(), ReportError> {
    let svg = super::svg::render_svg(report).map_err(|message| ReportError::Chart {
        path: path.to_owned(),
        message,
    })?;
    write_atomically(path, svg.as_bytes())
}

fn write_table(report: &RunReport, path: &Path) -> Result<(), ReportError> {
    write_atomically(path, super::table::render_table(report).as_bytes())
}

/// A fresh folder for one run's files, with the conventional file names inside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputDir {
    path: PathBuf,
}

impl OutputDir {
    /// Creates `base/<config>-<YYYYmmdd-HHMMSS>[-N]`; see [`new_results_dir`].
    pub fn create(base: &Path, config_name: &str) -> Result<OutputDir, ReportError> {
        new_results_dir(base, config_name).map(|path| OutputDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn json(&self) -> PathBuf {
        self.path.join("results.json")
    }

    pub fn csv(&self) -> PathBuf {
        self.path.join("results.csv")
    }

    pub fn markdown(&self) -> PathBuf {
        self.path.join("results.md")
    }

    pub fn svg(&self) -> PathBuf {
        self.path.join("results.svg")
    }

    pub fn table(&self) -> PathBuf {
        self.path.join("results.txt")
    }

    /// Writes every format. JSON goes first: it is the one `compare` needs.
    pub fn write_all(&self, report: &RunReport) -> Result<(), ReportError> {
        write_json(report, &self.json())?;
        write_csv(report, &self.csv())?;
        write_markdown(report, &self.markdown())?;
        write_table(report, &self.table())?;
        write_svg(report, &self.svg())
    }
}

/// Config names come from users; keep the folder name to characters every shell and
/// filesystem takes literally.
pub(crate) fn folder_safe(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let s = s.trim_matches(['.', '-']).to_string();
    if s.is_empty() {
        "run".into()
    } else {
        s
    }
}

/// Creates and returns `base/<config>-<YYYYmmdd-HHMMSS>` (UTC), or with `-2`, `-3`, … appended
/// when that exists. `create_dir` (not `_all`) on the last component makes the check and the
/// creation one step, so two runs started in the same second never share a folder.
pub fn new_results_dir(base: &Path, config_name: &str) -> Result<PathBuf, ReportError> {
    fs::create_dir_all(base).map_err(|source| ReportError::CreateDir {
        path: base.to_owned(),
        source,
    })?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let stem = format!("{}-{}", folder_safe(config_name), compact_timestamp(now));
    let mut n = 1u32;
    loop {
        let path = if n == 1 {
            base.join(&stem)
        } else {
            base.join(format!("{stem}-{n}"))
        };
        match fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 10_000 => n += 1,
            Err(source) => return Err(ReportError::CreateDir { path, source }),
        }
    }
}
