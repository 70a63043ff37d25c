//! One reconcile of a Hikawa, as its steps, data flowing one way:
//!
//! 1. [`admit`]: is the Hikawa alive, in a shard this replica holds now, with its shard's
//!    children listed? Otherwise nothing is decided (and nothing polled: see `controller.rs`).
//! 2. [`look`]: the Hikawa as this process's own writes left it, the rules that decide for it,
//!    what pacing compares (its footprint), and the Said Events it is owed.
//! 3. [`gate`]: whether to decide now (`pace.rs`); if not, the Events owed go out alone.
//! 4. [`take_place`]: a place among those deciding with the module (`places.rs`), or a place
//!    in its line, the Events owed going out alone.
//! 5. [`decide`]: the rules' call and the plan check (`supply/contract/`), on a fresh instance.
//! 6. [`apply_plan`]: the plan's writes (`apply.rs`).
//! 7. [`record`]: what the writes left, for the next decision to read, and when to come back.
//!
//! A failure at any step is [`Turn::failed`]: recorded on the Hikawa if it lasts, backed off.

use std::ops::ControlFlow::{self, Break, Continue};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tracing::{Instrument, info, info_span, warn};
use zundoko_rules::{ChildKind, Observed, Plan};

use crate::controllers::error::{Error, Result};
use crate::controllers::hikawa::Choice;
use crate::controllers::hikawa::apply::{self, Applied, Owed};
use crate::controllers::hikawa::children::Owned;
use crate::controllers::hikawa::context::{Context, Writer};
use crate::controllers::hikawa::controller::{QUEUE, UNSAID_RETRY, WAITING_FALLBACK};
use crate::controllers::hikawa::observe::observe;
use crate::controllers::hikawa::pace::{Footprint, Gate};
use crate::controllers::hikawa::places::{InLine, Place};
use crate::controllers::hikawa::retry::{RETRY, Retry};
use crate::controllers::hikawa::queue;
use crate::controllers::hikawa::status;
use crate::controllers::writes::status::rfc3339_millis;
use crate::crd::Hikawa;
use crate::process::leader::{Entered, InFlight};
use crate::supply::contract::RecordDecision as _;
use crate::supply::contract::rules::{Rules, decide_async};
use crate::supply::sandbox::ModuleIdentity;
use crate::supply::serving::{CandidateDecision, RulesUnavailable};
use crate::supply::tenant::{Tenant, key_of_hikawa, of_hikawa};

/// When a reconcile whose status was refused as outdated comes back by itself, if the change
/// that refused it has not brought one sooner.
const OUTDATED_STATUS_RETRY: Duration = Duration::from_millis(500);

/// A step either goes on with its result or ends the reconcile with an action.
type Step<T> = ControlFlow<Action, T>;

macro_rules! step {
    ($e:expr) => {
        match $e {
            Continue(value) => value,
            Break(action) => return Ok(action),
        }
    };
}

pub(super) fn key(hikawa: &Hikawa) -> String {
    format!("{}/{}", hikawa.namespace().unwrap_or_default(), hikawa.name_any())
}

pub(super) fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

pub(super) async fn reconcile(hikawa: Arc<Hikawa>, ctx: Arc<Context>) -> Result<Action> {
    let span = info_span!("reconcile", hikawa = %key(&hikawa));
    let started = Instant::now();
    if let Some(wait) = ctx.queue.started(&queue::key_of(hikawa.as_ref()), started) {
        ctx.metrics.queue_waited(QUEUE, wait);
    }
    let metrics = ctx.metrics.clone();
    let result = reconcile_inner(hikawa, ctx).instrument(span).await;
    metrics.reconcile_took("hikawa", result.is_ok(), started.elapsed());
    result
}

