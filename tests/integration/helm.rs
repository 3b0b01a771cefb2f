//! The Helm chart (deploy/helm/gpu-exporter) through real Helm: PyPI
//! helm-python-sdk, Helm's own Go SDK in a C library driven from Python
//! (tests/helm/chart.py), no helm binary. It lints clean, every manifest of
//! a matrix of values validates for Kubernetes 1.30, its schema refuses
//! bad values with Helm's message, the static manifests are its render,
//! and its dcgm mode is found as dcgm-exporter's own chart's objects are.

use crate::common::{BIN, have};
use crate::deploy::{
    Flat, TempDir, assert_hardened, assert_known_flags, expect, flatten_paths, get, list, map,
    text, validate_for,
};
use nanoserde::DeJson;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const CHART: &str = "deploy/helm/gpu-exporter";
const DCGM_CHART: &str = "tests/fixtures/dcgm-exporter-chart";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Whether helm-python-sdk loads: its wheel is x86_64 only, so elsewhere
/// the chart tests skip (and fail in CI, where .ci/run installs it).
pub fn helm_ready() -> bool {
    let ok = have("python3", &["-c", "import helm_python"]);
    if !ok {
        eprintln!("SKIP: helm-python-sdk is not installed (x86_64 only; .ci/run installs it)");
    }
    ok
}

