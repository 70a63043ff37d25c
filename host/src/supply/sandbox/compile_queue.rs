//! Whose module compiles next. One compile at a time (two compiler processes at once would
//! need twice the memory the Pod allows), and a compile may take up to `--compile-timeout-secs`
//! (300 s): first come first served, a rule set that brings a new slow module at every poll
//! would delay every other rule set's module, and every swap of the default module, without
//! bound. So the turns are fair: the default module's first (every Hikawa that names no rules
//! waits on it), then the tenant whose last turn is the oldest (`supply/tenant.rs`: a
//! namespace, or the cluster's rule sets), then its rule set whose last turn is the oldest (one
//! never served first), arrivals in order among equals: a tenant with ten rule sets compiling
//! gets a turn as often as one with one. A compile running is never interrupted: anyone waits
//! for at most the one compile running, one of each other tenant's waiting, and one of each
//! other rule set of its own tenant waiting.
//!
//! Who asks is set by the caller of a load ([`WhoCompiles::around`], the module loader) on the
//! thread that compiles, and read where the compiler process is started
//! (`compiler_process.rs`), so the engine's calls in between need not carry it.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::supply::tenant::Tenant;

/// Who a compile is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WhoCompiles {
    /// The operator's default module (`--module-*`): first in line.
    DefaultModule,
    /// A rule set of a tenant, by its uid.
    RuleSet(Tenant, String),
    /// Neither (the CLI's `check`, a test): a rule set of its own.
    Unnamed,
}

thread_local! {
    /// Who the compiles on this thread are for, while [`WhoCompiles::around`] runs.
    static ASKING: RefCell<WhoCompiles> = const { RefCell::new(WhoCompiles::Unnamed) };
}

impl WhoCompiles {
    /// Run `load` with its compiles (on this thread) queued as `self`'s.
    pub fn around<R>(self, load: impl FnOnce() -> R) -> R {
        let before = ASKING.with(|asking| asking.replace(self));
        let result = load();
        ASKING.with(|asking| asking.replace(before));
        result
    }

    pub(super) fn on_this_thread() -> WhoCompiles {
        ASKING.with(|asking| asking.borrow().clone())
    }

    /// Whose share it takes: the rule set's tenant; the default module and the unnamed are the
    /// cluster's.
    pub fn tenant(&self) -> Tenant {
        match self {
            WhoCompiles::RuleSet(tenant, _) => tenant.clone(),
            WhoCompiles::DefaultModule | WhoCompiles::Unnamed => Tenant::Cluster,
        }
    }

    /// The fairness key within a tenant: rule sets by uid; the unnamed as one more.
    fn key(&self) -> &str {
        match self {
            WhoCompiles::RuleSet(_, uid) => uid,
            WhoCompiles::DefaultModule | WhoCompiles::Unnamed => "",
        }
    }
}

/// The rule sets whose last turn is remembered: past this, the oldest is forgotten (it then
/// counts as never served, which it nearly is).
const REMEMBERED: usize = 4096;

#[derive(Default)]
struct State {
    /// A compile runs.
    busy: bool,
    next_ticket: u64,
    /// Waiting, by arrival: a ticket and who it is for.
    waiting: Vec<(u64, WhoCompiles)>,
    /// Turns given, counted: the count at each rule set's last turn, and at each tenant's.
    turns: u64,
    last_turn: BTreeMap<String, u64>,
    tenant_turn: BTreeMap<Tenant, u64>,
    /// How long each tenant's compiles waited for their turn, since the start.
    waited: BTreeMap<Tenant, std::time::Duration>,
}

impl State {
    /// The ticket whose turn is next: the default module's (first come among them), else the
    /// one of the tenant whose last turn is the oldest, then of its rule set whose last turn is
    /// the oldest (never served: 0), first come among equals.
    fn next(&self) -> Option<u64> {
        if let Some((ticket, _)) = self.waiting.iter().find(|(_, who)| *who == WhoCompiles::DefaultModule) {
            return Some(*ticket);
        }
        let last = |who: &WhoCompiles| {
            let tenant = self.tenant_turn.get(&who.tenant()).copied().unwrap_or(0);
            (tenant, self.last_turn.get(who.key()).copied().unwrap_or(0))
        };
        self.waiting.iter().min_by_key(|(ticket, who)| (last(who), *ticket)).map(|(ticket, _)| *ticket)
    }

    fn take(&mut self, ticket: u64) {
        self.waiting.retain(|(t, _)| *t != ticket);
    }
}

pub struct CompileQueue {
    state: Mutex<State>,
    turn_over: Condvar,
}

/// A compile's turn: the next is given when it is dropped.
pub struct CompileTurn<'a> {
    queue: &'a CompileQueue,
}

impl Drop for CompileTurn<'_> {
    fn drop(&mut self) {
        self.queue.lock().busy = false;
        self.queue.turn_over.notify_all();
    }
}

/// The process's one queue: one compile at a time in the whole process.
pub static COMPILES: CompileQueue = CompileQueue::new();

