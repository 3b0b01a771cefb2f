//! `/alerts`: the active alerts as JSON, in the shape of Prometheus'
//! `/api/v1/alerts`, so the same tooling reads either.

use super::eval::Alert;
use std::io::Write;

pub fn write_json(alerts: &[Alert], runbook_base: &str, out: &mut Vec<u8>) {
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
        string(out, &super::expand(&a.rule.summary, &a.subject, a.value));
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

/// Unix seconds as RFC 3339 UTC with milliseconds.
pub fn rfc3339(t: f64) -> String {
    let ms = (t * 1000.0).round() as i64;
    let (secs, ms) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_values() {
        assert_eq!(rfc3339(0.0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400.5), "2000-02-29T00:00:00.500Z");
        assert_eq!(rfc3339(1_796_050_000.0), "2026-11-30T14:46:40.000Z");
        assert_eq!(go_exponent(1.0), "1e+00");
        assert_eq!(go_exponent(2.0066889632107023), "2.0066889632107023e+00");
        assert_eq!(go_exponent(0.0125), "1.25e-02");
        assert_eq!(go_exponent(0.0), "0e+00");
        let mut out = Vec::new();
        string(&mut out, "a\"b\\c\nd");
        assert_eq!(out, br#""a\"b\\c\u000ad""#);
    }
}
