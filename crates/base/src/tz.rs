//! The host's time zone, for kernel log stamps printed in local time
//! without a zone (`dmesg -T`): `TZ` when set, else `/etc/localtime`, a
//! TZif file (RFC 8536) with its POSIX TZ rule footer; UTC when there is
//! neither (a scratch image). Read once, bounded, and total: a file that
//! does not parse is one warning and UTC.

use super::file::read_bytes;
use super::time::{civil_from_days, days_from_civil};
use std::path::Path;

/// The most a TZif file may hold: the largest in tzdata are under 4 KiB.
pub const MAX_TZIF_BYTES: u64 = 64 * 1024;
/// Where zone names in `TZ` (`Asia/Tokyo`) are looked up, as glibc does.
const ZONEINFO: &str = "/usr/share/zoneinfo";
/// UTC offsets RFC 8536 allows: -25 h < offset < 26 h.
const MAX_OFFSET: i64 = 26 * 3600;

/// A time zone: UTC offsets (seconds east) over time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Zone {
    /// Unix times of the changes, ascending, and the offset from each on.
    transitions: Vec<(i64, i32)>,
    /// The offset before the first change.
    initial: i32,
    /// After the last change (the TZif footer).
    rule: Option<Rule>,
}

/// A POSIX TZ rule: `EST5EDT,M3.2.0,M11.1.0`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Rule {
    std: i32,
    /// Daylight offset, its start (in standard time) and end (in daylight
    /// time) each year.
    dst: Option<(i32, Change, Change)>,
}

/// A day of the year and seconds after its local midnight.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Change {
    day: Day,
    time: i32,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Day {
    /// `Jn`: 1 to 365, February 29 never counted.
    Julian(u16),
    /// `n`: 0 to 365, February 29 counted.
    Zero(u16),
    /// `Mm.w.d`: weekday `d` (0 Sunday) of week `w` (5: the last) of month `m`.
    Month(u32, u32, u32),
}

impl Zone {
    pub fn utc() -> Zone {
        Zone::default()
    }

    /// Seconds east of UTC at Unix time `t`.
    pub fn offset_at(&self, t: i64) -> i32 {
        let after = self.transitions.partition_point(|&(at, _)| at <= t);
        match (after, self.rule) {
            (n, Some(rule)) if n == self.transitions.len() => rule.offset_at(t),
            (0, _) => self.initial,
            (n, _) => self.transitions[n - 1].1,
        }
    }

    /// Unix time of a local civil time given as seconds since 1970-01-01
    /// local; in the hour a change repeats, the earlier offset's.
    pub fn to_unix(&self, local: f64) -> f64 {
        let l = local.floor() as i64;
        let guess = l - i64::from(self.offset_at(l));
        local - f64::from(self.offset_at(guess))
    }
}

impl Rule {
    fn offset_at(&self, t: i64) -> i32 {
        let Some((dst, start, end)) = self.dst else {
            return self.std;
        };
        let (year, _, _) = civil_from_days((t + i64::from(self.std)).div_euclid(86_400));
        let start = start.local(year) - i64::from(self.std);
        let end = end.local(year) - i64::from(dst);
        let daylight = if start < end {
            start <= t && t < end
        } else {
            t < end || start <= t
        };
        if daylight { dst } else { self.std }
    }
}

impl Change {
    /// Local seconds since 1970-01-01 of this change in `year`.
    fn local(&self, year: i64) -> i64 {
        let jan1 = days_from_civil(year, 1, 1);
        let leap = days_from_civil(year + 1, 1, 1) - jan1 == 366;
        let day = match self.day {
            Day::Julian(n) => jan1 + i64::from(n) - 1 + i64::from(leap && n >= 60),
            Day::Zero(n) => jan1 + i64::from(n),
            Day::Month(m, w, d) => {
                let first = days_from_civil(year, m, 1);
                let next = if m == 12 {
                    days_from_civil(year + 1, 1, 1)
                } else {
                    days_from_civil(year, m + 1, 1)
                };
                let weekday = (first + 4).rem_euclid(7);
                let day = first + (i64::from(d) - weekday).rem_euclid(7) + 7 * i64::from(w - 1);
                if day >= next { day - 7 } else { day }
            }
        };
        day * 86_400 + i64::from(self.time)
    }
}

