//! The deploy/ artifacts: Kubernetes manifests, the systemd unit and the
//! Grafana dashboard, checked offline with the tools that will consume them
//! (kubernetes-validate, systemd-analyze, promtool, a real Prometheus).

use crate::common::{BIN, Exporter, have, run};
use nanoserde::DeJson;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const K8S: &str = "deploy/kubernetes";
const RULES: &str = "deploy/prometheus/gpu-exporter-rules.yml";
const UNIT: &str = "deploy/systemd/gpu-exporter.service";
const DASHBOARD: &str = "deploy/grafana/gpu-fleet.json";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

pub(crate) fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A fresh directory for one test, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("gpu-exporter-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---------------------------------------------------------------- YAML ----

/// Flattens YAML documents to `Kind/name.path<TAB>json` lines. List items
/// that have a `name` are keyed by it (`containers[gpu-exporter]`), others
/// by index, so the assertions below read like paths.
const FLATTEN: &str = r#"
import json, sys, yaml
def walk(path, v):
    if isinstance(v, dict):
        for k, x in v.items():
            yield from walk(f"{path}.{k}", x)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            key = x.get("name") if isinstance(x, dict) else None
            yield from walk(f"{path}[{key if isinstance(key, str) else i}]", x)
    else:
        yield path, json.dumps(v)
for f in sys.argv[1:]:
    for doc in yaml.safe_load_all(open(f)):
        if doc:
            for p, v in walk(f"{doc['kind']}/{doc['metadata']['name']}", doc):
                print(f"{p}\t{v}")
"#;

pub(crate) type Flat = BTreeMap<String, String>;

/// The flattened manifests, or None where python3 with PyYAML is missing
/// (skipped locally, a failure in CI).
fn flatten(files: &[&str]) -> Option<Flat> {
    let paths: Vec<PathBuf> = files.iter().map(|f| root().join(K8S).join(f)).collect();
    flatten_paths(&paths)
}

/// [`flatten`] of the files at `paths`.
pub(crate) fn flatten_paths(paths: &[PathBuf]) -> Option<Flat> {
    if !have("python3", &["-c", "import yaml"]) {
        return None;
    }
    let out = Command::new("python3")
        .args(["-c", FLATTEN])
        .args(paths)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let mut flat = Flat::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let (k, v) = line.split_once('\t').unwrap();
        assert!(
            flat.insert(k.to_string(), v.to_string()).is_none(),
            "{k} twice"
        );
    }
    Some(flat)
}

pub(crate) fn get<'a>(m: &'a Flat, key: &str) -> &'a str {
    m.get(key)
        .unwrap_or_else(|| panic!("{key} is missing"))
        .as_str()
}

pub(crate) fn expect(m: &Flat, key: &str, json: &str) {
    assert_eq!(get(m, key), json, "{key}");
}

/// A list of scalars, as JSON values.
pub(crate) fn list<'a>(m: &'a Flat, key: &str) -> Vec<&'a str> {
    (0..)
        .map_while(|i| m.get(&format!("{key}[{i}]")))
        .map(String::as_str)
        .collect()
}

/// A flat map (labels, selectors) under `prefix`, key -> JSON value.
pub(crate) fn map<'a>(m: &'a Flat, prefix: &str) -> BTreeMap<&'a str, &'a str> {
    let prefix = format!("{prefix}.");
    m.iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?, v.as_str())))
        .collect()
}

