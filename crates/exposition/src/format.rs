//! Content negotiation: which of the two formats a scrape gets.

use model::{Collector, Collectors};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    OpenMetrics,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// The format a scrape of the collectors `on` gets. The dcgm
    /// collector's alone (the drop-in: `--collector.disable-defaults
    /// --collector.dcgm`, or `collect[]=dcgm`) is text 0.0.4 whatever the
    /// client offers, as dcgm-exporter serves it: OpenMetrics wants a
    /// counter's samples to end in `_total`, which dcgm-exporter's names do
    /// not, so Prometheus would type those counters `unknown`. A server may
    /// choose; with anything else on, the client's Accept decides.
    pub fn for_scrape(accept: Option<&[u8]>, on: Collectors) -> Format {
        match on == Collectors::NONE.with(Collector::Dcgm) {
            true => Format::Text,
            false => Format::negotiate(accept),
        }
    }

    /// Picks the format from an `Accept` header by q-value. OpenMetrics
    /// wins only when a range naming it ranks highest; anything else, a
    /// missing header included, gets text 0.0.4.
    pub fn negotiate(accept: Option<&[u8]>) -> Format {
        let Some(accept) = accept else {
            return Format::Text;
        };
        let mut best = (Format::Text, -1.0f32);
        for range in accept.split(|&b| b == b',') {
            let mut parts = range.split(|&b| b == b';').map(|p| p.trim_ascii());
            let media = parts.next().unwrap_or_default();
            let mut q = 1.0f32;
            let mut version_ok = true;
            for p in parts {
                let (k, v) = match p.iter().position(|&b| b == b'=') {
                    Some(i) => (p[..i].trim_ascii(), p[i + 1..].trim_ascii()),
                    None => (p, &b""[..]),
                };
                if k.eq_ignore_ascii_case(b"q") {
                    q = std::str::from_utf8(v)
                        .ok()
                        .and_then(|v| v.parse().ok())
                        .filter(|q: &f32| (0.0..=1.0).contains(q))
                        .unwrap_or(0.0);
                } else if k.eq_ignore_ascii_case(b"version") {
                    version_ok = v == b"1.0.0" || v == b"0.0.1";
                }
            }
            let format =
                if media.eq_ignore_ascii_case(b"application/openmetrics-text") && version_ok {
                    Format::OpenMetrics
                } else {
                    Format::Text
                };
            // Ties keep the first range listed.
            if q > 0.0 && q > best.1 {
                best = (format, q);
            }
        }
        best.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation() {
        use Format::*;
        let cases: [(&[u8], Format); 12] = [
            (b"application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1", OpenMetrics),
            (b"application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2", OpenMetrics),
            (b"application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2", OpenMetrics),
            (b"text/plain;version=0.0.4;q=0.9,application/openmetrics-text;q=0.5", Text),
            (b"text/plain", Text),
            (b"*/*", Text),
            (b"", Text),
            (b"garbage;;;==,", Text),
            (b"application/openmetrics-text; version=1.0.0", OpenMetrics),
            (b"application/openmetrics-text;version=2.0.0", Text),
            (b"application/openmetrics-text;q=0", Text),
            (b"APPLICATION/OpenMetrics-Text ; q=0.8, text/plain;q=0.7", OpenMetrics),
        ];
        for (accept, want) in cases {
            assert_eq!(
                Format::negotiate(Some(accept)),
                want,
                "{}",
                String::from_utf8_lossy(accept)
            );
        }
        assert_eq!(Format::negotiate(None), Text);
    }

    #[test]
    fn the_dcgm_drop_in_is_always_text() {
        let om = Some(&b"application/openmetrics-text;version=1.0.0"[..]);
        let dcgm = Collectors::NONE.with(Collector::Dcgm);
        assert_eq!(Format::for_scrape(om, dcgm), Format::Text);
        assert_eq!(Format::for_scrape(None, dcgm), Format::Text);
        for on in [
            Collectors::DEFAULT,
            dcgm.with(Collector::Xid),
            Collectors::NONE,
        ] {
            assert_eq!(Format::for_scrape(om, on), Format::OpenMetrics);
        }
    }
}
