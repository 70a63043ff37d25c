//! Fencing: the writes of a replica that may have lost its Lease never start, and no request
//! outlives its timeout. Both are wrappers around the kube `Client`, so every write of the
//! controllers (children, statuses, Events, rule set statuses) goes through them, whatever
//! path it takes.
//!
//! A replica leads until (start of its last successful renewal) + renew deadline. A write
//! may start only if it would end, timeout included, before that instant: so at the
//! deadline no write is in flight, and nothing it sent can land after another replica
//! acquires (which happens a full lease duration after it last *saw* the record change).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http::{Method, Request};
use kube::Client;
use kube::client::Body;

/// Until when writes may start. Closed until a term begins.
#[derive(Debug)]
pub struct Fence {
    origin: Instant,
    /// Nanoseconds after `origin` until which this replica leads; 0 = closed, MAX = no election.
    until: AtomicU64,
    /// The longest any request may take (the client's timeout).
    request_timeout: Duration,
}

impl Fence {
    /// A fence that always permits: one process without leader election.
    pub fn open(request_timeout: Duration) -> Arc<Fence> {
        Arc::new(Fence { origin: Instant::now(), until: AtomicU64::new(u64::MAX), request_timeout })
    }

    /// A closed fence: opened by `lead_until`.
    pub fn closed(request_timeout: Duration) -> Arc<Fence> {
        Arc::new(Fence { origin: Instant::now(), until: AtomicU64::new(0), request_timeout })
    }

    /// This replica leads until `until` (its last renewal's start + renew deadline).
    pub fn lead_until(&self, until: Instant) {
        let nanos = until.saturating_duration_since(self.origin).as_nanos().min(u64::MAX as u128 - 1) as u64;
        self.until.store(nanos.max(1), Ordering::SeqCst);
    }

    pub fn close(&self) {
        self.until.store(0, Ordering::SeqCst);
    }

    /// Whether a request started at `now` ends, at the latest, while this replica leads.
    pub fn permits(&self, now: Instant) -> bool {
        match self.until.load(Ordering::SeqCst) {
            0 => false,
            u64::MAX => true,
            until => (now + self.request_timeout).saturating_duration_since(self.origin).as_nanos() <= until as u128,
        }
    }
}

/// A write refused because this replica may no longer lead when it would land.
#[derive(Debug, thiserror::Error)]
#[error("not leading: a write could land after this replica's renew deadline, so it is not sent")]
pub struct NotLeading;

/// A request that got no answer within the client's timeout.
#[derive(Debug, thiserror::Error)]
#[error("the API server did not answer within {0:?}")]
pub struct RequestTimedOut(pub Duration);

fn is_watch(request: &Request<Body>) -> bool {
    request.uri().query().is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
}

fn is_write(request: &Request<Body>) -> bool {
    !matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS)
}

/// `client` within `fence`: a write is sent only while the fence permits it, and every
/// request but a watch is bounded by the fence's request timeout (retries included: kube
/// retries 429/503 by itself, honouring Retry-After). Watches end by the watcher's own idle
/// timeout. One wrapper for both, so a request takes one more hop, not two.
pub fn guarded(client: Client, fence: Arc<Fence>) -> Client {
    let namespace = client.default_namespace().to_string();
    let service = tower::service_fn(move |request: Request<Body>| {
        let (client, fence) = (client.clone(), fence.clone());
        async move {
            if is_write(&request) && !fence.permits(Instant::now()) {
                return Err(Box::new(NotLeading) as tower::BoxError);
            }
            if is_watch(&request) {
                return client.send(request).await.map_err(tower::BoxError::from);
            }
            match tokio::time::timeout(fence.request_timeout, client.send(request)).await {
                Ok(answer) => answer.map_err(tower::BoxError::from),
                Err(_) => Err(Box::new(RequestTimedOut(fence.request_timeout)) as tower::BoxError),
            }
        }
    });
    Client::new(service, namespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_may_start_only_if_it_ends_before_the_deadline() {
        let fence = Fence::closed(Duration::from_secs(2));
        let now = Instant::now();
        assert!(!fence.permits(now), "closed until a term begins");
        fence.lead_until(now + Duration::from_secs(10));
        assert!(fence.permits(now));
        assert!(fence.permits(now + Duration::from_secs(8)));
        assert!(!fence.permits(now + Duration::from_millis(8001)), "it would still be in flight at the deadline");
        fence.close();
        assert!(!fence.permits(now));
        assert!(Fence::open(Duration::from_secs(2)).permits(now + Duration::from_secs(1_000_000)));
    }
}
