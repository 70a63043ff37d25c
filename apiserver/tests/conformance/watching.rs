use std::time::{Duration, Instant};

use serde_json::json;
use zundoko_apiserver::ServerConfig;

use crate::common::*;

const T: Duration = Duration::from_secs(3);

#[tokio::test]
async fn watch_resumes_from_a_resource_version() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let (_, a) = raw.post(WIDGETS, &widget("a", 1)).await;
    let rv1 = a["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    raw.patch(&format!("{WIDGETS}/a"), "application/merge-patch+json", &json!({"spec": {"size": 2}})).await;
    raw.post(WIDGETS, &widget("b", 1)).await;
    raw.delete(&format!("{WIDGETS}/a"), None).await;
    let evs = raw.watch(&format!("{WIDGETS}?watch=true&resourceVersion={rv1}"), 3, T).await;
    let types: Vec<(&str, &str)> = evs.iter().map(|e| (e["type"].as_str().unwrap(), e["object"]["metadata"]["name"].as_str().unwrap())).collect();
    assert_eq!(types, vec![("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")]);
    assert_eq!(evs[0]["object"]["spec"]["size"], 2);
    assert_eq!(evs[0]["object"]["kind"], "Widget");
    // Resource versions increase along the stream.
    let rvs: Vec<u64> = evs.iter().map(|e| e["object"]["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()).collect();
    assert!(rvs.windows(2).all(|w| w[0] < w[1]), "{rvs:?}");
    // The deprecated /watch/ path prefix works too.
    let evs = raw.watch(&format!("/apis/test.zundoko.example/v1/watch/namespaces/default/widgets?resourceVersion={rv1}"), 1, T).await;
    assert_eq!(evs[0]["type"], "MODIFIED");
}

#[tokio::test]
async fn too_old_resource_version_is_410_expired() {
    let s = server_with(ServerConfig { history_size: 3, ..Default::default() }).await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let (_, first) = raw.post(WIDGETS, &widget("w0", 1)).await;
    let rv = first["metadata"]["resourceVersion"].as_str().unwrap().parse::<u64>().unwrap();
    for i in 1..6 {
        raw.post(WIDGETS, &widget(&format!("w{i}"), 1)).await;
    }
    let evs = raw.watch(&format!("{WIDGETS}?watch=true&resourceVersion={rv}"), 2, T).await;
    assert_eq!(evs.len(), 1, "the stream ends after the error: {evs:?}");
    assert_eq!(evs[0]["type"], "ERROR");
    let st = &evs[0]["object"];
    assert_eq!(st["kind"], "Status");
    assert_eq!(st["apiVersion"], "v1");
    assert_eq!(st["status"], "Failure");
    assert_eq!(st["code"], 410);
    assert_eq!(st["reason"], "Expired");
    let msg = st["message"].as_str().unwrap();
    assert!(msg.starts_with(&format!("too old resource version: {rv} (")), "{msg}");
    // A list with an expired continue token is a 410 too.
    let (_, page) = raw.get(&format!("{WIDGETS}?limit=1")).await;
    let cont = page["metadata"]["continue"].as_str().unwrap().to_string();
    for i in 6..10 {
        raw.post(WIDGETS, &widget(&format!("w{i}"), 1)).await;
    }
    let (code, st) = raw.get(&format!("{WIDGETS}?limit=1&continue={cont}")).await;
    assert_eq!(code, 410, "{st}");
    assert_eq!(st["reason"], "Expired");
}

#[tokio::test]
async fn bookmarks_and_initial_events() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    raw.post(WIDGETS, &widget("a", 1)).await;
    let (_, b) = raw.post(WIDGETS, &widget("b", 1)).await;
    let rv = b["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let evs = raw.watch(&format!("{WIDGETS}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true"), 1, T).await;
    assert_eq!(evs[0]["type"], "BOOKMARK");
    assert_eq!(evs[0]["object"], json!({"kind": "Widget", "apiVersion": "test.zundoko.example/v1", "metadata": {"resourceVersion": rv}}));
    // Streaming list.
    let evs = raw
        .watch(&format!("{WIDGETS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"), 3, T)
        .await;
    let types: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, vec!["ADDED", "ADDED", "BOOKMARK"]);
    assert_eq!(evs[2]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
    // sendInitialEvents without resourceVersionMatch is invalid.
    let (code, st) = raw.get(&format!("{WIDGETS}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true")).await;
    assert_eq!(code, 422, "{st}");
    // resourceVersion=0: synthetic ADDED events for the current state.
    let evs = raw.watch(&format!("{WIDGETS}?watch=true&resourceVersion=0"), 2, T).await;
    assert_eq!(evs.len(), 2);
    assert!(evs.iter().all(|e| e["type"] == "ADDED"));
}

#[tokio::test]
async fn timeout_seconds_ends_the_stream() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let (_, l) = raw.get(WIDGETS).await;
    let rv = l["metadata"]["resourceVersion"].as_str().unwrap();
    let start = Instant::now();
    let evs = raw.watch(&format!("{WIDGETS}?watch=true&resourceVersion={rv}&timeoutSeconds=1"), 1, Duration::from_secs(5)).await;
    assert!(evs.is_empty());
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(3), "{took:?}");
}

#[tokio::test]
async fn selector_transitions() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let mut w = widget("a", 1);
    w["metadata"]["labels"] = json!({"team": "x"});
    let (_, a) = raw.post(WIDGETS, &w).await;
    let rv = a["metadata"]["resourceVersion"].as_str().unwrap();
    raw.patch(&format!("{WIDGETS}/a"), "application/merge-patch+json", &json!({"metadata": {"labels": {"team": "y"}}})).await;
    raw.patch(&format!("{WIDGETS}/a"), "application/merge-patch+json", &json!({"metadata": {"labels": {"team": "x"}}})).await;
    let evs = raw.watch(&format!("{WIDGETS}?watch=true&resourceVersion={rv}&labelSelector=team%3Dx"), 2, T).await;
    let types: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, vec!["DELETED", "ADDED"]);
    let evs = raw.watch(&format!("{WIDGETS}?watch=true&resourceVersion={rv}&fieldSelector=metadata.name%3Db"), 1, Duration::from_millis(300)).await;
    assert!(evs.is_empty());
}
