//! Basic auth as exporter-toolkit does it (`web/handler.go`), made safe to
//! run on the exporter's single HTTP thread:
//!
//! - users and bcrypt hashes (`$2y$`/`$2b$`/`$2a$`) come from the web
//!   config's `basic_auth_users`;
//! - an unknown user costs a bcrypt of a dummy hash, at the cost of one
//!   of the configured users, picked by a keyed hash of the name (see
//!   [`Auth::unknown_cost`]), so timing does not tell which names exist;
//! - a success is remembered in a small bounded cache keyed by a keyed
//!   128-bit hash of (user, password): an authenticated scrape pays one
//!   bcrypt, then none, and the cached path allocates nothing;
//! - a reload keeps what was earned ([`Earned`]): the cache, for users
//!   whose hash did not change, and the token bucket, so a reload during a
//!   password flood neither locks out a cached scraper nor refills the
//!   flood's budget;
//! - bcrypt never runs on the HTTP thread: one worker thread runs one at a
//!   time, behind a token bucket per source address (half the budget
//!   each, in a bounded table), the shared bucket and a bounded
//!   queue. Beyond them the answer is 429 (with `Retry-After`), never a
//!   stalled scrape, and one flooding client spends only its own share.
//!
//! Refusals are 401 with `WWW-Authenticate` (`http/router.rs`).

use super::User;
use super::bcrypt::Hash;
use base::rate::{PerSource, Rate, TokenBucket, source_of};
use smol::lock::OnceCell;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, mpsc};
use std::time::{Duration, Instant};

/// Locks `m`, whatever a panic elsewhere left (a panic aborts anyway).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Credentials longer than this (decoded) are refused without a bcrypt.
pub const MAX_CREDENTIALS: usize = 512;

/// What to answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// 401 with `WWW-Authenticate`.
    Denied,
    /// 429 with `Retry-After`: bcrypt is saturated (a password flood).
    Busy,
}

/// How hard bcrypt may be pushed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Successful (user, password) pairs remembered.
    pub cache: usize,
    /// bcrypt runs started per second, sustained...
    pub per_second: u32,
    /// ...and in a burst.
    pub burst: u32,
    /// bcrypt runs waiting for the worker; more get 429.
    pub queue: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        // Cost 10 is ~50-70 ms: 4/s keeps bcrypt under a third of a core.
        Limits {
            cache: 64,
            per_second: 4,
            burst: 8,
            queue: 4,
        }
    }
}

/// One bcrypt for the worker.
struct Job {
    hash: Hash,
    password: [u8; 72],
    len: usize,
    flight: Flight,
}

/// One bcrypt under way: everyone asking with the same credentials waits
/// for its answer instead of queueing another (a Prometheus restarting
/// with many connections, say).
type Flight = Arc<OnceCell<bool>>;

/// A flight this old is taken for lost (the worker gone) and no longer
/// joined: far more than a queue of cost-14 bcrypts takes.
const STALE: Duration = Duration::from_secs(10);

/// One remembered success: the credentials' key, when last used, and
/// whose it is (a keyed hash of the name, the hash it matched), so that a
/// reload keeps it only while that user keeps that hash.
struct Entry {
    key: u128,
    used: u64,
    user: u64,
    hash: Hash,
}

/// What basic auth has earned, carried from one loaded config to the next:
/// the cache of successes and the token buckets, and the keys of the one.
pub struct Earned {
    keys: (RandomState, RandomState),
    /// Entries, at most `Limits::cache`, the use clock, and the generation
    /// (which [`Auth`] may use them: a success an older one finishes after
    /// a reload is not taken up by the newer).
    cache: Mutex<Cache>,
    bucket: TokenBucket,
    sources: PerSource,
}

/// Sources whose bcrypt budget is kept apart: far more than scrape a node.
const SOURCES: usize = 256;

#[derive(Default)]
struct Cache {
    entries: Vec<Entry>,
    clock: u64,
    generation: u64,
}

