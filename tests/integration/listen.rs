//! Where it listens, as node_exporter does: `:PORT` on IPv6 and IPv4 at
//! once, several `--web.listen-address`, and systemd's sockets
//! (`--web.systemd-socket`, through systemd's own `systemd-socket-activate`).

use crate::common::{
    BIN, Exporter, eventually, have, output_text, read_response, send, temp_file, value,
};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Command, Stdio};
use std::time::Duration;

/// `GET path` on a fresh connection to `addr`: status and body.
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    send(&mut s, "GET", path, &[]);
    let r = read_response(&mut s, true);
    (r.status, r.body)
}

/// Whether this host has `::1` (some CI containers have no IPv6).
fn have_ipv6_loopback() -> bool {
    let ok = TcpListener::bind("[::1]:0").is_ok();
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI needs ::1 to test dual-stack listening"
        );
        eprintln!("SKIP: no ::1 on this host");
    }
    ok
}

/// The `host:port` of every serving line in `log`.
fn served(log: &str) -> Vec<SocketAddr> {
    log.lines()
        .filter_map(|l| l.split("serving GPU metrics on http://").nth(1))
        .map(|u| u.split('/').next().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn a_port_alone_serves_ipv6_and_ipv4_and_logs_the_bound_address() {
    if !have_ipv6_loopback() {
        return;
    }
    let e = Exporter::start(&["--web.listen-address", ":0"]);
    // The address as bound, not "localhost".
    assert!(
        e.addr.ip().is_unspecified() && e.addr.is_ipv6(),
        "{}",
        e.addr
    );
    assert!(
        e.log()
            .contains(&format!("on http://[::]:{}/metrics", e.addr.port()))
    );
    for ip in ["::1", "127.0.0.1"] {
        let at = SocketAddr::new(ip.parse().unwrap(), e.addr.port());
        assert_eq!(get(at, "/healthz"), (200, "ok\n".into()), "{at}");
    }
}

#[test]
fn two_listen_addresses_serve_and_share_one_connection_count() {
    if !have_ipv6_loopback() {
        return;
    }
    let e = Exporter::start(&[
        "--web.listen-address",
        "127.0.0.1:0",
        "--web.listen-address",
        "[::1]:0",
    ]);
    let [v4, v6] = served(&e.log())[..] else {
        panic!("two serving lines in:\n{}", e.log())
    };
    assert!(v4.is_ipv4() && v6.is_ipv6(), "{v4} {v6}");
    // A kept-alive connection on the IPv6 listener counts on the other.
    let mut kept = TcpStream::connect(v6).unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    send(&mut kept, "GET", "/healthz", &[]);
    assert_eq!(read_response(&mut kept, false).status, 200);
    let (status, body) = get(v4, "/metrics");
    assert_eq!(status, 200);
    assert_eq!(
        value(&body, "gpu_exporter_http_connections_open "),
        Some(2.0)
    );
    drop(kept);
}

#[test]
fn with_ipv6_turned_off_a_port_alone_still_serves_ipv4() {
    // In a network namespace of its own, with IPv6 disabled as a host does
    // it (sysctl): the exporter and the client both run in there.
    if !have("unshare", &["--version"]) || !have("ip", &["-V"]) || !have("curl", &["--version"]) {
        return;
    }
    let script = format!(
        r#"set -e
ip link set lo up
for i in all default lo; do sysctl -qw net.ipv6.conf.$i.disable_ipv6=1; done
timeout 60 {BIN} --source sim --web.listen-address :9400 >/dev/null 2>noipv6.log &
pid=$!
for i in $(seq 100); do curl -sf http://127.0.0.1:9400/healthz && break; sleep 0.1; done
kill $pid; wait $pid || true; cat noipv6.log"#
    );
    let dir = temp_file("listen-noipv6", "");
    let out = Command::new("timeout")
        .args(["90", "unshare", "-n", "sh", "-c", &script])
        .current_dir(dir.parent().unwrap())
        .output()
        .unwrap();
    let out = output_text(&out);
    if out.contains("unshare failed") {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{out}");
        eprintln!("SKIP: cannot make a network namespace: {out}");
        return;
    }
    assert!(out.starts_with("ok\n"), "{out}");
    assert!(
        out.contains("serving GPU metrics on http://[::]:9400/metrics"),
        "{out}"
    );
}

/// A port free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `systemd-socket-activate` listening on `listen` and running the
/// exporter on them once the first connection arrives (that is how it
/// works without `--accept`).
fn activated(listen: &[String], extra: &[&str]) -> std::process::Child {
    let mut cmd = Command::new("systemd-socket-activate");
    for l in listen {
        cmd.args(["-l", l]);
    }
    cmd.args([BIN, "--source", "sim", "--web.systemd-socket"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn systemd_sockets_serve_in_place_of_listen_addresses() {
    if !have("systemd-socket-activate", &["--version"]) || !have_ipv6_loopback() {
        return;
    }
    let v4: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let v6: SocketAddr = format!("[::1]:{}", free_port()).parse().unwrap();
    // The listen address is not bound: systemd's sockets replace it.
    let unused = free_port();
    let mut child = activated(
        &[v4.to_string(), v6.to_string()],
        &["--web.listen-address", &format!("127.0.0.1:{unused}")],
    );
    // systemd-socket-activate binds before it execs; wait until it has.
    let first = eventually(Duration::from_secs(10), || {
        TcpStream::connect(v4).map_err(|e| e.to_string())
    });
    drop(first);
    let ok = (get(v4, "/healthz"), get(v6, "/healthz"));
    let refused = TcpStream::connect(("127.0.0.1", unused)).is_err();
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(ok.0, (200, "ok\n".into()), "{log}");
    assert_eq!(ok.1, (200, "ok\n".into()), "{log}");
    assert!(refused, "{unused} is listening");
    assert_eq!(served(&log), [v4, v6], "{log}");
}

#[test]
fn systemd_socket_problems_are_one_line_and_exit_2() {
    let run = |cmd: &mut Command| {
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let exporter = || {
        let mut cmd = Command::new(BIN);
        cmd.args(["--source", "sim", "--web.systemd-socket"]);
        cmd
    };
    // Passed as systemd would, by a shell that execs: its PID is ours.
    let shell = |setup: &str| {
        let mut cmd = Command::new("bash");
        cmd.arg("-c").arg(format!(
            "{setup}; LISTEN_PID=$$ exec {BIN} --source sim --web.systemd-socket"
        ));
        cmd
    };
    for ((code, err), says) in [
        (
            run(exporter().env_remove("LISTEN_PID").env_remove("LISTEN_FDS")),
            "LISTEN_PID is not set",
        ),
        (
            run(exporter().envs([("LISTEN_PID", "1"), ("LISTEN_FDS", "1")])),
            "LISTEN_PID \"1\" is not this process",
        ),
        (
            run(&mut shell("exec 3</dev/null; export LISTEN_FDS=1")),
            "fd 3 is not an open socket",
        ),
        (
            run(&mut shell("export LISTEN_FDS=65")),
            "LISTEN_FDS \"65\" is not a number from 1 to 64",
        ),
    ] {
        assert_eq!(code, Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("gpu-exporter: error: --web.systemd-socket: ") && err.contains(says),
            "{err}"
        );
    }
}

#[test]
fn a_datagram_socket_from_systemd_is_refused() {
    if !have("systemd-socket-activate", &["--version"]) {
        return;
    }
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new("systemd-socket-activate")
        .args(["-d", "-l", &format!("127.0.0.1:{port}")])
        .args([BIN, "--source", "sim", "--web.systemd-socket"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A datagram makes it exec the exporter; resend until it has.
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let status = eventually(Duration::from_secs(10), || {
        let _ = udp.send_to(b"x", ("127.0.0.1", port));
        child.try_wait().unwrap().ok_or("still running".to_string())
    });
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("gpu-exporter: error: --web.systemd-socket: fd 3 is not a TCP socket"),
        "{err}"
    );
}
