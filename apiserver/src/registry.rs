//! The resource registry: which group/version/resources are served, how, and with what
//! schema. Built-in resources are fixed; custom resources come from CRDs.

use std::collections::BTreeMap;

use serde_json::{Value, json};

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: &str, resource: &str) -> Self {
        GroupResource { group: group.into(), resource: resource.into() }
    }
}

#[derive(Debug, Clone)]
pub struct VersionDef {
    pub name: String,
    pub schema: Option<Value>,
    pub status_subresource: bool,
    pub printer_columns: Vec<Value>,
    pub storage: bool,
}

#[derive(Debug, Clone)]
pub struct ResourceDef {
    pub group: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub list_kind: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    pub versions: Vec<VersionDef>,
    /// Typed built-in (items of lists are encoded without kind/apiVersion).
    pub builtin: bool,
    /// Where the objects live (events.k8s.io/v1 events are core/v1 events).
    pub storage: GroupResource,
    pub unconditional_update: bool,
    pub create_on_update: bool,
    pub track_generation: bool,
    pub return_deleted_object: bool,
    pub verbs: Vec<&'static str>,
}

pub const ALL_VERBS: [&str; 8] = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

impl ResourceDef {
    pub fn gr(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.plural)
    }
    pub fn version(&self, v: &str) -> Option<&VersionDef> {
        self.versions.iter().find(|x| x.name == v)
    }
    pub fn api_version(&self, v: &str) -> String {
        if self.group.is_empty() { v.to_string() } else { format!("{}/{}", self.group, v) }
    }
    pub fn is_custom(&self) -> bool {
        !self.builtin
    }
}

fn builtin(
    group: &str,
    version: &str,
    plural: &str,
    kind: &str,
    short: &[&str],
    namespaced: bool,
    status: bool,
) -> ResourceDef {
    ResourceDef {
        group: group.into(),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        kind: kind.into(),
        list_kind: format!("{kind}List"),
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: vec![],
        namespaced,
        versions: vec![VersionDef { name: version.into(), schema: None, status_subresource: status, printer_columns: vec![], storage: true }],
        builtin: true,
        storage: GroupResource::new(group, plural),
        unconditional_update: true,
        create_on_update: false,
        track_generation: false,
        return_deleted_object: false,
        verbs: ALL_VERBS.to_vec(),
    }
}

/// Orders Kubernetes version names the way discovery does (v1 > v1beta2 > v1beta1 > v1alpha1 > other).
pub fn version_priority(v: &str) -> (u8, u64, u64, std::cmp::Reverse<String>) {
    let parse = || -> Option<(u8, u64, u64)> {
        let rest = v.strip_prefix('v')?;
        let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let major: u64 = rest[..end].parse().ok()?;
        let tail = &rest[end..];
        if tail.is_empty() {
            return Some((3, major, 0));
        }
        for (p, rank) in [("beta", 2u8), ("alpha", 1u8)] {
            if let Some(n) = tail.strip_prefix(p) {
                let minor = if n.is_empty() { 0 } else { n.parse().ok()? };
                return Some((rank, major, minor));
            }
        }
        None
    };
    match parse() {
        Some((r, a, b)) => (r, a, b, std::cmp::Reverse(String::new())),
        None => (0, 0, 0, std::cmp::Reverse(v.to_string())),
    }
}

#[derive(Debug, Clone, Default)]
pub struct Registry {
    pub defs: BTreeMap<GroupResource, ResourceDef>,
}

impl Registry {
    pub fn with_builtins() -> Self {
        let mut r = Registry::default();
        let mut ns = builtin("", "v1", "namespaces", "Namespace", &["ns"], false, true);
        ns.return_deleted_object = true;
        ns.verbs = vec!["create", "delete", "get", "list", "patch", "update", "watch"];
        r.add(ns);
        r.add(builtin("", "v1", "configmaps", "ConfigMap", &["cm"], true, false));
        r.add(builtin("", "v1", "secrets", "Secret", &[], true, false));
        let mut ev = builtin("", "v1", "events", "Event", &["ev"], true, false);
        ev.create_on_update = true;
        r.add(ev);
        let mut ev2 = builtin("events.k8s.io", "v1", "events", "Event", &["ev"], true, false);
        ev2.storage = GroupResource::new("", "events");
        ev2.create_on_update = true;
        r.add(ev2);
        r.add(builtin("coordination.k8s.io", "v1", "leases", "Lease", &[], true, false));
        // Served in every mode (a manifest's roles apply as on a cluster); enforced only with
        // `--authorization-mode RBAC` (rbac.rs).
        r.add(builtin("rbac.authorization.k8s.io", "v1", "roles", "Role", &[], true, false));
        r.add(builtin("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", &[], true, false));
        r.add(builtin("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", &[], false, false));
        r.add(builtin("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", &[], false, false));
        // authorization.k8s.io/v1's reviews: create only, nothing stored (ops/review.rs).
        for (plural, kind, namespaced) in [
            ("localsubjectaccessreviews", "LocalSubjectAccessReview", true),
            ("selfsubjectaccessreviews", "SelfSubjectAccessReview", false),
            ("selfsubjectrulesreviews", "SelfSubjectRulesReview", false),
            ("subjectaccessreviews", "SubjectAccessReview", false),
        ] {
            let mut review = builtin("authorization.k8s.io", "v1", plural, kind, &[], namespaced, false);
            review.verbs = vec!["create"];
            r.add(review);
        }
        let mut crd = builtin(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            &["crd", "crds"],
            false,
            true,
        );
        crd.track_generation = true;
        crd.return_deleted_object = true;
        crd.categories = vec!["api-extensions".into()];
        r.add(crd);
        r
    }

