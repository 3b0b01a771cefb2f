//! gpu-exporter: source → snapshot → exposition / alerts → http.
//!
//! A poller thread reads the source and publishes complete snapshots;
//! the HTTP side (one smol executor on the main thread) only ever renders
//! the newest one, so a slow source never delays a scrape.
//!
//! Modules by floor: each imports only from the floors below it (checked by
//! `tests/layout.rs`; the module table of docs/maintainers.md says what each holds). The
//! public API is what `main.rs` needs: [`config`] and [`run`].
#![warn(missing_docs)]

// Below every module are the workspace's crates (docs/maintainers.md):
// `base`, `wire`, `webconfig`, `model`, `alerts`, `sources`,
// `exposition`, `fill` (the fillers, the engine reader), `poller`
// (the poller and the judge threads), `http` (the server) and `routes`
// (what it answers). Floor 0: the unit tests' helpers.
#[cfg(test)]
mod testkit;
// Floor 1: flags in, a validated configuration out.
pub mod config;
// Floor 2: which source and fillers the poller reads.
mod pipeline;
// Floor 3: what serves a published snapshot or its alerts besides HTTP:
// the seed table, the Alertmanager notifier.
mod notify;
mod table;
// Floor 4: the wiring.
mod app;

pub use app::{Error, init_logger, run};
