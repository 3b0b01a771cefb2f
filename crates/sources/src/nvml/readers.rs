//! A reader thread per GPU: a collection asks every idle one to read its
//! GPU and waits for the answers until its deadline, so that one GPU whose
//! calls are slow holds back its own readings and no one else's. A GPU
//! whose read is still out when the deadline comes is late: it is served
//! with its last finished read, and counted; it is asked again only once
//! that read ends, so a GPU never has more than one read out. A read out
//! holds its session's library loaded until it ends.
//!
//! Each thread keeps its GPU's state between reads: the PCIe counter
//! (across sessions) and the GPM samples (of the session that took them,
//! let go when it ends).
//!
//! The threads and the collection meet on one board under a mutex (a
//! slot per reader, the reads that ended), not on channels: std's
//! channels cost 21 KB of binary for their two message types.

use super::ffi::Library;
use super::gpm::GpmSlot;
use super::read::{Ask, Notes, PcieCounter, read_gpu};
use model::dcgm::prof::GpmIds;
use model::{Gpu, Timings};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// One finished read, or a reader's first word: its GPU's identity.
pub(super) struct Read {
    /// The reader's serial: a read of a reader since replaced is stale.
    serial: u64,
    pub(super) index: u32,
    pub(super) gpu: Gpu,
    pub(super) timings: Timings,
    pub(super) sentinels: Vec<&'static str>,
    /// The profiling fields' metrics it does not give.
    pub(super) refused: GpmIds,
    /// Only the GPU's identity, before its first read: what a GPU whose
    /// first read hangs is served as, late, until one ends.
    identity: bool,
}

/// What one reader thread is asked, by index on the board.
struct Slot {
    /// The thread this slot belongs to; another one here ends it.
    serial: u64,
    /// A read asked for and not yet taken.
    read: Option<(Arc<Library>, Ask)>,
    /// The session ended: drop what was taken with its library, after
    /// the read out (if any).
    forget: bool,
}

#[derive(Default)]
struct Board {
    /// A thread whose slot is gone or taken by another serial ends.
    slots: Vec<Slot>,
    /// Reads that ended and the collection has not taken.
    done: Vec<Read>,
}

/// The board; the threads wait on the first condvar, the collection on
/// the second.
type Cell = Arc<(Mutex<Board>, Condvar, Condvar)>;

fn lock(cell: &Cell) -> MutexGuard<'_, Board> {
    cell.0.lock().unwrap_or_else(|e| e.into_inner())
}

struct Reader {
    serial: u64,
    /// A read was asked for and has not ended.
    out: bool,
    /// The last read that ended, and when.
    last: Option<(Instant, Gpu)>,
}

#[derive(Default)]
pub(super) struct Readers {
    readers: Vec<Reader>,
    serials: u64,
    board: Cell,
}

