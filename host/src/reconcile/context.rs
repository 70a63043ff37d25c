//! What every reconcile is handed: the API client, the index of children, the default rules
//! and the rule sets, the metrics, the limits, the per-Hikawa pacing and the Event sink.

use std::sync::Arc;

use kube::Client;

use crate::modules::ModuleLoader;
use crate::modules::rules::RulesSlot;
use crate::modules::rulesets::RuleSets;
use crate::process::health::Health;
use crate::process::metrics::Metrics;
use crate::reconcile::children::ChildIndex;
use crate::reconcile::events::EventSink;
use crate::reconcile::pace::Pace;
use crate::reconcile::plan_check::PlanLimits;

/// What lives as long as the process, whichever replica leads: the default rules, the
/// compiled modules, the metrics, and what readiness is made of.
#[derive(Clone)]
pub struct Shared {
    /// The operator's default module: it decides for Hikawas that name no rules.
    pub rules: Arc<RulesSlot>,
    pub modules: Arc<ModuleLoader>,
    pub metrics: Arc<Metrics>,
    pub health: Arc<Health>,
}

impl Shared {
    pub fn new(rules: Arc<RulesSlot>, modules: Arc<ModuleLoader>) -> Self {
        let health = Arc::new(Health::new(rules.clone()));
        Shared { rules, modules, metrics: Arc::new(Metrics::new()), health }
    }
}

pub struct Context {
    pub client: Client,
    pub events: EventSink,
    pub rules: Arc<RulesSlot>,
    /// The ZundokoRules and what each serves.
    pub rulesets: Arc<RuleSets>,
    pub metrics: Arc<Metrics>,
    pub plan_limits: PlanLimits,
    pub children: Arc<ChildIndex>,
    pub pace: Pace,
}
