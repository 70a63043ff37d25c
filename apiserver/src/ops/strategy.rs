//! The strategies' PrepareForCreate and PrepareForUpdate: system fields, generation, and what
//! the main resource and `/status` may change.

use serde_json::{Value, json};

use super::{Target, meta_mut, without_meta};
use crate::registry::crd_status;
use crate::status::FieldError;
use crate::store::meta_str;
use crate::util::new_uid;

/// Fills system fields and applies PrepareForCreate of the resource's strategy.
pub(super) fn prepare_create(t: &Target, obj: &mut Value, now: &str) {
    let track_gen = t.def.track_generation;
    let status_sub = t.has_status_subresource();
    let m = meta_mut(obj);
    m.insert("uid".into(), new_uid().into());
    m.insert("creationTimestamp".into(), now.into());
    m.remove("deletionTimestamp");
    m.remove("deletionGracePeriodSeconds");
    m.remove("selfLink");
    if track_gen {
        m.insert("generation".into(), 1.into());
    } else {
        m.remove("generation");
    }
    if status_sub && t.def.is_custom()
        && let Some(o) = obj.as_object_mut() {
            o.remove("status");
        }
    match (t.def.group.as_str(), t.def.plural.as_str()) {
        ("", "namespaces") => {
            obj["status"] = json!({"phase": "Active"});
            let fins = obj.pointer("/spec/finalizers").cloned();
            if fins.is_none() {
                if !obj.get("spec").is_some_and(Value::is_object) {
                    obj["spec"] = json!({});
                }
                obj["spec"]["finalizers"] = json!(["kubernetes"]);
            }
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            obj["status"] = crd_status(obj, now);
        }
        _ => {}
    }
}

/// Applies PrepareForUpdate (main resource or /status) and the generic BeforeUpdate rules.
pub(super) fn prepare_update(t: &Target, new: &mut Value, old: &Value) -> Vec<FieldError> {
    let mut errs = vec![];
    if t.is_status() {
        // Only status may change through /status (metadata changes are ignored too).
        let status = new.get("status").cloned();
        let mf = new.pointer("/metadata/managedFields").cloned();
        *new = old.clone();
        match status {
            Some(s) => new["status"] = s,
            None => {
                new.as_object_mut().unwrap().remove("status");
            }
        }
        if let Some(mf) = mf {
            new["metadata"]["managedFields"] = mf;
        }
        return errs;
    }
    if t.has_status_subresource() {
        match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                new.as_object_mut().unwrap().remove("status");
            }
        }
    }
    if t.def.plural == "namespaces" && t.def.group.is_empty()
        && let Some(f) = old.pointer("/spec/finalizers") {
            if !new.get("spec").is_some_and(Value::is_object) {
                new["spec"] = json!({});
            }
            new["spec"]["finalizers"] = f.clone();
        }
    let old_uid = meta_str(old, "uid").to_string();
    let new_uid = meta_str(new, "uid").to_string();
    if !new_uid.is_empty() && new_uid != old_uid {
        errs.push(FieldError::invalid("metadata.uid", new_uid.into(), "field is immutable"));
    }
    let om = old["metadata"].clone();
    let m = meta_mut(new);
    m.insert("uid".into(), old_uid.into());
    for f in ["creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"] {
        match om.get(f) {
            Some(v) => {
                m.insert(f.into(), v.clone());
            }
            None => {
                m.remove(f);
            }
        }
    }
    if m.get("managedFields").is_none()
        && let Some(mf) = om.get("managedFields") {
            m.insert("managedFields".into(), mf.clone());
        }
    m.remove("selfLink");
    // Anything but metadata changing bumps the generation (status was restored above when
    // the status subresource exists).
    if t.def.track_generation && without_meta(new) != without_meta(old) {
        let g = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0) + 1;
        new["metadata"]["generation"] = g.into();
    }
    errs
}
