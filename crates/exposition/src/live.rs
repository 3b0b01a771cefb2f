//! The series a scrape writes for itself (the snapshot's age, the HTTP
//! server's counts): the same text on every scrape but for their numbers.
//! So that text is written once per format into a template, and a scrape
//! copies it with its numbers spelled in: about a tenth of what writing
//! each head and line again cost.

use super::writer::Writer;
use super::{Format, HttpStats, ServerStats};
use base::numbers::{F64_MAX_LEN, digits_into, spell_f64};
use model::catalogue::{
    Family, HTTP_ACCEPT_PAUSED, HTTP_EVICTED, HTTP_GZIPPED, HTTP_OPEN, HTTP_PAGES_REFUSED,
    SNAPSHOT_AGE, TLS_HANDSHAKE_ERRORS,
};
use model::reason::Reason;
use std::cell::RefCell;
use std::ops::Range;
use std::sync::OnceLock;

/// One series: its family, its one label (`reason`) if any, its value.
type Series = (&'static Family, Option<&'static str>, f64);

/// The series in output order: the server's counts where there is a
/// server, the gzip count last of them, then the snapshot's age. Every
/// reason is written, counted or not, so the series are the same on
/// every scrape. The two that change on every scrape (of their kind)
/// come last, so that what precedes them is the same text from scrape
/// to scrape: a gzipped scrape hashes it once (`crates/routes/src/cache.rs`).
fn each(age: f64, http: Option<&HttpStats>, f: &mut impl FnMut(Series)) {
    if let Some(http) = http {
        let h = &http.server;
        f((&HTTP_OPEN, None, h.open as f64));
        for (r, n) in h.evicted.each() {
            f((&HTTP_EVICTED, Some(r.label()), n as f64));
        }
        f((&HTTP_ACCEPT_PAUSED, None, h.accept_paused_seconds));
        f((&HTTP_PAGES_REFUSED, None, http.pages_refused as f64));
        for (r, n) in h.tls_handshake_errors.each() {
            f((&TLS_HANDSHAKE_ERRORS, Some(r.label()), n as f64));
        }
        f((&HTTP_GZIPPED, None, h.gzipped as f64));
    }
    f((&SNAPSHOT_AGE, None, age));
}

/// Writes the series line by line, each family's head before its first.
fn written(w: &mut Writer, age: f64, http: Option<&HttpStats>, mut seen: impl FnMut(&Writer)) {
    let mut last: Option<&Family> = None;
    each(age, http, &mut |(family, reason, v)| {
        if !last.is_some_and(|l| std::ptr::eq(l, family)) {
            w.head(family);
            last = Some(family);
        }
        w.name(family);
        if let Some(reason) = reason {
            w.open_label("reason", reason);
        }
        w.value(v);
        seen(w);
    });
}

/// The series' text with every value 0, and where those zeros are.
struct Template {
    text: Vec<u8>,
    /// Where each series' number starts in `text` (a `0` there), in the
    /// order [`each`] gives them.
    slots: Vec<usize>,
    /// Whether its series are those with the server's counts: [`each`]
    /// gives the same series for the same `http.is_some()`, so that is all
    /// a fill needs to check.
    http: bool,
    /// The gzip count's place in [`each`]'s order, where it is written.
    gzipped: Option<usize>,
    /// The age's place in [`each`]'s order.
    age: usize,
    /// Where the line of the first of the two series that change on every
    /// scrape (of their kind) begins: what precedes it is the same text
    /// while the other counts are.
    tail: usize,
}

/// Where a fill spelled the two numbers that change on every scrape (of
/// their kind): the snapshot's age, and the gzip count where it is.
type Spots = [Range<usize>; 2];

