//! Active-active replicas: `zundoko-operator run` processes with the Deployment's environment
//! (32 shards) against the local API server. Every replica works on its fair share of the
//! shards, decides only for them, and a shard changes hands only after its holder's writes:
//! scaled 1 -> 3 -> 2, a replica killed mid-song or cut off, every song stays valid with each
//! word said once; a rollout spread over three replicas ends as with one. Each test runs three
//! operator processes: one test at a time.
//!
//! Durations here (Replica::spawn): lease 4 s, renew deadline 3 s, retry 0.5 s, API timeout 1.5 s.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::replica::{NS, Replica, Setup, assert_each_word_once, said_events, setup, song_write, songs, spawn_three, wait_each_word_said_once};
use common::rules::*;
use common::{fixture_bytes, module_bytes, with_custom_section};
use zundoko_operator::crd::Counted;
use zundoko_operator::supply::sources::digest;
use common::running::eventually;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use zundoko_operator::process::leader::assign;
use zundoko_rules::classic;

const SHARDS: u16 = 32;

/// Three operator processes per test on a shared machine: the tests of this file one at a time.
async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    ALONE.lock().await
}
const LEASE: Duration = Duration::from_secs(4);
const RETRY: Duration = Duration::from_millis(500);

/// Who holds each shard Lease now (an empty holder is none).
async fn holders(cluster: &Cluster) -> BTreeMap<u16, String> {
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), NS);
    let mut held = BTreeMap::new();
    for lease in leases.list(&ListParams::default()).await.unwrap() {
        let name = lease.name_any();
        let Some(shard) = (0..SHARDS).find(|&s| assign::lease_name("zundoko-operator", s, SHARDS) == name) else { continue };
        if let Some(holder) = lease.spec.and_then(|s| s.holder_identity).filter(|h| !h.is_empty()) {
            held.insert(shard, holder);
        }
    }
    held
}

fn held(replica: &Replica) -> usize {
    replica.metric("zundoko_shards_held ").unwrap_or(0.0) as usize
}

/// Every shard held, each live replica at its fair share (ceil(32 / n)) or one below it.
async fn balanced(replicas: &[&Replica]) -> bool {
    let fair = assign::fair_share(SHARDS, replicas.len());
    let counts: Vec<usize> = replicas.iter().map(|r| held(r)).collect();
    counts.iter().sum::<usize>() == SHARDS as usize && counts.iter().all(|&c| c + 1 >= fair && c <= fair)
}

/// One test at a time: three replicas on a fresh API server, once they share the shards.
async fn three_replicas(what: &str) -> (tokio::sync::MutexGuard<'static, ()>, Setup, Vec<Replica>) {
    let alone = one_at_a_time().await;
    let setup = setup(what, true).await;
    let replicas = spawn_three(&setup);
    let all: Vec<&Replica> = replicas.iter().collect();
    let started = Instant::now();
    eventually("the shards balanced over three replicas", Duration::from_secs(60), async || balanced(&all).await).await;
    println!("balanced 10/11/11 {:?} after the three started", started.elapsed());
    (alone, setup, replicas)
}

