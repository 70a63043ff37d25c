//! Throughput: N Hikawas with `intervalMillis: 0`, from creation to Kiyoshi, against the local
//! API server, with the wasm rules and with the same rules linked natively, in one run; and
//! the operator's RSS idle and at the end. The operator runs as its own process.
//!
//! `make bench-throughput` (release). `ZUNDOKO_BENCH_HIKAWAS` sets N (default 1000).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use zundoko_apiserver::{ApiServer, ServerConfig};
use zundoko_operator::crd::{self, Hikawa, HikawaSpec};

fn rss_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

struct Run {
    seconds: f64,
    words: u64,
    rss_idle_mib: f64,
    rss_end_mib: f64,
    rss_peak_mib: f64,
}

async fn run(n: usize, rules_args: &[&str]) -> Run {
    let server = ApiServer::start(ServerConfig { history_size: 200_000, ..ServerConfig::default() }).await.unwrap();
    let kubeconfig = std::env::temp_dir().join(format!("zundoko-bench-{}.kubeconfig", server.addr().port()));
    std::fs::write(&kubeconfig, server.kubeconfig_yaml()).unwrap();
    let client = Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for c in crd::all() {
        crds.create(&PostParams::default(), &c).await.unwrap();
    }
    let mut operator: Child = Command::new(env!("CARGO_BIN_EXE_zundoko-operator"))
        .arg("run")
        .args(rules_args)
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pid = operator.id();
    let rss_idle = rss_kib(pid, "VmRSS:");

    let hikawas: Api<Hikawa> = Api::namespaced(client.clone(), "default");
    let started = Instant::now();
    let creates = (0..n).map(|i| {
        let hikawas = hikawas.clone();
        async move {
            let mut h = Hikawa::new(&format!("bench-{i:04}"), HikawaSpec { interval_millis: 0, ..HikawaSpec::default() });
            h.metadata.namespace = Some("default".into());
            hikawas.create(&PostParams::default(), &h).await.unwrap();
        }
    });
    futures::future::join_all(creates).await;
    let (seconds, words) = loop {
        let list = hikawas.list(&ListParams::default()).await.unwrap();
        let done = list.items.iter().filter(|h| h.status.as_ref().is_some_and(|s| s.kiyoshied)).count();
        if done == n {
            let words = list.items.iter().map(|h| h.status.as_ref().unwrap().num_zundokos_said as u64).sum::<u64>();
            break (started.elapsed().as_secs_f64(), words);
        }
        assert!(operator.try_wait().unwrap().is_none(), "the operator exited");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let rss_end = rss_kib(pid, "VmRSS:");
    let rss_peak = rss_kib(pid, "VmHWM:");
    operator.kill().unwrap();
    operator.wait().unwrap();
    server.shutdown().await;
    let _ = std::fs::remove_file(&kubeconfig);
    Run { seconds, words, rss_idle_mib: rss_idle as f64 / 1024.0, rss_end_mib: rss_end as f64 / 1024.0, rss_peak_mib: rss_peak as f64 / 1024.0 }
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("ZUNDOKO_BENCH_HIKAWAS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let module = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/modules/zundoko-classic.wasm");
    assert!(std::path::Path::new(module).exists(), "run `make guest` first");
    println!("{n} Hikawas, intervalMillis 0, from creation to Kiyoshi (operator as its own process, local API server in this one)");
    let wasm = run(n, &["--module", module]).await;
    let native = run(n, &["--native-rules", "classic"]).await;
    println!("{:>7} | {:>9} | {:>7} | {:>11} | {:>14} | {:>13} | {:>13}", "rules", "seconds", "words", "words/s", "RSS idle MiB", "RSS end MiB", "RSS peak MiB");
    for (name, r) in [("wasm", &wasm), ("native", &native)] {
        println!(
            "{:>7} | {:>9.2} | {:>7} | {:>11.0} | {:>14.1} | {:>13.1} | {:>13.1}",
            name, r.seconds, r.words, r.words as f64 / r.seconds, r.rss_idle_mib, r.rss_end_mib, r.rss_peak_mib
        );
    }
    // Songs are random, so compare time per word as well as total time.
    let per_word = |r: &Run| r.seconds / r.words as f64;
    println!("wasm / native: total time {:.2}x, time per word {:.2}x", wasm.seconds / native.seconds, per_word(&wasm) / per_word(&native));
}
