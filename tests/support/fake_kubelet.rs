//! The fake kubelet (`tests/fake_kubelet/fake_kubelet.py`: real grpcio
//! serving the pod-resources v1 API on a unix socket in a temporary
//! directory), started and stopped by the tests. Shared by the client
//! tests (`tests/kubelet_client.rs`) and the binary's
//! (`tests/integration/kubelet.rs`).
//!
//! Without python3 and grpcio a test skips with a printed reason; with
//! CI=true it fails instead (`.ci/run` installs
//! `tests/fake_kubelet/requirements.txt`).
#![allow(dead_code)] // each test binary uses its own part

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, mpsc};
use std::time::Duration;

/// A pod with one container holding `ids` of `resource`, as the JSON
/// mapping of `PodResources`.
pub fn pod(ns: &str, name: &str, container: &str, resource: &str, ids: &[&str]) -> String {
    let ids: Vec<String> = ids.iter().map(|i| format!("\"{i}\"")).collect();
    format!(
        r#"{{"name": "{name}", "namespace": "{ns}", "containers": [{{"name": "{container}",
            "devices": [{{"resourceName": "{resource}", "deviceIds": [{}],
            "topology": {{"nodes": [{{"ID": 0}}]}}}}], "cpuIds": [4, 5]}}]}}"#,
        ids.join(", ")
    )
}

/// A `ListPodResourcesResponse` of `pods`, as JSON.
pub fn pods_json(pods: &[String]) -> String {
    format!(r#"{{"podResources": [{}]}}"#, pods.join(",\n"))
}

/// One fake at a time: the machine is small and each fake is a Python
/// process with a gRPC server.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether python3 with grpcio, grpcio-tools and protobuf is here;
/// without them a test skips (fails under CI=true).
pub fn python_ready() -> bool {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let r = READY.get_or_init(|| {
        let out = Command::new("python3")
            .args(["-c", "import grpc, grpc_tools, google.protobuf"])
            .output()
            .map_err(|e| format!("python3 not runnable: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "python3 lacks grpcio/grpcio-tools/protobuf ({}); \
                 pip install -r tests/fake_kubelet/requirements.txt",
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            ))
        }
    });
    match r {
        Ok(()) => true,
        Err(why) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("fake kubelet tests cannot run under CI: {why}")
        }
        Err(why) => {
            eprintln!("SKIP: fake kubelet: {why}");
            false
        }
    }
}

/// A directory for a kubelet socket, removed on drop; fakes come and go
/// in it as kubelets restart.
pub struct SocketDir(pub PathBuf);

impl SocketDir {
    pub fn new(name: &str) -> SocketDir {
        static N: AtomicU32 = AtomicU32::new(0);
        // Short: a unix socket path has room for 107 bytes.
        let dir = std::env::temp_dir().join(format!(
            "fk-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        SocketDir(dir)
    }

    pub fn socket(&self) -> PathBuf {
        self.0.join("kubelet.sock")
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One fake kubelet process; killed (and its socket removed) on drop.
pub struct Fake {
    child: Child,
    pub socket: PathBuf,
    log: PathBuf,
    /// The directory it made for itself, if it did.
    own: Option<SocketDir>,
}

impl Fake {
    /// Starts the fake in `mode` with `pods` (JSON) in a directory of its
    /// own and waits for READY.
    pub fn start(mode: &str, pods: &str, extra: &[&str]) -> Fake {
        let dir = SocketDir::new("own");
        let mut fake = Fake::start_in(&dir.0, mode, pods, extra);
        fake.own = Some(dir);
        fake
    }

    /// Starts the fake on `dir/kubelet.sock`.
    pub fn start_in(dir: &Path, mode: &str, pods: &str, extra: &[&str]) -> Fake {
        let pods_file = dir.join(format!("pods-{mode}.json"));
        std::fs::write(&pods_file, pods).unwrap();
        let socket = dir.join("kubelet.sock");
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_kubelet/fake_kubelet.py");
        let log = dir.join(format!("fake-{mode}.log"));
        let mut child = Command::new("python3")
            .arg(script)
            .arg("--socket")
            .arg(&socket)
            .arg("--pods")
            .arg(&pods_file)
            .args(["--mode", mode, "--lifetime", "300"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start python3");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut fake = Fake {
            child,
            socket,
            log,
            own: None,
        };
        // Generous: a loaded machine starts Python slowly.
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(line) if line == "READY" => fake,
            other => {
                let log = std::fs::read_to_string(&fake.log).unwrap_or_default();
                let _ = fake.child.kill();
                panic!("fake kubelet did not start ({other:?}):\n{log}");
            }
        }
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A killed kubelet leaves its socket file; a real one removes it
        // on restart. Gone either way here.
        let _ = std::fs::remove_file(&self.socket);
    }
}
