//! Where a rule set's modules come from: ConfigMaps in the namespaces the operator reads rules
//! from, or OCI registries. Those namespaces' ConfigMaps are watched by their metadata only (a
//! few hundred bytes each, whatever they hold); a ConfigMap's data is fetched only when a rule
//! set names it and its resourceVersion moved. An artifact in a registry is pulled (or read
//! from the cache) once per digest, its pull secret read from the same namespaces. Either way
//! the module is then checked once per digest (`ModuleLoader`).

use std::collections::HashMap;
use std::time::Duration;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch};
use kube::{Api, Client};

use crate::crd::{ModuleSource, SecretReference};
use crate::supply::ModuleLoader;
use crate::supply::digest::normalize_pin;
use crate::supply::fetch::{Checks, Fetched, Source, fetch_module};
use crate::supply::oci::{ModuleRef, Registry, TrustedKey};
use crate::supply::sandbox::{GuestError, RulesModule, WhoCompiles};
use crate::supply::sources::Rejection;
use crate::supply::sources::configmap::{ConfigMapRef, DEFAULT_KEY};
use crate::supply::tenant::Tenant;
use crate::supply::tenant_bounds::TenantBounds;

pub use crate::supply::fetch::Problem;

/// An artifact in a registry, as a rule set names it.
#[derive(Clone, Debug, PartialEq)]
pub struct OciSpec {
    /// As written (`spec.source.oci.reference`), or why it is not a reference.
    pub reference: Result<ModuleRef, String>,
    /// The digest to serve: the reference's own, or what its tag was resolved to (once; none
    /// yet: resolve it).
    pub digest: Option<String>,
    pub pull_secret: Option<SecretReference>,
    /// The rule set's own trusted keys, or why one is not a key.
    pub keys: Result<Vec<TrustedKey>, String>,
    /// `requireIdentity`: a signature must name this repository.
    pub identity: bool,
}


#[derive(Clone, Debug, PartialEq)]
pub enum SourceRef {
    ConfigMap(ConfigMapRef),
    Oci(OciSpec),
}

/// A source as named by a rule set, with its pin.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceSpec {
    pub source: SourceRef,
    /// `sha256:<hex>`, lowercase.
    pub pin: Option<String>,
    /// Whose rule set names it: a tenant's reads its ConfigMap and pull secret from its own
    /// namespace only.
    pub tenant: Tenant,
    /// What the tenant's policy holds its module to (none for the cluster's).
    pub bounds: Option<TenantBounds>,
}

impl SourceSpec {
    /// `digest`: for a tag, the digest it was resolved to before (kept, not resolved again).
    pub fn new(source: &ModuleSource, pin: Option<&str>, digest: Option<String>) -> Self {
        let source = match (&source.config_map, &source.oci) {
            (Some(cm), _) => SourceRef::ConfigMap(ConfigMapRef {
                namespace: cm.namespace.clone(),
                name: cm.name.clone(),
                key: cm.key.clone().unwrap_or_else(|| DEFAULT_KEY.into()),
            }),
            (None, Some(oci)) => {
                let reference = oci.reference.parse::<ModuleRef>();
                let keys = oci
                    .public_keys
                    .iter()
                    .enumerate()
                    .map(|(i, pem)| TrustedKey::from_pem(&format!("spec publicKeys[{i}]"), pem))
                    .collect::<Result<Vec<_>, _>>();
                let digest = reference.as_ref().ok().and_then(|r| r.digest.clone()).or(digest);
                SourceRef::Oci(OciSpec { reference, digest, pull_secret: oci.pull_secret.clone(), keys, identity: oci.require_identity })
            }
            // The CRD's validation refuses it; a source without either names nothing.
            (None, None) => SourceRef::Oci(OciSpec {
                reference: Err("the source names neither a configMap nor an oci reference".into()),
                digest: None,
                pull_secret: None,
                keys: Ok(Vec::new()),
                identity: false,
            }),
        };
        SourceSpec { source, pin: pin.map(normalize_pin), tenant: Tenant::Cluster, bounds: None }
    }

