//! Kubernetes RBAC as the API server's authorizer evaluates it, over manifests (for instance
//! deploy/ rendered by `kubectl kustomize`): may this service account make this request?
//!
//! Semantics follow kube-apiserver's RBAC authorizer (`RuleAllows`, `appliesToUser`):
//! - a ClusterRole bound by a ClusterRoleBinding applies to every namespace and to
//!   cluster-wide requests (namespace ""); a Role, or a ClusterRole bound by a RoleBinding,
//!   applies only to requests in the binding's namespace;
//! - verbs and apiGroups match exactly or by `*`; the core group is "";
//! - a subresource is asked for as `resource/subresource` and matches that, `*`, or
//!   `*/subresource`;
//! - resourceNames, when present, must contain the request's name, and an empty name never
//!   matches: a create on a collection carries no name (the new object's name is in the body),
//!   so a rule with resourceNames never allows it, and a list or watch matches only when the
//!   caller passes the name the API server takes from a `metadata.name=` field selector;
//! - subjects: the service account itself (a subject without a namespace means the binding's
//!   namespace), the user `system:serviceaccount:NS:NAME`, and the groups every service
//!   account is in (`system:serviceaccounts`, `system:serviceaccounts:NS`, `system:authenticated`).
//!
//! Only resource requests are evaluated; nonResourceURLs rules never allow one.
//! Needs only serde_json and k8s-openapi, so any test binary can use it.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use serde_json::Value;

/// The rules a service account holds, each with where it applies.
#[derive(Clone, Debug)]
pub struct RbacRules {
    grants: Vec<Grant>,
}

#[derive(Clone, Debug)]
struct Grant {
    /// None: bound by a ClusterRoleBinding, applies everywhere. Some(ns): bound in ns only.
    namespace: Option<String>,
    rule: PolicyRule,
}

impl RbacRules {
    /// The rules bound to service account `namespace/name` by the bindings in `docs`
    /// (manifests as JSON values; objects of other kinds are ignored).
    ///
    /// Panics on a binding whose role is not in `docs` or on an aggregated ClusterRole: the API
    /// server would grant nothing or the aggregated rules, and either is a manifest mistake.
    pub fn for_service_account(docs: &[Value], namespace: &str, name: &str) -> RbacRules {
        let cluster_roles: Vec<ClusterRole> = of_kind(docs, "ClusterRole");
        let roles: Vec<Role> = of_kind(docs, "Role");
        let user = ServiceAccount { namespace, name };
        let cluster_role_rules = |role_ref: &RoleRef, binding: &str| -> Vec<PolicyRule> {
            let role = cluster_roles
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(role_ref.name.as_str()))
                .unwrap_or_else(|| panic!("{binding} refers to ClusterRole {}, which is not in the manifests", role_ref.name));
            assert!(role.aggregation_rule.is_none(), "ClusterRole {} is aggregated: its rules are not in the manifest", role_ref.name);
            role.rules.clone().unwrap_or_default()
        };

