//! CEL validation rules (`x-kubernetes-validations`): root rules on `self.metadata.name`,
//! transition rules with `oldSelf`, message, messageExpression, reason and fieldPath, status
//! writes, the blocking-error rule, and CRDs whose rules do not compile.

use serde_json::{Value, json};

use crate::common::*;

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const GADGETS: &str = "/apis/test.zundoko.example/v1/namespaces/default/gadgets";
const NAME_RULE: &str = "self.metadata.name.size() <= 240";

fn gadget_crd(root_rules: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.test.zundoko.example"},
        "spec": {
            "group": "test.zundoko.example", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "x-kubernetes-validations": root_rules,
                    "properties": {
                        "spec": {
                            "type": "object",
                            "x-kubernetes-validations": [
                                {"rule": "self.size >= oldSelf.size", "message": "size may not decrease", "reason": "FieldValueForbidden", "fieldPath": ".size"},
                                {"rule": "self.size <= 5", "messageExpression": "'size ' + string(self.size) + ' is over 5'"}
                            ],
                            "properties": {"size": {"type": "integer"}}
                        },
                        "status": {"type": "object", "properties": {"count": {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= 0"}]}}}
                    }
                }}
            }]
        }
    })
}

fn gadget(name: &str, size: i64) -> Value {
    json!({"apiVersion": "test.zundoko.example/v1", "kind": "Gadget", "metadata": {"name": name}, "spec": {"size": size}})
}

fn only_cause(st: &Value) -> (String, String, String) {
    let causes = st["details"]["causes"].as_array().unwrap_or_else(|| panic!("no causes: {st}"));
    assert_eq!(causes.len(), 1, "{st}");
    let c = &causes[0];
    (c["reason"].as_str().unwrap().into(), c["field"].as_str().unwrap().into(), c["message"].as_str().unwrap().into())
}

#[tokio::test]
async fn root_name_rule_refuses_long_names_on_create() {
    let s = server().await;
    let raw = Raw::new(&s);
    let msg = "Hikawa names must be at most 240 characters: children are named <name>-zundoko-NNNN";
    let (code, o) = raw.post(CRDS, &gadget_crd(json!([{"rule": NAME_RULE, "message": msg}]))).await;
    assert_eq!(code, 201, "{o}");
    let name = "a".repeat(241);
    let (code, st) = raw.post(GADGETS, &gadget(&name, 1)).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["reason"], "Invalid");
    assert_eq!(only_cause(&st), ("FieldValueInvalid".into(), "<nil>".into(), format!("Invalid value: \"object\": {msg}")));
    assert_eq!(st["message"], format!("Gadget.test.zundoko.example \"{name}\" is invalid: <nil>: Invalid value: \"object\": {msg}"));
    let (code, o) = raw.post(GADGETS, &gadget(&"a".repeat(240), 1)).await;
    assert_eq!(code, 201, "{o}");
    // Without a message, the rule itself is quoted.
    let (code, _) = raw.delete(&format!("{CRDS}/gadgets.test.zundoko.example"), None).await;
    assert_eq!(code, 200);
    assert!(eventually(std::time::Duration::from_secs(10), || async { raw.get(&format!("{CRDS}/gadgets.test.zundoko.example")).await.0 == 404 }).await);
    let (code, o) = raw.post(CRDS, &gadget_crd(json!([{"rule": NAME_RULE}]))).await;
    assert_eq!(code, 201, "{o}");
    let (code, st) = raw.post(GADGETS, &gadget(&name, 1)).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(only_cause(&st).2, format!("Invalid value: \"object\": failed rule: {NAME_RULE}"));
}

#[tokio::test]
async fn transition_rules_message_expression_and_status() {
    let s = server().await;
    let raw = Raw::new(&s);
    let (code, o) = raw.post(CRDS, &gadget_crd(json!([{"rule": NAME_RULE}]))).await;
    assert_eq!(code, 201, "{o}");
    // messageExpression on create.
    let (code, st) = raw.post(GADGETS, &gadget("g", 6)).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(only_cause(&st), ("FieldValueInvalid".into(), "spec".into(), "Invalid value: \"object\": size 6 is over 5".into()));
    // The transition rule is skipped on create, and checked on update (patch and apply).
    let (code, o) = raw.post(GADGETS, &gadget("g", 3)).await;
    assert_eq!(code, 201, "{o}");
    let (code, st) = raw.patch(&format!("{GADGETS}/g"), "application/merge-patch+json", &json!({"spec": {"size": 2}})).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(only_cause(&st), ("FieldValueForbidden".into(), "spec.size".into(), "Forbidden: size may not decrease".into()));
    assert_eq!(st["message"], "Gadget.test.zundoko.example \"g\" is invalid: spec.size: Forbidden: size may not decrease");
    let (code, st) = raw.patch(&format!("{GADGETS}/g?fieldManager=t&force=true"), "application/apply-patch+yaml", &gadget("g", 1)).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(only_cause(&st).1, "spec.size");
    let (code, o) = raw.patch(&format!("{GADGETS}/g"), "application/merge-patch+json", &json!({"spec": {"size": 4}})).await;
    assert_eq!(code, 200, "{o}");
    // Status writes are checked too.
    let (code, st) = raw.patch(&format!("{GADGETS}/g/status"), "application/merge-patch+json", &json!({"status": {"count": -1}})).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(only_cause(&st), ("FieldValueInvalid".into(), "status.count".into(), "Invalid value: \"integer\": failed rule: self >= 0".into()));
    let (code, o) = raw.patch(&format!("{GADGETS}/g/status"), "application/merge-patch+json", &json!({"status": {"count": 1}})).await;
    assert_eq!(code, 200, "{o}");
}

#[tokio::test]
async fn schema_errors_block_the_rules() {
    let s = server().await;
    let raw = Raw::new(&s);
    let (code, o) = raw.post(CRDS, &gadget_crd(json!([{"rule": NAME_RULE}]))).await;
    assert_eq!(code, 201, "{o}");
    let mut g = gadget(&"a".repeat(241), 1);
    g["spec"]["size"] = json!("big");
    let (code, st) = raw.post(GADGETS, &g).await;
    assert_eq!(code, 422, "{st}");
    let causes = st["details"]["causes"].as_array().unwrap();
    assert_eq!(causes.len(), 2, "{st}");
    assert_eq!(causes[0]["field"], "spec.size");
    assert_eq!(causes[1]["field"], "<nil>");
    assert_eq!(causes[1]["message"], "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation");
}

#[tokio::test]
async fn crd_with_a_rule_that_does_not_compile_is_invalid() {
    let s = server().await;
    let raw = Raw::new(&s);
    let (code, st) = raw.post(CRDS, &gadget_crd(json!([{"rule": "self.metadata.name.size( <= 240"}]))).await;
    assert_eq!(code, 422, "{st}");
    let (reason, field, message) = only_cause(&st);
    assert_eq!(reason, "FieldValueInvalid");
    assert_eq!(field, "spec.versions[0].schema.openAPIV3Schema.x-kubernetes-validations[0].rule");
    assert!(
        message.starts_with("Invalid value: apiextensions.ValidationRule{Rule:\"self.metadata.name.size( <= 240\", Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:"),
        "{message}"
    );
    assert!(st["message"].as_str().unwrap().starts_with("CustomResourceDefinition.apiextensions.k8s.io \"gadgets.test.zundoko.example\" is invalid: "), "{st}");
    let (code, _) = raw.get(&format!("{CRDS}/gadgets.test.zundoko.example")).await;
    assert_eq!(code, 404);
}
