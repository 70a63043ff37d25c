//! `explain` of a song whose cluster rule set pulls from a private registry with a pull secret:
//! the secret read with the explaining user's credentials through the operator's own reading of
//! it (`pull_secret_auth`), so no `--registry-auth` is needed; a secret that is gone named, with
//! the recorded decisions still shown and `--registry-auth` tried instead, as is one the
//! explaining user may not read (and said in the report when that replays, so it is not taken
//! for the rule set's own credentials); a secret outside `--rules-namespaces` refused with the
//! operator's own reason.

mod common;

use std::time::Duration;

use clap::Parser;
use common::cluster::{Cluster, quick_settings};
use common::explain::run;
use common::module_bytes;
use common::registry::{PASSWORD, TestRegistry, USER, base64};
use common::rules::*;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use zundoko_apiserver::{AuthorizationMode, ServerConfig};
use zundoko_operator::cli::explain::{Report, explain};
use zundoko_operator::cli::{Cli, Command};
use zundoko_operator::cli::explain::replay::Verdict;
use zundoko_operator::crd::{ModuleSource, SecretReference, ZundokoRulesSpec};
use zundoko_operator::supply::sources::digest;

/// A `kubernetes.io/dockerconfigjson` Secret `ns`/`name` with the registry's credentials.
fn pull_secret(ns: &str, name: &str, config: &str) -> Secret {
    let mut secret = Secret { type_: Some("kubernetes.io/dockerconfigjson".into()), ..Secret::default() };
    secret.metadata.name = Some(name.into());
    secret.metadata.namespace = Some(ns.into());
    secret.data = Some([(".dockerconfigjson".to_string(), k8s_openapi::ByteString(config.as_bytes().to_vec()))].into());
    secret
}

/// The rule set's source: the private artifact, pulled with the secret `ns`/`name`.
fn private(reference: &str, ns: &str, name: &str) -> ZundokoRulesSpec {
    let mut spec = ZundokoRulesSpec { source: ModuleSource::oci(reference), sha256: None, candidate: None };
    spec.source.oci.as_mut().unwrap().pull_secret = Some(SecretReference { namespace: ns.into(), name: name.into() });
    spec
}

fn every_word_matches(report: &Report) -> bool {
    report.first_difference.is_none() && report.words.len() >= 2 && report.words.iter().all(|w| w.verdict == Verdict::Matches)
}

/// The report's one unused pull secret, said in its text too (each word replayed all the same).
fn one_pull_secret_unused(report: &Report) -> &str {
    assert!(every_word_matches(report), "{:?}", report.words);
    let [unused] = &report.pull_secrets_unused[..] else { panic!("one pull secret unused: {:?}", report.pull_secrets_unused) };
    let mut text = Vec::new();
    zundoko_operator::cli::explain::print(report, zundoko_operator::cli::args::ExplainFormat::Text, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains(&format!("  not the rule set's pull secret: {unused}\n")), "said in the text: {text}");
    unused
}

/// A song sung by the operator with the rule set `private`: the classic module in a registry
/// that takes only its credentials, pulled with the pull secret zundoko-system/pull (a copy in
/// `elsewhere`, outside the operator's --rules-namespaces, for the rule set `outside`).
struct Sung {
    registry: TestRegistry,
    cluster: Cluster,
    /// The artifact as the rule sets name it.
    reference: String,
    /// The registry's credentials as a docker config.json.
    config: String,
    /// How the operator refused the rule set `outside`.
    operators_refusal: String,
}

