//! Pull permits, per registry: at most `--concurrent-pulls` tries at once against any one
//! registry. One bound across every registry let a registry that accepts and never answers (a
//! tarpit a rule-set author points at) hold every permit until its deadline: every other
//! registry's pull waited its own deadline out queued behind it and failed. Per registry, a
//! tarpit holds only its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub(super) struct Permits {
    /// Tries at once per registry.
    each: usize,
    /// By registry (`HOST[:PORT]`, lowercase); a registry no pull holds or waits for is dropped.
    by_registry: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl Permits {
    pub(super) fn new(each: usize) -> Self {
        Permits { each: each.max(1), by_registry: Mutex::default() }
    }

    /// Wait for a permit to pull from `registry`; held until dropped. `None` only if the
    /// registry's semaphore were closed, which none is: the pull then goes without.
    pub(super) async fn acquire(&self, registry: &str) -> Option<OwnedSemaphorePermit> {
        let semaphore = {
            let mut by_registry = self.by_registry.lock().unwrap_or_else(|p| p.into_inner());
            // Held by the map alone: no pull holds or waits for a permit of it.
            by_registry.retain(|_, semaphore| Arc::strong_count(semaphore) > 1);
            by_registry.entry(registry.to_ascii_lowercase()).or_insert_with(|| Arc::new(Semaphore::new(self.each))).clone()
        };
        semaphore.acquire_owned().await.ok()
    }

    /// Registries the map holds.
    #[cfg(test)]
    fn registries(&self) -> usize {
        self.by_registry.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Poll;

    #[tokio::test]
    async fn a_registry_holding_its_permits_leaves_others_theirs() {
        let permits = Permits::new(2);
        let tarpit = [permits.acquire("tarpit.example:5000").await, permits.acquire("TARPIT.example:5000").await];
        assert!(tarpit.iter().all(Option::is_some));
        // Its third try waits; another registry's does not (one bound for all: it would wait).
        let third = permits.acquire("tarpit.example:5000");
        tokio::pin!(third);
        assert!(futures::poll!(third.as_mut()).is_pending(), "the tarpit's own bound holds");
        let other = permits.acquire("registry.example");
        tokio::pin!(other);
        let Poll::Ready(Some(other)) = futures::poll!(other.as_mut()) else { panic!("another registry's pull queued behind the tarpit") };
        drop(tarpit);
        assert!(third.await.is_some());
        drop(other);
        // The next pull forgets the registries nobody holds a permit of.
        let _next = permits.acquire("next.example").await;
        assert_eq!(permits.registries(), 1, "registries no pull holds are forgotten");
    }
}
