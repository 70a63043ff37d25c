//! The module sources and the default module's hot swap. Sources (a watched file
//! (`file`), a watched ConfigMap (`configmap`), an OCI reference (`oci`)) offer candidate
//! bytes, each read or pulled by `supply::fetch::fetch_module`; the [`Swapper`] checks each
//! one (pin, compile, world, smoke test) and only then puts it in the [`RulesSlot`]. A
//! candidate that fails is rejected, reported once, and the module serving keeps serving.

pub mod configmap;
pub mod file;
pub mod oci;
pub mod recorded;
pub mod rulesets;

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::supply::ModuleLoader;
use crate::supply::fetch::{Checks, Fetched, Problem, Refusal};
use crate::supply::contract::rules::RulesSlot;
use crate::supply::sandbox::{GuestError, RulesModule, WhoCompiles};
use crate::process::metrics::Metrics;

pub use crate::supply::digest::{digest, normalize_pin};
pub use crate::supply::fetch::Origin;

/// Bytes a source found, or why it found none it could offer.
#[derive(Debug)]
pub struct Candidate {
    pub origin: Origin,
    pub bytes: Result<Vec<u8>, String>,
    /// Why there are no bytes, as a reason (`ModuleUnreadable`, `RegistryUnreachable`, ...).
    reason: String,
    /// There are no bytes for a reason that may pass by itself (the registry is down).
    pending: bool,
    /// The bytes' digest, or what made them unreadable: computed once, it tells a source
    /// whether it offered this already and the swapper whether it rejected it already.
    key: String,
    /// Why the bytes are refused is a verdict of trust (`Problem::distrusts`), not a source's
    /// passing trouble.
    distrusts: bool,
    /// The module with this digest, which the source offered before, is no longer trusted (its
    /// signature does not verify with the keys trusted now): if it serves, it stops.
    withdraws: Option<String>,
}

impl Candidate {
    /// What `fetch_module` found for a source at `origin`: the bytes and the digest it formed,
    /// or why there are none.
    pub fn fetched(origin: Origin, fetched: Result<Fetched, Problem>) -> Self {
        match fetched {
            Ok(f) => Candidate { origin: f.origin, bytes: Ok(f.bytes), reason: "ModuleUnreadable".into(), pending: false, key: f.digest, distrusts: false, withdraws: None },
            Err(problem) => Candidate::failed(origin, problem),
        }
    }

    /// A source that could not get bytes, for the reason its problem names.
    pub fn failed(origin: Origin, problem: Problem) -> Self {
        let distrusts = problem.distrusts();
        Candidate { origin, key: format!("unreadable: {}", problem.message), bytes: Err(problem.message), reason: problem.reason, pending: problem.pending, distrusts, withdraws: None }
    }

    /// This refusal as the withdrawal of module `digest`, which the source offered before and
    /// which is distrusted now (the same bytes, the keys changed).
    pub fn withdrawing(self, digest: &str) -> Self {
        Candidate { withdraws: Some(digest.into()), ..self }
    }

    /// Why there are no bytes (`RegistryUnreachable`, ...), if there are none.
    pub fn reason(&self) -> Option<&str> {
        self.bytes.is_err().then_some(self.reason.as_str())
    }

    /// There are no bytes, for a reason that may pass by itself (the registry is down): worth
    /// waiting for.
    pub fn pending(&self) -> bool {
        self.bytes.is_err() && self.pending
    }

    /// Whether it was refused by a verdict of trust (see [`Problem::distrusts`]).
    pub fn distrusts(&self) -> bool {
        self.distrusts
    }

    /// `sha256:<hex>` of the bytes, if there are any.
    pub fn digest(&self) -> Option<&str> {
        self.bytes.is_ok().then_some(self.key.as_str())
    }

    /// What identifies this candidate: its digest, or why it is unreadable.
    pub fn key(&self) -> &str {
        &self.key
    }
}

