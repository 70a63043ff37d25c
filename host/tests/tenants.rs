//! Tenants' rule sets (`ZundokoNamespacedRules`) end to end against the local API server: a
//! tenant's rule set sings the Hikawas of its own namespace only, reads its ConfigMap and pull
//! secret from its own namespace only, and no Hikawa elsewhere can name it, in any spelling;
//! the cluster-scoped `ZundokoRules` sing beside them as before. Nothing crosses between
//! tenants: a digest one pulled with its credentials is not served to another from the cache.

mod common;

use std::time::Duration;

use common::cluster::{Cluster, Operator, quick_settings};
use common::module_bytes;
use common::rules::{RULES_NS, create_rules, plain, wasm};
use common::tenants::*;
use zundoko_operator::crd::{ModuleSource, OciSource, RulesKind, SecretReference, ZundokoRulesSpec};
use zundoko_operator::supply::sources::digest;
use zundoko_rules::{classic, strict_japanese};

const A: &str = "team-a";
const B: &str = "team-b";
const C: &str = "team-c";

/// The rules namespace, two tenants' namespaces, and the operator (classic by default).
async fn start() -> (Cluster, Operator) {
    let cluster = Cluster::start().await;
    for ns in [RULES_NS, A, B] {
        cluster.create_namespace(ns).await;
    }
    // Every namespace may bring rules (the policy's own tests: tenant_policy.rs).
    put_policy(&cluster, "open", open_policy()).await;
    let operator = cluster.operator(wasm(&module_bytes("zundoko-classic")), quick_settings());
    (cluster, operator)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_rule_set_sings_its_own_hikawas_and_no_other_namespace_can_name_it() {
    let (cluster, _operator) = start().await;
    let japanese = module_bytes("zundoko-strict-ja");
    cluster.put_configmap(A, "rules-a", &japanese).await;
    create_tenant_rules(&cluster, A, "mine", from_configmap(A, "rules-a")).await;
    // The cluster's rule set and the seed's spelling (`spec.rules: NAME`) beside it.
    cluster.put_configmap(RULES_NS, "rules-classic", &module_bytes("zundoko-classic")).await;
    create_rules(&cluster, "classic", plain("rules-classic")).await;

    sing_in(&cluster, A, "a-1", None, Some((RulesKind::ZundokoNamespacedRules, "mine", None))).await;
    sing_in(&cluster, A, "a-2", None, Some((RulesKind::ZundokoNamespacedRules, "mine", Some(A)))).await;
    sing_in(&cluster, A, "a-cluster", Some("classic"), None).await;
    sing_in(&cluster, B, "b-cluster", None, Some((RulesKind::ZundokoRules, "classic", None))).await;
    // B names A's rule set: by its namespace, by its own (B has none so named), and by the
    // serving table's spelling written as a cluster name.
    sing_in(&cluster, B, "b-other", None, Some((RulesKind::ZundokoNamespacedRules, "mine", Some(A)))).await;
    sing_in(&cluster, B, "b-own", None, Some((RulesKind::ZundokoNamespacedRules, "mine", None))).await;
    sing_in(&cluster, B, "b-slash", Some("team-a/mine"), None).await;

    let a_songs = ["a-1".to_string(), "a-2".to_string()];
    cluster.assert_songs_complete(A, &a_songs, &strict_japanese(), Duration::from_secs(60)).await;
    cluster.assert_songs_complete(A, &["a-cluster".to_string()], &classic(), Duration::from_secs(60)).await;
    cluster.assert_songs_complete(B, &["b-cluster".to_string()], &classic(), Duration::from_secs(60)).await;
    for name in &a_songs {
        let status = cluster.hikawas(A).get(name).await.unwrap().status.unwrap();
        assert_eq!(status.module.map(|m| m.digest), Some(digest(&japanese)), "{name}");
    }

    let refused = wait_ready_reason(&cluster, B, "b-other", "RulesInOtherNamespace").await;
    assert!(refused.contains("own namespace (team-b)"), "{refused}");
    let missing = wait_ready_reason(&cluster, B, "b-own", "RulesNotFound").await;
    assert!(missing.contains("ZundokoNamespacedRules mine in namespace team-b"), "{missing}");
    wait_ready_reason(&cluster, B, "b-slash", "RulesNotFound").await;
    for name in ["b-other", "b-own", "b-slash"] {
        assert!(cluster.song(B, name).await.words.is_empty(), "{name} sang");
    }

    // The rule set's status counts its own Hikawas; its Events are in its own namespace.
    let status = wait_tenant_rules(&cluster, A, "mine", "2 Hikawas", |s| s.hikawas == 2).await;
    assert_eq!(status.phase.as_deref(), Some("Active"));
    assert_eq!(status.module.map(|m| m.digest), Some(digest(&japanese)));
    assert!(tenant_rules_events(&cluster, A, "mine").await.iter().any(|(reason, _)| reason == "ModuleServing"));
    assert!(cluster.events_regarding("default", "ZundokoNamespacedRules", "mine").await.is_empty());
    assert!(cluster.events_regarding(B, "ZundokoNamespacedRules", "mine").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_rule_set_reads_its_configmap_and_pull_secret_from_its_own_namespace_only() {
    let (cluster, _operator) = start().await;
    cluster.put_configmap(A, "rules-a", &module_bytes("zundoko-strict-ja")).await;
    // B's rule set names A's ConfigMap; and a pull secret in A.
    create_tenant_rules(&cluster, B, "borrowed", from_configmap(A, "rules-a")).await;
    let oci = OciSource {
        reference: "registry.invalid/team-a/rules:1.0".into(),
        pull_secret: Some(SecretReference { namespace: A.into(), name: "a-pull".into() }),
        ..OciSource::default()
    };
    let spec = ZundokoRulesSpec { source: ModuleSource { config_map: None, oci: Some(oci) }, sha256: None, candidate: None };
    create_tenant_rules(&cluster, B, "their-secret", spec).await;
    // A's ConfigMap in the rules namespace's name too: not the rules namespaces' to lend.
    cluster.put_configmap(RULES_NS, "rules-classic", &module_bytes("zundoko-classic")).await;
    create_tenant_rules(&cluster, B, "operators", from_configmap(RULES_NS, "rules-classic")).await;

    for name in ["borrowed", "their-secret", "operators"] {
        let status = wait_tenant_rules(&cluster, B, name, "refused", |s| s.reason.as_deref() == Some("SourceNotAllowed")).await;
        assert_eq!(status.phase.as_deref(), Some("Rejected"), "{name}");
        let message = status.message.unwrap_or_default();
        assert!(message.contains("its own namespace") && message.contains("not in team-b"), "{name}: {message}");
        assert!(status.module.is_none(), "{name}");
    }
    // B's refusals are told on B's objects only.
    assert!(cluster.events_regarding(A, "ZundokoNamespacedRules", "borrowed").await.is_empty());
}

/// A dockerconfigjson Secret `ns/name` with the test registry's credentials.
fn pull_secret(ns: &str, name: &str, registry: &str) -> k8s_openapi::api::core::v1::Secret {
    use common::registry::{PASSWORD, USER, base64};
    let json = serde_json::json!({"auths": {registry: {"auth": base64(&format!("{USER}:{PASSWORD}"))}}}).to_string();
    let mut secret = k8s_openapi::api::core::v1::Secret { type_: Some("kubernetes.io/dockerconfigjson".into()), ..Default::default() };
    (secret.metadata.name, secret.metadata.namespace) = (Some(name.into()), Some(ns.into()));
    secret.data = Some([(".dockerconfigjson".to_string(), k8s_openapi::ByteString(json.into_bytes()))].into());
    secret
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_one_tenant_pulled_with_its_credentials_is_not_served_to_another_from_the_cache() {
    use common::registry::TestRegistry;
    let Some(mut registry) = TestRegistry::start(true) else { return };
    let japanese = module_bytes("zundoko-strict-ja");
    let manifest = registry.push("team-a/rules:v1", &japanese, None).await;
    let cluster = Cluster::start().await;
    for ns in [RULES_NS, A, B] {
        cluster.create_namespace(ns).await;
    }
    put_policy(&cluster, "open", open_policy()).await;
    let settings = zundoko_operator::supply::oci::RegistrySettings { cache_dir: Some(registry.dir().join("operator-cache")), ..registry.settings() };
    let _operator = cluster.operator_with_registry(wasm(&module_bytes("zundoko-classic")), quick_settings(), settings);
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> = kube::Api::namespaced(cluster.client.clone(), A);
    secrets.create(&Default::default(), &pull_secret(A, "a-pull", &registry.addr)).await.unwrap();
    let oci = |reference: String, secret: Option<&str>| {
        let pull_secret = secret.map(|name| SecretReference { namespace: A.into(), name: name.into() });
        ZundokoRulesSpec { source: ModuleSource { config_map: None, oci: Some(OciSource { reference, pull_secret, ..OciSource::default() }) }, sha256: None, candidate: None }
    };
    // A pulls with its credentials: the artifact is in the operator's cache now.
    create_tenant_rules(&cluster, A, "mine", oci(format!("{}/team-a/rules:v1", registry.addr), Some("a-pull"))).await;
    let status = wait_tenant_rules(&cluster, A, "mine", "Active", |s| s.phase.as_deref() == Some("Active")).await;
    assert_eq!(status.module.as_ref().map(|m| m.digest.clone()), Some(digest(&japanese)));
    // B names the very digest, without credentials: the registry refuses B, so B gets nothing,
    // whatever the cache holds.
    let by_digest = format!("{}/team-a/rules@{manifest}", registry.addr);
    create_tenant_rules(&cluster, B, "copied", oci(by_digest, None)).await;
    sing_in(&cluster, B, "b", None, Some((RulesKind::ZundokoNamespacedRules, "copied", None))).await;
    let status = wait_tenant_rules(&cluster, B, "copied", "refused by the registry", |s| s.reason.as_deref() == Some("RegistryUnauthorized")).await;
    assert!(status.module.is_none(), "{status:?}");
    wait_ready_reason(&cluster, B, "b", "RulesNotActive").await;
    assert!(cluster.song(B, "b").await.words.is_empty());

    // The registry down: B naming A's tag gets nothing and is told nothing of what it names
    // (the cache's record of the tag may be tried, but only the registry's answer for B's
    // credentials serves), and A's rule set keeps serving what it pulled.
    registry.stop();
    create_tenant_rules(&cluster, B, "by-tag", oci(format!("{}/team-a/rules:v1", registry.addr), None)).await;
    let status = wait_tenant_rules(&cluster, B, "by-tag", "tried", |s| s.reason.is_some()).await;
    let said = serde_json::to_string(&status).unwrap();
    assert!(!said.contains(&manifest) && !said.contains(&digest(&japanese)), "B was told what A's tag names: {said}");
    assert_eq!(tenant_rules_status(&cluster, A, "mine").await.phase.as_deref(), Some("Active"));
    // Nothing about B's refusals reached A's rule set.
    let a_said = serde_json::to_string(&tenant_rules_status(&cluster, A, "mine").await).unwrap() + &format!("{:?}", tenant_rules_events(&cluster, A, "mine").await);
    assert!(!a_said.contains("copied") && !a_said.contains("by-tag") && !a_said.contains("team-b"), "{a_said}");
}

/// The value of the sample `name` (with its labels) in the metrics' `text`; 0 if there is none.
fn sample(text: &str, name: &str) -> f64 {
    text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok()).unwrap_or(0.0)
}

/// What a file takes in the cache as the cache counts it (its blocks, or its length if more).
fn on_disk(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).unwrap();
    meta.len().max(meta.blocks() * 512)
}

/// What the compiled file of `bytes` in the cache `dir` takes, with its owner record.
fn compiled_bytes(dir: &std::path::Path, bytes: &[u8]) -> u64 {
    let hex = digest(bytes).trim_start_matches("sha256:").to_string();
    let found = std::fs::read_dir(dir.join("compiled")).unwrap().map(|e| e.unwrap().path()).find(|p| p.file_name().unwrap().to_string_lossy().starts_with(&hex));
    let file = found.unwrap_or_else(|| panic!("no compiled file for {hex} in {}", dir.display()));
    let record = dir.join("owners").join(format!("compiled-{}", file.file_name().unwrap().to_string_lossy()));
    on_disk(&file) + on_disk(&record)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_rule_set_shows_its_own_use_of_the_operator_and_nothing_of_another_tenants() {
    let cluster = Cluster::start().await;
    for ns in [A, B] {
        cluster.create_namespace(ns).await;
    }
    put_policy(&cluster, "open", open_policy()).await;
    let dir = zundoko_operator::supply::disk_cache::private_temp_dir("zundoko-usage-").unwrap();
    let operator = cluster.operator_with_cache(wasm(&module_bytes("zundoko-classic")), quick_settings(), &dir);
    // A's module imports WASI (classic rules): its calls take turns. B's does not: none.
    let (hoard, japanese) = (common::fixture_bytes("zundoko-wasi-hoard"), module_bytes("zundoko-strict-ja"));
    cluster.put_configmap(A, "rules-a", &hoard).await;
    cluster.put_configmap(B, "rules-b", &japanese).await;
    create_tenant_rules(&cluster, A, "mine", from_configmap(A, "rules-a")).await;
    create_tenant_rules(&cluster, B, "theirs", from_configmap(B, "rules-b")).await;
    sing_in(&cluster, A, "a", None, Some((RulesKind::ZundokoNamespacedRules, "mine", None))).await;
    sing_in(&cluster, B, "b", None, Some((RulesKind::ZundokoNamespacedRules, "theirs", None))).await;
    cluster.assert_songs_complete(A, &["a".to_string()], &classic(), Duration::from_secs(60)).await;
    cluster.assert_songs_complete(B, &["b".to_string()], &strict_japanese(), Duration::from_secs(60)).await;

    let a = wait_usage(&cluster, A, "mine", "calls and cached bytes", |u| u.call_turns > 0 && u.calls > 0 && u.cache_bytes > 0).await;
    assert_eq!((a.tenant.as_str(), a.replica.as_str()), (A, "in-process"), "whose figures, and whose count");
    assert!(a.taken_at.parse::<jiff::Timestamp>().is_ok(), "{a:?}");
    // Each tenant's cached bytes are its own compiled module's, nothing of the other's.
    assert_eq!(a.cache_bytes, compiled_bytes(&dir, &hoard), "{a:?}");
    // Each of A's calls took a turn (and so did its module's checks at load, which are no call).
    assert!(a.call_turns >= a.calls, "A's calls without a turn: {a:?}");
    let b = wait_usage(&cluster, B, "theirs", "calls and cached bytes", |u| u.cache_bytes > 0 && u.calls > 0).await;
    assert_eq!(b.tenant, B);
    assert_eq!(b.cache_bytes, compiled_bytes(&dir, &japanese), "{b:?}");
    assert_eq!(b.call_turns, 0, "B's module takes no turn: A's turns are not B's: {b:?}");
    // B's Rust module's calls are counted all the same. A's and B's calls are the operator's
    // only guest calls timed (no Hikawa names the default module), as its metrics time them:
    // read later, no fewer.
    let metrics = operator.shared.metrics.encode();
    let (count, seconds) = (sample(&metrics, "zundoko_guest_call_duration_seconds_count"), sample(&metrics, "zundoko_guest_call_duration_seconds_sum"));
    assert!((a.calls + b.calls) as f64 <= count, "A's and B's calls {} {}, the metrics' {count}", a.calls, b.calls);
    assert!((a.call_millis + b.call_millis) as f64 <= seconds * 1000.0 + 1.0, "A's and B's call time {} ms {} ms, the metrics' {seconds} s", a.call_millis, b.call_millis);
    // A tenant that brings a rule set after A's and B's calls and decides for no Hikawa: its
    // first figures, taken after theirs, show no call, neither theirs nor their time.
    cluster.create_namespace(C).await;
    cluster.put_configmap(C, "rules-c", &japanese).await;
    create_tenant_rules(&cluster, C, "idle", from_configmap(C, "rules-c")).await;
    let c = wait_usage(&cluster, C, "idle", "its first figures", |_| true).await;
    assert_eq!((c.tenant.as_str(), c.calls, c.call_millis, c.call_turns), (C, 0, 0, 0), "C decided nothing: {c:?}");
    let b_said = serde_json::to_string(&tenant_rules_status(&cluster, B, "theirs").await).unwrap();
    assert!(!b_said.contains(A), "B's status names A: {b_said}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The whole operator (`operator::start`, as `run` wires it): its `/metrics` count each
/// tenant's decisions by namespace, a tenant's Rust rules too (they take no WASI turn), and the
/// default module's under `_cluster`. The in-process controllers of the tests above are not
/// wired to the tenant metrics; this is where their wiring is checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_metrics_count_each_tenants_calls_under_its_namespace() {
    let cluster = Cluster::start().await;
    cluster.create_namespace(A).await;
    put_policy(&cluster, "open", open_policy()).await;
    let dir = common::kubelet::temp_dir("tenant-metrics");
    std::fs::write(dir.join("rules.wasm"), module_bytes("zundoko-classic")).unwrap();
    let sources = zundoko_operator::operator::ModuleSources { file: Some(common::running::file(dir.join("rules.wasm"))), ..Default::default() };
    let operator = common::running::start(&cluster, sources).await.unwrap();
    cluster.put_configmap(A, "rules-a", &module_bytes("zundoko-strict-ja")).await;
    create_tenant_rules(&cluster, A, "mine", from_configmap(A, "rules-a")).await;
    // Three of team-a's songs (18 words at the least) to the cluster's one: what one side's
    // count would hold of the other's is more than a song's few decisions after its last word.
    let a_songs: Vec<String> = (1..=3).map(|i| format!("a-{i}")).collect();
    for name in &a_songs {
        sing_in(&cluster, A, name, None, Some((RulesKind::ZundokoNamespacedRules, "mine", None))).await;
    }
    sing_in(&cluster, "default", "d-1", None, None).await;
    cluster.assert_songs_complete(A, &a_songs, &strict_japanese(), Duration::from_secs(60)).await;
    cluster.assert_songs_complete("default", &["d-1".to_string()], &classic(), Duration::from_secs(60)).await;
    let words = |song: common::cluster::Song| (song.words.len() + song.kiyoshis.len()) as f64;
    let mut words_a = 0.0;
    for name in &a_songs {
        words_a += words(cluster.song(A, name).await);
    }
    let words_d = words(cluster.song("default", "d-1").await);
    let metrics = operator.metrics();
    let figure = |name: &str, namespace: &str| -> f64 {
        let prefix = format!("{name}{{namespace=\"{namespace}\"}} ");
        metrics.lines().find_map(|l| l.strip_prefix(&prefix)?.trim().parse().ok()).unwrap_or(0.0)
    };
    let (calls_a, calls_cluster) = (figure("zundoko_tenant_calls_total", A), figure("zundoko_tenant_calls_total", "_cluster"));
    println!("team-a: {words_a} words, {calls_a} calls; the cluster's default module: {words_d} words, {calls_cluster} calls");
    // A word is a decision; a song's last decisions say nothing (the plan is done).
    assert!(calls_a >= words_a, "team-a's {words_a} words counted as {calls_a} calls:\n{metrics}");
    assert!(figure("zundoko_tenant_call_seconds_total", A) > 0.0, "team-a's guest time:\n{metrics}");
    assert!(calls_cluster >= words_d, "the default module's {words_d} words counted as {calls_cluster} calls:\n{metrics}");
    // team-a's calls are its own, not the cluster's too.
    assert!(calls_cluster < words_d + words_a, "the cluster's {calls_cluster} calls hold team-a's {words_a} words:\n{metrics}");
    assert_eq!(figure("zundoko_tenant_call_turns_total", A), 0.0, "a Rust module takes no WASI turn:\n{metrics}");
    operator.stop().await;
}
