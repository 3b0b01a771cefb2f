//! `gpu-exporter-floor KIND FILE`: serves FILE's bytes as every answer on
//! the first connection (KIND: blocking, async or spawned), after printing
//! its address on a line of its own; exits when that connection ends.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, kind, file] = &args[..] else {
        eprintln!("usage: gpu-exporter-floor blocking|async|spawned FILE");
        std::process::exit(2);
    };
    let Some(floor) = gpu_exporter_floor::Floor::parse(kind) else {
        eprintln!("gpu-exporter-floor: KIND is blocking, async or spawned, not {kind:?}");
        std::process::exit(2);
    };
    let response = match std::fs::read(file) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gpu-exporter-floor: {file}: {e}");
            std::process::exit(2);
        }
    };
    let (addr, thread) = floor.serve(response);
    println!("{addr}");
    let _ = thread.join();
}
