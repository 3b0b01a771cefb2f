//! The rustls server configuration a web config's `tls_server_config`
//! asks for: TLS 1.2 minimum and 1.3, ALPN `http/1.1` only, the configured
//! suites, groups and client-certificate policy on ring's provider (its
//! suites are exactly the ones offered: TLS 1.3 AES-GCM and ChaCha20, TLS
//! 1.2 ECDHE with AES-GCM and ChaCha20; groups X25519, P-256, P-384), and
//! the `client_allowed_sans` check on the verified client certificate.
//! No session resumption: no tickets, no session cache, so a handshake
//! leaves no state behind (Prometheus keeps its connections alive).
//! The connections themselves are `http/tls.rs`'s.

use super::{ClientAuth, Curve, Error, MAX_PEM_BYTES, Pem, TlsConfig, TlsVersion, err};
use base::file::read_config;
use rustls::crypto::{CryptoProvider, ring};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{NoServerSessionStorage, ServerConfig, WebPkiClientVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use std::sync::Arc;

/// Reads a PEM source; errors name the key it came from. A file goes
/// through the config file's bounded reader: a regular file of at most
/// [`MAX_PEM_BYTES`], opened without blocking, so a FIFO, `/dev/zero` or a
/// huge file is refused unread, at start and on reload alike.
fn read_pem(p: &Pem, inline_key: &str, file_key: &str) -> Result<(Vec<u8>, String), Error> {
    match p {
        Pem::Inline(s) => Ok((s.clone().into_bytes(), inline_key.to_owned())),
        Pem::File(path) => read_config(path, MAX_PEM_BYTES)
            .map(|s| (s.into_bytes(), file_key.to_owned()))
            .map_err(|e| err(file_key, format!("{}: {e}", path.display()))),
    }
}

/// Builds the rustls server config. Reads the certificate, key and client
/// CA; every error is one line naming the key.
pub fn server_config(t: &TlsConfig) -> Result<Arc<ServerConfig>, Error> {
    const K: &str = "tls_server_config";
    let (cert_pem, cert_key) = read_pem(&t.cert, &format!("{K}.cert"), &format!("{K}.cert_file"))?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| err(&cert_key, format!("bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(err(&cert_key, "no CERTIFICATE block found"));
    }
    let (key_pem, key_key) = read_pem(&t.key, &format!("{K}.key"), &format!("{K}.key_file"))?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        err(
            &key_key,
            format!("no usable private key (PKCS#8, PKCS#1 or SEC1 PEM): {e}"),
        )
    })?;

    let provider = Arc::new(provider(t));
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = [
        (TlsVersion::Tls13, &rustls::version::TLS13),
        (TlsVersion::Tls12, &rustls::version::TLS12),
    ]
    .into_iter()
    .filter(|(v, _)| (t.min_version..=t.max_version).contains(v))
    .map(|(_, v)| v)
    .collect();
    let builder = ServerConfig::builder_with_details(provider.clone(), Arc::new(SystemClock))
        .with_protocol_versions(&versions)
        .map_err(|e| err(&format!("{K}.cipher_suites"), e.to_string()))?;

    let builder = match (&t.client_ca, t.client_auth) {
        (Some(ca), ClientAuth::VerifyIfGiven | ClientAuth::RequireAndVerify) => {
            builder.with_client_cert_verifier(client_verifier(t, ca, provider)?)
        }
        _ => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| err(&key_key, format!("does not fit the certificate: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.ignore_client_order = t.prefer_server_cipher_suites;
    config.send_tls13_tickets = 0;
    config.session_storage = Arc::new(NoServerSessionStorage {});
    Ok(Arc::new(config))
}

/// rustls' ring provider with the configured suites, in their order, and
/// curves.
fn provider(t: &TlsConfig) -> CryptoProvider {
    let mut provider = ring::default_provider();
    provider.cipher_suites.retain(|s| match s {
        rustls::SupportedCipherSuite::Tls13(_) => t.max_version == TlsVersion::Tls13,
        rustls::SupportedCipherSuite::Tls12(_) => {
            t.min_version == TlsVersion::Tls12
                && (t.cipher_suites.is_empty()
                    || t.cipher_suites.iter().any(|c| suite_of(*c) == s.suite()))
        }
    });
    if !t.cipher_suites.is_empty() {
        // Configured order first (TLS 1.3 suites keep rustls' order ahead).
        let rank = |s: &rustls::SupportedCipherSuite| {
            t.cipher_suites
                .iter()
                .position(|c| suite_of(*c) == s.suite())
                .unwrap_or(0)
        };
        provider.cipher_suites.sort_by_key(rank);
    }
    if !t.curves.is_empty() {
        provider.kx_groups = t
            .curves
            .iter()
            .map(|c| match c {
                Curve::X25519 => ring::kx_group::X25519,
                Curve::P256 => ring::kx_group::SECP256R1,
                Curve::P384 => ring::kx_group::SECP384R1,
            })
            .collect();
    }
    provider
}

/// Verifies client certificates against the client CA, and their SANs
/// against `client_allowed_sans` when it is set.
fn client_verifier(
    t: &TlsConfig,
    ca: &Pem,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, Error> {
    const K: &str = "tls_server_config";
    let (ca_pem, ca_key) = read_pem(
        ca,
        &format!("{K}.client_ca"),
        &format!("{K}.client_ca_file"),
    )?;
    let roots = roots(&ca_pem, &ca_key)?;
    let mut vb = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
    if t.client_auth == ClientAuth::VerifyIfGiven {
        vb = vb.allow_unauthenticated();
    }
    let inner = vb.build().map_err(|e| err(&ca_key, e.to_string()))?;
    let verifier: Arc<dyn ClientCertVerifier> = if t.client_allowed_sans.is_empty() {
        inner
    } else {
        Arc::new(SanVerifier {
            inner,
            allowed: t.client_allowed_sans.clone(),
        })
    };
    Ok(verifier)
}

/// The CA certificates of `pem` (read for `key`), at least one.
pub(crate) fn roots(pem: &[u8], key: &str) -> Result<rustls::RootCertStore, Error> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(pem) {
        let c = c.map_err(|e| err(key, format!("bad PEM: {e}")))?;
        roots
            .add(c)
            .map_err(|e| err(key, format!("unusable CA certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(err(key, "no CERTIFICATE block found"));
    }
    Ok(roots)
}

/// The time certificates are checked against: the system's clock. (rustls'
/// own needs its `std` feature, which costs the binary more than this.)
#[derive(Debug)]
pub(crate) struct SystemClock;

impl rustls::time_provider::TimeProvider for SystemClock {
    fn current_time(&self) -> Option<UnixTime> {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?;
        Some(UnixTime::since_unix_epoch(since))
    }
}

fn suite_of(c: super::CipherSuite) -> rustls::CipherSuite {
    use super::CipherSuite as C;
    use rustls::CipherSuite as R;
    match c {
        C::EcdheEcdsaAes128Gcm => R::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        C::EcdheEcdsaAes256Gcm => R::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        C::EcdheEcdsaChacha20 => R::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        C::EcdheRsaAes128Gcm => R::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        C::EcdheRsaAes256Gcm => R::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        C::EcdheRsaChacha20 => R::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    }
}

/// exporter-toolkit's `VerifyPeerCertificate`: after the chain verified,
/// the leaf must carry one of the allowed SANs (DNS, IP, e-mail or URI),
/// compared exactly. A miss fails the handshake (bad_certificate).
#[derive(Debug)]
struct SanVerifier {
    inner: Arc<dyn ClientCertVerifier>,
    allowed: Vec<String>,
}

impl ClientCertVerifier for SanVerifier {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }
    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }
    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let ok = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        let mut hit = false;
        sans(end_entity, |san| hit |= self.allowed.contains(&san));
        if hit {
            Ok(ok)
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            ))
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// One DER TLV: (tag, contents, rest).
fn tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, b) = b.split_first()?;
    let (&l0, mut b) = b.split_first()?;
    let len = if l0 < 0x80 {
        usize::from(l0)
    } else {
        let n = usize::from(l0 & 0x7f);
        if n == 0 || n > 4 || b.len() < n {
            return None;
        }
        let len = b[..n]
            .iter()
            .fold(0usize, |a, &x| (a << 8) | usize::from(x));
        b = &b[n..];
        len
    };
    (b.len() >= len).then(|| (tag, &b[..len], &b[len..]))
}

/// Calls `f` with each SAN of a DER certificate as Go's `x509` spells it:
/// dNSName, rfc822Name and URI as written, iPAddress as `net.IP.String()`.
pub fn sans(cert: &[u8], mut f: impl FnMut(String)) {
    let mut walk = || -> Option<()> {
        let (_, certificate, _) = tlv(cert)?;
        let (_, tbs, _) = tlv(certificate)?;
        let mut rest = tbs;
        while !rest.is_empty() {
            let (tag, body, r) = tlv(rest)?;
            rest = r;
            if tag != 0xa3 {
                continue; // [3] extensions
            }
            let (_, exts, _) = tlv(body)?;
            let mut exts = exts;
            while !exts.is_empty() {
                let (_, ext, r) = tlv(exts)?;
                exts = r;
                let (_, oid, mut e) = tlv(ext)?;
                if oid != [0x55, 0x1d, 0x11] {
                    continue; // subjectAltName 2.5.29.17
                }
                let (mut tag, mut value, _) = tlv(e)?;
                if tag == 0x01 {
                    (_, _, e) = tlv(e)?; // critical BOOLEAN
                    (tag, value, _) = tlv(e)?;
                }
                if tag != 0x04 {
                    return None;
                }
                let (_, mut names, _) = tlv(value)?;
                while !names.is_empty() {
                    let (tag, v, r) = tlv(names)?;
                    names = r;
                    match tag {
                        0x81 | 0x82 | 0x86 => f(String::from_utf8_lossy(v).into_owned()),
                        0x87 => match v.len() {
                            4 => f(std::net::Ipv4Addr::new(v[0], v[1], v[2], v[3]).to_string()),
                            16 => {
                                let mut a = [0u8; 16];
                                a.copy_from_slice(v);
                                let ip = std::net::Ipv6Addr::from(a);
                                f(match ip.to_ipv4_mapped() {
                                    Some(v4) => v4.to_string(),
                                    None => ip.to_string(),
                                });
                            }
                            _ => {}
                        },
                        _ => {}
                    }
                }
            }
        }
        Some(())
    };
    let _ = walk();
}
