//! What every connection shares: the limits, the
//! registry of open connections and what each is doing, the response
//! slots, and pools of buffers, so that an idle keep-alive connection
//! holds no buffer at all.
//!
//! The policies (docs/http-and-security.md says why):
//!
//! - **Connections.** At most `max_connections` are admitted, and the
//!   accept loop holds one more while it makes room, so the server never
//!   holds more than `max_connections + 1` sockets. A connection waiting
//!   at the cap takes the place of the oldest evictable one: a connection
//!   idle between requests is closed, one whose request head is incomplete
//!   (or that has sent nothing yet) gets 503 with `Retry-After` and is
//!   closed (over TLS, once its handshake is done, sealed by its task).
//!   Among these, the one that has sent nothing for longest goes first; a
//!   TLS handshake that makes progress is not silent. A connection whose
//!   head is complete is answered, never evicted, and one whose request
//!   bytes are waiting unread counts as such. With nothing to evict the
//!   loop stops accepting (the kernel's queue holds the newcomers) until a
//!   connection closes or becomes evictable (a silent new one by its own
//!   timer), and every response closes its connection until the queue has
//!   been served, so keep-alive clients take turns. The probe listener
//!   has a cap of its own ([`Lane::cap`]).
//! - **Response slots.** At most `max_requests` responses are in flight.
//!   A scrape's slot holds its head, the exporter's own families and a
//!   reference to the snapshot's families, shared by every scrape of it;
//!   other responses hold their whole body. A request that finds every
//!   slot taken takes that of a response holding a superseded snapshot,
//!   else of the one whose client has read nothing for longest, whose
//!   connection is closed: a client that does not read never keeps one
//!   that does from its answer. When a new snapshot is first served, a
//!   response still holding an older one whose client has read nothing
//!   for a second is closed, so clients that never read pin no old body.

use crate::Limits;
use crate::counts::Counts;
use crate::counts::Evicted;
use crate::deadline::Deadlines;
use crate::guard::Guard;
use crate::gzip::Compressor;
use crate::handler::Handler;
use crate::pool::Pool;
use crate::reply::Reply;
use crate::room::{CapLog, FULL, Lane, Room, Transport};
use async_io::Async;
use smol::future::FutureExt;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a connection is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Accepted; nothing read yet.
    New,
    /// Part of a request head read.
    Head,
    /// A whole head read: its response is being written, in a slot.
    Answering,
    /// Kept alive, between requests.
    Idle,
    /// Evicted; its task has not closed it yet.
    Closing,
}

/// A connection's place in the registry, and its deadline key.
#[derive(Clone, Copy, Debug)]
pub struct Key {
    index: usize,
    pub id: u64,
}

struct Entry {
    id: u64,
    stream: Rc<Async<TcpStream>>,
    transport: Transport,
    /// Evicted over TLS with its head incomplete: its task owes the 503.
    owed: bool,
    lane: Lane,
    phase: Phase,
    /// When the phase began, or (before a head is complete) when the
    /// client last sent handshake bytes; while answering, when the client
    /// last read.
    since: Instant,
    /// While answering: the response, and how much of it has gone. The
    /// server holds it, not the task, so that an eviction frees it at once.
    reply: Reply,
}

impl Entry {
    /// Its response holds the families of a snapshot older than `than`.
    fn holds_older(&self, than: Option<Instant>) -> bool {
        self.phase == Phase::Answering && self.reply.of().is_some_and(|of| Some(of) < than)
    }
}

/// How a write of a connection's response went.
#[derive(Debug, PartialEq)]
pub enum Sent {
    /// All of it: the connection is between requests.
    All,
    /// Some of it; the rest waits for the socket.
    Some,
    /// Nothing: the socket's buffer is full.
    Blocked,
    /// The write failed, or the connection was evicted.
    Failed,
}

/// Handshakes whose crypto may run in one turn of the HTTP thread.
#[cfg(feature = "tls")]
pub const HANDSHAKES: usize = 4;

/// A new head buffer's size; it doubles up to `MAX_HEAD` for a head that
/// needs more, and most never do.
const INBUF: usize = 1024;

