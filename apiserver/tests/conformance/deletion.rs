use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;

fn owned(name: &str, owner: &Value, controller: bool) -> Value {
    let mut w = widget(name, 1);
    w["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "test.zundoko.example/v1", "kind": "Widget", "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"], "controller": controller, "blockOwnerDeletion": true
    }]);
    w
}

#[tokio::test]
async fn delete_returns_success_status() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let (_, o) = raw.post(WIDGETS, &widget("a", 1)).await;
    let (code, st) = raw.delete(&format!("{WIDGETS}/a"), None).await;
    assert_eq!(code, 200);
    assert_eq!(
        st,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
               "details": {"name": "a", "group": "test.zundoko.example", "kind": "widgets", "uid": o["metadata"]["uid"]}})
    );
    let (code, st) = raw.delete(&format!("{WIDGETS}/a"), None).await;
    assert_eq!(code, 404);
    assert_eq!(st["reason"], "NotFound");
    // Preconditions.
    let (_, o) = raw.post(WIDGETS, &widget("b", 1)).await;
    let (code, st) = raw.delete(&format!("{WIDGETS}/b"), Some(&json!({"preconditions": {"uid": "nope"}}))).await;
    assert_eq!(code, 409);
    assert_eq!(
        st["message"],
        format!("Operation cannot be fulfilled on widgets.test.zundoko.example \"b\": Precondition failed: UID in precondition: nope, UID in object meta: {}", o["metadata"]["uid"].as_str().unwrap())
    );
}

