//! ObjectMeta validation as kube-apiserver does it (apimachinery `api/validation/objectmeta.go`,
//! `apis/meta/v1/validation` and `util/validation`), with apimachinery's message texts.
//!
//! kube-apiserver runs it twice per write: inside the resource's strategy (with the resource's
//! own name rule, see [`NameRule`]) and as the generic registry's common check (names only
//! checked as path segments). On create the common check only runs when the strategy found
//! nothing; on update both lists are reported together (so some causes appear twice, as they
//! do in a real answer).

use regex::Regex;
use serde_json::{Map, Value};
use std::sync::LazyLock;

use crate::status::{ErrType, FieldError};
use crate::goquote::quote;

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// Total bytes of annotation keys and values (TotalAnnotationSizeLimitB).
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

fn anchored(fmt: &str) -> Regex {
    Regex::new(&format!("^(?:{fmt})$")).expect("static regex")
}

static QUALIFIED_NAME: LazyLock<Regex> = LazyLock::new(|| anchored(QUALIFIED_NAME_FMT));
static LABEL_VALUE: LazyLock<Regex> = LazyLock::new(|| anchored(&format!("({QUALIFIED_NAME_FMT})?")));
static DNS1123_LABEL: LazyLock<Regex> = LazyLock::new(|| anchored(DNS1123_LABEL_FMT));
static DNS1123_SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| anchored(DNS1123_SUBDOMAIN_FMT));

/// util/validation.RegexError: the message, examples, and the regex.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// util/validation.IsDNS1123Subdomain.
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = vec![];
    if value.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !DNS1123_SUBDOMAIN.is_match(value) {
        errs.push(regex_error(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

const CONFIG_MAP_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
static CONFIG_MAP_KEY: LazyLock<Regex> = LazyLock::new(|| anchored(CONFIG_MAP_KEY_FMT));

/// util/validation.IsConfigMapKey (ConfigMap and Secret keys).
pub fn config_map_key_errors(value: &str) -> Vec<String> {
    let mut errs = vec![];
    if value.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !CONFIG_MAP_KEY.is_match(value) {
        errs.push(regex_error("a valid config key must consist of alphanumeric characters, '-', '_' or '.'", CONFIG_MAP_KEY_FMT, &["key.name", "KEY_NAME", "key-name"]));
    }
    // hasChDirPrefix
    if value == "." {
        errs.push("must not be '.'".into());
    } else if value == ".." {
        errs.push("must not be '..'".into());
    } else if value.starts_with("..") {
        errs.push("must not start with '..'".into());
    }
    errs
}

/// util/validation.IsDNS1123Label.
pub fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errs = vec![];
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !DNS1123_LABEL.is_match(value) {
        if DNS1123_SUBDOMAIN.is_match(value) {
            // A valid subdomain that is not a valid label: the length was checked, so dots.
            errs.push("must not contain dots".into());
        } else {
            errs.push(regex_error(DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, &["my-name", "123-abc"]));
        }
    }
    errs
}

/// util/validation.IsQualifiedName: `[prefix/]name`, prefix a DNS subdomain, name <= 63.
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = vec![];
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(dns1123_subdomain_errors(prefix).into_iter().map(|m| format!("prefix part {m}")));
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !QUALIFIED_NAME.is_match(name) {
        errs.push(format!("name part {}", regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])));
    }
    errs
}

/// util/validation.IsValidLabelValue.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = vec![];
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !LABEL_VALUE.is_match(value) {
        errs.push(regex_error(LABEL_VALUE_MSG, &format!("({QUALIFIED_NAME_FMT})?"), &["MyValue", "my_value", "12345"]));
    }
    errs
}

/// How a resource's strategy validates `metadata.name` (its ValidateNameFunc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// NameIsDNSSubdomain (custom resources, ConfigMaps, Leases, events.k8s.io Events).
    Subdomain,
    /// NameIsDNSLabel (Namespaces).
    Label,
    /// path.ValidatePathSegmentName: the generic registry's common check, and core/v1 Events.
    PathSegment,
    /// The CRD rule: a subdomain equal to `spec.names.plural + "." + spec.group`.
    Crd { matches_plural_group: bool },
}

impl NameRule {
    /// The messages for a name (or, with `prefix`, a generateName).
    fn errors(self, name: &str, prefix: bool) -> Vec<String> {
        // A generateName may end in '-': mask it before the check (maskTrailingDash).
        let masked;
        let name = if prefix && name.len() > 1 && name.ends_with('-') {
            masked = format!("{}a", &name[..name.len() - 1]);
            masked.as_str()
        } else {
            name
        };
        match self {
            NameRule::Subdomain => dns1123_subdomain_errors(name),
            NameRule::Label => dns1123_label_errors(name),
            NameRule::PathSegment => path_segment_errors(name, prefix),
            NameRule::Crd { matches_plural_group } => {
                let mut errs = dns1123_subdomain_errors(name);
                if !matches_plural_group {
                    errs.push("must be spec.names.plural+\".\"+spec.group".into());
                }
                errs
            }
        }
    }
}

