use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use tokio::sync::mpsc;
use zundoko_apiserver::RequestRecord;

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
    // One verb on one resource: other resources unaffected; it wins over the verb's rate.
    s.faults().set_error_rate("get/widgets", 1.0);
    assert_eq!(raw.get(&format!("{WIDGETS}/a")).await.0, 500);
    assert_eq!(raw.get("/api/v1/namespaces/default").await.0, 200, "other resources are unaffected");
    s.faults().set_error_rate("get", 1.0);
    s.faults().set_error_rate("get/widgets", 0.0);
    assert_eq!(raw.get(&format!("{WIDGETS}/a")).await.0, 200);
    assert_eq!(raw.get("/api/v1/namespaces/default").await.0, 500);
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

const UA_A: &str = "zundoko-operator/0.1.0 (operator-a)";
const UA_B: &str = "zundoko-operator/0.1.0 (operator-b)";

fn http(user_agent: &str) -> reqwest::Client {
    reqwest::Client::builder().user_agent(user_agent).build().unwrap()
}

/// A client with this User-Agent, and its watch of the widgets.
async fn watching(url: &str, user_agent: &str) -> (reqwest::Client, mpsc::UnboundedReceiver<Result<Value, String>>) {
    let client = http(user_agent);
    let events = watch_events(&client, format!("{url}{WIDGETS}?watch=true")).await;
    (client, events)
}

/// A watch's events as they arrive; the channel closes when the stream ends, after an
/// `Err` if it broke.
async fn watch_events(http: &reqwest::Client, url: String) -> mpsc::UnboundedReceiver<Result<Value, String>> {
    use futures::StreamExt;
    let r = http.get(url).send().await.expect("watch");
    assert_eq!(r.status().as_u16(), 200);
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = r.bytes_stream();
        let mut buf = Vec::new();
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(c) => buf.extend_from_slice(&c),
                Err(e) => {
                    let _ = tx.send(Err(e.to_string()));
                    return;
                }
            }
            while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=i).collect();
                let _ = tx.send(Ok(serde_json::from_slice(&line).expect("watch line is JSON")));
            }
        }
    });
    rx
}

/// Waits for an event about the named object; false at a timeout or the stream's end.
async fn sees(rx: &mut mpsc::UnboundedReceiver<Result<Value, String>>, name: &str, within: Duration) -> bool {
    let wait = async {
        while let Some(Ok(ev)) = rx.recv().await {
            if ev["object"]["metadata"]["name"] == name {
                return true;
            }
        }
        false
    };
    tokio::time::timeout(within, wait).await.unwrap_or(false)
}

/// The stream ends (cleanly or broken) within `within` without another event.
async fn ends(rx: &mut mpsc::UnboundedReceiver<Result<Value, String>>, within: Duration) {
    match tokio::time::timeout(within, rx.recv()).await {
        Ok(None) | Ok(Some(Err(_))) => {}
        Ok(Some(Ok(ev))) => panic!("an event instead of the end: {ev}"),
        Err(_) => panic!("the watch is still open"),
    }
}

#[tokio::test]
async fn partition_holds_one_client_until_heal() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let url = s.url();
    let ((a, mut watch_a), (b, mut watch_b)) = (watching(&url, UA_A).await, watching(&url, UA_B).await);

    let before = SystemTime::now();
    s.faults().partition("operator-a");
    assert!(s.faults().partitioned(UA_A));
    assert!(!s.faults().partitioned(UA_B));
    let r = a.get(format!("{url}{WIDGETS}")).timeout(Duration::from_secs(1)).send().await;
    assert!(r.as_ref().is_err_and(|e| e.is_timeout()), "{r:?}");
    let r = a.post(format!("{url}{WIDGETS}")).header("Content-Type", "application/json").body(widget("held", 1).to_string()).timeout(Duration::from_secs(1)).send().await;
    assert!(r.as_ref().is_err_and(|e| e.is_timeout()), "{r:?}");
    assert_eq!(b.get(format!("{url}{WIDGETS}")).send().await.unwrap().status(), 200, "other clients are served");
    // Still waiting when the partition heals.
    let waiting = tokio::spawn({
        let (a, url) = (a.clone(), url.clone());
        async move { a.get(format!("{url}{WIDGETS}")).send().await }
    });
    let r = b.post(format!("{url}{WIDGETS}")).header("Content-Type", "application/json").body(widget("seen", 1).to_string()).send().await.unwrap();
    assert_eq!(r.status(), 201);
    assert!(sees(&mut watch_b, "seen", Duration::from_secs(5)).await);
    assert!(tokio::time::timeout(Duration::from_secs(1), watch_a.recv()).await.is_err(), "a partitioned watch stays open and silent");

    // The log says what the partitioned client tried, and when.
    let held: Vec<RequestRecord> = s.requests().into_iter().filter(|r| r.user_agent == UA_A && r.code == 0).collect();
    let verbs: Vec<&str> = held.iter().map(|r| r.verb.as_str()).collect();
    assert_eq!(verbs, ["list", "create", "list"]);
    let now = SystemTime::now();
    assert!(held.iter().all(|r| r.at >= before && r.at <= now));
    assert!(held.windows(2).all(|w| w[0].at <= w[1].at));

    s.faults().heal("operator-a");
    assert!(!s.faults().partitioned(UA_A));
    let r = tokio::time::timeout(Duration::from_secs(3), waiting).await.expect("closed at heal").unwrap();
    assert!(r.is_err(), "a held request is never answered: {r:?}");
    ends(&mut watch_a, Duration::from_secs(3)).await;
    // New requests are served; the held create never lands, not even late.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = a.get(format!("{url}{WIDGETS}/held")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let list: Value = a.get(format!("{url}{WIDGETS}")).send().await.unwrap().json().await.unwrap();
    let names: Vec<&str> = list["items"].as_array().unwrap().iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["seen"]);
}

