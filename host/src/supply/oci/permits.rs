//! Pull permits, per registry: at most `--concurrent-pulls` tries at once against any one
//! registry. One bound across every registry let a registry that accepts and never answers (a
//! tarpit a rule-set author points at) hold every permit until its deadline: every other
//! registry's pull waited its own deadline out queued behind it and failed. Per registry, a
//! tarpit holds only its own.
//!
//! And per tenant (`supply/shares.rs`): while another tenant's pulls run or wait, a tenant's
//! registries together get `--concurrent-pulls` tries at once, the next permit going to the
//! tenant holding fewest: a tenant with ten registries gets no more pulls than one with one (a
//! tarpit of its own then holds its own share). A tenant alone keeps every registry's.

use std::sync::Arc;

use crate::supply::shares::{Share, Shares};
use crate::supply::tenant::Tenant;

pub(super) struct Permits {
    /// By registry (`HOST[:PORT]`, lowercase), shared between tenants.
    shares: Arc<Shares<String>>,
}

/// A try's permit, given back when dropped.
pub(super) type Permit = Share<String>;

impl Permits {
    pub(super) fn new(each: usize) -> Self {
        Permits { shares: Shares::new(each, each) }
    }

    /// Tries given since the start, by tenant.
    pub(super) fn given(&self) -> Vec<(Tenant, u64)> {
        self.shares.given()
    }

    /// Wait for a permit for `tenant` to pull from `registry`; held until dropped.
    pub(super) async fn acquire(&self, tenant: Tenant, registry: &str) -> Permit {
        self.shares.acquire(tenant, registry.to_ascii_lowercase()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Poll;

    #[tokio::test]
    async fn a_registry_holding_its_permits_leaves_others_theirs() {
        let permits = Permits::new(2);
        let tarpit = [permits.acquire(Tenant::Cluster, "tarpit.example:5000").await, permits.acquire(Tenant::Cluster, "TARPIT.example:5000").await];
        // Its third try waits; another registry's does not (one bound for all: it would wait).
        let third = permits.acquire(Tenant::Cluster, "tarpit.example:5000");
        tokio::pin!(third);
        assert!(futures::poll!(third.as_mut()).is_pending(), "the tarpit's own bound holds");
        let other = permits.acquire(Tenant::Cluster, "registry.example");
        tokio::pin!(other);
        let Poll::Ready(other) = futures::poll!(other.as_mut()) else { panic!("another registry's pull queued behind the tarpit") };
        drop(tarpit);
        let _third = third.await;
        drop(other);
        assert_eq!(permits.shares.held_by(&Tenant::Cluster), 1);
    }

    #[tokio::test]
    async fn a_tenant_with_ten_registries_pulls_no_more_at_once_than_one_with_one() {
        let permits = Permits::new(2);
        let (a, b) = (Tenant::Namespace("a".into()), Tenant::Namespace("b".into()));
        let _b = permits.acquire(b.clone(), "b.example").await;
        // b pulls: a's ten registries get two tries at once between them, not twenty.
        let registries: Vec<String> = (0..10).map(|r| format!("r{r}.example")).collect();
        let (mut waiting, mut held) = (Vec::new(), Vec::new());
        for registry in &registries {
            for _ in 0..2 {
                let mut try_ = Box::pin(permits.acquire(a.clone(), registry));
                match futures::poll!(try_.as_mut()) {
                    Poll::Ready(permit) => held.push(permit),
                    Poll::Pending => waiting.push(try_),
                }
            }
        }
        assert_eq!((held.len(), permits.shares.held_by(&a)), (2, 2), "a tenant's registries together: its share");
        let mut b_again = Box::pin(permits.acquire(b.clone(), "b.example"));
        assert!(futures::poll!(b_again.as_mut()).is_ready(), "b's second try does not queue behind a's");
    }
}
