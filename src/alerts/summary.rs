//! Alert summaries: the Prometheus template variables a summary may use,
//! expanded by one scanner for both the status page (streamed, escaped
//! as HTML) and `/alerts` (a String).
//!
//! `{{ $value }}`, `{{ printf "%.1f" $value }}` and `{{ $labels.<name> }}`
//! for the subject's labels are expanded; anything else stays as written.

use super::Subject;
use crate::base::numbers::write_u64;
use std::io::Write;

/// `template` expanded into `out`; its own text and label values go
/// through `text` (an escaper, say), numbers are written as they are.
pub fn expand_into(
    out: &mut Vec<u8>,
    template: &str,
    subject: &Subject,
    value: f64,
    text: fn(&mut Vec<u8>, &str),
) {
    let mut rest = template;
    while let Some(i) = rest.find("{{") {
        text(out, &rest[..i]);
        rest = &rest[i..];
        let end = rest.find("}}").map_or(rest.len(), |j| j + 2);
        let (var, after) = rest.split_at(end);
        if !variable(out, var, subject, value, text) {
            text(out, &var[..2]);
            rest = &rest[2..];
            continue;
        }
        rest = after;
    }
    text(out, rest);
}

/// `template` expanded, as a String.
pub fn expand(template: &str, subject: &Subject, value: f64) -> String {
    let mut out = Vec::new();
    expand_into(&mut out, template, subject, value, |out, s| {
        out.extend_from_slice(s.as_bytes())
    });
    // Template text and label values are whole strs; numbers are ASCII.
    String::from_utf8(out).unwrap_or_default()
}

/// Writes the value of one `{{ ... }}`; false when it is not a variable
/// known for this subject.
fn variable(
    out: &mut Vec<u8>,
    var: &str,
    subject: &Subject,
    value: f64,
    text: fn(&mut Vec<u8>, &str),
) -> bool {
    match var {
        "{{ $value }}" => {
            // Three decimals at most, without trailing zeros.
            let start = out.len();
            let _ = write!(out, "{value:.3}");
            while out.len() > start && out.last() == Some(&b'0') {
                out.pop();
            }
            if out.len() > start && out.last() == Some(&b'.') {
                out.pop();
            }
            true
        }
        "{{ printf \"%.1f\" $value }}" => {
            let _ = write!(out, "{value:.1}");
            true
        }
        _ => {
            let Some(key) = var
                .strip_prefix("{{ $labels.")
                .and_then(|v| v.strip_suffix(" }}"))
            else {
                return false;
            };
            match (subject, key) {
                (Subject::Gpu { index, .. }, "gpu") => write_u64(out, u64::from(*index)),
                (Subject::Gpu { uuid, .. }, "uuid") => text(out, uuid),
                (Subject::Model(name), "model_name") => text(out, name),
                _ => return false,
            }
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_expand_like_prometheus() {
        let s = Subject::Model("m".into());
        let t = "{{ $labels.model_name }}: {{ printf \"%.1f\" $value }}x, {{ $value }}";
        assert_eq!(expand(t, &s, 30.000000000000025), "m: 30.0x, 30");
        let gpu = Subject::Gpu {
            index: 12,
            uuid: "GPU-x".into(),
        };
        let t = "{{ $labels.gpu }}/{{ $labels.uuid }} {{ $labels.model_name }} {{ $value }}{{";
        assert_eq!(
            expand(t, &gpu, 0.0125),
            "12/GPU-x {{ $labels.model_name }} 0.013{{"
        );
        assert_eq!(
            expand("{{{{ $value }}}} }}", &Subject::Exporter, 1.5),
            "{{1.5}} }}"
        );
    }
}
