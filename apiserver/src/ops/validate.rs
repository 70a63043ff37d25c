//! Validation of a write: pruning of unknown fields, the CRD schema, ObjectMeta, and the
//! built-in kinds' own rules (ConfigMap, Secret, CRD).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{Target, secret};
use crate::celrules;
use crate::convert::to_internal;
use crate::eventrules;
use crate::godecode;
use crate::objectmeta::{NameRule, config_map_key_errors, too_long, validate_object_meta, validate_object_meta_update};
use crate::registry::ResourceDef;
use crate::status::{ErrType, FieldError};
use crate::store::meta_str;
use crate::validation::process_custom_resource;

/// Top-level fields of the typed built-ins (others are dropped by decoding, as in Go).
fn builtin_fields(def: &ResourceDef) -> Option<&'static [&'static str]> {
    Some(match (def.group.as_str(), def.plural.as_str()) {
        ("", "configmaps") => &["apiVersion", "kind", "metadata", "data", "binaryData", "immutable"],
        ("", "secrets") => &["apiVersion", "kind", "metadata", "data", "stringData", "type", "immutable"],
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

/// Prunes, defaults and validates; returns (errors, unknown field paths). The errors come in
/// kube-apiserver's order: on create the strategy's (ObjectMeta with the resource's name rule,
/// then the kind's own rules), or, only when those pass, the generic registry's common
/// ObjectMeta check; on update the common checks followed by the strategy's.
pub(super) fn validate(t: &Target, obj: &mut Value, old: Option<&Value>) -> (Vec<FieldError>, Vec<String>) {
    let mut unknown = vec![];
    let mut kind_errs = vec![];
    let def = &t.def;
    if def.is_custom() {
        if let Some(schema) = t.schema() {
            let out = process_custom_resource(schema, obj);
            kind_errs.extend(out.errors);
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
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "configmaps") => {
            // A patch may bring wrapped or bad base64 too.
            if let Err(e) = canonical_binary_data(obj) {
                kind_errs.push(FieldError::invalid("binaryData", Value::Null, e));
            }
            if let Some(old) = old {
                kind_errs.extend(configmap_immutability(obj, old));
            }
            kind_errs.extend(validate_configmap(obj));
        }
        ("", "secrets") => {
            // A patch may bring stringData, a cleared type or bad base64 too.
            if let Err(e) = secret::normalize(obj) {
                kind_errs.push(FieldError::invalid("data", Value::Null, e));
            }
            // ValidateSecretUpdate: ObjectMetaUpdate (in the strategy's part), the type and
            // `immutable`, then all of ValidateSecret, ObjectMeta included.
            if let Some(old) = old {
                kind_errs.extend(secret::validate_update(obj, old));
                kind_errs.extend(validate_object_meta(obj, NameRule::Subdomain));
            }
            kind_errs.extend(secret::validate(obj));
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => kind_errs.extend(validate_crd(obj)),
        _ => {}
    }
    let errs = match old {
        None => {
            let mut errs = strategy_meta_create(t, obj);
            errs.extend(kind_errs);
            errs.extend(cel_rules(t, obj, None, &errs));
            if errs.is_empty() {
                errs = validate_object_meta(obj, NameRule::PathSegment);
            }
            errs
        }
        Some(old) => {
            let mut common = validate_object_meta(obj, NameRule::PathSegment);
            common.extend(validate_object_meta_update(obj, old));
            let mut errs = strategy_meta_update(t, obj, old);
            errs.extend(kind_errs);
            errs.extend(cel_rules(t, obj, Some(old), &errs));
            common.extend(errs);
            common
        }
    };
    (errs, unknown)
}

/// The CRD's `x-kubernetes-validations`, last in the custom resource strategy; skipped (with
/// one error saying so) when the strategy already found a blocking error.
fn cel_rules(t: &Target, obj: &Value, old: Option<&Value>, errs_so_far: &[FieldError]) -> Vec<FieldError> {
    let Some(schema) = t.schema().filter(|s| t.def.is_custom() && celrules::has_rules(s)) else { return vec![] };
    if let Some(blocked) = celrules::blocking_error(errs_so_far) {
        return vec![blocked];
    }
    celrules::validate(schema, obj, old)
}

fn is_event(def: &ResourceDef) -> bool {
    def.plural == "events" && (def.group.is_empty() || def.group == "events.k8s.io")
}

/// The ObjectMeta part of the strategy's Validate (Events: all of ValidateEventCreate).
fn strategy_meta_create(t: &Target, obj: &Value) -> Vec<FieldError> {
    let def = &t.def;
    if is_event(def) {
        let internal = to_internal(def, &t.version, obj.clone());
        return eventrules::validate_create(&internal, def.group == "events.k8s.io");
    }
    let rule = match (def.group.as_str(), def.plural.as_str()) {
        ("", "namespaces") => NameRule::Label,
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("");
            NameRule::Crd { matches_plural_group: meta_str(obj, "name") == format!("{}.{}", s("/spec/names/plural"), s("/spec/group")) }
        }
        _ => NameRule::Subdomain,
    };
    validate_object_meta(obj, rule)
}

/// The ObjectMeta part of the strategy's ValidateUpdate (Events: all of ValidateEventUpdate).
fn strategy_meta_update(t: &Target, obj: &Value, old: &Value) -> Vec<FieldError> {
    let def = &t.def;
    if is_event(def) {
        let (new_i, old_i) = (to_internal(def, &t.version, obj.clone()), to_internal(def, &t.version, old.clone()));
        return eventrules::validate_update(&new_i, &old_i, def.group == "events.k8s.io");
    }
    let mut errs = validate_object_meta_update(obj, old);
    if (def.group.as_str(), def.plural.as_str()) == ("", "configmaps") {
        // ValidateConfigMapUpdate also runs ValidateConfigMap, ObjectMeta included.
        errs.extend(validate_object_meta(obj, NameRule::Subdomain));
    }
    errs
}

/// binaryData is `[]byte` in kube-apiserver: decoded from base64 as Go does (standard
/// alphabet, `\r` and `\n` ignored, as `kubectl kustomize` wraps lines at 76 columns) and
/// written back in canonical form, so readers get one unwrapped base64 string.
pub(super) fn canonical_binary_data(obj: &mut Value) -> Result<(), String> {
    use base64::Engine as _;
    let Some(map) = obj.get_mut("binaryData").and_then(Value::as_object_mut) else { return Ok(()) };
    for value in map.values_mut() {
        let Some(text) = value.as_str() else { continue };
        let bytes = godecode::base64_decode(text.as_bytes()).map_err(godecode::base64_error)?;
        *value = base64::engine::general_purpose::STANDARD.encode(bytes).into();
    }
    Ok(())
}

/// ValidateConfigMap after ValidateObjectMeta: keys, and the total size of the values, which
/// is `len(value)` over `data` (UTF-8 bytes) and over `binaryData` (decoded bytes: base64 on
/// the wire does not count against it), keys not counted, at most corev1.MaxSecretSize
/// (1 MiB). Over it, one TooLong error on the path `field.NewPath("")`, which prints as `[]`:
/// `ConfigMap "NAME" is invalid: []: Too long: may not be more than 1048576 bytes`.
fn validate_configmap(obj: &Value) -> Vec<FieldError> {
    let mut errs = vec![];
    let mut total = 0usize;
    let mut seen = BTreeSet::new();
    for field in ["data", "binaryData"] {
        if let Some(m) = obj.get(field).and_then(Value::as_object) {
            for (k, v) in m {
                for msg in config_map_key_errors(k) {
                    errs.push(FieldError::invalid(format!("{field}[{k}]"), k.clone().into(), msg));
                }
                if !seen.insert(k.clone()) {
                    errs.push(FieldError::invalid(format!("data[{k}]"), k.clone().into(), "duplicate of key present in binaryData"));
                }
                match v.as_str() {
                    // Bad base64 is reported by canonical_binary_data and counts as nothing.
                    Some(s) if field == "binaryData" => total += godecode::base64_decode(s.as_bytes()).map_or(0, |b| b.len()),
                    Some(s) => total += s.len(),
                    None => errs.push(FieldError::new(ErrType::TypeInvalid, format!("{field}[{k}]"), Some(v.clone()), "must be a string")),
                }
            }
        }
    }
    if total > secret::MAX_SECRET_SIZE {
        errs.push(FieldError::new(ErrType::TooLong, "[]", Some("".into()), too_long(secret::MAX_SECRET_SIZE)));
    }
    errs
}

/// ConfigMap fields frozen by `immutable: true`.
fn configmap_immutability(obj: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = vec![];
    if old.get("immutable") == Some(&Value::Bool(true)) {
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
                match v.pointer("/schema/openAPIV3Schema") {
                    None => errs.push(FieldError::required(format!("spec.versions[{i}].schema.openAPIV3Schema"), "schemas are required")),
                    Some(schema) => errs.extend(celrules::compile_errors(schema, &format!("spec.versions[{i}].schema.openAPIV3Schema"))),
                }
            }
        }
        _ => errs.push(FieldError::required("spec.versions", "")),
    }
    errs
}
