//! The status page at `/`: the fleet, the alerts and the exporter's own
//! health as one server-rendered HTML page, for nodes with no Grafana.
//! No JavaScript; it reloads itself.
//!
//! Like a scrape, it renders the published snapshot straight into the
//! response buffer and allocates nothing once that buffer has grown:
//! numbers are spelled on the stack, summaries are expanded while they are
//! written, and every string from data or flags is HTML-escaped on the way.

use crate::redact::without_paths;
use alerts::{Alert, Severity, State, Subject, WORKLOADS, expand_into};
use base::numbers::{write_f64, write_u64};
use base::units::GIB;
use model::SourceKind;
use model::readings::{
    self,
    status::{Cell, Number, columns, number},
};
use model::{Bounds, Freshness, Gpu, Readings, Snapshot};
use poller::Published;
use std::time::Instant;

mod engines;
use engines::{endpoints, models};

/// Seconds between reloads: often enough to follow an incident, rarely
/// enough that the page costs nothing.
const REFRESH_SECONDS: u64 = 5;

/// Escapes the five characters that matter in HTML text and quoted
/// attributes. Byte-wise is safe: they never occur inside a UTF-8 sequence.
pub fn html_escape(out: &mut Vec<u8>, s: &str) {
    for &b in s.as_bytes() {
        match b {
            b'&' => out.extend_from_slice(b"&amp;"),
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            b'"' => out.extend_from_slice(b"&quot;"),
            b'\'' => out.extend_from_slice(b"&#39;"),
            _ => out.push(b),
        }
    }
}

const STYLE: &str = "body{font:14px/1.4 sans-serif;margin:1em 2em;color:#222}\
h1{font-size:1.4em;margin:.2em 0}h2{font-size:1.1em;margin:1.2em 0 .3em}\
table{border-collapse:collapse}th,td{padding:3px 10px;border-bottom:1px solid #ddd;text-align:left}\
th{background:#eee}td.n{text-align:right;font-variant-numeric:tabular-nums}\
small{color:#666}.sim{background:#c00;color:#fff;font-weight:bold;font-size:1.5em;padding:.4em .8em;letter-spacing:.1em}\
.err{background:#fde0dc;padding:.4em .8em}.bad{color:#c00;font-weight:bold}\
tr.mig td:first-child{padding-left:2em}.page{background:#c00;color:#fff;padding:0 6px}\
.ticket{background:#e8a200;color:#000;padding:0 6px}.pending{color:#666;font-style:italic}";

/// The page's own headers: no content sniffing, and a policy that runs no
/// script and admits only the page's own style, by its hash (SHA-256 of
/// [`STYLE`], checked by a test). The web config's headers of the same
/// names win.
pub const HEADERS: &str = "X-Content-Type-Options: nosniff\r\n\
    Content-Security-Policy: default-src 'none'; \
    style-src 'sha256-wYCfiVe1/rf6XVssilv9wwN+20fwlDbFYn0RKPI0xc0='; \
    base-uri 'none'; form-action 'none'; frame-ancestors 'none'\r\n";

/// Writes the whole page for `p` into `out`. `telemetry_path` and
/// `runbook_base` are flags, so they are escaped like data.
pub fn render(
    p: &Published,
    telemetry_path: &str,
    runbook_base: &str,
    bounds: Bounds,
    now: Instant,
    out: &mut Vec<u8>,
) {
    let s = &p.snapshot;
    let fresh = s.freshness(now, bounds);
    out.extend_from_slice(
        b"<!doctype html>\n<html><head><meta charset=\"utf-8\">\
          <meta http-equiv=\"refresh\" content=\"",
    );
    write_u64(out, REFRESH_SECONDS);
    out.extend_from_slice(b"\"><title>gpu-exporter</title><style>");
    out.extend_from_slice(STYLE.as_bytes());
    out.extend_from_slice(b"</style></head>\n<body>\n");
    if s.source == SourceKind::Sim {
        out.extend_from_slice(
            b"<div class=\"sim\" id=\"simulated\">SIMULATED \xe2\x80\x94 \
              these readings come from the simulator, not real GPUs</div>\n",
        );
    }
    standing(s, fresh, now, out);
    notices(p, fresh, out);

    gpus(p, fresh.hidden, out);
    alerts(p, runbook_base, out);
    models(p, fresh, out);
    endpoints(&p.snapshot.engines, out);

    out.extend_from_slice(b"<p><a href=\"");
    html_escape(out, telemetry_path);
    out.extend_from_slice(b"\">");
    html_escape(out, telemetry_path);
    out.extend_from_slice(
        b"</a> &middot; <a href=\"/alerts\">/alerts</a> &middot; \
          <a href=\"/healthz\">/healthz</a> &middot; <a href=\"/readyz\">/readyz</a></p>\n\
          </body></html>\n",
    );
}