/// apiserver/pkg/registry/rest/path.ValidatePathSegmentName.
fn path_segment_errors(name: &str, prefix: bool) -> Vec<String> {
    if !prefix && (name == "." || name == "..") {
        return vec![format!("may not be '{name}'")];
    }
    let mut errs = vec![];
    for bad in ["/", "%"] {
        if name.contains(bad) {
            errs.push(format!("may not contain '{bad}'"));
        }
    }
    errs
}

fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

fn string_map(m: Option<&Map<String, Value>>, key: &str) -> Vec<(String, String)> {
    m.and_then(|m| m.get(key)).and_then(Value::as_object).map(|o| o.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect()).unwrap_or_default()
}

/// ValidateObjectMetaAccessor: name and generateName by `rule`, then the common parts.
pub fn validate_object_meta(obj: &Value, rule: NameRule) -> Vec<FieldError> {
    let m = meta(obj);
    let s = |k: &str| m.and_then(|m| m.get(k)).and_then(Value::as_str).unwrap_or("").to_string();
    let mut errs = vec![];
    let generate = s("generateName");
    if !generate.is_empty() {
        for msg in rule.errors(&generate, true) {
            errs.push(FieldError::invalid("metadata.generateName", generate.clone().into(), msg));
        }
    }
    let name = s("name");
    if name.is_empty() {
        errs.push(FieldError::required("metadata.name", "name or generateName is required"));
    } else {
        for msg in rule.errors(&name, false) {
            errs.push(FieldError::invalid("metadata.name", name.clone().into(), msg));
        }
    }
    errs.extend(labels_annotations_owners(obj));
    errs.extend(finalizer_errors(obj));
    errs
}

