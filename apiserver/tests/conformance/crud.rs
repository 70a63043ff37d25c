use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn create_get_list_and_system_fields() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let (code, obj) = raw.post(WIDGETS, &widget("a", 3)).await;
    assert_eq!(code, 201, "{obj}");
    assert_eq!(obj["metadata"]["generation"], 1);
    assert_eq!(obj["metadata"]["namespace"], "default");
    assert_eq!(obj["metadata"]["uid"].as_str().unwrap().len(), 36);
    let ts = obj["metadata"]["creationTimestamp"].as_str().unwrap();
    assert!(ts.ends_with('Z') && ts.len() == 20, "{ts}");
    assert!(obj["metadata"]["resourceVersion"].as_str().unwrap().parse::<u64>().is_ok());
    assert_eq!(obj["spec"]["mode"], "auto", "schema default applied");
    let (code, got) = raw.get(&format!("{WIDGETS}/a")).await;
    assert_eq!(code, 200);
    assert_eq!(got, obj);
    let (code, list) = raw.get(WIDGETS).await;
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "WidgetList");
    assert_eq!(list["apiVersion"], "test.zundoko.example/v1");
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert_eq!(list["items"][0]["kind"], "Widget", "custom resource list items keep their kind");
    // All namespaces.
    let (code, all) = raw.get("/apis/test.zundoko.example/v1/widgets").await;
    assert_eq!(code, 200);
    assert_eq!(all["items"].as_array().unwrap().len(), 1);
    // deletecollection answers with the deleted objects.
    let (code, gone) = raw.delete(WIDGETS, None).await;
    assert_eq!(code, 200);
    assert_eq!(gone["kind"], "WidgetList");
    assert_eq!(gone["items"][0]["metadata"]["name"], "a");
    assert_eq!(raw.get(&format!("{WIDGETS}/a")).await.0, 404);
}

#[tokio::test]
async fn already_exists_not_found_and_missing_namespace() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    assert_eq!(raw.post(WIDGETS, &widget("a", 3)).await.0, 201);
    let (code, st) = raw.post(WIDGETS, &widget("a", 3)).await;
    assert_eq!(code, 409);
    assert_eq!(
        st,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "widgets.test.zundoko.example \"a\" already exists", "reason": "AlreadyExists",
               "details": {"name": "a", "group": "test.zundoko.example", "kind": "widgets"}, "code": 409})
    );
    let (code, st) = raw.get(&format!("{WIDGETS}/nope")).await;
    assert_eq!(code, 404);
    assert_eq!(st["reason"], "NotFound");
    assert_eq!(st["message"], "widgets.test.zundoko.example \"nope\" not found");
    assert_eq!(st["details"], json!({"name": "nope", "group": "test.zundoko.example", "kind": "widgets"}));
    // A name is quoted as Go's %q quotes it (strconv.Quote), not as Rust's {:?}: `\x1b`, not
    // `\u{1b}`; a printable letter as it is; a zero-width space escaped.
    let (code, st) = raw.get(&format!("{WIDGETS}/%1B%C3%A9%E2%80%8B")).await;
    assert_eq!(code, 404);
    assert_eq!(st["message"], "widgets.test.zundoko.example \"\\x1b\u{e9}\\u200b\" not found");
    // A `%` without two hex digits is refused by Go's server before kube-apiserver sees it.
    for bad in ["%zz", "a%4", "%"] {
        let r = reqwest::get(format!("{}{WIDGETS}/{bad}", s.url())).await.unwrap();
        assert_eq!(r.status(), 400, "{bad}");
        assert_eq!(r.text().await.unwrap(), "400 Bad Request");
    }
    let (code, st) = raw.post("/apis/test.zundoko.example/v1/namespaces/ghost/widgets", &widget("a", 3)).await;
    assert_eq!(code, 404);
    assert_eq!(st["message"], "namespaces \"ghost\" not found");
    assert_eq!(st["details"], json!({"name": "ghost", "kind": "namespaces"}));
    // Unknown resource.
    let (code, st) = raw.get("/apis/test.zundoko.example/v1/namespaces/default/gadgets").await;
    assert_eq!(code, 404);
    assert_eq!(st["message"], "the server could not find the requested resource");
}

#[tokio::test]
async fn generate_name() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let mut w = widget("", 2);
    w["metadata"] = json!({"generateName": "gen-"});
    let (code, obj) = raw.post(WIDGETS, &w).await;
    assert_eq!(code, 201, "{obj}");
    let name = obj["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
    assert_eq!(obj["metadata"]["generateName"], "gen-");
    let mut w = widget("", 2);
    w["metadata"] = json!({});
    let (code, st) = raw.post(WIDGETS, &w).await;
    assert_eq!(code, 422);
    assert_eq!(st["message"], "Widget.test.zundoko.example \"\" is invalid: metadata.name: Required value: name or generateName is required");
}

