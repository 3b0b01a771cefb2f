//! Kernel log lines taken apart: `/dev/kmsg` records and `dmesg` text with
//! its stamps, the Xid an `NVRM: Xid` line reports, and bus ids in one
//! form. Pure, and never panics, so the fuzz targets call it directly.

pub use base::pci::normalize_bus_id;
use base::time::{
    parse_clock as clock, parse_digits as number, parse_iso_time as iso, unix_from_civil,
};

/// When a line was logged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stamp {
    /// Seconds since boot: `/dev/kmsg` records and `[ 1234.567890]`.
    Monotonic(f64),
    /// Unix seconds: `--time-format=iso`, which names its zone.
    Unix(f64),
    /// Seconds since 1970-01-01 in the host's local time, no zone named:
    /// `dmesg -T`. [`base::tz::Zone::to_unix`] makes it Unix time.
    Local(f64),
}

/// One kernel log line taken apart.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Line<'a> {
    /// The `/dev/kmsg` sequence number, when the line is a kmsg record.
    pub seq: Option<u64>,
    pub stamp: Option<Stamp>,
    /// The text after the prefixes.
    pub message: &'a str,
}

/// Takes a `/dev/kmsg` record (`6,1234,5678901,-;message`, continuation
/// lines after the first dropped) or a `dmesg` line apart: `--decode`'s
/// `kern  :warn  : ` prefix, then a `[ 1234.567890]` or `-T`
/// `[Mon Jan  1 00:00:00 2024]` stamp or an ISO
/// `2024-01-01T00:00:00,123456+00:00` stamp. A syslog or journal line
/// (`Sep 23 18:37:03 host kernel: [   34.193759] NVRM: …`) gives the
/// kernel's own `[…]` stamp after `kernel: ` when it has one; its own date
/// has no year and is not read. A line with none of these is all message
/// (a continuation line).
pub fn split_line(line: &str) -> Line<'_> {
    let line = line.split('\n').next().unwrap_or_default();
    let line = line.trim_end_matches('\r');
    if let Some((seq, us, message)) = kmsg_record(line) {
        return Line {
            seq: Some(seq),
            stamp: Some(Stamp::Monotonic(us as f64 / 1e6)),
            message,
        };
    }
    let rest = strip_decode(line);
    if let Some(inner_rest) = rest.strip_prefix('[')
        && let Some((inner, message)) = inner_rest.split_once(']')
        && let Some(stamp) = monotonic(inner).or_else(|| ctime(inner))
    {
        return Line {
            seq: None,
            stamp: Some(stamp),
            message: message.trim_start(),
        };
    }
    if let Some((first, message)) = rest.split_once(' ')
        && let Some(t) = iso(first)
    {
        return Line {
            seq: None,
            stamp: Some(Stamp::Unix(t)),
            message: message.trim_start(),
        };
    }
    if let Some((_, kernel)) = rest.split_once(" kernel: ") {
        if let Some(inner_rest) = kernel.strip_prefix('[')
            && let Some((inner, message)) = inner_rest.split_once(']')
            && let Some(stamp) = monotonic(inner)
        {
            return Line {
                seq: None,
                stamp: Some(stamp),
                message: message.trim_start(),
            };
        }
        return Line {
            seq: None,
            stamp: None,
            message: kernel.trim_start(),
        };
    }
    Line {
        seq: None,
        stamp: None,
        message: rest.trim_start(),
    }
}

/// `priority,sequence,timestamp_us,flags[,more];message`.
fn kmsg_record(line: &str) -> Option<(u64, u64, &str)> {
    let (prefix, message) = line.split_once(';')?;
    let mut fields = prefix.split(',');
    let digits = |s: Option<&str>| {
        s.filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))?
            .parse::<u64>()
            .ok()
    };
    digits(fields.next())?;
    let seq = digits(fields.next())?;
    let us = digits(fields.next())?;
    fields.next()?; // flags: `-`, `c`, `+`
    Some((seq, us, message))
}

