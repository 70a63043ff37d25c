use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn merge_and_json_patch() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let mut w = widget("a", 3);
    w["spec"]["tags"] = json!(["x", "y"]);
    w["spec"]["color"] = json!("red");
    raw.post(WIDGETS, &w).await;
    let path = format!("{WIDGETS}/a");
    let (code, o) = raw.patch(&path, "application/merge-patch+json", &json!({"spec": {"size": 5, "color": null}})).await;
    assert_eq!(code, 200, "{o}");
    assert_eq!(o["spec"]["size"], 5);
    assert!(o["spec"].get("color").is_none());
    assert_eq!(o["spec"]["tags"], json!(["x", "y"]));
    assert_eq!(o["metadata"]["generation"], 2);
    let (code, o) = raw
        .patch(&path, "application/json-patch+json", &json!([{"op": "add", "path": "/spec/tags/-", "value": "z"}, {"op": "replace", "path": "/spec/size", "value": 6}]))
        .await;
    assert_eq!(code, 200, "{o}");
    assert_eq!(o["spec"]["tags"], json!(["x", "y", "z"]));
    assert_eq!(o["spec"]["size"], 6);
    // A failing test operation.
    let (code, st) = raw.patch(&path, "application/json-patch+json", &json!([{"op": "test", "path": "/spec/size", "value": 1}])).await;
    assert_eq!(code, 422, "{st}");
    // A patch that violates the schema.
    let (code, st) = raw.patch(&path, "application/merge-patch+json", &json!({"spec": {"size": 100}})).await;
    assert_eq!(code, 422);
    assert_eq!(st["reason"], "Invalid");
    // Strategic merge patch is not supported for custom resources.
    let (code, st) = raw.patch(&path, "application/strategic-merge-patch+json", &json!({"spec": {"size": 2}})).await;
    assert_eq!(code, 415, "{st}");
    // ... but is for built-ins.
    let cms = "/api/v1/namespaces/default/configmaps";
    raw.post(cms, &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}})).await;
    let (code, cm) = raw.patch(&format!("{cms}/c"), "application/strategic-merge-patch+json", &json!({"data": {"b": "2"}})).await;
    assert_eq!(code, 200);
    assert_eq!(cm["data"], json!({"a": "1", "b": "2"}));
    // Patch of a missing object.
    let (code, _) = raw.patch(&format!("{WIDGETS}/nope"), "application/merge-patch+json", &json!({})).await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn server_side_apply_create_update_and_conflicts() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let path = format!("{WIDGETS}/a?fieldManager=alice");
    let mut cfg = widget("a", 3);
    cfg["spec"]["color"] = json!("red");
    let (code, o) = raw.patch(&path, "application/apply-patch+yaml", &cfg).await;
    assert_eq!(code, 201, "{o}");
    let mf = &o["metadata"]["managedFields"][0];
    assert_eq!(mf["manager"], "alice");
    assert_eq!(mf["operation"], "Apply");
    assert_eq!(mf["fieldsV1"]["f:spec"]["f:color"], json!({}));
    // Re-apply without color: alice no longer owns it, so it is removed.
    let (code, o) = raw.patch(&path, "application/apply-patch+yaml", &widget("a", 4)).await;
    assert_eq!(code, 200, "{o}");
    assert_eq!(o["spec"]["size"], 4);
    assert!(o["spec"].get("color").is_none(), "{o}");
    // Bob applies the same field with another value: conflict unless forced.
    let (code, st) = raw.patch(&format!("{WIDGETS}/a?fieldManager=bob"), "application/apply-patch+yaml", &widget("a", 5)).await;
    assert_eq!(code, 409, "{st}");
    assert_eq!(st["reason"], "Conflict");
    assert_eq!(st["message"], "Apply failed with 1 conflict: conflict with \"alice\": .spec.size");
    let (code, o) = raw.patch(&format!("{WIDGETS}/a?fieldManager=bob&force=true"), "application/apply-patch+yaml", &widget("a", 5)).await;
    assert_eq!(code, 200, "{o}");
    assert_eq!(o["spec"]["size"], 5);
    // Applying the same configuration again is not a write.
    let (code, again) = raw.patch(&format!("{WIDGETS}/a?fieldManager=bob&force=true"), "application/apply-patch+yaml", &widget("a", 5)).await;
    assert_eq!(code, 200);
    assert_eq!(again["metadata"]["resourceVersion"], o["metadata"]["resourceVersion"]);
    assert_eq!(again["metadata"]["managedFields"], o["metadata"]["managedFields"]);
    // Apply without a field manager.
    let (code, st) = raw.patch(&format!("{WIDGETS}/a"), "application/apply-patch+yaml", &widget("a", 5)).await;
    assert_eq!(code, 400, "{st}");
    // dryRun does not persist.
    let (code, o) = raw.patch(&format!("{WIDGETS}/a?fieldManager=bob&force=true&dryRun=All"), "application/apply-patch+yaml", &widget("a", 6)).await;
    assert_eq!(code, 200);
    assert_eq!(o["spec"]["size"], 6);
    let (_, g) = raw.get(&format!("{WIDGETS}/a")).await;
    assert_eq!(g["spec"]["size"], 5);
    // Apply to /status.
    let st_cfg = json!({"apiVersion": "test.zundoko.example/v1", "kind": "Widget", "metadata": {"name": "a"}, "status": {"ready": true}, "spec": {"size": 9}});
    let (code, o) = raw.patch(&format!("{WIDGETS}/a/status?fieldManager=ctl&force=true"), "application/apply-patch+yaml", &st_cfg).await;
    assert_eq!(code, 200, "{o}");
    assert_eq!(o["status"]["ready"], true);
    assert_eq!(o["spec"]["size"], 5);
}

