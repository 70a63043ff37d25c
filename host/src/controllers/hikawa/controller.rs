//! The controller: kube-runtime's `Controller` on Hikawa, owning Zundoko and Kiyoshi, and the
//! streams that wake it (a module swap, a rule set's change, a shard taken, a shard's children
//! listed, a module's place freed). The operator's wiring starts it beside the ZundokoRules controller
//! (`operator/controllers.rs`). Each reconcile (`reconcile.rs`): observe
//! (the Hikawa, its children from the compact index), choose the rules (the default module, or
//! the rule set it names, or that rule set's candidate for its share), pace (decide only when
//! something but this process's own writes changed, or when the rules asked to be called back;
//! see `pace.rs`), decide (the guest, then the plan check), apply, requeue.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::{self, Store, reflector};
use kube::runtime::watcher::Event;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tracing::info;

use crate::crd::Hikawa;
use crate::supply::serving::RuleSets;
use crate::controllers::hikawa::apply::HIKAWA_LABEL;
use crate::controllers::hikawa::children::{self, ChildIndex};
use crate::process::leader::ShardTable;
use crate::controllers::hikawa::context::{Context, Shared, Writer};
use crate::controllers::hikawa::lean::{self, LeanHikawa};
use crate::controllers::hikawa::pace::{Pace, PaceSettings};
use crate::controllers::hikawa::places::Places;
use crate::controllers::hikawa::queue::{self, Queue};
use crate::supply::contract::plan_check::PlanLimits;
use crate::controllers::hikawa::entropy::Entropy;
use crate::controllers::hikawa::wakes;

/// Where rule sets' ConfigMaps are read from when nothing else is said: the namespace
/// `make deploy` installs the operator in.
pub const DEFAULT_RULES_NAMESPACE: &str = "zundoko-system";

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Watch only this namespace; all namespaces if `None`.
    pub namespace: Option<String>,
    /// Hikawas reconciled at once.
    pub concurrency: u16,
    pub plan_limits: PlanLimits,
    /// When and how often each Hikawa may decide: backoff, idle budget, requeue floor.
    pub pace: PaceSettings,
    /// Names this process in Events (`reportingInstance`).
    pub instance: String,
    /// Namespaces whose ConfigMaps ZundokoRules may name as sources.
    pub rules_namespaces: Vec<String>,
    /// Draw every Hikawa's entropy from a generator seeded with this (as `simulate --seed`
    /// does), for tests and replays; random if `None`.
    pub entropy_seed: Option<u64>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            namespace: None,
            concurrency: 16,
            plan_limits: PlanLimits::default(),
            pace: PaceSettings::default(),
            instance: std::env::var("HOSTNAME").unwrap_or_else(|_| "zundoko-operator".into()),
            rules_namespaces: vec![DEFAULT_RULES_NAMESPACE.into()],
            entropy_seed: None,
        }
    }
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// What the Hikawa controller shares with the rule-set controller, made by the operator's
/// wiring (`operator/controllers.rs`): the rule sets' serving table and the signal of the rule
/// sets whose serving modules changed, and the Hikawa store (the rule-set controller counts a
/// rule set's Hikawas from it) with its writer, which this controller's watch fills.
pub struct Shares {
    pub rulesets: Arc<RuleSets>,
    pub changed: tokio::sync::mpsc::UnboundedReceiver<String>,
    pub hikawas: Store<Hikawa>,
    pub writer: reflector::store::Writer<Hikawa>,
}

