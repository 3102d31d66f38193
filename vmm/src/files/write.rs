//! Where irqbench writes: every file a run produces, and stdout.
//!
//! irqbench runs as root, so a path a user names must never turn into damage: writing goes to a
//! temporary sibling that is renamed over the target (readers never see a torn file), and a
//! rename replaces the directory entry whatever it is. A symlink, FIFO, device node or socket at
//! the path is therefore refused with its kind named, instead of being replaced (`--json
//! /dev/full` once replaced the device node). Targets are checked before any VM starts, so a bad
//! path costs nothing, and again just before the rename, in case the path changed meanwhile.

use std::ffi::CString;
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

/// The exit status after stdout turned out to be a closed pipe (`irqbench list | head -1`): what
/// a shell reports for a command killed by SIGPIPE (128 + 13), as `cat` or `ls` would give.
pub const BROKEN_PIPE_STATUS: u8 = 141;

/// The argument that names stdout instead of a file.
pub const STDOUT_ARG: &str = "-";

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error(
        "{what} {path} is a {kind}, not a regular file: irqbench replaces only regular files \
         (name a new path{}{})",
        if *.stdout_ok { ", or `-` for stdout" } else { "" },
        if *.stdout_ok { "" } else { "; stdout is not an option here" },
        path = crate::text::escape_path(.path)
    )]
    NotRegular {
        what: String,
        path: PathBuf,
        kind: &'static str,
        /// Whether this output could go to stdout instead (`-`): the message offers it only
        /// where it is accepted ([`OutputError::file_only`]).
        stdout_ok: bool,
    },
    #[error(
        "{what} {path} names no file",
        path = crate::text::escape_path(.path)
    )]
    NoFileName { what: String, path: PathBuf },
    #[error(
        "{what} {path}: the {part} is {len} bytes, longer than the {max} bytes this system allows \
         (ENAMETOOLONG): no file can have this name, give a shorter one",
        path = crate::text::escape_path(.path)
    )]
    NameTooLong {
        what: String,
        path: PathBuf,
        part: &'static str,
        len: usize,
        max: usize,
    },
    #[error(
        "{what} {path}: the folder {dir} does not exist or cannot be searched",
        path = crate::text::escape_path(.path),
        dir = crate::text::escape_path(.dir)
    )]
    NoFolder {
        what: String,
        path: PathBuf,
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{what} {path}: {dir} is not a folder",
        path = crate::text::escape_path(.path),
        dir = crate::text::escape_path(.dir)
    )]
    NotAFolder {
        what: String,
        path: PathBuf,
        dir: PathBuf,
    },
    #[error(
        "{what} {path}: irqbench cannot create files in {dir}",
        path = crate::text::escape_path(.path),
        dir = crate::text::escape_path(.dir)
    )]
    FolderNotWritable {
        what: String,
        path: PathBuf,
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "cannot look at {what} {path}",
        path = crate::text::escape_path(.path)
    )]
    Inspect {
        what: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{what} and {other} both name {path}: give each output its own path",
        path = crate::text::escape_path(.path)
    )]
    Duplicate {
        what: String,
        other: String,
        path: PathBuf,
    },
    #[error(
        "{what} {path} is the {input} irqbench reads: it would be replaced",
        path = crate::text::escape_path(.path)
    )]
    IsInput {
        what: String,
        path: PathBuf,
        input: String,
    },
    #[error(
        "cannot write {what} {path}",
        path = crate::text::escape_path(.path)
    )]
    Write {
        what: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write {what} to stdout")]
    Stdout {
        what: String,
        #[source]
        source: io::Error,
    },
}

impl OutputError {
    /// The error of an output that takes a file only (`check --json`, whose stdout carries
    /// the verdict): its advice does not offer `-`.
    pub fn file_only(self) -> OutputError {
        match self {
            OutputError::NotRegular {
                what, path, kind, ..
            } => OutputError::NotRegular {
                what,
                path,
                kind,
                stdout_ok: false,
            },
            other => other,
        }
    }

    /// Stdout is a pipe nobody reads any more: not worth a message.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, OutputError::Stdout { source, .. } if source.kind() == io::ErrorKind::BrokenPipe)
    }
}

