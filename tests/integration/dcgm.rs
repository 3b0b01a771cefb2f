//! The `dcgm` collector through the binary: dcgm-exporter's names, labels
//! and units over the simulated fleet, beside our own families; its
//! counters file's edge cases.

use crate::common::{Exporter, have, pipe, run, temp_file, value};

/// The labels of `body`'s first `name{gpu="0",` sample, in order.
fn label_names(body: &str, name: &str) -> Vec<String> {
    let line = body
        .lines()
        .find(|l| l.starts_with(&format!("{name}{{gpu=\"0\",")))
        .unwrap_or_else(|| panic!("no {name} for gpu 0"));
    let set = &line[line.find('{').unwrap() + 1..line.rfind('}').unwrap()];
    set.split("\",")
        .map(|kv| kv.split('=').next().unwrap().to_string())
        .collect()
}

/// dcgm-exporter's label set on a whole GPU, its host label spelled `host`.
fn assert_labels(body: &str, host: &str) {
    let want = ["gpu", "UUID", "pci_bus_id", "device", "modelName", host];
    let got = label_names(body, "DCGM_FI_DEV_GPU_TEMP");
    assert_eq!(got[..6], want);
    assert_eq!(got[6..], ["DCGM_FI_DRIVER_VERSION"]);
}

const GPU0: &str = "{gpu=\"0\",";

#[test]
fn units_are_dcgm_exporters_beside_our_own() {
    let e = Exporter::start(&["--collector.dcgm"]);
    let body = e.metrics(None).body;
    let ours = |n: &str| value(&body, &format!("{n}{GPU0}")).unwrap_or_else(|| panic!("{n}"));
    let theirs = |n: &str| value(&body, &format!("{n}{GPU0}")).unwrap_or_else(|| panic!("{n}"));
    let mib = 1024.0 * 1024.0;
    // dcgm-exporter's integer fields are whole: MiB cut down as DCGM
    // divides, the rest rounded; power stays as read.
    type Shape = fn(f64) -> f64;
    let (floor, round, same): (Shape, Shape, Shape) = (f64::floor, f64::round, |v| v);
    for (dcgm, native, scale, shape) in [
        ("DCGM_FI_DEV_SM_CLOCK", "gpu_sm_clock_hertz", 1e-6, round),
        (
            "DCGM_FI_DEV_MEM_CLOCK",
            "gpu_memory_clock_hertz",
            1e-6,
            round,
        ),
        (
            "DCGM_FI_DEV_FB_USED",
            "gpu_memory_used_bytes",
            1.0 / mib,
            floor,
        ),
        (
            "DCGM_FI_DEV_GPU_TEMP",
            "gpu_temperature_celsius",
            1.0,
            round,
        ),
        (
            "DCGM_FI_DEV_POWER_USAGE",
            "gpu_power_usage_watts",
            1.0,
            same,
        ),
        (
            "DCGM_FI_DEV_GPU_UTIL",
            "gpu_utilization_ratio",
            100.0,
            round,
        ),
        (
            "DCGM_FI_DEV_MEM_COPY_UTIL",
            "gpu_memory_utilization_ratio",
            100.0,
            round,
        ),
    ] {
        let (t, o) = (theirs(dcgm), shape(ours(native) * scale));
        assert!(
            (t - o).abs() < 1e-6 * o.abs().max(1.0),
            "{dcgm} {t} vs {native} {o}"
        );
    }
    // Printed as dcgm-exporter prints them: no fraction on an integer field.
    for family in [
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "DCGM_FI_DEV_FB_RESERVED",
        "DCGM_FI_DEV_GPU_UTIL",
    ] {
        let line = body
            .lines()
            .find(|l| l.starts_with(&format!("{family}{GPU0}")))
            .unwrap();
        let v = line.rsplit(' ').next().unwrap();
        assert!(v.bytes().all(|b| b.is_ascii_digit()), "{line}");
    }
    // Energy moves between the two reads of one scrape only by rounding.
    let (t, o) = (
        theirs("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"),
        ours("gpu_energy_joules_total") * 1000.0,
    );
    assert!((t - o).abs() <= 1.0, "energy {t} mJ vs {o}");
    // Every release of dcgm-exporter spells it Hostname.
    assert_labels(&body, "Hostname");
    assert!(body.contains(",device=\"nvidia0\","), "device label");
    // The sim's GPU 2 has a periodic Xid 48; the others none, so 0.
    for (g, want) in [("0", 0.0), ("2", 48.0)] {
        for n in ["DCGM_FI_DEV_XID_ERRORS", "gpu_xid_last_code"] {
            assert_eq!(
                value(&body, &format!("{n}{{gpu=\"{g}\",")),
                Some(want),
                "{n} {g}"
            );
        }
    }
    // The series budget per GPU with both on: ours, plus at most one per
    // served field of the default file (23: 26 fields, 2 not servable, one
    // a label).
    let per_gpu = |p: &str| {
        body.lines()
            .filter(|l| l.starts_with(p) && l.contains(GPU0))
            .count()
    };
    let dcgm = per_gpu("DCGM_");
    let all = per_gpu("");
    assert_eq!(dcgm, 23, "dcgm series for gpu 0");
    assert!(all <= 130, "{all} series for gpu 0 with both on");
}

