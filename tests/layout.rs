//! The layout's rules, read from the source itself:
//!
//! - every module imports only from the floors below its own (its own
//!   module aside): the `use crate::…`, `super::…` and inline `crate::`
//!   paths of every file under `src/` are checked against [`FLOORS`];
//! - modules of one floor never reach into each other, and a source or a
//!   filler never into another's files ([`MEMBERS`]), without exception;
//! - the crates under `crates/` depend only on those [`CRATES`] lets
//!   them: `wire` and `webconfig` on `base`, `model` on none, `alerts`,
//!   `sources` and `exposition` on `base` and `model`, `fill` on those and
//!   `wire`, `poller` on `fill`, `alerts` and `sources` and below, `http`
//!   (the server) on `base`, `model` and `webconfig`, `routes` (what it
//!   answers) on `poller`, `exposition`, `http` and below (Cargo holds
//!   what they import; this holds what `cargo metadata` says they depend
//!   on), and of the fillers only the kubelet's (`pods`) uses `wire`;
//! - the module table of docs/maintainers.md lists every module, on its
//!   floor;
//! - no file but `ffi.rs` holds more than 600 lines before its tests, and
//!   `lib.rs` stays a table of contents;
//! - every member takes the workspace's lints: unsafe code denied but
//!   where an `allow` says why, clippy's `too_many_lines` (80 lines of
//!   code, clippy.toml) holding the length of its functions;
//! - no two files of a crate import each other, directly or around a
//!   cycle, tests aside.

use base::json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Each top-level module of `src/` and its floor.
/// Below them all are the crates of `crates/`.
const FLOORS: &[(&str, u8)] = &[
    // The unit tests' fixtures and the docs' generated tables.
    ("testkit", 0),
    // Flags in, a validated configuration out.
    ("config", 1),
    // Which source and fillers the poller reads.
    ("pipeline", 2),
    // What serves a published snapshot or its alerts besides HTTP (the
    // crates `http` and `routes`): the seed table, the Alertmanager
    // notifier.
    ("notify", 3),
    ("table", 3),
    // The wiring, and what only lists or re-exports modules.
    ("app", 4),
    ("lib", 4),
    ("main", 4),
];

/// Crates whose modules are each a source or a filler of its own: one
/// never names another's files.
const MEMBERS: &[(&str, &[&str])] = &[
    ("sources", &["nvml", "smi", "sim"]),
    (
        "fill",
        &["cgroup", "engines", "jobs", "kmsg", "pods", "workload"],
    ),
];

/// The crates under `crates/`, and the crates of ours each may depend on.
const CRATES: &[(&str, &[&str])] = &[
    ("base", &[]),
    ("wire", &["base"]),
    ("webconfig", &["base"]),
    ("model", &[]),
    ("alerts", &["base", "model"]),
    ("sources", &["base", "model"]),
    ("exposition", &["base", "model"]),
    ("fill", &["base", "model", "wire"]),
    ("poller", &["base", "model", "alerts", "sources", "fill"]),
    ("http", &["base", "model", "webconfig"]),
    (
        "routes",
        &["base", "model", "alerts", "exposition", "poller", "http"],
    ),
];

/// Of the fillers, the one that speaks the protocols of `wire`.
const WIRE_USER: &str = "pods";

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file of the binary's crate and of the crates under
/// `crates/`.
fn all_files() -> Vec<PathBuf> {
    let mut out = files(&src());
    for (name, _) in CRATES {
        out.extend(files(
            &src()
                .parent()
                .unwrap()
                .join("crates")
                .join(name)
                .join("src"),
        ));
    }
    out
}

fn floor(top: &str) -> u8 {
    FLOORS
        .iter()
        .find(|(m, _)| *m == top)
        .unwrap_or_else(|| panic!("module {top} has no floor in tests/layout.rs"))
        .1
}

/// Every `.rs` file under `dir`, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The `src` directory of the crate `file` is in.
fn root_of(file: &Path) -> &Path {
    file.ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "src"))
        .unwrap()
}

