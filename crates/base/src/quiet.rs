//! Quiet logs: a failure that repeats every collection is logged when it
//! starts, when its message changes, and at most once a minute while it
//! lasts; its end once. A note about one thing (a GPU's reading out of
//! range) is logged once per key.

use std::time::{Duration, Instant};

/// While a failure lasts, it is logged again at most this often.
pub const REPEAT: Duration = Duration::from_secs(60);

/// What [`Repeating::fail`] decided: log the line or not, and how many
/// repeats it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Log it: the failure is new, or its message changed.
    New,
    /// Log it again: a minute has passed; `n` repeats since the last line.
    Again(u64),
    /// Stay quiet.
    Quiet,
}

/// One repeating failure, e.g. "collection failed".
#[derive(Debug, Default)]
pub struct Repeating {
    /// The message last logged, when it was, and the repeats since.
    failing: Option<(String, Instant, u64)>,
}

impl Repeating {
    pub fn new() -> Repeating {
        Repeating::default()
    }

    /// A failure with `message` happened at `now`: whether to log it.
    pub fn fail_at(&mut self, message: &str, now: Instant) -> Verdict {
        match &mut self.failing {
            Some((last, at, n)) if last == message => {
                *n += 1;
                if now.saturating_duration_since(*at) >= REPEAT {
                    let repeats = *n;
                    *at = now;
                    *n = 0;
                    Verdict::Again(repeats)
                } else {
                    Verdict::Quiet
                }
            }
            _ => {
                self.failing = Some((message.to_string(), now, 0));
                Verdict::New
            }
        }
    }

    /// Logs `what: message` at warn level as [`Repeating::fail_at`] decides.
    pub fn fail(&mut self, what: &str, message: &str) {
        match self.fail_at(message, Instant::now()) {
            Verdict::New => log::warn!("{what}: {message}"),
            Verdict::Again(n) => {
                log::warn!("{what}: {message} (still; {n} times in the last minute or more)")
            }
            Verdict::Quiet => {}
        }
    }

    /// The failure is over: true once, for the first success after one.
    pub fn recover(&mut self) -> bool {
        self.failing.take().is_some()
    }

    /// Logs `what: recovered` at info level once, after a failure.
    pub fn ok(&mut self, what: &str) {
        if self.recover() {
            log::info!("{what}: recovered");
        }
    }
}

/// Keys already noted, so that each is logged once. Few: one per GPU and
/// reading at most, so a list.
#[derive(Debug)]
pub struct Noted<K>(Vec<K>);

impl<K> Default for Noted<K> {
    fn default() -> Noted<K> {
        Noted(Vec::new())
    }
}

impl<K: PartialEq> Noted<K> {
    /// True the first time `key` is seen.
    pub fn first(&mut self, key: K) -> bool {
        if self.0.contains(&key) {
            return false;
        }
        self.0.push(key);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeating_failure_is_logged_on_change_and_once_a_minute() {
        let mut r = Repeating::new();
        let t = Instant::now();
        assert_eq!(r.fail_at("a", t), Verdict::New);
        for s in 1..60 {
            assert_eq!(r.fail_at("a", t + Duration::from_secs(s)), Verdict::Quiet);
        }
        assert_eq!(r.fail_at("a", t + REPEAT), Verdict::Again(60));
        assert_eq!(
            r.fail_at("a", t + REPEAT + Duration::from_secs(1)),
            Verdict::Quiet
        );
        // A new message is logged at once.
        assert_eq!(
            r.fail_at("b", t + REPEAT + Duration::from_secs(2)),
            Verdict::New
        );
        assert!(r.recover());
        assert!(!r.recover());
        assert_eq!(r.fail_at("b", t + REPEAT * 2), Verdict::New);
    }

    #[test]
    fn noted_keys_once() {
        let mut n = Noted::default();
        assert!(n.first(("GPU-a", "temperature")));
        assert!(!n.first(("GPU-a", "temperature")));
        assert!(n.first(("GPU-b", "temperature")));
    }
}
