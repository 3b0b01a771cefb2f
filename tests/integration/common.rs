use crate::response::read_response_into;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_gpu-exporter");

/// The exporter running on a free loopback port; killed on drop.
pub struct Exporter {
    child: Child,
    pub addr: SocketAddr,
    /// Everything it has logged so far.
    log: Arc<Mutex<String>>,
}

impl Exporter {
    /// The exporter on `args`, once its first collection is published.
    pub fn start(args: &[&str]) -> Exporter {
        Exporter::start_binary(Path::new(BIN), args)
    }

    pub fn start_binary(bin: &Path, args: &[&str]) -> Exporter {
        let e = Exporter::serving(Command::new(bin), args);
        e.wait_first_collection();
        e
    }

    /// `cmd` (the exporter, or a command that runs it) with `args`, as soon
    /// as it says where it serves: its first collection may still be going.
    pub fn serving(mut cmd: Command, args: &[&str]) -> Exporter {
        // The simulator on a made-up host unless a test says otherwise (a
        // later flag wins), so a machine with a GPU, its driver or NVIDIA's
        // library runs the same tests; a free loopback port unless it names
        // where (each --web.listen-address adds one).
        let listens = args.iter().any(|a| a.starts_with("--web.listen-address"));
        let host = no_host().to_str().unwrap();
        cmd.args(["--source", "sim"])
            .args(["--path.sysfs", host, "--path.procfs", host])
            .args(["--path.devfs", host])
            .args(
                (!listens)
                    .then_some(["--web.listen-address", "127.0.0.1:0"])
                    .into_iter()
                    .flatten(),
            )
            .args(args);
        Exporter::spawned(cmd)
    }

    /// `cmd` as it is (the exporter with every argument it needs), as soon
    /// as it says where it serves.
    pub fn spawned(mut cmd: Command) -> Exporter {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn gpu-exporter");
        let (log, hostport) = watch_log(child.stderr.take().unwrap());
        let Ok(hostport) = hostport.recv_timeout(Duration::from_secs(20)) else {
            // Not yet an Exporter, whose drop would kill it: a binary that
            // hangs before serving must not outlive the failed test.
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the exporter logged no address within 20 s: {}",
                log.lock().unwrap()
            );
        };
        Exporter {
            child,
            addr: hostport.parse().unwrap(),
            log,
        }
    }

    /// Waits until the first collection is published and the simulator's
    /// history replayed through the alert evaluator, for at most a minute.
    pub fn wait_first_collection(&self) {
        self.wait_for("/readyz", Duration::from_secs(60), |b| {
            !b.contains("first collection in progress") && !b.contains("history replaying")
        });
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Sends a signal by name (`TERM`, `INT`, `HUP`).
    pub fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{name}");
    }

    /// Waits at most `limit` for the process to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A field of /proc/<pid>/status in KiB, e.g. `VmHWM`.
    pub fn status_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {field} in /proc/<pid>/status"))
    }

    /// What each open file descriptor of the exporter points at.
    pub fn fd_targets(&self) -> Vec<String> {
        let dir = format!("/proc/{}/fd", self.pid());
        let mut v: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .map(|p| p.display().to_string())
            .collect();
        v.sort();
        v
    }

    /// Open file descriptors of the exporter process.
    pub fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .unwrap()
            .count()
    }

    pub fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }

    /// One request on a fresh connection.
    pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        let mut s = self.connect();
        send(&mut s, "GET", path, headers);
        read_response(&mut s, true)
    }

    pub fn metrics(&self, accept: Option<&str>) -> Response {
        let headers: Vec<_> = accept.iter().map(|a| ("Accept", *a)).collect();
        self.get("/metrics", &headers)
    }

    /// The exporter on a scenario of its own (written to a temporary file
    /// named `name`), after `args`.
    pub fn on_scenario(name: &str, scenario: &str, args: &[&str]) -> Exporter {
        let path = temp_file(name, scenario);
        let mut all = args.to_vec();
        all.extend(["--sim.scenario", path.to_str().unwrap()]);
        Exporter::start(&all)
    }

    /// Fetches `path` until `done` holds of its body, for at most `limit`;
    /// the body that did.
    pub fn wait_for(&self, path: &str, limit: Duration, done: impl Fn(&str) -> bool) -> String {
        eventually(limit, || {
            let body = self.get(path, &[]).body;
            match done(&body) {
                true => Ok(body),
                false => Err(format!("{path} last said:\n{body}\nlog:\n{}", self.log())),
            }
        })
    }

    /// Waits, for at most `limit`, until the log holds `text`.
    pub fn wait_log(&self, text: &str, limit: Duration) {
        eventually(limit, || match self.log() {
            log if log.contains(text) => Ok(()),
            log => Err(format!("no {text:?} in the log:\n{log}")),
        })
    }
}

