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
use crate::crd::{Hikawa, ReplicaCount, ZundokoRules, ZundokoRulesStatus};
use crate::process::leader::ShardTable;
use crate::process::metrics::Metrics;
use crate::supply::ModuleLoader;
use crate::supply::oci::ModuleRef;
use crate::supply::sandbox::RulesModule;
use crate::supply::serving::{RuleSets, Serving, Unavailable};
use crate::supply::sources::rulesets::{Checked, Problem, Sources};

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
    let ctx = Arc::new(Context {
        client: client.clone(),
        events: (0..shards.count).map(|s| EventSink::new(shards.client(s).clone(), "zundoko-operator", &settings.instance)).collect(),
        shards,
        sets: sets.clone(),
        sources,
        hikawas,
        metrics,
        modules,
        memo: Mutex::default(),
    });
    let (store, writer) = reflector::store();
    let rule_sets = {
        let (store, ctx, registry) = (store.clone(), ctx.clone(), settings.registry.clone());
        reflector::reflector(
            writer,
            watch(Api::<ZundokoRules>::all(client), watcher::Config::default()).default_backoff().modify(|zr| {
                zr.metadata.managed_fields = None;
                zr.metadata.annotations = None;
            }),
        )
        .inspect(move |event| match event {
            Ok(Event::InitApply(zr)) => ctx.sets.announce(&zr.name_any()),
            // Apply and Delete come only once listed: the tags the rule sets name, told again.
            Ok(Event::Apply(zr)) => {
                ctx.sets.announce(&zr.name_any());
                registry.rule_sets_name(&named_references(&store.state()));
            }
            Ok(Event::Delete(zr)) => {
                ctx.forget(&zr.name_any(), zr.uid().as_deref());
                registry.rule_sets_name(&named_references(&store.state()));
            }
            Ok(Event::InitDone) => {
                let alive: std::collections::HashSet<String> = store.state().iter().map(|zr| zr.name_any()).collect();
                ctx.sets.retain(|name| alive.contains(name));
                ctx.sets.set_synced();
                // Every source seen now: the cache's records of tags none names can go.
                registry.rule_sets_name(&named_references(&store.state()));
            }
            // Without the ZundokoRules CRD there are no rule sets: Hikawas naming one hear so.
            Err(watcher::Error::InitialListFailed(kube::Error::Api(status))) if status.code == 404 => ctx.sets.set_synced(),
            Err(error) => ctx.sets.set_unlistable(error.to_string()),
            _ => {}
        })
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
    let woken = futures::stream::unfold(wake, |mut wake| async move { wake.recv().await.map(|name| (ObjectRef::<ZundokoRules>::new(&name), wake)) });
    // The operator's trusted keys changed: every rule set's module is verified again. With
    // --trusted-keys, its files are read again every KEYS_POLL (by a task of their own, started
    // here if the operator has not).
    settings.registry.keys().keep_current();
    let keys_changed = futures::stream::unfold(settings.registry.keys().subscribe(), |mut changed| async move { changed.changed().await.ok().map(|()| ((), changed)) });
    // A shard taken: its rule sets' status is this replica's to write now, not at their next
    // refresh (REFRESH_EVERY later): a standby that took over after its leader died, having
    // reconciled them as a non-writer, left their status unwritten for up to that long.
    let taken = ctx.shards.taken().map(|_| ());
    info!(namespaces = ?settings.namespaces, "starting the ZundokoRules controller");
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
        })
        .await;
    info!("the ZundokoRules controller stopped");
}

/// The registry references the rule sets name (a source's, a candidate's).
fn named_references(rule_sets: &[Arc<ZundokoRules>]) -> Vec<ModuleRef> {
    let sources = rule_sets.iter().flat_map(|zr| std::iter::once(&zr.spec.source).chain(zr.spec.candidate.as_ref().map(|c| &c.source)));
    sources.filter_map(|source| source.oci.as_ref()?.reference.parse().ok()).collect()
}

fn names_configmap(zr: &ZundokoRules, namespace: &str, name: &str) -> bool {
    let sources = std::iter::once(&zr.spec.source).chain(zr.spec.candidate.as_ref().map(|c| &c.source));
    sources.filter_map(|s| s.config_map.as_ref()).any(|cm| cm.namespace == namespace && cm.name == name)
}

pub(super) fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

impl Context {
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
    let span = info_span!("rules", name = %zr.name_any());
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
    let name = zr.name_any();
    if ctx.sets.serving(&name).is_none() {
        let why = Unavailable { phase: status::PENDING.into(), reason: "CheckFailed".into(), message: crate::text::printable(&error.to_string(), 1024) };
        ctx.sets.publish(&name, Serving { stable: Err(why), candidate: None });
    }
    ctx.metrics.reconcile_failed("RulesApiError");
    warn!(rules = %zr.name_any(), %error, retry_in_ms = delay.as_millis() as u64, "rule set reconcile failed");
    Action::requeue(delay)
}
