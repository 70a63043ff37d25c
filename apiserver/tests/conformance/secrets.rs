//! core/v1 Secrets as kube-apiserver serves them: `data` is base64 `[]byte`, `stringData` is
//! merged into it and never stored, `type` defaults to Opaque and never changes, and
//! ValidateSecret's rules and messages.

use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::common::*;

const SECRETS: &str = "/api/v1/namespaces/default/secrets";

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn secret(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}})
}

fn docker_config(server: &str) -> String {
    json!({"auths": {server: {"username": "u", "password": "p", "auth": b64("u:p")}}}).to_string()
}

#[tokio::test]
async fn string_data_is_merged_into_data_and_never_stored() {
    let s = server().await;
    let raw = Raw::new(&s);
    let mut body = secret("s");
    body["data"] = json!({"a": b64("from data"), "kept": b64("kept")});
    body["stringData"] = json!({"a": "from stringData", "plain": "text"});
    body["junk"] = json!(1);
    let (code, created) = raw.post(SECRETS, &body).await;
    assert_eq!(code, 201, "{created}");
    let want = json!({"a": b64("from stringData"), "kept": b64("kept"), "plain": b64("text")});
    for (what, o) in [("create", created.clone()), ("get", raw.get(&format!("{SECRETS}/s")).await.1)] {
        assert_eq!(o["kind"], "Secret", "{what}: {o}");
        assert_eq!(o["data"], want, "{what}: {o}");
        assert_eq!(o["type"], "Opaque", "{what}: type defaults to Opaque: {o}");
        assert!(o.get("stringData").is_none() && o.get("junk").is_none(), "{what}: {o}");
    }
    // base64 wrapped at 76 columns (as kustomize writes it) is read as Go reads []byte.
    let long = "z".repeat(100);
    let wrapped: String = b64(&long).as_bytes().chunks(76).map(|c| std::str::from_utf8(c).unwrap()).collect::<Vec<_>>().join("\n");
    let mut body = secret("wrapped");
    body["data"] = json!({"k": wrapped});
    let (code, o) = raw.post(SECRETS, &body).await;
    assert_eq!((code, &o["data"]["k"]), (201, &json!(b64(&long))), "{o}");
    // stringData through a patch lands in data too, and is not kept.
    let (code, o) = raw.patch(&format!("{SECRETS}/s"), "application/strategic-merge-patch+json", &json!({"stringData": {"kept": "changed"}})).await;
    assert_eq!(code, 200, "{o}");
    assert_eq!(o["data"]["kept"], b64("changed"));
    assert!(o.get("stringData").is_none(), "{o}");
    // Server-side apply takes stringData the same way.
    let applied = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "applied"}, "stringData": {"x": "y"}});
    let (code, o) = raw.patch(&format!("{SECRETS}/applied?fieldManager=m"), "application/apply-patch+yaml", &applied).await;
    assert_eq!(code, 201, "{o}");
    assert_eq!((&o["data"], &o["type"]), (&json!({"x": b64("y")}), &json!("Opaque")), "{o}");
    assert!(o.get("stringData").is_none(), "{o}");
    let (code, again) = raw.patch(&format!("{SECRETS}/applied?fieldManager=m"), "application/apply-patch+yaml", &applied).await;
    assert_eq!(code, 200, "{again}");
    assert_eq!(again["metadata"]["resourceVersion"], o["metadata"]["resourceVersion"], "a no-op apply is not a write");
    // A Secret that is not there: the resource exists, the object does not.
    let (code, st) = raw.get(&format!("{SECRETS}/nope")).await;
    assert_eq!(code, 404);
    assert_eq!(st["message"], "secrets \"nope\" not found");
}

#[tokio::test]
async fn bad_base64_in_data_is_400() {
    let s = server().await;
    let raw = Raw::new(&s);
    let mut body = secret("bad");
    body["data"] = json!({"k": "not base64!"});
    let (code, st) = raw.post(SECRETS, &body).await;
    assert_eq!(code, 400, "{st}");
    assert_eq!(st["reason"], "BadRequest");
    assert_eq!(st["message"], "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 3");
    let mut body = secret("bad");
    body["stringData"] = json!({"k": 1});
    let (code, st) = raw.post(SECRETS, &body).await;
    assert_eq!(code, 400, "{st}");
    assert_eq!(st["message"], "Secret in version \"v1\" cannot be handled as a Secret: json: cannot unmarshal number into Go struct field Secret.stringData of type string");
}

