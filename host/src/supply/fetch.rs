//! One way from any source to a module's verified bytes, as Kubewarden's policy-fetcher has one
//! `fetch_policy`: a file, a ConfigMap's `binaryData`, or an artifact in an OCI registry, read
//! (or pulled) and checked in one place: the size bound, the digest (formed once, here), the
//! signature (a registry artifact's against the trusted keys; with `--require-signatures`, a
//! file's or a ConfigMap's too, carried beside it) and the pin. The default module's
//! sources (`sources/file.rs`, `sources/configmap.rs`, `sources/oci.rs`), each rule set's
//! (`sources/rulesets.rs`) and the CLI's `check` all call [`fetch_module`]; what it hands back
//! goes to the loader to be compiled and checked as a module.

use std::fmt;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::ConfigMap;
use oci_client::secrets::RegistryAuth;

use crate::supply::digest::digest;
use crate::supply::oci::{ModuleRef, PullError, Registry, TrustedKey};

/// Where a module is fetched from.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// A file (the module file of a mounted ConfigMap, or a path given to the CLI).
    File(&'a Path),
    /// The module a ConfigMap holds under `key` in its `binaryData`.
    ConfigMap { namespace: &'a str, name: &'a str, key: &'a str, object: &'a ConfigMap },
    /// An artifact in a registry: `digest`, the manifest digest the reference was resolved to
    /// (resolved here if `None`). `retry`: try again (the registry's tries) after a failure
    /// that may pass; a reconcile tries once and requeues instead. `identity`: a signature
    /// counts only if its payload names this repository (a rule set's `requireIdentity`).
    Oci { reference: &'a ModuleRef, digest: Option<&'a str>, retry: bool, identity: bool },
}

/// What the bytes must pass besides their source's own checks.
#[derive(Clone, Copy, Debug, Default)]
pub struct Checks<'a> {
    /// The digest they must have (`sha256:<hex>`, normalized), if pinned.
    pub pin: Option<&'a str>,
    /// What set the pin (`--module-sha256`, `spec.sha256`), for the message.
    pub pinned_by: &'static str,
    /// The largest module accepted, from any source (a registry's own bound,
    /// `--max-module-mib`, also refuses a bigger layer before a byte of it is read).
    pub max_bytes: Option<u64>,
    /// Keys of which one more must have signed the module (a tenant policy's `requiredKeys`),
    /// beside the operator's and the source's own: an artifact's signatures in its registry, a
    /// ConfigMap's or a file's carried beside it.
    pub required_keys: &'a [TrustedKey],
    /// An artifact is served only if its registry answers for these credentials now, never
    /// from the cache alone (a tenant's: a digest another tenant pulled with its own
    /// credentials is not handed to one who could not pull it; `Registry::fetch_verified`).
    pub prove_access: bool,
}

/// Where a candidate came from, for logs and Events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    File(PathBuf),
    ConfigMap { namespace: String, name: String, key: String },
    /// An OCI artifact, pinned by digest once pulled.
    Oci(String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(path) => write!(f, "file {}", path.display()),
            Origin::ConfigMap { namespace, name, key } => write!(f, "ConfigMap {namespace}/{name} key {key}"),
            Origin::Oci(reference) => write!(f, "registry {reference}"),
        }
    }
}

impl Source<'_> {
    /// Where the bytes come from (for an artifact, pinned once its digest is known).
    pub fn origin(&self) -> Origin {
        match self {
            Source::File(path) => Origin::File(path.to_path_buf()),
            Source::ConfigMap { namespace, name, key, .. } => Origin::ConfigMap { namespace: (*namespace).into(), name: (*name).into(), key: (*key).into() },
            Source::Oci { reference, digest: Some(digest), .. } => Origin::Oci(reference.pinned(digest).to_string()),
            Source::Oci { reference, digest: None, .. } => Origin::Oci(reference.to_string()),
        }
    }
}

/// A module's bytes, checked.
#[derive(Clone, Debug)]
pub struct Fetched {
    pub bytes: Vec<u8>,
    /// `sha256:<hex>` of `bytes`, formed once.
    pub digest: String,
    pub origin: Origin,
    /// From a registry: the artifact pinned by its manifest digest.
    pub pinned: Option<ModuleRef>,
    /// The trusted key (or keys) whose signature verified, when keys are trusted (a file or a
    /// ConfigMap carries no signature).
    pub signed_by: Option<String>,
    /// From a registry: served from the blob cache, the registry not asked.
    pub from_cache: bool,
}