impl Template {
    fn new(format: Format, http: bool) -> Template {
        let (mut text, mut slots) = (Vec::new(), Vec::new());
        let mut w = super::writer(&mut text, format, &mut []);
        let stats = HttpStats::default();
        // Each line ends in its value, "0", and a newline.
        written(&mut w, 0.0, http.then_some(&stats), |w| {
            slots.push(w.out.len() - 2)
        });
        let (mut i, mut gzipped, mut age) = (0, None, 0usize);
        each(0.0, http.then_some(&stats), &mut |(family, _, _)| {
            if std::ptr::eq(family, &HTTP_GZIPPED) {
                gzipped = Some(i);
            }
            if std::ptr::eq(family, &SNAPSHOT_AGE) {
                age = i;
            }
            i += 1;
        });
        // The line of the first of them: its family's head is the same text
        // on every scrape.
        let first = slots[gzipped.unwrap_or(age)];
        let tail = text[..first]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        Template {
            text,
            slots,
            http,
            gzipped,
            age,
            tail,
        }
    }

    /// Writes the series into `out` from the template, saying where the
    /// age and the gzip count went and where the first of them begins
    /// (from where the series start); `None`, with `out` as it was, where
    /// they are not the template's.
    /// Each series is matched to its slot by its place alone: comparing
    /// families and reasons cost more than the rest of the fill.
    fn fill(
        &self,
        age: f64,
        http: Option<&HttpStats>,
        out: &mut Vec<u8>,
    ) -> Option<(Spots, usize)> {
        if http.is_some() != self.http {
            return None;
        }
        let (start, mut from, mut slots) = (out.len(), 0, self.slots.iter());
        out.reserve(self.text.len() + self.slots.len() * F64_MAX_LEN);
        let (mut same, mut i, mut spots, mut tail) = (true, 0, [0..0, 0..0], 0);
        let first = self.gzipped.unwrap_or(self.age);
        each(age, http, &mut |(_, _, v)| match slots.next() {
            Some(&at) => {
                if i == first {
                    tail = out.len() - start + self.tail - from;
                }
                let spot = match i {
                    i if i == self.age => Some(0),
                    i if Some(i) == self.gzipped => Some(1),
                    _ => None,
                };
                i += 1;
                // Most are 0 (nothing evicted, no handshake failed): the
                // template's own 0 stays, copied with the text around it.
                if v.to_bits() == 0 {
                    if let Some(s) = spot {
                        let at = out.len() - start + at - from;
                        spots[s] = at..at + 1;
                    }
                    return;
                }
                out.extend_from_slice(&self.text[from..at]);
                let mut number = [0u8; F64_MAX_LEN];
                let n = spell_f64(v, &mut number);
                if let Some(s) = spot {
                    spots[s] = out.len() - start..out.len() - start + n;
                }
                out.extend_from_slice(&number[..n]);
                from = at + 1;
            }
            None => same = false,
        });
        if !same || slots.next().is_some() {
            out.truncate(start);
            return None;
        }
        out.extend_from_slice(&self.text[from..]);
        Some((spots, tail))
    }
}

/// The last fill with the server's counts on this thread: which template,
/// the counts, and the text with where its age and gzip count lie. Those
/// two change on every scrape (of their kind), the other counts seldom:
/// a scrape whose others are the same copies this text around its two
/// numbers, about a third of a fill's instructions.
struct Last {
    template: usize,
    stats: HttpStats,
    text: Vec<u8>,
    spots: Spots,
    /// Where the gzip count's line begins in `text`.
    tail: usize,
    /// Which text this is: a new one at every new fill, in any thread.
    id: u64,
}

/// The last [`Last::id`] given.
static TEXTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Where, in what a render of the live series wrote, what changes on
/// every scrape (of its kind) begins, and which text came before that:
/// two renders with the same `text` wrote the same bytes before `at`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Steady {
    pub at: usize,
    /// `None`: a text no other render is known to share.
    pub text: Option<u64>,
}

thread_local! {
    static LAST: RefCell<Option<Last>> = const { RefCell::new(None) };
}