/// ValidateObjectMetaAccessorUpdate: the transition rules, then labels, annotations and owner
/// references of the new object (not finalizer names: apimachinery leaves them to the create
/// path and the common check).
pub fn validate_object_meta_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = vec![];
    if old.pointer("/metadata/deletionTimestamp").is_some() {
        let before = finalizers(old);
        let mut added: Vec<String> = finalizers(new).into_iter().filter(|f| !before.contains(f)).collect();
        added.sort();
        added.dedup();
        if !added.is_empty() {
            errs.push(FieldError::forbidden(
                "metadata.finalizers",
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    added.iter().map(|f| quote(f)).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
    let gen_of = |o: &Value| o.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
    if gen_of(new) < gen_of(old) {
        errs.push(FieldError::invalid("metadata.generation", gen_of(new).into(), "must not be decremented"));
    }
    errs.extend(labels_annotations_owners(new));
    errs
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers").and_then(Value::as_array).map(|a| a.iter().filter_map(|f| f.as_str().map(String::from)).collect()).unwrap_or_default()
}

/// Labels (qualified-name keys, label values), annotations (qualified-name keys compared in
/// lower case; 256 KiB in all) and owner references, in apimachinery's order.
fn labels_annotations_owners(obj: &Value) -> Vec<FieldError> {
    let m = meta(obj);
    let mut errs = vec![];
    for (k, v) in string_map(m, "labels") {
        for msg in qualified_name_errors(&k) {
            errs.push(FieldError::invalid("metadata.labels", k.clone().into(), msg));
        }
        for msg in label_value_errors(&v) {
            errs.push(FieldError::invalid("metadata.labels", v.clone().into(), msg));
        }
    }
    let annotations = string_map(m, "annotations");
    for (k, _) in &annotations {
        for msg in qualified_name_errors(&k.to_lowercase()) {
            errs.push(FieldError::invalid("metadata.annotations", k.clone().into(), msg));
        }
    }
    let total: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::new(ErrType::TooLong, "metadata.annotations", Some("".into()), too_long(TOTAL_ANNOTATION_SIZE_LIMIT)));
    }
    errs.extend(owner_reference_errors(obj));
    errs
}

/// field.TooLong's detail (apimachinery 1.32).
pub fn too_long(max: usize) -> String {
    format!("may not be more than {max} bytes")
}

/// ValidateOwnerReferences.
fn owner_reference_errors(obj: &Value) -> Vec<FieldError> {
    let Some(refs) = obj.pointer("/metadata/ownerReferences").and_then(Value::as_array) else { return vec![] };
    let mut errs = vec![];
    let mut first_controller: Option<String> = None;
    for r in refs {
        let f = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let (api_version, kind, name, uid) = (f("apiVersion"), f("kind"), f("name"), f("uid"));
        // schema.FromAPIVersionAndKind: the version is what follows the last '/', or all of it.
        let version = match api_version.split('/').collect::<Vec<_>>().as_slice() {
            [v] => v.to_string(),
            [_, v] => v.to_string(),
            _ => String::new(),
        };
        let group = if api_version.matches('/').count() == 1 { api_version.split('/').next().unwrap_or("") } else { "" };
        if version.is_empty() {
            errs.push(FieldError::invalid("metadata.ownerReferences.apiVersion", api_version.clone().into(), "version must not be empty"));
        }
        if kind.is_empty() {
            errs.push(FieldError::invalid("metadata.ownerReferences.kind", kind.clone().into(), "kind must not be empty"));
        }
        if name.is_empty() {
            errs.push(FieldError::invalid("metadata.ownerReferences.name", name.clone().into(), "name must not be empty"));
        }
        if uid.is_empty() {
            errs.push(FieldError::invalid("metadata.ownerReferences.uid", uid.clone().into(), "uid must not be empty"));
        }
        if group.is_empty() && version == "v1" && kind == "Event" {
            errs.push(FieldError::new(
                ErrType::Invalid,
                "metadata.ownerReferences",
                Some(Value::String(go_owner_reference(r))),
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if r.get("controller") == Some(&Value::Bool(true)) {
            let this = format!("{kind}/{name}");
            match &first_controller {
                Some(first) => errs.push(FieldError::new(
                    ErrType::Invalid,
                    "metadata.ownerReferences",
                    Some(Value::String(format!("[]v1.OwnerReference{{{}}}", refs.iter().map(go_owner_reference).collect::<Vec<_>>().join(", ")))),
                    format!("Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}"),
                )),
                None => first_controller = Some(this),
            }
        }
    }
    errs.into_iter().map(raw_go_value).collect()
}

/// A Go `%#v` of one metav1.OwnerReference (pointer fields print as addresses in Go; a fixed
/// one here).
fn go_owner_reference(r: &Value) -> String {
    let f = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let ptr = |k: &str| if r.get(k).and_then(Value::as_bool).is_some() { "(*bool)(0xc000000000)" } else { "(*bool)(nil)" };
    format!(
        "v1.OwnerReference{{APIVersion:{}, Kind:{}, Name:{}, UID:{}, Controller:{}, BlockOwnerDeletion:{}}}",
        quote(&f("apiVersion")),
        quote(&f("kind")),
        quote(&f("name")),
        quote(&f("uid")),
        ptr("controller"),
        ptr("blockOwnerDeletion")
    )
}

/// Marks a value that must print as Go's `%#v` text rather than as a quoted string.
fn raw_go_value(mut e: FieldError) -> FieldError {
    if e.field == "metadata.ownerReferences"
        && let Some(Value::String(s)) = &e.value
    {
        e.value = Some(Value::String(format!("{}{s}", crate::status::RAW_VALUE_MARK)));
    }
    e
}

/// ValidateFinalizers: qualified names; `orphan` and `foregroundDeletion` exclude each other.
fn finalizer_errors(obj: &Value) -> Vec<FieldError> {
    let fins = finalizers(obj);
    let mut errs = vec![];
    for f in &fins {
        for msg in qualified_name_errors(f) {
            errs.push(FieldError::invalid("metadata.finalizers", f.clone().into(), msg));
        }
    }
    if fins.iter().any(|f| f == "orphan") && fins.iter().any(|f| f == "foregroundDeletion") {
        errs.push(FieldError::new(
            ErrType::Invalid,
            "metadata.finalizers",
            Some(Value::String(format!(
                "{}[]string{{{}}}",
                crate::status::RAW_VALUE_MARK,
                fins.iter().map(|f| quote(f)).collect::<Vec<_>>().join(", ")
            ))),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        assert!(qualified_name_errors("zundokokiyoshi.kaitoy.github.com/hikawa").is_empty());
        assert!(qualified_name_errors("a").is_empty());
        assert_eq!(qualified_name_errors("/a"), vec!["prefix part must be non-empty"]);
        assert_eq!(qualified_name_errors(&"a".repeat(64)), vec!["name part must be no more than 63 characters"]);
        assert_eq!(qualified_name_errors("a/b/c").len(), 1);
        assert_eq!(qualified_name_errors("Example.com/x")[0], format!("prefix part {}", regex_error(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, &["example.com"])));
    }

    #[test]
    fn names() {
        assert!(NameRule::Subdomain.errors("gen-", true).is_empty());
        assert_eq!(NameRule::Subdomain.errors("gen-", false).len(), 1);
        assert_eq!(dns1123_label_errors("a.b"), vec!["must not contain dots"]);
        assert_eq!(path_segment_errors("a/b", false), vec!["may not contain '/'"]);
    }
}