impl CompileQueue {
    pub const fn new() -> Self {
        CompileQueue {
            state: Mutex::new(State { busy: false, next_ticket: 0, waiting: Vec::new(), turns: 0, last_turn: BTreeMap::new(), tenant_turn: BTreeMap::new(), waited: BTreeMap::new() }),
            turn_over: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait for the turn of a compile for whoever this thread compiles for. Blocking.
    pub fn turn(&self) -> CompileTurn<'_> {
        self.turn_for(WhoCompiles::on_this_thread())
    }

    /// Wait for the turn of a compile for `who`. Blocking.
    pub fn turn_for(&self, who: WhoCompiles) -> CompileTurn<'_> {
        let mut state = self.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        let (key, tenant) = (who.key().to_owned(), who.tenant());
        let came = std::time::Instant::now();
        state.waiting.push((ticket, who));
        while state.busy || state.next() != Some(ticket) {
            state = self.turn_over.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state.take(ticket);
        state.busy = true;
        state.turns += 1;
        let turns = state.turns;
        state.last_turn.insert(key, turns);
        *state.waited.entry(tenant.clone()).or_default() += came.elapsed();
        state.tenant_turn.insert(tenant, turns);
        if state.last_turn.len() > REMEMBERED
            && let Some(oldest) = state.last_turn.iter().min_by_key(|(_, turn)| **turn).map(|(k, _)| k.clone())
        {
            state.last_turn.remove(&oldest);
        }
        if state.tenant_turn.len() > REMEMBERED
            && let Some(oldest) = state.tenant_turn.iter().min_by_key(|(_, turn)| **turn).map(|(k, _)| k.clone())
        {
            state.tenant_turn.remove(&oldest);
        }
        CompileTurn { queue: self }
    }

    /// How long each tenant's compiles waited for their turn, since the start.
    pub fn waited(&self) -> Vec<(Tenant, std::time::Duration)> {
        self.lock().waited.iter().map(|(tenant, waited)| (tenant.clone(), *waited)).collect()
    }

    /// Compiles waiting for their turn.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    /// How many compiles for `who` wait for their turn now.
    pub fn waiting_for(&self, who: &WhoCompiles) -> usize {
        self.lock().waiting.iter().filter(|(_, waiting)| waiting == who).count()
    }
}

impl Default for CompileQueue {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// `who` waits for a turn on its own thread, and says so in `order` when it gets it.
    fn arrive(queue: &Arc<CompileQueue>, order: &Arc<Mutex<Vec<String>>>, who: WhoCompiles, name: &str) -> std::thread::JoinHandle<()> {
        let waiting = queue.waiting();
        let (queue_, order, name) = (queue.clone(), order.clone(), name.to_owned());
        let handle = std::thread::spawn(move || {
            let _turn = who.around(|| queue_.turn());
            order.lock().unwrap().push(name);
        });
        // Arrivals in a known order: the next comes once this one waits.
        while queue.waiting() == waiting {
            std::thread::yield_now();
        }
        handle
    }

    #[test]
    fn the_default_module_goes_first_then_the_rule_set_served_longest_ago() {
        let queue = Arc::new(CompileQueue::new());
        let order = Arc::new(Mutex::new(Vec::new()));
        let hog = || WhoCompiles::RuleSet(Tenant::Cluster, "hog".into());
        // The hog compiles now, and brings another module while it does; then others come.
        let running = queue.turn_for(hog());
        let waiting = [
            arrive(&queue, &order, hog(), "hog again"),
            arrive(&queue, &order, WhoCompiles::RuleSet(Tenant::Cluster, "b".into()), "b"),
            arrive(&queue, &order, WhoCompiles::RuleSet(Tenant::Cluster, "c".into()), "c"),
            arrive(&queue, &order, WhoCompiles::DefaultModule, "default"),
        ];
        assert_eq!(queue.waiting(), 4);
        drop(running);
        for handle in waiting {
            handle.join().unwrap();
        }
        // First come first served would be: hog again, b, c, default.
        assert_eq!(*order.lock().unwrap(), ["default", "b", "c", "hog again"]);
        assert_eq!(queue.waiting(), 0);
    }

    #[test]
    fn tenants_take_turns_first_then_their_rule_sets_and_the_default_module_goes_before_all() {
        let queue = Arc::new(CompileQueue::new());
        let order = Arc::new(Mutex::new(Vec::new()));
        let (a, b) = (Tenant::Namespace("a".into()), Tenant::Namespace("b".into()));
        let running = queue.turn_for(WhoCompiles::RuleSet(a.clone(), "a0".into()));
        // Tenant a brings four more rule sets' modules, then b one, then b another, then the
        // default module comes.
        let mut waiting: Vec<_> = (1..5).map(|i| arrive(&queue, &order, WhoCompiles::RuleSet(a.clone(), format!("a{i}")), &format!("a{i}"))).collect();
        waiting.push(arrive(&queue, &order, WhoCompiles::RuleSet(b.clone(), "b0".into()), "b0"));
        waiting.push(arrive(&queue, &order, WhoCompiles::RuleSet(b.clone(), "b1".into()), "b1"));
        waiting.push(arrive(&queue, &order, WhoCompiles::DefaultModule, "default"));
        drop(running);
        for handle in waiting {
            handle.join().unwrap();
        }
        // Fair by rule set alone: default, a1..a4 (never served), b0, b1: b behind all of a's.
        assert_eq!(*order.lock().unwrap(), ["default", "b0", "a1", "b1", "a2", "a3", "a4"]);
    }

    #[test]
    fn who_asks_is_this_threads_only_while_it_loads() {
        assert_eq!(WhoCompiles::on_this_thread(), WhoCompiles::Unnamed);
        let inside = WhoCompiles::RuleSet(Tenant::Cluster, "uid-1".into()).around(WhoCompiles::on_this_thread);
        assert_eq!(inside, WhoCompiles::RuleSet(Tenant::Cluster, "uid-1".into()));
        assert_eq!(WhoCompiles::on_this_thread(), WhoCompiles::Unnamed);
    }
}
