//! What the server asks of the application: the body answering each
//! request, and which paths are probes.

use crate::Server;
use crate::counts::Counts;
use crate::gzip::Compressor;
use crate::message::{Request, Response};
use std::time::Instant;

/// Answers requests. The server parses, checks access, heads, gzips,
/// sends and bounds; the handler writes bodies.
pub trait Handler {
    /// Writes the body answering `req` after what `body` holds (the
    /// head's room: leave it), and says how to head it.
    fn respond(&self, req: &Request, ex: &mut Exchange, body: &mut Vec<u8>) -> Response;

    /// Whether `path` is a probe: a web config's `--web.open-probes` lets
    /// it pass without auth.
    fn is_probe(&self, path: &str) -> bool;
}

/// What the server tells a handler about one request beyond its head.
pub struct Exchange<'a> {
    /// The client asked for gzip: a body the handler gzips itself
    /// ([`Response::gzipped`]) uses this state. `None`: send it plain, or
    /// leave gzip to the server.
    pub gzip: Option<&'a mut Compressor>,
    /// The request came in on the probe listener.
    pub probes_only: bool,
    server: Option<&'a Server>,
}

/// The counts of a request answered without a server.
static NONE: Counts = Counts::new();

impl<'a> Exchange<'a> {
    pub(crate) fn new(
        gzip: Option<&'a mut Compressor>,
        probes_only: bool,
        server: Option<&'a Server>,
    ) -> Self {
        Exchange {
            gzip,
            probes_only,
            server,
        }
    }

    /// Bytes the responses in flight hold: a handler that renders whole
    /// bodies per request bounds them by it.
    pub fn held(&self) -> usize {
        self.server.map_or(0, Server::held)
    }

    /// The server's own counts.
    pub fn counts(&self) -> &Counts {
        self.server.map_or(&NONE, |s| &s.counts)
    }

    /// The body about to be rendered shares bytes made `of` then (see
    /// [`Server::serving`]): when they are new, responses still holding
    /// older ones whose clients stopped reading are closed first.
    pub fn serving(&self, of: Instant) {
        if let Some(s) = self.server {
            s.serving(of);
        }
    }
}
