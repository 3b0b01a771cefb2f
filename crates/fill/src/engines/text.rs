//! A bounded, streaming reader of Prometheus text 0.0.4 and OpenMetrics
//! that keeps only the families an engine profile asks for: histogram
//! buckets, sums and counts, and counters, each by its labels.
//!
//! The body is fed in chunks as it arrives and never held whole: one line
//! is buffered at most ([`MAX_LINE`]); a longer line is skipped to its
//! newline and counted. What is kept is capped in series ([`MAX_SERIES`])
//! and in bytes ([`MAX_KEPT`]); past either cap a sample is dropped and
//! counted, never kept. Nothing here allocates without bound, loops on
//! its input, or panics.

use crate::engines::options::model_name_ok;
use std::collections::BTreeSet;

/// The longest line kept; engines' lines are well under 1 KiB.
pub const MAX_LINE: usize = 16 * 1024;
/// The most samples kept from one body.
pub const MAX_SERIES: usize = 4096;
/// The most label bytes (names and values) kept from one body.
pub const MAX_KEPT: usize = 1024 * 1024;
/// A label set's braces, named so that no brace stands unpaired in code.
const OPEN: char = '\u{7b}';
const CLOSE: char = '\u{7d}';

/// The most labels one sample may carry and still be kept.
pub const MAX_LABELS: usize = 32;

/// The families wanted from a body, by their names as exposed.
#[derive(Clone, Debug, Default)]
pub struct Wanted {
    /// Histogram base names: `X` keeps `X_bucket`, `X_sum`, `X_count`.
    pub histograms: Vec<String>,
    /// Counter sample names as exposed (with `_total`).
    pub counters: Vec<String>,
    /// Name prefixes whose presence is noted, to tell engines apart.
    pub prefixes: Vec<String>,
    /// The labels that name a model: a sample whose model name may not be
    /// served (`config::engines::model_name_ok`) is refused, not kept.
    pub model_labels: Vec<String>,
}

/// Refused model names a body shows, at most, for the log.
pub const MAX_SHOWN: usize = 64;

/// Which part of a family a sample is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Part {
    /// A cumulative bucket with this upper bound (`le`, taken off labels).
    Bucket(f64),
    Sum,
    Count,
    Counter,
}

/// One kept sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Index into [`Wanted::histograms`] (for buckets, sums and counts)
    /// or [`Wanted::counters`] (for counters).
    pub family: usize,
    pub part: Part,
    /// Its labels in the order written, unescaped.
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

/// What one body gave.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Parsed {
    pub samples: Vec<Sample>,
    /// Non-empty, non-comment lines read.
    pub lines: u64,
    /// Lines that are not samples of the text format (or not UTF-8).
    pub malformed: u64,
    /// Lines over [`MAX_LINE`], skipped.
    pub overlong: u64,
    /// Wanted samples past the caps, dropped.
    pub dropped: u64,
    /// For each of [`Wanted::prefixes`], whether a sample name had it.
    pub prefixes_seen: Vec<bool>,
    /// Whether OpenMetrics' `# EOF` was read.
    pub eof: bool,
    /// The model names refused, by a hash of each, at most [`MAX_SERIES`]:
    /// their samples are not kept, so a tenant's names (10 KB each, say)
    /// take no room under the caps from the models that may be served.
    pub refused: BTreeSet<u64>,
    /// The first [`MAX_SHOWN`] of them: hash, as a log shows it, length.
    pub refused_shown: Vec<(u64, String, usize)>,
    /// The body's first byte that is not white space: `{` or `[` is JSON
    /// (trtllm-serve's `/metrics`), worth a hint.
    pub first: Option<u8>,
    /// Each bucket bound kept, as the body spells it (`100`, `100.0`), by
    /// its value's bits: the first spelling of each, at most
    /// [`MAX_SPELLINGS`] of at most [`MAX_SPELLING`] bytes. The exporter
    /// serves a model's judged bound so, for Prometheus to join on `le`.
    pub spellings: Vec<(u64, String)>,
}

/// Bucket bounds whose spelling is kept, at most; a body has a few dozen.
pub const MAX_SPELLINGS: usize = 256;
/// The longest spelling kept (`0.00022500000000000002` is 22 bytes).
pub const MAX_SPELLING: usize = 32;

