//! `metadata.managedFields` as kube-apiserver v1.32 writes them for the operator's requests:
//! a create (operation Update, manager from the User-Agent, `.: {}` on every node the write
//! created, owner references as atomic items), a JSON merge patch of `/status` (`subresource:
//! status`), a server-side apply (no `.` markers) and an events.k8s.io Event create. The
//! objects' JSON sizes are printed for the memory comparison with a real server.

use serde_json::{Value, json};

use crate::common::*;

const UA: &str = "zundoko-operator/0.1.0";
const ZUNDOKOS: &str = "/apis/zundokokiyoshi.kaitoy.github.com/v1beta1/namespaces/default/zundokos";
const EVENTS_V1: &str = "/apis/events.k8s.io/v1/namespaces/default/events";

struct Client {
    base: String,
    http: reqwest::Client,
}

impl Client {
    fn new(s: &zundoko_apiserver::ApiServer, user_agent: &str) -> Self {
        Client { base: s.url(), http: reqwest::Client::builder().user_agent(user_agent).build().unwrap() }
    }
    async fn send(&self, method: reqwest::Method, path: &str, ct: &str, body: &Value) -> (u16, Value) {
        let r = self.http.request(method, format!("{}{path}", self.base)).header("Content-Type", ct).body(body.to_string()).send().await.unwrap();
        let code = r.status().as_u16();
        (code, r.json().await.unwrap())
    }
}

/// The operator's CRDs as deployed.
fn deployed_crds() -> Vec<Value> {
    let text = include_str!("../../../deploy/crds/zundokokiyoshi.yaml");
    text.split("\n---").filter(|d| d.contains("kind: CustomResourceDefinition")).map(|d| serde_yaml::from_str(d).unwrap()).collect()
}

/// managedFields with the times checked (RFC 3339, seconds, UTC) and removed.
fn entries(obj: &Value) -> Vec<Value> {
    obj["metadata"]["managedFields"]
        .as_array()
        .unwrap_or_else(|| panic!("no managedFields: {obj}"))
        .iter()
        .map(|e| {
            let t = e["time"].as_str().unwrap();
            assert!(t.len() == 20 && t.ends_with('Z') && t.as_bytes()[10] == b'T', "time {t}");
            let mut e = e.clone();
            e.as_object_mut().unwrap().remove("time");
            e
        })
        .collect()
}

