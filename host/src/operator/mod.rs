//! The operator process put together: the first module, the module sources and the swapper,
//! the HTTP endpoints, the shards this replica competes for, and the controllers. What it is
//! given is an [`OperatorConfig`] (`config`); `cli/run.rs` makes one from the flags.
//!
//! Every API request is bounded by `api_timeout`; the controller's writes for a Hikawa also go
//! through its shard's fence, so none is sent unless the shard's Lease is surely held.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::Reporter;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::controllers::hikawa::context::Shared;
use crate::process::leader::members::Record;
use crate::process::leader::{Fence, ShardTable, Sharding, fence};
use crate::supply::ModuleLoader;
use crate::supply::contract::rules::{NativeRules, RulesSlot};
use crate::supply::sandbox::SandboxEngine;
use crate::supply::sources::recorded::DefaultModuleRecord;
use crate::supply::sources::{Origin, SwapEvents, SwapOutcome, Swapper};

mod config;
pub mod controllers;
pub use config::{ModuleSources, OperatorConfig};

/// A started operator.
pub struct Running {
    pub shared: Shared,
    pub http_addr: Option<SocketAddr>,
    pub task: JoinHandle<anyhow::Result<()>>,
}

/// Start everything; returns once the first module serves (or, with `wait`, at once).
/// Fails if no source yields a usable module and `wait` is off.
pub async fn start(
    client: Client,
    config: OperatorConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<Running> {
    let slot = Arc::new(match &config.modules.native {
        Some(rules) => RulesSlot::new(Arc::new(NativeRules::new(rules.clone()))),
        None => RulesSlot::empty(),
    });
    // One engine and one set of compiled modules for the default module and every rule set.
    let engine = SandboxEngine::new(config.sandbox.clone())?;
    let reset = engine.reset_path();
    // --cache-dir keeps compiled modules too: a restart loads them instead of compiling.
    let engine = match &config.registry.cache_dir {
        Some(dir) => engine.with_compiled_cache(dir)?,
        None => engine,
    };
    let engine = match &config.compiler {
        Some(compiler) => engine.with_compiler_process(compiler.clone())?,
        None => engine,
    };
    let disk = engine.compiled_cache().map(|cache| cache.disk().clone());
    let modules = Arc::new(ModuleLoader::new(engine, config.controller.plan_limits.clone()));
    // The cache (blobs and compiled code) is bounded by --cache-max-mib; what serves is spared.
    if let Some(disk) = &disk {
        disk.set_max_bytes(config.registry.cache_max_bytes);
        let loader = Arc::downgrade(&modules);
        disk.set_in_use(Arc::new(move |digest| loader.upgrade().is_some_and(|l| l.serves(digest))));
    }
    let (turns, calls) = (modules.engine().call_shares().clone(), modules.engine().tenant_calls().clone());
    let mut shared = Shared::new(slot.clone(), modules);
    // How used instance slots are reset, as the self-check settled it: in the metrics and
    // /readyz, and in the log as a warning when the scan failed it and was turned off (the
    // expected outcomes stay at debug: a start refused by the API server is one line).
    match reset {
        crate::supply::sandbox::ResetPath::FellBack { .. } => warn!("{}", reset.describe()),
        _ => tracing::debug!("{}", reset.describe()),
    }
    shared.metrics.instance_reset(reset.label());
    shared.health.set_instance_reset(reset.describe());
    // Every request measured (by verb, resource and code) and bounded; the controller's writes
    // are fenced per shard (reconcile_held_shards).
    let raw = crate::process::api_metrics::observed(client, shared.metrics.clone());
    let client = fence::guarded(raw.clone(), Fence::open(config.api_timeout));
    shared.registry = crate::supply::oci::Registry::new(config.registry.clone()).map_err(anyhow::Error::msg)?;
    // --module-oci's tag is named for the process's life: its record in the cache stays.
    if let Some(oci) = &config.modules.oci {
        shared.registry.name_tag_always(&oci.reference);
    }
    // --trusted-keys read again as they change, on every replica: a key removed stops the
    // default module it alone verified too, not only rule sets.
    shared.registry.keys().keep_current();
    // Each tenant's use in the metrics, read when they are scraped.
    {
        let registry = shared.registry.clone();
        shared.metrics.tenants.read_with(Box::new(move || {
            let cache = disk.as_ref().map(|disk| disk.usage()).unwrap_or_default();
            crate::supply::tenant::usage(&turns.given(), &calls.counted(), &crate::supply::sandbox::COMPILES.waited(), &registry.pulls_by_tenant(), &cache)
        }));
    }
    // Not ready until the API server has answered once (before the first try too).
    shared.health.set_api_unreachable(Some("not reached yet".into()));
    let http_addr = match config.http_addr {
        Some(addr) => {
            let (bound, server) = crate::process::http::bind(addr, shared.health.clone(), shared.metrics.clone())
                .await
                .with_context(|| format!("cannot serve HTTP on {addr}"))?;
            tokio::spawn(server);
            info!(addr = %bound, "serving /metrics, /healthz and /readyz");
            Some(bound)
        }
        None => None,
    };
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop.send(true);
    });

    wait_for_api_server(&client, &config, &shared).await?;
    // What this replica serves as its default module, and from where, kept beside its beat in
    // the members Lease for `explain` (none for rules linked natively).
    let mut record: Record = Arc::new(|| None);
    if config.modules.native.is_none() {
        let swapper = start_swapping(&client, &config, &shared).await?;
        let configured = configured_sources(&config.modules);
        record = Arc::new(move || swapper.serving_from().map(|(digest, from)| DefaultModuleRecord::new(&digest, &from, &configured).to_value()));
    } else if let Some(rules) = slot.current() {
        shared.metrics.module_serving(rules.identity().label());
    }

    let task = tokio::spawn(reconcile_held_shards(raw, client, shared.clone(), config, stopped, record));
    Ok(Running { shared, http_addr, task })
}