impl Parsed {
    /// How the body spelled the bound read as `seconds` where its unit
    /// is `1 / per_second` s: the same division as the reader's, so the
    /// very same f64.
    pub fn spelling(&self, seconds: f64, per_second: f64) -> Option<&str> {
        (self.spellings.iter())
            .find(|(b, _)| f64::from_bits(*b) / per_second == seconds)
            .map(|(_, s)| s.as_str())
    }
}

/// The reader: [`Reader::feed`] chunks in, [`Reader::finish`] at the end.
pub struct Reader<'w> {
    wanted: &'w Wanted,
    line: Vec<u8>,
    /// Within a line over [`MAX_LINE`]: skip to its newline.
    skipping: bool,
    kept: usize,
    out: Parsed,
}

impl<'w> Reader<'w> {
    pub fn new(wanted: &'w Wanted) -> Reader<'w> {
        Reader {
            wanted,
            line: Vec::new(),
            skipping: false,
            kept: 0,
            out: Parsed {
                prefixes_seen: vec![false; wanted.prefixes.len()],
                ..Parsed::default()
            },
        }
    }

    /// Reads the next piece of the body; pieces may split lines anywhere.
    pub fn feed(&mut self, mut chunk: &[u8]) {
        if self.out.first.is_none() {
            self.out.first = chunk.iter().find(|b| !b.is_ascii_whitespace()).copied();
        }
        while !chunk.is_empty() {
            let end = chunk.iter().position(|&b| b == b'\n');
            let (piece, rest) = match end {
                Some(i) => (&chunk[..i], &chunk[i + 1..]),
                None => (chunk, &[][..]),
            };
            if !self.skipping {
                if self.line.len() + piece.len() > MAX_LINE {
                    self.skipping = true;
                    self.out.overlong += 1;
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(piece);
                }
            }
            if end.is_some() {
                self.end_line();
            }
            chunk = rest;
        }
    }

    /// Ends the body: a last line without its newline still counts.
    pub fn finish(mut self) -> Parsed {
        self.end_line();
        self.out
    }

    fn end_line(&mut self) {
        if !std::mem::replace(&mut self.skipping, false) {
            let line = std::mem::take(&mut self.line);
            self.read_line(&line);
            // Keep the buffer's room for the next line, within the cap.
            self.line = line;
            self.line.clear();
        }
    }

    fn read_line(&mut self, line: &[u8]) {
        let Ok(line) = std::str::from_utf8(line) else {
            self.out.lines += 1;
            self.out.malformed += 1;
            return;
        };
        let line = line.strip_suffix('\r').unwrap_or(line).trim_start();
        if line.is_empty() {
            return;
        }
        if let Some(comment) = line.strip_prefix('#') {
            self.out.eof |= comment.trim() == "EOF";
            return;
        }
        self.out.lines += 1;
        let name_end = line.find([OPEN, ' ', '\t']).unwrap_or(line.len());
        let name = &line[..name_end];
        if !valid_name(name) {
            self.out.malformed += 1;
            return;
        }
        for (seen, prefix) in self.out.prefixes_seen.iter_mut().zip(&self.wanted.prefixes) {
            *seen |= name.starts_with(prefix.as_str());
        }
        let Some((family, part)) = self.which(name) else {
            return;
        };
        match sample(&line[name_end..]) {
            None => self.out.malformed += 1,
            Some((labels, value)) => self.keep(family, part, labels, value),
        }
    }

    /// The wanted family and part a sample name belongs to.
    fn which(&self, name: &str) -> Option<(usize, Part)> {
        if let Some(i) = self.wanted.counters.iter().position(|c| c == name) {
            return Some((i, Part::Counter));
        }
        let suffixes = [
            ("_bucket", Part::Bucket(f64::NAN)),
            ("_sum", Part::Sum),
            ("_count", Part::Count),
        ];
        suffixes.into_iter().find_map(|(suffix, part)| {
            let base = name.strip_suffix(suffix)?;
            let i = self.wanted.histograms.iter().position(|h| h == base)?;
            Some((i, part))
        })
    }

    fn keep(&mut self, family: usize, part: Part, mut labels: Vec<(String, String)>, value: f64) {
        let (part, spelled) = match part {
            Part::Bucket(_) => {
                let Some(at) = labels.iter().position(|(k, _)| k == "le") else {
                    self.out.malformed += 1;
                    return;
                };
                let spelled = labels.remove(at).1;
                match parse_float(&spelled) {
                    Some(le) if !le.is_nan() => (Part::Bucket(le), Some((le, spelled))),
                    _ => {
                        self.out.malformed += 1;
                        return;
                    }
                }
            }
            part => (part, None),
        };
        if self.refuse(&labels) {
            return;
        }
        if let Some((le, spelled)) = spelled {
            self.spelled(le, spelled);
        }
        let bytes: usize = labels.iter().map(|(k, v)| k.len() + v.len()).sum();
        if self.out.samples.len() >= MAX_SERIES || self.kept + bytes > MAX_KEPT {
            self.out.dropped += 1;
            return;
        }
        self.kept += bytes;
        self.out.samples.push(Sample {
            family,
            part,
            labels,
            value,
        });
    }
}

impl Reader<'_> {
    /// Notes how the body spells bound `le`, the first time, within the caps.
    fn spelled(&mut self, le: f64, spelled: String) {
        let out = &mut self.out;
        if out.spellings.len() < MAX_SPELLINGS
            && spelled.len() <= MAX_SPELLING
            && !out.spellings.iter().any(|(b, _)| *b == le.to_bits())
        {
            out.spellings.push((le.to_bits(), spelled));
        }
    }

