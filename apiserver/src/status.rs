//! API errors rendered as `meta/v1 Status` objects, with the reasons, codes and message
//! formats of k8s.io/apimachinery/pkg/api/errors.

use serde_json::{Map, Value, json};
use crate::goquote::Quoted;

/// The qualified resource used in messages: `hikawas.zundokokiyoshi.kaitoy.github.com` or `configmaps`.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() { resource.to_string() } else { format!("{resource}.{group}") }
}

/// field.ErrorType, serialised as StatusCause.reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrType {
    Required,
    Invalid,
    TypeInvalid,
    NotSupported,
    TooLong,
    TooMany,
    Forbidden,
    Duplicate,
}

impl ErrType {
    fn cause(self) -> &'static str {
        match self {
            ErrType::Required => "FieldValueRequired",
            ErrType::Invalid => "FieldValueInvalid",
            ErrType::TypeInvalid => "FieldValueTypeInvalid",
            ErrType::NotSupported => "FieldValueNotSupported",
            ErrType::TooLong => "FieldValueTooLong",
            ErrType::TooMany => "FieldValueTooMany",
            ErrType::Forbidden => "FieldValueForbidden",
            ErrType::Duplicate => "FieldValueDuplicate",
        }
    }
    fn text(self) -> &'static str {
        match self {
            ErrType::Required => "Required value",
            ErrType::Invalid | ErrType::TypeInvalid => "Invalid value",
            ErrType::NotSupported => "Unsupported value",
            ErrType::TooLong => "Too long",
            ErrType::TooMany => "Too many",
            ErrType::Forbidden => "Forbidden",
            ErrType::Duplicate => "Duplicate value",
        }
    }
}

/// One field error (k8s.io/apimachinery/pkg/util/validation/field.Error).
#[derive(Debug, Clone)]
pub struct FieldError {
    pub typ: ErrType,
    pub field: String,
    pub value: Option<Value>,
    pub detail: String,
}

/// Starts a string value that is already Go's `%#v` text of a composite value (printed as is).
pub const RAW_VALUE_MARK: &str = "\u{0}go:";

/// Go's rendering of a bad value in `Invalid value: ...`.
pub fn go_value(v: &Value) -> String {
    match v {
        // Go prints a nil value as the string "null", quoted.
        Value::Null => "\"null\"".into(),
        Value::String(s) if s.starts_with(RAW_VALUE_MARK) => s[RAW_VALUE_MARK.len()..].to_string(),
        Value::String(s) => crate::goquote::quote(s),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => other.to_string(),
    }
}

impl FieldError {
    pub fn new(typ: ErrType, field: impl Into<String>, value: Option<Value>, detail: impl Into<String>) -> Self {
        FieldError { typ, field: field.into(), value, detail: detail.into() }
    }
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrType::Required, field, None, detail)
    }
    pub fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self::new(ErrType::Invalid, field, Some(value), detail)
    }
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrType::Forbidden, field, None, detail)
    }
    /// field.Error.ErrorBody().
    pub fn body(&self) -> String {
        let mut s = match self.typ {
            ErrType::Required | ErrType::Forbidden | ErrType::TooLong => self.typ.text().to_string(),
            ErrType::TooMany => match &self.value {
                Some(v) if !v.is_null() => format!("{}: {}", self.typ.text(), go_value(v)),
                _ => self.typ.text().to_string(),
            },
            _ => format!("{}: {}", self.typ.text(), go_value(self.value.as_ref().unwrap_or(&Value::Null))),
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
    pub fn message(&self) -> String {
        format!("{}: {}", self.field, self.body())
    }
}

/// An error answer: HTTP code, Status.reason, message and details.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: u16,
    pub reason: String,
    pub message: String,
    pub details: Option<Value>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut m = Map::new();
    if !name.is_empty() {
        m.insert("name".into(), name.into());
    }
    if !group.is_empty() {
        m.insert("group".into(), group.into());
    }
    if !kind.is_empty() {
        m.insert("kind".into(), kind.into());
    }
    Value::Object(m)
}