    /// The same source, named by `tenant`'s rule set.
    pub fn of(self, tenant: &Tenant) -> Self {
        SourceSpec { tenant: tenant.clone(), ..self }
    }

    /// The same source, its module held to a tenant policy's `bounds`.
    pub fn bounded(self, bounds: Option<&TenantBounds>) -> Self {
        SourceSpec { bounds: bounds.cloned(), ..self }
    }

    /// What the fetched bytes must pass: the pin, and a tenant policy's size and keys.
    fn checks(&self, pinned_by: &'static str) -> Checks<'_> {
        let bounds = self.bounds.as_ref();
        Checks {
            pin: self.pin.as_deref(),
            pinned_by,
            // A tenant's size ceiling is its policy's to name (TenantBounds::admit).
            max_bytes: None,
            required_keys: bounds.map_or(&[], |b| b.required_keys.as_slice()),
            // A tenant's artifact: its registry must answer for its own credentials.
            prove_access: self.tenant != Tenant::Cluster,
        }
    }

    /// Whether what `self` found answers `asked`: the same source, or the same tag asked without
    /// a digest (it was resolved once already: not again).
    fn answers(&self, asked: &SourceSpec) -> bool {
        match (&self.source, &asked.source) {
            (SourceRef::Oci(found), SourceRef::Oci(wanted)) if wanted.digest.is_none() && self.pin == asked.pin => {
                OciSpec { digest: None, ..found.clone() } == *wanted
            }
            _ => self == asked,
        }
    }

    pub fn oci(&self) -> Option<&OciSpec> {
        match &self.source {
            SourceRef::Oci(oci) => Some(oci),
            SourceRef::ConfigMap(_) => None,
        }
    }
}

/// What checking a source found. Kept until the source, its pin or its ConfigMap changes.
#[derive(Clone)]
pub struct Checked {
    pub spec: SourceSpec,
    /// The ConfigMap's resourceVersion when it was read (none if it was not there); for an
    /// artifact, its manifest digest.
    pub resource_version: Option<String>,
    pub outcome: Result<Arc<RulesModule>, Problem>,
    /// From a registry: the artifact pinned by digest (what the status shows).
    pub pinned: Option<ModuleRef>,
    /// When a registry was last tried, for a retry after a failure that may pass.
    pub tried_at: std::time::Instant,
    /// The keys the module had to verify with (`Registry::trust`), `None` if none: a verdict
    /// made under other keys (a rule set's `publicKeys` or `--trusted-keys` changed) does not
    /// hold, and the module it gave serves no longer.
    pub trust: Option<String>,
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
    registry: Arc<Registry>,
    namespaces: HashMap<String, Namespace>,
}

/// A ConfigMap in a rules namespace changed (its metadata, so its data may have too).
pub type ConfigMapChanges = std::pin::Pin<Box<dyn Stream<Item = Result<PartialObjectMeta<ConfigMap>, watcher::Error>> + Send>>;

impl Sources {
    /// The shortest interval a followed tag is resolved again at (`--min-poll-secs`).
    pub fn min_poll(&self) -> std::time::Duration {
        self.registry.settings().min_poll
    }

    /// Watch the ConfigMaps of `namespaces` by metadata. Returns the sources and the stream of
    /// changes, which must be polled (the rule set controller watches it).
    pub fn watch(client: &Client, namespaces: &[String], modules: Arc<ModuleLoader>, registry: Arc<Registry>) -> (Sources, ConfigMapChanges) {
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
        (Sources { client: client.clone(), modules, registry, namespaces: by_name }, changes)
    }

    /// Sources for tenants' rule sets only, reading no rules namespace (a cluster rule set's
    /// ConfigMap or pull secret is refused as outside `--rules-namespaces`): what `explain`
    /// checks a tenant's module with, so that it is read, pulled and checked as `run` does.
    pub fn for_tenants(client: &Client, modules: Arc<ModuleLoader>, registry: Arc<Registry>) -> Sources {
        Sources { client: client.clone(), modules, registry, namespaces: HashMap::new() }
    }