#[tokio::test]
async fn secret_types_require_their_keys() {
    let s = server().await;
    let raw = Raw::new(&s);
    let post = |name: &str, typ: &str, data: Value| {
        let mut body = secret(name);
        body["type"] = json!(typ);
        body["data"] = data;
        let raw = &raw;
        async move { raw.post(SECRETS, &body).await }
    };
    let (code, st) = post("d", "kubernetes.io/dockerconfigjson", json!({"other": b64("{}")})).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["reason"], "Invalid");
    assert_eq!(st["message"], "Secret \"d\" is invalid: data[.dockerconfigjson]: Required value");
    assert_eq!(st["details"]["causes"][0]["reason"], "FieldValueRequired");
    let (code, st) = post("d", "kubernetes.io/dockerconfigjson", json!({".dockerconfigjson": b64("{not json")})).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(
        st["message"],
        "Secret \"d\" is invalid: data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\": invalid character 'n' looking for beginning of object key string"
    );
    let (code, st) = post("d", "kubernetes.io/dockerconfigjson", json!({".dockerconfigjson": b64("[]")})).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(
        st["message"],
        "Secret \"d\" is invalid: data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\": json: cannot unmarshal array into Go value of type map[string]interface {}"
    );
    let (code, st) = post("d", "kubernetes.io/dockercfg", json!({})).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["message"], "Secret \"d\" is invalid: data[.dockercfg]: Required value");
    let (code, o) = post("d", "kubernetes.io/dockerconfigjson", json!({".dockerconfigjson": b64(&docker_config("r.example"))})).await;
    assert_eq!(code, 201, "{o}");
    assert_eq!(o["type"], "kubernetes.io/dockerconfigjson");
    // Keys are config keys, with the ConfigMap message; names are DNS subdomains.
    let (code, st) = post("k", "Opaque", json!({"a b": b64("x")})).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(
        st["message"],
        "Secret \"k\" is invalid: data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
    );
    let (code, st) = post("Bad_Name", "Opaque", json!({})).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["details"]["causes"][0]["field"], "metadata.name");
}

#[tokio::test]
async fn type_is_immutable_and_immutable_freezes_data() {
    let s = server().await;
    let raw = Raw::new(&s);
    let (code, o) = raw.post(SECRETS, &json!({"metadata": {"name": "s"}, "stringData": {"a": "1"}})).await;
    assert_eq!(code, 201, "{o}");
    let mut changed = o.clone();
    changed["type"] = json!("example.com/custom");
    let (code, st) = raw.put(&format!("{SECRETS}/s"), &changed).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["message"], "Secret \"s\" is invalid: type: Invalid value: \"example.com/custom\": field is immutable");
    // A dockerconfigjson Secret updated without a type gets Opaque by default: a change.
    let (code, d) = raw
        .post(SECRETS, &json!({"metadata": {"name": "d"}, "type": "kubernetes.io/dockerconfigjson", "stringData": {".dockerconfigjson": "{}"}}))
        .await;
    assert_eq!(code, 201, "{d}");
    let mut untyped = d.clone();
    untyped.as_object_mut().unwrap().remove("type");
    let (code, st) = raw.put(&format!("{SECRETS}/d"), &untyped).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["message"], "Secret \"d\" is invalid: type: Invalid value: \"Opaque\": field is immutable");
    // immutable: true freezes data (stringData included) and itself.
    let (code, o) = raw.post(SECRETS, &json!({"metadata": {"name": "imm"}, "stringData": {"a": "1"}, "immutable": true})).await;
    assert_eq!(code, 201, "{o}");
    let (code, st) = raw.patch(&format!("{SECRETS}/imm"), "application/merge-patch+json", &json!({"stringData": {"a": "2"}})).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["message"], "Secret \"imm\" is invalid: data: Forbidden: field is immutable when `immutable` is set");
    let (code, st) = raw.patch(&format!("{SECRETS}/imm"), "application/merge-patch+json", &json!({"immutable": false})).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["message"], "Secret \"imm\" is invalid: immutable: Forbidden: field is immutable when `immutable` is set");
    // Labels may still change.
    let (code, o) = raw.patch(&format!("{SECRETS}/imm"), "application/merge-patch+json", &json!({"metadata": {"labels": {"x": "y"}}})).await;
    assert_eq!(code, 200, "{o}");
}

