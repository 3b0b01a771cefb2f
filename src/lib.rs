//! gpu-exporter: source → snapshot → exposition / alerts → http.
//!
//! A collector thread reads the source and publishes complete snapshots;
//! the HTTP side (one smol executor on the main thread) only ever renders
//! the newest one, so a slow source never delays a scrape.
//!
//! Modules by floor: each imports only from the floors below it (checked by
//! `tests/layout.rs`; the README's module table says what each holds).

// Floor 0: helpers that import nothing of the crate's own.
pub mod base;
pub mod logger;
// Floor 1: flags in, a validated configuration out.
pub mod config;
// Floor 2: the fleet model every other part reads.
pub mod snapshot;
// Floor 3: sources and fillers, exposition, alerts, the process's own stats.
pub mod alerts;
pub mod exposition;
pub mod fill;
pub mod process;
pub mod source;
// Floor 4: the collector, and which source and fillers it reads.
pub mod collector;
pub mod select;
// Floor 5: what serves a published snapshot: HTTP, the seed table.
pub mod http;
pub mod table;
// Floor 6: the wiring.
mod app;

pub use app::{Error, run};
