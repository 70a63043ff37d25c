//! Patches: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge patch for
//! built-in types (treated as a merge patch: none of the served built-ins has lists that
//! strategic merge would key), and server-side apply.
//!
//! Field ownership is kept in `metadata.managedFields` (`FieldsV1`) as kube-apiserver does:
//! an Apply manager owns the fields of its last applied configuration; a create, update or
//! patch gives its manager (`fieldManager`, else the User-Agent up to the first `/`,
//! operation Update) the fields it changed and takes them from everyone else. Applying
//! merges the applied configuration into the live object (maps recursively,
//! `x-kubernetes-list-type: map` lists by key, `set` lists by value, other lists
//! atomically), removes fields the manager applied before but no longer applies unless
//! another manager owns them, and reports a conflict when a field owned by another manager
//! would change and `force` is not set. Simplification: lists of built-in types are atomic
//! except `metadata.finalizers` (set) and `metadata.ownerReferences` (map by uid).

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::status::{ApiError, ApiResult};

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            let t = target.as_object_mut().unwrap();
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// RFC 6902 JSON patch. Malformed patches are 400; failing operations are 422 as in kube-apiserver.
pub fn json_patch(target: &mut Value, body: &[u8]) -> ApiResult<()> {
    let mut ops: Value = serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    // As in evanphx/json-patch (kube-apiserver's), testing a missing path against null
    // succeeds (kube-runtime's finalizer helper relies on it).
    if let Some(list) = ops.as_array_mut() {
        list.retain(|op| {
            !(op["op"] == "test"
                && op.get("value").is_some_and(Value::is_null)
                && op["path"].as_str().is_some_and(|p| target.pointer(p).is_none()))
        });
    }
    let p: json_patch::Patch = serde_json::from_value(ops).map_err(|e| ApiError::bad_request(e.to_string()))?;
    json_patch::patch(target, &p).map_err(|e| ApiError::new(422, "Invalid", e.to_string(), None))
}

/// One field path, as FieldsV1 keys ("f:spec", "k:{\"uid\":\"..\"}", "v:\"x\"").
pub type FieldPath = Vec<String>;

#[derive(Clone, Copy)]
enum ListType<'a> {
    Atomic,
    Set,
    Map(&'a [Value]),
}

/// Schema of a child, when the schema is known.
fn sub_schema<'a>(schema: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    let s = schema?;
    s.get("properties").and_then(|p| p.get(key)).or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
}

fn list_type<'a>(schema: Option<&'a Value>, path: &[&str]) -> ListType<'a> {
    match path {
        ["metadata", "finalizers"] => return ListType::Set,
        ["metadata", "ownerReferences"] => {
            static KEYS: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
            return ListType::Map(KEYS.get_or_init(|| vec![json!("uid")]));
        }
        _ => {}
    }
    let Some(s) = schema else { return ListType::Atomic };
    match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => ListType::Set,
        Some("map") => match s.get("x-kubernetes-list-map-keys").and_then(Value::as_array) {
            Some(keys) => ListType::Map(keys.as_slice()),
            None => ListType::Atomic,
        },
        _ => ListType::Atomic,
    }
}