/// Run until `shutdown` completes, then let reconciles in flight finish. The Hikawas a
/// module swap concerns (those without `spec.rules` for the default module, a rule set's own
/// for a rule set) are reconciled again after it.
pub async fn run(client: Client, shards: Arc<ShardTable>, shared: Shared, settings: Settings, shares: Shares, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let ns = settings.namespace.as_deref();
    let Shares { rulesets, changed, hikawas, writer } = shares;
    let (woken, in_line) = tokio::sync::mpsc::unbounded_channel();
    let ctx = Arc::new(Context {
        client: client.clone(),
        shards: shards.clone(),
        writers: Writer::per_shard(&shards, &settings.instance),
        rules: shared.rules.clone(),
        rulesets: rulesets.clone(),
        metrics: shared.metrics.clone(),
        plan_limits: settings.plan_limits.clone(),
        children: Arc::new(ChildIndex::default()),
        pace: Pace::new(settings.pace.clone()),
        places: Places::new(settings.concurrency, woken),
        entropy: Entropy::new(settings.entropy_seed),
        queue: Queue::default(),
        calls: shared.modules.engine().tenant_calls().clone(),
    });
    {
        // Weak: the metrics outlive this term's controller and must not keep its context.
        let ctx = Arc::downgrade(&ctx);
        shared.metrics.queue_depth_from(QUEUE, Box::new(move || ctx.upgrade().map(|ctx| ctx.queue.depth(std::time::Instant::now()) as i64)));
    }
    // managedFields, labels and annotations (kubectl's last-applied-configuration among them:
    // up to 256 KiB) are never read here and are most of a small object: not even decoded
    // (lean.rs). A Hikawa
    // that is gone is forgotten by the pacing too (after a relist: any not listed).
    // Whether the Hikawas have been listed once, for readiness. (Not the store's own
    // `wait_until_ready`: kube wakes only one of its waiters, and the Controller is one.)
    let (listed, hikawas_listed) = tokio::sync::watch::channel(false);
    let hikawa_events = {
        let (ctx, hikawas, asked) = (ctx.clone(), hikawas.clone(), asks(&ctx));
        reflector(
            writer,
            watcher(api::<LeanHikawa>(&client, ns), watcher::Config::default()).default_backoff().map_ok(lean::hikawa_event),
        )
        .inspect_ok(move |event| match event {
            Event::Delete(hikawa) => {
                let uid = hikawa.uid().unwrap_or_default();
                ctx.pace.forget(&uid);
                ctx.entropy.forget(&uid);
                ctx.rulesets.forget_member(&uid);
                ctx.places.forget(&reflector::ObjectRef::from_obj(hikawa));
                ctx.queue.forget(&queue::key_of(hikawa));
            }
            Event::InitDone => {
                let alive: std::collections::HashSet<String> = hikawas.state().iter().filter_map(|h| h.uid()).collect();
                ctx.pace.retain(|uid| alive.contains(uid));
                ctx.rulesets.retain_members(|uid| alive.contains(uid));
                listed.send_replace(true);
            }
            _ => {}
        })
        .applied_objects()
        .inspect_ok(asked)
    };
    // Only the children of the shards held: the watch follows them.
    let zundokos = children::zundoko_stream(api(&client, ns), HIKAWA_LABEL, shards.held(), shards.count, ctx.children.clone()).inspect_ok(owner_asks(&ctx));
    let kiyoshis = children::kiyoshi_stream(api(&client, ns), HIKAWA_LABEL, shards.held(), shards.count, ctx.children.clone()).inspect_ok(owner_asks(&ctx));

    let _readiness = readiness(&shards, &shared, &ctx, hikawas_listed);
    let swapped = wakes::swapped(hikawas.clone(), shared.rules.swaps(), changed).inspect(wakes_ask(&ctx));
    let taken = wakes::taken(hikawas.clone(), ctx.clone()).inspect(wakes_ask(&ctx));
    let covered = wakes::covered(hikawas.clone(), ctx.children.coverage(), ctx.shards.clone()).inspect(wakes_ask(&ctx));
    let place_free = wakes::place_free(in_line).inspect(wakes_ask(&ctx));
    info!(namespace = ns.unwrap_or("(all)"), concurrency = settings.concurrency, "starting the Hikawa controller");
    Controller::for_stream(hikawa_events, hikawas)
        .owns_stream(zundokos)
        .owns_stream(kiyoshis)
        .reconcile_on(swapped)
        .reconcile_on(taken)
        .reconcile_on(covered)
        .reconcile_on(place_free)
        .with_config(controller::Config::default().concurrency(settings.concurrency))
        .graceful_shutdown_on(shutdown)
        .run(super::reconcile::reconcile, super::reconcile::error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "reconcile failed");
            }
        })
        .await;
    info!("the Hikawa controller stopped");
}

/// The Hikawa controller's queue, as controller-runtime names a workqueue in its metrics.
pub const QUEUE: &str = "hikawa";

// Every trigger stream tells the queue (queue.rs) that its Hikawa is due, before the
// Controller's scheduler takes it: a Hikawa's own watch event, a child's (its owner, as
// kube-runtime maps it), a wake-up.
fn asks(ctx: &Arc<Context>) -> impl Fn(&Hikawa) + use<> {
    let ctx = ctx.clone();
    move |hikawa| ctx.queue.due(queue::key_of(hikawa), std::time::Instant::now())
}

fn owner_asks<C: kube::Resource>(ctx: &Arc<Context>) -> impl Fn(&C) + use<C> {
    let ctx = ctx.clone();
    move |child| {
        let ns = child.meta().namespace.clone().unwrap_or_default();
        for owner in child.meta().owner_references.iter().flatten().filter(|o| o.kind == "Hikawa") {
            ctx.queue.due((ns.clone(), owner.name.clone()), std::time::Instant::now());
        }
    }
}

fn wakes_ask(ctx: &Arc<Context>) -> impl Fn(&reflector::ObjectRef<Hikawa>) + use<> {
    let ctx = ctx.clone();
    move |hikawa| ctx.queue.due((hikawa.namespace.clone().unwrap_or_default(), hikawa.name.clone()), std::time::Instant::now())
}

/// What readiness is made of while the controller runs: the shards held (none: a ready
/// standby), and the caches synced. Both tasks end with the guards returned: aborted when the
/// controller ends or is dropped (a lost term drops it mid-flight), they must not outlive the
/// caches they wait on, nor mark a later term's caches synced.
fn readiness(shards: &ShardTable, shared: &Shared, ctx: &Context, mut hikawas_listed: tokio::sync::watch::Receiver<bool>) -> [AbortOnDrop; 2] {
    let shards_shown = {
        let (mut held, health, count) = (shards.held(), shared.health.clone(), shards.count);
        AbortOnDrop(tokio::spawn(async move {
            loop {
                let n = held.borrow_and_update().len();
                health.set_shards(n, count);
                if held.changed().await.is_err() {
                    break;
                }
            }
        }))
    };
    let synced = {
        let (children, health) = (ctx.children.clone(), shared.health.clone());
        AbortOnDrop(tokio::spawn(async move {
            let listed = async move { hikawas_listed.wait_for(|listed| *listed).await.is_ok() };
            let _ = futures::join!(children.synced(), listed);
            health.set_caches_synced();
        }))
    };
    [shards_shown, synced]
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How long a Hikawa waits for its shard's children to be listed, or for the rule sets to be,
/// before it looks again by itself: what ends the wait is the wake-up when they are (a stream
/// of `run`), so waiting costs nothing; this only bounds a wake-up that never came.
pub const WAITING_FALLBACK: Duration = Duration::from_secs(30);

/// When a reconcile comes back for Said Events it could not publish.
pub const UNSAID_RETRY: Duration = Duration::from_millis(500);
