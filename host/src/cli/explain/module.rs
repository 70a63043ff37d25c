//! The module that made a decision, found by its digest: a local copy (`--module FILE`, its
//! digest must be the recorded one), the default module's sources as a replica recorded them
//! (`supply/sources/recorded.rs`) for a Hikawa that names no rule set, or what its rule set
//! names (its source and its candidate's: a ConfigMap, a registry artifact; its status's
//! pinned references), each fetched
//! through the one fetch path (`supply/fetch.rs`: size bound, digest, signature checks as `run`
//! makes them: an artifact verified by the rule set's own `publicKeys` beside the registry
//! flags' trusted keys, bound to its repository with `requireIdentity`) and kept only if its
//! digest is the one recorded. A cluster rule set's artifact is pulled with its pull secret,
//! read with the explaining user's credentials through the operator's own reading of it
//! (`pull_secret_auth`: from `--rules-namespaces` only); a secret that cannot be used is named,
//! and `--registry-auth` (or nothing) is tried instead: said whether or not the module is had
//! then (`pull_secrets_unused`), so that a replay is never taken for one with the rule set's own
//! credentials. A tenant's rule set (`ZundokoNamespacedRules`) is checked by the operator's own
//! code instead, policy and all (`tenant.rs`): as `run`, it is pulled with its own pull secret or
//! not at all, so nothing stands in for a secret that cannot be used (its source gives no module,
//! named among the problems).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};
use oci_client::secrets::RegistryAuth;

use crate::cli::args::RegistryArgs;
use crate::cli::explain::read::DefaultModule;
use crate::cli::explain::tenant;
use crate::crd::{ModuleSource, ZundokoRules};
use crate::supply::fetch::{Checks, Fetched, Source, fetch_module};
use crate::supply::oci::{ModuleRef, Registry, TrustedKey};
use crate::supply::ModuleLoader;
use crate::supply::contract::plan_check::PlanLimits;
use crate::supply::sandbox::{RulesModule, SandboxEngine};
use crate::supply::sources::configmap::DEFAULT_KEY;
use crate::supply::sources::recorded::RecordedSource;
use crate::supply::sources::rulesets::{OciSpec, SourceRef, SourceSpec, pull_secret_auth};
use crate::supply::tenant::Tenant;

/// Modules by digest, fetched once each.
pub struct Modules<'a> {
    engine: &'a SandboxEngine,
    /// What a tenant's module is smoke-tested with, as the operator's loader does.
    plan_limits: PlanLimits,
    registry: &'a RegistryArgs,
    client: &'a Client,
    file: Option<PathBuf>,
    ruleset: Option<ZundokoRules>,
    /// For a Hikawa that names no rule set: the default module as a replica recorded it.
    default: Option<Result<DefaultModule, String>>,
    /// The operator's `--rules-namespaces`: where a cluster rule set's pull secret may be read.
    rules_namespaces: Vec<String>,
    /// Filled on first need.
    fetched: Option<Fetches>,
    loaded: HashMap<String, Result<Arc<RulesModule>, String>>,
}

/// What the rule set's sources gave and could not give.
#[derive(Default)]
struct Fetches {
    /// What each source gave, by digest.
    by_digest: HashMap<String, Found>,
    /// What each could not give.
    problems: Vec<String>,
    /// Each pull secret that could not be used: which, why, and what was tried instead.
    secrets_unused: Vec<String>,
}

/// A cluster rule set's (or the default module's) fetched bytes, ready to load.
fn as_bytes(by_digest: HashMap<String, Fetched>) -> HashMap<String, Found> {
    by_digest.into_iter().map(|(d, f)| (d, Found::Bytes(Box::new(f)))).collect()
}

/// What a source gave: bytes to load, or (a tenant's, checked as `run` checks it) the module.
#[derive(Clone)]
enum Found {
    Bytes(Box<Fetched>),
    Loaded(Arc<RulesModule>, String),
}

impl Found {
    fn origin(&self) -> String {
        match self {
            Found::Bytes(fetched) => fetched.origin.to_string(),
            Found::Loaded(_, origin) => origin.clone(),
        }
    }
}

