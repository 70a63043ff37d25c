//! CEL validation rules (`x-kubernetes-validations`) of a CRD's schema, evaluated as
//! apiextensions-apiserver does: each rule at its schema node with `self` bound to the value
//! there (at the root only `apiVersion`, `kind`, `metadata.name`, `metadata.generateName` and
//! the other top-level fields), transition rules (those using `oldSelf`) only where an old
//! value exists, and failures reported as `<path>: Invalid value: "<schema type>": <message>`
//! (`<nil>` at the root). Rules are parsed with the `cel` crate: a rule that does not parse
//! makes the CRD invalid; type checking and cost limits are not done.

use std::collections::HashMap;

use cel::{Context, Program, Value as CelValue};
use serde_json::{Map, Value};

use crate::status::{ErrType, FieldError};
use crate::goquote::Quoted;

/// The error kube-apiserver adds instead of evaluating rules on an object that already has a
/// blocking schema error (apiextensions `hasBlockingErr`).
pub fn blocking_error(errs: &[FieldError]) -> Option<FieldError> {
    let blocking = |t: &ErrType| matches!(t, ErrType::NotSupported | ErrType::Required | ErrType::TooLong | ErrType::TooMany | ErrType::TypeInvalid);
    errs.iter().any(|e| blocking(&e.typ)).then(|| {
        FieldError::invalid(
            "<nil>",
            Value::Null,
            "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        )
    })
}

/// Whether any node of the schema has rules (without any, kube-apiserver has no CEL validator).
pub fn has_rules(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => m.get("x-kubernetes-validations").and_then(Value::as_array).is_some_and(|a| !a.is_empty()) || m.values().any(has_rules),
        Value::Array(a) => a.iter().any(has_rules),
        _ => false,
    }
}

