//! Event validation (kubernetes `pkg/apis/core/validation/events.go`): the legacy rules every
//! Event write passes, and the strict rules of writes through events.k8s.io/v1.
//!
//! kube-apiserver validates the internal (core) Event, so field paths are core field names
//! even for events.k8s.io requests: a too-long `note` is reported at `message`.

use serde_json::Value;

use crate::objectmeta::{NameRule, dns1123_subdomain_errors, qualified_name_errors, validate_object_meta, validate_object_meta_update};
use crate::status::FieldError;

const REPORTING_INSTANCE_LIMIT: usize = 128;
const ACTION_LIMIT: usize = 128;
const REASON_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;

fn s<'a>(ev: &'a Value, path: &str) -> &'a str {
    ev.pointer(path).and_then(Value::as_str).unwrap_or("")
}

/// A metav1.Time / MicroTime that is set (not absent, null or empty).
fn is_set(ev: &Value, path: &str) -> bool {
    match ev.pointer(path) {
        None | Some(Value::Null) => false,
        Some(Value::String(t)) => !t.is_empty(),
        Some(_) => true,
    }
}

fn at_most(field: &str, limit: usize) -> FieldError {
    FieldError::invalid(field, "".into(), format!("can have at most {limit} characters"))
}

/// legacyValidateEvent, on the stored (core/v1) form.
fn legacy(ev: &Value) -> Vec<FieldError> {
    let mut errs = vec![];
    let ns = s(ev, "/metadata/namespace");
    let involved_ns = s(ev, "/involvedObject/namespace");
    let mismatch = || FieldError::invalid("involvedObject.namespace", involved_ns.into(), "does not match event.namespace");
    if !is_set(ev, "/eventTime") {
        if involved_ns.is_empty() {
            if !ns.is_empty() && ns != "default" {
                errs.push(mismatch());
            }
        } else if ns != involved_ns {
            errs.push(mismatch());
        }
    } else {
        if involved_ns.is_empty() && ns != "default" && ns != "kube-system" {
            errs.push(mismatch());
        }
        let controller = s(ev, "/reportingComponent");
        if controller.is_empty() {
            errs.push(FieldError::required("reportingController", ""));
        }
        for msg in qualified_name_errors(controller) {
            errs.push(FieldError::invalid("reportingController", controller.into(), msg));
        }
        for (field, path, limit) in [
            ("reportingInstance", "/reportingInstance", REPORTING_INSTANCE_LIMIT),
            ("action", "/action", ACTION_LIMIT),
            ("reason", "/reason", REASON_LIMIT),
        ] {
            let v = s(ev, path);
            if v.is_empty() {
                errs.push(FieldError::required(field, ""));
            }
            if v.len() > limit {
                errs.push(at_most(field, limit));
            }
        }
        if s(ev, "/message").len() > NOTE_LIMIT {
            errs.push(at_most("message", NOTE_LIMIT));
        }
    }
    for msg in dns1123_subdomain_errors(ns) {
        errs.push(FieldError::invalid("namespace", ns.into(), msg));
    }
    errs
}

fn series(ev: &Value) -> Vec<FieldError> {
    let mut errs = vec![];
    if let Some(series) = ev.get("series").filter(|v| !v.is_null()) {
        if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
            errs.push(FieldError::invalid("series.count", "".into(), "should be at least 2"));
        }
        if !is_set(series, "/lastObservedTime") {
            errs.push(FieldError::required("series.lastObservedTime", ""));
        }
    }
    errs
}

/// ValidateEventCreate; `strict` for writes through events.k8s.io/v1.
pub fn validate_create(ev: &Value, strict: bool) -> Vec<FieldError> {
    let mut errs = legacy(ev);
    if !strict {
        return errs;
    }
    errs.extend(validate_object_meta(ev, NameRule::Subdomain));
    errs.extend(series(ev));
    if !is_set(ev, "/eventTime") {
        errs.push(FieldError::required("eventTime", ""));
    }
    let typ = s(ev, "/type");
    if typ != "Normal" && typ != "Warning" {
        errs.push(FieldError::invalid("type", "".into(), format!("has invalid value: {typ}")));
    }
    for (field, set) in [
        ("firstTimestamp", is_set(ev, "/firstTimestamp")),
        ("lastTimestamp", is_set(ev, "/lastTimestamp")),
        ("count", ev.get("count").and_then(Value::as_i64).unwrap_or(0) != 0),
        ("source", !s(ev, "/source/component").is_empty() || !s(ev, "/source/host").is_empty()),
    ] {
        if set {
            errs.push(FieldError::invalid(field, "".into(), "needs to be unset"));
        }
    }
    errs
}

/// ValidateEventUpdate; `strict` for writes through events.k8s.io/v1.
pub fn validate_update(new: &Value, old: &Value, strict: bool) -> Vec<FieldError> {
    let mut errs = legacy(new);
    if !strict {
        return errs;
    }
    errs.extend(validate_object_meta_update(new, old));
    if new.get("series") != old.get("series") {
        errs.extend(series(new));
    }
    // Go compares the typed fields; absent and zero values are equal there.
    let norm = |v: Option<&Value>| match v {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(s)) if s.is_empty() => Value::Null,
        Some(Value::Number(n)) if n.as_i64() == Some(0) => Value::Null,
        Some(v) => v.clone(),
    };
    for field in [
        "involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp", "count", "reason", "type", "eventTime", "action",
        "related", "reportingComponent", "reportingInstance",
    ] {
        let (n, o) = (norm(new.get(field)), norm(old.get(field)));
        if n != o {
            let path = if field == "reportingComponent" { "reportingController" } else { field };
            errs.push(FieldError::invalid(path, n, "field is immutable"));
        }
    }
    errs
}
