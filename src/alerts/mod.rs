//! Alert rules as data, their evaluator, the same rules as PromQL, and
//! `/alerts`. The evaluator reads the same snapshots a scrape renders.

pub mod api;
pub mod eval;
pub mod file;
pub mod promql;
pub mod rules;

pub use eval::{Alert, Evaluator, State, Transition};
pub use rules::{Cmp, Expr, Rule, Severity, Signal, Subject};

impl Subject {
    /// The labels an alert about this subject carries, after `alertname`.
    pub fn labels(&self) -> Vec<(&'static str, String)> {
        match self {
            Subject::Exporter => Vec::new(),
            Subject::Gpu { index, uuid } => {
                vec![("gpu", index.to_string()), ("uuid", uuid.clone())]
            }
            Subject::Model(name) => vec![("model_name", name.clone())],
        }
    }
}

/// Expands the template variables a summary may use.
pub fn expand(template: &str, subject: &Subject, value: f64) -> String {
    let plain = format!("{value:.3}");
    let plain = plain.trim_end_matches('0').trim_end_matches('.');
    let mut s = template
        .replace("{{ $value }}", plain)
        .replace("{{ printf \"%.1f\" $value }}", &format!("{value:.1}"));
    for (k, v) in subject.labels() {
        s = s.replace(&format!("{{{{ $labels.{k} }}}}"), &v);
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn templates_expand_like_prometheus() {
        let s = super::Subject::Model("m".into());
        let t = "{{ $labels.model_name }}: {{ printf \"%.1f\" $value }}x, {{ $value }}";
        assert_eq!(super::expand(t, &s, 30.000000000000025), "m: 30.0x, 30");
    }
}
