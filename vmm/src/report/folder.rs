//! Results files and folders: the only part of the report that touches the filesystem.
//!
//! The CLI writes every file of [`OutputDir::files`] through
//! [`crate::files::write::OutputTarget`] (a temporary sibling renamed into place, never over a
//! symlink, FIFO or device), so an interrupted run never leaves a truncated JSON that a later
//! `compare` would choke on.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::results::RunReport;

use super::format::compact_timestamp;
use super::ReportError;

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

    /// Every format rendered: (path, text or why it could not be rendered). JSON goes first:
    /// it is the one `compare` needs.
    pub fn files(&self, report: &RunReport) -> Vec<(PathBuf, Result<String, String>)> {
        let mut files = vec![
            (
                self.json(),
                super::json::to_json(report).map_err(|e| e.to_string()),
            ),
            (self.csv(), Ok(super::csv::render_csv(report))),
            (
                self.markdown(),
                Ok(super::markdown::render_markdown(report)),
            ),
            (
                self.table(),
                Ok(super::table::render_table_at(report, super::DEFAULT_WIDTH)),
            ),
            (self.svg(), super::svg::render_svg(report)),
        ];
        match super::forest::render_forest(report) {
            Some(Ok(pages)) => {
                for (k, page) in pages.into_iter().enumerate() {
                    let name = super::forest::forest_page_name("forest.svg", k + 1);
                    files.push((self.path.join(name), Ok(page)));
                }
            }
            Some(Err(why)) => files.push((self.path.join("forest.svg"), Err(why))),
            None => {}
        }
        files
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
/// creation one step, so two runs started in the same second never share a folder. `base`
/// itself is created only when its parent exists, as `mkdir` would: a mistyped `--out
/// /srv/reslts/x` is an error, not a tree of new folders.
/// Whether a run's folder could be made in `base` (an existing folder, or a new one in an
/// existing folder), creating nothing: checked before the run, the folder made after it, so
/// a run that cannot start (a host that fails validation) leaves no empty folder.
pub fn check_out_base(base: &Path) -> Result<(), ReportError> {
    let exists = fs::symlink_metadata(base).is_ok();
    if exists && !base.is_dir() {
        return Err(not_a_folder(base));
    }
    let folder = if exists {
        base
    } else {
        match base.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        }
    };
    let cannot = |source| ReportError::CreateDir {
        path: base.to_owned(),
        source,
    };
    if !folder.is_dir() {
        return Err(cannot(io::Error::from_raw_os_error(libc::ENOENT)));
    }
    // root passes access(2) where no folder can be made (/proc): making a temporary folder
    // there, removed at once, is the only sure test.
    tempfile::Builder::new()
        .prefix(".irqbench-probe")
        .tempdir_in(folder)
        .map(drop)
        .map_err(cannot)
}

/// `--out` names something that is not a folder: say what is there.
fn not_a_folder(base: &Path) -> ReportError {
    let link = fs::symlink_metadata(base).is_ok_and(|m| m.file_type().is_symlink());
    let kind = match fs::metadata(base).map(|m| crate::files::read::file_kind(&m)) {
        Ok(kind) if link => format!("symbolic link to a {kind}"),
        Ok(kind) => kind.to_owned(),
        Err(_) => "symbolic link that leads nowhere".to_owned(),
    };
    ReportError::OutNotAFolder {
        path: base.to_owned(),
        kind,
    }
}

pub fn new_results_dir(base: &Path, config_name: &str) -> Result<PathBuf, ReportError> {
    check_out_base(base)?;
    match fs::create_dir(base) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && base.is_dir() => {}
        // "File exists" says nothing to someone who named a folder: say what is there.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(not_a_folder(base));
        }
        Err(source) => {
            return Err(ReportError::CreateDir {
                path: base.to_owned(),
                source,
            })
        }
        Ok(()) => {}
    }
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
