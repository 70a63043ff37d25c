//! Swap latency: from the module changing (a kubelet-style `..data` swap of the mounted file,
//! or an update of the ConfigMap through the API) to the first reconcile on the new module,
//! seen as the first Hikawa status naming it; and failed reconciles during the swaps. Songs
//! are in progress throughout. The operator runs in-process against the local API server.
//!
//! `make bench-swap` (release). Each swap offers a module never seen before (one of the two
//! shipped rule sets with a unique custom section), so every swap compiles; a last series
//! swaps back and forth between two modules the operator has compiled already.

// The integration tests' local cluster and in-process operator.
#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::kubelet::ConfigMapVolume;
use common::{module_bytes, with_custom_section};
use common::running::{Operator, start};
use futures::StreamExt;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use zundoko_operator::crd::Hikawa;
use zundoko_operator::supply::sources::configmap::ConfigMapRef;
use zundoko_operator::supply::sources::digest;
use zundoko_operator::supply::sources::file::FileSource;
use zundoko_operator::operator::ModuleSources;

const SWAPS: usize = 20;
const SONGS: usize = 20;

/// Songs that go on for the whole run (sixteen Zun before the Doko), a word every 100 ms each.
async fn sing(cluster: &Cluster) {
    for i in 0..SONGS {
        cluster.create_hikawa("default", &format!("bench-{i}"), 100, &[("zuns", "16")]).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Time from `change` to the first Hikawa status naming `new_digest`.
async fn time_swap(cluster: &Cluster, new_digest: &str, change: impl AsyncFnOnce()) -> Duration {
    let api: Api<Hikawa> = cluster.hikawas("default");
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
fn mean_check_ms(operator: &Operator) -> f64 {
    let text = operator.metrics();
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
    let cluster = Cluster::start().await;
    let mut volume = ConfigMapVolume::new("bench-swap");
    volume.update(&[("rules.wasm", &rule_sets[0])]);
    // The command line's defaults.
    let file = FileSource { path: volume.path("rules.wasm"), settle: Duration::from_millis(10), poll: Duration::from_secs(5) };
    let operator = start(&cluster, ModuleSources { file: Some(file), ..ModuleSources::default() }).await.unwrap();
    sing(&cluster).await;
    let mut fresh = Vec::new();
    for n in 1..=SWAPS {
        let bytes = with_custom_section(rule_sets[n % 2].clone(), n as u64);
        fresh.push(time_swap(&cluster, &digest(&bytes), async || volume.update(&[("rules.wasm", &bytes)])).await);
    }
    summary("file (..data swap), new module each time", fresh, operator.failed_reconciles());
    println!("  of which checking a new module (compile, world, smoke test): {:.1} ms mean", mean_check_ms(&operator));
    let mut cached = Vec::new();
    for n in 1..=SWAPS {
        let bytes = &rule_sets[n % 2];
        cached.push(time_swap(&cluster, &digest(bytes), async || volume.update(&[("rules.wasm", bytes)])).await);
    }
    summary("file (..data swap), back and forth (compiled)", cached, operator.failed_reconciles());
    operator.stop().await;
}

async fn api_path(rule_sets: &[Vec<u8>; 2]) {
    let cluster = Cluster::start().await;
    cluster.put_module_configmap("default", &rule_sets[0]).await;
    let configmap: ConfigMapRef = "default/zundoko-rules".parse().unwrap();
    let operator = start(&cluster, ModuleSources { configmap: Some(configmap), ..ModuleSources::default() }).await.unwrap();
    sing(&cluster).await;
    let mut fresh = Vec::new();
    for n in 1..=SWAPS {
        let bytes = with_custom_section(rule_sets[n % 2].clone(), n as u64);
        fresh.push(time_swap(&cluster, &digest(&bytes), async || cluster.put_module_configmap("default", &bytes).await).await);
    }
    summary("ConfigMap via the API, new module each time", fresh, operator.failed_reconciles());
    operator.stop().await;
}

#[tokio::main]
async fn main() {
    let rule_sets = [module_bytes("zundoko-classic"), module_bytes("zundoko-strict-ja")];
    println!("swap latency: module change -> first Hikawa status naming the new module ({SONGS} songs in progress)");
    println!("{:<44} | {:>4} | {:>9} | {:>9} | {:>9} | {:>6}", "source", "n", "best ms", "median ms", "worst ms", "failed");
    file_path(&rule_sets).await;
    api_path(&rule_sets).await;
    println!("(failed: reconciles that failed during the series, from the operator's own metric; must be 0)");
}
