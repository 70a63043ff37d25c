use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn discovery_documents() {
    let s = server().await;
    let raw = Raw::new(&s);
    let (code, api) = raw.get("/api").await;
    assert_eq!(code, 200);
    assert_eq!(api["kind"], "APIVersions");
    assert_eq!(api["versions"], json!(["v1"]));
    let (_, core) = raw.get("/api/v1").await;
    assert_eq!(core["kind"], "APIResourceList");
    assert_eq!(core["groupVersion"], "v1");
    let names: Vec<&str> = core["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    for n in ["configmaps", "events", "namespaces", "namespaces/status"] {
        assert!(names.contains(&n), "{names:?}");
    }
    raw.install_widgets().await;
    let (_, groups) = raw.get("/apis").await;
    assert_eq!(groups["kind"], "APIGroupList");
    let g: Vec<&str> = groups["groups"].as_array().unwrap().iter().map(|g| g["name"].as_str().unwrap()).collect();
    for n in ["apiextensions.k8s.io", "coordination.k8s.io", "events.k8s.io", "test.zundoko.example"] {
        assert!(g.contains(&n), "{g:?}");
    }
    let (_, group) = raw.get("/apis/test.zundoko.example").await;
    assert_eq!(group["kind"], "APIGroup");
    assert_eq!(group["preferredVersion"], json!({"groupVersion": "test.zundoko.example/v1", "version": "v1"}));
    let (code, rl) = raw.get("/apis/test.zundoko.example/v1").await;
    assert_eq!(code, 200);
    assert_eq!(
        rl["resources"][0],
        json!({"name": "widgets", "singularName": "widget", "namespaced": true, "kind": "Widget",
               "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"], "shortNames": ["wd"]})
    );
    assert_eq!(rl["resources"][1]["name"], "widgets/status");
    let (code, v) = raw.get("/version").await;
    assert_eq!(code, 200);
    assert_eq!(v["major"], "1");
    assert_eq!(raw.get("/apis/nope.example").await.0, 404);
    assert_eq!(raw.get("/apis/nope.example/v1").await.0, 404);
}

#[tokio::test]
async fn crd_status_and_registration() {
    let s = server().await;
    let raw = Raw::new(&s);
    assert_eq!(raw.get(WIDGETS).await.0, 404);
    raw.install_widgets().await;
    let (_, crd) = raw.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.test.zundoko.example").await;
    let conds = crd["status"]["conditions"].as_array().unwrap();
    for t in ["Established", "NamesAccepted"] {
        assert!(conds.iter().any(|c| c["type"] == t && c["status"] == "True"), "{crd}");
    }
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    assert_eq!(crd["status"]["acceptedNames"]["kind"], "Widget");
    assert_eq!(raw.get(WIDGETS).await.0, 200);
    // A CRD whose name does not match its names is invalid.
    let mut bad = widget_crd();
    bad["metadata"]["name"] = json!("wrong.test.zundoko.example");
    let (code, st) = raw.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &bad).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["details"]["causes"][0]["field"], "metadata.name");
}
