//! The cluster policy that bounds every tenant (`ZundokoTenantPolicy`) against the local API
//! server: deny by default, and each of its fields refusing a tenant's rule set by name (the
//! status names the policy and the field), down to the module's budget and signature.

mod common;


use common::cluster::{Cluster, Operator, quick_settings};
use common::module_bytes;
use common::rules::{RULES_NS, wasm};
use common::tenants::*;
use kube::Api;
use zundoko_operator::crd::{
    CandidateSpec, ModuleSource, OciSource, RulesKind, TenantCeilings, TenantSources, ZundokoRulesSpec, ZundokoTenantPolicy, ZundokoTenantPolicySpec,
};
use zundoko_operator::supply::fetch::SIGNATURE_ANNOTATION_PREFIX;
use zundoko_operator::supply::oci::SignKey;
use zundoko_operator::supply::sources::digest;
use zundoko_rules::strict_japanese;

const A: &str = "team-a";

async fn start() -> (Cluster, Operator) {
    let cluster = Cluster::start().await;
    for ns in [RULES_NS, A] {
        cluster.create_namespace(ns).await;
    }
    label_namespace(&cluster, A, "a").await;
    let operator = cluster.operator(wasm(&module_bytes("zundoko-classic")), quick_settings());
    (cluster, operator)
}

