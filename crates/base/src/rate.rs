//! Rate limits: a token bucket, as exporter-toolkit's `rate_limit` and
//! basic auth's bcrypt budget use it, and one per source address.

use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One token per `interval`, at most `burst`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    pub interval: Duration,
    pub burst: u32,
}

/// A bucket's tokens and when they were counted, without a lock: for
/// [`TokenBucket`] and the rows of [`PerSource`].
#[derive(Clone, Copy, Debug)]
struct Tokens {
    count: f64,
    at: Instant,
}

impl Tokens {
    fn full(rate: Rate, now: Instant) -> Tokens {
        Tokens {
            count: f64::from(rate.burst),
            at: now,
        }
    }

    /// Takes a token if there is one at `now`.
    fn take(&mut self, rate: Rate, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at);
        let refill = if rate.interval.is_zero() {
            f64::INFINITY
        } else {
            elapsed.as_secs_f64() / rate.interval.as_secs_f64()
        };
        let count = (self.count + refill).min(f64::from(rate.burst));
        let allowed = count >= 1.0;
        *self = Tokens {
            count: count - f64::from(u8::from(allowed)),
            at: now.max(self.at),
        };
        allowed
    }
}

/// golang.org/x/time/rate's token bucket, as exporter-toolkit's
/// `rate_limit` uses it: one token per `interval`, at most `burst`,
/// starting full. No allocation.
#[derive(Debug)]
pub struct TokenBucket {
    rate: Rate,
    state: Mutex<Tokens>,
}

impl TokenBucket {
    pub fn new(interval: Duration, burst: u32) -> TokenBucket {
        TokenBucket::new_at(interval, burst, Instant::now())
    }

    pub fn new_at(interval: Duration, burst: u32, now: Instant) -> TokenBucket {
        let rate = Rate { interval, burst };
        TokenBucket {
            rate,
            state: Mutex::new(Tokens::full(rate, now)),
        }
    }

    /// Takes a token if there is one at `now`.
    pub fn allow_at(&self, now: Instant) -> bool {
        lock(&self.state).take(self.rate, now)
    }

    pub fn allow(&self) -> bool {
        self.allow_at(Instant::now())
    }
}

/// A client's address as the limit sees it: an IPv4 address, or an IPv6
/// /64 (one host's usual share; an IPv4-mapped address is its IPv4).
pub fn source_of(ip: IpAddr) -> u64 {
    match ip {
        IpAddr::V4(v4) => u64::from(v4.to_bits()),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => u64::from(v4.to_bits()),
            None => (v6.to_bits() >> 64) as u64 | 1 << 63,
        },
    }
}

/// A token bucket per source, in a table of at most `rows`: beyond it the
/// source used least recently gives up its row (and a returning one starts
/// full, which the shared bucket behind it still limits). Allocates only
/// when made.
#[derive(Debug)]
pub struct PerSource {
    rate: Rate,
    rows: usize,
    table: Mutex<Vec<(u64, Tokens)>>,
}

impl PerSource {
    pub fn new(rate: Rate, rows: usize) -> PerSource {
        PerSource {
            rate,
            rows: rows.max(1),
            table: Mutex::new(Vec::with_capacity(rows.max(1))),
        }
    }

    /// Takes a token from `source`'s bucket if it has one at `now`.
    pub fn allow_at(&self, source: u64, now: Instant) -> bool {
        let mut table = lock(&self.table);
        if let Some((_, t)) = table.iter_mut().find(|(s, _)| *s == source) {
            return t.take(self.rate, now);
        }
        let mut fresh = Tokens::full(self.rate, now);
        let allowed = fresh.take(self.rate, now);
        if table.len() < self.rows {
            table.push((source, fresh));
        } else if let Some(row) = table.iter_mut().min_by_key(|(_, t)| t.at) {
            *row = (source, fresh);
        }
        allowed
    }

    pub fn allow(&self, source: u64) -> bool {
        self.allow_at(source, Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_bucket_is_go_rate() {
        let t0 = Instant::now();
        let b = TokenBucket::new_at(Duration::from_millis(100), 2, t0);
        assert!(b.allow_at(t0));
        assert!(b.allow_at(t0));
        assert!(!b.allow_at(t0));
        assert!(!b.allow_at(t0 + Duration::from_millis(50)));
        assert!(b.allow_at(t0 + Duration::from_millis(100)));
        assert!(!b.allow_at(t0 + Duration::from_millis(120)));
        // Idle time refills up to the burst, no further.
        let later = t0 + Duration::from_secs(10);
        assert!(b.allow_at(later) && b.allow_at(later) && !b.allow_at(later));
    }

    #[test]
    fn each_source_has_its_own_bucket_in_a_bounded_table() {
        let t0 = Instant::now();
        let rate = Rate {
            interval: Duration::from_secs(1),
            burst: 2,
        };
        let p = PerSource::new(rate, 2);
        let (a, b, c) = (1, 2, 3);
        assert!(p.allow_at(a, t0) && p.allow_at(a, t0));
        assert!(!p.allow_at(a, t0), "a's burst is spent");
        // b is not a: its bucket is full.
        assert!(p.allow_at(b, t0));
        // A third source takes the row used least recently (a's, at t0;
        // b's is later), and a, coming back, starts full.
        let t1 = t0 + Duration::from_millis(10);
        assert!(p.allow_at(b, t1));
        assert!(p.allow_at(c, t1));
        assert_eq!(p.table.lock().unwrap().len(), 2);
        assert!(!p.allow_at(b, t1), "b kept its row and its spent tokens");
    }

    #[test]
    fn a_source_is_an_ipv4_address_or_an_ipv6_64() {
        let ip = |s: &str| source_of(s.parse().unwrap());
        assert_eq!(ip("127.0.0.1"), ip("::ffff:127.0.0.1"));
        assert_ne!(ip("127.0.0.1"), ip("127.0.0.2"));
        assert_eq!(ip("2001:db8::1"), ip("2001:db8::ffff:1"));
        assert_ne!(ip("2001:db8::1"), ip("2001:db8:0:1::1"));
        // No IPv6 /64 reads as an IPv4 address.
        assert_ne!(ip("::7f00:1"), ip("127.0.0.1"));
    }
}
