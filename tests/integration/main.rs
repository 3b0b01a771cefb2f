//! Integration tests: one binary that spawns the real exporter on free
//! loopback ports and talks to it over real sockets.

// A test tells its scenario whole: clippy's bound on a function's
// length (the workspace's lints) is for the code that ships.
#![allow(clippy::too_many_lines)]
mod abuse;
mod alertmanager;
mod alertmanager_own;
#[cfg(feature = "alertmanager-tls")]
mod alertmanager_tls;
mod arm64;
mod cli;
mod collectors;
mod common;
mod counts;
mod dcgm;
mod dcgm_cli;
mod dcgm_files;
mod dcgm_prof;
mod deploy;
mod dist;
mod engine_names;
mod engines;
mod exposition;
#[cfg(feature = "kubernetes")]
#[path = "../support/fake_kubelet.rs"]
mod fake_kubelet;
mod faults;
mod gpu_check;
mod helm;
mod http;
mod image;
mod kernel_log;
#[cfg(feature = "kubernetes")]
mod kubelet;
mod listen;
mod lost;
mod nvidia_real;
mod packages;
#[path = "../support/pki.rs"]
mod pki;
mod prometheus;
mod ranges;
mod release;
mod replicas;
#[path = "../support/response.rs"]
mod response;
mod rules;
mod sources;
mod startup;
mod status;
#[path = "../support/tls_client.rs"]
mod tls_client;
mod unix_signals;
mod web;
