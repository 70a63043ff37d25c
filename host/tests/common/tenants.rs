//! Tenants' rule sets (`ZundokoNamespacedRules`) and Hikawas naming them, as the tests make
//! and read them.

use std::time::Duration;

use kube::Api;
use kube::api::PostParams;
use zundoko_operator::crd::{
    Hikawa, HikawaSpec, ModuleSource, RulesKind, RulesRef, TenantSources, ZundokoNamespacedRules, ZundokoRulesSpec, ZundokoRulesStatus, ZundokoTenantPolicy,
    ZundokoTenantPolicySpec,
};

use super::cluster::Cluster;

pub fn tenant_rules_api(cluster: &Cluster, ns: &str) -> Api<ZundokoNamespacedRules> {
    Api::namespaced(cluster.client.clone(), ns)
}

/// A rule set in `ns` whose module is ConfigMap `configmap` of namespace `from`.
pub fn from_configmap(from: &str, configmap: &str) -> ZundokoRulesSpec {
    ZundokoRulesSpec { source: ModuleSource::config_map(from, configmap), sha256: None, candidate: None }
}

pub async fn create_tenant_rules(cluster: &Cluster, ns: &str, name: &str, spec: ZundokoRulesSpec) {
    tenant_rules_api(cluster, ns).create(&PostParams::default(), &ZundokoNamespacedRules::in_namespace(ns, name, spec)).await.unwrap();
}

pub async fn tenant_rules_status(cluster: &Cluster, ns: &str, name: &str) -> ZundokoRulesStatus {
    tenant_rules_api(cluster, ns).get(name).await.unwrap().status.unwrap_or_default()
}

pub async fn wait_tenant_rules(cluster: &Cluster, ns: &str, name: &str, what: &str, check: impl Fn(&ZundokoRulesStatus) -> bool) -> ZundokoRulesStatus {
    wait_tenant_rules_within(cluster, ns, name, what, Duration::from_secs(30), check).await
}