/// The default module's sources this replica was started with, as origins.
fn configured_sources(sources: &ModuleSources) -> Vec<Origin> {
    let file = sources.file.as_ref().map(|f| Origin::File(f.path.clone()));
    let configmap = sources.configmap.as_ref().map(|cm| Origin::ConfigMap { namespace: cm.namespace.clone(), name: cm.name.clone(), key: cm.key.clone() });
    let oci = sources.oci.as_ref().map(|oci| Origin::Oci(oci.reference.to_string()));
    [file, configmap, oci].into_iter().flatten().collect()
}

/// Load the first module, then keep offering what the sources see to the swapper, which is
/// returned.
async fn start_swapping(client: &Client, config: &OperatorConfig, shared: &Shared) -> anyhow::Result<Arc<Swapper>> {
    let sources = &config.modules;
    anyhow::ensure!(
        sources.file.is_some() || sources.configmap.is_some() || sources.oci.is_some(),
        "no rules module source: give --module PATH, --module-configmap NAMESPACE/NAME[:KEY] or --module-oci REF"
    );
    let swapper = Arc::new(Swapper::new(
        shared.modules.clone(),
        sources.pin.clone(),
        shared.rules.clone(),
        shared.metrics.clone(),
        Some(swap_events(client, config)),
    ));

    // The first module: the file, else the ConfigMap; every failure is named if none serves.
    let mut problems = Vec::new();
    let mut file_offered = None;
    if let Some(file) = &sources.file {
        match file.read(&shared.registry).await {
            Some(candidate) => {
                file_offered = Some(candidate.key().to_owned());
                if let SwapOutcome::Rejected(why) = swapper.offer(candidate).await {
                    problems.push(format!("{} rejected ({}): {why}", file.path.display(), why.reason()));
                }
            }
            None => problems.push(format!("{} does not exist", file.path.display())),
        }
    }
    if let Some(cm) = &sources.configmap
        && shared.rules.current().is_none()
    {
        match cm.fetch(client, &shared.registry).await {
            Ok(candidate) => {
                if let SwapOutcome::Rejected(why) = swapper.offer(candidate).await {
                    problems.push(format!("ConfigMap {cm} rejected ({}): {why}", why.reason()));
                }
            }
            Err(error) => problems.push(format!("cannot read ConfigMap {cm}: {error}")),
        }
    }
    let mut oci_served = None;
    // The registry of --module-oci cannot give the module now but may later (it is down, it
    // answers 5xx, the pull secret is refused): exiting would only restart the container into
    // the same registry, a crash loop (kubewarden/policy-server#374). Such a process waits,
    // not ready, and the source tries again with backoff.
    let mut registry_pending = false;
    if let Some(oci) = &sources.oci
        && shared.rules.current().is_none()
    {
        let (digest, candidate) = oci.fetch(&shared.registry).await;
        registry_pending = candidate.pending();
        match swapper.offer(candidate).await {
            SwapOutcome::Rejected(why) => problems.push(format!("{} rejected ({}): {why}", oci.reference, why.reason())),
            _ => oci_served = digest,
        }
    }
    if shared.rules.current().is_none() {
        let problems = problems.join("; ");
        if registry_pending {
            warn!(%problems, "no usable rules module yet: the registry of --module-oci may give it later; not ready, trying again with backoff");
            // /readyz says why (a registry down, a certificate store missing), not only that.
            shared.health.set_no_module(Some(crate::text::printable(&problems, 1024)));
        } else {
            anyhow::ensure!(sources.wait, "no usable rules module: {problems} (--wait-for-module waits for one instead)");
            warn!(%problems, "no usable rules module yet; waiting for one (--wait-for-module)");
        }
    }

    let (candidates, offers) = mpsc::channel(8);
    if let Some(file) = sources.file.clone() {
        tokio::spawn(file.watch(shared.registry.clone(), candidates.clone(), file_offered));
    }
    if let Some(cm) = sources.configmap.clone() {
        tokio::spawn(cm.watch(client.clone(), shared.registry.clone(), candidates.clone()));
    }
    if let Some(oci) = sources.oci.clone() {
        tokio::spawn(oci.watch(shared.registry.clone(), candidates.clone(), oci_served));
    }
    tokio::spawn(swapper.clone().serve(offers));
    Ok(swapper)
}

