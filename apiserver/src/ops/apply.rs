//! Server-side apply (`application/apply-patch+yaml`): ownership, conflicts, and removal of
//! the fields a manager stops applying.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::write::{create_locked, finish_patch};
use super::{Resp, Target, WriteOpts, check_type, external, meta_mut};
use crate::patch;
use crate::status::{ApiError, ApiResult};
use crate::store::{Store, meta_str};
use crate::util::now_rfc3339;

pub(super) fn apply(store: &Store, t: &Target, body: &[u8], opts: &WriteOpts) -> ApiResult<Resp> {
    let Some(manager) = opts.field_manager.clone().filter(|m| !m.is_empty()) else {
        return Err(ApiError::bad_request("PATCH: fieldManager is required for apply requests"));
    };
    let mut applied: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(_) => serde_yaml::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?,
    };
    if !applied.is_object() {
        return Err(ApiError::bad_request("apply patch must be an object"));
    }
    let av = applied.get("apiVersion").and_then(Value::as_str).unwrap_or("").to_string();
    let kind = applied.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
    if av.is_empty() || kind.is_empty() {
        return Err(ApiError::bad_request(format!(
            "invalid object type: {}, Kind={}",
            if av.is_empty() { "/".to_string() } else { av.clone() },
            kind
        )));
    }
    check_type(t, &mut applied)?;
    let body_name = meta_str(&applied, "name").to_string();
    if !body_name.is_empty() && body_name != t.name() {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({})",
            t.name()
        )));
    }
    meta_mut(&mut applied).insert("name".into(), t.name().into());
    if t.def.namespaced {
        let ns = meta_str(&applied, "namespace").to_string();
        if !ns.is_empty() && ns != t.ns() {
            return Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
        }
        meta_mut(&mut applied).insert("namespace".into(), t.ns().into());
    }
    if let Some(m) = applied.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    let sub = t.subresource.clone().unwrap_or_default();
    if !t.is_status() && t.has_status_subresource() {
        // The main resource ignores status: it is neither applied nor owned through it.
        if let Some(m) = applied.as_object_mut() {
            m.remove("status");
        }
    }
    let schema = t.schema().cloned();
    let now = now_rfc3339();
    let av = t.def.api_version(&t.version);
    let mut st = store.lock();
    let existing = st.get(&t.def.storage, t.ns(), t.name()).cloned();
    let Some(existing) = existing else {
        if t.is_status() {
            return Err(t.not_found(t.name()));
        }
        let set = patch::field_set(&applied, schema.as_ref());
        let mut obj = applied.clone();
        let e = patch::Entry { manager: manager.clone(), operation: "Apply".into(), api_version: av.clone(), subresource: String::new(), time: now.clone().into(), set };
        obj["metadata"]["managedFields"] = patch::render(&[e]);
        if !meta_str(&obj, "resourceVersion").is_empty() {
            return Err(t.not_found(t.name()));
        }
        let mut copts = opts.clone();
        copts.applying = true;
        let r = create_locked(&mut st, t, obj, &copts, Some(t.name()))?;
        store.changed(st.rv);
        return Ok(r);
    };
    let live = external(t, &existing);
    if t.is_status() {
        // Applying to /status only takes status.
        let status = applied.get("status").cloned();
        applied = json!({"apiVersion": applied["apiVersion"], "kind": applied["kind"], "metadata": {"name": t.name()}});
        if let Some(st) = status {
            applied["status"] = st;
        }
    }
    let new_set = patch::field_set(&applied, schema.as_ref());
    let mut entries = patch::entries(&live);
    let own_idx = entries.iter().position(|e| e.is(&manager, "Apply", &sub));
    let prev_set = own_idx.map(|i| entries[i].set.clone()).unwrap_or_default();
    let mut conflicts: Vec<(String, patch::FieldPath)> = vec![];
    for p in &new_set {
        if patch::get_path(&live, p) == patch::get_path(&applied, p) {
            continue;
        }
        for (i, e) in entries.iter_mut().enumerate() {
            if Some(i) == own_idx || !e.set.contains(p) {
                continue;
            }
            if opts.force {
                e.set.remove(p);
            } else {
                conflicts.push((e.display(), p.clone()));
            }
        }
    }
    if !conflicts.is_empty() {
        return Err(apply_conflict(&conflicts));
    }
    let mut merged = live.clone();
    patch::apply_merge(&mut merged, &applied, schema.as_ref());
    let owned_by_others: BTreeSet<_> =
        entries.iter().enumerate().filter(|(i, _)| Some(*i) != own_idx).flat_map(|(_, e)| e.set.iter().cloned()).collect();
    for p in prev_set.difference(&new_set) {
        if !owned_by_others.contains(p) {
            patch::remove_path(&mut merged, p);
        }
    }
    // Ownership: ours is what we applied now; the time moves only when it changes (a no-op
    // apply is not a write).
    match own_idx {
        Some(i) if entries[i].set == new_set && entries[i].api_version == av => {}
        Some(i) => {
            entries[i].set = new_set;
            entries[i].api_version = av.clone();
            entries[i].time = now.clone().into();
        }
        None => entries.push(patch::Entry { manager: manager.clone(), operation: "Apply".into(), api_version: av.clone(), subresource: sub.clone(), time: now.clone().into(), set: new_set }),
    }
    merged["metadata"]["managedFields"] = patch::render(&entries);
    let mut opts = opts.clone();
    opts.applying = true;
    let opts = &opts;
    let r = finish_patch(&mut st, t, merged, &existing, opts)?;
    store.changed(st.rv);
    Ok(r)
}

/// The 409 of an apply that conflicts (fieldmanager's NewConflictError).
fn apply_conflict(conflicts: &[(String, patch::FieldPath)]) -> ApiError {
    let msg = if conflicts.len() == 1 {
        format!("Apply failed with 1 conflict: conflict with {}: {}", conflicts[0].0, patch::display_path(&conflicts[0].1))
    } else {
        let mut managers: Vec<&String> = conflicts.iter().map(|(m, _)| m).collect();
        managers.sort();
        managers.dedup();
        let mut lines = vec![];
        for m in managers {
            lines.push(format!("conflicts with {m}:"));
            for (_, p) in conflicts.iter().filter(|(mm, _)| mm == m) {
                lines.push(format!("- {}", patch::display_path(p)));
            }
        }
        format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(m, p)| json!({"reason": "FieldManagerConflict", "message": format!("conflict with {m}"), "field": patch::display_path(p)}))
        .collect();
    ApiError::new(409, "Conflict", msg, Some(json!({"causes": causes})))
}
