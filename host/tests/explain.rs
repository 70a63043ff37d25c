//! `explain` against the local API server (issue 54): songs sung by the operator, then every
//! word's decision rebuilt from the cluster, proven by its input digest and replayed in the
//! sandbox; a child made by hand and a tampered annotation named; a Hikawa whose rule set is
//! Rejected explained as waiting on it, with the operator stopped; the pacing (a backoff, a
//! next call) read from the cluster; a rule set's own keys applied to a replay's pull; the
//! default module found from its replica's record.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::cluster::{Cluster, quick_settings};
use common::explain::run;
use common::compile_once::LoadOnce as _;
use common::rules::*;
use common::running::eventually;
use common::{module_bytes, module_path};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use zundoko_operator::cli::explain::replay::{Next, Verdict};
use zundoko_operator::controllers::hikawa::provenance::{DECISION, Provenance};
use zundoko_operator::crd::{SAID_AT, Zundoko, ZundokoRulesSpec, ZundokoSpec};
use zundoko_operator::supply::sources::digest;
use zundoko_rules::classic;
use zundoko_rules::naming::zundoko_name;

/// A cluster whose operator sings with the classic rules, served by the rule set `classic`.
async fn sung(names: &[&str]) -> (Cluster, common::cluster::Operator) {
    let cluster = Cluster::start().await;
    cluster.create_namespace(RULES_NS).await;
    cluster.put_configmap(RULES_NS, "rules-classic", &module_bytes("zundoko-classic")).await;
    create_rules(&cluster, "classic", plain("rules-classic")).await;
    let operator = cluster.operator(wasm(&module_bytes("zundoko-classic")), quick_settings());
    for name in names {
        sing(&cluster, name, 0, Some("classic"), &[]).await;
    }
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    cluster.assert_songs_complete("default", &names, &classic(), Duration::from_secs(120)).await;
    (cluster, operator)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_word_of_a_song_replays_to_what_was_written() {
    let (cluster, operator) = sung(&["ballad"]).await;
    let song = cluster.song("default", "ballad").await;
    operator.stop().await;

    let report = run(&cluster, &["default/ballad", "--song"]).await;
    assert_eq!(report.words.len(), song.words.len() + 1, "every Zundoko and the Kiyoshi");
    for word in &report.words {
        assert_eq!(word.verdict, Verdict::Matches, "{word:?}");
        let decision = word.decision.as_ref().unwrap();
        assert_eq!(decision.module, digest(&module_bytes("zundoko-classic")));
        assert_eq!(decision.replica, "in-process");
        assert_eq!(word.rebuilt_input.as_deref(), Some(decision.input.as_str()), "the rebuilt input is proven equal");
        assert!(word.plan.as_deref().is_some_and(|p| p.contains(&word.word)), "{word:?}");
    }
    assert!(report.first_difference.is_none());
    assert_eq!(report.state.state, "done");
    assert_eq!(report.words.last().unwrap().kind, "Kiyoshi");

    // One word, and the same for tools.
    let one = run(&cluster, &["default/ballad", "--word", "2", "-o", "json"]).await;
    assert_eq!((one.words.len(), one.words[0].position, &one.words[0].verdict), (1, 2, &Verdict::Matches));
    let json = serde_json::to_value(&one).unwrap();
    assert_eq!(json["words"][0]["verdict"], "matches");
    assert_eq!(json["state"], "done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_made_child_and_a_tampered_annotation_are_named() {
    let (cluster, operator) = sung(&["forged", "tampered"]).await;
    operator.stop().await;
    let zundokos: Api<Zundoko> = Api::namespaced(cluster.client.clone(), "default");

    // Word 2 of `forged` replaced by hand: the same word, owned by the Hikawa, no decision.
    let name = zundoko_name("forged", 2);
    let original = zundokos.get(&name).await.unwrap();
    zundokos.delete(&name, &DeleteParams::default()).await.unwrap();
    eventually("the child gone", Duration::from_secs(10), async || zundokos.get_opt(&name).await.unwrap().is_none()).await;
    let mut by_hand = Zundoko::new(&name, ZundokoSpec { say: original.spec.say.clone() });
    by_hand.metadata.namespace = Some("default".into());
    by_hand.metadata.owner_references = original.metadata.owner_references.clone();
    by_hand.metadata.annotations = Some(BTreeMap::from([(SAID_AT.to_string(), original.annotations()[SAID_AT].clone())]));
    zundokos.create(&PostParams::default(), &by_hand).await.unwrap();
    let report = run(&cluster, &["default/forged", "--song"]).await;
    assert_eq!(report.words[0].verdict, Verdict::Matches);
    let first = report.first_difference.unwrap();
    assert_eq!((first.position, first.verdict), (2, Verdict::NoProvenance), "{}", first.reason);
    assert!(first.reason.contains("written by someone else"), "{}", first.reason);

    // Word 3 of `tampered`: its recorded entropy changed. The rebuilt input's digest says so.
    let name = zundoko_name("tampered", 3);
    let child = zundokos.get(&name).await.unwrap();
    let mut recorded = Provenance::parse(&child.annotations()[DECISION]).unwrap();
    recorded.entropy ^= 1;
    let patch = serde_json::json!({ "metadata": { "annotations": { DECISION: recorded.to_string() } } });
    zundokos.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let report = run(&cluster, &["default/tampered", "--song"]).await;
    let first = report.first_difference.unwrap();
    assert_eq!((first.position, first.verdict), (3, Verdict::InputDiffers), "{}", first.reason);
    assert!(first.reason.contains(&recorded.input), "names the recorded digest: {}", first.reason);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_modules_words_replay_with_a_local_copy_whose_digest_matches() {
    let cluster = Cluster::start().await;
    let operator = cluster.operator(wasm(&module_bytes("zundoko-classic")), quick_settings());
    cluster.create_hikawa("default", "plain", 0, &[]).await;
    cluster.assert_songs_complete("default", &["plain".to_string()], &classic(), Duration::from_secs(120)).await;
    operator.stop().await;

    // The default module's source is the operator's flags: nothing in the cluster names it.
    let report = run(&cluster, &["default/plain", "--word", "1"]).await;
    assert_eq!(report.words[0].verdict, Verdict::ModuleUnavailable);
    assert!(report.words[0].reason.contains("--module FILE"), "{}", report.words[0].reason);
    assert!(report.words[0].decision.is_some(), "the recorded decision is shown all the same");
    // Another module's file is refused by its digest; the right one replays.
    let other = module_path("zundoko-strict-ja");
    let report = run(&cluster, &["default/plain", "--word", "1", "--module", other.to_str().unwrap()]).await;
    assert_eq!(report.words[0].verdict, Verdict::ModuleUnavailable);
    assert!(report.words[0].reason.contains("ModulePinMismatch"), "{}", report.words[0].reason);
    let right = module_path("zundoko-classic");
    let report = run(&cluster, &["default/plain", "--song", "--module", right.to_str().unwrap()]).await;
    assert!(report.first_difference.is_none(), "{:?}", report.first_difference);
    assert!(report.words.iter().all(|w| w.verdict == Verdict::Matches));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hikawa_waiting_on_a_rejected_rule_set_is_explained_with_the_operator_stopped() {
    let cluster = Cluster::start().await;
    cluster.create_namespace(RULES_NS).await;
    let operator = cluster.operator(wasm(&module_bytes("zundoko-classic")), quick_settings());
    cluster.put_configmap(RULES_NS, "pinned", &module_bytes("zundoko-classic")).await;
    let pin = digest(&module_bytes("zundoko-strict-ja"));
    create_rules(&cluster, "pinned", ZundokoRulesSpec { sha256: Some(pin.clone()), ..plain("pinned") }).await;
    wait_rules(&cluster, "pinned", "Rejected", |s| s.phase.as_deref() == Some("Rejected")).await;
    sing(&cluster, "waiting", 0, Some("pinned"), &[]).await;
    eventually("Ready=False", Duration::from_secs(20), async || ready(&cluster, "waiting").await.is_some_and(|(status, _, _)| status == "False")).await;
    operator.stop().await;

    let report = run(&cluster, &["default/waiting"]).await;
    let state = &report.state;
    assert_eq!(state.state, "waiting", "{state:?}");
    assert!(state.summary.contains("rule set pinned") && state.summary.contains("Rejected") && state.summary.contains("ModulePinMismatch"), "{}", state.summary);
    let ruleset = state.ruleset.as_ref().unwrap();
    assert!(ruleset.message.as_deref().is_some_and(|m| m.contains(&pin)), "{ruleset:?}");
    assert!(report.words.is_empty(), "nothing said");
    assert!(state.shard.unread.as_deref().is_some_and(|why| why.contains("no such Lease")), "{:?}", state.shard);
    // The pacing: the backoff its Warning Event records (the operator's memory is gone).
    let pacing = state.pacing.as_ref().expect("a failing Hikawa's pacing");
    let backoff = pacing.backoff.as_ref().unwrap_or_else(|| panic!("the backoff is read from the Warning Event: {pacing:?}"));
    assert!(backoff.failures >= 1 && (50..=500).contains(&backoff.backoff_ms), "quick_settings' backoff: {backoff:?}");
    assert_eq!(pacing.next_call_at.as_deref(), Some(backoff.at.as_str()));
    // No replica retries it now: once the retry's time has passed, it is overdue.
    let due: jiff::Timestamp = backoff.at.parse().unwrap();
    eventually("the retry's time passed", Duration::from_secs(5), async || jiff::Timestamp::now() > due).await;
    let later = run(&cluster, &["default/waiting"]).await;
    assert!(later.state.pacing.as_ref().is_some_and(|p| p.overdue_ms.is_some_and(|late| late > 0)), "{:?}", later.state.pacing);

    // With leader election, the Lease of its shard names the replica that holds it.
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use zundoko_operator::process::leader::assign::{lease_name, shard_of};
    let hikawa = cluster.hikawas("default").get("waiting").await.unwrap();
    let name = lease_name("zundoko-operator", shard_of(hikawa.meta().uid.as_deref().unwrap(), 32), 32);
    let mut lease = Lease { spec: Some(LeaseSpec { holder_identity: Some("replica-a".into()), ..LeaseSpec::default() }), ..Lease::default() };
    lease.metadata.name = Some(name.clone());
    Api::<Lease>::namespaced(cluster.client.clone(), RULES_NS).create(&PostParams::default(), &lease).await.unwrap();
    let report = run(&cluster, &["default/waiting"]).await;
    assert_eq!(report.state.shard.lease, format!("{RULES_NS}/{name}"));
    assert_eq!(report.state.shard.holder.as_ref().map(|h| h.0.as_str()), Some("replica-a"), "{:?}", report.state.shard);
}

/// The operator's binary through the kubectl plugin script, as a user runs it from a machine with
/// only a kubeconfig: exit status, text output, and escaping of what the cluster says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubectl_plugin_explains_from_a_kubeconfig_and_escapes_what_the_cluster_says() {
    use k8s_openapi::api::events::v1::Event;
    let (cluster, operator) = sung(&["plugged"]).await;
    operator.stop().await;
    let dir = common::kubelet::temp_dir("explain-plugin");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.server.kubeconfig_yaml()).unwrap();
    let plugin = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/kubectl-plugin/kubectl-zundoko");
    let kubectl_zundoko = |args: &[&str]| {
        let (plugin, kubeconfig, args) = (plugin.to_string(), kubeconfig.clone(), args.iter().map(|a| a.to_string()).collect::<Vec<_>>());
        // A blocking child process: off the async workers that serve the API server.
        std::thread::spawn(move || {
            std::process::Command::new(plugin)
                .args(&args)
                .env("KUBECONFIG", kubeconfig)
                .env("ZUNDOKO_OPERATOR", env!("CARGO_BIN_EXE_zundoko-operator"))
                .env_remove("RUST_LOG")
                .output()
                .unwrap()
        })
        .join()
        .unwrap()
    };

    let out = kubectl_zundoko(&["explain", "default/plugged", "--song"]);
    let (stdout, stderr) = common::output_text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("every word replays to what was written") && stdout.contains("decided by sha256:"), "{stdout}");
    println!("{stdout}");

    // What a child costs, and its annotation (the figures docs/debugging.md gives).
    let zundokos: Api<Zundoko> = Api::namespaced(cluster.client.clone(), "default");
    let child = zundokos.get(&zundoko_name("plugged", 1)).await.unwrap();
    let annotation = &child.annotations()[DECISION];
    println!("decision annotation: {} bytes of value, {} with its key; the child as JSON: {} bytes", annotation.len(), annotation.len() + DECISION.len(), serde_json::to_vec(&child).unwrap().len());

    // A Warning whose note holds a terminal escape: printed escaped.
    let hikawa = cluster.hikawas("default").get("plugged").await.unwrap();
    let event: Event = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "plugged.hostile", "namespace": "default" },
        "eventTime": "2026-11-28T00:00:00.000000Z", "reportingController": "someone", "reportingInstance": "x",
        "action": "Decide", "reason": "Hostile", "type": "Warning", "note": "\u{1b}[2Jgone\u{202e}",
        "regarding": { "apiVersion": "zundokokiyoshi.kaitoy.github.com/v1beta1", "kind": "Hikawa", "name": "plugged", "namespace": "default", "uid": hikawa.metadata.uid },
    }))
    .unwrap();
    Api::<Event>::namespaced(cluster.client.clone(), "default").create(&PostParams::default(), &event).await.unwrap();
    let out = kubectl_zundoko(&["explain", "default/plugged"]);
    let (stdout, _) = common::output_text(&out);
    assert!(stdout.contains("Warning Hostile") && stdout.contains("\\u{1b}[2Jgone\\u{202e}"), "{stdout}");
    assert!(!stdout.contains('\u{1b}') && !stdout.contains('\u{202e}'), "{stdout:?}");

    // A word that is not there, and a verb that is not one: an error, not silence.
    let out = kubectl_zundoko(&["explain", "default/plugged", "--word", "999"]);
    assert!(!out.status.success() && common::output_text(&out).1.contains("has no word 999"), "{out:?}");
    let out = kubectl_zundoko(&["sing", "default/plugged"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_rule_set_swap_each_word_is_attributed_to_the_module_that_said_it() {
    let cluster = Cluster::start().await;
    cluster.create_namespace(RULES_NS).await;
    let (classic_bytes, japanese_bytes) = (module_bytes("zundoko-classic"), module_bytes("zundoko-strict-ja"));
    cluster.put_configmap(RULES_NS, "rules-swapping", &classic_bytes).await;
    create_rules(&cluster, "swapping", plain("rules-swapping")).await;
    let operator = cluster.operator(wasm(&classic_bytes), quick_settings());
    sing(&cluster, "across", 200, Some("swapping"), &[]).await;
    cluster.wait_words("default", &["across".to_string()], 2, Duration::from_secs(30)).await;
    cluster.put_configmap(RULES_NS, "rules-swapping", &japanese_bytes).await;
    cluster.wait_kiyoshied("default", &["across".to_string()], Duration::from_secs(120)).await;
    operator.stop().await;

    // The ConfigMap serves the new module only: the old one's words replay from a local copy.
    let classic_file = module_path("zundoko-classic");
    let report = run(&cluster, &["default/across", "--song", "--module", classic_file.to_str().unwrap()]).await;
    assert!(report.first_difference.is_none(), "{:?}", report.first_difference);
    let modules: Vec<String> = report.words.iter().map(|w| w.decision.as_ref().unwrap().module.clone()).collect();
    let (old, new) = (digest(&classic_bytes), digest(&japanese_bytes));
    let swapped_at = modules.iter().position(|m| *m == new).expect("the new module said words");
    assert!(swapped_at >= 2, "the first two words were the old module's: {modules:?}");
    assert!(modules[..swapped_at].iter().all(|m| *m == old) && modules[swapped_at..].iter().all(|m| *m == new), "{modules:?}");
    // Without the copy, the old module's words are named as no longer fetchable, with what the
    // rule set's source serves now; the new module's words still replay.
    let report = run(&cluster, &["default/across", "--song"]).await;
    let first = report.first_difference.unwrap();
    assert_eq!((first.position, &first.verdict), (1, &Verdict::ModuleUnavailable));
    assert!(first.reason.contains(&format!("serves {new}")), "{}", first.reason);
    assert!(report.words[swapped_at..].iter().all(|w| w.verdict == Verdict::Matches));
}

/// The classic rules in Python and JavaScript (`make guest-langs`): their songs replay too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_javascript_songs_replay_word_for_word() {
    let engine = common::langs::roomy_engine();
    let cache = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-compiled-cache");
    for name in ["zundoko-classic-py", "zundoko-classic-js"] {
        let Some(bytes) = common::langs::lang_module(name) else { continue };
        let cluster = Cluster::start().await;
        let operator = cluster.operator(Arc::new(engine.load_once(&bytes).unwrap()), quick_settings());
        cluster.create_hikawa("default", "song", 0, &[]).await;
        cluster.wait_kiyoshied("default", &["song".to_string()], Duration::from_secs(300)).await;
        operator.stop().await;
        let path = module_path(name);
        let argv = ["default/song", "--song", "--module", path.to_str().unwrap(), "--cache-dir", cache.to_str().unwrap(), "--fuel", "2000000000", "--memory-limit-mib", "256"];
        let report = run(&cluster, &argv).await;
        assert!(report.first_difference.is_none(), "{name}: {:?}", report.first_difference);
        assert!(report.words.len() >= 6 && report.words.iter().all(|w| w.verdict == Verdict::Matches), "{name}: {:?}", report.words);
        // Hashed once, not per word: tens of MiB each time, a second of CPU in a debug build.
        let module_digest = digest(&bytes);
        assert!(report.words.iter().all(|w| w.decision.as_ref().is_some_and(|d| d.module == module_digest)), "{name}");
    }
}

/// "Why is it not singing?" while it waits for its next word: the next call is the last word's
/// plan, replayed (the rules' requeue-after from its recorded `now`), read with the operator
/// stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_singing_hikawas_next_call_is_its_last_words_plan_replayed() {
    let cluster = Cluster::start().await;
    cluster.create_namespace(RULES_NS).await;
    cluster.put_configmap(RULES_NS, "rules-classic", &module_bytes("zundoko-classic")).await;
    create_rules(&cluster, "classic", plain("rules-classic")).await;
    let operator = cluster.operator(wasm(&module_bytes("zundoko-classic")), quick_settings());
    // An hour between words: the song waits after its first.
    sing(&cluster, "slow", 3_600_000, Some("classic"), &[]).await;
    cluster.wait_words("default", &["slow".to_string()], 1, Duration::from_secs(30)).await;
    eventually("Ready=True", Duration::from_secs(20), async || ready(&cluster, "slow").await.is_some_and(|(status, _, _)| status == "True")).await;
    operator.stop().await;

    let report = run(&cluster, &["default/slow"]).await;
    assert_eq!(report.state.state, "singing", "{:?}", report.state);
    let word = &report.words[0];
    assert_eq!((word.position, &word.verdict, word.next_call), (1, &Verdict::Matches, Some(Next::AfterMs(3_600_000))), "{word:?}");
    let pacing = report.state.pacing.as_ref().expect("the pacing of a singing Hikawa");
    let decided = word.decision.as_ref().unwrap().now;
    let at: jiff::Timestamp = pacing.next_call_at.as_deref().unwrap().parse().unwrap();
    assert_eq!(at.as_millisecond(), decided + 3_600_000, "{pacing:?}");
    assert_eq!(pacing.overdue_ms, None, "not due for an hour");
    assert!(pacing.backoff.is_none());
}

