//! The controller: kube-runtime's `Controller` on Hikawa, owning Zundoko and Kiyoshi.
//! Each reconcile: observe (from the caches), decide (the guest, then the plan check),
//! apply, and requeue as the rules asked. Nothing is remembered between reconciles but the
//! retry backoff.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tracing::{Instrument, info, info_span, warn};

use crate::apply::{self, HIKAWA_LABEL};
use crate::context::{Backoff, Context, Shared};
use crate::crd::{Hikawa, Kiyoshi, Zundoko};
use crate::error::{Error, Result};
use crate::observe::observe;
use crate::plan_check::PlanLimits;
use crate::rules::decide_async;
use crate::status;

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Watch only this namespace; all namespaces if `None`.
    pub namespace: Option<String>,
    /// Hikawas reconciled at once.
    pub concurrency: u16,
    pub plan_limits: PlanLimits,
    /// First retry delay after a failure, doubled per failure in a row up to `backoff_max`.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// Names this process in Events (`reportingInstance`).
    pub instance: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            namespace: None,
            concurrency: 16,
            plan_limits: PlanLimits::default(),
            backoff_base: Duration::from_millis(250),
            backoff_max: Duration::from_secs(60),
            instance: std::env::var("HOSTNAME").unwrap_or_else(|_| "zundoko-operator".into()),
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

/// Run until `shutdown` completes, then let reconciles in flight finish.
/// Every Hikawa is reconciled again after each module swap.
pub async fn run(client: Client, shared: Shared, settings: Settings, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let ns = settings.namespace.as_deref();
    // Only children carrying the operator's label are cached: the controller needs no others.
    let children = watcher::Config::default().labels(HIKAWA_LABEL);
    let (zundokos, zundoko_writer) = reflector::store();
    let (kiyoshis, kiyoshi_writer) = reflector::store();
    // managedFields are never read here and can be most of a small object: not cached.
    let zundoko_events = reflector(
        zundoko_writer,
        watcher(api::<Zundoko>(&client, ns), children.clone()).modify(|z| z.managed_fields_mut().clear()),
    )
    .default_backoff()
    .touched_objects();
    let kiyoshi_events = reflector(
        kiyoshi_writer,
        watcher(api::<Kiyoshi>(&client, ns), children).modify(|k| k.managed_fields_mut().clear()),
    )
    .default_backoff()
    .touched_objects();

    let reporter = Reporter { controller: "zundoko-operator".into(), instance: Some(settings.instance.clone()) };
    // One waiter on the stores, shared by every reconcile: kube's `wait_until_ready` wakes
    // only one of several concurrent waiters, which left all Hikawas but one waiting after
    // a restart.
    let caches_ready = {
        let (zundokos, kiyoshis) = (zundokos.clone(), kiyoshis.clone());
        async move {
            let _ = futures::join!(zundokos.wait_until_ready(), kiyoshis.wait_until_ready());
        }
        .boxed()
        .shared()
    };
    shared.health.set_reconciling(true);
    let synced = {
        let (ready, health) = (caches_ready.clone(), shared.health.clone());
        tokio::spawn(async move {
            ready.await;
            health.set_caches_synced();
        })
    };
    let ctx = Arc::new(Context {
        caches_ready,
        client: client.clone(),
        recorder: Recorder::new(client.clone(), reporter),
        rules: shared.rules.clone(),
        metrics: shared.metrics.clone(),
        plan_limits: settings.plan_limits.clone(),
        zundokos,
        kiyoshis,
        backoff: Backoff::new(settings.backoff_base, settings.backoff_max),
    });
    info!(namespace = ns.unwrap_or("(all)"), concurrency = settings.concurrency, "starting the Hikawa controller");
    Controller::new(api::<Hikawa>(&client, ns), watcher::Config::default())
        .owns_stream(zundoko_events)
        .owns_stream(kiyoshi_events)
        .reconcile_all_on(shared.rules.swaps())
        .with_config(controller::Config::default().concurrency(settings.concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "reconcile failed");
            }
        })
        .await;
    synced.abort();
    shared.health.set_reconciling(false);
    info!("the Hikawa controller stopped");
}

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
    // Deciding from half-filled caches would re-say words that exist: wait for the first list.
    ctx.caches_ready.clone().await;
    ctx.metrics.reconciled();
    let Some(rules) = ctx.rules.current() else {
        // Only reachable if the controller is started before a module: nothing to decide with.
        return Ok(Action::requeue(Duration::from_secs(1)));
    };
    let entropy: u64 = rand::random();
    let observed = Arc::new(observe(&hikawa, &ctx.zundokos, &ctx.kiyoshis, now_ms(), entropy));
    let decision = decide_async(rules, observed.clone(), ctx.plan_limits.clone()).await;
    ctx.metrics.decided(&decision);
    let module = decision.module.clone();
    match decision.outcome {
        Ok(plan) => {
            info!(
                module = %module.digest,
                entropy = format_args!("{entropy:#018x}"),
                words = observed.zundokos.len(),
                %plan,
                fuel = decision.fuel_used.unwrap_or(0),
                elapsed_us = decision.elapsed.as_micros() as u64,
                "decided"
            );
            apply::apply(&ctx, &hikawa, &observed, &plan, &module).await?;
            ctx.backoff.reset(&key(&hikawa));
            Ok(match plan.requeue_after() {
                Some(ms) => Action::requeue(Duration::from_millis(ms)),
                None => Action::await_change(),
            })
        }
        Err(error) => {
            warn!(
                module = %module.digest,
                entropy = format_args!("{entropy:#018x}"),
                reason = error.reason(),
                %error,
                "the rules failed; nothing applied"
            );
            let failed = status::after_failure(hikawa.status.as_ref(), observed.hikawa.generation, &error, &module, observed.now);
            if let Err(write_error) = apply::write_status(&ctx, &hikawa, failed).await {
                warn!(error = %write_error, "could not record the failure in the status");
            }
            ctx.publish(&hikawa, EventType::Warning, error.reason(), &error.to_string(), "Decide", None).await;
            Err(Error::Guest(error))
        }
    }
}

fn error_policy(hikawa: Arc<Hikawa>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.reconcile_failed(error.reason());
    let delay = ctx.backoff.next(&key(&hikawa));
    warn!(hikawa = %key(&hikawa), reason = error.reason(), %error, retry_in_ms = delay.as_millis() as u64, "reconcile failed");
    Action::requeue(delay)
}
