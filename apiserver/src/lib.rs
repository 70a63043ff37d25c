//! An in-memory Kubernetes API server for tests and the no-cluster demo.
//!
//! It speaks the kube-apiserver REST protocol on plain HTTP on 127.0.0.1 well enough for
//! kube-rs (`Api`, `watcher`, `Controller`) and basic `kubectl`: see README.md for what is
//! supported and what deliberately is not. It is a development tool and is never linked
//! into the operator binary.

mod authn;
mod celrules;
pub mod connections;
mod convert;
pub mod cost;
mod discovery;
pub mod faults;
mod gc;
mod godecode;
mod goquote;
mod http;
mod eventrules;
mod kubeconfig;
mod metrics;
mod objectmeta;
mod openapi;
mod ops;
mod patch;
mod protobuf;
mod registry;
mod route;
mod selectors;
pub mod rbac;
mod rbac_bootstrap;
mod rbac_escalation;
pub mod status;
mod store;
mod table;
mod typed;
mod util;
mod validation;
mod watch;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use faults::Faults;
pub use gc::SAFETY_NET_EVERY as GC_SAFETY_NET_EVERY;
pub use http::RequestRecord;
pub use authn::{ADMIN_TOKEN, ADMIN_USER};
pub use kubeconfig::CONTEXT as KUBECONFIG_CONTEXT;

/// kube-apiserver's `--authorization-mode`: which requests are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthorizationMode {
    /// Every request, whoever sends it (credentials and impersonation headers are not read).
    #[default]
    AlwaysAllow,
    /// Who is asking (authn.rs) and what RBAC grants them (rbac.rs), with the bootstrap roles
    /// (`cluster-admin`, `admin`, `edit`, `view`...) in place: as a cluster's `Node,RBAC`. RBAC
    /// objects granting what their writer does not hold are refused (rbac_escalation.rs).
    Rbac,
}

/// How to run the server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// How many change events are kept for watch resume; older resourceVersions get 410 Expired.
    pub history_size: usize,
    /// How often watches with allowWatchBookmarks=true get a BOOKMARK.
    pub bookmark_interval: Duration,
    /// If set, the kubeconfig is written here before the first connection is accepted.
    pub kubeconfig_out: Option<std::path::PathBuf>,
    pub authorization: AuthorizationMode,
    /// Whether kube-controller-manager's controllers run beside the server (the garbage
    /// collector, the namespace controller, ClusterRole aggregation), as in a cluster; without
    /// them it is kube-apiserver alone, as envtest runs it: a deleted namespace stays
    /// Terminating, a deleted owner's dependents stay. A CRD's instances are cleaned up either
    /// way (apiextensions-apiserver does that, inside kube-apiserver).
    pub controller_manager: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig { port: 0, history_size: 4096, bookmark_interval: Duration::from_secs(10), kubeconfig_out: None, authorization: AuthorizationMode::AlwaysAllow, controller_manager: true }
    }
}

/// A running in-memory API server.
pub struct ApiServer {
    inner: Arc<http::Inner>,
    tasks: Vec<JoinHandle<()>>,
}

impl ApiServer {
    /// Binds 127.0.0.1:`port` and serves in background tokio tasks.
    pub async fn start(config: ServerConfig) -> anyhow::Result<ApiServer> {
        let listener = TcpListener::bind(("127.0.0.1", config.port)).await?;
        let addr: SocketAddr = listener.local_addr()?;
        let store = Arc::new(store::Store::new(config.history_size.max(1)));
        {
            let mut st = store.lock();
            let now = util::now_rfc3339();
            for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
                let obj = serde_json::json!({
                    "apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": ns, "uid": util::new_uid(), "creationTimestamp": now,
                                 "labels": {"kubernetes.io/metadata.name": ns}},
                    "spec": {"finalizers": ["kubernetes"]},
                    "status": {"phase": "Active"},
                });
                st.put(&registry::GroupResource::new("", "namespaces"), obj);
            }
            // Only with RBAC: the default mode's objects and revisions stay as they were.
            if config.authorization == AuthorizationMode::Rbac {
                rbac_bootstrap::bootstrap(&mut st, config.controller_manager);
            }
        }
        if let Some(p) = &config.kubeconfig_out {
            std::fs::write(p, kubeconfig::kubeconfig_yaml(&format!("http://{addr}")))?;
        }
        let inner = Arc::new(http::Inner::new(store.clone(), addr, config.bookmark_interval.max(Duration::from_millis(10)), config.authorization));
        let mut tasks = vec![];
        tasks.push(tokio::spawn(http::serve(inner.clone(), listener)));
        tasks.push(tokio::spawn(gc::run(store.clone(), config.controller_manager)));
        let i2 = inner.clone();
        tasks.push(tokio::spawn(async move { i2.faults.run_dropper().await }));
        Ok(ApiServer { inner, tasks })
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.inner.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.inner.addr
    }

    /// A kubeconfig for the server: context `zundoko-local`, namespace `default`.
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig::kubeconfig_yaml(&self.url())
    }

    pub fn faults(&self) -> &Faults {
        &self.inner.faults
    }

    /// Keeps all state but breaks every open connection (watches included).
    pub async fn restart(&self) {
        self.inner.break_connections();
        tokio::task::yield_now().await;
    }

    /// The request log, oldest first.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.inner.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Requests handled so far, by (verb, resource, subresource), sorted; never cut (the log
    /// keeps only the newest 100,000 to 200,000).
    pub fn request_counts(&self) -> Vec<((String, String, String), u64)> {
        let counts = self.inner.counts.lock().unwrap_or_else(|e| e.into_inner());
        let mut counts: Vec<_> = counts.iter().map(|(k, v)| (k.clone(), *v)).collect();
        counts.sort();
        counts
    }

    /// The model that charges every request for what it costs a real server (none: nothing).
    pub fn cost(&self) -> &cost::Cost {
        &self.inner.cost
    }

    /// Requests answered so far, their durations' sum (the cost model's charge included) and
    /// their facts' sums, by (verb, resource, subresource), sorted; watches and requests never
    /// answered left out.
    pub fn request_durations(&self) -> Vec<((String, String, String), cost::Tally)> {
        let durations = self.inner.durations.lock().unwrap_or_else(|e| e.into_inner());
        let mut by_key: std::collections::BTreeMap<(String, String, String), cost::Tally> = Default::default();
        for ((_group, verb, resource, subresource), tally) in durations.iter() {
            by_key.entry((verb.clone(), resource.clone(), subresource.clone())).or_default().merge(tally);
        }
        by_key.into_iter().collect()
    }

    /// The TCP connections accepted so far: in all (with or without a request), and by
    /// client (the User-Agent of each connection's first request), sorted.
    pub fn connections(&self) -> (u64, Vec<(String, connections::ClientConnections)>) {
        (self.inner.connections.total(), self.inner.connections.by_client())
    }

    /// Watch events sent to all watchers so far (bookmarks included) and their bytes.
    pub fn watch_events_sent(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.inner.store.watch_events_sent.load(Relaxed), self.inner.store.watch_bytes_sent.load(Relaxed))
    }

    /// Empties the request log.
    pub fn clear_requests(&self) {
        self.inner.log.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Stops serving and breaks every connection.
    pub async fn shutdown(mut self) {
        for t in &self.tasks {
            t.abort();
        }
        self.inner.break_connections();
        for t in std::mem::take(&mut self.tasks) {
            let _ = t.await;
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}
