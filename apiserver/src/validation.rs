//! Structural-schema handling for custom resources, in kube-apiserver's order: drop nulls of
//! non-nullable fields, apply defaults, prune unknown fields, then validate types,
//! required, enum, bounds and lengths. Error messages follow kube-openapi's validator as
//! apiextensions-apiserver converts them into field errors.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use serde_json::{Map, Value};

use crate::status::{ErrType, FieldError};
use crate::goquote::Quoted;

#[derive(Debug, Default)]
pub struct Outcome {
    pub errors: Vec<FieldError>,
    /// Paths of fields that were pruned (for fieldValidation=Strict/Warn).
    pub unknown: Vec<String>,
}

const OBJECT_META_FIELDS: [&str; 15] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Go's `%v` for a float64: strconv 'g' with the shortest digits, in exponent form when the
/// exponent is < -4 or >= 6 (so 1e6 prints as "1e+06", as in kube-openapi's messages).
pub fn go_float(f: f64) -> String {
    if f == 0.0 {
        return "0".into();
    }
    let exp = f.abs().log10().floor() as i32;
    if (-4..6).contains(&exp) {
        return format!("{f}");
    }
    let e = format!("{f:e}");
    let (m, x) = e.split_once('e').unwrap_or((&e, "0"));
    let x: i32 = x.parse().unwrap_or(0);
    format!("{m}e{}{:02}", if x < 0 { '-' } else { '+' }, x.abs())
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_ok(want: &str, v: &Value) -> bool {
    match want {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "number" => v.is_number(),
        "integer" => match v {
            Value::Number(n) => n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0),
            _ => false,
        },
        _ => true,
    }
}

fn child(path: &str, k: &str) -> String {
    if path.is_empty() { k.to_string() } else { format!("{path}.{k}") }
}

fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name).and_then(Value::as_bool).unwrap_or(false)
}

fn regex(p: &str) -> Option<regex::Regex> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<regex::Regex>>>> = OnceLock::new();
    let mut c = CACHE.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    c.entry(p.to_string()).or_insert_with(|| regex::Regex::new(p).ok()).clone()
}

/// Prunes, defaults and validates a whole custom resource against its version's schema.
pub fn process_custom_resource(schema: &Value, obj: &mut Value) -> Outcome {
    let mut out = Outcome::default();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        let unknown: Vec<String> = meta.keys().filter(|k| !OBJECT_META_FIELDS.contains(&k.as_str())).cloned().collect();
        for k in unknown {
            meta.remove(&k);
            out.unknown.push(format!("metadata.{k}"));
        }
    }
    walk(schema, obj, "", &mut out, true, true);
    out
}

/// Validation only (no pruning) of a value against a schema, for anyOf/oneOf/allOf branches.
fn check(schema: &Value, v: &Value, path: &str) -> Vec<FieldError> {
    let mut copy = v.clone();
    let mut o = Outcome::default();
    walk(schema, &mut copy, path, &mut o, false, false);
    o.errors
}