async fn reconcile_inner(hikawa: Arc<Hikawa>, ctx: Arc<Context>) -> Result<Action> {
    let (uid, shard, _in_flight) = step!(admit(&ctx, &hikawa)?);
    let turn = Turn { ctx: &ctx, w: &ctx.writers[shard as usize], uid, started: Instant::now() };
    let looked = step!(look(&turn, hikawa));
    let Looked { hikawa, chosen, mut seen, children, owed } = step!(gate(&turn, looked).await);
    // Rules that serve nothing are recorded like a failure, and paced like one.
    let (rules, candidate) = match chosen {
        Ok(chosen) => chosen,
        Err(unavailable) => return Err(turn.failed(&hikawa, seen, unavailable, None, owed).await),
    };
    let tenant = tenant(&hikawa);
    let (place, owed) = step!(take_place(&turn, &hikawa, rules.as_ref(), &tenant, owed).await);
    let children = children.unwrap_or_else(|| turn.owned(&hikawa));
    // What the rules see is what the next decision waits to see again.
    (seen.zundokos, seen.kiyoshi) = (children.zundokos.len() as u32, children.kiyoshi.is_some());
    let decided = decide(&turn, &hikawa, rules, tenant, candidate.as_ref(), children).await;
    // The place is for the call: the writes that follow wait on the API server, not the module.
    drop(place);
    let (observed, module, plan) = match decided {
        Ok(decided) => decided,
        Err((error, module)) => return Err(turn.failed(&hikawa, seen, error, module.as_deref(), owed).await),
    };
    let applied = match apply_plan(&turn, &hikawa, &observed, &plan, &module, owed).await {
        Ok(applied) => applied,
        // The apply step published what was owed.
        Err(error) => return Err(turn.failed(&hikawa, seen, error, Some(&module), Owed::default()).await),
    };
    Ok(record(&turn, &hikawa, seen, &observed, &plan, applied))
}

/// What one reconcile works with, from admission on.
struct Turn<'a> {
    ctx: &'a Context,
    /// The writer of the Hikawa's shard.
    w: &'a Writer,
    uid: String,
    started: Instant,
}

/// Step 1: the Hikawa is alive, its shard is this replica's and may be written now, and the
/// shard's children are listed (deciding from half-filled caches would re-say words that
/// exist). Returns its uid, its shard and the guard that keeps the shard's writes in flight.
fn admit(ctx: &Context, hikawa: &Hikawa) -> Result<Step<(String, u16, InFlight)>> {
    if hikawa.metadata.deletion_timestamp.is_some() {
        return Ok(Break(Action::await_change()));
    }
    let uid = hikawa.uid().ok_or_else(|| Error::MissingField(format!("Hikawa {} has no uid", key(hikawa))))?;
    ctx.rulesets.member(&uid, key_of_hikawa(hikawa).as_deref());
    // Another replica's shard never reaches the rules here. When this replica takes it, its
    // Hikawas are reconciled again (`taken` in `controller.rs`).
    let shard = ctx.shards.shard_of(&uid);
    let in_flight = match ctx.shards.enter(shard) {
        Entered::Decide(in_flight) => in_flight,
        Entered::NotHeld => return Ok(Break(Action::await_change())),
        Entered::NotNow => {
            ctx.metrics.not_decided("lease-renewal-late");
            return Ok(Break(ctx.queue.requeue(hikawa, Duration::from_millis(100))));
        }
    };
    ctx.metrics.reconciled();
    if !ctx.children.covers(shard) {
        ctx.metrics.not_decided("catching-up");
        // Woken when the shard is covered (`covered` in `controller.rs`), not by polling.
        return Ok(Break(ctx.queue.requeue(hikawa, WAITING_FALLBACK)));
    }
    Ok(Continue((uid, shard, in_flight)))
}

/// The rules that decide, or why none can.
type Chosen = std::result::Result<(Arc<dyn Rules>, Option<CandidateDecision>), Error>;

/// What step 2 found.
struct Looked {
    /// The Hikawa as this process's own last status write left it, if the caches lag.
    hikawa: Arc<Hikawa>,
    chosen: Chosen,
    /// What pacing compares with what the last decision left.
    seen: Footprint,
    /// The children, when they had to be read already (else read only to decide).
    children: Option<Owned>,
    owed: Owed,
}

