//! End to end against the local API server: the operator sings, survives restarts at random
//! points and API faults, reacts to deletes and edits, and contains a failing guest.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::cluster::{Cluster, quick_settings};
use common::running::eventually;
use common::{fixture_bytes, module_bytes};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams};
use kube::Api;
use zundoko_operator::controllers::hikawa::provenance::{DECISION, Provenance};
use zundoko_operator::supply::contract::rules::{NativeRules, Rules};
use zundoko_operator::supply::sandbox::{SandboxEngine, SandboxLimits};

fn wasm(name: &str) -> Arc<dyn Rules> {
    load(&module_bytes(name))
}

/// A test fixture from target/fixtures/ (`zundoko-hostile`).
fn fixture(name: &str) -> Arc<dyn Rules> {
    load(&fixture_bytes(name))
}

fn load(bytes: &[u8]) -> Arc<dyn Rules> {
    let engine = SandboxEngine::new(SandboxLimits::default()).unwrap();
    Arc::new(engine.load(bytes).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_sings_a_valid_song_with_status_events_and_intervals() {
    let cluster = Cluster::start().await;
    let operator = cluster.operator(wasm("zundoko-classic"), quick_settings());
    // The seed's sample manifest, unchanged.
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/samples/hikawa-sample.yaml")).unwrap();
    let mut sample = zundoko_operator::crd::parse_hikawa("sample", &text).unwrap();
    sample.metadata.namespace = Some("default".into());
    cluster.hikawas("default").create(&Default::default(), &sample).await.unwrap();
    cluster.wait_kiyoshied("default", &["hikawa-sample".into()], Duration::from_secs(300)).await;

    let song = cluster.song("default", "hikawa-sample").await;
    song.assert_valid(&zundoko_rules::classic(), "sample");
    // intervalMillis, measured between consecutive words (and before the Kiyoshi): never
    // shorter (the product's promise, whatever the load); on average not much longer: the
    // interval, plus a reconcile that a loaded 2-core machine is given twice the interval for.
    let interval = sample.spec.interval_millis as i64;
    let gaps = song.gaps();
    assert!(gaps.iter().all(|&g| g >= interval), "gaps {gaps:?}, interval {interval} ms");
    let mean = gaps.iter().sum::<i64>() as f64 / gaps.len() as f64;
    println!("mean gap {mean:.0} ms for an interval of {interval} ms");
    assert!(mean < 3.0 * interval as f64, "mean gap {mean} ms for an interval of {interval} ms: {gaps:?}");

    let hikawa = cluster.hikawas("default").get("hikawa-sample").await.unwrap();
    let status = hikawa.status.unwrap();
    assert!(status.kiyoshied);
    assert_eq!(status.num_zundokos_said as usize, song.words.len());
    assert_eq!(status.phase.as_deref(), Some("Kiyoshied"));
    assert_eq!(status.observed_generation, hikawa.metadata.generation);
    let module = status.module.unwrap();
    assert_eq!(module.name, "zundoko-classic");
    assert!(module.digest.starts_with("sha256:"));
    assert!(status.last_word_time.is_some());
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("True", "Decided"));
    assert_eq!(hikawa.spec.num_zundokos, None, "the operator never writes the spec");

    // One Normal Event per word, the song in order: each there before the status counted it.
    let events = cluster.events_for("default", "hikawa-sample").await;
    let said: Vec<&Event> = events.iter().filter(|e| e.reason.as_deref() == Some("Said")).collect();
    let notes: Vec<String> = said.iter().map(|e| e.note.clone().unwrap()).collect();
    // Each note is the word, then the module and the decision that said it.
    let words: Vec<&str> = notes.iter().map(|n| n.split(" · ").next().unwrap()).collect();
    let mut expected = song.words.clone();
    expected.push("Ki-yo-shi!".into());
    assert_eq!(words, expected);
    let module_named = format!(" · zundoko-classic 0.1.0 ({}), decision i=", &module.digest[.."sha256:".len() + 12]);
    for event in &said {
        let note = event.note.as_deref().unwrap();
        let (_, decision) = note.split_once(&module_named).unwrap_or_else(|| panic!("{note:?} names not the module as {module_named:?}"));
        // The decision it names is the one recorded on the child the Event is related to.
        let child = event.related.as_ref().and_then(|r| r.name.clone()).unwrap();
        let annotations = match event.related.as_ref().and_then(|r| r.kind.as_deref()) {
            Some("Kiyoshi") => Api::<zundoko_operator::crd::Kiyoshi>::namespaced(cluster.client.clone(), "default").get(&child).await.unwrap().metadata.annotations,
            _ => Api::<zundoko_operator::crd::Zundoko>::namespaced(cluster.client.clone(), "default").get(&child).await.unwrap().metadata.annotations,
        };
        let recorded = Provenance::parse(&annotations.unwrap()[DECISION]).unwrap();
        assert_eq!(decision.len(), 8, "{note:?}");
        assert!(recorded.input.starts_with(decision), "{note:?} against the child's decision i={}", recorded.input);
    }
    assert!(events.iter().all(|e| e.type_.as_deref() == Some("Normal")));
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_words_status_is_written_only_after_its_event_was_answered() {
    // Every request held 30 ms by the server: an Event and a status sent together would both
    // come before either was answered.
    let cluster = Cluster::start().await;
    cluster.server.faults().set_latency(Duration::from_millis(30));
    let operator = cluster.operator(Arc::new(NativeRules::new(zundoko_rules::classic())), quick_settings());
    cluster.create_hikawa("default", "in-turn", 0, &[]).await;
    cluster.wait_kiyoshied("default", &["in-turn".to_string()], Duration::from_secs(120)).await;
    operator.stop().await;
    let mut log = cluster.server.requests();
    log.sort_by_key(|r| r.at);
    let is_child = |r: &zundoko_apiserver::RequestRecord| r.verb == "create" && (r.resource == "zundokos" || r.resource == "kiyoshis") && r.code == 201;
    let starts: Vec<usize> = log.iter().enumerate().filter(|(_, r)| is_child(r)).map(|(i, _)| i).collect();
    let words = cluster.song("default", "in-turn").await.words.len() + 1;
    assert_eq!(starts.len(), words, "a create per word");
    // Each word's requests, from its child's create to the next word's.
    for (n, window) in starts.iter().zip(starts.iter().skip(1).chain([&log.len()])).map(|(&from, &to)| &log[from..to]).enumerate() {
        let event = window.iter().find(|r| r.verb == "create" && r.resource == "events").unwrap_or_else(|| panic!("word {n}: no Said Event"));
        let status = window.iter().find(|r| r.verb == "patch" && r.resource == "hikawas" && r.subresource == "status").unwrap_or_else(|| panic!("word {n}: no status"));
        let answered = event.at + event.duration;
        assert!(status.at >= answered, "word {n}: the status came {:?} before its Event was answered", answered.duration_since(status.at).unwrap_or_default());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_hikawas_at_once_all_finish_valid() {
    let cluster = Cluster::start().await;
    let operator = cluster.operator(wasm("zundoko-classic"), quick_settings());
    let names: Vec<String> = (0..50).map(|i| format!("h{i:02}")).collect();
    for name in &names {
        cluster.create_hikawa("default", name, 0, &[]).await;
    }
    cluster.assert_songs_complete("default", &names, &zundoko_rules::classic(), Duration::from_secs(300)).await;
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_operator_at_random_points_loses_and_repeats_nothing() {
    let cluster = Cluster::start().await;
    let names: Vec<String> = (0..8).map(|i| format!("r{i}")).collect();
    for name in &names {
        cluster.create_hikawa("default", name, 20, &[]).await;
    }
    let rules = wasm("zundoko-classic");
    let mut rng = 0x1234_5678u64;
    let mut kills = 0;
    loop {
        let operator = cluster.operator(rules.clone(), quick_settings());
        rng = zundoko_rules::song::mix(rng);
        tokio::time::sleep(Duration::from_millis(30 + rng % 300)).await;
        operator.kill().await;
        kills += 1;
        let all_done = cluster
            .hikawas("default")
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .all(|h| h.status.as_ref().is_some_and(|s| s.kiyoshied));
        if all_done && kills >= 30 {
            break;
        }
        if kills % 25 == 0 {
            let said: usize = futures::future::join_all(names.iter().map(|n| cluster.song("default", n))).await.iter().map(|s| s.words.len()).sum();
            eprintln!("restart test: {kills} kills, {said} words so far");
        }
        assert!(kills < 2000, "songs did not finish across {kills} restarts");
    }
    for name in &names {
        cluster.song("default", name).await.assert_valid(&zundoko_rules::classic(), name);
    }
    // Later, a fresh operator finds nothing more to say: once it has looked at every Hikawa
    // (a reconcile past the cache's catching-up for each), nothing new is there.
    let operator = cluster.operator(rules, quick_settings());
    let metrics = operator.shared.metrics.clone();
    let looked = || metrics.sum("zundoko_reconciles_total") - metrics.sum("zundoko_reconciles_not_decided_total{why=\"catching-up\"}");
    eventually("the fresh operator looked at every Hikawa", Duration::from_secs(30), async || looked() >= names.len() as u64).await;
    for name in &names {
        cluster.song("default", name).await.assert_valid(&zundoko_rules::classic(), name);
    }
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_mid_song_collects_children_and_editing_the_interval_takes_effect() {
    let cluster = Cluster::start().await;
    let operator = cluster.operator(wasm("zundoko-classic"), quick_settings());
    cluster.create_hikawa("default", "doomed", 50, &[("zuns", "16")]).await;
    cluster.create_hikawa("default", "edited", 100, &[("zuns", "16")]).await;
    // Let both sing a few words.
    let words = |name: &'static str| {
        let cluster = &cluster;
        async move { cluster.song("default", name).await.words.len() }
    };
    while words("doomed").await < 3 || words("edited").await < 3 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Slow "edited" right down; delete "doomed".
    cluster
        .hikawas("default")
        .patch("edited", &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec": {"intervalMillis": 1500}})))
        .await
        .unwrap();
    let edited_at = jiff::Timestamp::now().as_millisecond();
    cluster.hikawas("default").delete("doomed", &Default::default()).await.unwrap();
    let mut waited = 0;
    while !cluster.song("default", "doomed").await.words.is_empty() {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += 1;
        assert!(waited < 200, "the deleted Hikawa's children were not collected");
    }
    // After the edit: the gap before the next word is the new interval.
    while cluster.song("default", "edited").await.times.iter().filter(|&&t| t > edited_at).count() < 2 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let song = cluster.song("default", "edited").await;
    let after: Vec<i64> = song.times.windows(2).filter(|w| w[1] > edited_at).map(|w| w[1] - w[0]).collect();
    assert!(after[1..].iter().all(|&g| g >= 1500), "gaps after the edit {after:?}");
    let before: Vec<i64> = song.times.windows(2).filter(|w| w[1] <= edited_at).map(|w| w[1] - w[0]).collect();
    assert!(before.iter().all(|&g| (100..1500).contains(&g)), "gaps before the edit {before:?}");

    // Nothing came back for the deleted Hikawa. The control: the operator has since said two
    // of "edited"'s words, so its watch of the children had delivered the collection of
    // "doomed"'s (earlier in the same stream) and it had decided for "edited" twice after it.
    let song = cluster.song("default", "doomed").await;
    assert!(song.words.is_empty() && song.kiyoshis.is_empty(), "{song:?}");
    assert!(cluster.hikawas("default").get_opt("doomed").await.unwrap().is_none());
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_faults_do_not_break_any_song() {
    let cluster = Cluster::start().await;
    let faults = cluster.server.faults();
    for verb in ["get", "list", "create", "patch", "update"] {
        faults.set_error_rate(verb, 0.1);
    }
    faults.set_conflict_rate(0.1);
    faults.set_watch_drop_every(Some(Duration::from_secs(2)));
    let operator = cluster.operator(wasm("zundoko-classic"), quick_settings());
    let names: Vec<String> = (0..10).map(|i| format!("f{i}")).collect();
    for name in &names {
        // The test's own writes retry through the injected errors.
        let started = std::time::Instant::now();
        loop {
            assert!(started.elapsed() < Duration::from_secs(60), "could not create {name} through the faults");
            let mut h = zundoko_operator::crd::Hikawa::new(name, zundoko_operator::crd::HikawaSpec { interval_millis: 0, ..Default::default() });
            h.metadata.namespace = Some("default".into());
            match tokio::time::timeout(Duration::from_secs(10), cluster.hikawas("default").create(&Default::default(), &h)).await {
                Ok(Ok(_)) => break,
                Ok(Err(kube::Error::Api(s))) if s.is_already_exists() => break,
                Ok(Err(_)) | Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }
    cluster.wait_kiyoshied("default", &names, Duration::from_secs(300)).await;
    faults.clear();
    for name in &names {
        cluster.song("default", name).await.assert_valid(&zundoko_rules::classic(), name);
    }
    // Nothing lost: a word's Event refused with a 500 or a conflict is sent again.
    common::replica::wait_each_word_said_once(&cluster, &names).await;
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_said_event_refused_until_after_the_song_is_over_is_still_sent() {
    // Every Said Event refused while the song is sung, and for a while after it ended: the
    // Hikawa has nothing left to decide, yet its reconcile must keep coming back for them.
    let cluster = Cluster::start().await;
    cluster.server.faults().set_error_rate("create/events", 1.0);
    let operator = cluster.operator(wasm("zundoko-classic"), quick_settings());
    let names = vec!["refused".to_string()];
    let mut h = zundoko_operator::crd::Hikawa::new("refused", zundoko_operator::crd::HikawaSpec { interval_millis: 0, ..Default::default() });
    h.metadata.namespace = Some("default".into());
    cluster.hikawas("default").create(&Default::default(), &h).await.unwrap();
    cluster.wait_kiyoshied("default", &names, Duration::from_secs(60)).await;
    // Retries refused after the last word. A retry sends every unsaid Event at once (one per
    // word and the Kiyoshi's): a burst of requests, and a pause of more than half of
    // UNSAID_RETRY starts the next burst.
    let retry = zundoko_operator::controllers::hikawa::controller::UNSAID_RETRY;
    assert_eq!(retry, Duration::from_millis(500), "docs/operating.md says within half a second");
    let at_the_end = cluster.server.requests().len();
    let bursts = || {
        let refused = cluster.server.requests().into_iter().skip(at_the_end).filter(|r| r.resource == "events" && r.verb == "create" && r.code == 500);
        let mut bursts: Vec<(std::time::SystemTime, std::time::SystemTime)> = Vec::new();
        for at in refused.map(|r| r.at) {
            match bursts.last_mut() {
                Some((_, last)) if at.duration_since(*last).unwrap_or_default() <= retry / 2 => *last = at,
                _ => bursts.push((at, at)),
            }
        }
        bursts
    };
    eventually("Said Events refused after the song ended", Duration::from_secs(30), async || bursts().len() >= 6).await;
    // The promise: the next try within half a second of the last refusal, i.e. the pause from
    // a burst's last request to the next burst's first is UNSAID_RETRY; the median pause, with
    // 150 ms for the refusal's answer and the reconcile before the next send on a loaded machine.
    let bursts = bursts();
    let mut pauses: Vec<Duration> = bursts.windows(2).map(|w| w[1].0.duration_since(w[0].1).unwrap()).collect();
    pauses.sort_unstable();
    let median = pauses[pauses.len() / 2];
    println!("retries after the song ended: a pause of {median:?} (median; all {pauses:?})");
    assert!(median <= retry + Duration::from_millis(150), "paused {median:?} between tries (median of {pauses:?}), not {retry:?}");
    assert!(common::replica::said_events(&cluster).await.is_empty());
    cluster.server.faults().clear();
    common::replica::wait_each_word_said_once(&cluster, &names).await;
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_before_its_caches_were_ever_listed_it_still_stops() {
    // Every list refused: neither cache is ever filled, and kube-runtime's graceful shutdown
    // alone would wait for them forever. The operator stops after its grace period.
    let cluster = Cluster::start().await;
    cluster.server.faults().set_error_rate("list", 1.0);
    let operator = cluster.operator(wasm("zundoko-classic"), quick_settings());
    eventually("the operator tried to list", Duration::from_secs(10), async || cluster.server.requests().iter().any(|r| r.verb == "list" && r.code == 500)).await;
    let stopping = std::time::Instant::now();
    operator.stop().await;
    let (took, grace) = (stopping.elapsed(), zundoko_operator::operator::controllers::SHUTDOWN_GRACE);
    println!("stopped {took:?} after being asked (grace {grace:?})");
    // Within its grace, plus half as much again for a loaded machine to fire the timer and
    // drop the controllers (without the grace it would never stop: stop() gives up at 60 s).
    assert!(took <= grace + grace / 2, "stopped {took:?} after being asked, grace {grace:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_guest_marks_only_its_hikawa_and_the_others_finish() {
    let cluster = Cluster::start().await;
    let operator = cluster.operator(fixture("zundoko-hostile"), quick_settings());
    cluster.create_hikawa("default", "trapper", 0, &[("hostile", "panic")]).await;
    cluster.create_hikawa("default", "trespasser", 0, &[("hostile", "foreign-namespace")]).await;
    let good: Vec<String> = (0..3).map(|i| format!("good{i}")).collect();
    for name in &good {
        cluster.create_hikawa("default", name, 0, &[]).await;
    }
    cluster.assert_songs_complete("default", &good, &zundoko_rules::classic(), Duration::from_secs(120)).await;
    for name in &good {
        let warnings = cluster.events_for("default", name).await.into_iter().filter(|e| e.type_.as_deref() == Some("Warning")).count();
        assert_eq!(warnings, 0, "{name} has no Warning Events");
    }
    for (name, reason, says) in [("trapper", "GuestTrapped", "hostile guest panics on purpose"), ("trespasser", "PlanRejected", "kube-system")] {
        // The good songs (interval 0) can end before a failure is recorded: wait for it.
        let failed = async || {
            let hikawa = cluster.hikawas("default").get(name).await.unwrap();
            hikawa.status.is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "False"))
        };
        eventually(&format!("{name} marked failed"), Duration::from_secs(30), failed).await;
        let hikawa = cluster.hikawas("default").get(name).await.unwrap();
        let status = hikawa.status.unwrap();
        let ready = status.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", reason), "{name}");
        assert!(ready.message.contains(says), "{name}: {}", ready.message);
        assert_eq!(status.phase.as_deref(), Some("Failed"));
        let warnings: Vec<Event> = cluster.events_for("default", name).await.into_iter().filter(|e| e.type_.as_deref() == Some("Warning")).collect();
        assert!(!warnings.is_empty() && warnings.iter().all(|e| e.reason.as_deref() == Some(reason)), "{name}: {warnings:?}");
        // Nothing of a failed plan was applied.
        let song = cluster.song("default", name).await;
        assert!(song.words.is_empty() && song.kiyoshis.is_empty(), "{name}: {song:?}");
    }
    let kube_system: Api<zundoko_operator::crd::Zundoko> = Api::namespaced(cluster.client.clone(), "kube-system");
    assert!(kube_system.list(&Default::default()).await.unwrap().items.is_empty());
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_and_wasm_rules_drive_the_same_operator() {
    let cluster = Cluster::start().await;
    let operator = cluster.operator(Arc::new(NativeRules::new(zundoko_rules::strict_japanese())), quick_settings());
    let names: Vec<String> = (0..5).map(|i| format!("n{i}")).collect();
    for name in &names {
        cluster.create_hikawa("default", name, 0, &[]).await;
    }
    cluster.assert_songs_complete("default", &names, &zundoko_rules::strict_japanese(), Duration::from_secs(120)).await;
    for name in &names {
        let status = cluster.hikawas("default").get(name).await.unwrap().status.unwrap();
        assert_eq!(status.module.unwrap().digest, "native:zundoko-strict-ja");
    }
    operator.stop().await;
}

/// A process that created a word's child and died before its Said Event: the next process to
/// decide for the Hikawa (after a restart, or the replica that takes its shard) says it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_words_event_lost_with_its_sender_is_published_by_the_next_one() {
    use kube::Resource;
    use kube::api::PostParams;
    use zundoko_operator::crd::{SAID_AT, Zundoko, ZundokoSpec};
    let cluster = Cluster::start().await;
    // A word every 100 s: none more during the test.
    let hikawa = cluster.create_hikawa("default", "orphan", 100_000, &[]).await;
    let mut child = Zundoko::new("orphan-zundoko-001", ZundokoSpec { say: "Zun".into() });
    child.metadata.namespace = Some("default".into());
    child.metadata.owner_references = Some(vec![hikawa.controller_owner_ref(&()).unwrap()]);
    child.metadata.labels = Some([(zundoko_operator::controllers::hikawa::apply::HIKAWA_LABEL.to_string(), "orphan".to_string())].into());
    child.metadata.annotations = Some([(SAID_AT.to_string(), jiff::Timestamp::now().to_string())].into());
    Api::<Zundoko>::namespaced(cluster.client.clone(), "default").create(&PostParams::default(), &child).await.unwrap();

    let operator = cluster.operator(Arc::new(NativeRules::new(zundoko_rules::classic())), quick_settings());
    let said = async || {
        let events: Api<Event> = Api::namespaced(cluster.client.clone(), "default");
        let list = events.list(&ListParams::default()).await.unwrap().items;
        list.iter().filter(|e| e.reason.as_deref() == Some("Said") && e.related.as_ref().and_then(|r| r.name.as_deref()) == Some("orphan-zundoko-001")).count()
    };
    eventually("the lost word's Said Event", Duration::from_secs(20), async || said().await == 1).await;
    // The next process (another identity) decides for the Hikawa with the word just said, so
    // it owes the Event too: it finds it there and sends none. Counted once it has decided (its
    // name in the status) and stopped (its reconciles in flight finished).
    operator.stop().await;
    let before_second = cluster.server.requests().len();
    let rules = Arc::new(NativeRules::new(zundoko_rules::classic()));
    let second = cluster.operator_as("second", rules, quick_settings(), Default::default());
    eventually("the second process decided for the Hikawa", Duration::from_secs(20), async || {
        let status = cluster.hikawas("default").get("orphan").await.unwrap().status;
        status.and_then(|s| s.decided_by).as_deref() == Some("second")
    })
    .await;
    second.stop().await;
    assert_eq!(said().await, 1, "the second process sent the Event again");
    // It did owe it: it tried, and the Event's name (its word's) told it the Event was there.
    let tried = cluster.server.requests().into_iter().skip(before_second).filter(|r| r.resource == "events" && r.verb == "create").map(|r| r.code).collect::<Vec<_>>();
    assert_eq!(tried, [409], "the second process's Event creates");
    assert_eq!(cluster.song("default", "orphan").await.words, ["Zun"], "no word said meanwhile");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_that_will_not_go_away_is_recorded_at_once_one_that_may_after_three_failures() {
    // Every child create refused with one code: the Hikawa's Ready=False and Warning Event come
    // after the first refused create when waiting cannot help, after the third when it may.
    for (code, reason, at_once) in [(403, "ApiForbidden", true), (422, "ApiInvalid", true), (400, "ApiRefused", true), (409, "ApiConflict", false)] {
        let cluster = Cluster::start().await;
        cluster.server.faults().set_refusal_rate("create/zundokos", code, 1.0);
        check_refusal_recorded(&cluster, reason, at_once, |r| r.code == code).await;
    }
    let cluster = Cluster::start().await;
    cluster.server.faults().set_error_rate("create/zundokos", 1.0);
    check_refusal_recorded(&cluster, "ApiError", false, |r| r.code == 500).await;
    // The connection of every child create cut before an answer: unreachable, may pass.
    let cluster = Cluster::start().await;
    cluster.server.faults().set_cut_rate("create/zundokos", 1.0);
    check_refusal_recorded(&cluster, "ApiUnreachable", false, |r| r.code == 0).await;
}

async fn check_refusal_recorded(cluster: &Cluster, reason: &str, at_once: bool, refused: impl Fn(&zundoko_apiserver::RequestRecord) -> bool) {
    let operator = cluster.operator(wasm("zundoko-classic"), quick_settings());
    cluster.create_hikawa("default", "refused", 0, &[]).await;
    let recorded = async || {
        let hikawa = cluster.hikawas("default").get("refused").await.unwrap();
        hikawa.status.and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "Ready")).is_some_and(|c| c.status == "False" && c.reason == reason)
    };
    eventually(&format!("Ready=False {reason}"), Duration::from_secs(30), recorded).await;
    let warnings = cluster.events_for("default", "refused").await;
    assert!(!warnings.is_empty() && warnings.iter().all(|e| e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some(reason)), "{warnings:?}");
    // The refused creates before the first Event (the failure's, written before its status).
    let requests = cluster.server.requests();
    let first_event = requests.iter().position(|r| r.resource == "events" && r.verb == "create" && r.code < 300).expect("an Event created");
    let before = requests[..first_event].iter().filter(|r| r.resource == "zundokos" && r.verb == "create" && refused(r)).count();
    if at_once {
        assert_eq!(before, 1, "{reason}: recorded after {before} refused creates, not at the first");
    } else {
        assert_eq!(before, 3, "{reason}: recorded after {before} refused creates, not at the third");
    }
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_refused_as_outdated_fails_nothing_and_the_next_decision_writes_it() {
    // A status write whose Hikawa changed since the decision (a user's spec edit meeting a word
    // in flight) is refused by its resourceVersion precondition with 409. Here every status
    // patch is refused for a while: the words go on, nothing counts as a failed reconcile,
    // and once the writes pass the status agrees with the song.
    let cluster = Cluster::start().await;
    let operator = cluster.operator(wasm("zundoko-classic"), quick_settings());
    let names = vec!["outdated".to_string()];
    cluster.create_hikawa("default", "outdated", 50, &[]).await;
    cluster.wait_words("default", &names, 1, Duration::from_secs(30)).await;
    cluster.server.faults().set_refusal_rate("patch/hikawas", 409, 1.0);
    let refused = || cluster.server.requests().iter().filter(|r| r.resource == "hikawas" && r.subresource == "status" && r.code == 409).count();
    eventually("two status writes refused", Duration::from_secs(30), async || refused() >= 2).await;
    cluster.server.faults().set_refusal_rate("patch/hikawas", 409, 0.0);
    cluster.assert_songs_complete("default", &names, &zundoko_rules::classic(), Duration::from_secs(60)).await;
    let song = cluster.song("default", "outdated").await;
    let status = cluster.hikawas("default").get("outdated").await.unwrap().status.unwrap();
    assert_eq!((status.num_zundokos_said as usize, status.kiyoshied), (song.words.len(), true), "{status:?}");
    assert_eq!(operator.shared.metrics.reconcile_errors_total(), 0, "a status refused as outdated is not a failure: {} refused", refused());
    operator.stop().await;
}
