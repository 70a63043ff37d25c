//! The REST semantics of kube-apiserver's generic registry and the strategies of the served
//! resources: create, update, patch (merge, JSON, strategic, apply), delete, list, get.
//! Everything runs under the store lock, so each request is atomic.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::convert::{to_external, to_internal};
use crate::patch;
use crate::registry::{ResourceDef, crd_status, def_from_crd};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::{ApiError, ApiResult, ErrType, FieldError, success_status};
use crate::store::{State, Store, meta_str};
use crate::util::{is_dns1123_label, is_dns1123_subdomain, new_uid, now_rfc3339, random_suffix};
use crate::validation::process_custom_resource;

/// What a request addresses.
#[derive(Debug, Clone)]
pub struct Target {
    pub def: ResourceDef,
    pub version: String,
    /// Namespace from the URL (None for cluster-scoped or all-namespaces requests).
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

impl Target {
    fn ns(&self) -> &str {
        self.namespace.as_deref().unwrap_or("")
    }
    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }
    fn is_status(&self) -> bool {
        self.subresource.as_deref() == Some("status")
    }
    fn schema(&self) -> Option<&Value> {
        self.def.version(&self.version).and_then(|v| v.schema.as_ref())
    }
    fn has_status_subresource(&self) -> bool {
        self.def.version(&self.version).is_some_and(|v| v.status_subresource)
    }
    fn not_found(&self, name: &str) -> ApiError {
        ApiError::not_found(&self.def.group, &self.def.plural, name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    Ignore,
    #[default]
    Warn,
    Strict,
}

#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    pub dry_run: bool,
    pub field_manager: Option<String>,
    pub field_validation: FieldValidation,
    pub force: bool,
    /// The request's User-Agent (the field manager when none is given).
    pub user_agent: String,
    /// Set by server-side apply, which records its own ownership.
    pub applying: bool,
}

impl WriteOpts {
    fn manager(&self) -> String {
        self.field_manager.clone().filter(|m| !m.is_empty()).unwrap_or_else(|| patch::manager_from_user_agent(&self.user_agent))
    }
}

#[derive(Debug, Clone, Default)]
pub struct DeleteOpts {
    pub dry_run: bool,
    pub propagation: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
}

/// A successful answer.
#[derive(Debug)]
pub struct Resp {
    pub code: u16,
    pub body: Value,
    pub warnings: Vec<String>,
}

fn resp(code: u16, body: Value) -> Resp {
    Resp { code, body, warnings: vec![] }
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"].as_object_mut().unwrap()
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|f| f.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

fn without_meta(obj: &Value) -> Value {
    let mut c = obj.clone();
    if let Some(m) = c.as_object_mut() {
        m.remove("metadata");
        m.remove("apiVersion");
        m.remove("kind");
    }
    c
}

/// Top-level fields of the typed built-ins (others are dropped by decoding, as in Go).
fn builtin_fields(def: &ResourceDef) -> Option<&'static [&'static str]> {
    Some(match (def.group.as_str(), def.plural.as_str()) {
        ("", "configmaps") => &["apiVersion", "kind", "metadata", "data", "binaryData", "immutable"],
        ("", "namespaces") => &["apiVersion", "kind", "metadata", "spec", "status"],
        ("coordination.k8s.io", "leases") => &["apiVersion", "kind", "metadata", "spec"],
        ("apiextensions.k8s.io", _) => &["apiVersion", "kind", "metadata", "spec", "status"],
        ("", "events") => &[
            "apiVersion", "kind", "metadata", "involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp", "count", "type",
            "eventTime", "series", "action", "related", "reportingComponent", "reportingInstance",
        ],
        ("events.k8s.io", "events") => &[
            "apiVersion", "kind", "metadata", "eventTime", "series", "reportingController", "reportingInstance", "action", "reason", "regarding",
            "related", "note", "type", "deprecatedSource", "deprecatedFirstTimestamp", "deprecatedLastTimestamp", "deprecatedCount",
        ],
        _ => return None,
    })
}

const META_FIELDS: [&str; 15] = [
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
    "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences", "finalizers", "managedFields",
];

/// Prunes, defaults and validates; returns (errors, unknown field paths).
fn validate(t: &Target, obj: &mut Value, old: Option<&Value>) -> (Vec<FieldError>, Vec<String>) {
    let mut errs = vec![];
    let mut unknown = vec![];
    let def = &t.def;
    if def.is_custom() {
        if let Some(schema) = t.schema() {
            let out = process_custom_resource(schema, obj);
            errs.extend(out.errors);
            unknown.extend(out.unknown);
        }
    } else if let Some(fields) = builtin_fields(def) {
        if let Some(m) = obj.as_object_mut() {
            let extra: Vec<String> = m.keys().filter(|k| !fields.contains(&k.as_str())).cloned().collect();
            for k in extra {
                m.remove(&k);
                unknown.push(k);
            }
        }
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            let extra: Vec<String> = m.keys().filter(|k| !META_FIELDS.contains(&k.as_str())).cloned().collect();
            for k in extra {
                m.remove(&k);
                unknown.push(format!("metadata.{k}"));
            }
        }
    }
    // ObjectMeta.
    let name = meta_str(obj, "name");
    if !name.is_empty() {
        let ok = if def.plural == "namespaces" && def.group.is_empty() { is_dns1123_label(name) } else { is_dns1123_subdomain(name) };
        if !ok && old.is_none() {
            let label = def.plural == "namespaces";
            errs.push(FieldError::invalid(
                "metadata.name",
                name.into(),
                if label {
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string()
                } else {
                    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into()
                },
            ));
        }
    }
    for (key, kind) in [("labels", "labels"), ("annotations", "annotations")] {
        if let Some(m) = obj.pointer(&format!("/metadata/{key}")) {
            match m.as_object() {
                Some(m) => {
                    for v in m.values() {
                        if !v.is_string() {
                            errs.push(FieldError::new(ErrType::TypeInvalid, format!("metadata.{kind}"), Some(v.clone()), "must be a string"));
                        } else if kind == "labels" {
                            let s = v.as_str().unwrap();
                            if s.len() > 63 || !s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
                                errs.push(FieldError::invalid(
                                    "metadata.labels",
                                    v.clone(),
                                    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                                ));
                            }
                        }
                    }
                }
                None if !m.is_null() => errs.push(FieldError::new(ErrType::TypeInvalid, format!("metadata.{kind}"), Some(m.clone()), "must be a map")),
                None => {}
            }
        }
    }
    if let Some(refs) = obj.pointer("/metadata/ownerReferences").and_then(Value::as_array) {
        let mut controllers = 0;
        for (i, r) in refs.iter().enumerate() {
            for f in ["apiVersion", "kind", "name", "uid"] {
                if r.get(f).and_then(Value::as_str).unwrap_or("").is_empty() {
                    let detail = match f {
                        "uid" => "uid must not be empty",
                        "name" => "name must not be empty",
                        "kind" => "kind must not be empty",
                        _ => "version must not be empty",
                    };
                    errs.push(FieldError::invalid(format!("metadata.ownerReferences[{i}].{f}"), r.get(f).cloned().unwrap_or("".into()), detail));
                }
            }
            if r.get("controller") == Some(&Value::Bool(true)) {
                controllers += 1;
            }
        }
        if controllers > 1 {
            errs.push(FieldError::invalid("metadata.ownerReferences", Value::Array(refs.clone()), "Only one reference can have Controller set to true."));
        }
    }
    if let Some(old) = old
        && old.pointer("/metadata/deletionTimestamp").is_some() {
            let before = finalizers(old);
            let added: Vec<String> = finalizers(obj).into_iter().filter(|f| !before.contains(f)).collect();
            if !added.is_empty() {
                errs.push(FieldError::forbidden(
                    "metadata.finalizers",
                    format!("no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}", added.iter().map(|f| format!("{f:?}")).collect::<Vec<_>>().join(", ")),
                ));
            }
        }
    // Built-in strategies.
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "configmaps") => {
            // A patch may bring wrapped or bad base64 too.
            if let Err(e) = canonical_binary_data(obj) {
                errs.push(FieldError::invalid("binaryData", Value::Null, e));
            }
            errs.extend(validate_configmap(obj, old))
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => errs.extend(validate_crd(obj)),
        _ => {}
    }
    (errs, unknown)
}

