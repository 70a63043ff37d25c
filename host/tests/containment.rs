//! Containment at the operator level (SPEC 4b), against the local API server: plans that are
//! valid one by one but would make the operator loop, a child name held by someone else,
//! names at the limits, refusals from the API server, and decisions made from a stale cache.
//! Each ends in its documented outcome, within the stated bounds, while other songs sing.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::cluster::{Cluster, quick_settings};
use common::{fixture_bytes, module_bytes};
use common::running::eventually;
use k8s_openapi::api::events::v1::Event;
use kube::api::PostParams;
use kube::Api;
use zundoko_operator::crd::{Hikawa, HikawaSpec, Zundoko, ZundokoSpec};
use zundoko_operator::supply::contract::rules::Rules;
use zundoko_operator::supply::sandbox::{GuestError, GuestOutcome, ModuleIdentity, SandboxEngine, SandboxLimits};
use zundoko_rules::{Observed, Plan};

/// The rules, counting the decisions made for each Hikawa.
struct Counting {
    inner: Arc<dyn Rules>,
    calls: Mutex<HashMap<String, u64>>,
    /// When each decision was asked for, per Hikawa.
    times: Mutex<HashMap<String, Vec<Instant>>>,
}

impl Counting {
    fn new(module: &str) -> Arc<Counting> {
        Self::loaded(&module_bytes(module))
    }

    /// A test fixture from target/fixtures/.
    fn fixture(name: &str) -> Arc<Counting> {
        Self::loaded(&fixture_bytes(name))
    }

    fn loaded(bytes: &[u8]) -> Arc<Counting> {
        let engine = SandboxEngine::new(SandboxLimits::default()).unwrap();
        Arc::new(Counting { inner: Arc::new(engine.load(bytes).unwrap()), calls: Mutex::default(), times: Mutex::default() })
    }

    fn decisions(&self, hikawa: &str) -> u64 {
        self.calls.lock().unwrap().get(hikawa).copied().unwrap_or(0)
    }

    fn times(&self, hikawa: &str) -> Vec<Instant> {
        self.times.lock().unwrap().get(hikawa).cloned().unwrap_or_default()
    }
}

impl Rules for Counting {
    fn identity(&self) -> &Arc<ModuleIdentity> {
        self.inner.identity()
    }

    fn reconcile(&self, observed: &Observed) -> Result<GuestOutcome<Plan>, GuestError> {
        *self.calls.lock().unwrap().entry(observed.hikawa.name.clone()).or_default() += 1;
        self.times.lock().unwrap().entry(observed.hikawa.name.clone()).or_default().push(Instant::now());
        self.inner.reconcile(observed)
    }
}

/// Writes the operator made for one Hikawa (its status, its children) in the request log.
fn writes_for(cluster: &Cluster, hikawa: &str) -> usize {
    let child = format!("{hikawa}-");
    cluster
        .server
        .requests()
        .iter()
        .filter(|r| matches!(r.verb.as_str(), "create" | "patch" | "update"))
        .filter(|r| (r.resource == "hikawas" && r.name == hikawa) || ((r.resource == "zundokos" || r.resource == "kiyoshis") && r.name.starts_with(&child)))
        .count()
}