/// What an output holds, which decides how stdout makes it safe for a terminal: text through
/// the terminal escaper, JSON through its own `\uXXXX` escapes (the terminal escaper's `\u{1b}`
/// is no JSON).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Form {
    /// A table, Markdown, CSV or SVG: every character that would act on a terminal shown as
    /// `\u{1b}` (CSV and XML have no escape for a control character, and these keep their shape).
    #[default]
    Text,
    /// Serialized JSON: [`crate::text::json_for_terminal`], so it still parses.
    Json,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Destination {
    Stdout,
    /// A regular file or a path that does not exist yet.
    File(PathBuf),
}

/// One checked output: stdout, or a path where nothing but a regular file is.
#[derive(Clone, Debug)]
pub struct OutputTarget {
    /// What writes here, for messages: `--json`, `chart`, `results.csv in --out`.
    what: String,
    dest: Destination,
    /// The canonical folder plus the file name (`-` for stdout), to find two outputs, or an
    /// output and an input, that are one file under two spellings.
    identity: PathBuf,
    form: Form,
}

impl OutputTarget {
    /// Checks `path` as `what` would write it: `-` is stdout; otherwise the path must be absent
    /// or a regular file (a symlink is refused even when it points at one: the rename would
    /// replace the link, not its target), in an existing folder irqbench may create files in.
    pub fn new(what: impl Into<String>, path: &Path) -> Result<OutputTarget, OutputError> {
        let what = what.into();
        if path.as_os_str() == STDOUT_ARG {
            return Ok(OutputTarget {
                what,
                dest: Destination::Stdout,
                identity: PathBuf::from(STDOUT_ARG),
                form: Form::Text,
            });
        }
        let name = path
            .file_name()
            .filter(|_| !path.as_os_str().as_bytes().ends_with(b"/"))
            .ok_or_else(|| OutputError::NoFileName {
                what: what.clone(),
                path: path.to_owned(),
            })?;
        // A name no file can have is refused before anything looks at it (lstat would fail
        // with a bare "File name too long").
        check_name_fits(&what, path, name)?;
        // The kind first: a device or link is refused as such, before anything is created in
        // its folder (for `/dev/full` that would be a probe file in /dev).
        check_not_special(&what, path)?;
        let canonical = check_folder(&what, path, folder_of(path))?;
        Ok(OutputTarget {
            what,
            dest: Destination::File(path.to_owned()),
            identity: canonical.join(name),
            form: Form::Text,
        })
    }

    /// The same target holding `form` (text unless said).
    pub fn holding(mut self, form: Form) -> OutputTarget {
        self.form = form;
        self
    }

    pub fn is_stdout(&self) -> bool {
        self.dest == Destination::Stdout
    }

    /// The same file name with another extension, checked in turn (the SVG chart beside a
    /// JSON); `None` for stdout, which has no siblings.
    pub fn sibling(
        &self,
        what: impl Into<String>,
        extension: &str,
    ) -> Option<Result<OutputTarget, OutputError>> {
        match &self.dest {
            Destination::Stdout => None,
            Destination::File(p) => Some(OutputTarget::new(what, &p.with_extension(extension))),
        }
    }

    /// `stdout` or the path, for "wrote …" messages.
    pub fn describe(&self) -> String {
        match &self.dest {
            Destination::Stdout => "stdout".into(),
            Destination::File(p) => p.display().to_string(),
        }
    }

    pub fn what(&self) -> &str {
        &self.what
    }

    /// The refusal of this output because it names `input`, a file irqbench reads or keeps.
    fn is_input(&self, input: &str) -> OutputError {
        OutputError::IsInput {
            what: self.what.clone(),
            path: PathBuf::from(self.describe()),
            input: input.to_owned(),
        }
    }

    pub fn write(&self, bytes: &[u8]) -> Result<(), OutputError> {
        match &self.dest {
            Destination::Stdout => {
                print_stdout(bytes, self.form).map_err(|source| OutputError::Stdout {
                    what: self.what.clone(),
                    source,
                })
            }
            Destination::File(path) => {
                // The path may have changed since `new`: check again right before replacing it.
                check_not_special(&self.what, path)?;
                replace_file(path, bytes).map_err(|source| OutputError::Write {
                    what: self.what.clone(),
                    path: path.clone(),
                    source,
                })
            }
        }
    }
}

