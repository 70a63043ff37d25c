//! Trust follows the keys, against a real registry (Debian's docker-registry, as in oci.rs):
//! `--trusted-keys` read again as its files change, so a key removed stops what only it
//! verified within seconds and without a restart, and keys that cannot be read verify nothing
//! (removing every key never switches signatures off).

mod common;

use std::time::Duration;

use common::cluster::{Cluster, quick_settings};
use common::module_bytes;
use common::registry::TestRegistry;
use common::rules::*;
use common::running::eventually;
use zundoko_operator::crd::{ModuleSource, ZundokoRulesSpec};
use zundoko_operator::supply::oci::{RegistrySettings, SignKey, TrustedKey};

fn oci(reference: &str) -> ZundokoRulesSpec {
    ZundokoRulesSpec { source: ModuleSource::oci(reference), sha256: None, candidate: None }
}

async fn phase_and_reason(cluster: &Cluster, name: &str, phase: &str, reason: Option<&str>, within: Duration) {
    let what = format!("rule set {name} {phase} ({reason:?})");
    eventually(&what, within, async || {
        let s = rules_status(cluster, name).await;
        s.phase.as_deref() == Some(phase) && s.reason.as_deref() == reason
    })
    .await;
}

/// Put `pem` in the keys directory as `name`, atomically (a rename, as kubelet swaps a Secret).
fn put_key(dir: &std::path::Path, name: &str, pem: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, pem).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_removed_from_trusted_keys_stops_what_only_it_verified_and_no_keys_verify_nothing() {
    let Some(registry) = TestRegistry::start(false) else { return };
    let (a, b) = (SignKey::generate(), SignKey::generate());
    let classic = module_bytes("zundoko-classic");
    registry.push("rules/by-a:v1", &classic, Some(&a)).await;
    registry.push("rules/unsigned:v1", &classic, None).await;
    let keys = std::env::temp_dir().join(format!("zundoko-trusted-keys-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&keys);
    std::fs::create_dir_all(&keys).unwrap();
    put_key(&keys, "a.pub", &a.public_pem());
    let settings = RegistrySettings { trusted_keys: TrustedKey::load(&keys).unwrap(), trusted_key_paths: vec![keys.clone()], ..registry.settings() };
    let cluster = Cluster::start().await;
    cluster.create_namespace(RULES_NS).await;
    let operator = cluster.operator_with_registry(wasm(&module_bytes("zundoko-classic")), quick_settings(), settings);
    create_rules(&cluster, "by-a", oci(&format!("{}/rules/by-a:v1", registry.addr))).await;
    create_rules(&cluster, "unsigned", oci(&format!("{}/rules/unsigned:v1", registry.addr))).await;
    phase_and_reason(&cluster, "by-a", "Active", None, Duration::from_secs(30)).await;
    phase_and_reason(&cluster, "unsigned", "Rejected", Some("SignatureNotVerified"), Duration::from_secs(30)).await;
    sing(&cluster, "before", 0, Some("by-a"), &[]).await;
    cluster.wait_kiyoshied("default", &["before".into()], Duration::from_secs(30)).await;

    // A replaced by B in the file: what only A verified stops, without a restart.
    put_key(&keys, "b.pub", &b.public_pem());
    std::fs::remove_file(keys.join("a.pub")).unwrap();
    phase_and_reason(&cluster, "by-a", "Rejected", Some("SignatureNotVerified"), Duration::from_secs(6)).await;
    assert!(rules_status(&cluster, "by-a").await.module.is_none());
    sing(&cluster, "after", 0, Some("by-a"), &[]).await;
    eventually("Ready=False RulesNotActive", Duration::from_secs(10), async || {
        ready(&cluster, "after").await.is_some_and(|(s, reason, message)| s == "False" && reason == "RulesNotActive" && message.contains("SignatureNotVerified"))
    })
    .await;
    assert_eq!(decided_by(&cluster, "after").await, None, "the old module decided after its key was removed");

    // No key left: nothing verifies (not: nothing is checked). The unsigned one stays refused.
    std::fs::remove_file(keys.join("b.pub")).unwrap();
    // The keys read again (every second) and found unreadable: what the statuses say then.
    eventually("the unsigned rule set told the keys cannot be read", Duration::from_secs(6), async || {
        rules_status(&cluster, "unsigned").await.message.is_some_and(|m| m.contains("cannot be read"))
    })
    .await;
    let status = rules_status(&cluster, "unsigned").await;
    assert_eq!((status.phase.as_deref(), status.reason.as_deref()), (Some("Rejected"), Some("SignatureNotVerified")), "{status:?}");
    assert!(status.message.unwrap_or_default().contains("cannot be read"), "removing every key must not switch signatures off");
    assert_eq!(rules_status(&cluster, "by-a").await.phase.as_deref(), Some("Rejected"));

    // A back: it serves again, and the Hikawa that waited sings.
    put_key(&keys, "a.pub", &a.public_pem());
    phase_and_reason(&cluster, "by-a", "Active", None, Duration::from_secs(10)).await;
    cluster.wait_kiyoshied("default", &["after".into()], Duration::from_secs(30)).await;
    operator.stop().await;
    let _ = std::fs::remove_dir_all(&keys);
}

/// The default module from a registry (`--module-oci`): a key removed from `--trusted-keys`
/// stops it within seconds, from the signatures the cache kept (the registry down: no re-pull),
/// and the key back serves it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_module_from_a_registry_stops_when_its_key_is_removed_without_a_pull() {
    use zundoko_operator::operator::ModuleSources;
    let Some(mut registry) = TestRegistry::start(false) else { return };
    let (a, b) = (SignKey::generate(), SignKey::generate());
    let classic = module_bytes("zundoko-classic");
    registry.push("rules/default:v1", &classic, Some(&a)).await;
    let keys = registry.dir().join("default-keys");
    std::fs::create_dir_all(&keys).unwrap();
    put_key(&keys, "a.pub", &a.public_pem());
    let cluster = Cluster::start().await;
    let oci = zundoko_operator::supply::sources::oci::OciSource { reference: registry.reference("rules/default:v1"), auth_file: None, poll: None };
    let mut config = common::running::config(ModuleSources { oci: Some(oci), wait: true, ..ModuleSources::default() });
    let cache = registry.dir().join("default-cache");
    config.registry = RegistrySettings { trusted_keys: TrustedKey::load(&keys).unwrap(), trusted_key_paths: vec![keys.clone()], cache_dir: Some(cache), ..registry.settings() };
    let operator = common::running::start_with(&cluster, config).await.unwrap();
    let digest = zundoko_operator::supply::digest(&classic);
    assert_eq!(operator.serving(), Some(digest.clone()));
    sing(&cluster, "before", 0, None, &[]).await;
    cluster.wait_kiyoshied("default", &["before".into()], Duration::from_secs(30)).await;

    // The registry down: nothing can be pulled again. A replaced by B: the module stops.
    registry.stop();
    put_key(&keys, "b.pub", &b.public_pem());
    std::fs::remove_file(keys.join("a.pub")).unwrap();
    eventually("the default module withdrawn", Duration::from_secs(8), async || operator.serving().is_none()).await;
    sing(&cluster, "after", 0, None, &[]).await;
    // Reconciled, and found nothing to decide with: it says so.
    eventually("Ready=False NoModuleServing", Duration::from_secs(10), async || {
        ready(&cluster, "after").await.is_some_and(|(s, reason, _)| s == "False" && reason == "NoModuleServing")
    })
    .await;
    assert_eq!(decided_by(&cluster, "after").await, None, "the module decided after its key was removed");
    // Said where swaps are (the operator's namespace, as it knows no Pod here).
    let said = cluster.events_regarding("default", "Namespace", "default").await;
    assert!(said.iter().any(|e| e.reason.as_deref() == Some("ModuleWithdrawn") && e.note.as_deref().is_some_and(|n| n.contains("SignatureNotVerified"))), "{said:?}");
    assert!(!operator.metrics().contains(&digest), "zundoko_module_info still names the withdrawn module");

    // A back: the cache's signature verifies again, the module serves, the waiting Hikawa sings.
    put_key(&keys, "a.pub", &a.public_pem());
    eventually("the default module back", Duration::from_secs(10), async || operator.serving() == Some(digest.clone())).await;
    cluster.wait_kiyoshied("default", &["after".into()], Duration::from_secs(30)).await;
    operator.stop().await;
}

/// `--require-signatures`: a rule set whose source is a ConfigMap serves only once the ConfigMap
/// carries a signature by a trusted key (its annotation), so switching a source from a registry
/// to a ConfigMap does not bypass signing; the default module from an unsigned file is refused
/// at start, and serves once `sign` wrote its signature beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_signatures_required_a_configmap_or_a_file_serves_only_signed() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Patch, PatchParams};
    use zundoko_operator::operator::ModuleSources;
    use zundoko_operator::supply::fetch::SIGNATURE_ANNOTATION_PREFIX;
    let key = SignKey::generate();
    let classic = module_bytes("zundoko-classic");
    let settings = RegistrySettings { trusted_keys: vec![key.trusted("team.pub")], require_signatures: true, ..RegistrySettings::default() };
    let cluster = Cluster::start().await;
    cluster.create_namespace(RULES_NS).await;
    cluster.put_configmap(RULES_NS, "unsigned-cm", &classic).await;
    let operator = cluster.operator_with_registry(wasm(&classic), quick_settings(), settings.clone());
    create_rules(&cluster, "from-cm", plain("unsigned-cm")).await;
    phase_and_reason(&cluster, "from-cm", "Rejected", Some("SignatureRequired"), Duration::from_secs(30)).await;
    let message = rules_status(&cluster, "from-cm").await.message.unwrap_or_default();
    assert!(message.contains(&format!("{SIGNATURE_ANNOTATION_PREFIX}rules.wasm")), "names where the signature goes: {message}");
    sing(&cluster, "waits", 0, Some("from-cm"), &[]).await;
    // Signed by another key: not verified.
    let annotate = async |signature: String| {
        let api: kube::Api<ConfigMap> = kube::Api::namespaced(cluster.client.clone(), RULES_NS);
        let patch = serde_json::json!({"metadata": {"annotations": {format!("{SIGNATURE_ANNOTATION_PREFIX}rules.wasm"): signature}}});
        api.patch("unsigned-cm", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    };
    let digest = zundoko_operator::supply::digest(&classic);
    annotate(zundoko_operator::supply::oci::signature::sign_digest(&SignKey::generate(), &digest).unwrap()).await;
    phase_and_reason(&cluster, "from-cm", "Rejected", Some("SignatureNotVerified"), Duration::from_secs(30)).await;
    assert_eq!(decided_by(&cluster, "waits").await, None);
    annotate(zundoko_operator::supply::oci::signature::sign_digest(&key, &digest).unwrap()).await;
    phase_and_reason(&cluster, "from-cm", "Active", None, Duration::from_secs(30)).await;
    cluster.wait_kiyoshied("default", &["waits".into()], Duration::from_secs(30)).await;
    operator.stop().await;

    // The default module from a file: unsigned, refused at start, naming why.
    let dir = std::env::temp_dir().join(format!("zundoko-signed-file-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let module = dir.join("rules.wasm");
    std::fs::write(&module, &classic).unwrap();
    // The keys from a directory, read again as it changes.
    let keys = dir.join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    put_key(&keys, "team.pub", &key.public_pem());
    let file_settings = RegistrySettings { trusted_keys: TrustedKey::load(&keys).unwrap(), trusted_key_paths: vec![keys.clone()], ..settings.clone() };
    let config = || {
        let mut config = common::running::config(ModuleSources { file: Some(common::running::file(module.clone())), ..ModuleSources::default() });
        config.registry = file_settings.clone();
        config
    };
    let error = common::running::start_with(&cluster, config()).await.err().expect("an unsigned file must not serve");
    assert!(error.to_string().contains("SignatureRequired") && error.to_string().contains("rules.wasm.sig"), "{error}");
    // `sign` writes the signature beside it (as a mounted ConfigMap's rules.wasm.sig entry).
    let key_file = dir.join("team.key");
    std::fs::write(&key_file, key.private_pem()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_zundoko-operator")).args(["sign", "--key"]).arg(&key_file).arg(&module).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(&format!("annotation:  {SIGNATURE_ANNOTATION_PREFIX}rules.wasm=")), "{stdout}");
    let operator = common::running::start_with(&cluster, config()).await.unwrap();
    assert_eq!(operator.serving(), Some(digest.clone()));
    // Its key replaced by another: the same file is no longer trusted, and stops serving.
    put_key(&keys, "other.pub", &SignKey::generate().public_pem());
    std::fs::remove_file(keys.join("team.pub")).unwrap();
    eventually("the file's module withdrawn", Duration::from_secs(8), async || operator.serving().is_none()).await;
    put_key(&keys, "team.pub", &key.public_pem());
    eventually("the file's module back", Duration::from_secs(8), async || operator.serving() == Some(digest.clone())).await;
    operator.stop().await;

    // The default module from a ConfigMap (the one signed above, through its annotation): the
    // same, through the API.
    let mut config = common::running::config(ModuleSources { configmap: Some(format!("{RULES_NS}/unsigned-cm").parse().unwrap()), ..ModuleSources::default() });
    config.registry = file_settings.clone();
    let operator = common::running::start_with(&cluster, config).await.unwrap();
    assert_eq!(operator.serving(), Some(digest.clone()));
    put_key(&keys, "other.pub", &SignKey::generate().public_pem());
    std::fs::remove_file(keys.join("team.pub")).unwrap();
    eventually("the ConfigMap's module withdrawn", Duration::from_secs(8), async || operator.serving().is_none()).await;
    put_key(&keys, "team.pub", &key.public_pem());
    eventually("the ConfigMap's module back", Duration::from_secs(8), async || operator.serving() == Some(digest.clone())).await;
    operator.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// `sign` and `check --require-signatures` on a module file: signed by a trusted key it passes
/// (naming the key), unsigned it is refused naming what is missing; the flag without keys is
/// refused as meaningless.
#[test]
fn check_requires_a_files_signature_when_asked_and_sign_makes_it() {
    let dir = std::env::temp_dir().join(format!("zundoko-sign-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let module = dir.join("rules.wasm");
    std::fs::write(&module, module_bytes("zundoko-classic")).unwrap();
    let run = |args: &[&str]| {
        let out = common::operator_cli(args, &[]);
        let (stdout, stderr) = common::output_text(&out);
        (out.status.success(), format!("{stdout}{stderr}"))
    };
    let (module_s, team) = (module.to_str().unwrap(), dir.join("team"));
    assert!(run(&["keygen", "--out", team.to_str().unwrap()]).0);
    let (key, public) = (dir.join("team.key"), dir.join("team.pub"));
    let checked = |extra: &[&str]| run(&[&["check", "--module", module_s, "--require-signatures", "--trusted-keys", public.to_str().unwrap()], extra].concat());
    let (ok, out) = checked(&[]);
    assert!(!ok && out.contains("SignatureRequired") && out.contains("rules.wasm.sig"), "{out}");
    let (ok, out) = run(&["sign", "--key", key.to_str().unwrap(), module_s]);
    assert!(ok, "{out}");
    let (ok, out) = checked(&[]);
    assert!(ok && out.contains(&format!("signed by:   {}", public.display())), "{out}");
    // The module changed after it was signed: refused.
    std::fs::write(&module, module_bytes("zundoko-strict-ja")).unwrap();
    let (ok, out) = checked(&[]);
    assert!(!ok && out.contains("SignatureNotVerified"), "{out}");
    let (ok, out) = run(&["check", "--module", module_s, "--require-signatures"]);
    assert!(!ok && out.contains("--require-signatures needs trusted keys"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// What `cosign copy` (or `crane cp` of the artifact and its `.sig`) does: the signature of
/// `digest` made for `from` (its payload naming `from`'s repository), stored next to the same
/// artifact in repository `to`.
async fn copy_signature(registry: &TestRegistry, from: &str, to: &str, digest: &str, key: &SignKey) {
    use zundoko_operator::supply::oci::signature;
    let payload = signature::payload(&registry.reference(from).repository_name(), digest);
    let annotations = std::collections::BTreeMap::from([(signature::SIGNATURE_ANNOTATION.to_string(), key.sign(&payload))]);
    let layer = oci_client::client::ImageLayer::new(payload, signature::PAYLOAD_MEDIA_TYPE.into(), Some(annotations));
    let config = oci_client::client::Config::oci_v1(b"{}".to_vec(), None);
    let client = oci_client::Client::new(oci_client::client::ClientConfig {
        protocol: oci_client::client::ClientProtocol::HttpsExcept(vec![registry.addr.clone()]),
        ..Default::default()
    });
    let at = registry.reference(&format!("{to}:{}", signature::signature_tag(digest))).to_oci();
    client.push(&at, &[layer], config, &registry.auth(), None).await.unwrap();
}

/// `requireIdentity`: a signed artifact copied to another repository, its signature with it,
/// verifies there only without the binding; in its own repository it verifies with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_require_identity_a_signed_artifact_copied_to_another_repository_does_not_verify_there() {
    let Some(registry) = TestRegistry::start(false) else { return };
    let key = SignKey::generate();
    let classic = module_bytes("zundoko-classic");
    let original = registry.push("rules/original:v1", &classic, Some(&key)).await;
    // The same artifact (same manifest, same digest) in another repository, with its signature.
    let copied = registry.push("rules/copy:v1", &classic, None).await;
    assert_eq!(original, copied, "the copy is the same artifact");
    copy_signature(&registry, "rules/original", "rules/copy", &copied, &key).await;
    let cluster = Cluster::start().await;
    cluster.create_namespace(RULES_NS).await;
    let operator = cluster.operator_with_registry(wasm(&classic), quick_settings(), registry.settings());
    let spec = |repository: &str, require_identity: bool| {
        let mut spec = oci(&format!("{}/{repository}:v1", registry.addr));
        let source = spec.source.oci.as_mut().unwrap();
        source.public_keys = vec![key.public_pem()];
        source.require_identity = require_identity;
        spec
    };
    create_rules(&cluster, "original-bound", spec("rules/original", true)).await;
    create_rules(&cluster, "copy-bound", spec("rules/copy", true)).await;
    create_rules(&cluster, "copy-free", spec("rules/copy", false)).await;
    phase_and_reason(&cluster, "original-bound", "Active", None, Duration::from_secs(30)).await;
    phase_and_reason(&cluster, "copy-free", "Active", None, Duration::from_secs(30)).await;
    phase_and_reason(&cluster, "copy-bound", "Rejected", Some("SignatureNotVerified"), Duration::from_secs(30)).await;
    let message = rules_status(&cluster, "copy-bound").await.message.unwrap_or_default();
    let (from, to) = (registry.reference("rules/original").repository_name(), registry.reference("rules/copy").repository_name());
    assert!(message.contains(&format!("in repository {from}, not {to} (requireIdentity)")), "{message}");
    // Bound without any key: nothing to bind with, refused (never: not checked).
    let mut keyless = spec("rules/original", true);
    keyless.source.oci.as_mut().unwrap().public_keys.clear();
    create_rules(&cluster, "bound-keyless", keyless).await;
    phase_and_reason(&cluster, "bound-keyless", "Rejected", Some("SignatureNotVerified"), Duration::from_secs(30)).await;
    operator.stop().await;
}

/// A Python with `cryptography`: python3's, or the Python kit's venv. None: skipped, loudly,
/// unless CI=true (`.ci/run` installs it).
fn python_with_cryptography() -> Option<std::path::PathBuf> {
    let kit = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/kits/python/bin/python");
    let candidates = [std::env::var_os("ZUNDOKO_PYTHON").map(Into::into), Some("python3".into()), Some(kit)];
    let found = candidates.into_iter().flatten().find(|python: &std::path::PathBuf| {
        std::process::Command::new(python).args(["-c", "import cryptography"]).output().is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        common::ci::cannot_run("no python3 with `cryptography`: the cosign interoperability test did not run (apt-get install python3-cryptography)");
    }
    found
}

fn cli(args: &[&str], registry: &str) -> (bool, String, String) {
    let out = common::operator_cli(args, &[("ZUNDOKO_INSECURE_REGISTRIES", registry)]);
    let (stdout, stderr) = common::output_text(&out);
    (out.status.success(), stdout, stderr)
}

/// A signature not made by the project's own code (Python's `cryptography`, from cosign's
/// public format) verifies through a real registry; a payload changed after signing, and a
/// signature copied to another artifact, do not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signature_written_by_independent_code_verifies_and_tampered_or_copied_ones_do_not() {
    let Some(python) = python_with_cryptography() else { return };
    let Some(registry) = TestRegistry::start(false) else { return };
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/cosign_sign.py");
    let keys = registry.dir().join("python-keys");
    std::fs::create_dir_all(&keys).unwrap();
    let py = |args: &[&str]| {
        let out = std::process::Command::new(&python).arg(&script).args(args).output().unwrap();
        assert!(out.status.success(), "cosign_sign.py {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    py(&["keygen", keys.to_str().unwrap()]);
    let public = keys.join("py.pub");
    let public = public.to_str().unwrap();
    let (addr, keydir) = (registry.addr.as_str(), keys.to_str().unwrap());
    let classic = registry.push("rules/good:v1", &module_bytes("zundoko-classic"), None).await;
    let tampered = registry.push("rules/tampered:v1", &module_bytes("zundoko-classic"), None).await;
    let other = registry.push("rules/copied:v1", &module_bytes("zundoko-strict-ja"), None).await;
    assert_ne!(classic, other);

    // Unsigned: refused with Python's key trusted.
    let (ok, _, stderr) = cli(&["check", &format!("{addr}/rules/good:v1"), "--trusted-keys", public], addr);
    assert!(!ok && stderr.contains("SignatureNotVerified") && stderr.contains("not signed"), "{stderr}");
    // Signed by Python: verified.
    py(&["sign", keydir, addr, "rules/good", &classic]);
    let (ok, stdout, stderr) = cli(&["check", &format!("{addr}/rules/good:v1"), "--trusted-keys", public], addr);
    assert!(ok, "{stderr}");
    assert!(stdout.contains(&format!("signed by:   {public}")) && stdout.contains("smoke test:  ok"), "{stdout}");
    // The payload changed after it was signed: refused.
    py(&["sign", keydir, addr, "rules/tampered", &tampered, "--tamper"]);
    let (ok, _, stderr) = cli(&["check", &format!("{addr}/rules/tampered:v1"), "--trusted-keys", public], addr);
    assert!(!ok && stderr.contains("SignatureNotVerified") && stderr.contains("none of the trusted keys"), "{stderr}");
    // A good signature of `classic` stored as another artifact's: refused, naming the digest.
    py(&["sign", keydir, addr, "rules/copied", &classic, "--at", &other]);
    let (ok, _, stderr) = cli(&["check", &format!("{addr}/rules/copied:v1"), "--trusted-keys", public], addr);
    assert!(!ok && stderr.contains("SignatureNotVerified") && stderr.contains("not this artifact") && stderr.contains(&classic), "{stderr}");
    // A module file signed as `cosign sign-blob --key` signs it: what --require-signatures takes.
    let file = keys.join("rules.wasm");
    std::fs::write(&file, module_bytes("zundoko-classic")).unwrap();
    let file = file.to_str().unwrap();
    let (ok, _, stderr) = cli(&["check", "--module", file, "--require-signatures", "--trusted-keys", public], addr);
    assert!(!ok && stderr.contains("SignatureRequired"), "{stderr}");
    py(&["sign-blob", keydir, file]);
    let (ok, stdout, stderr) = cli(&["check", "--module", file, "--require-signatures", "--trusted-keys", public], addr);
    assert!(ok && stdout.contains(&format!("signed by:   {public}")), "{stdout}{stderr}");
}

/// A rule set accepted with no `publicKeys` (nothing verified its module) does not keep serving
/// it once keys are added while its registry cannot be asked: adding keys verifies again,
/// failing closed, as removing them does; the registry back, the signature verifies and it serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_added_to_a_rule_set_that_had_none_are_verified_again_failing_closed() {
    use kube::api::PostParams;
    let Some(mut registry) = TestRegistry::start(false) else { return };
    let key = SignKey::generate();
    registry.push("rules/signed:v1", &module_bytes("zundoko-classic"), Some(&key)).await;
    let cluster = Cluster::start().await;
    cluster.create_namespace(RULES_NS).await;
    let operator = cluster.operator_with_registry(wasm(&module_bytes("zundoko-classic")), quick_settings(), registry.settings());
    create_rules(&cluster, "keyless", oci(&format!("{}/rules/signed:v1", registry.addr))).await;
    phase_and_reason(&cluster, "keyless", "Active", None, Duration::from_secs(30)).await;
    sing(&cluster, "before", 0, Some("keyless"), &[]).await;
    cluster.wait_kiyoshied("default", &["before".into()], Duration::from_secs(30)).await;

    // The registry down, then a key added: nothing verified the module with it, so it stops.
    registry.stop();
    let mut zr = rules_api(&cluster).get("keyless").await.unwrap();
    zr.spec.source.oci.as_mut().unwrap().public_keys = vec![key.public_pem()];
    rules_api(&cluster).replace("keyless", &PostParams::default(), &zr).await.unwrap();
    phase_and_reason(&cluster, "keyless", "Pending", Some("RegistryUnreachable"), Duration::from_secs(10)).await;
    assert!(rules_status(&cluster, "keyless").await.module.is_none(), "nothing serves");
    sing(&cluster, "after", 0, Some("keyless"), &[]).await;
    eventually("Ready=False RulesNotActive", Duration::from_secs(10), async || {
        ready(&cluster, "after").await.is_some_and(|(s, reason, message)| s == "False" && reason == "RulesNotActive" && message.contains("RegistryUnreachable"))
    })
    .await;
    assert_eq!(decided_by(&cluster, "after").await, None, "the unverified module decided after keys were added");

    // The registry back: the signature verifies with the key added, and the waiting Hikawa sings.
    registry.resume();
    phase_and_reason(&cluster, "keyless", "Active", None, Duration::from_secs(30)).await;
    cluster.wait_kiyoshied("default", &["after".into()], Duration::from_secs(30)).await;
    operator.stop().await;
}
