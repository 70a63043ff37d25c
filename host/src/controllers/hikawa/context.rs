//! What every reconcile is handed: the API client, the shards and their writers, the index of
//! children, the default rules and the rule sets, the metrics, the limits and the per-Hikawa
//! pacing and each module's places.

use std::sync::Arc;

use kube::Client;

use crate::controllers::hikawa::children::ChildIndex;
use crate::controllers::hikawa::pace::Pace;
use crate::controllers::hikawa::places::Places;
use crate::controllers::hikawa::queue::Queue;
use crate::controllers::writes::events::EventSink;
use crate::process::health::Health;
use crate::process::leader::ShardTable;
use crate::process::metrics::Metrics;
use crate::supply::ModuleLoader;
use crate::supply::contract::plan_check::PlanLimits;
use crate::supply::contract::rules::RulesSlot;
use crate::supply::serving::RuleSets;
use crate::controllers::hikawa::entropy::Entropy;

/// What lives as long as the process, whichever replica leads: the default rules, the
/// compiled modules, the metrics, and what readiness is made of.
#[derive(Clone)]
pub struct Shared {
    /// The operator's default module: it decides for Hikawas that name no rules.
    pub rules: Arc<RulesSlot>,
    pub modules: Arc<ModuleLoader>,
    pub metrics: Arc<Metrics>,
    pub health: Arc<Health>,
    /// Registries the default module and rule sets pull from (one cache, one bound on pulls).
    pub registry: Arc<crate::supply::oci::Registry>,
}

impl Shared {
    pub fn new(rules: Arc<RulesSlot>, modules: Arc<ModuleLoader>) -> Self {
        let serving = rules.clone();
        let health = Arc::new(Health::new(move || serving.current().map(|r| r.identity().digest.clone())));
        // Replaced by the configured one at start; neither asks the environment until a
        // registry is first needed.
        let registry = crate::supply::oci::Registry::unconfigured();
        Shared { rules, modules, metrics: Arc::new(Metrics::new()), health, registry }
    }
}

/// Where one shard's writes go: its fenced client (refused unless this replica surely holds
/// the shard), its Event sink on that client, and the label its children carry.
pub struct Writer {
    pub client: Client,
    pub events: EventSink,
    pub shard_label: String,
}

impl Writer {
    /// One per shard of `shards`, by shard number; Events report `instance`.
    pub fn per_shard(shards: &ShardTable, instance: &str) -> Vec<Writer> {
        (0..shards.count)
            .map(|shard| Writer {
                client: shards.client(shard).clone(),
                events: EventSink::new(shards.client(shard).clone(), "zundoko-operator", instance),
                shard_label: shards.label(shard),
            })
            .collect()
    }
}

pub struct Context {
    /// Reads (every request bounded in time).
    pub client: Client,
    /// Which shards this replica decides for.
    pub shards: Arc<ShardTable>,
    /// Per shard, by shard number.
    pub writers: Vec<Writer>,
    pub rules: Arc<RulesSlot>,
    /// The ZundokoRules and what each serves.
    pub rulesets: Arc<RuleSets>,
    pub metrics: Arc<Metrics>,
    pub plan_limits: PlanLimits,
    pub children: Arc<ChildIndex>,
    pub pace: Pace,
    /// How many Hikawas decide with each module at once; the rest wait in its line.
    pub places: Places,
    /// Each decision's entropy: random, or seeded for a replay.
    pub entropy: Entropy,
    /// When each Hikawa came due, for the queue's depth and wait.
    pub queue: Queue,
    /// Each tenant's decisions and their guest time (its metrics and its rule sets' status).
    pub calls: Arc<crate::supply::tenant_calls::TenantCalls>,
}
