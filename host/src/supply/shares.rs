//! Each tenant's share of something held a while by many at once (a module's call turns, a
//! registry's pull permits): at most `per_item` for each item (a module, a registry), and,
//! while another tenant holds or waits for one too, at most `per_tenant` for each tenant's items
//! together. A tenant alone may hold all its items' (as before tenants shared anything); with
//! others about, a tenant with ten modules or ten registries holds no more than one with one.
//!
//! Why a cap and not only an order: what is shared is the node's cores (an interpreter's call is
//! CPU-bound throughout) or its network and memory (a pull buffers a module), and each item's
//! own bound is already as many as are worth running at once: ten of one tenant's modules
//! running their cores' worth each would take ten elevenths of the CPU from a tenant with one.
//!
//! A tenant between two calls (its caller deciding on the last one's plan) still counts as
//! there for the next `LINGER` shares given: else each of its gaps would let a busy tenant take
//! one more than its share, and it would not give it back until that call ended.
//!
//! The next share freed goes to the waiter of the tenant holding fewest, then served longest
//! ago, then, within the tenant, to the item served longest ago, first come among equals: fair
//! between tenants first, then between a tenant's items. Waiting holds no thread for an async
//! caller; a blocking one waits on its own thread.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

use super::tenant::Tenant;

pub struct Shares<K> {
    state: Mutex<State<K>>,
    per_item: usize,
    per_tenant: usize,
}

struct State<K> {
    next_ticket: u64,
    /// Shares given, counted: when each tenant and item last got one.
    served: u64,
    items: HashMap<K, Item>,
    tenants: HashMap<Tenant, Load>,
    /// By arrival.
    waiting: Vec<Waiter<K>>,
    /// Shares given since the start, by tenant (what the metrics show).
    given: HashMap<Tenant, u64>,
}

#[derive(Default)]
struct Item {
    held: usize,
    waiting: usize,
    last_served: u64,
}

#[derive(Default)]
struct Load {
    held: usize,
    waiting: usize,
    last_served: u64,
    /// The count of shares given when it last gave one back.
    last_released: u64,
}

/// How many shares are given after a tenant's last one came back before it counts as gone, per
/// share a tenant may hold.
const LINGER: u64 = 2;

impl Load {
    /// Holding, waiting, or between two calls.
    fn active(&self, served: u64, linger: u64) -> bool {
        self.held + self.waiting > 0 || served.saturating_sub(self.last_released) <= linger
    }
}

struct Waiter<K> {
    ticket: u64,
    tenant: Tenant,
    item: K,
    grant: oneshot::Sender<()>,
}

/// A share held: given back (and the next given) when dropped.
pub struct Share<K: Clone + Eq + Hash> {
    shares: Arc<Shares<K>>,
    tenant: Tenant,
    item: K,
}

impl<K: Clone + Eq + Hash> Shares<K> {
    pub fn new(per_item: usize, per_tenant: usize) -> Arc<Self> {
        let state = State { next_ticket: 0, served: 0, items: HashMap::new(), tenants: HashMap::new(), waiting: Vec::new(), given: HashMap::new() };
        Arc::new(Shares { state: Mutex::new(state), per_item: per_item.max(1), per_tenant: per_tenant.max(1) })
    }

    /// How many of one item's shares are held at once at most.
    pub fn per_item(&self) -> usize {
        self.per_item
    }

    /// Wait for a share of `item` for `tenant`, without holding a thread.
    pub async fn acquire(self: &Arc<Self>, tenant: Tenant, item: K) -> Share<K> {
        let (grant, granted) = oneshot::channel();
        let ticket = {
            let mut state = self.lock();
            let ticket = state.next_ticket;
            state.next_ticket += 1;
            state.tenants.entry(tenant.clone()).or_default().waiting += 1;
            state.items.entry(item.clone()).or_default().waiting += 1;
            state.waiting.push(Waiter { ticket, tenant: tenant.clone(), item: item.clone(), grant });
            self.dispatch(&mut state);
            ticket
        };
        let mut pending = Pending { shares: self, ticket, granted: Some(granted), tenant, item };
        if let Some(granted) = pending.granted.as_mut() {
            // The sender is dropped only once it has sent: held by the waiting list until then.
            let _ = granted.await;
        }
        pending.granted = None;
        let (tenant, item) = (pending.tenant.clone(), pending.item.clone());
        Share { shares: self.clone(), tenant, item }
    }

    /// [`acquire`](Self::acquire) on this thread, blocking it. Unconstrained by tokio's
    /// cooperative budget: a caller blocking inside a task would otherwise spend the task's
    /// budget and then be told to yield forever.
    pub fn acquire_blocking(self: &Arc<Self>, tenant: Tenant, item: K) -> Share<K> {
        futures::executor::block_on(tokio::task::unconstrained(self.acquire(tenant, item)))
    }

