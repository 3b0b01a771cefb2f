//! A blocking TLS client (rustls, ring) for the tests that count the
//! exporter's allocations and memory over TLS: one request at a time on a
//! kept-alive connection, the test PKI's CA trusted (`tests/certs.sh`).
#![allow(dead_code)] // each user takes its own part

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A client configuration trusting `dir/ca.crt`, presenting
/// `dir/NAME.crt` when `client` names one.
pub fn config(dir: &Path, client: Option<&str>, tls12: bool) -> Arc<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(dir.join("ca.crt")).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let versions: &[&rustls::SupportedProtocolVersion] = if tls12 {
        &[&rustls::version::TLS12]
    } else {
        &[&rustls::version::TLS13]
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match client {
        Some(name) => {
            let certs = CertificateDer::pem_file_iter(dir.join(format!("{name}.crt")))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let key = PrivateKeyDer::from_pem_file(dir.join(format!("{name}.key"))).unwrap();
            builder.with_client_auth_cert(certs, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// One kept-alive TLS connection to the exporter at `addr`.
pub struct Client {
    stream: StreamOwned<ClientConnection, TcpStream>,
    /// Plaintext read past the last response.
    rest: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr, config: Arc<ClientConfig>) -> Client {
        let name = ServerName::IpAddress(addr.ip().into());
        let conn = ClientConnection::new(config, name).unwrap();
        let sock = TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Client {
            stream: StreamOwned::new(conn, sock),
            rest: Vec::with_capacity(1 << 16),
        }
    }

    /// Completes the handshake and sends nothing.
    pub fn handshake(&mut self) {
        while self.stream.conn.is_handshaking() {
            self.stream.conn.complete_io(&mut self.stream.sock).unwrap();
        }
    }

    /// Every plaintext byte the server sends until it closes.
    pub fn read_to_end(&mut self) -> Vec<u8> {
        let mut all = Vec::new();
        let _ = self.stream.read_to_end(&mut all);
        all
    }

    /// Sends `request` and reads one response into `buf`; returns the
    /// length of its head. `head_only` for a HEAD request.
    pub fn exchange(&mut self, request: &[u8], buf: &mut Vec<u8>, head_only: bool) -> usize {
        self.send(request);
        self.receive(buf, head_only)
    }

    /// Sends `bytes`: one request, or several pipelined.
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
        self.stream.flush().unwrap();
    }

    /// Reads the next response into `buf`; returns the length of its head.
    pub fn receive(&mut self, buf: &mut Vec<u8>, head_only: bool) -> usize {
        buf.clear();
        buf.append(&mut self.rest);
        let mut chunk = [0u8; 16 * 1024];
        let mut want = None;
        loop {
            if want.is_none()
                && let Some(h) = buf.windows(4).position(|w| w == b"\r\n\r\n")
            {
                let head = std::str::from_utf8(&buf[..h]).unwrap();
                assert!(head.starts_with("HTTP/1.1 "), "{head}");
                let body: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("Content-Length: "))
                    .unwrap()
                    .parse()
                    .unwrap();
                want = Some((h + 4, h + 4 + if head_only { 0 } else { body }));
            }
            if let Some((head, end)) = want
                && buf.len() >= end
            {
                self.rest.extend_from_slice(&buf[end..]);
                buf.truncate(end);
                return head;
            }
            let n = self.stream.read(&mut chunk).unwrap();
            assert!(n > 0, "closed before a whole response");
            buf.extend_from_slice(&chunk[..n]);
        }
    }
}
