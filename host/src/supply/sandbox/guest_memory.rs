//! The guest memory that interpreter calls hold at once. A CPython call may grow to its
//! budget (48 MiB by default), and the controller makes up to `--concurrency` calls at once:
//! sixteen hostile calls growing to their caps would hold 768 MiB, past the Pod's limit. So
//! calls of WASI modules (off the async workers, on threads of their own) reserve their memory
//! budget first, and wait while the calls in flight already hold the ceiling
//! (`--max-memory-mib`): at most 4 CPython calls at once with the defaults (each reserves its budget plus the virtual WASI's bound), and always at
//! least one. Rust modules' calls (microseconds, 32 MiB caps, mostly made inline) do not wait.

use std::sync::{Condvar, Mutex};

pub struct GuestMemory {
    held: Mutex<usize>,
    freed: Condvar,
}

/// The process's guest memory in flight.
pub static IN_FLIGHT: GuestMemory = GuestMemory { held: Mutex::new(0), freed: Condvar::new() };

/// Memory reserved for one call, given back when dropped.
pub struct Reservation<'a> {
    memory: &'a GuestMemory,
    bytes: usize,
}

impl GuestMemory {
    /// Reserve `bytes` within `ceiling`, waiting for calls in flight to end if need be (a call
    /// alone is never refused: its budget was checked against the ceiling at load).
    pub fn reserve(&self, bytes: usize, ceiling: usize) -> Reservation<'_> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        while *held > 0 && *held + bytes > ceiling {
            held = self.freed.wait(held).unwrap_or_else(|p| p.into_inner());
        }
        *held += bytes;
        Reservation { memory: self, bytes }
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        *self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        *self.memory.held.lock().unwrap_or_else(|p| p.into_inner()) -= self.bytes;
        self.memory.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn calls_in_flight_hold_at_most_the_ceiling_and_one_alone_always_runs() {
        let memory = Arc::new(GuestMemory { held: Mutex::new(0), freed: Condvar::new() });
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
