//! What a rule set's status says when its artifact is there but refused, read as a user reads
//! it (`kubectl get zr`), not below the operator: `ModuleTooLarge` (from the manifest's
//! descriptor: the layer is never asked for), a layer streamed longer than its descriptor
//! (refused as it passes it), `DigestMismatch` for a layer whose bytes the
//! registry's storage corrupted and for a manifest other than the digest asked for (a registry
//! of the test's own that ignores the digest), `InvalidPublicKey` (a rule set's key that is no
//! key). Each is final: `Rejected`, the message naming what was found.

mod common;

use std::io::{Read as _, Write as _};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::cluster::{Cluster, Operator, quick_settings};
use common::module_bytes;
use common::hostile::{MANIFEST, Server, endless, fixed};
use common::registry::{RecordingProxy, TestRegistry};
use common::rules::*;
use common::running::eventually;
use zundoko_operator::crd::{ModuleSource, ZundokoRulesSpec, ZundokoRulesStatus};
use zundoko_operator::supply::oci::RegistrySettings;
use zundoko_operator::supply::sandbox::budget::append_custom_section;
use zundoko_operator::supply::sandbox::{SandboxEngine, SandboxLimits};
use zundoko_operator::supply::sources::digest;

/// `--max-module-mib` in these tests, in bytes: the shipped modules (36 KB) fit.
const MAX_MODULE_BYTES: u64 = 48 << 10;

async fn start(registry: RegistrySettings) -> (Cluster, Operator) {
    let cluster = Cluster::start().await;
    cluster.create_namespace(RULES_NS).await;
    let rules = Arc::new(SandboxEngine::new(SandboxLimits::default()).unwrap().load(&module_bytes("zundoko-classic")).unwrap());
    let operator = cluster.operator_with_registry(rules, quick_settings(), registry);
    (cluster, operator)
}

fn oci(reference: &str, public_keys: &[&str]) -> ZundokoRulesSpec {
    let mut spec = ZundokoRulesSpec { source: ModuleSource::oci(reference), sha256: None, candidate: None };
    spec.source.oci.as_mut().unwrap().public_keys = public_keys.iter().map(|k| k.to_string()).collect();
    spec
}

