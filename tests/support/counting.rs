//! A global allocator that counts allocations per thread, only while that
//! thread has counting on, so parallel tests and the harness don't disturb
//! a count. Shared by the allocation test binaries, each of which installs
//! it with `#[global_allocator]`.
#![allow(dead_code)] // each test binary uses its own part

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

pub struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
    static EXCLUDED: Cell<bool> = const { Cell::new(false) };
}

/// Process-wide counting: every thread but the excluded ones.
static PROCESS: AtomicBool = AtomicBool::new(false);
static PROCESS_ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

fn note() {
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    }
    if PROCESS.load(Ordering::Relaxed) && !EXCLUDED.try_with(Cell::get).unwrap_or(true) {
        PROCESS_ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

/// Leaves this thread (a test's client, say) out of process-wide counts.
pub fn exclude_this_thread() {
    EXCLUDED.with(|e| e.set(true));
}

/// Allocations by every thread but the excluded ones while `f` runs.
pub fn count_process(f: impl FnOnce()) -> usize {
    let before = PROCESS_ALLOCATIONS.load(Ordering::Relaxed);
    PROCESS.store(true, Ordering::Relaxed);
    f();
    PROCESS.store(false, Ordering::Relaxed);
    PROCESS_ALLOCATIONS.load(Ordering::Relaxed) - before
}

/// Turns counting on or off for this thread.
pub fn counting(on: bool) {
    COUNTING.with(|c| c.set(on));
}

/// This thread's count so far, reset to 0.
pub fn taken() -> usize {
    ALLOCATIONS.with(|n| n.replace(0))
}

/// This thread's count so far.
pub fn so_far() -> usize {
    ALLOCATIONS.with(Cell::get)
}

/// Heap allocations this thread made while running `f`.
pub fn count(f: impl FnOnce()) -> usize {
    taken();
    counting(true);
    f();
    counting(false);
    taken()
}

/// Guards an allocation test against a counter that never moves: one
/// allocation counts as one, and `grows`, which has to grow a buffer,
/// counts as some.
pub fn assert_the_counter_counts(grows: impl FnOnce()) {
    let n = count(|| {
        let v: Vec<u8> = Vec::with_capacity(std::hint::black_box(64));
        drop(std::hint::black_box(v));
    });
    assert_eq!(n, 1);
    assert!(count(grows) > 0);
}

#[allow(unsafe_code)] // a global allocator is an unsafe trait's impl
// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: the caller's contract is passed through.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed through.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: the caller's contract is passed through.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
