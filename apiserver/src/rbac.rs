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

/// One rule a user holds, with where it applies (None: everywhere) and what granted it.
#[derive(Debug, Clone)]
pub struct Grant<'a> {
    pub namespace: Option<&'a str>,
    pub rule: &'a Value,
    pub source: String,
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
            if !strs_objects(binding, "subjects").any(|s| applies_to_user(user, s, ns)) {
                return;
            }
            match self.referenced_rules(binding, ns) {
                Ok(rules) => {
                    let role = binding.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or("");
                    let source = match scope {
                        Some(ns) => format!("{kind} {} of role {}", Quoted(&format!("{}/{ns}", name_of(binding))), Quoted(role)),
                        None => format!("{kind} {} of ClusterRole {}", Quoted(name_of(binding)), Quoted(role)),
                    };
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

    /// The RBAC authorizer's decision, and its reason: the errors it met when it denies
    /// (`RBAC: clusterrole... not found`), as kube-apiserver appends them to its message.
    pub fn authorize(&self, a: &Attributes<'_>) -> Result<(), String> {
        if a.user.in_group(MASTERS) {
            return Ok(());
        }
        let (grants, errors) = self.rules_for(a.user, a.namespace);
        if grants.iter().any(|g| rule_allows(a, g.rule)) {
            return Ok(());
        }
        Err(match errors.len() {
            0 => String::new(),
            1 => format!("RBAC: {}", errors[0]),
            _ => format!("RBAC: [{}]", errors.join(", ")),
        })
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
        format!("User {} cannot {} path {}", Quoted(user), a.verb, Quoted(&a.path))
    } else {
        let resource = if a.subresource.is_empty() { a.resource.to_string() } else { format!("{}/{}", a.resource, a.subresource) };
        let scope = if a.namespace.is_empty() { "at the cluster scope".to_string() } else { format!("in the namespace {}", Quoted(&a.namespace)) };
        format!("User {} cannot {} resource {} in API group {} {scope}", Quoted(user), a.verb, Quoted(&resource), Quoted(&a.api_group))
    };
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    if !a.resource_request || (a.api_group.is_empty() && a.resource.is_empty()) {
        return ApiError::new(403, "Forbidden", format!("forbidden: {why}"), Some(json!({})));
    }
    ApiError::forbidden(a.api_group, a.resource, a.name, &why)
}