#[tokio::test]
async fn update_conflicts_and_unconditional_updates() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let (_, obj) = raw.post(WIDGETS, &widget("a", 3)).await;
    let mut v1 = obj.clone();
    v1["spec"]["size"] = json!(4);
    let (code, updated) = raw.put(&format!("{WIDGETS}/a"), &v1).await;
    assert_eq!(code, 200, "{updated}");
    assert_ne!(updated["metadata"]["resourceVersion"], obj["metadata"]["resourceVersion"]);
    // Stale resourceVersion.
    let mut stale = obj.clone();
    stale["spec"]["size"] = json!(5);
    let (code, st) = raw.put(&format!("{WIDGETS}/a"), &stale).await;
    assert_eq!(code, 409);
    assert_eq!(st["reason"], "Conflict");
    assert_eq!(
        st["message"],
        "Operation cannot be fulfilled on widgets.test.zundoko.example \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert_eq!(st["details"], json!({"name": "a", "group": "test.zundoko.example", "kind": "widgets"}));
    // Custom resources do not allow unconditional updates.
    let mut norv = updated.clone();
    norv["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    let (code, st) = raw.put(&format!("{WIDGETS}/a"), &norv).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(
        st["message"],
        "widgets.test.zundoko.example \"a\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
    );
    assert_eq!(st["details"]["kind"], "widgets");
    // ConfigMaps do.
    let cms = "/api/v1/namespaces/default/configmaps";
    let (code, _) = raw.post(cms, &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}})).await;
    assert_eq!(code, 201);
    let (code, cm) = raw.put(&format!("{cms}/c"), &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "2"}})).await;
    assert_eq!(code, 200, "{cm}");
    assert_eq!(cm["data"]["a"], "2");
    // Name mismatch.
    let (code, st) = raw.put(&format!("{cms}/other"), &cm).await;
    assert_eq!(code, 400);
    assert_eq!(st["message"], "the name of the object (c) does not match the name on the URL (other)");
    // A no-op update does not bump the resourceVersion.
    let (code, same) = raw.put(&format!("{cms}/c"), &cm).await;
    assert_eq!(code, 200);
    assert_eq!(same["metadata"]["resourceVersion"], cm["metadata"]["resourceVersion"]);
}

#[tokio::test]
async fn malformed_bodies_are_bad_requests() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let (code, st) = raw.post_bytes(WIDGETS, "{not json").await;
    assert_eq!(code, 400, "{st}");
    assert_eq!(st["reason"], "BadRequest");
    assert_eq!(st["kind"], "Status");
    let (code, st) = raw.post(WIDGETS, &json!({"apiVersion": "test.zundoko.example/v1", "metadata": {"name": "x"}})).await;
    assert_eq!(code, 400);
    assert!(st["message"].as_str().unwrap().starts_with("Object 'Kind' is missing in"), "{st}");
    let (code, st) = raw.post(WIDGETS, &json!({"apiVersion": "test.zundoko.example/v2", "kind": "Widget", "metadata": {"name": "x"}, "spec": {"size": 1}})).await;
    assert_eq!(code, 400);
    assert_eq!(st["message"], "the API version in the data (test.zundoko.example/v2) does not match the expected API version (test.zundoko.example/v1)");
}

#[tokio::test]
async fn list_pagination_and_selectors() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    for i in 0..5 {
        let mut w = widget(&format!("w{i}"), 1);
        w["metadata"]["labels"] = json!({"parity": if i % 2 == 0 { "even" } else { "odd" }, "idx": i.to_string()});
        assert_eq!(raw.post(WIDGETS, &w).await.0, 201);
    }
    let (_, page1) = raw.get(&format!("{WIDGETS}?limit=2")).await;
    assert_eq!(page1["items"].as_array().unwrap().len(), 2);
    assert_eq!(page1["metadata"]["remainingItemCount"], 3);
    let cont = page1["metadata"]["continue"].as_str().unwrap();
    let (_, page2) = raw.get(&format!("{WIDGETS}?limit=2&continue={cont}")).await;
    assert_eq!(page2["items"][0]["metadata"]["name"], "w2");
    assert_eq!(page2["metadata"]["resourceVersion"], page1["metadata"]["resourceVersion"]);
    for (sel, n) in [("parity%3Deven", 3), ("parity!%3Deven", 2), ("idx%20in%20(1,2)", 2), ("idx", 5), ("!idx", 0)] {
        let (code, l) = raw.get(&format!("{WIDGETS}?labelSelector={sel}")).await;
        assert_eq!(code, 200, "{sel}: {l}");
        assert_eq!(l["items"].as_array().unwrap().len(), n, "{sel}");
    }
    let (_, l) = raw.get(&format!("{WIDGETS}?fieldSelector=metadata.name%3Dw3")).await;
    assert_eq!(l["items"].as_array().unwrap().len(), 1);
    let (code, st) = raw.get(&format!("{WIDGETS}?fieldSelector=spec.size%3D1")).await;
    assert_eq!(code, 400);
    assert_eq!(st["message"], "field label not supported: spec.size");
}
