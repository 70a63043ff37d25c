//! Swap latency: from the module changing (a kubelet-style `..data` swap of the mounted file,
//! or an update of the ConfigMap through the API) to the first reconcile on the new module,
//! seen as the first Hikawa status naming it; and failed reconciles during the swaps. Songs
//! are in progress throughout. The operator runs in-process against the local API server.
//!
//! `make bench-swap` (release). Each swap offers a module never seen before (one of the two
//! shipped rule sets with a unique custom section), so every swap compiles; a last series
//! swaps back and forth between two modules the operator has compiled already.

#[path = "../tests/common/kubelet.rs"]
mod kubelet;

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use zundoko_apiserver::{ApiServer, ServerConfig};
use zundoko_operator::controller::Settings;
use zundoko_operator::crd::{self, Hikawa, HikawaSpec};
use zundoko_operator::operator::{self, ModuleSources, OperatorConfig, Running};
use zundoko_operator::sandbox::SandboxLimits;
use zundoko_operator::swap::configmap::ConfigMapRef;
use zundoko_operator::swap::digest;
use zundoko_operator::swap::file::FileSource;

const SWAPS: usize = 20;
const SONGS: usize = 20;

fn module(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/../target/modules/{name}.wasm", env!("CARGO_MANIFEST_DIR"))).expect("run `make guest` first")
}

/// The module with a custom section appended: same rules, new bytes, new digest.
fn unique(mut bytes: Vec<u8>, n: usize) -> Vec<u8> {
    let name = b"bench-swap";
    let payload = n.to_le_bytes();
    let size = 1 + name.len() + payload.len();
    assert!(size < 128 && name.len() < 128, "one-byte LEB128 lengths");
    bytes.extend([0u8, size as u8, name.len() as u8]);
    bytes.extend(name);
    bytes.extend(payload);
    bytes
}

struct Bench {
    client: Client,
    _server: ApiServer,
}

async fn cluster() -> Bench {
    let server = ApiServer::start(ServerConfig::default()).await.unwrap();
    let client = Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for c in crd::all() {
        crds.create(&PostParams::default(), &c).await.unwrap();
    }
    Bench { client, _server: server }
}

/// Stop the operator and wait for it (reconciles in flight finish).
async fn stop(running: Running, stop: tokio::sync::oneshot::Sender<()>) {
    let _ = stop.send(());
    running.task.await.expect("the operator task").expect("the operator stops cleanly");
}

async fn start(bench: &Bench, modules: ModuleSources) -> (Running, tokio::sync::oneshot::Sender<()>) {
    let config = OperatorConfig {
        controller: Settings::default(),
        sandbox: SandboxLimits::default(),
        modules,
        http_addr: None,
        leader: None,
        namespace: None,
        pod_name: None,
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = operator::start(bench.client.clone(), config, async move {
        let _ = stopped.await;
    })
    .await
    .unwrap();
    (running, stop)
}

/// Songs that go on for the whole run (sixteen Zun before the Doko), a word every 100 ms each.
async fn sing(bench: &Bench) {
    let api: Api<Hikawa> = Api::namespaced(bench.client.clone(), "default");
    for i in 0..SONGS {
        let mut hikawa = Hikawa::new(
            &format!("bench-{i}"),
            HikawaSpec { interval_millis: 100, params: [("zuns".into(), "16".into())].into(), ..HikawaSpec::default() },
        );
        hikawa.metadata.namespace = Some("default".into());
        api.create(&PostParams::default(), &hikawa).await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Time from `change` to the first Hikawa status naming `new_digest`.
async fn time_swap(bench: &Bench, new_digest: &str, change: impl AsyncFnOnce()) -> Duration {
    let api: Api<Hikawa> = Api::namespaced(bench.client.clone(), "default");
    let mut statuses = Box::pin(watcher(api, watcher::Config::default()).applied_objects());
    // The watch is running before the change, so nothing is missed.
    while let Some(event) = tokio::time::timeout(Duration::from_millis(50), statuses.next()).await.ok().flatten() {
        event.unwrap();
    }
    let started = Instant::now();
    change().await;
    loop {
        let hikawa = tokio::time::timeout(Duration::from_secs(30), statuses.next())
            .await
            .expect("a status naming the new module within 30 s")
            .unwrap()
            .unwrap();
        if hikawa.status.and_then(|s| s.module).is_some_and(|m| m.digest == new_digest) {
            return started.elapsed();
        }
    }
}

/// Mean time the swapper spent checking candidates (compile, world, smoke test) so far.
fn mean_check_ms(running: &Running) -> f64 {
    let text = running.shared.metrics.encode();
    let value = |name: &str| text.lines().find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok()).unwrap_or(0.0);
    value("zundoko_module_check_duration_seconds_sum ") * 1e3 / value("zundoko_module_check_duration_seconds_count ").max(1.0)
}

fn summary(what: &str, mut times: Vec<Duration>, failed: u64) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{what:<44} | {:>4} | {:>9.1} | {:>9.1} | {:>9.1} | {failed:>6}",
        times.len(),
        ms(times[0]),
        ms(times[times.len() / 2]),
        ms(*times.last().unwrap())
    );
}