/// A rule set's own `publicKeys` verify what `explain` pulls, as they verify `run`'s pull: a
/// module signed by another key than the rule set names now is not replayed; neither is one
/// that explain's own `--trusted-keys` do not verify (both must, as in `run`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_sets_own_keys_verify_the_module_explain_pulls() {
    use common::registry::TestRegistry;
    use zundoko_operator::crd::ModuleSource;
    use zundoko_operator::supply::oci::SignKey;
    let Some(registry) = TestRegistry::start(false) else { return };
    let (signer, stranger) = (SignKey::generate(), SignKey::generate());
    let classic = module_bytes("zundoko-classic");
    registry.push("rules/signed:v1", &classic, Some(&signer)).await;
    let cluster = Cluster::start().await;
    cluster.create_namespace(RULES_NS).await;
    let operator = cluster.operator_with_registry(wasm(&classic), quick_settings(), registry.settings());
    let keyed = |key: &SignKey| {
        let mut spec = ZundokoRulesSpec { source: ModuleSource::oci(&format!("{}/rules/signed:v1", registry.addr)), sha256: None, candidate: None };
        spec.source.oci.as_mut().unwrap().public_keys = vec![key.public_pem()];
        spec
    };
    create_rules(&cluster, "signed", keyed(&signer)).await;
    wait_rules(&cluster, "signed", "Active", |s| s.phase.as_deref() == Some("Active")).await;
    sing(&cluster, "verified", 0, Some("signed"), &[]).await;
    cluster.wait_kiyoshied("default", &["verified".to_string()], Duration::from_secs(60)).await;
    operator.stop().await;
    let argv = ["default/verified", "--song", "--insecure-registry", registry.addr.as_str()];

    let report = run(&cluster, &argv).await;
    assert!(report.first_difference.is_none(), "signed by the rule set's key: {:?}", report.first_difference);

    // The rule set now names a stranger's key: the signature does not verify, nothing replays.
    let mut rules = rules_api(&cluster).get("signed").await.unwrap();
    rules.spec = keyed(&stranger);
    rules_api(&cluster).replace("signed", &PostParams::default(), &rules).await.unwrap();
    let report = run(&cluster, &argv).await;
    let first = report.first_difference.expect("refused");
    assert_eq!((first.position, &first.verdict), (1, &Verdict::ModuleUnavailable));
    assert!(first.reason.contains("SignatureNotVerified"), "{}", first.reason);

    // The rule set's key right again, explain's own --trusted-keys a stranger's: refused too.
    let mut rules = rules_api(&cluster).get("signed").await.unwrap();
    rules.spec = keyed(&signer);
    rules_api(&cluster).replace("signed", &PostParams::default(), &rules).await.unwrap();
    let dir = common::kubelet::temp_dir("explain-keys");
    let key_file = dir.join("stranger.pub");
    std::fs::write(&key_file, stranger.public_pem()).unwrap();
    let report = run(&cluster, &[&argv[..], &["--trusted-keys", key_file.to_str().unwrap()]].concat()).await;
    let first = report.first_difference.expect("refused by the operator's keys");
    assert!(first.reason.contains("SignatureNotVerified"), "{}", first.reason);
}

