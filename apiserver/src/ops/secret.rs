//! core/v1 Secret: decoding as kube-apiserver's codec does it (`data` is `map[string][]byte`,
//! base64 in JSON; `stringData` is merged into `data` by the v1 to internal conversion and
//! never stored; `type` defaults to `Opaque`), and ValidateSecret / ValidateSecretUpdate.

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::godecode;
use crate::objectmeta::{config_map_key_errors, too_long};
use crate::status::{ErrType, FieldError};

/// core.MaxSecretSize: the most bytes a Secret's `data` or a ConfigMap's `data` and
/// `binaryData` together may hold, decoded (ValidateSecret, ValidateConfigMap).
pub const MAX_SECRET_SIZE: usize = 1024 * 1024;

const DOCKERCFG: &str = "kubernetes.io/dockercfg";
const DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_error(v: &Value, field: &str, go_type: &str) -> String {
    format!("json: cannot unmarshal {} into Go struct field Secret.{field} of type {go_type}", json_kind(v))
}

/// One `[]byte` value as encoding/json decodes it: a base64 string, null (empty), or an
/// array of numbers 0..=255.
fn decode_bytes(v: &Value) -> Result<Vec<u8>, String> {
    match v {
        Value::Null => Ok(vec![]),
        Value::String(s) => godecode::base64_decode(s.as_bytes()).map_err(godecode::base64_error),
        Value::Array(items) => items
            .iter()
            .map(|i| match i.as_u64() {
                Some(n) if n <= 255 => Ok(n as u8),
                _ if i.is_number() => Err(format!("json: cannot unmarshal number {i} into Go struct field Secret.data of type uint8")),
                _ => Err(type_error(i, "data", "uint8")),
            })
            .collect(),
        other => Err(type_error(other, "data", "[]uint8")),
    }
}

/// What decoding a request body checks and normalizes: `data` values become canonical base64
/// (Go reads them into `[]byte`), and the other fields must have their Go types. The error
/// text is the decoder's (the caller says what the Secret could not be handled as).
pub fn check_body(obj: &mut Value) -> Result<(), String> {
    match obj.get_mut("data") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for v in m.values_mut() {
                let bytes = decode_bytes(v)?;
                *v = base64::engine::general_purpose::STANDARD.encode(bytes).into();
            }
        }
        Some(other) => return Err(type_error(other, "data", "map[string][]uint8")),
    }
    match obj.get("stringData") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            if let Some(v) = m.values().find(|v| !v.is_string() && !v.is_null()) {
                return Err(type_error(v, "stringData", "string"));
            }
        }
        Some(other) => return Err(type_error(other, "stringData", "map[string]string")),
    }
    if let Some(v) = obj.get("type").filter(|v| !v.is_string() && !v.is_null()) {
        return Err(type_error(v, "type", "v1.SecretType"));
    }
    if let Some(v) = obj.get("immutable").filter(|v| !v.is_boolean() && !v.is_null()) {
        return Err(type_error(v, "immutable", "bool"));
    }
    Ok(())
}

/// The object as kube-apiserver holds it after decoding: `stringData` merged into `data`
/// (same keys overridden) and dropped, `type` defaulted to `Opaque` (SetDefaults_Secret), and
/// empty or null fields left out as Go's encoder leaves them out (omitempty).
pub fn normalize(obj: &mut Value) -> Result<(), String> {
    check_body(obj)?;
    let Some(m) = obj.as_object_mut() else { return Ok(()) };
    let string_data = m.remove("stringData");
    let mut data = match m.remove("data") {
        Some(Value::Object(d)) => d,
        _ => Map::new(),
    };
    if let Some(Value::Object(sd)) = string_data {
        for (k, v) in sd {
            let text = v.as_str().unwrap_or("");
            data.insert(k, base64::engine::general_purpose::STANDARD.encode(text).into());
        }
    }
    if !data.is_empty() {
        m.insert("data".into(), Value::Object(data));
    }
    if m.get("type").and_then(Value::as_str).unwrap_or("").is_empty() {
        m.insert("type".into(), "Opaque".into());
    }
    if m.get("immutable").is_some_and(Value::is_null) {
        m.remove("immutable");
    }
    Ok(())
}

fn data_bytes(obj: &Value, key: &str) -> Option<Vec<u8>> {
    let v = obj.get("data")?.get(key)?;
    Some(v.as_str().and_then(|s| godecode::base64_decode(s.as_bytes()).ok()).unwrap_or_default())
}