#[tokio::test]
async fn managed_fields_track_updates_too() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let mut cfg = widget("a", 3);
    cfg["spec"]["label"] = json!("x");
    let (code, _) = raw.patch(&format!("{WIDGETS}/a?fieldManager=alice"), "application/apply-patch+yaml", &cfg).await;
    assert_eq!(code, 201);
    // bob changes spec.label with a merge patch: he now owns it.
    let (code, o) = raw.patch(&format!("{WIDGETS}/a?fieldManager=bob"), "application/merge-patch+json", &json!({"spec": {"label": "y"}})).await;
    assert_eq!(code, 200);
    let mf = o["metadata"]["managedFields"].as_array().unwrap();
    let bob = mf.iter().find(|e| e["manager"] == "bob").unwrap();
    assert_eq!(bob["operation"], "Update");
    assert_eq!(bob["fieldsV1"], json!({"f:spec": {"f:label": {}}}));
    let alice = mf.iter().find(|e| e["manager"] == "alice").unwrap();
    assert!(alice["fieldsV1"]["f:spec"].get("f:label").is_none(), "{alice}");
    // alice applying another value for bob's field conflicts, naming bob's update.
    let (code, st) = raw.patch(&format!("{WIDGETS}/a?fieldManager=alice"), "application/apply-patch+yaml", &cfg).await;
    assert_eq!(code, 409);
    assert_eq!(st["message"], "Apply failed with 1 conflict: conflict with \"bob\" using test.zundoko.example/v1: .spec.label");
    assert_eq!(st["details"]["causes"][0], json!({"reason": "FieldManagerConflict", "message": "conflict with \"bob\" using test.zundoko.example/v1", "field": ".spec.label"}));
    // Dropping it from alice's configuration keeps bob's value.
    let (code, o) = raw.patch(&format!("{WIDGETS}/a?fieldManager=alice"), "application/apply-patch+yaml", &widget("a", 3)).await;
    assert_eq!(code, 200, "{o}");
    assert_eq!(o["spec"]["label"], "y");
    // Without a fieldManager the manager comes from the User-Agent.
    let (code, o) = raw.post(WIDGETS, &widget("b", 1)).await;
    assert_eq!(code, 201);
    let e = &o["metadata"]["managedFields"][0];
    assert_eq!(e["operation"], "Update");
    assert!(e["manager"].is_string());
    assert_eq!(e["fieldsV1"]["f:spec"]["f:size"], json!({}));
}
