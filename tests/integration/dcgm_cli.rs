//! dcgm-exporter's command line and environment through the binary: the
//! GPU Operator's environment-only start, the chart's arguments, every
//! flag we ignore, the name `dcgm-exporter`, and the drop-in's alerts.

use crate::common::{BIN, Exporter};
use gpu_exporter::config::dcgm_exporter::{DCGM_FLAGS, DcgmFlag, Kind, MODE};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/dcgm/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The exporter in dcgm-exporter's mode on the simulator, with `args`
/// and only `env` of dcgm-exporter's variables set.
fn dcgm_mode(args: &[&str], env: &[(&str, &str)]) -> Exporter {
    let mut cmd = Command::new(BIN);
    cmd.arg(MODE).args(args).args(["--source", "sim"]);
    for f in DCGM_FLAGS {
        cmd.env_remove(f.env);
    }
    cmd.envs(env.iter().copied());
    let e = Exporter::spawned(cmd);
    e.wait_first_collection();
    e
}

/// Each family's `# TYPE` line and the label names of its first sample.
fn shape(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = body.lines().peekable();
    while let Some(l) = lines.next() {
        if let Some(t) = l.strip_prefix("# TYPE ") {
            let first = lines.find(|l| !l.starts_with('#')).unwrap_or_default();
            let names: Vec<&str> = first
                .split_once('{')
                .map(|(_, set)| set.split("\",").map(|kv| kv.split('=').next().unwrap()))
                .into_iter()
                .flatten()
                .collect();
            out.push(format!("{t} {names:?}"));
        }
    }
    out
}