/// Basic auth for one loaded web config; a reload makes a new one with
/// what the old one earned, and a new worker (the old one ends when its
/// queue drains).
pub struct Auth {
    users: Vec<User>,
    earned: Arc<Earned>,
    generation: u64,
    jobs: mpsc::SyncSender<Job>,
    /// bcrypts under way, by credentials' key, with when they started.
    flights: Mutex<Vec<(u128, Instant, Flight)>>,
    limits: Limits,
    bcrypts: AtomicU64,
    /// bcrypt runs the worker finished, by cost (read by tests).
    ran: Arc<[AtomicU64; 32]>,
}

/// The key of the hash that picks an unknown name's cost: one for the
/// process, so that a reload (a new [`Auth`]) picks the same cost for the
/// same name. A key per `Auth` would let a name's cost change across
/// reloads, which a known user's never does.
fn name_key() -> &'static RandomState {
    static KEY: OnceLock<RandomState> = OnceLock::new();
    KEY.get_or_init(RandomState::new)
}

/// A keyed hash of a user name: which cost an unknown name runs at, and
/// whose a cache entry is.
fn name_tag(name: &[u8]) -> u64 {
    name_key().hash_one(name)
}

/// Work left to do after the cache: a bcrypt on the worker.
pub struct Pending {
    key: u128,
    /// The user's index, `None` for an unknown name.
    user: Option<usize>,
    flight: Flight,
}

/// The outcome of the synchronous first step.
pub enum Step {
    Done(Verdict),
    Wait(Pending),
}

impl Auth {
    /// `None` when `users` is empty: no auth configured.
    /// `Ok(None)` when `users` is empty: no auth configured. An error
    /// (the bcrypt thread would not start) is never auth silently off.
    /// With `earned` (a reload's), the cache keeps the successes of users
    /// whose name and hash are both unchanged, and the bucket its tokens.
    pub fn new(
        users: Vec<User>,
        limits: Limits,
        earned: Option<Arc<Earned>>,
    ) -> std::io::Result<Option<Auth>> {
        if users.is_empty() {
            return Ok(None);
        }
        let earned = earned.unwrap_or_else(|| {
            let per_second = limits.per_second.max(1);
            let share = Rate {
                interval: Duration::from_secs(1) / (per_second / 2).max(1),
                burst: (limits.burst / 2).max(1),
            };
            Arc::new(Earned {
                keys: (RandomState::new(), RandomState::new()),
                cache: Mutex::new(Cache::default()),
                bucket: TokenBucket::new(Duration::from_secs(1) / per_second, limits.burst.max(1)),
                sources: PerSource::new(share, SOURCES),
            })
        });
        let generation = {
            let mut cache = lock(&earned.cache);
            cache.generation += 1;
            cache.entries.retain(|e| {
                users
                    .iter()
                    .any(|u| e.user == name_tag(u.name.as_bytes()) && e.hash == u.hash)
            });
            cache.generation
        };
        let (tx, rx) = mpsc::sync_channel::<Job>(limits.queue);
        let ran: Arc<[AtomicU64; 32]> = Arc::new(std::array::from_fn(|_| AtomicU64::new(0)));
        let counts = ran.clone();
        std::thread::Builder::new()
            .name("bcrypt".into())
            .spawn(move || {
                // Ends when the Auth (the only sender) is dropped.
                for job in rx {
                    let ok = job.hash.verify(&job.password[..job.len]);
                    counts[job.hash.cost() as usize % 32].fetch_add(1, Relaxed);
                    let _ = job.flight.set_blocking(ok);
                }
            })?;
        Ok(Some(Auth {
            users,
            earned,
            generation,
            jobs: tx,
            flights: Mutex::new(Vec::with_capacity(limits.queue + 1)),
            limits,
            bcrypts: AtomicU64::new(0),
            ran,
        }))
    }

    /// What this one earned, for the next config's [`Auth::new`].
    pub fn earned(&self) -> Arc<Earned> {
        self.earned.clone()
    }

    /// How many users there are.
    pub fn users(&self) -> usize {
        self.users.len()
    }