fn walk(schema: &Value, value: &mut Value, path: &str, out: &mut Outcome, root: bool, prune: bool) {
    if !schema.is_object() {
        return;
    }
    if value.is_null() && flag(schema, "nullable") {
        return;
    }
    let int_or_string = flag(schema, "x-kubernetes-int-or-string");
    if int_or_string {
        if !(value.is_string() || type_ok("integer", value)) {
            let t = json_type(value);
            out.errors.push(FieldError::new(
                ErrType::TypeInvalid,
                path,
                Some(t.into()),
                format!("{path} in body must be of type integer,string: {}", Quoted(t)),
            ));
            return;
        }
    } else if let Some(t) = schema.get("type").and_then(Value::as_str)
        && !type_ok(t, value) {
            let actual = json_type(value);
            out.errors.push(FieldError::new(
                ErrType::TypeInvalid,
                path,
                Some(actual.into()),
                format!("{path} in body must be of type {t}: {}", Quoted(actual)),
            ));
            return;
        }
    match value {
        Value::Object(map) => walk_object(schema, map, path, out, root, prune),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, it) in items.iter_mut().enumerate() {
                    walk(item_schema, it, &format!("{path}[{i}]"), out, false, prune);
                }
            }
            let n = items.len();
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && n as u64 > max {
                    out.errors.push(FieldError::new(ErrType::TooMany, path, Some(n.into()), format!("must have at most {max} items")));
                }
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                && (n as u64) < min {
                    out.errors.push(FieldError::invalid(path, Value::Array(items.clone()), format!("{path} in body should have at least {min} items")));
                }
            let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
            if list_type == Some("set") {
                for i in 0..n {
                    if items[..i].contains(&items[i]) {
                        out.errors.push(FieldError::new(ErrType::Duplicate, format!("{path}[{i}]"), Some(items[i].clone()), ""));
                    }
                }
            }
        }
        Value::String(s) => {
            let len = s.chars().count() as u64;
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                && len > max {
                    let unit = if max == 1 { "byte" } else { "bytes" };
                    out.errors.push(FieldError::new(ErrType::TooLong, path, Some(s.clone().into()), format!("may not be more than {max} {unit}")));
                }
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                && len < min {
                    out.errors.push(FieldError::invalid(path, s.clone().into(), format!("{path} in body should be at least {min} chars long")));
                }
            if let Some(p) = schema.get("pattern").and_then(Value::as_str)
                && let Some(re) = regex(p)
                    && !re.is_match(s) {
                        out.errors.push(FieldError::invalid(path, s.clone().into(), format!("{path} in body should match '{p}'")));
                    }
        }
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(0.0);
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
                let excl = flag(schema, "exclusiveMinimum");
                if f < min || (excl && f == min) {
                    let op = if excl { "greater than" } else { "greater than or equal to" };
                    out.errors.push(FieldError::invalid(path, Value::Number(n.clone()), format!("{path} in body should be {op} {}", go_float(min))));
                }
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
                let excl = flag(schema, "exclusiveMaximum");
                if f > max || (excl && f == max) {
                    let op = if excl { "less than" } else { "less than or equal to" };
                    out.errors.push(FieldError::invalid(path, Value::Number(n.clone()), format!("{path} in body should be {op} {}", go_float(max))));
                }
            }
            if let Some(m) = schema.get("multipleOf").and_then(Value::as_f64)
                && m != 0.0 && (f / m).fract() != 0.0 {
                    out.errors.push(FieldError::invalid(path, Value::Number(n.clone()), format!("{path} in body should be a multiple of {}", go_float(m))));
                }
        }
        _ => {}
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value) {
            let vals: Vec<String> = allowed
                .iter()
                .map(|a| match a {
                    Value::String(s) => crate::goquote::quote(s),
                    other => crate::goquote::quote(&other.to_string()),
                })
                .collect();
            out.errors.push(FieldError::new(ErrType::NotSupported, path, Some(value.clone()), format!("supported values: {}", vals.join(", "))));
        }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        for s in all {
            out.errors.extend(check(s, value, path));
        }
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array)
        && !any.is_empty() && !any.iter().any(|s| check(s, value, path).is_empty()) {
            out.errors.push(FieldError::invalid(path, value.clone(), format!("{path} in body must validate at least one schema (anyOf)")));
        }
    if let Some(one) = schema.get("oneOf").and_then(Value::as_array) {
        let ok = one.iter().filter(|s| check(s, value, path).is_empty()).count();
        if !one.is_empty() && ok != 1 {
            out.errors.push(FieldError::invalid(path, value.clone(), format!("{path} in body must validate one and only one schema (oneOf)")));
        }
    }
    if let Some(not) = schema.get("not")
        && check(not, value, path).is_empty() {
            out.errors.push(FieldError::invalid(path, value.clone(), format!("{path} in body should not validate the schema (not)")));
        }
}

