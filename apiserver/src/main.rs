//! `zundoko-apiserver`: the in-memory Kubernetes API server, standalone.

use std::path::PathBuf;

use clap::Parser;
use zundoko_apiserver::cost::{self, CostModel};
use zundoko_apiserver::{ApiServer, AuthorizationMode, ServerConfig};

#[derive(Parser, Debug)]
#[command(name = "zundoko-apiserver", about = "In-memory Kubernetes API server for development (plain HTTP on 127.0.0.1)")]
struct Args {
    /// Port on 127.0.0.1 (0 or empty: any free port).
    #[arg(long, default_value_t = 0, num_args = 0..=1, default_missing_value = "0")]
    port: u16,
    /// Where to write the kubeconfig (empty or absent: a temporary file).
    #[arg(long, num_args = 0..=1, default_missing_value = "")]
    kubeconfig_out: Option<String>,
    /// Events kept for watch resume (older resourceVersions get 410 Expired).
    #[arg(long, default_value_t = 4096)]
    history_size: usize,
    /// Seconds between watch bookmarks.
    #[arg(long, default_value_t = 10.0)]
    bookmark_interval: f64,
    /// Which requests are allowed, as kube-apiserver's flag: `AlwaysAllow` (everyone, anything),
    /// or `RBAC` (the kubeconfig's token is the admin in system:masters; others impersonated
    /// by it, as `kubectl --as`; the bootstrap roles `admin`, `edit`, `view`... in place).
    #[arg(long, default_value = "AlwaysAllow", value_parser = ["AlwaysAllow", "RBAC"])]
    authorization_mode: String,
    /// Serve as kube-apiserver alone, as envtest runs it: no kube-controller-manager beside it,
    /// so no garbage collector (a deleted owner's dependents stay), no namespace controller (a
    /// deleted namespace stays Terminating with what is in it) and no ClusterRole aggregation.
    #[arg(long)]
    no_controller_manager: bool,
    /// Fault: fraction of requests answered 500, as VERB=RATE (repeatable; VERB may be *).
    #[arg(long = "error-rate", value_name = "VERB=RATE")]
    error_rates: Vec<String>,
    /// Fault: fraction of requests answered 503, as VERB=RATE (repeatable; VERB may be *).
    #[arg(long = "unavailable-rate", value_name = "VERB=RATE")]
    unavailable_rates: Vec<String>,
    /// Fault: fraction of writes answered 409 Conflict.
    #[arg(long, default_value_t = 0.0)]
    conflict_rate: f64,
    /// Fault: milliseconds of latency added to every request.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// Fault: milliseconds of latency added to the requests of clients whose User-Agent
    /// contains CLIENT, as CLIENT=MS (repeatable).
    #[arg(long = "client-latency", value_name = "CLIENT=MS")]
    client_latencies: Vec<String>,
    /// Fault: fraction of the requests of clients whose User-Agent contains CLIENT answered
    /// 429 with Retry-After SECS (default 1), as CLIENT=RATE[:SECS] (repeatable).
    #[arg(long = "throttle", value_name = "CLIENT=RATE[:SECS]")]
    throttles: Vec<String>,
    /// Fault: drop every open watch every this many seconds.
    #[arg(long)]
    drop_watches_every: Option<f64>,
    /// Charge every request what it would cost a real server (src/cost.rs): `none`, or
    /// `kube-1.32` (calibrated against kube-apiserver v1.32 on 2 cores, docs/benchmarks.md).
    /// The --cost-* flags change one of its parameters (from `none`: from zero, on 1 lane).
    #[arg(long, default_value = "none", value_parser = ["none", "kube-1.32"])]
    cost_model: String,
    /// Cost model: requests served at once (the server's cores).
    #[arg(long)]
    cost_lanes: Option<usize>,
    /// Cost model: microseconds every request costs.
    #[arg(long)]
    cost_base_us: Option<u64>,
    /// Cost model: microseconds per KiB of the object answered (serialising it).
    #[arg(long)]
    cost_per_object_kib_us: Option<u64>,
    /// Cost model: microseconds per KiB of the request's body (decoding, applying a patch).
    #[arg(long)]
    cost_per_body_kib_us: Option<u64>,
    /// Cost model: microseconds per KiB of a written object's managedFields.
    #[arg(long)]
    cost_per_managed_fields_kib_us: Option<u64>,
    /// Cost model: microseconds per open watch a write fans out to.
    #[arg(long)]
    cost_per_watcher_us: Option<u64>,
    /// Cost model: microseconds per KiB of the written object, per open watch it fans out to.
    #[arg(long)]
    cost_per_watcher_kib_us: Option<u64>,
}

