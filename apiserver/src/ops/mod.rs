//! The REST semantics of kube-apiserver's generic registry and the strategies of the served
//! resources, one verb family per file: `read` (get, list), `write` (create, update),
//! `patching` (merge and JSON patch), `apply` (server-side apply), `delete` (delete,
//! deletecollection, the controllers' writes). This file holds what they share: the request
//! target and options, and the generic checks of a request body.
//! Everything runs under the store lock, so each request is atomic.

mod apply;
mod delete;
mod patching;
mod read;
mod review;
mod secret;
mod strategy;
mod validate;
mod write;

use serde_json::{Map, Value, json};

use crate::convert::to_external;
use crate::patch;
use validate::canonical_binary_data;
use crate::registry::{ResourceDef, def_from_crd};
use crate::status::{ApiError, ApiResult, FieldError};
use crate::store::{State, meta_str};
use crate::goquote::Quoted;

pub use delete::{controller_delete, controller_update, delete, delete_collection};
pub use patching::patch;
pub use read::{ListQuery, get, list, selectors};
pub use review::{GROUP as REVIEWS_GROUP, review};
pub use write::{create, update};

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
    /// Who writes, with `--authorization-mode RBAC` (None: everyone may do anything): RBAC
    /// objects are checked for privilege escalation (rbac_escalation.rs).
    pub user: Option<crate::rbac::UserInfo>,
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

fn unknown_handling(t: &Target, opts: &WriteOpts, unknown: &[String]) -> ApiResult<Vec<String>> {
    if unknown.is_empty() {
        return Ok(vec![]);
    }
    match opts.field_validation {
        FieldValidation::Ignore => Ok(vec![]),
        FieldValidation::Warn => Ok(unknown.iter().map(|u| format!("unknown field {}", Quoted(u))).collect()),
        FieldValidation::Strict => Err(ApiError::bad_request(format!(
            "{kind} in version {} cannot be handled as a {kind}: strict decoding error: {}",
            Quoted(&t.version),
            unknown.iter().map(|u| format!("unknown field {}", Quoted(u))).collect::<Vec<_>>().join(", "),
            kind = t.def.kind,
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
            ApiError::bad_request(format!("ConfigMap in version {} cannot be handled as a ConfigMap: {e}", Quoted(&t.version)))
        })?;
    }
    if (t.def.group.as_str(), t.def.plural.as_str()) == ("", "secrets") {
        // Only what decoding checks: stringData is merged (and type defaulted) by conversion,
        // after server-side apply has taken the applied configuration as sent.
        secret::check_body(obj)
            .map_err(|e| ApiError::bad_request(format!("Secret in version {} cannot be handled as a Secret: {e}", Quoted(&t.version))))?;
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