/// [`wait_tenant_rules`] for up to `deadline` (a pull and a compile of an interpreter's module).
pub async fn wait_tenant_rules_within(cluster: &Cluster, ns: &str, name: &str, what: &str, deadline: Duration, check: impl Fn(&ZundokoRulesStatus) -> bool) -> ZundokoRulesStatus {
    let started = std::time::Instant::now();
    loop {
        let status = tenant_rules_status(cluster, ns, name).await;
        if check(&status) {
            return status;
        }
        assert!(started.elapsed() < deadline, "timed out after {deadline:?} waiting for {what} of {ns}/{name}; the status: {status:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A Hikawa in `ns` naming its rules by `rules` (a ZundokoRules) and/or `rules_ref`.
pub async fn sing_in(cluster: &Cluster, ns: &str, name: &str, rules: Option<&str>, rules_ref: Option<(RulesKind, &str, Option<&str>)>) -> Hikawa {
    sing_as(&cluster.client, ns, name, rules, rules_ref).await
}

/// A Hikawa created by `client` (a tenant's own, say).
pub async fn sing_as(client: &kube::Client, ns: &str, name: &str, rules: Option<&str>, rules_ref: Option<(RulesKind, &str, Option<&str>)>) -> Hikawa {
    let rules_ref = rules_ref.map(|(kind, name, namespace)| RulesRef { kind, name: name.into(), namespace: namespace.map(Into::into) });
    let mut hikawa = Hikawa::new(name, HikawaSpec { interval_millis: 0, rules: rules.map(Into::into), rules_ref, ..HikawaSpec::default() });
    hikawa.metadata.namespace = Some(ns.into());
    kube::Api::<Hikawa>::namespaced(client.clone(), ns).create(&PostParams::default(), &hikawa).await.unwrap()
}

/// The Hikawa's Ready condition: (status, reason, message).
pub async fn ready_in(cluster: &Cluster, ns: &str, hikawa: &str) -> Option<(String, String, String)> {
    let h = cluster.hikawas(ns).get(hikawa).await.unwrap();
    let c = h.status?.conditions.into_iter().find(|c| c.type_ == "Ready")?;
    Some((c.status, c.reason, c.message))
}

pub async fn wait_ready_reason(cluster: &Cluster, ns: &str, hikawa: &str, reason: &str) -> String {
    let (started, deadline) = (std::time::Instant::now(), Duration::from_secs(30));
    loop {
        let ready = ready_in(cluster, ns, hikawa).await;
        if let Some((_, found, message)) = &ready
            && found == reason
        {
            return message.clone();
        }
        assert!(started.elapsed() < deadline, "timed out waiting for {ns}/{hikawa} Ready reason {reason}; its Ready: {ready:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Events regarding a tenant's rule set, in its namespace: (reason, note).
pub async fn tenant_rules_events(cluster: &Cluster, ns: &str, name: &str) -> Vec<(String, String)> {
    let list = cluster.events_regarding(ns, "ZundokoNamespacedRules", name).await;
    list.into_iter().map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default())).collect()
}

/// Create or replace the cluster policy `name`.
pub async fn put_policy(cluster: &Cluster, name: &str, spec: ZundokoTenantPolicySpec) {
    let api: Api<ZundokoTenantPolicy> = Api::all(cluster.client.clone());
    let mut policy = ZundokoTenantPolicy::new(name, spec);
    policy.metadata.managed_fields = None;
    let params = kube::api::PatchParams::apply("zundoko-test").force();
    api.patch(name, &params, &kube::api::Patch::Apply(&serde_json::json!({
        "apiVersion": "zundokokiyoshi.kaitoy.github.com/v1beta1", "kind": "ZundokoTenantPolicy",
        "metadata": {"name": name}, "spec": policy.spec,
    })))
    .await
    .unwrap();
}

/// A policy selecting the namespaces labelled `zundoko-tenant: LABEL`.
pub fn selecting(label: &str) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
        match_labels: Some([("zundoko-tenant".to_string(), label.to_string())].into()),
        match_expressions: None,
    }
}

/// Label namespace `ns` `zundoko-tenant: LABEL` (what `selecting` selects).
pub async fn label_namespace(cluster: &Cluster, ns: &str, label: &str) {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(cluster.client.clone());
    let patch = serde_json::json!({"metadata": {"labels": {"zundoko-tenant": label}}});
    api.patch(ns, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await.unwrap();
}

/// A policy letting every namespace bring rules from ConfigMaps and any registry.
pub fn open_policy() -> ZundokoTenantPolicySpec {
    ZundokoTenantPolicySpec {
        sources: TenantSources { config_maps: true, registries: vec!["*".into()] },
        max_rule_sets: 10,
        ..ZundokoTenantPolicySpec::default()
    }
}

/// Wait until the tenant rule set's status reason is `reason`; its message.
pub async fn wait_tenant_reason(cluster: &Cluster, ns: &str, name: &str, reason: &str) -> String {
    let status = wait_tenant_rules(cluster, ns, name, reason, |s| s.reason.as_deref() == Some(reason)).await;
    status.message.unwrap_or_default()
}

/// Wait (up to 90 s: the usage is taken again every 30 s) until the tenant rule set's
/// `status.usage` passes `check`; the usage.
pub async fn wait_usage(cluster: &Cluster, ns: &str, name: &str, what: &str, check: impl Fn(&zundoko_operator::crd::TenantUsage) -> bool) -> zundoko_operator::crd::TenantUsage {
    let (started, deadline) = (std::time::Instant::now(), Duration::from_secs(90));
    loop {
        let status = tenant_rules_status(cluster, ns, name).await;
        if let Some(usage) = status.usage.as_ref().filter(|u| check(u)) {
            return usage.clone();
        }
        assert!(started.elapsed() < deadline, "timed out after {deadline:?} waiting for the usage of {ns}/{name} to show {what}; the status: {status:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
