//! Leadership that knows when it has lost it, with replicas as the cluster runs them
//! (`zundoko-operator run` processes, each its own User-Agent) against the local API server's
//! network faults: a leader cut off from the API server (requests accepted, never answered)
//! stops writing within its renew deadline, and once the partition heals it finds the Lease
//! held and stands by; connections cut every second; a 429 storm; a start while the API server
//! is down; a kubeconfig that can never work.
//!
//! Durations here (Replica::spawn): lease 4 s, renew deadline 3 s, retry 0.5 s, API timeout 1.5 s.

mod common;

use std::time::{Duration, Instant, SystemTime};

use common::cluster::Cluster;
use common::module_bytes;
use common::replica::{LEADER_LEASE, NS, ONE_SHARD, Replica, Setup, assert_each_word_once, setup, song_write, songs};
use common::running::eventually;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, ObjectMeta, PostParams};
use zundoko_apiserver::{ApiServer, RequestRecord, ServerConfig};
use zundoko_rules::classic;

const RENEW_DEADLINE: Duration = Duration::from_secs(3);
const LEASE: Duration = Duration::from_secs(4);

/// The cluster as `make deploy` leaves it, and two replicas serving the module from its
/// ConfigMap.
async fn two_replicas(what: &str) -> (Setup, Replica, Replica) {
    let setup = setup(what, true).await;
    let missing = setup.dir.join("no-module-file-here.wasm");
    let a = Replica::spawn_with("operator-a", &setup.kubeconfig, &setup.env, ONE_SHARD, &missing, &setup.dir);
    let b = Replica::spawn_with("operator-b", &setup.kubeconfig, &setup.env, ONE_SHARD, &missing, &setup.dir);
    (setup, a, b)
}

async fn holder(cluster: &Cluster) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), NS);
    leases.get_opt(LEADER_LEASE).await.ok()??.spec?.holder_identity
}

