//! A registry nobody uses cannot stop the operator: `zundoko-operator run` in an image without
//! a CA bundle (`FROM scratch`, a node whose certificate store is elsewhere: here
//! `SSL_CERT_FILE` and `SSL_CERT_DIR` pointing nowhere), its module from a file, starts and
//! sings; a rule set from a registry is the one that cannot be had, and says why by name.

mod common;

use std::time::Duration;

use common::module_bytes;
use common::registry::base64;
use common::replica::{Replica, Setup, setup};
use common::rules::{create_rules, rules_status};
use common::running::eventually;
use zundoko_operator::crd::{ModuleSource, ZundokoRulesSpec};

/// The kubeconfig with a cluster CA, as a Pod's is (the service account's `ca.crt`): the
/// Kubernetes client then trusts that CA, never the system's store, which this image lacks.
/// (The local API server speaks plain http: the CA is only what a Pod would be given.)
fn with_cluster_ca(setup: &Setup) {
    let out = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=zundoko test cluster CA"])
        .current_dir(&setup.dir)
        .output()
        .expect("openssl (a cluster CA)");
    assert!(out.status.success(), "openssl: {}", String::from_utf8_lossy(&out.stderr));
    let ca = std::fs::read_to_string(setup.dir.join("ca.pem")).unwrap();
    let kubeconfig = std::fs::read_to_string(&setup.kubeconfig).unwrap();
    let server = kubeconfig.lines().find(|l| l.trim_start().starts_with("server: ")).unwrap().to_string();
    let with_ca = kubeconfig.replacen(&server, &format!("{server}\n    certificate-authority-data: {}", base64(&ca)), 1);
    std::fs::write(&setup.kubeconfig, with_ca).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_certificate_store_the_operator_sings_and_only_a_registry_source_fails_by_name() {
    let setup = setup("no-ca-bundle", false).await;
    with_cluster_ca(&setup);
    let cluster = &setup.cluster;
    let module = setup.dir.join("rules.wasm");
    std::fs::write(&module, module_bytes("zundoko-classic")).unwrap();
    let nowhere = setup.dir.join("no-certificates-here");
    let (file, dir) = (nowhere.join("ca.pem").display().to_string(), nowhere.display().to_string());
    let replica = Replica::spawn_with("operator-a", &setup.kubeconfig, &setup.env, &[("SSL_CERT_FILE", &file), ("SSL_CERT_DIR", &dir)], &module, &setup.dir);

    // It starts (it used to panic building a registry client nobody had asked for) and sings.
    cluster.create_hikawa("default", "sings", 0, &[]).await;
    cluster.wait_kiyoshied("default", &["sings".into()], Duration::from_secs(60)).await;

    // A registry over TLS needs the certificate store: that rule set, and only it, says so.
    let spec = ZundokoRulesSpec { source: ModuleSource::oci("registry.example.com/rules/ja:v1"), sha256: None, candidate: None };
    create_rules(cluster, "remote", spec).await;
    eventually("the rule set names the missing certificate store", Duration::from_secs(30), async || {
        rules_status(cluster, "remote").await.reason.as_deref() == Some("CertificateStoreUnreadable")
    })
    .await;
    let status = rules_status(cluster, "remote").await;
    let message = status.message.unwrap_or_default();
    assert!(message.contains("certificate store") && message.contains("SSL_CERT_FILE"), "{message}");
    assert_eq!(status.phase.as_deref(), Some("Pending"), "it may pass once a certificate store is mounted");
    assert!(replica.get("/healthz").is_some_and(|(code, _)| code == 200), "the operator still runs: {}", replica.log());
}

/// The default module from a registry (`--module-oci`) without a certificate store: the
/// process waits, not ready, and `/readyz` says why by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_certificate_store_the_default_module_from_a_registry_is_not_ready_and_says_why() {
    let setup = setup("no-ca-bundle-oci", false).await;
    with_cluster_ca(&setup);
    let nowhere = setup.dir.join("no-certificates-here");
    let (file, dir) = (nowhere.join("ca.pem").display().to_string(), nowhere.display().to_string());
    let extra = [("SSL_CERT_FILE", file.as_str()), ("SSL_CERT_DIR", dir.as_str()), ("ZUNDOKO_MODULE_OCI", "registry.example.com/rules/default:v1")];
    let replica = Replica::spawn_with("operator-a", &setup.kubeconfig, &setup.env, &extra, &setup.dir.join("no-module-file.wasm"), &setup.dir);
    eventually("/readyz names the certificate store", Duration::from_secs(60), async || {
        replica.get("/readyz").is_some_and(|(code, body)| code == 503 && body.contains("CertificateStoreUnreadable") && body.contains("certificate store"))
    })
    .await;
    assert!(replica.get("/healthz").is_some_and(|(code, _)| code == 200), "alive: {}", replica.log());
}
