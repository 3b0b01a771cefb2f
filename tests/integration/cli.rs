use crate::common::{BIN, Exporter, run, temp_file};
use std::collections::BTreeMap;
use std::net::TcpListener;

const SEED_TABLE: &str = "\
== scrape + alert evaluation ==
gpu 0: temp=71C clocks=1410MHz throttled=no  xid_5m=0  largest_free=18GB   OK
gpu 1: temp=88C clocks=1100MHz throttled=YES xid_5m=0  largest_free=16GB   -> GPUThrottling
gpu 2: temp=70C clocks=1410MHz throttled=no  xid_5m=2  largest_free=15GB   -> GPUXidErrors
gpu 3: temp=69C clocks=1410MHz throttled=no  xid_5m=0  largest_free=1GB    -> KVFragmentationRisk

alerts fired: GPUThrottling(gpu1), GPUXidErrors(gpu2), KVFragmentationRisk(gpu3)
healthy gpu0 fired nothing.
";

#[test]
fn once_prints_the_seed_table() {
    let out = run(&["--once"]);
    assert_eq!(out.status.code(), Some(0));
    let table = String::from_utf8(out.stdout).unwrap();
    let (seed, slo) = table.split_at(SEED_TABLE.len());
    assert_eq!(seed, SEED_TABLE);
    // The SLO section: one model burns its budget fast, one is healthy.
    let lines: Vec<&str> = slo.lines().collect();
    assert_eq!(
        lines[1],
        "== SLO: 99.9% of requests get their first token within 300ms =="
    );
    assert!(
        lines[2].starts_with("model llama-3.1-70b-instruct: burn 5m=30.0x"),
        "{slo}"
    );
    assert!(
        lines[2].ends_with("-> TTFTBudgetBurn [page], TTFTBudgetBurnSlow [ticket]"),
        "{slo}"
    );
    assert!(
        lines[3].starts_with("model mistral-7b-instruct: burn 5m=0.2x 1h=0.2x"),
        "{slo}"
    );
    assert!(lines[3].ends_with("  OK"), "{slo}");
    assert_eq!(lines.len(), 4);
}

#[test]
fn once_with_a_scenario() {
    let path = temp_file(
        "healthy.json",
        r#"{"gpus":[{"temperature_celsius":50},{"temperature_celsius":51,"clock_events":["sw_power_cap"]}]}"#,
    );
    let out = run(&["--once", "--sim.scenario", path.to_str().unwrap()]);
    let table = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0));
    // sw_power_cap alone is normal under load: nothing fires.
    assert!(table.contains("gpu 1: temp=51C"), "{table}");
    assert!(
        table.contains("alerts fired: none\nhealthy gpu0, gpu1 fired nothing.\n"),
        "{table}"
    );
}

