//! dcgm-exporter's command line and environment, for an image the
//! dcgm-exporter Helm chart or the GPU Operator starts unchanged: started
//! as `dcgm-exporter` (the name it runs under, argv[0]) or with
//! [`MODE`] first, the binary reads every flag of dcgm-exporter's
//! `pkg/cmd/app.go` and, where a flag is not given, its environment
//! variable, as urfave/cli does. Each flag is spelled as ours
//! ([`DCGM_FLAGS`], the table of docs/migrating-from-dcgm-exporter.md),
//! or accepted with one warning where we have nothing like it. Our own
//! flags may follow too. A flag dcgm-exporter does not have, or a value it
//! would refuse, is exit code 2.

use super::{Action, flags, parse_args, wrap};
use crate::config::values::parse_listen;
use crate::config::{Command, ConfigError};
use std::ffi::OsString;
use std::path::Path;

mod table;
pub use table::DCGM_FLAGS;

/// The first argument that starts the compatibility mode.
pub const MODE: &str = "--compat.dcgm-exporter-cli";

/// The counters file dcgm-exporter reads without `-f`, which the image
/// carries.
pub const DEFAULT_COLLECTORS: &str = "/etc/dcgm-exporter/default-counters.csv";

/// How urfave/cli reads a flag's value.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Kind {
    /// `-k`, `-k=false`; the environment's as Go's `strconv.ParseBool`.
    Bool,
    /// A string, taken as it is.
    Text,
    /// A decimal integer.
    Int,
    /// Go's `time.ParseDuration`: `10s`, `1m30s`, `500ms`.
    Duration,
    /// Comma-separated, repeatable.
    List,
}

/// What we do with one of its flags.
#[derive(Clone, Copy)]
enum Does {
    /// Our flags for its value, `None` where neither the flag nor its
    /// variable is given; an error is about the value.
    Maps(fn(&mut Ours, Option<&str>) -> Result<(), String>),
    /// Accepted, and where given other than its default, one warning with
    /// why it is ignored.
    Ignored,
}

/// One flag of dcgm-exporter's `pkg/cmd/app.go`.
pub struct DcgmFlag {
    /// Its long name, without dashes.
    pub name: &'static str,
    /// Its other names (`f` for `collectors`).
    pub aliases: &'static [&'static str],
    /// The environment variable urfave/cli reads it from.
    pub env: &'static str,
    /// How its value is read.
    pub kind: Kind,
    /// Its default, as dcgm-exporter spells it; empty for none.
    pub default: &'static str,
    /// What we do with it, for the table and `--help`.
    pub means: &'static str,
    does: Does,
}

/// What the flags become: our flags, and warnings for the log.
#[derive(Default)]
struct Ours {
    args: Vec<String>,
    notes: Vec<String>,
    kubernetes: bool,
}

impl Ours {
    fn push(&mut self, args: &[&str]) {
        self.args.extend(args.iter().map(|a| a.to_string()));
    }
}

const fn row(
    name: &'static str,
    aliases: &'static [&'static str],
    env: &'static str,
    kind: Kind,
    default: &'static str,
    means: &'static str,
    does: Does,
) -> DcgmFlag {
    DcgmFlag {
        name,
        aliases,
        env,
        kind,
        default,
        means,
        does,
    }
}

/// A path flag: ours with it, where given and not empty.
fn path(o: &mut Ours, v: Option<&str>, ours: &str) -> Result<(), String> {
    if let Some(p) = v.filter(|p| !p.is_empty()) {
        o.push(&[ours, p]);
    }
    Ok(())
}

/// A bool flag: `ours` where it is true.
fn switch(o: &mut Ours, v: Option<&str>, ours: &[&str]) -> Result<(), String> {
    if v == Some("true") {
        o.push(ours);
    }
    Ok(())
}