/// A file's module path: `src/fill/pods/refresh.rs` is
/// `["fill", "pods", "refresh"]`, `src/fill/pods/mod.rs` `["fill",
/// "pods"]`, `src/lib.rs` `["lib"]`.
fn module_of(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root_of(file)).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.len() > 1 && parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The paths a use tree spells from `text` on: `a::{b, c::{d, self}}` is
/// `a::b`, `a::c::d` and `a::c`.
fn use_paths(text: &str) -> Vec<String> {
    fn tree(s: &[u8], i: &mut usize, prefix: &str, out: &mut Vec<String>) {
        let mut path = prefix.to_string();
        loop {
            while s.get(*i).is_some_and(|b| b.is_ascii_whitespace()) {
                *i += 1;
            }
            if s.get(*i) == Some(&b'{') {
                *i += 1;
                loop {
                    tree(s, i, &path, out);
                    while s.get(*i).is_some_and(|b| b.is_ascii_whitespace()) {
                        *i += 1;
                    }
                    match s.get(*i) {
                        Some(b',') => *i += 1,
                        Some(b'}') => {
                            *i += 1;
                            return;
                        }
                        _ => return,
                    }
                    while s.get(*i).is_some_and(|b| b.is_ascii_whitespace()) {
                        *i += 1;
                    }
                    if s.get(*i) == Some(&b'}') {
                        *i += 1;
                        return;
                    }
                }
            }
            let start = *i;
            while s
                .get(*i)
                .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
            {
                *i += 1;
            }
            let word = std::str::from_utf8(&s[start..*i]).unwrap();
            if word.is_empty() {
                if !path.is_empty() && path != prefix {
                    out.push(path);
                }
                return;
            }
            if word != "self" {
                if !path.is_empty() {
                    path.push_str("::");
                }
                path.push_str(word);
            }
            if s[*i..].starts_with(b"::") {
                *i += 2;
            } else {
                out.push(path);
                return;
            }
        }
    }
    let mut out = Vec::new();
    tree(text.as_bytes(), &mut 0, "", &mut out);
    out
}

/// Every path the code of `file` names from `crate`, `super` or `self`,
/// resolved to a module path from the crate root (`["fill", "Filler"]`),
/// with its line. Comments are passed over.
fn references(file: &Path) -> Vec<(usize, Vec<String>)> {
    let module = module_of(file);
    // `self::` in a file is that file's module; `super::` its parent.
    let at = if module == ["lib"] {
        Vec::new()
    } else {
        module.clone()
    };
    let text = std::fs::read_to_string(file).unwrap();
    // The code without comments, as one string (use trees span lines),
    // and where each line starts in it.
    let mut code = String::new();
    let mut starts = Vec::new();
    for line in text.lines() {
        starts.push(code.len());
        code.push_str(line.split("//").next().unwrap());
        code.push('\n');
    }
    // Test modules come last; `super::` in one is the file's own module.
    let tests = code
        .find("\nmod tests {")
        .or_else(|| code.find("\npub(super) mod tests {"))
        .unwrap_or(code.len());
    let mut out = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(start) {
            let i = from + i;
            from = i + start.len();
            let before = code[..i].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut at = at.clone();
            if i > tests {
                at.push("tests".into());
            }
            let line = starts.partition_point(|&s| s <= i);
            for path in use_paths(&code[i..]) {
                let mut segs: Vec<&str> = path.split("::").collect();
                let mut base = match segs[0] {
                    "crate" => Vec::new(),
                    _ => at.clone(),
                };
                if segs[0] == "self" {
                    segs.remove(0);
                }
                while segs.first() == Some(&"super") {
                    segs.remove(0);
                    base.pop();
                }
                if segs.first() == Some(&"crate") {
                    segs.remove(0);
                }
                base.extend(segs.iter().map(|s| s.to_string()));
                if !base.is_empty() {
                    out.push((line, base));
                }
            }
        }
    }
    out.sort();
    out
}

/// A file as the problems name it: `src/fill/mod.rs`.
fn shown(file: &Path) -> String {
    let rel = file.strip_prefix(src().parent().unwrap()).unwrap();
    rel.display().to_string()
}

/// Whether a module path names a module (a file or directory under
/// `src/`), not an item.
fn is_module(root: &Path, path: &[String]) -> bool {
    let p = root.join(path.join("/"));
    p.is_dir() || p.with_extension("rs").is_file()
}