    /// Whether `labels` name a model that may not be served; noted once.
    fn refuse(&mut self, labels: &[(String, String)]) -> bool {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        let model_label = |(k, _): &&(String, String)| self.wanted.model_labels.contains(k);
        let Some((_, name)) = labels.iter().find(model_label) else {
            return false;
        };
        if model_name_ok(name) {
            return false;
        }
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(name);
        let out = &mut self.out;
        if out.refused.len() < MAX_SERIES
            && out.refused.insert(hash)
            && out.refused_shown.len() < MAX_SHOWN
        {
            out.refused_shown
                .push((hash, base::json::shown(name), name.len()));
        }
        true
    }
}

/// Parses a whole body at once (the simulator's, tests, fuzzing).
pub fn parse(body: &[u8], wanted: &Wanted) -> Parsed {
    let mut reader = Reader::new(wanted);
    reader.feed(body);
    reader.finish()
}

/// A metric name: `[a-zA-Z_:][a-zA-Z0-9_:]*`.
fn valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_' || b == b':')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':')
}

/// What follows a sample's name: `{labels}` (optional), the value, then a
/// timestamp and an OpenMetrics exemplar (`# {...} v`) that are ignored.
fn sample(rest: &str) -> Option<(Vec<(String, String)>, f64)> {
    let (labels, rest) = match rest.strip_prefix(OPEN) {
        Some(inner) => labels(inner)?,
        None => (Vec::new(), rest),
    };
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let value = rest.split_ascii_whitespace().next()?;
    Some((labels, parse_float(value)?))
}

/// A label set after its `{`: the labels, and what follows its `}`.
fn labels(mut s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut out = Vec::new();
    loop {
        s = s.trim_start_matches([' ', '\t']);
        if let Some(rest) = s.strip_prefix(CLOSE) {
            return Some((out, rest));
        }
        if out.len() >= MAX_LABELS {
            return None;
        }
        let eq = s.find('=')?;
        let name = s[..eq].trim_end_matches([' ', '\t']);
        if !valid_name(name) || name.contains(':') {
            return None;
        }
        let after = s[eq + 1..].trim_start_matches([' ', '\t']);
        let (value, rest) = quoted(after.strip_prefix('"')?)?;
        out.push((name.to_string(), value));
        s = rest.trim_start_matches([' ', '\t']);
        // A trailing comma before `}` is allowed by both formats.
        if let Some(rest) = s.strip_prefix(',') {
            s = rest;
        } else if !s.starts_with(CLOSE) {
            return None;
        }
    }
}

/// A label value after its opening quote, unescaped (`\\`, `\"`, `\n`),
/// and what follows its closing quote.
fn quoted(s: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((value, &s[i + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => value.push('\n'),
                other @ ('\\' | '"') => value.push(other),
                // Prometheus keeps an unknown escape as written.
                other => {
                    value.push('\\');
                    value.push(other);
                }
            },
            c => value.push(c),
        }
    }
    None
}