/// A timeout flag's Go duration as ours, in ms.
fn timeout(o: &mut Ours, v: Option<&str>, ours: &str) -> Result<(), String> {
    if let Some(v) = v {
        match go_duration(v)? {
            0 => o.notes.push(format!(
                "{v:?} (no timeout) is not offered: {ours} keeps its default"
            )),
            ms => o.push(&[ours, &format!("{ms}ms")]),
        }
    }
    Ok(())
}

/// A device option as dcgm-exporter checks it (`f`, `g[:ids]`, `i[:ids]`,
/// `g[:ids]+i[:ids]`, ids `0,2-4`); other than `f`, one warning `why`.
fn devices(o: &mut Ours, v: Option<&str>, flag: &str, why: &str) -> Result<(), String> {
    let Some(v) = v.filter(|v| *v != "f") else {
        return Ok(());
    };
    let part = |p: &str, letter: char| {
        let Some(rest) = p.strip_prefix(letter) else {
            return false;
        };
        let Some(ids) = rest.strip_prefix(':') else {
            return rest.is_empty();
        };
        !ids.is_empty()
            && ids.split(',').all(|r| {
                let mut ends = r.splitn(2, '-');
                ends.all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
    };
    let ok = match v.split_once('+') {
        Some((g, i)) => part(g, 'g') && part(i, 'i'),
        None => part(v, 'g') || part(v, 'i'),
    };
    if !ok {
        return Err(format!(
            "{v:?} is not f, g[:ids], i[:ids] or g[:ids]+i[:ids] (ids like 0,2-4)"
        ));
    }
    o.notes
        .push(format!("dcgm-exporter's {flag} {v} is not followed: {why}"));
    Ok(())
}

/// Go's `strconv.ParseBool`, as urfave/cli reads a bool's variable.
fn go_bool(v: &str) -> Result<bool, String> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("{v:?} is not a boolean (true or false)")),
    }
}

fn int(v: &str) -> Result<i64, String> {
    v.parse().map_err(|_| format!("{v:?} is not an integer"))
}

/// Go's `time.ParseDuration` (`1m30s`, `500ms`, `1.5h`), in whole ms.
fn go_duration(v: &str) -> Result<u64, String> {
    let bad = || format!("{v:?} is not a duration like 10s, 1m30s or 500ms");
    let (mut rest, mut total) = (v, 0f64);
    if rest == "0" {
        return Ok(0);
    }
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let number: f64 = rest[..n].parse().map_err(|_| bad())?;
        let unit_end = rest[n..]
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .map_or(rest.len(), |i| n + i);
        let ms = match &rest[n..unit_end] {
            "ns" => 1e-6,
            "us" | "µs" => 1e-3,
            "ms" => 1.0,
            "s" => 1e3,
            "m" => 6e4,
            "h" => 3.6e6,
            _ => return Err(bad()),
        };
        total += number * ms;
        rest = &rest[unit_end..];
    }
    Ok(total.round() as u64)
}

impl DcgmFlag {
    /// Its names as `--help` spells them: `-f, --collectors`.
    pub fn spelled(&self) -> String {
        let mut names: Vec<String> = self.aliases.iter().map(|a| format!("-{a}")).collect();
        names.push(format!("--{}", self.name));
        names.join(", ")
    }

    /// Whether `name` (without dashes) is one of its names.
    fn named(&self, name: &str) -> bool {
        self.name == name || self.aliases.contains(&name)
    }

    /// Its value checked as urfave/cli checks it; a bool as `true` or
    /// `false`.
    fn checked(&self, v: &str) -> Result<String, String> {
        match self.kind {
            Kind::Bool => go_bool(v).map(|b| b.to_string()),
            Kind::Int => int(v).map(|_| v.to_string()),
            Kind::Duration => go_duration(v).map(|_| v.to_string()),
            Kind::Text | Kind::List => Ok(v.to_string()),
        }
    }