    /// Shares `tenant` holds now.
    pub fn held_by(&self, tenant: &Tenant) -> usize {
        self.lock().tenants.get(tenant).map_or(0, |load| load.held)
    }

    /// Shares given since the start, by tenant.
    pub fn given(&self) -> Vec<(Tenant, u64)> {
        self.lock().given.iter().map(|(tenant, given)| (tenant.clone(), *given)).collect()
    }

    /// Shares waited for now.
    pub fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Give shares to whoever may have one now, fairest first.
    fn dispatch(&self, state: &mut State<K>) {
        while let Some(at) = self.next(state) {
            let waiter = state.waiting.remove(at);
            state.served += 1;
            let served = state.served;
            *state.given.entry(waiter.tenant.clone()).or_default() += 1;
            let load = state.tenants.entry(waiter.tenant.clone()).or_default();
            (load.waiting, load.held, load.last_served) = (load.waiting - 1, load.held + 1, served);
            let item = state.items.entry(waiter.item.clone()).or_default();
            (item.waiting, item.held, item.last_served) = (item.waiting - 1, item.held + 1, served);
            if waiter.grant.send(()).is_err() {
                // Its caller is gone (never: `Pending` takes it out of the list first).
                Self::give_back(state, &waiter.tenant, &waiter.item);
            }
        }
        let (served, linger) = (state.served, LINGER * self.per_tenant as u64);
        state.tenants.retain(|_, load| load.active(served, linger));
    }

    /// The waiter whose share is next: within its item's bound and its tenant's, of the tenant
    /// holding fewest, served longest ago, then of its item served longest ago, first come.
    fn next(&self, state: &State<K>) -> Option<usize> {
        let linger = LINGER * self.per_tenant as u64;
        let active = state.tenants.values().filter(|load| load.active(state.served, linger)).count();
        state
            .waiting
            .iter()
            .enumerate()
            .filter(|(_, waiter)| state.items.get(&waiter.item).is_none_or(|item| item.held < self.per_item))
            .filter_map(|(at, waiter)| {
                let load = state.tenants.get(&waiter.tenant)?;
                // Others about: this tenant is one of two or more active.
                let shared = active > 1;
                (!shared || load.held < self.per_tenant).then_some((at, load, waiter))
            })
            .min_by_key(|(_, load, waiter)| {
                let item_served = state.items.get(&waiter.item).map_or(0, |item| item.last_served);
                (load.held, load.last_served, item_served, waiter.ticket)
            })
            .map(|(at, _, _)| at)
    }

    fn give_back(state: &mut State<K>, tenant: &Tenant, item: &K) {
        if let Some(load) = state.tenants.get_mut(tenant) {
            // Kept while it lingers (`dispatch` forgets it after).
            (load.held, load.last_released) = (load.held - 1, state.served);
        }
        if let Some(entry) = state.items.get_mut(item) {
            entry.held -= 1;
            if entry.held + entry.waiting == 0 {
                state.items.remove(item);
            }
        }
    }

    fn release(&self, tenant: &Tenant, item: &K) {
        let mut state = self.lock();
        Self::give_back(&mut state, tenant, item);
        self.dispatch(&mut state);
    }
}

impl<K: Clone + Eq + Hash> Drop for Share<K> {
    fn drop(&mut self) {
        self.shares.release(&self.tenant, &self.item);
    }
}

/// A share waited for: if its caller stops waiting, it leaves the line, or gives back the share
/// it was given meanwhile.
struct Pending<'a, K: Clone + Eq + Hash> {
    shares: &'a Shares<K>,
    ticket: u64,
    granted: Option<oneshot::Receiver<()>>,
    tenant: Tenant,
    item: K,
}

