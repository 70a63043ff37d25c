//! What every reconcile is handed: the API client, the index of children, the current
//! rules, the metrics, the limits, the per-Hikawa pacing and the Event sink.

use std::sync::Arc;

use kube::Client;

use crate::children::ChildIndex;
use crate::events::EventSink;
use crate::health::Health;
use crate::metrics::Metrics;
use crate::pace::Pace;
use crate::plan_check::PlanLimits;
use crate::rules::RulesSlot;

/// What lives as long as the process, whichever replica leads: the rules, the metrics, and
/// what readiness is made of.
#[derive(Clone)]
pub struct Shared {
    pub rules: Arc<RulesSlot>,
    pub metrics: Arc<Metrics>,
    pub health: Arc<Health>,
}

impl Shared {
    pub fn new(rules: Arc<RulesSlot>) -> Self {
        let health = Arc::new(Health::new(rules.clone()));
        Shared { rules, metrics: Arc::new(Metrics::new()), health }
    }
}

pub struct Context {
    pub client: Client,
    pub events: EventSink,
    pub rules: Arc<RulesSlot>,
    pub metrics: Arc<Metrics>,
    pub plan_limits: PlanLimits,
    pub children: Arc<ChildIndex>,
    pub pace: Pace,
}