    /// Refused unless `namespace` is one the operator reads rules from.
    fn allowed(&self, namespace: &str, what: &str) -> Result<(), Problem> {
        allowed_in(&self.rules_namespaces(), namespace, what)
    }

    fn rules_namespaces(&self) -> Vec<&str> {
        self.namespaces.keys().map(String::as_str).collect()
    }

    /// The digest a followed tag points at now, as the registry answers (never the cache's
    /// record of the tag: with the registry down, what serves keeps serving).
    /// Its permit is `tenant`'s.
    pub async fn resolve(&self, oci: &OciSpec, tenant: &Tenant) -> Result<String, Problem> {
        let reference = oci.reference.as_ref().map_err(|why| Problem::new("InvalidReference", why.clone(), false))?;
        let auth = self.auth(oci, tenant).await?;
        tenant.clone().pulling(self.registry.resolve_anew(reference, &auth)).await.map_err(|e| Problem::from(&e))
    }

    /// The credentials of an artifact's pull secret (anonymous without one).
    async fn auth(&self, oci: &OciSpec, tenant: &Tenant) -> Result<oci_client::secrets::RegistryAuth, Problem> {
        pull_secret_auth(&self.client, &self.rules_namespaces(), oci, tenant, || grant_hint(tenant, "secrets")).await
    }

    /// Check an artifact: pulled (or from the cache), checked against its digest and the
    /// trusted keys, then compiled and checked as any module.
    async fn check_oci(&self, spec: &SourceSpec, oci: &OciSpec, pinned_by: &'static str, uid: &str) -> Checked {
        // The keys as they are before the pull: if they change meanwhile, it is checked again.
        let trust = self.trust(oci);
        let (outcome, pinned) = spec.tenant.clone().pulling(self.pull(oci, spec, pinned_by, uid)).await;
        // What was found is for this digest: asked again with it (the status records it), the
        // same answer holds.
        let mut spec = spec.clone();
        if let (SourceRef::Oci(oci), Some(pinned)) = (&mut spec.source, &pinned) {
            oci.digest = pinned.digest.clone();
        }
        Checked { resource_version: pinned.as_ref().and_then(|p| p.digest.clone()), spec, outcome, pinned, tried_at: std::time::Instant::now(), trust }
    }

    /// The keys an artifact's module must verify with now (`None`: none).
    pub fn trust(&self, oci: &OciSpec) -> Option<String> {
        self.registry.keys().trust(oci.keys.as_deref().unwrap_or_default())
    }

    /// The module an artifact holds, or why there is none; and the artifact pinned, once its
    /// digest is known.
    async fn pull(&self, oci: &OciSpec, spec: &SourceSpec, pinned_by: &'static str, uid: &str) -> (Result<Arc<RulesModule>, Problem>, Option<ModuleRef>) {
        let reference = match &oci.reference {
            Ok(r) => r,
            Err(why) => return (Err(Problem::new("InvalidReference", why.clone(), false)), None),
        };
        let keys = match &oci.keys {
            Ok(keys) => keys,
            Err(why) => return (Err(Problem::new("InvalidPublicKey", why.clone(), false)), None),
        };
        // The pull secret read once, for the resolve and the pull.
        let auth = match self.auth(oci, &spec.tenant).await {
            Ok(auth) => auth,
            Err(problem) => return (Err(problem), oci.digest.as_deref().map(|d| reference.pinned(d))),
        };
        let digest = match &oci.digest {
            Some(digest) => digest.clone(),
            None => match self.registry.resolve_once(reference, &auth).await {
                Ok(digest) => digest,
                Err(error) => return (Err(Problem::from(&error)), None),
            },
        };
        let pinned = reference.pinned(&digest);
        // One try: a failure that may pass is tried again by a requeue (OCI_RETRY), not a pause.
        let source = Source::Oci { reference, digest: Some(&digest), retry: false, identity: oci.identity };
        let checks = spec.checks(pinned_by);
        let fetched = match fetch_module(source, &auth, keys, Some(&self.registry), &checks).await {
            Ok(fetched) => fetched,
            Err(problem) => return (Err(problem), Some(pinned)),
        };
        tracing::info!(reference = %reference, %pinned, signed_by = fetched.signed_by.as_deref().unwrap_or("-"), from_cache = fetched.from_cache, "rule set module pulled");
        (self.load(fetched, spec, uid).await, Some(pinned))
    }

