//! The ZundokoRules controller: for each rule set, check its sources (a module per digest,
//! compiled once), advance its candidate's rollout from what the status recorded and what the
//! Hikawa reconciles counted, publish what serves ([`RuleSets::publish`]), and tell the user
//! in the status and in Events. Level-triggered like the Hikawa controller: everything it
//! decides comes from the resource, its ConfigMaps and its status, so a restarted operator
//! resumes a rollout where the status left it.
//!
//! A reconcile reads as its steps, each in a file of its own beside this one, each handing
//! the next a small struct of what it found: [`resolve`](super::resolve) (who writes, the
//! status before, a tag's pin) -> [`check`](super::check) (the sources' modules, a followed
//! tag) -> [`roll_out`](super::roll_out) (the candidate's tally) -> [`publish`](super::publish)
//! (what serves, the status it calls for) -> [`record`](super::record) (the status and its
//! Events, this replica's count, the requeue). The rollout's rules are pure, in
//! [`tally`](super::tally).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch};
use kube::{Api, Client, ResourceExt};
use tokio::sync::mpsc;
use tracing::{Instrument, info, info_span, warn};

use super::check::check;
use super::publish::publish;
use super::record::record;
use super::resolve::resolve;
use super::roll_out::roll_out;
use super::status;
use super::tally::error_backoff;
use crate::controllers::writes::events::EventSink;
use super::policy::{self, Tenancy};
use crate::crd::{Hikawa, ReplicaCount, ZundokoNamespacedRules, ZundokoRules, ZundokoRulesStatus, ZundokoTenantPolicy};
use crate::process::leader::ShardTable;
use crate::process::metrics::Metrics;
use crate::supply::ModuleLoader;
use crate::supply::oci::ModuleRef;
use crate::supply::sandbox::RulesModule;
use crate::supply::serving::{RuleSets, Serving, Unavailable};
use crate::supply::sources::rulesets::{Checked, Problem, Sources};
use crate::supply::tenant::{RuleSetKey, Tenant};

/// What this process remembers of a rule set between reconciles: never an input to what
/// serves beyond the module that served last (kept while a newer source is refused).
#[derive(Default)]
pub(super) struct Memo {
    pub(super) stable: Option<Checked>,
    pub(super) candidate: Option<Checked>,
    /// The last module the source gave that passed its checks, and the keys it verified with
    /// (`Checked::trust`): it serves while a newer one is refused only under the same keys.
    pub(super) last_stable: Option<(Arc<RulesModule>, Option<String>)>,
    pub(super) checked_at: Option<String>,
    /// The status as last written (the cache may not show it yet), and when.
    pub(super) written: Option<(ZundokoRulesStatus, Instant)>,
    /// This replica's own count as it last wrote it (not being the writer), and when.
    pub(super) counted: Option<(ReplicaCount, Instant)>,
    /// When each source's ConfigMap (the source's, the candidate's) was last read.
    pub(super) read_at: [Option<Instant>; 2],
    pub(super) failures: u32,
    /// A tag resolved once: the reference as written (normalized) and the digest that serves,
    /// until the status records it (then the status says).
    pub(super) pinned: Option<(String, String)>,
    /// A followed tag: what it pointed at when last resolved, and when it was tried.
    pub(super) followed: Option<Followed>,
    /// Reconciles in a row that could not judge a tenant's rule set against its policy (the
    /// lists not done, its namespace unreadable): the next waits longer.
    pub(super) unjudged: u32,
    /// When this replica last took the tenant's usage and found nothing moved (usage.rs).
    pub(super) usage_looked: Option<zundoko_rules::TimestampMs>,
}

pub(super) struct Followed {
    pub(super) written: String,
    pub(super) digest: Option<String>,
    pub(super) tried_at: Instant,
    /// Tries in a row that failed: the next waits longer (at most the poll interval).
    pub(super) failures: u32,
    pub(super) problem: Option<Problem>,
    /// When it moved to a new artifact, within the last hour (`tally::slowed_poll`).
    pub(super) moved_at: Vec<Instant>,
}