/// Why a candidate may not serve.
#[derive(Debug, thiserror::Error)]
pub enum Rejection {
    #[error("{0}")]
    Guest(#[from] GuestError),
    /// The pin refused it (`--module-sha256`).
    #[error("{0}")]
    Refused(#[from] Refusal),
    #[error("{0}")]
    Unreadable(String),
    /// The source could not get the module (a registry's refusal, say), for this reason.
    #[error("{message}")]
    Source { reason: String, message: String },
}

impl Rejection {
    pub fn reason(&self) -> &str {
        match self {
            Rejection::Guest(e) => e.reason(),
            Rejection::Refused(refusal) => refusal.reason(),
            Rejection::Unreadable(_) => "ModuleUnreadable",
            Rejection::Source { reason, .. } => reason,
        }
    }
}

#[derive(Debug)]
pub enum SwapOutcome {
    /// The candidate is the module already serving.
    Unchanged,
    Accepted { old: Option<String>, new: String },
    Rejected(Rejection),
    /// The same rejected bytes again: not reported a second time.
    AlreadyRejected,
    /// The module serving is no longer trusted: nothing serves now (fail closed).
    Withdrawn { old: String },
}

/// Where swap Events go: the operator's Pod when it knows it, otherwise its namespace.
#[derive(Clone)]
pub struct SwapEvents {
    pub client: kube::Client,
    pub reporter: Reporter,
    pub regarding: ObjectReference,
}

impl SwapEvents {
    /// Best effort: a lost Event is logged, never fatal.
    pub async fn publish(&self, type_: EventType, reason: &str, note: &str, action: &str) {
        if let Err(error) = self.try_publish(type_, reason, note, action).await {
            warn!(%error, reason, "could not publish an Event on the operator's Pod");
        }
    }

    pub async fn try_publish(&self, type_: EventType, reason: &str, note: &str, action: &str) -> Result<(), kube::Error> {
        let event = Event { type_, reason: reason.into(), note: Some(crate::text::printable(note, 1024)), action: action.into(), secondary: None };
        // A recorder per Event: one recorder would fold every Event after the first into a
        // count on it (its series key leaves the note out), hiding the digests.
        Recorder::new(self.client.clone(), self.reporter.clone()).publish(&event, &self.regarding).await
    }
}

pub struct Swapper {
    /// Compiles and checks candidates; swapping back to a recent module does not recompile.
    modules: Arc<ModuleLoader>,
    /// `sha256:<hex>`, lowercase.
    pin: Option<String>,
    slot: Arc<RulesSlot>,
    metrics: Arc<Metrics>,
    events: Option<SwapEvents>,
    last_rejected: Mutex<Option<String>>,
    /// The module serving (its digest) and where it came from, for the record `explain` reads.
    serving_from: Mutex<Option<(String, Origin)>>,
}

impl Swapper {
    pub fn new(modules: Arc<ModuleLoader>, pin: Option<String>, slot: Arc<RulesSlot>, metrics: Arc<Metrics>, events: Option<SwapEvents>) -> Self {
        let pin = pin.as_deref().map(normalize_pin);
        Swapper { modules, pin, slot, metrics, events, last_rejected: Mutex::default(), serving_from: Mutex::default() }
    }

    pub fn slot(&self) -> &Arc<RulesSlot> {
        &self.slot
    }

    /// The module serving (its digest) and where it came from, if one serves.
    pub fn serving_from(&self) -> Option<(String, Origin)> {
        self.serving_from.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Check a candidate (blocking: compiling takes milliseconds) without serving it.
    fn validate(&self, bytes: &[u8], actual: String) -> Result<Arc<RulesModule>, Rejection> {
        // The pin holds whichever source offered the bytes: checked as fetch_module checks it.
        crate::supply::fetch::check(bytes.len() as u64, &actual, &Checks { pin: self.pin.as_deref(), pinned_by: "--module-sha256", max_bytes: None, required_keys: &[], prove_access: false })?;
        Ok(self.modules.load_for(WhoCompiles::DefaultModule, bytes, &actual)?)
    }

    /// Check a candidate and, if it passes, make it the module serving. A withdrawal of the
    /// module serving takes it out of the slot.
    pub async fn offer(self: &Arc<Self>, candidate: Candidate) -> SwapOutcome {
        if let Some(withdrawn) = &candidate.withdraws {
            return self.withdraw(withdrawn, &candidate).await;
        }
        let origin = candidate.origin.clone();
        let new_digest = candidate.digest().map(str::to_owned);
        let current = self.slot.current().map(|r| r.identity().digest.clone());
        if new_digest.is_some() && new_digest == current {
            debug!(%origin, "candidate is the module already serving");
            return SwapOutcome::Unchanged;
        }
        // The same bad bytes are reported once, not every time a source looks again.
        let seen = candidate.key().to_owned();
        if self.last_rejected.lock().unwrap().as_deref() == Some(seen.as_str()) {
            return SwapOutcome::AlreadyRejected;
        }
        let this = self.clone();
        let started = std::time::Instant::now();
        let checked = match candidate.bytes {
            Ok(bytes) => tokio::task::spawn_blocking(move || {
                let checked = this.validate(&bytes, candidate.key);
                // The module's bytes are dropped only now, after the compile's own release:
                // given back too, or mimalloc keeps them while the operator idles.
                drop(bytes);
                crate::process::memory::release_freed();
                checked
            })
            .await
                .unwrap_or_else(|e| Err(Rejection::Guest(GuestError::Host(format!("checking the module panicked: {e}"))))),
            Err(message) => Err(Rejection::Source { reason: candidate.reason, message }),
        };
        let took = started.elapsed();
        self.metrics.module_checked(took);
        match checked {
            Ok(module) => {
                *self.last_rejected.lock().unwrap() = None;
                let new = module.identity().clone();
                self.metrics.modules_compiled(self.modules.footprint());
                let old = self.slot.swap(module).map(|r| r.identity().clone());
                *self.serving_from.lock().unwrap_or_else(|p| p.into_inner()) = Some((new.digest.clone(), origin.clone()));
                self.metrics.swap_accepted();
                self.metrics.module_serving(new.label());
                let old_digest = old.as_ref().map(|o| o.digest.clone());
                info!(%origin, module = %new.info.name, version = %new.info.version, new = %new.digest, old = old_digest.as_deref().unwrap_or("none"), check_ms = took.as_millis() as u64, "rules module swapped in");
                let note = match &old {
                    Some(old) => format!(
                        "rules module {} {} ({}) replaced {} {} ({}), from {origin}",
                        new.info.name, new.info.version, new.digest, old.info.name, old.info.version, old.digest
                    ),
                    None => format!("rules module {} {} ({}) loaded from {origin}", new.info.name, new.info.version, new.digest),
                };
                self.publish(EventType::Normal, "ModuleSwapped", &note).await;
                SwapOutcome::Accepted { old: old_digest, new: new.digest.clone() }
            }
            Err(rejection) => {
                *self.last_rejected.lock().unwrap() = Some(seen);
                warn!(%origin, digest = new_digest.as_deref().unwrap_or("-"), reason = rejection.reason(), error = %rejection, serving = current.as_deref().unwrap_or("none"), "rules module rejected; the current module keeps serving");
                let note = format!(
                    "rules module from {origin} ({}) rejected ({}): {rejection}; still serving {}",
                    new_digest.as_deref().unwrap_or("unreadable"),
                    rejection.reason(),
                    current.as_deref().unwrap_or("no module")
                );
                self.publish(EventType::Warning, "ModuleRejected", &note).await;
                // Counted once the rejection is told everywhere (whoever watches the count finds the Event).
                self.metrics.swap_rejected(rejection.reason());
                SwapOutcome::Rejected(rejection)
            }
        }
    }

    /// Stop serving module `digest` if it serves: its source distrusts it now. Nothing serves
    /// until a trusted module is offered (the Hikawas wait, the operator is not ready).
    async fn withdraw(&self, digest: &str, candidate: &Candidate) -> SwapOutcome {
        let current = self.slot.current().map(|r| r.identity().digest.clone());
        if current.as_deref() != Some(digest) {
            return SwapOutcome::Unchanged;
        }
        self.slot.clear();
        *self.serving_from.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.metrics.module_withdrawn();
        *self.last_rejected.lock().unwrap() = Some(candidate.key().to_owned());
        let why = candidate.bytes.as_ref().err().map(String::as_str).unwrap_or_default();
        warn!(origin = %candidate.origin, %digest, reason = %candidate.reason, error = %why, "the rules module serving is no longer trusted: it stops serving, nothing serves until a trusted one does");
        let note = format!("rules module {digest} from {} withdrawn ({}): {why}; no module serves until a trusted one does", candidate.origin, candidate.reason);
        self.publish(EventType::Warning, "ModuleWithdrawn", &note).await;
        self.metrics.swap_rejected(&candidate.reason);
        SwapOutcome::Withdrawn { old: digest.into() }
    }

    /// Offer every candidate the sources send, one at a time, until they all stop.
    pub async fn serve(self: Arc<Self>, mut candidates: mpsc::Receiver<Candidate>) {
        while let Some(candidate) = candidates.recv().await {
            self.offer(candidate).await;
        }
    }

    async fn publish(&self, type_: EventType, reason: &str, note: &str) {
        if let Some(events) = &self.events {
            events.publish(type_, reason, note, "Swap").await;
        }
    }
}
