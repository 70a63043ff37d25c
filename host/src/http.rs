//! The operator's HTTP endpoints: `/metrics` (Prometheus text), `/healthz` (liveness: the
//! process serves) and `/readyz` (readiness: a module is loaded and, on the replica that
//! reconciles, the caches are synced; a standby replica is ready to take over).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

use crate::context::RulesSlot;
use crate::metrics::Metrics;

/// What readiness is made of.
pub struct Health {
    rules: Arc<RulesSlot>,
    reconciling: AtomicBool,
    caches_synced: AtomicBool,
}

impl Health {
    pub fn new(rules: Arc<RulesSlot>) -> Self {
        Health { rules, reconciling: AtomicBool::new(false), caches_synced: AtomicBool::new(false) }
    }

    /// The controller started (true) or stopped (false) on this replica.
    pub fn set_reconciling(&self, on: bool) {
        self.reconciling.store(on, Ordering::SeqCst);
        if !on {
            self.caches_synced.store(false, Ordering::SeqCst);
        }
    }

    pub fn set_caches_synced(&self) {
        self.caches_synced.store(true, Ordering::SeqCst);
    }

    /// `Ok` when ready, else what is missing.
    pub fn readiness(&self) -> Result<String, String> {
        let Some(rules) = self.rules.current() else {
            return Err("no rules module loaded yet".into());
        };
        let module = &rules.identity().digest;
        match (self.reconciling.load(Ordering::SeqCst), self.caches_synced.load(Ordering::SeqCst)) {
            (true, true) => Ok(format!("ok: reconciling with {module}")),
            (true, false) => Err("the caches of Zundokos and Kiyoshis are not synced yet".into()),
            (false, _) => Ok(format!("ok: standby with {module}")),
        }
    }
}

#[derive(Clone)]
struct Endpoints {
    health: Arc<Health>,
    metrics: Arc<Metrics>,
}

/// Bind `addr` (port 0 picks one); returns the bound address and the server future.
pub async fn bind(
    addr: SocketAddr,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
) -> std::io::Result<(SocketAddr, impl Future<Output = ()> + Send + 'static)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(Endpoints { health, metrics });
    let server = async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(%error, "the HTTP server stopped");
        }
    };
    Ok((bound, server))
}

async fn metrics_text(State(endpoints): State<Endpoints>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        endpoints.metrics.encode(),
    )
}

async fn ready(State(endpoints): State<Endpoints>) -> impl IntoResponse {
    match endpoints.health.readiness() {
        Ok(why) => (StatusCode::OK, why + "\n"),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why + "\n"),
    }
}