/// The host's zone: from `TZ` as glibc reads it (`:/path`, `/path`, a zone
/// name under /usr/share/zoneinfo, a POSIX rule; empty is UTC), else
/// `/etc/localtime`, else UTC. A warning line when one was named but
/// could not be read.
pub fn local() -> (Zone, Option<String>) {
    from(
        std::env::var("TZ").ok().as_deref(),
        Path::new("/etc/localtime"),
    )
}

fn from(tz: Option<&str>, localtime: &Path) -> (Zone, Option<String>) {
    let fallback = |what: &str, e: String| {
        let warning = format!("time zone {what}: {e}; reading local-time stamps as UTC");
        (Zone::utc(), Some(warning))
    };
    let file = |path: &Path| {
        read_bytes(path, MAX_TZIF_BYTES)
            .and_then(|b| parse_tzif(&b).map_err(String::from))
            .map_or_else(|e| fallback(&path.display().to_string(), e), |z| (z, None))
    };
    let Some(tz) = tz else {
        return match localtime.exists() {
            true => file(localtime),
            false => (Zone::utc(), None),
        };
    };
    let tz = tz.strip_prefix(':').unwrap_or(tz);
    if tz.is_empty() {
        return (Zone::utc(), None);
    }
    if tz.starts_with('/') {
        return file(Path::new(tz));
    }
    let named = Path::new(ZONEINFO).join(tz);
    if !tz.split('/').any(|part| part == "..") && named.is_file() {
        return file(&named);
    }
    match parse_rule(tz) {
        Some(rule) => (
            Zone {
                rule: Some(rule),
                ..Zone::default()
            },
            None,
        ),
        None => fallback(&format!("TZ={tz}"), "neither a zone file nor a rule".into()),
    }
}

/// Reads a TZif file: version 1's 32-bit table, or for version 2 and
/// later the 64-bit one and the footer's rule. Leap seconds are skipped.
pub fn parse_tzif(bytes: &[u8]) -> Result<Zone, &'static str> {
    let mut r = Bytes(bytes);
    let (version, counts) = header(&mut r)?;
    if version == 0 {
        return block(&mut r, counts, 4);
    }
    let skip = block_len(counts, 4).ok_or("counts overflow")?;
    r.take(skip)?;
    let (_, counts) = header(&mut r)?;
    let mut zone = block(&mut r, counts, 8)?;
    let footer =
        r.0.strip_prefix(b"\n")
            .ok_or("no footer after the 64-bit data")?;
    let rule = footer.split(|&b| b == b'\n').next().unwrap_or_default();
    if !rule.is_empty() {
        let rule = std::str::from_utf8(rule).map_err(|_| "footer is not text")?;
        zone.rule = Some(parse_rule(rule).ok_or("a footer rule that is no POSIX TZ rule")?);
    }
    Ok(zone)
}

/// The TZif counts: isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt.
type Counts = [usize; 6];

struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        let (head, rest) = self.0.split_at_checked(n).ok_or("cut short")?;
        self.0 = rest;
        Ok(head)
    }

    fn be(&mut self, n: usize) -> Result<i64, &'static str> {
        let b = self.take(n)?;
        let v = b.iter().fold(0u64, |v, &x| v << 8 | u64::from(x));
        // Sign-extend a 4-byte value.
        Ok(if n == 4 {
            i64::from(v as u32 as i32)
        } else {
            v as i64
        })
    }
}

fn header(r: &mut Bytes) -> Result<(u8, Counts), &'static str> {
    if r.take(4)? != b"TZif" {
        return Err("not a TZif file");
    }
    let version = r.take(16)?[0];
    if !matches!(version, 0 | b'2'..=b'9') {
        return Err("an unknown TZif version");
    }
    let mut counts = [0; 6];
    for c in &mut counts {
        *c = r.be(4)? as u32 as usize;
    }
    Ok((version, counts))
}

fn block_len([isut, isstd, leap, time, types, chars]: Counts, size: usize) -> Option<usize> {
    let parts = [
        time * (size + 1),
        types * 6,
        chars,
        leap * (size + 4),
        isstd,
        isut,
    ];
    parts.iter().try_fold(0usize, |sum, &p| sum.checked_add(p))
}

