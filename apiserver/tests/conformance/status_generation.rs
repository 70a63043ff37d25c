use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn status_subresource_isolation_and_generation() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let mut w = widget("a", 3);
    w["status"] = json!({"ready": true});
    let (_, obj) = raw.post(WIDGETS, &w).await;
    assert!(obj.get("status").is_none(), "status is dropped on create: {obj}");
    assert_eq!(obj["metadata"]["generation"], 1);

    // Main resource: status changes are ignored, metadata changes do not bump generation.
    let mut upd = obj.clone();
    upd["status"] = json!({"ready": true});
    upd["metadata"]["labels"] = json!({"x": "y"});
    let (code, o2) = raw.put(&format!("{WIDGETS}/a"), &upd).await;
    assert_eq!(code, 200, "{o2}");
    assert!(o2.get("status").is_none());
    assert_eq!(o2["metadata"]["labels"]["x"], "y");
    assert_eq!(o2["metadata"]["generation"], 1);

    // Spec change bumps generation.
    let mut upd = o2.clone();
    upd["spec"]["size"] = json!(4);
    let (_, o3) = raw.put(&format!("{WIDGETS}/a"), &upd).await;
    assert_eq!(o3["metadata"]["generation"], 2);

    // /status: only status changes; spec and metadata changes are ignored; no generation bump.
    let mut st = o3.clone();
    st["status"] = json!({"ready": true, "count": 7});
    st["spec"]["size"] = json!(9);
    st["metadata"]["labels"] = json!({"x": "changed"});
    let (code, o4) = raw.put(&format!("{WIDGETS}/a/status"), &st).await;
    assert_eq!(code, 200, "{o4}");
    assert_eq!(o4["status"], json!({"ready": true, "count": 7}));
    assert_eq!(o4["spec"]["size"], 4);
    assert_eq!(o4["metadata"]["labels"]["x"], "y");
    assert_eq!(o4["metadata"]["generation"], 2);

    // Status patch with a stale resourceVersion conflicts.
    let (code, stp) = raw
        .patch(&format!("{WIDGETS}/a/status"), "application/merge-patch+json", &json!({"metadata": {"resourceVersion": o3["metadata"]["resourceVersion"]}, "status": {"count": 8}}))
        .await;
    assert_eq!(code, 409, "{stp}");
    let (code, o5) = raw.patch(&format!("{WIDGETS}/a/status"), "application/merge-patch+json", &json!({"status": {"count": 8}})).await;
    assert_eq!(code, 200);
    assert_eq!(o5["status"]["count"], 8);
    assert_eq!(o5["metadata"]["generation"], 2);
    // GET /status returns the whole object.
    let (code, g) = raw.get(&format!("{WIDGETS}/a/status")).await;
    assert_eq!(code, 200);
    assert_eq!(g["spec"]["size"], 4);
    // Status of an object that does not exist.
    let (code, _) = raw.put(&format!("{WIDGETS}/zz/status"), &widget("zz", 1)).await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn without_status_subresource_status_is_part_of_the_object() {
    let s = server().await;
    let raw = Raw::new(&s);
    let mut crd = widget_crd();
    crd["spec"]["versions"][0].as_object_mut().unwrap().remove("subresources");
    assert_eq!(raw.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &crd).await.0, 201);
    let mut w = widget("a", 3);
    w["status"] = json!({"ready": true});
    let (_, obj) = raw.post(WIDGETS, &w).await;
    assert_eq!(obj["status"]["ready"], true);
    let mut upd = obj.clone();
    upd["status"]["ready"] = json!(false);
    let (_, o2) = raw.put(&format!("{WIDGETS}/a"), &upd).await;
    assert_eq!(o2["status"]["ready"], false);
    assert_eq!(o2["metadata"]["generation"], 2, "any non-metadata change bumps generation");
    let (code, _) = raw.get(&format!("{WIDGETS}/a/status")).await;
    assert_eq!(code, 404);
}