/// ValidateSecret after ValidateObjectMeta: keys, total size, and what each type requires.
pub fn validate(obj: &Value) -> Vec<FieldError> {
    let mut errs = vec![];
    let mut total = 0usize;
    if let Some(data) = obj.get("data").and_then(Value::as_object) {
        for (k, v) in data {
            for msg in config_map_key_errors(k) {
                errs.push(FieldError::invalid(format!("data[{k}]"), k.clone().into(), msg));
            }
            total += v.as_str().and_then(|s| godecode::base64_decode(s.as_bytes()).ok()).map_or(0, |b| b.len());
        }
    }
    if total > MAX_SECRET_SIZE {
        errs.push(FieldError::new(ErrType::TooLong, "data", Some("".into()), too_long(MAX_SECRET_SIZE)));
    }
    let key = |k: &str| format!("data[{k}]");
    let typ = obj.get("type").and_then(Value::as_str).unwrap_or("");
    match typ {
        "kubernetes.io/service-account-token" => {
            let name = obj.pointer("/metadata/annotations/kubernetes.io~1service-account.name").and_then(Value::as_str).unwrap_or("");
            if name.is_empty() {
                errs.push(FieldError::required("metadata.annotations[kubernetes.io/service-account.name]", ""));
            }
        }
        DOCKERCFG | DOCKER_CONFIG_JSON => {
            let k = if typ == DOCKERCFG { ".dockercfg" } else { ".dockerconfigjson" };
            match data_bytes(obj, k) {
                None => errs.push(FieldError::required(key(k), "")),
                Some(bytes) => {
                    if let Err(e) = godecode::unmarshal_into_map(&bytes) {
                        errs.push(FieldError::invalid(key(k), "<secret contents redacted>".into(), e));
                    }
                }
            }
        }
        // Username or password may be empty, but one of the keys must be there.
        "kubernetes.io/basic-auth" if data_bytes(obj, "username").is_none() && data_bytes(obj, "password").is_none() => {
            errs.push(FieldError::required(key("username"), ""));
            errs.push(FieldError::required(key("password"), ""));
        }
        "kubernetes.io/ssh-auth" if data_bytes(obj, "ssh-privatekey").unwrap_or_default().is_empty() => {
            errs.push(FieldError::required(key("ssh-privatekey"), ""));
        }
        "kubernetes.io/tls" => {
            for k in ["tls.crt", "tls.key"] {
                if data_bytes(obj, k).is_none() {
                    errs.push(FieldError::required(key(k), ""));
                }
            }
        }
        _ => {}
    }
    errs
}

/// The part of ValidateSecretUpdate between ValidateObjectMetaUpdate and ValidateSecret: the
/// type never changes, and `immutable: true` freezes `data` and itself.
pub fn validate_update(obj: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = vec![];
    let typ = |o: &Value| o.get("type").and_then(Value::as_str).unwrap_or("").to_string();
    if typ(obj) != typ(old) {
        errs.push(FieldError::invalid("type", typ(obj).into(), "field is immutable"));
    }
    if old.get("immutable") == Some(&Value::Bool(true)) {
        if obj.get("immutable") != Some(&Value::Bool(true)) {
            errs.push(FieldError::forbidden("immutable", "field is immutable when `immutable` is set"));
        }
        if obj.get("data") != old.get("data") {
            errs.push(FieldError::forbidden("data", "field is immutable when `immutable` is set"));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn string_data_is_merged_and_type_defaulted() {
        let mut s = json!({"data": {"a": "YQ==", "b": "Yg=="}, "stringData": {"b": "B", "c": "C"}});
        super::normalize(&mut s).unwrap();
        assert_eq!(s, json!({"data": {"a": "YQ==", "b": "Qg==", "c": "Qw=="}, "type": "Opaque"}));
        let mut s = json!({"data": {}, "type": "", "immutable": null});
        super::normalize(&mut s).unwrap();
        assert_eq!(s, json!({"type": "Opaque"}));
    }

    #[test]
    fn go_type_errors() {
        let e = |mut v: serde_json::Value| super::check_body(&mut v).unwrap_err();
        assert_eq!(e(json!({"data": {"a": 1}})), "json: cannot unmarshal number into Go struct field Secret.data of type []uint8");
        assert_eq!(e(json!({"stringData": {"a": true}})), "json: cannot unmarshal bool into Go struct field Secret.stringData of type string");
        assert_eq!(e(json!({"data": {"a": "!"}})), "illegal base64 data at input byte 0");
    }
}