/// Step 2: what the Hikawa is now, as far as deciding goes.
fn look(turn: &Turn<'_>, cached: Arc<Hikawa>) -> Step<Looked> {
    let ctx = turn.ctx;
    // What this process's own last writes answered stands in for what the caches do not show
    // yet: the next decision waits for no watch (pace.rs).
    let hikawa = ctx.pace.own.read(&turn.uid, &cached, turn.started).unwrap_or(cached);
    let chosen = choose(ctx, &hikawa, &turn.uid)?;
    // Whether to decide needs only how many children there are: the children themselves are
    // read to decide, to say the latest word's Event again, or when own children the caches do
    // not show yet stand in.
    let mut children = ctx.pace.own.has_children(&turn.uid).then(|| turn.owned(&hikawa));
    let (zundokos, kiyoshi) = match &children {
        Some(c) => (c.zundokos.len() as u32, c.kiyoshi.is_some()),
        None => ctx.children.counts(&hikawa.namespace().unwrap_or_default(), &hikawa.name_any(), &turn.uid, claimed(&hikawa)),
    };
    let seen = Footprint {
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
    let said_elsewhere = ctx.pace.said_elsewhere(&turn.uid, &seen);
    if said_elsewhere && children.is_none() {
        children = Some(turn.owned(&hikawa));
    }
    let owed = Owed::take(ctx, &hikawa, &turn.uid, children.as_ref().filter(|_| said_elsewhere), now_ms());
    Continue(Looked { hikawa, chosen, seen, children, owed })
}

/// The rules that decide: the default module, or the rule set named (its candidate for the
/// Hikawas in the candidate's share). `None`: not known yet, wait.
fn choose(ctx: &Context, hikawa: &Hikawa, uid: &str) -> Step<Chosen> {
    let named = match of_hikawa(hikawa) {
        Ok(named) => named,
        // Named so that no rule set of its own answers (another namespace's, say): refused.
        Err(refused) => return Continue(Err(RulesUnavailable::from(refused).into())),
    };
    match named.map(|key| key.to_string()).as_deref() {
        None => match ctx.rules.current() {
            Some(rules) => Continue(Ok((rules, None))),
            // No default module serves (none yet, or withdrawn when no trusted key verifies it
            // any more): said on the Hikawa as a rule set serving nothing is, and woken when one
            // serves (`swapped` in `controller.rs`).
            None => Continue(Err(Error::RulesUnavailable {
                rules: String::new(),
                reason: "NoModuleServing",
                message: "no default module serves now (none has yet, or it was withdrawn: the operator's Events say why)".into(),
            })),
        },
        Some(name) => match ctx.rulesets.choose(name, uid) {
            Choice::Decide { rules, candidate } => Continue(Ok((rules, candidate))),
            Choice::CatchingUp => {
                ctx.metrics.not_decided("catching-up");
                // Woken when the rule sets are listed or this one serves (`swapped` in
                // `controller.rs`).
                Break(ctx.queue.requeue(hikawa, WAITING_FALLBACK))
            }
            Choice::Unavailable(error) => Continue(Err(error)),
        },
    }
}

/// Whose share of the calls the Hikawa's decision takes (`supply/tenant.rs`): the owner of the
/// rules that decide, not the Hikawa's namespace. The default module and cluster-scoped rule
/// sets are the cluster's (a namespaced rule set, which serves its own namespace's Hikawas only,
/// is its namespace's).
fn tenant(hikawa: &Hikawa) -> Tenant {
    of_hikawa(hikawa).ok().flatten().map_or(Tenant::Cluster, |key| key.tenant)
}

/// How many words the Hikawa's status claims (the index reads that far for missing words).
fn claimed(hikawa: &Hikawa) -> u32 {
    hikawa.status.as_ref().map_or(0, |s| s.num_zundokos_said)
}

/// Step 3: decide now, or not yet (the Events owed then go out on their own).
async fn gate(turn: &Turn<'_>, looked: Looked) -> Step<Looked> {
    let ctx = turn.ctx;
    // When to look again: `Err` exactly then, `Ok` when due (`None`: at the next change) or
    // sooner for a Said Event still owed.
    let again = match ctx.pace.gate(&turn.uid, &looked.seen, turn.started) {
        Gate::Decide => return Continue(looked),
        Gate::CatchingUp { retry_in } => {
            ctx.metrics.not_decided("catching-up");
            Err(retry_in)
        }
        Gate::Unchanged { due } => {
            ctx.metrics.not_decided("unchanged");
            Ok(due)
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
                turn.w.events.warn(&ctx.pace.warnings, &looked.hikawa, "Throttled", &note, "Decide", None).await;
            }
            Err(retry_in)
        }
    };
    looked.owed.publish(ctx, turn.w, &looked.hikawa, &turn.uid).await;
    // After publishing: a song that is over still comes back for a Said Event refused just now.
    Break(again.map_or_else(|after| ctx.queue.requeue(&looked.hikawa, after), |due| turn.come_back(&looked.hikawa, due)))
}