    /// The cost an unknown `name` is checked at: the cost of the user a
    /// keyed hash of the name picks, each user as likely as another. So an
    /// unknown name takes as long as some known user does, costs in the
    /// proportions the file has them, and the same each time (and across
    /// reloads): measuring a name again tells nothing more. The highest
    /// cost for everyone would tell a cheap user's name from any other.
    pub fn unknown_cost(&self, name: &[u8]) -> u32 {
        let pick = name_tag(name) % self.users.len() as u64;
        self.users[pick as usize].hash.cost()
    }

    /// bcrypt runs the worker finished at `cost`.
    pub fn bcrypts_at(&self, cost: u32) -> u64 {
        self.ran[cost as usize % 32].load(Relaxed)
    }

    /// bcrypt runs started so far.
    pub fn bcrypts(&self) -> u64 {
        self.bcrypts.load(Relaxed)
    }

    /// The synchronous part, on the HTTP thread: parse the header, answer
    /// from the cache, or queue a bcrypt on the budget of the client at
    /// `peer`. Allocates nothing unless it queues.
    pub fn step(&self, authorization: Option<&[u8]>, peer: IpAddr) -> Step {
        let mut buf = [0u8; MAX_CREDENTIALS];
        let Some((user, password)) = authorization.and_then(|h| parse_basic(h, &mut buf)) else {
            return Step::Done(Verdict::Denied);
        };
        let key = self.key(user, password);
        if self.cache_hit(key) {
            return Step::Done(Verdict::Allowed);
        }
        // Look at every user, so the time taken does not depend on where
        // (or whether) the name is found.
        let mut found = None;
        for (i, u) in self.users.iter().enumerate() {
            if ct_eq(u.name.as_bytes(), user) {
                found = Some(i);
            }
        }
        // A hash nobody's password matches (all-zero digest) for a name
        // nobody has, picked for every name alike.
        let dummy = Hash::dummy(self.unknown_cost(user));
        let hash = found.map_or(dummy, |i| self.users[i].hash.clone());
        let now = Instant::now();
        let mut flights = lock(&self.flights);
        flights.retain(|(_, at, f)| f.get().is_none() && now.duration_since(*at) < STALE);
        if let Some((_, _, flight)) = flights.iter().find(|(k, _, _)| *k == key) {
            let flight = flight.clone();
            return Step::Wait(Pending {
                key,
                user: found,
                flight,
            });
        }
        // The source's own bucket first: a flood it refuses spends nothing
        // of the shared one.
        if !self.earned.sources.allow(source_of(peer)) || !self.earned.bucket.allow() {
            return Step::Done(Verdict::Busy);
        }
        let flight = Flight::default();
        let mut job = Job {
            hash,
            password: [0; 72],
            len: password.len().min(72),
            flight: flight.clone(),
        };
        job.password[..job.len].copy_from_slice(&password[..job.len]);
        match self.jobs.try_send(job) {
            Ok(()) => {
                self.bcrypts.fetch_add(1, Relaxed);
                flights.push((key, now, flight.clone()));
                Step::Wait(Pending {
                    key,
                    user: found,
                    flight,
                })
            }
            Err(_) => Step::Done(Verdict::Busy),
        }
    }

    /// Waits for the worker's answer and caches a success.
    pub async fn finish(&self, p: Pending) -> Verdict {
        match (*p.flight.wait().await, p.user) {
            (true, Some(i)) => {
                self.remember(p.key, &self.users[i]);
                Verdict::Allowed
            }
            _ => Verdict::Denied,
        }
    }

    /// Both steps; the caller races it against its deadline.
    pub async fn check(&self, authorization: Option<&[u8]>, peer: IpAddr) -> Verdict {
        match self.step(authorization, peer) {
            Step::Done(v) => v,
            Step::Wait(p) => self.finish(p).await,
        }
    }

    fn key(&self, user: &[u8], password: &[u8]) -> u128 {
        let half = |s: &RandomState| {
            let mut h = s.build_hasher();
            h.write_usize(user.len());
            h.write(user);
            h.write(password);
            h.finish()
        };
        let keys = &self.earned.keys;
        (u128::from(half(&keys.0)) << 64) | u128::from(half(&keys.1))
    }

