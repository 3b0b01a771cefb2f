//! `/alerts`: the active alerts as JSON, in the shape of Prometheus'
//! `/api/v1/alerts`, so the same tooling reads either.

use crate::alerts::{Alert, Subject, WORKLOADS, expand};
use crate::base::time::rfc3339;
use crate::snapshot::Gpu;
use std::io::Write;

/// `gpus` are the snapshot's, for the `workloads` annotation.
pub fn write_json(alerts: &[Alert], gpus: &[Gpu], runbook_base: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(br#"{"status":"success","data":{"alerts":["#);
    for (i, a) in alerts.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(br#"{"labels":{"alertname":"#);
        string(out, &a.rule.name);
        for (k, v) in a.subject.labels() {
            out.push(b',');
            string(out, k);
            out.push(b':');
            string(out, &v);
        }
        out.extend_from_slice(br#","severity":"#);
        string(out, a.rule.severity.as_str());
        out.extend_from_slice(br#"},"annotations":{"summary":"#);
        string(out, &expand(&a.rule.summary, &a.subject, a.value, gpus));
        if matches!(a.subject, Subject::Gpu { .. }) {
            out.extend_from_slice(br#","workloads":"#);
            string(out, &expand(WORKLOADS, &a.subject, a.value, gpus));
        }
        out.extend_from_slice(br#","runbook_url":"#);
        string(out, &a.rule.runbook_url(runbook_base));
        out.extend_from_slice(br#"},"state":"#);
        string(out, a.state.as_str());
        out.extend_from_slice(br#","activeAt":"#);
        string(out, &rfc3339(a.active_at));
        out.extend_from_slice(br#","value":"#);
        string(out, &go_exponent(a.value));
        out.push(b'}');
    }
    out.extend_from_slice(b"]}}\n");
}

fn string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let mut b = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// Go's `strconv.FormatFloat(v, 'e', -1, 64)`, as Prometheus spells values.
fn go_exponent(v: f64) -> String {
    if !v.is_finite() {
        return if v.is_nan() {
            "NaN".into()
        } else if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let s = format!("{v:e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    format!(
        "{mantissa}e{}{:02}",
        if exp < 0 { '-' } else { '+' },
        exp.abs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_strings() {
        assert_eq!(go_exponent(1.0), "1e+00");
        assert_eq!(go_exponent(2.0066889632107023), "2.0066889632107023e+00");
        assert_eq!(go_exponent(0.0125), "1.25e-02");
        assert_eq!(go_exponent(0.0), "0e+00");
        let mut out = Vec::new();
        string(&mut out, "a\"b\\c\nd");
        assert_eq!(out, br#""a\"b\\c\u000ad""#);
    }
}