    /// Compile and check a module's fetched bytes (off the async workers), once per digest
    /// (a tenant's held to its policy's ceilings first);
    /// a compile waits its turn as the rule set `uid`'s, of `spec`'s tenant (compile_queue.rs).
    async fn load(&self, fetched: Fetched, spec: &SourceSpec, uid: &str) -> Result<Arc<RulesModule>, Problem> {
        let bounds = spec.bounds.as_ref();
        // A tenant's module within its policy's ceilings, before anything is spent compiling it.
        if let Some(bounds) = bounds {
            bounds.admit(&fetched.bytes, self.modules.limits())?;
        }
        let (modules, who) = (self.modules.clone(), WhoCompiles::RuleSet(spec.tenant.clone(), uid.to_owned()));
        let ceilings = bounds.map_or((None, None), |b| (b.compile_memory_bytes.map(|m| usize::try_from(m).unwrap_or(usize::MAX)), b.compile_time));
        let loaded = tokio::task::spawn_blocking(move || -> Result<Arc<RulesModule>, Rejection> {
            Ok(crate::supply::sandbox::compiler_process::within(ceilings.0, ceilings.1, || modules.load_for(who, &fetched.bytes, &fetched.digest))?)
        });
        let outcome = loaded
        .await
        .unwrap_or_else(|e| Err(Rejection::Unreadable(format!("checking the module panicked: {e}"))));
        // A compile one of a tenant policy's ceilings stopped (it was lower than the operator's
        // own bound): refused by that line of the policy, as its other ceilings refuse.
        outcome.map_err(|rejection| match (rejection, bounds) {
            (Rejection::Guest(GuestError::CompileOverCeiling { field, message }), Some(bounds)) => bounds.refused(field, message),
            (rejection, _) => Problem::new(rejection.reason(), rejection.to_string(), false),
        })
    }

