//! `explain` on a tenant's Hikawa against the local API server: the words a tenant's rule set
//! (`ZundokoNamespacedRules`) said replay through the checks `run` makes of that rule set (the
//! operator's own `Tenancy::judge` and `Sources::check`, host/src/cli/explain/tenant.rs), and
//! what `run` would refuse is named, not replayed: a policy's required key the module is not
//! signed with, a ConfigMap in another namespace, a policy field, a registry that no longer
//! answers the tenant's own credentials (whatever explain's cache holds). And a Hikawa naming its
//! rules by `rulesRef` is explained from the rule set it names, of either kind.

mod common;

use std::time::Duration;

use common::cluster::{Cluster, quick_settings};
use common::explain::run;
use common::module_bytes;
use common::rules::{RULES_NS, create_rules, plain, wasm};
use common::tenants::*;
use kube::Api;
use kube::api::{Patch, PatchParams};
use zundoko_operator::cli::explain::replay::Verdict;
use zundoko_operator::cli::explain::Report;
use zundoko_operator::crd::{RulesKind, TenantSources, ZundokoTenantPolicySpec};
use zundoko_operator::supply::fetch::SIGNATURE_ANNOTATION_PREFIX;
use zundoko_operator::supply::oci::SignKey;
use zundoko_operator::supply::sources::digest;
use zundoko_rules::{classic, strict_japanese};

const A: &str = "team-a";
const B: &str = "team-b";

/// Team A and team B, both selected by the policy `teams` (open); A's rule set `mine` serves
/// the strict Japanese rules from A's ConfigMap `rules-a`.
async fn tenants() -> Cluster {
    let cluster = Cluster::start().await;
    for ns in [RULES_NS, A, B] {
        cluster.create_namespace(ns).await;
        label_namespace(&cluster, ns, "team").await;
    }
    put_policy(&cluster, "teams", ZundokoTenantPolicySpec { namespace_selector: selecting("team"), ..open_policy() }).await;
    cluster.put_configmap(A, "rules-a", &module_bytes("zundoko-strict-ja")).await;
    create_tenant_rules(&cluster, A, "mine", from_configmap(A, "rules-a")).await;
    cluster
}

/// Every word of the report replayed and matching, said by `module`.
fn assert_replayed(report: &Report, module: &[u8], who: &str) {
    assert!(report.first_difference.is_none(), "{who}: {:?}", report.first_difference);
    assert!(report.words.len() >= 2, "{who}: {:?}", report.words);
    for word in &report.words {
        assert_eq!(word.verdict, Verdict::Matches, "{who}: {word:?}");
        assert_eq!(word.decision.as_ref().unwrap().module, digest(module), "{who}: {word:?}");
    }
}

