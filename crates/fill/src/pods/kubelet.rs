//! One `List` call to the kubelet's pod-resources socket, decoded as it
//! streams in.

use crate::pods::error::Error;
use crate::pods::proto::{self, ListDecoder, PodResources, Stats};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};
use wire::grpc;
use wire::h2::{self, Client, Io};

pub const DEFAULT_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";
pub const LIST_PATH: &str = "/v1.PodResourcesLister/List";

/// What one successful `List` gave.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    /// The pods holding NVIDIA devices.
    pub pods: Vec<PodResources>,
    pub stats: Stats,
    /// The size of the response message.
    pub message_bytes: u64,
}

/// A reusable lister: its HTTP/2 buffers and pod buffer are kept between
/// calls, and each call opens a new connection.
#[derive(Debug)]
pub struct Lister {
    client: Client,
    decoder: ListDecoder,
    max_message: u32,
}

impl Default for Lister {
    fn default() -> Self {
        Lister::new(h2::Limits::default(), proto::Limits::default())
    }
}

impl Lister {
    pub fn new(h2_limits: h2::Limits, proto_limits: proto::Limits) -> Self {
        Lister {
            client: Client::new(h2_limits),
            decoder: ListDecoder::new(proto_limits),
            max_message: h2_limits
                .max_body
                .saturating_sub(5)
                .min(u64::from(u32::MAX)) as u32,
        }
    }

    /// Connects to `socket` and lists its pods, all within `timeout`.
    pub fn list(&mut self, socket: &Path, timeout: Duration) -> Result<Listing, Error> {
        let deadline = Instant::now() + timeout;
        // A unix connect does not wait on the peer (unless its backlog is
        // full); the call's reads and writes are bounded by the deadline.
        let mut stream = UnixStream::connect(socket).map_err(|e| Error::Connect(e.kind()))?;
        self.list_on(&mut stream, deadline)
    }

    /// Lists over an already connected stream (tests, fuzzing).
    pub fn list_on<S: Io + ?Sized>(
        &mut self,
        io: &mut S,
        deadline: Instant,
    ) -> Result<Listing, Error> {
        self.decoder.reset();
        let decoder = &mut self.decoder;
        let mut bytes = 0u64;
        grpc::unary(
            &mut self.client,
            io,
            LIST_PATH,
            &[],
            deadline,
            self.max_message,
            &mut |chunk| {
                bytes += chunk.len() as u64;
                decoder.feed(chunk).map_err(wire::Error::Proto)
            },
        )?;
        let (pods, stats) = self.decoder.finish()?;
        Ok(Listing {
            pods,
            stats,
            message_bytes: bytes,
        })
    }

    /// The largest pod buffer so far: with the client's fixed 32 KiB read
    /// buffer, all the memory a response costs beyond the kept pods.
    pub fn peak_buffer(&self) -> usize {
        self.decoder.peak_buffer()
    }
}

/// How long the refresher waits after `failures` failed calls in a row:
/// the refresh interval, doubled per failure, at most `max`. A missing
/// socket (no kubelet yet, or attribution on a node without one) then
/// costs one failed connect per `max`.
pub fn retry_delay(interval: Duration, failures: u32, max: Duration) -> Duration {
    interval
        .saturating_mul(1u32 << failures.min(16))
        .min(max)
        .max(interval.min(max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let s = Duration::from_secs;
        let d: Vec<_> = (0..8).map(|f| retry_delay(s(5), f, s(60))).collect();
        assert_eq!(d, [s(5), s(10), s(20), s(40), s(60), s(60), s(60), s(60)]);
        assert_eq!(retry_delay(s(5), u32::MAX, s(60)), s(60));
    }
}