/// Drops `dmesg --decode`'s `facility:level: ` prefix.
fn strip_decode(line: &str) -> &str {
    const FACILITIES: &[&str] = &[
        "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron",
        "authpriv", "ftp", "local0", "local1", "local2", "local3", "local4", "local5", "local6",
        "local7",
    ];
    const LEVELS: &[&str] = &[
        "emerg", "alert", "crit", "err", "warn", "notice", "info", "debug",
    ];
    let decoded = line.split_once(':').and_then(|(facility, rest)| {
        let (level, rest) = rest.split_once(':')?;
        (FACILITIES.contains(&facility.trim()) && LEVELS.contains(&level.trim()))
            .then(|| rest.trim_start())
    });
    decoded.unwrap_or(line)
}

/// `    1234.567890`: seconds since boot.
fn monotonic(s: &str) -> Option<Stamp> {
    let s = s.trim();
    let (secs, frac) = s.split_once('.')?;
    let digits = |d: &str| !d.is_empty() && d.len() <= 12 && d.bytes().all(|b| b.is_ascii_digit());
    if !digits(secs) || !digits(frac) {
        return None;
    }
    s.parse::<f64>().ok().map(Stamp::Monotonic)
}

/// `Mon Jan  1 00:00:00 2024` (`dmesg -T`): local time without a zone.
fn ctime(s: &str) -> Option<Stamp> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mut t = s.split_whitespace();
    let (_weekday, month, day, time, year) =
        (t.next()?, t.next()?, t.next()?, t.next()?, t.next()?);
    if t.next().is_some() {
        return None;
    }
    let month = MONTHS.iter().position(|m| *m == month)? as u32 + 1;
    let day = number(day, 2)?;
    let year = number(year, 4)?;
    let (h, m, sec) = clock(time)?;
    unix_from_civil((year, month, day), (h, m, sec), 0.0).map(Stamp::Local)
}

/// One Xid: the GPU (normalised bus id) and the code.
#[derive(Clone, Debug, PartialEq)]
pub struct Xid {
    pub bus_id: String,
    pub code: u32,
}