    /// Check `spec`'s module, unless `last` already did for the same ConfigMap version.
    /// `None` while the namespace's ConfigMaps have not been listed yet, or if the ConfigMap
    /// must be read again but `defer` says not now.
    ///
    /// An artifact is checked again only when its spec or digest changes, or, after a failure
    /// that may pass (the registry down), once `retry` has passed since the last try. `uid`:
    /// the rule set's, whose turn a compile waits for; its pulls and compiles take the share of
    /// `spec`'s tenant (its owner: `supply/tenant.rs`).
    pub async fn check(&self, uid: &str, spec: &SourceSpec, last: Option<&Checked>, pinned_by: &'static str, defer: bool, retry: Duration) -> Result<Option<Checked>, kube::Error> {
        let cm = match &spec.source {
            SourceRef::ConfigMap(cm) => cm,
            SourceRef::Oci(oci) => {
                if let Some(last) = last
                    && last.spec.answers(spec)
                    && last.trust == self.trust(oci)
                    && (last.outcome.as_ref().err().is_none_or(|p| !p.pending) || last.tried_at.elapsed() < retry)
                {
                    return Ok(Some(last.clone()));
                }
                if defer {
                    return Ok(None);
                }
                return Ok(Some(self.check_oci(spec, oci, pinned_by, uid).await));
            }
        };
        // With --require-signatures a ConfigMap's module is verified too: with other keys, again.
        let trust = self.registry.settings().require_signatures.then(|| self.registry.keys().trust(&[])).flatten();
        let checked = |resource_version, outcome| Checked { spec: spec.clone(), resource_version, outcome, pinned: None, tried_at: std::time::Instant::now(), trust: trust.clone() };
        if let Tenant::Namespace(own) = &spec.tenant {
            return self.check_tenant_configmap(uid, spec, cm, own, last, pinned_by, defer, trust).await;
        }
        let Some(namespace) = self.namespaces.get(&cm.namespace) else {
            let problem = self.allowed(&cm.namespace, "ConfigMaps").expect_err("not a rules namespace");
            return Ok(Some(checked(None, Err(problem))));
        };
        if !namespace.listed.load(Ordering::SeqCst) {
            let failing = namespace.failing.lock().unwrap_or_else(|p| p.into_inner()).clone();
            return Ok(failing.map(|why| {
                let message = format!("cannot list the ConfigMaps of namespace {} (does the operator's role allow it?): {why}", cm.namespace);
                checked(None, Err(Problem::new("SourceUnreadable", message, true)))
            }));
        }
        let version = namespace.store.get(&ObjectRef::new(&cm.name).within(&cm.namespace)).and_then(|m| m.metadata.resource_version.clone());
        if let Some(last) = last
            && last.spec == *spec
            && last.resource_version == version
            && last.trust == trust
        {
            return Ok(Some(last.clone()));
        }
        let Some(version) = version else {
            let problem = Problem::new("SourceNotFound", format!("ConfigMap {}/{} does not exist (yet)", cm.namespace, cm.name), true);
            return Ok(Some(checked(None, Err(problem))));
        };
        if defer {
            return Ok(None);
        }
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &cm.namespace);
        let Some(object) = api.get_opt(&cm.name).await? else {
            let problem = Problem::new("SourceNotFound", format!("ConfigMap {}/{} does not exist (yet)", cm.namespace, cm.name), true);
            return Ok(Some(checked(None, Err(problem))));
        };
        let checks = spec.checks(pinned_by);
        let outcome = match fetch_module(cm.source(&object), &oci_client::secrets::RegistryAuth::Anonymous, &[], Some(&self.registry), &checks).await {
            Ok(fetched) => self.load(fetched, spec, uid).await,
            Err(problem) => Err(problem),
        };
        Ok(Some(checked(object.metadata.resource_version.or(Some(version)), outcome)))
    }

    /// A tenant's ConfigMap: in its own namespace only, read by name (never listed or
    /// watched: the tenant grants the operator `get` on it alone), and checked again only when
    /// its resourceVersion moved. `defer`: read less than a second ago, keep what was found.
    #[allow(clippy::too_many_arguments)]
    async fn check_tenant_configmap(
        &self,
        uid: &str,
        spec: &SourceSpec,
        cm: &ConfigMapRef,
        own: &str,
        last: Option<&Checked>,
        pinned_by: &'static str,
        defer: bool,
        trust: Option<String>,
    ) -> Result<Option<Checked>, kube::Error> {
        let checked = |resource_version, outcome| Checked { spec: spec.clone(), resource_version, outcome, pinned: None, tried_at: std::time::Instant::now(), trust: trust.clone() };
        if let Err(problem) = own_namespace(own, &cm.namespace, "ConfigMap", &cm.name) {
            return Ok(Some(checked(None, Err(problem))));
        }
        let last = last.filter(|l| l.spec == *spec && l.trust == trust);
        if defer && let Some(last) = last {
            return Ok(Some(last.clone()));
        }
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &cm.namespace);
        let object = match api.get_opt(&cm.name).await {
            Ok(Some(object)) => object,
            Ok(None) => {
                let problem = Problem::new("SourceNotFound", format!("ConfigMap {}/{} does not exist (yet)", cm.namespace, cm.name), true);
                return Ok(Some(checked(None, Err(problem))));
            }
            Err(kube::Error::Api(status)) if status.code == 403 => {
                let problem = Problem::new("SourceUnreadable", format!("the operator may not read ConfigMap {}/{} ({})", cm.namespace, cm.name, grant_hint(&spec.tenant, "configmaps")), true);
                return Ok(Some(checked(None, Err(problem))));
            }
            Err(error) => return Err(error),
        };
        if let Some(last) = last
            && last.resource_version.is_some()
            && last.resource_version == object.metadata.resource_version
        {
            return Ok(Some(last.clone()));
        }
        let checks = spec.checks(pinned_by);
        let outcome = match fetch_module(cm.source(&object), &oci_client::secrets::RegistryAuth::Anonymous, &[], Some(&self.registry), &checks).await {
            Ok(fetched) => self.load(fetched, spec, uid).await,
            Err(problem) => Err(problem),
        };
        Ok(Some(checked(object.metadata.resource_version.clone(), outcome)))
    }
}

