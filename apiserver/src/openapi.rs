//! A minimal OpenAPI v3 discovery (`/openapi/v3` and `/openapi/v3/api/v1`,
//! `/openapi/v3/apis/G/V`). kubectl reads it to learn that the server validates fields
//! itself (`fieldValidation` on PATCH): without it kubectl falls back to client-side
//! validation from `/openapi/v2`, which is not served. Paths carry the verbs, the
//! `x-kubernetes-group-version-kind` extension and the query parameters; custom resources
//! carry their schema under components.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use serde_json::{Map, Value, json};

use crate::registry::{ResourceDef, Registry};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

fn hash_of(v: &Value) -> String {
    let mut h = DefaultHasher::new();
    v.to_string().hash(&mut h);
    format!("{:016X}", h.finish())
}

/// `/openapi/v3`: one entry per group/version.
pub fn root(reg: &Registry) -> Value {
    let mut paths = Map::new();
    for (g, vs) in reg.groups() {
        for v in vs {
            if let Some(doc) = group_version(reg, &g, &v) {
                let p = gv_path(&g, &v);
                paths.insert(p.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={}", hash_of(&doc))}));
            }
        }
    }
    json!({"paths": paths})
}

fn param(name: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}})
}

fn op(def: &ResourceDef, version: &str, action: &str, params: &[&str], schema_ref: &str) -> Value {
    let body = json!({"content": {"application/json": {"schema": {"$ref": schema_ref}}}});
    let mut o = json!({
        "operationId": format!("{action}{}", def.kind),
        "parameters": params.iter().map(|p| param(p)).collect::<Vec<_>>(),
        "responses": {"200": body.clone()},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": def.group, "version": version, "kind": def.kind},
    });
    if ["post", "put", "patch"].contains(&action) {
        o["requestBody"] = body;
    }
    o
}

/// The document of one group/version.
pub fn group_version(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for def in reg.defs.values().filter(|d| d.group == group) {
        let Some(v) = def.version(version) else { continue };
        let name = format!("{}.{}.{}", if group.is_empty() { "io.k8s.api.core" } else { group }, version, def.kind);
        let schema_ref = format!("#/components/schemas/{name}");
        let mut schema = v.schema.clone().unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
        schema["x-kubernetes-group-version-kind"] = json!([{"group": group, "version": version, "kind": def.kind}]);
        schemas.insert(name, schema);
        let base = if def.namespaced {
            format!("/{}/namespaces/{{namespace}}/{}", gv_path(group, version), def.plural)
        } else {
            format!("/{}/{}", gv_path(group, version), def.plural)
        };
        let write = ["dryRun", "fieldManager", "fieldValidation", "pretty"];
        if def.verbs == ["create"] {
            // The access reviews: a POST, nothing to read back.
            paths.insert(base, json!({"post": op(def, version, "post", &write, &schema_ref)}));
            continue;
        }
        paths.insert(
            base.clone(),
            json!({
                "get": op(def, version, "list", &["labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "watch"], &schema_ref),
                "post": op(def, version, "post", &write, &schema_ref),
                "delete": op(def, version, "deletecollection", &["labelSelector", "fieldSelector"], &schema_ref),
            }),
        );
        let item = json!({
            "get": op(def, version, "get", &["resourceVersion"], &schema_ref),
            "put": op(def, version, "put", &write, &schema_ref),
            "patch": op(def, version, "patch", &["dryRun", "fieldManager", "fieldValidation", "force", "pretty"], &schema_ref),
            "delete": op(def, version, "delete", &["dryRun", "gracePeriodSeconds", "propagationPolicy"], &schema_ref),
        });
        paths.insert(format!("{base}/{{name}}"), item.clone());
        if v.status_subresource {
            paths.insert(format!("{base}/{{name}}/status"), item);
        }
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}
