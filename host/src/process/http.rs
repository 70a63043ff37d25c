//! The operator's HTTP endpoints: `/metrics` (Prometheus text), `/healthz` (liveness: the
//! process serves) and `/readyz` (readiness: a module is loaded and, on the replica that
//! reconciles, the caches are synced; a standby replica is ready to take over).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

use crate::process::health::Health;
use crate::process::metrics::Metrics;

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
