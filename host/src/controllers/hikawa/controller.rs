//! The controller: kube-runtime's `Controller` on Hikawa, owning Zundoko and Kiyoshi, and
//! beside it the ZundokoRules controller (`rulesets::controller`). Each reconcile: observe
//! (the Hikawa, its children from the compact index), choose the rules (the default module, or
//! the rule set it names, or that rule set's candidate for its share), pace (decide only when
//! something but this process's own writes changed, or when the rules asked to be called back;
//! see `pace.rs`), decide (the guest, then the plan check), apply, requeue.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt, TryStreamExt};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, reflector};
use kube::runtime::watcher::Event;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tracing::{Instrument, info, info_span, warn};
use zundoko_rules::ChildKind;

use crate::crd::Hikawa;
use crate::controllers::error::{Error, Result};
use crate::supply::contract::rules::decide_async;
use crate::controllers::rulesets;
use crate::controllers::hikawa::Choice;
use crate::supply::serving::RuleSets;
use crate::supply::sandbox::ModuleIdentity;
use crate::controllers::hikawa::apply::{self, HIKAWA_LABEL};
use crate::controllers::hikawa::children::{self, ChildIndex};
use crate::process::leader::{Entered, ShardTable};
use crate::controllers::hikawa::context::{Context, Shared, Writer};
use crate::controllers::hikawa::lean::{self, LeanHikawa};
use crate::controllers::hikawa::observe::observe;
use crate::controllers::hikawa::pace::{Footprint, Gate, Pace, PaceSettings};
use crate::supply::contract::RecordDecision as _;
use crate::supply::contract::plan_check::PlanLimits;
use crate::controllers::hikawa::status;
use crate::controllers::hikawa::entropy::Entropy;

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