#[tokio::test]
async fn finalizers_block_deletion_until_removed() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let mut w = widget("a", 1);
    w["metadata"]["finalizers"] = json!(["test.zundoko.example/hold"]);
    raw.post(WIDGETS, &w).await;
    let (code, o) = raw.delete(&format!("{WIDGETS}/a"), None).await;
    assert_eq!(code, 200);
    assert_eq!(o["kind"], "Widget", "the object comes back while finalizers are pending");
    assert!(o["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(o["metadata"]["deletionGracePeriodSeconds"], 0);
    let (code, still) = raw.get(&format!("{WIDGETS}/a")).await;
    assert_eq!(code, 200);
    // New finalizers cannot be added while deleting.
    let mut add = still.clone();
    add["metadata"]["finalizers"] = json!(["test.zundoko.example/hold", "another"]);
    let (code, st) = raw.put(&format!("{WIDGETS}/a"), &add).await;
    assert_eq!(code, 422, "{st}");
    // Spec can still change.
    let (code, _) = raw.patch(&format!("{WIDGETS}/a"), "application/merge-patch+json", &json!({"spec": {"size": 2}})).await;
    assert_eq!(code, 200);
    let (code, last) = raw.patch(&format!("{WIDGETS}/a"), "application/merge-patch+json", &json!({"metadata": {"finalizers": null}})).await;
    assert_eq!(code, 200, "{last}");
    let (code, _) = raw.get(&format!("{WIDGETS}/a")).await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn garbage_collection_cascades_in_the_background() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let (_, parent) = raw.post(WIDGETS, &widget("parent", 1)).await;
    let (_, child) = raw.post(WIDGETS, &owned("child", &parent, true)).await;
    let (_, grandchild) = raw.post(WIDGETS, &owned("grandchild", &child, true)).await;
    let (_, other) = raw.post(WIDGETS, &widget("other", 1)).await;
    // A dependent with two owners survives while one remains; the dangling reference goes.
    let mut two = owned("two", &parent, false);
    two["metadata"]["ownerReferences"].as_array_mut().unwrap().push(json!({"apiVersion": "test.zundoko.example/v1", "kind": "Widget", "name": "other", "uid": other["metadata"]["uid"]}));
    raw.post(WIDGETS, &two).await;
    let _ = grandchild;
    let started = std::time::Instant::now();
    assert_eq!(raw.delete(&format!("{WIDGETS}/parent"), None).await.0, 200);
    let gone = eventually(zundoko_apiserver::GC_SAFETY_NET_EVERY * 2, || async {
        raw.get(&format!("{WIDGETS}/child")).await.0 == 404 && raw.get(&format!("{WIDGETS}/grandchild")).await.0 == 404
    })
    .await;
    assert!(gone, "children collected");
    // Collected because the delete asked for a pass, not by the safety net's next full pass:
    // well before it (half of it leaves a loaded machine seconds for a pass of milliseconds).
    let limit = zundoko_apiserver::GC_SAFETY_NET_EVERY / 2;
    assert!(started.elapsed() < limit, "{:?} (limit {limit:?})", started.elapsed());
    let (code, t) = raw.get(&format!("{WIDGETS}/two")).await;
    assert_eq!(code, 200);
    assert!(eventually(Duration::from_secs(1), || async {
        raw.get(&format!("{WIDGETS}/two")).await.1["metadata"]["ownerReferences"].as_array().map(|a| a.len()) == Some(1)
    })
    .await, "{t}");
    let _ = child;
}

#[tokio::test]
async fn orphan_and_foreground_propagation() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let (_, parent) = raw.post(WIDGETS, &widget("parent", 1)).await;
    raw.post(WIDGETS, &owned("child", &parent, true)).await;
    let (code, _) = raw.delete(&format!("{WIDGETS}/parent"), Some(&json!({"propagationPolicy": "Orphan"}))).await;
    assert_eq!(code, 200);
    assert!(eventually(Duration::from_secs(2), || async { raw.get(&format!("{WIDGETS}/parent")).await.0 == 404 }).await);
    let (code, child) = raw.get(&format!("{WIDGETS}/child")).await;
    assert_eq!(code, 200);
    assert!(child["metadata"].get("ownerReferences").is_none(), "{child}");

    let (_, p2) = raw.post(WIDGETS, &widget("p2", 1)).await;
    let mut c2 = owned("c2", &p2, true);
    c2["metadata"]["finalizers"] = json!(["test/hold"]);
    raw.post(WIDGETS, &c2).await;
    let (code, o) = raw.delete(&format!("{WIDGETS}/p2"), Some(&json!({"propagationPolicy": "Foreground"}))).await;
    assert_eq!(code, 200);
    assert_eq!(o["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (_, c2now) = raw.get(&format!("{WIDGETS}/c2")).await;
    assert!(c2now["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(raw.get(&format!("{WIDGETS}/p2")).await.0, 200, "owner waits for its dependents");
    raw.patch(&format!("{WIDGETS}/c2"), "application/merge-patch+json", &json!({"metadata": {"finalizers": null}})).await;
    assert!(eventually(Duration::from_secs(2), || async { raw.get(&format!("{WIDGETS}/p2")).await.0 == 404 }).await);
}

#[tokio::test]
async fn deleting_a_crd_removes_its_objects_and_resource() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    raw.post(WIDGETS, &widget("a", 1)).await;
    let (code, crd) = raw.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.test.zundoko.example", None).await;
    assert_eq!(code, 200);
    assert!(crd["metadata"]["deletionTimestamp"].is_string(), "{crd}");
    assert!(eventually(Duration::from_secs(2), || async {
        raw.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.test.zundoko.example").await.0 == 404
    })
    .await);
    let (code, st) = raw.get(WIDGETS).await;
    assert_eq!(code, 404, "{st}");
    // Re-creating it starts empty.
    raw.install_widgets().await;
    let (_, l) = raw.get(WIDGETS).await;
    assert_eq!(l["items"], json!([]));
}

#[tokio::test]
async fn namespace_deletion_removes_contents() {
    let s = server().await;
    let raw = Raw::new(&s);
    let (code, _) = raw.post("/api/v1/namespaces", &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tmp"}})).await;
    assert_eq!(code, 201);
    raw.post("/api/v1/namespaces/tmp/configmaps", &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})).await;
    let (code, ns) = raw.delete("/api/v1/namespaces/tmp", None).await;
    assert_eq!(code, 200);
    assert_eq!(ns["status"]["phase"], "Terminating");
    assert!(eventually(Duration::from_secs(2), || async { raw.get("/api/v1/namespaces/tmp").await.0 == 404 }).await);
    assert_eq!(raw.get("/api/v1/namespaces/tmp/configmaps/c").await.0, 404);
}

#[tokio::test]
async fn a_dependent_whose_owner_never_existed_is_collected_promptly() {
    // The collector only does a full pass when a change could need one; a create pointing at
    // a missing owner is such a change, and must not wait for the periodic safety pass.
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let (_, parent) = raw.post(WIDGETS, &widget("real-parent", 1)).await;
    let (_, kept) = raw.post(WIDGETS, &owned("kept-child", &parent, true)).await;
    let ghost = json!({"metadata": {"name": "ghost", "uid": "00000000-0000-0000-0000-00000000dead"}});
    let started = std::time::Instant::now();
    raw.post(WIDGETS, &owned("orphan", &ghost, true)).await;
    let gone = eventually(zundoko_apiserver::GC_SAFETY_NET_EVERY * 2, || async { raw.get(&format!("{WIDGETS}/orphan")).await.0 == 404 }).await;
    assert!(gone, "a dependent of a missing owner is collected");
    // Well before the safety net's next full pass (as above).
    let limit = zundoko_apiserver::GC_SAFETY_NET_EVERY / 2;
    assert!(started.elapsed() < limit, "{:?} (limit {limit:?})", started.elapsed());
    assert_eq!(raw.get(&format!("{WIDGETS}/kept-child")).await.0, 200, "{kept}");
}

/// Without kube-controller-manager (kube-apiserver alone, as envtest runs it) a deleted owner's
/// dependents stay and a deleted namespace stays Terminating with what is in it; a CRD's
/// instances are still cleaned up (apiextensions-apiserver's, inside kube-apiserver), which
/// shows that a pass ran after the deletes.
#[tokio::test]
async fn without_kube_controller_manager_only_a_crds_instances_are_cleaned_up() {
    let s = server_with(zundoko_apiserver::ServerConfig { controller_manager: false, ..Default::default() }).await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    raw.post(WIDGETS, &widget("a", 1)).await;
    let cm = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    let (_, owner) = raw.post("/api/v1/namespaces/default/configmaps", &cm("owner")).await;
    let mut dependent = cm("dependent");
    dependent["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}]);
    assert_eq!(raw.post("/api/v1/namespaces/default/configmaps", &dependent).await.0, 201);
    raw.post("/api/v1/namespaces", &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tmp"}})).await;
    raw.post("/api/v1/namespaces/tmp/configmaps", &cm("c")).await;
    assert_eq!(raw.delete("/api/v1/namespaces/default/configmaps/owner", None).await.0, 200);
    assert_eq!(raw.delete("/api/v1/namespaces/tmp", None).await.0, 200);
    assert_eq!(raw.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.test.zundoko.example", None).await.0, 200);
    assert!(eventually(Duration::from_secs(10), || async {
        raw.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.test.zundoko.example").await.0 == 404
    })
    .await);
    let (code, kept) = raw.get("/api/v1/namespaces/default/configmaps/dependent").await;
    assert_eq!((code, kept["metadata"]["ownerReferences"].as_array().map(Vec::len)), (200, Some(1)), "{kept}");
    let (code, ns) = raw.get("/api/v1/namespaces/tmp").await;
    assert_eq!((code, ns["status"]["phase"].as_str()), (200, Some("Terminating")), "{ns}");
    assert_eq!(raw.get("/api/v1/namespaces/tmp/configmaps/c").await.0, 200);
}
