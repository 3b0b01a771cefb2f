//! Buffers kept for reuse between connections and requests: at most
//! [`POOL`] of each kind, so a burst of concurrent requests does not stay
//! resident, and none held by an idle connection.

use std::cell::RefCell;

/// Buffers kept for reuse beyond this many are freed.
pub const POOL: usize = 16;

pub struct Pool {
    kept: RefCell<Vec<Vec<u8>>>,
    /// Makes a buffer when none is kept.
    make: fn() -> Vec<u8>,
}

impl Pool {
    pub fn new(make: fn() -> Vec<u8>) -> Pool {
        Pool {
            kept: RefCell::new(Vec::with_capacity(POOL)),
            make,
        }
    }

    /// A kept buffer (grown by earlier use), or a new one.
    pub fn take(&self) -> Vec<u8> {
        self.kept.borrow_mut().pop().unwrap_or_else(self.make)
    }

    pub fn put(&self, b: Vec<u8>) {
        let mut kept = self.kept.borrow_mut();
        if kept.len() < POOL {
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
