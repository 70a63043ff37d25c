//! create and update (PUT), and the update path every patch and apply ends in.

use serde_json::{Value, json};

use super::strategy::{prepare_create, prepare_update};
use super::validate::validate;
use super::{Resp, Target, WriteOpts, after_put, after_remove, check_namespace, check_type, external, finalizers, invalid, is_namespace, meta_mut, unknown_handling};
use crate::convert::to_internal;
use crate::patch;
use crate::registry::crd_status;
use crate::status::{ApiError, ApiResult, FieldError};
use crate::store::{State, Store, meta_str};
use crate::util::{now_rfc3339, random_suffix};

pub fn create(store: &Store, t: &Target, mut obj: Value, opts: &WriteOpts) -> ApiResult<Resp> {
    check_type(t, &mut obj)?;
    let mut st = store.lock();
    let r = create_locked(&mut st, t, obj, opts, None)?;
    store.changed(st.rv);
    Ok(r)
}

pub(super) fn create_locked(st: &mut State, t: &Target, mut obj: Value, opts: &WriteOpts, name_hint: Option<&str>) -> ApiResult<Resp> {
    check_namespace(t, &mut obj)?;
    if !meta_str(&obj, "resourceVersion").is_empty() {
        return Err(ApiError::internal("resourceVersion should not be set on objects to be created"));
    }
    if let Some(n) = name_hint
        && meta_str(&obj, "name").is_empty() {
            meta_mut(&mut obj).insert("name".into(), n.into());
        }
    if t.def.namespaced {
        let ns = meta_str(&obj, "namespace").to_string();
        match st.get(&crate::registry::GroupResource::new("", "namespaces"), "", &ns) {
            None => return Err(ApiError::not_found("", "namespaces", &ns)),
            Some(n) if n.pointer("/metadata/deletionTimestamp").is_some() => {
                return Err(ApiError::forbidden(
                    &t.def.group,
                    &t.def.plural,
                    meta_str(&obj, "name"),
                    &format!("unable to create new content in namespace {ns} because it is being terminated"),
                ));
            }
            _ => {}
        }
    }
    // The RBAC storages check before BeforeCreate (names, validation), after admission.
    no_escalation(st, t, &obj, None, opts)?;
    let generate = meta_str(&obj, "generateName").to_string();
    let fixed_name = meta_str(&obj, "name").to_string();
    if fixed_name.is_empty() && generate.is_empty() {
        return Err(invalid(t, &obj, &[FieldError::required("metadata.name", "name or generateName is required")]));
    }
    // Names are generated before validation, as BeforeCreate does.
    let generate_name = || format!("{}{}", truncate_generate_name(&generate), random_suffix());
    if fixed_name.is_empty() {
        meta_mut(&mut obj).insert("name".into(), generate_name().into());
    }
    let now = now_rfc3339();
    prepare_create(t, &mut obj, &now);
    let (errs, unknown) = validate(t, &mut obj, None);
    if !opts.applying {
        let av = t.def.api_version(&t.version);
        // The field manager compares with an empty object of the kind (Creater.New).
        patch::track_update(&empty_object(t), &mut obj, t.schema(), &opts.manager(), "", &av, &now);
    }
    let mut warnings = unknown_handling(t, opts, &unknown)?;
    if !errs.is_empty() {
        return Err(invalid(t, &obj, &errs));
    }
    let ns = meta_str(&obj, "namespace").to_string();
    let mut attempts = 0;
    while st.get(&t.def.storage, &ns, meta_str(&obj, "name")).is_some() {
        attempts += 1;
        if fixed_name.is_empty() && attempts < 8 {
            meta_mut(&mut obj).insert("name".into(), generate_name().into());
            continue;
        }
        return Err(ApiError::already_exists(&t.def.group, &t.def.plural, meta_str(&obj, "name")));
    }
    let internal = to_internal(&t.def, &t.version, obj);
    check_storage_size(&internal)?;
    if opts.dry_run {
        return Ok(Resp { code: 201, body: external(t, &internal), warnings });
    }
    let stored = st.put(&t.def.storage, internal);
    after_put(st, t, &stored);
    let body = external(t, &stored);
    Ok(Resp { code: 201, body, warnings: std::mem::take(&mut warnings) })
}

