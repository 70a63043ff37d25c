//! A rule set whose calls are slow holds only a few of the controller's reconciles at once
//! (its places, `controllers/hikawa/places.rs`): the others are its own Hikawas waiting in its
//! line, not slots taken from every other rule set. Against the local API server.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::cluster::{Cluster, quick_settings};
use common::rules::*;
use common::{fixture_bytes, module_bytes};
use zundoko_operator::supply::sandbox::{SandboxEngine, SandboxLimits, budget};
use zundoko_rules::classic;

/// The slow Hikawas: more than the controller's reconciles at once (16).
const SLOW: usize = 24;

async fn words(cluster: &Cluster, names: &[String]) -> usize {
    let mut total = 0;
    for name in names {
        total += cluster.song("default", name).await.words.len();
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_rule_set_holds_its_places_only_and_another_rule_set_sings_meanwhile() {
    let cluster = Cluster::start().await;
    cluster.create_namespace(RULES_NS).await;
    let classic_bytes = module_bytes("zundoko-classic");
    let default = Arc::new(SandboxEngine::new(SandboxLimits::default()).unwrap().load(&classic_bytes).unwrap());
    let operator = cluster.operator(default, quick_settings());
    // Classic rules behind a WASI module whose every call spins for a while (about 0.15 s here, 1.9 G fuel):
    // its calls take turns, as many at once as there are cores.
    let slow_bytes = budget::with_section(&fixture_bytes("zundoko-wasi-hoard"), br#"{"fuel": 2000000000}"#);
    cluster.put_configmap(RULES_NS, "rules-slow", &slow_bytes).await;
    cluster.put_configmap(RULES_NS, "rules-classic", &classic_bytes).await;
    create_rules(&cluster, "slow", plain("rules-slow")).await;
    create_rules(&cluster, "classic", plain("rules-classic")).await;
    let slow = names("slow", SLOW);
    for name in &slow {
        sing(&cluster, name, 0, Some("slow"), &[("hoard", "grow"), ("mib", "1"), ("spin", "100000000")]).await;
    }
    // The slow rule set's calls are under way, and its Hikawas lined up.
    common::running::eventually("the slow rule set sings", Duration::from_secs(120), async || words(&cluster, &slow).await >= SLOW / 2).await;
    let (slow_before, started) = (words(&cluster, &slow).await, Instant::now());

    let fast = names("fast", 3);
    for name in &fast {
        sing(&cluster, name, 0, Some("classic"), &[]).await;
    }
    cluster.assert_songs_complete("default", &fast, &classic(), Duration::from_secs(300)).await;
    let (fast_words, slow_meanwhile, took) = (words(&cluster, &fast).await, words(&cluster, &slow).await - slow_before, started.elapsed());
    eprintln!("{fast_words} words of the classic rule set in {took:?}, while the slow one said {slow_meanwhile}");
    // Each classic word needs a reconcile. Were the slow rule set's Hikawas holding the
    // controller's reconciles while they wait for a turn, a classic word would wait for one of
    // them to end: for slow calls, as many as the classic words at least. In their places
    // only, the slow calls use the cores and nothing more: the classic songs are sung while a
    // few slow calls run.
    assert!(
        slow_meanwhile * 2 <= fast_words,
        "the classic songs ({fast_words} words) waited for the slow rule set ({slow_meanwhile} words meanwhile)"
    );
    let metrics = operator.shared.metrics.encode();
    assert!(metrics.contains(r#"zundoko_reconciles_not_decided_total{why="module-busy"}"#), "the slow Hikawas waited in line: {metrics}");
    // The slow rule set goes on, every word in order.
    let slow_after = words(&cluster, &slow).await;
    cluster.wait_words("default", &slow[..1], 2, Duration::from_secs(120)).await;
    for name in &slow {
        let song = cluster.song("default", name).await;
        if song.kiyoshis.is_empty() {
            assert_eq!(song.indexes, (1..=song.indexes.len() as u32).collect::<Vec<_>>(), "{name}: each word once, in order");
        } else {
            song.assert_valid(&classic(), name);
        }
    }
    assert!(words(&cluster, &slow).await >= slow_after);
    operator.stop().await;
}
