//! The module that made a decision, found by its digest: a local copy (`--module FILE`, its
//! digest must be the recorded one), or what the Hikawa's rule set names (its source and its
//! candidate's: a ConfigMap, a registry artifact; its status's pinned references), each fetched
//! through the one fetch path (`supply/fetch.rs`: size bound, digest, signature checks as `run`
//! makes them) and kept only if its digest is the one recorded.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};
use oci_client::secrets::RegistryAuth;

use crate::cli::args::RegistryArgs;
use crate::crd::{ModuleSource, ZundokoRules};
use crate::supply::fetch::{Checks, Fetched, Source, fetch_module};
use crate::supply::oci::{ModuleRef, Registry};
use crate::supply::sandbox::{RulesModule, SandboxEngine};
use crate::supply::sources::configmap::DEFAULT_KEY;

/// Modules by digest, fetched once each.
pub struct Modules<'a> {
    engine: &'a SandboxEngine,
    registry: &'a RegistryArgs,
    client: &'a Client,
    file: Option<PathBuf>,
    ruleset: Option<ZundokoRules>,
    /// What each source gave (by digest), and what each could not give; filled on first need.
    fetched: Option<(HashMap<String, Fetched>, Vec<String>)>,
    loaded: HashMap<String, Result<Arc<RulesModule>, String>>,
}

impl<'a> Modules<'a> {
    pub fn new(engine: &'a SandboxEngine, registry: &'a RegistryArgs, client: &'a Client, file: Option<PathBuf>, ruleset: Option<ZundokoRules>) -> Self {
        Modules { engine, registry, client, file, ruleset, fetched: None, loaded: HashMap::new() }
    }

    /// The module whose digest is `digest`, loaded; or why it cannot be had.
    pub async fn get(&mut self, digest: &str) -> Result<Arc<RulesModule>, String> {
        if let Some(found) = self.loaded.get(digest) {
            return found.clone();
        }
        let found = self.find(digest).await.and_then(|f| {
            self.engine.load(&f.bytes).map(Arc::new).map_err(|e| format!("the module {digest} ({}) is rejected: {}", f.origin, crate::text::printable(&e.to_string(), 512)))
        });
        self.loaded.insert(digest.to_string(), found.clone());
        found
    }

    async fn find(&mut self, digest: &str) -> Result<Fetched, String> {
        let mut tried = Vec::new();
        if let Some(path) = &self.file {
            let checks = Checks { pin: Some(digest), pinned_by: "the recorded decision", max_bytes: None, required_keys: &[], prove_access: false };
            match fetch_module(Source::File(path), &RegistryAuth::Anonymous, &[], self.signing_registry().as_deref(), &checks).await {
                Ok(fetched) => return Ok(fetched),
                Err(problem) => tried.push(format!("--module {}: {} ({})", path.display(), problem.message, problem.reason)),
            }
        }
        if self.fetched.is_none() {
            self.fetched = Some(self.fetch_sources().await);
        }
        let (by_digest, problems) = self.fetched.as_ref().expect("filled above");
        if let Some(fetched) = by_digest.get(digest) {
            return Ok(fetched.clone());
        }
        tried.extend(by_digest.values().map(|f| format!("{} serves {}", f.origin, f.digest)));
        tried.extend(problems.iter().cloned());
        if self.ruleset.is_none() {
            tried.push("the Hikawa names no rule set: the operator's default module comes from its own flags (give --module FILE)".into());
        }
        Err(format!("the module {digest} is not fetchable any more: {}", tried.join("; ")))
    }

    /// A registry client only to check a file's signature, when signatures are required.
    fn signing_registry(&self) -> Option<Arc<Registry>> {
        self.registry.require_signatures.then(|| self.registry.settings().ok().and_then(|s| Registry::new(s).ok())).flatten()
    }

    /// Every module the rule set names now, fetched.
    async fn fetch_sources(&self) -> (HashMap<String, Fetched>, Vec<String>) {
        let (mut by_digest, mut problems) = (HashMap::new(), Vec::new());
        let Some(ruleset) = &self.ruleset else { return (by_digest, problems) };
        let mut sources: Vec<&ModuleSource> = vec![&ruleset.spec.source];
        sources.extend(ruleset.spec.candidate.as_ref().map(|c| &c.source));
        // The references the status pinned (a tag resolved then may point elsewhere now).
        let status = ruleset.status.as_ref();
        let pinned: Vec<String> = status.into_iter().flat_map(|s| [s.module.as_ref(), s.candidate.as_ref()]).flatten().filter_map(|m| m.reference.clone()).collect();
        let registry = match self.registry.settings().map_err(|e| e.to_string()).and_then(Registry::new) {
            Ok(registry) => Some(registry),
            Err(error) => {
                problems.push(format!("no registry client: {error}"));
                None
            }
        };
        for source in sources {
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
                self.fetch_one(source, None, registry.as_deref(), &mut by_digest, &mut problems).await;
            }
            if let Some(oci) = &source.oci {
                self.fetch_reference(&oci.reference, registry.as_deref(), &mut by_digest, &mut problems).await;
            }
        }
        for reference in &pinned {
            self.fetch_reference(reference, registry.as_deref(), &mut by_digest, &mut problems).await;
        }
        (by_digest, problems)
    }

    async fn fetch_reference(&self, reference: &str, registry: Option<&Registry>, by_digest: &mut HashMap<String, Fetched>, problems: &mut Vec<String>) {
        match reference.parse::<ModuleRef>() {
            Ok(parsed) => {
                let source = Source::Oci { reference: &parsed, digest: None, retry: false, identity: false };
                self.fetch_one(source, Some(&parsed), registry, by_digest, problems).await;
            }
            Err(error) => problems.push(format!("{reference}: {error}")),
        }
    }

    async fn fetch_one(&self, source: Source<'_>, reference: Option<&ModuleRef>, registry: Option<&Registry>, by_digest: &mut HashMap<String, Fetched>, problems: &mut Vec<String>) {
        let origin = source.origin();
        let auth = match reference.map(|r| self.registry.auth(r)).transpose() {
            Ok(auth) => auth.unwrap_or(RegistryAuth::Anonymous),
            Err(error) => return problems.push(format!("{origin}: {error}")),
        };
        match fetch_module(source, &auth, &[], registry, &Checks::default()).await {
            Ok(fetched) => {
                by_digest.insert(fetched.digest.clone(), fetched);
            }
            Err(problem) => problems.push(format!("{origin}: {} ({})", problem.message, problem.reason)),
        }
    }
}