impl ApiError {
    pub fn new(code: u16, reason: &str, message: impl Into<String>, details: Option<Value>) -> Self {
        ApiError { code, reason: reason.into(), message: message.into(), details }
    }
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{} {} not found", qualified(group, resource), Quoted(name)), Some(details(name, group, resource)))
    }
    /// The answer for an unknown path or resource.
    pub fn no_route() -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource", Some(json!({})))
    }
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::new(409, "AlreadyExists", format!("{} {} already exists", qualified(group, resource), Quoted(name)), Some(details(name, group, resource)))
    }
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {} {}: {why}", qualified(group, resource), Quoted(name)),
            Some(details(name, group, resource)),
        )
    }
    pub fn optimistic_lock(group: &str, resource: &str, name: &str) -> Self {
        Self::conflict(group, resource, name, "the object has been modified; please apply your changes to the latest version and try again")
    }
    /// NewInvalid(qualifiedKind, name, errs).
    pub fn invalid(group: &str, kind: &str, name: &str, errs: &[FieldError]) -> Self {
        let qk = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let causes: Vec<Value> = errs
            .iter()
            .map(|e| json!({"reason": e.typ.cause(), "message": e.body(), "field": e.field}))
            .collect();
        // The message lists each distinct error once (ErrorList.ToAggregate); causes keep all.
        let mut messages: Vec<String> = vec![];
        for e in errs {
            let m = e.message();
            if !messages.contains(&m) {
                messages.push(m);
            }
        }
        let message = match messages.len() {
            0 => format!("{qk} {} is invalid", Quoted(name)),
            1 => format!("{qk} {} is invalid: {}", Quoted(name), messages[0]),
            _ => format!("{qk} {} is invalid: [{}]", Quoted(name), messages.join(", ")),
        };
        let mut d = details(name, group, kind);
        d["causes"] = Value::Array(causes);
        Self::new(422, "Invalid", message, Some(d))
    }
    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", msg, None)
    }
    pub fn internal(msg: impl Into<String>) -> Self {
        let msg = msg.into();
        Self::new(500, "InternalError", format!("Internal error occurred: {msg}"), Some(json!({"causes": [{"message": msg}]})))
    }
    /// NewServiceUnavailable: no details.
    pub fn service_unavailable(msg: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", msg, None)
    }
    pub fn expired(msg: impl Into<String>) -> Self {
        Self::new(410, "Expired", msg, None)
    }
    pub fn method_not_allowed() -> Self {
        Self::new(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", None)
    }
    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: {}", accepted.join(", ")),
            None,
        )
    }
    pub fn forbidden(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let q = qualified(group, resource);
        let msg = if name.is_empty() { format!("{q} is forbidden: {why}") } else { format!("{q} {} is forbidden: {why}", Quoted(name)) };
        Self::new(403, "Forbidden", msg, Some(details(name, group, resource)))
    }
    /// What kube-apiserver passes on when etcd refuses a write over its request limit: a plain
    /// error, so a 500 with no reason (kubernetes/kubernetes#74600).
    pub fn etcd_request_too_large() -> Self {
        Self::new(500, "", "etcdserver: request is too large", None)
    }
    pub fn too_large(msg: impl Into<String>) -> Self {
        Self::new(413, "RequestEntityTooLarge", msg, None)
    }

    /// The `meta/v1 Status` body.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        });
        // StatusReasonUnknown is the empty string, omitted from the body.
        if !self.reason.is_empty() {
            s["reason"] = self.reason.clone().into();
        }
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s["code"] = self.code.into();
        s
    }
}

/// A `Success` Status as returned by DELETE for resources that do not return the deleted object.
pub fn success_status(name: &str, group: &str, resource: &str, uid: &str) -> Value {
    let mut d = details(name, group, resource);
    if !uid.is_empty() {
        d["uid"] = uid.into();
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": d})
}

pub type ApiResult<T> = Result<T, ApiError>;
