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

/// The two GPUs the fake nvidia-smi lists, GPU 0 on the bus the Xid name.
const SMI_CSV: &str = "index, uuid, pci.bus_id, temperature.gpu\n0, GPU-a, 00000000:9B:00.0, 40\n1, GPU-b, 00000000:9C:00.0, 41\n";

/// `cmd` running the exporter on a fake nvidia-smi listing [`SMI_CSV`],
/// Xid from `log`, once its first collection is published.
fn smi_exporter(cmd: Command, name: &str, log: &Path) -> Exporter {
    let smi = crate::sources::fake_smi(name, SMI_CSV);
    let e = Exporter::serving(
        cmd,
        &[
            "--source",
            "smi",
            "--smi.path",
            smi.to_str().unwrap(),
            "--xid.kmsg",
            log.to_str().unwrap(),
            "--collect.interval",
            "200ms",
        ],
    );
    e.wait_first_collection();
    e
}

/// A `dmesg -T` Xid line logged at Unix time `t` on a host whose `TZ` is
/// `tz`: glibc's `date` prints the stamp, so the zone's offset is its
/// reading of the file, not ours.
fn dmesg_t(tz: &str, t: u64, code: u32) -> String {
    let out = Command::new("date")
        .env("TZ", tz)
        .args([&format!("--date=@{t}"), "+%a %b %e %H:%M:%S %Y"])
        .output()
        .unwrap();
    assert!(out.status.success(), "date: {out:?}");
    let stamp = String::from_utf8(out.stdout).unwrap();
    format!(
        "[{}] NVRM: Xid (PCI:0000:9b:00): {code}, pid=1, name=x, Ch 00000008\n",
        stamp.trim_end()
    )
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn dmesg_t_stamps_are_read_in_the_hosts_time_zone() {
    let zones = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tz");
    let bad = zones.join("../SOURCES.md");
    // (TZ for the exporter, TZ the stamps are printed in, name.)
    let cases = [
        (
            format!(":{}", zones.join("Etc-GMT+5").display()),
            None,
            "utc-5",
        ),
        (
            zones.join("Asia-Tokyo").display().to_string(),
            None,
            "utc+9",
        ),
        // Not a zone file: one warning, stamps read as UTC.
        (format!(":{}", bad.display()), Some("UTC0"), "bad"),
    ];
    for (tz, printed_in, name) in &cases {
        let printed_in = printed_in.map_or(tz.as_str(), |p| p);
        let d = dir(&format!("kmsg-tz-{name}"));
        let log = d.0.join("dmesg.log");
        std::fs::write(&log, dmesg_t(printed_in, unix_now() - 3600, 79)).unwrap();
        let mut cmd = Command::new(BIN);
        cmd.env("TZ", tz);
        let e = smi_exporter(cmd, &format!("tz-{name}"), &log);
        // Appended after start: one logged two hours ago (before start),
        // then three since start (a stamp past now would be taken as now,
        // so they are in the past, though not by hours as a zone error).
        std::thread::sleep(Duration::from_secs(3));
        let t = unix_now() - 2;
        let lines = [(t - 7260, 48), (t, 79), (t, 79), (t + 1, 13)];
        append(
            &log,
            &lines
                .map(|(at, code)| dmesg_t(printed_in, at, code))
                .concat(),
        );
        let series =
            |x: u32| format!("gpu_xid_errors_total{{gpu=\"0\",uuid=\"GPU-a\",xid=\"{x}\"}}");
        e.wait_for("/metrics", Duration::from_secs(20), |b| {
            value(b, &series(13)) == Some(1.0)
        });
        std::thread::sleep(Duration::from_secs(1));
        let body = e.metrics(None).body;
        let last = "gpu_xid_last_timestamp_seconds{gpu=\"0\",uuid=\"GPU-a\"}";
        assert_eq!(
            (
                value(&body, &series(79)),
                value(&body, &series(48)),
                value(&body, &series(13)),
                value(&body, last)
            ),
            (Some(2.0), Some(0.0), Some(1.0), Some((t + 1) as f64)),
            "{name}"
        );
        let warnings = e.log().lines().filter(|l| l.contains("time zone")).count();
        assert_eq!(warnings, usize::from(*name == "bad"), "{name}: {}", e.log());
    }
}

/// A kern.log line that is not an Xid, stamped `t` seconds after boot; its
/// last 64 bytes are the same whatever the stamp.
fn noise(t: f64) -> String {
    format!(
        "Sep 23 18:37:03 node kernel: [{t:>13.6}] pcieport 0000:00:01.1: pciehp: Slot(0): Link Down, padding to a hundred bytes\n"
    )
}

#[test]
fn a_truncated_log_regrown_past_the_offset_loses_no_xid() {
    let d = dir("kmsg-regrow");
    let log = d.0.join("kern.log");
    std::fs::write(
        &log,
        (0..60)
            .map(|i| noise(10.0 + f64::from(i)))
            .collect::<String>(),
    )
    .unwrap();
    let e = smi_exporter(Command::new(BIN), "regrow", &log);
    let series = |x: u32| format!("gpu_xid_errors_total{{gpu=\"0\",uuid=\"GPU-a\",xid=\"{x}\"}}");
    let t = crate::common::uptime() + 100.0;
    append(&log, &format!("{}{}", xid(t, 79), noise(t + 1.0)));
    e.wait_for("/metrics", Duration::from_secs(20), |b| {
        value(b, &series(79)) == Some(1.0)
    });
    // logrotate's copytruncate, and 44 Xid logged before the next read,
    // the line that ends at the old offset with the same 64 bytes before
    // it as the line read there (another stamp), then one more Xid.
    let offset = std::fs::metadata(&log).unwrap().len() as usize;
    let xids: String = (0..44).map(|i| xid(t + 10.0 + f64::from(i), 79)).collect();
    let last = noise(t + 60.0);
    let head = "Sep 23 18:38:03 node kernel: ";
    let pad = offset - xids.len() - last.len() - head.len() - 1;
    let regrown = format!("{xids}{head}{}\n{last}", "x".repeat(pad));
    assert_eq!(regrown.len(), offset);
    let old = std::fs::read(&log).unwrap();
    assert_eq!(regrown.as_bytes()[offset - 64..], old[offset - 64..]);
    std::fs::write(&log, format!("{regrown}{}", xid(t + 61.0, 13))).unwrap();
    e.wait_for("/metrics", Duration::from_secs(20), |b| {
        value(b, &series(13)) == Some(1.0)
    });
    // Several collections on: exactly the 45 and the 1.
    std::thread::sleep(Duration::from_secs(2));
    let body = e.metrics(None).body;
    assert_eq!(
        (value(&body, &series(79)), value(&body, &series(13))),
        (Some(45.0), Some(1.0))
    );
}