/// The first word is not replayed: the module is unavailable, for a reason holding `said`.
fn assert_refused(report: &Report, said: &[&str], who: &str) {
    let first = report.first_difference.as_ref().unwrap_or_else(|| panic!("{who}: replayed, though run would refuse the module"));
    assert_eq!((first.position, &first.verdict), (1, &Verdict::ModuleUnavailable), "{who}: {}", first.reason);
    for said in said {
        assert!(first.reason.contains(said), "{who}: no {said:?} in: {}", first.reason);
    }
    assert!(report.words.iter().all(|w| w.plan.is_none()), "{who}: a word was replayed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_song_replays_through_runs_checks_and_what_run_refuses_is_named() {
    let cluster = tenants().await;
    let japanese = module_bytes("zundoko-strict-ja");
    let operator = cluster.operator(wasm(&module_bytes("zundoko-classic")), quick_settings());
    sing_in(&cluster, A, "song", None, Some((RulesKind::ZundokoNamespacedRules, "mine", None))).await;
    cluster.assert_songs_complete(A, &["song".to_string()], &strict_japanese(), Duration::from_secs(120)).await;
    operator.stop().await;
    let argv = ["team-a/song", "--song"];
    assert_replayed(&run(&cluster, &argv).await, &japanese, "as sung");

    // The policy now requires a key the module is not signed with: run would refuse it.
    let key = SignKey::generate();
    let keyed = ZundokoTenantPolicySpec { namespace_selector: selecting("team"), required_keys: vec![key.public_pem()], ..open_policy() };
    put_policy(&cluster, "teams", keyed).await;
    assert_refused(&run(&cluster, &argv).await, &["SignatureRequired", "requiredKeys", "ConfigMap team-a/rules-a"], "a required key");
    // Signed by that key beside it (as run reads a ConfigMap's signature): it replays again.
    let signature = zundoko_operator::supply::oci::signature::sign_digest(&key, &digest(&japanese)).unwrap();
    let patch = serde_json::json!({"metadata": {"annotations": {format!("{SIGNATURE_ANNOTATION_PREFIX}rules.wasm"): signature}}});
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(cluster.client.clone(), A);
    configmaps.patch("rules-a", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    assert_replayed(&run(&cluster, &argv).await, &japanese, "signed by the required key");

    // A policy field run judges the spec by: ConfigMaps no longer allowed.
    let no_configmaps = ZundokoTenantPolicySpec { namespace_selector: selecting("team"), sources: TenantSources { config_maps: false, registries: vec!["*".into()] }, ..open_policy() };
    put_policy(&cluster, "teams", no_configmaps).await;
    assert_refused(&run(&cluster, &argv).await, &["ZundokoTenantPolicy teams spec.sources.configMaps: ", "PolicyRefused"], "a policy field");
    put_policy(&cluster, "teams", ZundokoTenantPolicySpec { namespace_selector: selecting("team"), ..open_policy() }).await;

    // The rule set now names the same module in another namespace's ConfigMap: run reads a
    // tenant's ConfigMap from its own namespace only, and so does explain.
    cluster.put_configmap(B, "rules-a", &japanese).await;
    let rules = tenant_rules_api(&cluster, A);
    let patch = serde_json::json!({"spec": {"source": {"configMap": {"namespace": B, "name": "rules-a"}}}});
    rules.patch("mine", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    assert_refused(&run(&cluster, &argv).await, &["SourceNotAllowed", "ConfigMap team-b/rules-a is not in team-a"], "another namespace's ConfigMap");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hikawa_naming_its_rules_by_rules_ref_is_explained_from_the_rule_set_it_names() {
    let cluster = tenants().await;
    let (japanese, classic_bytes) = (module_bytes("zundoko-strict-ja"), module_bytes("zundoko-classic"));
    cluster.put_configmap(RULES_NS, "rules-classic", &classic_bytes).await;
    create_rules(&cluster, "classic", plain("rules-classic")).await;
    // A Hikawa naming no rule set would be decided by the default module: explain would find
    // no source of it in the cluster (an in-process operator records none).
    let operator = cluster.operator(wasm(&classic_bytes), quick_settings());
    sing_in(&cluster, A, "tenant-ref", None, Some((RulesKind::ZundokoNamespacedRules, "mine", None))).await;
    sing_in(&cluster, A, "own-namespace-ref", None, Some((RulesKind::ZundokoNamespacedRules, "mine", Some(A)))).await;
    sing_in(&cluster, A, "cluster-ref", None, Some((RulesKind::ZundokoRules, "classic", None))).await;
    sing_in(&cluster, B, "other-namespace-ref", None, Some((RulesKind::ZundokoNamespacedRules, "mine", Some(A)))).await;
    let tenant_songs = ["tenant-ref".to_string(), "own-namespace-ref".to_string()];
    cluster.assert_songs_complete(A, &tenant_songs, &strict_japanese(), Duration::from_secs(120)).await;
    cluster.assert_songs_complete(A, &["cluster-ref".to_string()], &classic(), Duration::from_secs(120)).await;
    wait_ready_reason(&cluster, B, "other-namespace-ref", "RulesInOtherNamespace").await;
    operator.stop().await;

    for name in &tenant_songs {
        let report = run(&cluster, &[&format!("{A}/{name}"), "--song"]).await;
        assert_replayed(&report, &japanese, name);
        let ruleset = report.state.ruleset.as_ref().unwrap_or_else(|| panic!("{name}: no rule set read"));
        assert_eq!((ruleset.name.as_str(), ruleset.phase.as_deref()), ("mine", Some("Active")), "{name}");
    }
    let report = run(&cluster, &["team-a/cluster-ref", "--song"]).await;
    assert_replayed(&report, &classic_bytes, "cluster-ref");
    assert_eq!(report.state.ruleset.as_ref().map(|r| r.name.as_str()), Some("classic"));

    // Naming A's rule set from B: explained as waiting on a name the operator refuses.
    let report = run(&cluster, &["team-b/other-namespace-ref"]).await;
    assert_eq!(report.state.state, "waiting", "{:?}", report.state);
    assert!(report.state.summary.contains("own namespace (team-b)"), "{}", report.state.summary);
    assert!(report.words.is_empty());

    // The policies unreadable (a tenant's own edit role reads none; here their kind is gone):
    // explain says what it could not read and replays nothing; with the team's own copy of the
    // module (its digest the recorded one) it replays.
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    crds.delete("zundokotenantpolicies.zundokokiyoshi.kaitoy.github.com", &Default::default()).await.unwrap();
    // Its objects go first, then the kind: explain's list is refused only once it is gone.
    let policies: Api<zundoko_operator::crd::ZundokoTenantPolicy> = Api::all(cluster.client.clone());
    common::running::eventually("the policies' kind gone", Duration::from_secs(20), async || policies.list(&Default::default()).await.is_err()).await;
    let report = run(&cluster, &["team-a/tenant-ref", "--song"]).await;
    assert_refused(&report, &["cannot read the ZundokoTenantPolicies", "give --module FILE"], "the policies unreadable");
    let copy = common::module_path("zundoko-strict-ja");
    assert_replayed(&run(&cluster, &["team-a/tenant-ref", "--song", "--module", copy.to_str().unwrap()]).await, &japanese, "a local copy");
}

/// A dockerconfigjson Secret `ns/name` for `registry`, with the test registry's user and `password`.
fn pull_secret(ns: &str, name: &str, registry: &str, password: &str) -> k8s_openapi::api::core::v1::Secret {
    use common::registry::{USER, base64};
    let json = serde_json::json!({"auths": {registry: {"auth": base64(&format!("{USER}:{password}"))}}}).to_string();
    let mut secret = k8s_openapi::api::core::v1::Secret { type_: Some("kubernetes.io/dockerconfigjson".into()), ..Default::default() };
    (secret.metadata.name, secret.metadata.namespace) = (Some(name.into()), Some(ns.into()));
    secret.data = Some([(".dockerconfigjson".to_string(), k8s_openapi::ByteString(json.into_bytes()))].into());
    secret
}

/// A tenant's artifact is pulled for `explain` with the tenant's own pull secret (read from its
/// own namespace), and never served from explain's cache unless the registry answers those
/// credentials now: with the secret's password wrong, the layer explain pulled a moment before
/// (and keeps by digest) does not replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_artifact_replays_only_while_its_registry_answers_the_tenants_own_credentials() {
    use common::registry::{PASSWORD, TestRegistry};
    use zundoko_operator::crd::{ModuleSource, OciSource, SecretReference, ZundokoRulesSpec};
    let Some(registry) = TestRegistry::start(true) else { return };
    let japanese = module_bytes("zundoko-strict-ja");
    registry.push("team-a/rules:v1", &japanese, None).await;
    let cluster = tenants().await;
    let settings = zundoko_operator::supply::oci::RegistrySettings { cache_dir: Some(registry.dir().join("operator-cache")), ..registry.settings() };
    let operator = cluster.operator_with_registry(wasm(&module_bytes("zundoko-classic")), quick_settings(), settings);
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(cluster.client.clone(), A);
    secrets.create(&Default::default(), &pull_secret(A, "a-pull", &registry.addr, PASSWORD)).await.unwrap();
    let pull_secret_ref = Some(SecretReference { namespace: A.into(), name: "a-pull".into() });
    let oci = OciSource { reference: format!("{}/team-a/rules:v1", registry.addr), pull_secret: pull_secret_ref, ..OciSource::default() };
    create_tenant_rules(&cluster, A, "pulled", ZundokoRulesSpec { source: ModuleSource { config_map: None, oci: Some(oci) }, sha256: None, candidate: None }).await;
    sing_in(&cluster, A, "pulled-song", None, Some((RulesKind::ZundokoNamespacedRules, "pulled", None))).await;
    cluster.assert_songs_complete(A, &["pulled-song".to_string()], &strict_japanese(), Duration::from_secs(120)).await;
    operator.stop().await;

    // explain's own cache, as a user's machine has one.
    let cache = registry.dir().join("explain-cache");
    let argv = ["team-a/pulled-song", "--song", "--insecure-registry", registry.addr.as_str(), "--cache-dir", cache.to_str().unwrap()];
    assert_replayed(&run(&cluster, &argv).await, &japanese, "with the tenant's pull secret");
    // The tenant's credentials no longer answer: the cached layer is not handed over.
    secrets.replace("a-pull", &Default::default(), &pull_secret(A, "a-pull", &registry.addr, "not-the-password")).await.unwrap();
    assert_refused(&run(&cluster, &argv).await, &["RegistryUnauthorized"], "the tenant's credentials refused");
}
