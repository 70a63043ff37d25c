//! A real API server, named by `ZUNDOKO_BENCH_KUBECONFIG` (issue 55's held-out check): the
//! CRDs applied if missing, every run in a fresh namespace of its own that nobody could take
//! for theirs (`zundoko-bench-<run>-<n>-<id>`), refused if it exists, deleted when the run ends,
//! and on a panic or Ctrl-C as far as this process still runs.

use std::sync::{Mutex, OnceLock};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde::de::DeserializeOwned;
use zundoko_operator::crd::{Kiyoshi, Zundoko, ZundokoRules};

use super::*;

/// The kubeconfig of the API server to run against instead of a local one.
pub(crate) const REAL_KUBECONFIG: &str = "ZUNDOKO_BENCH_KUBECONFIG";
/// The suffix of the bench's namespaces (default: random), so a script can find them.
pub(crate) const RUN_ID: &str = "ZUNDOKO_BENCH_RUN_ID";
/// The label on every namespace the bench creates.
pub(crate) const BENCH_LABEL: &str = "zundokokiyoshi.kaitoy.github.com/bench";
/// The field manager the CRDs are applied with: `make deploy`'s, so an install later owns them.
const FIELD_MANAGER: &str = "zundoko-deploy";
/// How long a CRD may take to be served, a run's objects to be gone once deleted, and its
/// deleted namespace after them (an empty namespace goes in seconds where kube-controller-
/// manager's namespace controller runs, and never where it does not).
const CRD_ESTABLISHED: Duration = Duration::from_secs(60);
const OBJECTS_GONE: Duration = Duration::from_secs(300);
/// Seconds a deleted namespace is waited for (default 60).
pub(crate) const NAMESPACE_WAIT: &str = "ZUNDOKO_BENCH_NAMESPACE_WAIT_SECS";

fn namespace_wait() -> Duration {
    Duration::from_secs(std::env::var(NAMESPACE_WAIT).ok().and_then(|s| s.parse().ok()).unwrap_or(60))
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum RealError {
    #[error("{REAL_KUBECONFIG}={0}: {1}")]
    Kubeconfig(String, String),
    #[error("namespace {0} exists: a run only sings in a namespace it creates, and deletes it after; refusing to start")]
    NamespaceExists(String),
    #[error("{0}: {what}", what = briefly(.1))]
    Api(String, kube::Error),
    #[error("CRD {0} is not Established after {1:?}")]
    CrdNotEstablished(String, Duration),
    #[error("namespace {0} is still there {1:?} after it was deleted ({why}): delete it with `kubectl delete namespace {0}` once it can go", why = if *.2 { "its objects are gone; kube-apiserver without kube-controller-manager never removes it, and a slow namespace controller takes longer" } else { "not all its objects could be deleted, said above" })]
    NamespaceNotGone(String, Duration, bool),
    #[error("namespace {0}: {1} are still there {2:?} after they were deleted")]
    ObjectsNotGone(String, &'static str, Duration),
    #[error("{RUN_ID}={0}: want up to 12 lowercase letters and digits")]
    RunId(String),
}

pub(crate) struct RealCluster {
    pub(crate) kubeconfig: PathBuf,
    pub(crate) client: Client,
    id: String,
    runs: AtomicUsize,
}

static REAL: OnceLock<RealCluster> = OnceLock::new();
/// The namespaces this process created and has not deleted yet.
static LIVE: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// The operator processes running now: stopped on Ctrl-C, which a signal sent to this process
/// alone (not the terminal's process group) would leave running.
static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

pub(crate) fn child_started(pid: u32) {
    CHILDREN.lock().unwrap_or_else(|e| e.into_inner()).push(pid);
}

pub(crate) fn child_ended(pid: u32) {
    CHILDREN.lock().unwrap_or_else(|e| e.into_inner()).retain(|p| *p != pid);
}

/// The real API server, once [`connect`] found one.
pub(crate) fn real_cluster() -> Option<&'static RealCluster> {
    REAL.get()
}

/// A client of the API server `kubeconfig` names (its current context).
pub(crate) async fn client_from(kubeconfig: &Path) -> Result<Client, RealError> {
    let named = |e: String| RealError::Kubeconfig(kubeconfig.display().to_string(), e);
    let file = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| named(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default()).await.map_err(|e| named(e.to_string()))?;
    Client::try_from(config).map_err(|e| named(e.to_string()))
}

/// With `ZUNDOKO_BENCH_KUBECONFIG`: its API server, the CRDs there (applied if missing), Ctrl-C
/// deleting the run's namespace. `None` without it.
pub(crate) async fn connect() -> Result<Option<&'static RealCluster>, RealError> {
    let Some(path) = std::env::var_os(REAL_KUBECONFIG).filter(|p| !p.is_empty()) else { return Ok(None) };
    let kubeconfig = PathBuf::from(path);
    let client = client_from(&kubeconfig).await?;
    let id = match std::env::var(RUN_ID) {
        Ok(id) if id.len() <= 12 && !id.is_empty() && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) => id,
        Ok(id) => return Err(RealError::RunId(id)),
        Err(_) => format!("{:06x}", rand::random::<u32>() & 0xff_ffff),
    };
    apply_crds(&client).await?;
    // An operator deployed in the cluster (deploy/) sings every namespace's Hikawas unless it
    // was confined to one: the bench's too, and the figures would not be the bench's.
    let deployed = ListParams::default().labels("app.kubernetes.io/name=zundoko-operator");
    match Api::<k8s_openapi::api::core::v1::Pod>::all(client.clone()).list(&deployed).await {
        Ok(pods) if !pods.items.is_empty() => {
            let names: Vec<String> = pods.items.iter().map(|p| format!("{}/{}", p.metadata.namespace.as_deref().unwrap_or(""), p.metadata.name.as_deref().unwrap_or(""))).collect();
            println!("note: zundoko-operator Pods run in this cluster ({}): unless confined to a namespace of their own (--namespace), they sing the bench's Hikawas too", names.join(", "));
        }
        Ok(_) => {}
        Err(e) => println!("note: could not look for zundoko-operator Pods in the cluster ({}): one that watches every namespace would sing the bench's Hikawas too", briefly(&e)),
    }
    let rules = Api::<ZundokoRules>::all(client.clone()).list(&ListParams::default().limit(1)).await.map(|l| l.items.len()).unwrap_or(0);
    if rules > 0 {
        println!("note: the cluster has ZundokoRules; one whose selector takes the bench's Hikawas sings them with its module, not the run's");
    }
    // Ctrl-C: the run's namespace deleted before this process ends (its operator and client
    // processes get the terminal's SIGINT too).
    tokio::spawn(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            for pid in std::mem::take(&mut *CHILDREN.lock().unwrap_or_else(|e| e.into_inner())) {
                // SAFETY: kill(2) on a process this bench started and has not yet waited for.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
            }
            eprintln!("interrupted: deleting the run's namespace");
            if let Some(cluster) = real_cluster() {
                delete_live(&cluster.client).await;
            }
            std::process::exit(130);
        }
    });
    let cluster = RealCluster { kubeconfig, client, id, runs: AtomicUsize::new(0) };
    Ok(Some(REAL.get_or_init(|| cluster)))
}

