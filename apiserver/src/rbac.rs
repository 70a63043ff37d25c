//! RBAC as kube-apiserver's authorizer evaluates it (plugin/pkg/auth/authorizer/rbac:
//! `RuleAllows`, `appliesToUser`, `VisitRulesFor`), over Role, ClusterRole, RoleBinding and
//! ClusterRoleBinding objects: the server's own (`--authorization-mode RBAC`) or manifests
//! (the operator's tests read deploy/ with it, so there is one matcher, not two).
//!
//! - a ClusterRoleBinding applies to every namespace and to cluster-wide requests (namespace
//!   ""); a RoleBinding, to a Role or a ClusterRole, applies only in its own namespace;
//! - verbs, apiGroups and resources match exactly or by `*`; the core group is ""; a
//!   subresource is asked for as `resource/subresource` and matches that, `*` or `*/sub`;
//! - resourceNames, when present, must contain the request's name: a create carries none (the
//!   new name is in the body), a list or watch carries the name a `metadata.name` field
//!   selector pins (`route::selected_name`, as RequestInfo does);
//! - nonResourceURLs match a non-resource request's path exactly, or by a trailing `*`;
//! - an aggregated ClusterRole grants the rules written into it (by `rbac_bootstrap`'s
//!   aggregation controller, as kube-controller-manager's does), never its selectors.
//!
//! `system:masters` is allowed everything before RBAC is asked (kube-apiserver's privileged
//! group authorizer).

use serde_json::{Value, json};

use crate::status::ApiError;
use crate::goquote::Quoted;

pub const GROUP: &str = "rbac.authorization.k8s.io";
pub const MASTERS: &str = "system:masters";
pub const AUTHENTICATED: &str = "system:authenticated";
const SA_PREFIX: &str = "system:serviceaccount:";

/// Who is asking: user.Info's name and groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub groups: Vec<String>,
}

impl UserInfo {
    /// A service account's user, as its token authenticates it.
    pub fn service_account(namespace: &str, name: &str) -> UserInfo {
        let mut groups = service_account_groups(namespace);
        groups.push(AUTHENTICATED.into());
        UserInfo { name: format!("{SA_PREFIX}{namespace}:{name}"), groups }
    }

    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

/// serviceaccount.MakeGroupNames.
pub fn service_account_groups(namespace: &str) -> Vec<String> {
    vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{namespace}")]
}

/// serviceaccount.SplitUsername: `system:serviceaccount:NS:NAME` as (NS, NAME), both valid names.
pub fn split_service_account(user: &str) -> Option<(&str, &str)> {
    let (namespace, name) = user.strip_prefix(SA_PREFIX)?.split_once(':')?;
    let valid = |s: &str| !s.is_empty() && s.len() <= 253 && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    (valid(namespace) && valid(name) && !name.contains(':')).then_some((namespace, name))
}

/// A request as the authorizer sees it (authorizer.Attributes). "" for the core group, no
/// subresource, a cluster-wide or cluster-scoped request, and no name.
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    pub user: &'a UserInfo,
    pub verb: &'a str,
    /// false: a non-resource request (discovery, /version, /healthz): only `path` counts.
    pub resource_request: bool,
    pub api_group: &'a str,
    pub api_version: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub path: &'a str,
}

/// The RBAC objects to decide by.
#[derive(Debug, Clone, Default)]
pub struct Policy<'a> {
    pub roles: Vec<&'a Value>,
    pub cluster_roles: Vec<&'a Value>,
    pub role_bindings: Vec<&'a Value>,
    pub cluster_role_bindings: Vec<&'a Value>,
}

/// One rule a user holds, with where it applies (None: everywhere) and what granted it, as
/// the authorizer's describers word it (`ClusterRoleBinding "b" of ClusterRole "r" to User "u"`,
/// `RoleBinding "b/ns" of Role "r" to ServiceAccount "sa/ns"`).
#[derive(Debug, Clone)]
pub struct Grant<'a> {
    pub namespace: Option<&'a str>,
    pub rule: &'a Value,
    pub source: String,
}

/// What the authorizer chain answers (authorizer.Decision and its reason): `allowed`, or no
/// opinion (RBAC never denies) with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
}

