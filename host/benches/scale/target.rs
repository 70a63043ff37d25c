//! Where a run sings: a fresh local API server process (server.rs), or, with
//! `ZUNDOKO_BENCH_KUBECONFIG`, a fresh namespace on the API server it names (real.rs), whose
//! request durations are read from its `/metrics` before and after the songs (promtext.rs).

use super::*;

pub(crate) enum Target {
    Local(Server),
    Real(RealRun),
}

pub(crate) struct RealRun {
    client: Client,
    kubeconfig: PathBuf,
    namespace: RunNamespace,
    /// apiserver_request_duration_seconds as scraped before the songs, or why it could not be.
    before: Option<Result<Vec<Tallied>, String>>,
}

/// A run that cannot start on the real server: said, and the bench ends.
fn refuse(error: RealError) -> ! {
    eprintln!("bench: {error}");
    std::process::exit(2)
}

impl Target {
    /// A fresh place for the run `run`.
    pub(crate) async fn fresh(run: &str, latency_ms: u64) -> Target {
        let Some(cluster) = real_cluster() else { return Target::Local(fresh_server(latency_ms).await) };
        let namespace = cluster.fresh_namespace(run).await.unwrap_or_else(|e| refuse(e));
        Target::Real(RealRun { client: cluster.client.clone(), kubeconfig: cluster.kubeconfig.clone(), namespace, before: None })
    }

    pub(crate) fn client(&self) -> &Client {
        match self {
            Target::Local(server) => &server.client,
            Target::Real(real) => &real.client,
        }
    }

    pub(crate) fn kubeconfig(&self) -> &Path {
        match self {
            Target::Local(server) => &server.kubeconfig,
            Target::Real(real) => &real.kubeconfig,
        }
    }

    pub(crate) fn namespace(&self) -> &str {
        match self {
            Target::Local(_) => NAMESPACE,
            Target::Real(real) => &real.namespace.name,
        }
    }

    /// The operator's flags that keep it to the run's namespace on a shared server: its
    /// Hikawas, its own Events and the ConfigMaps it may read rules from.
    pub(crate) fn operator_args(&self) -> Vec<String> {
        match self {
            Target::Local(_) => Vec::new(),
            Target::Real(real) => ["--namespace", "--operator-namespace", "--rules-namespaces"].iter().flat_map(|flag| [flag.to_string(), real.namespace.name.clone()]).collect(),
        }
    }

    /// The local server's CPU time so far (a remote one's is not ours to read: 0).
    pub(crate) fn cpu(&self) -> f64 {
        match self {
            Target::Local(server) => server.cpu(),
            Target::Real(_) => 0.0,
        }
    }

    /// Just before the first Hikawa: a remote server's request durations so far.
    pub(crate) async fn songs_start(&mut self) {
        if let Target::Real(real) = self {
            real.before = Some(scrape(&real.client).await.map(|text| request_durations(&text)).map_err(|e| e.to_string()));
        }
    }

    /// The run over: the local server stopped and its counts read, or the remote server's
    /// request durations since [`Target::songs_start`] read and the run's namespace deleted.
    pub(crate) async fn finish(self, run: &mut Run) {
        let real = match self {
            Target::Local(server) => return server.finish(run).await,
            Target::Real(real) => real,
        };
        run.remote = true;
        let after = scrape(&real.client).await.map(|text| request_durations(&text)).map_err(|e| e.to_string());
        match (real.before.unwrap_or_else(|| Err("not scraped before the songs".into())), after) {
            (Ok(before), Ok(after)) => run.durations = difference(&before, &after),
            (Err(why), _) | (_, Err(why)) => run.durations_unread = Some(why),
        }
        let name = real.namespace.name.clone();
        match real.namespace.delete(&real.client).await {
            Ok(()) => eprintln!("  [namespace {name} deleted]"),
            Err(e) => eprintln!("  [{e}]"),
        }
    }
}