/// The source, version, collection and snapshot age, in one line.
fn standing(s: &Snapshot, fresh: Freshness, now: Instant, out: &mut Vec<u8>) {
    out.extend_from_slice(b"<h1>gpu-exporter</h1>\n<p id=\"health\">source <b>");
    html_escape(out, s.source.as_str());
    out.extend_from_slice(b"</b> &middot; version ");
    html_escape(out, env!("CARGO_PKG_VERSION"));
    // One word for the collection, the one /metrics and /readyz say: a
    // stall outranks how the last collection ended.
    out.extend_from_slice(b" &middot; collection ");
    match &s.error {
        _ if fresh.stalled => out.extend_from_slice(b"<b class=\"bad\">stalled</b>"),
        None => {
            out.extend_from_slice(b"<b>ok</b> in ");
            ms(out, s.collect_duration.as_secs_f64());
        }
        Some(_) if s.is_starting() => out.extend_from_slice(b"<b>starting</b>"),
        Some(_) => out.extend_from_slice(b"<b class=\"bad\">failing</b>"),
    }
    out.extend_from_slice(b" &middot; snapshot age ");
    let age = now.saturating_duration_since(s.published).as_secs_f64();
    write_f64(out, (age * 10.0).round() / 10.0);
    out.extend_from_slice(b" s</p>\n");
}

/// What is wrong, or not settled yet: the last error, no GPUs, the
/// replay, readings withheld.
fn notices(p: &Published, fresh: Freshness, out: &mut Vec<u8>) {
    let s = &p.snapshot;
    match &s.error {
        Some(e) if s.is_starting() => {
            out.extend_from_slice(b"<p id=\"error\">");
            without_paths(e, |s| html_escape(out, s));
            out.extend_from_slice(b"</p>\n");
        }
        Some(e) => {
            out.extend_from_slice(b"<p class=\"err\" id=\"error\">last collection failed: ");
            without_paths(e, |s| html_escape(out, s));
            out.extend_from_slice(b"</p>\n");
        }
        None if s.gpus.is_empty() && s.source != SourceKind::Sim => {
            out.extend_from_slice(
                b"<p class=\"err\" id=\"no-gpus\">no GPUs: the source is up but reports \
                  none (a driver without GPUs, or none visible to this container)</p>\n",
            );
        }
        None => {}
    }
    if let Some(r) = p.replay {
        out.extend_from_slice(
            b"<p class=\"err\" id=\"replaying\">alert history is still replaying (",
        );
        write_u64(out, r.done);
        out.extend_from_slice(b" of ");
        write_u64(out, r.total);
        out.extend_from_slice(b" steps): the alerts below are not settled yet</p>\n");
    }
    if fresh.hidden {
        out.extend_from_slice(
            b"<p class=\"err\" id=\"hidden\">collections have failed or stalled for longer \
              than --collect.max-stale: the GPUs' last readings are withheld</p>\n",
        );
    }
}

fn gpus(p: &Published, hidden: bool, out: &mut Vec<u8>) {
    let gpus = if hidden {
        &[][..]
    } else {
        &p.snapshot.gpus[..]
    };
    out.extend_from_slice(b"<h2>GPUs (");
    write_u64(out, gpus.len() as u64);
    out.extend_from_slice(b")</h2>\n<table id=\"gpus\"><tr><th>gpu</th><th>model</th>");
    for (_, c) in columns() {
        out.extend_from_slice(b"<th");
        if !c.title.is_empty() {
            out.extend_from_slice(b" title=\"");
            html_escape(out, c.title);
            out.push(b'"');
        }
        out.push(b'>');
        out.extend_from_slice(c.head.as_bytes());
        out.extend_from_slice(b"</th>");
    }
    out.extend_from_slice(b"<th>up</th><th>health</th><th>used by</th></tr>\n");
    if gpus.is_empty() {
        // The readings' columns and the five of every row.
        out.extend_from_slice(b"<tr><td colspan=\"");
        write_u64(out, columns().count() as u64 + 5);
        out.extend_from_slice(b"\">no GPUs in this snapshot</td></tr>\n");
    }
    for g in gpus {
        out.extend_from_slice(b"<tr id=\"gpu-");
        write_u64(out, g.index as u64);
        out.extend_from_slice(b"\"><td class=\"n\">");
        write_u64(out, g.index as u64);
        identity(out, &g.model, &g.uuid);
        readings(&g.readings, out);
        out.extend_from_slice(if g.up {
            b"<td>up</td>".as_slice()
        } else {
            b"<td class=\"bad\">LOST</td>".as_slice()
        });
        health(out, g.up, &g.readings);
        users(out, &g.readings);
        for m in &g.mig {
            // Indented under its GPU; MIG instances have no `up` of their own.
            out.extend_from_slice(b"<tr class=\"mig\" id=\"gpu-");
            write_u64(out, g.index as u64);
            out.extend_from_slice(b"-mig-");
            write_u64(out, m.gpu_instance_id as u64);
            out.extend_from_slice(b"\"><td>MIG ");
            write_u64(out, m.gpu_instance_id as u64);
            identity(out, &m.profile, &m.uuid);
            readings(&m.readings, out);
            out.extend_from_slice(b"<td></td><td></td>");
            users(out, &m.readings);
        }
    }
    out.extend_from_slice(b"</table>\n");
}