impl<'a> Modules<'a> {
    pub fn new(
        engine: &'a SandboxEngine,
        plan_limits: PlanLimits,
        registry: &'a RegistryArgs,
        client: &'a Client,
        file: Option<PathBuf>,
        ruleset: Option<ZundokoRules>,
        default: Option<Result<DefaultModule, String>>,
    ) -> Self {
        Modules { engine, plan_limits, registry, client, file, ruleset, default, rules_namespaces: Vec::new(), fetched: None, loaded: HashMap::new() }
    }

    /// A cluster rule set's pull secret read from `namespaces` only, as the operator given
    /// them as `--rules-namespaces` reads it (none: every pull secret is refused).
    pub fn reading_pull_secrets_from(self, namespaces: Vec<String>) -> Self {
        Modules { rules_namespaces: namespaces, ..self }
    }

    /// The module whose digest is `digest`, loaded; or why it cannot be had.
    pub async fn get(&mut self, digest: &str) -> Result<Arc<RulesModule>, String> {
        if let Some(found) = self.loaded.get(digest) {
            return found.clone();
        }
        let found = self.find(digest).await.and_then(|found| match found {
            Found::Loaded(module, _) => Ok(module),
            Found::Bytes(f) => {
                self.engine.load(&f.bytes).map(Arc::new).map_err(|e| format!("the module {digest} ({}) is rejected: {}", f.origin, crate::text::printable(&e.to_string(), 512)))
            }
        });
        self.loaded.insert(digest.to_string(), found.clone());
        found
    }

    async fn find(&mut self, digest: &str) -> Result<Found, String> {
        let mut tried = Vec::new();
        if let Some(path) = &self.file {
            let checks = Checks { pin: Some(digest), pinned_by: "the recorded decision", max_bytes: None, required_keys: &[], prove_access: false };
            match fetch_module(Source::File(path), &RegistryAuth::Anonymous, &[], self.signing_registry().as_deref(), &checks).await {
                Ok(fetched) => return Ok(Found::Bytes(Box::new(fetched))),
                Err(problem) => tried.push(format!("--module {}: {} ({})", path.display(), problem.message, problem.reason)),
            }
        }
        if self.fetched.is_none() {
            self.fetched = Some(self.fetch_sources().await);
        }
        let Fetches { by_digest, problems, .. } = self.fetched.as_ref().expect("filled above");
        if let Some(fetched) = by_digest.get(digest) {
            return Ok(fetched.clone());
        }
        tried.extend(by_digest.iter().map(|(digest, f)| format!("{} serves {digest}", f.origin())));
        tried.extend(problems.iter().cloned());
        if self.ruleset.is_none() {
            tried.push(match &self.default {
                Some(Ok(d)) => format!(
                    "the Hikawa names no rule set, and of the default module's sources replica {} recorded (serving {} now) none that can be read from here serves it: give --module FILE with a copy of it",
                    d.replica, d.record.digest
                ),
                Some(Err(why)) => format!("the Hikawa names no rule set, and the operator's default module is not recorded in the cluster ({why}): give --module FILE with a copy of the module its --module, --module-configmap or --module-oci names"),
                None => "the Hikawa names no rule set: give --module FILE with a copy of the operator's default module".into(),
            });
        }
        Err(format!("the module {digest} is not fetchable any more: {}", tried.join("; ")))
    }

    /// Each cluster rule set's pull secret that could not be used: which, why, and what was
    /// tried instead (none before a module was looked for in the rule set's sources).
    pub fn pull_secrets_unused(&self) -> Vec<String> {
        self.fetched.as_ref().map(|f| f.secrets_unused.clone()).unwrap_or_default()
    }

    /// A registry client only to check a file's signature, when signatures are required.
    fn signing_registry(&self) -> Option<Arc<Registry>> {
        self.registry.require_signatures.then(|| self.registry.settings().ok().and_then(|s| Registry::new(s).ok())).flatten()
    }