/// Step 4: a place among the reconciles deciding with the module, or, when the module's places
/// are all taken, a place in its line (woken when one frees): the Hikawa then holds none of the
/// controller's slots while it waits, and another rule set's Hikawas never wait behind a slow
/// module's calls. The Events owed go out meanwhile.
async fn take_place<'a>(turn: &Turn<'a>, hikawa: &Hikawa, rules: &dyn Rules, tenant: &Tenant, owed: Owed) -> Step<(Place<'a>, Owed)> {
    let ctx = turn.ctx;
    match ctx.places.enter(rules, tenant, ObjectRef::from_obj(hikawa)) {
        Ok(place) => Continue((place, owed)),
        Err(InLine { retry_in }) => {
            ctx.metrics.not_decided("module-busy");
            owed.publish(ctx, turn.w, hikawa, &turn.uid).await;
            Break(turn.come_back(hikawa, Some(retry_in)))
        }
    }
}

/// Step 5: one call of the rules on what is observed, and the plan check. Returns what the
/// rules saw, the module that decided and the checked plan; or the failure, with the module if
/// it came that far.
async fn decide(
    turn: &Turn<'_>,
    hikawa: &Hikawa,
    rules: Arc<dyn Rules>,
    tenant: Tenant,
    candidate: Option<&CandidateDecision>,
    children: Owned,
) -> std::result::Result<(Arc<Observed>, Arc<ModuleIdentity>, Plan), (Error, Option<Arc<ModuleIdentity>>)> {
    let ctx = turn.ctx;
    let entropy = ctx.entropy.draw(&turn.uid);
    let observed = Arc::new(observe(hikawa, children, now_ms(), entropy));
    // Found before the call takes the tenant: no lock, no allocation (tenant_calls.rs).
    let tenant_calls = ctx.calls.of(&tenant);
    let decision = decide_async(rules, observed.clone(), ctx.plan_limits.clone(), tenant).await;
    ctx.metrics.decided(&decision);
    // Every language's call, the time the metrics and the log line below give it.
    tenant_calls.add(decision.elapsed);
    if let Some(candidate) = candidate {
        ctx.rulesets.record(candidate, decision.outcome.is_ok());
    }
    let module = decision.module.clone();
    let entropy = format_args!("{entropy:#018x}");
    match decision.outcome {
        Ok(plan) => {
            let (fuel, elapsed_us) = (decision.fuel_used.unwrap_or(0), decision.elapsed.as_micros() as u64);
            info!(module = %module.digest, entropy, words = observed.zundokos.len(), %plan, fuel, elapsed_us, "decided");
            Ok((observed, module, plan))
        }
        Err(error) => {
            warn!(module = %module.digest, entropy, reason = error.reason(), %error, "the rules failed; nothing applied");
            Err((Error::Guest(error), Some(module)))
        }
    }
}

/// Step 6: the plan's writes, with the Events owed.
async fn apply_plan(turn: &Turn<'_>, hikawa: &Hikawa, observed: &Observed, plan: &Plan, module: &ModuleIdentity, owed: Owed) -> Result<Applied> {
    apply::apply(turn.ctx, turn.w, hikawa, observed, plan, module, owed).await
}