/// Closes a row's first cell and writes the name and UUID cell.
fn identity(out: &mut Vec<u8>, name: &str, uuid: &str) {
    out.extend_from_slice(b"</td><td>");
    html_escape(out, name);
    out.extend_from_slice(b"<br><small>");
    html_escape(out, uuid);
    out.extend_from_slice(b"</small></td>");
}

/// The reading cells of one row, in the columns their declarations give
/// (`model::readings::status`), an en dash for each absent reading.
fn readings(r: &Readings, out: &mut Vec<u8>) {
    for (reading, c) in columns() {
        match c.cell {
            Cell::Value(n) => cell(out, reading.value(r), n),
            Cell::Over(of, n) => {
                let b = readings::of(of).and_then(|o| o.value(r));
                pair(out, reading.value(r), b, n);
            }
            Cell::Throttled => out.extend_from_slice(match r.throttled() {
                Some(true) => b"<td class=\"bad\">yes</td>".as_slice(),
                Some(false) => b"<td>no</td>".as_slice(),
                None => b"<td>&ndash;</td>".as_slice(),
            }),
            Cell::CriticalXid => cell(out, r.critical_xid_total(), number(1.0, 0, "")),
        }
    }
}

/// The health cell and the row's end: `ok`, or why not, worst first:
/// what the driver asks for, memory repairs, links, memory heat.
fn health(out: &mut Vec<u8>, up: bool, r: &Readings) {
    let h = &r.health;
    let start = out.len();
    out.extend_from_slice(b"<td class=\"bad\">");
    let body = out.len();
    let why = |out: &mut Vec<u8>, text: &[u8]| {
        if out.len() > body {
            out.extend_from_slice(b"; ");
        }
        out.extend_from_slice(text);
    };
    if !up {
        why(out, b"lost: not answering");
    }
    match h.recovery_action {
        Some(1.0) => why(out, b"driver asks for a GPU reset"),
        Some(a) if a > 1.0 => {
            why(out, b"driver asks for a reboot or drain (recovery action ");
            write_f64(out, a);
            out.push(b')');
        }
        _ => {}
    }
    if h.row_remap_failed == Some(true) {
        why(out, b"row remap failed: replace");
    }
    if h.row_remap_pending == Some(true) {
        why(out, b"row remap waits for a reset");
    }
    if h.retired_pages_pending == Some(true) {
        why(out, b"page retirement waits for a reset");
    }
    if let (Some(n), Some(up)) = (h.nvlink_links, h.nvlink_links_active)
        && up < n
    {
        why(out, b"NVLink ");
        write_f64(out, up);
        out.push(b'/');
        write_f64(out, n);
        out.extend_from_slice(b" up");
    }
    if let (Some(w), Some(max)) = (h.pcie_link_width, h.pcie_link_width_max)
        && w < max
    {
        why(out, b"PCIe x");
        write_f64(out, w);
        out.extend_from_slice(b" of x");
        write_f64(out, max);
    }
    if let (Some(t), Some(max)) = (
        r.memory_temperature_celsius,
        h.memory_temperature_max_celsius,
    ) && t > max - 5.0
    {
        why(out, b"memory near its slowdown temperature");
    }
    if out.len() == body {
        out.truncate(start);
        out.extend_from_slice(b"<td>ok");
    }
    out.extend_from_slice(b"</td>");
}