    /// The warning for an ignored flag given `v`, unless `v` is its default.
    fn warning(&self, v: &str, from: &str) -> Option<String> {
        (v != self.default).then(|| {
            let why = self.means.trim_start_matches("ignored with a warning");
            format!("dcgm-exporter's {from} {v:?} is ignored{why}")
        })
    }
}

/// A command line read: each of [`DCGM_FLAGS`]' values with the name it
/// was given by, our own flags, and what is ignored.
#[derive(Default)]
struct Line {
    given: Vec<Option<(String, String)>>,
    ours: Vec<String>,
    notes: Vec<String>,
}

/// The flags and environment read, dcgm-exporter's way: the command line
/// (last word wins; a list flag gathers) over its environment variable.
pub fn parse(
    args: Vec<OsString>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Command, ConfigError> {
    let mut line = match read(args)? {
        Ok(line) => line,
        Err(early) => return Ok(early),
    };
    let mut o = Ours {
        notes: std::mem::take(&mut line.notes),
        ..Ours::default()
    };
    for (f, given) in DCGM_FLAGS.iter().zip(line.given) {
        let given = match given {
            Some(g) => Some(g),
            None => match env(f.env).filter(|v| !v.is_empty()) {
                Some(v) => Some((
                    f.env.to_string(),
                    f.checked(&v)
                        .map_err(|e| ConfigError(format!("{}: {e}", f.env)))?,
                )),
                None => None,
            },
        };
        match (f.does, &given) {
            (Does::Maps(map), _) => {
                map(&mut o, given.as_ref().map(|g| g.1.as_str())).map_err(|e| {
                    ConfigError(format!("{}: {e}", given.as_ref().map_or(f.name, |g| &g.0)))
                })?
            }
            (Does::Ignored, Some((from, v))) => o.notes.extend(f.warning(v, from)),
            (Does::Ignored, None) => {}
        }
    }
    let mut args = vec![
        "--collector.disable-defaults".to_string(),
        "--collector.dcgm".into(),
    ];
    args.append(&mut o.args);
    args.append(&mut line.ours);
    let mut command = parse_args(args)?;
    if let Command::Run(c) = &mut command {
        c.notes = o.notes;
    }
    Ok(command)
}

/// The command line, as Go's flag package reads it: `-f V`, `--f V`,
/// `-f=V`, a bool alone; it stops at `--` or the first argument that is
/// no flag. `Err`: `--help` or `--version`, at once.
fn read(args: Vec<OsString>) -> Result<Result<Line, Command>, ConfigError> {
    let bad = |m: String| ConfigError(m);
    let mut line = Line {
        given: DCGM_FLAGS.iter().map(|_| None).collect(),
        ..Line::default()
    };
    let mut it = args.into_iter().map(|a| {
        a.into_string()
            .map_err(|a| bad(format!("argument {a:?} is not UTF-8")))
    });
    while let Some(arg) = it.next() {
        let arg = arg?;
        let Some(flag) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            // dcgm-exporter ignores the rest.
            line.notes.push(format!(
                "argument {arg:?} and those after it are ignored, as dcgm-exporter ignores them"
            ));
            break;
        };
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (flag, None),
        };
        match name {
            "" => break,
            "h" | "help" => return Ok(Err(Command::Print(usage()))),
            "v" | "version" => return Ok(Err(Command::Version)),
            _ => {}
        }
        if let Some(i) = DCGM_FLAGS.iter().position(|f| f.named(name)) {
            let f = &DCGM_FLAGS[i];
            let v = match (inline, f.kind) {
                (Some(v), _) => v,
                (None, Kind::Bool) => "true".into(),
                (None, _) => it
                    .next()
                    .transpose()?
                    .ok_or_else(|| bad(format!("dcgm-exporter flag {arg}: missing value")))?,
            };
            let v = f
                .checked(&v)
                .map_err(|e| bad(format!("dcgm-exporter flag {arg}: {e}")))?;
            let v = match (&line.given[i], f.kind) {
                (Some((_, before)), Kind::List) => format!("{before},{v}"),
                _ => v,
            };
            line.given[i] = Some((format!("--{}", f.name), v));
            continue;
        }
        // Ours: never one of dcgm-exporter's names.
        let Some(our) = flags().find(|f| {
            f.name == format!("--{name}")
                || f.name
                    .strip_suffix("NAME")
                    .is_some_and(|p| arg.starts_with(p))
        }) else {
            return Err(bad(format!(
                "unknown dcgm-exporter flag {arg} (see {MODE} --help)"
            )));
        };
        line.ours.push(arg.clone());
        if let (Action::Set(_), None, Some(v)) = (our.action, &inline, it.next()) {
            line.ours.push(v?);
        }
    }
    Ok(Ok(line))
}