pub struct Context {
    /// Reads, and this replica's own count in a rule set's status.
    pub(super) client: Client,
    /// A rule set's status and Events are written by one replica: the holder of its shard.
    pub(super) shards: Arc<ShardTable>,
    pub(super) sets: Arc<RuleSets>,
    pub(super) sources: Sources,
    pub(super) hikawas: Store<Hikawa>,
    /// Per shard: Events through the shard's fenced client.
    pub(super) events: Vec<EventSink>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) modules: Arc<ModuleLoader>,
    /// By uid: a rule set deleted and created again under its name starts afresh.
    pub(super) memo: Mutex<HashMap<String, Memo>>,
    /// The tenants' policies, namespaces and rule sets, as listed (policy.rs).
    pub(super) tenancy: Tenancy,
    /// The kinds of rule set listed so far, a bit each (`ZundokoRules` 1,
    /// `ZundokoNamespacedRules` 2): once both are, a name not found is not there.
    pub(super) lists_done: std::sync::atomic::AtomicU8,
    /// The `ZundokoRules` as listed (set when their controller starts): with the tenants',
    /// the tags every rule set names (`tell_named_tags`).
    pub(super) cluster_rule_sets: std::sync::OnceLock<Store<ZundokoRules>>,
    /// Told which tags the rule sets name, so the cache's records of others can go.
    pub(super) registry: Arc<crate::supply::oci::Registry>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
}

/// What the rule set controller needs.
pub struct Settings {
    /// Namespaces whose ConfigMaps (and pull secrets) rule sets may name.
    pub namespaces: Vec<String>,
    pub instance: String,
    /// Where artifacts are pulled from (the operator's one registry client and cache).
    pub registry: Arc<crate::supply::oci::Registry>,
}

/// Run the rule set controller until `shutdown`. `wake` names rule sets to reconcile at once.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    client: Client,
    shards: Arc<ShardTable>,
    sets: Arc<RuleSets>,
    wake: mpsc::UnboundedReceiver<String>,
    hikawas: Store<Hikawa>,
    modules: Arc<ModuleLoader>,
    metrics: Arc<Metrics>,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let (sources, configmaps) = Sources::watch(&client, &settings.namespaces, modules.clone(), settings.registry.clone());
    let (tenancy, tenancy_changes) = watch_tenancy(&client);
    let ctx = Arc::new(Context {
        tenancy,
        client: client.clone(),
        events: (0..shards.count).map(|s| EventSink::new(shards.client(s).clone(), "zundoko-operator", &settings.instance)).collect(),
        shards,
        sets: sets.clone(),
        sources,
        hikawas,
        metrics,
        modules,
        memo: Mutex::default(),
        lists_done: std::sync::atomic::AtomicU8::new(0),
        cluster_rule_sets: std::sync::OnceLock::new(),
        registry: settings.registry.clone(),
    });
    // Both kinds wake by key (`NAME`, `NAMESPACE/NAME`): each controller hears its own.
    let (cluster_wake, namespaced_wake) = split_wake(wake);
    let cluster = cluster_controller(client.clone(), ctx.clone(), cluster_wake, configmaps, &settings);
    let namespaced = namespaced_controller(client, ctx.clone(), namespaced_wake, tenancy_changes, &settings);
    info!(namespaces = ?settings.namespaces, "starting the ZundokoRules and ZundokoNamespacedRules controllers");
    let shutdown: std::pin::Pin<Box<dyn Future<Output = ()> + Send + Sync>> = Box::pin(shutdown);
    let shutdown = futures::FutureExt::shared(shutdown);
    futures::future::join(cluster(shutdown.clone()), namespaced(shutdown)).await;
    info!("the rule set controllers stopped");
}

/// The wake-ups by key, split by kind.
fn split_wake(mut wake: mpsc::UnboundedReceiver<String>) -> (mpsc::UnboundedReceiver<String>, mpsc::UnboundedReceiver<String>) {
    let (cluster_tx, cluster_rx) = mpsc::unbounded_channel();
    let (namespaced_tx, namespaced_rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(key) = wake.recv().await {
            let to = if RuleSetKey::parse(&key).tenant == Tenant::Cluster { &cluster_tx } else { &namespaced_tx };
            let _ = to.send(key);
        }
    });
    (cluster_rx, namespaced_rx)
}

type Shutdown = futures::future::Shared<std::pin::Pin<Box<dyn Future<Output = ()> + Send + Sync>>>;

