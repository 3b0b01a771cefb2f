//! gRPC over our HTTP/2 client: the 5-byte length-prefixed message
//! framing (PROTOCOL-HTTP2.md) and a unary call.

use crate::error::Error;
use crate::h2::{Client, Io, Request};
use std::time::Instant;

/// Splits a unary response's DATA back into its one message, handing the
/// message's bytes on as they arrive.
#[derive(Clone, Copy, Debug)]
pub struct Deframer {
    prefix: [u8; 5],
    /// Prefix bytes seen of the current message; 5 once in its body.
    have: usize,
    remaining: u32,
    messages: u32,
    max: u32,
}

impl Deframer {
    pub fn new(max_message: u32) -> Self {
        Deframer {
            prefix: [0; 5],
            have: 0,
            remaining: 0,
            messages: 0,
            max: max_message,
        }
    }

    pub fn feed(
        &mut self,
        mut data: &[u8],
        sink: &mut dyn FnMut(&[u8]) -> Result<(), Error>,
    ) -> Result<(), Error> {
        while !data.is_empty() {
            if self.have < 5 {
                if self.have == 0 && self.messages > 0 {
                    return Err(Error::Framing("more than one message in a unary response"));
                }
                let k = (5 - self.have).min(data.len());
                self.prefix[self.have..self.have + k].copy_from_slice(&data[..k]);
                self.have += k;
                data = &data[k..];
                if self.have == 5 {
                    self.start_message()?;
                }
            } else {
                let k = (self.remaining as usize).min(data.len());
                sink(&data[..k])?;
                data = &data[k..];
                self.remaining -= k as u32;
                if self.remaining == 0 {
                    self.have = 0;
                }
            }
        }
        Ok(())
    }

    fn start_message(&mut self) -> Result<(), Error> {
        match self.prefix[0] {
            0 => {}
            // We send no grpc-accept-encoding, so nothing may be compressed.
            1 => return Err(Error::Compressed),
            _ => return Err(Error::Framing("invalid message flags")),
        }
        let len = u32::from_be_bytes([
            self.prefix[1],
            self.prefix[2],
            self.prefix[3],
            self.prefix[4],
        ]);
        if len > self.max {
            return Err(Error::MessageTooLarge);
        }
        self.messages += 1;
        self.remaining = len;
        if len == 0 {
            self.have = 0;
        }
        Ok(())
    }

    /// Checks that exactly one whole message arrived.
    pub fn finish(&self) -> Result<(), Error> {
        if self.have != 0 {
            return Err(Error::Framing("response ended inside a message"));
        }
        if self.messages == 0 {
            return Err(Error::Framing("response without a message"));
        }
        Ok(())
    }
}

/// Calls `path` with `message` on a fresh connection `io`, handing the
/// response message to `on_message` in pieces as it arrives. A status
/// other than OK is an error, even after the message arrived whole.
pub fn unary<S: Io + ?Sized>(
    client: &mut Client,
    io: &mut S,
    path: &str,
    message: &[u8],
    deadline: Instant,
    max_message: u32,
    on_message: &mut dyn FnMut(&[u8]) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut body = Vec::with_capacity(5 + message.len());
    body.push(0);
    body.extend_from_slice(&(message.len() as u32).to_be_bytes());
    body.extend_from_slice(message);
    let req = Request {
        path,
        authority: "localhost",
        body: &body,
    };
    let mut deframer = Deframer::new(max_message);
    let status = client.call(io, &req, deadline, &mut |d| deframer.feed(d, on_message))?;
    match status.code {
        Some(0) => deframer.finish(),
        Some(code) => Err(Error::Grpc {
            code,
            message: status.message,
        }),
        None => Err(Error::NoGrpcStatus),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deframe(chunks: &[&[u8]], max: u32) -> Result<Vec<u8>, Error> {
        let mut d = Deframer::new(max);
        let mut out = Vec::new();
        for c in chunks {
            d.feed(c, &mut |b| {
                out.extend_from_slice(b);
                Ok(())
            })?;
        }
        d.finish()?;
        Ok(out)
    }

    #[test]
    fn one_message_in_any_pieces() {
        let msg = [0, 0, 0, 0, 3, b'a', b'b', b'c'];
        for cut in 0..=msg.len() {
            assert_eq!(deframe(&[&msg[..cut], &msg[cut..]], 10).unwrap(), b"abc");
        }
        assert_eq!(deframe(&[&[0, 0, 0, 0, 0]], 10).unwrap(), b"");
    }

    #[test]
    fn framing_errors() {
        assert_eq!(deframe(&[&[1, 0, 0, 0, 1, 9]], 10), Err(Error::Compressed));
        assert!(matches!(
            deframe(&[&[2, 0, 0, 0, 0]], 10),
            Err(Error::Framing(_))
        ));
        assert_eq!(
            deframe(&[&[0, 0, 0, 0, 11]], 10),
            Err(Error::MessageTooLarge)
        );
        assert!(matches!(
            deframe(&[&[0, 0, 0, 0, 2, 1]], 10),
            Err(Error::Framing(_))
        ));
        assert!(matches!(deframe(&[&[0, 0, 0]], 10), Err(Error::Framing(_))));
        assert!(matches!(deframe(&[], 10), Err(Error::Framing(_))));
        let two = [0, 0, 0, 0, 1, 7, 0, 0, 0, 0, 0];
        assert!(matches!(deframe(&[&two], 10), Err(Error::Framing(_))));
    }
}