/// binaryData is `[]byte` in kube-apiserver: decoded from base64 as Go does (standard
/// alphabet, `\r` and `\n` ignored, as `kubectl kustomize` wraps lines at 76 columns) and
/// written back in canonical form, so readers get one unwrapped base64 string.
fn canonical_binary_data(obj: &mut Value) -> Result<(), String> {
    use base64::Engine as _;
    let Some(map) = obj.get_mut("binaryData").and_then(Value::as_object_mut) else { return Ok(()) };
    for value in map.values_mut() {
        let Some(text) = value.as_str() else { continue };
        let compact: String = text.chars().filter(|c| *c != '\r' && *c != '\n').collect();
        let bytes = base64::engine::general_purpose::STANDARD.decode(&compact).map_err(|e| format!("illegal base64 data: {e}"))?;
        *value = base64::engine::general_purpose::STANDARD.encode(bytes).into();
    }
    Ok(())
}

fn validate_configmap(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = vec![];
    let mut total = 0usize;
    let mut seen = BTreeSet::new();
    for field in ["data", "binaryData"] {
        if let Some(m) = obj.get(field).and_then(Value::as_object) {
            for (k, v) in m {
                if k.is_empty() || k.len() > 253 || !k.chars().all(|c| c.is_ascii_alphanumeric() || "-._".contains(c)) {
                    errs.push(FieldError::invalid(
                        format!("{field}[{k}]"),
                        k.clone().into(),
                        "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                    ));
                }
                if !seen.insert(k.clone()) {
                    errs.push(FieldError::invalid(format!("data[{k}]"), k.clone().into(), "duplicate of key present in binaryData"));
                }
                match v.as_str() {
                    Some(s) if field == "binaryData" => total += s.len() * 3 / 4,
                    Some(s) => total += s.len(),
                    None => errs.push(FieldError::new(ErrType::TypeInvalid, format!("{field}[{k}]"), Some(v.clone()), "must be a string")),
                }
            }
        }
    }
    if total > 1024 * 1024 {
        errs.push(FieldError::new(ErrType::TooLong, "[]", Some("".into()), "may not be more than 1048576 bytes"));
    }
    if let Some(old) = old
        && old.get("immutable") == Some(&Value::Bool(true)) {
            if obj.get("data") != old.get("data") {
                errs.push(FieldError::forbidden("data", "field is immutable when `immutable` is set"));
            }
            if obj.get("binaryData") != old.get("binaryData") {
                errs.push(FieldError::forbidden("binaryData", "field is immutable when `immutable` is set"));
            }
            if obj.get("immutable") != Some(&Value::Bool(true)) {
                errs.push(FieldError::forbidden("immutable", "field is immutable when `immutable` is set"));
            }
        }
    errs
}

fn validate_crd(obj: &Value) -> Vec<FieldError> {
    let mut errs = vec![];
    let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
    let (group, plural, kind) = (s("/spec/group"), s("/spec/names/plural"), s("/spec/names/kind"));
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else if !group.contains('.') {
        errs.push(FieldError::invalid("spec.group", group.clone().into(), "should be a domain with at least one dot"));
    }
    if plural.is_empty() {
        errs.push(FieldError::required("spec.names.plural", ""));
    }
    if kind.is_empty() {
        errs.push(FieldError::required("spec.names.kind", ""));
    }
    let name = meta_str(obj, "name");
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        errs.push(FieldError::invalid("metadata.name", name.into(), "must be spec.names.plural+\".\"+spec.group"));
    }
    match s("/spec/scope").as_str() {
        "Namespaced" | "Cluster" => {}
        "" => errs.push(FieldError::required("spec.scope", "")),
        other => errs.push(FieldError::new(ErrType::NotSupported, "spec.scope", Some(other.into()), "supported values: \"Cluster\", \"Namespaced\"")),
    }
    match obj.pointer("/spec/versions").and_then(Value::as_array) {
        Some(vs) if !vs.is_empty() => {
            let storage = vs.iter().filter(|v| v["storage"] == json!(true)).count();
            if storage != 1 {
                errs.push(FieldError::invalid("spec.versions", Value::Array(vs.clone()), "must have exactly one version marked as storage version"));
            }
            for (i, v) in vs.iter().enumerate() {
                if v.pointer("/schema/openAPIV3Schema").is_none() {
                    errs.push(FieldError::required(format!("spec.versions[{i}].schema.openAPIV3Schema"), "schemas are required"));
                }
            }
        }
        _ => errs.push(FieldError::required("spec.versions", "")),
    }
    errs
}

fn unknown_handling(t: &Target, opts: &WriteOpts, unknown: &[String]) -> ApiResult<Vec<String>> {
    if unknown.is_empty() {
        return Ok(vec![]);
    }
    match opts.field_validation {
        FieldValidation::Ignore => Ok(vec![]),
        FieldValidation::Warn => Ok(unknown.iter().map(|u| format!("unknown field {u:?}")).collect()),
        FieldValidation::Strict => Err(ApiError::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
            unknown.iter().map(|u| format!("unknown field {u:?}")).collect::<Vec<_>>().join(", "),
            kind = t.def.kind,
            version = t.version,
        ))),
    }
}