fn name_of(o: &Value) -> &str {
    o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("")
}

fn namespace_of(o: &Value) -> &str {
    o.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("")
}

pub(crate) fn strs<'v>(o: &'v Value, field: &str) -> impl Iterator<Item = &'v str> {
    o.get(field).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
}

impl<'a> Policy<'a> {
    /// The rbac.authorization.k8s.io/v1 objects among `objects` (manifests; others ignored).
    pub fn from_objects(objects: impl IntoIterator<Item = &'a Value>) -> Policy<'a> {
        let mut p = Policy::default();
        for o in objects.into_iter().filter(|o| o["apiVersion"] == "rbac.authorization.k8s.io/v1") {
            match o["kind"].as_str().unwrap_or("") {
                "Role" => p.roles.push(o),
                "ClusterRole" => p.cluster_roles.push(o),
                "RoleBinding" => p.role_bindings.push(o),
                "ClusterRoleBinding" => p.cluster_role_bindings.push(o),
                _ => {}
            }
        }
        p
    }

    pub fn cluster_role(&self, name: &str) -> Option<&'a Value> {
        self.cluster_roles.iter().copied().find(|r| name_of(r) == name)
    }

    /// GetRoleReferenceRules: the rules of the role a roleRef names, as seen from a binding in
    /// `binding_namespace` ("" for a ClusterRoleBinding).
    pub fn role_reference_rules(&self, kind: &str, name: &str, binding_namespace: &str) -> Result<&'a [Value], RoleRefError> {
        let missing = |resource| RoleRefError::Missing { resource, namespace: binding_namespace.to_string(), name: name.to_string() };
        let role = match kind {
            "Role" => self.roles.iter().copied().find(|r| name_of(r) == name && namespace_of(r) == binding_namespace).ok_or_else(|| missing("role"))?,
            "ClusterRole" => self.cluster_role(name).ok_or_else(|| missing("clusterrole"))?,
            other => return Err(RoleRefError::UnsupportedKind(other.to_string())),
        };
        Ok(role.get("rules").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default())
    }

    fn referenced_rules(&self, binding: &'a Value, binding_namespace: &str) -> Result<&'a [Value], RoleRefError> {
        let (kind, name) = (binding.pointer("/roleRef/kind").and_then(Value::as_str).unwrap_or(""), binding.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or(""));
        self.role_reference_rules(kind, name, binding_namespace)
    }

    /// VisitRulesFor: the ClusterRoleBindings' rules, then (for a namespaced request) the
    /// RoleBindings' of that namespace; and the errors of bindings whose role is missing, as
    /// the authorizer's listers word them.
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<Grant<'a>>, Vec<String>) {
        let (grants, errors) = self.rules_and_ref_errors(user, namespace);
        (grants, errors.iter().map(RoleRefError::lister_message).collect())
    }

    /// The same, the errors kept for their caller to word.
    pub(crate) fn rules_and_ref_errors(&self, user: &UserInfo, namespace: &str) -> (Vec<Grant<'a>>, Vec<RoleRefError>) {
        let (mut grants, mut errors) = (vec![], vec![]);
        let mut visit = |binding: &'a Value, kind: &str, scope: Option<&'a str>| {
            let ns = scope.unwrap_or("");
            // appliesTo: the first subject that is the user is the one described.
            let Some(subject) = strs_objects(binding, "subjects").find(|s| applies_to_user(user, s, ns)) else { return };
            match self.referenced_rules(binding, ns) {
                Ok(rules) => {
                    let role_ref = |f: &str| binding.pointer(&format!("/roleRef/{f}")).and_then(Value::as_str).unwrap_or("");
                    let name = match scope {
                        Some(ns) => format!("{}/{ns}", name_of(binding)),
                        None => name_of(binding).to_string(),
                    };
                    let source = format!("{kind} {} of {} {} to {}", Quoted(&name), role_ref("kind"), Quoted(role_ref("name")), describe_subject(subject, ns));
                    grants.extend(rules.iter().map(|rule| Grant { namespace: scope, rule, source: source.clone() }));
                }
                Err(e) => errors.push(e),
            }
        };
        for b in &self.cluster_role_bindings {
            visit(b, "ClusterRoleBinding", None);
        }
        if !namespace.is_empty() {
            for b in self.role_bindings.iter().copied().filter(|b| namespace_of(b) == namespace) {
                visit(b, "RoleBinding", Some(namespace_of(b)));
            }
        }
        (grants, errors)
    }

    /// The RBAC authorizer's decision, and its reason when it has no opinion: the errors it met
    /// (`RBAC: clusterrole... not found`), as kube-apiserver appends them to its message.
    pub fn authorize(&self, a: &Attributes<'_>) -> Result<(), String> {
        let d = self.decide(a);
        if d.allowed { Ok(()) } else { Err(d.reason) }
    }

    /// The privileged-group authorizer (`system:masters`: allowed, no reason), then RBAC's
    /// `Authorize`: allowed by the first rule that allows it, `RBAC: allowed by <source>`; else
    /// no opinion, with the errors met (`RBAC: <aggregate>`) or no reason.
    pub fn decide(&self, a: &Attributes<'_>) -> Decision {
        if a.user.in_group(MASTERS) {
            return Decision { allowed: true, reason: String::new() };
        }
        let (grants, errors) = self.rules_for(a.user, a.namespace);
        if let Some(g) = grants.iter().find(|g| rule_allows(a, g.rule)) {
            return Decision { allowed: true, reason: format!("RBAC: allowed by {}", g.source) };
        }
        let reason = if errors.is_empty() { String::new() } else { format!("RBAC: {}", go_aggregate(&errors)) };
        Decision { allowed: false, reason }
    }
}