/// Why a source gives no module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// CamelCase, for conditions and Events (`SourceNotFound`, `ModulePinMismatch`, ...).
    pub reason: String,
    pub message: String,
    /// It may resolve by itself (the ConfigMap does not exist yet, the registry is down): a
    /// rule set is Pending, not Rejected.
    pub pending: bool,
}

impl Problem {
    pub fn new(reason: &str, message: String, pending: bool) -> Self {
        Problem { reason: reason.into(), message: crate::text::printable(&message, 1024), pending }
    }

    /// A verdict of trust, not a source's passing trouble: the signature does not verify with
    /// the keys trusted now, a key is unreadable, the registry is no longer allowed. What the
    /// source gave before is no longer trusted either: nothing of it serves (fail closed).
    pub fn distrusts(&self) -> bool {
        DISTRUSTING.contains(&self.reason.as_str())
    }
}

/// The reasons of [`Problem::distrusts`].
pub const DISTRUSTING: [&str; 7] = ["SignatureNotVerified", "SignatureRequired", "InvalidPublicKey", "RegistryNotAllowed", "PolicyRefused", "NoTenantPolicy", "PolicyAmbiguous"];

/// A registry's refusal as a problem: one that may pass by itself (the registry down, a 5xx,
/// credentials refused until the pull secret is fixed) is pending, and is tried again.
impl From<&PullError> for Problem {
    fn from(error: &PullError) -> Self {
        let may_pass = error.transient() || matches!(error, PullError::Unauthorized { .. });
        Problem::new(error.reason(), error.to_string(), may_pass)
    }
}

/// Bytes that fail [`Checks`].
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("the module's digest {actual} is not the pinned {pinned} ({by})")]
    PinMismatch { pinned: String, actual: String, by: &'static str },
    #[error("the module is {size} bytes, over the {limit}-byte limit")]
    TooLarge { size: u64, limit: u64 },
}

impl Refusal {
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::PinMismatch { .. } => "ModulePinMismatch",
            Refusal::TooLarge { .. } => "ModuleTooLarge",
        }
    }
}

impl From<Refusal> for Problem {
    fn from(refusal: Refusal) -> Self {
        Problem::new(refusal.reason(), refusal.to_string(), false)
    }
}

/// The size bound and the pin, for bytes of `size` whose digest is `actual`. [`fetch_module`]
/// applies it to what it fetched; the default module's swapper to what any of its sources
/// offered (its pin, `--module-sha256`, holds whichever source the bytes came from).
pub fn check(size: u64, actual: &str, checks: &Checks) -> Result<(), Refusal> {
    if let Some(limit) = checks.max_bytes
        && size > limit
    {
        return Err(Refusal::TooLarge { size, limit });
    }
    match checks.pin {
        Some(pinned) if pinned != actual => Err(Refusal::PinMismatch { pinned: pinned.into(), actual: actual.into(), by: checks.pinned_by }),
        _ => Ok(()),
    }
}

