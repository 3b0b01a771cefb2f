//! Buffers kept for reuse between connections and requests: at most
//! [`POOL`] of each kind, so a burst of concurrent requests does not stay
//! resident, none above its pool's bound, so one huge response (a status
//! page of a large fleet) does not either, and none held by an idle
//! connection.

use std::cell::RefCell;

/// Buffers kept for reuse beyond this many are freed.
pub const POOL: usize = 16;

/// The largest response buffer kept: a whole scrape of 64 GPUs sealed
/// into TLS records (about 600 KB) is reused; a larger page's buffer is
/// freed once it has gone.
pub const KEEP: usize = 1 << 20;

pub struct Pool {
    kept: RefCell<Vec<Vec<u8>>>,
    /// Makes a buffer when none is kept.
    make: fn() -> Vec<u8>,
    /// Buffers that have grown past this many bytes are freed, not kept.
    bound: usize,
}

impl Pool {
    pub fn new(make: fn() -> Vec<u8>, bound: usize) -> Pool {
        Pool {
            kept: RefCell::new(Vec::with_capacity(POOL)),
            make,
            bound,
        }
    }

    /// A kept buffer (grown by earlier use), or a new one.
    pub fn take(&self) -> Vec<u8> {
        self.kept.borrow_mut().pop().unwrap_or_else(self.make)
    }

    pub fn put(&self, b: Vec<u8>) {
        let mut kept = self.kept.borrow_mut();
        if kept.len() < POOL && b.capacity() <= self.bound {
            kept.push(b);
        }
    }
}

/// Makes `b` hold `n` bytes whose values do not matter (room that is
/// written over): a reused buffer keeps its old bytes rather than zeroing
/// them again on every response.
pub fn room(b: &mut Vec<u8>, n: usize) {
    match b.len() >= n {
        true => b.truncate(n),
        false => b.resize(n, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_a_huge_response_the_pool_holds_no_buffer_above_its_bound() {
        let pool = Pool::new(|| Vec::with_capacity(8 * 1024), KEEP);
        let (mut huge, mut scrape) = (pool.take(), pool.take());
        huge.resize(5 << 20, b'x'); // a status page of a large fleet
        scrape.resize(600 * 1024, b'x'); // a TLS scrape of 64 GPUs
        let at = scrape.as_ptr();
        pool.put(huge);
        pool.put(scrape);
        let kept = pool.kept.borrow();
        assert_eq!(kept.len(), 1);
        assert!(kept.iter().all(|b| b.capacity() <= KEEP));
        assert_eq!(kept[0].as_ptr(), at, "the scrape's buffer is kept");
        drop(kept);
        // And at most POOL of them, whatever their size.
        for _ in 0..2 * POOL {
            pool.put(Vec::with_capacity(16));
        }
        assert_eq!(pool.kept.borrow().len(), POOL);
    }
}
