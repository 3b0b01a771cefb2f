//! A response as it goes out: the bytes built for it (its head, and the
//! part of the body rendered for it alone), and, after the head, the
//! bytes every scrape of one snapshot shares. A scrape sends the shared
//! part from where the cache keeps it, in the same vectored write, with
//! no copy; a slot that waits on a slow client holds a reference to it.

use std::io::{IoSlice, Write};
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

/// Bytes every scrape of one snapshot sends alike: its families rendered
/// in one format, or deflated.
#[derive(Debug)]
pub struct Shared {
    /// The snapshot's `finished`: which collection it is, and so how old.
    pub of: Instant,
    pub bytes: Vec<u8>,
}

impl Shared {
    pub fn new(of: Instant) -> Shared {
        Shared {
            of,
            bytes: Vec::new(),
        }
    }
}

/// `out[range]` in order, with `shared`'s bytes at its offset in `out`.
pub fn parts<'a>(
    out: &'a [u8],
    range: Range<usize>,
    shared: Option<(usize, &'a Shared)>,
) -> [&'a [u8]; 3] {
    match shared {
        None => [&out[range], &[], &[]],
        Some((at, s)) => [&out[range.start..at], &s.bytes, &out[at..range.end]],
    }
}

/// `out[range]`, with `shared` sent at `split` (an offset into `out`,
/// inside `range`), and how much of the whole has gone out.
#[derive(Default)]
pub struct Reply {
    out: Vec<u8>,
    range: Range<usize>,
    shared: Option<(usize, Arc<Shared>)>,
    sent: usize,
}

impl Reply {
    pub fn new(out: Vec<u8>, range: Range<usize>, shared: Option<(usize, Arc<Shared>)>) -> Reply {
        debug_assert!(
            shared
                .as_ref()
                .is_none_or(|(at, _)| (range.start..=range.end).contains(at))
        );
        Reply {
            out,
            range,
            shared,
            sent: 0,
        }
    }

    /// The response's bytes, in order.
    pub fn parts(&self) -> [&[u8]; 3] {
        let shared = self.shared.as_ref().map(|(at, s)| (*at, &**s));
        parts(&self.out, self.range.clone(), shared)
    }

    fn len(&self) -> usize {
        self.parts().iter().map(|p| p.len()).sum()
    }

    /// The bytes its buffer holds, whatever of it has gone.
    pub fn held(&self) -> usize {
        self.out.capacity()
    }

    /// Which snapshot's shared bytes it holds, if any.
    pub fn of(&self) -> Option<Instant> {
        self.shared.as_ref().map(|(_, s)| s.of)
    }

    /// Whether all of it has gone out.
    pub fn done(&self) -> bool {
        self.sent >= self.len()
    }

    /// Writes what `w` takes of the rest, in one vectored write; the
    /// bytes written.
    pub fn write_to(&mut self, mut w: impl Write) -> std::io::Result<usize> {
        let mut skip = self.sent;
        let parts = self.parts().map(|p| {
            let from = skip.min(p.len());
            skip -= from;
            IoSlice::new(&p[from..])
        });
        let n = w.write_vectored(&parts)?;
        self.sent += n;
        Ok(n)
    }

    /// Its own buffer back, for the pool; the shared bytes let go.
    pub fn into_buffer(self) -> Vec<u8> {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that takes at most `max` bytes a call, to split the
    /// segments anywhere.
    struct Trickle<'a> {
        got: &'a mut Vec<u8>,
        max: usize,
    }

    impl Write for Trickle<'_> {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let n = b.len().min(self.max);
            self.got.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_shared_bytes_go_out_after_the_head_whatever_the_writes_take() {
        let shared = Arc::new(Shared {
            of: Instant::now(),
            bytes: b"<families>".to_vec(),
        });
        for max in [1, 2, 3, 7, 100] {
            let mut r = Reply::new(b"xxHEAD|own".to_vec(), 2..10, Some((7, shared.clone())));
            assert_eq!(r.len(), 18);
            let mut got = Vec::new();
            let mut calls = 0;
            while !r.done() {
                r.write_to(Trickle { got: &mut got, max }).unwrap();
                calls += 1;
                assert!(calls < 100);
            }
            assert_eq!(got, b"HEAD|<families>own", "max {max}");
        }
        // Without shared bytes, the range alone.
        let mut r = Reply::new(b"..abc".to_vec(), 2..5, None);
        let mut got = Vec::new();
        r.write_to(Trickle {
            got: &mut got,
            max: 10,
        })
        .unwrap();
        assert!(r.done() && r.of().is_none());
        assert_eq!(got, b"abc");
        assert_eq!(Arc::strong_count(&shared), 1, "replies let the bytes go");
    }
}
