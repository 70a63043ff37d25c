//! Validation of a write: pruning of unknown fields, the CRD schema, ObjectMeta, and the
//! built-in kinds' own rules (ConfigMap, CRD).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{Target, finalizers};
use crate::registry::ResourceDef;
use crate::status::{ErrType, FieldError};
use crate::store::meta_str;
use crate::util::{is_dns1123_label, is_dns1123_subdomain};
use crate::validation::process_custom_resource;

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
pub(super) fn validate(t: &Target, obj: &mut Value, old: Option<&Value>) -> (Vec<FieldError>, Vec<String>) {
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
pub(super) fn canonical_binary_data(obj: &mut Value) -> Result<(), String> {
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
