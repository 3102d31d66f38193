//! Bounded reads of user-named files: a config, a guest ELF, a results JSON. A path may name
//! `/dev/zero`, a FIFO or a terminal; none of them may make irqbench read without end or wait
//! forever. Regular files are read up to a limit the error names; anything else is refused
//! without being opened: irqbench runs as root, and opening a device node can act by itself (a
//! watchdog starts counting down, a tape rewinds), so the path is looked at through an `O_PATH`
//! handle, which reaches no driver, and only a regular file is then opened for reading.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Largest config file irqbench reads.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// Largest guest ELF irqbench reads (the guest must fit below 4 MiB of guest memory anyway).
pub const MAX_GUEST_BYTES: u64 = 16 << 20;
/// Largest results JSON irqbench reads (a long run of many groups writes tens of MiB).
pub const MAX_RESULTS_BYTES: u64 = 256 << 20;
/// Memory a results JSON takes while read, compared and stored, per byte of the file (the text,
/// the parsed report and the rows stored; measured: a 246 MiB import peaked at 2.3 GB).
pub const RESULTS_MEMORY_PER_BYTE: u64 = 12;

#[derive(Debug, thiserror::Error)]
pub enum BoundedReadError {
    #[error(
        "cannot read {what} {path}",
        path = crate::text::escape_path(.path)
    )]
    Open {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{what} {path} is a {kind}, not a regular file: irqbench reads {what}s only from \
         regular files (their size is known before reading)",
        path = crate::text::escape_path(.path)
    )]
    NotRegular {
        what: &'static str,
        path: PathBuf,
        kind: &'static str,
    },
    #[error(
        "{what} {path} is {size} bytes, more than the {limit} bytes irqbench reads",
        path = crate::text::escape_path(.path)
    )]
    TooLarge {
        what: &'static str,
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    #[error(
        "{what} {path} is not UTF-8 text",
        path = crate::text::escape_path(.path)
    )]
    NotUtf8 { what: &'static str, path: PathBuf },
    #[error(
        "{what} {path} is {size} bytes; reading it takes about {need} bytes of memory, but \
         {headroom} bytes are left ({why}): free memory or raise the limit",
        path = crate::text::escape_path(.path)
    )]
    TooLittleMemory {
        what: &'static str,
        path: PathBuf,
        size: u64,
        need: u64,
        headroom: u64,
        why: &'static str,
    },
}

/// What kind of file `meta` describes, for messages.
pub fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "directory"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_symlink() {
        "symbolic link"
    } else {
        "regular file"
    }
}

/// Reads a regular file of at most `limit` bytes. The size is checked on the open file (no
/// race with a rename), and the read itself stops at `limit + 1` bytes in case the file grows.
pub fn read_bounded(
    path: &Path,
    limit: u64,
    what: &'static str,
) -> Result<Vec<u8>, BoundedReadError> {
    let open_err = |source| BoundedReadError::Open {
        what,
        path: path.to_path_buf(),
        source,
    };
    let file = open_regular(path).map_err(|e| match e {
        Refused::NotRegular(kind) => BoundedReadError::NotRegular {
            what,
            path: path.to_path_buf(),
            kind,
        },
        Refused::Io(source) => open_err(source),
    })?;
    let too_large = |size| BoundedReadError::TooLarge {
        what,
        path: path.to_path_buf(),
        size,
        limit,
    };
    let meta = file.metadata().map_err(open_err)?;
    if meta.len() > limit {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(open_err)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

enum Refused {
    /// The kind of file found instead, for [`BoundedReadError::NotRegular`].
    NotRegular(&'static str),
    Io(std::io::Error),
}

/// Opens `path` (symlinks followed) for reading only if it is a regular file. The kind is read
/// from an `O_PATH` handle, whose open reaches no device driver and never blocks on a FIFO; the
/// file is then reopened for reading through that very handle (`/proc/self/fd`), so a path
/// swapped for a device in between is not opened either. Without /proc the path is opened
/// again (`O_NONBLOCK`) and must still be the file that was looked at.
fn open_regular(path: &Path) -> Result<std::fs::File, Refused> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(path)
        .map_err(Refused::Io)?;
    let meta = handle.metadata().map_err(Refused::Io)?;
    if !meta.is_file() {
        return Err(Refused::NotRegular(file_kind(&meta)));
    }
    let via_proc = format!("/proc/self/fd/{}", handle.as_raw_fd());
    let file = match std::fs::File::open(via_proc) {
        Ok(f) => f,
        Err(_) => std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(Refused::Io)?,
    };
    let opened = file.metadata().map_err(Refused::Io)?;
    if !opened.is_file() || (opened.dev(), opened.ino()) != (meta.dev(), meta.ino()) {
        return Err(Refused::NotRegular(file_kind(&opened)));
    }
    Ok(file)
}

/// The memory this process may still take: the smaller of what its address-space limit
/// (`ulimit -v`) leaves and the host's MemAvailable, with which one it is; `None` when neither
/// can be read. An allocation that fails aborts a Rust process, so a large read is refused
/// up front instead.
pub fn memory_headroom() -> Option<(u64, &'static str)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    let as_limit = (unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0
        && limit.rlim_cur != libc::RLIM_INFINITY)
        .then(|| {
            let used = std::fs::read_to_string("/proc/self/statm")
                .ok()
                .and_then(|t| t.split_whitespace().next()?.parse::<u64>().ok())
                .map_or(0, |pages| pages * 4096);
            (
                limit.rlim_cur.saturating_sub(used),
                "the address-space limit, ulimit -v",
            )
        });
    let available = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        let line = t.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some((kib * 1024, "MemAvailable in /proc/meminfo"))
    });
    match (as_limit, available) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// [`read_text_bounded`] for a file that will be parsed into about `per_byte` times its size:
/// refused with [`BoundedReadError::TooLittleMemory`] when that would not fit.
pub fn read_text_to_parse(
    path: &Path,
    limit: u64,
    what: &'static str,
    per_byte: u64,
) -> Result<String, BoundedReadError> {
    if let Ok(meta) = std::fs::metadata(path) {
        let need = meta.len().saturating_mul(per_byte);
        if meta.is_file() && meta.len() <= limit {
            if let Some((headroom, why)) = memory_headroom() {
                if need > headroom {
                    return Err(BoundedReadError::TooLittleMemory {
                        what,
                        path: path.to_path_buf(),
                        size: meta.len(),
                        need,
                        headroom,
                        why,
                    });
                }
            }
        }
    }
    read_text_bounded(path, limit, what)
}

/// [`read_bounded`] for UTF-8 text.
pub fn read_text_bounded(
    path: &Path,
    limit: u64,
    what: &'static str,
) -> Result<String, BoundedReadError> {
    let bytes = read_bounded(path, limit, what)?;
    String::from_utf8(bytes).map_err(|_| BoundedReadError::NotUtf8 {
        what,
        path: path.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_too_large_for_the_memory_left_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, vec![b' '; 1 << 20]).unwrap();
        let (headroom, _) = memory_headroom().expect("this host has /proc/meminfo");
        // Needs more than is left: refused, naming the size and the limit.
        let per_byte = headroom / (1 << 20) + 1;
        let err = read_text_to_parse(&path, 2 << 20, "results JSON", per_byte).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, BoundedReadError::TooLittleMemory { size, .. } if size == 1 << 20),
            "{text}"
        );
        assert!(
            text.contains("1048576 bytes") && text.contains("left"),
            "{text}"
        );
        // Fits: read.
        assert_eq!(
            read_text_to_parse(&path, 2 << 20, "results JSON", 1)
                .unwrap()
                .len(),
            1 << 20
        );
    }

    #[test]
    fn devices_and_fifos_are_refused_at_once() {
        let err = read_bounded(Path::new("/dev/zero"), 1024, "config").unwrap_err();
        assert!(err.to_string().contains("character device"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read_bounded(&fifo, 1024, "guest ELF").unwrap_err();
        assert!(err.to_string().contains("FIFO"), "{err}");
        let err = read_bounded(dir.path(), 1024, "results JSON").unwrap_err();
        assert!(err.to_string().contains("directory"), "{err}");
    }

    /// A socket cannot be opened at all: refused by its kind, not with the open's ENXIO. The
    /// same path (a look that opens nothing) keeps device nodes closed.
    #[test]
    fn a_socket_is_refused_by_its_kind_without_being_opened() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("config.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let err = read_bounded(&sock, 1024, "config").unwrap_err();
        assert!(
            matches!(err, BoundedReadError::NotRegular { kind: "socket", .. }),
            "{err}"
        );
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink(&sock, &link).unwrap();
        let err = read_bounded(&link, 1024, "config").unwrap_err();
        assert!(err.to_string().contains("socket"), "{err}");
    }

    #[test]
    fn a_symlink_to_a_regular_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "name = \"x\"\n").unwrap();
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(
            read_bounded(&link, 1024, "config").unwrap(),
            b"name = \"x\"\n"
        );
    }

    #[test]
    fn the_limit_is_named_and_enforced() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; 2048]).unwrap();
        let err = read_bounded(&big, 1024, "config").unwrap_err();
        assert!(
            err.to_string().contains("2048 bytes, more than the 1024"),
            "{err}"
        );
        assert_eq!(read_bounded(&big, 4096, "config").unwrap().len(), 2048);
        let err = read_bounded(&dir.path().join("missing"), 1, "config").unwrap_err();
        assert!(err.to_string().contains("cannot read config"), "{err}");
    }
}