/// utilerrors.Aggregate's Error(): one message as it is, several each once in `[a, b]`.
pub fn go_aggregate(messages: &[String]) -> String {
    let mut seen: Vec<&str> = vec![];
    for m in messages {
        if !seen.contains(&m.as_str()) {
            seen.push(m);
        }
    }
    match seen.as_slice() {
        [] => String::new(),
        [one] => one.to_string(),
        _ => format!("[{}]", seen.join(", ")),
    }
}

/// describeSubject: a ServiceAccount as `name/namespace` (the binding's when it names none).
fn describe_subject(subject: &Value, binding_namespace: &str) -> String {
    let (kind, name) = (subject["kind"].as_str().unwrap_or(""), subject["name"].as_str().unwrap_or(""));
    match kind {
        "ServiceAccount" => {
            let ns = subject["namespace"].as_str().filter(|n| !n.is_empty()).unwrap_or(binding_namespace);
            format!("{kind} {}", Quoted(&format!("{name}/{ns}")))
        }
        _ => format!("{kind} {}", Quoted(name)),
    }
}

/// Why a binding's roleRef yields no rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoleRefError {
    /// `resource`: "role" or "clusterrole"; `namespace`: where it was looked for.
    #[error("{resource}.{GROUP} {} not found", Quoted(name))]
    Missing { resource: &'static str, namespace: String, name: String },
    #[error("unsupported role reference kind: {}", Quoted(.0))]
    UnsupportedKind(String),
}

impl RoleRefError {
    /// The authorizer's wording: its listers' NotFound names the resource in the singular.
    pub fn lister_message(&self) -> String {
        self.to_string()
    }
}

fn strs_objects<'v>(o: &'v Value, field: &str) -> impl Iterator<Item = &'v Value> {
    o.get(field).and_then(Value::as_array).into_iter().flatten()
}

/// appliesToUser: whether a binding's subject is this user. A ServiceAccount subject without
/// a namespace is in the binding's namespace, and so matches no one in a ClusterRoleBinding.
pub fn applies_to_user(user: &UserInfo, subject: &Value, binding_namespace: &str) -> bool {
    let name = subject["name"].as_str().unwrap_or("");
    match subject["kind"].as_str().unwrap_or("") {
        "User" => user.name == name,
        "Group" => user.in_group(name),
        "ServiceAccount" => {
            let ns = subject["namespace"].as_str().filter(|n| !n.is_empty()).unwrap_or(binding_namespace);
            !ns.is_empty() && user.name == format!("{SA_PREFIX}{ns}:{name}")
        }
        _ => false,
    }
}

