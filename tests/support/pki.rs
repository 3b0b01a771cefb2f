//! The test PKI, made with `openssl` by `tests/certs.sh` once per test
//! process: CAs, server and client certificates (see the script). Without
//! `openssl` a test skips with the reason, and fails in CI.
#![allow(dead_code)] // each user takes its own part

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The directory holding the PKI, or `None` (skip) without `openssl`.
pub fn pki() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let found = Command::new("openssl")
            .arg("version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "openssl is required in CI (.ci/run installs it)"
            );
            eprintln!("SKIP: openssl is not installed (Debian: openssl)");
            return None;
        }
        let dir = std::env::temp_dir().join(format!("gpu-exporter-pki-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // The repository's, from the root crate or one under crates/.
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .map(|d| d.join("tests/certs.sh"))
            .find(|p| p.exists())
            .expect("tests/certs.sh");
        let out = Command::new("sh").arg(&script).arg(&dir).output().unwrap();
        assert!(
            out.status.success(),
            "tests/certs.sh: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(dir)
    })
    .as_deref()
}

/// Writes `yaml` as `name` beside the certificates; its path.
pub fn web_config(dir: &Path, name: &str, yaml: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, yaml).unwrap();
    path
}

/// Files that must never be read as a certificate, key or CA, made in
/// `dir`, each with the reason it is refused: a FIFO with no writer (a
/// blocking open would wait forever), `/dev/zero`, a directory, and a
/// sparse 200 MB file (refused by its length, unread).
pub fn odd_files(dir: &Path) -> [(PathBuf, &'static str); 4] {
    std::fs::create_dir_all(dir.join("a-directory")).unwrap();
    let fifo = dir.join("fifo.pem");
    let _ = std::fs::remove_file(&fifo);
    let mode = rustix::fs::Mode::from_raw_mode(0o600);
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, mode, 0).unwrap();
    let big = dir.join("big.pem");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(200_000_000).unwrap();
    [
        (fifo, "a FIFO, not a regular file; refused unread"),
        (
            "/dev/zero".into(),
            "a device, not a regular file; refused unread",
        ),
        (
            dir.join("a-directory"),
            "a directory, not a regular file; refused unread",
        ),
        (big, "200000000 bytes, over the limit of 1048576"),
    ]
}
