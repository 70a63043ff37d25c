//! Conversion between the stored form of an object and the version a client asked for.
//! Custom resources use conversion strategy None (only apiVersion changes); events.k8s.io/v1
//! Events are stored as core/v1 Events, as kube-apiserver does, and converted field by field;
//! Events are served with the fields Go's encoder always writes (see `go_zero_values`).

use serde_json::{Map, Value};

use crate::registry::ResourceDef;

/// (core/v1 field, events.k8s.io/v1 field)
const EVENT_FIELDS: [(&str, &str); 6] = [
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

fn rename(obj: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(v) = obj.remove(from) {
        obj.insert(to.into(), v);
    }
}

fn is_new_events(def: &ResourceDef) -> bool {
    def.group == "events.k8s.io" && def.plural == "events"
}

fn is_core_events(def: &ResourceDef) -> bool {
    def.group.is_empty() && def.plural == "events"
}

/// What Go's JSON encoder writes for an Event's fields that are never left out: a struct
/// (`omitempty` does not apply to structs) is `{}` when empty, a zero time `null`, a string
/// without `omitempty` `""`. (core/v1: involvedObject, source, firstTimestamp,
/// lastTimestamp, eventTime, reportingComponent, reportingInstance; events.k8s.io/v1:
/// eventTime, regarding, deprecatedSource, deprecatedFirstTimestamp, deprecatedLastTimestamp.)
fn go_zero_values(m: &mut Map<String, Value>, new_events: bool) {
    let zeros: &[(&str, Value)] = if new_events {
        &[
            ("eventTime", Value::Null),
            ("regarding", Value::Object(Map::new())),
            ("deprecatedSource", Value::Object(Map::new())),
            ("deprecatedFirstTimestamp", Value::Null),
            ("deprecatedLastTimestamp", Value::Null),
        ]
    } else {
        &[
            ("involvedObject", Value::Object(Map::new())),
            ("source", Value::Object(Map::new())),
            ("firstTimestamp", Value::Null),
            ("lastTimestamp", Value::Null),
            ("eventTime", Value::Null),
            ("reportingComponent", Value::String(String::new())),
            ("reportingInstance", Value::String(String::new())),
        ]
    };
    for (field, zero) in zeros {
        if !m.contains_key(*field) {
            m.insert((*field).into(), zero.clone());
        }
    }
    if new_events {
        // events.k8s.io/v1's reportingController and reportingInstance are omitempty.
        for field in ["reportingController", "reportingInstance"] {
            if m.get(field).is_some_and(|v| v == "") {
                m.remove(field);
            }
        }
    }
}

/// The object as served at `def`/`version`.
pub fn to_external(def: &ResourceDef, version: &str, obj: &Value) -> Value {
    let mut out = obj.clone();
    if is_new_events(def)
        && let Some(m) = out.as_object_mut() {
            for (core, new) in EVENT_FIELDS {
                rename(m, core, new);
            }
            rename(m, "reportingComponent", "reportingController");
            go_zero_values(m, true);
        }
    if is_core_events(def)
        && let Some(m) = out.as_object_mut() {
            go_zero_values(m, false);
        }
    out["apiVersion"] = def.api_version(version).into();
    out["kind"] = def.kind.clone().into();
    out
}

/// The stored form of an object written at `def`/`version`.
pub fn to_internal(def: &ResourceDef, version: &str, mut obj: Value) -> Value {
    if is_new_events(def) {
        if let Some(m) = obj.as_object_mut() {
            for (core, new) in EVENT_FIELDS {
                rename(m, new, core);
            }
            rename(m, "reportingController", "reportingComponent");
        }
        obj["apiVersion"] = "v1".into();
        obj["kind"] = "Event".into();
        return obj;
    }
    obj["apiVersion"] = def.api_version(version).into();
    obj
}
