//! What kube-apiserver's typed decoding keeps of a JSON object of a built-in kind: the fields
//! its Go struct declares (encoding/json drops the others), with Go's zero values standing for
//! absent ones. Two objects decoded here are equal exactly when apimachinery's
//! `Semantic.DeepEqual` finds their Go values equal: a nil slice or map equals an empty one,
//! "", 0 and false equal an absent field, and a nil pointer differs from a pointer to an empty
//! struct (`aggregationRule: {}` is set, `aggregationRule: null` is not).

use serde_json::{Map, Value};

/// The Go type of a field.
#[derive(Debug, Clone, Copy)]
pub enum Shape {
    /// string, bool, int, metav1.Time: its zero value ("", false, 0, null) is an absent field.
    Scalar,
    /// A pointer to a scalar (`*int64`, `*metav1.Time`): only null is absent.
    ScalarPtr,
    /// A slice of the shape; empty is absent.
    List(&'static Shape),
    /// A `map[string]T`; empty is absent.
    Map(&'static Shape),
    /// A struct of these fields; all zero is absent.
    Struct(&'static [(&'static str, Shape)]),
    /// A pointer to a struct of these fields: only null is absent, `{}` is kept.
    StructPtr(&'static [(&'static str, Shape)]),
}

/// The decoded value (None: Go's zero value), and the paths of the fields the type has not
/// (kube-apiserver's `unknown field "spec.x"` warnings), in the body's order.
pub fn decode(v: &Value, shape: Shape, path: &str, unknown: &mut Vec<String>) -> Option<Value> {
    let child = |key: &str| if path.is_empty() { key.to_string() } else { format!("{path}.{key}") };
    match (shape, v) {
        (_, Value::Null) => None,
        (Shape::Scalar, Value::String(s)) if s.is_empty() => None,
        (Shape::Scalar, Value::Bool(false)) => None,
        (Shape::Scalar, Value::Number(n)) if n.as_f64() == Some(0.0) => None,
        (Shape::Scalar | Shape::ScalarPtr, v) => Some(v.clone()),
        (Shape::List(item), Value::Array(a)) => {
            // An item's zero value is still an item: null and "" both decode to "".
            let items: Vec<Value> = a.iter().enumerate().map(|(i, x)| decode(x, *item, &format!("{path}[{i}]"), unknown).unwrap_or(Value::Null)).collect();
            (!items.is_empty()).then_some(Value::Array(items))
        }
        (Shape::Map(value), Value::Object(m)) => {
            let entries: Map<String, Value> = m.iter().map(|(k, x)| (k.clone(), decode(x, *value, &child(k), unknown).unwrap_or(Value::Null))).collect();
            (!entries.is_empty()).then_some(Value::Object(entries))
        }
        (Shape::Struct(fields) | Shape::StructPtr(fields), Value::Object(m)) => {
            let mut out = Map::new();
            for (k, x) in m {
                match fields.iter().find(|(name, _)| name == k) {
                    Some((_, field)) => {
                        if let Some(d) = decode(x, *field, &child(k), unknown) {
                            out.insert(k.clone(), d);
                        }
                    }
                    None => unknown.push(child(k)),
                }
            }
            (matches!(shape, Shape::StructPtr(_)) || !out.is_empty()).then_some(Value::Object(out))
        }
        // A value of another type is a decoding error in Go; kept, it differs from everything.
        (_, v) => Some(v.clone()),
    }
}

/// `decode` of a whole object, `{}` for its zero value.
pub fn decode_object(v: &Value, fields: &'static [(&'static str, Shape)], unknown: &mut Vec<String>) -> Value {
    decode(v, Shape::StructPtr(fields), "", unknown).unwrap_or_else(|| Value::Object(Map::new()))
}

const STRINGS: Shape = Shape::List(&Shape::Scalar);

const OWNER_REFERENCE: [(&str, Shape); 6] =
    [("apiVersion", Shape::Scalar), ("kind", Shape::Scalar), ("name", Shape::Scalar), ("uid", Shape::Scalar), ("controller", Shape::ScalarPtr), ("blockOwnerDeletion", Shape::ScalarPtr)];

const MANAGED_FIELDS_ENTRY: [(&str, Shape); 7] = [
    ("manager", Shape::Scalar),
    ("operation", Shape::Scalar),
    ("apiVersion", Shape::Scalar),
    ("time", Shape::ScalarPtr),
    ("fieldsType", Shape::Scalar),
    // FieldsV1 is raw JSON: whatever it holds is kept.
    ("fieldsV1", Shape::ScalarPtr),
    ("subresource", Shape::Scalar),
];

