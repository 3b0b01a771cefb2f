//! The exporter's own `process_*` readings from /proc, into stack buffers.

use base::time::boot_time;
use model::ProcessStats;
use std::fs::File;
use std::io::Read;

/// Linux reports CPU times in USER_HZ, which is 100 on every platform
/// that matters here.
const TICKS_PER_SECOND: f64 = 100.0;

fn read<'b>(path: &str, buf: &'b mut [u8]) -> Option<&'b str> {
    let mut f = File::open(path).ok()?;
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(_) => return None,
        }
    }
    std::str::from_utf8(&buf[..n]).ok()
}

/// The value after `key` on its line, e.g. `VmRSS:  1234 kB`.
fn field<'s>(text: &'s str, key: &str) -> Option<&'s str> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(str::trim_start)
}

pub fn read_stats() -> ProcessStats {
    let mut buf = [0u8; 4096];
    let mut p = ProcessStats::default();
    if let Some(stat) = read("/proc/self/stat", &mut buf) {
        // Fields after the parenthesised command name, which may hold spaces.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        // The first field here is field 3 (state); utime and stime are
        // fields 14 and 15, starttime 22.
        let mut f = rest.split_whitespace().map(|v| v.parse::<f64>().ok());
        let (utime, stime) = (f.nth(11).flatten(), f.next().flatten());
        if let (Some(u), Some(s)) = (utime, stime) {
            p.cpu_seconds_total = Some((u + s) / TICKS_PER_SECOND);
        }
        let start_ticks = f.nth(6).flatten();
        if let (Some(st), Some(bt)) = (start_ticks, boot_time()) {
            p.start_time_seconds = Some(bt + st / TICKS_PER_SECOND);
        }
    }
    if let Some(status) = read("/proc/self/status", &mut buf) {
        p.resident_memory_bytes = field(status, "VmRSS:")
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kb| kb.parse::<f64>().ok())
            .map(|kb| kb * 1024.0);
    }
    if let Some(limits) = read("/proc/self/limits", &mut buf) {
        p.max_fds = field(limits, "Max open files")
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok());
    }
    p.open_fds = open_fds();
    p
}

/// Since Linux 6.2 the size of /proc/self/fd is the count of open fds;
/// older kernels report 0 there, so count the entries instead.
fn open_fds() -> Option<f64> {
    match std::fs::metadata("/proc/self/fd").map(|m| m.len()) {
        Ok(n) if n > 0 => Some(n as f64),
        _ => std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count().saturating_sub(1) as f64),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_itself() {
        let p = super::read_stats();
        assert!(p.resident_memory_bytes.unwrap() > 100_000.0);
        assert!(p.cpu_seconds_total.is_some());
        assert!(p.open_fds.unwrap() >= 3.0);
        assert!(p.max_fds.unwrap() >= p.open_fds.unwrap());
        let start = p.start_time_seconds.unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(
            start <= now + 1.0 && start > now - 86_400.0 * 365.0,
            "{start} {now}"
        );
    }
}
