//! RBAC privilege-escalation prevention, as kube-apiserver's RBAC storages apply it on every
//! create and update (pkg/registry/rbac: `role/policybased`, `clusterrole/policybased`,
//! `rolebinding/policybased`, `clusterrolebinding/policybased`; `validation.ConfirmNoEscalation`
//! and component-helpers' `Covers`), with `--authorization-mode RBAC`:
//!
//! - a Role or ClusterRole is written only if its requestor holds every rule it grants (for a
//!   Role, what the requestor's ClusterRoleBindings and the RoleBindings of its namespace grant;
//!   for a ClusterRole, the ClusterRoleBindings' only), or may `escalate` that resource
//!   (`RoleEscalationAuthorized`: asked of the authorizer with the request's namespace and name,
//!   so a create, naming nothing, needs `escalate` without resourceNames). A ClusterRole with an
//!   `aggregationRule` (now or before the update) needs `*` on everything: it may gather anything;
//! - a RoleBinding or ClusterRoleBinding is written only if its requestor may `bind` the role its
//!   roleRef names (`BindingAuthorized`: `roles` or `clusterroles`, that name, in the binding's
//!   namespace or "" for a ClusterRoleBinding), or holds every rule of that role, as above; a
//!   roleRef naming no role is the registry's 404 (`roles.rbac.authorization.k8s.io "X" not
//!   found`, its resource plural: the registry resolves it, not the authorizer's listers);
//! - `system:masters` is never checked (`EscalationAllowed`), nor an update changing only what
//!   the garbage collector changes (`IsOnlyMutatingGCFields`: ownerReferences, finalizers);
//! - "holds" is `Covers`: each rule broken down to one group, resource, verb and name (or one
//!   URL and verb), each piece covered by one held rule (`*` verbs, groups and resources;
//!   `*/sub` for a subresource; a held rule without resourceNames covers every name, one with
//!   them never a rule without; a URL exactly or by a trailing `*`). The refusal (403) lists
//!   the pieces not held, merged by group, resource and name and sorted, as kube-apiserver does.

use serde_json::Value;

use crate::rbac::{Attributes, GROUP, MASTERS, Policy, RoleRefError, UserInfo};
use crate::status::ApiError;
use crate::goquote::{Quoted, quote_list};

/// A PolicyRule's fields, as the coverage check reads them (absent: empty).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

impl Rule {
    pub fn from_value(rule: &Value) -> Rule {
        let field = |name: &str| -> Vec<String> { crate::rbac::strs(rule, name).map(String::from).collect() };
        Rule {
            verbs: field("verbs"),
            api_groups: field("apiGroups"),
            resources: field("resources"),
            resource_names: field("resourceNames"),
            non_resource_urls: field("nonResourceURLs"),
        }
    }

    fn one(verb: &str) -> Rule {
        Rule { verbs: vec![verb.into()], ..Rule::default() }
    }
}

/// One create or update of an RBAC object, as its storage sees it.
pub struct Write<'a> {
    pub user: &'a UserInfo,
    /// roles, clusterroles, rolebindings or clusterrolebindings.
    pub resource: &'a str,
    /// The request's namespace and name (RequestInfo: no name on a create).
    pub namespace: &'a str,
    pub name: &'a str,
    pub new: &'a Value,
    /// The stored object an update replaces.
    pub old: Option<&'a Value>,
}

