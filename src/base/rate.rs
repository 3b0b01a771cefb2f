//! Rate limits: a token bucket, as exporter-toolkit's `rate_limit` and
//! basic auth's bcrypt budget use it.

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// golang.org/x/time/rate's token bucket, as exporter-toolkit's
/// `rate_limit` uses it: one token per `interval`, at most `burst`,
/// starting full. No allocation.
#[derive(Debug)]
pub struct TokenBucket {
    interval: Duration,
    burst: u32,
    /// Tokens, and when they were counted.
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    pub fn new(interval: Duration, burst: u32) -> TokenBucket {
        TokenBucket::new_at(interval, burst, Instant::now())
    }

    pub fn new_at(interval: Duration, burst: u32, now: Instant) -> TokenBucket {
        TokenBucket {
            interval,
            burst,
            state: Mutex::new((f64::from(burst), now)),
        }
    }

    /// Takes a token if there is one at `now`.
    pub fn allow_at(&self, now: Instant) -> bool {
        let mut state = lock(&self.state);
        let (tokens, last) = *state;
        let elapsed = now.saturating_duration_since(last);
        let refill = if self.interval.is_zero() {
            f64::INFINITY
        } else {
            elapsed.as_secs_f64() / self.interval.as_secs_f64()
        };
        let tokens = (tokens + refill).min(f64::from(self.burst));
        let allowed = tokens >= 1.0;
        *state = (tokens - f64::from(u8::from(allowed)), now.max(last));
        allowed
    }

    pub fn allow(&self) -> bool {
        self.allow_at(Instant::now())
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
}
