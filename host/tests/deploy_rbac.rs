//! deploy/'s RBAC, as `make deploy` renders it: least privilege (no wildcards, no URL rules,
//! only request verbs), yet every request the operator makes is allowed and everything else is
//! denied, by a matcher that follows Kubernetes' RBAC semantics (tested here on rules written to
//! hit each case).

mod common;

use k8s_openapi::api::rbac::v1::{PolicyRule, Subject};

use common::deploy::{ACCOUNT, DOCS, MODULE_CONFIGMAP, NAMESPACE, documents, operator_rbac};
use common::rbac::RbacRules;

const GROUP: &str = "zundokokiyoshi.kaitoy.github.com";
/// Every verb a resource request can carry. The RBAC-only verbs (bind, escalate,
/// impersonate...) are powers the operator must never hold.
const VERBS: [&str; 8] = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];

#[test]
fn rbac_has_no_wildcards_no_url_rules_and_only_request_verbs() {
    for doc in DOCS.iter().filter(|d| d["kind"] == "Role" || d["kind"] == "ClusterRole") {
        let role = format!("{} {}", doc["kind"].as_str().unwrap(), doc["metadata"]["name"].as_str().unwrap());
        assert!(doc.get("aggregationRule").is_none(), "{role} is aggregated");
        let rules: Vec<PolicyRule> = serde_json::from_value(doc["rules"].clone()).unwrap();
        assert!(!rules.is_empty(), "{role} has no rules");
        for rule in rules {
            assert!(rule.non_resource_urls.is_none(), "{role}: the operator requests no non-resource URL: {rule:?}");
            assert!(rule.api_groups.as_ref().is_some_and(|g| !g.is_empty()), "{role}: a rule without apiGroups: {rule:?}");
            assert!(rule.resources.as_ref().is_some_and(|r| !r.is_empty()), "{role}: a rule without resources: {rule:?}");
            let values = rule.api_groups.iter().flatten().chain(rule.resources.iter().flatten()).chain(&rule.verbs).chain(rule.resource_names.iter().flatten());
            for value in values {
                assert!(!value.contains('*'), "{role}: wildcard {value:?} in {rule:?}");
            }
            for verb in &rule.verbs {
                assert!(VERBS.contains(&verb.as_str()), "{role}: verb {verb:?} in {rule:?}");
            }
        }
    }
    // Bindings grant to the operator's service account and to no one else.
    let operator = Subject { kind: "ServiceAccount".into(), name: ACCOUNT.into(), namespace: Some(NAMESPACE.into()), api_group: None };
    for doc in DOCS.iter().filter(|d| d["kind"] == "RoleBinding" || d["kind"] == "ClusterRoleBinding") {
        let subjects: Vec<Subject> = serde_json::from_value(doc["subjects"].clone()).unwrap();
        assert_eq!(subjects, std::slice::from_ref(&operator), "{} {}", doc["kind"], doc["metadata"]["name"]);
    }
}

