//! Pulling modules from, and pushing them to, an OCI registry, bounded in size, time,
//! concurrency and retries. A pull checks every byte against its digest before the module is
//! handed on to be compiled, and the signature (if keys are trusted) against the trusted keys;
//! what it pulled goes to the blob cache, which serves it again without the registry.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol, ImageLayer};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciImageManifest};
use oci_client::secrets::RegistryAuth;

use super::artifact;
use super::cache::BlobCache;
use super::keys::OperatorKeys;
use super::origins::Origins;
use super::permits::Permits;
use super::wire::Wire;
use super::reference::ModuleRef;
use super::signature::{self, Found, SignKey, TrustedKey};
use super::tag_records::TagSources;
pub use super::settings::{RegistrySettings, registry_allowed};

/// A manifest (or a signature's payload) is small: these bound what is read of them.
const MAX_MANIFEST_BYTES: usize = 256 << 10;
const MAX_PAYLOAD_BYTES: u64 = 64 << 10;
const MAX_SIGNATURES: usize = 16;
/// `--min-poll-secs`' default: a tag that mints an artifact at every poll costs a pull, a
/// compile and a kept copy at most this often per rule set.
pub const DEFAULT_MIN_POLL: Duration = Duration::from_secs(30);

/// Why a module could not be had from a registry.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    #[error("registry {registry} is unreachable or failing: {detail}")]
    Unreachable { registry: String, detail: String },
    #[error("{reference} was not found in the registry")]
    NotFound { reference: String },
    #[error("registry {registry} refused the credentials for {reference} ({detail})")]
    Unauthorized { registry: String, reference: String, detail: String },
    #[error("{reference} is not a Wasm component artifact: {detail}")]
    NotAWasmArtifact { reference: String, detail: String },
    #[error("{what} of {reference} is {size} bytes, over the {limit}-byte limit")]
    TooLarge { what: &'static str, reference: String, size: u64, limit: u64 },
    #[error("{what} of {reference} does not match its digest: expected {expected}, got {actual}")]
    DigestMismatch { what: &'static str, reference: String, expected: String, actual: String },
    #[error("{reference}: {detail}")]
    NotVerified { reference: String, detail: String },
    #[error("{reference}: the registry answered: {detail}")]
    Registry { reference: String, detail: String },
    #[error("{reference}: {detail}")]
    RedirectRefused { reference: String, detail: String },
    #[error("{reference}: {detail}")]
    RealmRefused { reference: String, detail: String },
    #[error("{reference} names registry {registry}, which --allowed-registries does not allow")]
    NotAllowed { reference: String, registry: String },
    #[error("no registry can be asked: {detail}")]
    NoCertificateStore { detail: String },
}

impl PullError {
    /// CamelCase, for conditions, Events and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            PullError::Unreachable { .. } => "RegistryUnreachable",
            PullError::NotFound { .. } => "ModuleNotFound",
            PullError::Unauthorized { .. } => "RegistryUnauthorized",
            PullError::NotAWasmArtifact { .. } => "NotAWasmArtifact",
            PullError::TooLarge { what: "the module layer", .. } => "ModuleTooLarge",
            PullError::TooLarge { .. } => "RegistryAnswerTooLarge",
            PullError::DigestMismatch { .. } => "DigestMismatch",
            PullError::NotVerified { .. } => "SignatureNotVerified",
            PullError::Registry { .. } => "RegistryError",
            PullError::RedirectRefused { .. } => "RedirectRefused",
            PullError::RealmRefused { .. } => "TokenRealmRefused",
            PullError::NotAllowed { .. } => "RegistryNotAllowed",
            PullError::NoCertificateStore { .. } => "CertificateStoreUnreadable",
        }
    }

    /// Whether trying again later may succeed without anyone changing anything (a certificate
    /// store may yet be mounted: meanwhile what the cache holds serves).
    pub fn transient(&self) -> bool {
        matches!(self, PullError::Unreachable { .. } | PullError::NoCertificateStore { .. })
    }
}

/// What a module's signatures must pass: a signature by one key of each set (the operator's,
/// a rule set's own), naming `identity` as its repository if given.
struct Verifying<'a> {
    keysets: &'a [&'a [TrustedKey]],
    identity: Option<&'a str>,
}

