//! The API source: the module ConfigMap watched through the API server (`binaryData`), so a
//! new module serves about a second after the update instead of after kubelet's sync delay.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::Candidate;
use crate::supply::fetch::{Checks, Source, fetch_module};
use crate::supply::oci::Registry;

/// `NAMESPACE/NAME[:KEY]`, the key defaulting to `rules.wasm`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigMapRef {
    pub namespace: String,
    pub name: String,
    pub key: String,
}

pub const DEFAULT_KEY: &str = "rules.wasm";

impl FromStr for ConfigMapRef {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (object, key) = match s.split_once(':') {
            Some((object, key)) => (object, key),
            None => (s, DEFAULT_KEY),
        };
        let Some((namespace, name)) = object.split_once('/') else {
            return Err(format!("`{s}` is not NAMESPACE/NAME[:KEY]"));
        };
        if namespace.is_empty() || name.is_empty() || key.is_empty() || name.contains('/') {
            return Err(format!("`{s}` is not NAMESPACE/NAME[:KEY] (a part is empty or has a slash)"));
        }
        Ok(ConfigMapRef { namespace: namespace.into(), name: name.into(), key: key.into() })
    }
}

impl fmt::Display for ConfigMapRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}:{}", self.namespace, self.name, self.key)
    }
}

impl ConfigMapRef {
    /// This ConfigMap as a source of `fetch_module`, as read in `object`.
    pub fn source<'a>(&'a self, object: &'a ConfigMap) -> Source<'a> {
        Source::ConfigMap { namespace: &self.namespace, name: &self.name, key: &self.key, object }
    }

    /// The module a ConfigMap holds under the key (`fetch_module`: with `--require-signatures`
    /// its signature verified with `registry`'s keys; the swapper holds the pin), or why there
    /// is none.
    pub async fn candidate(&self, cm: &ConfigMap, registry: &Registry) -> Candidate {
        let source = self.source(cm);
        Candidate::fetched(source.origin(), fetch_module(source, &oci_client::secrets::RegistryAuth::Anonymous, &[], Some(registry), &Checks::default()).await)
    }

    /// Fetch the ConfigMap once (at startup).
    pub async fn fetch(&self, client: &Client, registry: &Registry) -> Result<Candidate, kube::Error> {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &self.namespace);
        Ok(self.candidate(&api.get(&self.name).await?, registry).await)
    }

    /// Offer the ConfigMap's module each time it changes, until the receiver is dropped.
    /// Watches only this one object (a `metadata.name` field selector, which RBAC
    /// `resourceNames` can allow).
    pub async fn watch(self, client: Client, registry: Arc<Registry>, candidates: mpsc::Sender<Candidate>) {
        let api: Api<ConfigMap> = Api::namespaced(client, &self.namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", self.name));
        let mut changes = std::pin::pin!(watcher(api, config).default_backoff().applied_objects());
        let mut last_version: Option<String> = None;
        // With --require-signatures, new keys verify the module again; what the ConfigMap
        // offered last (the object, and its module's digest if it was offered).
        let mut keys = registry.keys().subscribe();
        let signed = registry.settings().require_signatures;
        let mut last: Option<(ConfigMap, Option<String>)> = None;
        loop {
            tokio::select! {
                _ = candidates.closed() => return,
                Ok(()) = keys.changed(), if signed => {
                    let Some((cm, offered)) = last.clone() else { continue };
                    let again = self.candidate(&cm, &registry).await;
                    let now = again.digest().map(str::to_owned);
                    let again = match (&offered, now.is_some()) {
                        // Offered before and not trusted now: withdrawn.
                        (Some(was), false) if again.distrusts() => again.withdrawing(was),
                        // Refused before (or withdrawn), trusted now: offered again.
                        (None, true) => again,
                        _ => continue,
                    };
                    last = Some((cm, now));
                    if candidates.send(again).await.is_err() {
                        return;
                    }
                }
                next = changes.next() => match next {
                    None => return,
                    Some(Err(error)) => warn!(configmap = %self, %error, "watching the module ConfigMap failed; retrying"),
                    Some(Ok(cm)) => {
                        // A relist replays the same object: only a new resourceVersion is a change.
                        if cm.metadata.resource_version.is_some() && cm.metadata.resource_version == last_version {
                            continue;
                        }
                        last_version = cm.metadata.resource_version.clone();
                        debug!(configmap = %self, resource_version = ?last_version, "the module ConfigMap changed");
                        let candidate = self.candidate(&cm, &registry).await;
                        last = Some((cm, candidate.digest().map(str::to_owned)));
                        if candidates.send(candidate).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_namespace_name_and_key() {
        let r: ConfigMapRef = "zundoko-system/zundoko-rules".parse().unwrap();
        assert_eq!((r.namespace.as_str(), r.name.as_str(), r.key.as_str()), ("zundoko-system", "zundoko-rules", "rules.wasm"));
        let r: ConfigMapRef = "ns/cm:other.wasm".parse().unwrap();
        assert_eq!(r.key, "other.wasm");
        for bad in ["cm", "/cm", "ns/", "ns/cm:", "ns/a/b"] {
            assert!(bad.parse::<ConfigMapRef>().is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn a_module_under_data_or_missing_is_named_as_the_problem() {
        let r: ConfigMapRef = "ns/cm".parse().unwrap();
        let registry = Registry::new(crate::supply::oci::RegistrySettings::default()).unwrap();
        let candidate = |cm: &ConfigMap| futures::executor::block_on(r.candidate(cm, &registry));
        let mut cm = ConfigMap::default();
        assert!(candidate(&cm).bytes.unwrap_err().contains("no key `rules.wasm`"));
        cm.data = Some([("rules.wasm".to_string(), "text".to_string())].into());
        assert!(candidate(&cm).bytes.unwrap_err().contains("under data, not binaryData"));
        cm.binary_data = Some([("rules.wasm".to_string(), k8s_openapi::ByteString(b"\0asm".to_vec()))].into());
        let found = candidate(&cm);
        assert_eq!(found.digest(), Some(crate::supply::digest(b"\0asm").as_str()));
        assert_eq!(found.bytes.unwrap(), b"\0asm");
    }
}
