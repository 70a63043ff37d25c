//! The cost model (src/cost.rs): what a request costs grows with what it writes and whom it
//! tells, requests queue for the server's lanes, and the server measures each request's facts.
//! The model's arithmetic is checked on a clock of its own, never against the machine's.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchParams};
use tokio::time::Instant;
use zundoko_apiserver::cost::{CostModel, Facts, KUBE_APISERVER_1_32, Lanes};

use crate::common::*;

const MS: Duration = Duration::from_millis(1);

fn write(object_bytes: usize, body_bytes: usize, managed_fields_bytes: usize, watchers: usize) -> Facts {
    Facts { object_bytes, body_bytes, managed_fields_bytes, watchers }
}

#[test]
fn a_bigger_write_costs_more_for_each_thing_that_grows() {
    let m = KUBE_APISERVER_1_32;
    let small = write(700, 300, 400, 0);
    let cost = |f: Facts| m.cost(&f);
    assert!(cost(write(1_500, 300, 400, 0)) > cost(small), "a bigger object");
    assert!(cost(write(700, 1_200, 400, 0)) > cost(small), "a bigger body (patch)");
    assert!(cost(write(700, 300, 1_600, 0)) > cost(small), "bigger managedFields");
    assert!(cost(write(700, 300, 400, 2)) > cost(small), "watchers to fan out to");
    assert!(cost(write(1_500, 300, 400, 2)) - cost(write(1_500, 300, 400, 0)) > cost(write(700, 300, 400, 2)) - cost(small), "a bigger object costs each watcher more");
    assert_eq!(cost(Facts::default()), m.base, "the least a request costs");
}

#[test]
fn each_parameter_is_charged_as_said() {
    let m = CostModel {
        lanes: 1,
        base: MS,
        per_object_kib: 2 * MS,
        per_body_kib: 3 * MS,
        per_managed_fields_kib: 4 * MS,
        per_watcher: 5 * MS,
        per_watcher_kib: 6 * MS,
    };
    // 1 + 2×2 + 3×1 + 4×0.5 + 2×(5 + 6×2)
    assert_eq!(m.cost(&write(2048, 1024, 512, 2)), 44 * MS);
}

#[test]
fn requests_wait_for_a_free_lane_first_come_first_served() {
    let t0 = Instant::now();
    let mut lanes = Lanes::new(2, t0);
    // Three at once on two lanes: the third waits for the first to end.
    assert_eq!(lanes.book(t0, 10 * MS), t0 + 10 * MS);
    assert_eq!(lanes.book(t0, 4 * MS), t0 + 4 * MS);
    assert_eq!(lanes.book(t0, 10 * MS), t0 + 14 * MS, "on the lane free first");
    // One that comes when a lane is idle starts when it comes.
    assert_eq!(lanes.book(t0 + 30 * MS, 2 * MS), t0 + 32 * MS);
    // Zero lanes is one.
    let mut one = Lanes::new(0, t0);
    assert_eq!(one.book(t0, MS), t0 + MS);
    assert_eq!(one.book(t0, MS), t0 + 2 * MS);
}

#[tokio::test]
async fn the_server_charges_each_request_for_what_it_wrote_and_whom_it_told() {
    let s = server().await;
    s.cost().set_model(Some(CostModel { lanes: 4, ..KUBE_APISERVER_1_32 }));
    let api: Api<ConfigMap> = Api::namespaced(client(&s), "default");
    let config_map = |name: &str, bytes: usize| {
        serde_json::from_value::<ConfigMap>(serde_json::json!({"metadata": {"name": name}, "data": {"k": "x".repeat(bytes)}})).unwrap()
    };
    api.create(&PostParams::default(), &config_map("small", 10)).await.unwrap();
    // A watcher open: the next write fans out to it.
    let mut events = api.watch(&WatchParams::default(), "0").await.unwrap().boxed();
    api.create(&PostParams::default(), &config_map("big", 5_000)).await.unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(10), events.next()).await;
    let creates: Vec<_> = s.requests().into_iter().filter(|r| r.verb == "create" && r.resource == "configmaps").collect();
    let (small, big) = (&creates[0], &creates[1]);
    assert_eq!((small.facts.watchers, big.facts.watchers), (0, 1), "the open watches of the resource written");
    assert!(big.facts.object_bytes > small.facts.object_bytes + 4_000, "{:?} {:?}", big.facts, small.facts);
    assert!(big.facts.body_bytes > small.facts.body_bytes + 4_000);
    assert!(small.facts.managed_fields_bytes > 0, "a create computes managedFields: {:?}", small.facts);
    let model = s.cost().model().unwrap();
    for r in [small, big] {
        assert!(r.duration >= model.cost(&r.facts), "answered no sooner than its cost: {r:?}");
    }
    let watches = s.requests().into_iter().filter(|r| r.verb == "watch").count();
    assert_eq!(watches, 1);
    assert!(s.request_durations().iter().all(|((verb, _, _), _)| verb != "watch"), "a watch is a stream, not charged");
    let creates = s.request_durations().into_iter().find(|(k, _)| k == &("create".to_string(), "configmaps".to_string(), String::new())).unwrap().1;
    assert_eq!(creates.answered, 2);
    assert_eq!(creates.facts.object_bytes, small.facts.object_bytes + big.facts.object_bytes, "the facts summed");
}

