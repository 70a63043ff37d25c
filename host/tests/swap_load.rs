//! A hundred swaps back and forth under load break no song, and swapping keeps nothing per
//! swap. Its own test binary (process), so that no other test's memory shows in its RSS.

mod common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kubelet::ConfigMapVolume;
use common::module_bytes;
use common::running::{eventually, file, start};
use zundoko_apiserver::ServerConfig;
use zundoko_operator::supply::sources::digest;
use zundoko_operator::operator::ModuleSources;
use zundoko_rules::{classic, strict_japanese};

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")?.trim().trim_end_matches("kB").trim().parse().ok()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_swaps_back_and_forth_under_load_break_no_song() {
    // A short watch history: the API server keeps its last N changes (every object version),
    // which would otherwise show up as growth here until it is full.
    let cluster = Cluster::start_with(ServerConfig { history_size: 256, ..ServerConfig::default() }).await;
    let modules = [module_bytes("zundoko-classic"), module_bytes("zundoko-strict-ja")];
    let digests = [digest(&modules[0]), digest(&modules[1])];
    let mut volume = ConfigMapVolume::new("swap-100");
    volume.update(&[("rules.wasm", &modules[0])]);
    let operator = start(&cluster, ModuleSources { file: Some(file(volume.path("rules.wasm"))), ..ModuleSources::default() }).await.unwrap();

    let names: Vec<String> = (0..40).map(|i| format!("load-{i}")).collect();
    let mut swap_to = async |swap: usize| {
        let next = swap % 2;
        volume.update(&[("rules.wasm", &modules[next])]);
        eventually(&format!("swap {swap}"), Duration::from_secs(10), async || operator.serving().as_deref() == Some(digests[next].as_str())).await;
    };
    for swap in 1..=100usize {
        // New songs keep starting while the rules change under them.
        if swap % 2 == 1 && swap / 2 < names.len() {
            cluster.create_hikawa("default", &names[swap / 2], 5, &[]).await;
        }
        swap_to(swap).await;
    }
    cluster.wait_kiyoshied("default", &names, Duration::from_secs(120)).await;
    let rules = [classic(), strict_japanese()];
    for name in &names {
        let song = cluster.song("default", name).await;
        let expected: Vec<u32> = (1..=song.words.len() as u32).collect();
        assert_eq!(song.indexes, expected, "{name}: indexes");
        assert_eq!(song.kiyoshis.len(), 1, "{name}: one Kiyoshi");
        let last = rules.iter().find(|r| r.words.kiyoshi == song.kiyoshis[0].0).expect("a known Kiyoshi");
        assert!(last.song_complete(song.words.iter().map(String::as_str)), "{name}: Kiyoshi without the call: {:?}", song.words);
    }
    assert_eq!(operator.failed_reconciles(), 0, "{}", operator.metrics());
    assert!(operator.metrics().contains("zundoko_module_swaps_total{result=\"accepted\",reason=\"\"} 101"), "{}", operator.metrics());

    // Memory, once the songs (whose objects fill the in-process API server) are done: swapping
    // must not keep anything per swap.
    for swap in 101..=110 {
        swap_to(swap).await;
    }
    let before = rss_kib();
    for swap in 111..=190 {
        swap_to(swap).await;
    }
    let after = rss_kib();
    println!("RSS after 110 swaps {before} KiB, after 190 swaps {after} KiB");
    assert!(after.saturating_sub(before) < 8 << 10, "RSS grew {} KiB over 80 swaps: something is kept per swap", after - before);
    operator.stop().await;
}

