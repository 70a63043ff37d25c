//! What serves from a registry holds while a registry misbehaves, against a real registry
//! (Debian's docker-registry, as in oci.rs): a polled `--module-oci` tag whose registry fails
//! does not roll back to an older record of the tag the cache holds (replayed into it, say);
//! a followed tag in a rule set neither; and a registry that accepts and never answers holds
//! only its own pull permits, so another registry's pull goes on within its deadline.

mod common;

use std::os::unix::fs::DirBuilderExt as _;
use std::time::Duration;

use common::cluster::{Cluster, quick_settings};
use common::module_bytes;
use common::registry::{SilentRegistry, TestRegistry};
use common::rules::*;
use common::running::eventually;
use oci_client::secrets::RegistryAuth;
use sha2::Digest as _;
use zundoko_operator::crd::{ModuleSource, ZundokoRulesSpec};
use zundoko_operator::operator::ModuleSources;
use zundoko_operator::supply::digest;
use zundoko_operator::supply::oci::{ModuleRef, Registry, RegistrySettings};
use zundoko_operator::supply::sources::oci::OciSource;

/// The files of the cache's tag records, by name: what an attacker who can write the cache
/// keeps and puts back later (the records are the operator's own, their MACs hold).
fn tag_records(cache: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let dir = cache.join("oci/tags");
    std::fs::read_dir(&dir).map(|d| d.filter_map(Result::ok).map(|e| (e.path(), std::fs::read(e.path()).unwrap())).collect()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polled_tag_whose_registry_fails_keeps_what_serves_and_never_rolls_back_to_an_older_record() {
    let Some(mut registry) = TestRegistry::start(false) else { return };
    let (classic, japanese) = (module_bytes("zundoko-classic"), module_bytes("zundoko-strict-ja"));
    registry.push("rules/default:v1", &classic, None).await;
    let cluster = Cluster::start().await;
    let oci = OciSource { reference: registry.reference("rules/default:v1"), auth_file: None, poll: Some(Duration::from_millis(200)) };
    let mut config = common::running::config(ModuleSources { oci: Some(oci), wait: true, ..ModuleSources::default() });
    let cache = registry.dir().join("default-cache");
    config.registry = RegistrySettings { cache_dir: Some(cache.clone()), ..registry.settings() };
    let operator = common::running::start_with(&cluster, config).await.unwrap();
    assert_eq!(operator.serving(), Some(digest(&classic)));
    let older = tag_records(&cache);
    assert!(!older.is_empty(), "the cache keeps a record of the tag");

    // The tag moves: the new artifact serves.
    registry.push("rules/default:v1", &japanese, None).await;
    eventually("the tag's new artifact serves", Duration::from_secs(15), async || operator.serving() == Some(digest(&japanese))).await;

    // The older record put back, and the registry down: polls fail (a 429 or a refusal alike).
    for (path, record) in &older {
        std::fs::write(path, record).unwrap();
    }
    registry.stop();
    // Twenty polls' time: the first would have rolled the module back (the old one is still
    // compiled here, the swap at once).
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(operator.serving(), Some(digest(&japanese)), "the module was rolled back to the cache's older record of the tag");
    assert_eq!(operator.rejections("RegistryUnreachable"), 0, "a failed poll offers nothing");

    // Only the registry's own answer moves it.
    registry.resume();
    registry.push("rules/default:v1", &classic, None).await;
    eventually("the registry's answer moves it", Duration::from_secs(15), async || operator.serving() == Some(digest(&classic))).await;
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_tag_whose_registry_fails_is_not_moved_by_an_older_record() {
    let Some(mut registry) = TestRegistry::start(false) else { return };
    let (classic, japanese) = (module_bytes("zundoko-classic"), module_bytes("zundoko-strict-ja"));
    registry.push("rules/followed:v1", &classic, None).await;
    let cache = registry.dir().join("rules-cache");
    let cluster = Cluster::start().await;
    cluster.create_namespace(RULES_NS).await;
    let settings = RegistrySettings { cache_dir: Some(cache.clone()), ..registry.settings() };
    let operator = cluster.operator_with_registry(wasm(&classic), quick_settings(), settings);
    let mut source = ModuleSource::oci(&format!("{}/rules/followed:v1", registry.addr));
    let oci = source.oci.as_mut().unwrap();
    (oci.follow, oci.poll_seconds, oci.rollout) = (true, Some(1), Some(rollout(100, None, Some(3), 0)));
    create_rules(&cluster, "followed", ZundokoRulesSpec { source, sha256: None, candidate: None }).await;
    wait_rules(&cluster, "followed", "the first artifact serves", |s| s.phase.as_deref() == Some("Active")).await;
    let older = tag_records(&cache);
    assert!(!older.is_empty(), "the cache keeps a record of the tag");

    // The tag moves and is followed: its new artifact rolls out beside the first.
    registry.push("rules/followed:v1", &japanese, None).await;
    let rolling = |s: &zundoko_operator::crd::ZundokoRulesStatus| {
        s.phase.as_deref() == Some("RollingOut") && s.candidate.as_ref().is_some_and(|c| c.digest == digest(&japanese))
    };
    wait_rules(&cluster, "followed", "the moved tag rolling out", rolling).await;

    // The older record back, the registry down: the follow fails, and what it follows stays
    // (the older record named what serves: the rollout would have been dropped).
    for (path, record) in &older {
        std::fs::write(path, record).unwrap();
    }
    registry.stop();
    // Four polls at least (every second; sooner after a failure).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let status = rules_status(&cluster, "followed").await;
    assert!(rolling(&status), "the cache's older record moved the followed tag: {status:?}");
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_record_of_a_tag_no_rule_set_names_any_more_is_removed() {
    let Some(registry) = TestRegistry::start(false) else { return };
    let (classic, japanese) = (module_bytes("zundoko-classic"), module_bytes("zundoko-strict-ja"));
    registry.push("rules/kept:v1", &classic, None).await;
    registry.push("rules/dropped:v1", &japanese, None).await;
    let cache = registry.dir().join("unnamed-cache");
    // A tag's record is named by the sha256 of the tag's full name (oci/cache.rs).
    let record = |tag: &str| cache.join("oci/tags").join(hex::encode(sha2::Sha256::digest(format!("{}/{tag}", registry.addr))));
    // Left by an earlier process: a tag no rule set names.
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(cache.join("oci/tags")).unwrap();
    std::fs::write(record("rules/long-gone:v1"), "sha256:00 00\n").unwrap();
    let cluster = Cluster::start().await;
    cluster.create_namespace(RULES_NS).await;
    // No grace: a record is removed at the first look once unnamed.
    let settings = RegistrySettings { cache_dir: Some(cache.clone()), tag_record_grace: Duration::ZERO, ..registry.settings() };
    let operator = cluster.operator_with_registry(wasm(&classic), quick_settings(), settings);
    for name in ["kept", "dropped"] {
        create_rules(&cluster, name, ZundokoRulesSpec { source: ModuleSource::oci(&format!("{}/rules/{name}:v1", registry.addr)), sha256: None, candidate: None }).await;
        wait_rules(&cluster, name, "its artifact serves", |s| s.phase.as_deref() == Some("Active")).await;
    }
    assert!(record("rules/kept:v1").exists() && record("rules/dropped:v1").exists(), "each tag resolved has its record: {:?}", tag_records(&cache));
    assert!(!record("rules/long-gone:v1").exists(), "the record no rule set names stayed once they were listed");
    rules_api(&cluster).delete("dropped", &Default::default()).await.unwrap();
    eventually("the deleted rule set's tag record removed", Duration::from_secs(15), async || !record("rules/dropped:v1").exists()).await;
    assert!(record("rules/kept:v1").exists(), "the record of a tag a rule set names was removed");
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_that_never_answers_holds_only_its_own_pull_permits() {
    let Some(registry) = TestRegistry::start(false) else { return };
    let manifest = registry.push("rules/classic:v1", &module_bytes("zundoko-classic"), None).await;
    let tarpit = SilentRegistry::start().await;
    let mut settings = registry.settings();
    settings.insecure.push(tarpit.addr.clone());
    // One pull at a time per registry (one for all, before), and a deadline long enough that
    // the other pull ends well within it, on any machine.
    (settings.concurrent_pulls, settings.tries, settings.timeout) = (1, 1, Duration::from_secs(20));
    let client = Registry::new(settings).unwrap();
    let stuck = {
        let (client, reference): (_, ModuleRef) = (client.clone(), format!("{}/rules/stuck:v1", tarpit.addr).parse().unwrap());
        tokio::spawn(async move { client.resolve(&reference, &RegistryAuth::Anonymous).await })
    };
    eventually("the tarpit holds a pull", Duration::from_secs(10), async || !tarpit.requests().is_empty()).await;

    // Another registry's pull goes on meanwhile, and ends before the tarpit's deadline.
    let fetched = client.fetch(&registry.reference("rules/classic:v1"), &manifest, &RegistryAuth::Anonymous, &[], false).await;
    assert!(fetched.is_ok(), "{:?}", fetched.err());
    assert!(!stuck.is_finished(), "the pull waited out the tarpit's deadline for a permit");
    tarpit.release();
    let refused = stuck.await.unwrap();
    assert!(refused.is_err(), "{refused:?}");
}