/// Refused unless `namespace` is one of `rules_namespaces`, those the operator reads rules from.
fn allowed_in(rules_namespaces: &[&str], namespace: &str, what: &str) -> Result<(), Problem> {
    if rules_namespaces.contains(&namespace) {
        return Ok(());
    }
    let mut allowed = rules_namespaces.to_vec();
    allowed.sort();
    Err(Problem::new(
        "SourceNotAllowed",
        format!("the operator reads rules only from {what} in {} (--rules-namespaces), not from namespace {namespace}", allowed.join(", ")),
        false,
    ))
}

/// The credentials of an artifact's pull secret (anonymous without one), read with `client`: a
/// cluster rule set's only from `rules_namespaces` (`--rules-namespaces`), a tenant's only from
/// its own namespace. `hint`: how the reader comes to be allowed to read it, said when it may
/// not. The operator's reads (`Sources`) and `explain`'s, with its user's own credentials,
/// are this one function: `explain` refuses what the operator refuses, with its words.
pub(crate) async fn pull_secret_auth(
    client: &Client,
    rules_namespaces: &[&str],
    oci: &OciSpec,
    tenant: &Tenant,
    hint: impl FnOnce() -> String,
) -> Result<oci_client::secrets::RegistryAuth, Problem> {
    let Some(secret) = &oci.pull_secret else { return Ok(oci_client::secrets::RegistryAuth::Anonymous) };
    let reference = oci.reference.as_ref().map_err(|why| Problem::new("InvalidReference", why.clone(), false))?;
    match &tenant {
        Tenant::Cluster => allowed_in(rules_namespaces, &secret.namespace, "pull secrets")?,
        Tenant::Namespace(own) => own_namespace(own, &secret.namespace, "pull secret", &secret.name)?,
    }
    let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &secret.namespace);
    let unreadable = |why: String| Problem::new("PullSecretUnreadable", format!("pull secret {}/{}: {why}", secret.namespace, secret.name), true);
    let found = api.get_opt(&secret.name).await.map_err(|e| unreadable(format!("cannot read it ({}): {e}", hint())))?;
    let Some(found) = found else { return Err(unreadable("does not exist (yet)".into())) };
    let json = found.data.as_ref().and_then(|d| d.get(".dockerconfigjson")).ok_or_else(|| {
        Problem::new("PullSecretInvalid", format!("pull secret {}/{} has no .dockerconfigjson (type kubernetes.io/dockerconfigjson)", secret.namespace, secret.name), false)
    })?;
    crate::supply::oci::auth::from_docker_config(&json.0, &reference.registry)
        .map_err(|why| Problem::new("PullSecretInvalid", format!("pull secret {}/{}: {why}", secret.namespace, secret.name), false))
}

/// Refused unless a tenant's rule set names an object (`what` `name`) in its own namespace.
fn own_namespace(own: &str, namespace: &str, what: &str, name: &str) -> Result<(), Problem> {
    if namespace == own {
        return Ok(());
    }
    Err(Problem::new(
        "SourceNotAllowed",
        format!("a ZundokoNamespacedRules reads only its own namespace's objects: {what} {namespace}/{name} is not in {own}"),
        false,
    ))
}

/// How the operator comes to read a rule set's Secrets or ConfigMaps (`resource`): its own
/// Role in the rules namespaces, or, in a tenant's, a Role the namespace's admin binds to it.
fn grant_hint(tenant: &Tenant, resource: &str) -> String {
    match tenant {
        Tenant::Cluster => "does the operator's role allow it?".into(),
        Tenant::Namespace(ns) => format!(
            "grant the operator's service account get on it in {ns}: a Role with this {resource} name in resourceNames and a RoleBinding, docs/tenants.md"
        ),
    }
}