fn ready(hikawa: &Hikawa) -> Option<(String, String, String)> {
    let status = hikawa.status.as_ref()?;
    let c = status.conditions.iter().find(|c| c.type_ == "Ready")?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_churning_status_and_a_zero_requeue_stay_within_the_stated_bounds_while_others_sing() {
    let cluster = Cluster::start().await;
    let rules = Counting::fixture("zundoko-hostile");
    let settings = quick_settings();
    let operator = cluster.operator(rules.clone(), settings.clone());
    cluster.create_hikawa("default", "churner", 0, &[("hostile", "churn-status")]).await;
    cluster.create_hikawa("default", "spinner", 0, &[("hostile", "requeue-zero")]).await;
    let songs: Vec<String> = (0..5).map(|i| format!("song{i}")).collect();
    for name in &songs {
        cluster.create_hikawa("default", name, 0, &[]).await;
    }
    cluster.assert_songs_complete("default", &songs, &zundoko_rules::classic(), Duration::from_secs(120)).await;
    // Past the idle burst, whatever the timing of the start.
    let burst = f64::from(settings.pace.idle_burst) / settings.pace.idle_per_sec;
    tokio::time::sleep(Duration::from_secs_f64(burst.min(10.0))).await;

    // A window of 4 s: what each costs per second, at rest.
    let window = Duration::from_secs(4);
    let before = (rules.decisions("churner"), rules.decisions("spinner"), writes_for(&cluster, "churner"), writes_for(&cluster, "spinner"));
    let started = Instant::now();
    tokio::time::sleep(window).await;
    let secs = started.elapsed().as_secs_f64();
    let after = (rules.decisions("churner"), rules.decisions("spinner"), writes_for(&cluster, "churner"), writes_for(&cluster, "spinner"));
    let (churner_decisions, spinner_decisions) = (after.0 - before.0, after.1 - before.1);
    let (churner_writes, spinner_writes) = (after.2 - before.2, after.3 - before.3);
    eprintln!(
        "over {secs:.1} s: churner {churner_decisions} decisions, {churner_writes} writes; spinner {spinner_decisions} decisions, {spinner_writes} writes; churner in all {} decisions",
        rules.decisions("churner")
    );
    for name in ["churner", "spinner"] {
        eprintln!("{name}: {:?}", cluster.hikawas("default").get(name).await.unwrap().status);
    }
    // The status that changes on every call was written once: its own write woke nothing.
    assert_eq!(churner_decisions, 0, "the churning status made the operator decide again");
    assert_eq!(churner_writes, 0);
    assert!(rules.decisions("churner") <= 2, "churner decided {} times in all", rules.decisions("churner"));
    let churner = cluster.hikawas("default").get("churner").await.unwrap();
    assert!(churner.status.unwrap().message.unwrap().starts_with("it is now "), "its one status was written");
    // The zero requeue: at most idle_per_sec decisions a second (plus one at the window's
    // edge), and still called back: slowed, not abandoned. It writes nothing.
    let bound = (settings.pace.idle_per_sec * secs).ceil() as u64 + 1;
    assert!(spinner_decisions <= bound, "spinner decided {spinner_decisions} times in {secs:.1} s (bound {bound})");
    assert!(spinner_decisions >= 1, "spinner is still called back");
    assert_eq!(spinner_writes, 0, "a plan with only a requeue writes nothing once its status is set");
    // Over its whole life, from its first decision: in any stretch of d seconds at most
    // idle_burst + idle_per_sec * d decisions (+1: a token refilled between two clock reads).
    // A slow machine only makes fewer; the burst was spent (at least idle_burst in all).
    let times = rules.times("spinner");
    let (burst, rate) = (f64::from(settings.pace.idle_burst), settings.pace.idle_per_sec);
    assert!(times.len() as f64 >= burst, "the spinner decided only {} times", times.len());
    let mut worst = (0.0, 0, Duration::ZERO);
    for i in 0..times.len() {
        for j in i..times.len() {
            let (n, d) = (j - i + 1, times[j] - times[i]);
            let excess = n as f64 - rate * d.as_secs_f64();
            if excess > worst.0 {
                worst = (excess, n, d);
            }
        }
    }
    println!("spinner: {} decisions; the most beyond the refill: {} in {:?}", times.len(), worst.1, worst.2);
    assert!(worst.0 <= burst + 1.0, "{} decisions in {:?}: more than the burst of {burst} and {rate}/s", worst.1, worst.2);
    let throttled: Vec<Event> = cluster.events_for("default", "spinner").await.into_iter().filter(|e| e.reason.as_deref() == Some("Throttled")).collect();
    assert_eq!(throttled.len(), 1, "one Throttled Warning (repeats are counted on it): {throttled:?}");
    assert_eq!(throttled[0].type_.as_deref(), Some("Warning"));
    // The songs' decisions: one per word (and one per Kiyoshi), nothing wasted.
    for name in &songs {
        let song = cluster.song("default", name).await;
        let decided = rules.decisions(name);
        assert!(decided as usize <= song.words.len() + 3, "{name}: {decided} decisions for {} words", song.words.len());
    }
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_name_held_by_someone_else_is_reported_never_counted_and_the_song_resumes_when_it_is_gone() {
    let cluster = Cluster::start().await;
    // A Zundoko under the first child's name, owned by nobody, made before the Hikawa.
    let zundokos: Api<Zundoko> = Api::namespaced(cluster.client.clone(), "default");
    let mut squatter = Zundoko::new("squat-zundoko-001", ZundokoSpec { say: "Mine".into() });
    squatter.metadata.namespace = Some("default".into());
    zundokos.create(&PostParams::default(), &squatter).await.unwrap();
    let rules = Counting::new("zundoko-classic");
    let operator = cluster.operator(rules.clone(), quick_settings());
    cluster.create_hikawa("default", "squat", 0, &[]).await;

    eventually("Ready=False ChildNameTaken", Duration::from_secs(30), async || {
        let hikawa = cluster.hikawas("default").get("squat").await.unwrap();
        ready(&hikawa).is_some_and(|(status, reason, _)| status == "False" && reason == "ChildNameTaken")
    })
    .await;
    let hikawa = cluster.hikawas("default").get("squat").await.unwrap();
    let (_, _, message) = ready(&hikawa).unwrap();
    assert!(message.contains("Zundoko default/squat-zundoko-001") && message.contains("no controller"), "{message}");
    let status = hikawa.status.unwrap();
    assert_eq!(status.num_zundokos_said, 0, "the taken word is not counted");
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    let events = cluster.events_for("default", "squat").await;
    assert!(events.iter().any(|e| e.reason.as_deref() == Some("ChildNameTaken") && e.type_.as_deref() == Some("Warning")), "{events:?}");
    assert!(!events.iter().any(|e| e.reason.as_deref() == Some("Said")), "nothing was said");
    // Backing off: a few tries a second at first, fewer and fewer (test backoff 50 ms..500 ms).
    let before = rules.decisions("squat");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let tries = rules.decisions("squat") - before;
    assert!(tries <= 8, "{tries} decisions in 3 s while the name is taken");
    assert_eq!(zundokos.get("squat-zundoko-001").await.unwrap().spec.say, "Mine", "someone else's object is left alone");

    zundokos.delete("squat-zundoko-001", &Default::default()).await.unwrap();
    cluster.assert_songs_complete("default", &["squat".into()], &zundoko_rules::classic(), Duration::from_secs(60)).await;
    let hikawa = cluster.hikawas("default").get("squat").await.unwrap();
    assert_eq!(ready(&hikawa).unwrap().0, "True");
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_names_sing_with_valid_labels_and_names_too_long_for_children_are_refused_at_admission() {
    let cluster = Cluster::start().await;
    let operator = cluster.operator(Counting::new("zundoko-classic"), quick_settings());
    let long = format!("long-{}", "n".repeat(65));
    let longest = "x".repeat(zundoko_operator::crd::MAX_HIKAWA_NAME);
    for name in [&long, &longest] {
        cluster.create_hikawa("default", name, 0, &[]).await;
    }
    cluster.assert_songs_complete("default", &[long.clone(), longest.clone()], &zundoko_rules::classic(), Duration::from_secs(120)).await;
    let song = cluster.song("default", &longest).await;
    assert!(!song.words.is_empty());

    let too_long = Hikawa {
        metadata: kube::api::ObjectMeta {
            name: Some("y".repeat(zundoko_operator::crd::MAX_HIKAWA_NAME + 1)),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: HikawaSpec { interval_millis: 0, ..HikawaSpec::default() },
        status: None,
    };
    match cluster.hikawas("default").create(&PostParams::default(), &too_long).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert!(status.message.contains("at most 240 characters"), "{}", status.message);
        }
        other => panic!("a 241-character Hikawa name was admitted: {other:?}"),
    }
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_failures_that_persist_are_recorded_on_the_hikawa_then_it_recovers() {
    let cluster = Cluster::start().await;
    cluster.create_hikawa("default", "flaky", 0, &[]).await;
    // Every create fails (the children, and the Events too).
    cluster.server.faults().set_error_rate("create", 1.0);
    let operator = cluster.operator(Counting::new("zundoko-classic"), quick_settings());
    eventually("the failure recorded on the Hikawa", Duration::from_secs(30), async || {
        let hikawa = cluster.hikawas("default").get("flaky").await.unwrap();
        ready(&hikawa).is_some_and(|(status, reason, _)| status == "False" && reason == "ApiError")
    })
    .await;
    let (_, _, message) = ready(&cluster.hikawas("default").get("flaky").await.unwrap()).unwrap();
    assert!(message.contains("Kubernetes API error"), "{message}");
    cluster.server.faults().clear();
    cluster.assert_songs_complete("default", &["flaky".into()], &zundoko_rules::classic(), Duration::from_secs(60)).await;
    assert_eq!(ready(&cluster.hikawas("default").get("flaky").await.unwrap()).unwrap().0, "True");
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_word_is_decided_once_even_when_the_caches_lag() {
    let cluster = Cluster::start().await;
    // Slow answers: the watch events of the operator's own writes come late.
    cluster.server.faults().set_latency(Duration::from_millis(15));
    let rules = Counting::new("zundoko-classic");
    let operator = cluster.operator(rules.clone(), quick_settings());
    let names: Vec<String> = (0..12).map(|i| format!("lag{i:02}")).collect();
    for name in &names {
        cluster.create_hikawa("default", name, 0, &[]).await;
    }
    cluster.assert_songs_complete("default", &names, &zundoko_rules::classic(), Duration::from_secs(180)).await;
    let mut words = 0;
    for name in &names {
        let song = cluster.song("default", name).await;
        // One decision per word, one for the Kiyoshi, and one after it (the Kiyoshi changed
        // what the rules observe: they are called once more, as `simulate` calls them, and say
        // nothing): none made twice from a stale cache.
        assert_eq!(rules.decisions(name) as usize, song.words.len() + 2, "{name}");
        words += song.words.len();
    }
    // Nothing more once every song is over. The control: each Hikawa touched (an annotation:
    // no new generation), and the operator has looked at them again, deciding nothing.
    let metrics = operator.shared.metrics.clone();
    let unchanged = || metrics.sum("zundoko_reconciles_not_decided_total{why=\"unchanged\"}");
    let before = unchanged();
    for name in &names {
        let poke = serde_json::json!({"metadata": {"annotations": {"test.zundoko.example/poke": "1"}}});
        cluster.hikawas("default").patch(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&poke)).await.unwrap();
    }
    eventually("the operator looking at every Hikawa again", Duration::from_secs(30), async || unchanged() >= before + names.len() as u64).await;
    let decided: u64 = names.iter().map(|n| rules.decisions(n)).sum();
    assert_eq!(decided as usize, words + 2 * names.len());
    // Each decision wrote at most one status (tried: refused writes count) and one Event (its
    // word's; repeats counted on it).
    let requests = cluster.server.requests();
    for name in &names {
        let decisions = rules.decisions(name) as usize;
        let statuses = requests.iter().filter(|r| r.resource == "hikawas" && r.subresource == "status" && &r.name == name).count();
        let events: i32 = cluster.events_for("default", name).await.iter().map(|e| e.series.as_ref().map_or(1, |s| s.count)).sum();
        assert!(statuses <= decisions && events as usize <= decisions, "{name}: {statuses} status writes and {events} Events for {decisions} decisions");
        assert!(statuses > 0 && events > 0, "{name}: the control, writes seen");
    }
    operator.stop().await;
}
