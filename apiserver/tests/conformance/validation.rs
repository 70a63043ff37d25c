use serde_json::{Value, json};

use crate::common::*;

fn causes(st: &Value) -> Vec<(String, String, String)> {
    st["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["reason"].as_str().unwrap().to_string(), c["field"].as_str().unwrap().to_string(), c["message"].as_str().unwrap().to_string()))
        .collect()
}

#[tokio::test]
async fn schema_violations_are_422_with_causes() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let cases = [
        (json!({"size": "big"}), "FieldValueTypeInvalid", "spec.size", "Invalid value: \"string\": spec.size in body must be of type integer: \"string\""),
        (json!({}), "FieldValueRequired", "spec.size", "Required value"),
        (json!({"size": 0}), "FieldValueInvalid", "spec.size", "Invalid value: 0: spec.size in body should be greater than or equal to 1"),
        (json!({"size": 11}), "FieldValueInvalid", "spec.size", "Invalid value: 11: spec.size in body should be less than or equal to 10"),
        (json!({"size": 1, "color": "blue"}), "FieldValueNotSupported", "spec.color", "Unsupported value: \"blue\": supported values: \"red\", \"green\""),
        (json!({"size": 1, "label": "toolong"}), "FieldValueTooLong", "spec.label", "Too long: may not be more than 5 bytes"),
        (json!({"size": 1, "tags": [1]}), "FieldValueTypeInvalid", "spec.tags[0]", "Invalid value: \"integer\": spec.tags[0] in body must be of type string: \"integer\""),
    ];
    for (spec, reason, field, msg) in cases {
        let obj = json!({"apiVersion": "test.zundoko.example/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec});
        let (code, st) = raw.post(WIDGETS, &obj).await;
        assert_eq!(code, 422, "{st}");
        assert_eq!(st["reason"], "Invalid");
        assert_eq!(st["details"]["kind"], "Widget");
        assert_eq!(st["details"]["group"], "test.zundoko.example");
        assert_eq!(st["details"]["name"], "w");
        assert_eq!(causes(&st), vec![(reason.to_string(), field.to_string(), msg.to_string())], "{st}");
        assert_eq!(st["message"], format!("Widget.test.zundoko.example \"w\" is invalid: {field}: {msg}"));
    }
    // Several errors are listed in brackets.
    let (code, st) = raw.post(WIDGETS, &json!({"apiVersion": "test.zundoko.example/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 0, "color": "blue"}})).await;
    assert_eq!(code, 422);
    assert!(st["message"].as_str().unwrap().contains("is invalid: ["), "{st}");
    assert_eq!(causes(&st).len(), 2);
}

#[tokio::test]
async fn unknown_fields_are_pruned_unless_preserved() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let obj = json!({"apiVersion": "test.zundoko.example/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"size": 1, "bogus": true, "extra": {"anything": {"goes": 1}}}, "top": 1});
    let (code, o) = raw.post(WIDGETS, &obj).await;
    assert_eq!(code, 201, "{o}");
    assert!(o["spec"].get("bogus").is_none());
    assert!(o.get("top").is_none());
    assert_eq!(o["spec"]["extra"]["anything"]["goes"], 1);
    // fieldValidation=Strict rejects them instead.
    let mut obj2 = obj.clone();
    obj2["metadata"]["name"] = json!("w2");
    let (code, st) = raw.post(&format!("{WIDGETS}?fieldValidation=Strict"), &obj2).await;
    assert_eq!(code, 400, "{st}");
    assert_eq!(st["reason"], "BadRequest");
    assert_eq!(
        st["message"],
        "Widget in version \"v1\" cannot be handled as a Widget: strict decoding error: unknown field \"spec.bogus\", unknown field \"top\""
    );
}

#[tokio::test]
async fn kube_generated_schema_validates_hikawas() {
    let s = server().await;
    let c = client(&s);
    install_crds(&c).await;
    let raw = Raw::new(&s);
    let h = json!({"apiVersion": "zundokokiyoshi.kaitoy.github.com/v1beta1", "kind": "Hikawa", "metadata": {"name": "h"},
        "spec": {"intervalMillis": 100, "numZundokos": 3, "sayKiyoshi": true, "params": {"a": "b"}}});
    let (code, o) = raw.post(HIKAWAS, &h).await;
    assert_eq!(code, 201, "{o}");
    assert_eq!(o["spec"]["params"]["a"], "b");
    let bad = json!({"apiVersion": "zundokokiyoshi.kaitoy.github.com/v1beta1", "kind": "Hikawa", "metadata": {"name": "h2"}, "spec": {"intervalMillis": -1}});
    let (code, st) = raw.post(HIKAWAS, &bad).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["details"]["causes"][0]["field"], "spec.intervalMillis");
    let bad = json!({"apiVersion": "zundokokiyoshi.kaitoy.github.com/v1beta1", "kind": "Hikawa", "metadata": {"name": "h2"}, "spec": {"params": {"a": 1}}});
    let (code, st) = raw.post(HIKAWAS, &bad).await;
    assert_eq!(code, 422, "{st}");
    let fields: Vec<&str> = st["details"]["causes"].as_array().unwrap().iter().map(|c| c["field"].as_str().unwrap()).collect();
    assert!(fields.contains(&"spec.intervalMillis") && fields.contains(&"spec.params.a"), "{st}");
}

#[tokio::test]
async fn configmap_size_limit() {
    let s = server().await;
    let raw = Raw::new(&s);
    let big = "x".repeat(1024 * 1024 + 1);
    let (code, st) = raw.post("/api/v1/namespaces/default/configmaps", &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"k": big}})).await;
    assert_eq!(code, 422, "{}", st["message"]);
    assert_eq!(st["message"], "ConfigMap \"big\" is invalid: []: Too long: may not be more than 1048576 bytes");
    let huge = "x".repeat(3 * 1024 * 1024 + 10);
    let (code, _) = raw.post("/api/v1/namespaces/default/configmaps", &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"k": huge}})).await;
    assert_eq!(code, 413);
}
