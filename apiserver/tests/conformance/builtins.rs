use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn leases_with_optimistic_concurrency() {
    let s = server().await;
    let raw = Raw::new(&s);
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    let (code, l) = raw
        .post(leases, &json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "lock"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}))
        .await;
    assert_eq!(code, 201, "{l}");
    assert!(l["metadata"].get("generation").is_none());
    let mut take = l.clone();
    take["spec"]["holderIdentity"] = json!("b");
    assert_eq!(raw.put(&format!("{leases}/lock"), &take).await.0, 200);
    let mut stale = l.clone();
    stale["spec"]["holderIdentity"] = json!("c");
    let (code, st) = raw.put(&format!("{leases}/lock"), &stale).await;
    assert_eq!(code, 409);
    assert_eq!(st["message"], "Operation cannot be fulfilled on leases.coordination.k8s.io \"lock\": the object has been modified; please apply your changes to the latest version and try again");
    let (_, list) = raw.get(leases).await;
    assert_eq!(list["kind"], "LeaseList");
    assert!(list["items"][0].get("kind").is_none(), "typed list items carry no kind");
}

#[tokio::test]
async fn events_are_served_by_both_apis() {
    let s = server().await;
    let raw = Raw::new(&s);
    let (code, e) = raw
        .post(
            "/apis/events.k8s.io/v1/namespaces/default/events",
            &json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
                    "eventTime": "2025-01-01T00:00:00.000000Z", "reportingController": "ctl", "reportingInstance": "ctl-1",
                    "action": "Say", "reason": "Said", "note": "Zun", "type": "Normal",
                    "regarding": {"kind": "Hikawa", "name": "h", "namespace": "default"}}),
        )
        .await;
    assert_eq!(code, 201, "{e}");
    assert_eq!(e["note"], "Zun");
    let (code, core) = raw.get("/api/v1/namespaces/default/events/e1").await;
    assert_eq!(code, 200);
    assert_eq!(core["apiVersion"], "v1");
    assert_eq!(core["message"], "Zun");
    assert_eq!(core["involvedObject"]["name"], "h");
    assert_eq!(core["reportingComponent"], "ctl");
    // Go's encoder writes structs, zero times and non-omitempty strings always.
    for (field, zero) in [("deprecatedSource", json!({})), ("deprecatedFirstTimestamp", json!(null)), ("deprecatedLastTimestamp", json!(null))] {
        assert_eq!(e.get(field), Some(&zero), "events.k8s.io/v1 {field}: {e}");
    }
    assert!(e.get("deprecatedCount").is_none() && e.get("series").is_none() && e.get("related").is_none(), "omitempty: {e}");
    for (field, zero) in [("source", json!({})), ("firstTimestamp", json!(null)), ("lastTimestamp", json!(null))] {
        assert_eq!(core.get(field), Some(&zero), "core/v1 {field}: {core}");
    }
    assert!(core.get("count").is_none() && core.get("series").is_none(), "omitempty: {core}");
    let (_, l) = raw.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dh").await;
    assert_eq!(l["items"].as_array().unwrap().len(), 1);
    assert_eq!(l["items"][0]["source"], json!({}), "lists too");
    // A legacy Event without the newer fields: eventTime null, the reporting fields "" (not omitempty in core/v1)...
    let (code, legacy) = raw
        .post(
            "/api/v1/namespaces/default/events",
            &json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e2"}, "reason": "Said", "message": "Doko", "type": "Normal",
                    "involvedObject": {"kind": "Hikawa", "name": "h", "namespace": "default"}, "source": {"component": "c"},
                    "firstTimestamp": "2025-01-01T00:00:00Z", "lastTimestamp": "2025-01-01T00:00:00Z", "count": 1}),
        )
        .await;
    assert_eq!(code, 201, "{legacy}");
    assert_eq!((&legacy["eventTime"], &legacy["reportingComponent"], &legacy["reportingInstance"]), (&json!(null), &json!(""), &json!("")), "{legacy}");
    // ...and as events.k8s.io/v1 the empty reporting fields are left out (omitempty there).
    let (_, v1) = raw.get("/apis/events.k8s.io/v1/namespaces/default/events/e2").await;
    assert!(v1.get("reportingController").is_none() && v1.get("reportingInstance").is_none(), "{v1}");
    assert_eq!((&v1["eventTime"], &v1["deprecatedCount"], &v1["deprecatedSource"]["component"]), (&json!(null), &json!(1), &json!("c")), "{v1}");
    let (_, l) = raw.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dother").await;
    assert_eq!(l["items"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn configmaps_and_namespaces() {
    let s = server().await;
    let raw = Raw::new(&s);
    let (_, nss) = raw.get("/api/v1/namespaces").await;
    let names: Vec<&str> = nss["items"].as_array().unwrap().iter().map(|n| n["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["default", "kube-node-lease", "kube-public", "kube-system"]);
    assert_eq!(nss["items"][0]["status"]["phase"], "Active");
    let cms = "/api/v1/namespaces/default/configmaps";
    let (code, cm) = raw.post(cms, &json!({"metadata": {"name": "c"}, "data": {"a": "1"}, "binaryData": {"b": "AAEC"}, "junk": 1})).await;
    assert_eq!(code, 201, "{cm}");
    assert_eq!(cm["kind"], "ConfigMap");
    assert!(cm.get("junk").is_none());
    let (code, st) = raw.post(cms, &json!({"metadata": {"name": "bad"}, "data": {"a b": "1"}})).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["details"]["causes"][0]["field"], "data[a b]");
    let (code, _) = raw.post(cms, &json!({"metadata": {"name": "imm"}, "data": {"a": "1"}, "immutable": true})).await;
    assert_eq!(code, 201);
    let (code, st) = raw.patch(&format!("{cms}/imm"), "application/merge-patch+json", &json!({"data": {"a": "2"}})).await;
    assert_eq!(code, 422, "{st}");
    let (code, st) = raw.post("/api/v1/namespaces", &json!({"metadata": {"name": "Bad_Name"}})).await;
    assert_eq!(code, 422, "{st}");
}

#[tokio::test]
async fn configmap_binary_data_is_decoded_as_go_decodes_bytes() {
    let s = server().await;
    let raw = Raw::new(&s);
    let cms = "/api/v1/namespaces/default/configmaps";
    // `kubectl kustomize` wraps base64 at 76 columns; kube-apiserver decodes it into []byte
    // (newlines ignored) and serves it back unwrapped.
    let bytes: Vec<u8> = (0..=255u8).cycle().take(200).collect();
    let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &bytes);
    let wrapped: String = encoded.as_bytes().chunks(76).map(|c| std::str::from_utf8(c).unwrap()).collect::<Vec<_>>().join("\n");
    let (code, cm) = raw.post(cms, &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bin"}, "binaryData": {"m": wrapped}})).await;
    assert_eq!(code, 201, "{cm}");
    assert_eq!(cm["binaryData"]["m"], encoded);
    let (_, got) = raw.get(&format!("{cms}/bin")).await;
    assert_eq!(got["binaryData"]["m"], encoded);
    let (code, st) = raw.post(cms, &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad"}, "binaryData": {"m": "not base64!"}})).await;
    assert_eq!(code, 400, "{st}");
    assert!(st["message"].as_str().unwrap().starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap: illegal base64 data"), "{st}");
}