/// The last cell and the row's end: the pods, batch jobs and processes
/// using the GPU or MIG instance, one a line, or an en dash.
fn users(out: &mut Vec<u8>, r: &Readings) {
    out.extend_from_slice(b"<td class=\"who\">");
    let body = out.len();
    let line = |out: &mut Vec<u8>| {
        if out.len() > body {
            out.extend_from_slice(b"<br>");
        }
    };
    for p in &r.pods {
        line(out);
        out.extend_from_slice(b"pod ");
        html_escape(out, &p.namespace);
        out.push(b'/');
        html_escape(out, &p.pod);
        out.extend_from_slice(b" <small>");
        html_escape(out, &p.container);
        out.extend_from_slice(b"</small>");
    }
    for j in &r.jobs {
        line(out);
        out.extend_from_slice(b"job ");
        html_escape(out, j);
    }
    for p in &r.processes {
        line(out);
        match p.pid {
            Some(pid) => {
                out.extend_from_slice(b"pid ");
                write_u64(out, u64::from(pid));
            }
            None => out.extend_from_slice(b"other processes"),
        }
        if let Some(used) = p.used_bytes {
            out.extend_from_slice(b" <small>");
            rounded(out, Some(used), GIB, 1);
            out.extend_from_slice(b" GiB</small>");
        }
    }
    if out.len() == body {
        out.extend_from_slice(b"&ndash;");
    }
    out.extend_from_slice(b"</td></tr>\n");
}

/// `v / scale` rounded to `decimals` places, or an en dash.
fn rounded(out: &mut Vec<u8>, v: Option<f64>, scale: f64, decimals: i32) {
    match v {
        Some(v) => {
            let f = 10f64.powi(decimals);
            write_f64(out, (v / scale * f).round() / f);
        }
        None => out.extend_from_slice(b"&ndash;"),
    }
}

fn cell(out: &mut Vec<u8>, v: Option<f64>, n: Number) {
    out.extend_from_slice(b"<td class=\"n\">");
    rounded(out, v, n.scale, n.decimals);
    if v.is_some() {
        out.extend_from_slice(n.unit.as_bytes());
    }
    out.extend_from_slice(b"</td>");
}

fn pair(out: &mut Vec<u8>, a: Option<f64>, b: Option<f64>, n: Number) {
    out.extend_from_slice(b"<td class=\"n\">");
    if a.is_none() && b.is_none() {
        out.extend_from_slice(b"&ndash;</td>");
        return;
    }
    rounded(out, a, n.scale, n.decimals);
    out.extend_from_slice(b" / ");
    rounded(out, b, n.scale, n.decimals);
    out.extend_from_slice(n.unit.as_bytes());
    out.extend_from_slice(b"</td>");
}

/// Milliseconds to a tenth, from seconds: a simulated collection takes
/// well under one.
fn ms(out: &mut Vec<u8>, secs: f64) {
    write_f64(out, (secs * 10_000.0).round() / 10.0);
    out.extend_from_slice(b" ms");
}

fn alerts(p: &Published, runbook_base: &str, out: &mut Vec<u8>) {
    let count = |st| p.alerts.iter().filter(|a| a.state == st).count() as u64;
    out.extend_from_slice(b"<h2>Alerts (");
    write_u64(out, count(State::Firing));
    out.extend_from_slice(b" firing, ");
    write_u64(out, count(State::Pending));
    out.extend_from_slice(b" pending)</h2>\n");
    if p.alerts.is_empty() {
        out.extend_from_slice(b"<p id=\"alerts\">No alerts are pending or firing.</p>\n");
        return;
    }
    out.extend_from_slice(
        b"<table id=\"alerts\"><tr><th>severity</th><th>state</th><th>alert</th>\
          <th>subject</th><th>summary</th><th>active for</th><th>runbook</th></tr>\n",
    );
    // Pages before tickets, firing before pending; the evaluator's order
    // (rule, then subject) within each. Four passes beat a sorted copy.
    for severity in [Severity::Page, Severity::Ticket] {
        for state in [State::Firing, State::Pending] {
            for a in p.alerts.iter() {
                if a.rule.severity == severity && a.state == state {
                    let when = (p.snapshot.at, p.snapshot.process.start_time_seconds);
                    alert(a, &p.snapshot.gpus, when, runbook_base, out);
                }
            }
        }
    }
    out.extend_from_slice(b"</table>\n");
}

