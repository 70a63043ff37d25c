//! Nothing from a pull secret reaches a status, an Event or a log line: `zundoko-operator run`
//! (its log at debug level, every library's included) with rule sets whose pull secrets are
//! malformed around a password (serde's own messages quote the value they did not expect) or
//! carry a password the registry refuses. The log is read too, not only what the API keeps.

mod common;

use std::time::Duration;

use common::module_bytes;
use common::registry::{PASSWORD, TestRegistry, USER, base64};
use common::replica::{NS, Replica, setup};
use common::rules::{create_rules, rules_api, wait_rules};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;
use zundoko_operator::crd::{ModuleSource, SecretReference, ZundokoRulesSpec};

/// Passwords the secrets carry: none may be said anywhere, as written or as sent.
const MALFORMED: &str = "malformed-pass-41d09a7c";
const REFUSED: &str = "refused-pass-6c3e58b2";

fn secret(name: &str, dockerconfigjson: String) -> Secret {
    let mut secret = Secret { type_: Some("kubernetes.io/dockerconfigjson".into()), ..Secret::default() };
    secret.metadata.name = Some(name.into());
    secret.metadata.namespace = Some(NS.into());
    secret.data = Some([(".dockerconfigjson".to_string(), k8s_openapi::ByteString(dockerconfigjson.into_bytes()))].into());
    secret
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_status_event_or_log_line_says_what_a_pull_secret_holds() {
    let Some(registry) = TestRegistry::start(true) else { return };
    registry.push("rules/private:v1", &module_bytes("zundoko-classic"), None).await;
    let setup = setup("secrets-unsaid", false).await;
    let cluster = &setup.cluster;
    let module = setup.dir.join("rules.wasm");
    std::fs::write(&module, module_bytes("zundoko-classic")).unwrap();
    let addr = registry.addr.clone();
    let secrets = Api::<Secret>::namespaced(cluster.client.clone(), NS);
    // An entry that is a string, not an object: serde says `invalid type: string "..."`.
    let malformed = serde_json::json!({"auths": {addr.clone(): format!("{USER}:{MALFORMED}")}}).to_string();
    let refused = serde_json::json!({"auths": {addr.clone(): {"auth": base64(&format!("{USER}:{REFUSED}"))}}}).to_string();
    for (name, json) in [("malformed", malformed), ("refused", refused)] {
        secrets.create(&PostParams::default(), &secret(name, json)).await.unwrap();
    }
    let extra = [("ZUNDOKO_INSECURE_REGISTRIES", addr.as_str()), ("RUST_LOG", "debug")];
    let replica = Replica::spawn_with("operator-a", &setup.kubeconfig, &setup.env, &extra, &module, &setup.dir);
    for name in ["malformed", "refused"] {
        let mut source = ModuleSource::oci(&format!("{addr}/rules/private:v1"));
        source.oci.as_mut().unwrap().pull_secret = Some(SecretReference { namespace: NS.into(), name: name.into() });
        create_rules(cluster, name, ZundokoRulesSpec { source, sha256: None, candidate: None }).await;
    }
    let malformed = wait_rules(cluster, "malformed", "the malformed secret named", |s| s.reason.as_deref() == Some("PullSecretInvalid")).await;
    assert!(malformed.message.as_deref().is_some_and(|m| m.contains("at line 1 column")), "where it fails: {malformed:?}");
    wait_rules(cluster, "refused", "the refused password named", |s| s.reason.as_deref() == Some("RegistryUnauthorized")).await;
    // Its Events written too (a second after the status, at most).
    tokio::time::sleep(Duration::from_secs(2)).await;

    let statuses = serde_json::to_string(&rules_api(cluster).list(&Default::default()).await.unwrap().items).unwrap();
    let events = serde_json::to_string(&Api::<k8s_openapi::api::events::v1::Event>::all(cluster.client.clone()).list(&Default::default()).await.unwrap().items).unwrap();
    let log = replica.log();
    assert!(log.contains("PullSecretInvalid") || log.contains("pull secret"), "the log is the operator's, at debug level: {log}");
    for (what, said) in [("a status", &statuses), ("an Event", &events), ("the log", &log)] {
        for password in [MALFORMED, REFUSED, PASSWORD] {
            let sent = base64(&format!("{USER}:{password}"));
            assert!(!said.contains(password) && !said.contains(&sent), "{what} says a pull secret's password {password}:\n{said}");
        }
    }
}