/// Checks apiVersion/kind of a request body against the target.
fn check_type(t: &Target, obj: &mut Value) -> ApiResult<()> {
    if !obj.is_object() {
        return Err(ApiError::bad_request("the object provided is unrecognized (must be of type object)"));
    }
    let want_av = t.def.api_version(&t.version);
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
    let av = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("").to_string();
    if t.def.is_custom() && kind.is_empty() {
        return Err(ApiError::bad_request(format!("Object 'Kind' is missing in '{}'", obj)));
    }
    if !av.is_empty() && av != want_av {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({want_av})"
        )));
    }
    if !kind.is_empty() && kind != t.def.kind {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            t.def.kind
        )));
    }
    if (t.def.group.as_str(), t.def.plural.as_str()) == ("", "configmaps") {
        canonical_binary_data(obj).map_err(|e| {
            ApiError::bad_request(format!("ConfigMap in version {:?} cannot be handled as a ConfigMap: {e}", t.version))
        })?;
    }
    obj["apiVersion"] = want_av.into();
    obj["kind"] = t.def.kind.clone().into();
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    Ok(())
}

fn check_namespace(t: &Target, obj: &mut Value) -> ApiResult<()> {
    if t.def.namespaced {
        let body_ns = meta_str(obj, "namespace").to_string();
        if body_ns.is_empty() {
            meta_mut(obj).insert("namespace".into(), t.ns().into());
        } else if body_ns != t.ns() {
            return Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
        }
    } else {
        meta_mut(obj).remove("namespace");
    }
    Ok(())
}

