//! Reading a file a flag names: a regular file only, and only so many
//! bytes. Startup and SIGHUP reloads both read through [`read_config`].
//!
//! The file is opened with `O_NONBLOCK`, so opening a FIFO with no writer
//! returns at once instead of waiting for one, and its type is checked on
//! the open descriptor (`fstat`), so the file that is read is the file that
//! was checked. A FIFO, socket, device or directory is refused unread.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The most a JSON file a flag names may hold (`--rules.file`,
/// `--sim.scenario`).
pub const MAX_JSON_BYTES: u64 = 1024 * 1024;

/// The text of the regular file at `path`, at most `limit` bytes of UTF-8.
/// The error is one line, without the path (the caller names the file).
pub fn read_config(path: &Path, limit: u64) -> Result<String, String> {
    String::from_utf8(read_bytes(path, limit)?)
        .map_err(|e| format!("not UTF-8 (at byte {})", e.utf8_error().valid_up_to()))
}

/// The bytes of the regular file at `path`, at most `limit` of them, as
/// [`read_config`] reads them (binary files: a time zone's TZif).
pub fn read_bytes(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| format!("cannot open: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("cannot stat: {e}"))?;
    let kind = meta.file_type();
    let other = match () {
        _ if kind.is_file() => None,
        _ if kind.is_dir() => Some("a directory"),
        _ if kind.is_fifo() => Some("a FIFO"),
        _ if kind.is_socket() => Some("a socket"),
        _ if kind.is_char_device() || kind.is_block_device() => Some("a device"),
        _ => Some("not a file"),
    };
    if let Some(what) = other {
        return Err(format!("{what}, not a regular file; refused unread"));
    }
    read_bounded(file, meta.len(), limit)
}

/// Reads at most `limit` bytes of `file`, whose size was `len` when
/// stated; one that grew past `limit` since is refused too.
fn read_bounded(file: File, len: u64, limit: u64) -> Result<Vec<u8>, String> {
    let too_big = |n: u64| format!("{n} bytes, over the limit of {limit}");
    if len > limit {
        return Err(too_big(len));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;
    use std::path::PathBuf;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("gpu-exporter-base-file-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn reads_regular_files_within_the_limit() {
        let p = dir().join("ok.json");
        std::fs::write(&p, "{\"rules\":[]}").unwrap();
        assert_eq!(read_config(&p, 12).unwrap(), "{\"rules\":[]}");
        let e = read_config(&p, 11).unwrap_err();
        assert_eq!(e, "12 bytes, over the limit of 11");
        std::fs::write(&p, b"\xff").unwrap();
        assert_eq!(read_config(&p, 10).unwrap_err(), "not UTF-8 (at byte 0)");
        let e = read_config(&dir().join("missing"), 10).unwrap_err();
        assert!(e.starts_with("cannot open: "), "{e}");
    }

    #[test]
    fn refuses_what_is_not_a_regular_file_without_reading_it() {
        let fifo = dir().join("fifo");
        let _ = std::fs::remove_file(&fifo);
        let mode = rustix::fs::Mode::from_raw_mode(0o600);
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, mode, 0).unwrap();
        // No writer: a blocking open would wait for one forever.
        assert_eq!(
            read_config(&fifo, 10).unwrap_err(),
            "a FIFO, not a regular file; refused unread"
        );
        let sock = dir().join("sock");
        let _ = std::fs::remove_file(&sock);
        let _listener = UnixListener::bind(&sock).unwrap();
        let e = read_config(&sock, 10).unwrap_err();
        // Opening a socket file fails (ENXIO) before it can be stated.
        assert!(
            e.starts_with("cannot open: ") || e.starts_with("a socket"),
            "{e}"
        );
        assert_eq!(
            read_config(Path::new("/dev/zero"), 10).unwrap_err(),
            "a device, not a regular file; refused unread"
        );
        assert_eq!(
            read_config(&dir(), 10).unwrap_err(),
            "a directory, not a regular file; refused unread"
        );
    }
}