/// A new response buffer's size: a scrape's head and what it writes for
/// itself fit (about 3 KB), so it need not grow by doubling.
const OUTBUF: usize = 8 * 1024;

/// The oldest evictable connections looked at to make room; one with a
/// request waiting unread is passed over.
const LOOK: usize = 8;

/// A new connection that has sent nothing counts as an incomplete head
/// once it has been silent this long: under load, a client's first bytes
/// can trail its connection by milliseconds.
const SILENT: Duration = Duration::from_secs(1);

pub struct Server {
    /// What requests are answered with.
    pub handler: Box<dyn Handler>,
    pub limits: Limits,
    /// What the server counts of itself, for the handler to show.
    pub counts: Counts,
    /// The connections' header, idle and write deadlines.
    pub deadlines: Arc<Deadlines>,
    /// Open connections by `Key::index`; `None` is a free place.
    conns: RefCell<Vec<Option<Entry>>>,
    free: RefCell<Vec<usize>>,
    /// Registered connections per lane, the evicted but not yet closed
    /// included.
    entries: [Cell<usize>; 2],
    /// Registered connections per lane not evicted: at most its cap.
    admitted: [Cell<usize>; 2],
    /// Connections answering: the response slots taken.
    answering: Cell<usize>,
    /// The accept loop waits at the cap: responses close their connections.
    pub(super) crowded: Cell<bool>,
    /// The accept loop, waiting for room.
    pub(super) room: Room,
    next_id: Cell<u64>,
    /// Request head buffers, zeroed once when first made.
    pub inbufs: Pool,
    /// Response buffers, grown by earlier responses.
    pub outbufs: Pool,
    /// TLS ciphertext buffers (`tls.rs` sizes them).
    #[cfg(feature = "tls")]
    pub tlsbufs: Pool,
    log: RefCell<CapLog>,
    /// What the web config turns on: TLS, auth, headers.
    pub guard: Guard,
    /// gzip for every response that is asked for it (one at a time: the
    /// thread builds one response at a time).
    pub compressor: RefCell<Compressor>,
    /// The newest shared bytes a response has held.
    newest: Cell<Option<Instant>>,
    /// Handshakes computing at once (see `handshake.rs`).
    #[cfg(feature = "tls")]
    pub handshakes: smol::lock::Semaphore,
}

impl Server {
    /// A server answering with `handler`, within `limits`, as `guard`
    /// (the web config) says.
    pub fn new(handler: Box<dyn Handler>, limits: Limits, guard: Guard) -> Server {
        let reserve = limits.max_connections.min(1024);
        Server {
            deadlines: Deadlines::start(limits.max_connections),
            conns: RefCell::new(Vec::with_capacity(reserve)),
            free: RefCell::new(Vec::with_capacity(reserve)),
            handler,
            limits,
            counts: Counts::new(),
            entries: Default::default(),
            admitted: Default::default(),
            answering: Cell::new(0),
            crowded: Cell::new(false),
            room: Room::default(),
            next_id: Cell::new(0),
            inbufs: Pool::new(|| vec![0; INBUF], crate::request::MAX_HEAD),
            outbufs: Pool::new(|| Vec::with_capacity(OUTBUF), crate::pool::KEEP),
            #[cfg(feature = "tls")]
            tlsbufs: Pool::new(Vec::new, crate::pool::KEEP),
            log: RefCell::new(CapLog::default()),
            guard,
            compressor: RefCell::default(),
            newest: Cell::new(None),
            #[cfg(feature = "tls")]
            handshakes: smol::lock::Semaphore::new(HANDSHAKES),
        }
    }

    /// Responses in flight.
    pub fn in_flight(&self) -> usize {
        self.answering.get()
    }

    /// Bytes the responses in flight hold (their buffers).
    pub fn held(&self) -> usize {
        let conns = self.conns.borrow();
        let answering = conns
            .iter()
            .flatten()
            .filter(|e| e.phase == Phase::Answering);
        answering.map(|e| e.reply.held()).sum()
    }

    /// Whether connections are waiting at the cap: a response then closes
    /// its connection, to let them in.
    pub fn crowded(&self) -> bool {
        self.crowded.get()
    }

