//! The whole operator in-process (module sources, swapper, controller), for the swap tests.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use zundoko_operator::supply::sandbox::SandboxLimits;
use zundoko_operator::supply::sources::file::FileSource;
use zundoko_operator::operator::{self, ModuleSources, OperatorConfig, Running};

use super::cluster::Cluster;

pub struct Operator {
    pub running: Running,
    stop: oneshot::Sender<()>,
}

impl Operator {
    pub fn serving(&self) -> Option<String> {
        self.running.shared.rules.current().map(|r| r.identity().digest.clone())
    }

    pub fn metrics(&self) -> String {
        self.running.shared.metrics.encode()
    }

    pub fn failed_reconciles(&self) -> u64 {
        self.running.shared.metrics.reconcile_errors_total()
    }

    pub fn rejections(&self, reason: &str) -> u64 {
        let prefix = format!("zundoko_module_swaps_total{{result=\"rejected\",reason=\"{reason}\"}} ");
        self.metrics().lines().find_map(|l| l.strip_prefix(&prefix)?.parse().ok()).unwrap_or(0)
    }

    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.running.task.await.unwrap().unwrap();
    }
}

pub fn file(path: PathBuf) -> FileSource {
    FileSource { path, settle: Duration::from_millis(10), poll: Duration::from_millis(500) }
}

/// In-process defaults: quick retries, no HTTP, no election.
pub fn config(modules: ModuleSources) -> OperatorConfig {
    OperatorConfig {
        compiler: None,
        controller: super::cluster::quick_settings(),
        sandbox: SandboxLimits::default(),
        modules,
        registry: Default::default(),
        http_addr: None,
        leader: None,
        shards: 32,
        api_timeout: Duration::from_secs(5),
        namespace: None,
        pod_name: None,
    }
}

pub async fn start(cluster: &Cluster, modules: ModuleSources) -> anyhow::Result<Operator> {
    start_with(cluster, config(modules)).await
}

pub async fn start_with(cluster: &Cluster, config: OperatorConfig) -> anyhow::Result<Operator> {
    let (stop, stopped) = oneshot::channel::<()>();
    let running = operator::start(cluster.client.clone(), config, async move {
        let _ = stopped.await;
    })
    .await?;
    Ok(Operator { running, stop })
}

/// Poll `check` until it holds (tests may wait; reconciles never do).
pub async fn eventually(what: &str, timeout: Duration, mut check: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