    fn cache_hit(&self, key: u128) -> bool {
        let mut cache = lock(&self.earned.cache);
        cache.clock += 1;
        let now = cache.clock;
        match cache.entries.iter_mut().find(|e| e.key == key) {
            Some(e) => {
                e.used = now;
                true
            }
            None => false,
        }
    }

    fn remember(&self, key: u128, user: &User) {
        let mut cache = lock(&self.earned.cache);
        if cache.generation != self.generation {
            return; // a reload came: the newer config may not have this user
        }
        cache.clock += 1;
        let entry = Entry {
            key,
            used: cache.clock,
            user: name_tag(user.name.as_bytes()),
            hash: user.hash.clone(),
        };
        if cache.entries.iter().any(|e| e.key == key) {
            return;
        }
        if cache.entries.len() < self.limits.cache {
            cache.entries.push(entry);
        } else if let Some(oldest) = cache.entries.iter_mut().min_by_key(|e| e.used) {
            *oldest = entry;
        }
    }
}

/// Equal in time that depends only on the lengths.
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `Basic <base64(user:password)>` (RFC 7617) into `buf`, as Go's
/// `Request.BasicAuth` reads it: the scheme case-insensitively, then
/// standard padded base64, split at the first ':'.
pub fn parse_basic<'b>(header: &[u8], buf: &'b mut [u8]) -> Option<(&'b [u8], &'b [u8])> {
    if header.len() < 6 || !header[..6].eq_ignore_ascii_case(b"Basic ") {
        return None;
    }
    let n = decode_base64(&header[6..], buf)?;
    let decoded = &buf[..n];
    let colon = decoded.iter().position(|&b| b == b':')?;
    Some((&decoded[..colon], &decoded[colon + 1..]))
}

