//! The web config file (`--web.config.file`): exporter-toolkit's schema,
//! which node_exporter, nvidia_gpu_exporter and dcgm-exporter read too, so
//! one file serves them all. It turns on TLS and mutual TLS, basic auth,
//! response headers and a rate limit. Built with the `tls` feature.
//!
//! - `yaml.rs`: the YAML, into a small bounded tree;
//! - `file.rs`: the schema, key by key, every problem one line naming it;
//! - `bcrypt.rs`: bcrypt verification; `auth.rs`: basic auth, off the HTTP
//!   thread and rate-bounded;
//! - `server_config.rs`: the rustls server configuration, and its crypto
//!   provider; `client_config.rs`: the client's, for an https://
//!   Alertmanager (`--alertmanager.ca-file`);
//! - here: the loaded file with what it turns on, and [`Watch`], which
//!   re-reads it when it or a file it names changes.

pub mod auth;
pub mod bcrypt;
pub mod client_config;
mod file;
pub mod server_config;
mod yaml;

use base::file::read_config;
use base::rate::TokenBucket;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A bad web config: one line, naming the key; exit code 2 at start, a
/// logged error (the old config kept) on a reload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// Dotted path of the key, e.g. `tls_server_config.min_version`; empty
    /// for problems with the file as a whole.
    pub key: String,
    pub msg: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            f.write_str(&self.msg)
        } else {
            write!(f, "{}: {}", self.key, self.msg)
        }
    }
}

fn err(key: &str, msg: impl Into<String>) -> Error {
    // One line, whatever a value quoted into it held.
    Error {
        key: key.to_owned(),
        msg: msg.into().replace(['\n', '\r'], " "),
    }
}

/// PEM text given inline or by path (resolved against the file's directory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pem {
    Inline(String),
    File(PathBuf),
}

/// The client-certificate policies that can be served safely with rustls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// `NoClientCert` (the default), or `VerifyClientCertIfGiven` without a
    /// client CA, which verifies nothing and so asks for nothing.
    None,
    /// `VerifyClientCertIfGiven`: a certificate is optional; one that is
    /// given must chain to the client CA.
    VerifyIfGiven,
    /// `RequireAndVerifyClientCert`.
    RequireAndVerify,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

/// The TLS 1.2 suites rustls (ring) offers, by their Go names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CipherSuite {
    EcdheEcdsaAes128Gcm,
    EcdheEcdsaAes256Gcm,
    EcdheEcdsaChacha20,
    EcdheRsaAes128Gcm,
    EcdheRsaAes256Gcm,
    EcdheRsaChacha20,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Curve {
    X25519,
    P256,
    P384,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsConfig {
    pub cert: Pem,
    pub key: Pem,
    pub client_ca: Option<Pem>,
    pub client_auth: ClientAuth,
    /// Exact matches against the verified leaf's DNS, IP, e-mail and URI SANs.
    pub client_allowed_sans: Vec<String>,
    pub min_version: TlsVersion,
    pub max_version: TlsVersion,
    /// TLS 1.2 suites in preference order; empty means rustls' defaults.
    /// (TLS 1.3 suites are not configurable, as in Go.)
    pub cipher_suites: Vec<CipherSuite>,
    pub prefer_server_cipher_suites: bool,
    /// Key-exchange groups in preference order; empty means the defaults.
    pub curves: Vec<Curve>,
}

/// A response header the file may set (exporter-toolkit's fixed list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub name: &'static str,
    pub value: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub hash: bcrypt::Hash,
}

/// exporter-toolkit's token bucket: one token per `interval`, `burst` of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    pub interval: Duration,
    pub burst: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WebConfig {
    pub tls: Option<TlsConfig>,
    /// `http_server_config.http2` when given; accepted and ignored.
    pub http2: Option<bool>,
    pub headers: Vec<Header>,
    pub users: Vec<User>,
    /// `None` when absent or `interval: 0`.
    pub rate_limit: Option<RateLimit>,
    /// The files the config names (certificate, key, client CA), for
    /// change detection along with the config file itself.
    pub files: Vec<PathBuf>,
    /// Warnings for the log, once the whole file has loaded.
    pub notes: Vec<String>,
}

/// The most bytes of header lines `http_server_config.headers` may add to
/// a response (they take room kept before each response's body).
pub const MAX_HEADER_BYTES: usize = 1024;

/// The largest web config file read (it holds certificates inline at most).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// The largest certificate, key or client CA file read: a chain or a CA
/// bundle is kilobytes (all of Mozilla's roots are about 220 KB).
pub const MAX_PEM_BYTES: u64 = 1024 * 1024;

/// What a web config file turns on, ready to serve with.
pub struct Loaded {
    /// TLS for new connections; `None` serves plain HTTP.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Basic auth, when `basic_auth_users` names anyone.
    pub auth: Option<auth::Auth>,
    /// `rate_limit`: requests beyond it get 429.
    pub rate: Option<TokenBucket>,
    /// `http_server_config.headers`, as header lines for every response.
    pub headers: String,
}