/// A sample value or bound: decimal or `+Inf`/`-Inf`/`NaN` as both
/// formats write them. Rust's parser also takes `infinity`, which harms
/// nothing.
pub fn parse_float(s: &str) -> Option<f64> {
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vllm() -> Wanted {
        Wanted {
            histograms: vec!["vllm:time_to_first_token_seconds".into()],
            counters: vec!["vllm:request_success_total".into()],
            prefixes: vec!["vllm:".into(), "sglang:".into()],
            model_labels: vec!["model_name".into()],
        }
    }

    /// What prometheus_client writes for vLLM 0.33 (abridged).
    const VLLM: &str = "# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.\n\
# TYPE vllm:time_to_first_token_seconds histogram\n\
vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.25\",model_name=\"m\"} 7.0\n\
vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.5\",model_name=\"m\"} 9.0\n\
vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} 10.0\n\
vllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"m\"} 10.0\n\
vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"m\"} 3.5\n\
# TYPE vllm:request_success_total counter\n\
vllm:request_success_total{engine=\"0\",finished_reason=\"stop\",model_name=\"m\"} 9.0\n\
vllm:request_success_total{engine=\"0\",finished_reason=\"error\",model_name=\"m\"} 1.0\n\
vllm:request_success_created{engine=\"0\",finished_reason=\"stop\",model_name=\"m\"} 1.7e9\n\
vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 2.0\n";

    #[test]
    fn keeps_the_wanted_families_only() {
        let wanted = vllm();
        let got = parse(VLLM.as_bytes(), &wanted);
        assert_eq!(got.samples.len(), 7);
        assert_eq!((got.lines, got.malformed, got.dropped), (9, 0, 0));
        assert_eq!(got.prefixes_seen, [true, false]);
        let inf = &got.samples[2];
        assert_eq!(inf.part, Part::Bucket(f64::INFINITY));
        assert_eq!(inf.value, 10.0);
        assert!(inf.labels.iter().all(|(k, _)| k != "le"));
        assert_eq!(got.samples[4].part, Part::Sum);
        let error = &got.samples[6];
        assert_eq!((error.family, error.part), (0, Part::Counter));
        assert!(
            error
                .labels
                .contains(&("finished_reason".into(), "error".into()))
        );
    }

    #[test]
    fn the_answer_does_not_depend_on_how_the_body_is_split() {
        let wanted = vllm();
        let whole = parse(VLLM.as_bytes(), &wanted);
        for size in [1, 2, 7, 64] {
            let mut reader = Reader::new(&wanted);
            VLLM.as_bytes().chunks(size).for_each(|c| reader.feed(c));
            assert_eq!(reader.finish(), whole, "chunks of {size}");
        }
    }

    #[test]
    fn reads_openmetrics_and_triton() {
        let wanted = Wanted {
            histograms: vec!["nv_inference_first_response_histogram_ms".into()],
            counters: vec!["nv_inference_request_failure".into()],
            prefixes: vec![],
            model_labels: vec!["model".into()],
        };
        // prometheus-cpp's text: integer values, no `_total` on counters.
        let text = "nv_inference_first_response_histogram_ms_bucket{model=\"a\",version=\"1\",le=\"100\"} 4\n\
nv_inference_request_failure{model=\"a\",reason=\"BACKEND\",version=\"1\"} 2\r\n\
# EOF\n";
        let got = parse(text.as_bytes(), &wanted);
        assert_eq!(got.samples[0].part, Part::Bucket(100.0));
        assert_eq!(got.samples[1].value, 2.0);
        assert!(got.eof);
        // OpenMetrics: trailing comma, timestamp, exemplar.
        let text = "nv_inference_request_failure{model=\"a\",} 3 1700000000 # {trace_id=\"x\"} 1\n";
        let got = parse(text.as_bytes(), &wanted);
        assert_eq!(got.samples[0].value, 3.0);
        assert_eq!(got.samples[0].labels, [("model".into(), "a".into())]);
    }

    #[test]
    fn unescapes_label_values() {
        let wanted = vllm();
        let text = "vllm:request_success_total{finished_reason=\"a\\\"b\\\\c\\nd\"} 1\n";
        let got = parse(text.as_bytes(), &wanted);
        assert_eq!(got.samples[0].labels[0].1, "a\"b\\c\nd");
    }

    #[test]
    fn garbage_is_counted_never_kept() {
        let wanted = vllm();
        let text: &[u8] = b"<html>\n{}\nvllm:request_success_total{model_name=\"a} 1\n\
vllm:request_success_total{model_name=\"a\"} one\n\
vllm:time_to_first_token_seconds_bucket{model_name=\"a\"} 1\n\
vllm:time_to_first_token_seconds_bucket{le=\"NaN\"} 1\n\xff\xfe\n";
        let got = parse(text, &wanted);
        assert!(got.samples.is_empty());
        assert_eq!((got.lines, got.malformed), (7, 7));
    }

    #[test]
    fn an_overlong_line_is_skipped_and_the_next_is_read() {
        let wanted = vllm();
        let mut body = vec![b'x'; MAX_LINE + 1];
        body.extend_from_slice(b"\nvllm:request_success_total 5\n");
        let mut reader = Reader::new(&wanted);
        body.chunks(1000).for_each(|c| reader.feed(c));
        let got = reader.finish();
        assert_eq!((got.overlong, got.samples.len()), (1, 1));
        assert_eq!(got.samples[0].value, 5.0);
    }

    #[test]
    fn past_the_series_cap_samples_are_dropped() {
        let wanted = vllm();
        let mut reader = Reader::new(&wanted);
        for i in 0..MAX_SERIES + 10 {
            reader
                .feed(format!("vllm:request_success_total{{model_name=\"m{i}\"}} 1\n").as_bytes());
        }
        let got = reader.finish();
        assert_eq!((got.samples.len(), got.dropped), (MAX_SERIES, 10));
    }

    #[test]
    fn past_the_byte_cap_samples_are_dropped() {
        let wanted = vllm();
        let value = "v".repeat(MAX_LINE - 100);
        let line = format!("vllm:request_success_total{{engine=\"{value}\"}} 1\n");
        let mut reader = Reader::new(&wanted);
        for _ in 0..100 {
            reader.feed(line.as_bytes());
        }
        let got = reader.finish();
        assert!(got.dropped > 0);
        let kept: usize = got.samples.iter().map(|s| s.labels[0].1.len() + 6).sum();
        assert!(kept <= MAX_KEPT);
    }

    /// A model name that may not be served costs nothing under the caps:
    /// its samples are refused, each name noted once, and a good model
    /// after 100 of them at 16 KB is kept.
    /// Bounds' spellings are kept once each, within their caps: a body of
    /// many bounds, or long spellings, holds no more than they allow.
    #[test]
    fn bound_spellings_are_bounded() {
        let mut body = String::new();
        for i in 0..2 * MAX_SPELLINGS {
            body += &format!(
                "vllm:time_to_first_token_seconds_bucket{{le=\"{i}.0\",model_name=\"m\"}} 1\n\
                 vllm:time_to_first_token_seconds_bucket{{le=\"{i}\",model_name=\"n\"}} 1\n"
            );
        }
        let long = format!("0.25{}", "0".repeat(MAX_SPELLING));
        body += &format!(
            "vllm:time_to_first_token_seconds_bucket{{le=\"{long}\",model_name=\"m\"}} 1\n"
        );
        let got = parse(body.as_bytes(), &vllm());
        assert_eq!(got.spellings.len(), MAX_SPELLINGS);
        assert_eq!(got.spelling(7.0, 1.0), Some("7.0"));
        assert_eq!(got.spelling(0.25, 1.0), None);
        assert_eq!(got.spelling(7.0, 1000.0), None);
    }

    #[test]
    fn refused_model_names_take_no_room() {
        let wanted = vllm();
        let mut reader = Reader::new(&wanted);
        for i in 0..100 {
            let name = format!("{i}{}", "v".repeat(MAX_LINE - 100));
            for part in ["stop", "error"] {
                let line = format!(
                    "vllm:request_success_total{{finished_reason=\"{part}\",model_name=\"{name}\"}} 1\n"
                );
                reader.feed(line.as_bytes());
            }
        }
        reader.feed(b"vllm:request_success_total{model_name=\"esc\x1b\"} 1\n");
        reader.feed(b"vllm:request_success_total{model_name=\"\"} 1\n");
        reader.feed(b"vllm:request_success_total{model_name=\"ok\"} 1\n");
        let got = reader.finish();
        assert_eq!((got.dropped, got.refused.len()), (0, 102));
        assert_eq!(got.refused_shown.len(), MAX_SHOWN);
        assert!(got.refused_shown.iter().all(|(_, s, _)| s.len() < 100));
        assert_eq!(got.refused_shown[0].2, MAX_LINE - 99);
        assert_eq!(got.samples.len(), 1);
        assert_eq!(got.samples[0].labels, [("model_name".into(), "ok".into())]);
    }
}