#[tokio::test]
async fn a_late_partition_delivers_its_held_writes_at_heal_and_never_answers_them() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    raw.post(WIDGETS, &widget("w", 1)).await;
    let (_, current) = raw.get(&format!("{WIDGETS}/w")).await;
    let rv = current["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let url = s.url();
    let a = http(UA_A);
    s.faults().partition_late("operator-a");
    assert!(s.faults().partitioned(UA_A));
    let send = |body: Value, method: reqwest::Method, path: String, content_type: &'static str| {
        let (a, url) = (a.clone(), url.clone());
        tokio::spawn(async move { a.request(method, format!("{url}{path}")).header("Content-Type", content_type).body(body.to_string()).send().await })
    };
    // Held: a create, a patch carrying the resourceVersion read, a read.
    let create = send(widget("late", 1), reqwest::Method::POST, WIDGETS.to_string(), "application/json");
    let stale = send(json!({"metadata": {"resourceVersion": rv}, "spec": {"size": 7}}), reqwest::Method::PATCH, format!("{WIDGETS}/w"), "application/merge-patch+json");
    let read = send(json!({}), reqwest::Method::GET, format!("{WIDGETS}/w"), "application/json");
    assert!(eventually(Duration::from_secs(3), || async { s.requests().iter().filter(|r| r.user_agent == UA_A && r.code == 0).count() == 3 }).await);
    // Meanwhile another client moves the object on: the held patch is now stale.
    let (code, _) = raw.patch(&format!("{WIDGETS}/w"), "application/merge-patch+json", &json!({"spec": {"size": 2}})).await;
    assert_eq!(code, 200);
    assert_eq!(raw.get(&format!("{WIDGETS}/late")).await.0, 404, "nothing held is processed before the heal");

    s.faults().heal("operator-a");
    for held in [create, stale, read] {
        let r = tokio::time::timeout(Duration::from_secs(3), held).await.expect("closed at heal").unwrap();
        assert!(r.is_err(), "a held request is never answered: {r:?}");
    }
    // Landed late: the create is served, the stale patch refused by its precondition, the read dropped.
    assert!(eventually(Duration::from_secs(3), || async { s.requests().iter().filter(|r| r.late).count() == 2 }).await);
    let late: Vec<(String, u16)> = s.requests().into_iter().filter(|r| r.late).map(|r| (r.verb, r.code)).collect();
    assert!(late.contains(&("create".into(), 201)) && late.contains(&("patch".into(), 409)), "{late:?}");
    assert_eq!(raw.get(&format!("{WIDGETS}/late")).await.0, 200);
    assert_eq!(raw.get(&format!("{WIDGETS}/w")).await.1["spec"]["size"], 2, "the stale patch did not land");
    assert!(!s.faults().partitioned(UA_A));
}