pub fn update(store: &Store, t: &Target, mut obj: Value, opts: &WriteOpts) -> ApiResult<Resp> {
    check_type(t, &mut obj)?;
    let body_name = meta_str(&obj, "name").to_string();
    if body_name.is_empty() {
        meta_mut(&mut obj).insert("name".into(), t.name().into());
    } else if body_name != t.name() {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({})",
            t.name()
        )));
    }
    let mut st = store.lock();
    check_namespace(t, &mut obj)?;
    let existing = st.get(&t.def.storage, t.ns(), t.name()).cloned();
    let Some(existing) = existing else {
        if t.def.create_on_update && !t.is_status() {
            meta_mut(&mut obj).remove("resourceVersion");
            let r = create_locked(&mut st, t, obj, opts, None)?;
            store.changed(st.rv);
            return Ok(r);
        }
        return Err(t.not_found(t.name()));
    };
    // The RBAC storages check the updated object before its resourceVersion is compared.
    no_escalation(&st, t, &obj, Some(&existing), opts)?;
    let rv = meta_str(&obj, "resourceVersion").to_string();
    let cur_rv = meta_str(&existing, "resourceVersion").to_string();
    if rv.is_empty() {
        if !t.def.unconditional_update {
            let e = FieldError::invalid("metadata.resourceVersion", Value::String("0x0".into()), "must be specified for an update");
            let mut err = ApiError::invalid(&t.def.group, &t.def.plural, t.name(), &[e]);
            // The value renders as Go's %#v of a uint64: 0x0.
            err.message = err.message.replace("\"0x0\"", "0x0");
            if let Some(c) = err.details.as_mut().and_then(|d| d["causes"][0].as_object_mut()) {
                c.insert("message".into(), "Invalid value: 0x0: must be specified for an update".into());
            }
            return Err(err);
        }
        meta_mut(&mut obj).insert("resourceVersion".into(), cur_rv.clone().into());
    } else if rv.parse::<u64>().is_err() {
        return Err(ApiError::bad_request(format!("invalid resource version: {}", crate::goquote::Quoted(&rv))));
    } else if rv != cur_rv {
        return Err(ApiError::optimistic_lock(&t.def.group, &t.def.plural, t.name()));
    }
    let r = update_locked(&mut st, t, obj, &existing, opts, 200)?;
    store.changed(st.rv);
    Ok(r)
}

/// Stores an update of `existing` (already resourceVersion-checked).
pub(super) fn update_locked(st: &mut State, t: &Target, obj: Value, existing: &Value, opts: &WriteOpts, code: u16) -> ApiResult<Resp> {
    let old_ext = external(t, existing);
    let mut new = obj;
    let mut errs = prepare_update(t, &mut new, &old_ext);
    let (verrs, unknown) = validate(t, &mut new, Some(&old_ext));
    errs.extend(verrs);
    let warnings = unknown_handling(t, opts, &unknown)?;
    if !errs.is_empty() {
        return Err(invalid(t, &new, &errs));
    }
    if !opts.applying {
        let av = t.def.api_version(&t.version);
        let sub = t.subresource.clone().unwrap_or_default();
        patch::track_update(&old_ext, &mut new, t.schema(), &opts.manager(), &sub, &av, &now_rfc3339());
    }
    if t.def.group == "apiextensions.k8s.io" && t.def.plural == "customresourcedefinitions" && !t.is_status() {
        new["status"] = crd_status(&new, &now_rfc3339());
        if let Some(c) = old_ext.pointer("/status/conditions")
            && old_ext.pointer("/metadata/deletionTimestamp").is_some() {
                new["status"]["conditions"] = c.clone();
            }
    }
    let internal = to_internal(&t.def, &t.version, new);
    let mut old_cmp = existing.clone();
    old_cmp["apiVersion"] = internal["apiVersion"].clone();
    if internal == old_cmp {
        return Ok(Resp { code: 200, body: old_ext, warnings });
    }
    check_storage_size(&internal)?;
    if opts.dry_run {
        return Ok(Resp { code, body: external(t, &internal), warnings });
    }
    let stored = if internal.pointer("/metadata/deletionTimestamp").is_some() && finalizers(&internal).is_empty() && !is_namespace(t) {
        // The last finalizer is gone: the update deletes the object.
        st.objects.get_mut(&t.def.storage).and_then(|m| m.insert((t.ns().into(), t.name().into()), internal));
        let gone = st.remove(&t.def.storage, t.ns(), t.name()).unwrap_or_default();
        after_remove(st, t, &gone);
        gone
    } else {
        let s = st.put(&t.def.storage, internal);
        after_put(st, t, &s);
        s
    };
    Ok(Resp { code, body: external(t, &stored), warnings })
}