/// Run until `shutdown` completes, then let reconciles in flight finish. The Hikawas a
/// module swap concerns (those without `spec.rules` for the default module, a rule set's own
/// for a rule set) are reconciled again after it.
pub async fn run(client: Client, shards: Arc<ShardTable>, shared: Shared, settings: Settings, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let ns = settings.namespace.as_deref();
    let shutdown = shutdown.shared();
    let (rulesets, signals) = RuleSets::new();
    let rulesets = Arc::new(rulesets);
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
        entropy: Entropy::new(settings.entropy_seed),
    });
    let (hikawas, writer) = reflector::store();
    // managedFields, labels and annotations (kubectl's last-applied-configuration among them:
    // up to 256 KiB) are never read here and are most of a small object: not even decoded
    // (lean.rs). A Hikawa
    // that is gone is forgotten by the pacing too (after a relist: any not listed).
    // Whether the Hikawas have been listed once, for readiness. (Not the store's own
    // `wait_until_ready`: kube wakes only one of its waiters, and the Controller is one.)
    let (listed, mut hikawas_listed) = tokio::sync::watch::channel(false);
    let hikawa_events = {
        let (ctx, hikawas) = (ctx.clone(), hikawas.clone());
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
    };
    // Only the children of the shards held: the watch follows them.
    let zundokos = children::zundoko_stream(api(&client, ns), HIKAWA_LABEL, shards.held(), shards.count, ctx.children.clone());
    let kiyoshis = children::kiyoshi_stream(api(&client, ns), HIKAWA_LABEL, shards.held(), shards.count, ctx.children.clone());

    shared.health.set_reconciling(true);
    // Readiness names the shards held (none: a ready standby).
    let _shards_shown = {
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
    // Aborted when this function ends or is dropped (a lost term drops it mid-flight): it
    // must not outlive the caches it waits on, nor mark a later term's caches synced.
    let _synced = {
        let (children, health) = (ctx.children.clone(), shared.health.clone());
        AbortOnDrop(tokio::spawn(async move {
            let listed = async move { hikawas_listed.wait_for(|listed| *listed).await.is_ok() };
            let _ = futures::join!(children.synced(), listed);
            health.set_caches_synced();
        }))
    };
    // A swap of the default module concerns the Hikawas that name no rules; a change in what
    // a rule set serves, those that name it.
    let swapped = {
        let hikawas = hikawas.clone();
        let default_swaps = shared.rules.swaps().map(|()| None);
        let rule_sets = futures::stream::unfold(signals.changed, |mut rx| async move { rx.recv().await.map(|name| (Some(name), rx)) });
        futures::stream::select(default_swaps, rule_sets).flat_map(move |rules: Option<String>| {
            let concerned: Vec<ObjectRef<Hikawa>> =
                hikawas.state().iter().filter(|h| h.spec.rules == rules).map(|h| ObjectRef::from_obj(h.as_ref())).collect();
            futures::stream::iter(concerned)
        })
    };
    // A shard just taken: its Hikawas are decided afresh, from the API server's state (the
    // children are the truth), as after a restart: what this replica remembered of them
    // from an earlier hold is forgotten.
    let taken = {
        let (hikawas, ctx) = (hikawas.clone(), ctx.clone());
        let taken = futures::stream::unfold(shards.taken(), |mut rx| async move {
            loop {
                match rx.recv().await {
                    Ok(shard) => return Some((shard, rx)),
                    // Missed some: every shard is worth a look then.
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                }
            }
        });
        taken.flat_map(move |shard| {
            let mine: Vec<ObjectRef<Hikawa>> = hikawas
                .state()
                .iter()
                .filter(|h| h.uid().is_some_and(|uid| ctx.shards.shard_of(&uid) == shard))
                .inspect(|h| ctx.pace.forget(&h.uid().unwrap_or_default()))
                .map(|h| ObjectRef::from_obj(h.as_ref()))
                .collect();
            futures::stream::iter(mine)
        })
    };
    // A shard whose children are listed now: its Hikawas that waited for that are decided.
    let covered = {
        let hikawas = hikawas.clone();
        let (coverage, shards) = (ctx.children.coverage(), ctx.shards.clone());
        futures::stream::unfold((coverage, std::collections::BTreeSet::new()), |(mut rx, before)| async move {
            rx.changed().await.ok()?;
            let now = rx.borrow_and_update().clone();
            let new: std::collections::BTreeSet<u16> = now.difference(&before).copied().collect();
            Some((new, (rx, now)))
        })
        .flat_map(move |new| {
            let waited: Vec<ObjectRef<Hikawa>> = if new.is_empty() {
                Vec::new()
            } else {
                hikawas
                    .state()
                    .iter()
                    .filter(|h| h.uid().is_some_and(|uid| new.contains(&shards.shard_of(&uid))))
                    .map(|h| ObjectRef::from_obj(h.as_ref()))
                    .collect()
            };
            futures::stream::iter(waited)
        })
    };
    let rules_controller = rulesets::controller::run(
        client.clone(),
        shards.clone(),
        rulesets,
        signals.wake,
        hikawas.clone(),
        shared.modules.clone(),
        shared.metrics.clone(),
        rulesets::controller::Settings {
            namespaces: settings.rules_namespaces.clone(),
            instance: settings.instance.clone(),
            registry: shared.registry.clone(),
        },
        shutdown.clone(),
    );
    info!(namespace = ns.unwrap_or("(all)"), concurrency = settings.concurrency, "starting the Hikawa controller");
    let hikawa_controller = Controller::for_stream(hikawa_events, hikawas)
        .owns_stream(zundokos)
        .owns_stream(kiyoshis)
        .reconcile_on(swapped)
        .reconcile_on(taken)
        .reconcile_on(covered)
        .with_config(controller::Config::default().concurrency(settings.concurrency))
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "reconcile failed");
            }
        });
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
    info!("the Hikawa controller stopped");
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How long reconciles in flight may take to finish after shutdown (each of their requests is
/// bounded by the API timeout, each guest call by its fuel), leaving the rest of the pod's 30 s
/// for handing the shards back.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// How long a Hikawa waits for its shard's children to be listed, or for the rule sets to be,
/// before it looks again by itself: what ends the wait is the wake-up when they are (a stream
/// of `run`), so waiting costs nothing; this only bounds a wake-up that never came.
pub const WAITING_FALLBACK: Duration = Duration::from_secs(30);

/// When a reconcile comes back for Said Events it could not publish.
pub const UNSAID_RETRY: Duration = Duration::from_millis(500);

fn key(hikawa: &Hikawa) -> String {
    format!("{}/{}", hikawa.namespace().unwrap_or_default(), hikawa.name_any())
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

async fn reconcile(hikawa: Arc<Hikawa>, ctx: Arc<Context>) -> Result<Action> {
    let span = info_span!("reconcile", hikawa = %key(&hikawa));
    reconcile_inner(hikawa, ctx).instrument(span).await
}

async fn reconcile_inner(hikawa: Arc<Hikawa>, ctx: Arc<Context>) -> Result<Action> {
    if hikawa.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let uid = hikawa.uid().ok_or_else(|| Error::MissingField(format!("Hikawa {} has no uid", key(&hikawa))))?;
    ctx.rulesets.member(&uid, hikawa.spec.rules.as_deref());
    // Another replica's shard never reaches the rules here. When this replica takes it, its
    // Hikawas are reconciled again (`taken`).
    let shard = ctx.shards.shard_of(&uid);
    let _in_flight = match ctx.shards.enter(shard) {
        Entered::Decide(in_flight) => in_flight,
        Entered::NotHeld => return Ok(Action::await_change()),
        Entered::NotNow => {
            ctx.metrics.not_decided("lease-renewal-late");
            return Ok(Action::requeue(Duration::from_millis(100)));
        }
    };
    let w = &ctx.writers[shard as usize];
    ctx.metrics.reconciled();
    // Deciding from half-filled caches would re-say words that exist: wait for the shard's
    // children to be listed.
    if !ctx.children.covers(shard) {
        ctx.metrics.not_decided("catching-up");
        // Woken when the shard is covered (`covered` in `run`), not by polling.
        return Ok(Action::requeue(WAITING_FALLBACK));
    }
    // What this process's own last writes answered stands in for what the caches do not show
    // yet: the next decision waits for no watch (pace.rs).
    let hikawa = ctx.pace.read_own(&uid, &hikawa, Instant::now()).unwrap_or(hikawa);
    // The rules that decide: the default module, or the rule set named (its candidate for
    // the Hikawas in the candidate's share).
    let chosen = match hikawa.spec.rules.as_deref() {
        None => match ctx.rules.current() {
            Some(rules) => Ok((rules, None)),
            // Only reachable if the controller is started before a module: nothing to decide with.
            None => return Ok(Action::requeue(Duration::from_secs(1))),
        },
        Some(name) => match ctx.rulesets.choose(name, &uid) {
            Choice::Decide { rules, candidate } => Ok((rules, candidate)),
            Choice::CatchingUp => {
                ctx.metrics.not_decided("catching-up");
                // Woken when the rule sets are listed or this one serves (`swapped` in `run`).
                return Ok(Action::requeue(WAITING_FALLBACK));
            }
            Choice::Unavailable(error) => Err(error),
        },
    };
    let (ns, name) = (hikawa.namespace().unwrap_or_default(), hikawa.name_any());
    let claimed = hikawa.status.as_ref().map_or(0, |s| s.num_zundokos_said);
    // Whether to decide needs only how many children there are: the children themselves are
    // read to decide, to say the latest word's Event again, or when own children the caches do
    // not show yet stand in.
    let owned = || {
        let mut children = ctx.children.owned(&ns, &name, &uid, claimed);
        ctx.pace.merge_own_children(&uid, &mut children);
        children
    };
    let mut children = ctx.pace.has_own_children(&uid).then(owned);
    let (zundokos, kiyoshi) = match &children {
        Some(c) => (c.zundokos.len() as u32, c.kiyoshi.is_some()),
        None => ctx.children.counts(&ns, &name, &uid, claimed),
    };
    let mut seen = Footprint {
        generation: hikawa.metadata.generation.unwrap_or(0),
        zundokos,
        kiyoshi,
        status: hikawa.status.clone(),
        module: match &chosen {
            Ok((rules, _)) => rules.identity().digest.clone(),
            Err(unavailable) => format!("unavailable: {}", unavailable.reason()),
        },
    };
    // The Said Events owed: those refused before and, for words this process did not see
    // itself say (it just took the shard or started, or a write that timed out landed after
    // all), the latest word's. The apply step publishes them beside its own writes; a reconcile
    // that decides nothing publishes them alone.
    let said_elsewhere = ctx.pace.said_elsewhere(&uid, &seen);
    if said_elsewhere && children.is_none() {
        children = Some(owned());
    }
    let owed = apply::Owed::take(&ctx, &hikawa, &uid, children.as_ref().filter(|_| said_elsewhere), now_ms());
    let started = Instant::now();
    match ctx.pace.gate(&uid, &seen, started) {
        Gate::Decide => {}
        Gate::CatchingUp { retry_in } => {
            ctx.metrics.not_decided("catching-up");
            owed.publish(&ctx, w, &hikawa, &uid).await;
            return Ok(Action::requeue(retry_in));
        }
        Gate::Unchanged { due } => {
            ctx.metrics.not_decided("unchanged");
            owed.publish(&ctx, w, &hikawa, &uid).await;
            // A song that is over still comes back for a Said Event refused just now.
            return Ok(come_back(&ctx, &uid, due));
        }
        Gate::Throttled { retry_in, report } => {
            ctx.metrics.not_decided("throttled");
            if report {
                let pace = ctx.pace.settings();
                let note = format!(
                    "more than {} decisions without a word in a burst ({} a second after it): slowed down; the rules ask to decide again and again without saying anything",
                    pace.idle_burst, pace.idle_per_sec
                );
                warn!(retry_in_ms = retry_in.as_millis() as u64, "{note}");
                w.events.warn(&ctx.pace, &hikawa, "Throttled", &note, "Decide").await;
            }
            owed.publish(&ctx, w, &hikawa, &uid).await;
            return Ok(Action::requeue(retry_in));
        }
    }

    // Rules that serve nothing are recorded like a failure, and paced like one.
    let (rules, candidate) = match chosen {
        Ok(chosen) => chosen,
        Err(unavailable) => return Err(failed(&ctx, w, &hikawa, &uid, seen, unavailable, None, owed, started).await),
    };
    let children = children.take().unwrap_or_else(owned);
    // What the rules see is what the next decision waits to see again.
    (seen.zundokos, seen.kiyoshi) = (children.zundokos.len() as u32, children.kiyoshi.is_some());
    let entropy = ctx.entropy.draw(&uid);
    let observed = Arc::new(observe(&hikawa, children, now_ms(), entropy));
    let decision = decide_async(rules, observed.clone(), ctx.plan_limits.clone()).await;
    ctx.metrics.decided(&decision);
    if let Some(candidate) = &candidate {
        ctx.rulesets.record(candidate, decision.outcome.is_ok());
    }
    let module = decision.module.clone();
    let plan = match decision.outcome {
        Ok(plan) => plan,
        Err(error) => {
            warn!(
                module = %module.digest,
                entropy = format_args!("{entropy:#018x}"),
                reason = error.reason(),
                %error,
                "the rules failed; nothing applied"
            );
            return Err(failed(&ctx, w, &hikawa, &uid, seen, Error::Guest(error), Some(&module), owed, started).await);
        }
    };
    info!(
        module = %module.digest,
        entropy = format_args!("{entropy:#018x}"),
        words = observed.zundokos.len(),
        %plan,
        fuel = decision.fuel_used.unwrap_or(0),
        elapsed_us = decision.elapsed.as_micros() as u64,
        "decided"
    );
    let applied = match apply::apply(&ctx, w, &hikawa, &observed, &plan, &module, owed).await {
        Ok(applied) => applied,
        // The apply step published what was owed.
        Err(error) => return Err(failed(&ctx, w, &hikawa, &uid, seen, error, Some(&module), apply::Owed::default(), started).await),
    };
    // The answers to its writes stand in for the caches until they show them.
    let written = applied.resource_version.map(|version| {
        let mut written = Hikawa::clone(&hikawa);
        written.metadata.resource_version = Some(version);
        written.status = Some(applied.status.clone());
        written
    });
    let (mut said_zundokos, mut said_kiyoshi) = (Vec::new(), None);
    for (kind, said) in applied.said {
        match kind {
            ChildKind::Zundoko => said_zundokos.push(said),
            ChildKind::Kiyoshi => said_kiyoshi = Some(said),
        }
    }
    ctx.pace.wrote_own(&uid, &hikawa, written, said_zundokos, said_kiyoshi, Instant::now());
    let left = Footprint {
        zundokos: seen.zundokos + applied.zundokos,
        kiyoshi: seen.kiyoshi || applied.kiyoshi,
        status: Some(applied.status),
        ..seen
    };
    // When the rules are called again: the definition `simulate` and `test` share.
    let next = plan.next_call(&observed);
    let requeue = ctx.pace.decided(&uid, left, next, applied.zundokos + applied.kiyoshi as u32, started);
    Ok(come_back(&ctx, &uid, requeue))
}

/// Reconcile again after `requeue` (or at the next change), but soon while a word's Event is
/// still to publish, even if the song is over: nothing else would bring it back.
fn come_back(ctx: &Context, uid: &str, requeue: Option<Duration>) -> Action {
    let requeue = if ctx.pace.has_unsaid(uid) { Some(requeue.map_or(UNSAID_RETRY, |r| r.min(UNSAID_RETRY))) } else { requeue };
    requeue.map_or_else(Action::await_change, Action::requeue)
}

/// Record a failure: on the Hikawa (Ready=False with the reason, a Warning Event) at once if
/// it will not go away by itself, else once it has happened three times in a row; then back
/// off. The Said Events `owed` are published first. Returns the error for the error policy.
#[allow(clippy::too_many_arguments)]
async fn failed(ctx: &Context, w: &Writer, hikawa: &Hikawa, uid: &str, seen: Footprint, error: Error, module: Option<&ModuleIdentity>, owed: apply::Owed, started: Instant) -> Error {
    owed.publish(ctx, w, hikawa, uid).await;
    // Decide from the caches again.
    ctx.pace.forget_own(uid);
    let mut left = seen;
    // A write refused because the shard may be gone is not the Hikawa's failure: nothing
    // is recorded on it (the new holder decides afresh).
    if error.reason() == "NotLeading" {
        ctx.pace.failed(uid, left, started);
        return error;
    }
    if error.is_lasting() || ctx.pace.failures(uid) + 1 >= 3 {
        let message = error.to_string();
        // The Event first: whoever sees the failed status finds its Event already there.
        w.events.warn(&ctx.pace, hikawa, error.reason(), &message, "Decide").await;
        let failed = status::after_failure(hikawa.status.as_ref(), left.generation, error.reason(), &message, module, now_ms());
        match apply::write_status(ctx, w, hikawa, failed).await {
            Ok((stored, _)) => left.status = Some(stored),
            Err(write_error) => warn!(error = %write_error, "could not record the failure in the status"),
        }
    }
    ctx.pace.failed(uid, left, started);
    error
}

fn error_policy(hikawa: Arc<Hikawa>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.reconcile_failed(error.reason());
    let delay = ctx.pace.retry_in(&hikawa.uid().unwrap_or_default(), Instant::now());
    warn!(hikawa = %key(&hikawa), reason = error.reason(), %error, retry_in_ms = delay.as_millis() as u64, "reconcile failed");
    Action::requeue(delay)
}