impl<K: Clone + Eq + Hash> Drop for Pending<'_, K> {
    fn drop(&mut self) {
        if self.granted.is_none() {
            return;
        }
        let mut state = self.shares.lock();
        match state.waiting.iter().position(|waiter| waiter.ticket == self.ticket) {
            Some(at) => {
                state.waiting.remove(at);
                // Counted as waiting since it came: no longer.
                let State { tenants, items, .. } = &mut *state;
                if let Some(load) = tenants.get_mut(&self.tenant) {
                    load.waiting -= 1;
                }
                if let Some(item) = items.get_mut(&self.item) {
                    item.waiting -= 1;
                    if item.held + item.waiting == 0 {
                        items.remove(&self.item);
                    }
                }
            }
            // Given while its caller stopped waiting: given back.
            None => Shares::give_back(&mut state, &self.tenant, &self.item),
        }
        self.shares.dispatch(&mut state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;

    fn a() -> Tenant {
        Tenant::Namespace("a".into())
    }

    fn b() -> Tenant {
        Tenant::Namespace("b".into())
    }

    /// A caller waiting for a share, or holding it.
    struct Caller {
        tenant: Tenant,
        waiting: Option<Pin<Box<dyn Future<Output = Share<u32>> + Send>>>,
        share: Option<Share<u32>>,
    }

    impl Caller {
        /// Comes: in line, or holding its share at once.
        fn new(shares: &Arc<Shares<u32>>, tenant: Tenant, item: u32) -> Caller {
            let (shares, for_tenant) = (shares.clone(), tenant.clone());
            let mut caller = Caller { tenant, waiting: Some(Box::pin(async move { shares.acquire(for_tenant, item).await })), share: None };
            caller.holds();
            caller
        }

        /// Whether it holds its share (looking again if not yet).
        fn holds(&mut self) -> bool {
            if let Some(waiting) = self.waiting.as_mut()
                && let Some(share) = futures::executor::block_on(futures::future::poll_immediate(waiting.as_mut()))
            {
                (self.share, self.waiting) = (Some(share), None);
            }
            self.share.is_some()
        }
    }

    #[test]
    fn a_tenant_with_ten_items_holds_no_more_than_one_with_one_while_both_wait() {
        // Two at once per item and per tenant: tenant a has ten items, b one, each with four
        // calls waiting, b's one twelve; b's first comes first, alone.
        let shares = Shares::<u32>::new(2, 2);
        let mut callers = vec![Caller::new(&shares, b(), 100)];
        for _ in 0..4 {
            for item in 0..10 {
                callers.push(Caller::new(&shares, a(), item));
            }
            callers.extend((0..3).map(|_| Caller::new(&shares, b(), 100)));
        }
        // Without the tenants' bound: 20 of a's at once, 2 of b's, a tenth of them.
        assert_eq!((shares.held_by(&a()), shares.held_by(&b())), (2, 2), "both hold their share, b half of them");
        // As shares are given back (the oldest held first), the next go to each tenant in
        // turn: b's calls get half.
        let mut given = HashMap::<Tenant, usize>::new();
        let mut held = std::collections::VecDeque::new();
        for _ in 0..12 {
            for (at, caller) in callers.iter_mut().enumerate() {
                if caller.waiting.is_some() && caller.holds() || caller.share.is_some() && !held.contains(&at) {
                    *given.entry(caller.tenant.clone()).or_default() += 1;
                    held.push_back(at);
                }
            }
            let oldest = held.pop_front().expect("shares held");
            callers[oldest].share = None;
        }
        let (to_a, to_b) = (given[&a()], given[&b()]);
        assert!(to_b >= 4 && to_a <= to_b + 2, "b got {to_b} of {} shares, a {to_a}", to_a + to_b);
        assert!(shares.held_by(&a()) <= 2 && shares.held_by(&b()) <= 2);
    }

    #[test]
    fn a_tenant_alone_holds_every_items_share_and_the_next_tenant_is_served_first() {
        let shares = Shares::<u32>::new(2, 2);
        let alone: Vec<_> = (0..10).flat_map(|item| [Caller::new(&shares, a(), item), Caller::new(&shares, a(), item)]).collect();
        assert_eq!(shares.held_by(&a()), 20, "alone, a tenant is bound by its items only");
        // b comes: it holds a share at once (fewer than a holds), and a's next waits.
        let mut b_first = Caller::new(&shares, b(), 70);
        assert!(b_first.holds(), "b waits behind a");
        let mut a_more = Caller::new(&shares, a(), 11);
        assert!(!a_more.holds(), "a's next waits: it holds more than its share");
        assert_eq!(shares.waiting(), 1);
        drop(alone);
        assert!(a_more.holds(), "a holds less than its share again");
    }

    #[test]
    fn within_a_tenant_the_item_served_longest_ago_goes_first_and_a_waiter_gone_gives_back() {
        let shares = Shares::<u32>::new(1, 1);
        let busy = Caller::new(&shares, b(), 9);
        // b holds one, so a may hold one: item 1 first, then item 1 again and item 2 wait.
        let first = Caller::new(&shares, a(), 1);
        assert!(first.share.is_some());
        let mut again = Caller::new(&shares, a(), 1);
        let mut other = Caller::new(&shares, a(), 2);
        drop(first);
        assert!(other.holds(), "item 2, never served, before item 1 again");
        assert!(!again.holds());
        // A waiter that stops waiting leaves the line and holds nothing.
        drop(again);
        assert_eq!(shares.waiting(), 0);
        // A share given to a caller that stopped waiting before it looked is given back.
        let mut late = Caller::new(&shares, a(), 3);
        assert!(!late.holds());
        drop(other);
        drop(late);
        assert_eq!(shares.held_by(&a()), 0, "given to the late caller, then given back");
        drop(busy);
        assert_eq!(shares.held_by(&b()), 0);
    }
}