        let mut grants = vec![];
        for binding in of_kind::<ClusterRoleBinding>(docs, "ClusterRoleBinding") {
            let label = format!("ClusterRoleBinding {}", binding.metadata.name.as_deref().unwrap_or(""));
            if !binding.subjects.iter().flatten().any(|s| user.is(s, "")) {
                continue;
            }
            assert_eq!(binding.role_ref.kind, "ClusterRole", "{label}: a ClusterRoleBinding can only refer to a ClusterRole");
            for rule in cluster_role_rules(&binding.role_ref, &label) {
                grants.push(Grant { namespace: None, rule });
            }
        }
        for binding in of_kind::<RoleBinding>(docs, "RoleBinding") {
            let ns = binding.metadata.namespace.clone().unwrap_or_default();
            let label = format!("RoleBinding {ns}/{}", binding.metadata.name.as_deref().unwrap_or(""));
            assert!(!ns.is_empty(), "{label} has no namespace");
            if !binding.subjects.iter().flatten().any(|s| user.is(s, &ns)) {
                continue;
            }
            let rules = match binding.role_ref.kind.as_str() {
                "ClusterRole" => cluster_role_rules(&binding.role_ref, &label),
                "Role" => roles
                    .iter()
                    .find(|r| r.metadata.namespace.as_deref() == Some(ns.as_str()) && r.metadata.name.as_deref() == Some(binding.role_ref.name.as_str()))
                    .unwrap_or_else(|| panic!("{label} refers to Role {}, which is not in its namespace", binding.role_ref.name))
                    .rules
                    .clone()
                    .unwrap_or_default(),
                other => panic!("{label} refers to a {other}"),
            };
            for rule in rules {
                grants.push(Grant { namespace: Some(ns.clone()), rule });
            }
        }
        RbacRules { grants }
    }

    /// Whether a resource request is allowed. Arguments as the API server's request attributes
    /// (and the local API server's `RequestRecord`): "" for the core group, for no subresource,
    /// for a cluster-wide or cluster-scoped request, and for no name.
    pub fn allows(&self, verb: &str, api_group: &str, resource: &str, subresource: &str, namespace: &str, name: &str) -> bool {
        // A create on a collection is a POST without a name in its path.
        let name = if verb == "create" && subresource.is_empty() { "" } else { name };
        let combined = if subresource.is_empty() { resource.to_string() } else { format!("{resource}/{subresource}") };
        self.grants.iter().any(|g| {
            let in_scope = match &g.namespace {
                None => true,
                Some(ns) => !namespace.is_empty() && ns == namespace,
            };
            in_scope && rule_allows(&g.rule, verb, api_group, &combined, subresource, name)
        })
    }

    /// Every rule with where it applies, for a readable failure message.
    pub fn describe(&self) -> String {
        self.grants
            .iter()
            .map(|g| {
                let r = &g.rule;
                format!(
                    "{}: groups {:?} resources {:?} names {:?} verbs {:?}",
                    g.namespace.as_deref().unwrap_or("(cluster)"),
                    r.api_groups.as_deref().unwrap_or_default(),
                    r.resources.as_deref().unwrap_or_default(),
                    r.resource_names.as_deref().unwrap_or_default(),
                    r.verbs
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// kube-apiserver's `RuleAllows` for a resource request.
fn rule_allows(rule: &PolicyRule, verb: &str, api_group: &str, combined: &str, subresource: &str, name: &str) -> bool {
    let has = |list: &Option<Vec<String>>, want: &str| list.iter().flatten().any(|v| v == "*" || v == want);
    let verb_ok = rule.verbs.iter().any(|v| v == "*" || v == verb);
    let resource_ok = rule.resources.iter().flatten().any(|r| {
        r == "*" || r == combined || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource))
    });
    let name_ok = match &rule.resource_names {
        Some(names) if !names.is_empty() => names.iter().any(|n| n == name),
        _ => true,
    };
    verb_ok && has(&rule.api_groups, api_group) && resource_ok && name_ok
}

struct ServiceAccount<'a> {
    namespace: &'a str,
    name: &'a str,
}

impl ServiceAccount<'_> {
    /// kube-apiserver's `appliesToUser` for a service account's user info.
    fn is(&self, subject: &Subject, binding_namespace: &str) -> bool {
        match subject.kind.as_str() {
            "ServiceAccount" => {
                let ns = subject.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or(binding_namespace);
                !ns.is_empty() && ns == self.namespace && subject.name == self.name
            }
            "User" => subject.name == format!("system:serviceaccount:{}:{}", self.namespace, self.name),
            "Group" => {
                let group = subject.name.as_str();
                group == "system:serviceaccounts" || group == "system:authenticated" || group == format!("system:serviceaccounts:{}", self.namespace)
            }
            _ => false,
        }
    }
}

fn of_kind<T: serde::de::DeserializeOwned>(docs: &[Value], kind: &str) -> Vec<T> {
    docs.iter()
        .filter(|d| d["apiVersion"] == "rbac.authorization.k8s.io/v1" && d["kind"] == kind)
        .map(|d| serde_json::from_value(d.clone()).unwrap_or_else(|e| panic!("a {kind} does not parse: {e}")))
        .collect()
}