fn walk_object(schema: &Value, map: &mut Map<String, Value>, path: &str, out: &mut Outcome, root: bool, prune: bool) {
    let empty = Map::new();
    let props = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let embedded = flag(schema, "x-kubernetes-embedded-resource");
    let addl = schema.get("additionalProperties");
    let addl_schema = addl.filter(|a| a.is_object());
    let addl_any = addl.is_some_and(|a| a == &Value::Bool(true));
    let meta_like = |k: &str| (root || embedded) && ["apiVersion", "kind", "metadata"].contains(&k);
    if prune {
        // Nulls of non-nullable fields are pruned before defaulting.
        let nulls: Vec<String> = map
            .iter()
            .filter(|(k, v)| {
                v.is_null() && !meta_like(k) && props.get(*k).or(addl_schema).is_some_and(|s| !flag(s, "nullable"))
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in nulls {
            map.remove(&k);
        }
        for (k, s) in props {
            if !map.contains_key(k)
                && let Some(d) = s.get("default") {
                    map.insert(k.clone(), d.clone());
                }
        }
    }
    let keys: Vec<String> = map.keys().cloned().collect();
    for k in keys {
        let p = child(path, &k);
        if let Some(s) = props.get(&k) {
            if root && k == "metadata" {
                continue;
            }
            walk(s, map.get_mut(&k).unwrap(), &p, out, false, prune);
        } else if let Some(s) = addl_schema {
            walk(s, map.get_mut(&k).unwrap(), &p, out, false, prune);
        } else if addl_any || preserve || meta_like(&k) {
        } else if prune {
            map.remove(&k);
            out.unknown.push(p);
        }
    }
    if let Some(req) = schema.get("required").and_then(Value::as_array) {
        for r in req.iter().filter_map(Value::as_str) {
            if !map.contains_key(r) {
                out.errors.push(FieldError::required(child(path, r), ""));
            }
        }
    }
    let n = map.len() as u64;
    if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
        && n > max {
            out.errors.push(FieldError::new(ErrType::TooMany, path, Some(n.into()), format!("must have at most {max} items")));
        }
    if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
        && n < min {
            out.errors.push(FieldError::invalid(path, Value::Number(n.into()), format!("{path} in body should have at least {min} properties")));
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prunes_defaults_and_validates() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["a"], "properties": {
            "a": {"type": "integer", "minimum": 1.0},
            "b": {"type": "string", "enum": ["x", "y"], "default": "x"},
            "c": {"type": "string", "maxLength": 3},
            "m": {"type": "object", "additionalProperties": {"type": "string"}},
            "p": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "n": {"type": "string", "nullable": true}
        }}}});
        let mut o = json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x", "bogus": 1},
            "spec": {"a": 0, "c": "abcd", "m": {"k": "v"}, "p": {"any": 1}, "n": null, "junk": true}, "extra": 1});
        let out = process_custom_resource(&schema, &mut o);
        assert_eq!(o["spec"]["b"], "x");
        assert!(o.get("extra").is_none());
        assert!(o["spec"].get("junk").is_none());
        assert_eq!(o["spec"]["p"]["any"], 1);
        assert!(o["spec"]["n"].is_null());
        assert!(o["metadata"].get("bogus").is_none());
        let msgs: Vec<String> = out.errors.iter().map(|e| e.message()).collect();
        assert!(msgs.contains(&"spec.a: Invalid value: 0: spec.a in body should be greater than or equal to 1".to_string()), "{msgs:?}");
        assert!(msgs.contains(&"spec.c: Too long: may not be more than 3 bytes".to_string()), "{msgs:?}");
        let mut o2 = json!({"spec": {"a": "s", "b": "z"}});
        let out2 = process_custom_resource(&schema, &mut o2);
        let msgs: Vec<String> = out2.errors.iter().map(|e| e.message()).collect();
        assert!(msgs.contains(&"spec.a: Invalid value: \"string\": spec.a in body must be of type integer: \"string\"".to_string()), "{msgs:?}");
        assert!(msgs.contains(&"spec.b: Unsupported value: \"z\": supported values: \"x\", \"y\"".to_string()), "{msgs:?}");
        assert_eq!(go_float(1e6), "1e+06");
        assert_eq!(go_float(100.0), "100");
        assert_eq!(go_float(0.5), "0.5");
    }
}