/// RuleAllows.
pub fn rule_allows(a: &Attributes<'_>, rule: &Value) -> bool {
    let verb_ok = strs(rule, "verbs").any(|v| v == "*" || v == a.verb);
    if !a.resource_request {
        return verb_ok
            && strs(rule, "nonResourceURLs").any(|u| u == "*" || u == a.path || u.strip_suffix('*').is_some_and(|prefix| a.path.starts_with(prefix)));
    }
    let combined = if a.subresource.is_empty() { a.resource.to_string() } else { format!("{}/{}", a.resource, a.subresource) };
    let group_ok = strs(rule, "apiGroups").any(|g| g == "*" || g == a.api_group);
    let resource_ok = strs(rule, "resources").any(|r| r == "*" || r == combined || (!a.subresource.is_empty() && r.strip_prefix("*/") == Some(a.subresource)));
    let mut names = strs(rule, "resourceNames").peekable();
    let name_ok = names.peek().is_none() || names.any(|n| n == a.name);
    verb_ok && group_ok && resource_ok && name_ok
}

/// responsewriters.Forbidden's Status: `RESOURCE.GROUP "NAME" is forbidden: User "U" cannot
/// VERB resource "RESOURCE[/SUB]" in API group "G" in the namespace "NS"` (or `at the cluster
/// scope`; for a path, `forbidden: User "U" cannot VERB path "P"`), then `: REASON` if any.
pub fn forbidden(a: &Attributes<'_>, reason: &str) -> ApiError {
    let user = &a.user.name;
    let mut why = if !a.resource_request {
        format!("User {} cannot {} path {}", Quoted(user), a.verb, Quoted(a.path))
    } else {
        let resource = if a.subresource.is_empty() { a.resource.to_string() } else { format!("{}/{}", a.resource, a.subresource) };
        let scope = if a.namespace.is_empty() { "at the cluster scope".to_string() } else { format!("in the namespace {}", Quoted(a.namespace)) };
        format!("User {} cannot {} resource {} in API group {} {scope}", Quoted(user), a.verb, Quoted(&resource), Quoted(a.api_group))
    };
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    if !a.resource_request || (a.api_group.is_empty() && a.resource.is_empty()) {
        return ApiError::new(403, "Forbidden", format!("forbidden: {why}"), Some(json!({})));
    }
    ApiError::forbidden(a.api_group, a.resource, a.name, &why)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The reasons as kube's authorizer writes them: the first binding's first subject that is
    /// the user, described; binding errors each once.
    #[test]
    fn reasons_name_the_binding_and_subject_and_each_error_once() {
        let objects = [
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}, "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "b", "namespace": "team-a"},
                   "roleRef": {"kind": "ClusterRole", "name": "r"}, "subjects": [{"kind": "User", "name": "x"}, {"kind": "ServiceAccount", "name": "sa"}, {"kind": "Group", "name": "g"}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "ghost1", "namespace": "team-b"},
                   "roleRef": {"kind": "ClusterRole", "name": "ghost"}, "subjects": [{"kind": "Group", "name": "g"}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "ghost2", "namespace": "team-b"},
                   "roleRef": {"kind": "ClusterRole", "name": "ghost"}, "subjects": [{"kind": "Group", "name": "g"}]}),
        ];
        let policy = Policy::from_objects(&objects);
        let sa = UserInfo { name: "system:serviceaccount:team-a:sa".into(), groups: vec!["g".into()] };
        let a = |namespace| Attributes { user: &sa, verb: "get", resource_request: true, api_group: "", api_version: "v1", resource: "secrets", subresource: "", namespace, name: "", path: "" };
        let allowed = "RBAC: allowed by RoleBinding \"b/team-a\" of ClusterRole \"r\" to ServiceAccount \"sa/team-a\"";
        assert_eq!(policy.decide(&a("team-a")), Decision { allowed: true, reason: allowed.into() });
        let missing = "RBAC: clusterrole.rbac.authorization.k8s.io \"ghost\" not found";
        assert_eq!(policy.decide(&a("team-b")), Decision { allowed: false, reason: missing.into() });
        assert_eq!(go_aggregate(&["a".into(), "b".into(), "a".into()]), "[a, b]");
    }
}