fn rules(schema: &Value) -> &[Value] {
    schema.get("x-kubernetes-validations").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

fn rule_text(rule: &Value, key: &str) -> String {
    rule.get(key).and_then(Value::as_str).unwrap_or("").trim().to_string()
}

/// Go's `%#v` of an apiextensions.ValidationRule, the value of a compile error.
fn go_rule(rule: &Value) -> String {
    let reason = match rule.get("reason").and_then(Value::as_str) {
        Some(r) => format!("(*apiextensions.FieldValueErrorReason)({})", Quoted(r)),
        None => "(*apiextensions.FieldValueErrorReason)(nil)".into(),
    };
    format!(
        "{}apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{reason}, FieldPath:{}, OptionalOldSelf:(*bool)(nil)}}",
        crate::status::RAW_VALUE_MARK,
        Quoted(rule.get("rule").and_then(Value::as_str).unwrap_or("")),
        Quoted(rule.get("message").and_then(Value::as_str).unwrap_or("")),
        Quoted(rule.get("messageExpression").and_then(Value::as_str).unwrap_or("")),
        Quoted(rule.get("fieldPath").and_then(Value::as_str).unwrap_or("")),
    )
}

/// The rules of a CRD version's schema that do not compile, at the schema paths
/// kube-apiserver reports (`...openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule`).
pub fn compile_errors(schema: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = vec![];
    for (i, rule) in rules(schema).iter().enumerate() {
        let field = format!("{path}.x-kubernetes-validations[{i}].rule");
        let text = rule_text(rule, "rule");
        if text.is_empty() {
            errs.push(FieldError::required(field, "rule is not specified"));
            continue;
        }
        if let Err(e) = Program::compile(&text) {
            errs.push(FieldError::new(ErrType::Invalid, field, Some(Value::String(go_rule(rule))), format!("compilation failed: {e}")));
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, sub) in props {
            errs.extend(compile_errors(sub, &format!("{path}.properties[{k}]")));
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        errs.extend(compile_errors(items, &format!("{path}.items")));
    }
    if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        errs.extend(compile_errors(ap, &format!("{path}.additionalProperties")));
    }
    errs
}

/// Evaluates every rule of `schema` on `obj` (with `old` for transition rules).
pub fn validate(schema: &Value, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = vec![];
    let root = |o: &Value| {
        // At the root, only name and generateName of metadata are visible to rules.
        let mut o = o.clone();
        if let Some(m) = o.get("metadata").and_then(Value::as_object) {
            let kept: Map<String, Value> = m.iter().filter(|(k, _)| *k == "name" || *k == "generateName").map(|(k, v)| (k.clone(), v.clone())).collect();
            o["metadata"] = Value::Object(kept);
        }
        o
    };
    let old_root = old.map(root);
    walk(schema, &root(obj), old_root.as_ref(), "", true, &mut errs);
    errs
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

fn walk(schema: &Value, value: &Value, old: Option<&Value>, path: &str, is_root: bool, errs: &mut Vec<FieldError>) {
    if value.is_null() {
        return;
    }
    for rule in rules(schema) {
        if let Some(e) = evaluate(schema, rule, value, old, path) {
            errs.push(e);
        }
    }
    if let (Some(props), Some(obj)) = (schema.get("properties").and_then(Value::as_object), value.as_object()) {
        for (k, sub) in props {
            if is_root && k == "metadata" {
                continue;
            }
            if let Some(v) = obj.get(k) {
                walk(sub, v, old.and_then(|o| o.get(k)), &child(path, k), false, errs);
            }
        }
    }
    if let (Some(ap), Some(obj)) = (schema.get("additionalProperties").filter(|a| a.is_object()), value.as_object()) {
        for (k, v) in obj {
            walk(ap, v, old.and_then(|o| o.get(k)), &format!("{path}[{k}]"), false, errs);
        }
    }
    if let (Some(items), Some(list)) = (schema.get("items").filter(|i| i.is_object()), value.as_array()) {
        // List items are not correlated with old ones here: transition rules on items are skipped.
        for (i, v) in list.iter().enumerate() {
            walk(items, v, None, &format!("{path}[{i}]"), false, errs);
        }
    }
}

fn to_cel(v: &Value) -> CelValue {
    match v {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => CelValue::Int(i),
            (None, Some(u)) => CelValue::UInt(u),
            _ => CelValue::Float(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => CelValue::String(s.clone().into()),
        Value::Array(a) => CelValue::List(a.iter().map(to_cel).collect::<Vec<_>>().into()),
        Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect::<HashMap<String, CelValue>>().into(),
    }
}

/// One rule at one node: None when it holds (or is a transition rule without an old value).
fn evaluate(schema: &Value, rule: &Value, value: &Value, old: Option<&Value>, path: &str) -> Option<FieldError> {
    let text = rule_text(rule, "rule");
    let program = Program::compile(&text).ok()?;
    let transition = program.references().has_variable("oldSelf");
    if transition && old.is_none() {
        return None;
    }
    let mut ctx = Context::default();
    ctx.add_variable_from_value("self", to_cel(value));
    if let Some(old) = old {
        ctx.add_variable_from_value("oldSelf", to_cel(old));
    }
    let mut field = path.to_string();
    for seg in rule_text(rule, "fieldPath").split('.').filter(|s| !s.is_empty()) {
        field = child(&field, seg);
    }
    let field = if field.is_empty() { "<nil>".to_string() } else { field };
    let typ = Value::String(schema.get("type").and_then(Value::as_str).unwrap_or("").to_string());
    let rule_or_message = if rule_text(rule, "message").is_empty() { text.clone() } else { rule_text(rule, "message") };
    let detail = match program.execute(&ctx) {
        Ok(CelValue::Bool(true)) => return None,
        Ok(CelValue::Bool(false)) => message(rule, &ctx).unwrap_or_else(|| {
            if rule_text(rule, "message").is_empty() { format!("failed rule: {text}") } else { rule_text(rule, "message") }
        }),
        Ok(other) => format!("{other:?} evaluating rule: {rule_or_message}"),
        Err(e) => format!("{e} evaluating rule: {rule_or_message}"),
    };
    Some(match rule.get("reason").and_then(Value::as_str) {
        Some("FieldValueForbidden") => FieldError::forbidden(field, detail),
        Some("FieldValueRequired") => FieldError::required(field, detail),
        Some("FieldValueDuplicate") => FieldError::new(ErrType::Duplicate, field, Some(typ), ""),
        _ => FieldError::new(ErrType::Invalid, field, Some(typ), detail),
    })
}

/// A messageExpression's result, when it evaluates to a non-empty string (otherwise the
/// static message is used, as kube-apiserver does).
fn message(rule: &Value, ctx: &Context) -> Option<String> {
    let expr = rule_text(rule, "messageExpression");
    if expr.is_empty() {
        return None;
    }
    match Program::compile(&expr).ok()?.execute(ctx).ok()? {
        CelValue::String(s) if !s.trim().is_empty() => Some(s.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn root_rule_sees_only_name_of_metadata() {
        let schema = json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.metadata.name.size() <= 3 && !has(self.metadata.labels)"}]});
        assert!(validate(&schema, &json!({"metadata": {"name": "abc", "labels": {"a": "b"}}}), None).is_empty());
        let errs = validate(&schema, &json!({"metadata": {"name": "abcd"}}), None);
        assert_eq!(errs[0].message(), "<nil>: Invalid value: \"object\": failed rule: self.metadata.name.size() <= 3 && !has(self.metadata.labels)");
    }

    #[test]
    fn transition_rules_need_an_old_value() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"n": {"type": "integer",
            "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "may not decrease"}]}}}}});
        assert!(validate(&schema, &json!({"spec": {"n": 1}}), None).is_empty());
        let errs = validate(&schema, &json!({"spec": {"n": 1}}), Some(&json!({"spec": {"n": 2}})));
        assert_eq!(errs[0].message(), "spec.n: Invalid value: \"integer\": may not decrease");
    }
}