fn problems() -> Vec<String> {
    let mut problems = Vec::new();
    for file in files(&src()) {
        let module = module_of(&file);
        let own = floor(&module[0]);
        let shown = shown(&file);
        for (line, target) in references(&file) {
            let top = target[0].as_str();
            if top == module[0] {
                continue;
            }
            let theirs = floor(top);
            if theirs >= own {
                problems.push(format!(
                    "{shown}:{line}: {} (floor {own}) imports {} (floor {theirs})",
                    module[0],
                    target.join("::")
                ));
            }
        }
    }
    problems
}

#[test]
fn imports_follow_the_floors() {
    let problems = problems();
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

fn crate_src(name: &str) -> PathBuf {
    src()
        .parent()
        .unwrap()
        .join("crates")
        .join(name)
        .join("src")
}

/// Where a filler other than the kubelet's names `wire`.
fn wire_problems() -> Vec<String> {
    let mut problems = Vec::new();
    let fill = crate_src("fill");
    for file in files(&fill) {
        if file.starts_with(fill.join(WIRE_USER)) {
            continue;
        }
        let from = shown(&file);
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap();
            let named = code.match_indices("wire::").any(|(i, _)| {
                !code[..i]
                    .chars()
                    .last()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
            });
            if named {
                problems.push(format!("{from}:{}: uses wire", n + 1));
            }
        }
    }
    problems
}

/// A package of the workspace as `cargo metadata` reports it: its
/// name, its manifest, and the packages of ours among its dependencies
/// (not its dev-dependencies), without the `gpu-exporter-` prefix.
struct Package {
    name: String,
    manifest: PathBuf,
    ours: Vec<String>,
}

/// `v`'s member `key`.
fn member<'v, 'a>(v: &'v Value<'a>, key: &str) -> &'v Value<'a> {
    let Value::Object(members) = v else {
        panic!("not an object: {v:?}")
    };
    (members.iter().find(|(k, _)| k == key))
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no {key}"))
}

fn string<'v>(v: &'v Value) -> &'v str {
    match v {
        Value::String(s) => s,
        _ => panic!("not a string: {v:?}"),
    }
}

fn array<'v, 'a>(v: &'v Value<'a>) -> &'v [Value<'a>] {
    match v {
        Value::Array(a) => a,
        _ => panic!("not an array: {v:?}"),
    }
}

/// The workspace's packages, from `cargo metadata` (what Cargo itself
/// resolves: every form a manifest may spell a dependency in).
fn packages() -> Vec<Package> {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let doc = base::json::parse(&text).unwrap();
    let ours = |d: &Value| {
        let normal = *member(d, "kind") == Value::Null;
        let name = string(member(d, "name")).strip_prefix("gpu-exporter-");
        name.filter(|_| normal).map(String::from)
    };
    (array(member(&doc, "packages")).iter())
        .map(|p| Package {
            name: string(member(p, "name")).to_string(),
            manifest: string(member(p, "manifest_path")).into(),
            ours: array(member(p, "dependencies"))
                .iter()
                .filter_map(ours)
                .collect(),
        })
        .collect()
}

#[test]
fn the_crates_depend_on_base_alone_and_only_the_kubelets_filler_uses_wire() {
    let packages = packages();
    for (name, allowed) in CRATES {
        let package = (packages.iter())
            .find(|p| p.name == format!("gpu-exporter-{name}"))
            .unwrap_or_else(|| panic!("no package for crates/{name}"));
        for dep in &package.ours {
            assert!(
                allowed.contains(&dep.as_str()),
                "crates/{name} depends on {dep}; it may depend on {allowed:?}"
            );
        }
    }
    let problems = wire_problems();
    assert!(
        problems.is_empty(),
        "of fill only {WIRE_USER} uses wire:\n{}",
        problems.join("\n")
    );
    // The checks see what they look for: the kubelet's filler does use
    // `wire`, and a dev-dependency is not a dependency.
    let kubelet = std::fs::read_to_string(crate_src("fill").join("pods/kubelet.rs")).unwrap();
    assert!(kubelet.contains("wire::"));
    let fill = packages.iter().find(|p| p.name == "gpu-exporter-fill");
    assert_eq!(fill.unwrap().ours, ["base", "model", "wire"]);
}

