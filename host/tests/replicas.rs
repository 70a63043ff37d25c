//! The operator as the cluster runs it: `zundoko-operator run` processes configured with the
//! rendered Deployment's environment, against the local API server. Two replicas with leader
//! election (one sings; kill it and the other finishes every song), the HTTP endpoints, and
//! every request the operator made checked against the rendered RBAC.

mod common;

use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::kubelet::temp_dir;
use common::module_bytes;
use common::replica::{LEADER_LEASE, ONE_SHARD, NS, Replica, Setup, put_module, said_events, setup};
use common::running::{config, eventually, file, start_with};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::PostParams;
use kube::Api;
use zundoko_operator::crd::{Hikawa, HikawaSpec, ModuleSource, ZundokoRules, ZundokoRulesSpec};
use zundoko_rules::{classic, strict_japanese};

/// Every request a `zundoko-operator` process made must be allowed by the rendered RBAC, and
/// the song's own requests (and `also`) are among them.
fn assert_requests_allowed(setup: &Setup, also: &[&str]) {
    let requests: Vec<_> = setup.cluster.server.requests().into_iter().filter(|r| r.user_agent.starts_with("zundoko-operator/")).collect();
    let mut denied: Vec<String> = requests
        .iter()
        .filter(|r| !setup.rbac.allows(&r.verb, &r.api_group, &r.resource, &r.subresource, &r.namespace, &r.name))
        .map(|r| format!("{} {}/{}/{} ns={} name={} ({} {})", r.verb, r.api_group, r.resource, r.subresource, r.namespace, r.name, r.method, r.path))
        .collect();
    denied.sort();
    denied.dedup();
    let used: std::collections::BTreeSet<String> =
        requests.iter().map(|r| format!("{} {}/{}{}{}", r.verb, r.api_group, r.resource, if r.subresource.is_empty() { "" } else { "/" }, r.subresource)).collect();
    println!("requests the operator made: {used:?}");
    // The check covers the song's own requests, found by the operator's User-Agent (a count of
    // requests would depend on how long the song was).
    let g = "zundokokiyoshi.kaitoy.github.com";
    for expected in [
        format!("watch {g}/hikawas"),
        format!("create {g}/zundokos"),
        format!("create {g}/kiyoshis"),
        format!("patch {g}/hikawas/status"),
        "create events.k8s.io/events".to_string(),
        "watch /configmaps".to_string(),
        "update coordination.k8s.io/leases".to_string(),
        format!("watch {g}/zundokorules"),
    ]
    .into_iter()
    .chain(also.iter().map(|a| a.to_string()))
    {
        assert!(used.contains(&expected), "{expected:?} is in the operator's requests: {used:?}");
    }
    assert!(denied.is_empty(), "requests the Role would deny:\n{}\nrules:\n{}", denied.join("\n"), setup.rbac.describe());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_one_sings_and_the_other_finishes_every_song_when_the_leader_dies() {
    let setup = setup("replicas", true).await;
    let cluster = &setup.cluster;
    let missing = setup.dir.join("no-module-file-here.wasm");
    // A rule set too, its module in a ConfigMap of the operator's namespace.
    cluster.put_configmap(NS, "rules-japanese", &module_bytes("zundoko-strict-ja")).await;
    let spec = ZundokoRulesSpec {
        source: ModuleSource::config_map(NS, "rules-japanese"),
        sha256: None,
        candidate: None,
    };
    Api::<ZundokoRules>::all(cluster.client.clone()).create(&PostParams::default(), &ZundokoRules::new("japanese", spec)).await.unwrap();
    let a = Replica::spawn_with("operator-a", &setup.kubeconfig, &setup.env, ONE_SHARD, &missing, &setup.dir);
    let b = Replica::spawn_with("operator-b", &setup.kubeconfig, &setup.env, ONE_SHARD, &missing, &setup.dir);

    let names: Vec<String> = (0..6).map(|i| format!("ha-{i}")).collect();
    for name in &names {
        cluster.create_hikawa("default", name, 150, &[]).await;
    }
    let mut japanese = Hikawa::new("ha-ja", HikawaSpec { interval_millis: 150, rules: Some("japanese".into()), ..HikawaSpec::default() });
    japanese.metadata.namespace = Some("default".into());
    cluster.hikawas("default").create(&PostParams::default(), &japanese).await.unwrap();
    cluster.wait_words("default", &names, 3, Duration::from_secs(60)).await;

    // Exactly one sings: the Lease holder; the other is a ready standby.
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), NS);
    let holder = leases.get(LEADER_LEASE).await.unwrap().spec.unwrap().holder_identity.unwrap();
    let (leader, standby) = if holder == a.name { (a, b) } else { (b, a) };
    assert_eq!(holder, leader.name, "{}\n{}", leader.log(), standby.log());
    let singers: std::collections::BTreeSet<String> =
        said_events(cluster).await.iter().filter_map(|e| e.reporting_instance.clone()).collect();
    assert_eq!(singers, [leader.name.clone()].into(), "only the leader sings");
    assert_eq!(leader.metric("zundoko_leader "), Some(1.0));
    assert_eq!(standby.metric("zundoko_leader "), Some(0.0));
    assert_eq!(standby.metric("zundoko_reconciles_total "), Some(0.0), "the standby reconciles nothing");
    let (code, body) = standby.get("/readyz").unwrap();
    assert_eq!((code, body.contains("standby")), (200, true), "{body}");
    let (code, body) = leader.get("/readyz").unwrap();
    assert_eq!((code, body.contains("reconciling")), (200, true), "{body}");

    // The leader dies without a word (SIGKILL: the lease is not released).
    let mut leader = leader;
    leader.child.kill().unwrap();
    leader.child.wait().unwrap();
    let killed = Instant::now();
    let said_before = said_events(cluster).await.len();
    eventually("the standby singing", Duration::from_secs(30), async || {
        said_events(cluster).await.iter().any(|e| e.reporting_instance.as_deref() == Some(standby.name.as_str()))
    })
    .await;
    let takeover = killed.elapsed();
    println!("takeover {takeover:?} after the leader's SIGKILL (lease 4 s)");
    assert!(takeover < Duration::from_secs(15), "the standby took over only after {takeover:?}");
    assert!(said_events(cluster).await.len() > said_before);

    cluster.assert_songs_complete("default", &names, &classic(), Duration::from_secs(120)).await;
    cluster.assert_songs_complete("default", &["ha-ja".to_string()], &strict_japanese(), Duration::from_secs(120)).await;
    // No word twice: one child per index (assert_songs_complete) and one Event per child.
    let mut words: Vec<String> = said_events(cluster).await.iter().filter_map(|e| e.related.as_ref()?.name.clone()).collect();
    let total = words.len();
    words.sort();
    words.dedup();
    assert_eq!(words.len(), total, "a word was said twice");
    assert_eq!(standby.metric("zundoko_leader "), Some(1.0));
    assert_eq!(standby.metric("zundoko_reconcile_errors_total"), None, "no failed reconcile:\n{}", standby.log());
    let g = "zundokokiyoshi.kaitoy.github.com";
    assert_requests_allowed(&setup, &[&format!("patch {g}/zundokorules/status"), "get /configmaps", "list /configmaps"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_answer_and_readiness_waits_for_a_module_and_the_caches() {
    let setup = setup("endpoints", false).await;
    let cluster = &setup.cluster;
    let mut env = setup.env.clone();
    env.push(("ZUNDOKO_WAIT_FOR_MODULE".into(), "true".into()));
    let missing = setup.dir.join("no-module-file-here.wasm");
    let mut op = Replica::spawn_with("operator-solo", &setup.kubeconfig, &env, ONE_SHARD, &missing, &setup.dir);

    eventually("the HTTP endpoints", Duration::from_secs(30), async || op.get("/healthz").is_some()).await;
    assert_eq!(op.get("/healthz").unwrap().0, 200);
    // Unready first because the API server has not answered yet (on a loaded machine the
    // endpoints may answer before it does), then because there is no module.
    eventually("readiness past the API server's first answer", Duration::from_secs(30), async || {
        op.get("/readyz").is_some_and(|(_, body)| !body.contains("does not answer yet"))
    })
    .await;
    let (code, body) = op.get("/readyz").unwrap();
    assert_eq!(code, 503, "not ready without a module: {body}");
    assert!(body.contains("no rules module"), "{body}");
    let (code, text) = op.get("/metrics").unwrap();
    assert_eq!(code, 200);
    assert!(text.contains("# TYPE zundoko_reconciles counter") && text.ends_with("# EOF\n"), "{text}");

    put_module(cluster, "zundoko-classic").await;
    eventually("ready once the module arrives", Duration::from_secs(30), async || op.get("/readyz").is_some_and(|(c, _)| c == 200)).await;
    cluster.create_hikawa("default", "measured", 0, &[]).await;
    cluster.assert_songs_complete("default", &["measured".to_string()], &classic(), Duration::from_secs(60)).await;

    let (_, text) = op.get("/metrics").unwrap();
    let digest = zundoko_operator::supply::sources::digest(&module_bytes("zundoko-classic"));
    let value = |prefix: &str| text.lines().find_map(|l| l.strip_prefix(prefix)?.trim().parse::<f64>().ok()).unwrap_or(0.0);
    assert!(text.contains(&format!("zundoko_module_info{{name=\"zundoko-classic\",version=\"0.1.0\",digest=\"{digest}\"}} 1")), "{text}");
    assert_eq!(value("zundoko_module_swaps_total{result=\"accepted\",reason=\"\"}"), 1.0, "{text}");
    let words = cluster.song("default", "measured").await.words.len() as f64;
    assert_eq!(value("zundoko_plan_actions_total{kind=\"say-zundoko\"}"), words, "{text}");
    assert_eq!(value("zundoko_plan_actions_total{kind=\"say-kiyoshi\"}"), 1.0, "{text}");
    assert_eq!(value("zundoko_words_total{kind=\"zundoko\"}"), words, "{text}");
    assert_eq!(value("zundoko_words_total{kind=\"kiyoshi\"}"), 1.0, "{text}");
    // One decision per word, one for the Kiyoshi and one after it (the Kiyoshi changed what the
    // rules observe: called once more, as `simulate` does): none made twice from a lagging cache.
    assert_eq!(value("zundoko_guest_call_duration_seconds_count"), words + 2.0, "{text}");
    assert!(value("zundoko_guest_fuel_used_sum") > 0.0, "{text}");
    assert!(value("zundoko_reconciles_total") >= words + 1.0, "{text}");

    // SIGTERM: finish, release the lease, exit 0.
    op.terminate();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = op.child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "no exit after SIGTERM:\n{}", op.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "exit status {status}:\n{}", op.log());
    assert!(op.log().contains("released the Lease"), "{}", op.log());
    // Written to a file, not a terminal: no colour codes.
    assert!(op.log().contains(" INFO ") && !op.log().contains('\x1b'), "{}", op.log());
    let lease = Api::<Lease>::namespaced(cluster.client.clone(), NS).get(LEADER_LEASE).await.unwrap();
    let holder = lease.spec.and_then(|s| s.holder_identity);
    assert!(holder.is_none() || holder.as_deref() == Some(""), "released: {holder:?}");
    assert_requests_allowed(&setup, &[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_loses_its_lease_stops_reconciling_until_it_holds_it_again() {
    let cluster = Cluster::start().await;
    let dir = temp_dir("lease-loss");
    let path = dir.join("rules.wasm");
    std::fs::write(&path, module_bytes("zundoko-classic")).unwrap();
    let mut config = config(zundoko_operator::operator::ModuleSources { file: Some(file(path)), ..Default::default() });
    config.leader = Some(zundoko_operator::process::leader::ShardSettings {
        namespace: "default".into(),
        lease_prefix: "zundoko-operator".into(),
        count: 1,
        identity: "in-process".into(),
        durations: zundoko_operator::process::leader::Durations {
            lease: Duration::from_secs(2),
            renew_deadline: Duration::from_millis(1500),
            retry: Duration::from_millis(250),
        },
    });
    config.api_timeout = Duration::from_secs(1);
    let operator = start_with(&cluster, config).await.unwrap();
    // A song that will not end during the test.
    cluster.create_hikawa("default", "long", 50, &[("zuns", "16")]).await;
    let words = async || cluster.song("default", "long").await.words.len();
    eventually("singing", Duration::from_secs(30), async || words().await >= 3).await;

    // Another holder takes the Lease (as an administrator or a partitioned peer might).
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), "default");
    let steal = serde_json::json!({"spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 3600,
        "renewTime": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}});
    leases.patch(LEADER_LEASE, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&steal)).await.unwrap();
    eventually("the replica standing down", Duration::from_secs(10), async || {
        operator.metrics().contains("zundoko_leader 0")
    })
    .await;
    // In-flight work may finish; after that nothing more is said. The control: the replica
    // read the Lease (and found it held) three times meanwhile, three retry periods in which
    // the 50 ms song would have said words.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let frozen = words().await;
    let seen = cluster.server.requests().len();
    let lease_reads = || cluster.server.requests().iter().skip(seen).filter(|r| r.resource == "leases" && r.name == LEADER_LEASE && r.verb == "get").count();
    eventually("the replica reading the Lease three times", Duration::from_secs(10), async || lease_reads() >= 3).await;
    assert_eq!(words().await, frozen, "no word while another holds the lease");

    // The intruder stops renewing (its lease runs out): the replica takes the lease again and
    // the song goes on.
    let expire = serde_json::json!({"spec": {"leaseDurationSeconds": 1}});
    leases.patch(LEADER_LEASE, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&expire)).await.unwrap();
    eventually("singing again", Duration::from_secs(30), async || words().await > frozen).await;
    assert!(operator.metrics().contains("zundoko_leader 1"));
    operator.stop().await;
}