/// The environment variables of [`DCGM_FLAGS`] set where the mode is off:
/// one warning that they are not read.
pub fn unread(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let set: Vec<&str> = DCGM_FLAGS
        .iter()
        .map(|f| f.env)
        .filter(|e| e.starts_with("DCGM_") && env(e).is_some())
        .collect();
    (!set.is_empty()).then(|| {
        format!(
            "{} {} dcgm-exporter's, read only in its mode ({MODE} first, or the image's -dcgm tag): ignored",
            set.join(", "),
            if set.len() == 1 { "is" } else { "are" }
        )
    })
}

/// `--help` in dcgm-exporter's mode: its flags, each with its variable,
/// default and what we do.
pub fn usage() -> String {
    let mut out = format!(
        "gpu-exporter in dcgm-exporter's mode: its flags and environment, then ours if any\n\n\
         USAGE: gpu-exporter {MODE} [DCGM-EXPORTER FLAGS] [OUR FLAGS]\n       \
         dcgm-exporter [DCGM-EXPORTER FLAGS] [OUR FLAGS]   (the binary run under that name)\n\n"
    );
    let rows: Vec<(String, String)> = DCGM_FLAGS
        .iter()
        .map(|f| {
            let default = match f.default {
                "" => String::new(),
                d => format!(", default {d}"),
            };
            let means = f.means.replace('`', "");
            (f.spelled(), format!("({}{default}) {means}", f.env))
        })
        .collect();
    let column = rows.iter().map(|r| r.0.len()).max().unwrap_or(0) + 4;
    for (spelled, help) in rows {
        wrap(&mut out, &spelled, &help, column);
    }
    out
}

/// The table of docs/migrating-from-dcgm-exporter.md.
#[cfg(test)]
pub fn readme_table() -> String {
    let mut t = String::from(
        "| dcgm-exporter flag | environment variable | its default | what gpu-exporter does |\n|---|---|---|---|\n",
    );
    for f in DCGM_FLAGS {
        let default = match f.default {
            "" => String::new(),
            d => format!("`{d}`"),
        };
        t += &format!(
            "| `{}` | `{}` | {default} | {} |\n",
            f.spelled(),
            f.env,
            f.means
        );
    }
    t
}