/// What a rule set list's events tell the serving table (either kind: `keys` spells a key).
fn listed<K: kube::Resource<DynamicType = ()> + Clone>(ctx: &Context, store: &Store<K>, event: &Result<Event<K>, watcher::Error>, keys: fn(&K) -> RuleSetKey, namespaced: bool) {
    match event {
        Ok(Event::Apply(zr) | Event::InitApply(zr)) => ctx.sets.announce(&keys(zr).to_string()),
        Ok(Event::Delete(zr)) => ctx.forget(&keys(zr).to_string(), zr.meta().uid.as_deref()),
        Ok(Event::InitDone) => {
            let alive: std::collections::HashSet<String> = store.state().iter().map(|zr| keys(zr).to_string()).collect();
            // Only this kind's: the other kind's list keeps its own.
            ctx.sets.retain(|key| (RuleSetKey::parse(key).tenant != Tenant::Cluster) != namespaced || alive.contains(key));
            ctx.listed_one(namespaced);
        }
        // Without the kind's CRD there are none: Hikawas naming one hear so.
        Err(watcher::Error::InitialListFailed(kube::Error::Api(status))) if status.code == 404 => ctx.listed_one(namespaced),
        Err(error) => ctx.sets.set_unlistable(error.to_string()),
        _ => {}
    }
    // Apply and Delete come only once listed: the tags the rule sets name, told again.
    if super::policy::changes(event) {
        ctx.tell_named_tags();
    }
}

/// The cluster-scoped `ZundokoRules`, woken also by their ConfigMaps' changes.
fn cluster_controller(
    client: Client,
    ctx: Arc<Context>,
    wake: mpsc::UnboundedReceiver<String>,
    configmaps: crate::supply::sources::rulesets::ConfigMapChanges,
    settings: &Settings,
) -> impl FnOnce(Shutdown) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
    let (store, writer) = reflector::store();
    let rule_sets = {
        let (store, ctx) = (store.clone(), ctx.clone());
        let _ = ctx.cluster_rule_sets.set(store.clone());
        reflector::reflector(
            writer,
            watch(Api::<ZundokoRules>::all(client), watcher::Config::default()).default_backoff().modify(|zr| {
                zr.metadata.managed_fields = None;
                zr.metadata.annotations = None;
            }),
        )
        .inspect(move |event| listed(&ctx, &store, event, key_of, false))
        .applied_objects()
    };
    let named = {
        let store = store.clone();
        move |cm: kube::core::PartialObjectMeta<k8s_openapi::api::core::v1::ConfigMap>| {
            let (ns, name) = (cm.namespace().unwrap_or_default(), cm.name_any());
            store
                .state()
                .iter()
                .filter(|zr| names_configmap(zr, &ns, &name))
                .map(|zr| ObjectRef::from_obj(zr.as_ref()))
                .collect::<Vec<_>>()
        }
    };
    let woken = futures::stream::unfold(wake, |mut wake| async move { wake.recv().await.map(|key| (ObjectRef::<ZundokoRules>::new(&key), wake)) });
    // The operator's trusted keys changed: every rule set's module is verified again. With
    // --trusted-keys, its files are read again every KEYS_POLL (by a task of their own, started
    // here if the operator has not).
    settings.registry.keys().keep_current();
    let keys_changed = futures::stream::unfold(settings.registry.keys().subscribe(), |mut changed| async move { changed.changed().await.ok().map(|()| ((), changed)) });
    // A shard taken: its rule sets' status is this replica's to write now, not at their next
    // refresh (REFRESH_EVERY later): a standby that took over after its leader died, having
    // reconciled them as a non-writer, left their status unwritten for up to that long.
    let taken = ctx.shards.taken().map(|_| ());
    move |shutdown| {
        Box::pin(
            Controller::for_stream(rule_sets, store)
                .watches_stream(configmaps, named)
                .reconcile_on(woken)
                .reconcile_all_on(futures::stream::select(keys_changed, taken))
                .graceful_shutdown_on(shutdown)
                .run(reconcile, error_policy, ctx)
                .for_each(|result| async move {
                    if let Err(error) = result {
                        tracing::debug!(%error, "rule set reconcile failed");
                    }
                }),
        )
    }
}