#[test]
fn every_module_has_a_floor() {
    for file in files(&src()) {
        floor(&module_of(&file)[0]);
    }
}

#[test]
fn the_checker_reads_use_trees_and_resolves_paths() {
    assert_eq!(
        use_paths("crate::a::{b, c::{d, self}, e::F};"),
        [
            "crate::a::b",
            "crate::a::c::d",
            "crate::a::c",
            "crate::a::e::F"
        ]
    );
    assert_eq!(
        use_paths("super::{Source, SourceError};"),
        ["super::Source", "super::SourceError"]
    );
    assert_eq!(use_paths("crate::x::y(1)"), ["crate::x::y"]);
    let load = src().join("app/load.rs");
    let refs: Vec<Vec<String>> = references(&load).into_iter().map(|(_, p)| p).collect();
    assert!(refs.contains(&vec!["config".into(), "engines".into()]));
    let pipeline = references(&src().join("pipeline.rs"));
    assert!(pipeline.iter().any(|(_, p)| p[0] == "config"));
    // A made-up breach is seen: floor 2 naming floor 3.
    assert_eq!(floor("pipeline"), 2);
    assert!(floor("notify") > floor("pipeline"));
}

/// Each module the module table of docs/maintainers.md lists, with its
/// floor.
fn readme_modules() -> BTreeMap<String, u8> {
    let readme =
        std::fs::read_to_string(src().parent().unwrap().join("docs/maintainers.md")).unwrap();
    let mut out = BTreeMap::new();
    for line in readme.lines() {
        let cells: Vec<&str> = line.split(" | ").collect();
        let (Some(floor), Some(module)) = (
            cells
                .first()
                .and_then(|c| c.strip_prefix("| ")?.parse().ok()),
            cells.get(1).and_then(|c| c.strip_prefix("`src/")),
        ) else {
            continue;
        };
        let top = module.split(['/', '.', '`']).next().unwrap().to_string();
        out.insert(top, floor);
    }
    out
}

#[test]
fn the_readme_lists_every_module_on_its_floor() {
    let readme = readme_modules();
    for (module, floor) in FLOORS {
        assert_eq!(
            readme.get(*module),
            Some(floor),
            "docs/maintainers.md's module table: {module} on floor {floor}"
        );
    }
    for module in readme.keys() {
        assert!(
            FLOORS.iter().any(|(m, _)| m == module),
            "docs/maintainers.md lists {module}, which tests/layout.rs does not know"
        );
    }
}

/// Lines of `text` before its `#[cfg(test)]` module.
fn code_lines(text: &str) -> usize {
    text.lines()
        .position(|l| l.starts_with("#[cfg(test)]"))
        .unwrap_or(text.lines().count())
}

#[test]
fn no_file_is_past_600_lines_before_its_tests() {
    for file in all_files() {
        if file.ends_with("sources/src/nvml/ffi.rs") {
            continue; // whole on purpose: it holds all the unsafe code
        }
        let n = code_lines(&std::fs::read_to_string(&file).unwrap());
        assert!(n <= 600, "{}: {n} lines before its tests", file.display());
    }
}

#[test]
fn lib_rs_is_a_table_of_contents() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    assert!(
        lib.lines().count() < 80,
        "lib.rs: {} lines",
        lib.lines().count()
    );
    assert!(!lib.contains("fn "), "lib.rs holds a function");
}

/// The index of the line that opens `text`'s test module, or its
/// number of lines.
fn test_module(text: &str) -> usize {
    text.lines()
        .position(|l| l == "mod tests {" || l == "pub(super) mod tests {")
        .unwrap_or(text.lines().count())
}

/// Whether a manifest takes the workspace's lints.
fn takes_workspace_lints(manifest: &str) -> bool {
    manifest.contains("\n[lints]\nworkspace = true\n")
}