/// The calibration (docs/benchmarks.md): charged with what the local server measured of each
/// word's three writes (bench-scale's "charged for" line: object, body and managedFields bytes,
/// watchers), the bare client's word costs the server's two lanes about 6.3 ms and the
/// operator's (before its status patch carried only what changed) about 8.65 ms, as kube-apiserver
/// v1.32 took them (305-328 and 227 words/s on 2 cores).
#[test]
fn the_calibrated_model_prices_a_word_as_the_real_server_took_it() {
    let m = KUBE_APISERVER_1_32;
    let word = |writes: [Facts; 3]| writes.iter().map(|f| m.cost(f)).sum::<Duration>();
    let bare = word([write(921, 408, 368, 0), write(1348, 689, 444, 0), write(845, 69, 475, 0)]);
    let operator = word([write(1508, 821, 542, 1), write(1497, 832, 450, 0), write(1586, 541, 782, 1)]);
    let words_per_sec = |cost: Duration| m.lanes as f64 / cost.as_secs_f64();
    assert!((305.0..=328.0).contains(&words_per_sec(bare)), "bare {bare:?}: {:.0} words/s", words_per_sec(bare));
    assert!((220.0..=235.0).contains(&words_per_sec(operator)), "operator {operator:?}: {:.0} words/s", words_per_sec(operator));
}

/// `/metrics` says what kube-apiserver's says of the same requests, as `make bench-real` reads
/// it of a real server: apiserver_request_duration_seconds' count and sum per reported verb
/// (POST, PATCH...), API group, resource and subresource, the tallies' own; a watch is not in
/// it. An events.k8s.io Event is counted under its group, apart from core's.
#[tokio::test]
async fn metrics_say_each_request_kinds_count_and_seconds_as_kube_apiserver_does() {
    let s = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client(&s), "default");
    for name in ["one", "two"] {
        let config_map = serde_json::from_value::<ConfigMap>(serde_json::json!({"metadata": {"name": name}})).unwrap();
        api.create(&PostParams::default(), &config_map).await.unwrap();
    }
    let patch = serde_json::json!({"data": {"k": "v"}});
    api.patch("one", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await.unwrap();
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client(&s), "default");
    let event = serde_json::json!({"metadata": {"name": "e"}, "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "zundoko.example/test",
        "reportingInstance": "test", "action": "Test", "reason": "Tested", "type": "Normal", "regarding": {"kind": "ConfigMap", "namespace": "default", "name": "one"}});
    events.create(&PostParams::default(), &serde_json::from_value(event).unwrap()).await.unwrap();
    let _watch = api.watch(&WatchParams::default(), "0").await.unwrap().boxed();
    let response = reqwest::get(format!("{}/metrics", s.url())).await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/plain"));
    let text = response.text().await.unwrap();
    let tallied = |verb: &str| s.request_durations().into_iter().find(|(k, _)| k == &(verb.to_string(), "configmaps".to_string(), String::new())).unwrap().1;
    for (verb, reported, answered) in [("create", "POST", 2), ("patch", "PATCH", 1)] {
        let labels = format!("component=\"apiserver\",group=\"\",resource=\"configmaps\",subresource=\"\",verb=\"{reported}\"");
        let value = |series: &str| -> f64 {
            let prefix = format!("apiserver_request_duration_seconds_{series}{{{labels}}} ");
            let line = text.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no {prefix}in\n{text}"));
            line[prefix.len()..].parse().unwrap()
        };
        assert_eq!(value("count"), answered as f64, "{text}");
        assert_eq!(value("sum"), tallied(verb).duration.as_secs_f64(), "{text}");
        assert!(text.contains(&format!("apiserver_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {answered}\n")), "{text}");
    }
    assert!(!text.contains("verb=\"WATCH\""), "a watch is a stream, not in the histogram:\n{text}");
    let events = "apiserver_request_duration_seconds_count{component=\"apiserver\",group=\"events.k8s.io\",resource=\"events\",subresource=\"\",verb=\"POST\"} 1\n";
    assert!(text.contains(events), "{text}");
}
