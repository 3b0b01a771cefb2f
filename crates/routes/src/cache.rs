//! What every scrape of one snapshot writes alike (its families and the
//! exporter's own that depend on it alone: [`Scrape::render_shared`]),
//! rendered once per snapshot, freshness, format and set of collectors
//! and shared by every scrape of it: in plain text per format, and
//! deflated for gzip. A scrape sends the shared bytes as they are kept
//! ([`Shared`], between its head and the rest) and renders only what
//! changes between its scrapes ([`Scrape::render_live`]: the snapshot's
//! age, the HTTP server's counts), so values computed at scrape time are
//! never stale.
//!
//! A gzipped scrape is one gzip member in two parts: the shared part,
//! deflated once and sync-flushed, then the live part (about 2.5 KB), in
//! stored blocks: deflating it on every scrape would cost more than the
//! rest of a gzipped scrape, for 1.7 KB on the wire. The CRC-32 of the
//! whole goes on from the shared part's. Any gzip reader reads it, not
//! only those that take several members as Go's does.
//!
//! [`Scrape::render_shared`]: exposition::Scrape::render_shared
//! [`Scrape::render_live`]: exposition::Scrape::render_live

use exposition::{Format, Steady};
use http::gzip::{Compressor, HEADER, stored, trailer};
use http::reply::Shared;
use miniz_oxide::deflate::core::TDEFLFlush;
use model::Collectors;
use model::{Freshness, Snapshot};
use std::sync::{Arc, Weak};
use std::time::Instant;

/// What a scrape's shared part was rendered from. The snapshot is held
/// weakly: a kept render does not keep an old snapshot's readings alive.
#[derive(Clone)]
pub struct Families {
    snapshot: Weak<Snapshot>,
    /// The snapshot's `finished`.
    of: Instant,
    fresh: Freshness,
    format: Format,
    only: Collectors,
}

impl Families {
    pub fn new(
        snapshot: &Arc<Snapshot>,
        fresh: Freshness,
        format: Format,
        only: Collectors,
    ) -> Self {
        Families {
            snapshot: Arc::downgrade(snapshot),
            of: snapshot.finished,
            fresh,
            format,
            only,
        }
    }
}

impl PartialEq for Families {
    fn eq(&self, o: &Families) -> bool {
        Weak::ptr_eq(&self.snapshot, &o.snapshot)
            && (self.fresh, self.format, self.only) == (o.fresh, o.format, o.only)
    }
}

/// One shared part, what it was made from, and a spare buffer.
#[derive(Default)]
struct Kept {
    now: Option<(Families, Arc<Shared>)>,
    /// An earlier render that responses held when a new one was made:
    /// rendered over once they let it go, so that slow clients make two
    /// buffers take turns rather than a new one per snapshot (a large
    /// buffer freed and made again fragments the heap).
    spare: Option<Arc<Shared>>,
}

/// Whether no response holds `s`: it may be rendered over.
fn unheld(s: &Arc<Shared>) -> bool {
    Arc::strong_count(s) == 1 && Arc::weak_count(s) == 0
}

impl Kept {
    /// The bytes for `key`: those kept, or new ones that `make` writes,
    /// over the last render's buffer when no response holds it (no spare
    /// is kept then), else over the spare's, else in a new buffer.
    fn get(&mut self, key: Families, make: impl FnOnce(&mut Vec<u8>)) -> Arc<Shared> {
        if let Some((k, s)) = &self.now
            && *k == key
        {
            return s.clone();
        }
        let last = self.now.take().map(|(_, s)| s);
        let len = last.as_ref().map_or(0, |s| s.bytes.len());
        let (free, spare) = match (last, self.spare.take()) {
            (Some(s), _) if unheld(&s) => (Some(s), None),
            (last, Some(s)) if unheld(&s) => (Some(s), last),
            (last, _) => (None, last),
        };
        self.spare = spare;
        let mut s = free.unwrap_or_else(|| Arc::new(Shared::new(key.of)));
        if let Some(mine) = Arc::get_mut(&mut s) {
            let new = mine.bytes.capacity() == 0;
            mine.of = key.of;
            mine.bytes.clear();
            mine.bytes.reserve(len);
            make(&mut mine.bytes);
            if new {
                // Growth by doubling leaves up to half of it spare, kept
                // as long as the bytes are.
                mine.bytes.shrink_to_fit();
            }
        }
        self.now = Some((key, s.clone()));
        s
    }
}

/// What the routes keep between scrapes: the families deflated, with the
/// CRC-32 and length of what they hold, and the plain families of each
/// format.
#[derive(Default)]
pub struct Cache {
    deflated: Kept,
    crc: crc32fast::Hasher,
    len: usize,
    /// Which text of the live part's precedes what changes on every
    /// scrape, and the CRC state after the deflated families and it:
    /// hashed once while the server's counts stay the same, not on every
    /// gzipped scrape.
    steady: Option<u64>,
    steady_crc: crc32fast::Hasher,
    /// By format: text 0.0.4, OpenMetrics.
    plain: [Kept; 2],
}