async fn file_path(rule_sets: &[Vec<u8>; 2]) {
    let bench = cluster().await;
    let mut volume = kubelet::ConfigMapVolume::new("bench-swap");
    volume.update(&[("rules.wasm", &rule_sets[0])]);
    let file = FileSource { path: volume.path("rules.wasm"), settle: Duration::from_millis(10), poll: Duration::from_secs(5) };
    let (running, stopper) = start(&bench, ModuleSources { file: Some(file), ..ModuleSources::default() }).await;
    sing(&bench).await;
    let mut fresh = Vec::new();
    for n in 1..=SWAPS {
        let bytes = unique(rule_sets[n % 2].clone(), n);
        fresh.push(time_swap(&bench, &digest(&bytes), async || volume.update(&[("rules.wasm", &bytes)])).await);
    }
    summary("file (..data swap), new module each time", fresh, running.shared.metrics.reconcile_errors_total());
    println!("  of which checking a new module (compile, world, smoke test): {:.1} ms mean", mean_check_ms(&running));
    let mut cached = Vec::new();
    for n in 1..=SWAPS {
        let bytes = &rule_sets[n % 2];
        cached.push(time_swap(&bench, &digest(bytes), async || volume.update(&[("rules.wasm", bytes)])).await);
    }
    summary("file (..data swap), back and forth (compiled)", cached, running.shared.metrics.reconcile_errors_total());
    stop(running, stopper).await;
}

async fn put_configmap(bench: &Bench, bytes: &[u8]) {
    let api: Api<ConfigMap> = Api::namespaced(bench.client.clone(), "default");
    let cm = ConfigMap {
        metadata: ObjectMeta { name: Some("zundoko-rules".into()), ..ObjectMeta::default() },
        binary_data: Some([("rules.wasm".to_string(), ByteString(bytes.to_vec()))].into()),
        ..ConfigMap::default()
    };
    api.patch("zundoko-rules", &PatchParams::apply("bench").force(), &Patch::Apply(&cm)).await.unwrap();
}

async fn api_path(rule_sets: &[Vec<u8>; 2]) {
    let bench = cluster().await;
    put_configmap(&bench, &rule_sets[0]).await;
    let configmap: ConfigMapRef = "default/zundoko-rules".parse().unwrap();
    let (running, stopper) = start(&bench, ModuleSources { configmap: Some(configmap), ..ModuleSources::default() }).await;
    sing(&bench).await;
    let mut fresh = Vec::new();
    for n in 1..=SWAPS {
        let bytes = unique(rule_sets[n % 2].clone(), n);
        fresh.push(time_swap(&bench, &digest(&bytes), async || put_configmap(&bench, &bytes).await).await);
    }
    summary("ConfigMap via the API, new module each time", fresh, running.shared.metrics.reconcile_errors_total());
    stop(running, stopper).await;
}

#[tokio::main]
async fn main() {
    let rule_sets = [module("zundoko-classic"), module("zundoko-strict-ja")];
    println!("swap latency: module change -> first Hikawa status naming the new module ({SONGS} songs in progress)");
    println!("{:<44} | {:>4} | {:>9} | {:>9} | {:>9} | {:>6}", "source", "n", "best ms", "median ms", "worst ms", "failed");
    file_path(&rule_sets).await;
    api_path(&rule_sets).await;
    println!("(failed: reconciles that failed during the series, from the operator's own metric; must be 0)");
}