    pub fn add(&mut self, def: ResourceDef) {
        self.defs.insert(def.gr(), def);
    }

    pub fn remove(&mut self, gr: &GroupResource) {
        self.defs.remove(gr);
    }

    pub fn get(&self, group: &str, version: &str, resource: &str) -> Option<&ResourceDef> {
        let d = self.defs.get(&GroupResource::new(group, resource))?;
        d.version(version)?;
        Some(d)
    }

    pub fn by_gr(&self, gr: &GroupResource) -> Option<&ResourceDef> {
        self.defs.get(gr)
    }

    /// Groups with their versions, preferred first.
    pub fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for d in self.defs.values() {
            let e = out.entry(d.group.clone()).or_default();
            for v in &d.versions {
                if !e.contains(&v.name) {
                    e.push(v.name.clone());
                }
            }
        }
        for vs in out.values_mut() {
            vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        }
        out
    }
}

fn str_list(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default()
}

/// The resource a CRD object defines (only served versions).
pub fn def_from_crd(crd: &Value) -> Option<ResourceDef> {
    let spec = crd.get("spec")?;
    let group = spec.get("group")?.as_str()?.to_string();
    let names = spec.get("names")?;
    let plural = names.get("plural")?.as_str()?.to_string();
    let kind = names.get("kind")?.as_str()?.to_string();
    let singular = names.get("singular").and_then(Value::as_str).filter(|s| !s.is_empty()).map(String::from).unwrap_or_else(|| kind.to_lowercase());
    let list_kind = names.get("listKind").and_then(Value::as_str).filter(|s| !s.is_empty()).map(String::from).unwrap_or_else(|| format!("{kind}List"));
    let namespaced = spec.get("scope").and_then(Value::as_str) != Some("Cluster");
    let mut versions = vec![];
    for v in spec.get("versions")?.as_array()? {
        if v.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        versions.push(VersionDef {
            name: v.get("name")?.as_str()?.to_string(),
            schema: v.pointer("/schema/openAPIV3Schema").cloned(),
            status_subresource: v.pointer("/subresources/status").is_some(),
            printer_columns: v.get("additionalPrinterColumns").and_then(Value::as_array).cloned().unwrap_or_default(),
            storage: v.get("storage").and_then(Value::as_bool).unwrap_or(false),
        });
    }
    if versions.is_empty() {
        return None;
    }
    Some(ResourceDef {
        storage: GroupResource::new(&group, &plural),
        group,
        plural,
        singular,
        kind,
        list_kind,
        short_names: str_list(&names["shortNames"]),
        categories: str_list(&names["categories"]),
        namespaced,
        versions,
        builtin: false,
        unconditional_update: false,
        create_on_update: false,
        track_generation: true,
        return_deleted_object: false,
        verbs: ALL_VERBS.to_vec(),
    })
}

/// The status kube-apiserver's CRD controllers give an accepted CRD.
pub fn crd_status(crd: &Value, now: &str) -> Value {
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let mut accepted = names.clone();
    if accepted.get("singular").is_none()
        && let Some(k) = names.get("kind").and_then(Value::as_str) {
            accepted["singular"] = k.to_lowercase().into();
        }
    if accepted.get("listKind").is_none()
        && let Some(k) = names.get("kind").and_then(Value::as_str) {
            accepted["listKind"] = format!("{k}List").into();
        }
    let storage: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| vs.iter().filter(|v| v["storage"] == json!(true)).map(|v| v["name"].clone()).collect())
        .unwrap_or_default();
    let mut stored = crd.pointer("/status/storedVersions").and_then(Value::as_array).cloned().unwrap_or_default();
    for s in storage {
        if !stored.contains(&s) {
            stored.push(s);
        }
    }
    let prev = crd.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let cond = |t: &str, reason: &str, msg: &str| {
        let since = prev
            .iter()
            .find(|c| c["type"] == t && c["status"] == "True")
            .and_then(|c| c.get("lastTransitionTime").cloned())
            .unwrap_or_else(|| now.into());
        json!({"type": t, "status": "True", "lastTransitionTime": since, "reason": reason, "message": msg})
    };
    json!({
        "conditions": [
            cond("NamesAccepted", "NoConflicts", "no conflicts found"),
            cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "acceptedNames": accepted,
        "storedVersions": stored,
    })
}