/// The policybased storages' checks: Ok, or the error the write is refused with.
pub fn check(policy: &Policy<'_>, w: &Write<'_>) -> Result<(), ApiError> {
    if w.user.in_group(MASTERS) {
        return Ok(());
    }
    let name = w.new.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    let forbidden = |why: &str| ApiError::forbidden(GROUP, w.resource, name, why);
    let cluster_scoped = w.resource.starts_with("cluster");
    // ConfirmNoEscalation's namespace: the request's (none for the cluster-scoped kinds).
    let namespace = if cluster_scoped { "" } else { w.namespace };
    match w.resource {
        "roles" | "clusterroles" => {
            if escalate_authorized(policy, w) || only_gc_fields(w) {
                return Ok(());
            }
            let rules: Vec<Rule> = w.new.get("rules").and_then(Value::as_array).into_iter().flatten().map(Rule::from_value).collect();
            confirm_no_escalation(policy, w.user, namespace, &rules).map_err(|why| forbidden(&why))?;
            let aggregating = |o: &Value| o.pointer("/aggregationRule/clusterRoleSelectors").and_then(Value::as_array).is_some_and(|s| s.iter().any(|sel| !sel.is_null()));
            if cluster_scoped && (aggregating(w.new) || w.old.is_some_and(aggregating)) {
                confirm_no_escalation(policy, w.user, "", &full_authority()).map_err(|_| forbidden("must have cluster-admin privileges to use the aggregationRule"))?;
            }
            Ok(())
        }
        "rolebindings" | "clusterrolebindings" => {
            if only_gc_fields(w) {
                return Ok(());
            }
            let field = |f: &str| w.new.pointer(&format!("/roleRef/{f}")).and_then(Value::as_str).unwrap_or("");
            let (kind, api_group, role) = (field("kind"), field("apiGroup"), field("name"));
            if bind_authorized(policy, w.user, kind, api_group, role, namespace) {
                return Ok(());
            }
            let rules = policy.role_reference_rules(kind, role, namespace).map_err(|e| registry_error(&e))?;
            let rules: Vec<Rule> = rules.iter().map(Rule::from_value).collect();
            confirm_no_escalation(policy, w.user, namespace, &rules).map_err(|why| forbidden(&why))
        }
        _ => Ok(()),
    }
}

/// `*` on every resource of every group, and on every URL: what an aggregationRule needs.
fn full_authority() -> [Rule; 2] {
    let star = || vec!["*".to_string()];
    [Rule { api_groups: star(), resources: star(), ..Rule::one("*") }, Rule { non_resource_urls: star(), ..Rule::one("*") }]
}

/// RoleEscalationAuthorized: `escalate` on the request's own resource, namespace and name.
fn escalate_authorized(policy: &Policy<'_>, w: &Write<'_>) -> bool {
    let a = Attributes { user: w.user, verb: "escalate", resource_request: true, api_group: GROUP, api_version: "*", resource: w.resource, subresource: "", namespace: w.namespace, name: w.name, path: "" };
    policy.authorize(&a).is_ok()
}

/// BindingAuthorized: `bind` on the referenced role, in the binding's namespace.
fn bind_authorized(policy: &Policy<'_>, user: &UserInfo, kind: &str, api_group: &str, role: &str, namespace: &str) -> bool {
    let resource = match kind {
        "Role" => "roles",
        "ClusterRole" => "clusterroles",
        _ => return false,
    };
    let a = Attributes { user, verb: "bind", resource_request: true, api_group, api_version: "", resource, subresource: "", namespace, name: role, path: "" };
    policy.authorize(&a).is_ok()
}

/// IsOnlyMutatingGCFields: the update, its ownerReferences, finalizers, selfLink and
/// managedFields set back to the stored ones, equals the stored object. kube-apiserver compares
/// the decoded typed objects (`Semantic.DeepEqual`), so both are decoded as its types are
/// (typed.rs: the kind's known fields, zero values as absent ones), with rbac/v1's defaults
/// (`SetDefaults_Subject`, `SetDefaults_*RoleBinding`) the stored object was decoded with too:
/// a field the kind does not have is no change.
fn only_gc_fields(w: &Write<'_>) -> bool {
    let Some(old) = w.old else { return false };
    let comparable = |o: &Value| {
        let mut o = decode_rbac(w.resource, o);
        if let Some(m) = o.as_object_mut() {
            m.remove("apiVersion");
            m.remove("kind");
        }
        if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            for f in ["ownerReferences", "finalizers", "selfLink", "managedFields"] {
                m.remove(f);
            }
        }
        o
    };
    comparable(w.new) == comparable(old)
}