/// A module's bytes from `source`, checked: read within the size bound (a registry's artifact
/// also checked against its digests and, with `keys` or the registry's trusted keys, a
/// signature verified), its digest formed, and the pin checked. `auth` serves an OCI source
/// only; `registry` must be given for one, and holds the trusted keys (and whether a file or a
/// ConfigMap must be signed too, `--require-signatures`); `keys` are a rule set's own trusted
/// keys, which must verify beside the registry's.
pub async fn fetch_module(source: Source<'_>, auth: &RegistryAuth, keys: &[TrustedKey], registry: Option<&Registry>, checks: &Checks<'_>) -> Result<Fetched, Problem> {
    let (bytes, pinned, signed_by, from_cache) = match source {
        Source::File(path) => (read_file(path, checks.max_bytes)?, None, None, false),
        Source::ConfigMap { namespace, name, key, object } => (configmap_bytes(namespace, name, key, object)?, None, None, false),
        Source::Oci { reference, digest, retry, identity } => {
            let registry = registry.ok_or_else(|| Problem::new("RegistryUnreachable", format!("no registry client to pull {reference}"), false))?;
            let digest = match digest {
                Some(digest) => digest.to_owned(),
                None if retry => registry.resolve(reference, auth).await.map_err(|e| Problem::from(&e))?,
                None => registry.resolve_once(reference, auth).await.map_err(|e| Problem::from(&e))?,
            };
            let tries = if retry { registry.settings().tries } else { 1 };
            let pulled = registry.fetch_verified(tries, reference, &digest, auth, &[keys, checks.required_keys], identity, checks.prove_access).await;
            let pulled = pulled.map_err(|e| Problem::from(&e))?;
            (pulled.bytes, Some(pulled.pinned), pulled.signed_by, pulled.from_cache)
        }
    };
    let origin = match &pinned {
        Some(pinned) => Origin::Oci(pinned.to_string()),
        None => source.origin(),
    };
    let digest = digest(&bytes);
    check(bytes.len() as u64, &digest, checks)?;
    // A file or a ConfigMap is signed beside it: required, so that signing cannot be bypassed
    // by switching a source from a registry to a ConfigMap.
    let signed_by = match registry {
        Some(registry) if registry.settings().require_signatures && pinned.is_none() => Some(signed_beside(&source, &digest, registry, &registry.keys().current())?),
        _ => signed_by,
    };
    // A policy's required keys: one of them must have signed it too.
    let signed_by = match registry {
        Some(registry) if !checks.required_keys.is_empty() && pinned.is_none() => {
            let by = signed_beside(&source, &digest, registry, checks.required_keys)?;
            Some(signed_by.map_or_else(|| by.clone(), |first| format!("{first} and {by}")))
        }
        _ => signed_by,
    };
    Ok(Fetched { bytes, digest, origin, pinned, signed_by, from_cache })
}

/// The annotation a ConfigMap carries the signature of its module under key `KEY` in:
/// `SIGNATURE_ANNOTATION_PREFIX` + `KEY` (its `KEY.sig` entry serves as well).
pub const SIGNATURE_ANNOTATION_PREFIX: &str = "zundokokiyoshi.kaitoy.github.com/signature.";
/// A module file's signature is the file beside it named so (`rules.wasm.sig`: how a
/// ConfigMap's `rules.wasm.sig` entry appears next to its module when mounted).
pub const SIGNATURE_SUFFIX: &str = ".sig";

/// The signature file beside the module file `path` (`rules.wasm.sig`).
pub fn signature_beside(path: &Path) -> PathBuf {
    let mut sidecar = path.as_os_str().to_owned();
    sidecar.push(SIGNATURE_SUFFIX);
    PathBuf::from(sidecar)
}
/// A signature is about 100 bytes of base64: more is not one.
const MAX_SIGNATURE_BYTES: u64 = 4096;

/// Which trusted key signed a file's or a ConfigMap's module (`sha256` `digest`), from the
/// signature carried beside it; or the refusal: `SignatureRequired` (none) or
/// `SignatureNotVerified`, both verdicts (a rule set fails closed).
fn signed_beside(source: &Source<'_>, digest: &str, registry: &Registry, keys: &[TrustedKey]) -> Result<String, Problem> {
    let origin = source.origin();
    let (found, beside) = match source {
        Source::File(path) => {
            let sidecar = signature_beside(path);
            (read_signature(&sidecar)?, format!("in {}", sidecar.display()))
        }
        Source::ConfigMap { key, object, .. } => {
            (configmap_signature(key, object), format!("in the annotation {SIGNATURE_ANNOTATION_PREFIX}{key} (or the entry {key}{SIGNATURE_SUFFIX})"))
        }
        Source::Oci { .. } => return Err(Problem::new("SignatureNotVerified", format!("{origin}: an artifact is verified by its registry's signatures"), false)),
    };
    let Some(signature) = found else {
        return Err(Problem::new(
            "SignatureRequired",
            format!("{origin} is not signed and a signature is required (--require-signatures, or a tenant policy's requiredKeys): sign the module (zundoko-operator sign --key KEY MODULE) and put the signature {beside}"),
            false,
        ));
    };
    if let Some(why) = registry.keys().unreadable() {
        return Err(Problem::new("SignatureNotVerified", format!("{origin}: not verified: the trusted keys cannot be read now ({why})"), false));
    }
    crate::supply::oci::signature::verify_digest(digest, &signature, keys)
        .map_err(|why| Problem::new("SignatureNotVerified", format!("{origin}: {why}"), false))
}