/// Refuses two outputs naming one file, and an output naming an input (the config or guest
/// this run reads). `inputs` are (what, path) pairs; missing inputs are ignored.
pub fn check_distinct(
    targets: &[&OutputTarget],
    inputs: &[(&str, &Path)],
) -> Result<(), OutputError> {
    for (i, t) in targets.iter().enumerate() {
        if let Some(earlier) = targets[..i].iter().find(|o| o.identity == t.identity) {
            return Err(OutputError::Duplicate {
                what: t.what.clone(),
                other: earlier.what.clone(),
                path: PathBuf::from(t.describe()),
            });
        }
        for (input, path) in inputs {
            if fs::canonicalize(path).is_ok_and(|c| c == t.identity) {
                return Err(t.is_input(input));
            }
        }
    }
    Ok(())
}

/// Refuses an output that would replace one of `files` (what, path): files this command keeps
/// using, such as the history database, whether or not they exist yet. Paths are compared by
/// their canonical folder and file name, so another spelling of one file is caught too.
pub fn check_not_over(
    targets: &[&OutputTarget],
    files: &[(&str, &Path)],
) -> Result<(), OutputError> {
    for t in targets {
        for (what, path) in files {
            let identity = path.file_name().and_then(|name| {
                fs::canonicalize(folder_of(path))
                    .ok()
                    .map(|dir| dir.join(name))
            });
            if identity.is_some_and(|i| i == t.identity) {
                return Err(t.is_input(what));
            }
        }
    }
    Ok(())
}

/// Writes all of `bytes` to stdout and flushes, so a full disk or closed pipe is seen here and
/// not lost in a buffer at exit.
///
/// Every character that would act on a terminal is escaped as `form` allows: what reaches
/// stdout may hold names from configs, imported files and the guest.
pub fn print_stdout(bytes: &[u8], form: Form) -> io::Result<()> {
    let text = match form {
        // A terminal gets no CR at all: CSV's CRLF line ends are for a file or a pipe.
        // SAFETY: isatty only asks about descriptor 1.
        Form::Text if unsafe { libc::isatty(libc::STDOUT_FILENO) } == 1 => {
            crate::text::escape_bytes(bytes).replace("\r\n", "\n")
        }
        Form::Text => crate::text::escape_bytes(bytes),
        Form::Json => crate::text::json_for_terminal(&String::from_utf8_lossy(bytes)).into_owned(),
    };
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Absent or a regular file (not followed through a symlink) is fine; anything else is refused.
fn check_not_special(what: &str, path: &Path) -> Result<(), OutputError> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_file() => Ok(()),
        Ok(meta) => Err(OutputError::NotRegular {
            what: what.to_owned(),
            path: path.to_owned(),
            kind: crate::files::read::file_kind(&meta),
            stdout_ok: true,
        }),
        // Nothing there, or no such folder: the folder check names that.
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => Ok(()),
        Err(source) => Err(OutputError::Inspect {
            what: what.to_owned(),
            path: path.to_owned(),
            source,
        }),
    }
}

/// The folder must exist, be a folder and take new files; returns its canonical path.
fn check_folder(what: &str, path: &Path, dir: &Path) -> Result<PathBuf, OutputError> {
    let canonical = fs::canonicalize(dir).map_err(|source| OutputError::NoFolder {
        what: what.to_owned(),
        path: path.to_owned(),
        dir: dir.to_owned(),
        source,
    })?;
    if !canonical.is_dir() {
        return Err(OutputError::NotAFolder {
            what: what.to_owned(),
            path: path.to_owned(),
            dir: dir.to_owned(),
        });
    }
    let not_writable = |source| OutputError::FolderNotWritable {
        what: what.to_owned(),
        path: path.to_owned(),
        dir: dir.to_owned(),
        source,
    };
    let c = CString::new(canonical.as_os_str().as_bytes())
        .map_err(|e| not_writable(io::Error::new(io::ErrorKind::InvalidInput, e)))?;
    // access(2) rather than the permission bits: it also answers for read-only mounts, ACLs and
    // root (the temporary file is created in this folder, so it needs write and search).
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        return Err(not_writable(io::Error::last_os_error()));
    }
    // root passes access(2) even where no file can be created (/proc, /sys); creating the
    // temporary file the write will create, under the folder's spelling the write will use, is
    // the only sure test (it is removed when dropped).
    temp_beside(folder_of(path)).map_err(not_writable)?;
    Ok(canonical)
}