impl Verifying<'_> {
    /// The signer for each set of keys, or why one set has none.
    fn verify(&self, manifest_digest: &str, found: &[Found]) -> Result<Vec<String>, String> {
        self.keysets.iter().map(|keys| signature::verify(manifest_digest, found, keys, self.identity)).collect()
    }

    /// What the cache keeps of `found`: the first few that verify (`signature::verified`).
    fn verified(&self, manifest_digest: &str, found: Vec<Found>) -> Vec<Found> {
        signature::verified(manifest_digest, found, self.keysets, self.identity, super::cache::MAX_KEPT_SIGNATURES)
    }
}

/// What the cache holds of an artifact.
enum Cached {
    Hit(Fetched),
    /// The artifact and its signatures, which do not verify with the keys trusted now: why.
    Distrusted(String),
    Miss,
}

/// What a pull found: the module's bytes, checked.
#[derive(Clone, Debug)]
pub struct Fetched {
    /// The artifact pinned: `REGISTRY/REPOSITORY@<manifest digest>`.
    pub pinned: ModuleRef,
    pub manifest_digest: String,
    pub bytes: Vec<u8>,
    /// The trusted key that signed it, when keys are trusted.
    pub signed_by: Option<String>,
    /// Served from the cache, the registry not asked.
    pub from_cache: bool,
}

pub struct Registry {
    settings: RegistrySettings,
    permits: Permits,
    cache: Option<BlobCache>,
    /// What pulls speak through (oci-client only pushes): built when a registry is first
    /// asked, so that an operator no registry serves starts without a certificate store.
    wire: OnceLock<Wire>,
    /// The operator's trusted keys as they are now.
    keys: Arc<OperatorKeys>,
    /// Which tags the sources name: the cache's records of the others are removed.
    tag_sources: Mutex<TagSources>,
}


use crate::supply::digest::digest as sha256;

#[cfg(test)]
pub(super) fn sha256_of(bytes: &[u8]) -> String {
    sha256(bytes)
}

impl Registry {
    pub fn new(settings: RegistrySettings) -> Result<Arc<Registry>, String> {
        // oci-client's reqwest is built without a TLS provider: the process's is ring, as kube's.
        let _ = rustls::crypto::ring::default_provider().install_default();
        if settings.require_signatures && settings.trusted_keys.is_empty() && settings.trusted_key_paths.is_empty() {
            return Err("--require-signatures needs trusted keys (--trusted-keys): without them no signature can verify".into());
        }
        let cache = settings.cache_dir.as_deref().map(BlobCache::open).transpose()?;
        if let Some(cache) = &cache {
            cache.disk().set_max_bytes(settings.cache_max_bytes);
        }
        Wire::check_extra_ca(&settings.extra_ca_pem)?;
        let permits = Permits::new(settings.concurrent_pulls, settings.max_pulls_in_flight);
        let keys = Arc::new(OperatorKeys::new(settings.trusted_keys.clone(), settings.trusted_key_paths.clone()));
        let tag_sources = Mutex::new(TagSources::new(settings.tag_record_grace));
        Ok(Arc::new(Registry { settings, permits, cache, wire: OnceLock::new(), keys, tag_sources }))
    }

    /// A registry client with the default settings: no cache, no keys; nothing in it can fail
    /// (what the environment decides, the certificate store, is read when a registry is asked).
    pub fn unconfigured() -> Arc<Registry> {
        let settings = RegistrySettings::default();
        let (permits, keys) = (Permits::new(settings.concurrent_pulls, settings.max_pulls_in_flight), Arc::new(OperatorKeys::new(Vec::new(), Vec::new())));
        let tag_sources = Mutex::new(TagSources::new(settings.tag_record_grace));
        Arc::new(Registry { settings, permits, cache: None, wire: OnceLock::new(), keys, tag_sources })
    }

    /// The HTTP client of pulls, built the first time one is needed (and tried again at the
    /// next pull if it could not be: the certificate store may be mounted since).
    fn wire(&self) -> Result<&Wire, PullError> {
        if let Some(wire) = self.wire.get() {
            return Ok(wire);
        }
        let settings = &self.settings;
        let origins = Origins { insecure: settings.insecure.clone(), allowed: settings.allowed.clone(), trusted_realms: settings.trusted_realms.clone() };
        let wire = Wire::new(origins, settings.timeout, &settings.extra_ca_pem).map_err(|detail| PullError::NoCertificateStore { detail })?;
        Ok(self.wire.get_or_init(|| wire))
    }

