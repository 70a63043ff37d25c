//! authorization.k8s.io/v1's access reviews, as kube-apiserver serves them
//! (pkg/registry/authorization: `selfsubjectaccessreview`, `subjectaccessreview`,
//! `localsubjectaccessreview`, `selfsubjectrulesreview`): create only, nothing stored, the
//! answer a 201 with the request's object and its `status` filled by the authorizer the
//! server runs (with AlwaysAllow everything is allowed; with RBAC, rbac.rs' decision and
//! reason, as the privileged-group and RBAC authorizers give them).
//!
//! - the body is decoded as the Go types do (typed.rs: unknown fields dropped, and warned of or
//!   refused by `fieldValidation`), the field manager adds its managedFields entry, and the
//!   create handler's EnsureObjectNamespaceMatchesRequestNamespace: a LocalSubjectAccessReview
//!   takes the request's namespace (another one in its body is a 400), a cluster-scoped
//!   review's body namespace is cleared;
//! - validation (pkg/apis/authorization/validation): exactly one of resourceAttributes and
//!   nonResourceAttributes, a user or a group (SubjectAccessReview, LocalSubjectAccessReview),
//!   empty metadata (but its namespace for a local review, and managedFields), a local review's
//!   resourceAttributes.namespace its namespace and no nonResourceAttributes; the 422 names the
//!   kind `.authorization.k8s.io`: the registry reads the Kind of the internal object the
//!   handler decoded into, whose TypeMeta conversion leaves empty;
//! - who is asked about: the requestor (impersonation included) for the self reviews, the
//!   spec's user and groups (nothing added, not even `system:authenticated`) for the others;
//!   an empty version is every version (`*`);
//! - a SelfSubjectRulesReview answers a new object (its spec not echoed) listing the rules of
//!   the RBAC rule resolver for the spec's namespace (a 400 without one), its binding errors as
//!   `evaluationError`; AlwaysAllow's resolver answers `*`.

use serde_json::{Value, json};

use super::{Resp, Target, WriteOpts, check_namespace, check_type, unknown_handling};
use crate::rbac::{Attributes, UserInfo, go_aggregate, strs};
use crate::status::{ApiError, ApiResult, FieldError, RAW_VALUE_MARK};
use crate::store::Store;
use crate::typed::{OBJECT_META, Shape, decode_object};

pub const GROUP: &str = "authorization.k8s.io";

const STRINGS: Shape = Shape::List(&Shape::Scalar);
const REQUIREMENT: [(&str, Shape); 3] = [("key", Shape::Scalar), ("operator", Shape::Scalar), ("values", STRINGS)];
const SELECTOR: [(&str, Shape); 2] = [("rawSelector", Shape::Scalar), ("requirements", Shape::List(&Shape::Struct(&REQUIREMENT)))];
const RESOURCE_ATTRIBUTES: [(&str, Shape); 9] = [
    ("namespace", Shape::Scalar),
    ("verb", Shape::Scalar),
    ("group", Shape::Scalar),
    ("version", Shape::Scalar),
    ("resource", Shape::Scalar),
    ("subresource", Shape::Scalar),
    ("name", Shape::Scalar),
    ("fieldSelector", Shape::StructPtr(&SELECTOR)),
    ("labelSelector", Shape::StructPtr(&SELECTOR)),
];
const NON_RESOURCE_ATTRIBUTES: [(&str, Shape); 2] = [("path", Shape::Scalar), ("verb", Shape::Scalar)];
const SELF_SPEC: [(&str, Shape); 2] = [("resourceAttributes", Shape::StructPtr(&RESOURCE_ATTRIBUTES)), ("nonResourceAttributes", Shape::StructPtr(&NON_RESOURCE_ATTRIBUTES))];
const SUBJECT_SPEC: [(&str, Shape); 6] = [
    ("resourceAttributes", Shape::StructPtr(&RESOURCE_ATTRIBUTES)),
    ("nonResourceAttributes", Shape::StructPtr(&NON_RESOURCE_ATTRIBUTES)),
    ("user", Shape::Scalar),
    ("groups", STRINGS),
    ("extra", Shape::Map(&STRINGS)),
    ("uid", Shape::Scalar),
];
const ACCESS_STATUS: [(&str, Shape); 4] = [("allowed", Shape::Scalar), ("denied", Shape::Scalar), ("reason", Shape::Scalar), ("evaluationError", Shape::Scalar)];
const RULES_STATUS: [(&str, Shape); 4] = [
    ("resourceRules", Shape::List(&Shape::Struct(&[("verbs", STRINGS), ("apiGroups", STRINGS), ("resources", STRINGS), ("resourceNames", STRINGS)]))),
    ("nonResourceRules", Shape::List(&Shape::Struct(&[("verbs", STRINGS), ("nonResourceURLs", STRINGS)]))),
    ("incomplete", Shape::Scalar),
    ("evaluationError", Shape::Scalar),
];
const META: Shape = Shape::Struct(&OBJECT_META);
const SELF_ACCESS_REVIEW: [(&str, Shape); 5] =
    [("apiVersion", Shape::Scalar), ("kind", Shape::Scalar), ("metadata", META), ("spec", Shape::Struct(&SELF_SPEC)), ("status", Shape::Struct(&ACCESS_STATUS))];
