//! The plan contract the host enforces: the rules a decision is asked of, a module or the
//! native rules (`rules`: `Rules`, `decide`), and the check every plan passes before any of it
//! is written (`plan_check`).

pub mod plan_check;
pub mod rules;

use crate::process::metrics::Metrics;

/// A decision counted in the metrics (the guest call's time and fuel, the plan's actions): the
/// metrics take plain values, this gives them a [`rules::Decision`]'s.
pub trait RecordDecision {
    fn decided(&self, decision: &rules::Decision);
}

impl RecordDecision for Metrics {
    fn decided(&self, decision: &rules::Decision) {
        self.guest_called(decision.elapsed, decision.fuel_used, decision.outcome.as_ref().ok());
    }
}