impl Args {
    /// The cost model the flags say, if any.
    fn cost_model(&self) -> Option<CostModel> {
        let preset = match self.cost_model.as_str() {
            "kube-1.32" => Some(cost::KUBE_APISERVER_1_32),
            _ => None,
        };
        let tuned = [
            self.cost_base_us,
            self.cost_per_object_kib_us,
            self.cost_per_body_kib_us,
            self.cost_per_managed_fields_kib_us,
            self.cost_per_watcher_us,
            self.cost_per_watcher_kib_us,
        ]
        .iter()
        .any(Option::is_some)
            || self.cost_lanes.is_some();
        let mut m = match (preset, tuned) {
            (Some(m), _) => m,
            (None, true) => cost::FREE,
            (None, false) => return None,
        };
        let us = |flag: Option<u64>, to: &mut std::time::Duration| {
            if let Some(us) = flag {
                *to = std::time::Duration::from_micros(us);
            }
        };
        us(self.cost_base_us, &mut m.base);
        us(self.cost_per_object_kib_us, &mut m.per_object_kib);
        us(self.cost_per_body_kib_us, &mut m.per_body_kib);
        us(self.cost_per_managed_fields_kib_us, &mut m.per_managed_fields_kib);
        us(self.cost_per_watcher_us, &mut m.per_watcher);
        us(self.cost_per_watcher_kib_us, &mut m.per_watcher_kib);
        m.lanes = self.cost_lanes.unwrap_or(m.lanes).max(1);
        Some(m)
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into())).with_writer(std::io::stderr).init();
    let args = Args::parse();
    // Handlers first, so a signal right after the address is printed is handled.
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let path = match args.kubeconfig_out.clone().filter(|p| !p.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => std::env::temp_dir().join(format!("zundoko-apiserver-{}.kubeconfig", std::process::id())),
    };
    // The kubeconfig is written after binding (so the port is known) and before the first
    // connection is accepted.
    let server = ApiServer::start(ServerConfig {
        port: args.port,
        history_size: args.history_size,
        bookmark_interval: std::time::Duration::from_secs_f64(args.bookmark_interval.max(0.01)),
        kubeconfig_out: Some(path.clone()),
        authorization: if args.authorization_mode == "RBAC" { AuthorizationMode::Rbac } else { AuthorizationMode::AlwaysAllow },
        controller_manager: !args.no_controller_manager,
    })
    .await?;
    for spec in &args.error_rates {
        let (verb, rate) = spec.split_once('=').ok_or_else(|| anyhow::anyhow!("--error-rate wants VERB=RATE, got {spec}"))?;
        server.faults().set_error_rate(verb, rate.parse()?);
    }
    for spec in &args.unavailable_rates {
        let (verb, rate) = spec.split_once('=').ok_or_else(|| anyhow::anyhow!("--unavailable-rate wants VERB=RATE, got {spec}"))?;
        server.faults().set_unavailable_rate(verb, rate.parse()?);
    }
    for spec in &args.client_latencies {
        let (client, ms) = spec.split_once('=').ok_or_else(|| anyhow::anyhow!("--client-latency wants CLIENT=MS, got {spec}"))?;
        server.faults().set_client_latency(client, std::time::Duration::from_millis(ms.parse()?));
    }
    for spec in &args.throttles {
        let (client, rest) = spec.split_once('=').ok_or_else(|| anyhow::anyhow!("--throttle wants CLIENT=RATE[:SECS], got {spec}"))?;
        let (rate, secs) = rest.split_once(':').unwrap_or((rest, "1"));
        server.faults().set_throttle(client, rate.parse()?, secs.parse()?);
    }
    server.faults().set_conflict_rate(args.conflict_rate);
    server.faults().set_latency(std::time::Duration::from_millis(args.latency_ms));
    let model = args.cost_model();
    if let Some(m) = &model {
        tracing::info!(model = ?m, "charging every request by the cost model");
    }
    server.cost().set_model(model);
    server.faults().set_watch_drop_every(args.drop_watches_every.map(std::time::Duration::from_secs_f64));
    println!("zundoko-apiserver listening on {}", server.url());
    println!("kubeconfig written to {}", path.display());
    println!("try: KUBECONFIG={} kubectl get namespaces", path.display());
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
    eprintln!("shutting down");
    server.shutdown().await;
    Ok(())
}
