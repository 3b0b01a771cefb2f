//! The status page's engines: each served model's SLO standing, and each
//! endpoint's state and reason.

use super::*;

pub(super) fn models(p: &Published, fresh: Freshness, out: &mut Vec<u8>) {
    let (_, models) = p.snapshot.served_models(fresh);
    if models.is_empty() {
        return;
    }
    out.extend_from_slice(
        b"<h2>Served models (TTFT SLO)</h2>\n<table id=\"models\"><tr><th>model</th>\
          <th>engine</th><th>requests</th><th>first token in time</th><th>judged within</th>\
          <th>not failed by the engine</th></tr>\n",
    );
    for m in models {
        let h = &m.ttft_seconds;
        out.extend_from_slice(b"<tr><td>");
        html_escape(out, &m.name);
        out.extend_from_slice(b"</td><td>");
        match m.endpoint.and_then(|i| p.snapshot.engines.get(i)) {
            Some(e) => {
                out.extend_from_slice(e.engine.map_or("?", |e| e.name()).as_bytes());
                out.extend_from_slice(b" at ");
                html_escape(out, &e.url);
            }
            None => out.extend_from_slice(b"simulated"),
        }
        out.extend_from_slice(b"</td><td class=\"n\">");
        // A model its engine counts but does not time: its answers.
        let timed = !h.buckets.is_empty();
        let answered = m.outcomes.map(|o| o.answered).filter(|_| !timed);
        write_f64(out, answered.unwrap_or(h.count()).round());
        out.extend_from_slice(b"</td><td class=\"n\">");
        match m.good() {
            Some(good) if h.count() > 0.0 => {
                write_f64(out, (good / h.count() * 10_000.0).round() / 100.0);
                out.push(b'%');
            }
            _ => out.extend_from_slice(b"&ndash;"),
        }
        out.extend_from_slice(b"</td><td class=\"n\">");
        match m.good_within {
            Some(s) => {
                write_f64(out, (s * 1e6).round() / 1e3);
                out.extend_from_slice(b" ms");
            }
            None if !timed => out.extend_from_slice(b"not timed"),
            None => out.extend_from_slice(b"no bound"),
        }
        out.extend_from_slice(b"</td><td class=\"n\">");
        // The availability SLO's share: "–" where the engine counts no
        // failure, or has answered nothing yet.
        match m.outcomes.filter(|o| o.answered > 0.0) {
            Some(o) => {
                let share = 1.0 - o.failed / o.answered;
                write_f64(out, (share * 10_000.0).round() / 100.0);
                out.push(b'%');
            }
            None => out.extend_from_slice(b"&ndash;"),
        }
        out.extend_from_slice(b"</td></tr>\n");
    }
    out.extend_from_slice(b"</table>\n");
}

/// Each engine endpoint given: its engine, whether its last read gave its
/// models, and why not, as the reader said it (EngineEndpointDown).
pub(super) fn endpoints(engines: &[crate::snapshot::EngineEndpoint], out: &mut Vec<u8>) {
    if engines.is_empty() {
        return;
    }
    out.extend_from_slice(
        b"<h2>Engine endpoints</h2>\n<table id=\"endpoints\"><tr><th>endpoint</th>\
          <th>engine</th><th>state</th><th>why</th></tr>\n",
    );
    for e in engines {
        out.extend_from_slice(b"<tr><td>");
        html_escape(out, &e.url);
        out.extend_from_slice(b"</td><td>");
        out.extend_from_slice(e.engine.map_or("?", |e| e.name()).as_bytes());
        let state: &[u8] = match (e.up, e.reason) {
            (true, _) => b"</td><td>up</td><td>",
            (false, None) => b"</td><td>not read yet</td><td>",
            (false, Some(r)) => {
                out.extend_from_slice(b"</td><td class=\"firing\">down: ");
                out.extend_from_slice(r.label().as_bytes());
                b"</td><td>"
            }
        };
        out.extend_from_slice(state);
        html_escape(out, e.why.as_deref().unwrap_or(""));
        out.extend_from_slice(b"</td></tr>\n");
    }
    out.extend_from_slice(b"</table>\n");
}
