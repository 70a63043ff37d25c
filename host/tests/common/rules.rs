//! Rule sets (`ZundokoRules`) as the tests make and read them.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::Api;
use kube::api::PostParams;
use sha2::{Digest, Sha256};
use zundoko_operator::crd::{
    CandidateSpec, Hikawa, HikawaSpec, ModuleSource, RolloutSpec, RolloutStatus, ZundokoRules, ZundokoRulesSpec, ZundokoRulesStatus,
};

use super::cluster::Cluster;

/// A module's bytes loaded in a sandbox with the default limits: the rules an operator in
/// process starts with.
pub fn wasm(bytes: &[u8]) -> std::sync::Arc<dyn zundoko_operator::supply::contract::rules::Rules> {
    std::sync::Arc::new(zundoko_operator::supply::sandbox::SandboxEngine::new(zundoko_operator::supply::sandbox::SandboxLimits::default()).unwrap().load(bytes).unwrap())
}

/// The operator reads rule sets' ConfigMaps here by default.
pub const RULES_NS: &str = "zundoko-system";

pub fn source(configmap: &str) -> ModuleSource {
    ModuleSource::config_map(RULES_NS, configmap)
}

pub fn rules_api(cluster: &Cluster) -> Api<ZundokoRules> {
    Api::all(cluster.client.clone())
}

pub async fn create_rules(cluster: &Cluster, name: &str, spec: ZundokoRulesSpec) {
    rules_api(cluster).create(&PostParams::default(), &ZundokoRules::new(name, spec)).await.unwrap();
}

pub fn plain(configmap: &str) -> ZundokoRulesSpec {
    ZundokoRulesSpec { source: source(configmap), sha256: None, candidate: None }
}

pub async fn rules_status(cluster: &Cluster, name: &str) -> ZundokoRulesStatus {
    rules_api(cluster).get(name).await.unwrap().status.unwrap_or_default()
}

pub async fn wait_rules(cluster: &Cluster, name: &str, what: &str, check: impl Fn(&ZundokoRulesStatus) -> bool) -> ZundokoRulesStatus {
    wait_rules_within(cluster, name, what, Duration::from_secs(30), check).await
}

/// The same within `deadline`: for what the docs promise within a time (a retry, a poll).
pub async fn wait_rules_within(cluster: &Cluster, name: &str, what: &str, deadline: Duration, check: impl Fn(&ZundokoRulesStatus) -> bool) -> ZundokoRulesStatus {
    let started = std::time::Instant::now();
    loop {
        let status = rules_status(cluster, name).await;
        if check(&status) {
            println!("{what}: {:?}", started.elapsed());
            return status;
        }
        assert!(started.elapsed() < deadline, "timed out after {deadline:?} waiting for {what}; the status: {status:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn sing(cluster: &Cluster, name: &str, interval_millis: u64, rules: Option<&str>, params: &[(&str, &str)]) -> Hikawa {
    let spec = HikawaSpec {
        interval_millis,
        rules: rules.map(str::to_owned),
        params: params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
        ..HikawaSpec::default()
    };
    let mut hikawa = Hikawa::new(name, spec);
    hikawa.metadata.namespace = Some("default".into());
    cluster.hikawas("default").create(&PostParams::default(), &hikawa).await.unwrap()
}

pub async fn decided_by(cluster: &Cluster, hikawa: &str) -> Option<String> {
    let h = cluster.hikawas("default").get(hikawa).await.unwrap();
    h.status?.module.map(|m| m.digest)
}

pub async fn ready(cluster: &Cluster, hikawa: &str) -> Option<(String, String, String)> {
    let h = cluster.hikawas("default").get(hikawa).await.unwrap();
    let c = h.status?.conditions.into_iter().find(|c| c.type_ == "Ready")?;
    Some((c.status, c.reason, c.message))
}

/// Events on a rule set (cluster-scoped: its Events are in `default`), oldest first.
pub async fn rules_events(cluster: &Cluster, name: &str) -> Vec<(String, String)> {
    let list = cluster.events_regarding("default", "ZundokoRules", name).await;
    list.into_iter().map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default())).collect()
}

/// The share rule, computed here independently: the first 8 bytes of sha256(uid) mod 100.
pub fn in_share(uid: &str, percent: u64) -> bool {
    let hash = Sha256::digest(uid.as_bytes());
    u64::from_be_bytes(hash[..8].try_into().unwrap()) % 100 < percent
}

pub fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

pub fn rollout(percent: u8, promote_after_seconds: Option<u64>, promote_after_decisions: Option<u64>, max_failure_percent: u8) -> RolloutSpec {
    RolloutSpec { percent, promote_after_seconds, promote_after_decisions, max_failure_percent }
}

/// Rule set `name`: the module of ConfigMap `stable`, and a candidate from `candidate` rolled
/// out as `spec` says; returns once the rollout started.
pub async fn start_rollout(cluster: &Cluster, name: &str, candidate: &str, spec: RolloutSpec) {
    let rules = ZundokoRulesSpec { candidate: Some(CandidateSpec { source: source(candidate), sha256: None, rollout: spec }), ..plain("stable") };
    create_rules(cluster, name, rules).await;
    wait_rules(cluster, name, "the rollout started", |s| s.phase.as_deref() == Some("RollingOut")).await;
}

/// The sum of a rollout's replica entries for its own candidate.
pub fn counted(rollout: &RolloutStatus) -> (u64, u64) {
    rollout.replicas.values().filter(|c| c.digest == rollout.digest).fold((0, 0), |(d, f), c| (d + c.decisions, f + c.failures))
}

