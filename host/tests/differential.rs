//! `simulate` and `run` agree: the same module, sung through the simulator and through the
//! operator on the local API server with the same entropy (`--entropy-seed`: each Hikawa's n-th
//! decision gets the n-th entropy of `simulate --seed`), says the same song word for word. For
//! a module that asks for callbacks (`requeue-after`), for one that never does (its own words
//! call it again, as the WIT contract says), and for a JavaScript one deciding by
//! `Math.random()` and reading `Date.now()` (served from the call's entropy and now). And a
//! Hikawa that waits costs nothing while it waits.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::cluster::{Cluster, quick_settings};
use common::compile_once::LoadOnce as _;
use common::running::eventually;
use common::{fixture_bytes, module_bytes};
use zundoko_operator::cli::simulate::simulate;
use zundoko_operator::crd::{Hikawa, HikawaSpec};
use zundoko_operator::supply::contract::rules::Rules;
use zundoko_operator::supply::sandbox::{SandboxEngine, SandboxLimits};
use zundoko_operator::supply::contract::plan_check::PlanLimits;

fn load(bytes: &[u8]) -> Arc<dyn Rules> {
    let engine = SandboxEngine::new(SandboxLimits::default()).unwrap();
    Arc::new(engine.load(bytes).unwrap())
}

/// A Python or JavaScript fixture from target/fixtures/ (`make fixtures-langs`), loaded with an
/// interpreter's room; None (said loudly) when it was not built and CI is not set.
fn language_fixture(name: &str) -> Option<Arc<dyn Rules>> {
    Some(Arc::new(common::langs::roomy_engine().load_once(&common::langs::lang_fixture(name)?).unwrap()))
}

/// The song `simulate --seed seed` sings for a Hikawa `default/name` at `intervalMillis: 0`:
/// its words, Kiyoshi last.
fn simulated(rules: &dyn Rules, name: &str, seed: u64) -> Vec<String> {
    let mut hikawa = Hikawa::new(name, HikawaSpec { interval_millis: 0, ..HikawaSpec::default() });
    hikawa.metadata.namespace = Some("default".into());
    let mut printed = Vec::new();
    let song = simulate(rules, &hikawa, seed, &PlanLimits::default(), 10_000, &mut printed).unwrap();
    assert!(song.kiyoshied, "simulate did not sing to Kiyoshi:\n{}", String::from_utf8_lossy(&printed));
    song.words
}