fn oci(reference: &str) -> ZundokoRulesSpec {
    ZundokoRulesSpec { source: ModuleSource::oci(reference), sha256: None, candidate: None }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_policy_a_tenant_brings_no_rules_and_a_policy_removed_stops_what_it_allowed() {
    let (cluster, _operator) = start().await;
    let japanese = module_bytes("zundoko-strict-ja");
    cluster.put_configmap(A, "rules-a", &japanese).await;
    create_tenant_rules(&cluster, A, "mine", from_configmap(A, "rules-a")).await;
    sing_in(&cluster, A, "waits", None, Some((RulesKind::ZundokoNamespacedRules, "mine", None))).await;
    let refused = wait_tenant_reason(&cluster, A, "mine", "NoTenantPolicy").await;
    assert!(refused.contains("no ZundokoTenantPolicy selects namespace team-a"), "{refused}");
    assert_eq!(tenant_rules_status(&cluster, A, "mine").await.phase.as_deref(), Some("Rejected"));
    wait_ready_reason(&cluster, A, "waits", "RulesNotActive").await;
    assert!(cluster.song(A, "waits").await.words.is_empty());

    // A policy for another label selects nothing here; one for this namespace's label does.
    put_policy(&cluster, "other", ZundokoTenantPolicySpec { namespace_selector: selecting("b"), ..open_policy() }).await;
    put_policy(&cluster, "team-a", ZundokoTenantPolicySpec { namespace_selector: selecting("a"), ..open_policy() }).await;
    let status = wait_tenant_rules(&cluster, A, "mine", "Active", |s| s.phase.as_deref() == Some("Active")).await;
    assert_eq!(status.module.map(|m| m.digest), Some(digest(&japanese)));
    cluster.assert_songs_complete(A, &["waits".to_string()], &strict_japanese(), std::time::Duration::from_secs(60)).await;

    // Two policies selecting one namespace: neither applies.
    put_policy(&cluster, "other", ZundokoTenantPolicySpec { namespace_selector: Default::default(), ..open_policy() }).await;
    let ambiguous = wait_tenant_reason(&cluster, A, "mine", "PolicyAmbiguous").await;
    assert!(ambiguous.contains("other, team-a"), "{ambiguous}");
    // The policy gone: what it allowed serves no more (fail closed), saying why.
    for name in ["other", "team-a"] {
        Api::<ZundokoTenantPolicy>::all(cluster.client.clone()).delete(name, &Default::default()).await.unwrap();
    }
    wait_tenant_reason(&cluster, A, "mine", "NoTenantPolicy").await;
    sing_in(&cluster, A, "after", None, Some((RulesKind::ZundokoNamespacedRules, "mine", None))).await;
    wait_ready_reason(&cluster, A, "after", "RulesNotActive").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_field_of_the_policy_refuses_a_rule_set_by_its_name() {
    let (cluster, _operator) = start().await;
    let policy = ZundokoTenantPolicySpec {
        namespace_selector: selecting("a"),
        sources: TenantSources { config_maps: false, registries: vec!["r.example/allowed/*".into()] },
        max_rule_sets: 5,
        max_followed_tags: 0,
        candidates: false,
        ..ZundokoTenantPolicySpec::default()
    };
    put_policy(&cluster, "strict", policy).await;
    cluster.put_configmap(A, "rules-a", &module_bytes("zundoko-classic")).await;
    // Named so that their order by name is their order of creation (the oldest serve first).
    create_tenant_rules(&cluster, A, "a-configmap", from_configmap(A, "rules-a")).await;
    create_tenant_rules(&cluster, A, "b-registry", oci("r.example/elsewhere/rules:1")).await;
    let candidate = CandidateSpec { source: ModuleSource::oci("r.example/allowed/next:2"), sha256: None, rollout: Default::default() };
    create_tenant_rules(&cluster, A, "c-candidate", ZundokoRulesSpec { candidate: Some(candidate), ..oci("r.example/allowed/rules:1") }).await;
    let follow = OciSource { reference: "r.example/allowed/rules:1".into(), follow: true, ..OciSource::default() };
    create_tenant_rules(&cluster, A, "d-follow", ZundokoRulesSpec { source: ModuleSource { config_map: None, oci: Some(follow) }, sha256: None, candidate: None }).await;
    create_tenant_rules(&cluster, A, "e-fifth", oci("r.example/allowed/rules@sha256:0000000000000000000000000000000000000000000000000000000000000000")).await;
    create_tenant_rules(&cluster, A, "f-sixth", oci("r.example/allowed/rules:1")).await;
    for (name, field) in [
        ("a-configmap", "spec.sources.configMaps"),
        ("b-registry", "spec.sources.registries"),
        ("c-candidate", "spec.candidates"),
        ("d-follow", "spec.maxFollowedTags"),
        ("f-sixth", "spec.maxRuleSets"),
    ] {
        let message = wait_tenant_reason(&cluster, A, name, "PolicyRefused").await;
        assert!(message.starts_with(&format!("ZundokoTenantPolicy strict {field}: ")), "{name}: {message}");
        let status = tenant_rules_status(&cluster, A, name).await;
        assert_eq!((status.phase.as_deref(), status.module), (Some("Rejected"), None), "{name}");
    }
    // The fifth is within every field: refused only by what the registry says.
    let fifth = wait_tenant_rules(&cluster, A, "e-fifth", "tried", |s| s.reason.is_some()).await;
    assert_ne!(fifth.reason.as_deref(), Some("PolicyRefused"), "{fifth:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_module_is_held_to_the_policys_ceilings_and_required_keys() {
    let (cluster, _operator) = start().await;
    let classic = module_bytes("zundoko-classic");
    cluster.put_configmap(A, "rules-a", &classic).await;
    create_tenant_rules(&cluster, A, "mine", from_configmap(A, "rules-a")).await;
    let allowed = ZundokoTenantPolicySpec { namespace_selector: selecting("a"), ..open_policy() };
    // Classic asks for no budget: it runs with the operator's default fuel (50M) and memory
    // (32 MiB); it is some 40 KB, under any moduleMiB (supply::tenant's unit test has that one).
    let ceilings = [
        (TenantCeilings { fuel: Some(1_000_000), ..TenantCeilings::default() }, "spec.ceilings.fuel"),
        (TenantCeilings { memory_mib: Some(16), ..TenantCeilings::default() }, "spec.ceilings.memoryMiB"),
    ];
    for (ceilings, field) in ceilings {
        put_policy(&cluster, "ceilings", ZundokoTenantPolicySpec { ceilings, ..allowed.clone() }).await;
        let message = wait_tenant_rules(&cluster, A, "mine", field, |s| s.message.as_deref().is_some_and(|m| m.contains(field))).await.message.unwrap();
        assert!(message.starts_with(&format!("ZundokoTenantPolicy ceilings {field}: ")), "{message}");
        assert_eq!(tenant_rules_status(&cluster, A, "mine").await.reason.as_deref(), Some("PolicyRefused"));
    }
    // Within every ceiling: it serves.
    let roomy = TenantCeilings { fuel: Some(50_000_000), memory_mib: Some(32), module_mib: Some(1), ..TenantCeilings::default() };
    put_policy(&cluster, "ceilings", ZundokoTenantPolicySpec { ceilings: roomy, ..allowed.clone() }).await;
    wait_tenant_rules(&cluster, A, "mine", "Active", |s| s.phase.as_deref() == Some("Active")).await;

    // A key required: the unsigned module is refused (what served stops: fail closed), then
    // signed by the key beside it, it serves.
    let key = SignKey::generate();
    put_policy(&cluster, "ceilings", ZundokoTenantPolicySpec { required_keys: vec![key.public_pem()], ..allowed.clone() }).await;
    let message = wait_tenant_reason(&cluster, A, "mine", "SignatureRequired").await;
    assert!(message.contains("tenant policy's requiredKeys"), "{message}");
    assert!(tenant_rules_status(&cluster, A, "mine").await.module.is_none());
    let signature = zundoko_operator::supply::oci::signature::sign_digest(&key, &digest(&classic)).unwrap();
    let patch = serde_json::json!({"metadata": {"annotations": {format!("{SIGNATURE_ANNOTATION_PREFIX}rules.wasm"): signature}}});
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(cluster.client.clone(), A);
    configmaps.patch("rules-a", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await.unwrap();
    let status = wait_tenant_rules(&cluster, A, "mine", "Active, signed", |s| s.phase.as_deref() == Some("Active")).await;
    assert_eq!(status.module.map(|m| m.digest), Some(digest(&classic)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_or_policies_the_operator_may_not_list_leave_its_rule_sets_saying_so_and_what_to_grant() {
    let cluster = Cluster::start().await;
    cluster.create_namespace(A).await;
    put_policy(&cluster, "open", open_policy()).await;
    // RBAC without namespaces nor policies in the operator's ClusterRole: its lists refused.
    cluster.server.faults().set_refusal_rate("list/namespaces", 403, 1.0);
    cluster.server.faults().set_refusal_rate("list/zundokotenantpolicies", 403, 1.0);
    let operator = cluster.operator(wasm(&module_bytes("zundoko-classic")), quick_settings());
    let japanese = module_bytes("zundoko-strict-ja");
    cluster.put_configmap(A, "rules-a", &japanese).await;
    create_tenant_rules(&cluster, A, "mine", from_configmap(A, "rules-a")).await;

    let message = wait_tenant_reason(&cluster, A, "mine", "NamespaceUnreadable").await;
    // Looked at again with backoff, not every 200 ms: in 6 s, once the backoff (0.25 s
    // doubling) has grown for 4 s, its few tries and the wake-ups of the two watches' own
    // retries (1 measured), well under the 30 a 200 ms requeue makes (34). A bound above: a slower
    // machine only reconciles less.
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    let reconciles = || {
        let text = operator.shared.metrics.encode();
        let line = text.lines().find_map(|l| l.strip_prefix("zundoko_reconcile_duration_seconds_count{controller=\"zundokorules\",result=\"success\"} ")?.trim().parse::<f64>().ok());
        line.unwrap_or(0.0)
    };
    let before = reconciles();
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    assert!(reconciles() - before < 10.0, "{} reconciles in 6 s of an unreadable namespace", reconciles() - before);
    assert!(message.contains("cannot get namespace team-a") && message.contains("forbidden"), "names the namespace and the refusal: {message}");
    assert!(message.contains(r#"resources ["namespaces"], verbs ["get", "list", "watch"]"#), "names the rule to grant: {message}");
    let status = tenant_rules_status(&cluster, A, "mine").await;
    assert_eq!((status.phase.as_deref(), status.module.as_ref()), (Some("Pending"), None), "nothing serves unjudged");
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready").expect("a Ready condition");
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "NamespaceUnreadable"));
    assert!(tenant_rules_events(&cluster, A, "mine").await.iter().any(|(reason, _)| reason == "NamespaceUnreadable"), "a Warning Event on the rule set");

    // Namespaces granted (the watch lists them after its backoff): the policies are next.
    cluster.server.faults().set_refusal_rate("list/namespaces", 403, 0.0);
    let message = wait_tenant_reason(&cluster, A, "mine", "PoliciesUnreadable").await;
    assert!(message.contains(r#"resources ["zundokotenantpolicies"], verbs ["get", "list", "watch"]"#), "names the rule to grant: {message}");
    // Granted: the rule set is judged and serves.
    cluster.server.faults().set_refusal_rate("list/zundokotenantpolicies", 403, 0.0);
    let status = wait_tenant_rules(&cluster, A, "mine", "Active", |s| s.phase.as_deref() == Some("Active")).await;
    assert_eq!(status.module.map(|m| m.digest), Some(digest(&japanese)));
}
