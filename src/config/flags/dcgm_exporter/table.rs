//! dcgm-exporter's flags, one row each: its names, variable, kind and
//! default, and what we do with it (the table of
//! docs/migrating-from-dcgm-exporter.md).

use super::*;
use std::path::Path;

/// Every flag of dcgm-exporter's `pkg/cmd/app.go`, in its order.
pub const DCGM_FLAGS: &[DcgmFlag] = &[
    row(
        "collectors",
        &["f"],
        "DCGM_EXPORTER_COLLECTORS",
        Kind::Text,
        DEFAULT_COLLECTORS,
        "`--compat.dcgm-counters`: the counters file, read as dcgm-exporter reads it. Without it, the image's copy of its default-counters.csv (the built-in copy where that file is missing)",
        Does::Maps(|o, v| {
            match v {
                Some(p) => o.push(&["--compat.dcgm-counters", p]),
                None if Path::new(DEFAULT_COLLECTORS).is_file() => {
                    o.push(&["--compat.dcgm-counters", DEFAULT_COLLECTORS])
                }
                None => {} // the built-in copy of the same file
            }
            Ok(())
        }),
    ),
    row(
        "config-file",
        &[],
        "DCGM_EXPORTER_CONFIG_FILE",
        Kind::Text,
        "",
        "ignored with a warning: its YAML configuration is not read; give its settings as flags",
        Does::Ignored,
    ),
    row(
        "address",
        &["a"],
        "DCGM_EXPORTER_LISTEN",
        Kind::Text,
        ":9400",
        "`--web.listen-address`: `:PORT` is every interface, as there",
        Does::Maps(|o, v| {
            let v = v.unwrap_or(":9400");
            parse_listen(v)?;
            o.push(&["--web.listen-address", v]);
            Ok(())
        }),
    ),
    row(
        "web-read-timeout",
        &[],
        "DCGM_EXPORTER_WEB_READ_TIMEOUT",
        Kind::Duration,
        "",
        "`--web.header-timeout`: the time to read a request's head",
        Does::Maps(|o, v| timeout(o, v, "--web.header-timeout")),
    ),
    row(
        "web-write-timeout",
        &[],
        "DCGM_EXPORTER_WEB_WRITE_TIMEOUT",
        Kind::Duration,
        "",
        "`--web.write-timeout`",
        Does::Maps(|o, v| timeout(o, v, "--web.write-timeout")),
    ),
    row(
        "max-concurrent-scrapes",
        &[],
        "DCGM_EXPORTER_MAX_CONCURRENT_SCRAPES",
        Kind::Int,
        "",
        "`--web.max-requests`",
        Does::Maps(|o, v| {
            if let Some(v) = v {
                match int(v)? {
                    n @ 1..=1_000_000 => o.push(&["--web.max-requests", &n.to_string()]),
                    _ => return Err(format!("{v:?} is not from 1 to 1000000")),
                }
            }
            Ok(())
        }),
    ),
    row(
        "enable-exporter-metrics",
        &[],
        "DCGM_EXPORTER_ENABLE_EXPORTER_METRICS",
        Kind::Bool,
        "false",
        "ignored with a warning: our own metrics are the native collectors' (`--collector.NAME`)",
        Does::Ignored,
    ),
    row(
        "collect-interval",
        &["c"],
        "DCGM_EXPORTER_INTERVAL",
        Kind::Int,
        "30000",
        "`--collect.interval` in ms; below our 100 ms minimum, 100 ms with a warning",
        Does::Maps(|o, v| {
            let v = v.unwrap_or("30000");
            let ms = match int(v)? {
                n if n <= 0 => return Err(format!("{v:?} is not above 0")),
                n if n > 365 * 86_400_000 => return Err(format!("{v:?} is longer than a year")),
                n if n < 100 => {
                    o.notes.push(format!(
                        "dcgm-exporter's --collect-interval {n} is below our 100 ms minimum: collecting every 100 ms"
                    ));
                    100
                }
                n => n,
            };
            o.push(&["--collect.interval", &format!("{ms}ms")]);
            Ok(())
        }),
    ),
    row(
        "watch-max-keep-age",
        &[],
        "DCGM_EXPORTER_WATCH_MAX_KEEP_AGE",
        Kind::Duration,
        "",
        "ignored with a warning: DCGM's field watches; we keep no samples",
        Does::Ignored,
    ),
    row(
        "watch-max-keep-samples",
        &[],
        "DCGM_EXPORTER_WATCH_MAX_KEEP_SAMPLES",
        Kind::Int,
        "",
        "ignored with a warning: DCGM's field watches; we keep no samples",
        Does::Ignored,
    ),
    row(
        "kubernetes",
        &["k"],
        "DCGM_EXPORTER_KUBERNETES",
        Kind::Bool,
        "false",
        "pod attribution: `--kubernetes.pod-labels` (`pod`, `namespace`, `container` on every series of a pod's GPU); off, `--kubernetes.pod-resources-socket \"\"`",
        Does::Maps(|o, v| {
            o.kubernetes = v == Some("true");
            if o.kubernetes && !cfg!(feature = "kubernetes") {
                o.notes.push(format!(
                    "dcgm-exporter's --kubernetes is ignored: {}",
                    super::super::NOT_BUILT_IN
                ));
                o.kubernetes = false;
            }
            if o.kubernetes {
                o.push(&["--kubernetes.pod-labels"]);
            }
            Ok(())
        }),
    ),
    row(
        "use-old-namespace",
        &["o"],
        "DCGM_EXPORTER_USE_OLD_NAMESPACE",
        Kind::Bool,
        "false",
        "`--compat.dcgm-old-namespace`: the UUID label spelled `uuid`",
        Does::Maps(|o, v| switch(o, v, &["--compat.dcgm-old-namespace"])),
    ),
    row(
        "cpu-devices",
        &["p"],
        "DCGM_EXPORTER_CPU_DEVICES_STR",
        Kind::Text,
        "f",
        "checked as there; other than `f`, one warning: we watch no CPUs",
        Does::Maps(|o, v| devices(o, v, "--cpu-devices", "we watch no CPUs")),
    ),
    row(
        "configmap-data",
        &["m"],
        "DCGM_EXPORTER_CONFIGMAP_DATA",
        Kind::Text,
        "none",
        "ignored with a warning: we read no ConfigMap; mount it and give its file with `-f`",
        Does::Ignored,
    ),
    row(
        "remote-hostengine-info",
        &["r"],
        "DCGM_REMOTE_HOSTENGINE_INFO",
        Kind::Text,
        "localhost:5555",
        "ignored with a warning: we read NVML directly, with no host engine (the GPU Operator sets it where its own DCGM runs)",
        Does::Ignored,
    ),
    row(
        "kubernetes-enable-pod-labels",
        &[],
        "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS",
        Kind::Bool,
        "false",
        "ignored with a warning: we read no pod labels from the API server (`gpu_pod_info` names the pod)",
        Does::Ignored,
    ),
    row(
        "kubernetes-enable-pod-uid",
        &[],
        "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID",
        Kind::Bool,
        "false",
        "ignored with a warning: no `uid` label",
        Does::Ignored,
    ),
    row(
        "kubernetes-gpu-id-type",
        &[],
        "DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE",
        Kind::Text,
        "uid",
        "`uid` as there (the kubelet's device ids are GPU UUIDs); `device-name` one warning; anything else exit code 2",
        Does::Maps(|o, v| match v.unwrap_or("uid") {
            "uid" => Ok(()),
            "device-name" => {
                o.notes.push("dcgm-exporter's --kubernetes-gpu-id-type device-name is ignored: pods are matched by GPU UUID".into());
                Ok(())
            }
            other => Err(format!("{other:?} is not uid or device-name")),
        }),
    ),
    row(
        "kubernetes-pod-label-allowlist-regex",
        &[],
        "DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX",
        Kind::List,
        "",
        "ignored with a warning: we read no pod labels",
        Does::Ignored,
    ),
    row(
        "devices",
        &["d"],
        "DCGM_EXPORTER_DEVICES_STR",
        Kind::Text,
        "f",
        "`f` as there (each GPU; a MIG GPU's instances instead of it); `g`, `i`, ranges: checked as there, then one warning and served as `f`",
        Does::Maps(|o, v| {
            devices(
                o,
                v,
                "--devices",
                "we serve -d f's devices: each GPU, a MIG GPU's instances instead of it",
            )
        }),
    ),
    row(
        "no-hostname",
        &["n"],
        "DCGM_EXPORTER_NO_HOSTNAME",
        Kind::Bool,
        "false",
        "`--compat.dcgm-no-hostname`",
        Does::Maps(|o, v| switch(o, v, &["--compat.dcgm-no-hostname"])),
    ),
    row(
        "switch-devices",
        &["s"],
        "DCGM_EXPORTER_OTHER_DEVICES_STR",
        Kind::Text,
        "f",
        "checked as there; other than `f`, one warning: we watch no NVSwitches",
        Does::Maps(|o, v| devices(o, v, "--switch-devices", "we watch no NVSwitches")),
    ),
    row(
        "fake-gpus",
        &[],
        "DCGM_EXPORTER_USE_FAKE_GPUS",
        Kind::Bool,
        "false",
        "ignored with a warning: `--source sim` serves a simulated fleet",
        Does::Ignored,
    ),
    row(
        "web-config-file",
        &[],
        "DCGM_EXPORTER_WEB_CONFIG_FILE",
        Kind::Text,
        "",
        "`--web.config.file`: the same exporter-toolkit format",
        Does::Maps(|o, v| path(o, v, "--web.config.file")),
    ),
    row(
        "xid-count-window-size",
        &["x"],
        "DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE",
        Kind::Int,
        "300000",
        "`--compat.dcgm-xid-window` in ms",
        Does::Maps(|o, v| {
            if let Some(v) = v {
                match int(v)? {
                    n @ 1..=31_536_000_000 => {
                        o.push(&["--compat.dcgm-xid-window", &format!("{n}ms")])
                    }
                    _ => return Err(format!("{v:?} is not from 1 ms to a year")),
                }
            }
            Ok(())
        }),
    ),
    row(
        "replace-blanks-in-model-name",
        &["rbmn"],
        "DCGM_EXPORTER_REPLACE_BLANKS_IN_MODEL_NAME",
        Kind::Bool,
        "false",
        "`--compat.dcgm-model-dashes`: `modelName` with a dash for each blank",
        Does::Maps(|o, v| switch(o, v, &["--compat.dcgm-model-dashes"])),
    ),
    row(
        "debug",
        &[],
        "DCGM_EXPORTER_DEBUG",
        Kind::Bool,
        "false",
        "`--log.level debug`",
        Does::Maps(|o, v| switch(o, v, &["--log.level", "debug"])),
    ),
    row(
        "clock-events-count-window-size",
        &[],
        "DCGM_EXPORTER_CLOCK_EVENTS_COUNT_WINDOW_SIZE",
        Kind::Int,
        "300000",
        "ignored with a warning: we do not serve DCGM_EXP_CLOCK_EVENTS_COUNT",
        Does::Ignored,
    ),
    row(
        "enable-dcgm-log",
        &[],
        "DCGM_EXPORTER_ENABLE_DCGM_LOG",
        Kind::Bool,
        "false",
        "ignored with a warning: there is no DCGM to log",
        Does::Ignored,
    ),
    row(
        "dcgm-log-level",
        &[],
        "DCGM_EXPORTER_DCGM_LOG_LEVEL",
        Kind::Text,
        "NONE",
        "ignored with a warning: there is no DCGM to log",
        Does::Ignored,
    ),
    row(
        "log-format",
        &[],
        "DCGM_EXPORTER_LOG_FORMAT",
        Kind::Text,
        "text",
        "`--log.format`: `text` is `logfmt`, `json` is `json`",
        Does::Maps(|o, v| {
            match v.unwrap_or("text") {
                "text" => {}
                "json" => o.push(&["--log.format", "json"]),
                other => return Err(format!("{other:?} is not text or json")),
            }
            Ok(())
        }),
    ),
    row(
        "pod-resources-kubelet-socket",
        &[],
        "DCGM_POD_RESOURCES_KUBELET_SOCKET",
        Kind::Text,
        "/var/lib/kubelet/pod-resources/kubelet.sock",
        "`--kubernetes.pod-resources-socket` with `-k` (watched for until it exists)",
        Does::Maps(|o, v| {
            match (o.kubernetes, v) {
                (true, Some(p)) => o.push(&["--kubernetes.pod-resources-socket", p]),
                (true, None) => {}
                (false, given) => {
                    if let Some(p) = given {
                        o.notes.push(format!(
                            "dcgm-exporter's --pod-resources-kubelet-socket {p} is ignored without --kubernetes, as there"
                        ));
                    }
                    o.push(&["--kubernetes.pod-resources-socket", ""])
                }
            }
            Ok(())
        }),
    ),
    row(
        "hpc-job-mapping-dir",
        &[],
        "DCGM_HPC_JOB_MAPPING_DIR",
        Kind::Text,
        "",
        "`--hpc.job-mapping-dir`: the same layout",
        Does::Maps(|o, v| path(o, v, "--hpc.job-mapping-dir")),
    ),
    row(
        "container-labels",
        &[],
        "DCGM_EXPORTER_CONTAINER_LABELS",
        Kind::Bool,
        "false",
        "ignored with a warning: we ask no container runtime",
        Does::Ignored,
    ),
    row(
        "container-runtime-socket",
        &[],
        "DCGM_CONTAINER_RUNTIME_SOCKET",
        Kind::Text,
        "",
        "ignored with a warning: we ask no container runtime",
        Does::Ignored,
    ),
    row(
        "nvidia-resource-names",
        &[],
        "NVIDIA_RESOURCE_NAMES",
        Kind::List,
        "",
        "ignored with a warning: every resource the kubelet lists with a GPU's UUID counts",
        Does::Ignored,
    ),
    row(
        "kubernetes-virtual-gpus",
        &[],
        "KUBERNETES_VIRTUAL_GPUS",
        Kind::Bool,
        "false",
        "ignored with a warning: shared GPUs' pods are each attributed as they are",
        Does::Ignored,
    ),
    row(
        "dump-enabled",
        &[],
        "DCGM_EXPORTER_DUMP_ENABLED",
        Kind::Bool,
        "false",
        "ignored with a warning: no debug dumps",
        Does::Ignored,
    ),
    row(
        "dump-directory",
        &[],
        "DCGM_EXPORTER_DUMP_DIRECTORY",
        Kind::Text,
        "/tmp/dcgm-exporter-debug",
        "ignored with a warning: no debug dumps",
        Does::Ignored,
    ),
    row(
        "dump-retention",
        &[],
        "DCGM_EXPORTER_DUMP_RETENTION",
        Kind::Int,
        "24",
        "ignored with a warning: no debug dumps",
        Does::Ignored,
    ),
    row(
        "dump-compression",
        &[],
        "DCGM_EXPORTER_DUMP_COMPRESSION",
        Kind::Bool,
        "true",
        "ignored with a warning: no debug dumps",
        Does::Ignored,
    ),
    row(
        "kubernetes-enable-dra",
        &[],
        "KUBERNETES_ENABLE_DRA",
        Kind::Bool,
        "false",
        "ignored with a warning: we read no DRA claims",
        Does::Ignored,
    ),
    row(
        "disable-startup-validate",
        &[],
        "DISABLE_STARTUP_VALIDATE",
        Kind::Bool,
        "false",
        "ignored with a warning: nothing is validated at start that could be skipped",
        Does::Ignored,
    ),
    row(
        "enable-gpu-bind-unbind-watch",
        &[],
        "DCGM_EXPORTER_ENABLE_GPU_BIND_UNBIND_WATCH",
        Kind::Bool,
        "false",
        "ignored with a warning: GPUs that come and go are followed anyway (a lost GPU is served lost)",
        Does::Ignored,
    ),
    row(
        "gpu-bind-unbind-poll-interval",
        &[],
        "DCGM_EXPORTER_GPU_BIND_UNBIND_POLL_INTERVAL",
        Kind::Duration,
        "1s",
        "ignored with a warning, as the watch it tunes",
        Does::Ignored,
    ),
    row(
        "enable-pprof",
        &[],
        "DCGM_EXPORTER_ENABLE_PPROF",
        Kind::Bool,
        "false",
        "ignored with a warning: there is no Go profiler",
        Does::Ignored,
    ),
    row(
        "web-systemd-socket",
        &[],
        "DCGM_EXPORTER_SYSTEMD_SOCKET",
        Kind::Bool,
        "false",
        "`--web.systemd-socket`",
        Does::Maps(|o, v| switch(o, v, &["--web.systemd-socket"])),
    ),
];
