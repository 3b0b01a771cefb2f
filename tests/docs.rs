//! The documentation as a reader meets it:
//!
//! - every relative link of README.md and of docs/ (its pages and the
//!   runbooks) names a file or folder of the repository, and a heading
//!   of it where it names one;
//! - the README stays a front door: at most 400 lines;
//! - the README and the pages of docs/ name no commit (history is
//!   CHANGELOG.md's);
//! - every source path they name in a code span (`src/http/conn.rs`,
//!   `crates/model/`) is in the repository, so a move that forgets a
//!   page fails here.

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every `.md` under docs/, folders included.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|x| x == "md") {
                out.push(path);
            }
        }
    }
    let mut out = vec![root().join("README.md")];
    walk(&root().join("docs"), &mut out);
    out.sort();
    out
}

/// The targets of the inline links `[text](target)` and images in
/// `text`, code blocks and code spans left out.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans hold no links: drop what is between backticks.
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push(target.to_string());
            rest = &after[end..];
        }
    }
    out
}

/// Where a relative link of `page` leads, and the anchor it names there:
/// `None` for one that leaves the repository's files (a URL, an e-mail).
fn resolve(page: &Path, target: &str) -> Option<(PathBuf, Option<String>)> {
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor.to_string())),
        None => (target, None),
    };
    if path.contains("://") || path.starts_with("mailto:") {
        return None;
    }
    if path.is_empty() {
        return Some((page.to_path_buf(), anchor));
    }
    Some((page.parent().unwrap().join(path), anchor))
}

/// A heading's anchor as GitHub makes it: lower case, spaces as `-`,
/// every other character but letters, digits, `-` and `_` left out.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' | '-' => Some('-'),
            '_' => Some('_'),
            c if c.is_alphanumeric() => Some(c.to_lowercase().next().unwrap()),
            _ => None,
        })
        .collect()
}

/// The anchors of a page: its headings' slugs (code blocks left out) and
/// its `<a id="...">`s.
fn anchors(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(slug(line.trim_start_matches('#')));
        }
        for id in line.split("<a id=\"").skip(1) {
            out.push(id.split('"').next().unwrap().to_string());
        }
    }
    out
}

#[test]
fn every_relative_link_names_a_file() {
    let mut broken = Vec::new();
    let mut seen = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for target in links(&text) {
            let Some((path, anchor)) = resolve(&page, &target) else {
                continue;
            };
            seen += 1;
            let name = page.strip_prefix(root()).unwrap().display();
            if !path.exists() {
                broken.push(format!("{name}: ({target}): no such file"));
                continue;
            }
            let Some(anchor) = anchor.filter(|_| path.extension().is_some_and(|x| x == "md"))
            else {
                continue;
            };
            if !anchors(&std::fs::read_to_string(&path).unwrap()).contains(&anchor) {
                broken.push(format!("{name}: ({target}): no such heading"));
            }
        }
    }
    assert!(
        seen >= 20,
        "only {seen} relative links: is the parser right?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_link_reader_finds_links_and_skips_code() {
    let text = "see [a](docs/a.md#x) and `[b](no.md)`\n```\n[c](no.md)\n```\n[d](https://x.org/y)";
    assert_eq!(links(text), ["docs/a.md#x", "https://x.org/y"]);
    let page = Path::new("/r/docs/p.md");
    assert_eq!(
        resolve(page, "../README.md#top"),
        Some(("/r/docs/../README.md".into(), Some("top".into())))
    );
    assert_eq!(
        resolve(page, "#here"),
        Some((page.into(), Some("here".into())))
    );
    assert_eq!(
        resolve(page, "runbooks/"),
        Some(("/r/docs/runbooks/".into(), None))
    );
    assert_eq!(resolve(page, "https://x.org/a.md"), None);
    assert_eq!(
        slug("Two scopes: the node pages, the fleet pages once for all"),
        "two-scopes-the-node-pages-the-fleet-pages-once-for-all"
    );
    assert_eq!(slug(" The GPU's readings"), "the-gpus-readings");
    assert_eq!(
        anchors("# A b\n```\n# not\n```\n<a id=\"dra\"></a>**DRA**"),
        ["a-b", "dra"]
    );
}

#[test]
fn the_readme_is_a_front_door() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 400,
        "README.md is {lines} lines: move reference to docs/"
    );
}

/// Whether `word` looks like a commit as git spells it: 7 to 40 lower-case
/// hex digits, with at least one digit and one letter (`Ed25519` is none).
fn is_commit(word: &str) -> bool {
    (7..=40).contains(&word.len())
        && word
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && word.bytes().any(|b| b.is_ascii_digit())
        && word.bytes().any(|b| b.is_ascii_alphabetic())
}

/// The words of `text` that look like commits. A word is a run of
/// letters, digits, `.`, `-` and `_`, trimmed of `.` and `-` at its ends,
/// so that `1.125899906842624e15` and a UUID are not taken for one.
fn commits(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
        .map(|w| w.trim_matches(['.', '-']))
        .filter(|w| is_commit(w))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_readme_and_docs_name_no_commit() {
    let mut named = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for word in commits(&text) {
            named.push(format!(
                "{}: {word}",
                page.strip_prefix(root()).unwrap().display()
            ));
        }
        assert!(
            !text.contains("the commit before"),
            "{}: history belongs in CHANGELOG.md",
            page.display()
        );
    }
    assert!(
        named.is_empty(),
        "history (commits) belongs in CHANGELOG.md:\n{}",
        named.join("\n")
    );
}

#[test]
fn the_commit_reader_finds_commits_and_nothing_else() {
    assert_eq!(
        commits("at f50e123, (22a2355) and `be47527`."),
        ["f50e123", "22a2355", "be47527"]
    );
    assert!(commits("0 to 1.125899906842624e15 bytes").is_empty());
    assert!(commits("GPU-0b42632a-bc5c-f731-724b-6936a19c4b24").is_empty());
    assert!(commits("deadbeef 1234567 abcdefg Ed25519").is_empty());
}

/// The repository paths `text` names in code spans: those under the
/// folders of code (`src/`, `crates/`, `tests/`, `benches/`, `tools/`,
/// `deploy/`, `fake-nvml/`), without a trailing `:line`.
fn source_paths(text: &str) -> Vec<String> {
    const FOLDERS: [&str; 7] = [
        "src/",
        "crates/",
        "tests/",
        "benches/",
        "tools/",
        "deploy/",
        "fake-nvml/",
    ];
    let spans = text.split('`').skip(1).step_by(2);
    let paths = spans.filter(|s| {
        FOLDERS.iter().any(|f| s.starts_with(f))
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c))
    });
    paths.map(|s| s.to_string()).collect()
}

#[test]
fn every_source_path_the_docs_name_exists() {
    let mut missing = Vec::new();
    for page in pages()
        .into_iter()
        .chain([root().join("benches/README.md")])
    {
        let text = std::fs::read_to_string(&page).unwrap();
        for path in source_paths(&text) {
            if !root().join(&path).exists() {
                let shown = page.strip_prefix(root()).unwrap().display();
                missing.push(format!("{shown}: `{path}`"));
            }
        }
    }
    assert!(missing.is_empty(), "no such file:\n{}", missing.join("\n"));
}

#[test]
fn the_path_reader_finds_source_paths_in_code_spans() {
    let text = "see `src/http/conn.rs` and `crates/model/`, not `GET /metrics` \
                or `src/a b`, nor [a link](src/lib.rs)";
    assert_eq!(source_paths(text), ["src/http/conn.rs", "crates/model/"]);
}
