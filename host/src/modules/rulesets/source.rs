//! Where a rule set's modules come from: ConfigMaps in the namespaces the operator reads rules
//! from. Those namespaces' ConfigMaps are watched by their metadata only (a few hundred bytes
//! each, whatever they hold); a ConfigMap's data is fetched only when a rule set names it and
//! its resourceVersion moved, then its module is checked once per digest (`ModuleLoader`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch};
use kube::{Api, Client};

use crate::crd::ConfigMapSource;
use crate::modules::ModuleLoader;
use crate::modules::sandbox::RulesModule;
use crate::modules::swap::configmap::{ConfigMapRef, DEFAULT_KEY};
use crate::modules::swap::{Rejection, check_pin, normalize_pin};

/// Why a source gives no module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// CamelCase, for conditions and Events (`SourceNotFound`, `ModulePinMismatch`, ...).
    pub reason: String,
    pub message: String,
    /// It may resolve by itself (the ConfigMap does not exist yet): the rule set is Pending,
    /// not Rejected.
    pub pending: bool,
}

impl Problem {
    fn new(reason: &str, message: String, pending: bool) -> Self {
        Problem { reason: reason.into(), message: crate::text::printable(&message, 1024), pending }
    }
}

/// A source as named by a rule set, with its pin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceSpec {
    pub configmap: ConfigMapRef,
    /// `sha256:<hex>`, lowercase.
    pub pin: Option<String>,
}

impl SourceSpec {
    pub fn new(source: &ConfigMapSource, pin: Option<&str>) -> Self {
        let configmap = ConfigMapRef {
            namespace: source.namespace.clone(),
            name: source.name.clone(),
            key: source.key.clone().unwrap_or_else(|| DEFAULT_KEY.into()),
        };
        SourceSpec { configmap, pin: pin.map(normalize_pin) }
    }
}

/// What checking a source found. Kept until the source, its pin or its ConfigMap changes.
#[derive(Clone)]
pub struct Checked {
    pub spec: SourceSpec,
    /// The ConfigMap's resourceVersion when it was read (none if it was not there).
    pub resource_version: Option<String>,
    pub outcome: Result<Arc<RulesModule>, Problem>,
}

/// One namespace's ConfigMaps, by metadata.
struct Namespace {
    store: Store<PartialObjectMeta<ConfigMap>>,
    listed: Arc<AtomicBool>,
    /// Why they cannot be listed (RBAC, say), until they are.
    failing: Arc<std::sync::Mutex<Option<String>>>,
}

pub struct Sources {
    client: Client,
    modules: Arc<ModuleLoader>,
    namespaces: HashMap<String, Namespace>,
}

/// A ConfigMap in a rules namespace changed (its metadata, so its data may have too).
pub type ConfigMapChanges = std::pin::Pin<Box<dyn Stream<Item = Result<PartialObjectMeta<ConfigMap>, watcher::Error>> + Send>>;