const SUBJECT_ACCESS_REVIEW: [(&str, Shape); 5] =
    [("apiVersion", Shape::Scalar), ("kind", Shape::Scalar), ("metadata", META), ("spec", Shape::Struct(&SUBJECT_SPEC)), ("status", Shape::Struct(&ACCESS_STATUS))];
const RULES_REVIEW: [(&str, Shape); 5] = [
    ("apiVersion", Shape::Scalar),
    ("kind", Shape::Scalar),
    ("metadata", META),
    ("spec", Shape::Struct(&[("namespace", Shape::Scalar)])),
    ("status", Shape::Struct(&RULES_STATUS)),
];

/// A create of one of the reviews. `user`: who asks, with RBAC (None: AlwaysAllow).
pub fn review(store: &Store, t: &Target, mut obj: Value, user: Option<&UserInfo>, opts: &WriteOpts) -> ApiResult<Resp> {
    check_type(t, &mut obj)?;
    let fields: &'static [(&'static str, Shape)] = match t.def.kind.as_str() {
        "SelfSubjectAccessReview" => &SELF_ACCESS_REVIEW,
        "SelfSubjectRulesReview" => &RULES_REVIEW,
        _ => &SUBJECT_ACCESS_REVIEW,
    };
    let mut unknown = vec![];
    let mut obj = decode_object(&obj, fields, &mut unknown);
    let warnings = unknown_handling(t, opts, &unknown)?;
    // As kube's create handler, for every resource: a namespaced one takes the request's
    // namespace, a cluster-scoped one's body namespace is cleared (then validated as empty).
    check_namespace(t, &mut obj)?;
    let body = if t.def.kind == "SelfSubjectRulesReview" {
        rules_review(store, t, &obj, user)?
    } else {
        access_review(store, t, obj, user, opts)?
    };
    Ok(Resp { code: 201, body, warnings })
}

fn access_review(store: &Store, t: &Target, mut obj: Value, user: Option<&UserInfo>, opts: &WriteOpts) -> ApiResult<Value> {
    // The field manager's entry comes before validation (which ignores it) and stays.
    let now = crate::util::now_rfc3339();
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    crate::patch::track_update(&json!({"spec": {}, "status": {}}), &mut obj, None, &opts.manager(), "", &t.def.api_version(&t.version), &now);
    let errs = validate(&t.def.kind, &obj);
    if !errs.is_empty() {
        return Err(ApiError::invalid(GROUP, "", "", &errs));
    }
    let spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
    let subject = match user {
        Some(_) if t.def.kind != "SelfSubjectAccessReview" => {
            Some(UserInfo { name: spec["user"].as_str().unwrap_or("").to_string(), groups: strs(&spec, "groups").map(String::from).collect() })
        }
        other => other.cloned(),
    };
    let decision = match &subject {
        None => crate::rbac::Decision { allowed: true, reason: String::new() },
        Some(subject) => {
            let (resource, non_resource) = (&spec["resourceAttributes"], &spec["nonResourceAttributes"]);
            let field = |o: &'_ Value, f: &str| o.get(f).and_then(Value::as_str).unwrap_or("").to_string();
            let version = Some(field(resource, "version")).filter(|v| !v.is_empty()).unwrap_or_else(|| "*".into());
            let (verb, group, resource_name, subresource, namespace, name, path) = if resource.is_object() {
                (field(resource, "verb"), field(resource, "group"), field(resource, "resource"), field(resource, "subresource"), field(resource, "namespace"), field(resource, "name"), String::new())
            } else {
                (field(non_resource, "verb"), String::new(), String::new(), String::new(), String::new(), String::new(), field(non_resource, "path"))
            };
            let a = Attributes {
                user: subject,
                verb: &verb,
                resource_request: resource.is_object(),
                api_group: &group,
                api_version: &version,
                resource: &resource_name,
                subresource: &subresource,
                namespace: &namespace,
                name: &name,
                path: &path,
            };
            let st = store.lock();
            crate::authn::policy_of(&st).decide(&a)
        }
    };
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        status["reason"] = decision.reason.into();
    }
    obj["spec"] = spec;
    obj["status"] = status;
    if obj.pointer("/metadata/creationTimestamp").is_none() {
        obj["metadata"]["creationTimestamp"] = Value::Null;
    }
    Ok(obj)
}

/// Go's `%#v` of a non-nil pointer's struct, as field.Invalid prints it (the pointer followed).
fn go_struct(type_name: &str, v: &Value, fields: &[(&str, &str)]) -> Value {
    let parts: Vec<String> = fields.iter().map(|(go, json)| format!("{go}:{}", crate::goquote::Quoted(v.get(*json).and_then(Value::as_str).unwrap_or("")))).collect();
    Value::String(format!("{RAW_VALUE_MARK}authorization.{type_name}{{{}}}", parts.join(", ")))
}

