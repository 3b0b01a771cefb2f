//! The floors a scrape is measured against (benches/): servers that
//! answer every request on a keep-alive connection with the same fixed
//! bytes, and do nothing else. What the exporter costs over them is ours.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread::JoinHandle;

/// How a floor serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Floor {
    /// A blocking thread: what sending the bytes costs, no runtime.
    Blocking,
    /// `smol::block_on` over `Async<TcpListener>`: the exporter's runtime
    /// with nothing else, no parsing, no deadlines, no render.
    AsyncIo,
    /// As [`Floor::AsyncIo`], the connection a task of a `LocalExecutor`,
    /// as the exporter's are, each wake-up going through its queue.
    Spawned,
}

impl Floor {
    /// From its name on a command line.
    pub fn parse(name: &str) -> Option<Floor> {
        match name {
            "blocking" => Some(Floor::Blocking),
            "async" => Some(Floor::AsyncIo),
            "spawned" => Some(Floor::Spawned),
            _ => None,
        }
    }

    /// Serves `response` to the first connection on a thread of its own,
    /// until that connection ends: the address it listens on, and the
    /// thread.
    pub fn serve(self, response: Vec<u8>) -> (String, JoinHandle<()>) {
        match self {
            Floor::Blocking => blocking(response),
            Floor::AsyncIo => async_io(response, false),
            Floor::Spawned => async_io(response, true),
        }
    }
}

fn blocking(response: Vec<u8>) -> (String, JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let addr = l.local_addr().expect("a bound address").to_string();
    let thread = std::thread::spawn(move || {
        let Some(Ok(mut s)) = l.incoming().next() else {
            return;
        };
        let _ = s.set_nodelay(true);
        let mut buf = [0u8; 4096];
        // One read is one request: the client sends each whole and waits
        // for its answer.
        while let Ok(1..) = s.read(&mut buf) {
            if s.write_all(&response).is_err() {
                break;
            }
        }
    });
    (addr, thread)
}

fn async_io(response: Vec<u8>, spawned: bool) -> (String, JoinHandle<()>) {
    use smol::io::{AsyncReadExt, AsyncWriteExt};
    let l = smol::Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).expect("a loopback port");
    let addr = l
        .get_ref()
        .local_addr()
        .expect("a bound address")
        .to_string();
    let thread = std::thread::spawn(move || {
        let conn = async move {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            let _ = s.get_ref().set_nodelay(true);
            let mut buf = [0u8; 4096];
            while let Ok(1..) = s.read(&mut buf).await {
                if s.write_all(&response).await.is_err() {
                    break;
                }
            }
        };
        match spawned {
            false => smol::block_on(conn),
            true => {
                let ex = smol::LocalExecutor::new();
                smol::block_on(ex.run(ex.spawn(conn)))
            }
        }
    });
    (addr, thread)
}
