//! Rule sets (`ZundokoRules`) end to end against the local API server: several serving at
//! once, Hikawas choosing and switching, staged rollouts promoted and rolled back, refused
//! sources shown on the resource, and a rollout resumed by a restarted operator.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::cluster::{Cluster, Operator, quick_settings};
use common::rules::*;
use common::running::eventually;
use common::{fixture_bytes, module_bytes, with_custom_section};
use kube::api::{Patch, PatchParams};
use kube::ResourceExt;
use zundoko_operator::crd::{CandidateSpec, ModuleSource, ZundokoRulesSpec};
use zundoko_operator::supply::sources::digest;
use zundoko_rules::{classic, strict_japanese};

/// A cluster with the rules namespace and the operator, classic as its default module.
async fn start() -> (Cluster, Operator) {
    let cluster = Cluster::start().await;
    cluster.create_namespace(RULES_NS).await;
    let operator = cluster.operator(wasm(&module_bytes("zundoko-classic")), quick_settings());
    (cluster, operator)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_rule_sets_serve_their_own_hikawas_and_missing_rules_wait_until_they_exist() {
    let (cluster, operator) = start().await;
    let (classic_bytes, japanese_bytes) = (module_bytes("zundoko-classic"), module_bytes("zundoko-strict-ja"));
    cluster.put_configmap(RULES_NS, "rules-classic", &classic_bytes).await;
    cluster.put_configmap(RULES_NS, "rules-japanese", &japanese_bytes).await;
    // Named before it exists: waits, saying why.
    sing(&cluster, "early", 50, Some("later"), &[]).await;
    eventually("Ready=False RulesNotFound", Duration::from_secs(20), async || {
        ready(&cluster, "early").await.is_some_and(|(status, reason, _)| status == "False" && reason == "RulesNotFound")
    })
    .await;
    eventually("a Warning Event saying so", Duration::from_secs(10), async || {
        cluster.events_for("default", "early").await.iter().any(|e| e.reason.as_deref() == Some("RulesNotFound") && e.type_.as_deref() == Some("Warning"))
    })
    .await;
    assert!(cluster.song("default", "early").await.words.is_empty());

    create_rules(&cluster, "classic", plain("rules-classic")).await;
    create_rules(&cluster, "japanese", plain("rules-japanese")).await;
    let (classics, japanese) = (names("c", 3), names("j", 3));
    for name in &classics {
        sing(&cluster, name, 0, Some("classic"), &[]).await;
    }
    for name in &japanese {
        sing(&cluster, name, 0, Some("japanese"), &[]).await;
    }
    sing(&cluster, "plain", 0, None, &[]).await;
    cluster.assert_songs_complete("default", &classics, &classic(), Duration::from_secs(60)).await;
    cluster.assert_songs_complete("default", &japanese, &strict_japanese(), Duration::from_secs(60)).await;
    cluster.assert_songs_complete("default", &["plain".to_string()], &classic(), Duration::from_secs(60)).await;
    for name in &japanese {
        assert_eq!(decided_by(&cluster, name).await, Some(digest(&japanese_bytes)), "{name}");
    }
    let status = wait_rules(&cluster, "japanese", "3 Hikawas counted", |s| s.hikawas == 3).await;
    assert_eq!(status.phase.as_deref(), Some("Active"));
    let module = status.module.unwrap();
    assert_eq!((module.name.as_str(), module.digest), ("zundoko-strict-ja", digest(&japanese_bytes)));
    assert!(status.checked_at.is_some());
    assert!(rules_events(&cluster, "japanese").await.iter().any(|(reason, note)| reason == "ModuleServing" && note.contains("zundoko-strict-ja")));
    // Both rule sets share the engine; the classic module is compiled once for both its uses.
    let metrics = operator.shared.metrics.encode();
    assert!(metrics.contains("zundoko_ruleset_info{rules=\"japanese\",role=\"stable\",name=\"zundoko-strict-ja\""), "{metrics}");

    // The rules named at first come into being: the Hikawa that waited sings.
    create_rules(&cluster, "later", plain("rules-classic")).await;
    cluster.assert_songs_complete("default", &["early".to_string()], &classic(), Duration::from_secs(60)).await;
    assert_eq!(ready(&cluster, "early").await.unwrap().0, "True");
    // A rule set deleted: its Hikawas wait again, saying so.
    rules_api(&cluster).delete("japanese", &Default::default()).await.unwrap();
    sing(&cluster, "orphan", 0, Some("japanese"), &[]).await;
    eventually("Ready=False RulesNotFound after the delete", Duration::from_secs(20), async || {
        ready(&cluster, "orphan").await.is_some_and(|(_, reason, _)| reason == "RulesNotFound")
    })
    .await;
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hikawa_switching_rules_mid_song_finishes_it_by_the_new_rules() {
    let (cluster, operator) = start().await;
    cluster.put_configmap(RULES_NS, "rules-classic", &module_bytes("zundoko-classic")).await;
    cluster.put_configmap(RULES_NS, "rules-japanese", &module_bytes("zundoko-strict-ja")).await;
    create_rules(&cluster, "classic", plain("rules-classic")).await;
    create_rules(&cluster, "japanese", plain("rules-japanese")).await;
    let songs = names("switch", 4);
    for name in &songs {
        // A word every 300 ms: a classic song needs five words, so it is still going when
        // the switch comes after two.
        sing(&cluster, name, 300, Some("classic"), &[]).await;
    }
    cluster.wait_words("default", &songs, 2, Duration::from_secs(30)).await;
    let patch = serde_json::json!({ "spec": { "rules": "japanese" } });
    for name in &songs {
        cluster.hikawas("default").patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }
    cluster.wait_kiyoshied("default", &songs, Duration::from_secs(120)).await;
    for name in &songs {
        let song = cluster.song("default", name).await;
        assert!(song.assert_swapped(&classic(), &strict_japanese(), name), "{name}: the new rules sang the rest: {:?}", song.words);
    }
    assert_eq!(operator.shared.metrics.reconcile_errors_total(), 0, "no reconcile failed");
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_at_half_decides_for_exactly_its_share_then_is_promoted() {
    let (cluster, operator) = start().await;
    let stable = module_bytes("zundoko-classic");
    let candidate = with_custom_section(stable.clone(), 1);
    let (stable_digest, candidate_digest) = (digest(&stable), digest(&candidate));
    cluster.put_configmap(RULES_NS, "stable", &stable).await;
    cluster.put_configmap(RULES_NS, "candidate", &candidate).await;
    let spec = ZundokoRulesSpec {
        candidate: Some(CandidateSpec { source: source("candidate"), sha256: Some(candidate_digest.clone()), rollout: rollout(50, Some(6), None, 0) }),
        ..plain("stable")
    };
    create_rules(&cluster, "r", spec).await;
    // At least 12 Hikawas, and more until both modules have one (uids are random: 12 alone
    // would all fall on one side once in 2,000 runs; 64 in a row, never in practice).
    let mut songs = Vec::new();
    let mut share = BTreeMap::new();
    while songs.len() < 12 || !(share.values().any(|c| *c) && share.values().any(|c| !*c)) {
        assert!(songs.len() < 64, "{} uids all on one side of 50 %: {share:?}", songs.len());
        let name = format!("half-{}", songs.len());
        // A word every 300 ms: every song is still going after two words.
        let hikawa = sing(&cluster, &name, 300, Some("r"), &[]).await;
        share.insert(name.clone(), in_share(&hikawa.uid().unwrap(), 50));
        songs.push(name);
    }
    let expected = share.values().filter(|c| **c).count() as u32;
    cluster.wait_words("default", &songs, 2, Duration::from_secs(30)).await;
    let status = rules_status(&cluster, "r").await;
    assert_eq!(status.phase.as_deref(), Some("RollingOut"), "{status:?}");
    // Each Hikawa decided by the module its uid assigns it.
    for (name, candidate_decides) in &share {
        let by = decided_by(&cluster, name).await.unwrap();
        assert_eq!(by, if *candidate_decides { candidate_digest.clone() } else { stable_digest.clone() }, "{name}");
    }
    let status = wait_rules(&cluster, "r", "the candidate's share counted", |s| s.candidate_hikawas == Some(expected)).await;
    assert_eq!(status.hikawas as usize, songs.len());
    let rollout = status.rollout.unwrap();
    assert_eq!((rollout.digest.as_str(), rollout.state.as_str()), (candidate_digest.as_str(), "Progressing"));

    // Promoted after its window, without a restart: every Hikawa then decides by it.
    let status = wait_rules(&cluster, "r", "promotion", |s| s.phase.as_deref() == Some("Active") && s.module.as_ref().is_some_and(|m| m.digest == candidate_digest)).await;
    let rollout = status.rollout.unwrap();
    assert_eq!(rollout.state, "Promoted");
    assert!(rollout.decisions > 0 && rollout.failures == 0, "{rollout:?}");
    let events = rules_events(&cluster, "r").await;
    let reasons: Vec<&str> = events.iter().map(|e| e.0.as_str()).collect();
    assert!(reasons.contains(&"RolloutStarted") && reasons.contains(&"Promoted"), "{events:?}");
    cluster.assert_songs_complete("default", &songs, &classic(), Duration::from_secs(120)).await;
    for name in &songs {
        assert_eq!(decided_by(&cluster, name).await, Some(candidate_digest.clone()), "{name}: the last decision by the promoted module");
    }
    assert!(operator.shared.metrics.encode().contains("zundoko_rollouts_total{result=\"promoted\"} 1"));
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_candidate_is_rolled_back_at_its_threshold_and_every_song_stays_valid() {
    let (cluster, operator) = start().await;
    let (stable, flaky) = (module_bytes("zundoko-classic"), fixture_bytes("zundoko-flaky"));
    cluster.put_configmap(RULES_NS, "stable", &stable).await;
    cluster.put_configmap(RULES_NS, "flaky", &flaky).await;
    let spec = ZundokoRulesSpec {
        candidate: Some(CandidateSpec { source: source("flaky"), sha256: None, rollout: rollout(50, None, Some(10_000), 20) }),
        ..plain("stable")
    };
    create_rules(&cluster, "r", spec).await;
    wait_rules(&cluster, "r", "the rollout started", |s| s.phase.as_deref() == Some("RollingOut")).await;
    // Half the Hikawas trip the candidate (params.flaky), half do not: at least 16, and more
    // until 4 flaky ones are in the candidate's share. Uids are random: of 8 flaky ones, one
    // or none fell in the share in 1 run of 28, and then the failures came too slowly to pass
    // 20 % within the wait (77 of 433 in CI) or never came.
    let mut songs = Vec::new();
    let mut flaky_in_share = 0;
    while songs.len() < 16 || flaky_in_share < 4 {
        assert!(songs.len() < 96, "{flaky_in_share} of {} flaky uids in the candidate's 50 %", songs.len() / 2);
        let name = format!("fr-{}", songs.len());
        let flaky = songs.len() % 2 == 0;
        let params: &[(&str, &str)] = if flaky { &[("flaky", "yes")] } else { &[] };
        let hikawa = sing(&cluster, &name, 20, Some("r"), params).await;
        flaky_in_share += usize::from(flaky && in_share(&hikawa.uid().unwrap(), 50));
        songs.push(name);
    }
    let status = wait_rules(&cluster, "r", "the rollback", |s| s.phase.as_deref() == Some("RolledBack")).await;
    let rollout = status.rollout.clone().unwrap();
    assert_eq!(rollout.state, "RolledBack");
    // Stopped by the failure that took the rate past 20 %, not later.
    let (d, f) = (rollout.decisions, rollout.failures);
    println!("rolled back after {f} failures in {d} decisions (threshold 20 %)");
    assert!(f * 100 > 20 * d, "{f} failures of {d} are past 20 %");
    assert!((f - 1) * 100 <= 20 * (d - 1), "{} failures of {} were within 20 %: it was stopped later than needed", f - 1, d - 1);
    assert_eq!(status.reason.as_deref(), Some("FailureRateExceeded"));
    assert_eq!(status.module.as_ref().unwrap().digest, digest(&stable), "the stable module serves");
    let events = rules_events(&cluster, "r").await;
    assert!(events.iter().any(|(reason, note)| reason == "RolledBack" && note.contains(&format!("failed {f} of its {d}"))), "{events:?}");
    cluster.assert_songs_complete("default", &songs, &classic(), Duration::from_secs(120)).await;
    for name in &songs {
        assert_eq!(decided_by(&cluster, name).await, Some(digest(&stable)), "{name}: after the rollback the stable module decides");
        assert_eq!(ready(&cluster, name).await.unwrap().0, "True", "{name} recovered");
    }
    // Stopped at once for everyone: no decision counted after it.
    let after = rules_status(&cluster, "r").await.rollout.unwrap();
    assert_eq!((after.decisions, after.failures), (d, f));
    assert!(operator.shared.metrics.encode().contains("zundoko_rollouts_total{result=\"rolled-back\"} 1"));
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_source_is_shown_on_the_resource_while_the_old_module_serves() {
    let (cluster, operator) = start().await;
    let classic_bytes = module_bytes("zundoko-classic");
    cluster.put_configmap(RULES_NS, "rules", &classic_bytes).await;
    create_rules(&cluster, "r", plain("rules")).await;
    wait_rules(&cluster, "r", "Active", |s| s.phase.as_deref() == Some("Active")).await;
    // Garbage replaces the module.
    cluster.put_configmap(RULES_NS, "rules", b"not a wasm module at all").await;
    let status = wait_rules(&cluster, "r", "the rejection", |s| s.reason.as_deref() == Some("NotAComponent")).await;
    assert_eq!(status.phase.as_deref(), Some("Active"), "the old module still serves");
    assert_eq!(status.module.unwrap().digest, digest(&classic_bytes));
    let ready_condition = status.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert!(ready_condition.status == "True" && ready_condition.message.contains("refused"), "{ready_condition:?}");
    assert!(rules_events(&cluster, "r").await.iter().any(|(reason, _)| reason == "NotAComponent"));
    // Counted for alerts, once, by rule set and reason.
    let metrics = operator.shared.metrics.encode();
    assert!(metrics.contains("zundoko_ruleset_rejections_total{rules=\"r\",reason=\"NotAComponent\"} 1"), "{metrics}");
    sing(&cluster, "meanwhile", 0, Some("r"), &[]).await;
    cluster.assert_songs_complete("default", &["meanwhile".to_string()], &classic(), Duration::from_secs(60)).await;

    // A pin that the source's module does not match: nothing serves, and the Hikawas say why.
    let japanese = module_bytes("zundoko-strict-ja");
    cluster.put_configmap(RULES_NS, "pinned", &classic_bytes).await;
    create_rules(&cluster, "pinned", ZundokoRulesSpec { sha256: Some(digest(&japanese)), ..plain("pinned") }).await;
    let status = wait_rules(&cluster, "pinned", "the pin mismatch", |s| s.phase.as_deref() == Some("Rejected")).await;
    assert_eq!(status.reason.as_deref(), Some("ModulePinMismatch"));
    assert!(status.message.unwrap().contains(&digest(&japanese)));
    assert!(status.module.is_none());
    sing(&cluster, "waiting", 0, Some("pinned"), &[]).await;
    eventually("Ready=False RulesNotActive", Duration::from_secs(20), async || {
        ready(&cluster, "waiting").await.is_some_and(|(_, reason, message)| reason == "RulesNotActive" && message.contains("ModulePinMismatch"))
    })
    .await;
    // The right bytes arrive: it serves, and the Hikawa that waited sings.
    cluster.put_configmap(RULES_NS, "pinned", &japanese).await;
    cluster.assert_songs_complete("default", &["waiting".to_string()], &strict_japanese(), Duration::from_secs(60)).await;
    wait_rules(&cluster, "pinned", "Active once the pinned bytes arrive", |s| s.phase.as_deref() == Some("Active") && s.reason.is_none()).await;

    // A source outside the rules namespaces is refused, naming the allowed ones.
    let outside = ZundokoRulesSpec {
        source: ModuleSource::config_map("kube-system", "anything"),
        ..plain("x")
    };
    create_rules(&cluster, "outside", outside).await;
    let status = wait_rules(&cluster, "outside", "SourceNotAllowed", |s| s.reason.as_deref() == Some("SourceNotAllowed")).await;
    assert_eq!(status.phase.as_deref(), Some("Rejected"));
    assert!(status.message.unwrap().contains(RULES_NS));
    let metrics = operator.shared.metrics.encode();
    for (rules, reason) in [("pinned", "ModulePinMismatch"), ("outside", "SourceNotAllowed")] {
        assert!(metrics.contains(&format!("zundoko_ruleset_rejections_total{{rules=\"{rules}\",reason=\"{reason}\"}} 1")), "{metrics}");
    }
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_operator_resumes_a_rollout_from_the_resource() {
    let (cluster, operator) = start().await;
    let stable = module_bytes("zundoko-classic");
    let candidate = with_custom_section(stable.clone(), 2);
    cluster.put_configmap(RULES_NS, "stable", &stable).await;
    cluster.put_configmap(RULES_NS, "candidate", &candidate).await;
    const PROMOTE_AFTER: u64 = 150;
    let spec = ZundokoRulesSpec {
        candidate: Some(CandidateSpec { source: source("candidate"), sha256: None, rollout: rollout(100, None, Some(PROMOTE_AFTER), 0) }),
        ..plain("stable")
    };
    create_rules(&cluster, "r", spec).await;
    // 20 songs, a word every 500 ms each: about 40 decisions a second, 640 expected in all
    // (150 is short of that by more than three standard deviations).
    let songs = names("resume", 20);
    for name in &songs {
        sing(&cluster, name, 500, Some("r"), &[]).await;
    }
    let before = wait_rules(&cluster, "r", "30 decisions written down", |s| s.rollout.as_ref().is_some_and(|r| r.decisions >= 30)).await;
    operator.stop().await;
    let stopped = rules_status(&cluster, "r").await.rollout.unwrap();
    assert_eq!(stopped.state, "Progressing");

    // A new operator process: nothing in memory.
    let operator = cluster.operator(wasm(&module_bytes("zundoko-classic")), quick_settings());
    let status = wait_rules(&cluster, "r", "promotion", |s| s.rollout.as_ref().is_some_and(|r| r.state == "Promoted")).await;
    let promoted = status.rollout.unwrap();
    assert_eq!(promoted.started_at, before.rollout.unwrap().started_at, "the same rollout, not a new one");
    println!("stopped at {} decisions written down; promoted at {} in all (threshold {PROMOTE_AFTER})", stopped.decisions, promoted.decisions);
    // Counting went on from the status: promoted at 150 in all, not 150 more after the restart.
    assert!(promoted.decisions >= PROMOTE_AFTER, "{promoted:?}");
    assert!(promoted.decisions < stopped.decisions + PROMOTE_AFTER, "counted afresh after the restart: {promoted:?}, {} before", stopped.decisions);
    assert_eq!(status.module.unwrap().digest, digest(&candidate));
    cluster.assert_songs_complete("default", &songs, &classic(), Duration::from_secs(120)).await;
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_rewritten_in_a_loop_is_read_at_most_once_a_second() {
    let (cluster, operator) = start().await;
    let base = module_bytes("zundoko-classic");
    cluster.put_configmap(RULES_NS, "churn", &base).await;
    create_rules(&cluster, "r", plain("churn")).await;
    wait_rules(&cluster, "r", "Active", |s| s.phase.as_deref() == Some("Active")).await;
    // 40 new modules, each with other bytes, one every 75 ms for 3 s.
    let started = std::time::Instant::now();
    let mut last = base;
    for n in 0..40 {
        last = with_custom_section(module_bytes("zundoko-classic"), 1_000 + n);
        cluster.put_configmap(RULES_NS, "churn", &last).await;
        tokio::time::sleep(Duration::from_millis(75)).await;
    }
    let took = started.elapsed();
    let status = wait_rules(&cluster, "r", "the last module serving", |s| s.module.as_ref().is_some_and(|m| m.digest == digest(&last))).await;
    assert_eq!(status.phase.as_deref(), Some("Active"));
    // Each read of the ConfigMap's data is a get (its changes are watched by metadata).
    let reads = cluster.server.requests().iter().filter(|r| r.verb == "get" && r.resource == "configmaps" && r.name == "churn").count();
    // The first module, then at most one a second while the rewrites went on, and the last.
    let bound = 2 + took.as_secs_f64().ceil() as usize;
    println!("40 rewrites in {took:?}: the ConfigMap read {reads} times");
    assert!(reads <= bound, "{reads} reads for 40 rewrites in {took:?} (bound {bound})");
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollouts_status_is_written_at_most_once_a_second_while_its_counts_change() {
    let (cluster, operator) = start().await;
    let stable = module_bytes("zundoko-classic");
    cluster.put_configmap(RULES_NS, "stable", &stable).await;
    cluster.put_configmap(RULES_NS, "candidate", &with_custom_section(stable, 1)).await;
    // Every Hikawa decided by the candidate, never promoted: its count changes at every word.
    start_rollout(&cluster, "r", "candidate", rollout(100, None, Some(1_000_000), 100)).await;
    let songs = names("busy", 12);
    for name in &songs {
        sing(&cluster, name, 100, Some("r"), &[]).await;
    }
    cluster.assert_songs_complete("default", &songs, &classic(), Duration::from_secs(120)).await;
    // The status after the last decision is written within a second or so: wait for its count.
    let words: usize = futures::future::join_all(songs.iter().map(|n| cluster.song("default", n))).await.iter().map(|s| s.words.len() + 1).sum();
    let status = wait_rules(&cluster, "r", "every decision counted", |s| s.rollout.as_ref().is_some_and(|r| counted(r).0 >= words as u64)).await;
    let decisions = counted(&status.rollout.unwrap()).0;
    let writes: Vec<std::time::SystemTime> = cluster
        .server
        .requests()
        .iter()
        .filter(|r| r.verb == "patch" && r.resource == "zundokorules" && r.subresource == "status" && r.name == "r" && r.code == 200)
        .map(|r| r.at)
        .collect();
    let span = writes.last().unwrap().duration_since(writes[0]).unwrap();
    // The control: the counts changed at every one of many decisions, over several seconds.
    assert!(decisions >= 100 && span >= Duration::from_secs(3), "{decisions} decisions, status writes over {span:?}");
    // At most one write a second: in a span of s seconds, s + 1 writes (one more for a write
    // whose answer came back late, the next one timed from then).
    let bound = 2 + span.as_secs_f64().floor() as usize;
    println!("{decisions} decisions counted in {} status writes over {span:?}", writes.len());
    assert!(writes.len() <= bound, "{} status writes in {span:?} (bound {bound}) for {decisions} decisions", writes.len());
    operator.stop().await;
}