fn alert(
    a: &Alert,
    gpus: &[Gpu],
    (at, started): (f64, Option<f64>),
    runbook_base: &str,
    out: &mut Vec<u8>,
) {
    let (severity, state) = (a.rule.severity.as_str(), a.state.as_str());
    out.extend_from_slice(b"<tr class=\"alert ");
    out.extend_from_slice(state.as_bytes());
    // What the alert sent to Alertmanager links to (`generatorURL`).
    out.extend_from_slice(b"\" id=\"");
    a.anchor(out);
    out.extend_from_slice(b"\"><td><span class=\"");
    out.extend_from_slice(severity.as_bytes());
    out.extend_from_slice(b"\">");
    out.extend_from_slice(severity.as_bytes());
    out.extend_from_slice(b"</span></td><td class=\"");
    out.extend_from_slice(state.as_bytes());
    out.extend_from_slice(b"\">");
    out.extend_from_slice(state.as_bytes());
    out.extend_from_slice(b"</td><td><b>");
    html_escape(out, &a.rule.name);
    out.extend_from_slice(b"</b></td><td>");
    match &a.subject {
        Subject::Exporter => out.extend_from_slice(b"exporter"),
        Subject::Gpu { index, .. } => {
            out.extend_from_slice(b"gpu ");
            write_u64(out, *index as u64);
        }
        Subject::Model(name) => {
            out.extend_from_slice(b"model ");
            html_escape(out, name);
        }
        Subject::Endpoint { url, .. } => {
            out.extend_from_slice(b"endpoint ");
            html_escape(out, url);
        }
    }
    out.extend_from_slice(b"</td><td>");
    expand_into(out, &a.rule.summary, &a.subject, a.value, gpus, html_escape);
    if matches!(a.subject, Subject::Gpu { .. }) {
        // Who uses the GPU, as the rules' `workloads` annotation says.
        let start = out.len();
        out.extend_from_slice(b"<br><small class=\"who\">");
        let body = out.len();
        expand_into(out, WORKLOADS, &a.subject, a.value, gpus, html_escape);
        if out.len() == body {
            out.truncate(start);
        } else {
            out.extend_from_slice(b"</small>");
        }
    }
    out.extend_from_slice(b"</td><td class=\"n\">");
    duration(out, at - a.active_at);
    // The simulator's past is replayed before serving: an alert from
    // before this process started says so.
    if started.is_some_and(|t| a.active_at < t) {
        out.extend_from_slice(b" <small>(replayed)</small>");
    }
    out.extend_from_slice(b"</td><td><a href=\"");
    // `Rule::runbook_url` spelled into the buffer: `<base><runbook>.md`.
    html_escape(out, runbook_base);
    html_escape(out, &a.rule.runbook);
    out.extend_from_slice(b".md\">runbook</a></td></tr>\n");
}