async fn setup(s: &zundoko_apiserver::ApiServer) -> (Client, String) {
    let admin = Client::new(s, "kubectl/v1.32.0 (linux/amd64) kubernetes/70d3cc9");
    for crd in deployed_crds() {
        let (code, o) = admin.send(reqwest::Method::POST, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", &crd).await;
        assert_eq!(code, 201, "{o}");
    }
    let hikawa = json!({"apiVersion": "zundokokiyoshi.kaitoy.github.com/v1beta1", "kind": "Hikawa", "metadata": {"name": "h"}, "spec": {"intervalMillis": 100}});
    let (code, h) = admin.send(reqwest::Method::POST, HIKAWAS, "application/json", &hikawa).await;
    assert_eq!(code, 201, "{h}");
    (admin, h["metadata"]["uid"].as_str().unwrap().to_string())
}

#[tokio::test]
async fn create_of_a_child_as_the_operator_sends_it() {
    let s = server().await;
    let (_, uid) = setup(&s).await;
    let op = Client::new(&s, UA);
    let zundoko = json!({
        "apiVersion": "zundokokiyoshi.kaitoy.github.com/v1beta1", "kind": "Zundoko",
        "metadata": {
            "name": "h-zundoko-0001", "namespace": "default",
            "labels": {"zundokokiyoshi.kaitoy.github.com/hikawa": "h"},
            "annotations": {"zundokokiyoshi.kaitoy.github.com/said-at": "2026-11-22T22:00:00.123Z"},
            "ownerReferences": [{"apiVersion": "zundokokiyoshi.kaitoy.github.com/v1beta1", "kind": "Hikawa", "name": "h", "uid": uid, "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {"say": "Zun"}
    });
    let (code, z) = op.send(reqwest::Method::POST, ZUNDOKOS, "application/json", &zundoko).await;
    assert_eq!(code, 201, "{z}");
    let owner_key = format!("k:{{\"uid\":\"{uid}\"}}");
    assert_eq!(
        entries(&z),
        vec![json!({
            "manager": "zundoko-operator", "operation": "Update", "apiVersion": "zundokokiyoshi.kaitoy.github.com/v1beta1", "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:annotations": {".": {}, "f:zundokokiyoshi.kaitoy.github.com/said-at": {}},
                    "f:labels": {".": {}, "f:zundokokiyoshi.kaitoy.github.com/hikawa": {}},
                    "f:ownerReferences": {".": {}, owner_key: {}}
                },
                "f:spec": {".": {}, "f:say": {}}
            }
        })]
    );
    eprintln!("Zundoko as created by the operator: {} bytes: {z}", serde_json::to_vec(&z).unwrap().len());
}

#[tokio::test]
async fn status_merge_patch_apply_and_event() {
    let s = server().await;
    let (admin, _) = setup(&s).await;
    let op = Client::new(&s, UA);
    let status = json!({"status": {"numZundokosSaid": 1, "kiyoshied": false, "phase": "Singing", "observedGeneration": 1,
        "lastWordTime": "2026-11-22T22:00:00.123Z",
        "conditions": [{"type": "Ready", "status": "True", "reason": "Decided", "message": "the rules decided", "lastTransitionTime": "2026-11-22T22:00:00Z", "observedGeneration": 1}]}});
    let (code, h) = op.send(reqwest::Method::PATCH, &format!("{HIKAWAS}/h/status"), "application/merge-patch+json", &status).await;
    assert_eq!(code, 200, "{h}");
    let av = "zundokokiyoshi.kaitoy.github.com/v1beta1";
    assert_eq!(
        entries(&h),
        vec![
            json!({"manager": "kubectl", "operation": "Update", "apiVersion": av, "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {".": {}, "f:intervalMillis": {}}}}),
            json!({"manager": "zundoko-operator", "operation": "Update", "apiVersion": av, "fieldsType": "FieldsV1", "subresource": "status",
                "fieldsV1": {"f:status": {
                    ".": {}, "f:kiyoshied": {}, "f:lastWordTime": {}, "f:numZundokosSaid": {}, "f:observedGeneration": {}, "f:phase": {},
                    "f:conditions": {".": {}, "k:{\"type\":\"Ready\"}": {".": {}, "f:lastTransitionTime": {}, "f:message": {}, "f:observedGeneration": {}, "f:reason": {}, "f:status": {}, "f:type": {}}}
                }}}),
        ]
    );
    eprintln!("Hikawa after a create and a status merge patch with a condition: {} bytes: {h}", serde_json::to_vec(&h).unwrap().len());

    // Server-side apply: the applied fields, no `.` markers.
    let applied = json!({"apiVersion": av, "kind": "Hikawa", "metadata": {"name": "h", "labels": {"team": "a"}}, "spec": {"intervalMillis": 100, "params": {"k": "v"}}});
    let (code, h) = admin.send(reqwest::Method::PATCH, &format!("{HIKAWAS}/h?fieldManager=deployer"), "application/apply-patch+yaml", &applied).await;
    assert_eq!(code, 200, "{h}");
    let e = entries(&h);
    assert_eq!(
        e.iter().find(|e| e["manager"] == "deployer").unwrap(),
        &json!({"manager": "deployer", "operation": "Apply", "apiVersion": av, "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}}}, "f:spec": {"f:intervalMillis": {}, "f:params": {"f:k": {}}}}})
    );

    // An events.k8s.io Event as the kube-rs Recorder creates it.
    let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "h.1", "namespace": "default"},
        "eventTime": "2026-11-22T22:00:00.123456Z", "action": "Say", "reason": "Said", "note": "Zun", "type": "Normal",
        "reportingController": "zundoko-operator", "reportingInstance": "zundoko-operator-0",
        "regarding": {"apiVersion": av, "kind": "Hikawa", "name": "h", "namespace": "default", "uid": h["metadata"]["uid"]}});
    let (code, ev) = op.send(reqwest::Method::POST, EVENTS_V1, "application/json", &event).await;
    assert_eq!(code, 201, "{ev}");
    assert_eq!(
        entries(&ev),
        vec![json!({"manager": "zundoko-operator", "operation": "Update", "apiVersion": "events.k8s.io/v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:action": {}, "f:eventTime": {}, "f:note": {}, "f:reason": {},
                "f:regarding": {"f:apiVersion": {}, "f:kind": {}, "f:name": {}, "f:namespace": {}, "f:uid": {}},
                "f:reportingController": {}, "f:reportingInstance": {}, "f:type": {}}})]
    );
    eprintln!("events.k8s.io Event as created by the operator: {} bytes: {ev}", serde_json::to_vec(&ev).unwrap().len());
}
