//! What every reconcile is handed: the API client, the caches of children, the current
//! rules, the metrics, the limits, and the per-Hikawa retry backoff.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{self, BoxFuture};
use kube::Client;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::Store;
use tokio::sync::watch;

use crate::crd::{Kiyoshi, Zundoko};
use crate::http::Health;
use crate::metrics::Metrics;
use crate::plan_check::PlanLimits;
use crate::rules::Rules;

/// What lives as long as the process, whichever replica leads: the rules, the metrics, and
/// what readiness is made of.
#[derive(Clone)]
pub struct Shared {
    pub rules: Arc<RulesSlot>,
    pub metrics: Arc<Metrics>,
    pub health: Arc<Health>,
}

impl Shared {
    pub fn new(rules: Arc<RulesSlot>) -> Self {
        let health = Arc::new(Health::new(rules.clone()));
        Shared { rules, metrics: Arc::new(Metrics::new()), health }
    }
}

pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub rules: Arc<RulesSlot>,
    pub metrics: Arc<Metrics>,
    pub plan_limits: PlanLimits,
    pub zundokos: Store<Zundoko>,
    pub kiyoshis: Store<Kiyoshi>,
    /// Resolves once both child caches hold their first full list.
    pub caches_ready: future::Shared<BoxFuture<'static, ()>>,
    pub backoff: Backoff,
}

/// The rules currently serving (none until the first module is accepted). Swapped
/// atomically: a reconcile takes its `Arc` at the start and finishes on that module whatever
/// happens to the slot meanwhile. Subscribers hear of every swap (to reconcile everything).
pub struct RulesSlot(watch::Sender<Option<Arc<dyn Rules>>>);

impl RulesSlot {
    pub fn new(rules: Arc<dyn Rules>) -> Self {
        RulesSlot(watch::Sender::new(Some(rules)))
    }

    /// A slot with nothing serving yet.
    pub fn empty() -> Self {
        RulesSlot(watch::Sender::new(None))
    }

    pub fn current(&self) -> Option<Arc<dyn Rules>> {
        self.0.borrow().clone()
    }

    /// Put `rules` in the slot; returns the rules it replaced.
    pub fn swap(&self, rules: Arc<dyn Rules>) -> Option<Arc<dyn Rules>> {
        self.0.send_replace(Some(rules))
    }

    /// Resolves once some rules are serving.
    pub async fn loaded(&self) -> Arc<dyn Rules> {
        let mut rx = self.0.subscribe();
        let rules = rx.wait_for(Option::is_some).await.expect("the slot owns its sender");
        rules.clone().expect("waited for Some")
    }

    /// One item per swap from now on.
    pub fn swaps(&self) -> impl futures::Stream<Item = ()> + Send + 'static {
        let rx = self.0.subscribe();
        futures::stream::unfold(rx, |mut rx| async move { rx.changed().await.ok().map(|()| ((), rx)) })
    }
}

/// Per-Hikawa exponential backoff after failures: one failing Hikawa retries ever more
/// slowly while the others carry on at full speed. Reset by a success.
pub struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
    pub base: Duration,
    pub max: Duration,
}

impl Backoff {
    pub fn new(base: Duration, max: Duration) -> Self {
        Backoff { failures: Mutex::default(), base, max }
    }

    /// The delay before the next retry of `key`, growing with each failure in a row.
    pub fn next(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let n = failures.entry(key.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        self.base.saturating_mul(1 << (*n - 1).min(20)).min(self.max)
    }

    pub fn reset(&self, key: &str) {
        self.failures.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_per_object_up_to_the_cap_and_resets() {
        let b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let delays: Vec<u128> = (0..6).map(|_| b.next("a").as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(b.next("b").as_millis(), 100, "another object is not slowed");
        b.reset("a");
        assert_eq!(b.next("a").as_millis(), 100);
    }
}