/// An API error as a line: its code and message, not the whole Status.
fn briefly(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => format!("{} {}", status.code, status.message),
        other => other.to_string(),
    }
}

/// The project's CRDs (deploy/crds/, `zundoko-operator crd`) applied server-side as `make
/// deploy` applies them, those missing only; the ones there are left as they are. Never
/// deleted: that would delete every Hikawa in the cluster.
async fn apply_crds(client: &Client) -> Result<(), RealError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let (mut created, mut present) = (Vec::new(), Vec::new());
    for crd in zundoko_operator::crd::all() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let there = crds.get_opt(&name).await.map_err(|e| RealError::Api(format!("reading CRD {name}"), e))?;
        if there.is_some() {
            present.push(name);
            continue;
        }
        crds.patch(&name, &PatchParams::apply(FIELD_MANAGER), &Patch::Apply(&crd)).await.map_err(|e| RealError::Api(format!("applying CRD {name}"), e))?;
        let asked = Instant::now();
        loop {
            let crd = crds.get(&name).await.map_err(|e| RealError::Api(format!("reading CRD {name}"), e))?;
            let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
            if conditions.iter().any(|c| c.type_ == "Established" && c.status == "True") {
                break;
            }
            if asked.elapsed() > CRD_ESTABLISHED {
                return Err(RealError::CrdNotEstablished(name, CRD_ESTABLISHED));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        created.push(name);
    }
    if !created.is_empty() {
        println!("CRDs applied (missing; left in place after the bench): {}", created.join(", "));
    }
    if !present.is_empty() {
        println!("CRDs already there (used as they are): {}", present.join(", "));
    }
    Ok(())
}

/// A run's namespace: deleted by [`RunNamespace::delete`], or when dropped (a panic).
pub(crate) struct RunNamespace {
    pub(crate) name: String,
}

/// `run`'s name as part of a DNS label: lowercase letters, digits and dashes.
fn dns_part(run: &str) -> String {
    let part: String = run.to_lowercase().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    let part = part.trim_matches('-');
    part.chars().take(24).collect::<String>().trim_end_matches('-').to_string()
}