    /// Every module the rule set names now, fetched (the default module's recorded sources for
    /// a Hikawa that names none); what could not be, and the pull secrets that could not be used.
    async fn fetch_sources(&self) -> Fetches {
        let (mut by_digest, mut problems, mut unused) = (HashMap::new(), Vec::new(), Vec::new());
        let Some(ruleset) = &self.ruleset else {
            if let Some(Ok(default)) = &self.default {
                self.fetch_default(default, &mut by_digest, &mut problems).await;
            }
            return Fetches { by_digest: as_bytes(by_digest), problems, secrets_unused: unused };
        };
        // A tenant's rule set: through the operator's own checks (tenant.rs), never the ones below.
        if let Some(ns) = ruleset.metadata.namespace.as_deref() {
            let registry = match self.registry.settings().map_err(|e| e.to_string()).and_then(Registry::new) {
                Ok(registry) => registry,
                Err(error) => return Fetches { problems: vec![format!("no registry client: {error}")], ..Fetches::default() },
            };
            let loader = Arc::new(ModuleLoader::new(self.engine.clone(), self.plan_limits.clone()));
            let (found, problems) = tenant::modules(self.client, ns, ruleset, loader, registry).await;
            return Fetches { by_digest: found.into_iter().map(|(d, c)| (d, Found::Loaded(c.module, c.origin))).collect(), problems, secrets_unused: unused };
        }
        // Each source with the reference its status pinned (a tag resolved then may point
        // elsewhere now), which its own keys verify as they verify the source.
        let status = ruleset.status.as_ref();
        let mut sources: Vec<(&ModuleSource, Option<&str>)> = vec![(&ruleset.spec.source, status.and_then(|s| s.module.as_ref()?.reference.as_deref()))];
        if let Some(candidate) = &ruleset.spec.candidate {
            sources.push((&candidate.source, status.and_then(|s| s.candidate.as_ref()?.reference.as_deref())));
        }
        let registry = match self.registry.settings().map_err(|e| e.to_string()).and_then(Registry::new) {
            Ok(registry) => Some(registry),
            Err(error) => {
                problems.push(format!("no registry client: {error}"));
                None
            }
        };
        for (source, pinned) in sources {
            if let Some(cm) = &source.config_map {
                let key = cm.key.as_deref().unwrap_or(DEFAULT_KEY);
                let object = match Api::<ConfigMap>::namespaced(self.client.clone(), &cm.namespace).get(&cm.name).await {
                    Ok(object) => object,
                    Err(error) => {
                        problems.push(format!("ConfigMap {}/{}: {error}", cm.namespace, cm.name));
                        continue;
                    }
                };
                let source = Source::ConfigMap { namespace: &cm.namespace, name: &cm.name, key, object: &object };
                self.fetch_one(source, &RegistryAuth::Anonymous, &[], registry.as_deref(), &mut by_digest, &mut problems).await;
            }
            // The rule set's own `publicKeys` and `requireIdentity`, read as `run` reads them.
            if let SourceRef::Oci(oci) = SourceSpec::new(source, None, None).source {
                let keys = match &oci.keys {
                    Ok(keys) => keys,
                    Err(why) => {
                        problems.push(format!("{}: InvalidPublicKey: {why}", source.oci.as_ref().map_or("", |o| o.reference.as_str())));
                        continue;
                    }
                };
                let written = source.oci.as_ref().map(|o| o.reference.as_str());
                let secret = self.pull_secret(&oci, written.unwrap_or_default(), &mut problems, &mut unused).await;
                for reference in written.into_iter().chain(pinned) {
                    self.fetch_reference(reference, keys, oci.identity, secret.as_ref(), registry.as_deref(), &mut by_digest, &mut problems).await;
                }
            }
        }
        Fetches { by_digest: as_bytes(by_digest), problems, secrets_unused: unused }
    }

