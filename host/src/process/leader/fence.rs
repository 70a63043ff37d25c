//! Fencing: the writes of a replica that may have lost its Lease never start, and no request
//! outlives its timeout. Both are wrappers around the kube `Client`, so every write of the
//! controllers (children, statuses, Events, rule set statuses) goes through them, whatever
//! path it takes.
//!
//! A replica leads until (start of its last successful renewal) + renew deadline. A write
//! may start only if it would end, timeout included, before that instant: so at the
//! deadline no write is in flight, and nothing it sent can land after another replica
//! acquires (which happens a full lease duration after it last *saw* the record change).
//! A Lease handed back is taken at once, so its holder closes the fence and then waits until
//! no write it let through is in flight ([`Fence::quiet`]: a request timeout at most) before
//! releasing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use http::{Method, Request};
use kube::Client;
use kube::client::Body;
use tokio::sync::Notify;

/// Until when writes may start. Closed until a term begins.
#[derive(Debug)]
pub struct Fence {
    origin: Instant,
    /// Nanoseconds after `origin` until which this replica leads; 0 = closed, MAX = no election.
    until: AtomicU64,
    /// Writes let through and not yet ended (answered, failed or timed out).
    writes: AtomicUsize,
    /// Told when `writes` drops to 0.
    quiet: Notify,
    /// The longest any request may take (the client's timeout).
    request_timeout: Duration,
}

/// A write let through by the fence, in flight until dropped.
pub struct Writing(Arc<Fence>);

impl Drop for Writing {
    fn drop(&mut self) {
        if self.0.writes.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.quiet.notify_waiters();
        }
    }
}

impl Fence {
    /// A fence that always permits: one process without leader election.
    pub fn open(request_timeout: Duration) -> Arc<Fence> {
        Self::new(u64::MAX, request_timeout)
    }

    /// A closed fence: opened by `lead_until`.
    pub fn closed(request_timeout: Duration) -> Arc<Fence> {
        Self::new(0, request_timeout)
    }

    fn new(until: u64, request_timeout: Duration) -> Arc<Fence> {
        let (writes, quiet) = (AtomicUsize::new(0), Notify::new());
        Arc::new(Fence { origin: Instant::now(), until: AtomicU64::new(until), writes, quiet, request_timeout })
    }

    /// Let a write started at `now` through, if it ends while this replica leads: it is in
    /// flight until the returned guard drops. Counted before the check (SeqCst, as `close`
    /// then `quiet`): a write either finds the fence closed or is waited for by `quiet`.
    pub fn admit(self: &Arc<Self>, now: Instant) -> Option<Writing> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        let writing = Writing(self.clone());
        self.permits(now).then_some(writing)
    }

    /// Resolves once no write let through is in flight. After `close` nothing new is let
    /// through, so from then on the Lease may go to another replica. Every write ends within
    /// the request timeout, so this does too.
    pub async fn quiet(&self) {
        loop {
            let notified = self.quiet.notified();
            if self.writes.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }

    /// This replica leads until `until` (its last renewal's start + renew deadline).
    pub fn lead_until(&self, until: Instant) {
        let nanos = until.saturating_duration_since(self.origin).as_nanos().min(u64::MAX as u128 - 1) as u64;
        self.until.store(nanos.max(1), Ordering::SeqCst);
    }

    pub fn close(&self) {
        self.until.store(0, Ordering::SeqCst);
    }

    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
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
            let _writing = match is_write(&request) {
                true => Some(fence.admit(Instant::now()).ok_or_else(|| Box::new(NotLeading) as tower::BoxError)?),
                false => None,
            };
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

    #[tokio::test]
    async fn quiet_waits_for_every_write_let_through_and_only_those() {
        let fence = Fence::closed(Duration::from_secs(2));
        let now = Instant::now();
        tokio::time::timeout(Duration::from_secs(1), fence.quiet()).await.expect("nothing in flight: quiet at once");
        assert!(fence.admit(now).is_none(), "closed: refused");
        tokio::time::timeout(Duration::from_secs(1), fence.quiet()).await.expect("a refused write is not in flight");
        fence.lead_until(now + Duration::from_secs(10));
        let (first, second) = (fence.admit(now).unwrap(), fence.admit(now).unwrap());
        fence.close();
        let quiet = tokio::spawn({
            let fence = fence.clone();
            async move { fence.quiet().await }
        });
        drop(first);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!quiet.is_finished(), "one write still in flight");
        drop(second);
        tokio::time::timeout(Duration::from_secs(1), quiet).await.expect("quiet once the last write ended").unwrap();
    }
}