/// The Xid in a message, if it is an `NVRM: Xid (<bus>): <code>` line with
/// a readable bus id and code.
pub fn parse_xid(message: &str) -> Option<Xid> {
    let (_, rest) = message.split_once("NVRM: Xid (")?;
    let (bus, rest) = rest.split_once(')')?;
    let bus_id = normalize_bus_id(bus)?;
    let rest = rest.strip_prefix(':')?.trim_start();
    let len = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (code, after) = rest.split_at_checked(len)?;
    if !(after.is_empty() || after.starts_with(',') || after.starts_with(char::is_whitespace)) {
        return None;
    }
    let code = number(code, 10)?;
    Some(Xid { bus_id, code })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xid_forms() {
        let cases = [
            (
                "NVRM: Xid (PCI:0000:9b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
                "00000000:9B:00.0",
                79,
            ),
            (
                "NVRM: Xid (0000:03:00): 14, Channel 00000001",
                "00000000:03:00.0",
                14,
            ),
            (
                "NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception",
                "00000000:38:00.0",
                13,
            ),
            ("NVRM: Xid (PCI:0001:c1:1f): 48", "00000001:C1:1F.0", 48),
            ("NVRM: Xid (PCI:0000:9b:00):119 ", "00000000:9B:00.0", 119),
        ];
        for (message, bus, code) in cases {
            assert_eq!(
                parse_xid(message),
                Some(Xid {
                    bus_id: bus.into(),
                    code
                }),
                "{message}"
            );
        }
        for not_xid in [
            "nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up",
            "NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.",
            "NVRM: The NVIDIA GPU 0000:b3:00.0",
            "NVRM: fallen off the bus and is not responding to commands.",
            "NVRM: Xid (PCI:0000:9b:00): , pid=1",
            "NVRM: Xid (PCI:0000:9b:00): 79x",
            "NVRM: Xid (PCI:0000:9b:00) 79",
            "NVRM: Xid (PCI:zz:9b:00): 79",
            "NVRM: Xid (PCI:0000:9b:00): 99999999999, too big",
            "NVRM: Xid (PCI:0000:9b:00",
            "Xid (PCI:0000:9b:00): 79 without NVRM",
            "NVRM: GPU at PCI:0000:9b:00: GPU-509665ad-b600-ac93-3616-d754b23d636d",
        ] {
            assert_eq!(parse_xid(not_xid), None, "{not_xid}");
        }
    }

    #[allow(clippy::too_many_lines)] // a test, one scenario told whole
    #[test]
    fn timestamp_styles() {
        let xid = "NVRM: Xid (PCI:0000:9b:00): 79, pid=1, name=x, GPU has fallen off the bus.";
        let cases = [
            (
                format!("[ 1234.567890] {xid}"),
                None,
                Some(Stamp::Monotonic(1234.56789)),
            ),
            (
                format!("[6781741.548779] {xid}"),
                None,
                Some(Stamp::Monotonic(6781741.548779)),
            ),
            (
                format!("[Mon Jan  1 00:00:00 2024] {xid}"),
                None,
                Some(Stamp::Local(1_704_067_200.0)),
            ),
            (
                format!("2024-01-01T00:00:00,000000+00:00 {xid}"),
                None,
                Some(Stamp::Unix(1_704_067_200.0)),
            ),
            (
                format!("2024-02-29T12:00:00.5+05:30 {xid}"),
                None,
                Some(Stamp::Unix(1_709_188_200.5)),
            ),
            (
                format!("2024-01-01T00:00:00Z {xid}"),
                None,
                Some(Stamp::Unix(1_704_067_200.0)),
            ),
            (
                format!("kern  :warn  : [ 1234.567890] {xid}"),
                None,
                Some(Stamp::Monotonic(1234.56789)),
            ),
            (
                format!("kern  :err   : [Mon Jan  1 00:00:00 2024] {xid}"),
                None,
                Some(Stamp::Local(1_704_067_200.0)),
            ),
            (
                format!("kern  :warn  : 2024-01-01T00:00:00,123456+00:00 {xid}"),
                None,
                Some(Stamp::Unix(1_704_067_200.123456)),
            ),
            (
                format!("4,1234,5678901,-;{xid}"),
                Some(1234),
                Some(Stamp::Monotonic(5.678901)),
            ),
            (
                format!(
                    "4,1234,5678901,-,caller=T42;{xid}\n SUBSYSTEM=pci\n DEVICE=+pci:0000:9b:00.0"
                ),
                Some(1234),
                Some(Stamp::Monotonic(5.678901)),
            ),
            // syslog's kern.log: the kernel's own stamp after `kernel: `;
            // the journal's has none.
            (
                format!("Jan  1 00:00:00 host kernel: [ 12.5] {xid}"),
                None,
                Some(Stamp::Monotonic(12.5)),
            ),
            (format!("Jul 01 22:55:07 gpu kernel: {xid}"), None, None),
            (xid.to_string(), None, None),
        ];
        for (line, seq, stamp) in &cases {
            let l = split_line(line);
            assert_eq!((l.seq, l.stamp), (*seq, *stamp), "{line}");
            assert_eq!(parse_xid(l.message).map(|x| x.code), Some(79), "{line}");
        }
        // Stamp-shaped but wrong: left in the message, no stamp.
        for line in [
            "[Mon Foo  1 00:00:00 2024] x",
            "[ 12.x] x",
            "[ 1234] x",
            "2024-13-01T00:00:00Z x",
            "2024-01-01T25:00:00Z x",
            "2024-01-01T00:00:00+0000 x",
            "1,2,x,-;x",
        ] {
            assert_eq!(split_line(line).stamp, None, "{line}");
        }
    }
}
