use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn error_rates_conflicts_and_latency() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    raw.post(WIDGETS, &widget("a", 1)).await;
    s.faults().set_error_rate("get", 1.0);
    let (code, st) = raw.get(&format!("{WIDGETS}/a")).await;
    assert_eq!(code, 500);
    assert_eq!(st["reason"], "InternalError");
    assert_eq!(st["kind"], "Status");
    assert!(st["message"].as_str().unwrap().starts_with("Internal error occurred: "));
    assert_eq!(raw.get(WIDGETS).await.0, 200, "other verbs are unaffected");
    s.faults().clear();
    assert_eq!(raw.get(&format!("{WIDGETS}/a")).await.0, 200);
    s.faults().set_conflict_rate(1.0);
    let (code, st) = raw.patch(&format!("{WIDGETS}/a"), "application/merge-patch+json", &json!({"spec": {"size": 2}})).await;
    assert_eq!(code, 409);
    assert_eq!(st["reason"], "Conflict");
    assert_eq!(raw.get(&format!("{WIDGETS}/a")).await.0, 200, "reads never conflict");
    s.faults().clear();
    s.faults().set_latency(Duration::from_millis(150));
    let t = Instant::now();
    raw.get(&format!("{WIDGETS}/a")).await;
    assert!(t.elapsed() >= Duration::from_millis(150));
    s.faults().clear();
    // Half the requests fail, roughly.
    s.faults().set_error_rate("*", 0.5);
    let mut fails = 0;
    for _ in 0..100 {
        if raw.get(&format!("{WIDGETS}/a")).await.0 == 500 {
            fails += 1;
        }
    }
    assert!((20..=80).contains(&fails), "{fails}");
}

#[tokio::test]
async fn restart_breaks_connections_and_keeps_state() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    raw.post(WIDGETS, &widget("a", 1)).await;
    let w = tokio::spawn({
        let url = s.url();
        async move {
            let r = reqwest::get(format!("{url}{WIDGETS}?watch=true&resourceVersion=0")).await.unwrap();
            let t = Instant::now();
            let _ = r.text().await; // ends when the connection breaks
            t.elapsed()
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.restart().await;
    let took = tokio::time::timeout(Duration::from_secs(3), w).await.expect("watch ended").unwrap();
    assert!(took < Duration::from_secs(2));
    let (code, o) = raw.get(&format!("{WIDGETS}/a")).await;
    assert_eq!(code, 200, "{o}");
}

#[tokio::test]
async fn request_log_records_verbs() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    raw.post(WIDGETS, &widget("a", 1)).await;
    raw.get(&format!("{WIDGETS}/a")).await;
    raw.get(&format!("{WIDGETS}/missing")).await;
    raw.patch(&format!("{WIDGETS}/a/status"), "application/merge-patch+json", &json!({"status": {"ready": true}})).await;
    // As kube-apiserver: a list pinned to one name by a field selector names it (for RBAC resourceNames).
    raw.get(&format!("{WIDGETS}?fieldSelector=metadata.name%3Da")).await;
    raw.get(&format!("{WIDGETS}?fieldSelector=metadata.name%21%3Da")).await;
    raw.delete(WIDGETS, None).await;
    let log: Vec<(String, String, String, String, String, u16)> = s
        .requests()
        .into_iter()
        .map(|r| (r.verb, r.api_group, r.resource, r.subresource, r.name, r.code))
        .collect();
    let g = "test.zundoko.example".to_string();
    let w = "widgets".to_string();
    assert_eq!(
        log[1..],
        [
            ("create".into(), g.clone(), w.clone(), "".into(), "".into(), 201),
            ("get".into(), g.clone(), w.clone(), "".into(), "a".into(), 200),
            ("get".into(), g.clone(), w.clone(), "".into(), "missing".into(), 404),
            ("patch".into(), g.clone(), w.clone(), "status".into(), "a".into(), 200),
            ("list".into(), g.clone(), w.clone(), "".into(), "a".into(), 200),
            ("list".into(), g.clone(), w.clone(), "".into(), "".into(), 200),
            ("deletecollection".into(), g.clone(), w.clone(), "".into(), "".into(), 200),
        ]
    );
    assert_eq!(s.requests()[1].namespace, "default");
}