/// tests/helm/chart.py with `args`.
pub fn chart_py(args: &[&str]) -> Output {
    Command::new("python3")
        .arg(root().join("tests/helm/chart.py"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap()
}

/// The manifests `chart` renders with `values` (JSON) as release `name`
/// in `namespace`, one file per template, in `dir`.
pub fn render_in(dir: &Path, chart: &Path, values: &str, name: &str, ns: &str) -> Vec<PathBuf> {
    let out = chart_py(&[
        "render",
        chart.to_str().unwrap(),
        values,
        name,
        ns,
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{values}: {}", text(&out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|f| dir.join(f))
        .collect()
}

/// Our chart rendered with `values` as release gpu-exporter in namespace
/// gpu-exporter, flattened (deploy.rs's `Kind/name.path` keys), or None
/// where Helm or PyYAML is missing.
pub fn render(tag: &str, values: &str) -> Option<(TempDir, Vec<PathBuf>, Flat)> {
    if !helm_ready() {
        return None;
    }
    let dir = TempDir::new(&format!("helm-{tag}"));
    let files = render_in(
        &dir.0,
        &root().join(CHART),
        values,
        "gpu-exporter",
        "gpu-exporter",
    );
    let flat = flatten_paths(&files)?;
    Some((dir, files, flat))
}

/// The web config on: TLS and basic auth from the Secret gpu-exporter-web.
pub const TLS_VALUES: &str =
    r#"{"web":{"config":{"secretName":"gpu-exporter-web","tls":true,"basicAuth":true}}}"#;

/// The values of the matrix: each renders, lints and validates.
const CASES: &[(&str, &str)] = &[
    ("defaults", "{}"),
    ("tls-auth", TLS_VALUES),
    ("dcgm", r#"{"dcgm":{"enabled":true}}"#),
    (
        "dcgm-auth-counters",
        r#"{"dcgm":{"enabled":true,"counters":"DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"},"web":{"config":{"secretName":"w","basicAuth":true}}}"#,
    ),
    (
        "engines",
        r#"{"engines":{"endpoints":["http://127.0.0.1:8000/metrics","vllm=http://127.0.0.1:8001/metrics"],"podMonitor":{"enabled":true,"labels":{"release":"kps"},"engineLabel":"app.example/engine","endpoints":[{"engine":"vllm","port":8080,"path":"/metrics"}]}}}"#,
    ),
    ("host-network", r#"{"hostNetwork":true}"#),
    (
        "digest",
        r#"{"image":{"repository":"registry.example/gpu-exporter","digest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}}"#,
    ),
    (
        "everything-else",
        r#"{"namespace":{"create":true},"attribution":{"enabled":true},"kernelLog":{"enabled":true},"web":{"config":{"secretName":"w","tls":true}},"podMonitor":{"enabled":true},"collectors":{"disableDefaults":true,"enable":["temperature","power"],"disable":["ecc"]},"extraArgs":["--collect.interval=5s"],"prometheusRule":{"runbookBaseUrl":"https://wiki.example/runbooks/","labels":{"release":"kps"}},"serviceMonitor":{"labels":{"release":"kps"}},"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"nvidia.com/gpu.present","operator":"Exists"}]}]}}}}"#,
    ),
];

#[derive(DeJson)]
struct LintReport {
    messages: Vec<LintMessage>,
    errors: Vec<String>,
}

#[derive(DeJson)]
struct LintMessage {
    severity: u32,
    path: String,
    error: String,
}

/// `helm lint --strict` for Kubernetes 1.30 on `values`.
fn lint(values: &str) -> LintReport {
    let out = chart_py(&["lint", CHART, values]);
    assert!(out.status.success(), "{}", text(&out));
    DeJson::deserialize_json(&String::from_utf8(out.stdout).unwrap()).unwrap()
}

#[test]
fn the_chart_lints_without_errors_or_warnings() {
    if !helm_ready() {
        return;
    }
    for (case, values) in CASES {
        let report = lint(values);
        assert!(report.errors.is_empty(), "{case}: {:?}", report.errors);
        // Severity 1 is information ("icon is recommended"); 2 a warning.
        for m in &report.messages {
            assert!(m.severity < 2, "{case}: {}: {}", m.path, m.error);
        }
    }
    // The same lint reports a value the schema refuses as an error.
    let bad = lint(r#"{"serviceMonitr":{}}"#);
    assert!(
        bad.messages.iter().any(|m| m.severity == 3),
        "{:?}",
        bad.errors
    );
}

/// Every field path the Prometheus Operator's objects may use here: its
/// kinds have no schema offline, so our manifests are held to the fields
/// of its v1 API that we know.
const OPERATOR_FIELDS: &[&str] = &[
    r"^apiVersion$",
    r"^kind$",
    r"^metadata\.(name|namespace)$",
    r"^metadata\.labels\..+$",
    r"^spec\.selector\.matchLabels\..+$",
    r"^spec\.selector\.matchExpressions\[\d+\]\.(key|operator|values\[\d+\])$",
    r"^spec\.namespaceSelector\.matchNames\[\d+\]$",
    r"^spec\.namespaceSelector\.any$",
    r"^spec\.jobLabel$",
    r"^spec\.(endpoints|podMetricsEndpoints)\[\d+\]\.(port|targetPort|path|interval|scrapeTimeout|honorLabels|scheme)$",
    r"^spec\.(endpoints|podMetricsEndpoints)\[\d+\]\.tlsConfig\.serverName$",
    r"^spec\.(endpoints|podMetricsEndpoints)\[\d+\]\.tlsConfig\.ca\.secret\.(name|key)$",
    r"^spec\.(endpoints|podMetricsEndpoints)\[\d+\]\.basicAuth\.(username|password)\.(name|key)$",
    r"^spec\.(endpoints|podMetricsEndpoints)\[\d+\]\.relabelings\[\d+\]\.(sourceLabels\[\d+\]|targetLabel|replacement|regex|action|separator)$",
    r"^spec\.groups\[[^\]]+\]\.name$",
    r"^spec\.groups\[[^\]]+\]\.rules\[\d+\]\.(record|alert|expr|for|keep_firing_for)$",
    r"^spec\.groups\[[^\]]+\]\.rules\[\d+\]\.(labels|annotations)\.[^.]+$",
];

/// The flattened paths of the Operator's objects in `m` that are none of
/// [`OPERATOR_FIELDS`], checked in one python3 call (std has no regex).
fn unknown_operator_fields(m: &Flat) -> Vec<String> {
    let paths: Vec<&str> = m
        .keys()
        .filter(|k| {
            ["ServiceMonitor/", "PodMonitor/", "PrometheusRule/"]
                .iter()
                .any(|kind| k.starts_with(kind))
        })
        .map(|k| k.split_once('.').map_or(k.as_str(), |(_, p)| p))
        .collect();
    assert!(!paths.is_empty(), "no Operator object");
    let out = Command::new("python3")
        .args([
            "-c",
            "import re, sys\n\
             pats = [re.compile(p) for p in sys.argv[1].split('\\n')]\n\
             for line in sys.stdin.read().splitlines():\n\
             \x20   if not any(p.search(line) for p in pats): print(line)",
            &OPERATOR_FIELDS.join("\n"),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .unwrap()
                .write_all(paths.join("\n").as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// The manifests of every case: the core kinds valid for Kubernetes 1.30
/// (strict: no unknown field), the Operator's kinds within the fields we
/// know, every exporter flag one --help lists.
#[test]
fn every_case_renders_manifests_valid_for_kubernetes_1_30() {
    if !helm_ready() || !have("python3", &["-m", "kubernetes_validate", "--version"]) {
        return;
    }
    for (case, values) in CASES {
        let (_dir, files, m) = render(case, values).unwrap();
        let core: Vec<PathBuf> = files
            .iter()
            .filter(|f| {
                let t = std::fs::read_to_string(f).unwrap();
                !t.contains("apiVersion: monitoring.coreos.com/")
            })
            .cloned()
            .collect();
        let out = validate_for(&["1.30.0"], &core, None);
        assert!(
            out.status.success() && text(&out).is_empty(),
            "{case}: {}",
            text(&out)
        );
        let unknown = unknown_operator_fields(&m);
        assert!(unknown.is_empty(), "{case}: {unknown:#?}");
        let ds = m
            .keys()
            .find_map(|k| k.strip_prefix("DaemonSet/"))
            .and_then(|k| k.split_once('.'))
            .map(|(name, _)| name.to_string())
            .unwrap();
        let c = format!("DaemonSet/{ds}.spec.template.spec.containers[gpu-exporter]");
        assert_known_flags(&list(&m, &format!("{c}.args")));
    }
    // The validator is strict: a misspelt field in a rendered DaemonSet
    // fails, so the passes above mean something.
    let (_dir, files, _) = render("strict", "{}").unwrap();
    let ds = files
        .iter()
        .find(|f| f.ends_with("daemonset.yaml"))
        .unwrap();
    let broken = std::fs::read_to_string(ds)
        .unwrap()
        .replace("readOnlyRootFilesystem", "readOnlyRootFileSystem");
    let out = validate_for(&["1.30.0"], &[PathBuf::from("-")], Some(&broken));
    assert!(!out.status.success(), "{}", text(&out));
}

/// What each case turns on is in its manifests, and nothing of the other
/// cases is.
#[test]
fn each_value_renders_what_it_says() {
    let Some((_d, _f, tls)) = render("tls", CASES[1].1) else {
        return;
    };
    let pod = "DaemonSet/gpu-exporter.spec.template.spec";
    let c = format!("{pod}.containers[gpu-exporter]");
    expect(
        &tls,
        &format!("{pod}.volumes[web].secret.secretName"),
        r#""gpu-exporter-web""#,
    );
    expect(
        &tls,
        &format!("{c}.volumeMounts[web].mountPath"),
        r#""/etc/gpu-exporter/web""#,
    );
    assert!(!tls.contains_key(&format!("{c}.volumeMounts[web].subPath")));
    let args = list(&tls, &format!("{c}.args"));
    assert!(args.contains(&r#""--web.config.file=/etc/gpu-exporter/web/web-config.yml""#));
    // The kubelet's probes stay on the plain-HTTP probe port.
    assert_hardened(&tls, &c, "probes");
    let e = "ServiceMonitor/gpu-exporter.spec.endpoints[0]";
    expect(&tls, &format!("{e}.scheme"), r#""https""#);
    expect(
        &tls,
        &format!("{e}.tlsConfig.serverName"),
        r#""gpu-exporter.gpu-exporter.svc""#,
    );
    for (key, item) in [
        ("tlsConfig.ca.secret", "ca.crt"),
        ("basicAuth.username", "username"),
        ("basicAuth.password", "password"),
    ] {
        expect(&tls, &format!("{e}.{key}.name"), r#""gpu-exporter-scrape""#);
        expect(&tls, &format!("{e}.{key}.key"), &format!("{item:?}"));
    }

    let (_d, _f, engines) = render("engines", CASES[4].1).unwrap();
    let args = list(&engines, &format!("{c}.args"));
    assert!(
        args.contains(&r#""--engine.endpoint=http://127.0.0.1:8000/metrics""#),
        "{args:?}"
    );
    assert!(
        args.contains(&r#""--engine.endpoint=vllm=http://127.0.0.1:8001/metrics""#),
        "{args:?}"
    );
    // The engines' PodMonitor, on: its endpoints and label as given.
    let pm = "PodMonitor/gpu-exporter-engines";
    expect(
        &engines,
        &format!("{pm}.metadata.labels.release"),
        r#""kps""#,
    );
    let ep = format!("{pm}.spec.podMetricsEndpoints[0]");
    expect(&engines, &format!("{ep}.targetPort"), "8080");
    assert_eq!(
        list(&engines, &format!("{ep}.relabelings[0].sourceLabels")),
        [r#""__meta_kubernetes_pod_label_app_example_engine""#]
    );
    expect(&engines, &format!("{ep}.relabelings[0].regex"), r#""vllm""#);
    assert!(!engines.contains_key(&format!("{pm}.spec.podMetricsEndpoints[1].path")));

    let (_d, _f, host) = render("host", CASES[5].1).unwrap();
    expect(&host, &format!("{pod}.hostNetwork"), "true");
    expect(
        &host,
        &format!("{pod}.dnsPolicy"),
        r#""ClusterFirstWithHostNet""#,
    );

    let (_d, _f, digest) = render("digest", CASES[6].1).unwrap();
    expect(
        &digest,
        &format!("{c}.image"),
        r#""registry.example/gpu-exporter@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef""#,
    );

    // The defaults have none of it.
    let (_d, _f, base) = render("base", "{}").unwrap();
    for k in [
        format!("{pod}.volumes[web].secret.secretName"),
        format!("{pod}.hostNetwork"),
        format!("{pod}.volumes[kmsg].hostPath.path"),
        format!("{e}.scheme"),
        "PodMonitor/gpu-exporter-engines.spec.podMetricsEndpoints[0].targetPort".to_string(),
    ] {
        assert!(!base.contains_key(&k), "{k}");
    }
    expect(&base, &format!("{c}.image"), r#""gpu-exporter:0.1.0""#);
}

#[test]
fn the_runbook_url_and_the_job_reach_the_rules() {
    let values = CASES[7].1;
    let Some((_d, files, m)) = render("rules", values) else {
        return;
    };
    let rule = files
        .iter()
        .find(|f| f.ends_with("prometheusrule.yaml"))
        .unwrap();
    let rules = std::fs::read_to_string(rule).unwrap();
    // Every alert links the given host, ExporterDown's too; no placeholder
    // is left.
    assert!(rules.contains("runbook_url: 'https://wiki.example/runbooks/ExporterDown.md'"));
    assert!(
        !rules.contains("{{ $labels.instance }}/docs/runbooks"),
        "{rules}"
    );
    assert!(!rules.contains("__SCRAPE_JOB__") && !rules.contains("runbook-base.invalid"));
    // Under the PodMonitor the job is its jobLabel's value.
    expect(
        &m,
        "PodMonitor/gpu-exporter.spec.jobLabel",
        r#""app.kubernetes.io/name""#,
    );
    assert!(rules.contains(r#"up{job="gpu-exporter"}"#));
    expect(
        &m,
        "PrometheusRule/gpu-exporter.metadata.labels.release",
        r#""kps""#,
    );
    // The kernel log, read-only from the node.
    let pod = "DaemonSet/gpu-exporter.spec.template.spec";
    expect(
        &m,
        &format!("{pod}.volumes[kmsg].hostPath.path"),
        r#""/dev/kmsg""#,
    );
    expect(
        &m,
        &format!("{pod}.volumes[kmsg].hostPath.type"),
        r#""CharDevice""#,
    );
    expect(
        &m,
        &format!("{pod}.containers[gpu-exporter].volumeMounts[kmsg].readOnly"),
        "true",
    );
    // The exporter gets the same URL for its own pages.
    let c = "DaemonSet/gpu-exporter.spec.template.spec.containers[gpu-exporter]";
    assert!(
        list(&m, &format!("{c}.args"))
            .contains(&r#""--alerts.runbook-base-url=https://wiki.example/runbooks/""#)
    );

    // Another release name: the Service's name is the job.
    let dir = TempDir::new("helm-job");
    let files = render_in(&dir.0, &root().join(CHART), "{}", "fleet", "mon");
    let rule = files
        .iter()
        .find(|f| f.ends_with("prometheusrule.yaml"))
        .unwrap();
    let rules = std::fs::read_to_string(rule).unwrap();
    assert!(
        rules.contains(r#"absent(up{job="fleet-gpu-exporter"})"#),
        "{rules}"
    );
    let m = flatten_paths(&files).unwrap();
    expect(
        &m,
        "Service/fleet-gpu-exporter.metadata.namespace",
        r#""mon""#,
    );
}

/// Helm's own message, on stderr, for values the schema refuses.
fn refused(values: &str) -> String {
    let dir = TempDir::new("helm-refused");
    let out = chart_py(&["render", CHART, values, "r", "n", dir.0.to_str().unwrap()]);
    assert!(!out.status.success(), "{values} rendered");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_schema_refuses_unknown_keys_and_wrong_types() {
    if !helm_ready() {
        return;
    }
    let typo = refused(r#"{"serviceMonitor":{"intervall":"30s"}}"#);
    assert!(
        typo.contains("at '/serviceMonitor': additional properties 'intervall' not allowed"),
        "{typo}"
    );
    let top = refused(r#"{"hostNetwrok":true}"#);
    assert!(
        top.contains("additional properties 'hostNetwrok' not allowed"),
        "{top}"
    );
    let port = refused(r#"{"web":{"port":"9400"}}"#);
    assert!(
        port.contains("at '/web/port': got string, want integer"),
        "{port}"
    );
    let engine_port = refused(
        r#"{"engines":{"podMonitor":{"endpoints":[{"engine":"vllm","port":"8000","path":"/metrics"}]}}}"#,
    );
    assert!(
        engine_port.contains("at '/engines/podMonitor/endpoints/0/port': got string, want integer"),
        "{engine_port}"
    );
    let engine_typo = refused(r#"{"engines":{"podMonitor":{"enable":true}}}"#);
    assert!(
        engine_typo
            .contains("at '/engines/podMonitor': additional properties 'enable' not allowed"),
        "{engine_typo}"
    );
    let digest = refused(r#"{"image":{"digest":"latest"}}"#);
    assert!(digest.contains("/image/digest"), "{digest}");
    // A web config described but not given: one line that says so.
    let tls = refused(r#"{"web":{"config":{"tls":true}}}"#);
    assert!(tls.contains("set it too"), "{tls}");
}

/// deploy/kubernetes's rendered manifests are the chart's render, byte for
/// byte, and the chart's rule files are this binary's --print-rules.
#[test]
fn the_static_manifests_and_rules_are_the_charts() {
    if !helm_ready() {
        return;
    }
    let out = Command::new("python3")
        .arg(root().join("deploy/helm/render-static.py"))
        .args(["--check", "--bin", BIN])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
}

/// Grafana's sidecar finds each dashboard of deploy/grafana, unchanged.
#[test]
fn the_dashboards_are_configmaps_for_grafanas_sidecar() {
    let Some((_d, _f, m)) = render("dashboards", "{}") else {
        return;
    };
    let mut n = 0;
    for entry in std::fs::read_dir(root().join("deploy/grafana")).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_str().unwrap().to_string();
        let Some(stem) = file.strip_suffix(".json") else {
            continue;
        };
        let cm = format!("ConfigMap/gpu-exporter-{stem}");
        expect(
            &m,
            &format!("{cm}.metadata.labels.grafana_dashboard"),
            r#""1""#,
        );
        let data: String = DeJson::deserialize_json(get(&m, &format!("{cm}.data.{file}"))).unwrap();
        assert_eq!(
            data,
            std::fs::read_to_string(&path).unwrap().trim_end(),
            "{file}"
        );
        n += 1;
    }
    assert!(n >= 1);
    let (_d, _f, off) = render(
        "no-dashboards",
        r#"{"grafanaDashboards":{"enabled":false}}"#,
    )
    .unwrap();
    assert!(!off.keys().any(|k| k.starts_with("ConfigMap/")));
}

/// The objects of kind `kind` in `m`, each as its flattened keys under
/// `Kind/name`, without the labels that name a chart and its version.
fn object(m: &Flat, kind_name: &str) -> Flat {
    m.iter()
        .filter_map(|(k, v)| {
            let rest = k.strip_prefix(kind_name)?;
            let chart_label = rest.contains("labels.helm.sh/")
                || rest.contains("labels.app.kubernetes.io/version")
                || rest.contains("labels.app.kubernetes.io/managed-by");
            (!chart_label).then(|| (rest.to_string(), v.clone()))
        })
        .collect()
}

/// dcgm mode's Service and ServiceMonitor are dcgm-exporter's chart's, the
/// same Helm rendering both for one release: names, namespace, labels,
/// selectors, port, path, interval and honorLabels; ours adds only the
/// node relabeling. Its pods carry the labels that chart's selectors ask.
#[test]
fn dcgm_mode_is_found_as_dcgm_exporters_chart_is() {
    if !helm_ready() {
        return;
    }
    for release in ["dcgm-exporter", "monitoring"] {
        let dir = TempDir::new(&format!("helm-dcgm-{release}"));
        let (theirs, ours) = (dir.0.join("theirs"), dir.0.join("ours"));
        let t = render_in(
            &theirs,
            &root().join(DCGM_CHART),
            "{}",
            release,
            "gpu-operator",
        );
        let o = render_in(
            &ours,
            &root().join(CHART),
            r#"{"dcgm":{"enabled":true}}"#,
            release,
            "gpu-operator",
        );
        let (t, o) = (flatten_paths(&t).unwrap(), flatten_paths(&o).unwrap());
        let name = if release == "dcgm-exporter" {
            "dcgm-exporter".to_string()
        } else {
            format!("{release}-dcgm-exporter")
        };
        let svc = format!("Service/{name}");
        assert_eq!(object(&o, &svc), object(&t, &svc), "{release}: the Service");
        let sm = format!("ServiceMonitor/{name}");
        let mut mine = object(&o, &sm);
        let relabel = mine
            .keys()
            .filter(|k| k.contains(".relabelings["))
            .cloned()
            .collect::<Vec<_>>();
        assert_eq!(relabel.len(), 2, "{relabel:?}");
        mine.retain(|k, _| !k.contains(".relabelings["));
        assert_eq!(mine, object(&t, &sm), "{release}: the ServiceMonitor");
        // Their selectors find our pods.
        let pods = map(
            &o,
            &format!("DaemonSet/{name}.spec.template.metadata.labels"),
        );
        let wanted = map(&t, &format!("{svc}.spec.selector"));
        assert_eq!(wanted.len(), 3, "{wanted:?}");
        for (k, v) in &wanted {
            assert_eq!(pods.get(k), Some(v), "{release}: {k}");
        }
        dcgm_pod_is_dcgm_exporters(&o, &t, &name);
    }
}

/// The dcgm mode's container: dcgm's names only, on port metrics, /health
/// probes there, and the pods of each GPU named as DCGM_EXPORTER_KUBERNETES
/// names them.
fn dcgm_pod_is_dcgm_exporters(o: &Flat, t: &Flat, name: &str) {
    let pod = format!("DaemonSet/{name}.spec.template.spec");
    let c = format!("{pod}.containers[gpu-exporter]");
    let args = list(o, &format!("{c}.args"));
    for flag in [
        "--collector.disable-defaults",
        "--collector.dcgm",
        "--kubernetes.pod-labels",
    ] {
        assert!(args.contains(&format!("{flag:?}").as_str()), "{args:?}");
    }
    assert!(
        !args.iter().any(|a| a.contains("--web.probe-address")),
        "{args:?}"
    );
    expect(o, &format!("{c}.ports[metrics].containerPort"), "9400");
    let theirs = format!("{pod}.containers[exporter]");
    expect(
        t,
        &format!("{theirs}.env[DCGM_EXPORTER_KUBERNETES].value"),
        r#""true""#,
    );
    expect(
        t,
        &format!("{theirs}.livenessProbe.httpGet.path"),
        r#""/health""#,
    );
    for probe in ["livenessProbe", "readinessProbe"] {
        expect(o, &format!("{c}.{probe}.httpGet.path"), r#""/health""#);
        expect(o, &format!("{c}.{probe}.httpGet.port"), r#""metrics""#);
    }
    // Pod attribution: the kubelet's pod-resources, as their chart mounts it.
    expect(
        o,
        &format!("{c}.volumeMounts[pod-resources].mountPath"),
        r#""/var/lib/kubelet/pod-resources""#,
    );
    expect(
        t,
        &format!("{theirs}.volumeMounts[pod-gpu-resources].mountPath"),
        r#""/var/lib/kubelet/pod-resources""#,
    );
}

/// Under basic auth the kubelet cannot answer /health's challenge: a TCP
/// probe, as dcgm-exporter's chart does, and its own counters file.
#[test]
fn dcgm_mode_probes_tcp_under_basic_auth() {
    let Some((_d, _f, m)) = render("dcgm-auth", CASES[3].1) else {
        return;
    };
    // Release gpu-exporter: its objects are gpu-exporter-dcgm-exporter, as
    // dcgm-exporter's chart would name them.
    let pod = "DaemonSet/gpu-exporter-dcgm-exporter.spec.template.spec";
    let c = format!("{pod}.containers[gpu-exporter]");
    for probe in ["livenessProbe", "readinessProbe"] {
        expect(&m, &format!("{c}.{probe}.tcpSocket.port"), r#""metrics""#);
        assert!(!m.contains_key(&format!("{c}.{probe}.httpGet.path")));
    }
    assert!(
        list(&m, &format!("{c}.args"))
            .contains(&r#""--compat.dcgm-counters=/etc/dcgm-exporter/counters/counters.csv""#)
    );
    expect(
        &m,
        &format!("{pod}.volumes[counters].configMap.name"),
        r#""gpu-exporter-dcgm-exporter-counters""#,
    );
    let csv = get(
        &m,
        "ConfigMap/gpu-exporter-dcgm-exporter-counters.data.counters.csv",
    );
    assert!(csv.contains("DCGM_FI_DEV_GPU_TEMP, gauge"), "{csv}");
    // The counters file it mounts is one the binary reads.
    let file = crate::common::temp_file(
        "helm-counters.csv",
        &<String as DeJson>::deserialize_json(csv).unwrap(),
    );
    let out = crate::common::run(&[
        "--compat.dcgm-counters",
        file.to_str().unwrap(),
        "--print-rules",
    ]);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn the_charts_version_is_the_crates() {
    let chart = std::fs::read_to_string(root().join(CHART).join("Chart.yaml")).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        chart.contains(&format!("\nversion: {version}\n")),
        "{chart}"
    );
    assert!(
        chart.contains(&format!("\nappVersion: \"{version}\"\n")),
        "{chart}"
    );
    assert!(chart.contains("\napiVersion: v2\n"), "{chart}");
}

/// The release's chart (`dist/gpu-exporter-VERSION.tgz`) pulled back from
/// the registry at `registry` it was pushed to: the same bytes, and it
/// renders the release's image, at its version.
pub fn the_released_chart_round_trips(registry: &str, dist: &Path, version: &str) {
    if !helm_ready() {
        return;
    }
    let tgz = format!("gpu-exporter-{version}.tgz");
    let back = dist.parent().unwrap().join("chart-pulled");
    std::fs::create_dir_all(&back).unwrap();
    let out = chart_py(&[
        "pull",
        &format!("oci://{registry}/charts/gpu-exporter"),
        version,
        back.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        std::fs::read(back.join(&tgz)).unwrap(),
        std::fs::read(dist.join(&tgz)).unwrap(),
        "the pulled chart is not the pushed one"
    );
    let rendered = back.join("rendered");
    let files = render_in(
        &rendered,
        &back.join(&tgz),
        "{}",
        "gpu-exporter",
        "gpu-exporter",
    );
    let m = flatten_paths(&files).unwrap();
    let c = "DaemonSet/gpu-exporter.spec.template.spec.containers[gpu-exporter]";
    expect(
        &m,
        &format!("{c}.image"),
        &format!("\"{registry}/gpu-exporter:{version}\""),
    );
    expect(
        &m,
        "DaemonSet/gpu-exporter.metadata.labels.app.kubernetes.io/version",
        &format!("{version:?}"),
    );
    // The dashboards came with it, resolved from their link.
    assert!(
        m.keys()
            .any(|k| k.starts_with("ConfigMap/gpu-exporter-gpu-fleet.data."))
    );
}
