//! Pull permits, per registry, per tenant and in all: at most `--concurrent-pulls` tries at
//! once against any one registry, and at most `--max-pulls-in-flight` across every registry.
//! One bound across every registry let a registry that accepts and never answers (a tarpit a
//! rule-set author points at) hold every permit until its deadline: every other registry's
//! pull waited its own deadline out queued behind it and failed. Per registry, a tarpit holds
//! only its own. Per registry alone, N tarpits (N rule sets naming N registries) held N times
//! the permits, each try a connection, a task and up to `--max-module-mib` of layer in memory:
//! the overall cap bounds that, at the price that enough tarpits (the cap over
//! `--concurrent-pulls` of them) again make other registries' pulls wait, each at most one
//! deadline.
//!
//! And per tenant (`supply/shares.rs`): while another tenant's pulls run or wait, a tenant's
//! registries together get `--concurrent-pulls` tries at once, the next permit going to the
//! tenant holding fewest: a tenant with ten registries gets no more pulls than one with one (a
//! tarpit of its own then holds its own share). A tenant alone keeps every registry's.
//!
//! A try takes its registry's (and tenant's) permit first, then one of the overall: a try
//! waiting behind its own registry's permits holds none of the overall ones meanwhile.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::supply::shares::{Share, Shares};
use crate::supply::tenant::Tenant;

/// `--max-pulls-in-flight`'s default: two registries at the default `--concurrent-pulls` (2);
/// with `--max-module-mib` at 64, at most 256 MiB of layers held at once.
pub const DEFAULT_MAX_PULLS_IN_FLIGHT: usize = 4;

pub(super) struct Permits {
    /// By registry (`HOST[:PORT]`, lowercase), shared between tenants.
    shares: Arc<Shares<String>>,
    /// Tries at once in all.
    total: Arc<Semaphore>,
}

/// A try's permits: its registry's (within its tenant's share) and one of the overall, given
/// back when dropped.
pub(super) struct Permit {
    _share: Share<String>,
    _total: OwnedSemaphorePermit,
}

impl Permits {
    pub(super) fn new(each: usize, total: usize) -> Self {
        Permits { shares: Shares::new(each, each), total: Arc::new(Semaphore::new(total.max(1))) }
    }

    /// Tries given since the start, by tenant.
    pub(super) fn given(&self) -> Vec<(Tenant, u64)> {
        self.shares.given()
    }

    /// Wait for a permit for `tenant` to pull from `registry`, then for one of the overall;
    /// held until dropped. `None` only if the overall semaphore were closed, which it never
    /// is: the pull then goes without.
    pub(super) async fn acquire(&self, tenant: Tenant, registry: &str) -> Option<Permit> {
        let share = self.shares.acquire(tenant, registry.to_ascii_lowercase()).await;
        let total = self.total.clone().acquire_owned().await.ok()?;
        Some(Permit { _share: share, _total: total })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Poll;

    #[tokio::test]
    async fn a_registry_holding_its_permits_leaves_others_theirs() {
        let permits = Permits::new(2, 8);
        let tarpit = [permits.acquire(Tenant::Cluster, "tarpit.example:5000").await, permits.acquire(Tenant::Cluster, "TARPIT.example:5000").await];
        assert!(tarpit.iter().all(Option::is_some));
        // Its third try waits; another registry's does not (one bound for all: it would wait).
        let third = permits.acquire(Tenant::Cluster, "tarpit.example:5000");
        tokio::pin!(third);
        assert!(futures::poll!(third.as_mut()).is_pending(), "the tarpit's own bound holds");
        let other = permits.acquire(Tenant::Cluster, "registry.example");
        tokio::pin!(other);
        let Poll::Ready(Some(other)) = futures::poll!(other.as_mut()) else { panic!("another registry's pull queued behind the tarpit") };
        drop(tarpit);
        let _third = third.await;
        drop(other);
        assert_eq!(permits.shares.held_by(&Tenant::Cluster), 1);
    }

    #[tokio::test]
    async fn a_tenant_with_ten_registries_pulls_no_more_at_once_than_one_with_one() {
        let permits = Permits::new(2, 64);
        let (a, b) = (Tenant::Namespace("a".into()), Tenant::Namespace("b".into()));
        let _b = permits.acquire(b.clone(), "b.example").await;
        // b pulls: a's ten registries get two tries at once between them, not twenty.
        let registries: Vec<String> = (0..10).map(|r| format!("r{r}.example")).collect();
        let (mut waiting, mut held) = (Vec::new(), Vec::new());
        for registry in &registries {
            for _ in 0..2 {
                let mut try_ = Box::pin(permits.acquire(a.clone(), registry));
                match futures::poll!(try_.as_mut()) {
                    Poll::Ready(permit) => held.push(permit.expect("a permit")),
                    Poll::Pending => waiting.push(try_),
                }
            }
        }
        assert_eq!((held.len(), permits.shares.held_by(&a)), (2, 2), "a tenant's registries together: its share");
        let mut b_again = Box::pin(permits.acquire(b.clone(), "b.example"));
        assert!(futures::poll!(b_again.as_mut()).is_ready(), "b's second try does not queue behind a's");
    }

    #[tokio::test]
    async fn many_tarpits_together_hold_no_more_than_the_overall_cap() {
        // Two per registry, five in all: three tarpit registries would hold six without the cap.
        let permits = Permits::new(2, 5);
        let mut held = Vec::new();
        for registry in ["a.example", "a.example", "b.example", "b.example", "c.example"] {
            held.push(permits.acquire(Tenant::Cluster, registry).await.expect("a permit"));
        }
        let sixth = permits.acquire(Tenant::Cluster, "c.example");
        tokio::pin!(sixth);
        assert!(futures::poll!(sixth.as_mut()).is_pending(), "a sixth try in flight past the overall cap of five");
        let elsewhere = permits.acquire(Tenant::Cluster, "d.example");
        tokio::pin!(elsewhere);
        assert!(futures::poll!(elsewhere.as_mut()).is_pending(), "another registry's try past the overall cap");
        // A try waiting for its own registry's permit holds none of the overall ones: c's
        // third waits on c, and once a's try ends, the first waiting for the overall one goes.
        let c_third = permits.acquire(Tenant::Cluster, "c.example");
        tokio::pin!(c_third);
        assert!(futures::poll!(c_third.as_mut()).is_pending());
        held.remove(0);
        let Poll::Ready(Some(_sixth)) = futures::poll!(sixth.as_mut()) else { panic!("the first waiting for the overall cap did not go when a try ended") };
        assert!(futures::poll!(elsewhere.as_mut()).is_pending(), "still five in flight");
        assert!(futures::poll!(c_third.as_mut()).is_pending(), "c holds its two");
    }
}
