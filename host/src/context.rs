//! What every reconcile is handed: the API client, the caches of children, the current
//! rules, the limits, and the per-Hikawa retry backoff.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::future::{BoxFuture, Shared};
use kube::Client;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::Store;

use crate::crd::{Kiyoshi, Zundoko};
use crate::plan_check::PlanLimits;
use crate::rules::Rules;

pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub rules: Arc<RulesSlot>,
    pub plan_limits: PlanLimits,
    pub zundokos: Store<Zundoko>,
    pub kiyoshis: Store<Kiyoshi>,
    /// Resolves once both child caches hold their first full list.
    pub caches_ready: Shared<BoxFuture<'static, ()>>,
    pub backoff: Backoff,
}

/// The rules currently serving. Swapped atomically: a reconcile takes its `Arc` at the
/// start and finishes on that module whatever happens to the slot meanwhile.
pub struct RulesSlot(RwLock<Arc<dyn Rules>>);

impl RulesSlot {
    pub fn new(rules: Arc<dyn Rules>) -> Self {
        RulesSlot(RwLock::new(rules))
    }

    pub fn current(&self) -> Arc<dyn Rules> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Put `rules` in the slot; returns the rules it replaced.
    pub fn swap(&self, rules: Arc<dyn Rules>) -> Arc<dyn Rules> {
        std::mem::replace(&mut *self.0.write().unwrap_or_else(|p| p.into_inner()), rules)
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