/// The longest file name the folder of `path` takes (`pathconf(_PC_NAME_MAX)`, 255 on Linux
/// file systems when the folder cannot be asked).
fn name_max(path: &Path) -> usize {
    let limit = CString::new(folder_of(path).as_os_str().as_bytes())
        // SAFETY: `c` is a NUL-terminated path that outlives the call.
        .map(|c| unsafe { libc::pathconf(c.as_ptr(), libc::_PC_NAME_MAX) })
        .unwrap_or(-1);
    usize::try_from(limit).unwrap_or(255)
}

/// Refuses a file name longer than the folder allows, or a path longer than `PATH_MAX`: such a
/// file can never be created, so the run's results would be lost at the end.
fn check_name_fits(what: &str, path: &Path, name: &std::ffi::OsStr) -> Result<(), OutputError> {
    let too_long = |part, len, max| OutputError::NameTooLong {
        what: what.to_owned(),
        path: path.to_owned(),
        part,
        len,
        max,
    };
    let max = name_max(path);
    if name.len() > max {
        return Err(too_long("file name", name.len(), max));
    }
    let path_max = libc::PATH_MAX as usize - 1;
    if path.as_os_str().len() > path_max {
        return Err(too_long("path", path.as_os_str().len(), path_max));
    }
    Ok(())
}