/// The status once the rule set is refused with `reason`: `Rejected`, a message, nothing serving.
async fn refused(cluster: &Cluster, name: &str, reason: &str) -> String {
    let status: ZundokoRulesStatus = wait_rules(cluster, name, &format!("rule set {name} refused with {reason}"), |s| s.reason.is_some()).await;
    assert_eq!((status.reason.as_deref(), status.phase.as_deref()), (Some(reason), Some("Rejected")), "{name}: {status:?}");
    assert!(status.module.is_none(), "{name}: nothing serves: {:?}", status.module);
    status.message.unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_too_large_a_corrupted_layer_and_a_key_that_is_no_key_are_refused_in_the_status() {
    let Some(registry) = TestRegistry::start(false) else { return };
    let (classic, japanese) = (module_bytes("zundoko-classic"), module_bytes("zundoko-strict-ja"));
    // The same rules with 64 KiB more (a custom section): over the limit.
    let big = append_custom_section(classic.clone(), "zundoko-test-padding", &[0; 64 << 10]);
    registry.push("rules/classic:v1", &classic, None).await;
    registry.push("rules/big:v1", &big, None).await;
    registry.push("rules/ja:v1", &japanese, None).await;
    // The registry's storage corrupted: the layer it serves is other bytes than its digest names.
    let layer = registry.blob_path(&digest(&japanese));
    let mut corrupted = std::fs::read(&layer).unwrap();
    corrupted[100] ^= 0xff;
    std::fs::write(&layer, &corrupted).unwrap();
    // The too-large module is asked for through a proxy that records every request.
    let proxy = RecordingProxy::start(&registry.addr).await;
    let mut settings = RegistrySettings { max_module_bytes: MAX_MODULE_BYTES, ..registry.settings() };
    settings.insecure.push(proxy.addr.clone());
    let (cluster, operator) = start(settings).await;
    let r = |repo: &str| format!("{}/rules/{repo}:v1", registry.addr);
    create_rules(&cluster, "fits", oci(&r("classic"), &[])).await;
    create_rules(&cluster, "too-large", oci(&format!("{}/rules/big:v1", proxy.addr), &[])).await;
    create_rules(&cluster, "corrupted", oci(&r("ja"), &[])).await;
    create_rules(&cluster, "no-key", oci(&r("classic"), &["-----BEGIN PUBLIC KEY-----\nbm90IGEga2V5\n-----END PUBLIC KEY-----\n"])).await;

    // The control: a module under the limit from the same registry serves.
    wait_rules(&cluster, "fits", "rule set fits Active", |s| s.phase.as_deref() == Some("Active")).await;
    let message = refused(&cluster, "too-large", "ModuleTooLarge").await;
    assert!(message.contains(&format!("{} bytes, over the {MAX_MODULE_BYTES}-byte limit", big.len())), "{message}");
    // Refused from the descriptor: its manifest was asked for, its layer never.
    assert!(proxy.sent("GET /v2/rules/big/manifests/"), "the manifest was asked for through the proxy");
    assert!(!proxy.sent("/blobs/"), "the layer of a module too large is never asked for");
    // The operator's own check, which hashes what it read: both digests named.
    let message = refused(&cluster, "corrupted", "DigestMismatch").await;
    let (expected, got) = (digest(&japanese), digest(&corrupted));
    assert!(message.contains("the module layer") && message.contains(&format!("expected {expected}, got {got}")), "{message}");
    let message = refused(&cluster, "no-key", "InvalidPublicKey").await;
    assert!(message.contains("publicKeys[0]"), "names the key: {message}");
    for name in ["too-large", "corrupted", "no-key"] {
        eventually(&format!("a Warning Event on {name}"), Duration::from_secs(10), async || {
            rules_events(&cluster, name).await.iter().any(|(reason, _)| ["ModuleTooLarge", "DigestMismatch", "InvalidPublicKey"].contains(&reason.as_str()))
        })
        .await;
    }
    operator.stop().await;
}

/// A registry of the test's own on 127.0.0.1 that answers every manifest request with the same
/// manifest, whatever digest was asked for; it records the request lines.
struct IgnoresTheDigest {
    addr: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl IgnoresTheDigest {
    fn start(manifest: Vec<u8>) -> IgnoresTheDigest {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = requests.clone();
        std::thread::spawn(move || {
            for mut socket in listener.incoming().map_while(Result::ok) {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 << 10 {
                    match socket.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&head).lines().next().unwrap_or("").to_string();
                let answer = if line.contains("/manifests/") {
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        manifest.len()
                    );
                    [head.as_bytes(), &manifest].concat()
                } else {
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
                };
                recorded.lock().unwrap().push(line);
                let _ = socket.write_all(&answer);
            }
        });
        IgnoresTheDigest { addr, requests }
    }
}

/// A Wasm artifact's manifest naming a layer of `size` bytes, annotated with `note`.
fn manifest(note: &str, size: usize) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": digest(b"{}"), "size": 2},
        "layers": [{"mediaType": "application/wasm", "digest": digest(&[0; 8]), "size": size}],
        "annotations": {"note": note},
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_other_than_the_digest_asked_for_is_refused_in_the_status() {
    let served = manifest("served", 8);
    let asked = digest(&manifest("asked", 8));
    let registry = IgnoresTheDigest::start(served.clone());
    let settings = RegistrySettings { insecure: vec![registry.addr.clone()], timeout: Duration::from_secs(3), tries: 1, ..RegistrySettings::default() };
    let (cluster, operator) = start(settings).await;
    create_rules(&cluster, "swapped", oci(&format!("{}/rules/x@{asked}", registry.addr), &[])).await;
    let message = refused(&cluster, "swapped", "DigestMismatch").await;
    // The control: the manifest was asked for by its digest, and answered.
    let requests = registry.requests.lock().unwrap().clone();
    assert!(requests.iter().any(|r| r.starts_with(&format!("GET /v2/rules/x/manifests/{asked} "))), "{requests:?}");
    assert!(message.contains("the manifest") && message.contains(&format!("expected {asked}, got {}", digest(&served))), "{message}");
    // Refused at the manifest: no layer was asked for.
    assert!(!requests.iter().any(|r| r.contains("/blobs/")), "{requests:?}");
    operator.stop().await;
}

/// A registry that streams a layer longer than its descriptor names: the pull stops as the
/// stream passes the descriptor's size (not at `--max-module-mib`), and the rule set says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layer_longer_than_its_descriptor_is_refused_in_the_status() {
    const DESCRIBED: usize = 1 << 10;
    let manifest = manifest("longer", DESCRIBED);
    let served = digest(&manifest);
    let registry = Server::start(move |_, path| match path {
        "/v2/" => fixed(200, &[], b"{}"),
        p if p.contains("/manifests/") => fixed(200, &[("Content-Type", MANIFEST)], &manifest),
        // The layer: no length, and no end.
        _ => endless(200, &[("Content-Type", "application/octet-stream")]),
    });
    let settings = RegistrySettings { insecure: vec![registry.addr.clone()], timeout: Duration::from_secs(3), tries: 1, max_module_bytes: 64 << 20, ..RegistrySettings::default() };
    let (cluster, operator) = start(settings).await;
    create_rules(&cluster, "longer", oci(&format!("{}/rules/longer@{served}", registry.addr), &[])).await;
    let message = refused(&cluster, "longer", "RegistryError").await;
    assert!(message.contains(&format!("the module layer is longer than the {DESCRIBED} bytes its descriptor names")), "{message}");
    // Read to about the descriptor's size: what the server wrote is that and the client's
    // receive window (hostile_registry.rs measures it), far under --max-module-mib.
    let written = registry.most_written("GET /v2/rules/longer/blobs/");
    assert!(written > DESCRIBED as u64 && written <= 2 << 20, "{written} bytes of the layer written");
    operator.stop().await;
}
