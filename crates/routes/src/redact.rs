//! Reasons as the pages anyone who can connect show them: the log keeps
//! the paths, `/` and `/readyz` do not.

/// `reason` without filesystem paths, for pages anyone who can connect
/// reads (`/`, `/readyz`); the log keeps the whole reason. A word that
/// starts with `/`, `./`, `../` or `~/` (after any opening quote or
/// bracket) is written as `[path]`, up to whitespace, a closing quote or
/// bracket, or a `:`, `,` or `;` that ends the word.
pub fn without_paths(reason: &str, mut put: impl FnMut(&str)) {
    let b = reason.as_bytes();
    let starts = |i: usize| {
        let opens = i == 0
            || matches!(
                b[i - 1],
                b' ' | b'\t' | b'\'' | b'"' | b'(' | b'[' | b'=' | b'`'
            );
        let r = &b[i..];
        opens
            && (r.starts_with(b"/")
                || r.starts_with(b"./")
                || r.starts_with(b"../")
                || r.starts_with(b"~/"))
    };
    let ends = |i: usize| match b[i] {
        b' ' | b'\t' | b'\n' | b'\'' | b'"' | b')' | b']' | b'`' => true,
        b':' | b',' | b';' => b.get(i + 1).is_none_or(|&c| c == b' '),
        _ => false,
    };
    let (mut copied, mut i) = (0, 0);
    while i < b.len() {
        if starts(i) {
            let end = (i..b.len()).find(|&j| ends(j)).unwrap_or(b.len());
            // Both ends are ASCII bytes: character boundaries.
            put(&reason[copied..i]);
            put("[path]");
            copied = end;
            i = end;
        } else {
            i += 1;
        }
    }
    put(&reason[copied..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(reason: &str) -> String {
        let mut out = String::new();
        without_paths(reason, |s| out.push_str(s));
        out
    }

    #[test]
    fn paths_are_left_out_of_reasons() {
        for (reason, want) in [
            (
                "nvml: /opt/nv/libnvidia-ml.so.1: cannot open shared object file",
                "nvml: [path]: cannot open shared object file",
            ),
            (
                "smi: cannot run \"/usr/local/bin/nvidia-smi\": Permission denied (os error 13)",
                "smi: cannot run \"[path]\": Permission denied (os error 13)",
            ),
            (
                "read ./x.json, ../y and ~/z; done",
                "read [path], [path] and [path]; done",
            ),
            ("path=/etc/x:/etc/y", "path=[path]"),
            (
                "Input/output error (os error 5)",
                "Input/output error (os error 5)",
            ),
            ("nvml: not loaded", "nvml: not loaded"),
            ("/", "[path]"),
            ("é /ü é", "é [path] é"),
            ("", ""),
        ] {
            assert_eq!(shown(reason), want, "{reason}");
        }
    }
}