    /// The default module's sources as its replica recorded them, with the operator's own
    /// signature checks as given to `explain` (`--trusted-keys`, `--require-signatures`).
    async fn fetch_default(&self, default: &DefaultModule, by_digest: &mut HashMap<String, Fetched>, problems: &mut Vec<String>) {
        let registry = self.registry.settings().map_err(|e| e.to_string()).and_then(Registry::new);
        for source in &default.record.sources {
            match source {
                RecordedSource::File(path) => problems.push(format!("the file {path} in replica {}'s pod (not readable from here)", default.replica)),
                RecordedSource::ConfigMap { namespace, name, key } => match Api::<ConfigMap>::namespaced(self.client.clone(), namespace).get(name).await {
                    Ok(object) => {
                        let source = Source::ConfigMap { namespace, name, key, object: &object };
                        self.fetch_one(source, &RegistryAuth::Anonymous, &[], registry.as_deref().ok(), by_digest, problems).await;
                    }
                    Err(error) => problems.push(format!("ConfigMap {namespace}/{name}: {error}")),
                },
                RecordedSource::Oci(reference) => match &registry {
                    Ok(registry) => self.fetch_reference(reference, &[], false, None, Some(registry), by_digest, problems).await,
                    Err(error) => problems.push(format!("{reference}: no registry client: {error}")),
                },
            }
        }
    }

    /// The credentials of a cluster rule set's artifact's pull secret, read with the
    /// explaining user's credentials by the operator's own reading of it (so refused outside
    /// `--rules-namespaces` with the operator's reason); `None` without one, or when it cannot
    /// be used: then which, why and what is tried instead is said, in `problems` (for a module
    /// that cannot be had) and in `unused` (for the report, had or not).
    async fn pull_secret(&self, oci: &OciSpec, written: &str, problems: &mut Vec<String>, unused: &mut Vec<String>) -> Option<RegistryAuth> {
        let secret = oci.pull_secret.as_ref()?;
        let namespaces: Vec<&str> = self.rules_namespaces.iter().map(String::as_str).collect();
        let hint = || format!("may your credentials get secrets in {}? explain reads it with them, not the operator's", secret.namespace);
        match pull_secret_auth(self.client, &namespaces, oci, &Tenant::Cluster, hint).await {
            Ok(auth) => Some(auth),
            Err(problem) => {
                let instead = if self.registry.registry_auth.is_some() { "tried with --registry-auth instead" } else { "tried without credentials instead (no --registry-auth given)" };
                // The API server's answer, bounded here as a module's rejection is (`get`).
                let why = format!("registry {}: {} ({}); {instead}", crate::text::printable(written, 512), crate::text::printable(&problem.message, 512), problem.reason);
                problems.push(why.clone());
                // Once for the report, however many of the rule set's sources name it.
                if !unused.contains(&why) {
                    unused.push(why);
                }
                None
            }
        }
    }

    /// `secret`: the credentials of the rule set's pull secret; without them, `--registry-auth`'s.
    #[allow(clippy::too_many_arguments)]
    async fn fetch_reference(
        &self,
        reference: &str,
        keys: &[TrustedKey],
        identity: bool,
        secret: Option<&RegistryAuth>,
        registry: Option<&Registry>,
        by_digest: &mut HashMap<String, Fetched>,
        problems: &mut Vec<String>,
    ) {
        match reference.parse::<ModuleRef>() {
            Ok(parsed) => {
                let source = Source::Oci { reference: &parsed, digest: None, retry: false, identity };
                let auth = match secret {
                    Some(auth) => auth.clone(),
                    None => match self.registry.auth(&parsed) {
                        Ok(auth) => auth,
                        Err(error) => return problems.push(format!("{}: {error}", source.origin())),
                    },
                };
                self.fetch_one(source, &auth, keys, registry, by_digest, problems).await;
            }
            Err(error) => problems.push(format!("{reference}: {error}")),
        }
    }

    async fn fetch_one(&self, source: Source<'_>, auth: &RegistryAuth, keys: &[TrustedKey], registry: Option<&Registry>, by_digest: &mut HashMap<String, Fetched>, problems: &mut Vec<String>) {
        let origin = source.origin();
        match fetch_module(source, auth, keys, registry, &Checks::default()).await {
            Ok(fetched) => {
                by_digest.insert(fetched.digest.clone(), fetched);
            }
            Err(problem) => problems.push(format!("{origin}: {} ({})", problem.message, problem.reason)),
        }
    }
}