/// An RBAC object as kube-apiserver decodes it: its kind's fields, rbac/v1's defaults applied.
fn decode_rbac(resource: &str, o: &Value) -> Value {
    use crate::typed::{BINDING, CLUSTER_ROLE, ROLE, decode_object};
    let fields: &'static [(&'static str, crate::typed::Shape)] = match resource {
        "roles" => &ROLE,
        "clusterroles" => &CLUSTER_ROLE,
        _ => &BINDING,
    };
    let mut o = decode_object(o, fields, &mut vec![]);
    if resource.ends_with("bindings") {
        if o.pointer("/roleRef/apiGroup").is_none() {
            o["roleRef"]["apiGroup"] = GROUP.into();
        }
        for s in o.get_mut("subjects").and_then(Value::as_array_mut).into_iter().flatten() {
            if s.get("apiGroup").is_none() && matches!(s["kind"].as_str(), Some("User" | "Group")) {
                s["apiGroup"] = GROUP.into();
            }
        }
    }
    o
}

/// The registry's answer for a roleRef it cannot resolve (GetRoleReferenceRules through the
/// storages, not the authorizer's listers).
fn registry_error(e: &RoleRefError) -> ApiError {
    match e {
        RoleRefError::Missing { resource: "role", namespace, .. } if namespace.is_empty() => ApiError::bad_request("Namespace parameter required."),
        RoleRefError::Missing { resource, name, .. } => ApiError::not_found(GROUP, &format!("{resource}s"), name),
        // A plain error: kube-apiserver's 500 of reason Unknown ("").
        RoleRefError::UnsupportedKind(_) => ApiError::new(500, "", e.to_string(), None),
    }
}

/// ConfirmNoEscalation: Ok if what `user` holds in `namespace` covers `rules`, else the message.
pub fn confirm_no_escalation(policy: &Policy<'_>, user: &UserInfo, namespace: &str, rules: &[Rule]) -> Result<(), String> {
    let (grants, errors) = policy.rules_and_ref_errors(user, namespace);
    let owned: Vec<Rule> = grants.iter().map(|g| Rule::from_value(g.rule)).collect();
    let missing = uncovered(&owned, rules);
    if missing.is_empty() {
        return Ok(());
    }
    let mut lines: Vec<String> = compact(missing).iter().map(compact_string).collect();
    lines.sort();
    lines.dedup();
    let mut msg = format!("user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}", Quoted(&user.name), quote_list(&user.groups), lines.join("\n"));
    if !errors.is_empty() {
        // `%v` of a one-element []error holding utilerrors' aggregate (each message once).
        let mut seen: Vec<String> = vec![];
        for m in errors.iter().map(|e| registry_error(e).message) {
            if !seen.contains(&m) {
                seen.push(m);
            }
        }
        let aggregate = if seen.len() == 1 { seen.remove(0) } else { format!("[{}]", seen.join(", ")) };
        msg.push_str(&format!("; resolution errors: [{aggregate}]"));
    }
    Err(msg)
}

/// Covers: the pieces of `servant` (BreakdownRule) no rule of `owner` covers.
pub fn uncovered(owner: &[Rule], servant: &[Rule]) -> Vec<Rule> {
    servant.iter().flat_map(breakdown).filter(|piece| !owner.iter().any(|o| rule_covers(o, piece))).collect()
}

/// BreakdownRule: one rule per group, resource, verb and name (or URL and verb).
fn breakdown(rule: &Rule) -> Vec<Rule> {
    let mut pieces = vec![];
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let piece = Rule { api_groups: vec![group.clone()], resources: vec![resource.clone()], ..Rule::one(verb) };
                if rule.resource_names.is_empty() {
                    pieces.push(piece);
                } else {
                    pieces.extend(rule.resource_names.iter().map(|n| Rule { resource_names: vec![n.clone()], ..piece.clone() }));
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        pieces.extend(rule.verbs.iter().map(|verb| Rule { non_resource_urls: vec![url.clone()], ..Rule::one(verb) }));
    }
    pieces
}

fn has(set: &[String], s: &str) -> bool {
    set.iter().any(|x| x == s)
}

fn has_all(set: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|w| has(set, w))
}

