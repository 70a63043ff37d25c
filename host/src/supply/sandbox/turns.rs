//! A WASI module's turns: at most as many of its calls at once as the node has cores (why:
//! `in_flight.rs`), one count for every caller.
//!
//! An async caller (`contract/rules.rs` `decide_async`) awaits its turn holding no thread, then
//! makes the call while [`Turn::holding`] it; any other caller (a smoke test, the CLI) waits for
//! its turn on its own thread when the call starts. A call counts once either way: a call made
//! while its caller holds the turn takes none.

use std::cell::Cell;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, SemaphorePermit};

thread_local! {
    /// Set while a caller that holds the module's turn makes its call on this thread.
    static HELD_HERE: Cell<bool> = const { Cell::new(false) };
}

/// One module's turns, shared by its clones (another module's calls never wait on them).
#[derive(Clone)]
pub struct Turns {
    free: Arc<Semaphore>,
    count: usize,
}

/// A turn an async caller awaited, given back when dropped.
pub struct Turn(#[allow(dead_code, reason = "held for its drop")] OwnedSemaphorePermit);

impl Turns {
    pub fn new(count: usize) -> Self {
        Turns { free: Arc::new(Semaphore::new(count)), count }
    }

    /// How many calls may run at once.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Await a turn without holding a thread (first come, first served).
    pub async fn acquire(&self) -> Turn {
        // The semaphore is never closed: acquiring fails only on a closed one.
        Turn(self.free.clone().acquire_owned().await.expect("a module's turns are never closed"))
    }

    /// The turn of a call about to run on this thread: none if its caller holds one (see
    /// [`Turn::holding`]), else one waited for here.
    pub(super) fn for_call_here(&self) -> Option<SemaphorePermit<'_>> {
        if HELD_HERE.get() {
            return None;
        }
        // A blocking caller: async ones go through `decide_async`, which holds the turn. tokio's
        // semaphore is runtime-agnostic, so a plain thread may wait on it. Unconstrained by
        // tokio's cooperative budget: a caller that blocks inside a task (the CLI's `simulate`,
        // a test) would otherwise spend the task's budget and then be told to yield forever, a
        // busy loop that never gets its turn.
        let acquire = tokio::task::unconstrained(self.free.acquire());
        Some(futures::executor::block_on(acquire).expect("a module's turns are never closed"))
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
        let turn = runtime.block_on(turns.acquire());
        // With the only turn held, a call that took a turn of its own would wait forever.
        assert!(turn.holding(|| turns.for_call_here().is_none()), "the caller's turn is the call's");
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| turn.holding(|| panic!("a guest call's panic"))));
        assert!(panicked.is_err());
        drop(turn);
        // Not marked any more: the next call on this thread takes its own turn, the one freed.
        let own = turns.for_call_here();
        assert!(own.is_some(), "a call after the held one takes a turn");
        assert_eq!(turns.free.available_permits(), 0);
        drop(own);
        assert_eq!(turns.free.available_permits(), 1, "given back");
    }
}