#[tokio::test]
async fn secret_size_limit() {
    let s = server().await;
    let raw = Raw::new(&s);
    // The limit counts decoded bytes: 1 MiB exactly is fine, one byte more is not.
    let at_limit = "x".repeat(1024 * 1024);
    let (code, o) = raw.post(SECRETS, &json!({"metadata": {"name": "max"}, "data": {"k": b64(&at_limit)}})).await;
    assert_eq!(code, 201, "{}", o["message"]);
    let (code, st) = raw.post(SECRETS, &json!({"metadata": {"name": "big"}, "data": {"k": b64(&at_limit)}, "stringData": {"l": "y"}})).await;
    assert_eq!(code, 422, "{}", st["message"]);
    // kube-apiserver 1.32+'s field.TooLong text (apimachinery before 1.32 said "must have at most 1048576 bytes").
    assert_eq!(st["message"], "Secret \"big\" is invalid: data: Too long: may not be more than 1048576 bytes");
    assert_eq!(st["details"]["causes"][0]["reason"], "FieldValueTooLong");
}

#[tokio::test]
async fn secrets_list_watch_delete_and_discovery() {
    let s = server().await;
    let raw = Raw::new(&s);
    let (_, core) = raw.get("/api/v1").await;
    let r = core["resources"].as_array().unwrap().iter().find(|r| r["name"] == "secrets").cloned().expect("secrets in /api/v1");
    assert_eq!(r["kind"], "Secret");
    assert_eq!(r["namespaced"], true);
    assert_eq!(r["singularName"], "secret");
    assert_eq!(r["verbs"], json!(["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]));
    assert!(r.get("shortNames").is_none(), "{r}");
    let (code, _) = raw.post(SECRETS, &json!({"metadata": {"name": "a"}, "stringData": {"k": "v"}})).await;
    assert_eq!(code, 201);
    let (code, _) = raw
        .post(SECRETS, &json!({"metadata": {"name": "pull"}, "type": "kubernetes.io/dockerconfigjson", "stringData": {".dockerconfigjson": docker_config("r.example")}}))
        .await;
    assert_eq!(code, 201);
    let (code, list) = raw.get(SECRETS).await;
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "SecretList");
    let names: Vec<&str> = list["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a", "pull"]);
    assert!(list["items"][0].get("kind").is_none(), "typed list items carry no kind");
    let (_, typed) = raw.get(&format!("{SECRETS}?fieldSelector=type%3Dkubernetes.io%2Fdockerconfigjson")).await;
    assert_eq!(typed["items"].as_array().unwrap().len(), 1, "{typed}");
    assert_eq!(typed["items"][0]["metadata"]["name"], "pull");
    // kubectl get: NAME TYPE DATA AGE.
    let table: Value = reqwest::Client::new()
        .get(format!("{}{SECRETS}", s.url()))
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let cols: Vec<&str> = table["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(cols, ["Name", "Type", "Data", "Age"], "{table}");
    assert_eq!(table["rows"][1]["cells"].as_array().unwrap()[0..3], [json!("pull"), json!("kubernetes.io/dockerconfigjson"), json!(1)], "{table}");
    // Watch from the list's resourceVersion: a change and a delete.
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let watch = {
        let raw = Raw::new(&s);
        tokio::spawn(async move { raw.watch(&format!("{SECRETS}?watch=true&resourceVersion={rv}"), 3, Duration::from_secs(5)).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    raw.patch(&format!("{SECRETS}/a"), "application/merge-patch+json", &json!({"stringData": {"k": "w"}})).await;
    let (code, st) = raw.delete(&format!("{SECRETS}/a"), None).await;
    assert_eq!(code, 200, "{st}");
    assert_eq!((&st["kind"], &st["status"]), (&json!("Status"), &json!("Success")), "{st}");
    let (code, _) = raw.post(SECRETS, &json!({"metadata": {"name": "b"}})).await;
    assert_eq!(code, 201);
    let evs = watch.await.unwrap();
    let seen: Vec<(&str, &str)> = evs.iter().map(|e| (e["type"].as_str().unwrap(), e["object"]["metadata"]["name"].as_str().unwrap())).collect();
    assert_eq!(seen, [("MODIFIED", "a"), ("DELETED", "a"), ("ADDED", "b")]);
    assert_eq!(evs[0]["object"]["data"]["k"], b64("w"));
    assert!(evs[0]["object"].get("stringData").is_none());
    assert_eq!(raw.get(&format!("{SECRETS}/a")).await.0, 404);
    // deletecollection by field selector.
    let (code, _) = raw.delete(&format!("{SECRETS}?fieldSelector=type%3DOpaque"), None).await;
    assert_eq!(code, 200);
    let (_, left) = raw.get(SECRETS).await;
    let names: Vec<&str> = left["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["pull"]);
}
