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

const CMS: &str = "/api/v1/namespaces/default/configmaps";
/// kube-apiserver 1.32+'s text for a ConfigMap over corev1.MaxSecretSize (field.TooLong on
/// field.NewPath(""), which prints as `[]`; apimachinery before 1.32 said "must have at most
/// 1048576 bytes").
const CM_TOO_LONG: &str = "Too long: may not be more than 1048576 bytes";

fn cm(name: &str, data: Value, binary: Value) -> Value {
    let mut o = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    for (k, v) in [("data", data), ("binaryData", binary)] {
        if !v.is_null() {
            o[k] = v;
        }
    }
    o
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn assert_cm_too_long(code: u16, st: &Value, name: &str) {
    assert_eq!(code, 422, "{}", st["message"]);
    assert_eq!(st["reason"], "Invalid");
    assert_eq!(st["message"], format!("ConfigMap \"{name}\" is invalid: []: {CM_TOO_LONG}"));
    assert_eq!(causes(st), vec![("FieldValueTooLong".to_string(), "[]".to_string(), CM_TOO_LONG.to_string())], "{st}");
}

/// ValidateConfigMap: the values of `data` and `binaryData` together, binaryData counted
/// decoded and keys not at all, may hold 1 MiB and not one byte more.
#[tokio::test]
async fn configmap_size_limit() {
    let s = server().await;
    let raw = Raw::new(&s);
    let mib = 1024 * 1024;
    // Exactly 1 MiB of data under a long key: keys do not count.
    let (code, o) = raw.post(CMS, &cm("at-limit", json!({"k".repeat(200): "x".repeat(mib)}), json!(null))).await;
    assert_eq!(code, 201, "{}", o["message"]);
    let (code, st) = raw.post(CMS, &cm("big", json!({"k": "x".repeat(mib + 1)}), json!(null))).await;
    assert_cm_too_long(code, &st, "big");
    // Multi-byte UTF-8 counts in bytes, as Go's len(string) does: 2^19 two-byte characters fit,
    // one more does not.
    let (code, o) = raw.post(CMS, &cm("utf8", json!({"k": "é".repeat(mib / 2)}), json!(null))).await;
    assert_eq!(code, 201, "{}", o["message"]);
    let (code, st) = raw.post(CMS, &cm("utf8-big", json!({"k": "é".repeat(mib / 2), "l": "x"}), json!(null))).await;
    assert_cm_too_long(code, &st, "utf8-big");
    // binaryData counts its decoded bytes, not its base64 (1,398,104 characters here).
    let (code, o) = raw.post(CMS, &cm("bin", json!(null), json!({"m": b64(&vec![0xff; mib])}))).await;
    assert_eq!(code, 201, "{}", o["message"]);
    let (code, st) = raw.post(CMS, &cm("bin-big", json!(null), json!({"m": b64(&vec![0xff; mib + 1])}))).await;
    assert_cm_too_long(code, &st, "bin-big");
    // The two maps share the limit.
    let (code, st) = raw.post(CMS, &cm("both", json!({"a": "x".repeat(mib / 2)}), json!({"b": b64(&vec![1; mib / 2 + 1])}))).await;
    assert_cm_too_long(code, &st, "both");
    // Past kube-apiserver's 3 MiB request body limit, the body itself is refused.
    let huge = "x".repeat(3 * mib + 10);
    let (code, _) = raw.post(CMS, &cm("huge", json!({"k": huge}), json!(null))).await;
    assert_eq!(code, 413);
}

/// The limit holds on every write, not only on create: update, merge and JSON patch, and
/// server-side apply (`make swap`'s `kubectl apply --server-side`); the stored object stays.
#[tokio::test]
async fn configmap_size_limit_on_update_patch_and_apply() {
    let s = server().await;
    let raw = Raw::new(&s);
    let mib = 1024 * 1024;
    let small = b64(b"\0asm");
    let (code, o) = raw.post(CMS, &cm("m", json!(null), json!({"rules.wasm": small}))).await;
    assert_eq!(code, 201, "{}", o["message"]);
    let two_mib = b64(&vec![0xfe; 2 * mib]);
    let (code, st) = raw.put(&format!("{CMS}/m"), &cm("m", json!(null), json!({"rules.wasm": two_mib}))).await;
    assert_cm_too_long(code, &st, "m");
    let (code, st) = raw.patch(&format!("{CMS}/m"), "application/merge-patch+json", &json!({"binaryData": {"rules.wasm": two_mib}})).await;
    assert_cm_too_long(code, &st, "m");
    let (code, st) = raw.patch(&format!("{CMS}/m"), "application/strategic-merge-patch+json", &json!({"data": {"more": "x".repeat(mib)}})).await;
    assert_cm_too_long(code, &st, "m");
    let (code, st) = raw.patch(&format!("{CMS}/m"), "application/json-patch+json", &json!([{"op": "replace", "path": "/binaryData/rules.wasm", "value": two_mib}])).await;
    assert_cm_too_long(code, &st, "m");
    let (code, st) = raw.patch(&format!("{CMS}/m?fieldManager=zundoko-deploy&force=true"), "application/apply-patch+yaml", &cm("m", json!(null), json!({"rules.wasm": two_mib}))).await;
    assert_cm_too_long(code, &st, "m");
    let (_, o) = raw.get(&format!("{CMS}/m")).await;
    assert_eq!(o["binaryData"]["rules.wasm"], small, "a refused write changes nothing");
    // A 900 KiB module goes in by apply, as `make swap` puts one.
    let module = b64(&vec![0xfe; 900 * 1024]);
    let (code, o) = raw.patch(&format!("{CMS}/m?fieldManager=zundoko-deploy&force=true"), "application/apply-patch+yaml", &cm("m", json!(null), json!({"rules.wasm": module}))).await;
    assert_eq!(code, 200, "{}", o["message"]);
    assert_eq!(o["binaryData"]["rules.wasm"], module);
}