/// Whether the series of `a` and `b` but the age's and the gzip count's
/// are the same. Every field is named: a new one must be placed here.
fn steady(a: &HttpStats, b: &HttpStats) -> bool {
    let HttpStats {
        server,
        pages_refused,
        // Not among these series.
        alertmanager: _,
    } = *a;
    let ServerStats {
        open,
        evicted,
        accept_paused_seconds,
        tls_handshake_errors,
        gzipped: _,
    } = server;
    let o = &b.server;
    open == o.open
        && evicted == o.evicted
        && accept_paused_seconds.to_bits() == o.accept_paused_seconds.to_bits()
        && tls_handshake_errors == o.tls_handshake_errors
        && pages_refused == b.pages_refused
}

impl Last {
    /// Writes the series from the last fill where `h` is steady with its
    /// counts; false where it is not.
    fn again(&self, template: usize, age_ms: u64, h: &HttpStats, out: &mut Vec<u8>) -> bool {
        if self.template != template || !steady(&self.stats, h) {
            return false;
        }
        // The gzip count, then the age: the order `each` writes them in.
        let [a, g] = &self.spots;
        if g.end > a.start {
            return false;
        }
        let mut number = [0u8; F64_MAX_LEN];
        out.extend_from_slice(&self.text[..g.start]);
        // A count below 2^53 is spelled as its digits: no float to test.
        let gzipped = h.server.gzipped;
        let n = match gzipped < 1 << 53 {
            true => digits_into(gzipped, &mut number),
            false => spell_f64(gzipped as f64, &mut number),
        };
        out.extend_from_slice(&number[..n]);
        out.extend_from_slice(&self.text[g.end..a.start]);
        let n = millis(age_ms, &mut number);
        out.extend_from_slice(&number[..n]);
        out.extend_from_slice(&self.text[a.end..]);
        true
    }
}

/// [`spell_f64`]'s spelling of `ms` milliseconds in seconds, from
/// integers alone below 10^9 seconds: the general spelling of a fraction
/// cost a fifth of a fill.
fn millis(ms: u64, buf: &mut [u8; F64_MAX_LEN]) -> usize {
    if ms >= 1_000_000_000_000 {
        return spell_f64(ms as f64 / 1000.0, buf);
    }
    let n = digits_into(ms / 1000, buf);
    let f = ms % 1000;
    // Three decimals, less the trailing zeros.
    let digits = match f {
        0 => return n,
        f if f % 100 == 0 => 1,
        f if f % 10 == 0 => 2,
        _ => 3,
    };
    let three = [f / 100, f / 10 % 10, f % 10].map(|d| b'0' + d as u8);
    buf[n] = b'.';
    buf[n + 1..n + 1 + digits].copy_from_slice(&three[..digits]);
    n + 1 + digits
}

/// A template per format, with and without the server's counts.
static TEMPLATES: [OnceLock<Template>; 4] = [const { OnceLock::new() }; 4];

