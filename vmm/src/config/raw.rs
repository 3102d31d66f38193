//! The file as serde sees it: loose types (i64, f64, String) with spans, checked afterwards in
//! `values` and `expand` so every error can quote the schema's range and the value's place.
//!
//! Removed keys (`run.repeats`, `bench.iterations`, ...) are absent: `translate` finds them in
//! the spanned document before serde runs and says what replaced them.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub name: Spanned<String>,
    pub description: Option<String>,
    pub run: Option<RawRun>,
    pub report: Option<RawReport>,
    pub bench: Option<Spanned<Vec<RawBench>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReport {
    pub redact: Option<SpannedList<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRun {
    pub memory_mib: Option<Spanned<i64>>,
    pub precision: Option<Spanned<f64>>,
    pub max_seconds: Option<Spanned<f64>>,
    pub min_rounds: Option<Spanned<i64>>,
    pub block_us: Option<Spanned<i64>>,
    pub replicates: Option<Spanned<i64>>,
    pub pin: Option<bool>,
    pub hypercall: Option<Spanned<String>>,
    pub phase_timeout_ms: Option<Spanned<i64>>,
    pub vcpus: Option<Spanned<i64>>,
}

pub(super) type SpannedList<T> = Spanned<Vec<Spanned<T>>>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBench {
    pub name: Spanned<String>,
    pub kind: Option<Spanned<String>>,
    pub strategies: Option<SpannedList<String>>,
    pub insns: Option<SpannedList<String>>,
    pub weights: Option<Spanned<BTreeMap<Spanned<String>, Spanned<i64>>>>,
    pub nesting: Option<SpannedList<f64>>,
    pub body_ops: Option<Spanned<i64>>,
    pub vcpus: Option<SpannedList<i64>>,
    pub block_ops: Option<Spanned<i64>>,
    pub seed: Option<Spanned<i64>>,
    pub irq: Option<SpannedList<RawIrq>>,
    pub compare: Option<Spanned<Vec<SpannedList<String>>>>,
    pub reference: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawIrq {
    pub source: Spanned<String>,
    pub period_us: Option<Spanned<f64>>,
    pub rate_hz: Option<Spanned<f64>>,
}