/// dcgm-exporter's `/health`, which its chart's probes and the GPU
/// Operator's ask: 200 and `OK`, as it answers.
#[test]
fn health_answers_as_dcgm_exporters() {
    let e = Exporter::start(&["--collector.disable-defaults", "--collector.dcgm"]);
    let r = e.get("/health", &[]);
    assert_eq!((r.status, r.body.as_str()), (200, "OK"));
}

#[test]
fn only_theirs_with_the_defaults_off() {
    let e = Exporter::start(&["--collector.disable-defaults", "--collector.dcgm"]);
    let body = e.metrics(None).body;
    let gpu_families: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("gpu_") && !l.starts_with("gpu_exporter_"))
        .collect();
    assert!(gpu_families.is_empty(), "{gpu_families:?}");
    // The calls its fields need are still made.
    for f in [
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    ] {
        assert!(body.contains(&format!("{f}{GPU0}")), "{f}");
    }
    assert!(
        body.contains("gpu_exporter_collect_success"),
        "self metrics stay"
    );
    if have("promtool", &["--version"]) {
        let out = pipe("promtool", &["check", "metrics"], &body);
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        // It parses; what the lint says is dcgm-exporter's naming, nothing else.
        assert_eq!(out.status.code(), Some(3), "{text}");
        for l in text.lines() {
            assert!(
                l.contains("camelCase")
                    || l.contains("\"_total\" suffix")
                    || l.contains("should not include type"),
                "{l}"
            );
        }
    }
}

#[test]
fn a_counters_file_with_comments_labels_and_spaces() {
    let file = temp_file(
        "dcgm-counters.csv",
        "# mine\n\n   # indented comment\n  DCGM_FI_DEV_GPU_TEMP ,  gauge , GPU temperature (in C).\n\
         #DCGM_FI_DEV_SM_CLOCK, gauge, off\nDCGM_FI_DRIVER_VERSION,label,Driver\n\
         DCGM_FI_PROF_NVOFA1_ACTIVE, gauge, not servable\n",
    );
    let e = Exporter::start(&[
        "--collector.disable-defaults",
        "--collector.dcgm",
        "--compat.dcgm-counters",
        file.to_str().unwrap(),
        "--compat.dcgm-lowercase-hostname",
    ]);
    e.wait_log(
        "dcgm: DCGM_FI_PROF_NVOFA1_ACTIVE is left out: no reading of ours gives it",
        std::time::Duration::from_secs(5),
    );
    let body = e.metrics(None).body;
    let families: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("# TYPE DCGM"))
        .collect();
    assert_eq!(families, ["# TYPE DCGM_FI_DEV_GPU_TEMP gauge"]);
    assert_labels(&body, "hostname");
}