/// resourceCoversAll: `*`, each resource exactly, or a subresource by `*/sub`.
fn resources_cover(set: &[String], wanted: &[String]) -> bool {
    has(set, "*")
        || wanted.iter().all(|r| has(set, r) || r.split_once('/').is_some_and(|(_, sub)| has(set, &format!("*/{sub}"))))
}

/// nonResourceURLCovers: exactly, or a prefix before the owner's trailing `*`s.
fn url_covers(owner: &str, wanted: &str) -> bool {
    owner == wanted || (owner.ends_with('*') && wanted.starts_with(owner.trim_end_matches('*')))
}

/// ruleCovers: whether `owner` covers a piece of BreakdownRule's.
fn rule_covers(owner: &Rule, piece: &Rule) -> bool {
    let verbs = has(&owner.verbs, "*") || has_all(&owner.verbs, &piece.verbs);
    let groups = has(&owner.api_groups, "*") || has_all(&owner.api_groups, &piece.api_groups);
    let resources = resources_cover(&owner.resources, &piece.resources);
    let urls = piece.non_resource_urls.iter().all(|u| owner.non_resource_urls.iter().any(|o| url_covers(o, u)));
    let names = owner.resource_names.is_empty() || (!piece.resource_names.is_empty() && has_all(&owner.resource_names, &piece.resource_names));
    verbs && groups && resources && urls && names
}

/// CompactRules: the pieces of one group, one resource and at most one name merged into one
/// rule of their verbs (in the order met); the others as they are.
fn compact(pieces: Vec<Rule>) -> Vec<Rule> {
    let mut simple: Vec<Rule> = vec![];
    let mut others = vec![];
    for piece in pieces {
        let is_simple = piece.resource_names.len() <= 1 && piece.non_resource_urls.is_empty() && piece.api_groups.len() == 1 && piece.resources.len() == 1;
        if !is_simple {
            others.push(piece);
            continue;
        }
        match simple.iter_mut().find(|s| (&s.api_groups, &s.resources, &s.resource_names) == (&piece.api_groups, &piece.resources, &piece.resource_names)) {
            Some(s) => s.verbs.extend(piece.verbs),
            None => simple.push(piece),
        }
    }
    others.extend(simple);
    others
}