    /// `reference`'s tag (`--module-oci`'s) is named for the process's life: its record stays.
    pub fn name_tag_always(&self, reference: &ModuleRef) {
        if reference.digest.is_none() {
            self.tag_sources.lock().unwrap_or_else(|p| p.into_inner()).name_always(BlobCache::tag_file(reference));
        }
    }

    /// The rule sets, as listed now, name these references: from now on the cache's records
    /// of tags no source names are removed once past their grace (`tag_records.rs`).
    pub fn rule_sets_name<'a>(&self, references: impl IntoIterator<Item = &'a ModuleRef>) {
        let named = references.into_iter().filter(|r| r.digest.is_none()).map(BlobCache::tag_file).collect();
        let look = self.tag_sources.lock().unwrap_or_else(|p| p.into_inner()).rule_sets_name(named, std::time::Instant::now());
        if look {
            self.remove_unnamed_tags();
        }
    }

    /// Remove the records of tags no source names, past their grace (none until the rule
    /// sets are listed).
    fn remove_unnamed_tags(&self) {
        let Some(cache) = &self.cache else { return };
        let present = cache.tag_records();
        let remove = self.tag_sources.lock().unwrap_or_else(|p| p.into_inner()).due_for_removal(&present, std::time::Instant::now());
        for record in remove {
            cache.remove_tag_record(&record);
        }
    }

    /// The operator's trusted keys (`--trusted-keys`) as they are now.
    pub fn keys(&self) -> &Arc<OperatorKeys> {
        &self.keys
    }

    /// Tries given a permit since the start, by tenant (the metrics' pulls).
    pub fn pulls_by_tenant(&self) -> Vec<(crate::supply::tenant::Tenant, u64)> {
        self.permits.given()
    }

    pub fn settings(&self) -> &RegistrySettings {
        &self.settings
    }

    /// Refused unless `--allowed-registries` (if given) allows the reference's registry.
    fn allowed(&self, reference: &ModuleRef) -> Result<(), PullError> {
        if self.settings.allowed.is_empty() || self.settings.allowed.iter().any(|p| registry_allowed(p, &reference.registry)) {
            return Ok(());
        }
        Err(PullError::NotAllowed { reference: reference.to_string(), registry: reference.registry.clone() })
    }

    /// A client per push: oci-client keeps the first credentials given for a registry,
    /// and two rule sets may use two pull secrets for one registry.
    fn client(&self) -> oci_client::Client {
        oci_client::Client::new(ClientConfig {
            protocol: ClientProtocol::HttpsExcept(self.settings.insecure.clone()),
            connect_timeout: Some(self.settings.timeout.min(Duration::from_secs(10))),
            read_timeout: Some(self.settings.timeout),
            platform_resolver: None,
            max_concurrent_download: 1,
            max_concurrent_upload: 2,
            extra_root_certificates: self
                .settings
                .extra_ca_pem
                .iter()
                .map(|pem| oci_client::client::Certificate { encoding: oci_client::client::CertificateEncoding::Pem, data: pem.clone() })
                .collect(),
            ..ClientConfig::default()
        })
    }

    /// The digest a tag points at now (a digest reference is its own). With the registry
    /// unreachable, the digest the tag had when last resolved here, if the cache kept it.
    pub async fn resolve(&self, reference: &ModuleRef, auth: &RegistryAuth) -> Result<String, PullError> {
        self.resolve_tries(self.settings.tries, reference, auth).await
    }

    /// `resolve` with one try: for a reconcile, which requeues instead of pausing to try again.
    pub async fn resolve_once(&self, reference: &ModuleRef, auth: &RegistryAuth) -> Result<String, PullError> {
        self.resolve_tries(1, reference, auth).await
    }

    /// The digest a tag points at now as the registry answers it, once: never the record the
    /// cache kept. For a tag polled while a digest of it serves: the record may be older than
    /// what serves (or replayed into the cache), and one failed request must not roll the
    /// module back; only the registry's own answer moves it.
    pub async fn resolve_anew(&self, reference: &ModuleRef, auth: &RegistryAuth) -> Result<String, PullError> {
        self.resolve_with(1, false, reference, auth).await
    }

    async fn resolve_tries(&self, tries: u32, reference: &ModuleRef, auth: &RegistryAuth) -> Result<String, PullError> {
        self.resolve_with(tries, true, reference, auth).await
    }

    /// `from_record`: with the registry unreachable, the digest the cache's record of the tag
    /// names (only when nothing of it serves yet: a restart with the registry down).
    async fn resolve_with(&self, tries: u32, from_record: bool, reference: &ModuleRef, auth: &RegistryAuth) -> Result<String, PullError> {
        self.allowed(reference)?;
        if let Some(digest) = &reference.digest {
            return Ok(digest.clone());
        }
        // With a digest to fall back on, one try: a restart with the registry down serves at once.
        let cached = if from_record { self.cache.as_ref().and_then(|c| c.tag(reference)) } else { None };
        let tries = if cached.is_some() { 1 } else { tries };
        let resolved = self.tries_up_to(tries, reference, || async {
            // The manifest read under its cap and hashed: the digest of the bytes a pull checks.
            let tag = reference.tag.as_deref().unwrap_or("latest");
            let manifest = self.wire()?.session(reference, auth).manifest(tag, artifact::ACCEPTED_MANIFESTS, MAX_MANIFEST_BYTES, "the manifest").await?;
            Ok(sha256(&manifest))
        });
        match resolved.await {
            Ok(digest) => {
                if let Some(cache) = &self.cache {
                    cache.put_tag(reference, &digest);
                    // Each record written is a time to look for the ones no source names.
                    self.remove_unnamed_tags();
                }
                Ok(digest)
            }
            Err(error) if error.transient() => match cached {
                Some(digest) => {
                    tracing::warn!(%reference, %digest, %error, "registry unreachable: using the digest the tag had when last resolved");
                    Ok(digest)
                }
                None => Err(error),
            },
            Err(error) => Err(error),
        }
    }

    /// The module of artifact `manifest_digest` in `reference`'s repository: from the cache
    /// if it holds it (and, with trusted keys, signatures that verify with the keys trusted
    /// now), else pulled, checked against its digests and verified. `extra_keys`: a rule set's
    /// own keys, which must verify too; `identity`: the signature must name this repository
    /// (a rule set's `requireIdentity`).
    pub async fn fetch(&self, reference: &ModuleRef, manifest_digest: &str, auth: &RegistryAuth, extra_keys: &[TrustedKey], identity: bool) -> Result<Fetched, PullError> {
        self.fetch_tries(self.settings.tries, reference, manifest_digest, auth, extra_keys, identity).await
    }

    /// `fetch` with one try: for a reconcile, which requeues instead of pausing to try again.
    pub async fn fetch_once(&self, reference: &ModuleRef, manifest_digest: &str, auth: &RegistryAuth, extra_keys: &[TrustedKey], identity: bool) -> Result<Fetched, PullError> {
        self.fetch_tries(1, reference, manifest_digest, auth, extra_keys, identity).await
    }

    async fn fetch_tries(&self, tries: u32, reference: &ModuleRef, manifest_digest: &str, auth: &RegistryAuth, extra_keys: &[TrustedKey], identity: bool) -> Result<Fetched, PullError> {
        self.fetch_verified(tries, reference, manifest_digest, auth, &[extra_keys], identity, false).await
    }

    /// `fetch` up to `tries` times, verified with a key of each of `extra` (a rule set's own
    /// keys, a tenant policy's required keys: every non-empty set must verify) beside the
    /// operator's. `prove_access`: the cache does not stand in for the registry: the manifest
    /// (and signatures) are asked of it with `auth`, so only who may pull the artifact gets it;
    /// a layer already kept is then read from the cache (its digest is what that manifest names).
    #[allow(clippy::too_many_arguments)]
    pub async fn fetch_verified(&self, tries: u32, reference: &ModuleRef, manifest_digest: &str, auth: &RegistryAuth, extra: &[&[TrustedKey]], identity: bool, prove_access: bool) -> Result<Fetched, PullError> {
        self.allowed(reference)?;
        let pinned = reference.pinned(manifest_digest);
        if let Some(why) = self.keys.unreadable() {
            return Err(PullError::NotVerified { reference: pinned.to_string(), detail: format!("not verified: the trusted keys cannot be read now ({why})") });
        }
        let operator_keys = self.keys.current();
        let keysets: Vec<&[TrustedKey]> = std::iter::once(operator_keys.as_slice()).chain(extra.iter().copied()).filter(|k| !k.is_empty()).collect();
        let identity = identity.then(|| pinned.repository_name());
        if identity.is_some() && keysets.is_empty() {
            let detail = "requireIdentity is set but no key is trusted (publicKeys or --trusted-keys): no signature to bind the repository with".into();
            return Err(PullError::NotVerified { reference: pinned.to_string(), detail });
        }
        let verifying = Verifying { keysets: &keysets, identity: identity.as_deref() };
        let cached = if prove_access { Cached::Miss } else { self.cached(&pinned, manifest_digest, &verifying) };
        let distrusted = match cached {
            Cached::Hit(fetched) => return Ok(fetched),
            Cached::Distrusted(why) => Some(why),
            Cached::Miss => None,
        };
        match self.tries_up_to(tries, &pinned, || self.pull(&pinned, manifest_digest, auth, &verifying)).await {
            // The signatures known do not verify with the keys trusted now, and the registry
            // cannot be asked for others: a verdict, not a passing trouble (fail closed).
            Err(error) if error.transient() && distrusted.is_some() => {
                let why = distrusted.unwrap_or_default();
                Err(PullError::NotVerified { reference: pinned.to_string(), detail: format!("{why} (the registry, asked for other signatures, could not answer)") })
            }
            outcome => outcome,
        }
    }

    /// The artifact from the cache, if it holds the manifest, the layer and (with keys)
    /// signatures that verify now: the cache keeps signatures, never verdicts.
    fn cached(&self, pinned: &ModuleRef, manifest_digest: &str, verifying: &Verifying) -> Cached {
        let Some(cache) = self.cache.as_ref() else { return Cached::Miss };
        let Some(manifest) = cache.get(manifest_digest) else { return Cached::Miss };
        let Ok((layer_digest, size)) = artifact::module_layer(&manifest) else { return Cached::Miss };
        // The bounds of a pull hold for what the cache serves too (it may have been filled
        // under a larger limit); the verifications first, before the layer is read and hashed.
        if size > self.settings.max_module_bytes {
            return Cached::Miss;
        }
        let signers = if verifying.keysets.is_empty() {
            Vec::new()
        } else {
            let Some(found) = cache.signatures(manifest_digest) else { return Cached::Miss };
            match verifying.verify(manifest_digest, &found) {
                Ok(signers) => signers,
                Err(why) => {
                    tracing::debug!(%pinned, %why, "the signatures kept in the cache do not verify now: asking the registry");
                    return Cached::Distrusted(why);
                }
            }
        };
        let Some(bytes) = cache.get(&layer_digest) else { return Cached::Miss };
        Cached::Hit(Fetched { pinned: pinned.clone(), manifest_digest: manifest_digest.into(), bytes, signed_by: (!signers.is_empty()).then(|| signers.join(" and ")), from_cache: true })
    }

    /// Run `op` up to `tries` times while it fails for a reason that may pass, each try bounded
    /// by the timeout (waiting for a pull permit, every request and every body included), with
    /// a doubling pause between tries.
    async fn tries_up_to<T, F, Fut>(&self, tries: u32, reference: &ModuleRef, op: F) -> Result<T, PullError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, PullError>>,
    {
        let mut pause = Duration::from_millis(200);
        let mut tried = 0;
        loop {
            tried += 1;
            let one_try = async {
                // Inside the deadline, and per registry: a tarpit holds its own permits only; and
                // per tenant: whose pull this is, the task says (`Tenant::pulling`).
                let _permit = self.permits.acquire(crate::supply::tenant::Tenant::pulling_now(), &reference.registry).await;
                op().await
            };
            let outcome = match tokio::time::timeout(self.settings.timeout, one_try).await {
                Ok(outcome) => outcome,
                Err(_) => Err(PullError::Unreachable {
                    registry: reference.registry.clone(),
                    detail: format!("no answer within {:?}", self.settings.timeout),
                }),
            };
            match outcome {
                Err(error) if error.transient() && tried < tries.max(1) => {
                    tracing::debug!(%reference, %error, tried, "pull failed; trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
                outcome => return outcome,
            }
        }
    }

    async fn pull(&self, pinned: &ModuleRef, manifest_digest: &str, auth: &RegistryAuth, verifying: &Verifying<'_>) -> Result<Fetched, PullError> {
        let mut session = self.wire()?.session(pinned, auth);
        let manifest = session.manifest(manifest_digest, artifact::ACCEPTED_MANIFESTS, MAX_MANIFEST_BYTES, "the manifest").await?;
        let actual = sha256(&manifest);
        if actual != manifest_digest {
            return Err(PullError::DigestMismatch { what: "the manifest", reference: pinned.to_string(), expected: manifest_digest.into(), actual });
        }
        let (layer_digest, size) =
            artifact::module_layer(&manifest).map_err(|detail| PullError::NotAWasmArtifact { reference: pinned.to_string(), detail })?;
        let limit = self.settings.max_module_bytes;
        if size > limit {
            return Err(PullError::TooLarge { what: "the module layer", reference: pinned.to_string(), size, limit });
        }
        let bytes = match self.cache.as_ref().and_then(|c| c.get(&layer_digest)) {
            Some(bytes) => bytes,
            None => {
                // Read to the size its descriptor names and no further: a longer stream is
                // refused as it passes it, whatever --max-module-mib would allow.
                let bytes = session.blob(&layer_digest, size, "the module layer").await.map_err(|error| match error {
                    PullError::TooLarge { size: read, .. } => PullError::Registry {
                        reference: pinned.to_string(),
                        detail: format!("the module layer is longer than the {size} bytes its descriptor names (refused at {read})"),
                    },
                    other => other,
                })?;
                let actual = sha256(&bytes);
                if actual != layer_digest {
                    return Err(PullError::DigestMismatch { what: "the module layer", reference: pinned.to_string(), expected: layer_digest, actual });
                }
                bytes
            }
        };
        let (signers, found) = if verifying.keysets.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            let found = self.signatures(pinned, manifest_digest, auth).await?;
            let signers = verifying.verify(manifest_digest, &found).map_err(|detail| PullError::NotVerified { reference: pinned.to_string(), detail })?;
            (signers, found)
        };
        if let Some(cache) = &self.cache {
            cache.put(&layer_digest, &bytes);
            cache.put(manifest_digest, &manifest);
            // The signatures that verified, not the verdict: verified again whenever the cache
            // serves them.
            let verified = verifying.verified(manifest_digest, found);
            if !verified.is_empty() {
                cache.put_signatures(manifest_digest, &verified);
            }
        }
        let signed_by = (!signers.is_empty()).then(|| signers.join(" and "));
        Ok(Fetched { pinned: pinned.clone(), manifest_digest: manifest_digest.into(), bytes, signed_by, from_cache: false })
    }

    /// The signatures stored next to an artifact, cosign's way (none if there is no `.sig` tag).
    /// A payload is read from the registry by its digest: a descriptor's `urls` are never
    /// fetched; one the registry does not have is no signature.
    async fn signatures(&self, pinned: &ModuleRef, manifest_digest: &str, auth: &RegistryAuth) -> Result<Vec<Found>, PullError> {
        let tag = signature::signature_tag(manifest_digest);
        let sig_ref = pinned.with_tag(&tag);
        let mut session = self.wire()?.session(&sig_ref, auth);
        let manifest = match session.manifest(&tag, &[OCI_IMAGE_MEDIA_TYPE], MAX_MANIFEST_BYTES, "the signature manifest").await {
            Ok(manifest) => manifest,
            Err(PullError::NotFound { .. }) => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        let manifest: OciImageManifest = serde_json::from_slice(&manifest)
            .map_err(|e| PullError::NotVerified { reference: pinned.to_string(), detail: format!("the signature manifest {sig_ref} is not an OCI image manifest: {e}") })?;
        let mut found = Vec::new();
        for layer in manifest.layers.iter().filter(|l| l.media_type == signature::PAYLOAD_MEDIA_TYPE).take(MAX_SIGNATURES) {
            let Some(sig) = layer.annotations.as_ref().and_then(|a| a.get(signature::SIGNATURE_ANNOTATION)) else { continue };
            if layer.size as u64 > MAX_PAYLOAD_BYTES {
                continue;
            }
            let payload = match session.blob(&layer.digest, MAX_PAYLOAD_BYTES, "a signature payload").await {
                Ok(payload) => payload,
                Err(PullError::NotFound { .. } | PullError::TooLarge { .. }) => continue,
                Err(error) => return Err(error),
            };
            if sha256(&payload) != layer.digest {
                continue;
            }
            found.push(Found { payload, signature: sig.clone() });
        }
        Ok(found)
    }

    /// Push a module as a Wasm artifact to `reference` (a tag, or none: the digest is the name),
    /// signed with `sign` if given. Returns the artifact's manifest digest.
    pub async fn push(&self, reference: &ModuleRef, module: &[u8], name: &str, version: &str, sign: Option<&SignKey>, auth: &RegistryAuth) -> Result<String, PullError> {
        let client = self.client();
        let (layer, config, annotations) = artifact::build(module, name, version);
        let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, Some(annotations));
        let raw = serde_json::to_vec(&oci_client::manifest::OciManifest::from(manifest.clone())).expect("manifest serializes");
        let digest = sha256(&raw);
        let target = if reference.is_tag() { reference.clone() } else { reference.pinned(&digest) };
        if let Some(wanted) = &reference.digest
            && *wanted != digest
        {
            return Err(PullError::DigestMismatch { what: "the artifact to push", reference: reference.to_string(), expected: wanted.clone(), actual: digest });
        }
        client.push(&target.to_oci(), &[layer], config, auth, Some(manifest)).await.map_err(|e| classify(&target, e))?;
        // What the registry now serves under the name: the digest of the bytes it stored.
        let served = if target.is_tag() { client.fetch_manifest_digest(&target.to_oci(), auth).await.map_err(|e| classify(&target, e))? } else { digest.clone() };
        if let Some(key) = sign {
            let payload = signature::payload(&reference.repository_name(), &served);
            let annotations = std::collections::BTreeMap::from([(signature::SIGNATURE_ANNOTATION.to_string(), key.sign(&payload))]);
            let layer = ImageLayer::new(payload, signature::PAYLOAD_MEDIA_TYPE.into(), Some(annotations));
            let config = serde_json::json!({
                "architecture": "", "os": "", "created": "0001-01-01T00:00:00Z",
                "rootfs": {"type": "layers", "diff_ids": [layer.sha256_digest()]}, "config": {}
            });
            let config = oci_client::client::Config::oci_v1(serde_json::to_vec(&config).expect("config serializes"), None);
            let sig_ref = reference.with_tag(&signature::signature_tag(&served));
            client.push(&sig_ref.to_oci(), &[layer], config, auth, None).await.map_err(|e| classify(&sig_ref, e))?;
        }
        Ok(served)
    }
}

