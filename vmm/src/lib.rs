//! irqbench: a minimal KVM VMM that boots its own guest kernel and measures what each way of
//! saving and restoring the x86 interrupt flag costs, in VM exits and in cycles.
//!
//! Modules follow the data flow, in layers (docs/ARCHITECTURE.md §2, checked by tests/layers.rs):
//! config TOML → [`config`] → [`config::plan::Plan`] → [`measure`] (preflight, groups in
//! interleaved rounds, each dispatched to a [`session`]: a booted [`machine`] with one [`vcpu`]
//! thread per vCPU, whose guest-written records [`vcpu::protocol`] validates and whose
//! [`kvm::stats`] deltas it reads) → [`analysis`] (estimators, counts, disturbance, answers:
//! pure functions over rounds) → [`results::RunReport`] → [`report`] (renders: table, JSON,
//! CSV, Markdown, SVG, compare) → [`files::write`] (files replaced only where a regular file or
//! nothing is, and stdout); [`validate`] is the host self-test the CLI runs before a plan, and
//! every run is also kept in [`history`] (SQLite: trends, baselines, the `check` gate).

pub mod analysis;
pub mod config;
pub mod files;
pub mod history;
pub mod host;
pub mod identity;
pub mod kvm;
pub mod machine;
pub mod measure;
pub mod reference;
pub mod report;
pub mod results;
pub mod session;
pub mod statistics;
pub mod text;
pub mod validate;
pub mod vcpu;

/// An error and every `#[source]` below it, joined by `separator` (our errors never repeat
/// their source in their own message, so the chain reads without duplication).
pub fn error_chain(e: &dyn std::error::Error, separator: &str) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(separator);
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}