async fn sung(server: ServerConfig) -> Option<Sung> {
    let registry = TestRegistry::start(true)?;
    let classic = module_bytes("zundoko-classic");
    registry.push("rules/classic:v1", &classic, None).await;
    let reference = format!("{}/rules/classic:v1", registry.addr);
    let config = serde_json::json!({"auths": {registry.addr.clone(): {"auth": base64(&format!("{USER}:{PASSWORD}"))}}}).to_string();
    let cluster = Cluster::start_with(server).await;
    cluster.create_namespace(RULES_NS).await;
    cluster.create_namespace("elsewhere").await;
    for ns in [RULES_NS, "elsewhere"] {
        Api::<Secret>::namespaced(cluster.client.clone(), ns).create(&PostParams::default(), &pull_secret(ns, "pull", &config)).await.unwrap();
    }
    // The operator reads pull secrets from zundoko-system only (its --rules-namespaces).
    let operator = cluster.operator_with_registry(wasm(&classic), quick_settings(), registry.settings());
    create_rules(&cluster, "private", private(&reference, RULES_NS, "pull")).await;
    create_rules(&cluster, "outside", private(&reference, "elsewhere", "pull")).await;
    let status = wait_rules(&cluster, "private", "rule set private Active", |s| s.phase.as_deref() == Some("Active")).await;
    assert_eq!(status.module.unwrap().digest, digest(&classic));
    let refused = wait_rules(&cluster, "outside", "rule set outside refused", |s| s.reason.as_deref() == Some("SourceNotAllowed")).await;
    let operators_refusal = refused.message.expect("the operator says why");
    sing(&cluster, "private-song", 0, Some("private"), &[]).await;
    cluster.wait_kiyoshied("default", &["private-song".to_string()], Duration::from_secs(60)).await;
    operator.stop().await;
    Some(Sung { registry, cluster, reference, config, operators_refusal })
}