/// A new, empty file in `dir` with a short random name (O_EXCL, never through an existing
/// name): its length does not depend on the target's, so it fits wherever the target fits.
fn temp_beside(dir: &Path) -> io::Result<NamedTempFile> {
    tempfile::Builder::new()
        .prefix(".irqbench-")
        .suffix(".tmp")
        // What a plain create gives (0o666 less the umask), not tempfile's private 0o600.
        .permissions(fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
}

/// Writes a temporary file beside `path` and renames it over `path` (`persist`); on failure the
/// temporary file is removed and the target is untouched. A replaced file keeps its permission
/// bits.
fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mode = fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.permissions().mode());
    let mut tmp = temp_beside(folder_of(path))?;
    if let Some(mode) = mode {
        tmp.as_file()
            .set_permissions(fs::Permissions::from_mode(mode))?;
    }
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    fn mkfifo(path: &Path) {
        let c = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path, which outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn regular_and_new_files_are_replaced_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("old.json");
        fs::write(&old, "old").unwrap();
        fs::set_permissions(&old, fs::Permissions::from_mode(0o640)).unwrap();
        OutputTarget::new("--json", &old)
            .unwrap()
            .write(b"new")
            .unwrap();
        assert_eq!(fs::read_to_string(&old).unwrap(), "new");
        assert_eq!(
            fs::metadata(&old).unwrap().permissions().mode() & 0o777,
            0o640
        );
        let fresh = dir.path().join("fresh.csv");
        OutputTarget::new("--csv", &fresh)
            .unwrap()
            .write(b"a,b\n")
            .unwrap();
        assert_eq!(fs::read_to_string(&fresh).unwrap(), "a,b\n");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 2, "no temporary file left behind");
    }

    /// The stand-ins for device nodes: a symlink, a FIFO, and a real character device.
    #[test]
    fn symlinks_fifos_and_devices_are_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.txt");
        fs::write(&target, "keep").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let fifo = dir.path().join("fifo.json");
        mkfifo(&fifo);
        for (path, kind) in [
            (link.as_path(), "symbolic link"),
            (fifo.as_path(), "FIFO"),
            (Path::new("/dev/full"), "character device"),
            (dir.path(), "directory"),
        ] {
            let err = OutputTarget::new("--json", path).expect_err("refused");
            let msg = err.to_string();
            assert!(
                msg.contains(kind) && msg.contains(&*path.to_string_lossy()),
                "{msg}"
            );
        }
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep");
    }

    /// In a folder where no file can be created (/proc/self/fd), a link is still refused as a
    /// link: the kind is checked before the folder is probed, so `--json /dev/full` creates
    /// nothing in /dev and a user who cannot write there is told what the path is.
    #[test]
    fn the_kind_is_refused_before_the_folder_is_probed() {
        let err = OutputTarget::new("--json", Path::new("/proc/self/fd/0")).unwrap_err();
        assert!(
            matches!(
                err,
                OutputError::NotRegular {
                    kind: "symbolic link",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn a_path_that_becomes_special_after_the_check_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("late.json");
        let t = OutputTarget::new("--json", &path).unwrap();
        mkfifo(&path);
        let err = t.write(b"x").expect_err("refused at write time");
        assert!(err.to_string().contains("FIFO"), "{err}");
        assert!(fs::symlink_metadata(&path).unwrap().file_type().is_fifo());
    }

    /// Issue 20 item 4: a 250-byte name once passed the check and then lost the run's results,
    /// because the temporary name was built from it and exceeded NAME_MAX.
    #[test]
    fn a_long_name_is_written_and_one_too_long_is_refused_up_front() {
        let dir = tempfile::tempdir().unwrap();
        let long = dir.path().join("r".repeat(250));
        OutputTarget::new("--json", &long)
            .unwrap()
            .write(b"{}")
            .unwrap();
        assert_eq!(fs::read_to_string(&long).unwrap(), "{}");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary left"
        );
        let too_long = dir.path().join("r".repeat(256));
        let err = OutputTarget::new("--json", &too_long).unwrap_err();
        assert!(
            matches!(
                err,
                OutputError::NameTooLong {
                    len: 256,
                    max: 255,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("ENAMETOOLONG"), "{err}");
        // The chart's name is the JSON's with `.svg`: 252 + 4 bytes no longer fit.
        let json = OutputTarget::new("--json", &dir.path().join("j".repeat(252))).unwrap();
        let err = json.sibling("chart", "svg").unwrap().unwrap_err();
        assert!(matches!(err, OutputError::NameTooLong { .. }), "{err}");
        let deep = PathBuf::from(format!("{}/x.json", "d/".repeat(2100)));
        let err = OutputTarget::new("--json", &deep).unwrap_err();
        assert!(
            matches!(err, OutputError::NameTooLong { part: "path", .. }),
            "{err}"
        );
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "nothing created"
        );
    }

    /// A rename that fails (here over a non-empty folder, which `new` would have refused) leaves
    /// the target as it was and no temporary file beside it.
    #[test]
    fn a_failed_replace_leaves_the_target_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("busy");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("keep"), "keep").unwrap();
        replace_file(&target, b"new").expect_err("cannot rename over a non-empty folder");
        assert_eq!(fs::read_to_string(target.join("keep")).unwrap(), "keep");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary left"
        );
    }

    #[test]
    fn stdout_has_no_sibling_and_files_do() {
        let t = OutputTarget::new("--json", Path::new("-")).unwrap();
        assert!(t.is_stdout() && t.sibling("chart", "svg").is_none());
        let dir = tempfile::tempdir().unwrap();
        let json = OutputTarget::new("--json", &dir.path().join("r.json")).unwrap();
        let svg = json.sibling("chart", "svg").unwrap().unwrap();
        assert!(svg.describe().ends_with("r.svg"));
    }

    #[test]
    fn missing_or_unusable_folders_are_named() {
        let err = OutputTarget::new("--json", Path::new("/nonexistent/x.json")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        fs::write(&file, "").unwrap();
        let err = OutputTarget::new("--csv", &file.join("x.csv")).unwrap_err();
        assert!(matches!(
            err,
            OutputError::NoFolder { .. } | OutputError::NotAFolder { .. }
        ));
        let err = OutputTarget::new("--csv", Path::new("some/dir/")).unwrap_err();
        assert!(matches!(err, OutputError::NoFileName { .. }), "{err}");
    }

    #[test]
    fn duplicates_and_inputs_are_refused_under_any_spelling() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("c.toml");
        fs::write(&config, "").unwrap();
        let a = OutputTarget::new("--json", &dir.path().join("x")).unwrap();
        let b = OutputTarget::new("--csv", &dir.path().join(".").join("x")).unwrap();
        let err = check_distinct(&[&a, &b], &[]).unwrap_err();
        assert!(matches!(err, OutputError::Duplicate { .. }), "{err}");
        let c = OutputTarget::new("--markdown", &config).unwrap();
        let err = check_distinct(&[&a, &c], &[("config", &config)]).unwrap_err();
        assert!(err.to_string().contains("config"), "{err}");
        let s1 = OutputTarget::new("--json", Path::new("-")).unwrap();
        let s2 = OutputTarget::new("--csv", Path::new("-")).unwrap();
        assert!(check_distinct(&[&s1, &s2], &[]).is_err());
        check_distinct(&[&a, &s1], &[("config", &config)]).unwrap();
    }
}
