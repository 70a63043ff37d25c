//! Kubernetes RBAC over manifests (for instance deploy/ rendered by `kubectl kustomize`): may
//! this service account make this request? Decided by the local API server's own authorizer
//! (`zundoko_apiserver::rbac`, kube-apiserver's `RuleAllows` and `appliesToUser`), so the
//! manifests are read with the rules the server enforces with `--authorization-mode RBAC`.
//!
//! Only the manifests given count: no bootstrap roles, and a binding to a role that is not in
//! them, or to an aggregated ClusterRole (whose rules a controller writes, not the manifest),
//! is a manifest mistake and panics.

use serde_json::Value;
use zundoko_apiserver::rbac::{Attributes, Policy, UserInfo, applies_to_user};

/// The manifests and the service account asking.
#[derive(Clone, Debug)]
pub struct RbacRules {
    docs: Vec<Value>,
    user: UserInfo,
}

impl RbacRules {
    /// The rules bound to service account `namespace/name` by the bindings in `docs`
    /// (manifests as JSON values; objects of other kinds are ignored).
    pub fn for_service_account(docs: &[Value], namespace: &str, name: &str) -> RbacRules {
        let rules = RbacRules { docs: docs.to_vec(), user: UserInfo::service_account(namespace, name) };
        let policy = rules.policy();
        let bindings = policy.cluster_role_bindings.iter().map(|b| (b, "")).chain(policy.role_bindings.iter().map(|b| (b, b["metadata"]["namespace"].as_str().unwrap_or(""))));
        for (binding, ns) in bindings {
            if !binding["subjects"].as_array().into_iter().flatten().any(|s| applies_to_user(&rules.user, s, ns)) {
                continue;
            }
            let (label, role) = (format!("{} {ns}/{}", binding["kind"], binding["metadata"]["name"]), binding["roleRef"]["name"].as_str().unwrap_or(""));
            if binding["kind"] == "ClusterRoleBinding" {
                assert_eq!(binding["roleRef"]["kind"], "ClusterRole", "{label}: a ClusterRoleBinding can only refer to a ClusterRole");
            }
            if binding["roleRef"]["kind"] == "ClusterRole" {
                let cluster_role = policy.cluster_role(role).unwrap_or_else(|| panic!("{label} refers to ClusterRole {role}, which is not in the manifests"));
                assert!(cluster_role.get("aggregationRule").is_none(), "ClusterRole {role} is aggregated: its rules are not in the manifest");
            }
            let (_, errors) = policy.rules_for(&rules.user, ns);
            assert!(errors.is_empty(), "{label}: {errors:?}");
        }
        rules
    }

    fn policy(&self) -> Policy<'_> {
        Policy::from_objects(&self.docs)
    }

    /// Whether a resource request is allowed. Arguments as the API server's request attributes
    /// (and the local API server's `RequestRecord`): "" for the core group, for no subresource,
    /// for a cluster-wide or cluster-scoped request, and for no name.
    pub fn allows(&self, verb: &str, api_group: &str, resource: &str, subresource: &str, namespace: &str, name: &str) -> bool {
        // A create on a collection is a POST without a name in its path.
        let name = if verb == "create" && subresource.is_empty() { "" } else { name };
        let a = Attributes { user: &self.user, verb, resource_request: true, api_group, api_version: "v1", resource, subresource, namespace, name, path: "" };
        self.policy().authorize(&a).is_ok()
    }

    /// Every rule with where it applies, for a readable failure message.
    pub fn describe(&self) -> String {
        let policy = self.policy();
        let namespaces = policy.role_bindings.iter().filter_map(|b| b["metadata"]["namespace"].as_str());
        let mut lines: Vec<String> = vec![];
        for ns in std::iter::once("").chain(namespaces) {
            for g in policy.rules_for(&self.user, ns).0.into_iter().filter(|g| ns.is_empty() || g.namespace.is_some()) {
                let r = g.rule;
                let line = format!("{}: groups {} resources {} names {} verbs {}", g.namespace.unwrap_or("(cluster)"), r["apiGroups"], r["resources"], r["resourceNames"], r["verbs"]);
                if !lines.contains(&line) {
                    lines.push(line);
                }
            }
        }
        lines.join("\n")
    }
}