/// What the operator does, as the API server sees each request:
/// (verb, api group, resource, subresource, namespace, name).
const OPERATOR_REQUESTS: &[(&str, &str, &str, &str, &str, &str)] = &[
    // The controller's caches, cluster-wide.
    ("list", GROUP, "hikawas", "", "", ""),
    ("watch", GROUP, "hikawas", "", "", ""),
    ("list", GROUP, "zundokos", "", "", ""),
    ("watch", GROUP, "zundokos", "", "", ""),
    ("list", GROUP, "kiyoshis", "", "", ""),
    ("watch", GROUP, "kiyoshis", "", "", ""),
    // Singing: children and status in the Hikawa's namespace, any namespace.
    ("create", GROUP, "zundokos", "", "default", "hikawa-sample-zundoko-001"),
    ("create", GROUP, "kiyoshis", "", "team-a", "hikawa-sample-kiyoshi"),
    // A create that finds the name taken: whose is it?
    ("get", GROUP, "zundokos", "", "default", "hikawa-sample-zundoko-001"),
    ("get", GROUP, "kiyoshis", "", "team-a", "hikawa-sample-kiyoshi"),
    ("patch", GROUP, "hikawas", "status", "default", "hikawa-sample"),
    ("create", "events.k8s.io", "events", "", "default", ""),
    ("patch", "events.k8s.io", "events", "", "default", "hikawa-sample.17a3b"),
    // Shard Leases and the members Lease, in its own namespace.
    ("get", "coordination.k8s.io", "leases", "", NAMESPACE, "zundoko-operator-shard-00"),
    ("create", "coordination.k8s.io", "leases", "", NAMESPACE, ""),
    ("update", "coordination.k8s.io", "leases", "", NAMESPACE, "zundoko-operator-shard-31"),
    ("update", "coordination.k8s.io", "leases", "", NAMESPACE, "zundoko-operator-members"),
    // The module ConfigMap, read and watched by name (a metadata.name field selector).
    ("get", "", "configmaps", "", NAMESPACE, MODULE_CONFIGMAP),
    ("list", "", "configmaps", "", NAMESPACE, MODULE_CONFIGMAP),
    ("watch", "", "configmaps", "", NAMESPACE, MODULE_CONFIGMAP),
    // Rule sets: cached cluster-wide, their status patched; their ConfigMaps in the
    // operator's namespace watched by metadata, and the ones they name read.
    ("list", GROUP, "zundokorules", "", "", ""),
    ("watch", GROUP, "zundokorules", "", "", ""),
    ("patch", GROUP, "zundokorules", "status", "", "classic"),
    ("list", "", "configmaps", "", NAMESPACE, ""),
    ("watch", "", "configmaps", "", NAMESPACE, ""),
    ("get", "", "configmaps", "", NAMESPACE, "rules-candidate"),
    // A rule set's pull secret, read by name in the operator's namespace.
    ("get", "", "secrets", "", NAMESPACE, "zundoko-registry-pull"),
    // Tenants' rule sets: cached cluster-wide, their status patched in their namespace.
    ("list", GROUP, "zundokonamespacedrules", "", "", ""),
    ("watch", GROUP, "zundokonamespacedrules", "", "", ""),
    ("patch", GROUP, "zundokonamespacedrules", "status", "team-a", "mine"),
    // The tenants' policies, and the namespaces' labels they select by.
    ("list", GROUP, "zundokotenantpolicies", "", "", ""),
    ("watch", GROUP, "zundokotenantpolicies", "", "", ""),
    ("list", "", "namespaces", "", "", ""),
    ("watch", "", "namespaces", "", "", ""),
];

/// What least privilege leaves out.
const DENIED_REQUESTS: &[(&str, &str, &str, &str, &str, &str)] = &[
    // Hikawas belong to their users: no writes to spec, no create or delete; the caches
    // serve reads, and the status is only merge-patched.
    ("get", GROUP, "hikawas", "", "default", "hikawa-sample"),
    ("update", GROUP, "hikawas", "status", "default", "hikawa-sample"),
    // A Lease is taken and renewed by update with its resourceVersion, never patched.
    ("patch", "coordination.k8s.io", "leases", "", NAMESPACE, "zundoko-operator-shard-00"),
    ("patch", "coordination.k8s.io", "leases", "", NAMESPACE, "zundoko-operator-members"),
    ("create", GROUP, "hikawas", "", "default", ""),
    ("update", GROUP, "hikawas", "", "default", "hikawa-sample"),
    ("patch", GROUP, "hikawas", "", "default", "hikawa-sample"),
    ("delete", GROUP, "hikawas", "", "default", "hikawa-sample"),
    ("update", GROUP, "hikawas", "finalizers", "default", "hikawa-sample"),
    // Children are created, never changed or deleted (garbage collection removes them).
    ("update", GROUP, "zundokos", "", "default", "hikawa-sample-zundoko-001"),
    ("delete", GROUP, "zundokos", "", "default", "hikawa-sample-zundoko-001"),
    ("deletecollection", GROUP, "kiyoshis", "", "default", ""),
    // Events only through events.k8s.io, and never deleted.
    ("create", "", "events", "", "default", ""),
    ("delete", "events.k8s.io", "events", "", "default", "hikawa-sample.17a3b"),
    // Leases: only its own, only in its namespace; create can be granted to no name only.
    ("get", "coordination.k8s.io", "leases", "", NAMESPACE, "someone-elses-lease"),
    ("update", "coordination.k8s.io", "leases", "", "kube-system", "kube-controller-manager"),
    ("create", "coordination.k8s.io", "leases", "", "default", ""),
    ("list", "coordination.k8s.io", "leases", "", NAMESPACE, ""),
    ("watch", "coordination.k8s.io", "leases", "", NAMESPACE, ""),
    ("delete", "coordination.k8s.io", "leases", "", NAMESPACE, "zundoko-operator-shard-00"),
    // No shard beyond the configured count, and not the single leader Lease of old.
    ("get", "coordination.k8s.io", "leases", "", NAMESPACE, "zundoko-operator-shard-32"),
    ("update", "coordination.k8s.io", "leases", "", NAMESPACE, "zundoko-operator"),
    // Rule sets belong to their users: no spec writes, no create or delete.
    ("get", GROUP, "zundokorules", "", "", "classic"),
    ("patch", GROUP, "zundokorules", "", "", "classic"),
    ("update", GROUP, "zundokorules", "", "", "classic"),
    ("delete", GROUP, "zundokorules", "", "", "classic"),
    ("update", GROUP, "zundokorules", "status", "", "classic"),
    // Tenants' rule sets belong to them; their ConfigMaps and pull secrets are read only
    // where the tenant's namespace grants it (docs/tenants.md), not by deploy/'s roles.
    ("get", GROUP, "zundokonamespacedrules", "", "team-a", "mine"),
    ("update", GROUP, "zundokonamespacedrules", "", "team-a", "mine"),
    ("patch", GROUP, "zundokotenantpolicies", "", "", "tenants"),
    ("get", "", "namespaces", "", "", "team-a"),
    ("patch", "", "namespaces", "", "", "team-a"),
    ("delete", GROUP, "zundokonamespacedrules", "", "team-a", "mine"),
    ("get", "", "configmaps", "", "team-a", "rules-a"),
    ("get", "", "secrets", "", "team-a", "a-pull"),
    // ConfigMaps: only read, only in the operator's namespace.
    ("list", "", "configmaps", "", "", ""),
    ("list", "", "configmaps", "", "default", ""),
    ("get", "", "configmaps", "", "kube-system", "kube-root-ca.crt"),
    ("get", "", "configmaps", "", "default", MODULE_CONFIGMAP),
    ("create", "", "configmaps", "", NAMESPACE, MODULE_CONFIGMAP),
    ("update", "", "configmaps", "", NAMESPACE, MODULE_CONFIGMAP),
    ("patch", "", "configmaps", "", NAMESPACE, MODULE_CONFIGMAP),
    // Nothing else at all.
    // Secrets: only the pull secrets named in the Role, only read, only there.
    ("get", "", "secrets", "", NAMESPACE, "anything"),
    ("list", "", "secrets", "", NAMESPACE, ""),
    ("watch", "", "secrets", "", NAMESPACE, ""),
    ("get", "", "secrets", "", "default", "zundoko-registry-pull"),
    ("update", "", "secrets", "", NAMESPACE, "zundoko-registry-pull"),
    ("list", "", "pods", "", "", ""),
    ("create", "", "pods", "", NAMESPACE, ""),
    ("get", "apiextensions.k8s.io", "customresourcedefinitions", "", "", "hikawas.zundokokiyoshi.kaitoy.github.com"),
    // Namespaces are listed and watched (a tenant policy's selector), never read one by one
    // or written.
    ("delete", "", "namespaces", "", "", "team-a"),
];