#[test]
fn a_name_that_is_no_dcgm_field_or_a_malformed_line_is_exit_code_2() {
    for (name, text, says) in [
        (
            "unknown.csv",
            "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_NOPE, gauge, x\n",
            ":2: no DCGM field has this name (nor a legacy one)",
        ),
        ("malformed.csv", "DCGM_FI_DEV_GPU_TEMP\n", ":1: expected"),
        (
            "badtype.csv",
            "DCGM_FI_DEV_GPU_TEMP, gaug, t\n",
            "not gauge, counter or label",
        ),
        (
            "bom.csv",
            "\u{feff}DCGM_FI_DEV_GPU_TEMP, gauge, t\n",
            ":1: the file starts with a byte-order mark (U+FEFF)",
        ),
    ] {
        let file = temp_file(name, text);
        let out = run(&[
            "--collector.dcgm",
            "--compat.dcgm-counters",
            file.to_str().unwrap(),
        ]);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!err.contains("\\u{feff}"), "{err}");
        assert!(
            err.contains("--compat.dcgm-counters") && err.contains(says),
            "{err}"
        );
    }
}

/// The lines of `family` in `body`.
fn lines<'a>(body: &'a str, family: &str) -> Vec<&'a str> {
    let p = format!("{family}{{");
    body.lines().filter(|l| l.starts_with(&p)).collect()
}