/// Writes the series of a scrape served at `age_ms` milliseconds of its
/// snapshot, with the server's counts where there is a server, and says
/// where (from where it began) the two series that change on every
/// scrape begin, and which text precedes them.
pub(super) fn render(
    out: &mut Vec<u8>,
    format: Format,
    age_ms: u64,
    http: Option<&HttpStats>,
) -> Steady {
    let age = age_ms as f64 / 1000.0;
    let om = format == Format::OpenMetrics;
    let k = usize::from(om) * 2 + usize::from(http.is_some());
    let template = TEMPLATES[k].get_or_init(|| Template::new(format, http.is_some()));
    let Some(h) = http else {
        if template.fill(age, http, out).is_none() {
            written(&mut super::writer(out, format, &mut []), age, http, |_| {});
        }
        return Steady::default();
    };
    LAST.with_borrow_mut(|last| {
        if let Some(l) = last.as_ref()
            && l.again(k, age_ms, h, out)
        {
            return Steady {
                at: l.tail,
                text: Some(l.id),
            };
        }
        let start = out.len();
        let Some((spots, tail)) = template.fill(age, http, out) else {
            written(&mut super::writer(out, format, &mut []), age, http, |_| {});
            return Steady::default();
        };
        let mut text = last.take().map(|l| l.text).unwrap_or_default();
        text.clear();
        text.extend_from_slice(&out[start..]);
        let id = TEXTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        *last = Some(Last {
            template: k,
            stats: *h,
            text,
            spots,
            tail,
            id,
        });
        Steady {
            at: tail,
            text: Some(id),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Evicted, HandshakeError, ServerStats};

    /// The series written line by line, as the template stands for.
    fn lines(format: Format, age: f64, http: Option<&HttpStats>) -> Vec<u8> {
        let mut out = b"before\n".to_vec();
        written(
            &mut super::super::writer(&mut out, format, &mut []),
            age,
            http,
            |_| {},
        );
        out
    }

    #[test]
    fn a_filled_template_is_the_series_written_line_by_line() {
        let mut busy = HttpStats {
            server: ServerStats {
                open: 1_000_000,
                gzipped: u64::MAX,
                accept_paused_seconds: 0.125,
                ..ServerStats::default()
            },
            pages_refused: 3,
            ..HttpStats::default()
        };
        busy.server.evicted.add(Evicted::StalledWrite, 17);
        busy.server
            .tls_handshake_errors
            .add(HandshakeError::Closed, 2);
        let quiet = HttpStats::default();
        for format in [Format::Text, Format::OpenMetrics] {
            for (age, http) in [(0, None), (12_345, Some(&quiet)), (1, Some(&busy))] {
                let mut out = b"before\n".to_vec();
                // Twice: the first makes the template, the second fills it.
                for _ in 0..2 {
                    out.truncate(7);
                    render(&mut out, format, age, http);
                    let want = lines(format, age as f64 / 1000.0, http);
                    assert_eq!(
                        String::from_utf8_lossy(&out),
                        String::from_utf8_lossy(&want)
                    );
                }
            }
        }
        // Every value has its slot: a count shows where it was 0.
        let text = String::from_utf8(lines(Format::Text, 0.5, Some(&busy))).unwrap();
        for line in [
            "gpu_exporter_snapshot_age_seconds 0.5\n",
            "gpu_exporter_http_connections_open 1000000\n",
            "{reason=\"stalled_write\"} 17\n",
            "{reason=\"closed\"} 2\n",
            "gpu_exporter_http_pages_refused_total 3\n",
        ] {
            assert!(text.contains(line), "{line}{text}");
        }
    }

    #[test]
    fn series_other_than_the_templates_are_written_line_by_line() {
        let t = Template::new(Format::Text, false);
        let http = HttpStats::default();
        let mut out = b"kept".to_vec();
        // The template has the age alone; these have the server's counts.
        assert!(t.fill(1.0, Some(&http), &mut out).is_none());
        assert_eq!(out, b"kept", "nothing left of the attempt");
        assert!(t.fill(1.0, None, &mut out).is_some());
        assert!(out.ends_with(b"gpu_exporter_snapshot_age_seconds 1\n"));
        let t = Template::new(Format::Text, true);
        assert!(
            t.fill(1.0, None, &mut out).is_none(),
            "fewer series than slots"
        );
    }

    #[test]
    fn milliseconds_are_spelled_as_spell_f64_spells_their_seconds() {
        let near = |at: u64| at.saturating_sub(2_000)..at + 2_000;
        let ms = (0..200_000)
            .chain(near(999_999_999_000))
            .chain(near(1_000_000_000_000));
        for ms in ms.chain([4_000_000_000_000, 9_007_199_254_740_993, u64::MAX]) {
            let (mut ours, mut theirs) = ([0; F64_MAX_LEN], [0; F64_MAX_LEN]);
            let (n, m) = (
                millis(ms, &mut ours),
                spell_f64(ms as f64 / 1000.0, &mut theirs),
            );
            assert_eq!(ours[..n], theirs[..m], "{ms}");
        }
    }

    #[test]
    fn what_changes_on_every_scrape_comes_last_and_is_said_where() {
        let mut h = HttpStats::default();
        h.server.open = 2;
        for format in [Format::Text, Format::OpenMetrics] {
            let render_at = |age, h: Option<&HttpStats>| {
                let mut out = b"before\n".to_vec();
                let steady = render(&mut out, format, age, h);
                (out[7..].to_vec(), steady.at, steady.text)
            };
            // Without a server, the age is all that changes.
            let (text, at, id) = render_at(1_500, None);
            assert!(text.starts_with(b"# HELP gpu_exporter_snapshot_age_seconds "));
            assert_eq!((at, id), (0, None));
            // With one, the gzip count then the age: what precedes them
            // is the same text whatever those two are, from a fill or a
            // fill again, and is said to be.
            let mut last: Option<(Vec<u8>, Option<u64>)> = None;
            for (age, gzipped) in [(1_000, 0), (2_345, 1), (60_000, 77), (1, 1 << 60)] {
                h.server.gzipped = gzipped;
                let (text, at, id) = render_at(age, Some(&h));
                let s = String::from_utf8_lossy(&text[at..]).into_owned();
                assert!(
                    s.starts_with("gpu_exporter_http_gzipped_responses_total "),
                    "{s}"
                );
                assert!(
                    s.contains("# HELP gpu_exporter_snapshot_age_seconds"),
                    "{s}"
                );
                let before = String::from_utf8_lossy(&text[..at]).into_owned();
                assert!(
                    before
                        .lines()
                        .all(|l| l.starts_with('#') || !l.contains("gzipped"))
                );
                assert!(!before.contains("snapshot_age"), "{before}");
                assert!(id.is_some());
                if let Some((l, was)) = &last {
                    assert_eq!((&text[..at], id), (&l[..], *was), "{format:?}");
                }
                last = Some((text[..at].to_vec(), id));
            }
            // Another count: other text before them, and another id.
            h.server.open = 3;
            let (text, at, id) = render_at(1_000, Some(&h));
            let (l, was) = last.unwrap();
            assert_ne!(&text[..at], &l[..]);
            assert_ne!(id, was);
            h.server.open = 2;
        }
    }

    #[test]
    fn a_fill_again_is_the_series_written_line_by_line() {
        let mut h = HttpStats::default();
        // The age and the gzip count move on every scrape, the others
        // at times: each row is rendered as a fill again where it can be.
        let rows = [(1_000, 0, 3, 0), (2_500, 1, 3, 0), (2_500, 7, 3, 0)];
        let rows = rows
            .into_iter()
            .chain([(3_000, 7, 4, 0), (1, 8, 4, 2), (4e12 as u64, 9, 4, 2)]);
        for format in [Format::Text, Format::OpenMetrics] {
            for (age, gzipped, open, evicted) in rows.clone() {
                h.server.gzipped = gzipped;
                h.server.open = open;
                h.server.evicted = Default::default();
                h.server.evicted.add(Evicted::StalledWrite, evicted);
                let mut out = b"before\n".to_vec();
                render(&mut out, format, age, Some(&h));
                let want = lines(format, age as f64 / 1000.0, Some(&h));
                assert_eq!(
                    String::from_utf8_lossy(&out),
                    String::from_utf8_lossy(&want)
                );
                // What it renders from next: these counts, this format.
                let kept =
                    LAST.with_borrow(|l| l.as_ref().map(|l| (l.stats.server.open, l.template)));
                let k = usize::from(format == Format::OpenMetrics) * 2 + 1;
                assert_eq!(kept, Some((open, k)));
                // It fills again at another age and gzip count, and not
                // with another count changed.
                h.server.gzipped += 1;
                let (mut again, want) = (
                    Vec::new(),
                    lines(format, age as f64 / 1000.0 + 1.0, Some(&h)),
                );
                let last = |h: &HttpStats, out: &mut Vec<u8>| {
                    LAST.with_borrow(|l| l.as_ref().unwrap().again(k, age + 1_000, h, out))
                };
                assert!(last(&h, &mut again));
                assert_eq!(
                    String::from_utf8_lossy(&again),
                    String::from_utf8_lossy(&want[7..])
                );
                h.server.open += 1;
                assert!(!last(&h, &mut again));
            }
        }
    }
}