fn item_key(item: &Value, keys: &[Value]) -> String {
    let mut m = Map::new();
    for k in keys.iter().filter_map(Value::as_str) {
        if let Some(v) = item.get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    format!("k:{}", Value::Object(m))
}

const IGNORED_META: [&str; 10] = [
    "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink", "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// The leaf fields an (applied) object sets.
pub fn field_set(obj: &Value, schema: Option<&Value>) -> BTreeSet<FieldPath> {
    let mut out = BTreeSet::new();
    let mut path = vec![];
    if let Some(m) = obj.as_object() {
        for (k, v) in m {
            if k == "apiVersion" || k == "kind" {
                continue;
            }
            if k == "metadata" {
                if let Some(mm) = v.as_object() {
                    for (mk, mv) in mm {
                        if IGNORED_META.contains(&mk.as_str()) {
                            continue;
                        }
                        path.push("f:metadata".to_string());
                        collect(mv, None, &mut vec!["metadata", mk], &mut path, mk, &mut out);
                        path.pop();
                    }
                }
                continue;
            }
            collect(v, sub_schema(schema, k), &mut vec![k.as_str()], &mut path, k, &mut out);
        }
    }
    out
}

fn collect<'a>(v: &'a Value, schema: Option<&Value>, names: &mut Vec<&'a str>, path: &mut FieldPath, key: &str, out: &mut BTreeSet<FieldPath>) {
    path.push(format!("f:{key}"));
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, c) in m {
                names.push(k);
                collect(c, sub_schema(schema, k), names, path, k, out);
                names.pop();
            }
        }
        Value::Array(items) => match list_type(schema, names) {
            ListType::Set => {
                for it in items {
                    path.push(format!("v:{it}"));
                    out.insert(path.clone());
                    path.pop();
                }
            }
            // Owner references are atomic structs (`+structType=atomic`): an item is one field.
            ListType::Map(keys) if *names == ["metadata", "ownerReferences"] => {
                for it in items {
                    path.push(item_key(it, keys));
                    out.insert(path.clone());
                    path.pop();
                }
            }
            ListType::Map(keys) => {
                let item_schema = schema.and_then(|s| s.get("items"));
                for it in items {
                    path.push(item_key(it, keys));
                    out.insert({
                        let mut p = path.clone();
                        p.push(".".into());
                        p
                    });
                    if let Some(m) = it.as_object() {
                        for (k, c) in m {
                            collect(c, sub_schema(item_schema, k), &mut vec![], path, k, out);
                        }
                    }
                    path.pop();
                }
            }
            ListType::Atomic => {
                out.insert(path.clone());
            }
        },
        _ => {
            out.insert(path.clone());
        }
    }
    path.pop();
}

/// FieldsV1 JSON from a set of paths.
pub fn to_fields_v1(set: &BTreeSet<FieldPath>) -> Value {
    let mut root = Map::new();
    for p in set {
        let mut cur = &mut root;
        for seg in p {
            cur = cur.entry(seg.clone()).or_insert_with(|| Value::Object(Map::new())).as_object_mut().unwrap();
        }
    }
    Value::Object(root)
}

/// Paths from FieldsV1 JSON.
pub fn from_fields_v1(v: &Value) -> BTreeSet<FieldPath> {
    fn rec(v: &Value, path: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
        match v.as_object() {
            Some(m) if !m.is_empty() => {
                for (k, c) in m {
                    path.push(k.clone());
                    rec(c, path, out);
                    path.pop();
                }
            }
            _ => {
                if !path.is_empty() {
                    out.insert(path.clone());
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    rec(v, &mut vec![], &mut out);
    out
}

fn find_item<'a>(items: &'a mut [Value], seg: &str) -> Option<&'a mut Value> {
    if let Some(k) = seg.strip_prefix("k:") {
        let key: Map<String, Value> = serde_json::from_str(k).ok()?;
        items.iter_mut().find(|it| key.iter().all(|(kk, kv)| it.get(kk) == Some(kv)))
    } else {
        None
    }
}

/// The value at a path (None if absent).
pub fn get_path<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = obj;
    for seg in path {
        if seg == "." {
            return Some(cur);
        }
        if let Some(f) = seg.strip_prefix("f:") {
            cur = cur.get(f)?;
        } else if let Some(v) = seg.strip_prefix("v:") {
            let want: Value = serde_json::from_str(v).ok()?;
            return cur.as_array()?.iter().find(|x| **x == want);
        } else if let Some(k) = seg.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(k).ok()?;
            cur = cur.as_array()?.iter().find(|it| key.iter().all(|(kk, kv)| it.get(kk) == Some(kv)))?;
        }
    }
    Some(cur)
}