/// Whether the binary runs under dcgm-exporter's name.
pub fn named(argv0: &std::ffi::OsStr) -> bool {
    Path::new(argv0)
        .file_name()
        .is_some_and(|n| n == "dcgm-exporter")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    const DCP: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/dcgm/dcp-metrics-included.csv"
    );

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn dcgm(args: &[&str], env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let env = |k: &str| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        match parse(args.iter().map(OsString::from).collect(), &env)? {
            Command::Run(c) => Ok(*c),
            _ => panic!("{args:?}"),
        }
    }

    fn ours(args: &[&str]) -> Config {
        let mut all = vec![
            "--collector.disable-defaults",
            "--collector.dcgm",
            "--collect.interval",
            "30000ms",
            "--kubernetes.pod-resources-socket",
            "",
        ];
        all.extend(args);
        match parse_args(all).unwrap() {
            Command::Run(c) => *c,
            _ => unreachable!(),
        }
    }

    /// docs/migrating-from-dcgm-exporter.md's flag table is [`readme_table`].
    #[test]
    fn readme_lists_dcgm_exporters_flags() {
        crate::testkit::readme::holds("dcgm-exporter-flags", &readme_table());
    }

    /// A value of `f`'s kind that is not its default.
    fn sample(f: &DcgmFlag) -> &'static str {
        match (f.name, f.kind) {
            ("collectors", _) => DCP,
            ("address", _) => "127.0.0.1:9500",
            ("devices" | "switch-devices" | "cpu-devices", _) => "g:0,2-3+i",
            ("kubernetes-gpu-id-type", _) => "device-name",
            ("log-format", _) => "json",
            (_, Kind::Bool) if f.default == "true" => "false",
            (_, Kind::Bool) => "true",
            (_, Kind::Int) => "1000",
            (_, Kind::Duration) => "1m30s",
            (_, Kind::Text | Kind::List) => "/x",
        }
    }

    /// Every flag by each of its names and by its variable gives the same
    /// configuration; an ignored one given other than its default says so
    /// once, and given its default, nothing.
    #[test]
    fn every_flag_by_name_alias_and_environment() {
        let base = dcgm(&[], &[]).unwrap();
        assert!(base.notes.is_empty(), "{:?}", base.notes);
        for f in DCGM_FLAGS {
            let v = sample(f);
            // A build without TLS refuses a web config, as ours does.
            if f.name == "web-config-file" && !cfg!(feature = "tls") {
                let e = dcgm(&[], &[(f.env, v)]).unwrap_err().0;
                assert!(e.contains("without the tls feature"), "{e}");
                continue;
            }
            let by_env = dcgm(&[], &[(f.env, v)]).unwrap_or_else(|e| panic!("{}: {e}", f.env));
            for name in std::iter::once(&f.name).chain(f.aliases) {
                let flag = format!("--{name}={v}");
                let c = dcgm(&[&flag], &[]).unwrap_or_else(|e| panic!("{flag}: {e}"));
                assert_eq!(
                    Config {
                        notes: vec![],
                        ..c.clone()
                    },
                    Config {
                        notes: vec![],
                        ..by_env.clone()
                    },
                    "{flag}"
                );
                assert_eq!(c.notes.len(), by_env.notes.len(), "{flag}");
                // One dash as well as two, as Go's flag package reads them.
                let one = dcgm(&[&format!("-{name}"), v], &[]);
                if f.kind != Kind::Bool {
                    assert_eq!(one.unwrap().notes, c.notes, "-{name}");
                }
            }
            let notes = &by_env.notes;
            match f.does {
                Does::Ignored => {
                    assert_eq!(notes.len(), 1, "{}: {notes:?}", f.name);
                    assert!(notes[0].contains(f.env) && notes[0].contains("ignored"));
                    if !f.default.is_empty() {
                        let d = dcgm(&[], &[(f.env, f.default)]).unwrap();
                        assert!(d.notes.is_empty(), "{}: {:?}", f.name, d.notes);
                    }
                }
                Does::Maps(_) => {
                    assert!(notes.len() <= 1 && by_env != base, "{}: {notes:?}", f.name)
                }
            }
            // The command line wins over the environment: its default
            // given says nothing where the variable would.
            if matches!(f.does, Does::Ignored) && !f.default.is_empty() && f.kind != Kind::List {
                let both = dcgm(&[&format!("--{}={}", f.name, f.default)], &[(f.env, v)]);
                assert_eq!(both.unwrap().notes.len(), 0, "{}", f.name);
            }
        }
    }

    /// Each flag we implement is our flags, spelled dcgm-exporter's way.
    #[test]
    fn implemented_flags_are_ours() {
        let web = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
        for (theirs, same) in [
            (&["-f", DCP][..], &["--compat.dcgm-counters", DCP][..]),
            (
                &["-a", "127.0.0.1:9500"],
                &["--web.listen-address=127.0.0.1:9500"],
            ),
            (&["-c", "2500"], &["--collect.interval=2500ms"]),
            (&["-c", "20"], &["--collect.interval=100ms"]),
            (&["-n"], &["--compat.dcgm-no-hostname"]),
            (&["-o"], &["--compat.dcgm-old-namespace"]),
            (&["-rbmn"], &["--compat.dcgm-model-dashes"]),
            (&["-x", "60000"], &["--compat.dcgm-xid-window=1m"]),
            (&["--web-config-file", web], &["--web.config.file", web]),
            (&["--debug"], &["--log.level=debug"]),
            (&["--log-format=json"], &["--log.format=json"]),
            (&["--web-systemd-socket"], &["--web.systemd-socket"]),
            (
                &["--hpc-job-mapping-dir", "/j"],
                &["--hpc.job-mapping-dir=/j"],
            ),
            (
                &["--web-read-timeout", "1m30s"],
                &["--web.header-timeout=90s"],
            ),
            (
                &["--web-write-timeout", "250ms"],
                &["--web.write-timeout=250ms"],
            ),
            (
                &["--max-concurrent-scrapes", "7"],
                &["--web.max-requests=7"],
            ),
            // Ours after theirs.
            (
                &["-n", "--source", "sim", "--once"],
                &["--compat.dcgm-no-hostname", "--source=sim", "--once"],
            ),
        ] {
            if theirs[0] == "--web-config-file" && !cfg!(feature = "tls") {
                continue;
            }
            let got = dcgm(theirs, &[]).unwrap_or_else(|e| panic!("{theirs:?}: {e}"));
            assert_eq!(
                Config {
                    notes: vec![],
                    ..got
                },
                ours(same),
                "{theirs:?}"
            );
        }
    }

    /// The GPU Operator's DaemonSet: environment only.
    #[test]
    #[cfg_attr(not(feature = "kubernetes"), ignore)]
    fn the_gpu_operators_environment_is_our_flags() {
        let c = dcgm(
            &[],
            &[
                ("DCGM_EXPORTER_LISTEN", ":9400"),
                ("DCGM_EXPORTER_KUBERNETES", "true"),
                ("DCGM_EXPORTER_COLLECTORS", DCP),
                ("DCGM_REMOTE_HOSTENGINE_INFO", "nvidia-dcgm:5555"),
            ],
        )
        .unwrap();
        let mut want = ours(&["--compat.dcgm-counters", DCP, "--kubernetes.pod-labels"]);
        want.kubernetes.socket = None;
        assert_eq!(c.notes.len(), 1, "{:?}", c.notes);
        assert!(c.notes[0].contains("DCGM_REMOTE_HOSTENGINE_INFO"));
        assert_eq!(Config { notes: vec![], ..c }, want);
        let c = dcgm(&["-k", "--pod-resources-kubelet-socket", "/k.sock"], &[]).unwrap();
        assert_eq!(c.kubernetes.socket, Some("/k.sock".into()));
        assert!(c.kubernetes.pod_labels);
    }

    #[test]
    fn bad_flags_and_values_are_one_line() {
        for (args, env, want) in [
            (&["-z"][..], &[][..], "unknown dcgm-exporter flag -z"),
            (
                &["--collector.gpus"],
                &[],
                "--collector.gpus: unknown collector",
            ),
            (
                &["-c", "fast"],
                &[],
                "dcgm-exporter flag -c: \"fast\" is not an integer",
            ),
            (
                &["-c", "0"],
                &[],
                "--collect-interval: \"0\" is not above 0",
            ),
            (
                &["-k=maybe"],
                &[],
                "dcgm-exporter flag -k=maybe: \"maybe\" is not a boolean",
            ),
            (
                &[],
                &[("DCGM_EXPORTER_KUBERNETES", "yes")],
                "DCGM_EXPORTER_KUBERNETES: \"yes\" is not a boolean",
            ),
            (
                &[],
                &[("DCGM_EXPORTER_INTERVAL", "1s")],
                "DCGM_EXPORTER_INTERVAL: \"1s\" is not an integer",
            ),
            (&["-d", "x"], &[], "--devices: \"x\" is not f, g"),
            (&["-d", "g:"], &[], "--devices"),
            (
                &["-a", "nowhere"],
                &[],
                "--address: \"nowhere\" is not HOST:PORT",
            ),
            (
                &["--log-format", "xml"],
                &[],
                "--log-format: \"xml\" is not text or json",
            ),
            (
                &["--kubernetes-gpu-id-type", "pci"],
                &[],
                "--kubernetes-gpu-id-type",
            ),
            (&["--web-read-timeout", "10"], &[], "is not a duration"),
            (&["-f"], &[], "dcgm-exporter flag -f: missing value"),
            (
                &["-f", "/nonexistent/c.csv"],
                &[],
                "--compat.dcgm-counters /nonexistent/c.csv",
            ),
            (&["-x", "-5"], &[], "--xid-count-window-size"),
        ] {
            let e = dcgm(args, env).unwrap_err().0;
            assert!(e.contains(want), "{args:?} {env:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        // Go stops at the first argument that is no flag; so do we, saying so.
        let c = dcgm(&["-n", "stray", "-z"], &[]).unwrap();
        assert_eq!(c.dcgm_hostname, (false, true));
        assert!(c.notes[0].contains("\"stray\""), "{:?}", c.notes);
        assert!(matches!(
            parse(vec!["-h".into()], &no_env),
            Ok(Command::Print(_))
        ));
        assert!(matches!(
            parse(vec!["--version".into()], &no_env),
            Ok(Command::Version)
        ));
    }

    #[test]
    fn the_mode_and_the_name_select_it() {
        let run = |argv0: &str, args: &[&str], env: &[(&str, &str)]| {
            let env = |k: &str| {
                env.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            };
            let args = args.iter().map(OsString::from).collect();
            match super::super::parse_command_line(argv0.as_ref(), args, &env) {
                Ok(Command::Run(c)) => Ok(*c),
                Ok(_) => panic!(),
                Err(e) => Err(e.0),
            }
        };
        let env = [("DCGM_EXPORTER_INTERVAL", "2000")];
        let a = run("/usr/bin/gpu-exporter", &[MODE, "-n"], &env).unwrap();
        let b = run("/usr/local/bin/dcgm-exporter", &["-n"], &env).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.interval, std::time::Duration::from_secs(2));
        // Our own mode: their variables are named as not read.
        let c = run("gpu-exporter", &["--source", "sim"], &env).unwrap();
        assert_eq!(c.interval, std::time::Duration::from_secs(1));
        assert_eq!(c.notes.len(), 1);
        assert!(
            c.notes[0].starts_with("DCGM_EXPORTER_INTERVAL is dcgm-exporter's"),
            "{:?}",
            c.notes
        );
        let e = run("gpu-exporter", &["-n", MODE], &[]).unwrap_err();
        assert!(e.contains("unknown flag -n"), "{e}");
        let e = run("gpu-exporter", &["--once", MODE], &[]).unwrap_err();
        assert_eq!(e, format!("{MODE} must be the first argument"));
    }

    #[test]
    fn help_lists_every_flag_within_100_columns() {
        let help = usage();
        for f in DCGM_FLAGS {
            assert_eq!(
                help.matches(&format!("\n  {} ", f.spelled())).count(),
                1,
                "{}",
                f.name
            );
            assert!(help.contains(f.env));
        }
        for line in help.lines().chain(super::super::usage().lines()) {
            assert!(line.len() <= 100, "{line}");
        }
        assert_eq!(go_duration("1.5h2m"), Ok(5_520_000));
        assert_eq!(go_duration("500us"), Ok(1));
        assert!(go_duration("5x").is_err() && go_duration("s").is_err());
    }
}