/// oci-client's errors (of a push) as the operator tells them: what a registry wrote is cut
/// short and escaped.
fn classify(reference: &ModuleRef, error: OciDistributionError) -> PullError {
    let registry = reference.registry.clone();
    let reference_s = reference.to_string();
    let detail = crate::text::printable(&super::wire::with_causes(error.to_string(), &error), 300);
    match &error {
        OciDistributionError::RequestError(_) | OciDistributionError::IoError(_) => PullError::Unreachable { registry, detail },
        OciDistributionError::UnauthorizedError { .. } | OciDistributionError::AuthenticationFailure(_) => {
            PullError::Unauthorized { registry, reference: reference_s, detail }
        }
        OciDistributionError::ImageManifestNotFoundError(_) => PullError::NotFound { reference: reference_s },
        OciDistributionError::ServerError { code, .. } => match code {
            401 | 403 => PullError::Unauthorized { registry, reference: reference_s, detail },
            404 => PullError::NotFound { reference: reference_s },
            429 | 500..=599 => PullError::Unreachable { registry, detail },
            _ => PullError::Registry { reference: reference_s, detail },
        },
        OciDistributionError::RegistryError { envelope, .. } => {
            let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
            if codes.iter().any(|c| matches!(c, OciErrorCode::ManifestUnknown | OciErrorCode::NameUnknown | OciErrorCode::BlobUnknown | OciErrorCode::NotFound)) {
                PullError::NotFound { reference: reference_s }
            } else if codes.iter().any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied)) {
                PullError::Unauthorized { registry, reference: reference_s, detail }
            } else if codes.iter().any(|c| matches!(c, OciErrorCode::Toomanyrequests)) {
                PullError::Unreachable { registry, detail }
            } else {
                PullError::Registry { reference: reference_s, detail }
            }
        }
        OciDistributionError::DigestError(_) => PullError::DigestMismatch { what: "an answer", reference: reference_s, expected: "its digest".into(), actual: detail },
        OciDistributionError::UnsupportedMediaTypeError(_) | OciDistributionError::IncompatibleLayerMediaTypeError(_) => {
            PullError::NotAWasmArtifact { reference: reference_s, detail }
        }
        _ => PullError::Registry { reference: reference_s, detail },
    }
}
