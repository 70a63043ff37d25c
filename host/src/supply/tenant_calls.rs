//! Each tenant's guest calls: how many decisions its modules made and the guest time they took,
//! whatever the language (a Rust module takes no call turn, `sandbox/turns.rs`, but is counted
//! here). The tenant is the owner of the rules that decide (`tenant.rs`), as for the turns.
//!
//! Counted on every decision, thousands a second: a call costs two relaxed atomic adds on its
//! tenant's counters, found without a lock or an allocation. The first [`SLOTS`] tenants seen
//! each claim a slot of a table fixed at the start (found by the tenant's hash, the next free
//! slot on a collision; claimed once, and never given back, as the turns' counts are kept); a
//! tenant past them is counted in a map behind a lock, so that its own figures stay its own.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use super::tenant::Tenant;

/// Tenants counted without a lock: more namespaces than most clusters give rule sets, in 12 KiB.
pub const SLOTS: usize = 256;

/// One tenant's calls and their guest time.
#[derive(Default)]
pub struct CallTally {
    calls: AtomicU64,
    nanos: AtomicU64,
}

impl CallTally {
    /// One call that took `took` (in the sandbox: instance, call and plan check).
    pub fn add(&self, took: Duration) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.nanos.fetch_add(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    fn took(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Relaxed))
    }
}

#[derive(Default)]
struct Slot {
    tenant: OnceLock<Tenant>,
    tally: CallTally,
}

/// Every tenant's calls since the start (an engine's: every module it runs).
pub struct TenantCalls {
    slots: Box<[Slot]>,
    /// Tenants past the table's.
    past: Mutex<HashMap<Tenant, Arc<CallTally>>>,
}

/// A tenant's counters, as [`TenantCalls::of`] found them.
pub enum Counter<'a> {
    Slot(&'a CallTally),
    Past(Arc<CallTally>),
}

impl std::ops::Deref for Counter<'_> {
    type Target = CallTally;

    fn deref(&self) -> &CallTally {
        match self {
            Counter::Slot(tally) => tally,
            Counter::Past(tally) => tally,
        }
    }
}

impl Default for TenantCalls {
    fn default() -> Self {
        Self::with_slots(SLOTS)
    }
}

impl TenantCalls {
    fn with_slots(slots: usize) -> Self {
        TenantCalls { slots: (0..slots.max(1)).map(|_| Slot::default()).collect(), past: Mutex::default() }
    }

    /// `tenant`'s counters: its slot (claimed on its first call), or past the table its entry.
    pub fn of(&self, tenant: &Tenant) -> Counter<'_> {
        // A fixed hash (not a process's random keys): nothing depends on it but the probe.
        let start = BuildHasherDefault::<DefaultHasher>::default().hash_one(tenant) as usize % self.slots.len();
        for at in (start..self.slots.len()).chain(0..start) {
            let slot = &self.slots[at];
            let owner = match slot.tenant.get() {
                Some(owner) => owner,
                // Free: claimed for this tenant, unless another claimed it first.
                None => slot.tenant.get_or_init(|| tenant.clone()),
            };
            if owner == tenant {
                return Counter::Slot(&slot.tally);
            }
        }
        let mut past = self.past.lock().unwrap_or_else(|p| p.into_inner());
        Counter::Past(past.entry(tenant.clone()).or_default().clone())
    }

    /// Calls made and their guest time since the start, by tenant (each that called).
    pub fn counted(&self) -> Vec<(Tenant, u64, Duration)> {
        let mut counted: Vec<_> =
            self.slots.iter().filter_map(|slot| Some((slot.tenant.get()?.clone(), slot.tally.calls(), slot.tally.took()))).collect();
        let past = self.past.lock().unwrap_or_else(|p| p.into_inner());
        counted.extend(past.iter().map(|(tenant, tally)| (tenant.clone(), tally.calls(), tally.took())));
        counted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(name: &str) -> Tenant {
        Tenant::Namespace(name.into())
    }

    fn of(calls: &TenantCalls, tenant: &Tenant) -> (u64, Duration) {
        calls.counted().into_iter().find(|(t, ..)| t == tenant).map_or((0, Duration::ZERO), |(_, n, took)| (n, took))
    }

    #[test]
    fn a_tenants_calls_and_time_go_up_by_what_its_calls_took_and_no_other_tenants_move() {
        // Four slots for six tenants: two are counted past the table, and collisions probe on.
        let calls = TenantCalls::with_slots(4);
        let tenants: Vec<Tenant> = [Tenant::Cluster].into_iter().chain((0..5).map(|i| ns(&format!("team-{i}")))).collect();
        for (i, tenant) in tenants.iter().enumerate() {
            for _ in 0..=i {
                calls.of(tenant).add(Duration::from_micros(100 * (i as u64 + 1)));
            }
        }
        let before: Vec<_> = tenants.iter().map(|t| of(&calls, t)).collect();
        for (i, tenant) in tenants.iter().enumerate() {
            let n = i as u64 + 1;
            assert_eq!(before[i], (n, Duration::from_micros(100 * n * n)), "{tenant}: {n} calls of {} us", 100 * n);
        }
        // team-3 calls again, 2 ms and 7 us: its figures go up by that, nobody else's.
        let team_3 = &tenants[4];
        calls.of(team_3).add(Duration::from_millis(2));
        calls.of(team_3).add(Duration::from_micros(7));
        for (i, tenant) in tenants.iter().enumerate() {
            let expected = if tenant == team_3 { (before[i].0 + 2, before[i].1 + Duration::from_micros(2_007)) } else { before[i] };
            assert_eq!(of(&calls, tenant), expected, "{tenant}");
        }
        assert_eq!(calls.counted().len(), tenants.len(), "each tenant counted once: {:?}", calls.counted().iter().map(|c| c.0.to_string()).collect::<Vec<_>>());
    }

    #[test]
    fn tenants_calling_at_once_from_many_threads_lose_no_call() {
        let calls = Arc::new(TenantCalls::with_slots(8));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let calls = calls.clone();
                std::thread::spawn(move || {
                    for i in 0..1_000 {
                        calls.of(&ns(&format!("team-{}", (t + i) % 4))).add(Duration::from_nanos(3));
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        for i in 0..4 {
            assert_eq!(of(&calls, &ns(&format!("team-{i}"))), (2_000, Duration::from_nanos(6_000)), "team-{i}");
        }
        assert_eq!(calls.counted().len(), 4, "a tenant claims one slot, however many threads race for it");
    }
}
