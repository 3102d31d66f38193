//! A host validation as a report records it: every check's verdict, expected and measured.

use serde::{Deserialize, Serialize};

use super::host::KvmFlavour;

/// Which checks run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// `run`'s subset: flavour, doorbells, TSC, CPUID and cli exits, noise from files.
    #[default]
    Quick,
    /// `irqbench validate`: every check.
    Full,
}

/// One check's result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// `group.name`, e.g. `tsc.rate`.
    pub id: String,
    pub verdict: Verdict,
    pub expected: String,
    pub measured: String,
    /// Why a WARN or FAIL, or what a PASS on PVM means.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// A validation of this host: every check and the worst verdict.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Validation {
    pub scope: Scope,
    /// The declared flavour the expectations were taken from.
    pub flavour: KvmFlavour,
    pub verdict: Verdict,
    /// Wall time from its first check to its verdict (in a run, the first group's boot and
    /// warm-up run inside it, while the TSC reading's span passes).
    pub seconds: f64,
    pub checks: Vec<Check>,
    /// The guest could not be booted, so the checks that needed it were not made (the guest
    /// image, or this process's limits, are the cause, not the host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_boot_failed: Option<String>,
    /// In a run: where its guest checks ran, `beside the first group's preparation` or
    /// `before the first group: <why not beside>` (absent in `irqbench validate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
}

impl Validation {
    pub fn count(&self, v: Verdict) -> usize {
        self.checks.iter().filter(|c| c.verdict == v).count()
    }
}

/// PASS: as the flavour should; WARN: off, but explained and not invalidating the numbers;
/// FAIL: the host does not behave as its flavour must, so numbers measured on it mislead.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    #[default]
    Pass,
    /// The check needs what this host cannot give (hardware timing on an emulated CPU), or a
    /// signal stopped the run before it was measured: said with the reason, neither a PASS nor
    /// a FAIL.
    #[serde(rename = "not-judged")]
    NotJudged,
    Warn,
    Fail,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::NotJudged => "NOT JUDGED",
            Verdict::Warn => "WARN",
            Verdict::Fail => "FAIL",
        }
    }
}
