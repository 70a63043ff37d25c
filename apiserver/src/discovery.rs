//! Legacy discovery documents (`/api`, `/api/v1`, `/apis`, `/apis/G`, `/apis/G/V`) and
//! `/version`. Aggregated discovery is not served: clients that ask for it get the legacy
//! documents with `Content-Type: application/json` and fall back, as with older servers.

use serde_json::{Value, json};

use crate::registry::Registry;

pub fn api_versions(addr: &str) -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}]})
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions.iter().map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v})).collect();
    json!({"name": name, "versions": vs, "preferredVersion": vs[0]})
}

pub fn api_group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg.groups().iter().filter(|(g, _)| !g.is_empty()).map(|(g, vs)| group_doc(g, vs)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn api_group(reg: &Registry, group: &str) -> Option<Value> {
    let groups = reg.groups();
    let vs = groups.get(group).filter(|_| !group.is_empty())?;
    let mut d = group_doc(group, vs);
    d["kind"] = "APIGroup".into();
    d["apiVersion"] = "v1".into();
    Some(d)
}

pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut resources = vec![];
    for d in reg.defs.values().filter(|d| d.group == group) {
        let Some(v) = d.version(version) else { continue };
        let mut r = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": d.verbs,
        });
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            r["categories"] = json!(d.categories);
        }
        resources.push(r);
        if v.status_subresource {
            resources.push(json!({"name": format!("{}/status", d.plural), "singularName": "", "namespaced": d.namespaced, "kind": d.kind, "verbs": ["get", "patch", "update"]}));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}))
}

pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "emulationMajor": "1",
        "emulationMinor": "33",
        "gitVersion": "v1.33.0-zundoko",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T00:00:00Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}