    /// Moves connection `key` to `phase` at `now` (evicted: stays closing).
    pub fn set_phase(&self, key: Key, phase: Phase, now: Instant) {
        let mut conns = self.conns.borrow_mut();
        let Some(Some(e)) = conns.get_mut(key.index) else {
            return;
        };
        if e.id != key.id || e.phase == Phase::Closing || e.phase == phase {
            return;
        }
        let answering = self.answering.get();
        match (e.phase, phase) {
            (Phase::Answering, _) => self.answering.set(answering - 1),
            (_, Phase::Answering) => self.answering.set(answering + 1),
            _ => {}
        }
        e.phase = phase;
        e.since = now;
        drop(conns);
        if matches!(phase, Phase::Head | Phase::Idle) {
            // It may be evictable now.
            self.room.wake();
        }
    }

    /// Takes a response slot for connection `key` and hands the server its
    /// response, to send with [`Server::write_some`]. With every slot
    /// taken, one response gives up its slot, its buffer and its
    /// connection: one holding a superseded snapshot's families, else the
    /// one whose client has gone longest without reading. `now`: when.
    pub fn answer(&self, key: Key, reply: Reply, now: Instant) {
        if self.answering.get() >= self.limits.max_requests {
            let newest = self.newest.get();
            let mut conns = self.conns.borrow_mut();
            let stalled = conns
                .iter_mut()
                .flatten()
                .filter(|e| e.phase == Phase::Answering && e.id != key.id)
                .min_by_key(|e| (!e.holds_older(newest), e.since));
            if let Some(e) = stalled {
                self.evict(e);
            }
        }
        self.set_phase(key, Phase::Answering, now);
        match self.conns.borrow_mut().get_mut(key.index) {
            Some(Some(e)) if e.id == key.id && e.phase == Phase::Answering => e.reply = reply,
            _ => self.outbufs.put(reply.into_buffer()),
        }
    }

    /// Snapshot `of` is about to be served, before its families are
    /// rendered: when it is a new one, the responses holding older
    /// families whose client has not read for a second are closed. A
    /// client that reads keeps its body; one that stopped does not make
    /// the render take a second buffer.
    pub fn serving(&self, of: Instant) {
        let newest = self.newest.replace(Some(of));
        if newest.is_some_and(|n| n >= of) {
            self.newest.set(newest);
            return;
        }
        let now = Instant::now();
        let mut conns = self.conns.borrow_mut();
        for e in conns.iter_mut().flatten() {
            if e.holds_older(Some(of)) && now.saturating_duration_since(e.since) >= SILENT {
                self.evict(e);
            }
        }
    }

    /// Closes the responses whose client has taken nothing for `quiet`
    /// since `stopped` (or since it last did, if later): a stop waits for
    /// readers, not for clients that stopped reading.
    pub fn drop_stalled(&self, stopped: Instant, quiet: Duration) {
        let now = Instant::now();
        let mut conns = self.conns.borrow_mut();
        for e in conns.iter_mut().flatten() {
            let since = e.since.max(stopped);
            if e.phase == Phase::Answering && now.saturating_duration_since(since) >= quiet {
                self.evict(e);
            }
        }
    }