/// rbacv1helpers.CompactString: `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`.
fn compact_string(r: &Rule) -> String {
    let parts: Vec<String> = [("APIGroups", &r.api_groups), ("Resources", &r.resources), ("NonResourceURLs", &r.non_resource_urls), ("ResourceNames", &r.resource_names), ("Verbs", &r.verbs)]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}:{}", quote_list(v)))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rule(groups: &[&str], resources: &[&str], names: &[&str], verbs: &[&str]) -> Value {
        json!({"apiGroups": groups, "resources": resources, "resourceNames": names, "verbs": verbs})
    }

    fn urls(urls: &[&str], verbs: &[&str]) -> Value {
        json!({"nonResourceURLs": urls, "verbs": verbs})
    }

    fn covered(owner: &[Value], servant: &Value) -> bool {
        uncovered(&owner.iter().map(Rule::from_value).collect::<Vec<_>>(), &[Rule::from_value(servant)]).is_empty()
    }

    #[test]
    fn each_piece_of_a_rule_is_covered_by_one_held_rule_as_covers_does() {
        let secrets = |verbs: &[&str]| rule(&[""], &["secrets"], &[], verbs);
        let cases = [
            // verbs: each one held, or `*`.
            (vec![secrets(&["get", "list"])], secrets(&["get"]), true),
            (vec![secrets(&["get", "list"])], secrets(&["delete"]), false),
            (vec![secrets(&["*"])], secrets(&["delete", "escalate"]), true),
            // each piece by one rule, the pieces by different ones.
            (vec![secrets(&["get"]), secrets(&["list"])], secrets(&["get", "list"]), true),
            // groups: exactly, or `*`.
            (vec![rule(&["apps"], &["secrets"], &[], &["get"])], secrets(&["get"]), false),
            (vec![rule(&["*"], &["secrets"], &[], &["get"])], secrets(&["get"]), true),
            // resources: `*` holds subresources too; a resource holds none of its subresources;
            // `*/log` holds every resource's log; `*` is held only by `*`.
            (vec![rule(&[""], &["*"], &[], &["get"])], rule(&[""], &["pods/log"], &[], &["get"]), true),
            (vec![rule(&[""], &["pods"], &[], &["get"])], rule(&[""], &["pods/log"], &[], &["get"]), false),
            (vec![rule(&[""], &["*/log"], &[], &["get"])], rule(&[""], &["pods/log"], &[], &["get"]), true),
            (vec![rule(&[""], &["pods/log"], &[], &["get"])], rule(&[""], &["pods/log"], &[], &["get"]), true),
            (vec![rule(&[""], &["*/log"], &[], &["get"])], rule(&[""], &["pods"], &[], &["get"]), false),
            (vec![rule(&[""], &["secrets", "configmaps"], &[], &["get"])], rule(&[""], &["*"], &[], &["get"]), false),
            // resourceNames: a rule without them holds every name; with them, those names only,
            // and never a rule without.
            (vec![secrets(&["get"])], rule(&[""], &["secrets"], &["pull"], &["get"]), true),
            (vec![rule(&[""], &["secrets"], &["pull", "other"], &["get"])], rule(&[""], &["secrets"], &["pull"], &["get"]), true),
            (vec![rule(&[""], &["secrets"], &["other"], &["get"])], rule(&[""], &["secrets"], &["pull"], &["get"]), false),
            (vec![rule(&[""], &["secrets"], &["pull"], &["get"])], secrets(&["get"]), false),
            // nonResourceURLs: exactly, or a prefix before a trailing `*`; resource rules hold none.
            (vec![urls(&["/healthz"], &["get"])], urls(&["/healthz"], &["get"]), true),
            (vec![urls(&["/healthz"], &["get"])], urls(&["/healthz/ready"], &["get"]), false),
            (vec![urls(&["/apis/*"], &["get"])], urls(&["/apis/rbac/v1"], &["get"]), true),
            (vec![urls(&["/apis/*"], &["get"])], urls(&["/api"], &["get"]), false),
            (vec![urls(&["*"], &["get"])], urls(&["/metrics"], &["get"]), true),
            (vec![urls(&["*"], &["get"])], urls(&["/metrics"], &["post"]), false),
            (vec![rule(&["*"], &["*"], &[], &["*"])], urls(&["/metrics"], &["get"]), false),
        ];
        for (i, (owner, servant, want)) in cases.iter().enumerate() {
            assert_eq!(covered(owner, servant), *want, "case {i}: {owner:?} covering {servant}");
        }
    }

    fn binding(kind: &str, ns: &str, name: &str, role_kind: &str, role: &str, user: &str) -> Value {
        let mut b = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": name},
            "roleRef": {"apiGroup": GROUP, "kind": role_kind, "name": role}, "subjects": [{"kind": "User", "name": user}],
        });
        if !ns.is_empty() {
            b["metadata"]["namespace"] = ns.into();
        }
        b
    }

    fn role(kind: &str, ns: &str, name: &str, rules: Vec<Value>) -> Value {
        let mut r = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "rules": rules});
        if !ns.is_empty() {
            r["metadata"]["namespace"] = ns.into();
        }
        r
    }

    fn alice() -> UserInfo {
        UserInfo { name: "alice".into(), groups: vec!["system:authenticated".into()] }
    }

    /// alice reads Secrets and writes RBAC in team-a; in team-b she writes RBAC only.
    fn objects() -> Vec<Value> {
        let rbac_writer = rule(&[GROUP], &["roles", "rolebindings"], &[], &["create", "update", "patch"]);
        vec![
            role("ClusterRole", "", "secret-reader", vec![rule(&[""], &["secrets"], &[], &["get", "list"])]),
            role("ClusterRole", "", "rbac-writer", vec![rbac_writer]),
            role("Role", "team-a", "reads", vec![rule(&[""], &["secrets"], &["pull"], &["get"])]),
            role("Role", "team-b", "reads", vec![rule(&[""], &["secrets"], &["pull"], &["get"])]),
            binding("RoleBinding", "team-a", "alice-secrets", "ClusterRole", "secret-reader", "alice"),
            binding("RoleBinding", "team-a", "alice-rbac", "ClusterRole", "rbac-writer", "alice"),
            binding("RoleBinding", "team-b", "alice-rbac", "ClusterRole", "rbac-writer", "alice"),
        ]
    }

    fn write<'a>(user: &'a UserInfo, resource: &'a str, namespace: &'a str, name: &'a str, new: &'a Value, old: Option<&'a Value>) -> Write<'a> {
        Write { user, resource, namespace, name, new, old }
    }

    const NOT_HELD: &str = "user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n";

    #[test]
    fn a_role_needs_what_its_writer_holds_where_it_applies_or_escalate() {
        let (user, mut objects) = (alice(), objects());
        let reads = |ns: &str| role("Role", ns, "zundoko-operator-reads", vec![rule(&[""], &["secrets"], &["pull"], &["get"]), rule(&[""], &["configmaps"], &["c"], &["get"])]);
        let (in_a, in_b) = (reads("team-a"), reads("team-b"));
        let configmaps = role("ClusterRole", "", "cm", vec![rule(&[""], &["configmaps"], &[], &["get", "list", "watch"])]);
        objects.push(binding("ClusterRoleBinding", "", "alice-cm", "ClusterRole", "cm", "alice"));
        objects.push(configmaps);
        let policy = Policy::from_objects(&objects);
        // Held in team-a (its Secrets there, ConfigMaps everywhere): written.
        check(&policy, &write(&user, "roles", "team-a", "", &in_a, None)).unwrap();
        // Not in team-b: the Secret's piece only, as kube-apiserver words it.
        let e = check(&policy, &write(&user, "roles", "team-b", "", &in_b, None)).unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
        let secret = "{APIGroups:[\"\"], Resources:[\"secrets\"], ResourceNames:[\"pull\"], Verbs:[\"get\"]}";
        assert_eq!(e.message, format!("roles.rbac.authorization.k8s.io \"zundoko-operator-reads\" is forbidden: {NOT_HELD}{secret}"));
        // A ClusterRole counts ClusterRoleBindings only: team-a's Secrets are not held cluster-wide.
        let cluster = role("ClusterRole", "", "reads", in_a["rules"].as_array().unwrap().clone());
        let e = check(&policy, &write(&user, "clusterroles", "", "", &cluster, None)).unwrap_err();
        assert_eq!(e.message, format!("clusterroles.rbac.authorization.k8s.io \"reads\" is forbidden: {NOT_HELD}{secret}"));
        // system:masters is never checked (EscalationAllowed; the authorizer lets it escalate too).
        let master = UserInfo { name: "root".into(), groups: vec![MASTERS.into()] };
        check(&Policy::default(), &write(&master, "clusterroles", "", "", &cluster, None)).unwrap();
        // `escalate` in team-b, limited to one name: an update of that Role, not a create (it names none).
        objects.push(role("Role", "team-b", "escalate", vec![rule(&[GROUP], &["roles"], &["zundoko-operator-reads"], &["escalate"])]));
        objects.push(binding("RoleBinding", "team-b", "alice-escalate", "Role", "escalate", "alice"));
        let policy = Policy::from_objects(&objects);
        check(&policy, &write(&user, "roles", "team-b", "zundoko-operator-reads", &in_b, Some(&in_a))).unwrap();
        assert_eq!(check(&policy, &write(&user, "roles", "team-b", "", &in_b, None)).unwrap_err().code, 403);
    }

    #[test]
    fn a_binding_needs_bind_on_its_role_or_the_roles_rules() {
        let (user, mut objects) = (alice(), objects());
        let rb = |ns: &str, kind: &str, role: &str| binding("RoleBinding", ns, "b", kind, role, "operator");
        let policy = Policy::from_objects(&objects);
        check(&policy, &write(&user, "rolebindings", "team-a", "", &rb("team-a", "Role", "reads"), None)).unwrap();
        let e = check(&policy, &write(&user, "rolebindings", "team-b", "", &rb("team-b", "Role", "reads"), None)).unwrap_err();
        let secret = "{APIGroups:[\"\"], Resources:[\"secrets\"], ResourceNames:[\"pull\"], Verbs:[\"get\"]}";
        assert_eq!(e.message, format!("rolebindings.rbac.authorization.k8s.io \"b\" is forbidden: {NOT_HELD}{secret}"));
        // A ClusterRoleBinding counts ClusterRoleBindings only.
        let crb = binding("ClusterRoleBinding", "", "crb", "ClusterRole", "secret-reader", "operator");
        let e = check(&policy, &write(&user, "clusterrolebindings", "", "", &crb, None)).unwrap_err();
        assert!(e.message.starts_with(&format!("clusterrolebindings.rbac.authorization.k8s.io \"crb\" is forbidden: {NOT_HELD}")), "{}", e.message);
        // A role that is not there: the registry's 404, its resource plural.
        let e = check(&policy, &write(&user, "rolebindings", "team-a", "", &rb("team-a", "Role", "ghost"), None)).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (404, "roles.rbac.authorization.k8s.io \"ghost\" not found"));
        // `bind` on the Role by name, in team-b: that binding, not one of cluster-admin.
        objects.push(role("Role", "team-b", "binder", vec![rule(&[GROUP], &["roles"], &["reads"], &["bind"])]));
        objects.push(binding("RoleBinding", "team-b", "alice-bind", "Role", "binder", "alice"));
        let policy = Policy::from_objects(&objects);
        check(&policy, &write(&user, "rolebindings", "team-b", "", &rb("team-b", "Role", "reads"), None)).unwrap();
        let e = check(&policy, &write(&user, "rolebindings", "team-b", "", &rb("team-b", "ClusterRole", "secret-reader"), None)).unwrap_err();
        assert_eq!(e.code, 403);
    }

    #[test]
    fn missing_roles_of_the_writers_bindings_are_named_after_the_pieces() {
        let mut objects = objects();
        objects.push(binding("RoleBinding", "team-b", "alice-ghost", "Role", "ghost", "alice"));
        let policy = Policy::from_objects(&objects);
        let servant = [rule(&[""], &["secrets"], &[], &["get", "list", "delete"]), rule(&[""], &["configmaps"], &["b", "a"], &["get"]), urls(&["/metrics"], &["get"])];
        let servant: Vec<Rule> = servant.iter().map(Rule::from_value).collect();
        let e = confirm_no_escalation(&policy, &alice(), "team-b", &servant).unwrap_err();
        let lines = [
            "{APIGroups:[\"\"], Resources:[\"configmaps\"], ResourceNames:[\"a\"], Verbs:[\"get\"]}",
            "{APIGroups:[\"\"], Resources:[\"configmaps\"], ResourceNames:[\"b\"], Verbs:[\"get\"]}",
            "{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\" \"delete\"]}",
            "{NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}",
        ];
        assert_eq!(e, format!("{NOT_HELD}{}; resolution errors: [roles.rbac.authorization.k8s.io \"ghost\" not found]", lines.join("\n")));
    }

    #[test]
    fn an_aggregation_rule_needs_everything_and_an_update_of_gc_fields_only_is_not_checked() {
        let user = alice();
        // Every resource but not every verb (`*` would be `escalate` too), and no URL.
        let mut objects = vec![
            role("ClusterRole", "", "writer", vec![rule(&["*"], &["*"], &[], &["get", "create", "update"])]),
            binding("ClusterRoleBinding", "", "alice-writer", "ClusterRole", "writer", "alice"),
        ];
        let mut aggregated = role("ClusterRole", "", "agg", vec![]);
        aggregated["aggregationRule"] = json!({"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]});
        let plain = role("ClusterRole", "", "agg", vec![]);
        let policy = Policy::from_objects(&objects);
        let e = check(&policy, &write(&user, "clusterroles", "", "", &aggregated, None)).unwrap_err();
        assert_eq!(e.message, "clusterroles.rbac.authorization.k8s.io \"agg\" is forbidden: must have cluster-admin privileges to use the aggregationRule");
        // Dropping it is changing it too.
        assert_eq!(check(&policy, &write(&user, "clusterroles", "", "agg", &plain, Some(&aggregated))).unwrap_err().code, 403);
        check(&policy, &write(&user, "clusterroles", "", "", &plain, None)).unwrap();
        objects[0]["rules"] = json!([rule(&["*"], &["*"], &[], &["*"]), urls(&["*"], &["*"])]);
        check(&Policy::from_objects(&objects), &write(&user, "clusterroles", "", "", &aggregated, None)).unwrap();

        // Someone else's Role alice holds nothing of: the garbage collector's fields only pass.
        let policy = Policy::default();
        let old = role("Role", "team-a", "r", vec![rule(&[""], &["secrets"], &[], &["get"])]);
        let mut gc = old.clone();
        gc["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "1"}]);
        gc["metadata"]["finalizers"] = json!(["example.com/keep"]);
        gc["metadata"]["labels"] = json!({});
        check(&policy, &write(&user, "roles", "team-a", "r", &gc, Some(&old))).unwrap();
        gc["metadata"]["labels"] = json!({"x": "y"});
        assert_eq!(check(&policy, &write(&user, "roles", "team-a", "r", &gc, Some(&old))).unwrap_err().code, 403);
        assert_eq!(check(&policy, &write(&user, "roles", "team-a", "", &old, None)).unwrap_err().code, 403, "a create is always checked");
    }

    /// kube-apiserver compares the decoded objects: a field the kind does not have (at the top,
    /// in metadata, in a rule), a zero value and a defaulted apiGroup are no change; a rule, a
    /// label, a pointer to an empty aggregationRule and a subject are.
    #[test]
    fn an_update_of_gc_fields_only_is_compared_on_the_kinds_known_fields() {
        let (user, policy) = (alice(), Policy::default());
        let gc = |o: &Value| {
            let mut o = o.clone();
            o["metadata"]["finalizers"] = json!(["example.com/keep"]);
            o
        };
        let old = role("ClusterRole", "", "r", vec![rule(&[""], &["secrets"], &[], &["get"])]);
        let mut unknown = gc(&old);
        unknown["unknownField"] = json!({"a": 1});
        unknown["metadata"]["unknownMeta"] = json!("x");
        unknown["metadata"]["namespace"] = json!("");
        unknown["rules"][0]["unknownRuleField"] = json!(true);
        unknown["aggregationRule"] = Value::Null;
        check(&policy, &write(&user, "clusterroles", "", "r", &unknown, Some(&old))).unwrap();
        let mut aggregating = gc(&old);
        aggregating["aggregationRule"] = json!({});
        let mut more_rules = gc(&old);
        more_rules["rules"][0]["verbs"] = json!(["get", "list"]);
        for changed in [aggregating, more_rules] {
            assert_eq!(check(&policy, &write(&user, "clusterroles", "", "r", &changed, Some(&old))).unwrap_err().code, 403, "{changed}");
        }

        let old = binding("RoleBinding", "team-a", "b", "ClusterRole", "secret-reader", "bob");
        let mut defaulted = gc(&old);
        defaulted["subjects"][0]["unknownSubjectField"] = json!(1);
        defaulted["roleRef"]["apiGroup"] = json!("");
        // The stored subject has no apiGroup (this server stores what it was sent); kube's has it.
        defaulted["subjects"][0]["apiGroup"] = GROUP.into();
        check(&policy, &write(&user, "rolebindings", "team-a", "b", &defaulted, Some(&old))).unwrap();
        let mut rebound = gc(&old);
        rebound["subjects"][0]["name"] = json!("alice");
        // Checked: the role it binds is not even there.
        assert_eq!(check(&policy, &write(&user, "rolebindings", "team-a", "b", &rebound, Some(&old))).unwrap_err().code, 404);
    }
}