/// ValidateSelfSubjectAccessReview, ValidateSubjectAccessReview, ValidateLocalSubjectAccessReview.
fn validate(kind: &str, obj: &Value) -> Vec<FieldError> {
    let spec = &obj["spec"];
    let (resource, non_resource) = (&spec["resourceAttributes"], &spec["nonResourceAttributes"]);
    let non_resource_value = || go_struct("NonResourceAttributes", non_resource, &[("Path", "path"), ("Verb", "verb")]);
    let mut errs = vec![];
    if resource.is_object() && non_resource.is_object() {
        errs.push(FieldError::invalid("spec.nonResourceAttributes", non_resource_value(), "cannot be specified in combination with resourceAttributes"));
    }
    if !resource.is_object() && !non_resource.is_object() {
        errs.push(FieldError::invalid("spec.resourceAttributes", Value::Null, "exactly one of nonResourceAttributes or resourceAttributes must be specified"));
    }
    if kind != "SelfSubjectAccessReview" && spec.get("user").is_none() && spec.get("groups").is_none() {
        errs.push(FieldError::invalid("spec.user", "".into(), "at least one of user or group must be specified"));
    }
    for selector in ["fieldSelector", "labelSelector"] {
        let Some(s) = resource.get(selector) else { continue };
        let path = format!("spec.resourceAttributes.{selector}");
        match (s.get("rawSelector"), s.get("requirements")) {
            (Some(raw), Some(_)) => errs.push(FieldError::invalid(format!("{path}.rawSelector"), raw.clone(), "may not specified at the same time as requirements")),
            (None, None) => errs.push(FieldError::required(format!("{path}.requirements"), format!("when {path} is specified, requirements or rawSelector is required"))),
            _ => {}
        }
    }
    // Metadata must be empty but for managedFields (and a local review's namespace).
    let mut meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let local = kind == "LocalSubjectAccessReview";
    let namespace = meta["namespace"].as_str().unwrap_or("").to_string();
    if let Some(m) = meta.as_object_mut() {
        m.remove("managedFields");
        if local {
            m.remove("namespace");
        }
    }
    if meta.as_object().is_some_and(|m| !m.is_empty()) {
        let detail = if local { "must be empty except for namespace" } else { "must be empty" };
        errs.push(FieldError::invalid("metadata", obj["metadata"].clone(), detail));
    }
    if local {
        let wanted = resource.get("namespace").and_then(Value::as_str).unwrap_or("");
        if resource.is_object() && wanted != namespace {
            errs.push(FieldError::invalid("spec.resourceAttributes.namespace", wanted.into(), "must match metadata.namespace"));
        }
        if non_resource.is_object() {
            errs.push(FieldError::invalid("spec.nonResourceAttributes", non_resource_value(), "disallowed on this kind of request"));
        }
    }
    errs
}

/// The RBAC rule resolver's rules for the requestor in the spec's namespace (AlwaysAllow's: `*`).
fn rules_review(store: &Store, t: &Target, obj: &Value, user: Option<&UserInfo>) -> ApiResult<Value> {
    let namespace = obj.pointer("/spec/namespace").and_then(Value::as_str).unwrap_or("");
    if namespace.is_empty() {
        return Err(ApiError::bad_request("no namespace on request"));
    }
    let list = |rule: &Value, field: &str| -> Value {
        let items: Vec<&str> = strs(rule, field).collect();
        if items.is_empty() { Value::Null } else { json!(items) }
    };
    let (mut resource_rules, mut non_resource_rules, mut errors) = (vec![], vec![], vec![]);
    match user {
        None => {
            resource_rules.push(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
            non_resource_rules.push(json!({"verbs": ["*"], "nonResourceURLs": ["*"]}));
        }
        Some(user) => {
            let st = store.lock();
            let policy = crate::authn::policy_of(&st);
            let (grants, errs) = policy.rules_for(user, namespace);
            errors = errs;
            for rule in grants.iter().map(|g| g.rule) {
                if strs(rule, "resources").next().is_some() {
                    let mut r = json!({"verbs": list(rule, "verbs")});
                    for f in ["apiGroups", "resources", "resourceNames"] {
                        if strs(rule, f).next().is_some() {
                            r[f] = list(rule, f);
                        }
                    }
                    resource_rules.push(r);
                }
                if strs(rule, "nonResourceURLs").next().is_some() {
                    non_resource_rules.push(json!({"verbs": list(rule, "verbs"), "nonResourceURLs": list(rule, "nonResourceURLs")}));
                }
            }
        }
    }
    let mut status = json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": false});
    if !errors.is_empty() {
        status["evaluationError"] = go_aggregate(&errors).into();
    }
    Ok(json!({"kind": t.def.kind, "apiVersion": t.def.api_version(&t.version), "metadata": {"creationTimestamp": null}, "spec": {}, "status": status}))
}
