//! `meta.k8s.io/v1 Table` output (what `kubectl get` asks for): the custom resources'
//! additionalPrinterColumns (with the default Age column when none are declared) and the
//! columns kube-apiserver prints for the served built-ins.

use serde_json::{Value, json};

use crate::registry::ResourceDef;
use crate::util::{human_duration, parse_rfc3339, unix_now};

const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

struct Col {
    name: String,
    typ: String,
    format: String,
    description: String,
    priority: i64,
    path: String,
}

fn col(name: &str, typ: &str, path: &str) -> Col {
    Col { name: name.into(), typ: typ.into(), format: String::new(), description: String::new(), priority: 0, path: path.into() }
}

fn columns(def: &ResourceDef, version: &str) -> Vec<Col> {
    let mut cols = vec![Col { name: "Name".into(), typ: "string".into(), format: "name".into(), description: NAME_DESC.into(), priority: 0, path: ".metadata.name".into() }];
    match (def.group.as_str(), def.plural.as_str(), def.builtin) {
        ("", "configmaps", true) => {
            cols.push(col("Data", "integer", "#datacount"));
            cols.push(col("Age", "string", "#age"));
        }
        ("", "secrets", true) => {
            cols.push(col("Type", "string", ".type"));
            cols.push(col("Data", "string", "#datacount"));
            cols.push(col("Age", "string", "#age"));
        }
        ("", "namespaces", true) => {
            cols.push(col("Status", "string", ".status.phase"));
            cols.push(col("Age", "string", "#age"));
        }
        ("coordination.k8s.io", "leases", true) => {
            cols.push(col("Holder", "string", ".spec.holderIdentity"));
            cols.push(col("Age", "string", "#age"));
        }
        ("apiextensions.k8s.io", _, true) => cols.push(col("Created At", "date", ".metadata.creationTimestamp")),
        (_, "events", true) => {
            cols.push(col("Last Seen", "string", "#lastseen"));
            cols.push(col("Type", "string", ".type"));
            cols.push(col("Reason", "string", ".reason"));
            cols.push(col("Object", "string", "#object"));
            cols.push(col("Message", "string", "#message"));
        }
        (_, _, false) => {
            let pcs = def.version(version).map(|v| v.printer_columns.clone()).unwrap_or_default();
            if pcs.is_empty() {
                cols.push(col("Age", "date", ".metadata.creationTimestamp"));
            }
            for pc in pcs {
                let s = |k: &str| pc.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                cols.push(Col {
                    name: s("name"),
                    typ: s("type"),
                    format: s("format"),
                    description: s("description"),
                    priority: pc.get("priority").and_then(Value::as_i64).unwrap_or(0),
                    path: s("jsonPath"),
                });
            }
        }
        _ => cols.push(col("Created At", "date", ".metadata.creationTimestamp")),
    }
    cols
}

/// Evaluates the simple JSONPath forms printer columns use: `.a.b`, `.a[0].b`,
/// `.a[?(@.type=="Ready")].status`.
pub fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let p = path.trim().trim_start_matches('{').trim_end_matches('}').trim_start_matches('$');
    let mut cur = obj;
    let mut rest = p;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            cur = cur.get(&r[..end])?;
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = &r[..end];
            rest = &r[end + 1..];
            if let Some(f) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (k, v) = f.split_once("==")?;
                let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
                cur = cur.as_array()?.iter().find(|it| it.get(k.trim()).and_then(Value::as_str) == Some(v))?;
            } else {
                let i: usize = inner.parse().ok()?;
                cur = cur.as_array()?.get(i)?;
            }
        } else {
            return None;
        }
    }
    Some(cur)
}

fn age(ts: Option<&str>) -> Value {
    match ts.and_then(parse_rfc3339) {
        Some(t) => human_duration(unix_now() - t).into(),
        None => "<unknown>".into(),
    }
}

fn cell(obj: &Value, c: &Col) -> Value {
    match c.path.as_str() {
        "#age" => age(obj.pointer("/metadata/creationTimestamp").and_then(Value::as_str)),
        "#datacount" => {
            let n = obj.get("data").and_then(Value::as_object).map_or(0, |m| m.len()) + obj.get("binaryData").and_then(Value::as_object).map_or(0, |m| m.len());
            n.into()
        }
        "#lastseen" => {
            let ts = ["lastTimestamp", "deprecatedLastTimestamp", "eventTime"].iter().find_map(|k| obj.get(*k).and_then(Value::as_str));
            age(ts)
        }
        "#object" => {
            let o = obj.get("involvedObject").or(obj.get("regarding")).cloned().unwrap_or(Value::Null);
            format!("{}/{}", o["kind"].as_str().unwrap_or("").to_lowercase(), o["name"].as_str().unwrap_or("")).into()
        }
        "#message" => obj.get("message").or(obj.get("note")).cloned().unwrap_or(Value::Null),
        p => {
            let v = json_path(obj, p).cloned();
            match (c.typ.as_str(), v) {
                ("date", Some(Value::String(s))) => age(Some(&s)),
                (_, Some(Value::Array(a))) => Value::String(a.iter().map(|x| x.as_str().map(String::from).unwrap_or(x.to_string())).collect::<Vec<_>>().join(",")),
                (_, Some(Value::Object(m))) => Value::String(Value::Object(m).to_string()),
                (_, v) => v.unwrap_or(Value::Null),
            }
        }
    }
}

/// A Table of `objects` (external form), with rows carrying PartialObjectMetadata.
pub fn to_table(def: &ResourceDef, version: &str, objects: &[Value], with_definitions: bool, list_meta: Option<Value>) -> Value {
    let cols = columns(def, version);
    let defs: Vec<Value> = if with_definitions {
        cols.iter().map(|c| json!({"name": c.name, "type": c.typ, "format": c.format, "description": c.description, "priority": c.priority})).collect()
    } else {
        vec![]
    };
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            json!({
                "cells": cols.iter().map(|c| cell(o, c)).collect::<Vec<_>>(),
                "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o.get("metadata").cloned().unwrap_or(json!({}))},
            })
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta.unwrap_or(json!({})), "columnDefinitions": defs, "rows": rows})
}