/// The workspace's lints (the root manifest) hold every member's unsafe
/// code to an `allow` that says why and every function to clippy's
/// length (`too_many_lines`, at clippy.toml's threshold, counting code
/// lines only; `.ci/run` denies its warnings). Cargo cannot say that a
/// member takes them: this does. fake-nvml, a C library's double, is
/// unsafe throughout and takes its own.
#[test]
fn every_member_takes_the_workspace_lints() {
    let root = src().parent().unwrap().to_path_buf();
    let config = std::fs::read_to_string(root.join("clippy.toml")).unwrap();
    assert!(
        config
            .lines()
            .any(|l| l.trim() == "too-many-lines-threshold = 80"),
        "{config}"
    );
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    for lint in ["unsafe_code = \"deny\"", "too_many_lines = \"warn\""] {
        assert!(manifest.contains(&format!("\n{lint}\n")), "no {lint}");
    }
    let packages = packages();
    assert!(packages.len() >= 12, "{} packages", packages.len());
    for p in packages.iter().filter(|p| p.name != "fake-nvml") {
        let own = std::fs::read_to_string(&p.manifest).unwrap();
        assert!(
            takes_workspace_lints(&own),
            "{}: no [lints] workspace = true",
            p.manifest.display()
        );
    }
    assert!(!takes_workspace_lints(
        "[package]\nname = \"x\"\n[dependencies]\n"
    ));
}

/// The file that holds what a module path names: its longest prefix that
/// is a module, `lib.rs` when none is.
fn file_of(root: &Path, path: &[String]) -> PathBuf {
    let n = (1..=path.len())
        .rev()
        .find(|&n| is_module(root, &path[..n]))
        .unwrap_or(0);
    let p = root.join(path[..n].join("/"));
    match n {
        0 => root.join("lib.rs"),
        _ if p.is_dir() => p.join("mod.rs"),
        _ => p.with_extension("rs"),
    }
}

/// Which files each file imports from, as the problems name them. A
/// test module's imports are passed over: tests may reach anywhere.
fn file_graph(root: &Path) -> BTreeMap<String, Vec<String>> {
    let mut graph = BTreeMap::new();
    for file in files(root) {
        let from = shown(&file);
        let tests = test_module(&std::fs::read_to_string(&file).unwrap());
        let mut to: Vec<String> = references(&file)
            .iter()
            .filter(|(line, _)| *line <= tests)
            .map(|(_, path)| shown(&file_of(root, path)))
            .filter(|to| *to != from)
            .collect();
        to.sort();
        to.dedup();
        graph.insert(from, to);
    }
    graph
}

/// The shortest way from `from` to `to` along `graph`, both ends
/// included, if there is one.
fn shortest_path(
    graph: &BTreeMap<String, Vec<String>>,
    from: &str,
    to: &str,
) -> Option<Vec<String>> {
    let mut came: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([from]);
    while let Some(at) = queue.pop_front() {
        if at == to {
            let mut path = vec![to.to_string()];
            let mut at = to;
            while at != from {
                at = came[at];
                path.push(at.to_string());
            }
            path.reverse();
            return Some(path);
        }
        for next in graph.get(at).into_iter().flatten() {
            if next != from && !came.contains_key(next.as_str()) {
                came.insert(next, at);
                queue.push_back(next);
            }
        }
    }
    None
}

/// Each import on a cycle, `a.rs -> b.rs`, with the cycle it closes:
/// `a.rs -> b.rs -> a.rs`.
fn cycles(graph: &BTreeMap<String, Vec<String>>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (from, tos) in graph {
        for to in tos {
            if let Some(back) = shortest_path(graph, to, from) {
                out.push((
                    format!("{from} -> {to}"),
                    format!("{from} -> {}", back.join(" -> ")),
                ));
            }
        }
    }
    out
}