fn decode_base64(src: &[u8], out: &mut [u8]) -> Option<usize> {
    if src.is_empty() || !src.len().is_multiple_of(4) || src.len() / 4 * 3 > out.len() + 2 {
        return None;
    }
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut n = 0;
    let chunks = src.len() / 4;
    for (i, q) in src.chunks_exact(4).enumerate() {
        let last = i + 1 == chunks;
        let pad = if last {
            q.iter().rev().take_while(|&&c| c == b'=').count()
        } else {
            0
        };
        if pad > 2 {
            return None;
        }
        let mut acc = 0u32;
        for &c in &q[..4 - pad] {
            acc = (acc << 6) | val(c)?;
        }
        acc <<= 6 * pad as u32;
        let bytes = [(acc >> 16) as u8, (acc >> 8) as u8, acc as u8];
        let take = 3 - pad;
        // Non-canonical trailing bits are refused, as Go's strict decoder does.
        if pad > 0 && bytes[take..].iter().any(|&b| b != 0) {
            return None;
        }
        if n + take > out.len() {
            return None;
        }
        out[n..n + take].copy_from_slice(&bytes[..take]);
        n += take;
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_header() {
        let mut b = [0u8; MAX_CREDENTIALS];
        // "dave:dave123"
        assert_eq!(
            parse_basic(b"Basic ZGF2ZTpkYXZlMTIz", &mut b),
            Some((&b"dave"[..], &b"dave123"[..]))
        );
        assert_eq!(
            parse_basic(b"basic ZGF2ZTpkYXZlMTIz", &mut b).map(|(u, _)| u.to_vec()),
            Some(b"dave".to_vec())
        );
        // "a:b:c" splits at the first colon; "a:" has an empty password.
        assert_eq!(
            parse_basic(b"Basic YTpiOmM=", &mut b),
            Some((&b"a"[..], &b"b:c"[..]))
        );
        assert_eq!(
            parse_basic(b"Basic YTo=", &mut b),
            Some((&b"a"[..], &b""[..]))
        );
        for bad in [
            &b"Bearer ZGF2ZTpkYXZlMTIz"[..],
            b"Basic",
            b"Basic ",
            b"Basic ZGF2ZQ==", // no colon
            b"Basic ZGF2ZTpkYXZlMTIz=",
            b"Basic Z===",
            b"Basic YTo!",
            b"Basic YTp=", // non-canonical padding bits
        ] {
            assert_eq!(
                parse_basic(bad, &mut b),
                None,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let long = format!("Basic {}", "QUFB".repeat(200));
        assert_eq!(parse_basic(long.as_bytes(), &mut b), None);
    }

    /// `Basic base64(user:password)`.
    fn header(user: &str, password: &str) -> Vec<u8> {
        const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let raw = format!("{user}:{password}").into_bytes();
        let mut out = b"Basic ".to_vec();
        for c in raw.chunks(3) {
            let n = (u32::from(c[0]) << 16)
                | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
                | u32::from(*c.get(2).unwrap_or(&0));
            for i in 0..4 {
                out.push(if i <= c.len() {
                    B64[(n >> (18 - 6 * i)) as usize & 63]
                } else {
                    b'='
                });
            }
        }
        out
    }

    /// dave/dave123 at cost 10 (exporter-toolkit's testdata) and u/U*U at
    /// cost 5 (Debian's htpasswd).
    fn users() -> Vec<User> {
        let user = |name: &str, hash: &str| User {
            name: name.into(),
            hash: Hash::parse(hash).unwrap(),
        };
        vec![
            user(
                "dave",
                "$2y$10$2UXri9cIDdgeKjBo4Rlpx.U3ZLDV8X1IxKmsfOvhcM5oXQt/mLmXq",
            ),
            user(
                "u",
                "$2y$05$dhBBcrUqYOQncjX3esbAxeM2Fj3gtb6Kr07DKxszK66F1YjfBaE.u",
            ),
        ]
    }

    /// The default limits but for the token bucket's.
    fn rate(per_second: u32, burst: u32) -> Limits {
        Limits {
            per_second,
            burst,
            ..Limits::default()
        }
    }

    /// A source no other call used: for tests not about sources.
    fn anyone() -> IpAddr {
        static NEXT: AtomicU64 = AtomicU64::new(1 << 24);
        IpAddr::from(std::net::Ipv4Addr::from_bits(
            NEXT.fetch_add(1, Relaxed) as u32
        ))
    }

    fn auth(limits: Limits) -> Auth {
        Auth::new(users(), limits, None).unwrap().unwrap()
    }

    /// The verdict of the first step, `None` when it queued a bcrypt.
    fn done(s: Step) -> Option<Verdict> {
        match s {
            Step::Done(v) => Some(v),
            Step::Wait(_) => None,
        }
    }

    #[test]
    fn a_reload_keeps_the_cache_of_unchanged_users_and_the_bucket() {
        let check =
            |a: &Auth, u: &str, p: &str| smol::block_on(a.check(Some(&header(u, p)), anyone()));
        let reload = |users: Vec<User>, old: &Auth, limits| {
            Auth::new(users, limits, Some(old.earned()))
                .unwrap()
                .unwrap()
        };
        let one = rate(1, 2);
        let a = auth(one);
        assert_eq!(check(&a, "u", "U*U"), Verdict::Allowed);
        assert_eq!(check(&a, "dave", "dave123"), Verdict::Allowed);
        // Both tokens spent (the next comes a second later). The same users
        // again: both stay cached (no bcrypt, no 429), and a flood still
        // gets 429: the bucket is carried, not refilled.
        let b = reload(users(), &a, one);
        assert_eq!(check(&b, "u", "U*U"), Verdict::Allowed);
        assert_eq!(check(&b, "dave", "dave123"), Verdict::Allowed);
        assert_eq!(check(&b, "dave", "guess"), Verdict::Busy);
        assert_eq!(b.bcrypts(), 0);

        let many = rate(1000, 1000);
        let a = auth(many);
        assert_eq!(check(&a, "u", "U*U"), Verdict::Allowed);
        assert_eq!(check(&a, "dave", "dave123"), Verdict::Allowed);
        // dave's hash changes: his success is forgotten (a bcrypt queues
        // for him), u's is kept.
        let mut changed = users();
        changed[0].hash =
            Hash::parse("$2y$04$QOYQtfR5/mKPBP/g/kOayu7oRKzQBJiqBhEB5zVbzDsMKHL99clku").unwrap();
        let c = reload(changed.clone(), &a, many);
        assert_eq!(check(&c, "u", "U*U"), Verdict::Allowed);
        assert_eq!(c.bcrypts(), 0);
        assert_eq!(
            done(c.step(Some(&header("dave", "dave123")), anyone())),
            None
        );
        assert_eq!(c.bcrypts(), 1);
        // u is removed: so is u's success.
        let d = reload(changed[..1].to_vec(), &c, many);
        assert_eq!(done(d.step(Some(&header("u", "U*U")), anyone())), None);
        assert_eq!(d.bcrypts(), 1);
    }

    #[test]
    fn a_success_finished_after_a_reload_is_not_taken_up_by_the_new_config() {
        let a = auth(Limits::default());
        let dave = header("dave", "dave123");
        let Step::Wait(pending) = a.step(Some(&dave), anyone()) else {
            panic!("a bcrypt queued");
        };
        // A reload without dave while his bcrypt runs.
        let b = Auth::new(users()[1..].to_vec(), Limits::default(), Some(a.earned()))
            .unwrap()
            .unwrap();
        assert_eq!(smol::block_on(a.finish(pending)), Verdict::Allowed);
        assert_eq!(
            smol::block_on(b.check(Some(&dave), anyone())),
            Verdict::Denied
        );
        assert_eq!(b.bcrypts(), 1, "checked, not answered from the cache");
    }

    #[test]
    fn verifies_caches_and_times_unknown_users_alike() {
        let a = auth(Limits::default());
        let check = |u: &str, p: &str| smol::block_on(a.check(Some(&header(u, p)), anyone()));
        assert_eq!(check("u", "U*U"), Verdict::Allowed);
        assert_eq!(check("dave", "dave123"), Verdict::Allowed);
        assert_eq!(a.bcrypts(), 2);
        assert_eq!(check("u", "U*U"), Verdict::Allowed);
        assert_eq!(a.bcrypts(), 2, "a cached success pays no bcrypt");
        assert_eq!(check("u", "wrong"), Verdict::Denied);
        assert_eq!(check("dave", "U*U"), Verdict::Denied);
        // An unknown user runs a bcrypt too (the dummy's).
        assert_eq!(check("mallory", "dave123"), Verdict::Denied);
        assert_eq!(a.bcrypts(), 5);
        // Failures are not cached.
        assert_eq!(check("u", "wrong"), Verdict::Denied);
        assert_eq!(a.bcrypts(), 6);
        // No header, another scheme, garbage: 401 without a bcrypt.
        assert_eq!(smol::block_on(a.check(None, anyone())), Verdict::Denied);
        assert_eq!(
            smol::block_on(a.check(Some(b"Bearer x"), anyone())),
            Verdict::Denied
        );
        assert_eq!(a.bcrypts(), 6);
    }

    #[test]
    fn an_unknown_name_runs_at_the_cost_of_a_user_the_name_picks() {
        // u at cost 5 and dave at cost 10; limits that never say 429 here.
        let a = auth(rate(1000, 1000));
        let ran = |a: &Auth| [5, 10].map(|c| a.bcrypts_at(c));
        let check =
            |a: &Auth, u: &str| smol::block_on(a.check(Some(&header(u, "wrong")), anyone()));
        assert_eq!(check(&a, "u"), Verdict::Denied);
        assert_eq!(ran(&a), [1, 0], "a wrong password for u runs at u's cost");
        // A name for each user's cost (a keyed hash picks: 64 names all
        // pick the same user in 2^-63 of the runs).
        let names: Vec<String> = (0..64).map(|i| format!("nobody{i}")).collect();
        let by_cost = |c| names.iter().find(|n| a.unknown_cost(n.as_bytes()) == c);
        let (cheap, dear) = (by_cost(5).unwrap(), by_cost(10).unwrap());
        assert_eq!(check(&a, cheap), Verdict::Denied);
        assert_eq!(ran(&a), [2, 0], "{cheap} ran at cost 5");
        assert_eq!(check(&a, dear), Verdict::Denied);
        assert_eq!(ran(&a), [2, 1], "{dear} ran at cost 10");
        // The same name, the same cost, again and after a reload.
        assert_eq!(check(&a, cheap), Verdict::Denied);
        assert_eq!(ran(&a), [3, 1]);
        let reloaded = auth(rate(1000, 1000));
        assert_eq!(check(&reloaded, cheap), Verdict::Denied);
        assert_eq!(ran(&reloaded), [1, 0]);
        assert_eq!(reloaded.unknown_cost(dear.as_bytes()), 10);
        // No cost ran but the file's.
        let total: u64 = (0..32).map(|c| a.bcrypts_at(c)).sum();
        assert_eq!(total, 4);
        assert_eq!(a.bcrypts(), 4);
    }

    #[test]
    fn the_same_credentials_at_once_share_one_bcrypt() {
        let a = auth(Limits::default());
        // Cost 10 (about 50 ms): the 64 asks arrive well inside one bcrypt
        // even on a loaded machine; at cost 5 one could end first.
        let good = header("dave", "dave123");
        let pending: Vec<Pending> = (0..64)
            .map(|_| match a.step(Some(&good), anyone()) {
                Step::Wait(p) => p,
                Step::Done(v) => panic!("{v:?}"),
            })
            .collect();
        assert_eq!(a.bcrypts(), 1);
        for p in pending {
            assert_eq!(smol::block_on(a.finish(p)), Verdict::Allowed);
        }
        assert_eq!(a.bcrypts(), 1);
    }

    #[test]
    fn a_password_flood_gets_429_and_spends_only_its_own_share() {
        let limits = Limits {
            per_second: 1,
            burst: 4,
            queue: 4,
            ..Limits::default()
        };
        let a = auth(limits);
        let [flooder, scraper, other] = [1, 2, 3].map(|i| IpAddr::from([127, 0, 0, i]));
        // Twenty different guesses at once from one source: its share is
        // two tokens, so two bcrypts queue and the rest get 429 at once.
        let mut pending = Vec::new();
        let mut busy = 0;
        for i in 0..20 {
            match a.step(Some(&header("u", &format!("guess{i}"))), flooder) {
                Step::Wait(p) => pending.push(p),
                Step::Done(Verdict::Busy) => busy += 1,
                Step::Done(v) => panic!("{v:?}"),
            }
        }
        assert_eq!((pending.len(), busy), (2, 18));
        for p in pending {
            assert_eq!(smol::block_on(a.finish(p)), Verdict::Denied);
        }
        // Even the right password from the flooder waits for a token, but
        // another source is checked at once: the flood left it its share.
        let good = header("u", "U*U");
        assert_eq!(smol::block_on(a.check(Some(&good), flooder)), Verdict::Busy);
        assert_eq!(
            smol::block_on(a.check(Some(&good), scraper)),
            Verdict::Allowed
        );
        // Once cached, no flood touches it, from any source (this one
        // spends the scraper's last token, and the shared bucket's).
        for i in 0..20 {
            let _ = a.step(Some(&header("u", &format!("again{i}"))), scraper);
        }
        assert_eq!(
            smol::block_on(a.check(Some(&good), flooder)),
            Verdict::Allowed
        );
        assert_eq!(
            smol::block_on(a.check(Some(&good), scraper)),
            Verdict::Allowed
        );
        // The shared bucket bounds the sum: its 4 tokens are spent, so a
        // third source waits for the next, a second later.
        let dave = header("dave", "dave123");
        assert_eq!(smol::block_on(a.check(Some(&dave), other)), Verdict::Busy);
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(
            smol::block_on(a.check(Some(&dave), other)),
            Verdict::Allowed
        );
    }
}