/// Sing `rules` for three Hikawas through the operator with entropy seeded by `seed`, and
/// through `simulate --seed seed`: every song the same, word for word.
async fn same_songs(rules: Arc<dyn Rules>, seed: u64) {
    let expected = simulated(rules.as_ref(), "diff", seed);
    assert!(expected.len() >= 6, "{expected:?}");
    let cluster = Cluster::start().await;
    let settings = zundoko_operator::controllers::hikawa::controller::Settings { entropy_seed: Some(seed), ..quick_settings() };
    let operator = cluster.operator(rules.clone(), settings);
    let names: Vec<String> = (0..3).map(|i| format!("diff{i}")).collect();
    for name in &names {
        cluster.create_hikawa("default", name, 0, &[]).await;
    }
    // The Kiyoshi children, not the status: a module need not write a status at all.
    eventually("every song sung to its Kiyoshi", Duration::from_secs(120), async || {
        for name in &names {
            if cluster.song("default", name).await.kiyoshis.is_empty() {
                return false;
            }
        }
        true
    })
    .await;
    for name in &names {
        let song = cluster.song("default", name).await;
        song.assert_valid(&zundoko_rules::classic(), name);
        let mut sung = song.words.clone();
        sung.extend(song.kiyoshis.iter().map(|(word, _)| word.clone()));
        assert_eq!(sung, expected, "{name}: the operator's song against simulate --seed {seed}'s");
    }
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_that_asks_for_callbacks_sings_the_song_simulate_sings() {
    same_songs(load(&module_bytes("zundoko-classic")), 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_that_never_asks_for_a_callback_sings_the_song_simulate_sings() {
    // Its plans hold no requeue-after: each word it says is what calls it again.
    let rules = load(&fixture_bytes("zundoko-no-callback"));
    let song = simulated(rules.as_ref(), "diff", 5);
    assert!(song.len() >= 6, "{song:?}");
    same_songs(rules, 5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_module_written_to_the_wit_alone_without_callbacks_sings_the_song_simulate_sings() {
    // As someone outside the project writes one: the bindings alone, no kit, no requeue-after.
    let Some(rules) = language_fixture("zundoko-py-no-callback") else { return };
    same_songs(rules, 7).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_javascript_module_deciding_by_math_random_and_date_now_sings_the_song_simulate_sings() {
    // As a JavaScript author writes one: Zun or Doko by Math.random() < 0.5, and a call whose
    // Date.now() is not its observed.now fails. Both come from the call's input (the virtual
    // WASI), so the operator's song is simulate's, word for word, and seeds sing other songs.
    let Some(rules) = language_fixture("zundoko-js-math-random") else { return };
    let songs: std::collections::HashSet<Vec<String>> = (1..=4).map(|seed| simulated(rules.as_ref(), "diff", seed)).collect();
    assert!(songs.len() > 1, "Math.random() decides nothing: every seed sings {songs:?}");
    same_songs(rules, 11).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hikawas_that_wait_cost_nothing_while_they_wait() {
    let cluster = Cluster::start().await;
    // The Kiyoshis cannot be listed: no shard's children are covered, so no Hikawa may decide
    // (it would decide from half the truth). They wait for the list, not by polling.
    cluster.server.faults().set_error_rate("list/kiyoshis", 1.0);
    let operator = cluster.operator(load(&fixture_bytes("zundoko-no-callback")), quick_settings());
    let metrics = operator.shared.metrics.clone();
    let names: Vec<String> = (0..20).map(|i| format!("wait{i:02}")).collect();
    for name in &names {
        cluster.create_hikawa("default", name, 0, &[]).await;
    }
    let catching_up = || metrics.sum("zundoko_reconciles_not_decided_total{why=\"catching-up\"}");
    // The control: every Hikawa was looked at and found it must wait.
    eventually("every Hikawa found waiting", Duration::from_secs(30), async || catching_up() >= names.len() as u64).await;
    let (before, started) = (metrics.sum("zundoko_reconciles_total"), Instant::now());
    tokio::time::sleep(Duration::from_secs(4)).await;
    let looked = metrics.sum("zundoko_reconciles_total") - before;
    let secs = started.elapsed().as_secs_f64();
    eprintln!("{} waiting Hikawas: {looked} reconciles in {secs:.1} s", names.len());
    // Before, each polled every 200 ms: 20 Hikawas made 100 reconciles a second.
    assert!(looked <= names.len() as u64, "{} waiting Hikawas made {looked} reconciles in {secs:.1} s", names.len());
    let zundokos = kube::Api::<zundoko_operator::crd::Zundoko>::namespaced(cluster.client.clone(), "default");
    let said = zundokos.list(&Default::default()).await.unwrap().items.len();
    assert_eq!(said, 0, "words said before the children were listed");
    // The list works again: the wait ends at once (woken, not by the 30 s fallback), and each
    // sings to Kiyoshi, called again by its own words alone.
    let healed = Instant::now();
    cluster.server.faults().clear();
    cluster.wait_words("default", &names, 1, Duration::from_secs(20)).await;
    eprintln!("first words {:?} after the list worked", healed.elapsed());
    cluster.assert_songs_complete("default", &names, &zundoko_rules::classic(), Duration::from_secs(120)).await;

    // Songs over: nothing more. Every Hikawa is idle, waiting for a change that never comes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = metrics.sum("zundoko_reconciles_total");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle = metrics.sum("zundoko_reconciles_total") - before;
    assert!(idle <= 2, "{} Hikawas whose songs are over made {idle} reconciles in 3 s", names.len());
    operator.stop().await;
}