    /// Writes what the socket takes of connection `key`'s response,
    /// without waiting. Once all is sent, its buffer goes back to the pool
    /// and its slot is free.
    pub fn write_some(&self, key: Key) -> Sent {
        let mut conns = self.conns.borrow_mut();
        let Some(Some(e)) = conns.get_mut(key.index) else {
            return Sent::Failed;
        };
        if e.id != key.id || e.phase != Phase::Answering {
            return Sent::Failed;
        }
        let (wrote, now) = (e.reply.write_to(e.stream.get_ref()), Instant::now());
        let sent = match wrote {
            Ok(n) if n > 0 => {
                e.since = now;
                if !e.reply.done() {
                    return Sent::Some;
                }
                Sent::All
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Sent::Blocked,
            _ => Sent::Failed,
        };
        let reply = std::mem::take(&mut e.reply);
        drop(conns);
        self.outbufs.put(reply.into_buffer());
        // Between requests: what comes next sets its own phase.
        self.set_phase(key, Phase::Head, now);
        sent
    }

    /// Whether connection `key` is still answering (not evicted); its
    /// client `read` some of what it was sent: it is not stalled.
    pub fn answering(&self, key: Key, read: bool) -> bool {
        let mut conns = self.conns.borrow_mut();
        let e = conns.get_mut(key.index).and_then(Option::as_mut);
        let Some(e) = e.filter(|e| e.id == key.id && e.phase == Phase::Answering) else {
            return false;
        };
        if read {
            e.since = Instant::now();
        }
        true
    }

    /// How many connections `lane` admits.
    pub(super) fn cap(&self, lane: Lane) -> usize {
        lane.cap(&self.limits)
    }

    /// `lane`'s registered connections, the evicted not yet closed included.
    pub(super) fn entries(&self, lane: Lane) -> usize {
        self.entries[lane as usize].get()
    }

    /// `lane`'s connections not evicted.
    pub(super) fn admitted(&self, lane: Lane) -> usize {
        self.admitted[lane as usize].get()
    }

    fn add(counts: &[Cell<usize>; 2], lane: Lane, by: isize) {
        let c = &counts[lane as usize];
        c.set(c.get().wrapping_add_signed(by));
    }

    /// Registers a new connection.
    pub(super) fn admit(&self, stream: Rc<Async<TcpStream>>, tls: bool, lane: Lane) -> Key {
        let transport = match tls {
            true => Transport::Handshaking,
            false => Transport::Plain,
        };
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let entry = Entry {
            id,
            stream,
            transport,
            owed: false,
            lane,
            phase: Phase::New,
            since: Instant::now(),
            reply: Reply::default(),
        };
        let mut conns = self.conns.borrow_mut();
        let index = match self.free.borrow_mut().pop() {
            Some(i) => {
                conns[i] = Some(entry);
                i
            }
            None => {
                conns.push(Some(entry));
                conns.len() - 1
            }
        };
        Self::add(&self.entries, lane, 1);
        Self::add(&self.admitted, lane, 1);
        self.count_open();
        Key { index, id }
    }

    /// Connection `key`'s client sent handshake bytes (`done`: the last
    /// of them): it is not silent.
    #[cfg(feature = "tls")]
    pub fn heard(&self, key: Key, done: bool) {
        if let Some(Some(e)) = self.conns.borrow_mut().get_mut(key.index)
            && e.id == key.id
            && e.phase == Phase::New
        {
            e.since = Instant::now();
            if done {
                e.transport = Transport::Tls;
            }
        }
    }

    /// Whether connection `key` was evicted (it is closing).
    #[cfg(feature = "tls")]
    pub fn evicted(&self, key: Key) -> bool {
        self.with(key, |e| e.phase == Phase::Closing)
    }

    /// Whether connection `key` was evicted over TLS before its request
    /// came: its task seals [`FULL`] before closing.
    #[cfg(feature = "tls")]
    pub fn owes_full(&self, key: Key) -> bool {
        self.with(key, |e| e.owed)
    }

    #[cfg(feature = "tls")]
    fn with(&self, key: Key, f: impl Fn(&Entry) -> bool) -> bool {
        match self.conns.borrow().get(key.index) {
            Some(Some(e)) if e.id == key.id => f(e),
            _ => false,
        }
    }

    /// Connection `key` is closed: its place and its deadline are free.
    pub fn forget(&self, key: Key) {
        self.deadlines.forget(key.id);
        let mut conns = self.conns.borrow_mut();
        let Some(slot) = conns.get_mut(key.index) else {
            return;
        };
        let Some(e) = slot.take_if(|e| e.id == key.id) else {
            return;
        };
        match e.phase {
            Phase::Closing => {}
            Phase::Answering => {
                self.answering.set(self.answering.get() - 1);
                Self::add(&self.admitted, e.lane, -1);
            }
            _ => Self::add(&self.admitted, e.lane, -1),
        }
        self.free.borrow_mut().push(key.index);
        Self::add(&self.entries, e.lane, -1);
        drop(conns);
        let out = e.reply.into_buffer();
        if out.capacity() > 0 {
            self.outbufs.put(out);
        }
        self.count_open();
        self.room.wake();
    }

    /// Closes `lane`'s oldest evictable connection (see the module's
    /// policy); false when there is none.
    pub(super) fn make_room(&self, lane: Lane) -> bool {
        let mut conns = self.conns.borrow_mut();
        let now = Instant::now();
        // The LOOK first to go, oldest first within each rank: silent new
        // connections and partial heads, the longest silent first, and
        // only then kept-alive ones, which have finished requests and are
        // most likely a scraper's.
        let mut oldest: [Option<(u8, Instant, usize)>; LOOK] = [None; LOOK];
        for (i, e) in conns.iter().enumerate() {
            let Some(e) = e.as_ref().filter(|e| e.lane == lane) else {
                continue;
            };
            let rank = match e.phase {
                Phase::New if now.saturating_duration_since(e.since) >= SILENT => 0,
                Phase::Head => 0,
                Phase::Idle => 1,
                Phase::New | Phase::Answering | Phase::Closing => continue,
            };
            let mut item = Some((rank, e.since, i));
            for place in oldest.iter_mut() {
                if item < *place || place.is_none() {
                    std::mem::swap(&mut item, place);
                }
                if item.is_none() {
                    break;
                }
            }
        }
        for (_, _, i) in oldest.into_iter().flatten() {
            let Some(e) = conns[i].as_mut() else { continue };
            // Bytes waiting unread are a request on its way: not evictable.
            if e.phase != Phase::Head
                && matches!(e.stream.get_ref().peek(&mut [0u8; 1]), Ok(n) if n > 0)
            {
                continue;
            }
            self.evict(e);
            return true;
        }
        false
    }

    /// When the oldest silent new connection becomes evictable (it has
    /// been silent [`SILENT`]): nothing else wakes the accept loop then, so
    /// it sleeps until that moment too. `None` when no new connection waits
    /// to become evictable.
    pub(super) fn next_evictable(&self, lane: Lane) -> Option<Instant> {
        let conns = self.conns.borrow();
        let now = Instant::now();
        conns
            .iter()
            .flatten()
            .filter(|e| e.lane == lane && e.phase == Phase::New)
            .map(|e| e.since + SILENT)
            .filter(|at| *at > now)
            .min()
    }

    /// Closes `e`'s connection to make room: its task sees the end of the
    /// stream, or a failed write, and forgets it.
    fn evict(&self, e: &mut Entry) {
        let reason = match (e.phase, e.transport) {
            (Phase::Idle, _) => Evicted::Idle,
            (Phase::New, Transport::Handshaking) => Evicted::Handshake,
            (Phase::New | Phase::Head, _) => Evicted::IncompleteHead,
            (Phase::Answering, _) => Evicted::StalledWrite,
            (Phase::Closing, _) => return,
        };
        let how = match (reason, e.transport) {
            (Evicted::IncompleteHead, Transport::Plain) => {
                // An empty send buffer: one non-blocking write fits.
                let _ = e.stream.get_ref().write(FULL);
                Shutdown::Both
            }
            (Evicted::IncompleteHead, Transport::Tls) => {
                // Its task sees the end of input and seals the 503.
                e.owed = true;
                Shutdown::Read
            }
            _ => Shutdown::Both,
        };
        let _ = e.stream.get_ref().shutdown(how);
        if e.phase == Phase::Answering {
            self.answering.set(self.answering.get() - 1);
            self.outbufs.put(std::mem::take(&mut e.reply).into_buffer());
        }
        e.phase = Phase::Closing;
        Self::add(&self.admitted, e.lane, -1);
        self.counts.evicted(reason);
        self.log.borrow_mut().evicted(reason, &self.limits);
    }

    /// The accept loop waited `d` at the cap.
    pub(super) fn paused(&self, d: Duration) {
        self.counts.paused(d);
        self.log.borrow_mut().paused(d, &self.limits);
    }

    fn count_open(&self) {
        self.counts
            .set_open(self.entries.iter().map(Cell::get).sum());
    }
}

/// Races `fut` against connection `id`'s deadline; `None` when the
/// deadline came first.
pub(super) async fn before<T>(
    srv: &Server,
    key: Key,
    deadline: Instant,
    fut: impl Future<Output = T>,
) -> Option<T> {
    async { Some(fut.await) }
        .or(async {
            srv.deadlines.sleep(key.id, deadline).await;
            None
        })
        .await
}
