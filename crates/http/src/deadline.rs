//! Connection deadlines (header, idle, write), kept off async-io's reactor.
//!
//! While any `async_io::Timer` is pending, every reactor turn allocates
//! (it splits its timer map to find the due ones), and an idle keep-alive
//! connection would keep one pending all the time. So these deadlines live
//! here instead: one thread sleeps until the earliest and wakes the tasks
//! that are due. Registering one is a lock and an in-place update, with no
//! allocation once the table has grown to the number of connections.
//!
//! A sleep dropped before its deadline leaves it in the table: its
//! owner's next sleep replaces it in place, so a request costs one lock
//! here, not two; at worst the owner is woken once for nothing (and polls
//! again). An owner that ends forgets its deadline ([`Deadlines::forget`]):
//! the table holds one entry per owner that lives.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

struct Entry {
    key: u64,
    at: Instant,
    waker: Waker,
}

#[derive(Default)]
struct Table {
    entries: Vec<Entry>,
    /// When the thread will next look, if it sleeps on a deadline.
    next_look: Option<Instant>,
}

#[derive(Default)]
pub struct Deadlines {
    table: Mutex<Table>,
    changed: Condvar,
}

impl Deadlines {
    /// A table and the thread that keeps it; the thread ends a minute
    /// after the last owner drops the table.
    pub fn start(capacity: usize) -> Arc<Deadlines> {
        let d = Arc::new(Deadlines::default());
        d.lock().entries.reserve(capacity);
        let keeper = d.clone();
        let spawned = std::thread::Builder::new()
            .name("deadlines".into())
            .spawn(move || keeper.run());
        if let Err(e) = spawned {
            // Without the thread, deadlines never fire; connections still
            // end when their clients close them.
            log::error!("cannot start the deadline thread: {e}");
        }
        d
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn run(self: Arc<Deadlines>) {
        let mut t = self.lock();
        loop {
            let now = Instant::now();
            let mut i = 0;
            while i < t.entries.len() {
                if t.entries[i].at <= now {
                    t.entries.swap_remove(i).waker.wake();
                } else {
                    i += 1;
                }
            }
            let next = t.entries.iter().map(|e| e.at).min();
            t.next_look = next;
            t = match next {
                Some(at) => {
                    let wait = at.saturating_duration_since(now);
                    self.changed
                        .wait_timeout(t, wait)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None if Arc::strong_count(&self) == 1 => return,
                None => {
                    let idle = Duration::from_secs(60);
                    self.changed
                        .wait_timeout(t, idle)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }

    /// Wakes `waker` at `at`, replacing what `key` had registered.
    fn register(&self, key: u64, at: Instant, waker: &Waker) {
        let mut t = self.lock();
        match t.entries.iter_mut().find(|e| e.key == key) {
            Some(e) => {
                e.at = at;
                if !e.waker.will_wake(waker) {
                    e.waker = waker.clone();
                }
            }
            None => t.entries.push(Entry {
                key,
                at,
                waker: waker.clone(),
            }),
        }
        // Tell the thread only when it would otherwise look too late.
        if t.next_look.is_none_or(|look| at < look) {
            t.next_look = Some(at);
            self.changed.notify_one();
        }
    }

    /// Drops what `key` registered: its owner has ended.
    pub fn forget(&self, key: u64) {
        let mut t = self.lock();
        if let Some(i) = t.entries.iter().position(|e| e.key == key) {
            t.entries.swap_remove(i);
        }
    }

    /// A future that is ready at `at`. `key` names its owner (a
    /// connection): an owner has one deadline at a time.
    pub fn sleep(&self, key: u64, at: Instant) -> Sleep<'_> {
        Sleep {
            deadlines: self,
            key,
            at,
            registered: false,
        }
    }

    /// Deadlines waiting now.
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        self.lock().entries.len()
    }
}

pub struct Sleep<'a> {
    deadlines: &'a Deadlines,
    key: u64,
    at: Instant,
    registered: bool,
}

impl Future for Sleep<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // The first poll reads no clock: a deadline already past is
        // woken by the thread at once (the callers' lie ahead: a clock
        // read per request is saved).
        if self.registered && Instant::now() >= self.at {
            return Poll::Ready(());
        }
        self.deadlines.register(self.key, self.at, cx.waker());
        self.registered = true;
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_end_on_time_and_owners_forget_theirs() {
        let d = Deadlines::start(4);
        let t = Instant::now();
        smol::block_on(d.sleep(1, t + Duration::from_millis(100)));
        let took = t.elapsed();
        assert!(
            took >= Duration::from_millis(100) && took < Duration::from_secs(2),
            "{took:?}"
        );
        assert_eq!(d.pending(), 0);
        // A sleep dropped before its deadline stays registered until its
        // owner forgets it, and the owner's next sleep takes its place.
        let raced = smol::block_on(smol::future::or(
            async {
                d.sleep(2, Instant::now() + Duration::from_secs(3600)).await;
                "sleep"
            },
            async {
                d.sleep(3, Instant::now() + Duration::from_millis(20)).await;
                "short"
            },
        ));
        assert_eq!(raced, "short");
        assert_eq!(d.pending(), 1, "the dropped sleep's deadline");
        let again = smol::block_on(smol::future::or(
            async {
                d.sleep(2, Instant::now() + Duration::from_secs(7200)).await;
                "sleep"
            },
            async { "now" },
        ));
        assert_eq!((again, d.pending()), ("now", 1), "in place of the last");
        d.forget(2);
        assert_eq!(d.pending(), 0);
    }
}