/// A signature file's text, read within its bound; `None` if there is none.
fn read_signature(path: &Path) -> Result<Option<String>, Problem> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Problem::new("ModuleUnreadable", format!("cannot read the signature {}: {e}", path.display()), false)),
    };
    let mut text = Vec::new();
    file.take(MAX_SIGNATURE_BYTES + 1).read_to_end(&mut text).map_err(|e| Problem::new("ModuleUnreadable", format!("cannot read the signature {}: {e}", path.display()), false))?;
    if text.len() as u64 > MAX_SIGNATURE_BYTES {
        return Err(Problem::new("SignatureNotVerified", format!("the signature {} is over {MAX_SIGNATURE_BYTES} bytes: not a signature", path.display()), false));
    }
    Ok(Some(String::from_utf8_lossy(&text).into_owned()))
}

/// The signature a ConfigMap carries for its module under `key`: the annotation, else a
/// `KEY.sig` entry.
fn configmap_signature(key: &str, cm: &ConfigMap) -> Option<String> {
    let entry = format!("{key}{SIGNATURE_SUFFIX}");
    let annotation = cm.metadata.annotations.as_ref().and_then(|a| a.get(&format!("{SIGNATURE_ANNOTATION_PREFIX}{key}"))).cloned();
    let data = || cm.data.as_ref().and_then(|d| d.get(&entry)).cloned();
    let binary = || cm.binary_data.as_ref().and_then(|d| d.get(&entry)).map(|b| String::from_utf8_lossy(&b.0).into_owned());
    annotation.or_else(data).or_else(binary).filter(|s| s.len() as u64 <= MAX_SIGNATURE_BYTES)
}

/// A file's bytes, refused past `max_bytes` before it is read whole.
fn read_file(path: &Path, max_bytes: Option<u64>) -> Result<Vec<u8>, Problem> {
    let unreadable = |e: std::io::Error| {
        let message = format!("cannot read module {}: {e}", path.display());
        match e.kind() {
            std::io::ErrorKind::NotFound => Problem::new(NOT_FOUND, message, true),
            _ => Problem::new("ModuleUnreadable", message, false),
        }
    };
    let file = std::fs::File::open(path).map_err(unreadable)?;
    if let Some(limit) = max_bytes {
        let size = file.metadata().map_err(unreadable)?.len();
        if size > limit {
            return Err(Refusal::TooLarge { size, limit }.into());
        }
    }
    let mut bytes = Vec::new();
    match max_bytes {
        // A file that grew since: one byte more than the bound tells it is too big.
        Some(limit) => file.take(limit.saturating_add(1)).read_to_end(&mut bytes),
        None => (&file).read_to_end(&mut bytes),
    }
    .map_err(unreadable)?;
    Ok(bytes)
}

/// The reason of a source that does not exist (yet).
pub const NOT_FOUND: &str = "SourceNotFound";