#[tokio::test]
async fn clear_heals_partitions() {
    let s = server().await;
    let url = s.url();
    let a = http(UA_A);
    s.faults().partition("*");
    assert!(s.faults().partitioned("anything"));
    let waiting = tokio::spawn({
        let (a, url) = (a.clone(), url.clone());
        async move { a.get(format!("{url}/api/v1/namespaces")).send().await }
    });
    assert!(eventually(Duration::from_secs(3), || async { s.requests().iter().any(|r| r.code == 0) }).await);
    s.faults().clear();
    let r = tokio::time::timeout(Duration::from_secs(3), waiting).await.expect("closed at clear").unwrap();
    assert!(r.is_err(), "{r:?}");
    assert_eq!(a.get(format!("{url}/api/v1/namespaces")).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn drop_connections_ends_one_clients_watches() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let url = s.url();
    let ((a, mut watch_a), (_b, mut watch_b)) = (watching(&url, UA_A).await, watching(&url, UA_B).await);
    s.faults().drop_connections("operator-a");
    ends(&mut watch_a, Duration::from_secs(3)).await;
    assert_eq!(raw.post(WIDGETS, &widget("after", 1)).await.0, 201);
    assert!(sees(&mut watch_b, "after", Duration::from_secs(5)).await, "other clients' watches go on");
    assert_eq!(a.get(format!("{url}{WIDGETS}/after")).send().await.unwrap().status(), 200, "the server keeps serving");
}

#[tokio::test]
async fn client_latency_applies_to_that_client_only() {
    let s = server().await;
    let url = format!("{}/api/v1/namespaces/default", s.url());
    let (a, b) = (http(UA_A), http(UA_B));
    s.faults().set_client_latency("operator-a", Duration::from_millis(1200));
    let t = Instant::now();
    assert_eq!(a.get(&url).send().await.unwrap().status(), 200);
    assert!(t.elapsed() >= Duration::from_millis(1200), "{:?}", t.elapsed());
    let t = Instant::now();
    assert_eq!(b.get(&url).send().await.unwrap().status(), 200);
    assert!(t.elapsed() < Duration::from_millis(800), "{:?}", t.elapsed());
    s.faults().set_client_latency("operator-a", Duration::ZERO);
    let t = Instant::now();
    a.get(&url).send().await.unwrap();
    assert!(t.elapsed() < Duration::from_millis(800), "{:?}", t.elapsed());
}

#[tokio::test]
async fn throttle_answers_as_priority_and_fairness() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let url = s.url();
    let (a, b) = (http(UA_A), http(UA_B));
    s.faults().set_throttle("operator-a", 1.0, 3);
    for path in [WIDGETS.to_string(), format!("{WIDGETS}?watch=true")] {
        let r = a.get(format!("{url}{path}")).send().await.unwrap();
        assert_eq!(r.status(), 429);
        assert_eq!(r.headers()["retry-after"], "3");
        assert_eq!(r.headers()["content-type"], "text/plain; charset=utf-8");
        // Go's http.Error, as APF writes it: not a Status.
        assert_eq!(r.text().await.unwrap(), "Too many requests, please try again later.\n");
    }
    assert_eq!(b.get(format!("{url}{WIDGETS}")).send().await.unwrap().status(), 200);
    let codes: Vec<(String, u16)> = s.requests().into_iter().filter(|r| r.user_agent == UA_A).map(|r| (r.verb, r.code)).collect();
    assert_eq!(codes, [("list".to_string(), 429), ("watch".to_string(), 429)]);
    s.faults().set_throttle("operator-a", 0.0, 3);
    assert_eq!(a.get(format!("{url}{WIDGETS}")).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn refused_credentials_answer_401_or_403_to_every_path_of_that_client_only() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let url = s.url();
    let (a, b) = (http(UA_A), http(UA_B));
    for (code, reason) in [(401, "Unauthorized"), (403, "Forbidden")] {
        s.faults().set_refused_credentials("operator-a", Some(code));
        for path in [WIDGETS.to_string(), format!("{WIDGETS}?watch=true"), "/version".into(), "/apis".into()] {
            let r = a.get(format!("{url}{path}")).send().await.unwrap();
            assert_eq!(r.status(), code, "{path}");
            let status: serde_json::Value = r.json().await.unwrap();
            assert_eq!((status["kind"].as_str(), status["reason"].as_str(), status["code"].as_u64()), (Some("Status"), Some(reason), Some(code as u64)), "{path}: {status}");
        }
        // A write is refused before it is made.
        let r = a.post(format!("{url}{WIDGETS}")).json(&widget("refused", 1)).send().await.unwrap();
        assert_eq!(r.status(), code);
        assert_eq!(b.get(format!("{url}{WIDGETS}")).send().await.unwrap().status(), 200);
    }
    assert_eq!(raw.get(&format!("{WIDGETS}/refused")).await.0, 404, "the refused create made nothing");
    // kube-rs sees the Status, as the operator would.
    let mut cfg = kube::Config::new(url.parse().unwrap());
    cfg.headers.push((reqwest::header::USER_AGENT, reqwest::header::HeaderValue::from_static(UA_A)));
    let client = kube::Client::try_from(cfg).unwrap();
    match client.apiserver_version().await {
        Err(kube::Error::Api(status)) => assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"), "{status:?}"),
        other => panic!("not refused: {other:?}"),
    }
    s.faults().set_refused_credentials("operator-a", None);
    assert_eq!(a.get(format!("{url}{WIDGETS}")).send().await.unwrap().status(), 200);
    assert!(client.apiserver_version().await.is_ok());
}

#[tokio::test]
async fn kube_rs_honours_retry_after() {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
    const UA_K: &str = "zundoko-operator/0.1.0 (operator-k)";
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    raw.post(WIDGETS, &widget("a", 1)).await;
    let mut cfg = kube::Config::new(s.url().parse().unwrap());
    cfg.headers.push((reqwest::header::USER_AGENT, reqwest::header::HeaderValue::from_static(UA_K)));
    let client = kube::Client::try_from(cfg).unwrap();
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("test.zundoko.example", "v1", "Widget"));
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);

    s.faults().set_throttle("operator-k", 1.0, 1);
    let (got, _) = tokio::join!(api.get("a"), async {
        tokio::time::sleep(Duration::from_millis(2500)).await;
        s.faults().set_throttle("operator-k", 0.0, 1);
    });
    got.expect("served once the throttle ends");
    let tries: Vec<RequestRecord> = s.requests().into_iter().filter(|r| r.user_agent == UA_K).collect();
    let codes: Vec<u16> = tries.iter().map(|r| r.code).collect();
    assert!(codes.len() >= 3 && codes[..codes.len() - 1].iter().all(|c| *c == 429) && codes.last() == Some(&200), "{codes:?}");
    for w in tries.windows(2) {
        let gap = w[1].at.duration_since(w[0].at).unwrap();
        assert!(gap >= Duration::from_millis(950), "retried after {gap:?}, not after Retry-After: {codes:?}");
    }
}