impl Cache {
    /// A plain scrape: the shared part, which `families` renders only
    /// when `key` changed for its format (once per snapshot, or when the
    /// freshness changes), to send first; `own`, rendered now, appended to
    /// `out` to send after it. Allocates nothing after warm-up while no
    /// slow client holds the last snapshot's render.
    pub fn plain(
        &mut self,
        key: Families,
        out: &mut Vec<u8>,
        families: impl FnOnce(&mut Vec<u8>),
        own: impl FnOnce(&mut Vec<u8>) -> Steady,
    ) -> Arc<Shared> {
        let kept = &mut self.plain[usize::from(key.format == Format::OpenMetrics)];
        let shared = kept.get(key, families);
        own(out);
        shared
    }

    /// A gzipped scrape: gzip's header and the deflate of the shared part
    /// (which `families` renders only when `key` changed: once per
    /// snapshot), to send first; `own`, rendered now, in stored
    /// blocks, and gzip's trailer, appended to `out` to send after them.
    /// `own` says where what changes on every scrape begins in what it
    /// wrote, and which text precedes that.
    pub fn scrape(
        &mut self,
        compressor: &mut Compressor,
        key: Families,
        out: &mut Vec<u8>,
        families: impl FnOnce(&mut Vec<u8>),
        own: impl FnOnce(&mut Vec<u8>) -> Steady,
    ) -> Arc<Shared> {
        let Cache {
            deflated,
            crc,
            len,
            steady,
            steady_crc,
            ..
        } = self;
        let (gzip, spare) = compressor.parts();
        let shared = deflated.get(key, |bytes| {
            spare.clear();
            families(spare);
            bytes.extend_from_slice(&HEADER);
            gzip.deflate(spare, bytes, TDEFLFlush::Sync);
            *crc = crc32fast::Hasher::new();
            crc.update(spare);
            *len = spare.len();
            *steady = None;
        });
        // The live part is rendered in place as one final stored block,
        // its header patched once its length is known: it fits one (about
        // 2.5 KB), and is copied through `spare` into several only if not.
        let at = out.len();
        out.extend_from_slice(&[1, 0, 0, 0, 0]);
        let text = own(out);
        let live = at + 5..out.len();
        // The shared part's CRC state, carried on over the rest: no
        // combine (thousands of instructions) per scrape; over the live
        // part's steady text only when it is another.
        let (same, rest) = out[live.clone()].split_at(text.at.min(live.len()));
        if text.text.is_none() || text.text != *steady {
            *steady = text.text;
            *steady_crc = crc.clone();
            steady_crc.update(same);
        }
        let mut whole = steady_crc.clone();
        whole.update(rest);
        let n = live.len();
        match u16::try_from(n) {
            Ok(l) => {
                out[at + 1..at + 3].copy_from_slice(&l.to_le_bytes());
                out[at + 3..at + 5].copy_from_slice(&(!l).to_le_bytes());
            }
            Err(_) => {
                spare.clear();
                spare.extend_from_slice(&out[live]);
                out.truncate(at);
                stored(spare, out);
            }
        }
        trailer(out, whole, *len + n);
        shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// One gzip member, read by a reader that stops after the first.
    fn gunzip_one(b: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut r = flate2::read::GzDecoder::new(b);
        r.read_to_end(&mut out).unwrap();
        out
    }

    fn key(snapshot: &Arc<Snapshot>, hidden: bool, format: Format) -> Families {
        let fresh = Freshness {
            hidden,
            stalled: false,
        };
        Families::new(snapshot, fresh, format, Collectors::ALL)
    }

    fn snapshot() -> Arc<Snapshot> {
        Arc::new(Snapshot::empty(model::SourceKind::Sim))
    }

    #[test]
    fn a_scrape_is_one_member_with_its_families_deflated_once_per_key() {
        let (a, b) = (snapshot(), snapshot());
        let big: Vec<u8> = (0..50_000u32)
            .flat_map(|i| format!("f{{gpu=\"{}\"}} {i}\n", i % 8).into_bytes())
            .collect();
        // A live part as long as one stored block takes, and longer.
        let long: Vec<u8> = (0..70_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let mut c = Cache::default();
        let mut z = Compressor::default();
        let (mut rendered, mut families) = (0, Vec::new());
        let mut out = Vec::new();
        // The live part, how much of it stays from scrape to scrape and
        // which text that is: its CRC is carried over that text only
        // while it and the families stay; a stale one fails the gunzip.
        for (snapshot, hidden, tail, at, text, renders) in [
            (&a, false, &b"own 1\n"[..], 0, None, 1),
            (&a, false, b"own 2\n# EOF\n", 4, Some(1), 1), // same key: cached
            (&a, false, b"own 3\n# EOF\n", 4, Some(1), 1), // the same text
            (&a, false, b"OWN 3\n# EOF\n", 4, Some(2), 1), // another
            (&a, true, b"OWN 4\n", 4, Some(2), 2),         // hidden: another key
            (&b, true, b"OWN 5\n", 4, Some(2), 3),         // another snapshot
            (&b, true, b"", 0, Some(3), 3),
            (&b, true, b"own 4\n", 4, Some(4), 3),
            (&b, true, &long[..65_535], 60_000, Some(5), 3),
            (&b, true, &long, 60_000, Some(5), 3),
            (&b, true, &long[..70], 60_000, Some(6), 3),
        ] {
            out.clear();
            let shared = c.scrape(
                &mut z,
                key(snapshot, hidden, Format::Text),
                &mut out,
                |o| {
                    // Each render its own bytes, and so its own CRC.
                    rendered += 1;
                    o.extend_from_slice(format!("# render {rendered}\n").as_bytes());
                    o.extend_from_slice(&big);
                    families.clone_from(o);
                },
                |o| {
                    o.extend_from_slice(tail);
                    Steady { at, text }
                },
            );
            assert_eq!(rendered, renders);
            // Readers that take one member only (curl, browsers) read it all.
            let got = gunzip_one(&[&shared.bytes[..], &out].concat());
            assert_eq!(got.len(), families.len() + tail.len());
            assert!(got.starts_with(&families) && got.ends_with(tail));
        }
        // Nothing cached: the families alone, empty.
        let mut fresh = Cache::default();
        out.clear();
        let shared = fresh.scrape(
            &mut Compressor::default(),
            key(&a, false, Format::Text),
            &mut out,
            |_| {},
            |o| {
                o.extend_from_slice(b"x 1\n");
                Steady::default()
            },
        );
        assert_eq!(gunzip_one(&[&shared.bytes[..], &out].concat()), b"x 1\n");
    }

    #[test]
    fn a_render_held_by_a_response_is_never_overwritten() {
        let (a, b) = (snapshot(), snapshot());
        let mut c = Cache::default();
        let mut out = Vec::new();
        let mut scrape = |c: &mut Cache, s: &Arc<Snapshot>, text: &'static [u8]| {
            out.clear();
            c.plain(
                key(s, false, Format::Text),
                &mut out,
                |o| o.extend_from_slice(text),
                |o| {
                    o.extend_from_slice(b"own\n");
                    Steady::default()
                },
            )
        };
        let held = scrape(&mut c, &a, b"first\n");
        // The same snapshot: the same bytes, not a copy.
        assert!(Arc::ptr_eq(&held, &scrape(&mut c, &a, b"ignored\n")));
        // A new snapshot while a slow client holds the old render.
        let new = scrape(&mut c, &b, b"second\n");
        assert_eq!(held.bytes, b"first\n");
        assert_eq!(new.bytes, b"second\n");
        assert!(!Arc::ptr_eq(&held, &new));
        // Once nothing holds it, the cache renders into its own buffer again.
        let at = new.bytes.as_ptr();
        drop((held, new));
        let again = scrape(&mut c, &a, b"third\n");
        assert_eq!(again.bytes, b"third\n");
        assert_eq!(again.bytes.as_ptr(), at, "the buffer is reused");
    }

    #[test]
    fn slow_clients_make_two_buffers_take_turns() {
        let snapshots: Vec<_> = (0..5).map(|_| snapshot()).collect();
        let mut c = Cache::default();
        let mut out = Vec::new();
        let mut scrape = |c: &mut Cache, i: usize| {
            out.clear();
            let text = format!("render {i}\n");
            c.plain(
                key(&snapshots[i], false, Format::Text),
                &mut out,
                |o| o.extend_from_slice(text.as_bytes()),
                |_| Steady::default(),
            )
        };
        // Every new snapshot finds the last render held by a slow client,
        // whose response ends before the next one.
        let first = scrape(&mut c, 0);
        let (a, mut held) = (first.bytes.as_ptr(), first);
        let second = scrape(&mut c, 1);
        let b = second.bytes.as_ptr();
        assert_ne!(a, b, "a held render is never written over");
        drop(second);
        for i in 2..5 {
            drop(std::mem::replace(&mut held, scrape(&mut c, i - 1)));
            let now = scrape(&mut c, i);
            assert_eq!(now.bytes, format!("render {i}\n").as_bytes());
            let want = if i % 2 == 0 { a } else { b };
            assert_eq!(now.bytes.as_ptr(), want, "render {i} takes the free buffer");
            drop(now);
        }
        // Once nothing is held, one buffer serves and the spare is let go.
        drop(held);
        let last = scrape(&mut c, 0);
        assert_eq!(last.bytes, b"render 0\n");
        assert!(c.plain[0].spare.is_none());
    }
}
