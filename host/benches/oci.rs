//! Modules from a registry, timed: pull + verify (digests, signature) + compile + smoke test to
//! serving, cold (empty cache, the registry asked) and warm (the blob cache serves, the
//! compiled code is loaded from the cache, the registry still asked for the tag), for the shipped 36 KB Rust module, the largest module
//! shipped, and a 16 MiB module (the classic rules with a 16 MiB custom section: the size of an
//! interpreted language's component, where pulling and hashing dominate, not compiling); then
//! the operator's start to serving with the registry down and a warm cache.
//!
//! `make bench-oci` (release). Needs Debian's docker-registry (it says so and stops without it).

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::registry::TestRegistry;
use zundoko_operator::supply::ModuleLoader;
use zundoko_operator::supply::oci::{Registry, RegistrySettings, SignKey};
use zundoko_operator::supply::sandbox::{SandboxEngine, SandboxLimits};
use zundoko_operator::supply::sources::digest;
use zundoko_operator::operator::ModuleSources;
use zundoko_operator::supply::contract::plan_check::PlanLimits;

const RUNS: usize = 5;

/// The module with a custom section of `size` bytes (its rules unchanged).
fn padded(module: Vec<u8>, size: usize) -> Vec<u8> {
    let name = "zundoko-padding";
    zundoko_operator::supply::sandbox::budget::append_custom_section(module, name, &vec![0; size - 1 - name.len()])
}

/// One pull to serving: resolve the tag, fetch and verify, compile and smoke-test.
async fn to_serving(settings: &RegistrySettings, reference: &zundoko_operator::supply::oci::ModuleRef) -> (Duration, bool) {
    let started = Instant::now();
    let registry = Registry::new(settings.clone()).unwrap();
    let auth = oci_client::secrets::RegistryAuth::Anonymous;
    let manifest = registry.resolve(reference, &auth).await.unwrap();
    let fetched = registry.fetch(reference, &manifest, &auth, &[], false).await.unwrap();
    // --cache-dir keeps compiled code too: warm, the module is loaded, not compiled.
    let engine = SandboxEngine::new(SandboxLimits::default()).unwrap().with_compiled_cache(settings.cache_dir.as_deref().unwrap()).unwrap();
    let loader = Arc::new(ModuleLoader::new(engine, PlanLimits::default()));
    let bytes = fetched.bytes;
    tokio::task::spawn_blocking(move || loader.load(&bytes, &digest(&bytes)).map(drop)).await.unwrap().unwrap();
    (started.elapsed(), fetched.from_cache)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Some(mut registry) = TestRegistry::start(false) else { return };
    let key = SignKey::generate();
    let classic = common::module_bytes("zundoko-classic");
    let target = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target");
    let largest = ["modules", "fixtures"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(target.join(dir)).into_iter().flatten().flatten())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .expect("make guest fixtures built the modules");
    let cases = [
        ("zundoko-classic".to_string(), classic.clone()),
        (format!("largest shipped ({})", largest.file_stem().unwrap().to_string_lossy()), std::fs::read(&largest).unwrap()),
        ("classic + 16 MiB section".to_string(), padded(classic.clone(), 16 << 20)),
    ];
    println!("pull + verify (digests, signature) + compile + smoke test to serving; median of {RUNS} (release)");
    println!("{:<38} {:>10} {:>12} {:>12} {:>7}", "module", "bytes", "cold", "warm cache", "ratio");
    for (i, (name, module)) in cases.iter().enumerate() {
        let reference = registry.reference(&format!("bench/m{i}:v1"));
        registry.push(&format!("bench/m{i}:v1"), module, Some(&key)).await;
        let (mut cold, mut warm) = (Vec::new(), Vec::new());
        for run in 0..RUNS {
            let cache = registry.dir().join(format!("cache-{i}-{run}"));
            let settings = RegistrySettings {
                cache_dir: Some(cache.clone()),
                trusted_keys: vec![key.trusted("bench.pub")],
                max_module_bytes: 64 << 20,
                ..registry.settings()
            };
            let (took, from_cache) = to_serving(&settings, &reference).await;
            assert!(!from_cache);
            cold.push(took);
            let (took, from_cache) = to_serving(&settings, &reference).await;
            assert!(from_cache);
            warm.push(took);
            let _ = std::fs::remove_dir_all(&cache);
        }
        let (cold, warm) = (median(cold), median(warm));
        println!("{name:<38} {:>10} {:>12.1?} {:>12.1?} {:>6.2}x", module.len(), cold, warm, cold.as_secs_f64() / warm.as_secs_f64());
    }

    // The operator's start with the registry down: the cache serves the default module.
    let cluster = Cluster::start().await;
    let cache = registry.dir().join("operator-cache");
    let reference = registry.reference("bench/m0:v1");
    let settings = RegistrySettings { cache_dir: Some(cache.clone()), trusted_keys: vec![key.trusted("bench.pub")], ..registry.settings() };
    let config = || {
        let oci = zundoko_operator::supply::sources::oci::OciSource { reference: reference.clone(), auth_file: None, poll: None };
        let mut config = common::running::config(ModuleSources { oci: Some(oci), ..ModuleSources::default() });
        config.registry = settings.clone();
        config
    };
    let started = Instant::now();
    let operator = common::running::start_with(&cluster, config()).await.unwrap();
    let up = started.elapsed();
    operator.stop().await;
    registry.stop();
    let mut down = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        let operator = common::running::start_with(&cluster, config()).await.unwrap();
        down.push(started.elapsed());
        assert_eq!(operator.serving(), Some(digest(&classic)));
        operator.stop().await;
    }
    println!("operator start to serving --module-oci (a tag, signed): registry up, cold cache {up:.1?}; registry down, warm cache {:.1?} (median of {RUNS})", median(down));
}
