//! The series a scrape writes for itself (the snapshot's age, the HTTP
//! server's counts): the same text on every scrape but for their numbers.
//! So that text is written once per format into a template, and a scrape
//! copies it with its numbers spelled in: about a tenth of what writing
//! each head and line again cost.

use super::writer::Writer;
use super::{Format, HttpStats};
use base::numbers::{F64_MAX_LEN, spell_f64};
use model::catalogue::{
    Family, HTTP_ACCEPT_PAUSED, HTTP_EVICTED, HTTP_GZIPPED, HTTP_OPEN, HTTP_PAGES_REFUSED,
    SNAPSHOT_AGE, TLS_HANDSHAKE_ERRORS,
};
use model::reason::Reason;
use std::sync::OnceLock;

/// One series: its family, its one label (`reason`) if any, its value.
type Series = (&'static Family, Option<&'static str>, f64);

/// The series in output order: the age, then the server's counts where
/// there is a server. Every reason is written, counted or not, so the
/// series are the same on every scrape.
fn each(age: f64, http: Option<&HttpStats>, f: &mut impl FnMut(Series)) {
    f((&SNAPSHOT_AGE, None, age));
    let Some(http) = http else { return };
    let h = &http.server;
    f((&HTTP_OPEN, None, h.open as f64));
    for (r, n) in h.evicted.each() {
        f((&HTTP_EVICTED, Some(r.label()), n as f64));
    }
    f((&HTTP_ACCEPT_PAUSED, None, h.accept_paused_seconds));
    f((&HTTP_GZIPPED, None, h.gzipped as f64));
    f((&HTTP_PAGES_REFUSED, None, http.pages_refused as f64));
    for (r, n) in h.tls_handshake_errors.each() {
        f((&TLS_HANDSHAKE_ERRORS, Some(r.label()), n as f64));
    }
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
}

impl Template {
    fn new(format: Format, http: bool) -> Template {
        let (mut text, mut slots) = (Vec::new(), Vec::new());
        let mut w = super::writer(&mut text, format, &mut []);
        let stats = HttpStats::default();
        // Each line ends in its value, "0", and a newline.
        written(&mut w, 0.0, http.then_some(&stats), |w| {
            slots.push(w.out.len() - 2)
        });
        Template { text, slots, http }
    }

    /// Writes the series into `out` from the template; false, with `out`
    /// as it was, where they are not the template's.
    /// Each series is matched to its slot by its place alone: comparing
    /// families and reasons cost more than the rest of the fill.
    fn fill(&self, age: f64, http: Option<&HttpStats>, out: &mut Vec<u8>) -> bool {
        if http.is_some() != self.http {
            return false;
        }
        let (start, mut from, mut slots) = (out.len(), 0, self.slots.iter());
        out.reserve(self.text.len() + self.slots.len() * F64_MAX_LEN);
        let mut same = true;
        each(age, http, &mut |(_, _, v)| match slots.next() {
            Some(&at) => {
                // Most are 0 (nothing evicted, no handshake failed): the
                // template's own 0 stays, copied with the text around it.
                if v.to_bits() == 0 {
                    return;
                }
                out.extend_from_slice(&self.text[from..at]);
                let mut number = [0u8; F64_MAX_LEN];
                let n = spell_f64(v, &mut number);
                out.extend_from_slice(&number[..n]);
                from = at + 1;
            }
            None => same = false,
        });
        if !same || slots.next().is_some() {
            out.truncate(start);
            return false;
        }
        out.extend_from_slice(&self.text[from..]);
        true
    }
}

/// A template per format, with and without the server's counts.
static TEMPLATES: [OnceLock<Template>; 4] = [const { OnceLock::new() }; 4];

/// Writes the series of a scrape served at `age` seconds of its snapshot,
/// with the server's counts where there is a server.
pub(super) fn render(out: &mut Vec<u8>, format: Format, age: f64, http: Option<&HttpStats>) {
    let om = format == Format::OpenMetrics;
    let k = usize::from(om) * 2 + usize::from(http.is_some());
    let template = TEMPLATES[k].get_or_init(|| Template::new(format, http.is_some()));
    if !template.fill(age, http, out) {
        written(&mut super::writer(out, format, &mut []), age, http, |_| {});
    }
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
            for (age, http) in [(0.0, None), (12.345, Some(&quiet)), (1e-3, Some(&busy))] {
                let mut out = b"before\n".to_vec();
                // Twice: the first makes the template, the second fills it.
                for _ in 0..2 {
                    out.truncate(7);
                    render(&mut out, format, age, http);
                    let want = lines(format, age, http);
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
        assert!(!t.fill(1.0, Some(&http), &mut out));
        assert_eq!(out, b"kept", "nothing left of the attempt");
        assert!(t.fill(1.0, None, &mut out));
        assert!(out.ends_with(b"gpu_exporter_snapshot_age_seconds 1\n"));
        let t = Template::new(Format::Text, true);
        assert!(!t.fill(1.0, None, &mut out), "fewer series than slots");
    }
}