impl RealCluster {
    /// A fresh namespace for `run`, refused if it exists.
    pub(crate) async fn fresh_namespace(&self, run: &str) -> Result<RunNamespace, RealError> {
        let n = self.runs.fetch_add(1, Ordering::Relaxed) + 1;
        let name = format!("zundoko-bench-{}-{n}-{}", dns_part(run), self.id);
        let namespace = Namespace {
            metadata: ObjectMeta { name: Some(name.clone()), labels: Some([(BENCH_LABEL.to_string(), "scale".to_string())].into()), ..ObjectMeta::default() },
            ..Namespace::default()
        };
        match Api::<Namespace>::all(self.client.clone()).create(&PostParams::default(), &namespace).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => return Err(RealError::NamespaceExists(name)),
            Err(e) => return Err(RealError::Api(format!("creating namespace {name}"), e)),
        }
        LIVE.lock().unwrap_or_else(|e| e.into_inner()).push(name.clone());
        Ok(RunNamespace { name })
    }
}

impl RunNamespace {
    /// Its objects deleted kind by kind and waited for until they are gone, then the namespace
    /// deleted and waited for, so the next run starts on a server that is done with this one's.
    /// The kinds first: a server without kube-controller-manager (kube-apiserver and etcd
    /// alone) neither empties a deleted namespace nor collects a deleted Hikawa's children, and
    /// would keep them all; its namespace is then left Terminating, said, not waited for long.
    pub(crate) async fn delete(self, client: &Client) -> Result<(), RealError> {
        let api = Api::<Namespace>::all(client.clone());
        let name = self.name.clone();
        let refused = empty_namespace(client, &name).await;
        for e in &refused {
            eprintln!("  [{e}]");
        }
        delete_live(client).await;
        std::mem::forget(self);
        let (asked, wait) = (Instant::now(), namespace_wait());
        while api.get_opt(&name).await.map_err(|e| RealError::Api(format!("reading namespace {name}"), e))?.is_some() {
            if asked.elapsed() > wait {
                return Err(RealError::NamespaceNotGone(name, wait, refused.is_empty()));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Ok(())
    }
}

/// Deletes what a run makes in `namespace` (Hikawas, their children, Events, the operator's
/// Leases) and waits until none is left; each kind tried, whatever the others gave: what was
/// refused or not gone.
async fn empty_namespace(client: &Client, namespace: &str) -> Vec<RealError> {
    [
        delete_kind::<Hikawa>(client, namespace, "Hikawas").await,
        delete_kind::<Zundoko>(client, namespace, "Zundokos").await,
        delete_kind::<Kiyoshi>(client, namespace, "Kiyoshis").await,
        delete_kind::<Event>(client, namespace, "Events").await,
        delete_kind::<Lease>(client, namespace, "Leases").await,
    ]
    .into_iter()
    .filter_map(Result::err)
    .collect()
}

/// Every `K` in `namespace` deleted (one delete-collection) and waited for until none is listed.
async fn delete_kind<K>(client: &Client, namespace: &str, kinds: &'static str) -> Result<(), RealError>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope> + Clone + std::fmt::Debug + DeserializeOwned,
    K::DynamicType: Default,
{
    let api = Api::<K>::namespaced(client.clone(), namespace);
    let what = || format!("deleting the {kinds} of namespace {namespace}");
    api.delete_collection(&DeleteParams::background(), &ListParams::default()).await.map_err(|e| RealError::Api(what(), e))?;
    let asked = Instant::now();
    while !api.list_metadata(&ListParams::default().limit(1)).await.map_err(|e| RealError::Api(what(), e))?.items.is_empty() {
        if asked.elapsed() > OBJECTS_GONE {
            return Err(RealError::ObjectsNotGone(namespace.to_string(), kinds, OBJECTS_GONE));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

impl Drop for RunNamespace {
    /// A panic: the namespace deleted from a thread of its own (this one may be a runtime's),
    /// with a client of its own (the run's lives on the runtime being unwound).
    fn drop(&mut self) {
        let Some(kubeconfig) = real_cluster().map(|c| c.kubeconfig.clone()) else { return };
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
            runtime.block_on(async {
                if let Ok(client) = client_from(&kubeconfig).await {
                    delete_live(&client).await;
                }
            })
        })
        .join();
    }
}

/// Deletes every namespace this process created and has not deleted (errors said, not fatal:
/// what is left is named).
async fn delete_live(client: &Client) {
    let live = std::mem::take(&mut *LIVE.lock().unwrap_or_else(|e| e.into_inner()));
    for name in live {
        match Api::<Namespace>::all(client.clone()).delete(&name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => eprintln!("could not delete namespace {name} ({e}): delete it with `kubectl delete namespace {name}`"),
        }
    }
}
