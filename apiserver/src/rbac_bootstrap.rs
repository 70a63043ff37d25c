//! What a cluster's RBAC starts with and keeps: kube-apiserver's bootstrap roles (with
//! `--authorization-mode RBAC`) and kube-controller-manager's clusterrole-aggregation
//! controller (always, as on every cluster).
//!
//! The bootstrap roles are 1.33's `cluster-admin`, `admin`, `edit`, `view` (aggregated by the
//! `rbac.authorization.k8s.io/aggregate-to-*` labels: `view` aggregates to `edit`, `edit` to
//! `admin`), `system:aggregate-to-{admin,edit,view}`, `system:discovery`, `system:basic-user`
//! (the self access reviews, for every authenticated user) and `system:public-info-viewer`,
//! with their bindings, and the unbound `system:auth-delegator` (SubjectAccessReviews). The `system:aggregate-to-*` roles carry
//! their rules for the core, authorization.k8s.io and rbac.authorization.k8s.io groups only: the
//! apps, batch, autoscaling, policy, networking and discovery groups' rules are left out (this
//! server serves none of those groups).

use serde_json::{Value, json};

use crate::rbac::GROUP;
use crate::registry::GroupResource;
use crate::store::{State, meta_str};

const READ: [&str; 3] = ["get", "list", "watch"];
const WRITE: [&str; 5] = ["create", "delete", "deletecollection", "patch", "update"];
const READ_WRITE: [&str; 8] = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
const AGGREGATE: &str = "rbac.authorization.k8s.io/aggregate-to-";

pub fn cluster_roles_gr() -> GroupResource {
    GroupResource::new(GROUP, "clusterroles")
}

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources})
}

fn urls(verbs: &[&str], urls: &[&str]) -> Value {
    json!({"verbs": verbs, "nonResourceURLs": urls})
}

fn meta(name: &str, labels: &[&str]) -> Value {
    let mut l = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    for to in labels {
        l[format!("{AGGREGATE}{to}")] = "true".into();
    }
    json!({"name": name, "labels": l, "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}})
}

fn cluster_role(name: &str, labels: &[&str], rules: Vec<Value>) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(name, labels), "rules": rules})
}

fn aggregated(name: &str, labels: &[&str], selects: &str) -> Value {
    let mut r = cluster_role(name, labels, vec![]);
    r["aggregationRule"] = json!({"clusterRoleSelectors": [{"matchLabels": {format!("{AGGREGATE}{selects}"): "true"}}]});
    r
}

fn binding(role: &str, subjects: &[(&str, &str)]) -> Value {
    let subjects: Vec<Value> = subjects.iter().map(|(kind, name)| json!({"kind": kind, "apiGroup": GROUP, "name": name})).collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta(role, &[]),
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role}, "subjects": subjects,
    })
}

