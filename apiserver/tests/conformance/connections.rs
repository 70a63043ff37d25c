//! The connections the server accepted, by client (src/connections.rs): a client that keeps
//! its connection open is one connection however many requests it makes, one that closes it
//! after each request is one per request, and requests in flight at once each hold one.

use std::time::Duration;

use zundoko_apiserver::connections::ClientConnections;

use crate::common::*;

fn of(s: &zundoko_apiserver::ApiServer, client: &str) -> ClientConnections {
    s.connections().1.into_iter().find(|(ua, _)| ua == client).map(|(_, c)| c).unwrap_or_default()
}

async fn get(http: &reqwest::Client, s: &zundoko_apiserver::ApiServer, agent: &str) {
    let r = http.get(format!("{}/api/v1/namespaces/default", s.url())).header("User-Agent", agent).send().await.expect("a GET");
    assert_eq!(r.status().as_u16(), 200);
    r.bytes().await.expect("its body");
}

#[tokio::test]
async fn connections_are_counted_per_client_as_it_opens_them() {
    let s = server().await;
    let (before, _) = s.connections();
    // Kept alive: three requests in turn on one connection.
    let pooled = reqwest::Client::new();
    for _ in 0..3 {
        get(&pooled, &s, "keeps-it").await;
    }
    // Closed after each request (nothing pooled): a connection per request.
    let churning = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    for _ in 0..3 {
        get(&churning, &s, "churns").await;
    }
    assert_eq!(of(&s, "keeps-it"), ClientConnections { accepted: 1, open: 1, most_open: 1 });
    let churns = of(&s, "churns");
    assert_eq!((churns.accepted, churns.most_open), (3, 1), "{churns:?}");
    let server = &s;
    assert!(eventually(Duration::from_secs(5), move || async move { of(server, "churns").open == 0 }).await, "closed by the client: {:?}", of(&s, "churns"));
    // Four at once, each held a second by the server: each needs a connection of its own.
    s.faults().set_latency(Duration::from_secs(1));
    let parallel = reqwest::Client::new();
    futures::future::join_all((0..4).map(|_| get(&parallel, &s, "in-parallel"))).await;
    let parallel = of(&s, "in-parallel");
    assert_eq!((parallel.accepted, parallel.most_open), (4, 4), "{parallel:?}");
    // And the total counts every connection, the clients' own.
    let (after, _) = s.connections();
    assert!(after - before >= 1 + 3 + 4, "{before} -> {after}");
    s.shutdown().await;
}
