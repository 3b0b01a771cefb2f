//! gpu-exporter: source → snapshot → exposition / alerts → http.
//!
//! A poller thread reads the source and publishes complete snapshots;
//! the HTTP side (one smol executor on the main thread) only ever renders
//! the newest one, so a slow source never delays a scrape.
//!
//! Modules by floor: each imports only from the floors below it (checked by
//! `tests/layout.rs`; the module table of docs/maintainers.md says what each holds). The
//! public API is what `main.rs` needs: [`config`] and [`run`].
#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]
// Functions stay short enough to read whole (clippy.toml: 80 lines of code).
#![warn(clippy::too_many_lines)]
// Documented: the public API. The internals the tests reach are not one.
#![cfg_attr(not(feature = "internals"), warn(missing_docs))]

// Floor 0, below every module, are the crates `base` (helpers, the
// logger), `wire` (the kubelet client's protocols), `webconfig` (the
// web config file), `model` (the fleet model every other part reads),
// `alerts` (the rules, their evaluator, the rules as PromQL), `sources`
// (NVML, nvidia-smi, the simulator, the fleet memory) and `exposition`
// (the renders).
#[cfg(test)]
mod testkit;
// Floor 1: flags in, a validated configuration out.
pub mod config;
// Floor 2: fillers, the process's own stats.
// Floor 3: the poller, and which source and fillers it reads.
mod pipeline;
// Floor 4: what serves or judges a published snapshot: HTTP, the seed
// table, the judge (the alert evaluator's thread).
mod http;
mod notify;
mod table;
// Floor 5: the wiring.
mod app;

pub use app::{Error, init_logger, run};

#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals;