/// The tenants' `ZundokoNamespacedRules`. Their ConfigMaps are not watched (the operator may
/// read only the one each names, by name): they are read again at each reconcile, at least
/// every `TENANT_CONFIGMAP_POLL` (record.rs).
fn namespaced_controller(
    client: Client,
    ctx: Arc<Context>,
    wake: mpsc::UnboundedReceiver<String>,
    tenancy_changes: futures::stream::BoxStream<'static, ()>,
    settings: &Settings,
) -> impl FnOnce(Shutdown) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
    let (store, writer) = (ctx.tenancy.rule_sets.clone(), ctx.tenancy.rule_sets_writer.lock().unwrap_or_else(|p| p.into_inner()).take().expect("the namespaced controller starts once"));
    let rule_sets = {
        let (store, ctx) = (store.clone(), ctx.clone());
        reflector::reflector(
            writer,
            watch(Api::<ZundokoNamespacedRules>::all(client), watcher::Config::default()).default_backoff().modify(|zr| {
                zr.metadata.managed_fields = None;
                zr.metadata.annotations = None;
            }),
        )
        .inspect(move |event| {
            if matches!(event, Ok(Event::InitDone)) {
                ctx.tenancy.listed.fetch_or(policy::RULE_SETS, std::sync::atomic::Ordering::SeqCst);
            }
            listed(&ctx, &store, event, namespaced_key_of, true)
        })
        .applied_objects()
    };
    let woken = futures::stream::unfold(wake, |mut wake| async move {
        let key = wake.recv().await?;
        let at = RuleSetKey::parse(&key);
        let object = ObjectRef::<ZundokoNamespacedRules>::new(&at.name).within(at.tenant.namespace().unwrap_or_default());
        Some((object, wake))
    });
    let keys_changed = futures::stream::unfold(settings.registry.keys().subscribe(), |mut changed| async move { changed.changed().await.ok().map(|()| ((), changed)) });
    let taken = ctx.shards.taken().map(|_| ());
    move |shutdown| {
        Box::pin(
            Controller::for_stream(rule_sets, store)
                .reconcile_on(woken)
                // A policy or a namespace's labels changed: every tenant's rule set is judged again.
                .reconcile_all_on(futures::stream::select(futures::stream::select(keys_changed, taken), tenancy_changes))
                .graceful_shutdown_on(shutdown)
                .run(reconcile_namespaced, error_policy_namespaced, ctx)
                .for_each(|result| async move {
                    if let Err(error) = result {
                        tracing::debug!(%error, "namespaced rule set reconcile failed");
                    }
                }),
        )
    }
}