#[test]
fn no_files_import_each_other_in_a_cycle() {
    let mut roots = vec![src()];
    roots.extend(CRATES.iter().map(|(c, _)| crate_src(c)));
    let problems: Vec<String> = (roots.iter())
        .flat_map(|root| cycles(&file_graph(root)))
        .map(|(_, cycle)| cycle)
        .collect();
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_cycle_check_finds_a_cycle_and_resolves_files() {
    let graph: BTreeMap<String, Vec<String>> = [
        ("a.rs", vec!["b.rs"]),
        ("b.rs", vec!["c.rs"]),
        ("c.rs", vec!["a.rs", "d.rs"]),
        ("d.rs", vec![]),
    ]
    .into_iter()
    .map(|(f, t)| (f.into(), t.into_iter().map(String::from).collect()))
    .collect();
    let found = cycles(&graph);
    assert_eq!(found.len(), 3, "{found:?}");
    assert_eq!(
        found[0],
        ("a.rs -> b.rs".into(), "a.rs -> b.rs -> c.rs -> a.rs".into())
    );
    let path = |p: &str| p.split("::").map(String::from).collect::<Vec<_>>();
    assert!(file_of(&src(), &path("notify::payload::x")).ends_with("notify/payload.rs"));
    assert!(file_of(&src(), &path("notify::Stats")).ends_with("notify/mod.rs"));
    assert!(file_of(&src(), &path("Error")).ends_with("lib.rs"));
    // A crate's files are read from its own root: readings.rs names the
    // model's root items.
    let model = file_graph(&crate_src("model"));
    assert!(
        model["crates/model/src/readings.rs"].contains(&"crates/model/src/lib.rs".to_string()),
        "{model:?}"
    );
}

/// One meaning per name: `judge` is the alert evaluator's thread
/// (`crates/poller/src/judge.rs`), `signals` the rules' signals (`crates/alerts/`), `tls`
/// the connection (`crates/http/`), `Watch` the web config file's watcher
/// (`crates/webconfig/`). Unix signals, the web config's TLS, the engine
/// reader and the readers' verdicts are named for what they are.
#[test]
fn judge_signals_and_tls_have_one_meaning_each() {
    let owners = [
        ("judge.rs", "crates/poller/src/judge.rs"),
        ("signals.rs", "crates/alerts/src/signals.rs"),
        ("tls.rs", "crates/http/src/tls.rs"),
    ];
    for file in all_files() {
        let shown = shown(&file);
        let name = file.file_name().unwrap().to_string_lossy();
        for (stem, owner) in owners {
            assert!(
                name != stem || shown == owner,
                "{shown}: only {owner} is named {stem}"
            );
        }
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            shown == "crates/poller/src/judge.rs" || !text.contains("fn judge("),
            "{shown}: a function named judge; the judge is crates/poller/src/judge.rs's thread"
        );
        assert!(
            shown == "crates/webconfig/src/lib.rs" || !text.contains("pub struct Watch "),
            "{shown}: a Watch; Watch is the web config file's watcher"
        );
    }
}

/// Whether `code` names `module` of its crate: `crate::smi`,
/// `super::smi`, `super::super::smi`.
fn names_module(code: &str, module: &str) -> bool {
    code.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .any(|path| {
            let rest = path
                .strip_prefix("crate::")
                .or_else(|| path.strip_prefix("super::"))
                .map(|r| r.trim_start_matches("super::"));
            rest.is_some_and(|r| r == module || r.starts_with(&format!("{module}::")))
        })
}

#[test]
fn no_source_or_filler_reaches_into_another() {
    let mut problems = Vec::new();
    for (krate, members) in MEMBERS {
        problems.extend(reaching(&crate_src(krate), members));
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
    assert!(names_module("use super::super::smi::csv;", "smi"));
    assert!(names_module("x(crate::sim::Sim::new())", "sim"));
    assert!(!names_module("use crate::simple;", "sim"));
}

/// Where a member of `root`'s crate names another of `members`.
fn reaching(root: &Path, members: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    for own in members {
        let dir = root.join(own);
        let own_files = match dir.is_dir() {
            true => files(&dir),
            false => vec![dir.with_extension("rs")],
        };
        for file in own_files {
            let text = std::fs::read_to_string(&file).unwrap();
            let code: String = text
                .lines()
                .map(|l| l.split("//").next().unwrap())
                .collect::<Vec<_>>()
                .join("\n");
            for other in members.iter().filter(|o| *o != own) {
                if names_module(&code, other) {
                    problems.push(format!("{}: {own} names {other}", shown(&file)));
                }
            }
        }
    }
    problems
}
