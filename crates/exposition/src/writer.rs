//! The line writer: heads, label sets (each target's written once per
//! render, then copied), values and escaping, straight into the caller's
//! buffer.

use base::numbers::{F64_MAX_LEN, spell_f64, write_u64};
use model::catalogue::{Family, Kind};
use model::{Gpu, MigInstance, Readings};

/// A GPU or one of its MIG instances, numbered in render order.
#[derive(Clone, Copy)]
pub(super) struct Target<'a> {
    pub(super) n: usize,
    pub(super) gpu: &'a Gpu,
    pub(super) mig: Option<&'a MigInstance>,
}

/// Calls `f` for each GPU and then each of its MIG instances.
pub(super) fn each_target<'a>(gpus: &'a [Gpu], mut f: impl FnMut(Target<'a>, &'a Readings)) {
    let mut n = 0;
    for gpu in gpus {
        f(Target { n, gpu, mig: None }, &gpu.readings);
        n += 1;
        for m in &gpu.mig {
            f(
                Target {
                    n,
                    gpu,
                    mig: Some(m),
                },
                &m.readings,
            );
            n += 1;
        }
    }
}

/// Targets whose label set is written once per render and then copied.
pub(super) const CACHED_TARGETS: usize = 576;

pub(super) struct Writer<'a> {
    pub(super) out: &'a mut Vec<u8>,
    pub(super) om: bool,
    /// Where each target's label set was first written in `out`: every
    /// later line of that target copies those bytes instead of spelling
    /// and escaping them again. (0, 0) until then; none where a writer
    /// writes no target's (the exporter's own families).
    pub(super) cached: &'a mut [(usize, usize)],
}

impl Writer<'_> {
    #[inline(always)]
    pub(super) fn put(&mut self, s: &str) {
        self.out.extend_from_slice(s.as_bytes());
    }

    /// [`Writer::head`] piece by piece, escaping the help.
    pub(super) fn escaped_head(&mut self, f: &Family) {
        let (kind, suffix) = head_kind(f, self.om);
        for (line, rest) in [("# HELP ", None), ("# TYPE ", Some(kind))] {
            self.put(line);
            self.put(f.name);
            self.put(suffix);
            self.out.push(b' ');
            match rest {
                Some(kind) => self.put(kind),
                None if f.plain_help => self.put(f.help),
                None => escape(self.out, f.help, self.om),
            }
            self.out.push(b'\n');
        }
        if let (Some(unit), true) = (f.unit, self.om) {
            self.put("# UNIT ");
            self.put(f.name);
            self.out.push(b' ');
            self.put(unit);
            self.out.push(b'\n');
        }
    }

    #[inline(always)]
    pub(super) fn name(&mut self, f: &Family) {
        f.sample_name(self.out);
    }

    /// Opens a target's label set: `{gpu="0",uuid="…"` and, for a MIG
    /// instance, the parent GPU's `gpu` and `uuid` (so it joins `gpu_info`)
    /// with `mig_instance` and `mig_profile`.
    #[inline(always)]
    pub(super) fn target(&mut self, t: Target) {
        match self.cached.get(t.n) {
            Some(&(start, end)) if end > start => self.out.extend_from_within(start..end),
            _ => {
                let start = self.out.len();
                match t.mig {
                    None => self.gpu_labels(t.gpu.index, &t.gpu.uuid),
                    Some(m) => {
                        self.gpu_labels(t.gpu.index, &t.gpu.uuid);
                        self.num_label("mig_instance", m.gpu_instance_id);
                        self.label("mig_profile", &m.profile);
                    }
                }
                if let Some(slot) = self.cached.get_mut(t.n) {
                    *slot = (start, self.out.len());
                }
            }
        }
    }

    #[inline(always)]
    pub(super) fn gpu_labels(&mut self, index: u32, uuid: &str) {
        self.out.extend_from_slice(b"{gpu=\"");
        write_u64(self.out, index as u64);
        self.out.push(b'"');
        self.label("uuid", uuid);
    }

    /// The first label, opening the set.
    #[inline(always)]
    pub(super) fn open_label(&mut self, k: &str, v: &str) {
        self.out.push(b'{');
        self.put(k);
        self.out.extend_from_slice(b"=\"");
        escape(self.out, v, true);
        self.out.push(b'"');
    }

    #[inline(always)]
    pub(super) fn label(&mut self, k: &str, v: &str) {
        self.out.push(b',');
        self.put(k);
        self.out.extend_from_slice(b"=\"");
        escape(self.out, v, true);
        self.out.push(b'"');
    }

    #[inline(always)]
    pub(super) fn num_label(&mut self, k: &str, n: impl Into<u64>) {
        self.out.push(b',');
        self.put(k);
        self.out.extend_from_slice(b"=\"");
        write_u64(self.out, n.into());
        self.out.push(b'"');
    }

    /// Closes the label set (if any) and writes the value. A label set
    /// always ends in a quote and a bare name never does.
    #[inline(always)]
    pub(super) fn value(&mut self, v: f64) {
        // Spelled on the stack and copied once, brace and newline with it.
        let mut line = [0u8; F64_MAX_LEN + 3];
        let brace = usize::from(self.out.last() == Some(&b'"'));
        line[..2].copy_from_slice(b"} ");
        let mut number = [0u8; F64_MAX_LEN];
        let n = spell_f64(v, &mut number);
        line[2..2 + n].copy_from_slice(&number[..n]);
        line[2 + n] = b'\n';
        self.out.extend_from_slice(&line[1 - brace..3 + n]);
    }

    pub(super) fn scalar(&mut self, f: &Family, v: f64) {
        self.head(f);
        self.name(f);
        self.value(v);
    }
}