/// `wait_rules`, but a timeout shows the status and what each replica logged about rule sets.
async fn wait_rules_or_show_logs(
    replicas: &[Replica],
    cluster: &Cluster,
    name: &str,
    what: &str,
    check: impl Fn(&zundoko_operator::crd::ZundokoRulesStatus) -> bool,
) -> zundoko_operator::crd::ZundokoRulesStatus {
    let started = Instant::now();
    loop {
        let status = rules_status(cluster, name).await;
        if check(&status) {
            return status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            for r in replicas {
                let log = r.log();
                let lines: Vec<&str> = log.lines().filter(|l| l.contains("rule") || l.contains("shard")).collect();
                eprintln!("--- {} ({} lines about rule sets and shards, the last 80) ---", r.name, lines.len());
                for line in &lines[lines.len().saturating_sub(80)..] {
                    eprintln!("{line}");
                }
            }
            panic!("timed out after 30 s waiting for {what}; the status: {status:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn decisions(replica: &Replica) -> f64 {
    replica.metric("zundoko_guest_call_duration_seconds_count ").unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_share_300_hikawas_each_deciding_for_its_own_shards_only() {
    let (_alone, setup, replicas) = three_replicas("shards").await;
    let cluster = &setup.cluster;
    // `kubectl get lease` shows who holds what: the Leases agree with the replicas.
    let leases = holders(cluster).await;
    assert_eq!(leases.len(), SHARDS as usize, "{leases:?}");
    for r in &replicas {
        assert_eq!(leases.values().filter(|h| **h == r.name).count(), held(r), "{}'s Leases", r.name);
        let (code, body) = r.get("/readyz").unwrap();
        assert_eq!(code, 200, "{body}");
        assert!(body.contains(&format!("of {SHARDS} shards")), "{body}");
    }

    // Short songs (Zun Zun Doko), all at once.
    let names: Vec<String> = (0..300).map(|i| format!("s-{i:03}")).collect();
    for chunk in names.chunks(30) {
        futures::future::join_all(chunk.iter().map(|n| cluster.create_hikawa("default", n, 0, &[("zuns", "2")]))).await;
    }
    let rules = zundoko_rules::RuleSet { zuns: 2, ..classic() };
    cluster.assert_songs_complete("default", &names, &rules, Duration::from_secs(240)).await;
    // A song's last status and its Kiyoshi's Said Event are sent together: the Event may land
    // just after the status says kiyoshied.
    wait_each_word_said_once(cluster, &names).await;
    let sung = songs(cluster, &names).await;

    // Each Hikawa was decided by the holder of its shard, and named it in its status; every
    // word's Event came from that holder.
    let leases = holders(cluster).await;
    let mut expected: BTreeMap<String, f64> = BTreeMap::new();
    let mut owner_of: BTreeMap<String, String> = BTreeMap::new();
    let api = cluster.hikawas("default");
    for ((name, song), hikawa) in sung.iter().zip(futures::future::join_all(names.iter().map(|n| api.get(n))).await) {
        let hikawa = hikawa.unwrap();
        let shard = assign::shard_of(&hikawa.uid().unwrap(), SHARDS);
        let holder = leases[&shard].clone();
        assert_eq!(hikawa.status.as_ref().and_then(|s| s.decided_by.clone()).as_deref(), Some(holder.as_str()), "{name}");
        // One decision per word and one for the Kiyoshi.
        *expected.entry(holder.clone()).or_default() += (song.words.len() + 1) as f64;
        owner_of.insert(name.clone(), holder);
    }
    for event in said_events(cluster).await {
        let hikawa = event.regarding.as_ref().and_then(|r| r.name.clone()).unwrap_or_default();
        if let Some(holder) = owner_of.get(&hikawa) {
            assert_eq!(event.reporting_instance.as_deref(), Some(holder.as_str()), "{hikawa}'s word said by another replica");
        }
    }
    // Every decision a replica logged was for a Hikawa of its shards.
    let total: f64 = expected.values().sum();
    for r in &replicas {
        let log = r.log();
        let decided: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(" decided "))
            .filter_map(|l| l.split("reconcile{hikawa=default/").nth(1)?.split('}').next())
            .collect();
        let strangers: BTreeSet<&str> = decided.iter().copied().filter(|h| owner_of.get(*h) != Some(&r.name)).collect();
        assert!(strangers.is_empty(), "{} decided for Hikawas of shards it does not hold: {strangers:?}", r.name);
        let (made, due) = (decisions(r), expected.get(&r.name).copied().unwrap_or(0.0));
        println!("{}: {} shards, {made} decisions for {due} words and Kiyoshis of its Hikawas ({:.0} % of a third)", r.name, held(r), made / (total / 3.0) * 100.0);
        assert_eq!(decided.len() as f64, made, "every decision logged");
        assert!(made >= due, "{}: {made} decisions for {due} words", r.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaled_1_3_2_and_a_replica_killed_mid_song_nothing_is_said_twice() {
    let _alone = one_at_a_time().await;
    let setup = setup("shard-moves", true).await;
    let cluster = &setup.cluster;
    let missing = setup.dir.join("no-module-file-here.wasm");
    let spawn = |name: &str| Replica::spawn(name, &setup.kubeconfig, &setup.env, &missing, &setup.dir);
    let mut names: Vec<String> = Vec::new();
    let sing = async |names: &mut Vec<String>, from: usize| {
        for i in from..from + 12 {
            let name = format!("m-{i:02}");
            cluster.create_hikawa("default", &name, 150, &[]).await;
            names.push(name);
        }
    };

    // One replica: every shard.
    let a = spawn("operator-a");
    eventually("one replica holding every shard", Duration::from_secs(30), async || held(&a) == SHARDS as usize).await;
    sing(&mut names, 0).await;
    cluster.wait_words("default", &names, 2, Duration::from_secs(60)).await;

    // Scaled to three during the songs: shards move one at a time, drained first.
    let b = spawn("operator-b");
    let c = spawn("operator-c");
    let scaled = Instant::now();
    eventually("three replicas balanced", Duration::from_secs(60), async || balanced(&[&a, &b, &c]).await).await;
    println!("1 -> 3: balanced {:?} after the two started", scaled.elapsed());
    sing(&mut names, 12).await;
    let handovers = |r: &Replica| r.metric("zundoko_shard_handovers_total{reason=\"released\"} ").unwrap_or(0.0);
    assert!(handovers(&a) >= 20.0, "a handed back its extra shards: {}", handovers(&a));

    // Scaled down to two: c leaves gracefully, handing its shards back at once, and leaving
    // the members before it exits: the others' fair share is of two at once, not once c's
    // beat is a lease duration old (until then they would take 11 shards each, not 16). Read
    // as soon as c exited, well within that lease duration of its last beat.
    c.terminate();
    let left = Instant::now();
    let mut c = c;
    eventually("c exiting", Duration::from_secs(30), async || c.child.try_wait().unwrap().is_some()).await;
    let members: Api<Lease> = Api::namespaced(cluster.client.clone(), NS);
    let lease = members.get(&assign::members_lease_name("zundoko-operator")).await.unwrap();
    let beats = lease.annotations().get(zundoko_operator::process::leader::members::MEMBERS_ANNOTATION).cloned().unwrap_or_default();
    println!("3 -> 2: c exited {:?} after SIGTERM; the members then: {beats}", left.elapsed());
    assert!(!beats.contains("operator-c"), "c is still a member after it exited: {beats}\n{}", c.log());
    eventually("two replicas balanced", Duration::from_secs(30), async || balanced(&[&a, &b]).await).await;
    println!("3 -> 2: balanced {:?} after SIGTERM", left.elapsed());
    assert!(c.log().contains("handed every shard back"), "{}", c.log());

    // b is killed mid-song: its shards are served again within a lease duration and a retry.
    sing(&mut names, 24).await;
    let mut b = b;
    let b_shards: BTreeSet<u16> = holders(cluster).await.into_iter().filter(|(_, h)| *h == b.name).map(|(s, _)| s).collect();
    assert!(!b_shards.is_empty());
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    let killed = jiff::Timestamp::now();
    eventually("a holding every shard again", Duration::from_secs(30), async || held(&a) == SHARDS as usize).await;
    // When a took each of b's shards, by the Leases' acquireTime (written by a).
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), NS);
    let mut taken = Duration::ZERO;
    for shard in &b_shards {
        let lease = leases.get(&assign::lease_name("zundoko-operator", *shard, SHARDS)).await.unwrap().spec.unwrap();
        assert_eq!(lease.holder_identity.as_deref(), Some(a.name.as_str()));
        let acquired = lease.acquire_time.unwrap().0;
        taken = taken.max(Duration::try_from(acquired.duration_since(killed)).unwrap_or_default());
    }
    println!("kill -9: b's {} shards all taken {taken:?} after the kill (lease {LEASE:?}, retry {RETRY:?})", b_shards.len());
    // A shard's expiry runs from when a last saw its record change, which it reads every retry
    // period: a lease duration and a retry period after the kill at most (b's last renewal came
    // before it), and the moment to take it. (A protocol bound, loose for a loaded machine: a
    // takeover that waited for the members to notice too would take a lease duration more.)
    assert!(taken <= LEASE + RETRY + Duration::from_millis(1500), "b's shards taken only {taken:?} after the kill:\n{}", a.log());

    cluster.assert_songs_complete("default", &names, &classic(), Duration::from_secs(180)).await;
    assert_each_word_once(cluster, &songs(cluster, &names).await).await;
    let reasons = |r: &Replica| {
        ["taken", "released", "lost"].map(|reason| r.metric(&format!("zundoko_shard_handovers_total{{reason=\"{reason}\"}} ")).unwrap_or(0.0))
    };
    println!("handovers (taken, released, lost): a {:?}", reasons(&a));
    assert_eq!(reasons(&a)[2], 0.0, "a never lost a shard:\n{}", a.log());
    assert_eq!(a.metric("zundoko_reconcile_errors_total"), None, "{}", a.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_replica_stops_writing_for_its_shards_and_takes_its_share_again_once_healed() {
    // The network holds what a sends and delivers it when it heals: its writes land late,
    // long after b and c took its shards, and must change nothing.
    const RENEW_DEADLINE: Duration = Duration::from_secs(3);
    let (_alone, setup, replicas) = three_replicas("shard-partition").await;
    let cluster = &setup.cluster;
    let (a, b, c) = (&replicas[0], &replicas[1], &replicas[2]);
    let mut names: Vec<String> = (0..15).map(|i| format!("q-{i:02}")).collect();
    for name in &names {
        cluster.create_hikawa("default", name, 200, &[]).await;
    }
    // Songs that go on for the whole test: every shard has someone writing.
    for i in 0..6 {
        let name = format!("long-{i}");
        cluster.create_hikawa("default", &name, 150, &[("zuns", "16")]).await;
    }
    cluster.wait_words("default", &names, 2, Duration::from_secs(60)).await;
    let a_shards = held(a);

    // a is cut off: its requests are accepted and never answered; its writes land at the heal.
    let cut_wall = std::time::SystemTime::now();
    let cut = Instant::now();
    let client = format!("({})", a.name);
    cluster.server.faults().partition_late(&client);
    eventually("a stops deciding for its shards", Duration::from_secs(15), async || held(a) == 0).await;
    let stood_down = cut.elapsed();
    eventually("b and c hold every shard", Duration::from_secs(30), async || balanced(&[b, c]).await).await;
    let taken = cut.elapsed();
    println!("partition: a stood down from its {a_shards} shards {stood_down:?} after the cut, b and c held all 32 {taken:?} after it");
    // It stops at its renew deadline; what must hold is that it stopped before its Lease
    // could expire and another replica take it: the lease duration, a second more, is the
    // margin for a loaded machine (and for reading its metric).
    assert!(stood_down <= LEASE, "a stood down only {stood_down:?} after the cut:\n{}", a.log());
    // More songs while a is away: b and c sing them.
    for i in 15..21 {
        let name = format!("q-{i:02}");
        cluster.create_hikawa("default", &name, 200, &[]).await;
        names.push(name);
    }

    // Three lease durations, then healed: a beats again, the others hand shards back, a takes
    // its share.
    tokio::time::sleep((cut + 3 * LEASE).saturating_duration_since(Instant::now())).await;
    let healed_wall = std::time::SystemTime::now();
    cluster.server.faults().heal(&client);
    let healed = Instant::now();
    eventually("three replicas balanced again", Duration::from_secs(60), async || balanced(&[a, b, c]).await).await;
    println!("healed: balanced over three {:?} after", healed.elapsed());

    // None of a's song writes sent after the cut was served, none started after its renew
    // deadline, and none before it took shards again after healing.
    let deadline = cut_wall + RENEW_DEADLINE;
    for r in cluster.server.requests().iter().filter(|r| r.user_agent.contains(&client) && song_write(r) && !r.late) {
        if r.at >= cut_wall && r.at < healed_wall {
            assert_eq!(r.code, 0, "a write of the cut-off replica was served: {r:?}");
            assert!(r.at <= deadline, "a write started after the renew deadline: {r:?}");
        }
    }
    assert!(a.log().contains("stopped leading"), "{}", a.log());
    cluster.assert_songs_complete("default", &names, &classic(), Duration::from_secs(120)).await;
    // What a held landed at the heal, when b and c had long gone on: no child of it was
    // created and no status of it written (each refused: the child's name is taken, the
    // status's resourceVersion is old); its Events are named per word, so at most one lands.
    let late: Vec<_> = cluster.server.requests().into_iter().filter(|r| r.late && r.user_agent.contains(&client) && song_write(r)).collect();
    let mut tally: BTreeMap<(String, String, u16), usize> = BTreeMap::new();
    for r in &late {
        *tally.entry((r.resource.clone(), r.subresource.clone(), r.code)).or_default() += 1;
    }
    println!("a's held song writes landed late at the heal (resource, subresource, code): {tally:?}");
    // The positive control: a wrote after the cut (its fence lets writes start until a
    // request timeout before its renew deadline, 1 to 1.5 s after the cut when its renewals
    // are on time). Usually children (6 to 8 Zundokos here), but which write of a word comes
    // first after the cut is chance: a loaded CI machine held one status patch and nothing else.
    assert!(!late.is_empty(), "a sent no song write after the cut, so nothing here was tested:\n{}", a.log());
    for r in late.iter().filter(|r| r.resource != "events") {
        assert_eq!(r.code, 409, "a write that landed late changed a song: {r:?}");
    }
    assert_each_word_once(cluster, &songs(cluster, &names).await).await;
    // Every status agrees with its song: none was undone by a late write.
    let hikawas = cluster.hikawas("default").list(&ListParams::default()).await.unwrap();
    for h in hikawas.items.iter().filter(|h| names.contains(&h.name_any())) {
        let song = cluster.song("default", &h.name_any()).await;
        let status = h.status.clone().unwrap_or_default();
        assert_eq!((status.num_zundokos_said as usize, status.kiyoshied), (song.words.len(), song.kiyoshis.len() == 1), "{}: {status:?}", h.name_any());
    }
    let lost = a.metric("zundoko_shard_handovers_total{reason=\"lost\"} ").unwrap_or(0.0);
    assert_eq!(lost as usize, a_shards, "a lost each of its shards once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_spread_over_three_replicas_promotes_and_rolls_back_as_with_one() {
    let (_alone, setup, replicas) = three_replicas("rollout-replicas").await;
    let cluster = &setup.cluster;

    // Promotion by decisions, counted over every replica.
    let stable = module_bytes("zundoko-classic");
    let candidate = with_custom_section(stable.clone(), 1);
    let candidate_digest = digest(&candidate);
    cluster.put_configmap(RULES_NS, "stable", &stable).await;
    cluster.put_configmap(RULES_NS, "candidate", &candidate).await;
    start_rollout(cluster, "p", "candidate", rollout(50, None, Some(40), 0)).await;
    let songs = names("p", 24);
    for name in &songs {
        sing(cluster, name, 100, Some("p"), &[]).await;
    }
    let status = wait_rules_or_show_logs(&replicas, cluster, "p", "promotion", |s| s.rollout.as_ref().is_some_and(|r| r.state == "Promoted")).await;
    let promoted = status.rollout.unwrap();
    let (entries, _) = counted(&promoted);
    let counting = promoted.replicas.values().filter(|c| c.decisions > 0).count();
    println!("promoted after {} decisions, counted by {counting} replicas ({entries} in their entries): {:?}", promoted.decisions, promoted.replicas);
    assert!(promoted.decisions >= 40 && promoted.failures == 0, "{promoted:?}");
    assert!(counting >= 2, "the candidate's Hikawas are spread over the replicas, and so are its decisions: {promoted:?}");
    assert!(entries >= promoted.decisions, "the sum of what the replicas counted: {promoted:?}");
    assert_eq!(status.module.unwrap().digest, candidate_digest);
    cluster.assert_songs_complete("default", &songs, &classic(), Duration::from_secs(120)).await;

    // Rolled back past its failure rate, counted over every replica: the failures are made
    // where the rule set's status is not written, and the writer's own decisions are good.
    cluster.put_configmap(RULES_NS, "flaky", &fixture_bytes("zundoko-flaky")).await;
    start_rollout(cluster, "f", "flaky", rollout(50, None, Some(10_000), 20)).await;
    // The rollout started where its status is written; a replica whose cache did not show the
    // flaky ConfigMap yet serves the stable module alone until it does (up to a second).
    let flaky_digest = digest(&fixture_bytes("zundoko-flaky"));
    let serves_candidate = |r: &Replica| {
        let (_, text) = r.get("/metrics").unwrap_or_default();
        text.lines().any(|l| l.starts_with("zundoko_ruleset_info{rules=\"f\",role=\"candidate\"") && l.contains(&flaky_digest))
    };
    eventually("every replica serving the flaky candidate", Duration::from_secs(30), async || replicas.iter().all(serves_candidate)).await;
    let leases = holders(cluster).await;
    let writer = leases[&assign::shard_of_rules("f", SHARDS)].clone();
    // Each song says its first word, then waits a minute: long enough to learn where it is
    // decided. Those the candidate decides on another replica than the writer turn flaky and
    // quick (they fail from their second word on, and retry with backoff); the others walk.
    // At least 16 songs, and more until one is decided by the candidate away from the writer
    // (a uid does so with a chance of 1/3: 16 alone would have none once in 650 runs).
    let mut songs = Vec::new();
    let mut flaky = vec![];
    while songs.len() < 16 || flaky.is_empty() {
        assert!(songs.len() < 64, "none of {songs:?} is decided by the candidate away from {writer}: the test needs one");
        let name = format!("f-{}", songs.len());
        let uid = sing(cluster, &name, 60_000, Some("f"), &[]).await.uid().unwrap();
        if in_share(&uid, 50) && leases[&assign::shard_of(&uid, SHARDS)] != writer {
            flaky.push(name.clone());
        }
        songs.push(name);
    }
    for name in &songs {
        let spec = if flaky.contains(name) { serde_json::json!({ "intervalMillis": 20, "params": { "flaky": "yes" } }) } else { serde_json::json!({ "intervalMillis": 250 }) };
        let patch = kube::api::Patch::Merge(serde_json::json!({ "spec": spec }));
        cluster.hikawas("default").patch(name, &kube::api::PatchParams::default(), &patch).await.unwrap();
    }
    let failing_since = Instant::now();
    let status = wait_rules_or_show_logs(&replicas, cluster, "f", "the rollback", |s| s.phase.as_deref() == Some("RolledBack")).await;
    let rolled_back = status.rollout.clone().unwrap();
    let (d, f) = (rolled_back.decisions, rolled_back.failures);
    println!(
        "rolled back {:?} after the flaky songs began, on {f} failures in {d} decisions (threshold 20 %; the writer {writer}, {} flaky elsewhere): {:?}",
        failing_since.elapsed(),
        flaky.len(),
        rolled_back.replicas
    );
    assert!(f * 100 > 20 * d, "{f} failures of {d} are past 20 %");
    // Recorded on the sum a replica judged (written into its entry), as one replica would have.
    let judged = Some(Counted { decisions: d, failures: f });
    assert!(rolled_back.replicas.values().any(|c| c.failed_too_often == judged), "{rolled_back:?}");
    assert_eq!(status.reason.as_deref(), Some("FailureRateExceeded"));
    assert_eq!(status.module.as_ref().unwrap().digest, digest(&stable), "the stable module serves");
    cluster.assert_songs_complete("default", &songs, &classic(), Duration::from_secs(120)).await;
    for name in &songs {
        assert_eq!(decided_by(cluster, name).await, Some(digest(&stable)), "{name}: after the rollback the stable module decides");
    }

    // One writer per rule set: each outcome said once, and counted once over the replicas.
    for (rules, reason) in [("p", "Promoted"), ("f", "RolledBack")] {
        let said = rules_events(cluster, rules).await.iter().filter(|(r, _)| r == reason).count();
        assert_eq!(said, 1, "{rules}: one {reason} Event");
    }
    let total = |result: &str| -> f64 {
        replicas.iter().map(|r| r.metric(&format!("zundoko_rollouts_total{{result=\"{result}\"}} ")).unwrap_or(0.0)).sum()
    };
    assert_eq!((total("promoted"), total("rolled-back")), (1.0, 1.0));
}
