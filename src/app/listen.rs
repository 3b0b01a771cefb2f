//! The listening sockets, bound before anything starts: each
//! `--web.listen-address` (`:PORT` on one dual-stack socket, `0.0.0.0`
//! where the host has no IPv6), or the sockets systemd passes.

use crate::config::{ConfigError, Listen};
use rustix::io::{Errno, FdFlags};
use rustix::net::{AddressFamily, SocketFlags, SocketType, sockopt};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// Binds `at`; `flag` names it in the error.
pub fn bind(flag: &str, at: Listen) -> Result<TcpListener, ConfigError> {
    let fail = |addr: SocketAddr, e: std::io::Error| {
        ConfigError(format!("{flag}: cannot listen on {addr}: {e}"))
    };
    let port = match at {
        Listen::At(a) => return TcpListener::bind(a).map_err(|e| fail(a, e)),
        Listen::Any(port) => port,
    };
    let v6 = SocketAddr::from((Ipv6Addr::UNSPECIFIED, port));
    match dual_stack(v6) {
        Ok(l) => Ok(l),
        // No IPv6 in the kernel, or none configured (disable_ipv6).
        Err(e) if e == Errno::AFNOSUPPORT || e == Errno::ADDRNOTAVAIL => {
            log::info!("{flag} :{port}: this host has no IPv6 ({e}): listening on IPv4 only");
            let v4 = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
            TcpListener::bind(v4).map_err(|e| fail(v4, e))
        }
        Err(e) => Err(fail(v6, e.into())),
    }
}

/// `[::]` taking IPv4 too, whatever `net.ipv6.bindv6only` says.
fn dual_stack(addr: SocketAddr) -> Result<TcpListener, Errno> {
    let fd = rustix::net::socket_with(
        AddressFamily::INET6,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    sockopt::set_socket_reuseaddr(&fd, true)?;
    sockopt::set_ipv6_v6only(&fd, false)?;
    rustix::net::bind(&fd, &addr)?;
    rustix::net::listen(&fd, 128)?;
    Ok(TcpListener::from(fd))
}

/// The most sockets a `.socket` unit may pass us.
const MAX_FDS: RawFd = 64;

/// The listening TCP sockets systemd passed (sd_listen_fds(3)): fds 3 on,
/// `LISTEN_FDS` of them, when `LISTEN_PID` is this process.
pub fn systemd() -> Result<Vec<TcpListener>, ConfigError> {
    let bad = |m: String| ConfigError(format!("--web.systemd-socket: {m}"));
    let var = |k: &str| {
        std::env::var(k).map_err(|_| bad(format!("{k} is not set: start it from a .socket unit")))
    };
    let pid = var("LISTEN_PID")?;
    if pid.parse() != Ok(std::process::id()) {
        return Err(bad(format!(
            "LISTEN_PID {pid:?} is not this process ({}): the sockets are another's",
            std::process::id()
        )));
    }
    let n = var("LISTEN_FDS")?;
    let n: RawFd = n
        .parse()
        .ok()
        .filter(|n| (1..=MAX_FDS).contains(n))
        .ok_or_else(|| {
            bad(format!(
                "LISTEN_FDS {n:?} is not a number from 1 to {MAX_FDS}"
            ))
        })?;
    (3..3 + n)
        .map(|raw| {
            let fd = claim(raw).ok_or_else(|| bad(format!("fd {raw} is not an open socket")))?;
            listening_tcp(&fd).map_err(|why| bad(format!("fd {raw} {why}")))?;
            Ok(TcpListener::from(fd))
        })
        .collect()
}

/// Takes ownership of an inherited socket, if `raw` is one (as /proc
/// says, which needs no descriptor to ask).
#[allow(unsafe_code)] // one of two exceptions outside NVML's ffi.rs (http/unread.rs)
fn claim(raw: RawFd) -> Option<OwnedFd> {
    let link = std::fs::read_link(format!("/proc/self/fd/{raw}")).ok()?;
    if !link.to_string_lossy().starts_with("socket:") {
        return None;
    }
    // SAFETY: systemd passes fds 3..3+LISTEN_FDS, open, to the process
    // LISTEN_PID names, checked by the caller, and /proc just showed this
    // one open. It was inherited at exec, so no value in this process owns
    // it (whatever the process opened since got a higher number), and the
    // caller claims each number once.
    Some(unsafe { <OwnedFd as FromRawFd>::from_raw_fd(raw) })
}

/// Whether `fd` is a listening TCP socket; children must not inherit it.
fn listening_tcp(fd: &OwnedFd) -> Result<(), &'static str> {
    let domain = sockopt::socket_domain(fd).map_err(|_| "is not a socket")?;
    if domain != AddressFamily::INET && domain != AddressFamily::INET6 {
        return Err("is not an IPv4 or IPv6 socket");
    }
    if sockopt::socket_type(fd) != Ok(SocketType::STREAM) {
        return Err("is not a TCP socket");
    }
    if sockopt::socket_acceptconn(fd) != Ok(true) {
        return Err("is not listening (the .socket unit must not say Accept=yes)");
    }
    rustix::io::fcntl_setfd(fd, FdFlags::CLOEXEC).map_err(|_| "cannot be kept from children")
}