/// Swap Events go on the operator's Pod when it knows its name, else on its namespace.
fn swap_events(client: &Client, config: &OperatorConfig) -> SwapEvents {
    let namespace = config
        .namespace
        .clone()
        .or_else(|| config.modules.configmap.as_ref().map(|cm| cm.namespace.clone()))
        .unwrap_or_else(|| "default".into());
    let regarding = match &config.pod_name {
        Some(pod) => ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod.clone()),
            namespace: Some(namespace),
            ..ObjectReference::default()
        },
        None => ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Namespace".into()),
            name: Some(namespace),
            ..ObjectReference::default()
        },
    };
    let reporter = Reporter { controller: "zundoko-operator".into(), instance: Some(config.controller.instance.clone()) };
    SwapEvents { client: client.clone(), reporter, regarding }
}

async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Until the API server answers: one line per try, backing off (0.5 s doubling to 5 s). Only
/// what will not heal by waiting ends the process: credentials refused (401) or not allowed
/// (403) to read what the operator needs.
async fn wait_for_api_server(client: &Client, config: &OperatorConfig, shared: &Shared) -> anyhow::Result<()> {
    let mut delay = Duration::from_millis(500);
    let mut attempt = 0u64;
    loop {
        attempt += 1;
        let answer = match &config.leader {
            // The Leases are the first thing a replica needs: try one (not found is fine).
            Some(leader) => kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client.clone(), &leader.namespace)
                .get_opt(&crate::process::leader::assign::members_lease_name(&leader.lease_prefix))
                .await
                .map(drop),
            None => client.apiserver_version().await.map(drop),
        };
        match answer {
            Ok(()) => {
                shared.health.set_api_unreachable(None);
                if attempt > 1 {
                    info!(attempt, "the API server answers");
                }
                return Ok(());
            }
            Err(kube::Error::Api(status)) if matches!(status.code, 401 | 403) => anyhow::bail!(
                "the API server refuses this operator's credentials ({} {}): {}",
                status.code,
                status.reason,
                crate::text::printable(&status.message, 512)
            ),
            Err(error) => {
                let error = crate::text::printable(&error.to_string(), 512);
                warn!(attempt, retry_in_ms = delay.as_millis() as u64, %error, "the API server does not answer yet");
                shared.health.set_api_unreachable(Some(error));
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// A Warning Event on the operator's Pod: the API server may be out of reach just then (a
/// partition is one way to lose shards), so it is tried again for about two minutes.
async fn tell_lost(events: SwapEvents, note: String) {
    let mut delay = Duration::from_secs(1);
    for _ in 0..8 {
        match events.try_publish(kube::runtime::events::EventType::Warning, "LeaderLost", &note, "Lead").await {
            Ok(()) => return,
            Err(error) => tracing::debug!(%error, "could not publish LeaderLost yet"),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(30));
    }
    warn!("could not publish the LeaderLost Event on the operator's Pod");
}

/// Once a module serves: reconcile the Hikawas of the shards this replica holds (all of them
/// without election) until shut down, then hand the shards back. `client` bounds every
/// request; `raw` is what each shard's fenced client wraps.
async fn reconcile_held_shards(raw: Client, client: Client, shared: Shared, config: OperatorConfig, stop: watch::Receiver<bool>, record: Record) -> anyhow::Result<()> {
    tokio::select! {
        _ = shared.rules.loaded() => {}
        _ = stopped(stop.clone()) => return Ok(()),
    }
    let Some(leader) = &config.leader else {
        let table = ShardTable::all(config.shards, &config.controller.instance, client.clone());
        shared.metrics.set_shards(table.count, table.count as usize);
        controllers::run(client, table, shared.clone(), config.controller.clone(), stopped(stop)).await;
        return Ok(());
    };
    let mut sharding = Sharding::start(raw, client.clone(), leader, config.api_timeout, shared.metrics.clone(), record);
    // Shards lost past their renew deadline: said on the Pod, once the API server answers.
    let mut lost = std::mem::replace(&mut sharding.lost, mpsc::unbounded_channel().1);
    let pod_events = swap_events(&client, &config);
    tokio::spawn(async move {
        while let Some(why) = lost.recv().await {
            let note = format!("stopped deciding for shards past their renew deadline ({why}); their decisions cancelled, waiting to take shards again");
            tokio::spawn(tell_lost(pod_events.clone(), crate::text::printable(&note, 1024)));
        }
    });
    // Graceful: reconciles in flight finish, then every shard is handed back.
    controllers::run(client, sharding.table.clone(), shared.clone(), config.controller.clone(), stopped(stop)).await;
    sharding.resign().await;
    Ok(())
}
