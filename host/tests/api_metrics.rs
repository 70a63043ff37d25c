//! What a running operator tells about its API requests and reconciles (issue 55's "see it"):
//! `zundoko_rest_client_requests_total{verb,resource,code}` counts every request as client-go
//! does, `zundoko_rest_client_request_duration_seconds` times them, and
//! `zundoko_reconcile_duration_seconds{controller,result}` times each reconcile,
//! `zundoko_workqueue_queue_duration_seconds` and `zundoko_workqueue_depth` its queue. A replica as
//! the cluster runs it sings one song against the local API server, and the figures must be the
//! song's own: one successful create per word, each word's Event, its status patches.

mod common;

use std::time::Duration;

use common::module_bytes;
use common::replica::{ONE_SHARD, Replica, setup};
use common::running::eventually;
use zundoko_rules::classic;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_and_reconcile_of_a_song_is_counted_by_verb_resource_and_code() {
    let setup = setup("api-metrics", false).await;
    let module = setup.dir.join("rules.wasm");
    std::fs::write(&module, module_bytes("zundoko-classic")).unwrap();
    let op = Replica::spawn_with("api-metrics", &setup.kubeconfig, &setup.env, ONE_SHARD, &module, &setup.dir);
    eventually("ready", Duration::from_secs(60), async || op.get("/readyz").is_some_and(|(c, _)| c == 200)).await;
    setup.cluster.create_hikawa("default", "counted", 0, &[]).await;
    setup.cluster.assert_songs_complete("default", &["counted".to_string()], &classic(), Duration::from_secs(60)).await;
    let words = setup.cluster.song("default", "counted").await.words.len() as f64;

    let metric = |line: &str| op.metric(&format!("{line} ")).unwrap_or(0.0);
    let created = |resource: &str| metric(&format!("zundoko_rest_client_requests_total{{verb=\"create\",resource=\"{resource}\",code=\"201\"}}"));
    // Each word once, so one successful create each; the Kiyoshi too.
    eventually("the counts caught up", Duration::from_secs(10), async || created("zundokos") == words && created("kiyoshis") == 1.0).await;
    // Each word's Event (and the Kiyoshi's), each sent once.
    eventually("an Event per word", Duration::from_secs(10), async || created("events") >= words + 1.0).await;
    assert!(created("events") <= words + 3.0, "{} Events for {words} words", created("events"));
    let status_patches = metric("zundoko_rest_client_requests_total{verb=\"patch\",resource=\"hikawas/status\",code=\"200\"}");
    assert!((1.0..=2.0 * (words + 2.0)).contains(&status_patches), "{status_patches} status patches for {words} words");
    // Timed as counted; watched, not polled.
    assert_eq!(metric("zundoko_rest_client_request_duration_seconds_count{verb=\"create\",resource=\"zundokos\"}"), created("zundokos"));
    assert!(metric("zundoko_rest_client_requests_total{verb=\"watch\",resource=\"zundokos\",code=\"200\"}") >= 1.0);
    assert_eq!(metric("zundoko_rest_client_requests_total{verb=\"list\",resource=\"hikawas\",code=\"500\"}"), 0.0);
    // A reconcile at least per word, every one timed.
    let reconciles = metric("zundoko_reconcile_duration_seconds_count{controller=\"hikawa\",result=\"success\"}");
    assert!(reconciles >= words, "{reconciles} reconciles timed for {words} words");
    assert_eq!(metric("zundoko_reconcile_duration_seconds_count{controller=\"hikawa\",result=\"error\"}"), 0.0);
    // The queue (controller-runtime's names): every word came from a reconcile that was due (the
    // Hikawa's watch event, or the requeue the one before asked for), so at least one wait per
    // word is timed, and never more than the reconciles started; once the song is over nothing
    // is due any more.
    let waits = metric("zundoko_workqueue_queue_duration_seconds_count{name=\"hikawa\"}");
    assert!(waits >= words, "{waits} queue waits timed for {words} words");
    assert!(waits <= metric("zundoko_reconcile_duration_seconds_count{controller=\"hikawa\",result=\"success\"}"), "{waits} waits, more than reconciles");
    eventually("nothing due after the song", Duration::from_secs(10), async || op.metric("zundoko_workqueue_depth{name=\"hikawa\"} ") == Some(0.0)).await;
}