/// Step 7: what the writes left stands in for the caches until they show it, and the rules are
/// called again when the plan's [`NextCall`](zundoko_rules::NextCall) says (the definition
/// `simulate` and `test` share).
fn record(turn: &Turn<'_>, hikawa: &Hikawa, seen: Footprint, observed: &Observed, plan: &Plan, applied: Applied) -> Action {
    let ctx = turn.ctx;
    let written = applied.resource_version.map(|version| {
        let mut written = Hikawa::clone(hikawa);
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
    ctx.pace.own.wrote(&turn.uid, hikawa, written, said_zundokos, said_kiyoshi, Instant::now());
    let left = Footprint { zundokos: seen.zundokos + applied.zundokos, kiyoshi: seen.kiyoshi || applied.kiyoshi, status: Some(applied.status), ..seen };
    let words = applied.zundokos + u32::from(applied.kiyoshi);
    let requeue = ctx.pace.decided(&turn.uid, left, plan.next_call(observed), words, turn.started);
    // A status refused as outdated is written by the decision the change brings; should no
    // change come (none is lost, but a watch may be slow), this one comes back for it.
    let requeue = if applied.status_outdated { Some(requeue.map_or(OUTDATED_STATUS_RETRY, |r| r.min(OUTDATED_STATUS_RETRY))) } else { requeue };
    turn.come_back(hikawa, requeue)
}

impl Turn<'_> {
    /// The Hikawa's children from the index, with this process's own that it does not show yet.
    fn owned(&self, hikawa: &Hikawa) -> Owned {
        let (ns, name) = (hikawa.namespace().unwrap_or_default(), hikawa.name_any());
        let mut children = self.ctx.children.owned(&ns, &name, &self.uid, claimed(hikawa));
        self.ctx.pace.own.merge_children(&self.uid, &mut children);
        children
    }

    /// Reconcile again after `requeue` (or at the next change), but soon while a word's Event
    /// is still to publish, even if the song is over: nothing else would bring it back.
    fn come_back(&self, hikawa: &Hikawa, requeue: Option<Duration>) -> Action {
        let unsaid = self.ctx.pace.unsaid.any(&self.uid);
        let requeue = if unsaid { Some(requeue.map_or(UNSAID_RETRY, |r| r.min(UNSAID_RETRY))) } else { requeue };
        requeue.map_or_else(Action::await_change, |after| self.ctx.queue.requeue(hikawa, after))
    }

    /// Record a failure: on the Hikawa (Ready=False with the reason, a Warning Event carrying
    /// the backoff, `retry.rs`) at once if it will not go away by itself, else once it has
    /// happened three times in a row; then back off. The Said Events `owed` are published first. Returns the error for the error
    /// policy.
    async fn failed(&self, hikawa: &Hikawa, seen: Footprint, error: Error, module: Option<&ModuleIdentity>, owed: Owed) -> Error {
        let (ctx, w, uid) = (self.ctx, self.w, self.uid.as_str());
        owed.publish(ctx, w, hikawa, uid).await;
        // Decide from the caches again.
        ctx.pace.own.forget(uid);
        let mut left = seen;
        // A write refused because the shard may be gone is not the Hikawa's failure: nothing
        // is recorded on it (the new holder decides afresh).
        if error.reason() != "NotLeading" && (error.is_lasting() || ctx.pace.failures(uid) + 1 >= 3) {
            let message = error.to_string();
            // The backoff this failure gets (`pace.failed` below), due from the reconcile's
            // start, goes on its Event: the cluster's record of when it is tried again.
            let (backoff, failures) = ctx.pace.next_failure(uid);
            let due = now_ms() - self.started.elapsed().as_millis() as i64 + backoff.as_millis() as i64;
            let retry = Retry { at: rfc3339_millis(due), backoff_ms: backoff.as_millis() as u64, failures }.value();
            // The Event first: whoever sees the failed status finds its Event already there.
            w.events.warn(&ctx.pace.warnings, hikawa, error.reason(), &message, "Decide", Some((RETRY, &retry))).await;
            let failed = status::after_failure(hikawa.status.as_ref(), left.generation, error.reason(), &message, module, now_ms());
            match apply::write_status(ctx, w, hikawa, failed).await {
                Ok((stored, _)) => left.status = Some(stored),
                Err(write_error) => warn!(error = %write_error, "could not record the failure in the status"),
            }
        }
        ctx.pace.failed(uid, left, self.started);
        error
    }
}

pub(super) fn error_policy(hikawa: Arc<Hikawa>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.reconcile_failed(error.reason());
    let delay = ctx.pace.retry_in(&hikawa.uid().unwrap_or_default(), Instant::now());
    warn!(hikawa = %key(&hikawa), reason = error.reason(), %error, retry_in_ms = delay.as_millis() as u64, "reconcile failed");
    ctx.queue.requeue(hikawa.as_ref(), delay)
}
