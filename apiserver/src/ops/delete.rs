//! delete and deletecollection (finalizers, preconditions, propagation policies), and the
//! writes the controllers (GC, namespace and CRD cleanup) make.

use serde_json::{Value, json};

use super::read::{ListQuery, selectors};
use super::{DeleteOpts, Resp, Target, after_remove, external, finalizers, is_namespace, meta_mut, resp};
use crate::registry::ResourceDef;
use crate::status::{ApiResult, ApiError, success_status};
use crate::store::{State, Store, meta_str};
use crate::util::now_rfc3339;

pub fn delete(store: &Store, t: &Target, opts: &DeleteOpts) -> ApiResult<Resp> {
    let mut st = store.lock();
    let r = delete_locked(&mut st, t, opts)?;
    store.changed(st.rv);
    Ok(r)
}

fn delete_locked(st: &mut State, t: &Target, opts: &DeleteOpts) -> ApiResult<Resp> {
    let existing = st.get(&t.def.storage, t.ns(), t.name()).cloned().ok_or_else(|| t.not_found(t.name()))?;
    if let Some(uid) = &opts.precondition_uid {
        let cur = meta_str(&existing, "uid");
        if uid != cur {
            return Err(ApiError::conflict(
                &t.def.group,
                &t.def.plural,
                t.name(),
                &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {cur}"),
            ));
        }
    }
    if let Some(rv) = &opts.precondition_rv {
        let cur = meta_str(&existing, "resourceVersion");
        if rv != cur {
            return Err(ApiError::conflict(
                &t.def.group,
                &t.def.plural,
                t.name(),
                &format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {cur}"),
            ));
        }
    }
    let now = now_rfc3339();
    let mut obj = existing.clone();
    let is_crd = t.def.group == "apiextensions.k8s.io" && t.def.plural == "customresourcedefinitions";
    let mut fins = finalizers(&obj);
    match opts.propagation.as_deref() {
        Some("Orphan") if !fins.iter().any(|f| f == "orphan") => fins.push("orphan".into()),
        Some("Foreground") if !fins.iter().any(|f| f == "foregroundDeletion") => fins.push("foregroundDeletion".into()),
        _ => {}
    }
    if is_crd && !fins.iter().any(|f| f == "customresourcecleanup.apiextensions.k8s.io") {
        fins.push("customresourcecleanup.apiextensions.k8s.io".into());
    }
    let graceful = is_namespace(t) || !fins.is_empty();
    if graceful {
        let m = meta_mut(&mut obj);
        if m.get("deletionTimestamp").is_none() {
            m.insert("deletionTimestamp".into(), now.clone().into());
            m.insert("deletionGracePeriodSeconds".into(), 0.into());
        }
        if !fins.is_empty() {
            m.insert("finalizers".into(), json!(fins));
        }
        if is_namespace(t) {
            obj["status"]["phase"] = "Terminating".into();
        }
        if is_crd {
            let mut conds = obj.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
            conds.retain(|c| c["type"] != "Terminating");
            conds.push(json!({"type": "Terminating", "status": "True", "lastTransitionTime": now, "reason": "InstanceDeletionInProgress", "message": "CustomResource deletion is in progress"}));
            obj["status"]["conditions"] = Value::Array(conds);
        }
        if opts.dry_run || obj == existing {
            return Ok(resp(200, external(t, &obj)));
        }
        let stored = st.put(&t.def.storage, obj);
        return Ok(resp(200, external(t, &stored)));
    }
    if opts.dry_run {
        return Ok(resp(200, if t.def.return_deleted_object { external(t, &obj) } else { success_status(t.name(), &t.def.group, &t.def.plural, meta_str(&obj, "uid")) }));
    }
    let gone = st.remove(&t.def.storage, t.ns(), t.name()).unwrap_or_default();
    after_remove(st, t, &gone);
    Ok(resp(
        200,
        if t.def.return_deleted_object { external(t, &gone) } else { success_status(t.name(), &t.def.group, &t.def.plural, meta_str(&gone, "uid")) },
    ))
}

/// Deletes one stored object on behalf of a controller (GC, namespace or CRD cleanup).
pub fn controller_delete(st: &mut State, def: &ResourceDef, ns: &str, name: &str, propagation: Option<&str>) {
    let version = def.versions.iter().find(|v| v.storage).or(def.versions.first()).map(|v| v.name.clone()).unwrap_or_default();
    let t = Target { def: def.clone(), version, namespace: Some(ns.into()), name: Some(name.into()), subresource: None };
    let _ = delete_locked(st, &t, &DeleteOpts { propagation: propagation.map(String::from), ..Default::default() });
}

/// Stores a controller's change to an object (removing finalizers or owner references).
pub fn controller_update(st: &mut State, def: &ResourceDef, new: Value) {
    let version = def.versions.iter().find(|v| v.storage).or(def.versions.first()).map(|v| v.name.clone()).unwrap_or_default();
    let (ns, name) = crate::store::obj_key(&new);
    let t = Target { def: def.clone(), version, namespace: Some(ns.clone()), name: Some(name.clone()), subresource: None };
    if let Some(existing) = st.get(&def.storage, &ns, &name).cloned() {
        if new.pointer("/metadata/deletionTimestamp").is_some() && finalizers(&new).is_empty() && !is_namespace(&t) {
            st.objects.get_mut(&def.storage).and_then(|m| m.insert((ns.clone(), name.clone()), new));
            if let Some(gone) = st.remove(&def.storage, &ns, &name) {
                after_remove(st, &t, &gone);
            }
        } else if new != existing {
            st.put(&def.storage, new);
        }
    }
}

pub fn delete_collection(store: &Store, t: &Target, q: &ListQuery, opts: &DeleteOpts) -> ApiResult<Resp> {
    let (ls, fs) = selectors(t, q)?;
    let mut st = store.lock();
    let names: Vec<(String, String)> =
        st.list(&t.def.storage, t.namespace.as_deref()).filter(|o| ls.matches(o) && fs.matches(o)).map(crate::store::obj_key).collect();
    let mut items = vec![];
    for (ns, name) in names {
        let mut tt = t.clone();
        tt.namespace = Some(ns);
        tt.name = Some(name);
        let before = st.get(&t.def.storage, tt.ns(), tt.name()).map(|o| external(t, o));
        let r = delete_locked(&mut st, &tt, opts)?;
        // The answer lists the objects as they were deleted (or as they now are, pending finalizers).
        match (r.body["kind"] == "Status", before) {
            (true, Some(b)) => items.push(b),
            (false, _) => items.push(r.body),
            _ => {}
        }
    }
    let rv = st.rv;
    store.changed(rv);
    Ok(resp(
        200,
        json!({"kind": t.def.list_kind, "apiVersion": t.def.api_version(&t.version), "metadata": {"resourceVersion": rv.to_string()}, "items": items}),
    ))
}
