//! What interpreter calls in flight hold, and wait for while it is spent: the process's guest
//! memory, and each module's share of the cores.
//!
//! Memory: a CPython call may grow to its budget (48 MiB by default), and the controller makes
//! up to `--concurrency` calls at once: sixteen hostile calls growing to their caps would hold
//! 768 MiB, past the Pod's limit. So calls of WASI modules (off the async workers, on threads
//! of their own) reserve their memory budget first, and wait while the calls in flight already
//! hold the ceiling (`--max-memory-mib`): at most 4 CPython calls at once with the defaults
//! (each reserves its budget plus the virtual WASI's bound), and always at least one. Rust
//! modules' calls (microseconds, 32 MiB caps, mostly made inline) do not wait.
//!
//! Cores: an interpreter's call is CPU-bound from its start to its end (it never waits on
//! I/O), so more of one module's calls at once than there are cores finish no sooner; each
//! one only holds another pool slot, and an interpreter's slot keeps its snapshot's pages
//! mapped (about 7 MiB of CPython's) and its instance's host memory (issue 38: eight slots of
//! one Python module at 100 Hikawas on two cores, 145 MiB of RSS). So a WASI module's calls
//! also take a turn of the module's own, at most as many at once as the node has cores
//! (`turns.rs`: awaited without a thread by async callers). The turns are per module: a slow
//! or hostile rule set waits on its own calls, never on another's (and its Hikawas beyond twice
//! its turns wait in its line, not in the controller's slots: `controllers/hikawa/places.rs`);
//! while other tenants' calls run or wait, a tenant's modules together take one module's turns
//! (`supply/shares.rs`), so ten of them get no more of the cores than one.

use std::sync::{Condvar, Mutex};

/// An amount shared by calls in flight: reserved before a call, given back after it.
pub struct InFlight {
    held: Mutex<usize>,
    freed: Condvar,
}

/// The process's guest memory in flight, in bytes.
pub static GUEST_MEMORY: InFlight = InFlight::new();

/// What one call reserved, given back when dropped.
pub struct Reservation<'a> {
    of: &'a InFlight,
    amount: usize,
}

impl InFlight {
    pub const fn new() -> Self {
        InFlight { held: Mutex::new(0), freed: Condvar::new() }
    }

    /// Reserve `amount` within `ceiling`, waiting for calls in flight to end if need be (a call
    /// alone is never refused: its budget was checked against the ceiling at load).
    pub fn reserve(&self, amount: usize, ceiling: usize) -> Reservation<'_> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        while *held > 0 && *held + amount > ceiling {
            held = self.freed.wait(held).unwrap_or_else(|p| p.into_inner());
        }
        *held += amount;
        Reservation { of: self, amount }
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        *self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        *self.of.held.lock().unwrap_or_else(|p| p.into_inner()) -= self.amount;
        self.of.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn calls_in_flight_hold_at_most_the_ceiling_and_one_alone_always_runs() {
        let memory = Arc::new(InFlight::new());
        let (peak, now) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let threads: Vec<_> = (0..12)
            .map(|_| {
                let (memory, peak, now) = (memory.clone(), peak.clone(), now.clone());
                std::thread::spawn(move || {
                    let _held = memory.reserve(48, 256);
                    let in_flight = now.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(in_flight, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    now.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let peak = peak.load(Ordering::SeqCst);
        assert!((1..=5).contains(&peak), "at most 256 / 48 = 5 calls at once, saw {peak}");
        assert_eq!(memory.held(), 0, "all given back");
        // A call asking for more than the ceiling alone still runs (its load was checked).
        drop(memory.reserve(300, 256));
    }
}