/// `3d 4h`, `1h 2m`, `3m 4s` or `5s`: how long an alert has been active.
fn duration(out: &mut Vec<u8>, secs: f64) {
    let s = if secs.is_finite() && secs > 0.0 {
        secs as u64
    } else {
        0
    };
    let (d, h, m) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60);
    if d > 0 {
        write_u64(out, d);
        out.extend_from_slice(b"d ");
        write_u64(out, h);
        out.push(b'h');
    } else if h > 0 {
        write_u64(out, h);
        out.extend_from_slice(b"h ");
        write_u64(out, m);
        out.push(b'm');
    } else if m > 0 {
        write_u64(out, m);
        out.extend_from_slice(b"m ");
        write_u64(out, s % 60);
        out.push(b's');
    } else {
        write_u64(out, s);
        out.push(b's');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The policy's hash is the style's: a changed style with a stale hash
    /// would be a page without its style.
    #[test]
    fn the_policy_admits_the_style_by_its_hash() {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let Ok(mut child) = Command::new("openssl")
            .args(["dgst", "-sha256", "-binary"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
        else {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "openssl is required in CI"
            );
            eprintln!("SKIP: openssl is not installed (Debian: openssl)");
            return;
        };
        child
            .stdin
            .take()
            .unwrap()
            .write_all(STYLE.as_bytes())
            .unwrap();
        let digest = child.wait_with_output().unwrap().stdout;
        assert_eq!(digest.len(), 32);
        let b64 = Command::new("openssl")
            .args(["base64", "-A"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                c.stdin.take().unwrap().write_all(&digest)?;
                c.wait_with_output()
            })
            .unwrap()
            .stdout;
        let hash = format!("'sha256-{}'", String::from_utf8(b64).unwrap());
        assert!(HEADERS.contains(&hash), "{hash} not in {HEADERS}");
        assert!(HEADERS.ends_with("\r\n") && !HEADERS.contains("  "));
    }
    use alerts::{defaults, expand};
    use model::{Gpu, MigInstance, Model, Snapshot};

    fn page(p: &Published) -> String {
        let mut out = Vec::new();
        let bounds = Bounds::new(
            std::time::Duration::from_secs(1),
            std::time::Duration::from_secs(60),
        );
        render(
            p,
            "/metrics",
            "docs/runbooks/",
            bounds,
            Instant::now(),
            &mut out,
        );
        String::from_utf8(out).unwrap()
    }

    /// The text of each cell in the row with this id.
    fn cells(page: &str, id: &str) -> Vec<String> {
        let start = page
            .find(&format!("<tr id=\"{id}\""))
            .or_else(|| page.find(&format!("<tr class=\"mig\" id=\"{id}\"")))
            .unwrap_or_else(|| panic!("no row {id}"));
        let row = &page[start..start + page[start..].find("</tr>").unwrap()];
        row.split("<td")
            .skip(1)
            .map(|c| {
                let c = &c[c.find('>').unwrap() + 1..];
                c.trim_end_matches("</td>").to_string()
            })
            .collect()
    }

    fn published(gpus: Vec<Gpu>) -> Published {
        let mut snapshot = Snapshot::empty(SourceKind::Nvml);
        snapshot.gpus = gpus;
        snapshot.error = None;
        Published {
            snapshot: snapshot.into(),
            alerts: Default::default(),
            replay: None,
            recent: Default::default(),
        }
    }

    /// The snapshot of `p`, to change in a test.
    fn snap(p: &mut Published) -> &mut Snapshot {
        std::sync::Arc::make_mut(&mut p.snapshot)
    }

    /// The header says what /metrics and /readyz say: a stalled
    /// collection is "stalled", not "ok".
    #[test]
    fn the_header_tells_a_stall_as_metrics_do() {
        let mut p = published(vec![]);
        assert!(page(&p).contains("collection <b>ok</b> in "));
        snap(&mut p).finished = Instant::now() - std::time::Duration::from_secs(10);
        let stalled = page(&p);
        assert!(
            stalled.contains("collection <b class=\"bad\">stalled</b> &middot;"),
            "{stalled}"
        );
        assert!(!stalled.contains("<b>ok</b>"), "{stalled}");
    }

    /// An alert active since before this process started comes from the
    /// replayed past, and says so; a Xid count says it is no window.
    #[test]
    fn a_replayed_alert_and_the_xid_counter_say_what_they_are() {
        let rules = defaults();
        let rule = std::sync::Arc::new(rules.iter().find(|r| r.name == "GPULost").unwrap().clone());
        let alert = |active_at| Alert {
            rule: rule.clone(),
            subject: Subject::Exporter,
            state: State::Firing,
            active_at,
            fired_at: active_at,
            value: 1.0,
            muted_by: None,
        };
        let mut p = published(vec![]);
        snap(&mut p).at = 1_000_000.0;
        snap(&mut p).process.start_time_seconds = Some(999_000.0);
        p.alerts = std::sync::Arc::new(vec![alert(990_000.0), alert(999_500.0)]);
        let page = page(&p);
        assert_eq!(page.matches("(replayed)").count(), 1, "{page}");
        assert!(page.contains("2h 46m <small>(replayed)</small>"), "{page}");
        assert!(page.contains(">Xid since driver load</th>"), "{page}");
    }

    #[test]
    fn strings_from_data_are_escaped() {
        let evil = "<script>\"&'";
        let gpu = Gpu {
            model: evil.into(),
            uuid: evil.into(),
            up: true,
            mig: vec![MigInstance {
                uuid: evil.into(),
                profile: evil.into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut p = published(vec![gpu]);
        snap(&mut p).error = Some(evil.into());
        snap(&mut p).models = vec![Model {
            name: evil.into(),
            ..Default::default()
        }];
        let mut out = Vec::new();
        let bounds = Bounds::new(
            std::time::Duration::from_secs(1),
            std::time::Duration::from_secs(60),
        );
        render(&p, "/m<\"'>", evil, bounds, Instant::now(), &mut out);
        let page = String::from_utf8(out).unwrap();
        let escaped = "&lt;script&gt;&quot;&amp;&#39;";
        assert!(!page.contains("<script"), "{page}");
        assert!(!page.contains(evil));
        // model, uuid, MIG profile and uuid, error, model name.
        assert_eq!(page.matches(escaped).count(), 6, "{page}");
        assert!(page.contains("<a href=\"/m&lt;&quot;&#39;&gt;\">"));
    }

    #[test]
    fn the_models_table_gives_each_models_share_not_failed_by_its_engine() {
        use model::Outcomes;
        let mut p = published(Vec::new());
        let model = |name: &str, outcomes| Model {
            name: name.into(),
            outcomes,
            ..Default::default()
        };
        snap(&mut p).models = vec![
            model(
                "a",
                Some(Outcomes {
                    answered: 2000.0,
                    failed: 3.0,
                }),
            ),
            model("b", None),
        ];
        let page = page(&p);
        assert!(page.contains("<th>not failed by the engine</th>"), "{page}");
        let row = |name: &str| {
            let at = page.find(&format!("<tr><td>{name}</td>")).unwrap();
            page[at..at + page[at..].find("</tr>").unwrap()].to_string()
        };
        assert!(
            row("a").ends_with("<td class=\"n\">99.85%</td>"),
            "{}",
            row("a")
        );
        // Counted, not timed: its answers, and no bound to judge TTFT by.
        assert!(
            row("a").contains("<td class=\"n\">2000</td><td class=\"n\">&ndash;</td><td class=\"n\">&ndash;</td><td class=\"n\">not timed</td>"),
            "{}",
            row("a")
        );
        assert!(
            row("b").ends_with("<td class=\"n\">&ndash;</td>"),
            "{}",
            row("b")
        );
    }

    #[test]
    fn pods_jobs_and_processes_are_listed_escaped() {
        use model::{GpuProcess, Pod};
        let gpu = Gpu {
            index: 0,
            up: true,
            readings: Readings {
                pods: vec![Pod {
                    namespace: "ml".into(),
                    pod: "<train>".into(),
                    container: "c".into(),
                }],
                jobs: vec!["4711".into()],
                processes: vec![
                    GpuProcess {
                        pid: Some(42),
                        used_bytes: Some(1.5 * GIB),
                        ..GpuProcess::default()
                    },
                    GpuProcess {
                        pid: None,
                        used_bytes: None,
                        ..GpuProcess::default()
                    },
                ],
                ..Default::default()
            },
            ..Default::default()
        };
        let c = cells(&page(&published(vec![gpu])), "gpu-0");
        assert_eq!(
            c[11],
            "pod ml/&lt;train&gt; <small>c</small><br>job 4711<br>pid 42 <small>1.5 GiB</small><br>other processes"
        );
    }

    #[test]
    fn absent_readings_are_dashes_never_zero() {
        let bare = Gpu {
            index: 3,
            model: "m".into(),
            uuid: "GPU-x".into(),
            up: true,
            ..Default::default()
        };
        let page = page(&published(vec![bare]));
        let c = cells(&page, "gpu-3");
        // index, model, the seven reading cells, up, health, users.
        assert_eq!(c.len(), 12, "{c:?}");
        assert_eq!(c[0], "3");
        for (i, cell) in c[2..9].iter().enumerate() {
            assert_eq!(cell, "&ndash;", "cell {}", i + 2);
        }
        assert_eq!(c[9], "up");
        // Nothing known to be wrong, and nobody known to use it.
        assert_eq!(c[10], "ok");
        assert_eq!(c[11], "&ndash;");
        // Only the simulator gets the banner.
        assert!(!page.contains("SIMULATED"));
        assert!(!page.contains("no GPUs"));
    }

    /// The reading columns come from their declarations, in the table's
    /// order, with the empty table's span to match.
    #[test]
    fn the_heads_are_the_declared_columns() {
        let page = page(&published(Vec::new()));
        assert!(page.contains(
            "<tr><th>gpu</th><th>model</th><th>temp</th><th>SM clock / max</th>\
             <th>throttled</th><th>power / limit</th><th>memory used / total</th>\
             <th>largest free</th><th title=\"the watched codes, that page or open a \
             ticket: a counter since the driver loaded, not a window\">Xid since driver \
             load</th><th>up</th><th>health</th><th>used by</th></tr>\n\
             <tr><td colspan=\"12\">no GPUs in this snapshot</td></tr>"
        ));
    }

    #[test]
    fn an_empty_failing_fleet_says_so() {
        let mut p = published(Vec::new());
        snap(&mut p).source = SourceKind::Sim;
        snap(&mut p).error = Some("nvml: not loaded".into());
        let page = page(&p);
        assert!(page.contains("id=\"simulated\">SIMULATED"));
        assert!(page.contains("<b class=\"bad\">failing</b>"));
        assert!(page.contains("last collection failed: nvml: not loaded"));
        assert!(page.contains("no GPUs in this snapshot"));
        assert!(page.contains("No alerts are pending or firing."));
        assert!(!page.contains("id=\"models\""));
    }

    #[test]
    fn present_readings_and_partial_pairs() {
        let gpu = Gpu {
            index: 0,
            up: false,
            readings: Readings {
                temperature_celsius: Some(71.4),
                sm_clock_hertz: Some(1.41e9),
                clocks_event_mask: Some(0x40),
                power_usage_watts: Some(0.0),
                memory_used_bytes: Some(62.0 * GIB),
                memory_total_bytes: Some(80.0 * GIB),
                largest_free_bytes: Some(1.25 * GIB),
                xid_errors: Some(vec![(13, 5), (79, 2)]),
                health: model::Health {
                    recovery_action: Some(2.0),
                    row_remap_pending: Some(true),
                    nvlink_links: Some(18.0),
                    nvlink_links_active: Some(16.0),
                    pcie_link_width: Some(8.0),
                    pcie_link_width_max: Some(16.0),
                    ..Default::default()
                },
                ..Default::default()
            },
            mig: vec![MigInstance {
                gpu_instance_id: 1,
                profile: "3g.40gb".into(),
                readings: Readings {
                    memory_total_bytes: Some(40.0 * GIB),
                    ..Default::default()
                },
                ..Default::default()
            }],
            ..Default::default()
        };
        let page = page(&published(vec![gpu]));
        let c = cells(&page, "gpu-0");
        let want = [
            "71 &deg;C",
            "1410 / &ndash; MHz",
            "yes",
            // A real 0 W is shown as 0; the absent limit is not.
            "0 / &ndash; W",
            "62 / 80 GiB",
            "1.3 GiB",
            // Xid 13 is an application fault, not critical.
            "2",
            "LOST",
            "lost: not answering; driver asks for a reboot or drain (recovery action 2); \
             row remap waits for a reset; NVLink 16/18 up; PCIe x8 of x16",
            "&ndash;",
        ];
        assert_eq!(&c[2..], &want, "{c:?}");
        let m = cells(&page, "gpu-0-mig-1");
        assert_eq!(m[0], "MIG 1");
        assert_eq!(m[4], "&ndash;");
        assert_eq!(m[6], "&ndash; / 40 GiB");
        assert_eq!(m[9], "");
        assert_eq!(m[10], "");
    }

    #[test]
    fn summaries_expand_like_expand() {
        let subjects = [
            Subject::Exporter,
            Subject::Gpu {
                index: 12,
                uuid: "GPU-<u>".into(),
            },
            Subject::Model("llama & <friends>".into()),
        ];
        let mut templates: Vec<String> = defaults().into_iter().map(|r| r.summary).collect();
        templates.extend([
            "{{ $labels.uuid }} {{ $labels.nope }} {{ $value }}{{".into(),
            "{{{{ $value }}}} }} {{ printf \"%.1f\" $value }}".into(),
            "".into(),
            WORKLOADS.into(),
        ]);
        let gpus = [Gpu {
            index: 12,
            uuid: "GPU-<u>".into(),
            readings: Readings {
                pods: vec![model::Pod {
                    namespace: "a&b".into(),
                    pod: "<p>".into(),
                    container: "c".into(),
                }],
                jobs: vec!["j\"1".into()],
                ..Readings::default()
            },
            ..Gpu::default()
        }];
        for t in &templates {
            for s in &subjects {
                for v in [0.0, 30.000000000000025, 1.5, 0.0125, 100.0, f64::NAN] {
                    let mut want = Vec::new();
                    html_escape(&mut want, &expand(t, s, v, &gpus));
                    let mut got = Vec::new();
                    expand_into(&mut got, t, s, v, &gpus, html_escape);
                    assert_eq!(
                        String::from_utf8(got).unwrap(),
                        String::from_utf8(want).unwrap(),
                        "{t:?} {s:?} {v}"
                    );
                }
            }
        }
    }

    #[test]
    fn durations() {
        let d = |s| {
            let mut out = Vec::new();
            duration(&mut out, s);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(d(0.0), "0s");
        assert_eq!(d(-3.0), "0s");
        assert_eq!(d(59.9), "59s");
        assert_eq!(d(61.0), "1m 1s");
        assert_eq!(d(3599.0), "59m 59s");
        assert_eq!(d(7260.0), "2h 1m");
        assert_eq!(d(3.0 * 86400.0 + 7300.0), "3d 2h");
    }
}