fn block(r: &mut Bytes, counts: Counts, size: usize) -> Result<Zone, &'static str> {
    let [_, _, _, timecnt, typecnt, _] = counts;
    let len = block_len(counts, size).ok_or("counts overflow")?;
    let mut data = Bytes(r.take(len)?);
    if typecnt == 0 {
        return Err("no local time types");
    }
    let times = (0..timecnt)
        .map(|_| data.be(size))
        .collect::<Result<Vec<_>, _>>()?;
    let indices = data.take(timecnt)?;
    let offsets = (0..typecnt)
        .map(|_| {
            let utoff = data.be(4)?;
            data.take(2)?;
            match utoff.abs() < MAX_OFFSET {
                true => Ok(utoff as i32),
                false => Err("a UTC offset out of range"),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut transitions = Vec::with_capacity(timecnt);
    for (&at, &i) in times.iter().zip(indices) {
        let offset = *offsets
            .get(usize::from(i))
            .ok_or("type index out of range")?;
        if transitions.last().is_some_and(|&(last, _)| at <= last) {
            return Err("transitions out of order");
        }
        transitions.push((at, offset));
    }
    Ok(Zone {
        transitions,
        initial: offsets[0],
        rule: None,
    })
}

/// A POSIX TZ rule (`std offset [dst [offset] [,start[/time],end[/time]]]`).
fn parse_rule(s: &str) -> Option<Rule> {
    let mut p = s.as_bytes();
    name(&mut p)?;
    let std = -clock(&mut p, 24)?;
    if p.is_empty() {
        return Some(Rule { std, dst: None });
    }
    name(&mut p)?;
    let dst = match p.first() {
        None | Some(b',') => std + 3600,
        Some(_) => -clock(&mut p, 24)?,
    };
    // No dates: the POSIX default, the United States' since 2007.
    let dates = match p {
        [] => b",M3.2.0,M11.1.0".as_slice(),
        _ => p,
    };
    let mut p = dates.strip_prefix(b",")?;
    let start = change(&mut p)?;
    p = p.strip_prefix(b",")?;
    let end = change(&mut p)?;
    p.is_empty().then_some(Rule {
        std,
        dst: Some((dst, start, end)),
    })
}

/// A zone abbreviation: 3 or more letters, or `<...>` (`<-05>`).
fn name(p: &mut &[u8]) -> Option<()> {
    let (len, skip) = match p.strip_prefix(b"<") {
        Some(rest) => (rest.iter().position(|&b| b == b'>')?, 2),
        None => (p.iter().take_while(|b| b.is_ascii_alphabetic()).count(), 0),
    };
    (len >= 3).then(|| *p = &p[len + skip..])
}

/// `[+-]hh[:mm[:ss]]` in seconds, hours at most `max_hours`.
fn clock(p: &mut &[u8], max_hours: i64) -> Option<i32> {
    let sign = match p.first() {
        Some(b'-') => -1,
        _ => 1,
    };
    if matches!(p.first(), Some(b'-' | b'+')) {
        *p = &p[1..];
    }
    let mut secs = 0;
    let parts = [(3, max_hours, 3600), (2, 59, 60), (2, 59, 1)];
    for (i, (digits, limit, unit)) in parts.into_iter().enumerate() {
        if i > 0 {
            match p.strip_prefix(b":") {
                Some(rest) => *p = rest,
                None => break,
            }
        }
        let n = number(p, digits)?;
        if n > limit {
            return None;
        }
        secs += n * unit;
    }
    Some(sign * secs as i32)
}

/// 1 to `max` decimal digits.
fn number(p: &mut &[u8], max: usize) -> Option<i64> {
    let len = p
        .iter()
        .take(max)
        .take_while(|b| b.is_ascii_digit())
        .count();
    let (digits, rest) = p.split_at_checked(len).filter(|_| len > 0)?;
    *p = rest;
    Some(digits.iter().fold(0, |n, &d| n * 10 + i64::from(d - b'0')))
}

/// `Jn`, `n` or `Mm.w.d`, then `/time` (default 02:00:00).
fn change(p: &mut &[u8]) -> Option<Change> {
    let day = if let Some(rest) = p.strip_prefix(b"J") {
        *p = rest;
        Day::Julian(
            u16::try_from(number(p, 3)?)
                .ok()
                .filter(|n| (1..=365).contains(n))?,
        )
    } else if let Some(rest) = p.strip_prefix(b"M") {
        *p = rest;
        let m = number(p, 2)?;
        *p = p.strip_prefix(b".")?;
        let w = number(p, 1)?;
        *p = p.strip_prefix(b".")?;
        let d = number(p, 1)?;
        let ok = (1..=12).contains(&m) && (1..=5).contains(&w) && d <= 6;
        ok.then_some(Day::Month(m as u32, w as u32, d as u32))?
    } else {
        Day::Zero(u16::try_from(number(p, 3)?).ok().filter(|&n| n <= 365)?)
    };
    let time = match p.strip_prefix(b"/") {
        Some(rest) => {
            *p = rest;
            clock(p, 167)?
        }
        None => 7200,
    };
    Some(Change { day, time })
}

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! zone_fixture {
        ($name:literal) => {
            include_bytes!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../tests/fixtures/tz/",
                $name
            ))
        };
    }
    const GMT5: &[u8] = zone_fixture!("Etc-GMT+5");
    const TOKYO: &[u8] = zone_fixture!("Asia-Tokyo");
    const NEW_YORK: &[u8] = zone_fixture!("America-New_York");

    fn at((y, m, d): (u32, u32, u32), (h, min, s): (u32, u32, u32)) -> i64 {
        days_from_civil(i64::from(y), m, d) * 86_400 + i64::from(h * 3600 + min * 60 + s)
    }

    fn fixture_dir() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/tz")
    }

    #[test]
    fn fixed_zones_both_ways() {
        let gmt5 = parse_tzif(GMT5).unwrap();
        let tokyo = parse_tzif(TOKYO).unwrap();
        let noon = at((2026, 12, 1), (12, 0, 0));
        assert_eq!(gmt5.offset_at(noon), -5 * 3600);
        assert_eq!(tokyo.offset_at(noon), 9 * 3600);
        // 10:00 local on 1 Dec 2026: 15:00 UTC at UTC-5, 01:00 UTC at UTC+9.
        let ten = at((2026, 12, 1), (10, 0, 0)) as f64;
        assert_eq!(gmt5.to_unix(ten), at((2026, 12, 1), (15, 0, 0)) as f64);
        assert_eq!(
            tokyo.to_unix(ten + 0.5),
            at((2026, 12, 1), (1, 0, 0)) as f64 + 0.5
        );
        // Tokyo kept daylight time 1948 to 1951.
        assert_eq!(tokyo.offset_at(at((1950, 7, 1), (0, 0, 0))), 10 * 3600);
        assert_eq!(Zone::utc().to_unix(ten), ten);
    }

    #[test]
    fn daylight_time_from_the_table_and_from_the_footer_rule_agree() {
        let ny = parse_tzif(NEW_YORK).unwrap();
        let rule = ny.rule.unwrap();
        // Every change the table holds since the rule took effect (2007).
        let since = at((2008, 1, 1), (0, 0, 0));
        let changes: Vec<_> = ny.transitions.iter().filter(|t| t.0 >= since).collect();
        assert!(changes.len() >= 50, "{}", changes.len());
        for &&(t, offset) in &changes {
            assert_eq!(rule.offset_at(t), offset, "at {t}");
            assert_ne!(rule.offset_at(t - 1), offset, "before {t}");
        }
        // 2:00 EST on 8 Mar 2026 is 07:00 UTC; past the table, the rule.
        let spring = at((2026, 3, 8), (7, 0, 0));
        assert_eq!(ny.offset_at(spring - 1), -5 * 3600);
        assert_eq!(ny.offset_at(spring), -4 * 3600);
        assert_eq!(ny.offset_at(at((2100, 7, 1), (0, 0, 0))), -4 * 3600);
        assert_eq!(ny.offset_at(at((2100, 12, 1), (0, 0, 0))), -5 * 3600);
        let july_noon = at((2026, 7, 1), (12, 0, 0)) as f64;
        assert_eq!(ny.to_unix(july_noon), july_noon + 4.0 * 3600.0);
    }

    #[test]
    fn posix_rules() {
        let offsets = |rule: &str, dates: &[(u32, u32, u32)]| -> Vec<i32> {
            let r = parse_rule(rule).unwrap_or_else(|| panic!("{rule}"));
            dates
                .iter()
                .map(|&d| r.offset_at(at(d, (12, 0, 0))))
                .collect()
        };
        let (jan, jul) = ((2026, 1, 15), (2026, 7, 15));
        assert_eq!(offsets("<-05>5", &[jan, jul]), [-18_000, -18_000]);
        assert_eq!(offsets("JST-9", &[jan]), [32_400]);
        assert_eq!(offsets("EST5EDT", &[jan, jul]), [-18_000, -14_400]);
        // Southern hemisphere: daylight time across the new year.
        let sydney = "AEST-10AEDT,M10.1.0,M4.1.0/3";
        assert_eq!(offsets(sydney, &[jan, jul]), [39_600, 36_000]);
        // Half-hour daylight time, quoted names, hours past 24.
        let lord_howe = "<+1030>-10:30<+11>-11,M10.1.0,M4.1.0";
        assert_eq!(offsets(lord_howe, &[jan, jul]), [39_600, 37_800]);
        let israel = "IST-2IDT,M3.4.4/26,M10.5.0";
        assert_eq!(offsets(israel, &[jan, jul]), [7_200, 10_800]);
        // Day-of-year forms.
        assert_eq!(
            offsets("AAA0BBB,J60,300", &[(2024, 2, 29), (2024, 3, 1)]),
            [0, 3600]
        );
        assert_eq!(
            offsets("AAA0BBB,59,300", &[(2024, 2, 28), (2024, 2, 29)]),
            [0, 3600]
        );
        for bad in [
            "",
            "EST",
            "A5",
            "EST5EDT,M13.1.0,M11.1.0",
            "EST5EDT,M3.2.0",
            "EST5EDT,M3.6.0,M11.1.0",
            "EST25",
            "<EST5",
            "EST5EDT,J0,J365",
            "EST5EDT,366,1",
            "EST5x",
            "EST5EDT,M3.2.0/200,M11.1.0",
        ] {
            assert_eq!(parse_rule(bad), None, "{bad}");
        }
    }

    #[test]
    fn bad_files_are_errors_never_panics() {
        for good in [GMT5, TOKYO, NEW_YORK] {
            assert!(parse_tzif(good).is_ok());
            // Every cut and every byte mangled: an answer, never a panic.
            for n in 0..good.len() {
                let _ = parse_tzif(&good[..n]);
                let mut bad = good.to_vec();
                bad[n] ^= 0xa5;
                let _ = parse_tzif(&bad);
            }
        }
        assert_eq!(parse_tzif(b"").unwrap_err(), "cut short");
        assert_eq!(parse_tzif(b"TZjf\0").unwrap_err(), "not a TZif file");
        let cut = &GMT5[..GMT5.len() - 12];
        assert_eq!(parse_tzif(cut).unwrap_err(), "cut short");
        let mut no_footer = GMT5.to_vec();
        no_footer.truncate(GMT5.len() - 8);
        assert!(parse_tzif(&no_footer).is_err());
        let mut bad_rule = GMT5.to_vec();
        let len = bad_rule.len();
        bad_rule[len - 2] = b'!';
        assert_eq!(
            parse_tzif(&bad_rule).unwrap_err(),
            "a footer rule that is no POSIX TZ rule"
        );
    }

    #[test]
    fn tz_and_etc_localtime() {
        let dir = fixture_dir();
        let tokyo = dir.join("Asia-Tokyo");
        let missing = dir.join("missing");
        let noon = at((2026, 12, 1), (12, 0, 0));
        let offset = |(z, w): (Zone, Option<String>)| (z.offset_at(noon), w);
        // No TZ: /etc/localtime, or UTC without it (a scratch image).
        assert_eq!(offset(from(None, &tokyo)), (32_400, None));
        assert_eq!(offset(from(None, &missing)), (0, None));
        // A file TZ names, with or without the colon; empty is UTC.
        let gmt5 = dir.join("Etc-GMT+5").display().to_string();
        assert_eq!(
            offset(from(Some(&format!(":{gmt5}")), &tokyo)),
            (-18_000, None)
        );
        assert_eq!(offset(from(Some(&gmt5), &tokyo)), (-18_000, None));
        assert_eq!(offset(from(Some(""), &tokyo)), (0, None));
        assert_eq!(offset(from(Some(":"), &tokyo)), (0, None));
        // A rule.
        assert_eq!(offset(from(Some("JST-9"), &missing)), (32_400, None));
        // What cannot be read: one warning, UTC.
        let (z, w) = from(Some(":/no/such/zone"), &tokyo);
        assert_eq!(z, Zone::utc());
        let w = w.unwrap();
        assert!(
            w.starts_with("time zone /no/such/zone: cannot open: "),
            "{w}"
        );
        assert!(w.ends_with("; reading local-time stamps as UTC"), "{w}");
        let (_, w) = from(Some("../../etc/passwd"), &tokyo);
        assert_eq!(
            w.unwrap(),
            "time zone TZ=../../etc/passwd: neither a zone file nor a rule; reading local-time stamps as UTC"
        );
        let not_tzif = dir.join("..").join("SOURCES.md");
        let (z, w) = from(None, &not_tzif);
        assert_eq!(z, Zone::utc());
        assert!(w.unwrap().contains(": not a TZif file;"));
    }
}