/// The module a ConfigMap holds under `key`, or why there is none.
fn configmap_bytes(namespace: &str, name: &str, key: &str, cm: &ConfigMap) -> Result<Vec<u8>, Problem> {
    match cm.binary_data.as_ref().and_then(|d| d.get(key)) {
        Some(bytes) => Ok(bytes.0.clone()),
        None if cm.data.as_ref().is_some_and(|d| d.contains_key(key)) => Err(Problem::new(
            "ModuleUnreadable",
            format!("ConfigMap {namespace}/{name} has `{key}` under data, not binaryData: a wasm module must be binary (kubectl create configmap --from-file does that)"),
            false,
        )),
        None => Err(Problem::new("ModuleUnreadable", format!("ConfigMap {namespace}/{name} has no key `{key}` in binaryData"), false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetch(source: Source<'_>, checks: &Checks<'_>) -> Result<Fetched, Problem> {
        futures::executor::block_on(fetch_module(source, &RegistryAuth::Anonymous, &[], None, checks))
    }

    /// A directory of this test's own, removed when dropped.
    struct Dir(PathBuf);

    impl Dir {
        fn new(test: &str) -> Dir {
            let dir = std::env::temp_dir().join(format!("zundoko-fetch-{}-{test}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            Dir(dir)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn module_file(test: &str, bytes: &[u8]) -> (Dir, PathBuf) {
        let dir = Dir::new(test);
        let path = dir.0.join("rules.wasm");
        std::fs::write(&path, bytes).unwrap();
        (dir, path)
    }

    #[test]
    fn a_file_is_read_its_digest_formed_once_and_named() {
        let (_dir, path) = module_file("read", b"\0asm module");
        let fetched = fetch(Source::File(&path), &Checks::default()).unwrap();
        assert_eq!(fetched.bytes, b"\0asm module");
        assert_eq!(fetched.digest, digest(b"\0asm module"));
        assert_eq!(fetched.origin, Origin::File(path.clone()));
        assert_eq!((fetched.pinned, fetched.signed_by, fetched.from_cache), (None, None, false));
        // Exactly at the bound, and pinned to its own digest in any spelling: served.
        let pin = crate::supply::digest::normalize_pin(&fetched.digest[7..].to_uppercase());
        let checks = Checks { pin: Some(&pin), pinned_by: "--module-sha256", max_bytes: Some(11), required_keys: &[], prove_access: false };
        assert_eq!(fetch(Source::File(&path), &checks).unwrap().digest, fetched.digest);
    }

    #[test]
    fn a_file_too_big_is_refused_before_it_is_read_whole() {
        let (_dir, path) = module_file("big", &[7u8; 4096]);
        let problem = fetch(Source::File(&path), &Checks { max_bytes: Some(100), ..Checks::default() }).unwrap_err();
        assert_eq!((problem.reason.as_str(), problem.pending), ("ModuleTooLarge", false));
        assert_eq!(problem.message, "the module is 4096 bytes, over the 100-byte limit");
    }

    #[test]
    fn a_pin_mismatch_names_both_digests_and_who_pinned() {
        let (_dir, path) = module_file("pin", b"\0asm module");
        let other = digest(b"another module");
        let problem = fetch(Source::File(&path), &Checks { pin: Some(&other), pinned_by: "spec.sha256", max_bytes: None, required_keys: &[], prove_access: false }).unwrap_err();
        assert_eq!(problem.reason, "ModulePinMismatch");
        assert_eq!(problem.message, format!("the module's digest {} is not the pinned {other} (spec.sha256)", digest(b"\0asm module")));
    }

    #[test]
    fn a_missing_file_may_appear_and_an_unreadable_one_is_named() {
        let dir = Dir::new("missing");
        let problem = fetch(Source::File(&dir.0.join("nothing.wasm")), &Checks::default()).unwrap_err();
        assert_eq!((problem.reason.as_str(), problem.pending), (NOT_FOUND, true));
        assert!(problem.message.starts_with("cannot read module "), "{}", problem.message);
        let problem = fetch(Source::File(&dir.0), &Checks::default()).unwrap_err();
        assert_eq!(problem.reason, "ModuleUnreadable");
        assert!(problem.message.starts_with("cannot read module "), "{}", problem.message);
    }

    /// A registry client that requires files and ConfigMaps signed by `key`.
    fn requiring(key: &crate::supply::oci::SignKey) -> std::sync::Arc<Registry> {
        let settings = crate::supply::oci::RegistrySettings { trusted_keys: vec![key.trusted("team.pub")], require_signatures: true, ..Default::default() };
        Registry::new(settings).unwrap()
    }

    fn fetch_signed(source: Source<'_>, registry: &Registry) -> Result<Fetched, Problem> {
        futures::executor::block_on(fetch_module(source, &RegistryAuth::Anonymous, &[], Some(registry), &Checks::default()))
    }

    #[test]
    fn with_signatures_required_a_file_serves_only_with_a_signature_by_a_trusted_key_beside_it() {
        use crate::supply::oci::{SignKey, signature::sign_digest};
        let (key, other) = (SignKey::generate(), SignKey::generate());
        let registry = requiring(&key);
        let (_dir, path) = module_file("signed", b"\0asm module");
        let sidecar = PathBuf::from(format!("{}.sig", path.display()));
        let unsigned = fetch_signed(Source::File(&path), &registry).unwrap_err();
        assert_eq!((unsigned.reason.as_str(), unsigned.pending, unsigned.distrusts()), ("SignatureRequired", false, true));
        assert!(unsigned.message.contains("zundoko-operator sign") && unsigned.message.contains(&sidecar.display().to_string()), "{}", unsigned.message);
        std::fs::write(&sidecar, sign_digest(&other, &digest(b"\0asm module")).unwrap()).unwrap();
        let wrong = fetch_signed(Source::File(&path), &registry).unwrap_err();
        assert_eq!(wrong.reason, "SignatureNotVerified");
        assert!(wrong.message.contains("none of the trusted keys (team.pub"), "{}", wrong.message);
        // A signature of other bytes: the module changed after it was signed.
        std::fs::write(&sidecar, sign_digest(&key, &digest(b"another module")).unwrap()).unwrap();
        assert_eq!(fetch_signed(Source::File(&path), &registry).unwrap_err().reason, "SignatureNotVerified");
        std::fs::write(&sidecar, format!("{}\n", sign_digest(&key, &digest(b"\0asm module")).unwrap())).unwrap();
        let fetched = fetch_signed(Source::File(&path), &registry).unwrap();
        assert!(fetched.signed_by.is_some_and(|s| s.starts_with("team.pub")));
        // Without the requirement, as before: no signature read.
        std::fs::remove_file(&sidecar).unwrap();
        assert_eq!(fetch(Source::File(&path), &Checks::default()).unwrap().signed_by, None);
    }

    #[test]
    fn with_signatures_required_a_configmap_carries_its_signature_in_an_annotation_or_an_entry() {
        use crate::supply::oci::{SignKey, signature::sign_digest};
        let key = SignKey::generate();
        let registry = requiring(&key);
        let mut cm = ConfigMap { binary_data: Some([("rules.wasm".to_string(), k8s_openapi::ByteString(b"\0asm".to_vec()))].into()), ..ConfigMap::default() };
        let source = |cm: &ConfigMap| fetch_signed(Source::ConfigMap { namespace: "ns", name: "cm", key: "rules.wasm", object: cm }, &registry);
        let unsigned = source(&cm).unwrap_err();
        assert_eq!(unsigned.reason, "SignatureRequired");
        assert!(unsigned.message.contains("zundokokiyoshi.kaitoy.github.com/signature.rules.wasm"), "{}", unsigned.message);
        let signature = sign_digest(&key, &digest(b"\0asm")).unwrap();
        cm.data = Some([("rules.wasm.sig".to_string(), signature.clone())].into());
        assert!(source(&cm).unwrap().signed_by.is_some(), "the entry beside the module");
        cm.data = None;
        cm.metadata.annotations = Some([(format!("{SIGNATURE_ANNOTATION_PREFIX}rules.wasm"), signature)].into());
        assert!(source(&cm).unwrap().signed_by.is_some(), "the annotation");
    }

    #[test]
    fn a_configmap_module_under_data_or_missing_is_named_as_the_problem() {
        let mut cm = ConfigMap::default();
        fn source(cm: &ConfigMap) -> Source<'_> {
            Source::ConfigMap { namespace: "ns", name: "cm", key: "rules.wasm", object: cm }
        }
        assert!(fetch(source(&cm), &Checks::default()).unwrap_err().message.contains("no key `rules.wasm`"));
        cm.data = Some([("rules.wasm".to_string(), "text".to_string())].into());
        assert!(fetch(source(&cm), &Checks::default()).unwrap_err().message.contains("under data, not binaryData"));
        cm.binary_data = Some([("rules.wasm".to_string(), k8s_openapi::ByteString(b"\0asm".to_vec()))].into());
        let fetched = fetch(source(&cm), &Checks::default()).unwrap();
        assert_eq!((fetched.bytes.as_slice(), fetched.digest), (&b"\0asm"[..], digest(b"\0asm")));
        assert_eq!(fetched.origin.to_string(), "ConfigMap ns/cm key rules.wasm");
        assert_eq!(fetch(source(&cm), &Checks { max_bytes: Some(3), ..Checks::default() }).unwrap_err().reason, "ModuleTooLarge");
    }

    #[test]
    fn an_artifact_needs_a_registry() {
        let reference: ModuleRef = "localhost:5000/rules/ja:1".parse().unwrap();
        let problem = fetch(Source::Oci { reference: &reference, digest: None, retry: false, identity: false }, &Checks::default()).unwrap_err();
        assert!(problem.message.contains("no registry client"), "{}", problem.message);
    }
}