#[test]
fn the_fake_nvml_fleet_in_dcgm_units() {
    use crate::sources::{fake_nvml::Fixture, fleet, gpu, nvml_args, start};
    let gpus: Vec<String> = (0..8)
        .map(|i| gpu(i, if i == 3 { r#","minor":7"# } else { "" }))
        .collect();
    let f = Fixture::new("dcgm-fleet", &fleet(&gpus));
    let mut args = nvml_args(&f);
    args.extend(["--collector.disable-defaults", "--collector.dcgm"].map(String::from));
    let e = start(&args);
    let body = e.wait_for("/metrics", std::time::Duration::from_secs(10), |b| {
        lines(b, "DCGM_FI_DEV_GPU_TEMP").len() == 8
    });
    // The fake's raw values: 1980 MHz, 44983939072 B used, 123456 mJ, 350000 mW.
    for (family, want) in [
        ("DCGM_FI_DEV_SM_CLOCK", 1980.0),
        ("DCGM_FI_DEV_MEM_CLOCK", 2619.0),
        // 42900.03 MiB, cut down to whole MiB as DCGM divides.
        ("DCGM_FI_DEV_FB_USED", 42900.0),
        ("DCGM_FI_DEV_FB_RESERVED", 512.0),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 123456.0),
        ("DCGM_FI_DEV_POWER_USAGE", 350.0),
    ] {
        let l = lines(&body, family);
        assert_eq!(l.len(), 8, "{family}");
        let v: f64 = l[0].rsplit(' ').next().unwrap().parse().unwrap();
        assert!((v - want).abs() < 1e-6, "{family}: {v} vs {want}");
    }
    let temps = lines(&body, "DCGM_FI_DEV_GPU_TEMP");
    // nvidia<index>, as dcgm-exporter builds it, though GPU 3's minor is 7.
    assert!(temps[3].contains(",device=\"nvidia3\","), "{}", temps[3]);
    assert!(temps[0].contains(",device=\"nvidia0\","), "{}", temps[0]);
    assert!(temps[7].ends_with(" 57"), "{}", temps[7]);
    assert!(temps[0].contains("DCGM_FI_DRIVER_VERSION=\"550.54.15\""));
}

#[test]
fn mig_instances_carry_gpu_i_profile_and_gpu_i_id() {
    use crate::sources::{fake_nvml::Fixture, fleet, gpu, nvml_args, start};
    let mig = r#"{"name":"NVIDIA H100 80GB HBM3","uuid":"GPU-mig-parent","bus_id":"00000000:18:00.0","temperature":50,"power_mw":300000,
        "memory":{"total":85520809984,"reserved":536870912,"free":1000,"used":2000},
        "mig":[
          {"name":"NVIDIA H100 80GB HBM3 MIG 3g.40gb","uuid":"MIG-aaaa","gpu_instance_id":1,
           "memory":{"total":42949672960,"reserved":0,"free":40000000000,"used":2949672960}}
        ]}"#;
    // GPU 1 has no MIG instances: it is served as the GPU.
    let f = Fixture::new("dcgm-mig", &fleet(&[mig.to_string(), gpu(1, "")]));
    let mut args = nvml_args(&f);
    args.extend(["--collector.dcgm", "--compat.dcgm-no-hostname"].map(String::from));
    let e = start(&args);
    let body = e.wait_for("/metrics", std::time::Duration::from_secs(10), |b| {
        b.contains("GPU_I_ID=\"1\"") && b.contains("DCGM_FI_DEV_FB_USED{gpu=\"1\"")
    });
    // As dcgm-exporter's default -d f: the instance, not its GPU, so that
    // a sum counts each byte once.
    let used = lines(&body, "DCGM_FI_DEV_FB_USED");
    assert_eq!(used.len(), 2, "{used:?}");
    assert_eq!(
        used[0],
        "DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-mig-parent\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"1\",DCGM_FI_DRIVER_VERSION=\"550.54.15\"} 2813"
    );
    assert!(used[1].starts_with("DCGM_FI_DEV_FB_USED{gpu=\"1\","));
    let sum: f64 = used
        .iter()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    let mib = 1024.0 * 1024.0;
    assert_eq!(sum, 2813.0 + (44983939072.0f64 / mib).floor());
    // Device-wide fields are the GPU's on its instance, as DCGM gives them
    // (dashboard 12239's temperature and power panels keep their data);
    // whole-GPU utilization is not given for an instance.
    for (family, want) in [
        ("DCGM_FI_DEV_GPU_TEMP", Some(50.0)),
        ("DCGM_FI_DEV_GPU_UTIL", None),
    ] {
        let on_gpu0: Vec<&str> = lines(&body, family)
            .into_iter()
            .filter(|l| l.contains("{gpu=\"0\","))
            .collect();
        match want {
            Some(v) => {
                assert_eq!(on_gpu0.len(), 1, "{family}: {on_gpu0:?}");
                assert!(on_gpu0[0].contains("GPU_I_ID=\"1\""), "{on_gpu0:?}");
                assert_eq!(on_gpu0[0].rsplit(' ').next(), Some(&*v.to_string()));
            }
            None => assert!(on_gpu0.is_empty(), "{family}: {on_gpu0:?}"),
        }
    }
    let power = lines(&body, "DCGM_FI_DEV_POWER_USAGE");
    assert!(
        power
            .iter()
            .any(|l| l.contains("GPU_I_ID=\"1\"") && l.ends_with(" 300")),
        "{power:?}"
    );
}

#[test]
fn the_compat_recording_rules_pass_promtool() {
    if !have("promtool", &["--version"]) {
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for args in [
        ["check", "rules", "deploy/prometheus/dcgm-compat-rules.yml"],
        ["test", "rules", "tests/promtool/dcgm-compat.test.yml"],
    ] {
        let out = std::process::Command::new("promtool")
            .current_dir(root)
            .args(args)
            .output()
            .unwrap();
        let text = crate::common::output_text(&out);
        assert!(
            out.status.success() && text.contains("SUCCESS"),
            "{args:?}: {text}"
        );
    }
}

/// Each series of a Prometheus instant-query answer: (labels, value).
fn answer(body: &str) -> Vec<(String, f64)> {
    body.split(r#"{"metric":{"#)
        .skip(1)
        .map(|s| {
            let labels = s[..s.find('}').unwrap()].to_string();
            let v = s
                .split(r#""value":["#)
                .nth(1)
                .and_then(|v| v.split('"').nth(1));
            (labels, v.and_then(|v| v.parse().ok()).unwrap_or(f64::NAN))
        })
        .collect()
}

/// A real Prometheus scrapes the drop-in (job dcgm) and a native exporter
/// (job native) with the compat rules: dashboard 12239's queries and
/// variables and common dcgm alerts get one series per GPU from the
/// drop-in, and the rules agree with it.
#[test]
fn dashboard_12239_and_dcgm_alerts_in_a_real_prometheus() {
    use crate::deploy::{Prometheus, urlencode};
    use std::time::{Duration, Instant};
    if !have("prometheus", &["--version"]) {
        return;
    }
    let dropin = Exporter::start(&["--collector.disable-defaults", "--collector.dcgm"]);
    let native = Exporter::start(&[]);
    let rules = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/prometheus/dcgm-compat-rules.yml");
    let mut prom = Prometheus::with_config(
        &format!("prometheus-dcgm-{}", dropin.addr.port()),
        &format!(
            "rule_files:\n  - '{}'\nscrape_configs:\n  - job_name: dcgm\n    static_configs:\n      - targets: ['{}']\n  - job_name: native\n    static_configs:\n      - targets: ['{}']\n",
            rules.display(),
            dropin.addr,
            native.addr
        ),
    );
    let mut query = |q: &str| -> Vec<(String, f64)> {
        let deadline = Instant::now() + Duration::from_secs(45);
        loop {
            let got = prom
                .get(&format!("/api/v1/query?query={}", urlencode(q)))
                .filter(|(status, _)| *status == 200)
                .map(|(_, body)| answer(&body))
                .unwrap_or_default();
            if !got.is_empty() || Instant::now() > deadline {
                return got;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    };
    let (instance, gpu) = (dropin.addr.to_string(), "0|1|2|3");
    let sel = format!("{{instance=~\"{instance}\", gpu=~\"{gpu}\"}}");
    for family in [
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_DEV_XID_ERRORS",
    ] {
        let got = query(&format!("{family}{sel}"));
        assert_eq!(got.len(), 4, "{family}: {got:?}");
        assert!(got.iter().all(|(_, v)| v.is_finite()), "{family}: {got:?}");
        // The recording rules give the drop-in's values, per GPU.
        let recorded = query(&format!("{family}{{job=\"native\"}}"));
        assert_eq!(recorded.len(), 4, "{family} recorded: {recorded:?}");
        let by_gpu = |s: &[(String, f64)], g: &str| {
            s.iter()
                .find(|(l, _)| l.contains(&format!("\"gpu\":\"{g}\"")))
                .map(|(_, v)| *v)
                .unwrap()
        };
        for g in ["0", "1", "2", "3"] {
            let (a, b) = (by_gpu(&got, g), by_gpu(&recorded, g));
            assert!(
                (a - b).abs() <= 1e-6 * a.abs().max(1.0),
                "{family} gpu {g}: {a} vs {b}"
            );
        }
    }
    let clock = query(&format!("DCGM_FI_DEV_SM_CLOCK{sel} * 1000000"));
    assert_eq!(clock.len(), 4, "{clock:?}");
    assert!(clock.iter().any(|(_, v)| *v == 1.41e9), "{clock:?}");
    for agg in ["avg", "sum"] {
        let got = query(&format!("{agg}(DCGM_FI_DEV_GPU_TEMP{sel})"));
        assert_eq!(got.len(), 1, "{agg}: {got:?}");
    }
    // The variables: label_values(DCGM_FI_DEV_GPU_TEMP, instance|gpu).
    let label = |name: &str, prom: &mut Prometheus| -> String {
        prom.get(&format!(
            "/api/v1/label/{name}/values?match[]={}",
            urlencode("DCGM_FI_DEV_GPU_TEMP")
        ))
        .map(|(_, b)| b)
        .unwrap_or_default()
    };
    assert!(label("instance", &mut prom).contains(&instance));
    assert!(label("gpu", &mut prom).contains(r#"["0","1","2","3"]"#));
    let mut query = |q: &str| {
        prom.get(&format!("/api/v1/query?query={}", urlencode(q)))
            .map(|(_, b)| answer(&b))
            .unwrap_or_default()
    };
    // Common dcgm alerts: the hot GPU 1 fires; the others evaluate to none.
    let hot = query(&format!(
        "DCGM_FI_DEV_GPU_TEMP{{instance=\"{instance}\"}} > 80"
    ));
    assert_eq!(hot.len(), 1, "{hot:?}");
    assert!(hot[0].0.contains(r#""gpu":"1""#), "{hot:?}");
    // Xid, as dcgm-exporter users write it: GPU 2 (a periodic Xid 48)
    // fires, from the drop-in and from the recording rules alike.
    for job in ["dcgm", "native"] {
        let xid = query(&format!("DCGM_FI_DEV_XID_ERRORS{{job=\"{job}\"}} != 0"));
        assert_eq!(xid.len(), 1, "{job}: {xid:?}");
        assert!(
            xid[0].0.contains(r#""gpu":"2""#) && xid[0].1 == 48.0,
            "{xid:?}"
        );
    }
    let hosts = query("count by (Hostname) (DCGM_FI_DEV_XID_ERRORS{job=\"dcgm\"} != 0)");
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    assert_eq!(hosts[0].1, 1.0, "{hosts:?}");
    for (q, want) in [
        (
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{job=\"dcgm\"} > 0",
            0,
        ),
        ("DCGM_FI_DEV_ROW_REMAP_FAILURE{job=\"dcgm\"} == 1", 0),
        (
            "DCGM_FI_DEV_FB_USED{job=\"dcgm\"} / (DCGM_FI_DEV_FB_USED{job=\"dcgm\"} + DCGM_FI_DEV_FB_FREE{job=\"dcgm\"}) >= 0",
            4,
        ),
    ] {
        assert_eq!(query(q).len(), want, "{q}");
    }
}

/// The drop-in answers text 0.0.4 to any Accept, as dcgm-exporter does, so
/// that its counters (no `_total`) stay counters; with anything beside the
/// dcgm collector, the client's choice holds.
#[test]
fn the_drop_in_answers_text_0_0_4_whatever_the_client_offers() {
    let om = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
    let dropin = Exporter::start(&["--collector.disable-defaults", "--collector.dcgm"]);
    let both = Exporter::start(&["--collector.dcgm"]);
    for (e, accept, want) in [
        (&dropin, Some(om), "text/plain; version=0.0.4"),
        (&dropin, None, "text/plain; version=0.0.4"),
        (
            &both,
            Some(om),
            "application/openmetrics-text; version=1.0.0",
        ),
        (&both, None, "text/plain; version=0.0.4"),
    ] {
        let r = e.metrics(accept);
        let got = r.header("content-type").unwrap_or_default();
        assert!(got.starts_with(want), "{accept:?}: {got}");
        let eof = r.body.ends_with("# EOF\n");
        assert_eq!(eof, want.starts_with("application"), "{accept:?}");
    }
    // A scrape that asks for the dcgm collector alone is the drop-in's too.
    let r = both.get("/metrics?collect[]=dcgm", &[("Accept", om)]);
    let got = r.header("content-type").unwrap_or_default();
    assert!(got.starts_with("text/plain; version=0.0.4"), "{got}");
    let total = "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter";
    assert!(r.body.contains(total), "{}", r.body);
}

/// Prometheus, with its default scrape protocols (OpenMetrics first),
/// types every `counter` field of dcgm-exporter's default file `counter`
/// in `/api/v1/metadata`: in OpenMetrics they would be `unknown`.
#[test]
fn every_default_counter_is_a_counter_in_a_real_prometheus() {
    use crate::deploy::Prometheus;
    use std::time::Duration;
    if !have("prometheus", &["--version"]) {
        return;
    }
    let dropin = Exporter::start(&["--collector.disable-defaults", "--collector.dcgm"]);
    let body = dropin.metrics(None).body;
    let file = model::dcgm::DEFAULT_COUNTERS;
    let counters: Vec<&str> = file
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let mut cols = l.split(',').map(str::trim);
            let (name, kind) = (cols.next()?, cols.next()?);
            (kind == "counter").then_some(name)
        })
        .filter(|name| body.contains(&format!("\n{name}{{")))
        .collect();
    for want in [
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    ] {
        assert!(counters.contains(&want), "{want} served: {counters:?}");
    }
    let mut prom = Prometheus::with_config(
        &format!("prometheus-dcgm-types-{}", dropin.addr.port()),
        &format!(
            "scrape_configs:\n  - job_name: dcgm\n    static_configs:\n      - targets: ['{}']\n",
            dropin.addr
        ),
    );
    for name in counters {
        let meta = crate::common::eventually(Duration::from_secs(30), || {
            match prom.get(&format!("/api/v1/metadata?metric={name}")) {
                Some((200, b)) if b.contains("\"type\"") => Ok(b),
                other => Err(format!("{name}: {other:?}")),
            }
        });
        assert!(meta.contains(r#""type":"counter""#), "{name}: {meta}");
    }
}

/// An nvidia-smi capture (an RTX 4080 SUPER under load) in dcgm's units:
/// its own MiB, MHz, W and % come back as they were printed.
#[test]
fn an_smi_capture_in_dcgm_units() {
    let csv = include_str!("../fixtures/nvidia-smi/querygpu_rtx4080super_595.71.05_load.csv");
    let smi = crate::sources::fake_smi("dcgm-rtx4080", csv);
    let e = Exporter::start(&[
        "--source",
        "smi",
        "--smi.path",
        smi.to_str().unwrap(),
        "--xid.kmsg",
        "",
        "--collector.disable-defaults",
        "--collector.dcgm",
    ]);
    let body = e.wait_for("/metrics", std::time::Duration::from_secs(10), |b| {
        b.contains("DCGM_FI_DEV_GPU_TEMP{")
    });
    for (family, want) in [
        ("DCGM_FI_DEV_GPU_TEMP", 46.0),
        ("DCGM_FI_DEV_FB_USED", 1474.0),
        ("DCGM_FI_DEV_SM_CLOCK", 2805.0),
        ("DCGM_FI_DEV_POWER_USAGE", 84.24),
        ("DCGM_FI_DEV_GPU_UTIL", 7.0),
    ] {
        let v = value(&body, &format!("{family}{GPU0}")).unwrap_or_else(|| panic!("{family}"));
        assert!((v - want).abs() < 1e-9 * want, "{family}: {v} vs {want}");
    }
    assert!(body.contains("modelName=\"NVIDIA GeForce RTX 4080 SUPER\""));
    // nvidia-smi gives no minor number; dcgm-exporter's device is the index.
    assert!(body.contains(",device=\"nvidia0\","), "{body}");
    assert!(body.contains("DCGM_FI_DRIVER_VERSION=\"595.71.05\""));
    // No Xid source at all (no events, no kernel log): absent, not 0.
    assert!(!body.contains("DCGM_FI_DEV_XID_ERRORS{"), "{body}");
}

/// `DCGM_FI_DEV_XID_ERRORS` is the last code, 0 before any, whether the
/// kernel log (a GPU without Xid events) or NVML's Xid events count them;
/// `gpu_xid_errors_total` still counts each.
#[test]
fn xid_errors_is_the_last_code_from_the_kernel_log_and_nvml_events() {
    use crate::kernel_log::{append, xid};
    use crate::sources::{fake_nvml::Fixture, fleet, gpu, nvml_args, start};
    use std::time::Duration;
    let log = temp_file("dcgm-xid-kern.log", "");
    // GPU 0 (bus 9B, the log lines' bus) has no events; GPU 1 gets Xid 79
    // then 48 as events; GPU 2 has none at all.
    let gpus = [
        gpu(0, r#","events":false"#).replace("00000000:18:00.0", "00000000:9B:00.0"),
        gpu(1, r#","xids":[79,48]"#),
        gpu(2, ""),
    ];
    let f = Fixture::new("dcgm-xid", &fleet(&gpus));
    let mut args = nvml_args(&f);
    let at = args.iter().position(|a| a == "--xid.kmsg").unwrap() + 1;
    args[at] = log.to_str().unwrap().to_string();
    args.push("--collector.dcgm".into());
    let e = start(&args);
    let last = |b: &str, family: &str, g: u32| value(b, &format!("{family}{{gpu=\"{g}\","));
    let count = |b: &str, g: u32, code: u32| {
        b.lines()
            .find(|l| {
                l.starts_with(&format!("gpu_xid_errors_total{{gpu=\"{g}\","))
                    && l.contains(&format!(",xid=\"{code}\"}}"))
            })
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    let limit = Duration::from_secs(20);
    let body = e.wait_for("/metrics", limit, |b| {
        last(b, "DCGM_FI_DEV_XID_ERRORS", 1) == Some(48.0)
            && last(b, "DCGM_FI_DEV_XID_ERRORS", 0).is_some()
    });
    for family in ["DCGM_FI_DEV_XID_ERRORS", "gpu_xid_last_code"] {
        assert_eq!(last(&body, family, 0), Some(0.0), "{family}: no Xid yet");
        assert_eq!(last(&body, family, 1), Some(48.0), "{family}: events");
        assert_eq!(last(&body, family, 2), Some(0.0), "{family}: none");
    }
    assert_eq!(
        (count(&body, 1, 79), count(&body, 1, 48)),
        (Some(1.0), Some(1.0))
    );
    let t = crate::common::uptime() + 100.0;
    append(&log, &format!("{}{}", xid(t, 79), xid(t + 1.0, 48)));
    let body = e.wait_for("/metrics", limit, |b| {
        last(b, "DCGM_FI_DEV_XID_ERRORS", 0) == Some(48.0)
    });
    assert_eq!(last(&body, "gpu_xid_last_code", 0), Some(48.0));
    assert_eq!(
        (count(&body, 0, 79), count(&body, 0, 48)),
        (Some(1.0), Some(1.0))
    );
    assert_eq!(last(&body, "DCGM_FI_DEV_XID_ERRORS", 2), Some(0.0));
}

/// dcgm-exporter's Xid series as released. `DCGM_FI_DEV_XID_ERRORS`
/// carries the last code as `err_code` with its table's `err_msg`.
/// `DCGM_EXP_XID_ERRORS_COUNT`, where the file lists it, counts each code
/// over the window (`--compat.dcgm-xid-window`, its `-x`): it rises after
/// an Xid 79, and once the window has passed the GPU is back to its one
/// zero series without `xid`; `gpu_xid_errors_total` still counts it.
#[test]
fn xid_count_over_a_window_and_the_last_code_with_its_text() {
    use crate::kernel_log::{append, xid};
    use crate::sources::{fake_nvml::Fixture, fleet, gpu, nvml_args, start};
    use std::time::{Duration, Instant};
    let log = temp_file("dcgm-xid-window-kern.log", "");
    let file = temp_file(
        "dcgm-xid-window.csv",
        "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_XID_ERRORS, gauge, last\n\
         DCGM_EXP_XID_ERRORS_COUNT, gauge, Count of XID Errors within user-specified time window\n",
    );
    // GPU 0 (bus 9B, the log lines' bus) counts from the kernel log.
    let gpus = [
        gpu(0, r#","events":false"#).replace("00000000:18:00.0", "00000000:9B:00.0"),
        gpu(1, ""),
    ];
    let f = Fixture::new("dcgm-xid-window", &fleet(&gpus));
    let mut args = nvml_args(&f);
    let at = args.iter().position(|a| a == "--xid.kmsg").unwrap() + 1;
    args[at] = log.to_str().unwrap().to_string();
    for a in [
        "--collector.dcgm",
        "--compat.dcgm-counters",
        file.to_str().unwrap(),
        "--compat.dcgm-xid-window",
        "3s",
    ] {
        args.push(a.into());
    }
    let e = start(&args);
    let count = "DCGM_EXP_XID_ERRORS_COUNT{gpu=\"";
    let series = |b: &str, g: u32| -> Vec<String> {
        b.lines()
            .filter(|l| l.starts_with(&format!("{count}{g}\",")))
            .map(|l| l[l.find("Hostname").unwrap()..].to_string())
            .map(|l| l[l.find(',').unwrap() + 1..].to_string())
            .collect()
    };
    let zero = "window_size_in_ms=\"3000\"} 0";
    let limit = Duration::from_secs(20);
    let body = e.wait_for("/metrics", limit, |b| series(b, 0) == [zero]);
    assert_eq!(series(&body, 1), [zero]);
    let last = "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",";
    let line = body.lines().find(|l| l.starts_with(last)).unwrap();
    assert!(
        line.ends_with(",err_code=\"0\",err_msg=\"No Error\"} 0"),
        "{line}"
    );
    let t = crate::common::uptime() + 100.0;
    // The Xid is stamped with a collection after this.
    let appended = Instant::now();
    append(&log, &xid(t, 79));
    let one = "window_size_in_ms=\"3000\",xid=\"79\"} 1";
    let body = e.wait_for("/metrics", limit, |b| series(b, 0) == [one]);
    assert_eq!(series(&body, 1), [zero], "GPU 1 had none");
    let line = body.lines().find(|l| l.starts_with(last)).unwrap();
    assert!(
        line.ends_with(",err_code=\"79\",err_msg=\"GPU has fallen off the bus\"} 79"),
        "{line}"
    );
    // Back to the zero series once the window has passed, not before.
    let body = e.wait_for("/metrics", limit, |b| series(b, 0) == [zero]);
    let after = appended.elapsed();
    assert!(after >= Duration::from_millis(2900), "{after:?}");
    let total = "gpu_xid_errors_total{gpu=\"0\",";
    let counted = body
        .lines()
        .find(|l| l.starts_with(total) && l.contains(",xid=\"79\"}"));
    assert!(counted.is_some_and(|l| l.ends_with(" 1")), "{counted:?}");
}