#[test]
fn rbac_allows_what_the_operator_does() {
    let rbac = operator_rbac();
    for &(verb, group, resource, sub, ns, name) in OPERATOR_REQUESTS {
        assert!(
            rbac.allows(verb, group, resource, sub, ns, name),
            "denied: {verb} {group}/{resource}{} in {ns:?} name {name:?}; rules:\n{}",
            if sub.is_empty() { String::new() } else { format!("/{sub}") },
            rbac.describe()
        );
    }
}

#[test]
fn rbac_denies_everything_else() {
    let rbac = operator_rbac();
    for &(verb, group, resource, sub, ns, name) in DENIED_REQUESTS {
        assert!(
            !rbac.allows(verb, group, resource, sub, ns, name),
            "allowed: {verb} {group}/{resource}{} in {ns:?} name {name:?}",
            if sub.is_empty() { String::new() } else { format!("/{sub}") }
        );
    }
}

/// deploy/'s roles for tenants carry the aggregation labels of the namespace roles, and a
/// tenant holding them through a RoleBinding in its namespace (as `edit` grants them) manages
/// its own rule sets there and nowhere else, and never their status.
#[test]
fn tenants_manage_their_own_namespaces_rule_sets_through_the_aggregated_roles() {
    let role = |name: &str| DOCS.iter().find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == name).unwrap_or_else(|| panic!("no ClusterRole {name}"));
    let labels = |name: &str| role(name)["metadata"]["labels"].clone();
    let (edit, view) = (labels("zundoko-namespaced-rules-edit"), labels("zundoko-namespaced-rules-view"));
    assert_eq!((edit["rbac.authorization.k8s.io/aggregate-to-edit"].as_str(), edit["rbac.authorization.k8s.io/aggregate-to-admin"].as_str()), (Some("true"), Some("true")));
    assert_eq!(view["rbac.authorization.k8s.io/aggregate-to-view"].as_str(), Some("true"));
    assert!(edit.get("rbac.authorization.k8s.io/aggregate-to-view").is_none() && view.get("rbac.authorization.k8s.io/aggregate-to-edit").is_none());
    let binding = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "edit", "namespace": "team-a"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "zundoko-namespaced-rules-edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": "team-a"}],
    });
    let mut docs: Vec<serde_json::Value> = DOCS.clone();
    docs.push(binding);
    let tenant = RbacRules::for_service_account(&docs, "team-a", "tenant");
    for verb in ["create", "update", "patch", "delete", "get", "list", "watch"] {
        assert!(tenant.allows(verb, GROUP, "zundokonamespacedrules", "", "team-a", if verb == "create" || verb == "list" || verb == "watch" { "" } else { "mine" }), "{verb}");
    }
    for (verb, resource, sub, ns) in [
        ("create", "zundokonamespacedrules", "", "team-b"),
        ("patch", "zundokonamespacedrules", "status", "team-a"),
        ("create", "zundokorules", "", ""),
        ("list", "zundokonamespacedrules", "", ""),
        // The policy is the cluster administrators' alone.
        ("create", "zundokotenantpolicies", "", ""),
        ("patch", "zundokotenantpolicies", "", ""),
    ] {
        assert!(!tenant.allows(verb, GROUP, resource, sub, ns, ""), "{verb} {resource}/{sub} in {ns:?}");
    }
}