fn leading(replica: &Replica) -> bool {
    replica.metric("zundoko_leader ") == Some(1.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_leader_stops_writing_within_its_renew_deadline_and_stands_by_once_healed() {
    let (setup, a, b) = two_replicas("partition").await;
    let cluster = &setup.cluster;
    let names: Vec<String> = (0..4).map(|i| format!("p-{i}")).collect();
    for name in &names {
        cluster.create_hikawa("default", name, 300, &[]).await;
    }
    // One song that does not end during the test: someone is always writing.
    cluster.create_hikawa("default", "endless", 150, &[("zuns", "16")]).await;
    cluster.wait_words("default", &["endless".to_string()], 3, Duration::from_secs(60)).await;
    let first = holder(cluster).await.expect("a holder");
    let (leader, standby) = if first == a.name { (a, b) } else { (b, a) };
    eventually("the leader's metric", Duration::from_secs(10), async || leading(&leader)).await;

    // Cut the leader off: its requests are accepted and never answered.
    let cut_wall = SystemTime::now();
    let cut = Instant::now();
    let client = format!("({})", leader.name);
    cluster.server.faults().partition(&client);
    eventually("the cut-off leader standing down", Duration::from_secs(15), async || !leading(&leader)).await;
    let stood_down = cut.elapsed();
    eventually("the standby leading", Duration::from_secs(30), async || leading(&standby)).await;
    let took_over = cut.elapsed();
    let words_at_takeover = cluster.song("default", "endless").await.words.len();
    eventually("the standby singing", Duration::from_secs(15), async || {
        cluster.song("default", "endless").await.words.len() > words_at_takeover
    })
    .await;

    // Three lease durations cut off, then healed.
    tokio::time::sleep((cut + 3 * LEASE).saturating_duration_since(Instant::now())).await;
    let healed_wall = SystemTime::now();
    cluster.server.faults().heal(&client);
    // Several retry periods: it reads the Lease held by the standby and stands by.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after_heal = holder(cluster).await;

    println!(
        "partition: the leader stood down {stood_down:?} after the cut (renew deadline {RENEW_DEADLINE:?}), the standby led {took_over:?} after it (lease {LEASE:?})"
    );
    // It stops at its renew deadline; what must hold is that it stopped before its Lease
    // could expire and another replica take it: the lease duration, a second more, is the
    // margin for a loaded machine (and for reading its metric).
    assert!(stood_down <= LEASE, "stood down only {stood_down:?} after the cut:\n{}", leader.log());
    assert!(!leading(&leader), "the healed replica took the lead back:\n{}", leader.log());
    assert!(leading(&standby));
    assert_eq!(after_heal.as_deref(), Some(standby.name.as_str()), "the Lease after the partition healed");
    assert!(leader.log().contains("stopped leading"), "{}", leader.log());

    // Nothing the cut-off replica sent after the cut landed; no write of its started after the
    // deadline; nothing of it landed after the healing.
    let deadline = cut_wall + RENEW_DEADLINE;
    for r in cluster.server.requests().iter().filter(|r| r.user_agent.contains(&client)) {
        if song_write(r) && r.at >= cut_wall {
            assert_eq!(r.code, 0, "a write of the cut-off replica was served: {r:?}");
            assert!(r.at <= deadline, "a write started after the renew deadline: {r:?}");
        }
        // After healing: only its own Pod's Events and its beat in the members Lease.
        if r.at >= healed_wall && r.verb != "get" && r.verb != "list" && r.verb != "watch" {
            let beat = r.resource == "leases" && r.name == "zundoko-operator-members";
            assert!((r.resource == "events" && r.namespace == NS) || beat, "the healed replica wrote: {r:?}");
        }
    }

    cluster.assert_songs_complete("default", &names, &classic(), Duration::from_secs(120)).await;
    assert_each_word_once(cluster, &songs(cluster, &names).await).await;
    // The song that goes on: no index twice, none missing.
    let endless = cluster.song("default", "endless").await;
    assert_eq!(endless.indexes, (1..=endless.words.len() as u32).collect::<Vec<_>>(), "endless: indexes");
    // Its Pod tells why, once it could reach the API server again.
    eventually("the LeaderLost Event on the cut-off replica's Pod", Duration::from_secs(30), async || {
        let events: Api<Event> = Api::namespaced(cluster.client.clone(), NS);
        events.list(&ListParams::default()).await.unwrap().items.iter().any(|e| {
            e.reason.as_deref() == Some("LeaderLost")
                && e.type_.as_deref() == Some("Warning")
                && e.regarding.as_ref().is_some_and(|r| r.kind.as_deref() == Some("Pod") && r.name.as_deref() == Some(leader.name.as_str()))
        })
    })
    .await;
    let failures = leader.metric("zundoko_lease_renew_failures_total ").unwrap_or(0.0);
    assert!(failures >= 1.0, "renewals that failed are counted: {failures}");
    assert!(standby.metric("zundoko_lease_last_renew_timestamp_seconds ").unwrap_or(0.0) > 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connection_cut_once_a_second_for_20_seconds_leaves_every_song_valid() {
    let (setup, a, b) = two_replicas("cuts").await;
    let cluster = &setup.cluster;
    let mut names: Vec<String> = (0..4).map(|i| format!("c-{i}")).collect();
    for name in &names {
        cluster.create_hikawa("default", name, 200, &[]).await;
    }
    for second in 0..20 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        cluster.server.faults().drop_connections("zundoko-operator/");
        if second == 8 {
            for i in 4..8 {
                let name = format!("c-{i}");
                cluster.create_hikawa("default", &name, 200, &[]).await;
                names.push(name);
            }
        }
    }
    cluster.assert_songs_complete("default", &names, &classic(), Duration::from_secs(120)).await;
    assert_each_word_once(cluster, &songs(cluster, &names).await).await;
    eventually("one leader", Duration::from_secs(15), async || leading(&a) != leading(&b)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_storm_is_honoured_without_a_tight_retry_loop() {
    let setup = setup("storm", true).await;
    let cluster = &setup.cluster;
    let missing = setup.dir.join("no-module-file-here.wasm");
    let op = Replica::spawn_with("operator-solo", &setup.kubeconfig, &setup.env, ONE_SHARD, &missing, &setup.dir);
    let names: Vec<String> = (0..3).map(|i| format!("s-{i}")).collect();
    for name in &names {
        cluster.create_hikawa("default", name, 300, &[]).await;
    }
    cluster.wait_words("default", &names, 2, Duration::from_secs(60)).await;

    // API Priority and Fairness turns every request of this client away for 5 s.
    let started = SystemTime::now();
    cluster.server.faults().set_throttle("(operator-solo)", 1.0, 1);
    tokio::time::sleep(Duration::from_secs(5)).await;
    cluster.server.faults().set_throttle("(operator-solo)", 0.0, 1);
    let ended = SystemTime::now();
    let storm: Vec<RequestRecord> =
        cluster.server.requests().into_iter().filter(|r| r.user_agent.contains("(operator-solo)") && r.at >= started && r.at < ended).collect();
    let mut per_second = [0usize; 6];
    for r in &storm {
        per_second[r.at.duration_since(started).unwrap_or_default().as_secs().min(5) as usize] += 1;
    }
    println!("429 storm of 5 s: {} requests from the operator, per second {per_second:?}", storm.len());
    assert!(storm.iter().all(|r| r.code == 429), "{storm:?}");
    // Every caller waits the Retry-After (1 s) or longer between tries: a handful a second,
    // not a loop (which would be thousands).
    assert!(per_second.iter().all(|&n| n <= 40), "a tight retry loop: {per_second:?}");
    // No object asked for again sooner than the Lease's retry period (0.5 s): kube's retries of
    // one request wait the Retry-After (1 s); a new try of the Lease comes a retry period after
    // the last one gave up. (Creates name no object in their path: several Hikawas post to one
    // collection.)
    let mut by_path: std::collections::BTreeMap<(String, String), Vec<SystemTime>> = Default::default();
    for r in storm.iter().filter(|r| r.verb != "create") {
        by_path.entry((r.method.clone(), r.path.clone())).or_default().push(r.at);
    }
    for ((method, path), times) in &by_path {
        for pair in times.windows(2) {
            let gap = pair[1].duration_since(pair[0]).unwrap_or_default();
            assert!(gap >= Duration::from_millis(450), "{method} {path} asked again after {gap:?}");
        }
    }
    // Afterwards it leads again and every song ends well.
    eventually("leading again", Duration::from_secs(20), async || leading(&op)).await;
    cluster.assert_songs_complete("default", &names, &classic(), Duration::from_secs(120)).await;
    assert_each_word_once(cluster, &songs(cluster, &names).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_started_while_the_api_server_is_down_is_ready_once_it_answers() {
    // Where the API server will be: a port it held, now closed.
    let first = ApiServer::start(ServerConfig::default()).await.unwrap();
    let port = first.addr().port();
    let kubeconfig_yaml = first.kubeconfig_yaml();
    first.shutdown().await;
    let dir = common::kubelet::temp_dir("api-down");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, kubeconfig_yaml).unwrap();
    let module = dir.join("rules.wasm");
    std::fs::write(&module, module_bytes("zundoko-classic")).unwrap();
    let env = vec![("ZUNDOKO_LEADER_ELECTION".to_string(), "true".to_string())];
    let mut op = Replica::spawn_with("operator-early", &kubeconfig, &env, ONE_SHARD, &module, &dir);
    let spawned = Instant::now();

    eventually("/healthz", Duration::from_secs(30), async || op.get("/healthz").is_some_and(|(c, _)| c == 200)).await;
    let (code, body) = op.get("/readyz").unwrap();
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("API server"), "{body}");
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(spawned.elapsed())).await;
    assert!(op.child.try_wait().unwrap().is_none(), "it exited:\n{}", op.log());
    let log = op.log();
    let tries = log.lines().filter(|l| l.contains("the API server does not answer yet")).count();
    println!("{tries} tries in the 10 s the API server was down");
    assert!((3..=25).contains(&tries), "one line per try, backing off: {tries}\n{log}");
    assert!(!log.contains("panicked") && !log.to_lowercase().contains("backtrace"), "{log}");

    // The API server comes up where the kubeconfig says.
    let cluster = Cluster::start_with(ServerConfig { port, ..ServerConfig::default() }).await;
    let up = Instant::now();
    let ns = Namespace { metadata: ObjectMeta { name: Some(NS.into()), ..ObjectMeta::default() }, ..Namespace::default() };
    Api::<Namespace>::all(cluster.client.clone()).create(&PostParams::default(), &ns).await.unwrap();
    eventually("ready once the API server answers", Duration::from_secs(30), async || op.get("/readyz").is_some_and(|(c, _)| c == 200)).await;
    println!("ready {:?} after the API server came up", up.elapsed());
    cluster.create_hikawa("default", "late", 0, &[]).await;
    cluster.assert_songs_complete("default", &["late".to_string()], &classic(), Duration::from_secs(60)).await;
    let _ = op.child.kill();
}

#[test]
fn a_kubeconfig_that_cannot_work_ends_the_process_with_one_line() {
    let dir = common::kubelet::temp_dir("bad-kubeconfig");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, "this is: [not a kubeconfig\n").unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_zundoko-operator"))
        .args(["run", "--module", "/nonexistent/rules.wasm", "--http-addr", "off"])
        .env_clear()
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    assert!(lines[0].starts_with("error: ") && lines[0].contains("kubeconfig"), "{stderr}");
    assert!(!stderr.contains("backtrace") && !stderr.contains("Caused by"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_at_start_end_the_process_with_one_line() {
    // 401 (not valid) for a single operator, which asks for /version first; 403 (valid, but
    // allowed nothing) for a replica, which asks for its Lease first.
    let server = ApiServer::start(ServerConfig::default()).await.unwrap();
    let dir = common::kubelet::temp_dir("refused-credentials");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig_yaml()).unwrap();
    let module = dir.join("rules.wasm");
    std::fs::write(&module, module_bytes("zundoko-classic")).unwrap();
    for (code, reason, leader_election) in [(401, "Unauthorized", "false"), (403, "Forbidden", "true")] {
        server.faults().set_refused_credentials("zundoko-operator", Some(code));
        let log = dir.join(format!("operator-{code}.log"));
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_zundoko-operator"))
            .args(["run", "--http-addr", "off"])
            .env_clear()
            .env("KUBECONFIG", &kubeconfig)
            .env("POD_NAME", "operator-refused")
            .env("POD_NAMESPACE", NS)
            .env("ZUNDOKO_MODULE", &module)
            .env("ZUNDOKO_LEADER_ELECTION", leader_election)
            .env("RUST_BACKTRACE", "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > Duration::from_secs(60) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("still running 60 s after its credentials were refused:\n{}", std::fs::read_to_string(&log).unwrap());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let stderr = std::fs::read_to_string(&log).unwrap();
        assert_eq!(status.code(), Some(1), "{stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "one line: {stderr}");
        let last = lines[0];
        assert!(last.starts_with("error: ") && last.contains(&format!("refuses this operator's credentials ({code} {reason})")), "{stderr}");
        assert!(!stderr.contains("does not answer yet") && !stderr.contains("backtrace") && !stderr.contains("panicked"), "{stderr}");
        println!("{code}: {}", lines.join("\n    "));
        let asked: Vec<(String, u16)> =
            server.requests().into_iter().filter(|r| r.user_agent.contains("zundoko-operator")).map(|r| (r.path, r.code)).collect();
        assert!(!asked.is_empty() && asked.iter().all(|(_, c)| *c == code), "{asked:?}");
        server.clear_requests();
    }
}