/// The tenants' policies and the namespaces' labels, watched (their changes, which must be
/// polled, are what the namespaced controller judges again on); the tenants' rule sets' store
/// is filled by the namespaced controller's own watch.
fn watch_tenancy(client: &Client) -> (Tenancy, futures::stream::BoxStream<'static, ()>) {
    use std::sync::atomic::Ordering;
    let listed = Arc::new(std::sync::atomic::AtomicU8::new(0));
    let on_listed = |bit: u8| {
        let listed = listed.clone();
        // Whether the list is done for the first time (its bit newly set).
        move |done: bool| done && listed.fetch_or(bit, Ordering::SeqCst) & bit == 0
    };
    // A list refused (RBAC) or failing: every tenant rule set says so (policy::unreadable)
    // instead of waiting for a list in silence; the watch tries again with its backoff. What
    // may change a judgement wakes every tenant's rule set (policy::wakes: an object applied or
    // deleted, a list done, a failure that is new), not the watch's every retry (each would judge
    // them all again: a refused list was retried about once a second here).
    let unlisted = |bit: u8, what: &'static str| {
        let (listed, failed) = (on_listed(bit), Arc::new(Mutex::new(None)));
        let recorded = failed.clone();
        let wakes = move |outcome: Option<Result<(), policy::ListFailure>>, changes: bool| {
            let Some(outcome) = outcome else { return futures::future::ready(changes.then_some(())) };
            let first = listed(outcome.is_ok());
            let mut recorded = recorded.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(failure) = &outcome
                && recorded.as_ref() != Some(failure)
            {
                warn!(code = failure.code, message = %failure.message, "cannot list {what}: no tenant's rule set can be judged against a ZundokoTenantPolicy until they are");
            }
            let wake = policy::wakes(changes, first, recorded.as_ref(), &outcome);
            *recorded = outcome.err();
            futures::future::ready(wake.then_some(()))
        };
        (wakes, failed)
    };
    let (policies, policies_writer) = reflector::store();
    let (policies_listed, policies_unlisted) = unlisted(policy::POLICIES, "zundokotenantpolicies");
    let policy_changes = reflector::reflector(policies_writer, watch(Api::<ZundokoTenantPolicy>::all(client.clone()), watcher::Config::default()).default_backoff())
        // Without the policy's CRD there is none: every tenant is refused, saying so.
        .filter_map(move |event| {
            let (outcome, changes) = policy::policies_outcome(&event);
            policies_listed(outcome, changes)
        });
    let (namespaces, namespaces_writer) = reflector::store();
    let (namespaces_listed, namespaces_unlisted) = unlisted(policy::NAMESPACES, "namespaces");
    let namespace_changes = reflector::reflector(
        namespaces_writer,
        watch(Api::<kube::core::PartialObjectMeta<k8s_openapi::api::core::v1::Namespace>>::all(client.clone()), watcher::Config::default())
            .default_backoff()
            .modify(|ns| ns.metadata.managed_fields = None),
    )
    .filter_map(move |event| namespaces_listed(policy::list_outcome(&event), policy::changes(&event)));
    let (rule_sets, rule_sets_writer) = reflector::store();
    let rule_sets_writer = Arc::new(Mutex::new(Some(rule_sets_writer)));
    let tenancy = Tenancy { policies, namespaces, rule_sets, listed, rule_sets_writer, namespaces_unlisted, policies_unlisted };
    (tenancy, futures::stream::select(policy_changes, namespace_changes).boxed())
}

/// A rule set's key: `NAME` for a ZundokoRules; for a tenant's rule set seen through
/// [`as_rules`], `NAMESPACE/NAME`.
pub(super) fn key_of(zr: &ZundokoRules) -> RuleSetKey {
    match zr.namespace() {
        Some(ns) => RuleSetKey::namespaced(&ns, &zr.name_any()),
        None => RuleSetKey::cluster(&zr.name_any()),
    }
}

fn namespaced_key_of(zr: &ZundokoNamespacedRules) -> RuleSetKey {
    RuleSetKey::namespaced(&zr.namespace().unwrap_or_default(), &zr.name_any())
}

/// A tenant's rule set as the reconcile's steps take it: the same spec and status, its
/// namespace kept in the metadata (which `key_of` and the writes go by).
fn as_rules(zr: &ZundokoNamespacedRules) -> ZundokoRules {
    ZundokoRules { metadata: zr.metadata.clone(), spec: zr.spec.rules.clone(), status: zr.status.clone() }
}

/// The tenant's own object again, for what names its kind (Events, status writes).
pub(super) fn as_namespaced(zr: &ZundokoRules) -> ZundokoNamespacedRules {
    ZundokoNamespacedRules { metadata: zr.metadata.clone(), spec: crate::crd::ZundokoNamespacedRulesSpec { rules: zr.spec.clone() }, status: zr.status.clone() }
}

async fn reconcile_namespaced(zr: Arc<ZundokoNamespacedRules>, ctx: Arc<Context>) -> Result<Action, Error> {
    reconcile(Arc::new(as_rules(&zr)), ctx).await
}

fn error_policy_namespaced(zr: Arc<ZundokoNamespacedRules>, error: &Error, ctx: Arc<Context>) -> Action {
    error_policy(Arc::new(as_rules(&zr)), error, ctx)
}

/// The registry references the rule sets name (a source's, a candidate's).
fn names_configmap(zr: &ZundokoRules, namespace: &str, name: &str) -> bool {
    let sources = std::iter::once(&zr.spec.source).chain(zr.spec.candidate.as_ref().map(|c| &c.source));
    sources.filter_map(|s| s.config_map.as_ref()).any(|cm| cm.namespace == namespace && cm.name == name)
}

pub(super) fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

