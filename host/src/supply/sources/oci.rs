//! The registry source of the default module (`--module-oci REF`): the artifact a reference
//! names, pulled (or served from the cache), checked against its digest and signature, offered
//! to the swapper as the file and ConfigMap sources offer theirs. A tag is resolved once at
//! start; with `--module-oci-poll-secs` it is resolved again at that interval and a new digest is
//! offered as a candidate (checked, swapped in with an Event, or rejected while the old serves).
//! When the trusted keys change, the artifact serving is verified again at once (from the cache's
//! signatures, or the registry's): if no key trusted now verifies it, it is withdrawn and nothing
//! serves until a trusted module does (fail closed); a registry that cannot be asked keeps it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use oci_client::secrets::RegistryAuth;
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::{Candidate, Origin};
use crate::supply::fetch::{Checks, Problem, Source, fetch_module};
use crate::supply::oci::{ModuleRef, PullError, Registry, auth};

/// The longest pause between two tries of a source that gave nothing yet, or of a tag's poll
/// that failed.
const MAX_PAUSE: Duration = Duration::from_secs(60);

#[derive(Clone, Debug)]
pub struct OciSource {
    pub reference: ModuleRef,
    /// A docker config.json with the registry's credentials (a mounted pull secret's
    /// `.dockerconfigjson`), read again at every pull so a rotated secret is used.
    pub auth_file: Option<PathBuf>,
    /// Resolve the tag again this often and offer what it points at.
    pub poll: Option<Duration>,
}

impl OciSource {
    fn auth(&self) -> Result<RegistryAuth, PullError> {
        let Some(path) = &self.auth_file else { return Ok(RegistryAuth::Anonymous) };
        let bad = |detail: String| PullError::Unauthorized { registry: self.reference.registry.clone(), reference: self.reference.to_string(), detail };
        auth::from_docker_config_file(path, &self.reference.registry).map_err(bad)
    }

    /// The digest the reference names now (with the credentials read for it). `serving`: a
    /// digest of it serves, so only the registry's own answer may move it (never the cache's
    /// record of the tag, which may be older than what serves).
    async fn resolve(&self, registry: &Registry, serving: bool) -> Result<(RegistryAuth, String), PullError> {
        let auth = self.auth()?;
        let digest = if serving { registry.resolve_anew(&self.reference, &auth).await? } else { registry.resolve(&self.reference, &auth).await? };
        Ok((auth, digest))
    }

    /// The module of artifact `digest` as a candidate (`fetch_module`: pulled or from the
    /// cache, checked against its digests and the registry's trusted keys; the swapper holds the
    /// pin), or why there is none.
    async fn candidate(&self, registry: &Registry, auth: &RegistryAuth, digest: &str) -> Candidate {
        let source = Source::Oci { reference: &self.reference, digest: Some(digest), retry: true, identity: false };
        let fetched = fetch_module(source, auth, &[], Some(registry), &Checks::default()).await;
        if let Ok(f) = &fetched {
            info!(reference = %self.reference, pinned = %self.reference.pinned(digest), signed_by = f.signed_by.as_deref().unwrap_or("-"), from_cache = f.from_cache, "module pulled");
        }
        Candidate::fetched(source.origin(), fetched)
    }

    /// The artifact the reference names now, if its module could be had, and that module as a
    /// candidate.
    pub async fn fetch(&self, registry: &Registry) -> (Option<Served>, Candidate) {
        match self.resolve(registry, false).await {
            Ok((auth, digest)) => {
                let candidate = self.candidate(registry, &auth, &digest).await;
                (Served::of(digest, &candidate), candidate)
            }
            Err(error) => (None, Candidate::failed(Origin::Oci(self.reference.to_string()), Problem::from(&error))),
        }
    }

    /// Keep the module the reference names serving: until one was had, try again with backoff;
    /// then, with a poll interval, offer each new digest the tag points at; whenever the trusted
    /// keys change, verify again what serves.
    pub async fn watch(self, registry: Arc<Registry>, candidates: mpsc::Sender<Candidate>, mut served: Option<Served>) {
        let mut pause = Duration::from_secs(1);
        let mut keys = registry.keys().subscribe();
        loop {
            let wait = match (&served, self.poll) {
                (None, _) => Some(pause),
                (Some(_), Some(poll)) if self.reference.is_tag() => Some(poll),
                // A digest, or a tag not followed: only a change of keys is news.
                (Some(_), _) => None,
            };
            let sleep = async {
                match wait {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => std::future::pending().await,
                }
            };
            let keys_changed = tokio::select! {
                _ = candidates.closed() => return,
                _ = sleep => false,
                Ok(()) = keys.changed() => true,
            };
            if keys_changed && let Some(serving) = served.clone() {
                if let Some(withdrawn) = self.verify_again(&registry, &serving).await {
                    if candidates.send(withdrawn).await.is_err() {
                        return;
                    }
                    served = None;
                    pause = Duration::from_secs(1);
                }
                continue;
            }
            match self.resolve(&registry, served.is_some()).await {
                Ok((_, digest)) if served.as_ref().is_some_and(|s| s.manifest == digest) => {}
                Ok((auth, digest)) => {
                    info!(reference = %self.reference, %digest, "the tag points at a new artifact: offering it");
                    let candidate = self.candidate(&registry, &auth, &digest).await;
                    let offered = Served::of(digest, &candidate);
                    if let (None, Some(reason), Err(error)) = (&served, candidate.reason(), &candidate.bytes) {
                        pause = (pause * 2).min(MAX_PAUSE);
                        warn!(reference = %self.reference, reason, %error, retry_in_secs = pause.as_secs(), "no rules module yet: cannot pull the module; trying again");
                    }
                    if candidates.send(candidate).await.is_err() {
                        return;
                    }
                    if offered.is_some() {
                        served = offered;
                        pause = Duration::from_secs(1);
                    } else if served.is_some() {
                        pause = (pause * 2).min(MAX_PAUSE);
                    }
                }
                Err(error) => {
                    pause = (pause * 2).min(MAX_PAUSE);
                    let (reason, retry_in_secs) = (error.reason(), pause.as_secs());
                    match served {
                        None => warn!(reference = %self.reference, reason, %error, retry_in_secs, "no rules module yet: cannot resolve the module's tag; trying again"),
                        Some(_) => warn!(reference = %self.reference, reason, %error, retry_in_secs, "cannot resolve the module's tag; the module serving keeps serving"),
                    }
                }
            }
        }
    }

    /// The artifact `digest` (which serves) verified again with the keys trusted now: `None`
    /// while it still verifies (or cannot be asked: the registry down, without the cache's
    /// signatures), else its withdrawal.
    async fn verify_again(&self, registry: &Registry, serving: &Served) -> Option<Candidate> {
        let (auth, digest) = (self.auth().unwrap_or(RegistryAuth::Anonymous), &serving.manifest);
        let again = self.candidate(registry, &auth, digest).await;
        if again.bytes.is_ok() || !again.distrusts() {
            return None;
        }
        warn!(reference = %self.reference, %digest, "the trusted keys changed and no longer verify the module serving: withdrawing it");
        Some(again.withdrawing(&serving.module))
    }
}

/// The artifact whose module the source offered: its manifest digest and the module's.
#[derive(Clone, Debug)]
pub struct Served {
    pub manifest: String,
    pub module: String,
}

impl Served {
    /// What `candidate`, the module of artifact `manifest`, offers, if it has bytes.
    fn of(manifest: String, candidate: &Candidate) -> Option<Served> {
        Some(Served { module: candidate.digest()?.to_owned(), manifest })
    }
}