/// Fills system fields and applies PrepareForCreate of the resource's strategy.
fn prepare_create(t: &Target, obj: &mut Value, now: &str) {
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
fn prepare_update(t: &Target, new: &mut Value, old: &Value) -> Vec<FieldError> {
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

fn invalid(t: &Target, obj: &Value, errs: &[FieldError]) -> ApiError {
    ApiError::invalid(&t.def.group, &t.def.kind, meta_str(obj, "name"), errs)
}

/// Side effects of storing an object of a built-in kind (CRDs register their resources).
fn after_put(st: &mut State, t: &Target, stored: &Value) {
    if t.def.group == "apiextensions.k8s.io" && t.def.plural == "customresourcedefinitions"
        && let Some(def) = def_from_crd(stored) {
            st.registry.add(def);
        }
}

fn external(t: &Target, obj: &Value) -> Value {
    to_external(&t.def, &t.version, obj)
}

pub fn get(store: &Store, t: &Target) -> ApiResult<Value> {
    let st = store.lock();
    st.get(&t.def.storage, t.ns(), t.name()).map(|o| external(t, o)).ok_or_else(|| t.not_found(t.name()))
}

pub fn create(store: &Store, t: &Target, mut obj: Value, opts: &WriteOpts) -> ApiResult<Resp> {
    check_type(t, &mut obj)?;
    let mut st = store.lock();
    let r = create_locked(&mut st, t, obj, opts, None)?;
    store.changed(st.rv);
    Ok(r)
}

fn create_locked(st: &mut State, t: &Target, mut obj: Value, opts: &WriteOpts, name_hint: Option<&str>) -> ApiResult<Resp> {
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
    let generate = meta_str(&obj, "generateName").to_string();
    let fixed_name = meta_str(&obj, "name").to_string();
    if fixed_name.is_empty() && generate.is_empty() {
        return Err(invalid(t, &obj, &[FieldError::required("metadata.name", "name or generateName is required")]));
    }
    let now = now_rfc3339();
    prepare_create(t, &mut obj, &now);
    let (errs, unknown) = validate(t, &mut obj, None);
    if !opts.applying {
        let av = t.def.api_version(&t.version);
        patch::track_update(&json!({}), &mut obj, t.schema(), &opts.manager(), "", &av, &now);
    }
    let mut warnings = unknown_handling(t, opts, &unknown)?;
    let ns = meta_str(&obj, "namespace").to_string();
    let mut attempts = 0;
    loop {
        if fixed_name.is_empty() {
            meta_mut(&mut obj).insert("name".into(), format!("{generate}{}", random_suffix()).into());
        }
        let name = meta_str(&obj, "name").to_string();
        if !errs.is_empty() {
            return Err(invalid(t, &obj, &errs));
        }
        if st.get(&t.def.storage, &ns, &name).is_some() {
            attempts += 1;
            if fixed_name.is_empty() && attempts < 8 {
                continue;
            }
            return Err(ApiError::already_exists(&t.def.group, &t.def.plural, &name));
        }
        break;
    }
    let internal = to_internal(&t.def, &t.version, obj);
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
        return Err(ApiError::bad_request(format!("invalid resource version: {rv:?}")));
    } else if rv != cur_rv {
        return Err(ApiError::optimistic_lock(&t.def.group, &t.def.plural, t.name()));
    }
    let r = update_locked(&mut st, t, obj, &existing, opts, 200)?;
    store.changed(st.rv);
    Ok(r)
}

/// Stores an update of `existing` (already resourceVersion-checked).
fn update_locked(st: &mut State, t: &Target, obj: Value, existing: &Value, opts: &WriteOpts, code: u16) -> ApiResult<Resp> {
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

fn is_namespace(t: &Target) -> bool {
    t.def.group.is_empty() && t.def.plural == "namespaces"
}

fn after_remove(st: &mut State, t: &Target, gone: &Value) {
    if t.def.group == "apiextensions.k8s.io" && t.def.plural == "customresourcedefinitions"
        && let Some(def) = def_from_crd(gone) {
            st.objects.remove(&def.storage);
            st.registry.remove(&def.gr());
        }
}

pub const APPLY: &str = "application/apply-patch+yaml";
pub const MERGE: &str = "application/merge-patch+json";
pub const JSONPATCH: &str = "application/json-patch+json";
pub const STRATEGIC: &str = "application/strategic-merge-patch+json";

pub fn patch(store: &Store, t: &Target, content_type: &str, body: &[u8], opts: &WriteOpts) -> ApiResult<Resp> {
    let ct = content_type.split(';').next().unwrap_or("").trim();
    let accepted: &[&str] = if t.def.is_custom() { &[JSONPATCH, MERGE, APPLY] } else { &[JSONPATCH, MERGE, STRATEGIC, APPLY] };
    if !accepted.contains(&ct) {
        return Err(ApiError::unsupported_media_type(accepted));
    }
    if ct == APPLY {
        return apply(store, t, body, opts);
    }
    let mut st = store.lock();
    let existing = st.get(&t.def.storage, t.ns(), t.name()).cloned().ok_or_else(|| t.not_found(t.name()))?;
    let mut obj = external(t, &existing);
    match ct {
        JSONPATCH => patch::json_patch(&mut obj, body)?,
        _ => {
            let p: Value = serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            if !p.is_object() {
                return Err(ApiError::bad_request("json: cannot unmarshal into Go value of type map[string]interface {}"));
            }
            patch::merge_patch(&mut obj, &p);
        }
    }
    let r = finish_patch(&mut st, t, obj, &existing, opts)?;
    store.changed(st.rv);
    Ok(r)
}

/// Runs a patched object through the update path.
fn finish_patch(st: &mut State, t: &Target, mut obj: Value, existing: &Value, opts: &WriteOpts) -> ApiResult<Resp> {
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
    let rv = meta_str(&obj, "resourceVersion").to_string();
    let cur = meta_str(existing, "resourceVersion").to_string();
    if rv.is_empty() {
        meta_mut(&mut obj).insert("resourceVersion".into(), cur.into());
    } else if rv != cur {
        return Err(ApiError::optimistic_lock(&t.def.group, &t.def.plural, t.name()));
    }
    update_locked(st, t, obj, existing, opts, 200)
}

fn apply(store: &Store, t: &Target, body: &[u8], opts: &WriteOpts) -> ApiResult<Resp> {
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

#[derive(Debug, Default, Clone)]
pub struct ListQuery {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
}

pub struct ListResult {
    pub items: Vec<Value>,
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<usize>,
}

pub const CONTINUE_TOO_OLD: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

pub fn selectors(t: &Target, q: &ListQuery) -> ApiResult<(LabelSelector, FieldSelector)> {
    let ls = LabelSelector::parse(q.label_selector.as_deref().unwrap_or(""))?;
    let fs = FieldSelector::parse(q.field_selector.as_deref().unwrap_or(""), &t.def)?;
    Ok((ls, fs))
}

pub fn list(store: &Store, t: &Target, q: &ListQuery) -> ApiResult<ListResult> {
    let (ls, fs) = selectors(t, q)?;
    let st = store.lock();
    let mut list_rv = st.rv;
    let mut start: Option<(String, String)> = None;
    if let Some(c) = q.continue_token.as_deref().filter(|c| !c.is_empty()) {
        let tok: Value = hex::decode(c)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(|| ApiError::bad_request(format!("continue key is not valid: {c}")))?;
        let rv = tok["rv"].as_u64().unwrap_or(0);
        if rv < st.compacted_rv {
            let mut e = ApiError::expired(CONTINUE_TOO_OLD);
            e.details = None;
            return Err(e);
        }
        list_rv = rv;
        start = Some((tok["ns"].as_str().unwrap_or("").into(), tok["name"].as_str().unwrap_or("").into()));
    } else if let Some(rv) = q.resource_version.as_deref().filter(|r| !r.is_empty() && *r != "0") {
        let n: u64 = rv.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}")))?;
        if q.resource_version_match.as_deref() == Some("Exact") && n < st.compacted_rv {
            return Err(ApiError::expired(format!("too old resource version: {n} ({})", st.compacted_rv)));
        }
    }
    let ns = t.namespace.as_deref();
    let mut matched = st
        .list(&t.def.storage, ns)
        .filter(|o| start.as_ref().is_none_or(|(sn, sname)| (meta_str(o, "namespace"), meta_str(o, "name")) > (sn.as_str(), sname.as_str())))
        .filter(|o| ls.matches(o) && fs.matches(o));
    let mut items = vec![];
    let limit = q.limit.filter(|l| *l > 0);
    let mut next = None;
    let mut remaining = None;
    for o in matched.by_ref() {
        if limit.is_some_and(|l| items.len() >= l) {
            let last: &Value = items.last().unwrap();
            next = Some(hex::encode(serde_json::to_vec(&json!({"rv": list_rv, "ns": meta_str(last, "namespace"), "name": meta_str(last, "name")})).unwrap()));
            remaining = Some(1 + matched.count());
            break;
        }
        items.push(external(t, o));
    }
    Ok(ListResult { items, resource_version: list_rv, continue_token: next, remaining: if ls.is_empty() && q.field_selector.is_none() { remaining } else { None } })
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
