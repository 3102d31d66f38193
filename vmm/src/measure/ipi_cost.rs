//! The `ipi` sender's cost per IPI over a group's dispatches ([`IpiSenderCost`]): its exits as
//! counts (each dispatch a round), its ICR-write cycles as a median.

use crate::analysis::counts::{self, RoundCount};
use crate::results::{IpiSenderCost, Summary};
use crate::session::ipi_sender::SenderSample;

/// One dispatch of the sender.
#[derive(Clone, Copy, Debug, Default)]
pub struct SenderDispatch {
    pub ipis: u64,
    /// Its vCPU's KVM `exits`; `None` without stats.
    pub exits: Option<u64>,
    pub vmm_exits: u64,
}

/// What the sender did in each dispatch of a group so far.
#[derive(Clone, Debug, Default)]
pub struct SenderTotals {
    pub icr: Option<&'static str>,
    pub dispatches: Vec<SenderDispatch>,
    pub icr_cycles: Vec<f64>,
}

impl SenderTotals {
    pub fn add(&mut self, s: &SenderSample) {
        self.icr = Some(s.icr);
        let exits = s
            .stats
            .as_ref()
            .and_then(|d| d.get(crate::results::EXITS_STAT));
        self.dispatches.push(SenderDispatch {
            ipis: s.ipis,
            exits,
            vmm_exits: s.vmm_exits,
        });
        self.icr_cycles
            .extend(s.icr_cycles.iter().map(|c| f64::from(*c)));
    }

    /// The figures; `None` for a group without a sender.
    pub fn cost(&self) -> Option<IpiSenderCost> {
        let icr = self.icr?;
        let per_ipi = |events: fn(&SenderDispatch) -> Option<u64>| {
            let rounds: Option<Vec<RoundCount>> = self
                .dispatches
                .iter()
                .map(|d| events(d).map(|e| RoundCount::gross(e, d.ipis)))
                .collect();
            counts::estimate(&rounds?)
        };
        let cycles = Summary::from_samples(&self.icr_cycles);
        Some(IpiSenderCost {
            icr: icr.to_string(),
            ipis: self.dispatches.iter().map(|d| d.ipis).sum(),
            exits_per_ipi: per_ipi(|d| d.exits),
            vmm_exits_per_ipi: per_ipi(|d| Some(d.vmm_exits)),
            icr_write_cycles: cycles.estimate(),
            icr_write_samples: self.icr_cycles.len(),
        })
    }
}
