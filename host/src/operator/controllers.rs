//! Both controllers, started together over what they share: the rule sets' serving table (the
//! rule-set controller publishes what serves, the Hikawa controller chooses from it and hears
//! when it changes) and the Hikawa store (the Hikawa controller's watch fills it, the rule-set
//! controller counts a rule set's Hikawas from it). Neither controller starts the other.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kube::Client;
use kube::runtime::reflector;
use tracing::warn;

use crate::controllers::hikawa::context::Shared;
use crate::controllers::hikawa::controller::{self as hikawa, Settings, Shares};
use crate::controllers::rulesets::controller as rulesets;
use crate::process::leader::ShardTable;
use crate::supply::serving::RuleSets;

/// How long reconciles in flight may take to finish after shutdown (each of their requests is
/// bounded by the API timeout, each guest call by its fuel), leaving the rest of the pod's 30 s
/// for handing the shards back.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Run both controllers until `shutdown` completes, then let reconciles in flight finish
/// (within [`SHUTDOWN_GRACE`]).
pub async fn run(client: Client, shards: Arc<ShardTable>, shared: Shared, settings: Settings, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let shutdown = shutdown.shared();
    let (rulesets, signals) = RuleSets::new();
    let rulesets = Arc::new(rulesets);
    let (hikawas, writer) = reflector::store();
    shared.health.set_reconciling(true);
    let rules_controller = rulesets::run(
        client.clone(),
        shards.clone(),
        rulesets.clone(),
        signals.wake,
        hikawas.clone(),
        shared.modules.clone(),
        shared.metrics.clone(),
        rulesets::Settings { namespaces: settings.rules_namespaces.clone(), instance: settings.instance.clone(), registry: shared.registry.clone() },
        shutdown.clone(),
    );
    let shares = Shares { rulesets, changed: signals.changed, hikawas, writer };
    let hikawa_controller = hikawa::run(client, shards, shared.clone(), settings, shares, shutdown.clone());
    // Graceful, within bounds: kube-runtime's graceful shutdown never ends for a controller
    // whose cache was never listed (its runner waits for the store, which nothing fills any
    // more), so a stop soon after a start with a failing API server would hang. Past
    // SHUTDOWN_GRACE the controllers are dropped, and with them whatever still runs.
    let out_of_grace = async move {
        shutdown.await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        _ = async { futures::join!(hikawa_controller, rules_controller) } => {}
        _ = out_of_grace => warn!(grace_secs = SHUTDOWN_GRACE.as_secs(), "the controllers did not stop within their grace period after shutdown; stopped them"),
    }
    shared.health.set_reconciling(false);
}
