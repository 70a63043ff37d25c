//! Pull permits, per registry and in all: at most `--concurrent-pulls` tries at once against
//! any one registry, and at most `--max-pulls-in-flight` across every registry. One bound
//! across every registry let a registry that accepts and never answers (a tarpit a rule-set
//! author points at) hold every permit until its deadline: every other registry's pull waited
//! its own deadline out queued behind it and failed. Per registry, a tarpit holds only its
//! own. Per registry alone, N tarpits (N rule sets naming N registries) held N times the
//! permits, each try a connection, a task and up to `--max-module-mib` of layer in memory: the
//! overall cap bounds that, at the price that enough tarpits (the cap over `--concurrent-pulls`
//! of them) again make other registries' pulls wait, each at most one deadline.
//!
//! A try takes its registry's permit first, then one of the overall: a try waiting behind its
//! own registry's permits holds none of the overall ones meanwhile.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// `--max-pulls-in-flight`'s default: two registries at the default `--concurrent-pulls` (2);
/// with `--max-module-mib` at 64, at most 256 MiB of layers held at once.
pub const DEFAULT_MAX_PULLS_IN_FLIGHT: usize = 4;

pub(super) struct Permits {
    /// Tries at once per registry.
    each: usize,
    /// Tries at once in all.
    total: Arc<Semaphore>,
    /// By registry (`HOST[:PORT]`, lowercase); a registry no pull holds or waits for is dropped.
    by_registry: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// A try's permits: its registry's and one of the overall, given back when dropped.
pub(super) struct Permit {
    _registry: OwnedSemaphorePermit,
    _total: OwnedSemaphorePermit,
}

impl Permits {
    pub(super) fn new(each: usize, total: usize) -> Self {
        Permits { each: each.max(1), total: Arc::new(Semaphore::new(total.max(1))), by_registry: Mutex::default() }
    }

    /// Wait for a permit to pull from `registry`, then for one of the overall; held until
    /// dropped. `None` only if a semaphore were closed, which none is: the pull then goes
    /// without.
    pub(super) async fn acquire(&self, registry: &str) -> Option<Permit> {
        let semaphore = {
            let mut by_registry = self.by_registry.lock().unwrap_or_else(|p| p.into_inner());
            // Held by the map alone: no pull holds or waits for a permit of it.
            by_registry.retain(|_, semaphore| Arc::strong_count(semaphore) > 1);
            by_registry.entry(registry.to_ascii_lowercase()).or_insert_with(|| Arc::new(Semaphore::new(self.each))).clone()
        };
        let own = semaphore.acquire_owned().await.ok()?;
        let total = self.total.clone().acquire_owned().await.ok()?;
        Some(Permit { _registry: own, _total: total })
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
        let permits = Permits::new(2, 8);
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

    #[tokio::test]
    async fn many_tarpits_together_hold_no_more_than_the_overall_cap() {
        // Two per registry, five in all: three tarpit registries would hold six without the cap.
        let permits = Permits::new(2, 5);
        let mut held = Vec::new();
        for registry in ["a.example", "a.example", "b.example", "b.example", "c.example"] {
            held.push(permits.acquire(registry).await.expect("a permit"));
        }
        let sixth = permits.acquire("c.example");
        tokio::pin!(sixth);
        assert!(futures::poll!(sixth.as_mut()).is_pending(), "a sixth try in flight past the overall cap of five");
        let elsewhere = permits.acquire("d.example");
        tokio::pin!(elsewhere);
        assert!(futures::poll!(elsewhere.as_mut()).is_pending(), "another registry's try past the overall cap");
        // A try waiting for its own registry's permit holds none of the overall ones: c's
        // third waits on c, and once a's try ends, the first waiting for the overall one goes.
        let c_third = permits.acquire("c.example");
        tokio::pin!(c_third);
        assert!(futures::poll!(c_third.as_mut()).is_pending());
        held.remove(0);
        let Poll::Ready(Some(_sixth)) = futures::poll!(sixth.as_mut()) else { panic!("the first waiting for the overall cap did not go when a try ended") };
        assert!(futures::poll!(elsewhere.as_mut()).is_pending(), "still five in flight");
        assert!(futures::poll!(c_third.as_mut()).is_pending(), "c holds its two");
    }
}
