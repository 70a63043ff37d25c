//! Conversion between the stored form of an object and the version a client asked for.
//! Custom resources use conversion strategy None (only apiVersion changes); events.k8s.io/v1
//! Events are stored as core/v1 Events, as kube-apiserver does, and converted field by field.

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

/// The object as served at `def`/`version`.
pub fn to_external(def: &ResourceDef, version: &str, obj: &Value) -> Value {
    let mut out = obj.clone();
    if is_new_events(def)
        && let Some(m) = out.as_object_mut() {
            for (core, new) in EVENT_FIELDS {
                rename(m, core, new);
            }
            rename(m, "reportingComponent", "reportingController");
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