impl Loaded {
    /// What it turns on, for the log: `TLS, basic auth (2 users)`.
    pub fn summary(&self) -> String {
        let mut on = Vec::new();
        if self.tls.is_some() {
            on.push("TLS".to_string());
        }
        if let Some(a) = &self.auth {
            let n = a.users();
            on.push(format!(
                "basic auth ({n} user{})",
                if n == 1 { "" } else { "s" }
            ));
        }
        if self.rate.is_some() {
            on.push("a rate limit".into());
        }
        if !self.headers.is_empty() {
            on.push("headers".into());
        }
        if on.is_empty() {
            return "nothing: plain HTTP, no auth".into();
        }
        on.join(", ")
    }

    /// Reads `path` and every file it names; relative paths inside
    /// resolve against its directory. `earned` is what the config it
    /// replaces earned (a reload's), for basic auth to carry on with.
    /// `max_cost`: `--web.bcrypt-max-cost`.
    pub fn load(
        path: &Path,
        earned: Option<Arc<auth::Earned>>,
        max_cost: u32,
    ) -> Result<(Loaded, WebConfig), Error> {
        let text = read_config(path, MAX_FILE_BYTES).map_err(|e| err("", e))?;
        let dir = path.parent().unwrap_or(Path::new(""));
        let web = WebConfig::parse(&text, dir)?;
        file::check_costs(&web.users, max_cost)?;
        let tls = web
            .tls
            .as_ref()
            .map(server_config::server_config)
            .transpose()?;
        let rate = web
            .rate_limit
            .map(|r| TokenBucket::new(r.interval, r.burst));
        let limits = auth::Limits::default();
        let auth = auth::Auth::new(web.users.clone(), limits, earned).map_err(|e| {
            err(
                "basic_auth_users",
                format!("cannot start the bcrypt thread: {e}"),
            )
        })?;
        let headers = web
            .headers
            .iter()
            .map(|h| format!("{}: {}\r\n", h.name, h.value))
            .collect();
        let loaded = Loaded {
            tls,
            auth,
            rate,
            headers,
        };
        for note in &web.notes {
            log::warn!("--web.config.file {}: {note}", path.display());
        }
        Ok((loaded, web))
    }
}

/// A file's identity and version as the kernel reports it: a rotated
/// certificate (Kubernetes swaps a symlink, cert-manager rewrites in place)
/// changes at least one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    modified: Option<std::time::SystemTime>,
    len: u64,
    inode: u64,
    dev: u64,
}

impl Stamp {
    /// `None` when the file can't be read (missing counts as a change).
    pub fn of(path: &Path) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        // metadata() follows symlinks: Kubernetes' ..data swap shows up
        // as a new inode.
        let m = std::fs::metadata(path).ok()?;
        Some(Stamp {
            modified: m.modified().ok(),
            len: m.len(),
            inode: m.ino(),
            dev: m.dev(),
        })
    }
}

/// Stamps of the config file and every file it names, to tell when to
/// re-read the whole config.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamps(Vec<(PathBuf, Option<Stamp>)>);

impl Stamps {
    fn take(config: &Path, c: &WebConfig) -> Stamps {
        let mut v = vec![(config.to_path_buf(), Stamp::of(config))];
        for f in &c.files {
            v.push((f.clone(), Stamp::of(f)));
        }
        Stamps(v)
    }

    /// Whether any file changed, appeared or vanished since these were taken.
    fn changed(&self) -> bool {
        self.0.iter().any(|(p, s)| Stamp::of(p) != *s)
    }

    /// The same files, stamped now.
    fn retake(&mut self) {
        for (p, s) in &mut self.0 {
            *s = Stamp::of(p);
        }
    }
}
/// The web config file and what it named when last read: [`Watch::poll`]
/// re-reads the whole of it when any of them changed (a Kubernetes secret
/// swaps its `..data` symlink, cert-manager rewrites in place, an operator
/// edits the file).
pub struct Watch {
    path: PathBuf,
    stamps: Stamps,
    /// What basic auth earned under the config last loaded.
    earned: Option<Arc<auth::Earned>>,
    /// `--web.bcrypt-max-cost`.
    max_cost: u32,
}

impl Watch {
    /// Reads the file at start: any problem is the caller's exit code 2.
    pub fn start(path: &Path, max_cost: u32) -> Result<(Watch, Loaded), Error> {
        let (loaded, web) = Loaded::load(path, None, max_cost)?;
        let stamps = Stamps::take(path, &web);
        let watch = Watch {
            path: path.to_owned(),
            stamps,
            earned: loaded.auth.as_ref().map(auth::Auth::earned),
            max_cost,
        };
        Ok((watch, loaded))
    }

