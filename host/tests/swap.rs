//! Hot swap end to end against the local API server: the module changes under songs in
//! progress (kubelet-style ConfigMap volume, API-watched ConfigMap) and bad modules are
//! refused while the old one keeps serving. (A hundred swaps under load: swap_load.rs.)

mod common;

use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::kubelet::{ConfigMapVolume, temp_dir};
use common::{fixture_bytes, module_bytes};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use kube::Api;
use common::running::{Operator, eventually, file, start};
use zundoko_operator::supply::sources::configmap::ConfigMapRef;
use zundoko_operator::supply::sources::digest;
use zundoko_operator::operator::ModuleSources;
use zundoko_rules::{classic, strict_japanese};

async fn swap_events(cluster: &Cluster, reason: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(cluster.client.clone(), "default");
    let mut list = events.list(&ListParams::default()).await.unwrap().items;
    list.retain(|e| e.reason.as_deref() == Some(reason));
    list.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    list.into_iter().filter_map(|e| e.note).collect()
}

/// Songs in progress, then `swap`; every song finishes valid, the new rules sing the rest,
/// nothing fails. Returns the time from the swap to the first status naming the new module.
async fn swap_under_songs(cluster: &Cluster, operator: &Operator, swap: impl AsyncFnOnce()) -> Duration {
    let (old, new) = (classic(), strict_japanese());
    let new_digest = digest(&module_bytes("zundoko-strict-ja"));
    let names: Vec<String> = (0..6).map(|i| format!("song-{i}")).collect();
    for name in &names {
        cluster.create_hikawa("default", name, 60, &[]).await;
    }
    cluster.wait_words("default", &names, 2, Duration::from_secs(30)).await;
    let swapped = Instant::now();
    swap().await;
    eventually("a decision by the new module", Duration::from_secs(10), async || {
        let hikawas = cluster.hikawas("default").list(&ListParams::default()).await.unwrap().items;
        hikawas.iter().any(|h| h.status.as_ref().and_then(|s| s.module.as_ref()).is_some_and(|m| m.digest == new_digest))
    })
    .await;
    let latency = swapped.elapsed();
    assert_eq!(operator.serving().as_deref(), Some(new_digest.as_str()));
    cluster.wait_kiyoshied("default", &names, Duration::from_secs(90)).await;
    let mut sung_by_new = 0;
    for name in &names {
        sung_by_new += cluster.song("default", name).await.assert_swapped(&old, &new, name) as usize;
        let hikawa = cluster.hikawas("default").get(name).await.unwrap();
        assert_eq!(hikawa.status.unwrap().module.unwrap().digest, new_digest, "{name}: the last decision names the new module");
    }
    assert!(sung_by_new > 0, "the variant rules said no word");
    assert_eq!(operator.failed_reconciles(), 0, "no reconcile may fail during a swap:\n{}", operator.metrics());
    let notes = swap_events(cluster, "ModuleSwapped").await;
    let old_digest = digest(&module_bytes("zundoko-classic"));
    assert!(
        notes.iter().any(|n| n.contains(&new_digest) && n.contains(&old_digest)),
        "an Event names the old and new digests: {notes:?}"
    );
    latency
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubelet_style_volume_update_swaps_the_rules_under_songs_in_progress() {
    let cluster = Cluster::start().await;
    let mut volume = ConfigMapVolume::new("kubelet-volume");
    volume.update(&[("rules.wasm", &module_bytes("zundoko-classic"))]);
    let sources = ModuleSources { file: Some(file(volume.path("rules.wasm"))), ..ModuleSources::default() };
    let operator = start(&cluster, sources).await.unwrap();
    let latency = swap_under_songs(&cluster, &operator, async || volume.update(&[("rules.wasm", &module_bytes("zundoko-strict-ja"))])).await;
    println!("file swap: {latency:?} from the ..data rename to a status naming the new module (debug build)");
    operator.stop().await;
}

async fn put_configmap(cluster: &Cluster, module: &str) {
    cluster.put_module_configmap("default", &module_bytes(module)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_watched_configmap_update_swaps_the_rules_under_songs_in_progress() {
    let cluster = Cluster::start().await;
    put_configmap(&cluster, "zundoko-classic").await;
    let configmap: ConfigMapRef = "default/zundoko-rules".parse().unwrap();
    let sources = ModuleSources { configmap: Some(configmap), ..ModuleSources::default() };
    let operator = start(&cluster, sources).await.unwrap();
    let latency = swap_under_songs(&cluster, &operator, async || put_configmap(&cluster, "zundoko-strict-ja").await).await;
    println!("ConfigMap swap: {latency:?} from the API update to a status naming the new module (debug build)");
    operator.stop().await;
}

/// Replace a file the way editors and `cp` to a temporary name then `mv` do.
fn write_by_rename(path: &std::path::Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn other_world_component() -> Vec<u8> {
    wat::parse_str(
        r#"(component
             (core module $m (func (export "f")))
             (core instance $i (instantiate $m))
             (func (export "hello") (canon lift (core func $i "f"))))"#,
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_modules_are_rejected_with_their_reason_and_the_old_one_keeps_serving() {
    let cluster = Cluster::start().await;
    let dir = temp_dir("plain-module");
    let path = dir.join("rules.wasm");
    std::fs::write(&path, module_bytes("zundoko-classic")).unwrap();
    let classic_digest = digest(&module_bytes("zundoko-classic"));
    let operator = start(&cluster, ModuleSources { file: Some(file(path.clone())), ..ModuleSources::default() }).await.unwrap();
    // A song that will not end during the test (16 Zun before the Doko), to show who sings.
    cluster.create_hikawa("default", "steady", 30, &[("zuns", "16")]).await;

    let bad: [(&str, Vec<u8>, &str); 5] = [
        ("garbage bytes", b"this is not a wasm module at all".to_vec(), "NotAComponent"),
        ("the wrong world", other_world_component(), "WorldMismatch"),
        ("a module that traps in its smoke test", fixture_bytes("zundoko-hostile"), "SmokeTestFailed"),
        ("a module whose info() name is 8 MiB", fixture_bytes("zundoko-huge-name"), "BadModuleMetadata"),
        ("a module whose info() name has terminal escapes", fixture_bytes("zundoko-escape-name"), "BadModuleMetadata"),
    ];
    let mut rejected = std::collections::HashMap::new();
    for (what, bytes, reason) in bad {
        let before = cluster.song("default", "steady").await.words.len();
        let expected = *rejected.entry(reason).and_modify(|n| *n += 1).or_insert(1);
        write_by_rename(&path, &bytes);
        eventually(&format!("{what} rejected as {reason}"), Duration::from_secs(10), async || operator.rejections(reason) == expected).await;
        assert_eq!(operator.serving().as_deref(), Some(classic_digest.as_str()), "{what}: the old module keeps serving");
        let notes = swap_events(&cluster, "ModuleRejected").await;
        assert!(notes.iter().any(|n| n.contains(reason) && n.contains(&classic_digest)), "{what}: a Warning Event with the reason: {notes:?}");
        // What the module said reaches the Event bounded and escaped.
        assert!(notes.iter().all(|n| n.len() < 1024 && !n.contains('\x1b')), "{what}: {:?}", notes.iter().map(|n| &n[..n.len().min(200)]).collect::<Vec<_>>());
        eventually(&format!("the song going on after {what}"), Duration::from_secs(10), async || {
            cluster.song("default", "steady").await.words.len() > before + 1
        })
        .await;
    }

    // The file disappears and comes back: nothing is rejected, nothing changes meanwhile.
    std::fs::remove_file(&path).unwrap();

    // It comes back written slowly, in two halves: the half is refused, the whole accepted.
    let good = module_bytes("zundoko-strict-ja");
    let (head, tail) = good.split_at(good.len() / 2);
    std::fs::write(&path, head).unwrap();
    // The control: the half's refusal, seen after the removal (changes are read in order).
    eventually("the half-written module refused", Duration::from_secs(10), async || operator.rejections("NotAComponent") == 2).await;
    assert_eq!(operator.serving().as_deref(), Some(classic_digest.as_str()), "half a module never serves");
    assert_eq!(operator.rejections("ModuleUnreadable"), 0, "the removal rejected nothing:\n{}", operator.metrics());
    {
        use std::io::Write;
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(tail).unwrap();
    }
    let new_digest = digest(&good);
    eventually("the complete module accepted", Duration::from_secs(10), async || operator.serving().as_deref() == Some(new_digest.as_str())).await;
    assert_eq!(operator.rejections("NotAComponent"), 2, "garbage and the half-written file:\n{}", operator.metrics());
    let ja = strict_japanese();
    eventually("the new rules singing", Duration::from_secs(10), async || {
        cluster.song("default", "steady").await.words.last().is_some_and(|w| *w == ja.words.zun || *w == ja.words.doko)
    })
    .await;
    assert_eq!(operator.failed_reconciles(), 0, "{}", operator.metrics());
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pin_refuses_other_modules_and_a_missing_module_is_a_clear_startup_error() {
    let cluster = Cluster::start().await;
    let dir = temp_dir("pinned-module");
    let path = dir.join("rules.wasm");

    // Nothing there: `run` would exit with this message.
    let error = start(&cluster, ModuleSources { file: Some(file(path.clone())), ..ModuleSources::default() }).await.err().unwrap();
    assert!(error.to_string().contains("does not exist") && error.to_string().contains("--wait-for-module"), "{error}");

    // A pin that the module does not match: refused at startup, naming both digests.
    std::fs::write(&path, module_bytes("zundoko-classic")).unwrap();
    let classic_digest = digest(&module_bytes("zundoko-classic"));
    let pinned = |pin: &str| ModuleSources { file: Some(file(path.clone())), pin: Some(pin.into()), ..ModuleSources::default() };
    let error = start(&cluster, pinned(&"0".repeat(64))).await.err().unwrap();
    assert!(error.to_string().contains("ModulePinMismatch") && error.to_string().contains(&classic_digest), "{error}");

    // Pinned to the classic module (bare hex, as `sha256sum` prints it): another is refused.
    let operator = start(&cluster, pinned(classic_digest.trim_start_matches("sha256:"))).await.unwrap();
    write_by_rename(&path, &module_bytes("zundoko-strict-ja"));
    eventually("the unpinned module rejected", Duration::from_secs(10), async || operator.rejections("ModulePinMismatch") == 1).await;
    assert_eq!(operator.serving().as_deref(), Some(classic_digest.as_str()));
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_a_module_starts_unready_and_sings_once_one_arrives() {
    let cluster = Cluster::start().await;
    let mut volume = ConfigMapVolume::new("late-volume");
    volume.update(&[("other-key", b"not the module")]);
    let sources = ModuleSources { file: Some(file(volume.path("rules.wasm"))), wait: true, ..ModuleSources::default() };
    let operator = start(&cluster, sources).await.unwrap();
    cluster.create_hikawa("default", "patient", 0, &[]).await;
    let unready = operator.running.shared.health.readiness().unwrap_err();
    assert!(unready.contains("no rules module"), "{unready}");

    // Nothing is said without a module: every word of the song comes after it arrived.
    let arrived = jiff::Timestamp::now().as_millisecond();
    volume.update(&[("other-key", b"not the module"), ("rules.wasm", &module_bytes("zundoko-classic"))]);
    cluster.assert_songs_complete("default", &["patient".to_string()], &classic(), Duration::from_secs(30)).await;
    let song = cluster.song("default", "patient").await;
    assert!(song.times.iter().all(|&t| t >= arrived), "words said before the module arrived at {arrived}: {:?}", song.times);
    eventually("ready", Duration::from_secs(10), async || operator.running.shared.health.readiness().is_ok()).await;
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swap_events_are_published_and_readable_with_kubectl_names() {
    // The Event of an accepted swap names the source, the module and both digests.
    let cluster = Cluster::start().await;
    put_configmap(&cluster, "zundoko-classic").await;
    let operator = start(&cluster, ModuleSources { configmap: Some("default/zundoko-rules".parse().unwrap()), ..ModuleSources::default() })
        .await
        .unwrap();
    eventually("the load Event", Duration::from_secs(10), async || !swap_events(&cluster, "ModuleSwapped").await.is_empty()).await;
    let notes = swap_events(&cluster, "ModuleSwapped").await;
    assert!(notes[0].contains("zundoko-classic") && notes[0].contains("ConfigMap default/zundoko-rules key rules.wasm"), "{notes:?}");
    // A key under data instead of binaryData is named as the problem.
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let mut cm = api.get("zundoko-rules").await.unwrap();
    cm.binary_data = None;
    cm.data = Some([("rules.wasm".to_string(), "AGFzbQ==".to_string())].into());
    api.replace("zundoko-rules", &PostParams::default(), &cm).await.unwrap();
    eventually("the rejection", Duration::from_secs(10), async || operator.rejections("ModuleUnreadable") == 1).await;
    // The Event follows the metric (it is published after the count): wait for it too.
    eventually("the rejection's Event", Duration::from_secs(10), async || {
        swap_events(&cluster, "ModuleRejected").await.iter().any(|n| n.contains("under data, not binaryData"))
    })
    .await;
    operator.stop().await;
}