/// Calls `f` every 100 ms until it answers `Ok`, for at most `limit`; then
/// fails with what its last `Err` said.
pub fn eventually<T>(limit: Duration, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        match f() {
            Ok(v) => return v,
            Err(why) => assert!(Instant::now() < deadline, "gave up waiting: {why}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The value of the first sample in `body` whose line starts with `prefix`.
pub fn value(body: &str, prefix: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A made-up host with no trace of NVIDIA, for `--path.sysfs`,
/// `--path.procfs` and `--path.devfs`: an empty directory, whatever this
/// host's PCI bus, driver and device nodes hold (.ci/nvidia-host.sh runs
/// the tests on a host that has them).
pub fn no_host() -> &'static Path {
    static CELL: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    CELL.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("host-without-nvidia");
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

/// Keeps an exporter's log, read on a thread, and sends the `host:port`
/// its serving line names.
pub fn watch_log(
    stderr: impl Read + Send + 'static,
) -> (Arc<Mutex<String>>, mpsc::Receiver<String>) {
    let (tx, rx) = mpsc::channel();
    let log = Arc::new(Mutex::new(String::new()));
    let sink = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let url = line
                .split("serving GPU metrics on http://")
                .nth(1)
                .or_else(|| line.split("serving GPU metrics on https://").nth(1));
            if let Some(url) = url {
                let _ = tx.send(url.split('/').next().unwrap_or_default().to_string());
            }
            let mut log = sink.lock().unwrap();
            log.push_str(&line);
            log.push('\n');
        }
    });
    (log, rx)
}

pub fn send(s: &mut TcpStream, method: &str, path: &str, headers: &[(&str, &str)]) {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one response; `with_body` is false for HEAD.
pub fn read_response(s: &mut TcpStream, with_body: bool) -> Response {
    let mut raw = Vec::new();
    let head_len = read_response_into(s, &mut raw, !with_body);
    let head = std::str::from_utf8(&raw[..head_len - 4]).unwrap();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap()[9..12].parse().unwrap();
    let headers = lines
        .map(|l| {
            let (k, v) = l.split_once(": ").unwrap();
            (k.to_string(), v.to_string())
        })
        .collect();
    Response {
        status,
        headers,
        body: String::from_utf8(raw[head_len..].to_vec()).unwrap(),
    }
}

/// A scenario of 64 GPUs: a few hundred KB per scrape, to fill socket
/// buffers quickly.
pub fn big_fleet() -> String {
    let gpus = vec!["{}"; 64].join(",");
    let path = temp_file("big.json", &format!(r#"{{"gpus":[{gpus}]}}"#));
    path.to_str().unwrap().to_string()
}

/// A client that pipelines far more responses than socket buffers hold
/// and never reads: its response stays write-blocked.
pub fn never_reader(e: &Exporter) -> TcpStream {
    let mut s = e.connect();
    s.write_all(
        "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
            .repeat(600)
            .as_bytes(),
    )
    .unwrap();
    s
}

/// Sends `request` on a new connection and reads one response: its
/// status, and whether the server closed the connection after it.
pub fn closed_after(e: &Exporter, request: &[u8]) -> (u16, bool) {
    let (r, closed) = exchange(e, request);
    (r.status, closed)
}

/// [`closed_after`], with the whole response.
pub fn exchange(e: &Exporter, request: &[u8]) -> (Response, bool) {
    let mut s = e.connect();
    s.write_all(request).unwrap();
    let r = read_response(&mut s, true);
    // Closed means EOF with nothing after the response, or a reset when
    // the server closed with request bytes still unread; open, nothing
    // within half a second.
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut rest = Vec::new();
    let closed = match s.read_to_end(&mut rest) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset && rest.is_empty(),
    };
    (r, closed)
}

/// Whether `tool` can run. Missing locally: skip with a reason. Missing
/// in CI: fail.
pub fn have(tool: &str, probe: &[&str]) -> bool {
    let ok = Command::new(tool)
        .args(probe)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{tool} is required in CI (.ci/run installs it)"
        );
        eprintln!("SKIP: {tool} is not installed");
    }
    ok
}

/// Checks an exposition with `promtool check metrics`, where promtool is
/// here (see [`have`]).
pub fn check_metrics(body: &str) {
    if have("promtool", &["--version"]) {
        let out = pipe("promtool", &["check", "metrics"], body);
        assert!(
            out.status.success(),
            "promtool check metrics: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// What a command wrote, stdout then stderr.
pub fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `cmd args` with `input` on stdin.
pub fn pipe(cmd: &str, args: &[&str], input: &str) -> Output {
    let mut child = Command::new(cmd)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Runs the binary to completion, on the simulator unless `args` say otherwise.
pub fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(["--source", "sim"])
        .args(args)
        .output()
        .unwrap()
}

pub fn temp_file(name: &str, contents: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gpu-exporter-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

/// A file under tests/fixtures, as text.
pub fn fixture(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// Seconds since boot: a kernel log line stamped later than this was
/// logged after now.
pub fn uptime() -> f64 {
    let text = std::fs::read_to_string("/proc/uptime").unwrap();
    text.split_whitespace().next().unwrap().parse().unwrap()
}

/// A live (not zombie) process, from /proc/PID/stat.
pub struct Proc {
    pub pid: u32,
    pub comm: String,
    pub ppid: u32,
    pub pgrp: u32,
}

/// Every live process.
pub fn processes() -> Vec<Proc> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid pgrp ...": comm may hold spaces.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let num = |i: usize| rest.get(i).and_then(|v| v.parse().ok());
        if let (Some(&state), Some(ppid), Some(pgrp)) = (rest.first(), num(1), num(2))
            && state != "Z"
        {
            found.push(Proc {
                pid,
                comm: stat[open + 1..close].to_string(),
                ppid,
                pgrp,
            });
        }
    }
    found
}

/// The probe listener's address, from the log.
pub fn probe_addr(e: &Exporter) -> SocketAddr {
    let log = e.log();
    let url = log
        .split("serving probes on http://")
        .nth(1)
        .expect("a probe listener");
    url.split('/').next().unwrap().parse().unwrap()
}

/// GET `path` from the probe listener, in plain HTTP: (status, body).
pub fn probe(e: &Exporter, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(probe_addr(e)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    Some((head.get(9..12)?.parse().ok()?, body.to_string()))
}