/// A bad configuration is one line on stderr naming it, and exit code 2.
pub fn bad(args: &[&str], names: &str) {
    let out = run(args);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(names), "{args:?}: {err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_configuration_exits_2() {
    bad(&["--frobnicate"], "--frobnicate");
    bad(&["--collect.interval", "soon"], "--collect.interval");
    bad(
        &["--web.listen-address", "nowhere:x"],
        "--web.listen-address",
    );
    bad(
        &["--sim.scenario", "/nonexistent/scenario.json"],
        "/nonexistent/scenario.json",
    );
    let p = temp_file("bad.json", r#"{"gpus":[{"temperature_celsius":999}]}"#);
    bad(
        &["--sim.scenario", p.to_str().unwrap()],
        "gpus[0].temperature_celsius",
    );
    let p = temp_file("broken.json", "{\"gpus\": [");
    bad(&["--sim.scenario", p.to_str().unwrap()], "broken.json");
    // A simulator start to come, or from before its counters began.
    bad(
        &["--sim.start", "2099-01-01T00:00:00Z"],
        "--sim.start: 2099-01-01T00:00:00.000Z is in the future",
    );
    bad(
        &["--sim.start", "1700000000"],
        "--sim.start: 2023-11-14T22:13:20.000Z is before the simulated driver loaded",
    );
    // Files are regular and at most 1 MiB; flags that reach HTML or the
    // log are plain.
    let p = temp_file(
        "huge.json",
        &format!("{{\"gpus\":[]{}}}", " ".repeat(1 << 20)),
    );
    bad(
        &["--sim.scenario", p.to_str().unwrap()],
        "over the limit of 1048576",
    );
    bad(
        &["--rules.file", "/dev/null"],
        "a device, not a regular file",
    );
    bad(
        &["--web.telemetry-path", "/m\r\nlevel=error msg=forged"],
        "--web.telemetry-path",
    );
    bad(
        &["--log.format", "text"],
        "--log.format: unknown log format",
    );
    bad(&["--log.format", "JSON"], "--log.format");
    bad(
        &["--web.telemetry-path", "//elsewhere.example/"],
        "--web.telemetry-path",
    );
    for url in [
        "javascript:alert(1)//",
        "//elsewhere.example/",
        "data:text/html,x",
    ] {
        bad(
            &["--alerts.runbook-base-url", url],
            "--alerts.runbook-base-url",
        );
    }
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    bad(&["--web.listen-address", &addr], "--web.listen-address");
}

/// `flag` naming a file that holds `contents`: one line saying `says`,
/// exit code 2.
fn bad_file(flag: &str, name: &str, contents: &str, says: &str) {
    let p = temp_file(name, contents);
    bad(&[flag, p.to_str().unwrap()], says);
}

/// Each documented limit (docs/flags.md, Limits) exceeded: one line, exit code 2.
#[test]
fn every_limit_is_exit_2_with_one_line() {
    bad(&["--collect.interval", "50ms"], "below the 100ms minimum");
    let rules = |n: usize| {
        let r: Vec<String> = (0..n)
            .map(|i| format!(r#"{{"name":"R{i}","kind":"gauge","signal":"up","threshold":1,"severity":"page"}}"#))
            .collect();
        format!(r#"{{"replace":true,"rules":[{}]}}"#, r.join(","))
    };
    let p = temp_file("limit-rules-ok.json", &rules(1000));
    let printed = run(&["--print-rules", "--rules.file", p.to_str().unwrap()]);
    assert_eq!(printed.status.code(), Some(0));
    let name = "N".repeat(129);
    let gpus = vec!["{}"; 65].join(",");
    let models: Vec<String> = (0..17).map(|i| format!(r#"{{"name":"m{i}"}}"#)).collect();
    for (flag, file, contents, says) in [
        (
            "--rules.file",
            "limit-rules.json",
            rules(1001),
            "at most 1000",
        ),
        (
            "--rules.file",
            "limit-name.json",
            format!(r#"{{"rules":[{{"name":"{name}"}}]}}"#),
            "rules[0].name",
        ),
        (
            "--rules.file",
            "limit-window.json",
            r#"{"rules":[{"name":"GPUXidErrors","window":"4d"}]}"#.into(),
            "longer than 3d",
        ),
        (
            "--rules.file",
            "limit-rules-size.json",
            format!(r#"{{"rules":[]{}}}"#, " ".repeat(1 << 20)),
            "over the limit of 1048576",
        ),
        (
            "--sim.scenario",
            "limit-gpus.json",
            format!(r#"{{"gpus":[{gpus}]}}"#),
            "1 to 64",
        ),
        (
            "--sim.scenario",
            "limit-models.json",
            format!(r#"{{"gpus":[{{}}],"models":[{}]}}"#, models.join(",")),
            "at most 16",
        ),
        (
            "--sim.scenario",
            "limit-model-name.json",
            format!(r#"{{"gpus":[{{"model":"{name}"}}]}}"#),
            "gpus[0].model",
        ),
    ] {
        bad_file(flag, file, &contents, says);
    }
    bad(&["--alerts.scrape-job", "a\"b"], "--alerts.scrape-job");
}

#[test]
fn help_and_version() {
    let out = run(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--web.listen-address",
        "--web.telemetry-path",
        "--source",
        "--sim.scenario",
        "--collect.interval",
        "--log.level",
        "--once",
    ] {
        assert!(help.contains(flag), "{flag}");
    }
    let out = run(&["--version"]);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("gpu-exporter {}\n", env!("CARGO_PKG_VERSION"))
    );
    assert!(BIN.ends_with("gpu-exporter"));
}

/// Each flag `--help` lists, with the default it states where it ends in
/// `(default X)`.
fn help_flags() -> BTreeMap<String, Option<String>> {
    let help = String::from_utf8(run(&["--help"]).stdout).unwrap();
    let mut entries: Vec<String> = Vec::new();
    for line in help.lines() {
        if line.starts_with("  --") {
            entries.push(line.trim().to_string());
        } else if line.starts_with("      ")
            && let Some(last) = entries.last_mut()
        {
            last.push(' ');
            last.push_str(line.trim());
        }
    }
    entries
        .iter()
        .map(|e| {
            let name = e.split_whitespace().next().unwrap().to_string();
            let default = e
                .strip_suffix(')')
                .and_then(|e| e.rsplit_once("(default "))
                .map(|(_, d)| d.split_whitespace().next().unwrap().to_string());
            (name, default)
        })
        .collect()
}

/// Each flag of the flag table in docs/flags.md, with its default column's
/// first `code` word, if any.
fn readme_flags() -> BTreeMap<String, Option<String>> {
    let page = include_str!("../../docs/flags.md");
    let section = page
        .split("<!-- flags:start -->")
        .nth(1)
        .expect("docs/flags.md: the flag table's start marker");
    let section = section
        .split("<!-- flags:end -->")
        .next()
        .expect("docs/flags.md: the flag table's end marker");
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `--"))
        .map(|row| {
            let cells: Vec<&str> = row.split(" | ").collect();
            let name = format!("--{}", cells[0].split(['`', ' ']).next().unwrap());
            let default = cells[1].split('`').nth(1).map(str::to_string);
            (name, default)
        })
        .collect()
}

/// Whether flag `a` is `b`, or a pattern whose upper-case last part
/// (`--collector.NAME`) stands for it.
fn stands_for(a: &str, b: &str) -> bool {
    a == b
        || a.rsplit_once('.').is_some_and(|(prefix, last)| {
            !last.is_empty()
                && last.bytes().all(|c| c.is_ascii_uppercase())
                && b.strip_prefix(prefix)
                    .is_some_and(|rest| rest.len() > 1 && rest.starts_with('.'))
        })
}

#[test]
fn help_and_readme_list_the_same_flags_and_defaults() {
    let (help, readme) = (help_flags(), readme_flags());
    assert!(
        help.len() >= 20 && readme.len() >= 20,
        "{help:?} {readme:?}"
    );
    let alike = |a: &str, b: &str| stands_for(a, b) || stands_for(b, a);
    for (flag, default) in &help {
        if flag == "--help" || flag == "--version" {
            continue;
        }
        let row = readme.iter().find(|(r, _)| alike(flag, r));
        let Some((_, readme_default)) = row else {
            panic!("{flag} is in --help but not in docs/flags.md's flag table");
        };
        if let Some(d) = default {
            assert_eq!(readme_default.as_ref(), Some(d), "{flag}: default");
        }
    }
    for flag in readme.keys() {
        assert!(
            help.keys().any(|h| alike(h, flag)),
            "{flag} is in docs/flags.md's flag table but not in --help"
        );
    }
    assert!(stands_for("--collector.NAME", "--collector.gpm"));
    assert!(!stands_for("--collector.NAME", "--collector."));
    assert!(!stands_for("--web.listen-address", "--web.telemetry-path"));
}

/// `ts=` RFC 3339 UTC with milliseconds: `2026-12-02T08:35:01.123Z`.
fn is_rfc3339_ms(ts: &str) -> bool {
    let b = ts.as_bytes();
    let digits = |r: std::ops::Range<usize>| r.into_iter().all(|i| b[i].is_ascii_digit());
    b.len() == 24
        && digits(0..4)
        && b[4] == b'-'
        && b[10] == b'T'
        && b[19] == b'.'
        && digits(20..23)
        && b[23] == b'Z'
}

#[test]
fn every_log_line_has_its_time_in_either_format() {
    let e = Exporter::start(&["--log.level", "debug"]);
    let log = e.log();
    assert!(log.lines().count() >= 2, "{log}");
    for l in log.lines() {
        let rest = l.strip_prefix("ts=").expect(l);
        let (ts, rest) = rest.split_once(' ').expect(l);
        assert!(is_rfc3339_ms(ts), "{l}");
        assert!(rest.starts_with("level=") && rest.contains(" msg="), "{l}");
    }
    drop(e);

    #[derive(nanoserde::DeJson)]
    struct Line {
        ts: String,
        level: String,
        msg: String,
    }
    let e = Exporter::start(&["--log.level", "debug", "--log.format", "json"]);
    let log = e.log();
    assert!(log.contains("serving GPU metrics on http://"), "{log}");
    for l in log.lines() {
        let line: Line = nanoserde::DeJson::deserialize_json(l).expect(l);
        assert!(is_rfc3339_ms(&line.ts), "{l}");
        assert!(
            ["error", "warn", "info", "debug"].contains(&line.level.as_str()),
            "{l}"
        );
        assert!(!line.msg.is_empty(), "{l}");
    }
}
