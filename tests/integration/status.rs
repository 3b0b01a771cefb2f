//! The status page at `/` from the real binary, as text and as a real
//! headless Chromium renders it.

use crate::common::{Exporter, have};
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNBOOKS: &str = "https://runbooks.example/gpu/";

/// The demo fleet's alerts (all firing once history has been replayed)
/// and their severities.
const ALERTS: [(&str, &str); 4] = [
    ("GPUThrottling", "ticket"),
    ("GPUXidErrors", "page"),
    ("KVFragmentationRisk", "ticket"),
    ("TTFTBudgetBurn", "page"),
];

/// The alert rows of a page, in order.
fn alert_rows(html: &str) -> Vec<&str> {
    html.split("<tr class=\"alert ")
        .skip(1)
        .map(|r| &r[..r.find("</tr>").expect("alert row ends")])
        .collect()
}

#[test]
fn the_status_page_shows_fleet_alerts_and_health() {
    let e = Exporter::start(&["--alerts.runbook-base-url", RUNBOOKS]);
    let r = e.get("/", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("Content-Type"),
        Some("text/html; charset=utf-8"),
        "{r:?}"
    );
    let html = &r.body;
    assert!(html.contains("<meta http-equiv=\"refresh\" content=\"5\">"));
    assert!(html.contains("id=\"simulated\">SIMULATED"), "{html}");
    assert!(html.contains("source <b>sim</b>"));
    assert!(html.contains(concat!("version ", env!("CARGO_PKG_VERSION"))));
    assert!(html.contains("collection <b>ok</b>"));
    assert!(html.contains("snapshot age "));

    for gpu in 0..4 {
        assert!(
            html.contains(&format!("<tr id=\"gpu-{gpu}\">")),
            "gpu {gpu}"
        );
    }
    assert_eq!(html.matches("<tr id=\"gpu-").count(), 4);
    // gpu1 is the thermally throttled one.
    let gpu1 = &html[html.find("<tr id=\"gpu-1\">").unwrap()..];
    let gpu1 = &gpu1[..gpu1.find("</tr>").unwrap()];
    assert!(gpu1.contains("<td class=\"bad\">yes</td>"), "{gpu1}");
    assert!(gpu1.contains("88 &deg;C"), "{gpu1}");
    // Who uses it: the demo's pods and batch job, in their rows.
    assert!(
        gpu1.contains("<td class=\"who\">pod inference/llama-70b-0 <small>vllm</small></td>"),
        "{gpu1}"
    );
    assert!(html.contains("<td class=\"who\">job 4711</td>"));

    let rows = alert_rows(html);
    for (name, severity) in ALERTS {
        let row = rows
            .iter()
            .find(|r| r.contains(&format!("<b>{name}</b>")))
            .unwrap_or_else(|| panic!("no row for {name} in {rows:#?}"));
        assert!(row.starts_with("firing\""), "{row}");
        assert!(
            row.contains(&format!("<span class=\"{severity}\">{severity}</span>")),
            "{row}"
        );
        assert!(
            row.contains(&format!("<a href=\"{RUNBOOKS}{name}.md\">runbook</a>")),
            "{row}"
        );
    }
    let summary = |name: &str| rows.iter().any(|r| r.contains(name));
    assert!(summary(
        "GPU 2 logged Xid errors that need a reset or a replacement in the last 5m"
    ));
    assert!(summary(
        "llama-3.1-70b-instruct is burning its TTFT error budget fast ("
    ));
    // Pages first.
    let severities: Vec<bool> = rows
        .iter()
        .map(|r| r.contains("<span class=\"page\">"))
        .collect();
    assert!(severities.is_sorted_by(|a, b| a >= b), "{rows:#?}");

    assert!(html.contains("<td>llama-3.1-70b-instruct</td>"));
    assert!(html.contains("<td>mistral-7b-instruct</td>"));
    for link in ["/metrics", "/alerts", "/healthz", "/readyz"] {
        assert!(html.contains(&format!("<a href=\"{link}\">")), "{link}");
    }
}

/// Runs chromium headless with a fresh profile, killing its whole process
/// group if it takes longer than a minute. Returns its stdout.
fn chromium(args: &[&str]) -> String {
    let dir = std::env::temp_dir().join(format!(
        "gpu-exporter-chromium-{}-{:?}",
        std::process::id(),
        Instant::now()
    ));
    let profile = dir.join("profile");
    std::fs::create_dir_all(&profile).unwrap();
    let (stdout, stderr) = (dir.join("stdout"), dir.join("stderr"));
    // Files, not pipes: a renderer that outlives the browser cannot hold
    // a read open.
    let mut child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            // The console on stderr: a policy violation shows there.
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdin(Stdio::null())
        .stdout(File::create(&stdout).unwrap())
        .stderr(File::create(&stderr).unwrap())
        .process_group(0)
        .spawn()
        .expect("spawn chromium");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // The browser's helpers share its process group; end them all.
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stderr(Stdio::null())
        .status();
    let _ = child.wait();
    let out = std::fs::read_to_string(&stdout).unwrap_or_default();
    let err = std::fs::read_to_string(&stderr).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    // Every page rendered keeps to its own policy: a style it blocked
    // would leave the page unstyled, and chromium says so.
    assert!(
        !err.contains("Content Security Policy"),
        "chromium {args:?}: {err}"
    );
    match status {
        Some(s) if s.success() => out,
        Some(s) => panic!("chromium {args:?}: {s}\n{err}"),
        None => panic!("chromium {args:?} ran over 60 s\n{err}"),
    }
}

#[test]
fn chromium_renders_the_status_page() {
    if !have("chromium", &["--version"]) {
        return;
    }
    let e = Exporter::start(&[]);
    let url = format!("http://{}/", e.addr);
    let alerts = e.get("/alerts", &[]).body;
    let active = alerts.matches("\"alertname\"").count();
    assert!(active >= ALERTS.len(), "{alerts}");

    let dom = chromium(&["--dump-dom", &url]);
    // The browser's DOM, not our bytes: a table it had to repair would
    // lose rows here.
    assert!(dom.contains("SIMULATED"), "{dom}");
    let start = dom.find("<table id=\"alerts\">").expect("alerts table");
    let table = &dom[start..start + dom[start..].find("</table>").unwrap()];
    // A header row, then one per active alert.
    assert_eq!(table.matches("<tr").count(), 1 + active, "{table}");
    for (name, severity) in ALERTS {
        assert!(table.contains(&format!("<b>{name}</b>")), "{name}");
        assert!(
            table.contains(&format!("class=\"{severity}\"")),
            "{severity}"
        );
    }
    let gpus = dom.find("<table id=\"gpus\">").expect("gpus table");
    let gpus = &dom[gpus..gpus + dom[gpus..].find("</table>").unwrap()];
    assert_eq!(gpus.matches("<tr id=\"gpu-").count(), 4, "{gpus}");
    assert!(
        gpus.contains("notebook-alice") && gpus.contains("notebook-bob"),
        "{gpus}"
    );

    let png: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/status-page.png");
    let _ = std::fs::remove_file(&png);
    chromium(&[
        &format!("--screenshot={}", png.display()),
        "--window-size=1280,900",
        &url,
    ]);
    let bytes = std::fs::read(&png).expect("chromium wrote the screenshot");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    // A blank 1280x900 page compresses to a few KB; a page with text does not.
    assert!(bytes.len() > 10_000, "{} bytes", bytes.len());
}