/// The TYPE a family's head says and the suffix its HELP and TYPE lines
/// add to its name, in 0.0.4 or (`om`) OpenMetrics.
#[inline(always)]
pub(super) fn head_kind(f: &Family, om: bool) -> (&'static str, &'static str) {
    match (f.kind, om) {
        (Kind::Gauge, _) => ("gauge", ""),
        (Kind::Counter, true) => ("counter", ""),
        (Kind::Counter, false) => ("counter", "_total"),
        (Kind::Info, true) => ("info", ""),
        (Kind::Info, false) => ("gauge", "_info"),
        (Kind::Histogram, _) => ("histogram", ""),
    }
}

/// Escapes `\`, newline and (in label values and OpenMetrics HELP) `"`.
#[inline]
pub fn escape(out: &mut Vec<u8>, s: &str, quote: bool) {
    // Nearly every value needs no escaping: copy it whole.
    if !s
        .bytes()
        .any(|b| b == b'\\' || b == b'\n' || (quote && b == b'"'))
    {
        out.extend_from_slice(s.as_bytes());
        return;
    }
    for &b in s.as_bytes() {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'"' if quote => out.extend_from_slice(b"\\\""),
            _ => out.push(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::catalogue::{GPU_UP, family};

    #[test]
    fn escaping() {
        let mut out = Vec::new();
        escape(&mut out, "a\\b\"c\nd", true);
        assert_eq!(out, br#"a\\b\"c\nd"#);
        out.clear();
        escape(&mut out, "a\\b\"c\nd", false);
        assert_eq!(out, br#"a\\b"c\nd"#);
    }

    #[test]
    fn help_needing_escapes_is_escaped() {
        let f = family("x_seconds", Kind::Gauge, "a \"quoted\" \\ help\nline");
        assert!(!f.plain_help && GPU_UP.plain_help);
        for (om, want) in [
            (false, "# HELP x_seconds a \"quoted\" \\\\ help\\nline\n"),
            (true, "# HELP x_seconds a \\\"quoted\\\" \\\\ help\\nline\n"),
        ] {
            let mut out = Vec::new();
            Writer {
                out: &mut out,
                om,
                cached: &mut [],
            }
            .head(&f);
            let text = String::from_utf8(out).unwrap();
            assert!(text.starts_with(want), "{text}");
        }
    }
}