/// The default module found from the cluster: a replica as the Deployment runs it records the
/// module it serves and its sources beside its beat in the members Lease; with the replica gone,
/// `explain` fetches it from the ConfigMap recorded there, no `--module` needed. When that
/// source serves another module since, it says what to pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_module_is_found_from_the_record_its_replica_keeps() {
    use common::replica::{NS, ONE_SHARD, Replica, setup};
    let setup = setup("explain-default", true).await;
    let cluster = &setup.cluster;
    let missing = setup.dir.join("no-module-file-here.wasm");
    let mut replica = Replica::spawn_with("operator-a", &setup.kubeconfig, &setup.env, ONE_SHARD, &missing, &setup.dir);
    cluster.create_hikawa("default", "plain", 0, &[]).await;
    cluster.wait_kiyoshied("default", &["plain".to_string()], Duration::from_secs(120)).await;
    // Gone gracefully: the last replica to leave keeps its record.
    replica.terminate();
    replica.child.wait().unwrap();

    let report = run(cluster, &["default/plain", "--song", "--operator-namespace", NS]).await;
    assert!(report.first_difference.is_none(), "{:?}\n{}", report.first_difference, replica.log());
    assert!(report.words.iter().all(|w| w.verdict == Verdict::Matches && w.decision.as_ref().unwrap().replica == "operator-a"));

    // The ConfigMap serves another module now: the words cannot be had from the cluster.
    common::replica::put_module(cluster, "zundoko-strict-ja").await;
    let report = run(cluster, &["default/plain", "--word", "1", "--operator-namespace", NS]).await;
    let reason = &report.words[0].reason;
    assert_eq!(report.words[0].verdict, Verdict::ModuleUnavailable, "{reason}");
    assert!(reason.contains(&format!("serves {}", digest(&module_bytes("zundoko-strict-ja")))), "{reason}");
    assert!(reason.contains("replica operator-a") && reason.contains("give --module FILE"), "{reason}");
}