/// Removes the field at a path.
pub fn remove_path(obj: &mut Value, path: &[String]) {
    let Some((last, parent)) = path.split_last() else { return };
    let mut cur = obj;
    for seg in parent {
        let next = if let Some(f) = seg.strip_prefix("f:") {
            cur.get_mut(f)
        } else if seg.starts_with("k:") {
            match cur.as_array_mut() {
                Some(items) => find_item(items, seg),
                None => None,
            }
        } else {
            None
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if last == "." {
        // Remove the list item itself: handled by the caller's parent path.
        return;
    }
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = cur.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(v) = last.strip_prefix("v:") {
        if let (Some(items), Ok(want)) = (cur.as_array_mut(), serde_json::from_str::<Value>(v)) {
            items.retain(|x| *x != want);
        }
    } else if last.starts_with("k:")
        && let (Some(items), Some(k)) = (cur.as_array_mut(), last.strip_prefix("k:"))
            && let Ok(key) = serde_json::from_str::<Map<String, Value>>(k) {
                items.retain(|it| !key.iter().all(|(kk, kv)| it.get(kk) == Some(kv)));
            }
}

/// Merges an applied configuration into the live object.
pub fn apply_merge(live: &mut Value, applied: &Value, schema: Option<&Value>) {
    let mut names = vec![];
    merge_rec(live, applied, schema, &mut names);
}

fn merge_rec(live: &mut Value, applied: &Value, schema: Option<&Value>, names: &mut Vec<String>) {
    match (live.as_object_mut(), applied.as_object()) {
        (Some(l), Some(a)) => {
            for (k, av) in a {
                names.push(k.clone());
                let sub = if names.len() == 1 && k == "metadata" { None } else { sub_schema(schema, k) };
                match l.get_mut(k) {
                    Some(lv) if !av.is_null() => merge_rec(lv, av, sub, names),
                    _ => {
                        l.insert(k.clone(), av.clone());
                    }
                }
                names.pop();
            }
        }
        _ => {
            let path: Vec<&str> = names.iter().map(String::as_str).collect();
            if let (Some(litems), Some(aitems)) = (live.as_array_mut(), applied.as_array()) {
                match list_type(schema, &path) {
                    ListType::Set => {
                        for it in aitems {
                            if !litems.contains(it) {
                                litems.push(it.clone());
                            }
                        }
                        return;
                    }
                    ListType::Map(keys) => {
                        let item_schema = schema.and_then(|s| s.get("items"));
                        for it in aitems {
                            let k = item_key(it, keys);
                            match find_item(litems, &k) {
                                Some(li) => merge_rec(li, it, item_schema, &mut vec![]),
                                None => litems.push(it.clone()),
                            }
                        }
                        return;
                    }
                    ListType::Atomic => {}
                }
            }
            *live = applied.clone();
        }
    }
}

/// One `metadata.managedFields` entry with its field set decoded.
#[derive(Debug, Clone)]
pub struct Entry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub subresource: String,
    pub time: Value,
    pub set: BTreeSet<FieldPath>,
}

impl Entry {
    pub fn is(&self, manager: &str, operation: &str, subresource: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == subresource
    }
    /// How conflicts name the manager (structured-merge-diff's printManager).
    pub fn display(&self) -> String {
        let mut s = crate::goquote::quote(&self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {}", crate::goquote::Quoted(&self.subresource)));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

pub fn entries(obj: &Value) -> Vec<Entry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| {
            let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            Entry {
                manager: s("manager"),
                operation: s("operation"),
                api_version: s("apiVersion"),
                subresource: s("subresource"),
                time: e.get("time").cloned().unwrap_or(Value::Null),
                set: from_fields_v1(&e["fieldsV1"]),
            }
        })
        .collect()
}

/// The managedFields JSON; entries that own nothing are dropped.
pub fn render(entries: &[Entry]) -> Value {
    Value::Array(
        entries
            .iter()
            .filter(|e| !e.set.is_empty())
            .map(|e| {
                let mut v = json!({
                    "manager": e.manager,
                    "operation": e.operation,
                    "apiVersion": e.api_version,
                    "time": e.time,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": to_fields_v1(&e.set),
                });
                if !e.subresource.is_empty() {
                    v["subresource"] = e.subresource.clone().into();
                }
                v
            })
            .collect(),
    )
}

/// The inner nodes of an object (non-empty objects below the top level of `metadata`, and
/// lists that are not atomic), each as its path plus ".": what an Update manager owns as a
/// node of its own (FieldsV1's `.: {}`) when its write brought the node into existence.
pub fn node_paths(obj: &Value, schema: Option<&Value>) -> BTreeSet<FieldPath> {
    fn rec(v: &Value, schema: Option<&Value>, names: &mut Vec<String>, path: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
        let here = |path: &FieldPath| {
            let mut p = path.clone();
            p.push(".".into());
            p
        };
        match v {
            Value::Object(m) if !m.is_empty() => {
                if names.len() > 1 || names.first().is_some_and(|n| n != "metadata") {
                    out.insert(here(path));
                }
                for (k, c) in m {
                    if names.len() == 1 && names[0] == "metadata" && IGNORED_META.contains(&k.as_str()) {
                        continue;
                    }
                    names.push(k.clone());
                    path.push(format!("f:{k}"));
                    rec(c, sub_schema(schema, k), names, path, out);
                    path.pop();
                    names.pop();
                }
            }
            Value::Array(items) if !items.is_empty() => {
                let ns: Vec<&str> = names.iter().map(String::as_str).collect();
                match list_type(schema, &ns) {
                    ListType::Atomic => {}
                    ListType::Set => {
                        out.insert(here(path));
                    }
                    ListType::Map(keys) => {
                        out.insert(here(path));
                        if ns != ["metadata", "ownerReferences"] {
                            let item_schema = schema.and_then(|s| s.get("items"));
                            for it in items {
                                path.push(item_key(it, keys));
                                if let Some(m) = it.as_object() {
                                    for (k, c) in m {
                                        let mut inner = vec![k.clone()];
                                        path.push(format!("f:{k}"));
                                        rec(c, sub_schema(item_schema, k), &mut inner, path, out);
                                        path.pop();
                                    }
                                }
                                path.pop();
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    if let Some(m) = obj.as_object() {
        for (k, v) in m {
            if k == "apiVersion" || k == "kind" {
                continue;
            }
            let mut path = vec![format!("f:{k}")];
            rec(v, sub_schema(schema, k), &mut vec![k.clone()], &mut path, &mut out);
        }
    }
    out
}

/// Records a non-apply write: `manager` (operation Update) takes the fields it changed from
/// every other manager; removed fields leave every manager.
#[allow(clippy::too_many_arguments)]
pub fn track_update(old: &Value, new: &mut Value, schema: Option<&Value>, manager: &str, subresource: &str, api_version: &str, now: &str) {
    let new_fields = field_set(new, schema);
    let mut changed: BTreeSet<FieldPath> = new_fields.iter().filter(|p| get_path(new, p) != get_path(old, p)).cloned().collect();
    let removed: BTreeSet<FieldPath> = field_set(old, schema).into_iter().filter(|p| !new_fields.contains(p)).collect();
    let mut es = entries(new);
    if changed.is_empty() && removed.is_empty() {
        return;
    }
    // Nodes this write created are this manager's too (structured-merge-diff's Compare
    // reports them as added), as `.: {}` beside their fields.
    changed.extend(node_paths(new, schema).into_iter().filter(|p| get_path(old, p).is_none()));
    for e in es.iter_mut() {
        e.set.retain(|p| !changed.contains(p) && !removed.contains(p) && get_path(new, p).is_some());
    }
    match es.iter_mut().find(|e| e.is(manager, "Update", subresource)) {
        Some(e) => {
            e.set.extend(changed);
            e.time = now.into();
            e.api_version = api_version.into();
        }
        None => es.push(Entry {
            manager: manager.into(),
            operation: "Update".into(),
            api_version: api_version.into(),
            subresource: subresource.into(),
            time: now.into(),
            set: changed,
        }),
    }
    let rendered = render(&es);
    if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        if rendered.as_array().is_some_and(|a| a.is_empty()) {
            m.remove("managedFields");
        } else {
            m.insert("managedFields".into(), rendered);
        }
    }
}

/// The manager name kube-apiserver derives from a User-Agent when no fieldManager is given.
pub fn manager_from_user_agent(ua: &str) -> String {
    let m = ua.split('/').next().unwrap_or("").trim();
    if m.is_empty() { "unknown".into() } else { m.chars().take(128).collect() }
}

/// ".spec.a" style rendering of a path for conflict messages.
pub fn display_path(p: &FieldPath) -> String {
    let mut s = String::new();
    for seg in p {
        if let Some(f) = seg.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = seg.strip_prefix("k:") {
            let m: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
            s.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = seg.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn merge_and_fields() {
        let mut t = json!({"a": 1, "b": {"c": 2, "d": 3}});
        merge_patch(&mut t, &json!({"a": null, "b": {"c": 5}}));
        assert_eq!(t, json!({"b": {"c": 5, "d": 3}}));
        let set = field_set(&json!({"apiVersion": "v1", "metadata": {"name": "x", "labels": {"a": "b"}, "finalizers": ["f"]}, "spec": {"x": 1, "l": [1, 2]}}), None);
        let fv = to_fields_v1(&set);
        assert_eq!(fv, json!({"f:metadata": {"f:labels": {"f:a": {}}, "f:finalizers": {"v:\"f\"": {}}}, "f:spec": {"f:l": {}, "f:x": {}}}));
        assert_eq!(from_fields_v1(&fv), set);
        let mut live = json!({"spec": {"x": 1, "y": 2}});
        remove_path(&mut live, &["f:spec".into(), "f:y".into()]);
        assert_eq!(live, json!({"spec": {"x": 1}}));
    }
}
