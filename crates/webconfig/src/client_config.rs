//! The rustls client configuration for https:// Alertmanagers: the CA
//! file's certificates are the only roots (there is no system store in the
//! binary), the server's certificate is checked by webpki against the
//! URL's host (a DNS name, or an IP address as an IP SAN) at the wall
//! clock's time, on ring's provider; TLS 1.2 and 1.3, ALPN `http/1.1`, no
//! client certificate and no session resumption (a post now and then, each
//! on a connection of its own, keeps no state between them).

use super::server_config::{SystemClock, roots};
use super::{Error, MAX_PEM_BYTES, err};
use base::file::read_config;
use rustls::ClientConfig;
use rustls::client::Resumption;
use rustls::crypto::ring;
use std::path::Path;
use std::sync::Arc;

/// The configuration that trusts the CA certificates of `ca_file`, read
/// now through the bounded reader; a problem is one line naming `flag`
/// and the file.
pub fn client_config(flag: &str, ca_file: &Path) -> Result<Arc<ClientConfig>, Error> {
    let key = format!("{flag} {}", ca_file.display());
    let pem = read_config(ca_file, MAX_PEM_BYTES).map_err(|e| err(&key, e.to_string()))?;
    let roots = roots(pem.as_bytes(), &key)?;
    let mut config = ClientConfig::builder_with_details(
        Arc::new(ring::default_provider()),
        Arc::new(SystemClock),
    )
    .with_safe_default_protocol_versions()
    .map_err(|e| err(&key, e.to_string()))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.resumption = Resumption::disabled();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every bad CA file is one line naming the flag and the file; a PEM
    /// without a certificate and a certificate that is no DER are refused
    /// too.
    #[test]
    fn bad_ca_files_are_one_line_naming_the_file() {
        let dir = std::env::temp_dir().join(format!("webconfig-client-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let key =
            "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n";
        let junk = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        for (path, says) in [
            (dir.join("missing.pem"), "missing.pem"),
            (file("empty.pem", ""), "no CERTIFICATE block found"),
            (file("key.pem", key), "no CERTIFICATE block found"),
            (file("junk.pem", junk), "unusable CA certificate"),
            (dir.clone(), "webconfig-client"),
        ] {
            let e = client_config("--alertmanager.ca-file", &path).unwrap_err();
            let line = e.to_string();
            assert!(
                line.starts_with(&format!("--alertmanager.ca-file {}: ", path.display())),
                "{line}"
            );
            assert!(line.contains(says) && !line.contains('\n'), "{line}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