/// metav1.ObjectMeta.
pub const OBJECT_META: [(&str, Shape); 15] = [
    ("name", Shape::Scalar),
    ("generateName", Shape::Scalar),
    ("namespace", Shape::Scalar),
    ("selfLink", Shape::Scalar),
    ("uid", Shape::Scalar),
    ("resourceVersion", Shape::Scalar),
    ("generation", Shape::Scalar),
    ("creationTimestamp", Shape::Scalar),
    ("deletionTimestamp", Shape::ScalarPtr),
    ("deletionGracePeriodSeconds", Shape::ScalarPtr),
    ("labels", Shape::Map(&Shape::Scalar)),
    ("annotations", Shape::Map(&Shape::Scalar)),
    ("ownerReferences", Shape::List(&Shape::Struct(&OWNER_REFERENCE))),
    ("finalizers", STRINGS),
    ("managedFields", Shape::List(&Shape::Struct(&MANAGED_FIELDS_ENTRY))),
];

const META: Shape = Shape::Struct(&OBJECT_META);

const LABEL_SELECTOR_REQUIREMENT: [(&str, Shape); 3] = [("key", Shape::Scalar), ("operator", Shape::Scalar), ("values", STRINGS)];

const LABEL_SELECTOR: [(&str, Shape); 2] = [("matchLabels", Shape::Map(&Shape::Scalar)), ("matchExpressions", Shape::List(&Shape::Struct(&LABEL_SELECTOR_REQUIREMENT)))];

/// rbac/v1 PolicyRule.
const POLICY_RULE: [(&str, Shape); 5] = [("verbs", STRINGS), ("apiGroups", STRINGS), ("resources", STRINGS), ("resourceNames", STRINGS), ("nonResourceURLs", STRINGS)];

const RULES: Shape = Shape::List(&Shape::Struct(&POLICY_RULE));

/// rbac/v1 Role.
pub const ROLE: [(&str, Shape); 4] = [("apiVersion", Shape::Scalar), ("kind", Shape::Scalar), ("metadata", META), ("rules", RULES)];

/// rbac/v1 ClusterRole: a Role and its `*AggregationRule`.
pub const CLUSTER_ROLE: [(&str, Shape); 5] = [
    ("apiVersion", Shape::Scalar),
    ("kind", Shape::Scalar),
    ("metadata", META),
    ("rules", RULES),
    ("aggregationRule", Shape::StructPtr(&[("clusterRoleSelectors", Shape::List(&Shape::Struct(&LABEL_SELECTOR)))])),
];

const SUBJECT: [(&str, Shape); 4] = [("kind", Shape::Scalar), ("apiGroup", Shape::Scalar), ("name", Shape::Scalar), ("namespace", Shape::Scalar)];

/// rbac/v1 RoleBinding and ClusterRoleBinding.
pub const BINDING: [(&str, Shape); 5] = [
    ("apiVersion", Shape::Scalar),
    ("kind", Shape::Scalar),
    ("metadata", META),
    ("subjects", Shape::List(&Shape::Struct(&SUBJECT))),
    ("roleRef", Shape::Struct(&[("apiGroup", Shape::Scalar), ("kind", Shape::Scalar), ("name", Shape::Scalar)])),
];

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn unknown_fields_go_and_zero_values_equal_absent_ones_but_not_a_pointer_to_an_empty_struct() {
        let mut unknown = vec![];
        let role = json!({"kind": "ClusterRole", "metadata": {"name": "r", "labels": {}, "x": 1}, "rules": [{"verbs": ["get"], "y": true}], "z": null, "aggregationRule": {}});
        let decoded = decode_object(&role, &CLUSTER_ROLE, &mut unknown);
        assert_eq!(decoded, json!({"kind": "ClusterRole", "metadata": {"name": "r"}, "rules": [{"verbs": ["get"]}], "aggregationRule": {}}));
        assert_eq!(unknown, ["metadata.x", "rules[0].y", "z"]);
        let plain = json!({"kind": "ClusterRole", "metadata": {"name": "r", "namespace": ""}, "rules": [{"verbs": ["get"], "resourceNames": []}]});
        let decoded_plain = decode_object(&plain, &CLUSTER_ROLE, &mut vec![]);
        assert_eq!(decoded_plain, json!({"kind": "ClusterRole", "metadata": {"name": "r"}, "rules": [{"verbs": ["get"]}]}));
        assert_ne!(decoded, decoded_plain, "aggregationRule {{}} is a pointer to an empty struct");
    }
}
