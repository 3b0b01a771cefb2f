//! One alert as Alertmanager's v2 API takes it (`postableAlert`): the
//! labels Prometheus would send for the same alert from the printed rules,
//! its annotations, `startsAt` and `generatorURL`; `endsAt` is set at each
//! send.

use alerts::{Alert, Subject, WORKLOADS, expand};
use base::json::string;
use base::time::rfc3339;
use model::Gpu;

/// What every alert sent carries beyond its own labels.
pub struct Context<'a> {
    /// `--alerts.scrape-job`.
    pub job: &'a str,
    /// This exporter as Prometheus scrapes it.
    pub instance: &'a str,
    /// `--alertmanager.label`.
    pub external: &'a [(String, String)],
    /// The runbooks' base: `--alerts.runbook-base-url` or the exporter's
    /// own copy at `http://<instance>/docs/runbooks/`.
    pub runbook_base: &'a str,
}

/// The alert's labels as a JSON object: its identity in Alertmanager.
pub fn labels(a: &Alert, cx: &Context) -> String {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(br#"{"alertname":"#);
    string(&mut out, &a.rule.name);
    let own = a.labels();
    let scrape = [
        ("job", cx.job.to_string()),
        ("instance", cx.instance.into()),
    ];
    let external = cx.external.iter().map(|(k, v)| (k.as_str(), v.clone()));
    let all = own.into_iter().chain(scrape);
    for (k, v) in all.chain(external) {
        out.push(b',');
        string(&mut out, k);
        out.push(b':');
        string(&mut out, &v);
    }
    out.push(b'}');
    String::from_utf8(out).unwrap_or_default()
}

/// Everything but `endsAt`, which each send sets: `{"labels":...,` up to
/// and without the closing brace.
pub fn body(a: &Alert, labels: &str, gpus: &[Gpu], cx: &Context) -> String {
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(br#"{"labels":"#);
    out.extend_from_slice(labels.as_bytes());
    out.extend_from_slice(br#","annotations":{"summary":"#);
    string(
        &mut out,
        &expand(&a.rule.summary, &a.subject, a.value, gpus),
    );
    if matches!(a.subject, Subject::Gpu { .. }) {
        out.extend_from_slice(br#","workloads":"#);
        string(&mut out, &expand(WORKLOADS, &a.subject, a.value, gpus));
    }
    out.extend_from_slice(br#","runbook_url":"#);
    string(&mut out, &a.rule.runbook_url(cx.runbook_base));
    out.extend_from_slice(br#"},"startsAt":"#);
    string(&mut out, &rfc3339(a.fired_at));
    // The status page, at the alert's own row.
    out.extend_from_slice(br#","generatorURL":"#);
    let mut url = format!("http://{}/#", cx.instance).into_bytes();
    a.anchor(&mut url);
    string(&mut out, &String::from_utf8_lossy(&url));
    String::from_utf8(out).unwrap_or_default()
}

/// `body` closed with its `endsAt`.
pub fn ended(body: &str, ends_at: f64) -> String {
    let mut out = Vec::with_capacity(body.len() + 40);
    out.extend_from_slice(body.as_bytes());
    out.extend_from_slice(br#","endsAt":"#);
    string(&mut out, &rfc3339(ends_at));
    out.push(b'}');
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alerts::{State, defaults};

    #[test]
    fn starts_at_is_when_the_alert_fired_as_prometheus_sends_it() {
        let rule = defaults().into_iter().find(|r| r.name == "GPULost");
        let a = Alert {
            rule: rule.unwrap().into(),
            subject: Subject::Gpu {
                index: 1,
                uuid: "GPU-ab".into(),
            },
            state: State::Firing,
            active_at: 1.8e9,
            fired_at: 1.8e9 + 60.0,
            value: 0.0,
            muted_by: None,
        };
        let cx = Context {
            job: "gpu",
            instance: "node:9835",
            external: &[],
            runbook_base: "http://node:9835/docs/runbooks/",
        };
        let body = body(&a, &labels(&a, &cx), &[], &cx);
        let starts = format!(r#""startsAt":"{}""#, rfc3339(1.8e9 + 60.0));
        assert!(body.contains(&starts), "{body}");
        assert!(
            body.contains(r#""generatorURL":"http://node:9835/#alert.GPULost.gpu.1.uuid.GPU-ab""#),
            "{body}"
        );
    }
}