/// `--registry-auth FILE` with the registry's credentials.
fn registry_auth_file(config: &str) -> String {
    let file = common::kubelet::temp_dir("explain-pull-secret").join("config.json");
    std::fs::write(&file, config).unwrap();
    file.to_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_rule_sets_song_replays_with_its_pull_secret_read_as_the_operator_reads_it() {
    let Some(Sung { registry, cluster, reference, config, operators_refusal }) = sung(ServerConfig::default()).await else { return };
    let classic = module_bytes("zundoko-classic");
    let argv = ["default/private-song", "--song", "--insecure-registry", registry.addr.as_str()];

    // No --registry-auth: the secret the rule set names, read from explain's default
    // --rules-namespaces (its --operator-namespace, zundoko-system, as run's).
    let report = run(&cluster, &argv).await;
    assert!(every_word_matches(&report), "{:?}", report.words);
    assert!(report.pull_secrets_unused.is_empty(), "its own secret used: {:?}", report.pull_secrets_unused);

    // Its secret outside --rules-namespaces: refused as the operator refused it, word for word,
    // not read; nothing else gets in (the registry refuses a pull without credentials).
    let mut rules = rules_api(&cluster).get("private").await.unwrap();
    rules.spec = private(&reference, "elsewhere", "pull");
    rules_api(&cluster).replace("private", &PostParams::default(), &rules).await.unwrap();
    let report = run(&cluster, &argv).await;
    let first = report.first_difference.expect("not replayed");
    assert_eq!((first.position, &first.verdict), (1, &Verdict::ModuleUnavailable), "{}", first.reason);
    assert!(first.reason.contains(&format!("{operators_refusal} (SourceNotAllowed)")), "the operator's reason ({operators_refusal}): {}", first.reason);
    assert!(first.reason.contains("RegistryUnauthorized"), "tried without credentials: {}", first.reason);
    // Told the operator reads that namespace too, explain reads the secret there.
    let report = run(&cluster, &[&argv[..], &["--rules-namespaces", "zundoko-system,elsewhere"]].concat()).await;
    assert!(every_word_matches(&report), "{:?}", report.words);

    // The secret gone: named, and each word's recorded decision still shown.
    let mut rules = rules_api(&cluster).get("private").await.unwrap();
    rules.spec = private(&reference, RULES_NS, "pull");
    rules_api(&cluster).replace("private", &PostParams::default(), &rules).await.unwrap();
    Api::<Secret>::namespaced(cluster.client.clone(), RULES_NS).delete("pull", &DeleteParams::default()).await.unwrap();
    let report = run(&cluster, &argv).await;
    assert!(report.words.len() >= 2, "{:?}", report.words);
    for word in &report.words {
        assert_eq!(word.verdict, Verdict::ModuleUnavailable, "{word:?}");
        assert!(word.reason.contains("pull secret zundoko-system/pull: does not exist (yet) (PullSecretUnreadable)"), "names the secret and why: {}", word.reason);
        assert!(word.decision.as_ref().is_some_and(|d| d.module == digest(&classic)), "the recorded decision is shown all the same: {word:?}");
    }
    // With --registry-auth, that is tried instead; and said, though every word replays.
    let report = run(&cluster, &[&argv[..], &["--registry-auth", &registry_auth_file(&config)]].concat()).await;
    let unused = one_pull_secret_unused(&report);
    assert!(
        unused.ends_with("pull secret zundoko-system/pull: does not exist (yet) (PullSecretUnreadable); tried with --registry-auth instead"),
        "which secret, why, what instead: {unused}"
    );
}

/// Explain as a user RBAC lets read the song and its rule set but no Secret: the pull secret is
/// named with the API server's refusal, and `--registry-auth` tried instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_secret_the_explaining_user_may_not_read_is_named_and_registry_auth_tried_instead() {
    let rbac = ServerConfig { authorization: AuthorizationMode::Rbac, ..ServerConfig::default() };
    let Some(Sung { registry, cluster, config, .. }) = sung(rbac).await else { return };
    let reader: ClusterRole = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "song-reader"},
        "rules": [
            {"apiGroups": ["zundokokiyoshi.kaitoy.github.com"], "resources": ["hikawas", "zundokos", "kiyoshis", "zundokorules"], "verbs": ["get", "list"]},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["list"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get"]},
        ],
    }))
    .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "song-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "song-reader"},
        "subjects": [{"kind": "User", "name": "reader"}],
    }))
    .unwrap();
    Api::<ClusterRole>::all(cluster.client.clone()).create(&PostParams::default(), &reader).await.unwrap();
    Api::<ClusterRoleBinding>::all(cluster.client.clone()).create(&PostParams::default(), &binding).await.unwrap();
    let as_reader = cluster.client_as("reader", &[]);
    let explain_as_reader = async |argv: &[&str]| {
        let cli = Cli::try_parse_from([&["zundoko-operator", "explain"], argv].concat()).unwrap();
        let Command::Explain(args) = cli.command else { unreachable!() };
        explain(&as_reader, &args).await.unwrap()
    };
    let argv = ["default/private-song", "--song", "--insecure-registry", registry.addr.as_str()];

    let report = explain_as_reader(&argv).await;
    assert!(report.words.len() >= 2, "{:?}", report.words);
    for word in &report.words {
        assert_eq!(word.verdict, Verdict::ModuleUnavailable, "{word:?}");
        let reason = &word.reason;
        assert!(reason.contains("pull secret zundoko-system/pull: cannot read it (may your credentials get secrets in zundoko-system?"), "names the secret: {reason}");
        assert!(reason.contains(r#"secrets "pull" is forbidden: User "reader" cannot get resource "secrets""#), "and the API server's refusal: {reason}");
        assert!(word.decision.is_some(), "the recorded decision is shown all the same: {word:?}");
    }
    let report = explain_as_reader(&[&argv[..], &["--registry-auth", &registry_auth_file(&config)]].concat()).await;
    let unused = one_pull_secret_unused(&report);
    assert!(unused.contains("pull secret zundoko-system/pull: cannot read it (may your credentials get secrets in zundoko-system?"), "which secret: {unused}");
    assert!(unused.contains(r#"secrets "pull" is forbidden: User "reader" cannot get resource "secrets""#), "the API server's refusal: {unused}");
    assert!(unused.ends_with("(PullSecretUnreadable); tried with --registry-auth instead"), "what instead: {unused}");
}