#[tokio::test]
async fn refusal_rate_refuses_one_verb_and_resource_with_the_code_asked_for() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    raw.post(WIDGETS, &widget("a", 1)).await;
    for (code, reason) in [(403, "Forbidden"), (409, "Conflict"), (422, "Invalid"), (400, "BadRequest")] {
        s.faults().set_refusal_rate("create/widgets", code, 1.0);
        let (got, st) = raw.post(WIDGETS, &widget(&format!("w{code}"), 1)).await;
        assert_eq!((got, st["reason"].as_str(), st["code"].as_u64()), (code, Some(reason), Some(code as u64)), "{st}");
        assert_eq!(raw.get(&format!("{WIDGETS}/w{code}")).await.0, 404, "the refused create made nothing");
        assert_eq!(raw.get(&format!("{WIDGETS}/a")).await.0, 200, "other verbs are unaffected");
    }
    s.faults().set_refusal_rate("create/widgets", 403, 0.0);
    assert_eq!(raw.post(WIDGETS, &widget("b", 1)).await.0, 201);
}

#[tokio::test]
async fn unavailable_rate() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    raw.post(WIDGETS, &widget("a", 1)).await;
    s.faults().set_unavailable_rate("get", 1.0);
    let (code, st) = raw.get(&format!("{WIDGETS}/a")).await;
    assert_eq!(code, 503);
    assert_eq!(
        st,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "injected fault for get", "reason": "ServiceUnavailable", "code": 503})
    );
    assert_eq!(raw.get(WIDGETS).await.0, 200, "other verbs are unaffected");
    s.faults().clear();
    assert_eq!(raw.get(&format!("{WIDGETS}/a")).await.0, 200);
    s.faults().set_unavailable_rate("*", 0.5);
    let mut fails = 0;
    for _ in 0..100 {
        if raw.get(&format!("{WIDGETS}/a")).await.0 == 503 {
            fails += 1;
        }
    }
    assert!((20..=80).contains(&fails), "{fails}");
}

#[tokio::test]
async fn a_cut_connection_ends_the_request_unanswered_and_unprocessed() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    raw.post(WIDGETS, &widget("a", 1)).await;
    s.faults().set_cut_rate("create/widgets", 1.0);
    let http = reqwest::Client::new();
    let sent = http.post(format!("{}{WIDGETS}", s.url())).header("Content-Type", "application/json").body(widget("cut", 1).to_string()).send().await;
    let error = sent.expect_err("no answer: the connection ends");
    assert!(!error.is_status() && !error.is_timeout(), "{error:?}");
    assert_eq!(raw.get(&format!("{WIDGETS}/cut")).await.0, 404, "the cut create was not processed");
    assert_eq!(raw.get(&format!("{WIDGETS}/a")).await.0, 200, "other verbs are unaffected");
    let logged = s.requests().into_iter().rev().find(|r| r.verb == "create" && r.resource == "widgets").unwrap();
    assert_eq!((logged.code, logged.name.as_str()), (0, ""), "logged as never answered");
    s.faults().set_cut_rate("create/widgets", 0.0);
    assert_eq!(raw.post(WIDGETS, &widget("b", 1)).await.0, 201);
}
