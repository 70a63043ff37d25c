//! Replicas of the operator as the cluster runs them: `zundoko-operator run` processes
//! configured with the rendered Deployment's environment, against the local API server.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, ObjectMeta, PostParams};
use serde_json::Value;

use super::cluster::{Cluster, Song};
use super::deploy::{documents, render};
use super::kubelet::temp_dir;
use super::module_bytes;
use super::rbac::RbacRules;

pub const NS: &str = "zundoko-system";

/// One shard: one replica decides for every Hikawa and the others stand by (a leader).
pub const ONE_SHARD: &[(&str, &str)] = &[("ZUNDOKO_SHARDS", "1")];
/// The Lease of that one shard.
pub const LEADER_LEASE: &str = "zundoko-operator-shard-00";

/// The operator container's environment in the rendered Deployment (values only; the
/// downward-API ones are set per process below).
pub fn deployment_env(docs: &[Value]) -> Vec<(String, String)> {
    let deployment = docs.iter().find(|d| d["kind"] == "Deployment").expect("a Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| Some((e["name"].as_str()?.to_string(), e["value"].as_str()?.to_string())))
        .collect()
}

pub struct Replica {
    pub name: String,
    pub child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl Replica {
    /// With the Deployment's environment `env`, but for the durations: lease 4 s, renew
    /// deadline 3 s, retry 0.5 s, API timeout 1.5 s.
    pub fn spawn(name: &str, kubeconfig: &Path, env: &[(String, String)], module_file: &Path, dir: &Path) -> Replica {
        Self::spawn_with(name, kubeconfig, env, &[], module_file, dir)
    }

    /// `spawn`, and `extra` last (it may override any setting).
    pub fn spawn_with(name: &str, kubeconfig: &Path, env: &[(String, String)], extra: &[(&str, &str)], module_file: &Path, dir: &Path) -> Replica {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = dir.join(format!("{name}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_zundoko-operator"))
            .arg("run")
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAME", name)
            .env("POD_NAMESPACE", NS)
            // The container's path is /etc/zundoko/module; here a local file (absent: the
            // ConfigMap watched through the API serves).
            .env("ZUNDOKO_MODULE", module_file)
            .env("ZUNDOKO_HTTP_ADDR", format!("127.0.0.1:{port}"))
            .env("ZUNDOKO_LEASE_DURATION_SECS", "4")
            .env("ZUNDOKO_LEASE_RENEW_DEADLINE_SECS", "3")
            .env("ZUNDOKO_LEASE_RETRY_PERIOD_SECS", "0.5")
            .env("ZUNDOKO_API_TIMEOUT_SECS", "1.5")
            .env("ZUNDOKO_BACKOFF_BASE_MS", "50")
            .env("ZUNDOKO_LOG_FORMAT", "text")
            // ZUNDOKO_TEST_LOG=<filter> (as for the in-process operator) logs more.
            .env("RUST_LOG", std::env::var("ZUNDOKO_TEST_LOG").unwrap_or_else(|_| "info".into()))
            // The test's own settings win.
            .envs(extra.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Replica { name: name.into(), child, port, log }
    }

    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        crate::common::http_get(self.port, path)
    }


    pub fn metric(&self, line_prefix: &str) -> Option<f64> {
        let (_, text) = self.get("/metrics")?;
        text.lines().find_map(|l| l.strip_prefix(line_prefix)?.trim().parse().ok())
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn terminate(&self) {
        Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status().unwrap();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Three replicas with the Deployment's environment, `operator-a`, `-b` and `-c`, their module
/// from the ConfigMap (no file).
pub fn spawn_three(setup: &Setup) -> Vec<Replica> {
    let missing = setup.dir.join("no-module-file-here.wasm");
    ["operator-a", "operator-b", "operator-c"].iter().map(|n| Replica::spawn(n, &setup.kubeconfig, &setup.env, &missing, &setup.dir)).collect()
}

pub struct Setup {
    pub cluster: Cluster,
    pub env: Vec<(String, String)>,
    pub rbac: RbacRules,
    pub kubeconfig: PathBuf,
    pub dir: PathBuf,
}

/// The local API server with what `make deploy` would have created before the pod starts:
/// the namespace and (if `with_module`) the module ConfigMap.
pub async fn setup(what: &str, with_module: bool) -> Setup {
    let cluster = Cluster::start().await;
    let docs = documents(&render(&module_bytes("zundoko-classic")));
    let env = deployment_env(&docs);
    let rbac = RbacRules::for_service_account(&docs, NS, "zundoko-operator");
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let ns = Namespace { metadata: ObjectMeta { name: Some(NS.into()), ..ObjectMeta::default() }, ..Namespace::default() };
    namespaces.create(&PostParams::default(), &ns).await.unwrap();
    if with_module {
        put_module(&cluster, "zundoko-classic").await;
    }
    let dir = temp_dir(what);
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.server.kubeconfig_yaml()).unwrap();
    Setup { cluster, env, rbac, kubeconfig, dir }
}

pub async fn put_module(cluster: &Cluster, module: &str) {
    cluster.put_module_configmap(NS, &module_bytes(module)).await;
}

/// The Said Events (one per word) in `default`.
pub async fn said_events(cluster: &Cluster) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(cluster.client.clone(), "default");
    let mut list = events.list(&ListParams::default()).await.unwrap().items;
    list.retain(|e| e.reason.as_deref() == Some("Said"));
    list
}

/// Every song's children: indexes 1..n, each word once, and exactly one Said Event per child.
/// (For songs that have ended: a song still going on may say a word between the two lists.)
pub async fn assert_each_word_once(cluster: &Cluster, songs: &[(String, Song)]) {
    let said = said_events(cluster).await;
    let ours = |e: &&Event| e.regarding.as_ref().and_then(|r| r.name.as_ref()).is_some_and(|n| songs.iter().any(|(name, _)| name == n));
    let mut related: Vec<String> = said.iter().filter(ours).filter_map(|e| e.related.as_ref()?.name.clone()).collect();
    let total = related.len();
    related.sort();
    related.dedup();
    assert_eq!(related.len(), total, "a word's Said Event twice");
    let children: usize = songs.iter().map(|(_, s)| s.words.len() + s.kiyoshis.len()).sum();
    for (name, song) in songs {
        let expected: Vec<u32> = (1..=song.words.len() as u32).collect();
        assert_eq!(song.indexes, expected, "{name}: indexes");
        assert!(song.kiyoshis.len() <= 1, "{name}: {:?}", song.kiyoshis);
    }
    assert_eq!(total, children, "one Said Event per word");
}

/// Songs that have ended (their Said Events may still be on their way, sent again after a
/// refusal): within 30 s a Said Event for every word, and each just once.
pub async fn wait_each_word_said_once(cluster: &Cluster, names: &[String]) {
    let songs = songs(cluster, names).await;
    let words: usize = songs.iter().map(|(_, s)| s.words.len() + s.kiyoshis.len()).sum();
    super::running::eventually("a Said Event for every word", Duration::from_secs(30), async || said_events(cluster).await.len() >= words).await;
    assert_each_word_once(cluster, &songs).await;
}

pub async fn songs(cluster: &Cluster, names: &[String]) -> Vec<(String, Song)> {
    let mut all = vec![];
    for name in names {
        all.push((name.clone(), cluster.song("default", name).await));
    }
    all
}

/// A write a replica made for the Hikawas (children, statuses, their Events, rule sets): not
/// the Lease, not the Events on its own Pod.
pub fn song_write(r: &zundoko_apiserver::RequestRecord) -> bool {
    matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete") && r.resource != "leases" && !(r.resource == "events" && r.namespace == NS)
}