/// The matcher itself, on rules written to hit each case of Kubernetes' RBAC semantics.
#[test]
fn the_rbac_matcher_follows_kubernetes_semantics() {
    let docs = documents(
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: scaler}
rules:
- apiGroups: ["*"]
  resources: ["*/scale"]
  verbs: ["*"]
- apiGroups: ["apps"]
  resources: ["deployments"]
  resourceNames: ["web"]
  verbs: ["get", "create", "list"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: scaler, namespace: team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: scaler}
subjects:
- {kind: ServiceAccount, name: sa}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: node-reader}
rules:
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["list"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: node-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: node-reader}
subjects:
- {kind: Group, apiGroup: rbac.authorization.k8s.io, name: "system:serviceaccounts:team"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: admin-ish}
rules:
- apiGroups: ["*"]
  resources: ["*"]
  verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: admin-ish}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin-ish}
subjects:
- {kind: User, apiGroup: rbac.authorization.k8s.io, name: "system:serviceaccount:team:other"}
- {kind: ServiceAccount, name: sa}
"#,
    );
    let sa = RbacRules::for_service_account(&docs, "team", "sa");
    // `*/scale`: that subresource of any resource in any group, any verb.
    assert!(sa.allows("update", "apps", "deployments", "scale", "team", "web"));
    assert!(sa.allows("patch", "", "replicationcontrollers", "scale", "team", "rc"));
    assert!(!sa.allows("update", "apps", "deployments", "", "team", "web"));
    assert!(!sa.allows("update", "apps", "deployments", "status", "team", "web"));
    // A RoleBinding grants in its namespace only, never cluster-wide.
    assert!(!sa.allows("update", "apps", "deployments", "scale", "other", "web"));
    assert!(!sa.allows("list", "apps", "deployments", "scale", "", ""));
    // resourceNames: the named object only; a list needs the name, a create never has one.
    assert!(sa.allows("get", "apps", "deployments", "", "team", "web"));
    assert!(!sa.allows("get", "apps", "deployments", "", "team", "api"));
    assert!(sa.allows("list", "apps", "deployments", "", "team", "web"));
    assert!(!sa.allows("list", "apps", "deployments", "", "team", ""));
    assert!(!sa.allows("create", "apps", "deployments", "", "team", "web"));
    // A group subject and a ClusterRoleBinding: cluster-wide requests too.
    assert!(sa.allows("list", "", "nodes", "", "", ""));
    assert!(!sa.allows("list", "", "nodes", "status", "", ""));
    assert!(!sa.allows("list", "apps", "nodes", "", "", ""));
    // A ServiceAccount subject of a ClusterRoleBinding needs its namespace: this one matches no one.
    assert!(!sa.allows("delete", "", "secrets", "", "team", "s"));
    // A User subject naming a service account is that service account.
    let other = RbacRules::for_service_account(&docs, "team", "other");
    assert!(other.allows("delete", "", "secrets", "", "team", "s"));
    // The RoleBinding's namespace-less subject is the binding's namespace, not any.
    let elsewhere = RbacRules::for_service_account(&docs, "elsewhere", "sa");
    assert!(!elsewhere.allows("get", "apps", "deployments", "", "team", "web"));
    assert!(!elsewhere.allows("list", "", "nodes", "", "", ""));
}
