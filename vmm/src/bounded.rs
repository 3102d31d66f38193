//! Bounded reads of user-named files: a config, a guest ELF, a results JSON. A path may name
//! `/dev/zero`, a FIFO or a terminal; none of them may make irqbench read without end or wait
//! forever. Regular files are read up to a limit the error names; anything else is refused.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Largest config file irqbench reads.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// Largest guest ELF irqbench reads (the guest must fit below 4 MiB of guest memory anyway).
pub const MAX_GUEST_BYTES: u64 = 16 << 20;
/// Largest results JSON irqbench reads.
pub const MAX_RESULTS_BYTES: u64 = 256 << 20;

#[derive(Debug, thiserror::Error)]
pub enum BoundedReadError {
    #[error("cannot read {what} {path}")]
    Open {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{what} {path} is a {kind}, not a regular file: irqbench reads {what}s only from \
         regular files (their size is known before reading)"
    )]
    NotRegular {
        what: &'static str,
        path: PathBuf,
        kind: &'static str,
    },
    #[error("{what} {path} is {size} bytes, more than the {limit} bytes irqbench reads")]
    TooLarge {
        what: &'static str,
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    #[error("{what} {path} is not UTF-8 text")]
    NotUtf8 { what: &'static str, path: PathBuf },
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
    // O_NONBLOCK: opening a FIFO with no writer must not block before we can look at it.
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(open_err)?
    };
    let meta = file.metadata().map_err(open_err)?;
    if !meta.is_file() {
        return Err(BoundedReadError::NotRegular {
            what,
            path: path.to_path_buf(),
            kind: file_kind(&meta),
        });
    }
    if meta.len() > limit {
        return Err(BoundedReadError::TooLarge {
            what,
            path: path.to_path_buf(),
            size: meta.len(),
            limit,
        });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(open_err)?;
    if bytes.len() as u64 > limit {
        return Err(BoundedReadError::TooLarge {
            what,
            path: path.to_path_buf(),
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
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