/// Runs a patched object through the update path.
pub(super) fn finish_patch(st: &mut State, t: &Target, mut obj: Value, existing: &Value, opts: &WriteOpts) -> ApiResult<Resp> {
    if !obj.is_object() {
        return Err(ApiError::bad_request("the patched object is not an object"));
    }
    let want_av = t.def.api_version(&t.version);
    if obj.get("apiVersion").and_then(Value::as_str) != Some(want_av.as_str()) || obj.get("kind").and_then(Value::as_str) != Some(t.def.kind.as_str()) {
        return Err(ApiError::bad_request("the patch changed apiVersion or kind"));
    }
    if meta_str(&obj, "name") != t.name() {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({})",
            meta_str(&obj, "name"),
            t.name()
        )));
    }
    no_escalation(st, t, &obj, Some(existing), opts)?;
    let rv = meta_str(&obj, "resourceVersion").to_string();
    let cur = meta_str(existing, "resourceVersion").to_string();
    if rv.is_empty() {
        meta_mut(&mut obj).insert("resourceVersion".into(), cur.into());
    } else if rv != cur {
        return Err(ApiError::optimistic_lock(&t.def.group, &t.def.plural, t.name()));
    }
    update_locked(st, t, obj, existing, opts, 200)
}

/// kube-apiserver's RBAC storages refuse a Role, ClusterRole or binding granting what its
/// writer does not hold (rbac_escalation.rs); only with RBAC, where the writer is known.
fn no_escalation(st: &State, t: &Target, obj: &Value, existing: Option<&Value>, opts: &WriteOpts) -> ApiResult<()> {
    let Some(user) = &opts.user else { return Ok(()) };
    if t.def.group != crate::rbac::GROUP || t.subresource.is_some() {
        return Ok(());
    }
    let old = existing.map(|e| external(t, e));
    let write = crate::rbac_escalation::Write { user, resource: &t.def.plural, namespace: t.ns(), name: t.name(), new: obj, old: old.as_ref() };
    crate::rbac_escalation::check(&crate::authn::policy_of(st), &write)
}

/// names.SimpleNameGenerator: the generateName is cut to 58 characters before its 5-character
/// random suffix.
fn truncate_generate_name(base: &str) -> &str {
    const MAX_GENERATED_NAME_LENGTH: usize = 63 - 5;
    match base.char_indices().nth(MAX_GENERATED_NAME_LENGTH) {
        Some((i, _)) => &base[..i],
        None => base,
    }
}

/// etcd's default request limit (--max-request-bytes, 1.5 MiB). A real server sends etcd the
/// encoded object (JSON for custom resources, protobuf for built-ins); the JSON size stands in
/// for both here.
const ETCD_MAX_REQUEST_BYTES: usize = 1024 * 1024 + 512 * 1024;

fn check_storage_size(internal: &Value) -> ApiResult<()> {
    let size = serde_json::to_vec(internal).map(|b| b.len()).unwrap_or(0);
    if size > ETCD_MAX_REQUEST_BYTES {
        return Err(ApiError::etcd_request_too_large());
    }
    Ok(())
}

/// The JSON of a new, empty object of the target's kind as kube-apiserver's field manager sees
/// it on create: Go's zero value, where structs without omitempty are present (`{}`) and
/// zero times are null, so only what they contain counts as added.
fn empty_object(t: &Target) -> Value {
    match (t.def.group.as_str(), t.def.plural.as_str()) {
        ("events.k8s.io", "events") => json!({"eventTime": null, "regarding": {}, "deprecatedSource": {}, "deprecatedFirstTimestamp": null, "deprecatedLastTimestamp": null}),
        ("", "events") => json!({"involvedObject": {}, "source": {}, "firstTimestamp": null, "lastTimestamp": null, "eventTime": null}),
        ("", "namespaces") => json!({"spec": {}, "status": {}}),
        ("coordination.k8s.io", "leases") => json!({"spec": {}}),
        ("apiextensions.k8s.io", "customresourcedefinitions") => json!({"spec": {"names": {}}, "status": {"acceptedNames": {}}}),
        _ => json!({}),
    }
}