impl Readers {
    /// Reads GPUs `0..count` in parallel, waiting for them until
    /// `deadline`: by index, the reads that ended, `None` for the GPUs
    /// late. A reader that cannot be started leaves its GPU, and those
    /// after it, late without a wait, and is tried again next time.
    pub(super) fn read(
        &mut self,
        count: u32,
        lib: &Arc<Library>,
        ask: Ask,
        deadline: Instant,
    ) -> Vec<Option<Read>> {
        let count = count as usize;
        let mut board = lock(&self.board);
        // Readers past the count end once their read does.
        self.readers.truncate(count);
        board.slots.truncate(count);
        while self.readers.len() < count {
            let index = self.readers.len() as u32;
            let serial = self.serials;
            self.serials += 1;
            let cell = self.board.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("nvml-gpu{index}"))
                .spawn(move || run(serial, index, &cell));
            if let Err(e) = spawned {
                // Late until a later collection starts it.
                log::warn!("source nvml: GPU {index}: no reader thread: {e}");
                break;
            }
            board.slots.push(Slot {
                serial,
                read: None,
                forget: false,
            });
            self.readers.push(Reader {
                serial,
                out: false,
                last: None,
            });
        }
        for (r, slot) in self.readers.iter_mut().zip(&mut board.slots) {
            if !r.out {
                slot.read = Some((lib.clone(), ask));
                r.out = true;
            }
        }
        self.board.1.notify_all();
        let mut fresh: Vec<Option<Read>> = (0..count).map(|_| None).collect();
        loop {
            for read in board.done.drain(..) {
                let i = read.index as usize;
                let Some(r) = self.readers.get_mut(i) else {
                    continue;
                };
                if r.serial != read.serial {
                    continue;
                }
                if read.identity {
                    r.last.get_or_insert((Instant::now(), read.gpu));
                } else {
                    r.out = false;
                    r.last = Some((Instant::now(), read.gpu.clone()));
                    fresh[i] = Some(read);
                }
            }
            let wait = deadline.saturating_duration_since(Instant::now());
            if wait.is_zero() || !self.readers.iter().any(|r| r.out) {
                return fresh;
            }
            board = self
                .board
                .2
                .wait_timeout(board, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The last read of GPU `index` that ended, and when; before any has,
    /// its identity, if its reader could tell it.
    pub(super) fn last(&self, index: u32) -> Option<&(Instant, Gpu)> {
        self.readers.get(index as usize)?.last.as_ref()
    }

    /// The session ended: every reader lets go of its samples, once its
    /// read out (if any) ends.
    pub(super) fn forget(&mut self) {
        let mut board = lock(&self.board);
        for (r, slot) in self.readers.iter_mut().zip(&mut board.slots) {
            // A read not yet taken is of the session that ended.
            if slot.read.take().is_some() {
                r.out = false;
            }
            slot.forget = true;
        }
        self.board.1.notify_all();
    }
}

impl Drop for Readers {
    /// Every thread ends, once its read out (if any) does.
    fn drop(&mut self) {
        lock(&self.board).slots.clear();
        self.board.1.notify_all();
    }
}

/// What a reader thread does next.
enum Next {
    Read(Arc<Library>, Ask),
    Forget,
    End,
}

/// Hands in the read that ended, if any, and waits for this reader's next
/// ask. Both under one lock, so that a session's end comes before any read
/// of the next.
fn next(serial: u64, index: u32, cell: &Cell, ended: Option<Read>) -> Next {
    let mut board = lock(cell);
    if let Some(read) = ended {
        board.done.push(read);
        cell.2.notify_one();
    }
    loop {
        let Some(slot) = board.slots.get_mut(index as usize) else {
            return Next::End;
        };
        if slot.serial != serial {
            return Next::End;
        }
        if slot.forget {
            slot.forget = false;
            return Next::Forget;
        }
        if let Some((lib, ask)) = slot.read.take() {
            return Next::Read(lib, ask);
        }
        board = cell.1.wait(board).unwrap_or_else(|e| e.into_inner());
    }
}

/// A reader thread: reads its GPU on each ask until its slot is gone.
/// Before its first read it hands in the GPU's identity, so that a GPU
/// whose first read hangs is served (late) rather than missing.
fn run(serial: u64, index: u32, cell: &Cell) {
    let mut pcie: HashMap<String, PcieCounter> = HashMap::new();
    let mut gpm: HashMap<String, GpmSlot> = HashMap::new();
    let mut ended = None;
    let mut named = false;
    loop {
        let (lib, ask) = match next(serial, index, cell, ended.take()) {
            Next::Read(lib, ask) => (lib, ask),
            Next::Forget => {
                gpm.clear();
                continue;
            }
            Next::End => return,
        };
        if !std::mem::replace(&mut named, true)
            && let Some(gpu) = identity(index, &lib)
        {
            let mut board = lock(cell);
            board.done.push(Read {
                serial,
                index,
                gpu,
                timings: Timings::default(),
                sentinels: Vec::new(),
                refused: GpmIds::NONE,
                identity: true,
            });
        }
        let mut timings = Timings::default();
        let mut notes = Notes::default();
        let gpu = read_gpu(
            index,
            lib.device(index),
            &lib,
            ask,
            &mut pcie,
            &mut gpm,
            &mut timings,
            &mut notes,
        );
        drop(lib);
        ended = Some(Read {
            serial,
            index,
            gpu,
            timings,
            sentinels: notes.sentinels,
            refused: notes.refused,
            identity: false,
        });
    }
}

/// GPU `index` as its UUID, name and bus id say: up, with no readings.
fn identity(index: u32, lib: &Library) -> Option<Gpu> {
    let d = lib.device(index).ok()?;
    Some(Gpu {
        index,
        up: true,
        uuid: d.uuid().ok()?,
        model: d.name().unwrap_or_default(),
        pci_bus_id: d.pci_bus_id().unwrap_or_default(),
        ..Gpu::default()
    })
}