/// The GPU Operator's DaemonSet sets three variables and no argument:
/// the same families and labels as our flags spelled out, `/health` 200.
#[test]
fn the_gpu_operators_environment_serves_what_our_flags_do() {
    let dir = std::env::temp_dir().join(format!("gpu-exporter-dcgm-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("kubelet.sock");
    let socket = socket.to_str().unwrap();
    let dcp = fixture("dcp-metrics-included.csv");
    let theirs = dcgm_mode(
        &[],
        &[
            ("DCGM_EXPORTER_LISTEN", "127.0.0.1:0"),
            ("DCGM_EXPORTER_KUBERNETES", "true"),
            ("DCGM_EXPORTER_COLLECTORS", &dcp),
            ("DCGM_EXPORTER_INTERVAL", "1000"),
            ("DCGM_POD_RESOURCES_KUBELET_SOCKET", socket),
        ],
    );
    let ours = Exporter::start(&[
        "--collector.disable-defaults",
        "--collector.dcgm",
        "--compat.dcgm-counters",
        &dcp,
        "--collect.interval",
        "1s",
        "--kubernetes.pod-labels",
        "--kubernetes.pod-resources-socket",
        socket,
    ]);
    let (a, b) = (theirs.metrics(None), ours.metrics(None));
    assert_eq!(a.header("content-type"), b.header("content-type"));
    let shape_a = shape(&a.body);
    assert_eq!(shape_a, shape(&b.body));
    assert!(
        shape_a
            .iter()
            .any(|s| s.starts_with("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE gauge")),
        "{shape_a:?}"
    );
    assert!(!a.body.contains("\ngpu_up{"), "only dcgm's names");
    let health = theirs.get("/health", &[]);
    assert_eq!((health.status, health.body.trim()), (200, "OK"));
    assert!(
        !theirs.log().contains("level=warn msg=dcgm-exporter"),
        "{}",
        theirs.log()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A value other than `f`'s default, of its kind.
fn other(f: &DcgmFlag) -> &'static str {
    match f.kind {
        Kind::Bool if f.default == "true" => "false",
        Kind::Bool => "true",
        Kind::Int => "1000",
        Kind::Duration => "1m30s",
        Kind::Text | Kind::List => "/x",
    }
}

/// The chart's `-f` and variables, and every flag we ignore given once
/// (half on the command line, half in the environment): it starts, and
/// says each once.
#[test]
fn the_charts_start_and_every_ignored_flag_say_so_once() {
    let ignored: Vec<&DcgmFlag> = DCGM_FLAGS
        .iter()
        .filter(|f| f.means.starts_with("ignored with a warning"))
        .collect();
    assert!(ignored.len() >= 25, "{}", ignored.len());
    let default = fixture("default-counters.csv");
    let mut args = vec!["-f".to_string(), default, "-a".into(), "127.0.0.1:0".into()];
    let mut env = vec![
        ("DCGM_EXPORTER_KUBERNETES", "true"),
        ("NODE_NAME", "node-7"),
    ];
    for (i, f) in ignored.iter().enumerate() {
        match i % 2 {
            0 => args.push(format!("--{}={}", f.name, other(f))),
            _ => env.push((f.env, other(f))),
        }
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let e = dcgm_mode(&args, &env);
    let log = e.log();
    for (i, f) in ignored.iter().enumerate() {
        let by = if i % 2 == 0 {
            format!("--{}", f.name)
        } else {
            f.env.to_string()
        };
        let said = format!("dcgm-exporter's {by} ");
        assert_eq!(log.matches(&said).count(), 1, "{said}\n{log}");
    }
    let body = e.metrics(None).body;
    assert!(body.contains("Hostname=\"node-7\""), "{body}");
    assert!(
        body.contains("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID="),
        "{body}"
    );
}

/// Run under the name `dcgm-exporter`, it is in that mode without the
/// flag: `-n` leaves the host label out, `-o` spells the UUID label `uuid`,
/// `-rbmn` puts dashes for blanks in `modelName`.
#[test]
fn the_name_dcgm_exporter_selects_the_mode() {
    let dir = std::env::temp_dir().join(format!("gpu-exporter-dcgm-name-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("dcgm-exporter");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(Path::new(BIN), &link).unwrap();
    let mut cmd = Command::new(&link);
    cmd.args(["-a", "127.0.0.1:0", "-n", "-o", "-rbmn", "-c", "500"]);
    cmd.args(["--source", "sim"]);
    let e = Exporter::spawned(cmd);
    e.wait_first_collection();
    let body = e.metrics(None).body;
    let temp = body
        .lines()
        .find(|l| l.starts_with("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\""))
        .unwrap_or_else(|| panic!("{body}"));
    assert!(
        !temp.contains("Hostname") && !temp.contains("hostname"),
        "{temp}"
    );
    assert!(
        temp.contains(",uuid=\"GPU-") && !temp.contains("UUID"),
        "{temp}"
    );
    let model = temp.split("modelName=\"").nth(1).unwrap();
    let model = model.split('"').next().unwrap();
    assert!(model.contains('-') && !model.contains(' '), "{temp}");
    let out = Command::new(&link).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(
        help.contains("-rbmn, --replace-blanks-in-model-name"),
        "{help}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Exit code 2 and one line, naming the flag or variable, only for a flag
/// dcgm-exporter does not have or a value it would refuse. Our own mode
/// says its variables are not read.
#[test]
fn bad_flags_and_values_are_exit_code_2() {
    for (args, env, want) in [
        (&["-z"][..], None, "unknown dcgm-exporter flag -z"),
        (&["-c", "fast"], None, "-c: \"fast\" is not an integer"),
        (
            &[],
            Some(("DCGM_EXPORTER_KUBERNETES", "yes")),
            "DCGM_EXPORTER_KUBERNETES",
        ),
        (&["-d", "g:x"], None, "--devices"),
        (&["-f", "/nonexistent.csv"], None, "/nonexistent.csv"),
    ] {
        let out = Command::new(BIN)
            .arg(MODE)
            .args(args)
            .envs(env)
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(want), "{err}");
    }
    let out = Command::new(BIN)
        .args(["--source", "sim", "--once"])
        .env(
            "DCGM_EXPORTER_COLLECTORS",
            "/etc/dcgm-exporter/dcp-metrics-included.csv",
        )
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("DCGM_EXPORTER_COLLECTORS is dcgm-exporter's, read only in its mode"),
        "{err}"
    );
}

/// The drop-in (dcgm's names only) keeps the alerts its readings allow:
/// no rule is inactive, and the simulator's fleet fires as it does with
/// our own families, in both spellings.
#[test]
fn the_drop_in_keeps_its_alerts() {
    let ours = Exporter::start(&["--collector.disable-defaults", "--collector.dcgm"]);
    let theirs = dcgm_mode(&["-a", "127.0.0.1:0", "-c", "1000"], &[]);
    for e in [&ours, &theirs] {
        assert!(!e.log().contains("is inactive"), "{}", e.log());
        let alerts = e.wait_for("/alerts", Duration::from_secs(20), |b| {
            b.contains("GPUXidErrors")
        });
        for (name, gpu) in [("GPUThrottling", "1"), ("GPUXidErrors", "2")] {
            let want = format!("\"alertname\":\"{name}\",\"gpu\":\"{gpu}\"");
            assert!(alerts.contains(&want), "{want}: {alerts}");
        }
        assert!(!e.metrics(None).body.contains("\ngpu_clocks_event_active{"));
        // The status page gives its verdicts too: a firing row each.
        let page = e.get("/", &[]).body;
        assert!(page.matches("class=\"firing\"").count() >= 2, "{page}");
    }
    // A collector turned off by name stays unread where no dcgm field
    // shows it: its rules are inactive.
    let off = Exporter::start(&[
        "--collector.disable-defaults",
        "--collector.dcgm",
        "--no-collector.ecc",
    ]);
    off.wait_log(
        "rule GPUUncorrectableECC is inactive: collector ecc is off",
        Duration::from_secs(5),
    );
}