    /// `Ok(Some)` with the new configuration when a file changed (or
    /// `force`) and it loads; `Err` when it does not (the caller keeps the
    /// old one and logs this; the same files are not read again until one
    /// changes once more); `Ok(None)` when nothing changed: one `stat` per
    /// file.
    pub fn poll(&mut self, force: bool) -> Result<Option<Loaded>, Error> {
        if !force && !self.stamps.changed() {
            return Ok(None);
        }
        // Stamped before reading: a change while reading is seen next time.
        let mut stamps = self.stamps.clone();
        stamps.retake();
        let result = Loaded::load(&self.path, self.earned.clone(), self.max_cost);
        match result {
            Ok((loaded, web)) => {
                // Watch what the new file names, even a file to come.
                self.stamps = Stamps::take(&self.path, &web);
                self.earned = loaded.auth.as_ref().map(auth::Auth::earned);
                Ok(Some(loaded))
            }
            Err(e) => {
                self.stamps = stamps;
                Err(e)
            }
        }
    }
}

/// The integration tests' PKI (made with `openssl`), for the tests below.
#[cfg(test)]
#[path = "../../../tests/support/pki.rs"]
mod pki;

#[cfg(test)]
mod tests {
    use super::*;
    /// The exporter's `--web.bcrypt-max-cost` default.
    const BCRYPT_MAX_COST: u32 = 17;

    fn refused(config: &Path) -> String {
        match Watch::start(config, BCRYPT_MAX_COST) {
            Ok(_) => panic!("{} loaded", config.display()),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn certificate_key_and_ca_files_are_read_bounded_at_start_and_on_reload() {
        let Some(pki) = pki::pki() else { return };
        let dir = std::env::temp_dir().join(format!("gpu-exporter-web-{}", std::process::id()));
        let odd = pki::odd_files(&dir);
        let config = dir.join("web.yml");
        let write = |role: &str, with: &Path| {
            let mut files = [
                ("cert_file", pki.join("server.crt")),
                ("key_file", pki.join("server.key")),
                ("client_ca_file", pki.join("ca.crt")),
            ];
            for (r, f) in &mut files {
                if *r == role {
                    *f = with.to_path_buf();
                }
            }
            let mut yaml = String::from(
                "tls_server_config:\n  client_auth_type: RequireAndVerifyClientCert\n",
            );
            for (r, f) in files {
                yaml.push_str(&format!("  {r}: {}\n", f.display()));
            }
            std::fs::write(&config, yaml).unwrap();
        };
        let roles = ["cert_file", "key_file", "client_ca_file"];
        for role in roles {
            for (path, why) in &odd {
                write(role, path);
                let want = format!("tls_server_config.{role}: {}: {why}", path.display());
                assert_eq!(refused(&config), want, "at start");
            }
        }
        write("", Path::new(""));
        let (mut watch, loaded) = Watch::start(&config, BCRYPT_MAX_COST).unwrap();
        assert_eq!(loaded.summary(), "TLS");
        for role in roles {
            for (path, why) in &odd {
                write(role, path);
                let e = watch.poll(true).err().expect("refused on reload");
                let want = format!("tls_server_config.{role}: {}: {why}", path.display());
                assert_eq!(e.to_string(), want, "on reload");
                // The files that failed are not read again until one changes.
                assert!(watch.poll(false).unwrap().is_none());
            }
        }
        // Later reloads still work.
        write("", Path::new(""));
        let loaded = watch.poll(true).unwrap().expect("reloaded");
        assert_eq!(loaded.summary(), "TLS");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_reload_carries_what_basic_auth_earned() {
        let dir =
            std::env::temp_dir().join(format!("gpu-exporter-web-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("web.yml");
        let dave = "basic_auth_users:\n  dave: $2y$10$2UXri9cIDdgeKjBo4Rlpx.U3ZLDV8X1IxKmsfOvhcM5oXQt/mLmXq\n";
        std::fs::write(&config, dave).unwrap();
        let (mut watch, loaded) = Watch::start(&config, BCRYPT_MAX_COST).unwrap();
        let good = Some(&b"Basic ZGF2ZTpkYXZlMTIz"[..]); // dave:dave123
        let allowed = |l: &Loaded| {
            let auth = l.auth.as_ref().unwrap();
            let v = smol::block_on(auth.check(good, [127, 0, 0, 1].into()));
            (v, auth.bcrypts())
        };
        assert_eq!(allowed(&loaded), (auth::Verdict::Allowed, 1));
        // SIGHUP: the same file, dave still cached.
        let again = watch.poll(true).unwrap().unwrap();
        assert_eq!(allowed(&again), (auth::Verdict::Allowed, 0));
        // A user added: dave, unchanged, still cached.
        let two =
            format!("{dave}  u: $2y$05$dhBBcrUqYOQncjX3esbAxeM2Fj3gtb6Kr07DKxszK66F1YjfBaE.u\n");
        std::fs::write(&config, two).unwrap();
        let added = watch.poll(true).unwrap().unwrap();
        assert_eq!(added.summary(), "basic auth (2 users)");
        assert_eq!(allowed(&added), (auth::Verdict::Allowed, 0));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
