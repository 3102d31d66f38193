//! Pure functions over measured data, no VM and no rendering: the per-round estimators and
//! their CIs, counts per operation, which blocks were disturbed, the host's speed steps, the
//! replicates' combination, the run's answers, two runs compared and the rerun interval.
//! `measure` feeds them a group's rounds; tests feed them synthetic ones.

pub mod answers;
pub mod compare;
pub mod counts;
pub mod disturbance;
pub mod estimate;
pub mod estimators;
pub mod latency;
pub mod replicates;
pub mod rerun;
pub mod speed;
