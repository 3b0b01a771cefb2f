//! The status page's engines: each served model's SLO standing, and each
//! endpoint's state and reason.

use super::*;

pub(super) fn models(p: &Published, fresh: Freshness, out: &mut Vec<u8>) {
    let (_, models) = p.snapshot.served_models(fresh);
    if models.is_empty() {
        return;
    }
    // In time now: over the window the burn pages look at. The engine's
    // counters alone say only since it started (57% for a model good now).
    let recent = &p.recent;
    out.extend_from_slice(
        b"<h2>Served models (TTFT SLO)</h2>\n<table id=\"models\"><tr><th>model</th>\
          <th>engine</th><th>requests</th><th>first token in time, last ",
    );
    match recent.window.is_empty() {
        true => out.extend_from_slice(b"window (no TTFT burn rule)"),
        false => html_escape(out, &recent.window),
    }
    out.extend_from_slice(
        b"</th><th>first token in time, lifetime</th><th>judged within</th>\
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
        percent(out, recent.good_share(&m.name));
        out.extend_from_slice(b"</td><td class=\"n\">");
        let lifetime = m.good().filter(|_| h.count() > 0.0);
        percent(out, lifetime.map(|good| good / h.count()));
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
        let outcomes = m.outcomes.filter(|o| o.answered > 0.0);
        percent(out, outcomes.map(|o| 1.0 - o.failed / o.answered));
        out.extend_from_slice(b"</td></tr>\n");
    }
    out.extend_from_slice(b"</table>\n");
}

/// A share as a percentage to two places, or "–" where there is none.
fn percent(out: &mut Vec<u8>, share: Option<f64>) {
    match share {
        Some(s) => {
            write_f64(out, (s * 10_000.0).round() / 100.0);
            out.push(b'%');
        }
        None => out.extend_from_slice(b"&ndash;"),
    }
}

/// Each engine endpoint given: its engine, whether its last read gave its
/// models, and why not, as the reader said it (EngineEndpointDown).
pub(super) fn endpoints(engines: &[model::EngineEndpoint], out: &mut Vec<u8>) {
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