/// plugin/pkg/auth/authorizer/rbac/bootstrappolicy's ClusterRoles (the part described above).
fn cluster_roles() -> Vec<Value> {
    let core = [""];
    vec![
        cluster_role("cluster-admin", &[], vec![rule(&["*"], &["*"], &["*"]), urls(&["*"], &["*"])]),
        aggregated("admin", &[], "admin"),
        aggregated("edit", &["admin"], "edit"),
        aggregated("view", &["edit"], "view"),
        cluster_role("system:aggregate-to-admin", &["admin"], vec![
            rule(&["create"], &["authorization.k8s.io"], &["localsubjectaccessreviews"]),
            rule(&READ_WRITE, &[GROUP], &["rolebindings", "roles"]),
        ]),
        cluster_role("system:aggregate-to-edit", &["edit"], vec![
            rule(&READ, &core, &["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"]),
            rule(&["impersonate"], &core, &["serviceaccounts"]),
            rule(&WRITE, &core, &["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"]),
            rule(&["create"], &core, &["pods/eviction"]),
            rule(&WRITE, &core, &["configmaps", "events", "persistentvolumeclaims", "replicationcontrollers", "replicationcontrollers/scale", "secrets", "serviceaccounts", "services", "services/proxy"]),
            rule(&["create"], &core, &["serviceaccounts/token"]),
        ]),
        cluster_role("system:aggregate-to-view", &["view"], vec![
            rule(&READ, &core, &["configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services", "services/status"]),
            rule(&READ, &core, &["bindings", "events", "limitranges", "namespaces/status", "pods/log", "pods/status", "replicationcontrollers/status", "resourcequotas", "resourcequotas/status"]),
            rule(&READ, &core, &["namespaces"]),
        ]),
        cluster_role("system:discovery", &[], vec![urls(&["get"], &["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"])]),
        cluster_role("system:basic-user", &[], vec![
            rule(&["create"], &["authentication.k8s.io"], &["selfsubjectreviews"]),
            rule(&["create"], &["authorization.k8s.io"], &["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
        ]),
        cluster_role("system:public-info-viewer", &[], vec![urls(&["get"], &["/healthz", "/livez", "/readyz", "/version", "/version/"])]),
        // Unbound: what a delegating authorizer (a webhook, an extension server) is bound to.
        cluster_role("system:auth-delegator", &[], vec![
            rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
            rule(&["create"], &["authorization.k8s.io"], &["subjectaccessreviews"]),
        ]),
    ]
}

/// Stores the bootstrap roles and bindings, aggregated.
pub fn bootstrap(st: &mut State, controller_manager: bool) {
    let now = crate::util::now_rfc3339();
    let stamp = |mut o: Value| {
        o["metadata"]["uid"] = crate::util::new_uid().into();
        o["metadata"]["creationTimestamp"] = now.clone().into();
        o
    };
    for r in cluster_roles() {
        st.put(&cluster_roles_gr(), stamp(r));
    }
    let bindings = [
        binding("cluster-admin", &[("Group", "system:masters")]),
        binding("system:discovery", &[("Group", "system:authenticated")]),
        binding("system:basic-user", &[("Group", "system:authenticated")]),
        binding("system:public-info-viewer", &[("Group", "system:authenticated"), ("Group", "system:unauthenticated")]),
    ];
    for b in bindings {
        st.put(&GroupResource::new(GROUP, "clusterrolebindings"), stamp(b));
    }
    // view into edit, edit into admin: a pass or two, kube-controller-manager's (without it the
    // aggregated roles stay as bootstrapped, with no rules, as on kube-apiserver alone).
    if controller_manager {
        for _ in 0..10 {
            if !aggregate(st) {
                break;
            }
        }
    }
}

/// metav1.LabelSelector (matchLabels, matchExpressions) against an object's labels.
fn selects(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let labels_ok = selector.get("matchLabels").and_then(Value::as_object).into_iter().flatten().all(|(k, v)| label(k) == v.as_str());
    let exprs_ok = selector.get("matchExpressions").and_then(Value::as_array).into_iter().flatten().all(|e| {
        let key = e["key"].as_str().unwrap_or("");
        let values: Vec<&str> = e["values"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        match e["operator"].as_str().unwrap_or("") {
            "In" => label(key).is_some_and(|v| values.contains(&v)),
            "NotIn" => label(key).is_none_or(|v| !values.contains(&v)),
            "Exists" => label(key).is_some(),
            "DoesNotExist" => label(key).is_none(),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

/// One pass of the clusterrole-aggregation controller: every ClusterRole with an
/// aggregationRule gets, as its rules, the rules of the ClusterRoles its selectors select
/// (each selector's in name order, itself left out, each rule once). Aggregating into an
/// aggregated role takes the rules written into it, so `view`'s reach `admin` over passes, as
/// on a cluster. Whether it changed anything.
pub fn aggregate(st: &mut State) -> bool {
    let gr = cluster_roles_gr();
    let Some(def) = st.registry.by_gr(&gr).cloned() else { return false };
    let aggregated: Vec<String> = st.list(&gr, None).filter(|r| r.get("aggregationRule").is_some_and(|a| !a.is_null())).map(|r| meta_str(r, "name").to_string()).collect();
    let mut changed = false;
    // Each role from the roles as they are now, the ones written before it in this pass
    // included (as the controller syncs one key at a time from its cache): two aggregated
    // roles selecting each other settle instead of trading their rules for ever.
    for name in aggregated {
        let Some(role) = st.get(&gr, "", &name).cloned() else { continue };
        let mut rules: Vec<Value> = vec![];
        for selector in role.pointer("/aggregationRule/clusterRoleSelectors").and_then(Value::as_array).into_iter().flatten() {
            let mut chosen: Vec<&Value> = st.list(&gr, None).filter(|r| meta_str(r, "name") != name && selects(selector, &r["metadata"]["labels"])).collect();
            chosen.sort_by_key(|r| meta_str(r, "name"));
            for r in chosen.into_iter().flat_map(|r| r["rules"].as_array().into_iter().flatten()) {
                if !rules.contains(r) {
                    rules.push(r.clone());
                }
            }
        }
        let current = role.get("rules").and_then(Value::as_array).cloned().unwrap_or_default();
        if current != rules {
            let mut updated = role;
            updated["rules"] = Value::Array(rules);
            crate::ops::controller_update(st, &def, updated);
            changed = true;
        }
    }
    changed
}