/// The security and resource contract of an exporter container, the same
/// in the DaemonSet and the sidecar; its probes on port `probes`.
pub(crate) fn assert_hardened(m: &Flat, c: &str, probes: &str) {
    expect(m, &format!("{c}.image"), r#""gpu-exporter:0.1.0""#);
    let sc = format!("{c}.securityContext");
    expect(m, &format!("{sc}.runAsNonRoot"), "true");
    expect(m, &format!("{sc}.runAsUser"), "65534");
    expect(m, &format!("{sc}.readOnlyRootFilesystem"), "true");
    expect(m, &format!("{sc}.allowPrivilegeEscalation"), "false");
    expect(
        m,
        &format!("{sc}.seccompProfile.type"),
        r#""RuntimeDefault""#,
    );
    assert!(!m.contains_key(&format!("{sc}.privileged")), "{sc}");
    let caps = format!("{sc}.capabilities");
    assert_eq!(list(m, &format!("{caps}.drop")), [r#""ALL""#], "{caps}");
    assert_eq!(list(m, &format!("{caps}.add")), [r#""SYSLOG""#], "{caps}");
    // From the real library's measured peak, with margin (nvidia_real.rs
    // holds the limit to it).
    expect(m, &format!("{c}.resources.limits.memory"), r#""64Mi""#);
    expect(m, &format!("{c}.resources.requests.memory"), r#""32Mi""#);
    expect(m, &format!("{c}.resources.requests.cpu"), r#""10m""#);
    expect(
        m,
        &format!("{c}.livenessProbe.httpGet.path"),
        r#""/healthz""#,
    );
    expect(
        m,
        &format!("{c}.livenessProbe.httpGet.port"),
        &format!("{probes:?}"),
    );
    expect(
        m,
        &format!("{c}.env[NVIDIA_VISIBLE_DEVICES].value"),
        r#""all""#,
    );
    expect(m, &format!("{c}.ports[metrics].containerPort"), "9400");
    let args = list(m, &format!("{c}.args")).join(" ");
    assert!(args.contains(r#""--source" "nvml""#), "{args}");
    assert!(
        args.contains(r#""--web.listen-address=:9400""#),
        "{args}: the port must match containerPort"
    );
}

/// Each `--flag` in `args` is one the exporter knows.
pub(crate) fn assert_known_flags(args: &[&str]) {
    let help = String::from_utf8(run(&["--help"]).stdout).unwrap();
    for arg in args {
        let arg = arg.trim_matches('"');
        let Some(flag) = arg.strip_prefix("--") else {
            continue;
        };
        let flag = flag.split('=').next().unwrap();
        // `--no-collector.NAME` turns off what `--collector.NAME` turns on.
        let flag = flag
            .strip_prefix("no-")
            .filter(|f| f.starts_with("collector."))
            .unwrap_or(flag);
        // `--collector.NAME` stands for each collector --help lists.
        let collector = flag
            .strip_prefix("collector.")
            .is_some_and(|name| help.contains("--collector.NAME ") && help.contains(name));
        assert!(
            collector || help.contains(&format!("--{flag} ")),
            "--{flag} is not in --help"
        );
    }
}

/// kubernetes-validate, strict, against Kubernetes 1.29 and 1.33, on
/// `files` (`-` reads `stdin`).
fn validate(files: &[PathBuf], stdin: Option<&str>) -> Output {
    validate_for(&["1.29.0", "1.33.0"], files, stdin)
}

/// kubernetes-validate, strict, against each Kubernetes version.
pub(crate) fn validate_for(versions: &[&str], files: &[PathBuf], stdin: Option<&str>) -> Output {
    let mut child = Command::new("python3")
        .args(["-m", "kubernetes_validate", "--strict", "--quiet"])
        .args(versions.iter().flat_map(|v| ["-k", v]))
        .args(files)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

#[test]
fn kubernetes_manifests_validate_offline() {
    // kubernetes-validate ships the OpenAPI schemas of each release and
    // reads nothing from the network. --strict rejects unknown fields.
    if !have("python3", &["-m", "kubernetes_validate", "--version"]) {
        return;
    }
    let files: Vec<_> = [
        "daemonset.yaml",
        "daemonset-attribution.yaml",
        "service.yaml",
        "sidecar-example.yaml",
        "dcgm-operator.yaml",
    ]
    .iter()
    .map(|f| root().join(K8S).join(f))
    .collect();
    let out = validate(&files, None);
    // --quiet prints only failures and warnings; a kind without a schema is
    // a warning, so any output fails.
    assert!(
        out.status.success() && text(&out).is_empty(),
        "{}",
        text(&out)
    );
    // The same validator rejects a misspelt field, so the pass above means
    // something.
    let broken = read(&format!("{K8S}/daemonset.yaml"))
        .replace("readOnlyRootFilesystem", "readOnlyRootFileSystem");
    let out = validate(&[PathBuf::from("-")], Some(&broken));
    assert!(
        !out.status.success() && text(&out).contains("readOnlyRootFileSystem"),
        "{}",
        text(&out)
    );
}

#[test]
fn daemonset_and_sidecar_are_locked_down() {
    let Some(m) = flatten(&["daemonset.yaml", "sidecar-example.yaml"]) else {
        return;
    };
    expect(&m, "Namespace/gpu-exporter.apiVersion", r#""v1""#);
    let ds = "DaemonSet/gpu-exporter";
    expect(&m, &format!("{ds}.metadata.namespace"), r#""gpu-exporter""#);
    let pod = format!("{ds}.spec.template.spec");
    expect(&m, &format!("{pod}.runtimeClassName"), r#""nvidia""#);
    expect(&m, &format!("{pod}.automountServiceAccountToken"), "false");
    expect(
        &m,
        &format!("{pod}.nodeSelector.nvidia.com/gpu.present"),
        r#""true""#,
    );
    for host in ["hostNetwork", "hostPID", "hostIPC"] {
        assert!(!m.contains_key(&format!("{pod}.{host}")), "{host}");
    }
    // Every effect of the GPU taint, NoExecute too: no effect named.
    let tolerates_gpu_taint = (0..)
        .map_while(|i| {
            let t = format!("{pod}.tolerations[{i}]");
            m.get(&format!("{t}.operator")).map(|op| (t, op))
        })
        .any(|(t, op)| {
            op == r#""Exists""#
                && m.get(&format!("{t}.key")).map(String::as_str) == Some(r#""nvidia.com/gpu""#)
                && !m.contains_key(&format!("{t}.effect"))
        });
    assert!(
        tolerates_gpu_taint,
        "no nvidia.com/gpu toleration of every effect"
    );
    expect(
        &m,
        &format!("{pod}.priorityClassName"),
        r#""system-node-critical""#,
    );
    let c = format!("{pod}.containers[gpu-exporter]");
    assert_hardened(&m, &c, "probes");
    // Ready means serving: a node with a broken driver must not stall a
    // rollout (ready_means_serving_while_collections_fail).
    expect(
        &m,
        &format!("{c}.readinessProbe.httpGet.path"),
        r#""/healthz""#,
    );
    // The probe listener: plain HTTP, /healthz and /readyz alone, so the
    // probes work whatever the web config asks of clients.
    expect(
        &m,
        &format!("{c}.readinessProbe.httpGet.port"),
        r#""probes""#,
    );
    expect(&m, &format!("{c}.ports[probes].containerPort"), "9401");
    let args = list(&m, &format!("{c}.args"));
    assert!(args.contains(&r#""--web.probe-address=:9401""#), "{args:?}");
    assert_known_flags(&list(&m, &format!("{c}.args")));
    // Pod Security admission would reject the pods if the namespace enforced
    // a level that forbids the added capabilities.
    const BASELINE_CAPS: [&str; 13] = [
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    ];
    let added = list(&m, &format!("{c}.securityContext.capabilities.add"));
    let levels = ["privileged", "baseline", "restricted"];
    let strictest = if added
        .iter()
        .any(|a| !BASELINE_CAPS.contains(&a.trim_matches('"')))
    {
        0
    } else if added.iter().any(|a| *a != r#""NET_BIND_SERVICE""#) {
        1
    } else {
        2
    };
    let needed = &levels[..=strictest];
    let level = m
        .get("Namespace/gpu-exporter.metadata.labels.pod-security.kubernetes.io/enforce")
        .map_or("restricted", |l| l.trim_matches('"')); // the strictest a cluster may default to
    assert!(needed.contains(&level), "enforce={level} rejects {added:?}");

    // The sidecar: the pod owns one GPU, the exporter is held to the same
    // contract but has no readiness probe (it would gate the server).
    let pod = "Pod/llm-server.spec";
    expect(&m, &format!("{pod}.runtimeClassName"), r#""nvidia""#);
    expect(&m, &format!("{pod}.automountServiceAccountToken"), "false");
    expect(
        &m,
        &format!("{pod}.containers[llm-server].resources.limits.nvidia.com/gpu"),
        "1",
    );
    let c = format!("{pod}.containers[gpu-exporter]");
    assert_hardened(&m, &c, "metrics");
    assert!(!m.contains_key(&format!("{c}.readinessProbe.httpGet.path")));
    assert_known_flags(&list(&m, &format!("{c}.args")));
}

#[test]
fn service_and_servicemonitor_select_the_daemonset() {
    let Some(m) = flatten(&["daemonset.yaml", "service.yaml", "servicemonitor.yaml"]) else {
        return;
    };
    let pod_labels = map(&m, "DaemonSet/gpu-exporter.spec.template.metadata.labels");
    let svc = "Service/gpu-exporter";
    expect(
        &m,
        &format!("{svc}.metadata.namespace"),
        r#""gpu-exporter""#,
    );
    expect(&m, &format!("{svc}.spec.clusterIP"), r#""None""#);
    expect(&m, &format!("{svc}.spec.ports[metrics].port"), "9400");
    expect(
        &m,
        &format!("{svc}.spec.ports[metrics].targetPort"),
        r#""metrics""#,
    );
    let selector = map(&m, &format!("{svc}.spec.selector"));
    assert!(!selector.is_empty());
    for (k, v) in &selector {
        assert_eq!(pod_labels.get(k), Some(v), "Service selects {k}={v}");
    }

    // ServiceMonitor is a CRD: no schema offline, so check its shape.
    let sm = "ServiceMonitor/gpu-exporter";
    expect(
        &m,
        &format!("{sm}.apiVersion"),
        r#""monitoring.coreos.com/v1""#,
    );
    expect(&m, &format!("{sm}.kind"), r#""ServiceMonitor""#);
    expect(&m, &format!("{sm}.metadata.namespace"), r#""gpu-exporter""#);
    let svc_labels = map(&m, &format!("{svc}.metadata.labels"));
    let match_labels = map(&m, &format!("{sm}.spec.selector.matchLabels"));
    assert!(!match_labels.is_empty());
    for (k, v) in &match_labels {
        assert_eq!(svc_labels.get(k), Some(v), "ServiceMonitor selects {k}={v}");
    }
    assert!(
        list(&m, &format!("{sm}.spec.namespaceSelector.matchNames")).contains(&r#""gpu-exporter""#)
    );
    expect(&m, &format!("{sm}.spec.endpoints[0].port"), r#""metrics""#);
    expect(&m, &format!("{sm}.spec.endpoints[0].interval"), r#""15s""#);
    expect(&m, &format!("{sm}.spec.endpoints[0].path"), r#""/metrics""#);
    // The exporter's namespace and pod labels name the workload: without
    // honorLabels they would arrive as exported_namespace and exported_pod.
    expect(&m, &format!("{sm}.spec.endpoints[0].honorLabels"), "true");
}

/// The DaemonSet's readiness path answers 200 while collections fail,
/// where /readyz answers 503: a fleet with broken drivers rolls out, and
/// its broken nodes are still scraped and say what is wrong.
#[test]
fn ready_means_serving_while_collections_fail() {
    let Some(m) = flatten(&["daemonset.yaml"]) else {
        return;
    };
    let c = "DaemonSet/gpu-exporter.spec.template.spec.containers[gpu-exporter]";
    let path = get(&m, &format!("{c}.readinessProbe.httpGet.path")).trim_matches('"');
    let e = crate::common::Exporter::on_scenario(
        "broken-driver.json",
        r#"{"gpus":[{}],"incidents":[{"at":"0s","fail":"1h"}]}"#,
        &["--collect.interval", "100ms"],
    );
    e.wait_for("/metrics", std::time::Duration::from_secs(15), |b| {
        crate::common::value(b, "gpu_exporter_collect_success") == Some(0.0)
    });
    assert_eq!(e.get("/readyz", &[]).status, 503);
    assert_eq!(e.get(path, &[]).status, 200, "{path}");
}

#[test]
fn podmonitor_scrapes_the_daemonsets_pods_as_the_servicemonitor_does() {
    let Some(m) = flatten(&["daemonset.yaml", "servicemonitor.yaml", "podmonitor.yaml"]) else {
        return;
    };
    let pod_labels = map(&m, "DaemonSet/gpu-exporter.spec.template.metadata.labels");
    let pm = "PodMonitor/gpu-exporter";
    expect(
        &m,
        &format!("{pm}.apiVersion"),
        r#""monitoring.coreos.com/v1""#,
    );
    expect(&m, &format!("{pm}.metadata.namespace"), r#""gpu-exporter""#);
    let match_labels = map(&m, &format!("{pm}.spec.selector.matchLabels"));
    assert!(!match_labels.is_empty());
    for (k, v) in &match_labels {
        assert_eq!(pod_labels.get(k), Some(v), "PodMonitor selects {k}={v}");
    }
    assert!(
        list(&m, &format!("{pm}.spec.namespaceSelector.matchNames")).contains(&r#""gpu-exporter""#)
    );
    // The endpoint is the ServiceMonitor's, key for key.
    let sm = map(&m, "ServiceMonitor/gpu-exporter.spec.endpoints[0]");
    let pe = map(&m, &format!("{pm}.spec.podMetricsEndpoints[0]"));
    assert!(sm.len() >= 6, "{sm:?}");
    assert_eq!(sm, pe);
}

/// The engines' PodMonitor: one endpoint per engine the exporter reads, on
/// its usual port and path (ENGINES.md), each keeping only the pods its
/// selector's label names for it; the engines the selector admits are
/// those the endpoints keep, and every one is an engine name the exporter
/// takes (`--engine.endpoint ENGINE=URL`).
#[test]
fn the_engines_podmonitor_scrapes_each_engine_at_its_own_port_and_path() {
    let Some(m) = flatten(&["podmonitor-engines.yaml"]) else {
        return;
    };
    let pm = "PodMonitor/gpu-exporter-engines";
    expect(
        &m,
        &format!("{pm}.apiVersion"),
        r#""monitoring.coreos.com/v1""#,
    );
    expect(&m, &format!("{pm}.spec.namespaceSelector.any"), "true");
    let sel = format!("{pm}.spec.selector.matchExpressions[0]");
    expect(&m, &format!("{sel}.operator"), r#""In""#);
    let key = get(&m, &format!("{sel}.key")).trim_matches('"');
    let meta: String = key
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let meta = format!("\"__meta_kubernetes_pod_label_{meta}\"");
    let admitted: Vec<&str> = list(&m, &format!("{sel}.values"));
    let want = [
        ("vllm", 8000, "/metrics"),
        ("sglang", 30000, "/metrics"),
        ("trtllm", 8000, "/prometheus/metrics"),
        ("nim", 8000, "/v1/metrics"),
        ("triton", 8002, "/metrics"),
    ];
    let mut got = Vec::new();
    for i in 0.. {
        let ep = format!("{pm}.spec.podMetricsEndpoints[{i}]");
        let Some(port) = m.get(&format!("{ep}.targetPort")) else {
            break;
        };
        let r = format!("{ep}.relabelings[0]");
        expect(&m, &format!("{r}.action"), r#""keep""#);
        assert_eq!(list(&m, &format!("{r}.sourceLabels")), [meta.as_str()]);
        let engine = get(&m, &format!("{r}.regex")).trim_matches('"');
        let path = get(&m, &format!("{ep}.path")).trim_matches('"');
        got.push((engine, port.parse::<u16>().unwrap(), path));
    }
    let want: Vec<(&str, u16, &str)> = want.to_vec();
    assert_eq!(got, want);
    let names: Vec<String> = want.iter().map(|w| format!("\"{}\"", w.0)).collect();
    assert_eq!(
        admitted,
        names.iter().map(String::as_str).collect::<Vec<_>>()
    );
    // Each is a name the exporter takes for an engine.
    for (engine, port, path) in want {
        let url = format!("{engine}=http://127.0.0.1:{port}{path}");
        let out = crate::common::run(&["--engine.endpoint", &url, "--print-rules"]);
        assert_eq!(out.status.code(), Some(0), "{url}");
    }
}

/// The attribution variant differs from daemonset.yaml by exactly the
/// grants its comments name, and by nothing else.
#[test]
fn attribution_daemonset_grants_exactly_what_it_says() {
    let (Some(base), Some(attr)) = (
        flatten(&["daemonset.yaml"]),
        flatten(&["daemonset-attribution.yaml"]),
    ) else {
        return;
    };
    let pod = "DaemonSet/gpu-exporter.spec.template.spec";
    let c = format!("{pod}.containers[gpu-exporter]");
    let sc = format!("{c}.securityContext");
    let mount = format!("{c}.volumeMounts[pod-resources]");
    let volume = format!("{pod}.volumes[pod-resources]");
    let dir = r#""/var/lib/kubelet/pod-resources""#;
    let grants: BTreeMap<String, &str> = [
        // 1: root's uid, for root's socket.
        (format!("{sc}.runAsNonRoot"), "false"),
        (format!("{sc}.runAsUser"), "0"),
        (format!("{sc}.runAsGroup"), "0"),
        // 2: the socket's directory, read-only.
        (format!("{volume}.name"), r#""pod-resources""#),
        (format!("{volume}.hostPath.path"), dir),
        (format!("{volume}.hostPath.type"), r#""Directory""#),
        (format!("{mount}.name"), r#""pod-resources""#),
        (format!("{mount}.mountPath"), dir),
        (format!("{mount}.readOnly"), "true"),
        // 3: host PIDs.
        (format!("{pod}.hostPID"), "true"),
        // And the flags that use them.
        (
            format!("{c}.args[4]"),
            r#""--kubernetes.pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock""#,
        ),
        (format!("{c}.args[5]"), r#""--collector.processes""#),
    ]
    .into_iter()
    .collect();
    for (k, v) in &attr {
        match grants.get(k) {
            Some(want) => assert_eq!(v, want, "{k}"),
            None => assert_eq!(
                base.get(k),
                Some(v),
                "{k}: not a grant, yet not as in daemonset.yaml"
            ),
        }
    }
    for k in base.keys() {
        assert!(
            attr.contains_key(k) || grants.contains_key(k),
            "{k} dropped"
        );
    }
    for k in grants.keys() {
        assert!(attr.contains_key(k), "{k} missing");
    }
    // Nothing more: no privileged container, no host network or IPC, no
    // capability but SYSLOG.
    assert!(!attr.keys().any(|k| k.ends_with(".privileged")));
    for host in ["hostNetwork", "hostIPC"] {
        assert!(!attr.contains_key(&format!("{pod}.{host}")), "{host}");
    }
    assert_eq!(
        list(&attr, &format!("{sc}.capabilities.add")),
        [r#""SYSLOG""#]
    );
    assert_eq!(
        list(&attr, &format!("{sc}.capabilities.drop")),
        [r#""ALL""#]
    );
    assert_known_flags(&list(&attr, &format!("{c}.args")));
    // hostPath, hostPID and root are `privileged` Pod Security.
    expect(
        &attr,
        "Namespace/gpu-exporter.metadata.labels.pod-security.kubernetes.io/enforce",
        r#""privileged""#,
    );
}

/// prometheusrule.yaml, the chart's render (helm.rs holds it so), carries
/// the rule file's groups value for value.
#[test]
fn prometheusrule_wraps_the_generated_rules() {
    let Some(m) = flatten(&["prometheusrule.yaml"]) else {
        return;
    };
    let pr = "PrometheusRule/gpu-exporter";
    expect(
        &m,
        &format!("{pr}.apiVersion"),
        r#""monitoring.coreos.com/v1""#,
    );
    expect(&m, &format!("{pr}.metadata.namespace"), r#""gpu-exporter""#);
    // spec.groups must be the rule file's groups, value for value.
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys, yaml\n\
             a = yaml.safe_load(open(sys.argv[1]))['spec']['groups']\n\
             b = yaml.safe_load(open(sys.argv[2]))['groups']\n\
             sys.exit('spec.groups != groups') if a != b else print(sum(len(g['rules']) for g in b))",
        ])
        .arg(root().join(K8S).join("prometheusrule.yaml"))
        .arg(root().join(RULES))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let rules = read(RULES);
    let expected = rules
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            l.starts_with("- record: ") || l.starts_with("- alert: ")
        })
        .count();
    assert!(expected >= 18, "{expected}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        expected.to_string()
    );
}

// ------------------------------------------------------------- systemd ----

/// The unit's directives, key -> values in order, comments left out.
fn directives(unit: &str) -> BTreeMap<&str, Vec<&str>> {
    let mut d: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for l in unit.lines().map(str::trim) {
        if let Some((k, v)) = l.split_once('=').filter(|_| !l.starts_with('#')) {
            d.entry(k).or_default().push(v);
        }
    }
    d
}

#[test]
fn systemd_unit_is_hardened_and_verifies() {
    let unit = read(UNIT);
    let d = directives(&unit);
    let one = |k: &str| -> &str {
        match d.get(k).map(Vec::as_slice) {
            Some([v]) => v,
            other => panic!("{k}: {other:?}"),
        }
    };
    assert_eq!(
        one("ExecStart"),
        "/usr/local/bin/gpu-exporter --source nvml"
    );
    for (k, v) in [
        ("DynamicUser", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("NoNewPrivileges", "yes"),
        ("MemoryMax", "64M"),
        ("Restart", "on-failure"),
        ("CapabilityBoundingSet", "CAP_SYSLOG"),
        ("AmbientCapabilities", "CAP_SYSLOG"),
        ("ProtectKernelModules", "yes"),
        ("RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"),
    ] {
        assert_eq!(one(k), v, "{k}");
    }
    assert!(d.contains_key("RestartSec"));
    let allowed = &d["DeviceAllow"];
    for dev in ["/dev/nvidiactl rw", "/dev/nvidia-uvm rw", "char-nvidia* rw"] {
        assert!(allowed.contains(&dev), "DeviceAllow={dev}");
    }
    // Each would cut NVML off from /dev/nvidia* or /proc/driver/nvidia, or
    // the Xid fallback off from /dev/kmsg.
    for k in [
        "PrivateDevices",
        "ProcSubset",
        "ProtectKernelLogs",
        "PrivateUsers",
    ] {
        assert!(!d.contains_key(k), "{k}= breaks NVML or kmsg");
    }
    let args: Vec<_> = one("ExecStart").split(' ').collect();
    assert_known_flags(&args);

    if !have("systemd-analyze", &["--version"]) {
        return;
    }
    // verify checks that ExecStart exists, so point a copy at the binary
    // under test. It warns on stderr and still exits 0, so output fails.
    let dir = TempDir::new("systemd");
    let verify = |unit: &str| systemd_verify(&dir.0, unit);
    let local = unit.replace(
        "ExecStart=/usr/local/bin/gpu-exporter",
        &format!("ExecStart={BIN}"),
    );
    assert_ne!(local, unit);
    let (ok, out) = verify(&local);
    assert!(ok && out.is_empty(), "{out}");
    // A misspelt directive is reported, so the empty output above counts.
    let (_, out) = verify(&local.replace("ProtectHome=", "ProtectHomes="));
    assert!(out.contains("ProtectHomes"), "{out}");

    // Keep the hardening from eroding: systemd's own exposure score.
    let path = dir.0.join("gpu-exporter.service");
    std::fs::write(&path, &local).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--no-pager"])
        .arg(&path)
        .output()
        .unwrap();
    let report = text(&out);
    let score: f64 = report
        .split("Overall exposure level for gpu-exporter.service: ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in {report}"));
    assert!(score <= 3.0, "exposure {score} > 3.0:\n{report}");
}

/// Socket activation: the .socket unit and the drop-in that adds
/// `--web.systemd-socket` verify together with the service.
#[test]
fn systemd_socket_unit_verifies_with_its_service() {
    let socket = read("deploy/systemd/gpu-exporter.socket");
    let dropin = read("deploy/systemd/gpu-exporter.service.d/socket-activation.conf");
    let sd = directives(&socket);
    assert_eq!(sd["ListenStream"], ["9400"]);
    assert_eq!(sd["BindIPv6Only"], ["both"]);
    let dd = directives(&dropin);
    let exec = dd["ExecStart"].last().unwrap().to_string();
    assert_eq!(dd["ExecStart"][0], "", "the drop-in must reset ExecStart");
    let args: Vec<_> = exec.split(' ').collect();
    assert!(args.contains(&"--web.systemd-socket"), "{exec}");
    assert_known_flags(&args);
    if !have("systemd-analyze", &["--version"]) {
        return;
    }
    let dir = TempDir::new("systemd-socket");
    let local = |text: &str| {
        text.replace(
            "ExecStart=/usr/local/bin/gpu-exporter",
            &format!("ExecStart={BIN}"),
        )
    };
    let verify = |dropin: &str| {
        std::fs::create_dir_all(dir.0.join("gpu-exporter.service.d")).unwrap();
        std::fs::write(dir.0.join("gpu-exporter.socket"), &socket).unwrap();
        std::fs::write(dir.0.join("gpu-exporter.service"), local(&read(UNIT))).unwrap();
        let conf = dir.0.join("gpu-exporter.service.d/socket-activation.conf");
        std::fs::write(conf, dropin).unwrap();
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .arg(dir.0.join("gpu-exporter.socket"))
            .arg(dir.0.join("gpu-exporter.service"))
            .output()
            .unwrap();
        (out.status.success(), text(&out))
    };
    let (ok, out) = verify(&local(&dropin));
    assert!(ok && out.is_empty(), "{out}");
    // The drop-in is read: a wrong path in it is reported.
    let (ok, out) = verify(&dropin.replace("/usr/local/bin/", "/nowhere/"));
    assert!(!ok && out.contains("/nowhere/gpu-exporter"), "{out}");
}

// ---------------------------------------------------------- TLS on ----

/// `text` with TLS turned on as the files say: `#tls|` taken off every
/// line marked so, the indentation kept.
fn with_tls(text: &str) -> String {
    let marked = text.lines().filter(|l| l.contains("#tls|")).count();
    assert!(marked >= 3, "{marked} lines marked #tls|");
    text.lines()
        .map(|l| l.replacen("#tls|", "", 1) + "\n")
        .collect()
}

/// `systemd-analyze verify` of `unit`, written as gpu-exporter.service in
/// `dir`: whether it passed, and what it said.
pub(crate) fn systemd_verify(dir: &Path, unit: &str) -> (bool, String) {
    let path = dir.join("gpu-exporter.service");
    std::fs::write(&path, unit).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .unwrap();
    (out.status.success(), text(&out))
}

/// TLS and basic auth turned on: the unit's `#tls|` lines, and the chart's
/// web config values (helm.rs checks the manifests they render), whose
/// DaemonSet args serve.
#[test]
fn the_tls_variants_turn_on_and_serve() {
    let dir = TempDir::new("deploy-tls");
    let unit = with_tls(&read(UNIT));

    // The unit: the credentials and the flag, and systemd takes it.
    let d = directives(&unit);
    let starts = &d["ExecStart"];
    assert_eq!(starts.len(), 3, "{starts:?}");
    assert_eq!(starts[1], "", "the empty ExecStart= resets the first");
    assert!(
        starts[2].ends_with("--web.config.file=%d/web-config.yml"),
        "{starts:?}"
    );
    assert_known_flags(&starts[2].split(' ').collect::<Vec<_>>());
    for file in ["web-config.yml", "tls.crt", "tls.key"] {
        let credential = format!("{file}:/etc/gpu-exporter/{file}");
        assert!(
            d["LoadCredential"].contains(&credential.as_str()),
            "{credential}"
        );
    }
    if have("systemd-analyze", &["--version"]) {
        let local = unit.replace(
            "ExecStart=/usr/local/bin/gpu-exporter",
            &format!("ExecStart={BIN}"),
        );
        let (ok, out) = systemd_verify(&dir.0, &local);
        assert!(ok && out.is_empty(), "{out}");
    }

    // The chart's DaemonSet's args serve: over TLS with basic auth, the
    // probes in plain HTTP beside, on a Secret laid out as the kubelet
    // mounts it.
    let Some((_rendered, _, m)) = crate::helm::render("deploy-tls", crate::helm::TLS_VALUES) else {
        return;
    };
    let c = "DaemonSet/gpu-exporter.spec.template.spec.containers[gpu-exporter]";
    let args: Vec<String> = list(&m, &format!("{c}.args"))
        .iter()
        .map(|a| a.trim_matches('"').to_string())
        .collect();
    assert!(
        args.contains(&"--web.config.file=/etc/gpu-exporter/web/web-config.yml".to_string()),
        "{args:?}"
    );
    let (Some(pki), true) = (crate::pki::pki(), have("curl", &["--version"])) else {
        return;
    };
    if !have("htpasswd", &["-nbB", "u", "p"]) {
        return;
    }
    let secret = dir.0.join("web");
    std::fs::create_dir_all(&secret).unwrap();
    for (to, from) in [("tls.crt", "server.crt"), ("tls.key", "server.key")] {
        std::fs::copy(pki.join(from), secret.join(to)).unwrap();
    }
    let hash = Command::new("htpasswd")
        .args(["-nbBC", "5", "prom", "s3cret"])
        .output()
        .unwrap();
    let hash = String::from_utf8(hash.stdout).unwrap();
    std::fs::write(
        secret.join("web-config.yml"),
        format!(
            "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\nbasic_auth_users:\n  prom: '{}'\n",
            hash.trim().split_once(':').unwrap().1
        ),
    )
    .unwrap();
    let args: Vec<String> = args
        .iter()
        .map(|a| match a.as_str() {
            "nvml" => "sim".into(),
            "--web.listen-address=:9400" => "--web.listen-address=127.0.0.1:0".into(),
            "--web.probe-address=:9401" => "--web.probe-address=127.0.0.1:0".into(),
            _ => a.replace("/etc/gpu-exporter/web", secret.to_str().unwrap()),
        })
        .collect();
    let e = Exporter::serving(
        Command::new(BIN),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let log = e.log();
    let probes: SocketAddr = crate::common::eventually(Duration::from_secs(20), || {
        let log = e.log();
        log.split("serving probes on http://")
            .nth(1)
            .and_then(|u| u.split('/').next()?.parse().ok())
            .ok_or(log)
    });
    crate::common::eventually(Duration::from_secs(60), || {
        let mut s = TcpStream::connect(probes).map_err(|e| e.to_string())?;
        s.write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut raw = String::new();
        let _ = s.read_to_string(&mut raw);
        match raw.starts_with("HTTP/1.1 200") {
            true => Ok(()),
            false => Err(format!("{raw}\n{log}")),
        }
    });
    let curl = |auth: &str| {
        let out = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
            .arg(pki.join("ca.crt"))
            .args(["-u", auth])
            .arg(format!("https://{}/metrics", e.addr))
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(curl("prom:s3cret"), "200", "{}", e.log());
    assert_eq!(curl("prom:wrong"), "401");
}

// ------------------------------------------------------------- Grafana ----

/// The parts of the dashboard the tests read; nanoserde skips the rest.
#[allow(clippy::question_mark)] // in nanoserde's derived code
mod grafana {
    use nanoserde::DeJson;

    #[derive(DeJson)]
    pub struct Dashboard {
        #[nserde(rename = "schemaVersion")]
        pub schema_version: u32,
        pub uid: String,
        pub templating: Templating,
        pub panels: Vec<Panel>,
    }

    #[derive(DeJson)]
    pub struct Templating {
        pub list: Vec<Var>,
    }

    #[derive(DeJson)]
    pub struct Var {
        pub name: String,
        #[nserde(rename = "type")]
        pub kind: String,
        pub definition: Option<String>,
        pub datasource: Option<Datasource>,
    }

    #[derive(DeJson)]
    pub struct Datasource {
        #[nserde(rename = "type")]
        pub kind: String,
        pub uid: String,
    }

    /// A panel, or a row (which holds no query) grouping the panels
    /// below it.
    #[derive(DeJson)]
    pub struct Panel {
        pub id: u32,
        #[nserde(rename = "type")]
        pub kind: String,
        pub title: String,
        pub description: Option<String>,
        pub datasource: Option<Datasource>,
        pub targets: Option<Vec<Target>>,
    }

    #[derive(DeJson)]
    pub struct Target {
        #[nserde(rename = "refId")]
        pub ref_id: String,
        pub expr: String,
        pub datasource: Datasource,
    }
}
use grafana::Dashboard;

fn dashboard() -> Dashboard {
    Dashboard::deserialize_json(&read(DASHBOARD)).expect("dashboard JSON")
}

/// Every (panel title, refId, expr) of the dashboard.
fn queries(d: &Dashboard) -> Vec<(String, String, String)> {
    d.panels
        .iter()
        .flat_map(|p| {
            p.targets
                .iter()
                .flatten()
                .map(|t| (p.title.clone(), t.ref_id.clone(), t.expr.clone()))
        })
        .collect()
}

/// The values of the dashboard's query variables, as regexes of their
/// selected values, in the order they resolve.
#[derive(Clone, Default)]
struct Vars {
    instance: String,
    gpu: String,
    namespace: String,
    pod: String,
}

impl Vars {
    /// Placeholders where only a query's syntax matters.
    fn any() -> Vars {
        Vars {
            instance: "127.0.0.1:9400".into(),
            gpu: "0".into(),
            namespace: "ns".into(),
            pod: "p".into(),
        }
    }
}

/// Substitutes the dashboard's variables as Grafana would: `instance`,
/// `gpu`, `namespace` and `pod` as regexes of their selected values, the
/// interval macros as durations. Anything left starting with `$` is a
/// variable nobody defines.
fn expand(expr: &str, v: &Vars) -> String {
    let mut e = expr.to_string();
    for (name, value) in [
        ("instance", &v.instance),
        ("gpu", &v.gpu),
        ("namespace", &v.namespace),
        ("pod", &v.pod),
    ] {
        e = e
            .replace(&format!("${{{name}}}"), value)
            .replace(&format!("${name}"), value);
    }
    let e = e
        .replace("$__rate_interval", "1m")
        .replace("$__interval", "15s")
        .replace("$__range", "1h");
    assert!(!e.contains('$'), "undefined variable in {expr}");
    e
}

/// A regex matching exactly `values`, escaped for a PromQL string, the way
/// Grafana renders a multi-value variable.
fn regex_of(values: &[String]) -> String {
    let escaped: Vec<String> = values
        .iter()
        .map(|v| {
            v.chars()
                .map(|c| {
                    if ".+*?()|[]{}^$\\".contains(c) {
                        format!(r"\\{c}")
                    } else {
                        c.to_string()
                    }
                })
                .collect()
        })
        .collect();
    match escaped.as_slice() {
        [one] => one.clone(),
        many => format!("({})", many.join("|")),
    }
}

const NOT_METRICS: [&str; 20] = [
    "sum",
    "min",
    "max",
    "avg",
    "count",
    "group",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
    "count_values",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "inf",
    "nan",
    "atan2",
];

/// The metric names a PromQL expression reads: identifiers outside label
/// matchers, strings, ranges and grouping lists that are not functions,
/// aggregations or keywords.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let b = expr.as_bytes();
    let mut names = BTreeSet::new();
    let mut i = 0;
    // Index just past the matching `close`, skipping string literals.
    let skip = |mut i: usize, close: u8| {
        while i < b.len() && b[i] != close {
            if b[i] == b'"' || b[i] == b'\'' {
                let q = b[i];
                i += 1;
                while i < b.len() && b[i] != q {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            i += 1;
        }
        i + 1
    };
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    while i < b.len() {
        match b[i] {
            b'{' => i = skip(i + 1, b'}'),
            b'[' => i = skip(i + 1, b']'),
            b'"' | b'\'' => i = skip(i + 1, b[i]),
            c if c.is_ascii_digit() || c == b'.' => {
                while i < b.len() && (word(b[i]) || b[i] == b'.') {
                    i += 1;
                }
            }
            c if word(c) => {
                let start = i;
                while i < b.len() && word(b[i]) {
                    i += 1;
                }
                let w = &expr[start..i];
                let mut next = i;
                while next < b.len() && b[next] == b' ' {
                    next += 1;
                }
                let call = b.get(next) == Some(&b'(');
                if [
                    "by",
                    "without",
                    "on",
                    "ignoring",
                    "group_left",
                    "group_right",
                ]
                .contains(&w)
                {
                    if call {
                        i = skip(next + 1, b')');
                    }
                } else if !call && !NOT_METRICS.contains(&w) {
                    names.insert(w.to_string());
                }
            }
            _ => i += 1,
        }
    }
    names
}

#[test]
fn metric_names_reads_promql() {
    let names = |e| metric_names(e).into_iter().collect::<Vec<_>>();
    assert_eq!(
        names(r#"sum by (xid) (increase(gpu_xid_errors_total{gpu=~"a|b",instance="x{y}"}[5m]))"#),
        ["gpu_xid_errors_total"]
    );
    assert_eq!(
        names("1 - a:b:c / 0.001 and on (gpu) up > 1e3 or max(b offset 5m)"),
        ["a:b:c", "b", "up"]
    );
}

#[test]
fn dashboard_is_wired_to_its_variables() {
    let d = dashboard();
    assert!(
        (36..=41).contains(&d.schema_version),
        "{}",
        d.schema_version
    );
    assert!(!d.uid.is_empty());
    let var = |name: &str| {
        d.templating
            .list
            .iter()
            .find(|v| v.name == name)
            .unwrap_or_else(|| panic!("no ${name} variable"))
    };
    assert_eq!(var("datasource").kind, "datasource");
    // nanoserde can't type `query` (a string here, an object elsewhere).
    assert!(read(DASHBOARD).contains(r#""query": "prometheus""#));
    for name in ["instance", "gpu", "namespace", "pod"] {
        let v = var(name);
        assert_eq!(v.kind, "query");
        assert!(
            v.definition
                .as_deref()
                .unwrap()
                .starts_with("label_values(")
        );
        assert_eq!(v.datasource.as_ref().unwrap().uid, "${datasource}");
    }
    let mut ids = BTreeSet::new();
    let mut used = BTreeSet::new();
    let mut rows = Vec::new();
    for p in &d.panels {
        assert!(ids.insert(p.id), "panel id {} twice", p.id);
        if p.kind == "row" {
            assert!(p.targets.is_none(), "row {} has a query", p.title);
            rows.push(p.title.as_str());
            continue;
        }
        let description = p.description.as_deref().unwrap_or_default();
        assert!(!description.is_empty(), "{} has no description", p.title);
        let ds = p.datasource.as_ref().expect("a datasource");
        assert_eq!(ds.kind, "prometheus", "{}", p.title);
        assert_eq!(ds.uid, "${datasource}", "{}", p.title);
        let targets = p.targets.as_deref().unwrap_or_default();
        assert!(!targets.is_empty(), "{} has no query", p.title);
        for t in targets {
            assert_eq!(t.datasource.uid, "${datasource}", "{}", p.title);
            let names = metric_names(&t.expr);
            assert!(!names.is_empty(), "{}: no metric in {}", p.title, t.expr);
            // Per-GPU panels follow the variables; the SLO rules are
            // per model and carry neither label.
            let per_gpu = |n: &String| n.starts_with("gpu_") && !n.starts_with("gpu_exporter_");
            if names.iter().any(per_gpu) {
                for sel in [r#"instance=~"$instance""#, r#"gpu=~"$gpu""#] {
                    assert!(t.expr.contains(sel), "{}: {} lacks {sel}", p.title, t.expr);
                }
            }
            used.extend(names);
        }
    }
    for metric in [
        "gpu_temperature_celsius",
        "gpu_clocks_event_active",
        "gpu_xid_errors_total",
        "gpu_ecc_uncorrected_errors_total",
        "gpu_memory_largest_free_bytes",
        "gpu_memory_total_bytes",
        "gpu_allocator_reserved_bytes",
        "gpu_allocator_allocated_bytes",
        "gpu_sm_active_ratio",
        "gpu_utilization_ratio",
        "gpu_power_usage_watts",
        "gpu_power_limit_watts",
        "model_name:llm_ttft_slo_errors:ratio_rate5m",
        "model_name:llm_ttft_slo_errors:ratio_rate3d",
        "model_name:llm_goodput_requests:rate5m",
        "instance_model_name:llm_ttft_slo_errors:ratio_rate5m",
        "model_name:engine_request_errors:ratio_rate5m",
        "gpu_exporter_engine_model_objective_ratio",
        "gpu_exporter_engine_model_slo_info",
        "gpu_remapped_rows_total",
        "gpu_retired_pages_total",
        "gpu_row_remap_pending",
        "gpu_row_remap_failed",
        "gpu_pcie_link_width",
        "gpu_pcie_link_width_max",
        "gpu_nvlink_errors_total",
        "gpu_nvlink_links_active",
        "gpu_recovery_action",
        "gpu_pod_info",
        "gpu_memory_used_bytes",
    ] {
        assert!(used.contains(metric), "no panel shows {metric}");
    }
    // The panel that names pods follows their variables too.
    let by_pod = queries(&d)
        .into_iter()
        .find(|(title, _, _)| title == "GPU memory by pod")
        .expect("a GPU memory by pod panel");
    for sel in [r#"namespace=~"$namespace""#, r#"pod=~"$pod""#] {
        assert!(by_pod.2.contains(sel), "{} lacks {sel}", by_pod.2);
    }
    assert_eq!(rows, ["Hardware health"]);
}

/// Every burn and budget panel divides by each model's own objective, as
/// the exporter serves it, never by a number: a `/ 0.001` is a 99.9%
/// objective every model is assumed to have. No title or description
/// names a bound or objective the models may not have.
#[test]
fn dashboard_burn_panels_divide_by_each_models_objective() {
    let d = dashboard();
    let mut burns = 0;
    for (title, ref_id, expr) in queries(&d) {
        let b = expr.as_bytes();
        let by_number = (0..b.len()).any(|i| {
            b[i] == b'/'
                && (b[i + 1..].iter().find(|c| **c != b' ')).is_some_and(|c| c.is_ascii_digit())
        });
        assert!(!by_number, "{title}/{ref_id} divides by a number: {expr}");
        if expr.contains("errors:ratio_rate") {
            burns += 1;
            let slo = match expr.contains("engine_request_errors") {
                true => "availability",
                false => "ttft",
            };
            let objective = format!(r#"gpu_exporter_engine_model_objective_ratio{{slo="{slo}"}}"#);
            assert!(expr.contains(&objective), "{title}/{ref_id}: {expr}");
        }
    }
    // TTFT 4 + 1 + 2 (node scope), availability 4.
    assert_eq!(burns, 11);
    for p in &d.panels {
        let description = p.description.as_deref().unwrap_or_default();
        for fixed in ["300 ms", "0.001", "0.1%", "99.9%"] {
            assert!(!p.title.contains(fixed), "{}", p.title);
            assert!(!description.contains(fixed), "{}: {description}", p.title);
        }
    }
    let availability = (d.panels.iter())
        .find(|p| p.title == "Engine availability burn rate")
        .expect("an availability panel");
    assert_eq!(availability.targets.as_ref().map(Vec::len), Some(4));
}

#[test]
fn dashboard_queries_parse() {
    if !have("promtool", &["--version"]) {
        return;
    }
    // promtool parses PromQL only inside rule files: one recording rule per
    // query.
    let qs = queries(&dashboard());
    let mut file = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, (_, _, expr)) in qs.iter().enumerate() {
        let expr = expand(expr, &Vars::any()).replace('\'', "''");
        file.push_str(&format!(
            "      - record: dashboard:query{i}\n        expr: '{expr}'\n"
        ));
    }
    let dir = TempDir::new("dashboard-rules");
    let path = dir.0.join("dashboard.rules.yml");
    std::fs::write(&path, &file).unwrap();
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&path)
        .output()
        .unwrap();
    let report = text(&out);
    assert!(out.status.success(), "{report}\n{file}");
    assert!(
        report.contains(&format!("SUCCESS: {} rules found", qs.len())),
        "{report}"
    );
}

#[test]
fn dashboard_metrics_exist() {
    // An H100 with a pod and a V100, which retires pages instead of
    // remapping rows, and a model (its objectives).
    let e = Exporter::on_scenario(
        "dashboard-fleet.json",
        r#"{"gpus":[{"pods":[{"namespace":"ns","pod":"p"}]},
            {"model":"Tesla V100-SXM2-32GB","health":{"retired_pages_pending":false}}],
            "models":[{"name":"m","requests_per_second":10}]}"#,
        &[],
    );
    let body = e.metrics(None).body;
    let mut known: BTreeSet<String> = body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect();
    assert!(known.contains("gpu_temperature_celsius"), "{body}");
    known.extend(
        read(RULES)
            .lines()
            .filter_map(|l| l.trim().strip_prefix("- record: "))
            .map(str::to_string),
    );
    // The simulator has no MIG: the MIG instances' memory families are
    // the catalogue's.
    use model::readings;
    known.extend(readings::all().filter_map(|r| Some(r.mig.as_ref()?.name.to_string())));
    // Served with --engine.endpoint only (engines::, replicas::).
    known.insert("gpu_exporter_engine_model_slo_info".into());
    for (title, ref_id, expr) in queries(&dashboard()) {
        for name in metric_names(&expr) {
            assert!(
                known.contains(&name),
                "{title}/{ref_id}: {name} is neither exported nor recorded"
            );
        }
    }
}

// ---------------------------------------------------------- Prometheus ----

/// A Prometheus server on a free loopback port; killed (and its data
/// removed) on drop, panics included.
pub struct Prometheus {
    child: Child,
    addr: SocketAddr,
    dir: TempDir,
}

/// A loopback address free now, for a server a test starts next.
pub fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

impl Prometheus {
    /// Prometheus scraping `target` every second with the committed rules.
    pub fn start(target: SocketAddr) -> Prometheus {
        Prometheus::start_with(target, &root().join(RULES))
    }

    /// Prometheus scraping `target` every second, as job `gpu-exporter`,
    /// evaluating `rules` every second.
    pub fn start_with(target: SocketAddr, rules: &Path) -> Prometheus {
        Prometheus::with_config(
            &format!("prometheus-{}", target.port()),
            &format!(
                "rule_files:\n  - '{}'\n\
                 scrape_configs:\n  - job_name: gpu-exporter\n    static_configs:\n      - targets: ['{target}']\n",
                rules.display()
            ),
        )
    }

    /// A Prometheus scraping and evaluating every second, on the rest of
    /// its configuration, `config` (in a directory named after `tag`).
    pub fn with_config(tag: &str, config: &str) -> Prometheus {
        let dir = TempDir::new(tag);
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n{config}"
        );
        std::fs::write(dir.0.join("prometheus.yml"), config).unwrap();
        // Free now; a race for it shows as Prometheus exiting, reported below.
        let addr = free_addr();
        let log = std::fs::File::create(dir.0.join("log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.0.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.0.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn prometheus");
        Prometheus { child, addr, dir }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("log")).unwrap_or_default()
    }

    /// GET `target`; None while the server is not answering yet.
    pub fn get(&mut self, target: &str) -> Option<(u16, String)> {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("prometheus exited ({status}):\n{}", self.log());
        }
        let mut s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // HTTP/1.0: the answer is never chunked and ends at close.
        write!(s, "GET {target} HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr).ok()?;
        let mut raw = String::new();
        s.read_to_string(&mut raw).ok()?;
        let (head, body) = raw.split_once("\r\n\r\n")?;
        Some((head.get(9..12)?.parse().ok()?, body.to_string()))
    }

    /// A successful API answer's body, parsed; None while not ready.
    fn api<T: DeJson>(&mut self, target: &str) -> Option<T> {
        let (status, body) = self.get(target)?;
        if status == 503 {
            return None; // still starting
        }
        assert_eq!(status, 200, "{target}: {body}");
        Some(T::deserialize_json(&body).unwrap_or_else(|e| panic!("{target}: {e}: {body}")))
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(DeJson)]
struct LabelValues {
    data: Vec<String>,
}

#[derive(DeJson)]
struct QueryAnswer {
    data: QueryData,
}

#[derive(DeJson)]
struct QueryData {
    result: Vec<Series>,
}

#[derive(DeJson)]
struct Series {
    #[allow(dead_code)] // only counted; `value` mixes types and is skipped
    metric: BTreeMap<String, String>,
}

pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn dashboard_queries_return_data_from_prometheus() {
    if !have("prometheus", &["--version"]) {
        return;
    }
    let d = dashboard();
    let exporter = Exporter::start(&[]);
    let mut prom = Prometheus::start(exporter.addr);
    let deadline = Instant::now() + Duration::from_secs(40);
    let wait = |what: &str, prom: &Prometheus| {
        assert!(
            Instant::now() < deadline,
            "no data within 40s: {what}\n{}",
            prom.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    };

    // The variables, resolved as Grafana would: label_values(selector,
    // label) through the series API, each after the ones it uses.
    let mut vars = Vars::default();
    for name in ["instance", "gpu", "namespace", "pod"] {
        let v = d.templating.list.iter().find(|v| v.name == name).unwrap();
        let def = v.definition.as_deref().unwrap();
        let (selector, label) = def
            .strip_prefix("label_values(")
            .and_then(|s| s.strip_suffix(')'))
            .and_then(|s| s.rsplit_once(','))
            .unwrap_or_else(|| panic!("{def}"));
        let target = format!(
            "/api/v1/label/{}/values?match[]={}",
            label.trim(),
            urlencode(&expand(selector, &vars))
        );
        let values = loop {
            match prom.api::<LabelValues>(&target) {
                Some(v) if !v.data.is_empty() => break v.data,
                _ => wait(def, &prom),
            }
        };
        // The demo's pods: one on GPUs 0 and 1, two sharing GPU 2.
        let (want, slot): (&[&str], _) = match name {
            "instance" => (&[], &mut vars.instance),
            "gpu" => (&["0", "1", "2", "3"], &mut vars.gpu),
            "namespace" => (&["inference", "research"], &mut vars.namespace),
            _ => (
                &["llama-70b-0", "notebook-alice", "notebook-bob"],
                &mut vars.pod,
            ),
        };
        match name {
            "instance" => assert_eq!(values, [exporter.addr.to_string()]),
            _ => assert_eq!(values, want),
        }
        *slot = regex_of(&values);
    }

    // Every panel query: rates need two scrapes and the recording rules an
    // evaluation, so poll until each has answered with data once.
    for (title, ref_id, expr) in queries(&d) {
        if expr.contains("engine_request_errors") {
            // The simulator's models count no outcomes: the availability
            // records need an engine's (parsed above, not run here).
            continue;
        }
        let expr = expand(&expr, &vars);
        let target = format!("/api/v1/query?query={}", urlencode(&expr));
        while prom
            .api::<QueryAnswer>(&target)
            .is_none_or(|a| a.data.result.is_empty())
        {
            wait(&format!("{title}/{ref_id}: {expr}"), &prom);
        }
    }
}

// -------------------------------------------------------- Alertmanager ----

const ALERTMANAGER: &str = "deploy/alertmanager/alertmanager.yml";

/// The shipped Alertmanager configuration passes `amtool check-config`,
/// routes pages and tickets to their receivers and the rest nowhere, and
/// holds the inhibit rules the exporter marks by (a unit test in
/// crates/alerts/src/inhibit.rs compares them).
#[test]
fn amtool_checks_the_alertmanager_config() {
    if !have("amtool", &["--version"]) {
        return;
    }
    let path = root().join(ALERTMANAGER);
    let out = Command::new("amtool")
        .arg("check-config")
        .arg(&path)
        .output()
        .unwrap();
    let report = text(&out);
    assert!(out.status.success(), "{report}");
    assert!(report.contains("SUCCESS"), "{report}");
    assert!(report.contains("9 inhibit rules"), "{report}");
    for (labels, receiver) in [
        (
            &["severity=page", "alertname=GPULost", "uuid=GPU-1"][..],
            "page",
        ),
        (&["severity=ticket", "alertname=GPUXidEvents"][..], "ticket"),
        (
            &[
                "severity=page",
                "alertname=TTFTBudgetBurn",
                "scope=node",
                "model_name=m",
            ][..],
            "page",
        ),
        (
            &["severity=ticket", "alertname=EngineDown", "model_name=m"][..],
            "ticket",
        ),
        (&["alertname=Watchdog"][..], "null"),
    ] {
        let out = Command::new("amtool")
            .args(["config", "routes", "test", "--config.file"])
            .arg(&path)
            .args(labels)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.trim(), receiver, "{labels:?}: {}", text(&out));
    }
}

/// The DaemonSet of `m` (its Namespace too), renamed `DaemonSet/gpu-exporter`,
/// without its name, labels and args: what must be daemonset.yaml's.
fn pod_but_names(m: &Flat, ds: &str) -> Flat {
    let c = ".spec.template.spec.containers[gpu-exporter].args";
    m.iter()
        .filter_map(|(k, v)| {
            let rest = k.strip_prefix(ds)?;
            let named = rest == ".metadata.name" || rest.contains("abels.") || rest.starts_with(c);
            (!named).then(|| (format!("DaemonSet/gpu-exporter{rest}"), v.clone()))
        })
        .chain(
            m.iter()
                .filter(|(k, _)| k.starts_with("Namespace/"))
                .map(|(k, v)| (k.clone(), v.clone())),
        )
        .collect()
}

/// The dcgm drop-in: a DaemonSet that is daemonset-attribution.yaml (root's
/// uid for root's socket, the socket mounted read-only, probes, resources,
/// NODE_NAME) without its hostPID, but for its name, dcgm-exporter's Helm
/// labels and the args that serve dcgm's names only on dcgm-exporter's
/// port, pods attributed; its Service and ServiceMonitor select it as the
/// chart's do, honorLabels false as there.
#[test]
fn the_dcgm_dropin_is_found_by_dcgm_exporters_selectors() {
    let (Some(base), Some(m)) = (
        flatten(&["daemonset-attribution.yaml"]),
        flatten(&["dcgm-dropin.yaml"]),
    ) else {
        return;
    };
    let ds = "DaemonSet/dcgm-exporter";
    let c = format!("{ds}.spec.template.spec.containers[gpu-exporter]");
    let mut attribution = pod_but_names(&base, "DaemonSet/gpu-exporter");
    let host_pid = "DaemonSet/gpu-exporter.spec.template.spec.hostPID";
    assert_eq!(attribution.remove(host_pid).as_deref(), Some("true"));
    assert_eq!(pod_but_names(&m, ds), attribution);
    let helm = r#""dcgm-exporter""#;
    for at in [
        "metadata.labels",
        "spec.selector.matchLabels",
        "spec.template.metadata.labels",
    ] {
        let labels = map(&m, &format!("{ds}.{at}"));
        for k in [
            "app.kubernetes.io/name",
            "app.kubernetes.io/instance",
            "app.kubernetes.io/component",
        ] {
            assert_eq!(labels.get(k), Some(&helm), "{at}.{k}");
        }
    }
    let args = list(&m, &format!("{c}.args"));
    assert_eq!(
        args,
        [
            r#""--source""#,
            r#""nvml""#,
            r#""--web.listen-address=:9400""#,
            r#""--web.probe-address=:9401""#,
            r#""--collector.disable-defaults""#,
            r#""--collector.dcgm""#,
            r#""--compat.dcgm-counters=/etc/dcgm-exporter/default-counters.csv""#,
            r#""--kubernetes.pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock""#,
            r#""--kubernetes.pod-labels""#,
        ]
    );
    assert_known_flags(&args);
    expect(&m, &format!("{c}.ports[metrics].containerPort"), "9400");
    expect(
        &m,
        &format!("{c}.env[NODE_NAME].valueFrom.fieldRef.fieldPath"),
        r#""spec.nodeName""#,
    );
    let pod_labels = map(&m, &format!("{ds}.spec.template.metadata.labels"));
    let (svc, sm) = ("Service/dcgm-exporter", "ServiceMonitor/dcgm-exporter");
    for obj in [svc, sm] {
        expect(
            &m,
            &format!("{obj}.metadata.labels.app.kubernetes.io/name"),
            helm,
        );
    }
    expect(&m, &format!("{svc}.spec.ports[metrics].port"), "9400");
    expect(
        &m,
        &format!("{svc}.spec.ports[metrics].targetPort"),
        r#""metrics""#,
    );
    let selector = map(&m, &format!("{svc}.spec.selector"));
    assert_eq!(selector.len(), 3, "{selector:?}");
    for (k, v) in &selector {
        assert_eq!(pod_labels.get(k), Some(v), "Service selects {k}={v}");
    }
    // Not daemonset.yaml's pods: those serve our names.
    let ours = map(
        &base,
        "DaemonSet/gpu-exporter.spec.template.metadata.labels",
    );
    assert!(selector.iter().any(|(k, v)| ours.get(k) != Some(v)));
    let svc_labels = map(&m, &format!("{svc}.metadata.labels"));
    let wanted = map(&m, &format!("{sm}.spec.selector.matchLabels"));
    assert_eq!(wanted.len(), 3, "{wanted:?}");
    for (k, v) in &wanted {
        assert_eq!(svc_labels.get(k), Some(v), "ServiceMonitor selects {k}={v}");
    }
    expect(&m, &format!("{sm}.spec.endpoints[0].port"), r#""metrics""#);
    // The core objects validate (the ServiceMonitor has no schema there).
    if have("python3", &["-m", "kubernetes_validate", "--version"]) {
        let all = read(&format!("{K8S}/dcgm-dropin.yaml"));
        let core = &all[..all.find("kind: ServiceMonitor").unwrap()];
        let core = &core[..core.rfind("---").unwrap()];
        let dir = TempDir::new("dcgm-dropin");
        let path = dir.0.join("dcgm-dropin-core.yaml");
        std::fs::write(&path, core).unwrap();
        let out = validate(&[path], None);
        assert!(
            out.status.success() && text(&out).is_empty(),
            "{}",
            text(&out)
        );
    }
}

/// The GPU Operator's shape: its names, label, ports and probes, the
/// image's -dcgm tag started with the Operator's environment alone (no
/// args), which the binary reads as dcgm-exporter would; the Service
/// selects the pods. kubernetes_manifests_validate_offline validates it.
#[test]
fn the_gpu_operator_shape_runs_the_dcgm_tag_with_its_environment() {
    let Some(m) = flatten(&["dcgm-operator.yaml"]) else {
        return;
    };
    let ds = "DaemonSet/nvidia-dcgm-exporter";
    expect(&m, &format!("{ds}.metadata.namespace"), r#""gpu-operator""#);
    let c = format!("{ds}.spec.template.spec.containers[nvidia-dcgm-exporter]");
    expect(&m, &format!("{c}.image"), r#""gpu-exporter:0.1.0-dcgm""#);
    assert!(list(&m, &format!("{c}.args")).is_empty());
    let env: Vec<(String, String)> = [
        ("DCGM_EXPORTER_LISTEN", r#"":9400""#),
        ("DCGM_EXPORTER_KUBERNETES", r#""true""#),
        (
            "DCGM_EXPORTER_COLLECTORS",
            r#""/etc/dcgm-exporter/dcp-metrics-included.csv""#,
        ),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (k, v) in &env {
        expect(&m, &format!("{c}.env[{k}].value"), v);
    }
    expect(&m, &format!("{c}.ports[metrics].containerPort"), "9400");
    for probe in ["livenessProbe", "readinessProbe"] {
        expect(&m, &format!("{c}.{probe}.httpGet.path"), r#""/health""#);
    }
    expect(
        &m,
        &format!("{c}.volumeMounts[pod-gpu-resources].mountPath"),
        r#""/var/lib/kubelet/pod-resources""#,
    );
    let svc = "Service/nvidia-dcgm-exporter";
    expect(&m, &format!("{svc}.spec.ports[gpu-metrics].port"), "9400");
    let pods = map(&m, &format!("{ds}.spec.template.metadata.labels"));
    for (k, v) in map(&m, &format!("{svc}.spec.selector")) {
        assert_eq!(pods.get(k), Some(&v), "Service selects {k}={v}");
    }
    assert_eq!(pods.get("app"), Some(&r#""nvidia-dcgm-exporter""#));
    // The binary reads that environment as the Operator means it.
    let unquote = |v: &str| v.trim_matches('"').to_string();
    let out = Command::new(crate::common::BIN)
        .args([
            "--compat.dcgm-exporter-cli",
            "--source",
            "sim",
            "--print-rules",
        ])
        .envs(env.iter().map(|(k, v)| (k, unquote(v))))
        .env(
            "DCGM_EXPORTER_COLLECTORS",
            root().join("tests/fixtures/dcgm/dcp-metrics-included.csv"),
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
}