impl Context {
    /// One kind of rule set listed: after both, the serving table is synced.
    fn listed_one(&self, namespaced: bool) {
        let kind = 1u8 << u8::from(namespaced);
        if self.lists_done.fetch_or(kind, std::sync::atomic::Ordering::SeqCst) | kind == 0b11 {
            self.sets.set_synced();
            self.tell_named_tags();
        }
    }

    /// Tell the registry the tags every rule set of both kinds names, once both are listed
    /// (never before: a tag record only an unlisted rule set names would go).
    fn tell_named_tags(&self) {
        if self.lists_done.load(std::sync::atomic::Ordering::SeqCst) != 0b11 {
            return;
        }
        let Some(cluster) = self.cluster_rule_sets.get() else { return };
        let cluster = cluster.state();
        let tenants = self.tenancy.rule_sets.state();
        let specs = cluster.iter().map(|zr| (&zr.spec.source, zr.spec.candidate.as_ref())).chain(tenants.iter().map(|zr| (&zr.spec.rules.source, zr.spec.rules.candidate.as_ref())));
        let named: Vec<ModuleRef> = specs
            .flat_map(|(source, candidate)| std::iter::once(source).chain(candidate.map(|c| &c.source)))
            .filter_map(|source| source.oci.as_ref()?.reference.parse().ok())
            .collect();
        self.registry.rule_sets_name(&named);
    }

    fn forget(&self, name: &str, uid: Option<&str>) {
        self.sets.remove(name);
        if let Some(uid) = uid {
            self.memo.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
        }
        self.metrics.ruleset_gone(name);
    }

    pub(super) fn with_memo<R>(&self, uid: &str, f: impl FnOnce(&mut Memo) -> R) -> R {
        let mut memo = self.memo.lock().unwrap_or_else(|p| p.into_inner());
        f(memo.entry(uid.to_string()).or_default())
    }

}

async fn reconcile(zr: Arc<ZundokoRules>, ctx: Arc<Context>) -> Result<Action, Error> {
    let span = info_span!("rules", name = %key_of(&zr));
    let (started, metrics) = (Instant::now(), ctx.metrics.clone());
    let result = reconcile_inner(zr, ctx).instrument(span).await;
    metrics.reconcile_took("zundokorules", result.is_ok(), started.elapsed());
    result
}

/// One reconcile of a rule set, step by step; each step hands the next what it found.
async fn reconcile_inner(zr: Arc<ZundokoRules>, ctx: Arc<Context>) -> Result<Action, Error> {
    // Resolve: who writes its status, the status as last written, the digest a tag is pinned to.
    let resolved = resolve(&zr, &ctx);
    // Check: the source's module and the candidate's (a followed tag that moved is one).
    let sources = match check(&zr, &ctx, &resolved).await? {
        Ok(sources) => sources,
        Err(retry_in) => return Ok(Action::requeue(retry_in)),
    };
    // Roll out: the candidate's rollout advanced from the status and every replica's count.
    let rolled = roll_out(&zr, &ctx, &resolved, &sources);
    // Publish: what serves, at once; the status it calls for.
    let desired = publish(&zr, &ctx, &resolved, &sources, &rolled);
    // Record: the status and its Events (or this replica's count), and when to look again.
    record(&zr, &ctx, &resolved, &sources, &rolled, desired).await
}


fn error_policy(zr: Arc<ZundokoRules>, error: &Error, ctx: Arc<Context>) -> Action {
    let failures = ctx.with_memo(&zr.uid().unwrap_or_default(), |m| {
        m.failures = m.failures.saturating_add(1);
        m.failures
    });
    let delay = error_backoff(failures);
    // Never checked: its Hikawas hear why, instead of waiting for a first check in silence.
    let name = key_of(&zr).to_string();
    if ctx.sets.serving(&name).is_none() {
        let why = Unavailable { phase: status::PENDING.into(), reason: "CheckFailed".into(), message: crate::text::printable(&error.to_string(), 1024) };
        ctx.sets.publish(&name, Serving { stable: Err(why), candidate: None });
    }
    ctx.metrics.reconcile_failed("RulesApiError");
    warn!(rules = %name, %error, retry_in_ms = delay.as_millis() as u64, "rule set reconcile failed");
    Action::requeue(delay)
}
