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

use super::ffi::Library;
use super::gpm::GpmSlot;
use super::read::{PcieCounter, read_gpu};
use crate::config::Collectors;
use crate::snapshot::{Gpu, Timings};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::Instant;

enum Ask {
    Read {
        lib: Arc<Library>,
        on: Collectors,
    },
    /// The session ended: drop what was taken with its library.
    Forget,
}

/// One finished read.
pub(super) struct Read {
    /// The reader's serial: a read of a reader since replaced is stale.
    serial: u64,
    pub(super) index: u32,
    pub(super) gpu: Gpu,
    pub(super) timings: Timings,
    pub(super) sentinels: Vec<&'static str>,
}

struct Reader {
    serial: u64,
    ask: Sender<Ask>,
    /// A read was asked for and has not ended.
    out: bool,
    /// The last read that ended, and when.
    last: Option<(Instant, Gpu)>,
}

pub(super) struct Readers {
    readers: Vec<Reader>,
    serials: u64,
    done: Sender<Read>,
    reads: Receiver<Read>,
}

impl Default for Readers {
    fn default() -> Readers {
        let (done, reads) = channel();
        Readers {
            readers: Vec::new(),
            serials: 0,
            done,
            reads,
        }
    }
}

impl Readers {
    /// Reads GPUs `0..count` in parallel, waiting for them until
    /// `deadline`: by index, the reads that ended, `None` for the GPUs
    /// late. A reader that cannot be started leaves its GPU late.
    pub(super) fn read(
        &mut self,
        count: u32,
        lib: &Arc<Library>,
        on: Collectors,
        deadline: Instant,
    ) -> Vec<Option<Read>> {
        // Readers past the count end once their read does.
        self.readers.truncate(count as usize);
        while self.readers.len() < count as usize {
            let index = self.readers.len() as u32;
            let serial = self.serials;
            self.serials += 1;
            let (ask, asks) = channel();
            let done = self.done.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("nvml-gpu{index}"))
                .spawn(move || run(serial, index, &asks, &done));
            if let Err(e) = spawned {
                log::warn!("source nvml: GPU {index}: no reader thread: {e}");
            }
            self.readers.push(Reader {
                serial,
                ask,
                out: false,
                last: None,
            });
        }
        let mut fresh: Vec<Option<Read>> = (0..count).map(|_| None).collect();
        for r in &mut self.readers {
            if !r.out {
                let lib = lib.clone();
                r.out = r.ask.send(Ask::Read { lib, on }).is_ok();
            }
        }
        while self.readers.iter().any(|r| r.out) {
            let wait = deadline.saturating_duration_since(Instant::now());
            let read = match self.reads.recv_timeout(wait) {
                Ok(read) => read,
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            };
            let Some(r) = self.readers.get_mut(read.index as usize) else {
                continue;
            };
            if r.serial != read.serial {
                continue;
            }
            r.out = false;
            r.last = Some((Instant::now(), read.gpu.clone()));
            let i = read.index as usize;
            fresh[i] = Some(read);
        }
        fresh
    }

    /// The last read of GPU `index` that ended, and when.
    pub(super) fn last(&self, index: u32) -> Option<&(Instant, Gpu)> {
        self.readers.get(index as usize)?.last.as_ref()
    }

    /// The session ended: every reader lets go of its samples, once its
    /// read out (if any) ends.
    pub(super) fn forget(&mut self) {
        for r in &self.readers {
            let _ = r.ask.send(Ask::Forget);
        }
    }
}

/// A reader thread: reads its GPU on each ask until the collection side
/// is gone.
fn run(serial: u64, index: u32, asks: &Receiver<Ask>, done: &Sender<Read>) {
    let mut pcie: HashMap<String, PcieCounter> = HashMap::new();
    let mut gpm: HashMap<String, GpmSlot> = HashMap::new();
    for ask in asks {
        let (lib, on) = match ask {
            Ask::Read { lib, on } => (lib, on),
            Ask::Forget => {
                gpm.clear();
                continue;
            }
        };
        let mut timings = Timings::default();
        let mut sentinels = Vec::new();
        let gpu = read_gpu(
            index,
            lib.device(index),
            &lib,
            on,
            &mut pcie,
            &mut gpm,
            &mut timings,
            &mut sentinels,
        );
        let read = Read {
            serial,
            index,
            gpu,
            timings,
            sentinels,
        };
        if done.send(read).is_err() {
            return;
        }
    }
}