impl Sources {
    /// Watch the ConfigMaps of `namespaces` by metadata. Returns the sources and the stream of
    /// changes, which must be polled (the rule set controller watches it).
    pub fn watch(client: &Client, namespaces: &[String], modules: Arc<ModuleLoader>) -> (Sources, ConfigMapChanges) {
        let mut streams = Vec::new();
        let mut by_name = HashMap::new();
        for ns in namespaces {
            let (store, writer) = reflector::store();
            let listed = Arc::new(AtomicBool::new(false));
            let failing = Arc::new(std::sync::Mutex::new(None));
            let (flag, error) = (listed.clone(), failing.clone());
            // An Api of PartialObjectMeta lists and watches metadata only.
            let api: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(client.clone(), ns);
            let stream = reflector::reflector(writer, watch(api, watcher::Config::default()).default_backoff().modify(|cm| {
                cm.metadata.managed_fields = None;
                cm.metadata.annotations = None;
            }))
            .inspect(move |event| match event {
                Ok(Event::InitDone) => {
                    flag.store(true, Ordering::SeqCst);
                    *error.lock().unwrap_or_else(|p| p.into_inner()) = None;
                }
                Err(e) if !flag.load(Ordering::SeqCst) => *error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string()),
                _ => {}
            })
            .touched_objects();
            streams.push(stream.boxed());
            by_name.insert(ns.clone(), Namespace { store, listed, failing });
        }
        let changes: ConfigMapChanges = Box::pin(futures::stream::select_all(streams));
        (Sources { client: client.clone(), modules, namespaces: by_name }, changes)
    }

    /// Check `spec`'s module, unless `last` already did for the same ConfigMap version.
    /// `None` while the namespace's ConfigMaps have not been listed yet, or if the ConfigMap
    /// must be read again but `defer` says not now.
    pub async fn check(&self, spec: &SourceSpec, last: Option<&Checked>, pinned_by: &'static str, defer: bool) -> Result<Option<Checked>, kube::Error> {
        let cm = &spec.configmap;
        let Some(namespace) = self.namespaces.get(&cm.namespace) else {
            let mut allowed: Vec<&str> = self.namespaces.keys().map(String::as_str).collect();
            allowed.sort();
            let problem = Problem::new(
                "SourceNotAllowed",
                format!(
                    "the operator reads rules only from ConfigMaps in {} (--rules-namespaces), not from namespace {}",
                    allowed.join(", "),
                    cm.namespace
                ),
                false,
            );
            return Ok(Some(Checked { spec: spec.clone(), resource_version: None, outcome: Err(problem) }));
        };
        if !namespace.listed.load(Ordering::SeqCst) {
            let failing = namespace.failing.lock().unwrap_or_else(|p| p.into_inner()).clone();
            return Ok(failing.map(|why| {
                let message = format!("cannot list the ConfigMaps of namespace {} (does the operator's role allow it?): {why}", cm.namespace);
                Checked { spec: spec.clone(), resource_version: None, outcome: Err(Problem::new("SourceUnreadable", message, true)) }
            }));
        }
        let version = namespace.store.get(&ObjectRef::new(&cm.name).within(&cm.namespace)).and_then(|m| m.metadata.resource_version.clone());
        if let Some(last) = last
            && last.spec == *spec
            && last.resource_version == version
        {
            return Ok(Some(last.clone()));
        }
        let Some(version) = version else {
            let problem = Problem::new("SourceNotFound", format!("ConfigMap {}/{} does not exist (yet)", cm.namespace, cm.name), true);
            return Ok(Some(Checked { spec: spec.clone(), resource_version: None, outcome: Err(problem) }));
        };
        if defer {
            return Ok(None);
        }
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &cm.namespace);
        let Some(object) = api.get_opt(&cm.name).await? else {
            let problem = Problem::new("SourceNotFound", format!("ConfigMap {}/{} does not exist (yet)", cm.namespace, cm.name), true);
            return Ok(Some(Checked { spec: spec.clone(), resource_version: None, outcome: Err(problem) }));
        };
        let candidate = cm.candidate(&object);
        let digest = candidate.key().to_owned();
        let outcome = match candidate.bytes {
            Err(why) => Err(Problem::new("ModuleUnreadable", why, false)),
            Ok(bytes) => {
                let (modules, pin) = (self.modules.clone(), spec.pin.clone());
                tokio::task::spawn_blocking(move || -> Result<Arc<RulesModule>, Rejection> {
                    check_pin(pin.as_deref(), &digest, pinned_by)?;
                    Ok(modules.load(&bytes, &digest)?)
                })
                .await
                .unwrap_or_else(|e| Err(Rejection::Unreadable(format!("checking the module panicked: {e}"))))
                .map_err(|rejection| Problem::new(rejection.reason(), rejection.to_string(), false))
            }
        };
        Ok(Some(Checked { spec: spec.clone(), resource_version: object.metadata.resource_version.or(Some(version)), outcome }))
    }
}
