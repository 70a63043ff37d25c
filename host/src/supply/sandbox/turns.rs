//! A WASI module's turns: at most as many of its calls at once as the node has cores (why:
//! `in_flight.rs`), one count for every caller; and a tenant's modules together, while another
//! tenant's calls run or wait, no more than one module's (`supply/shares.rs`): a tenant with ten
//! slow modules gets the cores' share of a tenant with one, not ten times it.
//!
//! An async caller (`contract/rules.rs` `decide_async`) awaits its turn holding no thread, then
//! makes the call while [`Turn::holding`] it; any other caller (a smoke test, the CLI) waits for
//! its turn on its own thread when the call starts, as the tenant its thread loads for
//! ([`WhoCompiles`]: a rule set's smoke test is its tenant's call). A call counts once either
//! way: a call made while its caller holds the turn takes none.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::compile_queue::WhoCompiles;
use crate::supply::shares::{Share, Shares};
use crate::supply::tenant::Tenant;

thread_local! {
    /// Set while a caller that holds the module's turn makes its call on this thread.
    static HELD_HERE: Cell<bool> = const { Cell::new(false) };
}

/// The turns of every module of an engine, shared between tenants: by module, a number each.
pub type CallShares = Shares<u64>;

/// One module's turns, shared by its clones (another module's calls never wait on them but
/// through its tenant's share).
#[derive(Clone)]
pub struct Turns {
    shares: Arc<CallShares>,
    module: u64,
}

/// A turn an async caller awaited, given back when dropped.
pub struct Turn(#[allow(dead_code, reason = "held for its drop")] Share<u64>);

impl Turns {
    /// `count` turns of a module alone (a test's, the CLI's): a scheduler of its own.
    pub fn new(count: usize) -> Self {
        Turns::of_module(&Shares::new(count, count))
    }

    /// A new module's turns among `shares` (an engine's: every module it loads).
    pub fn of_module(shares: &Arc<CallShares>) -> Self {
        static MODULES: AtomicU64 = AtomicU64::new(0);
        Turns { shares: shares.clone(), module: MODULES.fetch_add(1, Ordering::Relaxed) }
    }

    /// How many calls may run at once.
    pub fn count(&self) -> usize {
        self.shares.per_item()
    }

    /// Await a turn for a call for `tenant` without holding a thread (fair between tenants,
    /// then modules).
    pub async fn acquire(&self, tenant: Tenant) -> Turn {
        Turn(self.shares.acquire(tenant, self.module).await)
    }

    /// The turn of a call about to run on this thread: none if its caller holds one (see
    /// [`Turn::holding`]), else one waited for here.
    pub(super) fn for_call_here(&self) -> Option<Share<u64>> {
        if HELD_HERE.get() {
            return None;
        }
        // A blocking caller: async ones go through `decide_async`, which holds the turn. The
        // shares' channel is runtime-agnostic, so a plain thread may wait on it.
        Some(self.shares.acquire_blocking(WhoCompiles::on_this_thread().tenant(), self.module))
    }
}

impl Turn {
    /// Make `call` (one call of the module whose turn this is) on this thread, as holding the
    /// turn: the call takes no second one.
    pub fn holding<R>(&self, call: impl FnOnce() -> R) -> R {
        /// Clears the mark however `call` ends (a panic is caught further up, and the thread
        /// then makes other calls).
        struct Clear;
        impl Drop for Clear {
            fn drop(&mut self) {
                HELD_HERE.set(false);
            }
        }
        HELD_HERE.set(true);
        let _clear = Clear;
        call()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocking_caller_inside_an_async_task_gets_its_turns_past_the_tasks_budget() {
        // tokio gives a task 128 units of work a poll; each turn taken is one. Blocking callers
        // in a task (simulate's thousands of calls) must not run out of them.
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let turns = Turns::new(1);
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            runtime.block_on(async {
                for _ in 0..1_000 {
                    drop(turns.for_call_here());
                }
            });
            let _ = done.send(());
        });
        finished.recv_timeout(std::time::Duration::from_secs(60)).expect("1,000 turns taken one after another in a task");
    }

    #[test]
    fn a_call_made_holding_a_turn_takes_none_and_the_mark_ends_with_it_even_on_a_panic() {
        let turns = Turns::new(1);
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let turn = runtime.block_on(turns.acquire(Tenant::Cluster));
        // With the only turn held, a call that took a turn of its own would wait forever.
        assert!(turn.holding(|| turns.for_call_here().is_none()), "the caller's turn is the call's");
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| turn.holding(|| panic!("a guest call's panic"))));
        assert!(panicked.is_err());
        drop(turn);
        // Not marked any more: the next call on this thread takes its own turn, the one freed.
        let own = turns.for_call_here();
        assert!(own.is_some(), "a call after the held one takes a turn");
        assert_eq!(turns.shares.held_by(&Tenant::Cluster), 1);
        drop(own);
        assert_eq!(turns.shares.held_by(&Tenant::Cluster), 0, "given back");
    }
}
