//! The answers of a run: each chosen comparison (b against a) gathered across the conditions
//! it was measured in, and how much the change itself changes between two conditions that
//! differ in one factor (the interaction). `analysis::answers` builds them from the groups'
//! comparisons; this is only their data.

use serde::{Deserialize, Serialize};

use super::{ComparedMetric, Estimate, ResultKind};
use crate::identity::Subject;

/// Bootstrap replicates behind every interaction's CI.
pub const INTERACTION_REPLICATES: usize = 2000;
/// The seed of the bootstrap streams: each condition's own seed is this mixed with the names
/// of its comparison and group, so one output is the same on every rerun.
pub const INTERACTION_SEED: u64 = 0x1A5B_E4C0_2017_0021;
/// How every interaction is computed (the JSON's `interaction_method` and the legend).
pub const INTERACTION_METHOD: &str = "interaction: per round, ln(b/a) of the paired figures \
     in each of the two groups; delta = median under the second condition - median under the \
     first (x100: log-points, about percentage points of the change; a round whose ratio is \
     <= 0, a net below its baseline, counts as ln 0 = -inf, which a median allows while fewer \
     than half the rounds are); 95% CI: percentile \
     bootstrap over rounds, each group's rounds resampled independently (2000 replicates from \
     a fixed seed per comparison and group, so every rerun prints the same digits), in runs of \
     n/20 consecutive rounds from 60 rounds on (a moving-block bootstrap: rounds close in time \
     can share the host's state)";

/// What one condition of an answer is: the facts a group's rows share.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Condition {
    /// The bench (first part of the group's name).
    pub bench: String,
    pub nesting: f64,
    /// `none`, `inject@1000Hz`, `lapic-timer@100us`, `pv-event@1000Hz`.
    pub irq_source: String,
    pub vcpus: u32,
    pub body_ops: u32,
}

/// The comparison of one answer in one condition: its group's paired comparison.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AnswerCondition {
    #[serde(flatten)]
    pub condition: Condition,
    /// `nesting 0, no load, 1 vCPU`.
    pub label: String,
    pub group: String,
    /// Median of per-round paired ratios b/a with its 95% CI (`null`s: no ratio).
    #[serde(with = "super::median_ci")]
    pub ratio: Option<Estimate>,
    pub rounds: u32,
    /// Both rows reached the plan's precision.
    pub precision_reached: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_ratio: Option<String>,
    /// How long the two rows' interrupts waited (their `pending_latency`), where both timed
    /// some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<WaitPair>,
    /// How many of each row's interrupts its restore let in (a's, then b's), where both rows
    /// took some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub let_in: Option<[LetIn; 2]>,
}

/// Of the interrupts a row took inside its blocks, those taken right after its restore (or
/// the `sti` shadow after it): the guest's record (`interrupt_sites`), gross totals over all
/// its blocks. Each is a pending interrupt the restore let in, which without APICv/AVIC is an
/// interrupt-window exit there (in KVM or, for `inject`, in the VMM).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LetIn {
    pub by_restore: u64,
    pub taken: u64,
}

impl LetIn {
    /// Whether an interrupt taken at `site` was let in by the restore: `restore…` and the
    /// skip's `enable…` sites.
    pub fn lets_in(site: &str) -> bool {
        site.starts_with("restore") || site.starts_with("enable")
    }

    /// Whether an interrupt taken at `site` had waited for IF: taken right after the restore,
    /// or after any `sti`'s shadow (a nested loop's outer section ends with the loop's own).
    pub fn waited_for_if(site: &str) -> bool {
        LetIn::lets_in(site) || site.ends_with("(after sti shadow)")
    }

    /// From a row's interrupt sites.
    pub fn of(sites: &[super::ExitSite]) -> Option<LetIn> {
        let taken: u64 = sites.iter().map(|s| s.total).sum();
        let by_restore = sites
            .iter()
            .filter(|s| LetIn::lets_in(&s.site))
            .map(|s| s.total)
            .sum();
        (taken > 0).then_some(LetIn { by_restore, taken })
    }
}

/// The `pending_latency` of a condition's two rows: a's, then b's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WaitPair {
    pub a: super::PendingLatency,
    pub b: super::PendingLatency,
}

/// The one factor two conditions of an interaction differ in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Factor {
    /// The interrupt source or its rate.
    #[default]
    Load,
    Nesting,
    Vcpus,
}

impl Factor {
    pub fn name(self) -> &'static str {
        match self {
            Factor::Load => "load",
            Factor::Nesting => "nesting",
            Factor::Vcpus => "vCPUs",
        }
    }
}

/// How the change of b against a differs between two conditions ([`INTERACTION_METHOD`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Interaction {
    pub factor: Factor,
    /// Indexes into the answer's `conditions`: the change under `to` minus under `from`.
    pub from: usize,
    pub to: usize,
    /// `inject 1 kHz vs no load`.
    pub label: String,
    /// What the two conditions share: `nesting 0, 1 vCPU`.
    pub at: String,
    /// Median ln(b/a) under `to` minus under `from`, with its 95% bootstrap CI (`null`s when
    /// there is no estimate; `no_estimate` says why).
    #[serde(with = "super::median_ci")]
    pub delta_log: Option<Estimate>,
    /// Paired rounds of the two groups.
    pub rounds: [u32; 2],
    /// The seeds of the two groups' bootstrap streams (`from`, `to`).
    pub seeds: [u64; 2],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_estimate: Option<String>,
}

/// One chosen comparison across the conditions of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// What was compared, `b vs a` (written as the names).
    pub a: Subject,
    pub b: Subject,
    pub kind: ResultKind,
    pub metric: ComparedMetric,
    pub conditions: Vec<AnswerCondition>,
    pub interactions: Vec<Interaction>,
}
