//! `--xid.kmsg FILE` through the binary: a 200 MB log read in the
//! exporter's own memory budget, lines appended to it counted exactly once
//! (a last line without its newline included), and what is not a log
//! refused with one line.

use crate::common::{BIN, Exporter, value};
use crate::image::release_binary;
use crate::sources::fake_nvml::Fixture;
use crate::sources::fleet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MIB: u64 = 1024 * 1024;
const LOG_BYTES: u64 = 200 * MIB;

/// A directory removed on drop.
struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn dir(name: &str) -> Dir {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Dir(d)
}

/// A kern.log Xid line stamped `t` seconds after boot.
pub(crate) fn xid(t: f64, code: u32) -> String {
    format!(
        "Sep 23 18:37:03 node kernel: [{t:>13.6}] NVRM: Xid (PCI:0000:9b:00): {code}, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
    )
}

pub(crate) fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

#[test]
fn a_200_mb_kernel_log_stays_in_budget_and_new_lines_count_once() {
    let d = dir("kmsg-200mb");
    let log = d.0.join("kern.log");
    // 200 MB of kernel noise with an Xid every ~10 MB, all from before
    // start. Bounded: exactly LOG_BYTES / line length lines.
    let before = {
        let noise = "Sep 23 18:37:03 node kernel: [    34.193735] pcieport 0000:00:01.1: pciehp: Slot(0): Link Down, padding to a hundred bytes\n";
        let mut w =
            std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&log).unwrap());
        let lines = LOG_BYTES / noise.len() as u64;
        for i in 0..lines {
            if i % 100_000 == 99_999 {
                w.write_all(xid(30.0, 79).as_bytes()).unwrap();
            } else {
                w.write_all(noise.as_bytes()).unwrap();
            }
        }
        w.flush().unwrap();
        lines / 100_000
    };
    assert!(std::fs::metadata(&log).unwrap().len() >= LOG_BYTES - MIB);
    // A GPU without Xid events, so the kernel log fills its counters.
    let gpu = r#"{"name":"NVIDIA H100 80GB HBM3","uuid":"GPU-kmsg","bus_id":"00000000:9B:00.0","temperature":40,"events":false}"#;
    let f = Fixture::new("kmsg-200mb", &fleet(&[gpu.to_string()]));
    let lib = f.lib.to_str().unwrap().to_string();
    let logp = log.to_str().unwrap().to_string();
    let e = Exporter::start_binary(
        release_binary(),
        &[
            "--source",
            "nvml",
            "--nvml.library",
            &lib,
            "--xid.kmsg",
            &logp,
            "--collect.interval",
            "200ms",
        ],
    );
    e.wait_log(
        &format!("holds {before} Xid from before the exporter started"),
        Duration::from_secs(180),
    );
    let xid79 = "gpu_xid_errors_total{gpu=\"0\",uuid=\"GPU-kmsg\",xid=\"79\"}";
    assert_eq!(value(&e.metrics(None).body, xid79), Some(0.0));

    // Appended, stamped after start as the kernel stamps them: counted
    // once each, however many collections read on.
    let t = crate::common::uptime() + 100.0;
    append(
        &log,
        &format!("{}{}{}", xid(t, 79), xid(t + 1.0, 79), xid(t + 2.0, 48)),
    );
    let xid48 = "gpu_xid_errors_total{gpu=\"0\",uuid=\"GPU-kmsg\",xid=\"48\"}";
    e.wait_for("/metrics", Duration::from_secs(20), |b| {
        value(b, xid79) == Some(2.0) && value(b, xid48) == Some(1.0)
    });
    // A last line without its newline: once the file stays unchanged for
    // two collections; its newline later changes nothing.
    append(&log, xid(t + 3.0, 13).trim_end());
    let xid13 = "gpu_xid_errors_total{gpu=\"0\",uuid=\"GPU-kmsg\",xid=\"13\"}";
    e.wait_for("/metrics", Duration::from_secs(20), |b| {
        value(b, xid13) == Some(1.0)
    });
    append(&log, &format!("\n{}", xid(t + 4.0, 48)));
    e.wait_for("/metrics", Duration::from_secs(20), |b| {
        value(b, xid48) == Some(2.0)
    });
    // Several collections on, nothing counted twice.
    std::thread::sleep(Duration::from_secs(1));
    let body = e.metrics(None).body;
    assert_eq!(
        (
            value(&body, xid79),
            value(&body, xid48),
            value(&body, xid13)
        ),
        (Some(2.0), Some(2.0), Some(1.0))
    );
    let hwm = e.status_kib("VmHWM");
    println!("200 MB kernel log: exporter VmHWM {hwm} KiB");
    assert!(hwm * 1024 <= 8 * MIB, "VmHWM {hwm} KiB");
}

/// Runs the exporter to its end, for at most 20 s: what it is given must
/// never hang it.
fn run_within(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gpu-exporter {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    (status.code(), err)
}

#[test]
fn what_is_not_a_kernel_log_is_refused_with_one_line() {
    let d = dir("kmsg-refused");
    let fifo = d.0.join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let socket = d.0.join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let smi = crate::sources::fake_smi("refused", "index, uuid\n0, GPU-a\n");
    for (path, kind) in [
        (fifo.as_path(), "is a FIFO"),
        (socket.as_path(), "is a socket"),
        (
            Path::new("/dev/null"),
            "is a character device other than /dev/kmsg",
        ),
        (d.0.as_path(), "is a directory"),
    ] {
        let (code, err) = run_within(&[
            "--once",
            "--source",
            "smi",
            "--smi.path",
            smi.to_str().unwrap(),
            "--xid.kmsg",
            path.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("--xid.kmsg") && err.contains(kind), "{err}");
    }
}
